#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/clock.h>
#include <resil/limit.h>

#include "support/fail_alloc.h"

/* ---- helpers ---- */

#define MAX_EVENTS 64

typedef struct event_log {
	resil_limit_event ev[MAX_EVENTS];
	size_t n;
} event_log;

static void
log_event(const resil_limit_event *ev, void *ctx)
{
	event_log *log = ctx;

	if (log->n < MAX_EVENTS)
		log->ev[log->n] = *ev;
	log->n++;
}

static resil_ratelimit *
mk_rl(resil_manual_clock *mc, uint32_t rate, uint64_t period, uint32_t burst)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit *rl = NULL;
	resil_diag d;

	cfg.rate = rate;
	cfg.period_ns = period;
	cfg.burst = burst;
	cfg.clock = resil_manual_clock_hook(mc);
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, &d), RESIL_OK);
	assert_non_null(rl);
	return rl;
}

static uint64_t
available(resil_ratelimit *rl)
{
	resil_ratelimit_metrics m;

	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	return m.available;
}

/* Take permits one at a time until refused; returns how many. */
static unsigned
drain(resil_ratelimit *rl)
{
	unsigned n = 0;

	while (resil_ratelimit_try_acquire(rl, 1, NULL) == RESIL_OK)
		n++;
	return n;
}

/* ---- rate limiter ---- */

static void
test_limit_ratelimit_permit_exactly_at_period_boundary(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t ra = 0;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	rl = mk_rl(&mc, 1, 10, 1);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 10);

	resil_manual_clock_set(&mc, 1009); /* t - 1 */
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 1);
	resil_manual_clock_set(&mc, 1010); /* t: exactly at the boundary */
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 10);

	/* t + 1: late by one tick; the next permit is due a period after
	 * this one, at 1031 (burst 1 keeps no credit for lateness). */
	resil_manual_clock_set(&mc, 1021);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	resil_manual_clock_set(&mc, 1030);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 1);
	resil_manual_clock_set(&mc, 1031);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_burst_refills_at_period_boundary(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t ra = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl(&mc, 5, 10, 5); /* one permit every 2 ticks */
	assert_int_equal(available(rl), 5);
	assert_int_equal(drain(rl), 5);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 2);
	assert_int_equal(available(rl), 0);

	resil_manual_clock_set(&mc, 9);
	assert_int_equal(available(rl), 4);
	assert_int_equal(drain(rl), 4);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 1);
	resil_manual_clock_set(&mc, 10);
	assert_int_equal(drain(rl), 1);

	/* Drained at 10: four permits back at 19, the fifth at exactly 20. */
	resil_manual_clock_set(&mc, 19);
	assert_int_equal(available(rl), 4);
	resil_manual_clock_set(&mc, 20);
	assert_int_equal(available(rl), 5);
	resil_manual_clock_set(&mc, 21);
	assert_int_equal(available(rl), 5);

	/* Idle time never banks more than the burst. */
	resil_manual_clock_advance(&mc, 100000);
	assert_int_equal(available(rl), 5);
	assert_int_equal(drain(rl), 5);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_fractional_interval_is_exact(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t ra = 0, t;
	unsigned total, got;
	unsigned at[8];
	unsigned nat = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl(&mc, 3, 10, 3); /* one permit every 3 1/3 ticks */
	total = drain(rl);
	assert_int_equal(total, 3);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 4); /* due at 3.33: the next whole tick */

	/* Poll every tick: permits at 4, 7, 10 (3.33, 6.67, 10 rounded up
	 * to whole ticks), and exactly 3 per 10 ticks in the long run. */
	for (t = 1; t <= 1000; t++) {
		resil_manual_clock_set(&mc, t);
		got = drain(rl);
		if (got > 0 && nat < 8)
			at[nat++] = (unsigned)t;
		total += got;
	}
	assert_int_equal(at[0], 4);
	assert_int_equal(at[1], 7);
	assert_int_equal(at[2], 10);
	assert_int_equal(at[3], 14);
	assert_int_equal(at[4], 17);
	assert_int_equal(at[5], 20);
	assert_int_equal(total, 3 + 300);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_weighted_acquire(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t ra = 12345;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl(&mc, 10, 10, 10); /* one permit per tick, burst 10 */
	assert_int_equal(resil_ratelimit_try_acquire(rl, 4, &ra), RESIL_OK);
	assert_int_equal(ra, 12345); /* written only on E_LIMITED */
	assert_int_equal(resil_ratelimit_try_acquire(rl, 4, &ra), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 4, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 2); /* two of four are there */
	assert_int_equal(resil_ratelimit_try_acquire(rl, 2, &ra), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 10, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 10);
	/* More than the burst can never be granted: refused as invalid. */
	ra = 99;
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 11, &ra), RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 0, &ra), RESIL_E_INVAL);
	assert_int_equal(ra, 99);
	resil_manual_clock_advance(&mc, 2);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 2, &ra), RESIL_OK);
	resil_manual_clock_advance(&mc, 10);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 10, &ra), RESIL_OK);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_acquire_wait_sleeps_exactly(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	resil_ratelimit_metrics m;
	uint64_t waited = 777, ra = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl(&mc, 1, 10, 1);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 0, &waited), RESIL_OK);
	assert_int_equal(waited, 0);
	/* The next permit is 10 ticks away: over a max_wait of 9, refused
	 * at once, without sleeping and without writing *waited. */
	waited = 777;
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 9, &waited), RESIL_E_LIMITED);
	assert_int_equal(waited, 777);
	assert_int_equal(resil_manual_clock_now(&mc), 0);
	/* A max_wait of exactly 10 is enough: sleeps 10 (the clock moves). */
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 10, &waited), RESIL_OK);
	assert_int_equal(waited, 10);
	assert_int_equal(resil_manual_clock_now(&mc), 10);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 10);

	/* Reservation: two waits queue one behind the other. */
	resil_manual_clock_set(&mc, 20);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 100, &waited), RESIL_OK);
	assert_int_equal(waited, 10);
	assert_int_equal(resil_manual_clock_now(&mc), 30);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 100, NULL), RESIL_OK);
	assert_int_equal(resil_manual_clock_now(&mc), 40);

	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_calls, 5);
	assert_int_equal(m.granted_permits, 5);
	assert_int_equal(m.waited_calls, 3);
	assert_int_equal(m.rejected_calls, 2);

	/* A huge max_wait is capped internally, not overflowed. */
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, UINT64_MAX, &waited),
	    RESIL_OK);
	assert_int_equal(waited, 10);
	assert_int_equal(resil_manual_clock_now(&mc), 50);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_long_idle_with_a_fine_scale(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t ra = 0;

	(void)state;
	/* rate / gcd = 16777213: one permit every 16777216/16777213 ticks,
	 * the time base moves every ~2^28 ticks. */
	resil_manual_clock_init(&mc, 3);
	rl = mk_rl(&mc, 16777213, UINT64_C(16777216), 5);
	assert_int_equal(drain(rl), 5);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 2); /* due at 1.0000002 ticks */
	resil_manual_clock_advance(&mc, 1);
	assert_int_equal(available(rl), 0);
	resil_manual_clock_advance(&mc, 1);
	assert_int_equal(available(rl), 1);
	/* Idle far past several base moves (and past what the metrics
	 * path computes directly): a full burst, exactly. */
	resil_manual_clock_advance(&mc, UINT64_C(1) << 33);
	assert_int_equal(available(rl), 5);
	assert_int_equal(drain(rl), 5);
	assert_int_equal(available(rl), 0);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 2);
	resil_manual_clock_advance(&mc, UINT64_C(1) << 29);
	assert_int_equal(available(rl), 5);
	resil_manual_clock_advance(&mc, UINT64_C(1) << 20);
	assert_int_equal(drain(rl), 5);
	resil_ratelimit_free(rl);
}

static uint64_t fixed_now;

static uint64_t
fixed_clock_now(void *ctx)
{
	(void)ctx;
	return fixed_now;
}

static void
test_limit_ratelimit_wait_needs_a_clock_that_sleeps(void **state)
{
	resil_clock clk;
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit *rl;
	uint64_t waited = 5;

	(void)state;
	memset(&clk, 0, sizeof(clk));
	clk.now = fixed_clock_now;
	fixed_now = 100;
	cfg.rate = 1;
	cfg.period_ns = 10;
	cfg.burst = 1;
	cfg.clock = &clk;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 1000, &waited), RESIL_OK);
	assert_int_equal(waited, 0);
	assert_int_equal(resil_ratelimit_acquire_wait(rl, 1, 1000, &waited),
	    RESIL_E_LIMITED);
	fixed_now = 110;
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 1000, &waited), RESIL_OK);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_clock_backwards_and_near_max(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t ra = 0;

	(void)state;
	resil_manual_clock_init(&mc, 5000);
	rl = mk_rl(&mc, 1, 10, 1);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	resil_manual_clock_set(&mc, 4990); /* backwards: later permits */
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 20);
	resil_manual_clock_set(&mc, 5010);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	/* Further back, below the limiter's time base: the answer still
	 * covers the way back, so waiting it out is enough, and waiting one
	 * tick less is not (nothing is over-admitted either way). */
	resil_manual_clock_set(&mc, 1000);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 4020);
	resil_manual_clock_set(&mc, 1000 + ra - 1);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 1);
	resil_manual_clock_advance(&mc, 1);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_OK);
	resil_ratelimit_free(rl);

	resil_manual_clock_init(&mc, UINT64_MAX - 100);
	rl = mk_rl(&mc, 1, 10, 2);
	assert_int_equal(drain(rl), 2);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 10);
	resil_manual_clock_advance(&mc, 10);
	assert_int_equal(drain(rl), 1);
	resil_manual_clock_advance(&mc, 1000); /* saturates at UINT64_MAX */
	assert_int_equal(resil_manual_clock_now(&mc), UINT64_MAX);
	assert_int_equal(drain(rl), 2);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 10);
	resil_ratelimit_free(rl);
}

/*
 * A reference GCRA over absolute 128-bit scaled time, written from the
 * formula in limit.h, to compare the library's relative, rebasing state
 * word against.
 */
typedef unsigned __int128 u128;

typedef struct ref_rl {
	u128 tat;
	uint64_t scale, ts, bs;
} ref_rl;

static uint64_t
gcd_u64(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static void
ref_init(
    ref_rl *r, uint32_t rate, uint64_t period, uint32_t burst, uint64_t now)
{
	uint64_t g = gcd_u64(rate, period);

	r->scale = rate / g;
	r->ts = period / g;
	r->bs = burst * r->ts;
	r->tat = (u128)now * r->scale;
}

static int
ref_take(
    ref_rl *r, uint64_t now, uint32_t k, uint64_t max_wait, uint64_t *ticks)
{
	u128 n = (u128)now * r->scale;
	u128 t = r->tat > n ? r->tat : n;
	u128 nt = t + (u128)k * r->ts;
	u128 lim = n + r->bs;
	u128 over = nt > lim ? nt - lim : 0;
	uint64_t wait = (uint64_t)((over + r->scale - 1) / r->scale);

	if (wait <= max_wait) {
		r->tat = nt;
		*ticks = wait;
		return 1;
	}
	*ticks = wait;
	return 0;
}

static void
compare_with_reference(uint32_t rate, uint64_t period, uint32_t burst,
    uint64_t start, uint64_t max_jump, uint64_t seed)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	resil_rng rng;
	ref_rl ref;
	int i, granted = 0, refused = 0;

	resil_manual_clock_init(&mc, start);
	rl = mk_rl(&mc, rate, period, burst);
	ref_init(&ref, rate, period, burst, start);
	resil_rng_seed(&rng, seed);
	for (i = 0; i < 20000; i++) {
		uint64_t r = resil_rng_next(&rng);
		uint32_t k = (uint32_t)((r >> 8) % burst) + 1;
		uint64_t now = resil_manual_clock_now(&mc);
		uint64_t want = 0, got = 424242;
		int ok;

		switch (r & 7) {
		case 0: /* a jump, often across the limiter's time base */
			resil_manual_clock_advance(&mc, (r >> 16) % max_jump);
			break;
		case 1:
		case 2:
			resil_manual_clock_advance(
			    &mc, (r >> 16) % (ref.ts / ref.scale + 2));
			break;
		case 3: { /* acquire_wait with a small bound */
			uint64_t mw = (r >> 20) % (2 * period / rate + 2);

			ok = ref_take(&ref, now, k, mw, &want);
			assert_int_equal(
			    resil_ratelimit_acquire_wait(rl, k, mw, &got),
			    ok ? RESIL_OK : RESIL_E_LIMITED);
			granted += ok;
			refused += !ok;
			if (ok) {
				assert_int_equal(got, want);
				assert_int_equal(
				    resil_manual_clock_now(&mc), now + want);
			}
			break;
		}
		default:
			ok = ref_take(&ref, now, k, 0, &want);
			assert_int_equal(
			    resil_ratelimit_try_acquire(rl, k, &got),
			    ok ? RESIL_OK : RESIL_E_LIMITED);
			granted += ok;
			refused += !ok;
			if (!ok)
				assert_int_equal(got, want);
			break;
		}
	}
	/* The script must exercise both answers to mean anything. */
	assert_true(granted > 1000);
	assert_true(refused > 1000);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_matches_reference_gcra(void **state)
{
	(void)state;
	compare_with_reference(1, 10, 1, 0, 100, 1);
	compare_with_reference(3, 10, 3, 7, 100, 2);
	compare_with_reference(5, 10, 5, 1000, 1000, 3);
	compare_with_reference(7, 1000, 4, UINT64_C(1) << 62, 5000, 4);
	/* rate / gcd = 999983: the time base moves every ~4.5e9 ticks. */
	compare_with_reference(999983, RESIL_NS_PER_SEC, 1000,
	    UINT64_C(123456789012345), UINT64_C(1) << 34, 5);
	/* rate / gcd = 16777213, the scale near its maximum: the time base
	 * moves every ~2^28 ticks, jumps of up to 2^30 cross it often. */
	compare_with_reference(
	    16777213, UINT64_C(16777216), 5, 99, UINT64_C(1) << 30, 6);
	compare_with_reference(16777213, UINT64_C(16777216) * 3, 16777213,
	    UINT64_C(1) << 40, UINT64_C(1) << 31, 7);
}

static void
test_limit_ratelimit_config_errors_name_the_field(void **state)
{
	resil_ratelimit_config cfg;
	resil_ratelimit *rl = (resil_ratelimit *)&cfg; /* sentinel */
	resil_diag d;

	(void)state;
	resil_ratelimit_config_init(&cfg);
	assert_int_equal(resil_ratelimit_config_validate(&cfg, &d), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, NULL), RESIL_OK);

	cfg.period_ns = 0;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "ratelimit.period_ns: 0 must be >= 1");
	assert_ptr_equal(rl, (resil_ratelimit *)&cfg); /* untouched */

	resil_ratelimit_config_init(&cfg);
	cfg.rate = 0;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "ratelimit.rate: 0 must be >= 1");

	resil_ratelimit_config_init(&cfg);
	cfg.burst = 0;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "ratelimit.burst: 0 must be >= 1");

	resil_ratelimit_config_init(&cfg);
	cfg.rate = 16777217; /* 97 * 257 * 673: coprime with 10^9 */
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "ratelimit.rate: 16777217 per period_ns 1000000000 needs a time "
	    "step of 1/16777217 tick, finer than 1/16777216");
	cfg.rate = 16777216; /* 2^24: gcd 2^9, scale 2^15: fine */
	cfg.burst = 1;
	assert_int_equal(resil_ratelimit_config_validate(&cfg, &d), RESIL_OK);

	resil_ratelimit_config_init(&cfg);
	cfg.rate = 1;
	cfg.period_ns = UINT64_C(1) << 41;
	cfg.burst = 512; /* spans exactly 2^50 */
	assert_int_equal(resil_ratelimit_config_validate(&cfg, &d), RESIL_OK);
	cfg.burst = 513;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "ratelimit.burst: 513 is too large for rate 1 per period_ns "
	    "2199023255552 (burst * period_ns / gcd(rate, period_ns) must be "
	    "<= 2^50)");

	resil_ratelimit_config_init(&cfg);
	cfg.size = sizeof(cfg) - 1;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "ratelimit.size: "));

	assert_int_equal(
	    resil_ratelimit_config_validate(NULL, &d), RESIL_E_INVAL);
	resil_ratelimit_config_init(&cfg);
	assert_int_equal(resil_ratelimit_new(NULL, &cfg, &d), RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_new(&rl, NULL, NULL), RESIL_E_INVAL);
}

static void
test_limit_ratelimit_null_arguments(void **state)
{
	resil_ratelimit_metrics m;
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t x;

	(void)state;
	assert_int_equal(
	    resil_ratelimit_try_acquire(NULL, 1, &x), RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(NULL, 1, 5, &x), RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_get_metrics(NULL, &m), RESIL_E_INVAL);
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl(&mc, 1, 1, 1);
	assert_int_equal(resil_ratelimit_get_metrics(rl, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, NULL), RESIL_E_LIMITED);
	resil_ratelimit_free(rl);
	resil_ratelimit_free(NULL);
}

static void
test_limit_ratelimit_rejection_events_and_metrics(void **state)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit_metrics m;
	resil_manual_clock mc;
	resil_ratelimit *rl;
	event_log log;

	(void)state;
	memset(&log, 0, sizeof(log));
	resil_manual_clock_init(&mc, 500);
	cfg.rate = 2;
	cfg.period_ns = 10;
	cfg.burst = 4;
	cfg.listener = log_event;
	cfg.listener_ctx = &log;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 3, NULL), RESIL_OK);
	assert_int_equal(log.n, 0); /* grants are not events */
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 3, NULL), RESIL_E_LIMITED);
	assert_int_equal(log.n, 1);
	assert_int_equal(log.ev[0].type, RESIL_LIMIT_EVENT_REJECTED);
	assert_int_equal(log.ev[0].time, 500);
	assert_int_equal(log.ev[0].permits, 3);
	assert_int_equal(log.ev[0].retry_after, 10);
	assert_int_equal(log.ev[0].limit, 4);
	assert_string_equal(
	    resil_limit_event_name(log.ev[0].type), "rejected");

	resil_manual_clock_advance(&mc, 5);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_calls, 1);
	assert_int_equal(m.granted_permits, 3);
	assert_int_equal(m.rejected_calls, 1);
	assert_int_equal(m.waited_calls, 0);
	assert_int_equal(m.available, 2);
	assert_int_equal(m.rate, 2);
	assert_int_equal(m.burst, 4);
	assert_int_equal(m.period_ns, 10);
	resil_ratelimit_free(rl);
}

static void
test_limit_ratelimit_out_of_memory(void **state)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit *rl = NULL;
	resil_manual_clock mc;
	fail_alloc fa;
	resil_diag d;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.alloc = fail_alloc_init(&fa, 1);
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, &d), RESIL_E_NOMEM);
	assert_null(rl);
	assert_int_equal(fail_alloc_live(&fa), 0);
	cfg.alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, &d), RESIL_OK);
	assert_int_equal(fail_alloc_live(&fa), 1);
	resil_ratelimit_free(rl);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_int_equal(fa.size_mismatch, 0);
}

/* ---- bulkhead ---- */

static resil_bulkhead *
mk_bh(uint32_t n, event_log *log)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh = NULL;

	cfg.max_concurrent = n;
	if (log != NULL) {
		cfg.listener = log_event;
		cfg.listener_ctx = log;
	}
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	return bh;
}

static void
test_limit_bulkhead_rejects_over_limit(void **state)
{
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;

	(void)state;
	bh = mk_bh(2, NULL);
	assert_int_equal(resil_bulkhead_get_limit(bh), 2);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.granted, 3);
	assert_int_equal(m.rejected, 2);
	assert_int_equal(m.released, 1);
	assert_int_equal(m.in_flight, 2);
	assert_int_equal(m.peak_in_flight, 2);
	assert_int_equal(m.limit, 2);
	resil_bulkhead_free(bh);
}

static void
test_limit_bulkhead_release_more_than_acquired_is_misuse(void **state)
{
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;

	(void)state;
	bh = mk_bh(3, NULL);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_complete(bh, RESIL_OUTCOME_SUCCESS, 1), RESIL_OK);
	assert_int_equal(resil_bulkhead_complete(bh, RESIL_OUTCOME_SUCCESS, 1),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);
	assert_int_equal(m.released, 1);
	assert_int_equal(m.good_samples, 1);
	/* The count never went below zero: the limit still holds. */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	resil_bulkhead_free(bh);
}

static void
test_limit_bulkhead_rejection_event(void **state)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_manual_clock mc;
	resil_bulkhead *bh;
	event_log log;

	(void)state;
	memset(&log, 0, sizeof(log));
	resil_manual_clock_init(&mc, 77);
	cfg.max_concurrent = 1;
	cfg.listener = log_event;
	cfg.listener_ctx = &log;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(log.n, 0);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(log.n, 1);
	assert_int_equal(log.ev[0].type, RESIL_LIMIT_EVENT_REJECTED);
	assert_int_equal(log.ev[0].time, 77);
	assert_int_equal(log.ev[0].permits, 1);
	assert_int_equal(log.ev[0].limit, 1);
	assert_int_equal(log.ev[0].old_limit, 1);
	assert_int_equal(log.ev[0].in_flight, 1);
	/* A fixed bulkhead's record counts samples but moves nothing. */
	assert_int_equal(
	    resil_bulkhead_record(bh, RESIL_OUTCOME_FAILURE, 0), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 1);
	assert_int_equal(log.n, 1);
	resil_bulkhead_free(bh);
}

static resil_bulkhead *
mk_adaptive(uint32_t start, uint32_t min, uint32_t max, uint32_t increase,
    uint32_t pct, event_log *log)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh = NULL;
	resil_diag d;

	cfg.max_concurrent = start;
	cfg.adaptive = 1;
	cfg.min_limit = min;
	cfg.max_limit = max;
	cfg.target_latency_ns = 100;
	cfg.increase = increase;
	cfg.backoff_pct = pct;
	cfg.listener = log_event;
	cfg.listener_ctx = log;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, &d), RESIL_OK);
	return bh;
}

static void
test_limit_bulkhead_adaptive_exact_trajectory(void **state)
{
	/* A scripted series of (outcome, latency) and the limit after
	 * each sample, from the formula in limit.h: target 100, limits
	 * 2..6 starting at 4, increase 1, backoff 50%. */
	static const struct {
		resil_outcome o;
		uint64_t latency;
		uint32_t limit;
	} script[] = {
		{ RESIL_OUTCOME_SUCCESS, 10, 4 },
		{ RESIL_OUTCOME_SUCCESS, 99, 4 },
		{ RESIL_OUTCOME_SUCCESS, 100, 4 }, /* == target: good */
		{ RESIL_OUTCOME_SUCCESS, 50, 5 },  /* 4 good of limit 4 */
		{ RESIL_OUTCOME_SUCCESS, 101, 2 }, /* slow: floor(5 / 2) */
		{ RESIL_OUTCOME_FAILURE, 1, 2 },   /* 1 clamped to min 2 */
		{ RESIL_OUTCOME_SUCCESS, 1, 2 },
		{ RESIL_OUTCOME_SUCCESS, 1, 3 },
		{ RESIL_OUTCOME_IGNORED, 9999, 3 },  /* counts neither way */
		{ RESIL_OUTCOME_BUSINESS, 9999, 3 }, /* neither */
		{ RESIL_OUTCOME_SUCCESS, 1, 3 },
		{ RESIL_OUTCOME_SUCCESS, 1, 3 },
		{ RESIL_OUTCOME_SUCCESS, 1, 4 },
		{ RESIL_OUTCOME_SUCCESS, 1, 4 },
		{ RESIL_OUTCOME_SUCCESS, 1, 4 },
		{ RESIL_OUTCOME_SUCCESS, 1, 4 },
		{ RESIL_OUTCOME_FAILURE, 1, 2 }, /* the count restarts */
		{ RESIL_OUTCOME_SUCCESS, 1, 2 },
		{ RESIL_OUTCOME_SUCCESS, 1, 3 },
	};
	static const struct {
		resil_limit_event_type type;
		uint32_t old_limit, limit;
	} want[] = {
		{ RESIL_LIMIT_EVENT_LIMIT_INCREASED, 4, 5 },
		{ RESIL_LIMIT_EVENT_LIMIT_DECREASED, 5, 2 },
		{ RESIL_LIMIT_EVENT_LIMIT_INCREASED, 2, 3 },
		{ RESIL_LIMIT_EVENT_LIMIT_INCREASED, 3, 4 },
		{ RESIL_LIMIT_EVENT_LIMIT_DECREASED, 4, 2 },
		{ RESIL_LIMIT_EVENT_LIMIT_INCREASED, 2, 3 },
	};
	resil_bulkhead_metrics m;
	resil_bulkhead *bh;
	event_log log;
	size_t i;

	(void)state;
	memset(&log, 0, sizeof(log));
	bh = mk_adaptive(4, 2, 6, 1, 50, &log);
	for (i = 0; i < sizeof(script) / sizeof(script[0]); i++) {
		assert_int_equal(
		    resil_bulkhead_record(bh, script[i].o, script[i].latency),
		    RESIL_OK);
		assert_int_equal(
		    resil_bulkhead_get_limit(bh), script[i].limit);
	}
	assert_int_equal(log.n, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < log.n; i++) {
		assert_int_equal(log.ev[i].type, want[i].type);
		assert_int_equal(log.ev[i].old_limit, want[i].old_limit);
		assert_int_equal(log.ev[i].limit, want[i].limit);
	}
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.increases, 4);
	assert_int_equal(m.decreases, 2);
	assert_int_equal(m.good_samples, 14);
	assert_int_equal(m.bad_samples, 3);
	assert_string_equal(
	    resil_limit_event_name(want[0].type), "limit_increased");
	resil_bulkhead_free(bh);
}

static void
test_limit_bulkhead_adaptive_bounds_and_backoff(void **state)
{
	/* backoff 90%: floor(L * 0.9) from 10 steps down by one each bad
	 * sample, to the minimum 1, where it stays. */
	static const uint32_t down[] = { 9, 8, 7, 6, 5, 4, 3, 2, 1, 1 };
	resil_bulkhead *bh;
	event_log log;
	size_t i;
	int j;

	(void)state;
	memset(&log, 0, sizeof(log));
	bh = mk_adaptive(10, 1, 12, 3, 90, &log);
	for (i = 0; i < sizeof(down) / sizeof(down[0]); i++) {
		assert_int_equal(
		    resil_bulkhead_record(bh, RESIL_OUTCOME_FAILURE, 0),
		    RESIL_OK);
		assert_int_equal(resil_bulkhead_get_limit(bh), down[i]);
	}
	assert_int_equal(log.n, 9); /* no event when nothing changed */
	/* Increase 3 per L good samples: 1 -> 4 -> 7 -> 10 -> 12 (cap). */
	assert_int_equal(
	    resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 0), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 4);
	for (j = 0; j < 4; j++)
		resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 0);
	assert_int_equal(resil_bulkhead_get_limit(bh), 7);
	for (j = 0; j < 7; j++)
		resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 0);
	assert_int_equal(resil_bulkhead_get_limit(bh), 10);
	for (j = 0; j < 10; j++)
		resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 0);
	assert_int_equal(resil_bulkhead_get_limit(bh), 12);
	for (j = 0; j < 100; j++)
		resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 0);
	assert_int_equal(resil_bulkhead_get_limit(bh), 12);
	assert_int_equal(
	    resil_bulkhead_record(bh, (resil_outcome)7, 0), RESIL_E_INVAL);
	assert_int_equal(
	    resil_bulkhead_complete(bh, (resil_outcome)7, 0), RESIL_E_INVAL);
	resil_bulkhead_free(bh);
}

static void
test_limit_bulkhead_adaptive_limit_gates_acquire(void **state)
{
	resil_bulkhead *bh;
	event_log log;

	(void)state;
	memset(&log, 0, sizeof(log));
	bh = mk_adaptive(4, 1, 8, 1, 50, &log);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	/* A slow call completes: the limit halves to 2 with 2 in flight. */
	assert_int_equal(
	    resil_bulkhead_complete(bh, RESIL_OUTCOME_SUCCESS, 500), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 2);
	assert_int_equal(log.n, 1);
	assert_int_equal(log.ev[0].type, RESIL_LIMIT_EVENT_LIMIT_DECREASED);
	assert_int_equal(log.ev[0].in_flight, 2);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	resil_bulkhead_free(bh);
}

static void
test_limit_bulkhead_config_errors_name_the_field(void **state)
{
	resil_bulkhead_config cfg;
	resil_bulkhead *bh = (resil_bulkhead *)&cfg; /* sentinel */
	resil_diag d;

	(void)state;
	resil_bulkhead_config_init(&cfg);
	assert_int_equal(resil_bulkhead_config_validate(&cfg, &d), RESIL_OK);
	cfg.max_concurrent = 0;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "bulkhead.max_concurrent: 0 is out of range 1..1073741824");
	assert_ptr_equal(bh, (resil_bulkhead *)&cfg);
	cfg.max_concurrent = RESIL_BULKHEAD_MAX_LIMIT + 1;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);

	/* Adaptive fields are checked only when adaptive is on. */
	resil_bulkhead_config_init(&cfg);
	cfg.min_limit = 0;
	assert_int_equal(resil_bulkhead_config_validate(&cfg, &d), RESIL_OK);
	cfg.adaptive = 1;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "bulkhead.min_limit: 0 is out of range 1..25 (max_concurrent)");
	cfg.min_limit = 26;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "bulkhead.min_limit: 26 is out of range 1..25 (max_concurrent)");

	resil_bulkhead_config_init(&cfg);
	cfg.adaptive = 1;
	cfg.max_limit = 24;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "bulkhead.max_limit: 24 is out of range 25 "
	    "(max_concurrent)..1073741824");

	resil_bulkhead_config_init(&cfg);
	cfg.adaptive = 1;
	cfg.target_latency_ns = 0;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "bulkhead.target_latency_ns: 0 must be >= 1");

	resil_bulkhead_config_init(&cfg);
	cfg.adaptive = 1;
	cfg.increase = 0;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "bulkhead.increase: 0 is out of range 1..200 (max_limit)");

	resil_bulkhead_config_init(&cfg);
	cfg.adaptive = 1;
	cfg.backoff_pct = 100;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "bulkhead.backoff_pct: 100 is out of range 1..99");

	resil_bulkhead_config_init(&cfg);
	cfg.size = 8;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.size: 8 "));
	assert_int_equal(
	    resil_bulkhead_config_validate(NULL, &d), RESIL_E_INVAL);
	resil_bulkhead_config_init(&cfg);
	assert_int_equal(resil_bulkhead_new(NULL, &cfg, &d), RESIL_E_INVAL);
	assert_int_equal(resil_bulkhead_new(&bh, NULL, &d), RESIL_E_INVAL);
}

static void
test_limit_bulkhead_null_arguments_and_oom(void **state)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead_metrics m;
	resil_bulkhead *bh = NULL;
	fail_alloc fa;

	(void)state;
	assert_int_equal(resil_bulkhead_try_acquire(NULL), RESIL_E_INVAL);
	assert_int_equal(resil_bulkhead_release(NULL), RESIL_E_INVAL);
	assert_int_equal(resil_bulkhead_record(NULL, RESIL_OUTCOME_SUCCESS, 0),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_bulkhead_complete(NULL, RESIL_OUTCOME_SUCCESS, 0),
	    RESIL_E_INVAL);
	assert_int_equal(resil_bulkhead_get_metrics(NULL, &m), RESIL_E_INVAL);
	assert_int_equal(resil_bulkhead_get_limit(NULL), 0);
	resil_bulkhead_free(NULL);

	cfg.alloc = fail_alloc_init(&fa, 1);
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_E_NOMEM);
	assert_null(bh);
	assert_int_equal(fail_alloc_live(&fa), 0);
	cfg.alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh, NULL), RESIL_E_INVAL);
	resil_bulkhead_free(bh);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_int_equal(fa.size_mismatch, 0);
}

/* ---- opt-in batches (single thread) ---- */

static resil_ratelimit *
mk_rl_batched(resil_manual_clock *mc, uint32_t rate, uint64_t period,
    uint32_t burst, uint32_t batch)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit *rl = NULL;

	cfg.rate = rate;
	cfg.period_ns = period;
	cfg.burst = burst;
	cfg.clock = resil_manual_clock_hook(mc);
	cfg.batch = batch;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	return rl;
}

static void
test_limit_ratelimit_batch_config(void **state)
{
	resil_ratelimit_config cfg;
	resil_diag d;

	(void)state;
	resil_ratelimit_config_init(&cfg);
	assert_int_equal(cfg.batch, 0); /* exact by default */
	cfg.burst = 10;
	cfg.batch = 10;
	assert_int_equal(resil_ratelimit_config_validate(&cfg, &d), RESIL_OK);
	cfg.batch = 11;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "ratelimit.batch: 11 is out of range 0..10 (the smaller of burst "
	    "and 65536)");
	cfg.burst = 1000000;
	cfg.batch = RESIL_RATELIMIT_MAX_BATCH + 1;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "ratelimit.batch: 65537 is out of range 0..65536 (the smaller of "
	    "burst and 65536)");
}

/*
 * The documented error bound is reached and not passed: a permit taken
 * at 0 fills the cache with batch more; after a long idle the shared
 * state holds a full burst again, so one instant grants burst + batch.
 */
static void
test_limit_ratelimit_batch_bound_after_idle(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	resil_ratelimit_metrics m;
	uint64_t retry = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl_batched(&mc, 1, 10, 8, 4);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), RESIL_OK);
	/* 3 left in the shared state, 4 cached: 7 available. */
	assert_int_equal(available(rl), 7);
	resil_manual_clock_set(&mc, 1000);
	assert_int_equal(available(rl), 12);
	assert_int_equal(drain(rl), 12); /* burst 8 + batch 4 */
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &retry), RESIL_E_LIMITED);
	assert_int_equal(retry, 10);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_calls, 13);
	assert_int_equal(m.granted_permits, 13);
	assert_int_equal(m.rejected_calls, 2);
	assert_int_equal(m.available, 0);
	resil_ratelimit_free(rl);
}

/*
 * Polled every tick for a long run, one thread: from the start the
 * batched limiter never grants more than burst + elapsed * rate (the
 * bound of the exact limiter, which it also never falls below by more
 * than the batch), and weighted acquires are counted right.
 */
static void
test_limit_ratelimit_batch_cumulative_bound(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl, *ex;
	resil_ratelimit_metrics m;
	uint64_t t, got = 0, exact = 0, calls = 0;

	(void)state;
	resil_manual_clock_init(&mc, 5);
	rl = mk_rl_batched(&mc, 3, 10, 6, 5);
	ex = mk_rl(&mc, 3, 10, 6);
	for (t = 5; t < 5 + 20000; t++) {
		uint32_t k = (t % 7 == 0) ? 2 : 1;

		resil_manual_clock_set(&mc, t);
		while (resil_ratelimit_try_acquire(rl, k, NULL) == RESIL_OK) {
			got += k;
			calls++;
		}
		while (resil_ratelimit_try_acquire(ex, k, NULL) == RESIL_OK)
			exact += k;
		assert_true(got <= 6 + (t - 5) * 3 / 10);
		assert_true(got + 5 >= exact);
	}
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_permits, got);
	assert_int_equal(m.granted_calls, calls);
	resil_ratelimit_free(rl);
	resil_ratelimit_free(ex);
}

/* acquire_wait takes from the cache first, and waits exactly otherwise. */
static void
test_limit_ratelimit_batch_acquire_wait(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl;
	uint64_t waited = 99;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	rl = mk_rl_batched(&mc, 1, 10, 4, 2);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), RESIL_OK);
	/* cache 2, shared 1 */
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 2, 0, &waited), RESIL_OK);
	assert_int_equal(waited, 0);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, NULL), RESIL_OK);
	assert_int_equal(available(rl), 0);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 9, &waited), RESIL_E_LIMITED);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 10, &waited), RESIL_OK);
	assert_int_equal(waited, 10);
	assert_int_equal(resil_manual_clock_now(&mc), 10);
	resil_ratelimit_free(rl);
}

static resil_bulkhead *
mk_bh_batched(uint32_t n, uint32_t batch)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh = NULL;

	cfg.max_concurrent = n;
	cfg.batch = batch;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	return bh;
}

static void
test_limit_bulkhead_batch_config(void **state)
{
	resil_bulkhead_config cfg;
	resil_diag d;

	(void)state;
	resil_bulkhead_config_init(&cfg);
	assert_int_equal(cfg.batch, 0);
	cfg.max_concurrent = 4;
	cfg.batch = 4;
	assert_int_equal(resil_bulkhead_config_validate(&cfg, &d), RESIL_OK);
	cfg.batch = 5;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "bulkhead.batch: 5 is out of range 0..4 (max_concurrent)");
	cfg.batch = 2;
	cfg.adaptive = 1;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "bulkhead.batch: 2 must be 0 for an adaptive bulkhead");
}

/* The limit stays exact with leases: 5 of 5, then refused; releases give
 * every slot back, one release too many is misuse. */
static void
test_limit_bulkhead_batch_exact_limit(void **state)
{
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;
	int round, i;

	(void)state;
	bh = mk_bh_batched(5, 2);
	for (round = 0; round < 3; round++) {
		for (i = 0; i < 5; i++)
			assert_int_equal(
			    resil_bulkhead_try_acquire(bh), RESIL_OK);
		assert_int_equal(
		    resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
		assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
		assert_int_equal(m.in_flight, 5);
		for (i = 0; i < 5; i++)
			assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
		assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	}
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.granted, 15);
	assert_int_equal(m.rejected, 3);
	assert_int_equal(m.released, 15);
	assert_int_equal(m.in_flight, 0);
	assert_int_equal(m.peak_in_flight, 5);
	assert_int_equal(m.limit, 5);
	/* record on a fixed batched bulkhead only counts */
	assert_int_equal(
	    resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 1), RESIL_OK);
	resil_bulkhead_free(bh);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_limit_ratelimit_permit_exactly_at_period_boundary),
		cmocka_unit_test(
		    test_limit_ratelimit_burst_refills_at_period_boundary),
		cmocka_unit_test(
		    test_limit_ratelimit_fractional_interval_is_exact),
		cmocka_unit_test(test_limit_ratelimit_weighted_acquire),
		cmocka_unit_test(
		    test_limit_ratelimit_acquire_wait_sleeps_exactly),
		cmocka_unit_test(
		    test_limit_ratelimit_wait_needs_a_clock_that_sleeps),
		cmocka_unit_test(
		    test_limit_ratelimit_clock_backwards_and_near_max),
		cmocka_unit_test(
		    test_limit_ratelimit_long_idle_with_a_fine_scale),
		cmocka_unit_test(test_limit_ratelimit_matches_reference_gcra),
		cmocka_unit_test(
		    test_limit_ratelimit_config_errors_name_the_field),
		cmocka_unit_test(test_limit_ratelimit_null_arguments),
		cmocka_unit_test(
		    test_limit_ratelimit_rejection_events_and_metrics),
		cmocka_unit_test(test_limit_ratelimit_out_of_memory),
		cmocka_unit_test(test_limit_bulkhead_rejects_over_limit),
		cmocka_unit_test(
		    test_limit_bulkhead_release_more_than_acquired_is_misuse),
		cmocka_unit_test(test_limit_bulkhead_rejection_event),
		cmocka_unit_test(
		    test_limit_bulkhead_adaptive_exact_trajectory),
		cmocka_unit_test(
		    test_limit_bulkhead_adaptive_bounds_and_backoff),
		cmocka_unit_test(
		    test_limit_bulkhead_adaptive_limit_gates_acquire),
		cmocka_unit_test(
		    test_limit_bulkhead_config_errors_name_the_field),
		cmocka_unit_test(test_limit_bulkhead_null_arguments_and_oom),
		cmocka_unit_test(test_limit_ratelimit_batch_config),
		cmocka_unit_test(test_limit_ratelimit_batch_bound_after_idle),
		cmocka_unit_test(test_limit_ratelimit_batch_cumulative_bound),
		cmocka_unit_test(test_limit_ratelimit_batch_acquire_wait),
		cmocka_unit_test(test_limit_bulkhead_batch_config),
		cmocka_unit_test(test_limit_bulkhead_batch_exact_limit),
	};

	return cmocka_run_group_tests_name("limit", tests, NULL, NULL);
}

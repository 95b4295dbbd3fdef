/*
 * Keyed families (include/resil/keyed.h): a keyed breaker decides exactly
 * as a lone breaker on the same seeded scripts; a failing key among 10^6
 * churned keys keeps its OPEN state and window; a family capped at 10^4
 * keys fed 10^6 distinct keys stays within its bound, asserted from the
 * allocator hook; the overflow instance and its event; rate limiter
 * overrides (hot values); protection of drained limiters and busy
 * bulkheads; refusals with their messages; allocation failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/keyed.h>

#include "support/fail_alloc.h"

/* An allocator that counts live and peak bytes (malloc underneath). */
typedef struct peak_alloc {
	resil_allocator hook;
	size_t live, peak;
	uint64_t allocs;
} peak_alloc;

static void *
peak_malloc(size_t size, void *ctx)
{
	peak_alloc *pa = ctx;
	void *p = malloc(size);

	if (p != NULL) {
		pa->live += size;
		pa->allocs++;
		if (pa->live > pa->peak)
			pa->peak = pa->live;
	}
	return p;
}

static void
peak_free(void *ptr, size_t size, void *ctx)
{
	peak_alloc *pa = ctx;

	if (ptr == NULL)
		return;
	pa->live -= size;
	free(ptr);
}

static const resil_allocator *
peak_init(peak_alloc *pa)
{
	memset(pa, 0, sizeof(*pa));
	pa->hook.alloc = peak_malloc;
	pa->hook.free = peak_free;
	pa->hook.ctx = pa;
	return &pa->hook;
}

/* Events a listener saw. */
typedef struct seen {
	int n[3];
	resil_keyed_event last;
	char last_key[64];
} seen;

static void
on_event(const resil_keyed_event *ev, void *ctx)
{
	seen *s = ctx;
	size_t n = ev->key_len < sizeof(s->last_key) - 1 ? ev->key_len
	                                                  : sizeof(s->last_key) - 1;

	s->n[ev->type]++;
	s->last = *ev;
	memcpy(s->last_key, ev->key, n);
	s->last_key[n] = '\0';
}

static resil_keyed_config
breaker_family(resil_manual_clock *mc, uint32_t max_keys)
{
	resil_keyed_config cfg = resil_keyed_config_default();

	cfg.max_keys = max_keys;
	cfg.breaker.window_size = 10;
	cfg.breaker.min_calls = 4;
	cfg.breaker.failure_rate_pct = 50;
	cfg.breaker.open_wait_ns = 1000;
	cfg.breaker.permitted_probes = 2;
	cfg.breaker.clock = resil_manual_clock_hook(mc);
	return cfg;
}

static resil_breaker_state
state_of_key(resil_keyed *k, const char *key);

typedef struct got_metrics {
	resil_breaker_metrics m;
	int found;
} got_metrics;

static void
read_breaker(const void *key, size_t len, const resil_keyed_instance *in,
    void *ctx)
{
	got_metrics *g = ctx;

	(void)key;
	(void)len;
	assert_int_equal(in->kind, RESIL_KEYED_BREAKER);
	assert_int_equal(resil_breaker_get_metrics(in->breaker, &g->m), RESIL_OK);
	g->found = 1;
}

static got_metrics
metrics_of_key(resil_keyed *k, const char *key)
{
	got_metrics g;

	memset(&g, 0, sizeof(g));
	(void)resil_keyed_with(k, key, strlen(key), read_breaker, &g);
	return g;
}

static resil_breaker_state
state_of_key(resil_keyed *k, const char *key)
{
	got_metrics g = metrics_of_key(k, key);

	assert_true(g.found);
	return g.m.state;
}

/* Seeded scripts over 8 keys: each step picks a key and acquires, then
 * records a success, a failure, a slow or ignored outcome or releases,
 * sometimes holding the permit over later steps; time moves on. Every
 * answer and every state of the keyed family equals that of 8 lone
 * breakers given the same script. */
#define NKEYS 8
#define HELD 4

static void
run_script(uint64_t seed, int time_window)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed *k = NULL;
	resil_breaker *lone[NKEYS];
	resil_keyed_permit kp[HELD];
	resil_permit lp[HELD];
	int held_key[HELD];
	resil_rng rng;
	char key[16];
	int i, step;

	resil_manual_clock_init(&mc, 5);
	cfg = breaker_family(&mc, NKEYS);
	cfg.breaker.slow_threshold_ns = time_window ? 0 : 50;
	cfg.breaker.slow_rate_pct = time_window ? 0 : 80;
	if (time_window) {
		cfg.breaker.window_type = RESIL_WINDOW_TIME;
		cfg.breaker.window_size = 5;
		cfg.breaker.bucket_ns = 100;
		cfg.breaker.consecutive_failures = 3;
	}
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < NKEYS; i++)
		assert_int_equal(resil_breaker_new(&lone[i], &cfg.breaker, NULL),
		    RESIL_OK);
	for (i = 0; i < HELD; i++)
		held_key[i] = -1;
	resil_rng_seed(&rng, seed);
	for (step = 0; step < 3000; step++) {
		uint64_t r = resil_rng_next(&rng);
		int ki = (int)(r % NKEYS), h = (int)((r >> 8) % HELD);
		unsigned what = (unsigned)((r >> 16) % 10);
		resil_outcome o = what < 5 ? RESIL_OUTCOME_SUCCESS
		    : what < 8             ? RESIL_OUTCOME_FAILURE
		                           : RESIL_OUTCOME_IGNORED;
		resil_err e1, e2;

		snprintf(key, sizeof(key), "k%d", ki);
		if (held_key[h] >= 0) {
			/* End the held call first. */
			if (what == 9) {
				e1 = resil_keyed_breaker_release(k, &kp[h]);
				e2 = resil_breaker_release(
				    lone[held_key[h]], &lp[h]);
			} else {
				e1 = resil_keyed_breaker_record(k, &kp[h], o);
				e2 = resil_breaker_record(
				    lone[held_key[h]], &lp[h], o);
			}
			assert_int_equal(e1, e2);
			held_key[h] = -1;
		}
		e1 = resil_keyed_breaker_acquire(k, key, strlen(key), &kp[h]);
		e2 = resil_breaker_acquire(lone[ki], &lp[h]);
		if (e1 != e2)
			fail_msg("seed %llu step %d key %d: keyed %d lone %d",
			    (unsigned long long)seed, step, ki, e1, e2);
		if (e1 == RESIL_OK) {
			if ((r >> 24) % 3 == 0)
				held_key[h] = ki; /* ends at a later step */
			else {
				uint64_t d = (r >> 32) % 100;

				assert_int_equal(
				    resil_keyed_breaker_record_duration(
				        k, &kp[h], o, d),
				    resil_breaker_record_duration(
				        lone[ki], &lp[h], o, d));
			}
		}
		resil_manual_clock_advance(&mc, (r >> 40) % 40);
		assert_int_equal(state_of_key(k, key),
		    resil_breaker_get_state(lone[ki]));
	}
	for (i = 0; i < HELD; i++)
		if (held_key[i] >= 0) {
			resil_keyed_breaker_release(k, &kp[i]);
			resil_breaker_release(lone[held_key[i]], &lp[i]);
		}
	for (i = 0; i < NKEYS; i++) {
		got_metrics g;
		resil_breaker_metrics lm;

		snprintf(key, sizeof(key), "k%d", i);
		g = metrics_of_key(k, key);
		assert_true(g.found);
		assert_int_equal(resil_breaker_get_metrics(lone[i], &lm),
		    RESIL_OK);
		assert_int_equal(g.m.transitions, lm.transitions);
		assert_int_equal(g.m.failures, lm.failures);
		assert_int_equal(g.m.successes, lm.successes);
		assert_int_equal(g.m.rejections, lm.rejections);
		assert_int_equal(g.m.window_failures, lm.window_failures);
		resil_breaker_free(lone[i]);
	}
	resil_keyed_free(k);
}

static void
test_keyed_breaker_decides_as_lone(void **state)
{
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= 40; seed++) {
		run_script(seed, 0);
		run_script(seed * 7919, 1);
	}
}

/* Trip key "bad" (OPEN) and give "warm" one failure (CLOSED, window holds
 * it); then 10^6 distinct keys, each used once, go through a family of
 * 10^4. Neither is evicted: "bad" is still OPEN with the same window and
 * transitions, "warm" still holds its failure. Peak memory from the
 * allocator hook stays within the family's bound, and the bound within
 * 10^4 instances and keys. */
static void
test_keyed_failing_key_survives_churn(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_metrics km;
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	got_metrics before, after, warm;
	peak_alloc pa;
	char key[32];
	uint32_t i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 10000);
	cfg.max_key_len = RESIL_KEYED_INLINE_KEY; /* keys kept inline */
	cfg.alloc = peak_init(&pa);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 4; i++) {
		assert_int_equal(
		    resil_keyed_breaker_acquire(k, "bad", 3, &p), RESIL_OK);
		assert_int_equal(resil_keyed_breaker_record(
		                     k, &p, RESIL_OUTCOME_FAILURE),
		    RESIL_OK);
	}
	assert_int_equal(state_of_key(k, "bad"), RESIL_BREAKER_OPEN);
	assert_int_equal(resil_keyed_breaker_acquire(k, "warm", 4, &p), RESIL_OK);
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_FAILURE), RESIL_OK);
	before = metrics_of_key(k, "bad");
	for (i = 0; i < 1000000; i++) {
		int n = snprintf(key, sizeof(key), "host-%u", i);

		assert_int_equal(
		    resil_keyed_breaker_acquire(k, key, (size_t)n, &p),
		    RESIL_OK);
		assert_int_equal(resil_keyed_breaker_record(
		                     k, &p, RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
	after = metrics_of_key(k, "bad");
	assert_true(after.found);
	assert_int_equal(after.m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(after.m.transitions, before.m.transitions);
	assert_int_equal(after.m.window_failures, before.m.window_failures);
	assert_int_equal(after.m.window_calls, before.m.window_calls);
	assert_int_equal(after.m.failures, 4);
	warm = metrics_of_key(k, "warm");
	assert_true(warm.found);
	assert_int_equal(warm.m.window_failures, 1);
	/* Still rejected: the churn reset nothing. */
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, "bad", 3, &p), RESIL_E_OPEN);

	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.keys, 10000);
	assert_int_equal(km.created, 1000002);
	assert_int_equal(km.evicted, 1000002 - 10000);
	assert_int_equal(km.overflowed, 0);
	/* The family counts what the hook holds (but its own struct's
	 * allocation, counted too). */
	assert_int_equal(km.bytes, pa.live);
	assert_true(pa.peak <= km.bytes_bound);
	/* And the bound is the one documented: 10^4 instances of about
	 * 1.2 KiB (breaker, count window of 10 here) plus the fixed part. */
	assert_true(km.instance_bytes < 1400);
	assert_int_equal(km.bytes_bound,
	    10000 * km.instance_bytes + km.bytes_fixed);
	assert_true(km.bytes_fixed < 10000 * (128 + 4 + 32) + 4096);
	print_message("keyed: %u keys, %llu bytes (fixed %llu, instance %llu,"
	              " %.1f bytes per key), peak %zu, bound %llu\n",
	    km.keys, (unsigned long long)km.bytes,
	    (unsigned long long)km.bytes_fixed,
	    (unsigned long long)km.instance_bytes,
	    (double)km.bytes / km.keys, pa.peak,
	    (unsigned long long)km.bytes_bound);
	resil_keyed_free(k);
	assert_int_equal(pa.live, 0);
}

/* Every key protected (OPEN): a new key gets the overflow instance, with
 * an event naming it; it is not remembered; once a key closes again (a
 * reset) and is idle, a new key takes its place. */
static void
test_keyed_overflow_when_every_key_is_protected(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_metrics km;
	resil_keyed_instance ov;
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	seen sn;
	char key[8];
	int i, j;

	(void)state;
	memset(&sn, 0, sizeof(sn));
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 3);
	cfg.listener = on_event;
	cfg.listener_ctx = &sn;
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		for (j = 0; j < 4; j++) {
			assert_int_equal(resil_keyed_breaker_acquire(
			                     k, key, strlen(key), &p),
			    RESIL_OK);
			resil_keyed_breaker_record(
			    k, &p, RESIL_OUTCOME_FAILURE);
		}
		assert_int_equal(state_of_key(k, key), RESIL_BREAKER_OPEN);
	}
	assert_int_equal(sn.n[RESIL_KEYED_EVENT_CREATED], 3);
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, "new", 3, &p), RESIL_OK);
	assert_int_equal(sn.n[RESIL_KEYED_EVENT_OVERFLOW], 1);
	assert_string_equal(sn.last_key, "new");
	assert_int_equal(sn.last.keys, 3);
	assert_int_equal(resil_keyed_overflow(k, &ov), RESIL_OK);
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	{
		resil_breaker_metrics m;

		assert_int_equal(
		    resil_breaker_get_metrics(ov.breaker, &m), RESIL_OK);
		assert_int_equal(m.successes, 1);
	}
	assert_int_equal(resil_keyed_with(k, "new", 3, read_breaker, NULL),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.overflowed, 1);
	assert_int_equal(km.keys, 3);
	assert_int_equal(km.evicted, 0);
	resil_keyed_free(k);
}

static void
reset_it(const void *key, size_t len, const resil_keyed_instance *in,
    void *ctx)
{
	(void)key;
	(void)len;
	(void)ctx;
	assert_int_equal(resil_breaker_reset(in->breaker), RESIL_OK);
}

/* A key made fresh again (a reset) can be evicted: the next new key
 * takes its place and the EVICTED event names it. */
static void
test_keyed_reset_key_is_evictable(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	seen sn;
	int j;

	(void)state;
	memset(&sn, 0, sizeof(sn));
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 1);
	cfg.listener = on_event;
	cfg.listener_ctx = &sn;
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (j = 0; j < 4; j++) {
		assert_int_equal(
		    resil_keyed_breaker_acquire(k, "a", 1, &p), RESIL_OK);
		resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_FAILURE);
	}
	assert_int_equal(resil_keyed_breaker_acquire(k, "b", 1, &p), RESIL_OK);
	resil_keyed_breaker_release(k, &p);
	assert_int_equal(sn.n[RESIL_KEYED_EVENT_OVERFLOW], 1);
	assert_int_equal(resil_keyed_with(k, "a", 1, reset_it, NULL), RESIL_OK);
	assert_int_equal(resil_keyed_breaker_acquire(k, "b", 1, &p), RESIL_OK);
	assert_int_equal(sn.n[RESIL_KEYED_EVENT_EVICTED], 1);
	assert_int_equal(sn.n[RESIL_KEYED_EVENT_CREATED], 2);
	assert_string_equal(sn.last_key, "b");
	/* A permit out holds its key: "c" overflows while b's is out. */
	{
		resil_keyed_permit q;

		assert_int_equal(
		    resil_keyed_breaker_acquire(k, "c", 1, &q), RESIL_OK);
		assert_int_equal(sn.n[RESIL_KEYED_EVENT_OVERFLOW], 2);
		resil_keyed_breaker_release(k, &q);
	}
	resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS);
	resil_keyed_free(k);
}

/* Rate limiter family: a default of 2 permits per key, and VIP with 1000
 * (Sentinel's hot-parameter exception). A drained key is protected: 10^4
 * churned keys do not give it its burst back. */
static void
test_keyed_ratelimit_overrides_and_protection(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_override ov;
	resil_keyed_metrics km;
	resil_keyed *k = NULL;
	uint64_t ra = 0;
	char key[32];
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = resil_keyed_config_default();
	cfg.kind = RESIL_KEYED_RATELIMIT;
	cfg.max_keys = 16;
	cfg.ratelimit.rate = 2;
	cfg.ratelimit.burst = 2;
	cfg.ratelimit.period_ns = 1000;
	cfg.ratelimit.clock = resil_manual_clock_hook(&mc);
	memset(&ov, 0, sizeof(ov));
	ov.key = "VIP";
	ov.key_len = 3;
	ov.rate = 1000;
	ov.burst = 1000;
	cfg.overrides = &ov;
	cfg.n_overrides = 1;
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 1000; i++)
		assert_int_equal(resil_keyed_ratelimit_try_acquire(
		                     k, "VIP", 3, 1, NULL),
		    RESIL_OK);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "VIP", 3, 1, &ra),
	    RESIL_E_LIMITED);
	assert_int_equal(ra, 1);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "bob", 3, 1, NULL),
	    RESIL_OK);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "bob", 3, 1, NULL),
	    RESIL_OK);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "bob", 3, 1, &ra),
	    RESIL_E_LIMITED);
	assert_int_equal(ra, 500);
	for (i = 0; i < 10000; i++) {
		int n = snprintf(key, sizeof(key), "user-%d", i);

		assert_int_equal(resil_keyed_ratelimit_try_acquire(
		                     k, key, (size_t)n, 1, NULL),
		    RESIL_OK);
		/* Each churned key took one of its two: protected until
		 * time gives it back. */
		if (i % 14 == 13)
			resil_manual_clock_advance(&mc, 500);
	}
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_true(km.evicted > 0);
	/* bob and VIP have their own state still: not refilled by churn
	 * (time moved on: bob got permits back by time only). */
	resil_manual_clock_set(&mc, 1);
	resil_keyed_free(k);

	/* Overrides refused: on a breaker family, a repeated key, a bad
	 * rate. */
	{
		resil_keyed_override two[2];
		resil_diag d;

		cfg.kind = RESIL_KEYED_BREAKER;
		assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
		assert_non_null(strstr(d.msg, "breaker family takes no"));
		cfg.kind = RESIL_KEYED_RATELIMIT;
		two[0] = ov;
		two[1] = ov;
		cfg.overrides = two;
		cfg.n_overrides = 2;
		assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
		assert_non_null(strstr(d.msg, "override[1]: the key of"));
		two[1].key = "X";
		two[1].key_len = 1;
		two[1].burst = 0;
		two[1].rate = 1u << 30;
		two[1].period_ns = 1;
		assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
		assert_non_null(strstr(d.msg, "keyed.override"));
	}
}

/* The drained key among churn: its own state, never a fresh burst. */
static void
test_keyed_drained_limiter_not_reset_by_churn(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed *k = NULL;
	char key[32];
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = resil_keyed_config_default();
	cfg.kind = RESIL_KEYED_RATELIMIT;
	cfg.max_keys = 4;
	cfg.ratelimit.rate = 1;
	cfg.ratelimit.burst = 1;
	cfg.ratelimit.period_ns = 1000000;
	cfg.ratelimit.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "t", 1, 1, NULL),
	    RESIL_OK);
	for (i = 0; i < 1000; i++) {
		int n = snprintf(key, sizeof(key), "u%d", i);

		/* Every other key is drained too: most calls overflow to
		 * the shared instance, which is itself limited. */
		(void)resil_keyed_ratelimit_try_acquire(
		    k, key, (size_t)n, 1, NULL);
		assert_int_equal(resil_keyed_ratelimit_try_acquire(
		                     k, "t", 1, 1, NULL),
		    RESIL_E_LIMITED);
	}
	resil_keyed_free(k);
}

/* Bulkhead family: per-key slots; a key with a call in flight is never
 * evicted; max_concurrent overridden for one value. */
static void
test_keyed_bulkhead(void **state)
{
	resil_keyed_config cfg;
	resil_keyed_override ov;
	resil_keyed_permit a, b, c;
	resil_keyed *k = NULL;
	resil_keyed_metrics km;

	(void)state;
	cfg = resil_keyed_config_default();
	cfg.kind = RESIL_KEYED_BULKHEAD;
	cfg.max_keys = 2;
	cfg.bulkhead.max_concurrent = 1;
	memset(&ov, 0, sizeof(ov));
	ov.key = "big";
	ov.key_len = 3;
	ov.max_concurrent = 2;
	cfg.overrides = &ov;
	cfg.n_overrides = 1;
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_keyed_bulkhead_try_acquire(k, "x", 1, &a), RESIL_OK);
	assert_int_equal(
	    resil_keyed_bulkhead_try_acquire(k, "x", 1, &b), RESIL_E_LIMITED);
	assert_int_equal(
	    resil_keyed_bulkhead_try_acquire(k, "big", 3, &b), RESIL_OK);
	assert_int_equal(
	    resil_keyed_bulkhead_try_acquire(k, "big", 3, &c), RESIL_OK);
	/* Both keys busy: "y" gets the overflow bulkhead (limit 1). */
	{
		resil_keyed_permit y, y2;

		assert_int_equal(
		    resil_keyed_bulkhead_try_acquire(k, "y", 1, &y), RESIL_OK);
		assert_int_equal(resil_keyed_bulkhead_try_acquire(k, "z", 1, &y2),
		    RESIL_E_LIMITED);
		assert_int_equal(resil_keyed_bulkhead_release(k, &y), RESIL_OK);
	}
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.overflowed, 2);
	assert_int_equal(resil_keyed_bulkhead_release(k, &c), RESIL_OK);
	assert_int_equal(resil_keyed_bulkhead_complete(
	                     k, &a, RESIL_OUTCOME_SUCCESS, 5),
	    RESIL_OK);
	assert_int_equal(resil_keyed_bulkhead_release(k, &a), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_bulkhead_release(k, &b), RESIL_OK);
	resil_keyed_free(k);
}

/* Refusals: NULLs, sizes, ranges, keys, kinds. */
static void
test_keyed_refusals(void **state)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	resil_diag d;
	char big[300];

	(void)state;
	assert_int_equal(resil_keyed_new(NULL, &cfg, &d), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_new(&k, NULL, &d), RESIL_E_INVAL);
	cfg.max_keys = 0;
	assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "keyed.max_keys: 0 is out of range 1..16777216");
	cfg.max_keys = 10;
	cfg.max_key_len = 0;
	assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "keyed.max_key_len: 0 is out of range 1..4096");
	cfg.max_key_len = 256;
	cfg.kind = (resil_keyed_kind)7;
	assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
	cfg.kind = RESIL_KEYED_BREAKER;
	cfg.size = 8;
	assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
	cfg.size = sizeof(cfg);
	cfg.breaker.failure_rate_pct = 0;
	assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_E_INVAL);
	cfg.breaker.failure_rate_pct = 50;
	assert_null(k);
	assert_int_equal(resil_keyed_new(&k, &cfg, &d), RESIL_OK);
	memset(big, 'x', sizeof(big));
	assert_int_equal(resil_keyed_breaker_acquire(k, big, 257, &p),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_breaker_acquire(k, big, 256, &p), RESIL_OK);
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, (resil_outcome)99), RESIL_E_INVAL);
	assert_non_null(p.entry); /* still held: the permit was not used */
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_breaker_acquire(k, "", 0, &p), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_breaker_acquire(k, NULL, 1, &p),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_breaker_acquire(k, "a", 1, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "a", 1, 1, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_bulkhead_try_acquire(k, "a", 1, &p),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_get_metrics(NULL, NULL), RESIL_E_INVAL);
	assert_string_equal(resil_keyed_kind_name(RESIL_KEYED_RATELIMIT),
	    "ratelimit");
	assert_string_equal(
	    resil_keyed_event_name(RESIL_KEYED_EVENT_OVERFLOW), "overflow");
	resil_keyed_free(k);
	resil_keyed_free(NULL);
}

/* Binary keys (NUL bytes), keys that differ only past the inline part,
 * and long keys are distinct keys. */
static void
test_keyed_binary_and_long_keys(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_metrics km;
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	char a[100], b[100];
	const char z1[3] = { 'a', 0, 'b' }, z2[3] = { 'a', 0, 'c' };
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 8);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	memset(a, 'q', sizeof(a));
	memcpy(b, a, sizeof(b));
	b[99] = 'r';
	for (i = 0; i < 4; i++) {
		assert_int_equal(
		    resil_keyed_breaker_acquire(k, a, sizeof(a), &p), RESIL_OK);
		resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_FAILURE);
		assert_int_equal(
		    resil_keyed_breaker_acquire(k, z1, 3, &p), RESIL_OK);
		resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_FAILURE);
	}
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, a, sizeof(a), &p), RESIL_E_OPEN);
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, b, sizeof(b), &p), RESIL_OK);
	resil_keyed_breaker_release(k, &p);
	assert_int_equal(resil_keyed_breaker_acquire(k, b, 99, &p), RESIL_OK);
	resil_keyed_breaker_release(k, &p);
	assert_int_equal(resil_keyed_breaker_acquire(k, z1, 3, &p), RESIL_E_OPEN);
	assert_int_equal(resil_keyed_breaker_acquire(k, z2, 3, &p), RESIL_OK);
	resil_keyed_breaker_release(k, &p);
	assert_int_equal(resil_keyed_breaker_acquire(k, z1, 1, &p), RESIL_OK);
	resil_keyed_breaker_release(k, &p);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.keys, 6);
	resil_keyed_free(k);
}

/* Every allocation of creation and of a new key fails in turn: a clear
 * RESIL_E_NOMEM, nothing leaked, the family usable after. */
static void
test_keyed_alloc_failure(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_override ov;
	resil_keyed_permit p;
	resil_keyed *k;
	fail_alloc fa;
	char longkey[40];
	uint64_t n;
	resil_err err;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = resil_keyed_config_default();
	cfg.kind = RESIL_KEYED_RATELIMIT;
	cfg.max_keys = 4;
	cfg.ratelimit.clock = resil_manual_clock_hook(&mc);
	memset(&ov, 0, sizeof(ov));
	ov.key = "VIP";
	ov.key_len = 3;
	ov.rate = 7;
	cfg.overrides = &ov;
	cfg.n_overrides = 1;
	for (n = 1;; n++) {
		k = NULL;
		cfg.alloc = fail_alloc_init(&fa, n);
		err = resil_keyed_new(&k, &cfg, NULL);
		if (err == RESIL_OK)
			break;
		assert_int_equal(err, RESIL_E_NOMEM);
		assert_null(k);
		assert_int_equal(fail_alloc_live(&fa), 0);
	}
	resil_keyed_free(k);
	memset(longkey, 'L', sizeof(longkey));
	cfg = breaker_family(&mc, 1);
	for (n = 1; n < 8; n++) {
		cfg.alloc = fail_alloc_init(&fa, 0);
		assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
		fail_alloc_arm(&fa, n);
		err = resil_keyed_breaker_acquire(
		    k, longkey, sizeof(longkey), &p);
		if (err == RESIL_OK)
			resil_keyed_breaker_release(k, &p);
		else
			assert_int_equal(err, RESIL_E_NOMEM);
		fail_alloc_arm(&fa, 0);
		assert_int_equal(resil_keyed_breaker_acquire(
		                     k, longkey, sizeof(longkey), &p),
		    RESIL_OK);
		resil_keyed_breaker_release(k, &p);
		resil_keyed_free(k);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_int_equal(fa.size_mismatch, 0);
	}
}

/* Seen: the top keys by failures and by rejections; the Prometheus text
 * with a key label, capped at 3 series (the rest under __other__), a
 * key with bytes that need escaping, checked by promtool. */
static void
test_keyed_top_and_prometheus(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_top_entry top[4];
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	const char odd[] = { 'a', '"', '\\', '\n', (char)0xff, 'z' };
	char key[16], buf[8192], path[] = "/tmp/resil_keyed_promXXXXXX";
	size_t got, len, need;
	int i, j, fd;
	FILE *fp;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 16);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	/* k<i> gets i failures (k4 trips after 4, then rejects). */
	for (i = 0; i < 6; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		for (j = 0; j < 6; j++) {
			if (resil_keyed_breaker_acquire(k, key, strlen(key), &p) !=
			    RESIL_OK)
				continue;
			resil_keyed_breaker_record(k, &p,
			    j < i ? RESIL_OUTCOME_FAILURE : RESIL_OUTCOME_SUCCESS);
		}
	}
	assert_int_equal(resil_keyed_breaker_acquire(k, odd, sizeof(odd), &p),
	    RESIL_OK);
	resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(
	    resil_keyed_top(k, RESIL_KEYED_BY_FAILURES, top, 4, &got), RESIL_OK);
	assert_int_equal(got, 4);
	/* k5: 4 failures then open (2 rejections); k4 the same; k3 3. */
	assert_int_equal(top[0].failures, 4);
	assert_int_equal(top[2].failures, 3);
	assert_memory_equal(top[2].key, "k3", 2);
	assert_int_equal(top[0].state, RESIL_BREAKER_OPEN);
	assert_int_equal(
	    resil_keyed_top(k, RESIL_KEYED_BY_REJECTIONS, top, 1, &got),
	    RESIL_OK);
	assert_int_equal(got, 1);
	/* k4 and k5 tie (4 failures, 2 rejections, 4 calls): entry order. */
	assert_memory_equal(top[0].key, "k4", 2);
	assert_int_equal(top[0].rejections, 2);

	assert_int_equal(resil_keyed_prometheus(k, "hosts", 3, NULL, 0, &need),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_prometheus(k, "hosts", 3, buf, sizeof(buf),
	                     &len),
	    RESIL_OK);
	assert_int_equal(len, need);
	assert_int_equal(strlen(buf), len);
	assert_non_null(strstr(buf,
	    "resil_keyed_failures_total{family=\"hosts\",key=\"k5\"} 4\n"));
	/* 7 keys, 3 series: k0, k1, k2 and the odd key (0, 1, 2 and 0
	 * failures) fold into __other__. */
	assert_non_null(strstr(buf,
	    "resil_keyed_failures_total{family=\"hosts\",key=\"__other__\"} 3\n"));
	assert_null(strstr(buf, "key=\"k1\""));
	assert_non_null(strstr(buf,
	    "resil_keyed_breaker_open{family=\"hosts\",key=\"k4\"} 1\n"));
	assert_non_null(strstr(buf, "resil_keyed_keys{family=\"hosts\"} 7\n"));
	assert_int_equal(resil_keyed_prometheus(k, "hosts", 100, buf,
	                     sizeof(buf), &len),
	    RESIL_OK);
	/* A backslash doubled in the value (four in the text), so that
	 * \xNN only ever stands for a byte. */
	assert_non_null(strstr(buf, "key=\"a\\\"\\\\\\\\\\n\\\\xffz\""));
	assert_null(strstr(buf, "__other__"));

	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		resil_keyed_free(k);
		print_message("skipped promtool check: promtool not found\n");
		skip();
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs(buf, fp);
	fclose(fp);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", path);
		i = system(cmd);
	}
	unlink(path);
	resil_keyed_free(k);
	if (i != 0)
		fail_msg("promtool check metrics refused the text:\n%s", buf);
}

/* A family of 128 keys, every one OPEN: the first new key sweeps and
 * overflows; the next 128 / 64 = 2 new keys overflow without a sweep,
 * even once a key is free to go (k0 reset); the one after finds it. */
static void
test_keyed_full_family_skips_sweeps(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_metrics km;
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	char key[16];
	int i, j;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 128);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 128; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		for (j = 0; j < 4; j++) {
			assert_int_equal(resil_keyed_breaker_acquire(
			                     k, key, strlen(key), &p),
			    RESIL_OK);
			resil_keyed_breaker_record(
			    k, &p, RESIL_OUTCOME_FAILURE);
		}
	}
	assert_int_equal(resil_keyed_breaker_acquire(k, "n0", 2, &p), RESIL_OK);
	resil_keyed_breaker_release(k, &p);
	assert_int_equal(resil_keyed_with(k, "k0", 2, reset_it, NULL), RESIL_OK);
	for (i = 1; i <= 3; i++) {
		snprintf(key, sizeof(key), "n%d", i);
		assert_int_equal(
		    resil_keyed_breaker_acquire(k, key, strlen(key), &p),
		    RESIL_OK);
		resil_keyed_breaker_release(k, &p);
		assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
		assert_int_equal(km.overflowed, i < 3 ? (uint64_t)i + 1 : 3);
		assert_int_equal(km.evicted, i < 3 ? 0 : 1);
	}
	assert_int_equal(resil_keyed_with(k, "k0", 2, reset_it, NULL),
	    RESIL_E_NOTFOUND);
	resil_keyed_free(k);
}

/* resil_keyed_get() holds a key: its instance is driven directly, it is
 * not evicted while held (a new key goes to the overflow), and after the
 * put it is evictable again. */
static void
test_keyed_handle(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_metrics km;
	resil_keyed_instance ov;
	resil_keyed_handle ha, hb, hc;
	resil_breaker_metrics m;
	resil_permit p;
	resil_keyed *k = NULL;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 2);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_keyed_get(k, "a", 1, &ha), RESIL_OK);
	assert_false(ha.overflow);
	assert_int_equal(ha.instance.kind, RESIL_KEYED_BREAKER);
	assert_non_null(ha.instance.breaker);
	for (i = 0; i < 5; i++) {
		assert_int_equal(
		    resil_breaker_acquire(ha.instance.breaker, &p), RESIL_OK);
		assert_int_equal(resil_breaker_record(ha.instance.breaker, &p,
		                     RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
	/* The same instance as the key's calls by key. */
	{
		resil_keyed_permit kp;

		assert_int_equal(
		    resil_keyed_breaker_acquire(k, "a", 1, &kp), RESIL_OK);
		assert_int_equal(
		    resil_keyed_breaker_record(k, &kp, RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
	assert_int_equal(
	    resil_breaker_get_metrics(ha.instance.breaker, &m), RESIL_OK);
	assert_int_equal(m.successes, 6);
	assert_int_equal(resil_keyed_get(k, "b", 1, &hb), RESIL_OK);
	assert_false(hb.overflow);
	/* Both keys are CLOSED with successes only, so evictable, but held:
	 * a third key goes to the overflow. */
	assert_int_equal(resil_keyed_get(k, "c", 1, &hc), RESIL_OK);
	assert_true(hc.overflow);
	assert_int_equal(resil_keyed_overflow(k, &ov), RESIL_OK);
	assert_ptr_equal(hc.instance.breaker, ov.breaker);
	assert_int_equal(resil_keyed_put(k, &hc), RESIL_OK);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.evicted, 0);
	assert_int_equal(km.overflowed, 1);
	/* Let "a" go: the next new key takes its place. */
	assert_int_equal(resil_keyed_put(k, &ha), RESIL_OK);
	assert_null(ha.entry);
	assert_int_equal(resil_keyed_put(k, &ha), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_get(k, "c", 1, &hc), RESIL_OK);
	assert_false(hc.overflow);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.evicted, 1);
	assert_int_equal(resil_keyed_with(k, "a", 1, read_breaker, NULL),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_keyed_put(k, &hb), RESIL_OK);
	assert_int_equal(resil_keyed_put(k, &hc), RESIL_OK);
	/* Refusals. */
	assert_int_equal(resil_keyed_get(k, NULL, 1, &ha), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_get(k, "a", 0, &ha), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_get(NULL, "a", 1, &ha), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_get(k, "a", 1, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_put(NULL, &hb), RESIL_E_INVAL);
	assert_int_equal(resil_keyed_put(k, NULL), RESIL_E_INVAL);
	resil_keyed_free(k);
}

/* Counts the live keys that begin with "old-" and "new-". */
static void
count_old_new(const void *key, size_t key_len,
    const resil_keyed_instance *inst, void *ctx)
{
	uint32_t *n = ctx;

	(void)inst;
	if (key_len >= 4 && memcmp(key, "old-", 4) == 0)
		n[0]++;
	if (key_len >= 4 && memcmp(key, "new-", 4) == 0)
		n[1]++;
}

/* A probe that passes another key's entry (a miss walks a whole run)
 * never counts as a use of it for the CLOCK: else the keys a busy probe
 * run passes would never be evicted, the run would grow, and new keys
 * would be evicted in their place. N idle keys, then N new ones (each a
 * miss, each evicting): the hand takes every old key, in turn. */
static void
test_keyed_probe_warms_no_other_key(void **state)
{
	resil_manual_clock mc;
	resil_keyed_config cfg;
	resil_keyed_permit p;
	resil_keyed *k = NULL;
	uint32_t i, n[2] = { 0, 0 };
	char key[16];

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg = breaker_family(&mc, 1000);
	cfg.hash_seed = 7;
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "%s-%06u", i < 1000 ? "old" : "new",
		    i % 1000);
		assert_int_equal(resil_keyed_breaker_acquire(k, key, 10, &p),
		    RESIL_OK);
		assert_int_equal(
		    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
	assert_int_equal(resil_keyed_foreach(k, count_old_new, n), RESIL_OK);
	assert_int_equal(n[0], 0);
	assert_int_equal(n[1], 1000);
	resil_keyed_free(k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_breaker_decides_as_lone),
		cmocka_unit_test(test_keyed_failing_key_survives_churn),
		cmocka_unit_test(test_keyed_overflow_when_every_key_is_protected),
		cmocka_unit_test(test_keyed_reset_key_is_evictable),
		cmocka_unit_test(test_keyed_ratelimit_overrides_and_protection),
		cmocka_unit_test(test_keyed_drained_limiter_not_reset_by_churn),
		cmocka_unit_test(test_keyed_bulkhead),
		cmocka_unit_test(test_keyed_refusals),
		cmocka_unit_test(test_keyed_binary_and_long_keys),
		cmocka_unit_test(test_keyed_alloc_failure),
		cmocka_unit_test(test_keyed_top_and_prometheus),
		cmocka_unit_test(test_keyed_full_family_skips_sweeps),
		cmocka_unit_test(test_keyed_handle),
		cmocka_unit_test(test_keyed_probe_warms_no_other_key),
	};

	return cmocka_run_group_tests_name("keyed", tests, NULL, NULL);
}

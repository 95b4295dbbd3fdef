#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>

#include "support/fail_alloc.h"

/* A breaker on a manual clock, with a recorder for its transitions. */
typedef struct fixture {
	resil_manual_clock mc;
	resil_breaker_config cfg;
	resil_breaker_recorder rec;
	resil_breaker_event events[64];
	resil_breaker *b;
} fixture;

static void
fx_init(fixture *fx, uint64_t start)
{
	memset(fx, 0, sizeof(*fx));
	resil_manual_clock_init(&fx->mc, start);
	resil_breaker_config_init(&fx->cfg);
	fx->cfg.clock = resil_manual_clock_hook(&fx->mc);
	resil_breaker_recorder_init(&fx->rec, fx->events, 64);
	fx->cfg.listener = resil_breaker_recorder_listener;
	fx->cfg.listener_ctx = &fx->rec;
}

static void
fx_new(fixture *fx)
{
	resil_diag d;

	d.msg[0] = '\0';
	assert_int_equal(resil_breaker_new(&fx->b, &fx->cfg, &d), RESIL_OK);
	assert_non_null(fx->b);
}

/* Acquire and record one outcome; the acquire must succeed. */
static void
call(fixture *fx, resil_outcome o)
{
	resil_permit p;

	assert_int_equal(resil_breaker_acquire(fx->b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(fx->b, &p, o), RESIL_OK);
}

static resil_breaker_state
st_of(const fixture *fx)
{
	return resil_breaker_get_state(fx->b);
}

static void
assert_event(const fixture *fx, uint64_t seq, uint64_t time,
    resil_breaker_state from, resil_breaker_state to,
    resil_breaker_reason reason)
{
	const resil_breaker_event *ev;

	assert_true(fx->rec.count >= seq);
	ev = &fx->events[seq - 1];
	assert_int_equal(ev->seq, seq);
	assert_int_equal(ev->time, time);
	assert_string_equal(resil_breaker_state_name(ev->from),
	    resil_breaker_state_name(from));
	assert_string_equal(
	    resil_breaker_state_name(ev->to), resil_breaker_state_name(to));
	assert_string_equal(resil_breaker_reason_name(ev->reason),
	    resil_breaker_reason_name(reason));
}

/* ---- configuration ---- */

static void
expect_invalid(const resil_breaker_config *cfg, const char *field)
{
	resil_breaker *b = (resil_breaker *)0x1;
	resil_diag d;

	memset(&d, 0, sizeof(d));
	assert_int_equal(resil_breaker_new(&b, cfg, &d), RESIL_E_INVAL);
	assert_ptr_equal(b, (resil_breaker *)0x1); /* untouched on error */
	if (strstr(d.msg, field) == NULL)
		fail_msg("diag \"%s\" does not name \"%s\"", d.msg, field);
}

static void
test_breaker_config_defaults_are_valid(void **state)
{
	resil_breaker_config cfg = resil_breaker_config_default();

	(void)state;
	assert_int_equal(cfg.size, sizeof(cfg));
	assert_int_equal(cfg.failure_rate_pct, 50);
	assert_int_equal(cfg.min_calls, 10);
	assert_int_equal(cfg.window_size, 100);
	assert_int_equal(cfg.permitted_probes, 1);
	assert_int_equal(cfg.open_wait_ns, 30 * RESIL_NS_PER_SEC);
	assert_int_equal(resil_breaker_config_validate(&cfg, NULL), RESIL_OK);
}

static void
test_breaker_config_refuses_bad_fields(void **state)
{
	resil_breaker_config c;
	resil_clock no_now = { NULL, NULL, NULL, NULL, NULL, NULL, NULL };

	(void)state;
	resil_breaker_config_init(&c);
	c.window_size = 0;
	expect_invalid(&c, "breaker.window_size: 0");
	resil_breaker_config_init(&c);
	c.failure_rate_pct = 101;
	expect_invalid(&c, "breaker.failure_rate_pct: 101 is out of range");
	resil_breaker_config_init(&c);
	c.slow_rate_pct = 101;
	c.slow_threshold_ns = 5;
	expect_invalid(&c, "breaker.slow_rate_pct");
	resil_breaker_config_init(&c);
	c.slow_rate_pct = 50;
	expect_invalid(&c, "breaker.slow_threshold_ns");
	resil_breaker_config_init(&c);
	c.permitted_probes = 0;
	expect_invalid(&c, "breaker.permitted_probes: 0");
	resil_breaker_config_init(&c);
	c.permitted_probes = 40000;
	expect_invalid(&c, "breaker.permitted_probes");
	resil_breaker_config_init(&c);
	c.open_wait_ns = 100;
	c.open_wait_max_ns = 99;
	expect_invalid(&c, "breaker.open_wait_max_ns: 99 is below");
	resil_breaker_config_init(&c);
	c.open_wait_multiplier = 0.5;
	expect_invalid(&c, "breaker.open_wait_multiplier");
	resil_breaker_config_init(&c);
	c.open_wait_multiplier = 0.0 / 0.0;
	expect_invalid(&c, "breaker.open_wait_multiplier");
	resil_breaker_config_init(&c);
	c.failure_rate_pct = 0;
	expect_invalid(&c, "no trigger");
	resil_breaker_config_init(&c);
	c.min_calls = 0;
	expect_invalid(&c, "breaker.min_calls");
	resil_breaker_config_init(&c);
	c.window_type = RESIL_WINDOW_TIME;
	c.bucket_ns = 0;
	expect_invalid(&c, "breaker.bucket_ns");
	resil_breaker_config_init(&c);
	c.window_type = (resil_breaker_window_type)7;
	expect_invalid(&c, "breaker.window_type");
	resil_breaker_config_init(&c);
	c.size = 8;
	expect_invalid(&c, "breaker.size");
	resil_breaker_config_init(&c);
	c.clock = &no_now;
	expect_invalid(&c, "breaker.clock");
}

static void
test_breaker_null_arguments(void **state)
{
	resil_breaker_config c = resil_breaker_config_default();
	resil_breaker *b = NULL;
	resil_permit p;
	resil_breaker_metrics m;

	(void)state;
	assert_int_equal(resil_breaker_new(NULL, &c, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_new(&b, NULL, NULL), RESIL_E_INVAL);
	assert_null(b);
	assert_int_equal(resil_breaker_acquire(NULL, &p), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_record(NULL, &p, 0), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_release(NULL, &p), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_get_metrics(NULL, &m), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_reset(NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_breaker_call(NULL, NULL, NULL, NULL, NULL), RESIL_E_INVAL);
	resil_breaker_free(NULL); /* harmless */
	assert_int_equal(resil_breaker_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(b, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(b, &p, (resil_outcome)9), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_transition(b, (resil_breaker_state)9),
	    RESIL_E_INVAL);
	assert_int_equal(resil_breaker_get_metrics(b, NULL), RESIL_E_INVAL);
	resil_breaker_free(b);
}

static void
test_breaker_misuse_of_permits(void **state)
{
	fixture fx;
	resil_permit zero, p;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.consecutive_failures = 1;
	fx.cfg.open_wait_ns = 10;
	fx_new(&fx);
	memset(&zero, 0, sizeof(zero));
	/* A permit that was never granted. */
	assert_int_equal(
	    resil_breaker_record(fx.b, &zero, RESIL_OUTCOME_FAILURE),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_breaker_release(fx.b, &zero), RESIL_E_MISUSE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	/* A permit reported twice: the first report consumes it and closes
	 * the breaker; the second is misuse and changes nothing. */
	call(&fx, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_advance(&fx.mc, 10);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_record(fx.b, &p, RESIL_OUTCOME_FAILURE),
	    RESIL_E_MISUSE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_release(fx.b, &p), RESIL_E_MISUSE);
	resil_breaker_free(fx.b);
}

static void
test_breaker_allocation_failure_leaks_nothing(void **state)
{
	resil_breaker_config c = resil_breaker_config_default();
	fail_alloc fa;
	resil_breaker *b;
	uint64_t n;

	(void)state;
	for (n = 1; n <= 2; n++) {
		b = NULL;
		c.alloc = fail_alloc_init(&fa, n);
		assert_int_equal(
		    resil_breaker_new(&b, &c, NULL), RESIL_E_NOMEM);
		assert_null(b);
		assert_int_equal(fail_alloc_live(&fa), 0);
	}
	c.alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_breaker_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(fa.allocs, 2);
	resil_breaker_free(b);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_int_equal(fa.live_bytes, 0);
	assert_false(fa.size_mismatch);
}

/* ---- OPEN wait boundary ---- */

static void
test_breaker_probe_exactly_at_open_wait(void **state)
{
	fixture fx;
	resil_permit p;
	uint64_t left = 0;

	(void)state;
	fx_init(&fx, 1000);
	fx.cfg.min_calls = 1;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE); /* trips: 1 of 1 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 1, 1000, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_FAILURE_RATE);

	resil_manual_clock_advance(&fx.mc, fx.cfg.open_wait_ns - 1);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 1);
	resil_manual_clock_advance(&fx.mc, 1); /* now == opened_at + wait */
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	assert_event(&fx, 2, 1000 + fx.cfg.open_wait_ns, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_REASON_WAIT_ELAPSED);
	resil_breaker_free(fx.b);
}

/* ---- seed 003: two consecutive failures, 5 units, probe at t=7 ---- */

static void
seed_fixture(fixture *fx)
{
	fx_init(fx, 0);
	fx->cfg.failure_rate_pct = 0;
	fx->cfg.consecutive_failures = 2;
	fx->cfg.open_wait_ns = 5;
	fx->cfg.permitted_probes = 1;
	fx_new(fx);
}

static void
test_breaker_seed_two_failures_open_for_five(void **state)
{
	fixture fx;
	resil_permit p;
	uint64_t left;

	(void)state;
	seed_fixture(&fx);
	call(&fx, RESIL_OUTCOME_SUCCESS); /* t=0 live */
	resil_manual_clock_set(&fx.mc, 1);
	call(&fx, RESIL_OUTCOME_FAILURE); /* t=1: 1 failure */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_manual_clock_set(&fx.mc, 2);
	call(&fx, RESIL_OUTCOME_FAILURE); /* t=2: 2 in a row: OPEN to 7 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&fx.mc, 3);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 4);
	resil_manual_clock_set(&fx.mc, 6);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 1);
	resil_manual_clock_set(&fx.mc, 7); /* exactly at the end: probe */
	call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	/* t=9, t=10 fail: OPEN until 15; t=20 probe fails: OPEN again. */
	resil_manual_clock_set(&fx.mc, 9);
	call(&fx, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_set(&fx.mc, 10);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&fx.mc, 20);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 5);

	assert_int_equal(fx.rec.count, 6);
	assert_event(&fx, 1, 2, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES);
	assert_event(&fx, 2, 7, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN,
	    RESIL_BREAKER_REASON_WAIT_ELAPSED);
	assert_event(&fx, 3, 7, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_CLOSED,
	    RESIL_BREAKER_REASON_PROBES_PASSED);
	assert_event(&fx, 4, 10, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES);
	assert_event(&fx, 5, 20, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN,
	    RESIL_BREAKER_REASON_WAIT_ELAPSED);
	assert_event(&fx, 6, 20, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_PROBES_FAILED);
	assert_int_equal(fx.rec.dropped, 0);
	resil_breaker_free(fx.b);
}

static void
test_breaker_seed_failed_probe_opens_again(void **state)
{
	fixture fx;
	resil_permit p;
	resil_breaker_metrics m;

	(void)state;
	seed_fixture(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE); /* t=0 */
	resil_manual_clock_set(&fx.mc, 1);
	call(&fx, RESIL_OUTCOME_FAILURE); /* t=1: OPEN until 6 */
	resil_manual_clock_set(&fx.mc, 6);
	call(&fx, RESIL_OUTCOME_FAILURE); /* probe fails: OPEN until 11 */
	resil_manual_clock_set(&fx.mc, 7);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_E_OPEN);
	resil_manual_clock_set(&fx.mc, 10);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_E_OPEN);
	resil_manual_clock_set(&fx.mc, 11);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.failures, 3);
	assert_int_equal(m.rejections, 2);
	assert_int_equal(m.probes_granted, 1);
	resil_breaker_free(fx.b);
}

/* ---- rate triggers ---- */

static void
test_breaker_failure_rate_boundary(void **state)
{
	fixture fx;
	int i;

	(void)state;
	/* 4 failures of 10 (40%) stay CLOSED. */
	fx_init(&fx, 0);
	fx.cfg.window_size = 10;
	fx.cfg.min_calls = 10;
	fx_new(&fx);
	for (i = 0; i < 4; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	for (i = 0; i < 6; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_breaker_free(fx.b);

	/* 5 failures: below min_calls nothing trips; the 10th outcome, a
	 * success, makes the window count: 50% >= 50% trips. */
	fx_init(&fx, 0);
	fx.cfg.window_size = 10;
	fx.cfg.min_calls = 10;
	fx_new(&fx);
	for (i = 0; i < 5; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	for (i = 0; i < 4; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 1, 0, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_FAILURE_RATE);
	resil_breaker_free(fx.b);
}

static void
test_breaker_min_calls_exactly(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	int i;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.window_size = 100;
	fx.cfg.min_calls = 5;
	fx.cfg.failure_rate_pct = 100;
	fx_new(&fx);
	for (i = 0; i < 4; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 4);
	assert_true(m.failure_rate < 0.0f); /* below min_calls: -1 */
	call(&fx, RESIL_OUTCOME_FAILURE);   /* exactly M calls */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);
}

static void
test_breaker_min_calls_capped_at_count_window(void **state)
{
	fixture fx;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.window_size = 5;
	fx.cfg.min_calls = 100;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_FAILURE); /* 3 of 5 = 60% */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);
}

static void
test_breaker_count_window_evicts_oldest(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	int i;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.window_size = 4;
	fx.cfg.min_calls = 4;
	fx.cfg.failure_rate_pct = 75;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_SUCCESS); /* F F S S: 50% */
	for (i = 0; i < 2; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS); /* evicts both failures */
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 4);
	assert_int_equal(m.window_failures, 0);
	assert_true(m.failure_rate == 0.0f);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE); /* S S F F: 50% */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_FAILURE); /* S F F F: 75% */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);
}

static void
test_breaker_slow_call_rate_strict_threshold(void **state)
{
	fixture fx;
	resil_permit p;
	resil_breaker_metrics m;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.failure_rate_pct = 0;
	fx.cfg.slow_rate_pct = 50;
	fx.cfg.slow_threshold_ns = 100;
	fx.cfg.window_size = 4;
	fx.cfg.min_calls = 4;
	fx_new(&fx);
	/* duration == threshold is not slow. */
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record_duration(
	                     fx.b, &p, RESIL_OUTCOME_SUCCESS, 100),
	    RESIL_OK);
	/* Measured by the breaker: acquire at t, record at t + 101. */
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_manual_clock_advance(&fx.mc, 101);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_manual_clock_advance(&fx.mc, 100);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.slow_calls, 1);
	assert_int_equal(m.window_slow, 1);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	/* A slow failure: 2 of 4 slow = 50% trips; slowness counts whether
	 * the call succeeded or failed, and failures alone don't trip here. */
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record_duration(
	                     fx.b, &p, RESIL_OUTCOME_FAILURE, 101),
	    RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    fx.events[0].reason, RESIL_BREAKER_REASON_SLOW_CALL_RATE);
	resil_breaker_free(fx.b);
}

static void
test_breaker_time_window_drops_old_outcomes(void **state)
{
	fixture fx;
	resil_breaker_metrics m;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.window_type = RESIL_WINDOW_TIME;
	fx.cfg.window_size = 3; /* 3 buckets of 10 ticks: span 30 */
	fx.cfg.bucket_ns = 10;
	fx.cfg.min_calls = 3;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE); /* t=0, bucket 0 */
	resil_manual_clock_set(&fx.mc, 15);
	call(&fx, RESIL_OUTCOME_SUCCESS); /* bucket 1 */
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 2);
	/* No call arrives; reading later shows bucket 0 gone at t=30. */
	resil_manual_clock_set(&fx.mc, 29);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 2);
	assert_int_equal(m.window_failures, 1);
	resil_manual_clock_set(&fx.mc, 30);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 1);
	assert_int_equal(m.window_failures, 0);
	resil_manual_clock_set(&fx.mc, 40);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 0);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	/* Time alone never tripped it; lifetime totals are kept. */
	assert_int_equal(m.failures, 1);
	assert_int_equal(m.successes, 1);
	resil_breaker_free(fx.b);
}

static void
test_breaker_time_window_trips_within_span(void **state)
{
	fixture fx;

	(void)state;
	fx_init(&fx, 100);
	fx.cfg.window_type = RESIL_WINDOW_TIME;
	fx.cfg.window_size = 10;
	fx.cfg.bucket_ns = 1;
	fx.cfg.min_calls = 4;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_advance(&fx.mc, 10); /* both expire */
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_manual_clock_advance(&fx.mc, 9); /* all 3 still in the span */
	call(&fx, RESIL_OUTCOME_FAILURE);      /* 2 of 4 = 50% */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 1, 119, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_FAILURE_RATE);
	resil_breaker_free(fx.b);
}

static void
test_breaker_time_window_success_can_trip(void **state)
{
	fixture fx;
	int i;

	(void)state;
	/* A success that lifts the window to min_calls. */
	fx_init(&fx, 0);
	fx.cfg.window_type = RESIL_WINDOW_TIME;
	fx.cfg.window_size = 2;
	fx.cfg.bucket_ns = 10;
	fx.cfg.min_calls = 4;
	fx_new(&fx);
	for (i = 0; i < 3; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_SUCCESS); /* 3 of 4 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);

	/* A success recorded after old successes expired. */
	fx_init(&fx, 0);
	fx.cfg.window_type = RESIL_WINDOW_TIME;
	fx.cfg.window_size = 2;
	fx.cfg.bucket_ns = 10;
	fx.cfg.min_calls = 2;
	fx_new(&fx);
	for (i = 0; i < 6; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	resil_manual_clock_set(&fx.mc, 10);
	for (i = 0; i < 3; i++)
		call(&fx, RESIL_OUTCOME_FAILURE); /* 3 of 9 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_manual_clock_set(&fx.mc, 20); /* the 6 successes expire */
	call(&fx, RESIL_OUTCOME_SUCCESS);   /* 3 of 4 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 1, 20, RESIL_BREAKER_CLOSED, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_FAILURE_RATE);
	resil_breaker_free(fx.b);
}

static void
test_breaker_time_alone_never_trips(void **state)
{
	fixture fx;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.consecutive_failures = 3;
	fx.cfg.open_wait_ns = 10;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_set(&fx.mc, UINT64_MAX / 2);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_FAILURE); /* the third in a row trips */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	/* Past the wait, OPEN stays OPEN until an acquire looks. */
	resil_manual_clock_advance(&fx.mc, 1000);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);
}

static void
test_breaker_success_resets_consecutive(void **state)
{
	fixture fx;
	resil_breaker_metrics m;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.failure_rate_pct = 0;
	fx.cfg.consecutive_failures = 2;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_IGNORED); /* counts neither way */
	call(&fx, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.consecutive_failures, 1);
	assert_int_equal(m.ignored, 2);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);
}

/* ---- HALF_OPEN ---- */

static void
open_then_half_open(fixture *fx)
{
	call(fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(fx), RESIL_BREAKER_OPEN);
	resil_manual_clock_advance(&fx->mc, fx->cfg.open_wait_ns);
}

static void
probe_fixture(fixture *fx, uint32_t k)
{
	fx_init(fx, 0);
	fx->cfg.min_calls = 1;
	fx->cfg.open_wait_ns = 100;
	fx->cfg.permitted_probes = k;
	fx_new(fx);
}

static void
test_breaker_half_open_grants_exactly_k(void **state)
{
	fixture fx;
	resil_permit p[4];
	uint64_t left = 99;

	(void)state;
	probe_fixture(&fx, 3);
	open_then_half_open(&fx);
	assert_int_equal(resil_breaker_acquire(fx.b, &p[0]), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &p[1]), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &p[2]), RESIL_OK);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p[3], &left), RESIL_E_OPEN);
	assert_int_equal(left, 0);
	/* Decides only after all K report: 1 failure of 3 is 33% < 50%. */
	resil_breaker_record(fx.b, &p[0], RESIL_OUTCOME_SUCCESS);
	resil_breaker_record(fx.b, &p[1], RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	resil_breaker_record(fx.b, &p[2], RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_event(&fx, 3, 100, RESIL_BREAKER_HALF_OPEN,
	    RESIL_BREAKER_CLOSED, RESIL_BREAKER_REASON_PROBES_PASSED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_half_open_reopens_over_threshold(void **state)
{
	fixture fx;
	resil_permit p[3];
	int i;

	(void)state;
	probe_fixture(&fx, 3);
	open_then_half_open(&fx);
	for (i = 0; i < 3; i++)
		assert_int_equal(resil_breaker_acquire(fx.b, &p[i]), RESIL_OK);
	resil_breaker_record(fx.b, &p[0], RESIL_OUTCOME_FAILURE);
	resil_breaker_record(fx.b, &p[1], RESIL_OUTCOME_SUCCESS);
	resil_breaker_record(fx.b, &p[2], RESIL_OUTCOME_FAILURE); /* 67% */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 3, 100, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_PROBES_FAILED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_reopen_on_first_failure(void **state)
{
	fixture fx;
	resil_permit p[3];
	int i;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx.cfg.open_wait_ns = 100;
	fx.cfg.permitted_probes = 3;
	fx.cfg.reopen_on_first_failure = 1;
	fx_new(&fx);
	open_then_half_open(&fx);
	for (i = 0; i < 3; i++)
		assert_int_equal(resil_breaker_acquire(fx.b, &p[i]), RESIL_OK);
	resil_breaker_record(fx.b, &p[0], RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	resil_breaker_record(fx.b, &p[1], RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 3, 100, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_PROBE_FAILED);
	/* The last probe is now stale: it cannot close the breaker. */
	resil_breaker_record(fx.b, &p[2], RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_breaker_free(fx.b);
}

static void
test_breaker_ignored_and_released_give_permit_back(void **state)
{
	fixture fx;
	resil_permit p, q;
	resil_breaker_metrics m;

	(void)state;
	probe_fixture(&fx, 1);
	open_then_half_open(&fx);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &q), RESIL_E_OPEN);
	resil_breaker_record(fx.b, &p, RESIL_OUTCOME_IGNORED);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_breaker_record(fx.b, &p, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_release(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.probes_granted, 0);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	/* Releasing a CLOSED permit changes nothing. */
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_release(fx.b, &p), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_stale_permit_changes_nothing(void **state)
{
	fixture fx;
	resil_permit slow_call, slow2, p;
	resil_breaker_metrics m;

	(void)state;
	probe_fixture(&fx, 1);
	/* Calls start while CLOSED and are still running when it trips. */
	assert_int_equal(resil_breaker_acquire(fx.b, &slow_call), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &slow2), RESIL_OK);
	open_then_half_open(&fx);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	/* Its success would close a HALF_OPEN breaker: it must not. */
	assert_int_equal(
	    resil_breaker_record(fx.b, &slow_call, RESIL_OUTCOME_SUCCESS),
	    RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.stale, 1);
	assert_int_equal(m.probes_reported, 0);
	/* Nor may a stale permit's release; reporting it again is misuse. */
	assert_int_equal(
	    resil_breaker_record(fx.b, &slow_call, RESIL_OUTCOME_FAILURE),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_breaker_release(fx.b, &slow2), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &slow2), RESIL_E_OPEN);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.probes_granted, 1);
	assert_int_equal(m.stale, 1);
	resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_counts_start_empty_on_close(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	int i;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.window_size = 10;
	fx.cfg.min_calls = 4;
	fx.cfg.open_wait_ns = 5;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE); /* 2 of 4 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	resil_manual_clock_advance(&fx.mc, 5);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 0);
	assert_int_equal(m.window_failures, 0);
	/* The old failures are gone: 3 successes + 1 failure stay CLOSED. */
	for (i = 0; i < 3; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 4);
	assert_true(m.failure_rate == 25.0f);
	resil_breaker_free(fx.b);
}

static void
test_breaker_exponential_wait_with_cap(void **state)
{
	fixture fx;
	resil_permit p;
	uint64_t left;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx.cfg.open_wait_ns = 10;
	fx.cfg.open_wait_multiplier = 2.0;
	fx.cfg.open_wait_max_ns = 35;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE); /* OPEN, wait 10 */
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 10);
	resil_manual_clock_advance(&fx.mc, 10);
	call(&fx, RESIL_OUTCOME_FAILURE); /* probe fails: wait 20 */
	resil_manual_clock_advance(&fx.mc, 19);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 1);
	resil_manual_clock_advance(&fx.mc, 1);
	call(&fx, RESIL_OUTCOME_FAILURE); /* wait 40, capped at 35 */
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 35);
	resil_manual_clock_advance(&fx.mc, 35);
	call(&fx, RESIL_OUTCOME_SUCCESS); /* closes: wait back to 10 */
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 10);
	resil_breaker_free(fx.b);
}

static void
test_breaker_max_half_open_time(void **state)
{
	fixture fx;
	resil_permit p;
	uint64_t left;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx.cfg.open_wait_ns = 10;
	fx.cfg.max_half_open_ns = 50;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_set(&fx.mc, 10);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	/* The probe never reports. */
	resil_manual_clock_set(&fx.mc, 59);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 0);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	resil_manual_clock_set(&fx.mc, 60);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_int_equal(left, 10);
	assert_event(&fx, 3, 60, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT);
	/* A long silence: the next acquire times out HALF_OPEN at its end
	 * and, the wait being over too, lets a probe in at once. */
	resil_manual_clock_set(&fx.mc, 70);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_manual_clock_set(&fx.mc, 1000);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	assert_event(&fx, 5, 120, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT);
	assert_event(&fx, 6, 1000, RESIL_BREAKER_OPEN, RESIL_BREAKER_HALF_OPEN,
	    RESIL_BREAKER_REASON_WAIT_ELAPSED);
	resil_breaker_free(fx.b);
}

/* ---- manual states ---- */

static void
test_breaker_late_probe_after_half_open_timeout(void **state)
{
	fixture fx;
	resil_permit p;
	resil_breaker_metrics m;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx.cfg.open_wait_ns = 10;
	fx.cfg.max_half_open_ns = 50;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_set(&fx.mc, 10);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	/* The probe reports at exactly entered + max: too late. */
	resil_manual_clock_set(&fx.mc, 60);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_event(&fx, 3, 60, RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_OPEN,
	    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.stale, 1);
	assert_int_equal(m.successes, 0);
	/* One tick earlier, it would have closed the breaker. */
	resil_manual_clock_set(&fx.mc, 70);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_manual_clock_set(&fx.mc, 119);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_forced_open_ignores_wait(void **state)
{
	fixture fx;
	resil_permit p;
	uint64_t left;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.open_wait_ns = 10;
	fx_new(&fx);
	assert_int_equal(resil_breaker_force_open(fx.b), RESIL_OK);
	resil_manual_clock_advance(&fx.mc, 1000000);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, UINT64_MAX);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_FORCED_OPEN);
	/* Forcing again is not a transition. */
	assert_int_equal(resil_breaker_force_open(fx.b), RESIL_OK);
	assert_int_equal(fx.rec.count, 1);
	assert_int_equal(resil_breaker_reset(fx.b), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_event(&fx, 1, 0, RESIL_BREAKER_CLOSED,
	    RESIL_BREAKER_FORCED_OPEN, RESIL_BREAKER_REASON_MANUAL);
	assert_event(&fx, 2, 1000000, RESIL_BREAKER_FORCED_OPEN,
	    RESIL_BREAKER_CLOSED, RESIL_BREAKER_REASON_MANUAL);
	resil_breaker_free(fx.b);
}

static void
test_breaker_disabled_records_nothing(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	int i;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx_new(&fx);
	assert_int_equal(resil_breaker_disable(fx.b), RESIL_OK);
	for (i = 0; i < 50; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_DISABLED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.failures, 0);
	assert_int_equal(m.window_calls, 0);
	resil_breaker_free(fx.b);
}

/* The success fast path (consecutive trigger alone, no timing) takes a
 * permit only in the very CLOSED episode that granted it: a DISABLED
 * permit counts nothing, a CLOSED permit from before a reset is stale,
 * and every fast success is counted once, on any thread's first call
 * too. */
static void
test_breaker_fast_success_only_in_its_closed_episode(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	resil_permit old, p;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.failure_rate_pct = 0;
	fx.cfg.consecutive_failures = 3;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.successes, 2);
	/* Granted in CLOSED, recorded after a reset (a new CLOSED
	 * episode): stale, not a success. */
	assert_int_equal(resil_breaker_acquire(fx.b, &old), RESIL_OK);
	assert_int_equal(resil_breaker_reset(fx.b), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &old, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.stale, 1);
	assert_int_equal(m.successes, 2);
	/* DISABLED records nothing, successes included. */
	assert_int_equal(resil_breaker_disable(fx.b), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.successes, 2);
	/* Back to CLOSED: the fast path counts again, once per permit. */
	assert_int_equal(resil_breaker_reset(fx.b), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.successes, 3);
	/* A failure streak sends a success to the full path, which ends
	 * it: two more failures do not trip. */
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_FAILURE);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.successes, 4);
	assert_int_equal(m.failures, 4);
	resil_breaker_free(fx.b);
}

static void
test_breaker_metrics_only_never_trips(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	int i;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx.cfg.consecutive_failures = 2;
	fx_new(&fx);
	assert_int_equal(resil_breaker_metrics_only(fx.b), RESIL_OK);
	for (i = 0; i < 20; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_METRICS_ONLY);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.failures, 20);
	assert_int_equal(m.window_calls, 20);
	assert_true(m.failure_rate == 100.0f);
	assert_int_equal(fx.rec.count, 1);
	resil_breaker_free(fx.b);
}

static void
test_breaker_reset_from_automatic_open(void **state)
{
	fixture fx;
	resil_breaker_metrics m;
	resil_permit p;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.min_calls = 1;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	assert_int_equal(resil_breaker_reset(fx.b), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 0);
	assert_int_equal(m.transitions, 2);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	/* A reset of a CLOSED breaker still clears its counts (and says so).
	 */
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_reset(fx.b), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 0);
	assert_int_equal(fx.rec.count, 3);
	/* Manual OPEN starts a fresh wait now. */
	resil_manual_clock_set(&fx.mc, 500);
	assert_int_equal(
	    resil_breaker_transition(fx.b, RESIL_BREAKER_OPEN), RESIL_OK);
	resil_manual_clock_set(&fx.mc, 500 + fx.cfg.open_wait_ns - 1);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_E_OPEN);
	resil_manual_clock_advance(&fx.mc, 1);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_breaker_free(fx.b);
}

/* ---- the clock at its edges ---- */

static void
test_breaker_open_wait_saturates_near_max(void **state)
{
	fixture fx;
	resil_permit p;
	uint64_t left;

	(void)state;
	fx_init(&fx, UINT64_MAX - 5);
	fx.cfg.min_calls = 1;
	fx.cfg.open_wait_ns = 10;
	fx_new(&fx);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 5);
	/* The clock moves backwards: still rejected, no underflow. */
	resil_manual_clock_set(&fx.mc, 3);
	assert_int_equal(
	    resil_breaker_acquire_ex(fx.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, UINT64_MAX - 3);
	resil_manual_clock_set(&fx.mc, UINT64_MAX);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	resil_breaker_free(fx.b);
}

/* ---- the convenience call ---- */

static int
flaky(void *ctx)
{
	int *n = ctx;

	(*n)++;
	return *n <= 2 ? -1 : 0;
}

static void
test_breaker_call_wraps_acquire_and_record(void **state)
{
	fixture fx;
	int n = 0, rc = 99;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.failure_rate_pct = 0;
	fx.cfg.consecutive_failures = 2;
	fx.cfg.open_wait_ns = 3;
	fx_new(&fx);
	assert_int_equal(
	    resil_breaker_call(fx.b, flaky, &n, NULL, &rc), RESIL_OK);
	assert_int_equal(rc, -1);
	assert_int_equal(
	    resil_breaker_call(fx.b, flaky, &n, NULL, &rc), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	rc = 99;
	assert_int_equal(
	    resil_breaker_call(fx.b, flaky, &n, NULL, &rc), RESIL_E_OPEN);
	assert_int_equal(n, 2); /* not called */
	assert_int_equal(rc, 99);
	resil_manual_clock_advance(&fx.mc, 3);
	assert_int_equal(
	    resil_breaker_call(fx.b, flaky, &n, NULL, &rc), RESIL_OK);
	assert_int_equal(rc, 0);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_names(void **state)
{
	(void)state;
	assert_string_equal(
	    resil_breaker_state_name(RESIL_BREAKER_HALF_OPEN), "HALF_OPEN");
	assert_string_equal(
	    resil_breaker_state_name(RESIL_BREAKER_METRICS_ONLY),
	    "METRICS_ONLY");
	assert_string_equal(
	    resil_breaker_state_name((resil_breaker_state)17), "UNKNOWN");
	assert_string_equal(
	    resil_breaker_reason_name(RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT),
	    "half_open_timeout");
	assert_string_equal(
	    resil_breaker_reason_name((resil_breaker_reason)99), "unknown");
}

/* ---- a permit is consumed by its first record or release ---- */

static void
test_breaker_probe_recorded_twice_is_misuse(void **state)
{
	fixture fx;
	resil_permit p, q;
	resil_breaker_metrics m;

	(void)state;
	probe_fixture(&fx, 2);
	open_then_half_open(&fx);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	/* Twice: it must not stand in for the second probe. */
	assert_int_equal(resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_breaker_release(fx.b, &p), RESIL_E_MISUSE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.probes_reported, 1);
	assert_int_equal(m.probes_granted, 1);
	/* A released probe is spent too. */
	assert_int_equal(resil_breaker_acquire(fx.b, &q), RESIL_OK);
	assert_int_equal(resil_breaker_release(fx.b, &q), RESIL_OK);
	assert_int_equal(resil_breaker_record(fx.b, &q, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_HALF_OPEN);
	/* The real second probe decides. */
	assert_int_equal(resil_breaker_acquire(fx.b, &q), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &q, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	resil_breaker_free(fx.b);
}

static void
test_breaker_failure_recorded_twice_is_misuse(void **state)
{
	fixture fx;
	resil_permit p;
	resil_breaker_metrics m;

	(void)state;
	fx_init(&fx, 0);
	fx.cfg.failure_rate_pct = 0;
	fx.cfg.consecutive_failures = 2;
	fx_new(&fx);
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(resil_breaker_record(fx.b, &p, RESIL_OUTCOME_FAILURE),
	    RESIL_E_MISUSE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.consecutive_failures, 1);
	assert_int_equal(m.failures, 1);
	/* The same on the hot path: a success recorded twice. */
	assert_int_equal(resil_breaker_acquire(fx.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_record(fx.b, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.successes, 1);
	resil_breaker_free(fx.b);
}

/* ---- a listener calling back into its own breaker ---- */

typedef struct reentrant {
	resil_breaker *b;
	resil_err reset_err;
	resil_err acquire_err;
	resil_err force_err;
	int calls;
} reentrant;

static void
reentrant_listener(const resil_breaker_event *ev, void *ctx)
{
	reentrant *r = ctx;
	resil_permit p;

	(void)ev;
	if (r->calls++ > 0)
		return;
	r->reset_err = resil_breaker_reset(r->b);
	r->force_err = resil_breaker_force_open(r->b);
	r->acquire_err = resil_breaker_acquire(r->b, &p);
}

static void
test_breaker_listener_reentry_is_misuse(void **state)
{
	resil_manual_clock mc;
	resil_breaker_config cfg;
	reentrant r;

	(void)state;
	memset(&r, 0, sizeof(r));
	resil_manual_clock_init(&mc, 0);
	resil_breaker_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.failure_rate_pct = 0;
	cfg.consecutive_failures = 1;
	cfg.listener = reentrant_listener;
	cfg.listener_ctx = &r;
	assert_int_equal(resil_breaker_new(&r.b, &cfg, NULL), RESIL_OK);
	/* It used to hang for ever here. */
	assert_int_equal(resil_breaker_force_open(r.b), RESIL_OK);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.reset_err, RESIL_E_MISUSE);
	assert_int_equal(r.force_err, RESIL_E_MISUSE);
	assert_int_equal(r.acquire_err, RESIL_E_MISUSE);
	assert_int_equal(
	    resil_breaker_get_state(r.b), RESIL_BREAKER_FORCED_OPEN);
	/* Outside the listener the breaker works as before. */
	assert_int_equal(resil_breaker_reset(r.b), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(r.b), RESIL_BREAKER_CLOSED);
	resil_breaker_free(r.b);
}

/* ---- the end of the clock ---- */

static void
test_breaker_time_window_at_end_of_clock(void **state)
{
	uint64_t t;

	(void)state;
	/* One tick before the end and at the end, the same trip. */
	for (t = UINT64_MAX - 1; t != 0; t++) {
		fixture fx;

		fx_init(&fx, t);
		fx.cfg.window_type = RESIL_WINDOW_TIME;
		fx.cfg.window_size = 4;
		fx.cfg.bucket_ns = 1;
		fx.cfg.min_calls = 2;
		fx_new(&fx);
		call(&fx, RESIL_OUTCOME_FAILURE);
		assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
		call(&fx, RESIL_OUTCOME_FAILURE);
		assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
		resil_breaker_free(fx.b);
	}
}

/* The count window against a reference ring, over seeded runs that keep
 * the window full of successes for long stretches (where a success writes
 * nothing) and then fail: the window's counts and the trip are exact. */
static void
test_breaker_count_window_matches_reference(void **state)
{
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= 300; seed++) {
		fixture fx;
		resil_rng rng;
		resil_breaker_metrics m;
		uint8_t ring[8];
		uint64_t head = 0, i, calls, fails, k;

		resil_rng_seed(&rng, seed);
		fx_init(&fx, 0);
		fx.cfg.window_size = 8;
		fx.cfg.min_calls = 8;
		fx.cfg.failure_rate_pct = 50;
		fx_new(&fx);
		memset(ring, 0, sizeof(ring));
		for (i = 0; i < 400; i++) {
			/* Mostly successes; a failure now and then. */
			int fail = resil_rng_next(&rng) % 16 == 0;

			call(&fx,
			    fail ? RESIL_OUTCOME_FAILURE
			         : RESIL_OUTCOME_SUCCESS);
			ring[head % 8] = (uint8_t)fail;
			head++;
			calls = head < 8 ? head : 8;
			for (fails = 0, k = 0; k < calls; k++)
				fails += ring[k];
			if (calls >= 8 && fails * 100 >= 50 * calls) {
				assert_int_equal(
				    st_of(&fx), RESIL_BREAKER_OPEN);
				break;
			}
			assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
			assert_int_equal(
			    resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
			assert_int_equal(m.window_calls, calls);
			assert_int_equal(m.window_failures, fails);
		}
		resil_breaker_free(fx.b);
	}
}

static void
window_is(resil_breaker *b, uint32_t calls, uint32_t failures)
{
	resil_breaker_metrics m;

	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, calls);
	assert_int_equal(m.window_failures, failures);
}

/*
 * Issue 29: a success in a count window full of successes writes only its
 * lifetime count (one word tells: the slots that are not a success, empty
 * ones included). The window stays "the last N outcomes" exactly: while it
 * fills, after a failure, after a reset and after a restore of a window
 * that was not full.
 */
static void
test_breaker_count_window_successes_exact(void **state)
{
	fixture fx, fy;
	resil_breaker_metrics m;
	unsigned char buf[512];
	size_t len;
	int i;

	(void)state;
	fx_init(&fx, 1000);
	fx.cfg.window_type = RESIL_WINDOW_COUNT;
	fx.cfg.window_size = 5;
	fx.cfg.min_calls = 5;
	fx.cfg.failure_rate_pct = 50;
	fx.cfg.consecutive_failures = 0;
	fx_new(&fx);
	for (i = 0; i < 3; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	window_is(fx.b, 3, 0); /* filling: every success lands */
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	window_is(fx.b, 5, 0);
	call(&fx, RESIL_OUTCOME_FAILURE);
	window_is(fx.b, 5, 1);
	for (i = 0; i < 4; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	window_is(fx.b, 5, 1); /* F S S S S */
	call(&fx, RESIL_OUTCOME_SUCCESS);
	window_is(fx.b, 5, 0); /* the failure left with the fifth success */
	for (i = 0; i < 10; i++)
		call(&fx, RESIL_OUTCOME_SUCCESS);
	window_is(fx.b, 5, 0);
	assert_int_equal(resil_breaker_get_metrics(fx.b, &m), RESIL_OK);
	assert_int_equal(m.successes, 20);
	assert_int_equal(m.failures, 1);
	/* Three failures of five trip it: the window counted them all. */
	for (i = 0; i < 2; i++)
		call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_CLOSED);
	call(&fx, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fx), RESIL_BREAKER_OPEN);
	/* Back to CLOSED: an empty window, filled again by successes. */
	assert_int_equal(
	    resil_breaker_transition(fx.b, RESIL_BREAKER_CLOSED), RESIL_OK);
	window_is(fx.b, 0, 0);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	call(&fx, RESIL_OUTCOME_SUCCESS);
	window_is(fx.b, 2, 0);
	/* A snapshot of that window (2 successes, not full), restored into
	 * a fresh breaker: its empty slots are not successes, so the next
	 * three successes fill it. */
	assert_int_equal(
	    resil_breaker_snapshot(fx.b, buf, sizeof(buf), &len), RESIL_OK);
	fx_init(&fy, 1000);
	fy.cfg = fx.cfg;
	fy.cfg.listener = NULL;
	fy.cfg.clock = resil_manual_clock_hook(&fy.mc);
	fx_new(&fy);
	assert_int_equal(
	    resil_breaker_restore(fy.b, buf, len, NULL), RESIL_OK);
	window_is(fy.b, 2, 0);
	for (i = 0; i < 3; i++)
		call(&fy, RESIL_OUTCOME_SUCCESS);
	window_is(fy.b, 5, 0);
	call(&fy, RESIL_OUTCOME_FAILURE);
	call(&fy, RESIL_OUTCOME_FAILURE);
	window_is(fy.b, 5, 2);
	assert_int_equal(st_of(&fy), RESIL_BREAKER_CLOSED);
	call(&fy, RESIL_OUTCOME_FAILURE);
	assert_int_equal(st_of(&fy), RESIL_BREAKER_OPEN);
	resil_breaker_free(fy.b);
	resil_breaker_free(fx.b);
}

/* One acquire and record of outcome o on b. */
static void
tw_record(resil_breaker *b, resil_outcome o)
{
	resil_permit pm;

	assert_int_equal(resil_breaker_acquire(b, &pm), RESIL_OK);
	assert_int_equal(resil_breaker_record(b, &pm, o), RESIL_OK);
}

/* A time window's success path (issue 39's time_success()): a success
 * that lifts the window to min_calls trips it when the rate is reached
 * (f, f, s, s at 50% and min_calls 4: OPEN at the second success, not
 * before), a success in a new bucket rolls it over, old buckets expire,
 * and the lifetime counts stay exact. */
static void
test_breaker_time_window_success_path(void **state)
{
	resil_manual_clock mc;
	resil_breaker_config cfg = resil_breaker_config_default();
	resil_breaker_metrics m;
	resil_breaker *b;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 5 * RESIL_NS_PER_SEC);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.window_type = RESIL_WINDOW_TIME;
	cfg.window_size = 10;
	cfg.bucket_ns = RESIL_NS_PER_SEC;
	cfg.min_calls = 4;
	cfg.failure_rate_pct = 50;
	assert_int_equal(resil_breaker_new(&b, &cfg, NULL), RESIL_OK);
	tw_record(b, RESIL_OUTCOME_FAILURE);
	tw_record(b, RESIL_OUTCOME_FAILURE);
	tw_record(b, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	tw_record(b, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	assert_int_equal(resil_breaker_reset(b), RESIL_OK);
	/* 30 successes over 3 buckets, then 29 failures: 29/59 < 50%. */
	for (i = 0; i < 30; i++) {
		tw_record(b, RESIL_OUTCOME_SUCCESS);
		if (i % 10 == 9)
			resil_manual_clock_advance(&mc, RESIL_NS_PER_SEC);
	}
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 30);
	for (i = 0; i < 29; i++)
		tw_record(b, RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	/* The 10 successes of the first bucket expire with time: the window
	 * holds 20 + 29, and the next failure trips it (30/50). */
	resil_manual_clock_advance(&mc, 7 * RESIL_NS_PER_SEC);
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 49);
	tw_record(b, RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	assert_int_equal(m.successes, 32);
	assert_int_equal(m.failures, 32);
	resil_breaker_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_breaker_config_defaults_are_valid),
		cmocka_unit_test(test_breaker_config_refuses_bad_fields),
		cmocka_unit_test(test_breaker_null_arguments),
		cmocka_unit_test(test_breaker_misuse_of_permits),
		cmocka_unit_test(
		    test_breaker_allocation_failure_leaks_nothing),
		cmocka_unit_test(test_breaker_probe_exactly_at_open_wait),
		cmocka_unit_test(test_breaker_seed_two_failures_open_for_five),
		cmocka_unit_test(test_breaker_seed_failed_probe_opens_again),
		cmocka_unit_test(test_breaker_failure_rate_boundary),
		cmocka_unit_test(test_breaker_min_calls_exactly),
		cmocka_unit_test(
		    test_breaker_min_calls_capped_at_count_window),
		cmocka_unit_test(test_breaker_count_window_evicts_oldest),
		cmocka_unit_test(test_breaker_slow_call_rate_strict_threshold),
		cmocka_unit_test(test_breaker_time_window_drops_old_outcomes),
		cmocka_unit_test(test_breaker_time_window_trips_within_span),
		cmocka_unit_test(test_breaker_time_window_success_can_trip),
		cmocka_unit_test(test_breaker_time_alone_never_trips),
		cmocka_unit_test(test_breaker_success_resets_consecutive),
		cmocka_unit_test(test_breaker_half_open_grants_exactly_k),
		cmocka_unit_test(
		    test_breaker_half_open_reopens_over_threshold),
		cmocka_unit_test(test_breaker_reopen_on_first_failure),
		cmocka_unit_test(
		    test_breaker_ignored_and_released_give_permit_back),
		cmocka_unit_test(test_breaker_stale_permit_changes_nothing),
		cmocka_unit_test(test_breaker_counts_start_empty_on_close),
		cmocka_unit_test(test_breaker_exponential_wait_with_cap),
		cmocka_unit_test(test_breaker_max_half_open_time),
		cmocka_unit_test(
		    test_breaker_late_probe_after_half_open_timeout),
		cmocka_unit_test(test_breaker_forced_open_ignores_wait),
		cmocka_unit_test(test_breaker_disabled_records_nothing),
		cmocka_unit_test(
		    test_breaker_fast_success_only_in_its_closed_episode),
		cmocka_unit_test(test_breaker_metrics_only_never_trips),
		cmocka_unit_test(test_breaker_reset_from_automatic_open),
		cmocka_unit_test(test_breaker_open_wait_saturates_near_max),
		cmocka_unit_test(test_breaker_call_wraps_acquire_and_record),
		cmocka_unit_test(test_breaker_names),
		cmocka_unit_test(test_breaker_probe_recorded_twice_is_misuse),
		cmocka_unit_test(
		    test_breaker_failure_recorded_twice_is_misuse),
		cmocka_unit_test(test_breaker_listener_reentry_is_misuse),
		cmocka_unit_test(test_breaker_time_window_at_end_of_clock),
		cmocka_unit_test(test_breaker_count_window_matches_reference),
		cmocka_unit_test(test_breaker_count_window_successes_exact),
		cmocka_unit_test(test_breaker_time_window_success_path),
	};

	return cmocka_run_group_tests_name("breaker", tests, NULL, NULL);
}

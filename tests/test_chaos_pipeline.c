/*
 * Chaos in the pipeline (issue 28.1, docs/chaos.md "Where chaos sits in
 * the flow"): a borrowed resil_chaos is asked once per attempt, after
 * the breaker, the limiters and the pick, just before the attempt; its
 * fault and outcome answer the attempt without the user's function, its
 * latency delays it (a WAIT, counted against its timeout), its behaviour
 * runs first. Every stage above reacts as to the real thing. Through the
 * blocking driver and the call machine, on the manual clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/pipeline.h>

typedef struct xfx {
	resil_manual_clock mc;
	resil_chaos_config ccfg;
	resil_chaos *ch;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	int calls;
	uint64_t called_at;
	int behaved;
} xfx;

static int
fn(void *ctx, const resil_args *args, resil_value *out)
{
	xfx *x = ctx;

	(void)args;
	x->calls++;
	x->called_at = resil_manual_clock_now(&x->mc);
	*out = resil_value_int(1);
	return 0;
}

static void
behave(void *ctx, uint64_t now)
{
	xfx *x = ctx;

	(void)now;
	x->behaved++;
}

static void
xfx_init(xfx *x)
{
	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000);
	resil_chaos_config_init(&x->ccfg);
	x->ccfg.rate = 1.0;
	resil_pipeline_config_init(&x->cfg);
	x->cfg.service = "StockService";
	x->cfg.clock = resil_manual_clock_hook(&x->mc);
}

static void
xfx_new(xfx *x)
{
	resil_diag diag;

	if (resil_chaos_new(&x->ch, &x->ccfg, &diag) != RESIL_OK)
		fail_msg("chaos: %s", diag.msg);
	x->cfg.chaos = x->ch;
	if (resil_pipeline_new(&x->p, &x->cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
}

static void
xfx_end(xfx *x)
{
	resil_pipeline_free(x->p);
	resil_chaos_free(x->ch);
	resil_chaos_config_deinit(&x->ccfg);
}

static resil_err
call(xfx *x, resil_result *r)
{
	resil_args a = { "getStock", NULL, 0 };

	return resil_pipeline_call(x->p, &a, fn, x, r);
}

static void
test_chaos_fault_is_a_failure_to_every_stage(void **state)
{
	resil_breaker_metrics bm;
	resil_result r;
	xfx x;

	(void)state;
	xfx_init(&x);
	x.ccfg.fault_rc = 111;
	x.cfg.retry_enabled = 1;
	x.cfg.retry.max_attempts = 3;
	x.cfg.retry.base_delay_ns = 0;
	x.cfg.breaker_enabled = 1;
	x.cfg.mock = "fail:return 5";
	xfx_new(&x);
	/* Three attempts fail with the fault's rc, the breaker counts
	 * them, then the fail: mock answers; the function never runs. */
	assert_int_equal(call(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 5);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(r.last_failure_rc, 111);
	resil_result_free(&r);
	assert_int_equal(x.calls, 0);
	assert_int_equal(
	    resil_breaker_get_metrics(resil_pipeline_breaker(x.p, NULL), &bm),
	    RESIL_OK);
	assert_int_equal(bm.failures, 3);
	/* The master switch off at run time: the real call again. */
	assert_int_equal(
	    resil_chaos_set_enabled(x.ch, RESIL_CHAOS_MASTER, 0), RESIL_OK);
	assert_int_equal(call(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(x.calls, 1);
	resil_result_free(&r);
	xfx_end(&x);
}

static void
test_chaos_outcome_and_behaviour(void **state)
{
	resil_diag diag;
	resil_result r;
	xfx x;

	(void)state;
	xfx_init(&x);
	assert_int_equal(
	    resil_chaos_config_set(&x.ccfg, "chaos.outcome", "42", &diag),
	    RESIL_OK);
	xfx_new(&x);
	assert_int_equal(call(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 42);
	resil_result_free(&r);
	assert_int_equal(x.calls, 0);
	xfx_end(&x);

	/* A behaviour runs before the attempt, which then runs. */
	xfx_init(&x);
	x.ccfg.behaviour_fn = behave;
	x.ccfg.behaviour_ctx = &x;
	xfx_new(&x);
	assert_int_equal(call(&x, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 1);
	resil_result_free(&r);
	assert_int_equal(x.behaved, 1);
	assert_int_equal(x.calls, 1);
	xfx_end(&x);
}

static void
test_chaos_latency_is_a_wait_and_counts_against_the_timeout(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_call c;
	resil_call_next st;
	resil_result r;
	resil_value v;
	xfx x;

	(void)state;
	xfx_init(&x);
	x.ccfg.latency_ns = 50;
	x.cfg.timeout_ns = 100;
	xfx_new(&x);
	/* The machine: WAIT until now + 50, then the RUN, whose deadline
	 * is admission + timeout. */
	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start(&c, x.p, NULL, &a, &r, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_true(st.until == 1050);
	assert_int_equal(resil_call_outstanding(&c), 0);
	assert_int_equal(resil_call_step(&c, 1049, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_step(&c, 1050, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_int_equal(st.attempt, 1);
	assert_true(st.deadline == 1100);
	v = resil_value_int(3);
	assert_int_equal(resil_call_report(&c, 1, 0, &v, 1060), RESIL_OK);
	assert_int_equal(resil_call_step(&c, 1060, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.value.u.i, 3);
	resil_result_free(&r);
	/* The blocking driver sleeps through it on the pipeline's clock. */
	resil_manual_clock_set(&x.mc, 2000);
	assert_int_equal(call(&x, &r), RESIL_OK);
	assert_true(x.called_at == 2050);
	resil_result_free(&r);
	xfx_end(&x);

	/* Latency past the timeout: a TIMEOUT at admission + timeout + 1,
	 * the function never called. */
	xfx_init(&x);
	x.ccfg.latency_ns = 500;
	x.cfg.timeout_ns = 100;
	xfx_new(&x);
	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start(&c, x.p, NULL, &a, &r, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_true(st.until == 1101);
	assert_int_equal(resil_call_step(&c, 1101, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_TIMEOUT);
	assert_int_equal(resil_call_outstanding(&c), 0);
	resil_result_free(&r);
	assert_int_equal(x.calls, 0);
	xfx_end(&x);
}

static void
test_chaos_cancel_while_held_back(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_call c;
	resil_call_next st;
	resil_result r;
	xfx x;
	int k;

	(void)state;
	xfx_init(&x);
	x.ccfg.latency_ns = 50;
	x.cfg.bulkhead_enabled = 1;
	x.cfg.bulkhead.max_concurrent = 1;
	xfx_new(&x);
	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start(&c, x.p, NULL, &a, &r, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_cancel(&c, 1010), RESIL_OK);
	assert_int_equal(resil_call_outstanding(&c), 0);
	resil_result_free(&r);
	/* Its bulkhead permit came back: later calls run. */
	for (k = 0; k < 2; k++) {
		assert_int_equal(call(&x, &r), RESIL_OK);
		resil_result_free(&r);
	}
	assert_int_equal(x.calls, 2);
	xfx_end(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chaos_fault_is_a_failure_to_every_stage),
		cmocka_unit_test(test_chaos_outcome_and_behaviour),
		cmocka_unit_test(
		    test_chaos_latency_is_a_wait_and_counts_against_the_timeout),
		cmocka_unit_test(test_chaos_cancel_while_held_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

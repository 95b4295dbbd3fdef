/*
 * The call machine (resil_call_*) stepped by hand on the manual clock:
 * actions and their times, late answers, cancellation, bad input, method
 * handles and hedging. The whole pipeline and scenario suites also run
 * through the machine (test_pipeline_machine, test_scenarios_machine);
 * this file covers what only an event loop can do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/pipeline.h>

#include "support/fail_alloc.h"

typedef struct fx {
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	fail_alloc fa;
	resil_args args;
	resil_call call;
	resil_call_next st;
	resil_result r;
} fx;

static void
fx_init(fx *f)
{
	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, 100);
	resil_pipeline_config_init(&f->cfg);
	f->cfg.service = "StockService";
	f->cfg.clock = resil_manual_clock_hook(&f->mc);
	f->cfg.alloc = fail_alloc_init(&f->fa, 0);
	f->args.method = "getStock";
	f->args.data = "k";
	f->args.len = 1;
}

static void
fx_new(fx *f)
{
	resil_diag diag;

	diag.msg[0] = '\0';
	if (resil_pipeline_new(&f->p, &f->cfg, &diag) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", diag.msg);
}

static void
fx_free(fx *f)
{
	resil_result_free(&f->r);
	resil_pipeline_free(f->p);
	assert_int_equal(fail_alloc_live(&f->fa), 0);
}

static uint64_t
now(fx *f)
{
	return resil_manual_clock_now(&f->mc);
}

static void
start(fx *f)
{
	assert_int_equal(resil_call_start(&f->call, f->p, NULL, &f->args,
	                     &f->r, now(f), &f->st),
	    RESIL_OK);
}

static void
step(fx *f)
{
	assert_int_equal(resil_call_step(&f->call, now(f), &f->st), RESIL_OK);
}

/* Report attempt id with rc and, for rc 0, the int v. */
static void
report(fx *f, uint32_t id, int rc, int64_t v)
{
	resil_value val = rc == 0 ? resil_value_int(v) : resil_value_null();

	assert_int_equal(
	    resil_call_report(&f->call, id, rc, &val, now(f)), RESIL_OK);
	assert_int_equal(val.type, RESIL_VALUE_NULL); /* moved in */
}

static void
expect_run(fx *f, uint32_t id, uint64_t deadline)
{
	assert_int_equal(f->st.action, RESIL_CALL_RUN);
	assert_int_equal(f->st.attempt, id);
	assert_int_equal(f->st.deadline, deadline);
}

static void
expect_wait(fx *f, uint64_t until)
{
	assert_int_equal(f->st.action, RESIL_CALL_WAIT);
	assert_int_equal(f->st.until, until);
}

static void
test_call_success_is_run_then_done(void **state)
{
	fx f;
	resil_pipeline_metrics pm;

	(void)state;
	fx_init(&f);
	f.cfg.breaker_enabled = 1;
	f.cfg.retry_enabled = 1;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	assert_int_equal(resil_call_outstanding(&f.call), 1);
	report(&f, 1, 0, 8);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(f.r.value.u.i, 8);
	assert_int_equal(f.r.attempts, 1);
	assert_int_equal(f.r.breaker_state, RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_call_outstanding(&f.call), 0);
	assert_int_equal(resil_pipeline_get_metrics(f.p, &pm), RESIL_OK);
	assert_int_equal(pm.calls, 1);
	assert_int_equal(pm.live, 1);
	fx_free(&f);
}

static void
test_call_backoff_is_a_wait_until_its_tick(void **state)
{
	fx f;

	(void)state;
	fx_init(&f);
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 50;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	resil_manual_clock_advance(&f.mc, 5); /* the attempt takes 5 */
	report(&f, 1, -1, 0);
	step(&f);
	expect_wait(&f, 155);
	/* Early steps change nothing. */
	resil_manual_clock_set(&f.mc, 154);
	step(&f);
	expect_wait(&f, 155);
	resil_manual_clock_set(&f.mc, 155);
	step(&f);
	expect_run(&f, 2, UINT64_MAX);
	report(&f, 2, 0, 9);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.value.u.i, 9);
	assert_int_equal(f.r.attempts, 2);
	fx_free(&f);
}

static void
test_call_deadline_comes_from_timeout_and_retry_deadline(void **state)
{
	fx f;

	(void)state;
	fx_init(&f);
	f.cfg.timeout_ns = 30;
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 10;
	f.cfg.retry.deadline_ns = 45;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, 130); /* the timeout: 100 + 30 */
	resil_manual_clock_set(&f.mc, 120);
	report(&f, 1, -1, 0);
	step(&f);
	expect_wait(&f, 130);
	resil_manual_clock_set(&f.mc, 130);
	step(&f);
	expect_run(&f, 2, 145); /* the retry deadline: 100 + 45 */
	report(&f, 2, -1, 0);
	step(&f);
	/* A third attempt would start at 140, before 145: it is allowed. */
	expect_wait(&f, 140);
	resil_manual_clock_set(&f.mc, 140);
	step(&f);
	expect_run(&f, 3, 145);
	fx_free(&f);
	/* Freed with an attempt out: nothing leaks (checked in fx_free). */
}

static void
test_call_unanswered_attempt_times_out_and_late_answer_is_dropped(void **state)
{
	fx f;
	resil_value late;
	resil_pipeline_metrics pm;
	resil_bulkhead_metrics bm;

	(void)state;
	fx_init(&f);
	f.cfg.timeout_ns = 10;
	f.cfg.bulkhead_enabled = 1;
	f.cfg.bulkhead.max_concurrent = 1;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, 110);
	resil_manual_clock_set(&f.mc, 110); /* duration 10: not late yet */
	step(&f);
	expect_wait(&f, 111);
	resil_manual_clock_set(&f.mc, 111);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_E_TIMEOUT);
	assert_int_equal(f.r.attempts, 1);
	assert_int_equal(resil_pipeline_get_metrics(f.p, &pm), RESIL_OK);
	assert_int_equal(pm.timeouts, 1);
	assert_int_equal(
	    resil_bulkhead_get_metrics(resil_pipeline_bulkhead(f.p), &bm),
	    RESIL_OK);
	assert_int_equal(bm.in_flight, 0);
	assert_int_equal(resil_call_outstanding(&f.call), 1);

	/* The answer comes after all: accepted, freed, forgotten. */
	assert_int_equal(
	    resil_value_string(&late, "late", 4, &f.fa.hook), RESIL_OK);
	assert_int_equal(
	    resil_call_report(&f.call, 1, 0, &late, 200), RESIL_OK);
	assert_int_equal(late.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_call_outstanding(&f.call), 0);
	assert_int_equal(f.r.err, RESIL_E_TIMEOUT); /* unchanged */
	/* Twice is once too many. */
	late = resil_value_int(3);
	assert_int_equal(
	    resil_call_report(&f.call, 1, 0, &late, 200), RESIL_E_MISUSE);
	assert_int_equal(late.u.i, 3);
	fx_free(&f);
}

static void
test_call_bad_input_changes_nothing(void **state)
{
	fx f, g;
	resil_call zero;
	resil_value v = resil_value_int(5);
	const resil_method *other;
	resil_result untouched;

	(void)state;
	fx_init(&f);
	f.cfg.retry_enabled = 1;
	fx_new(&f);
	fx_init(&g);
	fx_new(&g);

	assert_int_equal(
	    resil_call_start(NULL, f.p, NULL, &f.args, &f.r, 0, &f.st),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_call_start(&f.call, NULL, NULL, &f.args, &f.r, 0, &f.st),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_call_start(&f.call, f.p, NULL, NULL, &f.r, 0, &f.st),
	    RESIL_E_INVAL);
	assert_int_equal(resil_call_step(NULL, 0, &f.st), RESIL_E_INVAL);
	assert_int_equal(resil_call_report(NULL, 1, 0, &v, 0), RESIL_E_INVAL);
	assert_int_equal(resil_call_cancel(NULL, 0), RESIL_E_INVAL);

	/* A call never started. */
	memset(&zero, 0, sizeof(zero));
	assert_int_equal(resil_call_step(&zero, 0, &f.st), RESIL_E_MISUSE);
	assert_int_equal(
	    resil_call_report(&zero, 1, 0, &v, 0), RESIL_E_MISUSE);
	assert_int_equal(resil_call_cancel(&zero, 0), RESIL_E_MISUSE);
	assert_int_equal(resil_call_outstanding(&zero), 0);

	/* A handle of another pipeline: refused, *out untouched. */
	assert_int_equal(
	    resil_pipeline_method(g.p, "getStock", &other), RESIL_OK);
	memset(&untouched, 0x5a, sizeof(untouched));
	memcpy(&f.r, &untouched, sizeof(untouched));
	assert_int_equal(resil_call_start(&f.call, f.p, other, &f.args, &f.r,
	                     now(&f), &f.st),
	    RESIL_E_INVAL);
	assert_memory_equal(&f.r, &untouched, sizeof(untouched));
	resil_result_init(&f.r);

	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	/* Unknown attempts: refused, the value stays the caller's. */
	assert_int_equal(
	    resil_call_report(&f.call, 0, 0, &v, 0), RESIL_E_MISUSE);
	assert_int_equal(
	    resil_call_report(&f.call, 2, 0, &v, 0), RESIL_E_MISUSE);
	assert_int_equal(v.type, RESIL_VALUE_INT);
	assert_int_equal(v.u.i, 5);
	assert_int_equal(resil_call_outstanding(&f.call), 1);
	report(&f, 1, 0, 8);
	assert_int_equal(
	    resil_call_report(&f.call, 1, 0, &v, 0), RESIL_E_MISUSE);
	assert_int_equal(v.u.i, 5);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	/* Done: stepping or cancelling again is misuse; the answer stays. */
	assert_int_equal(
	    resil_call_step(&f.call, now(&f), &f.st), RESIL_E_MISUSE);
	assert_int_equal(resil_call_cancel(&f.call, now(&f)), RESIL_E_MISUSE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.value.u.i, 8);
	fx_free(&f);
	fx_free(&g);
}

static void
test_call_cancel_gives_permits_back(void **state)
{
	fx f;
	resil_bulkhead_metrics bm;
	resil_breaker *b;
	resil_permit p;
	resil_pipeline_metrics pm;

	(void)state;
	fx_init(&f);
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.consecutive_failures = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.permitted_probes = 1;
	f.cfg.breaker.open_wait_ns = 10;
	f.cfg.bulkhead_enabled = 1;
	f.cfg.bulkhead.max_concurrent = 1;
	fx_new(&f);
	b = resil_pipeline_breaker(f.p, NULL);
	assert_int_equal(resil_breaker_force_open(b), RESIL_OK);
	assert_int_equal(resil_breaker_reset(b), RESIL_OK);
	/* Trip it, then let the wait pass: the next call is the probe. */
	start(&f);
	report(&f, 1, -1, 0);
	step(&f);
	assert_int_equal(f.r.err, RESIL_E_CALL);
	resil_result_free(&f.r);
	resil_manual_clock_advance(&f.mc, 10);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_E_OPEN);
	assert_int_equal(
	    resil_bulkhead_get_metrics(resil_pipeline_bulkhead(f.p), &bm),
	    RESIL_OK);
	assert_int_equal(bm.in_flight, 1);

	assert_int_equal(resil_call_cancel(&f.call, now(&f)), RESIL_OK);
	assert_int_equal(f.r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(f.r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_string_equal(f.r.message, "the call was cancelled");
	assert_int_equal(
	    resil_bulkhead_get_metrics(resil_pipeline_bulkhead(f.p), &bm),
	    RESIL_OK);
	assert_int_equal(bm.in_flight, 0);
	/* The probe permit is back. */
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_release(b, &p), RESIL_OK);
	/* Stepping a cancelled call is misuse; its late answer is dropped. */
	assert_int_equal(
	    resil_call_step(&f.call, now(&f), &f.st), RESIL_E_MISUSE);
	report(&f, 1, 0, 8);
	assert_int_equal(resil_call_outstanding(&f.call), 0);
	assert_int_equal(resil_pipeline_get_metrics(f.p, &pm), RESIL_OK);
	assert_int_equal(pm.unavailable, 1);
	fx_free(&f);
}

static void
test_call_many_calls_interleave_on_one_pipeline(void **state)
{
	fx f;
	resil_call c2;
	resil_call_next s2;
	resil_result r2;
	resil_value v;
	resil_pipeline_metrics pm;

	(void)state;
	fx_init(&f);
	f.cfg.retry_enabled = 1;
	f.cfg.retry.base_delay_ns = 20;
	f.cfg.cache_enabled = 1;
	fx_new(&f);
	start(&f);
	assert_int_equal(
	    resil_call_start(&c2, f.p, NULL, &f.args, &r2, now(&f), &s2),
	    RESIL_OK);
	assert_int_equal(s2.action, RESIL_CALL_RUN);
	/* The second call answers first and fills the cache. */
	v = resil_value_int(7);
	assert_int_equal(
	    resil_call_report(&c2, s2.attempt, 0, &v, now(&f)), RESIL_OK);
	assert_int_equal(resil_call_step(&c2, now(&f), &s2), RESIL_OK);
	assert_int_equal(s2.action, RESIL_CALL_DONE);
	assert_int_equal(r2.value.u.i, 7);
	/* The first fails three times and is answered from the cache. */
	report(&f, 1, -1, 0);
	step(&f);
	expect_wait(&f, 120);
	resil_manual_clock_set(&f.mc, 120);
	step(&f);
	expect_run(&f, 2, UINT64_MAX);
	report(&f, 2, -1, 0);
	step(&f);
	resil_manual_clock_set(&f.mc, 140);
	step(&f);
	expect_run(&f, 3, UINT64_MAX);
	report(&f, 3, -1, 0);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(f.r.age, 40);
	assert_int_equal(f.r.value.u.i, 7);
	assert_int_equal(f.r.attempts, 3);
	assert_int_equal(resil_pipeline_get_metrics(f.p, &pm), RESIL_OK);
	assert_int_equal(pm.calls, 2);
	assert_int_equal(pm.cache, 1);
	resil_result_free(&r2);
	fx_free(&f);
}

static int
fail_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)args;
	(void)out;
	(*(int *)ctx)++;
	return -1;
}

static void
test_call_method_handles(void **state)
{
	static const resil_method_config methods[] = {
		{ "getStock", RESIL_TYPE_ANY, NULL, 0, 1, 0, RESIL_PRIORITY_UNSET, 0 },
	};
	fx f;
	const resil_method *gs, *other, *again;
	int calls = 0;

	(void)state;
	fx_init(&f);
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 1;
	f.cfg.methods = methods;
	f.cfg.nmethods = 1;
	fx_new(&f);
	assert_int_equal(
	    resil_pipeline_method(f.p, "getStock", &gs), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_method(f.p, "getStock", &again), RESIL_OK);
	assert_ptr_equal(gs, again);
	assert_string_equal(resil_method_name(gs), "getStock");
	assert_int_equal(
	    resil_pipeline_method(f.p, "other", &other), RESIL_OK);
	assert_string_equal(resil_method_name(other), "");
	assert_int_equal(
	    resil_pipeline_method(f.p, NULL, &other), RESIL_E_INVAL);

	/* getStock makes one attempt, the service-level setting three. */
	assert_int_equal(resil_pipeline_call_method(
	                     f.p, gs, &f.args, fail_fn, &calls, &f.r),
	    RESIL_E_CALL);
	assert_int_equal(calls, 1);
	assert_int_equal(
	    resil_pipeline_call(f.p, &f.args, fail_fn, &calls, &f.r),
	    RESIL_E_CALL);
	assert_int_equal(calls, 2);
	assert_int_equal(
	    resil_pipeline_method(f.p, "other", &other), RESIL_OK);
	assert_int_equal(resil_pipeline_call_method(
	                     f.p, other, &f.args, fail_fn, &calls, &f.r),
	    RESIL_E_CALL);
	assert_int_equal(calls, 5);
	assert_int_equal(f.r.attempts, 3);
	assert_int_equal(resil_pipeline_call_method(
	                     f.p, NULL, &f.args, fail_fn, &calls, &f.r),
	    RESIL_E_INVAL);
	assert_int_equal(calls, 5);
	fx_free(&f);
}

static void
test_call_method_handle_of_another_pipeline_is_refused(void **state)
{
	fx f, g;
	const resil_method *m;
	int calls = 0;

	(void)state;
	fx_init(&f);
	fx_new(&f);
	fx_init(&g);
	fx_new(&g);
	assert_int_equal(resil_pipeline_method(g.p, "getStock", &m), RESIL_OK);
	f.r.rc = 77;
	assert_int_equal(
	    resil_pipeline_call_method(f.p, m, &f.args, fail_fn, &calls, &f.r),
	    RESIL_E_INVAL);
	assert_int_equal(calls, 0);
	assert_int_equal(f.r.rc, 77);
	resil_result_init(&f.r);
	fx_free(&f);
	fx_free(&g);
}

/* ---- hedging ---- */

static void
hedge_fx(fx *f, uint32_t max)
{
	fx_init(f);
	f->cfg.hedge_max = max;
	f->cfg.hedge_delay_ns = 10;
	f->cfg.breaker_enabled = 1;
	f->cfg.breaker.window_size = 100;
	f->cfg.breaker.min_calls = 100;
	f->cfg.bulkhead_enabled = 1;
	f->cfg.bulkhead.max_concurrent = 10;
}

static void
test_call_hedge_after_delay_first_success_wins(void **state)
{
	fx f;
	resil_bulkhead_metrics bm;
	resil_breaker_metrics brm;

	(void)state;
	hedge_fx(&f, 2);
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	resil_manual_clock_set(&f.mc, 105);
	step(&f);
	expect_wait(&f, 110);
	resil_manual_clock_set(&f.mc, 110);
	step(&f);
	expect_run(&f, 2, UINT64_MAX);
	step(&f);
	expect_wait(&f, 120); /* the next hedge, 10 after the last */
	assert_int_equal(resil_call_outstanding(&f.call), 2);
	resil_manual_clock_set(&f.mc, 115);
	report(&f, 2, 0, 22); /* the hedge answers first */
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.value.u.i, 22);
	assert_int_equal(f.r.attempts, 2);
	/* The loser's permits are back; its answer is dropped. */
	assert_int_equal(
	    resil_bulkhead_get_metrics(resil_pipeline_bulkhead(f.p), &bm),
	    RESIL_OK);
	assert_int_equal(bm.in_flight, 0);
	report(&f, 1, 0, 11);
	assert_int_equal(f.r.value.u.i, 22);
	assert_int_equal(
	    resil_breaker_get_metrics(resil_pipeline_breaker(f.p, NULL), &brm),
	    RESIL_OK);
	assert_int_equal(brm.successes, 1);
	assert_int_equal(brm.failures, 0);
	fx_free(&f);
}

static void
test_call_hedge_all_fail_gives_last_error(void **state)
{
	fx f;

	(void)state;
	hedge_fx(&f, 2);
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	report(&f, 1, -1, 0);
	step(&f);
	/* A failure starts the next hedge at once. */
	expect_run(&f, 2, UINT64_MAX);
	step(&f);
	expect_wait(&f, 110); /* then the delay runs again */
	resil_manual_clock_set(&f.mc, 110);
	step(&f);
	expect_run(&f, 3, UINT64_MAX);
	step(&f);
	expect_wait(&f, UINT64_MAX); /* no hedge left: only answers */
	report(&f, 3, -3, 0);
	step(&f);
	expect_wait(&f, UINT64_MAX);
	resil_manual_clock_set(&f.mc, 130);
	report(&f, 2, -2, 0);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_E_CALL);
	assert_int_equal(f.r.rc, -2); /* the one that failed last */
	assert_int_equal(f.r.attempts, 3);
	fx_free(&f);
}

static void
test_call_hedge_spends_the_retry_budget(void **state)
{
	fx f;
	resil_retry_metrics rm;

	(void)state;
	hedge_fx(&f, 3);
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 1;
	f.cfg.retry.budget_ratio = 1.0; /* one token per call */
	f.cfg.retry.budget_max_tokens = 10;
	f.cfg.retry.budget_min_retries = 0;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	resil_manual_clock_set(&f.mc, 110);
	step(&f);
	expect_run(&f, 2, UINT64_MAX); /* the call's own token */
	resil_manual_clock_set(&f.mc, 120);
	step(&f);
	expect_wait(&f, UINT64_MAX); /* the bank is empty: no more hedges */
	assert_int_equal(
	    resil_retry_get_metrics(resil_pipeline_retry(f.p, NULL), &rm),
	    RESIL_OK);
	assert_int_equal(rm.budget_refusals, 1);
	report(&f, 1, 0, 1);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.value.u.i, 1);
	fx_free(&f);
}

/* Issue 25.1: attempt 1 fails (or is rejected) and the budget refuses
 * the hedge: the call concludes with that failure, it never waits for
 * ever with nothing out. */
static void
test_call_hedge_refused_by_budget_concludes(void **state)
{
	resil_call_next st;
	fx f;
	int k;

	(void)state;
	for (k = 0; k < 3; k++) {
		hedge_fx(&f, 2);
		f.cfg.retry_enabled = 1;
		f.cfg.retry.max_attempts = 1;
		f.cfg.retry.budget_ratio = 0.000001; /* never a whole token */
		f.cfg.retry.budget_max_tokens = 1;
		f.cfg.retry.budget_min_retries = 0;
		if (k == 2)
			f.cfg.bulkhead.max_concurrent = 1;
		fx_new(&f);
		if (k == 1)
			/* The breaker OPEN: attempt 1 is rejected. */
			assert_int_equal(
			    resil_breaker_force_open(
			        resil_pipeline_breaker(f.p, NULL)),
			    RESIL_OK);
		if (k == 2) {
			/* The bulkhead full: attempt 1 is rejected. */
			assert_int_equal(resil_call_start(&f.call, f.p, NULL,
			                     &f.args, &f.r, now(&f), &st),
			    RESIL_OK);
			assert_int_equal(st.action, RESIL_CALL_RUN);
			{
				resil_call other;
				resil_result r2;
				resil_call_next st2;

				assert_int_equal(
				    resil_call_start(&other, f.p, NULL,
				        &f.args, &r2, now(&f), &st2),
				    RESIL_OK);
				assert_int_equal(st2.action, RESIL_CALL_DONE);
				assert_int_equal(r2.err, RESIL_E_LIMITED);
				resil_result_free(&r2);
			}
			report(&f, st.attempt, 0, 1);
			assert_int_equal(
			    resil_call_step(&f.call, now(&f), &st), RESIL_OK);
			assert_int_equal(st.action, RESIL_CALL_DONE);
			fx_free(&f);
			continue;
		}
		start(&f);
		if (k == 0) {
			expect_run(&f, 1, UINT64_MAX);
			resil_manual_clock_set(&f.mc, 105);
			report(&f, 1, 5, 0);
			step(&f);
		}
		assert_int_equal(f.st.action, RESIL_CALL_DONE);
		assert_int_equal(
		    f.r.err, k == 0 ? RESIL_E_CALL : RESIL_E_OPEN);
		fx_free(&f);
	}
}

/* Issue 25.4: starting a call over one still in flight is refused and
 * loses no permit: the bulkhead of 1 and the breaker's probe stay with
 * the first call, which then finishes normally. */
static void
test_call_start_over_a_live_call_is_refused(void **state)
{
	resil_result r2;
	resil_call_next st2;
	fx f;
	int k;

	(void)state;
	fx_init(&f);
	f.cfg.bulkhead_enabled = 1;
	f.cfg.bulkhead.max_concurrent = 1;
	f.cfg.breaker_enabled = 1;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	memset(&r2, 0, sizeof(r2));
	assert_int_equal(
	    resil_call_start(&f.call, f.p, NULL, &f.args, &r2, now(&f), &st2),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_call_outstanding(&f.call), 1);
	report(&f, 1, 0, 4);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.value.u.i, 4);
	resil_result_free(&f.r);
	/* The bulkhead's one slot is free again: later calls run. */
	for (k = 0; k < 3; k++) {
		start(&f);
		expect_run(&f, 1, UINT64_MAX);
		report(&f, 1, 0, k);
		step(&f);
		assert_int_equal(f.st.action, RESIL_CALL_DONE);
		assert_int_equal(f.r.err, RESIL_OK);
		resil_result_free(&f.r);
	}
	/* A cancelled call may be started over. */
	start(&f);
	assert_int_equal(resil_call_cancel(&f.call, now(&f)), RESIL_OK);
	resil_result_free(&f.r);
	start(&f);
	expect_run(&f, 1, UINT64_MAX);
	assert_int_equal(resil_call_cancel(&f.call, now(&f)), RESIL_OK);
	fx_free(&f);
}

static int
ok_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(1);
	return 0;
}

static void
test_call_blocking_call_refuses_hedging(void **state)
{
	fx f;
	resil_diag diag;

	(void)state;
	hedge_fx(&f, 1);
	fx_new(&f);
	assert_int_equal(resil_pipeline_call(f.p, &f.args, ok_fn, NULL, &f.r),
	    RESIL_E_INVAL);
	assert_non_null(strstr(f.r.message, "hedging"));
	fx_free(&f);

	hedge_fx(&f, RESIL_CALL_MAX_INFLIGHT);
	assert_int_equal(
	    resil_pipeline_new(&f.p, &f.cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "pipeline.hedge_max: 8 is out of range 0..7");
}

static void
test_call_force_mock_is_done_at_start(void **state)
{
	fx f;

	(void)state;
	fx_init(&f);
	f.cfg.mock = "force:return 5";
	f.cfg.breaker_enabled = 1;
	fx_new(&f);
	start(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(f.r.value.u.i, 5);
	assert_int_equal(resil_call_outstanding(&f.call), 0);
	fx_free(&f);
}

static void
test_call_hedge_with_timeout_and_retry(void **state)
{
	fx f;

	(void)state;
	hedge_fx(&f, 1);
	f.cfg.timeout_ns = 15;
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 2;
	f.cfg.retry.base_delay_ns = 50;
	fx_new(&f);
	start(&f);
	expect_run(&f, 1, 115);
	resil_manual_clock_set(&f.mc, 110);
	step(&f);
	expect_run(&f, 2, 125); /* the hedge, with its own timeout */
	step(&f);
	expect_wait(&f, 116); /* attempt 1 is late after 115 */
	resil_manual_clock_set(&f.mc, 116);
	step(&f);
	expect_wait(&f, 126); /* no hedge left: attempt 2's timeout */
	resil_manual_clock_set(&f.mc, 126);
	step(&f);
	/* Both failed (timed out): the retry stage backs off, then a new
	 * attempt with its own hedge budget. */
	expect_wait(&f, 176);
	resil_manual_clock_set(&f.mc, 176);
	step(&f);
	expect_run(&f, 3, 191);
	resil_manual_clock_set(&f.mc, 186);
	step(&f);
	expect_run(&f, 4, 201);
	report(&f, 4, 0, 44);
	step(&f);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.value.u.i, 44);
	assert_int_equal(f.r.attempts, 4);
	/* Late answers of 1, 2 and 3 are dropped. */
	assert_int_equal(resil_call_outstanding(&f.call), 3);
	report(&f, 2, 0, 2);
	report(&f, 1, 0, 1);
	report(&f, 3, 0, 3);
	assert_int_equal(resil_call_outstanding(&f.call), 0);
	assert_int_equal(f.r.value.u.i, 44);
	fx_free(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_success_is_run_then_done),
		cmocka_unit_test(test_call_backoff_is_a_wait_until_its_tick),
		cmocka_unit_test(
		    test_call_deadline_comes_from_timeout_and_retry_deadline),
		cmocka_unit_test(
		    test_call_unanswered_attempt_times_out_and_late_answer_is_dropped),
		cmocka_unit_test(test_call_bad_input_changes_nothing),
		cmocka_unit_test(test_call_cancel_gives_permits_back),
		cmocka_unit_test(
		    test_call_many_calls_interleave_on_one_pipeline),
		cmocka_unit_test(test_call_method_handles),
		cmocka_unit_test(
		    test_call_method_handle_of_another_pipeline_is_refused),
		cmocka_unit_test(
		    test_call_hedge_after_delay_first_success_wins),
		cmocka_unit_test(test_call_hedge_all_fail_gives_last_error),
		cmocka_unit_test(test_call_hedge_spends_the_retry_budget),
		cmocka_unit_test(test_call_hedge_refused_by_budget_concludes),
		cmocka_unit_test(test_call_start_over_a_live_call_is_refused),
		cmocka_unit_test(test_call_blocking_call_refuses_hedging),
		cmocka_unit_test(test_call_force_mock_is_done_at_start),
		cmocka_unit_test(test_call_hedge_with_timeout_and_retry),
	};

	return cmocka_run_group_tests_name("call", tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/pipeline.h>

#include "support/fail_alloc.h"

#ifdef RESIL_TEST_MACHINE
/* Run every call through the call machine, stepped by hand. */
#include "support/machine_driver.h"
#define resil_pipeline_call machine_pipeline_call
#define resil_pipeline_deadline machine_pipeline_deadline
#endif

/* A scripted dependency: each call pops the next behaviour. */
enum { OK8 = 0, FAIL = 1, BUSINESS = 2, SLOW = 3, OKNULL = 4 };

typedef struct dep {
	resil_manual_clock *mc;
	const int *script;
	size_t n;
	size_t calls;
	uint64_t slow_by;
	uint64_t seen_deadline;
} dep;

static int
dep_call(void *ctx, const resil_args *args, resil_value *out)
{
	dep *d = ctx;
	int what = d->calls < d->n ? d->script[d->calls] : OK8;

	(void)args;
	d->calls++;
	d->seen_deadline = resil_pipeline_deadline();
	switch (what) {
	case OK8:
		*out = resil_value_int(8);
		return 0;
	case FAIL:
		return -1;
	case BUSINESS:
		return 400;
	case SLOW:
		resil_manual_clock_advance(d->mc, d->slow_by);
		*out = resil_value_int(9);
		return 0;
	case OKNULL:
	default:
		return 0;
	}
}

/* 400 is the callee's own answer ("bad argument"). */
static resil_outcome
classify(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 400 ? RESIL_OUTCOME_BUSINESS : RESIL_OUTCOME_FAILURE;
}

typedef struct fx {
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	dep d;
} fx;

static void
fx_init(fx *f, const int *script, size_t n)
{
	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, 100);
	resil_pipeline_config_init(&f->cfg);
	f->cfg.service = "StockService";
	f->cfg.clock = resil_manual_clock_hook(&f->mc);
	f->cfg.classifier.fn = classify;
	f->d.mc = &f->mc;
	f->d.script = script;
	f->d.n = n;
}

static void
fx_new(fx *f)
{
	resil_diag diag;

	diag.msg[0] = '\0';
	if (resil_pipeline_new(&f->p, &f->cfg, &diag) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", diag.msg);
}

static resil_err
call(fx *f, const char *method, resil_result *r)
{
	resil_args args;

	args.method = method;
	args.data = "k";
	args.len = 1;
	return resil_pipeline_call(f->p, &args, dep_call, &f->d, r);
}

static void
test_pipeline_force_mock_never_calls(void **state)
{
	static const int script[] = { OK8, OK8 };
	fx f;
	resil_result r;
	resil_breaker_metrics bm;

	(void)state;
	fx_init(&f, script, 2);
	f.cfg.mock = "force:return 5";
	f.cfg.breaker_enabled = 1;
	f.cfg.retry_enabled = 1;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.type, RESIL_VALUE_INT);
	assert_int_equal(r.value.u.i, 5);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(f.d.calls, 0); /* never called */
	resil_result_free(&r);
	assert_int_equal(resil_breaker_get_metrics(
	                     resil_pipeline_breaker(f.p, "getStock"), &bm),
	    RESIL_OK);
	assert_int_equal(bm.successes + bm.failures, 0); /* breaker idle */
	resil_pipeline_free(f.p);
}

static void
test_pipeline_fail_mock_after_three_attempts(void **state)
{
	static const int script[] = { FAIL, FAIL, FAIL, OK8 };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 4);
	f.cfg.mock = "fail:return null";
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 10;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(f.d.calls, 3); /* three attempts first */
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, -1);
	/* Two waits of 10 ticks on the manual clock. */
	assert_int_equal(resil_manual_clock_now(&f.mc), 120);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_open_breaker_rejects_and_fallback_answers(void **state)
{
	static const int script[] = { FAIL, OK8 };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 2);
	f.cfg.mock = "return 7";
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.consecutive_failures = 1;
	f.cfg.breaker.open_wait_ns = 50;
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 1;
	fx_new(&f);
	/* The first attempt fails and trips the breaker; the retries are
	 * rejections, which retry does not retry: 1 call, then the mock. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(f.d.calls, 1);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 7);
	assert_int_equal(r.cause, RESIL_E_OPEN);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_OPEN);
	resil_result_free(&r);
	/* While OPEN: rejected without calling. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(f.d.calls, 1);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(r.cause, RESIL_E_OPEN);
	resil_result_free(&r);
	/* At the end of the wait the probe is let through and succeeds. */
	resil_manual_clock_set(&f.mc, 101 + 50);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 8);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_CLOSED);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_swallowed_failure_never_reaches_fallback(void **state)
{
	/* A failsafe-style callee that swallows its error and returns
	 * "success with nothing": the fallback never sees a failure. */
	static const int script[] = { OKNULL };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 1);
	f.cfg.mock = "fail:return 1";
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_business_error_passes_untouched(void **state)
{
	static const int script[] = { BUSINESS, OK8 };
	fx f;
	resil_result r;
	resil_breaker_metrics bm;

	(void)state;
	fx_init(&f, script, 2);
	f.cfg.mock = "fail:return 1";
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.consecutive_failures = 1;
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_E_BUSINESS);
	assert_int_equal(r.rc, 400);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(f.d.calls, 1);                   /* not retried */
	assert_int_equal(r.value.type, RESIL_VALUE_NULL); /* no mock */
	resil_result_free(&r);
	assert_int_equal(
	    resil_breaker_get_metrics(resil_pipeline_breaker(f.p, NULL), &bm),
	    RESIL_OK);
	assert_int_equal(bm.failures, 0); /* not counted */
	assert_int_equal(bm.ignored, 1);
	assert_int_equal(bm.state, RESIL_BREAKER_CLOSED);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_no_fallback_propagates_original_error(void **state)
{
	static const int script[] = { FAIL };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 1);
	f.cfg.breaker_enabled = 1;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_E_CALL);
	assert_int_equal(r.rc, -1);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_cache_then_unavailable(void **state)
{
	static const int script[] = { OK8, FAIL, FAIL };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 3);
	f.cfg.cache_enabled = 1;
	f.cfg.cache.max_age = 10;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	resil_result_free(&r);
	resil_manual_clock_advance(&f.mc, 10); /* age == limit: served */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.age, 10);
	assert_int_equal(r.value.u.i, 8);
	assert_int_equal(r.cause, RESIL_E_CALL);
	resil_result_free(&r);
	resil_manual_clock_advance(&f.mc, 1); /* limit + 1: not served */
	assert_int_equal(call(&f, "getStock", &r), RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.cause, RESIL_E_CALL);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_cached_null_is_not_a_miss(void **state)
{
	static const int script[] = { OKNULL, FAIL };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 2);
	f.cfg.cache_enabled = 1;
	f.cfg.mock = "fail:return 3";
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE); /* not the mock */
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_timeout_drops_late_answer(void **state)
{
	static const int script[] = { OK8, SLOW, SLOW };
	fx f;
	resil_result r;
	resil_pipeline_metrics m;
	resil_breaker_metrics bm;

	(void)state;
	fx_init(&f, script, 3);
	f.cfg.timeout_ns = 50;
	f.cfg.cache_enabled = 1;
	f.cfg.breaker_enabled = 1;
	fx_new(&f);
	f.d.slow_by = 50; /* == timeout: in time */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(f.d.seen_deadline, 100 + 50);
	resil_result_free(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 9);
	resil_result_free(&r);
	f.d.slow_by = 51; /* one tick late: dropped, cache answers */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.value.u.i, 9);
	assert_int_equal(r.cause, RESIL_E_TIMEOUT);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_deadline(), UINT64_MAX);
	assert_int_equal(resil_pipeline_get_metrics(f.p, &m), RESIL_OK);
	assert_int_equal(m.timeouts, 1);
	assert_int_equal(m.latency_count, 3);
	assert_int_equal(m.calls, 3);
	assert_int_equal(m.live, 2);
	assert_int_equal(m.cache, 1);
	assert_int_equal(
	    resil_breaker_get_metrics(resil_pipeline_breaker(f.p, NULL), &bm),
	    RESIL_OK);
	assert_int_equal(bm.failures, 1);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_method_mock_overrides_service(void **state)
{
	static const int script[] = { FAIL, FAIL, FAIL };
	fx f;
	resil_result r;
	resil_method_config methods[2];

	(void)state;
	fx_init(&f, script, 3);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "getStock";
	methods[0].type = RESIL_TYPE_INT;
	methods[0].mock = "force:return 0";
	methods[1].name = "listItems";
	methods[1].type = RESIL_TYPE_ARRAY;
	f.cfg.methods = methods;
	f.cfg.nmethods = 2;
	f.cfg.mock = "fail:return null";
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(f.d.calls, 0);
	assert_int_equal(r.value.u.i, 0);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	assert_int_equal(call(&f, "listItems", &r), RESIL_OK);
	assert_int_equal(f.d.calls, 1);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	assert_int_equal(call(&f, "undeclared", &r), RESIL_OK);
	assert_int_equal(f.d.calls, 2);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_method_count(f.p), 2);
	assert_string_equal(resil_pipeline_method_name(f.p, 1), "listItems");
	assert_null(resil_pipeline_method_name(f.p, 2));
	resil_pipeline_free(f.p);
}

static void
test_pipeline_switch_mock_while_running(void **state)
{
	static const int script[] = { OK8, OK8, OK8, OK8 };
	fx f;
	resil_result r;
	resil_method_config methods[1];
	resil_diag diag;

	(void)state;
	fx_init(&f, script, 4);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "getStock";
	methods[0].type = RESIL_TYPE_INT;
	f.cfg.methods = methods;
	f.cfg.nmethods = 1;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, "getStock", "force:return 0", &diag),
	    RESIL_OK);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(f.d.calls, 1);
	resil_result_free(&r);
	/* A bad spec changes nothing and says why, naming the method. */
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, "getStock", "fail:", &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "getStock.mock"));
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	/* Undeclared methods cannot be switched. */
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, "nope", "force:return 1", &diag),
	    RESIL_E_INVAL);
	/* Back to no mock: the service answers again. */
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, "getStock", "false", &diag),
	    RESIL_OK);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(f.d.calls, 2);
	resil_result_free(&r);
	/* Service level, force for everyone. */
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, "getStock", NULL, &diag), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, NULL, "force:throw", &diag),
	    RESIL_OK);
	assert_int_equal(call(&f, "getStock", &r), RESIL_E_MOCK);
	assert_string_equal(
	    r.message, "mocked exception for service degradation.");
	assert_int_equal(f.d.calls, 2);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_per_method_breakers(void **state)
{
	static const int script[] = { FAIL, FAIL, OK8 };
	fx f;
	resil_result r;
	resil_method_config methods[2];

	(void)state;
	fx_init(&f, script, 3);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "a";
	methods[1].name = "b";
	f.cfg.methods = methods;
	f.cfg.nmethods = 2;
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker_per_method = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.consecutive_failures = 2;
	fx_new(&f);
	call(&f, "a", &r);
	resil_result_free(&r);
	call(&f, "a", &r);
	resil_result_free(&r);
	assert_int_equal(
	    resil_breaker_get_state(resil_pipeline_breaker(f.p, "a")),
	    RESIL_BREAKER_OPEN);
	assert_int_equal(
	    resil_breaker_get_state(resil_pipeline_breaker(f.p, "b")),
	    RESIL_BREAKER_CLOSED);
	assert_ptr_not_equal(resil_pipeline_breaker(f.p, "a"),
	    resil_pipeline_breaker(f.p, "b"));
	assert_int_equal(call(&f, "b", &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 8);
	resil_result_free(&r);
	assert_int_equal(call(&f, "a", &r), RESIL_E_OPEN);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_method_attempts_override(void **state)
{
	static const int script[] = { FAIL, FAIL, FAIL, FAIL, FAIL, FAIL };
	fx f;
	resil_result r;
	resil_method_config methods[1];

	(void)state;
	fx_init(&f, script, 6);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "once";
	methods[0].max_attempts = 1;
	f.cfg.methods = methods;
	f.cfg.nmethods = 1;
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 4;
	f.cfg.retry.base_delay_ns = 1;
	fx_new(&f);
	assert_int_equal(call(&f, "once", &r), RESIL_E_CALL);
	assert_int_equal(f.d.calls, 1);
	resil_result_free(&r);
	assert_int_equal(call(&f, "other", &r), RESIL_E_CALL);
	assert_int_equal(f.d.calls, 5);
	assert_int_equal(r.attempts, 4);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_retry_counts_on_the_fast_path(void **state)
{
	static const int script[] = { OK8, FAIL, OK8, BUSINESS, FAIL, FAIL,
		FAIL };
	fx f;
	resil_result r;
	resil_retry_metrics rm;

	(void)state;
	fx_init(&f, script, 7);
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 5;
	fx_new(&f);
	/* First-attempt success: no retry machinery, but counted. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	/* Fail, then succeed: the failed attempt is not made twice. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(f.d.calls, 3);
	assert_int_equal(resil_manual_clock_now(&f.mc), 105);
	resil_result_free(&r);
	/* A business error is final at once. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_E_BUSINESS);
	assert_int_equal(f.d.calls, 4);
	resil_result_free(&r);
	/* Three failures: exhausted, the last attempt's own error. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(f.d.calls, 7);
	resil_result_free(&r);
	assert_int_equal(resil_retry_get_metrics(
	                     resil_pipeline_retry(f.p, "getStock"), &rm),
	    RESIL_OK);
	assert_int_equal(rm.calls, 4);
	assert_int_equal(rm.attempts, 7);
	assert_int_equal(rm.succeeded_without_retry, 1);
	assert_int_equal(rm.succeeded_after_retry, 1);
	assert_int_equal(rm.failed_without_retry, 1);
	assert_int_equal(rm.failed_after_retry, 1);
	assert_int_equal(rm.exhausted, 1);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_rate_limit_rejects_to_fallback(void **state)
{
	static const int script[] = { OK8, OK8, OK8 };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 3);
	f.cfg.ratelimit_enabled = 1;
	f.cfg.ratelimit.rate = 1;
	f.cfg.ratelimit.period_ns = 10;
	f.cfg.ratelimit.burst = 1;
	f.cfg.cache_enabled = 1;
	fx_new(&f);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.cause, RESIL_E_LIMITED);
	assert_int_equal(f.d.calls, 1);
	resil_result_free(&r);
	resil_manual_clock_advance(&f.mc, 10);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

typedef struct evlog {
	int breaker_events;
	char method[32];
	char text[128];
} evlog;

static void
listener(const resil_pipeline_event *ev, void *ctx)
{
	evlog *l = ctx;

	if (ev->stage == RESIL_STAGE_BREAKER) {
		l->breaker_events++;
		strncpy(l->method, ev->method, sizeof(l->method) - 1);
		strncpy(l->text, ev->text, sizeof(l->text) - 1);
		assert_string_equal(ev->service, "StockService");
	}
}

static void
test_pipeline_events_name_stage_and_method(void **state)
{
	static const int script[] = { FAIL };
	fx f;
	resil_result r;
	evlog l;

	(void)state;
	memset(&l, 0, sizeof(l));
	fx_init(&f, script, 1);
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.min_calls = 1;
	f.cfg.listener = listener;
	f.cfg.listener_ctx = &l;
	fx_new(&f);
	call(&f, "getStock", &r);
	resil_result_free(&r);
	assert_int_equal(l.breaker_events, 1);
	assert_string_equal(l.method, "getStock");
	assert_string_equal(l.text, "breaker CLOSED -> OPEN (failure_rate)");
	assert_string_equal(
	    resil_stage_name(RESIL_STAGE_BULKHEAD), "bulkhead");
	resil_pipeline_free(f.p);
}

typedef struct evall {
	int n;
	char method[4][32];
	char text[4][128];
} evall;

static void
listen_all(const resil_pipeline_event *ev, void *ctx)
{
	evall *l = ctx;

	if (ev->stage != RESIL_STAGE_BREAKER || l->n == 4)
		return;
	strncpy(l->method[l->n], ev->method, sizeof(l->method[0]) - 1);
	strncpy(l->text[l->n], ev->text, sizeof(l->text[0]) - 1);
	l->n++;
}

/* The blocking driver's inline step names its method (for the events)
 * only on the paths that can emit one: the breaker's acquire and record
 * past their fast paths must still name it, and the state after the
 * success must be the breaker's. */
static void
test_pipeline_inline_step_names_its_transitions(void **state)
{
	static const int script[] = { FAIL, OK8, OK8 };
	fx f;
	resil_result r;
	evall l;

	(void)state;
	memset(&l, 0, sizeof(l));
	fx_init(&f, script, 3);
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.min_calls = 1;
	f.cfg.breaker.open_wait_ns = 10;
	f.cfg.listener = listen_all;
	f.cfg.listener_ctx = &l;
	fx_new(&f);
	call(&f, "getStock", &r);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_OPEN);
	resil_result_free(&r);
	resil_manual_clock_advance(&f.mc, 10);
	assert_int_equal(call(&f, "putStock", &r), RESIL_OK);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_CLOSED);
	resil_result_free(&r);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.text[0], "breaker CLOSED -> OPEN (failure_rate)");
	assert_string_equal(l.method[0], "getStock");
	assert_string_equal(l.method[1], "putStock");
	assert_non_null(strstr(l.text[1], "OPEN -> HALF_OPEN"));
	assert_string_equal(l.method[2], "putStock");
	assert_non_null(strstr(l.text[2], "HALF_OPEN -> CLOSED"));
	/* A success on the fast path: CLOSED, and no event. */
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_CLOSED);
	resil_result_free(&r);
	assert_int_equal(l.n, 3);
	/* Outside a call the method is no longer named. */
	assert_int_equal(
	    resil_breaker_transition(resil_pipeline_breaker(f.p, NULL),
	        RESIL_BREAKER_FORCED_OPEN),
	    RESIL_OK);
	assert_int_equal(l.n, 4);
	assert_string_equal(l.method[3], "");
	assert_int_equal(resil_pipeline_deadline(), UINT64_MAX);
	resil_pipeline_free(f.p);
}

static void
test_pipeline_config_errors(void **state)
{
	resil_pipeline_config cfg;
	resil_method_config methods[2];
	resil_pipeline *p = NULL;
	resil_diag diag;

	(void)state;
	resil_pipeline_config_init(&cfg);
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "service"));
	cfg.service = "S";
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "breaker.window_size"));
	cfg.breaker.window_size = 10;
	memset(methods, 0, sizeof(methods));
	methods[0].name = "getStock";
	methods[0].mock = "fail:";
	cfg.methods = methods;
	cfg.nmethods = 1;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	if (strncmp(diag.msg, "getStock.mock", 13) != 0)
		fail_msg("diag: %s", diag.msg);
	methods[0].mock = NULL;
	methods[1].name = "getStock";
	cfg.nmethods = 2;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "declared twice"));
	cfg.nmethods = 1;
	cfg.mock = "default"; /* no StockServiceMock registered */
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_null(p);
	assert_int_equal(
	    resil_pipeline_call(NULL, NULL, NULL, NULL, NULL), RESIL_E_INVAL);
}

static void
test_pipeline_allocation_failure_leaks_nothing(void **state)
{
	resil_pipeline_config cfg;
	resil_method_config methods[1];
	resil_pipeline *p;
	fail_alloc fa;
	uint64_t n, total;

	(void)state;
	resil_pipeline_config_init(&cfg);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "getStock";
	methods[0].mock = "force:return 1";
	methods[0].max_attempts = 2;
	cfg.methods = methods;
	cfg.nmethods = 1;
	cfg.service = "S";
	cfg.mock = "fail:return 2";
	cfg.breaker_enabled = 1;
	cfg.breaker_per_method = 1;
	cfg.retry_enabled = 1;
	cfg.cache_enabled = 1;
	cfg.ratelimit_enabled = 1;
	cfg.bulkhead_enabled = 1;
	cfg.alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	total = fa.allocs;
	resil_pipeline_free(p);
	assert_int_equal(fail_alloc_live(&fa), 0);
	for (n = 1; n <= total; n++) {
		p = NULL;
		cfg.alloc = fail_alloc_init(&fa, n);
		assert_int_equal(
		    resil_pipeline_new(&p, &cfg, NULL), RESIL_E_NOMEM);
		assert_null(p);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
}

/* Every event's text reads as a person would: units on durations, and no
 * "answered" when nothing did. */
typedef struct textlog {
	char retry[128];
	char fallback[128];
} textlog;

static void
text_listener(const resil_pipeline_event *ev, void *ctx)
{
	textlog *l = ctx;

	if (ev->stage == RESIL_STAGE_RETRY && l->retry[0] == '\0')
		strncpy(l->retry, ev->text, sizeof(l->retry) - 1);
	if (ev->stage == RESIL_STAGE_FALLBACK)
		strncpy(l->fallback, ev->text, sizeof(l->fallback) - 1);
}

static void
test_pipeline_event_texts_have_units(void **state)
{
	static const int script[] = { FAIL, FAIL, FAIL };
	fx f;
	resil_result r;
	textlog l;

	(void)state;
	memset(&l, 0, sizeof(l));
	fx_init(&f, script, 3);
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 2;
	f.cfg.retry.base_delay_ns = 50 * RESIL_NS_PER_MS;
	f.cfg.cache_enabled = 1;
	f.cfg.listener = text_listener;
	f.cfg.listener_ctx = &l;
	fx_new(&f);
	call(&f, "getStock", &r);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	resil_result_free(&r);
	assert_string_equal(l.retry, "retry after attempt 1, waiting 50ms");
	assert_string_equal(
	    l.fallback, "fallback: nothing answered (RESIL_E_UNAVAILABLE)");
	resil_pipeline_free(f.p);
}

/* The API checks a declared method as the text does, and finds a
 * duplicate among many methods without comparing every pair. */
static void
test_pipeline_methods_checked_like_text(void **state)
{
	static resil_method_config many[5000];
	static char names[5000][16];
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag d;
	size_t i;

	(void)state;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	memset(many, 0, sizeof(many));
	many[0].name = "get stock";
	cfg.methods = many;
	cfg.nmethods = 1;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "not a method name"));
	many[0].name = "getStock";
	many[0].type = (resil_type)77;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "getStock.type: 77 is not a type"));
	for (i = 0; i < 5000; i++) {
		snprintf(names[i], sizeof(names[i]), "m%zu", i);
		many[i].name = names[i];
		many[i].type = RESIL_TYPE_ANY;
	}
	cfg.nmethods = 5000;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	resil_pipeline_free(p);
	many[4321].name = "m17";
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "m17: the method is declared twice");
}

/* A retry that ends in the breaker's rejection still says why the breaker
 * opened: the last real failure is kept beside the final error. */
static void
test_pipeline_keeps_last_real_failure(void **state)
{
	static const int script[] = { FAIL, OK8 };
	fx f;
	resil_result r;

	(void)state;
	fx_init(&f, script, 2);
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.consecutive_failures = 1;
	f.cfg.retry_enabled = 1;
	f.cfg.retry.max_attempts = 3;
	f.cfg.retry.base_delay_ns = 10;
	f.cfg.retry.retry_on_open = 1;
	fx_new(&f);
	call(&f, "getStock", &r);
	assert_int_equal(r.err, RESIL_E_OPEN);
	assert_int_equal(r.last_failure, RESIL_E_CALL);
	assert_int_equal(r.last_failure_rc, -1);
	assert_int_equal(f.d.calls, 1);
	resil_result_free(&r);
	/* A clean success has none. */
	resil_manual_clock_advance(&f.mc, 60 * RESIL_NS_PER_SEC);
	call(&f, "getStock", &r);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.last_failure, RESIL_OK);
	assert_int_equal(r.last_failure_rc, 0);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

/* Per-call events (onSuccess / onError / onCallNotPermitted), recorded by
 * the ready-made recorder; none at all when nobody asks. */
static void
test_pipeline_call_events_and_recorder(void **state)
{
	static const int script[] = { OK8, FAIL, OK8 };
	resil_pipeline_record recs[16];
	resil_pipeline_recorder rec;
	fx f;
	resil_result r;
	size_t i, calls = 0;

	(void)state;
	resil_pipeline_recorder_init(&rec, recs, 16);
	fx_init(&f, script, 3);
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.consecutive_failures = 1;
	f.cfg.listener = resil_pipeline_recorder_listener;
	f.cfg.listener_ctx = &rec;
	f.cfg.call_events = RESIL_CALL_EVENTS_ALL;
	fx_new(&f);
	for (i = 0; i < 3; i++) {
		call(&f, "getStock", &r);
		resil_result_free(&r);
	}
	for (i = 0; i < rec.count; i++)
		if (recs[i].stage == RESIL_STAGE_CALL)
			calls++;
	assert_int_equal(calls, 3);
	for (i = 0; i < rec.count && recs[i].stage != RESIL_STAGE_CALL; i++)
		;
	assert_string_equal(
	    recs[i].text, "call succeeded: live RESIL_OK, 1 attempt");
	assert_string_equal(recs[i].method, "getStock");
	assert_string_equal(recs[rec.count - 1].text,
	    "call not permitted: unavailable RESIL_E_OPEN, 0 attempts");
	assert_int_equal(recs[rec.count - 1].err, RESIL_E_OPEN);
	/* The failure between them, and the breaker's own event. */
	for (i = 0; i < rec.count; i++)
		if (strcmp(recs[i].text,
		        "call failed: unavailable RESIL_E_CALL, 1 attempt") == 0)
			break;
	assert_true(i < rec.count);
	assert_int_equal(rec.dropped, 0);
	resil_pipeline_free(f.p);

	/* Only rejections asked for: the others are not told. */
	resil_pipeline_recorder_init(&rec, recs, 16);
	fx_init(&f, script, 3);
	f.cfg.breaker_enabled = 1;
	f.cfg.breaker.failure_rate_pct = 0;
	f.cfg.breaker.consecutive_failures = 1;
	f.cfg.listener = resil_pipeline_recorder_listener;
	f.cfg.listener_ctx = &rec;
	f.cfg.call_events = RESIL_CALL_EVENT_REJECTED;
	fx_new(&f);
	for (i = 0; i < 4; i++) {
		call(&f, "getStock", &r);
		resil_result_free(&r);
	}
	for (calls = 0, i = 0; i < rec.count; i++)
		if (recs[i].stage == RESIL_STAGE_CALL) {
			assert_string_equal(recs[i].text,
			    "call not permitted: unavailable RESIL_E_OPEN, 0 "
			    "attempts");
			calls++;
		}
	assert_int_equal(calls, 2);
	resil_pipeline_free(f.p);

	/* Past the capacity, events are counted as dropped. */
	resil_pipeline_recorder_init(&rec, recs, 1);
	fx_init(&f, script, 3);
	f.cfg.listener = resil_pipeline_recorder_listener;
	f.cfg.listener_ctx = &rec;
	f.cfg.call_events = RESIL_CALL_EVENTS_ALL;
	fx_new(&f);
	for (i = 0; i < 3; i++) {
		call(&f, "getStock", &r);
		resil_result_free(&r);
	}
	assert_int_equal(rec.count, 1);
	assert_true(rec.dropped >= 2); /* 3 calls and a fallback event */
	resil_pipeline_free(f.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipeline_force_mock_never_calls),
		cmocka_unit_test(test_pipeline_fail_mock_after_three_attempts),
		cmocka_unit_test(
		    test_pipeline_open_breaker_rejects_and_fallback_answers),
		cmocka_unit_test(
		    test_pipeline_swallowed_failure_never_reaches_fallback),
		cmocka_unit_test(
		    test_pipeline_business_error_passes_untouched),
		cmocka_unit_test(
		    test_pipeline_no_fallback_propagates_original_error),
		cmocka_unit_test(test_pipeline_cache_then_unavailable),
		cmocka_unit_test(test_pipeline_cached_null_is_not_a_miss),
		cmocka_unit_test(test_pipeline_timeout_drops_late_answer),
		cmocka_unit_test(test_pipeline_method_mock_overrides_service),
		cmocka_unit_test(test_pipeline_switch_mock_while_running),
		cmocka_unit_test(test_pipeline_per_method_breakers),
		cmocka_unit_test(test_pipeline_method_attempts_override),
		cmocka_unit_test(test_pipeline_retry_counts_on_the_fast_path),
		cmocka_unit_test(test_pipeline_rate_limit_rejects_to_fallback),
		cmocka_unit_test(test_pipeline_events_name_stage_and_method),
		cmocka_unit_test(test_pipeline_inline_step_names_its_transitions),
		cmocka_unit_test(test_pipeline_event_texts_have_units),
		cmocka_unit_test(test_pipeline_keeps_last_real_failure),
		cmocka_unit_test(test_pipeline_call_events_and_recorder),
		cmocka_unit_test(test_pipeline_methods_checked_like_text),
		cmocka_unit_test(test_pipeline_config_errors),
		cmocka_unit_test(
		    test_pipeline_allocation_failure_leaks_nothing),
	};

	int failed =
	    cmocka_run_group_tests_name("pipeline", tests, NULL, NULL);
#ifdef RESIL_TEST_MACHINE
	/* The suite really went through the machine driver. */
	if (machine_driver_steps() == 0)
		return 1;
#endif
	return failed;
}

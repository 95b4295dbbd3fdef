/*
 * Issue 42: the throttle stage in front of the breaker, and the server's
 * pushback (value.h's RESIL_RC_THROTTLED codes), through the public API,
 * the blocking driver and the call machine (and a selector), on the
 * manual clock. docs/semantics.md, "Decided in turn 4".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/call.h>
#include <resil/config.h>
#include <resil/pipeline.h>
#include <resil/registry.h>
#include <resil/throttle.h>

#include "support/machine_invoke.h"

#define MS RESIL_NS_PER_MS
#define T0 (1000 * MS)

typedef struct fx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	resil_diag diag;
	resil_pipeline_record rec[256];
	resil_pipeline_recorder r;
	int machine;
	const int *rcs; /* what the function answers, attempt by attempt */
	int nrc;
	int ran;
	resil_result res; /* the last call's result (rc, err, attempts) */
	resil_priority prio; /* the calls' class (UNSET: none given) */
} fx;

static void
fx_start(fx *x, const char *text, int selector, int machine)
{
	resil_endpoint_spec spec;
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;

	memset(x, 0, sizeof(*x));
	x->machine = machine;
	resil_manual_clock_init(&x->mc, T0);
	if (resil_config_parse_string(
	        &x->conf, text, "svc.conf", NULL, &x->diag) != RESIL_OK)
		fail_msg("config: %s", x->diag.msg);
	pc = *resil_config_pipeline(x->conf);
	pc.clock = resil_manual_clock_hook(&x->mc);
	resil_pipeline_recorder_init(&x->r, x->rec, 256);
	pc.listener = resil_pipeline_recorder_listener;
	pc.listener_ctx = &x->r;
	if (selector) {
		resil_directory_config_init(&dc);
		dc.clock = resil_manual_clock_hook(&x->mc);
		(void)resil_config_directory(x->conf, &dc);
		assert_int_equal(
		    resil_directory_new(&x->d, &dc, &x->diag), RESIL_OK);
		(void)resil_config_selector(x->conf, &sc);
		assert_int_equal(
		    resil_selector_new(&x->sel, x->d, &sc, &x->diag),
		    RESIL_OK);
		spec = resil_endpoint_spec_default("e0:1");
		assert_int_equal(
		    resil_directory_push(x->d, &spec, 1, &x->diag), RESIL_OK);
		pc.selector = x->sel;
	}
	if (resil_pipeline_new(&x->p, &pc, &x->diag) != RESIL_OK)
		fail_msg("pipeline: %s", x->diag.msg);
}

static void
fx_end(fx *x)
{
	resil_pipeline_free(x->p);
	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	resil_config_free(x->conf);
}

/* The next scripted answer (the last one repeats). */
static int
next_rc(fx *x)
{
	int i = x->ran < x->nrc ? x->ran : x->nrc - 1;

	x->ran++;
	return x->rcs[i];
}

static int
provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ep;
	(void)args;
	*out = resil_value_int(7);
	return next_rc(ctx);
}

static int
plain(void *ctx, const resil_args *args, resil_value *out)
{
	return provider(ctx, NULL, args, out);
}

/* One call to its end through the driver x->machine says; the result
 * kept in x->res (its value freed). */
static resil_err
one_call(fx *x)
{
	resil_invocation inv;
	resil_result *r = &x->res;

	resil_invocation_init(&inv, "getStock");
	inv.priority = x->prio;
	if (!x->machine) {
		(void)(x->sel != NULL || x->prio != RESIL_PRIORITY_UNSET
		        ? resil_pipeline_invoke_ex(
		              x->p, NULL, &inv, provider, x, r)
		        : resil_pipeline_call(x->p, &inv.args, plain, x, r));
	} else {
		machine_invoke(x->p, NULL, &inv, provider, x, &x->mc, r);
	}
	resil_value_free(&r->value);
	return r->err;
}

static resil_breaker_metrics
bm(fx *x)
{
	resil_breaker_metrics m;

	assert_int_equal(resil_breaker_get_metrics(
	                     resil_pipeline_breaker(x->p, "getStock"), &m),
	    RESIL_OK);
	return m;
}

static resil_pipeline_metrics
pm(fx *x)
{
	resil_pipeline_metrics m;

	assert_int_equal(resil_pipeline_get_metrics(x->p, &m), RESIL_OK);
	return m;
}

static int
has_event(fx *x, resil_stage stage, const char *text)
{
	size_t i;

	for (i = 0; i < x->r.count; i++)
		if (x->rec[i].stage == stage &&
		    strstr(x->rec[i].text, text) != NULL)
			return 1;
	return 0;
}

/* ---- the codes ---- */

static void
test_rc_throttled_codes(void **state)
{
	(void)state;
	assert_true(resil_rc_is_throttled(RESIL_RC_THROTTLED));
	assert_int_equal(resil_rc_retry_after_ms(RESIL_RC_THROTTLED), -1);
	assert_int_equal(resil_rc_retry_after_ms(RESIL_RC_THROTTLED_MS(0)), 0);
	assert_int_equal(
	    resil_rc_retry_after_ms(RESIL_RC_THROTTLED_MS(1500)), 1500);
	assert_int_equal(resil_rc_retry_after_ms(RESIL_RC_THROTTLED_MS(-5)), 0);
	assert_int_equal(
	    resil_rc_retry_after_ms(RESIL_RC_THROTTLED_MS(2000000000)),
	    RESIL_RC_RETRY_AFTER_MAX_MS);
	assert_false(resil_rc_is_throttled(RESIL_RC_TIMEOUT));
	assert_false(resil_rc_is_throttled(0));
	assert_false(resil_rc_is_throttled(-1));
	assert_false(resil_rc_is_throttled(429));
	assert_int_equal(resil_rc_retry_after_ms(429), -1);
	assert_string_equal(resil_strerror(RESIL_E_THROTTLED),
	    "throttled by the server (HTTP 429, RESOURCE_EXHAUSTED)");
}

/* ---- the server's pushback ---- */

#define BREAKER                            \
	"service=StockService\n"           \
	"breaker.enabled=true\n"           \
	"breaker.consecutive_failures=2\n" \
	"breaker.failure_rate=0\n"

/* Five throttled answers in a row never open a breaker that opens at two
 * failures in a row (the same five failures do); each call fails with
 * RESIL_E_THROTTLED, its rc the Retry-After's code. Both drivers, with
 * and without a selector (the service's and the endpoint's breakers). */
static void
pushback_not_a_failure(int selector, int machine)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(100) };
	static const int fails[] = { 503 };
	fx x;
	int i;

	fx_start(&x,
	    selector ? BREAKER "cluster=failfast\n"
	                       "endpoint.breaker.consecutive_failures=2\n"
	             : BREAKER,
	    selector, machine);
	x.rcs = rcs;
	x.nrc = 1;
	for (i = 0; i < 5; i++) {
		assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
		assert_int_equal(x.res.rc, RESIL_RC_THROTTLED_MS(100));
		assert_int_equal(resil_rc_retry_after_ms(x.res.rc), 100);
		assert_int_equal(x.res.attempts, 1);
	}
	assert_int_equal(x.ran, 5);
	assert_int_equal(bm(&x).state, RESIL_BREAKER_CLOSED);
	assert_int_equal(bm(&x).failures, 0);
	assert_int_equal(pm(&x).pushbacks, 5);
	assert_true(has_event(
	    &x, RESIL_STAGE_THROTTLE, "server throttled: Retry-After 100ms"));
	/* The control: the same calls failing open it. */
	x.rcs = fails;
	assert_int_equal(one_call(&x), RESIL_E_CALL);
	assert_int_equal(one_call(&x), RESIL_E_CALL);
	assert_int_equal(bm(&x).state, RESIL_BREAKER_OPEN);
	fx_end(&x);
}

static void
test_pushback_not_a_failure_blocking(void **state)
{
	(void)state;
	pushback_not_a_failure(0, 0);
}

static void
test_pushback_not_a_failure_machine(void **state)
{
	(void)state;
	pushback_not_a_failure(0, 1);
}

static void
test_pushback_not_a_failure_selector(void **state)
{
	(void)state;
	pushback_not_a_failure(1, 0);
	pushback_not_a_failure(1, 1);
}

#define RETRY                          \
	"service=StockService\n"       \
	"retry.enabled=true\n"         \
	"retry.max_attempts=3\n"       \
	"retry.backoff=fixed\n"        \
	"retry.delay=10ms\n"

/* The retry waits at least Retry-After (250 ms, not its 10 ms), and its
 * own backoff when that is longer (a Retry-After of 3 ms: 10 ms). */
static void
pushback_retry_waits(int machine)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(250),
		RESIL_RC_THROTTLED_MS(3), 0 };
	fx x;

	fx_start(&x, RETRY, 0, machine);
	x.rcs = rcs;
	x.nrc = 3;
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.res.attempts, 3);
	assert_int_equal(resil_manual_clock_now(&x.mc), T0 + 250 * MS + 10 * MS);
	assert_int_equal(pm(&x).pushbacks, 2);
	fx_end(&x);
}

static void
test_pushback_retry_waits_blocking(void **state)
{
	(void)state;
	pushback_retry_waits(0);
}

static void
test_pushback_retry_waits_machine(void **state)
{
	(void)state;
	pushback_retry_waits(1);
}

/* A Retry-After past the retry's deadline: no wait is begun, the call
 * ends with the throttled answer at once. */
static void
test_pushback_past_deadline(void **state)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(5000), 0 };
	fx x;

	(void)state;
	fx_start(&x, RETRY "retry.deadline=1s\n", 0, 0);
	x.rcs = rcs;
	x.nrc = 2;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	assert_int_equal(x.res.attempts, 1);
	assert_int_equal(resil_manual_clock_now(&x.mc), T0);
	fx_end(&x);
}

#define RATELIMIT                    \
	"service=StockService\n"     \
	"ratelimit.enabled=true\n"   \
	"ratelimit.rate=100\n"       \
	"ratelimit.period=1s\n"      \
	"ratelimit.burst=100\n"

/* A Retry-After pauses the rate limiter stage: until it has passed, a
 * call is refused locally (RESIL_E_LIMITED, the function not called, the
 * paused metric), at its end calls go again. Without a Retry-After
 * nothing pauses. */
static void
pushback_pauses(int machine)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(500), 0 };
	static const int bare[] = { RESIL_RC_THROTTLED, 0 };
	fx x;

	fx_start(&x, RATELIMIT, 0, machine);
	x.rcs = rcs;
	x.nrc = 2;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	resil_manual_clock_advance(&x.mc, 499 * MS);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 1);
	assert_int_equal(pm(&x).paused, 1);
	resil_manual_clock_advance(&x.mc, 1 * MS);
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.ran, 2);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "rate limiter paused until 1500000000"));
	/* RESIL_RC_THROTTLED: no Retry-After, no pause. */
	x.rcs = bare;
	x.ran = 0;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(pm(&x).paused, 1);
	fx_end(&x);
}

static void
test_pushback_pauses_ratelimit_blocking(void **state)
{
	(void)state;
	pushback_pauses(0);
}

static void
test_pushback_pauses_ratelimit_machine(void **state)
{
	(void)state;
	pushback_pauses(1);
}

/* ---- the throttle stage ---- */

#define THROTTLE                      \
	BREAKER                       \
	"throttle.enabled=true\n"     \
	"throttle.k=1\n"              \
	"throttle.window=10s\n"       \
	"throttle.buckets=10\n"       \
	"throttle.seed=1\n"

/* The server refuses everything: the throttle's window fills with
 * requests and no accepts, and it soon refuses locally: RESIL_E_LIMITED,
 * the function not called, the breaker not asked (no acquire, no
 * record: its counts stay 0), an event names the stage. A window later
 * (all forgotten) and with the server accepting, every call goes. */
static void
throttle_refuses(int selector, int machine)
{
	static const int rcs[] = { RESIL_RC_THROTTLED };
	static const int ok[] = { 0 };
	resil_throttle_metrics tm;
	fx x;
	int i, limited = 0;

	fx_start(&x, selector ? THROTTLE "cluster=failfast\n" : THROTTLE,
	    selector, machine);
	assert_non_null(resil_pipeline_throttle(x.p));
	x.rcs = rcs;
	x.nrc = 1;
	for (i = 0; i < 50; i++) {
		resil_err e = one_call(&x);

		if (!(e == RESIL_E_THROTTLED || e == RESIL_E_LIMITED))
			fail_msg("call %d: %s: %s", i, resil_strerror(e), x.res.message);
		limited += e == RESIL_E_LIMITED;
	}
	assert_int_equal(x.ran + limited, 50);
	assert_true(limited >= 30);
	assert_int_equal(bm(&x).failures, 0);
	assert_int_equal(bm(&x).rejections, 0);
	assert_int_equal(bm(&x).state, RESIL_BREAKER_CLOSED);
	assert_int_equal(
	    resil_throttle_get_metrics(resil_pipeline_throttle(x.p), &tm),
	    RESIL_OK);
	assert_int_equal(tm.local_rejects, (uint64_t)limited);
	assert_int_equal(tm.backend_rejects, (uint64_t)x.ran);
	assert_int_equal(tm.accepts, 0);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE, "throttle rejected"));
	resil_manual_clock_advance(&x.mc, 10 * RESIL_NS_PER_SEC);
	x.rcs = ok;
	x.ran = 0;
	for (i = 0; i < 20; i++)
		assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.ran, 20);
	fx_end(&x);
}

static void
test_throttle_stage_refuses_blocking(void **state)
{
	(void)state;
	throttle_refuses(0, 0);
}

static void
test_throttle_stage_refuses_machine(void **state)
{
	(void)state;
	throttle_refuses(0, 1);
}

static void
test_throttle_stage_refuses_selector(void **state)
{
	(void)state;
	throttle_refuses(1, 0);
	throttle_refuses(1, 1);
}

/* With failover, a call whose attempt was throttled by the server and
 * whose retry the throttle refused ends RESIL_E_LIMITED: the service
 * breaker's permit goes back (before the fix: a failure of the whole
 * call, and the breaker opened though no provider failed). */
static void
test_throttle_after_pushback_failover(void **state)
{
	static const int rcs[] = { RESIL_RC_THROTTLED };
	fx x;
	int i, m;

	(void)state;
	for (m = 0; m < 2; m++) {
		fx_start(&x, THROTTLE "retries=2\n", 1, m);
		x.rcs = rcs;
		x.nrc = 1;
		for (i = 0; i < 50; i++) {
			resil_err e = one_call(&x);

			if (!(e == RESIL_E_THROTTLED || e == RESIL_E_LIMITED))
				fail_msg("call %d: %s: %s", i,
				    resil_strerror(e), x.res.message);
		}
		assert_int_equal(bm(&x).state, RESIL_BREAKER_CLOSED);
		assert_int_equal(bm(&x).failures, 0);
		fx_end(&x);
	}
}

/* The throttle's counts in the registry's Prometheus text. */
static void
test_throttle_in_prometheus(void **state)
{
	static const int rcs[] = { RESIL_RC_THROTTLED };
	resil_registry_config rc = resil_registry_config_default();
	resil_registry *reg;
	static char buf[65536];
	size_t need = 0;
	fx x;
	int i;

	(void)state;
	fx_start(&x, THROTTLE, 0, 0);
	x.rcs = rcs;
	x.nrc = 1;
	for (i = 0; i < 3; i++)
		(void)one_call(&x);
	assert_int_equal(resil_registry_new(&reg, &rc, NULL), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, x.p, NULL), RESIL_OK);
	assert_int_equal(
	    resil_registry_write_prometheus(reg, buf, sizeof(buf), &need),
	    RESIL_OK);
	assert_non_null(strstr(buf,
	    "resil_throttle_requests_total{service=\"StockService\"} 3\n"));
	assert_non_null(strstr(buf,
	    "resil_throttle_window_accepts{service=\"StockService\"} 0\n"));
	assert_non_null(strstr(buf, "# TYPE resil_throttle_local_rejects_total "
	                            "counter\n"));
	/* The registry owns the pipeline now. */
	resil_registry_free(reg);
	x.p = NULL;
	fx_end(&x);
}

/* Errors of the server's own (HTTP 500) are accepts: the backend took
 * the request. The throttle never refuses, the breaker counts them. */
static void
test_throttle_counts_errors_as_accepts(void **state)
{
	static const int rcs[] = { 500 };
	resil_throttle_metrics tm;
	fx x;
	int i;

	(void)state;
	fx_start(&x,
	    "service=StockService\nthrottle.enabled=true\nthrottle.k=1\n", 0,
	    0);
	x.rcs = rcs;
	x.nrc = 1;
	for (i = 0; i < 20; i++)
		assert_int_equal(one_call(&x), RESIL_E_CALL);
	assert_int_equal(x.ran, 20);
	(void)resil_throttle_get_metrics(resil_pipeline_throttle(x.p), &tm);
	assert_int_equal(tm.accepts, 20);
	assert_int_equal(tm.local_rejects, 0);
	fx_end(&x);
}

/* The keys: refused with the key and the value; a reload that changes
 * one builds a new throttle and says so. */
static void
test_throttle_keys(void **state)
{
	resil_config *c = NULL;
	resil_diag d;
	fx x;

	(void)state;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\nthrottle.k=0.5\n", "t.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "t.conf:2"));
	assert_non_null(strstr(d.msg, "throttle.k"));
	assert_int_equal(
	    resil_config_parse_string(&c,
	        "service=S\nthrottle.window=10s\nthrottle.buckets=3\n",
	        "t.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(d.msg, "throttle.window: 10s is not a whole number of 3"));
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\nthrottle.bucket=3\n", "t.conf", NULL, &d),
	    RESIL_E_INVAL);
	/* throttle.k=0: on, and never refuses. */
	fx_start(&x, "service=S\nthrottle.k=0\n", 0, 0);
	assert_non_null(resil_pipeline_throttle(x.p));
	fx_end(&x);
	fx_start(&x, "service=S\n", 0, 0);
	assert_null(resil_pipeline_throttle(x.p));
	fx_end(&x);
}

/* Classes: the excess requests - k * accepts is shed from the lowest
 * class up: sheddable requests first, then default ones, critical ones
 * only with what is left after both. */
static double
fixed_draw(void *ctx)
{
	return *(const double *)ctx;
}

static void
test_throttle_classes(void **state)
{
	resil_manual_clock mc;
	resil_throttle_config cfg;
	resil_throttle *t;
	double u = 0.5;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_throttle_config_init(&cfg);
	cfg.k = 1;
	cfg.window_ns = 1000;
	cfg.buckets = 10;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.random.uniform = fixed_draw;
	cfg.random.ctx = &u;
	assert_int_equal(resil_throttle_new(&t, &cfg, NULL), RESIL_OK);
	/* 10 default requests, all accepted: no excess. */
	for (i = 0; i < 10; i++) {
		assert_int_equal(resil_throttle_admit(t), RESIL_OK);
		assert_int_equal(
		    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	}
	/* 4 critical requests not (yet) accepted: an excess of 4. */
	for (i = 0; i < 4; i++)
		assert_int_equal(
		    resil_throttle_admit_class(t, RESIL_THROTTLE_CRITICAL),
		    RESIL_OK);
	/* Sheddable first: p = min(1, 4 / (0 + 1)). */
	assert_int_equal(
	    resil_throttle_admit_class(t, RESIL_THROTTLE_SHEDDABLE),
	    RESIL_E_LIMITED);
	/* Default: the excess 5 less the 1 sheddable request, over 10 + 1:
	 * p = 4/11 < 0.5, it goes. */
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	/* Critical: 6 less the 12 lower requests: no excess left, p = 0. */
	assert_int_equal(
	    resil_throttle_admit_class(t, RESIL_THROTTLE_CRITICAL), RESIL_OK);
	/* Default again: (7 - 1) / (11 + 1) = 0.5 > 0.3: refused. */
	u = 0.3;
	assert_int_equal(resil_throttle_admit(t), RESIL_E_LIMITED);
	assert_int_equal(resil_throttle_admit_class(t, 3), RESIL_E_INVAL);
	assert_int_equal(resil_throttle_admit_class(t, -1), RESIL_E_INVAL);
	assert_string_equal(resil_throttle_class_name(0), "critical");
	assert_string_equal(resil_throttle_class_name(1), "default");
	assert_string_equal(resil_throttle_class_name(2), "sheddable");
	assert_string_equal(resil_throttle_class_name(9), "unknown");
	resil_throttle_free(t);
}

/* The window's running totals after a long silence and many buckets:
 * exactly the counts of the last window. */
static void
test_throttle_totals_follow_the_window(void **state)
{
	resil_manual_clock mc;
	resil_throttle_config cfg;
	resil_throttle_metrics m;
	resil_throttle *t;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_throttle_config_init(&cfg);
	cfg.k = 0;
	cfg.window_ns = 100;
	cfg.buckets = 10;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_throttle_new(&t, &cfg, NULL), RESIL_OK);
	/* One request and one accept every 10 ticks for 1000 ticks. */
	for (i = 0; i < 100; i++) {
		assert_int_equal(resil_throttle_admit(t), RESIL_OK);
		assert_int_equal(
		    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED), RESIL_OK);
		resil_manual_clock_advance(&mc, 10);
	}
	(void)resil_throttle_get_metrics(t, &m);
	assert_int_equal(m.window_requests, 9); /* buckets 91..99 */
	assert_int_equal(m.window_accepts, 9);
	resil_manual_clock_advance(&mc, 55);
	(void)resil_throttle_get_metrics(t, &m);
	assert_int_equal(m.window_requests, 4);
	resil_manual_clock_advance(&mc, 100000);
	(void)resil_throttle_get_metrics(t, &m);
	assert_int_equal(m.window_requests, 0);
	assert_int_equal(m.window_accepts, 0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	(void)resil_throttle_get_metrics(t, &m);
	assert_int_equal(m.window_requests, 1);
	assert_int_equal(m.requests, 101);
	resil_throttle_free(t);
}

/* ---- issue 42 (h2/overload): the rate limiter's classes and drain ---- */

#define RL_CLASSES                       \
	"service=StockService\n"         \
	"ratelimit.enabled=true\n"       \
	"ratelimit.rate=10\n"            \
	"ratelimit.period=1s\n"          \
	"ratelimit.burst=10\n"           \
	"ratelimit.reserve.critical=2\n" \
	"ratelimit.reserve.default=3\n"

/* The pipeline's rate limiter decides by the call's class: sheddable
 * calls stop at 5 of the 10, default ones at 8, critical ones take the
 * last 2; a refusal is RESIL_E_LIMITED and the function is not called. */
static void
ratelimit_classes(int machine)
{
	static const int ok[] = { 0 };
	fx x;
	int i;

	fx_start(&x, RL_CLASSES, 0, machine);
	x.rcs = ok;
	x.nrc = 1;
	x.prio = RESIL_PRIORITY_SHEDDABLE;
	for (i = 0; i < 5; i++)
		assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	x.prio = RESIL_PRIORITY_UNSET; /* the method's: default */
	for (i = 0; i < 3; i++)
		assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	x.prio = RESIL_PRIORITY_CRITICAL;
	for (i = 0; i < 2; i++)
		assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 10);
	/* The refill goes to the critical class first: 100 ms later one
	 * permit, the critical one's. */
	resil_manual_clock_advance(&x.mc, 100 * MS);
	x.prio = RESIL_PRIORITY_DEFAULT;
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	x.prio = RESIL_PRIORITY_CRITICAL;
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.ran, 11);
	fx_end(&x);
}

static void
test_ratelimit_classes_blocking(void **state)
{
	(void)state;
	ratelimit_classes(0);
}

static void
test_ratelimit_classes_machine(void **state)
{
	(void)state;
	ratelimit_classes(1);
}

/* ratelimit.drain_on_throttled: a throttled answer (even with no
 * Retry-After, so no pause) drains the limiter: the next call waits for
 * the next permit (100 ms at 10/s); without the key it does not. With a
 * Retry-After the drain and the pause both hold: after the pause the
 * limiter refills from empty. */
static void
pushback_drains(int machine)
{
	static const int bare[] = { RESIL_RC_THROTTLED, 0 };
	static const int ra[] = { RESIL_RC_THROTTLED_MS(300), 0 };
	fx x;
	int i;

	fx_start(
	    &x, RL_CLASSES "ratelimit.drain_on_throttled=true\n", 0, machine);
	x.rcs = bare;
	x.nrc = 2;
	x.prio = RESIL_PRIORITY_CRITICAL;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "server throttled: no Retry-After, rate limiter drained (9 "
	    "permits)"));
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 1);
	resil_manual_clock_advance(&x.mc, 100 * MS - 1);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	resil_manual_clock_advance(&x.mc, 1);
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.ran, 2);
	/* A Retry-After of 300 ms: paused to then, and empty then. */
	resil_manual_clock_advance(&x.mc, 10 * 100 * MS);
	x.rcs = ra;
	x.ran = 0;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	resil_manual_clock_advance(&x.mc, 300 * MS);
	for (i = 0; i < 3; i++)
		assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 4);
	fx_end(&x);

	/* Without the key: no drain. */
	fx_start(&x, RL_CLASSES, 0, machine);
	x.rcs = bare;
	x.nrc = 2;
	x.prio = RESIL_PRIORITY_CRITICAL;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_false(has_event(&x, RESIL_STAGE_THROTTLE, "drained"));
	fx_end(&x);
}

static void
test_pushback_drains_blocking(void **state)
{
	(void)state;
	pushback_drains(0);
}

static void
test_pushback_drains_machine(void **state)
{
	(void)state;
	pushback_drains(1);
}

/* The pause gate respects the classes: while a Retry-After pauses the
 * rate limiter stage, default (and sheddable) calls are refused by the
 * pause (the paused metric, the function not called), but a critical
 * call passes to the limiter's own decision: granted from its permits
 * (the critical reservation included), refused only when the limiter
 * itself is empty (RESIL_E_LIMITED, the paused metric unchanged). */
static void
pause_lets_critical_through(int machine)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(500), 0 };
	fx x;
	int i;

	fx_start(&x, RL_CLASSES, 0, machine);
	x.rcs = rcs;
	x.nrc = 2;
	assert_int_equal(one_call(&x), RESIL_E_THROTTLED);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "rate limiter paused until 1500000000"));
	resil_manual_clock_advance(&x.mc, 100 * MS); /* full again: 10 */
	x.prio = RESIL_PRIORITY_DEFAULT;
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	x.prio = RESIL_PRIORITY_SHEDDABLE;
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 1);
	assert_int_equal(pm(&x).paused, 2);
	/* Critical calls: the limiter's 10 permits, then its refusal. */
	x.prio = RESIL_PRIORITY_CRITICAL;
	for (i = 0; i < 10; i++)
		assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.ran, 11);
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 11);
	assert_int_equal(pm(&x).paused, 2);
	/* A default call just before the pause's end: still paused (the
	 * limiter, 4 permits back by now, is not asked). */
	resil_manual_clock_advance(&x.mc, 400 * MS - 1);
	x.prio = RESIL_PRIORITY_UNSET; /* the method's: default */
	assert_int_equal(one_call(&x), RESIL_E_LIMITED);
	assert_int_equal(pm(&x).paused, 3);
	assert_int_equal(x.ran, 11);
	/* At its end the limiter decides every class again. */
	resil_manual_clock_advance(&x.mc, 1);
	assert_int_equal(one_call(&x), RESIL_OK);
	assert_int_equal(x.ran, 12);
	assert_int_equal(pm(&x).paused, 3);
	fx_end(&x);
}

static void
test_pause_lets_critical_through_blocking(void **state)
{
	(void)state;
	pause_lets_critical_through(0);
}

static void
test_pause_lets_critical_through_machine(void **state)
{
	(void)state;
	pause_lets_critical_through(1);
}

/* The keys in text: read, written back, refused out of range. */
static void
test_ratelimit_class_keys(void **state)
{
	resil_config *conf = NULL;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "ratelimit.enabled=true\n"
	                     "ratelimit.burst=10\n"
	                     "ratelimit.reserve.critical=2\n"
	                     "ratelimit.reserve.default=8\n",
	                     "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "svc.conf:4: ratelimit.reserve.critical + "
	    "ratelimit.reserve.default: 10 must be below burst (10)");
	assert_int_equal(resil_config_parse_string(&conf,
	                     RL_CLASSES "ratelimit.drain_on_throttled=2\n",
	                     "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "ratelimit.drain_on_throttled"));
	assert_int_equal(resil_config_parse_string(&conf,
	                     RL_CLASSES "ratelimit.drain_on_throttled=true\n",
	                     "svc.conf", NULL, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_pipeline(conf)->ratelimit.reserve_critical, 2);
	assert_int_equal(
	    resil_config_pipeline(conf)->ratelimit.reserve_default, 3);
	assert_int_equal(
	    resil_config_pipeline(conf)->ratelimit.drain_on_throttled, 1);
	resil_config_free(conf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rc_throttled_codes),
		cmocka_unit_test(test_pushback_not_a_failure_blocking),
		cmocka_unit_test(test_pushback_not_a_failure_machine),
		cmocka_unit_test(test_pushback_not_a_failure_selector),
		cmocka_unit_test(test_pushback_retry_waits_blocking),
		cmocka_unit_test(test_pushback_retry_waits_machine),
		cmocka_unit_test(test_pushback_past_deadline),
		cmocka_unit_test(test_pushback_pauses_ratelimit_blocking),
		cmocka_unit_test(test_pushback_pauses_ratelimit_machine),
		cmocka_unit_test(test_throttle_stage_refuses_blocking),
		cmocka_unit_test(test_throttle_stage_refuses_machine),
		cmocka_unit_test(test_throttle_stage_refuses_selector),
		cmocka_unit_test(test_throttle_after_pushback_failover),
		cmocka_unit_test(test_throttle_counts_errors_as_accepts),
		cmocka_unit_test(test_throttle_in_prometheus),
		cmocka_unit_test(test_throttle_keys),
		cmocka_unit_test(test_throttle_classes),
		cmocka_unit_test(test_throttle_totals_follow_the_window),
		cmocka_unit_test(test_ratelimit_classes_blocking),
		cmocka_unit_test(test_ratelimit_classes_machine),
		cmocka_unit_test(test_pushback_drains_blocking),
		cmocka_unit_test(test_pushback_drains_machine),
		cmocka_unit_test(test_ratelimit_class_keys),
		cmocka_unit_test(test_pause_lets_critical_through_blocking),
		cmocka_unit_test(test_pause_lets_critical_through_machine),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Decided semantics of the call path (issue 23, shared/DESIGN.md
 * "Decided in turn 3"), each through the public API: the user's function
 * says its failure was a timeout (RESIL_RC_TIMEOUT) and it counts as one
 * everywhere; failback with a full queue drops the new failure and the
 * caller gets no error; failfast, failsafe and failback without a
 * selector; a call whose every attempt failed says nothing answered.
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

#define MS RESIL_NS_PER_MS

/* A cluster from configuration text over endpoints e0..e3 (zones hz, hz,
 * sh, sh). */
typedef struct cfx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	resil_pipeline_record rec[64];
	resil_pipeline_recorder r;
	resil_diag diag;
	int calls[4];
	char order[256];
	int rc[4]; /* each endpoint's answer: 0 (value 1) or a code */
	uint64_t delay; /* each attempt runs this long (the manual clock) */
} cfx;

static void
cfx_start(cfx *x, const char *text, int selector)
{
	static const char *const addr[] = { "e0:1", "e1:1", "e2:1", "e3:1" };
	static const char *const zones[] = { "hz", "hz", "sh", "sh" };
	resil_endpoint_spec specs[4];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	size_t i;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000 * MS);
	if (resil_config_parse_string(
	        &x->conf, text, "svc.conf", NULL, &x->diag) != RESIL_OK)
		fail_msg("config: %s", x->diag.msg);
	pc = *resil_config_pipeline(x->conf);
	pc.clock = resil_manual_clock_hook(&x->mc);
	resil_pipeline_recorder_init(&x->r, x->rec, 64);
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
		for (i = 0; i < 4; i++) {
			specs[i] = resil_endpoint_spec_default(addr[i]);
			specs[i].zone = zones[i];
		}
		assert_int_equal(
		    resil_directory_push(x->d, specs, 4, &x->diag), RESIL_OK);
		pc.selector = x->sel;
	}
	if (resil_pipeline_new(&x->p, &pc, &x->diag) != RESIL_OK)
		fail_msg("pipeline: %s", x->diag.msg);
}

static void
cfx_end(cfx *x)
{
	resil_pipeline_free(x->p);
	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	resil_config_free(x->conf);
}

static int
ep_fn(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	cfx *x = ctx;
	int i = ep != NULL ? ep->address[1] - '0' : 0;
	size_t len = strlen(x->order);

	(void)args;
	x->calls[i]++;
	resil_manual_clock_advance(&x->mc, x->delay);
	snprintf(x->order + len, sizeof(x->order) - len, "%s%s",
	    len > 0 ? " " : "", ep != NULL ? ep->address : "-");
	if (x->rc[i] != 0)
		return x->rc[i];
	*out = resil_value_int(1);
	return 0;
}

static int
plain_fn(void *ctx, const resil_args *args, resil_value *out)
{
	return ep_fn(ctx, NULL, args, out);
}

static resil_err
invoke(cfx *x, resil_result *r)
{
	resil_args a = { "getStock", NULL, 0 };

	return resil_pipeline_invoke(x->p, NULL, &a, ep_fn, x, r);
}

/* How many recorded events have text starting with t. */
static int
events(const cfx *x, const char *t)
{
	size_t i;
	int n = 0;

	for (i = 0; i < x->r.count; i++)
		if (strncmp(x->rec[i].text, t, strlen(t)) == 0)
			n++;
	return n;
}

/* ---- the user's function says it timed out ---- */

static void
test_declared_timeout_without_selector(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_pipeline_metrics mt;
	resil_breaker_metrics bm;
	resil_result r;
	cfx x;

	(void)state;
	/* No timeout configured: the blocking driver's inline first step. */
	cfx_start(&x,
	    "service=StockService\n"
	    "retry.enabled=true\n"
	    "retry.max_attempts=2\n"
	    "retry.delay=0\n",
	    0);
	x.rc[0] = RESIL_RC_TIMEOUT;
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_E_TIMEOUT);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(r.last_failure, RESIL_E_TIMEOUT);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &mt), RESIL_OK);
	assert_int_equal(mt.timeouts, 2);
	cfx_end(&x);

	/* With a timeout: the breaker records a slow failure although the
	 * function answered at once. */
	cfx_start(&x,
	    "service=StockService\n"
	    "timeout=100\n"
	    "breaker.enabled=true\n"
	    "breaker.slow_rate=50\n"
	    "breaker.slow_threshold=50\n"
	    "breaker.min_calls=1\n",
	    0);
	x.rc[0] = RESIL_RC_TIMEOUT;
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_E_TIMEOUT);
	resil_result_free(&r);
	assert_int_equal(
	    resil_breaker_get_metrics(resil_pipeline_breaker(x.p, NULL), &bm),
	    RESIL_OK);
	assert_int_equal(bm.slow_calls, 1);
	assert_int_equal(bm.failures, 1);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &mt), RESIL_OK);
	assert_int_equal(mt.timeouts, 1);
	cfx_end(&x);
}

static void
test_declared_timeout_crosses_zones(void **state)
{
	resil_result r;
	cfx x;

	(void)state;
	cfx_start(&x,
	    "service=StockService\n"
	    "timeout=1000\n"
	    "cluster=zone-aware\n"
	    "zone=hz\n"
	    "retries=1\n"
	    "loadbalance=roundrobin\n"
	    "outlier.max_ejection_pct=0\n",
	    1);
	/* Both local endpoints say their own deadline passed: phase 1's
	 * two attempts, then the one cross-zone attempt. */
	x.rc[0] = x.rc[1] = RESIL_RC_TIMEOUT;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(r.zone, "sh");
	assert_string_equal(x.order, "e0:1 e1:1 e2:1");
	assert_int_equal(events(&x, "cluster cross_zone"), 1);
	resil_result_free(&r);
	/* A plain failure (not a timeout) never crosses. */
	memset(x.order, 0, sizeof(x.order));
	x.rc[0] = x.rc[1] = 111;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(x.calls[2] + x.calls[3], 1);
	resil_result_free(&r);
	cfx_end(&x);
}

/* Issue 38.13: a timeout the function reports says so, and when (its
 * own time), not the configured timeout (before: "timeout after 1000
 * ms" for an attempt that ended at 200 ms); resil's own deadline keeps
 * its words. Through both drivers, with a selector and over the one
 * implicit endpoint. */
static const char *
machine_message(cfx *x, char *buf, size_t n)
{
	resil_invocation inv;
	resil_call c;
	resil_call_next st;
	resil_result r;
	uint64_t now = resil_manual_clock_now(&x->mc);

	resil_invocation_init(&inv, "getStock");
	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start_ex(&c, x->p, NULL, &inv, &r, now, &st), RESIL_OK);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			resil_value v;
			uint32_t id = st.attempt;
			int rc = ep_fn(x, st.endpoint, &inv.args, &v);

			now = resil_manual_clock_now(&x->mc);
			assert_int_equal(
			    resil_call_report(&c, id, rc, &v, now), RESIL_OK);
		} else if (st.action == RESIL_CALL_WAIT && st.until > now) {
			resil_manual_clock_advance(&x->mc, st.until - now);
			now = st.until;
		}
		assert_int_equal(resil_call_step(&c, now, &st), RESIL_OK);
	}
	snprintf(buf, n, "%s", r.message);
	resil_result_free(&r);
	return buf;
}

static void
test_declared_timeout_says_when(void **state)
{
	static const char own[] =
	    "Last error is: the function's own timeout (RESIL_RC_TIMEOUT) "
	    "after 200 ms";
	char buf[RESIL_RESULT_MSG_MAX];
	resil_args a = { "getStock", NULL, 0 };
	resil_result r;
	cfx x;

	(void)state;
	cfx_start(&x,
	    "service=StockService\n"
	    "timeout=1000\n"
	    "retries=1\n"
	    "loadbalance=roundrobin\n"
	    "outlier.max_ejection_pct=0\n",
	    1);
	x.rc[0] = x.rc[1] = x.rc[2] = x.rc[3] = RESIL_RC_TIMEOUT;
	x.delay = 200 * MS;
	assert_int_equal(invoke(&x, &r), RESIL_E_TIMEOUT);
	if (strstr(r.message, own) == NULL)
		fail_msg("blocking: %s", r.message);
	resil_result_free(&r);
	if (strstr(machine_message(&x, buf, sizeof(buf)), own) == NULL)
		fail_msg("call machine: %s", buf);
	/* Its time as it was, to the nanosecond. */
	x.delay = 200 * MS + 250 * RESIL_NS_PER_US;
	assert_int_equal(invoke(&x, &r), RESIL_E_TIMEOUT);
	assert_non_null(strstr(r.message,
	    "Last error is: the function's own timeout (RESIL_RC_TIMEOUT) "
	    "after 200.25 ms"));
	resil_result_free(&r);
	/* resil's own deadline: the configured timeout, as before. */
	x.rc[0] = x.rc[1] = x.rc[2] = x.rc[3] = 0;
	x.delay = 1500 * MS;
	assert_int_equal(invoke(&x, &r), RESIL_E_TIMEOUT);
	assert_non_null(
	    strstr(r.message, "Last error is: timeout after 1000 ms"));
	resil_result_free(&r);
	cfx_end(&x);

	/* failfast over the one implicit endpoint (no selector). */
	cfx_start(&x,
	    "service=StockService\n"
	    "timeout=1000\n"
	    "cluster=failfast\n",
	    0);
	x.rc[0] = RESIL_RC_TIMEOUT;
	x.delay = 200 * MS;
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_E_TIMEOUT);
	if (strstr(r.message, own) == NULL)
		fail_msg("failfast, blocking: %s", r.message);
	resil_result_free(&r);
	if (strstr(machine_message(&x, buf, sizeof(buf)), own) == NULL)
		fail_msg("failfast, call machine: %s", buf);
	cfx_end(&x);
}

/* ---- a call whose every attempt failed: nothing answered ---- */

static void
test_failed_call_source_is_unavailable(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_pipeline_metrics mt;
	resil_result r;
	cfx x;

	(void)state;
	cfx_start(&x,
	    "service=StockService\n"
	    "retry.enabled=true\n"
	    "retry.max_attempts=2\n"
	    "retry.delay=0\n",
	    0);
	x.rc[0] = 111;
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_E_CALL);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.rc, 111);
	assert_int_equal(r.attempts, 2);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &mt), RESIL_OK);
	assert_int_equal(mt.errors, 1);
	assert_int_equal(mt.unavailable, 0);
	assert_int_equal(mt.live, 0);
	cfx_end(&x);

	/* Through a cluster: the same, with Dubbo's message. */
	cfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n"
	    "retries=1\n",
	    1);
	x.rc[0] = x.rc[1] = x.rc[2] = x.rc[3] = 111;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_non_null(strstr(r.message, "Tried 2 times"));
	resil_result_free(&r);
	cfx_end(&x);
}

/* ---- failfast, failsafe, failback without a selector ---- */

static void
test_strategies_without_selector(void **state)
{
	resil_args a = { "getStock", "k", 1 };
	resil_pipeline_metrics mt;
	resil_result r;
	size_t ran = 0;
	cfx x;
	int k;

	(void)state;
	/* failfast: one attempt, its error. */
	cfx_start(&x, "service=StockService\ncluster=failfast\n", 0);
	x.rc[0] = 111;
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	cfx_end(&x);

	/* failsafe: no error, a null value, an event; a fail: mock never
	 * fires (the failure never reaches the fallback chain). */
	cfx_start(&x,
	    "service=StockService\ncluster=failsafe\n"
	    "mock=fail:return 5\n",
	    0);
	x.rc[0] = 111;
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.last_failure, RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	assert_int_equal(events(&x, "cluster swallowed"), 1);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &mt), RESIL_OK);
	assert_int_equal(mt.mock, 0);
	cfx_end(&x);

	/* failback: no error now; the call queued, retried by the poll on
	 * the one endpoint (NULL) with its arguments, a full queue drops the
	 * new failure. */
	cfx_start(&x,
	    "service=StockService\ncluster=failback\n"
	    "failback.queue=2\nfailback.period=1s\n",
	    0);
	x.rc[0] = 111;
	for (k = 0; k < 3; k++) {
		assert_int_equal(
		    resil_pipeline_call(x.p, &a, plain_fn, &x, &r), RESIL_OK);
		assert_int_equal(r.value.type, RESIL_VALUE_NULL);
		resil_result_free(&r);
	}
	assert_int_equal(resil_pipeline_failback_pending(x.p), 2);
	assert_int_equal(events(&x, "cluster queued"), 2);
	assert_int_equal(events(&x, "cluster queue_full"), 1);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &mt), RESIL_OK);
	assert_int_equal(mt.failback_dropped, 1);
	x.rc[0] = 0;
	memset(x.order, 0, sizeof(x.order));
	resil_manual_clock_advance(&x.mc, 1000 * MS);
	assert_int_equal(resil_pipeline_failback_poll(x.p,
	                     resil_manual_clock_now(&x.mc), ep_fn, &x, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 2);
	assert_string_equal(x.order, "- -");
	assert_int_equal(resil_pipeline_failback_pending(x.p), 0);
	cfx_end(&x);

	/* One attempt each: the retry stage is refused, naming it (by the
	 * text at its line since issue 24.5; resil_pipeline_new refuses the
	 * same configuration given in C). */
	assert_int_equal(resil_config_parse_string(&x.conf,
	                     "service=S\ncluster=failsafe\n"
	                     "retry.enabled=true\n",
	                     "svc.conf", NULL, &x.diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(x.diag.msg,
	    "svc.conf:3: retry.enabled: cluster=failsafe makes one attempt"));
	assert_int_equal(
	    resil_config_parse_string(&x.conf, "service=S\ncluster=failsafe\n",
	        "svc.conf", NULL, &x.diag),
	    RESIL_OK);
	{
		resil_pipeline_config pc = *resil_config_pipeline(x.conf);

		pc.retry_enabled = 1;
		assert_int_equal(
		    resil_pipeline_new(&x.p, &pc, &x.diag), RESIL_E_INVAL);
		assert_non_null(strstr(x.diag.msg,
		    "cluster: failsafe makes "
		    "one attempt"));
	}
	resil_config_free(x.conf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_declared_timeout_without_selector),
		cmocka_unit_test(test_declared_timeout_crosses_zones),
		cmocka_unit_test(test_declared_timeout_says_when),
		cmocka_unit_test(test_failed_call_source_is_unavailable),
		cmocka_unit_test(test_strategies_without_selector),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The request reaches routing (issue 23.1): a cluster pipeline built from
 * configuration text, called with a resil_invocation (Dubbo's
 * Invocation: arguments, tag, attachments, retries) through the blocking
 * driver, the forking driver, the call machine and failback's queue. Hash
 * stickiness, tag routing, argument and attachment conditions, the forced
 * tag and the retries override, each through the public API. And the
 * service breaker of a cluster records whole calls (issue 23.3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#define MS RESIL_NS_PER_MS

/* The endpoints every test pushes: e0, e1 untagged; e2, e3 canary. */
typedef struct rfx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	resil_diag diag;
	/* The dependency: calls per endpoint, the last endpoint called;
	 * endpoints listed in dead fail (rc 111). */
	int calls[8];
	char last[32];
	char dead[64];
} rfx;

static void
rfx_start(rfx *x, const char *text)
{
	static const char *const addr[] = { "e0:1", "e1:1", "e2:1", "e3:1" };
	static const char *const tags[] = { NULL, NULL, "canary", "canary" };
	static const char *const params[] = { "region=eu", "region=us",
		"region=eu", "region=us" };
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
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&x->mc);
	(void)resil_config_directory(x->conf, &dc);
	assert_int_equal(resil_directory_new(&x->d, &dc, &x->diag), RESIL_OK);
	(void)resil_config_selector(x->conf, &sc);
	assert_int_equal(
	    resil_selector_new(&x->sel, x->d, &sc, &x->diag), RESIL_OK);
	for (i = 0; i < 4; i++) {
		specs[i] = resil_endpoint_spec_default(addr[i]);
		specs[i].tag = tags[i];
		specs[i].params = params[i];
	}
	assert_int_equal(
	    resil_directory_push(x->d, specs, 4, &x->diag), RESIL_OK);
	pc = *resil_config_pipeline(x->conf);
	pc.clock = resil_manual_clock_hook(&x->mc);
	pc.selector = x->sel;
	if (resil_pipeline_new(&x->p, &pc, &x->diag) != RESIL_OK)
		fail_msg("pipeline: %s", x->diag.msg);
}

static void
rfx_end(rfx *x)
{
	resil_pipeline_free(x->p);
	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	resil_config_free(x->conf);
}

static int
dep(void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	rfx *x = ctx;

	(void)args;
	assert_non_null(ep);
	x->calls[ep->address[1] - '0']++;
	snprintf(x->last, sizeof(x->last), "%s", ep->address);
	if (strstr(x->dead, ep->address) != NULL)
		return 111;
	*out = resil_value_int(1);
	return 0;
}

/* One call with argument arg0 (NULL: none) and tag (NULL: none); its
 * error, the endpoint in x->last. */
static resil_err
call(rfx *x, const char *arg0, const char *tag)
{
	resil_invocation inv;
	resil_result r;
	resil_err err;

	resil_invocation_init(&inv, "getStock");
	if (arg0 != NULL) {
		inv.arguments = &arg0;
		inv.narguments = 1;
	}
	inv.tag = tag;
	x->last[0] = '\0';
	err = resil_pipeline_invoke_ex(x->p, NULL, &inv, dep, x, &r);
	resil_result_free(&r);
	return err;
}

static void
test_request_hash_sticks(void **state)
{
	static const char *const keys[] = { "apple", "pear", "plum", "fig",
		"kiwi", "lime", "date", "sloe" };
	char first[8][32];
	int used[4] = { 0, 0, 0, 0 }, k, n, spread = 0;
	rfx x;

	(void)state;
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=hash\n"
	    "loadbalance.hash.arguments=0\n");
	for (k = 0; k < 8; k++) {
		assert_int_equal(call(&x, keys[k], NULL), RESIL_OK);
		snprintf(first[k], sizeof(first[k]), "%s", x.last);
		used[x.last[1] - '0'] = 1;
	}
	/* Each key keeps its endpoint. */
	for (n = 0; n < 5; n++)
		for (k = 0; k < 8; k++) {
			assert_int_equal(call(&x, keys[k], NULL), RESIL_OK);
			assert_string_equal(x.last, first[k]);
		}
	/* The keys spread over both (untagged) endpoints. */
	for (k = 0; k < 4; k++)
		spread += used[k];
	assert_int_equal(spread, 2);
	assert_int_equal(used[2] + used[3], 0);
	rfx_end(&x);
}

static void
test_request_hash_without_arguments_refused(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_result r;
	rfx x;

	(void)state;
	/* The plain form carries no arguments: a hash on argument 0 is
	 * refused with the selector's words, never guessed. */
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=hash\n"
	    "loadbalance.hash.arguments=0\n");
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, dep, &x, &r), RESIL_E_INVAL);
	assert_non_null(strstr(r.message, "out of range"));
	resil_result_free(&r);
	rfx_end(&x);
}

static void
test_request_tag_routes(void **state)
{
	resil_invocation inv;
	resil_param att[2];
	resil_result r;
	int k;
	rfx x;

	(void)state;
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n");
	for (k = 0; k < 6; k++) {
		assert_int_equal(call(&x, NULL, "canary"), RESIL_OK);
		assert_true(x.last[1] == '2' || x.last[1] == '3');
	}
	assert_int_equal(x.calls[2], 3);
	assert_int_equal(x.calls[3], 3);
	/* Untagged: the untagged endpoints only; an unknown tag falls back
	 * to them. */
	for (k = 0; k < 4; k++) {
		assert_int_equal(
		    call(&x, NULL, k % 2 ? NULL : "blue"), RESIL_OK);
		assert_true(x.last[1] == '0' || x.last[1] == '1');
	}
	/* Dubbo's attachments: dubbo.tag routes, dubbo.force.tag forces. */
	resil_invocation_init(&inv, "getStock");
	att[0].key = "dubbo.tag";
	att[0].value = "canary";
	inv.attachments = att;
	inv.nattachments = 1;
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r), RESIL_OK);
	assert_true(x.last[1] == '2' || x.last[1] == '3');
	resil_result_free(&r);
	att[0].value = "blue";
	att[1].key = "dubbo.force.tag";
	att[1].value = "true";
	inv.nattachments = 2;
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_E_NO_PROVIDER);
	assert_non_null(strstr(r.message, "No provider available"));
	resil_result_free(&r);
	/* The field form of the forced tag. */
	resil_invocation_init(&inv, "getStock");
	inv.tag = "blue";
	inv.tag_force = 1;
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_E_NO_PROVIDER);
	resil_result_free(&r);
	rfx_end(&x);
}

static void
test_request_argument_and_param_conditions(void **state)
{
	resil_invocation inv;
	resil_param att;
	resil_result r;
	int k;
	rfx x;

	(void)state;
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n"
	    "router.condition=arguments[0] = vip* => address = e1:1\n"
	    "router.condition=region = us => region = us\n");
	for (k = 0; k < 3; k++) {
		assert_int_equal(call(&x, "vip-42", NULL), RESIL_OK);
		assert_string_equal(x.last, "e1:1");
	}
	/* Another argument: both untagged endpoints. */
	assert_int_equal(call(&x, "plain", NULL), RESIL_OK);
	assert_int_equal(call(&x, "plain", NULL), RESIL_OK);
	assert_int_equal(x.calls[0], 1);
	/* An attachment is a param the WHEN side reads: region=us keeps the
	 * endpoints with region=us (e1 untagged, e3 canary). */
	resil_invocation_init(&inv, "getStock");
	att.key = "region";
	att.value = "us";
	inv.attachments = &att;
	inv.nattachments = 1;
	for (k = 0; k < 3; k++) {
		assert_int_equal(
		    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
		    RESIL_OK);
		assert_string_equal(x.last, "e1:1");
		resil_result_free(&r);
	}
	inv.tag = "canary";
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r), RESIL_OK);
	assert_string_equal(x.last, "e3:1");
	resil_result_free(&r);
	rfx_end(&x);
}

static void
test_request_retries_override(void **state)
{
	resil_invocation inv;
	resil_param att;
	resil_result r;
	rfx x;

	(void)state;
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n"
	    "retries=2\n");
	snprintf(x.dead, sizeof(x.dead), "e0:1 e1:1 e2:1 e3:1");
	resil_invocation_init(&inv, "getStock");
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	resil_result_free(&r);
	inv.has_retries = 1;
	inv.retries = 0;
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	inv.retries = 4;
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.attempts, 5);
	assert_non_null(strstr(r.message, "Tried 5 times"));
	resil_result_free(&r);
	/* Dubbo's attachment retries=1: two attempts. */
	resil_invocation_init(&inv, "getStock");
	att.key = "retries";
	att.value = "1";
	inv.attachments = &att;
	inv.nattachments = 1;
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.attempts, 2);
	resil_result_free(&r);
	rfx_end(&x);
}

static void
test_request_call_machine(void **state)
{
	resil_invocation inv;
	const char *arg = "vip-7";
	resil_call c;
	resil_call_next st;
	resil_result r;
	resil_value v;
	int runs = 0;
	rfx x;

	(void)state;
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n"
	    "router.condition=arguments[0] = vip* => tag = canary\n");
	resil_invocation_init(&inv, "getStock");
	inv.arguments = &arg;
	inv.narguments = 1;
	inv.tag = "canary";
	memset(&c, 0, sizeof(c));
	assert_int_equal(resil_call_start_ex(&c, x.p, NULL, &inv, &r,
	                     resil_manual_clock_now(&x.mc), &st),
	    RESIL_OK);
	while (st.action != RESIL_CALL_DONE) {
		assert_int_equal(st.action, RESIL_CALL_RUN);
		assert_non_null(st.endpoint);
		assert_true(st.endpoint->address[1] == '2' ||
		    st.endpoint->address[1] == '3');
		runs++;
		v = resil_value_int(5);
		assert_int_equal(resil_call_report(&c, st.attempt, 0, &v,
		                     resil_manual_clock_now(&x.mc)),
		    RESIL_OK);
		assert_int_equal(
		    resil_call_step(&c, resil_manual_clock_now(&x.mc), &st),
		    RESIL_OK);
	}
	assert_int_equal(runs, 1);
	assert_int_equal(r.err, RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(resil_call_start_ex(&c, x.p, NULL, NULL, &r, 0, &st),
	    RESIL_E_INVAL);
	rfx_end(&x);
}

/* An executor on the calling thread: submit queues the job, wait runs
 * the queued ones (each once), which wakes the driver. */
typedef struct qex {
	void (*run[8])(void *job);
	void *job[8];
	int n;
} qex;

static int
ex_submit(void (*run)(void *job), void *job, void *ctx)
{
	qex *q = ctx;

	if (q->n == 8)
		return 1;
	q->run[q->n] = run;
	q->job[q->n++] = job;
	return 0;
}

static void
ex_wait(uint64_t until, void *ctx)
{
	qex *q = ctx;
	int i, n = q->n;

	(void)until;
	q->n = 0;
	for (i = 0; i < n; i++)
		q->run[i](q->job[i]);
}

static void
ex_wake(void *ctx)
{
	(void)ctx;
}

static void
test_request_forking_routes(void **state)
{
	resil_pipeline_config pc;
	resil_pipeline *p;
	resil_invocation inv;
	resil_result r;
	qex q;
	rfx x;

	(void)state;
	memset(&q, 0, sizeof(q));
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n");
	assert_int_equal(
	    resil_config_set(x.conf, "cluster", "forking", &x.diag), RESIL_OK);
	assert_int_equal(
	    resil_config_set(x.conf, "forks", "4", &x.diag), RESIL_OK);
	pc = *resil_config_pipeline(x.conf);
	pc.clock = resil_manual_clock_hook(&x.mc);
	pc.selector = x.sel;
	pc.executor.submit = ex_submit;
	pc.executor.wait = ex_wait;
	pc.executor.wake = ex_wake;
	pc.executor.ctx = &q;
	assert_int_equal(resil_pipeline_new(&p, &pc, &x.diag), RESIL_OK);
	snprintf(x.dead, sizeof(x.dead), "e2:1 e3:1");
	resil_invocation_init(&inv, "getStock");
	inv.tag = "canary";
	/* Forks go to the canary endpoints only: both fail. */
	assert_int_equal(resil_pipeline_invoke_ex(p, NULL, &inv, dep, &x, &r),
	    RESIL_E_CALL);
	assert_int_equal(x.calls[0] + x.calls[1], 0);
	assert_int_equal(x.calls[2] + x.calls[3], 2);
	resil_result_free(&r);
	/* An executor that refuses: each fork runs on the calling thread,
	 * one after another; the third finds no distinct candidate, and
	 * the call's error is still the last fork's (not "unavailable"). */
	q.n = 8; /* full: submit refuses */
	memset(x.calls, 0, sizeof(x.calls));
	assert_int_equal(
	    resil_pipeline_invoke_ex(p, NULL, &inv, dep, &x, &r), RESIL_E_CALL);
	assert_int_equal(x.calls[2] + x.calls[3], 2);
	assert_int_equal(r.attempts, 2);
	resil_result_free(&r);
	resil_pipeline_free(p);
	rfx_end(&x);
}

static void
test_request_failback_keeps_it(void **state)
{
	resil_invocation inv;
	resil_result r;
	size_t ran = 0;
	rfx x;

	(void)state;
	rfx_start(&x,
	    "service=StockService\n"
	    "loadbalance=roundrobin\n"
	    "cluster=failback\n"
	    "failback.period=1s\n");
	snprintf(x.dead, sizeof(x.dead), "e2:1");
	resil_invocation_init(&inv, "getStock");
	inv.tag = "canary";
	assert_int_equal(
	    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r), RESIL_OK);
	assert_string_equal(x.last, "e2:1");
	assert_int_equal(resil_pipeline_failback_pending(x.p), 1);
	resil_result_free(&r);
	/* The queued call is retried with its request: on the other
	 * canary endpoint, never an untagged one. */
	resil_manual_clock_advance(&x.mc, 1000 * MS);
	assert_int_equal(resil_pipeline_failback_poll(x.p,
	                     resil_manual_clock_now(&x.mc), dep, &x, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 1);
	assert_string_equal(x.last, "e3:1");
	assert_int_equal(x.calls[0] + x.calls[1], 0);
	assert_int_equal(resil_pipeline_failback_pending(x.p), 0);
	rfx_end(&x);
}

static void
test_service_breaker_records_whole_calls(void **state)
{
	static const char *const addr[] = { "e0:1", "e1:1", "e2:1" };
	resil_endpoint_spec specs[3];
	resil_pipeline_metrics mt;
	resil_invocation inv;
	resil_result r;
	int k;
	rfx x;

	(void)state;
	/* Failover over three endpoints, one dead: a quarter of the
	 * attempts fail, every call succeeds. The service breaker (20%)
	 * records calls, so it never trips and the mock never answers. */
	rfx_start(&x, "service=StockService\n"
	              "loadbalance=roundrobin\n"
	              "outlier.max_ejection_pct=0\n"
	              "breaker.enabled=true\n"
	              "breaker.failure_rate=20\n"
	              "breaker.min_calls=5\n"
	              "breaker.window_size=20\n"
	              "mock=fail:return 0\n");
	for (k = 0; k < 3; k++)
		specs[k] = resil_endpoint_spec_default(addr[k]);
	assert_int_equal(
	    resil_directory_push(x.d, specs, 3, &x.diag), RESIL_OK);
	snprintf(x.dead, sizeof(x.dead), "e1:1");
	resil_invocation_init(&inv, "getStock");
	for (k = 0; k < 300; k++) {
		assert_int_equal(
		    resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
		    RESIL_OK);
		assert_int_equal(r.source, RESIL_SOURCE_LIVE);
		assert_int_equal(r.breaker_state, RESIL_BREAKER_CLOSED);
		resil_result_free(&r);
		resil_manual_clock_advance(&x.mc, MS);
	}
	assert_true(x.calls[1] >= 90); /* the dead one was tried */
	assert_int_equal(
	    resil_breaker_get_state(resil_pipeline_breaker(x.p, "getStock")),
	    RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &mt), RESIL_OK);
	assert_int_equal(mt.mock, 0);
	/* All three dead: whole calls fail, the breaker opens, the mock
	 * answers, and an open breaker rejects the call before any attempt. */
	snprintf(x.dead, sizeof(x.dead), "e0:1 e1:1 e2:1");
	for (k = 0; k < 5; k++) {
		(void)resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r);
		assert_int_equal(r.source, RESIL_SOURCE_MOCK);
		resil_result_free(&r);
	}
	assert_int_equal(
	    resil_breaker_get_state(resil_pipeline_breaker(x.p, "getStock")),
	    RESIL_BREAKER_OPEN);
	k = x.calls[0] + x.calls[1] + x.calls[2];
	assert_int_equal(resil_pipeline_invoke_ex(x.p, NULL, &inv, dep, &x, &r),
	    RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.attempts, 0);
	resil_result_free(&r);
	assert_int_equal(x.calls[0] + x.calls[1] + x.calls[2], k);
	rfx_end(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_hash_sticks),
		cmocka_unit_test(test_request_hash_without_arguments_refused),
		cmocka_unit_test(test_request_tag_routes),
		cmocka_unit_test(test_request_argument_and_param_conditions),
		cmocka_unit_test(test_request_retries_override),
		cmocka_unit_test(test_request_call_machine),
		cmocka_unit_test(test_request_forking_routes),
		cmocka_unit_test(test_request_failback_keeps_it),
		cmocka_unit_test(test_service_breaker_records_whole_calls),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Cluster strategies inside the pipeline (resil_pipeline_config.selector):
 * through the blocking driver resil_pipeline_invoke() and through the call
 * machine, on the manual clock over a round-robin selector, with exact
 * attempt counts, endpoints tried, results, messages and events. Also
 * seed 000's order table (force / fail + failover / fail + failfast /
 * fail + failsafe / business error) through the real cluster.
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

#include "support/cluster_fx.h"

#define MS RESIL_NS_PER_MS

/* A scripted dependency: endpoint i fails its first fails[i] calls (rc
 * 111); biz[i] answers a business error (rc 7); otherwise 100 + i. */
typedef struct dep {
	int fails[8];
	int biz[8];
	int calls[8];
	char order[512]; /* endpoints called, in order */
	int n;
} dep;

static int
endpoint_index(const char *address)
{
	return address[1] - '0';
}

static void
dep_note(dep *d, const resil_pick *ep)
{
	size_t len = strlen(d->order);

	snprintf(d->order + len, sizeof(d->order) - len, "%s%s",
	    len > 0 ? " " : "", ep->address);
}

static int
dep_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	dep *d = ctx;
	int i;

	(void)args;
	assert_non_null(ep);
	i = endpoint_index(ep->address);
	dep_note(d, ep);
	d->calls[i]++;
	d->n++;
	if (d->biz[i])
		return 7;
	if (d->calls[i] <= d->fails[i])
		return 111; /* ECONNREFUSED */
	*out = resil_value_int(100 + i);
	return 0;
}

static resil_outcome
classify(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 7 ? RESIL_OUTCOME_BUSINESS : RESIL_OUTCOME_FAILURE;
}

#define MAX_EV 64

typedef struct pfx {
	fx f;
	resil_pipeline_config pcfg;
	resil_pipeline *p;
	resil_pipeline_record rec[MAX_EV];
	resil_pipeline_recorder r;
	dep d;
	resil_diag diag;
} pfx;

/* n endpoints e0:1.. ; zones[i] (NULL: none). */
static void
push(pfx *x, size_t n, const char *const *zones)
{
	resil_endpoint_spec specs[8];
	static char addr[8][16];
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(addr[i], sizeof(addr[i]), "e%zu:1", i);
		specs[i] = resil_endpoint_spec_default(addr[i]);
		if (zones != NULL)
			specs[i].zone = zones[i];
	}
	assert_int_equal(
	    resil_directory_push(x->f.d, specs, n, &x->f.diag), RESIL_OK);
}

static void
pfx_init(pfx *x, resil_cluster_strategy s, size_t n)
{
	memset(x, 0, sizeof(*x));
	fx_init(&x->f, 1000 * MS);
	x->f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	x->f.scfg.service = "StockService";
	x->f.dcfg.outlier.consecutive_failures = 0;
	assert_int_equal(fx_start(&x->f), 0);
	if (n > 0)
		push(x, n, NULL);
	resil_pipeline_config_init(&x->pcfg);
	x->pcfg.service = "StockService";
	x->pcfg.clock = resil_manual_clock_hook(&x->f.mc);
	x->pcfg.classifier.fn = classify;
	x->pcfg.selector = x->f.sel;
	x->pcfg.cluster.strategy = s;
	resil_pipeline_recorder_init(&x->r, x->rec, MAX_EV);
	x->pcfg.listener = resil_pipeline_recorder_listener;
	x->pcfg.listener_ctx = &x->r;
}

static void
pfx_new(pfx *x)
{
	resil_err err = resil_pipeline_new(&x->p, &x->pcfg, &x->diag);

	if (err != RESIL_OK)
		fprintf(stderr, "pipeline_new: %s\n", x->diag.msg);
	assert_int_equal(err, RESIL_OK);
}

static void
pfx_end(pfx *x)
{
	resil_pipeline_free(x->p);
	fx_end(&x->f);
}

static resil_err
invoke(pfx *x, resil_result *r)
{
	resil_args a = { "getStock", NULL, 0 };

	return resil_pipeline_invoke(x->p, NULL, &a, dep_call, &x->d, r);
}

/* How many recorded events have stage CLUSTER and text starting with t. */
static int __attribute__((unused)) cluster_events(const pfx *x, const char *t)
{
	size_t i;
	int n = 0;

	for (i = 0; i < x->r.count; i++)
		if (x->rec[i].stage == RESIL_STAGE_CLUSTER &&
		    strncmp(x->rec[i].text, t, strlen(t)) == 0)
			n++;
	return n;
}

static uint64_t
now(pfx *x)
{
	return resil_manual_clock_now(&x->f.mc);
}

/* ---- failover ---- */

static void
test_failover_distinct_endpoints(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 4);
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(x.d.order, "e0:1 e1:1 e2:1");
	assert_int_equal(r.value.type, RESIL_VALUE_INT);
	assert_int_equal(r.value.u.i, 102);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_string_equal(r.endpoint, "e2:1");
	resil_result_free(&r);
	pfx_end(&x);
}

static void
test_failover_all_fail_message(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 8);
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = x.d.fails[2] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(r.rc, 111);
	assert_string_equal(x.d.order, "e0:1 e1:1 e2:1");
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. Tried 3 times of the providers [e0:1, e1:1, "
	    "e2:1] (3/8). Last error is: the call failed (rc 111)");
	assert_string_equal(r.endpoint, "e2:1");
	resil_result_free(&r);
	pfx_end(&x);
}

/* Fewer endpoints than attempts: untried first, then tried ones again. */
static void
test_failover_more_attempts_than_endpoints(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 2);
	x.pcfg.cluster.retries = 3;
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	/* all tried: the balancer chooses among them again */
	assert_string_equal(x.d.order, "e0:1 e1:1 e1:1 e0:1");
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. Tried 4 times of the providers [e0:1, e1:1] "
	    "(2/2). Last error is: the call failed (rc 111)");
	resil_result_free(&r);
	pfx_end(&x);
}

/* The retry policy's backoff applies between failover attempts; retries=
 * (not retry.max_attempts) sets their number; a method's max_attempts
 * overrides it. */
static void
test_failover_backoff_and_method_attempts(void **state)
{
	pfx x;
	resil_result r;
	resil_method_config mc[1];
	resil_args a = { "other", NULL, 0 };
	uint64_t t0;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 4);
	x.pcfg.retry_enabled = 1;
	x.pcfg.retry.max_attempts = 7; /* not used with a selector */
	x.pcfg.retry.base_delay_ns = 100 * MS;
	x.pcfg.cluster.retries = 1;
	memset(mc, 0, sizeof(mc));
	mc[0].name = "getStock";
	mc[0].max_attempts = 4;
	x.pcfg.methods = mc;
	x.pcfg.nmethods = 1;
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = x.d.fails[2] = x.d.fails[3] = 9;
	t0 = now(&x);
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	assert_true(now(&x) == t0 + 300 * MS); /* three waits */
	resil_result_free(&r);
	/* Another method: the service's retries=1, two attempts. */
	memset(&x.d, 0, sizeof(x.d));
	x.d.fails[0] = x.d.fails[1] = x.d.fails[2] = x.d.fails[3] = 9;
	t0 = now(&x);
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, dep_call, &x.d, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.attempts, 2);
	assert_true(now(&x) == t0 + 100 * MS);
	resil_result_free(&r);
	pfx_end(&x);
}

/* ---- the call machine ---- */

static void
test_machine_gives_endpoints(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	resil_value v;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 3);
	x.pcfg.timeout_ns = 3000 * MS;
	pfx_new(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_non_null(st.endpoint);
	assert_string_equal(st.endpoint->address, "e0:1");
	assert_true(st.deadline == now(&x) + 3000 * MS);
	/* It times out: reported to the selector as a failure, and
	 * failover goes on to e1. */
	resil_manual_clock_advance(&x.f.mc, 3000 * MS);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	resil_manual_clock_advance(&x.f.mc, 1);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_int_equal(st.attempt, 2);
	assert_string_equal(st.endpoint->address, "e1:1");
	v = resil_value_int(5);
	assert_int_equal(
	    resil_call_report(&call, 2, 0, &v, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_null(st.endpoint);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.value.u.i, 5);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(r.endpoint, "e1:1");
	/* The late answer of attempt 1 is accepted and dropped. */
	v = resil_value_int(6);
	assert_int_equal(
	    resil_call_report(&call, 1, 0, &v, now(&x)), RESIL_OK);
	resil_result_free(&r);
	pfx_end(&x);
}

/* Without a selector the machine gives no endpoint. */
static void
test_machine_no_selector_null_endpoint(void **state)
{
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_call call;
	resil_call_next st;
	resil_result r;
	resil_args a = { "m", NULL, 0 };
	resil_manual_clock mc;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	memset(&st, 0xff, sizeof(st));
	assert_int_equal(
	    resil_call_start(&call, p, NULL, &a, &r, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_null(st.endpoint);
	assert_int_equal(
	    resil_call_report(&call, st.attempt, 0, NULL, 0), RESIL_OK);
	assert_int_equal(resil_call_step(&call, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_string_equal(r.endpoint, "");
	resil_result_free(&r);
	resil_pipeline_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failover_distinct_endpoints),
		cmocka_unit_test(test_failover_all_fail_message),
		cmocka_unit_test(test_failover_more_attempts_than_endpoints),
		cmocka_unit_test(test_failover_backoff_and_method_attempts),
		cmocka_unit_test(test_machine_gives_endpoints),
		cmocka_unit_test(test_machine_no_selector_null_endpoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

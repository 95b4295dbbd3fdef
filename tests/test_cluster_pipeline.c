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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#include "support/caller_executor.h"
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
	static char addr[8][32];
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

/* As pfx_init, with a breaker for each endpoint (bc, NULL: none). */
static void
pfx_init_breakers(
    pfx *x, resil_cluster_strategy s, size_t n, const resil_breaker_config *bc)
{
	memset(x, 0, sizeof(*x));
	fx_init(&x->f, 1000 * MS);
	x->f.dcfg.endpoint_breaker = bc;
	x->f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	x->f.scfg.service = "StockService";
	x->f.dcfg.outlier.max_ejection_pct = 0;
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
pfx_init(pfx *x, resil_cluster_strategy s, size_t n)
{
	pfx_init_breakers(x, s, n, NULL);
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

static int
null_endpoint_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	int *n = ctx;

	(void)args;
	assert_null(ep);
	(*n)++;
	if (*n == 1)
		return 111;
	*out = resil_value_int(3);
	return 0;
}

/* resil_pipeline_invoke without a selector: the pipeline as before, the
 * function told there is no endpoint. */
static void
test_invoke_without_selector(void **state)
{
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_result r;
	resil_args a = { "m", NULL, 0 };
	resil_manual_clock mc;
	int n = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.retry_enabled = 1;
	cfg.retry.base_delay_ns = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	assert_null(resil_pipeline_selector(p));
	assert_int_equal(
	    resil_pipeline_invoke(p, NULL, &a, null_endpoint_call, &n, &r),
	    RESIL_OK);
	assert_int_equal(n, 2);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(r.value.u.i, 3);
	assert_string_equal(r.endpoint, "");
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_failback_pending(p), 0);
	assert_int_equal(
	    resil_pipeline_failback_poll(p, 0, null_endpoint_call, &n, NULL),
	    RESIL_OK);
	resil_pipeline_free(p);
}

/* What the selector learns: a timeout is a failure of that endpoint (its
 * streak, its active count back to 0); a cancelled call releases its
 * pick (no outcome counted). */
static void
test_machine_reports_to_the_selector(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	resil_endpoint_state es;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILFAST, 2);
	x.pcfg.timeout_ns = 100 * MS;
	pfx_new(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	assert_string_equal(st.endpoint->address, "e0:1");
	assert_int_equal(
	    resil_directory_get_state(x.f.d, "e0:1", &es), RESIL_OK);
	assert_int_equal(es.active, 1);
	resil_manual_clock_advance(&x.f.mc, 100 * MS + 1);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_TIMEOUT);
	assert_int_equal(
	    resil_directory_get_state(x.f.d, "e0:1", &es), RESIL_OK);
	assert_int_equal(es.active, 0);
	assert_int_equal(es.streak, 1);
	assert_string_equal(r.message,
	    "Failfast invoke providers e0:1 RoundRobinLoadBalance select "
	    "from all providers [e0:1, e1:1] for service StockService method "
	    "getStock, but no luck to perform the invocation. Last error is: "
	    "timeout after 100 ms");
	resil_result_free(&r);
	/* Cancelled: released, no outcome. */
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	assert_string_equal(st.endpoint->address, "e1:1");
	assert_int_equal(resil_call_cancel(&call, now(&x)), RESIL_OK);
	assert_int_equal(
	    resil_directory_get_state(x.f.d, "e1:1", &es), RESIL_OK);
	assert_int_equal(es.active, 0);
	assert_int_equal(es.streak, 0);
	assert_int_equal(r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(
	    resil_call_report(&call, st.attempt, 0, NULL, now(&x)), RESIL_OK);
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

/* ---- failfast, failsafe, failback ---- */

static void
test_failfast_one_attempt(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILFAST, 4);
	pfx_new(&x);
	x.d.fails[0] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	assert_string_equal(x.d.order, "e0:1");
	assert_string_equal(r.message,
	    "Failfast invoke providers e0:1 RoundRobinLoadBalance select "
	    "from all providers [e0:1, e1:1, e2:1, e3:1] for service "
	    "StockService method getStock, but no luck to perform the "
	    "invocation. Last error is: the call failed (rc 111)");
	resil_result_free(&r);
	pfx_end(&x);
}

/* failsafe: a failure is RESIL_OK with a null value and an event, so a
 * fail: mock never fires; a business error passes untouched. */
static void
test_failsafe_swallows_and_mock_never_fires(void **state)
{
	pfx x;
	resil_result r;
	resil_pipeline_metrics m;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILSAFE, 4);
	x.pcfg.mock = "fail:return 5";
	pfx_new(&x);
	x.d.fails[0] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.last_failure, RESIL_E_CALL);
	assert_int_equal(r.last_failure_rc, 111);
	assert_string_equal(r.endpoint, "e0:1");
	assert_int_equal(cluster_events(&x, "cluster swallowed e0:1"), 1);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &m), RESIL_OK);
	assert_int_equal(m.mock, 0);
	/* A business error is not swallowed. */
	x.d.biz[1] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_E_BUSINESS);
	assert_int_equal(cluster_events(&x, "cluster swallowed"), 1);
	resil_result_free(&r);
	pfx_end(&x);
}

static int
always_fail(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	dep *d = ctx;

	(void)args;
	(void)out;
	dep_note(d, ep);
	d->n++;
	return 111;
}

/* failback: null now, the call queued, retried by poll 5 s apart, three
 * times, then dropped; the queue is bounded. */
static void
test_failback_queue_and_retry_times(void **state)
{
	pfx x;
	resil_result r;
	size_t ran = 99;
	uint64_t t0;
	resil_args a = { "getStock", "k1", 2 };

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILBACK, 3);
	x.pcfg.cluster.failback_queue = 2;
	pfx_new(&x);
	t0 = now(&x);
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, always_fail, &x.d, &r),
	    RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_failback_pending(x.p), 1);
	assert_int_equal(cluster_events(&x, "cluster queued e0:1"), 1);
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	resil_result_free(&r);
	/* e1 answered: nothing more queued. */
	assert_int_equal(resil_pipeline_failback_pending(x.p), 1);
	x.d.fails[2] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_OK); /* e2 fails */
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_failback_pending(x.p), 2);
	/* The queue holds 2: the third failure is dropped, with an event
	 * and a metric, and the caller still gets no error and a null value
	 * (DESIGN); the message says what was dropped. */
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, always_fail, &x.d, &r),
	    RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.last_failure, RESIL_E_CALL);
	assert_string_equal(r.message,
	    "Failback queue of the method getStock in the service "
	    "StockService is full (2 calls): the failure is dropped. Last "
	    "error is: the call failed (rc 111)");
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_failback_pending(x.p), 2);
	assert_int_equal(cluster_events(&x, "cluster queue_full"), 1);
	{
		resil_pipeline_metrics pm;

		assert_int_equal(resil_pipeline_get_metrics(x.p, &pm), RESIL_OK);
		assert_int_equal(pm.failback_dropped, 1);
		assert_int_equal(pm.errors, 0);
	}
	/* Not due before failure time + 5 s. */
	memset(&x.d, 0, sizeof(x.d));
	assert_int_equal(resil_pipeline_failback_poll(
	                     x.p, t0 + 5000 * MS - 1, always_fail, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 0);
	/* Due: both run once each (avoiding the endpoint tried last). */
	assert_int_equal(resil_pipeline_failback_poll(
	                     x.p, t0 + 5000 * MS, always_fail, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 2);
	/* The tasks last tried e0 and e2: both avoid theirs. */
	assert_string_equal(x.d.order, "e1:1 e1:1");
	/* Re-armed at poll time + 5 s; the third failed retry drops them. */
	assert_int_equal(resil_pipeline_failback_poll(x.p, t0 + 10000 * MS - 1,
	                     always_fail, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 0);
	assert_int_equal(resil_pipeline_failback_poll(
	                     x.p, t0 + 10000 * MS, always_fail, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 2);
	assert_int_equal(resil_pipeline_failback_pending(x.p), 2);
	assert_int_equal(resil_pipeline_failback_poll(
	                     x.p, t0 + 15000 * MS, always_fail, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 2);
	assert_int_equal(resil_pipeline_failback_pending(x.p), 0);
	assert_int_equal(cluster_events(&x, "cluster gave_up"), 2);
	assert_int_equal(x.d.n, 6);
	pfx_end(&x);
}

/* A failback retry that succeeds ends its task, and gets the call's
 * arguments back. */
static int
args_check(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	dep *d = ctx;

	(void)out;
	dep_note(d, ep);
	d->n++;
	assert_string_equal(args->method, "getStock");
	assert_int_equal(args->len, 2);
	assert_memory_equal(args->data, "k1", 2);
	return 0;
}

static void
test_failback_retry_succeeds(void **state)
{
	pfx x;
	resil_result r;
	size_t ran = 0;
	resil_args a = { "getStock", "k1", 2 };

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILBACK, 2);
	pfx_new(&x);
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, always_fail, &x.d, &r),
	    RESIL_OK);
	resil_result_free(&r);
	memset(&x.d, 0, sizeof(x.d));
	assert_int_equal(resil_pipeline_failback_poll(
	                     x.p, now(&x) + 5000 * MS, args_check, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 1);
	assert_string_equal(x.d.order, "e1:1"); /* not e0, tried last */
	assert_int_equal(resil_pipeline_failback_pending(x.p), 0);
	assert_int_equal(cluster_events(&x, "cluster retried e1:1"), 1);
	pfx_end(&x);
}

/* ---- broadcast ---- */

static void
test_broadcast_all_and_percent(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_BROADCAST, 4);
	pfx_new(&x);
	/* Every endpoint, in order; a failure gives the error even though
	 * later endpoints succeeded. */
	x.d.fails[1] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	assert_string_equal(x.d.order, "e0:1 e1:1 e2:1 e3:1");
	assert_int_equal(r.rc, 111);
	resil_result_free(&r);
	/* All succeed: the last endpoint's value. */
	memset(&x.d, 0, sizeof(x.d));
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.attempts, 4);
	assert_int_equal(r.value.u.i, 103);
	assert_string_equal(r.endpoint, "e3:1");
	resil_result_free(&r);
	pfx_end(&x);

	/* 50%: threshold floor(4 * 50 / 100) = 2; it stops at the second
	 * failure. */
	pfx_init(&x, RESIL_CLUSTER_BROADCAST, 4);
	x.pcfg.cluster.broadcast_fail_percent = 50;
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(x.d.order, "e0:1 e1:1");
	/* Broadcast's own words, as the standalone cluster's. */
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService by broadcast: 2 of 4 providers failed. Last error "
	    "is: the call failed (rc 111)");
	resil_result_free(&r);
	pfx_end(&x);

	/* Every endpoint's breaker open (one failure each, the whole
	 * broadcast run): panic lets them be routed, each refuses, and
	 * nobody is called. */
	{
		resil_breaker_config bc = resil_breaker_config_default();

		bc.failure_rate_pct = 0;
		bc.consecutive_failures = 1;
		bc.open_wait_ns = 1000 * MS;
		pfx_init_breakers(&x, RESIL_CLUSTER_BROADCAST, 3, &bc);
	}
	x.pcfg.cluster.broadcast_fail_percent = 100;
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = x.d.fails[2] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	resil_result_free(&r);
	memset(&x.d, 0, sizeof(x.d));
	assert_int_equal(invoke(&x, &r), RESIL_E_UNAVAILABLE);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(x.d.n, 0);
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService by broadcast: none of 3 providers could be called "
	    "(their breakers refused)");
	resil_result_free(&r);
	pfx_end(&x);

	pfx_init(&x, RESIL_CLUSTER_BROADCAST, 4);
	x.pcfg.cluster.broadcast_fail_percent = 50;
	pfx_new(&x);
	/* One failure only: below the threshold, all four run. */
	memset(&x.d, 0, sizeof(x.d));
	x.d.fails[2] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	resil_result_free(&r);
	/* A business error ends it at once, untouched. */
	memset(&x.d, 0, sizeof(x.d));
	x.d.biz[1] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_E_BUSINESS);
	assert_int_equal(r.attempts, 2);
	resil_result_free(&r);
	pfx_end(&x);
}

/* ---- forking, through the machine ---- */

static void
set_executor(pfx *x)
{
	x->pcfg.executor = caller_executor();
}

static void
test_forking_first_success_wins(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	resil_value v;
	uint32_t id[3];
	char addr[3][16];
	int k;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FORKING, 4);
	x.pcfg.cluster.forks = 3;
	x.pcfg.timeout_ns = 1000 * MS;
	set_executor(&x);
	pfx_new(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	for (k = 0; k < 3; k++) {
		assert_int_equal(st.action, RESIL_CALL_RUN);
		id[k] = st.attempt;
		snprintf(addr[k], sizeof(addr[k]), "%s", st.endpoint->address);
		assert_int_equal(
		    resil_call_step(&call, now(&x), &st), RESIL_OK);
	}
	/* Three forks at once on three distinct endpoints, then a wait. */
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_string_equal(addr[0], "e0:1");
	assert_string_equal(addr[1], "e1:1");
	assert_string_equal(addr[2], "e2:1");
	assert_int_equal(resil_call_outstanding(&call), 3);
	/* The first fails, the second succeeds: it wins. */
	resil_manual_clock_advance(&x.f.mc, 10 * MS);
	assert_int_equal(
	    resil_call_report(&call, id[0], 111, NULL, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	v = resil_value_int(42);
	assert_int_equal(
	    resil_call_report(&call, id[1], 0, &v, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.value.u.i, 42);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(r.endpoint, "e1:1");
	/* The loser's late answer is dropped. */
	assert_int_equal(
	    resil_call_report(&call, id[2], 0, NULL, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_outstanding(&call), 0);
	resil_result_free(&r);
	pfx_end(&x);
}

static void
test_forking_all_fail_and_all_endpoints(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	uint32_t id[3];
	int k;

	(void)state;
	/* forks above the endpoint count: all of them (3). */
	pfx_init(&x, RESIL_CLUSTER_FORKING, 3);
	x.pcfg.cluster.forks = 10;
	set_executor(&x);
	pfx_new(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	for (k = 0; k < 3; k++) {
		assert_int_equal(st.action, RESIL_CALL_RUN);
		id[k] = st.attempt;
		assert_int_equal(
		    resil_call_step(&call, now(&x), &st), RESIL_OK);
	}
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	/* All fail: the call fails with the error that completed last. */
	assert_int_equal(
	    resil_call_report(&call, id[2], 112, NULL, now(&x)), RESIL_OK);
	assert_int_equal(
	    resil_call_report(&call, id[0], 113, NULL, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_int_equal(
	    resil_call_report(&call, id[1], 114, NULL, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_CALL);
	assert_int_equal(r.rc, 114);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(r.message,
	    "Failed to forking invoke provider [e0:1, e1:1, e2:1], but no "
	    "luck to perform the invocation. Last error is: the call failed "
	    "(rc 114)");
	resil_result_free(&r);
	pfx_end(&x);
}

/* DESIGN, forking: no success within the fork timeout is a TIMEOUT at
 * start + timeout (not one tick later, as an attempt's own timeout); a
 * fork's earlier failure does not end the call while another is out. */
static void
test_forking_no_success_within_timeout(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	uint32_t id[2];
	uint64_t t0;
	int k;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FORKING, 2);
	x.pcfg.cluster.forks = 2;
	x.pcfg.timeout_ns = 100 * MS;
	set_executor(&x);
	pfx_new(&x);
	t0 = now(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, t0, &st), RESIL_OK);
	for (k = 0; k < 2; k++) {
		assert_int_equal(st.action, RESIL_CALL_RUN);
		id[k] = st.attempt;
		assert_int_equal(st.deadline, t0 + 100 * MS);
		assert_int_equal(resil_call_step(&call, t0, &st), RESIL_OK);
	}
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	/* One fork fails at 10 ms: the other is still out. */
	assert_int_equal(
	    resil_call_report(&call, id[0], 111, NULL, t0 + 10 * MS),
	    RESIL_OK);
	assert_int_equal(resil_call_step(&call, t0 + 10 * MS, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	/* The machine wakes at the deadline itself... */
	assert_int_equal(st.until, t0 + 100 * MS);
	assert_int_equal(
	    resil_call_step(&call, t0 + 100 * MS - 1, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	/* ...where the call is a TIMEOUT. */
	assert_int_equal(resil_call_step(&call, t0 + 100 * MS, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_TIMEOUT);
	assert_int_equal(r.attempts, 2);
	/* Its late answer is accepted and dropped. */
	assert_int_equal(
	    resil_call_report(&call, id[1], 0, NULL, t0 + 200 * MS), RESIL_OK);
	assert_int_equal(resil_call_outstanding(&call), 0);
	resil_result_free(&r);
	pfx_end(&x);
}

/* Forking under the blocking driver: the forks run through the executor
 * (here: on the calling thread, one after another, as submit refuses). */
static void
test_forking_blocking_needs_executor(void **state)
{
	pfx x;
	resil_pipeline *p = NULL;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FORKING, 4);
	set_executor(&x);
	pfx_new(&x);
	x.d.fails[0] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 101);
	assert_string_equal(x.d.order, "e0:1 e1:1");
	resil_result_free(&r);
	pfx_end(&x);

	pfx_init(&x, RESIL_CLUSTER_FORKING, 4);
	/* Issue 25.5: the pipeline is built without an executor; the call
	 * machine forks (two RUNs in a row), the blocking driver refuses. */
	assert_int_equal(resil_pipeline_new(&p, &x.pcfg, &x.diag), RESIL_OK);
	{
		resil_args a = { "getStock", NULL, 0 };
		resil_call c;
		resil_call_next st;
		resil_value v;

		memset(&c, 0, sizeof(c));
		assert_int_equal(resil_call_start(&c, p, NULL, &a, &r,
		                     resil_manual_clock_now(&x.f.mc), &st),
		    RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_RUN);
		assert_int_equal(
		    resil_call_step(&c, resil_manual_clock_now(&x.f.mc), &st),
		    RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_RUN);
		assert_int_equal(st.attempt, 2);
		v = resil_value_int(7);
		assert_int_equal(resil_call_report(&c, 2, 0, &v,
		                     resil_manual_clock_now(&x.f.mc)),
		    RESIL_OK);
		assert_int_equal(
		    resil_call_step(&c, resil_manual_clock_now(&x.f.mc), &st),
		    RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_DONE);
		assert_int_equal(r.value.u.i, 7);
		resil_result_free(&r);
		assert_int_equal(resil_call_report(&c, 1, 0, NULL,
		                     resil_manual_clock_now(&x.f.mc)),
		    RESIL_OK);
	}
	assert_int_equal(
	    resil_pipeline_invoke(p, NULL,
	        &(resil_args) { "getStock", NULL, 0 }, dep_call, &x.d, &r),
	    RESIL_E_INVAL);
	assert_non_null(strstr(r.message, "cluster: forking"));
	assert_non_null(strstr(r.message, "executor"));
	assert_int_equal(x.d.n, 0);
	resil_result_free(&r);
	resil_pipeline_free(p);
	pfx_end(&x);
}

/* ---- zone-aware (seed 002) ---- */

static const char *const zones4[] = { "hz", "hz", "sh", "sh" };

static void
zone_init(pfx *x)
{
	pfx_init(x, RESIL_CLUSTER_ZONE_AWARE, 0);
	push(x, 4, zones4);
	x->pcfg.cluster.local_zone = "hz";
	x->pcfg.cluster.cross_zone_timeout_ns = 500 * MS;
	x->pcfg.timeout_ns = 3000 * MS;
}

/* A timeout of the local attempt: exactly one cross-zone attempt, with
 * its own timeout. */
static void
test_zone_timeout_one_cross_zone_attempt(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	uint64_t t;
	uint32_t k;

	(void)state;
	zone_init(&x);
	pfx_new(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_string_equal(st.endpoint->address, "e0:1");
	assert_string_equal(st.endpoint->zone, "hz");
	assert_true(st.deadline == now(&x) + 3000 * MS);
	/* Phase 1 runs all its retries + 1 attempts in hz: a timeout
	 * fails over in the zone (DESIGN: it does not end phase 1). */
	for (k = 2; k <= 3; k++) {
		resil_manual_clock_advance(&x.f.mc, 3000 * MS + 1);
		assert_int_equal(
		    resil_call_step(&call, now(&x), &st), RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_RUN);
		assert_int_equal(st.attempt, k);
		assert_string_equal(st.endpoint->zone, "hz");
	}
	assert_int_equal(cluster_events(&x, "cluster cross_zone"), 0);
	resil_manual_clock_advance(&x.f.mc, 3000 * MS + 1);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_int_equal(st.attempt, 4);
	assert_string_equal(st.endpoint->zone, "sh");
	t = now(&x);
	assert_true(st.deadline == t + 500 * MS);
	assert_int_equal(cluster_events(&x, "cluster cross_zone"), 1);
	/* It times out too: that is the answer, no fifth attempt. The
	 * counts are phase 1's: 2 failed of its 2 local candidates. */
	resil_manual_clock_advance(&x.f.mc, 500 * MS + 1);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_TIMEOUT);
	assert_int_equal(r.attempts, 4);
	assert_string_equal(r.zone, "sh");
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. Tried 4 times of the providers [e0:1, e1:1, "
	    "e2:1] (2/2). Last error is: timeout after 500 ms");
	resil_result_free(&r);
	pfx_end(&x);
}

/* The cross-zone attempt answers: its value, its zone. */
static void
test_zone_cross_zone_answer(void **state)
{
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	resil_value v;
	int k;

	(void)state;
	zone_init(&x);
	pfx_new(&x);
	assert_int_equal(
	    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
	    RESIL_OK);
	for (k = 0; k < 3; k++) {
		resil_manual_clock_advance(&x.f.mc, 3000 * MS + 1);
		assert_int_equal(
		    resil_call_step(&call, now(&x), &st), RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_RUN);
	}
	assert_string_equal(st.endpoint->zone, "sh");
	resil_manual_clock_advance(&x.f.mc, 20 * MS);
	v = resil_value_int(7);
	assert_int_equal(
	    resil_call_report(&call, st.attempt, 0, &v, now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.value.u.i, 7);
	assert_string_equal(r.zone, "sh");
	assert_int_equal(r.attempts, 4);
	resil_result_free(&r);
	pfx_end(&x);
}

/* Refusals fail over within the local zone, never across. */
static void
test_zone_refusals_stay_local(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	zone_init(&x);
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(x.d.order, "e0:1 e1:1 e1:1");
	assert_int_equal(x.d.calls[2] + x.d.calls[3], 0);
	assert_int_equal(cluster_events(&x, "cluster cross_zone"), 0);
	assert_string_equal(r.zone, "hz");
	resil_result_free(&r);
	/* A success in the zone: local answer. */
	memset(&x.d, 0, sizeof(x.d));
	x.d.fails[0] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_string_equal(r.zone, "hz");
	resil_result_free(&r);
	pfx_end(&x);
}

/* No usable local endpoint (removed): the other zones serve, as plain
 * failover. */
static void
test_zone_local_gone_others_serve(void **state)
{
	pfx x;
	resil_result r;
	static const char *const sh[] = { "sh", "sh" };
	resil_endpoint_spec specs[2];

	(void)state;
	zone_init(&x);
	pfx_new(&x);
	specs[0] = resil_endpoint_spec_default("e2:1");
	specs[0].zone = sh[0];
	specs[1] = resil_endpoint_spec_default("e3:1");
	specs[1].zone = sh[1];
	assert_int_equal(
	    resil_directory_push(x.f.d, specs, 2, &x.f.diag), RESIL_OK);
	x.d.fails[2] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(x.d.order, "e2:1 e3:1");
	assert_string_equal(r.zone, "sh");
	resil_result_free(&r);
	pfx_end(&x);
}

static void
test_zone_needs_local_zone(void **state)
{
	pfx x;
	resil_pipeline *p = NULL;

	(void)state;
	zone_init(&x);
	x.pcfg.cluster.local_zone = NULL;
	assert_int_equal(
	    resil_pipeline_new(&p, &x.pcfg, &x.diag), RESIL_E_INVAL);
	assert_non_null(strstr(x.diag.msg, "cluster.local_zone"));
	pfx_end(&x);
}

/* Endpoints without a zone under zone-aware: refused when the pipeline is
 * made, naming the endpoint. */
static void
test_zone_endpoint_without_zone_refused(void **state)
{
	pfx x;
	resil_pipeline *p = NULL;
	static const char *const z[] = { "hz", NULL, "sh", "sh" };

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_ZONE_AWARE, 0);
	push(&x, 4, z);
	x.pcfg.cluster.local_zone = "hz";
	assert_int_equal(
	    resil_pipeline_new(&p, &x.pcfg, &x.diag), RESIL_E_INVAL);
	assert_null(p);
	assert_string_equal(x.diag.msg,
	    "zone: endpoint e1:1 has no zone; zone-aware needs every "
	    "endpoint's zone");
	pfx_end(&x);
}

/* ---- mock endpoints (Dubbo's mock:// providers) ---- */

static void
push_with_mock(pfx *x, const char *params)
{
	resil_endpoint_spec specs[3];

	specs[0] = resil_endpoint_spec_default("e0:1");
	specs[1] = resil_endpoint_spec_default("m9:1");
	specs[1].mock = 1;
	specs[1].params = params;
	specs[2] = resil_endpoint_spec_default("e1:1");
	assert_int_equal(
	    resil_directory_push(x->f.d, specs, 3, &x->f.diag), RESIL_OK);
}

/* A mock endpoint is never a candidate; it answers only when the mock
 * stage fires, with its own spec (the consumer's sets the mode). */
static void
test_mock_endpoint_answers_for_the_mock_stage(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	/* fail: every real endpoint fails, then the mock endpoint answers. */
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 0);
	push_with_mock(&x, "mock=return 77&getStock.mock=return 78");
	x.pcfg.mock = "fail:return 1";
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 78); /* the method-level one */
	assert_int_equal(r.attempts, 3);
	assert_null(strstr(x.d.order, "m9"));
	resil_result_free(&r);
	/* A success: no mock at all. */
	memset(&x.d, 0, sizeof(x.d));
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	pfx_end(&x);

	/* force: no real endpoint is called; the mock endpoint answers. */
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 0);
	push_with_mock(&x, "mock=fail:return 77");
	x.pcfg.mock = "force:return 1";
	pfx_new(&x);
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 77);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(x.d.n, 0);
	resil_result_free(&r);
	pfx_end(&x);

	/* No consumer mock: the mock endpoint never answers. */
	pfx_init(&x, RESIL_CLUSTER_FAILFAST, 0);
	push_with_mock(&x, "mock=return 77");
	pfx_new(&x);
	x.d.fails[0] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_E_CALL);
	resil_result_free(&r);
	pfx_end(&x);

	/* No mock endpoint: the local mock answers. */
	pfx_init(&x, RESIL_CLUSTER_FAILFAST, 2);
	x.pcfg.mock = "fail:return 1";
	pfx_new(&x);
	x.d.fails[0] = 9;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 1);
	resil_result_free(&r);
	pfx_end(&x);
}

/* ---- no provider, bad settings ---- */

static void
test_no_provider_is_an_error_and_a_fail_mock_fires(void **state)
{
	pfx x;
	resil_result r;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILSAFE, 0);
	pfx_new(&x);
	assert_int_equal(invoke(&x, &r), RESIL_E_NO_PROVIDER);
	assert_int_equal(r.attempts, 0);
	assert_non_null(strstr(r.message, "No provider available"));
	assert_int_equal(cluster_events(&x, "cluster no_provider"), 1);
	assert_int_equal(x.d.n, 0);
	resil_result_free(&r);
	pfx_end(&x);

	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 0);
	x.pcfg.mock = "fail:return 9";
	pfx_new(&x);
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 9);
	assert_int_equal(r.attempts, 0);
	resil_result_free(&r);
	pfx_end(&x);
}

static void
expect_refused(resil_pipeline_config *cfg, const char *what)
{
	resil_pipeline *p = NULL;
	resil_diag d;

	d.msg[0] = '\0';
	assert_int_equal(resil_pipeline_new(&p, cfg, &d), RESIL_E_INVAL);
	assert_null(p);
	if (strstr(d.msg, what) == NULL)
		fprintf(stderr, "message: %s\n", d.msg);
	assert_non_null(strstr(d.msg, what));
}

/* The endpoint call empties the directory, then fails. */
static fx *emptying_fx;

static int
fail_and_empty(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	(void)out;
	/* Each removed by name: empty protection keeps a list that an
	 * empty push would empty. */
	assert_int_equal(
	    resil_directory_remove(emptying_fx->d, "e0:1", NULL), RESIL_OK);
	assert_int_equal(
	    resil_directory_remove(emptying_fx->d, "e1:1", NULL), RESIL_OK);
	return 111;
}

/* DESIGN, failover: the candidates are read again before every retry;
 * none left ends the call with "no provider". The result still says what
 * the attempt that ran answered: rc 111, one attempt, its endpoint. */
static void
test_failover_no_provider_before_retry_keeps_rc(void **state)
{
	pfx x;
	resil_result r;
	resil_args a = { "getStock", NULL, 0 };

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 2);
	x.pcfg.cluster.retries = 2;
	pfx_new(&x);
	emptying_fx = &x.f;
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, fail_and_empty, NULL, &r),
	    RESIL_E_NO_PROVIDER);
	assert_int_equal(r.err, RESIL_E_NO_PROVIDER);
	assert_int_equal(r.rc, 111);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.last_failure, RESIL_E_CALL);
	assert_int_equal(r.last_failure_rc, 111);
	resil_result_free(&r);
	pfx_end(&x);
}

static void
test_bad_cluster_settings(void **state)
{
	pfx x;
	resil_cluster_strategy s;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 2);
	x.pcfg.cluster.forks = 0;
	expect_refused(&x.pcfg, "cluster.forks: 0 must be >= 1");
	x.pcfg.cluster.forks = 2;
	x.pcfg.cluster.retries = -1;
	expect_refused(&x.pcfg, "cluster.retries: -1 must be >= 0");
	x.pcfg.cluster.retries = 2;
	x.pcfg.cluster.failback_queue = 0;
	expect_refused(&x.pcfg, "cluster.failback_queue: 0 must be >= 1");
	x.pcfg.cluster.failback_queue = 100;
	x.pcfg.cluster.broadcast_fail_percent = 101;
	expect_refused(&x.pcfg,
	    "cluster.broadcast_fail_percent: 101 is out of range 0..100");
	x.pcfg.cluster.broadcast_fail_percent = 100;
	x.pcfg.hedge_max = 1;
	x.pcfg.cluster.strategy = RESIL_CLUSTER_BROADCAST;
	expect_refused(&x.pcfg,
	    "pipeline.hedge_max: cluster=broadcast makes its own parallel "
	    "or serial attempts");
	x.pcfg.cluster.strategy = RESIL_CLUSTER_FORKING;
	expect_refused(&x.pcfg, "pipeline.hedge_max: cluster=forking");
	x.pcfg.cluster.strategy = RESIL_CLUSTER_FAILOVER;
	x.pcfg.hedge_max = 0;
	x.pcfg.cluster.strategy = (resil_cluster_strategy)9;
	expect_refused(&x.pcfg, "cluster: strategy 9");
	assert_int_equal(
	    resil_cluster_strategy_parse("zone-aware", &s), RESIL_OK);
	assert_int_equal(s, RESIL_CLUSTER_ZONE_AWARE);
	assert_int_equal(
	    resil_cluster_strategy_parse("forking", &s), RESIL_OK);
	assert_int_equal(s, RESIL_CLUSTER_FORKING);
	assert_int_equal(
	    resil_cluster_strategy_parse("available", &s), RESIL_E_INVAL);
	pfx_end(&x);
}

/* A pipeline with a selector refuses resil_pipeline_call (the function
 * would not know its endpoint). */
static int
plain_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return 0;
}

static void
test_selector_pipeline_refuses_plain_call(void **state)
{
	pfx x;
	resil_result r;
	resil_args a = { "getStock", NULL, 0 };

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 2);
	pfx_new(&x);
	assert_int_equal(
	    resil_pipeline_call(x.p, &a, plain_fn, NULL, &r), RESIL_E_INVAL);
	assert_non_null(strstr(r.message, "resil_pipeline_invoke"));
	resil_result_free(&r);
	pfx_end(&x);
}

/* ---- configuration text: one file for directory, selector, pipeline ---- */

static void
test_config_one_file(void **state)
{
	static const char text[] = "service=StockService\n"
	                           "timeout=3000\n"
	                           "cluster=zone-aware\n"
	                           "retries=2\n"
	                           "zone=hz\n"
	                           "cross_zone_timeout=500ms\n"
	                           "loadbalance=roundrobin\n"
	                           "outlier.consecutive_failures=3\n"
	                           "getStock.retries=1\n"
	                           "failback.period=2s\n";
	resil_config *conf = NULL;
	const resil_pipeline_config *pc;
	resil_pipeline_config cfg;
	resil_selector_config sc;
	resil_directory_config dc;
	resil_manual_clock mc;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	resil_diag diag;
	resil_result r;
	resil_args a = { "getStock", NULL, 0 };
	resil_endpoint_spec specs[4];
	char buf[64];
	dep dp;
	int k;

	(void)state;
	assert_int_equal(
	    resil_config_parse_string(&conf, text, "svc.conf", NULL, &diag),
	    RESIL_OK);
	pc = resil_config_pipeline(conf);
	assert_int_equal(pc->cluster.strategy, RESIL_CLUSTER_ZONE_AWARE);
	assert_int_equal(pc->cluster.retries, 2);
	assert_string_equal(pc->cluster.local_zone, "hz");
	assert_true(pc->cluster.cross_zone_timeout_ns == 500 * MS);
	assert_true(pc->cluster.failback_period_ns == 2000 * MS);
	assert_int_equal(pc->nmethods, 1);
	assert_int_equal(pc->methods[0].max_attempts, 2);
	assert_int_equal(
	    resil_config_get(conf, "cluster", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "zone-aware");
	assert_int_equal(
	    resil_config_get(conf, "retries", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "2");
	assert_int_equal(
	    resil_config_get(conf, "getStock.retries", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "1");
	assert_int_equal(
	    resil_config_get(conf, "zone", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "hz");

	/* The directory and the selector from the same file. */
	resil_manual_clock_init(&mc, 0);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_config_directory(conf, &dc), 1);
	assert_int_equal(dc.outlier.consecutive_failures, 3);
	assert_int_equal(resil_config_selector(conf, &sc), 1);
	assert_int_equal(sc.balance.kind, RESIL_LB_ROUNDROBIN);
	assert_string_equal(sc.service, "StockService");
	/* zone= names the selector's zone too; zone-aware: no affinity. */
	assert_string_equal(sc.local_zone, "hz");
	assert_int_equal(sc.zone_mode, RESIL_ZONE_OFF);
	assert_int_equal(resil_directory_new(&d, &dc, &diag), RESIL_OK);
	assert_int_equal(resil_selector_new(&sel, d, &sc, &diag), RESIL_OK);
	for (k = 0; k < 4; k++) {
		static const char *const addr[] = { "e0:1", "e1:1", "e2:1",
			"e3:1" };

		specs[k] = resil_endpoint_spec_default(addr[k]);
		specs[k].zone = zones4[k];
	}
	assert_int_equal(resil_directory_push(d, specs, 4, &diag), RESIL_OK);
	cfg = *pc;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.classifier.fn = classify;
	cfg.selector = sel;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_OK);
	/* getStock.retries=1: two attempts, both in hz. */
	memset(&dp, 0, sizeof(dp));
	dp.fails[0] = dp.fails[1] = 9;
	assert_int_equal(resil_pipeline_invoke(p, NULL, &a, dep_call, &dp, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(dp.order, "e0:1 e1:1");
	resil_result_free(&r);
	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(d);
	resil_config_free(conf);
}

static void
expect_text_refused(const char *text, const char *msg)
{
	resil_config *conf = NULL;
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(&conf, text, "svc.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_null(conf);
	assert_string_equal(diag.msg, msg);
}

static void
test_config_bad_cluster_keys(void **state)
{
	resil_config *conf = NULL;
	resil_diag diag;

	(void)state;
	expect_text_refused("cluster=available\n",
	    "svc.conf:1: cluster: \"available\" is not one of failover, "
	    "failfast, failsafe, failback, broadcast, forking, zone-aware");
	expect_text_refused(
	    "retries=-1\n", "svc.conf:1: retries: -1 is out of range 0..999");
	expect_text_refused(
	    "forks=0\n", "svc.conf:1: forks: 0 is out of range 1..2147483647");
	expect_text_refused("failback.queue=0\n",
	    "svc.conf:1: failback.queue: 0 is out of range 1..2147483647");
	expect_text_refused("broadcast.fail.percent=101\n",
	    "svc.conf:1: broadcast.fail.percent: 101 is out of range 0..100");
	expect_text_refused("failback.retries=-3\n",
	    "svc.conf:1: failback.retries: -3 is out of range "
	    "0..2147483647");
	expect_text_refused("service=S\ncluster=zone-aware\n",
	    "svc.conf:2: cluster.local_zone: zone-aware needs the caller's "
	    "zone (zone=)");
	expect_text_refused("getStock.retries=-2\n",
	    "svc.conf:1: getStock.retries: -2 is out of range 0..999");
	expect_text_refused("zone=\n",
	    "svc.conf:1: zone: a zone name is "
	    "required");
	/* A selector key with a bad value: the selector's words. */
	diag.msg[0] = '\0';
	assert_int_equal(resil_config_parse_string(&conf,
	                     "loadbalance=bogus\n", "svc.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "svc.conf:1: loadbalance:"));
	/* router.condition may be given again: each appends a rule. */
	assert_int_equal(resil_config_parse_string(&conf,
	                     "router.condition=method = a => zone = hz\n"
	                     "router.condition=method = b => zone = sh\n",
	                     "svc.conf", NULL, &diag),
	    RESIL_OK);
	{
		resil_selector_config sc;

		assert_int_equal(resil_config_selector(conf, &sc), 1);
		assert_int_equal(sc.nconditions, 2);
	}
	resil_config_free(conf);
	conf = NULL;
	expect_text_refused("retries=1\nretries=2\n",
	    "svc.conf:2: retries: set again (first set at line 1)");
	/* An unknown key is still unknown. */
	expect_text_refused("retrys=1\n",
	    "svc.conf:1: retrys: unknown key (did you mean "
	    "retries?)");
}

/* ---- every strategy through the call machine, as through invoke ---- */

/* resil_pipeline_invoke() by hand: each RUN runs dep_call at once. */
static resil_err
machine_invoke(pfx *x, resil_result *r)
{
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };

	assert_int_equal(
	    resil_call_start(&call, x->p, NULL, &a, r, now(x), &st), RESIL_OK);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			resil_value v;
			int rc;

			resil_value_init(&v);
			rc = dep_call(&x->d, st.endpoint, &a, &v);
			assert_int_equal(resil_call_report(&call, st.attempt,
			                     rc, &v, now(x)),
			    RESIL_OK);
		} else {
			assert_true(st.until != UINT64_MAX);
			resil_manual_clock_set(&x->f.mc, st.until);
		}
		assert_int_equal(
		    resil_call_step(&call, now(x), &st), RESIL_OK);
	}
	assert_int_equal(resil_call_outstanding(&call), 0);
	return r->err;
}

typedef struct mrow {
	resil_cluster_strategy strategy;
	int fails[4];
	resil_err err;
	int attempts;
	const char *order;
	int queued;
} mrow;

static void
test_machine_every_strategy(void **state)
{
	static const mrow rows[] = {
		{ RESIL_CLUSTER_FAILOVER, { 1, 1, 0, 0 }, RESIL_OK, 3,
		    "e0:1 e1:1 e2:1", 0 },
		{ RESIL_CLUSTER_FAILOVER, { 9, 9, 9, 0 }, RESIL_E_CALL, 3,
		    "e0:1 e1:1 e2:1", 0 },
		{ RESIL_CLUSTER_FAILFAST, { 9, 0, 0, 0 }, RESIL_E_CALL, 1,
		    "e0:1", 0 },
		{ RESIL_CLUSTER_FAILSAFE, { 9, 0, 0, 0 }, RESIL_OK, 1, "e0:1",
		    0 },
		{ RESIL_CLUSTER_FAILBACK, { 9, 0, 0, 0 }, RESIL_OK, 1, "e0:1",
		    1 },
		{ RESIL_CLUSTER_BROADCAST, { 0, 1, 0, 0 }, RESIL_E_CALL, 4,
		    "e0:1 e1:1 e2:1 e3:1", 0 },
		{ RESIL_CLUSTER_BROADCAST, { 0, 0, 0, 0 }, RESIL_OK, 4,
		    "e0:1 e1:1 e2:1 e3:1", 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		pfx x;
		resil_result r;
		int k;

		pfx_init(&x, rows[i].strategy, 4);
		pfx_new(&x);
		for (k = 0; k < 4; k++)
			x.d.fails[k] = rows[i].fails[k];
		assert_int_equal(machine_invoke(&x, &r), rows[i].err);
		assert_int_equal(r.attempts, rows[i].attempts);
		assert_string_equal(x.d.order, rows[i].order);
		assert_int_equal(
		    resil_pipeline_failback_pending(x.p), rows[i].queued);
		resil_result_free(&r);
		pfx_end(&x);
	}
}

/* Failover's backoff comes as WAIT steps of the machine. */
static void
test_machine_failover_waits(void **state)
{
	pfx x;
	resil_result r;
	uint64_t t0;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 4);
	x.pcfg.retry_enabled = 1;
	x.pcfg.retry.base_delay_ns = 50 * MS;
	pfx_new(&x);
	x.d.fails[0] = x.d.fails[1] = 1;
	t0 = now(&x);
	assert_int_equal(machine_invoke(&x, &r), RESIL_OK);
	assert_int_equal(r.attempts, 3);
	assert_true(now(&x) == t0 + 100 * MS);
	resil_result_free(&r);
	pfx_end(&x);
}

/* ---- the success path allocates nothing ---- */

static size_t n_allocs;

static void *
count_alloc(size_t size, void *ctx)
{
	(void)ctx;
	n_allocs++;
	return malloc(size);
}

static void
count_free(void *ptr, size_t size, void *ctx)
{
	(void)size;
	(void)ctx;
	free(ptr);
}

static void
test_success_path_allocates_nothing(void **state)
{
	static const resil_allocator counting = { count_alloc, count_free,
		NULL };
	pfx x;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_args a = { "getStock", NULL, 0 };
	int i;

	(void)state;
	memset(&x, 0, sizeof(x));
	fx_init(&x.f, 0);
	x.f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	x.f.scfg.alloc = &counting;
	x.f.dcfg.alloc = &counting;
	assert_int_equal(fx_start(&x.f), 0);
	push(&x, 4, NULL);
	resil_pipeline_config_init(&x.pcfg);
	x.pcfg.service = "StockService";
	x.pcfg.clock = resil_manual_clock_hook(&x.f.mc);
	x.pcfg.selector = x.f.sel;
	x.pcfg.alloc = &counting;
	x.pcfg.timeout_ns = 1000 * MS;
	pfx_new(&x);
	/* The first call grows the pooled candidate set. */
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	resil_result_free(&r);
	n_allocs = 0;
	for (i = 0; i < 100; i++) {
		assert_int_equal(invoke(&x, &r), RESIL_OK);
		resil_result_free(&r);
	}
	/* Through the machine too. */
	for (i = 0; i < 100; i++) {
		assert_int_equal(
		    resil_call_start(&call, x.p, NULL, &a, &r, now(&x), &st),
		    RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_RUN);
		assert_int_equal(
		    resil_call_report(&call, st.attempt, 0, NULL, now(&x)),
		    RESIL_OK);
		assert_int_equal(
		    resil_call_step(&call, now(&x), &st), RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_DONE);
		resil_result_free(&r);
	}
	assert_int_equal(n_allocs, 0);
	pfx_end(&x);
}

/* ---- threads: many calls at once share the candidate pool ---- */

#define TH 4
#define TH_CALLS 3000

typedef struct th_arg {
	resil_pipeline *p;
	int ok, failed, n;
	unsigned seed;
} th_arg;

static int
th_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	th_arg *t = ctx;

	(void)args;
	(void)ep;
	t->n++;
	/* A deterministic third of attempts fails. */
	t->seed = t->seed * 1103515245u + 12345u;
	if ((t->seed >> 16) % 3 == 0)
		return 111;
	*out = resil_value_int(1);
	return 0;
}

static void *
th_main(void *arg)
{
	th_arg *t = arg;
	resil_args a = { "getStock", NULL, 0 };
	int i;

	for (i = 0; i < TH_CALLS; i++) {
		resil_result r;

		if (resil_pipeline_invoke(t->p, NULL, &a, th_call, t, &r) ==
		    RESIL_OK)
			t->ok++;
		else
			t->failed++;
		resil_result_free(&r);
	}
	return NULL;
}

static void
test_threads_share_the_pool(void **state)
{
	pfx x;
	pthread_t th[TH];
	th_arg ta[TH];
	resil_pipeline_metrics m;
	int i, ok = 0, failed = 0, n = 0;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILOVER, 6);
	x.pcfg.listener = NULL;
	x.pcfg.listener_ctx = NULL;
	pfx_new(&x);
	for (i = 0; i < TH; i++) {
		memset(&ta[i], 0, sizeof(ta[i]));
		ta[i].p = x.p;
		ta[i].seed = (unsigned)i + 1u;
		assert_int_equal(
		    pthread_create(&th[i], NULL, th_main, &ta[i]), 0);
	}
	for (i = 0; i < TH; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		ok += ta[i].ok;
		failed += ta[i].failed;
		n += ta[i].n;
	}
	assert_int_equal(ok + failed, TH * TH_CALLS);
	assert_true(n >= TH * TH_CALLS && n <= 3 * TH * TH_CALLS);
	assert_true(failed > 0 && ok > failed);
	assert_int_equal(resil_pipeline_get_metrics(x.p, &m), RESIL_OK);
	assert_true(m.calls == (uint64_t)(TH * TH_CALLS));
	assert_true(m.errors == (uint64_t)failed);
	pfx_end(&x);
}

/* ---- seed 000: the order table through the real cluster ---- */

typedef struct row {
	const char *mock;
	resil_cluster_strategy strategy;
	int business;
	resil_err err;
	resil_source source;
	int attempts;
	resil_vtype vtype;
	int64_t value;
} row;

static void
test_seed000_order_table(void **state)
{
	static const row rows[] = {
		/* force: the cluster never runs. */
		{ "force:return 1", RESIL_CLUSTER_FAILOVER, 0, RESIL_OK,
		    RESIL_SOURCE_MOCK, 0, RESIL_VALUE_INT, 1 },
		/* fail + failover: every retry first, then the mock. */
		{ "fail:return 2", RESIL_CLUSTER_FAILOVER, 0, RESIL_OK,
		    RESIL_SOURCE_MOCK, 3, RESIL_VALUE_INT, 2 },
		/* fail + failfast: one attempt, then the mock. */
		{ "fail:return 3", RESIL_CLUSTER_FAILFAST, 0, RESIL_OK,
		    RESIL_SOURCE_MOCK, 1, RESIL_VALUE_INT, 3 },
		/* fail + failsafe: swallowed, the mock never fires. */
		{ "fail:return 4", RESIL_CLUSTER_FAILSAFE, 0, RESIL_OK,
		    RESIL_SOURCE_LIVE, 1, RESIL_VALUE_NULL, 0 },
		/* a business error: untouched, no retry, no mock. */
		{ "fail:return 5", RESIL_CLUSTER_FAILOVER, 1, RESIL_E_BUSINESS,
		    RESIL_SOURCE_LIVE, 1, RESIL_VALUE_NULL, 0 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		pfx x;
		resil_result r;
		int k;

		pfx_init(&x, rows[i].strategy, 4);
		x.pcfg.mock = rows[i].mock;
		pfx_new(&x);
		for (k = 0; k < 4; k++) {
			x.d.fails[k] = 9;
			x.d.biz[k] = rows[i].business;
		}
		assert_int_equal(invoke(&x, &r), rows[i].err);
		assert_int_equal(r.source, rows[i].source);
		assert_int_equal(r.attempts, rows[i].attempts);
		assert_int_equal(x.d.n, rows[i].attempts);
		assert_int_equal(r.value.type, rows[i].vtype);
		if (rows[i].vtype == RESIL_VALUE_INT)
			assert_int_equal(r.value.u.i, rows[i].value);
		resil_result_free(&r);
		pfx_end(&x);
	}
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
		cmocka_unit_test(test_machine_reports_to_the_selector),
		cmocka_unit_test(test_invoke_without_selector),
		cmocka_unit_test(test_failfast_one_attempt),
		cmocka_unit_test(test_failsafe_swallows_and_mock_never_fires),
		cmocka_unit_test(test_failback_queue_and_retry_times),
		cmocka_unit_test(test_failback_retry_succeeds),
		cmocka_unit_test(test_broadcast_all_and_percent),
		cmocka_unit_test(test_forking_first_success_wins),
		cmocka_unit_test(test_forking_all_fail_and_all_endpoints),
		cmocka_unit_test(test_forking_no_success_within_timeout),
		cmocka_unit_test(test_forking_blocking_needs_executor),
		cmocka_unit_test(test_zone_timeout_one_cross_zone_attempt),
		cmocka_unit_test(test_zone_cross_zone_answer),
		cmocka_unit_test(test_zone_refusals_stay_local),
		cmocka_unit_test(test_zone_local_gone_others_serve),
		cmocka_unit_test(test_zone_needs_local_zone),
		cmocka_unit_test(test_zone_endpoint_without_zone_refused),
		cmocka_unit_test(
		    test_no_provider_is_an_error_and_a_fail_mock_fires),
		cmocka_unit_test(
		    test_failover_no_provider_before_retry_keeps_rc),
		cmocka_unit_test(test_bad_cluster_settings),
		cmocka_unit_test(
		    test_mock_endpoint_answers_for_the_mock_stage),
		cmocka_unit_test(test_selector_pipeline_refuses_plain_call),
		cmocka_unit_test(test_seed000_order_table),
		cmocka_unit_test(test_config_one_file),
		cmocka_unit_test(test_threads_share_the_pool),
		cmocka_unit_test(test_machine_every_strategy),
		cmocka_unit_test(test_machine_failover_waits),
		cmocka_unit_test(test_success_path_allocates_nothing),
		cmocka_unit_test(test_config_bad_cluster_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

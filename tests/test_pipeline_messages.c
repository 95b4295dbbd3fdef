/*
 * Dubbo's exact messages through a pipeline (issue 23, issue 24.6), with
 * parity against the standalone cluster (resil_cluster_invoke) for the
 * same situation: failfast ("Failfast invoke providers ..."), forking
 * ("Failed to forking invoke provider [...] ..."), failover ("Failed to
 * invoke the method ... Tried N times ...") and "No provider available
 * ..." through every strategy and an empty directory, each through both
 * drivers (resil_pipeline_invoke and the call machine stepped by hand);
 * failfast over the one implicit endpoint (no selector); the event text
 * ("(rc N)" only on failure events); failback's full queue, standalone
 * and in a pipeline: RESIL_OK, a null value, the drop counted and an
 * event.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/call.h>
#include <resil/cluster.h>
#include <resil/pipeline.h>

#include "support/caller_executor.h"
#include "support/cluster_fx.h"

#define MS RESIL_NS_PER_MS
#define MAX_EV 64

/* Endpoint i fails its first fails[i] calls with rc 111 (rc 111 + i when
 * distinct is set); otherwise it answers 100 + i. */
typedef struct dep {
	int fails[8];
	int calls[8];
	int distinct;
	int n;
} dep;

static int
dep_rc(dep *d, const resil_pick *ep, resil_value *out)
{
	int i = ep != NULL ? ep->address[1] - '0' : 0;

	d->calls[i]++;
	d->n++;
	if (d->calls[i] <= d->fails[i])
		return d->distinct ? 111 + i : 111;
	*out = resil_value_int(100 + i);
	return 0;
}

static int
pipe_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)args;
	return dep_rc(ctx, ep, out);
}

static int
cluster_call(void *ctx, const resil_pick *ep, const resil_request *req,
    resil_value *out)
{
	(void)req;
	return dep_rc(ctx, ep, out);
}

typedef struct pfx {
	fx f;
	resil_pipeline_config pcfg;
	resil_pipeline *p;
	resil_pipeline_record rec[MAX_EV];
	resil_pipeline_recorder r;
	dep d;
	resil_diag diag;
} pfx;

/* The same directory and selector as the pipeline's, for the standalone
 * cluster. */
typedef struct cfx {
	fx f;
	resil_cluster_config ccfg;
	resil_cluster *cl;
	resil_cluster_event ev[MAX_EV];
	size_t nev;
	dep d;
} cfx;

static void
fx_setup(fx *f, size_t n)
{
	fx_init(f, 1000 * MS);
	f->scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	f->scfg.service = "StockService";
	f->dcfg.outlier.max_ejection_pct = 0;
	assert_int_equal(fx_start(f), 0);
	if (n > 0)
		assert_int_equal(fx_push_weights(f, NULL, n), RESIL_OK);
}

static void
pfx_init(pfx *x, resil_cluster_strategy s, size_t n)
{
	memset(x, 0, sizeof(*x));
	fx_setup(&x->f, n);
	resil_pipeline_config_init(&x->pcfg);
	x->pcfg.service = "StockService";
	x->pcfg.clock = resil_manual_clock_hook(&x->f.mc);
	x->pcfg.selector = x->f.sel;
	x->pcfg.cluster.strategy = s;
	if (s == RESIL_CLUSTER_ZONE_AWARE)
		x->pcfg.cluster.local_zone = "hz";
	x->pcfg.executor = caller_executor();
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

static void
cl_listener(const resil_cluster_event *ev, void *ctx)
{
	cfx *c = ctx;

	if (c->nev < MAX_EV)
		c->ev[c->nev++] = *ev;
}

static void
cfx_init(cfx *c, resil_cluster_strategy s, size_t n)
{
	memset(c, 0, sizeof(*c));
	fx_setup(&c->f, n);
	resil_cluster_config_init(&c->ccfg);
	c->ccfg.strategy = s;
	c->ccfg.service = "StockService";
	c->ccfg.clock = resil_manual_clock_hook(&c->f.mc);
	c->ccfg.listener = cl_listener;
	c->ccfg.listener_ctx = c;
}

static void
cfx_new(cfx *c)
{
	resil_diag d;

	assert_int_equal(
	    resil_cluster_new(&c->cl, c->f.sel, &c->ccfg, &d), RESIL_OK);
}

static void
cfx_end(cfx *c)
{
	resil_cluster_free(c->cl);
	fx_end(&c->f);
}

static resil_err
cfx_invoke(cfx *c, resil_cluster_result *r)
{
	resil_request req;

	memset(&req, 0, sizeof(req));
	req.method = "getStock";
	return resil_cluster_invoke(c->cl, &req, cluster_call, &c->d, r);
}

static resil_err
invoke(pfx *x, resil_result *r)
{
	resil_args a = { "getStock", NULL, 0 };

	return resil_pipeline_invoke(x->p, NULL, &a, pipe_call, &x->d, r);
}

/* The call machine, stepped by hand: each RUN answered at once by the
 * dependency, each WAIT slept on the manual clock. */
static resil_err
machine(pfx *x, resil_result *r)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_call call;
	resil_call_next st;
	resil_value v;
	uint64_t t = resil_manual_clock_now(&x->f.mc);
	int rc, guard = 0;

	assert_int_equal(
	    resil_call_start(&call, x->p, NULL, &a, r, t, &st), RESIL_OK);
	while (st.action != RESIL_CALL_DONE) {
		assert_true(++guard < 100);
		if (st.action == RESIL_CALL_RUN) {
			resil_value_init(&v);
			rc = dep_rc(&x->d, st.endpoint, &v);
			assert_int_equal(resil_call_report(&call, st.attempt,
			                     rc, rc == 0 ? &v : NULL, t),
			    RESIL_OK);
		} else if (st.until > t) {
			resil_manual_clock_set(&x->f.mc, st.until);
			t = st.until;
		}
		assert_int_equal(resil_call_step(&call, t, &st), RESIL_OK);
	}
	return r->err;
}

typedef resil_err (*driver)(pfx *x, resil_result *r);

static const driver drivers[2] = { invoke, machine };

/* ---- failfast ---- */

static const char failfast_msg[] =
    "Failfast invoke providers e0:1 RoundRobinLoadBalance select from all "
    "providers [e0:1, e1:1, e2:1] for service StockService method "
    "getStock, but no luck to perform the invocation. Last error is: the "
    "call failed (rc 111)";

static void
test_failfast_message_parity(void **state)
{
	cfx c;
	resil_cluster_result cr;
	size_t k;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILFAST, 3);
	cfx_new(&c);
	c.d.fails[0] = 9;
	assert_int_equal(cfx_invoke(&c, &cr), RESIL_E_CALL);
	assert_string_equal(cr.message, failfast_msg);
	resil_value_free(&cr.value);
	cfx_end(&c);
	for (k = 0; k < 2; k++) {
		pfx x;
		resil_result r;

		pfx_init(&x, RESIL_CLUSTER_FAILFAST, 3);
		pfx_new(&x);
		x.d.fails[0] = 9;
		assert_int_equal(drivers[k](&x, &r), RESIL_E_CALL);
		assert_int_equal(r.attempts, 1);
		assert_int_equal(r.rc, 111);
		assert_string_equal(r.message, failfast_msg);
		assert_string_equal(r.message, cr.message);
		resil_result_free(&r);
		pfx_end(&x);
	}
}

/* Failfast over the one implicit endpoint (no selector): Dubbo's words
 * too, the endpoint named <implicit>, Dubbo's default balancer. */
static void
test_failfast_without_selector(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		pfx x;
		resil_result r;

		pfx_init(&x, RESIL_CLUSTER_FAILFAST, 0);
		x.pcfg.selector = NULL;
		pfx_new(&x);
		x.d.fails[0] = 1;
		assert_int_equal(drivers[k](&x, &r), RESIL_E_CALL);
		assert_int_equal(r.attempts, 1);
		assert_string_equal(r.message,
		    "Failfast invoke providers <implicit> RandomLoadBalance "
		    "select from all providers [<implicit>] for service "
		    "StockService method getStock, but no luck to perform the "
		    "invocation. Last error is: the call failed (rc 111)");
		resil_result_free(&r);
		/* A success is the callee's answer, untouched. */
		assert_int_equal(drivers[k](&x, &r), RESIL_OK);
		assert_int_equal(r.value.u.i, 100);
		resil_result_free(&r);
		pfx_end(&x);
	}
}

/* ---- forking ---- */

static void
test_forking_message(void **state)
{
	size_t k;

	(void)state;
	for (k = 0; k < 2; k++) {
		pfx x;
		resil_result r;

		pfx_init(&x, RESIL_CLUSTER_FORKING, 4);
		x.pcfg.cluster.forks = 3;
		pfx_new(&x);
		x.d.fails[0] = x.d.fails[1] = x.d.fails[2] = 9;
		x.d.distinct = 1;
		assert_int_equal(drivers[k](&x, &r), RESIL_E_CALL);
		assert_int_equal(r.attempts, 3);
		assert_int_equal(
		    r.rc, 113); /* the error that completed last */
		assert_string_equal(r.message,
		    "Failed to forking invoke provider [e0:1, e1:1, e2:1], "
		    "but no luck to perform the invocation. Last error is: "
		    "the call failed (rc 113)");
		resil_result_free(&r);
		pfx_end(&x);
	}
}

/* ---- failover ---- */

static const char failover_msg[] =
    "Failed to invoke the method getStock in the service StockService. "
    "Tried 3 times of the providers [e0:1, e1:1, e2:1] (3/4). Last error "
    "is: the call failed (rc 111)";

static void
test_failover_message_parity(void **state)
{
	cfx c;
	resil_cluster_result cr;
	size_t k;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILOVER, 4);
	cfx_new(&c);
	c.d.fails[0] = c.d.fails[1] = c.d.fails[2] = c.d.fails[3] = 9;
	assert_int_equal(cfx_invoke(&c, &cr), RESIL_E_CALL);
	assert_string_equal(cr.message, failover_msg);
	resil_value_free(&cr.value);
	cfx_end(&c);
	for (k = 0; k < 2; k++) {
		pfx x;
		resil_result r;

		pfx_init(&x, RESIL_CLUSTER_FAILOVER, 4);
		pfx_new(&x);
		x.d.fails[0] = x.d.fails[1] = x.d.fails[2] = 9;
		x.d.fails[3] = 9;
		assert_int_equal(drivers[k](&x, &r), RESIL_E_CALL);
		assert_int_equal(r.attempts, 3);
		assert_string_equal(r.message, cr.message);
		resil_result_free(&r);
		pfx_end(&x);
	}
}

/* ---- no provider ---- */

static const char no_provider_msg[] =
    "Failed to invoke the method getStock in the service StockService. No "
    "provider available for the service StockService: 0 endpoints. Please "
    "check if the providers have been started and registered.";

/* An empty directory, through every strategy and both drivers: the
 * selector's words, as the standalone cluster's (forking and zone-aware
 * have no standalone form: the words are the same for every strategy),
 * never swallowed. */
static void
test_no_provider_every_strategy(void **state)
{
	static const resil_cluster_strategy all[] = { RESIL_CLUSTER_FAILOVER,
		RESIL_CLUSTER_FAILFAST, RESIL_CLUSTER_FAILSAFE,
		RESIL_CLUSTER_FAILBACK, RESIL_CLUSTER_BROADCAST,
		RESIL_CLUSTER_FORKING, RESIL_CLUSTER_ZONE_AWARE };
	char standalone[RESIL_RESULT_MSG_MAX];
	size_t s, k;

	(void)state;
	for (s = 0; s < sizeof(all) / sizeof(all[0]); s++) {
		if (all[s] != RESIL_CLUSTER_FORKING &&
		    all[s] != RESIL_CLUSTER_ZONE_AWARE) {
			cfx c;
			resil_cluster_result cr;

			cfx_init(&c, all[s], 0);
			cfx_new(&c);
			assert_int_equal(
			    cfx_invoke(&c, &cr), RESIL_E_NO_PROVIDER);
			snprintf(
			    standalone, sizeof(standalone), "%s", cr.message);
			assert_int_equal(c.d.n, 0);
			cfx_end(&c);
		}
		assert_string_equal(standalone, no_provider_msg);
		for (k = 0; k < 2; k++) {
			pfx x;
			resil_result r;

			pfx_init(&x, all[s], 0);
			pfx_new(&x);
			assert_int_equal(
			    drivers[k](&x, &r), RESIL_E_NO_PROVIDER);
			assert_string_equal(r.message, standalone);
			assert_int_equal(x.d.n, 0);
			resil_result_free(&r);
			pfx_end(&x);
		}
	}
}

/* ---- event text ---- */

static int
has_text(const pfx *x, const char *text)
{
	size_t i;

	for (i = 0; i < x->r.count; i++)
		if (x->rec[i].stage == RESIL_STAGE_CLUSTER &&
		    strcmp(x->rec[i].text, text) == 0)
			return 1;
	return 0;
}

/* "(rc N)" only where a failure is the event's subject. */
static void
test_event_text_rc_only_on_failures(void **state)
{
	pfx x;
	resil_result r;
	resil_endpoint_spec spec;
	size_t ran;

	(void)state;
	pfx_init(&x, RESIL_CLUSTER_FAILSAFE, 0);
	pfx_new(&x);
	assert_int_equal(invoke(&x, &r), RESIL_E_NO_PROVIDER);
	resil_result_free(&r);
	assert_true(has_text(&x, "cluster no_provider"));
	spec = resil_endpoint_spec_default("e0:1");
	assert_int_equal(
	    resil_directory_push(x.f.d, &spec, 1, &x.f.diag), RESIL_OK);
	x.d.fails[0] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	resil_result_free(&r);
	assert_true(has_text(&x, "cluster swallowed e0:1 (rc 111)"));
	pfx_end(&x);

	pfx_init(&x, RESIL_CLUSTER_FAILBACK, 1);
	x.pcfg.cluster.failback_period_ns = 100 * MS;
	pfx_new(&x);
	x.d.fails[0] = 1;
	assert_int_equal(invoke(&x, &r), RESIL_OK);
	resil_result_free(&r);
	assert_true(has_text(&x, "cluster queued e0:1 (rc 111)"));
	resil_manual_clock_advance(&x.f.mc, 100 * MS);
	assert_int_equal(
	    resil_pipeline_failback_poll(
	        x.p, resil_manual_clock_now(&x.f.mc), pipe_call, &x.d, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 1);
	assert_true(has_text(&x, "cluster retried e0:1"));
	pfx_end(&x);
}

/* ---- failback's full queue ---- */

static const char full_msg[] =
    "Failback queue of the method getStock in the service StockService is "
    "full (1 calls): the failure is dropped. Last error is: the call "
    "failed (rc 111)";

static void
test_failback_full_queue_standalone_and_pipeline(void **state)
{
	cfx c;
	resil_cluster_result cr;
	resil_pipeline_metrics m;
	size_t k;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILBACK, 2);
	c.ccfg.failback_queue = 1;
	cfx_new(&c);
	c.d.fails[0] = c.d.fails[1] = 9;
	assert_int_equal(cfx_invoke(&c, &cr), RESIL_OK);
	assert_int_equal(resil_cluster_failback_dropped(c.cl), 0);
	assert_int_equal(cfx_invoke(&c, &cr), RESIL_OK);
	assert_int_equal(cr.value.type, RESIL_VALUE_NULL);
	assert_int_equal(cr.rc, 111);
	assert_string_equal(cr.message, full_msg);
	assert_int_equal(resil_cluster_failback_dropped(c.cl), 1);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 1);
	assert_int_equal(c.nev, 2);
	assert_int_equal(c.ev[1].type, RESIL_CLUSTER_EVENT_QUEUE_FULL);
	assert_int_equal(resil_cluster_failback_dropped(NULL), 0);
	cfx_end(&c);
	for (k = 0; k < 2; k++) {
		pfx x;
		resil_result r;

		pfx_init(&x, RESIL_CLUSTER_FAILBACK, 2);
		x.pcfg.cluster.failback_queue = 1;
		pfx_new(&x);
		x.d.fails[0] = x.d.fails[1] = 9;
		assert_int_equal(drivers[k](&x, &r), RESIL_OK);
		resil_result_free(&r);
		assert_int_equal(drivers[k](&x, &r), RESIL_OK);
		assert_int_equal(r.value.type, RESIL_VALUE_NULL);
		assert_string_equal(r.message, full_msg);
		resil_result_free(&r);
		assert_int_equal(
		    resil_pipeline_get_metrics(x.p, &m), RESIL_OK);
		assert_int_equal(m.failback_dropped, 1);
		assert_true(has_text(&x, "cluster queue_full e1:1 (rc 111)"));
		pfx_end(&x);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_failfast_message_parity),
		cmocka_unit_test(test_failfast_without_selector),
		cmocka_unit_test(test_forking_message),
		cmocka_unit_test(test_failover_message_parity),
		cmocka_unit_test(test_no_provider_every_strategy),
		cmocka_unit_test(test_event_text_rc_only_on_failures),
		cmocka_unit_test(
		    test_failback_full_queue_standalone_and_pipeline),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

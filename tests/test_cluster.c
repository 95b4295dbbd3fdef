/*
 * Cluster strategies (failover, failfast, failsafe, failback, broadcast)
 * with exact attempt counts, endpoints tried, results and messages, on the
 * manual clock over a round-robin selector.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/cluster.h>

#include "support/cluster_fx.h"

/* A scripted dependency: each endpoint fails its first fails[i] calls;
 * biz marks endpoints that answer a business error (rc 7). */
typedef struct dep {
	int fails[8];
	int biz[8];
	int calls[8];
	char order[256]; /* endpoints called, in order, "e0:1 e2:1 ..." */
	int n;
} dep;

static int
endpoint_index(const char *address)
{
	return address[1] - '0';
}

static int
dep_call(void *ctx, const resil_pick *ep, const resil_request *req,
    resil_value *out)
{
	dep *d = ctx;
	int i = endpoint_index(ep->address);
	size_t len = strlen(d->order);

	(void)req;
	snprintf(d->order + len, sizeof(d->order) - len, "%s%s",
	    len > 0 ? " " : "", ep->address);
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

typedef struct cfx {
	fx f;
	resil_cluster_config ccfg;
	resil_cluster *cl;
	resil_cluster_event ev[32];
	size_t nev;
	dep d;
} cfx;

static void
cl_listener(const resil_cluster_event *ev, void *ctx)
{
	cfx *c = ctx;

	if (c->nev < 32)
		c->ev[c->nev++] = *ev;
}

static void
cfx_init(cfx *c, resil_cluster_strategy s, size_t n)
{
	memset(c, 0, sizeof(*c));
	fx_init(&c->f, 0);
	c->f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	c->f.scfg.service = "StockService";
	c->f.dcfg.outlier.max_ejection_pct = 0;
	assert_int_equal(fx_start(&c->f), 0);
	assert_int_equal(fx_push_weights(&c->f, NULL, n), RESIL_OK);
	resil_cluster_config_init(&c->ccfg);
	c->ccfg.strategy = s;
	c->ccfg.service = "StockService";
	c->ccfg.clock = resil_manual_clock_hook(&c->f.mc);
	c->ccfg.classifier.fn = classify;
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
invoke(cfx *c, resil_cluster_result *r)
{
	resil_request req;

	memset(&req, 0, sizeof(req));
	req.method = "getStock";
	return resil_cluster_invoke(c->cl, &req, dep_call, &c->d, r);
}

static void
test_cluster_failover_tries_distinct_then_reports(void **state)
{
	cfx c;
	resil_cluster_result r;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILOVER, 4);
	cfx_new(&c);
	/* e0 and e1 fail once: the third attempt, on e2, answers. */
	c.d.fails[0] = c.d.fails[1] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.attempts, 3);
	assert_string_equal(c.d.order, "e0:1 e1:1 e2:1");
	assert_int_equal(r.value.u.i, 102);
	resil_value_free(&r.value);

	/* Everything fails: retries + 1 = 3 attempts on distinct endpoints,
	 * Dubbo's message, the last attempt's error. */
	memset(&c.d, 0, sizeof(c.d));
	c.d.fails[0] = c.d.fails[1] = c.d.fails[2] = c.d.fails[3] = 9;
	assert_int_equal(invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(r.rc, 111);
	assert_string_equal(c.d.order, "e3:1 e2:1 e1:1");
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. Tried 3 times of the providers [e3:1, e2:1, e1:1] "
	    "(3/4). Last error is: the call failed (rc 111)");
	cfx_end(&c);
}

static void
test_cluster_failover_more_attempts_than_endpoints(void **state)
{
	cfx c;
	resil_cluster_result r;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILOVER, 2);
	c.ccfg.retries = 3; /* 4 attempts over 2 endpoints */
	cfx_new(&c);
	c.d.fails[0] = c.d.fails[1] = 9;
	assert_int_equal(invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	/* Untried first; then tried ones again. */
	assert_int_equal(c.d.calls[0] + c.d.calls[1], 4);
	assert_true(strncmp(c.d.order, "e0:1 e1:1", 9) == 0);
	assert_non_null(strstr(r.message,
	    "Tried 4 times of the providers "
	    "[e0:1, e1:1] (2/2)"));
	cfx_end(&c);
}

static void
test_cluster_business_error_passes_every_strategy(void **state)
{
	static const resil_cluster_strategy all[] = { RESIL_CLUSTER_FAILOVER,
		RESIL_CLUSTER_FAILFAST, RESIL_CLUSTER_FAILSAFE,
		RESIL_CLUSTER_FAILBACK, RESIL_CLUSTER_BROADCAST };
	size_t i;

	(void)state;
	for (i = 0; i < 5; i++) {
		cfx c;
		resil_cluster_result r;

		cfx_init(&c, all[i], 3);
		cfx_new(&c);
		c.d.biz[0] = 1;
		assert_int_equal(invoke(&c, &r), RESIL_E_BUSINESS);
		assert_int_equal(r.attempts, 1); /* never retried */
		assert_int_equal(r.rc, 7);
		assert_int_equal(c.nev, 0); /* not swallowed, not queued */
		assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
		cfx_end(&c);
	}
}

static void
test_cluster_failfast_and_failsafe(void **state)
{
	cfx c;
	resil_cluster_result r;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILFAST, 3);
	cfx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	assert_string_equal(r.message,
	    "Failfast invoke providers e0:1 RoundRobinLoadBalance select "
	    "from all providers [e0:1, e1:1, e2:1] for service StockService "
	    "method getStock, but no luck to perform the invocation. Last "
	    "error is: the call failed (rc 111)");
	cfx_end(&c);

	/* failsafe: the failure becomes an empty result and an event. */
	cfx_init(&c, RESIL_CLUSTER_FAILSAFE, 3);
	cfx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(c.nev, 1);
	assert_int_equal(c.ev[0].type, RESIL_CLUSTER_EVENT_SWALLOWED);
	assert_string_equal(c.ev[0].address, "e0:1");
	assert_int_equal(c.ev[0].rc, 111);
	cfx_end(&c);
}

static void
test_cluster_no_provider_is_never_swallowed(void **state)
{
	static const resil_cluster_strategy all[] = { RESIL_CLUSTER_FAILOVER,
		RESIL_CLUSTER_FAILFAST, RESIL_CLUSTER_FAILSAFE,
		RESIL_CLUSTER_FAILBACK, RESIL_CLUSTER_BROADCAST };
	size_t i;

	(void)state;
	for (i = 0; i < 5; i++) {
		cfx c;
		resil_cluster_result r;

		cfx_init(&c, all[i], 0);
		cfx_new(&c);
		assert_int_equal(invoke(&c, &r), RESIL_E_NO_PROVIDER);
		assert_int_equal(r.attempts, 0);
		assert_string_equal(r.message,
		    "Failed to invoke the method getStock in the service "
		    "StockService. No provider available for the service "
		    "StockService: 0 endpoints. Please check if the providers "
		    "have been started and registered.");
		assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
		cfx_end(&c);
	}
}

/* Dubbo's "no provider" words through every strategy also when the
 * routers removed every endpoint (here a forced tag nobody has). */
static void
test_cluster_no_provider_after_routers(void **state)
{
	static const resil_cluster_strategy all[] = { RESIL_CLUSTER_FAILOVER,
		RESIL_CLUSTER_FAILFAST, RESIL_CLUSTER_FAILSAFE,
		RESIL_CLUSTER_FAILBACK, RESIL_CLUSTER_BROADCAST };
	size_t i;

	(void)state;
	for (i = 0; i < 5; i++) {
		cfx c;
		resil_cluster_result r;
		resil_request req;
		resil_diag d;

		memset(&c, 0, sizeof(c));
		fx_init(&c.f, 0);
		c.f.scfg.service = "StockService";
		c.f.scfg.tag_force = 1;
		assert_int_equal(fx_start(&c.f), 0);
		assert_int_equal(fx_push_weights(&c.f, NULL, 3), RESIL_OK);
		resil_cluster_config_init(&c.ccfg);
		c.ccfg.strategy = all[i];
		c.ccfg.service = "StockService";
		c.ccfg.clock = resil_manual_clock_hook(&c.f.mc);
		assert_int_equal(
		    resil_cluster_new(&c.cl, c.f.sel, &c.ccfg, &d), RESIL_OK);
		memset(&req, 0, sizeof(req));
		req.method = "getStock";
		req.tag = "canary";
		assert_int_equal(
		    resil_cluster_invoke(c.cl, &req, dep_call, &c.d, &r),
		    RESIL_E_NO_PROVIDER);
		assert_int_equal(r.attempts, 0);
		assert_string_equal(r.message,
		    "Failed to invoke the method getStock in the service "
		    "StockService. No provider available for the service "
		    "StockService: 3 endpoints, 0 after routers (tag=canary "
		    "removed 3)");
		cfx_end(&c);
	}
}

static void
test_cluster_failback_queue_and_retries(void **state)
{
	cfx c;
	resil_cluster_result r;
	size_t ran;

	(void)state;
	cfx_init(&c, RESIL_CLUSTER_FAILBACK, 3);
	c.ccfg.failback_queue = 2;
	c.ccfg.failback_retries = 2;
	c.ccfg.failback_period_ns = 5 * RESIL_NS_PER_SEC;
	cfx_new(&c);
	c.d.fails[0] = c.d.fails[1] = c.d.fails[2] = 9;
	/* Three failures at t=0: two queued, the third dropped (full): an
	 * event, a count, and the caller still gets no error (DESIGN). */
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_cluster_failback_dropped(c.cl), 1);
	assert_int_equal(r.rc, 111);
	assert_string_equal(r.message,
	    "Failback queue of the method getStock in the service "
	    "StockService is full (2 calls): the failure is dropped. Last "
	    "error is: the call failed (rc 111)");
	assert_int_equal(resil_cluster_failback_pending(c.cl), 2);
	assert_int_equal(c.nev, 3);
	assert_int_equal(c.ev[0].type, RESIL_CLUSTER_EVENT_QUEUED);
	assert_int_equal(c.ev[1].type, RESIL_CLUSTER_EVENT_QUEUED);
	assert_int_equal(c.ev[2].type, RESIL_CLUSTER_EVENT_QUEUE_FULL);
	/* Not due before failure time + period. */
	resil_manual_clock_set(&c.f.mc, 5 * RESIL_NS_PER_SEC - 1);
	assert_int_equal(
	    resil_cluster_failback_poll(c.cl, dep_call, &c.d, &ran), RESIL_OK);
	assert_int_equal(ran, 0);
	/* Due: each runs once, avoiding the endpoint it last failed on. */
	memset(c.d.order, 0, sizeof(c.d.order));
	resil_manual_clock_set(&c.f.mc, 5 * RESIL_NS_PER_SEC);
	assert_int_equal(
	    resil_cluster_failback_poll(c.cl, dep_call, &c.d, &ran), RESIL_OK);
	assert_int_equal(ran, 2);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 2);
	/* A late poll runs each due task once (no catch-up); the second
	 * failed retry drops them. */
	resil_manual_clock_set(&c.f.mc, 60 * RESIL_NS_PER_SEC);
	assert_int_equal(
	    resil_cluster_failback_poll(c.cl, dep_call, &c.d, &ran), RESIL_OK);
	assert_int_equal(ran, 2);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
	assert_int_equal(c.ev[c.nev - 1].type, RESIL_CLUSTER_EVENT_GAVE_UP);
	assert_int_equal(c.ev[c.nev - 1].retries, 2);
	cfx_end(&c);

	/* A retry that succeeds leaves the queue, with an event. */
	cfx_init(&c, RESIL_CLUSTER_FAILBACK, 2);
	cfx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 1);
	memset(c.d.order, 0, sizeof(c.d.order));
	resil_manual_clock_set(&c.f.mc, 5 * RESIL_NS_PER_SEC);
	assert_int_equal(
	    resil_cluster_failback_poll(c.cl, dep_call, &c.d, &ran), RESIL_OK);
	assert_string_equal(c.d.order, "e1:1"); /* not e0 again */
	assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
	assert_int_equal(c.ev[c.nev - 1].type, RESIL_CLUSTER_EVENT_RETRIED);
	cfx_end(&c);

	/* failback_retries = 0 queues nothing. */
	cfx_init(&c, RESIL_CLUSTER_FAILBACK, 2);
	c.ccfg.failback_retries = 0;
	cfx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
	cfx_end(&c);
}

static void
test_cluster_broadcast_threshold(void **state)
{
	cfx c;
	resil_cluster_result r;

	(void)state;
	/* All succeed: every endpoint in order, the last one's value. */
	cfx_init(&c, RESIL_CLUSTER_BROADCAST, 4);
	cfx_new(&c);
	assert_int_equal(invoke(&c, &r), RESIL_OK);
	assert_string_equal(c.d.order, "e0:1 e1:1 e2:1 e3:1");
	assert_int_equal(r.value.u.i, 103);
	resil_value_free(&r.value);
	/* One failure, later ones succeed: still the failure's error. */
	memset(&c.d, 0, sizeof(c.d));
	c.d.fails[1] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService by broadcast: 1 of 4 providers failed. Last error "
	    "is: the call failed (rc 111)");
	cfx_end(&c);

	/* 50% of 4: it stops at the second failure. */
	cfx_init(&c, RESIL_CLUSTER_BROADCAST, 4);
	c.ccfg.broadcast_fail_percent = 50;
	cfx_new(&c);
	c.d.fails[0] = c.d.fails[1] = 1;
	assert_int_equal(invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(c.d.order, "e0:1 e1:1");
	cfx_end(&c);
}

static void
test_cluster_config_refusals(void **state)
{
	resil_cluster_config c;
	resil_cluster_strategy s;
	resil_diag d;

	(void)state;
	resil_cluster_config_init(&c);
	assert_int_equal(resil_cluster_config_validate(&c, &d), RESIL_OK);
	c.retries = -1;
	assert_int_equal(resil_cluster_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "cluster.retries: -1 must be >= 0");
	resil_cluster_config_init(&c);
	c.failback_queue = 0;
	assert_int_equal(resil_cluster_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "cluster.failback_queue: 0 must be >= 1");
	resil_cluster_config_init(&c);
	c.broadcast_fail_percent = 101;
	assert_int_equal(resil_cluster_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "cluster.broadcast_fail_percent: 101 is out of range 0..100");
	resil_cluster_config_init(&c);
	c.failback_retries = -2;
	assert_int_equal(resil_cluster_config_validate(&c, &d), RESIL_E_INVAL);
	resil_cluster_config_init(&c);
	c.strategy = (resil_cluster_strategy)9;
	assert_int_equal(resil_cluster_config_validate(&c, &d), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_strategy_parse("failsafe", &s), RESIL_OK);
	assert_int_equal(s, RESIL_CLUSTER_FAILSAFE);
	assert_int_equal(
	    resil_cluster_strategy_parse("failsave", &s), RESIL_E_INVAL);
	assert_string_equal(
	    resil_cluster_strategy_name(RESIL_CLUSTER_BROADCAST), "broadcast");
	assert_int_equal(
	    resil_cluster_invoke(NULL, NULL, dep_call, NULL, NULL),
	    RESIL_E_INVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_cluster_failover_tries_distinct_then_reports),
		cmocka_unit_test(
		    test_cluster_failover_more_attempts_than_endpoints),
		cmocka_unit_test(
		    test_cluster_business_error_passes_every_strategy),
		cmocka_unit_test(test_cluster_failfast_and_failsafe),
		cmocka_unit_test(test_cluster_no_provider_is_never_swallowed),
		cmocka_unit_test(test_cluster_no_provider_after_routers),
		cmocka_unit_test(test_cluster_failback_queue_and_retries),
		cmocka_unit_test(test_cluster_broadcast_threshold),
		cmocka_unit_test(test_cluster_config_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

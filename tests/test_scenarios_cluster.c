/*
 * Black-box scenarios for the cluster layer (directory, routers,
 * balancers, outlier detection, panic, the strategies standalone and in
 * the pipeline's call machine) ported from the peers' test suites, run
 * against the public API only. Each test names the peer file and test it
 * comes from:
 *
 *   Dubbo   dubbo-cluster/src/test/java/org/apache/dubbo/rpc/cluster/
 *           support/{Failover,Failfast,FailSafe,Failback,Forking,
 *           BroadCast,AbstractCluster}ClusterInvokerTest.java,
 *           loadbalance/{LoadBalanceBase,RoundRobin,Random,LeastActive,
 *           ConsistentHash,ShortestResponse}*Test.java,
 *           router/condition/ConditionStateRouterTest.java,
 *           router/tag/TagStateRouterTest.java
 *   Envoy   test/common/upstream/outlier_detection_impl_test.cc,
 *           test/common/upstream/load_balancer_impl_test.cc
 *
 * Units: one tick is one millisecond (Envoy's simulated time and Dubbo's
 * warm-up are in milliseconds; the other peers' scenarios have no time).
 * Dubbo's invokers become endpoints "e0:1", "e1:1", ... in the peer's
 * order (Dubbo's invoker1 is e0); where a peer's URLs carry hosts that a
 * rule tests, the endpoints keep them. Mockito's "throws RpcException"
 * is rc 111 (a failure), a business exception rc 7.
 *
 * Where resil differs from a peer, the comment says so and says whether
 * DESIGN.md's "Decided semantics" decides it (the test follows DESIGN)
 * or not (the test follows what resil does, and the difference is listed
 * for review).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/cluster.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/router.h>
#include <resil/selector.h>

#include "support/caller_executor.h"
#include "support/cluster_fx.h"

#define MS RESIL_NS_PER_MS
#define NEP 16

/* ------------------------------------------------------------------ */
/* A scripted dependency                                              */
/* ------------------------------------------------------------------ */

/* Endpoint i ("e<i>:1") fails its first fails[i] calls (rc 111; -1: all
 * of them); biz[i] answers a business error (rc 7); otherwise it answers
 * 100 + i. hook, when set, runs before the answer (a directory change
 * in the middle of a call). */
typedef struct dep {
	int fails[NEP];
	int biz[NEP];
	int calls[NEP];
	char order[1024];
	int n;
	void (*hook)(struct dep *d, const resil_pick *ep);
	void *hook_ctx;
	int detail; /* a failure also sets a (heap) string value */
} dep;

static int
ep_index(const char *address)
{
	return atoi(address + 1) % NEP;
}

static void
dep_note(dep *d, const char *address)
{
	size_t len = strlen(d->order);

	snprintf(d->order + len, sizeof(d->order) - len, "%s%s",
	    len > 0 ? " " : "", address);
}

static int
dep_answer(dep *d, const char *address, resil_value *out)
{
	int i = ep_index(address);

	dep_note(d, address);
	d->calls[i]++;
	d->n++;
	if (d->biz[i])
		return 7;
	if (d->fails[i] < 0 || d->calls[i] <= d->fails[i]) {
		if (d->detail)
			assert_int_equal(resil_value_string(out,
			                     "connection refused by the "
			                     "provider's acceptor thread",
			                     52, NULL),
			    RESIL_OK);
		return 111;
	}
	*out = resil_value_int(100 + i);
	return 0;
}

static int
dep_call(void *ctx, const resil_pick *ep, const resil_request *req,
    resil_value *out)
{
	dep *d = ctx;

	(void)req;
	if (d->hook != NULL)
		d->hook(d, ep);
	return dep_answer(d, ep->address, out);
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

/* ------------------------------------------------------------------ */
/* The standalone cluster over the fixture                            */
/* ------------------------------------------------------------------ */

typedef struct cx {
	fx f;
	resil_cluster_config ccfg;
	resil_cluster *cl;
	resil_cluster_event ev[64];
	size_t nev;
	dep d;
} cx;

static void
cx_listener(const resil_cluster_event *ev, void *ctx)
{
	cx *c = ctx;

	if (c->nev < 64)
		c->ev[c->nev++] = *ev;
}

/* n endpoints e0:1.. with weight 100, round robin, no outlier detection;
 * the caller adjusts c->ccfg, then cx_new(). */
static void
cx_init(cx *c, resil_cluster_strategy s, size_t n)
{
	memset(c, 0, sizeof(*c));
	fx_init(&c->f, 0);
	c->f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	c->f.scfg.service = "StockService";
	c->f.dcfg.outlier.max_ejection_pct = 0;
	/* Dubbo's invoker tests run over a static directory, which has no
	 * empty protection: an emptied list is empty. */
	c->f.dcfg.empty_protection = 0;
	assert_int_equal(fx_start(&c->f), 0);
	if (n > 0)
		assert_int_equal(fx_push_weights(&c->f, NULL, n), RESIL_OK);
	resil_cluster_config_init(&c->ccfg);
	c->ccfg.strategy = s;
	c->ccfg.service = "StockService";
	c->ccfg.clock = resil_manual_clock_hook(&c->f.mc);
	c->ccfg.classifier.fn = classify;
	c->ccfg.listener = cx_listener;
	c->ccfg.listener_ctx = c;
}

static void
cx_new(cx *c)
{
	resil_diag d;
	resil_err err = resil_cluster_new(&c->cl, c->f.sel, &c->ccfg, &d);

	if (err != RESIL_OK)
		fail_msg("resil_cluster_new: %s", d.msg);
}

static void
cx_end(cx *c)
{
	resil_cluster_free(c->cl);
	fx_end(&c->f);
}

static resil_err
cx_invoke(cx *c, resil_cluster_result *r)
{
	resil_request req;

	memset(&req, 0, sizeof(req));
	req.method = "getStock";
	memset(r, 0, sizeof(*r));
	return resil_cluster_invoke(c->cl, &req, dep_call, &c->d, r);
}

static size_t
cx_events(const cx *c, resil_cluster_event_type t)
{
	size_t i, n = 0;

	for (i = 0; i < c->nev; i++)
		n += c->ev[i].type == t;
	return n;
}

/* ---- Dubbo FailoverClusterInvokerTest ---- */

/*
 * FailoverClusterInvokerTest.testInvoke_retryTimes and
 * .testInvokeWithRuntimeException: retries=5 over two invokers that both
 * fail. Dubbo: retries + 1 = 6 attempts, the message says "6 times", the
 * error is not a timeout (code 0). resil (DESIGN, failover): 6 attempts,
 * untried first (e0, e1), then the tried ones again in balancer order;
 * the error is the last attempt's own kind (RESIL_E_CALL, rc 111).
 */
static void
test_dubbo_failover_retry_times(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILOVER, 2);
	c.ccfg.retries = 5;
	cx_new(&c);
	c.d.fails[0] = c.d.fails[1] = -1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 6);
	assert_int_equal(r.rc, 111);
	assert_int_equal(r.outcome, RESIL_OUTCOME_FAILURE);
	assert_int_equal(c.d.calls[0], 3);
	assert_int_equal(c.d.calls[1], 3);
	/* Smooth round robin over the untried ones, then over both. */
	assert_string_equal(c.d.order, "e0:1 e1:1 e1:1 e0:1 e1:1 e0:1");
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. Tried 6 times of the providers [e0:1, e1:1] "
	    "(2/2). Last error is: the call failed (rc 111)");
	cx_end(&c);
}

/*
 * FailoverClusterInvokerTest.testInvokeWithRPCException: invoker1 always
 * throws, invoker2 answers; 100 invocations all return invoker2's result.
 * With round robin the calls alternate which endpoint they start on: 50
 * start on e0 and fail over to e1 (2 attempts), 50 start on e1.
 */
static void
test_dubbo_failover_rpc_exception_then_success(void **state)
{
	cx c;
	resil_cluster_result r;
	int i, two = 0;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILOVER, 2);
	c.ccfg.retries = 5;
	cx_new(&c);
	c.d.fails[0] = -1;
	for (i = 0; i < 100; i++) {
		assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
		assert_int_equal(r.value.type, RESIL_VALUE_INT);
		assert_int_equal(r.value.u.i, 101);
		assert_true(r.attempts == 1 || r.attempts == 2);
		two += r.attempts == 2;
		resil_value_free(&r.value);
	}
	assert_int_equal(c.d.calls[1], 100);
	assert_int_equal(c.d.calls[0], two);
	assert_int_equal(two, 50);
	cx_end(&c);
}

/*
 * FailoverClusterInvokerTest.testNoInvoke: the directory lists nothing;
 * Dubbo throws an RpcException whose cause is not another RpcException.
 * resil (DESIGN): "no provider", RESIL_E_NO_PROVIDER with Dubbo's words,
 * no attempt, never retried.
 */
static void
test_dubbo_failover_no_invoke(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILOVER, 0);
	c.ccfg.retries = 5;
	cx_new(&c);
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_NO_PROVIDER);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(c.d.n, 0);
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. No provider available for the service "
	    "StockService: 0 endpoints. Please check if the providers have "
	    "been started and registered.");
	cx_end(&c);
}

/* The directory is replaced during the call: e0 and e1 are destroyed,
 * e9 alone is listed. */
static void
relist_hook(dep *d, const resil_pick *ep)
{
	fx *f = d->hook_ctx;
	resil_endpoint_spec s = resil_endpoint_spec_default("e9:1");

	(void)ep;
	assert_int_equal(
	    resil_directory_push(f->d, &s, 1, &f->diag), RESIL_OK);
	d->hook = NULL;
}

/*
 * FailoverClusterInvokerTest.testInvokerDestroyAndReList: when the
 * invokers change after a failed attempt and before the retry, the retry
 * reselects from the latest list. resil (DESIGN): failover routes again
 * before every retry, so the second attempt goes to e9, which answers.
 */
static void
test_dubbo_failover_invoker_destroy_and_relist(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILOVER, 2);
	c.ccfg.retries = 5;
	cx_new(&c);
	c.d.fails[0] = c.d.fails[1] = -1;
	c.d.hook = relist_hook;
	c.d.hook_ctx = &c.f;
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(c.d.order, "e0:1 e9:1");
	assert_int_equal(r.value.u.i, 109);
	resil_value_free(&r.value);
	/* The removed endpoints are gone for the next call too. */
	assert_int_equal(resil_directory_count(c.f.d), 1);
	cx_end(&c);
}

/* The directory empties during the call. */
static void
empty_hook(dep *d, const resil_pick *ep)
{
	fx *f = d->hook_ctx;

	(void)ep;
	assert_int_equal(
	    resil_directory_push(f->d, NULL, 0, &f->diag), RESIL_OK);
	d->hook = NULL;
}

/*
 * testInvokerDestroyAndReList's other branch, as DESIGN has it: the list
 * is emptied during the first attempt, so the retry's route finds no
 * provider, which ends the call (RESIL_E_NO_PROVIDER, one attempt). The
 * result keeps the last attempt's rc and outcome (they were 0 and
 * SUCCESS before the fix) and the value that failed attempt set is freed
 * (it leaked before the fix; make asan shows it).
 */
static void
test_dubbo_failover_list_emptied_before_retry(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILOVER, 2);
	c.ccfg.retries = 5;
	cx_new(&c);
	c.d.fails[0] = c.d.fails[1] = -1;
	c.d.detail = 1;
	c.d.hook = empty_hook;
	c.d.hook_ctx = &c.f;
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_NO_PROVIDER);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.rc, 111);
	assert_int_equal(r.outcome, RESIL_OUTCOME_FAILURE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. No provider available for the service "
	    "StockService: 0 endpoints. Please check if the providers have "
	    "been started and registered.");
	cx_end(&c);
}

/*
 * FailoverClusterInvoker's retries=0 (Dubbo: "retries + 1" attempts, so
 * one): a single attempt; the message counts one "time".
 */
static void
test_dubbo_failover_retries_zero(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILOVER, 2);
	c.ccfg.retries = 0;
	cx_new(&c);
	c.d.fails[0] = c.d.fails[1] = -1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. Tried 1 time of the providers [e0:1] (1/2). Last "
	    "error is: the call failed (rc 111)");
	cx_end(&c);
}

/* ---- Dubbo FailfastClusterInvokerTest ---- */

/*
 * FailfastClusterInvokerTest.testInvokeException / testInvokeNoException
 * / testNoInvoke: one attempt, its error thrown as it is; a success is
 * returned; no invoker is an error. resil: the same, with Dubbo's
 * "Failfast invoke providers" message.
 */
static void
test_dubbo_failfast_one_attempt(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILFAST, 3);
	cx_new(&c);
	c.d.fails[0] = -1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.rc, 111);
	assert_string_equal(c.d.order, "e0:1");
	assert_string_equal(r.message,
	    "Failfast invoke providers e0:1 RoundRobinLoadBalance select "
	    "from all providers [e0:1, e1:1, e2:1] for service StockService "
	    "method getStock, but no luck to perform the invocation. Last "
	    "error is: the call failed (rc 111)");
	/* The next call goes on to e1, which answers. */
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.value.u.i, 101);
	resil_value_free(&r.value);
	/* No provider. */
	assert_int_equal(
	    resil_directory_push(c.f.d, NULL, 0, &c.f.diag), RESIL_OK);
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_NO_PROVIDER);
	assert_int_equal(r.attempts, 0);
	cx_end(&c);
}

/* ---- Dubbo FailSafeClusterInvokerTest ---- */

/*
 * FailSafeClusterInvokerTest.testInvokeExceptoin / testInvokeNoExceptoin
 * / testNoInvoke: a failure is swallowed (an empty result), a success is
 * returned. Dubbo's failsafe also swallows "no invoker" (checkInvokers
 * throws inside its try). resil differs there and DESIGN decides it:
 * "no provider" is checked before every strategy; failsafe does not
 * swallow it.
 */
static void
test_dubbo_failsafe_swallows_but_not_no_provider(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILSAFE, 1);
	cx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_SWALLOWED), 1);
	assert_string_equal(c.ev[0].address, "e0:1");
	assert_int_equal(c.ev[0].rc, 111);
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 100);
	resil_value_free(&r.value);
	assert_int_equal(
	    resil_directory_push(c.f.d, NULL, 0, &c.f.diag), RESIL_OK);
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_NO_PROVIDER);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_SWALLOWED), 1);
	cx_end(&c);
}

/* ---- Dubbo FailbackClusterInvokerTest ---- */

/*
 * FailbackClusterInvokerTest.testInvokeWithIllegalRetriesParam and
 * .testInvokeWithIllegalFailbacktasksParam: Dubbo takes retries=-1 and
 * failbacktasks=-1 and repairs them. resil refuses them at configuration
 * time (DESIGN: "values Dubbo silently repairs are refused").
 */
static void
test_dubbo_failback_illegal_params_refused(void **state)
{
	resil_cluster_config cfg;
	resil_diag d;

	(void)state;
	resil_cluster_config_init(&cfg);
	cfg.strategy = RESIL_CLUSTER_FAILBACK;
	cfg.failback_retries = -1;
	assert_int_equal(
	    resil_cluster_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "failback"));
	assert_non_null(strstr(d.msg, "-1"));
	resil_cluster_config_init(&cfg);
	cfg.strategy = RESIL_CLUSTER_FAILBACK;
	cfg.failback_queue = -1;
	assert_int_equal(
	    resil_cluster_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "-1"));
	cfg.failback_queue = 0;
	assert_int_equal(
	    resil_cluster_config_validate(&cfg, &d), RESIL_E_INVAL);
	resil_cluster_config_init(&cfg);
	cfg.retries = -1;
	assert_int_equal(
	    resil_cluster_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "retries"));
}

/*
 * FailbackClusterInvokerTest.testInvokeException / testInvokeNoException
 * / testNoInvoke: a failure gives an empty result and is queued; a success
 * is returned. Dubbo also queues the "no invoker" failure ("Failback to
 * invoke" logged once); resil does not (DESIGN: "no provider" is checked
 * before every strategy, failback does not swallow it).
 */
static void
test_dubbo_failback_invoke_exception(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILBACK, 1);
	cx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 1);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_QUEUED), 1);
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 100);
	resil_value_free(&r.value);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 1);
	assert_int_equal(
	    resil_directory_push(c.f.d, NULL, 0, &c.f.diag), RESIL_OK);
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_NO_PROVIDER);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 1);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_QUEUED), 1);
	cx_end(&c);
}

/*
 * FailbackClusterInvokerTest.testARetryFailed (disabled in Dubbo; its
 * expectations are the ones worth porting): retries=2, failbacktasks=2,
 * three failing invocations of an invoker that keeps failing: "four
 * 'Failed retry to invoke method'", "two 'Failed retry times exceed
 * threshold'", "one 'Failback background works error'" (the third call
 * finds the timer full). resil: the third failure finds the queue full
 * and is dropped (QUEUE_FULL; the caller still gets no error); the two queued
 * tasks are each retried twice (4 failed retries) and then dropped (2
 * GAVE_UP).
 */
static void
test_dubbo_failback_retry_failed(void **state)
{
	cx c;
	resil_cluster_result r;
	size_t ran, total = 0;
	uint64_t t;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILBACK, 1);
	c.ccfg.failback_queue = 2;
	c.ccfg.failback_retries = 2;
	c.ccfg.failback_period_ns = 5000;
	cx_new(&c);
	c.d.fails[0] = -1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK); /* dropped (DESIGN) */
	assert_int_equal(r.rc, 111);
	assert_string_equal(r.message,
	    "Failback queue of the method getStock in the service "
	    "StockService is full (2 calls): the failure is dropped. Last "
	    "error is: the call failed (rc 111)");
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_QUEUED), 2);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_QUEUE_FULL), 1);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 2);
	/* One period apart; nothing is due a tick early. */
	for (t = 4999; t <= 15000; t += t == 4999 ? 1 : 5000) {
		resil_manual_clock_set(&c.f.mc, t);
		assert_int_equal(
		    resil_cluster_failback_poll(c.cl, dep_call, &c.d, &ran),
		    RESIL_OK);
		assert_int_equal(ran, t == 4999 ? 0 : t == 15000 ? 0 : 2);
		total += ran;
	}
	assert_int_equal(total, 4);
	assert_int_equal(c.d.calls[0], 3 + 4);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_GAVE_UP), 2);
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_RETRIED), 0);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
	cx_end(&c);
}

/*
 * Failback's retry timer (Dubbo's FailbackClusterInvoker schedules each
 * retry a period later and picks again, leaving out the invoker that
 * just failed). resil (DESIGN): the first retry is due at failure time +
 * period; a poll runs each due task once and re-arms it at poll time +
 * period; each retry avoids the endpoint tried last; after
 * failback.retries (3) failed retries the task is dropped.
 */
static void
test_dubbo_failback_retry_timer_avoids_last(void **state)
{
	cx c;
	resil_cluster_result r;
	size_t ran;
	static const struct {
		uint64_t at;
		size_t ran;
	} poll[] = { { 9, 0 }, { 10, 1 }, { 19, 0 }, { 25, 1 }, { 34, 0 },
		{ 35, 1 }, { 100, 0 } };
	size_t i;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_FAILBACK, 3);
	c.ccfg.failback_period_ns = 10;
	cx_new(&c);
	c.d.fails[0] = c.d.fails[1] = c.d.fails[2] = -1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	for (i = 0; i < sizeof(poll) / sizeof(poll[0]); i++) {
		resil_manual_clock_set(&c.f.mc, poll[i].at);
		assert_int_equal(
		    resil_cluster_failback_poll(c.cl, dep_call, &c.d, &ran),
		    RESIL_OK);
		assert_int_equal(ran, poll[i].ran);
	}
	assert_string_equal(c.d.order, "e0:1 e1:1 e2:1 e1:1");
	assert_int_equal(cx_events(&c, RESIL_CLUSTER_EVENT_GAVE_UP), 1);
	assert_int_equal(c.ev[c.nev - 1].retries, 3);
	assert_int_equal(c.ev[c.nev - 1].time, 35);
	assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
	cx_end(&c);
}

/*
 * DESIGN: values Dubbo silently repairs are refused at configuration
 * time (FailbackClusterInvokerTest's retries=-1 / failbacktasks=-1,
 * ForkingClusterInvokerTest's forks=-1, and the rest of the list), each
 * message naming the field. DESIGN's list also names "0 consecutive
 * failures for outlier detection": refused too, in the C configuration
 * and in the text; max_ejection_pct 0 is the switch that turns outlier
 * detection off.
 */
static void
test_design_repaired_values_refused(void **state)
{
	resil_cluster_config cc;
	resil_selector_config sc;
	resil_directory_config dc;
	resil_diag d;

	(void)state;
	resil_cluster_config_init(&cc);
	cc.forks = 0;
	assert_int_equal(
	    resil_cluster_config_validate(&cc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "cluster.forks: 0 must be >= 1 (above the endpoint count means "
	    "all)");
	resil_cluster_config_init(&cc);
	cc.broadcast_fail_percent = 101;
	assert_int_equal(
	    resil_cluster_config_validate(&cc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "cluster.broadcast_fail_percent: 101 is out of range 0..100");
	cc.broadcast_fail_percent = -1;
	assert_int_equal(
	    resil_cluster_config_validate(&cc, &d), RESIL_E_INVAL);
	resil_cluster_config_init(&cc);
	cc.failback_queue = 0;
	assert_int_equal(
	    resil_cluster_config_validate(&cc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "cluster.failback_queue: 0 must be >= 1");
	resil_selector_config_init(&sc);
	sc.balance.hash_nodes = 0;
	assert_int_equal(
	    resil_selector_config_validate(&sc, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "loadbalance.hash.nodes: 0 is out of range 1..10000");
	resil_selector_config_init(&sc);
	sc.panic_threshold_pct = 101;
	assert_int_equal(
	    resil_selector_config_validate(&sc, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "panic.threshold: 101 is out of range 0..100");
	resil_directory_config_init(&dc);
	dc.outlier.max_ejection_pct = 101;
	assert_int_equal(
	    resil_directory_config_validate(&dc, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "outlier.max_ejection_pct: 101 is out of range 0..100");
	resil_directory_config_init(&dc);
	dc.outlier.consecutive_failures = 0;
	assert_int_equal(
	    resil_directory_config_validate(&dc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "outlier.consecutive_failures: 0 must be >= 1 "
	    "(outlier.max_ejection_pct=0 turns outlier detection off)");
	resil_selector_config_init(&sc);
	{
		resil_cluster_text *t = NULL;

		assert_int_equal(resil_cluster_text_new(&t, NULL), RESIL_OK);
		assert_int_equal(
		    resil_cluster_text_set(
		        t, "outlier.consecutive_failures", "0", NULL, 0, &d),
		    RESIL_E_INVAL);
		assert_string_equal(d.msg,
		    "outlier.consecutive_failures: 0 is out of range "
		    "1..1000000");
		resil_cluster_text_free(t);
	}
	/* Off: never ejected, however long the streak. */
	resil_directory_config_init(&dc);
	dc.outlier.max_ejection_pct = 0;
	assert_int_equal(resil_directory_config_validate(&dc, &d), RESIL_OK);
}

/*
 * Dubbo's cluster extension names (failover, failfast, failsafe,
 * failback, forking, broadcast, zone-aware) parse to resil's strategies,
 * case-sensitively as Dubbo's ExtensionLoader; AvailableClusterInvokerTest
 * ("available": the first available invoker) and MergeableClusterInvoker
 * have no resil strategy and are refused (listed). resil_cluster_new
 * refuses forking and zone-aware, which run only in the pipeline.
 */
static void
test_dubbo_cluster_names(void **state)
{
	static const char *const names[] = { "failover", "failfast",
		"failsafe", "failback", "broadcast", "forking", "zone-aware" };
	resil_cluster_strategy st;
	size_t i;
	cx c;
	resil_cluster *cl = NULL;
	resil_diag d;

	(void)state;
	for (i = 0; i < 7; i++) {
		assert_int_equal(
		    resil_cluster_strategy_parse(names[i], &st), RESIL_OK);
		assert_int_equal(st, (resil_cluster_strategy)i);
		assert_string_equal(resil_cluster_strategy_name(st), names[i]);
	}
	assert_int_equal(
	    resil_cluster_strategy_parse("available", &st), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_strategy_parse("mergeable", &st), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_strategy_parse("Failover", &st), RESIL_E_INVAL);
	cx_init(&c, RESIL_CLUSTER_FORKING, 2);
	assert_int_equal(
	    resil_cluster_new(&cl, c.f.sel, &c.ccfg, &d), RESIL_E_INVAL);
	assert_null(cl);
	assert_non_null(strstr(d.msg, "forking"));
	c.ccfg.strategy = RESIL_CLUSTER_ZONE_AWARE;
	c.ccfg.local_zone = "hz";
	assert_int_equal(
	    resil_cluster_new(&cl, c.f.sel, &c.ccfg, &d), RESIL_E_INVAL);
	assert_null(cl);
	fx_end(&c.f);
}

/* ---- Dubbo BroadCastClusterInvokerTest ---- */

/* BroadCastClusterInvokerTest.testNormal: every invoker is called; all
 * succeeded: resil gives the last endpoint's value (DESIGN). */
static void
test_dubbo_broadcast_normal(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_BROADCAST, 4);
	cx_new(&c);
	assert_int_equal(cx_invoke(&c, &r), RESIL_OK);
	assert_int_equal(r.attempts, 4);
	assert_string_equal(c.d.order, "e0:1 e1:1 e2:1 e3:1");
	assert_int_equal(r.value.u.i, 103);
	resil_value_free(&r.value);
	cx_end(&c);
}

/* BroadCastClusterInvokerTest.testEx: invoker1 throws; with the default
 * 100% the others are still called and the call throws. resil (DESIGN):
 * the last failure's error even though later endpoints succeeded. */
static void
test_dubbo_broadcast_ex(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_BROADCAST, 4);
	cx_new(&c);
	c.d.fails[0] = 1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 4);
	assert_int_equal(r.rc, 111);
	assert_string_equal(c.d.order, "e0:1 e1:1 e2:1 e3:1");
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService by broadcast: 1 of 4 providers failed. Last error "
	    "is: the call failed (rc 111)");
	cx_end(&c);
}

/* BroadCastClusterInvokerTest.testFailPercent: broadcast.fail.percent=75
 * over 4 that all fail: threshold floor(4 * 75 / 100) = 3, so invoker4 is
 * never called. */
static void
test_dubbo_broadcast_fail_percent(void **state)
{
	cx c;
	resil_cluster_result r;

	(void)state;
	cx_init(&c, RESIL_CLUSTER_BROADCAST, 4);
	c.ccfg.broadcast_fail_percent = 75;
	cx_new(&c);
	c.d.fails[0] = c.d.fails[1] = c.d.fails[2] = c.d.fails[3] = 1;
	assert_int_equal(cx_invoke(&c, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(c.d.calls[3], 0);
	assert_string_equal(c.d.order, "e0:1 e1:1 e2:1");
	assert_non_null(strstr(r.message, "3 of 4 providers failed"));
	cx_end(&c);
}

/*
 * Broadcast over endpoints whose own breaker refuses (no peer has this:
 * Dubbo's broadcast calls every invoker). resil (DESIGN: broadcast runs
 * in candidate order; docs: an endpoint whose breaker refuses is passed
 * over) with panic keeping the refusing ones routed: e1 refused gives
 * e0, e2 (e0 was called twice before the fix, its balancer choosing a
 * replacement); the last one refused gives the value of the last that
 * answered (e1's, was e0's); all refused is RESIL_E_UNAVAILABLE with no
 * call (was RESIL_OK with a null value), as in the pipeline.
 */
static void
test_design_broadcast_passes_over_refusing_breakers(void **state)
{
	static const char *const down[3][3] = { { "e1:1", NULL, NULL },
		{ "e2:1", NULL, NULL }, { "e0:1", "e1:1", "e2:1" } };
	static const char *const order[] = { "e0:1 e2:1", "e0:1 e1:1", "" };
	static const int value[] = { 102, 101, -1 };
	resil_breaker_config bc;
	size_t k, j;

	(void)state;
	for (k = 0; k < 3; k++) {
		cx c;
		resil_cluster_result r;
		resil_err want = value[k] < 0 ? RESIL_E_UNAVAILABLE : RESIL_OK;

		cx_init(&c, RESIL_CLUSTER_BROADCAST, 0);
		fx_end(&c.f);
		fx_init(&c.f, 0);
		resil_breaker_config_init(&bc);
		c.f.dcfg.endpoint_breaker = &bc;
		c.f.dcfg.outlier.max_ejection_pct = 0;
		c.f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
		c.f.scfg.service = "StockService";
		c.f.scfg.panic_threshold_pct = 100;
		assert_int_equal(fx_start(&c.f), 0);
		assert_int_equal(fx_push_weights(&c.f, NULL, 3), RESIL_OK);
		for (j = 0; j < 3 && down[k][j] != NULL; j++)
			assert_int_equal(
			    resil_breaker_force_open(
			        resil_directory_breaker(c.f.d, down[k][j])),
			    RESIL_OK);
		cx_new(&c);
		assert_int_equal(cx_invoke(&c, &r), want);
		assert_string_equal(c.d.order, order[k]);
		assert_int_equal(r.attempts, k < 2 ? 2 : 0);
		if (value[k] >= 0) {
			assert_int_equal(r.value.type, RESIL_VALUE_INT);
			assert_int_equal(r.value.u.i, value[k]);
		} else {
			assert_int_equal(r.value.type, RESIL_VALUE_NULL);
			assert_string_equal(r.message,
			    "Failed to invoke the method getStock in the "
			    "service StockService by broadcast: none of 3 "
			    "providers could be called (their breakers "
			    "refused)");
		}
		resil_value_free(&r.value);
		cx_end(&c);
	}
}

/* ------------------------------------------------------------------ */
/* Selection (Dubbo AbstractClusterInvokerTest)                        */
/* ------------------------------------------------------------------ */

static uint64_t
id_of(fx *f, const char *address)
{
	resil_endpoint_state s;

	assert_int_equal(
	    resil_directory_get_state(f->d, address, &s), RESIL_OK);
	return s.id;
}

/* Route, then pick excluding ex[0..n); the address (copied into buf) or
 * "" with the error in *err. A pick is reported as a success. */
static const char *
pick_ex(
    fx *f, const uint64_t *ex, size_t n, char *buf, size_t len, resil_err *err)
{
	resil_request req;
	resil_pick p;

	memset(&req, 0, sizeof(req));
	req.method = "sayHello";
	buf[0] = '\0';
	*err = resil_selector_route(f->sel, &req, f->c, &f->diag);
	if (*err != RESIL_OK)
		return buf;
	*err = resil_selector_pick(f->sel, f->c, &req, ex, n, &p, &f->diag);
	if (*err != RESIL_OK)
		return buf;
	snprintf(buf, len, "%s", p.address);
	assert_int_equal(
	    resil_selector_report(f->sel, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_OK);
	return buf;
}

/*
 * AbstractClusterInvokerTest.testSelect_Invokersize0 / _Invokersize1:
 * nothing to select from gives null, one invoker is selected. resil: an
 * empty directory routes to RESIL_E_NO_PROVIDER and a pick from an empty
 * set is RESIL_E_MISUSE; a lone candidate is picked without a draw
 * (DESIGN: "one candidate: no draw").
 */
static void
test_dubbo_select_invoker_size_0_and_1(void **state)
{
	fx f;
	char b[32];
	resil_err err;
	resil_pick p;
	resil_request req;

	(void)state;
	fx_init(&f, 0);
	assert_int_equal(fx_start(&f), 0);
	pick_ex(&f, NULL, 0, b, sizeof(b), &err);
	assert_int_equal(err, RESIL_E_NO_PROVIDER);
	memset(&req, 0, sizeof(req));
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, &req, NULL, 0, &p, &f.diag),
	    RESIL_E_MISUSE);
	assert_int_equal(fx_push_weights(&f, NULL, 1), RESIL_OK);
	assert_string_equal(pick_ex(&f, NULL, 0, b, sizeof(b), &err), "e0:1");
	assert_int_equal(f.rnd.calls, 0);
	fx_end(&f);
}

/*
 * AbstractClusterInvokerTest.testSelect_Invokersize2AndselectNotNull:
 * two invokers, one already selected: the other one is chosen.
 */
static void
test_dubbo_select_two_excluding_selected(void **state)
{
	fx f;
	char b[32];
	resil_err err;
	uint64_t ex;
	int i;

	(void)state;
	fx_init(&f, 0);
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	for (i = 0; i < 10; i++) {
		ex = id_of(&f, "e1:1");
		assert_string_equal(
		    pick_ex(&f, &ex, 1, b, sizeof(b), &err), "e0:1");
		ex = id_of(&f, "e0:1");
		assert_string_equal(
		    pick_ex(&f, &ex, 1, b, sizeof(b), &err), "e1:1");
	}
	fx_end(&f);
}

/*
 * AbstractClusterInvokerTest.testDonotSelectAgainAndNoCheckAvailable:
 * five invokers, round robin, four already selected: the fifth; all five
 * selected: Dubbo still returns one of them. resil returns
 * RESIL_E_UNAVAILABLE ("all 5 candidates excluded") from the pick, and
 * failover then falls back to the tried ones (DESIGN: "tried ones only
 * when none is left"); the pick's own answer is not decided by DESIGN.
 */
static void
test_dubbo_select_do_not_select_again(void **state)
{
	fx f;
	char b[32], name[32];
	resil_err err;
	uint64_t ex[5];
	size_t i, k, n;

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	for (k = 0; k < 5; k++) {
		n = 0;
		for (i = 0; i < 5; i++) {
			snprintf(name, sizeof(name), "e%zu:1", i);
			if (i != k)
				ex[n++] = id_of(&f, name);
		}
		snprintf(name, sizeof(name), "e%zu:1", k);
		assert_string_equal(
		    pick_ex(&f, ex, n, b, sizeof(b), &err), name);
	}
	for (i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "e%zu:1", i);
		ex[i] = id_of(&f, name);
	}
	pick_ex(&f, ex, 5, b, sizeof(b), &err);
	assert_int_equal(err, RESIL_E_UNAVAILABLE);
	assert_string_equal(f.diag.msg, "all 5 candidates excluded");
	fx_end(&f);
}

/* Five endpoints with a breaker each; Dubbo's unavailable invoker1, 3 and
 * 5 (e0, e2, e4) are forced open. Panic is off: Dubbo has none. */
static void
five_with_unavailable(fx *f, resil_breaker_config *bc)
{
	static const char *const down[] = { "e0:1", "e2:1", "e4:1" };
	size_t i;

	fx_init(f, 0);
	resil_breaker_config_init(bc);
	f->dcfg.endpoint_breaker = bc;
	f->scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	f->scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(f), 0);
	assert_int_equal(fx_push_weights(f, NULL, 5), RESIL_OK);
	for (i = 0; i < 3; i++)
		assert_int_equal(resil_breaker_force_open(
		                     resil_directory_breaker(f->d, down[i])),
		    RESIL_OK);
}

/*
 * AbstractClusterInvokerTest.testSelectAgainAndCheckAvailable: invoker1,
 * 3 and 5 are unavailable. Selected {1,2,3,5}: invoker4; selected
 * {2,3,4,5}: invoker2 or 4; nothing selected, or {1,3,5}, 100 times:
 * invoker2 or 4. resil: the health filter removes the refusing endpoints
 * at routing, so exclusions only ever choose between e1 and e3. Where
 * Dubbo reselects among the selected ones ({2,3,4,5}, all five), resil's
 * pick says "all excluded" (RESIL_E_UNAVAILABLE), as in the test above.
 */
static void
test_dubbo_select_again_and_check_available(void **state)
{
	fx f;
	resil_breaker_config bc;
	char b[32];
	resil_err err;
	uint64_t ex[5];
	int i;

	(void)state;
	five_with_unavailable(&f, &bc);
	ex[0] = id_of(&f, "e0:1");
	ex[1] = id_of(&f, "e1:1");
	ex[2] = id_of(&f, "e2:1");
	ex[3] = id_of(&f, "e4:1");
	assert_string_equal(pick_ex(&f, ex, 4, b, sizeof(b), &err), "e3:1");
	/* Selected {2,3,4,5}: Dubbo reselects among the selected ones and
	 * gives invoker2 or 4; both of resil's candidates are excluded. */
	ex[0] = id_of(&f, "e3:1");
	pick_ex(&f, ex, 4, b, sizeof(b), &err);
	assert_int_equal(err, RESIL_E_UNAVAILABLE);
	assert_string_equal(f.diag.msg, "all 2 candidates excluded");
	for (i = 0; i < 100; i++) {
		pick_ex(&f, NULL, 0, b, sizeof(b), &err);
		assert_true(strcmp(b, "e1:1") == 0 || strcmp(b, "e3:1") == 0);
	}
	ex[0] = id_of(&f, "e0:1");
	ex[1] = id_of(&f, "e2:1");
	ex[2] = id_of(&f, "e4:1");
	for (i = 0; i < 100; i++) {
		pick_ex(&f, ex, 3, b, sizeof(b), &err);
		assert_true(strcmp(b, "e1:1") == 0 || strcmp(b, "e3:1") == 0);
	}
	ex[3] = id_of(&f, "e1:1");
	ex[4] = id_of(&f, "e3:1");
	pick_ex(&f, ex, 5, b, sizeof(b), &err);
	assert_int_equal(err, RESIL_E_UNAVAILABLE);
	assert_string_equal(f.diag.msg, "all 2 candidates excluded");
	fx_end(&f);
}

/*
 * AbstractClusterInvokerTest.testSelectBalance: round robin over five
 * with 1, 3 and 5 unavailable, 1000 selections: invoker2 and invoker4
 * share all of them, each more than the average. resil: exactly 500
 * each.
 */
static void
test_dubbo_select_balance(void **state)
{
	fx f;
	resil_breaker_config bc;
	char b[32];
	resil_err err;
	int i, n1 = 0, n3 = 0;

	(void)state;
	five_with_unavailable(&f, &bc);
	for (i = 0; i < 1000; i++) {
		pick_ex(&f, NULL, 0, b, sizeof(b), &err);
		assert_int_equal(err, RESIL_OK);
		n1 += strcmp(b, "e1:1") == 0;
		n3 += strcmp(b, "e3:1") == 0;
	}
	assert_int_equal(n1, 500);
	assert_int_equal(n3, 500);
	fx_end(&f);
}

/*
 * A pick ends in exactly one report (AbstractClusterInvoker's
 * RpcStatus.beginCount/endCount pair): a second report or a release after
 * it is RESIL_E_MISUSE. An outcome outside the four was accepted before
 * the fix (counted as a success, and a half-open endpoint breaker never
 * got its probe back); now it is RESIL_E_INVAL and changes nothing, so
 * the probe can still be reported and closes the breaker.
 */
static void
test_dubbo_report_once_and_bad_outcome(void **state)
{
	fx f;
	resil_breaker_config bc;
	resil_breaker *b;
	resil_endpoint_state st;
	resil_request req = { "m", NULL, 0, NULL, NULL, 0, 0 };
	resil_pick p;

	(void)state;
	fx_init(&f, 0);
	resil_breaker_config_init(&bc);
	bc.open_wait_ns = 100;
	f.dcfg.endpoint_breaker = &bc;
	f.dcfg.outlier.max_ejection_pct = 0;
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 1), RESIL_OK);
	b = resil_directory_breaker(f.d, "e0:1");
	assert_int_equal(
	    resil_breaker_transition(b, RESIL_BREAKER_OPEN), RESIL_OK);
	resil_manual_clock_advance(&f.mc, 100);
	assert_string_equal(fx_pick(&f, &req, &p), "e0:1");
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_selector_report(f.sel, &p, (resil_outcome)77),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.active, 1);
	assert_int_equal(
	    resil_selector_report(f.sel, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	assert_int_equal(
	    resil_selector_report(f.sel, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_selector_release(f.sel, &p), RESIL_E_MISUSE);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.active, 0);
	fx_end(&f);
}

/*
 * AbstractClusterInvokerTest.testMockedInvokerSelect: five invokers and
 * a mock:// one; a normal invocation lists the five. resil (DESIGN): mock
 * endpoints are never candidates; the mock stage reads the first one's
 * spec.
 */
static void
test_dubbo_mocked_invoker_select(void **state)
{
	fx f;
	resil_endpoint_spec specs[6];
	static const char *const a[] = { "e0:1", "e1:1", "e2:1", "e3:1",
		"e4:1", "m9:999" };
	resil_request req;
	resil_route_stats st;
	char spec[64];
	size_t i;

	(void)state;
	fx_init(&f, 0);
	assert_int_equal(fx_start(&f), 0);
	for (i = 0; i < 6; i++)
		specs[i] = resil_endpoint_spec_default(a[i]);
	specs[5].mock = 1;
	specs[5].params = "mock=return 5";
	assert_int_equal(
	    resil_directory_push(f.d, specs, 6, &f.diag), RESIL_OK);
	memset(&req, 0, sizeof(req));
	req.method = "sayHello";
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, &f.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 5);
	resil_candidates_stats(f.c, &st);
	assert_int_equal(st.endpoints, 5);
	assert_int_equal(
	    resil_selector_mock_spec(f.sel, "sayHello", spec, sizeof(spec)),
	    1);
	assert_string_equal(spec, "return 5");
	fx_end(&f);
}

/* ------------------------------------------------------------------ */
/* Load balancers                                                     */
/* ------------------------------------------------------------------ */

/*
 * LoadBalanceBaseTest.testLoadBalanceWarmup: Dubbo's default warm-up of
 * 10 minutes at weight 100, uptime in milliseconds. resil's integer
 * formula (DESIGN: min(w, max(1, floor(uptime * w / warmup)))) gives
 * every one of Dubbo's values.
 */
static void
test_dubbo_load_balance_warmup(void **state)
{
	static const struct {
		uint64_t uptime;
		int32_t w;
	} v[] = { { 0, 1 }, { 13, 1 }, { 6 * 1000, 1 }, { 12 * 1000, 2 },
		{ 60 * 1000, 10 }, { 5 * 60 * 1000, 50 },
		{ 5 * 60 * 1000 + 23, 50 }, { 5 * 60 * 1000 + 5999, 50 },
		{ 5 * 60 * 1000 + 6000, 51 }, { 9 * 60 * 1000, 90 },
		{ 10 * 60 * 1000 - 12 * 1000, 98 },
		{ 10 * 60 * 1000 - 6 * 1000, 99 }, { 10 * 60 * 1000, 100 },
		{ 20 * 60 * 1000, 100 } };
	size_t i;
	const uint64_t start = 1000000;

	(void)state;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_int_equal(resil_warmup_weight(100, start,
		                     10 * 60 * 1000, start + v[i].uptime),
		    v[i].w);
	/* Weight 0 stays 0; a start in the future gives 1 (DESIGN). */
	assert_int_equal(resil_warmup_weight(0, start, 600000, start + 5), 0);
	assert_int_equal(
	    resil_warmup_weight(100, start, 600000, start - 1), 1);
}

/* n picks with route + pick + report; counts[i] for "e<i>:1". */
static void
count_picks(fx *f, const resil_request *req, int n, int *counts)
{
	int i;

	for (i = 0; i < n; i++) {
		const char *a = fx_call(f, req);
		assert_true(a[0] == 'e');
		counts[ep_index(a)]++;
	}
}

/*
 * RoundRobinLoadBalanceTest.testRoundRobinLoadBalanceSelect: 10000 runs
 * over five equal invokers, each within 1 of the average: resil gives
 * exactly 2000 each.
 */
static void
test_dubbo_roundrobin_select(void **state)
{
	fx f;
	int counts[NEP] = { 0 }, i;
	resil_request req = { "method1", NULL, 0, NULL, NULL, 0, 0 };

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	count_picks(&f, &req, 10000, counts);
	for (i = 0; i < 5; i++)
		assert_int_equal(counts[i], 2000);
	assert_int_equal(f.rnd.calls, 0); /* DESIGN: no draw */
	fx_end(&f);
}

/*
 * RoundRobinLoadBalanceTest.testSelectByWeight (weights 1, 9, 6; Dubbo
 * runs it on 10 threads and allows a delta below 10): smooth weighted
 * round robin gives each window of 16 picks exactly 1, 9 and 6, and
 * 10000 picks exactly 625, 5625 and 3750. The first window is nginx's
 * smooth sequence for 1, 9, 6 (e0 wins its tie at the sixth pick).
 */
static void
test_dubbo_roundrobin_select_by_weight(void **state)
{
	fx f;
	static const int32_t w[] = { 1, 9, 6 };
	int counts[NEP] = { 0 }, win[NEP], i, k;
	char seq[128] = "";
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, w, 3), RESIL_OK);
	for (i = 0; i < 16; i++) {
		const char *a = fx_call(&f, &req);
		size_t len = strlen(seq);
		snprintf(seq + len, sizeof(seq) - len, "%c", a[1]);
		counts[ep_index(a)]++;
	}
	assert_string_equal(seq, "1212101212112121");
	for (k = 1; k < 625; k++) {
		memset(win, 0, sizeof(win));
		count_picks(&f, &req, 16, win);
		assert_int_equal(win[0], 1);
		assert_int_equal(win[1], 9);
		assert_int_equal(win[2], 6);
		for (i = 0; i < 3; i++)
			counts[i] += win[i];
	}
	assert_int_equal(counts[0], 625);
	assert_int_equal(counts[1], 5625);
	assert_int_equal(counts[2], 3750);
	fx_end(&f);
}

/*
 * RoundRobinLoadBalanceTest.testNodeCacheShouldNotRecycle: an invoker of
 * weight 11 is added for 10000 runs, then removed for 10000 more; both
 * runs stay within 10 of the weighted share. resil keeps the counters of
 * the endpoints that stay (DESIGN) and gives within 1 of the share (the
 * smooth sequence is exact over each full period).
 */
static void
test_dubbo_roundrobin_node_cache(void **state)
{
	fx f;
	static const int32_t w[] = { 1, 9, 6, 11 };
	int counts[NEP] = { 0 }, i;
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, w, 4), RESIL_OK);
	count_picks(&f, &req, 10000, counts);
	for (i = 0; i < 4; i++)
		assert_true(abs(counts[i] - w[i] * 10000 / 27) <= 1);
	assert_int_equal(counts[0] + counts[1] + counts[2] + counts[3], 10000);
	assert_int_equal(
	    resil_directory_remove(f.d, "e3:1", &f.diag), RESIL_OK);
	memset(counts, 0, sizeof(counts));
	count_picks(&f, &req, 10000, counts);
	assert_int_equal(counts[3], 0);
	for (i = 0; i < 3; i++)
		assert_true(abs(counts[i] - w[i] * 10000 / 16) < 10);
	assert_int_equal(counts[0] + counts[1] + counts[2], 10000);
	fx_end(&f);
}

/*
 * load_balancer_impl_test.cc RoundRobinLoadBalancerTest.Weighted (the
 * part after the removal: weights 1 and 4) and .WeightedSeed (1 and 2):
 * Envoy's EDF scheduler gives 1,1,1,0,1 and 0,1,1. resil's smooth WRR
 * (DESIGN) gives the same shares in a different order: 1,1,0,1,1 and
 * 1,0,1.
 */
static void
test_envoy_weighted_round_robin_order(void **state)
{
	fx f;
	static const int32_t w14[] = { 1, 4 }, w12[] = { 1, 2 };
	char seq[32] = "";
	int i;
	resil_request req = { "m", NULL, 0, NULL, NULL, 0, 0 };

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, w14, 2), RESIL_OK);
	for (i = 0; i < 10; i++)
		seq[i] = fx_call(&f, &req)[1];
	seq[10] = '\0';
	assert_string_equal(seq, "1101111011");
	fx_end(&f);

	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, w12, 2), RESIL_OK);
	for (i = 0; i < 6; i++)
		seq[i] = fx_call(&f, &req)[1];
	seq[6] = '\0';
	assert_string_equal(seq, "101101");
	fx_end(&f);
}

/*
 * Dubbo's weight=0 (a provider drained by the registry) and DESIGN's
 * "all weights 0: uniform": random, round robin, least-active and
 * shortest never pick a weight-0 endpoint while another has weight, and
 * share evenly when all are 0 (round robin: exactly). P2C, PeakEWMA and
 * hash ignore weights (DESIGN), so they do pick it (listed; the header
 * said "0 is never picked" for every balancer and now says which).
 */
static void
test_dubbo_weight_zero(void **state)
{
	static const resil_lb_kind weighted[] = { RESIL_LB_RANDOM,
		RESIL_LB_ROUNDROBIN, RESIL_LB_LEASTACTIVE, RESIL_LB_SHORTEST };
	static const int32_t w050[] = { 0, 5, 0 }, w000[] = { 0, 0, 0 };
	static const double u[] = { 0.0, 0.34, 0.67 };
	resil_request req = { "m", NULL, 0, NULL, NULL, 0, 0 };
	size_t k;

	(void)state;
	for (k = 0; k < 4; k++) {
		fx f;
		int counts[NEP] = { 0 };

		fx_init(&f, 0);
		f.scfg.balance.kind = weighted[k];
		f.rnd.seeded = 1;
		resil_rng_seed(&f.rnd.rng, 5);
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, w050, 3), RESIL_OK);
		count_picks(&f, &req, 300, counts);
		assert_int_equal(counts[1], 300);
		fx_end(&f);
	}
	{
		fx f;
		int counts[NEP] = { 0 };

		fx_init(&f, 0);
		f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, w000, 3), RESIL_OK);
		count_picks(&f, &req, 300, counts);
		assert_int_equal(counts[0], 100);
		assert_int_equal(counts[1], 100);
		assert_int_equal(counts[2], 100);
		fx_end(&f);

		fx_init(&f, 0);
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, w000, 3), RESIL_OK);
		scripted_set(&f.rnd, u, 3);
		assert_string_equal(fx_call(&f, &req), "e0:1");
		assert_string_equal(fx_call(&f, &req), "e1:1");
		assert_string_equal(fx_call(&f, &req), "e2:1");
		fx_end(&f);

		fx_init(&f, 0);
		f.scfg.balance.kind = RESIL_LB_P2C;
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, w050, 3), RESIL_OK);
		scripted_set(
		    &f.rnd, u, 2); /* i = 0, j = floor(0.34 * 2) + 1 */
		assert_string_equal(fx_call(&f, &req), "e0:1");
		fx_end(&f);
	}
}

/* Hold `n` picks of endpoint i open (calls in flight). */
static void
hold(fx *f, size_t i, int n, resil_pick *held, int *nheld)
{
	resil_request req;
	int k;

	memset(&req, 0, sizeof(req));
	req.method = "method1";
	assert_int_equal(
	    resil_selector_route(f->sel, &req, f->c, &f->diag), RESIL_OK);
	for (k = 0; k < n; k++)
		assert_int_equal(resil_selector_pick_at(f->sel, f->c, i,
		                     &held[(*nheld)++], &f->diag),
		    RESIL_OK);
}

/*
 * RandomLoadBalanceTest.testRandomLoadBalanceSelect: 1000 random picks
 * over five equal invokers, each within the average of the average; then
 * invoker i gets i + 1 calls in flight and least-active sends all 1000
 * to invoker1. resil: the same with a seeded generator; least-active
 * makes no draw when there is no tie (DESIGN).
 */
static void
test_dubbo_random_select_then_least_active(void **state)
{
	fx f;
	int counts[NEP] = { 0 }, i, nheld = 0;
	resil_pick held[16];
	resil_request req = { "method1", NULL, 0, NULL, NULL, 0, 0 };
	size_t draws;

	(void)state;
	fx_init(&f, 0);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 42);
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	count_picks(&f, &req, 1000, counts);
	for (i = 0; i < 5; i++)
		assert_true(abs(counts[i] - 200) < 200);
	assert_int_equal(f.rnd.calls, 1000); /* random: one draw a pick */
	fx_end(&f);

	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_LEASTACTIVE;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	for (i = 0; i < 5; i++)
		hold(&f, (size_t)i, i + 1, held, &nheld);
	memset(counts, 0, sizeof(counts));
	draws = f.rnd.calls;
	count_picks(&f, &req, 1000, counts);
	assert_int_equal(counts[0], 1000);
	for (i = 1; i < 5; i++)
		assert_int_equal(counts[i], 0);
	assert_int_equal(f.rnd.calls, draws);
	for (i = 0; i < nheld; i++)
		assert_int_equal(
		    resil_selector_release(f.sel, &held[i]), RESIL_OK);
	fx_end(&f);
}

/*
 * load_balancer_impl_test.cc LeastRequestLoadBalancerTest.Normal: two
 * hosts with 1 and 2 requests active: host 0; with 2 and 1: host 1.
 * Envoy draws its two samples (with repetition); resil's P2C (DESIGN)
 * takes both of two candidates without a draw, the lower load wins, a
 * tie goes to the first.
 */
static void
test_envoy_least_request_normal(void **state)
{
	fx f;
	resil_pick held[6];
	int nheld = 0, i;
	resil_request req = { "m", NULL, 0, NULL, NULL, 0, 0 };

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_P2C;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	assert_string_equal(fx_call(&f, &req), "e0:1");
	hold(&f, 0, 1, held, &nheld);
	hold(&f, 1, 2, held, &nheld);
	assert_string_equal(fx_call(&f, &req), "e0:1");
	assert_int_equal(resil_selector_release(f.sel, &held[0]), RESIL_OK);
	hold(&f, 0, 2, held, &nheld);
	assert_int_equal(resil_selector_release(f.sel, &held[1]), RESIL_OK);
	/* e0 has 2, e1 has 1 now. */
	assert_string_equal(fx_call(&f, &req), "e1:1");
	assert_int_equal(f.rnd.calls, 0);
	for (i = 2; i < nheld; i++)
		assert_int_equal(
		    resil_selector_release(f.sel, &held[i]), RESIL_OK);
	fx_end(&f);
}

/*
 * RandomLoadBalanceTest.testSelectByWeight: weights 1 : 9 : 6, 10000
 * picks all land on the three. resil (DESIGN): offset = floor(u * 16),
 * the first whose running sum exceeds it: u < 1/16 is e0, u < 10/16 e1,
 * else e2; with a seeded generator the shares come out near 1 : 9 : 6.
 */
static void
test_dubbo_random_select_by_weight(void **state)
{
	fx f;
	static const int32_t w[] = { 1, 9, 6 };
	static const double u[] = { 0.0, 0.0624, 0.0625, 0.6249, 0.625,
		0.9999 };
	static const char *const want[] = { "e0:1", "e0:1", "e1:1", "e1:1",
		"e2:1", "e2:1" };
	int counts[NEP] = { 0 };
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };
	size_t i;

	(void)state;
	fx_init(&f, 0);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 7);
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, w, 3), RESIL_OK);
	scripted_set(&f.rnd, u, 6);
	for (i = 0; i < 6; i++)
		assert_string_equal(fx_call(&f, &req), want[i]);
	count_picks(&f, &req, 10000, counts);
	assert_int_equal(counts[0] + counts[1] + counts[2], 10000);
	assert_true(abs(counts[0] - 625) < 150);
	assert_true(abs(counts[1] - 5625) < 300);
	assert_true(abs(counts[2] - 3750) < 300);
	fx_end(&f);
}

/*
 * LeastActiveBalanceTest (Dubbo 3's testSelectByWeight over
 * weightInvokers: weights 1, 9, 6 with invoker3 one call in flight):
 * invoker3 is never selected and the idle two share 1 : 9. resil
 * (DESIGN): the fewest in flight, a tie by the weighted choice over
 * 1 + 9 (one draw only on a tie).
 */
static void
test_dubbo_leastactive_select_by_weight(void **state)
{
	fx f;
	static const int32_t w[] = { 1, 9, 6 };
	static const double u[] = { 0.0999, 0.1, 0.5 };
	static const char *const want[] = { "e0:1", "e1:1", "e1:1" };
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };
	resil_pick held[2];
	int nheld = 0, counts[NEP] = { 0 };
	size_t i;

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_LEASTACTIVE;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, w, 3), RESIL_OK);
	hold(&f, 2, 1, held, &nheld);
	scripted_set(&f.rnd, u, 3);
	for (i = 0; i < 3; i++)
		assert_string_equal(fx_call(&f, &req), want[i]);
	assert_int_equal(f.rnd.calls, 3);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 11);
	count_picks(&f, &req, 10000, counts);
	assert_int_equal(counts[2], 0);
	assert_true(abs(counts[0] - 1000) < 200);
	assert_int_equal(resil_selector_release(f.sel, &held[0]), RESIL_OK);
	/* No tie: no draw. */
	nheld = 0;
	hold(&f, 0, 1, held, &nheld);
	hold(&f, 2, 1, held, &nheld);
	f.rnd.calls = 0;
	assert_string_equal(fx_call(&f, &req), "e1:1");
	assert_int_equal(f.rnd.calls, 0);
	assert_int_equal(resil_selector_release(f.sel, &held[0]), RESIL_OK);
	assert_int_equal(resil_selector_release(f.sel, &held[1]), RESIL_OK);
	fx_end(&f);
}

/* Dubbo's weightInvokersSR: e0 weight 1, e1 weight 9, e2 weight 15 with
 * one call in flight and one success of 5000 ms. */
static void
shortest_setup(fx *f, resil_pick *held)
{
	static const int32_t w[] = { 1, 9, 15 };
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };
	resil_pick p;

	fx_init(f, 0);
	f->scfg.balance.kind = RESIL_LB_SHORTEST;
	f->scfg.balance.shortest_slide = 30000;
	assert_int_equal(fx_start(f), 0);
	assert_int_equal(fx_push_weights(f, w, 3), RESIL_OK);
	assert_int_equal(
	    resil_selector_route(f->sel, &req, f->c, &f->diag), RESIL_OK);
	assert_int_equal(
	    resil_selector_pick_at(f->sel, f->c, 2, &p, &f->diag), RESIL_OK);
	assert_int_equal(resil_selector_report_duration(
	                     f->sel, &p, RESIL_OUTCOME_SUCCESS, 5000),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_pick_at(f->sel, f->c, 2, held, &f->diag), RESIL_OK);
}

/*
 * ShortestResponseLoadBalanceTest.testSelectByWeight: invoker5's estimate
 * (5000 * (1 + 1)) is above invoker1's and invoker2's (no success yet: 0),
 * so it is never selected; the other two share 1 : 9. resil (DESIGN): the
 * same; ties by the weighted choice over 1 + 9: u < 0.1 is e0.
 */
static void
test_dubbo_shortest_select_by_weight(void **state)
{
	fx f;
	resil_pick held;
	static const double u[] = { 0.0, 0.0999, 0.1, 0.9999 };
	static const char *const want[] = { "e0:1", "e0:1", "e1:1", "e1:1" };
	int counts[NEP] = { 0 };
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };
	size_t i;

	(void)state;
	shortest_setup(&f, &held);
	scripted_set(&f.rnd, u, 4);
	for (i = 0; i < 4; i++)
		assert_string_equal(fx_call(&f, &req), want[i]);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 3);
	count_picks(&f, &req, 10000, counts);
	assert_int_equal(counts[2], 0);
	assert_int_equal(counts[0] + counts[1], 10000);
	assert_true(abs(counts[0] - 1000) < 200);
	assert_int_equal(resil_selector_release(f.sel, &held), RESIL_OK);
	fx_end(&f);
}

/*
 * ShortestResponseLoadBalanceTest.testSelectByResponse: invoker5's call
 * ends (active 0, another 5000 ms success) and the slide window is made
 * older than 30 s: every estimate restarts at 0 and the three share
 * 1 : 9 : 15 by weight. resil (DESIGN: the window resets when now - last
 * reset > slide): after 30001 ms every estimate reads 0 and the tie goes
 * by the weighted choice over 25.
 */
static void
test_dubbo_shortest_select_by_response(void **state)
{
	fx f;
	resil_pick held;
	static const double u[] = { 0.0399, 0.04, 0.3999, 0.4, 0.9999 };
	static const char *const want[] = { "e0:1", "e1:1", "e1:1", "e2:1",
		"e2:1" };
	resil_request req = { "test", NULL, 0, NULL, NULL, 0, 0 };
	int counts[NEP] = { 0 };
	size_t i;

	(void)state;
	shortest_setup(&f, &held);
	assert_int_equal(resil_selector_report_duration(
	                     f.sel, &held, RESIL_OUTCOME_SUCCESS, 5000),
	    RESIL_OK);
	/* Inside the window e2 still costs 5000: never chosen. */
	count_picks(&f, &req, 100, counts);
	assert_int_equal(counts[2], 0);
	resil_manual_clock_advance(&f.mc, 30001);
	scripted_set(&f.rnd, u, 5);
	for (i = 0; i < 5; i++)
		assert_string_equal(fx_call(&f, &req), want[i]);
	fx_end(&f);
}

/*
 * ConsistentHashLoadBalanceTest.testConsistentHashLoadBalance: Dubbo 3's
 * ring spreads 10000 runs of one invocation so that no invoker takes more
 * than 1.5 x the average + 1 (it bounds each invoker's load). resil does
 * not bound the load (not decided by DESIGN; listed): one key always maps
 * to one endpoint, so all 10000 runs of ("arg1", "arg2", "arg3") land on
 * one; 10000 distinct keys do stay under Dubbo's bound.
 */
static void
test_dubbo_consistent_hash_spread(void **state)
{
	fx f;
	const char *args[3] = { "arg1", "arg2", "arg3" };
	resil_request req = { "method1", args, 3, NULL, NULL, 0, 0 };
	int counts[NEP] = { 0 }, i, max = 0;
	char key[32];

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_HASH;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	count_picks(&f, &req, 10000, counts);
	for (i = 0; i < 5; i++)
		max = counts[i] > max ? counts[i] : max;
	assert_int_equal(max, 10000);
	memset(counts, 0, sizeof(counts));
	args[0] = key;
	for (i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "user-%d", i);
		counts[ep_index(fx_call(&f, &req))]++;
	}
	for (i = 0; i < 5; i++) {
		assert_true(counts[i] > 0);
		assert_true(counts[i] < 10000 * 3 / 2 / 5 + 1);
	}
	assert_int_equal(f.rnd.calls, 0); /* DESIGN: no draw */
	fx_end(&f);
}

/*
 * LoadBalanceBaseTest's invocations always carry their arguments. A
 * resil_request whose nargs or nparams promises an array it does not
 * have is refused with RESIL_E_INVAL at route, and by the hash balancer
 * at pick (a hash pick over args NULL with nargs 1 crashed before the
 * fix, and so would a condition on arguments[0] or on a request param).
 */
static void
test_dubbo_hash_request_without_arguments_refused(void **state)
{
	fx f;
	resil_condition *rule;
	resil_request req;
	resil_pick p;
	const char *args[1] = { "arg1" };

	(void)state;
	assert_int_equal(
	    resil_condition_parse(&rule,
	        "arguments[0] = a & foo = b => host = x", 0, NULL, NULL),
	    RESIL_OK);
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_HASH;
	f.scfg.conditions = &rule;
	f.scfg.nconditions = 1;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 3), RESIL_OK);
	memset(&req, 0, sizeof(req));
	req.method = "method1";
	req.nargs = 1;
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, &f.diag), RESIL_E_INVAL);
	assert_string_equal(f.diag.msg, "request: args is NULL with nargs 1");
	req.nargs = 0;
	req.nparams = 2;
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, &f.diag), RESIL_E_INVAL);
	assert_string_equal(
	    f.diag.msg, "request: params is NULL with nparams 2");
	/* Routed with a good request, picked with a bad one. */
	req.nparams = 0;
	req.args = args;
	req.nargs = 1;
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, &f.diag), RESIL_OK);
	req.args = NULL;
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, &req, NULL, 0, &p, &f.diag),
	    RESIL_E_INVAL);
	assert_string_equal(f.diag.msg, "request: args is NULL with nargs 1");
	/* No arguments at all: the hash index is out of range. */
	req.nargs = 0;
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, &req, NULL, 0, &p, &f.diag),
	    RESIL_E_INVAL);
	assert_string_equal(f.diag.msg,
	    "loadbalance.hash.arguments: index 0 is out of range for method "
	    "method1 with 0 arguments");
	fx_end(&f);
	resil_condition_free(rule);
}

/*
 * ConsistentHashLoadBalanceTest.testNormalWhenRouterEnabled (apache/dubbo
 * issue 5429): routing the same invokers again must not rebuild a
 * different ring. resil: 100 routes of the same set send a key to the
 * same endpoint; a new member moves only some keys, and every key that
 * moves goes to the new member (DESIGN: only a leaving or arriving
 * endpoint's keys move).
 */
static void
test_dubbo_consistent_hash_stable_across_routes(void **state)
{
	fx f;
	const char *args[1];
	resil_request req = { "method1", args, 1, NULL, NULL, 0, 0 };
	char key[32], first[64][64];
	int i, moved = 0;

	(void)state;
	fx_init(&f, 0);
	f.scfg.balance.kind = RESIL_LB_HASH;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 4), RESIL_OK);
	args[0] = key;
	for (i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(first[i], sizeof(first[i]), "%s", fx_call(&f, &req));
	}
	for (i = 0; i < 6400; i++) {
		snprintf(key, sizeof(key), "k%d", i % 64);
		assert_string_equal(fx_call(&f, &req), first[i % 64]);
	}
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	for (i = 0; i < 64; i++) {
		const char *a;
		snprintf(key, sizeof(key), "k%d", i);
		a = fx_call(&f, &req);
		if (strcmp(a, first[i]) != 0) {
			assert_string_equal(a, "e4:1");
			moved++;
		}
	}
	assert_true(moved > 0 && moved < 32);
	fx_end(&f);
}

/* ------------------------------------------------------------------ */
/* Routers (Dubbo ConditionStateRouterTest, TagStateRouterTest)        */
/* ------------------------------------------------------------------ */

/* Dubbo's three invokers: 10.20.3.3:20880 (serialization=fastjson) and
 * two on the local host (resil keys by address, so the second local one
 * is on port 20881). */
static void
three_hosts(fx *f, resil_condition *const *rules, size_t n)
{
	resil_endpoint_spec s[3];

	fx_init(f, 0);
	f->scfg.conditions = rules;
	f->scfg.nconditions = n;
	f->scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(f), 0);
	s[0] = resil_endpoint_spec_default("10.20.3.3:20880");
	s[0].params = "serialization=fastjson&then_key=a&region=hangzhou";
	s[1] = resil_endpoint_spec_default("127.0.0.1:20880");
	s[2] = resil_endpoint_spec_default("127.0.0.1:20881");
	assert_int_equal(resil_directory_push(f->d, s, 3, &f->diag), RESIL_OK);
}

/* The consumer's host, as Dubbo's consumer URL gives it. */
static const resil_param consumer_local[] = { { "host", "127.0.0.1" },
	{ "when_key", "a" } };
static const resil_param consumer_1111[] = { { "host", "1.1.1.1" } };

/* Route `text` (force as given) for a request from the consumer with
 * params p; the number of candidates (0 for "no provider"). */
static size_t
route_count(const char *text, int force, const resil_param *p, size_t np,
    const char *const *args, size_t nargs, const char *method)
{
	fx f;
	resil_condition *rule;
	resil_request req;
	resil_err err;
	size_t n;

	assert_int_equal(
	    resil_condition_parse(&rule, text, force, NULL, NULL), RESIL_OK);
	three_hosts(&f, &rule, 1);
	memset(&req, 0, sizeof(req));
	req.method = method != NULL ? method : "getFoo";
	req.params = p;
	req.nparams = np;
	req.args = args;
	req.nargs = nargs;
	err = resil_selector_route(f.sel, &req, f.c, &f.diag);
	n = err == RESIL_OK ? resil_candidates_count(f.c) : 0;
	if (err != RESIL_OK)
		assert_int_equal(err, RESIL_E_NO_PROVIDER);
	fx_end(&f);
	resil_condition_free(rule);
	return n;
}

/* A rule matches the request's WHEN side iff its forced THEN (which no
 * endpoint matches) empties the set. */
static int
matches_when(const char *when, const resil_param *p, size_t np)
{
	char text[256];

	snprintf(text, sizeof(text), "%s => host = 1.2.3.4", when);
	return route_count(text, 1, p, np, NULL, 0, NULL) == 0;
}

/*
 * ConditionStateRouterTest.testRoute_matchWhen, consumer 1.1.1.1: an
 * empty WHEN matches; `=` lists, `!=`, `*` suffix wildcards and `&`
 * combine as in Dubbo (DESIGN).
 */
static void
test_dubbo_condition_match_when(void **state)
{
	const resil_param *p = consumer_1111;

	(void)state;
	assert_true(matches_when("", p, 1));
	assert_true(matches_when("host = 2.2.2.2,1.1.1.1,3.3.3.3", p, 1));
	assert_false(matches_when(
	    "host = 2.2.2.2,1.1.1.1,3.3.3.3 & host !=1.1.1.1", p, 1));
	assert_true(matches_when(
	    "host !=4.4.4.4 & host = 2.2.2.2,1.1.1.1,3.3.3.3", p, 1));
	assert_true(matches_when(
	    "host !=4.4.4.* & host = 2.2.2.2,1.1.1.1,3.3.3.3", p, 1));
	assert_false(matches_when(
	    "host = 2.2.2.2,1.1.1.*,3.3.3.3 & host != 1.1.1.1", p, 1));
	assert_true(matches_when(
	    "host = 2.2.2.2,1.1.1.*,3.3.3.3 & host != 1.1.1.2", p, 1));
	/* testRoute_methodRoute, resil's `method` key (Dubbo's `methods`
	 * reads the consumer URL's list; resil reads the call's method). */
	assert_true(matches_when("method = getFoo", p, 1));
	assert_false(matches_when("method = getFoo & host != 1.1.1.1", p, 1));
	assert_true(matches_when("method = getFoo & host = 1.1.1.1", p, 1));
}

/*
 * ConditionStateRouterTest.testRoute_matchFilter: six forced rules from
 * the local consumer over the three invokers give 1, 0, 0, 1, 2 and 1
 * candidates.
 */
static void
test_dubbo_condition_match_filter(void **state)
{
	const resil_param *p = consumer_local;

	(void)state;
	assert_int_equal(route_count("host = 127.0.0.1 => host = 10.20.3.3", 1,
	                     p, 1, NULL, 0, NULL),
	    1);
	assert_int_equal(route_count("host = 127.0.0.1 => host = 10.20.3.* & "
	                             "host != 10.20.3.3",
	                     1, p, 1, NULL, 0, NULL),
	    0);
	assert_int_equal(route_count("host = 127.0.0.1 => host = 10.20.3.3  & "
	                             "host != 10.20.3.3",
	                     1, p, 1, NULL, 0, NULL),
	    0);
	assert_int_equal(route_count("host = 127.0.0.1 => host = "
	                             "10.20.3.2,10.20.3.3,10.20.3.4",
	                     1, p, 1, NULL, 0, NULL),
	    1);
	assert_int_equal(route_count("host = 127.0.0.1 => host != 10.20.3.3",
	                     1, p, 1, NULL, 0, NULL),
	    2);
	assert_int_equal(
	    route_count("host = 127.0.0.1 => serialization = fastjson", 1, p,
	        1, NULL, 0, NULL),
	    1);
	/* testRoute_methodRoute's filter part. */
	assert_int_equal(route_count("host = 127.0.0.1 & method = getFoo => "
	                             "host = 10.20.3.3",
	                     1, p, 1, NULL, 0, "getFoo"),
	    1);
	assert_int_equal(
	    route_count("host = 127.0.0.1 & method = unvalidmethod "
	                "=> host = 10.20.3.3",
	        1, p, 1, NULL, 0, "getFoo"),
	    3);
}

/*
 * ConditionStateRouterTest.testRoute_ReturnFalse / _ReturnEmpty /
 * _ReturnAll / _HostFilter / _Empty_HostFilter / _False_HostFilter /
 * _NoForce / _Force: `=> false` and an empty THEN leave nothing; `true =>`
 * and an empty WHEN match every request; the host filter keeps the two
 * local invokers in order; a THEN nothing matches leaves the set
 * unchanged unless forced (DESIGN).
 */
static void
test_dubbo_condition_return_and_filters(void **state)
{
	const resil_param *p = consumer_local;
	fx f;
	resil_condition *rule;
	resil_request req;
	resil_candidate c0, c1;

	(void)state;
	assert_int_equal(
	    route_count("host = 127.0.0.1 => false", 0, p, 1, NULL, 0, NULL),
	    0);
	assert_int_equal(
	    route_count("host = 127.0.0.1 => ", 0, p, 1, NULL, 0, NULL), 0);
	assert_int_equal(route_count("host = 127.0.0.1 => host = 127.0.0.1", 0,
	                     p, 1, NULL, 0, NULL),
	    2);
	assert_int_equal(
	    route_count(" => host = 127.0.0.1", 0, p, 1, NULL, 0, NULL), 2);
	assert_int_equal(
	    route_count("true => host = 127.0.0.1", 0, p, 1, NULL, 0, NULL),
	    2);
	assert_int_equal(route_count("host = 127.0.0.1 => host = 1.2.3.4", 0,
	                     p, 1, NULL, 0, NULL),
	    3);
	assert_int_equal(route_count("host = 127.0.0.1 => host = 1.2.3.4", 1,
	                     p, 1, NULL, 0, NULL),
	    0);
	/* The host filter keeps the two local ones, in directory order. */
	assert_int_equal(
	    resil_condition_parse(
	        &rule, "host = 127.0.0.1 => host = 127.0.0.1", 0, NULL, NULL),
	    RESIL_OK);
	three_hosts(&f, &rule, 1);
	memset(&req, 0, sizeof(req));
	req.params = p;
	req.nparams = 1;
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, &f.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 2);
	assert_int_equal(resil_candidates_get(f.c, 0, &c0), RESIL_OK);
	assert_int_equal(resil_candidates_get(f.c, 1, &c1), RESIL_OK);
	assert_string_equal(c0.address, "127.0.0.1:20880");
	assert_string_equal(c1.address, "127.0.0.1:20881");
	fx_end(&f);
	resil_condition_free(rule);
}

/*
 * ConditionStateRouterTest.testRoute_Arguments: `arguments[0] = a`,
 * forced to a host nobody has: a null argument leaves all 3, "a" leaves
 * none; `arguments = b` (no index) matches nothing: all 3. Dubbo's
 * `arguments[10].inner = a` also matches nothing (accepted, the path
 * ignored: DESIGN, turn 3), and `arguments[0].inner = 1` reads argument 0.
 * testRoute_Key_Not_Exist: a key missing on an endpoint excludes it (0
 * left); a key missing on the WHEN side does not match (3 left) (DESIGN).
 * testRoute_Multiple_Conditions: `application=consumer_app&arguments[0]=a`
 * (the consumer's application is a request param) needs both.
 */
static void
test_dubbo_condition_arguments_and_missing_keys(void **state)
{
	const resil_param *p = consumer_local;
	const char *null_arg[1] = { NULL };
	const char *a_arg[1] = { "a" };

	(void)state;
	assert_int_equal(route_count("arguments[0] = a => host = 1.2.3.4", 1,
	                     p, 1, null_arg, 1, NULL),
	    3);
	assert_int_equal(route_count("arguments[0] = a => host = 1.2.3.4", 1,
	                     p, 1, a_arg, 1, NULL),
	    0);
	assert_int_equal(route_count("arguments = b => host = 1.2.3.4", 1, p,
	                     1, a_arg, 1, NULL),
	    3);
	/* Accepted, as in Dubbo: index 10 is missing, no match. */
	assert_int_equal(
	    route_count("arguments[10].inner = a => host = 1.2.3.4", 1, p, 1,
	        a_arg, 1, NULL),
	    3);
	/* The path is ignored: argument 0 is read whole. */
	assert_int_equal(
	    route_count("arguments[0].inner = a => host = 1.2.3.4", 1, p, 1,
	        a_arg, 1, NULL),
	    0);
	assert_int_equal(
	    route_count("when_key=a => not_exist_then_key = any_value", 1, p,
	        2, NULL, 0, NULL),
	    0);
	assert_int_equal(route_count("not_exist_when_key=a => then_key = a", 1,
	                     p, 2, NULL, 0, NULL),
	    3);
	/* testRoute_Multiple_Conditions: both WHEN conditions must hold. */
	{
		static const resil_param app[] = { { "application",
		    "consumer_app" } };
		static const resil_param other[] = { { "application",
		    "another_consumer_app" } };
		const char *text =
		    "application=consumer_app&arguments[0]=a => "
		    "host = 127.0.0.1";

		assert_int_equal(
		    route_count(text, 1, app, 1, a_arg, 1, NULL), 2);
		assert_int_equal(
		    route_count(text, 1, other, 1, a_arg, 1, NULL), 3);
	}
}

/*
 * ConditionStateRouterTest.testRoute_Placeholder (`host = $host`: the
 * consumer's own host, the request's param host in resil) keeps the 2
 * local invokers; testRoute_Attachments (`attachments[foo]`) reads the
 * request's params, which carry the call's attachments (issue 40.4; before
 * it resil read `$host` literally and refused `attachments[..]`).
 */
static void
test_dubbo_condition_placeholder_and_attachments(void **state)
{
	static const resil_param foo_a[] = { { "foo", "a" } };
	resil_condition *rule = NULL;
	resil_diag d;

	(void)state;
	assert_int_equal(route_count("host = 127.0.0.1 => host = $host", 0,
	                     consumer_local, 1, NULL, 0, NULL),
	    2);
	assert_int_equal(
	    resil_condition_parse(
	        &rule, "attachments[foo] = a => host = 1.2.3.4", 1, NULL, &d),
	    RESIL_OK);
	resil_condition_free(rule);
	assert_int_equal(route_count("attachments[foo] = a => host = 1.2.3.4",
	                     1, foo_a, 1, NULL, 0, NULL),
	    0);
	assert_int_equal(route_count("attachments[foo] = b => host = 1.2.3.4",
	                     1, foo_a, 1, NULL, 0, NULL),
	    3);
	assert_int_equal(route_count("foo = a => host = 1.2.3.4", 1, NULL, 0,
	                     NULL, 0, NULL),
	    3);
	assert_int_equal(route_count("foo = a => host = 1.2.3.4", 1, foo_a, 1,
	                     NULL, 0, NULL),
	    0);
	assert_int_equal(route_count("foo = a => region = hangzhou", 1, foo_a,
	                     1, NULL, 0, NULL),
	    1);
}

/* Tags: e0 tag2, e1 and e2 untagged (TagStateRouterTest's urls). */
static size_t
tag_count(
    const char *tag, int force, const char *e0tag, char *first, size_t len)
{
	fx f;
	resil_endpoint_spec s[3];
	resil_request req;
	resil_candidate c;
	size_t n = 0;

	fx_init(&f, 0);
	f.scfg.tag_force = force;
	assert_int_equal(fx_start(&f), 0);
	s[0] = resil_endpoint_spec_default("127.0.0.1:7777");
	s[0].tag = e0tag;
	s[1] = resil_endpoint_spec_default("127.0.0.1:7778");
	s[2] = resil_endpoint_spec_default("127.0.0.1:7779");
	assert_int_equal(resil_directory_push(f.d, s, 3, &f.diag), RESIL_OK);
	memset(&req, 0, sizeof(req));
	req.tag = tag;
	first[0] = '\0';
	if (resil_selector_route(f.sel, &req, f.c, &f.diag) == RESIL_OK) {
		n = resil_candidates_count(f.c);
		assert_int_equal(resil_candidates_get(f.c, 0, &c), RESIL_OK);
		snprintf(first, len, "%s", c.address);
	} else {
		snprintf(first, len, "%s", f.diag.msg);
	}
	fx_end(&f);
	return n;
}

/*
 * TagStateRouterTest.testTagRoutePickInvokers: a request tagged tag2
 * gets the one invoker tagged tag2. Dubbo's static-tag rules, as DESIGN
 * has them: a tag nobody has falls back to the untagged ones (none with
 * force); an untagged request gets the untagged ones only.
 * .testTagsRoutePickInvokers (an invoker tagged "tag2,tag1"): an
 * endpoint's tag is a comma list, so a tag2 request gets it (issue 40.4;
 * before it "tag2,tag1" was a tag of its own).
 */
static void
test_dubbo_tag_route_pick_invokers(void **state)
{
	char first[256];

	(void)state;
	assert_int_equal(
	    tag_count("tag2", 0, "tag2", first, sizeof(first)), 1);
	assert_string_equal(first, "127.0.0.1:7777");
	assert_int_equal(tag_count("red", 0, "tag2", first, sizeof(first)), 2);
	assert_string_equal(first, "127.0.0.1:7778");
	assert_int_equal(tag_count("red", 1, "tag2", first, sizeof(first)), 0);
	assert_string_equal(first,
	    "Failed to invoke the method  in the service S. No provider "
	    "available for the service S: 3 endpoints, 0 after routers "
	    "(tag=red removed 3)");
	assert_int_equal(tag_count(NULL, 0, "tag2", first, sizeof(first)), 2);
	assert_string_equal(first, "127.0.0.1:7778");
	assert_int_equal(
	    tag_count("tag2", 0, "tag2,tag1", first, sizeof(first)), 1);
	assert_string_equal(first, "127.0.0.1:7777");
	assert_int_equal(
	    tag_count("tag1", 0, "tag2,tag1", first, sizeof(first)), 1);
	assert_string_equal(first, "127.0.0.1:7777");
	assert_int_equal(
	    tag_count(NULL, 0, "tag2,tag1", first, sizeof(first)), 2);
	assert_string_equal(first, "127.0.0.1:7778");
}

/* ------------------------------------------------------------------ */
/* Outlier detection (Envoy outlier_detection_impl_test.cc)            */
/* ------------------------------------------------------------------ */

/* Report `n` outcomes o for address a at the current time. */
static void
load_rq(fx *f, const char *a, int n, resil_outcome o)
{
	resil_request req;
	resil_candidate c;
	resil_pick p;
	size_t i, k;
	int j;

	memset(&req, 0, sizeof(req));
	for (j = 0; j < n; j++) {
		/* The fixtures' panic threshold of 100 keeps an ejected
		 * endpoint routable, so it can be reached by position. */
		assert_int_equal(
		    resil_selector_route(f->sel, &req, f->c, &f->diag),
		    RESIL_OK);
		k = resil_candidates_count(f->c);
		for (i = 0; i < k; i++) {
			assert_int_equal(
			    resil_candidates_get(f->c, i, &c), RESIL_OK);
			if (strcmp(c.address, a) == 0)
				break;
		}
		assert_true(i < k);
		assert_int_equal(
		    resil_selector_pick_at(f->sel, f->c, i, &p, &f->diag),
		    RESIL_OK);
		assert_int_equal(
		    resil_selector_report(f->sel, &p, o), RESIL_OK);
	}
}

static int
ejected(fx *f, const char *a)
{
	resil_endpoint_state s;

	assert_int_equal(resil_directory_get_state(f->d, a, &s), RESIL_OK);
	return s.ejected;
}

/* Envoy's fixture: hosts tcp://127.0.0.1:80.. ; consecutive_5xx 5,
 * interval 10 s, the given base and max ejection, max_ejection_percent;
 * panic 100 so that an ejected host stays routable for load_rq(). */
static void
envoy_hosts(fx *f, size_t n, uint64_t base, uint32_t pct)
{
	resil_endpoint_spec s[8];
	static char a[8][32];
	size_t i;

	fx_init(f, 0);
	f->dcfg.outlier.consecutive_failures = 5;
	f->dcfg.outlier.base_ejection = base;
	f->dcfg.outlier.max_ejection = 300000;
	f->dcfg.outlier.interval = 10000;
	f->dcfg.outlier.max_ejection_pct = pct;
	f->scfg.panic_threshold_pct = 100;
	assert_int_equal(fx_start(f), 0);
	for (i = 0; i < n; i++) {
		snprintf(a[i], sizeof(a[i]), "127.0.0.1:%zu", 80 + i);
		s[i] = resil_endpoint_spec_default(a[i]);
	}
	assert_int_equal(resil_directory_push(f->d, s, n, &f->diag), RESIL_OK);
	f->nev = 0;
}

#define H0 "127.0.0.1:80"
#define H1 "127.0.0.1:81"
#define H2 "127.0.0.1:82"

/*
 * OutlierDetectorImplTest.BasicFlow5xxViaHttpCodes: 500, 200, then four
 * 500s do not eject (the 200 ended the streak); the fifth at t=0 does.
 * At 9999 it is still out; Envoy brings it back at its 30001 sweep, resil
 * exactly at ejected_at + 30000 (DESIGN). Four more 500s and one at 40000
 * eject it again: Envoy's multiplier is still 2 there (60 s: its interval
 * timer did not run between the return and 40000); resil's k dropped by
 * one for the full interval from 30000 to 40000 (DESIGN), so 30 s again.
 * Removing the host ends its ejection. Envoy's default
 * max_ejection_percent (10) ejects one of two hosts (it compares the
 * share before the ejection); resil's cap counts the new one
 * (100 * (0 + 1) <= 10 * 2 fails: DESIGN), so this port sets 50.
 */
static void
test_envoy_basic_flow_5xx(void **state)
{
	fx f;

	(void)state;
	envoy_hosts(&f, 2, 30000, 50);
	load_rq(&f, H0, 1, RESIL_OUTCOME_FAILURE);
	load_rq(&f, H0, 1, RESIL_OUTCOME_SUCCESS);
	load_rq(&f, H0, 4, RESIL_OUTCOME_FAILURE);
	assert_false(ejected(&f, H0));
	load_rq(&f, H0, 1, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H0));
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	assert_string_equal(f.ev[0].address, H0);
	assert_int_equal(f.ev[0].time, 0);
	assert_int_equal(f.ev[0].duration, 30000);
	assert_int_equal(f.ev[0].ejections, 1);
	resil_manual_clock_set(&f.mc, 9999);
	assert_true(ejected(&f, H0));
	resil_manual_clock_set(&f.mc, 29999);
	assert_true(ejected(&f, H0));
	resil_manual_clock_set(&f.mc, 30001);
	assert_false(ejected(&f, H0));
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_RETURNED);
	assert_int_equal(f.ev[1].time, 30000); /* the exact return time */
	load_rq(&f, H0, 4, RESIL_OUTCOME_FAILURE);
	resil_manual_clock_set(&f.mc, 40000);
	load_rq(&f, H0, 1, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H0));
	assert_int_equal(f.nev, 3);
	assert_int_equal(f.ev[2].time, 40000);
	assert_int_equal(f.ev[2].duration, 30000);
	assert_int_equal(f.ev[2].ejections, 1);
	assert_false(ejected(&f, H1));
	assert_int_equal(resil_directory_remove(f.d, H0, &f.diag), RESIL_OK);
	assert_int_equal(f.ev[f.nev - 1].type, RESIL_ENDPOINT_REMOVED);
	fx_end(&f);
}

/*
 * OutlierDetectorImplTest.EjectTimeBackoff: base 10 s, one host at 100%.
 * Ejections at 0, 10 and 30 s last 10, 20 and 30 s (returns at 10, 30 and
 * 60 s); two healthy intervals (60..80 s) bring the next one, at 80 s,
 * down to 20 s (return at 100 s); fifty healthy intervals bring the one
 * at 610 s back to 10 s (return at 620 s). resil agrees at every step
 * (DESIGN: min(base * k, max), k drops by one per full interval
 * un-ejected, return exactly at ejected_at + duration).
 */
static void
test_envoy_eject_time_backoff(void **state)
{
	static const struct {
		uint64_t at, dur;
		uint32_t k;
	} step[] = { { 0, 10000, 1 }, { 10000, 20000, 2 }, { 30000, 30000, 3 },
		{ 80000, 20000, 2 }, { 610000, 10000, 1 } };
	fx f;
	resil_endpoint_state s;
	size_t i;

	(void)state;
	envoy_hosts(&f, 1, 10000, 100);
	for (i = 0; i < sizeof(step) / sizeof(step[0]); i++) {
		resil_manual_clock_set(&f.mc, step[i].at);
		load_rq(&f, H0, 5, RESIL_OUTCOME_FAILURE);
		assert_int_equal(
		    resil_directory_get_state(f.d, H0, &s), RESIL_OK);
		assert_true(s.ejected);
		assert_int_equal(s.ejections, step[i].k);
		assert_int_equal(s.ejected_until, step[i].at + step[i].dur);
		resil_manual_clock_set(&f.mc, step[i].at + step[i].dur - 1);
		assert_true(ejected(&f, H0));
		resil_manual_clock_set(&f.mc, step[i].at + step[i].dur);
		assert_false(ejected(&f, H0));
	}
	assert_int_equal(f.nev, 10); /* five EJECTED, five RETURNED */
	fx_end(&f);
}

/*
 * OutlierDetectorImplTest.MaxEjectionPercentage: 50% over 3 hosts, all
 * three fail 5 times: only the first is ejected. .MaxEjectionPercentage
 * SingleHost: 90% never ejects a lone host. resil: the same (DESIGN:
 * 100 * (ejected + 1) <= pct * N).
 */
static void
test_envoy_max_ejection_percentage(void **state)
{
	fx f;

	(void)state;
	envoy_hosts(&f, 3, 30000, 50);
	load_rq(&f, H0, 5, RESIL_OUTCOME_FAILURE);
	load_rq(&f, H1, 5, RESIL_OUTCOME_FAILURE);
	load_rq(&f, H2, 5, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H0));
	assert_false(ejected(&f, H1));
	assert_false(ejected(&f, H2));
	assert_int_equal(f.nev, 1);
	fx_end(&f);

	envoy_hosts(&f, 1, 30000, 90);
	load_rq(&f, H0, 5, RESIL_OUTCOME_FAILURE);
	assert_false(ejected(&f, H0));
	assert_int_equal(f.nev, 0);
	fx_end(&f);
}

/*
 * OutlierDetectorImplTest.Consecutive_5xxAlreadyEjected: a 200 and five
 * more 500s while the host is out do not eject it a second time.
 */
static void
test_envoy_consecutive_5xx_already_ejected(void **state)
{
	fx f;
	resil_endpoint_state s;

	(void)state;
	envoy_hosts(&f, 1, 30000, 100);
	load_rq(&f, H0, 5, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H0));
	resil_manual_clock_set(&f.mc, 100);
	load_rq(&f, H0, 1, RESIL_OUTCOME_SUCCESS);
	load_rq(&f, H0, 5, RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_directory_get_state(f.d, H0, &s), RESIL_OK);
	assert_true(s.ejected);
	assert_int_equal(s.ejections, 1);
	assert_int_equal(s.ejected_until, 30000);
	assert_int_equal(f.nev, 1);
	fx_end(&f);
}

/*
 * OutlierDetectorImplTest's consecutive_5xx counts 5xx only: a 4xx (the
 * callee's own answer) is a success for it and ends the streak. resil
 * (DESIGN): a business error is not counted and ends a streak; IGNORED
 * does neither. Four failures, a business error, four failures: not
 * ejected; an ignored outcome and the fifth failure: ejected.
 */
static void
test_envoy_4xx_ends_the_5xx_streak(void **state)
{
	fx f;
	resil_endpoint_state s;

	(void)state;
	envoy_hosts(&f, 1, 30000, 100);
	load_rq(&f, H0, 4, RESIL_OUTCOME_FAILURE);
	load_rq(&f, H0, 1, RESIL_OUTCOME_BUSINESS);
	load_rq(&f, H0, 4, RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_directory_get_state(f.d, H0, &s), RESIL_OK);
	assert_false(s.ejected);
	assert_int_equal(s.streak, 4);
	load_rq(&f, H0, 1, RESIL_OUTCOME_IGNORED);
	assert_int_equal(resil_directory_get_state(f.d, H0, &s), RESIL_OK);
	assert_int_equal(s.streak, 4);
	load_rq(&f, H0, 1, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H0));
	assert_int_equal(f.nev, 1);
	fx_end(&f);
}

/*
 * OutlierDetectorImplTest.RemoveWhileEjected: a host ejected and then
 * removed from the cluster leaves no active ejection, and the sweep after
 * its ejection time has nothing to bring back. resil: the removal is a
 * REMOVED event and no RETURNED ever follows; the address added again is
 * a new endpoint (new id, not ejected, k = 0), and the removed one no
 * longer counts against max_ejection_pct (50% of two: H1 can now go).
 */
static void
test_envoy_remove_while_ejected(void **state)
{
	fx f;
	resil_endpoint_state s;
	resil_endpoint_spec sp = resil_endpoint_spec_default(H0);
	uint64_t id0;
	size_t i;

	(void)state;
	envoy_hosts(&f, 3, 30000, 50);
	load_rq(&f, H0, 5, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H0));
	load_rq(&f, H1, 5, RESIL_OUTCOME_FAILURE);
	assert_false(ejected(&f, H1)); /* 100 * 2 > 50 * 3 */
	id0 = id_of(&f, H0);
	assert_int_equal(resil_directory_remove(f.d, H0, &f.diag), RESIL_OK);
	assert_int_equal(f.ev[f.nev - 1].type, RESIL_ENDPOINT_REMOVED);
	/* Two left, none ejected: H1's streak restarted after the
	 * detection the share prevented (DESIGN), so its next five
	 * failures eject it (100 * 1 <= 50 * 2). */
	load_rq(&f, H1, 4, RESIL_OUTCOME_FAILURE);
	assert_false(ejected(&f, H1));
	load_rq(&f, H1, 1, RESIL_OUTCOME_FAILURE);
	assert_true(ejected(&f, H1));
	resil_manual_clock_set(&f.mc, 30001);
	assert_int_equal(resil_directory_add(f.d, &sp, &f.diag), RESIL_OK);
	assert_int_equal(resil_directory_get_state(f.d, H0, &s), RESIL_OK);
	assert_false(s.ejected);
	assert_int_equal(s.ejections, 0);
	assert_true(s.id != id0);
	for (i = 0; i < f.nev; i++)
		if (f.ev[i].type == RESIL_ENDPOINT_RETURNED)
			assert_string_not_equal(f.ev[i].address, H0);
	fx_end(&f);
}

/*
 * OutlierDetectorImplTest.DetectorStaticConfigiInvalidMaxEjectTime: a
 * max_ejection_time (3 s) below base_ejection_time (10 s) is refused.
 * .DetectorStaticConfigBaseLargerThanMaxNoMax: Envoy accepts base 400 s
 * with max unset and uses max = base; resil has no "unset" (its default
 * max is 300 s) and refuses it too (DESIGN: an ejection maximum below
 * its base is refused). Ejection growth stops at the max: base 10 s, max
 * 25 s gives 10, 20, 25 s.
 */
static void
test_envoy_max_ejection_time(void **state)
{
	resil_directory_config dc;
	resil_diag d;
	fx f;
	resil_endpoint_state s;
	uint64_t t = 0;
	int i;
	static const uint64_t dur[] = { 10000, 20000, 25000, 25000 };

	(void)state;
	resil_directory_config_init(&dc);
	dc.outlier.base_ejection = 10000;
	dc.outlier.max_ejection = 3000;
	assert_int_equal(
	    resil_directory_config_validate(&dc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "outlier.max_ejection: 3000 is below outlier.base_ejection "
	    "(10000)");
	dc.outlier.base_ejection = 400 * RESIL_NS_PER_SEC;
	dc.outlier.max_ejection = 300 * RESIL_NS_PER_SEC;
	assert_int_equal(
	    resil_directory_config_validate(&dc, &d), RESIL_E_INVAL);

	fx_init(&f, 0);
	f.dcfg.outlier.consecutive_failures = 5;
	f.dcfg.outlier.base_ejection = 10000;
	f.dcfg.outlier.max_ejection = 25000;
	f.dcfg.outlier.interval = 10000;
	f.dcfg.outlier.max_ejection_pct = 100;
	f.scfg.panic_threshold_pct = 100;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 1), RESIL_OK);
	for (i = 0; i < 4; i++) {
		resil_manual_clock_set(&f.mc, t);
		load_rq(&f, "e0:1", 5, RESIL_OUTCOME_FAILURE);
		assert_int_equal(
		    resil_directory_get_state(f.d, "e0:1", &s), RESIL_OK);
		assert_int_equal(s.ejected_until, t + dur[i]);
		assert_int_equal(s.ejections, (uint32_t)i + 1);
		t += dur[i];
	}
	fx_end(&f);
}

/* ------------------------------------------------------------------ */
/* Panic and zones (Envoy load_balancer_impl_test.cc)                 */
/* ------------------------------------------------------------------ */

/* n endpoints e0:1..; zones[i] (NULL: none); one failure ejects for
 * 30 s; every endpoint may be ejected. */
static void
panic_hosts(fx *f, size_t n, const char *const *zones, uint32_t panic)
{
	resil_endpoint_spec s[8];
	static char a[8][32];
	size_t i;

	fx_init(f, 0);
	f->dcfg.outlier.consecutive_failures = 1;
	f->dcfg.outlier.base_ejection = 30000;
	f->dcfg.outlier.max_ejection = 300000;
	f->dcfg.outlier.interval = 10000;
	f->dcfg.outlier.max_ejection_pct = 100;
	f->scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	f->scfg.panic_threshold_pct = panic;
	assert_int_equal(fx_start(f), 0);
	for (i = 0; i < n; i++) {
		snprintf(a[i], sizeof(a[i]), "e%zu:1", i);
		s[i] = resil_endpoint_spec_default(a[i]);
		s[i].zone = zones != NULL ? zones[i] : NULL;
	}
	assert_int_equal(resil_directory_push(f->d, s, n, &f->diag), RESIL_OK);
}

/* Eject address a (still healthy, so routed) with one failure. */
static void
eject(fx *f, const char *a)
{
	resil_request req;
	resil_candidate c;
	resil_pick p;
	size_t i;

	memset(&req, 0, sizeof(req));
	assert_int_equal(
	    resil_selector_route(f->sel, &req, f->c, &f->diag), RESIL_OK);
	for (i = 0; i < resil_candidates_count(f->c); i++) {
		assert_int_equal(resil_candidates_get(f->c, i, &c), RESIL_OK);
		if (strcmp(c.address, a) == 0)
			break;
	}
	assert_true(i < resil_candidates_count(f->c));
	assert_int_equal(
	    resil_selector_pick_at(f->sel, f->c, i, &p, &f->diag), RESIL_OK);
	assert_int_equal(
	    resil_selector_report(f->sel, &p, RESIL_OUTCOME_FAILURE),
	    RESIL_OK);
	assert_true(ejected(f, a));
}

static size_t
routed(fx *f, resil_route_stats *st)
{
	resil_request req;
	resil_err err;

	memset(&req, 0, sizeof(req));
	err = resil_selector_route(f->sel, &req, f->c, &f->diag);
	resil_candidates_stats(f->c, st);
	return err == RESIL_OK ? resil_candidates_count(f->c) : 0;
}

/*
 * RoundRobinLoadBalancerTest.MaxUnhealthyPanic: 2 healthy hosts of 6
 * (33% < the 50% threshold): Envoy balances over all 6 (picks 0, 1, 2);
 * with 4 of 6 healthy it balances over the healthy ones again. resil
 * (DESIGN): the same panic rule and the same first three picks. After
 * the hosts come back resil's round robin keeps each address's counter
 * (DESIGN), so its next two picks are e3 twice where Envoy, rebuilding
 * its schedule, picks healthy 0 and 1.
 */
static void
test_envoy_max_unhealthy_panic(void **state)
{
	fx f;
	resil_route_stats st;
	resil_request req;
	char seq[16] = "";
	int i;

	(void)state;
	panic_hosts(&f, 6, NULL, 50);
	eject(&f, "e2:1");
	eject(&f, "e3:1");
	resil_manual_clock_set(&f.mc, 10000);
	eject(&f, "e4:1");
	eject(&f, "e5:1");
	assert_int_equal(routed(&f, &st), 6);
	assert_int_equal(st.panic, 1);
	assert_int_equal(st.removed_health, 0);
	memset(&req, 0, sizeof(req));
	for (i = 0; i < 3; i++)
		seq[i] = fx_call(&f, &req)[1];
	seq[3] = '\0';
	assert_string_equal(seq, "012");
	/* e2 and e3 return at 30 s, e4 and e5 are out until 40 s: 4 of 6. */
	resil_manual_clock_set(&f.mc, 35000);
	assert_int_equal(routed(&f, &st), 4);
	assert_int_equal(st.panic, 0);
	assert_int_equal(st.removed_health, 2);
	for (i = 0; i < 2; i++)
		seq[i] = fx_call(&f, &req)[1];
	seq[2] = '\0';
	assert_string_equal(seq, "33");
	fx_end(&f);
}

/*
 * The panic threshold's boundary (Envoy: "healthy_panic_threshold",
 * percent of healthy hosts below which all are used): resil (DESIGN)
 * panics when 100 * healthy / routed < threshold, strictly, and 0 turns
 * panic off. One of two healthy is 50%: no panic at 50, panic at 51.
 */
static void
test_envoy_panic_threshold_boundary(void **state)
{
	fx f;
	resil_route_stats st;

	(void)state;
	panic_hosts(&f, 2, NULL, 50);
	eject(&f, "e0:1");
	assert_int_equal(routed(&f, &st), 1);
	assert_int_equal(st.panic, 0);
	assert_int_equal(st.removed_health, 1);
	eject(&f, "e1:1");
	assert_int_equal(routed(&f, &st), 2);
	assert_int_equal(st.panic, 1);
	fx_end(&f);

	panic_hosts(&f, 2, NULL, 51);
	eject(&f, "e0:1");
	assert_int_equal(routed(&f, &st), 2);
	assert_int_equal(st.panic, 1);
	fx_end(&f);

	panic_hosts(&f, 2, NULL, 0);
	eject(&f, "e0:1");
	eject(&f, "e1:1");
	assert_int_equal(routed(&f, &st), 0);
	assert_int_equal(st.panic, 0);
	assert_string_equal(f.diag.msg,
	    "Failed to invoke the method  in the service S. No provider "
	    "available for the service S: 2 endpoints, 0 after routers "
	    "(health removed 2)");
	fx_end(&f);
}

/*
 * Envoy's panic sends requests to unhealthy hosts too (they may answer).
 * resil's panic routes every candidate, breaker-open ones included
 * (DESIGN), but an endpoint's own breaker still refuses the call at the
 * pick, so with every breaker forced open the route gives 2 candidates
 * and the pick RESIL_E_UNAVAILABLE; every standalone strategy returns
 * that error, failsafe too (it is neither "no provider" nor a failure of
 * a call; not decided by DESIGN, listed).
 */
static void
test_envoy_panic_with_open_breakers(void **state)
{
	static const resil_cluster_strategy all[] = { RESIL_CLUSTER_FAILOVER,
		RESIL_CLUSTER_FAILFAST, RESIL_CLUSTER_FAILSAFE,
		RESIL_CLUSTER_FAILBACK };
	resil_breaker_config bc;
	resil_route_stats st;
	size_t k;

	(void)state;
	for (k = 0; k < 4; k++) {
		cx c;
		resil_cluster_result r;

		cx_init(&c, all[k], 0);
		fx_end(&c.f);
		fx_init(&c.f, 0);
		resil_breaker_config_init(&bc);
		c.f.dcfg.endpoint_breaker = &bc;
		c.f.dcfg.outlier.max_ejection_pct = 0;
		c.f.scfg.service = "StockService";
		assert_int_equal(fx_start(&c.f), 0);
		assert_int_equal(fx_push_weights(&c.f, NULL, 2), RESIL_OK);
		assert_int_equal(resil_breaker_force_open(
		                     resil_directory_breaker(c.f.d, "e0:1")),
		    RESIL_OK);
		assert_int_equal(resil_breaker_force_open(
		                     resil_directory_breaker(c.f.d, "e1:1")),
		    RESIL_OK);
		assert_int_equal(routed(&c.f, &st), 2);
		assert_int_equal(st.panic, 1);
		cx_new(&c);
		assert_int_equal(cx_invoke(&c, &r), RESIL_E_UNAVAILABLE);
		assert_int_equal(r.attempts, 0);
		assert_int_equal(c.d.n, 0);
		assert_string_equal(r.message,
		    "all 2 candidates excluded or refused by their breakers");
		assert_int_equal(resil_cluster_failback_pending(c.cl), 0);
		cx_end(&c);
	}
}

/*
 * Envoy's panic also turns zone-aware routing off (the panic set is the
 * whole cluster). resil (DESIGN): panic skips zone affinity. hz has e0
 * and e1, sh has e2 and e3, mode prefer: with e0 and e1 ejected (2 of 4
 * healthy, no panic) prefer falls back to sh; with e2 ejected too (25%)
 * panic uses all four, not just hz's.
 */
static void
test_envoy_panic_skips_zone_routing(void **state)
{
	static const char *const z[] = { "hz", "hz", "sh", "sh" };
	fx f;
	resil_route_stats st;
	resil_candidate c;

	(void)state;
	fx_init(&f, 0);
	f.dcfg.outlier.consecutive_failures = 1;
	f.dcfg.outlier.max_ejection_pct = 100;
	f.scfg.local_zone = "hz";
	f.scfg.zone_mode = RESIL_ZONE_PREFER;
	assert_int_equal(fx_start(&f), 0);
	{
		resil_endpoint_spec s[4];
		static const char *const a[] = { "e0:1", "e1:1", "e2:1",
			"e3:1" };
		size_t i;
		for (i = 0; i < 4; i++) {
			s[i] = resil_endpoint_spec_default(a[i]);
			s[i].zone = z[i];
		}
		assert_int_equal(
		    resil_directory_push(f.d, s, 4, &f.diag), RESIL_OK);
	}
	assert_int_equal(routed(&f, &st), 2);
	assert_int_equal(st.removed_zone, 2);
	eject(&f, "e0:1");
	eject(&f, "e1:1");
	assert_int_equal(routed(&f, &st), 2);
	assert_int_equal(st.panic, 0);
	assert_int_equal(resil_candidates_get(f.c, 0, &c), RESIL_OK);
	assert_string_equal(c.zone, "sh");
	eject(&f, "e2:1");
	assert_int_equal(routed(&f, &st), 4);
	assert_int_equal(st.panic, 1);
	assert_int_equal(st.removed_zone, 0);
	fx_end(&f);
}

/* Three endpoints, e1 alone in zone `zone1` when in_zone; the caller's
 * zone `zone1` with the given mode. */
static size_t
registry_zone(resil_zone_mode mode, int in_zone, char *first, size_t len)
{
	fx f;
	resil_endpoint_spec s[3];
	resil_candidate c;
	resil_route_stats st;
	size_t n;

	fx_init(&f, 0);
	f.scfg.local_zone = "zone1";
	f.scfg.zone_mode = mode;
	assert_int_equal(fx_start(&f), 0);
	s[0] = resil_endpoint_spec_default("e0:1");
	s[1] = resil_endpoint_spec_default("e1:1");
	s[2] = resil_endpoint_spec_default("e2:1");
	s[0].zone = s[2].zone = "zone2";
	s[1].zone = in_zone ? "zone1" : "zone2";
	assert_int_equal(resil_directory_push(f.d, s, 3, &f.diag), RESIL_OK);
	n = routed(&f, &st);
	if (n > 0) {
		assert_int_equal(resil_candidates_get(f.c, 0, &c), RESIL_OK);
		snprintf(first, len, "%s", c.address);
	} else {
		snprintf(first, len, "%s", f.diag.msg);
	}
	fx_end(&f);
	return n;
}

/*
 * ZoneAwareClusterInvokerTest.testRegistryZoneStrategy: the invoker whose
 * registry zone is the call's zone answers; .testRegistryZoneForceStrategy:
 * with zone force and no invoker in that zone, the call fails
 * (IllegalStateException). resil's zone affinity (DESIGN): prefer keeps
 * the local zone's candidates (all when it has none), strict gives "no
 * provider" instead. Dubbo's zone-aware picks among registries (and
 * honours a registry's `preferred=true` first, .testPreferredStrategy);
 * resil has no registries of registries (listed).
 */
static void
test_dubbo_zone_aware_registry_zone(void **state)
{
	char first[256];

	(void)state;
	assert_int_equal(
	    registry_zone(RESIL_ZONE_PREFER, 1, first, sizeof(first)), 1);
	assert_string_equal(first, "e1:1");
	assert_int_equal(
	    registry_zone(RESIL_ZONE_PREFER, 0, first, sizeof(first)), 3);
	assert_int_equal(
	    registry_zone(RESIL_ZONE_STRICT, 1, first, sizeof(first)), 1);
	assert_int_equal(
	    registry_zone(RESIL_ZONE_STRICT, 0, first, sizeof(first)), 0);
	assert_string_equal(first,
	    "Failed to invoke the method  in the service S. No provider "
	    "available for the service S: 3 endpoints, 0 after routers "
	    "(zone=zone1 removed 3: no endpoint is in that zone)");
}

/* Envoy's zone-aware fixtures: upstream hosts 80..84 with localities as
 * given; the consumer (local) zone A; one consumer per zone. */
static void
envoy_zones(fx *f, const char *const *addr, const char *const *zone, size_t n,
    uint32_t min_size)
{
	static const char *const names[] = { "A", "B", "C" };
	static const uint32_t cons[] = { 1, 1, 1 };
	resil_endpoint_spec s[8];
	size_t i;

	fx_init(f, 0);
	f->scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	f->scfg.local_zone = "A";
	f->scfg.zone_mode = RESIL_ZONE_PROPORTIONAL;
	f->scfg.zone_min_cluster_size = min_size;
	f->scfg.zone_names = names;
	f->scfg.zone_consumers = cons;
	f->scfg.nzones = 3;
	assert_int_equal(fx_start(f), 0);
	for (i = 0; i < n; i++) {
		s[i] = resil_endpoint_spec_default(addr[i]);
		s[i].zone = zone[i];
	}
	assert_int_equal(resil_directory_push(f->d, s, n, &f->diag), RESIL_OK);
}

/*
 * Envoy's zone-aware routing reads one count of local hosts per locality.
 * resil's `router.zone.consumers` gives them as zone:count; a zone given
 * twice (`A:1,A:2`) was accepted before the fix, and the proportional
 * router then summed both counts for the total but used the last for the
 * local share. It is refused, in the text and in the C config.
 */
static void
test_envoy_zone_consumers_given_twice(void **state)
{
	static const char *const names[] = { "A", "B", "A" };
	static const uint32_t cons[] = { 1, 1, 2 };
	resil_cluster_text *cc;
	resil_selector_config sc;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_cluster_text_new(&cc, NULL), RESIL_OK);
	assert_int_equal(resil_cluster_text_set(cc, "router.zone.consumers",
	                     "A:1,B:1,A:2", "svc.conf", 4, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "svc.conf:4: router.zone.consumers: \"A:1,B:1,A:2\" at column 9: "
	    "zone \"A\" is given twice");
	assert_int_equal(resil_cluster_text_set(cc, "router.zone.consumers",
	                     "A:1,B:1,C:2", "svc.conf", 5, &d),
	    RESIL_OK);
	resil_cluster_text_free(cc);
	resil_selector_config_init(&sc);
	sc.local_zone = "A";
	sc.zone_mode = RESIL_ZONE_PROPORTIONAL;
	sc.zone_names = names;
	sc.zone_consumers = cons;
	sc.nzones = 3;
	assert_int_equal(
	    resil_selector_config_validate(&sc, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "router.zone.consumers[2]: zone \"A\" is given twice");
	sc.nzones = 2;
	assert_int_equal(resil_selector_config_validate(&sc, &d), RESIL_OK);
}

/*
 * RoundRobinLoadBalancerTest.ZoneAwareSmallCluster: three hosts, one per
 * zone, the same spread as the consumers. Below min_cluster_size (7) no
 * zone routing: round robin over all three (0, 1, 2); at min_cluster_size
 * 1 the local zone's host (81, zone A) gets the call.
 */
static void
test_envoy_zone_aware_small_cluster(void **state)
{
	static const char *const a[] = { "127.0.0.1:80", "127.0.0.1:81",
		"127.0.0.1:82" };
	static const char *const z[] = { "B", "A", "C" };
	resil_request req = { "m", NULL, 0, NULL, NULL, 0, 0 };
	fx f;

	(void)state;
	envoy_zones(&f, a, z, 3, 7);
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:80");
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:81");
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:82");
	assert_int_equal(f.rnd.calls, 0);
	fx_end(&f);
	envoy_zones(&f, a, z, 3, 1);
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:81");
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:81");
	assert_int_equal(f.rnd.calls, 0); /* enough local capacity */
	fx_end(&f);
}

/*
 * RoundRobinLoadBalancerTest.ZoneAwareRoutingSmallZone: zone A has 1 of
 * 5 upstream hosts but 1 of 3 consumers, so it keeps calls with
 * probability 0.2 / (1/3) = 0.6 and spills the rest over B and C (each
 * with spare capacity 0.4 - 1/3). Envoy draws twice or three times (the
 * local roll, then the zone); resil draws once and reuses the rest of
 * that draw for the zone (docs/cluster.md; not decided by DESIGN,
 * listed), so Envoy's draws (0) and (9999, 2) become resil's u = 0 (local)
 * and u = 0.7 (B): (0.7 - 0.6) / 0.4 * (2/15) < 1/15. u = 0.9 goes to C.
 */
static void
test_envoy_zone_aware_routing_small_zone(void **state)
{
	static const char *const a[] = { "127.0.0.1:80", "127.0.0.1:81",
		"127.0.0.1:82", "127.0.0.1:83", "127.0.0.1:84" };
	static const char *const z[] = { "B", "A", "B", "C", "C" };
	static const double u[] = { 0.0, 0.7, 0.9, 0.5999 };
	resil_request req = { "m", NULL, 0, NULL, NULL, 0, 0 };
	fx f;

	(void)state;
	envoy_zones(&f, a, z, 5, 5);
	scripted_set(&f.rnd, u, 4);
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:81");
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:80");
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:83");
	assert_string_equal(fx_call(&f, &req), "127.0.0.1:81");
	assert_int_equal(f.rnd.calls, 4);
	fx_end(&f);
}

/* ------------------------------------------------------------------ */
/* Strategies through the call machine (forking, timeouts)            */
/* ------------------------------------------------------------------ */

typedef struct px {
	fx f;
	resil_pipeline_config pcfg;
	resil_pipeline *p;
	resil_diag diag;
} px;

static void
px_init(px *x, resil_cluster_strategy s, size_t n)
{
	memset(x, 0, sizeof(*x));
	fx_init(&x->f, 1000);
	x->f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	x->f.scfg.service = "StockService";
	x->f.dcfg.outlier.max_ejection_pct = 0;
	assert_int_equal(fx_start(&x->f), 0);
	if (n > 0)
		assert_int_equal(fx_push_weights(&x->f, NULL, n), RESIL_OK);
	resil_pipeline_config_init(&x->pcfg);
	x->pcfg.service = "StockService";
	x->pcfg.clock = resil_manual_clock_hook(&x->f.mc);
	x->pcfg.classifier.fn = classify;
	x->pcfg.selector = x->f.sel;
	x->pcfg.cluster.strategy = s;
	x->pcfg.executor = caller_executor();
}

static void
px_new(px *x)
{
	resil_err err = resil_pipeline_new(&x->p, &x->pcfg, &x->diag);

	if (err != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", x->diag.msg);
}

static void
px_end(px *x)
{
	resil_pipeline_free(x->p);
	fx_end(&x->f);
}

static uint64_t
px_now(px *x)
{
	return resil_manual_clock_now(&x->f.mc);
}

/* Start a call; collect the attempts launched before the first WAIT or
 * DONE into id[] and addr[]; returns how many. */
static int
px_launch(px *x, resil_call *call, resil_result *r, resil_call_next *st,
    uint32_t *id, char (*addr)[32], int max)
{
	/* The call keeps its arguments until DONE: not this frame's. */
	static const resil_args a = { "getStock", NULL, 0 };
	int k = 0;

	assert_int_equal(
	    resil_call_start(call, x->p, NULL, &a, r, px_now(x), st),
	    RESIL_OK);
	while (st->action == RESIL_CALL_RUN && k < max) {
		id[k] = st->attempt;
		snprintf(
		    addr[k], sizeof(addr[k]), "%s", st->endpoint->address);
		k++;
		assert_int_equal(
		    resil_call_step(call, px_now(x), st), RESIL_OK);
	}
	return k;
}

/*
 * ForkingClusterInvokerTest.testInvokeException: forks=2 over three
 * invokers that all throw: the call fails ("Failed to forking invoke
 * provider ..." in Dubbo). resil (DESIGN): min(forks, n) = 2 forks on
 * distinct endpoints; the call fails only when both failed, with the
 * error that completed last, in Dubbo's forking wording (the forks in
 * selection order).
 */
static void
test_dubbo_forking_invoke_exception(void **state)
{
	px x;
	resil_call call;
	resil_call_next st;
	resil_result r;
	uint32_t id[4];
	char addr[4][32];

	(void)state;
	px_init(&x, RESIL_CLUSTER_FORKING, 3);
	x.pcfg.cluster.forks = 2;
	px_new(&x);
	assert_int_equal(px_launch(&x, &call, &r, &st, id, addr, 4), 2);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_string_equal(addr[0], "e0:1");
	assert_string_equal(addr[1], "e1:1");
	assert_int_equal(
	    resil_call_report(&call, id[1], 111, NULL, px_now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, px_now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_int_equal(
	    resil_call_report(&call, id[0], 112, NULL, px_now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, px_now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_CALL);
	assert_int_equal(r.rc, 112);
	assert_int_equal(r.attempts, 2);
	assert_string_equal(r.message,
	    "Failed to forking invoke provider [e0:1, e1:1], but no luck to "
	    "perform the invocation. Last error is: the call failed (rc "
	    "112)");
	resil_result_free(&r);
	px_end(&x);
}

/*
 * ForkingClusterInvokerTest.testInvokeNoException: every invoker answers;
 * the result is returned. resil: the first success in completion time
 * wins (here the second fork's), the other is dropped.
 */
static void
test_dubbo_forking_invoke_no_exception(void **state)
{
	px x;
	resil_call call;
	resil_call_next st;
	resil_result r;
	resil_value v;
	uint32_t id[4];
	char addr[4][32];

	(void)state;
	px_init(&x, RESIL_CLUSTER_FORKING, 3);
	x.pcfg.cluster.forks = 2;
	px_new(&x);
	assert_int_equal(px_launch(&x, &call, &r, &st, id, addr, 4), 2);
	v = resil_value_int(7);
	resil_manual_clock_advance(&x.f.mc, 3);
	assert_int_equal(
	    resil_call_report(&call, id[1], 0, &v, px_now(&x)), RESIL_OK);
	assert_int_equal(resil_call_step(&call, px_now(&x), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.value.u.i, 7);
	assert_string_equal(r.endpoint, "e1:1");
	assert_int_equal(
	    resil_call_report(&call, id[0], 0, NULL, px_now(&x)), RESIL_OK);
	assert_int_equal(resil_call_outstanding(&call), 0);
	resil_result_free(&r);
	px_end(&x);
}

/*
 * ForkingClusterInvokerTest.testInvokeWithIllegalForksParam: Dubbo takes
 * forks=-1 as "all invokers". resil refuses forks <= 0 at configuration
 * time (DESIGN); forks above the candidate count means all of them.
 */
static void
test_dubbo_forking_illegal_forks(void **state)
{
	px x;
	resil_pipeline *p = NULL;
	resil_call call;
	resil_call_next st;
	resil_result r;
	uint32_t id[4];
	char addr[4][32];

	(void)state;
	px_init(&x, RESIL_CLUSTER_FORKING, 3);
	x.pcfg.cluster.forks = -1;
	assert_int_equal(
	    resil_pipeline_new(&p, &x.pcfg, &x.diag), RESIL_E_INVAL);
	assert_null(p);
	assert_non_null(strstr(x.diag.msg, "forks"));
	x.pcfg.cluster.forks = 0;
	assert_int_equal(
	    resil_pipeline_new(&p, &x.pcfg, &x.diag), RESIL_E_INVAL);
	x.pcfg.cluster.forks = 99;
	px_new(&x);
	assert_int_equal(px_launch(&x, &call, &r, &st, id, addr, 4), 3);
	assert_int_equal(resil_call_cancel(&call, px_now(&x)), RESIL_OK);
	resil_result_free(&r);
	px_end(&x);
}

/*
 * AbstractClusterInvokerTest.testTimeoutExceptionCode: a lone invoker
 * that always times out; failover, forking and failfast all end in an
 * error whose code is TIMEOUT_EXCEPTION. resil (DESIGN: the final error
 * has the kind of the last attempt's error): RESIL_E_TIMEOUT for each;
 * failover makes retries + 1 = 3 attempts on the one endpoint.
 */
static void
test_dubbo_timeout_exception_code(void **state)
{
	static const resil_cluster_strategy s[] = { RESIL_CLUSTER_FAILOVER,
		RESIL_CLUSTER_FORKING, RESIL_CLUSTER_FAILFAST };
	static const uint32_t attempts[] = { 3, 1, 1 };
	size_t i;

	(void)state;
	for (i = 0; i < 3; i++) {
		px x;
		resil_call call;
		resil_call_next st;
		resil_result r;
		uint32_t id[4];
		char addr[4][32];
		uint32_t k;

		px_init(&x, s[i], 1);
		x.pcfg.timeout_ns = 100;
		px_new(&x);
		assert_int_equal(
		    px_launch(&x, &call, &r, &st, id, addr, 4), 1);
		for (k = 0; st.action != RESIL_CALL_DONE && k < 10; k++) {
			resil_manual_clock_advance(&x.f.mc, 101);
			assert_int_equal(
			    resil_call_step(&call, px_now(&x), &st), RESIL_OK);
		}
		assert_int_equal(st.action, RESIL_CALL_DONE);
		assert_int_equal(r.err, RESIL_E_TIMEOUT);
		assert_int_equal(r.attempts, attempts[i]);
		assert_non_null(strstr(r.message, "timeout after"));
		resil_result_free(&r);
		px_end(&x);
	}
}

/*
 * OutlierDetectorImplTest's consecutive gateway failures (502/503/504 and
 * Envoy's own local-origin errors: connect timeouts, resets) eject like
 * 5xx. resil (DESIGN: timeouts and unavailability count as consecutive
 * failures): the call machine reports an attempt that times out as a
 * failure, so five timed-out calls eject a lone endpoint (at 100%) at the
 * fifth timeout's step, and the next call finds no provider (panic off).
 */
static void
test_envoy_gateway_failure_timeouts_eject(void **state)
{
	px x;
	resil_call call;
	resil_call_next st;
	resil_result r;
	uint32_t id[4];
	char addr[4][32];
	int k;

	(void)state;
	memset(&x, 0, sizeof(x));
	fx_init(&x.f, 1000);
	x.f.scfg.service = "StockService";
	x.f.scfg.panic_threshold_pct = 0;
	x.f.dcfg.outlier.consecutive_failures = 5;
	x.f.dcfg.outlier.base_ejection = 30000;
	x.f.dcfg.outlier.max_ejection = 300000;
	x.f.dcfg.outlier.interval = 10000;
	x.f.dcfg.outlier.max_ejection_pct = 100;
	assert_int_equal(fx_start(&x.f), 0);
	assert_int_equal(fx_push_weights(&x.f, NULL, 1), RESIL_OK);
	x.f.nev = 0;
	resil_pipeline_config_init(&x.pcfg);
	x.pcfg.service = "StockService";
	x.pcfg.clock = resil_manual_clock_hook(&x.f.mc);
	x.pcfg.classifier.fn = classify;
	x.pcfg.selector = x.f.sel;
	x.pcfg.cluster.strategy = RESIL_CLUSTER_FAILFAST;
	x.pcfg.timeout_ns = 100;
	px_new(&x);
	for (k = 0; k < 5; k++) {
		assert_int_equal(
		    px_launch(&x, &call, &r, &st, id, addr, 4), 1);
		resil_manual_clock_advance(&x.f.mc, 101);
		assert_int_equal(
		    resil_call_step(&call, px_now(&x), &st), RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_DONE);
		assert_int_equal(r.err, RESIL_E_TIMEOUT);
		assert_int_equal(x.f.nev, k < 4 ? 0 : 1);
		resil_result_free(&r);
	}
	assert_int_equal(x.f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	assert_int_equal(x.f.ev[0].time, 1000 + 5 * 101);
	assert_int_equal(x.f.ev[0].duration, 30000);
	assert_int_equal(px_launch(&x, &call, &r, &st, id, addr, 4), 0);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_NO_PROVIDER);
	assert_string_equal(r.message,
	    "Failed to invoke the method getStock in the service "
	    "StockService. No provider available for the service "
	    "StockService: 1 endpoint, 0 after routers (health removed 1)");
	resil_result_free(&r);
	px_end(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dubbo_failover_retry_times),
		cmocka_unit_test(
		    test_dubbo_failover_rpc_exception_then_success),
		cmocka_unit_test(test_dubbo_failover_no_invoke),
		cmocka_unit_test(
		    test_dubbo_failover_invoker_destroy_and_relist),
		cmocka_unit_test(
		    test_dubbo_failover_list_emptied_before_retry),
		cmocka_unit_test(test_dubbo_failover_retries_zero),
		cmocka_unit_test(test_dubbo_failfast_one_attempt),
		cmocka_unit_test(
		    test_dubbo_failsafe_swallows_but_not_no_provider),
		cmocka_unit_test(test_dubbo_failback_illegal_params_refused),
		cmocka_unit_test(test_dubbo_failback_invoke_exception),
		cmocka_unit_test(test_dubbo_failback_retry_failed),
		cmocka_unit_test(test_dubbo_failback_retry_timer_avoids_last),
		cmocka_unit_test(test_design_repaired_values_refused),
		cmocka_unit_test(test_dubbo_cluster_names),
		cmocka_unit_test(test_dubbo_broadcast_normal),
		cmocka_unit_test(test_dubbo_broadcast_ex),
		cmocka_unit_test(test_dubbo_broadcast_fail_percent),
		cmocka_unit_test(
		    test_design_broadcast_passes_over_refusing_breakers),
		cmocka_unit_test(test_dubbo_select_invoker_size_0_and_1),
		cmocka_unit_test(test_dubbo_select_two_excluding_selected),
		cmocka_unit_test(test_dubbo_select_do_not_select_again),
		cmocka_unit_test(test_dubbo_select_again_and_check_available),
		cmocka_unit_test(test_dubbo_select_balance),
		cmocka_unit_test(test_dubbo_report_once_and_bad_outcome),
		cmocka_unit_test(test_dubbo_mocked_invoker_select),
		cmocka_unit_test(test_dubbo_load_balance_warmup),
		cmocka_unit_test(test_dubbo_roundrobin_select),
		cmocka_unit_test(test_dubbo_roundrobin_select_by_weight),
		cmocka_unit_test(test_dubbo_roundrobin_node_cache),
		cmocka_unit_test(test_envoy_weighted_round_robin_order),
		cmocka_unit_test(test_dubbo_weight_zero),
		cmocka_unit_test(test_dubbo_random_select_then_least_active),
		cmocka_unit_test(test_envoy_least_request_normal),
		cmocka_unit_test(test_dubbo_random_select_by_weight),
		cmocka_unit_test(test_dubbo_leastactive_select_by_weight),
		cmocka_unit_test(test_dubbo_shortest_select_by_weight),
		cmocka_unit_test(test_dubbo_shortest_select_by_response),
		cmocka_unit_test(test_dubbo_consistent_hash_spread),
		cmocka_unit_test(
		    test_dubbo_hash_request_without_arguments_refused),
		cmocka_unit_test(
		    test_dubbo_consistent_hash_stable_across_routes),
		cmocka_unit_test(test_dubbo_condition_match_when),
		cmocka_unit_test(test_dubbo_condition_match_filter),
		cmocka_unit_test(test_dubbo_condition_return_and_filters),
		cmocka_unit_test(
		    test_dubbo_condition_arguments_and_missing_keys),
		cmocka_unit_test(
		    test_dubbo_condition_placeholder_and_attachments),
		cmocka_unit_test(test_dubbo_tag_route_pick_invokers),
		cmocka_unit_test(test_envoy_basic_flow_5xx),
		cmocka_unit_test(test_envoy_eject_time_backoff),
		cmocka_unit_test(test_envoy_max_ejection_percentage),
		cmocka_unit_test(test_envoy_consecutive_5xx_already_ejected),
		cmocka_unit_test(test_envoy_4xx_ends_the_5xx_streak),
		cmocka_unit_test(test_envoy_remove_while_ejected),
		cmocka_unit_test(test_envoy_max_ejection_time),
		cmocka_unit_test(test_envoy_max_unhealthy_panic),
		cmocka_unit_test(test_envoy_panic_threshold_boundary),
		cmocka_unit_test(test_envoy_panic_with_open_breakers),
		cmocka_unit_test(test_envoy_panic_skips_zone_routing),
		cmocka_unit_test(test_dubbo_zone_aware_registry_zone),
		cmocka_unit_test(test_envoy_zone_consumers_given_twice),
		cmocka_unit_test(test_envoy_zone_aware_small_cluster),
		cmocka_unit_test(test_envoy_zone_aware_routing_small_zone),
		cmocka_unit_test(test_dubbo_forking_invoke_exception),
		cmocka_unit_test(test_dubbo_forking_invoke_no_exception),
		cmocka_unit_test(test_dubbo_forking_illegal_forks),
		cmocka_unit_test(test_dubbo_timeout_exception_code),
		cmocka_unit_test(test_envoy_gateway_failure_timeouts_eject),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Hedging across endpoints (issue 43): hedge_max with a selector, through
 * the call machine and the blocking driver, on the manual clock over a
 * round-robin selector. A hedge goes to an endpoint not yet tried in the
 * call; the first success wins; a lost hedge's late answer still reaches
 * its endpoint; hedge_max bounds the hedges; each hedge spends the retry
 * budget; zone-aware hedges in the local zone first; cancelling the call
 * cancels its hedges; forking and broadcast refuse hedging.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#include "support/caller_executor.h"
#include "support/cluster_fx.h"

#define MS RESIL_NS_PER_MS
#define MAX_EV 64

typedef struct hfx {
	fx f;
	resil_pipeline_config pcfg;
	resil_pipeline *p;
	resil_pipeline_record rec[MAX_EV];
	resil_pipeline_recorder r;
	resil_call call;
	resil_call_next st;
	resil_result res;
	resil_args a;
	char order[256]; /* blocking driver: endpoints called */
	int fail_first;  /* blocking driver: e0 fails (rc 111) */
} hfx;

/* n endpoints e0:1.. in zones[i] (NULL: none); hedging 50 ms, hmax. */
static void
hfx_init(hfx *x, resil_cluster_strategy s, size_t n, const char *const *zones,
    uint32_t hmax)
{
	resil_endpoint_spec specs[8];
	static char addr[8][32];
	size_t i;

	memset(x, 0, sizeof(*x));
	fx_init(&x->f, 1000 * MS);
	x->f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	x->f.scfg.service = "StockService";
	x->f.dcfg.outlier.max_ejection_pct = 0;
	assert_int_equal(fx_start(&x->f), 0);
	for (i = 0; i < n; i++) {
		snprintf(addr[i], sizeof(addr[i]), "e%zu:1", i);
		specs[i] = resil_endpoint_spec_default(addr[i]);
		if (zones != NULL)
			specs[i].zone = zones[i];
	}
	assert_int_equal(
	    resil_directory_push(x->f.d, specs, n, &x->f.diag), RESIL_OK);
	resil_pipeline_config_init(&x->pcfg);
	x->pcfg.service = "StockService";
	x->pcfg.clock = resil_manual_clock_hook(&x->f.mc);
	x->pcfg.selector = x->f.sel;
	x->pcfg.cluster.strategy = s;
	x->pcfg.cluster.retries = 0; /* one attempt of the retry stage */
	x->pcfg.hedge_max = hmax;
	x->pcfg.hedge_delay_ns = 50 * MS;
	x->pcfg.timeout_ns = 1000 * MS;
	x->pcfg.executor = caller_executor();
	resil_pipeline_recorder_init(&x->r, x->rec, MAX_EV);
	x->pcfg.listener = resil_pipeline_recorder_listener;
	x->pcfg.listener_ctx = &x->r;
	x->a.method = "getStock";
}

static void
hfx_new(hfx *x)
{
	resil_diag d;
	resil_err err = resil_pipeline_new(&x->p, &x->pcfg, &d);

	if (err != RESIL_OK)
		fprintf(stderr, "pipeline_new: %s\n", d.msg);
	assert_int_equal(err, RESIL_OK);
}

static void
hfx_end(hfx *x)
{
	resil_result_free(&x->res);
	resil_pipeline_free(x->p);
	fx_end(&x->f);
}

static uint64_t
now(hfx *x)
{
	return resil_manual_clock_now(&x->f.mc);
}

static void
at(hfx *x, uint64_t ms_from_start)
{
	resil_manual_clock_set(&x->f.mc, 1000 * MS + ms_from_start * MS);
}

/* The call machine's step at now: expects a RUN, returns its id and
 * copies its endpoint. */
static uint32_t
expect_run(hfx *x, char *addr, size_t n)
{
	assert_int_equal(x->st.action, RESIL_CALL_RUN);
	assert_non_null(x->st.endpoint);
	snprintf(addr, n, "%s", x->st.endpoint->address);
	return x->st.attempt;
}

static void
step(hfx *x)
{
	assert_int_equal(resil_call_step(&x->call, now(x), &x->st), RESIL_OK);
}

static void
start(hfx *x)
{
	assert_int_equal(resil_call_start(&x->call, x->p, NULL, &x->a, &x->res,
	                     now(x), &x->st),
	    RESIL_OK);
}

static int
events(const hfx *x, const char *t)
{
	size_t i;
	int n = 0;

	for (i = 0; i < x->r.count; i++)
		if (x->rec[i].stage == RESIL_STAGE_CLUSTER &&
		    strcmp(x->rec[i].text, t) == 0)
			n++;
	return n;
}

static resil_endpoint_state
state_of(hfx *x, const char *address)
{
	resil_endpoint_state s;

	assert_int_equal(
	    resil_directory_get_state(x->f.d, address, &s), RESIL_OK);
	return s;
}

/* After hedge_delay with no answer, a hedge on an untried endpoint; its
 * success wins; the first attempt's late failure reaches e0 (its streak,
 * its active count), not the caller. */
static void
test_hedge_sel_untried_first_success_late_reported(void **state)
{
	hfx x;
	char a0[16], a1[16];
	uint32_t id0, id1;
	resil_value v;

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 3, NULL, 2);
	hfx_new(&x);
	start(&x);
	id0 = expect_run(&x, a0, sizeof(a0));
	assert_string_equal(a0, "e0:1");
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	assert_int_equal(x.st.until, now(&x) + 50 * MS);
	at(&x, 49);
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	at(&x, 50);
	step(&x);
	id1 = expect_run(&x, a1, sizeof(a1));
	assert_string_equal(a1, "e1:1");
	assert_int_equal(events(&x, "cluster hedge_started e1:1"), 1);
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	at(&x, 60);
	v = resil_value_int(42);
	assert_int_equal(
	    resil_call_report(&x.call, id1, 0, &v, now(&x)), RESIL_OK);
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_DONE);
	assert_int_equal(x.res.err, RESIL_OK);
	assert_int_equal(x.res.value.u.i, 42);
	assert_int_equal(x.res.attempts, 2);
	assert_string_equal(x.res.endpoint, "e1:1");
	assert_int_equal(events(&x, "cluster hedge_won e1:1"), 1);
	assert_int_equal(events(&x, "cluster hedge_dropped e0:1"), 1);
	/* e0's attempt is still out for its endpoint... */
	assert_int_equal(state_of(&x, "e0:1").active, 1);
	assert_int_equal(state_of(&x, "e1:1").active, 0);
	assert_int_equal(resil_call_outstanding(&x.call), 1);
	/* ...and its late failure is reported to it, dropped for the
	 * caller. */
	at(&x, 80);
	assert_int_equal(
	    resil_call_report(&x.call, id0, 111, NULL, now(&x)), RESIL_OK);
	assert_int_equal(state_of(&x, "e0:1").active, 0);
	assert_int_equal(state_of(&x, "e0:1").streak, 1);
	assert_int_equal(resil_call_outstanding(&x.call), 0);
	assert_int_equal(x.res.value.u.i, 42);
	hfx_end(&x);
}

/* The first attempt wins: no hedge_won, the hedge is dropped. */
static void
test_hedge_sel_first_attempt_wins(void **state)
{
	hfx x;
	char a0[16], a1[16];
	uint32_t id0, id1;

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 3, NULL, 1);
	hfx_new(&x);
	start(&x);
	id0 = expect_run(&x, a0, sizeof(a0));
	step(&x);
	at(&x, 50);
	step(&x);
	id1 = expect_run(&x, a1, sizeof(a1));
	step(&x);
	at(&x, 70);
	assert_int_equal(
	    resil_call_report(&x.call, id0, 0, NULL, now(&x)), RESIL_OK);
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_DONE);
	assert_string_equal(x.res.endpoint, "e0:1");
	assert_int_equal(events(&x, "cluster hedge_won e0:1"), 0);
	assert_int_equal(events(&x, "cluster hedge_dropped e1:1"), 1);
	/* The hedge's late success is e1's, not the caller's. */
	assert_int_equal(
	    resil_call_report(&x.call, id1, 0, NULL, now(&x)), RESIL_OK);
	assert_int_equal(state_of(&x, "e1:1").active, 0);
	hfx_end(&x);
}

/* hedge_max bounds the hedges: 2 over 4 endpoints, each 50 ms after the
 * last; then only the timeout is due. Every endpoint distinct. */
static void
test_hedge_sel_max_bound(void **state)
{
	hfx x;
	char a[3][16];

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 4, NULL, 2);
	hfx_new(&x);
	start(&x);
	(void)expect_run(&x, a[0], sizeof(a[0]));
	step(&x);
	at(&x, 50);
	step(&x);
	(void)expect_run(&x, a[1], sizeof(a[1]));
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	assert_int_equal(x.st.until, now(&x) + 50 * MS);
	at(&x, 100);
	step(&x);
	(void)expect_run(&x, a[2], sizeof(a[2]));
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	/* No third hedge: the first attempt's timeout (1000 ms + 1 tick). */
	assert_int_equal(x.st.until, 1000 * MS + 1000 * MS + 1);
	assert_string_equal(a[0], "e0:1");
	assert_string_equal(a[1], "e1:1");
	assert_string_equal(a[2], "e2:1");
	assert_int_equal(resil_call_outstanding(&x.call), 3);
	assert_int_equal(events(&x, "cluster hedge_started e3:1"), 0);
	assert_int_equal(resil_call_cancel(&x.call, now(&x)), RESIL_OK);
	hfx_end(&x);
}

/* A hedge never goes to an endpoint already tried in the call: with two
 * endpoints and hedge_max 3, one hedge. */
static void
test_hedge_sel_no_untried_endpoint(void **state)
{
	hfx x;
	char a[2][16];

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 2, NULL, 3);
	hfx_new(&x);
	start(&x);
	(void)expect_run(&x, a[0], sizeof(a[0]));
	step(&x);
	at(&x, 50);
	step(&x);
	(void)expect_run(&x, a[1], sizeof(a[1]));
	assert_string_equal(a[1], "e1:1");
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	at(&x, 100);
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_outstanding(&x.call), 2);
	assert_int_equal(state_of(&x, "e0:1").active, 1);
	assert_int_equal(state_of(&x, "e1:1").active, 1);
	assert_int_equal(resil_call_cancel(&x.call, now(&x)), RESIL_OK);
	hfx_end(&x);
}

/* Each hedge spends one retry from the budget: a bank of one token (one
 * call deposits one) pays for the first hedge, refuses the second. */
static void
test_hedge_sel_budget_spent(void **state)
{
	hfx x;
	char a[2][16];

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 4, NULL, 2);
	x.pcfg.retry_enabled = 1;
	resil_retry_config_init(&x.pcfg.retry);
	x.pcfg.retry.base_delay_ns = 0;
	x.pcfg.retry.budget_ratio = 1.0;
	x.pcfg.retry.budget_max_tokens = 1;
	x.pcfg.retry.budget_min_retries = 0; /* no floor */
	hfx_new(&x);
	start(&x);
	(void)expect_run(&x, a[0], sizeof(a[0]));
	step(&x);
	at(&x, 50);
	step(&x);
	(void)expect_run(&x, a[1], sizeof(a[1]));
	step(&x);
	at(&x, 100);
	step(&x);
	/* The second hedge was refused by the budget: no RUN. */
	assert_int_equal(x.st.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_outstanding(&x.call), 2);
	assert_int_equal(events(&x, "cluster hedge_started e2:1"), 0);
	assert_int_equal(resil_call_cancel(&x.call, now(&x)), RESIL_OK);
	hfx_end(&x);
}

/* Zone-aware hedges inside the local zone first, then in another zone;
 * never an endpoint already tried. */
static void
test_hedge_sel_zone_first(void **state)
{
	static const char *const zones[] = { "z1", "z2", "z1", "z2" };
	hfx x;
	char a[4][16];
	int k;

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_ZONE_AWARE, 4, zones, 3);
	x.pcfg.cluster.local_zone = "z1";
	hfx_new(&x);
	start(&x);
	(void)expect_run(&x, a[0], sizeof(a[0]));
	for (k = 1; k < 4; k++) {
		step(&x);
		assert_int_equal(x.st.action, RESIL_CALL_WAIT);
		at(&x, (uint64_t)k * 50);
		step(&x);
		(void)expect_run(&x, a[k], sizeof(a[k]));
	}
	/* z1 (e0, e2) first, then z2, all distinct. */
	assert_true(strcmp(a[0], "e0:1") == 0 || strcmp(a[0], "e2:1") == 0);
	assert_true(strcmp(a[1], "e0:1") == 0 || strcmp(a[1], "e2:1") == 0);
	assert_string_not_equal(a[0], a[1]);
	assert_true(strcmp(a[2], "e1:1") == 0 || strcmp(a[2], "e3:1") == 0);
	assert_true(strcmp(a[3], "e1:1") == 0 || strcmp(a[3], "e3:1") == 0);
	assert_string_not_equal(a[2], a[3]);
	assert_int_equal(resil_call_cancel(&x.call, now(&x)), RESIL_OK);
	hfx_end(&x);
}

/* Cancelling the call cancels its hedges: every pick is given back, no
 * outcome counted, and their late answers are dropped. */
static void
test_hedge_sel_cancel_cancels_hedges(void **state)
{
	hfx x;
	char a[2][16];
	uint32_t id[2];

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 3, NULL, 1);
	hfx_new(&x);
	start(&x);
	id[0] = expect_run(&x, a[0], sizeof(a[0]));
	step(&x);
	at(&x, 50);
	step(&x);
	id[1] = expect_run(&x, a[1], sizeof(a[1]));
	step(&x);
	assert_int_equal(state_of(&x, "e0:1").active, 1);
	assert_int_equal(state_of(&x, "e1:1").active, 1);
	assert_int_equal(resil_call_cancel(&x.call, now(&x)), RESIL_OK);
	assert_int_equal(x.res.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(state_of(&x, "e0:1").active, 0);
	assert_int_equal(state_of(&x, "e1:1").active, 0);
	assert_int_equal(
	    resil_call_report(&x.call, id[0], 111, NULL, now(&x)), RESIL_OK);
	assert_int_equal(
	    resil_call_report(&x.call, id[1], 111, NULL, now(&x)), RESIL_OK);
	assert_int_equal(state_of(&x, "e0:1").streak, 0);
	assert_int_equal(state_of(&x, "e1:1").streak, 0);
	hfx_end(&x);
}

/* hedge.on=timeout: a failure (rc 111) is fatal: no more hedges, the
 * call fails at once (retries 0), the attempt still out is dropped and
 * its late answer still reaches its endpoint. */
static void
test_hedge_sel_fatal_failure(void **state)
{
	hfx x;
	char a[2][16];
	uint32_t id[2];

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 3, NULL, 2);
	x.pcfg.hedge_fatal = RESIL_HEDGE_ON_ALL & ~RESIL_HEDGE_ON_TIMEOUT;
	hfx_new(&x);
	start(&x);
	id[0] = expect_run(&x, a[0], sizeof(a[0]));
	step(&x);
	at(&x, 50);
	step(&x);
	id[1] = expect_run(&x, a[1], sizeof(a[1]));
	step(&x);
	at(&x, 60);
	assert_int_equal(
	    resil_call_report(&x.call, id[1], 111, NULL, now(&x)), RESIL_OK);
	step(&x);
	assert_int_equal(x.st.action, RESIL_CALL_DONE);
	assert_int_equal(x.res.err, RESIL_E_CALL);
	assert_int_equal(x.res.rc, 111);
	assert_int_equal(x.res.attempts, 2);
	assert_int_equal(events(&x, "cluster hedge_started e2:1"), 0);
	assert_int_equal(state_of(&x, "e0:1").active, 1);
	assert_int_equal(
	    resil_call_report(&x.call, id[0], 0, NULL, now(&x)), RESIL_OK);
	assert_int_equal(state_of(&x, "e0:1").active, 0);
	hfx_end(&x);
}

/* The same failure with the default (every failure allows a hedge): the
 * next hedge starts at once, on e2. */
static void
test_hedge_sel_nonfatal_failure_hedges_now(void **state)
{
	hfx x;
	char a[3][16];
	uint32_t id[2];

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 3, NULL, 2);
	hfx_new(&x);
	start(&x);
	id[0] = expect_run(&x, a[0], sizeof(a[0]));
	step(&x);
	at(&x, 50);
	step(&x);
	id[1] = expect_run(&x, a[1], sizeof(a[1]));
	step(&x);
	at(&x, 60);
	assert_int_equal(
	    resil_call_report(&x.call, id[1], 111, NULL, now(&x)), RESIL_OK);
	step(&x);
	(void)expect_run(&x, a[2], sizeof(a[2]));
	assert_string_equal(a[2], "e2:1");
	(void)id[0];
	assert_int_equal(resil_call_cancel(&x.call, now(&x)), RESIL_OK);
	hfx_end(&x);
}

/* hedge.on= in the text: read into hedge_fatal, written back, refused
 * with a clear message. */
static void
test_hedge_sel_hedge_on_text(void **state)
{
	resil_config *c = NULL;
	resil_diag d;
	char buf[64];

	(void)state;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\nhedge.max=1\nhedge.on=timeout,"
	                     "rejected\nloadbalance=random\n",
	                     "svc.conf", NULL, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_pipeline(c)->hedge_fatal, RESIL_HEDGE_ON_FAILURE);
	assert_int_equal(
	    resil_config_get(c, "hedge.on", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "timeout,rejected");
	assert_int_equal(
	    resil_config_set(c, "hedge.on", "none", &d), RESIL_OK);
	assert_int_equal(
	    resil_config_pipeline(c)->hedge_fatal, RESIL_HEDGE_ON_ALL);
	assert_int_equal(
	    resil_config_get(c, "hedge.on", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "none");
	resil_config_free(c);
	c = NULL;
	assert_int_equal(resil_config_parse_string(
	                     &c, "hedge.max=1\n", "svc.conf", NULL, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_get(c, "hedge.on", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "failure,timeout,rejected");
	resil_config_free(c);
	c = NULL;
	assert_int_equal(
	    resil_config_parse_string(
	        &c, "hedge.on=timeout,unavailable\n", "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "svc.conf:1: hedge.on: \"unavailable\" is not one of failure, "
	    "timeout, rejected (a comma-separated list), or none");
	assert_int_equal(
	    resil_config_parse_string(
	        &c, "hedge.on=timeout,timeout\n", "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "svc.conf:1: hedge.on: timeout is listed twice");
}

static int
dep_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	hfx *x = ctx;
	size_t len = strlen(x->order);

	(void)args;
	snprintf(x->order + len, sizeof(x->order) - len, "%s%s",
	    len > 0 ? " " : "", ep->address);
	if (x->fail_first && strcmp(ep->address, "e0:1") == 0)
		return 111;
	*out = resil_value_int(7);
	return 0;
}

/* The blocking driver with its executor (here the attempts run on the
 * calling thread, as submit refuses): e0 fails, the hedge goes to e1 at
 * once (a failure allows a hedge) and wins. */
static void
test_hedge_sel_blocking_driver(void **state)
{
	hfx x;

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FAILOVER, 3, NULL, 1);
	hfx_new(&x);
	x.fail_first = 1;
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &x.a, dep_call, &x, &x.res),
	    RESIL_OK);
	assert_int_equal(x.res.value.u.i, 7);
	assert_int_equal(x.res.attempts, 2);
	assert_string_equal(x.order, "e0:1 e1:1");
	assert_string_equal(x.res.endpoint, "e1:1");
	assert_int_equal(state_of(&x, "e0:1").streak, 1);
	assert_int_equal(state_of(&x, "e0:1").active, 0);
	assert_int_equal(state_of(&x, "e1:1").active, 0);
	hfx_end(&x);
}

/* Forking and broadcast make their own attempts: hedging is refused. */
static void
test_hedge_sel_refused_with_forking_and_broadcast(void **state)
{
	hfx x;
	resil_diag d;

	(void)state;
	hfx_init(&x, RESIL_CLUSTER_FORKING, 3, NULL, 1);
	assert_int_equal(resil_pipeline_new(&x.p, &x.pcfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "pipeline.hedge_max: cluster=forking makes its own parallel or "
	    "serial attempts; hedging runs with failover, failfast, "
	    "failsafe, failback or zone-aware");
	x.pcfg.cluster.strategy = RESIL_CLUSTER_BROADCAST;
	assert_int_equal(resil_pipeline_new(&x.p, &x.pcfg, &d), RESIL_E_INVAL);
	assert_null(x.p);
	fx_end(&x.f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_hedge_sel_untried_first_success_late_reported),
		cmocka_unit_test(test_hedge_sel_first_attempt_wins),
		cmocka_unit_test(test_hedge_sel_max_bound),
		cmocka_unit_test(test_hedge_sel_no_untried_endpoint),
		cmocka_unit_test(test_hedge_sel_budget_spent),
		cmocka_unit_test(test_hedge_sel_zone_first),
		cmocka_unit_test(test_hedge_sel_cancel_cancels_hedges),
		cmocka_unit_test(test_hedge_sel_fatal_failure),
		cmocka_unit_test(test_hedge_sel_nonfatal_failure_hedges_now),
		cmocka_unit_test(test_hedge_sel_hedge_on_text),
		cmocka_unit_test(test_hedge_sel_blocking_driver),
		cmocka_unit_test(
		    test_hedge_sel_refused_with_forking_and_broadcast),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

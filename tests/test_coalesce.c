/*
 * Issue 43's coalescing through the public API, on the manual clock:
 * identical calls in flight at once (same method, same arguments) share
 * one call of the dependency when the method coalesces; the followers
 * get a copy of the leader's answer (attempts 0, message "coalesced"),
 * its failure too; the bound on waiters per key (the next go on their
 * own); different keys do not coalesce; the text key. The dependency
 * "takes" LAT ticks: it waits on the manual clock, and the test moves
 * the clock once every thread it started is blocked
 * (resil_manual_clock_waiters).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#define LAT 100

typedef struct dep {
	resil_manual_clock *mc;
	int calls; /* atomic */
	int fail;  /* every call fails with rc 5 */
} dep;

/* The dependency: waits LAT ticks on the manual clock, then answers 42
 * (or fails). */
static int
dep_fn(void *ctx, const resil_args *args, resil_value *out)
{
	dep *d = ctx;
	uint32_t word = 0;
	const resil_clock *ck = resil_manual_clock_hook(d->mc);
	uint64_t until = resil_manual_clock_now(d->mc) + LAT;

	(void)args;
	__atomic_fetch_add(&d->calls, 1, __ATOMIC_SEQ_CST);
	while (resil_manual_clock_now(d->mc) < until)
		(void)resil_clock_wait(ck, &word, 0, until);
	if (d->fail)
		return 5;
	*out = resil_value_int(42);
	return 0;
}

static resil_pipeline *
coal_pipeline(resil_manual_clock *mc, uint32_t max_waiters)
{
	resil_pipeline_config cfg;
	resil_method_config mcfg;
	resil_pipeline *p = NULL;
	resil_diag diag;

	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.coalesce_max_waiters = max_waiters;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(mc);
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	return p;
}

typedef struct caller {
	resil_pipeline *p;
	dep *d;
	const char *key;
	resil_err err;
	resil_result r;
} caller;

static void *
call_thread(void *arg)
{
	caller *c = arg;
	resil_args a;

	a.method = "getStock";
	a.data = c->key;
	a.len = strlen(c->key);
	resil_result_init(&c->r);
	c->err = resil_pipeline_call(c->p, &a, dep_fn, c->d, &c->r);
	return NULL;
}

/* Start n callers (keys[i % nkeys]); once `blocked` threads wait on the
 * clock, move it one call's latency and join them all. */
static void
run_callers(resil_manual_clock *mc, caller *cs, size_t n, uint32_t blocked)
{
	pthread_t *t = test_malloc(n * sizeof(*t));
	pthread_attr_t at;
	size_t i;

	assert_int_equal(pthread_attr_init(&at), 0);
	assert_int_equal(pthread_attr_setstacksize(&at, 256 * 1024), 0);
	for (i = 0; i < n; i++)
		assert_int_equal(
		    pthread_create(&t[i], &at, call_thread, &cs[i]), 0);
	while (resil_manual_clock_waiters(mc) < blocked)
		sched_yield();
	resil_manual_clock_advance(mc, LAT);
	for (i = 0; i < n; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	(void)pthread_attr_destroy(&at);
	test_free(t);
}

static void
test_coalesce_thousand_calls_one_call(void **state)
{
	enum { N = 1000 };
	resil_manual_clock mc;
	dep d = { &mc, 0, 0 };
	caller *cs = test_calloc(N, sizeof(*cs));
	resil_pipeline *p;
	size_t i, leaders = 0;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = coal_pipeline(&mc, 1024);
	for (i = 0; i < N; i++) {
		cs[i].p = p;
		cs[i].d = &d;
		cs[i].key = "sku-1";
	}
	run_callers(&mc, cs, N, N); /* the leader in the dependency */
	assert_int_equal(d.calls, 1);
	for (i = 0; i < N; i++) {
		assert_int_equal(cs[i].err, RESIL_OK);
		assert_int_equal(cs[i].r.source, RESIL_SOURCE_LIVE);
		assert_int_equal(cs[i].r.value.type, RESIL_VALUE_INT);
		assert_true(cs[i].r.value.u.i == 42);
		if (cs[i].r.attempts == 1) {
			leaders++;
			assert_null(strstr(cs[i].r.message, "coalesced"));
		} else {
			assert_int_equal(cs[i].r.attempts, 0);
			assert_string_equal(cs[i].r.message, "coalesced");
		}
		resil_result_free(&cs[i].r);
	}
	assert_int_equal(leaders, 1);
	resil_pipeline_free(p);
	test_free(cs);
}

static void
test_coalesce_leader_failure_fails_the_followers(void **state)
{
	enum { N = 4 };
	resil_manual_clock mc;
	dep d = { &mc, 0, 1 };
	caller cs[N];
	resil_pipeline *p;
	size_t i;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = coal_pipeline(&mc, 8);
	memset(cs, 0, sizeof(cs));
	for (i = 0; i < N; i++) {
		cs[i].p = p;
		cs[i].d = &d;
		cs[i].key = "sku-1";
	}
	run_callers(&mc, cs, N, N);
	assert_int_equal(d.calls, 1);
	for (i = 0; i < N; i++) {
		assert_int_equal(cs[i].err, RESIL_E_CALL);
		assert_int_equal(cs[i].r.err, RESIL_E_CALL);
		assert_int_equal(cs[i].r.rc, 5);
		resil_result_free(&cs[i].r);
	}
	resil_pipeline_free(p);
}

/* Bound 2: the leader, 2 followers; the 4th and 5th call on their own
 * (each a leader of nothing: its key is taken). */
static void
test_coalesce_bound_goes_on_its_own(void **state)
{
	enum { N = 5 };
	resil_manual_clock mc;
	dep d = { &mc, 0, 0 };
	caller cs[N];
	resil_pipeline *p;
	size_t i, own = 0;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = coal_pipeline(&mc, 2);
	memset(cs, 0, sizeof(cs));
	for (i = 0; i < N; i++) {
		cs[i].p = p;
		cs[i].d = &d;
		cs[i].key = "sku-1";
	}
	run_callers(&mc, cs, N, N);
	assert_int_equal(d.calls, 3);
	for (i = 0; i < N; i++) {
		assert_int_equal(cs[i].err, RESIL_OK);
		assert_true(cs[i].r.value.u.i == 42);
		own += cs[i].r.attempts;
		resil_result_free(&cs[i].r);
	}
	assert_int_equal(own, 3);
	resil_pipeline_free(p);
}

static void
test_coalesce_different_keys_do_not(void **state)
{
	enum { N = 4 };
	static const char *keys[N] = { "a", "b", "ab", "a" };
	resil_manual_clock mc;
	dep d = { &mc, 0, 0 };
	caller cs[N];
	resil_pipeline *p;
	size_t i;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = coal_pipeline(&mc, 8);
	memset(cs, 0, sizeof(cs));
	for (i = 0; i < N; i++) {
		cs[i].p = p;
		cs[i].d = &d;
		cs[i].key = keys[i];
	}
	run_callers(&mc, cs, N, N);
	assert_int_equal(d.calls, 3); /* "a" twice: one call */
	for (i = 0; i < N; i++)
		resil_result_free(&cs[i].r);
	resil_pipeline_free(p);
}

/* Off (the default): every call calls. */
static void
test_coalesce_off_by_default(void **state)
{
	enum { N = 3 };
	resil_manual_clock mc;
	dep d = { &mc, 0, 0 };
	caller cs[N];
	resil_pipeline *p;
	size_t i;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = coal_pipeline(&mc, 0);
	memset(cs, 0, sizeof(cs));
	for (i = 0; i < N; i++) {
		cs[i].p = p;
		cs[i].d = &d;
		cs[i].key = "sku-1";
	}
	run_callers(&mc, cs, N, N);
	assert_int_equal(d.calls, N);
	for (i = 0; i < N; i++)
		resil_result_free(&cs[i].r);
	resil_pipeline_free(p);
}

static void
test_coalesce_config_key(void **state)
{
	resil_config *c = NULL;
	resil_diag diag;
	char buf[64];

	(void)state;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\ngetStock.coalesce=true\n", NULL, NULL,
	                     &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_pipeline(c)->methods[0].coalesce_max_waiters, 1024);
	assert_int_equal(
	    resil_config_get(c, "getStock.coalesce", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "1024");
	resil_config_free(c);
	c = NULL;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\ngetStock.coalesce=16\n", NULL, NULL, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_pipeline(c)->methods[0].coalesce_max_waiters, 16);
	resil_config_free(c);
	c = NULL;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\ngetStock.coalesce=false\n", NULL, NULL,
	                     &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_pipeline(c)->methods[0].coalesce_max_waiters, 0);
	resil_config_free(c);
	c = NULL;
	assert_int_not_equal(resil_config_parse_string(&c,
	                         "service=S\ngetStock.coalesce=yes\n", NULL, NULL,
	                         &diag),
	    RESIL_OK);
	assert_non_null(strstr(diag.msg, "getStock.coalesce"));
	resil_config_free(c);
	c = NULL;
	assert_int_not_equal(resil_config_parse_string(&c,
	                         "service=S\ngetStock.coalesce=2000000\n",
	                         NULL, NULL, &diag),
	    RESIL_OK);
	resil_config_free(c);
}

/* Not with hedging (nor a selector); a bound past 1048576. */
static void
test_coalesce_refused_with_hedging(void **state)
{
	resil_pipeline_config cfg;
	resil_method_config mcfg;
	resil_manual_clock mc;
	resil_pipeline *p = NULL;
	resil_diag diag;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.coalesce_max_waiters = 4;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	cfg.hedge_max = 1;
	cfg.hedge_delay_ns = 10;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "getStock.coalesce: not with hedging or a selector");
	cfg.hedge_max = 0;
	mcfg.coalesce_max_waiters = 1048577;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "getStock.coalesce"));
	assert_null(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalesce_thousand_calls_one_call),
		cmocka_unit_test(
		    test_coalesce_leader_failure_fails_the_followers),
		cmocka_unit_test(test_coalesce_bound_goes_on_its_own),
		cmocka_unit_test(test_coalesce_different_keys_do_not),
		cmocka_unit_test(test_coalesce_off_by_default),
		cmocka_unit_test(test_coalesce_config_key),
		cmocka_unit_test(test_coalesce_refused_with_hedging),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

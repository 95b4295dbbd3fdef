/*
 * Issue 43's read-through cache through the public API, on the manual
 * clock: a method with `cache.fresh` answers from the cache without a
 * call while the cached value is at most that old (source cache, its
 * age); an older value (or none) goes to the dependency, and a failure
 * there is answered by the aged fallback as without it, within the
 * cache's age limit. Both drivers; the configuration key in text, its
 * refusal without a cache, and its reload.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

typedef struct dep {
	int calls;
	int fail; /* the next calls fail (rc 5) */
	int64_t next;
} dep;

/* The dependency: counts its calls, answers 1, 2, 3... or fails. */
static int
dep_fn(void *ctx, const resil_args *args, resil_value *out)
{
	dep *d = ctx;

	(void)args;
	d->calls++;
	if (d->fail)
		return 5;
	*out = resil_value_int(++d->next);
	return 0;
}

static resil_pipeline *
fresh_pipeline(resil_manual_clock *mc, uint64_t fresh, uint64_t max_age)
{
	resil_pipeline_config cfg;
	resil_method_config mcfg;
	resil_pipeline *p = NULL;
	resil_diag diag;

	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.cache_fresh_ns = fresh;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(mc);
	cfg.cache_enabled = 1;
	cfg.cache.max_age = max_age;
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	return p;
}

/* One blocking call of getStock("42"): the result in *r (freed by the
 * caller). */
static resil_err
call(resil_pipeline *p, dep *d, resil_result *r)
{
	resil_args args = { "getStock", "42", 2 };

	return resil_pipeline_call(p, &args, dep_fn, d, r);
}

static void
expect(resil_result *r, resil_source src, int64_t v, uint64_t age)
{
	assert_int_equal(r->err, RESIL_OK);
	assert_int_equal(r->source, src);
	assert_int_equal(r->value.type, RESIL_VALUE_INT);
	assert_int_equal(r->value.u.i, v);
	assert_int_equal(r->age, age);
	resil_result_free(r);
}

static void
test_cache_fresh_answers_without_a_call(void **state)
{
	resil_manual_clock mc;
	resil_pipeline *p;
	resil_result r;
	dep d = { 0, 0, 0 };

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = fresh_pipeline(&mc, 10, 100);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_LIVE, 1, 0);
	assert_int_equal(d.calls, 1);
	/* Fresh up to and including 10 ticks: no call. */
	resil_manual_clock_advance(&mc, 4);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_CACHE, 1, 4);
	resil_manual_clock_advance(&mc, 6);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	assert_int_equal(r.attempts, 0);
	expect(&r, RESIL_SOURCE_CACHE, 1, 10);
	assert_int_equal(d.calls, 1);
	/* 11 ticks: the dependency, whose answer is cached anew. */
	resil_manual_clock_advance(&mc, 1);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_LIVE, 2, 0);
	assert_int_equal(d.calls, 2);
	resil_manual_clock_advance(&mc, 3);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_CACHE, 2, 3);
	assert_int_equal(d.calls, 2);
	resil_pipeline_free(p);
}

static void
test_cache_fresh_stale_goes_to_the_dependency_then_the_fallback(
    void **state)
{
	resil_manual_clock mc;
	resil_pipeline *p;
	resil_result r;
	dep d = { 0, 0, 0 };

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = fresh_pipeline(&mc, 10, 100);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_LIVE, 1, 0);
	/* Older than fresh, the dependency fails: the aged value answers
	 * as the fallback, as without the read-through. */
	d.fail = 1;
	resil_manual_clock_advance(&mc, 50);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	assert_int_equal(d.calls, 2);
	assert_int_equal(r.attempts, 1);
	expect(&r, RESIL_SOURCE_CACHE, 1, 50);
	/* The age limit still holds: 100 is served, 101 is not. */
	resil_manual_clock_advance(&mc, 50);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_CACHE, 1, 100);
	resil_manual_clock_advance(&mc, 1);
	assert_int_not_equal(call(p, &d, &r), RESIL_OK);
	assert_int_not_equal(r.source, RESIL_SOURCE_CACHE);
	resil_result_free(&r);
	assert_int_equal(d.calls, 4);
	/* A miss (another key) calls. */
	d.fail = 0;
	{
		resil_args other = { "getStock", "43", 2 };

		assert_int_equal(
		    resil_pipeline_call(p, &other, dep_fn, &d, &r), RESIL_OK);
		expect(&r, RESIL_SOURCE_LIVE, 2, 0);
	}
	assert_int_equal(d.calls, 5);
	resil_pipeline_free(p);
}

/* The call machine answers DONE at its start, no attempt to run. */
static void
test_cache_fresh_the_machine_answers_at_start(void **state)
{
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *m;
	resil_result r;
	resil_call c;
	resil_call_next st;
	resil_args args = { "getStock", "42", 2 };
	dep d = { 0, 0, 0 };

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = fresh_pipeline(&mc, 10, 100);
	assert_int_equal(resil_pipeline_method(p, "getStock", &m), RESIL_OK);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_LIVE, 1, 0);
	resil_manual_clock_advance(&mc, 7);
	assert_int_equal(resil_call_start(&c, p, m, &args, &r,
	                     resil_manual_clock_now(&mc), &st),
	    RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	expect(&r, RESIL_SOURCE_CACHE, 1, 7);
	/* Past fresh: attempt 1 runs. */
	resil_manual_clock_advance(&mc, 4);
	assert_int_equal(resil_call_start(&c, p, m, &args, &r,
	                     resil_manual_clock_now(&mc), &st),
	    RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	{
		resil_value v = resil_value_int(9);

		assert_int_equal(resil_call_report(&c, st.attempt, 0, &v,
		                     resil_manual_clock_now(&mc)),
		    RESIL_OK);
	}
	assert_int_equal(
	    resil_call_step(&c, resil_manual_clock_now(&mc), &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	expect(&r, RESIL_SOURCE_LIVE, 9, 0);
	resil_pipeline_free(p);
}

static void
test_cache_fresh_config_key(void **state)
{
	resil_config *c = NULL;
	resil_pipeline *p = NULL;
	resil_pipeline_config pc;
	resil_manual_clock mc;
	resil_diag diag;
	resil_result r;
	dep d = { 0, 0, 0 };
	char buf[32];

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=StockService\ncache.enabled=true\n"
	                     "cache.max_age=1s\ngetStock.cache.fresh=200ms\n",
	                     NULL, NULL, &diag),
	    RESIL_OK);
	assert_true(resil_config_pipeline(c)->methods[0].cache_fresh_ns ==
	    200 * RESIL_NS_PER_MS);
	assert_int_equal(resil_config_get(c, "getStock.cache.fresh", buf,
	                     sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "200ms");
	pc = *resil_config_pipeline(c);
	pc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_pipeline_new(&p, &pc, &diag), RESIL_OK);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	resil_result_free(&r);
	resil_manual_clock_advance(&mc, 200 * RESIL_NS_PER_MS);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_CACHE, 1, 200 * RESIL_NS_PER_MS);
	/* Reloaded to 100ms: the same value's age is past it. */
	assert_int_equal(resil_pipeline_reload_string(p,
	                     "service=StockService\ncache.enabled=true\n"
	                     "cache.max_age=1s\ngetStock.cache.fresh=100ms\n",
	                     NULL, &diag),
	    RESIL_OK);
	assert_int_equal(call(p, &d, &r), RESIL_OK);
	expect(&r, RESIL_SOURCE_LIVE, 2, 0);
	assert_int_equal(d.calls, 2);
	resil_pipeline_free(p);
	resil_config_free(c);

	/* Bad values and a read-through without a cache are refused. */
	c = NULL;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\ngetStock.cache.fresh=soon\n", NULL,
	                     NULL, &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "getStock.cache.fresh"));
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\ngetStock.cache.fresh=1s\n", NULL,
	                     NULL, &diag),
	    RESIL_OK);
	pc = *resil_config_pipeline(c);
	assert_int_equal(resil_pipeline_new(&p, &pc, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "getStock.cache.fresh"));
	assert_non_null(strstr(diag.msg, "cache.enabled"));
	resil_config_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_fresh_answers_without_a_call),
		cmocka_unit_test(
		    test_cache_fresh_stale_goes_to_the_dependency_then_the_fallback),
		cmocka_unit_test(test_cache_fresh_the_machine_answers_at_start),
		cmocka_unit_test(test_cache_fresh_config_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

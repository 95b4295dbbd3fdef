/*
 * The success path of every stage allocates nothing after set-up: N calls
 * through each, with a counting allocator, leave the allocation count
 * where set-up left it.
 *
 * The cache included: a record of the value the key holds already, and a
 * hit, whatever the value's type (a string, bytes or JSON value is served
 * as a reference on the cache's entry, not a copy; issue 39).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/fallback.h>
#include <resil/limit.h>
#include <resil/mock.h>
#include <resil/pipeline.h>
#include <resil/retry.h>
#include <resil/value.h>

#include "support/fail_alloc.h"

#define CALLS 10000

static void
breaker_calls(resil_breaker_config *cfg)
{
	resil_manual_clock mc;
	fail_alloc fa;
	resil_breaker *b;
	resil_permit p;
	uint64_t after_setup;
	int i;

	resil_manual_clock_init(&mc, 1);
	cfg->clock = resil_manual_clock_hook(&mc);
	cfg->alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_breaker_new(&b, cfg, NULL), RESIL_OK);
	after_setup = fa.allocs;
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
		assert_int_equal(
		    resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
		resil_manual_clock_advance(&mc, 1);
	}
	assert_int_equal(fa.allocs, after_setup);
	resil_breaker_free(b);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

static void
test_hotpath_breaker_allocates_nothing(void **state)
{
	resil_breaker_config cfg;

	(void)state;
	resil_breaker_config_init(&cfg); /* count window of 100 */
	breaker_calls(&cfg);
	resil_breaker_config_init(&cfg);
	cfg.failure_rate_pct = 0;
	cfg.consecutive_failures = 5;
	breaker_calls(&cfg);
	resil_breaker_config_init(&cfg);
	cfg.window_type = RESIL_WINDOW_TIME;
	cfg.window_size = 10;
	cfg.bucket_ns = 100;
	cfg.slow_rate_pct = 50;
	cfg.slow_threshold_ns = 1000;
	breaker_calls(&cfg);
}

static int
ok_attempt(void *ctx, resil_retry_attempt *at, void *out)
{
	(void)at;
	(void)out;
	(*(int *)ctx)++;
	return 0;
}

static void
test_hotpath_retry_allocates_nothing(void **state)
{
	resil_manual_clock mc;
	resil_retry_config cfg = resil_retry_config_default();
	resil_retry_result res;
	fail_alloc fa;
	resil_retry *r;
	uint64_t after_setup;
	int i, calls = 0;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.jitter = RESIL_JITTER_FULL;
	cfg.budget_ratio = 0.1;
	cfg.deadline_ns = 1000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	after_setup = fa.allocs;
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(
		    resil_retry_call(r, ok_attempt, &calls, NULL, &res),
		    RESIL_OK);
		assert_int_equal(res.attempts, 1);
	}
	assert_int_equal(calls, CALLS);
	assert_int_equal(fa.allocs, after_setup);
	resil_retry_free(r);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

/* ---- fallback chain and result cache ---- */

#define VALUE64 \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static const uint64_t item_id = 42;
static const resil_args stock_args = { "getStock", &item_id, sizeof(item_id) };

/* The live call: succeeds with int 7 (no heap), counting its calls. */
static int
call_ok(void *ctx, const resil_args *args, resil_value *out)
{
	(void)args;
	(*(int *)ctx)++;
	*out = resil_value_int(7);
	return 0;
}

/* The live call: fails with rc 5, counting its calls. */
static int
call_fail(void *ctx, const resil_args *args, resil_value *out)
{
	(void)args;
	(void)out;
	(*(int *)ctx)++;
	return 5;
}

/* A chain holding one `fail:return 0` mock of getStock (declared int),
 * everything allocated through fa. */
static void
mock_chain_new(fail_alloc *fa, resil_mock **m, resil_fallback **fb)
{
	resil_mock_config mcfg = resil_mock_config_default();
	resil_fallback_config fcfg = resil_fallback_config_default();

	mcfg.service = "StockService";
	mcfg.spec = "fail:return 0";
	mcfg.alloc = &fa->hook;
	fcfg.alloc = &fa->hook;
	assert_int_equal(resil_mock_new(m, &mcfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_mock_set_method(*m, "getStock", RESIL_TYPE_INT, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(resil_fallback_new(fb, &fcfg, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(*fb, *m), RESIL_OK);
}

static void
test_hotpath_fallback_pass_allocates_nothing(void **state)
{
	resil_fallback *fb;
	resil_result res;
	resil_mock *m;
	fail_alloc fa;
	uint64_t allocs, frees;
	int i, calls = 0;

	(void)state;
	fail_alloc_init(&fa, 0);
	mock_chain_new(&fa, &m, &fb);
	allocs = fa.allocs;
	frees = fa.frees;
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(resil_fallback_call(fb, &stock_args, call_ok,
		                     &calls, NULL, &res),
		    RESIL_OK);
		assert_int_equal(res.source, RESIL_SOURCE_LIVE);
		assert_int_equal(res.value.type, RESIL_VALUE_INT);
		assert_int_equal(res.value.u.i, 7);
		resil_result_free(&res);
	}
	assert_int_equal(calls, CALLS);
	assert_int_equal(fa.allocs, allocs);
	assert_int_equal(fa.frees, frees);
	resil_fallback_free(fb);
	resil_mock_free(m);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
}

static void
test_hotpath_fallback_mock_return_allocates_nothing(void **state)
{
	resil_fallback *fb;
	resil_result res;
	resil_mock *m;
	fail_alloc fa;
	uint64_t allocs, frees;
	int i, calls = 0;

	(void)state;
	fail_alloc_init(&fa, 0);
	mock_chain_new(&fa, &m, &fb);
	allocs = fa.allocs;
	frees = fa.frees;
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(resil_fallback_call(fb, &stock_args,
		                     call_fail, &calls, NULL, &res),
		    RESIL_OK);
		assert_int_equal(res.source, RESIL_SOURCE_MOCK);
		assert_int_equal(res.value.type, RESIL_VALUE_INT);
		assert_int_equal(res.value.u.i, 0);
		assert_int_equal(res.cause, RESIL_E_CALL);
		assert_int_equal(res.cause_rc, 5);
		resil_result_free(&res);
	}
	assert_int_equal(calls, CALLS);
	assert_int_equal(fa.allocs, allocs);
	assert_int_equal(fa.frees, frees);
	resil_fallback_free(fb);
	resil_mock_free(m);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
}

/*
 * A cache holding v for stock_args, and a chain holding that cache, all
 * through fa. Then CALLS records of the same value (resil_cache_put() and
 * resil_fallback_record()), CALLS hits by resil_cache_get() and CALLS
 * answers of a failing call from the cache through resil_fallback_call();
 * returns the allocations all of them made (the frees must match).
 */
static uint64_t
cache_hits(const resil_value *v)
{
	resil_manual_clock mc;
	resil_cache_config ccfg = resil_cache_config_default();
	resil_fallback_config fcfg = resil_fallback_config_default();
	resil_fallback *fb;
	resil_cache *c;
	resil_result res;
	resil_value got;
	fail_alloc fa;
	uint64_t allocs, frees, age;
	int i, calls = 0;

	fail_alloc_init(&fa, 0);
	resil_manual_clock_init(&mc, 1);
	ccfg.clock = resil_manual_clock_hook(&mc);
	ccfg.alloc = &fa.hook;
	fcfg.alloc = &fa.hook;
	assert_int_equal(resil_cache_new(&c, &ccfg, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_new(&fb, &fcfg, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &stock_args, v), RESIL_OK);
	allocs = fa.allocs;
	frees = fa.frees;
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(resil_cache_put(c, &stock_args, v), RESIL_OK);
		assert_int_equal(
		    resil_fallback_record(fb, &stock_args, v), RESIL_OK);
	}
	for (i = 0; i < CALLS; i++) {
		resil_manual_clock_advance(&mc, 1);
		assert_int_equal(
		    resil_cache_get(c, &stock_args, &got, &age), RESIL_OK);
		assert_true(resil_value_equal(&got, v));
		assert_int_equal(age, (uint64_t)i + 1);
		resil_value_free(&got);
	}
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(resil_fallback_call(fb, &stock_args,
		                     call_fail, &calls, NULL, &res),
		    RESIL_OK);
		assert_int_equal(res.source, RESIL_SOURCE_CACHE);
		assert_true(resil_value_equal(&res.value, v));
		resil_result_free(&res);
	}
	assert_int_equal(calls, CALLS);
	allocs = fa.allocs - allocs;
	assert_int_equal(fa.frees - frees, allocs);
	resil_fallback_free(fb);
	resil_cache_free(c);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
	return allocs;
}

static void
test_hotpath_cache_hit_int_allocates_nothing(void **state)
{
	resil_value v = resil_value_int(123456789);

	(void)state;
	assert_int_equal(cache_hits(&v), 0);
	v = resil_value_double(2.5);
	assert_int_equal(cache_hits(&v), 0);
	v = resil_value_null(); /* the NULL sentinel */
	assert_int_equal(cache_hits(&v), 0);
}

static void
test_hotpath_cache_hit_string_allocates_nothing(void **state)
{
	resil_value v;

	(void)state;
	assert_int_equal(resil_value_string(&v, VALUE64, 64, NULL), RESIL_OK);
	/* Was one copy of the 64 bytes per hit until issue 39. */
	assert_int_equal(cache_hits(&v), 0);
	resil_value_free(&v);
	assert_int_equal(resil_value_bytes(&v, "ab\0c", 4, NULL), RESIL_OK);
	assert_int_equal(cache_hits(&v), 0);
	resil_value_free(&v);
}

/* ---- rate limiter and bulkhead ---- */

static void
test_hotpath_ratelimit_allocates_nothing(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit_metrics mt;
	resil_ratelimit *rl;
	fail_alloc fa;
	uint64_t allocs, frees, retry_after = 0, waited = 1;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.rate = 10;
	cfg.period_ns = 100; /* one permit every 10 ticks */
	cfg.burst = 1;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	allocs = fa.allocs;
	frees = fa.frees;
	for (i = 0; i < CALLS; i++) {
		/* Granted, then rejected until the next permit is due. */
		assert_int_equal(
		    resil_ratelimit_try_acquire(rl, 1, &retry_after),
		    RESIL_OK);
		assert_int_equal(
		    resil_ratelimit_try_acquire(rl, 1, &retry_after),
		    RESIL_E_LIMITED);
		assert_int_equal(retry_after, 10);
		resil_manual_clock_advance(&mc, 10);
	}
	/* Waiting on the manual clock (its sleep advances it). */
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(
		    resil_ratelimit_acquire_wait(rl, 1, 10, &waited),
		    RESIL_OK);
		assert_int_equal(waited, i == 0 ? 0 : 10);
	}
	assert_int_equal(fa.allocs, allocs);
	assert_int_equal(fa.frees, frees);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &mt), RESIL_OK);
	assert_int_equal(mt.granted_calls, 2 * CALLS);
	assert_int_equal(mt.rejected_calls, CALLS);
	assert_int_equal(mt.waited_calls, CALLS - 1);
	resil_ratelimit_free(rl);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

static void
bulkhead_calls(resil_bulkhead_config *cfg)
{
	resil_manual_clock mc;
	resil_bulkhead_metrics mt;
	resil_bulkhead *bh;
	fail_alloc fa;
	uint64_t allocs, frees;
	uint32_t j, limit;
	int i;

	resil_manual_clock_init(&mc, 1);
	cfg->clock = resil_manual_clock_hook(&mc);
	cfg->alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_bulkhead_new(&bh, cfg, NULL), RESIL_OK);
	allocs = fa.allocs;
	frees = fa.frees;
	for (i = 0; i < CALLS; i++) {
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
		assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	}
	/* Samples for the limit: good, slow and failed. */
	for (i = 0; i < CALLS; i++)
		assert_int_equal(resil_bulkhead_record(bh,
		                     i % 3 == 0 ? RESIL_OUTCOME_FAILURE
		                                : RESIL_OUTCOME_SUCCESS,
		                     (uint64_t)(i % 20)),
		    RESIL_OK);
	/* Fill it, be rejected, drain it, recording successes. */
	limit = resil_bulkhead_get_limit(bh);
	for (j = 0; j < limit; j++)
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	for (j = 0; j < limit; j++)
		assert_int_equal(
		    resil_bulkhead_complete(bh, RESIL_OUTCOME_SUCCESS, 1),
		    RESIL_OK);
	assert_int_equal(fa.allocs, allocs);
	assert_int_equal(fa.frees, frees);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &mt), RESIL_OK);
	assert_int_equal(mt.granted, (uint64_t)CALLS + limit);
	assert_int_equal(mt.rejected, 1);
	assert_int_equal(mt.in_flight, 0);
	assert_int_equal(
	    mt.good_samples + mt.bad_samples, (uint64_t)CALLS + limit);
	resil_bulkhead_free(bh);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

static void
test_hotpath_bulkhead_allocates_nothing(void **state)
{
	resil_bulkhead_config cfg;

	(void)state;
	resil_bulkhead_config_init(&cfg); /* fixed, 25 */
	bulkhead_calls(&cfg);
	resil_bulkhead_config_init(&cfg);
	cfg.adaptive = 1;
	cfg.max_concurrent = 4;
	cfg.min_limit = 1;
	cfg.max_limit = 8;
	cfg.target_latency_ns = 10;
	bulkhead_calls(&cfg);
}

/* ---- the pipeline, through both drivers ---- */

static int
pipe_ok(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(8);
	return 0;
}

static resil_verdict
pipe_never(void *ctx, const resil_args *args, const resil_failure *f,
    resil_result *out)
{
	(void)ctx;
	(void)args;
	(void)f;
	(void)out;
	return RESIL_FALLBACK_PASS;
}

/* driver 0: resil_pipeline_call (by name); 1: resil_pipeline_call_method;
 * 2: the machine stepped by hand. */
/* seed: the seeds' configuration on top of timed (the cache with an age
 * limit recording every success, a fail: mock); its first call fills the
 * cache, after which a success allocates nothing either. */
static void
pipeline_calls_ex(int timed, int seed, int driver)
{
	resil_manual_clock mc;
	fail_alloc fa;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	const resil_method *m;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_value v;
	uint64_t after_setup;
	int i;

	resil_manual_clock_init(&mc, 1);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.retry_enabled = 1;
	if (timed) {
		cfg.breaker.slow_threshold_ns = 1000;
		cfg.breaker.slow_rate_pct = 80;
		cfg.timeout_ns = 1000;
	}
	if (seed) {
		cfg.cache_enabled = 1;
		cfg.cache.max_age = 60 * RESIL_NS_PER_SEC;
		cfg.mock = "fail:return null";
	}
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_add_handler(p, pipe_never, NULL), RESIL_OK);
	assert_int_equal(resil_pipeline_method(p, "getStock", &m), RESIL_OK);
	after_setup = fa.allocs;
	for (i = 0; i < CALLS; i++) {
		if (i == 1 && seed)
			after_setup = fa.allocs; /* the cache's entry */
		switch (driver) {
		case 0:
			assert_int_equal(
			    resil_pipeline_call(p, &args, pipe_ok, NULL, &r),
			    RESIL_OK);
			break;
		case 1:
			assert_int_equal(resil_pipeline_call_method(
			                     p, m, &args, pipe_ok, NULL, &r),
			    RESIL_OK);
			break;
		default:
			assert_int_equal(
			    resil_call_start(&call, p, m, &args, &r,
			        resil_manual_clock_now(&mc), &st),
			    RESIL_OK);
			assert_int_equal(st.action, RESIL_CALL_RUN);
			v = resil_value_int(8);
			assert_int_equal(
			    resil_call_report(&call, st.attempt, 0, &v,
			        resil_manual_clock_now(&mc)),
			    RESIL_OK);
			assert_int_equal(resil_call_step(&call,
			                     resil_manual_clock_now(&mc), &st),
			    RESIL_OK);
			assert_int_equal(st.action, RESIL_CALL_DONE);
			break;
		}
		assert_int_equal(r.err, RESIL_OK);
		assert_int_equal(r.value.u.i, 8);
		resil_result_free(&r);
		resil_manual_clock_advance(&mc, 1);
	}
	assert_int_equal(fa.allocs, after_setup);
	resil_pipeline_free(p);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

static void
pipeline_calls(int timed, int driver)
{
	pipeline_calls_ex(timed, 0, driver);
}

static void
test_hotpath_pipeline_blocking_allocates_nothing(void **state)
{
	(void)state;
	pipeline_calls(0, 0);
	pipeline_calls(0, 1);
	pipeline_calls(1, 0);
	pipeline_calls(1, 1);
	pipeline_calls_ex(1, 1, 0);
	pipeline_calls_ex(1, 1, 1);
}

static void
test_hotpath_pipeline_machine_allocates_nothing(void **state)
{
	(void)state;
	pipeline_calls(0, 2);
	pipeline_calls(1, 2);
	pipeline_calls_ex(1, 1, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hotpath_breaker_allocates_nothing),
		cmocka_unit_test(test_hotpath_retry_allocates_nothing),
		cmocka_unit_test(test_hotpath_fallback_pass_allocates_nothing),
		cmocka_unit_test(
		    test_hotpath_fallback_mock_return_allocates_nothing),
		cmocka_unit_test(test_hotpath_cache_hit_int_allocates_nothing),
		cmocka_unit_test(
		    test_hotpath_cache_hit_string_allocates_nothing),
		cmocka_unit_test(test_hotpath_ratelimit_allocates_nothing),
		cmocka_unit_test(test_hotpath_bulkhead_allocates_nothing),
		cmocka_unit_test(
		    test_hotpath_pipeline_blocking_allocates_nothing),
		cmocka_unit_test(
		    test_hotpath_pipeline_machine_allocates_nothing),
	};

	return cmocka_run_group_tests_name("hotpath_alloc", tests, NULL, NULL);
}

/*
 * The success path of every stage allocates nothing after set-up: N calls
 * through each, with a counting allocator, leave the allocation count
 * where set-up left it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/retry.h>

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
		    resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
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
		    resil_retry_call(r, ok_attempt, &calls, NULL, &res), RESIL_OK);
		assert_int_equal(res.attempts, 1);
	}
	assert_int_equal(calls, CALLS);
	assert_int_equal(fa.allocs, after_setup);
	resil_retry_free(r);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hotpath_breaker_allocates_nothing),
		cmocka_unit_test(test_hotpath_retry_allocates_nothing),
	};

	return cmocka_run_group_tests_name("hotpath_alloc", tests, NULL, NULL);
}

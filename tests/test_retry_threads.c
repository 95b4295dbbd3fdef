/*
 * The retry budget shared by 2 to 8 threads. Time stands still (manual
 * clock, zero waits), so the bound is exact: with N calls each depositing
 * budget_ratio, and every call retrying until refused, the retries made
 * are floor(N * ratio) from the bank plus the floor's burst, never more,
 * however the threads interleave.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/retry.h>

#include "atomic.h"

#define CALLS_PER_THREAD 2000

typedef struct shared {
	resil_retry *r;
	uint64_t invocations;  /* every attempt, counted atomically */
	uint64_t retries_seen; /* attempts with number > 1 */
	uint64_t events;       /* RETRY events */
	uint64_t bad;          /* anything that must not happen */
	pthread_barrier_t start;
} shared;

static int
always_fails(void *ctx, resil_retry_attempt *at, void *out)
{
	shared *sh = ctx;

	(void)out;
	resil__faa64(&sh->invocations, 1);
	if (at->number > 1)
		resil__faa64(&sh->retries_seen, 1);
	if (at->number > 1000)
		resil__faa64(&sh->bad, 1);
	return 5;
}

static void
count_events(const resil_retry_event *ev, void *ctx)
{
	shared *sh = ctx;

	if (ev->type == RESIL_RETRY_EVENT_RETRY)
		resil__faa64(&sh->events, 1);
}

static void *
worker(void *arg)
{
	shared *sh = arg;
	resil_retry_result res;
	int i;

	pthread_barrier_wait(&sh->start);
	for (i = 0; i < CALLS_PER_THREAD; i++) {
		if (resil_retry_call(sh->r, always_fails, sh, NULL, &res) !=
		        RESIL_OK ||
		    res.stop != RESIL_RETRY_STOP_BUDGET || res.rc != 5)
			resil__faa64(&sh->bad, 1);
	}
	return NULL;
}

static void
run(unsigned nthreads, double ratio, uint32_t floor_retries,
    uint64_t expect_retries)
{
	resil_manual_clock mc;
	resil_retry_config cfg = resil_retry_config_default();
	resil_retry_metrics m;
	pthread_t th[8];
	shared sh;
	unsigned i;

	memset(&sh, 0, sizeof(sh));
	resil_manual_clock_init(&mc, 1000);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.max_attempts = 1000;
	cfg.base_delay_ns = 0;
	cfg.jitter = RESIL_JITTER_FULL; /* concurrent draws, too */
	cfg.budget_ratio = ratio;
	cfg.budget_max_tokens = 1000000;
	cfg.budget_min_retries = floor_retries;
	cfg.budget_period_ns = RESIL_NS_PER_SEC;
	cfg.listener = count_events;
	cfg.listener_ctx = &sh;
	assert_int_equal(resil_retry_new(&sh.r, &cfg, NULL), RESIL_OK);
	assert_int_equal(pthread_barrier_init(&sh.start, NULL, nthreads), 0);
	for (i = 0; i < nthreads; i++)
		assert_int_equal(pthread_create(&th[i], NULL, worker, &sh), 0);
	for (i = 0; i < nthreads; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&sh.start);

	assert_int_equal(sh.bad, 0);
	assert_int_equal(sh.retries_seen, expect_retries);
	assert_int_equal(sh.events, expect_retries);
	assert_int_equal(
	    sh.invocations, nthreads * CALLS_PER_THREAD + expect_retries);
	assert_int_equal(resil_retry_get_metrics(sh.r, &m), RESIL_OK);
	assert_int_equal(m.calls, nthreads * CALLS_PER_THREAD);
	assert_int_equal(m.retries, expect_retries);
	assert_int_equal(m.attempts, sh.invocations);
	assert_int_equal(m.budget_refusals, m.calls);
	/* What is left in the bank is less than one token. */
	assert_true(m.budget_tokens >= 0.0 && m.budget_tokens < 1.0);
	/* The clock never moved: waits were zero. */
	assert_int_equal(resil_manual_clock_now(&mc), 1000);
	resil_retry_free(sh.r);
}

static void
test_retry_threads_budget_bounds_retries(void **state)
{
	unsigned n;

	(void)state;
	for (n = 2; n <= 8; n *= 2) {
		/* 10%: n * 400 calls bank n * 40 tokens. */
		run(n, 0.1, 0, n * CALLS_PER_THREAD / 10);
		/* 3% (30000 millionths a call): floor(n * 400 * 0.03). */
		run(n, 0.03, 0, n * CALLS_PER_THREAD * 3 / 100);
	}
}

static void
test_retry_threads_budget_floor_is_exact(void **state)
{
	unsigned n;

	(void)state;
	/* Time stands still: the floor gives its burst of 7 once, on top
	 * of the bank's 10%. */
	for (n = 2; n <= 8; n *= 2)
		run(n, 0.1, 7, n * CALLS_PER_THREAD / 10 + 7);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retry_threads_budget_bounds_retries),
		cmocka_unit_test(test_retry_threads_budget_floor_is_exact),
	};

	return cmocka_run_group_tests_name("retry_threads", tests, NULL, NULL);
}

#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/limit.h>

#include "atomic.h"

#define MAX_THREADS 8

/* ---- bulkhead: never more than N in flight ---- */

typedef struct bh_shared {
	resil_bulkhead *bh;
	uint64_t in_flight; /* the test's own count, by atomic add */
	uint64_t max_seen;
	uint64_t granted;
	uint64_t rejected;
	uint64_t errors; /* unexpected return codes */
	int iterations;
	int adaptive;
} bh_shared;

static void
note_max(uint64_t *max, uint64_t v)
{
	uint64_t cur = resil__load64(max);

	while (v > cur && !resil__cas64(max, cur, v))
		cur = resil__load64(max);
}

static void *
bh_worker(void *arg)
{
	bh_shared *s = arg;
	resil_rng rng;
	int i;

	resil_rng_seed(&rng, (uint64_t)(uintptr_t)&rng);
	for (i = 0; i < s->iterations; i++) {
		resil_err err = resil_bulkhead_try_acquire(s->bh);
		uint64_t r;

		if (err == RESIL_E_LIMITED) {
			resil__faa64(&s->rejected, 1);
			continue;
		}
		if (err != RESIL_OK) {
			resil__faa64(&s->errors, 1);
			continue;
		}
		resil__faa64(&s->granted, 1);
		note_max(&s->max_seen, resil__faa64(&s->in_flight, 1) + 1);
		r = resil_rng_next(&rng);
		if ((r & 3) == 0)
			resil__stall();
		resil__faa64(&s->in_flight, UINT64_MAX); /* minus one */
		if (s->adaptive)
			err = resil_bulkhead_complete(s->bh,
			    (r & 0x30) == 0 ? RESIL_OUTCOME_FAILURE
			                    : RESIL_OUTCOME_SUCCESS,
			    (r >> 8) % 120);
		else
			err = resil_bulkhead_release(s->bh);
		if (err != RESIL_OK)
			resil__faa64(&s->errors, 1);
	}
	return NULL;
}

static void
run_bulkhead(int nthreads, uint32_t limit, int adaptive)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead_metrics m;
	pthread_t th[MAX_THREADS];
	bh_shared s;
	int i;

	memset(&s, 0, sizeof(s));
	cfg.max_concurrent = limit;
	if (adaptive) {
		cfg.adaptive = 1;
		cfg.min_limit = 1;
		cfg.max_limit = limit + 2;
		cfg.target_latency_ns = 100;
	}
	assert_int_equal(resil_bulkhead_new(&s.bh, &cfg, NULL), RESIL_OK);
	s.iterations = 20000;
	s.adaptive = adaptive;
	for (i = 0; i < nthreads; i++)
		assert_int_equal(
		    pthread_create(&th[i], NULL, bh_worker, &s), 0);
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);

	assert_int_equal(s.errors, 0);
	/* The invariant: never more in flight than the (largest) limit. */
	assert_true(s.max_seen >= 1);
	assert_true(s.max_seen <= (adaptive ? limit + 2 : limit));
	assert_int_equal(s.in_flight, 0);
	assert_int_equal(resil_bulkhead_get_metrics(s.bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);
	assert_int_equal(m.granted, s.granted);
	assert_int_equal(m.rejected, s.rejected);
	assert_int_equal(m.released, s.granted);
	assert_int_equal(m.granted + m.rejected, (uint64_t)nthreads * 20000);
	assert_true(m.peak_in_flight <= (adaptive ? limit + 2 : limit));
	if (adaptive) {
		assert_int_equal(m.good_samples + m.bad_samples, s.granted);
		assert_true(m.limit >= 1 && m.limit <= limit + 2);
	}
	resil_bulkhead_free(s.bh);
}

static void
test_limit_threads_bulkhead_never_exceeds_limit(void **state)
{
	int n;

	(void)state;
	for (n = 2; n <= MAX_THREADS; n *= 2) {
		run_bulkhead(n, 1, 0);
		run_bulkhead(n, 3, 0);
	}
}

static void
test_limit_threads_adaptive_stays_in_bounds(void **state)
{
	(void)state;
	run_bulkhead(4, 3, 1);
	run_bulkhead(8, 5, 1);
}

/* ---- rate limiter: never more than burst + elapsed * rate ---- */

typedef struct rl_shared {
	resil_ratelimit *rl;
	resil_manual_clock *mc;
	uint64_t start;
	uint32_t rate, burst;
	uint64_t period;
	uint64_t max_step; /* clock advance per step (1 in 8 calls) */
	uint64_t big_step; /* a jump, 1 in 256 calls; 0: none */
	uint64_t granted;  /* permits */
	uint64_t violations;
	uint64_t errors;
	int iterations;
} rl_shared;

/* burst + floor(elapsed * rate / period), without overflow for the
 * values used here. */
static uint64_t
rl_bound(const rl_shared *s, uint64_t now)
{
	uint64_t d = now - s->start;

	return s->burst + d / s->period * s->rate +
	    d % s->period * s->rate / s->period;
}

static void *
rl_worker(void *arg)
{
	rl_shared *s = arg;
	resil_rng rng;
	int i;

	resil_rng_seed(&rng, (uint64_t)(uintptr_t)&rng ^ 0x5eed);
	for (i = 0; i < s->iterations; i++) {
		uint64_t r = resil_rng_next(&rng);
		uint32_t k = (r & 0x100) ? 2 : 1;
		uint64_t total, now;
		resil_err err;

		if ((r & 0xff) == 0 && s->big_step != 0)
			resil_manual_clock_advance(
			    s->mc, (r >> 16) % s->big_step);
		else if ((r & 7) == 0)
			resil_manual_clock_advance(
			    s->mc, (r >> 16) % s->max_step);
		err = resil_ratelimit_try_acquire(s->rl, k, NULL);
		if (err == RESIL_E_LIMITED)
			continue;
		if (err != RESIL_OK) {
			resil__faa64(&s->errors, 1);
			continue;
		}
		/* Every grant counted so far was decided at a clock reading
		 * no later than this one. */
		total = resil__faa64(&s->granted, k) + k;
		now = resil_manual_clock_now(s->mc);
		if (total > rl_bound(s, now))
			resil__faa64(&s->violations, 1);
	}
	return NULL;
}

static void
run_ratelimit(int nthreads, uint32_t rate, uint64_t period, uint32_t burst,
    uint64_t start, uint64_t max_step, uint64_t big_step)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit_metrics m;
	resil_manual_clock mc;
	pthread_t th[MAX_THREADS];
	rl_shared s;
	uint64_t end;
	int i;

	memset(&s, 0, sizeof(s));
	resil_manual_clock_init(&mc, start);
	cfg.rate = rate;
	cfg.period_ns = period;
	cfg.burst = burst;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_ratelimit_new(&s.rl, &cfg, NULL), RESIL_OK);
	s.mc = &mc;
	s.start = start;
	s.rate = rate;
	s.burst = burst;
	s.period = period;
	s.max_step = max_step;
	s.big_step = big_step;
	s.iterations = 20000;
	for (i = 0; i < nthreads; i++)
		assert_int_equal(
		    pthread_create(&th[i], NULL, rl_worker, &s), 0);
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);

	end = resil_manual_clock_now(&mc);
	assert_int_equal(s.errors, 0);
	assert_int_equal(s.violations, 0);
	assert_true(s.granted <= rl_bound(&s, end));
	assert_true(
	    s.granted > burst); /* the clock moved: more than one burst */
	assert_int_equal(resil_ratelimit_get_metrics(s.rl, &m), RESIL_OK);
	assert_int_equal(m.granted_permits, s.granted);
	assert_int_equal(
	    m.granted_calls + m.rejected_calls, (uint64_t)nthreads * 20000);
	resil_ratelimit_free(s.rl);
}

static void
test_limit_threads_ratelimit_never_over_rate(void **state)
{
	int n;

	(void)state;
	for (n = 2; n <= MAX_THREADS; n *= 2) {
		run_ratelimit(n, 3, 10, 5, 1000, 3, 0);
		/* Scale near its maximum (16777213) with a permit about
		 * every 2^20 ticks: the time base moves about every 2^28
		 * ticks, so about every 256 permits, while threads race. */
		run_ratelimit(n, 16777213, UINT64_C(1) << 44, 50, 12345,
		    UINT64_C(1) << 21, 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_limit_threads_bulkhead_never_exceeds_limit),
		cmocka_unit_test(test_limit_threads_adaptive_stays_in_bounds),
		cmocka_unit_test(test_limit_threads_ratelimit_never_over_rate),
	};

	return cmocka_run_group_tests_name("limit_threads", tests, NULL, NULL);
}

#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
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
run_bulkhead_with(int nthreads, uint32_t limit, int adaptive, uint32_t batch)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead_metrics m;
	pthread_t th[MAX_THREADS];
	bh_shared s;
	int i;

	memset(&s, 0, sizeof(s));
	cfg.max_concurrent = limit;
	cfg.batch = batch;
	if (adaptive == RESIL_BULKHEAD_AIMD) {
		cfg.adaptive = 1;
		cfg.min_limit = 1;
		cfg.max_limit = limit + 2;
		cfg.target_latency_ns = 100;
	}
	if (adaptive == RESIL_BULKHEAD_GRADIENT) {
		/* Netflix's limit, its samples serialised by its lock and
		 * the answer stored with a CAS, 1..limit + 2. */
		cfg.adaptive = RESIL_BULKHEAD_GRADIENT;
		cfg.gradient.min_limit = 1;
		cfg.gradient.initial_limit = limit;
		cfg.gradient.max_limit = limit + 2;
		cfg.gradient.long_window = 20;
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
	if (adaptive == RESIL_BULKHEAD_GRADIENT) {
		resil_gradient_metrics gm;
		assert_int_equal(resil_gradient_get_metrics(
		                     resil_bulkhead_gradient(s.bh), &gm),
		    RESIL_OK);
		assert_int_equal(gm.samples, s.granted); /* none lost */
		assert_int_equal(gm.limit, m.limit);
	}
	resil_bulkhead_free(s.bh);
}

static void
run_bulkhead(int nthreads, uint32_t limit, int adaptive)
{
	run_bulkhead_with(nthreads, limit, adaptive, 0);
}

/* The limit holds exactly with leases of batch slots per thread. */
static void
run_bulkhead_batched(int nthreads, uint32_t limit, uint32_t batch)
{
	run_bulkhead_with(nthreads, limit, 0, batch);
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
	run_bulkhead(4, 3, RESIL_BULKHEAD_GRADIENT);
	run_bulkhead(8, 5, RESIL_BULKHEAD_GRADIENT);
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
	/* The window check: slack = nthreads * batch (cached permits) +
	 * 2 * nthreads (a grant decided before a window opened may be
	 * counted by the test just after: one per thread, k <= 2). */
	uint64_t slack;
	uint64_t window_violations;
	uint64_t max_excess; /* the most over burst + rate * window seen */
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

/* Permits due in a window of d ticks: floor(d * rate / period). */
static uint64_t
rl_due(const rl_shared *s, uint64_t d)
{
	return d / s->period * s->rate + d % s->period * s->rate / s->period;
}

static void *
rl_worker(void *arg)
{
	rl_shared *s = arg;
	resil_rng rng;
	uint64_t ref_clock = 0, ref_total = 0;
	int i;

	resil_rng_seed(&rng, (uint64_t)(uintptr_t)&rng ^ 0x5eed);
	for (i = 0; i < s->iterations; i++) {
		uint64_t r = resil_rng_next(&rng);
		uint32_t k = (r & 0x100) ? 2 : 1;
		uint64_t total, now, in_window, allowed;
		resil_err err;

		/* Open a new window: the clock first, then the count, so every
		 * permit counted later was decided at a reading >= ref_clock
		 * (or was in a thread's hands: the slack). */
		if ((i & 63) == 0) {
			ref_clock = resil_manual_clock_now(s->mc);
			ref_total = resil__load64(&s->granted);
		}
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
		in_window = total - ref_total;
		allowed = s->burst + rl_due(s, now - ref_clock);
		if (in_window > allowed) {
			note_max(&s->max_excess, in_window - allowed);
			if (in_window - allowed > s->slack)
				resil__faa64(&s->window_violations, 1);
		}
	}
	return NULL;
}

static uint64_t
run_ratelimit(int nthreads, uint32_t rate, uint64_t period, uint32_t burst,
    uint64_t start, uint64_t max_step, uint64_t big_step, uint32_t batch)
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
	cfg.batch = batch;
	assert_int_equal(resil_ratelimit_new(&s.rl, &cfg, NULL), RESIL_OK);
	s.mc = &mc;
	s.slack = (uint64_t)nthreads * batch + 2 * (uint64_t)nthreads;
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
	assert_int_equal(s.window_violations, 0);
	assert_true(s.max_excess <= s.slack);
	assert_true(s.granted <= rl_bound(&s, end));
	assert_true(
	    s.granted > burst); /* the clock moved: more than one burst */
	assert_int_equal(resil_ratelimit_get_metrics(s.rl, &m), RESIL_OK);
	assert_int_equal(m.granted_permits, s.granted);
	assert_int_equal(
	    m.granted_calls + m.rejected_calls, (uint64_t)nthreads * 20000);
	resil_ratelimit_free(s.rl);
	return s.max_excess;
}

static void
test_limit_threads_ratelimit_never_over_rate(void **state)
{
	int n;

	(void)state;
	for (n = 2; n <= MAX_THREADS; n *= 2) {
		run_ratelimit(n, 3, 10, 5, 1000, 3, 0, 0);
		/* Scale near its maximum (16777213) with a permit about
		 * every 2^20 ticks: the time base moves about every 2^28
		 * ticks, so about every 256 permits, while threads race. */
		run_ratelimit(n, 16777213, UINT64_C(1) << 44, 50, 12345,
		    UINT64_C(1) << 21, 0, 0);
	}
}

/*
 * The opt-in batches, seeded runs on the manual clock: from the start
 * never more than burst + rate * elapsed (as exact), and in every window
 * the tests open, never more than burst + rate * window + threads * batch
 * (+ the test's own 2 per thread of counting slack).
 */
static void
test_limit_threads_ratelimit_batched_bound(void **state)
{
	uint64_t worst = 0, worst_exact = 0, e;
	int n;

	(void)state;
	for (n = 2; n <= MAX_THREADS; n *= 2) {
		/* Jumps of up to 200 ticks (1 call in 256) refill the burst
		 * while the caches hold permits: the bound's extra term. */
		e = run_ratelimit(n, 3, 10, 5, 1000, 3, 200, 4);
		worst = e > worst ? e : worst;
		e = run_ratelimit(n, 16777213, UINT64_C(1) << 44, 50, 12345,
		    UINT64_C(1) << 21, UINT64_C(1) << 26, 16);
		worst = e > worst ? e : worst;
		e = run_ratelimit(n, 1000, 1000, 64, 7, 2, 500, 64);
		worst = e > worst ? e : worst;
		/* The same with the exact limiter: only the counting slack. */
		e = run_ratelimit(n, 1000, 1000, 64, 7, 2, 500, 0);
		worst_exact = e > worst_exact ? e : worst_exact;
	}
	print_message("exact: worst window excess = %llu permits\n",
	    (unsigned long long)worst_exact);
	print_message("batched: worst window excess over burst + rate * t "
	              "= %llu permits\n",
	    (unsigned long long)worst);
}

/* Runs fn on a new thread and waits for it: each such thread has a stripe
 * of its own (stripes are handed out round robin). */
static void
on_thread(void *(*fn)(void *), void *arg)
{
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, fn, arg), 0);
	pthread_join(th, NULL);
}

static void *
take_one(void *arg)
{
	resil_ratelimit *rl = arg;

	if (resil_ratelimit_try_acquire(rl, 1, NULL) != RESIL_OK)
		abort();
	return NULL;
}

/* A thread that leaves does not strand its cache: another thread takes
 * those permits before it is refused. */
static void
test_limit_threads_ratelimit_batched_no_stranding(void **state)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	resil_ratelimit_metrics m;
	resil_manual_clock mc;
	resil_ratelimit *rl;
	unsigned got = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.rate = 1;
	cfg.period_ns = 1000;
	cfg.burst = 8;
	cfg.batch = 4;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	on_thread(take_one, rl); /* 1 taken, 4 cached on its stripe */
	while (resil_ratelimit_try_acquire(rl, 1, NULL) == RESIL_OK)
		got++;
	assert_int_equal(got, 7); /* everything the burst had left */
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_permits, 8);
	assert_int_equal(m.available, 0);
	resil_ratelimit_free(rl);
}

/* ---- batched bulkhead ---- */

typedef struct bh_hold {
	resil_bulkhead *bh;
	int n;
} bh_hold;

static void *
acquire_n(void *arg)
{
	bh_hold *h = arg;
	int i;

	for (i = 0; i < h->n; i++)
		if (resil_bulkhead_try_acquire(h->bh) != RESIL_OK)
			abort();
	return NULL;
}

/* Calls acquired on one thread and released on another; a free leased
 * slot of a thread that left is used by the others. */
static void
test_limit_threads_bulkhead_batched_across_threads(void **state)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead_metrics m;
	resil_bulkhead *bh;
	bh_hold h;
	int i;

	(void)state;
	cfg.max_concurrent = 4;
	cfg.batch = 2;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	h.bh = bh;
	h.n = 3;
	on_thread(acquire_n, &h); /* 3 in flight, all 4 slots leased there */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);
	assert_int_equal(m.granted, 4);
	assert_int_equal(m.released, 4);
	/* Nothing stranded: all 4 again, and not 5. */
	for (i = 0; i < 4; i++)
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	resil_bulkhead_free(bh);
}

static void
test_limit_threads_bulkhead_batched_never_exceeds_limit(void **state)
{
	int n;

	(void)state;
	for (n = 2; n <= MAX_THREADS; n *= 2) {
		run_bulkhead_batched(n, 1, 1);
		run_bulkhead_batched(n, 3, 2);
		run_bulkhead_batched(n, 8, 3);
	}
}

/* ---- batched bulkhead, calls handed between threads ---- */

typedef struct handoff {
	resil_bulkhead *bh;
	uint32_t limit;
	uint64_t pending;   /* acquired, waiting for some thread to release */
	uint64_t in_flight; /* the test's own count */
	uint64_t max_seen;
	uint64_t misuse; /* releases refused as misuse */
	uint64_t errors;
	int iterations;
} handoff;

static void *
handoff_worker(void *arg)
{
	handoff *h = arg;
	resil_rng rng;
	int i;

	resil_rng_seed(&rng, (uint64_t)(uintptr_t)&rng ^ 0x4a11);
	for (i = 0; i < h->iterations; i++) {
		uint64_t r = resil_rng_next(&rng), p;
		resil_err err;

		if (r & 1) {
			err = resil_bulkhead_try_acquire(h->bh);
			if (err == RESIL_OK) {
				note_max(&h->max_seen,
				    resil__faa64(&h->in_flight, 1) + 1);
				resil__faa64(&h->pending, 1);
			} else if (err != RESIL_E_LIMITED) {
				resil__faa64(&h->errors, 1);
			}
			continue;
		}
		/* Release a call some thread acquired, if one is pending. */
		p = resil__load64(&h->pending);
		while (p > 0 && !resil__cas64(&h->pending, p, p - 1))
			p = resil__load64(&h->pending);
		if (p == 0)
			continue;
		resil__faa64(&h->in_flight, UINT64_MAX);
		err = resil_bulkhead_release(h->bh);
		if (err == RESIL_E_MISUSE)
			resil__faa64(&h->misuse, 1);
		else if (err != RESIL_OK)
			resil__faa64(&h->errors, 1);
	}
	return NULL;
}

/*
 * Acquired on one thread, released on any: the limit still holds
 * exactly. A release whose search races other threads' hand-offs may be
 * refused as misuse (documented); such a refused release leaves its slot
 * counted, so in flight at the end is exactly the refused releases.
 */
static void
test_limit_threads_bulkhead_batched_handoff(void **state)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead_metrics m;
	pthread_t th[MAX_THREADS];
	handoff h;
	int i, n;

	(void)state;
	for (n = 2; n <= MAX_THREADS; n *= 2) {
		memset(&h, 0, sizeof(h));
		cfg.max_concurrent = h.limit = 6;
		cfg.batch = 2;
		assert_int_equal(
		    resil_bulkhead_new(&h.bh, &cfg, NULL), RESIL_OK);
		h.iterations = 20000;
		for (i = 0; i < n; i++)
			assert_int_equal(
			    pthread_create(&th[i], NULL, handoff_worker, &h),
			    0);
		for (i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		assert_int_equal(h.errors, 0);
		assert_true(h.max_seen >= 1 && h.max_seen <= h.limit);
		/* Release what is still pending, on this thread. */
		while (h.pending > 0) {
			h.pending--;
			if (resil_bulkhead_release(h.bh) == RESIL_E_MISUSE)
				h.misuse++;
		}
		assert_int_equal(
		    resil_bulkhead_get_metrics(h.bh, &m), RESIL_OK);
		assert_int_equal(m.in_flight, h.misuse);
		assert_int_equal(m.granted - m.released, h.misuse);
		print_message("handoff, %d threads: %llu of %llu releases "
		              "refused as misuse\n",
		    n, (unsigned long long)h.misuse,
		    (unsigned long long)m.granted);
		resil_bulkhead_free(h.bh);
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
		cmocka_unit_test(test_limit_threads_ratelimit_batched_bound),
		cmocka_unit_test(
		    test_limit_threads_ratelimit_batched_no_stranding),
		cmocka_unit_test(
		    test_limit_threads_bulkhead_batched_across_threads),
		cmocka_unit_test(
		    test_limit_threads_bulkhead_batched_never_exceeds_limit),
		cmocka_unit_test(test_limit_threads_bulkhead_batched_handoff),
	};

	return cmocka_run_group_tests_name("limit_threads", tests, NULL, NULL);
}

/*
 * Issue 42: the rate limiter's priority classes under races. However
 * many threads race, the total granted never passes the limiter's rule,
 * and no lower class ever takes a permit a higher one reserves (the
 * class's share and the schedule are one word: Netflix's partitioned
 * limiters overshoot here, Netflix/concurrency-limits#233).
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/limit.h>

#include "atomic.h"

#define THREADS 4
#define BURST 1000u
#define RC 100u
#define RD 200u

typedef struct shared {
	resil_ratelimit *rl;
	resil_manual_clock *mc;
	uint64_t granted[3]; /* by class: sheddable, default, critical */
	uint64_t errors;
	uint64_t go;
	int iterations;
	int ticker; /* thread 0 advances the clock one tick per try */
} shared;

typedef struct arg {
	shared *s;
	int id;
} arg;

static void *
worker(void *p)
{
	arg *a = p;
	shared *s = a->s;
	int i;

	while (resil__load64(&s->go) == 0)
		sched_yield();
	for (i = 0; i < s->iterations; i++) {
		unsigned cls = (unsigned)(i + a->id) % 3u;
		resil_err e = resil_ratelimit_try_acquire_prio(
		    s->rl, (resil_priority)(cls + 1), 1, NULL);

		if (e == RESIL_OK)
			resil__faa64(&s->granted[cls], 1);
		else if (e != RESIL_E_LIMITED)
			resil__faa64(&s->errors, 1);
		if (s->ticker && a->id == 0)
			resil_manual_clock_advance(s->mc, 1);
	}
	return NULL;
}

static void
run(shared *s)
{
	pthread_t th[THREADS];
	arg a[THREADS];
	int i;

	for (i = 0; i < THREADS; i++) {
		a[i].s = s;
		a[i].id = i;
		assert_int_equal(
		    pthread_create(&th[i], NULL, worker, &a[i]), 0);
	}
	resil__store64(&s->go, 1);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
}

static resil_ratelimit *
mk(resil_manual_clock *mc, uint32_t rate, uint64_t period)
{
	resil_ratelimit_config cfg;
	resil_ratelimit *rl = NULL;

	resil_ratelimit_config_init(&cfg);
	cfg.rate = rate;
	cfg.period_ns = period;
	cfg.burst = BURST;
	cfg.reserve_critical = RC;
	cfg.reserve_default = RD;
	cfg.clock = resil_manual_clock_hook(mc);
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	return rl;
}

/* A clock that stands still: exactly the burst is granted, sheddable
 * calls at most burst - RC - RD of it, sheddable and default at most
 * burst - RC. Many rounds, so the races get their chances. */
static void
test_ratelimit_prio_threads_exact(void **state)
{
	int round;

	(void)state;
	for (round = 0; round < 200; round++) {
		resil_manual_clock mc;
		shared s;
		uint64_t total;

		memset(&s, 0, sizeof(s));
		resil_manual_clock_init(&mc, 1);
		s.mc = &mc;
		s.rl = mk(&mc, 1, UINT64_C(1) << 30);
		s.iterations = 1000;
		run(&s);
		/* What the races left: the critical calls take the rest. */
		while (resil_ratelimit_try_acquire_prio(
		           s.rl, RESIL_PRIORITY_CRITICAL, 1, NULL) == RESIL_OK)
			s.granted[2]++;
		total = s.granted[0] + s.granted[1] + s.granted[2];
		assert_int_equal(s.errors, 0);
		assert_int_equal(total, BURST);
		assert_true(s.granted[0] <= BURST - RC - RD);
		assert_true(s.granted[0] + s.granted[1] <= BURST - RC);
		resil_ratelimit_free(s.rl);
	}
}

/* A clock that moves (one tick per try of thread 0, one permit per 4
 * ticks): the total never passes burst + elapsed / 4. */
static void
test_ratelimit_prio_threads_moving(void **state)
{
	resil_manual_clock mc;
	shared s;
	uint64_t total, elapsed;

	(void)state;
	memset(&s, 0, sizeof(s));
	resil_manual_clock_init(&mc, 1);
	s.mc = &mc;
	s.rl = mk(&mc, 1, 4);
	s.iterations = 200000;
	s.ticker = 1;
	run(&s);
	elapsed = resil_manual_clock_now(&mc) - 1;
	total = s.granted[0] + s.granted[1] + s.granted[2];
	assert_int_equal(s.errors, 0);
	assert_int_equal(elapsed, 200000);
	assert_true(total <= BURST + elapsed / 4);
	/* Demand outran the supply: every class but critical was cut. */
	assert_true(total >= elapsed / 4);
	resil_ratelimit_free(s.rl);
}

/*
 * The boundary, many times over: a small limiter (16 permits, 4 + 4
 * reserved: sheddable calls may take 8) and 4 threads that each try 4
 * sheddable permits at once, in rounds that start together (the threads
 * stay; a round's limiter is made while they wait). Every round crosses
 * the sheddable floor once with all threads at it, where a check-then-
 * take would let two through.
 */
typedef struct rounds {
	resil_ratelimit *rl;
	uint64_t round; /* the round the threads may run */
	uint64_t done;  /* threads done with it, all rounds */
	uint64_t shed;  /* this round's sheddable grants */
	uint64_t errors;
	uint64_t nrounds;
} rounds;

static void *
round_worker(void *p)
{
	rounds *r = p;
	uint64_t n, i;

	for (n = 1; n <= r->nrounds; n++) {
		while (resil__load64(&r->round) < n)
			sched_yield(); /* more threads than cores */
		for (i = 0; i < 4; i++) {
			resil_err e = resil_ratelimit_try_acquire_prio(
			    r->rl, RESIL_PRIORITY_SHEDDABLE, 1, NULL);

			if (e == RESIL_OK)
				resil__faa64(&r->shed, 1);
			else if (e != RESIL_E_LIMITED)
				resil__faa64(&r->errors, 1);
		}
		resil__faa64(&r->done, 1);
	}
	return NULL;
}

static void
test_ratelimit_prio_threads_boundary(void **state)
{
	resil_ratelimit_config cfg;
	resil_manual_clock mc;
	pthread_t th[THREADS];
	rounds r;
	uint64_t n;
	int i;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.nrounds = 5000;
	resil_manual_clock_init(&mc, 1);
	resil_ratelimit_config_init(&cfg);
	cfg.rate = 1;
	cfg.period_ns = UINT64_C(1) << 30;
	cfg.burst = 16;
	cfg.reserve_critical = 4;
	cfg.reserve_default = 4;
	cfg.clock = resil_manual_clock_hook(&mc);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(
		    pthread_create(&th[i], NULL, round_worker, &r), 0);
	for (n = 1; n <= r.nrounds; n++) {
		assert_int_equal(resil_ratelimit_new(&r.rl, &cfg, NULL), RESIL_OK);
		resil__store64(&r.shed, 0);
		resil__store64(&r.round, n);
		while (resil__load64(&r.done) < n * THREADS)
			sched_yield();
		assert_int_equal(resil__load64(&r.shed), 8);
		resil_ratelimit_free(r.rl);
	}
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(r.errors, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ratelimit_prio_threads_exact),
		cmocka_unit_test(test_ratelimit_prio_threads_moving),
		cmocka_unit_test(test_ratelimit_prio_threads_boundary),
	};

	return cmocka_run_group_tests_name(
	    "ratelimit_prio_threads", tests, NULL, NULL);
}

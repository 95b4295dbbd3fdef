/*
 * Concurrency stress for the breaker: 2 to 8 threads hammer one breaker
 * through a dependency that flips between failing and healthy, on a shared
 * manual clock. Checks: no HALF_OPEN episode grants more than K probes;
 * every transition is legal, reported exactly once, in order; the recorded
 * and rejected counts add up. Run under TSan in CI (label "threads").
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>

#include "support/breaker_check.h"

#define MAX_THREADS 8
#define MAX_EPISODES 200000
#define PROBES 3

typedef struct shared {
	resil_manual_clock mc;
	resil_breaker *b;
	pthread_barrier_t start;
	int iterations;
	/* Written by the listener only; transitions are serialised. */
	breaker_check chk;
	uint8_t episode_state[MAX_EPISODES];
	/* Probe permits granted per episode (atomic adds). */
	uint32_t grants[MAX_EPISODES];
} shared;

typedef struct worker {
	shared *sh;
	int id;
	uint64_t recorded;
	uint64_t rejected;
	uint64_t overflow; /* episodes past MAX_EPISODES */
	uint64_t errors;   /* record calls that did not return RESIL_OK */
} worker;

/* The dependency fails for 40 ticks out of every 100. */
static int
failing_at(uint64_t t)
{
	return (t % 100) < 40;
}

static void *
hammer(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	resil_permit p;
	int i;

	pthread_barrier_wait(&sh->start);
	for (i = 0; i < sh->iterations; i++) {
		uint64_t now = resil_manual_clock_now(&sh->mc);

		/* Probe grants (the slow path) write the permit's episode;
		 * a fast CLOSED grant leaves it as it is (see PERMIT_EPF in
		 * lib/breaker.c), so those keep the mark and are not
		 * counted: only HALF_OPEN episodes are checked below. */
		p.episode = UINT64_MAX;
		if (resil_breaker_acquire(sh->b, &p) != RESIL_OK) {
			w->rejected++;
		} else {
			if (p.episode < MAX_EPISODES)
				__atomic_fetch_add(&sh->grants[p.episode], 1,
				    __ATOMIC_RELAXED);
			else if (p.episode != UINT64_MAX)
				w->overflow++;
			/* cmocka's asserts are not thread-safe: count. */
			if (resil_breaker_record(sh->b, &p,
			        failing_at(now)
			            ? RESIL_OUTCOME_FAILURE
			            : RESIL_OUTCOME_SUCCESS) != RESIL_OK)
				w->errors++;
			w->recorded++;
		}
		if ((i & 31) == w->id)
			resil_manual_clock_advance(&sh->mc, 1);
	}
	return NULL;
}

static void
run_stress(int nthreads, resil_breaker_window_type wt)
{
	static shared sh;
	resil_breaker_config cfg;
	resil_breaker_metrics m;
	pthread_t tid[MAX_THREADS];
	worker wk[MAX_THREADS];
	uint64_t recorded = 0, rejected = 0, half_open_episodes = 0, e;
	int i;

	memset(&sh, 0, sizeof(sh));
	resil_manual_clock_init(&sh.mc, 0);
	sh.iterations = 20000;
	resil_breaker_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&sh.mc);
	cfg.consecutive_failures = 5;
	cfg.failure_rate_pct = 50;
	cfg.min_calls = 20;
	cfg.window_type = wt;
	cfg.window_size = wt == RESIL_WINDOW_COUNT ? 50 : 10;
	cfg.bucket_ns = 2;
	cfg.open_wait_ns = 7;
	cfg.permitted_probes = PROBES;
	cfg.listener = breaker_check_listener;
	cfg.listener_ctx = &sh.chk;
	assert_int_equal(resil_breaker_new(&sh.b, &cfg, NULL), RESIL_OK);
	sh.chk.episode_state = sh.episode_state;
	sh.chk.max_episodes = MAX_EPISODES;
	sh.chk.last_to = RESIL_BREAKER_CLOSED;
	pthread_barrier_init(&sh.start, NULL, (unsigned)nthreads);
	for (i = 0; i < nthreads; i++) {
		memset(&wk[i], 0, sizeof(wk[i]));
		wk[i].sh = &sh;
		wk[i].id = i;
		assert_int_equal(
		    pthread_create(&tid[i], NULL, hammer, &wk[i]), 0);
	}
	for (i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		recorded += wk[i].recorded;
		rejected += wk[i].rejected;
		assert_int_equal(wk[i].overflow, 0);
		assert_int_equal(wk[i].errors, 0);
	}
	pthread_barrier_destroy(&sh.start);

	assert_int_equal(resil_breaker_get_metrics(sh.b, &m), RESIL_OK);
	/* Every transition was legal, reported once and in order. */
	breaker_check_assert(&sh.chk, m.transitions);
	assert_true(m.transitions > 10); /* the dependency did flip */
	/* No HALF_OPEN episode granted more than K probes. */
	for (e = 1; e <= m.transitions && e < MAX_EPISODES; e++) {
		if (sh.episode_state[e] != RESIL_BREAKER_HALF_OPEN)
			continue;
		half_open_episodes++;
		if (sh.grants[e] > PROBES)
			fail_msg("episode %llu granted %u probes",
			    (unsigned long long)e, sh.grants[e]);
	}
	assert_true(half_open_episodes > 0);
	/* The counts add up. */
	assert_int_equal(
	    m.successes + m.failures + m.stale + m.ignored, recorded);
	assert_int_equal(m.rejections, rejected);
	assert_int_equal(
	    recorded + rejected, (uint64_t)nthreads * (uint64_t)sh.iterations);
	resil_breaker_free(sh.b);
}

static void
test_breaker_threads_stress_count_window(void **state)
{
	(void)state;
	run_stress(2, RESIL_WINDOW_COUNT);
	run_stress(4, RESIL_WINDOW_COUNT);
	run_stress(8, RESIL_WINDOW_COUNT);
}

static void
test_breaker_threads_stress_time_window(void **state)
{
	(void)state;
	run_stress(2, RESIL_WINDOW_TIME);
	run_stress(8, RESIL_WINDOW_TIME);
}

/* All threads race for the probes of one fresh HALF_OPEN episode. */
typedef struct racer {
	resil_breaker *b;
	pthread_barrier_t *go;
	resil_permit permit;
	int granted;
} racer;

static void *
race(void *arg)
{
	racer *r = arg;

	pthread_barrier_wait(r->go);
	r->granted = resil_breaker_acquire(r->b, &r->permit) == RESIL_OK;
	return NULL;
}

static void
test_breaker_threads_exactly_k_probes_race(void **state)
{
	resil_manual_clock mc;
	resil_breaker_config cfg;
	resil_breaker *b;
	pthread_barrier_t go;
	pthread_t tid[MAX_THREADS];
	racer r[MAX_THREADS];
	int round, i, granted;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_breaker_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.min_calls = 1;
	cfg.open_wait_ns = 10;
	cfg.permitted_probes = 2;
	assert_int_equal(resil_breaker_new(&b, &cfg, NULL), RESIL_OK);
	for (round = 0; round < 200; round++) {
		assert_int_equal(
		    resil_breaker_transition(b, RESIL_BREAKER_OPEN), RESIL_OK);
		resil_manual_clock_advance(&mc, 10);
		pthread_barrier_init(&go, NULL, MAX_THREADS);
		for (i = 0; i < MAX_THREADS; i++) {
			memset(&r[i], 0, sizeof(r[i]));
			r[i].b = b;
			r[i].go = &go;
			pthread_create(&tid[i], NULL, race, &r[i]);
		}
		granted = 0;
		for (i = 0; i < MAX_THREADS; i++) {
			pthread_join(tid[i], NULL);
			granted += r[i].granted;
		}
		pthread_barrier_destroy(&go);
		assert_int_equal(granted, 2);
		assert_int_equal(
		    resil_breaker_get_state(b), RESIL_BREAKER_HALF_OPEN);
		for (i = 0; i < MAX_THREADS; i++)
			if (r[i].granted)
				resil_breaker_record(
				    b, &r[i].permit, RESIL_OUTCOME_SUCCESS);
		assert_int_equal(
		    resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	}
	resil_breaker_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_breaker_threads_stress_count_window),
		cmocka_unit_test(test_breaker_threads_stress_time_window),
		cmocka_unit_test(test_breaker_threads_exactly_k_probes_race),
	};

	return cmocka_run_group_tests_name(
	    "breaker_threads", tests, NULL, NULL);
}

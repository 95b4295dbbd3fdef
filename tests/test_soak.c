/*
 * Soak: many acquires racing on one breaker, on 2, 4 and 8 threads, on
 * the manual clock (a count window, time moved by the threads) and on the
 * system clock (a time window, real time), with the invariant checks of
 * tests/test_breaker_threads.c:
 *   - every transition is legal, reported exactly once and in order (one
 *     owner per transition);
 *   - no HALF_OPEN episode grants more than K probes;
 *   - the counts add up: recorded outcomes = successes + failures + stale
 *     + ignored, rejections = acquires refused, granted + refused = all.
 *
 * RESIL_SOAK_ACQUIRES sets the acquires per clock (split evenly over the
 * 2-, 4- and 8-thread runs); the default, 10^6, is the `make test`
 * version. `make soak` runs 10^8 per clock in an optimised build and
 * prints the figures (docs/TESTING.md has the last run's).
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>

#define MAX_THREADS 8
#define PROBES 3
#define DEFAULT_ACQUIRES 1000000ull

typedef struct shared {
	resil_manual_clock mc;
	const resil_clock *clock; /* the breaker's */
	int manual;
	resil_breaker *b;
	pthread_barrier_t start;
	uint64_t iterations; /* per thread */
	uint64_t max_episodes;
	/* Written by the listener only; transitions are serialised. */
	uint8_t *episode_state;
	uint64_t last_seq;
	resil_breaker_state last_to;
	uint64_t illegal;
	uint64_t out_of_order;
	uint64_t events;
	/* Probe permits granted per episode (atomic adds). */
	uint32_t *grants;
} shared;

typedef struct worker {
	shared *sh;
	int id;
	uint64_t recorded;
	uint64_t rejected;
	uint64_t overflow; /* episodes past max_episodes */
	uint64_t errors;   /* record calls that did not return RESIL_OK */
} worker;

static int
legal(resil_breaker_state from, resil_breaker_state to)
{
	switch (from) {
	case RESIL_BREAKER_CLOSED:
		return to == RESIL_BREAKER_OPEN;
	case RESIL_BREAKER_OPEN:
		return to == RESIL_BREAKER_HALF_OPEN;
	case RESIL_BREAKER_HALF_OPEN:
		return to == RESIL_BREAKER_CLOSED || to == RESIL_BREAKER_OPEN;
	default:
		return 0;
	}
}

static void
checking_listener(const resil_breaker_event *ev, void *ctx)
{
	shared *sh = ctx;

	sh->events++;
	if (ev->seq != sh->last_seq + 1 || ev->from != sh->last_to)
		sh->out_of_order++;
	if (!legal(ev->from, ev->to))
		sh->illegal++;
	if (ev->seq < sh->max_episodes)
		sh->episode_state[ev->seq] = (uint8_t)ev->to;
	sh->last_seq = ev->seq;
	sh->last_to = ev->to;
}

/* The dependency fails 40% of the time: manual ticks 0..39 of every 100;
 * on the system clock 2.8 ms of every 7 ms (a period that does not line
 * up with the coarse clock's ticks, which the breaker reads). */
static int
failing_at(const shared *sh, uint64_t t)
{
	if (sh->manual)
		return (t % 100) < 40;
	return (t / 700000) % 10 < 4;
}

static void *
hammer(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	resil_permit p;
	uint64_t i;

	pthread_barrier_wait(&sh->start);
	for (i = 0; i < sh->iterations; i++) {
		uint64_t now = resil_clock_now(sh->clock);

		/* Probe grants write the permit's episode; a fast CLOSED
		 * grant leaves it as it is (lib/breaker.c, PERMIT_EPF), so
		 * those keep the mark and are not counted: only HALF_OPEN
		 * episodes are checked. */
		p.episode = UINT64_MAX;
		if (resil_breaker_acquire(sh->b, &p) != RESIL_OK) {
			w->rejected++;
		} else {
			if (p.episode < sh->max_episodes)
				__atomic_fetch_add(&sh->grants[p.episode], 1,
				    __ATOMIC_RELAXED);
			else if (p.episode != UINT64_MAX)
				w->overflow++;
			/* cmocka's asserts are not thread-safe: count. */
			if (resil_breaker_record(sh->b, &p,
			        failing_at(sh, now)
			            ? RESIL_OUTCOME_FAILURE
			            : RESIL_OUTCOME_SUCCESS) != RESIL_OK)
				w->errors++;
			w->recorded++;
		}
		if (sh->manual && (i & 31) == (uint64_t)w->id)
			resil_manual_clock_advance(&sh->mc, 1);
	}
	return NULL;
}

static uint64_t
soak_acquires(void)
{
	const char *s = getenv("RESIL_SOAK_ACQUIRES");
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return DEFAULT_ACQUIRES;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || v < 1000)
		fail_msg("RESIL_SOAK_ACQUIRES=%s: want a number >= 1000", s);
	return (uint64_t)v;
}

typedef struct figures {
	uint64_t acquires, granted, rejected, transitions, half_open;
	uint64_t stale;
	uint32_t max_probes;
	double seconds;
} figures;

static void
run_soak(int nthreads, int manual, uint64_t acquires, figures *fig)
{
	static shared sh;
	resil_breaker_config cfg;
	resil_breaker_metrics m;
	pthread_t tid[MAX_THREADS];
	worker wk[MAX_THREADS];
	uint64_t recorded = 0, rejected = 0, half_open = 0, e, t0, t1;
	uint32_t max_probes = 0;
	int i;

	memset(&sh, 0, sizeof(sh));
	sh.manual = manual;
	resil_manual_clock_init(&sh.mc, 0);
	sh.clock =
	    manual ? resil_manual_clock_hook(&sh.mc) : resil_clock_system();
	/* Rounded up: a run makes at least its share. */
	sh.iterations =
	    (acquires + (uint64_t)nthreads - 1) / (uint64_t)nthreads;
	/* At most one episode a few dozen acquires; bounded for memory. */
	sh.max_episodes = acquires / 16 + 65536;
	if (sh.max_episodes > (1u << 23))
		sh.max_episodes = 1u << 23;
	sh.episode_state = calloc(sh.max_episodes, 1);
	sh.grants = calloc(sh.max_episodes, sizeof(*sh.grants));
	assert_non_null(sh.episode_state);
	assert_non_null(sh.grants);

	resil_breaker_config_init(&cfg);
	cfg.clock = sh.clock;
	cfg.consecutive_failures = 5;
	cfg.failure_rate_pct = 50;
	cfg.min_calls = 20;
	if (manual) {
		cfg.window_type = RESIL_WINDOW_COUNT;
		cfg.window_size = 50;
		cfg.open_wait_ns = 7;
	} else {
		cfg.window_type = RESIL_WINDOW_TIME;
		cfg.window_size = 10;
		cfg.bucket_ns = 1000000; /* 1 ms buckets */
		cfg.open_wait_ns = 1000000;
	}
	cfg.permitted_probes = PROBES;
	cfg.listener = checking_listener;
	cfg.listener_ctx = &sh;
	assert_int_equal(resil_breaker_new(&sh.b, &cfg, NULL), RESIL_OK);
	sh.last_to = RESIL_BREAKER_CLOSED;
	pthread_barrier_init(&sh.start, NULL, (unsigned)nthreads);
	t0 = resil_clock_now(resil_clock_system());
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
	t1 = resil_clock_now(resil_clock_system());
	pthread_barrier_destroy(&sh.start);

	assert_int_equal(resil_breaker_get_metrics(sh.b, &m), RESIL_OK);
	/* Every transition was legal, reported once and in order. */
	assert_int_equal(sh.illegal, 0);
	assert_int_equal(sh.out_of_order, 0);
	assert_int_equal(sh.events, m.transitions);
	/* The dependency did flip (on the system clock, a run of a few
	 * milliseconds may not see a whole period: no minimum there). */
	assert_true(!manual || m.transitions > 10);
	/* No HALF_OPEN episode granted more than K probes. */
	for (e = 1; e <= m.transitions && e < sh.max_episodes; e++) {
		if (sh.episode_state[e] != RESIL_BREAKER_HALF_OPEN)
			continue;
		half_open++;
		if (sh.grants[e] > max_probes)
			max_probes = sh.grants[e];
		if (sh.grants[e] > PROBES)
			fail_msg("episode %llu granted %u probes",
			    (unsigned long long)e, sh.grants[e]);
	}
	assert_true(half_open > 0 || !manual);
	/* The counts add up. */
	assert_int_equal(
	    m.successes + m.failures + m.stale + m.ignored, recorded);
	assert_int_equal(m.rejections, rejected);
	assert_int_equal(
	    recorded + rejected, (uint64_t)nthreads * sh.iterations);
	resil_breaker_free(sh.b);
	free(sh.episode_state);
	free(sh.grants);

	fig->acquires = recorded + rejected;
	fig->granted = recorded;
	fig->rejected = rejected;
	fig->transitions = m.transitions;
	fig->half_open = half_open;
	fig->stale = m.stale;
	fig->max_probes = max_probes;
	fig->seconds = (double)(t1 - t0) / 1e9;
	printf("soak %-6s clock %d threads: %llu acquires (%llu granted, "
	       "%llu rejected), %llu transitions, %llu HALF_OPEN episodes "
	       "(max %u probes of %d), %llu stale, %.2f s, %.1f M "
	       "acquires/s\n",
	    manual ? "manual" : "system", nthreads,
	    (unsigned long long)fig->acquires,
	    (unsigned long long)fig->granted,
	    (unsigned long long)fig->rejected,
	    (unsigned long long)fig->transitions,
	    (unsigned long long)fig->half_open, fig->max_probes, PROBES,
	    (unsigned long long)fig->stale, fig->seconds,
	    fig->seconds > 0 ? (double)fig->acquires / fig->seconds / 1e6
	                     : 0.0);
	fflush(stdout);
}

static void
soak_clock(int manual)
{
	static const int threads[] = { 2, 4, 8 };
	uint64_t acquires = soak_acquires(), total = 0, transitions = 0;
	figures fig;
	size_t i;

	for (i = 0; i < 3; i++) {
		run_soak(threads[i], manual, (acquires + 2) / 3, &fig);
		total += fig.acquires;
		transitions += fig.transitions;
	}
	printf("soak %-6s clock total: %llu acquires, %llu transitions, "
	       "every invariant held\n",
	    manual ? "manual" : "system", (unsigned long long)total,
	    (unsigned long long)transitions);
	assert_true(total >= acquires);
}

static void
test_soak_manual_clock(void **state)
{
	(void)state;
	soak_clock(1);
}

static void
test_soak_system_clock(void **state)
{
	(void)state;
	soak_clock(0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_soak_manual_clock),
		cmocka_unit_test(test_soak_system_clock),
	};

	return cmocka_run_group_tests_name("soak", tests, NULL, NULL);
}

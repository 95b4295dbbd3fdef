/*
 * The breaker's lock-free protocol under races that once broke it:
 *
 * - a burst of 64 acquires at the OPEN deadline gets exactly K probes,
 *   however the OPEN -> HALF_OPEN compare-and-swap is won;
 * - a record stalled (inside its clock read) across 2^19 + 2 transitions
 *   cannot land in a later HALF_OPEN episode that shares low episode bits;
 * - a failure from an old episode racing reset() never lands in the fresh
 *   window, for every kind of window.
 *
 * Run under TSan in CI (label "threads").
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>

#include "atomic.h"

/* ---- a spinning barrier: tighter starts than pthread's ---- */

typedef struct spin_barrier {
	uint64_t arrived;
	uint64_t generation;
	uint64_t n;
} spin_barrier;

static void
spin_wait(spin_barrier *sb)
{
	uint64_t gen = resil__load64(&sb->generation);
	unsigned spins;

	if (resil__faa64(&sb->arrived, 1) + 1 == sb->n) {
		resil__store64(&sb->arrived, 0);
		resil__faa64(&sb->generation, 1);
		return;
	}
	/* Spin for a tight start; past that the other thread is most
	 * likely not running (more threads than CPUs, or a loaded
	 * machine), so give it the CPU instead of spinning out the time
	 * slice. */
	for (spins = 0; resil__load64(&sb->generation) == gen; spins++) {
		if (spins < 4096)
			resil__stall();
		else
			sched_yield();
	}
}

/* ---- 1. exactly K probes for a burst at the deadline ---- */

#define BURST_PROBES 4
#if defined(RESIL__TSAN)
/* TSan runs everything ~20x slower on 2 CPUs: a smaller burst, which
 * TSan's scheduling still races hard. */
#define BURST_THREADS 16
#define BURST_ROUNDS 300
#define LISTENER_WORK 200
#else
#define BURST_THREADS 64
#define BURST_ROUNDS 2000
#define LISTENER_WORK 20000
#endif

typedef struct burst {
	resil_breaker *b;
	pthread_barrier_t go;
	pthread_barrier_t done;
	uint64_t granted; /* this round's grants (atomic adds) */
	uint64_t errors;  /* acquires that were neither OK nor OPEN */
	int stop;
} burst;

static void *
burst_worker(void *arg)
{
	burst *bu = arg;
	resil_permit p;
	resil_err err;

	for (;;) {
		pthread_barrier_wait(&bu->go);
		if (__atomic_load_n(&bu->stop, __ATOMIC_ACQUIRE))
			return NULL;
		err = resil_breaker_acquire(bu->b, &p);
		if (err == RESIL_OK)
			resil__faa64(&bu->granted, 1);
		else if (err != RESIL_E_OPEN)
			resil__faa64(&bu->errors, 1);
		pthread_barrier_wait(&bu->done);
	}
}

/* A listener with some work in it keeps TRANSIT set a little longer, as a
 * real one (a log line, a metric) would. */
static void
busy_listener(const resil_breaker_event *ev, void *ctx)
{
	volatile uint64_t *sink = ctx;
	int i;

	for (i = 0; i < LISTENER_WORK; i++)
		*sink += ev->seq + (uint64_t)i;
}

static void
test_breaker_protocol_burst_gets_exactly_k(void **state)
{
	static burst bu;
	resil_manual_clock mc;
	resil_breaker_config cfg;
	pthread_t tid[BURST_THREADS];
	volatile uint64_t sink = 0;
	int round, i, short_rounds = 0;

	(void)state;
	memset(&bu, 0, sizeof(bu));
	resil_manual_clock_init(&mc, 0);
	resil_breaker_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.consecutive_failures = 1;
	cfg.open_wait_ns = 10;
	cfg.permitted_probes = BURST_PROBES;
	cfg.listener = busy_listener;
	cfg.listener_ctx = (void *)&sink;
	assert_int_equal(resil_breaker_new(&bu.b, &cfg, NULL), RESIL_OK);
	pthread_barrier_init(&bu.go, NULL, BURST_THREADS + 1);
	pthread_barrier_init(&bu.done, NULL, BURST_THREADS + 1);
	for (i = 0; i < BURST_THREADS; i++)
		assert_int_equal(
		    pthread_create(&tid[i], NULL, burst_worker, &bu), 0);
	for (round = 0; round < BURST_ROUNDS; round++) {
		/* OPEN now; every worker arrives exactly at the deadline. */
		assert_int_equal(
		    resil_breaker_transition(bu.b, RESIL_BREAKER_OPEN),
		    RESIL_OK);
		resil_manual_clock_advance(&mc, 10);
		resil__store64(&bu.granted, 0);
		pthread_barrier_wait(&bu.go);
		pthread_barrier_wait(&bu.done);
		if (resil__load64(&bu.granted) != BURST_PROBES)
			short_rounds++;
		assert_int_equal(
		    resil_breaker_get_state(bu.b), RESIL_BREAKER_HALF_OPEN);
	}
	__atomic_store_n(&bu.stop, 1, __ATOMIC_RELEASE);
	pthread_barrier_wait(&bu.go);
	for (i = 0; i < BURST_THREADS; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&bu.go);
	pthread_barrier_destroy(&bu.done);
	if (short_rounds != 0)
		print_message(
		    "%d of %d bursts did not get exactly %d probes\n",
		    short_rounds, BURST_ROUNDS, BURST_PROBES);
	assert_int_equal(short_rounds, 0);
	assert_int_equal(bu.errors, 0);
	resil_breaker_free(bu.b);
}

/* ---- 2. a record stalled across 2^19 + 2 transitions ---- */

typedef struct stall_clock {
	resil_manual_clock mc;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int armed;    /* the next read by the stalled thread blocks */
	int stalled;  /* it is blocked now */
	int released; /* it may go on */
} stall_clock;

static _Thread_local int i_am_the_stalled_thread;

static uint64_t
stall_now(void *ctx)
{
	stall_clock *sc = ctx;

	if (i_am_the_stalled_thread) {
		pthread_mutex_lock(&sc->mu);
		if (sc->armed) {
			sc->armed = 0;
			sc->stalled = 1;
			pthread_cond_broadcast(&sc->cv);
			while (!sc->released)
				pthread_cond_wait(&sc->cv, &sc->mu);
		}
		pthread_mutex_unlock(&sc->mu);
	}
	return resil_manual_clock_now(&sc->mc);
}

typedef struct stall_job {
	resil_breaker *b;
	stall_clock *sc;
	resil_permit permit;
	resil_err err;
} stall_job;

static void *
stalled_recorder(void *arg)
{
	stall_job *j = arg;

	i_am_the_stalled_thread = 1;
	pthread_mutex_lock(&j->sc->mu);
	j->sc->armed = 1;
	pthread_mutex_unlock(&j->sc->mu);
	/* Slow-call timing is on, so the record reads the clock. */
	j->err = resil_breaker_record(j->b, &j->permit, RESIL_OUTCOME_SUCCESS);
	return NULL;
}

static void
test_breaker_protocol_stalled_record_cannot_alias(void **state)
{
	static stall_clock sc;
	resil_clock hook;
	resil_breaker_config cfg;
	resil_breaker *b;
	resil_breaker_metrics m;
	stall_job job;
	resil_permit p;
	pthread_t tid;
	uint64_t ep0, i;

	(void)state;
	memset(&sc, 0, sizeof(sc));
	resil_manual_clock_init(&sc.mc, 0);
	pthread_mutex_init(&sc.mu, NULL);
	pthread_cond_init(&sc.cv, NULL);
	memset(&hook, 0, sizeof(hook));
	hook.now = stall_now;
	hook.ctx = &sc;
	resil_breaker_config_init(&cfg);
	cfg.clock = &hook;
	cfg.consecutive_failures = 1;
	cfg.failure_rate_pct = 0;
	cfg.slow_threshold_ns = 1000; /* timing on: record reads the clock */
	cfg.open_wait_ns = 10;
	cfg.permitted_probes = 1;
	assert_int_equal(resil_breaker_new(&b, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_breaker_transition(b, RESIL_BREAKER_HALF_OPEN), RESIL_OK);
	memset(&job, 0, sizeof(job));
	job.b = b;
	job.sc = &sc;
	assert_int_equal(resil_breaker_acquire(b, &job.permit), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	ep0 = m.transitions;
	assert_int_equal(
	    pthread_create(&tid, NULL, stalled_recorder, &job), 0);
	pthread_mutex_lock(&sc.mu);
	while (!sc.stalled)
		pthread_cond_wait(&sc.cv, &sc.mu);
	pthread_mutex_unlock(&sc.mu);
	/* 2^18 round trips of two transitions each: the HALF_OPEN episode
	 * is then ep0 + 2^19, whose low 19 bits are ep0's. */
	for (i = 0; i < (UINT64_C(1) << 18); i++) {
		assert_int_equal(
		    resil_breaker_transition(b, RESIL_BREAKER_OPEN), RESIL_OK);
		assert_int_equal(
		    resil_breaker_transition(b, RESIL_BREAKER_HALF_OPEN),
		    RESIL_OK);
	}
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	assert_true(m.transitions == ep0 + (UINT64_C(1) << 19));
	assert_int_equal(m.state, RESIL_BREAKER_HALF_OPEN);
	pthread_mutex_lock(&sc.mu);
	sc.released = 1;
	pthread_cond_broadcast(&sc.cv);
	pthread_mutex_unlock(&sc.mu);
	pthread_join(tid, NULL);
	/* The stalled outcome is from episode ep0: stale, counted nowhere. */
	assert_int_equal(job.err, RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	assert_int_equal(m.stale, 1);
	assert_int_equal(m.probes_reported, 0);
	assert_int_equal(m.state, RESIL_BREAKER_HALF_OPEN);
	/* The episode's own probe still decides it. */
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	resil_breaker_free(b);
	pthread_cond_destroy(&sc.cv);
	pthread_mutex_destroy(&sc.mu);
}

/* ---- 3. an old episode's failure racing reset() ---- */

#if defined(RESIL__TSAN)
/* Each trial is two rendezvous of two threads: on a loaded 2-CPU machine
 * under TSan one can cost a scheduler slice, and 20000 trials per window
 * kind ran past the 120 s timeout. */
#define LEAK_TRIALS 5000
#else
#define LEAK_TRIALS 100000
#endif

enum window_kind { W_COUNT, W_COUNT_SLOW, W_TIME, W_CONSECUTIVE };

typedef struct leak_race {
	resil_breaker *b;
	spin_barrier sb;
	resil_permit permit;
	int trials;
} leak_race;

static void *
leak_recorder(void *arg)
{
	leak_race *lr = arg;
	int t;

	for (t = 0; t < lr->trials; t++) {
		spin_wait(&lr->sb); /* the permit is ready */
		resil_breaker_record(
		    lr->b, &lr->permit, RESIL_OUTCOME_FAILURE);
		spin_wait(&lr->sb); /* both are done */
	}
	return NULL;
}

static int
run_leak_race(enum window_kind kind)
{
	static leak_race lr;
	resil_manual_clock mc;
	resil_breaker_config cfg;
	resil_breaker_metrics m;
	pthread_t tid;
	int t, leaks = 0;

	memset(&lr, 0, sizeof(lr));
	lr.sb.n = 2;
	lr.trials = LEAK_TRIALS;
	resil_manual_clock_init(&mc, 1000);
	resil_breaker_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	/* One failure trips nothing: a leak shows in the counts only. */
	cfg.min_calls = 100;
	switch (kind) {
	case W_COUNT:
		break;
	case W_COUNT_SLOW:
		cfg.slow_rate_pct = 50;
		cfg.slow_threshold_ns = 100;
		break;
	case W_TIME:
		cfg.window_type = RESIL_WINDOW_TIME;
		cfg.window_size = 10;
		cfg.bucket_ns = 100;
		break;
	case W_CONSECUTIVE:
		cfg.failure_rate_pct = 0;
		cfg.consecutive_failures = 2;
		break;
	}
	assert_int_equal(resil_breaker_new(&lr.b, &cfg, NULL), RESIL_OK);
	assert_int_equal(pthread_create(&tid, NULL, leak_recorder, &lr), 0);
	for (t = 0; t < LEAK_TRIALS; t++) {
		assert_int_equal(
		    resil_breaker_acquire(lr.b, &lr.permit), RESIL_OK);
		spin_wait(&lr.sb);
		assert_int_equal(resil_breaker_reset(lr.b), RESIL_OK);
		spin_wait(&lr.sb);
		/* Before the reset the failure was wiped by it; after it, it
		 * is stale. Either way the fresh window is empty. */
		assert_int_equal(
		    resil_breaker_get_metrics(lr.b, &m), RESIL_OK);
		if (m.window_calls != 0 || m.window_failures != 0 ||
		    m.consecutive_failures != 0) {
			leaks++;
			assert_int_equal(resil_breaker_reset(lr.b), RESIL_OK);
		}
	}
	pthread_join(tid, NULL);
	assert_int_equal(resil_breaker_get_metrics(lr.b, &m), RESIL_OK);
	/* Every failure was counted once: in the window it reached, or as
	 * stale. */
	assert_true(m.failures + m.stale == (uint64_t)LEAK_TRIALS);
	resil_breaker_free(lr.b);
	return leaks;
}

static void
test_breaker_protocol_no_leak_into_fresh_window(void **state)
{
	static const char *const names[] = { "count", "count+slow", "time",
		"consecutive" };
	int kind, leaks, total = 0;

	(void)state;
	for (kind = W_COUNT; kind <= W_CONSECUTIVE; kind++) {
		leaks = run_leak_race((enum window_kind)kind);
		if (leaks != 0)
			print_message("%s window: %d leaks in %d trials\n",
			    names[kind], leaks, LEAK_TRIALS);
		total += leaks;
	}
	assert_int_equal(total, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_breaker_protocol_burst_gets_exactly_k),
		cmocka_unit_test(
		    test_breaker_protocol_stalled_record_cannot_alias),
		cmocka_unit_test(
		    test_breaker_protocol_no_leak_into_fresh_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

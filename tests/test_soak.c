/*
 * Soak: many acquires racing on one breaker, on 2, 4 and 8 threads, on
 * the manual clock (a count window, time moved by the threads) and on the
 * system clock (a time window, real time), with the invariant checks of
 * tests/test_breaker_threads.c (tests/support/breaker_check.h):
 *   - every transition is legal, reported exactly once and in order (one
 *     owner per transition);
 *   - no HALF_OPEN episode grants more than K probes;
 *   - the counts add up: recorded outcomes = successes + failures + stale
 *     + ignored, rejections = acquires refused, granted + refused = all.
 *
 * Then the shm kill storm (below): SIGKILLs of worker processes sharing a
 * bulkhead and a breaker in a region.
 *
 * RESIL_SOAK_ACQUIRES sets the acquires per clock (split evenly over the
 * 2-, 4- and 8-thread runs); the default, 10^6, is the `make test`
 * version. `make soak` runs 10^8 per clock in an optimised build and
 * prints the figures (docs/TESTING.md has the last run's).
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/limit.h>
#include <resil/shm.h>

#include "support/breaker_check.h"

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
	/* Written by the listener only; transitions are serialised. */
	breaker_check chk; /* its episode_state calloc'd */
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
			if (p.episode < sh->chk.max_episodes)
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
	sh.chk.max_episodes = acquires / 16 + 65536;
	if (sh.chk.max_episodes > (1u << 23))
		sh.chk.max_episodes = 1u << 23;
	sh.chk.episode_state = calloc(sh.chk.max_episodes, 1);
	sh.grants = calloc(sh.chk.max_episodes, sizeof(*sh.grants));
	assert_non_null(sh.chk.episode_state);
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
	cfg.listener = breaker_check_listener;
	cfg.listener_ctx = &sh.chk;
	assert_int_equal(resil_breaker_new(&sh.b, &cfg, NULL), RESIL_OK);
	sh.chk.last_to = RESIL_BREAKER_CLOSED;
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
	breaker_check_assert(&sh.chk, m.transitions);
	/* The dependency did flip (on the system clock, a run of a few
	 * milliseconds may not see a whole period: no minimum there). */
	assert_true(!manual || m.transitions > 10);
	/* No HALF_OPEN episode granted more than K probes. */
	for (e = 1; e <= m.transitions && e < sh.chk.max_episodes; e++) {
		if (sh.chk.episode_state[e] != RESIL_BREAKER_HALF_OPEN)
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
	free(sh.chk.episode_state);
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

/* ---- the shm kill storm (issue 25 item 2) ----
 *
 * STORM_WORKERS processes share one region holding a bulkhead of
 * STORM_LIMIT and a breaker of K = STORM_K probes. Each worker takes up
 * to 3 bulkhead slots at once, asks the breaker for a permit (every
 * outcome a failure, so after the first trip every grant is a HALF_OPEN
 * probe), moves the shared manual clock, and gives its slots back. The
 * parent SIGKILLs a random subset of the workers at a random point
 * (often while they open the region and claim a process slot), and
 * restarts the killed ones all at once, as a supervisor does; they race
 * to take over the dead processes' slots. Invariants, checked by the
 * workers themselves at every grant:
 *   - never more than STORM_LIMIT bulkhead slots held by live processes
 *     (one 64-bit word counts each worker's held slots in its own 4
 *     bits, so each sum is a snapshot; the parent clears a killed
 *     worker's bits once it is a zombie, before its slots can be
 *     reclaimed);
 *   - never more than STORM_K probes granted in one HALF_OPEN episode;
 * and no call returns an error it should not (a release refused as
 * RESIL_E_MISUSE is the sign of two processes in one process slot, which
 * then overwrite each other's count). RESIL_SOAK_KILLS sets the kills:
 * by default 3000, 1000 under a sanitizer (the `make test` versions, a
 * few seconds); `make soak` runs 20 000 (SOAK_KILLS=...). Before the slot
 * claim was one CAS, 1000 kills failed about one run in two, 2000 every run.
 */
#define STORM_WORKERS 12 /* at most 16: 4 bits each in one word */
#define STORM_LIMIT 8
#define STORM_HOLD 3 /* slots a worker takes at once */
#define STORM_K 2
#define STORM_EPISODES (1u << 16)
#define STORM_WAIT_ROUNDS 20000000u /* yields before "no progress" */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEFAULT_KILLS 1000ull
#else
#define DEFAULT_KILLS 3000ull
#endif

typedef struct storm {
	uint64_t now;  /* the breaker's clock */
	uint64_t gate; /* workers of generation g start when gate >= g */
	uint64_t live; /* slots held: 4 bits per worker */
	uint64_t over; /* grants that saw more than STORM_LIMIT held */
	uint64_t peak;
	uint64_t grants, refusals, probes, probe_over, errors;
	uint64_t progress[STORM_WORKERS];
	pid_t parent;         /* a worker whose parent is gone exits */
	char first_error[32]; /* what failed first */
	uint64_t episodes, max_probes;
	/* Per episode ep, at ep % STORM_EPISODES: ep << 16 | grants, reset
	 * by the first grant of a later episode in that place (a ring: the
	 * check covers a storm of any length). */
	uint64_t episode_grants[STORM_EPISODES];
} storm;

static storm *sm;

static uint64_t
storm_now(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&sm->now, __ATOMIC_ACQUIRE);
}

static const resil_clock storm_clock = { storm_now, NULL, NULL, NULL, NULL,
	NULL, NULL };

static char storm_region[64];

static resil_breaker_config
storm_breaker_cfg(void)
{
	resil_breaker_config c;

	resil_breaker_config_init(&c);
	c.clock = &storm_clock;
	c.failure_rate_pct = 0;
	c.consecutive_failures = 1;
	c.open_wait_ns = 4;
	c.max_half_open_ns = 16; /* a killed prober's permit lapses */
	c.permitted_probes = STORM_K;
	return c;
}

static resil_bulkhead_config
storm_bulkhead_cfg(void)
{
	resil_bulkhead_config c = resil_bulkhead_config_default();

	c.max_concurrent = STORM_LIMIT;
	return c;
}

static unsigned
nibble_sum(uint64_t v)
{
	unsigned n = 0;

	for (; v != 0; v >>= 4)
		n += (unsigned)(v & 15);
	return n;
}

static void
storm_count(uint64_t *p, uint64_t d)
{
	__atomic_add_fetch(p, d, __ATOMIC_SEQ_CST);
}

static void
storm_error(const char *what)
{
	if (__atomic_add_fetch(&sm->errors, 1, __ATOMIC_SEQ_CST) == 1)
		snprintf(sm->first_error, sizeof(sm->first_error), "%s", what);
}

static void
storm_peak(uint64_t v)
{
	uint64_t p = __atomic_load_n(&sm->peak, __ATOMIC_SEQ_CST);

	while (v > p &&
	    !__atomic_compare_exchange_n(
	        &sm->peak, &p, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

/* A probe permit of episode ep was granted. */
static void
storm_probe(uint64_t ep)
{
	uint64_t *g = &sm->episode_grants[ep % STORM_EPISODES];
	uint64_t w = __atomic_load_n(g, __ATOMIC_SEQ_CST), nw, n, m;

	for (;;) {
		nw = (w >> 16) == ep ? w + 1 : ep << 16 | 1;
		if (__atomic_compare_exchange_n(
		        g, &w, nw, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
	}
	n = nw & 0xffff;
	if (n == 1)
		storm_count(&sm->episodes, 1);
	storm_count(&sm->probes, 1);
	if (n > STORM_K)
		storm_count(&sm->probe_over, 1);
	m = __atomic_load_n(&sm->max_probes, __ATOMIC_SEQ_CST);
	while (n > m &&
	    !__atomic_compare_exchange_n(&sm->max_probes, &m, n, false,
	        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

static void
storm_worker(unsigned i, uint64_t gen)
{
	const uint64_t one = (uint64_t)1 << (4 * i);
	resil_breaker_config bc = storm_breaker_cfg();
	resil_bulkhead_config hc = storm_bulkhead_cfg();
	resil_shm *shm;
	resil_breaker *b;
	resil_bulkhead *bh;
	resil_permit p;
	resil_err e;

	while (__atomic_load_n(&sm->gate, __ATOMIC_ACQUIRE) < gen) {
		if (getppid() != sm->parent)
			_exit(5);
		sched_yield();
	}
	if (resil_shm_open(&shm, storm_region, NULL, NULL) != RESIL_OK ||
	    resil_shm_bulkhead(shm, "storm-bh", &hc, &bh, NULL) != RESIL_OK ||
	    resil_shm_breaker(shm, "storm-br", &bc, &b, NULL) != RESIL_OK) {
		storm_error("open");
		_exit(3);
	}
	for (;;) {
		unsigned held = 0, j;

		while (held < STORM_HOLD &&
		    (e = resil_bulkhead_try_acquire(bh)) == RESIL_OK) {
			uint64_t v = __atomic_add_fetch(
			    &sm->live, one, __ATOMIC_SEQ_CST);
			unsigned n = nibble_sum(v);

			held++;
			storm_count(&sm->grants, 1);
			storm_peak(n);
			if (n > STORM_LIMIT)
				storm_count(&sm->over, 1);
		}
		if (held < STORM_HOLD) {
			if (e != RESIL_E_LIMITED)
				storm_error("bulkhead acquire");
			storm_count(&sm->refusals, 1);
		}
		p.episode = UINT64_MAX;
		e = resil_breaker_acquire(b, &p);
		if (e == RESIL_OK) {
			/* Episode 0 is the first CLOSED one; after it every
			 * grant is a probe (nothing ever succeeds). */
			if (p.episode != UINT64_MAX && p.episode > 0)
				storm_probe(p.episode);
			if (resil_breaker_record(
			        b, &p, RESIL_OUTCOME_FAILURE) != RESIL_OK)
				storm_error("breaker record");
		} else if (e != RESIL_E_OPEN) {
			storm_error("breaker acquire");
		}
		__atomic_add_fetch(&sm->now, 1, __ATOMIC_SEQ_CST);
		sched_yield();
		for (j = 0; j < held; j++) {
			__atomic_sub_fetch(&sm->live, one, __ATOMIC_SEQ_CST);
			if (resil_bulkhead_release(bh) != RESIL_OK)
				storm_error("bulkhead release");
		}
		__atomic_add_fetch(&sm->progress[i], 1, __ATOMIC_SEQ_CST);
		if (getppid() != sm->parent)
			_exit(5); /* the test failed and left */
	}
}

static pid_t
storm_spawn(unsigned i, uint64_t gen)
{
	pid_t kid = fork();

	assert_true(kid >= 0);
	if (kid == 0)
		storm_worker(i, gen);
	return kid;
}

/* Kill worker i and wait until it is a zombie: it can no longer write,
 * and its slots cannot be reclaimed yet (a zombie's pid is alive). Clear
 * its held bits, then reap it. */
static void
storm_kill(pid_t kid, unsigned i)
{
	siginfo_t si;
	int st;

	assert_int_equal(kill(kid, SIGKILL), 0);
	memset(&si, 0, sizeof(si));
	assert_int_equal(waitid(P_PID, (id_t)kid, &si, WEXITED | WNOWAIT), 0);
	__atomic_and_fetch(
	    &sm->live, ~((uint64_t)15 << (4 * i)), __ATOMIC_SEQ_CST);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
		fail_msg("storm worker %u ended with status %d", i, st);
}

static uint64_t
storm_kills_wanted(void)
{
	const char *s = getenv("RESIL_SOAK_KILLS");
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return DEFAULT_KILLS;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || v < 1)
		fail_msg("RESIL_SOAK_KILLS=%s: want a number >= 1", s);
	return (uint64_t)v;
}

static uint64_t
storm_progress(void)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < STORM_WORKERS; i++)
		n += __atomic_load_n(&sm->progress[i], __ATOMIC_SEQ_CST);
	return n;
}

static void
test_soak_shm_kill_storm(void **state)
{
	resil_breaker_config bc = storm_breaker_cfg();
	resil_bulkhead_config hc = storm_bulkhead_cfg();
	resil_bulkhead_metrics hm;
	resil_shm *shm;
	resil_breaker *b;
	resil_bulkhead *bh;
	resil_rng rng;
	pid_t kids[STORM_WORKERS];
	uint64_t want = storm_kills_wanted(), kills = 0, rounds = 0, gen = 1;
	uint64_t t0, t1, episodes;
	uint32_t max_probes = 0;
	unsigned i;

	(void)state;
	sm = mmap(NULL, sizeof(*sm), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(sm != MAP_FAILED);
	memset(sm, 0, sizeof(*sm));
	sm->now = 1000;
	sm->parent = getpid();
	snprintf(
	    storm_region, sizeof(storm_region), "storm-%ld", (long)getpid());
	(void)resil_shm_unlink(storm_region, NULL);
	assert_int_equal(
	    resil_shm_open(&shm, storm_region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_bulkhead(shm, "storm-bh", &hc, &bh, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_breaker(shm, "storm-br", &bc, &b, NULL), RESIL_OK);
	resil_rng_seed(&rng, 2025);
	t0 = resil_clock_now(resil_clock_system());
	for (i = 0; i < STORM_WORKERS; i++)
		kids[i] = storm_spawn(i, gen);
	__atomic_store_n(&sm->gate, gen, __ATOMIC_RELEASE);
	while (kills < want) {
		uint64_t mask, wait, base, spins;

		/* Some progress first (none: the kill lands while the
		 * workers open the region), then kill a random subset. */
		wait = resil_rng_next(&rng) % 4 == 0
		    ? 0
		    : resil_rng_next(&rng) % (4 * STORM_WORKERS);
		base = storm_progress();
		for (spins = 0; storm_progress() < base + wait; spins++) {
			if (spins >= STORM_WAIT_ROUNDS ||
			    __atomic_load_n(&sm->errors, __ATOMIC_SEQ_CST))
				fail_msg("storm: no progress (%llu errors, "
				         "the first: %s)",
				    (unsigned long long)sm->errors,
				    sm->first_error);
			sched_yield();
		}
		mask = resil_rng_next(&rng) & ((1u << STORM_WORKERS) - 1);
		if (mask == 0)
			mask = 1;
		gen++;
		for (i = 0; i < STORM_WORKERS; i++)
			if (mask & (1u << i)) {
				storm_kill(kids[i], i);
				kills++;
			}
		for (i = 0; i < STORM_WORKERS; i++)
			if (mask & (1u << i))
				kids[i] = storm_spawn(i, gen);
		/* The restarted ones open the region all at once. */
		__atomic_store_n(&sm->gate, gen, __ATOMIC_RELEASE);
		rounds++;
	}
	for (i = 0; i < STORM_WORKERS; i++)
		storm_kill(kids[i], i);
	t1 = resil_clock_now(resil_clock_system());

	episodes = sm->episodes;
	max_probes = (uint32_t)sm->max_probes;
	printf("soak shm kill storm: %llu kills in %llu rounds, %u "
	       "workers: %llu bulkhead grants (peak %llu of %d held), "
	       "%llu refusals, %llu probes in %llu HALF_OPEN episodes "
	       "(max %u of %d), %llu errors, %.2f s\n",
	    (unsigned long long)kills, (unsigned long long)rounds,
	    STORM_WORKERS, (unsigned long long)sm->grants,
	    (unsigned long long)sm->peak, STORM_LIMIT,
	    (unsigned long long)sm->refusals, (unsigned long long)sm->probes,
	    (unsigned long long)episodes, max_probes, STORM_K,
	    (unsigned long long)sm->errors, (double)(t1 - t0) / 1e9);
	fflush(stdout);
	assert_true(kills >= want);
	if (sm->errors != 0)
		fail_msg("storm: %llu errors, the first: %s",
		    (unsigned long long)sm->errors, sm->first_error);
	assert_true(sm->grants > 0);
	/* The bulkhead never went over its limit, the breaker never over
	 * K probes in an episode. */
	assert_int_equal(sm->over, 0);
	assert_true(sm->peak <= STORM_LIMIT);
	assert_int_equal(sm->probe_over, 0);
	assert_true(max_probes <= STORM_K);
	/* Every worker is gone: their slots all come back. */
	(void)resil_shm_reap(shm);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &hm), RESIL_OK);
	assert_int_equal(hm.in_flight, 0);
	for (i = 0; i < STORM_LIMIT; i++)
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	for (i = 0; i < STORM_LIMIT; i++)
		assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
	resil_breaker_free(b);
	resil_shm_close(shm);
	(void)resil_shm_unlink(storm_region, NULL);
	munmap(sm, sizeof(*sm));
}

/* The hedging property (issue 25 item 1) is tests/test_call_property.c;
 * `make soak` runs it after this file with RESIL_PROPERTY_SCRIPTS. */

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_soak_manual_clock),
		cmocka_unit_test(test_soak_system_clock),
		cmocka_unit_test(test_soak_shm_kill_storm),
	};

	return cmocka_run_group_tests_name("soak", tests, NULL, NULL);
}

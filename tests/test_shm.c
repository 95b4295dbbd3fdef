/*
 * Breakers in shared memory across processes (fork): K probes per episode
 * fleet-wide over 1000 episodes, a process SIGKILLed while it holds a
 * transition or a probe permit, listeners hearing other processes'
 * transitions in order, and the refusals (names, layouts, capacity).
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/breaker.h>
#include <resil/limit.h>
#include <resil/shm.h>

#include "breaker_shared.h"

/* A clock and a barrier all processes share (an anonymous shared page). */
typedef struct common {
	uint64_t now;
	pthread_barrier_t go, done;
	uint64_t granted; /* this episode's probe grants, all processes */
	uint64_t over;    /* episodes with more than K */
	uint64_t under;   /* episodes with fewer than K */
	int stop;
	int64_t inflight; /* bulkhead calls in flight, all processes */
	int64_t peak;
	uint64_t errors;
} common;

static common *cm;

static uint64_t
shared_now(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&cm->now, __ATOMIC_ACQUIRE);
}

static const resil_clock shared_clock = { shared_now, NULL, NULL, NULL, NULL,
	NULL, NULL };

static char region[64];

static void
setup_common(void)
{
	pthread_barrierattr_t ba;

	cm = mmap(NULL, sizeof(*cm), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(cm != MAP_FAILED);
	memset(cm, 0, sizeof(*cm));
	cm->now = 1000;
	snprintf(region, sizeof(region), "test-%ld", (long)getpid());
	(void)resil_shm_unlink(region, NULL);
	(void)pthread_barrierattr_init(&ba);
	(void)ba;
}

static void
teardown_common(void)
{
	(void)resil_shm_unlink(region, NULL);
	munmap(cm, sizeof(*cm));
}

static resil_breaker_config
probe_cfg(uint32_t k)
{
	resil_breaker_config c;

	resil_breaker_config_init(&c);
	c.clock = &shared_clock;
	c.failure_rate_pct = 0;
	c.consecutive_failures = 1;
	c.open_wait_ns = 10;
	c.max_half_open_ns = 100;
	c.permitted_probes = k;
	return c;
}

static void
barriers(unsigned n)
{
	pthread_barrierattr_t ba;

	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&cm->go, &ba, n);
	pthread_barrier_init(&cm->done, &ba, n);
	pthread_barrierattr_destroy(&ba);
}

/* ---- K probes per episode across 4 processes ---- */

#define PROCS 4
#define EPISODES 1000
#define K 2

static void
prober(void)
{
	resil_shm *shm;
	resil_breaker *b;
	resil_breaker_config c = probe_cfg(K);
	resil_permit p;
	int i;

	if (resil_shm_open(&shm, region, NULL, NULL) != RESIL_OK ||
	    resil_shm_breaker(shm, "probes", &c, &b, NULL) != RESIL_OK)
		_exit(3);
	for (;;) {
		pthread_barrier_wait(&cm->go);
		if (__atomic_load_n(&cm->stop, __ATOMIC_ACQUIRE))
			break;
		/* Each process tries twice: 8 acquires for K permits. */
		for (i = 0; i < 2; i++)
			if (resil_breaker_acquire(b, &p) == RESIL_OK)
				__atomic_add_fetch(
				    &cm->granted, 1, __ATOMIC_SEQ_CST);
		pthread_barrier_wait(&cm->done);
	}
	resil_breaker_free(b);
	resil_shm_close(shm);
	_exit(0);
}

static void
test_shm_k_probes_per_episode_across_processes(void **state)
{
	resil_shm *shm;
	resil_breaker *b;
	resil_breaker_config c = probe_cfg(K);
	resil_diag d;
	pid_t kids[PROCS];
	int i, e, st;

	(void)state;
	setup_common();
	barriers(PROCS + 1);
	assert_int_equal(resil_shm_open(&shm, region, NULL, &d), RESIL_OK);
	assert_int_equal(
	    resil_shm_breaker(shm, "probes", &c, &b, &d), RESIL_OK);
	for (i = 0; i < PROCS; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0)
			prober();
	}
	for (e = 0; e < EPISODES; e++) {
		/* OPEN now, its wait over: the children race for probes. */
		assert_int_equal(
		    resil_breaker_transition(b, RESIL_BREAKER_OPEN), RESIL_OK);
		__atomic_add_fetch(&cm->now, 10, __ATOMIC_SEQ_CST);
		__atomic_store_n(&cm->granted, 0, __ATOMIC_SEQ_CST);
		pthread_barrier_wait(&cm->go);
		pthread_barrier_wait(&cm->done);
		if (cm->granted > K)
			cm->over++;
		if (cm->granted < K)
			cm->under++;
	}
	__atomic_store_n(&cm->stop, 1, __ATOMIC_RELEASE);
	pthread_barrier_wait(&cm->go);
	for (i = 0; i < PROCS; i++) {
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(cm->over, 0);
	assert_int_equal(cm->under, 0);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_HALF_OPEN);
	resil_breaker_free(b);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a process killed while it holds a transition or a probe ---- */

static void
die_now(void)
{
	raise(SIGKILL);
}

typedef struct heard {
	uint64_t seqs[16];
	resil_breaker_state to[16];
	int n;
} heard;

static void
hear(const resil_breaker_event *ev, void *ctx)
{
	heard *h = ctx;

	if (h->n < 16) {
		h->seqs[h->n] = ev->seq;
		h->to[h->n] = ev->to;
		h->n++;
	}
}

static void
test_shm_sigkill_holding_transition_or_probe(void **state)
{
	resil_shm *shm;
	resil_breaker *b;
	resil_breaker_config c = probe_cfg(1);
	resil_breaker_metrics m;
	resil_permit p;
	heard h;
	pid_t kid;
	int st, i;

	(void)state;
	setup_common();
	memset(&h, 0, sizeof(h));
	c.listener = hear;
	c.listener_ctx = &h;
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_breaker(shm, "kill", &c, &b, NULL), RESIL_OK);

	/* A child dies (SIGKILL) in the middle of forcing it open. */
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		resil_shm *s2;
		resil_breaker *b2;
		resil_breaker_config c2 = probe_cfg(1);

		if (resil_shm_open(&s2, region, NULL, NULL) != RESIL_OK ||
		    resil_shm_breaker(s2, "kill", &c2, &b2, NULL) != RESIL_OK)
			_exit(3);
		resil__breaker_transit_hook = die_now;
		resil_breaker_force_open(b2);
		_exit(4); /* not reached */
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* Its transition was left half made: this process finishes it the
	 * first time it has to wait for it, and the breaker works on. */
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_E_OPEN);
	assert_int_equal(
	    resil_breaker_get_state(b), RESIL_BREAKER_FORCED_OPEN);
	assert_int_equal(resil_breaker_reset(b), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	/* This process's listener heard both, in order. */
	assert_int_equal(h.n, 2);
	assert_int_equal(h.seqs[0], 1);
	assert_int_equal(h.to[0], RESIL_BREAKER_FORCED_OPEN);
	assert_int_equal(h.seqs[1], 2);
	assert_int_equal(h.to[1], RESIL_BREAKER_CLOSED);

	/* A child takes the only probe and dies with it. */
	assert_int_equal(
	    resil_breaker_transition(b, RESIL_BREAKER_HALF_OPEN), RESIL_OK);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		resil_shm *s2;
		resil_breaker *b2;
		resil_breaker_config c2 = probe_cfg(1);
		resil_permit p2;

		if (resil_shm_open(&s2, region, NULL, NULL) != RESIL_OK ||
		    resil_shm_breaker(s2, "kill", &c2, &b2, NULL) !=
		        RESIL_OK ||
		    resil_breaker_acquire(b2, &p2) != RESIL_OK)
			_exit(3);
		raise(SIGKILL);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_E_OPEN);
	/* The permit lapses with the episode (max_half_open 100): then OPEN,
	 * and after its wait a new probe. */
	__atomic_add_fetch(&cm->now, 100, __ATOMIC_SEQ_CST);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_E_OPEN);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	__atomic_add_fetch(&cm->now, 10, __ATOMIC_SEQ_CST);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	assert_int_equal(resil_breaker_get_metrics(b, &m), RESIL_OK);
	for (i = 1; i < h.n; i++)
		assert_true(h.seqs[i] == h.seqs[i - 1] + 1);
	assert_int_equal(h.seqs[h.n - 1], m.transitions);
	resil_breaker_free(b);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- listeners hear other processes' transitions ---- */

static void
test_shm_listener_hears_other_processes(void **state)
{
	resil_shm *shm;
	resil_breaker *b;
	resil_breaker_config c = probe_cfg(1);
	heard h;
	pid_t kid;
	int st;

	(void)state;
	setup_common();
	memset(&h, 0, sizeof(h));
	c.listener = hear;
	c.listener_ctx = &h;
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_breaker(shm, "ears", &c, &b, NULL), RESIL_OK);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		resil_shm *s2;
		resil_breaker *b2;
		resil_breaker_config c2 = probe_cfg(1);
		resil_permit p2;

		if (resil_shm_open(&s2, region, NULL, NULL) != RESIL_OK ||
		    resil_shm_breaker(s2, "ears", &c2, &b2, NULL) != RESIL_OK)
			_exit(3);
		/* A failure trips it; the wait passes; a probe closes it. */
		if (resil_breaker_acquire(b2, &p2) != RESIL_OK)
			_exit(4);
		resil_breaker_record(b2, &p2, RESIL_OUTCOME_FAILURE);
		__atomic_add_fetch(&cm->now, 10, __ATOMIC_SEQ_CST);
		if (resil_breaker_acquire(b2, &p2) != RESIL_OK)
			_exit(5);
		resil_breaker_record(b2, &p2, RESIL_OUTCOME_SUCCESS);
		resil_breaker_free(b2);
		resil_shm_close(s2);
		_exit(0);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(h.n, 0); /* nothing until this process looks */
	assert_int_equal(resil_breaker_poll(b), RESIL_OK);
	assert_int_equal(h.n, 3);
	assert_int_equal(h.to[0], RESIL_BREAKER_OPEN);
	assert_int_equal(h.to[1], RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(h.to[2], RESIL_BREAKER_CLOSED);
	assert_int_equal(h.seqs[2], 3);
	assert_int_equal(resil_breaker_poll(b), RESIL_OK);
	assert_int_equal(h.n, 3); /* each heard once */
	resil_breaker_free(b);
	resil_shm_close(shm);
	teardown_common();
}

/* One step of another process on breaker "ears": a fresh attach, then
 * fail (trip it) or wait out the open wait and probe with a success. */
static void
other_process(int trip)
{
	pid_t kid = fork();
	int st;

	assert_true(kid >= 0);
	if (kid == 0) {
		resil_shm *s2;
		resil_breaker *b2;
		resil_breaker_config c2 = probe_cfg(1);
		resil_permit p2;

		if (resil_shm_open(&s2, region, NULL, NULL) != RESIL_OK ||
		    resil_shm_breaker(s2, "ears", &c2, &b2, NULL) != RESIL_OK)
			_exit(3);
		if (!trip)
			__atomic_add_fetch(&cm->now, 10, __ATOMIC_SEQ_CST);
		if (resil_breaker_acquire(b2, &p2) != RESIL_OK)
			_exit(4);
		resil_breaker_record(b2, &p2,
		    trip ? RESIL_OUTCOME_FAILURE : RESIL_OUTCOME_SUCCESS);
		resil_breaker_free(b2);
		resil_shm_close(s2);
		_exit(0);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Issue 38 item 5: a listener hears the transitions other processes made
 * at this process's next call, whatever the call's path: a call the
 * breaker another process opened rejects hears the OPEN; a call granted
 * in CLOSED (the fast path's state) hears the HALF_OPEN and CLOSED another
 * process made meanwhile. No resil_breaker_poll(). */
static void
test_shm_listener_hears_at_next_call(void **state)
{
	resil_shm *shm;
	resil_breaker *b;
	resil_breaker_config c = probe_cfg(1);
	resil_permit p;
	heard h;

	(void)state;
	setup_common();
	memset(&h, 0, sizeof(h));
	c.listener = hear;
	c.listener_ctx = &h;
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_breaker(shm, "ears", &c, &b, NULL), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(h.n, 0);

	other_process(1); /* opens it */
	assert_int_equal(h.n, 0);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_E_OPEN);
	assert_int_equal(h.n, 1);
	assert_int_equal(h.to[0], RESIL_BREAKER_OPEN);
	assert_int_equal(h.seqs[0], 1);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_E_OPEN);
	assert_int_equal(h.n, 1); /* heard once */

	other_process(0); /* HALF_OPEN, its probe closes it */
	assert_int_equal(h.n, 1);
	assert_int_equal(resil_breaker_acquire(b, &p), RESIL_OK);
	assert_int_equal(h.n, 3);
	assert_int_equal(h.to[1], RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(h.to[2], RESIL_BREAKER_CLOSED);
	assert_int_equal(h.seqs[2], 3);
	assert_int_equal(
	    resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	assert_int_equal(h.n, 3);
	resil_breaker_free(b);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- refusals ---- */

static void
test_shm_refusals(void **state)
{
	resil_shm *shm, *other;
	resil_breaker *b;
	resil_breaker_config c = probe_cfg(1), c2;
	resil_shm_config sc;
	resil_diag d;
	char longname[300];
	int i, fd;
	char path[128];
	uint32_t *layout;

	(void)state;
	setup_common();
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(resil_shm_open(&shm, "a/b", NULL, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "no '/'"));
	assert_int_equal(resil_shm_open(&shm, "", NULL, &d), RESIL_E_INVAL);
	assert_int_equal(
	    resil_shm_open(&shm, longname, NULL, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "..."));
	resil_shm_config_init(&sc);
	sc.max_entries = 0;
	assert_int_equal(resil_shm_open(&shm, region, &sc, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "shm.max_entries"));

	/* Two entries at most. */
	resil_shm_config_init(&sc);
	sc.max_entries = 2;
	assert_int_equal(resil_shm_open(&shm, region, &sc, &d), RESIL_OK);
	assert_int_equal(resil_shm_breaker(shm, "x", &c, &b, &d), RESIL_OK);
	resil_breaker_free(b);
	/* The same name with another layout. */
	c2 = c;
	c2.permitted_probes = 3;
	assert_int_equal(
	    resil_shm_breaker(shm, "x", &c2, &b, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "1 probes; asked for COUNT of 100, 3"));
	assert_int_equal(
	    resil_shm_breaker(shm, "bad name", &c, &b, &d), RESIL_E_INVAL);
	assert_int_equal(resil_shm_breaker(shm, "y", &c, &b, &d), RESIL_OK);
	resil_breaker_free(b);
	assert_int_equal(
	    resil_shm_breaker(shm, "z", &c, &b, &d), RESIL_E_NOMEM);
	assert_non_null(strstr(d.msg, "no room for breaker z"));
	/* Attached again, it is the same breaker. */
	assert_int_equal(resil_shm_open(&other, region, NULL, &d), RESIL_OK);
	assert_int_equal(resil_shm_breaker(other, "x", &c, &b, &d), RESIL_OK);
	for (i = 0; i < 1; i++) {
		resil_breaker *b1;
		resil_permit p;

		assert_int_equal(
		    resil_shm_breaker(shm, "x", &c, &b1, &d), RESIL_OK);
		assert_int_equal(resil_breaker_acquire(b1, &p), RESIL_OK);
		assert_int_equal(
		    resil_breaker_record(b1, &p, RESIL_OUTCOME_FAILURE),
		    RESIL_OK);
		assert_int_equal(
		    resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
		resil_breaker_free(b1);
	}
	resil_breaker_free(b);
	resil_shm_close(other);
	resil_shm_close(shm);

	/* A region of another layout: refused with both named. */
	snprintf(path, sizeof(path), "/resil.%s", region);
	fd = shm_open(path, O_RDWR, 0);
	assert_true(fd >= 0);
	layout = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(layout != MAP_FAILED);
	layout[2] = 99; /* the layout field, after the 8-byte magic */
	munmap(layout, 4096);
	close(fd);
	assert_int_equal(
	    resil_shm_open(&shm, region, NULL, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "region of layout 99"));
	assert_non_null(strstr(d.msg, "refusing to attach"));
	teardown_common();
}

/* ---- a rate limiter shared by 4 processes ---- */

#define RL_RATE 5
#define RL_PERIOD 100
#define RL_BURST 8
#define RL_TRIES 6 /* per process per round: 24 > the burst */
#define RL_ROUNDS 300

static resil_ratelimit_config
rl_cfg(void)
{
	resil_ratelimit_config c = resil_ratelimit_config_default();

	c.rate = RL_RATE;
	c.period_ns = RL_PERIOD;
	c.burst = RL_BURST;
	c.clock = &shared_clock;
	return c;
}

static void
rl_taker(void)
{
	resil_shm *shm;
	resil_ratelimit *rl;
	resil_ratelimit_config c = rl_cfg();
	uint64_t retry;
	int i;

	if (resil_shm_open(&shm, region, NULL, NULL) != RESIL_OK ||
	    resil_shm_ratelimit(shm, "rl", &c, &rl, NULL) != RESIL_OK)
		_exit(3);
	for (;;) {
		pthread_barrier_wait(&cm->go);
		if (__atomic_load_n(&cm->stop, __ATOMIC_ACQUIRE))
			break;
		for (i = 0; i < RL_TRIES; i++) {
			resil_err e =
			    resil_ratelimit_try_acquire(rl, 1, &retry);

			if (e == RESIL_OK)
				__atomic_add_fetch(
				    &cm->granted, 1, __ATOMIC_SEQ_CST);
			else if (e != RESIL_E_LIMITED || retry == 0)
				__atomic_add_fetch(
				    &cm->errors, 1, __ATOMIC_SEQ_CST);
		}
		pthread_barrier_wait(&cm->done);
	}
	resil_ratelimit_free(rl);
	resil_shm_close(shm);
	_exit(0);
}

/* Four processes drain one limiter each round; the shared manual clock
 * moves between rounds by uneven steps. Each round's grants must equal
 * what an in-process limiter on the same timeline grants when drained
 * (the rule is exact), and the total never exceeds burst + rate * t /
 * period. */
static void
test_shm_ratelimit_across_processes(void **state)
{
	static const uint64_t steps[] = { 0, 20, 100, 37, 300, 1, 19, 250 };
	resil_shm *shm;
	resil_ratelimit *rl, *ref;
	resil_ratelimit_config c = rl_cfg(), rc = rl_cfg();
	resil_ratelimit_metrics m;
	resil_manual_clock refclock;
	pid_t kids[PROCS];
	uint64_t total = 0, elapsed = 0, expect;
	int i, r, st;

	(void)state;
	setup_common();
	barriers(PROCS + 1);
	resil_manual_clock_init(&refclock, 1000);
	rc.clock = resil_manual_clock_hook(&refclock);
	assert_int_equal(resil_ratelimit_new(&ref, &rc, NULL), RESIL_OK);
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_ratelimit(shm, "rl", &c, &rl, NULL), RESIL_OK);
	for (i = 0; i < PROCS; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0)
			rl_taker();
	}
	for (r = 0; r < RL_ROUNDS; r++) {
		uint64_t step = steps[r % 8];

		__atomic_add_fetch(&cm->now, step, __ATOMIC_SEQ_CST);
		resil_manual_clock_advance(&refclock, step);
		elapsed += step;
		__atomic_store_n(&cm->granted, 0, __ATOMIC_SEQ_CST);
		pthread_barrier_wait(&cm->go);
		pthread_barrier_wait(&cm->done);
		for (expect = 0;
		     resil_ratelimit_try_acquire(ref, 1, NULL) == RESIL_OK;)
			expect++;
		assert_int_equal(cm->granted, expect);
		total += cm->granted;
		assert_true(total <= RL_BURST + RL_RATE * elapsed / RL_PERIOD);
	}
	__atomic_store_n(&cm->stop, 1, __ATOMIC_RELEASE);
	pthread_barrier_wait(&cm->go);
	for (i = 0; i < PROCS; i++) {
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(cm->errors, 0);
	/* Drained by the others: nothing left here either. */
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.available, 0);
	assert_int_equal(m.granted_calls, 0); /* this process's own */
	assert_true(total > RL_BURST);
	resil_ratelimit_free(ref);
	resil_ratelimit_free(rl);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a bulkhead shared by 4 processes ---- */

#define BH_LIMIT 5

static resil_bulkhead_config
bh_cfg(void)
{
	resil_bulkhead_config c = resil_bulkhead_config_default();

	c.max_concurrent = BH_LIMIT;
	return c;
}

static void
bh_racer(void)
{
	resil_shm *shm;
	resil_bulkhead *bh;
	resil_bulkhead_config c = bh_cfg();
	int i;

	if (resil_shm_open(&shm, region, NULL, NULL) != RESIL_OK ||
	    resil_shm_bulkhead(shm, "bh", &c, &bh, NULL) != RESIL_OK)
		_exit(3);
	pthread_barrier_wait(&cm->go);
	/* Each takes up to 3 at once (12 wanted, 5 there), holds them
	 * through a yield, and gives them back. */
	for (i = 0; i < 2000; i++) {
		int64_t v, p;
		int held = 0, j;

		while (
		    held < 3 && resil_bulkhead_try_acquire(bh) == RESIL_OK) {
			held++;
			__atomic_add_fetch(&cm->granted, 1, __ATOMIC_SEQ_CST);
			v = __atomic_add_fetch(
			    &cm->inflight, 1, __ATOMIC_SEQ_CST);
			p = __atomic_load_n(&cm->peak, __ATOMIC_SEQ_CST);
			while (v > p &&
			    !__atomic_compare_exchange_n(&cm->peak, &p, v,
			        false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
				;
		}
		sched_yield();
		for (j = 0; j < held; j++) {
			__atomic_sub_fetch(&cm->inflight, 1, __ATOMIC_SEQ_CST);
			if (resil_bulkhead_release(bh) != RESIL_OK)
				__atomic_add_fetch(
				    &cm->errors, 1, __ATOMIC_SEQ_CST);
		}
	}
	resil_bulkhead_free(bh);
	resil_shm_close(shm);
	_exit(0);
}

/* A child that takes n slots of bulkhead name, says so, and waits to be
 * killed. */
static pid_t
holder(const char *name, int n)
{
	pid_t kid = fork();

	assert_true(kid >= 0);
	if (kid == 0) {
		resil_shm *shm;
		resil_bulkhead *bh;
		resil_bulkhead_config c = bh_cfg();
		int i;

		if (resil_shm_open(&shm, region, NULL, NULL) != RESIL_OK ||
		    resil_shm_bulkhead(shm, name, &c, &bh, NULL) != RESIL_OK)
			_exit(3);
		for (i = 0; i < n; i++)
			if (resil_bulkhead_try_acquire(bh) != RESIL_OK)
				_exit(4);
		pthread_barrier_wait(&cm->go);
		for (;;)
			pause();
	}
	pthread_barrier_wait(&cm->go);
	return kid;
}

static void
kill_holder(pid_t kid)
{
	int st;

	assert_int_equal(kill(kid, SIGKILL), 0);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void
test_shm_bulkhead_across_processes(void **state)
{
	resil_shm *shm;
	resil_bulkhead *bh, *bh2;
	resil_bulkhead_config c = bh_cfg();
	resil_bulkhead_metrics m;
	pid_t kids[PROCS], kid;
	int i, st;

	(void)state;
	setup_common();
	barriers(PROCS + 1);
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_bulkhead(shm, "bh", &c, &bh, NULL), RESIL_OK);

	/* Four processes race: never more than the limit in flight. */
	for (i = 0; i < PROCS; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0)
			bh_racer();
	}
	pthread_barrier_wait(&cm->go);
	for (i = 0; i < PROCS; i++) {
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	fprintf(stderr, "shm bulkhead: %llu grants, peak %lld of %d\n",
	    (unsigned long long)cm->granted, (long long)cm->peak, BH_LIMIT);
	assert_true(cm->peak <= BH_LIMIT);
	assert_true(cm->granted > 0);
	assert_int_equal(cm->errors, 0);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);

	/* A process holding 3 slots dies: they come back by a reap. */
	barriers(2);
	kid = holder("bh", 3);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 3);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	/* Full; its holder is alive, so the sweep gives nothing back. */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_shm_reap(shm), 0);
	kill_holder(kid);
	assert_int_equal(resil_shm_reap(shm), 3);
	assert_int_equal(resil_shm_reap(shm), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	for (i = 0; i < BH_LIMIT; i++)
		assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);

	/* All slots of a fresh bulkhead held by a process that dies: the
	 * first refusal sweeps and the acquire gets its slot. */
	assert_int_equal(
	    resil_shm_bulkhead(shm, "bh2", &c, &bh2, NULL), RESIL_OK);
	kid = holder("bh2", BH_LIMIT);
	kill_holder(kid);
	assert_int_equal(resil_bulkhead_get_metrics(bh2, &m), RESIL_OK);
	assert_int_equal(m.in_flight, BH_LIMIT); /* not yet found dead */
	assert_int_equal(resil_bulkhead_try_acquire(bh2), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh2, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 1);
	assert_int_equal(resil_bulkhead_release(bh2), RESIL_OK);

	/* A process that took over a dead one's process slot does not
	 * inherit its count: the dead one's is ignored at once. */
	kid = holder("bh2", 2);
	kill_holder(kid);
	kid = holder("bh2", BH_LIMIT); /* takes the first dead slot */
	kill_holder(kid);
	assert_int_equal(resil_shm_reap(shm), BH_LIMIT);
	assert_int_equal(resil_bulkhead_get_metrics(bh2, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);
	resil_bulkhead_free(bh2);
	resil_bulkhead_free(bh);
	resil_shm_close(shm);
	teardown_common();
}

/* Two processes race for the last slot of a shared bulkhead (the parent
 * holds the others), RACE_ROUNDS times in lockstep: exactly one wins each
 * round, and nobody over the limit. Since issue 39 the decision is one
 * CAS on the shared count: one wins, the other sees the limit. (Before,
 * each acquire counted itself in its own line, then summed all lines:
 * two racers could each see the other and both back off, a window of a
 * few instructions this lockstep did not hit in practice.) */
#define RACE_ROUNDS 2000

static void
last_slot_racer(void)
{
	resil_shm *shm;
	resil_bulkhead *bh;
	resil_bulkhead_config c = bh_cfg();
	int i;

	if (resil_shm_open(&shm, region, NULL, NULL) != RESIL_OK ||
	    resil_shm_bulkhead(shm, "last", &c, &bh, NULL) != RESIL_OK)
		_exit(3);
	for (i = 0; i < RACE_ROUNDS; i++) {
		bool won;

		pthread_barrier_wait(&cm->go);
		won = resil_bulkhead_try_acquire(bh) == RESIL_OK;
		if (won)
			__atomic_add_fetch(&cm->granted, 1, __ATOMIC_SEQ_CST);
		pthread_barrier_wait(&cm->done);
		if (won && resil_bulkhead_release(bh) != RESIL_OK)
			__atomic_add_fetch(&cm->errors, 1, __ATOMIC_SEQ_CST);
	}
	resil_bulkhead_free(bh);
	resil_shm_close(shm);
	_exit(0);
}

static void
test_shm_bulkhead_last_slot_has_one_winner(void **state)
{
	resil_shm *shm;
	resil_bulkhead *bh;
	resil_bulkhead_config c = bh_cfg();
	resil_bulkhead_metrics m;
	pid_t kids[2];
	int i, st;

	(void)state;
	setup_common();
	barriers(3);
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_bulkhead(shm, "last", &c, &bh, NULL), RESIL_OK);
	for (i = 0; i < BH_LIMIT - 1; i++)
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	for (i = 0; i < 2; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0)
			last_slot_racer();
	}
	for (i = 0; i < RACE_ROUNDS; i++) {
		uint64_t won;

		pthread_barrier_wait(&cm->go);
		pthread_barrier_wait(&cm->done);
		won = __atomic_exchange_n(&cm->granted, 0, __ATOMIC_SEQ_CST);
		if (won > 1)
			cm->over++;
		else if (won == 0)
			cm->under++;
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(waitpid(kids[i], &st, 0), kids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	fprintf(stderr,
	    "shm bulkhead last slot: %llu rounds without a winner, %llu "
	    "with two, of %d\n",
	    (unsigned long long)cm->under, (unsigned long long)cm->over,
	    RACE_ROUNDS);
	assert_int_equal(cm->over, 0);
	assert_int_equal(cm->under, 0);
	assert_int_equal(cm->errors, 0);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, BH_LIMIT - 1);
	for (i = 0; i < BH_LIMIT - 1; i++)
		assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- limiter refusals ---- */

static void
test_shm_limit_refusals(void **state)
{
	resil_shm *shm;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
	resil_breaker *b;
	resil_breaker_config bc = probe_cfg(1);
	resil_ratelimit_config c = rl_cfg(), c2;
	resil_bulkhead_config hc = bh_cfg(), hc2;
	resil_diag d;
	char longname[80];

	(void)state;
	setup_common();
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(resil_shm_open(&shm, region, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_shm_ratelimit(shm, "a/b", &c, &rl, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "rate limiter name"));
	assert_non_null(strstr(d.msg, "no '/'"));
	assert_int_equal(
	    resil_shm_ratelimit(shm, longname, &c, &rl, &d), RESIL_E_INVAL);
	assert_int_equal(
	    resil_shm_bulkhead(shm, longname, &hc, &bh, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead name"));
	assert_int_equal(
	    resil_shm_ratelimit(shm, "rl", NULL, &rl, &d), RESIL_E_INVAL);
	c2 = c;
	c2.rate = 0;
	assert_int_equal(
	    resil_shm_ratelimit(shm, "rl", &c2, &rl, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "ratelimit.rate"));

	/* Another layout under the same name. */
	assert_int_equal(
	    resil_shm_ratelimit(shm, "rl", &c, &rl, &d), RESIL_OK);
	resil_ratelimit_free(rl);
	c2 = c;
	c2.burst = 9;
	assert_int_equal(
	    resil_shm_ratelimit(shm, "rl", &c2, &rl, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "rate limiter rl has rate 5 per 100 ns, burst 8; asked for 5 per "
	    "100 ns, burst 9"));
	assert_int_equal(
	    resil_shm_bulkhead(shm, "bh", &hc, &bh, &d), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	resil_bulkhead_free(bh);
	hc2 = hc;
	hc2.max_concurrent = 6;
	assert_int_equal(
	    resil_shm_bulkhead(shm, "bh", &hc2, &bh, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "has max_concurrent 5; asked for 6"));
	hc2 = hc;
	hc2.batch = 2;
	assert_int_equal(
	    resil_shm_bulkhead(shm, "bh3", &hc2, &bh, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "must be 0 for a shared-memory"));
	hc2 = hc;
	hc2.adaptive = 1;
	assert_int_equal(
	    resil_shm_bulkhead(shm, "bh3", &hc2, &bh, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.adaptive"));

	/* One namespace for every kind. */
	assert_int_equal(
	    resil_shm_ratelimit(shm, "bh", &c, &rl, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bh is a bulkhead, not a rate limiter"));
	assert_int_equal(
	    resil_shm_breaker(shm, "rl", &bc, &b, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "rl is a rate limiter, not a breaker"));
	assert_int_equal(resil_shm_breaker(shm, "br", &bc, &b, &d), RESIL_OK);
	resil_breaker_free(b);
	assert_int_equal(
	    resil_shm_bulkhead(shm, "br", &hc, &bh, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "br is a breaker, not a bulkhead"));
	assert_int_equal(resil_shm_reap(NULL), 0);
	resil_shm_close(shm);
	teardown_common();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shm_refusals),
		cmocka_unit_test(test_shm_limit_refusals),
		cmocka_unit_test(test_shm_ratelimit_across_processes),
		cmocka_unit_test(test_shm_bulkhead_across_processes),
		cmocka_unit_test(test_shm_bulkhead_last_slot_has_one_winner),
		cmocka_unit_test(test_shm_listener_hears_other_processes),
		cmocka_unit_test(test_shm_listener_hears_at_next_call),
		cmocka_unit_test(test_shm_sigkill_holding_transition_or_probe),
		cmocka_unit_test(
		    test_shm_k_probes_per_episode_across_processes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

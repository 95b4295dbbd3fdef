/*
 * Keyed rate limiter families in shared memory (h3/kshm2, issue 41,
 * resil_shm_keyed with kind RATELIMIT): two processes share key K's
 * burst exactly (a manual clock in shared memory), key L has its own, an
 * override's settings are every process's and a process with other
 * settings is refused, a limiter below its burst is never reclaimed
 * under churn, a process SIGKILLed holding keys leaves them reclaimable,
 * and the pipeline's ratelimit.key.shared.
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/keyed.h>
#include <resil/pipeline.h>
#include <resil/shm.h>

#include "support/shm_fork.h"
#include "support/text_pipeline.h"

/* A clock, a barrier and counters the processes share. */
typedef struct common {
	uint64_t now;
	pthread_barrier_t go;
	uint64_t granted[2]; /* per process: parent 0, child 1 */
} common;

static common *cm;
static char region[64];

static uint64_t
shared_now(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&cm->now, __ATOMIC_ACQUIRE);
}

static const resil_clock shared_clock = { shared_now, NULL, NULL, NULL, NULL,
	NULL, NULL };

static void
setup_common(void)
{
	cm = shm_fork_page(sizeof(*cm));
	cm->now = 1000;
	shm_fork_barrier(&cm->go, 2);
	shm_fork_region(region, sizeof(region), "test-kshmr");
}

static void
teardown_common(void)
{
	(void)resil_shm_unlink(region, NULL);
	pthread_barrier_destroy(&cm->go);
	shm_fork_unpage(cm, sizeof(*cm));
}

static resil_keyed_override vip = { "vip", 3, 0, 0, 20, 0 };
/* Next to no refill: one permit per 10^12 ticks. */
static resil_keyed_override slow = { "slow", 4, 1, UINT64_C(1000000000000), 5,
	0 };

/* 10 permits per 1000 ticks (one per 100), burst 5; "vip" bursts 20,
 * "slow" hardly refills. */
static resil_keyed_config
fam_cfg(uint32_t max_keys)
{
	static resil_keyed_override ov[2];
	resil_keyed_config c;

	ov[0] = vip;
	ov[1] = slow;
	resil_keyed_config_init(&c);
	c.kind = RESIL_KEYED_RATELIMIT;
	c.max_keys = max_keys;
	c.max_key_len = 64;
	c.ratelimit.clock = &shared_clock;
	c.ratelimit.rate = 10;
	c.ratelimit.period_ns = 1000;
	c.ratelimit.burst = 5;
	c.overrides = ov;
	c.n_overrides = 2;
	return c;
}

static resil_shm *
open_region(void)
{
	resil_shm_config sc;
	resil_shm *shm = NULL;

	resil_shm_config_init(&sc);
	sc.region_bytes = (size_t)4 << 20;
	if (resil_shm_open(&shm, region, &sc, NULL) != RESIL_OK)
		return NULL;
	return shm;
}

static resil_err
take(resil_keyed *k, const char *key)
{
	return resil_keyed_ratelimit_try_acquire(k, key, strlen(key), 1, NULL);
}

/* How many single permits key gives before a refusal (at most cap). */
static int
drain(resil_keyed *k, const char *key, int cap)
{
	int n = 0;

	while (n < cap && take(k, key) == RESIL_OK)
		n++;
	return n;
}

/* ---- two processes share K's burst exactly ---- */

#define ROUNDS 50

/* Both processes, in lock step: each round the parent moves the clock
 * one permit's time on, then both try K once; then K is drained. */
static void
share_loop(resil_keyed *k, int me)
{
	int i;

	for (i = 0; i < ROUNDS; i++) {
		if (me == 0)
			__atomic_fetch_add(&cm->now, 100, __ATOMIC_ACQ_REL);
		pthread_barrier_wait(&cm->go);
		if (take(k, "K") == RESIL_OK)
			__atomic_fetch_add(
			    &cm->granted[me], 1, __ATOMIC_ACQ_REL);
		pthread_barrier_wait(&cm->go);
	}
}

static void
sharer(void)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm *shm = open_region();
	resil_keyed *k;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "rl", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	/* 3 of K's 5, then the parent's turn. */
	if (drain(k, "K", 3) != 3)
		_exit(4);
	pthread_barrier_wait(&cm->go);
	pthread_barrier_wait(&cm->go);
	share_loop(k, 1);
	resil_keyed_free(k);
	resil_shm_close(shm);
}

static void
test_keyed_shm_rate_shared_burst(void **state)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	pid_t kid;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "rl", &c, &k, NULL), RESIL_OK);
	kid = shm_fork_child(sharer);
	pthread_barrier_wait(&cm->go);
	/* The child took 3: 2 left for this process, not 5. */
	assert_int_equal(drain(k, "K", 10), 2);
	/* L has its own burst. */
	assert_int_equal(drain(k, "L", 10), 5);
	pthread_barrier_wait(&cm->go);
	/* One permit is due a round: exactly one of the two gets it. */
	share_loop(k, 0);
	shm_fork_wait_ok(kid);
	assert_int_equal(cm->granted[0] + cm->granted[1], ROUNDS);
	assert_int_equal(take(k, "K"), RESIL_E_LIMITED);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "rl", &info, NULL), RESIL_OK);
	/* docs/keyed.md quotes the slot's size. */
	print_message("slot_bytes %zu table_bytes %zu for %u keys\n",
	    info.slot_bytes, info.table_bytes, (unsigned)info.max_keys);
	assert_int_equal(info.slot_bytes, 256);
	/* K, L and the two overrides' keys (made when the family opened). */
	assert_int_equal(info.used, 4);
	assert_int_equal(info.overflowed, 0);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- overrides: every process's, and other settings refused ---- */

static void
vip_taker(void)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm *shm = open_region();
	resil_keyed *k;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "ov", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	/* vip's burst is 20 in every process. */
	if (drain(k, "vip", 30) != 12)
		_exit(4);
	resil_keyed_free(k);
	resil_shm_close(shm);
}

static void
test_keyed_shm_rate_override(void **state)
{
	resil_keyed_config c = fam_cfg(16), c2;
	resil_keyed_override ov2[2];
	resil_shm *shm, *other;
	resil_keyed *k, *k2;
	resil_diag d;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "ov", &c, &k, &d), RESIL_OK);
	assert_int_equal(drain(k, "vip", 8), 8);
	shm_fork_wait_ok(shm_fork_child(vip_taker));
	assert_int_equal(take(k, "vip"), RESIL_E_LIMITED);
	assert_int_equal(drain(k, "plain", 30), 5);
	/* Another process (handle) with another override for vip. */
	assert_non_null(other = open_region());
	c2 = c;
	ov2[0] = vip;
	ov2[0].burst = 30;
	ov2[1] = slow;
	c2.overrides = ov2;
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_shm_keyed(other, "ov", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "key \"vip\"'s rate limiter has rate 10 per 1000 ns, burst 20; "
	    "this process gives it rate 10 per 1000 ns, burst 30"));
	/* Other family settings: the overflow's are refused. */
	c2 = c;
	c2.ratelimit.burst = 6;
	assert_int_equal(
	    resil_shm_keyed(other, "ov", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "the overflow's rate limiter has rate "
	    "10 per 1000 ns, burst 5"));
	/* A key of the family's settings here but an override there. */
	c2 = c;
	c2.n_overrides = 1; /* no "slow" */
	assert_int_equal(resil_shm_keyed(other, "ov", &c2, &k2, &d), RESIL_OK);
	assert_int_equal(take(k2, "slow"), RESIL_E_INVAL);
	assert_int_equal(take(k2, "plain"), RESIL_E_LIMITED);
	resil_keyed_free(k2);
	resil_shm_close(other);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- churn never resets a limit ---- */

#define SMALL 8
#define CHURN 600

static void
slow_taker(void)
{
	resil_keyed_config c = fam_cfg(SMALL);
	resil_shm *shm = open_region();
	resil_keyed *k;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "churn", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	if (drain(k, "slow", 3) != 3)
		_exit(4);
	resil_keyed_free(k);
	resil_shm_close(shm);
}

static void
test_keyed_shm_rate_churn_keeps_limits(void **state)
{
	resil_keyed_config c = fam_cfg(SMALL);
	resil_shm_keyed_info before, after;
	resil_shm *shm;
	resil_keyed *k;
	char key[32];
	int i;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(
	    resil_shm_keyed(shm, "churn", &c, &k, NULL), RESIL_OK);
	/* "slow" below its burst: 3 of 5 taken by a process that then let
	 * go of it (no handle holds it), refilled never here. */
	shm_fork_wait_ok(shm_fork_child(slow_taker));
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "churn", &before, NULL), RESIL_OK);
	for (i = 0; i < CHURN; i++) {
		snprintf(key, sizeof(key), "host-%d", i);
		assert_int_equal(take(k, key), RESIL_OK);
		/* Its permit is due again: the key's limiter is full. */
		__atomic_fetch_add(&cm->now, 100, __ATOMIC_ACQ_REL);
	}
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "churn", &after, NULL), RESIL_OK);
	assert_int_equal(after.max_keys, SMALL);
	assert_int_equal(after.table_bytes, before.table_bytes);
	assert_true(after.used <= SMALL);
	assert_true(after.reclaimed >= CHURN / 2);
	/* slow kept its 2: churn never gave it a fresh burst. */
	assert_int_equal(drain(k, "slow", 10), 2);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a holder SIGKILLed: its keys reclaimable once full ---- */

static int ready_fd[2];

static void
holder(void)
{
	resil_keyed_config c = fam_cfg(4);
	resil_shm *shm = open_region();
	resil_keyed *k;
	char key[16];
	int i;

	c.n_overrides = 0;
	if (shm == NULL ||
	    resil_shm_keyed(shm, "held", &c, &k, NULL) != RESIL_OK)
		cm->granted[1] = 100; /* the parent fails */
	for (i = 0; cm->granted[1] == 0 && i < 4; i++) {
		/* all 4 slots, 4 of 5 left in each */
		snprintf(key, sizeof(key), "h%d", i);
		if (take(k, key) != RESIL_OK)
			cm->granted[1] = 200 + (uint64_t)i;
	}
	/* Ready (a pipe, not the barrier: a barrier's waiter killed
	 * inside it would keep pthread_barrier_destroy waiting). */
	if (write(ready_fd[1], "r", 1) != 1)
		_exit(5);
	for (;;)
		pause();
}

static void
test_keyed_shm_rate_dead_holder(void **state)
{
	resil_keyed_config c = fam_cfg(4);
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	pid_t kid;
	char rb;
	int st;

	(void)state;
	c.n_overrides = 0;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(pipe(ready_fd), 0);
	kid = shm_fork_child(holder);
	assert_int_equal(read(ready_fd[0], &rb, 1), 1);
	close(ready_fd[0]);
	close(ready_fd[1]);
	assert_int_equal(kill(kid, SIGKILL), 0);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_int_equal(cm->granted[1], 0);
	assert_int_equal(resil_shm_keyed(shm, "held", &c, &k, NULL), RESIL_OK);
	/* h0..h3 hold 4 of 5: protected until a permit is due. */
	assert_int_equal(take(k, "new0"), RESIL_OK);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "held", &info, NULL), RESIL_OK);
	assert_int_equal(info.overflowed, 1);
	__atomic_fetch_add(&cm->now, 100, __ATOMIC_ACQ_REL);
	/* The dead holder's bit cleared, h0 full again: reclaimed. */
	assert_int_equal(take(k, "new1"), RESIL_OK);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "held", &info, NULL), RESIL_OK);
	assert_true(info.reclaimed >= 1);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- the pipeline: ratelimit.key.shared=shm:REGION/NAME ---- */

static int
pfn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return 0;
}

static resil_err
pipe_call(pfx *x, const char *key)
{
	resil_args a = { "get", key, strlen(key) };
	resil_result r;
	resil_err err = resil_pipeline_call(x->p, &a, pfn, NULL, &r);

	resil_result_free(&r);
	return err;
}

static int
pipe_drain(pfx *x, const char *key)
{
	int n = 0;

	while (n < 20 && pipe_call(x, key) == RESIL_OK)
		n++;
	return n;
}

static void
test_keyed_shm_rate_pipeline_text(void **state)
{
	char text[512], bad[512];
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_diag d;
	pfx a, b;

	(void)state;
	setup_common();
	snprintf(text, sizeof(text),
	    "service=S\n"
	    "ratelimit.key=args\n"
	    "ratelimit.key.shared=shm:%s/pr\n"
	    "ratelimit.key.max_keys=32\n"
	    "ratelimit.rate=1\n"
	    "ratelimit.period=1h\n"
	    "ratelimit.burst=4\n"
	    "ratelimit.key.override.vip=1/1h,burst=6\n",
	    region);
	/* Two pipelines, each with its own handle on the region (their
	 * manual clocks both read 1000). */
	d.msg[0] = '\0';
	assert_int_equal(pipe_start(&a, text, &d), RESIL_OK);
	assert_int_equal(pipe_start(&b, text, &d), RESIL_OK);
	assert_int_equal(pipe_call(&a, "x"), RESIL_OK);
	assert_int_equal(pipe_call(&a, "x"), RESIL_OK);
	assert_int_equal(pipe_drain(&b, "x"), 2);
	assert_int_equal(pipe_drain(&a, "y"), 4);
	/* vip's override (burst 6) in both. */
	assert_int_equal(pipe_call(&a, "vip"), RESIL_OK);
	assert_int_equal(pipe_drain(&b, "vip"), 5);
	assert_int_equal(pipe_call(&a, "vip"), RESIL_E_LIMITED);
	assert_non_null(shm = open_region());
	assert_int_equal(resil_shm_keyed_stat(shm, "pr", &info, &d), RESIL_OK);
	assert_int_equal(info.max_keys, 32);
	assert_int_equal(info.used, 3);
	resil_shm_close(shm);
	pipe_end(&b);
	pipe_end(&a);
	/* The refusals of the text. */
	assert_int_equal(
	    pipe_start(&a, "service=S\nratelimit.key.shared=shm:r/pr\n", &d),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(d.msg, "ratelimit.key.shared: needs ratelimit.key"));
	snprintf(bad, sizeof(bad),
	    "service=S\nratelimit.key=args\nratelimit.key.max_key_len=100\n"
	    "ratelimit.key.shared=shm:%s/pr\n",
	    region);
	assert_int_equal(pipe_start(&a, bad, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "ratelimit.key.shared: a shared family "
	    "keeps keys of up to 64 bytes"));
	teardown_common();
}

/* ---- refusals ---- */

static void
test_keyed_shm_rate_refusals(void **state)
{
	resil_keyed_config c = fam_cfg(8), c2;
	resil_shm *shm;
	resil_keyed *k, *k2;
	resil_diag d;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	c2 = c;
	c2.ratelimit.batch = 2;
	assert_int_equal(
	    resil_shm_keyed(shm, "rb", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "ratelimit.batch: 2 must be 0"));
	c2 = c;
	c2.ratelimit.rate = 0;
	assert_int_equal(
	    resil_shm_keyed(shm, "rb", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "ratelimit.rate"));
	assert_int_equal(resil_shm_keyed(shm, "fam", &c, &k, &d), RESIL_OK);
	resil_keyed_free(k);
	/* A breaker family under a rate limiter family's name. */
	c2 = c;
	c2.kind = RESIL_KEYED_BREAKER;
	c2.n_overrides = 0;
	assert_int_equal(
	    resil_shm_keyed(shm, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "fam is a keyed rate limiter family, not a keyed breaker family"));
	c2 = c;
	c2.max_keys = 16;
	assert_int_equal(
	    resil_shm_keyed(shm, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "keyed rate limiter family fam has 8 keys; asked for 16 keys"));
	resil_shm_close(shm);
	teardown_common();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_shm_rate_refusals),
		cmocka_unit_test(test_keyed_shm_rate_shared_burst),
		cmocka_unit_test(test_keyed_shm_rate_override),
		cmocka_unit_test(test_keyed_shm_rate_churn_keeps_limits),
		cmocka_unit_test(test_keyed_shm_rate_dead_holder),
		cmocka_unit_test(test_keyed_shm_rate_pipeline_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Keyed breaker families in shared memory (issue 41, resil_shm_keyed):
 * two processes share key K's breaker (a trip in one is seen by the
 * other, exact counts on a manual clock in shared memory), the table
 * never grows under churn, a failing key is never reclaimed, a claimer
 * SIGKILLed mid-claim leaves a table the next process repairs, a key
 * that finds no slot gets the overflow breaker, and the refusals.
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
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

#include "shm_internal.h"

/* A clock and a barrier the processes share (an anonymous shared page). */
typedef struct common {
	uint64_t now;
	pthread_barrier_t go;
	uint64_t errors;
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
	shm_fork_region(region, sizeof(region), "test-kshm");
}

static void
teardown_common(void)
{
	(void)resil_shm_unlink(region, NULL);
	pthread_barrier_destroy(&cm->go);
	shm_fork_unpage(cm, sizeof(*cm));
}

/* Trip on 3 failures in a row; OPEN for 100 ticks; one probe. */
static resil_keyed_config
fam_cfg(uint32_t max_keys)
{
	resil_keyed_config c;

	resil_keyed_config_init(&c);
	c.max_keys = max_keys;
	c.max_key_len = 64;
	c.breaker.clock = &shared_clock;
	/* The rate trigger keeps the window (100% of 100 calls: never here).
	 */
	c.breaker.failure_rate_pct = 100;
	c.breaker.min_calls = 100;
	c.breaker.consecutive_failures = 3;
	c.breaker.open_wait_ns = 100;
	c.breaker.permitted_probes = 1;
	return c;
}

static resil_shm *
open_region(void)
{
	resil_shm_config sc;
	resil_shm *shm = NULL;

	resil_shm_config_init(&sc);
	sc.region_bytes = (size_t)16 << 20;
	if (resil_shm_open(&shm, region, &sc, NULL) != RESIL_OK)
		return NULL;
	return shm;
}

static resil_err
call(resil_keyed *k, const char *key, resil_outcome o)
{
	resil_keyed_permit p;
	resil_err err = resil_keyed_breaker_acquire(k, key, strlen(key), &p);

	if (err != RESIL_OK)
		return err;
	return resil_keyed_breaker_record(k, &p, o);
}

/* key's breaker's figures (its instance made if this process has
 * none). */
static resil_breaker_metrics
metrics_of(resil_keyed *k, const char *key)
{
	resil_breaker_metrics m;
	resil_keyed_handle h;

	memset(&m, 0, sizeof(m));
	assert_int_equal(resil_keyed_get(k, key, strlen(key), &h), RESIL_OK);
	assert_int_equal(
	    resil_breaker_get_metrics(h.instance.breaker, &m), RESIL_OK);
	assert_int_equal(resil_keyed_put(k, &h), RESIL_OK);
	return m;
}

/* ---- a trip in one process is seen by the other ---- */

#define ROUNDS 200

static void
tripper(void)
{
	resil_keyed_config c = fam_cfg(64);
	resil_shm *shm = open_region();
	resil_keyed *k;
	int i;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "hosts", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	/* Lock step with the parent: in each round the child records one
	 * failure on "a" and one success on "b". */
	for (i = 0; i < ROUNDS; i++) {
		pthread_barrier_wait(&cm->go);
		if (call(k, "b", RESIL_OUTCOME_SUCCESS) != RESIL_OK)
			__atomic_add_fetch(&cm->errors, 1, __ATOMIC_SEQ_CST);
		pthread_barrier_wait(&cm->go);
	}
	/* Three failures on "a": it trips, for both processes. */
	for (i = 0; i < 3; i++)
		if (call(k, "a", RESIL_OUTCOME_FAILURE) != RESIL_OK)
			_exit(4);
	resil_keyed_free(k);
	resil_shm_close(shm);
	_exit(0);
}

static void
test_keyed_shm_trip_seen_across_processes(void **state)
{
	resil_keyed_config c = fam_cfg(64);
	resil_breaker_metrics m;
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	pid_t kid;
	int i;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(
	    resil_shm_keyed(shm, "hosts", &c, &k, NULL), RESIL_OK);
	kid = shm_fork_child(tripper);
	for (i = 0; i < ROUNDS; i++) {
		pthread_barrier_wait(&cm->go);
		assert_int_equal(
		    call(k, "b", RESIL_OUTCOME_SUCCESS), RESIL_OK);
		pthread_barrier_wait(&cm->go);
	}
	shm_fork_wait_ok(kid);
	assert_int_equal(cm->errors, 0);
	/* Both processes' successes in one window: COUNT of 100. */
	m = metrics_of(k, "b");
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 100);
	/* The child's trip is this process's. */
	assert_int_equal(call(k, "a", RESIL_OUTCOME_SUCCESS), RESIL_E_OPEN);
	m = metrics_of(k, "a");
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.window_failures, 3);
	assert_int_equal(m.failures, 3);
	/* One tick short of the wait: still OPEN; then one probe closes it. */
	__atomic_store_n(&cm->now, 1000 + 99, __ATOMIC_RELEASE);
	assert_int_equal(call(k, "a", RESIL_OUTCOME_SUCCESS), RESIL_E_OPEN);
	__atomic_store_n(&cm->now, 1000 + 100, __ATOMIC_RELEASE);
	assert_int_equal(call(k, "a", RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(metrics_of(k, "a").state, RESIL_BREAKER_CLOSED);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "hosts", &info, NULL), RESIL_OK);
	assert_int_equal(info.max_keys, 64);
	assert_int_equal(info.used, 2);
	assert_int_equal(info.claimed, 2);
	assert_int_equal(info.overflowed, 0);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- concurrent first uses of the same keys: one slot each ---- */

#define RACE_KEYS 300

static void
racer_body(int dir)
{
	resil_keyed_config c = fam_cfg(512);
	resil_shm *shm = open_region();
	resil_keyed *k;
	char key[32];
	int i;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "race", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	pthread_barrier_wait(&cm->go);
	for (i = 0; i < RACE_KEYS; i++) {
		int n = dir ? i : RACE_KEYS - 1 - i;

		snprintf(key, sizeof(key), "race-%d", n);
		if (call(k, key, RESIL_OUTCOME_FAILURE) != RESIL_OK)
			__atomic_add_fetch(&cm->errors, 1, __ATOMIC_SEQ_CST);
	}
	pthread_barrier_wait(&cm->go);
	resil_keyed_free(k);
	resil_shm_close(shm);
}

static void
racer(void)
{
	racer_body(1);
}

static void
test_keyed_shm_first_use_race(void **state)
{
	resil_keyed_config c = fam_cfg(512);
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	char key[32];
	pid_t kid;
	int i;

	(void)state;
	setup_common();
	kid = shm_fork_child(racer);
	racer_body(0);
	shm_fork_wait_ok(kid);
	assert_int_equal(cm->errors, 0);
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "race", &info, NULL), RESIL_OK);
	/* Both processes made every key: one slot each. */
	assert_int_equal(info.used, RACE_KEYS);
	assert_int_equal(info.claimed, RACE_KEYS);
	assert_int_equal(resil_shm_keyed(shm, "race", &c, &k, NULL), RESIL_OK);
	for (i = 0; i < RACE_KEYS; i++) {
		snprintf(key, sizeof(key), "race-%d", i);
		assert_int_equal(metrics_of(k, key).window_failures, 2);
	}
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* Two threads of one process, each through its own region handle (its
 * own process slot), racing on the same first uses (for TSan). */
typedef struct targ {
	pthread_barrier_t *go;
	int dir;
	int errors;
} targ;

static void *
thread_racer(void *arg)
{
	targ *t = arg;
	resil_keyed_config c = fam_cfg(512);
	resil_shm *shm = open_region();
	resil_keyed *k;
	char key[32];
	int i;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "trace", &c, &k, NULL) != RESIL_OK) {
		t->errors = -1;
		pthread_barrier_wait(t->go);
		return NULL;
	}
	pthread_barrier_wait(t->go);
	for (i = 0; i < RACE_KEYS; i++) {
		int n = t->dir ? i : RACE_KEYS - 1 - i;

		snprintf(key, sizeof(key), "race-%d", n);
		if (call(k, key, RESIL_OUTCOME_FAILURE) != RESIL_OK)
			t->errors++;
	}
	resil_keyed_free(k);
	resil_shm_close(shm);
	return NULL;
}

static void
test_keyed_shm_first_use_threads(void **state)
{
	pthread_barrier_t go;
	resil_shm_keyed_info info;
	pthread_t th[2];
	targ t[2];
	resil_shm *shm;
	int i;

	(void)state;
	setup_common();
	pthread_barrier_init(&go, NULL, 2);
	for (i = 0; i < 2; i++) {
		t[i].go = &go;
		t[i].dir = i;
		t[i].errors = 0;
		assert_int_equal(
		    pthread_create(&th[i], NULL, thread_racer, &t[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(t[i].errors, 0);
	}
	pthread_barrier_destroy(&go);
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "trace", &info, NULL), RESIL_OK);
	assert_int_equal(info.used, RACE_KEYS);
	assert_int_equal(info.claimed, RACE_KEYS);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a fixed table under churn; a failing key kept ---- */

#define SMALL 16
#define CHURN 5000

static void
failer(void)
{
	resil_keyed_config c = fam_cfg(SMALL);
	resil_shm *shm = open_region();
	resil_keyed *k;
	int i;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "churn", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	for (i = 0; i < 3; i++)
		if (call(k, "bad", RESIL_OUTCOME_FAILURE) != RESIL_OK)
			_exit(4);
	/* Two failures: CLOSED, but its window holds them. */
	for (i = 0; i < 2; i++)
		if (call(k, "warn", RESIL_OUTCOME_FAILURE) != RESIL_OK)
			_exit(5);
	/* Dies without freeing: its bits are cleared once seen dead. */
	_exit(0);
}

static void
test_keyed_shm_fixed_table_keeps_failing_keys(void **state)
{
	resil_keyed_config c = fam_cfg(SMALL);
	resil_shm_keyed_info before, after;
	resil_breaker_metrics m;
	resil_keyed_metrics km;
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
	shm_fork_wait_ok(shm_fork_child(failer));
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "churn", &before, NULL), RESIL_OK);
	assert_int_equal(before.used, 2);
	/* docs/keyed.md "Shared memory" quotes these (count window of 100). */
	print_message("slot_bytes %zu table_bytes %zu for %u keys\n",
	    before.slot_bytes, before.table_bytes, (unsigned)before.max_keys);
	for (i = 0; i < CHURN; i++) {
		snprintf(key, sizeof(key), "host-%d", i);
		assert_int_equal(
		    call(k, key, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	}
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "churn", &after, NULL), RESIL_OK);
	/* The table never grew: same slots, same bytes, at most SMALL. */
	assert_int_equal(after.max_keys, SMALL);
	assert_int_equal(after.table_bytes, before.table_bytes);
	assert_true(after.used <= SMALL);
	/* Each new key claimed a slot: once this process held every slot
	 * but the failing keys', the table answered overflow, the local
	 * family gave back an idle key of its own and the key asked again
	 * (h4/kshm3); every claim past the first SMALL reclaimed an idle
	 * key's slot. */
	assert_int_equal(after.claimed, CHURN + 2);
	assert_int_equal(after.overflowed, CHURN - (SMALL - 2));
	assert_int_equal(after.reclaimed, after.claimed - after.used);
	assert_true(after.reclaimed >= CHURN / 2);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_true(km.keys <= SMALL);
	/* The failing keys kept their state and windows. */
	assert_int_equal(call(k, "bad", RESIL_OUTCOME_SUCCESS), RESIL_E_OPEN);
	m = metrics_of(k, "bad");
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.window_failures, 3);
	m = metrics_of(k, "warn");
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_failures, 2);
	assert_int_equal(m.consecutive_failures, 2);
	/* One more failure on "warn" trips it: the streak was kept. */
	assert_int_equal(call(k, "warn", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(metrics_of(k, "warn").state, RESIL_BREAKER_OPEN);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- every slot protected: the overflow breaker ---- */

static void
test_keyed_shm_overflow(void **state)
{
	resil_keyed_config c = fam_cfg(2);
	resil_shm_keyed_info info;
	resil_keyed_instance ov;
	resil_breaker_metrics m;
	resil_shm *shm;
	resil_keyed *k;
	int i;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	c.max_keys = 2;
	assert_int_equal(resil_shm_keyed(shm, "ovf", &c, &k, NULL), RESIL_OK);
	for (i = 0; i < 3; i++) {
		assert_int_equal(
		    call(k, "x", RESIL_OUTCOME_FAILURE), RESIL_OK);
		assert_int_equal(
		    call(k, "y", RESIL_OUTCOME_FAILURE), RESIL_OK);
	}
	/* Both slots OPEN, the local family full of protected keys: "z"
	 * goes to the local family's overflow, which is the table's. */
	assert_int_equal(call(k, "z", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(resil_keyed_overflow(k, &ov), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(ov.breaker, &m), RESIL_OK);
	assert_int_equal(m.failures, 1);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "ovf", &info, NULL), RESIL_OK);
	assert_int_equal(info.used, 2);
	resil_keyed_free(k);
	/* Another family of 2 local keys: "z" finds no slot in the table
	 * (both hold failures): its handle is on the overflow breaker. */
	c.max_keys = 2;
	assert_int_equal(resil_shm_keyed(shm, "ovf", &c, &k, NULL), RESIL_OK);
	assert_int_equal(call(k, "z", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "ovf", &info, NULL), RESIL_OK);
	assert_int_equal(info.overflowed, 1);
	assert_int_equal(info.used, 2);
	m = metrics_of(k, "z");
	assert_int_equal(m.failures, 2); /* the overflow's, both families' */
	assert_int_equal(call(k, "x", RESIL_OUTCOME_SUCCESS), RESIL_E_OPEN);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- h4/kshm3: a key sent to the table's overflow: its event ---- */

typedef struct heard {
	int created, overflow, evicted;
	char last[16];
} heard;

static void
hear(const resil_keyed_event *ev, void *ctx)
{
	heard *h = ctx;

	if (ev->type == RESIL_KEYED_EVENT_CREATED)
		h->created++;
	else if (ev->type == RESIL_KEYED_EVENT_OVERFLOW)
		h->overflow++;
	else if (ev->type == RESIL_KEYED_EVENT_EVICTED)
		h->evicted++;
	snprintf(h->last, sizeof(h->last), "%.*s", (int)ev->key_len,
	    (const char *)ev->key);
}

static void
test_keyed_shm_overflow_event(void **state)
{
	resil_keyed_config c = fam_cfg(2), c2;
	resil_shm_keyed_info info;
	resil_keyed_metrics km;
	resil_keyed_handle h;
	resil_shm *shm, *other;
	resil_keyed *k, *k2;
	heard hd;
	int i;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_non_null(other = open_region());
	assert_int_equal(resil_shm_keyed(shm, "oev", &c, &k, NULL), RESIL_OK);
	for (i = 0; i < 3; i++) {
		assert_int_equal(
		    call(k, "x", RESIL_OUTCOME_FAILURE), RESIL_OK);
		assert_int_equal(
		    call(k, "y", RESIL_OUTCOME_FAILURE), RESIL_OK);
	}
	/* A second family on the same table (through another region
	 * handle; 2 slots, both OPEN): "z" finds no slot. Its listener hears
	 * OVERFLOW, as the in-process family's overflow does, and the key is
	 * not entered. */
	memset(&hd, 0, sizeof(hd));
	c2 = fam_cfg(2);
	c2.listener = hear;
	c2.listener_ctx = &hd;
	assert_int_equal(
	    resil_shm_keyed(other, "oev", &c2, &k2, NULL), RESIL_OK);
	assert_int_equal(call(k2, "z", RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(hd.overflow, 1);
	assert_int_equal(hd.created, 0);
	assert_string_equal(hd.last, "z");
	assert_int_equal(resil_keyed_get(k2, "z", 1, &h), RESIL_OK);
	assert_true(h.overflow);
	assert_int_equal(resil_keyed_put(k2, &h), RESIL_OK);
	assert_int_equal(hd.overflow, 2);
	assert_int_equal(resil_keyed_get_metrics(k2, &km), RESIL_OK);
	assert_int_equal(km.keys, 0);
	assert_int_equal(km.overflowed, 2);
	/* A key with a slot is found, not sent to the overflow. */
	assert_int_equal(call(k2, "x", RESIL_OUTCOME_SUCCESS), RESIL_E_OPEN);
	assert_int_equal(hd.created, 1);
	/* "y" closes (its probe succeeds after the wait, which empties its
	 * window) and the first family lets go of its keys: "z" asks again
	 * at its next use and takes y's slot. */
	__atomic_store_n(&cm->now, 1000 + 100, __ATOMIC_RELEASE);
	assert_int_equal(call(k, "y", RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(metrics_of(k, "y").state, RESIL_BREAKER_CLOSED);
	resil_keyed_free(k);
	assert_int_equal(call(k2, "z", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(hd.overflow, 2);
	assert_int_equal(hd.created, 2);
	assert_string_equal(hd.last, "z");
	assert_int_equal(metrics_of(k2, "z").window_failures, 1);
	assert_int_equal(
	    resil_shm_keyed_stat(other, "oev", &info, NULL), RESIL_OK);
	assert_int_equal(info.overflowed, 2);
	assert_int_equal(info.reclaimed, 1);
	assert_int_equal(info.used, 2);
	resil_keyed_free(k2);
	resil_shm_close(other);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a claimer killed mid-claim ---- */

static void
die_now(void)
{
	raise(SIGKILL);
}

static void
claimer(void)
{
	resil_keyed_config c = fam_cfg(8);
	resil_shm *shm = open_region();
	resil_keyed *k;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "crash", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	resil__kshm_claim_hook = die_now;
	(void)call(k, "k1", RESIL_OUTCOME_FAILURE);
	_exit(4); /* not reached */
}

static void
test_keyed_shm_sigkill_mid_claim(void **state)
{
	resil_keyed_config c = fam_cfg(8);
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	pid_t kid;
	int st;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(
	    resil_shm_keyed(shm, "crash", &c, &k, NULL), RESIL_OK);
	kid = shm_fork_child(claimer);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* It died holding the table lock, its slot tagged CLAIM. */
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "crash", &info, NULL), RESIL_OK);
	assert_int_equal(info.used, 0);
	assert_int_equal(info.repaired, 0);
	/* This process takes the lock over, repairs, and claims "k1". */
	assert_int_equal(call(k, "k1", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(call(k, "k2", RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "crash", &info, NULL), RESIL_OK);
	assert_int_equal(info.repaired, 1);
	assert_int_equal(info.used, 2);
	assert_int_equal(info.claimed, 2);
	assert_int_equal(metrics_of(k, "k1").window_failures, 1);
	resil_keyed_free(k);
	/* A new family handle finds both keys in the repaired index. */
	assert_int_equal(
	    resil_shm_keyed(shm, "crash", &c, &k, NULL), RESIL_OK);
	assert_int_equal(call(k, "k1", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(metrics_of(k, "k1").window_failures, 2);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "crash", &info, NULL), RESIL_OK);
	assert_int_equal(info.used, 2);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a holder killed: its idle keys' slots come back ---- */

static void
holder(void)
{
	resil_keyed_config c = fam_cfg(2);
	resil_shm *shm = open_region();
	resil_keyed *k;

	if (shm == NULL ||
	    resil_shm_keyed(shm, "held", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	if (call(k, "a", RESIL_OUTCOME_SUCCESS) != RESIL_OK ||
	    call(k, "b", RESIL_OUTCOME_SUCCESS) != RESIL_OK)
		_exit(4);
	raise(SIGKILL); /* holding handles on both slots */
}

static void
test_keyed_shm_dead_holder_bits_cleared(void **state)
{
	resil_keyed_config c = fam_cfg(2);
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	pid_t kid;
	int st;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "held", &c, &k, NULL), RESIL_OK);
	kid = shm_fork_child(holder);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	/* Both slots attached by a dead process, both idle: "c" reclaims
	 * one once the dead bits are cleared. */
	assert_int_equal(call(k, "c", RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "held", &info, NULL), RESIL_OK);
	assert_int_equal(info.reclaimed, 1);
	assert_int_equal(info.overflowed, 0);
	assert_int_equal(info.used, 2);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- the pipeline: breaker.key.shared=shm:REGION/NAME ---- */

/* Fails for the key "bad". */
static int
pfn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)out;
	return args->len == 3 && memcmp(args->data, "bad", 3) == 0 ? 9 : 0;
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

static void
test_keyed_shm_pipeline_text(void **state)
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
	    "breaker.key=args\n"
	    "breaker.key.shared=shm:%s/pk\n"
	    "breaker.key.max_keys=32\n"
	    "breaker.consecutive_failures=2\n"
	    "breaker.failure_rate=0\n",
	    region);
	/* Two pipelines, each with its own handle on the region. */
	assert_int_equal(pipe_start(&a, text, &d), RESIL_OK);
	assert_int_equal(pipe_start(&b, text, &d), RESIL_OK);
	assert_int_equal(pipe_call(&a, "bad"), RESIL_E_CALL);
	assert_int_equal(pipe_call(&a, "bad"), RESIL_E_CALL);
	/* a's two failures opened "bad" for b. */
	assert_int_equal(pipe_call(&b, "bad"), RESIL_E_OPEN);
	assert_int_equal(pipe_call(&b, "good"), RESIL_OK);
	assert_int_equal(pipe_call(&a, "good"), RESIL_OK);
	assert_non_null(shm = open_region());
	assert_int_equal(resil_shm_keyed_stat(shm, "pk", &info, &d), RESIL_OK);
	assert_int_equal(info.max_keys, 32);
	assert_int_equal(info.used, 2);
	resil_shm_close(shm);
	pipe_end(&b);
	pipe_end(&a);
	/* The refusals of the text. */
	d.msg[0] = '\0';
	assert_int_equal(
	    pipe_start(&a, "service=S\nbreaker.key.shared=shm:r/pk\n", &d),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(d.msg, "breaker.key.shared: needs breaker.key"));
	assert_int_equal(pipe_start(&a,
	                     "service=S\nbreaker.key=args\n"
	                     "breaker.key.shared=redis://h/x\n",
	                     &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "is not shm:REGION/NAME"));
	snprintf(bad, sizeof(bad),
	    "service=S\nbreaker.key=args\nbreaker.key.max_key_len=100\n"
	    "breaker.key.shared=shm:%s/pk\n",
	    region);
	assert_int_equal(pipe_start(&a, bad, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "keeps keys of up to 64 bytes"));
	teardown_common();
}

/* ---- refusals ---- */

static void
test_keyed_shm_refusals(void **state)
{
	resil_keyed_config c = fam_cfg(8), c2;
	resil_breaker_config bc;
	resil_shm_keyed_info info;
	resil_breaker *b;
	resil_shm *shm, *other;
	resil_keyed *k, *k2;
	resil_keyed_permit p;
	resil_diag d;
	char longkey[80];

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "fam", &c, &k, &d), RESIL_OK);
	/* Another layout: both named. */
	assert_non_null(other = open_region());
	c2 = c;
	c2.max_keys = 16;
	assert_int_equal(
	    resil_shm_keyed(other, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "keyed family fam has 8 keys, window COUNT of 100, 1 probes; "
	    "asked for 16 keys, window COUNT of 100, 1 probes"));
	c2 = c;
	c2.breaker.window_size = 50;
	assert_int_equal(
	    resil_shm_keyed(other, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "asked for 8 keys, window COUNT of 50"));
	/* The same layout through another handle: the same family. */
	assert_int_equal(resil_shm_keyed(other, "fam", &c, &k2, &d), RESIL_OK);
	assert_int_equal(call(k2, "h", RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(metrics_of(k, "h").window_failures, 1);
	resil_keyed_free(k2);
	/* Twice through one handle. */
	assert_int_equal(
	    resil_shm_keyed(shm, "fam", &c, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "open already through this region"));
	/* Other kinds, long keys, bad names, names of other kinds. */
	c2 = c;
	c2.kind = RESIL_KEYED_THROTTLE;
	assert_int_equal(
	    resil_shm_keyed(shm, "rl", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "a throttle family: only breaker, rate limiter and bulkhead "
	    "families are shared in a region (there is no shared throttle)"));
	c2 = c;
	c2.max_key_len = 65;
	assert_int_equal(
	    resil_shm_keyed(shm, "long", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "keyed.max_key_len: 65"));
	assert_int_equal(
	    resil_shm_keyed(shm, "bad name", &c, &k2, &d), RESIL_E_INVAL);
	resil_breaker_config_init(&bc);
	assert_int_equal(resil_shm_breaker(shm, "br", &bc, &b, &d), RESIL_OK);
	resil_breaker_free(b);
	assert_int_equal(
	    resil_shm_keyed(shm, "br", &c, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "br is a breaker, not a keyed"));
	assert_int_equal(
	    resil_shm_breaker(shm, "fam", &bc, &b, &d), RESIL_E_INVAL);
	assert_non_null(
	    strstr(d.msg, "fam is a keyed breaker family, not a breaker"));
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "nope", &info, &d), RESIL_E_NOTFOUND);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "br", &info, &d), RESIL_E_INVAL);
	memset(longkey, 'k', sizeof(longkey));
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, longkey, 65, &p), RESIL_E_INVAL);
	resil_keyed_free(k);
	resil_shm_close(other);
	resil_shm_close(shm);
	teardown_common();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_shm_refusals),
		cmocka_unit_test(test_keyed_shm_trip_seen_across_processes),
		cmocka_unit_test(test_keyed_shm_first_use_race),
		cmocka_unit_test(test_keyed_shm_first_use_threads),
		cmocka_unit_test(
		    test_keyed_shm_fixed_table_keeps_failing_keys),
		cmocka_unit_test(test_keyed_shm_overflow),
		cmocka_unit_test(test_keyed_shm_overflow_event),
		cmocka_unit_test(test_keyed_shm_sigkill_mid_claim),
		cmocka_unit_test(test_keyed_shm_dead_holder_bits_cleared),
		cmocka_unit_test(test_keyed_shm_pipeline_text),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

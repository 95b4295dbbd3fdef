/*
 * Keyed families, issue 41 (third pass): an existing key's breaker or
 * rate limiter call holds its entry in the thread's hazard slot (no
 * locked instruction), the evictor fencing every thread with
 * membarrier(2); where the fence is refused, or RESIL_KEYED_NO_MEMBARRIER
 * is set when the family is made, calls pin the entry as before. Each
 * test runs both ways. Run under TSan and ASan too: a hold that let an
 * entry be evicted under a call is a use after free there.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <resil/keyed.h>

#define KEYLEN 12

/* Whether this process can have membarrier's private expedited fence. */
static int
fence_available(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
	long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);

	return q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
#else
	return 0;
#endif
}

typedef struct watch {
	char key[KEYLEN + 1];
	uint64_t evicted_watched; /* atomic: EVICTED events of key */
	uint64_t evicted;         /* atomic: every EVICTED event */
} watch;

static void
on_event(const resil_keyed_event *ev, void *ctx)
{
	watch *w = ctx;

	if (ev->type != RESIL_KEYED_EVENT_EVICTED)
		return;
	__atomic_fetch_add(&w->evicted, 1, __ATOMIC_RELAXED);
	if (ev->key_len == KEYLEN && memcmp(ev->key, w->key, KEYLEN) == 0)
		__atomic_fetch_add(&w->evicted_watched, 1, __ATOMIC_RELAXED);
}

/* A family of max_keys breakers (or rate limiters), made with the fence
 * (fenced 1) or without (RESIL_KEYED_NO_MEMBARRIER=1 while it is made). */
static resil_keyed *
family(resil_keyed_kind kind, uint32_t max_keys, int fenced, watch *w)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_keyed *k = NULL;

	cfg.kind = kind;
	cfg.max_keys = max_keys;
	cfg.listener = w != NULL ? on_event : NULL;
	cfg.listener_ctx = w;
	cfg.ratelimit.rate = 1000;
	cfg.ratelimit.burst = 1000;
	assert_int_equal(fenced ? unsetenv("RESIL_KEYED_NO_MEMBARRIER")
	                        : setenv("RESIL_KEYED_NO_MEMBARRIER", "1", 1),
	    0);
	assert_int_equal(resil_keyed_new(&k, &cfg, NULL), RESIL_OK);
	assert_int_equal(unsetenv("RESIL_KEYED_NO_MEMBARRIER"), 0);
	return k;
}

static void
keyname(char *out, const char *prefix, unsigned i)
{
	snprintf(out, KEYLEN + 1, "%s%07u", prefix, i);
}

/* New keys, each taken and recorded a success (idle at once): every one
 * past max_keys evicts one. */
static void
churn_keys(resil_keyed *k, const char *prefix, unsigned from, unsigned n)
{
	char key[KEYLEN + 1];
	resil_keyed_permit p;
	unsigned i;

	for (i = from; i < from + n; i++) {
		keyname(key, prefix, i);
		assert_int_equal(
		    resil_keyed_breaker_acquire(k, key, KEYLEN, &p), RESIL_OK);
		assert_int_equal(resil_keyed_breaker_record(
		                     k, &p, RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
}

static void
count_successes(const void *key, size_t len, const resil_keyed_instance *in,
    void *ctx)
{
	resil_breaker_metrics m;

	(void)key;
	(void)len;
	assert_int_equal(resil_breaker_get_metrics(in->breaker, &m), RESIL_OK);
	*(uint64_t *)ctx = m.successes;
}

/* A permit taken by slot (the thread's second call: its first takes
 * the slot) holds its key through a churn of 4 * max_keys new keys on
 * the same thread (whose calls, the slot busy, pin): the key is never
 * evicted, and the record lands on its instance. The same with pins. */
static void
permit_holds_key(int fenced)
{
	watch w;
	resil_keyed *k;
	resil_keyed_permit p;
	uint64_t successes = 0;

	memset(&w, 0, sizeof(w));
	keyname(w.key, "held-", 1);
	k = family(RESIL_KEYED_BREAKER, 32, fenced, &w);
	churn_keys(k, "warm-", 0, 1);
	churn_keys(k, "held-", 1, 1);
	assert_int_equal(resil_keyed_breaker_acquire(k, w.key, KEYLEN, &p),
	    RESIL_OK);
	/* Which hold the permit has (white box: the low bit names a
	 * slot). */
	assert_int_equal(((uintptr_t)p.entry & 1u) != 0, fenced);
	churn_keys(k, "churn", 0, 4 * 32);
	assert_true(__atomic_load_n(&w.evicted, __ATOMIC_RELAXED) >= 3 * 32);
	assert_int_equal(
	    __atomic_load_n(&w.evicted_watched, __ATOMIC_RELAXED), 0);
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_null(p.entry);
	assert_int_equal(
	    resil_keyed_with(k, w.key, KEYLEN, count_successes, &successes),
	    RESIL_OK);
	assert_int_equal(successes, 2);
	/* A spent permit holds nothing: a second record is refused. */
	assert_int_equal(resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_INVAL);
	/* Let go: the key is idle, the next churn evicts it. */
	churn_keys(k, "again", 0, 4 * 32);
	assert_int_equal(
	    __atomic_load_n(&w.evicted_watched, __ATOMIC_RELAXED), 1);
	resil_keyed_free(k);
}

static void
test_keyed_hazard_permit_holds_key(void **state)
{
	(void)state;
	if (!fence_available())
		skip();
	permit_holds_key(1);
}

static void
test_keyed_hazard_refused_pins(void **state)
{
	(void)state;
	permit_holds_key(0);
}

/* A permit held by slot and refused (the key's breaker OPEN) lets go: the
 * key's entry can be evicted once closed; a release lets go too. */
static void
test_keyed_hazard_refusal_and_release_let_go(void **state)
{
	watch w;
	resil_keyed *k;
	resil_keyed_permit p;
	int fenced;

	(void)state;
	for (fenced = 0; fenced <= fence_available(); fenced++) {
		memset(&w, 0, sizeof(w));
		keyname(w.key, "held-", 1);
		k = family(RESIL_KEYED_BREAKER, 8, fenced, &w);
		churn_keys(k, "held-", 1, 1);
		assert_int_equal(resil_keyed_breaker_acquire(
		                     k, w.key, KEYLEN, &p),
		    RESIL_OK);
		assert_int_equal(resil_keyed_breaker_release(k, &p), RESIL_OK);
		assert_null(p.entry);
		churn_keys(k, "churn", 0, 4 * 8);
		assert_int_equal(__atomic_load_n(&w.evicted_watched,
		                     __ATOMIC_RELAXED),
		    1);
		resil_keyed_free(k);
	}
}

/* A family freed with a slot-held permit out lets the slot go: the
 * thread's next family holds by slot again. */
static void
test_keyed_hazard_free_lets_slot_go(void **state)
{
	resil_keyed *k;
	resil_keyed_permit p;
	char key[KEYLEN + 1];

	(void)state;
	if (!fence_available())
		skip();
	keyname(key, "held-", 1);
	k = family(RESIL_KEYED_BREAKER, 8, 1, NULL);
	churn_keys(k, "held-", 1, 1);
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, key, KEYLEN, &p), RESIL_OK);
	assert_true(((uintptr_t)p.entry & 1u) != 0);
	resil_keyed_free(k);
	k = family(RESIL_KEYED_BREAKER, 8, 1, NULL);
	churn_keys(k, "held-", 1, 1);
	assert_int_equal(
	    resil_keyed_breaker_acquire(k, key, KEYLEN, &p), RESIL_OK);
	assert_true(((uintptr_t)p.entry & 1u) != 0);
	assert_int_equal(
	    resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	resil_keyed_free(k);
}

/* A permit taken on one thread and recorded on another: the recorder
 * clears the taker's slot, and the taker, having exited, gives its slot
 * to the next thread. */
typedef struct xthread {
	resil_keyed *k;
	resil_keyed_permit p;
	const char *key;
} xthread;

static void *
take_permit(void *arg)
{
	xthread *x = arg;
	resil_keyed_permit warm;

	/* The first call takes the thread's slot, the second holds by it. */
	assert_int_equal(
	    resil_keyed_breaker_acquire(x->k, x->key, KEYLEN, &warm), RESIL_OK);
	assert_int_equal(
	    resil_keyed_breaker_record(x->k, &warm, RESIL_OUTCOME_SUCCESS),
	    RESIL_OK);
	assert_int_equal(
	    resil_keyed_breaker_acquire(x->k, x->key, KEYLEN, &x->p), RESIL_OK);
	return NULL;
}

static void
test_keyed_hazard_record_on_another_thread(void **state)
{
	watch w;
	xthread x;
	pthread_t t;
	int fenced, round;

	(void)state;
	for (fenced = 0; fenced <= fence_available(); fenced++) {
		memset(&w, 0, sizeof(w));
		keyname(w.key, "held-", 1);
		x.k = family(RESIL_KEYED_BREAKER, 8, fenced, &w);
		x.key = w.key;
		for (round = 0; round < 3; round++) {
			assert_int_equal(
			    pthread_create(&t, NULL, take_permit, &x), 0);
			assert_int_equal(pthread_join(t, NULL), 0);
			/* The taker is gone, its permit out: the key stays. */
			churn_keys(x.k, "churn", (unsigned)round * 100, 4 * 8);
			assert_int_equal(__atomic_load_n(&w.evicted_watched,
			                     __ATOMIC_RELAXED),
			    (uint64_t)round);
			assert_int_equal(resil_keyed_breaker_record(x.k, &x.p,
			                     RESIL_OUTCOME_SUCCESS),
			    RESIL_OK);
			churn_keys(x.k, "after", (unsigned)round * 100, 4 * 8);
			assert_int_equal(__atomic_load_n(&w.evicted_watched,
			                     __ATOMIC_RELAXED),
			    (uint64_t)round + 1);
		}
		resil_keyed_free(x.k);
	}
}

/* Readers race an evictor: 2 threads call 8 hot keys (breakers, and a
 * rate limiter family's) by slot, each holding its permit while it takes
 * a nested one (pinned); a third makes new keys in both families, each
 * evicting an idle key. Every call must land on its own key's instance:
 * the sum of the successes of each hot key equals the calls made on it
 * since its last eviction, which the listener cannot see, so the test
 * asserts what it can: every record is accepted, no sanitizer report,
 * and the families' counts add up. */
#define HOT 8
#define READS 4000
#define CHURN 4000

typedef struct race {
	resil_keyed *k;  /* breakers */
	resil_keyed *rl; /* rate limiters */
	int id;
	uint64_t calls;
} race;

static void *
race_reader(void *arg)
{
	race *r = arg;
	char key[KEYLEN + 1], nested[KEYLEN + 1];
	resil_keyed_permit p, q;
	int i;

	for (i = 0; i < READS; i++) {
		keyname(key, "hot--", (unsigned)((i * 3 + r->id) % HOT));
		keyname(nested, "hot--", (unsigned)((i * 5 + 1) % HOT));
		if (resil_keyed_breaker_acquire(r->k, key, KEYLEN, &p) !=
		    RESIL_OK)
			fail_msg("acquire of %s refused", key);
		/* Nested: this thread's slot is busy, the call pins. */
		if (resil_keyed_breaker_acquire(r->k, nested, KEYLEN, &q) !=
		    RESIL_OK)
			fail_msg("nested acquire of %s refused", nested);
		if (resil_keyed_ratelimit_try_acquire(
		        r->rl, nested, KEYLEN, 1, NULL) == RESIL_E_INVAL)
			fail_msg("rate limit of %s refused", nested);
		if (resil_keyed_breaker_record(r->k, &q,
		        RESIL_OUTCOME_SUCCESS) != RESIL_OK)
			fail_msg("nested record of %s refused", nested);
		if (resil_keyed_breaker_record(r->k, &p,
		        RESIL_OUTCOME_SUCCESS) != RESIL_OK)
			fail_msg("record of %s refused", key);
		if (resil_keyed_ratelimit_try_acquire(
		        r->rl, key, KEYLEN, 1, NULL) == RESIL_E_INVAL)
			fail_msg("rate limit of %s refused", key);
		r->calls++;
	}
	return NULL;
}

static void *
race_churn(void *arg)
{
	race *r = arg;
	char key[KEYLEN + 1];
	resil_keyed_permit p;
	int i;

	for (i = 0; i < CHURN; i++) {
		keyname(key, "churn", (unsigned)i);
		if (resil_keyed_breaker_acquire(r->k, key, KEYLEN, &p) ==
		    RESIL_OK)
			resil_keyed_breaker_record(
			    r->k, &p, RESIL_OUTCOME_SUCCESS);
		(void)resil_keyed_ratelimit_try_acquire(
		    r->rl, key, KEYLEN, 1, NULL);
	}
	return NULL;
}

static void
evictor_races_readers(int fenced)
{
	resil_keyed *k, *rl;
	resil_keyed_metrics km;
	pthread_t t[3];
	race rc[3];
	int i;

	k = family(RESIL_KEYED_BREAKER, 12, fenced, NULL);
	rl = family(RESIL_KEYED_RATELIMIT, 12, fenced, NULL);
	for (i = 0; i < 3; i++) {
		memset(&rc[i], 0, sizeof(rc[i]));
		rc[i].k = k;
		rc[i].rl = rl;
		rc[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL,
		                     i < 2 ? race_reader : race_churn, &rc[i]),
		    0);
	}
	for (i = 0; i < 3; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(rc[0].calls + rc[1].calls, 2 * READS);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_true(km.evicted > 0);
	assert_int_equal(km.created, km.keys + km.evicted);
	assert_true(km.keys <= 12);
	print_message("keyed hazard (%s): created %llu evicted %llu "
	              "overflowed %llu\n",
	    fenced ? "slots" : "pins", (unsigned long long)km.created,
	    (unsigned long long)km.evicted, (unsigned long long)km.overflowed);
	assert_int_equal(resil_keyed_get_metrics(rl, &km), RESIL_OK);
	assert_int_equal(km.created, km.keys + km.evicted);
	resil_keyed_free(k);
	resil_keyed_free(rl);
}

static void
test_keyed_hazard_evictor_races_readers(void **state)
{
	(void)state;
	if (!fence_available())
		skip();
	evictor_races_readers(1);
}

static void
test_keyed_hazard_evictor_races_readers_pinned(void **state)
{
	(void)state;
	evictor_races_readers(0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_hazard_permit_holds_key),
		cmocka_unit_test(test_keyed_hazard_refused_pins),
		cmocka_unit_test(test_keyed_hazard_refusal_and_release_let_go),
		cmocka_unit_test(test_keyed_hazard_free_lets_slot_go),
		cmocka_unit_test(test_keyed_hazard_record_on_another_thread),
		cmocka_unit_test(test_keyed_hazard_evictor_races_readers),
		cmocka_unit_test(
		    test_keyed_hazard_evictor_races_readers_pinned),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

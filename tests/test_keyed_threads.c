/*
 * Keyed families under threads (run under TSan too): concurrent first
 * use of one key makes exactly one instance; readers of protected keys
 * race a churn of new keys that evicts and reuses entries, and no call is
 * lost or lands on another key's instance.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <resil/keyed.h>

#define THREADS 4
#define ROUNDS 3000

typedef struct shared {
	resil_keyed *k;
	pthread_barrier_t bar;
	uint64_t created_events; /* atomic */
	int stop;                /* atomic */
} shared;

static void
count_created(const resil_keyed_event *ev, void *ctx)
{
	shared *s = ctx;

	if (ev->type == RESIL_KEYED_EVENT_CREATED)
		__atomic_fetch_add(&s->created_events, 1, __ATOMIC_RELAXED);
}

static void *
first_user(void *arg)
{
	shared *s = arg;
	resil_keyed_permit p;
	char key[16];
	int r;

	for (r = 0; r < ROUNDS; r++) {
		int n = snprintf(key, sizeof(key), "round-%d", r);

		pthread_barrier_wait(&s->bar);
		if (resil_keyed_breaker_acquire(s->k, key, (size_t)n, &p) ==
		    RESIL_OK)
			resil_keyed_breaker_record(
			    s->k, &p, RESIL_OUTCOME_SUCCESS);
	}
	return NULL;
}

static void
test_keyed_first_use_makes_one_instance(void **state)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_keyed_metrics km;
	pthread_t t[THREADS];
	shared s;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	cfg.max_keys = ROUNDS;
	cfg.listener = count_created;
	cfg.listener_ctx = &s;
	assert_int_equal(resil_keyed_new(&s.k, &cfg, NULL), RESIL_OK);
	pthread_barrier_init(&s.bar, NULL, THREADS);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, first_user, &s);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&s.bar);
	assert_int_equal(resil_keyed_get_metrics(s.k, &km), RESIL_OK);
	assert_int_equal(km.created, ROUNDS);
	assert_int_equal(km.keys, ROUNDS);
	assert_int_equal(
	    __atomic_load_n(&s.created_events, __ATOMIC_RELAXED), ROUNDS);
	resil_keyed_free(s.k);
}

/* Readers: keys s0..s3, a failure each call (protected by the failure
 * streak, never evicted); each counts its calls per key. The churner:
 * new keys with a success each (idle at once, evicted by the next). */
#define STABLE 4
#define READS 20000
#define CHURN 20000

typedef struct reader {
	shared *s;
	int id;
	uint64_t calls[STABLE];
} reader;

static void *
read_stable(void *arg)
{
	reader *r = arg;
	resil_keyed_permit p;
	char key[8];
	int i;

	for (i = 0; i < READS; i++) {
		int ki = (i * 7 + r->id) % STABLE;

		snprintf(key, sizeof(key), "s%d", ki);
		if (resil_keyed_breaker_acquire(r->s->k, key, 2, &p) !=
		    RESIL_OK)
			fail_msg("acquire of %s refused", key);
		resil_keyed_breaker_record(r->s->k, &p, RESIL_OUTCOME_FAILURE);
		r->calls[ki]++;
	}
	return NULL;
}

static void *
churn(void *arg)
{
	shared *s = arg;
	resil_keyed_permit p;
	char key[24];
	int i;

	for (i = 0; i < CHURN; i++) {
		int n = snprintf(key, sizeof(key), "churn-%d", i);

		if (resil_keyed_breaker_acquire(s->k, key, (size_t)n, &p) ==
		    RESIL_OK)
			resil_keyed_breaker_record(
			    s->k, &p, RESIL_OUTCOME_SUCCESS);
	}
	return NULL;
}

typedef struct total {
	uint64_t failures;
	int found;
} total;

static void
read_failures(const void *key, size_t len, const resil_keyed_instance *in,
    void *ctx)
{
	total *t = ctx;
	resil_breaker_metrics m;

	(void)key;
	(void)len;
	resil_breaker_get_metrics(in->breaker, &m);
	t->failures = m.failures;
	t->found = 1;
}

static void
test_keyed_churn_races_readers(void **state)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_keyed_metrics km;
	pthread_t t[3];
	reader rd[2];
	shared s;
	char key[8];
	int i, j;

	(void)state;
	memset(&s, 0, sizeof(s));
	cfg.max_keys = 16;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = UINT32_MAX;
	assert_int_equal(resil_keyed_new(&s.k, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 2; i++) {
		memset(&rd[i], 0, sizeof(rd[i]));
		rd[i].s = &s;
		rd[i].id = i;
		pthread_create(&t[i], NULL, read_stable, &rd[i]);
	}
	pthread_create(&t[2], NULL, churn, &s);
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (j = 0; j < STABLE; j++) {
		total tt;

		memset(&tt, 0, sizeof(tt));
		snprintf(key, sizeof(key), "s%d", j);
		assert_int_equal(
		    resil_keyed_with(s.k, key, 2, read_failures, &tt), RESIL_OK);
		assert_true(tt.found);
		assert_int_equal(tt.failures, rd[0].calls[j] + rd[1].calls[j]);
	}
	assert_int_equal(resil_keyed_get_metrics(s.k, &km), RESIL_OK);
	assert_true(km.evicted > 0);
	assert_int_equal(km.created, km.keys + km.evicted);
	print_message("keyed threads: created %llu evicted %llu overflowed "
	              "%llu\n",
	    (unsigned long long)km.created, (unsigned long long)km.evicted,
	    (unsigned long long)km.overflowed);
	resil_keyed_free(s.k);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_first_use_makes_one_instance),
		cmocka_unit_test(test_keyed_churn_races_readers),
	};

	return cmocka_run_group_tests_name("keyed_threads", tests, NULL, NULL);
}

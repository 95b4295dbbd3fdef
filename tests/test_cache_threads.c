#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/fallback.h>

/*
 * Several threads put, get and remove over a small key space on one
 * cache with a tight bound, so eviction runs all the time. Every value
 * read must be one that was written for that key (no torn or foreign
 * values), and the bound must hold at every stats read.
 */

#define THREADS 4
#define OPS 50000
#define KEYS 64
#define MAX_ENTRIES 24

typedef struct worker {
	resil_cache *c;
	resil_manual_clock *mc;
	unsigned id;
	unsigned long bad;
	unsigned long hits;
	unsigned long over_bound;
} worker;

static void *
run(void *arg)
{
	worker *w = arg;
	uint64_t x = 0x9e3779b97f4a7c15ULL * (w->id + 1);
	int i;

	for (i = 0; i < OPS; i++) {
		char name[16], text[32];
		unsigned k;
		resil_args a;
		resil_value v;
		int n;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = (unsigned)(x % KEYS);
		snprintf(name, sizeof(name), "k%u", k);
		a.method = "get";
		a.data = name;
		a.len = strlen(name);
		switch ((x >> 20) % 8) {
		case 0:
		case 1:
		case 2:
			/* The value names its key: readers check it. */
			n = snprintf(text, sizeof(text), "v%u-%u", k, w->id);
			if (resil_value_string(&v, text, (size_t)n, NULL) !=
			    RESIL_OK) {
				w->bad++;
				break;
			}
			if (resil_cache_put(w->c, &a, &v) != RESIL_OK)
				w->bad++;
			resil_value_free(&v);
			break;
		case 3:
			if (resil_cache_put(w->c, &a, NULL) != RESIL_OK)
				w->bad++;
			break;
		case 4:
			(void)resil_cache_remove(w->c, &a);
			break;
		case 5:
			resil_manual_clock_advance(w->mc, 1);
			break;
		case 6: {
			resil_cache_stats st;

			if (resil_cache_stats_get(w->c, &st) != RESIL_OK)
				w->bad++;
			else if (st.entries > MAX_ENTRIES)
				w->over_bound++;
			break;
		}
		default: {
			resil_err err = resil_cache_get(w->c, &a, &v, NULL);

			if (err == RESIL_OK) {
				char want[16];

				w->hits++;
				snprintf(want, sizeof(want), "v%u-", k);
				if (v.type == RESIL_VALUE_STRING &&
				    strncmp(v.u.s.ptr, want, strlen(want)) !=
				        0)
					w->bad++;
				else if (v.type != RESIL_VALUE_STRING &&
				    v.type != RESIL_VALUE_NULL)
					w->bad++;
				resil_value_free(&v);
			} else if (err != RESIL_E_NOTFOUND) {
				w->bad++;
			}
		}
		}
	}
	return NULL;
}

static void
test_cache_threads_bound_and_integrity(void **state)
{
	resil_manual_clock mc;
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c;
	pthread_t t[THREADS];
	worker w[THREADS];
	resil_cache_stats st;
	unsigned long hits = 0;
	unsigned i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.max_entries = MAX_ENTRIES;
	cfg.max_age = 5000; /* some entries go stale as time moves */
	cfg.shards = 8;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	for (i = 0; i < THREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].c = c;
		w[i].mc = &mc;
		w[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, run, &w[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].bad, 0);
		assert_int_equal(w[i].over_bound, 0);
		hits += w[i].hits;
	}
	assert_true(hits > 0);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_true(st.entries <= MAX_ENTRIES);
	assert_true(st.evictions > 0);
	assert_int_equal(st.hits, hits);
	resil_cache_free(c);
}

/*
 * Readers hit one key without locks while a writer replaces it again and
 * again (each put frees the entry it replaces) and fills other keys so
 * that the hand runs: every read is a whole value the writer put, and a
 * reader never sees an older value after a newer one. Under ASan a read
 * of a freed entry fails; under TSan an unordered one.
 */
#define READERS 3
#define VERSIONS 20000

typedef struct hot {
	resil_cache *c;
	uint64_t done; /* set by the writer at the end */
	unsigned long bad;
	unsigned long reads;
} hot;

static void *
hot_reader(void *arg)
{
	hot *h = arg;
	resil_args a = { "get", "hot", 3 };
	long last = -1;
	unsigned long bad = 0, reads = 0;

	while (!__atomic_load_n(&h->done, __ATOMIC_ACQUIRE)) {
		resil_value v;
		resil_err err = resil_cache_get(h->c, &a, &v, NULL);
		long n;

		if (err == RESIL_E_NOTFOUND)
			continue;
		if (err != RESIL_OK || v.type != RESIL_VALUE_STRING ||
		    sscanf(v.u.s.ptr, "hot-%ld", &n) != 1 || n < last)
			bad++;
		else
			last = n;
		reads++;
		resil_value_free(&v);
	}
	__atomic_fetch_add(&h->bad, bad, __ATOMIC_RELAXED);
	__atomic_fetch_add(&h->reads, reads, __ATOMIC_RELAXED);
	return NULL;
}

static void
test_cache_threads_hits_see_whole_values_in_order(void **state)
{
	resil_manual_clock mc;
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c;
	pthread_t t[READERS];
	hot h;
	resil_cache_stats st;
	resil_args a = { "get", "hot", 3 };
	unsigned i;
	int n;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.max_entries = 8;
	cfg.shards = 1;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	memset(&h, 0, sizeof(h));
	h.c = c;
	for (i = 0; i < READERS; i++)
		assert_int_equal(
		    pthread_create(&t[i], NULL, hot_reader, &h), 0);
	for (n = 0; n < VERSIONS; n++) {
		char text[32], other[16];
		resil_value v;
		resil_args o;
		int len = snprintf(text, sizeof(text), "hot-%d", n);

		assert_int_equal(
		    resil_value_string(&v, text, (size_t)len, NULL), RESIL_OK);
		assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
		resil_value_free(&v);
		/* Other keys push the hand round, evicting hot at times. */
		len = snprintf(other, sizeof(other), "o%d", n % 32);
		o.method = "get";
		o.data = other;
		o.len = (size_t)len;
		assert_int_equal(resil_cache_put(c, &o, NULL), RESIL_OK);
		assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
		assert_true(st.entries <= 8);
	}
	__atomic_store_n(&h.done, 1, __ATOMIC_RELEASE);
	for (i = 0; i < READERS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(h.bad, 0);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_true(st.evictions > 0);
	resil_cache_free(c);
}

/*
 * Issue 39: a hit's value shares its entry's bytes. Writers re-record the
 * value a key holds (the lock-free re-stamp) and replace it with new ones
 * over a few keys, so entries are replaced and evicted all the time;
 * readers keep the last HELD values they were served (with a copy of
 * their bytes taken at the hit) and free each one only HELD hits later,
 * long after its entry left the cache: its bytes must still be the ones
 * served. Under ASan a freed entry read fails, under TSan an unordered
 * reference count or stamp.
 */
#define HELD 8
#define SHARE_OPS 20000

typedef struct share {
	resil_cache *c;
	resil_manual_clock *mc;
	unsigned id;
	unsigned long bad;
	unsigned long hits;
} share;

static void *
share_writer(void *arg)
{
	share *w = arg;
	int i;

	for (i = 0; i < SHARE_OPS; i++) {
		char key[8], text[48];
		resil_args a;
		resil_value v;
		int n;

		snprintf(key, sizeof(key), "s%d", i % 4);
		a.method = "getShared";
		a.data = key;
		a.len = strlen(key);
		/* The same text for 4 rounds of a key (re-stamps), then a
		 * new one (a new entry). */
		n = snprintf(text, sizeof(text), "%s-w%u-%d-padding-to-be-long",
		    key, w->id, i / 16);
		if (resil_value_string(&v, text, (size_t)n, NULL) != RESIL_OK ||
		    resil_cache_put(w->c, &a, &v) != RESIL_OK)
			w->bad++;
		resil_value_free(&v);
		if (i % 64 == 0)
			resil_manual_clock_advance(w->mc, 1);
	}
	return NULL;
}

static void *
share_reader(void *arg)
{
	share *w = arg;
	resil_value held[HELD];
	char copy[HELD][48];
	unsigned n = 0, j;
	int i;

	for (i = 0; i < SHARE_OPS; i++) {
		char key[8];
		resil_args a;
		resil_value v;

		snprintf(key, sizeof(key), "s%d", i % 4);
		a.method = "getShared";
		a.data = key;
		a.len = strlen(key);
		if (resil_cache_get(w->c, &a, &v, NULL) != RESIL_OK)
			continue;
		w->hits++;
		if (v.type != RESIL_VALUE_STRING || v.u.s.len >= 48 ||
		    strncmp(v.u.s.ptr, key, strlen(key)) != 0) {
			w->bad++;
			resil_value_free(&v);
			continue;
		}
		j = n % HELD;
		if (n >= HELD) {
			/* The oldest held value, many puts later. */
			if (strcmp(held[j].u.s.ptr, copy[j]) != 0)
				w->bad++;
			resil_value_free(&held[j]);
		}
		held[j] = v;
		memcpy(copy[j], v.u.s.ptr, v.u.s.len + 1);
		n++;
	}
	for (j = 0; j < HELD && j < n; j++) {
		if (strcmp(held[j].u.s.ptr, copy[j]) != 0)
			w->bad++;
		resil_value_free(&held[j]);
	}
	return NULL;
}

static void
test_cache_threads_served_values_outlive_their_entries(void **state)
{
	resil_manual_clock mc;
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c;
	pthread_t t[4];
	share w[4];
	unsigned long hits = 0;
	unsigned i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.max_entries = 3; /* 4 keys: evictions too */
	cfg.shards = 1;
	cfg.max_age = 50;
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 4; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].c = c;
		w[i].mc = &mc;
		w[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL,
		                     i < 2 ? share_writer : share_reader, &w[i]),
		    0);
	}
	for (i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].bad, 0);
		hits += w[i].hits;
	}
	assert_true(hits > 0);
	resil_cache_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_threads_bound_and_integrity),
		cmocka_unit_test(
		    test_cache_threads_hits_see_whole_values_in_order),
		cmocka_unit_test(
		    test_cache_threads_served_values_outlive_their_entries),
	};

	return cmocka_run_group_tests_name("cache_threads", tests, NULL, NULL);
}

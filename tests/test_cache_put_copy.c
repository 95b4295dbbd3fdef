/*
 * The public put's copy of the memo's value (issue 39, fourth pass,
 * lib/fallback_cache.c memo_value_eq()): a thread's memo keeps a copy of
 * its entry's string, bytes or JSON value of 17 to 64 bytes, and
 * resil_cache_put() compares the value with that copy before it announces
 * a read or reads the clock. These tests give the copy what would fool a
 * cheaper check (a byte at every place of every length, another type with
 * the same bytes, a prefix, lengths just outside the range), and take the
 * memo's entry away from under it on another thread (replaced, evicted,
 * removed, freed after a new generation) between two puts of the same
 * value: the put must then store the value again, never re-stamp a dead
 * entry. A value with NULL bytes is refused, never read. A clock
 * without a time word is called before the read (a clock
 * that clears the cache would otherwise wait for its own read). One test
 * races the same-value put against a writer of the same key; the
 * sanitizer builds leave the copy out (FB_MEMO_KEY) and take the general
 * path through the same tests.
 */
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

static resil_cache *
new_cache(resil_manual_clock *mc, size_t max_entries)
{
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c = NULL;

	cfg.max_age = 1000;
	cfg.max_entries = max_entries;
	cfg.shards = 1;
	cfg.clock = resil_manual_clock_hook(mc);
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	return c;
}

/* Put n bytes of s as a value of type t. */
static void
put_bytes(resil_cache *c, const resil_args *a, resil_vtype t, const char *s,
    size_t n)
{
	resil_value v;

	v.type = t;
	v.u.s.ptr = (char *)(uintptr_t)s; /* read only: put copies it */
	v.u.s.len = n;
	memset(&v.alloc_, 0, sizeof(v.alloc_));
	assert_int_equal(resil_cache_put(c, a, &v), RESIL_OK);
}

/* 1 when the cache holds n bytes of s as type t for a, with age. */
static int
holds(resil_cache *c, const resil_args *a, resil_vtype t, const char *s,
    size_t n, uint64_t age)
{
	resil_value v;
	uint64_t got = UINT64_MAX;
	int ok;

	if (resil_cache_get(c, a, &v, &got) != RESIL_OK)
		return 0;
	ok = v.type == t && v.u.s.len == n && memcmp(v.u.s.ptr, s, n) == 0 &&
	    got == age;
	resil_value_free(&v);
	return ok;
}

static size_t
entries(const resil_cache *c)
{
	resil_cache_stats st;

	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	return st.entries;
}

/* Every length of 16 to 65 bytes, a byte changed at every place: another
 * value (replaced, age 0); the same bytes from another buffer: a re-stamp
 * (age 0, the entry kept); the same bytes as another type, or a prefix of
 * them: another value. */
static void
test_cache_put_copy_every_byte_and_length(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a = { "getStock", "key-0001", 8 };
	char s[66], t[66];
	size_t n, i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 4);
	for (n = 16; n <= 65; n++) {
		for (i = 0; i < n; i++)
			s[i] = (char)('a' + (i * 7 + n) % 26);
		put_bytes(c, &a, RESIL_VALUE_STRING, s, n);
		for (i = 0; i < n; i++) {
			resil_manual_clock_advance(&mc, 3);
			memcpy(t, s, n);
			/* The same bytes elsewhere: re-stamped. */
			put_bytes(c, &a, RESIL_VALUE_STRING, t, n);
			assert_true(holds(c, &a, RESIL_VALUE_STRING, s, n, 0));
			resil_manual_clock_advance(&mc, 1);
			/* One byte other: replaced, then back. */
			t[i] = (char)(t[i] ^ 0x20);
			put_bytes(c, &a, RESIL_VALUE_STRING, t, n);
			assert_true(holds(c, &a, RESIL_VALUE_STRING, t, n, 0));
			resil_manual_clock_advance(&mc, 1);
			put_bytes(c, &a, RESIL_VALUE_STRING, s, n);
			assert_true(holds(c, &a, RESIL_VALUE_STRING, s, n, 0));
		}
		/* The same bytes as bytes, then JSON, then a string again. */
		resil_manual_clock_advance(&mc, 1);
		put_bytes(c, &a, RESIL_VALUE_BYTES, s, n);
		assert_true(holds(c, &a, RESIL_VALUE_BYTES, s, n, 0));
		put_bytes(c, &a, RESIL_VALUE_JSON, s, n);
		assert_true(holds(c, &a, RESIL_VALUE_JSON, s, n, 0));
		put_bytes(c, &a, RESIL_VALUE_STRING, s, n);
		/* A prefix (the chunks at 0 agree) and a longer value whose
		 * first n bytes are these. */
		put_bytes(c, &a, RESIL_VALUE_STRING, s, n - 1);
		assert_true(holds(c, &a, RESIL_VALUE_STRING, s, n - 1, 0));
		put_bytes(c, &a, RESIL_VALUE_STRING, s, n);
		s[n] = 'z';
		put_bytes(c, &a, RESIL_VALUE_STRING, s, n + 1);
		assert_true(holds(c, &a, RESIL_VALUE_STRING, s, n + 1, 0));
		assert_int_equal(entries(c), 1);
	}
	resil_cache_free(c);
}

/* Other values of the memo's key after a string: an int (re-stamped as
 * an int), the NULL sentinel, and the string again. */
static void
test_cache_put_copy_other_types(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a = { "getStock", "key-0001", 8 };
	const char *s = "0123456789abcdef0123456789abcdef";
	resil_value i7 = resil_value_int(7), v;
	uint64_t age = 99;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 4);
	put_bytes(c, &a, RESIL_VALUE_STRING, s, 32);
	assert_int_equal(resil_cache_put(c, &a, &i7), RESIL_OK);
	resil_manual_clock_advance(&mc, 5);
	assert_int_equal(resil_cache_put(c, &a, &i7), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_INT);
	assert_int_equal(v.u.i, 7);
	assert_int_equal(age, 0);
	put_bytes(c, &a, RESIL_VALUE_STRING, s, 32);
	assert_int_equal(resil_cache_put(c, &a, NULL), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_NULL);
	resil_manual_clock_advance(&mc, 5);
	put_bytes(c, &a, RESIL_VALUE_STRING, s, 32);
	assert_true(holds(c, &a, RESIL_VALUE_STRING, s, 32, 0));
	resil_cache_free(c);
}

/* A string, bytes or JSON value with NULL bytes and a length above 0 is
 * refused (RESIL_E_INVAL), never read: of the memo's key with the copy's
 * type and length, of the memo's key as another length, of another key,
 * through the pipeline's record and the chain's; the value held stays. */
static void
test_cache_put_copy_null_bytes_refused(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_fallback *fb;
	resil_args a = { "getStock", "key-0001", 8 };
	resil_args b = { "getStock", "key-0002", 8 };
	const char *s = "the value of the key, 32 bytes!!";
	resil_value bad, i5 = resil_value_int(5);
	size_t lens[] = { 32, 40, 8, 100 };
	size_t i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 4);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	memset(&bad, 0, sizeof(bad));
	bad.type = RESIL_VALUE_STRING;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		bad.u.s.len = lens[i];
		put_bytes(c, &a, RESIL_VALUE_STRING, s, 32);
		put_bytes(c, &a, RESIL_VALUE_STRING, s, 32);
		assert_int_equal(resil_cache_put(c, &a, &bad), RESIL_E_INVAL);
		assert_int_equal(resil_cache_put(c, &b, &bad), RESIL_E_INVAL);
		assert_int_equal(
		    resil_fallback_record(fb, &a, &bad), RESIL_E_INVAL);
		assert_int_equal(resil_cache_put(c, &a, &i5), RESIL_OK);
		assert_int_equal(
		    resil_fallback_record(fb, &a, &bad), RESIL_E_INVAL);
		put_bytes(c, &a, RESIL_VALUE_STRING, s, 32);
		assert_true(holds(c, &a, RESIL_VALUE_STRING, s, 32, 0));
		assert_int_equal(entries(c), 1);
	}
	bad.u.s.len = 0; /* no bytes: an empty string */
	assert_int_equal(resil_cache_put(c, &a, &bad), RESIL_OK);
	assert_true(holds(c, &a, RESIL_VALUE_STRING, "", 0, 0));
	resil_fallback_free(fb);
	resil_cache_free(c);
}

/* What another thread does to the cache between two puts of this one. */
typedef struct other {
	resil_cache *c;
	int what;
} other;

enum { REPLACE, EVICT, REMOVE, NEW_GENERATION, CLEAR };

static void *
other_run(void *arg)
{
	other *o = arg;
	resil_args a = { "getStock", "key-0001", 8 };
	char key[16];
	int i;

	switch (o->what) {
	case REPLACE: /* another value of the key: the entry replaced */
		put_bytes(o->c, &a, RESIL_VALUE_STRING,
		    "another value of 32 bytes long!!", 32);
		break;
	case EVICT: /* another key in a cache of one entry */
		a.data = "key-0002";
		put_bytes(o->c, &a, RESIL_VALUE_STRING,
		    "a value of the other key, 32 b!!", 32);
		break;
	case REMOVE:
		assert_int_equal(resil_cache_remove(o->c, &a), RESIL_OK);
		break;
	case NEW_GENERATION: /* 20 keys through one entry: 16 retired,
	                      * freed after a wait for the readers */
		for (i = 0; i < 20; i++) {
			snprintf(key, sizeof(key), "other-%02d", i);
			a.data = key;
			a.len = strlen(key);
			put_bytes(o->c, &a, RESIL_VALUE_STRING,
			    "a value of the other key, 32 b!!", 32);
		}
		break;
	default:
		resil_cache_clear(o->c);
		break;
	}
	return NULL;
}

/* The memo's entry replaced, evicted, removed, freed or cleared by
 * another thread (this thread's memo still names it): a put of the very
 * value the memo's copy holds stores it again, stamped now. */
static void
test_cache_put_copy_entry_gone_under_the_memo(void **state)
{
	resil_manual_clock mc;
	resil_args a = { "getStock", "key-0001", 8 };
	const char *s = "the value of the key, 32 bytes!!";
	int what;

	(void)state;
	for (what = REPLACE; what <= CLEAR; what++) {
		other o;
		pthread_t t;

		resil_manual_clock_init(&mc, 1);
		o.c = new_cache(&mc, 1);
		o.what = what;
		put_bytes(o.c, &a, RESIL_VALUE_STRING, s, 32);
		put_bytes(o.c, &a, RESIL_VALUE_STRING, s, 32); /* the memo's */
		assert_int_equal(pthread_create(&t, NULL, other_run, &o), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		resil_manual_clock_advance(&mc, 7);
		put_bytes(o.c, &a, RESIL_VALUE_STRING, s, 32);
		assert_true(holds(o.c, &a, RESIL_VALUE_STRING, s, 32, 0));
		assert_int_equal(entries(o.c), 1);
		resil_cache_free(o.c);
	}
}

/* A clock without a time word, whose reading clears the cache: the put
 * of the memo's value calls it before its read (inside, the clear would
 * wait for that read forever), then stores the value again, stamped with
 * the reading. */
typedef struct clearing_clock {
	resil_cache *c;
	uint64_t now;
	unsigned calls;
	int clear;
} clearing_clock;

static uint64_t
clearing_now(void *ctx)
{
	clearing_clock *k = ctx;

	k->calls++;
	if (k->clear && k->c != NULL)
		resil_cache_clear(k->c);
	return k->now;
}

static void
test_cache_put_copy_clock_without_word(void **state)
{
	clearing_clock k = { NULL, 100, 0, 0 };
	resil_clock clock;
	resil_cache_config cfg = resil_cache_config_default();
	resil_args a = { "getStock", "key-0001", 8 };
	const char *s = "the value of the key, 32 bytes!!";
	unsigned calls;

	(void)state;
	memset(&clock, 0, sizeof(clock));
	clock.now = clearing_now;
	clock.ctx = &k;
	cfg.max_age = 1000;
	cfg.clock = &clock;
	assert_int_equal(resil_cache_new(&k.c, &cfg, NULL), RESIL_OK);
	put_bytes(k.c, &a, RESIL_VALUE_STRING, s, 32);
	k.now = 150;
	calls = k.calls;
	put_bytes(k.c, &a, RESIL_VALUE_STRING, s, 32); /* re-stamped at 150 */
	assert_int_equal(k.calls, calls + 1);
	k.now = 170;
	assert_true(holds(k.c, &a, RESIL_VALUE_STRING, s, 32, 20));
	k.clear = 1;
	k.now = 200;
	put_bytes(k.c, &a, RESIL_VALUE_STRING, s, 32);
	k.clear = 0;
	k.now = 230;
	assert_true(holds(k.c, &a, RESIL_VALUE_STRING, s, 32, 30));
	resil_cache_free(k.c);
}

/* One thread puts the same 64-byte value of a key over and over (the
 * copy's path) while another replaces that key's value, removes it and
 * puts other keys through a cache of two entries (evictions, and a wait
 * for the readers every 16): no put fails or crashes, every value read is
 * one of the two, and once both are done the same-value put stores its
 * value. */
#define RACE_OPS 200000

typedef struct racer {
	resil_cache *c;
	unsigned long bad; /* this thread's */
} racer;

#define V64A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define V64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static void *
race_same(void *arg)
{
	racer *r = arg;
	resil_args a = { "getStock", "key-0001", 8 };
	resil_value v;
	int i;

	for (i = 0; i < RACE_OPS; i++) {
		v.type = RESIL_VALUE_STRING;
		v.u.s.ptr = V64A;
		v.u.s.len = 64;
		memset(&v.alloc_, 0, sizeof(v.alloc_));
		if (resil_cache_put(r->c, &a, &v) != RESIL_OK)
			r->bad++;
		if (i % 16 == 0 && resil_cache_get(r->c, &a, &v, NULL) ==
		        RESIL_OK) {
			if (v.u.s.len != 64 || (memcmp(v.u.s.ptr, V64A, 64) != 0 &&
			                           memcmp(v.u.s.ptr, V64B, 64) != 0))
				r->bad++;
			resil_value_free(&v);
		}
	}
	return NULL;
}

static void *
race_writer(void *arg)
{
	racer *r = arg;
	resil_args a = { "getStock", "key-0001", 8 };
	resil_args o = { "getStock", "other-00", 8 };
	resil_value v;
	int i;

	for (i = 0; i < RACE_OPS / 4; i++) {
		v.type = RESIL_VALUE_STRING;
		v.u.s.len = 64;
		memset(&v.alloc_, 0, sizeof(v.alloc_));
		switch (i % 4) {
		case 0:
			v.u.s.ptr = V64B;
			if (resil_cache_put(r->c, &a, &v) != RESIL_OK)
				r->bad++;
			break;
		case 1:
			(void)resil_cache_remove(r->c, &a);
			break;
		default:
			v.u.s.ptr = V64B;
			o.data = (i & 4) != 0 ? "other-01" : "other-02";
			if (resil_cache_put(r->c, &o, &v) != RESIL_OK)
				r->bad++;
			break;
		}
	}
	return NULL;
}

static void
test_cache_put_copy_threads_race_a_writer(void **state)
{
	resil_manual_clock mc;
	resil_args a = { "getStock", "key-0001", 8 };
	racer r1 = { NULL, 0 }, r2 = { NULL, 0 };
	pthread_t t1, t2;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	r1.c = r2.c = new_cache(&mc, 2);
	assert_int_equal(pthread_create(&t1, NULL, race_same, &r1), 0);
	assert_int_equal(pthread_create(&t2, NULL, race_writer, &r2), 0);
	assert_int_equal(pthread_join(t1, NULL), 0);
	assert_int_equal(pthread_join(t2, NULL), 0);
	assert_int_equal(r1.bad, 0);
	assert_int_equal(r2.bad, 0);
	resil_manual_clock_advance(&mc, 1);
	put_bytes(r1.c, &a, RESIL_VALUE_STRING, V64A, 64);
	assert_true(holds(r1.c, &a, RESIL_VALUE_STRING, V64A, 64, 0));
	resil_cache_free(r1.c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache_put_copy_every_byte_and_length),
		cmocka_unit_test(test_cache_put_copy_other_types),
		cmocka_unit_test(test_cache_put_copy_null_bytes_refused),
		cmocka_unit_test(test_cache_put_copy_entry_gone_under_the_memo),
		cmocka_unit_test(test_cache_put_copy_clock_without_word),
		cmocka_unit_test(test_cache_put_copy_threads_race_a_writer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

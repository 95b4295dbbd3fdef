#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/fallback.h>

#include "fallback_internal.h"
#include "support/fail_alloc.h"

#define SERVICE "shop.Inventory"

static resil_cache *
new_cache(resil_manual_clock *mc, size_t entries, size_t bytes,
    uint64_t max_age, uint32_t shards)
{
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c = NULL;
	resil_diag d;

	cfg.max_entries = entries;
	cfg.max_bytes = bytes;
	cfg.max_age = max_age;
	cfg.shards = shards;
	cfg.clock = resil_manual_clock_hook(mc);
	if (resil_cache_new(&c, &cfg, &d) != RESIL_OK)
		fail_msg("resil_cache_new: %s", d.msg);
	return c;
}

static resil_args
key(const char *method, const char *arg)
{
	resil_args a;

	a.method = method;
	a.data = arg;
	a.len = arg != NULL ? strlen(arg) : 0;
	return a;
}

/* ---- the cache ---- */

static void
test_fallback_cache_null_is_not_a_miss(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args k = key("getStock", "sku-1");
	resil_args other = key("getStock", "sku-2");
	resil_value v = resil_value_int(99);
	resil_value nul = resil_value_null();
	uint64_t age = 77;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 4096, RESIL_CACHE_NO_AGE_LIMIT, 1);
	/* miss */
	assert_int_equal(resil_cache_get(c, &k, &v, &age), RESIL_E_NOTFOUND);
	assert_int_equal(v.type, RESIL_VALUE_INT); /* untouched */
	assert_int_equal(age, 77);
	/* a cached null answers null */
	assert_int_equal(resil_cache_put(c, &k, &nul), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k, &v, &age), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_NULL);
	assert_int_equal(age, 0);
	/* NULL value pointer is the sentinel too */
	assert_int_equal(resil_cache_put(c, &other, NULL), RESIL_OK);
	v = resil_value_int(1);
	assert_int_equal(resil_cache_get(c, &other, &v, NULL), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_NULL);
	/* the method is part of the key */
	k.method = "getPrice";
	assert_int_equal(resil_cache_get(c, &k, &v, NULL), RESIL_E_NOTFOUND);
	resil_cache_free(c);
}

static void
test_fallback_cache_age_limit_is_inclusive(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args k = key("getStock", "sku-1");
	resil_value v = resil_value_int(8), got;
	resil_cache_stats st;
	uint64_t age;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	c = new_cache(&mc, 16, 4096, 10, 1);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_manual_clock_set(&mc, 1010); /* age == limit: served */
	assert_int_equal(resil_cache_get(c, &k, &got, &age), RESIL_OK);
	assert_int_equal(got.u.i, 8);
	assert_int_equal(age, 10);
	resil_manual_clock_set(&mc, 1011); /* limit + 1: never served */
	assert_int_equal(resil_cache_get(c, &k, &got, &age), RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.stale, 1);
	assert_int_equal(st.entries, 0); /* the stale entry is gone */
	/* A clock moved backwards gives age 0, not a huge age. */
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_manual_clock_set(&mc, 500);
	assert_int_equal(resil_cache_get(c, &k, &got, &age), RESIL_OK);
	assert_int_equal(age, 0);
	resil_cache_free(c);
}

static void
test_fallback_cache_evicts_lru_at_entry_bound(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a = key("m", "a"), b = key("m", "b"), cc = key("m", "c"),
	           d = key("m", "d");
	resil_value v = resil_value_int(1), got;
	resil_cache_stats st;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 1);
	assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &b, &v), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &cc, &v), RESIL_OK);
	/* a hit on a: the hand gives it a second chance, b goes */
	assert_int_equal(resil_cache_get(c, &a, &got, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &d, &v), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &b, &got, NULL), RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_get(c, &a, &got, NULL), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &cc, &got, NULL), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &d, &got, NULL), RESIL_OK);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 1);
	/* Replacing a key does not evict. */
	assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 1);
	resil_cache_free(c);
}

/* Hit (1) or miss (0); a hit sets the entry's reference bit, so the
 * eviction tests look only once the order under test is done. */
static int
held(resil_cache *c, const char *arg)
{
	resil_args k = key("m", arg);
	resil_value got;
	resil_err err = resil_cache_get(c, &k, &got, NULL);

	if (err == RESIL_OK)
		resil_value_free(&got);
	else
		assert_int_equal(err, RESIL_E_NOTFOUND);
	return err == RESIL_OK;
}

static void
put_int(resil_cache *c, const char *arg)
{
	resil_args k = key("m", arg);
	resil_value v = resil_value_int(1);

	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
}

static void
test_fallback_cache_second_chance_is_spent_once(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_cache_stats st;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 1);
	put_int(c, "a");
	put_int(c, "b");
	put_int(c, "c");
	assert_true(held(c, "b"));
	assert_true(held(c, "a"));
	/* The hand passes a and b (clearing their bits, moving them behind
	 * the newest) and evicts c: the order is now a, b, d, bits clear. */
	put_int(c, "d");
	/* a's chance is spent: it is the oldest with a clear bit. Exact LRU
	 * would evict b here (a was used after b). */
	put_int(c, "e");
	assert_false(held(c, "a"));
	assert_false(held(c, "c"));
	assert_true(held(c, "b"));
	assert_true(held(c, "d"));
	assert_true(held(c, "e"));
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 2);
	resil_cache_free(c);
}

static void
test_fallback_cache_all_referenced_evicts_the_oldest(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 1);
	put_int(c, "a");
	put_int(c, "b");
	put_int(c, "c");
	assert_true(held(c, "c"));
	assert_true(held(c, "b"));
	assert_true(held(c, "a"));
	/* Every bit set: one full round clears them all, then the hand is
	 * back at the oldest, a. The round left b's bit clear too. */
	put_int(c, "d");
	put_int(c, "e");
	assert_false(held(c, "a"));
	assert_false(held(c, "b"));
	assert_true(held(c, "c"));
	assert_true(held(c, "d"));
	assert_true(held(c, "e"));
	resil_cache_free(c);
}

static void
test_fallback_cache_replaced_entry_goes_to_the_back(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a = key("m", "a");
	resil_value two = resil_value_int(2), got;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 1);
	put_int(c, "a");
	put_int(c, "b");
	put_int(c, "c");
	assert_true(held(c, "c"));
	/* A new value for a: its entry is the newest, bit clear; c keeps
	 * its bit. Order: b, c (set), a. */
	assert_int_equal(resil_cache_put(c, &a, &two), RESIL_OK);
	put_int(c, "d"); /* evicts b */
	put_int(c, "e"); /* passes c (clears it), evicts a */
	assert_false(held(c, "b"));
	assert_false(held(c, "a"));
	assert_true(held(c, "c"));
	assert_true(held(c, "d"));
	assert_true(held(c, "e"));
	resil_cache_free(c);

	/* The same, looking at a at once: the replacement survives the
	 * eviction the old entry would not have. */
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 1);
	put_int(c, "a");
	put_int(c, "b");
	put_int(c, "c");
	assert_int_equal(resil_cache_put(c, &a, &two), RESIL_OK);
	put_int(c, "d"); /* evicts b, not a */
	assert_int_equal(resil_cache_get(c, &a, &got, NULL), RESIL_OK);
	assert_int_equal(got.u.i, 2);
	assert_false(held(c, "b"));
	resil_cache_free(c);
}

/*
 * A thread's memo (issue 39: the entry its last re-stamp or hit found,
 * checked in place of a probe) never answers for an entry that is no
 * longer its key's, nor for another key or another cache: a removed
 * key misses and its next put stamps a new entry; an entry evicted and
 * freed (many puts after it) is not read again (ASan); keys that share a
 * length or words with the memo's but differ miss.
 */
static void
test_fallback_cache_memo_answers_only_for_its_key(void **state)
{
	resil_manual_clock mc;
	resil_cache *c, *c2;
	resil_args k = key("getStock", "ab");
	resil_args split = key("getStoc", "kab"); /* same bytes, moved */
	resil_args longer = key("getStock", "abc");
	resil_args other = key("getStocK", "ab");
	resil_value v = resil_value_int(7), got;
	uint64_t age = 99;
	char arg[8];
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 4, 1 << 20, 100, 1);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK); /* memo */
	assert_int_equal(resil_cache_get(c, &split, &got, NULL),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_get(c, &longer, &got, NULL),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_get(c, &other, &got, NULL),
	    RESIL_E_NOTFOUND);
	/* Removed: the memo's entry is dead. */
	assert_int_equal(resil_cache_get(c, &k, &got, NULL), RESIL_OK);
	assert_int_equal(resil_cache_remove(c, &k), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k, &got, NULL), RESIL_E_NOTFOUND);
	resil_manual_clock_set(&mc, 5);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_manual_clock_set(&mc, 9);
	assert_int_equal(resil_cache_get(c, &k, &got, &age), RESIL_OK);
	assert_int_equal(age, 4);
	/* Evicted and freed: 40 other keys through 4 slots retire (and
	 * free) it; the memo's generation is gone, its entry not read. */
	for (i = 0; i < 40; i++) {
		snprintf(arg, sizeof(arg), "k%d", i);
		resil_args o = key("getStock", arg);

		assert_int_equal(resil_cache_put(c, &o, &v), RESIL_OK);
		assert_int_equal(resil_cache_put(c, &o, &v), RESIL_OK);
	}
	assert_int_equal(resil_cache_get(c, &k, &got, NULL), RESIL_E_NOTFOUND);
	resil_manual_clock_set(&mc, 20);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_manual_clock_set(&mc, 23);
	assert_int_equal(resil_cache_get(c, &k, &got, &age), RESIL_OK);
	assert_int_equal(age, 3);
	assert_int_equal(got.u.i, 7);
	/* Another cache (the memo is this one's) misses; so does a cache
	 * made after this one is freed, wherever it lands. */
	c2 = new_cache(&mc, 4, 1 << 20, 100, 1);
	assert_int_equal(resil_cache_get(c2, &k, &got, NULL), RESIL_E_NOTFOUND);
	resil_cache_free(c);
	c = new_cache(&mc, 4, 1 << 20, 100, 1);
	assert_int_equal(resil_cache_get(c, &k, &got, NULL), RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_put(c2, &k, &v), RESIL_OK);
	resil_cache_clear(c2); /* every entry dropped at once */
	assert_int_equal(resil_cache_get(c2, &k, &got, NULL), RESIL_E_NOTFOUND);
	resil_cache_free(c);
	resil_cache_free(c2);
}

static void
test_fallback_cache_same_value_put_restamps_in_place(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args x = key("m", "x");
	resil_value s, neg, zero = resil_value_double(0.0), got;
	resil_cache_stats st;
	uint64_t age = 99;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	/* The value the key holds already: the entry keeps its place
	 * (a is still the oldest, so d evicts a, where a replacement
	 * would have moved it behind c and evicted b). */
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 1);
	put_int(c, "a");
	put_int(c, "b");
	put_int(c, "c");
	put_int(c, "a");
	put_int(c, "d");
	assert_false(held(c, "a"));
	assert_true(held(c, "b"));
	assert_true(held(c, "c"));
	assert_true(held(c, "d"));
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.evictions, 1);
	resil_cache_free(c);

	/* ... and its age starts again from that put. */
	c = new_cache(&mc, 10, 1 << 20, 10, 1);
	assert_int_equal(resil_value_string(&s, "widget", 6, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &x, &s), RESIL_OK);
	resil_manual_clock_set(&mc, 8);
	assert_int_equal(resil_cache_put(c, &x, &s), RESIL_OK);
	resil_manual_clock_set(&mc, 15);
	assert_int_equal(resil_cache_get(c, &x, &got, &age), RESIL_OK);
	assert_int_equal(age, 7);
	assert_string_equal(got.u.s.ptr, "widget");
	resil_value_free(&got);
	resil_value_free(&s);
	/* Bit for bit: -0.0 is not the 0.0 held, so it replaces it. */
	neg = resil_value_double(-0.0);
	assert_int_equal(resil_cache_put(c, &x, &zero), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &x, &neg), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &x, &got, NULL), RESIL_OK);
	assert_true(got.type == RESIL_VALUE_DOUBLE && got.u.d == 0.0 &&
	    signbit(got.u.d));
	/* The NULL sentinel is the null value. */
	assert_int_equal(resil_cache_put(c, &x, NULL), RESIL_OK);
	resil_value_init(&neg);
	assert_int_equal(resil_cache_put(c, &x, &neg), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &x, &got, NULL), RESIL_OK);
	assert_int_equal(got.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 1);
	resil_cache_free(c);
}

static void
test_fallback_cache_byte_bound_follows_the_clock(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args d = key("m", "d");
	resil_value small = resil_value_int(1), big;
	resil_cache_stats st;
	char blob[48];
	size_t cs, cd;

	(void)state;
	memset(blob, 'x', sizeof(blob));
	resil_manual_clock_init(&mc, 0);
	assert_int_equal(
	    resil_value_bytes(&big, blob, sizeof(blob), NULL), RESIL_OK);
	cs = resil_cache_entry_charge(&d, &small);
	cd = resil_cache_entry_charge(&d, &big);
	assert_true(cd > cs && cd <= 2 * cs);
	c = new_cache(&mc, 100, 3 * cs, RESIL_CACHE_NO_AGE_LIMIT, 1);
	put_int(c, "a");
	put_int(c, "b");
	put_int(c, "c");
	assert_true(held(c, "b"));
	/* d needs more than one small entry's room: the hand evicts a,
	 * passes b, evicts c. */
	assert_int_equal(resil_cache_put(c, &d, &big), RESIL_OK);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.bytes, cs + cd);
	assert_int_equal(st.evictions, 2);
	assert_false(held(c, "a"));
	assert_false(held(c, "c"));
	assert_true(held(c, "b"));
	assert_true(held(c, "d"));
	resil_value_free(&big);
	resil_cache_free(c);
}

static void
test_fallback_cache_evicts_at_byte_bound(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a = key("m", "a"), b = key("m", "b"), cc = key("m", "c");
	resil_value s, got;
	resil_cache_stats st;
	size_t charge;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	assert_int_equal(
	    resil_value_string(&s, "0123456789", 10, NULL), RESIL_OK);
	charge = resil_cache_entry_charge(&a, &s);
	assert_true(charge > 10);
	/* Room for two entries and a bit, not three. */
	c = new_cache(
	    &mc, 100, 2 * charge + charge / 2, RESIL_CACHE_NO_AGE_LIMIT, 1);
	assert_int_equal(resil_cache_put(c, &a, &s), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &b, &s), RESIL_OK);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.bytes, 2 * charge);
	assert_int_equal(resil_cache_put(c, &cc, &s), RESIL_OK);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.bytes, 2 * charge);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(resil_cache_get(c, &a, &got, NULL), RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_get(c, &cc, &got, NULL), RESIL_OK);
	assert_string_equal(got.u.s.ptr, "0123456789");
	resil_value_free(&got);
	resil_value_free(&s);
	resil_cache_free(c);
}

static void
test_fallback_cache_refuses_entry_bigger_than_bound(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a = key("m", "a");
	resil_value small = resil_value_int(1), big, got;
	char blob[600];

	(void)state;
	memset(blob, 'x', sizeof(blob));
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 10, 512, RESIL_CACHE_NO_AGE_LIMIT, 1);
	assert_int_equal(resil_cache_put(c, &a, &small), RESIL_OK);
	assert_int_equal(
	    resil_value_bytes(&big, blob, sizeof(blob), NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &a, &big), RESIL_E_LIMITED);
	/* The older answer of the key is dropped with it. */
	assert_int_equal(resil_cache_get(c, &a, &got, NULL), RESIL_E_NOTFOUND);
	resil_value_free(&big);
	resil_cache_free(c);
}

static void
test_fallback_cache_owns_its_copies(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	char arg[8] = "sku-1";
	resil_args k = key("getName", arg);
	resil_value s, got1, got2;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 10, 4096, RESIL_CACHE_NO_AGE_LIMIT, 4);
	assert_int_equal(resil_value_string(&s, "widget", 6, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &s), RESIL_OK);
	s.u.s.ptr[0] = 'W'; /* the caller's value changes later */
	resil_value_free(&s);
	assert_int_equal(resil_cache_get(c, &k, &got1, NULL), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k, &got2, NULL), RESIL_OK);
	assert_string_equal(got1.u.s.ptr, "widget");
	/* Hits share the cache's bytes (issue 39: no copy per hit). */
	assert_ptr_equal(got1.u.s.ptr, got2.u.s.ptr);
	resil_value_free(&got1);
	resil_value_free(&got2);
	/* The key bytes were copied too. */
	memcpy(arg, "sku-9", 6);
	assert_int_equal(
	    resil_cache_get(c, &k, &got1, NULL), RESIL_E_NOTFOUND);
	memcpy(arg, "sku-1", 6);
	assert_int_equal(resil_cache_remove(c, &k), RESIL_OK);
	assert_int_equal(resil_cache_remove(c, &k), RESIL_E_NOTFOUND);
	resil_cache_free(c);
}

/* A hit's value holds the cache's bytes, not a copy: it stays valid and
 * unchanged after its entry is replaced, evicted or removed and after the
 * cache is freed; the last resil_value_free() gives the memory back. */
static void
test_fallback_cache_hit_outlives_its_entry(void **state)
{
	resil_manual_clock mc;
	resil_cache_config cfg = resil_cache_config_default();
	resil_args k = key("getName", "sku-1");
	resil_args k2 = key("getName", "sku-2");
	resil_value w, g, got[4];
	resil_cache *c;
	fail_alloc fa;
	uint64_t age = 9;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.max_entries = 1;
	cfg.shards = 1;
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_value_string(&w, "widget", 6, NULL), RESIL_OK);
	assert_int_equal(resil_value_string(&g, "gadget", 6, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &w), RESIL_OK);
	/* Replaced by a put of another value. */
	assert_int_equal(resil_cache_get(c, &k, &got[0], &age), RESIL_OK);
	assert_int_equal(age, 0);
	assert_int_equal(resil_cache_put(c, &k, &g), RESIL_OK);
	/* Evicted by another key (one entry). */
	assert_int_equal(resil_cache_get(c, &k, &got[1], NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k2, &w), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k, &got[3], NULL),
	    RESIL_E_NOTFOUND);
	/* Removed, then the cache freed. */
	assert_int_equal(resil_cache_get(c, &k2, &got[2], NULL), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k2, &got[3], NULL), RESIL_OK);
	assert_int_equal(resil_cache_remove(c, &k2), RESIL_OK);
	resil_cache_free(c);
	assert_int_equal(got[0].type, RESIL_VALUE_STRING);
	assert_string_equal(got[0].u.s.ptr, "widget");
	assert_string_equal(got[1].u.s.ptr, "gadget");
	assert_string_equal(got[2].u.s.ptr, "widget");
	assert_int_equal(got[2].u.s.len, 6);
	/* Three entries still held by four values. */
	assert_int_equal(fail_alloc_live(&fa), 3);
	resil_value_free(&got[2]);
	assert_int_equal(fail_alloc_live(&fa), 3);
	resil_value_free(&got[3]);
	assert_int_equal(fail_alloc_live(&fa), 2);
	/* A copy of a served value is the caller's own. */
	assert_int_equal(resil_value_copy(&got[2], &got[0], NULL), RESIL_OK);
	assert_ptr_not_equal(got[2].u.s.ptr, got[0].u.s.ptr);
	resil_value_free(&got[0]);
	resil_value_free(&got[1]);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
	assert_string_equal(got[2].u.s.ptr, "widget");
	resil_value_free(&got[2]);
	resil_value_free(&w);
	resil_value_free(&g);
}

/* Replaced entries leave the bounds at once and their memory waits for
 * a batch: the 16th retired entry of a shard frees all 16 (one wait for
 * the readers instead of one per put), and the stats count the waiting
 * ones in memory. Until issue 39 each put freed what it replaced. */
static void
test_fallback_cache_replaced_entries_freed_in_batches(void **state)
{
	resil_manual_clock mc;
	resil_cache_config cfg = resil_cache_config_default();
	resil_args k = key("getName", "sku-1");
	resil_cache_stats st0, st;
	resil_cache *c;
	fail_alloc fa;
	uint64_t live0;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.shards = 1;
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	{
		resil_value v = resil_value_int(0);

		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	}
	live0 = fail_alloc_live(&fa); /* cache, shards, table, one entry */
	assert_int_equal(resil_cache_stats_get(c, &st0), RESIL_OK);
	for (i = 1; i <= 15; i++) {
		resil_value v = resil_value_int(i);

		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
		assert_int_equal(fail_alloc_live(&fa), live0 + (uint64_t)i);
	}
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, st0.bytes);
	assert_int_equal(st.memory, st0.memory + 15 * st0.bytes);
	{
		resil_value v = resil_value_int(16);

		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	}
	assert_int_equal(fail_alloc_live(&fa), live0);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.memory, st0.memory);
	/* A remove retires too; free gives everything back. */
	assert_int_equal(resil_cache_remove(c, &k), RESIL_OK);
	assert_int_equal(fail_alloc_live(&fa), live0);
	resil_cache_free(c);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
}

/* Re-stamps (puts of the value held) and misses are reads that serve
 * nothing: the hit count stays exact, and the writers that retire
 * replaced entries afterwards still see every such read ended. */
static void
test_fallback_cache_restamps_are_not_hits(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_cache_stats st;
	resil_args k = key("getStock", "sku-1");
	resil_args other = key("getStock", "sku-2");
	resil_value v, out;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 1 << 16, 100, 1);
	for (i = 0; i < 5; i++) {
		v = resil_value_int(1);
		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	}
	for (i = 0; i < 3; i++) {
		assert_int_equal(resil_cache_get(c, &k, &out, NULL), RESIL_OK);
		resil_value_free(&out);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(resil_cache_get(c, &other, &out, NULL),
		    RESIL_E_NOTFOUND);
	/* Replacements retire entries in batches (each waits for the
	 * reads above to have ended). */
	for (i = 0; i < 40; i++) {
		v = resil_value_int(i + 2);
		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	}
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.hits, 3);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.entries, 1);
	resil_cache_free(c);
}

/* The internal entry points with a kept method handle (no strlen, no
 * method hash per call) and the public ones address the same keys, with
 * the same semantics (inclusive age, NULL a value) and checks. */
static void
test_fallback_cache_method_handle_same_keys(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil__cache_method m, m2;
	resil_args k = key("getStock", "sku-1");
	resil_args k2 = key("getStockLevel", "sku-1");
	resil_value v, out;
	uint64_t age = 99;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 1 << 16, 10, 4);
	resil__cache_method_init(&m, "getStock");
	resil__cache_method_init(&m2, "getStockLevel");
	assert_int_equal(m.len, 8);

	/* Put through the handle, found through the public get. */
	v = resil_value_int(5);
	assert_int_equal(resil__cache_put_m(c, &m, "sku-1", 5, &v), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k, &out, &age), RESIL_OK);
	assert_int_equal(out.u.i, 5);
	assert_int_equal(age, 0);
	/* Another method, or the split moved, is another key. */
	assert_int_equal(resil_cache_get(c, &k2, &out, NULL),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil__cache_get_m(c, &m, "sku-1x", 6, &out, NULL),
	    RESIL_E_NOTFOUND);
	/* Put public (NULL: a value), found through the handle, age
	 * inclusive. */
	assert_int_equal(resil_cache_put(c, &k2, NULL), RESIL_OK);
	resil_manual_clock_advance(&mc, 10);
	assert_int_equal(
	    resil__cache_get_m(c, &m2, "sku-1", 5, &out, &age), RESIL_OK);
	assert_int_equal(out.type, RESIL_VALUE_NULL);
	assert_int_equal(age, 10);
	assert_int_equal(
	    resil__cache_get_m(c, &m, "sku-1", 5, &out, &age), RESIL_OK);
	assert_int_equal(out.u.i, 5);
	resil_manual_clock_advance(&mc, 1);
	assert_int_equal(resil__cache_get_m(c, &m, "sku-1", 5, &out, NULL),
	    RESIL_E_NOTFOUND);
	/* A re-stamp through the handle. */
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_manual_clock_advance(&mc, 4);
	assert_int_equal(resil__cache_put_m(c, &m, "sku-1", 5, &v), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k, &out, &age), RESIL_OK);
	assert_int_equal(age, 0);
	/* Checks. */
	assert_int_equal(resil__cache_put_m(NULL, &m, "x", 1, &v),
	    RESIL_E_INVAL);
	assert_int_equal(resil__cache_put_m(c, NULL, "x", 1, &v),
	    RESIL_E_INVAL);
	assert_int_equal(resil__cache_put_m(c, &m, NULL, 1, &v),
	    RESIL_E_INVAL);
	assert_int_equal(resil__cache_get_m(c, &m, "x", 1, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil__cache_put_m(c, &m, NULL, 0, &v), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &(resil_args) { "getStock", NULL,
	                     0 }, &out, NULL),
	    RESIL_OK);
	resil_cache_free(c);
}

/* A put compares the value it brings with the one held (equal: a
 * re-stamp, else a replacement): for every length around the compare's
 * chunk sizes, a difference in any one byte is a new value, and equal
 * bytes only re-stamp. */
static void
test_fallback_cache_value_compare_sees_every_byte(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args k = key("getName", "sku-1");
	char a[80], b[80];
	resil_value va, vb, out;
	uint64_t age;
	size_t n, i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 1 << 16, 1000, 1);
	for (n = 1; n <= 72; n++) {
		for (i = 0; i < n; i++) {
			memset(a, 'x', sizeof(a));
			memcpy(b, a, sizeof(b));
			b[i] = 'y';
			va = (resil_value) { .type = RESIL_VALUE_STRING };
			va.u.s.ptr = a;
			va.u.s.len = n;
			vb = va;
			vb.u.s.ptr = b;
			assert_int_equal(resil_cache_put(c, &k, &va), RESIL_OK);
			resil_manual_clock_advance(&mc, 1);
			/* Same bytes elsewhere: a re-stamp. */
			assert_int_equal(resil_cache_put(c, &k, &va), RESIL_OK);
			assert_int_equal(
			    resil_cache_get(c, &k, &out, &age), RESIL_OK);
			assert_int_equal(age, 0);
			resil_value_free(&out);
			resil_manual_clock_advance(&mc, 1);
			assert_int_equal(resil_cache_put(c, &k, &vb), RESIL_OK);
			assert_int_equal(
			    resil_cache_get(c, &k, &out, &age), RESIL_OK);
			assert_int_equal(out.u.s.len, n);
			assert_memory_equal(out.u.s.ptr, b, n);
			resil_value_free(&out);
		}
	}
	resil_cache_free(c);
}

static void
test_fallback_cache_memory_is_reported(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_cache_stats st0, st1, st2;
	resil_value v = resil_value_int(3);
	char name[16];
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 1000, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 8);
	assert_int_equal(resil_cache_stats_get(c, &st0), RESIL_OK);
	assert_int_equal(st0.entries, 0);
	assert_int_equal(st0.bytes, 0);
	assert_true(st0.memory > 0);
	assert_int_equal(st0.shards, 8);
	for (i = 0; i < 100; i++) {
		resil_args k;

		snprintf(name, sizeof(name), "k%d", i);
		k = key("m", name);
		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	}
	assert_int_equal(resil_cache_stats_get(c, &st1), RESIL_OK);
	assert_int_equal(st1.entries, 100);
	assert_true(st1.bytes >= 100 *
	        resil_cache_entry_charge(&(resil_args) { "m", "k0", 2 }, &v));
	assert_true(st1.memory > st0.memory + st1.bytes);
	resil_cache_clear(c);
	assert_int_equal(resil_cache_stats_get(c, &st2), RESIL_OK);
	assert_int_equal(st2.entries, 0);
	assert_int_equal(st2.memory, st0.memory);
	resil_cache_free(c);
}

static void
test_fallback_cache_never_exceeds_bound_with_shards(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_cache_stats st;
	resil_value v = resil_value_int(3);
	char name[16];
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	/* 3 entries cannot feed 16 shards: fewer are used. */
	c = new_cache(&mc, 3, 1 << 20, RESIL_CACHE_NO_AGE_LIMIT, 16);
	for (i = 0; i < 200; i++) {
		resil_args k;

		snprintf(name, sizeof(name), "k%d", i);
		k = key("m", name);
		assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
		assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
		assert_true(st.entries <= 3);
	}
	assert_int_equal(st.shards, 2);
	assert_true(st.entries >= 2);
	assert_int_equal(st.evictions, 200 - st.entries);
	resil_cache_free(c);
}

static void
test_fallback_cache_config_errors_name_the_field(void **state)
{
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c = NULL;
	resil_diag d;

	(void)state;
	cfg.max_entries = 0;
	assert_int_equal(resil_cache_new(&c, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "cache.max_entries: 0 is out of range 1..4294967296");
	cfg = resil_cache_config_default();
	cfg.shards = 3;
	assert_int_equal(resil_cache_new(&c, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "cache.shards: 3 is not a power of two in 1..256");
	cfg.shards = 512;
	assert_int_equal(resil_cache_new(&c, &cfg, &d), RESIL_E_INVAL);
	cfg = resil_cache_config_default();
	cfg.max_bytes = 0;
	assert_int_equal(resil_cache_new(&c, &cfg, &d), RESIL_E_INVAL);
	assert_true(
	    strncmp(d.msg, "cache.max_bytes: 0 is out of range 1..", 38) == 0);
	cfg = resil_cache_config_default();
	cfg.size = 1;
	assert_int_equal(resil_cache_new(&c, &cfg, &d), RESIL_E_INVAL);
	assert_true(strncmp(d.msg,
	                "cache.size: 1 is not a known resil_cache_config size",
	                52) == 0);
	assert_null(c);
	assert_int_equal(resil_cache_new(NULL, &cfg, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_cache_put(NULL, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cache_get(NULL, NULL, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_cache_stats_get(NULL, NULL), RESIL_E_INVAL);
	resil_cache_free(NULL);
	resil_cache_clear(NULL);
}

static void
test_fallback_cache_nomem_at_every_allocation(void **state)
{
	uint64_t n;
	int done = 0;

	(void)state;
	for (n = 1; !done && n < 100; n++) {
		fail_alloc fa;
		resil_manual_clock mc;
		resil_cache_config cfg = resil_cache_config_default();
		resil_cache *c = NULL;
		resil_args k = key("getName", "sku");
		resil_value s, got;
		resil_err e1, e2 = RESIL_OK, e3 = RESIL_OK;

		resil_manual_clock_init(&mc, 0);
		cfg.clock = resil_manual_clock_hook(&mc);
		cfg.alloc = fail_alloc_init(&fa, n);
		cfg.shards = 2;
		assert_int_equal(
		    resil_value_string(&s, "widget", 6, NULL), RESIL_OK);
		e1 = resil_cache_new(&c, &cfg, NULL);
		if (e1 == RESIL_OK) {
			e2 = resil_cache_put(c, &k, &s);
			if (e2 == RESIL_OK) {
				e3 = resil_cache_get(c, &k, &got, NULL);
				if (e3 == RESIL_OK) {
					assert_string_equal(
					    got.u.s.ptr, "widget");
					resil_value_free(&got);
					done = fa.failures == 0;
				}
			} else {
				/* a failed put leaves the cache as it was */
				assert_int_equal(
				    resil_cache_get(c, &k, &got, NULL),
				    RESIL_E_NOTFOUND);
			}
			resil_cache_free(c);
		}
		assert_true(e1 == RESIL_OK || e1 == RESIL_E_NOMEM);
		assert_true(e2 == RESIL_OK || e2 == RESIL_E_NOMEM);
		assert_true(e3 == RESIL_OK || e3 == RESIL_E_NOMEM);
		resil_value_free(&s);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
	assert_true(done);
}

static void
test_fallback_cache_failed_put_keeps_the_cache(void **state)
{
	uint64_t n;
	int stored = 0;

	(void)state;
	for (n = 1; n <= 6; n++) {
		fail_alloc fa;
		resil_manual_clock mc;
		resil_cache_config cfg = resil_cache_config_default();
		resil_cache *c = NULL;
		resil_args k1 = key("getName", "1"), k2 = key("getName", "2");
		resil_value old, neu, got;
		resil_err err;

		resil_manual_clock_init(&mc, 0);
		cfg.clock = resil_manual_clock_hook(&mc);
		cfg.alloc = fail_alloc_init(&fa, 0);
		cfg.shards = 1;
		cfg.max_entries = 1; /* k2 evicts k1 when it gets in */
		assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
		assert_int_equal(
		    resil_value_string(&old, "old", 3, NULL), RESIL_OK);
		assert_int_equal(
		    resil_value_string(&neu, "new", 3, NULL), RESIL_OK);
		assert_int_equal(resil_cache_put(c, &k1, &old), RESIL_OK);
		/* the same key, then another key, with the nth allocation
		 * from here failing */
		fa.fail_at = fa.allocs + n;
		err = resil_cache_put(c, &k1, &neu);
		if (err == RESIL_E_NOMEM) {
			assert_int_equal(
			    resil_cache_get(c, &k1, &got, NULL), RESIL_OK);
			assert_string_equal(got.u.s.ptr, "old");
			resil_value_free(&got);
		} else {
			assert_int_equal(err, RESIL_OK);
			err = resil_cache_put(c, &k2, &neu);
			if (err == RESIL_E_NOMEM) {
				assert_int_equal(
				    resil_cache_get(c, &k1, &got, NULL),
				    RESIL_OK);
				assert_string_equal(got.u.s.ptr, "new");
				resil_value_free(&got);
			} else {
				assert_int_equal(err, RESIL_OK);
				assert_int_equal(
				    resil_cache_get(c, &k1, &got, NULL),
				    RESIL_E_NOTFOUND);
				stored++;
			}
		}
		resil_value_free(&old);
		resil_value_free(&neu);
		resil_cache_free(c);
		assert_int_equal(fail_alloc_live(&fa), 0);
	}
	assert_true(stored > 0);
}

/* ---- the chain ---- */

typedef struct live {
	int calls;
	int rc;
	int64_t stock;
	int null_answer;
} live;

static int
live_fn(void *ctx, const resil_args *args, resil_value *out)
{
	live *l = ctx;

	(void)args;
	l->calls++;
	if (l->rc == 0 && !l->null_answer)
		*out = resil_value_int(l->stock);
	return l->rc;
}

static resil_outcome
classify_400(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 400 ? RESIL_OUTCOME_BUSINESS : RESIL_OUTCOME_FAILURE;
}

typedef struct user {
	int calls;
	int answer;
	char *trace; /* appends its tag when asked */
	char tag;
} user;

static resil_verdict
user_fn(void *ctx, const resil_args *args, const resil_failure *f,
    resil_result *out)
{
	user *u = ctx;
	size_t n = strlen(u->trace);

	(void)args;
	(void)f;
	u->calls++;
	u->trace[n] = u->tag;
	u->trace[n + 1] = '\0';
	if (!u->answer)
		return RESIL_FALLBACK_PASS;
	out->err = RESIL_OK;
	out->value = resil_value_int(u->answer);
	return RESIL_FALLBACK_ANSWER;
}

static resil_mock *
new_mock(const char *spec, const char *method, const char *method_spec)
{
	resil_mock_config cfg = resil_mock_config_default();
	resil_mock *m = NULL;
	resil_diag d;

	cfg.service = SERVICE;
	cfg.spec = spec;
	if (resil_mock_new(&m, &cfg, &d) != RESIL_OK)
		fail_msg("mock: %s", d.msg);
	if (method != NULL &&
	    resil_mock_set_method(
	        m, method, RESIL_TYPE_INT, method_spec, &d) != RESIL_OK)
		fail_msg("mock method: %s", d.msg);
	return m;
}

static void
test_fallback_chain_cache_then_mock_then_unavailable(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_mock *m;
	resil_fallback *fb;
	resil_args k1 = key("getStock", "sku-1");
	resil_args k2 = key("getStock", "sku-2");
	resil_args k3 = key("getName", "sku-1");
	live l = { 0, 0, 8, 0 };
	resil_result r;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 4096, 10, 1);
	/* getStock has a fail mock; getName has none. */
	m = new_mock(NULL, "getStock", "fail:return -1");
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	assert_int_equal(resil_fallback_count(fb), 2);

	/* live success is recorded */
	assert_int_equal(
	    resil_fallback_call(fb, &k1, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 8);
	resil_result_free(&r);

	/* failure: the cache answers first */
	l.rc = 503;
	resil_manual_clock_advance(&mc, 4);
	assert_int_equal(
	    resil_fallback_call(fb, &k1, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.value.u.i, 8);
	assert_int_equal(r.age, 4);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, 503);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);

	/* a cache miss passes to the mock */
	assert_int_equal(
	    resil_fallback_call(fb, &k2, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, -1);
	resil_result_free(&r);

	/* no cache, no mock: unavailable, never a zero value */
	assert_int_equal(resil_fallback_call(fb, &k3, live_fn, &l, NULL, &r),
	    RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, 503);
	resil_result_free(&r);

	/* a stale cached value passes to the mock */
	resil_manual_clock_advance(&mc, 7); /* age 11 > 10 */
	assert_int_equal(
	    resil_fallback_call(fb, &k1, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	assert_int_equal(l.calls, 5);

	resil_fallback_free(fb);
	resil_mock_free(m);
	resil_cache_free(c);
}

/* A failing call that leaves a string behind, as a callee may before it
 * fails: the chain frees it. */
static int
fail_with_string(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	if (resil_value_string(out, "partial", 7, NULL) != RESIL_OK)
		return -1;
	return 503;
}

/* The failing call's answer writes every field of the result, whatever
 * the caller's result held before (the chain does not clear it first):
 * a cache's hit, the chain's "unavailable" and a business error. */
static void
test_fallback_failed_call_writes_every_field(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_fallback *fb;
	resil_args k = key("getStock", "sku-1");
	resil_args k2 = key("getStock", "sku-2");
	resil_value v;
	resil_result r;
	resil_classifier cls = { classify_400, NULL };
	live l = { 0, 400, 1, 0 };

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 4096, 10, 1);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_value_string(&v, "cached", 6, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_value_free(&v);
	resil_manual_clock_advance(&mc, 3);

	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(resil_fallback_call(fb, &k, fail_with_string, NULL,
	                     NULL, &r),
	    RESIL_OK);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.value.type, RESIL_VALUE_STRING);
	assert_int_equal(r.value.u.s.len, 6);
	assert_memory_equal(r.value.u.s.ptr, "cached", 6);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.age, 3);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, 503);
	assert_int_equal(r.breaker_state, -1);
	assert_int_equal(r.last_failure, RESIL_OK);
	assert_int_equal(r.last_failure_rc, 0);
	assert_null(r.error_name);
	assert_string_equal(r.endpoint, "");
	assert_string_equal(r.zone, "");
	{
		char want[RESIL_RESULT_MSG_MAX];

		snprintf(want, sizeof(want),
		    "cached value; original failure: %s (rc 503)",
		    resil_strerror(RESIL_E_CALL));
		assert_string_equal(r.message, want);
	}
	resil_result_free(&r);

	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(resil_fallback_call(fb, &k2, fail_with_string, NULL,
	                     NULL, &r),
	    RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.age, 0);
	assert_int_equal(r.cause_rc, 503);
	assert_null(r.error_name);
	assert_string_equal(r.endpoint, "");
	resil_result_free(&r);

	memset(&r, 0x5a, sizeof(r));
	assert_int_equal(resil_fallback_call(fb, &k, live_fn, &l, &cls, &r),
	    RESIL_E_BUSINESS);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.rc, 400);
	assert_int_equal(r.age, 0);
	assert_int_equal(r.cause, RESIL_OK);
	assert_null(r.error_name);
	assert_string_equal(r.zone, "");
	resil_result_free(&r);

	resil_fallback_free(fb);
	resil_cache_free(c);
}

static void
test_fallback_cached_null_answers_null(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_fallback *fb;
	resil_args k = key("findUser", "42");
	live l = { 0, 0, 0, 1 };
	resil_result r;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 4096, RESIL_CACHE_NO_AGE_LIMIT, 1);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	l.rc = 1;
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	/* another key: a miss, so unavailable */
	k = key("findUser", "43");
	assert_int_equal(resil_fallback_call(fb, &k, live_fn, &l, NULL, &r),
	    RESIL_E_UNAVAILABLE);
	resil_result_free(&r);
	resil_fallback_free(fb);
	resil_cache_free(c);
}

static void
test_fallback_no_fallback_propagates_original_error(void **state)
{
	resil_fallback *fb;
	resil_args k = key("getStock", NULL);
	resil_failure open = { RESIL_E_OPEN, 0, 0 };
	live l = { 0, 503, 0, 0 };
	resil_result r;

	(void)state;
	/* no chain at all */
	assert_int_equal(
	    resil_fallback_recover(NULL, &k, &open, &r), RESIL_E_OPEN);
	assert_int_equal(r.err, RESIL_E_OPEN);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_fallback_call(NULL, &k, live_fn, &l, NULL, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.rc, 503);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	/* an empty chain is no fallback either */
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_E_CALL);
	assert_int_equal(r.rc, 503);
	assert_int_equal(l.calls, 2);
	resil_fallback_free(fb);
}

static void
test_fallback_business_errors_never_enter_the_chain(void **state)
{
	resil_fallback *fb;
	resil_args k = key("getStock", "x");
	resil_failure biz = { RESIL_E_BUSINESS, 400, 1 };
	live l = { 0, 400, 0, 0 };
	resil_classifier cls = { classify_400, NULL };
	char trace[8] = "";
	user u = { 0, 5, trace, 'u' };
	resil_result r;

	(void)state;
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, user_fn, &u), RESIL_OK);
	assert_int_equal(resil_fallback_call(fb, &k, live_fn, &l, &cls, &r),
	    RESIL_E_BUSINESS);
	assert_int_equal(r.rc, 400);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(u.calls, 0);
	r.err = RESIL_E_MOCK; /* must stay untouched */
	assert_int_equal(
	    resil_fallback_recover(fb, &k, &biz, &r), RESIL_E_INVAL);
	assert_int_equal(r.err, RESIL_E_MOCK);
	assert_int_equal(u.calls, 0);
	/* a failure does reach the handler */
	l.rc = 500;
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, &cls, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_FALLBACK);
	assert_int_equal(r.value.u.i, 5);
	assert_int_equal(u.calls, 1);
	resil_result_free(&r);
	resil_fallback_free(fb);
}

static void
test_fallback_rejections_and_exhaustion_enter_the_chain(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_fallback *fb;
	resil_args k = key("getStock", "sku");
	resil_value v = resil_value_int(8);
	resil_failure open = { RESIL_E_OPEN, 0, 0 };
	resil_failure exhausted = { RESIL_E_RETRIES_EXHAUSTED, 503, 3 };
	resil_result r;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 16, 4096, 10, 1);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_fallback_record(fb, &k, &v), RESIL_OK);
	resil_manual_clock_advance(&mc, 3);
	assert_int_equal(resil_fallback_recover(fb, &k, &open, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.age, 3);
	assert_int_equal(r.cause, RESIL_E_OPEN);
	assert_int_equal(r.attempts, 0);
	resil_result_free(&r);
	assert_int_equal(
	    resil_fallback_recover(fb, &k, &exhausted, &r), RESIL_OK);
	assert_int_equal(r.cause, RESIL_E_RETRIES_EXHAUSTED);
	assert_int_equal(r.attempts, 3);
	resil_result_free(&r);
	resil_fallback_free(fb);
	resil_cache_free(c);
}

static void
test_fallback_handlers_are_asked_in_order(void **state)
{
	resil_fallback *fb;
	resil_args k = key("getStock", NULL);
	resil_failure f = { RESIL_E_TIMEOUT, 0, 1 };
	char trace[8] = "";
	user a = { 0, 0, trace, 'a' }, b = { 0, 7, trace, 'b' },
	     cc = { 0, 9, trace, 'c' };
	resil_result r;

	(void)state;
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, user_fn, &a), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, user_fn, &b), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, user_fn, &cc), RESIL_OK);
	assert_int_equal(resil_fallback_recover(fb, &k, &f, &r), RESIL_OK);
	assert_string_equal(trace, "ab"); /* c is never asked */
	assert_int_equal(r.value.u.i, 7);
	assert_int_equal(r.cause, RESIL_E_TIMEOUT);
	resil_result_free(&r);
	/* all pass: unavailable */
	b.answer = 0;
	cc.answer = 0;
	trace[0] = '\0';
	assert_int_equal(
	    resil_fallback_recover(fb, &k, &f, &r), RESIL_E_UNAVAILABLE);
	assert_string_equal(trace, "abc");
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.cause, RESIL_E_TIMEOUT);
	resil_result_free(&r);
	assert_int_equal(
	    resil_fallback_add_handler(fb, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_fallback_add_cache(fb, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_fallback_add_mock(NULL, NULL), RESIL_E_INVAL);
	resil_fallback_free(fb);
}

static void
test_fallback_force_mock_never_calls(void **state)
{
	resil_fallback *fb;
	resil_mock *m = new_mock("force:return 0", NULL, NULL);
	resil_args k = key("getStock", NULL);
	live l = { 0, 0, 8, 0 };
	resil_result r;
	int i;

	(void)state;
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	for (i = 0; i < 5; i++) {
		assert_int_equal(
		    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r),
		    RESIL_OK);
		assert_int_equal(r.source, RESIL_SOURCE_MOCK);
		assert_int_equal(r.value.u.i, 0);
		assert_int_equal(r.attempts, 0);
		resil_result_free(&r);
	}
	assert_int_equal(l.calls, 0);
	resil_fallback_free(fb);
	resil_mock_free(m);
}

static void
test_fallback_mock_throw_reaches_the_caller(void **state)
{
	resil_fallback *fb;
	resil_mock *m = new_mock("fail:throw", NULL, NULL);
	resil_args k = key("getStock", NULL);
	live l = { 0, 503, 0, 0 };
	char trace[8] = "";
	user u = { 0, 5, trace, 'u' };
	resil_result r;

	(void)state;
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, user_fn, &u), RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_E_MOCK);
	assert_int_equal(l.calls, 1);
	assert_int_equal(u.calls, 0); /* the mock answered, with an error */
	assert_string_equal(r.message, RESIL_MOCK_MESSAGE);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.cause_rc, 503);
	resil_result_free(&r);
	resil_fallback_free(fb);
	resil_mock_free(m);
}

/*
 * Seed 003, the inventory demo: live stock 8; the cache serves values up
 * to 10 time units old. The breaker's pause (t = 3) is played as an
 * RESIL_E_OPEN rejection, which never calls.
 */
static void
test_fallback_inventory_demo_timeline(void **state)
{
	static const struct {
		uint64_t t;
		int available; /* 1 up, 0 down, -1 rejected without a call */
		resil_source source;
		uint64_t age;
	} rows[] = {
		{ 0, 1, RESIL_SOURCE_LIVE, 0 },
		{ 1, 0, RESIL_SOURCE_CACHE, 1 },
		{ 2, 0, RESIL_SOURCE_CACHE, 2 },
		{ 3, -1, RESIL_SOURCE_CACHE, 3 },
		{ 8, 1, RESIL_SOURCE_LIVE, 0 },
		{ 9, 0, RESIL_SOURCE_CACHE, 1 },
		{ 10, 0, RESIL_SOURCE_CACHE, 2 },
		{ 18, 0, RESIL_SOURCE_CACHE, 10 },
		{ 19, 0, RESIL_SOURCE_UNAVAILABLE, 0 },
		{ 20, 0, RESIL_SOURCE_UNAVAILABLE, 0 },
	};
	resil_manual_clock mc;
	resil_cache *c;
	resil_fallback *fb;
	resil_args k = key("getStock", "sku-8");
	live l = { 0, 0, 8, 0 };
	resil_result r;
	size_t i;
	int calls = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	c = new_cache(&mc, 64, 1 << 16, 10, 4);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		resil_manual_clock_set(&mc, rows[i].t);
		if (rows[i].available < 0) {
			resil_failure open = { RESIL_E_OPEN, 0, 0 };

			resil_fallback_recover(fb, &k, &open, &r);
		} else {
			l.rc = rows[i].available ? 0 : 503;
			resil_fallback_call(fb, &k, live_fn, &l, NULL, &r);
			calls++;
		}
		assert_int_equal(r.source, rows[i].source);
		if (rows[i].source == RESIL_SOURCE_UNAVAILABLE) {
			assert_int_equal(r.err, RESIL_E_UNAVAILABLE);
			assert_int_equal(r.value.type, RESIL_VALUE_NULL);
		} else {
			assert_int_equal(r.err, RESIL_OK);
			assert_int_equal(r.value.u.i, 8);
			assert_int_equal(r.age, rows[i].age);
		}
		assert_int_equal(l.calls, calls);
		resil_result_free(&r);
	}
	resil_fallback_free(fb);
	resil_cache_free(c);
}

static void
test_fallback_config_and_null_arguments(void **state)
{
	resil_fallback_config cfg = resil_fallback_config_default();
	resil_fallback *fb = NULL;
	resil_args k = key("m", NULL);
	resil_failure ok = { RESIL_OK, 0, 0 };
	resil_result r;
	resil_diag d;
	fail_alloc fa;

	(void)state;
	cfg.size = 2;
	assert_int_equal(resil_fallback_new(&fb, &cfg, &d), RESIL_E_INVAL);
	assert_true(
	    strncmp(d.msg,
	        "fallback.size: 2 is not a known resil_fallback_config "
	        "size",
	        58) == 0);
	assert_null(fb);
	assert_int_equal(resil_fallback_new(NULL, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fallback_recover(NULL, &k, &ok, &r), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fallback_recover(NULL, NULL, &ok, &r), RESIL_E_INVAL);
	assert_int_equal(resil_fallback_call(NULL, &k, NULL, NULL, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(resil_fallback_record(NULL, &k, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_fallback_count(NULL), 0);
	resil_fallback_free(NULL);
	/* out of memory while adding leaves the chain as it was */
	cfg = resil_fallback_config_default();
	cfg.alloc = fail_alloc_init(&fa, 3);
	assert_int_equal(resil_fallback_new(&fb, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, (resil_fallback_fn)user_fn, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, user_fn, NULL), RESIL_E_NOMEM);
	assert_int_equal(resil_fallback_count(fb), 1);
	resil_fallback_free(fb);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

/* Issue 29: a chain whose mocks have no force: spec skips their lookup
 * on every pass (a flag test), and the flag follows the mock's settings
 * made after the chain was built, both ways. */
static void
test_fallback_force_flag_follows_the_mock(void **state)
{
	resil_fallback *fb;
	resil_mock *m = new_mock("fail:return 0", NULL, NULL);
	resil_mock *m2 = new_mock("fail:return 1", NULL, NULL);
	resil_args k = key("getStock", NULL);
	resil_args other = key("getPrice", NULL);
	live l = { 0, 0, 8, 0 };
	resil_result r;

	(void)state;
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m2), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	/* No force anywhere: live. */
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 8);
	resil_result_free(&r);
	/* The second mock's method turns force after the chain was built. */
	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "force:return 5", NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 5);
	resil_result_free(&r);
	assert_int_equal(l.calls, 1);
	/* Another method of that mock still calls (its spec is fail:). */
	assert_int_equal(
	    resil_fallback_call(fb, &other, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	assert_int_equal(l.calls, 2);
	/* Declared again as fail:, the force is gone. */
	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "fail:return 6", NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	assert_int_equal(l.calls, 3);
	/* A failure still reaches the first mock that answers. */
	l.rc = 7;
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 1);
	resil_result_free(&r);
	resil_fallback_free(fb);
	resil_mock_free(m);
	resil_mock_free(m2);
}

/* The lean path (one mock stage, no cache, the default classifier): the
 * one word it tests follows the mock's force: specs made after the chain
 * was built; a user's classifier, a failure and a chain without stages
 * answer as in full. */
static resil_outcome
classify_zero_fails(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc == 0 ? RESIL_OUTCOME_FAILURE : RESIL_OUTCOME_SUCCESS;
}

static void
test_fallback_lean_path_follows_the_one_mock(void **state)
{
	resil_fallback *fb, *empty;
	resil_mock *m = new_mock("fail:return 0", NULL, NULL);
	resil_args k = key("getStock", NULL);
	resil_classifier inv = { classify_zero_fails, NULL };
	live l = { 0, 0, 8, 0 };
	resil_result r;

	(void)state;
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 8);
	assert_int_equal(r.attempts, 1);
	assert_int_equal(r.breaker_state, -1);
	assert_string_equal(r.message, "");
	resil_result_free(&r);
	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "force:return 5", NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 5);
	resil_result_free(&r);
	assert_int_equal(l.calls, 1);
	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "fail:return 6", NULL),
	    RESIL_OK);
	/* A user's classifier is asked: 0 fails, the mock answers. */
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, &inv, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 6);
	resil_result_free(&r);
	assert_int_equal(l.calls, 2);
	/* A failure goes down the chain. */
	l.rc = 7;
	assert_int_equal(
	    resil_fallback_call(fb, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 6);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, 7);
	resil_result_free(&r);
	/* A chain without stages: a success live, a failure's error
	 * stands (as the callee's: source live, its rc). */
	assert_int_equal(resil_fallback_new(&empty, NULL, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fallback_call(empty, &k, live_fn, &l, NULL, &r),
	    RESIL_E_CALL);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.rc, 7);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	l.rc = 0;
	assert_int_equal(
	    resil_fallback_call(empty, &k, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.rc, 0);
	resil_result_free(&r);
	/* Bad arguments are refused on the lean path too. */
	assert_int_equal(resil_fallback_call(fb, NULL, live_fn, &l, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(resil_fallback_call(fb, &k, NULL, &l, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(resil_fallback_call(fb, &k, live_fn, &l, NULL, NULL),
	    RESIL_E_INVAL);
	resil_fallback_free(empty);
	resil_fallback_free(fb);
	resil_mock_free(m);
}

/* The live call of the first-cache test: fails with rc 5, leaving a
 * string when ctx says so (the general path frees it first). */
static int
fail5_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)args;
	if (ctx != NULL &&
	    resil_value_string(out, "left", 4, NULL) != RESIL_OK)
		fail_msg("value");
	return 5;
}

/* Issue 39: a chain whose first stage is a cache ([cache, mock]) asks it
 * straight from the call's failure: the same answer, age and message as
 * resil_fallback_recover() gives, the age limit inclusive, one miss
 * counted when it has nothing (the mock then answers), a served string
 * that outlives the cache. */
static void
test_fallback_call_first_cache_stage(void **state)
{
	static const char v64[] =
	    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	resil_manual_clock mc;
	resil_cache *c;
	resil_mock *m;
	resil_fallback *fb;
	resil_cache_stats st;
	resil_args k = key("getStock", "sku-1");
	resil_failure f = { RESIL_E_CALL, 5, 1 };
	resil_value v;
	resil_result r, want;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 100);
	c = new_cache(&mc, 16, 1 << 16, 10, 1);
	m = new_mock("fail:return 7", "getStock", NULL);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);

	/* Nothing cached: one miss, the mock's answer. */
	assert_int_equal(
	    resil_fallback_call(fb, &k, fail5_fn, NULL, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 7);
	resil_result_free(&r);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits, 0);

	/* Cached at 100 (the manual clock's word); asked at 110: age 10,
	 * the limit, still served; twice, through the memo. */
	assert_int_equal(resil_value_string(&v, v64, 64, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK); /* re-stamp */
	resil_manual_clock_advance(&mc, 10);
	assert_int_equal(resil_fallback_recover(fb, &k, &f, &want), RESIL_OK);
	for (i = 0; i < 3; i++) {
		assert_int_equal(resil_fallback_call(fb, &k, fail5_fn,
		                     i == 2 ? (void *)&v : NULL, NULL, &r),
		    RESIL_OK);
		assert_int_equal(r.source, RESIL_SOURCE_CACHE);
		assert_int_equal(r.err, RESIL_OK);
		assert_int_equal(r.age, 10);
		assert_int_equal(r.cause, RESIL_E_CALL);
		assert_int_equal(r.cause_rc, 5);
		assert_int_equal(r.attempts, 1);
		assert_int_equal(r.rc, 0);
		assert_int_equal(r.breaker_state, -1);
		assert_int_equal(r.value.type, RESIL_VALUE_STRING);
		assert_int_equal(r.value.u.s.len, 64);
		assert_memory_equal(r.value.u.s.ptr, v64, 64);
		assert_string_equal(r.message, want.message);
		if (i < 2)
			resil_result_free(&r);
	}
	resil_result_free(&want);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits, 4);

	/* The last answer outlives the cache and the chain. */
	resil_fallback_free(fb);
	resil_cache_free(c);
	assert_memory_equal(r.value.u.s.ptr, v64, 64);
	resil_result_free(&r);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);

	/* Age 11: past the limit, dropped, the mock answers. */
	c = new_cache(&mc, 16, 1 << 16, 10, 1);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k, &v), RESIL_OK);
	resil_manual_clock_advance(&mc, 11);
	assert_int_equal(
	    resil_fallback_call(fb, &k, fail5_fn, NULL, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.stale, 1);
	assert_int_equal(st.entries, 0);
	resil_fallback_free(fb);
	resil_cache_free(c);
	resil_mock_free(m);
	resil_value_free(&v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback_cache_null_is_not_a_miss),
		cmocka_unit_test(test_fallback_lean_path_follows_the_one_mock),
		cmocka_unit_test(test_fallback_cache_age_limit_is_inclusive),
		cmocka_unit_test(
		    test_fallback_cache_evicts_lru_at_entry_bound),
		cmocka_unit_test(test_fallback_cache_evicts_at_byte_bound),
		cmocka_unit_test(
		    test_fallback_cache_second_chance_is_spent_once),
		cmocka_unit_test(
		    test_fallback_cache_all_referenced_evicts_the_oldest),
		cmocka_unit_test(
		    test_fallback_cache_replaced_entry_goes_to_the_back),
		cmocka_unit_test(
		    test_fallback_cache_byte_bound_follows_the_clock),
		cmocka_unit_test(
		    test_fallback_cache_same_value_put_restamps_in_place),
		cmocka_unit_test(
		    test_fallback_cache_memo_answers_only_for_its_key),
		cmocka_unit_test(
		    test_fallback_cache_refuses_entry_bigger_than_bound),
		cmocka_unit_test(test_fallback_cache_owns_its_copies),
		cmocka_unit_test(test_fallback_cache_hit_outlives_its_entry),
		cmocka_unit_test(
		    test_fallback_cache_replaced_entries_freed_in_batches),
		cmocka_unit_test(test_fallback_cache_memory_is_reported),
		cmocka_unit_test(
		    test_fallback_cache_value_compare_sees_every_byte),
		cmocka_unit_test(
		    test_fallback_cache_method_handle_same_keys),
		cmocka_unit_test(test_fallback_cache_restamps_are_not_hits),
		cmocka_unit_test(
		    test_fallback_cache_never_exceeds_bound_with_shards),
		cmocka_unit_test(
		    test_fallback_cache_config_errors_name_the_field),
		cmocka_unit_test(
		    test_fallback_cache_nomem_at_every_allocation),
		cmocka_unit_test(
		    test_fallback_cache_failed_put_keeps_the_cache),
		cmocka_unit_test(
		    test_fallback_chain_cache_then_mock_then_unavailable),
		cmocka_unit_test(test_fallback_cached_null_answers_null),
		cmocka_unit_test(
		    test_fallback_failed_call_writes_every_field),
		cmocka_unit_test(
		    test_fallback_no_fallback_propagates_original_error),
		cmocka_unit_test(
		    test_fallback_business_errors_never_enter_the_chain),
		cmocka_unit_test(
		    test_fallback_rejections_and_exhaustion_enter_the_chain),
		cmocka_unit_test(test_fallback_handlers_are_asked_in_order),
		cmocka_unit_test(test_fallback_force_mock_never_calls),
		cmocka_unit_test(test_fallback_force_flag_follows_the_mock),
		cmocka_unit_test(test_fallback_mock_throw_reaches_the_caller),
		cmocka_unit_test(test_fallback_inventory_demo_timeline),
		cmocka_unit_test(test_fallback_config_and_null_arguments),
		cmocka_unit_test(test_fallback_call_first_cache_stage),
	};

	return cmocka_run_group_tests_name("fallback", tests, NULL, NULL);
}

/*
 * The cache's per-thread memo of its last key (issue 39, turn 5): a call
 * whose arguments are the memo's key is re-stamped or served without its
 * key being measured or hashed (lib/fallback_cache.c, memo_fast()). These
 * tests give the memo what would fool a cheaper check: the same pointers
 * with other bytes, a method that ends at a page's last byte, lengths that
 * differ where the words agree, values that change under it, and the age
 * limit's and the NULL sentinel's exact ticks through it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/fallback.h>
#include <resil/pipeline.h>

#include "fallback_internal.h"

static resil_cache *
new_cache(resil_manual_clock *mc, uint64_t max_age)
{
	resil_cache_config cfg = resil_cache_config_default();
	resil_cache *c = NULL;

	cfg.max_age = max_age;
	cfg.clock = resil_manual_clock_hook(mc);
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	return c;
}

/* The int the cache holds for (method, arg), or -1 for none. */
static int64_t
held(resil_cache *c, const char *method, const void *arg, size_t len)
{
	resil_args a;
	resil_value v;
	int64_t i;

	a.method = method;
	a.data = arg;
	a.len = len;
	if (resil_cache_get(c, &a, &v, NULL) != RESIL_OK)
		return -1;
	i = v.type == RESIL_VALUE_INT ? v.u.i : -2;
	resil_value_free(&v);
	return i;
}

static void
put_int(resil_cache *c, const char *method, const void *arg, size_t len,
    int64_t i)
{
	resil_args a;
	resil_value v = resil_value_int(i);

	a.method = method;
	a.data = arg;
	a.len = len;
	assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
}

/* One buffer for the method, rewritten between calls: every rewrite is
 * another key, though the pointer is the memo's. */
static void
test_fallback_memo_method_bytes_not_pointer(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	char m[32];
	uint64_t id = 42;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 1000);
	memset(m, 'x', sizeof(m));
	strcpy(m, "getStock");
	put_int(c, m, &id, sizeof(id), 1);
	put_int(c, m, &id, sizeof(id), 1); /* the memo's re-stamp */
	m[7] = 'K';                        /* same length, a byte differs */
	put_int(c, m, &id, sizeof(id), 2);
	strcpy(m, "getSto"); /* shorter: the NUL moved in */
	put_int(c, m, &id, sizeof(id), 3);
	strcpy(m, "getStockX"); /* longer: the NUL moved out */
	put_int(c, m, &id, sizeof(id), 4);
	assert_int_equal(held(c, "getStock", &id, sizeof(id)), 1);
	assert_int_equal(held(c, "getStocK", &id, sizeof(id)), 2);
	assert_int_equal(held(c, "getSto", &id, sizeof(id)), 3);
	assert_int_equal(held(c, "getStockX", &id, sizeof(id)), 4);
	/* Served through the memo, then another key's hit moves it. */
	strcpy(m, "getStock");
	assert_int_equal(held(c, m, &id, sizeof(id)), 1);
	assert_int_equal(held(c, m, &id, sizeof(id)), 1);
	m[0] = 'G';
	assert_int_equal(held(c, m, &id, sizeof(id)), -1);
	resil_cache_free(c);
}

/* The same argument buffer with other bytes, or another length whose
 * words agree (16 bytes "abcdefghabcdefgh" and 8 "abcdefgh" load as the
 * same two words), is another key. */
static void
test_fallback_memo_argument_bytes_and_length(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	char arg[16];

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 1000);
	memcpy(arg, "abcdefghabcdefgh", 16);
	put_int(c, "get", arg, 8, 1);
	put_int(c, "get", arg, 16, 2);
	assert_int_equal(held(c, "get", arg, 8), 1);
	assert_int_equal(held(c, "get", arg, 16), 2);
	arg[3] = 'X'; /* inside the first word */
	assert_int_equal(held(c, "get", arg, 8), -1);
	put_int(c, "get", arg, 8, 3);
	arg[3] = 'd';
	assert_int_equal(held(c, "get", arg, 8), 1);
	arg[12] = 'X'; /* the last word only */
	assert_int_equal(held(c, "get", arg, 16), -1);
	arg[12] = 'e';
	assert_int_equal(held(c, "get", arg, 16), 2);
	/* A method of 15 bytes and one of 16 (the memo copies up to 15). */
	put_int(c, "abcdefghijklmno", arg, 1, 5);
	put_int(c, "abcdefghijklmnop", arg, 1, 6);
	assert_int_equal(held(c, "abcdefghijklmno", arg, 1), 5);
	assert_int_equal(held(c, "abcdefghijklmnop", arg, 1), 6);
	assert_int_equal(held(c, "abcdefghijklmno", arg, 1), 5);
	resil_cache_free(c);
}

/* A method whose bytes end at the last byte of a page followed by one
 * that cannot be read: the memo's 16-byte load must not be made there
 * (it would fault); the key still re-stamps and serves. */
static void
test_fallback_memo_method_at_page_end(void **state)
{
	long pg = sysconf(_SC_PAGESIZE);
	resil_manual_clock mc;
	resil_cache *c;
	char *map, *m;
	uint64_t id = 7;
	int i;

	(void)state;
	map = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(map != MAP_FAILED);
	assert_int_equal(mprotect(map + pg, (size_t)pg, PROT_NONE), 0);
	m = map + pg - sizeof("getStock");
	memcpy(m, "getStock", sizeof("getStock"));
	resil_manual_clock_init(&mc, 1);
	c = new_cache(&mc, 1000);
	for (i = 0; i < 3; i++) {
		put_int(c, m, &id, sizeof(id), 8);
		assert_int_equal(held(c, m, &id, sizeof(id)), 8);
	}
	/* A name of one byte, the page's last two bytes. */
	m = map + pg - 2;
	memcpy(m, "g", 2);
	put_int(c, m, &id, sizeof(id), 9);
	put_int(c, m, &id, sizeof(id), 9);
	assert_int_equal(held(c, m, &id, sizeof(id)), 9);
	assert_int_equal(held(c, "getStock", &id, sizeof(id)), 8);
	resil_cache_free(c);
	assert_int_equal(munmap(map, (size_t)pg * 2), 0);
}

/* Through the memo: the age limit inclusive (limit served, limit + 1
 * not), a re-stamp that moves the age back to 0, a changed value and the
 * NULL sentinel replacing an int and back. */
static void
test_fallback_memo_age_and_sentinel_ticks(void **state)
{
	resil_manual_clock mc;
	resil_cache *c;
	resil_args a;
	resil_value v, i8 = resil_value_int(8), i9 = resil_value_int(9);
	uint64_t id = 1, age = 99;

	(void)state;
	resil_manual_clock_init(&mc, 100);
	c = new_cache(&mc, 50);
	a.method = "getStock";
	a.data = &id;
	a.len = sizeof(id);
	assert_int_equal(resil_cache_put(c, &a, &i8), RESIL_OK);
	resil_manual_clock_advance(&mc, 50);
	assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_OK);
	assert_int_equal(age, 50);
	assert_int_equal(v.u.i, 8);
	/* Re-stamped: the same value at 150, age 0 again. */
	assert_int_equal(resil_cache_put(c, &a, &i8), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_OK);
	assert_int_equal(age, 0);
	resil_manual_clock_advance(&mc, 51);
	assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_E_NOTFOUND);
	/* A new value, then the sentinel (NULL: a null value), then it. */
	assert_int_equal(resil_cache_put(c, &a, &i8), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &a, &i9), RESIL_OK);
	assert_int_equal(held(c, "getStock", &id, sizeof(id)), 9);
	assert_int_equal(resil_cache_put(c, &a, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &a, NULL), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_cache_put(c, &a, &i9), RESIL_OK);
	assert_int_equal(held(c, "getStock", &id, sizeof(id)), 9);
	/* A string of 64 bytes re-stamped, then one byte of it changed. */
	{
		char s[65];

		memset(s, 'a', 64);
		s[64] = '\0';
		assert_int_equal(
		    resil_value_string(&v, s, 64, NULL), RESIL_OK);
		assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
		resil_manual_clock_advance(&mc, 10);
		assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
		resil_value_free(&v);
		s[40] = 'b';
		assert_int_equal(
		    resil_value_string(&v, s, 64, NULL), RESIL_OK);
		assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
		resil_value_free(&v);
		assert_int_equal(resil_cache_get(c, &a, &v, &age), RESIL_OK);
		assert_int_equal(age, 0);
		assert_int_equal(v.u.s.len, 64);
		assert_int_equal(v.u.s.ptr[40], 'b');
		resil_value_free(&v);
	}
	resil_cache_free(c);
}

/* Two caches on one thread: the memo is per cache (its id), so one
 * cache's memo never answers for the other, nor a freed one for a new
 * cache made where it was. */
static void
test_fallback_memo_is_per_cache(void **state)
{
	resil_manual_clock mc;
	resil_cache *c1, *c2;
	uint64_t id = 3;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	c1 = new_cache(&mc, 1000);
	c2 = new_cache(&mc, 1000);
	put_int(c1, "getStock", &id, sizeof(id), 1);
	assert_int_equal(held(c2, "getStock", &id, sizeof(id)), -1);
	put_int(c2, "getStock", &id, sizeof(id), 2);
	assert_int_equal(held(c1, "getStock", &id, sizeof(id)), 1);
	resil_cache_free(c1);
	c1 = new_cache(&mc, 1000);
	assert_int_equal(held(c1, "getStock", &id, sizeof(id)), -1);
	assert_int_equal(held(c2, "getStock", &id, sizeof(id)), 2);
	resil_cache_free(c1);
	resil_cache_free(c2);
}

static int
stock_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)args;
	*out = resil_value_int(*(int64_t *)ctx);
	return 0;
}

/* The pipeline's record of a success (resil__fallback_record1(), with a
 * timeout _at() at the call's end): each success re-stamps at its own
 * time, a changed answer replaces the value, and a failure is answered
 * with the age of the last success. */
static void
test_fallback_memo_pipeline_records(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	const resil_method *m;
	resil_args a = { "getStock", "12345678", 8 };
	resil_result r;
	int64_t answer = 8;
	int timed;

	(void)state;
	for (timed = 0; timed < 2; timed++) {
		resil_manual_clock_init(&mc, 1);
		resil_pipeline_config_init(&cfg);
		cfg.service = "StockService";
		cfg.clock = resil_manual_clock_hook(&mc);
		cfg.cache_enabled = 1;
		cfg.cache.max_age = 100;
		cfg.timeout_ns = timed ? 1000 : 0;
		assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
		assert_int_equal(
		    resil_pipeline_method(p, "getStock", &m), RESIL_OK);
		answer = 8;
		assert_int_equal(resil_pipeline_call_method(p, m, &a,
		                     stock_fn, &answer, &r),
		    RESIL_OK);
		resil_manual_clock_advance(&mc, 30);
		assert_int_equal(resil_pipeline_call_method(p, m, &a,
		                     stock_fn, &answer, &r),
		    RESIL_OK); /* re-stamped at 31 */
		resil_manual_clock_advance(&mc, 100);
		{
			resil_cache *c = resil_pipeline_cache(p);
			resil_value v;
			uint64_t age = 0;

			assert_non_null(c);
			assert_int_equal(
			    resil_cache_get(c, &a, &v, &age), RESIL_OK);
			assert_int_equal(age, 100); /* the limit: served */
			assert_int_equal(v.u.i, 8);
			answer = 9;
			assert_int_equal(resil_pipeline_call_method(p, m, &a,
			                     stock_fn, &answer, &r),
			    RESIL_OK);
			assert_int_equal(
			    resil_cache_get(c, &a, &v, &age), RESIL_OK);
			assert_int_equal(age, 0);
			assert_int_equal(v.u.i, 9);
		}
		resil_pipeline_free(p);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fallback_memo_method_bytes_not_pointer),
		cmocka_unit_test(test_fallback_memo_argument_bytes_and_length),
		cmocka_unit_test(test_fallback_memo_method_at_page_end),
		cmocka_unit_test(test_fallback_memo_age_and_sentinel_ticks),
		cmocka_unit_test(test_fallback_memo_is_per_cache),
		cmocka_unit_test(test_fallback_memo_pipeline_records),
	};

	return cmocka_run_group_tests_name("fallback_memo", tests, NULL, NULL);
}

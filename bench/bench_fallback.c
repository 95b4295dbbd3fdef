/*
 * Fallback chain and result cache hot paths, on a manual clock:
 *
 *   fallback/pass         a chain holding only a `fail:return 0` mock (no
 *                         cache, so nothing is recorded); the live call
 *                         succeeds with an int: the "no failure" path.
 *   fallback/cache_hit    a chain holding a cache; the call fails and the
 *                         cache answers with a 64-byte string, which the
 *                         answer shares with the cache's entry (a
 *                         reference on it, no copy, no allocation;
 *                         resil_result_free() drops the reference).
 *   fallback/mock_return  a chain holding a `fail:return 0` mock; the call
 *                         fails and the mock answers int 0 (no heap).
 *   cache/record64        resil_cache_put() of a 64-byte string, the same
 *                         key and value every time: since issue 16 a put
 *                         of the value the key holds only re-stamps the
 *                         entry (no lock, no allocation; since issue 39
 *                         a compare of the 64 bytes in place, and the
 *                         manual clock read without a call).
 *   cache/record64_method  cache/record64 through the internal entry
 *                         resil__cache_put_m() with the method's handle
 *                         (length and hash seed) kept by the caller, as a
 *                         pipeline can per method: no strlen, no method
 *                         hash per call.
 *   cache/record64_changing  the same key, the value alternating between
 *                         two 64-byte strings, so that every put copies
 *                         the key and the value into a new entry and frees
 *                         the one it replaces (two allocations and two
 *                         frees, under the shard's lock): the full put.
 *
 * Every case shares one object between the threads of a run; the cache and
 * the chain are safe for that (lock-free reads, per-shard writer locks; a
 * configured chain).
 */
#include <stdlib.h>

#include <resil/clock.h>
#include <resil/fallback.h>
#include <resil/mock.h>
#include <resil/value.h>

#include "bench.h"
#include "fallback_internal.h"

#define VALUE64 \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define VALUE64B \
	"fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

typedef struct fb {
	resil_manual_clock mc;
	resil_mock *mock;
	resil_cache *cache;
	resil_fallback *chain;
	resil_value v64;
	resil_value v64b; /* another 64-byte string */
	resil_args args;
	uint64_t id;
} fb;

static fb *
fb_new(void)
{
	fb *x = calloc(1, sizeof(*x));

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	x->id = 42;
	x->args.method = "getStock";
	x->args.data = &x->id;
	x->args.len = sizeof(x->id);
	if (resil_value_string(&x->v64, VALUE64, 64, NULL) != RESIL_OK ||
	    resil_value_string(&x->v64b, VALUE64B, 64, NULL) != RESIL_OK ||
	    resil_fallback_new(&x->chain, NULL, NULL) != RESIL_OK)
		abort();
	return x;
}

static void
fb_add_mock(fb *x)
{
	resil_mock_config mcfg = resil_mock_config_default();

	mcfg.service = "StockService";
	mcfg.spec = "fail:return 0";
	if (resil_mock_new(&x->mock, &mcfg, NULL) != RESIL_OK ||
	    resil_mock_set_method(
	        x->mock, "getStock", RESIL_TYPE_INT, NULL, NULL) != RESIL_OK ||
	    resil_fallback_add_mock(x->chain, x->mock) != RESIL_OK)
		abort();
}

static void
fb_add_cache(fb *x)
{
	resil_cache_config ccfg = resil_cache_config_default();

	ccfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_cache_new(&x->cache, &ccfg, NULL) != RESIL_OK ||
	    resil_fallback_add_cache(x->chain, x->cache) != RESIL_OK)
		abort();
}

static void
fb_free(void *ctx)
{
	fb *x = ctx;

	resil_fallback_free(x->chain);
	resil_cache_free(x->cache);
	resil_mock_free(x->mock);
	resil_value_free(&x->v64);
	resil_value_free(&x->v64b);
	free(x);
}

static void *
setup_mock(void)
{
	fb *x = fb_new();

	fb_add_mock(x);
	return x;
}

static void *
setup_cache(void)
{
	fb *x = fb_new();

	fb_add_cache(x);
	if (resil_cache_put(x->cache, &x->args, &x->v64) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_cache_only(void)
{
	fb *x = fb_new();
	resil_cache_config ccfg = resil_cache_config_default();

	ccfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_cache_new(&x->cache, &ccfg, NULL) != RESIL_OK)
		abort();
	return x;
}

/* The live call: succeeds with int 7 (no heap). */
static int
call_ok(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(7);
	return 0;
}

/* The live call: fails with rc 5, no value. */
static int
call_fail(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return 5;
}

static uint64_t
run_pass(void *ctx, uint64_t iters)
{
	fb *x = ctx;
	resil_result res;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_fallback_call(x->chain, &x->args, call_ok, NULL,
		        NULL, &res) == RESIL_OK &&
		    res.source == RESIL_SOURCE_LIVE)
			n += (uint64_t)res.value.u.i;
		resil_result_free(&res);
	}
	return n;
}

static uint64_t
run_cache_hit(void *ctx, uint64_t iters)
{
	fb *x = ctx;
	resil_result res;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_fallback_call(x->chain, &x->args, call_fail, NULL,
		        NULL, &res) == RESIL_OK &&
		    res.source == RESIL_SOURCE_CACHE)
			n += res.value.u.s.len;
		resil_result_free(&res);
	}
	return n;
}

static uint64_t
run_mock_return(void *ctx, uint64_t iters)
{
	fb *x = ctx;
	resil_result res;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_fallback_call(x->chain, &x->args, call_fail, NULL,
		        NULL, &res) == RESIL_OK &&
		    res.source == RESIL_SOURCE_MOCK)
			n += 1 + (uint64_t)res.value.u.i;
		resil_result_free(&res);
	}
	return n;
}

static uint64_t
run_record64(void *ctx, uint64_t iters)
{
	fb *x = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_cache_put(x->cache, &x->args, &x->v64) == RESIL_OK;
	return n;
}

static uint64_t
run_record64_method(void *ctx, uint64_t iters)
{
	fb *x = ctx;
	resil__cache_method m;
	uint64_t i, n = 0;

	resil__cache_method_init(&m, x->args.method);
	for (i = 0; i < iters; i++)
		n += resil__cache_put_m(x->cache, &m, x->args.data,
		         x->args.len, &x->v64) == RESIL_OK;
	return n;
}

static uint64_t
run_record64_changing(void *ctx, uint64_t iters)
{
	fb *x = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_cache_put(x->cache, &x->args,
		         (i & 1) != 0 ? &x->v64b : &x->v64) == RESIL_OK;
	return n;
}

const resil_bench resil_bench_fallback[] = {
	{ "fallback/pass", setup_mock, run_pass, fb_free },
	{ "fallback/cache_hit", setup_cache, run_cache_hit, fb_free },
	{ "fallback/mock_return", setup_mock, run_mock_return, fb_free },
	{ "cache/record64", setup_cache_only, run_record64, fb_free },
	{ "cache/record64_method", setup_cache_only, run_record64_method,
	    fb_free },
	{ "cache/record64_changing", setup_cache_only, run_record64_changing,
	    fb_free },
	{ NULL, NULL, NULL, NULL },
};

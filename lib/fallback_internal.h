/*
 * What lib/fallback.c (the chain) and lib/fallback_cache.c (the result
 * cache, and the chain's record into it) share, and the cache's entry
 * points for the pipeline: a caller that keeps a method's length and hash
 * seed (resil__cache_put_m(), resil__cache_get_m()), the record of a
 * success (resil__fallback_record1(), _at()), the read-through
 * (resil__cache_fresh()). Same semantics as the public resil_cache_put()
 * and resil_cache_get() (age limit inclusive, NULL is a value, the
 * bounds); the same keys: a value put through one is found through the
 * other. Never installed.
 */
#ifndef RESIL_FALLBACK_INTERNAL_H
#define RESIL_FALLBACK_INTERNAL_H

#include <resil/fallback.h>

#include <stddef.h>
#include <stdint.h>

/* The hot paths' placement (fallback.c, fallback_cache.c). */
#if defined(__GNUC__)
#define FB_COLD __attribute__((noinline, cold))
#define FB_NOINLINE __attribute__((noinline))
#define FB_INLINE inline __attribute__((always_inline))
#else
#define FB_COLD
#define FB_NOINLINE
#define FB_INLINE inline
#endif

/* ---- the chain (lib/fallback.c; read by the record in
 * lib/fallback_cache.c) ---- */

typedef enum resil__fb_kind {
	RESIL__FB_CACHE,
	RESIL__FB_MOCK,
	RESIL__FB_USER
} resil__fb_kind;

typedef struct resil__fb_handler {
	resil__fb_kind k;
	resil_cache *cache;
	const resil_mock *mock;
	const size_t *force; /* a mock: its count of force: specs */
	resil_fallback_fn fn;
	void *ctx;
} resil__fb_handler;

struct resil_fallback {
	resil_allocator alloc;
	resil__fb_handler *h;
	size_t n;
	size_t ncache; /* how many of the handlers are caches */
	size_t nmock;  /* how many are mocks */
	resil_cache *cache1; /* the first cache stage: what a record of a
	                        chain with one cache fills */
	/* The cache of the chain's first stage when that is a cache (the
	 * seeds' [cache, mock]), else NULL: what a failed call asks first,
	 * straight (call_rest() in lib/fallback.c). */
	resil_cache *cache_first;
	/* The first mock stage's count of force: specs, or NULL: with one
	 * mock stage, "may a mock answer before the call" is one load. */
	const size_t *force1;
	/* The one word resil_fallback_call() tests before its lean path:
	 * 0 when no stage has anything to do on a success (no cache, no
	 * force: mock now). &chain_quiet without a cache or mock, the one
	 * mock stage's count of force: specs, else &chain_busy. */
	const size_t *busy;
};

/* A key's arguments as the public calls check them. */
static inline int
resil__cache_args_ok(const resil_args *args)
{
	return args != NULL && args->method != NULL &&
	    (args->data != NULL || args->len == 0);
}

/* The cache stage of a chain's answer: resil_cache_get() of args
 * (checked: resil__cache_args_ok()) in c, *out and *age written only on
 * a hit. */
resil_err resil__cache_answer(resil_cache *c, const resil_args *args,
    resil_value *out, uint64_t *age);

/* The free hook of a value a cache served (bytes shared with its entry;
 * its alloc hook is resil__value_served_alloc, lib/value_internal.h):
 * its ctx is the entry's reference count. resil_value_free() calls it to
 * drop one reference; resil_result_free() drops it in place and calls it
 * with size RESIL__SERVED_LAST when that was the last (the entry freed). */
void resil__cache_served_free(void *ptr, size_t size, void *ctx);

/* ---- the cache's entry points for the pipeline ---- */

/* A method's handle: valid while name's bytes stay as they were when
 * resil__cache_method_init() read them. */
typedef struct resil__cache_method {
	const char *name;
	size_t len;    /* strlen(name) */
	uint64_t w0;   /* its bytes as words (the cache's key compare) */
	uint64_t w1;
	uint64_t seed; /* the method's part of its keys' hash */
} resil__cache_method;

/* name must not be NULL. */
void resil__cache_method_init(resil__cache_method *m, const char *name);

/* resil_cache_put() and resil_cache_get() of the key (m's method, the
 * len bytes at data); RESIL_E_INVAL for a NULL c, m, m->name or out, or
 * NULL data with len > 0. */
resil_err resil__cache_put_m(resil_cache *c, const resil__cache_method *m,
    const void *data, size_t len, const resil_value *value);
resil_err resil__cache_get_m(resil_cache *c, const resil__cache_method *m,
    const void *data, size_t len, resil_value *out, uint64_t *age);

/* The record of a pipeline's success in fb's one cache (fb->ncache == 1:
 * a pipeline's chain holds its cache and no other): resil_cache_put() of
 * value at now, a time the caller read from clock (a timed call: its
 * end). fb, args, args->method, value and clock not NULL; args->data is
 * checked. When the cache reads the same clock (the one it was made
 * with, or the same now function and ctx) its entry is stamped now
 * without a reading of its own (issue 39: two clock reads per timed
 * call); otherwise the cache's clock is read. */
resil_err resil__fallback_record1_at(resil_fallback *fb,
    const resil_args *args, const resil_value *value,
    const resil_clock *clock, uint64_t now);

/* resil__fallback_record1_at() at a time read from the cache's clock: an
 * untimed call's success. */
resil_err resil__fallback_record1(
    resil_fallback *fb, const resil_args *args, const resil_value *value);

/* Read-through (issue 43): when c holds a value of args's key at most
 * fresh old (and within c's age limit), *out is the answer, every field
 * written: that value (as resil_cache_get() serves it), source
 * RESIL_SOURCE_CACHE, its age, err RESIL_OK, no attempt, the rest as
 * resil__result_clear() leaves them; returns 1. Otherwise 0, *out
 * untouched, the entry kept (an older value still answers a failure as a
 * fallback). args->method not NULL (args->data is checked). */
int resil__cache_fresh(resil_cache *c, const resil_args *args, uint64_t fresh,
    resil_result *out);

#endif /* RESIL_FALLBACK_INTERNAL_H */

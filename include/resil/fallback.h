/*
 * resil fallback: the chain of fallback handlers and the result cache.
 *
 * After a non-business failure of a call (including a breaker rejection,
 * RESIL_E_OPEN, and exhausted retries) the chain asks each handler in the
 * order they were added; a handler answers or passes. When every handler
 * passes the result is RESIL_E_UNAVAILABLE, source UNAVAILABLE, with no
 * value and the original failure attached (cause, cause_rc). Business
 * errors never enter the chain. A chain with no handler (or no chain at
 * all) propagates the original error.
 *
 * Built-in handlers: a result cache (resil_fallback_add_cache) and a
 * service's mocks (resil_fallback_add_mock); users add their own with
 * resil_fallback_add_handler.
 *
 * The result cache records every live success under a key made of the
 * method name and the argument bytes. A null result is stored as a NULL
 * sentinel: a cached null answers null, a miss passes. A value whose age
 * (by the injected clock) is above max_age is never served: age ==
 * max_age is served, max_age + 1 is not. The cache is bounded by entries
 * and by bytes and evicts by second chance (CLOCK) within a shard: the
 * oldest entry not hit since the hand last passed it. It owns its copies
 * of keys and values; a lookup of a string, bytes or JSON value gives the
 * caller a read-only reference on the cached bytes (no copy, no
 * allocation), released by resil_value_free().
 *
 * Thread safety: resil_cache_put, _get, _remove, _clear and _stats may run
 * concurrently on one cache from any number of threads. A get takes no
 * lock and writes nothing that another thread's get writes (except to drop
 * a stale entry); puts (but one of the value already held), removes and
 * clears take their shard's lock, so writers of different shards never
 * meet. new and free must not overlap
 * any other call on the same cache.
 * A chain is configured (new, add_*) from one thread before use; then
 * resil_fallback_recover, _record and _call may run concurrently from any
 * number of threads. Caches and mocks added to a chain are borrowed and
 * must outlive it; user handlers must be thread-safe themselves.
 */
#ifndef RESIL_FALLBACK_H
#define RESIL_FALLBACK_H

#include <string.h>

#include <resil/clock.h>
#include <resil/mock.h>
#include <resil/resil.h>
#include <resil/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the result cache ---- */

typedef struct resil_cache resil_cache;

/* No age limit: cached values are served however old they are. */
#define RESIL_CACHE_NO_AGE_LIMIT UINT64_MAX

typedef struct resil_cache_config {
	size_t size;        /* sizeof(resil_cache_config) */
	size_t max_entries; /* 1..2^32; default 1024 */
	size_t max_bytes;   /* bytes held by entries, >= 1; default 1 MiB */
	uint64_t max_age;   /* ticks, inclusive; default: no limit */
	uint32_t shards;    /* power of two 1..256; default 16 */
	const resil_clock *clock;     /* NULL: the monotonic system clock */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_cache_config;

static inline void
resil_cache_config_init(resil_cache_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->max_entries = 1024;
	cfg->max_bytes = (size_t)1 << 20;
	cfg->max_age = RESIL_CACHE_NO_AGE_LIMIT;
	cfg->shards = 16;
}

static inline resil_cache_config
resil_cache_config_default(void)
{
	resil_cache_config cfg;

	resil_cache_config_init(&cfg);
	return cfg;
}

/*
 * Create an empty cache. The key space is split over
 * min(shards, max_entries) shards (rounded down to a power of two), each
 * with its own table, clock, writers' lock and an equal share of
 * max_entries and max_bytes (the shares add up to the totals exactly), so the
 * totals are never exceeded. An entry is charged its header, its key and its
 * value's heap bytes (resil_cache_entry_charge()).
 *
 * *cfg, *cfg->clock and *cfg->alloc are copied; the clock's and the
 * allocator's ctx must outlive the cache. The caller frees *out with
 * resil_cache_free(). All memory is taken through cfg->alloc.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument or a field out of
 * range, with a message naming it (`cache.shards: 3 is not a power of two
 * in 1..256`); RESIL_E_NOMEM. On error *out is unchanged.
 */
RESIL_API resil_err resil_cache_new(
    resil_cache **out, const resil_cache_config *cfg, resil_diag *diag);

/* Free the cache and every entry. NULL is a harmless no-op. */
RESIL_API void resil_cache_free(resil_cache *c);

/*
 * Record value (NULL, or a null value: the NULL sentinel) for args,
 * replacing any earlier entry of the key and stamping it with the clock's
 * now. A put of the value the key holds already (same type and bytes;
 * doubles by their bits; opaque values never count as the same) only
 * re-stamps that entry: it keeps its place and its reference bit, and the
 * put takes no lock and allocates nothing. Otherwise the new entry is the
 * newest of its shard, with its reference bit clear (a replaced entry's
 * bit is not carried over). Until it fits, the
 * shard's hand looks at its oldest entry: one with the bit set gets a
 * second chance (the bit is cleared, the entry becomes the newest), one
 * with the bit clear is evicted. The hand gives at most one round of
 * second chances per put, then evicts the oldest whatever its bit (only
 * concurrent hits can make that happen). Replaced and evicted entries
 * leave the bounds at once; their memory is freed in batches: once 16 of
 * them (or a quarter of the shard's byte share) wait in a shard, the put
 * or remove that retires the last one frees them all before it returns
 * (resil_cache_clear() and _free() at once), but for an entry whose bytes
 * a value served by resil_cache_get() still holds: that value frees it.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, or a string,
 * bytes or JSON value whose bytes are NULL with a length above 0 (the
 * cache unchanged); RESIL_E_LIMITED
 * when the entry alone is bigger than its shard's byte share (it is not
 * stored, and an earlier entry of the key is removed); RESIL_E_NOMEM (the
 * cache is unchanged).
 */
RESIL_API resil_err resil_cache_put(
    resil_cache *c, const resil_args *args, const resil_value *value);

/*
 * Look args up. On a hit with age <= max_age, *out gets the value (a null
 * value for the NULL sentinel) and *age, if not
 * NULL, the ticks since it was stored (0 if the clock went backwards); the
 * entry's reference bit is set (the order of entries does not change). A
 * stale entry is removed (under the shard's lock).
 *
 * A string, bytes or JSON value is not copied: *out points at the
 * entry's own bytes (NUL-terminated, read-only: never write through
 * out->u.s.ptr) and holds a reference on the entry, so the bytes stay
 * valid and unchanged until resil_value_free(out), also after the key is
 * replaced, evicted or removed and after resil_cache_free(); the free
 * gives the entry's memory back (through the cache's allocator, whose
 * ctx must therefore outlive such values too) once the cache and every
 * such value are done with it. resil_value_copy() of it
 * makes a copy of the caller's own. A scalar is copied; an opaque value is
 * copied through its ops. Hits on one entry from many threads each
 * add and drop one reference on it.
 *
 * Returns RESIL_OK on a hit; RESIL_E_NOTFOUND on a miss or a stale entry
 * (*out untouched); RESIL_E_INVAL for a NULL argument; RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_cache_get(
    resil_cache *c, const resil_args *args, resil_value *out, uint64_t *age);

/* Remove the entry of args. RESIL_OK, RESIL_E_NOTFOUND or
 * RESIL_E_INVAL. */
RESIL_API resil_err resil_cache_remove(resil_cache *c, const resil_args *args);

/* Remove every entry. NULL is a harmless no-op. */
RESIL_API void resil_cache_clear(resil_cache *c);

typedef struct resil_cache_stats {
	uint64_t entries;   /* entries held now */
	uint64_t bytes;     /* bytes charged to them (the bounded quantity) */
	uint64_t memory;    /* all memory the cache holds: bytes, shards,
	                       hash tables, the cache object */
	uint64_t hits;      /* gets served */
	uint64_t misses;    /* gets with no entry */
	uint64_t stale;     /* gets refused because of age */
	uint64_t evictions; /* entries evicted to make room */
	uint32_t shards;    /* shards in use */
} resil_cache_stats;

/* Fill *out (locks each shard in turn, so it is a near-consistent view).
 * Returns RESIL_OK or RESIL_E_INVAL. */
RESIL_API resil_err resil_cache_stats_get(
    const resil_cache *c, resil_cache_stats *out);

/* The charge of an entry for args holding value (NULL: the sentinel). */
RESIL_API size_t resil_cache_entry_charge(
    const resil_args *args, const resil_value *value);

/* ---- the chain ---- */

typedef enum resil_verdict {
	RESIL_FALLBACK_PASS = 0,  /* no answer: ask the next handler */
	RESIL_FALLBACK_ANSWER = 1 /* *out is the answer */
} resil_verdict;

/*
 * A user handler. *out arrives initialised (resil_result_init) with cause,
 * cause_rc and attempts set from failure. To answer, set out->err
 * (RESIL_OK with out->value, or an error of its own) and return
 * RESIL_FALLBACK_ANSWER; out->source is set to RESIL_SOURCE_FALLBACK
 * unless the handler set another. To pass, return RESIL_FALLBACK_PASS and
 * leave *out alone. ctx is the caller's; resil never frees it.
 */
typedef resil_verdict (*resil_fallback_fn)(void *ctx, const resil_args *args,
    const resil_failure *failure, resil_result *out);

typedef struct resil_fallback resil_fallback;

typedef struct resil_fallback_config {
	size_t size;                  /* sizeof(resil_fallback_config) */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_fallback_config;

static inline void
resil_fallback_config_init(resil_fallback_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
}

static inline resil_fallback_config
resil_fallback_config_default(void)
{
	resil_fallback_config cfg;

	resil_fallback_config_init(&cfg);
	return cfg;
}

/* Create an empty chain; cfg may be NULL for the defaults. The caller
 * frees *out with resil_fallback_free(). Returns RESIL_OK, RESIL_E_INVAL
 * (NULL out, bad cfg->size, message in diag) or RESIL_E_NOMEM; *out is
 * unchanged on error. */
RESIL_API resil_err resil_fallback_new(
    resil_fallback **out, const resil_fallback_config *cfg, resil_diag *diag);

/* Free the chain (not the caches and mocks it borrows). NULL is a no-op. */
RESIL_API void resil_fallback_free(resil_fallback *fb);

/*
 * Append a handler. add_cache: answers from c (source CACHE, age set);
 * resil_fallback_record() and resil_fallback_call() record live successes
 * into it. add_mock: answers with m's mock for the method (source MOCK;
 * passes where the method has none); resil_fallback_call() also answers
 * from it before calling when the method's mock is force:. add_handler:
 * fn and ctx. Returns RESIL_OK, RESIL_E_INVAL (NULL argument) or
 * RESIL_E_NOMEM (the chain is unchanged).
 */
RESIL_API resil_err resil_fallback_add_cache(
    resil_fallback *fb, resil_cache *c);
RESIL_API resil_err resil_fallback_add_mock(
    resil_fallback *fb, const resil_mock *m);
RESIL_API resil_err resil_fallback_add_handler(
    resil_fallback *fb, resil_fallback_fn fn, void *ctx);

/* Handlers in the chain; 0 for NULL. */
RESIL_API size_t resil_fallback_count(const resil_fallback *fb);

/*
 * Record a live success (value NULL or null: the NULL sentinel) into every
 * cache of the chain. Returns RESIL_OK or the first error of
 * resil_cache_put(); RESIL_E_INVAL for a NULL argument.
 */
RESIL_API resil_err resil_fallback_record(
    resil_fallback *fb, const resil_args *args, const resil_value *value);

/*
 * Answer for failure, into *out (overwritten; free with
 * resil_result_free()). fb NULL or empty: the original error propagates
 * (err failure->err, rc failure->rc, source LIVE). Otherwise each handler
 * is asked in turn; the first answer is the result, with cause, cause_rc
 * and attempts from failure. When all pass: err RESIL_E_UNAVAILABLE,
 * source UNAVAILABLE, null value.
 *
 * failure->err must not be RESIL_OK or RESIL_E_BUSINESS (business errors
 * never enter the chain): both give RESIL_E_INVAL.
 *
 * Returns out->err; RESIL_E_INVAL for a NULL args, failure or out (*out
 * untouched).
 */
RESIL_API resil_err resil_fallback_recover(resil_fallback *fb,
    const resil_args *args, const resil_failure *failure, resil_result *out);

/*
 * Run fn(ctx, args, &value) under the chain: a force mock of the chain
 * answers without calling; otherwise fn is called once, and its outcome
 * (by cls; NULL: rc != 0 fails) decides: SUCCESS is recorded in the
 * chain's caches and returned (source LIVE); BUSINESS propagates untouched
 * (RESIL_E_BUSINESS, rc); IGNORED returns as it is (RESIL_OK if rc is 0,
 * else RESIL_E_CALL), never degraded; FAILURE goes to
 * resil_fallback_recover() as RESIL_E_CALL with rc and 1 attempt.
 *
 * Returns out->err (*out overwritten); RESIL_E_INVAL for a NULL argument
 * other than fb (*out untouched).
 */
RESIL_API resil_err resil_fallback_call(resil_fallback *fb,
    const resil_args *args, resil_call_fn fn, void *ctx,
    const resil_classifier *cls, resil_result *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_FALLBACK_H */

/*
 * resil fallback: the result cache's making (resil_cache_new()) and an
 * entry's charge; its paths are lib/fallback_cache.c.
 */
#include "internal.h"

#include <resil/clock.h>
#include <resil/fallback.h>

#include <string.h>

#include "atomic.h"
#include "fallback_cache_internal.h"

static uint64_t cache_ids; /* the source of the caches' ids */

size_t
resil_cache_entry_charge(const resil_args *args, const resil_value *value)
{
	size_t key_len;

	if (args == NULL || args->method == NULL)
		return 0;
	key_len = strlen(args->method) + 1 + args->len;
	return sizeof(entry) + key_len + resil_value_heap_size(value);
}

resil_err
resil_cache_new(
    resil_cache **out, const resil_cache_config *cfg, resil_diag *diag)
{
	resil_cache_config c;
	const resil_allocator *al;
	resil_cache *cache;
	uint32_t n, i;
	uintptr_t p;

	if (out == NULL || cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "cache: NULL argument");
	/* This struct is the first released one: nothing shorter exists. */
	if (cfg->size != sizeof(c))
		return resil__check_size(
		    diag, "cache", "resil_cache_config", cfg->size, sizeof(c));
	resil_cache_config_init(&c);
	memcpy(&c, cfg, cfg->size);
	if (c.max_entries < 1 || (uint64_t)c.max_entries > (UINT64_C(1) << 32))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cache.max_entries: %zu is out of range 1..4294967296",
		    c.max_entries);
	if (c.max_bytes < 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cache.max_bytes: 0 is out of range 1..%zu", SIZE_MAX);
	if (c.shards < 1 || c.shards > 256 || (c.shards & (c.shards - 1)))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cache.shards: %u is not a power of two in 1..256",
		    (unsigned)c.shards);
	/* Never more shards than entries or bytes: each gets a share. */
	n = c.shards;
	while (n > 1 && ((size_t)n > c.max_entries || (size_t)n > c.max_bytes))
		n >>= 1;

	al = resil__allocator(c.alloc);
	cache = resil__calloc(al, sizeof(*cache));
	if (cache == NULL)
		return RESIL_E_NOMEM;
	/* Never 0 or reused: a freed cache's memo never matches. */
	cache->id = resil__faa64(&cache_ids, 1) + 1;
	/* The hook promises malloc's alignment only: one line more, and
	 * the shards aligned by hand. */
	cache->shards_raw_size = sizeof(shard) * n + RESIL__CACHELINE;
	cache->shards_raw = resil__calloc(al, cache->shards_raw_size);
	if (cache->shards_raw == NULL) {
		resil__free(al, cache, sizeof(*cache));
		return RESIL_E_NOMEM;
	}
	p = ((uintptr_t)cache->shards_raw + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	cache->shards = (shard *)p;
	cache->alloc = *al;
	/* now is never NULL here, so that the hot paths call it straight
	 * (cache_now()). */
	cache->clock = c.clock != NULL && c.clock->now != NULL
	    ? *c.clock
	    : *resil_clock_system();
	cache->clock_src = c.clock;
	cache->now_word = cache->clock.now_word;
	cache->max_age = c.max_age;
	cache->nshards = n;
	for (i = 0; i < n; i++) {
		shard *s = &cache->shards[i];

		s->max_count = c.max_entries / n + (i < c.max_entries % n);
		s->max_bytes = c.max_bytes / n + (i < c.max_bytes % n);
	}
	*out = cache;
	return RESIL_OK;
}

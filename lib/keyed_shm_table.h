/*
 * Private: the layout of a keyed breaker, rate limiter or bulkhead
 * (h4/kshm3) family's table
 * in a region (issue 41), shared by lib/keyed_shm.c (the family) and lib/shm.c (through
 * lib/keyed_shm_table.c: which process slots a table names, clearing a
 * slot taken over from a dead process). lib/keyed_shm.c's top comment
 * describes the table. Never installed.
 */
#ifndef RESIL_KEYED_SHM_TABLE_H
#define RESIL_KEYED_SHM_TABLE_H

#include <resil/shm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "breaker_shared.h"
#include "limit_shared.h"
#include "shm_internal.h"

#define KSHM_MAGIC UINT64_C(0x3142415448534b52) /* "RKSHTAB1" */
#define KSHM_HDR 128u

/* A slot's state. */
#define KS_FREE UINT64_C(0)
#define KS_READY UINT64_C(1)
#define KS_CLAIM UINT64_C(2)   /* | (process slot + 1) << 8 */
#define KS_RECLAIM UINT64_C(3) /* | (process slot + 1) << 8 */
#define KS_TAG(st) ((st) >> 8)

typedef struct kshm_head {
	uint64_t magic;
	uint32_t max_keys;
	uint32_t key_max;
	uint64_t slot_bytes;
	uint64_t index_off;
	uint64_t index_mask;
	uint64_t seed;
	uint64_t lock;   /* holder's process slot + 1; 0 free */
	uint64_t opened; /* process slots with a family open on it */
	uint64_t used;   /* slots holding a key */
	uint64_t hand;   /* the reclaim scan's next slot */
	uint64_t skip;   /* new keys sent to the overflow without a scan */
	uint64_t claimed, reclaimed, overflowed, repaired;
	uint64_t kind; /* KSHM_BREAKER, KSHM_RATELIMIT (h3/kshm2) or
	                * KSHM_BULKHEAD (h4/kshm3) */
} kshm_head;

/* A table's kind (its head's kind field; a breaker table's is 0). */
#define KSHM_BREAKER UINT64_C(0)
#define KSHM_RATELIMIT UINT64_C(1)
#define KSHM_BULKHEAD UINT64_C(2)

typedef struct kshm_slot {
	uint64_t state;
	uint64_t hash;
	uint64_t attach; /* one bit per process slot holding a handle */
	uint32_t len;
	uint32_t pad0;
	uint8_t key[RESIL_SHM_KEYED_KEY_MAX];
	/* A rate limiter slot's settings, written by its claimer: rate,
	 * period_ns, burst (h3/kshm2); a bulkhead slot's max_concurrent in
	 * rl_rate (h4/kshm3); 0 in a breaker table. */
	uint64_t rl_rate, rl_period, rl_burst;
	uint64_t pad;
} kshm_slot;

_Static_assert(sizeof(kshm_head) == KSHM_HDR, "the table's head");
_Static_assert(sizeof(kshm_slot) == KSHM_HDR, "a slot's header");

static inline uint64_t
index_words(uint32_t max_keys)
{
	uint64_t n = 16;

	while (n < 2 * ((uint64_t)max_keys + 1))
		n <<= 1;
	return n;
}

static inline size_t
slot_bytes_of(const resil_breaker_config *bc)
{
	return KSHM_HDR + resil__breaker_shared_size(bc);
}

/* A bulkhead table's slot: the header and the packed shared bulkhead
 * (h4/kshm3). */
static inline size_t
bulk_slot_bytes(void)
{
	return KSHM_HDR + resil__bulkhead_packed_size();
}

/* A rate limiter table's slot: the header and the GCRA state. */
static inline size_t
rate_slot_bytes(void)
{
	return KSHM_HDR + resil__ratelimit_shared_size();
}

static inline kshm_slot *
slot_at(const kshm_head *h, uint64_t i)
{
	return (kshm_slot *)(void *)((char *)h + KSHM_HDR + i * h->slot_bytes);
}

static inline void *
bmem(const kshm_head *h, uint64_t i)
{
	return (char *)slot_at(h, i) + KSHM_HDR;
}

static inline uint64_t *
index_of(const kshm_head *h)
{
	return (uint64_t *)(void *)((char *)h + h->index_off);
}

/* Whether the head at mem (bytes long) can be trusted for its geometry. */
static inline bool
head_sane(const kshm_head *h, size_t bytes)
{
	uint64_t words;

	if (bytes < KSHM_HDR || h->magic != KSHM_MAGIC || h->max_keys < 1 ||
	    h->max_keys > RESIL__KSHM_MAX_KEYS || h->slot_bytes <= KSHM_HDR ||
	    h->slot_bytes % 64 != 0 || h->kind > KSHM_BULKHEAD ||
	    (h->kind == KSHM_RATELIMIT && h->slot_bytes != rate_slot_bytes()) ||
	    (h->kind == KSHM_BULKHEAD && h->slot_bytes != bulk_slot_bytes()))
		return false;
	words = index_words(h->max_keys);
	return h->index_mask == words - 1 &&
	    h->index_off ==
	    KSHM_HDR + ((uint64_t)h->max_keys + 1) * h->slot_bytes &&
	    h->index_off + words * sizeof(uint64_t) <= bytes;
}

#endif /* RESIL_KEYED_SHM_TABLE_H */

/*
 * The region's side of a keyed breaker, rate limiter or bulkhead family's
 * table
 * (issue 41): its size,
 * and what lib/shm.c asks of it about a dead process's slot. Separate from
 * lib/keyed_shm.c, which asks lib/shm.c for the table, so the two do not
 * depend on each other.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "keyed_shm_table.h"

size_t
resil__kshm_bytes(const resil_breaker_config *bc, uint32_t max_keys)
{
	return KSHM_HDR + ((size_t)max_keys + 1) * slot_bytes_of(bc) +
	    (size_t)index_words(max_keys) * sizeof(uint64_t);
}

size_t
resil__kshm_rate_bytes(uint32_t max_keys)
{
	return KSHM_HDR + ((size_t)max_keys + 1) * rate_slot_bytes() +
	    (size_t)index_words(max_keys) * sizeof(uint64_t);
}

size_t
resil__kshm_bulk_bytes(uint32_t max_keys)
{
	return KSHM_HDR + ((size_t)max_keys + 1) * bulk_slot_bytes() +
	    (size_t)index_words(max_keys) * sizeof(uint64_t);
}

/* h4/kshm3: every READY slot's bulkhead (the overflow's included); a slot
 * being reclaimed has no call in flight (its count was 0), so a claim
 * racing this finds nothing to give back but live processes' lines. */
uint32_t
resil__kshm_reap(
    void *mem, size_t bytes, const resil__proc *procs, unsigned skip)
{
	kshm_head *h = mem;
	uint32_t got = 0;
	uint64_t k;

	if (!head_sane(h, bytes) || h->kind != KSHM_BULKHEAD)
		return 0;
	for (k = 0; k <= h->max_keys; k++)
		if (resil__load64(&slot_at(h, k)->state) == KS_READY &&
		    resil__bulkhead_packed_in_flight(bmem(h, k)) != 0)
			got += resil__bulkhead_packed_reap(
			    bmem(h, k), procs, skip);
	return got;
}

bool
resil__kshm_slot_busy(const void *mem, size_t bytes, unsigned i)
{
	const kshm_head *h = mem;
	uint64_t k, tag = (uint64_t)i + 1;

	if (!head_sane(h, bytes))
		return false;
	if (resil__load64(&h->lock) == tag)
		return true;
	for (k = 0; k <= h->max_keys; k++) {
		uint64_t st = resil__load64(&slot_at(h, k)->state);
		uint64_t w = resil__load64((const uint64_t *)bmem(h, k));

		if (st != KS_FREE && st != KS_READY && KS_TAG(st) == tag)
			return true;
		if (h->kind == KSHM_BREAKER && (w & W_TRANSIT) != 0 &&
		    ((w & W_PROBE_MASK) >> W_PROBE_SHIFT & 0x7f) == tag)
			return true;
	}
	return false;
}

void
resil__kshm_clear_slot(void *mem, size_t bytes, unsigned i)
{
	kshm_head *h = mem;
	uint64_t k, bit = UINT64_C(1) << i;
	size_t tail = resil__breaker_shared_tail();

	if (!head_sane(h, bytes))
		return;
	if (h->kind != KSHM_BREAKER) { /* no announcements */
		__atomic_fetch_and(&h->opened, ~bit, __ATOMIC_ACQ_REL);
		for (k = 0; k <= h->max_keys; k++)
			__atomic_fetch_and(
			    &slot_at(h, k)->attach, ~bit, __ATOMIC_ACQ_REL);
		return;
	}
	if (h->slot_bytes - KSHM_HDR < tail)
		return;
	__atomic_fetch_and(&h->opened, ~bit, __ATOMIC_ACQ_REL);
	for (k = 0; k <= h->max_keys; k++) {
		uint64_t *ann = (uint64_t *)(void *)((char *)bmem(h, k) +
		    (h->slot_bytes - KSHM_HDR) - tail + 64u * i);

		__atomic_fetch_and(
		    &slot_at(h, k)->attach, ~bit, __ATOMIC_ACQ_REL);
		resil__store64(&ann[0], 0);
		resil__store64(&ann[1], 0);
	}
}

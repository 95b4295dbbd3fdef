/*
 * A test allocator for resil_allocator: counts allocations, frees and live
 * bytes, and can be told to fail the Nth allocation (1-based), so every
 * out-of-memory path can be driven. Not thread-safe on purpose: tests that
 * use it allocate from one thread.
 */
#ifndef RESIL_TEST_FAIL_ALLOC_H
#define RESIL_TEST_FAIL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include <resil/resil.h>

typedef struct fail_alloc {
	resil_allocator hook;
	uint64_t fail_at; /* fail the Nth allocation; 0: never */
	uint64_t allocs;  /* allocations attempted */
	uint64_t frees;
	uint64_t failures; /* allocations refused */
	size_t live_bytes;
	int size_mismatch; /* a free whose size was not the allocated one */
} fail_alloc;

/* Set fa up; fail_at 0 never fails. Returns &fa->hook. */
const resil_allocator *fail_alloc_init(fail_alloc *fa, uint64_t fail_at);

/* From now on, fail the nth allocation (1-based) counted from the next
 * one; 0 never fails. For sweeping one operation on an object that was
 * built through fa without failures. */
void fail_alloc_arm(fail_alloc *fa, uint64_t nth);

/* Live allocations (allocs that succeeded minus frees). */
uint64_t fail_alloc_live(const fail_alloc *fa);

#endif

/*
 * Private: what lib/shm.c needs from lib/limit.c to place a rate
 * limiter's or a bulkhead's state in a region shared between processes.
 * Never installed.
 */
#ifndef RESIL_LIMIT_SHARED_H
#define RESIL_LIMIT_SHARED_H

#include <resil/limit.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"

/* Bytes of region memory (a 64-byte multiple) a shared rate limiter's
 * state needs: the GCRA word and its time bases. */
size_t resil__ratelimit_shared_size(void);

/*
 * A rate limiter whose GCRA state lives at mem (64-byte aligned, in the
 * region). init: this process creates it (mem zeroed; the time base is
 * read from cfg's clock), else it attaches to a state made with the same
 * rate, period and burst (the caller checked). Every process must use the
 * same clock (the system clock is). The handle is this process's own:
 * resil_ratelimit_free() leaves mem alone.
 */
resil_err resil__ratelimit_new_shared(resil_ratelimit **out,
    const resil_ratelimit_config *cfg, void *mem, bool init, resil_diag *diag);

/* The region memory a rate limiter made by resil__ratelimit_new_shared()
 * works on (h3/kshm2: a keyed family finds its slot from it). */
void *resil__ratelimit_shared_mem(const resil_ratelimit *rl);

/* Bytes of region memory a shared bulkhead needs: its limit word, the
 * sweep time, and one 64-byte line per process slot with that process's
 * calls in flight. */
size_t resil__bulkhead_shared_size(void);

/*
 * A bulkhead whose state lives at mem. procs: the region's process
 * table; slot: this process's. cfg->batch must be 0 (checked here).
 */
resil_err resil__bulkhead_new_shared(resil_bulkhead **out,
    const resil_bulkhead_config *cfg, void *mem, bool init,
    const resil__proc *procs, unsigned slot, resil_diag *diag);

/* Give back the slots held by processes found dead (or whose process
 * slot now belongs to another process) in the shared bulkhead at mem;
 * returns how many calls in flight were reclaimed. skip: a slot not to
 * look at (the caller's own), or RESIL__PROCS. */
uint32_t resil__bulkhead_shared_reap(
    void *mem, const resil__proc *procs, unsigned skip);

/*
 * h4/kshm3, a keyed bulkhead family's slot in a region: the shared
 * bulkhead with its process lines packed (16 bytes each, not a cache line:
 * every call moves the one count word anyway), behaving as above.
 */
size_t resil__bulkhead_packed_size(void);
resil_err resil__bulkhead_new_packed(resil_bulkhead **out,
    const resil_bulkhead_config *cfg, void *mem, bool init,
    const resil__proc *procs, unsigned slot, resil_diag *diag);
uint32_t resil__bulkhead_packed_reap(
    void *mem, const resil__proc *procs, unsigned skip);
/* The calls in flight counted at a packed bulkhead's mem, every
 * process's. */
uint32_t resil__bulkhead_packed_in_flight(const void *mem);
/* The region memory a shared (or packed) bulkhead works on. */
void *resil__bulkhead_shared_mem(const resil_bulkhead *bh);

#endif /* RESIL_LIMIT_SHARED_H */

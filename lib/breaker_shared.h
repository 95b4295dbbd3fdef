/*
 * Private: what lib/shm.c needs from lib/breaker.c to place a breaker's
 * state in a region shared between processes. Never installed.
 */
#ifndef RESIL_BREAKER_SHARED_H
#define RESIL_BREAKER_SHARED_H

#include <resil/breaker.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"

/* Transition events kept for other processes' listeners. */
#define RESIL__SHM_RING 64u

/*
 * Whether w, a shared breaker's state word, holds no state (its region was
 * damaged): a state above RESIL_BREAKER_METRICS_ONLY, or a transition in
 * progress (TRANSIT, bit 3) whose owner field (bits 4..10, a process slot
 * + 1, and bits 11..13, the state it left; lib/breaker_internal.h) names
 * no process slot or no state. lib/shm.c refuses to attach to such a word;
 * a handle made before the damage reads it as RESIL_BREAKER_CORRUPT and
 * refuses on it every permit, outcome, transition and snapshot, without
 * waiting for the transition it seems to hold.
 */
static inline bool
resil__shared_word_corrupt(uint64_t w)
{
	uint64_t owner = (w >> 4) & 0x7f, from = (w >> 11) & 7;

	if ((w & 7) > RESIL_BREAKER_METRICS_ONLY)
		return true;
	return (w & 8) != 0 &&
	    (owner == 0 || owner > RESIL__PROCS ||
	        from > RESIL_BREAKER_METRICS_ONLY);
}

/* Bytes of region memory a shared breaker with cfg needs (cache-line
 * aligned start assumed). */
size_t resil__breaker_shared_size(const resil_breaker_config *cfg);

/* The bytes at the end of that size holding the per-process part, which
 * starts with one 64-byte line per process slot: {announcements[2], pad}. */
size_t resil__breaker_shared_tail(void);

/*
 * A breaker whose state lives at mem (resil__breaker_shared_size(cfg)
 * bytes, 64-byte aligned, in the region). init: this process creates it
 * (mem is zeroed), else it attaches to a state another process made with
 * the same layout. procs: the region's process table; slot: this
 * process's. The handle is this process's own: free it with
 * resil_breaker_free(), which leaves mem alone.
 */
resil_err resil__breaker_new_shared(resil_breaker **out,
    const resil_breaker_config *cfg, void *mem, bool init,
    const resil__proc *procs, unsigned slot, resil_diag *diag);

/* Tests only: called by the owner of a shared breaker's transition
 * while it holds it (NULL in production). */
extern void (*resil__breaker_transit_hook)(void);

#endif /* RESIL_BREAKER_SHARED_H */

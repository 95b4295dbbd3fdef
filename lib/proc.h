/*
 * Private: the process table of a region shared between processes
 * (lib/proc.c). Who is attached, in which slot, and whether a slot's
 * process is still alive. lib/shm.c claims and frees the slots;
 * lib/breaker.c and lib/limit.c skip or reap what a dead process left in
 * their shared state. It names none of them. Never installed.
 */
#ifndef RESIL_PROC_H
#define RESIL_PROC_H

#include <stdbool.h>
#include <stdint.h>

/* Process slots of a region: at most this many processes attached at once. */
#define RESIL__PROCS 64u

/* A process's identity word: its pid in the low 32 bits, its start time
 * (/proc/PID/stat field 22, folded to 32 bits, 0: unknown) in the high
 * 32, so a pid reused by another process is not taken for the dead one. */
#define RESIL__PROC_PID_MASK UINT64_C(0xffffffff)
#define RESIL__PROC_START_MASK (UINT64_C(0xffffffff) << 32)

/* One process slot, one cache line. owner is the slot's truth: claimed
 * and released by one atomic write each, so that no process ever sees a
 * claim half done (a new owner with its predecessor's start time looked
 * dead, and a third process took the slot again). pid is a copy of
 * owner's pid for the bulkheads' tags (lib/limit.c), written by the owner
 * after its claim and cleared before its release. */
typedef struct resil__proc {
	uint64_t pid;   /* 0: free */
	uint64_t owner; /* identity word; 0: free */
	uint64_t pad[6];
} resil__proc;

/* This process's identity word. */
uint64_t resil__proc_id_self(void);

/* Whether the process of identity word id is alive (false for 0). */
bool resil__proc_id_alive(uint64_t id);

/* Whether process slot i of procs (RESIL__PROCS of them) holds a live
 * process. */
bool resil__proc_alive(const resil__proc *procs, unsigned i);

/* Whether slot i, whose process is dead, is still named by the region's
 * state (a transition or lock it held that others have not yet taken
 * over): such a slot is not claimed. */
typedef bool (*resil__proc_busy_fn)(unsigned i, void *ctx);

/*
 * The slot-claim protocol: take the first slot of procs that is free or
 * whose process is dead (and not busy(i, ctx); busy may be NULL), for this
 * process, with one compare-and-swap of its owner word. Returns false
 * when no slot can be taken. On true, *slot is the slot and *prev the pid
 * that held it (0: it was free); a slot taken over from a dead process
 * still holds that process's leftovers, which the caller clears.
 */
bool resil__proc_claim(resil__proc *procs, unsigned *slot, uint64_t *prev,
    resil__proc_busy_fn busy, void *ctx);

/* Give slot back (this process is detaching). */
void resil__proc_release(resil__proc *procs, unsigned slot);

#endif /* RESIL_PROC_H */

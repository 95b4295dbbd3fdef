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

/* One process slot: the pid and its start time (/proc/PID/stat field 22),
 * so a pid reused by another process is not taken for the dead one. One
 * cache line each. */
typedef struct resil__proc {
	uint64_t pid; /* 0: free */
	uint64_t start;
	uint64_t pad[6];
} resil__proc;

/* Whether process slot i of procs (RESIL__PROCS of them) holds a live
 * process. */
bool resil__proc_alive(const resil__proc *procs, unsigned i);

/*
 * The slot-claim protocol: take the first slot of procs that is free or
 * whose process is dead, for this process (its pid, then its start time).
 * Returns false when every slot holds a live process. On true, *slot is
 * the slot and *prev the pid that held it (0: it was free); a slot taken
 * over from a dead process still holds that process's leftovers, which
 * the caller clears.
 */
bool resil__proc_claim(resil__proc *procs, unsigned *slot, uint64_t *prev);

/* Give slot back (this process is detaching). */
void resil__proc_release(resil__proc *procs, unsigned slot);

#endif /* RESIL_PROC_H */

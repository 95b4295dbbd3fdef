/*
 * Safe memory reclamation over Concurrency Kit's ck_epoch, for objects that
 * readers reach through one published pointer and a writer replaces: the
 * directory's snapshots, a balancer's hash ring, and later the pipeline's
 * retired mock configurations.
 *
 * A domain owns a fixed number of reader slots (ck_epoch records), claimed
 * for the length of one read section, so any thread may read without
 * registering and without thread-local state; a reader that finds every
 * slot taken spins until one frees (sections are a few loads long). Writers
 * retire an object with resil__epoch_retire(): its destructor runs once no
 * section that could have seen it is open, either in a later
 * resil__epoch_reclaim() (non-blocking) or in resil__epoch_synchronize()
 * (waits for the readers of now).
 *
 * Thread safety: enter/exit from any number of threads at once; retire,
 * reclaim and synchronize from any thread (they take the domain's writer
 * lock); new and free must not overlap any other call. A destructor runs
 * on the thread that calls retire, reclaim, synchronize or free, with the
 * writer lock held: it must not call back into the domain.
 *
 * ThreadSanitizer cannot see the ordering that libck's (uninstrumented)
 * grace-period detection provides, so under TSan each exit releases its
 * slot and the writer acquires every slot before running a destructor.
 */
#ifndef RESIL_EPOCH_H
#define RESIL_EPOCH_H

#include <ck_epoch.h>

#include "internal.h"

typedef struct resil__epoch resil__epoch;

/* Embed in the retired object; the destructor gets it back. */
typedef struct resil__epoch_entry resil__epoch_entry;
typedef void (*resil__epoch_fn)(resil__epoch_entry *entry);
struct resil__epoch_entry {
	ck_epoch_entry_t ck; /* first: ck gives back this address */
	resil__epoch_fn fn;
	resil__epoch *domain;
};

/* The slot a read section holds; caller storage, one per open section. */
typedef struct resil__epoch_guard {
	void *slot;
} resil__epoch_guard;

/* A domain with slots reader slots (0: 64; rounded up to a power of 2). */
resil_err resil__epoch_new(
    resil__epoch **out, unsigned slots, const resil_allocator *alloc);

/* Run every pending destructor (waiting for open sections), then free. */
void resil__epoch_free(resil__epoch *e);

void resil__epoch_enter(resil__epoch *e, resil__epoch_guard *g);
void resil__epoch_exit(resil__epoch *e, resil__epoch_guard *g);

/* Run fn(entry) once every section open now has closed. */
void resil__epoch_retire(
    resil__epoch *e, resil__epoch_entry *entry, resil__epoch_fn fn);

/* Run the destructors whose grace period has passed; never waits. */
void resil__epoch_reclaim(resil__epoch *e);

/* Wait for the sections open now, then run every pending destructor. */
void resil__epoch_synchronize(resil__epoch *e);

/* Objects retired and not yet destroyed (for tests). */
uint64_t resil__epoch_pending(resil__epoch *e);

#endif /* RESIL_EPOCH_H */

/*
 * The bulkhead's queue and priorities (issue 42): lib/limit_queue.c (the
 * queue, below lib/limit.c: what it calls when a bulkhead is full, has
 * waiters or reserves slots for classes) and lib/limit_wait.c (the
 * public waiting functions, above it). Never installed.
 *
 * The in-flight word of an exact bulkhead is [waiting:32][count:32]. Its
 * fast paths (try_acquire: word < limit; release: word <= UINT32_MAX)
 * are the ones of a bulkhead that does not wait: a waiter in the high
 * half sends every acquire and release to the slow paths here, which
 * decide under the queue's lock. While a waiter is queued the word
 * changes only under that lock, so a release hands its slot to the
 * first waiter (the count stays, the waiting half drops by one), and a
 * newcomer can never take a slot a waiter should have had.
 */
#ifndef RESIL_LIMIT_WAIT_H
#define RESIL_LIMIT_WAIT_H

#include <resil/limit.h>

#include "waitq.h"

#define BHQ_ONE_WAITER (UINT64_C(1) << 32)
#define BHQ_COUNT(w) ((w)&UINT32_MAX)
#define BHQ_NWAIT(w) ((w) >> 32)

typedef struct resil__bhq {
	resil__waitq q;
	uint64_t max_wait; /* 0: no waiting */
	/* Slots class c (0 sheddable, 1 default, 2 critical) may not use. */
	uint32_t res[RESIL__WAITQ_CLASSES];
	uint64_t *word;       /* the bulkhead's in_flight */
	const uint64_t *ctl;  /* [limit:32][...] */
	const resil_clock *clock;
	uint64_t waited, timeouts, full;
} resil__bhq;

/* A new queue for cfg (needs one: max_wait_ns, reserve_*), or NULL when
 * it needs none; *err RESIL_E_NOMEM on failure. */
resil__bhq *resil__bhq_new(const resil_bulkhead_config *cfg,
    const resil_allocator *a, uint64_t *word, const uint64_t *ctl,
    const resil_clock *clock, resil_err *err);
void resil__bhq_free(resil__bhq *q, const resil_allocator *a);

/* The queue's class of a priority (UNSET: DEFAULT). */
static inline unsigned
resil__bhq_cls(resil_priority prio)
{
	return prio == RESIL_PRIORITY_UNSET ? 1u : (unsigned)prio - 1u;
}

/* An acquire of class cls the fast path did not grant: granted (RESIL_OK,
 * *peak the count after it) or RESIL_E_LIMITED. Never waits. */
resil_err resil__bhq_try(resil__bhq *q, unsigned cls, uint64_t *peak);

/* A release with waiters in the word: hands the slot on, or frees it.
 * RESIL_OK; RESIL_E_MISUSE when nothing is in flight. */
resil_err resil__bhq_release(resil__bhq *q);

/* What the queue's waits answer. */
enum { BHQ_GRANTED, BHQ_QUEUED, BHQ_REFUSED, BHQ_WAITS, BHQ_MISUSE };

/* Start a wait of class cls in w: GRANTED (*peak the count after),
 * QUEUED, or REFUSED (no waiting configured, or the queue full). */
int resil__bhq_start(resil__bhq *q, unsigned cls, resil_bulkhead_waiter *w,
    void (*wake)(void *ctx), void *wake_ctx, uint64_t now, uint64_t *peak);
/* A queued w at now: GRANTED (*peak), WAITS, REFUSED (the deadline came:
 * off the queue) or MISUSE (not waiting). */
int resil__bhq_poll(
    resil__bhq *q, resil_bulkhead_waiter *w, uint64_t now, uint64_t *peak);
/* The limit rose (an adaptive bulkhead): hand the slots it opened to
 * the waiters at once, the highest class first, each one's wake-up
 * fired after the lock is dropped. Returns how many were handed. */
uint32_t resil__bhq_grow(resil__bhq *q);
/* Take w off the queue: REFUSED (it left), GRANTED (it had been handed a
 * slot: the caller's to release), MISUSE (not waiting). */
int resil__bhq_cancel(resil__bhq *q, resil_bulkhead_waiter *w);
/* When a queued w started waiting. */
uint64_t resil__bhq_start_time(const resil_bulkhead_waiter *w);

/* The blocking wait on a queued waiter: until it is handed a slot or the
 * queue's clock reads until (the blocking drivers). */
void resil__bulkhead_wait_block(resil_bulkhead_waiter *w, uint64_t until);

/* What lib/limit.c gives lib/limit_wait.c: the bulkhead's queue, its
 * grant and refusal counting (the listener's rejection event), and an
 * acquire of a class that never waits. */
resil__bhq *resil__bulkhead_q(resil_bulkhead *bh);
void resil__bulkhead_granted(resil_bulkhead *bh, uint64_t peak);
void resil__bulkhead_refused(resil_bulkhead *bh);
resil_err resil__bulkhead_try_cls(resil_bulkhead *bh, unsigned cls);

#endif /* RESIL_LIMIT_WAIT_H */

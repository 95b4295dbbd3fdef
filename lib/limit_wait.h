/*
 * The bulkhead's queue and priorities (lib/limit_wait.c, issue 42):
 * what lib/limit.c calls when a bulkhead is full, or has waiters, or
 * reserves slots for classes. Never installed.
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
#define BHQ_WAITING(w) ((w) >> 32)

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

/* An acquire of class cls the fast path did not grant: granted (RESIL_OK,
 * *peak the count after it) or RESIL_E_LIMITED. Never waits. */
resil_err resil__bhq_try(resil__bhq *q, unsigned cls, uint64_t *peak);

/* A release with waiters in the word: hands the slot on, or frees it.
 * RESIL_OK; RESIL_E_MISUSE when nothing is in flight. */
resil_err resil__bhq_release(resil__bhq *q);

/* What limit.c gives back: the bulkhead's queue, its grant and
 * refusal counting (the listener's rejection event). */
resil__bhq *resil__bulkhead_q(resil_bulkhead *bh);
void resil__bulkhead_granted(resil_bulkhead *bh, uint64_t peak);
void resil__bulkhead_refused(resil_bulkhead *bh);

/* resil_bulkhead_acquire_wait() past its fast path. */
resil_err resil__bhq_acquire_wait(
    resil_bulkhead *bh, resil_priority prio, uint64_t *waited);

/* The blocking driver's wait on a machine's waiter: until it is handed
 * a slot or the clock reads until. */
void resil__bulkhead_wait_block(resil_bulkhead_waiter *w, uint64_t until);

#endif /* RESIL_LIMIT_WAIT_H */

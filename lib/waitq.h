/*
 * The waiter queue (lib/waitq.c, issue 42): threads and call machines
 * that wait for something another thread hands out (a bulkhead's permit;
 * issue 43's coalesced answer). Generic: it knows nothing of permits.
 * Never installed.
 *
 * A waiter lives in the waiting party's storage (a blocking driver's
 * stack frame, a call machine's state). It is woken either through the
 * clock's wait primitive (resil_clock_wait/wake on its state word: the
 * blocking driver) or through a hook its owner gave (the call machine's
 * caller: an eventfd, a uv_async, a callback).
 *
 * The queue holds up to max_len waiters in RESIL__WAITQ_CLASSES classes
 * (priorities: class 0 lowest); each class is FIFO or LIFO; pop takes
 * from the highest class asked. Its spin lock serialises push, remove
 * and pop (callers hold it through resil__waitq_lock() for compound
 * decisions, as the bulkhead does with its count); a waiter's state is
 * set under the lock (resil__waiter_settle), and the wake-up itself
 * (resil__wakeup_fire) runs after the lock is dropped, from a copy, so
 * that a woken waiter may return (and its storage go) at once and a hook
 * may call back into the owner of the queue.
 */
#ifndef RESIL_WAITQ_H
#define RESIL_WAITQ_H

#include <resil/clock.h>

#include "atomic.h"

#define RESIL__WAITQ_CLASSES 3

/* A waiter's state: WAITING until settled with a nonzero value. */
#define RESIL__W_WAITING 0u

typedef void (*resil__wake_hook)(void *ctx);

typedef struct resil__waiter {
	uint32_t state; /* RESIL__W_WAITING, or the value it was settled with */
	uint8_t queued; /* on a queue (under its lock) */
	uint8_t cls;    /* its class, 0..RESIL__WAITQ_CLASSES - 1 */
	struct resil__waiter *prev, *next;
	const resil_clock *clock; /* wakes the state word: no hook */
	resil__wake_hook hook;    /* NULL: through the clock */
	void *hook_ctx;
} resil__waiter;

typedef struct resil__waitq {
	resil__spinlock lock;
	uint8_t lifo;
	uint32_t max_len; /* across all classes */
	uint32_t len;
	uint32_t lens[RESIL__WAITQ_CLASSES];
	resil__waiter *head[RESIL__WAITQ_CLASSES];
	resil__waiter *tail[RESIL__WAITQ_CLASSES];
} resil__waitq;

/* What a settled waiter is woken with, copied under the lock. */
typedef struct resil__wakeup {
	const uint32_t *word;
	const resil_clock *clock;
	resil__wake_hook hook;
	void *hook_ctx;
} resil__wakeup;

void resil__waitq_init(resil__waitq *q, uint32_t max_len, int lifo);

/* A waiter that wakes through clock (hook NULL) or through hook(ctx). */
void resil__waiter_init(resil__waiter *w, const resil_clock *clock,
    resil__wake_hook hook, void *hook_ctx);

static inline void
resil__waitq_lock(resil__waitq *q)
{
	resil__spin_lock(&q->lock);
}

static inline void
resil__waitq_unlock(resil__waitq *q)
{
	resil__spin_unlock(&q->lock);
}

/* ---- under the lock ---- */

/* Queue w (state WAITING) in class cls; RESIL_E_LIMITED when the queue
 * holds max_len already (w not queued). */
resil_err resil__waitq_push(resil__waitq *q, resil__waiter *w, unsigned cls);

/* Take w off the queue: 1 when it was queued, 0 when it was not (it was
 * popped, settled, or never queued). */
int resil__waitq_remove(resil__waitq *q, resil__waiter *w);

/* The waiter pop would take from class cls (NULL: none queued). */
resil__waiter *resil__waitq_first(const resil__waitq *q, unsigned cls);

/* Queued waiters of class cls or higher. */
uint32_t resil__waitq_count_from(const resil__waitq *q, unsigned cls);

/* Take the first waiter of class cls off the queue and settle it with
 * value (nonzero), filling *wk for resil__wakeup_fire(). NULL when none
 * is queued. */
resil__waiter *resil__waitq_pop_settle(
    resil__waitq *q, unsigned cls, uint32_t value, resil__wakeup *wk);

/* ---- any time ---- */

/* Wake the waiter *wk was taken from (after the lock is dropped). */
void resil__wakeup_fire(const resil__wakeup *wk);

/* Settle and wake up to n waiters, highest class first (n UINT32_MAX:
 * all): the queue's own "wake one" and "wake all". Returns how many. */
uint32_t resil__waitq_wake(resil__waitq *q, uint32_t n, uint32_t value);

/* w's state now (an acquire load). */
static inline uint32_t
resil__waiter_state(const resil__waiter *w)
{
	return resil__load32(&w->state);
}

/* Block until w is settled or its clock reads deadline: the state, or
 * RESIL__W_WAITING at the deadline (w is still queued then: the caller
 * takes it off under the lock, where it may find it settled after all). */
uint32_t resil__waiter_wait(resil__waiter *w, uint64_t deadline);

#endif /* RESIL_WAITQ_H */

/*
 * The waiter queue (lib/waitq.h): intrusive lists, one per class, under
 * one spin lock; wake-ups through the clock's wait primitive or a hook.
 */
#include "waitq.h"

#include <string.h>

void
resil__waitq_init(resil__waitq *q, uint32_t max_len, int lifo)
{
	memset(q, 0, sizeof(*q));
	resil__spin_init(&q->lock);
	q->max_len = max_len;
	q->lifo = lifo != 0;
}

void
resil__waiter_init(resil__waiter *w, const resil_clock *clock,
    resil__wake_hook hook, void *hook_ctx)
{
	memset(w, 0, sizeof(*w));
	w->clock = clock;
	w->hook = hook;
	w->hook_ctx = hook_ctx;
}

resil_err
resil__waitq_push(resil__waitq *q, resil__waiter *w, unsigned cls)
{
	if (q->len >= q->max_len || cls >= RESIL__WAITQ_CLASSES)
		return RESIL_E_LIMITED;
	resil__store32(&w->state, RESIL__W_WAITING);
	w->cls = (uint8_t)cls;
	w->queued = 1;
	if (q->lifo) {
		/* The newest is popped first: in at the head. */
		w->prev = NULL;
		w->next = q->head[cls];
		if (q->head[cls] != NULL)
			q->head[cls]->prev = w;
		else
			q->tail[cls] = w;
		q->head[cls] = w;
	} else {
		w->next = NULL;
		w->prev = q->tail[cls];
		if (q->tail[cls] != NULL)
			q->tail[cls]->next = w;
		else
			q->head[cls] = w;
		q->tail[cls] = w;
	}
	q->len++;
	q->lens[cls]++;
	return RESIL_OK;
}

int
resil__waitq_remove(resil__waitq *q, resil__waiter *w)
{
	unsigned cls = w->cls;

	if (!w->queued)
		return 0;
	if (w->prev != NULL)
		w->prev->next = w->next;
	else
		q->head[cls] = w->next;
	if (w->next != NULL)
		w->next->prev = w->prev;
	else
		q->tail[cls] = w->prev;
	w->prev = w->next = NULL;
	w->queued = 0;
	q->len--;
	q->lens[cls]--;
	return 1;
}

resil__waiter *
resil__waitq_first(const resil__waitq *q, unsigned cls)
{
	return cls < RESIL__WAITQ_CLASSES ? q->head[cls] : NULL;
}

uint32_t
resil__waitq_count_from(const resil__waitq *q, unsigned cls)
{
	uint32_t n = 0;

	for (; cls < RESIL__WAITQ_CLASSES; cls++)
		n += q->lens[cls];
	return n;
}

resil__waiter *
resil__waitq_pop_settle(
    resil__waitq *q, unsigned cls, uint32_t value, resil__wakeup *wk)
{
	resil__waiter *w = resil__waitq_first(q, cls);

	if (w == NULL)
		return NULL;
	resil__waitq_remove(q, w);
	/* Copy what the wake-up needs first: once the state is set, the
	 * waiter may see it, return, and its storage go. */
	wk->word = &w->state;
	wk->clock = w->clock;
	wk->hook = w->hook;
	wk->hook_ctx = w->hook_ctx;
	resil__store32(&w->state, value);
	return w;
}

void
resil__wakeup_fire(const resil__wakeup *wk)
{
	if (wk->hook != NULL)
		wk->hook(wk->hook_ctx);
	else
		/* The word may be gone already: a futex wake on it is then
		 * at worst a spurious wake of whoever waits there, and every
		 * waiter looks again. */
		resil_clock_wake(wk->clock, wk->word);
}

uint32_t
resil__waitq_wake(resil__waitq *q, uint32_t n, uint32_t value)
{
	uint32_t done = 0;
	resil__wakeup wk;
	unsigned cls;

	while (done < n) {
		resil__waiter *w = NULL;

		resil__waitq_lock(q);
		for (cls = RESIL__WAITQ_CLASSES; cls-- > 0 && w == NULL;)
			w = resil__waitq_pop_settle(q, cls, value, &wk);
		resil__waitq_unlock(q);
		if (w == NULL)
			break;
		resil__wakeup_fire(&wk);
		done++;
	}
	return done;
}

uint32_t
resil__waiter_wait(resil__waiter *w, uint64_t deadline)
{
	(void)resil_clock_wait(w->clock, &w->state, RESIL__W_WAITING, deadline);
	return resil__waiter_state(w);
}

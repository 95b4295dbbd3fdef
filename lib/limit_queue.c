/*
 * The bulkhead's queue (issue 42): the slow paths of lib/limit.c's exact
 * bulkhead, under the queue's lock (lib/limit_wait.h says why the word
 * is enough). It knows the word, the limit and the queue, not the
 * bulkhead: lib/limit.c and lib/limit_wait.c count and answer.
 */
#define _POSIX_C_SOURCE 200809L /* strcasecmp */

#include "limit_wait.h"

#include <string.h>
#include <strings.h>

#include "internal.h"

/* A resil_bulkhead_waiter's insides. */
typedef struct bhw {
	resil__waiter w;
	uint64_t start;
	uint64_t deadline;
	uint8_t active; /* started and queued, not yet polled to an end */
} bhw;

_Static_assert(sizeof(bhw) <= sizeof(resil_bulkhead_waiter),
    "resil_bulkhead_waiter holds a bhw");
_Static_assert(_Alignof(bhw) <= _Alignof(resil_bulkhead_waiter),
    "resil_bulkhead_waiter's alignment");

/* The waiter's state once a slot is handed to it. */
#define W_GRANTED 1u

resil__bhq *
resil__bhq_new(const resil_bulkhead_config *cfg, const resil_allocator *a,
    uint64_t *word, const uint64_t *ctl, const resil_clock *clock,
    resil_err *err)
{
	resil__bhq *q;

	*err = RESIL_OK;
	if (cfg->max_wait_ns == 0 && cfg->reserve_critical == 0 &&
	    cfg->reserve_default == 0)
		return NULL;
	q = resil__alloc(a, sizeof(*q));
	if (q == NULL) {
		*err = RESIL_E_NOMEM;
		return NULL;
	}
	memset(q, 0, sizeof(*q));
	resil__waitq_init(&q->q, cfg->max_wait_ns > 0 ? cfg->queue : 0,
	    cfg->order == RESIL_BULKHEAD_LIFO);
	q->max_wait = cfg->max_wait_ns;
	q->res[0] = cfg->reserve_critical + cfg->reserve_default;
	q->res[1] = cfg->reserve_critical;
	q->res[2] = 0;
	q->word = word;
	q->ctl = ctl;
	q->clock = clock;
	return q;
}

void
resil__bhq_free(resil__bhq *q, const resil_allocator *a)
{
	if (q != NULL)
		resil__free(a, q, sizeof(*q));
}

static uint64_t
cap(const resil__bhq *q, unsigned cls)
{
	uint64_t lim = resil__load64(q->ctl) >> 32;

	return lim > q->res[cls] ? lim - q->res[cls] : 0;
}

/* Under the lock: take a slot for class cls if it may have one now (a
 * slot of its own classes free, and no waiter of its class or higher
 * queued ahead). 1 granted (*peak the count after), 0 not. */
static int
take_locked(resil__bhq *q, unsigned cls, uint64_t *peak)
{
	uint64_t cur;

	if (resil__waitq_count_from(&q->q, cls) != 0)
		return 0;
	for (;;) {
		cur = resil__load64(q->word);
		if (BHQ_COUNT(cur) >= cap(q, cls))
			return 0;
		if (resil__cas64(q->word, cur, cur + 1)) {
			*peak = BHQ_COUNT(cur) + 1;
			return 1;
		}
	}
}

resil_err
resil__bhq_try(resil__bhq *q, unsigned cls, uint64_t *peak)
{
	uint64_t cur = resil__load64(q->word);
	int ok;

	/* Nobody queued: one CAS decides the class's share (the count and
	 * the check are the same word, so the shares never overshoot). */
	while (BHQ_NWAIT(cur) == 0) {
		if (BHQ_COUNT(cur) >= cap(q, cls))
			return RESIL_E_LIMITED;
		if (resil__cas64(q->word, cur, cur + 1)) {
			*peak = BHQ_COUNT(cur) + 1;
			return RESIL_OK;
		}
		cur = resil__load64(q->word);
	}
	resil__waitq_lock(&q->q);
	ok = take_locked(q, cls, peak);
	resil__waitq_unlock(&q->q);
	return ok ? RESIL_OK : RESIL_E_LIMITED;
}

resil_err
resil__bhq_release(resil__bhq *q)
{
	resil__wakeup wk;
	uint64_t cur, n1;
	unsigned c;

	resil__waitq_lock(&q->q);
	for (;;) {
		cur = resil__load64(q->word);
		if (BHQ_COUNT(cur) == 0) {
			resil__waitq_unlock(&q->q);
			return RESIL_E_MISUSE;
		}
		n1 = BHQ_COUNT(cur) - 1; /* in flight without this call */
		for (c = RESIL__WAITQ_CLASSES; c-- > 0;)
			if (resil__waitq_first(&q->q, c) != NULL &&
			    n1 < cap(q, c))
				break;
		if (c < RESIL__WAITQ_CLASSES && BHQ_NWAIT(cur) > 0) {
			/* Handed on: the count stays, one waiter fewer. */
			if (!resil__cas64(q->word, cur, cur - BHQ_ONE_WAITER))
				continue;
			(void)resil__waitq_pop_settle(
			    &q->q, c, W_GRANTED, &wk);
			resil__waitq_unlock(&q->q);
			resil__inc64(&q->waited);
			resil__wakeup_fire(&wk);
			return RESIL_OK;
		}
		if (resil__cas64(q->word, cur, cur - 1))
			break;
	}
	resil__waitq_unlock(&q->q);
	return RESIL_OK;
}

int
resil__bhq_start(resil__bhq *q, unsigned cls, resil_bulkhead_waiter *w,
    void (*wake)(void *ctx), void *wake_ctx, uint64_t now, uint64_t *peak)
{
	bhw *x = (bhw *)(void *)w;
	uint64_t cur;

	memset(w, 0, sizeof(*w));
	resil__waiter_init(&x->w, q->clock, wake, wake_ctx);
	resil__waitq_lock(&q->q);
	for (;;) {
		if (take_locked(q, cls, peak)) {
			resil__waitq_unlock(&q->q);
			return BHQ_GRANTED;
		}
		cur = resil__load64(q->word);
		if (q->max_wait == 0 || q->q.len >= q->q.max_len) {
			resil__waitq_unlock(&q->q);
			if (q->max_wait != 0)
				resil__inc64(&q->full);
			return BHQ_REFUSED;
		}
		/* The waiter shows in the word before any release can look
		 * for it (the lock orders the queue; the word, the fast
		 * paths). */
		if (resil__cas64(q->word, cur, cur + BHQ_ONE_WAITER))
			break;
	}
	(void)resil__waitq_push(&q->q, &x->w, cls);
	resil__waitq_unlock(&q->q);
	x->start = now;
	x->deadline = now > UINT64_MAX - q->max_wait ? UINT64_MAX
	                                             : now + q->max_wait;
	x->active = 1;
	return BHQ_QUEUED;
}

/* Take x off the queue if it is still there: 1 done (no slot), 0 it was
 * handed a slot meanwhile. */
static int
leave(resil__bhq *q, bhw *x)
{
	uint64_t cur;

	resil__waitq_lock(&q->q);
	if (resil__waiter_state(&x->w) == W_GRANTED) {
		resil__waitq_unlock(&q->q);
		return 0;
	}
	(void)resil__waitq_remove(&q->q, &x->w);
	do
		cur = resil__load64(q->word);
	while (!resil__cas64(q->word, cur, cur - BHQ_ONE_WAITER));
	resil__waitq_unlock(&q->q);
	return 1;
}

int
resil__bhq_poll(
    resil__bhq *q, resil_bulkhead_waiter *w, uint64_t now, uint64_t *peak)
{
	bhw *x = (bhw *)(void *)w;

	if (!x->active)
		return BHQ_MISUSE;
	if (resil__waiter_state(&x->w) != W_GRANTED) {
		if (now < x->deadline)
			return BHQ_WAITS;
		x->active = 0;
		if (leave(q, x)) {
			resil__inc64(&q->timeouts);
			return BHQ_REFUSED;
		}
		/* Handed a slot at the last moment. */
	}
	x->active = 0;
	*peak = BHQ_COUNT(resil__load64(q->word));
	return BHQ_GRANTED;
}

int
resil__bhq_cancel(resil__bhq *q, resil_bulkhead_waiter *w)
{
	bhw *x = (bhw *)(void *)w;

	if (!x->active)
		return BHQ_MISUSE;
	x->active = 0;
	return leave(q, x) ? BHQ_REFUSED : BHQ_GRANTED;
}

resil_err
resil_bulkhead_wait_cut(resil_bulkhead_waiter *w, uint64_t until)
{
	bhw *x = (bhw *)(void *)w;

	if (x == NULL)
		return RESIL_E_INVAL;
	if (!x->active)
		return RESIL_E_MISUSE;
	/* Only the owner reads or writes its deadline (poll, the getter). */
	if (until < x->deadline)
		x->deadline = until;
	return RESIL_OK;
}

uint32_t
resil__bhq_grow(resil__bhq *q)
{
	resil__wakeup wk;
	uint64_t cur;
	uint32_t handed = 0;
	unsigned c;

	for (;;) {
		resil__waitq_lock(&q->q);
		cur = resil__load64(q->word);
		if (BHQ_NWAIT(cur) == 0) {
			resil__waitq_unlock(&q->q);
			return handed;
		}
		/* The highest class waiting that a slot below its cap now
		 * fits: the count and the waiters move together, under the
		 * lock (as a release hands on). */
		for (c = RESIL__WAITQ_CLASSES; c-- > 0;)
			if (resil__waitq_first(&q->q, c) != NULL &&
			    BHQ_COUNT(cur) < cap(q, c))
				break;
		if (c >= RESIL__WAITQ_CLASSES) {
			resil__waitq_unlock(&q->q);
			return handed;
		}
		if (!resil__cas64(q->word, cur, cur + 1 - BHQ_ONE_WAITER)) {
			resil__waitq_unlock(&q->q);
			continue;
		}
		(void)resil__waitq_pop_settle(&q->q, c, W_GRANTED, &wk);
		resil__waitq_unlock(&q->q);
		resil__inc64(&q->waited);
		/* One wake-up per handing, after the lock is dropped. */
		resil__wakeup_fire(&wk);
		handed++;
	}
}

uint64_t
resil__bhq_start_time(const resil_bulkhead_waiter *w)
{
	return ((const bhw *)(const void *)w)->start;
}

uint64_t
resil_bulkhead_wait_deadline(const resil_bulkhead_waiter *w)
{
	const bhw *x = (const bhw *)(const void *)w;

	return x == NULL ? 0 : x->deadline;
}

void
resil__bulkhead_wait_block(resil_bulkhead_waiter *w, uint64_t until)
{
	bhw *x = (bhw *)(void *)w;

	if (x->active)
		(void)resil__waiter_wait(&x->w, until);
}

const char *
resil_priority_name(resil_priority p)
{
	switch (p) {
	case RESIL_PRIORITY_UNSET:
		return "unset";
	case RESIL_PRIORITY_SHEDDABLE:
		return "sheddable";
	case RESIL_PRIORITY_DEFAULT:
		return "default";
	case RESIL_PRIORITY_CRITICAL:
		return "critical";
	}
	return "unknown";
}

resil_err
resil_priority_parse(const char *text, resil_priority *out)
{
	static const char *const names[] = { "sheddable", "default",
		"critical" };
	unsigned i;

	if (text == NULL || out == NULL)
		return RESIL_E_INVAL;
	for (i = 0; i < 3; i++)
		if (strcasecmp(text, names[i]) == 0) {
			*out = (resil_priority)(i + 1);
			return RESIL_OK;
		}
	return RESIL_E_INVAL;
}

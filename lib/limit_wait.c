/*
 * The bulkhead that waits, and its priorities (issue 42): the public
 * face of lib/limit_queue.c's queue, counted and answered through
 * lib/limit.c.
 */
#include "limit_wait.h"

#include <string.h>

#include "internal.h"

static int
prio_ok(resil_priority prio)
{
	return (unsigned)prio <= (unsigned)RESIL_PRIORITY_CRITICAL;
}

resil_err
resil_bulkhead_try_acquire_prio(resil_bulkhead *bh, resil_priority prio)
{
	if (bh == NULL || !prio_ok(prio))
		return RESIL_E_INVAL;
	return resil__bulkhead_try_cls(bh, resil__bhq_cls(prio));
}

resil_err
resil_bulkhead_wait_start(resil_bulkhead *bh, resil_priority prio,
    resil_bulkhead_waiter *w, void (*wake)(void *ctx), void *wake_ctx,
    uint64_t now, int *queued)
{
	resil__bhq *q;
	uint64_t peak = 0;

	if (bh == NULL || w == NULL || queued == NULL || !prio_ok(prio))
		return RESIL_E_INVAL;
	q = resil__bulkhead_q(bh);
	*queued = 0;
	memset(w, 0, sizeof(*w));
	if (q == NULL || q->max_wait == 0)
		return resil_bulkhead_try_acquire_prio(bh, prio);
	switch (resil__bhq_start(
	    q, resil__bhq_cls(prio), w, wake, wake_ctx, now, &peak)) {
	case BHQ_GRANTED:
		resil__bulkhead_granted(bh, peak);
		return RESIL_OK;
	case BHQ_QUEUED:
		*queued = 1;
		return RESIL_OK;
	default:
		resil__bulkhead_refused(bh);
		return RESIL_E_LIMITED;
	}
}

resil_err
resil_bulkhead_wait_poll(resil_bulkhead *bh, resil_bulkhead_waiter *w,
    uint64_t now, int *granted)
{
	resil__bhq *q;
	uint64_t peak = 0;

	if (bh == NULL || w == NULL || granted == NULL)
		return RESIL_E_INVAL;
	q = resil__bulkhead_q(bh);
	if (q == NULL)
		return RESIL_E_MISUSE;
	*granted = 0;
	switch (resil__bhq_poll(q, w, now, &peak)) {
	case BHQ_GRANTED:
		*granted = 1;
		resil__bulkhead_granted(bh, peak);
		return RESIL_OK;
	case BHQ_WAITS:
		return RESIL_OK;
	case BHQ_REFUSED:
		resil__bulkhead_refused(bh);
		return RESIL_E_LIMITED;
	default:
		return RESIL_E_MISUSE;
	}
}

resil_err
resil_bulkhead_wait_cancel(resil_bulkhead *bh, resil_bulkhead_waiter *w)
{
	resil__bhq *q;

	if (bh == NULL || w == NULL)
		return RESIL_E_INVAL;
	q = resil__bulkhead_q(bh);
	if (q == NULL)
		return RESIL_E_MISUSE;
	switch (resil__bhq_cancel(q, w)) {
	case BHQ_REFUSED:
		return RESIL_OK;
	case BHQ_GRANTED:
		/* Handed a slot meanwhile: counted, and handed on. */
		resil__bulkhead_granted(bh, BHQ_COUNT(resil__load64(q->word)));
		return resil_bulkhead_release(bh);
	default:
		return RESIL_E_MISUSE;
	}
}

uint32_t
resil_bulkhead_waiting(resil_bulkhead *bh)
{
	resil__bhq *q = bh == NULL ? NULL : resil__bulkhead_q(bh);

	return q == NULL ? 0 : (uint32_t)BHQ_NWAIT(resil__load64(q->word));
}

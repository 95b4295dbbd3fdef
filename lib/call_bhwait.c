/*
 * Issue 42: the call machine's wait for a bulkhead slot, and the call's
 * priority class. A launch whose bulkhead is full and waits keeps its
 * breaker (or fleet) permit and answers WAIT until the slot is handed to
 * it (woken through the invocation's hook) or the wait ends
 * (st->until); the blocking driver waits on the waiter's word through
 * the clock's wait primitive (resil__call_bh_block). The step that
 * follows the wait (a launch goes on) is lib/call_machine.c's
 * resil__call_bh_step(): this file uses nothing of that one.
 */
#include "call_machine.h"
#include "limit_wait.h"

resil_priority
resil__call_priority(callm *c)
{
	const resil_invocation *inv = c->inv;
	resil_priority p = RESIL_PRIORITY_UNSET;
	size_t k;

	if (c->prio_set)
		return (resil_priority)c->prio;
	/* The call's own, its attachment's, the method's, else default. */
	if (inv != NULL && inv->priority >= RESIL_PRIORITY_SHEDDABLE &&
	    inv->priority <= RESIL_PRIORITY_CRITICAL)
		p = inv->priority;
	else if (inv != NULL && inv->attachments != NULL)
		for (k = 0; k < inv->nattachments; k++)
			if (inv->attachments[k].key != NULL &&
			    (strcmp(inv->attachments[k].key, "resil.priority") ==
			            0 ||
			        strcmp(inv->attachments[k].key, "priority") ==
			            0) &&
			    resil_priority_parse(inv->attachments[k].value, &p) ==
			        RESIL_OK)
				break;
	if (p == RESIL_PRIORITY_UNSET)
		p = c->m->prio != 0 ? (resil_priority)c->m->prio
		                    : RESIL_PRIORITY_DEFAULT;
	c->prio = (uint8_t)p;
	c->prio_set = 1;
	return p;
}

resil_priority
resil_call_priority(resil_call *call)
{
	callm *c = (callm *)(void *)call;

	if (call == NULL)
		return RESIL_PRIORITY_UNSET;
	/* A call in the simple phase (or over) has no class of its own:
	 * nothing below it reads one. */
	if (c->magic != CALL_LIVE && c->magic != CALL_CLUSTER)
		return RESIL_PRIORITY_DEFAULT;
	return resil__call_priority(c);
}

int
resil__call_bh_enter(callm *c, unsigned i, resil_permit *permit,
    resil_fleet_permit *fp, int fleet, tsrc *ts, resil_call_next *st)
{
	resil_bulkhead *bh = c->g->bh;
	resil_priority prio = resil__call_priority(c);
	const resil_invocation *inv = c->inv;
	int queued = 0;

	/* Hedged and cluster calls have other attempts to run: no queue;
	 * nor without a hook on a clock that can neither wait nor sleep
	 * (the blocking driver could only spin until the wait's end). */
	if (c->p->hedge_max != 0 || c->magic == CALL_CLUSTER ||
	    ((inv == NULL || inv->wake == NULL) &&
	        (c->p->clock.wait == NULL || c->p->clock.wake == NULL) &&
	        c->p->clock.sleep == NULL))
		return resil_bulkhead_try_acquire_prio(bh, prio) == RESIL_OK;
	if (resil_bulkhead_wait_start(bh, prio, &c->bhw,
	        inv != NULL ? inv->wake : NULL,
	        inv != NULL ? inv->wake_ctx : NULL, tnow(ts),
	        &queued) != RESIL_OK)
		return 0;
	if (!queued)
		return 1;
	/* No waiting past the call's retry deadline (a wait that cannot
	 * end in an attempt is no use to it). */
	if (c->run_on && c->run.has_deadline)
		(void)resil_bulkhead_wait_cut(&c->bhw, c->run.deadline_at);
	c->bh_wait = 1;
	c->bh_slot = (uint8_t)i;
	c->bh_fleet = (uint8_t)fleet;
	if (c->breaker != NULL)
		c->bh_permit = *permit;
	if (fleet)
		c->bh_fp = *fp;
	next_is(st, RESIL_CALL_WAIT, 0, 0, resil_bulkhead_wait_deadline(&c->bhw));
	return 2;
}

void
resil__call_bh_cancel(callm *c)
{
	(void)resil_bulkhead_wait_cancel(c->g->bh, &c->bhw);
	permit_back(c, &c->bh_permit, &c->bh_fp);
	c->bh_wait = 0;
}

void
resil__call_bh_block(callm *c, uint64_t until)
{
	resil__bulkhead_wait_block(&c->bhw, until);
}

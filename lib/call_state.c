/*
 * One call's state (lib/call_state.h): what is not worth inlining into
 * every step that may need it.
 */
#include "call_state.h"

void
resil__call_abandon(callm *c)
{
	unsigned i;

	if (c->running == 0)
		return;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		slot *s = &c->slots[i];

		if (!(c->running & (1u << i)))
			continue;
		if (RESIL__UNLIKELY(s->has_permit >= 2))
			fleet_done(c, s, 1, RESIL_OUTCOME_IGNORED);
		else if (s->has_permit)
			resil_breaker_release(c->breaker, &s->permit);
		if (s->has_bh)
			resil_bulkhead_release(c->g->bh);
		s->has_permit = s->has_bh = 0;
		if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER &&
		        (c->has_pick & (1u << i)) && !resil__cl_hedging(c->p))) {
			/* Abandoned (a fork that lost, a cancelled call): the
			 * pick is released, no outcome is counted. */
			resil_selector_release(c->sel, &c->picks[i]);
			khost_end(c, i, RESIL_OUTCOME_IGNORED);
			c->has_pick &= (uint8_t) ~(1u << i);
		}
		/* Hedging across endpoints (issue 43): a hedge that lost
		 * keeps its pick; its late answer is reported to its
		 * endpoint (resil__cl_late), or the pick is released
		 * (resil__cl_release_late). */
	}
	c->abandoned |= c->running;
	/* Attempts held back by chaos were never handed out: no answer
	 * will come. */
	c->abandoned &= (uint8_t)~c->delayed;
	c->delayed = 0;
	c->running = 0;
	if (c->breaker != NULL)
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
	else if (RESIL__UNLIKELY(c->m->fleet != NULL))
		c->breaker_state = fleet_bstate(c->m->fleet);
}

int
resil__cl_hedging(const resil_pipeline *p)
{
	return p->sel != NULL && p->hedge_max != 0 &&
	    p->ccfg.strategy != RESIL_CLUSTER_FORKING;
}

void
resil__cl_release_late(callm *c)
{
	unsigned i;

	if (c->p->sel == NULL)
		return;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		uint8_t bit = (uint8_t)(1u << i);

		if ((c->abandoned & bit) && (c->has_pick & bit)) {
			resil_selector_release(c->sel, &c->picks[i]);
			khost_end(c, i, RESIL_OUTCOME_IGNORED);
			c->has_pick &= (uint8_t)~bit;
		}
	}
}

void
resil__cl_late(callm *c, unsigned i, int rc, const resil_value *v, uint64_t now)
{
	resil_pipeline *p = c->p;
	resil_pick *pk = &c->picks[i];
	uint64_t dur = now > c->slots[i].start ? now - c->slots[i].start : 0;
	resil_outcome o = p->cls.fn == NULL
	    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
	    : resil_classify(&p->cls, rc, v);

	if (p->sel == NULL || !(c->has_pick & (1u << i)))
		return;
	if (rc == RESIL_RC_TIMEOUT ||
	    (c->timeout != 0 && dur >= sat_add(c->timeout, p->late_edge)))
		o = RESIL_OUTCOME_FAILURE;
	resil_selector_report_duration(c->sel, pk, o, dur);
	khost_end(c, i, o);
	c->has_pick &= (uint8_t) ~(1u << i);
}

void
resil__cl_hedge_event(callm *c, resil_cluster_event_type t,
    const resil_pick *pk, uint64_t now)
{
	resil__cluster_event(c->p, t, c->args->method,
	    pk != NULL ? pk->address : NULL, 0, now);
}

void
resil__cl_hedge_won(callm *c, unsigned i, uint64_t now)
{
	unsigned k;

	if (c->slots[i].id != c->hedge_base)
		resil__cl_hedge_event(c, RESIL_CLUSTER_EVENT_HEDGE_WON,
		    (c->has_pick & (1u << i)) ? &c->picks[i] : NULL, now);
	for (k = 0; k < RESIL_CALL_MAX_INFLIGHT; k++)
		if ((c->running & ~c->delayed & (1u << k)) &&
		    (c->has_pick & (1u << k)))
			resil__cl_hedge_event(c,
			    RESIL_CLUSTER_EVENT_HEDGE_DROPPED, &c->picks[k], now);
}

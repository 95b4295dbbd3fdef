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
		        (c->has_pick & (1u << i)))) {
			/* Abandoned (a fork that lost, a cancelled call): the
			 * pick is released, no outcome is counted. */
			resil_selector_release(c->sel, &c->picks[i]);
			c->has_pick &= (uint8_t) ~(1u << i);
		}
	}
	c->abandoned |= c->running;
	/* Attempts held back by chaos were never handed out: no answer
	 * will come. */
	c->abandoned &= (uint8_t)~c->delayed;
	c->delayed = 0;
	c->running = 0;
	if (c->breaker != NULL)
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
	else if (RESIL__UNLIKELY(c->g->fleet != NULL))
		c->breaker_state = fleet_bstate(c->g->fleet);
}

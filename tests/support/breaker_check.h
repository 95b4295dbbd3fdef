/*
 * The transition checks of the breaker's concurrency tests
 * (test_breaker_threads, test_soak): a listener that counts transitions
 * that are illegal, out of order or reported twice, and notes the state
 * each episode (an event's seq) entered, for the probe count check.
 * Transitions are serialised, so the fields need no lock. Header-only;
 * include it after <cmocka.h>.
 */
#ifndef RESIL_TEST_BREAKER_CHECK_H
#define RESIL_TEST_BREAKER_CHECK_H

#include <stdint.h>

#include <resil/breaker.h>

typedef struct breaker_check {
	uint8_t *episode_state; /* [max_episodes], the caller's */
	uint64_t max_episodes;
	uint64_t last_seq;
	resil_breaker_state last_to; /* set it to CLOSED, the start */
	uint64_t illegal;
	uint64_t out_of_order;
	uint64_t events;
} breaker_check;

static inline int
breaker_legal(resil_breaker_state from, resil_breaker_state to)
{
	switch (from) {
	case RESIL_BREAKER_CLOSED:
		return to == RESIL_BREAKER_OPEN;
	case RESIL_BREAKER_OPEN:
		return to == RESIL_BREAKER_HALF_OPEN;
	case RESIL_BREAKER_HALF_OPEN:
		return to == RESIL_BREAKER_CLOSED || to == RESIL_BREAKER_OPEN;
	default:
		return 0;
	}
}

/* The breaker's listener; ctx is a breaker_check. */
static inline void
breaker_check_listener(const resil_breaker_event *ev, void *ctx)
{
	breaker_check *c = ctx;

	c->events++;
	if (ev->seq != c->last_seq + 1 || ev->from != c->last_to)
		c->out_of_order++;
	if (!breaker_legal(ev->from, ev->to))
		c->illegal++;
	if (ev->seq < c->max_episodes)
		c->episode_state[ev->seq] = (uint8_t)ev->to;
	c->last_seq = ev->seq;
	c->last_to = ev->to;
}

/* Every transition was legal, reported once and in order. */
static inline void
breaker_check_assert(const breaker_check *c, uint64_t transitions)
{
	assert_int_equal(c->illegal, 0);
	assert_int_equal(c->out_of_order, 0);
	assert_int_equal(c->events, transitions);
}

#endif

/*
 * A breaker fixture for the scenario tests ported from the peers' suites:
 * a manual clock, a breaker config on it with an event recorder, and
 * acquire/record helpers. Header-only (every function static inline);
 * include it after <cmocka.h>.
 */
#ifndef RESIL_TEST_BREAKER_FX_H
#define RESIL_TEST_BREAKER_FX_H

#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>

typedef struct bfx {
	resil_manual_clock mc;
	resil_breaker_config cfg;
	resil_breaker *b;
	resil_breaker_event events[32];
	resil_breaker_recorder rec;
} bfx;

static inline void
bfx_init(bfx *f, uint64_t start)
{
	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, start);
	resil_breaker_config_init(&f->cfg);
	f->cfg.clock = resil_manual_clock_hook(&f->mc);
	resil_breaker_recorder_init(&f->rec, f->events, 32);
	f->cfg.listener = resil_breaker_recorder_listener;
	f->cfg.listener_ctx = &f->rec;
}

static inline void
bfx_new(bfx *f)
{
	resil_diag diag;

	diag.msg[0] = '\0';
	if (resil_breaker_new(&f->b, &f->cfg, &diag) != RESIL_OK)
		fail_msg("resil_breaker_new: %s", diag.msg);
}

/* The breaker's state, and its metrics. */
static inline resil_breaker_state
st(bfx *f)
{
	return resil_breaker_get_state(f->b);
}

static inline resil_breaker_metrics
mx(bfx *f)
{
	resil_breaker_metrics m;

	assert_int_equal(resil_breaker_get_metrics(f->b, &m), RESIL_OK);
	return m;
}

/* Acquire; 1 if permitted. */
static inline int
try_acquire(bfx *f)
{
	resil_permit p;

	return resil_breaker_acquire(f->b, &p) == RESIL_OK;
}

/* One call with the given outcome and duration (acquire + record). */
static inline void
call_dur(bfx *f, resil_outcome o, uint64_t dur)
{
	resil_permit p;

	assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record_duration(f->b, &p, o, dur), RESIL_OK);
}

#endif

/*
 * resil breaker: the metrics snapshot, the names of states and reasons,
 * and the recording listener. Readers only: the state machine is in
 * lib/breaker.c.
 */
#include <resil/breaker.h>

#include <string.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "internal.h"

/* ---- names ---- */

const char *
resil_breaker_state_name(resil_breaker_state s)
{
	switch (s) {
	case RESIL_BREAKER_CLOSED:
		return "CLOSED";
	case RESIL_BREAKER_OPEN:
		return "OPEN";
	case RESIL_BREAKER_HALF_OPEN:
		return "HALF_OPEN";
	case RESIL_BREAKER_DISABLED:
		return "DISABLED";
	case RESIL_BREAKER_FORCED_OPEN:
		return "FORCED_OPEN";
	case RESIL_BREAKER_METRICS_ONLY:
		return "METRICS_ONLY";
	case RESIL_BREAKER_CORRUPT:
		return "CORRUPT";
	}
	return "UNKNOWN";
}

const char *
resil_breaker_reason_name(resil_breaker_reason r)
{
	switch (r) {
	case RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES:
		return "consecutive_failures";
	case RESIL_BREAKER_REASON_FAILURE_RATE:
		return "failure_rate";
	case RESIL_BREAKER_REASON_SLOW_CALL_RATE:
		return "slow_call_rate";
	case RESIL_BREAKER_REASON_WAIT_ELAPSED:
		return "wait_elapsed";
	case RESIL_BREAKER_REASON_PROBES_PASSED:
		return "probes_passed";
	case RESIL_BREAKER_REASON_PROBES_FAILED:
		return "probes_failed";
	case RESIL_BREAKER_REASON_PROBE_FAILED:
		return "probe_failed";
	case RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT:
		return "half_open_timeout";
	case RESIL_BREAKER_REASON_MANUAL:
		return "manual";
	case RESIL_BREAKER_REASON_RESTORED:
		return "restored";
	}
	return "unknown";
}

/* ---- metrics ---- */

static float
rate_pct(uint64_t part, uint64_t whole)
{
	return (float)((double)part * 100.0 / (double)whole);
}

static uint32_t
clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Window figures from t; rates once it holds at least min outcomes. */
static void
fill_window(resil_breaker_metrics *m, const totals *t, uint64_t min)
{
	m->window_calls = clamp32(t->calls);
	m->window_failures = clamp32(t->failures);
	m->window_slow = clamp32(t->slow);
	if (t->calls > 0 && t->calls >= min) {
		m->failure_rate = rate_pct(t->failures, t->calls);
		m->slow_call_rate = rate_pct(t->slow, t->calls);
	}
}

resil_err
resil_breaker_get_metrics(resil_breaker *b, resil_breaker_metrics *out)
{
	struct bstate *st;
	resil_breaker_metrics m;
	uint64_t w, now, since, p;
	unsigned i;
	totals t;

	if (b == NULL || out == NULL)
		return RESIL_E_INVAL;
	st = b->st;
	memset(&m, 0, sizeof(m));
	w = resil__load64(&st->word);
	now = now_coarse(b);
	since = resil__load64(&st->since);
	m.state = b->shared && resil__shared_word_corrupt(w)
	    ? RESIL_BREAKER_CORRUPT
	    : w_state_checked(w);
	m.time_in_state = now > since ? now - since : 0;
	m.transitions = w_episode(w);
	m.open_wait = resil__load64(&st->wait);
	for (i = 0; i < NSTRIPES; i++) {
		stripe *s = &st->stripes[i];

		m.successes += resil__load64(&s->successes);
		m.failures += resil__load64(&s->failures);
		m.slow_calls += resil__load64(&s->slow);
		m.ignored += resil__load64(&s->ignored);
		m.rejections += resil__load64(&s->rejections);
		m.stale += resil__load64(&s->stale);
	}
	m.failure_rate = -1.0f;
	m.slow_call_rate = -1.0f;
	p = resil__load64(&st->probes);
	if (m.state == RESIL_BREAKER_HALF_OPEN ||
	    ((m.state == RESIL_BREAKER_OPEN ||
	         m.state == RESIL_BREAKER_FORCED_OPEN) &&
	        resil__load64(&st->open_shows_probes))) {
		/* The probes of this episode, or of the one that reopened
		 * the breaker: judged once all have reported. */
		if (m.state != RESIL_BREAKER_HALF_OPEN ||
		    P_TAG(p) == P_TAG_OF(w_episode(w))) {
			t.calls = P_REPORTED(p);
			t.failures = P_FAILED(p);
			t.slow = P_SLOW(p);
		} else {
			t.calls = t.failures = t.slow = 0;
		}
		if (m.state == RESIL_BREAKER_HALF_OPEN) {
			/* (During a transition the field names its owner.) */
			m.probes_granted = (w & W_TRANSIT) ? 0 : w_probes(w);
			m.probes_reported = (uint32_t)t.calls;
		}
		fill_window(&m, &t,
		    m.state == RESIL_BREAKER_HALF_OPEN
		        ? b->cfg.permitted_probes
		        : 1);
	} else if (m.state != RESIL_BREAKER_DISABLED) {
		/* CLOSED and METRICS_ONLY: the sliding window; OPEN: the
		 * window that tripped it, as time leaves it. */
		t = resil__breaker_window_totals(b, now);
		fill_window(&m, &t, b->min_calls);
		m.consecutive_failures = (uint32_t)clamp_count(
		    resil__load64(&st->consecutive), UINT32_MAX);
	}
	*out = m;
	return RESIL_OK;
}

/* ---- the recording listener ---- */

void
resil_breaker_recorder_init(
    resil_breaker_recorder *r, resil_breaker_event *events, size_t capacity)
{
	if (r == NULL)
		return;
	r->events = events;
	r->capacity = events != NULL ? capacity : 0;
	r->count = 0;
	r->dropped = 0;
}

void
resil_breaker_recorder_listener(const resil_breaker_event *ev, void *ctx)
{
	resil_breaker_recorder *r = ctx;

	/* Transitions of one breaker are serialised (the listener runs
	 * while the transition is held), so plain writes suffice. */
	if (r == NULL || ev == NULL)
		return;
	if (ev->seq >= 1 && ev->seq - 1 < r->capacity)
		r->events[ev->seq - 1] = *ev;
	else
		r->dropped++;
	if (ev->seq > r->count)
		r->count = ev->seq;
}

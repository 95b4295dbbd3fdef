/*
 * Overload (issue 42, lib/call_overload.h): the throttle stage in front of
 * the breaker, and what a throttled answer of the server does to the
 * pipeline (docs/semantics.md, "Decided in turn 4").
 */
#include "call_overload.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "call_keyed.h"
#include "duration.h"
#include "pipeline_events.h"

/* Two doubles are the same setting when their bits are. */
static int
same_bits(double x, double y)
{
	uint64_t u, v;

	memcpy(&u, &x, sizeof(u));
	memcpy(&v, &y, sizeof(v));
	return u == v;
}

#if defined(__LP64__)
_Static_assert(sizeof(resil_throttle_config) == 88,
    "resil_throttle_config changed: update resil__same_throttle()");
#endif

int
resil__same_throttle(
    const resil_throttle_config *a, const resil_throttle_config *b)
{
	return same_bits(a->k, b->k) && a->window_ns == b->window_ns &&
	    a->buckets == b->buckets &&
	    a->random.uniform == b->random.uniform &&
	    a->random.ctx == b->random.ctx && a->seed == b->seed;
}

/* The throttle's local rejections as the pipeline's events. */
static void
on_throttle(const resil_throttle_event *te, void *ctx)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event ev;
	char text[128];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text),
	    "throttle %s (p %.3f, window: %" PRIu64 " requests, %" PRIu64
	    " accepted)",
	    resil_throttle_event_name(te->type), te->p, te->requests,
	    te->accepts);
	resil__emit(p, &ev, RESIL_STAGE_THROTTLE, te->time, text, NULL);
}

resil_err
resil__new_throttle(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_throttle **out, resil_diag *diag)
{
	resil_throttle_config tc = cfg->throttle;

	tc.clock = &p->clock;
	tc.alloc = &p->alloc;
	tc.listener = on_throttle;
	tc.listener_ctx = p;
	return resil_throttle_new(out, &tc, diag);
}

resil_throttle *
resil_pipeline_throttle(resil_pipeline *p)
{
	settings *g;

	if (p == NULL)
		return NULL;
	g = resil__loadptr((void *const *)&p->cur);
	return g->thr;
}

/*
 * The class of the call for the throttle: issue 42's priorities
 * (critical, default, sheddable), resil__call_priority()'s: the call's
 * invocation's, its attachment `resil.priority` or `priority`, its
 * method's `priority` key, else default (lib/call_bhwait.c). A critical
 * call is never throttled locally, a sheddable one at twice the
 * probability (resil_throttle_admit_class()).
 */
static int
call_class(callm *c)
{
	/* The call's class (lib/call_bhwait.c: its invocation's, its
	 * attachment's, its method's, else default). */
	switch (resil__call_priority(c)) {
	case RESIL_PRIORITY_CRITICAL:
		return RESIL_THROTTLE_CRITICAL;
	case RESIL_PRIORITY_SHEDDABLE:
		return RESIL_THROTTLE_SHEDDABLE;
	default:
		return RESIL_THROTTLE_DEFAULT;
	}
}

resil_err
resil__ovl_admit(callm *c, tsrc *ts)
{
	settings *g = c->g;
	uint64_t until;

	/* The server's Retry-After pauses the rate limiter stage: nothing
	 * is asked of it (or of the throttle, or the breaker) before. A
	 * critical call passes the pause (always; docs/semantics.md): the
	 * limiter decides it as usual, by its class's reservation
	 * (ratelimit.reserve.critical), so a 429 storm never starves the
	 * critical class. Its class is read only while paused. */
	if (g->rl != NULL && (until = resil__load64(&g->pause_until)) != 0 &&
	    tnow(ts) < until &&
	    resil__call_priority(c) != RESIL_PRIORITY_CRITICAL) {
		resil__inc64(&my_stripe(c->p)->paused);
		return RESIL_E_LIMITED;
	}
	if (g->thr != NULL &&
	    resil_throttle_admit_class(g->thr, call_class(c)) != RESIL_OK)
		return RESIL_E_LIMITED;
	return RESIL_OK;
}

/* Pause the rate limiter stage until at least until (never shorten a
 * pause another answer set). */
static void
pause_to(settings *g, uint64_t until)
{
	uint64_t cur = resil__load64(&g->pause_until);

	while (cur < until && !resil__cas64(&g->pause_until, cur, until))
		cur = resil__load64(&g->pause_until);
}

/* The pushback event: "server throttled: Retry-After 500ms, rate
 * limiter paused until 1500000000", and with
 * ratelimit.drain_on_throttled ", rate limiter drained (N permits)". */
static void
tell_pushback(callm *c, long ms, uint64_t now, uint64_t until,
    uint64_t drained, const char *note)
{
	resil_pipeline *p = c->p;
	resil_pipeline_event ev;
	char text[200], dur[32];
	size_t n;

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	if (ms < 0)
		snprintf(text, sizeof(text),
		    "server throttled: no Retry-After");
	else {
		resil__duration_format(
		    dur, sizeof(dur), (uint64_t)ms * RESIL_NS_PER_MS);
		if (until != 0)
			snprintf(text, sizeof(text),
			    "server throttled: Retry-After %s, rate limiter "
			    "paused until %" PRIu64,
			    dur, until);
		else
			snprintf(text, sizeof(text),
			    "server throttled: Retry-After %s", dur);
	}
	/* ratelimit.drain_on_throttled: ", rate limiter drained (3
	 * permits)". */
	n = strlen(text);
	if (drained != UINT64_MAX && n < sizeof(text))
		snprintf(text + n, sizeof(text) - n,
		    ", rate limiter drained (%" PRIu64 " permits)", drained);
	/* Issue 41 (turn 4): a key's pause that could not be kept. */
	n = strlen(text);
	if (note[0] != '\0' && n < sizeof(text))
		snprintf(text + n, sizeof(text) - n, "%s", note);
	resil__emit(p, &ev, RESIL_STAGE_THROTTLE, now, text, c->args->method);
}

void
resil__ovl_complete(callm *c, unsigned si, int rc, int late,
    resil_outcome *outcome, resil_err *status, resil_outcome *bo, tsrc *ts)
{
	settings *g = c->g;
	int thr = !late && *status != RESIL_E_TIMEOUT && resil_rc_is_throttled(rc);
	uint64_t now, until = 0, drained = UINT64_MAX;
	char note[64] = "";
	int keyed = 0;
	long ms;

	if (g->thr != NULL)
		(void)resil_throttle_report(g->thr,
		    thr                                          ? RESIL_THROTTLE_REJECTED
		        : late || *status == RESIL_E_TIMEOUT ? RESIL_THROTTLE_NO_ANSWER
		                                             : RESIL_THROTTLE_ACCEPTED);
	if (!thr)
		return;
	/* The call failed (its value is dropped), not the dependency. */
	resil_value_free(&c->value);
	vnull(&c->value);
	*status = RESIL_E_THROTTLED;
	*outcome = RESIL_OUTCOME_FAILURE;
	*bo = RESIL_OUTCOME_IGNORED;
	resil__inc64(&my_stripe(c->p)->pushbacks);
	ms = resil_rc_retry_after_ms(rc);
	now = tnow(ts);
	if (ms > 0 && g->rl != NULL) {
		until = sat_add(now, (uint64_t)ms * RESIL_NS_PER_MS);
		pause_to(g, until);
		/* The fleet limiter standing in for the local one is told:
		 * every member pauses (one round trip; a member deciding
		 * locally has nobody to tell). */
		if (RESIL__UNLIKELY(g->frl != NULL))
			(void)resil_fleet_limit_pause(
			    g->frl, (uint64_t)ms * RESIL_NS_PER_MS, NULL);
	}
	/* Issue 41 (turn 4): with ratelimit.key, the call's key (or the
	 * attempt's endpoint's, for a key with the host) pauses (and
	 * drains) as the lone limiter does, its fleet limiter told for that
	 * key (lib/call_keyed.c). */
	if (RESIL__UNLIKELY(c->p->keyed != NULL))
		keyed = resil__keyed_pushback(c->p, c->args, c->inv,
		    (c->has_pick & (1u << si)) != 0 ? c->picks[si].address
		                                      : NULL,
		    ms > 0 ? (uint64_t)ms * RESIL_NS_PER_MS : 0, now,
		    g->cfg.ratelimit.drain_on_throttled, &until, &drained, note,
		    sizeof(note));
	/* ratelimit.drain_on_throttled (Resilience4j's
	 * drainPermissionsOnResult): the permits left go too, so the
	 * limiter refills from empty once the pause (if any) is over. The
	 * local limiter's, not a fleet limiter standing in for it. */
	if (g->rl != NULL && g->frl == NULL &&
	    g->cfg.ratelimit.drain_on_throttled)
		(void)resil_ratelimit_drain(g->rl,
		    keyed && drained != UINT64_MAX ? NULL : &drained);
	tell_pushback(c, ms, now, until, drained, note);
}

void
resil__ovl_inline_failed(callm *c, int rc, tsrc *ts)
{
	resil_outcome o = RESIL_OUTCOME_FAILURE, bo = o;
	resil_err st = RESIL_OK;

	resil__ovl_complete(c, 0, rc, 0, &o, &st, &bo, ts);
	c->last_status = c->real_err = st;
	c->last_outcome = o;
	c->real_rc = rc;
}

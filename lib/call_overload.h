/*
 * Overload (issue 42, lib/call_overload.c): the throttle stage in front of
 * the breaker, and the server's pushback (a throttled answer, value.h's
 * RESIL_RC_THROTTLED codes). The call machine asks these at its launch()
 * and complete() (lib/call_machine.h), and the blocking driver's inline
 * failure paths (lib/call_drive.c) through resil__ovl_breaker_outcome().
 * Never installed.
 */
#ifndef RESIL_CALL_OVERLOAD_H
#define RESIL_CALL_OVERLOAD_H

#include "call_state.h"

/* The throttle's settings compared for a reload (every field but the
 * pipeline's own: clock, allocator, listener). */
int resil__same_throttle(
    const resil_throttle_config *a, const resil_throttle_config *b);

/* The throttle stage of cfg, with the pipeline's clock, allocator and
 * listener (its events are the pipeline's RESIL_STAGE_THROTTLE ones). */
resil_err resil__new_throttle(resil_pipeline *p,
    const resil_pipeline_config *cfg, resil_throttle **out, resil_diag *diag);

/*
 * Before an attempt, in front of the breaker (and, with the server's
 * pushback, in front of the rate limiter stage): 0 to go on, or a
 * refusal status (RESIL_E_LIMITED) for rejected(): the throttle rejected
 * the attempt locally, or the pipeline's rate limiter is paused by a
 * Retry-After and the call is not critical (a critical call goes on to
 * the limiter's own decision). Only called when the settings have a throttle or a
 * pause was ever set (c->g->thr or c->g->pause_until).
 */
resil_err resil__ovl_admit(callm *c, tsrc *ts);

/*
 * After an attempt (complete()) in slot si (its pick's address: the key of
 * a rate limiter family keyed by the host): rc the function's code, late
 * whether it gave no answer in time. Reports the attempt to the throttle stage
 * (accepted, rejected by the server, no answer), and for a throttled
 * code: sets *status to RESIL_E_THROTTLED, *outcome to FAILURE (the call
 * failed) and *bo, what the breaker and the bulkhead record, to IGNORED;
 * pauses the rate limiter stage for its Retry-After; counts and tells.
 */
void resil__ovl_complete(callm *c, unsigned si, int rc, int late,
    resil_outcome *outcome, resil_err *status, resil_outcome *bo, tsrc *ts);

/* The blocking driver's inline first attempt answered a throttled rc
 * (its breaker already recorded resil__ovl_breaker_outcome()): the
 * machine's state as complete() would have left it. */
void resil__ovl_inline_failed(callm *c, int rc, tsrc *ts);

/* What the breaker records for an attempt that answered rc with outcome
 * o: IGNORED for the server's pushback (never the dependency failing). */
static inline resil_outcome
resil__ovl_breaker_outcome(int rc, resil_outcome o)
{
	return RESIL__UNLIKELY(resil_rc_is_throttled(rc)) ? RESIL_OUTCOME_IGNORED
	                                                  : o;
}

/* Whether complete() needs resil__ovl_complete(): a throttle stage, or
 * a code of the throttled band (one compare: the band and
 * RESIL_RC_TIMEOUT are the lowest codes). */
static inline int
resil__ovl_wants(const callm *c, int rc)
{
	return c->g->thr != NULL ||
	    rc <= RESIL_RC_THROTTLED + 1 + RESIL_RC_RETRY_AFTER_MAX_MS;
}

#endif /* RESIL_CALL_OVERLOAD_H */

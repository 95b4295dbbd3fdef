/*
 * The cluster inside the call machine (lib/call_cluster.c): with a
 * selector every attempt is routed and picked when it is launched
 * (resil__cl_pick: the candidate set comes from the pipeline's pool and
 * goes back at once, so a call holds no snapshot), reported to the
 * selector when it completes (resil__cl_done: outcome and duration, a
 * timeout as a failure) and released when it is abandoned. The strategy
 * decides after each attempt (resil__cl_decide) and shapes the answer
 * (resil__cl_conclude). The machine calls these; they never call the
 * machine: where a strategy wants another attempt it says so, and the
 * machine launches it. Never installed.
 */
#ifndef RESIL_CALL_CLUSTER_H
#define RESIL_CALL_CLUSTER_H

#include "call_state.h"

/* What a strategy wants after an attempt (resil__cl_decide,
 * resil__cl_refused). */
enum {
	RESIL__CL_PASS = -1, /* the retry stage decides (failover) */
	RESIL__CL_DONE = 0,  /* the call is answered */
	RESIL__CL_LAUNCH = 1 /* another attempt: launch it, and tell
	                      * resil__cl_refused() if it cannot start */
};

/* A cluster call starts (the failover policy, the strategy's state, the
 * service breaker's permit for the whole call): 1, or 0 when the service
 * breaker refused the call (the machine then rejects it: RESIL_E_OPEN,
 * cstop set, the message in cmsg). The
 * hooks the hot steps call take the time by value (or a copy of the
 * source): a pointer to the caller's tsrc would keep it in memory on the
 * hot path of calls without a selector. */
int resil__cl_start(callm *c, const method *m, tsrc ts);

/* A cluster call ends before its answer (cancelled): the service
 * breaker's permit goes back. */
void resil__cl_cancel(callm *c);

/* Route and pick the endpoint of the attempt in slot i at now. */
resil_err resil__cl_pick(callm *c, unsigned i, uint64_t now);

/* The attempt in slot i completed at now: the selector learns it. */
void resil__cl_done(callm *c, unsigned i, resil_outcome outcome, uint64_t now);

/* The strategy's own decision after an attempt: RESIL__CL_DONE (the call
 * is answered), RESIL__CL_LAUNCH, or RESIL__CL_PASS (failover, zone-aware
 * phase 1). */
int resil__cl_decide(callm *c, tsrc *ts, resil_call_next *st);

/* The attempt resil__cl_decide() asked for could not start (ls, lrc: the
 * last answer before it): RESIL__CL_DONE or RESIL__CL_LAUNCH again. */
int resil__cl_refused(
    callm *c, resil_err ls, int lrc, tsrc *ts, resil_call_next *st);

/* The answer of a cluster call: as the machine's, with the strategy's say
 * (failsafe, failback), the endpoint and Dubbo's message. */
void resil__cl_conclude(callm *c, resil_err rr, int rc, resil_err status,
    resil_outcome outcome, tsrc *ts, resil_call_next *st);

/* The name failfast's message gives the one implicit endpoint of a
 * pipeline without a selector. */
#define RESIL__IMPLICIT_ENDPOINT "<implicit>"

/* Failfast over the one implicit endpoint (no selector) failed with err
 * (rc) and no fallback answered: Dubbo's failfast message into the
 * answer, as with a selector ("Failfast invoke providers <implicit>
 * RandomLoadBalance select from all providers [<implicit>] ..."; Dubbo's
 * default balancer, which a lone provider never consults). A rejection
 * (breaker open, limited) keeps its own message. */
void resil__cl_one_failfast(callm *c, resil_err err, int rc);

#endif /* RESIL_CALL_CLUSTER_H */

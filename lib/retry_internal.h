/*
 * The retry policy's private steps (lib/retry.c), shared by its blocking
 * loop (resil_retry_call) and the pipeline's call machine
 * (lib/call_machine.c). Never installed.
 *
 * A retry run is one call's progress through a policy, in the caller's
 * storage. The caller makes each attempt itself and reports it:
 *
 *   resil__retry_begin(r, &run, now)
 *   for (;;) {
 *           ... attempt run.n ...
 *           if (!resil__retry_judge(r, &run, rc, status, value, now))
 *                   break;                 (final or exhausted)
 *           if (!resil__retry_plan(r, &run, now))
 *                   break;                 (deadline or budget)
 *           ... wait run.wait ticks ...
 *           if (!resil__retry_resume(r, &run, now))
 *                   break;                 (a wait overshot the deadline)
 *   }
 *   err = resil__retry_end(r, &run, &res);
 *
 * The run never reads a clock: every time comes in as now. timed says
 * whether the times given so far are real readings (the blocking loop
 * reads the clock only where something needs the time); judge and plan
 * switch it on at the first reading they are given.
 */
#ifndef RESIL_RETRY_INTERNAL_H
#define RESIL_RETRY_INTERNAL_H

#include <resil/retry.h>

#include "atomic.h"
#include "internal.h"

typedef struct resil__retry_run {
	uint64_t t0;          /* first reading */
	uint64_t now;         /* the last reading */
	uint64_t deadline_at; /* t0 + deadline, saturating */
	uint64_t wait;        /* the last wait chosen; 0 before the first */
	uint64_t waited;
	double jstate; /* DECORRELATED_V2's f(t) of the last wait */
	uint32_t n;    /* the attempt running or just ended, 1-based */
	/* The attempts this run may make: the policy's max_attempts, or a
	 * call's own (a cluster call's retries override), set after begin. */
	uint32_t max_attempts;
	int rc;
	const void *value; /* the last attempt's, for backoff_result_fn */
	int by_result;
	int timed;
	int has_deadline;
	resil_err status;
	resil_outcome outcome;
	resil_retry_stop stop;
} resil__retry_run;

/* Start a run. timed: now is a real reading (else 0 and ignored). Makes
 * the budget deposit of the call. */
void resil__retry_begin(
    resil_retry *r, resil__retry_run *run, int timed, uint64_t now);

/* Whether the policy needs the time at the start of a call (a deadline or
 * a listener). */
int resil__retry_needs_time(const resil_retry *r);

/* Attempt run->n ended with rc, status (RESIL_OK when it ran) and value,
 * at now (used only when run->timed). Returns 1 when a retry is wanted
 * and attempts remain; 0 with run->stop set otherwise. */
int resil__retry_judge(resil_retry *r, resil__retry_run *run, int rc,
    resil_err status, const void *value, uint64_t now);

/* A retry is wanted: choose the wait (one random draw when jittered),
 * check the deadline and the budget (spends one retry), send the RETRY
 * event. Returns 1 with run->wait set; 0 with run->stop set. now is a
 * real reading, used only when the run was not timed yet (otherwise the
 * reading given to judge stands). */
int resil__retry_plan(resil_retry *r, resil__retry_run *run, uint64_t now);

/* The wait is over at now: the next attempt is run->n + 1. Returns 1 and
 * moves run->n on, or 0 (stop DEADLINE) when now is past the deadline. */
int resil__retry_resume(resil_retry *r, resil__retry_run *run, uint64_t now);

/* Spend one retry from the budget at now (for a hedged attempt): 1 when
 * granted (or the budget is off), 0 when refused (counted as a refusal). */
int resil__retry_spend(resil_retry *r, uint64_t now);

/* Count the run in the metrics, send GIVE_UP / SUCCESS, fill *res (may be
 * NULL) and return what resil_retry_call() returns. */
resil_err resil__retry_end(
    resil_retry *r, const resil__retry_run *run, resil_retry_result *res);

/*
 * The machine's first-attempt fast path. A policy with no deadline, no
 * budget and no retry-on-result needs nothing from resil_retry_call() for
 * a call whose first attempt succeeds but its count: resil__retry_fast_ok()
 * says whether r is such a policy, and resil__retry_count_first_success()
 * records that call in its metrics.
 */
int resil__retry_fast_ok(const resil_retry *r);
void resil__retry_count_first_success(resil_retry *r);

/* The same count inline, for a driver that keeps r's counters (taken
 * once, valid while r lives): stripe s's counter is
 * resil__retry_first_counters(r) + s * RESIL__RETRY_STRIDE, s the
 * thread's resil__thread_stripe(RESIL__RETRY_STRIPES). */
#define RESIL__RETRY_STRIPES 8u
#define RESIL__RETRY_STRIDE 8u /* uint64_t's from one stripe to the next */
uint64_t *resil__retry_first_counters(resil_retry *r);

_Static_assert(RESIL__RETRY_STRIPES == RESIL__STRIPES, "thread stripes");

/* On this thread's stripe (unlocked on one it owns): every count of a
 * first-attempt success goes through here. */
static inline void
resil__retry_count_first(uint64_t *counters)
{
	resil__stripe_inc(counters, RESIL__RETRY_STRIDE * sizeof(uint64_t));
}

/* Counters laid out as a policy's, counted on and never read: where a
 * driver without a policy counts, to spare itself the test. */
extern uint64_t resil__retry_first_sink[];

/* On stripe s, which this thread owns (lib/internal.h). */
static inline void
resil__retry_count_first_own(uint64_t *counters, unsigned s)
{
	resil__own_inc64(&counters[(size_t)s * RESIL__RETRY_STRIDE]);
}

#endif /* RESIL_RETRY_INTERNAL_H */

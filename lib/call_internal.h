/*
 * Private steps shared by the blocking retry loop (resil_retry_call) and
 * the pipeline's call machine (lib/pipeline.c). Never installed.
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
#ifndef RESIL_CALL_INTERNAL_H
#define RESIL_CALL_INTERNAL_H

#include <resil/retry.h>

typedef struct resil__retry_run {
	uint64_t t0;          /* first reading */
	uint64_t now;         /* the last reading */
	uint64_t deadline_at; /* t0 + deadline, saturating */
	uint64_t wait;        /* the last wait chosen; 0 before the first */
	uint64_t waited;
	double jstate; /* DECORRELATED_V2's f(t) of the last wait */
	uint32_t n;    /* the attempt running or just ended, 1-based */
	int rc;
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

/* ---- the cluster: shared by lib/cluster.c and lib/pipeline.c ---- */

#include <resil/cluster.h>

/* Dubbo's failure message: "Failed to invoke the method M in the service
 * S. Tried N times of the providers [a, b] (k/n). Last error is: E".
 * providers is the list already joined with ", ". */
void resil__cluster_failed_msg(char *buf, size_t n, const char *method,
    const char *service, uint32_t attempts, const char *providers,
    size_t nfailed, size_t ncand, const char *lasterr);

/* Broadcast's: "Failed to invoke the method M in the service S by
 * broadcast: F of N providers failed. Last error is: E", or with lasterr
 * NULL "... by broadcast: none of N providers could be called (their
 * breakers refused)". */
void resil__cluster_broadcast_msg(char *buf, size_t len, const char *method,
    const char *service, uint32_t failures, size_t n, const char *lasterr);

/* "Failback queue of the method M in the service S is full (N calls): the
 * failure is dropped. Last error is: E"; with queue < 0 "... could not
 * take the call (out of memory): ...". */
void resil__cluster_full_msg(char *buf, size_t n, const char *method,
    const char *service, int32_t queue, const char *lasterr);

/* The last error in words: "timeout after 3000 ms", "the call failed (rc
 * 111)", or resil_strerror(status). */
void resil__cluster_last_error(
    char *buf, size_t n, resil_err status, int rc, uint64_t timeout_ns);

/* A cluster that only keeps the failback queue of a pipeline (every
 * strategy accepted; cfg checked by resil_cluster_config_validate). */
resil_err resil__cluster_new_queue(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag);

/* A queued call retried: args is the task's copy. */
typedef int (*resil__task_fn)(void *ctx, const resil_pick *endpoint,
    const resil_request *req, const resil_args *args, resil_value *out);

/* Queue a failed call at now (req and args copied; args may be NULL).
 * 1 when queued (a QUEUED event); 0 (and a QUEUE_FULL event) when the
 * queue is full; -1 when memory ran out. */
int resil__cluster_enqueue(resil_cluster *cl, const resil_request *req,
    const resil_args *args, const char *address, uint64_t id, int rc,
    uint64_t now);

/* Run the tasks due at now, each once (see resil_cluster_failback_poll). */
resil_err resil__cluster_poll(resil_cluster *cl, uint64_t now,
    resil__task_fn fn, void *ctx, size_t *ran);

#endif /* RESIL_CALL_INTERNAL_H */

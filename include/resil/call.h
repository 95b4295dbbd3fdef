/*
 * resil call: one call through a pipeline as a state machine, for event
 * loops (libcurl multi, libuv, epoll). resil decides, the caller runs the
 * attempts and the timers; resil_pipeline_call() (pipeline.h) is this
 * machine driven by a blocking loop. docs/async.md is this header's page.
 * <resil/pipeline.h> includes it.
 *
 * Thread safety: one call is stepped by one thread at a time (start,
 * step, report and cancel of one resil_call must not overlap); any number
 * of calls may run concurrently on one pipeline, from any threads, with
 * resil_pipeline_call() too.
 */
#ifndef RESIL_CALL_H
#define RESIL_CALL_H

#include <stdint.h>
#include <string.h>

#include <resil/limit.h>
#include <resil/resil.h>
#include <resil/selector.h>
#include <resil/value.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_pipeline resil_pipeline;

/* A resolved method of a pipeline (see resil_pipeline_method()). */
typedef struct resil_method resil_method;

/* Attempts one call can have out at once (hedging), abandoned ones
 * included. */
#define RESIL_CALL_MAX_INFLIGHT 8

/*
 * A call as a state machine, for event loops (libcurl multi, libuv,
 * epoll): resil decides, the caller runs attempts and timers. The call
 * lives in caller storage (a resil_call, on the stack or in the caller's
 * request object): nothing is allocated on the success path. Every
 * function takes the caller's clock reading `now`, in the pipeline's
 * ticks; the machine itself never reads a clock, sleeps or starts a
 * thread. (The stages below it, the breaker, the limiters and the cache,
 * read the pipeline's clock as they do for resil_pipeline_call(): give
 * the pipeline the clock your loop uses.)
 *
 *   resil_call_start(&c, p, m, &args, &res, now, &st);
 *   while (st.action != RESIL_CALL_DONE) {
 *           RUN:  start attempt st.attempt (answer by st.deadline); when
 *                 it answers: resil_call_report(&c, st.attempt, rc, &v,
 *                 now), then resil_call_step(&c, now, &st)
 *           WAIT: step again at st.until, or as soon as an outstanding
 *                 attempt has been reported
 *   }
 *   ... res is the answer, as resil_pipeline_call() gives it ...
 *
 * Each step returns the next action:
 * - RESIL_CALL_RUN: start the attempt with id st->attempt (ids are 1, 2,
 *   ... per call) and report its outcome. st->deadline is the clock
 *   reading by which it should answer (its timeout, the retry deadline;
 *   UINT64_MAX: none). An attempt that has not been reported when its
 *   timeout has passed (the duration > timeout) is failed with
 *   RESIL_E_TIMEOUT by the step at or after deadline + 1; its answer,
 *   when it comes, is accepted and dropped.
 * - RESIL_CALL_WAIT: nothing to start now. Step again when now reaches
 *   st->until (a retry backoff, a hedge delay, a timeout), or earlier
 *   after a report. st->until is UINT64_MAX when only a report can move
 *   the call on. Stepping early is harmless: it returns WAIT again.
 *   A launch waiting for a bulkhead slot (bulkhead.max_wait, issue 42)
 *   answers WAIT with st->until the end of that wait; the slot may come
 *   earlier, and then the invocation's wake hook is called (step then).
 * - RESIL_CALL_DONE: *out holds the answer, with its provenance (source,
 *   age, attempts, breaker state), exactly as resil_pipeline_call()
 *   would have given it; the caller frees it with resil_result_free().
 * With hedging (hedge_max in the configuration), a RUN may come while
 * earlier attempts are still out; each is reported under its own id.
 *
 * Every stage works as with resil_pipeline_call(): the mock stage, the
 * fallback chain and cache, retry (backoff, jitter, deadline, budget),
 * the breaker, the rate limiter, the bulkhead, timeouts, events and
 * metrics. resil_pipeline_call() is this machine driven by a loop that
 * runs the attempt itself and sleeps through the pipeline's clock.
 *
 * Ownership: *args and *out are borrowed until DONE (or cancel); the
 * resil_call must not move meanwhile. A started call holds the
 * pipeline's settings it started with (resil_pipeline_reload) until DONE
 * or cancel: drive every call to one of them (a call dropped half-way
 * keeps those settings, and its permits, held). A reported value is moved into
 * the call (*value is left null) and freed by resil when it is dropped.
 * Attempt ids start at 1 for every call: before starting a new call in
 * the same resil_call, report (or forget) the answers its previous call
 * still has out (resil_call_outstanding()), or a late answer could be
 * taken for the new call's attempt of the same id.
 */
typedef struct resil_call {
	/* Private: the machine's state. */
	/* 352 before issue 42, 368 before 43, 400 before 41, 440 before
	 * issue 41 keyed a bulkhead by host (a slot per attempt) */
	uint64_t opaque_[480];
} resil_call;

typedef enum resil_call_action {
	RESIL_CALL_RUN = 0,
	RESIL_CALL_WAIT = 1,
	RESIL_CALL_DONE = 2
} resil_call_action;

typedef struct resil_call_next {
	resil_call_action action;
	uint32_t attempt;  /* RUN: the attempt's id */
	uint64_t deadline; /* RUN: answer by this reading; UINT64_MAX: none */
	uint64_t until;    /* WAIT: step again at this reading */
	/* RUN: the endpoint this attempt goes to (run it against
	 * endpoint->address / endpoint->user), valid until the attempt is
	 * reported or the call ends; NULL without a selector, and for
	 * WAIT and DONE. */
	const resil_pick *endpoint;
} resil_call_next;

/*
 * What one call carries besides its method and key bytes: Dubbo's
 * Invocation, for the cluster (resil_call_start_ex(),
 * resil_pipeline_invoke_ex() in pipeline.h). Every field may be NULL/0
 * (resil_invocation_init()); all are borrowed until the call is DONE.
 *
 * - args: the method and the bytes the cache keys on, as resil_args;
 *   the user's function receives &args (a copy on an executor's thread).
 * - arguments[0..narguments): the call's arguments as text, read by a
 *   hash balancer (loadbalance.hash.arguments=0,1) and by condition
 *   rules' arguments[i].
 * - tag: the routing tag (Dubbo's dubbo.tag; NULL or "": untagged);
 *   tag_force nonzero forces it for this call (dubbo.force.tag): no
 *   endpoint with that tag gives "no provider" instead of the untagged
 *   ones.
 * - attachments[0..nattachments): key/value pairs, the request params a
 *   condition rule's WHEN side reads. Dubbo's keys among them are read
 *   as Dubbo reads them where the field above is unset: `dubbo.tag`
 *   (tag NULL), `dubbo.force.tag=true` (tag_force 0) and `retries`
 *   (has_retries 0; a decimal number 0..999).
 * - has_retries, retries: this call's retries, overriding the
 *   configuration's (cluster.retries, a method's max_attempts):
 *   failover and zone-aware make retries + 1 attempts (at most
 *   RESIL_RETRY_MAX_ATTEMPTS).
 * Without a selector only args is read.
 */
typedef struct resil_invocation {
	resil_args args;
	const char *const *arguments;
	size_t narguments;
	const char *tag;
	int tag_force;
	const resil_param *attachments;
	size_t nattachments;
	int has_retries;
	uint32_t retries;
	/*
	 * Issue 42. priority: the call's class (resil_priority; UNSET: its
	 * `resil.priority` attachment, critical|default|sheddable, else the
	 * method's `priority` key, else DEFAULT), which a bulkhead's
	 * reservations and queue read. wake,
	 * wake_ctx: the hook the call machine wakes its caller through when
	 * a bulkhead slot it answered WAIT for (st->until: the end of the
	 * wait) is handed to it, on the releasing thread: it must not block
	 * (write an eventfd, uv_async_send); the caller then steps the
	 * call. NULL: no early wake, the caller steps at st->until.
	 * Issue 43: the same hook wakes a coalesced call's follower when its
	 * leader's answer is copied to it (or the lead is handed to it); a
	 * call without a hook never follows (docs/async.md).
	 */
	resil_priority priority;
	void (*wake)(void *ctx);
	void *wake_ctx;
} resil_invocation;

/* All fields NULL/0 but args.method. */
static inline void
resil_invocation_init(resil_invocation *inv, const char *method)
{
	memset(inv, 0, sizeof(*inv));
	inv->args.method = method;
}

/*
 * Start a call of args->method through p, with the settings of m (NULL:
 * looked up by args->method) at clock reading now. *c is initialised
 * whatever it held (zeroed, never used, or a call that is DONE or
 * cancelled), but a call still in flight in it is refused: it holds
 * permits and settings that would be lost (cancel it first); *out is
 * initialised and, at DONE, holds the answer. The first action is in
 * *step (a force mock is DONE at once).
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, a NULL
 * args->method or a handle of another pipeline; RESIL_E_MISUSE for a
 * call in flight in *c (started, not DONE or cancelled). Nothing is
 * changed on error.
 */
RESIL_API resil_err resil_call_start(resil_call *c, resil_pipeline *p,
    const resil_method *m, const resil_args *args, resil_result *out,
    uint64_t now, resil_call_next *step);

/*
 * resil_call_start() of the call inv describes: inv->args as args, and,
 * with a selector, its arguments, tag, attachments and retries routed
 * and balanced on (see resil_invocation). *inv is borrowed until DONE
 * (or cancel). Returns as resil_call_start(); RESIL_E_INVAL also for a
 * NULL inv.
 */
RESIL_API resil_err resil_call_start_ex(resil_call *c, resil_pipeline *p,
    const resil_method *m, const resil_invocation *inv, resil_result *out,
    uint64_t now, resil_call_next *step);

/*
 * The next action at clock reading now, in *step. Returns RESIL_OK;
 * RESIL_E_INVAL for a NULL argument; RESIL_E_MISUSE for a call that is
 * done, cancelled or was never started (nothing changes).
 */
RESIL_API resil_err resil_call_step(
    resil_call *c, uint64_t now, resil_call_next *step);

/*
 * Attempt `attempt` answered at clock reading now with the user's return
 * code rc and *value (moved into the call, *value left null: its type
 * says null, it owns nothing; value may be NULL for no value). The
 * answer is recorded with the breaker, the bulkhead and the timing at
 * once; the decision it leads to comes from the next resil_call_step().
 *
 * An attempt that no longer matters (a hedge that lost, one that timed
 * out, one still out when the call finished or was cancelled) is accepted
 * and dropped, also after DONE. Returns RESIL_OK; RESIL_E_INVAL for a
 * NULL c; RESIL_E_MISUSE for an attempt id never handed out, one already
 * reported, or a call never started: nothing changes and *value stays
 * the caller's.
 */
RESIL_API resil_err resil_call_report(
    resil_call *c, uint32_t attempt, int rc, resil_value *value, uint64_t now);

/*
 * Cancel a running call: the outstanding attempts' permits (breaker,
 * bulkhead) are given back and their later answers will be dropped; *out
 * becomes an empty result (RESIL_E_UNAVAILABLE, source UNAVAILABLE,
 * message "the call was cancelled"), counted as unavailable. Returns
 * RESIL_OK; RESIL_E_INVAL for NULL; RESIL_E_MISUSE for a call that is
 * done, cancelled or never started.
 */
RESIL_API resil_err resil_call_cancel(resil_call *c, uint64_t now);

/* Attempts handed out and not yet reported (abandoned ones included);
 * 0 for NULL or a call never started. */
RESIL_API uint32_t resil_call_outstanding(const resil_call *c);

/* The priority class of a started call (issue 42): its invocation's,
 * else its `resil.priority` attachment's, else RESIL_PRIORITY_DEFAULT;
 * UNSET for NULL. The throttle stage and the bulkhead read this. */
RESIL_API resil_priority resil_call_priority(resil_call *c);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_CALL_H */

/*
 * resil cluster: Dubbo's cluster strategies over a selector (selector.h):
 * failover, failfast, failsafe, failback and broadcast, with Dubbo's
 * messages. A strategy decides which endpoints a call tries and what the
 * caller gets; the selector routes and balances; the user's function
 * makes one attempt on the endpoint it is given.
 *
 * This is the standalone blocking form: resil_cluster_invoke() runs the
 * attempts one after another on the calling thread. Every strategy also
 * runs inside a pipeline (resil_pipeline_config.selector and .cluster,
 * pipeline.h), through its call machine: there forking gets parallel
 * attempts and zone-aware its timeouts. resil_cluster_new() refuses
 * forking and zone-aware (they need the pipeline).
 *
 * Semantics (docs/cluster.md, DESIGN.md "Cluster"):
 * - Every call routes first; no candidate is RESIL_E_NO_PROVIDER for every
 *   strategy (failsafe and failback do not swallow it).
 * - A BUSINESS outcome passes through every strategy untouched: not
 *   retried, not swallowed, not queued.
 * - failover: retries + 1 attempts whatever the endpoint count, untried
 *   candidates first, tried ones only when none is left; the candidates
 *   are routed again before every retry (none then: RESIL_E_NO_PROVIDER
 *   ends the call). The final error is the last attempt's; the message
 *   names the attempts, the distinct endpoints that failed over the
 *   candidates at the last attempt, and the last error.
 * - failfast: one attempt, its error as it is.
 * - failsafe: a failure becomes RESIL_OK with a null value and an event.
 * - failback: a failure becomes RESIL_OK with a null value; the call is
 *   queued (failback_queue entries; when full the new failure is dropped:
 *   a QUEUE_FULL event, resil_cluster_failback_dropped() counts it, and
 *   the caller still gets RESIL_OK with a null value, the message saying
 *   "Failback queue of the method M in the service S is full (N calls):
 *   the failure is dropped. Last error is: ..."; only when memory runs
 *   out does the caller get the failure, RESIL_E_CALL) and retried by
 * resil_cluster_failback_poll(): the first retry is due at failure time +
 * period; each poll runs each due task once (no catch-up) and re-arms it at
 * poll time + period, avoiding the last endpoint tried when another exists;
 * after failback_retries failed retries the task is dropped (an event).
 * failback_retries = 0 queues nothing.
 * - broadcast: every candidate in candidate order; threshold =
 *   floor(n * broadcast_fail_percent / 100); it stops at the failure that
 *   brings the count of failures to the threshold (a threshold of 0 never
 *   stops it, as in Dubbo); any failure gives the last failure's error
 *   even if later endpoints succeeded; all succeeded: the value of the
 *   last endpoint called. An endpoint whose breaker refuses is passed
 *   over (no other is called in its place); when every breaker refuses,
 *   RESIL_E_UNAVAILABLE and no call.
 *
 * Thread safety: invoke and poll may run concurrently from any threads on
 * one cluster; new and free must not overlap other calls.
 */
#ifndef RESIL_CLUSTER_H
#define RESIL_CLUSTER_H

#include <string.h>

#include <resil/clock.h>
#include <resil/resil.h>
#include <resil/selector.h>
#include <resil/value.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_cluster resil_cluster;

typedef enum resil_cluster_strategy {
	RESIL_CLUSTER_FAILOVER = 0,
	RESIL_CLUSTER_FAILFAST = 1,
	RESIL_CLUSTER_FAILSAFE = 2,
	RESIL_CLUSTER_FAILBACK = 3,
	RESIL_CLUSTER_BROADCAST = 4,
	RESIL_CLUSTER_FORKING = 5,   /* pipeline only */
	RESIL_CLUSTER_ZONE_AWARE = 6 /* pipeline only */
} resil_cluster_strategy;

/* "failover", "failfast", "failsafe", "failback", "broadcast",
 * "forking", "zone-aware" or "unknown"; and back (RESIL_E_INVAL for an
 * unknown name). */
RESIL_API const char *resil_cluster_strategy_name(resil_cluster_strategy s);
RESIL_API resil_err resil_cluster_strategy_parse(
    const char *name, resil_cluster_strategy *out);

typedef enum resil_cluster_event_type {
	RESIL_CLUSTER_EVENT_SWALLOWED = 0,  /* failsafe hid a failure */
	RESIL_CLUSTER_EVENT_QUEUED = 1,     /* failback queued a call */
	RESIL_CLUSTER_EVENT_QUEUE_FULL = 2, /* failback dropped a new one */
	RESIL_CLUSTER_EVENT_RETRIED = 3,    /* a failback retry succeeded */
	RESIL_CLUSTER_EVENT_GAVE_UP = 4,    /* failback dropped a task */
	RESIL_CLUSTER_EVENT_CROSS_ZONE = 5, /* zone-aware crossed zones */
	RESIL_CLUSTER_EVENT_NO_PROVIDER = 6, /* routing left no candidate */
	/* Hedging across endpoints (issue 43; address: the hedge's
	 * endpoint): a hedge started; a hedge's answer won the call; an
	 * attempt still out when another won was dropped for the caller (its
	 * late answer still goes to its endpoint). */
	RESIL_CLUSTER_EVENT_HEDGE_STARTED = 7,
	RESIL_CLUSTER_EVENT_HEDGE_WON = 8,
	RESIL_CLUSTER_EVENT_HEDGE_DROPPED = 9
} resil_cluster_event_type;

/* "swallowed", "queued", "queue_full", "retried", "gave_up",
 * "cross_zone", "no_provider", "hedge_started", "hedge_won",
 * "hedge_dropped" or "unknown". */
RESIL_API const char *resil_cluster_event_name(resil_cluster_event_type t);

typedef struct resil_cluster_event {
	resil_cluster_event_type type;
	uint64_t time;
	const char *method;
	const char *address; /* the endpoint involved, or NULL */
	int rc;              /* the failure's return code */
	uint32_t retries;    /* failback retries made so far */
} resil_cluster_event;

typedef void (*resil_cluster_listener_fn)(
    const resil_cluster_event *ev, void *ctx);

typedef struct resil_cluster_config {
	size_t size; /* sizeof(resil_cluster_config), set by _init() */
	resil_cluster_strategy strategy;
	int32_t retries; /* failover: attempts = retries + 1; >= 0 */
	/* failback */
	int32_t failback_queue;   /* >= 1 */
	int32_t failback_retries; /* >= 0; 0 queues nothing */
	uint64_t failback_period_ns;
	/* broadcast */
	int32_t broadcast_fail_percent; /* 0..100 */
	/* forking: endpoints tried at once; >= 1, above the candidate count
	 * means all of them (Dubbo). Default 2. */
	int32_t forks;
	/* zone-aware: the caller's zone (required there; copied by the
	 * pipeline), and the timeout of the one cross-zone attempt (0: the
	 * call's own timeout). */
	const char *local_zone;
	uint64_t cross_zone_timeout_ns;
	/* How the user's return code counts: NULL, 0 is success. */
	resil_classifier classifier;
	resil_cluster_listener_fn listener;
	void *listener_ctx;
	const char *service;          /* for messages; NULL: "" */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock */
} resil_cluster_config;

/* Failover with retries 2 (3 attempts, Dubbo's default); failback queue
 * 100, 3 retries, 5 s apart; broadcast fail percent 100; forks 2; no
 * local zone; cross-zone timeout 0 (the call's timeout). */
static inline void
resil_cluster_config_init(resil_cluster_config *c)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->strategy = RESIL_CLUSTER_FAILOVER;
	c->retries = 2;
	c->failback_queue = 100;
	c->failback_retries = 3;
	c->failback_period_ns = 5 * RESIL_NS_PER_SEC;
	c->broadcast_fail_percent = 100;
	c->forks = 2;
}

static inline resil_cluster_config
resil_cluster_config_default(void)
{
	resil_cluster_config c;

	resil_cluster_config_init(&c);
	return c;
}

/* RESIL_OK, or RESIL_E_INVAL naming the field (retries < 0, a failback
 * queue < 1, failback retries < 0, a period of 0, a percent outside
 * 0..100, forks < 1, zone-aware without a local zone, an unknown
 * strategy). */
RESIL_API resil_err resil_cluster_config_validate(
    const resil_cluster_config *cfg, resil_diag *diag);

/*
 * A cluster over sel, which must outlive it. *cfg is copied (service too).
 * Returns RESIL_OK; RESIL_E_INVAL (named in *diag; also for forking and
 * zone-aware, which run only in a pipeline); RESIL_E_NOMEM. The
 * caller frees it with resil_cluster_free(), which drops queued failback
 * tasks.
 */
RESIL_API resil_err resil_cluster_new(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag);
RESIL_API void resil_cluster_free(resil_cluster *cl);

/* One attempt on the endpoint picked: the user's call. Returns its code;
 * the classifier maps it to an outcome. *out starts null. */
typedef int (*resil_endpoint_fn)(void *ctx, const resil_pick *endpoint,
    const resil_request *req, resil_value *out);

typedef struct resil_cluster_result {
	resil_err err;         /* RESIL_OK, or what the caller gets */
	int rc;                /* the last attempt's return code */
	resil_outcome outcome; /* the last attempt's */
	resil_value value;     /* owned: resil_value_free() */
	uint32_t attempts;
	char message[RESIL_DIAG_MAX]; /* on error, Dubbo's words */
} resil_cluster_result;

/*
 * Run req through the strategy. Returns out->err: RESIL_OK (a success, or
 * a failure failsafe or failback swallowed: value null); RESIL_E_CALL for
 * a failure (rc in out->rc); RESIL_E_BUSINESS for a business outcome
 * (passed through; value kept); RESIL_E_NO_PROVIDER when routing left no
 * candidate; RESIL_E_INVAL for a NULL argument.
 */
RESIL_API resil_err resil_cluster_invoke(resil_cluster *cl,
    const resil_request *req, resil_endpoint_fn fn, void *ctx,
    resil_cluster_result *out);

/*
 * Failback: run the tasks that are due now, each once. *ran (may be NULL)
 * gets the number of attempts made. Tasks are retried through fn, ctx.
 * RESIL_OK; RESIL_E_INVAL for NULL cl or fn; RESIL_E_NOMEM when memory
 * ran out, with the tasks not run still queued as they were (still due,
 * no retry counted).
 */
RESIL_API resil_err resil_cluster_failback_poll(
    resil_cluster *cl, resil_endpoint_fn fn, void *ctx, size_t *ran);

/* Failback tasks queued now. */
RESIL_API size_t resil_cluster_failback_pending(resil_cluster *cl);

/* Failback: failures dropped because the queue was full (the callers got
 * RESIL_OK and a null value), since the cluster was made; 0 for NULL. */
RESIL_API uint64_t resil_cluster_failback_dropped(const resil_cluster *cl);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_CLUSTER_H */

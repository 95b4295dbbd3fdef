/*
 * resil pipeline: every stage composed around one user function.
 *
 *   resil_pipeline_call(p, args, fn, ctx, &result)   (or the call machine,
 *                                                     resil_call_start)
 *     -> mock stage       force: the mock answers; nothing below runs
 *     -> fallback chain   after a non-business failure: cache (age-limited),
 *                         then the mock (fail:), then user handlers
 *     -> retry            re-runs below while the outcome is retryable
 *     -> circuit breaker  a permit, or a fast RESIL_E_OPEN rejection
 *     -> rate limiter, bulkhead
 *     -> fn(ctx, args, &value)
 *
 * With a selector (resil_pipeline_config.selector: many endpoints), the
 * stages below the fallback chain become the cluster:
 *
 *   resil_pipeline_invoke(p, m, args, fn, ctx, &result)  (or the machine)
 *     -> mock stage, fallback chain   as above
 *     -> cluster strategy  failover / failfast / failsafe / failback /
 *                          forking / broadcast / zone-aware (cfg.cluster)
 *     -> router chain, balancer       the selector's (selector.h)
 *     -> the pipeline's rate limiter, bulkhead (per attempt), and the
 *        endpoint's own breaker (the directory's)
 *   (the pipeline's breaker wraps the strategy: one permit per call,
 *   recorded with the whole call's outcome; docs/pipeline.md)
 *     -> fn(ctx, endpoint, args, &value)
 *
 * Business errors never degrade and are never retried. See
 * docs/cluster.md for each strategy's exact rules.
 *
 * Any stage may be absent. Each call names its method (args->method):
 * methods declared in the configuration get their own mock spec, timeout,
 * attempt limit and, with breaker_per_method, their own breaker; other
 * methods use the service-level settings.
 *
 * Timeouts: C cannot interrupt a call. A call learns its deadline from
 * resil_pipeline_deadline() (the clock reading by which it should return,
 * from the method's timeout and the retry deadline); a call that returns
 * after its timeout is recorded as a failure (RESIL_E_TIMEOUT), its late
 * value is dropped, and retry and fallback treat it as any failure.
 *
 * Thread safety: resil_pipeline_call, resil_pipeline_call_method,
 * resil_pipeline_invoke, resil_pipeline_failback_poll, the call machine
 * (resil_call_*: each call stepped by one thread at a time),
 * resil_pipeline_set_mock, resil_pipeline_reload (and its text forms in
 * config.h) and resil_pipeline_get_metrics may run concurrently from any
 * number of threads. new, add_handler (before the
 * first call) and free must not overlap any other call on the same
 * pipeline. The listener may be called from any calling thread,
 * concurrently.
 */
#ifndef RESIL_PIPELINE_H
#define RESIL_PIPELINE_H

#include <string.h>

#include <resil/breaker.h>
#include <resil/call.h>
#include <resil/chaos.h>
#include <resil/clock.h>
#include <resil/cluster.h>
#include <resil/fallback.h>
#include <resil/limit.h>
#include <resil/mock.h>
#include <resil/resil.h>
#include <resil/retry.h>
#include <resil/throttle.h>
#include <resil/value.h>

#ifdef __cplusplus
extern "C" {
#endif

/* resil_pipeline and resil_method (a resolved method, see
 * resil_pipeline_method()) are declared in <resil/call.h>, whose call
 * machine takes them. */

/* The stage an event comes from. */
typedef enum resil_stage {
	RESIL_STAGE_MOCK = 0,
	RESIL_STAGE_FALLBACK = 1,
	RESIL_STAGE_RETRY = 2,
	RESIL_STAGE_BREAKER = 3,
	RESIL_STAGE_RATELIMIT = 4,
	RESIL_STAGE_BULKHEAD = 5,
	RESIL_STAGE_CALL = 6,
	RESIL_STAGE_CLUSTER = 7,
	/* a reload (resil_pipeline_reload) */
	RESIL_STAGE_CONFIG = 8,
	/* the throttle stage and the server's pushback (issue 42) */
	RESIL_STAGE_THROTTLE = 9
} resil_stage;

/* "mock", "fallback", "retry", "breaker", "ratelimit", "bulkhead", "call",
 * "cluster", "config", "throttle" or "unknown". */
RESIL_API const char *resil_stage_name(resil_stage s);

/*
 * One event of any stage. method is the method of the call during which
 * it happened ("" when none), valid during the listener call only. Exactly
 * one of breaker, retry and limit is set for events of those stages; for
 * MOCK, FALLBACK and CALL events, result is set (the answer given).
 * text is a one-line account, e.g. "breaker CLOSED -> OPEN
 * (consecutive_failures)".
 */
typedef struct resil_pipeline_event {
	resil_stage stage;
	const char *service;
	const char *method;
	uint64_t time;
	const resil_breaker_event *breaker;
	const resil_retry_event *retry;
	const resil_limit_event *limit;
	const resil_result *result;
	const char *text;
	/* CLUSTER events (failsafe swallowed, failback queued / queue full /
	 * retried / gave up, zone-aware crossed zones, no provider). */
	const resil_cluster_event *cluster;
	/* Issue 44: a BREAKER event of the fleet breaker the pipeline
	 * opened from breaker.fleet (connected, local, state, leases, error,
	 * settings; <resil/fleet.h>), from the thread that synced; text
	 * "fleet NAME connected (synced)", "fleet NAME local (why)", ...
	 * Issue 41 (h3): also a RATELIMIT event of the fleet rate limiter
	 * the pipeline opened from ratelimit.fleet (local, connected,
	 * error, settings; ev.votes: N), from the thread whose acquire had
	 * it: "fleet limiter NAME local (why)". */
	const struct resil_fleet_event *fleet;
} resil_pipeline_event;

typedef void (*resil_pipeline_listener_fn)(
    const resil_pipeline_event *ev, void *ctx);

/*
 * An executor lets resil_pipeline_call() run the attempts of a hedging
 * pipeline in parallel. All three functions are required.
 * - submit: start run(job) on another thread and return 0; nonzero when
 *   it cannot (that attempt then runs on the calling thread). run must be
 *   called exactly once, and not from inside submit.
 * - wait: block the calling thread until wake() has been called since the
 *   last wait returned, or the pipeline's clock reaches until (UINT64_MAX:
 *   no limit); returning early is allowed. (With the manual clock, a
 *   timed wait with no wake pending may simply advance the clock to
 *   until.)
 * - wake: called by a job when its attempt has answered, from the
 *   executor's thread.
 * ctx is passed to each; resil never frees it. The user's function then
 * runs on the executor's threads and must be thread-safe. A job whose
 * call has finished (a hedge that lost) runs on with its own copy of the
 * arguments and its answer is dropped; its memory is freed by whichever
 * of the call and the job ends last. The executor's ctx and the
 * function's ctx must outlive such jobs (the pipeline need not).
 */
typedef struct resil_executor {
	int (*submit)(void (*run)(void *job), void *job, void *ctx);
	void (*wait)(uint64_t until, void *ctx);
	void (*wake)(void *ctx);
	void *ctx;
} resil_executor;

/* Settings of one declared method; 0 / NULL fields inherit the
 * service-level setting. */
typedef struct resil_method_config {
	const char *name;    /* required, unique */
	resil_type type;     /* declared return type; RESIL_TYPE_ANY */
	const char *mock;    /* method-level mock spec; NULL: inherit */
	uint64_t timeout_ns; /* 0: the service-level timeout */
	/* 0: the service-level retry setting. With a selector: the
	 * failover / zone-aware attempts of this method (retries + 1; the
	 * text key getStock.retries=N sets N + 1). */
	uint32_t max_attempts;
	/* Read-through cache (issue 43; the pipeline's cache enabled): a
	 * cached value of the call's key at most this old answers without
	 * a call (source RESIL_SOURCE_CACHE, its age); older ones, and
	 * misses, go to the dependency as without it. 0: off. */
	uint64_t cache_fresh_ns;
	/* Issue 42: the method's calls' priority class when the call gives
	 * none (resil_invocation.priority, its resil.priority attachment);
	 * UNSET: DEFAULT. Text: getStock.priority=critical. */
	resil_priority priority;
	/* Issue 43: coalescing. Identical calls in flight at once (same
	 * method, same argument bytes) share one call: the first runs it,
	 * up to this many others wait for its answer and get a copy (more
	 * go on their own). 0: off. Text: getStock.coalesce=true (1024) or
	 * =N (1..1048576), false or 0: off. Both drivers; a call machine
	 * follows only with a wake hook (resil_invocation.wake); a follower
	 * waits at most the method's timeout (docs/fallback.md). */
	uint32_t coalesce_max_waiters;
} resil_method_config;

typedef struct resil_pipeline_config {
	size_t size; /* sizeof(resil_pipeline_config), set by _init() */
	const char *service; /* required: the interface, e.g. "StockService" */

	/* Stages: each is on when its _enabled field is nonzero. The
	 * clock, allocator and listener fields of the stage configs are
	 * replaced by the pipeline's own. */
	int breaker_enabled;
	int breaker_per_method; /* one breaker per declared method */
	resil_breaker_config breaker;
	int retry_enabled;
	resil_retry_config retry;
	int cache_enabled;
	resil_cache_config cache;
	int ratelimit_enabled;
	resil_ratelimit_config ratelimit;
	int bulkhead_enabled;
	resil_bulkhead_config bulkhead;

	/* The service-level mock spec (NULL: none) and the registry its
	 * names resolve in (read during new and set_mock: it must outlive
	 * every resil_pipeline_set_mock call). */
	const char *mock;
	const resil_mock_registry *registry;

	uint64_t timeout_ns; /* per call; 0: none */

	const resil_method_config *methods; /* copied */
	size_t nmethods;

	resil_classifier classifier; /* NULL fn: 0 is success */
	resil_pipeline_listener_fn listener;
	void *listener_ctx;
	const resil_clock *clock;     /* NULL: the monotonic system clock */
	const resil_allocator *alloc; /* NULL: malloc() and free() */

	/*
	 * Hedging (Polly v8's hedging strategy), for calls run through the
	 * call machine (resil_call_start): when an attempt has not answered
	 * within hedge_delay_ns, or has failed, another attempt is started,
	 * up to hedge_max extra ones; the first answer that is not a
	 * failure wins and the others are abandoned; when all fail the
	 * last failure stands. Each hedge spends one retry from the retry
	 * budget (when the pipeline's retry policy has one; a refusal stops
	 * hedging for that attempt). Together the hedged attempts are one
	 * attempt of the retry stage. resil_pipeline_call() runs attempts
	 * in parallel only through an executor: without one it refuses a
	 * pipeline with hedging (RESIL_E_INVAL). 0: off; at most
	 * RESIL_CALL_MAX_INFLIGHT - 1.
	 */
	uint32_t hedge_max;
	uint64_t hedge_delay_ns;
	/*
	 * The failures that end hedging (issue 43; gRPC's hedging policy
	 * calls the others non-fatal): when an attempt fails with a kind in
	 * this mask, no more hedges start for that attempt of the retry
	 * stage, the attempts still out are dropped (with a selector their
	 * late answers still reach their endpoints) and the failure is
	 * decided on at once (the retry stage may retry it). A failure of a
	 * kind not in it starts the next hedge at once. 0 (the default):
	 * every failure allows a hedge. Text: hedge.on= lists the kinds that
	 * allow one (docs/config.md).
	 */
	unsigned hedge_fatal;
	resil_executor executor; /* copied; submit NULL: none */

	/* Per-call events for the listener (Resilience4j's onSuccess,
	 * onError, onCallNotPermitted): a RESIL_STAGE_CALL event at the end
	 * of each call of the kinds in this mask, with the result. 0 (the
	 * default): none, and no cost. */
	unsigned call_events;

	/*
	 * The cluster. selector NULL (the default): one implicit endpoint,
	 * the pipeline above, unchanged. Otherwise borrowed (it, and its
	 * directory, must outlive the pipeline): every attempt goes to an
	 * endpoint the selector routes and picks, and the strategy in
	 * cluster decides the attempts (cluster.clock, .alloc, .listener and
	 * .classifier are replaced by the pipeline's own). Attempts:
	 * failover and zone-aware make cluster.retries + 1 (a method's
	 * max_attempts overrides it); retry.max_attempts is not used then,
	 * while the retry policy, when enabled, still gives the backoff,
	 * jitter, deadline, budget and what is retried. hedge_max hedges on
	 * endpoints not yet tried in the call (issue 43, docs/cluster.md);
	 * forking and broadcast refuse it (they make their own attempts).
	 * Forking under
	 * resil_pipeline_invoke() needs the executor (else that call is
	 * RESIL_E_INVAL, naming `cluster`); the call machine forks without
	 * one.
	 */
	resil_selector *selector;
	resil_cluster_config cluster;

	/*
	 * Chaos (Polly's Simmy, <resil/chaos.h>, docs/chaos.md): NULL (the
	 * default) none. Otherwise borrowed (it must outlive the pipeline;
	 * its switches flip at run time): asked once per attempt, after the
	 * breaker, the limiters and the endpoint's pick, just before the
	 * attempt would run. Its behaviour runs there (on the stepping
	 * thread); its latency delays the attempt (a WAIT until then; the
	 * attempt's timeout runs from admission, so latency > timeout is a
	 * TIMEOUT); its fault answers the attempt with the fault's rc and
	 * its outcome with rc 0 and a copy of its value, without the
	 * user's function: every stage above sees them as real answers.
	 */
	resil_chaos *chaos;

	/*
	 * State shared with other processes (issue 24.2, docs/shared.md and
	 * docs/fleet.md, "In a pipeline"). Each handle is borrowed: made by
	 * the caller (resil_shm_breaker(), resil_fleet_new(), ...), it must
	 * outlive the pipeline and is never freed by it; it is as
	 * thread-safe as its own kind. NULL (the default): none.
	 * - shared_breaker (a shm breaker) is the service breaker: the
	 *   pipeline's own is not used; breaker.* configured the handle.
	 * - fleet (a Redis fleet breaker): the service breaker is the
	 *   fleet's, through resil_fleet_acquire / _record / _release
	 *   (its probe leases); the caller drives resil_fleet_sync() or
	 *   resil_fleet_start(). Not with shared_breaker.
	 * - shared_ratelimit, shared_bulkhead (shm): the pipeline's rate
	 *   limiter and bulkhead.
	 * - fleet_ratelimit: a fleet-wide rate limiter, asked once per
	 *   attempt (one Redis round trip, resil_fleet_limit_acquire) in
	 *   place of the pipeline's own (ratelimit_enabled must be on; its
	 *   limiter is not asked). Not with shared_ratelimit.
	 * Not with breaker_per_method (refused). With a selector the
	 * service breaker wraps the whole call (one permit per call).
	 * They cannot change by reload (NULL in a reload keeps them).
	 */
	resil_breaker *shared_breaker;
	struct resil_fleet *fleet;
	resil_ratelimit *shared_ratelimit;
	resil_bulkhead *shared_bulkhead;
	struct resil_fleet_limit *fleet_ratelimit;

	/*
	 * The same, named in text (configuration keys breaker.shared,
	 * breaker.fleet, ratelimit.shared, bulkhead.shared, ratelimit.fleet;
	 * docs/config.md): "shm:REGION/NAME" or "redis://HOST[:PORT]/NAME".
	 * resil_pipeline_new opens or attaches them itself (region with
	 * the default resil_shm_config; objects with the breaker.*,
	 * ratelimit.*, bulkhead.* settings; the fleet's local breaker with
	 * breaker.*, its open_wait from breaker.open_wait when set), owns
	 * them and frees them with the pipeline. A handle above and its
	 * text together are refused. Copied.
	 * fleet_sync_ns: with breaker_fleet_url, nonzero starts the fleet's
	 * sync thread at that interval (resil_fleet_start, milliseconds
	 * rounded up); 0: the caller syncs (resil_pipeline_fleet()).
	 */
	const char *breaker_shared_url;
	const char *breaker_fleet_url;
	const char *ratelimit_shared_url;
	const char *bulkhead_shared_url;
	const char *ratelimit_fleet_url;
	uint64_t fleet_sync_ns;
	/* Issue 44: the settings of the fleet breaker breaker_fleet_url
	 * names (text keys breaker.fleet.*, docs/config.md); 0: the
	 * default of resil_fleet_config_init(). Counts are plain numbers,
	 * times nanoseconds (milliseconds rounded up). Refused without
	 * breaker_fleet_url; fixed when the pipeline is created. */
	struct {
		uint64_t quorum;             /* instances, 1..1024 */
		uint64_t quorum_traffic_pct; /* share of traffic, 0..100 */
		uint64_t probe_leases;       /* K per episode, 1..1024 */
		uint64_t max_local_leases;   /* 1..64 */
		uint64_t buckets;            /* 1..1000 */
		uint64_t open_wait_ns;       /* the fleet's own, 1 ms..24 h */
		uint64_t lease_ns;           /* 1 ms..24 h */
		uint64_t vote_ns;            /* 1 ms..24 h */
		uint64_t bucket_ns;          /* 1 ms..1 h */
		uint64_t connect_timeout_ns; /* 1 ms..60 s */
		uint64_t command_timeout_ns; /* 1 ms..60 s */
		uint64_t reconnect_ns;       /* 1 ms..1 h */
	} fleet_settings;
	/* Issue 44 (h2), text key breaker.fleet.endpoints: with
	 * breaker_fleet_url and a selector, each endpoint's breaker is on
	 * the fleet too (a fleet breaker NAME.ep.ADDRESS per endpoint, its
	 * local breaker from endpoint.breaker.*, in the pipeline's group;
	 * docs/fleet.md). 0: the endpoints' breakers are local. Fixed when
	 * the pipeline is created. */
	int fleet_endpoints;
	/* Text key endpoint.breaker.shared=shm:REGION: the endpoints'
	 * breakers in that region. The directory's setting
	 * (resil_directory_config.endpoint_breaker_shm, which
	 * resil_config_directory() sets from it); the pipeline only keeps
	 * it from changing by reload. */
	const char *endpoint_breaker_shared_url;
	/* Set by resil_config_pipeline(): the text's selector, directory
	 * and registry keys (loadbalance*, router.*, outlier.*, panic.*,
	 * health.*, url=, endpoint.breaker.*, registry*), as a reload
	 * compares them (issue 24.1); opaque, owned by the resil_config.
	 * resil_pipeline_new() copies it. NULL (a configuration made in C):
	 * the pipeline was given no such keys. */
	const char *cluster_keys;
	/* Issue 42: adaptive client throttling (<resil/throttle.h>) as a
	 * stage in front of the breaker: every attempt asks it first; a
	 * refusal is RESIL_E_LIMITED and touches nothing below. Its
	 * clock, allocator and listener are the pipeline's. Text keys
	 * throttle.enabled, throttle.k, throttle.window, throttle.buckets,
	 * throttle.seed (docs/config.md). */
	int throttle_enabled;
	resil_throttle_config throttle;
	/*
	 * Issue 41: keyed families named by the configuration, indexed by
	 * resil_keyed_kind (0 breaker, 1 ratelimit, 2 bulkhead, 3 throttle;
	 * text keys breaker.key, ratelimit.key, bulkhead.key, throttle.key
	 * and their .key.*
	 * settings, docs/keyed.md "In the text"). key: the key source
	 * (resil_pipeline_set_keyed()'s spec: "host" the endpoint the
	 * selector chose, per attempt; "A+B" a composite of up to 4), or
	 * NULL: that stage is not keyed.
	 * With a key (and the stage on) the stage's settings (breaker,
	 * ratelimit, bulkhead, throttle) configure each key's instance and the
	 * pipeline's own stage of that kind is not made: the family takes
	 * its place. max_keys, max_key_len: 0 the family's default (10000,
	 * 256). overrides (rate limiter and bulkhead families): copied.
	 * Fixed when the pipeline is created (a reload may repeat them).
	 * shared (breaker families, text breaker.key.shared, issue 41):
	 * "shm:REGION/NAME", the family is the keyed breaker family NAME of
	 * the shared-memory region REGION (resil_shm_keyed(), shm.h),
	 * opened by the pipeline; its keys are 1..64 bytes (max_key_len 0:
	 * 64). NULL: the family is the process's own.
	 */
	struct {
		const char *key;
		uint32_t max_keys;
		uint32_t max_key_len;
		const struct resil_keyed_override *overrides;
		size_t n_overrides;
		const char *shared; /* issue 41: "shm:REGION/NAME" or NULL */
	} keyed[4];
} resil_pipeline_config;

/* The kinds of call events (resil_pipeline_config.call_events). */
/* Kinds of failure, for hedge_fatal (issue 43): the attempt's function
 * failed (an rc the classifier calls a failure); it timed out (its
 * timeout, or it returned RESIL_RC_TIMEOUT); it was refused before it ran
 * (a breaker open, a limit, the server's pushback). */
#define RESIL_HEDGE_ON_FAILURE 0x1u
#define RESIL_HEDGE_ON_TIMEOUT 0x2u
#define RESIL_HEDGE_ON_REJECTED 0x4u
#define RESIL_HEDGE_ON_ALL 0x7u

#define RESIL_CALL_EVENT_SUCCESS 0x1u  /* answered RESIL_OK, any source */
#define RESIL_CALL_EVENT_ERROR 0x2u    /* an error: failed, unavailable */
#define RESIL_CALL_EVENT_REJECTED 0x4u /* not permitted: open, limited */
#define RESIL_CALL_EVENTS_ALL 0x7u

/*
 * A ready-made listener that keeps every pipeline event in a
 * caller-provided array (stage, time, the method, and the text copied),
 * so a test can compare a whole history. Events past the capacity are
 * counted in dropped. It is thread-safe (a spin lock): pipelines call
 * listeners from every calling thread. Set it up with
 * resil_pipeline_recorder_init(), then pass
 * resil_pipeline_recorder_listener as cfg.listener and the recorder as
 * cfg.listener_ctx.
 */
typedef struct resil_pipeline_record {
	resil_stage stage;
	uint64_t time;
	char method[64];
	char text[160];
	resil_err err;       /* CALL events: the result's */
	resil_source source; /* CALL events: the result's */
} resil_pipeline_record;

typedef struct resil_pipeline_recorder {
	resil_pipeline_record *records;
	size_t capacity;
	size_t count;     /* records kept */
	uint64_t dropped; /* events that did not fit */
	unsigned char lock_;
} resil_pipeline_recorder;

RESIL_API void resil_pipeline_recorder_init(resil_pipeline_recorder *r,
    resil_pipeline_record *records, size_t capacity);
RESIL_API void resil_pipeline_recorder_listener(
    const resil_pipeline_event *ev, void *ctx);

/* Defaults: no stage on (each stage's own defaults ready in its config),
 * no mock, no timeout. */
static inline void
resil_pipeline_config_init(resil_pipeline_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	resil_breaker_config_init(&cfg->breaker);
	resil_retry_config_init(&cfg->retry);
	resil_cache_config_init(&cfg->cache);
	resil_ratelimit_config_init(&cfg->ratelimit);
	resil_bulkhead_config_init(&cfg->bulkhead);
	resil_cluster_config_init(&cfg->cluster);
	resil_throttle_config_init(&cfg->throttle);
}

static inline resil_pipeline_config
resil_pipeline_config_default(void)
{
	resil_pipeline_config cfg;

	resil_pipeline_config_init(&cfg);
	return cfg;
}

/*
 * Build a pipeline. Every stage is created and validated now; a bad
 * setting is refused with a message naming it (`breaker.window_size: 0
 * ...`, `getStock.mock: "fail:" at column 6: ...`).
 *
 * *cfg, its strings and its methods are copied; the registry is read
 * during this call and by resil_pipeline_set_mock(); the clock's, allocator's,
 * classifier's and listener's ctx must outlive the pipeline. The caller frees
 * *out with resil_pipeline_free().
 *
 * Returns RESIL_OK; RESIL_E_INVAL (message in diag); RESIL_E_NOMEM. On
 * error *out is unchanged.
 */
RESIL_API resil_err resil_pipeline_new(
    resil_pipeline **out, const resil_pipeline_config *cfg, resil_diag *diag);

/* Free p and every stage it created. NULL is a harmless no-op. */
RESIL_API void resil_pipeline_free(resil_pipeline *p);

/* Append a user fallback handler after the cache and the mock. Only
 * before the first call. RESIL_OK, RESIL_E_INVAL, RESIL_E_NOMEM. */
RESIL_API resil_err resil_pipeline_add_handler(
    resil_pipeline *p, resil_fallback_fn fn, void *ctx);

/*
 * Run fn(ctx, args, &value) through every stage. The answer, its
 * provenance (source, age, attempts, the breaker state seen) and any
 * error are in *out (overwritten; free it with resil_result_free()).
 *
 * Returns out->err: RESIL_OK with a value (live, cached or mocked);
 * RESIL_E_BUSINESS (the callee's own error, untouched); RESIL_E_MOCK or
 * RESIL_E_BUSINESS from a mock `throw`; RESIL_E_UNAVAILABLE when every
 * fallback passed; without a fallback, the original failure
 * (RESIL_E_CALL with rc, RESIL_E_OPEN, RESIL_E_TIMEOUT, RESIL_E_LIMITED,
 * RESIL_E_RETRIES_EXHAUSTED), with out->source RESIL_SOURCE_UNAVAILABLE
 * (nothing answered). RESIL_E_INVAL for a NULL argument or a NULL
 * args->method (*out untouched), and for a pipeline configured with
 * hedging but no executor, which needs attempts in parallel (*out says
 * so; give the pipeline an executor, or use the call machine below).
 *
 * Best effort, never an error of the call: a live answer whose copy into
 * the cache cannot be allocated is still returned (not cached); a cached
 * answer that cannot be copied out for lack of memory counts as a miss,
 * and the chain asks its next handler.
 *
 * This is the blocking driver of the call machine (resil_call_start()
 * below): it runs each attempt on the calling thread and sleeps through
 * the pipeline's clock between retries. The success path, without cache
 * and timing, allocates nothing and takes no lock.
 */
RESIL_API resil_err resil_pipeline_call(resil_pipeline *p,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out);

/* ---- method handles ---- */

/*
 * Resolve a method name once: *out is the handle of the declared method
 * name, or of the service-level settings when name is not declared (the
 * settings a call by that name would use). Handles are immutable and
 * valid as long as p, across reloads (see resil_pipeline_reload: a call
 * resolves its handle in the settings it runs with); pass one per call to
 * resil_pipeline_call_method() or resil_call_start() so that the call does no
 * string hashing.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument.
 */
RESIL_API resil_err resil_pipeline_method(
    resil_pipeline *p, const char *name, const resil_method **out);

/* The declared name of m, "" for the service-level handle, NULL for
 * NULL. */
RESIL_API const char *resil_method_name(const resil_method *m);

/*
 * The chaos method's attempts ask (issue 28, docs/chaos.md): its own
 * (getStock.chaos.* in the text, resil_chaos_set_method() in C), else the
 * pipeline's; the pipeline's for a NULL method; NULL for a NULL p or a
 * pipeline without chaos. Flip it with resil_chaos_set_enabled(): the
 * method's next attempts follow, no reload. Valid as long as p.
 */
RESIL_API resil_chaos *resil_pipeline_chaos(
    resil_pipeline *p, const char *method);

/*
 * resil_pipeline_call() with the method's settings taken from m instead
 * of looking args->method up. args->method still names the call for the
 * mock stage, the cache key and events. Returns as resil_pipeline_call();
 * RESIL_E_INVAL also for a NULL m or a handle of another pipeline (*out
 * untouched).
 */
RESIL_API resil_err resil_pipeline_call_method(resil_pipeline *p,
    const resil_method *m, const resil_args *args, resil_call_fn fn, void *ctx,
    resil_result *out);

/* ---- the call machine ---- */

/* The call as a state machine for event loops: resil_call_start() and
 * the rest are in <resil/call.h> (included above; docs/async.md). */

/* ---- the cluster's blocking form ---- */

/* One attempt on endpoint (NULL without a selector): the user's call.
 * Returns its code; the classifier maps it to an outcome. *out starts
 * null; resil frees it. */
typedef int (*resil_endpoint_call_fn)(void *ctx, const resil_pick *endpoint,
    const resil_args *args, resil_value *out);

/*
 * resil_pipeline_call() for a pipeline with a selector: fn receives the
 * endpoint of each attempt. m NULL: looked up by args->method. Without a
 * selector, fn gets endpoint NULL and the call is resil_pipeline_call's.
 * Forking runs its attempts on the executor. Returns out->err as
 * resil_pipeline_call() does, and RESIL_E_NO_PROVIDER when routing left
 * no candidate and no fallback answered; RESIL_E_INVAL for a NULL
 * argument (*out untouched). On a failure without a fallback
 * out->message has Dubbo's words ("Failed to invoke the method getStock
 * in the service StockService. Tried 3 times of the providers [a, b]
 * (2/8). Last error is: timeout after 3000 ms"); out->endpoint and
 * out->zone name the endpoint of the final answer. With a selector,
 * resil_pipeline_call() and resil_pipeline_call_method() refuse
 * (RESIL_E_INVAL): use this.
 */
RESIL_API resil_err resil_pipeline_invoke(resil_pipeline *p,
    const resil_method *m, const resil_args *args, resil_endpoint_call_fn fn,
    void *ctx, resil_result *out);

/*
 * resil_pipeline_invoke() of the call inv describes (resil_invocation in
 * <resil/call.h>): inv->args is the call's args, and with a selector its
 * arguments, tag, attachments and retries reach the routers and the
 * balancer of every attempt, and failback's queue (a queued call is
 * retried with the same request). fn receives &inv->args (a copy when
 * the attempt runs on the executor). Returns as resil_pipeline_invoke();
 * RESIL_E_INVAL also for a NULL inv.
 */
RESIL_API resil_err resil_pipeline_invoke_ex(resil_pipeline *p,
    const resil_method *m, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out);

/*
 * Failback (cluster.strategy RESIL_CLUSTER_FAILBACK): run the queued
 * calls that are due at clock reading now, each once, through fn on an
 * endpoint the selector picks (avoiding the one tried last when another
 * exists). *ran (may be NULL) gets the attempts made. A due task is
 * re-armed at now + failback.period until it succeeds or has failed
 * failback.retries times (then dropped, an event). No timer thread: the
 * user calls this with the clock. RESIL_OK; RESIL_E_INVAL for NULL p or
 * fn; RESIL_OK with *ran 0 for a pipeline without failback; RESIL_E_NOMEM
 * when memory ran out, with the tasks not run still queued as they were
 * (still due, no retry counted).
 */
RESIL_API resil_err resil_pipeline_failback_poll(resil_pipeline *p,
    uint64_t now, resil_endpoint_call_fn fn, void *ctx, size_t *ran);

/* Failback calls queued now (0 without failback). */
RESIL_API size_t resil_pipeline_failback_pending(resil_pipeline *p);

/* The selector (borrowed), or NULL. */
RESIL_API resil_selector *resil_pipeline_selector(const resil_pipeline *p);

/*
 * Inside a user function called by resil_pipeline_call(): the clock
 * reading by which it should return (the earlier of its timeout and the
 * retry deadline), or UINT64_MAX when it has none. Outside such a call:
 * UINT64_MAX. (Kept per thread by the pipeline for the running call.)
 */
RESIL_API uint64_t resil_pipeline_deadline(void);

/*
 * Change a mock spec while calls run: method NULL sets the service-level
 * spec (`mock=`), otherwise the method-level one (`getStock.mock=`; NULL
 * spec: inherit again). The spec is validated first; on error nothing
 * changes. A call reads the mock at its mock stage and again when its
 * fallback chain asks it, each time the one current then. The previous
 * configuration is freed once no call can be
 * reading it: memory stays bounded however often specs switch. It waits
 * for calls reading the old one (a mock implementation running), so a mock
 * implementation must not call it on its own pipeline.
 */
RESIL_API resil_err resil_pipeline_set_mock(
    resil_pipeline *p, const char *method, const char *spec, resil_diag *diag);

/*
 * Reload: replace the pipeline's settings while calls run (Polly's
 * reloads, Dubbo's dynamic configuration). cfg is checked and every stage
 * built first; on any error (RESIL_E_INVAL with the key named in diag,
 * RESIL_E_NOMEM) nothing changes and calls go on exactly as before.
 *
 * Atomic: the new settings are published with one pointer store. A call
 * runs on the settings current when it started, from its first stage to
 * its answer (a call machine's call until DONE or cancel, however many
 * steps and threads), and its outcomes go to the stage objects of those
 * settings. The old settings are freed by whichever of the reload and
 * their last call ends last: memory stays bounded however many reloads;
 * a reload never waits for a running call (it only waits for calls that
 * are between loading the settings pointer and counting themselves).
 *
 * State carried over: a stage object whose effective configuration is
 * unchanged is the same object in the new settings (shared by old and new
 * calls, so no outcome is lost): the service breaker (breaker.*), each
 * declared method's own breaker (breaker_per_method, same breaker.*, the
 * method still declared), the retry policies and their budget (retry.*;
 * a method's own: also the same max_attempts), the cache and its
 * contents (cache.*), the rate limiter and the bulkhead (their *). A
 * stage whose configuration changed starts fresh (a breaker CLOSED with
 * an empty window). The mock specs become the new configuration's
 * (replacing any resil_pipeline_set_mock since); user fallback handlers
 * (add_handler) stay. docs/pipeline.md has the table.
 *
 * Cannot change (refused, naming the key): service, clock, alloc,
 * listener, classifier, registry, selector, executor, call_events,
 * hedge_max, hedge_delay and, with a selector, the cluster settings
 * (cluster, retries, forks, failback.*, broadcast.*, zone,
 * cross_zone_timeout). For the pointer fields and call_events, NULL / 0
 * in cfg means "keep the pipeline's" (what resil_config_pipeline()
 * gives), so a configuration parsed from text reloads as it is;
 * service NULL keeps it too.
 *
 * Method handles (resil_pipeline_method) stay valid: a handle names its
 * method, and each call resolves it in the settings it runs with (a
 * method the new configuration no longer declares runs with the
 * service-level settings, and with its own again if a later reload
 * declares it). Pointers from resil_pipeline_breaker(), _retry(),
 * _cache(), _ratelimit() and _bulkhead() name the current settings'
 * objects: take them again after a reload (the old ones stay valid only
 * while the old settings are held by a call).
 *
 * One RESIL_STAGE_CONFIG event per reload that succeeds: "configuration
 * reloaded: 2 settings changed (retry, getStock)" or "configuration
 * reloaded: nothing changed". Breaker transitions of carried-over
 * breakers keep going to the listener.
 *
 * Thread safety: with calls, set_mock and other reloads on any thread;
 * reloads and set_mock serialise on one lock. As set_mock, not from
 * inside a mock implementation of the same pipeline (set_mock holds that
 * lock while it waits for mock readers); from a user function or the
 * listener it is fine. Not concurrently with add_handler or free.
 */
RESIL_API resil_err resil_pipeline_reload(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag);

/* The pipeline's clock (valid as long as p): the one its stages read. */
RESIL_API const resil_clock *resil_pipeline_clock(const resil_pipeline *p);

/* The service name (valid as long as p). */
RESIL_API const char *resil_pipeline_service(const resil_pipeline *p);

/* The breaker used for method (its own, or the service's); NULL when the
 * pipeline has none. Borrowed. */
RESIL_API resil_breaker *resil_pipeline_breaker(
    resil_pipeline *p, const char *method);

/* The other stages, borrowed (NULL when absent): the retry policy used
 * for method (its own, or the service's), the cache, the limiters. */
RESIL_API resil_retry *resil_pipeline_retry(
    resil_pipeline *p, const char *method);
RESIL_API resil_cache *resil_pipeline_cache(resil_pipeline *p);
RESIL_API resil_ratelimit *resil_pipeline_ratelimit(resil_pipeline *p);
/* The current settings' throttle stage (throttle_enabled), or NULL; the
 * same lifetime rule as the other getters above. */
RESIL_API resil_throttle *resil_pipeline_throttle(resil_pipeline *p);
RESIL_API resil_bulkhead *resil_pipeline_bulkhead(resil_pipeline *p);

/* The fleet breaker and the fleet rate limiter the pipeline uses (given
 * in its configuration or opened from its text), borrowed; NULL when
 * none. For resil_fleet_sync() / resil_fleet_get_info(). */
RESIL_API struct resil_fleet *resil_pipeline_fleet(resil_pipeline *p);
RESIL_API struct resil_fleet_limit *resil_pipeline_fleet_limit(
    resil_pipeline *p);

/*
 * Issue 44 (pipelines through groups). resil_pipeline_fleet_of: the fleet
 * breaker method's calls use: its own with breaker.fleet and
 * breaker.per_method (named NAME.METHOD in Redis), else the service's
 * (method NULL or undeclared: the service's); NULL without a fleet.
 * resil_pipeline_fleet_group: the group every fleet breaker the pipeline
 * opened from breaker.fleet syncs through, shared by the pipelines of the
 * process that name the same Redis (host:port, or sentinels and master)
 * with the same breaker.fleet timeouts, breaker.fleet_sync, clock and
 * allocator; one resil_fleet_group_sync() is one round trip for all of
 * their fleet breakers. With breaker.fleet_sync the group's helper thread
 * syncs it; else the program does. NULL when the fleet is a borrowed
 * handle or there is none. Both borrowed, valid while p lives.
 */
RESIL_API struct resil_fleet *resil_pipeline_fleet_of(
    resil_pipeline *p, const char *method);
RESIL_API struct resil_fleet_group *resil_pipeline_fleet_group(
    resil_pipeline *p);

/* The declared methods, in declaration order: their count, and the name
 * of the i-th (NULL past the end; valid as long as p). */
RESIL_API size_t resil_pipeline_method_count(const resil_pipeline *p);
RESIL_API const char *resil_pipeline_method_name(
    const resil_pipeline *p, size_t i);

#define RESIL_LATENCY_BUCKETS 48

/* Counters of a pipeline, exact, summed over threads. */
typedef struct resil_pipeline_metrics {
	uint64_t calls;       /* resil_pipeline_call invocations */
	uint64_t live;        /* answered by the live call */
	uint64_t cache;       /* answered from the cache */
	uint64_t mock;        /* answered by a mock (value or throw) */
	uint64_t fallback;    /* answered by a user handler */
	uint64_t unavailable; /* every fallback passed */
	uint64_t errors;      /* failures propagated without a fallback */
	uint64_t business;    /* business errors propagated */
	uint64_t timeouts;    /* attempts that returned after their timeout */
	/* Latency of the user's function, where it was timed (a timeout is
	 * configured): bucket i counts durations d with
	 * 2^(i-1) <= d < 2^i ticks (bucket 0: d == 0; the last bucket is
	 * open-ended). */
	uint64_t latency_count;
	uint64_t latency[RESIL_LATENCY_BUCKETS];
	/* Failback: failures dropped because the queue was full (the caller
	 * got no error, a QUEUE_FULL event said so). */
	uint64_t failback_dropped;
	/* Issue 42: attempts the server answered "throttled" (the
	 * RESIL_RC_THROTTLED codes), and attempts refused locally while a
	 * Retry-After paused the rate limiter stage. The throttle stage's
	 * own counts: resil_throttle_get_metrics(resil_pipeline_throttle()). */
	uint64_t pushbacks;
	uint64_t paused;
} resil_pipeline_metrics;

RESIL_API resil_err resil_pipeline_get_metrics(
    const resil_pipeline *p, resil_pipeline_metrics *out);

/* The q-quantile (0 < q <= 1) of a latency histogram, as the upper bound
 * of the bucket holding it; 0 when empty. */
RESIL_API uint64_t resil_latency_quantile(
    const resil_pipeline_metrics *m, double q);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_PIPELINE_H */

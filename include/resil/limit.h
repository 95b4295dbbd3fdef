/*
 * resil limit: a rate limiter and a bulkhead with an optional adaptive
 * concurrency limit.
 *
 * The rate limiter (resil_ratelimit) grants `rate` permits per `period_ns`
 * ticks and lets up to `burst` of them be taken at once. It is the generic
 * cell rate algorithm (GCRA, "virtual scheduling"): one word holds the
 * theoretical arrival time (TAT) of the next permit, and each decision is
 * one compare-and-swap on it. Arithmetic is exact integer arithmetic: time
 * is kept in ticks scaled by rate / gcd(rate, period_ns), so a permit that
 * is due at a fractional tick becomes available at the next whole tick,
 * and never earlier. A freshly created limiter holds its full burst.
 *
 * The bulkhead (resil_bulkhead) lets at most `limit` calls be in flight at
 * once; the in-flight count is one word moved by compare-and-swap, never
 * past the limit and never below zero. With `adaptive` set, the limit moves
 * with the outcomes and latencies the caller records (AIMD: additive
 * increase, multiplicative decrease), between min_limit and max_limit; the
 * exact rule is given at resil_bulkhead_record().
 *
 * Both report rejections and limit changes to an optional listener and keep
 * counters for a metrics snapshot.
 *
 * Thread safety: every function except _new and _free may run concurrently
 * on one limiter or bulkhead from any number of threads; _new and _free
 * must not overlap any other call on the same object. try_acquire, release
 * and record take no lock, allocate nothing and make no system call; they
 * read the clock only where stated. The listener is called on the thread
 * that made the decision, after it took effect: it must return quickly,
 * must not block, and must not free the object it is called for.
 *
 * Durations (the _ns fields, retry_after, max_wait, latency) are in ticks
 * of the object's clock: nanoseconds with the system clock, the test's
 * unit with a manual clock.
 */
#ifndef RESIL_LIMIT_H
#define RESIL_LIMIT_H

#include <string.h>

#include <resil/clock.h>
#include <resil/gradient.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_ratelimit resil_ratelimit;
typedef struct resil_bulkhead resil_bulkhead;

/*
 * A call's priority class (issue 42). Limiters shed the lower classes
 * first: a bulkhead keeps reserve_critical slots for critical calls and
 * reserve_default more for default and critical ones, and its queue
 * hands a freed slot to the highest class waiting. UNSET (0, the zeroed
 * struct) means "not given here": the next source decides (a call's
 * invocation, then its `resil.priority` attachment, then the method's
 * `priority` key), and DEFAULT in the end.
 */
typedef enum resil_priority {
	RESIL_PRIORITY_UNSET = 0,
	RESIL_PRIORITY_SHEDDABLE = 1,
	RESIL_PRIORITY_DEFAULT = 2,
	RESIL_PRIORITY_CRITICAL = 3
} resil_priority;

/* "sheddable", "default", "critical", or "unset" (and "unknown"). */
RESIL_API const char *resil_priority_name(resil_priority p);

/* Parse "critical", "default" or "sheddable" (case-insensitive) into
 * *out. RESIL_OK; RESIL_E_INVAL for NULL or another text (*out
 * unchanged). */
RESIL_API resil_err resil_priority_parse(const char *text, resil_priority *out);

/* What a listener is told about. */
typedef enum resil_limit_event_type {
	RESIL_LIMIT_EVENT_REJECTED = 0,        /* an acquire got E_LIMITED */
	RESIL_LIMIT_EVENT_LIMIT_INCREASED = 1, /* adaptive bulkhead only */
	RESIL_LIMIT_EVENT_LIMIT_DECREASED = 2  /* adaptive bulkhead only */
} resil_limit_event_type;

/* "rejected", "limit_increased", "limit_decreased" or "unknown". */
RESIL_API const char *resil_limit_event_name(resil_limit_event_type t);

/*
 * One event. time is the clock reading of the decision. For a rate limiter
 * rejection: permits asked and retry_after (the ticks until they would be
 * granted, as try_acquire reports it); limit is the burst and in_flight 0.
 * For a bulkhead: permits is 1, retry_after 0, limit the limit after the
 * event, old_limit the limit before (equal to limit for a rejection) and
 * in_flight the calls in flight when it happened.
 */
typedef struct resil_limit_event {
	resil_limit_event_type type;
	uint64_t time;
	uint32_t permits;
	uint64_t retry_after;
	uint32_t limit;
	uint32_t old_limit;
	uint32_t in_flight;
} resil_limit_event;

typedef void (*resil_limit_listener_fn)(
    const resil_limit_event *ev, void *ctx);

/* ------------------------------------------------------------------ */
/* Rate limiter                                                        */
/* ------------------------------------------------------------------ */

/* The largest value rate / gcd(rate, period_ns) may take. */
#define RESIL_RATELIMIT_MAX_SCALE (UINT64_C(1) << 24)
/* The largest span, in scaled ticks (ticks * rate / gcd(rate, period_ns)),
 * that burst permits (and a max_wait) may cover. */
#define RESIL_RATELIMIT_MAX_SPAN (UINT64_C(1) << 50)
/* The largest per-thread batch (resil_ratelimit_config.batch). */
#define RESIL_RATELIMIT_MAX_BATCH (UINT32_C(1) << 16)

typedef struct resil_ratelimit_config {
	size_t size;   /* sizeof(resil_ratelimit_config), set by _init() */
	uint32_t rate; /* permits per period, >= 1 */
	uint64_t period_ns; /* the period in ticks, >= 1 */
	uint32_t burst;     /* permits that may be taken at once, >= 1 */

	/* Notifications of rejections, optional. */
	resil_limit_listener_fn listener;
	void *listener_ctx;

	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock */

	/*
	 * Per-thread token batches, opt-in (0, the default: exact). With
	 * batch = B >= 1, each of 8 thread stripes (a thread gets one, round
	 * robin, at its first call into resil) keeps a cache of at most B
	 * permits taken from the shared state in one compare-and-swap, and
	 * grants from it without reading the clock or writing a shared cache
	 * line. The cost in exactness, with T threads using the limiter:
	 *   - from creation up to any time t, the permits granted never
	 *     exceed burst + rate * (t - t0) / period (as when exact);
	 *   - in any window [a, b], they never exceed burst + rate * (b - a)
	 *     / period + T * B while each thread has a stripe of its own (at
	 *     most 8 threads), and + 2 * T * B in general, because permits
	 *     cached before a may be granted in the window;
	 *   - a refusal means the shared state had fewer than k permits and
	 *     no stripe's cache held k at the moment it was looked at.
	 * 0..RESIL_RATELIMIT_MAX_BATCH, and at most burst.
	 */
	uint32_t batch;

	/*
	 * Priorities (issue 42): permits of the burst only critical calls
	 * may take, and permits only default and critical ones may take.
	 * A sheddable acquire of k is granted only if reserve_critical +
	 * reserve_default permits are still available after it, a default
	 * one only if reserve_critical are (resil_ratelimit_try_acquire_
	 * prio(); try_acquire and acquire_wait decide as DEFAULT). So
	 * while lower classes take all they may, the refill goes to the
	 * higher classes first: of each period's rate permits, a critical
	 * demand of up to reserve_critical per period is never refused
	 * because of sheddable or default calls. Exact under races (the
	 * class's share and the schedule are the same word, one CAS
	 * decides); the total never exceeds the limiter's rule.
	 * reserve_critical + reserve_default < burst; batch must be 0.
	 */
	uint32_t reserve_critical;
	uint32_t reserve_default;

	/*
	 * Read by the pipeline, not the limiter (issue 42, Resilience4j's
	 * drainPermissionsOnResult): nonzero drains the limiter
	 * (resil_ratelimit_drain()) when an attempt answers RESIL_RC_
	 * THROTTLED (with or without a Retry-After), besides the pause a
	 * Retry-After sets. 0 (the default) or 1.
	 */
	int drain_on_throttled;
} resil_ratelimit_config;

/* Fill *cfg with the defaults: 100 permits per second, a burst of 100, no
 * listener, the system clock, malloc(). */
static inline void
resil_ratelimit_config_init(resil_ratelimit_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->rate = 100;
	cfg->period_ns = RESIL_NS_PER_SEC;
	cfg->burst = 100;
}

static inline resil_ratelimit_config
resil_ratelimit_config_default(void)
{
	resil_ratelimit_config cfg;

	resil_ratelimit_config_init(&cfg);
	return cfg;
}

/*
 * Check cfg without creating anything. Returns RESIL_OK, or RESIL_E_INVAL
 * with a message naming the field in *diag (if diag is not NULL), e.g.
 * "ratelimit.period_ns: 0 must be >= 1". Besides each field's own range,
 * rate / gcd(rate, period_ns) must not exceed RESIL_RATELIMIT_MAX_SCALE
 * (reported on ratelimit.rate) and burst * period_ns / gcd(rate, period_ns)
 * must not exceed RESIL_RATELIMIT_MAX_SPAN (reported on ratelimit.burst).
 */
RESIL_API resil_err resil_ratelimit_config_validate(
    const resil_ratelimit_config *cfg, resil_diag *diag);

/*
 * Create a rate limiter holding its full burst, and store it in *out. The
 * clock is read once, as the starting time.
 *
 * *cfg, *cfg->alloc and *cfg->clock are copied: they may live on the
 * stack. Their ctx pointers (and listener_ctx) must outlive the limiter.
 * The caller owns *out and releases it with resil_ratelimit_free(). diag
 * may be NULL.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown
 * cfg->size or a bad setting (named in *diag); RESIL_E_NOMEM. On error
 * *out is unchanged.
 */
RESIL_API resil_err resil_ratelimit_new(resil_ratelimit **out,
    const resil_ratelimit_config *cfg, resil_diag *diag);

/* Release rl. NULL is a harmless no-op. */
RESIL_API void resil_ratelimit_free(resil_ratelimit *rl);

/*
 * Take k permits now, or none.
 *
 * With T = period_ns / rate (exact, possibly fractional) and now the clock
 * reading, the request is granted when max(TAT, now) + k * T <= now +
 * burst * T, and then TAT becomes max(TAT, now) + k * T. So a drained
 * limiter with rate 1 per period P grants its next permit at exactly
 * t + P, not at t + P - 1; one with rate N per P gets all N permits back
 * exactly one period after the last was taken.
 *
 * Returns RESIL_OK; RESIL_E_LIMITED when the k permits are not available
 * now (nothing is taken), with the ticks until they would be, if nothing
 * else is taken meanwhile, in *retry_after (which may be NULL); this is
 * the smallest whole number of ticks, >= 1 (after a clock that moved
 * back below the limiter's time base, it includes the way back, so waiting
 * it out is always enough). *retry_after is written only
 * on RESIL_E_LIMITED. RESIL_E_INVAL for a NULL limiter, k == 0 or
 * k > burst (such a request could never be granted).
 *
 * One clock read and, normally, one compare-and-swap; no lock, allocation
 * or system call. (About every 2^52 / (rate / gcd(rate, period_ns)) ticks
 * one decision also moves the limiter's time base, a few more CASes.)
 *
 * With cfg.batch > 0 the rule above is applied to batches: k permits are
 * granted from the calling thread's cache when it holds k (no clock read,
 * one CAS on the thread's own stripe); otherwise one decision takes k
 * plus up to batch - cached more (as many as are due now) and caches the
 * extra; failing that, k are taken from any stripe's cache; only then is
 * the call refused, with the exact rule's retry_after. The bounds this
 * keeps are stated at resil_ratelimit_config.batch.
 */
RESIL_API resil_err resil_ratelimit_try_acquire(
    resil_ratelimit *rl, uint32_t k, uint64_t *retry_after);

/*
 * Take k permits, waiting for them up to max_wait ticks.
 *
 * When try_acquire would grant them, they are taken at once and *waited
 * is 0. When they would become available within max_wait ticks, they are
 * reserved now (later callers queue behind them), the caller sleeps
 * through the clock's sleep (a manual clock advances) for exactly the
 * ticks until they are due, and *waited holds those ticks. Otherwise, or
 * when the clock has no sleep function and a wait would be needed, it
 * returns RESIL_E_LIMITED at once, takes and reserves nothing and does
 * not sleep. max_wait is capped at RESIL_RATELIMIT_MAX_SPAN scaled ticks.
 *
 * Returns RESIL_OK (*waited written, waited may be NULL); RESIL_E_LIMITED;
 * RESIL_E_INVAL as for try_acquire. *waited is written only on RESIL_OK.
 * With cfg.batch > 0, k permits in the calling thread's cache are taken
 * first (waited 0); otherwise the decision is the exact one above.
 */
RESIL_API resil_err resil_ratelimit_acquire_wait(
    resil_ratelimit *rl, uint32_t k, uint64_t max_wait, uint64_t *waited);

/*
 * Take k permits now, or none, as a call of priority prio (issue 42;
 * UNSET: DEFAULT): as try_acquire, against the part of the burst prio
 * may use (cfg.reserve_critical, cfg.reserve_default): the permits
 * left after a grant are never fewer than the classes above prio
 * reserve. *retry_after (may be NULL) as try_acquire's: the ticks
 * until prio's k permits would be due. RESIL_OK; RESIL_E_LIMITED;
 * RESIL_E_INVAL for NULL, a bad prio, k == 0 or k more than prio may
 * ever take (burst less the reservations above prio).
 */
RESIL_API resil_err resil_ratelimit_try_acquire_prio(resil_ratelimit *rl,
    resil_priority prio, uint32_t k, uint64_t *retry_after);

/*
 * Drain (issue 42, Resilience4j's drainPermissionsOnResult): take every
 * permit available now, reserved ones included, so that the next is due
 * one emission interval (period_ns / rate) from now and the limiter
 * refills from empty at its rate. With cfg.batch > 0 the threads'
 * caches are emptied too. A shared-memory limiter is drained for every
 * process using it. *drained (may be NULL) gets the permits taken from
 * the shared state (not the caches). RESIL_OK; RESIL_E_INVAL for NULL.
 * Lock-free: one clock read, a CAS (retried on a race).
 */
RESIL_API resil_err resil_ratelimit_drain(
    resil_ratelimit *rl, uint64_t *drained);

typedef struct resil_ratelimit_metrics {
	uint64_t granted_calls;   /* acquires that returned RESIL_OK */
	uint64_t granted_permits; /* permits those acquires took */
	uint64_t rejected_calls;  /* acquires that returned E_LIMITED */
	uint64_t waited_calls;    /* granted acquires that had to wait */
	uint64_t available;       /* permits that could be taken now */
	uint32_t rate;            /* the configuration, for reference */
	uint32_t burst;
	uint64_t period_ns;
} resil_ratelimit_metrics;

/* Fill *out with the counters and the permits available at the current
 * clock reading (one clock read). Returns RESIL_OK or RESIL_E_INVAL for a
 * NULL argument. The counters are each exact but not read atomically
 * together while other threads acquire. With cfg.batch > 0, available
 * includes the permits held in the threads' caches (so it may exceed the
 * burst by up to the bound at resil_ratelimit_config.batch). */
RESIL_API resil_err resil_ratelimit_get_metrics(
    resil_ratelimit *rl, resil_ratelimit_metrics *out);

/* ------------------------------------------------------------------ */
/* Bulkhead                                                            */
/* ------------------------------------------------------------------ */

/* The largest limit a bulkhead accepts. */
#define RESIL_BULKHEAD_MAX_LIMIT (UINT32_C(1) << 30)

/* The values of resil_bulkhead_config.adaptive: a fixed limit, AIMD on a
 * latency target, or a gradient limit (docs/gradient.md). */
#define RESIL_BULKHEAD_FIXED 0
#define RESIL_BULKHEAD_AIMD 1
#define RESIL_BULKHEAD_GRADIENT 2

typedef struct resil_bulkhead_config {
	size_t size; /* sizeof(resil_bulkhead_config), set by _init() */
	/* The limit of calls in flight: fixed, or the starting limit of an
	 * adaptive bulkhead. 1..RESIL_BULKHEAD_MAX_LIMIT. */
	uint32_t max_concurrent;

	/* The limit's mode: RESIL_BULKHEAD_FIXED (0), RESIL_BULKHEAD_AIMD
	 * (1: the fields below) or RESIL_BULKHEAD_GRADIENT (2: the
	 * gradient field at the end). */
	int adaptive;
	uint32_t min_limit;         /* >= 1, <= max_concurrent */
	uint32_t max_limit;         /* >= max_concurrent, <= MAX_LIMIT */
	uint64_t target_latency_ns; /* a success slower than this is a
	                               decrease, >= 1 */
	uint32_t increase;          /* additive step, 1..max_limit */
	uint32_t backoff_pct;       /* decrease: limit * backoff_pct / 100,
	                               1..99 */

	/* Notifications of rejections and limit changes, optional. */
	resil_limit_listener_fn listener;
	void *listener_ctx;

	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock;
	                                 read only for listener events */

	/*
	 * Per-thread slot leases, opt-in (0, the default: exact). With
	 * batch = B >= 1 (fixed bulkheads only: adaptive needs 0), each
	 * thread stripe leases up to B slots from the shared count at once
	 * and a thread's acquire and release of them touch only its stripe.
	 * The limit stays exact: never more than max_concurrent calls in
	 * flight. What it costs: a refusal means every slot was leased and
	 * no stripe had a free leased slot at the moment it was looked at,
	 * so under concurrency a call may be refused while a slot is being
	 * freed on another stripe; a release on a thread whose stripe has
	 * nothing in flight (a call handed between threads) searches the
	 * other stripes, and can report RESIL_E_MISUSE for a legitimate
	 * release only while other threads race it the same way; metrics
	 * in_flight is exact only when no call is in progress, and
	 * peak_in_flight counts leased slots (an upper bound).
	 * 0..max_concurrent.
	 */
	uint32_t batch;

	/*
	 * The gradient limit (Netflix's Gradient2, docs/gradient.md), used
	 * when adaptive is RESIL_BULKHEAD_GRADIENT: the limit starts at
	 * gradient.initial_limit and moves within gradient.min_limit..
	 * max_limit (at most RESIL_BULKHEAD_MAX_LIMIT), one sample per
	 * recorded call; max_concurrent and the AIMD fields are not used.
	 * Copied; its alloc NULL means the bulkhead's; its listener is told
	 * each change as well as the bulkhead's. Defaults: Netflix's.
	 */
	resil_gradient_config gradient;

	/*
	 * A bulkhead that waits (issue 42; exact bulkheads only: batch 0,
	 * not in shared memory). With max_wait_ns > 0 a full bulkhead queues
	 * the caller, up to `queue` waiters, and hands each freed slot
	 * straight to a waiter (FIFO or LIFO within a class, the highest
	 * class first), so that a newcomer never overtakes one waiting; a
	 * wait that ends without a slot (max_wait_ns passed, or the queue
	 * full) is RESIL_E_LIMITED, as a refusal. max_wait_ns: 0 (no
	 * waiting, the default) or 1..; queue: 1..RESIL_BULKHEAD_MAX_LIMIT
	 * when max_wait_ns > 0, else 0; order RESIL_BULKHEAD_FIFO (0) or
	 * RESIL_BULKHEAD_LIFO (1).
	 */
	uint64_t max_wait_ns;
	uint32_t queue;
	int order;

	/*
	 * Priorities: slots only critical calls may take, and slots only
	 * default and critical ones may take, out of the limit (a sheddable
	 * call is refused while limit - reserve_critical - reserve_default
	 * or more are in flight; a default one at limit - reserve_critical).
	 * Exact under races (one word decides). reserve_critical +
	 * reserve_default < max_concurrent; batch must be 0. An adaptive
	 * limit that falls to a class's reservation sheds that class.
	 */
	uint32_t reserve_critical;
	uint32_t reserve_default;
} resil_bulkhead_config;

/* The values of resil_bulkhead_config.order. */
#define RESIL_BULKHEAD_FIFO 0
#define RESIL_BULKHEAD_LIFO 1

/* Fill *cfg with the defaults: 25 calls in flight, not adaptive; for the
 * adaptive limit: 1..200, target latency 100 ms (system clock), increase
 * 1, backoff 90%. */
static inline void
resil_bulkhead_config_init(resil_bulkhead_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->max_concurrent = 25;
	cfg->adaptive = 0;
	cfg->min_limit = 1;
	cfg->max_limit = 200;
	cfg->target_latency_ns = 100 * RESIL_NS_PER_MS;
	cfg->increase = 1;
	cfg->backoff_pct = 90;
	resil_gradient_config_init(&cfg->gradient);
}

static inline resil_bulkhead_config
resil_bulkhead_config_default(void)
{
	resil_bulkhead_config cfg;

	resil_bulkhead_config_init(&cfg);
	return cfg;
}

/*
 * Check cfg without creating anything. Returns RESIL_OK, or RESIL_E_INVAL
 * with a message naming the field in *diag (if diag is not NULL), e.g.
 * "bulkhead.max_concurrent: 0 is out of range 1..1073741824". The
 * adaptive fields are checked only when adaptive is nonzero.
 */
RESIL_API resil_err resil_bulkhead_config_validate(
    const resil_bulkhead_config *cfg, resil_diag *diag);

/*
 * Apply one setting of configuration text to *cfg: bulkhead.limit (fixed,
 * aimd or gradient: the mode), and bulkhead.gradient.<key> for each key
 * of resil_gradient_config_set() (gradient.initial_limit ... growth,
 * docs/gradient.md). RESIL_OK; RESIL_E_NOTFOUND for a key it does not
 * know ("bulkhead.foo: unknown key"), so a caller can try its other
 * parsers; RESIL_E_INVAL for NULL or a bad value, with a message naming
 * the key ("bulkhead.gradient.smoothing: 0 would never move the limit
 * (0 < smoothing <= 1)"), *cfg unchanged.
 */
RESIL_API resil_err resil_bulkhead_config_set(resil_bulkhead_config *cfg,
    const char *key, const char *value, resil_diag *diag);

/*
 * Create a bulkhead with nothing in flight and store it in *out.
 *
 * *cfg, *cfg->alloc and *cfg->clock are copied: they may live on the
 * stack. Their ctx pointers (and listener_ctx) must outlive the bulkhead.
 * The caller owns *out and releases it with resil_bulkhead_free(). diag
 * may be NULL.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown
 * cfg->size or a bad setting (named in *diag); RESIL_E_NOMEM. On error
 * *out is unchanged.
 */
RESIL_API resil_err resil_bulkhead_new(
    resil_bulkhead **out, const resil_bulkhead_config *cfg, resil_diag *diag);

/* Release bh. NULL is a harmless no-op. Calls still in flight are the
 * caller's business: they must not release after this. */
RESIL_API void resil_bulkhead_free(resil_bulkhead *bh);

/*
 * Enter: RESIL_OK when fewer than the current limit of calls are in flight
 * (the call is then counted in flight until released), RESIL_E_LIMITED at
 * once otherwise; RESIL_E_INVAL for NULL. A fixed bulkhead never has more
 * than its limit in flight, however many threads race. When an adaptive
 * limit drops below the calls in flight, those calls go on; new ones are
 * rejected until fewer than the new limit are in flight.
 *
 * No lock, allocation, system call or clock read (the clock is read only
 * to time-stamp a rejection event for a listener).
 */
RESIL_API resil_err resil_bulkhead_try_acquire(resil_bulkhead *bh);

/*
 * Enter as a call of priority prio (UNSET: DEFAULT): as try_acquire,
 * against the slots prio may use (reserve_critical, reserve_default),
 * and never ahead of a queued waiter of prio's class or higher. Never
 * waits. RESIL_OK, RESIL_E_LIMITED, RESIL_E_INVAL (NULL, a bad prio).
 */
RESIL_API resil_err resil_bulkhead_try_acquire_prio(
    resil_bulkhead *bh, resil_priority prio);

/*
 * Enter, waiting for a slot (blocking; the driver's form): as
 * try_acquire_prio when a slot is free; otherwise, on a bulkhead with
 * max_wait_ns > 0, queue and block the calling thread through the
 * clock's wait primitive (resil_clock_wait: a futex on the system
 * clock; a manual clock wakes it as it advances) until a release hands
 * it a slot or the clock reaches the start + max_wait_ns. *waited (may
 * be NULL) gets the ticks waited, on RESIL_OK only. RESIL_E_LIMITED
 * when no slot came (the queue was full, the wait ran out, or the
 * bulkhead does not wait). On a clock that can neither wait nor sleep it
 * does not queue (as try_acquire_prio).
 */
RESIL_API resil_err resil_bulkhead_acquire_wait(
    resil_bulkhead *bh, resil_priority prio, uint64_t *waited);

/*
 * A wait for a slot without blocking (the call machine's form: an event
 * loop). The waiter lives in the caller's storage and must not move or
 * go while queued.
 *
 *   resil_bulkhead_wait_start(bh, prio, &w, wake, ctx, now, &queued)
 *     RESIL_OK, queued 0: the slot is the caller's now; RESIL_OK,
 *     queued 1: waiting until resil_bulkhead_wait_deadline(&w);
 *     RESIL_E_LIMITED: refused (no waiting configured, queue full).
 *   wake(ctx) is called once, on the releasing thread after the
 *     bulkhead's lock is dropped, when a slot is handed to w: it must not
 *     block (write an eventfd, uv_async_send, post to the loop); the
 *     caller then polls. wake NULL: the waiter's state word is woken
 *     through the bulkhead's clock (resil_clock_wake) instead.
 *   resil_bulkhead_wait_poll(bh, &w, now, &granted): granted 1: the slot
 *     is the caller's (release it as any); granted 0: still waiting;
 *     RESIL_E_LIMITED: now reached the deadline with no slot (w is off
 *     the queue).
 *   resil_bulkhead_wait_cancel(bh, &w): off the queue; a slot handed to
 *     it meanwhile is released (handed on). RESIL_OK.
 * Each returns RESIL_E_INVAL for NULL and RESIL_E_MISUSE for a waiter
 * that is not waiting (poll, cancel).
 */
typedef struct resil_bulkhead_waiter {
	uint64_t opaque_[10];
} resil_bulkhead_waiter;

RESIL_API resil_err resil_bulkhead_wait_start(resil_bulkhead *bh,
    resil_priority prio, resil_bulkhead_waiter *w, void (*wake)(void *ctx),
    void *wake_ctx, uint64_t now, int *queued);
RESIL_API resil_err resil_bulkhead_wait_poll(resil_bulkhead *bh,
    resil_bulkhead_waiter *w, uint64_t now, int *granted);
RESIL_API resil_err resil_bulkhead_wait_cancel(
    resil_bulkhead *bh, resil_bulkhead_waiter *w);
/* When a queued waiter's wait ends (its start + max_wait_ns, or the
 * earlier end resil_bulkhead_wait_cut() gave it). */
RESIL_API uint64_t resil_bulkhead_wait_deadline(
    const resil_bulkhead_waiter *w);
/*
 * End a queued wait no later than until (issue 42: the caller's own
 * deadline, e.g. its retry deadline, when it is before start +
 * max_wait_ns): a poll at now >= until with no slot is then
 * RESIL_E_LIMITED (a wait timeout) and resil_bulkhead_wait_deadline()
 * reads until. A later until changes nothing. Called by the waiter's
 * owner, between start and the poll that ends it. RESIL_OK;
 * RESIL_E_INVAL for NULL; RESIL_E_MISUSE for a waiter not waiting.
 */
RESIL_API resil_err resil_bulkhead_wait_cut(
    resil_bulkhead_waiter *w, uint64_t until);

/* Waiters queued now; 0 for NULL. */
RESIL_API uint32_t resil_bulkhead_waiting(resil_bulkhead *bh);

/*
 * Leave: one call fewer in flight. Returns RESIL_OK; RESIL_E_MISUSE when
 * nothing is in flight (the count never goes below zero); RESIL_E_INVAL
 * for NULL.
 */
RESIL_API resil_err resil_bulkhead_release(resil_bulkhead *bh);

/*
 * Feed one observed call to the adaptive limit. latency is in ticks.
 *
 * A gradient bulkhead (adaptive RESIL_BULKHEAD_GRADIENT): a SUCCESS or a
 * FAILURE is one resil_gradient_sample(latency, in flight, failed), with
 * the calls in flight now (resil_bulkhead_complete(): those in flight
 * before its release, the call itself included); the limit becomes its
 * answer (one CAS), a change told to the listener. IGNORED and BUSINESS
 * change nothing. good_samples counts the successes, bad_samples the
 * failures.
 *
 * IGNORED and BUSINESS outcomes change nothing. A SUCCESS with
 * latency <= target_latency_ns is a "good" sample; a FAILURE, or a
 * SUCCESS with latency > target_latency_ns, is a "bad" one. With L the
 * limit and c a count of good samples since the last change (both start
 * at max_concurrent and 0):
 *   good: c = c + 1; if c >= L: L = min(L + increase, max_limit), c = 0
 *         (so, with increase 1, the limit grows by one per L good calls,
 *         about one per round trip as in TCP congestion avoidance);
 *   bad:  L = max(floor(L * backoff_pct / 100), min_limit), c = 0.
 * Each sample is one compare-and-swap on one word, so concurrent samples
 * apply in some order, each exactly once. A change of L is reported to the
 * listener (LIMIT_INCREASED / LIMIT_DECREASED). On a fixed bulkhead the
 * sample is only counted.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for NULL or an unknown outcome.
 */
RESIL_API resil_err resil_bulkhead_record(
    resil_bulkhead *bh, resil_outcome outcome, uint64_t latency);

/* resil_bulkhead_release() then, if it succeeded, resil_bulkhead_record().
 * Returns what release returned, or RESIL_E_INVAL for an unknown outcome
 * (nothing released then). */
RESIL_API resil_err resil_bulkhead_complete(
    resil_bulkhead *bh, resil_outcome outcome, uint64_t latency);

/* The current limit (one atomic load); 0 for NULL. */
RESIL_API uint32_t resil_bulkhead_get_limit(const resil_bulkhead *bh);

/* The gradient of a gradient bulkhead (resil_gradient_get_metrics() on
 * it gives the long-term RTT and the estimate); NULL for another mode or
 * NULL. Valid while bh is; do not free it or sample it. */
RESIL_API resil_gradient *resil_bulkhead_gradient(resil_bulkhead *bh);

typedef struct resil_bulkhead_metrics {
	uint64_t granted;        /* try_acquire that returned RESIL_OK */
	uint64_t rejected;       /* try_acquire that returned E_LIMITED */
	uint64_t released;       /* successful releases */
	uint64_t good_samples;   /* recorded: success within the target */
	uint64_t bad_samples;    /* recorded: failure or slow success */
	uint64_t increases;      /* adaptive limit increases */
	uint64_t decreases;      /* adaptive limit decreases */
	uint32_t limit;          /* the current limit */
	uint32_t in_flight;      /* calls in flight now */
	uint32_t peak_in_flight; /* the most in flight at once so far */
	/* A bulkhead that waits (issue 42): waiters queued now, waits that
	 * got a slot, waits that ran out, refusals of a full queue. */
	uint32_t waiting;
	uint64_t waited;
	uint64_t wait_timeouts;
	uint64_t queue_full;
} resil_bulkhead_metrics;

/* Fill *out. Returns RESIL_OK or RESIL_E_INVAL for a NULL argument. Each
 * figure is exact, but they are not read atomically together while other
 * threads run. */
RESIL_API resil_err resil_bulkhead_get_metrics(
    resil_bulkhead *bh, resil_bulkhead_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_LIMIT_H */

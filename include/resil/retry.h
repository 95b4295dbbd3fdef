/*
 * resil retry: re-run a call while its outcome is retryable and the attempt
 * limit, the deadline and the retry budget allow.
 *
 * A policy (resil_retry) holds the configuration and the state shared by
 * every call made through it: the retry budget, the random source of the
 * jitter and the counters. resil_retry_call() runs one call: it makes the
 * first attempt, classifies the outcome, and while the outcome is retryable
 * chooses a wait (backoff, then jitter, then the cap), checks the attempt
 * limit, the deadline and the budget, waits through the injected clock and
 * tries again. On the manual clock a wait advances virtual time, so a test
 * never sleeps.
 *
 * What is retried: a FAILURE outcome (narrowed by retry_on_failure), a
 * SUCCESS whose result retry_on_result asks to retry (an empty answer, for
 * example), a lower layer's answer other than a rejection (a timeout, say),
 * RESIL_E_OPEN only with retry_on_open and RESIL_E_LIMITED only with
 * retry_on_limited.
 * Never a BUSINESS or an IGNORED outcome.
 *
 * The wait before attempt n + 1 (n >= 1 is the attempt that failed):
 *   backoff  FIXED:       d = base_delay_ns
 *            EXPONENTIAL: d = base_delay_ns * multiplier^(n - 1)
 *            CUSTOM:      d = backoff_fn(n, previous wait, backoff_ctx), or
 *                         backoff_result_fn(n, previous wait, rc, value,
 *                         backoff_ctx) with attempt n's rc and value
 *            LINEAR:      d = base_delay_ns * n
 *   jitter   NONE:         w = d
 *            PROPORTIONAL: w = d * (1 - f + 2 * f * u), f = jitter_factor
 *            FULL:         w = d * u
 *            EQUAL:        w = d / 2 + u * d / 2
 *            DECORRELATED: w = base + u * (3 * prev - base), prev being the
 *                          previous wait (base before the first retry); it
 *                          replaces the backoff, as in the AWS formula
 *            DECORRELATED_V2: Polly's formula (see the enum below); it
 *                          replaces the backoff too
 *   cap      w = min(w, max_delay_ns), after the jitter
 * Each w is truncated to a whole tick. u in [0, 1) is one draw from the
 * random source per wait, in attempt order; NONE draws nothing.
 *
 * Thread safety: resil_retry_call, resil_retry_next_delay and
 * resil_retry_get_metrics may run concurrently on one policy from any
 * number of threads; the budget and the counters are lock-free. new and
 * free must not overlap any other call on the same policy. The callbacks
 * (fn, classifier, predicates, backoff_fn, listener, random) may then run
 * on several threads at once and must be thread-safe. Random draws of
 * concurrent calls interleave; a single-threaded sequence is exact.
 *
 * Durations (the _ns fields) are in ticks of the policy's clock:
 * nanoseconds with the system clock, the test's unit with a manual clock.
 */
#ifndef RESIL_RETRY_H
#define RESIL_RETRY_H

#include <string.h>

#include <resil/clock.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_retry resil_retry;

#define RESIL_RETRY_MAX_ATTEMPTS 1000

typedef enum resil_retry_backoff {
	RESIL_BACKOFF_FIXED = 0,       /* base_delay_ns every time */
	RESIL_BACKOFF_EXPONENTIAL = 1, /* base * multiplier^(n - 1) */
	RESIL_BACKOFF_CUSTOM = 2,      /* backoff_fn */
	RESIL_BACKOFF_LINEAR = 3       /* base * n (Polly's Linear) */
} resil_retry_backoff;

typedef enum resil_retry_jitter {
	RESIL_JITTER_NONE = 0,
	RESIL_JITTER_PROPORTIONAL = 1, /* Resilience4j's randomization */
	RESIL_JITTER_FULL = 2,         /* AWS "full jitter" */
	RESIL_JITTER_EQUAL = 3,        /* AWS "equal jitter" */
	RESIL_JITTER_DECORRELATED = 4, /* AWS "decorrelated jitter" */
	/*
	 * Polly's exponential jitter ("decorrelated jitter V2", Polly v8's
	 * Exponential with UseJitter): with t = n - 1 + u and
	 * f(t) = 2^t * tanh(sqrt(4 t)), the wait before attempt n + 1 is
	 * (f(t) - f(t_prev)) / 1.4 * base (f(t_prev) = 0 before the first
	 * wait), truncated to a whole tick, then capped. Median waits near
	 * base, 2 base, 4 base, ... Like DECORRELATED it replaces the
	 * backoff (backoff and multiplier are not used) and keeps state
	 * from wait to wait, so resil_retry_next_delay() refuses it.
	 * Polly's jitter for Constant and Linear is PROPORTIONAL with
	 * jitter_factor 0.25.
	 */
	RESIL_JITTER_DECORRELATED_V2 = 5
} resil_retry_jitter;

/* Why a call stopped. */
typedef enum resil_retry_stop {
	/* The last outcome was final: a success, a business or ignored
	 * outcome, a failure retry_on_failure declined, or a rejection
	 * (RESIL_E_OPEN without retry_on_open, RESIL_E_LIMITED without
	 * retry_on_limited). */
	RESIL_RETRY_STOP_FINAL = 0,
	RESIL_RETRY_STOP_EXHAUSTED = 1, /* max_attempts made */
	/* The next attempt would not start before the deadline. */
	RESIL_RETRY_STOP_DEADLINE = 2,
	RESIL_RETRY_STOP_BUDGET = 3 /* the retry budget refused */
} resil_retry_stop;

/* "final", "exhausted", "deadline", "budget" or "unknown". */
RESIL_API const char *resil_retry_stop_name(resil_retry_stop stop);

/*
 * What an attempt is told, and what it may tell back. Filled by
 * resil_retry_call() before each attempt.
 */
typedef struct resil_retry_attempt {
	uint32_t number;    /* 1 for the first attempt */
	/* Clock reading at its start. The policy reads the clock only where
	 * it needs the time (a deadline, a listener, a wait): for the first
	 * attempt of a policy with neither deadline nor listener, 0. */
	uint64_t start;
	uint64_t time_left; /* ticks before the deadline; UINT64_MAX: none */
	uint64_t last_wait; /* the wait before this attempt; 0 for the first */
	int last_rc;        /* the previous attempt's return code; 0 first */
	/*
	 * Out: RESIL_OK (the default) when the call ran and its return code
	 * is the user's. A layer below that answers for the call sets it:
	 * RESIL_E_OPEN when a breaker rejected it (not retried unless
	 * retry_on_open), RESIL_E_LIMITED when a limiter did (not retried
	 * unless retry_on_limited), any other code (RESIL_E_TIMEOUT, ...) for
	 * a failure that is retried like one.
	 */
	resil_err status;
} resil_retry_attempt;

/*
 * One attempt. ctx and out are those given to resil_retry_call(); every
 * attempt writes to the same out, so after the call out holds the last
 * attempt's value. Returns the user's return code, which the classifier
 * maps to an outcome.
 */
typedef int (*resil_retry_fn)(
    void *ctx, resil_retry_attempt *attempt, void *out);

/* A predicate over an attempt's return code and value: nonzero to retry. */
typedef int (*resil_retry_pred_fn)(int rc, const void *value, void *ctx);

/* A user backoff: the wait before attempt `attempt + 1`, given the wait
 * chosen before `attempt` (0 for attempt 1). Jitter and the cap apply to
 * what it returns. */
typedef uint64_t (*resil_retry_backoff_fn)(
    uint32_t attempt, uint64_t prev_wait, void *ctx);

/* A user backoff that also sees how attempt `attempt` ended: its return
 * code and value (what retry_on_failure / retry_on_result saw), as
 * Resilience4j's IntervalBiFunction and Polly's DelayGenerator do, e.g. to
 * honour a server's "retry after". Jitter and the cap apply to what it
 * returns. */
typedef uint64_t (*resil_retry_backoff_result_fn)(uint32_t attempt,
    uint64_t prev_wait, int rc, const void *value, void *ctx);

typedef enum resil_retry_event_type {
	RESIL_RETRY_EVENT_RETRY = 0, /* before each wait and retry */
	/* A retryable outcome that a limit (attempts, deadline, budget)
	 * stopped from being retried. */
	RESIL_RETRY_EVENT_GIVE_UP = 1,
	RESIL_RETRY_EVENT_SUCCESS = 2 /* a success after at least one retry */
} resil_retry_event_type;

/* "retry", "give_up", "success" or "unknown". */
RESIL_API const char *resil_retry_event_name(resil_retry_event_type type);

typedef struct resil_retry_event {
	resil_retry_event_type type;
	uint32_t attempt;      /* the attempt that has just ended, 1-based */
	uint64_t wait;         /* RETRY: the wait chosen before attempt + 1 */
	uint64_t time;         /* clock reading when the attempt ended */
	int rc;                /* that attempt's return code */
	resil_err status;      /* that attempt's status */
	resil_outcome outcome; /* that attempt's outcome class */
	resil_retry_stop stop; /* GIVE_UP: why; otherwise FINAL */
} resil_retry_event;

typedef void (*resil_retry_listener_fn)(
    const resil_retry_event *ev, void *ctx);

typedef struct resil_retry_config {
	size_t size; /* sizeof(resil_retry_config), set by _init() */

	/* Every attempt counts, the first included: 1 means no retry. */
	uint32_t max_attempts; /* 1..1000 */

	/* The wait between attempts, before jitter and cap. */
	resil_retry_backoff backoff;
	uint64_t base_delay_ns; /* FIXED, EXPONENTIAL, DECORRELATED */
	double multiplier;      /* EXPONENTIAL: 1.0..100.0 */
	resil_retry_backoff_fn backoff_fn; /* CUSTOM: required */
	void *backoff_ctx;
	uint64_t max_delay_ns; /* cap, after jitter; >= base_delay_ns */

	/* Jitter, from random (or, when random.uniform is NULL, from a
	 * resil_rng that the policy seeds with seed). */
	resil_retry_jitter jitter;
	double jitter_factor; /* PROPORTIONAL: 0.0..1.0 */
	resil_random random;
	uint64_t seed;

	/* One time budget for all attempts and waits, from the start of the
	 * call; 0: none. */
	uint64_t deadline_ns;

	/* What is retried. */
	resil_classifier classifier;          /* NULL fn: 0 is success */
	resil_retry_pred_fn retry_on_failure; /* NULL: every failure */
	void *retry_on_failure_ctx;
	resil_retry_pred_fn retry_on_result; /* NULL: no success */
	void *retry_on_result_ctx;
	/* Nonzero: a result retry_on_result still wanted to retry when a
	 * limit stopped the call gives RESIL_E_RETRIES_EXHAUSTED. */
	int fail_after_max_attempts;
	int retry_on_open; /* nonzero: retry RESIL_E_OPEN rejections */

	/*
	 * The retry budget, shared by every call through the policy; off
	 * while budget_ratio is 0. Each call deposits budget_ratio tokens
	 * (the bank holds at most budget_max_tokens); each retry spends
	 * one. When the bank is empty, a floor still allows
	 * budget_min_retries retries per budget_period_ns.
	 */
	double budget_ratio;         /* 0 (off) or 0.000001..1000.0 */
	uint32_t budget_max_tokens;  /* 1..1000000 */
	uint32_t budget_min_retries; /* 0..1000000; 0: no floor */
	uint64_t budget_period_ns;   /* >= max(1, budget_min_retries) */

	/* Notifications, optional. */
	resil_retry_listener_fn listener;
	void *listener_ctx;

	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock */

	/* Nonzero: retry RESIL_E_LIMITED rejections (a rate limiter or a
	 * bulkhead below said no). Off by default, like retry_on_open:
	 * retrying into a limit only spends attempts and budget. */
	int retry_on_limited;

	/* CUSTOM: when set, used instead of backoff_fn (which may then be
	 * NULL), with backoff_ctx. resil_retry_next_delay() and
	 * resil_retry_plan(), which have no attempt, give it rc 0 and a
	 * NULL value. For an attempt a lower layer answered for (its
	 * status set), rc and value are still what the function returned
	 * and wrote. */
	resil_retry_backoff_result_fn backoff_result_fn;
} resil_retry_config;

/*
 * Fill *cfg with the defaults: 3 attempts, a fixed 500 ms wait, no jitter
 * (factor 0.5 and multiplier 2.0 ready for when they are switched on), no
 * cap, no deadline, every failure retried, no budget (10% with a bank of
 * 10 tokens and a floor of 10 retries per second once budget_ratio is
 * set), the system clock, malloc().
 */
static inline void
resil_retry_config_init(resil_retry_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->max_attempts = 3;
	cfg->backoff = RESIL_BACKOFF_FIXED;
	cfg->base_delay_ns = 500 * RESIL_NS_PER_MS;
	cfg->multiplier = 2.0;
	cfg->max_delay_ns = UINT64_MAX;
	cfg->jitter = RESIL_JITTER_NONE;
	cfg->jitter_factor = 0.5;
	cfg->budget_ratio = 0.0;
	cfg->budget_max_tokens = 10;
	cfg->budget_min_retries = 10;
	cfg->budget_period_ns = RESIL_NS_PER_SEC;
}

static inline resil_retry_config
resil_retry_config_default(void)
{
	resil_retry_config cfg;

	resil_retry_config_init(&cfg);
	return cfg;
}

/*
 * Check cfg without creating anything. Returns RESIL_OK, or RESIL_E_INVAL
 * with a message naming the field in *diag (if diag is not NULL), e.g.
 * "retry.max_attempts: 0 is out of range 1..1000".
 */
RESIL_API resil_err resil_retry_config_validate(
    const resil_retry_config *cfg, resil_diag *diag);

/*
 * Create a policy and store it in *out.
 *
 * *cfg, *cfg->alloc and *cfg->clock are copied: they may live on the
 * stack. Their ctx pointers, and every ctx in cfg (backoff, predicates,
 * classifier, random, listener), must outlive the policy. The caller owns
 * *out and releases it with resil_retry_free(). diag may be NULL.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown
 * cfg->size or a bad setting (named in *diag); RESIL_E_NOMEM. On error
 * *out is unchanged.
 */
RESIL_API resil_err resil_retry_new(
    resil_retry **out, const resil_retry_config *cfg, resil_diag *diag);

/* Release r. NULL is a harmless no-op. */
RESIL_API void resil_retry_free(resil_retry *r);

/* The report of one call. */
typedef struct resil_retry_result {
	uint32_t attempts;     /* attempts made, >= 1 */
	int rc;                /* the last attempt's return code */
	resil_err status;      /* the last attempt's status */
	resil_outcome outcome; /* the last attempt's outcome class */
	resil_retry_stop stop; /* why the call stopped */
	uint64_t waited;       /* ticks spent waiting between attempts */
	/* Ticks from the first clock reading to the end: from the start of
	 * the call with a deadline or a listener, otherwise from the end of
	 * the first attempt (0 when it was the only one). */
	uint64_t elapsed;
} resil_retry_result;

/*
 * Run fn(ctx, attempt, out) under the policy, as described at the top.
 *
 * Returns
 * - RESIL_OK when the last attempt ran (its status was RESIL_OK): its
 *   return code, outcome and the reason the call stopped are in *res. A
 *   failure that ran out of attempts is reported this way: the caller
 *   gets the last attempt's own return code.
 * - the last attempt's status when a layer below answered for it (for
 *   example RESIL_E_OPEN).
 * - RESIL_E_RETRIES_EXHAUSTED when fail_after_max_attempts is set and
 *   retry_on_result still wanted a retry when a limit stopped the call
 *   (out holds the last result all the same).
 * - RESIL_E_INVAL for a NULL r or fn (nothing runs, *res is unchanged).
 * Except for RESIL_E_INVAL, *res (res may be NULL) is always written: it
 * is the report of the call, failed or not.
 *
 * No allocation and no lock. The clock is read before the first attempt
 * and after each attempt when a deadline or a listener is set, and
 * otherwise only once a retry is due (then after each attempt and wait):
 * a call that succeeds at its first attempt reads no clock at all. A clock that cannot sleep
 * (sleep NULL) makes every wait zero-length. When a sleep overshoots
 * past the deadline (a real clock can), the attempt after it does not
 * start, although its RETRY event has been sent; the stop is DEADLINE.
 */
RESIL_API resil_err resil_retry_call(resil_retry *r, resil_retry_fn fn,
    void *ctx, void *out, resil_retry_result *res);

/*
 * The wait the policy chooses before attempt `attempt + 1`, given the
 * previous wait (0 before the first retry) and a uniform draw u in [0, 1)
 * (ignored without jitter; clamped to [0, 1)). Pure: no clock, no random
 * draw, no budget. Stores it in *wait. Returns RESIL_OK; RESIL_E_INVAL for
 * a NULL r or wait, attempt 0, or a policy with DECORRELATED_V2 jitter
 * (its wait depends on every earlier draw, not on the previous wait: use
 * resil_retry_plan() with a scripted random source instead).
 */
RESIL_API resil_err resil_retry_next_delay(const resil_retry *r,
    uint32_t attempt, uint64_t prev_wait, double u, uint64_t *wait);

/*
 * The plan: the waits a policy configured by cfg would choose, run
 * without running anything, assuming every attempt fails at once. waits[i]
 * is the wait before attempt i + 2. The plan ends at max_attempts, or
 * where the deadline would stop the next attempt; the budget is not
 * consulted. The draws come from random when it is not NULL (and has a
 * function), otherwise from cfg->random, otherwise from a fresh resil_rng
 * seeded with cfg->seed, so a new policy's first call in one thread makes
 * the same choices.
 *
 * Stores up to cap waits and the plan's length in *count (which may
 * exceed cap: the rest is cut). Returns RESIL_OK; RESIL_E_INVAL for a NULL
 * cfg or count, a NULL waits with cap > 0, or a bad cfg (named in *diag).
 */
RESIL_API resil_err resil_retry_plan(const resil_retry_config *cfg,
    const resil_random *random, uint64_t *waits, size_t cap, size_t *count,
    resil_diag *diag);

/*
 * Write a one-line account of res into buf (at most len bytes, always
 * NUL-terminated, cut like snprintf), in the manner of Dubbo's
 * "Tried 3 times ... Last error is: ...":
 *   "Tried 3 times. Last error is: rc 5 (failure)"
 *   "Tried 2 times, stopped at the deadline. Last error is: ..."
 *   "Tried 1 time, retry budget exhausted. Last error is: ..."
 *   "Tried 1 time, not retryable. Last error is: ..."
 *   "Tried 2 times, succeeded."
 * The last error is last_error when it is not NULL, else the status's
 * resil_strerror() text when the status is not RESIL_OK, else
 * "rc <rc> (<outcome>)". Returns RESIL_OK; RESIL_E_INVAL for a NULL res or
 * buf or a zero len.
 */
RESIL_API resil_err resil_retry_result_format(const resil_retry_result *res,
    const char *last_error, char *buf, size_t len);

/* A snapshot of the policy's counters since it was created. */
typedef struct resil_retry_metrics {
	uint64_t calls;    /* resil_retry_call()s that ran */
	uint64_t attempts; /* attempts made, the first ones included */
	uint64_t retries;  /* attempts after the first */
	uint64_t succeeded_without_retry;
	uint64_t succeeded_after_retry;
	uint64_t failed_without_retry; /* ended in anything but a success */
	uint64_t failed_after_retry;
	uint64_t exhausted;       /* calls stopped by max_attempts */
	uint64_t deadline_stops;  /* calls stopped by the deadline */
	uint64_t budget_refusals; /* calls stopped by the budget */
	double budget_tokens;     /* tokens in the bank now */
} resil_retry_metrics;

/* Fill *out. Returns RESIL_OK; RESIL_E_INVAL for a NULL argument. */
RESIL_API resil_err resil_retry_get_metrics(
    const resil_retry *r, resil_retry_metrics *out);

/*
 * A ready-made listener that keeps events in a caller-provided array, in
 * order, so a test can compare a whole history at once. Events beyond the
 * capacity are counted in dropped. Not thread-safe: use it with one
 * calling thread.
 */
typedef struct resil_retry_recorder {
	resil_retry_event *events;
	size_t capacity;
	size_t count;     /* events kept */
	uint64_t dropped; /* events that did not fit */
} resil_retry_recorder;

RESIL_API void resil_retry_recorder_init(
    resil_retry_recorder *rec, resil_retry_event *events, size_t capacity);
RESIL_API void resil_retry_recorder_listener(
    const resil_retry_event *ev, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_RETRY_H */

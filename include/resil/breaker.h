/*
 * resil breaker: a lock-free circuit breaker with probe permits.
 *
 * A call asks for a permit (resil_breaker_acquire), runs, and records its
 * outcome with that permit (resil_breaker_record). CLOSED lets calls through
 * and trips to OPEN on N consecutive failures, on a failure rate or on a
 * slow-call rate over a sliding window. OPEN rejects with RESIL_E_OPEN until
 * its wait has passed; the first acquire after that moves it to HALF_OPEN,
 * which grants exactly permitted_probes permits. When every probe has
 * reported, it closes if they were within the thresholds and reopens
 * otherwise. DISABLED, FORCED_OPEN and METRICS_ONLY are set by hand.
 * There is no timer thread: time is read, through the injected clock, only
 * when a decision needs it.
 *
 * Every state change is one compare-and-swap on one state word; exactly one
 * thread wins it and reports it to the listener, in order.
 *
 * Thread safety: acquire, record, release, call, get_state, get_metrics and
 * the manual transitions may run concurrently on one breaker from any number
 * of threads. new and free must not overlap any other call on the same
 * breaker. The listener is called on the thread that made the transition,
 * while it holds the transition (acquires and manual transitions on other
 * threads wait for it): it must return quickly. An acquire or a manual
 * transition of the same breaker from inside its listener would wait for
 * itself and returns RESIL_E_MISUSE instead.
 *
 * Durations (the _ns fields) are in ticks of the breaker's clock, and a
 * tick is a nanosecond on every clock, the manual clock included.
 */
#ifndef RESIL_BREAKER_H
#define RESIL_BREAKER_H

#include <string.h>

#include <resil/clock.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_breaker resil_breaker;

typedef enum resil_breaker_state {
	RESIL_BREAKER_CLOSED = 0,
	RESIL_BREAKER_OPEN = 1,
	RESIL_BREAKER_HALF_OPEN = 2,
	RESIL_BREAKER_DISABLED = 3,     /* always permits, records nothing */
	RESIL_BREAKER_FORCED_OPEN = 4,  /* always rejects, until a reset */
	RESIL_BREAKER_METRICS_ONLY = 5, /* records, never trips */
	/* Read only: a shared breaker's state word that holds no state (its
	 * shm region was damaged after the handle was made: docs/shared.md).
	 * Every acquire refuses (RESIL_E_MISUSE) at once, as do outcomes,
	 * snapshots and restores; resil_breaker_transition() cannot reach
	 * (RESIL_E_INVAL) or leave it (RESIL_E_MISUSE). */
	RESIL_BREAKER_CORRUPT = 6
} resil_breaker_state;

/* "CLOSED", "OPEN", "HALF_OPEN", "DISABLED", "FORCED_OPEN", "METRICS_ONLY",
 * "CORRUPT" or "UNKNOWN". */
RESIL_API const char *resil_breaker_state_name(resil_breaker_state s);

/* Why a transition happened. */
typedef enum resil_breaker_reason {
	RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES = 0, /* CLOSED -> OPEN */
	RESIL_BREAKER_REASON_FAILURE_RATE = 1,         /* CLOSED -> OPEN */
	RESIL_BREAKER_REASON_SLOW_CALL_RATE = 2,       /* CLOSED -> OPEN */
	RESIL_BREAKER_REASON_WAIT_ELAPSED = 3,     /* OPEN -> HALF_OPEN */
	RESIL_BREAKER_REASON_PROBES_PASSED = 4,    /* HALF_OPEN -> CLOSED */
	RESIL_BREAKER_REASON_PROBES_FAILED = 5,    /* HALF_OPEN -> OPEN */
	RESIL_BREAKER_REASON_PROBE_FAILED = 6,     /* reopen on first failure */
	RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT = 7, /* HALF_OPEN -> OPEN */
	RESIL_BREAKER_REASON_MANUAL = 8,           /* a manual transition */
	RESIL_BREAKER_REASON_RESTORED = 9          /* resil_breaker_restore */
} resil_breaker_reason;

/* "consecutive_failures", "failure_rate", ... or "unknown". */
RESIL_API const char *resil_breaker_reason_name(resil_breaker_reason r);

/* One transition, as the listener sees it. seq starts at 1 and grows by one
 * per transition of this breaker, so events can always be put in order. */
typedef struct resil_breaker_event {
	uint64_t seq;
	uint64_t time; /* clock reading at the transition */
	resil_breaker_state from;
	resil_breaker_state to;
	resil_breaker_reason reason;
} resil_breaker_event;

typedef void (*resil_breaker_listener_fn)(
    const resil_breaker_event *ev, void *ctx);

typedef enum resil_breaker_window_type {
	RESIL_WINDOW_COUNT = 0, /* the last window_size outcomes */
	RESIL_WINDOW_TIME = 1   /* outcomes of the last window_size buckets */
} resil_breaker_window_type;

typedef struct resil_breaker_config {
	size_t size; /* sizeof(resil_breaker_config), set by _default() */

	/* Triggers; 0 switches a trigger off. At least one must be on. */
	uint32_t consecutive_failures; /* trip on N failures in a row */
	uint32_t failure_rate_pct;     /* trip at >= this rate, 1..100 */
	uint32_t slow_rate_pct;        /* trip at >= this slow rate, 1..100 */
	uint64_t slow_threshold_ns;    /* slow when duration > this, >= 1 */
	uint32_t min_calls; /* outcomes in the window before a rate counts */

	/* The sliding window the rates are computed over. */
	resil_breaker_window_type window_type;
	uint32_t window_size;      /* COUNT: outcomes; TIME: buckets */
	uint64_t bucket_ns;        /* TIME: the span of one bucket */

	/* OPEN: wait before the first probe; grows by open_wait_multiplier at
	 * each consecutive reopening from HALF_OPEN (automatic or manual),
	 * up to open_wait_max_ns (0: no cap); CLOSED restores it. */
	uint64_t open_wait_ns;
	double open_wait_multiplier; /* 1.0: fixed wait; >= 1.0 */
	uint64_t open_wait_max_ns;

	/* HALF_OPEN. */
	uint32_t permitted_probes;     /* probes per episode, 1..32767 */
	int reopen_on_first_failure;   /* nonzero: a failed probe reopens */
	uint64_t max_half_open_ns;     /* 0: stay until all probes report */

	/* Notifications, optional. */
	resil_breaker_listener_fn listener;
	void *listener_ctx;

	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock */
} resil_breaker_config;

/*
 * Fill *cfg with the defaults: failure rate 50% over a count window of 100
 * outcomes once it holds 10, no consecutive or slow-call trigger, a fixed
 * 30 s OPEN wait, one probe, the system clock, malloc().
 */
static inline void
resil_breaker_config_init(resil_breaker_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->failure_rate_pct = 50;
	cfg->min_calls = 10;
	cfg->window_type = RESIL_WINDOW_COUNT;
	cfg->window_size = 100;
	cfg->bucket_ns = RESIL_NS_PER_SEC;
	cfg->open_wait_ns = 30 * RESIL_NS_PER_SEC;
	cfg->open_wait_multiplier = 1.0;
	cfg->permitted_probes = 1;
}

static inline resil_breaker_config
resil_breaker_config_default(void)
{
	resil_breaker_config cfg;

	resil_breaker_config_init(&cfg);
	return cfg;
}

/*
 * Check cfg without creating anything. Returns RESIL_OK, or RESIL_E_INVAL
 * with a message naming the field in *diag (if diag is not NULL).
 */
RESIL_API resil_err resil_breaker_config_validate(
    const resil_breaker_config *cfg, resil_diag *diag);

/*
 * Create a CLOSED breaker and store it in *out.
 *
 * *cfg, *cfg->alloc and *cfg->clock are copied: they may live on the stack.
 * Their ctx pointers (and listener_ctx) must outlive the breaker. The
 * caller owns *out and releases it with resil_breaker_free(). diag may be
 * NULL.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown cfg->size
 * or a bad setting (named in *diag); RESIL_E_NOMEM. On error *out is
 * unchanged.
 */
RESIL_API resil_err resil_breaker_new(resil_breaker **out,
    const resil_breaker_config *cfg, resil_diag *diag);

/* Release b and everything it owns. NULL is a harmless no-op. */
RESIL_API void resil_breaker_free(resil_breaker *b);

/*
 * A permit to make one call. It remembers the episode (the stretch of time
 * between two transitions) it was granted in: an outcome recorded with a
 * permit from an earlier episode changes nothing, however the record races
 * the transition. It is consumed by its first record or release, which
 * mark it spent; a second record or release of it returns RESIL_E_MISUSE
 * and changes nothing. Treat it as opaque (a copy made before its first
 * use is not tracked).
 */
typedef struct resil_permit {
	uint64_t episode; /* internal: the fast CLOSED grant leaves it as it
	                     is (its episode is in start) */
	uint64_t start; /* clock reading at acquire where timing is needed;
	                   else internal (the state word of the grant) */
	uint32_t flags;
	uint32_t reserved; /* unused (the fast acquire leaves it as it is) */
} resil_permit;

/*
 * Ask for a permit. Returns RESIL_OK and fills *permit, or RESIL_E_OPEN
 * when the breaker rejects the call (OPEN before its wait has passed,
 * FORCED_OPEN, or HALF_OPEN with every probe permit out); RESIL_E_INVAL for
 * a NULL argument; RESIL_E_MISUSE from inside the breaker's own listener.
 * *permit is written only on RESIL_OK. When many acquires race at the OPEN
 * deadline, exactly permitted_probes of them get probe permits: one that
 * meets a transition in progress waits for it and decides on the new
 * state.
 *
 * No lock, no allocation, no system call; the clock is read only where the
 * configuration needs it (OPEN, a time window, slow-call timing).
 */
RESIL_API resil_err resil_breaker_acquire(resil_breaker *b, resil_permit *permit);

/*
 * As resil_breaker_acquire; on RESIL_E_OPEN also stores in *retry_after
 * (which may be NULL) the ticks left before OPEN admits a probe:
 * UINT64_MAX for FORCED_OPEN, 0 for HALF_OPEN (probes are out; the state
 * will change when they report).
 */
RESIL_API resil_err resil_breaker_acquire_ex(
    resil_breaker *b, resil_permit *permit, uint64_t *retry_after);

/*
 * Record the outcome of the call made with permit. BUSINESS and IGNORED
 * outcomes count neither way; in HALF_OPEN they give the probe permit back.
 * Where slow-call detection is on, the duration is measured from the
 * permit's start with one clock read.
 *
 * Returns RESIL_OK (also for a stale permit, which changes nothing);
 * RESIL_E_MISUSE for a permit that was never granted (a zeroed struct) or
 * is already spent, or more probe outcomes in an episode than permits
 * granted; RESIL_E_INVAL for a NULL argument or an unknown outcome (the
 * permit is then not spent). Misuse never aborts. On RESIL_OK and
 * RESIL_E_MISUSE the permit is spent.
 */
RESIL_API resil_err resil_breaker_record(
    resil_breaker *b, resil_permit *permit, resil_outcome outcome);

/* As resil_breaker_record, with the call's duration given by the caller
 * (no clock read for it). */
RESIL_API resil_err resil_breaker_record_duration(resil_breaker *b,
    resil_permit *permit, resil_outcome outcome, uint64_t duration);

/* Give an unused permit back: the call was never made. In HALF_OPEN the
 * probe can be granted again; elsewhere nothing changes. The permit is
 * spent. Returns RESIL_OK, RESIL_E_INVAL for a NULL argument,
 * RESIL_E_MISUSE for a zeroed or already spent permit. */
RESIL_API resil_err resil_breaker_release(
    resil_breaker *b, resil_permit *permit);

/* The shape of a call resil_breaker_call() can run. */
typedef int (*resil_breaker_fn)(void *ctx);

/*
 * Acquire, run fn(ctx), classify its return code with cls (NULL: 0 is
 * success) and record the outcome with its duration.
 *
 * Returns RESIL_E_OPEN when rejected (fn is not called, *rc untouched);
 * RESIL_OK when fn ran, with its return code in *rc (rc may be NULL).
 */
RESIL_API resil_err resil_breaker_call(resil_breaker *b, resil_breaker_fn fn,
    void *ctx, const resil_classifier *cls, int *rc);

/* The current state (one atomic load and a range check):
 * RESIL_BREAKER_CORRUPT when the state word holds no state. */
RESIL_API resil_breaker_state resil_breaker_get_state(const resil_breaker *b);

/*
 * Manual control, at any time, from any thread. Each is one transition,
 * reported to the listener with reason MANUAL (none when the breaker is
 * already in the target state, except reset, which always clears counts).
 * Each returns RESIL_OK, RESIL_E_INVAL for a NULL breaker or an unknown
 * state, RESIL_E_MISUSE when called from the breaker's own listener.
 *
 * reset: CLOSED with empty counts and the base OPEN wait, from any state.
 * force_open: rejects every call until reset (or another manual state),
 *             whatever the wait.
 * disable: permits every call and records nothing.
 * metrics_only: records outcomes (metrics) but never trips.
 * transition: move to any state; OPEN starts a fresh wait now, HALF_OPEN a
 *             fresh probe episode.
 */
RESIL_API resil_err resil_breaker_reset(resil_breaker *b);
RESIL_API resil_err resil_breaker_force_open(resil_breaker *b);
RESIL_API resil_err resil_breaker_disable(resil_breaker *b);
RESIL_API resil_err resil_breaker_metrics_only(resil_breaker *b);
RESIL_API resil_err resil_breaker_transition(
    resil_breaker *b, resil_breaker_state to);

/* A snapshot of the breaker's counters. Lifetime totals are exact; the
 * window figures are those of the sliding window at the time of reading. */
typedef struct resil_breaker_metrics {
	resil_breaker_state state;
	uint64_t time_in_state;    /* ticks since the last transition */
	uint64_t transitions;      /* number of transitions so far */
	uint64_t open_wait;        /* the current OPEN wait */
	/* Lifetime totals. */
	uint64_t successes;        /* recorded successes */
	uint64_t failures;         /* recorded failures */
	uint64_t slow_calls;       /* recorded calls slower than the threshold */
	uint64_t ignored;          /* IGNORED and BUSINESS outcomes */
	uint64_t rejections;       /* acquires answered RESIL_E_OPEN */
	uint64_t stale;            /* outcomes with a permit from an old episode */
	/* The window: in CLOSED and METRICS_ONLY the sliding window; in
	 * OPEN the window that tripped it (as time leaves it), or, after a
	 * reopening from HALF_OPEN, that episode's probes; in HALF_OPEN the
	 * probes reported so far (rates once all K have reported). Zero in
	 * DISABLED. */
	uint32_t window_calls;
	uint32_t window_failures;
	uint32_t window_slow;
	/* The current failure streak in CLOSED, kept only while the
	 * consecutive_failures trigger is on (0 otherwise: the rate-only
	 * success path writes nothing shared). */
	uint32_t consecutive_failures;
	float failure_rate;   /* percent, or -1 below min_calls */
	float slow_call_rate; /* percent, or -1 below min_calls */
	/* HALF_OPEN. */
	uint32_t probes_granted;
	uint32_t probes_reported;
} resil_breaker_metrics;

RESIL_API resil_err resil_breaker_get_metrics(
    resil_breaker *b, resil_breaker_metrics *out);

/*
 * A breaker in shared memory (include/resil/shm.h) tells this process's
 * listener about transitions made by other processes too, in order, from
 * a ring of the last 64: poll delivers those not yet heard (a transition
 * made by this process and every acquire of this process, granted or
 * rejected, deliver them as well). In a shared breaker the
 * listener runs after the transition is published, never while this
 * process holds it. A no-op for other breakers. Returns RESIL_OK, or
 * RESIL_E_INVAL for a NULL breaker.
 */
RESIL_API resil_err resil_breaker_poll(resil_breaker *b);

/*
 * Snapshot and restore, for short-lived processes (a CLI tool, a worker
 * that restarts): the state, its start and OPEN wait, the consecutive
 * failures, the window's outcomes, the probe counts and the lifetime
 * totals, in a small versioned format (docs/breaker.md). Thread-safe with
 * every other call.
 *
 * snapshot writes at most resil_breaker_snapshot_size(b) bytes to buf and
 * their number to *len. Returns RESIL_OK; RESIL_E_INVAL for a NULL
 * argument or cap < resil_breaker_snapshot_size(b); RESIL_E_MISUSE from the
 * breaker's own listener or on a CORRUPT breaker.
 *
 * restore moves b, in one transition reported with reason RESTORED, to
 * the snapshot's state with its counts (lifetime totals are added). The
 * episode counter stays b's own: permits granted before are stale. A
 * HALF_OPEN snapshot restores a fresh probe episode. Times are kept as ages
 * when b's clock reads earlier than when the snapshot was taken (another
 * boot): OPEN then has the same wait left. Returns RESIL_OK; RESIL_E_INVAL,
 * with the reason in *diag, for a snapshot of another version, of a
 * breaker with another window layout (type, size, bucket_ns), a truncated
 * or corrupted one (checksum, inconsistent fields): b is then unchanged;
 * RESIL_E_MISUSE from the breaker's own listener or on a CORRUPT breaker
 * (with the reason in *diag).
 */
#define RESIL_BREAKER_SNAPSHOT_VERSION 1

RESIL_API size_t resil_breaker_snapshot_size(const resil_breaker *b);
RESIL_API resil_err resil_breaker_snapshot(
    resil_breaker *b, void *buf, size_t cap, size_t *len);
RESIL_API resil_err resil_breaker_restore(
    resil_breaker *b, const void *buf, size_t len, resil_diag *diag);

/*
 * A ready-made listener that keeps every transition in a caller-provided
 * array, at index seq - 1, so a test can compare a whole history at once.
 * Events beyond the capacity are counted in dropped. Set it up with
 * resil_breaker_recorder_init(), then pass resil_breaker_recorder_listener
 * as cfg.listener and the recorder as cfg.listener_ctx.
 */
typedef struct resil_breaker_recorder {
	resil_breaker_event *events;
	size_t capacity;
	uint64_t count;   /* highest seq recorded */
	uint64_t dropped; /* events that did not fit */
} resil_breaker_recorder;

RESIL_API void resil_breaker_recorder_init(resil_breaker_recorder *r,
    resil_breaker_event *events, size_t capacity);
RESIL_API void resil_breaker_recorder_listener(
    const resil_breaker_event *ev, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_BREAKER_H */

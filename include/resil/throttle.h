/*
 * resil throttle: adaptive client-side throttling (Google SRE book,
 * "Handling Overload", client-side throttling). A standalone object that a
 * caller puts in front of its calls, and the pipeline's throttle stage
 * (the `throttle.*` keys, docs/pipeline.md), in front of the breaker.
 *
 * Over a sliding window of `window_ns` ticks, kept as a ring of `buckets`
 * time buckets, the throttle counts the requests the application made and
 * the ones the backend accepted. Each admit rejects the request locally,
 * without sending it, with probability
 *
 *     p = max(0, (requests - k * accepts) / (requests + 1))
 *
 * where requests and accepts are the window's counts before this request.
 * A request rejected locally still counts as a request (so a client whose
 * backend refuses everything keeps sending a trickle that tells it when
 * the backend is back), never as an accept. With k = 2 (the book's
 * default) the client sends up to about twice what the backend accepts;
 * a smaller k throttles sooner, a larger k later. k = 0 turns the
 * throttle off: every admit is granted (and still counted).
 *
 * What counts as an accept is decided by the caller's report of each
 * admitted call (resil_throttle_report()): RESIL_THROTTLE_ACCEPTED for
 * any answer of the backend that is not an overload refusal (a success, a
 * business error, even an error of its own, such as HTTP 500: the backend
 * took the request and worked on it); RESIL_THROTTLE_REJECTED for an
 * overload refusal (HTTP 429 or 503 with Retry-After, gRPC
 * RESOURCE_EXHAUSTED); RESIL_THROTTLE_NO_ANSWER for a call that got no
 * answer (a timeout, a refused or reset connection: what an overloaded
 * backend often does instead of refusing). Only ACCEPTED is an accept. A
 * call that is never reported (the caller gave up on it) counts as a
 * request that was not accepted.
 *
 * The window: with bucket_ns = window_ns / buckets, a request or accept
 * counted at time t counts at time now while
 * now / bucket_ns - t / bucket_ns < buckets, also when no call arrives
 * meanwhile (metrics read later show it gone). So a count made at the
 * start of a bucket counts for exactly window_ns ticks, and any count for
 * between window_ns - bucket_ns + 1 and window_ns ticks. A clock that
 * moves back does not move the window back: what is counted then counts
 * in the window's newest bucket. The clock is the
 * coarse reading (resil_clock_coarse()), which is the precise one on a
 * manual clock.
 *
 * Randomness: one uniform draw from the injected random source per admit,
 * and only when p > 0; the request is rejected when the draw is below p.
 * So a test that scripts the source knows each decision exactly.
 *
 * Thread safety: every function except _new and _free may run
 * concurrently on one throttle from any number of threads; _new and _free
 * must not overlap any other call on the same throttle. admit and report
 * take no lock, allocate nothing and make no system call; their cost does
 * not grow with buckets (running totals of the window; the first call in
 * a new bucket empties the buckets that left the window, once). The listener
 * is called on the thread that made the decision, after it took effect:
 * it must return quickly and must not free the throttle. Known imprecision
 * under races, as in the breaker's time window: a count racing the
 * emptying of its bucket (by the first call in a new bucket) may be lost,
 * and a reader racing it may see the old bucket's counts once; the
 * window's totals never drift (a lost count leaves the total with its
 * bucket). The lifetime counters of the metrics are always exact.
 */
#ifndef RESIL_THROTTLE_H
#define RESIL_THROTTLE_H

#include <string.h>

#include <resil/clock.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_throttle resil_throttle;

/* The largest number of buckets in a window. */
#define RESIL_THROTTLE_MAX_BUCKETS 1024u
/* The largest k (besides 0, off). */
#define RESIL_THROTTLE_MAX_K 1000000.0

/* What the caller reports of an admitted call. */
typedef enum resil_throttle_result {
	RESIL_THROTTLE_ACCEPTED = 0, /* the backend answered (an accept) */
	RESIL_THROTTLE_REJECTED = 1, /* the backend refused: overloaded */
	RESIL_THROTTLE_NO_ANSWER = 2 /* no answer: timeout, connection */
} resil_throttle_result;

/* What a listener is told about: so far only local rejections. */
typedef enum resil_throttle_event_type {
	RESIL_THROTTLE_EVENT_REJECTED = 0 /* an admit got E_LIMITED */
} resil_throttle_event_type;

/* "rejected" or "unknown". */
RESIL_API const char *resil_throttle_event_name(resil_throttle_event_type t);

/*
 * One event. time is the clock reading of the decision; requests and
 * accepts the window's counts it was made from (this request not yet
 * counted); p the probability of rejection computed from them and draw
 * the uniform draw that fell below it.
 */
typedef struct resil_throttle_event {
	resil_throttle_event_type type;
	uint64_t time;
	uint64_t requests;
	uint64_t accepts;
	double p;
	double draw;
} resil_throttle_event;

typedef void (*resil_throttle_listener_fn)(
    const resil_throttle_event *ev, void *ctx);

typedef struct resil_throttle_config {
	size_t size; /* sizeof(resil_throttle_config), set by _init() */
	/* The multiplier of accepts: 0 (off) or 1..RESIL_THROTTLE_MAX_K. */
	double k;
	/* The span of the window in ticks: >= buckets and a whole number
	 * of buckets (window_ns % buckets == 0). */
	uint64_t window_ns;
	/* Time buckets in the window, 1..RESIL_THROTTLE_MAX_BUCKETS. */
	uint32_t buckets;

	/* The draws: from random, or, when random.uniform is NULL, from a
	 * resil_rng that the throttle seeds with seed. */
	resil_random random;
	uint64_t seed;

	/* Notifications of local rejections, optional. */
	resil_throttle_listener_fn listener;
	void *listener_ctx;

	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock */
} resil_throttle_config;

/* Fill *cfg with the defaults: k 2, a window of 2 minutes in 12 buckets
 * of 10 s (the SRE book's figures), draws from a resil_rng seeded with
 * 0, no listener, the system clock, malloc(). */
static inline void
resil_throttle_config_init(resil_throttle_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->k = 2.0;
	cfg->window_ns = 120 * RESIL_NS_PER_SEC;
	cfg->buckets = 12;
}

static inline resil_throttle_config
resil_throttle_config_default(void)
{
	resil_throttle_config cfg;

	resil_throttle_config_init(&cfg);
	return cfg;
}

/*
 * Check cfg without creating anything. Returns RESIL_OK, or RESIL_E_INVAL
 * with a message naming the field in *diag (if diag is not NULL), e.g.
 * "throttle.k: 0.5 is out of range: 0 (off) or 1..1000000" or
 * "throttle.window_ns: 1000 is not a whole number of 3 buckets".
 */
RESIL_API resil_err resil_throttle_config_validate(
    const resil_throttle_config *cfg, resil_diag *diag);

/*
 * Apply one setting of configuration text to *cfg:
 *   throttle.k        a number, 0 or off (off), or 1..1000000;
 *   throttle.window   a duration (ns us ms s m h; a number alone is
 *                     milliseconds), >= 1ns;
 *   throttle.buckets  a whole number, 1..1024.
 * Whether the window is a whole number of buckets is checked by
 * resil_throttle_config_validate() (and _new), once every key is set.
 * Returns RESIL_OK; RESIL_E_NOTFOUND for a key it does not know
 * ("throttle.foo: unknown key (throttle keys: k, window, buckets)"), so a
 * caller can try its other parsers; RESIL_E_INVAL for NULL or a bad value,
 * with a message naming the key and the value as written
 * ("throttle.k: 0.5 is out of range: 0 (off) or 1..1000000"); *cfg is
 * unchanged on error.
 */
RESIL_API resil_err resil_throttle_config_set(resil_throttle_config *cfg,
    const char *key, const char *value, resil_diag *diag);

/*
 * Create a throttle with an empty window and store it in *out. The clock
 * is read once.
 *
 * *cfg, *cfg->alloc, *cfg->clock and cfg->random are copied: they may
 * live on the stack. Their ctx pointers (and listener_ctx) must outlive
 * the throttle. The caller owns *out and releases it with
 * resil_throttle_free(). diag may be NULL.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown
 * cfg->size or a bad setting (named in *diag); RESIL_E_NOMEM. On error
 * *out is unchanged.
 */
RESIL_API resil_err resil_throttle_new(
    resil_throttle **out, const resil_throttle_config *cfg, resil_diag *diag);

/* Release t. NULL is a harmless no-op. */
RESIL_API void resil_throttle_free(resil_throttle *t);

/*
 * The class of a request (the hook for issue 42's priorities: critical,
 * default, sheddable). The window counts requests by class; the excess
 * E = requests - k * accepts (all classes) is shed from the lowest class
 * up: a sheddable request is rejected with min(1, E / (sheddable + 1)),
 * a default one with min(1, max(0, E - sheddable) / (default + 1)), a
 * critical one with min(1, max(0, E - sheddable - default) /
 * (critical + 1)), each count the window's requests of that class before
 * this one. With default requests only this is the formula above; a
 * critical request is rejected only when the lower classes cannot absorb
 * the excess (a backend that accepts nothing). resil_throttle_admit() is
 * admit_class(t, RESIL_THROTTLE_DEFAULT).
 */
#define RESIL_THROTTLE_CRITICAL 0
#define RESIL_THROTTLE_DEFAULT 1
#define RESIL_THROTTLE_SHEDDABLE 2

/* "critical", "default", "sheddable" or "unknown". */
RESIL_API const char *resil_throttle_class_name(int cls);

/*
 * Ask to send one request. Reads the clock once, computes p from the
 * window (above), draws once when p > 0, and counts the request in the
 * window whatever the answer.
 *
 * Returns RESIL_OK: send it, and report its result with
 * resil_throttle_report(); RESIL_E_LIMITED: rejected locally, do not send
 * it (and do not report it); RESIL_E_INVAL for NULL.
 */
RESIL_API resil_err resil_throttle_admit(resil_throttle *t);

/* resil_throttle_admit() for a request of class cls (RESIL_THROTTLE_*);
 * RESIL_E_INVAL also for an unknown class. */
RESIL_API resil_err resil_throttle_admit_class(resil_throttle *t, int cls);

/*
 * Report the result of an admitted call (the header's comment says which
 * to give). ACCEPTED counts an accept in the window at the clock's
 * current reading; REJECTED and NO_ANSWER are only counted in the
 * metrics. Returns RESIL_OK; RESIL_E_INVAL for NULL or an unknown result.
 */
RESIL_API resil_err resil_throttle_report(
    resil_throttle *t, resil_throttle_result result);

typedef struct resil_throttle_metrics {
	/* Lifetime counters, each exact. */
	uint64_t requests;        /* admits: admitted + local_rejects */
	uint64_t admitted;        /* admits that returned RESIL_OK */
	uint64_t local_rejects;   /* admits that returned E_LIMITED */
	uint64_t accepts;         /* reports of ACCEPTED */
	uint64_t backend_rejects; /* reports of REJECTED */
	uint64_t no_answer;       /* reports of NO_ANSWER */
	/* The window at the clock's current reading. */
	uint64_t window_requests;
	uint64_t window_accepts;
	/* The probability of rejection that the next default admit would
	 * use (with default requests only: max(0, (window_requests - k *
	 * window_accepts) / (window_requests + 1))), 0 when off. */
	double reject_probability;
	/* The configuration, for reference. */
	double k;
	uint64_t window_ns;
	uint32_t buckets;
} resil_throttle_metrics;

/* Fill *out (one clock read; it moves the window to that reading, as an
 * admit would). Returns RESIL_OK or RESIL_E_INVAL for a NULL
 * argument. The counters are each exact but not read atomically together
 * while other threads admit and report. */
RESIL_API resil_err resil_throttle_get_metrics(
    resil_throttle *t, resil_throttle_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_THROTTLE_H */

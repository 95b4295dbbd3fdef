/*
 * resil directory: the live list of a service's endpoints (providers), the
 * consistent snapshots calls read it through, and the state each endpoint
 * carries across updates: calls in flight, latency estimates, outlier
 * ejection and its own circuit breaker.
 *
 * An endpoint is keyed by its address. The user changes the list at any
 * time while calls run: resil_directory_push() replaces it (a registry
 * push), resil_directory_add(), _update() and _remove() apply one registry
 * event. Every change builds a new snapshot and publishes it with one
 * pointer store; a call reads one snapshot from start to end, and old
 * snapshots are reclaimed with ck_epoch once no reader can see them. An
 * update keeps an existing address's position and its state (active calls,
 * latency, ejection, breaker) and appends new addresses in the order given;
 * a refused update (a negative weight, a duplicate address, an empty
 * address or zone) changes nothing.
 *
 * Outlier detection (Envoy's consecutive failures): a FAILURE outcome
 * reported for an endpoint adds to its streak; SUCCESS or BUSINESS ends it.
 * At outlier.consecutive_failures in a row the endpoint is ejected for
 * min(base * k, max), k the count of consecutive ejections (k drops by one
 * for each full interval it stays in), unless that would put more than
 * max_ejection_pct of the non-mock endpoints out at once:
 * 100 * (ejected + 1) <= max_ejection_pct * N; within that share, with
 * probability outlier_enforcing_consecutive_failures / 100 (Envoy's
 * enforcing_consecutive_5xx; 100 by default: always), a detection let go
 * is the DETECTED event. The streak restarts after every detection, also
 * one that share or the percentage prevented. It returns exactly at
 * ejected_at + duration. consecutive_failures 0 is refused (DESIGN: a
 * value to refuse, not to repair); max_ejection_pct 0 turns detection
 * off. Ejections and returns are events with the
 * address.
 *
 * Beside the streak: Envoy's success-rate and failure-percentage
 * detections once per interval (outlier_rate, docs/outlier.md), and
 * active health checks by a checker the directory owns and the caller
 * drives (health, docs/health.md); an endpoint it holds unhealthy is not
 * a candidate.
 *
 * Thread safety: every function may be called from any thread at any
 * time, except new and free, which must not overlap any other call on the
 * same directory. Updates are serialised by a writer lock; readers take no
 * lock. The listener is called on the thread that caused the event:
 * ADDED and REMOVED by the updating thread with the writer lock held (it
 * must not update the directory), EJECTED and DETECTED by the reporting
 * thread (a streak) or by the thread whose route or state read ended an
 * interval (the interval detections), RETURNED by whichever thread first notices
 * the return (a route, a report or get_state), UNHEALTHY and HEALTHY by
 * the thread whose health report or resil_directory_set_healthy() made
 * the change; all without a lock. Free the selectors and candidate sets
 * over a directory before the directory.
 *
 * A PeakEWMA and shortest-response estimate is kept per endpoint, with the
 * decay and window of the balancer of the method that reported.
 */
#ifndef RESIL_DIRECTORY_H
#define RESIL_DIRECTORY_H

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/health.h>
#include <resil/outlier.h>
#include <resil/resil.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_directory resil_directory;

/* One endpoint as the user describes it. Strings are copied. */
typedef struct resil_endpoint_spec {
	const char *address; /* the key, e.g. "10.0.0.1:20880"; required */
	const char *zone;    /* NULL: no zone */
	int32_t weight;      /* >= 0 (Dubbo's default is 100); 0 is never
	                      * picked by random, roundrobin, leastactive
	                      * or shortest while others have weight (all
	                      * 0: evenly); p2c, peakewma and hash ignore
	                      * weights */
	const char *tag;     /* Dubbo routing tag; NULL: untagged */
	/* Other attributes a condition rule can test, "k=v&k2=v2"; NULL:
	 * none. Keys address, host, port, zone and tag are built in. */
	const char *params;
	uint64_t start_time; /* clock tick the endpoint started at */
	uint64_t warmup;     /* ticks of warm-up after start_time; 0: none */
	int mock;            /* nonzero: a mock endpoint, never a candidate */
	void *user;          /* the caller's, never freed by resil */
} resil_endpoint_spec;

/* A spec with weight 100 and nothing else set. */
static inline resil_endpoint_spec
resil_endpoint_spec_default(const char *address)
{
	resil_endpoint_spec s;

	memset(&s, 0, sizeof(s));
	s.address = address;
	s.weight = 100;
	return s;
}

typedef enum resil_endpoint_event_type {
	RESIL_ENDPOINT_EJECTED = 0,
	RESIL_ENDPOINT_RETURNED = 1,
	RESIL_ENDPOINT_ADDED = 2,
	RESIL_ENDPOINT_REMOVED = 3,
	/* A push with no provider was not applied (empty protection): the
	 * last non-empty list stays. address is "", duration the number of
	 * providers kept. */
	RESIL_ENDPOINT_EMPTY_PUSH = 4,
	/* An active health check marked the endpoint unhealthy (not a
	 * candidate until it passes again) or healthy again; time is the
	 * directory's clock at the change. */
	RESIL_ENDPOINT_UNHEALTHY = 5,
	RESIL_ENDPOINT_HEALTHY = 6,
	/* Issue 38.14: an outlier detection the enforcing percentage let go
	 * (Envoy logs it as an ejection with enforced=false): the endpoint
	 * stays in. kind is the detection (RESIL_OUTLIER_NONE for
	 * consecutive failures), time now, duration and ejections 0. */
	RESIL_ENDPOINT_DETECTED = 7,
	/* Issue 40: the endpoint's own breaker changed state; breaker has
	 * the transition, time its clock reading. */
	RESIL_ENDPOINT_BREAKER = 8
} resil_endpoint_event_type;

/* "EJECTED", "RETURNED", "ADDED", "REMOVED", "EMPTY_PUSH", "UNHEALTHY",
 * "HEALTHY", "DETECTED", "BREAKER" or "UNKNOWN". */
RESIL_API const char *resil_endpoint_event_name(resil_endpoint_event_type t);

typedef struct resil_endpoint_event {
	resil_endpoint_event_type type;
	const char *address; /* valid during the call only */
	uint64_t time;      /* EJECTED: now; RETURNED: the exact return time */
	uint64_t duration;  /* EJECTED: how long; EMPTY_PUSH: providers kept */
	uint32_t ejections; /* EJECTED: k, the consecutive ejection count */
	/* EJECTED: the detection: RESIL_OUTLIER_NONE for consecutive
	 * failures, RESIL_OUTLIER_SUCCESS_RATE or
	 * RESIL_OUTLIER_FAILURE_PERCENTAGE (the interval detections). */
	resil_outlier_kind kind;
	/* BREAKER: the transition (valid during the call only); else
	 * NULL. */
	const resil_breaker_event *breaker;
} resil_endpoint_event;

typedef void (*resil_endpoint_listener_fn)(
    const resil_endpoint_event *ev, void *ctx);

/* Outlier detection; max_ejection_pct 0 turns it off (no endpoint is
 * ever ejected; streaks are still counted for resil_endpoint_info). */
typedef struct resil_outlier_config {
	uint32_t consecutive_failures; /* default 5; >= 1 */
	uint64_t base_ejection;        /* default 30 s */
	uint64_t max_ejection;         /* default 300 s; >= base_ejection */
	uint64_t interval;             /* default 10 s; >= 1 */
	uint32_t max_ejection_pct;     /* default 10; 0..100 */
} resil_outlier_config;

typedef struct resil_directory_config {
	size_t size; /* sizeof(resil_directory_config), set by _init() */
	resil_outlier_config outlier;
	/* A breaker for each endpoint, created when the address first
	 * appears; NULL: none. Copied (its clock and alloc are replaced by
	 * the directory's). */
	const resil_breaker_config *endpoint_breaker;
	resil_endpoint_listener_fn listener;
	void *listener_ctx;
	unsigned reader_slots;        /* concurrent readers; 0: 64 */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* NULL: the monotonic system clock */
	/* Dubbo's empty protection: a push with no provider (no non-mock
	 * endpoint) while the list has some is not applied; the last
	 * non-empty list stays and an EMPTY_PUSH event says so. Default 1
	 * (set by _init); 0 applies such a push. Edits by add, update and
	 * remove are always applied. */
	int empty_protection;
	/* Envoy's success-rate and failure-percentage detections
	 * (docs/outlier.md), evaluated once per outlier.interval over the
	 * SUCCESS and FAILURE outcomes reported in it; NULL: off (the
	 * default). Copied; its max_ejection_pct is replaced by
	 * outlier.max_ejection_pct (0 turns these off too). */
	const resil_outlier_rate_config *outlier_rate;
	/* The enforcing draws of outlier_rate and of
	 * outlier_enforcing_consecutive_failures; NULL: a generator of the
	 * directory's own with a fixed seed (runs replay). Copied; its ctx
	 * must outlive the directory. */
	const resil_random *random;
	/* Active health checks (docs/health.md): the directory creates a
	 * checker from this config and makes every non-mock endpoint a
	 * target (added and removed with the list; the target's user is the
	 * spec's); the caller drives it (resil_directory_health()) on its
	 * own loop, in readings of the directory's clock. An endpoint the
	 * checker holds UNHEALTHY is not a candidate until it passes again
	 * (a new one starts as health.initial says: UNHEALTHY by default).
	 * NULL: none (the default). Copied; the listener in it is called
	 * after the directory's own, and its alloc NULL means the
	 * directory's. */
	const resil_health_config *health;
	/* The endpoints the directory starts with: a static list (Dubbo's
	 * url= direct connection, Envoy's static cluster; text: url=),
	 * pushed by resil_directory_new() before it returns, as
	 * resil_directory_push() would (each is checked as push checks it,
	 * the listener hears ADDED for each, a breaker and a health target
	 * are made for each). NULL and 0: empty (the default). Copied; a
	 * later push replaces the list as usual. */
	const resil_endpoint_spec *endpoints;
	size_t nendpoints;
	/* Issue 24.2: the endpoint breakers in shared memory (docs/shared.md,
	 * text: endpoint.breaker.shared=shm:REGION): the name of a region
	 * (as resil_shm_open's) that the directory opens or creates (default
	 * resil_shm_config) and closes with it; each endpoint's breaker is
	 * the region's breaker named after its address, so the processes
	 * of a host share each endpoint's breaker. Needs endpoint_breaker
	 * (its settings). NULL: each directory's own (the default). Copied. */
	const char *endpoint_breaker_shm;
	/* Issue 38.14, Envoy's enforcing_consecutive_5xx (text:
	 * outlier.enforcing_consecutive_failures): the percent chance that a
	 * consecutive-failure detection inside the max share ejects; 0..100,
	 * default 100 (set by _init). 100 ejects and 0 never does with no
	 * draw; anything between draws one u of random, ejecting when
	 * u * 100 < it. A detection let go is the DETECTED event. */
	uint32_t outlier_enforcing_consecutive_failures;
} resil_directory_config;

static inline void
resil_directory_config_init(resil_directory_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->outlier.consecutive_failures = 5;
	cfg->outlier.base_ejection = 30 * RESIL_NS_PER_SEC;
	cfg->outlier.max_ejection = 300 * RESIL_NS_PER_SEC;
	cfg->outlier.interval = 10 * RESIL_NS_PER_SEC;
	cfg->outlier.max_ejection_pct = 10;
	cfg->empty_protection = 1;
	cfg->outlier_enforcing_consecutive_failures = 100;
}

static inline resil_directory_config
resil_directory_config_default(void)
{
	resil_directory_config cfg;

	resil_directory_config_init(&cfg);
	return cfg;
}

/* RESIL_OK, or RESIL_E_INVAL naming the field in *diag
 * ("outlier.max_ejection: 10 is below outlier.base_ejection (30)",
 * "endpoints[1].weight: -1 is negative (0 is allowed)"; a duplicate
 * address in endpoints is found by resil_directory_new()). */
RESIL_API resil_err resil_directory_config_validate(
    const resil_directory_config *cfg, resil_diag *diag);

/*
 * Create a directory, empty or with cfg->endpoints (version 1 then). *cfg
 * is copied; the endpoint breaker config and the endpoints are copied
 * too. The listener's ctx, the allocator's and the clock's must outlive
 * the directory. Free it with resil_directory_free() after every
 * selector over it is freed. Returns RESIL_OK, RESIL_E_INVAL (message in
 * *diag, as resil_directory_push() words it for the endpoints) or
 * RESIL_E_NOMEM; *out is unchanged on error.
 */
RESIL_API resil_err resil_directory_new(resil_directory **out,
    const resil_directory_config *cfg, resil_diag *diag);

/* Release d, after every selector and candidate set over it is freed and
 * every pick from it is reported or released. NULL is a no-op. */
RESIL_API void resil_directory_free(resil_directory *d);

/*
 * Replace the whole list with specs[0..n) (n may be 0). Addresses kept keep
 * their position and state; new ones are appended in the given order;
 * missing ones are removed. A push with no provider (mock endpoints do not
 * count) while the list has providers changes nothing under empty
 * protection (the default): it returns RESIL_OK and sends EMPTY_PUSH.
 * Returns RESIL_OK; RESIL_E_INVAL for a bad spec
 * ("endpoints[2].weight: -1 is negative", "endpoints[3].address: duplicate
 * of endpoints[1] (10.0.0.1:1)"), changing nothing; RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_directory_push(resil_directory *d,
    const resil_endpoint_spec *specs, size_t n, resil_diag *diag);

/* Add one endpoint at the end. RESIL_E_INVAL if its address is present. */
RESIL_API resil_err resil_directory_add(
    resil_directory *d, const resil_endpoint_spec *spec, resil_diag *diag);

/* Change the attributes of a present address in place (state kept).
 * RESIL_E_NOTFOUND if it is absent. */
RESIL_API resil_err resil_directory_update(
    resil_directory *d, const resil_endpoint_spec *spec, resil_diag *diag);

/* Remove one address. RESIL_E_NOTFOUND if it is absent. */
RESIL_API resil_err resil_directory_remove(
    resil_directory *d, const char *address, resil_diag *diag);

/* Number of endpoints (mock ones included) and the snapshot version (grows
 * by one with each accepted update). */
RESIL_API size_t resil_directory_count(resil_directory *d);
RESIL_API uint64_t resil_directory_version(resil_directory *d);

/* An endpoint's state, as resil_directory_get_state() reports it. */
typedef struct resil_endpoint_state {
	size_t position;        /* in the current list */
	uint64_t id;            /* unique per address lifetime in d */
	uint64_t active;        /* calls picked and not yet reported */
	uint32_t streak;        /* consecutive failures */
	uint32_t ejections;     /* k: consecutive ejections */
	int ejected;            /* at the time of the call */
	uint64_t ejected_until; /* the end of the last ejection */
	uint64_t ewma_cost;     /* PeakEWMA cost at its last sample (not
	                         * decayed); 0 if never observed */
	uint64_t sr_successes;  /* shortest response window */
	uint64_t sr_elapsed;
	int32_t weight;              /* configured */
	resil_breaker_state breaker; /* CLOSED when there is no breaker */
	/* The interval detections (outlier_rate): the SUCCESS and FAILURE
	 * outcomes counted since the last evaluation, and the success rate
	 * the last evaluation computed (-1: not computed). */
	uint64_t interval_requests, interval_successes;
	double success_rate;
	/* 0: marked unhealthy by an active health check (not a candidate);
	 * 1 otherwise. */
	int healthy;
} resil_endpoint_state;

/* The state of address; RESIL_E_NOTFOUND if it is not in the list. */
RESIL_API resil_err resil_directory_get_state(
    resil_directory *d, const char *address, resil_endpoint_state *out);

/*
 * The last evaluation of the interval detections (outlier_rate): its
 * summary (mean and threshold of the success rate, sample sizes, the
 * counts of each verdict), when it ran (the reading of the clock) and how
 * many have run. RESIL_OK; RESIL_E_NOTFOUND when none has run (or the
 * detections are off), *out zeroed; RESIL_E_INVAL for NULL.
 */
typedef struct resil_directory_rate_stats {
	resil_outlier_summary last;
	uint64_t evaluated_at;
	uint64_t evaluations;
} resil_directory_rate_stats;

RESIL_API resil_err resil_directory_get_rate_stats(
    resil_directory *d, resil_directory_rate_stats *out);

/* The checker of resil_directory_config.health, for the caller's probe
 * loop (resil_health_next(), _report(), with readings of the directory's
 * clock); NULL when none is configured. Valid until the directory is
 * freed; do not free it, nor add or remove its targets (the directory
 * does). */
RESIL_API resil_health *resil_directory_health(resil_directory *d);

/*
 * Mark address healthy (1) or unhealthy (0) as an active check found it:
 * an unhealthy endpoint is not a candidate (the panic rule counts it as
 * unhealthy) until marked healthy again; the mark survives updates of
 * the list. The directory's own checker calls this from its listener;
 * a program with a checker of its own (or another source of health) can
 * call it. A change sends RESIL_ENDPOINT_UNHEALTHY or _HEALTHY. A new
 * endpoint starts healthy, or as the directory's checker starts it.
 * RESIL_OK; RESIL_E_NOTFOUND when address is not in the list;
 * RESIL_E_INVAL for NULL.
 */
RESIL_API resil_err resil_directory_set_healthy(
    resil_directory *d, const char *address, int healthy);

/* The breaker of address (NULL when absent or none configured); valid
 * until the address leaves the directory. For manual control and tests. */
RESIL_API resil_breaker *resil_directory_breaker(
    resil_directory *d, const char *address);

/*
 * Warm-up (Dubbo): the weight an endpoint of weight w has at uptime ticks
 * into a warm-up of warmup ticks: for uptime < warmup,
 * min(w, max(1, floor(uptime * w / warmup))); w otherwise. Weight 0 stays 0.
 * now < start (a start in the future) gives 1.
 */
RESIL_API int32_t resil_warmup_weight(
    int32_t w, uint64_t start, uint64_t warmup, uint64_t now);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_DIRECTORY_H */

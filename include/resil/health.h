/*
 * resil health: active health checks driven by the caller, as Envoy's
 * health checker decides them. A checker holds a set of targets
 * (addresses); it says which one to probe and when, the caller runs the
 * probe (a TCP connect, an HTTP GET, a ping) on its own loop and reports
 * the result, and the checker moves each target between HEALTHY and
 * UNHEALTHY by consecutive results:
 *
 *   resil_health_next(hc, now, &step)
 *     PROBE(address, probe id, deadline)  start that probe now, then ask
 *                                         again (more may be due)
 *     WAIT(until)                          nothing due: ask again at until
 *                                         (or after a report / an add)
 *   resil_health_report(hc, probe id, OK | FAILED | TIMEOUT | DOWN, now)
 *
 * Nothing sleeps, reads a clock or starts a thread: every function takes
 * the caller's reading now, in ticks of the caller's clock (nanoseconds
 * for the system clock; docs/async.md's machine style). A probe that is
 * not reported by its deadline has timed out: the first resil_health_next()
 * at or after deadline + 1 records it as a timeout at deadline + 1 and
 * its late report is refused with RESIL_E_NOTFOUND.
 *
 * The rules (Envoy's, docs/health.md):
 * - A new target is UNHEALTHY until its first probe passes, which makes it
 *   HEALTHY at once (Envoy's first check), unless initial_healthy is set.
 *   Its first probe is due at once, or after a draw of initial_jitter.
 * - A HEALTHY target becomes UNHEALTHY after unhealthy_threshold
 *   consecutive FAILED or TIMEOUT results, or at once on DOWN (the target
 *   itself says it is down: Envoy's non-retriable active failure).
 * - An UNHEALTHY target becomes HEALTHY after healthy_threshold
 *   consecutive OK results.
 * - The next probe is due interval ticks after a result that left a
 *   HEALTHY target steady; healthy_edge_interval while an UNHEALTHY one
 *   is passing towards HEALTHY; unhealthy_interval after a failure that
 *   made or kept the target UNHEALTHY; unhealthy_edge_interval while a
 *   HEALTHY one is failing towards UNHEALTHY. To each, jitter is added:
 *   floor(u * (interval_jitter_pct * base / 100)) then
 *   floor(u * interval_jitter_ns), one draw each, in that order, a term of
 *   0 drawing nothing; at least 1 tick.
 *
 * Transitions are events (a listener) and a query:
 * resil_health_is_healthy(). A directory given a health config
 * (resil_directory_config.health) owns a checker whose targets are its
 * endpoints and keeps an UNHEALTHY endpoint out of the candidates
 * (docs/health.md, "In the directory").
 *
 * Thread safety: every function except new and free may be called from
 * any thread at any time (one spin lock per checker, held for a few
 * loads and stores, never across a callback); new and free must not
 * overlap any other call on the same checker. The listener runs on the
 * thread whose call made the transition, with no lock held: it may call
 * the checker (is_healthy, get_state, even add or remove). The config
 * functions touch only their arguments.
 */
#ifndef RESIL_HEALTH_H
#define RESIL_HEALTH_H

#include <resil/clock.h>
#include <resil/resil.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_health resil_health;

/* Bytes of an address, with its NUL: longer addresses are refused. */
#define RESIL_HEALTH_ADDRESS_MAX 320
/* Targets a checker holds at most. */
#define RESIL_HEALTH_TARGETS_MAX (1u << 20)

/* What a probe found. */
typedef enum resil_probe_result {
	RESIL_PROBE_OK = 0,      /* it passed */
	RESIL_PROBE_FAILED = 1,  /* it failed (refused, reset, a bad answer) */
	RESIL_PROBE_TIMEOUT = 2, /* the caller's own timeout */
	RESIL_PROBE_DOWN = 3     /* the target says it is down (an HTTP 503):
	                          * UNHEALTHY at once, whatever the threshold */
} resil_probe_result;

/* "ok", "failed", "timeout", "down" or "unknown". */
RESIL_API const char *resil_probe_result_name(resil_probe_result r);

typedef enum resil_health_event_type {
	RESIL_HEALTH_BECAME_HEALTHY = 0,
	RESIL_HEALTH_BECAME_UNHEALTHY = 1
} resil_health_event_type;

/* "HEALTHY" or "UNHEALTHY" (the state entered), or "UNKNOWN". */
RESIL_API const char *resil_health_event_name(resil_health_event_type t);

typedef struct resil_health_event {
	resil_health_event_type type;
	const char *address; /* valid during the call only */
	void *user;          /* the target's, as given to add */
	uint64_t time;       /* the report's now, or deadline + 1 */
	resil_probe_result result; /* the result that decided it */
	uint32_t count;      /* consecutive results of that kind, this one
	                      * included (1 for DOWN and a first check) */
	int first_check;     /* 1: the target's first probe (Envoy's
	                      * "first check" that makes it healthy) */
} resil_health_event;

typedef void (*resil_health_listener_fn)(
    const resil_health_event *ev, void *ctx);

typedef struct resil_health_config {
	size_t size;             /* sizeof(resil_health_config), by _init() */
	uint64_t interval_ns;    /* default 5 s; >= 1 */
	uint64_t timeout_ns;     /* default 1 s; >= 1 */
	/* Envoy's intervals for the other cases; 0 (the default): as
	 * Envoy, unhealthy_interval is interval, unhealthy_edge_interval is
	 * unhealthy_interval and healthy_edge_interval is interval. */
	uint64_t unhealthy_interval_ns;
	uint64_t unhealthy_edge_interval_ns;
	uint64_t healthy_edge_interval_ns;
	uint32_t interval_jitter_pct; /* 0..100; default 0 */
	uint64_t interval_jitter_ns;  /* default 0 */
	uint64_t initial_jitter_ns;   /* first probe within [0, this); 0 */
	uint32_t unhealthy_threshold; /* default 3; >= 1 */
	uint32_t healthy_threshold;   /* default 2; >= 1 */
	int initial_healthy;          /* 0 (default): UNHEALTHY until the
	                               * first probe passes */
	/* Jitter draws; NULL: a generator of the checker's own, seeded with
	 * seed (default 0x5EED). *random is copied; its ctx must outlive
	 * the checker. */
	const resil_random *random;
	uint64_t seed;
	resil_health_listener_fn listener; /* NULL: none */
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_health_config;

static inline void
resil_health_config_init(resil_health_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->interval_ns = 5 * RESIL_NS_PER_SEC;
	cfg->timeout_ns = RESIL_NS_PER_SEC;
	cfg->unhealthy_threshold = 3;
	cfg->healthy_threshold = 2;
	cfg->seed = 0x5EED;
}

static inline resil_health_config
resil_health_config_default(void)
{
	resil_health_config cfg;

	resil_health_config_init(&cfg);
	return cfg;
}

/*
 * Apply one setting of configuration text (docs/health.md): health.interval,
 * health.timeout, health.unhealthy_interval, health.unhealthy_edge_interval,
 * health.healthy_edge_interval, health.interval_jitter,
 * health.initial_jitter (durations; a bare number is milliseconds),
 * health.interval_jitter_percent (0..100), health.unhealthy_threshold,
 * health.healthy_threshold (>= 1), health.initial (healthy or unhealthy),
 * health.seed. RESIL_OK; RESIL_E_INVAL for NULL, an unknown key or a bad
 * value, with a message naming the key, *cfg unchanged.
 */
RESIL_API resil_err resil_health_config_set(resil_health_config *cfg,
    const char *key, const char *value, resil_diag *diag);

/* RESIL_OK, or RESIL_E_INVAL naming the field in *diag
 * (`health.unhealthy_threshold: 0 must be >= 1`). */
RESIL_API resil_err resil_health_config_validate(
    const resil_health_config *cfg, resil_diag *diag);

/*
 * Create a checker with no target. *cfg, *cfg->random and *cfg->alloc are
 * copied; their ctx pointers and the listener's must outlive the checker.
 * Free it with resil_health_free(). RESIL_OK; RESIL_E_INVAL (message in
 * *diag); RESIL_E_NOMEM. *out is unchanged on error.
 */
RESIL_API resil_err resil_health_new(
    resil_health **out, const resil_health_config *cfg, resil_diag *diag);

/* Release hc and its targets. NULL is a harmless no-op. */
RESIL_API void resil_health_free(resil_health *hc);

/*
 * Add a target (address copied; user is the caller's, handed back in each
 * step and event). Its first probe is due at now (plus the initial
 * jitter). RESIL_OK; RESIL_E_INVAL for NULL, an empty address, one of
 * RESIL_HEALTH_ADDRESS_MAX bytes or more, or one already present (named
 * in *diag), nothing changed; RESIL_E_LIMITED at RESIL_HEALTH_TARGETS_MAX
 * targets; RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_health_add(resil_health *hc, const char *address,
    void *user, uint64_t now, resil_diag *diag);

/* Remove a target (a probe of it still out is forgotten: its report will
 * be refused). RESIL_OK; RESIL_E_NOTFOUND; RESIL_E_INVAL for NULL. */
RESIL_API resil_err resil_health_remove(
    resil_health *hc, const char *address);

/* Number of targets. 0 for NULL. */
RESIL_API size_t resil_health_count(resil_health *hc);

typedef enum resil_health_action {
	RESIL_HEALTH_PROBE = 0,
	RESIL_HEALTH_WAIT = 1
} resil_health_action;

typedef struct resil_health_step {
	resil_health_action action;
	uint64_t probe;    /* PROBE: the id to report under */
	uint64_t deadline; /* PROBE: answer by this reading (now + timeout) */
	uint64_t until;    /* WAIT: ask again at this reading; UINT64_MAX:
	                    * nothing scheduled (no target) */
	void *user;        /* PROBE: the target's user pointer */
	char address[RESIL_HEALTH_ADDRESS_MAX]; /* PROBE: the target, copied
	                                         * (yours to keep) */
} resil_health_step;

/*
 * What to do at now: first records every probe whose deadline has passed
 * (deadline + 1 <= now) as a timeout, then answers PROBE for the target
 * whose probe is most overdue (ties in the order the targets were added),
 * or WAIT until the next due probe or deadline. Call it again after each
 * PROBE: several may be due at once. Allocates nothing.
 * RESIL_OK; RESIL_E_INVAL for NULL.
 */
RESIL_API resil_err resil_health_next(
    resil_health *hc, uint64_t now, resil_health_step *step);

/*
 * Report probe's result at now (a reading at or before its deadline:
 * after it the probe has timed out, whether or not resil_health_next()
 * noticed yet). Schedules the target's next probe.
 * RESIL_OK; RESIL_E_NOTFOUND for a probe that is not out (already
 * reported, timed out, of a removed target, never handed out): nothing
 * changes; RESIL_E_INVAL for NULL or an unknown result.
 */
RESIL_API resil_err resil_health_report(resil_health *hc, uint64_t probe,
    resil_probe_result result, uint64_t now);

/* 1 if address is a HEALTHY target, 0 if it is UNHEALTHY or not a target
 * (or for NULL). */
RESIL_API int resil_health_is_healthy(resil_health *hc, const char *address);

typedef struct resil_health_target_state {
	int healthy;
	int probing;            /* a probe is out */
	int first_check;        /* no result yet */
	uint32_t successes;     /* consecutive OK while UNHEALTHY */
	uint32_t failures;      /* consecutive failures while HEALTHY */
	uint64_t next_at;       /* probing: the deadline; else the next due */
	uint64_t probes;        /* handed out for this target */
} resil_health_target_state;

/* RESIL_OK; RESIL_E_NOTFOUND; RESIL_E_INVAL for NULL. */
RESIL_API resil_err resil_health_get_state(resil_health *hc,
    const char *address, resil_health_target_state *out);

typedef struct resil_health_metrics {
	uint64_t probes;    /* handed out */
	uint64_t ok, failed, timeouts, down; /* results recorded (timeouts
	                                      * include the checker's own) */
	uint64_t refused;   /* reports refused with RESIL_E_NOTFOUND */
	uint64_t became_healthy, became_unhealthy;
	size_t targets, healthy;
} resil_health_metrics;

/* RESIL_OK, or RESIL_E_INVAL for NULL. */
RESIL_API resil_err resil_health_get_metrics(
    resil_health *hc, resil_health_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_HEALTH_H */

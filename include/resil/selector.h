/*
 * resil selector: turns "call the service" into "call this endpoint". It
 * runs the router chain (router.h) over a directory's snapshot and the
 * method's load balancer (balance.h) over what is left, and takes each
 * call's outcome back into the endpoint's state: calls in flight, latency,
 * outlier detection and the endpoint's breaker.
 *
 * A cluster strategy (failover and the others, built on top) asks
 *   resil_selector_route()   "the candidates for this request, now";
 *   resil_selector_pick()    "one of them, excluding these";
 *   resil_selector_report()  "this is how the call went".
 * An empty candidate set is RESIL_E_NO_PROVIDER with Dubbo's message in
 * *diag: `Failed to invoke the method M in the service S. No provider
 * available for the service S: 8 endpoints, 0 after routers (tag=canary
 * removed 4, zone=hz removed 4)` (stages in chain order, only those that
 * removed something; an empty directory: `...: 0 endpoints. Please check
 * if the providers have been started and registered.`).
 *
 * The text keys (loadbalance=, router.zone=, router.condition=, outlier.*,
 * panic.threshold, <method>.loadbalance=, ...) are parsed by
 * resil_cluster_text_set(); see docs/cluster.md for the table.
 *
 * Thread safety: route, pick, report and release may run concurrently on
 * one selector from any number of threads, with directory updates going on;
 * a resil_candidates belongs to one thread at a time. new and free must
 * not overlap any other call on the same selector. A resil_cluster_text
 * is not thread-safe.
 */
#ifndef RESIL_SELECTOR_H
#define RESIL_SELECTOR_H

#include <resil/balance.h>
#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/router.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_selector resil_selector;
typedef struct resil_candidates resil_candidates;

/* A balancer for one method, overriding the service's. */
typedef struct resil_method_balance {
	const char *method;
	resil_balance_config balance;
} resil_method_balance;

typedef struct resil_selector_config {
	size_t size; /* sizeof(resil_selector_config), set by _init() */
	const char *service;          /* for messages; NULL: "" */
	resil_balance_config balance; /* every method without an override */
	const resil_method_balance *methods;
	size_t nmethods;
	/* Zone affinity. NULL local_zone: no zone routing. */
	const char *local_zone;
	resil_zone_mode zone_mode;      /* default PREFER */
	uint32_t zone_min_cluster_size; /* PROPORTIONAL: default 6 */
	const char *const *zone_names;  /* PROPORTIONAL: consumers per zone */
	const uint32_t *zone_consumers;
	size_t nzones;
	int tag_force;
	/* Condition rules, applied in order; borrowed: they must outlive
	 * the selector. */
	resil_condition *const *conditions;
	size_t nconditions;
	uint32_t panic_threshold_pct; /* default 50; 0: no panic; 0..100 */
	/* Random draws (balancers, PROPORTIONAL), called for each draw;
	 * NULL: the selector's own resil_rng, seeded with seed, which each
	 * candidate set draws from 64 draws at a time with no atomic a draw
	 * (docs/cluster.md, "Balancers"). */
	const resil_random *random;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	/* The seed of the selector's own generator (used when random is
	 * NULL): the same seed gives the same picks, so a run replays.
	 * Default RESIL_SELECTOR_SEED; text: loadbalance.seed. */
	uint64_t seed;
} resil_selector_config;

/* The default seed of a selector's own generator. */
#define RESIL_SELECTOR_SEED UINT64_C(0x5eed)

static inline void
resil_selector_config_init(resil_selector_config *c)
{
	memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	resil_balance_config_init(&c->balance);
	c->zone_mode = RESIL_ZONE_PREFER;
	c->zone_min_cluster_size = 6;
	c->panic_threshold_pct = 50;
	c->seed = RESIL_SELECTOR_SEED;
}

static inline resil_selector_config
resil_selector_config_default(void)
{
	resil_selector_config c;

	resil_selector_config_init(&c);
	return c;
}

RESIL_API resil_err resil_selector_config_validate(
    const resil_selector_config *cfg, resil_diag *diag);

/*
 * A selector over dir, which must outlive it. *cfg and its strings,
 * methods and zones are copied; *cfg->random is copied (its ctx must
 * outlive the selector); the conditions are borrowed. Returns RESIL_OK,
 * RESIL_E_INVAL (message in *diag) or RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_selector_new(resil_selector **out,
    resil_directory *dir, const resil_selector_config *cfg, resil_diag *diag);

RESIL_API void resil_selector_free(resil_selector *sel);

/* A reusable candidate set for sel; grows to the directory's size and
 * then allocates nothing more. Free it before sel. */
RESIL_API resil_err resil_candidates_new(
    resil_candidates **out, resil_selector *sel);
RESIL_API void resil_candidates_free(resil_candidates *c);

/* Drop the snapshot c refers to (route() does this itself). */
RESIL_API void resil_candidates_clear(resil_candidates *c);

/*
 * Route req (NULL: no method, no tag, no arguments) over the current
 * snapshot into c. Returns RESIL_OK with at least one candidate;
 * RESIL_E_NO_PROVIDER ("Failed to invoke the method M ... No provider
 * available ...", in *diag) when none is left; RESIL_E_INVAL for a request
 * whose args or params is NULL with a count above 0 ("request: args is NULL
 * with nargs 1"; a hash pick refuses it too, the other balancers do not read
 * req); RESIL_E_NOMEM when c had to grow and could not.
 */
RESIL_API resil_err resil_selector_route(resil_selector *sel,
    const resil_request *req, resil_candidates *c, resil_diag *diag);

/* What the routers did, for the last route() into c. */
typedef struct resil_route_stats {
	size_t endpoints;  /* non-mock endpoints in the snapshot */
	size_t candidates; /* left at the end */
	size_t removed_tag;
	size_t removed_condition; /* by all rules */
	size_t removed_health;
	size_t removed_zone;
	int panic;        /* the panic rule used every routed endpoint */
	uint64_t version; /* the snapshot's */
} resil_route_stats;

RESIL_API void resil_candidates_stats(
    const resil_candidates *c, resil_route_stats *out);

RESIL_API size_t resil_candidates_count(const resil_candidates *c);

/* Candidate i of the last route(); strings valid until c is routed again,
 * cleared or freed. */
typedef struct resil_candidate {
	const char *address;
	const char *zone;
	const char *tag;
	int32_t weight; /* after warm-up */
	uint64_t id;    /* the endpoint's, for exclusion */
	void *user;
} resil_candidate;

RESIL_API resil_err resil_candidates_get(
    const resil_candidates *c, size_t i, resil_candidate *out);

/*
 * One chosen endpoint. address stays valid until the pick is reported or
 * released; the other fields are plain values. The rest is private.
 */
typedef struct resil_pick {
	const char *address;
	uint64_t id;
	void *user;
	uint64_t start;   /* clock reading at the pick */
	const char *zone; /* the endpoint's zone, or NULL; valid while the
	                   * candidate set it was picked from is not routed
	                   * again, cleared or freed */
	/* private */
	void *ep_;
	resil_permit permit_;
	/* 1: the breaker's; 2: the endpoint's fleet's (local); 3: its
	 * fleet's probe lease (episode and slot in permit_) */
	int has_permit_;
	uint64_t tau_, slide_;
	unsigned kind_;
} resil_pick;

/*
 * Choose one of c's candidates for req, with the balancer of the method c
 * was routed for (req gives the arguments a hash balancer reads; pass the
 * request that was routed), leaving out the endpoints whose
 * ids are in exclude[0..nexclude). The endpoint's active count grows by
 * one and, when it has a breaker, a permit is acquired (an endpoint whose
 * breaker refuses is passed over). Every pick must end in exactly one
 * resil_selector_report() or resil_selector_release(). Returns RESIL_OK;
 * RESIL_E_UNAVAILABLE when every candidate is excluded or refused ("all 3
 * candidates excluded" in *diag); RESIL_E_INVAL for a hash argument index
 * the request does not have ("loadbalance.hash.arguments: index 2 is out
 * of range for method m with 1 argument"); RESIL_E_MISUSE for an empty c.
 */
RESIL_API resil_err resil_selector_pick(resil_selector *sel,
    resil_candidates *c, const resil_request *req, const uint64_t *exclude,
    size_t nexclude, resil_pick *out, resil_diag *diag);

/*
 * resil_selector_pick() restricted by zone: with in_zone nonzero only the
 * candidates whose zone is zone, else only those whose zone is not zone
 * (no zone counts as another zone). RESIL_E_UNAVAILABLE when none is
 * left ("no candidate in zone hz" / "no candidate outside zone hz").
 * zone NULL: resil_selector_pick().
 */
RESIL_API resil_err resil_selector_pick_zone(resil_selector *sel,
    resil_candidates *c, const resil_request *req, const uint64_t *exclude,
    size_t nexclude, const char *zone, int in_zone, resil_pick *out,
    resil_diag *diag);

/* RESIL_OK when every (non-mock) endpoint of the directory now has a
 * zone; RESIL_E_INVAL "endpoint e0:1 has no zone" naming the first that
 * has none. */
RESIL_API resil_err resil_selector_check_zones(
    resil_selector *sel, resil_diag *diag);

/*
 * Dubbo's mock:// providers: the mock spec of the first mock endpoint in
 * directory order that has one, its "<method>.mock" attribute, else its
 * "mock" attribute (params "mock=return 5"). Copied into buf (len bytes
 * with the NUL, cut when longer); returns 1, or 0 when none has one.
 */
RESIL_API int resil_selector_mock_spec(
    resil_selector *sel, const char *method, char *buf, size_t len);

/* How many of c's candidates are in zone (in_zone nonzero) or not. */
RESIL_API size_t resil_candidates_count_zone(
    const resil_candidates *c, const char *zone, int in_zone);

/*
 * Pick candidate i of c itself, without the balancer (broadcast goes
 * through them in order). RESIL_E_UNAVAILABLE when its breaker refuses;
 * RESIL_E_INVAL for i out of range. Ends in report or release as any
 * pick.
 */
RESIL_API resil_err resil_selector_pick_at(resil_selector *sel,
    resil_candidates *c, size_t i, resil_pick *out, resil_diag *diag);

/* The outcome of a picked call; its duration is now - pick->start on the
 * directory's clock (report_duration: as given). Returns RESIL_OK;
 * RESIL_E_MISUSE for a pick already reported or released; RESIL_E_INVAL
 * for a NULL argument or an outcome that is not one of the four, which
 * changes nothing (the pick stays open for its real report). */
RESIL_API resil_err resil_selector_report(
    resil_selector *sel, resil_pick *pick, resil_outcome outcome);
RESIL_API resil_err resil_selector_report_duration(resil_selector *sel,
    resil_pick *pick, resil_outcome outcome, uint64_t duration);

/* The call was never made: undo the pick (its permit is given back). */
RESIL_API resil_err resil_selector_release(
    resil_selector *sel, resil_pick *pick);

/*
 * Replace the selector's own condition rules at run time (an operator's
 * change, a reload): routes that start after the call use rules[0..n)
 * in order (n 0: none), then the rules a registry source gave (a
 * registry's rules replace only the registry's previous set, never
 * these); a route in progress finishes with the rules it
 * started with. On success the selector owns the rules (and frees each
 * with resil_condition_free() once no route can see it, at the latest in
 * resil_selector_free()); the array itself is copied. The rules given in
 * resil_selector_config stay borrowed. Each rule keeps its own force flag.
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL selector, array or rule
 * ("router.condition[1]: NULL"); RESIL_E_NOMEM. On error nothing changes
 * and the caller still owns the rules. May run concurrently with routes,
 * picks, reports and other replacements.
 */
RESIL_API resil_err resil_selector_set_conditions(resil_selector *sel,
    resil_condition *const *rules, size_t n, resil_diag *diag);

/*
 * Replace the tag rule (router.h: Dubbo 3's APP.tag-router; NULL: none,
 * static tags only) as resil_selector_set_conditions() replaces rules:
 * on success the selector owns rule (freed once no route can see it);
 * the condition rules stay. Returns RESIL_OK; RESIL_E_INVAL for a NULL
 * selector; RESIL_E_NOMEM, when nothing changes and the caller still
 * owns rule.
 */
RESIL_API resil_err resil_selector_set_tag_rule(
    resil_selector *sel, resil_tag_rule *rule, resil_diag *diag);

/* The number of condition rules routes use now (0 for NULL). */
RESIL_API size_t resil_selector_condition_count(resil_selector *sel);

/* ---- configuration text ------------------------------------------------
 *
 * resil_cluster_text holds the cluster keys of a configuration text and
 * owns every string and parsed rule. resil_cluster_text_set() checks one
 * key=value (an error is "origin:line: key: message" in *diag, without
 * origin:line when origin is NULL); resil_cluster_text_finish() runs the
 * cross-field checks, and names the origin given to the first set and
 * the line of the last key involved (an outlier key, a method's
 * balancer key) when set was given one. The selector and directory configs it
 * gives point into it and stay valid until the next set or free.
 */
typedef struct resil_cluster_text resil_cluster_text;

RESIL_API resil_err resil_cluster_text_new(
    resil_cluster_text **out, const resil_allocator *alloc);
RESIL_API void resil_cluster_text_free(resil_cluster_text *cc);

/* RESIL_OK; RESIL_E_NOTFOUND for a key that is not a cluster key (so a
 * caller can try other parsers; the message says "unknown key");
 * RESIL_E_INVAL for a bad value; RESIL_E_NOMEM. */
RESIL_API resil_err resil_cluster_text_set(resil_cluster_text *cc,
    const char *key, const char *value, const char *origin, unsigned line,
    resil_diag *diag);

/* Cross-field checks (outlier.max_ejection below its base, ...). */
RESIL_API resil_err resil_cluster_text_finish(
    resil_cluster_text *cc, resil_diag *diag);

/* Fill *out from cc (service, balancers, routers, panic); random and
 * alloc are left NULL for the caller. */
RESIL_API void resil_cluster_text_selector(
    const resil_cluster_text *cc, resil_selector_config *out);

/* Overwrite the outlier settings (outlier, outlier_rate: NULL without an
 * outlier.success_rate_* / failure_percentage_* key) and the empty
 * protection of *out with cc's; health, endpoint_breaker and endpoints
 * (url=) only when cc has their keys (health.enabled=false and
 * endpoint.breaker.enabled=false set them to NULL), else the caller's
 * stay. A field beyond out->size is left alone. The pointers point into
 * cc. */
RESIL_API void resil_cluster_text_directory(
    const resil_cluster_text *cc, resil_directory_config *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_SELECTOR_H */

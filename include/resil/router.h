/*
 * resil router: what a call asks for (resil_request), Dubbo's condition
 * rules, and the settings of the router chain.
 *
 * The chain runs in this fixed order, each stage counting what it removed:
 * the directory minus mock endpoints -> tag router -> condition rules, in
 * the order given -> health filter (ejected endpoints, and endpoints whose
 * own breaker would refuse; a HALF_OPEN one stays) -> panic rule -> zone
 * affinity. The selector (selector.h) runs it.
 *
 * Tag router (static tags): a request tag T selects the endpoints tagged T,
 * or, when none is, the untagged ones (none with tag_force); an untagged
 * request selects untagged endpoints only.
 *
 * Condition rules follow Dubbo: `[when] => [then]`, each side conditions
 * joined by `&`, a condition `key = v1,v2` (matches one of) or
 * `key != v1,v2` (matches none of); a value ending in `*` matches by
 * prefix and `*` alone matches anything present. The WHEN side reads the
 * request: `method`, `arguments[i]`, `tag`, `zone` (the consumer's local
 * zone) and the request's params; a key missing there does not match (as
 * in Dubbo, a path after `arguments[i]`, `arguments[10].inner`, is
 * accepted and ignored: argument i is read whole). An
 * empty WHEN matches every request. The THEN side reads each endpoint:
 * `address`, `host`, `port`, `zone`, `tag` and its params; a key missing
 * on an endpoint excludes it. When nothing matches the THEN side the set
 * is unchanged (empty with force); an empty THEN excludes everything
 * (Dubbo's blocklist). As in Dubbo, a WHEN of `true` is an empty WHEN
 * and a THEN of `false` an empty THEN (`true => host = h`, `host = h =>
 * false`).
 *
 * Panic: when 100 * healthy / routed < panic_threshold (strictly), every
 * routed candidate is used (ejected and breaker-refused included) and zone
 * affinity is skipped; 0 disables panic.
 *
 * Zone affinity: PREFER uses the local zone's candidates, or all when it
 * has none; STRICT gives "no provider" instead; no local zone configured:
 * no zone routing. PROPORTIONAL is Envoy's zone-aware routing: see
 * docs/cluster.md.
 *
 * Thread safety: a parsed rule is immutable and may be matched from any
 * number of threads; parse and free are not concurrent with its use.
 */
#ifndef RESIL_ROUTER_H
#define RESIL_ROUTER_H

#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_param {
	const char *key;
	const char *value;
} resil_param;

/* What a call asks for. Everything may be NULL/0. */
typedef struct resil_request {
	const char *method;      /* NULL: "" */
	const char *const *args; /* the call's arguments as text */
	size_t nargs;
	const char *tag;           /* request tag; NULL or "": untagged */
	const resil_param *params; /* consumer attributes for WHEN */
	size_t nparams;
	/* Nonzero: this request's tag is forced (Dubbo's dubbo.force.tag):
	 * no endpoint tagged with it gives no candidate, as with the
	 * selector's tag_force; 0: the selector's setting. */
	int tag_force;
} resil_request;

typedef enum resil_zone_mode {
	RESIL_ZONE_OFF = 0,
	RESIL_ZONE_PREFER = 1,
	RESIL_ZONE_STRICT = 2,
	RESIL_ZONE_PROPORTIONAL = 3
} resil_zone_mode;

/* "off", "prefer", "strict", "proportional" or "unknown". */
RESIL_API const char *resil_zone_mode_name(resil_zone_mode m);

typedef struct resil_condition resil_condition;

/*
 * Parse one condition rule. text and *alloc (NULL: malloc() and free())
 * are copied: both may live on the stack; the allocator's ctx must
 * outlive the rule (a rule given to resil_selector_set_conditions() lives
 * as long as the selector keeps it). On error, RESIL_E_INVAL with the
 * column (1-based, in text) in *diag: `condition "method = => x" at
 * column 10: expected a value after '='`. The caller frees *out with
 * resil_condition_free(). RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_condition_parse(resil_condition **out,
    const char *text, int force, const resil_allocator *alloc,
    resil_diag *diag);

RESIL_API void resil_condition_free(resil_condition *c);

/* The rule's text as given. */
RESIL_API const char *resil_condition_text(const resil_condition *c);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_ROUTER_H */

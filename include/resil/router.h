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
 * An endpoint may carry several tags: its tag is then a comma list
 * (`gray,canary`), and a request tag selects it when it is one of them.
 * A tag rule (resil_tag_rule, Dubbo 3's `APP.tag-router`, given by a
 * registry with resil_selector_set_tag_rule()) tags endpoints by address
 * or by their params without restarting them; while it is enabled the tag
 * router is Dubbo's TagStateRouter (docs/cluster.md, "Tag rules").
 *
 * Before the tag router, an endpoint whose params have `methods` (the
 * methods a Dubbo provider exports, a comma list; `*` any) is no
 * candidate for a method not in it.
 *
 * Condition rules follow Dubbo: `[when] => [then]`, each side conditions
 * joined by `&`, a condition `key = v1,v2` (matches one of) or
 * `key != v1,v2` (matches none of); a value ending in `*` matches by
 * prefix and `*` alone matches anything present; a range `1~100` (both
 * ends included), `~100` or `100~` matches a whole number in it (a value
 * that is not a number matches no range). The WHEN side reads the
 * request: `method` or `methods` (the invoked method), `arguments[i]`,
 * `attachments[key]` (the request's params, which carry the call's
 * attachments), `tag`, `zone` (the consumer's local
 * zone) and the request's params; a key missing there does not match (as
 * in Dubbo, a path after `arguments[i]`, `arguments[10].inner`, is
 * accepted and ignored: argument i is read whole). An
 * empty WHEN matches every request. The THEN side reads each endpoint:
 * `address`, `host`, `port`, `zone`, `tag` and its params; a key missing
 * on an endpoint excludes it. `tag` and `methods` there are comma lists:
 * `tag = gray` holds when gray is one of the endpoint's tags, `methods =
 * getStock` when the provider exports getStock. A THEN value `$key` is
 * the request's value of key, read as the WHEN side reads it (`host =
 * $host` keeps the endpoints on the host the request's param `host`
 * names; `methods = $method` those exporting the invoked method); a key
 * the request lacks matches nothing. When nothing matches the THEN side the
 * set is unchanged (empty with force); an empty THEN excludes everything
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

/* ---- Dubbo 3's rules from a config center (YAML) ----------------------
 *
 * What a rule's YAML says besides its rules. */
typedef struct resil_rule_info {
	int enabled;  /* `enabled`, default 1 */
	int force;    /* `force`, default 0 */
	int runtime;  /* `runtime`, default 1 (read, not used: resil
	               * routes every call) */
	int priority; /* `priority`, default 0 */
	int scope;    /* 0 `service` (the default), 1 `application` */
	char key[128];
	char config_version[16];
} resil_rule_info;

/*
 * Parse a condition rule as Dubbo 3 stores it (`SERVICE.condition-router`:
 * `configVersion`, `scope`, `key`, `enabled`, `force`, `runtime`,
 * `priority`, `conditions` a list of rule texts) into *n rules in *out,
 * an array of *n (free it with resil_conditions_free()). Each rule is
 * what resil_condition_parse() makes of its text with the YAML's force.
 * name names the rule in messages (NULL: "rule"). enabled: false gives
 * RESIL_OK with no rule and info->enabled 0. *info (may be NULL) gets the
 * rest. RESIL_E_INVAL with the reason in *diag (`rule "x": line 3 column
 * 5: ...`, or the condition's own message) for YAML that does not parse,
 * an unknown or mistyped field, no conditions, or a condition that does
 * not parse; RESIL_E_NOMEM. On error *out and *n are unchanged. *alloc
 * is copied (its ctx must outlive the rules).
 */
RESIL_API resil_err resil_condition_parse_yaml(resil_condition ***out,
    size_t *n, const char *yaml, const char *name,
    const resil_allocator *alloc, resil_rule_info *info, resil_diag *diag);

/* Free the n rules of rules and the array (from resil_condition_parse_yaml,
 * with the same alloc). NULL is a no-op. */
RESIL_API void resil_conditions_free(
    resil_condition **rules, size_t n, const resil_allocator *alloc);

typedef struct resil_tag_rule resil_tag_rule;

/*
 * Parse a tag rule as Dubbo 3 stores it (`APP.tag-router`:
 * `configVersion`, `key`, `enabled`, `force`, `runtime`, `priority`,
 * `tags`, a list of `name`, `addresses` (`ip:port`, `ip` any port,
 * `0.0.0.0:port` any host, `*` in an ip as a wildcard) and `match` (a
 * list of `key` and `value` with one of `exact`, `prefix`, `wildcard`,
 * `empty`, `noempty`; `regex` is refused)). Errors as
 * resil_condition_parse_yaml(); a tag without a name, or given twice, is
 * refused. Free *out with resil_tag_rule_free().
 */
RESIL_API resil_err resil_tag_rule_parse_yaml(resil_tag_rule **out,
    const char *yaml, const char *name, const resil_allocator *alloc,
    resil_rule_info *info, resil_diag *diag);

RESIL_API void resil_tag_rule_free(resil_tag_rule *r);

/* The number of tags of r (0 for NULL). */
RESIL_API size_t resil_tag_rule_count(const resil_tag_rule *r);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_ROUTER_H */

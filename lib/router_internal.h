/*
 * Private: the routers' room (lib/router.c). The router chain over a
 * directory snapshot into a view (lib/directory_internal.h); the selector
 * above runs it. Never installed.
 */
#ifndef RESIL_ROUTER_INTERNAL_H
#define RESIL_ROUTER_INTERNAL_H

#include <resil/router.h>
#include <resil/selector.h>

#include "directory_internal.h"

/* Dubbo's StringMatch kinds of a tag rule's `match` items. */
#define RESIL__SM_EXACT 0
#define RESIL__SM_PREFIX 1
#define RESIL__SM_WILDCARD 2 /* '*' anywhere: a glob */
#define RESIL__SM_EMPTY 3
#define RESIL__SM_NOEMPTY 4

typedef struct resil__param_match {
	char *key;
	int kind;
	char *value; /* NULL for EMPTY and NOEMPTY */
} resil__param_match;

/* One tag of a tag rule: its endpoints are those at one of addresses and
 * those whose parameters satisfy every item of match (when it has any). */
typedef struct resil__tag {
	char *name;
	char **addrs;
	size_t naddrs;
	resil__param_match *match;
	size_t nmatch;
} resil__tag;

/* A parsed tag rule (Dubbo 3's TagRouterRule; lib/router_yaml.c parses
 * it, lib/router.c routes with it). Immutable once parsed. */
struct resil_tag_rule {
	resil_allocator a; /* a copy, as a condition's */
	int enabled, force, runtime, priority;
	char *key;
	char *text; /* the YAML as given */
	resil__tag *tags;
	size_t ntags;
};

typedef struct resil__route_cfg {
	const char *local_zone;
	resil_zone_mode zone_mode;
	size_t zone_min;
	const char *const *zone_names; /* PROPORTIONAL: consumer shares */
	const uint32_t *zone_consumers;
	size_t nzones;
	int tag_force;
	resil_condition *const *conds;
	size_t nconds;
	uint32_t panic;
	/* The registry's tag rule; NULL (or disabled): static tags only. */
	const resil_tag_rule *tag_rule;
} resil__route_cfg;

typedef struct resil__route_stats {
	size_t endpoints; /* non-mock */
	size_t removed_method; /* a provider not exporting the method */
	size_t removed_tag;
	size_t removed_condition;
	size_t first_condition; /* 1-based rule that removed first; 0 none */
	size_t routed;          /* after tag and conditions */
	size_t removed_health;
	size_t removed_zone;
	int panic;
	int zone_known;
	const char *zone_used;
} resil__route_stats;

/* Route snapshot s for req into v (v->idx, v->w, v->cum of capacity
 * s->n; keep: s->n bytes of scratch). */
resil_err resil__route(const resil__route_cfg *cfg, resil__snapshot *s,
    const resil_request *req, uint64_t now, const resil_random *rnd,
    resil__view *v, unsigned char *keep, resil__route_stats *st);

/* The "No provider available ..." message. */
void resil__no_provider(const resil__route_cfg *cfg, const char *service,
    const resil_request *req, const resil__route_stats *st, resil_diag *diag);

/* The balancer of the method c was last routed for (lib/selector.c; the
 * service's when c was never routed), for Dubbo's failfast message. */
resil_lb_kind resil__candidates_lb_kind(const resil_candidates *c);

/* The selector's allocator (a copy it keeps for its life): what rules
 * handed to resil_selector_set_conditions() by a reload or a registry
 * source are parsed with, so that nothing the selector frees belongs to
 * an object that may be gone by then. */
const resil_allocator *resil__selector_alloc(const resil_selector *sel);
/* Issue 40: the directory sel routes over. */
resil_directory *resil__selector_dir(const resil_selector *sel);

/* The selector's slots of condition rules, in the order routes apply
 * them: the configuration's own (resil_selector_set_conditions()), a
 * registry's condition:// rules, a config center's rules (Dubbo 3's
 * SERVICE.condition-router). Each is replaced alone. */
#define RESIL__RULES_OWN 0
#define RESIL__RULES_REGISTRY 1
#define RESIL__RULES_CENTER 2
#define RESIL__RULES_SLOTS 3

/* Replace slot's rules as resil_selector_set_conditions() replaces the
 * configuration's own; the other slots and the tag rule stay. */
resil_err resil__selector_set_rules(resil_selector *sel, int slot,
    resil_condition *const *rules, size_t n, resil_diag *diag);

/* Change a parsed rule's force flag (the configuration text sets it with
 * a separate key). */
void resil__condition_set_force(resil_condition *c, int force);

#endif /* RESIL_ROUTER_INTERNAL_H */

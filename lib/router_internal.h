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
} resil__route_cfg;

typedef struct resil__route_stats {
	size_t endpoints; /* non-mock */
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

/* Change a parsed rule's force flag (the configuration text sets it with
 * a separate key). */
void resil__condition_set_force(resil_condition *c, int force);

#endif /* RESIL_ROUTER_INTERNAL_H */

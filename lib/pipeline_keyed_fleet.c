/*
 * Issue 41 (h3): a pipeline's keyed rate limiter on the fleet. With
 * ratelimit.key and ratelimit.fleet (or a keyed fleet_ratelimit handle),
 * the fleet limiter the pipeline opens is made keyed
 * (resil_fleet_limit_acquire_key: one GCRA state per key in Redis, each
 * key's 1/N share locally while Redis is away) and the keyed gate
 * (lib/call_keyed.c) asks it for each call's key in place of the
 * pipeline's local family; it no longer stands in for the pipeline's
 * unkeyed limiter (that stage is not made with ratelimit.key).
 */
#include "pipeline_keyed_fleet.h"

#include <string.h>

#include <resil/keyed.h>

#include "fleet_limit.h"
#include "internal.h"
#include "keyed_gate.h"
#include "pipeline_internal.h"

int
resil__kfleet_on(const resil_pipeline_config *cfg)
{
	return cfg->keyed[RESIL_KEYED_RATELIMIT].key != NULL &&
	    (cfg->ratelimit_fleet_url != NULL ||
	        cfg->fleet_ratelimit != NULL) &&
	    cfg->ratelimit_shared_url == NULL &&
	    cfg->shared_ratelimit == NULL;
}

void
resil__kfleet_config(
    const resil_pipeline_config *cfg, resil_fleet_limit_config *fc)
{
	resil_keyed_config dflt;
	unsigned k = RESIL_KEYED_RATELIMIT;

	if (!resil__kfleet_on(cfg))
		return;
	resil_keyed_config_init(&dflt);
	fc->max_keys = cfg->keyed[k].max_keys != 0 ? cfg->keyed[k].max_keys
	                                            : dflt.max_keys;
	fc->max_key_len = cfg->keyed[k].max_key_len != 0
	    ? cfg->keyed[k].max_key_len
	    : dflt.max_key_len;
	fc->overrides = cfg->keyed[k].overrides;
	fc->n_overrides = cfg->keyed[k].n_overrides;
}

void
resil__kfleet_family(
    const resil_pipeline_config *cfg, unsigned k, resil_keyed_config *kc)
{
	if (k == RESIL_KEYED_RATELIMIT && resil__kfleet_on(cfg))
		kc->max_keys = 1;
}

int
resil__kfleet_take(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_fleet_limit *frl)
{
	struct resil__kgate *g = p->keyed;

	/* By the handle (keyed) and the family (made from the text), not
	 * by cfg alone: a reload text that leaves ratelimit.fleet out keeps
	 * the limiter, and it stays the keyed one. */
	(void)cfg;
	if (g == NULL || g->fam[RESIL_KEYED_RATELIMIT] == NULL ||
	    !g->from_cfg[RESIL_KEYED_RATELIMIT] || frl->kx == NULL)
		return 0;
	g->frl = frl;
	return 1;
}

resil_err
resil__kfleet_acquire(struct resil__kgate *g, const void *key, size_t len,
    uint64_t *retry_after)
{
	if (g->frl != NULL)
		return resil_fleet_limit_acquire_key(
		    g->frl, key, len, 1, retry_after);
	return resil_keyed_ratelimit_try_acquire(
	    g->fam[RESIL_KEYED_RATELIMIT], key, len, 1, retry_after);
}

int
resil__kfleet_keyed(const resil_fleet_limit *frl)
{
	return frl->kx != NULL;
}

resil_fleet_limit *
resil__kfleet_of(const resil_pipeline *p)
{
	return p->keyed != NULL ? p->keyed->frl : NULL;
}

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
#include "keyed_spec.h"
#include "pipeline_internal.h"

/* Whether cfg names a keyed rate limiter with a fleet one and no shm
 * one (those two are refused together elsewhere). */
static int
keyed_on_fleet(const resil_pipeline_config *cfg)
{
	return cfg->keyed[RESIL_KEYED_RATELIMIT].key != NULL &&
	    (cfg->ratelimit_fleet_url != NULL ||
	        cfg->fleet_ratelimit != NULL) &&
	    cfg->ratelimit_shared_url == NULL &&
	    cfg->shared_ratelimit == NULL;
}

resil_err
resil__kfleet_cfg_check(
    const resil_pipeline_config *cfg, int *kind, resil_diag *diag)
{
	resil_pipeline_config c;
	resil_err err;

	/* Said here for the shm one alone: keyed_spec.c's message names
	 * the fleet too, which is now taken. */
	if (cfg->keyed[RESIL_KEYED_RATELIMIT].key != NULL &&
	    cfg->ratelimit_fleet_url == NULL && cfg->fleet_ratelimit == NULL &&
	    (cfg->ratelimit_shared_url != NULL ||
	        cfg->shared_ratelimit != NULL) &&
	    resil__keyed_stage_on(cfg, RESIL_KEYED_RATELIMIT)) {
		*kind = (int)RESIL_KEYED_RATELIMIT;
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.key: not with a shared rate limiter "
		    "(ratelimit.shared)");
	}
	if (!keyed_on_fleet(cfg))
		return resil__keyed_cfg_check(cfg, kind, diag);
	c = *cfg;
	c.ratelimit_fleet_url = NULL;
	c.fleet_ratelimit = NULL;
	err = resil__keyed_cfg_check(&c, kind, diag);
	if (err != RESIL_OK)
		return err;
	*kind = (int)RESIL_KEYED_RATELIMIT;
	if (cfg->fleet_ratelimit != NULL && cfg->fleet_ratelimit->kx == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.key: the fleet_ratelimit handle is not keyed "
		    "(made with max_keys 0)");
	if (cfg->fleet_ratelimit != NULL &&
	    cfg->keyed[RESIL_KEYED_RATELIMIT].n_overrides != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.key.override: not with a fleet_ratelimit "
		    "handle (give the overrides to the handle's "
		    "configuration)");
	*kind = -1;
	return RESIL_OK;
}

void
resil__kfleet_config(
    const resil_pipeline_config *cfg, resil_fleet_limit_config *fc)
{
	resil_keyed_config dflt;
	unsigned k = RESIL_KEYED_RATELIMIT;

	if (!keyed_on_fleet(cfg))
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
	if (k == RESIL_KEYED_RATELIMIT && keyed_on_fleet(cfg))
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

resil_fleet_limit *
resil__kfleet_of(const resil_pipeline *p)
{
	return p->keyed != NULL ? p->keyed->frl : NULL;
}

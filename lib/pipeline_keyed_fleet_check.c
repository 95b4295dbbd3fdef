/*
 * Issue 41 (h3): the configuration's check with a keyed rate limiter on
 * the fleet (lib/pipeline_keyed_fleet.h). Apart from
 * lib/pipeline_keyed_fleet.c so that calls between lib/ files go one way
 * (keyed_spec.c asks pipeline_shared.c, which asks pipeline_keyed_fleet.c).
 */
#include "pipeline_keyed_fleet.h"

#include <resil/keyed.h>

#include "internal.h"
#include "keyed_spec.h"

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
	if (!resil__kfleet_on(cfg))
		return resil__keyed_cfg_check(cfg, kind, diag);
	c = *cfg;
	c.ratelimit_fleet_url = NULL;
	c.fleet_ratelimit = NULL;
	err = resil__keyed_cfg_check(&c, kind, diag);
	if (err != RESIL_OK)
		return err;
	*kind = (int)RESIL_KEYED_RATELIMIT;
	if (cfg->fleet_ratelimit != NULL && !resil__kfleet_keyed(cfg->fleet_ratelimit))
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

/*
 * resil breaker: a configuration's validation (include/resil/breaker.h).
 */
#include <resil/breaker.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "internal.h"

/* ---- configuration ---- */

resil_err
resil_breaker_config_validate(
    const resil_breaker_config *cfg, resil_diag *diag)
{
	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "breaker: config is NULL");
	if (cfg->size != sizeof(resil_breaker_config))
		return resil__check_size(diag, "breaker",
		    "resil_breaker_config", cfg->size,
		    sizeof(resil_breaker_config));
	if (cfg->consecutive_failures == 0 && cfg->failure_rate_pct == 0 &&
	    cfg->slow_rate_pct == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker: no trigger: set consecutive_failures, "
		    "failure_rate_pct or slow_rate_pct");
	if (cfg->failure_rate_pct > 100)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.failure_rate_pct: %u is out of range 0..100",
		    cfg->failure_rate_pct);
	if (cfg->slow_rate_pct > 100)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.slow_rate_pct: %u is out of range 0..100",
		    cfg->slow_rate_pct);
	if (cfg->slow_rate_pct > 0 && cfg->slow_threshold_ns == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.slow_threshold_ns: 0 must be >= 1 when "
		    "slow_rate_pct is set");
	if (cfg->window_type != RESIL_WINDOW_COUNT &&
	    cfg->window_type != RESIL_WINDOW_TIME)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.window_type: %d is neither RESIL_WINDOW_COUNT "
		    "nor "
		    "RESIL_WINDOW_TIME",
		    (int)cfg->window_type);
	if (cfg->window_type == RESIL_WINDOW_COUNT &&
	    (cfg->window_size == 0 || cfg->window_size > MAX_COUNT_WINDOW))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.window_size: %u is out of range 1..%u",
		    cfg->window_size, MAX_COUNT_WINDOW);
	if (cfg->window_type == RESIL_WINDOW_TIME &&
	    (cfg->window_size == 0 || cfg->window_size > MAX_TIME_BUCKETS))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.window_size: %u buckets is out of range 1..%u",
		    cfg->window_size, MAX_TIME_BUCKETS);
	if (cfg->window_type == RESIL_WINDOW_TIME && cfg->bucket_ns == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.bucket_ns: 0 must be >= 1 for a time window");
	if ((cfg->failure_rate_pct > 0 || cfg->slow_rate_pct > 0) &&
	    cfg->min_calls == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.min_calls: 0 must be >= 1 when a rate trigger "
		    "is set");
	if (!(cfg->open_wait_multiplier >= 1.0 &&
	        cfg->open_wait_multiplier <= 1000.0))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.open_wait_multiplier: %g is out of range "
		    "1.0..1000.0",
		    cfg->open_wait_multiplier);
	if (cfg->open_wait_max_ns != 0 &&
	    cfg->open_wait_max_ns < cfg->open_wait_ns)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.open_wait_max_ns: %llu is below "
		    "breaker.open_wait_ns (%llu)",
		    (unsigned long long)cfg->open_wait_max_ns,
		    (unsigned long long)cfg->open_wait_ns);
	if (cfg->permitted_probes == 0 || cfg->permitted_probes > MAX_PROBES)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.permitted_probes: %u is out of range 1..%u",
		    cfg->permitted_probes, MAX_PROBES);
	if (cfg->clock != NULL && cfg->clock->now == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.clock: the clock has no now function");
	if (cfg->alloc != NULL &&
	    (cfg->alloc->alloc == NULL || cfg->alloc->free == NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.alloc: the allocator lacks alloc or free");
	return RESIL_OK;
}

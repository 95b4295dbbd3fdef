/*
 * A pipeline's configuration (lib/pipeline_config.h): the rules of a
 * declared method and the checks of a whole configuration, in one place
 * for resil_pipeline_new(), a reload and configuration text.
 */
#include "pipeline_config.h"
#include "keyed_spec.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pipeline_internal.h"
#include "pipeline_keyed_fleet.h"

/* Words that start a stage key: never method names. */
static const char *const reserved[] = { "service", "timeout", "mock",
	"breaker", "retry", "cache", "ratelimit", "bulkhead", "cluster",
	"retries", "forks", "broadcast", "failback", "zone",
	"cross_zone_timeout", "loadbalance", "router", "outlier", "panic",
	"hedge", "registry" };

int
resil__method_ident(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    c == '_' || c == '$';

		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return 0;
	}
	return 1;
}

int
resil__method_reserved(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (strlen(reserved[i]) == n && memcmp(reserved[i], s, n) == 0)
			return 1;
	return 0;
}

resil_err
resil__method_check(const resil_method_config *m, resil_diag *diag)
{
	size_t n;

	if (m == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "method: NULL");
	if (m->name == NULL || m->name[0] == '\0')
		return resil__diagf(
		    diag, RESIL_E_INVAL, "method: a name is required");
	n = strlen(m->name);
	if (!resil__method_ident(m->name, n))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "method \"%s\": not a method name (a letter, '_' or '$', "
		    "then letters, digits, '_' or '$')",
		    m->name);
	if (resil__method_reserved(m->name, n))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "method \"%s\": a reserved word (it starts stage keys)",
		    m->name);
	if ((unsigned)m->type > (unsigned)RESIL_TYPE_JSON)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.type: %d is not a type (any, void, bool, int, double, "
		    "string, bytes, array, object, json)",
		    m->name, (int)m->type);
	if (m->max_attempts > RESIL_RETRY_MAX_ATTEMPTS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.retry.max_attempts: %u is out of range 0..%u", m->name,
		    (unsigned)m->max_attempts,
		    (unsigned)RESIL_RETRY_MAX_ATTEMPTS);
	if ((unsigned)m->priority > (unsigned)RESIL_PRIORITY_CRITICAL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.priority: %d is not a priority (0 unset, 1 sheddable, "
		    "2 default, 3 critical)",
		    m->name, (int)m->priority);
	return RESIL_OK;
}

static int
cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

resil_err
resil__pipeline_config_known(
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "pipeline: config is NULL");
	if (cfg->size != sizeof(resil_pipeline_config))
		return resil__check_size(diag, "pipeline",
		    "resil_pipeline_config", cfg->size,
		    sizeof(resil_pipeline_config));
	return RESIL_OK;
}

/* A method's read-path settings (issue 43) against the pipeline's. */
static resil_err
read_path_rules(const resil_pipeline_config *cfg,
    const resil_method_config *m, resil_diag *diag)
{
	/* A read-through needs the cache it reads. */
	if (m->cache_fresh_ns != 0 && !cfg->cache_enabled)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.cache.fresh: needs the cache (cache.enabled)", m->name);
	/* Coalescing: not with hedging or a selector (the attempts of
	 * those are not one call's to share). */
	if (m->coalesce_max_waiters > 1048576)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.coalesce: %u is out of range 0..1048576", m->name,
		    (unsigned)m->coalesce_max_waiters);
	if (m->coalesce_max_waiters != 0 &&
	    (cfg->hedge_max != 0 || cfg->selector != NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.coalesce: not with hedging or a selector", m->name);
	return RESIL_OK;
}

resil_err
resil__pipeline_validate(const resil_pipeline_config *cfg, resil_diag *diag)
{
	size_t i, j;
	int kind;
	resil_err err = resil__pipeline_config_known(cfg, diag);

	if (err != RESIL_OK)
		return err;
	if (cfg->service == NULL || cfg->service[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "service: a pipeline needs a service name");
	if (cfg->nmethods > 0 && cfg->methods == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline.methods: NULL with nmethods %zu", cfg->nmethods);
	for (i = 0; i < cfg->nmethods; i++) {
		const char *n = cfg->methods[i].name;

		if (n == NULL || n[0] == '\0')
			return resil__diagf(diag, RESIL_E_INVAL,
			    "pipeline.methods[%zu].name: empty", i);
		/* The same rules as configuration text. */
		err = resil__method_check(&cfg->methods[i], diag);
		if (err != RESIL_OK)
			return err;
		err = read_path_rules(cfg, &cfg->methods[i], diag);
		if (err != RESIL_OK)
			return err;
		for (j = 0; j < i && i < 32; j++)
			if (strcmp(cfg->methods[j].name, n) == 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s: the method is declared twice", n);
	}
	if (cfg->nmethods >= 32) {
		/* Many methods: duplicates by sorting, not by pairs. */
		const resil_allocator *a = resil__allocator(cfg->alloc);
		const char **names =
		    resil__alloc(a, cfg->nmethods * sizeof(*names));
		const char *dup = NULL;

		if (names == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "pipeline: out of memory");
		for (i = 0; i < cfg->nmethods; i++)
			names[i] = cfg->methods[i].name;
		qsort(names, cfg->nmethods, sizeof(*names), cmp_names);
		for (i = 1; i < cfg->nmethods && dup == NULL; i++)
			if (strcmp(names[i - 1], names[i]) == 0)
				dup = names[i];
		resil__free(a, names, cfg->nmethods * sizeof(*names));
		if (dup != NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: the method is declared twice", dup);
	}
	if (cfg->clock != NULL && cfg->clock->now == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline.clock: the clock has no now function");
	if (cfg->executor.submit != NULL &&
	    (cfg->executor.wait == NULL || cfg->executor.wake == NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline.executor: submit, wait and wake are all "
		    "required");
	if (cfg->hedge_max > RESIL_CALL_MAX_INFLIGHT - 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline.hedge_max: %u is out of range 0..%u",
		    (unsigned)cfg->hedge_max,
		    (unsigned)(RESIL_CALL_MAX_INFLIGHT - 1));
	if (cfg->selector == NULL && resil__one_endpoint_strategy(cfg)) {
		/* Failfast, failsafe, failback over the one implicit
		 * endpoint: one attempt each (DESIGN). */
		if ((err = resil_cluster_config_validate(
		         &cfg->cluster, diag)) != RESIL_OK)
			return err;
		if (cfg->retry_enabled)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "cluster: %s makes one attempt: the retry stage "
			    "(retry.enabled) is failover's",
			    resil_cluster_strategy_name(
			        cfg->cluster.strategy));
		for (i = 0; i < cfg->nmethods; i++)
			if (cfg->methods[i].max_attempts != 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s.retries: %s makes one attempt",
				    cfg->methods[i].name,
				    resil_cluster_strategy_name(
				        cfg->cluster.strategy));
	}
	if ((err = resil__kfleet_cfg_check(cfg, &kind, diag)) != RESIL_OK)
		return err; /* issue 41 (the keyed fleet: h3) */
	if ((cfg->hedge_fatal & ~RESIL_HEDGE_ON_ALL) != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline.hedge_fatal: 0x%x has bits outside "
		    "RESIL_HEDGE_ON_ALL (0x7)",
		    cfg->hedge_fatal);
	if (cfg->selector != NULL) {
		const resil_cluster_config *cc = &cfg->cluster;

		if (cfg->hedge_max != 0 &&
		    (cc->strategy == RESIL_CLUSTER_FORKING ||
		        cc->strategy == RESIL_CLUSTER_BROADCAST))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "pipeline.hedge_max: cluster=%s makes its own "
			    "parallel or serial attempts; hedging runs with "
			    "failover, failfast, failsafe, failback or "
			    "zone-aware",
			    resil_cluster_strategy_name(cc->strategy));
		if ((err = resil_cluster_config_validate(cc, diag)) !=
		    RESIL_OK)
			return err;
		if (cc->retries > 999)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "retries: %d is out of range 0..999",
			    (int)cc->retries);
	}
	return RESIL_OK;
}

int
resil__one_endpoint_strategy(const resil_pipeline_config *cfg)
{
	return cfg->selector == NULL &&
	    (cfg->cluster.strategy == RESIL_CLUSTER_FAILFAST ||
	        cfg->cluster.strategy == RESIL_CLUSTER_FAILSAFE ||
	        cfg->cluster.strategy == RESIL_CLUSTER_FAILBACK);
}

const resil_allocator *
resil__pipeline_allocator(const resil_pipeline *p)
{
	return &p->alloc;
}

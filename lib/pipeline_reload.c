/*
 * resil_pipeline_reload: new settings from a whole configuration, checked
 * against what a reload cannot change, published with one pointer store;
 * the stage objects whose configuration did not change carry over (their
 * state too), and the replaced settings go once no call holds them.
 */
#include "pipeline_internal.h"

#include <stdio.h>
#include <string.h>

#include "call_keyed.h"
#include "call_overload.h"
#include "pipeline_ckeys.h"
#include "pipeline_config.h"
#include "pipeline_dry.h"
#include "pipeline_events.h"
#include "pipeline_settings.h"
#include "pipeline_shared.h"
#include "router_internal.h"

/* A field the reload cannot change: NULL / 0 in the new configuration
 * keeps the pipeline's; another value is refused, naming the key. */
static resil_err
immutable(resil_diag *diag, const char *key)
{
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s: cannot change by reload (it is fixed when the pipeline is "
	    "created; build a new pipeline to change it)",
	    key);
}

/* The first cluster setting a and b differ in, as its key of the text
 * with its field in C ("retries (cluster.retries)"); NULL: the same
 * (issue 38.10: the refusal names the key, not just "cluster"). */
static const char *
cluster_change(const resil_cluster_config *a, const resil_cluster_config *b)
{
	const char *za = a->local_zone != NULL ? a->local_zone : "";
	const char *zb = b->local_zone != NULL ? b->local_zone : "";

	if (a->strategy != b->strategy)
		return "cluster (cluster.strategy)";
	if (a->retries != b->retries)
		return "retries (cluster.retries)";
	if (a->failback_queue != b->failback_queue)
		return "failback.queue (cluster.failback_queue)";
	if (a->failback_retries != b->failback_retries)
		return "failback.retries (cluster.failback_retries)";
	if (a->failback_period_ns != b->failback_period_ns)
		return "failback.period (cluster.failback_period_ns)";
	if (a->broadcast_fail_percent != b->broadcast_fail_percent)
		return "broadcast.fail.percent "
		       "(cluster.broadcast_fail_percent)";
	if (a->forks != b->forks)
		return "forks (cluster.forks)";
	if (strcmp(za, zb) != 0)
		return "zone (cluster.local_zone)";
	if (a->cross_zone_timeout_ns != b->cross_zone_timeout_ns)
		return "cross_zone_timeout (cluster.cross_zone_timeout_ns)";
	return NULL;
}

/* *eff: cfg with what it leaves NULL filled from p; refused when it would
 * change what a reload cannot. */
static resil_err
reload_check(const resil_pipeline *p, const settings *g,
    const resil_pipeline_config *cfg, resil_pipeline_config *eff,
    resil_diag *diag)
{
	resil_err err = resil__pipeline_config_known(cfg, diag);
	const char *key;

	if (err != RESIL_OK)
		return err;
	*eff = *cfg;
	if (cfg->service != NULL && strcmp(cfg->service, p->service) != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "service: cannot change by reload (%.64s is not %.64s: "
		    "a pipeline serves one service)",
		    cfg->service, p->service);
	eff->service = p->service;
	if (cfg->clock != NULL &&
	    (cfg->clock->now != p->clock.now ||
	        cfg->clock->sleep != p->clock.sleep ||
	        cfg->clock->ctx != p->clock.ctx))
		return immutable(diag, "clock");
	eff->clock = &p->clock;
	if (cfg->alloc != NULL &&
	    memcmp(cfg->alloc, &p->alloc, sizeof(p->alloc)) != 0)
		return immutable(diag, "alloc");
	eff->alloc = &p->alloc;
	if (cfg->listener != NULL &&
	    (cfg->listener != p->listener ||
	        cfg->listener_ctx != p->listener_ctx))
		return immutable(diag, "listener");
	eff->listener = p->listener;
	eff->listener_ctx = p->listener_ctx;
	if (cfg->classifier.fn != NULL &&
	    (cfg->classifier.fn != p->cls.fn ||
	        cfg->classifier.ctx != p->cls.ctx))
		return immutable(diag, "classifier");
	eff->classifier = p->cls;
	if (cfg->registry != NULL && cfg->registry != p->registry)
		return immutable(diag, "registry");
	eff->registry = p->registry;
	if (cfg->selector != NULL && cfg->selector != p->sel)
		return immutable(diag, "selector");
	eff->selector = p->sel;
	if (cfg->chaos != NULL && cfg->chaos != p->chaos)
		return immutable(diag, "chaos");
	eff->chaos = p->chaos;
	if (cfg->executor.submit != NULL &&
	    memcmp(&cfg->executor, &p->executor, sizeof(p->executor)) != 0)
		return immutable(diag, "executor");
	eff->executor = p->executor;
	if (cfg->call_events != 0 && cfg->call_events != g->cfg.call_events)
		return immutable(diag, "call_events");
	eff->call_events = g->cfg.call_events;
	if (cfg->hedge_max != g->cfg.hedge_max)
		return immutable(diag, "hedge.max (hedge_max)");
	if (cfg->hedge_delay_ns != g->cfg.hedge_delay_ns)
		return immutable(diag, "hedge.delay (hedge_delay_ns)");
	if (cfg->hedge_fatal != g->cfg.hedge_fatal)
		return immutable(diag, "hedge.on (hedge_fatal)");
	if ((p->sel != NULL || p->one_ep ||
	        resil__one_endpoint_strategy(cfg)) &&
	    (key = cluster_change(&cfg->cluster, &g->cfg.cluster)) != NULL)
		return immutable(diag, key);
	/* Issue 41: the families the configuration named, as they were. */
	if ((err = resil__keyed_reload_check(p, cfg, diag)) != RESIL_OK)
		return err;
	err = resil__pipeline_validate(eff, diag);
	resil__keyed_strip(p, eff);
	return err;
}

/* What changed from old to g, for the event: a count and the names. */
static unsigned
describe_changes(const settings *old, const settings *g,
    const resil_pipeline_config *cfg, char *buf, size_t n)
{
	const resil_pipeline_config *a = &old->cfg;
	unsigned count = 0;
	size_t len = 0;
	size_t i;
	method *it, *tmp;

#define NOTE(name_)                                                         \
	do {                                                                \
		count++;                                                    \
		if (len < n)                                                \
			len += (size_t)snprintf(buf + len, n - len, "%s%s", \
			    count > 1 ? ", " : "", (name_));                \
	} while (0)
	buf[0] = '\0';
	if (a->breaker_enabled != cfg->breaker_enabled ||
	    a->breaker_per_method != cfg->breaker_per_method ||
	    (cfg->breaker_enabled &&
	        !resil__same_breaker(&a->breaker, &cfg->breaker)))
		NOTE("breaker");
	if (a->retry_enabled != cfg->retry_enabled ||
	    !resil__same_retry(&a->retry, &cfg->retry) ||
	    a->retry.max_attempts != cfg->retry.max_attempts)
		NOTE("retry");
	if (a->cache_enabled != cfg->cache_enabled ||
	    (cfg->cache_enabled && !resil__same_cache(&a->cache, &cfg->cache)))
		NOTE("cache");
	if (a->ratelimit_enabled != cfg->ratelimit_enabled ||
	    (cfg->ratelimit_enabled &&
	        (!resil__same_ratelimit(&a->ratelimit, &cfg->ratelimit) ||
	            a->ratelimit.drain_on_throttled !=
	                cfg->ratelimit.drain_on_throttled)))
		NOTE("ratelimit");
	if (a->bulkhead_enabled != cfg->bulkhead_enabled ||
	    (cfg->bulkhead_enabled &&
	        !resil__same_bulkhead(&a->bulkhead, &cfg->bulkhead)))
		NOTE("bulkhead");
	if (a->throttle_enabled != cfg->throttle_enabled ||
	    (cfg->throttle_enabled &&
	        !resil__same_throttle(&a->throttle, &cfg->throttle)))
		NOTE("throttle");
	if (a->timeout_ns != cfg->timeout_ns)
		NOTE("timeout");
	if ((old->service_spec == NULL) != (cfg->mock == NULL) ||
	    (cfg->mock != NULL && strcmp(old->service_spec, cfg->mock) != 0))
		NOTE("mock");
	for (i = 0; i < cfg->nmethods; i++) {
		const resil_method_config *mc = &cfg->methods[i];
		const method *om = find_in(old, mc->name);
		uint64_t t = mc->timeout_ns ? mc->timeout_ns : cfg->timeout_ns;
		const char *os =
		    om != NULL && om->mock_set ? om->mock_spec : NULL;

		if (om == NULL || om->type != mc->type || om->timeout != t ||
		    om->max_attempts != mc->max_attempts ||
		    om->prio != (uint8_t)mc->priority ||
		    (os == NULL) != (mc->mock == NULL) ||
		    (os != NULL && strcmp(os, mc->mock) != 0))
			NOTE(mc->name);
	}
	HASH_ITER(hh, old->methods, it, tmp)
	{
		if (find_in(g, it->name) == NULL)
			NOTE(it->name);
	}
#undef NOTE
	if (len >= n && n > 4)
		memcpy(buf + n - 4, "...", 4);
	return count;
}

static void
emit_reload(resil_pipeline *p, unsigned count, const char *what)
{
	resil_pipeline_event ev;
	char text[160];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	if (count == 0)
		snprintf(text, sizeof(text),
		    "configuration reloaded: nothing changed");
	else
		snprintf(text, sizeof(text),
		    "configuration reloaded: %u setting%s changed (%s)", count,
		    count == 1 ? "" : "s", what);
	resil__emit(
	    p, &ev, RESIL_STAGE_CONFIG, resil_clock_now(&p->clock), text, "");
}

/* The allocator of the condition rules a reload gives the selector: the
 * selector's own, since it owns and frees them, after the pipeline is
 * gone too (issue 38.2: with the pipeline's, the selector freed them
 * through the freed pipeline). */
static const resil_allocator *
rules_alloc(const resil_pipeline *p)
{
	return p->sel != NULL ? resil__selector_alloc(p->sel) : &p->alloc;
}

/* A reload's cluster keys (cfg->cluster_keys; NULL, a reload made in C:
 * the pipeline's stay) against the pipeline's: a change refused, the
 * condition rules parsed into *rules when they changed. */
static resil_err
reload_ckeys(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_condition ***rules, size_t *nrules, int *conds, resil_diag *diag)
{
	resil_err err;

	*rules = NULL;
	*nrules = 0;
	*conds = 0;
	if (cfg->cluster_keys == NULL)
		return RESIL_OK;
	err = resil__ckeys_compare(
	    p->ckeys, cfg->cluster_keys, p->sel != NULL, conds, diag);
	if (err == RESIL_OK && *conds)
		err = resil__ckeys_rules(
		    cfg->cluster_keys, rules_alloc(p), rules, nrules, diag);
	return err;
}

/* The condition rules into the selector, the keys kept (issue 24.1). */
static resil_err
apply_ckeys(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_condition **rules, size_t nrules, int conds, resil_diag *diag)
{
	char *keys;
	resil_err err;

	if (cfg->cluster_keys == NULL)
		return RESIL_OK;
	keys = resil__strdup(&p->alloc, cfg->cluster_keys);
	if (keys == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "reload: out of memory");
	if (conds) {
		static resil_condition *const none[1] = { NULL };

		err = resil_selector_set_conditions(
		    p->sel, nrules > 0 ? rules : none, nrules, diag);
		if (err != RESIL_OK) {
			resil__strfree(&p->alloc, keys);
			return err;
		}
		/* The selector owns the rules now, the array is copied. */
		if (rules != NULL)
			resil__free(
			    rules_alloc(p), rules, nrules * sizeof(*rules));
	}
	resil__strfree(&p->alloc, p->ckeys);
	p->ckeys = keys;
	return RESIL_OK;
}

static resil_err
reload(resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
	resil_condition **rules = NULL;
	size_t nrules = 0;
	int conds = 0;
	resil_pipeline_config eff;
	settings *old, *g = NULL;
	char what[100];
	unsigned count;
	resil_err err;

	if (p == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "pipeline: p is NULL");
	resil__spin_lock(&p->mock_lock);
	old = p->cur;
	err = reload_check(p, old, cfg, &eff, diag);
	if (err == RESIL_OK)
		err = resil__settings_build(p, &eff, old, &g, diag);
	/* Issue 24.2: the pipeline's shm / fleet state, kept. */
	if (err == RESIL_OK &&
	    (err = resil__shared_apply(p, &eff, g, 1, diag)) != RESIL_OK)
		resil__settings_free(g);
	/* Issue 24.1: the selector's, directory's and registry's keys. */
	if (err == RESIL_OK &&
	    ((err = reload_ckeys(p, cfg, &rules, &nrules, &conds, diag)) !=
	            RESIL_OK ||
	        (err = apply_ckeys(p, cfg, rules, nrules, conds, diag)) !=
	            RESIL_OK))
		resil__settings_free(g);
	if (err != RESIL_OK) {
		resil__ckeys_rules_free(rules_alloc(p), rules, nrules);
		resil__spin_unlock(&p->mock_lock);
		return err;
	}
	count = describe_changes(old, g, &eff, what, sizeof(what));
	if (conds) {
		size_t len = strlen(what);

		snprintf(what + len, sizeof(what) - len, "%srouter.condition",
		    count > 0 ? ", " : "");
		count += 1;
	}
	/* Published with a full barrier (conf_hold's check relies on it):
	 * calls that start from now on run with g. */
	resil__fas64((uint64_t *)(void *)&p->cur, (uint64_t)(uintptr_t)g);
	resil__spin_unlock(&p->mock_lock);
	resil__settings_retire(p, old);
	emit_reload(p, count, what);
	return RESIL_OK;
}

resil_err
resil_pipeline_reload(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
	return reload(p, cfg, diag);
}

/*
 * Issue 40: whether a reload with cfg would be taken, without taking it:
 * the same checks, the same build (then dropped), the same comparison of
 * the cluster keys. The registry's override rules try each key this way
 * before the one reload that applies them. (The shm / fleet state is not
 * opened here: a reload that changes it is tried by the reload itself.)
 */
resil_err
resil__pipeline_reload_dry(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
	resil_condition **rules = NULL;
	size_t nrules = 0;
	int conds = 0;
	resil_pipeline_config eff;
	settings *g = NULL;
	resil_err err;

	if (p == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "pipeline: p is NULL");
	resil__spin_lock(&p->mock_lock);
	err = reload_check(p, p->cur, cfg, &eff, diag);
	if (err == RESIL_OK)
		err = resil__settings_build(p, &eff, p->cur, &g, diag);
	if (g != NULL)
		resil__settings_free(g);
	if (err == RESIL_OK)
		err = reload_ckeys(p, cfg, &rules, &nrules, &conds, diag);
	resil__ckeys_rules_free(rules_alloc(p), rules, nrules);
	resil__spin_unlock(&p->mock_lock);
	return err;
}

/* The key a refusal starts with ("retries" of "retries (cluster.retries):
 * cannot ..."): its length, 0 when the message starts otherwise. */
static size_t
leading_key(const char *msg)
{
	size_t n = 0;

	while ((msg[n] >= 'a' && msg[n] <= 'z') ||
	    (msg[n] >= 'A' && msg[n] <= 'Z') ||
	    (msg[n] >= '0' && msg[n] <= '9') || msg[n] == '.' ||
	    msg[n] == '_' || msg[n] == '-' || msg[n] == '$')
		n++;
	return n > 0 && (msg[n] == ':' || msg[n] == ' ') ? n : 0;
}

/*
 * A text reload's refusal, located in the text (issue 38.10): a message
 * that starts with a key the text sets gets the text's origin:line of it
 * ("svc.conf:3: retries (cluster.retries): cannot change by reload
 * ..."); a "cannot change" of a key the text leaves out, the origin
 * alone. Messages that carry their place already are left as they are.
 */
static void
locate(resil_diag *diag, const resil__reload_text *t)
{
	const char *origin = t->origin != NULL ? t->origin : "<string>";
	size_t olen = strlen(origin), klen;
	char out[RESIL_DIAG_MAX + 128];
	unsigned line;
	int len;

	if (strncmp(diag->msg, origin, olen) == 0 && diag->msg[olen] == ':')
		return;
	klen = leading_key(diag->msg);
	if (klen == 0)
		return;
	line = t->line(diag->msg, klen, t->ctx);
	if (line == 0 &&
	    strstr(diag->msg, ": cannot change by reload") == NULL)
		return;
	/* Room for the prefix and the whole message, then cut to fit. */
	if (line > 0)
		len = snprintf(
		    out, sizeof(out), "%.96s:%u: %s", origin, line, diag->msg);
	else
		len =
		    snprintf(out, sizeof(out), "%.96s: %s", origin, diag->msg);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(diag->msg))
		len = (int)sizeof(diag->msg) - 1;
	memcpy(diag->msg, out, (size_t)len);
	diag->msg[len] = '\0';
}

resil_err
resil__pipeline_reload_text(resil_pipeline *p,
    const resil_pipeline_config *cfg, const resil__reload_text *t,
    resil_diag *diag)
{
	resil_err err = reload(p, cfg, diag);

	if (err == RESIL_E_INVAL && t != NULL && t->line != NULL &&
	    diag != NULL)
		locate(diag, t);
	return err;
}

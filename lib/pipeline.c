/*
 * resil pipeline: creation, the accessors and the metrics
 * (include/resil/pipeline.h).
 *
 * The pipeline lives in rooms, each calling only rooms below it:
 *   pipeline.c             creation, accessors, metrics (this file)
 *   pipeline_reload.c      resil_pipeline_reload
 *   call_drive.c           the blocking drivers: resil_pipeline_call,
 *                          _call_method and _invoke (plain, hedged, cluster)
 *   call.c                 the call machine's public face (<resil/call.h>)
 *   pipeline_failback.c    failback's queue, polled by the user
 *   call_machine.[ch]      the call machine: it decides, the drivers run it
 *   call_cluster.[ch]      the cluster inside the machine
 *   call_state.[ch]        one call's state and how it is answered
 *   pipeline_settings.[ch] the settings a call runs with
 *   pipeline_mock.[ch]     the mock stage's configuration
 *   pipeline_events.[ch]   events, the recording listener
 *   pipeline_config.[ch]   what a valid configuration is
 *   pipeline_internal.h    the private types they all share
 * Configuration text (config.c, config_keys.c) is above all of them.
 */
#include <resil/pipeline.h>

#include "pipeline_internal.h"

#include "call_internal.h"
#include "call_keyed.h"
#include "pipeline_config.h"
#include "pipeline_events.h"
#include "pipeline_settings.h"
#include "pipeline_endpoint.h"
#include "pipeline_shared.h"
#include "pipeline_keyed_fleet.h"

#include <resil/fleet.h>

void
resil_pipeline_free(resil_pipeline *p)
{
	struct resil_method *h, *htmp;
	const resil_allocator *resil__a;
	unsigned i;

	if (p == NULL)
		return;
	resil__pipeline_unwatch_endpoints(p);
	resil__keyed_free(p); /* issue 41 */
	/* The fleet handles leave their group first: a group shared with
	 * another pipeline syncs (and delivers this pipeline's fleet events)
	 * until they have left it, and those events read the pipeline. */
	resil__shared_free(p);
	resil__a = &p->alloc;
	resil__settings_free(p->cur);
	while (p->retired != NULL) {
		settings *g = p->retired;

		p->retired = g->next_free;
		resil__settings_free(g);
	}
	while (p->shells != NULL) {
		settings *g = p->shells;

		p->shells = g->next_free;
		resil__free(resil__a, g, sizeof(*g));
	}
	HASH_ITER(hh, p->names, h, htmp)
	{
		HASH_DEL(p->names, h);
		resil__strfree(resil__a, h->name);
		resil__free(resil__a, h, sizeof(*h));
	}
	if (p->hlist != NULL)
		resil__free(
		    resil__a, p->hlist, p->handlers * sizeof(*p->hlist));
	resil_cluster_free(p->fbq);
	resil__strfree(resil__a, p->zone);
	for (i = 0; i < NSTRIPES; i++)
		resil_candidates_free(p->pool[i].c);
	resil__strfree(resil__a, p->service);
	resil__strfree(resil__a, p->ckeys);
	resil__free(resil__a, p->stripes_mem,
	    sizeof(stripe) * NSTRIPES + RESIL__CACHELINE);
	{
		resil_allocator a = p->alloc;

		resil__free(&a, p, sizeof(*p));
	}
}

/* The cluster's parts that live as long as the pipeline: its settings,
 * failback queue and candidate sets. */
static resil_err
cluster_setup(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
	const resil_cluster_config *cc = &cfg->cluster;
	resil_err err;
	unsigned i;

	p->ccfg = *cc;
	p->ccfg.clock = &p->clock;
	p->ccfg.alloc = &p->alloc;
	p->ccfg.classifier = p->cls;
	p->ccfg.listener = resil__on_cluster;
	p->ccfg.listener_ctx = p;
	p->ccfg.service = p->service;
	p->ccfg.local_zone = NULL;
	if (cc->local_zone != NULL) {
		p->zone = resil__strdup(&p->alloc, cc->local_zone);
		if (p->zone == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "pipeline: out of memory");
		p->ccfg.local_zone = p->zone;
	}
	if (cc->strategy == RESIL_CLUSTER_ZONE_AWARE) {
		resil_diag zd;

		zd.msg[0] = '\0';
		if (resil_selector_check_zones(p->sel, &zd) != RESIL_OK)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "zone: %.180s; zone-aware needs every endpoint's "
			    "zone",
			    zd.msg);
	}
	if (cc->strategy == RESIL_CLUSTER_FORKING) {
		p->hedge_delay = 0; /* forking starts its forks at once */
		p->late_edge = 0;
		/* Forks above the candidate count find no distinct endpoint
		 * and are not made: min(forks, n) attempts. */
		p->hedge_max = (uint32_t)cc->forks < RESIL_CALL_MAX_INFLIGHT
		    ? (uint32_t)cc->forks - 1
		    : RESIL_CALL_MAX_INFLIGHT - 1;
	}
	if (cc->strategy == RESIL_CLUSTER_FAILBACK) {
		err =
		    resil__cluster_new_queue(&p->fbq, p->sel, &p->ccfg, diag);
		if (err != RESIL_OK)
			return err;
	}
	for (i = 0; i < NSTRIPES; i++) {
		err = resil_candidates_new(&p->pool[i].c, p->sel);
		if (err != RESIL_OK)
			return resil__diagf(
			    diag, err, "pipeline: out of memory");
	}
	return RESIL_OK;
}

resil_err
resil_pipeline_new(
    resil_pipeline **out, const resil_pipeline_config *cfg, resil_diag *diag)
{
	const resil_allocator *resil__a;
	resil_pipeline_config eff;
	resil_pipeline *p;
	resil_err err;
	uintptr_t sp;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "pipeline: out is NULL");
	err = resil__pipeline_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	resil__a = resil__allocator(cfg->alloc);
	p = resil__calloc(resil__a, sizeof(*p));
	if (p == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "pipeline: out of memory");
	p->alloc = *resil__a;
	resil__a = &p->alloc;
	p->clock = cfg->clock != NULL ? *cfg->clock : *resil_clock_system();
	p->cls = cfg->classifier;
	p->listener = cfg->listener;
	p->listener_ctx = cfg->listener_ctx;
	p->registry = cfg->registry;
	resil__spin_init(&p->mock_lock);
	p->svc.owner = p;
	p->nnames = 1; /* index 0: the service-level handle */
	p->hedge_max = cfg->hedge_max;
	p->late_edge = 1;
	p->call_events = cfg->listener != NULL ? cfg->call_events : 0;
	p->hedge_delay = cfg->hedge_delay_ns;
	p->hedge_fatal = cfg->hedge_fatal;
	p->executor = cfg->executor;
	p->sel = cfg->selector;
	p->chaos = cfg->chaos;
	p->slow = cfg->hedge_max != 0 || cfg->selector != NULL;
	p->service = resil__strdup(resil__a, cfg->service);
	p->ckeys = resil__strdup(resil__a, cfg->cluster_keys);
	p->stripes_mem = resil__calloc(
	    resil__a, sizeof(stripe) * NSTRIPES + RESIL__CACHELINE);
	if (p->service == NULL || p->stripes_mem == NULL ||
	    (cfg->cluster_keys != NULL && p->ckeys == NULL)) {
		err = resil__diagf(
		    diag, RESIL_E_NOMEM, "pipeline: out of memory");
		goto fail;
	}
	sp = ((uintptr_t)p->stripes_mem + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	p->stripes = (stripe *)sp;
	if (cfg->selector != NULL) {
		err = cluster_setup(p, cfg, diag);
		if (err != RESIL_OK)
			goto fail;
	} else if (resil__one_endpoint_strategy(cfg)) {
		/* The strategy over the one implicit endpoint. */
		p->one_ep = 1;
		p->ccfg = cfg->cluster;
		p->ccfg.clock = &p->clock;
		p->ccfg.alloc = &p->alloc;
		p->ccfg.classifier = p->cls;
		p->ccfg.listener = resil__on_cluster;
		p->ccfg.listener_ctx = p;
		p->ccfg.service = p->service;
		p->ccfg.local_zone = NULL;
		if (p->ccfg.strategy == RESIL_CLUSTER_FAILBACK) {
			err = resil__cluster_new_queue(
			    &p->fbq, NULL, &p->ccfg, diag);
			if (err != RESIL_OK)
				goto fail;
		}
	}
	err = resil__shared_setup(p, cfg, diag);
	if (err != RESIL_OK)
		goto fail;
	/* Issue 41: the families cfg->keyed names, in place of their
	 * stages (before the settings: their methods see p->keyed). */
	err = resil__keyed_setup(p, cfg, diag);
	if (err != RESIL_OK)
		goto fail;
	eff = *cfg;
	resil__keyed_strip(p, &eff);
	err = resil__settings_build(p, &eff, NULL, &p->cur, diag);
	if (err != RESIL_OK)
		goto fail;
	err = resil__shared_apply(p, cfg, p->cur, 0, diag);
	if (err != RESIL_OK)
		goto fail;
	resil__pipeline_watch_endpoints(p); /* issue 40 */
	*out = p;
	return RESIL_OK;
fail:
	resil_pipeline_free(p);
	return err;
}

resil_err
resil_pipeline_add_handler(resil_pipeline *p, resil_fallback_fn fn, void *ctx)
{
	const resil_allocator *a;
	handler *nl;
	resil_err err;

	if (p == NULL || fn == NULL)
		return RESIL_E_INVAL;
	a = &p->alloc;
	nl = resil__alloc(a, (p->handlers + 1) * sizeof(*nl));
	if (nl == NULL)
		return RESIL_E_NOMEM;
	err = resil_fallback_add_handler(p->cur->fb, fn, ctx);
	if (err != RESIL_OK) {
		resil__free(a, nl, (p->handlers + 1) * sizeof(*nl));
		return err;
	}
	if (p->handlers > 0) {
		memcpy(nl, p->hlist, p->handlers * sizeof(*nl));
		resil__free(a, p->hlist, p->handlers * sizeof(*nl));
	}
	nl[p->handlers].fn = fn;
	nl[p->handlers].ctx = ctx;
	p->hlist = nl;
	p->handlers++;
	return RESIL_OK;
}

const resil_clock *
resil_pipeline_clock(const resil_pipeline *p)
{
	return p == NULL ? NULL : &p->clock;
}

const char *
resil_pipeline_service(const resil_pipeline *p)
{
	return p == NULL ? NULL : p->service;
}

/* The current settings, for the accessors (not to overlap a reload). */
static settings *
cur_of(const resil_pipeline *p)
{
	return resil__loadptr((void *const *)&p->cur);
}

resil_breaker *
resil_pipeline_breaker(resil_pipeline *p, const char *name)
{
	const settings *g;
	const method *m;

	if (p == NULL)
		return NULL;
	g = cur_of(p);
	m = name != NULL ? find_method(g, name) : &g->dflt;
	if (m->fleet != NULL || g->fleet != NULL)
		return resil_fleet_breaker(
		    m->fleet != NULL ? m->fleet : g->fleet);
	return m->breaker != NULL ? m->breaker : g->breaker;
}

resil_fleet *
resil_pipeline_fleet(resil_pipeline *p)
{
	return p == NULL ? NULL : cur_of(p)->fleet;
}

resil_fleet_limit *
resil_pipeline_fleet_limit(resil_pipeline *p)
{
	if (p == NULL)
		return NULL;
	return cur_of(p)->frl != NULL ? cur_of(p)->frl : resil__kfleet_of(p);
}

resil_retry *
resil_pipeline_retry(resil_pipeline *p, const char *name)
{
	const settings *g;
	const method *m;

	if (p == NULL)
		return NULL;
	g = cur_of(p);
	m = name != NULL ? find_method(g, name) : &g->dflt;
	return m->retry != NULL ? m->retry : g->retry;
}

resil_cache *
resil_pipeline_cache(resil_pipeline *p)
{
	return p == NULL ? NULL : cur_of(p)->cache;
}

resil_ratelimit *
resil_pipeline_ratelimit(resil_pipeline *p)
{
	return p == NULL || cur_of(p)->frl != NULL ? NULL : cur_of(p)->rl;
}

resil_bulkhead *
resil_pipeline_bulkhead(resil_pipeline *p)
{
	return p == NULL ? NULL : cur_of(p)->bh;
}

size_t
resil_pipeline_method_count(const resil_pipeline *p)
{
	return p == NULL ? 0 : HASH_COUNT(cur_of(p)->methods);
}

const char *
resil_pipeline_method_name(const resil_pipeline *p, size_t i)
{
	const method *m;

	if (p == NULL)
		return NULL;
	for (m = cur_of(p)->methods; m != NULL; m = m->hh.next, i--)
		if (i == 0)
			return m->name;
	return NULL;
}

resil_selector *
resil_pipeline_selector(const resil_pipeline *p)
{
	return p == NULL ? NULL : p->sel;
}

resil_err
resil_pipeline_method(
    resil_pipeline *p, const char *name, const resil_method **out)
{
	const struct resil_method *h = NULL;

	if (p == NULL || name == NULL || out == NULL)
		return RESIL_E_INVAL;
	/* The names table grows at reloads: read under their lock. */
	resil__spin_lock(&p->mock_lock);
	if (find_in(p->cur, name) != NULL)
		HASH_FIND_STR(p->names, name, h);
	resil__spin_unlock(&p->mock_lock);
	*out = h != NULL ? h : &p->svc;
	return RESIL_OK;
}

const char *
resil_method_name(const resil_method *m)
{
	return m == NULL ? NULL : m->name != NULL ? m->name : "";
}

resil_err
resil_pipeline_get_metrics(
    const resil_pipeline *p, resil_pipeline_metrics *out)
{
	resil_pipeline_metrics m;
	unsigned i, j;
	uint64_t answered;

	if (p == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&m, 0, sizeof(m));
	for (i = 0; i < NSTRIPES; i++) {
		stripe *s = &p->stripes[i];

		m.calls += resil__load64(&s->calls);
		m.cache += resil__load64(&s->cache);
		m.mock += resil__load64(&s->mock);
		m.fallback += resil__load64(&s->fallback);
		m.unavailable += resil__load64(&s->unavailable);
		m.errors += resil__load64(&s->errors);
		m.business += resil__load64(&s->business);
		m.timeouts += resil__load64(&s->timeouts);
		m.latency_count += resil__load64(&s->latency_count);
		m.failback_dropped += resil__load64(&s->failback_dropped);
		m.pushbacks += resil__load64(&s->pushbacks);
		m.paused += resil__load64(&s->paused);
		for (j = 0; j < RESIL_LATENCY_BUCKETS; j++)
			m.latency[j] += resil__load64(&s->latency[j]);
	}
	/* Live answers are not counted on the hot path: they are what is
	 * left (calls still running count as live meanwhile). */
	answered = m.cache + m.mock + m.fallback + m.unavailable + m.errors +
	    m.business;
	m.live = m.calls > answered ? m.calls - answered : 0;
	*out = m;
	return RESIL_OK;
}

uint64_t
resil_latency_quantile(const resil_pipeline_metrics *m, double q)
{
	uint64_t total = 0, want, seen = 0;
	unsigned i;

	if (m == NULL || !(q > 0.0))
		return 0;
	for (i = 0; i < RESIL_LATENCY_BUCKETS; i++)
		total += m->latency[i];
	if (total == 0)
		return 0;
	if (q > 1.0)
		q = 1.0;
	want = (uint64_t)((double)total * q);
	if ((double)want < (double)total * q || want == 0)
		want++;
	for (i = 0; i < RESIL_LATENCY_BUCKETS; i++) {
		seen += m->latency[i];
		if (seen >= want)
			return i == 0 ? 0
			    : i >= 64 ? UINT64_MAX
			              : (UINT64_C(1) << i) - 1;
	}
	return UINT64_MAX;
}

/*
 * The settings a call runs with (lib/pipeline_settings.h): the stage
 * objects, shared by consecutive settings when their configuration did
 * not change; the method table; the shells settings live in, reused by
 * reloads; and the count of calls on them.
 */
#include "pipeline_settings.h"

#include <string.h>

#include "call_coalesce.h"
#include "call_overload.h"
#include "pipeline_events.h"
#include "mock_internal.h"
#include "pipeline_mock.h"
#include "retry_internal.h"

/* Two doubles are the same setting when their bits are (no float ==). */
static int
same_double(double x, double y)
{
	uint64_t u, v;

	memcpy(&u, &x, sizeof(u));
	memcpy(&v, &y, sizeof(v));
	return u == v;
}

static int
spec_is_none(const char *spec)
{
	/* Only a quick filter: the parser decides for everything else. */
	return spec == NULL;
}

static resil_err
new_breaker(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_breaker **out, resil_diag *diag)
{
	resil_breaker_config bc = cfg->breaker;

	bc.clock = &p->clock;
	bc.alloc = &p->alloc;
	bc.listener = resil__on_breaker;
	bc.listener_ctx = p;
	return resil_breaker_new(out, &bc, diag);
}

static resil_err
new_retry(resil_pipeline *p, const resil_pipeline_config *cfg,
    uint32_t max_attempts, resil_retry **out, resil_diag *diag)
{
	resil_retry_config rc = cfg->retry;

	rc.clock = &p->clock;
	rc.alloc = &p->alloc;
	rc.classifier = p->cls;
	/* Only with a listener: a retry listener makes the policy read the
	 * clock on every call. */
	rc.listener = p->listener != NULL ? resil__on_retry : NULL;
	rc.listener_ctx = p;
	if (max_attempts != 0)
		rc.max_attempts = max_attempts;
	return resil_retry_new(out, &rc, diag);
}

/* The failover policy of the cluster: attempts (retries + 1), and the
 * retry stage's backoff, deadline, budget and predicates when it is on
 * (no wait between attempts otherwise, as Dubbo). */
static resil_err
new_cretry(resil_pipeline *p, const resil_pipeline_config *cfg,
    uint32_t attempts, resil_retry **out, resil_diag *diag)
{
	resil_retry_config rc;

	if (cfg->retry_enabled)
		rc = cfg->retry;
	else {
		resil_retry_config_init(&rc);
		rc.base_delay_ns = 0;
	}
	rc.clock = &p->clock;
	rc.alloc = &p->alloc;
	rc.classifier = p->cls;
	rc.listener = p->listener != NULL ? resil__on_retry : NULL;
	rc.listener_ctx = p;
	rc.max_attempts = attempts;
	return resil_retry_new(out, &rc, diag);
}

/* A shared stage object: *out holds obj (refs 1), or obj is freed and
 * RESIL_E_NOMEM returned. */
static void
part_free_obj(int kind, void *obj)
{
	switch (kind) {
	case PART_BREAKER:
		resil_breaker_free(obj);
		break;
	case PART_RETRY:
		resil_retry_free(obj);
		break;
	case PART_CACHE:
		resil_cache_free(obj);
		break;
	case PART_RL:
		resil_ratelimit_free(obj);
		break;
	case PART_BH:
		resil_bulkhead_free(obj);
		break;
	case PART_THR:
		resil_throttle_free(obj);
		break;
	}
}

static resil_err
part_new(resil_pipeline *p, int kind, void *obj, part **out)
{
	part *x = resil__calloc(&p->alloc, sizeof(*x));

	if (x == NULL) {
		part_free_obj(kind, obj);
		return RESIL_E_NOMEM;
	}
	x->refs = 1;
	x->kind = kind;
	x->obj = obj;
	*out = x;
	return RESIL_OK;
}

static part *
part_get(part *x)
{
	resil__inc64(&x->refs);
	return x;
}

static void
part_put(resil_pipeline *p, part *x)
{
	if (x == NULL || resil__faa64(&x->refs, UINT64_MAX) != 1)
		return;
	part_free_obj(x->kind, x->obj);
	resil__free(&p->alloc, x, sizeof(*x));
}

static void
free_method(resil_pipeline *p, method *m)
{
	resil__strfree(&p->alloc, m->name);
	resil__strfree(&p->alloc, m->mock_spec);
	resil_retry_free(m->cretry);
	if (m->coal != NULL) /* issue 43 */
		resil__free(&p->alloc, m->coal, sizeof(*m->coal));
	part_put(p, m->pretry);
	part_put(p, m->pbreaker);
}

/* Free what g holds; the shell stays (refs and p untouched). */
static void
settings_clear(settings *g)
{
	resil_pipeline *p;
	const resil_allocator *resil__a;
	method *it, *tmp;

	p = g->p;
	resil__a = &p->alloc;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		HASH_DEL(g->methods, it);
		free_method(p, it);
		resil__free(resil__a, it, sizeof(*it));
	}
	resil_mock_free(g->mock);
	resil__strfree(resil__a, g->service_spec);
	resil_fallback_free(g->fb);
	part_put(p, g->pcache);
	part_put(p, g->pbreaker);
	part_put(p, g->pretry);
	part_put(p, g->prl);
	part_put(p, g->pbh);
	part_put(p, g->pthr);
	resil_retry_free(g->cretry);
	resil_chaos_free(g->cfg.chaos); /* the reference build took */
	if (g->byidx != NULL)
		resil__free(resil__a, g->byidx, g->nidx * sizeof(method *));
	memset((char *)g + offsetof(settings, next_free), 0,
	    sizeof(*g) - offsetof(settings, next_free));
}

/* A shell for new settings (under mock_lock, or at creation): a free
 * one, or a new one. Counts left on a free shell's stripes are stray
 * ones (see conf_hold), dropped in time. */
static settings *
shell_take(resil_pipeline *p)
{
	settings *g = p->shells;

	if (g != NULL) {
		p->shells = g->next_free;
		g->next_free = NULL;
		return g;
	}
	g = resil__calloc(&p->alloc, sizeof(*g));
	if (g != NULL)
		g->p = p;
	return g;
}

/* Settings never published, or no longer held: contents freed, shell
 * kept (under mock_lock, or at creation). */
static void
shell_put(resil_pipeline *p, settings *g)
{
	settings_clear(g);
	g->next_free = p->shells;
	p->shells = g;
}

/* Whether calls still count on g. A count taken after g was replaced is
 * a stray one (its call sees the pointer moved and drops it at once).
 * A call may drop on another stripe than it counted on (it ends on
 * another thread), but its count is read whenever its drop is (the drop
 * comes after it, and the reclaim fenced every thread before reading,
 * resil__stripes_fence()), so a zero sum read after g was replaced is
 * final: a count seen without its drop errs only towards "held". */
static int
settings_held(settings *g)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < NSTRIPES; i++)
		sum += resil__load64_after_rmw(&g->rc[i].n);
	return sum != 0;
}

/* Free the replaced settings that no call holds any more (under
 * mock_lock): at every reload, so that however many reloads come, only
 * settings with a call still running on them stay allocated. */
static void
settings_reclaim(resil_pipeline *p)
{
	settings **pp = &p->retired, *g;

	/* Holds counted unfenced are seen only after a fence of every
	 * thread; without it, none is known to be over. */
	if (*pp == NULL || !resil__stripes_fence())
		return;
	while ((g = *pp) != NULL) {
		if (settings_held(g)) {
			pp = &g->next_free;
			continue;
		}
		*pp = g->next_free;
		shell_put(p, g);
	}
}

void
resil__settings_retire(resil_pipeline *p, settings *old)
{
	old->next_free = p->retired;
	p->retired = old;
	settings_reclaim(p); /* old too, when no call holds it */
}

/* Free g and its shell, when no call can reach it (creation failed, or
 * the pipeline is being freed). */
void
resil__settings_free(settings *g)
{
	if (g == NULL)
		return;
	settings_clear(g);
	resil__free(&g->p->alloc, g, sizeof(*g));
}

/*
 * The effective configuration of a stage, compared member by member,
 * leaving out what the pipeline replaces with its own (clock, allocator,
 * listener, classifier). A member added to a stage's config must be
 * added here too, or a change of it alone carries the old object over.
 */
#define SAME(m_) (a->m_ == b->m_)

/* The same_*() comparisons below list every field of each stage config:
 * a field added to one of these structs must be compared there too, or a
 * reload that changes only that field would keep the old stage. These
 * sizes (LP64) fail the build when a struct grows, as a reminder. */
#if defined(__LP64__)
_Static_assert(sizeof(resil_breaker_config) == 128,
    "resil_breaker_config changed: update resil__same_breaker()");
_Static_assert(sizeof(resil_retry_config) == 232,
    "resil_retry_config changed: update resil__same_retry()");
_Static_assert(sizeof(resil_cache_config) == 56,
    "resil_cache_config changed: update resil__same_cache()");
_Static_assert(sizeof(resil_ratelimit_config) == 80,
    "resil_ratelimit_config changed: update resil__same_ratelimit()");
_Static_assert(sizeof(resil_bulkhead_config) == 184,
    "resil_bulkhead_config changed: update resil__same_bulkhead()");
#endif

int
resil__same_breaker(
    const resil_breaker_config *a, const resil_breaker_config *b)
{
	return SAME(consecutive_failures) && SAME(failure_rate_pct) &&
	    SAME(slow_rate_pct) && SAME(slow_threshold_ns) &&
	    SAME(min_calls) && SAME(window_type) && SAME(window_size) &&
	    SAME(bucket_ns) && SAME(open_wait_ns) &&
	    same_double(a->open_wait_multiplier, b->open_wait_multiplier) &&
	    SAME(open_wait_max_ns) && SAME(permitted_probes) &&
	    SAME(reopen_on_first_failure) && SAME(max_half_open_ns);
}

/* max_attempts aside (a method's own may override it). */
int
resil__same_retry(const resil_retry_config *a, const resil_retry_config *b)
{
	return SAME(backoff) && SAME(base_delay_ns) &&
	    same_double(a->multiplier, b->multiplier) && SAME(backoff_fn) &&
	    SAME(backoff_ctx) && SAME(max_delay_ns) && SAME(jitter) &&
	    same_double(a->jitter_factor, b->jitter_factor) &&
	    SAME(random.uniform) && SAME(random.ctx) && SAME(seed) &&
	    SAME(deadline_ns) && SAME(retry_on_failure) &&
	    SAME(retry_on_failure_ctx) && SAME(retry_on_result) &&
	    SAME(retry_on_result_ctx) && SAME(fail_after_max_attempts) &&
	    SAME(retry_on_open) &&
	    same_double(a->budget_ratio, b->budget_ratio) &&
	    SAME(budget_max_tokens) && SAME(budget_min_retries) &&
	    SAME(budget_period_ns) && SAME(retry_on_limited) &&
	    SAME(backoff_result_fn);
}

int
resil__same_cache(const resil_cache_config *a, const resil_cache_config *b)
{
	return SAME(max_entries) && SAME(max_bytes) && SAME(max_age) &&
	    SAME(shards);
}

int
resil__same_ratelimit(
    const resil_ratelimit_config *a, const resil_ratelimit_config *b)
{
	/* drain_on_throttled is the pipeline's (read from its settings):
	 * no reason for a new limiter. */
	return SAME(rate) && SAME(period_ns) && SAME(burst) && SAME(batch) &&
	    SAME(reserve_critical) && SAME(reserve_default);
}

int
resil__same_bulkhead(
    const resil_bulkhead_config *a, const resil_bulkhead_config *b)
{
	return SAME(max_concurrent) && SAME(adaptive) && SAME(min_limit) &&
	    SAME(max_limit) && SAME(target_latency_ns) && SAME(increase) &&
	    SAME(backoff_pct) && SAME(batch) && SAME(gradient.initial_limit) &&
	    SAME(gradient.min_limit) && SAME(gradient.max_limit) &&
	    same_double(a->gradient.smoothing, b->gradient.smoothing) &&
	    same_double(
	        a->gradient.rtt_tolerance, b->gradient.rtt_tolerance) &&
	    SAME(gradient.long_window) && SAME(gradient.long_warmup) &&
	    SAME(gradient.queue_size) && SAME(gradient.growth) &&
	    SAME(gradient.listener) && SAME(gradient.listener_ctx) &&
	    SAME(max_wait_ns) && SAME(queue) && SAME(order) &&
	    SAME(reserve_critical) && SAME(reserve_default);
}

#undef SAME

/* The handle of a declared name, made the first time the name is
 * declared (handles live as long as the pipeline). NULL: out of memory. */
static struct resil_method *
handle_for(resil_pipeline *p, const char *name)
{
	const resil_allocator *resil__a = &p->alloc;
	struct resil_method *h = NULL;

	HASH_FIND_STR(p->names, name, h);
	if (h != NULL)
		return h;
	h = resil__calloc(resil__a, sizeof(*h));
	if (h == NULL)
		return NULL;
	h->owner = p;
	h->idx = p->nnames;
	h->name = resil__strdup(resil__a, name);
	if (h->name == NULL) {
		resil__free(resil__a, h, sizeof(*h));
		return NULL;
	}
	/* Index 0 is the service-level handle, not in the table. */
	HASH_ADD_KEYPTR(hh, p->names, h->name, strlen(h->name), h);
	if (HASH_COUNT(p->names) != (size_t)p->nnames) {
		resil__strfree(resil__a, h->name);
		resil__free(resil__a, h, sizeof(*h));
		return NULL;
	}
	p->nnames++;
	return h;
}

/* The pipeline's "out of memory". */
static resil_err
nomem(resil_diag *diag)
{
	return resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
}

/*
 * A stage object into *slot_: old_'s (shared: its state carries over) when
 * there is one and same_ says its configuration is the same, else a new
 * part for the object make_ makes into obj_. Returns from the function
 * with the error when that fails.
 */
#define SHARE_OR_NEW(slot_, old_, same_, kind_, make_)                       \
	do {                                                                 \
		part *old_part_ = (old_);                                    \
		if (old_part_ != NULL && (same_)) {                          \
			*(slot_) = part_get(old_part_);                      \
		} else {                                                     \
			void *obj_ = NULL;                                   \
			resil_err err_ = (make_);                            \
			if (err_ != RESIL_OK)                                \
				return err_;                                 \
			if (part_new(p, (kind_), obj_, (slot_)) != RESIL_OK) \
				return nomem(diag);                          \
		}                                                            \
	} while (0)

static resil_err
new_ratelimit(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_ratelimit **out, resil_diag *diag)
{
	resil_ratelimit_config rc = cfg->ratelimit;

	rc.clock = &p->clock;
	rc.alloc = &p->alloc;
	rc.listener = resil__on_ratelimit;
	rc.listener_ctx = p;
	return resil_ratelimit_new(out, &rc, diag);
}

static resil_err
new_bulkhead(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_bulkhead **out, resil_diag *diag)
{
	resil_bulkhead_config bc = cfg->bulkhead;

	bc.clock = &p->clock;
	bc.alloc = &p->alloc;
	bc.listener = resil__on_bulkhead;
	bc.listener_ctx = p;
	return resil_bulkhead_new(out, &bc, diag);
}

static resil_err
new_cache(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_cache **out, resil_diag *diag)
{
	resil_cache_config cc = cfg->cache;

	cc.clock = &p->clock;
	cc.alloc = &p->alloc;
	return resil_cache_new(out, &cc, diag);
}

/* The service-level stage objects of g. */
static resil_err
build_stages(resil_pipeline *p, const resil_pipeline_config *cfg,
    const settings *old, settings *g, resil_diag *diag)
{
	if (cfg->breaker_enabled) {
		SHARE_OR_NEW(&g->pbreaker, old != NULL ? old->pbreaker : NULL,
		    resil__same_breaker(&old->cfg.breaker, &cfg->breaker),
		    PART_BREAKER,
		    new_breaker(p, cfg, (resil_breaker **)&obj_, diag));
		g->breaker = g->pbreaker->obj;
	}
	if (cfg->retry_enabled) {
		SHARE_OR_NEW(&g->pretry, old != NULL ? old->pretry : NULL,
		    resil__same_retry(&old->cfg.retry, &cfg->retry) &&
		        old->cfg.retry.max_attempts == cfg->retry.max_attempts,
		    PART_RETRY,
		    new_retry(p, cfg, 0, (resil_retry **)&obj_, diag));
		g->retry = g->pretry->obj;
	}
	if (cfg->ratelimit_enabled) {
		SHARE_OR_NEW(&g->prl, old != NULL ? old->prl : NULL,
		    resil__same_ratelimit(
		        &old->cfg.ratelimit, &cfg->ratelimit),
		    PART_RL,
		    new_ratelimit(p, cfg, (resil_ratelimit **)&obj_, diag));
		g->rl = g->prl->obj;
	}
	if (cfg->bulkhead_enabled) {
		SHARE_OR_NEW(&g->pbh, old != NULL ? old->pbh : NULL,
		    resil__same_bulkhead(&old->cfg.bulkhead, &cfg->bulkhead),
		    PART_BH,
		    new_bulkhead(p, cfg, (resil_bulkhead **)&obj_, diag));
		g->bh = g->pbh->obj;
	}
	if (cfg->throttle_enabled) {
		SHARE_OR_NEW(&g->pthr, old != NULL ? old->pthr : NULL,
		    resil__same_throttle(&old->cfg.throttle, &cfg->throttle),
		    PART_THR,
		    resil__new_throttle(p, cfg, (resil_throttle **)&obj_, diag));
		g->thr = g->pthr->obj;
	}
	if (cfg->cache_enabled) {
		SHARE_OR_NEW(&g->pcache, old != NULL ? old->pcache : NULL,
		    resil__same_cache(&old->cfg.cache, &cfg->cache),
		    PART_CACHE,
		    new_cache(p, cfg, (resil_cache **)&obj_, diag));
		g->cache = g->pcache->obj;
	}
	return RESIL_OK;
}

/* Whether the cluster's strategy runs the failover policy. */
static int
fails_over(const resil_pipeline *p, const resil_pipeline_config *cfg)
{
	return p->sel != NULL &&
	    (cfg->cluster.strategy == RESIL_CLUSTER_FAILOVER ||
	        cfg->cluster.strategy == RESIL_CLUSTER_ZONE_AWARE);
}

/* Declared method i of cfg, added to g's table before any further
 * failure (so that freeing the settings frees it), into *out. */
static resil_err
method_add(resil_pipeline *p, const resil_pipeline_config *cfg, settings *g,
    size_t i, method **out, resil_diag *diag)
{
	const resil_allocator *resil__a = &p->alloc;
	const resil_method_config *mc = &cfg->methods[i];
	struct resil_method *h = handle_for(p, mc->name);
	method *m = resil__calloc(resil__a, sizeof(*m));

	if (m == NULL || h == NULL) {
		if (m != NULL)
			resil__free(resil__a, m, sizeof(*m));
		return nomem(diag);
	}
	m->owner = p;
	m->idx = h->idx;
	m->name = resil__strdup(resil__a, mc->name);
	m->type = mc->type;
	m->timeout = mc->timeout_ns ? mc->timeout_ns : cfg->timeout_ns;
	m->fresh = mc->cache_fresh_ns;
	m->max_attempts = mc->max_attempts;
	m->prio = (uint8_t)mc->priority; /* issue 42 */
	m->declared = 1;
	if (mc->coalesce_max_waiters != 0) { /* issue 43 */
		m->coal = resil__calloc(resil__a, sizeof(*m->coal));
		if (m->coal == NULL) {
			free_method(p, m);
			resil__free(resil__a, m, sizeof(*m));
			return nomem(diag);
		}
		resil__coal_init(m->coal, mc->coalesce_max_waiters);
	}
	if (mc->mock != NULL) {
		m->mock_spec = resil__strdup(resil__a, mc->mock);
		m->mock_set = 1;
	}
	if (m->name == NULL) {
		free_method(p, m);
		resil__free(resil__a, m, sizeof(*m));
		return nomem(diag);
	}
	/* uthash cannot fail to add here: HASH_NONFATAL_OOM leaves the
	 * table as it was. */
	HASH_ADD_KEYPTR(hh, g->methods, m->name, strlen(m->name), m);
	if (HASH_COUNT(g->methods) != i + 1) {
		free_method(p, m);
		resil__free(resil__a, m, sizeof(*m));
		return nomem(diag);
	}
	if (mc->mock != NULL && m->mock_spec == NULL)
		return nomem(diag);
	*out = m;
	return RESIL_OK;
}

/* The stage objects of declared method m (its own retry policy and
 * breaker, the cluster's failover policy); om: its old settings, or
 * NULL. */
static resil_err
method_stages(resil_pipeline *p, const resil_pipeline_config *cfg,
    const settings *old, const method *om, method *m,
    const resil_method_config *mc, resil_diag *diag)
{
	resil_err err;

	if (mc->max_attempts != 0) {
		SHARE_OR_NEW(&m->pretry, om != NULL ? om->pretry : NULL,
		    om->max_attempts == mc->max_attempts &&
		        resil__same_retry(&old->cfg.retry, &cfg->retry),
		    PART_RETRY,
		    resil__diag_prefix(diag,
		        new_retry(p, cfg, mc->max_attempts,
		            (resil_retry **)&obj_, diag),
		        mc->name));
		m->retry = m->pretry->obj;
	}
	if (cfg->breaker_enabled && cfg->breaker_per_method) {
		SHARE_OR_NEW(&m->pbreaker, om != NULL ? om->pbreaker : NULL,
		    resil__same_breaker(&old->cfg.breaker, &cfg->breaker),
		    PART_BREAKER,
		    new_breaker(p, cfg, (resil_breaker **)&obj_, diag));
		m->breaker = m->pbreaker->obj;
	}
	if (mc->max_attempts != 0 && fails_over(p, cfg)) {
		err = new_cretry(p, cfg, mc->max_attempts, &m->cretry, diag);
		if (err != RESIL_OK)
			return resil__diag_prefix(diag, err, mc->name);
	}
	return RESIL_OK;
}

/* Every declared method of cfg into g; *any_mock set when one has a mock
 * spec. */
static resil_err
build_methods(resil_pipeline *p, const resil_pipeline_config *cfg,
    const settings *old, settings *g, int *any_mock, resil_diag *diag)
{
	size_t i;
	resil_err err;

	for (i = 0; i < cfg->nmethods; i++) {
		const resil_method_config *mc = &cfg->methods[i];
		const method *om = old != NULL ? find_in(old, mc->name) : NULL;
		method *m = NULL;

		err = method_add(p, cfg, g, i, &m, diag);
		if (err != RESIL_OK)
			return err;
		if (mc->mock != NULL)
			*any_mock = 1;
		err = method_stages(p, cfg, old, om, m, mc, diag);
		if (err != RESIL_OK)
			return err;
	}
	return RESIL_OK;
}

/* Handles by index: every name declared so far has one; those not
 * declared in g run with the service-level settings. */
static resil_err
index_methods(resil_pipeline *p, settings *g, resil_diag *diag)
{
	method *it, *tmp;
	uint32_t i;

	g->byidx = resil__alloc(&p->alloc, p->nnames * sizeof(method *));
	if (g->byidx == NULL)
		return nomem(diag);
	g->nidx = p->nnames;
	for (i = 0; i < g->nidx; i++)
		g->byidx[i] = &g->dflt;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		/* cppcheck-suppress uninitvar ; it is set by HASH_ITER */
		g->byidx[it->idx] = it;
	}
	return RESIL_OK;
}

/* The mock stage of g: the service spec, and the resil_mock when any
 * spec (or a registry) is configured. */
static resil_err
build_mock_stage(resil_pipeline *p, const resil_pipeline_config *cfg,
    settings *g, int any_mock, resil_diag *diag)
{
	if (cfg->mock != NULL) {
		g->service_spec = resil__strdup(&p->alloc, cfg->mock);
		if (g->service_spec == NULL)
			return nomem(diag);
	}
	if (any_mock || p->registry != NULL) {
		resil_err err = resil__build_mock(
		    p, g, g->service_spec, NULL, NULL, 0, &g->mock, diag);

		g->mock_forces = g->mock != NULL &&
		    resil__mock_may_force(g->mock) ? 1 : 0;
		return err;
	}
	return RESIL_OK;
}

/* The chain: cache, then the mock, then user handlers. */
static resil_err
build_chain(resil_pipeline *p, settings *g, resil_diag *diag)
{
	resil_err err;
	size_t i;

	err = resil_fallback_new(&g->fb, NULL, diag);
	if (err != RESIL_OK)
		return err;
	if (g->cache != NULL) {
		err = resil_fallback_add_cache(g->fb, g->cache);
		if (err != RESIL_OK)
			return err;
	}
	err = resil_fallback_add_handler(g->fb, resil__mock_handler, g);
	if (err != RESIL_OK)
		return err;
	for (i = 0; i < p->handlers; i++) {
		err = resil_fallback_add_handler(
		    g->fb, p->hlist[i].fn, p->hlist[i].ctx);
		if (err != RESIL_OK)
			return err;
	}
	return RESIL_OK;
}

/* The chaos m's attempts ask: its own, else the pipeline's; NULL when
 * that one has no strategy configured (it can never inject: the attempt
 * path then skips it with the NULL test it always makes). */
static resil_chaos *
method_chaos(const resil_pipeline *p, const method *m)
{
	resil_chaos *ch = resil_chaos_method(p->chaos, m->name);
	resil_chaos_metrics mt;

	if (resil_chaos_get_metrics(ch, &mt) != RESIL_OK || mt.configured == 0)
		return NULL;
	return ch;
}

resil_chaos *
resil_pipeline_chaos(resil_pipeline *p, const char *name)
{
	settings *g;
	unsigned st;
	int declared;

	if (p == NULL || name == NULL)
		return p != NULL ? p->chaos : NULL;
	/* A name the settings do not declare runs with the service-level
	 * settings, and asks the pipeline's chaos. */
	g = conf_hold(p, &st);
	declared = find_in(g, name) != NULL;
	conf_drop(g);
	return declared ? resil_chaos_method(p->chaos, name) : p->chaos;
}

/* Decided once: what a call of m does before attempt 1, and whether the
 * blocking driver may run its first step inline. */
static void
decide_start(const resil_pipeline *p, const settings *g, method *m)
{
	const resil_retry *r = m->retry != NULL ? m->retry : g->retry;

	m->chaos = method_chaos(p, m);
	m->timed_bh = g->bh != NULL && g->cfg.bulkhead.adaptive != 0;

	m->retry_fast = r != NULL && resil__retry_fast_ok(r);
	m->start = p->sel != NULL         ? START_CLUSTER
	    : r != NULL && !m->retry_fast ? START_RUN
	                                  : START_NONE;
	method_run_with(m, m->breaker != NULL ? m->breaker : g->breaker,
	    m->retry != NULL ? m->retry : g->retry);
	/* A read-through method (m->fresh) starts in the machine, which
	 * asks the cache first (mstart()). */
	m->simple = (r == NULL || m->retry_fast) && g->rl == NULL &&
	        g->bh == NULL && g->thr == NULL && p->hedge_max == 0 &&
	        p->call_events == 0 && p->sel == NULL && m->fresh == 0 &&
	        m->coal == NULL
	    ? SIMPLE_INLINE |
	        (p->cls.fn != NULL ? 0
	                : m->timeout != 0 ? SIMPLE_PHASE_T
	                                  : SIMPLE_PHASE) |
	        (m->timeout != 0 ? SIMPLE_TIMED : 0)
	    : 0;
	/* A timed call measures its duration itself: its grant is on the
	 * breaker's state word whatever the breaker's timing. */
	if ((m->simple & SIMPLE_TIMED) && m->run_breaker != NULL)
		m->run_bf.acq_word = m->run_bf.word;
	/* Issue 41: the call machine gates a keyed pipeline's calls in
	 * start_other() (lib/call.c) and records them as they end, so its
	 * methods skip the simple phase (which ends without the machine). */
	if (p->keyed != NULL)
		m->simple &= ~(SIMPLE_PHASE | SIMPLE_PHASE_T);
}

void
resil__settings_no_phase(settings *g)
{
	method *it, *tmp;

	g->dflt.simple &= ~(SIMPLE_PHASE | SIMPLE_PHASE_T);
	HASH_ITER(hh, g->methods, it, tmp)
	{
		it->simple &= ~(SIMPLE_PHASE | SIMPLE_PHASE_T);
	}
}

resil_err
resil__settings_build(resil_pipeline *p, const resil_pipeline_config *cfg,
    const settings *old, settings **out, resil_diag *diag)
{
	settings *g;
	resil_err err;
	int any_mock = !spec_is_none(cfg->mock);
	method *it, *tmp;

	g = shell_take(p);
	if (g == NULL)
		return nomem(diag);
	memcpy(&g->cfg, cfg, sizeof(g->cfg));
	/* Held while the settings live (dropped by settings_clear): a
	 * chaos made from text outlives its resil_config. */
	resil_chaos_ref(g->cfg.chaos);
	g->timeout = cfg->timeout_ns;
	g->dflt.owner = p;
	g->dflt.type = RESIL_TYPE_ANY;
	g->dflt.timeout = cfg->timeout_ns;
	err = build_stages(p, cfg, old, g, diag);
	if (err == RESIL_OK)
		err = build_methods(p, cfg, old, g, &any_mock, diag);
	if (err == RESIL_OK && fails_over(p, cfg))
		err = new_cretry(p, cfg, (uint32_t)cfg->cluster.retries + 1,
		    &g->cretry, diag);
	if (err == RESIL_OK)
		err = index_methods(p, g, diag);
	if (err == RESIL_OK)
		err = build_mock_stage(p, cfg, g, any_mock, diag);
	if (err == RESIL_OK)
		err = build_chain(p, g, diag);
	if (err != RESIL_OK) {
		/* Never published: back to the free shells. */
		shell_put(p, g);
		return err;
	}
	decide_start(p, g, &g->dflt);
	HASH_ITER(hh, g->methods, it, tmp)
	{
		decide_start(p, g, it);
	}
	*out = g;
	return RESIL_OK;
}

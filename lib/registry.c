/*
 * The named registry of pipelines and the Prometheus exposition of their
 * metrics.
 */
#include <resil/pipeline_keyed.h>
#include <resil/registry.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "atomic.h"
#include "internal.h"
#include "keyed_prom.h"
#include "prom_text.h"

/* A failed table insert sets this flag instead of exiting. */
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(obj) (resil__oom = 1)
#include <uthash.h>

typedef struct entry {
	const char *name; /* the pipeline's own service string */
	resil_pipeline *p;
	UT_hash_handle hh;
} entry;

struct resil_registry {
	/* Reader-writer spin lock: the low bits count readers, WRITER marks
	 * a writer that holds or waits for the lock. Lookups are a hash
	 * probe, add and remove a few table operations, so spinning costs
	 * less than a kernel lock on the paths that matter. */
	uint64_t lock;
	resil_allocator alloc;
	size_t key_max_series;
	entry *table;
};

#define WRITER (UINT64_C(1) << 63)

static void
read_lock(resil_registry *r)
{
	for (;;) {
		uint64_t v = resil__load64(&r->lock);

		/* A waiting writer blocks new readers, so a stream of
		 * lookups cannot starve add and remove. */
		if ((v & WRITER) == 0 && resil__cas64(&r->lock, v, v + 1))
			return;
		resil__stall();
	}
}

static void
read_unlock(resil_registry *r)
{
	resil__faa64(&r->lock, UINT64_MAX); /* minus one */
}

static void
write_lock(resil_registry *r)
{
	for (;;) {
		uint64_t v = resil__load64(&r->lock);

		if ((v & WRITER) == 0 && resil__cas64(&r->lock, v, v | WRITER))
			break;
		resil__stall();
	}
	while (resil__load64(&r->lock) != WRITER)
		resil__stall();
}

static void
write_unlock(resil_registry *r)
{
	/* No reader can have come in while WRITER was set. */
	resil__store64(&r->lock, 0);
}

resil_err
resil_registry_new(
    resil_registry **out, const resil_registry_config *cfg, resil_diag *diag)
{
	resil_registry_config c;
	resil_registry *r;
	const resil_allocator *a;

	if (out == NULL || cfg == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "registry: NULL %s",
		    out == NULL ? "out" : "cfg");
	resil_registry_config_init(&c);
	/* The size before key_max_series (issue 41) is known too. */
	if (cfg->size != sizeof(c) &&
	    cfg->size != offsetof(resil_registry_config, key_max_series))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.size: %zu is not a known "
		    "resil_registry_config size",
		    cfg->size);
	memcpy(&c, cfg, cfg->size);
	c.size = sizeof(c);
	if (c.key_max_series > 1000000)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.key_max_series: %zu is over 1000000",
		    c.key_max_series);
	a = resil__allocator(c.alloc);
	r = resil__calloc(a, sizeof(*r));
	if (r == NULL)
		return RESIL_E_NOMEM;
	r->alloc = *a;
	r->key_max_series = c.key_max_series;
	r->table = NULL;
	*out = r;
	return RESIL_OK;
}

void
resil_registry_free(resil_registry *reg)
{
	const resil_allocator *resil__a;
	entry *e, *tmp;
	resil_allocator a;

	if (reg == NULL)
		return;
	a = reg->alloc;
	resil__a = &a;
	HASH_ITER(hh, reg->table, e, tmp)
	{
		HASH_DEL(reg->table, e);
		resil_pipeline_free(e->p);
		resil__free(resil__a, e, sizeof(*e));
	}
	resil__free(resil__a, reg, sizeof(*reg));
}

resil_err
resil_registry_add(resil_registry *reg, resil_pipeline *p, resil_diag *diag)
{
	const resil_allocator *resil__a;
	const char *name;
	entry *e, *old = NULL;
	size_t n;
	int resil__oom = 0;

	if (reg == NULL || p == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "registry: NULL %s",
		    reg == NULL ? "registry" : "pipeline");
	resil__a = &reg->alloc;
	name = resil_pipeline_service(p);
	n = strlen(name);
	/* Allocate outside the lock: lookups need not wait for malloc. */
	e = resil__alloc(resil__a, sizeof(*e));
	if (e == NULL)
		return RESIL_E_NOMEM;
	memset(e, 0, sizeof(*e));
	e->name = name;
	e->p = p;
	write_lock(reg);
	HASH_FIND(hh, reg->table, name, n, old);
	if (old == NULL)
		HASH_ADD_KEYPTR(hh, reg->table, e->name, n, e);
	write_unlock(reg);
	if (old != NULL) {
		resil__free(resil__a, e, sizeof(*e));
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry: service \"%s\" is already registered", name);
	}
	if (resil__oom) {
		/* uthash left the table as it was. */
		resil__free(resil__a, e, sizeof(*e));
		return RESIL_E_NOMEM;
	}
	return RESIL_OK;
}

resil_err
resil_registry_remove(
    resil_registry *reg, const char *service, resil_pipeline **out)
{
	const resil_allocator *resil__a;
	entry *e = NULL;
	resil_pipeline *p;

	if (reg == NULL || service == NULL)
		return RESIL_E_INVAL;
	resil__a = &reg->alloc;
	write_lock(reg);
	HASH_FIND_STR(reg->table, service, e);
	if (e != NULL)
		HASH_DEL(reg->table, e);
	write_unlock(reg);
	if (e == NULL)
		return RESIL_E_NOTFOUND;
	p = e->p;
	resil__free(resil__a, e, sizeof(*e));
	if (out != NULL)
		*out = p;
	else
		resil_pipeline_free(p);
	return RESIL_OK;
}

resil_err
resil_registry_lookup(
    resil_registry *reg, const char *service, resil_pipeline **out)
{
	entry *e = NULL;
	resil_pipeline *p = NULL;

	if (reg == NULL || service == NULL || out == NULL)
		return RESIL_E_INVAL;
	read_lock(reg);
	HASH_FIND_STR(reg->table, service, e);
	if (e != NULL)
		p = e->p;
	read_unlock(reg);
	if (p == NULL)
		return RESIL_E_NOTFOUND;
	*out = p;
	return RESIL_OK;
}

size_t
resil_registry_count(resil_registry *reg)
{
	size_t n;

	if (reg == NULL)
		return 0;
	read_lock(reg);
	n = HASH_COUNT(reg->table);
	read_unlock(reg);
	return n;
}

resil_err
resil_registry_foreach(
    resil_registry *reg, resil_registry_visit_fn fn, void *ctx)
{
	entry *e;

	if (reg == NULL || fn == NULL)
		return RESIL_E_INVAL;
	read_lock(reg);
	for (e = reg->table; e != NULL; e = e->hh.next)
		if (fn(e->p, ctx) != 0)
			break;
	read_unlock(reg);
	return RESIL_OK;
}

/* ---------------------------------------------------------------- */
/* Snapshots                                                          */
/* ---------------------------------------------------------------- */

/* A breaker or retry policy of a pipeline: the service's (method NULL)
 * or one of a declared method's own. */
typedef struct bsnap {
	const char *method;
	resil_breaker_metrics m;
} bsnap;

typedef struct rsnap {
	const char *method;
	resil_retry_metrics m;
} rsnap;

typedef struct psnap {
	const char *service;
	resil_pipeline_metrics pm;
	bsnap *b;
	size_t nb;
	rsnap *r;
	size_t nr;
	int has_cache, has_rl, has_bh, has_thr;
	resil_cache_stats cs;
	resil_ratelimit_metrics rl;
	resil_bulkhead_metrics bh;
	resil_throttle_metrics thr; /* issue 42: the throttle stage */
} psnap;

typedef struct snapshot {
	psnap *p;
	size_t np;
	resil__kfam *k; /* issue 41: every pipeline's keyed families */
	size_t nk;
	bsnap *b; /* every pipeline's breakers, one array */
	size_t bcap;
	rsnap *r;
	size_t rcap;
	int any_b, any_r, any_cache, any_rl, any_bh, any_thr;
} snapshot;

static void
snap_free(const resil_allocator *a, snapshot *s)
{
	if (s->p != NULL)
		resil__free(a, s->p, sizeof(*s->p) * s->np);
	if (s->b != NULL)
		resil__free(a, s->b, sizeof(*s->b) * s->bcap);
	if (s->r != NULL)
		resil__free(a, s->r, sizeof(*s->r) * s->rcap);
	if (s->k != NULL) {
		size_t i;

		for (i = 0; i < s->nk; i++)
			resil__ktop_free(&s->k[i].top);
		resil__free(a, s->k, sizeof(*s->k) * s->np * RESIL_KEYED_KINDS);
	}
}

/* The breakers of p, each once: the service's first, then each declared
 * method's own. Returns how many were stored in out (which has room for
 * method_count + 1). */
static size_t
collect_breakers(resil_pipeline *p, bsnap *out)
{
	size_t i, n = 0, nm = resil_pipeline_method_count(p);
	resil_breaker *svc = resil_pipeline_breaker(p, NULL);

	if (svc != NULL) {
		out[n].method = NULL;
		resil_breaker_get_metrics(svc, &out[n].m);
		n++;
	}
	for (i = 0; i < nm; i++) {
		const char *name = resil_pipeline_method_name(p, i);
		resil_breaker *b = resil_pipeline_breaker(p, name);
		/* A method's own breaker is its alone (the pipeline makes one
		 * per declared method); others resolve to the service's. */
		if (b == NULL || b == svc)
			continue;
		out[n].method = name;
		resil_breaker_get_metrics(b, &out[n].m);
		n++;
	}
	return n;
}

static size_t
collect_retries(resil_pipeline *p, rsnap *out)
{
	size_t i, n = 0, nm = resil_pipeline_method_count(p);
	resil_retry *svc = resil_pipeline_retry(p, NULL);

	if (svc != NULL) {
		out[n].method = NULL;
		resil_retry_get_metrics(svc, &out[n].m);
		n++;
	}
	for (i = 0; i < nm; i++) {
		const char *name = resil_pipeline_method_name(p, i);
		resil_retry *r = resil_pipeline_retry(p, name);
		if (r == NULL || r == svc) /* as for breakers, above */
			continue;
		out[n].method = name;
		resil_retry_get_metrics(r, &out[n].m);
		n++;
	}
	return n;
}

/* Issue 41: each pipeline's keyed families, their top keys copied (each
 * family's lock is held for its own pass only). */
static resil_err
snap_keyed(resil_registry *reg, snapshot *s)
{
	const resil_allocator *a = &reg->alloc;
	entry *e;
	int kind;

	s->k = resil__calloc(a, sizeof(*s->k) * s->np * RESIL_KEYED_KINDS);
	if (s->k == NULL) {
		snap_free(a, s);
		return RESIL_E_NOMEM;
	}
	for (e = reg->table; e != NULL; e = e->hh.next)
		for (kind = 0; kind < RESIL_KEYED_KINDS; kind++) {
			resil_keyed *k =
			    resil_pipeline_keyed(e->p, (resil_keyed_kind)kind);
			resil__kfam *f = &s->k[s->nk];

			if (k == NULL)
				continue;
			f->service = resil_pipeline_service(e->p);
			f->kind = (resil_keyed_kind)kind;
			(void)resil_keyed_get_metrics(k, &f->km);
			if (resil__ktop_take(&f->top, k, -1,
			        reg->key_max_series, a) != RESIL_OK) {
				snap_free(a, s);
				return RESIL_E_NOMEM;
			}
			resil__kfam_overflow(f, k);
			s->nk++;
		}
	return RESIL_OK;
}

/* Under the read lock: every figure of every pipeline, so that each
 * family can then be written for all pipelines in turn (the format
 * wants a family's samples together) from one reading. */
static resil_err
snap_take(resil_registry *reg, snapshot *s)
{
	const resil_allocator *a = &reg->alloc;
	entry *e;
	size_t i, nm = 0, bused = 0, rused = 0;

	memset(s, 0, sizeof(*s));
	s->np = HASH_COUNT(reg->table);
	if (s->np == 0)
		return RESIL_OK;
	for (e = reg->table; e != NULL; e = e->hh.next)
		nm += resil_pipeline_method_count(e->p) + 1;
	s->p = resil__calloc(a, sizeof(*s->p) * s->np);
	s->bcap = nm;
	s->rcap = nm;
	s->b = resil__calloc(a, sizeof(*s->b) * nm);
	s->r = resil__calloc(a, sizeof(*s->r) * nm);
	if (s->p == NULL || s->b == NULL || s->r == NULL) {
		snap_free(a, s);
		return RESIL_E_NOMEM;
	}
	for (e = reg->table, i = 0; e != NULL; e = e->hh.next, i++) {
		psnap *ps = &s->p[i];
		resil_cache *c = resil_pipeline_cache(e->p);
		resil_ratelimit *rl = resil_pipeline_ratelimit(e->p);
		resil_bulkhead *bh = resil_pipeline_bulkhead(e->p);
		resil_throttle *thr = resil_pipeline_throttle(e->p);

		ps->service = resil_pipeline_service(e->p);
		resil_pipeline_get_metrics(e->p, &ps->pm);
		ps->b = s->b + bused;
		ps->nb = collect_breakers(e->p, ps->b);
		bused += ps->nb;
		ps->r = s->r + rused;
		ps->nr = collect_retries(e->p, ps->r);
		rused += ps->nr;
		ps->has_cache =
		    c != NULL && resil_cache_stats_get(c, &ps->cs) == RESIL_OK;
		ps->has_rl = rl != NULL &&
		    resil_ratelimit_get_metrics(rl, &ps->rl) == RESIL_OK;
		ps->has_bh = bh != NULL &&
		    resil_bulkhead_get_metrics(bh, &ps->bh) == RESIL_OK;
		s->any_b |= ps->nb != 0;
		s->any_r |= ps->nr != 0;
		s->any_cache |= ps->has_cache;
		s->any_rl |= ps->has_rl;
		s->any_bh |= ps->has_bh;
		ps->has_thr = thr != NULL &&
		    resil_throttle_get_metrics(thr, &ps->thr) == RESIL_OK;
		s->any_thr |= ps->has_thr;
	}
	return snap_keyed(reg, s);
}

/* ---------------------------------------------------------------- */
/* Writing                                                            */
/* ---------------------------------------------------------------- */

/* One writer for the registry's text and the keyed families'
 * (lib/prom_text.c). */
typedef resil__prom writer;

static void
family(writer *w, const char *name, const char *type, const char *help)
{
	resil__prom_head(w, name, type, help);
}

/* name{service="S"[,method="M"][,key="val"] and the space before the
 * value. */
static void
sample_start(writer *w, const char *name, const char *service,
    const char *method, const char *key, const char *val)
{
	resil__prom_puts(w, name);
	resil__prom_puts(w, "{service=\"");
	resil__prom_escaped(w, service);
	resil__prom_put(w, "\"", 1);
	if (method != NULL) {
		resil__prom_puts(w, ",method=\"");
		resil__prom_escaped(w, method);
		resil__prom_put(w, "\"", 1);
	}
	if (key != NULL) {
		resil__prom_put(w, ",", 1);
		resil__prom_puts(w, key);
		resil__prom_puts(w, "=\"");
		resil__prom_escaped(w, val);
		resil__prom_put(w, "\"", 1);
	}
	resil__prom_puts(w, "} ");
}

static void
sample_u64(writer *w, const char *name, const char *service,
    const char *method, const char *key, const char *val, uint64_t v)
{
	sample_start(w, name, service, method, key, val);
	resil__prom_u64(w, v);
	resil__prom_put(w, "\n", 1);
}

static void
sample_double(writer *w, const char *name, const char *service,
    const char *method, const char *key, const char *val, double v)
{
	sample_start(w, name, service, method, key, val);
	resil__prom_double(w, v);
	resil__prom_put(w, "\n", 1);
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t
sat_mul(uint64_t a, uint64_t b)
{
	return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

/* Bucket i of the pipeline's histogram holds durations d with
 * 2^(i-1) <= d < 2^i (bucket 0: d == 0), so its inclusive upper bound,
 * Prometheus's le, is 2^i - 1. The last bucket is open-ended: it is only
 * in le="+Inf". */
static void
write_latency(writer *w, const snapshot *s)
{
	static const char *name = "resil_pipeline_latency_ticks";
	static const double qs[] = { 0.5, 0.9, 0.99 };
	static const char *qnames[] = { "0.5", "0.9", "0.99" };
	size_t i, j;

	family(w, name, "histogram",
	    "Duration of the timed calls (pipelines with a timeout), in "
	    "clock ticks. _sum is an upper bound: each call counts as its "
	    "bucket's upper bound (the open last bucket as its lower "
	    "bound, 2^46).");
	for (i = 0; i < s->np; i++) {
		const psnap *ps = &s->p[i];
		uint64_t cum = 0, sum = 0;
		char le[24];

		for (j = 0; j + 1 < RESIL_LATENCY_BUCKETS; j++) {
			uint64_t ub = (UINT64_C(1) << j) - 1;

			cum += ps->pm.latency[j];
			sum = sat_add(sum, sat_mul(ps->pm.latency[j], ub));
			snprintf(
			    le, sizeof(le), "%llu", (unsigned long long)ub);
			sample_u64(w, "resil_pipeline_latency_ticks_bucket",
			    ps->service, NULL, "le", le, cum);
		}
		cum += ps->pm.latency[j];
		sum = sat_add(
		    sum, sat_mul(ps->pm.latency[j], UINT64_C(1) << (j - 1)));
		sample_u64(w, "resil_pipeline_latency_ticks_bucket",
		    ps->service, NULL, "le", "+Inf", cum);
		sample_u64(w, "resil_pipeline_latency_ticks_sum", ps->service,
		    NULL, NULL, NULL, sum);
		/* The count is the sum of the buckets, not latency_count:
		 * the format requires it to equal the +Inf bucket, and the
		 * two counters are read at slightly different times. */
		sample_u64(w, "resil_pipeline_latency_ticks_count",
		    ps->service, NULL, NULL, NULL, cum);
	}
	family(w, "resil_pipeline_latency_quantile_ticks", "gauge",
	    "Latency quantiles of the timed calls, in clock ticks: the "
	    "upper bound of the histogram bucket holding the quantile; NaN "
	    "before the first timed call.");
	for (i = 0; i < s->np; i++) {
		const psnap *ps = &s->p[i];
		uint64_t total = 0;

		for (j = 0; j < RESIL_LATENCY_BUCKETS; j++)
			total += ps->pm.latency[j];
		for (j = 0; j < 3; j++)
			sample_double(w,
			    "resil_pipeline_latency_quantile_ticks",
			    ps->service, NULL, "q", qnames[j],
			    total == 0 ? NAN
			               : (double)resil_latency_quantile(
			                     &ps->pm, qs[j]));
	}
}

static void
write_pipelines(writer *w, const snapshot *s)
{
	size_t i;

	family(w, "resil_pipeline_calls_total", "counter",
	    "Calls made through the pipeline.");
	for (i = 0; i < s->np; i++)
		sample_u64(w, "resil_pipeline_calls_total", s->p[i].service,
		    NULL, NULL, NULL, s->p[i].pm.calls);
	family(w, "resil_pipeline_results_total", "counter",
	    "Calls answered, by the source of the answer.");
	for (i = 0; i < s->np; i++) {
		const psnap *ps = &s->p[i];
		const struct {
			const char *src;
			uint64_t v;
		} r[] = { { "live", ps->pm.live }, { "cache", ps->pm.cache },
			{ "mock", ps->pm.mock },
			{ "fallback", ps->pm.fallback },
			{ "unavailable", ps->pm.unavailable },
			{ "error", ps->pm.errors },
			{ "business", ps->pm.business } };
		size_t j;

		for (j = 0; j < sizeof(r) / sizeof(r[0]); j++)
			sample_u64(w, "resil_pipeline_results_total",
			    ps->service, NULL, "source", r[j].src, r[j].v);
	}
	family(w, "resil_pipeline_timeouts_total", "counter",
	    "Attempts that returned after their timeout.");
	for (i = 0; i < s->np; i++)
		sample_u64(w, "resil_pipeline_timeouts_total", s->p[i].service,
		    NULL, NULL, NULL, s->p[i].pm.timeouts);
	write_latency(w, s);
}

static void
write_breakers(writer *w, const snapshot *s)
{
	static const char *states[] = { "closed", "open", "half_open",
		"disabled", "forced_open", "metrics_only" };
	size_t i, j, k;

	if (!s->any_b)
		return;
	family(w, "resil_breaker_calls_total", "counter",
	    "Outcomes recorded by the circuit breaker, by kind.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++) {
			const bsnap *b = &s->p[i].b[j];

			sample_u64(w, "resil_breaker_calls_total",
			    s->p[i].service, b->method, "kind", "successful",
			    b->m.successes);
			sample_u64(w, "resil_breaker_calls_total",
			    s->p[i].service, b->method, "kind", "failed",
			    b->m.failures);
			sample_u64(w, "resil_breaker_calls_total",
			    s->p[i].service, b->method, "kind", "ignored",
			    b->m.ignored);
		}
	family(w, "resil_breaker_slow_calls_total", "counter",
	    "Calls recorded slower than the breaker's slow-call threshold.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++)
			sample_u64(w, "resil_breaker_slow_calls_total",
			    s->p[i].service, s->p[i].b[j].method, NULL, NULL,
			    s->p[i].b[j].m.slow_calls);
	family(w, "resil_breaker_rejections_total", "counter",
	    "Calls rejected by the open circuit breaker.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++)
			sample_u64(w, "resil_breaker_rejections_total",
			    s->p[i].service, s->p[i].b[j].method, NULL, NULL,
			    s->p[i].b[j].m.rejections);
	family(w, "resil_breaker_transitions_total", "counter",
	    "State transitions of the circuit breaker.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++)
			sample_u64(w, "resil_breaker_transitions_total",
			    s->p[i].service, s->p[i].b[j].method, NULL, NULL,
			    s->p[i].b[j].m.transitions);
	family(w, "resil_breaker_state", "gauge",
	    "The circuit breaker's state: 1 for the current state, 0 for the "
	    "others.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++)
			for (k = 0; k < 6; k++)
				sample_u64(w, "resil_breaker_state",
				    s->p[i].service, s->p[i].b[j].method,
				    "state", states[k],
				    (uint64_t)((size_t)s->p[i].b[j].m.state ==
				        k));
	family(w, "resil_breaker_failure_rate", "gauge",
	    "Failure rate of the breaker's sliding window, in percent; -1 "
	    "below min_calls.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++)
			sample_double(w, "resil_breaker_failure_rate",
			    s->p[i].service, s->p[i].b[j].method, NULL, NULL,
			    (double)s->p[i].b[j].m.failure_rate);
	family(w, "resil_breaker_slow_call_rate", "gauge",
	    "Slow-call rate of the breaker's sliding window, in percent; -1 "
	    "below min_calls.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nb; j++)
			sample_double(w, "resil_breaker_slow_call_rate",
			    s->p[i].service, s->p[i].b[j].method, NULL, NULL,
			    (double)s->p[i].b[j].m.slow_call_rate);
}

static void
write_retries(writer *w, const snapshot *s)
{
	size_t i, j;

	if (!s->any_r)
		return;
	family(w, "resil_retry_calls_total", "counter",
	    "Calls run by the retry policy, by how they ended.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nr; j++) {
			const rsnap *r = &s->p[i].r[j];
			const char *svc = s->p[i].service;

			sample_u64(w, "resil_retry_calls_total", svc,
			    r->method, "kind", "successful_without_retry",
			    r->m.succeeded_without_retry);
			sample_u64(w, "resil_retry_calls_total", svc,
			    r->method, "kind", "successful_with_retry",
			    r->m.succeeded_after_retry);
			sample_u64(w, "resil_retry_calls_total", svc,
			    r->method, "kind", "failed_without_retry",
			    r->m.failed_without_retry);
			sample_u64(w, "resil_retry_calls_total", svc,
			    r->method, "kind", "failed_with_retry",
			    r->m.failed_after_retry);
		}
	family(w, "resil_retry_attempts_total", "counter",
	    "Attempts made by the retry policy, the first ones included.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nr; j++)
			sample_u64(w, "resil_retry_attempts_total",
			    s->p[i].service, s->p[i].r[j].method, NULL, NULL,
			    s->p[i].r[j].m.attempts);
	family(w, "resil_retry_stops_total", "counter",
	    "Calls the retry policy stopped retrying, by reason.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nr; j++) {
			const rsnap *r = &s->p[i].r[j];
			const char *svc = s->p[i].service;

			sample_u64(w, "resil_retry_stops_total", svc,
			    r->method, "reason", "exhausted", r->m.exhausted);
			sample_u64(w, "resil_retry_stops_total", svc,
			    r->method, "reason", "deadline",
			    r->m.deadline_stops);
			sample_u64(w, "resil_retry_stops_total", svc,
			    r->method, "reason", "budget",
			    r->m.budget_refusals);
		}
	family(w, "resil_retry_budget_tokens", "gauge",
	    "Tokens in the retry budget's bank.");
	for (i = 0; i < s->np; i++)
		for (j = 0; j < s->p[i].nr; j++)
			sample_double(w, "resil_retry_budget_tokens",
			    s->p[i].service, s->p[i].r[j].method, NULL, NULL,
			    s->p[i].r[j].m.budget_tokens);
}

typedef uint64_t (*getter)(const psnap *ps);

/* One sample per pipeline that has the stage (which: 0 cache, 1 rate
 * limiter, 2 bulkhead, 3 throttle). */
static void
per_stage(writer *w, const snapshot *s, int which, const char *name,
    const char *type, const char *help, getter get)
{
	size_t i;

	family(w, name, type, help);
	for (i = 0; i < s->np; i++) {
		const psnap *ps = &s->p[i];
		int has = which == 0 ? ps->has_cache
		    : which == 1     ? ps->has_rl
		    : which == 2     ? ps->has_bh
		                     : ps->has_thr;

		if (has)
			sample_u64(
			    w, name, ps->service, NULL, NULL, NULL, get(ps));
	}
}

#define GETTER(stage, f)                                   \
	static uint64_t get_##stage##_##f(const psnap *ps) \
	{                                                  \
		return (uint64_t)ps->stage.f;              \
	}
GETTER(cs, hits)
GETTER(cs, misses)
GETTER(cs, stale)
GETTER(cs, evictions)
GETTER(cs, entries)
GETTER(cs, bytes)
GETTER(rl, granted_calls)
GETTER(rl, rejected_calls)
GETTER(rl, available)
GETTER(bh, granted)
GETTER(bh, rejected)
GETTER(bh, in_flight)
GETTER(bh, limit)
GETTER(thr, requests)
GETTER(thr, local_rejects)
GETTER(thr, accepts)
GETTER(thr, backend_rejects)
GETTER(thr, no_answer)
GETTER(thr, window_requests)
GETTER(thr, window_accepts)
#undef GETTER

#define CS(f) get_cs_##f
#define RL(f) get_rl_##f
#define BH(f) get_bh_##f
#define THR(f) get_thr_##f

static void
write_limits(writer *w, const snapshot *s)
{
	if (s->any_cache) {
		per_stage(w, s, 0, "resil_cache_hits_total", "counter",
		    "Cache lookups answered.", CS(hits));
		per_stage(w, s, 0, "resil_cache_misses_total", "counter",
		    "Cache lookups that found no entry.", CS(misses));
		per_stage(w, s, 0, "resil_cache_stale_total", "counter",
		    "Cache lookups refused because the entry was too old.",
		    CS(stale));
		per_stage(w, s, 0, "resil_cache_evictions_total", "counter",
		    "Cache entries evicted to make room.", CS(evictions));
		per_stage(w, s, 0, "resil_cache_entries", "gauge",
		    "Entries in the cache.", CS(entries));
		per_stage(w, s, 0, "resil_cache_bytes", "gauge",
		    "Bytes charged to the cache's entries.", CS(bytes));
	}
	if (s->any_rl) {
		per_stage(w, s, 1, "resil_ratelimit_granted_total", "counter",
		    "Rate limiter acquires granted.", RL(granted_calls));
		per_stage(w, s, 1, "resil_ratelimit_rejected_total", "counter",
		    "Rate limiter acquires rejected.", RL(rejected_calls));
		per_stage(w, s, 1, "resil_ratelimit_available", "gauge",
		    "Permits that could be taken now.", RL(available));
	}
	if (s->any_bh) {
		per_stage(w, s, 2, "resil_bulkhead_granted_total", "counter",
		    "Bulkhead acquires granted.", BH(granted));
		per_stage(w, s, 2, "resil_bulkhead_rejected_total", "counter",
		    "Bulkhead acquires rejected.", BH(rejected));
		per_stage(w, s, 2, "resil_bulkhead_in_flight", "gauge",
		    "Calls in flight in the bulkhead.", BH(in_flight));
		per_stage(w, s, 2, "resil_bulkhead_limit", "gauge",
		    "The bulkhead's current concurrency limit.", BH(limit));
	}
	if (s->any_thr) {
		per_stage(w, s, 3, "resil_throttle_requests_total", "counter",
		    "Throttle admits (sent and rejected locally).",
		    THR(requests));
		per_stage(w, s, 3, "resil_throttle_local_rejects_total",
		    "counter", "Requests the throttle rejected locally.",
		    THR(local_rejects));
		per_stage(w, s, 3, "resil_throttle_accepts_total", "counter",
		    "Admitted requests the backend accepted.", THR(accepts));
		per_stage(w, s, 3, "resil_throttle_backend_rejects_total",
		    "counter", "Admitted requests the backend refused.",
		    THR(backend_rejects));
		per_stage(w, s, 3, "resil_throttle_no_answer_total", "counter",
		    "Admitted requests that got no answer.", THR(no_answer));
		per_stage(w, s, 3, "resil_throttle_window_requests", "gauge",
		    "Requests in the throttle's window.", THR(window_requests));
		per_stage(w, s, 3, "resil_throttle_window_accepts", "gauge",
		    "Accepts in the throttle's window.", THR(window_accepts));
	}
}

resil_err
resil_registry_write_prometheus_cb(
    resil_registry *reg, resil_registry_write_fn fn, void *ctx)
{
	snapshot s;
	writer w;
	resil_err err;

	if (reg == NULL || fn == NULL)
		return RESIL_E_INVAL;
	read_lock(reg);
	err = snap_take(reg, &s);
	if (err != RESIL_OK) {
		read_unlock(reg);
		return err;
	}
	resil__prom_init(&w, fn, ctx);
	if (s.np != 0) {
		write_pipelines(&w, &s);
		write_breakers(&w, &s);
		write_retries(&w, &s);
		write_limits(&w, &s);
		resil__keyed_prom_write(&w, s.k, s.nk);
	}
	(void)resil__prom_flush(&w);
	read_unlock(reg);
	snap_free(&reg->alloc, &s);
	return w.stopped ? RESIL_E_CALL : RESIL_OK;
}

typedef struct bufw {
	char *buf;
	size_t len;
	size_t total;
} bufw;

static int
to_buf(const char *chunk, size_t n, void *ctx)
{
	bufw *b = ctx;

	if (b->len != 0 && b->total < b->len - 1) {
		size_t room = b->len - 1 - b->total;

		memcpy(b->buf + b->total, chunk, n < room ? n : room);
	}
	b->total += n;
	return 0;
}

resil_err
resil_registry_write_prometheus(
    resil_registry *reg, char *buf, size_t len, size_t *needed)
{
	bufw b;
	resil_err err;

	if (reg == NULL || needed == NULL || (buf == NULL && len != 0))
		return RESIL_E_INVAL;
	b.buf = buf;
	b.len = len;
	b.total = 0;
	err = resil_registry_write_prometheus_cb(reg, to_buf, &b);
	if (err != RESIL_OK)
		return err;
	if (len != 0)
		buf[b.total < len - 1 ? b.total : len - 1] = '\0';
	*needed = b.total;
	return RESIL_OK;
}

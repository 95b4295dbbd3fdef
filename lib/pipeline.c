/*
 * resil pipeline: mock stage -> fallback chain -> retry -> breaker ->
 * rate limiter -> bulkhead -> the user's function.
 *
 * Everything a reload may change lives in one `settings` object (stage
 * objects, the method table, the mock). A call counts itself on the
 * current settings (per thread stripe) and runs on them to its end; a
 * reload publishes new settings with one pointer store, carrying over the
 * stage objects whose configuration did not change (shared, reference
 * counted parts), and frees replaced settings once no call counts on them.
 * The success path reads the method table, the current mock (one atomic
 * pointer, only when a mock is configured), runs retry and breaker, and
 * adds one to a per-thread striped counter. Runtime mock changes build a
 * whole new resil_mock, publish it with one pointer store and free the old
 * one once its readers are gone.
 */
#include <resil/pipeline.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"
#include "call_internal.h"
#include "duration.h"
#include "internal.h"
#include "pipeline_config.h"
#include "retry_internal.h"

#include <uthash.h>

#define NSTRIPES 8u

/* Two doubles are the same setting when their bits are (no float ==). */
static int
same_double(double x, double y)
{
	uint64_t u, v;

	memcpy(&u, &x, sizeof(u));
	memcpy(&v, &y, sizeof(v));
	return u == v;
}

#if defined(__GNUC__)
#define HOT __attribute__((always_inline)) static inline
#else
#define HOT static inline
#endif

enum { START_NONE = 0, START_RUN = 1, START_CLUSTER = 2 };

/* A method handle (resil_pipeline_method): stable for the pipeline's
 * life, it names a declared method; idx indexes each settings' byidx. The
 * service-level handle has idx 0 (byidx[0] is always the service-level
 * settings). */
struct resil_method {
	const struct resil_pipeline *owner;
	char *name; /* NULL: the service-level handle */
	uint32_t idx;
	UT_hash_handle hh;
};

/* A stage object shared by consecutive settings (a breaker carried over
 * by a reload): freed when the last settings holding it go. */
enum { PART_BREAKER, PART_RETRY, PART_CACHE, PART_RL, PART_BH };
typedef struct part {
	uint64_t refs; /* atomic */
	int kind;
	void *obj;
} part;

/* One declared method in one settings generation. */
typedef struct pmethod {
	const struct resil_pipeline *owner;
	char *name;
	resil_type type;
	uint64_t timeout;
	char *mock_spec;         /* method-level spec (owned), or NULL */
	int mock_set;            /* mock_spec applies (NULL + set: none) */
	resil_retry *retry;      /* own policy, or NULL: the service's */
	resil_breaker *breaker;  /* own breaker, or NULL: the service's */
	part *pretry, *pbreaker; /* what holds them */
	uint32_t max_attempts;   /* as configured */
	uint32_t idx;            /* its handle's */
	resil_retry *cretry;     /* the cluster's failover policy, or NULL:
	                          * the service's */
	int declared;            /* from the configuration */
	int retry_fast; /* its policy allows the first-attempt fast path */
	/* What a call of it does before attempt 1 (decided once): START_NONE,
	 * START_RUN (begin the retry run: no fast path), START_CLUSTER. */
	int start;
	/* No stage needs the machine on its success path (no limiter, no
	 * timeout, no hedging, no retry run): the blocking driver may run
	 * the machine's first step inline. */
	int simple;
	UT_hash_handle hh;
} method;

/* Readers of the mock configuration, per thread stripe and generation
 * parity (the breaker's announce protocol): a call announces itself, checks
 * the generation, reads, withdraws. set_mock swaps the pointer, bumps the
 * generation and waits until no reader of the old parity is left, then
 * frees the old configuration at once. */
typedef struct mock_readers {
	uint64_t n[2];
	uint64_t pad[6];
} mock_readers;

typedef struct stripe {
	uint64_t calls;
	uint64_t cache;
	uint64_t mock;
	uint64_t fallback;
	uint64_t unavailable;
	uint64_t errors;
	uint64_t business;
	uint64_t timeouts;
	uint64_t latency_count;
	uint64_t latency[RESIL_LATENCY_BUCKETS];
	uint64_t pad[7];
} stripe;

/*
 * The settings a call runs with: everything a reload may change. A call
 * holds one (refs) from its start to its end, so it finishes on the
 * settings it started with; a reload publishes new ones with one pointer
 * store (cur) and the old ones go when their last call drops them.
 */
typedef struct settings {
	/* Calls holding these settings, per thread stripe (a call drops
	 * its count on the stripe it took it on): no shared counter on the
	 * call path. */
	struct {
		uint64_t n;
		/* cppcheck-suppress unusedStructMember ; a cache line each */
		uint64_t pad[7];
	} rc[NSTRIPES];
	struct resil_pipeline *p;
	struct settings *next_free; /* in p->retired or p->shells */
	/* What these were built from, for a reload's comparison: a shallow
	 * copy (its strings and methods are not to be read). */
	resil_pipeline_config cfg;
	resil_breaker *breaker;
	resil_retry *retry;
	resil_cache *cache;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
	part *pbreaker, *pretry, *pcache, *prl, *pbh;
	resil_retry *cretry; /* failover / zone-aware attempts, or NULL */
	resil_fallback *fb;
	uint64_t timeout;
	method *methods; /* uthash by name; immutable */
	method dflt;     /* the service-level settings */
	method **byidx;  /* by handle index: the method, or &dflt */
	uint32_t nidx;
	/* Mock state: the current resil_mock (atomic pointer; NULL when no
	 * spec is configured at all) and the service spec it was built from
	 * (set_mock replaces both, under mock_lock). */
	resil_mock *mock;
	char *service_spec;
} settings;

typedef struct handler {
	resil_fallback_fn fn;
	void *ctx;
} handler;

struct resil_pipeline {
	char *service;
	resil_allocator alloc;
	resil_clock clock;
	resil_classifier cls;
	resil_pipeline_listener_fn listener;
	void *listener_ctx;
	const resil_mock_registry *registry;

	settings *cur; /* atomic pointer: the current settings */
	/* Under mock_lock: settings replaced but maybe still held by calls,
	 * and free shells reused by reloads (a shell is never given back to
	 * the allocator before the pipeline is freed). */
	settings *retired;
	settings *shells;

	/* Method handles, by name (under mock_lock once calls run). */
	struct resil_method *names;
	struct resil_method svc; /* the service-level handle */
	uint32_t nnames;

	handler *hlist; /* user handlers added, re-added at each reload */
	size_t handlers;
	unsigned call_events; /* RESIL_CALL_EVENT_* to tell the listener */
	uint32_t hedge_max;   /* extra attempts a hedge may start; 0: off */
	uint64_t hedge_delay; /* ticks without an answer before a hedge */
	/* An attempt is late once its duration reaches timeout + late_edge:
	 * 1, past the timeout (duration > timeout); 0 for forking, whose
	 * call is a TIMEOUT at start + timeout (DESIGN). */
	uint64_t late_edge;
	resil_executor executor;

	/* +1 at every swap of a settings' mock; reload and set_mock
	 * serialise on mock_lock. */
	uint64_t mock_gen;
	mock_readers mock_rd[NSTRIPES];
	resil__spinlock mock_lock;

	void *stripes_mem;
	stripe *stripes;

	/* The cluster: selector NULL for none. */
	resil_selector *sel;
	resil_cluster_config ccfg; /* copied; local_zone is zone */
	char *zone;
	resil_cluster *fbq; /* failback's queue, or NULL */
	int slow;           /* resil_pipeline_call's slow path: hedging or
	                     * a selector */
	struct {
		resil_candidates *c;
		uint64_t busy; /* atomic 0/1 */
		/* cppcheck-suppress unusedStructMember ; a cache line each */
		uint64_t pad[6];
	} pool[NSTRIPES]; /* candidate sets, reused by calls */
};

/* The call running on this thread, for events and the deadline. */
static RESIL__TLS const char *tls_method;
static RESIL__TLS uint64_t tls_deadline = UINT64_MAX;
static RESIL__TLS int tls_in_call;

const char *
resil_stage_name(resil_stage s)
{
	switch (s) {
	case RESIL_STAGE_MOCK:
		return "mock";
	case RESIL_STAGE_FALLBACK:
		return "fallback";
	case RESIL_STAGE_RETRY:
		return "retry";
	case RESIL_STAGE_BREAKER:
		return "breaker";
	case RESIL_STAGE_RATELIMIT:
		return "ratelimit";
	case RESIL_STAGE_BULKHEAD:
		return "bulkhead";
	case RESIL_STAGE_CALL:
		return "call";
	case RESIL_STAGE_CLUSTER:
		return "cluster";
	case RESIL_STAGE_CONFIG:
		return "config";
	}
	return "unknown";
}

uint64_t
resil_pipeline_deadline(void)
{
	return tls_in_call ? tls_deadline : UINT64_MAX;
}

static stripe *
my_stripe(const resil_pipeline *p)
{
	return &p->stripes[resil__thread_stripe(NSTRIPES)];
}

/* ---- events ---- */

static void
emit(resil_pipeline *p, resil_pipeline_event *ev)
{
	ev->service = p->service;
	ev->method = tls_method != NULL ? tls_method : "";
	p->listener(ev, p->listener_ctx);
}

static void
on_breaker(const resil_breaker_event *be, void *ctx)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event ev;
	char text[128];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text), "breaker %s -> %s (%s)",
	    resil_breaker_state_name(be->from),
	    resil_breaker_state_name(be->to),
	    resil_breaker_reason_name(be->reason));
	ev.stage = RESIL_STAGE_BREAKER;
	ev.time = be->time;
	ev.breaker = be;
	ev.text = text;
	emit(p, &ev);
}

static void
on_retry(const resil_retry_event *re, void *ctx)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event ev;
	char text[128];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	if (re->type == RESIL_RETRY_EVENT_RETRY) {
		char dur[32];

		resil__duration_format(dur, sizeof(dur), re->wait);
		snprintf(text, sizeof(text),
		    "retry after attempt %u, waiting %s", re->attempt, dur);
	} else
		snprintf(text, sizeof(text), "retry %s after attempt %u (%s)",
		    resil_retry_event_name(re->type), re->attempt,
		    resil_retry_stop_name(re->stop));
	ev.stage = RESIL_STAGE_RETRY;
	ev.time = re->time;
	ev.retry = re;
	ev.text = text;
	emit(p, &ev);
}

static void
on_limit(const resil_limit_event *le, void *ctx, resil_stage stage)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event ev;
	char text[128];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text), "%s %s (limit %u, in flight %u)",
	    resil_stage_name(stage), resil_limit_event_name(le->type),
	    le->limit, le->in_flight);
	ev.stage = stage;
	ev.time = le->time;
	ev.limit = le;
	ev.text = text;
	emit(p, &ev);
}

static void
on_ratelimit(const resil_limit_event *le, void *ctx)
{
	on_limit(le, ctx, RESIL_STAGE_RATELIMIT);
}

static void
on_bulkhead(const resil_limit_event *le, void *ctx)
{
	on_limit(le, ctx, RESIL_STAGE_BULKHEAD);
}

static void
emit_result(
    resil_pipeline *p, resil_stage stage, const resil_result *r, uint64_t now)
{
	resil_pipeline_event ev;
	char text[RESIL_RESULT_MSG_MAX + 64];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	if (r->source == RESIL_SOURCE_UNAVAILABLE)
		snprintf(text, sizeof(text), "%s: nothing answered (%s)",
		    resil_stage_name(stage), resil_err_name(r->err));
	else
		snprintf(text, sizeof(text), "%s answered: %s (%s)",
		    resil_stage_name(stage), resil_source_name(r->source),
		    resil_err_name(r->err));
	ev.stage = stage;
	ev.time = now;
	ev.result = r;
	ev.text = text;
	emit(p, &ev);
}

/* The per-call event: what the caller got, as Resilience4j's onSuccess,
 * onError and onCallNotPermitted tell it. */
static void
emit_call(
    resil_pipeline *p, const void *cv, const resil_result *r, uint64_t now)
{
	resil_pipeline_event ev;
	char text[RESIL_RESULT_MSG_MAX + 64];
	unsigned kind;
	const char *what;

	(void)cv;
	if (p->listener == NULL) /* call_events is 0 without one */
		return;
	if (r->err == RESIL_OK) {
		kind = RESIL_CALL_EVENT_SUCCESS;
		what = "succeeded";
	} else if (r->attempts == 0 &&
	    (r->cause == RESIL_E_OPEN || r->cause == RESIL_E_LIMITED ||
	        r->err == RESIL_E_OPEN || r->err == RESIL_E_LIMITED)) {
		kind = RESIL_CALL_EVENT_REJECTED;
		what = "not permitted";
	} else {
		kind = RESIL_CALL_EVENT_ERROR;
		what = "failed";
	}
	if (!(p->call_events & kind))
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text), "call %s: %s %s, %u attempt%s", what,
	    resil_source_name(r->source), resil_err_name(r->err),
	    (unsigned)r->attempts, r->attempts == 1 ? "" : "s");
	ev.stage = RESIL_STAGE_CALL;
	ev.time = now;
	ev.result = r;
	ev.text = text;
	emit(p, &ev);
}

/* A cluster event (failback's queue, or the machine's own). */
static void
on_cluster(const resil_cluster_event *ce, void *ctx)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event ev;
	char text[160];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text), "cluster %s%s%s (rc %d)",
	    resil_cluster_event_name(ce->type), ce->address != NULL ? " " : "",
	    ce->address != NULL ? ce->address : "", ce->rc);
	ev.stage = RESIL_STAGE_CLUSTER;
	ev.time = ce->time;
	ev.cluster = ce;
	ev.text = text;
	ev.service = p->service;
	ev.method = ce->method != NULL ? ce->method : "";
	p->listener(&ev, p->listener_ctx);
}

static void
cluster_event(resil_pipeline *p, resil_cluster_event_type type,
    const char *name, const char *address, int rc, uint64_t now)
{
	resil_cluster_event ce;

	if (p->listener == NULL)
		return;
	memset(&ce, 0, sizeof(ce));
	ce.type = type;
	ce.time = now;
	ce.method = name;
	ce.address = address;
	ce.rc = rc;
	on_cluster(&ce, p);
}

/* ---- the recording listener ---- */

void
resil_pipeline_recorder_init(resil_pipeline_recorder *r,
    resil_pipeline_record *records, size_t capacity)
{
	if (r == NULL)
		return;
	memset(r, 0, sizeof(*r));
	r->records = records;
	r->capacity = records != NULL ? capacity : 0;
}

void
resil_pipeline_recorder_listener(const resil_pipeline_event *ev, void *ctx)
{
	resil_pipeline_recorder *r = ctx;
	resil_pipeline_record *rec;

	if (r == NULL || ev == NULL)
		return;
	/* A test-and-set lock on the recorder's own byte. */
	while (__atomic_exchange_n(&r->lock_, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&r->lock_, __ATOMIC_RELAXED))
			resil__stall();
	if (r->count < r->capacity) {
		rec = &r->records[r->count++];
		memset(rec, 0, sizeof(*rec));
		rec->stage = ev->stage;
		rec->time = ev->time;
		snprintf(rec->method, sizeof(rec->method), "%s",
		    ev->method != NULL ? ev->method : "");
		snprintf(rec->text, sizeof(rec->text), "%s",
		    ev->text != NULL ? ev->text : "");
		if (ev->result != NULL) {
			rec->err = ev->result->err;
			rec->source = ev->result->source;
		}
	} else {
		r->dropped++;
	}
	__atomic_store_n(&r->lock_, 0, __ATOMIC_RELEASE);
}

/* ---- mock configuration ---- */

static int
spec_is_none(const char *spec)
{
	/* Only a quick filter: the parser decides for everything else. */
	return spec == NULL;
}

static resil_err
prefix_diag(resil_diag *diag, resil_err err, const char *what)
{
	char tmp[RESIL_DIAG_MAX];

	if (diag == NULL || err == RESIL_OK || what == NULL)
		return err;
	/* "retry.max_attempts: ..." becomes "getStock.retry.max_attempts:
	 * ...", "mock: ..." becomes "getStock.mock: ...". */
	memcpy(tmp, diag->msg, sizeof(tmp));
	return resil__diagf(diag, err, "%.64s.%.180s", what, tmp);
}

/* Build a resil_mock from the service spec and every method's own. */
static resil_err
build_mock(resil_pipeline *p, const settings *g, const char *service_spec,
    const char *method_name, const char *method_spec, int method_unset,
    resil_mock **out, resil_diag *diag)
{
	resil_mock_config mc;
	resil_mock *m;
	method *it, *tmp;
	resil_err err;

	resil_mock_config_init(&mc);
	mc.service = p->service;
	mc.spec = service_spec;
	mc.registry = p->registry;
	mc.alloc = &p->alloc;
	err = resil_mock_new(&m, &mc, diag);
	if (err != RESIL_OK)
		return err;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		const char *spec = it->mock_set ? it->mock_spec : NULL;

		if (method_name != NULL && strcmp(method_name, it->name) == 0)
			spec = method_unset ? NULL : method_spec;
		err = resil_mock_set_method(m, it->name, it->type, spec, diag);
		if (err != RESIL_OK) {
			resil_mock_free(m);
			return prefix_diag(diag, err, it->name);
		}
	}
	*out = m;
	return RESIL_OK;
}

/* ---- creation ---- */

static resil_err
new_breaker(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_breaker **out, resil_diag *diag)
{
	resil_breaker_config bc = cfg->breaker;

	bc.clock = &p->clock;
	bc.alloc = &p->alloc;
	bc.listener = on_breaker;
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
	rc.listener = p->listener != NULL ? on_retry : NULL;
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
	rc.listener = p->listener != NULL ? on_retry : NULL;
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
	resil__faa64(&x->refs, 1);
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
	resil_retry_free(g->cretry);
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
 * a stray one (its call sees the pointer moved and drops it at once),
 * and each stripe's count includes every call counted on it and not yet
 * dropped (a call drops on the stripe it counted on), so a zero sum read
 * after g was replaced is final. */
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

	while ((g = *pp) != NULL) {
		if (settings_held(g)) {
			pp = &g->next_free;
			continue;
		}
		*pp = g->next_free;
		shell_put(p, g);
	}
}

/* Free g and its shell, when no call can reach it (creation failed, or
 * the pipeline is being freed). */
static void
settings_free(settings *g)
{
	if (g == NULL)
		return;
	settings_clear(g);
	resil__free(&g->p->alloc, g, sizeof(*g));
}

/*
 * Take a reference on the current settings: load the pointer, count
 * oneself on what it pointed to (on this thread's stripe, *st), and check
 * that it still points there (then they were current after the count, so
 * no reclaim can miss it). Otherwise they were replaced meanwhile: drop
 * the stray count and try again. Shells are never freed while the
 * pipeline lives (retired ones are reused), so a stray count never
 * touches freed memory. A reload never waits for a call.
 */
HOT void conf_drop(settings *g, unsigned st);

/* The settings moved under a call taking its count: retry. */
static settings *
conf_hold_again(resil_pipeline *p, settings *g, unsigned s)
{
	for (;;) {
		conf_drop(g, s);
		g = resil__loadptr((void *const *)&p->cur);
		resil__faa64(&g->rc[s].n, 1);
		if ((void *)(uintptr_t)resil__load64_after_rmw(
		        (const uint64_t *)(const void *)&p->cur) == (void *)g)
			return g;
	}
}

HOT settings *
conf_hold(resil_pipeline *p, unsigned *st)
{
	unsigned s = resil__thread_stripe(NSTRIPES);
	settings *g = resil__loadptr((void *const *)&p->cur);

	resil__faa64(&g->rc[s].n, 1);
	if (RESIL__UNLIKELY(
	        (void *)(uintptr_t)resil__load64_after_rmw(
	            (const uint64_t *)(const void *)&p->cur) != (void *)g))
		g = conf_hold_again(p, g, s);
	*st = s;
	return g;
}

/* Drop the count taken on stripe st. Replaced settings are freed by the
 * next reload after their last call dropped them (or by free). */
HOT void
conf_drop(settings *g, unsigned st)
{
	resil__faa64(&g->rc[st].n, UINT64_MAX);
}

void
resil_pipeline_free(resil_pipeline *p)
{
	struct resil_method *h, *htmp;
	const resil_allocator *resil__a;
	unsigned i;

	if (p == NULL)
		return;
	resil__a = &p->alloc;
	settings_free(p->cur);
	while (p->retired != NULL) {
		settings *g = p->retired;

		p->retired = g->next_free;
		settings_free(g);
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
	resil__free(resil__a, p->stripes_mem,
	    sizeof(stripe) * NSTRIPES + RESIL__CACHELINE);
	{
		resil_allocator a = p->alloc;

		resil__free(&a, p, sizeof(*p));
	}
}

static resil_verdict mock_handler(void *ctx, const resil_args *args,
    const resil_failure *failure, resil_result *out);

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
	p->ccfg.listener = on_cluster;
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
	p->hedge_delay = 0; /* forking starts its forks at once */
	if (cc->strategy == RESIL_CLUSTER_FORKING) {
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

/* ---- settings: built at new and at each reload ---- */

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
    "resil_breaker_config changed: update same_breaker()");
_Static_assert(sizeof(resil_retry_config) == 224,
    "resil_retry_config changed: update same_retry()");
_Static_assert(sizeof(resil_cache_config) == 56,
    "resil_cache_config changed: update same_cache()");
_Static_assert(sizeof(resil_ratelimit_config) == 72,
    "resil_ratelimit_config changed: update same_ratelimit()");
_Static_assert(sizeof(resil_bulkhead_config) == 80,
    "resil_bulkhead_config changed: update same_bulkhead()");
#endif

static int
same_breaker(const resil_breaker_config *a, const resil_breaker_config *b)
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
static int
same_retry(const resil_retry_config *a, const resil_retry_config *b)
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
	    SAME(budget_period_ns) && SAME(retry_on_limited);
}

static int
same_cache(const resil_cache_config *a, const resil_cache_config *b)
{
	return SAME(max_entries) && SAME(max_bytes) && SAME(max_age) &&
	    SAME(shards);
}

static int
same_ratelimit(
    const resil_ratelimit_config *a, const resil_ratelimit_config *b)
{
	return SAME(rate) && SAME(period_ns) && SAME(burst) && SAME(batch);
}

static int
same_bulkhead(const resil_bulkhead_config *a, const resil_bulkhead_config *b)
{
	return SAME(max_concurrent) && SAME(adaptive) && SAME(min_limit) &&
	    SAME(max_limit) && SAME(target_latency_ns) && SAME(increase) &&
	    SAME(backoff_pct) && SAME(batch);
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

static method *
find_in(const settings *g, const char *name)
{
	method *m = NULL;

	if (g->methods != NULL)
		HASH_FIND_STR(g->methods, name, m);
	return m;
}

/* A stage object: the old settings' one when its configuration is the
 * same (shared: its state carries over), else a new one. */
#define SHARE_OR_NEW(slot_, raw_, kind_, same_, make_)              \
	do {                                                        \
		if (old != NULL && old->slot_ != NULL && (same_)) { \
			g->slot_ = part_get(old->slot_);            \
		} else {                                            \
			void *obj_ = NULL;                          \
			err = (make_);                              \
			if (err != RESIL_OK)                        \
				goto fail;                          \
			err = part_new(p, kind_, obj_, &g->slot_);  \
			if (err != RESIL_OK)                        \
				goto nomem;                         \
		}                                                   \
		g->raw_ = g->slot_->obj;                            \
	} while (0)

/*
 * Settings from cfg (validated). old: the current ones, whose stage
 * objects are carried over where their configuration did not change (NULL
 * at creation). Nothing of old or of p's calls changes here; the handles
 * of newly declared names are made (they stay, harmless, on failure).
 */
static resil_err
settings_build(resil_pipeline *p, const resil_pipeline_config *cfg,
    const settings *old, settings **out, resil_diag *diag)
{
	const resil_allocator *resil__a = &p->alloc;
	settings *g;
	resil_err err = RESIL_OK;
	size_t i;
	int any_mock;
	method *it, *tmp;

	g = shell_take(p);
	if (g == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "pipeline: out of memory");
	memcpy(&g->cfg, cfg, sizeof(g->cfg));
	g->timeout = cfg->timeout_ns;
	g->dflt.owner = p;
	g->dflt.type = RESIL_TYPE_ANY;
	g->dflt.timeout = cfg->timeout_ns;

	if (cfg->breaker_enabled)
		SHARE_OR_NEW(pbreaker, breaker, PART_BREAKER,
		    same_breaker(&old->cfg.breaker, &cfg->breaker),
		    new_breaker(p, cfg, (resil_breaker **)&obj_, diag));
	if (cfg->retry_enabled)
		SHARE_OR_NEW(pretry, retry, PART_RETRY,
		    same_retry(&old->cfg.retry, &cfg->retry) &&
		        old->cfg.retry.max_attempts == cfg->retry.max_attempts,
		    new_retry(p, cfg, 0, (resil_retry **)&obj_, diag));
	if (cfg->ratelimit_enabled) {
		resil_ratelimit_config rc = cfg->ratelimit;

		rc.clock = &p->clock;
		rc.alloc = resil__a;
		rc.listener = on_ratelimit;
		rc.listener_ctx = p;
		SHARE_OR_NEW(prl, rl, PART_RL,
		    same_ratelimit(&old->cfg.ratelimit, &cfg->ratelimit),
		    resil_ratelimit_new((resil_ratelimit **)&obj_, &rc, diag));
	}
	if (cfg->bulkhead_enabled) {
		resil_bulkhead_config bc = cfg->bulkhead;

		bc.clock = &p->clock;
		bc.alloc = resil__a;
		bc.listener = on_bulkhead;
		bc.listener_ctx = p;
		SHARE_OR_NEW(pbh, bh, PART_BH,
		    same_bulkhead(&old->cfg.bulkhead, &cfg->bulkhead),
		    resil_bulkhead_new((resil_bulkhead **)&obj_, &bc, diag));
	}
	if (cfg->cache_enabled) {
		resil_cache_config cc = cfg->cache;

		cc.clock = &p->clock;
		cc.alloc = resil__a;
		SHARE_OR_NEW(pcache, cache, PART_CACHE,
		    same_cache(&old->cfg.cache, &cfg->cache),
		    resil_cache_new((resil_cache **)&obj_, &cc, diag));
	}

	any_mock = !spec_is_none(cfg->mock);
	for (i = 0; i < cfg->nmethods; i++) {
		const resil_method_config *mc = &cfg->methods[i];
		struct resil_method *h = handle_for(p, mc->name);
		method *m = resil__calloc(resil__a, sizeof(*m));
		const method *om = old != NULL ? find_in(old, mc->name) : NULL;

		if (m == NULL || h == NULL) {
			if (m != NULL)
				resil__free(resil__a, m, sizeof(*m));
			goto nomem;
		}
		m->owner = p;
		m->idx = h->idx;
		m->name = resil__strdup(resil__a, mc->name);
		m->type = mc->type;
		m->timeout = mc->timeout_ns ? mc->timeout_ns : cfg->timeout_ns;
		m->max_attempts = mc->max_attempts;
		m->declared = 1;
		if (mc->mock != NULL) {
			m->mock_spec = resil__strdup(resil__a, mc->mock);
			m->mock_set = 1;
			any_mock = 1;
		}
		if (m->name == NULL) {
			free_method(p, m);
			resil__free(resil__a, m, sizeof(*m));
			goto nomem;
		}
		/* Added before any further failure, so that freeing the
		 * settings frees the method. uthash cannot fail to add here:
		 * HASH_NONFATAL_OOM leaves the table as it was. */
		HASH_ADD_KEYPTR(hh, g->methods, m->name, strlen(m->name), m);
		if (HASH_COUNT(g->methods) != i + 1) {
			free_method(p, m);
			resil__free(resil__a, m, sizeof(*m));
			goto nomem;
		}
		if (mc->mock != NULL && m->mock_spec == NULL)
			goto nomem;
		if (mc->max_attempts != 0) {
			if (om != NULL && om->pretry != NULL &&
			    om->max_attempts == mc->max_attempts &&
			    same_retry(&old->cfg.retry, &cfg->retry))
				m->pretry = part_get(om->pretry);
			else {
				resil_retry *r;

				err = new_retry(
				    p, cfg, mc->max_attempts, &r, diag);
				if (err != RESIL_OK) {
					prefix_diag(diag, err, mc->name);
					goto fail;
				}
				if (part_new(p, PART_RETRY, r, &m->pretry) !=
				    RESIL_OK)
					goto nomem;
			}
			m->retry = m->pretry->obj;
		}
		if (cfg->breaker_enabled && cfg->breaker_per_method) {
			if (om != NULL && om->pbreaker != NULL &&
			    same_breaker(&old->cfg.breaker, &cfg->breaker))
				m->pbreaker = part_get(om->pbreaker);
			else {
				resil_breaker *b;

				err = new_breaker(p, cfg, &b, diag);
				if (err != RESIL_OK)
					goto fail;
				if (part_new(p, PART_BREAKER, b,
				        &m->pbreaker) != RESIL_OK)
					goto nomem;
			}
			m->breaker = m->pbreaker->obj;
		}
		if (p->sel != NULL && mc->max_attempts != 0 &&
		    (cfg->cluster.strategy == RESIL_CLUSTER_FAILOVER ||
		        cfg->cluster.strategy == RESIL_CLUSTER_ZONE_AWARE)) {
			err = new_cretry(
			    p, cfg, mc->max_attempts, &m->cretry, diag);
			if (err != RESIL_OK) {
				prefix_diag(diag, err, mc->name);
				goto fail;
			}
		}
	}
	if (p->sel != NULL &&
	    (cfg->cluster.strategy == RESIL_CLUSTER_FAILOVER ||
	        cfg->cluster.strategy == RESIL_CLUSTER_ZONE_AWARE)) {
		err = new_cretry(p, cfg, (uint32_t)cfg->cluster.retries + 1,
		    &g->cretry, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	/* Handles by index: every name declared so far has one; those
	 * not declared here run with the service-level settings. */
	g->byidx = resil__alloc(resil__a, p->nnames * sizeof(method *));
	if (g->byidx == NULL)
		goto nomem;
	g->nidx = p->nnames;
	for (i = 0; i < g->nidx; i++)
		g->byidx[i] = &g->dflt;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		g->byidx[it->idx] = it;
	}
	if (cfg->mock != NULL) {
		g->service_spec = resil__strdup(resil__a, cfg->mock);
		if (g->service_spec == NULL)
			goto nomem;
	}
	if (any_mock || p->registry != NULL) {
		err = build_mock(
		    p, g, g->service_spec, NULL, NULL, 0, &g->mock, diag);
		if (err != RESIL_OK)
			goto fail;
	}

	/* The chain: cache, then the mock, then user handlers. */
	err = resil_fallback_new(&g->fb, NULL, diag);
	if (err != RESIL_OK)
		goto fail;
	if (g->cache != NULL) {
		err = resil_fallback_add_cache(g->fb, g->cache);
		if (err != RESIL_OK)
			goto fail;
	}
	err = resil_fallback_add_handler(g->fb, mock_handler, g);
	if (err != RESIL_OK)
		goto fail;
	for (i = 0; i < p->handlers; i++) {
		err = resil_fallback_add_handler(
		    g->fb, p->hlist[i].fn, p->hlist[i].ctx);
		if (err != RESIL_OK)
			goto fail;
	}
	/* Decided once: whether a method's policy allows the fast path. */
	g->dflt.retry_fast =
	    g->retry != NULL && resil__retry_fast_ok(g->retry);
	g->dflt.start = p->sel != NULL                ? START_CLUSTER
	    : g->retry != NULL && !g->dflt.retry_fast ? START_RUN
	                                              : START_NONE;
	g->dflt.simple = (g->retry == NULL || g->dflt.retry_fast) &&
	    g->rl == NULL && g->bh == NULL && g->dflt.timeout == 0 &&
	    p->hedge_max == 0 && p->call_events == 0 && p->sel == NULL;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		resil_retry *r = it->retry != NULL ? it->retry : g->retry;

		it->retry_fast = r != NULL && resil__retry_fast_ok(r);
		it->start = p->sel != NULL         ? START_CLUSTER
		    : r != NULL && !it->retry_fast ? START_RUN
		                                   : START_NONE;
		it->simple = (r == NULL || it->retry_fast) && g->rl == NULL &&
		    g->bh == NULL && it->timeout == 0 && p->hedge_max == 0 &&
		    p->call_events == 0 && p->sel == NULL;
	}
	*out = g;
	return RESIL_OK;
nomem:
	err = resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
fail:
	/* Never published: back to the free shells. */
	shell_put(p, g);
	return err;
}

resil_err
resil_pipeline_new(
    resil_pipeline **out, const resil_pipeline_config *cfg, resil_diag *diag)
{
	const resil_allocator *resil__a;
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
	p->executor = cfg->executor;
	p->sel = cfg->selector;
	p->slow = cfg->hedge_max != 0 || cfg->selector != NULL;
	p->service = resil__strdup(resil__a, cfg->service);
	p->stripes_mem = resil__calloc(
	    resil__a, sizeof(stripe) * NSTRIPES + RESIL__CACHELINE);
	if (p->service == NULL || p->stripes_mem == NULL) {
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
	}
	err = settings_build(p, cfg, NULL, &p->cur, diag);
	if (err != RESIL_OK)
		goto fail;
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

const resil_allocator *
resil__pipeline_allocator(const resil_pipeline *p)
{
	return &p->alloc;
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

static const method *
find_method(const settings *g, const char *name)
{
	method *m = find_in(g, name);

	return m != NULL ? m : &g->dflt;
}

/* The settings of handle h in g: its method, or the service-level ones
 * when g does not declare it. */
HOT const method *
resolve(const settings *g, const struct resil_method *h)
{
	/* A handle is given out (resil_pipeline_method) only when the
	 * current settings have its index, and settings built later have
	 * every earlier index: any settings a call holds have it. */
	return g->byidx[h->idx];
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
	return m->breaker != NULL ? m->breaker : g->breaker;
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
	return p == NULL ? NULL : cur_of(p)->rl;
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

/* Hold the mock configuration of g for a short read; *tok says what to
 * release. NULL: none configured (nothing to release then either). */
static resil_mock *
mock_hold(resil_pipeline *p, const settings *g, unsigned *tok)
{
	unsigned st = resil__thread_stripe(NSTRIPES);
	uint64_t gen;

	for (;;) {
		gen = resil__load64(&p->mock_gen);
		resil__faa64(&p->mock_rd[st].n[gen & 1], 1);
		if (resil__load64_after_rmw(&p->mock_gen) == gen)
			break;
		resil__faa64(&p->mock_rd[st].n[gen & 1], UINT64_MAX);
	}
	*tok = (st << 1) | (unsigned)(gen & 1);
	return resil__loadptr((void *const *)&g->mock);
}

static void
mock_release(resil_pipeline *p, unsigned tok)
{
	resil__faa64(&p->mock_rd[tok >> 1].n[tok & 1], UINT64_MAX); /* -1 */
}

/* After a swap: wait until every reader that may hold the old pointer
 * (announced under the old generation's parity) is done. */
static void
rd_quiesce(mock_readers *rd, uint64_t old_gen)
{
	unsigned i, spins = 0;

	for (i = 0; i < NSTRIPES; i++)
		while (resil__load64_after_rmw(&rd[i].n[old_gen & 1]) != 0)
			resil__backoff(&spins);
}

resil_err
resil_pipeline_set_mock(
    resil_pipeline *p, const char *name, const char *spec, resil_diag *diag)
{
	const resil_allocator *resil__a;
	resil_mock *m = NULL, *old;
	method *meth = NULL;
	settings *g;
	char *copy = NULL;
	resil_err err;

	if (p == NULL)
		return RESIL_E_INVAL;
	resil__a = &p->alloc;
	if (spec != NULL && (copy = resil__strdup(resil__a, spec)) == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "pipeline: out of memory");
	resil__spin_lock(&p->mock_lock);
	/* Under the lock the current settings cannot be replaced. */
	g = p->cur;
	if (name != NULL) {
		meth = find_in(g, name);
		if (meth == NULL) {
			resil__spin_unlock(&p->mock_lock);
			resil__strfree(resil__a, copy);
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.mock: %s is not a method declared in the "
			    "configuration of %s",
			    name, name, p->service);
		}
	}
	if (name == NULL)
		err = build_mock(p, g, copy, NULL, NULL, 0, &m, diag);
	else
		err = build_mock(
		    p, g, g->service_spec, name, copy, spec == NULL, &m, diag);
	if (err != RESIL_OK) {
		resil__spin_unlock(&p->mock_lock);
		resil__strfree(resil__a, copy);
		return err;
	}
	if (name == NULL) {
		resil__strfree(resil__a, g->service_spec);
		g->service_spec = copy;
	} else {
		/* The method table is read without locks by running calls,
		 * but only its mock_spec fields change here, and those are
		 * read by writers alone (under mock_lock). */
		resil__strfree(resil__a, meth->mock_spec);
		meth->mock_spec = copy;
		meth->mock_set = spec != NULL;
	}
	old = resil__loadptr((void *const *)&g->mock);
	resil__storeptr((void **)&g->mock, m);
	/* The old one goes as soon as no call can be reading it: memory
	 * stays bounded however often the specs switch. */
	rd_quiesce(p->mock_rd, resil__faa64(&p->mock_gen, 1));
	resil__spin_unlock(&p->mock_lock);
	resil_mock_free(old);
	return RESIL_OK;
}

/* ---- reload ---- */

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

static int
same_cluster(const resil_cluster_config *a, const resil_cluster_config *b)
{
	const char *za = a->local_zone != NULL ? a->local_zone : "";
	const char *zb = b->local_zone != NULL ? b->local_zone : "";

	return a->strategy == b->strategy && a->retries == b->retries &&
	    a->failback_queue == b->failback_queue &&
	    a->failback_retries == b->failback_retries &&
	    a->failback_period_ns == b->failback_period_ns &&
	    a->broadcast_fail_percent == b->broadcast_fail_percent &&
	    a->forks == b->forks && strcmp(za, zb) == 0 &&
	    a->cross_zone_timeout_ns == b->cross_zone_timeout_ns;
}

/* *eff: cfg with what it leaves NULL filled from p; refused when it would
 * change what a reload cannot. */
static resil_err
reload_check(const resil_pipeline *p, const settings *g,
    const resil_pipeline_config *cfg, resil_pipeline_config *eff,
    resil_diag *diag)
{
	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "pipeline: config is NULL");
	if (cfg->size != sizeof(resil_pipeline_config))
		return resil__check_size(diag, "pipeline",
		    "resil_pipeline_config", cfg->size,
		    sizeof(resil_pipeline_config));
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
	if (p->sel != NULL && !same_cluster(&cfg->cluster, &g->cfg.cluster))
		return immutable(diag, "cluster");
	return resil__pipeline_validate(eff, diag);
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
	        !same_breaker(&a->breaker, &cfg->breaker)))
		NOTE("breaker");
	if (a->retry_enabled != cfg->retry_enabled ||
	    !same_retry(&a->retry, &cfg->retry) ||
	    a->retry.max_attempts != cfg->retry.max_attempts)
		NOTE("retry");
	if (a->cache_enabled != cfg->cache_enabled ||
	    (cfg->cache_enabled && !same_cache(&a->cache, &cfg->cache)))
		NOTE("cache");
	if (a->ratelimit_enabled != cfg->ratelimit_enabled ||
	    (cfg->ratelimit_enabled &&
	        !same_ratelimit(&a->ratelimit, &cfg->ratelimit)))
		NOTE("ratelimit");
	if (a->bulkhead_enabled != cfg->bulkhead_enabled ||
	    (cfg->bulkhead_enabled &&
	        !same_bulkhead(&a->bulkhead, &cfg->bulkhead)))
		NOTE("bulkhead");
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
	ev.stage = RESIL_STAGE_CONFIG;
	ev.time = resil_clock_now(&p->clock);
	ev.text = text;
	ev.service = p->service;
	ev.method = "";
	p->listener(&ev, p->listener_ctx);
}

resil_err
resil_pipeline_reload(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
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
		err = settings_build(p, &eff, old, &g, diag);
	if (err != RESIL_OK) {
		resil__spin_unlock(&p->mock_lock);
		return err;
	}
	count = describe_changes(old, g, &eff, what, sizeof(what));
	/* Published with a full barrier (conf_hold's check relies on it):
	 * calls that start from now on run with g. */
	resil__fas64((uint64_t *)(void *)&p->cur, (uint64_t)(uintptr_t)g);
	resil__spin_unlock(&p->mock_lock);
	old->next_free = p->retired;
	p->retired = old;
	settings_reclaim(p); /* old too, when no call holds it */
	emit_reload(p, count, what);
	return RESIL_OK;
}

/* ---- the call machine ---- */

/*
 * One call's state, in the caller's resil_call. The machine decides; the
 * driver (resil_pipeline_call's loop, or the caller's event loop) runs the
 * attempts and the timers.
 *
 * Phases: ATTEMPT (attempts of one retry attempt are out: one, or several
 * when hedging), WAIT (a retry backoff), DONE. A completed attempt is
 * recorded at once, by report (breaker, bulkhead, timing); the decisions
 * that follow (retry, hedge, fallback) are taken by the next step.
 */

#define CALL_LIVE 0x7265736cu    /* "resl" */
#define CALL_CLUSTER 0x636c7573u /* "clus": live, with a selector */
#define CALL_DONE 0x646f6e65u
#define CALL_CANCELLED 0x63616e63u

enum { P_ATTEMPT = 0, P_WAIT = 1, P_DONE = 2 };

typedef struct slot {
	uint32_t id;
	uint8_t has_permit;
	uint8_t has_bh;
	uint64_t start; /* when it was started (where time is needed) */
	resil_permit permit;
} slot;

typedef struct callm {
	uint32_t magic;
	uint8_t phase;
	uint8_t has_mock;
	uint8_t run_on;  /* the retry run is begun */
	uint8_t pending; /* an attempt completed; not yet decided on */
	uint8_t winner;  /* a hedged attempt won: the others are abandoned */
	uint8_t hedges;  /* hedges started in this retry attempt */
	uint8_t no_more_hedges;
	/* Slots by bit: attempts out and running, and abandoned ones whose
	 * answers are still to come (and will be dropped). */
	uint8_t running;
	uint8_t abandoned;
	resil_pipeline *p;
	settings *g;  /* the settings it runs with, held */
	uint8_t gref; /* the call machine's API holds g (drop at the end) */
	uint8_t gst;  /* the stripe g is counted on */
	const method *m;
	resil_breaker *breaker;
	resil_retry *retry;
	const resil_args *args;
	resil_result *out;
	uint64_t timeout;
	uint64_t wait_until; /* WAIT: the end of the backoff */
	uint64_t launched;   /* when the last attempt was started */
	int breaker_state;
	uint32_t attempts; /* calls of the user's function */
	uint32_t issued;   /* attempt ids handed out */
	/* The last attempt that ran and failed: RESIL_OK, or E_CALL /
	 * E_TIMEOUT with its rc. */
	resil_err real_err;
	int real_rc;
	/* The last completed attempt, as the breaker saw it. */
	int last_rc;
	resil_err last_status;
	resil_outcome last_outcome;
	resil_value value; /* its value */
	resil__retry_run run;
	slot slots[RESIL_CALL_MAX_INFLIGHT];
	/* ---- the cluster (sel != NULL); read only when sel is set ---- */
	uint8_t cphase;     /* zone-aware: 1 local first, 2 cross-zone */
	uint8_t cstop;      /* no candidate: conclude at once */
	uint8_t has_pick;   /* slots holding a pick, by bit */
	uint8_t last_local; /* zone-aware: the last attempt was local */
	uint8_t bany;       /* broadcast: a failure was seen */
	resil_selector *sel;
	uint32_t ncand;  /* candidates at the last route (messages) */
	uint32_t bn;     /* broadcast: candidates at the first route */
	uint32_t nother; /* zone-aware: other-zone candidates, last route */
	uint32_t bidx;   /* broadcast: the candidate of the next attempt */
	uint32_t bfail, bthreshold;
	/* broadcast: the endpoint of the last attempt. Every attempt routes
	 * again, and an endpoint whose breaker opened meanwhile is no longer
	 * a candidate, so the next one is found by id (directory order), not
	 * by position. */
	uint64_t blast_id;
	int blast_rc;
	resil_err blast_status;
	uint32_t ntried, nfailed;
	uint64_t tried[16];
	uint64_t failed_ids[16];
	uint64_t last_timeout; /* the timeout of the last attempt */
	resil_request req;
	char failed[128];   /* the addresses that failed, ", " joined */
	char last_addr[64]; /* the endpoint of the last completed attempt */
	char last_zone[32];
	char
	    cmsg[RESIL_RESULT_MSG_MAX]; /* no provider: the selector's words */
	char pzone[RESIL_CALL_MAX_INFLIGHT][32]; /* each pick's zone */
	resil_pick picks[RESIL_CALL_MAX_INFLIGHT];
} callm;

_Static_assert(sizeof(callm) <= sizeof(resil_call),
    "resil_call is too small for the machine's state");
_Static_assert(_Alignof(callm) <= _Alignof(resil_call),
    "resil_call is not aligned enough for the machine's state");

typedef struct tsrc tsrc;
/* The cluster's hooks take the time by value (or a copy of the source):
 * a pointer to the caller's tsrc would keep it in memory on the hot path
 * of calls without a selector. */
static void cl_start(callm *c, const method *m, tsrc ts);
static resil_err cl_pick(callm *c, unsigned i, uint64_t now);
static void cl_done(callm *c, unsigned i, resil_outcome outcome, uint64_t now);
static int cl_decide(callm *c, tsrc *ts, resil_call_next *st);
static void cl_conclude(callm *c, resil_err rr, int rc, resil_err status,
    resil_outcome outcome, tsrc *ts, resil_call_next *st);

/* The time for one step: given by the caller (known), or read from the
 * pipeline's clock the first time something needs it (the blocking
 * driver reads no clock on a success path that needs no time). */
struct tsrc {
	uint64_t now;
	const resil_clock *clk; /* NULL: now is given */
};

static uint64_t
tnow(tsrc *t)
{
	if (t->clk != NULL) {
		t->now = resil_clock_now(t->clk);
		t->clk = NULL;
	}
	return t->now;
}

static void
tlazy(tsrc *t, const resil_pipeline *p)
{
	t->now = 0;
	t->clk = &p->clock;
}

static unsigned
latency_bucket(uint64_t d)
{
	unsigned b = 0;

	while (d != 0 && b < RESIL_LATENCY_BUCKETS - 1) {
		d >>= 1;
		b++;
	}
	return b;
}

/* A null value, as resil_value_init() makes it (all zero bits), without
 * a call on the hot path. */
HOT void
vnull(resil_value *v)
{
	memset(v, 0, sizeof(*v));
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/*
 * A mock endpoint of the directory answers for the mock stage (Dubbo's
 * mock:// providers): the consumer's spec chose the mode (failure NULL:
 * force), the endpoint's spec gives the answer. 1 when it answered into
 * *out; 0 when there is none (or its spec does not parse): the local mock
 * answers then.
 */
static int
mock_from_endpoint(resil_pipeline *p, const resil_args *args,
    const resil_failure *failure, resil_result *out)
{
	char spec[RESIL_DIAG_MAX], full[RESIL_DIAG_MAX + 8];
	const char *body = spec;
	resil_mock_config mc;
	resil_mock *m;
	resil_err err;

	if (p->sel == NULL ||
	    !resil_selector_mock_spec(
	        p->sel, args->method, spec, sizeof(spec)))
		return 0;
	while (*body == ' ' || *body == '\t')
		body++;
	if (strncmp(body, "force:", 6) == 0)
		body += 6;
	else if (strncmp(body, "fail:", 5) == 0)
		body += 5;
	snprintf(full, sizeof(full), "%s%s",
	    failure == NULL ? "force:" : "fail:", body);
	resil_mock_config_init(&mc);
	mc.service = p->service;
	mc.spec = full;
	mc.registry = p->registry;
	mc.alloc = &p->alloc;
	if (resil_mock_new(&m, &mc, NULL) != RESIL_OK)
		return 0;
	err = resil_mock_invoke(m, args, failure, out);
	resil_mock_free(m);
	return err != RESIL_E_NOTFOUND && err != RESIL_E_NOMEM &&
	    err != RESIL_E_INVAL;
}

/* The chain's mock handler: whatever mock is current when it runs. */
static resil_verdict
mock_handler(void *ctx, const resil_args *args, const resil_failure *failure,
    resil_result *out)
{
	settings *g = ctx;
	resil_pipeline *p = g->p;
	resil_mock *m;
	resil_err err;
	unsigned tok;

	if (resil__loadptr((void *const *)&g->mock) == NULL)
		return RESIL_FALLBACK_PASS;
	m = mock_hold(p, g, &tok);
	if (m != NULL && p->sel != NULL) {
		const resil_mock_spec *spec;

		if (resil_mock_lookup(m, args->method, &spec) == RESIL_OK &&
		    spec->action != RESIL_MOCK_NONE &&
		    mock_from_endpoint(p, args, failure, out)) {
			mock_release(p, tok);
			return RESIL_FALLBACK_ANSWER;
		}
	}
	err = m != NULL ? resil_mock_invoke(m, args, failure, out)
	                : RESIL_E_NOTFOUND;
	mock_release(p, tok);
	if (err == RESIL_E_NOTFOUND)
		return RESIL_FALLBACK_PASS;
	return RESIL_FALLBACK_ANSWER;
}

static void
count_source(resil_pipeline *p, const resil_result *r)
{
	stripe *s = my_stripe(p);

	switch (r->source) {
	case RESIL_SOURCE_CACHE:
		resil__faa64(&s->cache, 1);
		break;
	case RESIL_SOURCE_MOCK:
		resil__faa64(&s->mock, 1);
		break;
	case RESIL_SOURCE_FALLBACK:
		resil__faa64(&s->fallback, 1);
		break;
	case RESIL_SOURCE_UNAVAILABLE:
		resil__faa64(&s->unavailable, 1);
		break;
	case RESIL_SOURCE_LIVE:
		if (r->err == RESIL_E_BUSINESS)
			resil__faa64(&s->business, 1);
		else if (r->err != RESIL_OK)
			resil__faa64(&s->errors, 1);
		break;
	}
}

/* The call is answered: count it, tell the listener, and stop. */
HOT void
conclude_with(callm *c, resil_stage stage, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;

	if (RESIL__UNLIKELY(
	        out->source != RESIL_SOURCE_LIVE || out->err != RESIL_OK))
		count_source(p, out);
	if (p->listener != NULL && stage != RESIL_STAGE_CALL)
		emit_result(p, stage, out, tnow(ts));
	if (RESIL__UNLIKELY(p->call_events != 0))
		emit_call(p, c, out, tnow(ts));
	c->phase = P_DONE;
	c->magic = CALL_DONE;
	st->action = RESIL_CALL_DONE;
	st->attempt = 0;
	st->deadline = 0;
	st->until = 0;
}

/* Give back what the still running attempts hold; their late answers will
 * be dropped. */
static void
abandon_running(callm *c)
{
	unsigned i;

	if (c->running == 0)
		return;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		slot *s = &c->slots[i];

		if (!(c->running & (1u << i)))
			continue;
		if (s->has_permit)
			resil_breaker_release(c->breaker, &s->permit);
		if (s->has_bh)
			resil_bulkhead_release(c->g->bh);
		s->has_permit = s->has_bh = 0;
		if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER &&
		        (c->has_pick & (1u << i)))) {
			/* Abandoned (a fork that lost, a cancelled call): the
			 * pick is released, no outcome is counted. */
			resil_selector_release(c->sel, &c->picks[i]);
			c->has_pick &= (uint8_t) ~(1u << i);
		}
	}
	c->abandoned |= c->running;
	c->running = 0;
	if (c->breaker != NULL)
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
}

/* The answer is the live call's (a success, a business error or an
 * ignored outcome): the callee's own, untouched, never degraded. */
static inline void
conclude_live(
    callm *c, int rc, resil_outcome outcome, tsrc *ts, resil_call_next *st)
{
	resil_result *out = c->out;

	out->rc = rc;
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->source = RESIL_SOURCE_LIVE;
	if (outcome == RESIL_OUTCOME_BUSINESS) {
		resil_value_free(&c->value);
		out->err = RESIL_E_BUSINESS;
		conclude_with(c, RESIL_STAGE_CALL, ts, st);
		return;
	}
	if (outcome == RESIL_OUTCOME_SUCCESS && c->g->cache != NULL)
		resil_fallback_record(c->g->fb, c->args, &c->value);
	/* IGNORED passes as it is: RESIL_OK with rc 0, else E_CALL. */
	out->err = outcome == RESIL_OUTCOME_SUCCESS || rc == 0 ? RESIL_OK
	                                                       : RESIL_E_CALL;
	out->value = c->value; /* moved */
	vnull(&c->value);
	conclude_with(c, RESIL_STAGE_CALL, ts, st);
}

/* The retry stage is over (rr, and the last attempt's rc, status,
 * outcome): build the answer, live or from the fallback chain. */
static void
conclude(callm *c, resil_err rr, int rc, resil_err status,
    resil_outcome outcome, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;
	resil_failure failure;

	abandon_running(c);
	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER)) {
		cl_conclude(c, rr, rc, status, outcome, ts, st);
		return;
	}
	if (rr == RESIL_OK && status == RESIL_OK &&
	    outcome != RESIL_OUTCOME_FAILURE) {
		conclude_live(c, rc, outcome, ts, st);
		return;
	}

	/* A non-business failure: the fallback chain answers or passes. */
	resil_value_free(&c->value);
	failure.err = status != RESIL_OK      ? status
	    : rr == RESIL_E_RETRIES_EXHAUSTED ? RESIL_E_RETRIES_EXHAUSTED
	                                      : RESIL_E_CALL;
	failure.rc = rc;
	failure.attempts = c->attempts;
	/* No cache, no mock for this method and no handler: no fallback is
	 * configured, so the original error propagates. */
	resil_fallback_recover(
	    c->g->cache != NULL || c->has_mock || p->handlers > 0 ? c->g->fb
	                                                          : NULL,
	    c->args, &failure, out);
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->last_failure = c->real_err;
	out->last_failure_rc = c->real_rc;
	conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
}

/* End of the retry run: its report decides the answer. */
static void
conclude_run(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_retry_result res;
	resil_err rr = resil__retry_end(c->retry, &c->run, &res);

	conclude(c, rr, res.rc, res.status, res.outcome, ts, st);
}

/* A free slot; when every slot is taken, the oldest abandoned attempt is
 * forgotten (its answer, if it ever comes, is then refused). */
static int
free_slot_slow(callm *c)
{
	unsigned used = (unsigned)(c->running | c->abandoned), i;
	int old = -1;

	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		if (!(used & (1u << i)))
			return (int)i;
		if ((c->abandoned & (1u << i)) &&
		    (old < 0 || c->slots[i].id < c->slots[old].id))
			old = (int)i;
	}
	if (old >= 0)
		c->abandoned &= (uint8_t) ~(1u << old);
	return old;
}

HOT int
free_slot(callm *c)
{
	if (RESIL__LIKELY((c->running | c->abandoned) == 0))
		return 0;
	return free_slot_slow(c);
}

/* A rejected attempt: no call was made, the retry policy sees the
 * rejection as that attempt's status. */
static void
rejected(callm *c, resil_err status)
{
	c->last_rc = 0;
	c->last_status = status;
	c->last_outcome = RESIL_OUTCOME_FAILURE;
	c->pending = 1;
}

HOT int launch(callm *c, tsrc *ts, resil_call_next *st);

/* ---- the cluster in the machine ----
 *
 * With a selector every attempt is routed and picked when it is launched
 * (cl_pick: the candidate set comes from the pipeline's pool and goes
 * back at once, so a call holds no snapshot), reported to the selector
 * when it completes (cl_done: outcome and duration, a timeout as a
 * failure) and released when it is abandoned. The strategy decides after
 * each attempt (cl_decide) and shapes the answer (cl_conclude).
 */

/* src into dst (n bytes with the NUL), cut when it does not fit. */
static void
copy_str(char *dst, size_t n, const char *src)
{
	size_t len = src != NULL ? strlen(src) : 0;

	if (len >= n)
		len = n - 1;
	if (len > 0)
		memcpy(dst, src, len);
	dst[len] = '\0';
}

static resil_candidates *
cand_take(resil_pipeline *p, int *at)
{
	unsigned st = resil__thread_stripe(NSTRIPES), k;
	resil_candidates *c;

	for (k = 0; k < NSTRIPES; k++) {
		unsigned i = (st + k) % NSTRIPES;

		if (resil__load64(&p->pool[i].busy) == 0 &&
		    resil__cas64(&p->pool[i].busy, 0, 1)) {
			*at = (int)i;
			return p->pool[i].c;
		}
	}
	/* Every pooled set is in use: one of its own for this pick. */
	*at = -1;
	return resil_candidates_new(&c, p->sel) == RESIL_OK ? c : NULL;
}

static void
cand_put(resil_pipeline *p, resil_candidates *c, int at)
{
	if (at < 0) {
		resil_candidates_free(c);
		return;
	}
	resil_candidates_clear(c);
	resil__store64(&p->pool[at].busy, 0);
}

static void
cl_start(callm *c, const method *m, tsrc ts)
{
	resil_pipeline *p = c->p;

	c->sel = p->sel;
	c->magic = CALL_CLUSTER;
	c->cphase = 1;
	c->cstop = 0;
	c->has_pick = 0;
	c->last_local = 0;
	c->bany = 0;
	c->ncand = c->nother = c->bn = 0;
	c->bidx = c->bfail = c->bthreshold = 0;
	c->blast_rc = 0;
	c->blast_status = RESIL_OK;
	c->ntried = c->nfailed = 0;
	c->last_timeout = 0;
	c->failed[0] = c->last_addr[0] = c->last_zone[0] = c->cmsg[0] = '\0';
	memset(&c->req, 0, sizeof(c->req));
	c->req.method = c->args->method;
	c->retry = p->ccfg.strategy == RESIL_CLUSTER_FAILOVER ||
	        p->ccfg.strategy == RESIL_CLUSTER_ZONE_AWARE
	    ? (m->cretry != NULL ? m->cretry : c->g->cretry)
	    : NULL;
	/* The run is on from the start (with no policy, a run that is never
	 * used: it keeps the machine's first-success shortcut, which knows
	 * nothing of endpoints, away from cluster calls). */
	c->run_on = 1;
	if (c->retry != NULL)
		resil__retry_begin(c->retry, &c->run,
		    resil__retry_needs_time(c->retry),
		    resil__retry_needs_time(c->retry) ? tnow(&ts) : 0);
	else
		memset(&c->run, 0, sizeof(c->run));
}

static void
note_tried(callm *c, uint64_t id)
{
	uint32_t k;

	for (k = 0; k < c->ntried; k++)
		if (c->tried[k] == id)
			return;
	if (c->ntried < sizeof(c->tried) / sizeof(c->tried[0]))
		c->tried[c->ntried++] = id;
}

static resil_err
cl_pick(callm *c, unsigned i, uint64_t now)
{
	resil_pipeline *p = c->p;
	const resil_cluster_config *cc = &p->ccfg;
	resil_pick *pk = &c->picks[i];
	const char *zone = p->zone;
	resil_candidates *cs;
	resil_diag diag;
	resil_err err;
	int ps;

	cs = cand_take(p, &ps);
	if (cs == NULL) {
		snprintf(c->cmsg, sizeof(c->cmsg), "pipeline: out of memory");
		return RESIL_E_NOMEM;
	}
	diag.msg[0] = '\0';
	err = resil_selector_route(c->sel, &c->req, cs, &diag);
	if (err != RESIL_OK) {
		cand_put(p, cs, ps);
		copy_str(c->cmsg, sizeof(c->cmsg), diag.msg);
		if (err == RESIL_E_NO_PROVIDER)
			cluster_event(p, RESIL_CLUSTER_EVENT_NO_PROVIDER,
			    c->req.method, NULL, 0, now);
		return err;
	}
	c->ncand = (uint32_t)resil_candidates_count(cs);
	if (c->issued == 0 && cc->strategy == RESIL_CLUSTER_BROADCAST) {
		/* The call's first route sets the broadcast's endpoints and
		 * threshold. */
		c->bn = c->ncand;
		c->bthreshold = (uint32_t)((uint64_t)c->bn *
		    (uint64_t)cc->broadcast_fail_percent / 100u);
	}
	switch (cc->strategy) {
	case RESIL_CLUSTER_BROADCAST: {
		size_t k, n = resil_candidates_count(cs);
		resil_candidate cd;

		err = RESIL_E_UNAVAILABLE;
		for (k = 0; k < n; k++) {
			if (resil_candidates_get(cs, k, &cd) != RESIL_OK ||
			    (c->bidx > 0 && cd.id <= c->blast_id))
				continue;
			c->blast_id = cd.id; /* refused or not, passed over */
			err = resil_selector_pick_at(c->sel, cs, k, pk, &diag);
			break;
		}
		break;
	}
	case RESIL_CLUSTER_ZONE_AWARE:
		if (c->cphase == 2) {
			/* The one cross-zone attempt. */
			err = resil_selector_pick_zone(
			    c->sel, cs, &c->req, NULL, 0, zone, 0, pk, &diag);
			c->last_local = 0;
			break;
		}
		c->nother = (uint32_t)resil_candidates_count_zone(cs, zone, 0);
		if (resil_candidates_count_zone(cs, zone, 1) > 0) {
			err = resil_selector_pick_zone(c->sel, cs, &c->req,
			    c->tried, c->ntried, zone, 1, pk, &diag);
			if (err == RESIL_E_UNAVAILABLE && c->ntried > 0)
				err = resil_selector_pick_zone(c->sel, cs,
				    &c->req, NULL, 0, zone, 1, pk, &diag);
			c->last_local = 1;
			break;
		}
		/* No usable local endpoint: phase 1 runs over every zone. */
		c->last_local = 0;
		c->nother = 0;
		/* fall through */
	default:
		err = resil_selector_pick(
		    c->sel, cs, &c->req, c->tried, c->ntried, pk, &diag);
		if (err == RESIL_E_UNAVAILABLE && c->ntried > 0 &&
		    cc->strategy != RESIL_CLUSTER_FORKING)
			/* Every candidate tried: tried ones again. */
			err = resil_selector_pick(
			    c->sel, cs, &c->req, NULL, 0, pk, &diag);
		break;
	}
	if (err == RESIL_OK) {
		if (pk->zone != NULL) {
			copy_str(c->pzone[i], sizeof(c->pzone[i]), pk->zone);
			pk->zone = c->pzone[i];
		}
		note_tried(c, pk->id);
		c->has_pick |= (uint8_t)(1u << i);
		c->slots[i].start = now;
	} else {
		copy_str(c->cmsg, sizeof(c->cmsg), diag.msg);
	}
	cand_put(p, cs, ps);
	return err;
}

static void
cl_done(callm *c, unsigned i, resil_outcome outcome, uint64_t t1)
{
	resil_pick *pk = &c->picks[i];
	uint64_t dur;
	uint32_t k;

	if (!(c->has_pick & (1u << i)))
		return;
	dur = t1 > c->slots[i].start ? t1 - c->slots[i].start : 0;
	copy_str(c->last_addr, sizeof(c->last_addr),
	    pk->address != NULL ? pk->address : "");
	copy_str(c->last_zone, sizeof(c->last_zone),
	    pk->zone != NULL ? pk->zone : "");
	c->last_timeout = c->timeout;
	if (outcome == RESIL_OUTCOME_FAILURE) {
		for (k = 0; k < c->nfailed && c->failed_ids[k] != pk->id; k++)
			;
		if (k == c->nfailed &&
		    c->nfailed <
		        sizeof(c->failed_ids) / sizeof(c->failed_ids[0])) {
			size_t len = strlen(c->failed);

			c->failed_ids[c->nfailed++] = pk->id;
			snprintf(c->failed + len, sizeof(c->failed) - len,
			    "%s%s", len > 0 ? ", " : "", c->last_addr);
		}
	}
	resil_selector_report_duration(c->sel, pk, outcome, dur);
	c->has_pick &= (uint8_t) ~(1u << i);
}

/* The strategy's own decisions after an attempt: 0 (done, or *st RUN),
 * or -1 to leave it to the retry stage (failover, zone-aware phase 1). */
static int
cl_decide(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;

	if (c->cstop && c->last_status != RESIL_OK) {
		/* The last thing that happened is the refusal (a fork that
		 * answered after it still counts: last_status is its). rc is
		 * the last attempt's that ran, as the other strategies'. */
		c->pending = 0;
		conclude(c, c->last_status, c->real_rc, c->last_status,
		    RESIL_OUTCOME_FAILURE, ts, st);
		return 0;
	}
	if (p->ccfg.strategy == RESIL_CLUSTER_BROADCAST) {
		for (;;) {
			c->pending = 0;
			if (c->last_outcome == RESIL_OUTCOME_BUSINESS) {
				conclude(c, RESIL_OK, c->last_rc, RESIL_OK,
				    RESIL_OUTCOME_BUSINESS, ts, st);
				return 0;
			}
			if (c->last_outcome == RESIL_OUTCOME_FAILURE &&
			    c->last_status != RESIL_E_UNAVAILABLE) {
				c->bany = 1;
				c->bfail++;
				c->blast_rc = c->last_rc;
				c->blast_status = c->last_status != RESIL_OK
				    ? c->last_status
				    : RESIL_E_CALL;
				if (c->bfail == c->bthreshold)
					break;
			}
			if (++c->bidx >= c->bn)
				break;
			if (launch(c, ts, st))
				return 0;
			if (c->cstop) {
				conclude(c, c->last_status, 0, c->last_status,
				    RESIL_OUTCOME_FAILURE, ts, st);
				return 0;
			}
		}
		if (c->bany) {
			conclude(c, c->blast_status, c->blast_rc,
			    c->blast_status, RESIL_OUTCOME_FAILURE, ts, st);
		} else if (c->attempts == 0) {
			conclude(c, RESIL_E_UNAVAILABLE, 0,
			    RESIL_E_UNAVAILABLE, RESIL_OUTCOME_FAILURE, ts,
			    st);
		} else {
			conclude(c, RESIL_OK, c->last_rc, RESIL_OK,
			    c->last_outcome == RESIL_OUTCOME_FAILURE
			        ? RESIL_OUTCOME_SUCCESS
			        : c->last_outcome,
			    ts, st);
		}
		return 0;
	}
	if (p->ccfg.strategy == RESIL_CLUSTER_ZONE_AWARE) {
		if (c->cphase == 2) {
			c->pending = 0;
			conclude(c, c->last_status, c->last_rc, c->last_status,
			    c->last_outcome, ts, st);
			return 0;
		}
		if (c->last_status == RESIL_E_TIMEOUT && c->last_local &&
		    c->nother > 0) {
			/* Phase 1 ended in a timeout: one attempt in another
			 * zone, with its own timeout. */
			resil_err ls = c->last_status;
			int lrc = c->last_rc;

			c->pending = 0;
			c->cphase = 2;
			if (p->ccfg.cross_zone_timeout_ns != 0)
				c->timeout = p->ccfg.cross_zone_timeout_ns;
			cluster_event(p, RESIL_CLUSTER_EVENT_CROSS_ZONE,
			    c->req.method, c->last_addr, 0, tnow(ts));
			if (launch(c, ts, st))
				return 0;
			/* No other-zone endpoint would take it: the timeout
			 * stands. */
			c->pending = 0;
			c->cstop = 0;
			c->last_status = ls;
			c->last_rc = lrc;
			c->last_outcome = RESIL_OUTCOME_FAILURE;
			conclude(
			    c, ls, lrc, ls, RESIL_OUTCOME_FAILURE, ts, st);
			return 0;
		}
	}
	return -1;
}

/* The answer of a cluster call: as conclude(), with the strategy's say
 * (failsafe, failback), the endpoint and Dubbo's message. */
static void
cl_conclude(callm *c, resil_err rr, int rc, resil_err status,
    resil_outcome outcome, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;
	resil_cluster_strategy sg = p->ccfg.strategy;
	resil_failure failure;
	int full = 0;

	if (rr == RESIL_OK && status == RESIL_OK &&
	    outcome != RESIL_OUTCOME_FAILURE) {
		copy_str(out->endpoint, sizeof(out->endpoint), c->last_addr);
		copy_str(out->zone, sizeof(out->zone), c->last_zone);
		conclude_live(c, rc, outcome, ts, st);
		return;
	}
	resil_value_free(&c->value);
	if (!c->cstop && sg == RESIL_CLUSTER_FAILBACK &&
	    p->ccfg.failback_retries > 0) {
		int q = resil__cluster_enqueue(p->fbq, &c->req, c->args,
		    c->last_addr, c->ntried > 0 ? c->tried[c->ntried - 1] : 0,
		    rc, tnow(ts));

		/* The queue is full (an event said so) or memory ran out:
		 * the failure is not swallowed, it goes on as failfast's
		 * would. full: 1 full, 2 out of memory. */
		if (q <= 0)
			full = q == 0 ? 1 : 2;
	}
	if (!c->cstop && !full &&
	    (sg == RESIL_CLUSTER_FAILSAFE || sg == RESIL_CLUSTER_FAILBACK)) {
		/* The failure is swallowed: a null value now (failback:
		 * and the call queued for later). No fallback runs. */
		if (sg == RESIL_CLUSTER_FAILSAFE)
			cluster_event(p, RESIL_CLUSTER_EVENT_SWALLOWED,
			    c->req.method, c->last_addr, rc, tnow(ts));
		out->rc = rc;
		out->attempts = c->attempts;
		out->breaker_state = c->breaker_state;
		out->source = RESIL_SOURCE_LIVE;
		out->err = RESIL_OK;
		out->last_failure = c->real_err;
		out->last_failure_rc = c->real_rc;
		copy_str(out->endpoint, sizeof(out->endpoint), c->last_addr);
		copy_str(out->zone, sizeof(out->zone), c->last_zone);
		conclude_with(c, RESIL_STAGE_CALL, ts, st);
		return;
	}
	/* The final error has the kind of the last attempt's (failover's
	 * exhaustion is that attempt's failure, as in Dubbo). */
	failure.err = status != RESIL_OK       ? status
	    : outcome == RESIL_OUTCOME_FAILURE ? RESIL_E_CALL
	    : rr != RESIL_OK                   ? rr
	                                       : RESIL_E_CALL;
	failure.rc = rc;
	failure.attempts = c->attempts;
	resil_fallback_recover(
	    c->g->cache != NULL || c->has_mock || p->handlers > 0 ? c->g->fb
	                                                          : NULL,
	    c->args, &failure, out);
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->last_failure = c->real_err;
	out->last_failure_rc = c->real_rc;
	if (out->source == RESIL_SOURCE_LIVE && out->err != RESIL_OK) {
		/* No fallback answered: the endpoint, and what happened in
		 * Dubbo's words. */
		copy_str(out->endpoint, sizeof(out->endpoint), c->last_addr);
		copy_str(out->zone, sizeof(out->zone), c->last_zone);
		if (c->cstop && c->cmsg[0] != '\0')
			copy_str(out->message, sizeof(out->message), c->cmsg);
		else if (sg == RESIL_CLUSTER_BROADCAST) {
			char lasterr[64];

			resil__cluster_last_error(lasterr, sizeof(lasterr),
			    failure.err, rc, c->last_timeout);
			resil__cluster_broadcast_msg(out->message,
			    sizeof(out->message), c->req.method, p->service,
			    c->bfail, c->bn, c->attempts > 0 ? lasterr : NULL);
		} else if (full) {
			char lasterr[64];

			resil__cluster_last_error(lasterr, sizeof(lasterr),
			    failure.err, rc, c->last_timeout);
			resil__cluster_full_msg(out->message,
			    sizeof(out->message), c->req.method, p->service,
			    full == 1 ? p->ccfg.failback_queue : -1, lasterr);
		} else {
			char lasterr[64];

			resil__cluster_last_error(lasterr, sizeof(lasterr),
			    c->real_err != RESIL_OK ? c->real_err
			                            : failure.err,
			    c->real_err != RESIL_OK ? c->real_rc : rc,
			    c->last_timeout);
			resil__cluster_failed_msg(out->message,
			    sizeof(out->message), c->req.method, p->service,
			    c->attempts, c->failed, c->nfailed, c->ncand,
			    lasterr);
		}
	}
	conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
}

/*
 * Start an attempt: a breaker permit, the rate limiter, the bulkhead.
 * Returns 1 with *st RUN, or 0 when a stage rejected it (pending set with
 * the rejection) or no slot is free.
 */
HOT int
launch(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	uint64_t retry_after, deadline = UINT64_MAX;
	int i = free_slot(c);
	resil_permit permit;
	slot *s;

	if (i < 0)
		return 0;
	s = &c->slots[i];
	if (c->breaker != NULL &&
	    resil_breaker_acquire(c->breaker, &permit) != RESIL_OK) {
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
		rejected(c, RESIL_E_OPEN);
		return 0;
	}
	if (c->g->rl != NULL &&
	    resil_ratelimit_try_acquire(c->g->rl, 1, &retry_after) !=
	        RESIL_OK) {
		if (c->breaker != NULL) {
			resil_breaker_release(c->breaker, &permit);
			c->breaker_state =
			    (int)resil_breaker_get_state(c->breaker);
		}
		rejected(c, RESIL_E_LIMITED);
		return 0;
	}
	if (c->g->bh != NULL &&
	    resil_bulkhead_try_acquire(c->g->bh) != RESIL_OK) {
		if (c->breaker != NULL) {
			resil_breaker_release(c->breaker, &permit);
			c->breaker_state =
			    (int)resil_breaker_get_state(c->breaker);
		}
		rejected(c, RESIL_E_LIMITED);
		return 0;
	}
	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER)) {
		/* The endpoint: routed and balanced now. */
		resil_err e = cl_pick(c, (unsigned)i, tnow(ts));

		if (e != RESIL_OK) {
			if (c->breaker != NULL) {
				resil_breaker_release(c->breaker, &permit);
				c->breaker_state =
				    (int)resil_breaker_get_state(c->breaker);
			}
			if (c->g->bh != NULL)
				resil_bulkhead_release(c->g->bh);
			/* No candidate ends the call (never retried); a
			 * broadcast passes over a refusing endpoint, and
			 * forking has no more forks than candidates. */
			if (!(e == RESIL_E_UNAVAILABLE &&
			        (p->ccfg.strategy == RESIL_CLUSTER_BROADCAST ||
			            (p->ccfg.strategy ==
			                    RESIL_CLUSTER_FORKING &&
			                c->issued > 0)))) {
				c->cstop = 1;
				c->no_more_hedges = 1; /* no more forks */
			}
			rejected(c, e);
			return 0;
		}
		st->endpoint = &c->picks[i];
	}
	c->running |= (uint8_t)(1u << i);
	s->id = ++c->issued;
	c->attempts++; /* a call of the user's function is made */
	s->has_permit = c->breaker != NULL;
	s->has_bh = c->g->bh != NULL;
	if (c->breaker != NULL)
		s->permit = permit;
	if (c->timeout != 0 || p->hedge_max != 0) {
		s->start = c->launched = tnow(ts);
		if (c->timeout != 0)
			deadline = sat_add(s->start, c->timeout);
	}
	if (c->run_on && c->run.has_deadline && c->run.deadline_at < deadline)
		deadline = c->run.deadline_at;
	st->action = RESIL_CALL_RUN;
	st->attempt = s->id;
	st->deadline = deadline;
	st->until = 0;
	return 1;
}

/*
 * Attempt s answered (rc, *value, moved in; NULL: null) at the time in
 * ts, or (late != 0) did not answer by its timeout. Record it with every
 * stage below retry. A late attempt stays abandoned: its answer, when it
 * comes, is dropped.
 */
HOT void
complete(callm *c, unsigned i, int rc, resil_value *value, int late, tsrc *ts)
{
	slot *s = &c->slots[i];
	resil_pipeline *p = c->p;
	resil_outcome outcome;
	resil_err status = RESIL_OK;
	uint64_t dur = 0;

	if (c->timeout != 0) {
		uint64_t t1 = tnow(ts);
		stripe *sp = my_stripe(p);

		dur = t1 > s->start ? t1 - s->start : 0;
		resil__faa64(&sp->latency[latency_bucket(dur)], 1);
		resil__faa64(&sp->latency_count, 1);
	}
	if (value != &c->value) {
		if (c->value.type != RESIL_VALUE_NULL) {
			/* The previous attempt's value is dropped. */
			resil_value_free(&c->value);
			vnull(&c->value);
		}
		if (value != NULL) {
			c->value = *value;
			vnull(value);
		}
	}
	outcome = late ? RESIL_OUTCOME_FAILURE
	               : resil_classify(&p->cls, rc, &c->value);
	if (c->timeout != 0 &&
	    (late || dur >= sat_add(c->timeout, p->late_edge))) {
		/* Too late: the answer is dropped and the attempt failed. */
		resil_value_free(&c->value);
		vnull(&c->value);
		outcome = RESIL_OUTCOME_FAILURE;
		status = RESIL_E_TIMEOUT;
		resil__faa64(&my_stripe(p)->timeouts, 1);
	}
	if (s->has_permit) {
		if (c->timeout != 0)
			resil_breaker_record_duration(
			    c->breaker, &s->permit, outcome, dur);
		else
			resil_breaker_record(c->breaker, &s->permit, outcome);
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
	}
	if (s->has_bh)
		resil_bulkhead_complete(c->g->bh, outcome, dur);
	s->has_permit = s->has_bh = 0;
	c->running &= (uint8_t) ~(1u << i);
	if (late)
		c->abandoned |= (uint8_t)(1u << i);
	c->last_rc = late ? 0 : rc;
	c->last_status = status;
	c->last_outcome = outcome;
	if (outcome == RESIL_OUTCOME_FAILURE) {
		c->real_err = status != RESIL_OK ? status : RESIL_E_CALL;
		c->real_rc = late ? 0 : rc;
	}
	c->pending = 1;
	if (outcome != RESIL_OUTCOME_FAILURE && p->hedge_max != 0) {
		/* The first answer that is not a failure wins. */
		c->winner = 1;
		abandon_running(c);
	}
}

/* Start the next attempt of the retry stage (after a backoff), or decide
 * at once when it is rejected; attend to the attempts out. */
static void advance(callm *c, tsrc *ts, int waited, resil_call_next *st);
static void attend(callm *c, tsrc *ts, resil_call_next *st);

/*
 * The retry attempt is over: its (last) attempt's answer is in c->last_*.
 * Decide: answer, or retry after a backoff.
 */
static int
decide_core(callm *c, tsrc *ts, resil_call_next *st)
{
	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER)) {
		int r = cl_decide(c, ts, st);

		if (r >= 0)
			return r;
	}
	c->pending = 0;
	c->winner = 0;
	c->hedges = 0;
	c->no_more_hedges = 0;
	if (c->retry == NULL) {
		conclude(c, c->last_status, c->last_rc, c->last_status,
		    c->last_outcome, ts, st);
		return 0;
	}
	if (!c->run_on) {
		/* The fast path: attempt 1 ran before the run was begun. A
		 * success then needs nothing from the policy but a count. */
		if (c->last_status == RESIL_OK &&
		    c->last_outcome == RESIL_OUTCOME_SUCCESS) {
			resil__retry_count_first_success(c->retry);
			conclude(c, RESIL_OK, c->last_rc, RESIL_OK,
			    RESIL_OUTCOME_SUCCESS, ts, st);
			return 0;
		}
		c->run_on = 1;
		resil__retry_begin(c->retry, &c->run,
		    resil__retry_needs_time(c->retry),
		    resil__retry_needs_time(c->retry) ? tnow(ts) : 0);
	}
	if (!resil__retry_judge(c->retry, &c->run, c->last_rc, c->last_status,
	        &c->value, c->run.timed ? tnow(ts) : 0) ||
	    !resil__retry_plan(c->retry, &c->run, tnow(ts))) {
		conclude_run(c, ts, st);
		return 0;
	}
	c->wait_until = sat_add(c->run.now, c->run.wait);
	c->phase = P_WAIT;
	return 1;
}

/* What the machine does next, for the loop in run_machine(). */
enum { M_ATTEND, M_DECIDE, M_ADVANCE, M_STOP };

/*
 * After a backoff: start the next attempt of the retry stage. A
 * rejection is decided at once (M_DECIDE), or, with hedging, attended
 * (M_ATTEND); M_STOP with *st RUN, WAIT or DONE.
 */
static int
advance_once(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	if (!waited && tnow(ts) < c->wait_until) {
		st->action = RESIL_CALL_WAIT;
		st->attempt = 0;
		st->deadline = 0;
		st->until = c->wait_until;
		return M_STOP;
	}
	if (!resil__retry_resume(c->retry, &c->run, tnow(ts))) {
		conclude_run(c, ts, st);
		return M_STOP;
	}
	c->phase = P_ATTEMPT;
	if (launch(c, ts, st))
		return M_STOP;
	/* Rejected; with hedging a rejection may still be hedged. */
	return c->p->hedge_max != 0 ? M_ATTEND : M_DECIDE;
}

/*
 * Attempts are out, or one has answered: decide (M_DECIDE), hedge, fail
 * the late ones, or say how long to wait (M_STOP with *st set).
 */
static int
attend_once(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	uint64_t wake = UINT64_MAX;
	unsigned i;

	/* The common case: the one attempt has answered. */
	if (RESIL__LIKELY(c->pending && c->running == 0 && p->hedge_max == 0))
		return M_DECIDE;
	if (c->timeout != 0 && c->running != 0) {
		for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
			slot *s = &c->slots[i];
			uint64_t due;

			if (!(c->running & (1u << i)))
				continue;
			/* Late when its duration passes the timeout. */
			due = sat_add(
			    sat_add(s->start, c->timeout), p->late_edge);
			if (tnow(ts) >= due) {
				complete(c, i, 0, NULL, 1, ts);
				if (c->magic == CALL_CLUSTER)
					cl_done(
					    c, i, c->last_outcome, tnow(ts));
			}
		}
	}
	if (c->winner ||
	    (c->running == 0 && c->pending &&
	        (p->hedge_max == 0 || c->no_more_hedges ||
	            c->hedges >= p->hedge_max)))
		return M_DECIDE;
	if (p->hedge_max != 0 && !c->no_more_hedges &&
	    c->hedges < p->hedge_max &&
	    (c->pending || tnow(ts) >= sat_add(c->launched, p->hedge_delay))) {
		/* A failure, or no answer within the hedge delay: another
		 * attempt, paid for from the retry budget. */
		c->pending = 0;
		if (c->retry != NULL &&
		    !resil__retry_spend(c->retry, tnow(ts))) {
			c->no_more_hedges = 1;
		} else {
			c->hedges++;
			if (launch(c, ts, st))
				return M_STOP;
		}
		return M_ATTEND;
	}
	c->pending = 0;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		const slot *s = &c->slots[i];

		if ((c->running & (1u << i)) && c->timeout != 0) {
			uint64_t due = sat_add(
			    sat_add(s->start, c->timeout), p->late_edge);

			if (due < wake)
				wake = due;
		}
	}
	if (p->hedge_max != 0 && !c->no_more_hedges &&
	    c->hedges < p->hedge_max) {
		uint64_t due = sat_add(c->launched, p->hedge_delay);

		if (due < wake)
			wake = due;
	}
	st->action = RESIL_CALL_WAIT;
	st->attempt = 0;
	st->deadline = 0;
	st->until = wake;
	return M_STOP;
}

/*
 * The machine's moves until it has an action for the caller: a loop, not
 * a recursion (with retry_on_open, a zero backoff and an open breaker,
 * each of up to RESIL_RETRY_MAX_ATTEMPTS attempts is rejected at once,
 * and each hedge that cannot launch is attended again).
 */
static void
run_machine(callm *c, tsrc *ts, int state, int waited, resil_call_next *st)
{
	for (;;) {
		switch (state) {
		case M_ATTEND:
			state = attend_once(c, ts, st);
			break;
		case M_DECIDE:
			state = decide_core(c, ts, st) ? M_ADVANCE : M_STOP;
			break;
		case M_ADVANCE:
			state = advance_once(c, ts, waited, st);
			waited = 0;
			break;
		default:
			return;
		}
	}
}

/* The retry stage waited (waited: the driver slept through the backoff). */
static void
advance(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	run_machine(c, ts, M_ADVANCE, waited, st);
}

static void
attend(callm *c, tsrc *ts, resil_call_next *st)
{
	run_machine(c, ts, M_ATTEND, 0, st);
}

static resil_err
check_method(const resil_pipeline *p, const struct resil_method *m)
{
	return m->owner == p ? RESIL_OK : RESIL_E_INVAL;
}

HOT void minit(callm *c, resil_pipeline *p, settings *g, unsigned gs,
    const method *m, const resil_args *args, resil_result *out);

/* Start: the mock stage, then attempt 1. */
HOT resil_err
mstart(callm *c, resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_result *out, tsrc *ts, resil_call_next *st)
{
	resil_mock *mock;

	resil_result_init(out);
	resil__faa64(&p->stripes[gs].calls, 1);
	minit(c, p, g, gs, m, args, out);

	/* The mock stage: force: answers and nothing below runs. The mock
	 * is held (mock_hold) while it is read: set_mock may replace it. */
	if (resil__loadptr((void *const *)&g->mock) != NULL) {
		const resil_mock_spec *spec;
		unsigned tok;
		int forced = 0;

		mock = mock_hold(p, g, &tok);
		if (mock != NULL &&
		    resil_mock_lookup(mock, args->method, &spec) == RESIL_OK &&
		    spec->action != RESIL_MOCK_NONE) {
			c->has_mock = 1;
			if (spec->mode == RESIL_MOCK_FORCE) {
				forced = 1;
				if (RESIL__UNLIKELY(p->sel != NULL) &&
				    mock_from_endpoint(p, args, NULL, out))
					;
				else if (resil_mock_invoke(mock, args, NULL,
				             out) == RESIL_E_NOMEM) {
					resil_result_init(out);
					out->err = RESIL_E_NOMEM;
				}
			}
		}
		mock_release(p, tok);
		if (forced) {
			conclude_with(c, RESIL_STAGE_MOCK, ts, st);
			return RESIL_OK;
		}
	}
	if (m->start != START_NONE) {
		if (RESIL__UNLIKELY(m->start == START_CLUSTER)) {
			cl_start(c, m, *ts);
		} else {
			c->run_on = 1;
			resil__retry_begin(c->retry, &c->run,
			    resil__retry_needs_time(c->retry),
			    resil__retry_needs_time(c->retry) ? tnow(ts) : 0);
		}
	}
	if (!launch(c, ts, st))
		attend(c, ts, st);
	return RESIL_OK;
}

/* A call's state before its first attempt. */
HOT void
minit(callm *c, resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_result *out)
{
	c->magic = CALL_LIVE;
	c->p = p;
	c->g = g;
	c->gref = 0;
	c->gst = (uint8_t)gs;
	c->m = m;
	c->args = args;
	c->out = out;
	c->has_mock = 0;
	c->run_on = 0;
	c->pending = 0;
	c->winner = 0;
	c->hedges = 0;
	c->no_more_hedges = 0;
	c->issued = 0;
	c->attempts = 0;
	c->wait_until = 0;
	c->breaker_state = -1;
	c->real_err = RESIL_OK;
	c->real_rc = 0;
	c->running = 0;
	c->abandoned = 0;
	vnull(&c->value);
	c->phase = P_ATTEMPT;
	c->breaker = m->breaker != NULL ? m->breaker : g->breaker;
	c->retry = m->retry != NULL ? m->retry : g->retry;
	c->timeout = m->timeout;
}

/* The slot of attempt id (running or abandoned), or -1. */
static int
find_slot(const callm *c, uint32_t id)
{
	unsigned used = (unsigned)(c->running | c->abandoned), i;

	if (id == 0)
		return -1;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++)
		if ((used & (1u << i)) && c->slots[i].id == id)
			return (int)i;
	return -1;
}

HOT resil_err
mreport_k(callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts, int cl)
{
	int i;
	uint8_t bit;

	/* The common case first: the one attempt out answers. */
	if (RESIL__LIKELY(c->running == 1 && c->slots[0].id == id))
		i = 0;
	else if ((i = find_slot(c, id)) < 0)
		return RESIL_E_MISUSE;
	bit = (uint8_t)(1u << i);
	if (c->abandoned & bit) {
		/* An answer that no longer matters: accepted and dropped. */
		if (value != NULL) {
			resil_value_free(value);
			vnull(value);
		}
		c->abandoned &= (uint8_t)~bit;
		return RESIL_OK;
	}
	if (c->magic != (cl ? CALL_CLUSTER : CALL_LIVE))
		return RESIL_E_MISUSE;
	complete(c, (unsigned)i, rc, value, 0, ts);
	if (cl)
		cl_done(c, (unsigned)i, c->last_outcome, tnow(ts));
	return RESIL_OK;
}

/* A report to a call without a selector (or one that is over). */
HOT resil_err
mreport(callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts)
{
	return mreport_k(c, id, rc, value, ts, 0);
}

/* A report to a live cluster call: the selector learns it too. */
static resil_err
mreport_cl(callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts)
{
	return mreport_k(c, id, rc, value, ts, 1);
}

/* Either, for the drivers. */
static resil_err
mreport_any(callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts)
{
	return c->magic == CALL_CLUSTER ? mreport_cl(c, id, rc, value, ts)
	                                : mreport(c, id, rc, value, ts);
}

/* The first attempt of a call with no retry run begun (no policy, or its
 * fast path) succeeded: the answer is live, and the policy has only a
 * count to keep. */
HOT void
live_success(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_result *out = c->out;

	if (c->retry != NULL)
		resil__retry_count_first_success(c->retry);
	out->rc = c->last_rc;
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->source = RESIL_SOURCE_LIVE;
	if (c->g->cache != NULL)
		resil_fallback_record(c->g->fb, c->args, &c->value);
	out->err = RESIL_OK;
	out->value = c->value; /* moved */
	conclude_with(c, RESIL_STAGE_CALL, ts, st);
}

HOT void
mstep(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	if (RESIL__LIKELY(c->pending && c->running == 0 &&
	        c->phase == P_ATTEMPT && !c->run_on &&
	        c->last_status == RESIL_OK &&
	        c->last_outcome == RESIL_OUTCOME_SUCCESS &&
	        c->p->hedge_max == 0)) {
		live_success(c, ts, st);
		return;
	}
	if (c->phase == P_WAIT)
		advance(c, ts, waited, st);
	else
		attend(c, ts, st);
}

/* ---- the blocking driver ---- */

HOT resil_err
drive(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	callm c;
	resil_call_next st;
	tsrc ts;
	int rc;

	tls_method = args->method;
	tls_in_call = 1;
	tlazy(&ts, p);
	if (RESIL__LIKELY(m->simple) &&
	    resil__loadptr((void *const *)&g->mock) == NULL) {
		/*
		 * The machine's first step, inline: no mock stage, no stage
		 * that needs the time, and no retry run before attempt 1.
		 * A success ends the call here exactly as live_success()
		 * would; anything else is handed to the machine in the state
		 * its own first step would have left it.
		 */
		resil_breaker *b =
		    m->breaker != NULL ? m->breaker : g->breaker;
		resil_permit permit;
		resil_outcome o;
		resil_value v;
		int bstate = -1;

		resil_result_init(out);
		resil__faa64(&p->stripes[gs].calls, 1);
		if (b != NULL &&
		    resil_breaker_acquire(b, &permit) != RESIL_OK) {
			minit(&c, p, g, gs, m, args, out);
			c.breaker_state = (int)resil_breaker_get_state(b);
			rejected(&c, RESIL_E_OPEN);
			attend(&c, &ts, &st);
			goto loop;
		}
		vnull(&v);
		rc = fn(ctx, args, &v);
		/* The default classifier inline; a user's through
		 * resil_classify(), which also guards its answer. */
		o = p->cls.fn == NULL
		    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
		    : resil_classify(&p->cls, rc, &v);
		if (b != NULL) {
			resil_breaker_record(b, &permit, o);
			bstate = (int)resil_breaker_get_state(b);
		}
		if (RESIL__LIKELY(o == RESIL_OUTCOME_SUCCESS)) {
			resil_retry *r =
			    m->retry != NULL ? m->retry : g->retry;

			if (r != NULL)
				resil__retry_count_first_success(r);
			out->rc = rc;
			out->attempts = 1;
			out->breaker_state = bstate;
			out->source = RESIL_SOURCE_LIVE;
			if (g->cache != NULL)
				resil_fallback_record(g->fb, args, &v);
			out->err = RESIL_OK;
			out->value = v; /* moved */
			tls_method = NULL;
			tls_in_call = 0;
			return RESIL_OK;
		}
		minit(&c, p, g, gs, m, args, out);
		c.issued = 1;
		c.attempts = 1;
		c.breaker_state = bstate;
		c.value = v;
		c.last_rc = rc;
		c.last_status = RESIL_OK;
		c.last_outcome = o;
		if (o == RESIL_OUTCOME_FAILURE) {
			c.real_err = RESIL_E_CALL;
			c.real_rc = rc;
		}
		c.pending = 1;
		mstep(&c, &ts, 0, &st);
	} else {
		mstart(&c, p, g, gs, m, args, out, &ts, &st);
	}
loop:
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			/* The attempt writes straight into the call's value
			 * (the previous attempt's is dropped first). */
			if (c.value.type != RESIL_VALUE_NULL) {
				resil_value_free(&c.value);
				vnull(&c.value);
			}
			tls_deadline = st.deadline;
			rc = fn(ctx, args, &c.value);
			tls_deadline = UINT64_MAX;
			tlazy(&ts, p);
			mreport(&c, st.attempt, rc, &c.value, &ts);
			mstep(&c, &ts, 0, &st);
		} else {
			uint64_t now = resil_clock_now(&p->clock);

			/* One attempt at a time: a wait is a backoff, never
			 * an unbounded one. */
			if (st.until > now)
				resil_clock_sleep(&p->clock, st.until - now);
			tlazy(&ts, p);
			mstep(&c, &ts, 1, &st);
		}
	}
	tls_method = NULL;
	tls_in_call = 0;
	return out->err;
}

/* ---- the blocking driver with an executor (hedging) ---- */

enum { J_RUNNING = 0, J_DONE = 1, J_ABANDONED = 2 };

typedef struct job {
	resil_call_fn fn;
	resil_endpoint_call_fn efn; /* a cluster's attempt, or NULL */
	resil_pick pick;            /* efn: its endpoint (strings copied) */
	void *ctx;
	/* Copies: a losing hedge may run on after the call has returned,
	 * and the pipeline may be gone by then. The method and argument
	 * bytes follow the struct. */
	resil_args args;
	resil_executor ex;
	resil_allocator alloc;
	size_t size;
	uint64_t deadline;
	uint32_t id;
	int rc;
	resil_value value;
	uint32_t state; /* J_*, atomic */
	struct job *next;
} job;

static void
job_free(job *j)
{
	resil_allocator a = j->alloc;

	resil_value_free(&j->value);
	resil__free(&a, j, j->size);
}

static job *
job_new(resil_pipeline *p, resil_call_fn fn, resil_endpoint_call_fn efn,
    void *ctx, const resil_args *args, const resil_call_next *st)
{
	size_t mlen = strlen(args->method) + 1, size, alen = 0, zlen = 0;
	job *j;
	char *buf;

	if (efn != NULL && st->endpoint != NULL) {
		alen = strlen(st->endpoint->address != NULL
		               ? st->endpoint->address
		               : "") +
		    1;
		zlen = st->endpoint->zone != NULL
		    ? strlen(st->endpoint->zone) + 1
		    : 0;
	}
	size = sizeof(*j) + mlen + args->len + alen + zlen;
	if (size < mlen + alen + zlen) /* size_t overflow */
		return NULL;
	j = resil__calloc(&p->alloc, size);
	if (j == NULL)
		return NULL;
	buf = (char *)(j + 1);
	memcpy(buf, args->method, mlen);
	if (args->len > 0)
		memcpy(buf + mlen, args->data, args->len);
	j->fn = fn;
	j->efn = efn;
	if (alen > 0) {
		/* The endpoint's strings, for a fork that outlives its
		 * pick. */
		char *a = buf + mlen + args->len;

		j->pick = *st->endpoint;
		memcpy(a,
		    st->endpoint->address != NULL ? st->endpoint->address : "",
		    alen);
		j->pick.address = a;
		if (zlen > 0) {
			memcpy(a + alen, st->endpoint->zone, zlen);
			j->pick.zone = a + alen;
		}
		j->pick.ep_ = NULL; /* not for reporting */
	}
	j->ctx = ctx;
	j->args.method = buf;
	j->args.data = args->len > 0 ? buf + mlen : NULL;
	j->args.len = args->len;
	j->ex = p->executor;
	j->alloc = p->alloc;
	j->size = size;
	j->deadline = st->deadline;
	j->id = st->attempt;
	j->state = J_RUNNING;
	return j;
}

/* On the executor's thread: the attempt, then hand it back, or free it
 * when the call has finished meanwhile. */
static void
run_job(void *vj)
{
	job *j = vj;
	resil_executor ex = j->ex;
	uint32_t st = J_RUNNING;

	vnull(&j->value);
	tls_in_call = 1;
	tls_deadline = j->deadline;
	j->rc = j->efn != NULL
	    ? j->efn(j->ctx, j->pick.address != NULL ? &j->pick : NULL,
	          &j->args, &j->value)
	    : j->fn(j->ctx, &j->args, &j->value);
	tls_deadline = UINT64_MAX;
	tls_in_call = 0;
	/* ex is copied first: once DONE is published the call may free j. */
	if (__atomic_compare_exchange_n(
	        &j->state, &st, J_DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		ex.wake(ex.ctx);
	else
		job_free(j); /* abandoned: nobody will read the answer */
}

/* The hedging pipeline's blocking loop: attempts run on the executor;
 * the calling thread waits for answers and timers. */
static resil_err
drive_hedged(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_call_fn fn, resil_endpoint_call_fn efn,
    void *ctx, resil_result *out)
{
	const resil_executor *ex = &p->executor;
	job *jobs = NULL, **pp, *j;
	callm c;
	resil_call_next st;
	tsrc ts;
	int rc;

	tls_method = args->method;
	tls_in_call = 1;
	tlazy(&ts, p);
	st.endpoint = NULL;
	mstart(&c, p, g, gs, m, args, out, &ts, &st);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			j = job_new(p, fn, efn, ctx, args, &st);
			if (j != NULL &&
			    ex->submit(run_job, j, ex->ctx) == 0) {
				j->next = jobs;
				jobs = j;
				tlazy(&ts, p);
				st.endpoint = NULL;
				mstep(&c, &ts, 0, &st);
				continue;
			}
			/* No executor thread: this attempt runs here. */
			if (j != NULL)
				job_free(j);
			if (c.value.type != RESIL_VALUE_NULL) {
				resil_value_free(&c.value);
				vnull(&c.value);
			}
			tls_deadline = st.deadline;
			rc = efn != NULL
			    ? efn(ctx, st.endpoint, args, &c.value)
			    : fn(ctx, args, &c.value);
			tls_deadline = UINT64_MAX;
			tlazy(&ts, p);
			mreport_any(&c, st.attempt, rc, &c.value, &ts);
			tlazy(&ts, p);
			st.endpoint = NULL;
			mstep(&c, &ts, 0, &st);
			continue;
		}
		/* WAIT: report the answers that came, in the order of their
		 * ids; else wait for one or for the tick. */
		{
			job *best = NULL;

			for (j = jobs; j != NULL; j = j->next)
				if (__atomic_load_n(&j->state,
				        __ATOMIC_ACQUIRE) == J_DONE &&
				    (best == NULL || j->id < best->id))
					best = j;
			if (best != NULL) {
				for (pp = &jobs; *pp != best;
				     pp = &(*pp)->next)
					;
				*pp = best->next;
				tlazy(&ts, p);
				mreport_any(
				    &c, best->id, best->rc, &best->value, &ts);
				job_free(best);
				tlazy(&ts, p);
				st.endpoint = NULL;
				mstep(&c, &ts, 0, &st);
				continue;
			}
		}
		if (jobs == NULL) {
			/* A backoff: sleep through the clock as always. */
			uint64_t now = resil_clock_now(&p->clock);

			if (st.until > now)
				resil_clock_sleep(&p->clock, st.until - now);
			tlazy(&ts, p);
			st.endpoint = NULL;
			mstep(&c, &ts, 1, &st);
			continue;
		}
		ex->wait(st.until, ex->ctx);
		tlazy(&ts, p);
		st.endpoint = NULL;
		mstep(&c, &ts, 0, &st);
	}
	/* Jobs still out: their answers no longer matter. */
	while (jobs != NULL) {
		uint32_t want = J_RUNNING;

		j = jobs;
		jobs = j->next;
		if (!__atomic_compare_exchange_n(&j->state, &want, J_ABANDONED,
		        0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			/* It answered after all: drop the answer here. */
			mreport_any(&c, j->id, j->rc, &j->value, &ts);
			job_free(j);
		}
	}
	tls_method = NULL;
	tls_in_call = 0;
	return out->err;
}

static resil_err
refuse_selector(resil_pipeline *p, resil_result *out)
{
	resil__msg o;

	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	resil__msg_start(&o, out->message, sizeof(out->message));
	RESIL__MSG_LIT(&o,
	    "a pipeline with a selector gives each attempt its endpoint: "
	    "call it with resil_pipeline_invoke (or the call machine), for ");
	resil__msg_str(&o, p->service);
	return RESIL_E_INVAL;
}

static resil_err
refuse_hedging(resil_pipeline *p, resil_result *out)
{
	resil__msg o;

	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	out->source = RESIL_SOURCE_UNAVAILABLE;
	resil__msg_start(&o, out->message, sizeof(out->message));
	RESIL__MSG_LIT(&o,
	    "hedging runs attempts in parallel: give the pipeline an "
	    "executor, or use the call machine (resil_call_start), for ");
	resil__msg_str(&o, p->service);
	return RESIL_E_INVAL;
}

/* resil_pipeline_call's slow path: hedging or a selector (h NULL: by
 * args->method). */
static resil_err
call_slow(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	settings *g;
	unsigned gs;
	resil_err err;

	if (p->sel != NULL)
		return refuse_selector(p, out);
	if (p->executor.submit == NULL)
		return refuse_hedging(p, out);
	g = conf_hold(p, &gs);
	err = drive_hedged(p, g, gs,
	    h != NULL ? resolve(g, h) : find_method(g, args->method), args, fn,
	    NULL, ctx, out);
	conf_drop(g, gs);
	return err;
}

resil_err
resil_pipeline_call(resil_pipeline *p, const resil_args *args,
    resil_call_fn fn, void *ctx, resil_result *out)
{
	settings *g;
	unsigned gs;
	resil_err err;

	if (RESIL__UNLIKELY(p == NULL || args == NULL ||
	        args->method == NULL || fn == NULL || out == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(p->slow))
		return call_slow(p, NULL, args, fn, ctx, out);
	g = conf_hold(p, &gs);
	err =
	    drive(p, g, gs, find_method(g, args->method), args, fn, ctx, out);
	conf_drop(g, gs);
	return err;
}

resil_err
resil_pipeline_call_method(resil_pipeline *p, const resil_method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	settings *g;
	unsigned gs;
	resil_err err;

	if (RESIL__UNLIKELY(p == NULL || m == NULL || args == NULL ||
	        args->method == NULL || fn == NULL || out == NULL ||
	        check_method(p, m) != RESIL_OK))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(p->slow))
		return call_slow(p, m, args, fn, ctx, out);
	g = conf_hold(p, &gs);
	err = drive(p, g, gs, resolve(g, m), args, fn, ctx, out);
	conf_drop(g, gs);
	return err;
}

/* ---- the cluster's blocking driver ---- */

/* One attempt after another on the calling thread, each on the endpoint
 * the machine chose. */
static resil_err
drive_ep(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	callm c;
	resil_call_next st;
	tsrc ts;
	int rc;

	tls_method = args->method;
	tls_in_call = 1;
	tlazy(&ts, p);
	st.endpoint = NULL;
	mstart(&c, p, g, gs, m, args, out, &ts, &st);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			if (c.value.type != RESIL_VALUE_NULL) {
				resil_value_free(&c.value);
				vnull(&c.value);
			}
			tls_deadline = st.deadline;
			rc = fn(ctx, st.endpoint, args, &c.value);
			tls_deadline = UINT64_MAX;
			tlazy(&ts, p);
			mreport_cl(&c, st.attempt, rc, &c.value, &ts);
			tlazy(&ts, p);
			st.endpoint = NULL;
			mstep(&c, &ts, 0, &st);
		} else {
			uint64_t now = resil_clock_now(&p->clock);

			if (st.until > now)
				resil_clock_sleep(&p->clock, st.until - now);
			tlazy(&ts, p);
			st.endpoint = NULL;
			mstep(&c, &ts, 1, &st);
		}
	}
	tls_method = NULL;
	tls_in_call = 0;
	return out->err;
}

/* resil_endpoint_call_fn over a pipeline without a selector. */
typedef struct ep_adapter {
	resil_endpoint_call_fn fn;
	void *ctx;
} ep_adapter;

static int
ep_adapt(void *ctx, const resil_args *args, resil_value *out)
{
	const ep_adapter *a = ctx;

	return a->fn(a->ctx, NULL, args, out);
}

resil_err
resil_pipeline_invoke(resil_pipeline *p, const resil_method *h,
    const resil_args *args, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	const method *pm;
	settings *g;
	unsigned gs;
	resil_err err;

	if (RESIL__UNLIKELY(p == NULL || args == NULL ||
	        args->method == NULL || fn == NULL || out == NULL ||
	        (h != NULL && check_method(p, h) != RESIL_OK)))
		return RESIL_E_INVAL;
	if (p->sel == NULL && p->hedge_max != 0 && p->executor.submit == NULL)
		return refuse_hedging(p, out);
	g = conf_hold(p, &gs);
	pm = h != NULL ? resolve(g, h) : find_method(g, args->method);
	if (p->sel == NULL) {
		ep_adapter a;

		a.fn = fn;
		a.ctx = ctx;
		if (p->hedge_max != 0)
			err = drive_hedged(
			    p, g, gs, pm, args, NULL, fn, ctx, out);
		else
			err = drive(p, g, gs, pm, args, ep_adapt, &a, out);
	} else if (p->ccfg.strategy == RESIL_CLUSTER_FORKING)
		err = drive_hedged(p, g, gs, pm, args, NULL, fn, ctx, out);
	else
		err = drive_ep(p, g, gs, pm, args, fn, ctx, out);
	conf_drop(g, gs);
	return err;
}

/* ---- failback ---- */

typedef struct fb_adapter {
	resil_endpoint_call_fn fn;
	void *ctx;
} fb_adapter;

static int
fb_adapt(void *ctx, const resil_pick *endpoint, const resil_request *req,
    const resil_args *args, resil_value *out)
{
	const fb_adapter *a = ctx;
	resil_args none;

	(void)req;
	if (args == NULL) {
		none.method = req->method != NULL ? req->method : "";
		none.data = NULL;
		none.len = 0;
		args = &none;
	}
	return a->fn(a->ctx, endpoint, args, out);
}

resil_err
resil_pipeline_failback_poll(resil_pipeline *p, uint64_t now,
    resil_endpoint_call_fn fn, void *ctx, size_t *ran)
{
	fb_adapter a;

	if (p == NULL || fn == NULL)
		return RESIL_E_INVAL;
	if (p->fbq == NULL) {
		if (ran != NULL)
			*ran = 0;
		return RESIL_OK;
	}
	a.fn = fn;
	a.ctx = ctx;
	return resil__cluster_poll(p->fbq, now, fb_adapt, &a, ran);
}

size_t
resil_pipeline_failback_pending(resil_pipeline *p)
{
	return p == NULL ? 0 : resil_cluster_failback_pending(p->fbq);
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

/* ---- the machine's public face ---- */

/* A call of the machine's API that is over drops its settings (a late
 * report after DONE touches none of them). */
HOT void
call_settle(callm *c)
{
	if (RESIL__UNLIKELY(c->gref) &&
	    (c->magic == CALL_DONE || c->magic == CALL_CANCELLED)) {
		c->gref = 0;
		conf_drop(c->g, c->gst);
	}
}

static tsrc
tgiven(uint64_t now)
{
	tsrc t;

	t.now = now;
	t.clk = NULL;
	return t;
}

resil_err
resil_call_start(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_args *args, resil_result *out, uint64_t now,
    resil_call_next *step)
{
	callm *c = (callm *)(void *)call;
	tsrc ts = tgiven(now);
	settings *g;
	unsigned gs;

	if (RESIL__UNLIKELY(call == NULL || p == NULL || args == NULL ||
	        args->method == NULL || out == NULL || step == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(m != NULL && check_method(p, m) != RESIL_OK))
		return RESIL_E_INVAL;
	g = conf_hold(p, &gs);
	tls_method = args->method;
	step->endpoint = NULL;
	mstart(c, p, g, gs,
	    m != NULL ? resolve(g, m) : find_method(g, args->method), args,
	    out, &ts, step);
	c->gref = 1;
	c->gst = (uint8_t)gs;
	call_settle(c);
	tls_method = NULL;
	return RESIL_OK;
}

resil_err
resil_call_step(resil_call *call, uint64_t now, resil_call_next *step)
{
	callm *c = (callm *)(void *)call;
	tsrc ts = tgiven(now);

	if (RESIL__UNLIKELY(call == NULL || step == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(c->magic != CALL_LIVE) && c->magic != CALL_CLUSTER)
		return RESIL_E_MISUSE;
	tls_method = c->args->method;
	step->endpoint = NULL;
	mstep(c, &ts, 0, step);
	call_settle(c);
	tls_method = NULL;
	return RESIL_OK;
}

resil_err
resil_call_report(resil_call *call, uint32_t attempt, int rc,
    resil_value *value, uint64_t now)
{
	callm *c = (callm *)(void *)call;
	tsrc ts = tgiven(now);
	resil_err err;

	if (RESIL__UNLIKELY(call == NULL))
		return RESIL_E_INVAL;
	if (RESIL__LIKELY(c->magic == CALL_LIVE)) {
		tls_method = c->args->method;
		err = mreport(c, attempt, rc, value, &ts);
	} else if (c->magic == CALL_CLUSTER) {
		tls_method = c->args->method;
		err = mreport_cl(c, attempt, rc, value, &ts);
	} else if (c->magic == CALL_DONE || c->magic == CALL_CANCELLED) {
		/* After DONE the args may be gone: only a live call names
		 * them. */
		tls_method = NULL;
		err = mreport(c, attempt, rc, value, &ts);
	} else {
		return RESIL_E_MISUSE;
	}
	tls_method = NULL;
	return err;
}

resil_err
resil_call_cancel(resil_call *call, uint64_t now)
{
	callm *c = (callm *)(void *)call;
	resil__msg o;

	(void)now;
	if (call == NULL)
		return RESIL_E_INVAL;
	if (c->magic != CALL_LIVE && c->magic != CALL_CLUSTER)
		return RESIL_E_MISUSE;
	abandon_running(c);
	resil_value_free(&c->value);
	vnull(&c->value);
	resil_result_init(c->out);
	c->out->attempts = c->attempts;
	c->out->breaker_state = c->breaker_state;
	resil__msg_start(&o, c->out->message, sizeof(c->out->message));
	RESIL__MSG_LIT(&o, "the call was cancelled");
	resil__faa64(&my_stripe(c->p)->unavailable, 1);
	c->phase = P_DONE;
	c->magic = CALL_CANCELLED;
	call_settle(c);
	return RESIL_OK;
}

uint32_t
resil_call_outstanding(const resil_call *call)
{
	const callm *c = (const callm *)(const void *)call;
	unsigned i, n = 0;

	if (call == NULL ||
	    (c->magic != CALL_LIVE && c->magic != CALL_DONE &&
	        c->magic != CALL_CANCELLED && c->magic != CALL_CLUSTER))
		return 0;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++)
		n += ((c->running | c->abandoned) >> i) & 1u;
	return n;
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

/*
 * resil pipeline: mock stage -> fallback chain -> retry -> breaker ->
 * rate limiter -> bulkhead -> the user's function.
 *
 * The success path of a call reads the method table (immutable after
 * creation), the current mock (one atomic pointer, only when a mock is
 * configured), runs retry and breaker, and adds one to a per-thread
 * striped counter. Runtime mock changes build a whole new resil_mock and
 * publish it with one pointer store; the old ones stay allocated until
 * the pipeline is freed, so a call that started with one can finish with
 * it.
 */
#include <resil/pipeline.h>

#include <stdio.h>
#include <string.h>

#include "atomic.h"
#include "internal.h"

#include <uthash.h>

#define NSTRIPES 8u

typedef struct method {
	char *name;
	resil_type type;
	uint64_t timeout;
	char *mock_spec;   /* method-level spec (owned), or NULL */
	int mock_set;      /* mock_spec applies (NULL + set: none) */
	resil_retry *retry;     /* own policy, or NULL: the service's */
	resil_breaker *breaker; /* own breaker, or NULL: the service's */
	int declared;           /* from the configuration */
	int retry_fast; /* its policy allows the first-attempt fast path */
	UT_hash_handle hh;
} method;

typedef struct retired {
	resil_mock *mock;
	struct retired *next;
} retired;

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

struct resil_pipeline {
	char *service;
	resil_allocator alloc;
	resil_clock clock;
	resil_classifier cls;
	resil_pipeline_listener_fn listener;
	void *listener_ctx;
	const resil_mock_registry *registry;

	resil_breaker *breaker;
	resil_retry *retry;
	resil_cache *cache;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
	resil_fallback *fb;
	size_t handlers; /* user handlers added */
	uint64_t timeout;

	method *methods; /* uthash by name; immutable after new */
	method dflt;     /* the service-level settings */

	/* Mock state: the current resil_mock (atomic pointer; NULL when no
	 * spec is configured at all), the specs it was built from, and the
	 * ones it replaced. Writers serialise on mock_lock. */
	resil_mock *mock;
	char *service_spec;
	retired *retired;
	resil__spinlock mock_lock;

	void *stripes_mem;
	stripe *stripes;
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
	if (re->type == RESIL_RETRY_EVENT_RETRY)
		snprintf(text, sizeof(text),
		    "retry after attempt %u, waiting %llu", re->attempt,
		    (unsigned long long)re->wait);
	else
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
emit_result(resil_pipeline *p, resil_stage stage, const resil_result *r)
{
	resil_pipeline_event ev;
	char text[RESIL_RESULT_MSG_MAX + 64];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text), "%s answered: %s (%s)",
	    resil_stage_name(stage), resil_source_name(r->source),
	    resil_err_name(r->err));
	ev.stage = stage;
	ev.time = resil_clock_now(&p->clock);
	ev.result = r;
	ev.text = text;
	emit(p, &ev);
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
build_mock(resil_pipeline *p, const char *service_spec, const char *method_name,
    const char *method_spec, int method_unset, resil_mock **out,
    resil_diag *diag)
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
	HASH_ITER(hh, p->methods, it, tmp)
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

static void
free_method(resil_pipeline *p, method *m)
{
	resil__strfree(&p->alloc, m->name);
	resil__strfree(&p->alloc, m->mock_spec);
	resil_retry_free(m->retry);
	resil_breaker_free(m->breaker);
}

void
resil_pipeline_free(resil_pipeline *p)
{
	method *it, *tmp;
	retired *r, *next;
	const resil_allocator *resil__a;

	if (p == NULL)
		return;
	resil__a = &p->alloc;
	HASH_ITER(hh, p->methods, it, tmp)
	{
		HASH_DEL(p->methods, it);
		free_method(p, it);
		resil__free(resil__a, it, sizeof(*it));
	}
	for (r = p->retired; r != NULL; r = next) {
		next = r->next;
		resil_mock_free(r->mock);
		resil__free(resil__a, r, sizeof(*r));
	}
	resil_mock_free(p->mock);
	resil__strfree(resil__a, p->service_spec);
	resil_fallback_free(p->fb);
	resil_cache_free(p->cache);
	resil_breaker_free(p->breaker);
	resil_retry_free(p->retry);
	resil_ratelimit_free(p->rl);
	resil_bulkhead_free(p->bh);
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

static resil_err
validate(const resil_pipeline_config *cfg, resil_diag *diag)
{
	size_t i, j;

	if (cfg == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "pipeline: config is NULL");
	if (cfg->size != sizeof(resil_pipeline_config))
		return resil__check_size(diag, "pipeline",
		    "resil_pipeline_config", cfg->size,
		    sizeof(resil_pipeline_config));
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
		for (j = 0; j < i; j++)
			if (strcmp(cfg->methods[j].name, n) == 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s: the method is declared twice", n);
	}
	if (cfg->clock != NULL && cfg->clock->now == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline.clock: the clock has no now function");
	return RESIL_OK;
}

resil_err
resil_pipeline_new(resil_pipeline **out, const resil_pipeline_config *cfg,
    resil_diag *diag)
{
	const resil_allocator *resil__a;
	resil_pipeline *p;
	resil_err err;
	uintptr_t sp;
	size_t i;
	int any_mock;
	method *it, *tmp;

	if (out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "pipeline: out is NULL");
	err = validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	resil__a = resil__allocator(cfg->alloc);
	p = resil__calloc(resil__a, sizeof(*p));
	if (p == NULL)
		return resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
	p->alloc = *resil__a;
	resil__a = &p->alloc;
	p->clock = cfg->clock != NULL ? *cfg->clock : *resil_clock_system();
	p->cls = cfg->classifier;
	p->listener = cfg->listener;
	p->listener_ctx = cfg->listener_ctx;
	p->registry = cfg->registry;
	p->timeout = cfg->timeout_ns;
	resil__spin_init(&p->mock_lock);
	p->dflt.type = RESIL_TYPE_ANY;
	p->dflt.timeout = cfg->timeout_ns;
	p->service = resil__strdup(resil__a, cfg->service);
	p->stripes_mem = resil__calloc(
	    resil__a, sizeof(stripe) * NSTRIPES + RESIL__CACHELINE);
	if (p->service == NULL || p->stripes_mem == NULL)
		goto nomem;
	sp = ((uintptr_t)p->stripes_mem + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	p->stripes = (stripe *)sp;

	if (cfg->breaker_enabled) {
		err = new_breaker(p, cfg, &p->breaker, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	if (cfg->retry_enabled) {
		err = new_retry(p, cfg, 0, &p->retry, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	if (cfg->ratelimit_enabled) {
		resil_ratelimit_config rc = cfg->ratelimit;

		rc.clock = &p->clock;
		rc.alloc = resil__a;
		rc.listener = on_ratelimit;
		rc.listener_ctx = p;
		err = resil_ratelimit_new(&p->rl, &rc, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	if (cfg->bulkhead_enabled) {
		resil_bulkhead_config bc = cfg->bulkhead;

		bc.clock = &p->clock;
		bc.alloc = resil__a;
		bc.listener = on_bulkhead;
		bc.listener_ctx = p;
		err = resil_bulkhead_new(&p->bh, &bc, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	if (cfg->cache_enabled) {
		resil_cache_config cc = cfg->cache;

		cc.clock = &p->clock;
		cc.alloc = resil__a;
		err = resil_cache_new(&p->cache, &cc, diag);
		if (err != RESIL_OK)
			goto fail;
	}

	any_mock = !spec_is_none(cfg->mock);
	for (i = 0; i < cfg->nmethods; i++) {
		const resil_method_config *mc = &cfg->methods[i];
		method *m = resil__calloc(resil__a, sizeof(*m));

		if (m == NULL)
			goto nomem;
		m->name = resil__strdup(resil__a, mc->name);
		m->type = mc->type;
		m->timeout = mc->timeout_ns ? mc->timeout_ns : cfg->timeout_ns;
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
		 * pipeline frees the method. uthash cannot fail to add here:
		 * HASH_NONFATAL_OOM leaves the table as it was. */
		HASH_ADD_KEYPTR(hh, p->methods, m->name, strlen(m->name), m);
		if (HASH_COUNT(p->methods) != i + 1) {
			free_method(p, m);
			resil__free(resil__a, m, sizeof(*m));
			goto nomem;
		}
		if (mc->mock != NULL && m->mock_spec == NULL)
			goto nomem;
		if (mc->max_attempts != 0) {
			err = new_retry(p, cfg, mc->max_attempts, &m->retry, diag);
			if (err != RESIL_OK) {
				prefix_diag(diag, err, mc->name);
				goto fail;
			}
		}
		if (cfg->breaker_enabled && cfg->breaker_per_method) {
			err = new_breaker(p, cfg, &m->breaker, diag);
			if (err != RESIL_OK)
				goto fail;
		}
	}
	if (cfg->mock != NULL) {
		p->service_spec = resil__strdup(resil__a, cfg->mock);
		if (p->service_spec == NULL)
			goto nomem;
	}
	if (any_mock || cfg->registry != NULL) {
		err = build_mock(p, p->service_spec, NULL, NULL, 0, &p->mock, diag);
		if (err != RESIL_OK)
			goto fail;
	}

	/* The chain: cache, then the mock, then user handlers. */
	err = resil_fallback_new(&p->fb, NULL, diag);
	if (err != RESIL_OK)
		goto fail;
	if (p->cache != NULL) {
		err = resil_fallback_add_cache(p->fb, p->cache);
		if (err != RESIL_OK)
			goto fail;
	}
	err = resil_fallback_add_handler(p->fb, mock_handler, p);
	if (err != RESIL_OK)
		goto fail;
	/* Decided once: whether a method's policy allows the fast path. */
	p->dflt.retry_fast = p->retry != NULL && resil__retry_fast_ok(p->retry);
	HASH_ITER(hh, p->methods, it, tmp)
	{
		resil_retry *r = it->retry != NULL ? it->retry : p->retry;

		it->retry_fast = r != NULL && resil__retry_fast_ok(r);
	}
	*out = p;
	return RESIL_OK;
nomem:
	err = resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
fail:
	resil_pipeline_free(p);
	return err;
}

resil_err
resil_pipeline_add_handler(resil_pipeline *p, resil_fallback_fn fn, void *ctx)
{
	resil_err err;

	if (p == NULL || fn == NULL)
		return RESIL_E_INVAL;
	err = resil_fallback_add_handler(p->fb, fn, ctx);
	if (err == RESIL_OK)
		p->handlers++;
	return err;
}

const char *
resil_pipeline_service(const resil_pipeline *p)
{
	return p == NULL ? NULL : p->service;
}

static const method *
find_method(const resil_pipeline *p, const char *name)
{
	method *m = NULL;

	if (p->methods != NULL)
		HASH_FIND_STR(p->methods, name, m);
	return m != NULL ? m : &p->dflt;
}

resil_breaker *
resil_pipeline_breaker(resil_pipeline *p, const char *name)
{
	const method *m;

	if (p == NULL)
		return NULL;
	m = name != NULL ? find_method(p, name) : &p->dflt;
	return m->breaker != NULL ? m->breaker : p->breaker;
}

resil_retry *
resil_pipeline_retry(resil_pipeline *p, const char *name)
{
	const method *m;

	if (p == NULL)
		return NULL;
	m = name != NULL ? find_method(p, name) : &p->dflt;
	return m->retry != NULL ? m->retry : p->retry;
}

resil_cache *
resil_pipeline_cache(resil_pipeline *p)
{
	return p == NULL ? NULL : p->cache;
}

resil_ratelimit *
resil_pipeline_ratelimit(resil_pipeline *p)
{
	return p == NULL ? NULL : p->rl;
}

resil_bulkhead *
resil_pipeline_bulkhead(resil_pipeline *p)
{
	return p == NULL ? NULL : p->bh;
}

size_t
resil_pipeline_method_count(const resil_pipeline *p)
{
	return p == NULL ? 0 : HASH_COUNT(p->methods);
}

const char *
resil_pipeline_method_name(const resil_pipeline *p, size_t i)
{
	const method *m;

	if (p == NULL)
		return NULL;
	for (m = p->methods; m != NULL; m = m->hh.next, i--)
		if (i == 0)
			return m->name;
	return NULL;
}

resil_err
resil_pipeline_set_mock(resil_pipeline *p, const char *name,
    const char *spec, resil_diag *diag)
{
	const resil_allocator *resil__a;
	resil_mock *m = NULL, *old;
	retired *r;
	method *meth = NULL;
	char *copy = NULL;
	resil_err err;

	if (p == NULL)
		return RESIL_E_INVAL;
	resil__a = &p->alloc;
	if (name != NULL) {
		HASH_FIND_STR(p->methods, name, meth);
		if (meth == NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.mock: %s is not a method declared in the "
			    "configuration of %s",
			    name, name, p->service);
	}
	if (spec != NULL && (copy = resil__strdup(resil__a, spec)) == NULL)
		return resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
	r = resil__alloc(resil__a, sizeof(*r));
	if (r == NULL) {
		resil__strfree(resil__a, copy);
		return resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
	}
	resil__spin_lock(&p->mock_lock);
	if (name == NULL)
		err = build_mock(p, copy, NULL, NULL, 0, &m, diag);
	else
		err = build_mock(p, p->service_spec, name, copy, spec == NULL,
		    &m, diag);
	if (err != RESIL_OK) {
		resil__spin_unlock(&p->mock_lock);
		resil__strfree(resil__a, copy);
		resil__free(resil__a, r, sizeof(*r));
		return err;
	}
	if (name == NULL) {
		resil__strfree(resil__a, p->service_spec);
		p->service_spec = copy;
	} else {
		/* The method table is read without locks by running calls,
		 * but only its mock_spec fields change here, and those are
		 * read by writers alone (under mock_lock). */
		resil__strfree(resil__a, meth->mock_spec);
		meth->mock_spec = copy;
		meth->mock_set = spec != NULL;
	}
	old = resil__loadptr((void *const *)&p->mock);
	resil__storeptr((void **)&p->mock, m);
	r->mock = old;
	r->next = p->retired;
	p->retired = r;
	resil__spin_unlock(&p->mock_lock);
	return RESIL_OK;
}

/* ---- the call ---- */

typedef struct callstate {
	resil_pipeline *p;
	const method *m;
	resil_breaker *breaker;
	const resil_args *args;
	resil_call_fn fn;
	void *ctx;
	resil_value value;
	uint64_t timeout;
	int breaker_state;
	uint32_t attempts;
	resil_outcome outcome; /* of the last attempt, as the breaker saw it */
	/* The fast path ran attempt 1 itself and failed: the retry policy
	 * is then handed that attempt's answer instead of a second call. */
	int replay;
	int replay_rc;
	resil_err replay_status;
} callstate;

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

/* The earlier of t0 + timeout and start + time_left, saturating. */
static uint64_t
sat_deadline(uint64_t t0, uint64_t timeout, uint64_t time_left, uint64_t start)
{
	uint64_t a = t0 > UINT64_MAX - timeout ? UINT64_MAX : t0 + timeout;
	uint64_t b = time_left == UINT64_MAX || start > UINT64_MAX - time_left
	    ? UINT64_MAX
	    : start + time_left;

	return a < b ? a : b;
}

static int
attempt(void *vctx, resil_retry_attempt *at, void *out)
{
	callstate *cs = vctx;
	resil_pipeline *p = cs->p;
	resil_permit permit;
	uint64_t t0 = 0, dur = 0, retry_after;
	resil_outcome outcome;
	int rc, timed = cs->timeout != 0;

	(void)out;
	if (cs->breaker != NULL) {
		if (resil_breaker_acquire(cs->breaker, &permit) != RESIL_OK) {
			cs->breaker_state =
			    (int)resil_breaker_get_state(cs->breaker);
			cs->outcome = RESIL_OUTCOME_FAILURE;
			at->status = RESIL_E_OPEN;
			return 0;
		}
	}
	if (p->rl != NULL &&
	    resil_ratelimit_try_acquire(p->rl, 1, &retry_after) != RESIL_OK) {
		if (cs->breaker != NULL) {
			resil_breaker_release(cs->breaker, &permit);
			cs->breaker_state =
			    (int)resil_breaker_get_state(cs->breaker);
		}
		cs->outcome = RESIL_OUTCOME_FAILURE;
		at->status = RESIL_E_LIMITED;
		return 0;
	}
	if (p->bh != NULL && resil_bulkhead_try_acquire(p->bh) != RESIL_OK) {
		if (cs->breaker != NULL) {
			resil_breaker_release(cs->breaker, &permit);
			cs->breaker_state =
			    (int)resil_breaker_get_state(cs->breaker);
		}
		cs->outcome = RESIL_OUTCOME_FAILURE;
		at->status = RESIL_E_LIMITED;
		return 0;
	}

	if (timed) {
		t0 = resil_clock_now(&p->clock);
		tls_deadline = sat_deadline(t0, cs->timeout, at->time_left, at->start);
	} else {
		tls_deadline = at->time_left == UINT64_MAX
		    ? UINT64_MAX
		    : at->start + at->time_left;
	}
	if (cs->value.type != RESIL_VALUE_NULL) {
		/* A retry: the previous attempt's value is dropped. */
		resil_value_free(&cs->value);
		resil_value_init(&cs->value);
	}
	rc = cs->fn(cs->ctx, cs->args, &cs->value);
	cs->attempts++;
	if (timed) {
		uint64_t t1 = resil_clock_now(&p->clock);
		stripe *s = my_stripe(p);

		dur = t1 > t0 ? t1 - t0 : 0;
		resil__faa64(&s->latency[latency_bucket(dur)], 1);
		resil__faa64(&s->latency_count, 1);
	}
	outcome = resil_classify(&p->cls, rc, &cs->value);
	if (timed && dur > cs->timeout) {
		/* Too late: the answer is dropped and the attempt failed. */
		resil_value_free(&cs->value);
		resil_value_init(&cs->value);
		outcome = RESIL_OUTCOME_FAILURE;
		at->status = RESIL_E_TIMEOUT;
		resil__faa64(&my_stripe(p)->timeouts, 1);
	}
	if (cs->breaker != NULL) {
		if (timed)
			resil_breaker_record_duration(
			    cs->breaker, &permit, outcome, dur);
		else
			resil_breaker_record(cs->breaker, &permit, outcome);
		cs->breaker_state = (int)resil_breaker_get_state(cs->breaker);
	}
	if (p->bh != NULL)
		resil_bulkhead_complete(p->bh, outcome, dur);
	cs->outcome = outcome;
	return rc;
}

/* Attempt 1 run by the pipeline itself (no retry policy, or its fast
 * path), reported as resil_retry_call would. */
static resil_err
first_attempt(callstate *cs, resil_retry_result *res)
{
	resil_retry_attempt at;

	at.number = 1;
	at.start = 0;
	at.time_left = UINT64_MAX;
	at.last_wait = 0;
	at.last_rc = 0;
	at.status = RESIL_OK;
	res->rc = attempt(cs, &at, &cs->value);
	res->status = at.status;
	res->outcome = cs->outcome;
	res->attempts = 1;
	return at.status;
}

/* resil_retry_call's attempt after the fast path: attempt 1 is replayed
 * from what the fast path saw; later attempts run. */
static int
attempt_or_replay(void *vctx, resil_retry_attempt *at, void *out)
{
	callstate *cs = vctx;

	if (cs->replay && at->number == 1) {
		cs->replay = 0;
		at->status = cs->replay_status;
		return cs->replay_rc;
	}
	return attempt(vctx, at, out);
}

/* The chain's mock handler: whatever mock is current when it runs. */
static resil_verdict
mock_handler(void *ctx, const resil_args *args, const resil_failure *failure,
    resil_result *out)
{
	resil_pipeline *p = ctx;
	resil_mock *m = resil__loadptr((void *const *)&p->mock);

	if (m == NULL)
		return RESIL_FALLBACK_PASS;
	if (resil_mock_invoke(m, args, failure, out) == RESIL_E_NOTFOUND)
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

static resil_err
finish(resil_pipeline *p, resil_stage stage, resil_result *out)
{
	if (RESIL__UNLIKELY(out->source != RESIL_SOURCE_LIVE ||
		out->err != RESIL_OK))
		count_source(p, out);
	if (p->listener != NULL && stage != RESIL_STAGE_CALL)
		emit_result(p, stage, out);
	tls_method = NULL;
	tls_in_call = 0;
	return out->err;
}

resil_err
resil_pipeline_call(resil_pipeline *p, const resil_args *args,
    resil_call_fn fn, void *ctx, resil_result *out)
{
	resil_retry_result res;
	resil_failure failure;
	resil_retry *retry;
	resil_mock *mock;
	callstate cs;
	resil_err rr;
	int has_mock;

	if (RESIL__UNLIKELY(p == NULL || args == NULL || args->method == NULL ||
		fn == NULL || out == NULL))
		return RESIL_E_INVAL;
	resil_result_init(out);
	resil__faa64(&my_stripe(p)->calls, 1);
	cs.m = find_method(p, args->method);
	tls_method = args->method;
	tls_in_call = 1;

	/* The mock stage: force: answers and nothing below runs. */
	mock = resil__loadptr((void *const *)&p->mock);
	has_mock = 0;
	if (mock != NULL) {
		const resil_mock_spec *spec;

		if (resil_mock_lookup(mock, args->method, &spec) == RESIL_OK &&
		    spec->action != RESIL_MOCK_NONE)
			has_mock = 1;
		if (has_mock && spec->mode == RESIL_MOCK_FORCE) {
			if (resil_mock_invoke(mock, args, NULL, out) ==
			    RESIL_E_NOMEM) {
				resil_result_init(out);
				out->err = RESIL_E_NOMEM;
			}
			return finish(p, RESIL_STAGE_MOCK, out);
		}
	}

	cs.p = p;
	cs.breaker = cs.m->breaker != NULL ? cs.m->breaker : p->breaker;
	cs.args = args;
	cs.fn = fn;
	cs.ctx = ctx;
	cs.timeout = cs.m->timeout;
	cs.breaker_state = -1;
	cs.attempts = 0;
	resil_value_init(&cs.value);

	cs.replay = 0;
	retry = cs.m->retry != NULL ? cs.m->retry : p->retry;
	if (retry == NULL) {
		rr = first_attempt(&cs, &res);
	} else if (cs.m->retry_fast) {
		/* The fast path: most calls succeed at once, and then the
		 * policy has nothing to decide but a count. */
		rr = first_attempt(&cs, &res);
		if (rr == RESIL_OK && res.outcome == RESIL_OUTCOME_SUCCESS) {
			resil__retry_count_first_success(retry);
		} else {
			cs.replay = 1;
			cs.replay_rc = res.rc;
			cs.replay_status = res.status;
			rr = resil_retry_call(
			    retry, attempt_or_replay, &cs, &cs.value, &res);
		}
	} else {
		rr = resil_retry_call(retry, attempt, &cs, &cs.value, &res);
	}
	tls_deadline = UINT64_MAX;

	if (rr == RESIL_OK && res.status == RESIL_OK &&
	    res.outcome != RESIL_OUTCOME_FAILURE) {
		out->rc = res.rc;
		out->attempts = cs.attempts;
		out->breaker_state = cs.breaker_state;
		out->source = RESIL_SOURCE_LIVE;
		if (res.outcome == RESIL_OUTCOME_BUSINESS) {
			/* The callee's own answer: untouched, never degraded. */
			resil_value_free(&cs.value);
			out->err = RESIL_E_BUSINESS;
			return finish(p, RESIL_STAGE_CALL, out);
		}
		if (res.outcome == RESIL_OUTCOME_SUCCESS && p->cache != NULL)
			resil_fallback_record(p->fb, args, &cs.value);
		/* IGNORED passes as it is: RESIL_OK with rc 0, else E_CALL. */
		out->err = res.outcome == RESIL_OUTCOME_SUCCESS || res.rc == 0
		    ? RESIL_OK
		    : RESIL_E_CALL;
		out->value = cs.value; /* moved */
		return finish(p, RESIL_STAGE_CALL, out);
	}

	/* A non-business failure: the fallback chain answers or passes. */
	resil_value_free(&cs.value);
	failure.err = res.status != RESIL_OK ? res.status
	    : rr == RESIL_E_RETRIES_EXHAUSTED ? RESIL_E_RETRIES_EXHAUSTED
					       : RESIL_E_CALL;
	failure.rc = res.rc;
	failure.attempts = cs.attempts;
	/* No cache, no mock for this method and no handler: no fallback is
	 * configured, so the original error propagates. */
	resil_fallback_recover(p->cache != NULL || has_mock || p->handlers > 0
		? p->fb
		: NULL,
	    args, &failure, out);
	out->attempts = cs.attempts;
	out->breaker_state = cs.breaker_state;
	return finish(p, RESIL_STAGE_FALLBACK, out);
}

resil_err
resil_pipeline_get_metrics(const resil_pipeline *p, resil_pipeline_metrics *out)
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

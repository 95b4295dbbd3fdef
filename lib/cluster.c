/*
 * resil cluster: failover, failfast, failsafe, failback and broadcast over
 * a selector, with Dubbo's messages (include/resil/cluster.h).
 */
#include <resil/cluster.h>

#include <stdio.h>
#include <string.h>

#include "atomic.h"
#include "call_internal.h"
#include "internal.h"
#include "router_internal.h"

#define MAX_TRIED 64u /* endpoints remembered for exclusion per call */

/* A failed call kept for later (failback). Its request is a copy. */
typedef struct task {
	struct task *next;
	uint64_t due;
	uint32_t retries; /* retries made */
	uint64_t last_id; /* the endpoint tried last, to avoid it */
	int has_last;
	resil_request req;
	char *method, *tag;
	char **args;
	size_t nargs;
	resil_param *params;
	size_t nparams;
	resil_args cargs; /* the call's arguments (pipeline), or method NULL */
	void *data;
	size_t len;
} task;

struct resil_cluster {
	resil_cluster_config cfg;
	resil_allocator alloc;
	resil_clock clock;
	resil_selector *sel;
	char *service;
	resil__spinlock qlock;
	task *head, *tail; /* failback queue, in order of arrival */
	size_t queued;
	uint64_t dropped; /* failback: failures a full queue dropped */
};

static const char *const strategy_names[] = { "failover", "failfast",
	"failsafe", "failback", "broadcast", "forking", "zone-aware" };

static const char *const event_names[] = { "swallowed", "queued", "queue_full",
	"retried", "gave_up", "cross_zone", "no_provider", "hedge_started",
	"hedge_won", "hedge_dropped" };

const char *
resil_cluster_event_name(resil_cluster_event_type t)
{
	if ((unsigned)t < sizeof(event_names) / sizeof(event_names[0]))
		return event_names[t];
	return "unknown";
}

const char *
resil_cluster_strategy_name(resil_cluster_strategy s)
{
	if ((unsigned)s < sizeof(strategy_names) / sizeof(strategy_names[0]))
		return strategy_names[s];
	return "unknown";
}

resil_err
resil_cluster_strategy_parse(const char *name, resil_cluster_strategy *out)
{
	unsigned i;

	if (name == NULL || out == NULL)
		return RESIL_E_INVAL;
	for (i = 0; i < sizeof(strategy_names) / sizeof(strategy_names[0]);
	     i++)
		if (strcmp(name, strategy_names[i]) == 0) {
			*out = (resil_cluster_strategy)i;
			return RESIL_OK;
		}
	return RESIL_E_INVAL;
}

resil_err
resil_cluster_config_validate(const resil_cluster_config *c, resil_diag *diag)
{
	if (c == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "cluster: config is NULL");
	if (c->size != sizeof(resil_cluster_config))
		return resil__check_size(diag, "cluster",
		    "resil_cluster_config", c->size,
		    sizeof(resil_cluster_config));
	if ((unsigned)c->strategy > (unsigned)RESIL_CLUSTER_ZONE_AWARE)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster: strategy %d is not one of failover, failfast, "
		    "failsafe, failback, broadcast, forking, zone-aware",
		    (int)c->strategy);
	if (c->retries < 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.retries: %d must be >= 0", (int)c->retries);
	if (c->failback_queue < 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.failback_queue: %d must be >= 1",
		    (int)c->failback_queue);
	if (c->failback_retries < 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.failback_retries: %d must be >= 0",
		    (int)c->failback_retries);
	if (c->failback_period_ns == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.failback_period_ns: 0 must be >= 1");
	if (c->broadcast_fail_percent < 0 || c->broadcast_fail_percent > 100)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.broadcast_fail_percent: %d is out of range "
		    "0..100",
		    (int)c->broadcast_fail_percent);
	if (c->forks < 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.forks: %d must be >= 1 (above the endpoint count "
		    "means all)",
		    (int)c->forks);
	if (c->strategy == RESIL_CLUSTER_ZONE_AWARE &&
	    (c->local_zone == NULL || c->local_zone[0] == '\0'))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.local_zone: zone-aware needs the caller's zone "
		    "(zone=)");
	if (c->clock != NULL && c->clock->now == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.clock: the clock has no now function");
	return RESIL_OK;
}

static resil_err cluster_new(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag);

resil_err
resil_cluster_new(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag)
{
	if (cfg != NULL && cfg->size == sizeof(*cfg) &&
	    (cfg->strategy == RESIL_CLUSTER_FORKING ||
	        cfg->strategy == RESIL_CLUSTER_ZONE_AWARE))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cluster.strategy: %s needs parallel attempts and "
		    "timeouts: use a pipeline with a selector "
		    "(resil_pipeline_config.selector)",
		    resil_cluster_strategy_name(cfg->strategy));
	return cluster_new(out, sel, cfg, diag);
}

/* A pipeline's queue without a selector (resil__cluster_new_queue). */
#define NO_SELECTOR ((resil_selector *)(uintptr_t)1)

resil_err
resil__cluster_new_queue(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag)
{
	/* sel NULL: a pipeline's one implicit endpoint (its failback
	 * tasks run on endpoint NULL). */
	return cluster_new(out, sel != NULL ? sel : NO_SELECTOR, cfg, diag);
}

static resil_err
cluster_new(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag)
{
	const resil_allocator *a;
	resil_cluster *cl;
	resil_err err;

	if (out == NULL || sel == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "cluster: NULL argument");
	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "cluster: config is NULL");
	if ((err = resil_cluster_config_validate(cfg, diag)) != RESIL_OK)
		return err;
	a = resil__allocator(cfg->alloc);
	cl = resil__calloc(a, sizeof(*cl));
	if (cl == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "cluster: out of memory");
	cl->cfg = *cfg;
	cl->alloc = *a;
	cl->cfg.alloc = &cl->alloc;
	cl->clock = cfg->clock != NULL ? *cfg->clock : *resil_clock_system();
	cl->cfg.clock = &cl->clock;
	cl->sel = sel != NO_SELECTOR ? sel : NULL;
	cl->service =
	    resil__strdup(a, cfg->service != NULL ? cfg->service : "");
	if (cl->service == NULL) {
		resil__free(a, cl, sizeof(*cl));
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "cluster: out of memory");
	}
	cl->cfg.service = cl->service;
	cl->cfg.local_zone = NULL; /* not kept: the pipeline has its own */
	resil__spin_init(&cl->qlock);
	*out = cl;
	return RESIL_OK;
}

static void task_free(resil_cluster *cl, task *t);

void
resil_cluster_free(resil_cluster *cl)
{
	task *t, *next;
	resil_allocator a;

	if (cl == NULL)
		return;
	for (t = cl->head; t != NULL; t = next) {
		next = t->next;
		task_free(cl, t);
	}
	a = cl->alloc;
	resil__strfree(&a, cl->service);
	resil__free(&a, cl, sizeof(*cl));
}

static void
emit_at(resil_cluster *cl, uint64_t now, resil_cluster_event_type type,
    const char *method, const char *address, int rc, uint32_t retries)
{
	resil_cluster_event ev;

	if (cl->cfg.listener == NULL)
		return;
	ev.type = type;
	ev.time = now;
	ev.method = method != NULL ? method : "";
	ev.address = address;
	ev.rc = rc;
	ev.retries = retries;
	cl->cfg.listener(&ev, cl->cfg.listener_ctx);
}

static void
emit(resil_cluster *cl, resil_cluster_event_type type, const char *method,
    const char *address, int rc, uint32_t retries)
{
	if (cl->cfg.listener == NULL)
		return;
	emit_at(cl, resil_clock_now(&cl->clock), type, method, address, rc,
	    retries);
}

/* ---- one attempt ---- */

typedef struct attempt {
	resil_outcome outcome;
	int rc;
	resil_value value;
	char address[128];
	uint64_t id;
} attempt;

/* Run the attempt on a picked endpoint, and report its outcome. */
static resil_err
run_pick(resil_cluster *cl, resil_pick *pick, const resil_request *req,
    resil_endpoint_fn fn, void *ctx, attempt *at)
{
	resil_value_init(&at->value);
	snprintf(at->address, sizeof(at->address), "%s",
	    pick->address != NULL ? pick->address : "");
	at->id = pick->id;
	at->rc = fn(ctx, pick, req, &at->value);
	at->outcome = resil_classify(&cl->cfg.classifier, at->rc, &at->value);
	resil_selector_report(cl->sel, pick, at->outcome);
	return RESIL_OK;
}

/* Pick (avoiding exclude, or anyone when all are excluded) and run one
 * attempt. Returns RESIL_OK when it ran, else the pick's error. */
static resil_err
run_one(resil_cluster *cl, resil_candidates *c, const resil_request *req,
    const uint64_t *exclude, size_t nexclude, resil_endpoint_fn fn, void *ctx,
    attempt *at, resil_diag *diag)
{
	resil_pick pick;
	resil_err err;

	err = resil_selector_pick(
	    cl->sel, c, req, exclude, nexclude, &pick, diag);
	if (err == RESIL_E_UNAVAILABLE && nexclude > 0)
		/* Every candidate tried: tried ones again. */
		err =
		    resil_selector_pick(cl->sel, c, req, NULL, 0, &pick, diag);
	if (err != RESIL_OK)
		return err;
	return run_pick(cl, &pick, req, fn, ctx, at);
}

/* One attempt on candidate i itself (broadcast), without the balancer.
 * Returns RESIL_OK when it ran, else the pick's error (its breaker
 * refused). */
static resil_err
run_at(resil_cluster *cl, resil_candidates *c, size_t i,
    const resil_request *req, resil_endpoint_fn fn, void *ctx, attempt *at)
{
	resil_pick pick;
	resil_err err;

	err = resil_selector_pick_at(cl->sel, c, i, &pick, NULL);
	if (err != RESIL_OK)
		return err;
	return run_pick(cl, &pick, req, fn, ctx, at);
}

static void
set_result(resil_cluster_result *out, resil_err err, const attempt *at)
{
	out->err = err;
	out->rc = at->rc;
	out->outcome = at->outcome;
}

/* "the call failed (rc 111)" */
static void
last_error(char *buf, size_t n, const attempt *at)
{
	resil__cluster_last_error(buf, n, RESIL_E_CALL, at->rc, 0);
}

/* "Failed to invoke the method M in the service S by broadcast: F of N
 * providers failed. Last error is: ..." or, when no breaker let a call
 * through, "... by broadcast: none of N providers could be called (their
 * breakers refused)". */
void
resil__cluster_broadcast_msg(char *buf, size_t len, const char *method,
    const char *service, uint32_t failures, size_t n, const char *lasterr)
{
	resil__msg m;
	char num[96];

	resil__msg_start(&m, buf, len);
	RESIL__MSG_LIT(&m, "Failed to invoke the method ");
	resil__msg_str(&m, method != NULL ? method : "");
	RESIL__MSG_LIT(&m, " in the service ");
	resil__msg_str(&m, service);
	if (lasterr == NULL) {
		snprintf(num, sizeof(num),
		    " by broadcast: none of %zu providers could be called "
		    "(their breakers refused)",
		    n);
		resil__msg_str(&m, num);
		return;
	}
	snprintf(num, sizeof(num), " by broadcast: %u of %zu providers failed",
	    (unsigned)failures, n);
	resil__msg_str(&m, num);
	RESIL__MSG_LIT(&m, ". Last error is: ");
	resil__msg_str(&m, lasterr);
}

static void
broadcast_msg(resil_cluster_result *out, const resil_request *req,
    const resil_cluster *cl, uint32_t failures, size_t n, const char *lasterr)
{
	resil__cluster_broadcast_msg(out->message, sizeof(out->message),
	    req->method, cl->service, failures, n, lasterr);
}

/* ---- failback's queue ---- */

static char *
dup_or_null(resil_cluster *cl, const char *s, int *fail)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = resil__strdup(&cl->alloc, s);
	if (d == NULL)
		*fail = 1;
	return d;
}

static void
task_free(resil_cluster *cl, task *t)
{
	size_t i;

	resil__strfree(&cl->alloc, t->method);
	resil__strfree(&cl->alloc, t->tag);
	if (t->args != NULL) {
		for (i = 0; i < t->nargs; i++)
			resil__strfree(&cl->alloc, t->args[i]);
		resil__free(&cl->alloc, t->args, t->nargs * sizeof(char *));
	}
	if (t->params != NULL) {
		for (i = 0; i < t->nparams; i++) {
			resil__strfree(
			    &cl->alloc, (char *)(uintptr_t)t->params[i].key);
			resil__strfree(
			    &cl->alloc, (char *)(uintptr_t)t->params[i].value);
		}
		resil__free(
		    &cl->alloc, t->params, t->nparams * sizeof(resil_param));
	}
	if (t->data != NULL)
		resil__free(&cl->alloc, t->data, t->len);
	resil__free(&cl->alloc, t, sizeof(*t));
}

/* A copy of req (and args, when not NULL), owned by the task. NULL when
 * memory runs out. */
static task *
task_new(resil_cluster *cl, const resil_request *req, const resil_args *args)
{
	task *t = resil__calloc(&cl->alloc, sizeof(*t));
	int fail = 0;
	size_t i;

	if (t == NULL)
		return NULL;
	t->method = dup_or_null(cl, req->method, &fail);
	t->tag = dup_or_null(cl, req->tag, &fail);
	if (req->nargs > 0 && req->args != NULL) {
		t->args =
		    resil__calloc(&cl->alloc, req->nargs * sizeof(char *));
		if (t->args == NULL)
			fail = 1;
		else {
			t->nargs = req->nargs;
			for (i = 0; i < req->nargs; i++)
				t->args[i] = dup_or_null(cl,
				    req->args[i] ? req->args[i] : "", &fail);
		}
	}
	if (req->nparams > 0 && req->params != NULL) {
		t->params = resil__calloc(
		    &cl->alloc, req->nparams * sizeof(resil_param));
		if (t->params == NULL)
			fail = 1;
		else {
			t->nparams = req->nparams;
			for (i = 0; i < req->nparams; i++) {
				t->params[i].key =
				    dup_or_null(cl, req->params[i].key, &fail);
				t->params[i].value = dup_or_null(
				    cl, req->params[i].value, &fail);
			}
		}
	}
	if (args != NULL && args->len > 0) {
		t->data = resil__alloc(&cl->alloc, args->len);
		if (t->data == NULL)
			fail = 1;
		else {
			memcpy(t->data, args->data, args->len);
			t->len = args->len;
		}
	}
	if (args != NULL && t->method == NULL) {
		t->method = dup_or_null(
		    cl, args->method != NULL ? args->method : "", &fail);
	}
	if (fail) {
		task_free(cl, t);
		return NULL;
	}
	t->req.method = t->method;
	t->req.tag = t->tag;
	t->req.args = (const char *const *)t->args;
	t->req.nargs = t->nargs;
	t->req.params = t->params;
	t->req.nparams = t->nparams;
	t->req.tag_force = req->tag_force;
	if (args != NULL) {
		t->cargs.method = t->method;
		t->cargs.data = t->data;
		t->cargs.len = t->len;
	}
	return t;
}

/* Task t at the queue's tail. */
static void
queue_append(resil_cluster *cl, task *t)
{
	resil__spin_lock(&cl->qlock);
	if (cl->tail != NULL)
		cl->tail->next = t;
	else
		cl->head = t;
	cl->tail = t;
	resil__spin_unlock(&cl->qlock);
}

int
resil__cluster_enqueue(resil_cluster *cl, const resil_request *req,
    const resil_args *args, const char *address, uint64_t id, int rc,
    uint64_t now)
{
	task *t;

	resil__spin_lock(&cl->qlock);
	if (cl->queued >= (size_t)cl->cfg.failback_queue) {
		resil__spin_unlock(&cl->qlock);
		emit_at(cl, now, RESIL_CLUSTER_EVENT_QUEUE_FULL, req->method,
		    address, rc, 0);
		return 0;
	}
	cl->queued++; /* reserved; the allocation runs unlocked */
	resil__spin_unlock(&cl->qlock);
	t = task_new(cl, req, args);
	if (t == NULL) {
		/* Not full: out of memory (no QUEUE_FULL event, which would
		 * say the queue is full). */
		resil__spin_lock(&cl->qlock);
		cl->queued--;
		resil__spin_unlock(&cl->qlock);
		return -1;
	}
	t->due = now + cl->cfg.failback_period_ns;
	t->last_id = id;
	t->has_last = 1;
	queue_append(cl, t);
	emit_at(
	    cl, now, RESIL_CLUSTER_EVENT_QUEUED, req->method, address, rc, 0);
	return 1;
}

/* Queue a failed call: 1; 0 (and an event) when the queue is full; -1
 * when memory ran out. */
static int
enqueue(resil_cluster *cl, const resil_request *req, const attempt *at,
    uint64_t now)
{
	return resil__cluster_enqueue(
	           cl, req, NULL, at->address, at->id, at->rc, now) != 0;
}

size_t
resil_cluster_failback_pending(resil_cluster *cl)
{
	size_t n;

	if (cl == NULL)
		return 0;
	resil__spin_lock(&cl->qlock);
	n = cl->queued;
	resil__spin_unlock(&cl->qlock);
	return n;
}

/* resil_endpoint_fn through resil__task_fn. */
typedef struct plain_fn {
	resil_endpoint_fn fn;
	void *ctx;
} plain_fn;

static int
plain_call(void *ctx, const resil_pick *endpoint, const resil_request *req,
    const resil_args *args, resil_value *out)
{
	const plain_fn *pf = ctx;

	(void)args;
	return pf->fn(pf->ctx, endpoint, req, out);
}

resil_err
resil_cluster_failback_poll(
    resil_cluster *cl, resil_endpoint_fn fn, void *ctx, size_t *ran)
{
	plain_fn pf;

	if (cl == NULL || fn == NULL)
		return RESIL_E_INVAL;
	pf.fn = fn;
	pf.ctx = ctx;
	return resil__cluster_poll(
	    cl, resil_clock_now(&cl->clock), plain_call, &pf, ran);
}

/* Pick (avoiding exclude, or anyone when all are excluded) and run one
 * attempt of task t. Returns RESIL_OK when it ran, else the pick's error. */
static resil_err
run_task(resil_cluster *cl, resil_candidates *c, task *t, resil__task_fn fn,
    void *ctx, attempt *at)
{
	resil_pick pick;
	resil_err err;

	if (cl->sel == NULL) {
		/* A pipeline's one implicit endpoint: no pick. */
		resil_value_init(&at->value);
		at->address[0] = '\0';
		at->id = 0;
		at->rc = fn(ctx, NULL, &t->req,
		    t->cargs.method != NULL ? &t->cargs : NULL, &at->value);
		at->outcome =
		    resil_classify(&cl->cfg.classifier, at->rc, &at->value);
		return RESIL_OK;
	}
	err = resil_selector_pick(cl->sel, c, &t->req,
	    t->has_last ? &t->last_id : NULL, t->has_last ? 1 : 0, &pick,
	    NULL);
	if (err == RESIL_E_UNAVAILABLE && t->has_last)
		err = resil_selector_pick(
		    cl->sel, c, &t->req, NULL, 0, &pick, NULL);
	if (err != RESIL_OK)
		return err;
	resil_value_init(&at->value);
	snprintf(at->address, sizeof(at->address), "%s",
	    pick.address != NULL ? pick.address : "");
	at->id = pick.id;
	at->rc = fn(ctx, &pick, &t->req,
	    t->cargs.method != NULL ? &t->cargs : NULL, &at->value);
	at->outcome = resil_classify(&cl->cfg.classifier, at->rc, &at->value);
	resil_selector_report(cl->sel, &pick, at->outcome);
	return RESIL_OK;
}

resil_err
resil__cluster_poll(
    resil_cluster *cl, uint64_t now, resil__task_fn fn, void *ctx, size_t *ran)
{
	task *due = NULL, **dt = &due, *t, **pp, *next;
	resil_candidates *c;
	size_t n = 0;
	resil_err err, result = RESIL_OK;

	if (cl == NULL || fn == NULL)
		return RESIL_E_INVAL;
	if (ran != NULL)
		*ran = 0;
	/* The candidate set first: out of memory, nothing is taken out and
	 * every task stays as it was. (No selector: none is needed.) */
	c = NULL;
	err = cl->sel != NULL ? resil_candidates_new(&c, cl->sel) : RESIL_OK;
	if (err != RESIL_OK)
		return err;
	/* Take the due tasks out; each runs once, whatever it missed. */
	resil__spin_lock(&cl->qlock);
	for (pp = &cl->head; (t = *pp) != NULL;) {
		if (t->due <= now) {
			*pp = t->next;
			t->next = NULL;
			*dt = t;
			dt = &t->next;
		} else {
			pp = &t->next;
		}
	}
	cl->tail = NULL;
	for (t = cl->head; t != NULL; t = t->next)
		cl->tail = t;
	resil__spin_unlock(&cl->qlock);
	if (due == NULL) {
		resil_candidates_free(c);
		return RESIL_OK;
	}
	for (t = due; t != NULL; t = next) {
		attempt at;
		bool ok = false, ran_one = false;

		next = t->next;
		t->next = NULL;
		memset(&at, 0, sizeof(at));
		err = cl->sel != NULL
		    ? resil_selector_route(cl->sel, &t->req, c, NULL)
		    : RESIL_OK;
		if (err == RESIL_E_NOMEM) {
			/* Not a failed retry: the task goes back as it was,
			 * still due, and the poll says why. */
			result = err;
			queue_append(cl, t);
			continue;
		}
		if (err == RESIL_OK &&
		    run_task(cl, c, t, fn, ctx, &at) == RESIL_OK) {
			ran_one = true;
			n++;
			ok = at.outcome != RESIL_OUTCOME_FAILURE;
			t->last_id = at.id;
			t->has_last = 1;
			resil_value_free(&at.value);
		}
		t->retries++;
		if (ok) {
			emit_at(cl, now, RESIL_CLUSTER_EVENT_RETRIED,
			    t->req.method, at.address, at.rc, t->retries);
		} else if (t->retries >= (uint32_t)cl->cfg.failback_retries) {
			emit_at(cl, now, RESIL_CLUSTER_EVENT_GAVE_UP,
			    t->req.method, ran_one ? at.address : NULL, at.rc,
			    t->retries);
		} else {
			/* Again a period after this poll. */
			t->due = now + cl->cfg.failback_period_ns;
			queue_append(cl, t);
			continue;
		}
		resil__spin_lock(&cl->qlock);
		cl->queued--;
		resil__spin_unlock(&cl->qlock);
		task_free(cl, t);
	}
	resil_candidates_free(c);
	if (ran != NULL)
		*ran = n;
	return result;
}

uint64_t
resil_cluster_failback_dropped(const resil_cluster *cl)
{
	return cl != NULL ? resil__load64(&cl->dropped) : 0;
}

/* ---- messages ---- */

void
resil__cluster_last_error(
    char *buf, size_t n, resil_err status, int rc, uint64_t timeout_ns)
{
	if (status == RESIL_E_TIMEOUT && timeout_ns != 0) {
		if (timeout_ns % RESIL_NS_PER_MS == 0)
			snprintf(buf, n, "timeout after %llu ms",
			    (unsigned long long)(timeout_ns /
			        RESIL_NS_PER_MS));
		else
			snprintf(buf, n, "timeout after %llu ns",
			    (unsigned long long)timeout_ns);
	} else if (status == RESIL_E_CALL || status == RESIL_OK)
		snprintf(
		    buf, n, "%s (rc %d)", resil_strerror(RESIL_E_CALL), rc);
	else
		snprintf(buf, n, "%s", resil_strerror(status));
}

void
resil__cluster_full_msg(char *buf, size_t n, const char *method,
    const char *service, int32_t queue, const char *lasterr)
{
	resil__msg m;

	resil__msg_start(&m, buf, n);
	RESIL__MSG_LIT(&m, "Failback queue of the method ");
	resil__msg_str(&m, method != NULL ? method : "");
	RESIL__MSG_LIT(&m, " in the service ");
	resil__msg_str(&m, service != NULL ? service : "");
	if (queue < 0) {
		RESIL__MSG_LIT(&m, " could not take the call (out of memory)");
	} else {
		RESIL__MSG_LIT(&m, " is full (");
		resil__msg_int(&m, (int)queue);
		RESIL__MSG_LIT(&m, " calls)");
	}
	RESIL__MSG_LIT(&m, ": the failure is dropped. Last error is: ");
	resil__msg_str(&m, lasterr != NULL ? lasterr : "");
}

void
resil__cluster_failed_msg(char *buf, size_t n, const char *method,
    const char *service, uint32_t attempts, const char *providers,
    size_t nfailed, size_t ncand, const char *lasterr)
{
	resil__msg m;
	char num[64];

	resil__msg_start(&m, buf, n);
	RESIL__MSG_LIT(&m, "Failed to invoke the method ");
	resil__msg_str(&m, method != NULL ? method : "");
	RESIL__MSG_LIT(&m, " in the service ");
	resil__msg_str(&m, service != NULL ? service : "");
	RESIL__MSG_LIT(&m, ". Tried ");
	resil__msg_int(&m, (int)attempts);
	resil__msg_str(&m, attempts == 1 ? " time" : " times");
	RESIL__MSG_LIT(&m, " of the providers [");
	resil__msg_str(&m, providers != NULL ? providers : "");
	snprintf(num, sizeof(num), "] (%zu/%zu)", nfailed, ncand);
	resil__msg_str(&m, num);
	RESIL__MSG_LIT(&m, ". Last error is: ");
	resil__msg_str(&m, lasterr != NULL ? lasterr : "");
}

/* Dubbo's name of a balancer (its class), for failfast's message. */
const char *
resil__cluster_lb_name(resil_lb_kind k)
{
	static const char *const names[RESIL_LB_KINDS] = { "RandomLoadBalance",
		"RoundRobinLoadBalance", "LeastActiveLoadBalance",
		"P2CLoadBalance", "PeakEwmaLoadBalance",
		"ConsistentHashLoadBalance", "ShortestResponseLoadBalance" };

	return (unsigned)k < RESIL_LB_KINDS ? names[k] : "LoadBalance";
}

void
resil__cluster_join(const resil_candidates *c, char *buf, size_t n)
{
	resil_candidate cd;
	resil__msg m;
	size_t i, k = resil_candidates_count(c);
	int first = 1;

	resil__msg_start(&m, buf, n);
	for (i = 0; i < k; i++) {
		if (resil_candidates_get(c, i, &cd) != RESIL_OK)
			continue;
		if (first == 0)
			RESIL__MSG_LIT(&m, ", ");
		first = 0;
		resil__msg_str(&m, cd.address);
	}
}

void
resil__cluster_failfast_msg(char *buf, size_t n, const char *method,
    const char *service, const char *address, const char *balancer,
    const char *providers, const char *lasterr)
{
	resil__msg m;

	resil__msg_start(&m, buf, n);
	RESIL__MSG_LIT(&m, "Failfast invoke providers ");
	resil__msg_str(&m, address != NULL ? address : "");
	RESIL__MSG_LIT(&m, " ");
	resil__msg_str(&m, balancer != NULL ? balancer : "LoadBalance");
	RESIL__MSG_LIT(&m, " select from all providers [");
	resil__msg_str(&m, providers != NULL ? providers : "");
	RESIL__MSG_LIT(&m, "] for service ");
	resil__msg_str(&m, service != NULL ? service : "");
	RESIL__MSG_LIT(&m, " method ");
	resil__msg_str(&m, method != NULL ? method : "");
	RESIL__MSG_LIT(
	    &m, ", but no luck to perform the invocation. Last error is: ");
	resil__msg_str(&m, lasterr != NULL ? lasterr : "");
}

void
resil__cluster_forking_msg(
    char *buf, size_t n, const char *providers, const char *lasterr)
{
	resil__msg m;

	resil__msg_start(&m, buf, n);
	RESIL__MSG_LIT(&m, "Failed to forking invoke provider [");
	resil__msg_str(&m, providers != NULL ? providers : "");
	RESIL__MSG_LIT(&m,
	    "], but no luck to perform the invocation. Last "
	    "error is: ");
	resil__msg_str(&m, lasterr != NULL ? lasterr : "");
}

/* ---- invoke ---- */

static resil_err
fail_msg(resil_cluster_result *out, resil_err err, const char *msg)
{
	out->err = err;
	snprintf(out->message, sizeof(out->message), "%s", msg);
	return err;
}

/* Broadcast: every candidate in order, each by its position; one whose
 * breaker refuses is passed over, never replaced by another (a
 * balancer's choice would call one endpoint twice). Frees c. */
static resil_err
invoke_broadcast(resil_cluster *cl, resil_candidates *c,
    const resil_request *req, resil_endpoint_fn fn, void *ctx,
    resil_cluster_result *out)
{
	uint32_t threshold, failures = 0;
	int any_fail = 0, any_ok = 0;
	attempt at, lastfail, lastok;
	size_t i, n = resil_candidates_count(c);
	char lasterr[96];

	threshold =
	    (uint32_t)(n * (size_t)cl->cfg.broadcast_fail_percent / 100u);
	memset(&at, 0, sizeof(at));
	memset(&lastfail, 0, sizeof(lastfail));
	memset(&lastok, 0, sizeof(lastok));
	resil_value_init(&lastok.value);
	for (i = 0; i < n; i++) {
		if (run_at(cl, c, i, req, fn, ctx, &at) != RESIL_OK)
			continue; /* its breaker refused: skipped */
		out->attempts++;
		if (at.outcome == RESIL_OUTCOME_BUSINESS) {
			resil_value_free(&lastok.value);
			set_result(out, RESIL_E_BUSINESS, &at);
			out->value = at.value;
			resil_candidates_free(c);
			return out->err;
		}
		if (at.outcome == RESIL_OUTCOME_FAILURE) {
			any_fail = 1;
			failures++;
			resil_value_free(&at.value);
			lastfail = at;
			if (failures == threshold)
				break;
		} else {
			/* The last endpoint that answered gives the value. */
			resil_value_free(&lastok.value);
			lastok = at;
			any_ok = 1;
		}
	}
	resil_candidates_free(c);
	if (any_fail) {
		resil_value_free(&lastok.value);
		set_result(out, RESIL_E_CALL, &lastfail);
		last_error(lasterr, sizeof(lasterr), &lastfail);
		broadcast_msg(out, req, cl, failures, n, lasterr);
		return out->err;
	}
	if (!any_ok) {
		/* Nobody could be called: that is no success. */
		out->err = RESIL_E_UNAVAILABLE;
		broadcast_msg(out, req, cl, 0, n, NULL);
		return out->err;
	}
	set_result(out, RESIL_OK, &lastok);
	out->value = lastok.value;
	return RESIL_OK;
}

/* What a call's attempts leave for its message: the endpoints tried (to
 * exclude them), the distinct addresses that failed. */
typedef struct tries {
	uint64_t tried[MAX_TRIED];
	char failed[MAX_TRIED][128];
	size_t ntried, nfailed;
} tries;

/* Count attempt at in t: its endpoint as tried and, when it failed, its
 * address as failed (each once, as long as there is room). */
static void
tries_add(tries *t, const attempt *at)
{
	size_t i;

	if (t->ntried < MAX_TRIED) {
		for (i = 0; i < t->ntried && t->tried[i] != at->id; i++)
			;
		if (i == t->ntried)
			t->tried[t->ntried++] = at->id;
	}
	if (at->outcome != RESIL_OUTCOME_FAILURE)
		return;
	for (i = 0; i < t->nfailed && strcmp(t->failed[i], at->address) != 0;
	     i++)
		;
	if (i == t->nfailed && t->nfailed < MAX_TRIED)
		snprintf(t->failed[t->nfailed++], sizeof(t->failed[0]), "%s",
		    at->address);
}

/* The attempts of every strategy but broadcast (failover's retries + 1,
 * the others' one), routing again before each retry. RESIL_OK when they
 * ran, *at the last; otherwise the call is over (c freed, out filled) and
 * this is its error. */
static resil_err
run_attempts(resil_cluster *cl, resil_candidates *c, const resil_request *req,
    resil_endpoint_fn fn, void *ctx, attempt *at, tries *t,
    resil_cluster_result *out, resil_diag *diag)
{
	uint32_t attempts, k;
	resil_err err;

	attempts = cl->cfg.strategy == RESIL_CLUSTER_FAILOVER
	    ? (uint32_t)cl->cfg.retries + 1
	    : 1;
	for (k = 0; k < attempts; k++) {
		if (k > 0) {
			/* The directory may have changed: route again. */
			err = resil_selector_route(cl->sel, req, c, diag);
			if (err != RESIL_OK) {
				/* "No provider" ends the call; rc and outcome
				 * stay the last attempt's, its value is not
				 * the caller's. */
				resil_value_free(&at->value);
				resil_candidates_free(c);
				set_result(out, err, at);
				return fail_msg(out, err, diag->msg);
			}
		}
		resil_value_free(&at->value);
		err = run_one(
		    cl, c, req, t->tried, t->ntried, fn, ctx, at, diag);
		if (err != RESIL_OK) {
			/* Every candidate's breaker refused. */
			resil_candidates_free(c);
			if (k > 0)
				set_result(out, err, at);
			return fail_msg(out, err, diag->msg);
		}
		out->attempts++;
		tries_add(t, at);
		if (at->outcome != RESIL_OUTCOME_FAILURE)
			break;
	}
	return RESIL_OK;
}

/* The last attempt failed: what the strategy makes of it, over n
 * candidates at that attempt (providers: their addresses, joined; lb
 * their method's balancer). */
static resil_err
settle_failure(resil_cluster *cl, const resil_request *req, attempt *at,
    const tries *t, size_t n, resil_lb_kind lb, const char *providers,
    resil_cluster_result *out)
{
	char lasterr[96], list[RESIL_DIAG_MAX];
	resil__msg m;
	size_t i;

	resil_value_free(&at->value);
	if (cl->cfg.strategy == RESIL_CLUSTER_FAILSAFE) {
		emit(cl, RESIL_CLUSTER_EVENT_SWALLOWED, req->method,
		    at->address, at->rc, 0);
		set_result(out, RESIL_OK, at);
		out->value = resil_value_null();
		return RESIL_OK;
	}
	if (cl->cfg.strategy == RESIL_CLUSTER_FAILBACK) {
		int q = cl->cfg.failback_retries > 0
		    ? enqueue(cl, req, at, resil_clock_now(&cl->clock))
		    : 1;

		if (q <= 0) {
			/* Full: the new failure is dropped (a QUEUE_FULL
			 * event, the dropped count) and the caller still
			 * gets no error and a null value, as through a
			 * pipeline (DESIGN); the message says what was
			 * dropped. Out of memory: the caller gets the
			 * failure. */
			last_error(lasterr, sizeof(lasterr), at);
			set_result(out, q == 0 ? RESIL_OK : RESIL_E_CALL, at);
			resil__cluster_full_msg(out->message,
			    sizeof(out->message), req->method, cl->service,
			    q == 0 ? cl->cfg.failback_queue : -1, lasterr);
			if (q < 0)
				return out->err;
			resil__inc64(&cl->dropped);
			out->value = resil_value_null();
			return RESIL_OK;
		}
		set_result(out, RESIL_OK, at);
		out->value = resil_value_null();
		return RESIL_OK;
	}
	set_result(out, RESIL_E_CALL, at);
	last_error(lasterr, sizeof(lasterr), at);
	if (cl->cfg.strategy == RESIL_CLUSTER_FAILFAST) {
		resil__cluster_failfast_msg(out->message, sizeof(out->message),
		    req->method, cl->service, at->address,
		    resil__cluster_lb_name(lb), providers, lasterr);
		return out->err;
	}
	resil__msg_start(&m, list, sizeof(list));
	for (i = 0; i < t->nfailed; i++) {
		if (i > 0)
			RESIL__MSG_LIT(&m, ", ");
		resil__msg_str(&m, t->failed[i]);
	}
	resil__cluster_failed_msg(out->message, sizeof(out->message),
	    req->method, cl->service, out->attempts, list, t->nfailed, n,
	    lasterr);
	return out->err;
}

resil_err
resil_cluster_invoke(resil_cluster *cl, const resil_request *req,
    resil_endpoint_fn fn, void *ctx, resil_cluster_result *out)
{
	static const resil_request none = { NULL, NULL, 0, NULL, NULL, 0, 0 };
	char providers[RESIL_DIAG_MAX];
	resil_lb_kind lb;
	resil_candidates *c;
	resil_diag diag;
	attempt at;
	tries t;
	resil_err err;
	size_t n;

	if (out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	resil_value_init(&out->value);
	if (cl == NULL || fn == NULL)
		return fail_msg(out, RESIL_E_INVAL, "cluster: NULL argument");
	if (req == NULL)
		req = &none;
	memset(&at, 0, sizeof(at));
	t.ntried = t.nfailed = 0;
	diag.msg[0] = '\0';
	if ((err = resil_candidates_new(&c, cl->sel)) != RESIL_OK)
		return fail_msg(out, err, "cluster: out of memory");
	/* Every strategy routes first; "no provider" is never swallowed. */
	err = resil_selector_route(cl->sel, req, c, &diag);
	if (err != RESIL_OK) {
		resil_candidates_free(c);
		return fail_msg(out, err, diag.msg);
	}
	if (cl->cfg.strategy == RESIL_CLUSTER_BROADCAST)
		return invoke_broadcast(cl, c, req, fn, ctx, out);
	err = run_attempts(cl, c, req, fn, ctx, &at, &t, out, &diag);
	if (err != RESIL_OK)
		return err;
	n = resil_candidates_count(c);
	providers[0] = '\0';
	lb = RESIL_LB_RANDOM;
	if (at.outcome == RESIL_OUTCOME_FAILURE &&
	    cl->cfg.strategy == RESIL_CLUSTER_FAILFAST) {
		/* Failfast's message names them (Dubbo's "select from all
		 * providers [...]"). */
		lb = resil__candidates_lb_kind(c);
		resil__cluster_join(c, providers, sizeof(providers));
	}
	resil_candidates_free(c);
	if (at.outcome == RESIL_OUTCOME_SUCCESS ||
	    at.outcome == RESIL_OUTCOME_IGNORED) {
		set_result(out, RESIL_OK, &at);
		out->value = at.value;
		return RESIL_OK;
	}
	if (at.outcome == RESIL_OUTCOME_BUSINESS) {
		/* Passed through untouched, by every strategy. */
		set_result(out, RESIL_E_BUSINESS, &at);
		out->value = at.value;
		return out->err;
	}
	return settle_failure(cl, req, &at, &t, n, lb, providers, out);
}

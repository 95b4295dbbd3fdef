/*
 * A pipeline's events (lib/pipeline_events.h): each stage's events become
 * the pipeline's, with the service and the method of the call running on
 * this thread; the recording listener keeps them for tests and tools.
 */
#include "pipeline_events.h"

#include <stdio.h>
#include <string.h>

#include "duration.h"

/* The call running on this thread, for events and the deadline. */
RESIL__TLS const char *resil__tls_method;
RESIL__TLS uint64_t resil__tls_deadline = UINT64_MAX;

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
	case RESIL_STAGE_THROTTLE:
		return "throttle";
	}
	return "unknown";
}

uint64_t
resil_pipeline_deadline(void)
{
	/* UINT64_MAX outside an attempt: every driver resets it after one. */
	return resil__tls_deadline;
}

void
resil__emit(resil_pipeline *p, resil_pipeline_event *ev, resil_stage stage,
    uint64_t time, const char *text, const char *name)
{
	ev->stage = stage;
	ev->time = time;
	ev->text = text;
	ev->service = p->service;
	ev->method = name != NULL       ? name
	    : resil__tls_method != NULL ? resil__tls_method
	                                : "";
	p->listener(ev, p->listener_ctx);
}

void
resil__on_breaker(const resil_breaker_event *be, void *ctx)
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
	ev.breaker = be;
	resil__emit(p, &ev, RESIL_STAGE_BREAKER, be->time, text, NULL);
}

void
resil__on_retry(const resil_retry_event *re, void *ctx)
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
	ev.retry = re;
	resil__emit(p, &ev, RESIL_STAGE_RETRY, re->time, text, NULL);
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
	ev.limit = le;
	resil__emit(p, &ev, stage, le->time, text, NULL);
}

void
resil__on_ratelimit(const resil_limit_event *le, void *ctx)
{
	on_limit(le, ctx, RESIL_STAGE_RATELIMIT);
}

void
resil__on_bulkhead(const resil_limit_event *le, void *ctx)
{
	on_limit(le, ctx, RESIL_STAGE_BULKHEAD);
}

void
resil__emit_result(
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
	ev.result = r;
	resil__emit(p, &ev, stage, now, text, NULL);
}

/* The per-call event: what the caller got, as Resilience4j's onSuccess,
 * onError and onCallNotPermitted tell it. */
void
resil__emit_call(
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
	ev.result = r;
	resil__emit(p, &ev, RESIL_STAGE_CALL, now, text, NULL);
}

/* A cluster event (failback's queue, or the machine's own). */
void
resil__on_cluster(const resil_cluster_event *ce, void *ctx)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event ev;
	char text[160], rc[24];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	/* The rc only where a failure is the event's subject (issue 24.6):
	 * a retried call succeeded, a crossing or "no provider" has none. */
	if (ce->type == RESIL_CLUSTER_EVENT_SWALLOWED ||
	    ce->type == RESIL_CLUSTER_EVENT_QUEUED ||
	    ce->type == RESIL_CLUSTER_EVENT_QUEUE_FULL ||
	    ce->type == RESIL_CLUSTER_EVENT_GAVE_UP)
		snprintf(rc, sizeof(rc), " (rc %d)", ce->rc);
	else
		rc[0] = '\0';
	snprintf(text, sizeof(text), "cluster %s%s%s%s",
	    resil_cluster_event_name(ce->type), ce->address != NULL ? " " : "",
	    ce->address != NULL ? ce->address : "", rc);
	ev.cluster = ce;
	resil__emit(p, &ev, RESIL_STAGE_CLUSTER, ce->time, text,
	    ce->method != NULL ? ce->method : "");
}

void
resil__cluster_event(resil_pipeline *p, resil_cluster_event_type type,
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
	resil__on_cluster(&ce, p);
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

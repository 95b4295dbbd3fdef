/*
 * A pipeline's events (lib/pipeline_events.c): the listener callbacks
 * its stages are given, the events of an answer and of the cluster, the
 * recording listener, and the call running on this thread (its method
 * names the events; its deadline is resil_pipeline_deadline()'s). Never
 * installed.
 */
#ifndef RESIL_PIPELINE_EVENTS_H
#define RESIL_PIPELINE_EVENTS_H

#include "pipeline_internal.h"

/* The call running on this thread, for events and the deadline. */
extern RESIL__TLS const char *resil__tls_method;
extern RESIL__TLS uint64_t resil__tls_deadline;

/* Tell p's listener (there is one) of *ev, whose stage's part (breaker,
 * retry, limit, result, cluster) is set: stage, time, text and the
 * service; name (the method) NULL: the call running on this thread's ("" when
 * none). */
void resil__emit(resil_pipeline *p, resil_pipeline_event *ev,
    resil_stage stage, uint64_t time, const char *text, const char *name);

/* The stages' listeners; ctx is the pipeline. */
void resil__on_breaker(const resil_breaker_event *be, void *ctx);
void resil__on_retry(const resil_retry_event *re, void *ctx);
void resil__on_ratelimit(const resil_limit_event *le, void *ctx);
void resil__on_bulkhead(const resil_limit_event *le, void *ctx);
void resil__on_cluster(const resil_cluster_event *ce, void *ctx);

/* A stage answered the call with *r (MOCK, FALLBACK events). */
void resil__emit_result(
    resil_pipeline *p, resil_stage stage, const resil_result *r, uint64_t now);

/* The per-call event (the listener asked for it in call_events). */
void resil__emit_call(
    resil_pipeline *p, const void *cv, const resil_result *r, uint64_t now);

/* A cluster event of the call machine (no provider, swallowed, crossed
 * zones): nothing without a listener. */
void resil__cluster_event(resil_pipeline *p, resil_cluster_event_type type,
    const char *name, const char *address, int rc, uint64_t now);

#endif /* RESIL_PIPELINE_EVENTS_H */

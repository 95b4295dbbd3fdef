/*
 * The cluster's private steps (lib/cluster.c) for the pipeline: Dubbo's
 * messages, and the failback queue a pipeline keeps (lib/call_cluster.c,
 * lib/pipeline.c, lib/pipeline_failback.c). Never installed.
 */
#ifndef RESIL_CALL_INTERNAL_H
#define RESIL_CALL_INTERNAL_H

#include <resil/cluster.h>

/* Dubbo's failure message: "Failed to invoke the method M in the service
 * S. Tried N times of the providers [a, b] (k/n). Last error is: E".
 * providers is the list already joined with ", ". */
void resil__cluster_failed_msg(char *buf, size_t n, const char *method,
    const char *service, uint32_t attempts, const char *providers,
    size_t nfailed, size_t ncand, const char *lasterr);

/* Broadcast's: "Failed to invoke the method M in the service S by
 * broadcast: F of N providers failed. Last error is: E", or with lasterr
 * NULL "... by broadcast: none of N providers could be called (their
 * breakers refused)". */
void resil__cluster_broadcast_msg(char *buf, size_t len, const char *method,
    const char *service, uint32_t failures, size_t n, const char *lasterr);

/* "Failback queue of the method M in the service S is full (N calls): the
 * failure is dropped. Last error is: E"; with queue < 0 "... could not
 * take the call (out of memory): ...". */
void resil__cluster_full_msg(char *buf, size_t n, const char *method,
    const char *service, int32_t queue, const char *lasterr);

/* Failfast's, as Dubbo's FailfastClusterInvoker: "Failfast invoke
 * providers ADDR RandomLoadBalance select from all providers [a, b] for
 * service S method M, but no luck to perform the invocation. Last error
 * is: E" (balancer: resil__cluster_lb_name(); providers: the candidates
 * of the attempt, joined by resil__cluster_join()). */
void resil__cluster_failfast_msg(char *buf, size_t n, const char *method,
    const char *service, const char *address, const char *balancer,
    const char *providers, const char *lasterr);

/* Forking's, as Dubbo's ForkingClusterInvoker: "Failed to forking invoke
 * provider [a, b], but no luck to perform the invocation. Last error is:
 * E" (providers: the forked endpoints' addresses joined with ", "). */
void resil__cluster_forking_msg(
    char *buf, size_t n, const char *providers, const char *lasterr);

/* Dubbo's class name of a balancer ("RandomLoadBalance", ...). */
const char *resil__cluster_lb_name(resil_lb_kind k);

/* The addresses of c's candidates joined with ", " into buf (cut when
 * longer). */
void resil__cluster_join(const resil_candidates *c, char *buf, size_t n);

/* The last error in words: "timeout after 3000 ms", "the call failed (rc
 * 111)", or resil_strerror(status). */
void resil__cluster_last_error(
    char *buf, size_t n, resil_err status, int rc, uint64_t timeout_ns);

/* A cluster that only keeps the failback queue of a pipeline (every
 * strategy accepted; cfg checked by resil_cluster_config_validate). */
resil_err resil__cluster_new_queue(resil_cluster **out, resil_selector *sel,
    const resil_cluster_config *cfg, resil_diag *diag);

/* A queued call retried: args is the task's copy. */
typedef int (*resil__task_fn)(void *ctx, const resil_pick *endpoint,
    const resil_request *req, const resil_args *args, resil_value *out);

/* Queue a failed call at now (req and args copied; args may be NULL).
 * 1 when queued (a QUEUED event); 0 (and a QUEUE_FULL event) when the
 * queue is full; -1 when memory ran out. */
int resil__cluster_enqueue(resil_cluster *cl, const resil_request *req,
    const resil_args *args, const char *address, uint64_t id, int rc,
    uint64_t now);

/* Run the tasks due at now, each once (see resil_cluster_failback_poll). */
resil_err resil__cluster_poll(resil_cluster *cl, uint64_t now,
    resil__task_fn fn, void *ctx, size_t *ran);

#endif /* RESIL_CALL_INTERNAL_H */

/*
 * Issue 41, "in the pipeline": a pipeline's keyed families (keyed.h), one
 * per kind (breaker, rate limiter, bulkhead), each with the key it draws
 * from the request at the call's admission. docs/keyed.md, "In the
 * pipeline".
 */
#ifndef RESIL_PIPELINE_KEYED_H
#define RESIL_PIPELINE_KEYED_H

#include <resil/keyed.h>
#include <resil/pipeline.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Give p a keyed family of cfg->kind whose key is drawn by spec:
 *   "method"          the call's method name;
 *   "args"            the call's key bytes (args->data, args->len);
 *   "arguments[N]"    the invocation's argument N (N 0..255, decimal);
 *   "attachment:NAME" the invocation's attachment NAME (1..128 bytes);
 *   "host"            the endpoint the selector chose, per attempt (its
 *                     address; breaker, rate limiter and bulkhead
 *                     families of a pipeline with a selector: refused
 *                     otherwise; a bulkhead's slot is held from the pick
 *                     to that attempt's end);
 *   "A+B[+C[+D]]"     a composite of 2..4 of the above ("method+host",
 *                     "attachment:tenant+arguments[0]"): the parts'
 *                     values in order, each but the last followed by one
 *                     zero byte ("get\0" "10.0.0.1:20880"); "args" only
 *                     as the last part; with "host" it is per attempt.
 *                     Joined on the call's stack (nothing allocated); a
 *                     composite longer than cfg->max_key_len is refused
 *                     at the call (RESIL_E_INVAL, nothing run).
 * A call whose request lacks the key (no invocation, fewer arguments, no
 * such attachment, empty bytes; for a composite, any part) uses the
 * family's shared instance of the reserved key "\0" (one zero byte):
 * calls without a key share one breaker / limit, as a lone one would be;
 * result.message says nothing of it (resil_keyed_with() on "\0" shows
 * it).
 *
 * Both drivers gate with it: resil_pipeline_call / _invoke and the call
 * machine (resil_call_start: admitted at the start, the outcome recorded
 * when the call is DONE, given back by resil_call_cancel).
 *
 * Call before the pipeline's first call (not thread-safe against calls).
 * Kept across resil_pipeline_reload(); a second family of the same kind
 * (one the configuration named included: resil_pipeline_config.keyed) is
 * refused (RESIL_E_MISUSE). Returns RESIL_E_INVAL for a NULL argument
 * or a bad spec ("breaker.key: \"argument[0]\" is not a key source
 * (method, args, arguments[N], attachment:NAME, host)"), or
 * resil_keyed_new()'s error (its message prefixed with "KIND.key.").
 */
RESIL_API resil_err resil_pipeline_set_keyed(resil_pipeline *p,
    const char *spec, const resil_keyed_config *cfg, resil_diag *diag);

/* p's family of kind k, or NULL (borrowed: lives as long as p); its
 * per-key Prometheus text: resil_keyed_prometheus(). */
RESIL_API resil_keyed *resil_pipeline_keyed(
    resil_pipeline *p, resil_keyed_kind k);

#ifdef __cplusplus
}
#endif

#endif

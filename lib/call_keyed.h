/* Issue 41: the keyed families' gate of a pipeline (lib/call_keyed.c). */
#ifndef RESIL_CALL_KEYED_H
#define RESIL_CALL_KEYED_H

#include <resil/call.h>
#include <resil/keyed.h>
#include <resil/pipeline.h>

struct resil_method;

/* A gated call's arguments, and the driver's entry that runs it inside
 * the gate (given by lib/call_drive.c, so that this file never calls the
 * driver back). */
typedef struct resil__kcall resil__kcall;
typedef resil_err (*resil__keyed_run)(
    const resil__kcall *kc, resil_result *out);
struct resil__kcall {
	resil_pipeline *p;
	const struct resil_method *h;
	const resil_args *args;
	const resil_invocation *inv;
	resil_call_fn fn;
	resil_endpoint_call_fn efn;
	void *ctx;
	resil__keyed_run run;
};

/* Nonzero when p has keyed families and this is not the gate's own call
 * (consumed by this check). */
int resil__keyed_gated(const resil_pipeline *p);
void resil__keyed_free(resil_pipeline *p);
resil_err resil__keyed_call(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run);
resil_err resil__keyed_invoke(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run);

/* resil_pipeline_invoke_ex() over p with families and no method
 * handle (h NULL; h4/kgate): its checks (RESIL_E_INVAL as invoke()'s), then the
 * gate (or, for the gate's own call, run at once). */
resil_err resil__keyed_invoke_ex(resil_pipeline *p,
    const struct resil_method *h, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run);

/* What a call holds of its keys: held bit 1 the breaker's permit, bit 2
 * the bulkhead's slot (taken at t0). */
typedef struct resil__kheld {
	uint8_t held;
	uint64_t t0;
	resil_keyed_permit br, bh;
	resil_keyed_permit th; /* held bit 4: the key's throttle (issue 42) */
} resil__kheld;

/* The call machine (lib/call.c): the call's admission by its keys
 * (a refusal answers out: RESIL_E_LIMITED or RESIL_E_OPEN), and its end
 * (DONE: out's outcome recorded; cancelled: given back). */
resil_err resil__keyed_machine_admit(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, int method_prio, resil__kheld *h,
    resil_result *out);
void resil__keyed_machine_end(resil_pipeline *p, resil__kheld *h,
    int cancelled, const resil_result *out);

/* What an attempt holds of the families keyed by its endpoint's host
 * (a key with the host, composite or not): held bit 1 the breaker's
 * permit, bit 2 the bulkhead's slot (taken at t0). */
typedef struct resil__khost {
	uint8_t held;
	uint64_t t0;
	resil_keyed_permit br, bh;
} resil__khost;

/* The endpoint's host (lib/call_cluster.c): nonzero when p has a family
 * whose key has the host; an attempt's admission on host (the call's
 * args and invocation: the key's other parts), RESIL_OK with *kh
 * holding what it took, or the refusal (*kind: the family's kind;
 * RESIL_E_INVAL: a composite key over its max_key_len), nothing held;
 * its end (IGNORED: given back). */
int resil__keyed_host(const resil_pipeline *p);
resil_err resil__keyed_host_admit(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, const char *host, resil__khost *kh,
    unsigned *kind);
void resil__keyed_host_end(
    resil_pipeline *p, resil__khost *kh, resil_outcome o);

/* Issue 41 (turn 4): the server's pushback for a key
 * (lib/call_keyed_pause.c): key's pause's end if it is paused at now,
 * else 0; key paused until until (never shortened): 1, or 0 when not
 * kept (RESIL__KPAUSE_MAX keys paused, or out of memory); the table
 * freed (with the gate). */
uint64_t resil__kpause_until(
    resil_pipeline *p, const void *key, size_t len, uint64_t now);
int resil__kpause_set(resil_pipeline *p, const void *key, size_t len,
    uint64_t until, uint64_t now);
void resil__kpause_free(resil_pipeline *p);

/* A throttled answer (lib/call_overload.c) of a call over p with a
 * keyed rate limiter family: the key (drawn from the call the gate runs
 * on this thread, else from args and inv; a key with the host: host, the
 * attempt's endpoint, NULL when it has none: nothing done) paused for pause_ns (0: no Retry-After) from now, its fleet
 * limiter told (resil_fleet_limit_pause_key), and its limiter drained
 * when drain (or when the pause could not be kept; never a fleet's).
 * Returns 0 when p has no such family (nothing done); else 1 with
 * *until the pause's end (0: none kept), *drained the permits drained
 * (UINT64_MAX: none), and note (cap bytes) "" or why the pause was not
 * kept. */
int resil__keyed_pushback(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, const char *host, uint64_t pause_ns,
    uint64_t now, int drain, uint64_t *until, uint64_t *drained, char *note,
    size_t cap);

/* Families named by the configuration (resil_pipeline_config.keyed,
 * checked by resil__keyed_cfg_check(), lib/keyed_spec.h): made by
 * resil_pipeline_new before the settings, their stages left out of the
 * settings (strip), and a reload's check (the same families, or refused
 * naming the key). */
resil_err resil__keyed_setup(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag);
void resil__keyed_strip(const resil_pipeline *p, resil_pipeline_config *eff);
resil_err resil__keyed_reload_check(const resil_pipeline *p,
    const resil_pipeline_config *cfg, resil_diag *diag);

#endif

/* Issue 41: the keyed families' gate of a pipeline (lib/call_keyed.c). */
#ifndef RESIL_CALL_KEYED_H
#define RESIL_CALL_KEYED_H

#include <resil/call.h>
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

/* The call machine does not run keyed families yet: out says so;
 * returns RESIL_E_INVAL. */
resil_err resil__keyed_refuse_machine(resil_result *out);

#endif

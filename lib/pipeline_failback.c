/*
 * Failback in a pipeline: the queue of failed calls the cluster keeps
 * (cluster.strategy failback), run by the user's poll on an endpoint the
 * selector picks.
 */
#include "pipeline_internal.h"

#include "call_internal.h"

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

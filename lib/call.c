/*
 * resil call: the call machine's public face (include/resil/call.h,
 * docs/async.md). The caller's event loop drives the machine of
 * lib/call_machine.h with its own clock readings.
 */
#include <resil/call.h>

#include "call_machine.h"

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

HOT resil_err
call_start(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_args *args, const resil_invocation *inv, resil_result *out,
    uint64_t now, resil_call_next *step)
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
	if (RESIL__UNLIKELY(c->magic == CALL_LIVE || c->magic == CALL_CLUSTER))
		/* A call in flight holds permits and settings: starting
		 * over it would lose them (issue 25.4). */
		return RESIL_E_MISUSE;
	g = conf_hold(p, &gs);
	resil__tls_method = args->method;
	step->endpoint = NULL;
	c->inv = inv;
	mstart(c, p, g, gs,
	    m != NULL ? resolve(g, m) : find_method(g, args->method), args,
	    out, &ts, step);
	c->gref = 1;
	c->gst = (uint8_t)gs;
	call_settle(c);
	resil__tls_method = NULL;
	return RESIL_OK;
}

resil_err
resil_call_start(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_args *args, resil_result *out, uint64_t now,
    resil_call_next *step)
{
	return call_start(call, p, m, args, NULL, out, now, step);
}

resil_err
resil_call_start_ex(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_invocation *inv, resil_result *out, uint64_t now,
    resil_call_next *step)
{
	if (inv == NULL)
		return RESIL_E_INVAL;
	return call_start(call, p, m, &inv->args, inv, out, now, step);
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
	resil__tls_method = c->args->method;
	step->endpoint = NULL;
	mstep(c, &ts, 0, step);
	call_settle(c);
	resil__tls_method = NULL;
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
		resil__tls_method = c->args->method;
		err = mreport(c, attempt, rc, value, &ts);
	} else if (c->magic == CALL_CLUSTER) {
		resil__tls_method = c->args->method;
		err = resil__call_report_cl(c, attempt, rc, value, &ts);
	} else if (c->magic == CALL_DONE || c->magic == CALL_CANCELLED) {
		/* After DONE the args may be gone: only a live call names
		 * them. */
		resil__tls_method = NULL;
		err = mreport(c, attempt, rc, value, &ts);
	} else {
		return RESIL_E_MISUSE;
	}
	resil__tls_method = NULL;
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
	if (c->magic == CALL_CLUSTER)
		resil__cl_cancel(c);
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
		n += (((c->running & (uint8_t)~c->delayed) | c->abandoned) >>
		         i) &
		    1u;
	return n;
}

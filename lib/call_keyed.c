/*
 * Issue 41, in the pipeline: the keyed families' gate around a call
 * (include/resil/pipeline_keyed.h, docs/keyed.md "In the pipeline").
 *
 * A pipeline with a family takes resil_pipeline_call's slow path (p->slow),
 * so a pipeline without one pays nothing. The gate draws each family's key
 * from the request, takes the rate limiter's permit, the bulkhead's slot
 * and the breaker's permit of that key (in that order), runs the call
 * through the ordinary drivers (re-entered with this thread marked as
 * inside the gate), then records the call's outcome in the key's breaker
 * and completes its bulkhead slot. The call machine's admission and end,
 * and the host's per attempt, are here too; the families are made, kept
 * and checked by lib/pipeline_keyed.c (which this file never calls).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/pipeline_keyed.h>

#include "call_keyed.h"
#include "internal.h"
#include "keyed_gate.h"
#include "pipeline_internal.h"
#include "pipeline_keyed_fleet.h"

/* The pipeline whose gate this thread is entering: the next check of it
 * (the gate's own call) goes past the gate, once. */
static RESIL__TLS const resil_pipeline *kg_inside;

static const char kg_missing[1] = { 0 };

int
resil__keyed_gated(const resil_pipeline *p)
{
	if (RESIL__UNLIKELY(kg_inside == p)) {
		/* The gate's own call, once: a call the user's function
		 * makes from inside it is gated again. */
		kg_inside = NULL;
		return 0;
	}
	return p->keyed != NULL;
}

/* The key spec draws from the request; the reserved "\0" when missing. */
static void
draw(const kspec *s, const resil_args *args, const resil_invocation *inv,
    const void **key, size_t *len)
{
	const char *v = NULL;
	size_t i;

	*key = NULL;
	*len = 0;
	switch (s->src) {
	case KS_METHOD:
		v = args->method;
		break;
	case KS_ARGS:
		if (args->len > 0 && args->data != NULL) {
			*key = args->data;
			*len = args->len;
		}
		break;
	case KS_ARGUMENT:
		if (inv != NULL && s->index < inv->narguments &&
		    inv->arguments != NULL)
			v = inv->arguments[s->index];
		break;
	case KS_ATTACHMENT:
		for (i = 0; inv != NULL && i < inv->nattachments; i++)
			if (inv->attachments[i].key != NULL &&
			    strcmp(inv->attachments[i].key, s->name) == 0) {
				v = inv->attachments[i].value;
				break;
			}
		break;
	case KS_HOST: /* per attempt (resil__keyed_host_admit) */
		break;
	}
	if (v != NULL && *v != '\0') {
		*key = v;
		*len = strlen(v);
	}
	if (*len == 0) {
		*key = kg_missing;
		*len = 1;
	}
}

/* The call's class for its key's throttle (issue 42): the
 * invocation's, its attachment `resil.priority` or `priority`, the
 * method's, else default; as the pipeline's throttle stage reads it
 * (lib/call_bhwait.c, resil__call_priority()). */
static int
throttle_class(const resil_invocation *inv, int method_prio)
{
	resil_priority p = RESIL_PRIORITY_UNSET;
	size_t i;

	if (inv != NULL && inv->priority >= RESIL_PRIORITY_SHEDDABLE &&
	    inv->priority <= RESIL_PRIORITY_CRITICAL)
		p = inv->priority;
	else if (inv != NULL && inv->attachments != NULL)
		for (i = 0; i < inv->nattachments; i++)
			if (inv->attachments[i].key != NULL &&
			    (strcmp(inv->attachments[i].key,
			         "resil.priority") == 0 ||
			        strcmp(inv->attachments[i].key, "priority") ==
			            0) &&
			    resil_priority_parse(inv->attachments[i].value,
			        &p) == RESIL_OK)
				break;
	if (p == RESIL_PRIORITY_UNSET && method_prio != 0)
		p = (resil_priority)method_prio;
	if (p == RESIL_PRIORITY_CRITICAL)
		return RESIL_THROTTLE_CRITICAL;
	if (p == RESIL_PRIORITY_SHEDDABLE)
		return RESIL_THROTTLE_SHEDDABLE;
	return RESIL_THROTTLE_DEFAULT;
}

/* What became of the call, for its key's throttle: the server's
 * refusal (RESIL_E_THROTTLED, its overload answer), no answer (a
 * timeout), else an accept (the server answered, or the call never
 * reached it). */
static resil_throttle_result
throttle_result_of(const resil_result *out)
{
	if (out->err == RESIL_E_THROTTLED || out->cause == RESIL_E_THROTTLED)
		return RESIL_THROTTLE_REJECTED;
	if (out->err == RESIL_E_TIMEOUT || out->cause == RESIL_E_TIMEOUT)
		return RESIL_THROTTLE_NO_ANSWER;
	return RESIL_THROTTLE_ACCEPTED;
}

/* The call's outcome for its key's breaker. */
static resil_outcome
outcome_of(resil_err err, const resil_result *out)
{
	if (err == RESIL_OK && out->err == RESIL_OK &&
	    out->source == RESIL_SOURCE_LIVE)
		return RESIL_OUTCOME_SUCCESS;
	if (out->err == RESIL_E_CALL || out->err == RESIL_E_TIMEOUT ||
	    out->cause == RESIL_E_CALL || out->cause == RESIL_E_TIMEOUT)
		return RESIL_OUTCOME_FAILURE;
	return RESIL_OUTCOME_IGNORED;
}

static resil_err
refuse(resil_result *out, resil_err e, const char *kind, int bstate)
{
	resil_result_init(out);
	out->err = e;
	out->source = RESIL_SOURCE_UNAVAILABLE;
	out->cause = e;
	out->breaker_state = bstate;
	out->error_name = resil_err_name(e);
	(void)snprintf(out->message, sizeof(out->message),
	    "the key's %s refused the call", kind);
	return e;
}

typedef resil__kcall kcall;

/* g's family of kind k that the call's admission asks (a host family is
 * asked per attempt, by the cluster), or NULL. */
static resil_keyed *
call_fam(const struct resil__kgate *g, resil_keyed_kind k)
{
	return g->spec[k].src == KS_HOST ? NULL : g->fam[k];
}

static resil_err
run_inner(const kcall *kc, resil_result *out)
{
	resil_err err;

	kg_inside = kc->p;
	err = kc->run(kc, out); /* the driver's own entry, again */
	kg_inside = NULL; /* consumed already unless the call was refused */
	return err;
}

/* The call's admission by its keys: a rate limiter permit, the
 * throttle's admit, a bulkhead slot, a breaker permit (those held go in
 * *h); a refusal answers out. */
static resil_err
admit(resil_pipeline *p, const resil_args *args, const resil_invocation *inv,
    int method_prio, resil__kheld *h, resil_result *out)
{
	struct resil__kgate *g = p->keyed;
	resil_keyed *th = call_fam(g, RESIL_KEYED_THROTTLE);
	resil_keyed *rl = call_fam(g, RESIL_KEYED_RATELIMIT);
	resil_keyed *bh = call_fam(g, RESIL_KEYED_BULKHEAD);
	resil_keyed *br = call_fam(g, RESIL_KEYED_BREAKER);
	const void *key;
	size_t len;
	resil_err err;

	h->held = 0;
	if (rl != NULL) {
		uint64_t after = 0;

		draw(&g->spec[RESIL_KEYED_RATELIMIT], args, inv, &key, &len);
		err = resil__kfleet_acquire(g, key, len, &after);
		if (err != RESIL_OK)
			return refuse(out, err, "rate limiter", -1);
	}
	if (th != NULL) {
		draw(&g->spec[RESIL_KEYED_THROTTLE], args, inv, &key, &len);
		err = resil_keyed_throttle_admit(
		    th, key, len, throttle_class(inv, method_prio), &h->th);
		if (err != RESIL_OK)
			return refuse(out, err, "throttle", -1);
		h->held |= 4u;
	}
	if (bh != NULL) {
		draw(&g->spec[RESIL_KEYED_BULKHEAD], args, inv, &key, &len);
		err = resil_keyed_bulkhead_try_acquire(bh, key, len, &h->bh);
		if (err != RESIL_OK) {
			if (h->held & 4u)
				(void)resil_keyed_throttle_report(th, &h->th,
				    RESIL_THROTTLE_ACCEPTED);
			h->held = 0;
			return refuse(out, err, "bulkhead", -1);
		}
		h->held |= 2u;
		h->t0 = resil_clock_now(&p->clock);
	}
	if (br != NULL) {
		draw(&g->spec[RESIL_KEYED_BREAKER], args, inv, &key, &len);
		err = resil_keyed_breaker_acquire(br, key, len, &h->br);
		if (err != RESIL_OK) {
			if (h->held & 2u)
				(void)resil_keyed_bulkhead_release(bh, &h->bh);
			if (h->held & 4u)
				(void)resil_keyed_throttle_report(th, &h->th,
				    RESIL_THROTTLE_ACCEPTED);
			h->held = 0;
			return refuse(
			    out, err, "breaker", (int)RESIL_BREAKER_OPEN);
		}
		h->held |= 1u;
	}
	return RESIL_OK;
}

/* The call's outcome into what *h holds (IGNORED: given back); tr: what
 * the key's throttle is told. */
static void
settle(resil_pipeline *p, resil__kheld *h, resil_outcome o,
    resil_throttle_result tr)
{
	struct resil__kgate *g = p->keyed;

	if (h->held & 4u)
		(void)resil_keyed_throttle_report(
		    g->fam[RESIL_KEYED_THROTTLE], &h->th, tr);
	if (h->held & 1u) {
		resil_keyed *br = g->fam[RESIL_KEYED_BREAKER];

		if (o == RESIL_OUTCOME_IGNORED)
			(void)resil_keyed_breaker_release(br, &h->br);
		else
			(void)resil_keyed_breaker_record(br, &h->br, o);
	}
	if (h->held & 2u)
		(void)resil_keyed_bulkhead_complete(
		    g->fam[RESIL_KEYED_BULKHEAD], &h->bh, o,
		    resil_clock_now(&p->clock) - h->t0);
	h->held = 0;
}

/* The priority the call's method declares (0: none), read only when
 * the pipeline has a keyed throttle (a hold of the settings). */
static int
method_prio(const kcall *kc)
{
	unsigned st;
	settings *g;
	int prio;

	if (kc->p->keyed->fam[RESIL_KEYED_THROTTLE] == NULL)
		return 0;
	g = conf_hold(kc->p, &st);
	prio = kc->h != NULL ? resolve(g, kc->h)->prio : g->dflt.prio;
	conf_drop(g);
	return prio;
}

static resil_err
gate(const kcall *kc, resil_result *out)
{
	resil__kheld h;
	resil_err err;

	err = admit(kc->p, kc->args, kc->inv, method_prio(kc), &h, out);
	if (err != RESIL_OK)
		return err;
	err = run_inner(kc, out);
	settle(kc->p, &h, outcome_of(err, out), throttle_result_of(out));
	return err;
}

resil_err
resil__keyed_call(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run)
{
	kcall kc = { p, h, args, NULL, fn, NULL, ctx, run };

	return gate(&kc, out);
}

resil_err
resil__keyed_invoke(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run)
{
	kcall kc = { p, h, args, inv, NULL, fn, ctx, run };

	return gate(&kc, out);
}

/* ---- the call machine (lib/call.c) ---- */

resil_err
resil__keyed_machine_admit(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, int method_prio, resil__kheld *h,
    resil_result *out)
{
	return admit(p, args, inv, method_prio, h, out);
}

void
resil__keyed_machine_end(
    resil_pipeline *p, resil__kheld *h, int cancelled, const resil_result *out)
{
	settle(p, h,
	    cancelled ? RESIL_OUTCOME_IGNORED : outcome_of(out->err, out),
	    cancelled ? RESIL_THROTTLE_NO_ANSWER : throttle_result_of(out));
}

/* ---- the endpoint's host, per attempt (lib/call_cluster.c) ---- */

int
resil__keyed_host(const resil_pipeline *p)
{
	const struct resil__kgate *g = p->keyed;

	return g != NULL &&
	    ((g->fam[RESIL_KEYED_BREAKER] != NULL &&
	         g->spec[RESIL_KEYED_BREAKER].src == KS_HOST) ||
	        (g->fam[RESIL_KEYED_RATELIMIT] != NULL &&
	            g->spec[RESIL_KEYED_RATELIMIT].src == KS_HOST));
}

resil_err
resil__keyed_host_admit(
    resil_pipeline *p, const char *host, resil_keyed_permit *permit, int *held)
{
	struct resil__kgate *g = p->keyed;
	resil_keyed *rl = g->fam[RESIL_KEYED_RATELIMIT];
	resil_keyed *br = g->fam[RESIL_KEYED_BREAKER];
	size_t len = host != NULL ? strlen(host) : 0;
	const void *key =
	    len > 0 ? (const void *)host : (const void *)kg_missing;
	resil_err err;

	*held = 0;
	if (len == 0)
		len = 1;
	if (rl != NULL && g->spec[RESIL_KEYED_RATELIMIT].src == KS_HOST) {
		uint64_t after = 0;

		err = resil__kfleet_acquire(g, key, len, &after);
		if (err != RESIL_OK)
			return err;
	}
	if (br != NULL && g->spec[RESIL_KEYED_BREAKER].src == KS_HOST) {
		err = resil_keyed_breaker_acquire(br, key, len, permit);
		if (err != RESIL_OK)
			return err;
		*held = 1;
	}
	return RESIL_OK;
}

void
resil__keyed_host_end(
    resil_pipeline *p, resil_keyed_permit *permit, resil_outcome o)
{
	resil_keyed *br = p->keyed->fam[RESIL_KEYED_BREAKER];

	if (o == RESIL_OUTCOME_IGNORED)
		(void)resil_keyed_breaker_release(br, permit);
	else
		(void)resil_keyed_breaker_record(br, permit, o);
}

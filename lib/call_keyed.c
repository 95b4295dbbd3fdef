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
#include <resil/fleet.h>

#define KG_COLD __attribute__((noinline, cold))

/* The pipeline whose gate this thread is entering: the next check of it
 * (the gate's own call) goes past the gate, once. */
static RESIL__TLS const resil_pipeline *kg_inside;

static const char kg_missing[1] = { 0 };

/* The call the gate runs on this thread (its key's pushback is told from
 * inside it: lib/call_overload.c, resil__keyed_pushback()). */
static RESIL__TLS const struct resil__kcall *kg_cur;

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

/* Part s of the request (host: the attempt's endpoint, NULL per call):
 * *v, *len; *len 0 when the request lacks it. */
static inline __attribute__((always_inline)) void
part_of(const kpart *s, const resil_args *args, const resil_invocation *inv,
    const char *host, const void **v, size_t *len)
{
	const char *t = NULL;
	size_t i;

	*v = NULL;
	*len = 0;
	switch (s->src) {
	case KS_METHOD:
		t = args->method;
		break;
	case KS_ARGS:
		if (args->len > 0 && args->data != NULL) {
			*v = args->data;
			*len = args->len;
		}
		return;
	case KS_ARGUMENT:
		if (inv != NULL && s->index < inv->narguments &&
		    inv->arguments != NULL)
			t = inv->arguments[s->index];
		break;
	case KS_ATTACHMENT:
		for (i = 0; inv != NULL && i < inv->nattachments; i++)
			if (inv->attachments[i].key != NULL &&
			    strcmp(inv->attachments[i].key, s->name) == 0) {
				t = inv->attachments[i].value;
				break;
			}
		break;
	case KS_HOST:
		t = host;
		break;
	}
	if (t != NULL) {
		*v = t;
		*len = strlen(t);
	}
}

/* The key spec s draws from the request (host: the attempt's endpoint,
 * NULL when asked per call) into *key, *len: a single source's bytes as
 * they are, a composite's joined in buf (cap bytes: nothing allocated);
 * the reserved "\0" when a part is missing. RESIL_E_INVAL (*len the
 * composite's length) when a composite is longer than the family's
 * max_key_len. */
static inline __attribute__((always_inline)) resil_err
draw(const kspec *s, const resil_args *args, const resil_invocation *inv,
    const char *host, char *buf, size_t cap, const void **key, size_t *len)
{
	size_t at = 0, lim;
	unsigned i;

	if (RESIL__LIKELY(s->nparts <= 1)) {
		part_of(&s->part[0], args, inv, host, key, len);
		if (*len == 0) {
			*key = kg_missing;
			*len = 1;
		}
		return RESIL_OK;
	}
	lim = s->max_len != 0 && s->max_len < cap ? s->max_len : cap;
	for (i = 0; i < s->nparts; i++) {
		const void *v;
		size_t n, sep = i > 0;

		part_of(&s->part[i], args, inv, host, &v, &n);
		if (n == 0) {
			*key = kg_missing;
			*len = 1;
			return RESIL_OK;
		}
		/* Joined as read; past the bound only counted (a later part
		 * missing still makes the call's key "\0"). */
		if (at + sep + n <= lim) {
			if (sep)
				buf[at] = '\0';
			memcpy(buf + at + sep, v, n);
		}
		at += sep + n;
	}
	*key = buf;
	*len = at;
	return at <= lim ? RESIL_OK : RESIL_E_INVAL;
}

/* A composite key over its family's max_key_len (len bytes), refused at
 * the call. */
static resil_err
too_long(resil_result *out, const kspec *s, const char *kind, size_t len)
{
	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	out->source = RESIL_SOURCE_UNAVAILABLE;
	out->cause = RESIL_E_INVAL;
	out->breaker_state = -1;
	out->error_name = resil_err_name(RESIL_E_INVAL);
	(void)snprintf(out->message, sizeof(out->message),
	    "%s.key: the call's composite key is %zu bytes, over "
	    "max_key_len %u",
	    kind, len,
	    s->max_len != 0 ? (unsigned)s->max_len
	                    : (unsigned)RESIL_KEYED_MAX_KEY_LEN);
	return RESIL_E_INVAL;
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
	const kcall *outer = kg_cur;
	resil_err err;

	/* An invoke runs the driver's body directly (lib/call_drive.c,
	 * keyed_run); a call re-enters its public entry, which the gate
	 * lets pass once. */
	if (kc->efn == NULL)
		kg_inside = kc->p;
	kg_cur = kc;
	err = kc->run(kc, out);
	kg_cur = outer;
	kg_inside = NULL; /* consumed already unless the call was refused */
	return err;
}

static const char *const kg_kind[RESIL_KEYED_KINDS] = { "breaker",
	"ratelimit", "bulkhead", "throttle" };

/* g's family of kind k's key for the call (host: the attempt's
 * endpoint, NULL per call), joined in kb when composite; a composite
 * too long answers out. */
static resil_err
key_of(const struct resil__kgate *g, unsigned k, const resil_args *args,
    const resil_invocation *inv, const char *host, char *kb,
    const void **key, size_t *len, resil_result *out)
{
	resil_err err = draw(&g->spec[k], args, inv, host, kb,
	    RESIL_KEYED_MAX_KEY_LEN, key, len);

	if (RESIL__UNLIKELY(err != RESIL_OK) && out != NULL)
		(void)too_long(out, &g->spec[k], kg_kind[k], *len);
	return err;
}

/* Whether the server paused key (issue 41, turn 4) for this call: a
 * critical one passes the pause (the limiter decides it, as the lone
 * limiter's pause lets it: lib/call_overload.c); counted as the lone
 * limiter's paused calls. */
static KG_COLD int
paused(resil_pipeline *p, const void *key, size_t len,
    const resil_invocation *inv, int method_prio)
{
	if (resil__kpause_until(p, key, len, resil_clock_now(&p->clock)) == 0 ||
	    throttle_class(inv, method_prio) == RESIL_THROTTLE_CRITICAL)
		return 0;
	resil__inc64(&my_stripe(p)->paused);
	return 1;
}

static KG_COLD resil_err
refuse_paused(resil_result *out)
{
	(void)refuse(out, RESIL_E_LIMITED, "rate limiter", -1);
	(void)snprintf(out->message, sizeof(out->message),
	    "the key's rate limiter is paused by the server's Retry-After");
	return RESIL_E_LIMITED;
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
	char kb[RESIL_KEYED_MAX_KEY_LEN]; /* a composite key, joined */
	const void *key;
	size_t len;
	resil_err err;

	h->held = 0;
	if (rl != NULL) {
		uint64_t after = 0;

		if ((err = key_of(g, RESIL_KEYED_RATELIMIT, args, inv, NULL,
		         kb, &key, &len, out)) != RESIL_OK)
			return err;
		if (RESIL__UNLIKELY(resil__load64(&g->kp.live) != 0) &&
		    paused(p, key, len, inv, method_prio))
			return refuse_paused(out);
		err = resil__kfleet_acquire(g, key, len, &after);
		if (err != RESIL_OK)
			return refuse(out, err, "rate limiter", -1);
	}
	if (th != NULL) {
		if ((err = key_of(g, RESIL_KEYED_THROTTLE, args, inv, NULL, kb,
		         &key, &len, out)) != RESIL_OK)
			return err;
		err = resil_keyed_throttle_admit(
		    th, key, len, throttle_class(inv, method_prio), &h->th);
		if (err != RESIL_OK)
			return refuse(out, err, "throttle", -1);
		h->held |= 4u;
	}
	if (bh != NULL) {
		err = key_of(g, RESIL_KEYED_BULKHEAD, args, inv, NULL, kb, &key,
		    &len, out);
		if (err == RESIL_OK &&
		    (err = resil_keyed_bulkhead_try_acquire(
		         bh, key, len, &h->bh)) != RESIL_OK)
			(void)refuse(out, err, "bulkhead", -1);
		if (err != RESIL_OK) {
			if (h->held & 4u)
				(void)resil_keyed_throttle_report(th, &h->th,
				    RESIL_THROTTLE_ACCEPTED);
			h->held = 0;
			return err;
		}
		h->held |= 2u;
		h->t0 = resil_clock_now(&p->clock);
	}
	if (br != NULL) {
		err = key_of(g, RESIL_KEYED_BREAKER, args, inv, NULL, kb, &key,
		    &len, out);
		if (err == RESIL_OK &&
		    (err = resil_keyed_breaker_acquire(br, key, len, &h->br)) !=
		        RESIL_OK)
			(void)refuse(
			    out, err, "breaker", (int)RESIL_BREAKER_OPEN);
		if (err != RESIL_OK) {
			if (h->held & 2u)
				(void)resil_keyed_bulkhead_release(bh, &h->bh);
			if (h->held & 4u)
				(void)resil_keyed_throttle_report(th, &h->th,
				    RESIL_THROTTLE_ACCEPTED);
			h->held = 0;
			return err;
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
 * the pipeline has a keyed throttle or a key is paused (a hold of the
 * settings). */
static int
method_prio(const kcall *kc)
{
	unsigned st;
	settings *g;
	int prio;

	if (kc->p->keyed->fam[RESIL_KEYED_THROTTLE] == NULL &&
	    RESIL__LIKELY(resil__load64(&kc->p->keyed->kp.live) == 0))
		return 0; /* no keyed throttle, no key paused */
	g = conf_hold(kc->p, &st);
	prio = kc->h != NULL ? resolve(g, kc->h)->prio : g->dflt.prio;
	conf_drop(g);
	return prio;
}

/* gate_breaker()'s key by draw() (a composite joined on this frame's
 * stack, kept off the single key's frame) and its breaker's permit. */
static __attribute__((noinline)) resil_err
breaker_drawn(const kcall *kc, struct resil__kgate *g, resil_keyed_permit *pm,
    resil_result *out)
{
	const kspec *s = &g->spec[RESIL_KEYED_BREAKER];
	char kb[RESIL_KEYED_MAX_KEY_LEN]; /* a composite key, joined */
	const void *key;
	size_t len;
	resil_err err;

	if (draw(s, kc->args, kc->inv, NULL, kb, sizeof(kb), &key, &len) !=
	    RESIL_OK)
		return too_long(out, s, kg_kind[RESIL_KEYED_BREAKER], len);
	err = resil_keyed_breaker_acquire(
	    g->fam[RESIL_KEYED_BREAKER], key, len, pm);
	if (err != RESIL_OK)
		return refuse(out, err, "breaker", (int)RESIL_BREAKER_OPEN);
	return RESIL_OK;
}

/* The gate's common case (g->br_only: a breaker family alone, its key
 * drawn per call): the key drawn, its breaker's permit, the call, the
 * outcome recorded; nothing else asked or held. An invoke's run is the
 * driver's body (no re-entry, nothing on this thread to mark). */
static resil_err
gate_breaker(const kcall *kc, struct resil__kgate *g, resil_result *out)
{
	const kspec *s = &g->spec[RESIL_KEYED_BREAKER];
	resil_keyed *br = g->fam[RESIL_KEYED_BREAKER];
	const resil_invocation *inv = kc->inv;
	resil_keyed_permit pm;
	resil_err err;

	if ((s->nparts <= 1 && s->part[0].src == KS_ARGUMENT &&
	        inv != NULL && s->part[0].index < inv->narguments &&
	        inv->arguments != NULL &&
	        inv->arguments[s->part[0].index] != NULL &&
	        inv->arguments[s->part[0].index][0] != '\0')) {
		/* arguments[N], the usual key: read in place. */
		const char *t = inv->arguments[s->part[0].index];

		err = resil_keyed_breaker_acquire(br, t, strlen(t), &pm);
		if (RESIL__UNLIKELY(err != RESIL_OK))
			return refuse(out, err, "breaker", (int)RESIL_BREAKER_OPEN);
	} else if ((err = breaker_drawn(kc, g, &pm, out)) != RESIL_OK)
		return err;
	err = kc->efn != NULL ? kc->run(kc, out) : run_inner(kc, out);
	if (RESIL__LIKELY(err == RESIL_OK && out->err == RESIL_OK &&
	        out->source == RESIL_SOURCE_LIVE))
		(void)resil_keyed_breaker_record(br, &pm, RESIL_OUTCOME_SUCCESS);
	else if (outcome_of(err, out) == RESIL_OUTCOME_FAILURE)
		(void)resil_keyed_breaker_record(br, &pm, RESIL_OUTCOME_FAILURE);
	else
		(void)resil_keyed_breaker_release(br, &pm);
	return err;
}

static resil_err
gate(const kcall *kc, resil_result *out)
{
	resil__kheld h;
	resil_err err;

	if (RESIL__LIKELY(kc->p->keyed->br_only))
		return gate_breaker(kc, kc->p->keyed, out);
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

resil_err
resil__keyed_invoke_ex(resil_pipeline *p, const struct resil_method *h,
    const resil_invocation *inv, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out, resil__keyed_run run)
{
	kcall kc = { p, h, &inv->args, inv, NULL, fn, ctx, run };

	if (RESIL__UNLIKELY(inv->args.method == NULL || fn == NULL ||
	        out == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(!resil__keyed_gated(p)))
		return run(&kc, out); /* the gate's own call */
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
	unsigned k;

	if (g == NULL)
		return 0;
	for (k = 0; k < RESIL_KEYED_THROTTLE; k++)
		if (g->fam[k] != NULL && g->spec[k].src == KS_HOST)
			return 1;
	return 0;
}

/* g's family of kind k when its key has the host (asked per attempt). */
static resil_keyed *
host_fam(const struct resil__kgate *g, unsigned k)
{
	return g->spec[k].src == KS_HOST ? g->fam[k] : NULL;
}

resil_err
resil__keyed_host_admit(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, const char *host, resil__khost *kh,
    unsigned *kind)
{
	struct resil__kgate *g = p->keyed;
	resil_keyed *rl = host_fam(g, RESIL_KEYED_RATELIMIT);
	resil_keyed *bh = host_fam(g, RESIL_KEYED_BULKHEAD);
	resil_keyed *br = host_fam(g, RESIL_KEYED_BREAKER);
	char kb[RESIL_KEYED_MAX_KEY_LEN]; /* a composite key, joined */
	const char *h = host != NULL ? host : "";
	const void *key;
	size_t len;
	resil_err err;

	kh->held = 0;
	if (rl != NULL) {
		uint64_t after = 0;

		*kind = RESIL_KEYED_RATELIMIT;
		err = key_of(g, RESIL_KEYED_RATELIMIT, args, inv, h, kb, &key,
		    &len, NULL);
		/* Issue 41 (turn 4): the endpoint's pushback paused it. */
		if (err == RESIL_OK &&
		    RESIL__UNLIKELY(resil__load64(&g->kp.live) != 0) &&
		    paused(p, key, len, inv, 0))
			return RESIL_E_LIMITED;
		if (err != RESIL_OK ||
		    (err = resil__kfleet_acquire(g, key, len, &after)) !=
		        RESIL_OK)
			return err;
	}
	if (bh != NULL) {
		*kind = RESIL_KEYED_BULKHEAD;
		err = key_of(g, RESIL_KEYED_BULKHEAD, args, inv, h, kb, &key,
		    &len, NULL);
		if (err != RESIL_OK ||
		    (err = resil_keyed_bulkhead_try_acquire(
		         bh, key, len, &kh->bh)) != RESIL_OK)
			return err;
		kh->held |= 2u;
		kh->t0 = resil_clock_now(&p->clock);
	}
	if (br != NULL) {
		*kind = RESIL_KEYED_BREAKER;
		err = key_of(g, RESIL_KEYED_BREAKER, args, inv, h, kb, &key,
		    &len, NULL);
		if (err != RESIL_OK ||
		    (err = resil_keyed_breaker_acquire(
		         br, key, len, &kh->br)) != RESIL_OK) {
			if (kh->held & 2u)
				(void)resil_keyed_bulkhead_release(bh, &kh->bh);
			kh->held = 0;
			return err;
		}
		kh->held |= 1u;
	}
	return RESIL_OK;
}

void
resil__keyed_host_end(resil_pipeline *p, resil__khost *kh, resil_outcome o)
{
	struct resil__kgate *g = p->keyed;

	if (kh->held & 1u) {
		resil_keyed *br = g->fam[RESIL_KEYED_BREAKER];

		if (o == RESIL_OUTCOME_IGNORED)
			(void)resil_keyed_breaker_release(br, &kh->br);
		else
			(void)resil_keyed_breaker_record(br, &kh->br, o);
	}
	if (kh->held & 2u) {
		resil_keyed *bh = g->fam[RESIL_KEYED_BULKHEAD];

		/* An abandoned attempt (a cancelled call, a lost fork) or
		 * the server's pushback: the slot given back uncounted. */
		if (o == RESIL_OUTCOME_IGNORED)
			(void)resil_keyed_bulkhead_release(bh, &kh->bh);
		else
			(void)resil_keyed_bulkhead_complete(bh, &kh->bh, o,
			    resil_clock_now(&p->clock) - kh->t0);
	}
	kh->held = 0;
}

/* ---- the server's pushback for a key (issue 41, turn 4) ---- */

int
resil__keyed_pushback(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, const char *host, uint64_t pause_ns,
    uint64_t now, int drain, uint64_t *until, uint64_t *drained, char *note,
    size_t cap)
{
	struct resil__kgate *g = p->keyed;
	resil_keyed *rl = g != NULL ? g->fam[RESIL_KEYED_RATELIMIT] : NULL;
	char kb[RESIL_KEYED_MAX_KEY_LEN]; /* a composite key, joined */
	resil_keyed_handle kh;
	const void *key;
	size_t len;
	int kept = 1;

	*until = 0;
	*drained = UINT64_MAX;
	note[0] = '\0';
	if (rl == NULL)
		return 0;
	if (g->spec[RESIL_KEYED_RATELIMIT].src != KS_HOST)
		host = NULL; /* a key per call */
	else if (host == NULL)
		return 0; /* a key with the host, an attempt without one */
	if (kg_cur != NULL && kg_cur->p == p) {
		/* The gate's call on this thread: its request (the blocking
		 * driver's machine keeps no invocation). */
		args = kg_cur->args;
		inv = kg_cur->inv;
	}
	if (draw(&g->spec[RESIL_KEYED_RATELIMIT], args, inv, host, kb,
	        sizeof(kb), &key, &len) != RESIL_OK)
		return 0; /* not reached: the gate refused such a call */
	if (pause_ns != 0) {
		uint64_t u = now + pause_ns < now ? UINT64_MAX : now + pause_ns;

		kept = resil__kpause_set(p, key, len, u, now);
		if (kept)
			*until = u;
		else
			(void)snprintf(note, cap,
			    ", key not paused (%u keys paused already)",
			    (unsigned)RESIL__KPAUSE_MAX);
		/* The fleet limiter of the family: every member pauses the
		 * key (one round trip; a member deciding locally has
		 * nobody to tell). */
		if (RESIL__UNLIKELY(g->frl != NULL))
			(void)resil_fleet_limit_pause_key(
			    g->frl, key, len, pause_ns, NULL);
	}
	/* ratelimit.drain_on_throttled per key: the key's own permits, not
	 * a fleet's (as the lone limiter's). */
	if (g->frl == NULL && (drain || g->rl_drain || !kept) &&
	    resil_keyed_get(rl, key, len, &kh) == RESIL_OK) {
		if (kh.instance.ratelimit != NULL)
			(void)resil_ratelimit_drain(kh.instance.ratelimit, drained);
		(void)resil_keyed_put(rl, &kh);
	}
	return 1;
}

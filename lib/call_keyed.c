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
 * and completes its bulkhead slot.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/pipeline_keyed.h>

#include "internal.h"
#include "pipeline_internal.h"
#include "call_keyed.h"
#include "pipeline_settings.h"

enum ksrc { KS_METHOD, KS_ARGS, KS_ARGUMENT, KS_ATTACHMENT };

typedef struct kspec {
	enum ksrc src;
	unsigned index; /* KS_ARGUMENT */
	char name[129]; /* KS_ATTACHMENT */
} kspec;

struct resil__kgate {
	resil_keyed *fam[3];
	kspec spec[3];
};

/* The pipeline whose gate this thread is entering: the next check of it
 * (the gate's own call) goes past the gate, once. */
static RESIL__TLS const resil_pipeline *kg_inside;

static const char kg_missing[1] = {0};

static resil_err
parse_spec(const char *kind, const char *s, kspec *out, resil_diag *diag)
{
	memset(out, 0, sizeof(*out));
	if (strcmp(s, "method") == 0) {
		out->src = KS_METHOD;
		return RESIL_OK;
	}
	if (strcmp(s, "args") == 0) {
		out->src = KS_ARGS;
		return RESIL_OK;
	}
	if (strncmp(s, "arguments[", 10) == 0) {
		const char *d = s + 10;
		unsigned n = 0;
		size_t nd = 0;

		while (*d >= '0' && *d <= '9' && nd < 4) {
			n = n * 10 + (unsigned)(*d - '0');
			d++;
			nd++;
		}
		if (nd > 0 && n <= 255 && strcmp(d, "]") == 0) {
			out->src = KS_ARGUMENT;
			out->index = n;
			return RESIL_OK;
		}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: \"%s\": the index of arguments[N] must be 0..255",
		    kind, s);
	}
	if (strncmp(s, "attachment:", 11) == 0) {
		size_t n = strlen(s + 11);

		if (n >= 1 && n < sizeof(out->name)) {
			out->src = KS_ATTACHMENT;
			memcpy(out->name, s + 11, n + 1);
			return RESIL_OK;
		}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: \"%s\": an attachment's name is 1..128 bytes",
		    kind, s);
	}
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s.key: \"%s\" is not a key source (method, args, arguments[N], "
	    "attachment:NAME)",
	    kind, s);
}

resil_err
resil_pipeline_set_keyed(resil_pipeline *p, const char *spec,
    const resil_keyed_config *cfg, resil_diag *diag)
{
	const char *kind;
	struct resil__kgate *g;
	resil_keyed *k = NULL;
	kspec ks;
	resil_err err;

	if (p == NULL || spec == NULL || cfg == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed: NULL pipeline, spec or config");
	if ((unsigned)cfg->kind > (unsigned)RESIL_KEYED_BULKHEAD)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.kind: %u is not a kind", (unsigned)cfg->kind);
	kind = resil_keyed_kind_name(cfg->kind);
	err = parse_spec(kind, spec, &ks, diag);
	if (err != RESIL_OK)
		return err;
	if (p->keyed != NULL && p->keyed->fam[cfg->kind] != NULL)
		return resil__diagf(diag, RESIL_E_MISUSE,
		    "%s.key: the pipeline has a %s family already", kind, kind);
	err = resil_keyed_new(&k, cfg, diag);
	if (err != RESIL_OK) {
		char what[32];

		(void)snprintf(what, sizeof(what), "%s.key", kind);
		return resil__diag_prefix(diag, err, what);
	}
	g = p->keyed;
	if (g == NULL) {
		g = resil__calloc(&p->alloc, sizeof(*g));
		if (g == NULL) {
			resil_keyed_free(k);
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "%s.key: out of memory", kind);
		}
		p->keyed = g;
	}
	g->fam[cfg->kind] = k;
	g->spec[cfg->kind] = ks;
	p->slow = 1;
	/* Before the first call (documented): the settings in force lose
	 * their machine phase, as resil__settings_build() does after. */
	resil__settings_no_phase(p->cur);
	return RESIL_OK;
}

resil_keyed *
resil_pipeline_keyed(resil_pipeline *p, resil_keyed_kind k)
{
	if (p == NULL || p->keyed == NULL ||
	    (unsigned)k > (unsigned)RESIL_KEYED_BULKHEAD)
		return NULL;
	return p->keyed->fam[k];
}

void
resil__keyed_free(resil_pipeline *p)
{
	unsigned i;

	if (p->keyed == NULL)
		return;
	for (i = 0; i < 3; i++)
		resil_keyed_free(p->keyed->fam[i]);
	resil__free(&p->alloc, p->keyed, sizeof(*p->keyed));
	p->keyed = NULL;
}

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

static resil_err
run_inner(const kcall *kc, resil_result *out)
{
	resil_err err;

	kg_inside = kc->p;
	err = kc->run(kc, out); /* the driver's own entry, again */
	kg_inside = NULL; /* consumed already unless the call was refused */
	return err;
}

static resil_err
gate(const kcall *kc, resil_result *out)
{
	struct resil__kgate *g = kc->p->keyed;
	resil_keyed *rl = g->fam[RESIL_KEYED_RATELIMIT];
	resil_keyed *bh = g->fam[RESIL_KEYED_BULKHEAD];
	resil_keyed *br = g->fam[RESIL_KEYED_BREAKER];
	resil_keyed_permit bp, pp;
	const void *key;
	size_t len;
	uint64_t t0 = 0;
	resil_err err;
	resil_outcome o;

	if (rl != NULL) {
		uint64_t after = 0;

		draw(&g->spec[RESIL_KEYED_RATELIMIT], kc->args, kc->inv, &key,
		    &len);
		err = resil_keyed_ratelimit_try_acquire(rl, key, len, 1, &after);
		if (err != RESIL_OK)
			return refuse(out, err, "rate limiter", -1);
	}
	if (bh != NULL) {
		draw(&g->spec[RESIL_KEYED_BULKHEAD], kc->args, kc->inv, &key,
		    &len);
		err = resil_keyed_bulkhead_try_acquire(bh, key, len, &pp);
		if (err != RESIL_OK)
			return refuse(out, err, "bulkhead", -1);
		t0 = resil_clock_now(&kc->p->clock);
	}
	if (br != NULL) {
		draw(&g->spec[RESIL_KEYED_BREAKER], kc->args, kc->inv, &key,
		    &len);
		err = resil_keyed_breaker_acquire(br, key, len, &bp);
		if (err != RESIL_OK) {
			if (bh != NULL)
				(void)resil_keyed_bulkhead_release(bh, &pp);
			return refuse(out, err, "breaker",
			    (int)RESIL_BREAKER_OPEN);
		}
	}
	err = run_inner(kc, out);
	o = outcome_of(err, out);
	if (br != NULL) {
		if (o == RESIL_OUTCOME_IGNORED)
			(void)resil_keyed_breaker_release(br, &bp);
		else
			(void)resil_keyed_breaker_record(br, &bp, o);
	}
	if (bh != NULL)
		(void)resil_keyed_bulkhead_complete(bh, &pp, o,
		    resil_clock_now(&kc->p->clock) - t0);
	return err;
}

resil_err
resil__keyed_call(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run)
{
	kcall kc = {p, h, args, NULL, fn, NULL, ctx, run};

	return gate(&kc, out);
}

resil_err
resil__keyed_invoke(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out,
    resil__keyed_run run)
{
	kcall kc = {p, h, args, inv, NULL, fn, ctx, run};

	return gate(&kc, out);
}

resil_err
resil__keyed_refuse_machine(resil_result *out)
{
	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	out->source = RESIL_SOURCE_UNAVAILABLE;
	out->error_name = resil_err_name(RESIL_E_INVAL);
	(void)snprintf(out->message, sizeof(out->message),
	    "a pipeline with keyed families (resil_pipeline_set_keyed) runs "
	    "through resil_pipeline_call or resil_pipeline_invoke: the call "
	    "machine does not draw keys yet");
	return RESIL_E_INVAL;
}

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

#include "call_keyed.h"
#include "internal.h"
#include "keyed_spec.h"
#include "pipeline_internal.h"
#include "pipeline_settings.h"

struct resil__kgate {
	resil_keyed *fam[3];
	kspec spec[3];
	/* Families made from the pipeline's configuration (keyed[k], the
	 * text's KIND.key): what made them, for a reload to compare. */
	uint8_t from_cfg[3];
	resil_keyed_config kc[3]; /* overrides NULL */
	char *fp[3];              /* the key, bounds and overrides, as text */
};

/* The pipeline whose gate this thread is entering: the next check of it
 * (the gate's own call) goes past the gate, once. */
static RESIL__TLS const resil_pipeline *kg_inside;

static const char kg_missing[1] = {0};

/* A family of cfg->kind drawn by spec into p's gate. */
static resil_err
add_family(resil_pipeline *p, const char *spec, const resil_keyed_config *cfg,
    int from_cfg, resil_diag *diag)
{
	const char *kind;
	struct resil__kgate *g;
	resil_keyed *k = NULL;
	kspec ks;
	resil_err err;

	if ((unsigned)cfg->kind > (unsigned)RESIL_KEYED_BULKHEAD)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.kind: %u is not a kind", (unsigned)cfg->kind);
	kind = resil_keyed_kind_name(cfg->kind);
	err = resil__keyed_spec(kind, spec, &ks, diag);
	if (err != RESIL_OK)
		return err;
	if (ks.src == KS_HOST && p->sel == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: host is the endpoint the selector chose: the "
		    "pipeline has no selector",
		    kind);
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
	g->from_cfg[cfg->kind] = (uint8_t)from_cfg;
	p->slow = 1;
	return RESIL_OK;
}

resil_err
resil_pipeline_set_keyed(resil_pipeline *p, const char *spec,
    const resil_keyed_config *cfg, resil_diag *diag)
{
	resil_err err;

	if (p == NULL || spec == NULL || cfg == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed: NULL pipeline, spec or config");
	err = add_family(p, spec, cfg, 0, diag);
	if (err != RESIL_OK)
		return err;
	/* Before the first call (documented): the settings in force lose
	 * their simple phase, as resil__settings_build() does after: the
	 * call machine gates the call in its start (start_other()). */
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
	for (i = 0; i < 3; i++) {
		resil_keyed_free(p->keyed->fam[i]);
		resil__strfree(&p->alloc, p->keyed->fp[i]);
	}
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

/* The call's admission by its keys: a rate limiter permit, a bulkhead
 * slot, a breaker permit (those held go in *h); a refusal answers out. */
static resil_err
admit(resil_pipeline *p, const resil_args *args, const resil_invocation *inv,
    resil__kheld *h, resil_result *out)
{
	struct resil__kgate *g = p->keyed;
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
		err = resil_keyed_ratelimit_try_acquire(rl, key, len, 1, &after);
		if (err != RESIL_OK)
			return refuse(out, err, "rate limiter", -1);
	}
	if (bh != NULL) {
		draw(&g->spec[RESIL_KEYED_BULKHEAD], args, inv, &key, &len);
		err = resil_keyed_bulkhead_try_acquire(bh, key, len, &h->bh);
		if (err != RESIL_OK)
			return refuse(out, err, "bulkhead", -1);
		h->held |= 2u;
		h->t0 = resil_clock_now(&p->clock);
	}
	if (br != NULL) {
		draw(&g->spec[RESIL_KEYED_BREAKER], args, inv, &key, &len);
		err = resil_keyed_breaker_acquire(br, key, len, &h->br);
		if (err != RESIL_OK) {
			if (h->held & 2u)
				(void)resil_keyed_bulkhead_release(bh, &h->bh);
			h->held = 0;
			return refuse(out, err, "breaker",
			    (int)RESIL_BREAKER_OPEN);
		}
		h->held |= 1u;
	}
	return RESIL_OK;
}

/* The call's outcome into what *h holds (IGNORED: given back). */
static void
settle(resil_pipeline *p, resil__kheld *h, resil_outcome o)
{
	struct resil__kgate *g = p->keyed;

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

static resil_err
gate(const kcall *kc, resil_result *out)
{
	resil__kheld h;
	resil_err err;

	err = admit(kc->p, kc->args, kc->inv, &h, out);
	if (err != RESIL_OK)
		return err;
	err = run_inner(kc, out);
	settle(kc->p, &h, outcome_of(err, out));
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

/* ---- the call machine (lib/call.c) ---- */

resil_err
resil__keyed_machine_admit(resil_pipeline *p, const resil_args *args,
    const resil_invocation *inv, resil__kheld *h, resil_result *out)
{
	return admit(p, args, inv, h, out);
}

void
resil__keyed_machine_end(
    resil_pipeline *p, resil__kheld *h, int cancelled, const resil_result *out)
{
	settle(p, h,
	    cancelled ? RESIL_OUTCOME_IGNORED : outcome_of(out->err, out));
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

		err =
		    resil_keyed_ratelimit_try_acquire(rl, key, len, 1, &after);
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

/* ---- families named by the configuration (resil_pipeline_config.keyed,
 * the text's KIND.key) ---- */

static const char *const kind_names[3] = { "breaker", "ratelimit",
	"bulkhead" };

/* The family configuration cfg names for kind k, on p's clock. */
static void
family_config(const resil_pipeline *p, const resil_pipeline_config *cfg,
    unsigned k, resil_keyed_config *kc)
{
	resil_keyed_config_init(kc);
	kc->kind = (resil_keyed_kind)k;
	if (cfg->keyed[k].max_keys != 0)
		kc->max_keys = cfg->keyed[k].max_keys;
	if (cfg->keyed[k].max_key_len != 0)
		kc->max_key_len = cfg->keyed[k].max_key_len;
	kc->breaker = cfg->breaker;
	kc->ratelimit = cfg->ratelimit;
	kc->bulkhead = cfg->bulkhead;
	kc->breaker.clock = &p->clock;
	kc->ratelimit.clock = &p->clock;
	kc->bulkhead.clock = &p->clock;
	kc->alloc = &p->alloc;
}

/* The key, bounds and overrides of cfg->keyed[k] as text (NULL: out of
 * memory): a reload repeats them or is refused. */
static char *
fingerprint(
    const resil_pipeline *p, const resil_pipeline_config *cfg, unsigned k)
{
	size_t i, len = 64 + strlen(cfg->keyed[k].key), at;
	char *s;

	for (i = 0; i < cfg->keyed[k].n_overrides; i++)
		len += 96 + cfg->keyed[k].overrides[i].key_len;
	s = resil__alloc(&p->alloc, len);
	if (s == NULL)
		return NULL;
	at = (size_t)snprintf(s, len, "%s\n%u %u\n", cfg->keyed[k].key,
	    (unsigned)cfg->keyed[k].max_keys,
	    (unsigned)cfg->keyed[k].max_key_len);
	for (i = 0; i < cfg->keyed[k].n_overrides && at < len; i++) {
		const resil_keyed_override *o = &cfg->keyed[k].overrides[i];

		at += (size_t)snprintf(s + at, len - at,
		    "%zu:%.*s %u %llu %u %u\n", o->key_len, (int)o->key_len,
		    (const char *)o->key, (unsigned)o->rate,
		    (unsigned long long)o->period_ns, (unsigned)o->burst,
		    (unsigned)o->max_concurrent);
	}
	/* Exactly strlen + 1 bytes, as resil__strfree gives back. */
	{
		char *t = resil__strdup(&p->alloc, s);

		resil__free(&p->alloc, s, len);
		return t;
	}
}

resil_err
resil__keyed_setup(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
	unsigned k;
	resil_err err;

	for (k = 0; k < 3; k++) {
		resil_keyed_config kc;
		char *fp;

		if (cfg->keyed[k].key == NULL ||
		    !resil__keyed_stage_on(cfg, k))
			continue;
		family_config(p, cfg, k, &kc);
		kc.overrides = cfg->keyed[k].overrides;
		kc.n_overrides = cfg->keyed[k].n_overrides;
		fp = fingerprint(p, cfg, k);
		if (fp == NULL)
			return resil__diagf(diag, RESIL_E_NOMEM,
			    "%s.key: out of memory", kind_names[k]);
		err = add_family(p, cfg->keyed[k].key, &kc, 1, diag);
		if (err != RESIL_OK) {
			resil__strfree(&p->alloc, fp);
			return err;
		}
		kc.overrides = NULL;
		kc.n_overrides = 0;
		p->keyed->kc[k] = kc;
		p->keyed->fp[k] = fp;
	}
	return RESIL_OK;
}

void
resil__keyed_strip(const resil_pipeline *p, resil_pipeline_config *eff)
{
	const struct resil__kgate *g = p->keyed;

	if (g == NULL)
		return;
	if (g->from_cfg[RESIL_KEYED_BREAKER])
		eff->breaker_enabled = 0;
	if (g->from_cfg[RESIL_KEYED_RATELIMIT])
		eff->ratelimit_enabled = 0;
	if (g->from_cfg[RESIL_KEYED_BULKHEAD])
		eff->bulkhead_enabled = 0;
}

/* Whether cfg's stage of kind k configures instances as kc's do. */
static int
same_stage(
    const resil_pipeline_config *cfg, unsigned k, const resil_keyed_config *kc)
{
	if (k == RESIL_KEYED_BREAKER)
		return resil__same_breaker(&cfg->breaker, &kc->breaker);
	if (k == RESIL_KEYED_RATELIMIT)
		return resil__same_ratelimit(&cfg->ratelimit, &kc->ratelimit);
	return resil__same_bulkhead(&cfg->bulkhead, &kc->bulkhead);
}

resil_err
resil__keyed_reload_check(const resil_pipeline *p,
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	const struct resil__kgate *g = p->keyed;
	unsigned k;

	for (k = 0; k < 3; k++) {
		const char *name = kind_names[k];
		int from_cfg = g != NULL && g->from_cfg[k];
		char *fp;
		int same;

		if (cfg->keyed[k].key == NULL && !from_cfg)
			continue; /* none, or the C API's: kept */
		if (cfg->keyed[k].key == NULL || !from_cfg ||
		    !resil__keyed_stage_on(cfg, k))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: cannot change by reload (a keyed family "
			    "is made when the pipeline is created; build a "
			    "new pipeline to change it)",
			    name);
		fp = fingerprint(p, cfg, k);
		if (fp == NULL)
			return resil__diagf(diag, RESIL_E_NOMEM,
			    "%s.key: out of memory", name);
		same = strcmp(fp, g->fp[k]) == 0;
		resil__strfree(&p->alloc, fp);
		if (!same)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: cannot change by reload (its source, "
			    "bounds and overrides are fixed when the pipeline "
			    "is created; build a new pipeline to change them)",
			    name);
		if (!same_stage(cfg, k, &g->kc[k]))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: the %s.* settings cannot change by "
			    "reload "
			    "(they are every key's instance's; build a new "
			    "pipeline to change them)",
			    name, name);
	}
	return RESIL_OK;
}

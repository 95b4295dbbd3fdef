/*
 * Issue 41: a pipeline's keyed families, made and kept: given in C
 * (resil_pipeline_set_keyed), named by the configuration
 * (resil_pipeline_config.keyed, the text's KIND.key: made by
 * resil_pipeline_new, checked by a reload), freed with the pipeline. The
 * gate that asks them is lib/call_keyed.c.
 */
#include <stdio.h>
#include <string.h>

#include <resil/pipeline_keyed.h>

#include "call_keyed.h"
#include "call_overload.h"
#include "internal.h"
#include "keyed_gate.h"
#include "pipeline_internal.h"
#include "pipeline_keyed_fleet.h"
#include "pipeline_settings.h"
#include "shm_internal.h"

/* A family of cfg->kind drawn by spec into p's gate. */
static resil_err
add_family(resil_pipeline *p, const char *spec, const resil_keyed_config *cfg,
    int from_cfg, const char *shared, resil_diag *diag)
{
	const char *kind;
	struct resil__kgate *g;
	resil_keyed *k = NULL;
	kspec ks;
	resil_err err;

	if ((unsigned)cfg->kind > (unsigned)RESIL_KEYED_THROTTLE)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.kind: %u is not a kind", (unsigned)cfg->kind);
	kind = resil_keyed_kind_name(cfg->kind);
	err = resil__keyed_spec(kind, spec, &ks, diag);
	if (err != RESIL_OK)
		return err;
	ks.max_len = cfg->max_key_len; /* a composite's bound at the call */
	if (ks.src == KS_HOST && p->sel == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: host is the endpoint the selector chose: the "
		    "pipeline has no selector",
		    kind);
	if (p->keyed != NULL && p->keyed->fam[cfg->kind] != NULL)
		return resil__diagf(diag, RESIL_E_MISUSE,
		    "%s.key: the pipeline has a %s family already", kind,
		    kind);
	/* h3/kshm: breaker.key.shared (h3/kshm2: ratelimit.key.shared), the
	 * family in a region. */
	if (shared != NULL)
		err = resil__shm_keyed_owned(shared, cfg, &k, diag);
	else
		err = resil_keyed_new(&k, cfg, diag);
	if (err != RESIL_OK) {
		char what[32];

		(void)snprintf(what, sizeof(what), "%s.key%s", kind,
		    shared != NULL ? ".shared" : "");
		return resil__diag_prefix(diag, err, what);
	}
	g = p->keyed;
	if (g == NULL) {
		g = resil__calloc(&p->alloc, sizeof(*g));
		if (g == NULL) {
			resil_keyed_free(k);
			return resil__diagf(diag, RESIL_E_NOMEM,
			    "%s.key: out of memory", kind);
		}
		p->keyed = g;
	}
	g->fam[cfg->kind] = k;
	g->spec[cfg->kind] = ks;
	g->from_cfg[cfg->kind] = (uint8_t)from_cfg;
	if (cfg->kind == RESIL_KEYED_RATELIMIT) /* issue 41 (turn 4) */
		g->rl_drain = cfg->ratelimit.drain_on_throttled != 0;
	/* h4/kgate: the gate's short path, while the breaker's family is
	 * the only one and its key is drawn per call. */
	g->br_only = g->fam[RESIL_KEYED_BREAKER] != NULL &&
	    g->spec[RESIL_KEYED_BREAKER].src != KS_HOST &&
	    g->fam[RESIL_KEYED_RATELIMIT] == NULL &&
	    g->fam[RESIL_KEYED_BULKHEAD] == NULL &&
	    g->fam[RESIL_KEYED_THROTTLE] == NULL;
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
	err = add_family(p, spec, cfg, 0, NULL, diag);
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
	    (unsigned)k > (unsigned)RESIL_KEYED_THROTTLE)
		return NULL;
	return p->keyed->fam[k];
}

void
resil__keyed_free(resil_pipeline *p)
{
	unsigned i;

	if (p->keyed == NULL)
		return;
	for (i = 0; i < RESIL_KEYED_KINDS; i++) {
		resil_keyed_free(p->keyed->fam[i]);
		resil__strfree(&p->alloc, p->keyed->fp[i]);
	}
	resil__kpause_free(p); /* issue 41 (turn 4) */
	resil__free(&p->alloc, p->keyed, sizeof(*p->keyed));
	p->keyed = NULL;
}

/* ---- families named by the configuration (resil_pipeline_config.keyed,
 * the text's KIND.key) ---- */

static const char *const kind_names[RESIL_KEYED_KINDS] = { "breaker",
	"ratelimit", "bulkhead", "throttle" };

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
	else if (cfg->keyed[k].shared != NULL) /* h3/kshm: kept in shm */
		kc->max_key_len = RESIL_SHM_KEYED_KEY_MAX;
	kc->breaker = cfg->breaker;
	kc->ratelimit = cfg->ratelimit;
	kc->bulkhead = cfg->bulkhead;
	kc->throttle = cfg->throttle;
	kc->breaker.clock = &p->clock;
	kc->ratelimit.clock = &p->clock;
	kc->bulkhead.clock = &p->clock;
	kc->throttle.clock = &p->clock;
	kc->alloc = &p->alloc;
}

/* The key, bounds and overrides of cfg->keyed[k] as text (NULL: out of
 * memory): a reload repeats them or is refused. */
static char *
fingerprint(
    const resil_pipeline *p, const resil_pipeline_config *cfg, unsigned k)
{
	const char *sh =
	    cfg->keyed[k].shared != NULL ? cfg->keyed[k].shared : "";
	size_t i, len = 64 + strlen(cfg->keyed[k].key) + strlen(sh), at;
	char *s;

	for (i = 0; i < cfg->keyed[k].n_overrides; i++)
		len += 96 + cfg->keyed[k].overrides[i].key_len;
	s = resil__alloc(&p->alloc, len);
	if (s == NULL)
		return NULL;
	at = (size_t)snprintf(s, len, "%s\n%u %u %s\n", cfg->keyed[k].key,
	    (unsigned)cfg->keyed[k].max_keys,
	    (unsigned)cfg->keyed[k].max_key_len, sh);
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

	for (k = 0; k < RESIL_KEYED_KINDS; k++) {
		resil_keyed_config kc;
		char *fp;

		if (cfg->keyed[k].key == NULL ||
		    !resil__keyed_stage_on(cfg, k))
			continue;
		family_config(p, cfg, k, &kc);
		kc.overrides = cfg->keyed[k].overrides;
		kc.n_overrides = cfg->keyed[k].n_overrides;
		resil__kfleet_family(cfg, k, &kc); /* issue 41 (h3) */
		fp = fingerprint(p, cfg, k);
		if (fp == NULL)
			return resil__diagf(diag, RESIL_E_NOMEM,
			    "%s.key: out of memory", kind_names[k]);
		err = add_family(
		    p, cfg->keyed[k].key, &kc, 1, cfg->keyed[k].shared, diag);
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
	if (g->from_cfg[RESIL_KEYED_THROTTLE])
		eff->throttle_enabled = 0;
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
	if (k == RESIL_KEYED_THROTTLE)
		return resil__same_throttle(&cfg->throttle, &kc->throttle);
	return resil__same_bulkhead(&cfg->bulkhead, &kc->bulkhead);
}

resil_err
resil__keyed_reload_check(const resil_pipeline *p,
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	const struct resil__kgate *g = p->keyed;
	unsigned k;

	for (k = 0; k < RESIL_KEYED_KINDS; k++) {
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

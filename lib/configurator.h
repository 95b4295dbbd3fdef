/*
 * Dubbo's override rules (configurators) for a consumer (issue 40): the
 * 2.7 override:// URLs of <root>/<service>/configurators and the 3.x YAML
 * rules of the config center, matched as Dubbo's AbstractConfigurator
 * matches them, applied to the pipeline through a reload (consumer keys)
 * and to the provider URLs before they are mapped (weight, disabled,
 * dubbo.tag, warmup). lib/configurator_yaml.c turns a YAML rule into the
 * override URLs Dubbo's ConfigParser makes of it. Used by the source's
 * thread (and attach, on the caller's thread, under the source's work
 * lock): not thread-safe by itself.
 */
#ifndef RESIL_CONFIGURATOR_H
#define RESIL_CONFIGURATOR_H

#include <resil/config.h>
#include <resil/pipeline.h>
#include <resil/source.h>

#include "pipeline_dry.h"
#include "source_internal.h"

/* The rule sets, in Dubbo's order of application (later over earlier). */
#define RESIL__OV_URLS 0 /* 2.7: <root>/<service>/configurators */
#define RESIL__OV_APP 1  /* 3.x: APPLICATION.configurators */
#define RESIL__OV_SVC 2  /* 3.x: [G:]SERVICE[:V].configurators */
#define RESIL__OV_NSETS 3

typedef struct resil__ov_rule {
	char *name; /* for events: the URL, or "KEY.configurators: URL" */
	resil__url u;
	int priority;
} resil__ov_rule;

/* The configuration functions (lib/config.c), given by
 * lib/source_attach.c: the source's rooms sit below config.c, which uses
 * them, so they reach it through these pointers only. */
typedef struct resil__ov_conf_ops {
	resil_err (*parse)(resil_config **out, const char *text,
	    const char *origin, const resil_allocator *alloc,
	    resil_diag *diag);
	resil_err (*set)(resil_config *conf, const char *key,
	    const char *value, resil_diag *diag);
	const resil_pipeline_config *(*pipeline)(const resil_config *conf);
	void (*free)(resil_config *conf);
	size_t (*count)(const resil_config *conf);
	resil_err (*entry)(
	    const resil_config *conf, size_t i, resil_config_setting *out);
} resil__ov_conf_ops;

typedef struct resil__overrides {
	resil__ov_rule *rules[RESIL__OV_NSETS];
	size_t n[RESIL__OV_NSETS];
	resil_pipeline *p;             /* borrowed; NULL: none attached */
	const resil__ov_conf_ops *ops; /* with p */
	char *base;                    /* the base configuration as text */
	uint64_t provider_gen; /* bumps when the provider-side rules change */
	/* Digests of the rules in force: all of them, and those with a
	 * provider key; resil__ov_set says which changed. */
	uint64_t sig_all, sig_provider;
	int changed_all, changed_provider;
} resil__overrides;

/* Who the rules are matched against, and where events go. */
typedef void (*resil__ov_emit_fn)(void *ctx, resil_source_event_type t,
    const char *node, const char *msg, size_t count);

typedef struct resil__ov_who {
	const resil_allocator *a;
	const char *service, *group, *version;
	const char *host;        /* this consumer's address */
	const char *application; /* NULL: none */
	resil__ov_emit_fn emit;
	void *ctx;
} resil__ov_who;

/* Replace rule set `set` with items: for RESIL__OV_URLS the node names
 * (URL-encoded override URLs), otherwise none or one YAML text. What
 * cannot be read is a BAD_OVERRIDE event and left out. RESIL_E_NOMEM
 * (the set is then empty). */
resil_err resil__ov_set(resil__overrides *ov, const resil__ov_who *w, int set,
    const char *const *items, size_t n, int decoded);

/* Reconfigure the attached pipeline: base + every consumer key of the
 * rules that match, each tried as a reload; events for each rule. */
void resil__ov_apply(resil__overrides *ov, const resil__ov_who *w);

/* The provider URL (decoded) with the provider keys of the matching rules
 * applied: 1 with a new string in *out, 0 when no rule changes it, -1
 * for out of memory. */
int resil__ov_provider(const resil__overrides *ov, const resil__ov_who *w,
    const char *decoded, char **out);

/* Attach p with base (copied as text; NULL: none). RESIL_E_NOMEM. */
resil_err resil__ov_attach(resil__overrides *ov, const resil__ov_who *w,
    resil_pipeline *p, const resil_config *base,
    const resil__ov_conf_ops *ops);

void resil__ov_free(resil__overrides *ov, const resil_allocator *a);

/* lib/source.c: attach p and base to src with ops (under the source's
 * work lock) and apply the rules in force. */
resil_err resil__source_attach(resil_registry_source *src, resil_pipeline *p,
    const resil_config *base, const resil__ov_conf_ops *ops, resil_diag *diag);

/* lib/configurator_yaml.c: the override URLs of a 3.x rule (Dubbo's
 * ConfigParser.parseConfigurators): *urls an array of *n new strings
 * (free each with resil__strfree and the array with
 * resil__free(a, urls, n * sizeof(char *))). RESIL_E_INVAL with the reason
 * in *why (libyaml's, with its line, or the field); RESIL_E_NOMEM. */
resil_err resil__ov_yaml(const resil_allocator *a, const char *text,
    char ***urls, size_t *n, resil_diag *why);

#endif /* RESIL_CONFIGURATOR_H */

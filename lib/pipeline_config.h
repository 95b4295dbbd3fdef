/*
 * A pipeline's configuration (lib/pipeline_config.c): the checks
 * resil_pipeline_new() and a reload make, the rules of a declared method,
 * which configuration text obeys too (lib/config.c reads method names with
 * them), and what a reload from text needs of a running pipeline. The
 * pipeline's private face to the configuration room above it. Never
 * installed.
 */
#ifndef RESIL_PIPELINE_CONFIG_H
#define RESIL_PIPELINE_CONFIG_H

#include <resil/pipeline.h>

/* Whether the n bytes at s are an identifier, [A-Za-z_$][A-Za-z0-9_$]*
 * (a method name's form). */
int resil__method_ident(const char *s, size_t n);

/* Whether the n bytes at s are a word that starts a stage key of the
 * configuration (service, timeout, mock, breaker, ...): never a method
 * name. */
int resil__method_reserved(const char *s, size_t n);

/* The rules every declared method obeys (resil_config_check_method()). */
resil_err resil__method_check(const resil_method_config *m, resil_diag *diag);

/* cfg is a configuration of this library's layout (not NULL, its size
 * the one it knows): RESIL_OK, or why not in diag. */
resil_err resil__pipeline_config_known(
    const resil_pipeline_config *cfg, resil_diag *diag);

/* cfg as resil_pipeline_new() accepts it: RESIL_OK, or the first thing
 * wrong in diag. */
/* Failfast, failsafe or failback on a pipeline without a selector (its
 * one implicit endpoint). */
int resil__one_endpoint_strategy(const resil_pipeline_config *cfg);

resil_err resil__pipeline_validate(
    const resil_pipeline_config *cfg, resil_diag *diag);

/* The key combinations of a configuration text (lib/config_check.c):
 * config.c records the keys concerned as it reads them, then checks the
 * built configuration once. */
typedef struct resil__combo_entry {
	int kind;
	unsigned line; /* 0: made by resil_config_set() */
	char key[96];
	char method[64];
} resil__combo_entry;

typedef struct resil__combo {
	resil__combo_entry e[16];
	size_t n;
} resil__combo;

void resil__combo_init(resil__combo *c);

/* Record key (method: the declared method it belongs to, or NULL) at
 * line when it is one of the keys the combinations concern. */
void resil__combo_key(
    resil__combo *c, const char *key, const char *method, unsigned line);

/* The combinations of the recorded keys in pc (built from the text at
 * origin; selector: the text has selector keys): RESIL_E_INVAL with
 * `origin:line: key: message` for one accepted and unused or
 * contradictory whatever the program adds; RESIL_OK otherwise, with a
 * note in diag ("origin:line: note: key: ...") for one that is unused
 * unless the program gives a selector (diag untouched when none). */
resil_err resil__combo_check(const resil__combo *c, const char *origin,
    const resil_pipeline_config *pc, int selector, resil_diag *diag);

/* Where a text reload's keys are, for its refusals (issue 38.10):
 * line(key, klen, ctx) is the line of the text's key (the first klen
 * bytes of key), or of the first key of its family (key.* or
 * <method>.key.*), 0 when the text sets none; origin is the text's. */
typedef struct resil__reload_text {
	const char *origin;
	unsigned (*line)(const char *key, size_t klen, void *ctx);
	void *ctx;
} resil__reload_text;

/* resil_pipeline_reload() of a configuration made from text t: a
 * refusal that names a key the text sets says its origin:line. */
resil_err resil__pipeline_reload_text(resil_pipeline *p,
    const resil_pipeline_config *cfg, const resil__reload_text *t,
    resil_diag *diag);

/* The allocator of p (a reload from text parses with it). */
const resil_allocator *resil__pipeline_allocator(const resil_pipeline *p);

#endif /* RESIL_PIPELINE_CONFIG_H */

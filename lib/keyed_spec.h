/*
 * Issue 41: a keyed family's key source (resil_pipeline_set_keyed()'s
 * spec, the text's KIND.key) and the check of the families a pipeline
 * configuration names (lib/keyed_spec.c): used by the gate
 * (lib/call_keyed.c), the text (lib/config_keyed.c) and the pipeline's
 * validation; it calls none of them. Never installed.
 */
#ifndef RESIL_KEYED_SPEC_H
#define RESIL_KEYED_SPEC_H

#include <resil/keyed.h>
#include <resil/pipeline.h>

#include "internal.h"

enum ksrc { KS_METHOD, KS_ARGS, KS_ARGUMENT, KS_ATTACHMENT, KS_HOST };

/* The parts of a composite key at most (KIND.key=method+host). */
#define RESIL__KEY_PARTS 4u

/* One source of a key. */
typedef struct kpart {
	enum ksrc src;
	unsigned index; /* KS_ARGUMENT */
	char name[129]; /* KS_ATTACHMENT */
} kpart;

/* A key: one source, or a composite of 2..RESIL__KEY_PARTS joined by
 * '+' in the spec; its key the parts' values, in the spec's order, each
 * followed by one zero byte but the last (no part but `args`, which
 * must be last, can hold a zero byte: the join is unambiguous). src is
 * KS_HOST when a part is the endpoint's host (the key is built per
 * attempt, lib/call_cluster.c), else the first part's. */
typedef struct kspec {
	enum ksrc src;
	unsigned nparts;  /* 1..RESIL__KEY_PARTS */
	uint32_t max_len; /* the family's max_key_len (0: unknown) */
	kpart part[RESIL__KEY_PARTS];
} kspec;

/* s as a key source of a family of kind (its name: "breaker", ...) into
 * *out: RESIL_OK, or RESIL_E_INVAL with "KIND.key: ..." in diag. */
resil_err resil__keyed_spec(
    const char *kind, const char *s, kspec *out, resil_diag *diag);
resil_err resil__keyed_parse_spec(
    const char *kind, const char *s, resil_diag *diag);

/* Whether cfg's stage of kind k (RESIL_KEYED_*) is on. */
int resil__keyed_stage_on(const resil_pipeline_config *cfg, unsigned k);

/* The families cfg->keyed names, against the rest of cfg: RESIL_OK, or
 * RESIL_E_INVAL with the message and *kind the kind at fault. */
resil_err resil__keyed_cfg_check(
    const resil_pipeline_config *cfg, int *kind, resil_diag *diag);

#endif

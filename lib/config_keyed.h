/*
 * Issue 41, keyed families in configuration text (lib/config_keyed.c):
 * the key sources (breaker.key=, ratelimit.key=, bulkhead.key=) and the
 * per-value overrides (ratelimit.key.override.VALUE=RATE/PERIOD,
 * bulkhead.key.override.VALUE=N) that the key table cannot hold. Never
 * installed.
 */
#ifndef RESIL_CONFIG_KEYED_H
#define RESIL_CONFIG_KEYED_H

#include <resil/keyed.h>

#include "config_keys.h"

/* The kind (RESIL_KEYED_*) of an override key KIND.key.override.VALUE
 * (*value its VALUE, inside key), or -1 for any other key. */
int resil__keyed_override_kind(const char *key, const char **value);

/* The overrides of one family, as a text build collects them. Each key
 * points into its setting's key (which outlives the build). */
typedef struct resil__kovr {
	resil_keyed_override *v;
	size_t n, cap;
} resil__kovr;

/* Check kv (an override key, resil__keyed_override_kind() >= 0) and, when
 * to is not NULL, append it to to[kind]. RESIL_OK, or RESIL_E_INVAL with
 * `origin:line: KEY: message`; RESIL_E_NOMEM. */
resil_err resil__keyed_override_add(resil__kovr *to, const resil_allocator *a,
    const keyval *kv, resil_diag *diag);
void resil__kovr_free(resil__kovr *o, const resil_allocator *a);

#endif

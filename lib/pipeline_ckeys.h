/*
 * The cluster keys of a configuration text, kept by the pipeline so that a
 * reload can tell which of them changed (issue 24.1).
 *
 * The form (made by lib/config.c, read here): the text's origin on the
 * first line, then one line per setting in text order, "LINE\tKEY=VALUE".
 * A key may repeat (router.condition appends a rule each time).
 */
#ifndef RESIL_PIPELINE_CKEYS_H
#define RESIL_PIPELINE_CKEYS_H

#include <stddef.h>

#include "internal.h"

#include <resil/router.h>

/*
 * Compare the keys a pipeline runs with (old; NULL: none) with a reload's
 * (neu; NULL: none). Every key whose values differ is refused, the first
 * one named with the reload's origin:line (a key the reload leaves out:
 * origin and the key), except router.condition and router.condition.force,
 * which a reload applies: *conds is then 1 (else 0). has_selector 0: a
 * condition change is refused too (no selector routes).
 */
resil_err resil__ckeys_compare(const char *old, const char *neu,
    int has_selector, int *conds, resil_diag *diag);

/* The condition rules of keys (each router.condition, in order, with
 * router.condition.force), parsed through a into *rules (n of them;
 * *rules NULL when 0). Free with resil__ckeys_rules_free. */
resil_err resil__ckeys_rules(const char *keys, const resil_allocator *a,
    resil_condition ***rules, size_t *n, resil_diag *diag);
void resil__ckeys_rules_free(
    const resil_allocator *a, resil_condition **rules, size_t n);

#endif

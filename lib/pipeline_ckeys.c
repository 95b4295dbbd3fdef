/*
 * A reload's cluster keys against the pipeline's (lib/pipeline_ckeys.h):
 * a change is refused with its key and origin:line, except the condition
 * rules, which the selector takes at run time.
 */
#include "pipeline_ckeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One line of the form. */
typedef struct ckline {
	const char *key, *value; /* not NUL-terminated */
	size_t klen, vlen;
	unsigned line;
} ckline;

/* The line at *at into *l, *at moved past it; 0 at the end. */
static int
next_line(const char **at, ckline *l)
{
	const char *s = *at, *end, *tab, *eq;

	while (s != NULL && *s != '\0') {
		end = strchr(s, '\n');
		if (end == NULL)
			end = s + strlen(s);
		tab = memchr(s, '\t', (size_t)(end - s));
		eq = tab != NULL ? memchr(tab, '=', (size_t)(end - tab)) : NULL;
		*at = *end == '\n' ? end + 1 : end;
		if (eq != NULL) {
			l->line = (unsigned)strtoul(s, NULL, 10);
			l->key = tab + 1;
			l->klen = (size_t)(eq - tab - 1);
			l->value = eq + 1;
			l->vlen = (size_t)(end - eq - 1);
			return 1;
		}
		s = *at;
	}
	return 0;
}

/* The first line of keys: its origin (copied into buf). */
static const char *
origin_of(const char *keys, char *buf, size_t n)
{
	const char *end;
	size_t len;

	if (keys == NULL)
		return "<string>";
	end = strchr(keys, '\n');
	len = end != NULL ? (size_t)(end - keys) : strlen(keys);
	if (len >= n)
		len = n - 1;
	memcpy(buf, keys, len);
	buf[len] = '\0';
	return buf;
}

static const char *
body_of(const char *keys)
{
	const char *nl = keys != NULL ? strchr(keys, '\n') : NULL;

	return nl != NULL ? nl + 1 : NULL;
}

static int
key_is(const ckline *l, const char *key)
{
	return l->klen == strlen(key) && memcmp(l->key, key, l->klen) == 0;
}

static int
same_key(const ckline *a, const ckline *b)
{
	return a->klen == b->klen && memcmp(a->key, b->key, a->klen) == 0;
}

/* Whether every value of a's key in x equals, in order, those in y. */
static int
same_values(const char *x, const char *y, const ckline *k)
{
	const char *ax = x, *ay = y;
	ckline lx, ly;
	int hx, hy;

	for (;;) {
		while ((hx = next_line(&ax, &lx)) && !same_key(&lx, k))
			;
		while ((hy = next_line(&ay, &ly)) && !same_key(&ly, k))
			;
		if (!hx || !hy)
			return hx == hy;
		if (lx.vlen != ly.vlen ||
		    memcmp(lx.value, ly.value, lx.vlen) != 0)
			return 0;
	}
}

/* Why a key cannot change: the object that holds it. */
static const char *
holder(const ckline *l)
{
	if (l->klen >= 8 && memcmp(l->key, "registry", 8) == 0 &&
	    !key_is(l, "registry.empty_protection"))
		return "the registry source is made once, by "
		       "resil_config_source()";
	if ((l->klen >= 8 && memcmp(l->key, "outlier.", 8) == 0) ||
	    (l->klen >= 7 && memcmp(l->key, "health.", 7) == 0) ||
	    (l->klen >= 9 && memcmp(l->key, "endpoint.", 9) == 0) ||
	    key_is(l, "url") || key_is(l, "registry.empty_protection"))
		return "the directory's endpoints, outlier detection and "
		       "health checks are made once, by resil_directory_new()";
	return "the selector's balancers and routers are made once, by "
	       "resil_selector_new()";
}

static resil_err
refuse(resil_diag *diag, const char *origin, const ckline *l, int removed,
    int has_selector)
{
	char where[96];

	if (l->line > 0 && !removed)
		snprintf(where, sizeof(where), "%s:%u: ", origin, l->line);
	else
		snprintf(where, sizeof(where), "%s: ", origin);
	if (!has_selector)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s%.*s: cannot change by reload (the pipeline was made "
		    "without it and has no selector to apply it to; build a "
		    "new pipeline)",
		    where, (int)l->klen, l->key);
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s%.*s: cannot change by reload (%s; build them again to %s)",
	    where, (int)l->klen, l->key, holder(l),
	    removed ? "remove it" : "change it");
}

static int
is_condition(const ckline *l)
{
	return key_is(l, "router.condition") ||
	    key_is(l, "router.condition.force");
}

/* The keys of x that differ from y's: the first refused, conditions
 * noted. removed: x is the old keys (a key the reload leaves out). */
static resil_err
walk(const char *x, const char *y, const char *origin, int removed,
    int has_selector, int *conds, resil_diag *diag)
{
	const char *at = x;
	ckline l;

	while (next_line(&at, &l)) {
		if (same_values(x, y, &l))
			continue;
		if (is_condition(&l) && has_selector) {
			*conds = 1;
			continue;
		}
		return refuse(diag, origin, &l, removed, has_selector);
	}
	return RESIL_OK;
}

resil_err
resil__ckeys_compare(const char *old, const char *neu, int has_selector,
    int *conds, resil_diag *diag)
{
	char obuf[64];
	const char *origin = origin_of(neu, obuf, sizeof(obuf));
	const char *ob = body_of(old), *nb = body_of(neu);
	resil_err err;

	*conds = 0;
	err = walk(nb, ob, origin, 0, has_selector, conds, diag);
	if (err == RESIL_OK)
		err = walk(ob, nb, origin, 1, has_selector, conds, diag);
	return err;
}

/* A boolean value as the cluster text reads it (checked there). */
static int
truth(const ckline *l)
{
	static const char *const yes[] = { "true", "1", "yes", "on" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (l->vlen == strlen(yes[i]) &&
		    strncasecmp(l->value, yes[i], l->vlen) == 0)
			return 1;
	return 0;
}

void
resil__ckeys_rules_free(
    const resil_allocator *a, resil_condition **rules, size_t n)
{
	size_t i;

	if (rules == NULL)
		return;
	for (i = 0; i < n; i++)
		resil_condition_free(rules[i]);
	resil__free(a, rules, n * sizeof(*rules));
}

resil_err
resil__ckeys_rules(const char *keys, const resil_allocator *a,
    resil_condition ***rules, size_t *n, resil_diag *diag)
{
	const char *body = body_of(keys), *at = body;
	size_t count = 0, i = 0;
	int force = 0;
	ckline l;
	resil_err err = RESIL_OK;

	*rules = NULL;
	*n = 0;
	while (next_line(&at, &l)) {
		count += key_is(&l, "router.condition") ? 1u : 0u;
		if (key_is(&l, "router.condition.force"))
			force = truth(&l);
	}
	if (count == 0)
		return RESIL_OK;
	*rules = resil__alloc(a, count * sizeof(**rules));
	if (*rules == NULL)
		return resil__diagf(diag, RESIL_E_NOMEM, "reload: out of memory");
	at = body;
	while (err == RESIL_OK && next_line(&at, &l)) {
		char *text;

		if (!key_is(&l, "router.condition"))
			continue;
		text = resil__strndup(a, l.value, l.vlen);
		err = text == NULL ? RESIL_E_NOMEM
		                   : resil_condition_parse(
		                         &(*rules)[i], text, force, a, diag);
		resil__strfree(a, text);
		i += err == RESIL_OK ? 1u : 0u;
	}
	if (err != RESIL_OK) {
		while (i > 0)
			resil_condition_free((*rules)[--i]);
		resil__free(a, *rules, count * sizeof(**rules));
		*rules = NULL;
		return err == RESIL_E_NOMEM
		    ? resil__diagf(diag, err, "reload: out of memory")
		    : err;
	}
	*n = count;
	return RESIL_OK;
}

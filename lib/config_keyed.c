/*
 * Issue 41: keyed families in configuration text (lib/config_keyed.h,
 * docs/keyed.md "In the text", docs/config.md).
 */
#include "config_keyed.h"

#include <stdio.h>
#include <string.h>

#include "duration.h"
#include "keyed_spec.h"

static const char *const kind_names[RESIL_KEYED_KINDS] = { "breaker",
	"ratelimit", "bulkhead", "throttle" };

int
resil__keyed_override_kind(const char *key, const char **value)
{
	int i;

	for (i = 0; i < RESIL_KEYED_KINDS; i++) {
		size_t n = strlen(kind_names[i]);

		if (strncmp(key, kind_names[i], n) == 0 &&
		    strncmp(key + n, ".key.override.", 14) == 0) {
			*value = key + n + 14;
			return i;
		}
	}
	return -1;
}

/* An unsigned in lo..hi of s[0..n): 1, or 0 with the message. */
static int
read_count(const keyval *kv, const char *what, const char *s, size_t n,
    uint64_t lo, uint64_t hi, uint64_t *v, resil_diag *diag)
{
	int r = resil__parse_digits(s, n, v);

	if (r > 0 && *v >= lo && *v <= hi)
		return 1;
	if (r == 0)
		(void)resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%.*s\" is not an unsigned integer (the %s)",
		    kv->key, (int)n, s, what);
	else
		(void)resil__config_fail(diag, kv->origin, kv->line,
		    "%s: the %s %.*s is out of range %llu..%llu", kv->key,
		    what, (int)n, s, (unsigned long long)lo,
		    (unsigned long long)hi);
	return 0;
}

/* RATE[/PERIOD][,burst=N]: a unit alone as the period is one of it. */
static resil_err
read_rate(const keyval *kv, resil_keyed_override *o, resil_diag *diag)
{
	const char *v = kv->value, *slash = strchr(v, '/');
	const char *comma = strchr(v, ',');
	const char *rate_end = slash != NULL ? slash
	    : comma != NULL                  ? comma
	                                     : v + strlen(v);
	uint64_t u = 0;

	if (comma != NULL && slash != NULL && comma < slash)
		slash = NULL, rate_end = comma;
	if (!read_count(kv, "rate", v, (size_t)(rate_end - v), 1, UINT32_MAX,
	        &u, diag))
		return RESIL_E_INVAL;
	o->rate = (uint32_t)u;
	if (slash != NULL) {
		char per[64];
		const char *unit_at = NULL;
		size_t n =
		    (comma != NULL ? (size_t)(comma - slash) : strlen(slash)) -
		    1;
		int r;

		if (n == 0 || n + 2 > sizeof(per))
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%s\": the period after '/' is a duration "
			    "(1s, 100ms, or a unit alone: s, ms, m, h)",
			    kv->key, v);
		/* A unit alone (1000/s) is one of it. */
		if (slash[1] >= 'a' && slash[1] <= 'z') {
			per[0] = '1';
			memcpy(per + 1, slash + 1, n);
			per[n + 1] = '\0';
		} else {
			memcpy(per, slash + 1, n);
			per[n] = '\0';
		}
		r = resil__duration_parse(per, &o->period_ns, &unit_at);
		if (r != RESIL__DUR_OK)
			return resil__config_dur_fail(diag, kv->origin,
			    kv->line, kv->key, per, r, unit_at);
		if (o->period_ns == 0)
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%s\": the period must be at least 1ns",
			    kv->key, v);
	}
	if (comma != NULL) {
		if (strncmp(comma + 1, "burst=", 6) != 0)
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%s\": after ',' only burst=N (RATE[/PERIOD]"
			    "[,burst=N])",
			    kv->key, v);
		if (!read_count(kv, "burst", comma + 7, strlen(comma + 7), 1,
		        UINT32_MAX, &u, diag))
			return RESIL_E_INVAL;
		o->burst = (uint32_t)u;
	}
	return RESIL_OK;
}

resil_err
resil__keyed_override_add(resil__kovr *to, const resil_allocator *a,
    const keyval *kv, resil_diag *diag)
{
	const char *name = NULL;
	int kind = resil__keyed_override_kind(kv->key, &name);
	resil_keyed_override o;
	uint64_t u = 0;
	resil_err err;

	memset(&o, 0, sizeof(o));
	if (kind == (int)RESIL_KEYED_BREAKER ||
	    kind == (int)RESIL_KEYED_THROTTLE)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: a %s family takes no overrides (rate limiter "
		    "and bulkhead families do)",
		    kv->key, kind_names[kind]);
	if (kind < 0 || name[0] == '\0')
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: the value after %s.key.override. is empty", kv->key,
		    kind < 0 ? "KIND" : kind_names[kind]);
	if (strlen(name) > RESIL_KEYED_MAX_KEY_LEN)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: the value is longer than %u bytes", kv->key,
		    RESIL_KEYED_MAX_KEY_LEN);
	o.key = name;
	o.key_len = strlen(name);
	if (kind == (int)RESIL_KEYED_RATELIMIT) {
		err = read_rate(kv, &o, diag);
		if (err != RESIL_OK)
			return err;
	} else {
		if (!read_count(kv, "max_concurrent", kv->value,
		        strlen(kv->value), 1, RESIL_BULKHEAD_MAX_LIMIT, &u,
		        diag))
			return RESIL_E_INVAL;
		o.max_concurrent = (uint32_t)u;
	}
	if (to == NULL)
		return RESIL_OK;
	to = &to[kind];
	if (to->n >= RESIL_KEYED_MAX_OVERRIDES)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: more than %u overrides of %s.key", kv->key,
		    RESIL_KEYED_MAX_OVERRIDES, kind_names[kind]);
	if (to->n == to->cap) {
		size_t cap = to->cap == 0 ? 8 : to->cap * 2;
		resil_keyed_override *nv = resil__alloc(a, cap * sizeof(*nv));
		size_t n = to->n;

		if (nv == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
		if (n > 0)
			memcpy(nv, to->v, n * sizeof(*nv));
		resil__kovr_free(to, a);
		to->v = nv;
		to->cap = cap;
		to->n = n;
	}
	to->v[to->n++] = o;
	return RESIL_OK;
}

void
resil__kovr_free(resil__kovr *o, const resil_allocator *a)
{
	if (o->v != NULL)
		resil__free(a, o->v, o->cap * sizeof(*o->v));
	o->v = NULL;
	o->n = o->cap = 0;
}

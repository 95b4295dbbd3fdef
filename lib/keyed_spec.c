/*
 * Issue 41: key sources and the check of a configuration's keyed
 * families (lib/keyed_spec.h).
 */
#include "keyed_spec.h"

#include <stdio.h>
#include <string.h>

#include <resil/keyed.h>
#include <resil/shm.h>

#include "pipeline_shared.h"

/* Whether the n bytes at s are the text lit. */
static int
is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* The source of the n bytes at s into *out; whole: the spec, named
 * before the part in a composite's messages (NULL: a single source). */
static resil_err
part_spec(const char *kind, const char *whole, const char *s, size_t n,
    kpart *out, resil_diag *diag)
{
	const char *q = whole != NULL ? "\"" : "";
	const char *w = whole != NULL ? whole : "";
	const char *qc = whole != NULL ? "\": " : "";
	int ni = n > 512 ? 512 : (int)n;

	memset(out, 0, sizeof(*out));
	if (is(s, n, "host")) {
		if (strcmp(kind, "throttle") == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: %s%s%s\"host\" is a source of breaker, "
			    "rate limiter and bulkhead families only (a "
			    "throttle is asked once per call, before the "
			    "selector chose an endpoint)",
			    kind, q, w, qc);
		out->src = KS_HOST;
		return RESIL_OK;
	}
	if (is(s, n, "method")) {
		out->src = KS_METHOD;
		return RESIL_OK;
	}
	if (is(s, n, "args")) {
		out->src = KS_ARGS;
		return RESIL_OK;
	}
	if (n >= 10 && memcmp(s, "arguments[", 10) == 0) {
		size_t i = 10, nd = 0;
		unsigned v = 0;

		while (i < n && s[i] >= '0' && s[i] <= '9' && nd < 4) {
			v = v * 10 + (unsigned)(s[i] - '0');
			i++;
			nd++;
		}
		if (nd > 0 && v <= 255 && i + 1 == n && s[i] == ']') {
			out->src = KS_ARGUMENT;
			out->index = v;
			return RESIL_OK;
		}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: %s%s%s\"%.*s\": the index of arguments[N] must "
		    "be 0..255",
		    kind, q, w, qc, ni, s);
	}
	if (n >= 11 && memcmp(s, "attachment:", 11) == 0) {
		if (n - 11 >= 1 && n - 11 < sizeof(out->name)) {
			out->src = KS_ATTACHMENT;
			memcpy(out->name, s + 11, n - 11);
			out->name[n - 11] = '\0';
			return RESIL_OK;
		}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: %s%s%s\"%.*s\": an attachment's name is 1..128 "
		    "bytes",
		    kind, q, w, qc, ni, s);
	}
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s.key: %s%s%s\"%.*s\" is not a key source (method, args, "
	    "arguments[N], attachment:NAME, host)",
	    kind, q, w, qc, ni, s);
}

resil_err
resil__keyed_spec(
    const char *kind, const char *s, kspec *out, resil_diag *diag)
{
	const char *at = s, *plus;
	unsigned n = 1, i;
	resil_err err;

	memset(out, 0, sizeof(*out));
	for (plus = strchr(s, '+'); plus != NULL; plus = strchr(plus + 1, '+'))
		n++;
	if (n == 1) {
		err = part_spec(kind, NULL, s, strlen(s), &out->part[0], diag);
		if (err != RESIL_OK)
			return err;
		out->nparts = 1;
		out->src = out->part[0].src;
		return RESIL_OK;
	}
	if (n > RESIL__KEY_PARTS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: \"%s\": %u parts, a composite key has 2..%u "
		    "(SOURCE+SOURCE...)",
		    kind, s, n, RESIL__KEY_PARTS);
	for (i = 0; i < n; i++) {
		const char *end = strchr(at, '+');
		size_t len = end != NULL ? (size_t)(end - at) : strlen(at);

		if (len == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: \"%s\": an empty part (a composite key "
			    "is SOURCE+SOURCE..., up to %u)",
			    kind, s, RESIL__KEY_PARTS);
		err = part_spec(kind, s, at, len, &out->part[i], diag);
		if (err != RESIL_OK)
			return err;
		if (out->part[i].src == KS_ARGS && i + 1 < n)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: \"%s\": args (bytes, a zero byte "
			    "included) can only be a composite key's last "
			    "part",
			    kind, s);
		if (out->part[i].src == KS_HOST)
			out->src = KS_HOST;
		at += len + 1;
	}
	out->nparts = n;
	if (out->src != KS_HOST)
		out->src = out->part[0].src;
	return RESIL_OK;
}

resil_err
resil__keyed_parse_spec(const char *kind, const char *s, resil_diag *diag)
{
	kspec ks;

	return resil__keyed_spec(kind, s, &ks, diag);
}

static const char *const kind_names[RESIL_KEYED_KINDS] = { "breaker",
	"ratelimit", "bulkhead", "throttle" };

/* Whether the stage of kind k is on in cfg. */
int
resil__keyed_stage_on(const resil_pipeline_config *cfg, unsigned k)
{
	return k == RESIL_KEYED_BREAKER  ? cfg->breaker_enabled
	    : k == RESIL_KEYED_RATELIMIT ? cfg->ratelimit_enabled
	    : k == RESIL_KEYED_THROTTLE  ? cfg->throttle_enabled
	                                 : cfg->bulkhead_enabled;
}

/* What cannot go with a family of kind k (a message), or NULL. */
static const char *
conflict(const resil_pipeline_config *cfg, unsigned k)
{
	if (k == RESIL_KEYED_BREAKER) {
		if (cfg->breaker_per_method)
			return "not with breaker.per_method (a breaker per "
			       "method: breaker.key=method)";
		if (cfg->breaker_shared_url != NULL ||
		    cfg->breaker_fleet_url != NULL ||
		    cfg->shared_breaker != NULL || cfg->fleet != NULL)
			return "not with a shared or fleet breaker "
			       "(breaker.shared, breaker.fleet)";
	} else if (k == RESIL_KEYED_RATELIMIT) {
		if (cfg->ratelimit_shared_url != NULL ||
		    cfg->ratelimit_fleet_url != NULL ||
		    cfg->shared_ratelimit != NULL ||
		    cfg->fleet_ratelimit != NULL)
			return "not with a shared or fleet rate limiter "
			       "(ratelimit.shared, ratelimit.fleet)";
		if (cfg->ratelimit.reserve_critical != 0 ||
		    cfg->ratelimit.reserve_default != 0)
			return "a keyed rate limiter keeps no class reserves "
			       "(ratelimit.reserve.*)";
	} else if (k == RESIL_KEYED_BULKHEAD) {
		if (cfg->bulkhead_shared_url != NULL ||
		    cfg->shared_bulkhead != NULL)
			return "not with a shared bulkhead (bulkhead.shared)";
		if (cfg->bulkhead.max_wait_ns != 0 || cfg->bulkhead.queue != 0)
			return "a keyed bulkhead does not wait "
			       "(bulkhead.max_wait, bulkhead.queue)";
		if (cfg->bulkhead.reserve_critical != 0 ||
		    cfg->bulkhead.reserve_default != 0)
			return "a keyed bulkhead keeps no class reserves "
			       "(bulkhead.reserve.*)";
	}
	return NULL;
}

/* h3/kshm: keyed[k].shared, a breaker family in a region (h3/kshm2: or
 * a rate limiter family; h4/kshm3: or a bulkhead family). */
static resil_err
shared_check(const resil_pipeline_config *cfg, unsigned k, resil_diag *diag)
{
	char what[32];

	if (cfg->keyed[k].shared == NULL)
		return RESIL_OK;
	if (k == RESIL_KEYED_THROTTLE)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key.shared: only breaker, rate limiter and bulkhead "
		    "families are shared in a region (breaker.key.shared, "
		    "ratelimit.key.shared, bulkhead.key.shared; there is no "
		    "shared throttle)",
		    kind_names[k]);
	/* h4/kshm3: the region counts a fixed limit exactly. */
	if (k == RESIL_KEYED_BULKHEAD &&
	    (cfg->bulkhead.adaptive || cfg->bulkhead.batch != 0))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.key.shared: not with bulkhead.%s (a shared "
		    "family's bulkheads have a fixed limit, counted exactly)",
		    cfg->bulkhead.adaptive ? "adaptive" : "batch");
	(void)snprintf(what, sizeof(what), "%s.key.shared", kind_names[k]);
	if (cfg->keyed[k].max_key_len > RESIL_SHM_KEYED_KEY_MAX)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: a shared family keeps keys of up to %u bytes "
		    "(%s.key.max_key_len is %u)",
		    what, RESIL_SHM_KEYED_KEY_MAX, kind_names[k],
		    (unsigned)cfg->keyed[k].max_key_len);
	return resil__shared_url_check(what, cfg->keyed[k].shared, diag);
}

resil_err
resil__keyed_cfg_check(
    const resil_pipeline_config *cfg, int *kind, resil_diag *diag)
{
	unsigned k;

	for (k = 0; k < RESIL_KEYED_KINDS; k++) {
		const char *name = kind_names[k], *why;
		resil_err err;

		*kind = (int)k;
		if (cfg->keyed[k].key == NULL) {
			if (cfg->keyed[k].n_overrides != 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s.key.override.%.*s: needs %s.key (the "
				    "family the value is in)",
				    name,
				    cfg->keyed[k].overrides != NULL
				        ? (int)(cfg->keyed[k]
				                          .overrides[0]
				                          .key_len < 64
				                  ? cfg->keyed[k]
				                        .overrides[0]
				                        .key_len
				                  : 64)
				        : 0,
				    cfg->keyed[k].overrides != NULL
				        ? (const char *)cfg->keyed[k]
				              .overrides[0]
				              .key
				        : "",
				    name);
			if (cfg->keyed[k].max_keys != 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s.key.max_keys: needs %s.key", name,
				    name);
			if (cfg->keyed[k].max_key_len != 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s.key.max_key_len: needs %s.key", name,
				    name);
			if (cfg->keyed[k].shared != NULL)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "%s.key.shared: needs %s.key", name, name);
			continue;
		}
		if ((err = shared_check(cfg, k, diag)) != RESIL_OK)
			return err;
		if ((err = resil__keyed_parse_spec(
		         name, cfg->keyed[k].key, diag)) != RESIL_OK)
			return err;
		if (!resil__keyed_stage_on(cfg, k))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: the %s stage is off (%s.enabled=false): "
			    "its family would never be asked",
			    name, name, name);
		if ((why = conflict(cfg, k)) != NULL)
			return resil__diagf(
			    diag, RESIL_E_INVAL, "%s.key: %s", name, why);
		if (cfg->keyed[k].max_keys > RESIL_KEYED_MAX_KEYS)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key.max_keys: %u is out of range 0..%u", name,
			    (unsigned)cfg->keyed[k].max_keys,
			    (unsigned)RESIL_KEYED_MAX_KEYS);
		if (cfg->keyed[k].max_key_len > RESIL_KEYED_MAX_KEY_LEN)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key.max_key_len: %u is out of range 0..%u",
			    name, (unsigned)cfg->keyed[k].max_key_len,
			    (unsigned)RESIL_KEYED_MAX_KEY_LEN);
		if (cfg->keyed[k].n_overrides != 0 &&
		    cfg->keyed[k].overrides == NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: overrides NULL with n_overrides %zu",
			    name, cfg->keyed[k].n_overrides);
		if (cfg->keyed[k].n_overrides != 0 && k == RESIL_KEYED_BREAKER)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "breaker.key.override: a breaker family takes no "
			    "overrides (rate limiter and bulkhead families "
			    "do)");
	}
	*kind = -1;
	return RESIL_OK;
}

/*
 * Issue 41: key sources and the check of a configuration's keyed
 * families (lib/keyed_spec.h).
 */
#include "keyed_spec.h"

#include <string.h>

#include <resil/keyed.h>
#include <resil/shm.h>

#include "pipeline_shared.h"

resil_err
resil__keyed_spec(
    const char *kind, const char *s, kspec *out, resil_diag *diag)
{
	memset(out, 0, sizeof(*out));
	if (strcmp(s, "host") == 0) {
		if (strcmp(kind, "bulkhead") == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: \"host\" is a source of breaker and "
			    "rate limiter families only (a bulkhead per "
			    "endpoint: the endpoint's own concurrency)",
			    kind);
		if (strcmp(kind, "throttle") == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s.key: \"host\" is a source of breaker and "
			    "rate limiter families only (a throttle is asked "
			    "once per call, before the selector chose an "
			    "endpoint)",
			    kind);
		out->src = KS_HOST;
		return RESIL_OK;
	}
	if (strcmp(s, "method") == 0) {
		out->src = KS_METHOD;
		return RESIL_OK;
	}
	if (strcmp(s, "args") == 0) {
		out->src = KS_ARGS;
		return RESIL_OK;
	}
	if (strncmp(s, "arguments[", 10) == 0) {
		const char *d = s + 10;
		unsigned n = 0;
		size_t nd = 0;

		while (*d >= '0' && *d <= '9' && nd < 4) {
			n = n * 10 + (unsigned)(*d - '0');
			d++;
			nd++;
		}
		if (nd > 0 && n <= 255 && strcmp(d, "]") == 0) {
			out->src = KS_ARGUMENT;
			out->index = n;
			return RESIL_OK;
		}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: \"%s\": the index of arguments[N] must be 0..255",
		    kind, s);
	}
	if (strncmp(s, "attachment:", 11) == 0) {
		size_t n = strlen(s + 11);

		if (n >= 1 && n < sizeof(out->name)) {
			out->src = KS_ATTACHMENT;
			memcpy(out->name, s + 11, n + 1);
			return RESIL_OK;
		}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key: \"%s\": an attachment's name is 1..128 bytes",
		    kind, s);
	}
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s.key: \"%s\" is not a key source (method, args, arguments[N], "
	    "attachment:NAME, host)",
	    kind, s);
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
		if (cfg->ratelimit.drain_on_throttled)
			return "a keyed rate limiter is not drained by the "
			       "server's pushback (ratelimit.drain_on_throttled)";
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

/* h3/kshm: keyed[k].shared, a breaker family in a region. */
static resil_err
shared_check(const resil_pipeline_config *cfg, unsigned k, resil_diag *diag)
{
	if (cfg->keyed[k].shared == NULL)
		return RESIL_OK;
	if (k != RESIL_KEYED_BREAKER)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.key.shared: only breaker families are shared in a "
		    "region (breaker.key.shared)",
		    kind_names[k]);
	if (cfg->keyed[k].max_key_len > RESIL_SHM_KEYED_KEY_MAX)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker.key.shared: a shared family keeps keys of up to "
		    "%u bytes (breaker.key.max_key_len is %u)",
		    RESIL_SHM_KEYED_KEY_MAX,
		    (unsigned)cfg->keyed[k].max_key_len);
	return resil__shared_url_check(
	    "breaker.key.shared", cfg->keyed[k].shared, diag);
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

/*
 * The keys of configuration text (lib/config_keys.h): the table, the
 * lookup of a key, and the reading and writing of each kind of value.
 */
#include "config_keys.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_text.h"
#include "config_hedge.h"
#include "duration.h"
#include "keyed_spec.h"
#include "pipeline_config.h"
#include "pipeline_shared.h"

/* ---- the key table ---- */

#define U32MAX UINT64_C(4294967295)
#define WINDOW_MAX UINT64_C(1048576)
#define INT(n, k, st, fl, field, lo, hi)                  \
	{                                                 \
		n, k, st, fl, PC(field), lo, hi, 0.0, 0.0 \
	}
#define DBL(n, st, field, lo, hi)                           \
	{                                                   \
		n, K_DOUBLE, st, 0, PC(field), 0, 0, lo, hi \
	}
#define EN(n, st, field)                                       \
	{                                                      \
		n, K_ENABLED, st, 0, PC(field), 0, 0, 0.0, 0.0 \
	}

static const keydef keys[] = {
	INT("service", K_SERVICE, ST_NONE, 0, service, 0, 0),
	INT("timeout", K_DUR, ST_NONE, 0, timeout_ns, 0, UINT64_MAX),
	INT("clock", K_CLOCK, ST_NONE, 0, clock, 0, 0),
	INT("mock", K_MOCK, ST_NONE, 0, mock, 0, 0),

	EN("breaker.enabled", ST_BREAKER, breaker_enabled),
	INT("breaker.per_method", K_BOOL, ST_BREAKER, 0, breaker_per_method, 0,
	    1),
	INT("breaker.consecutive_failures", K_U32, ST_BREAKER, 0,
	    breaker.consecutive_failures, 0, U32MAX),
	INT("breaker.failure_rate", K_U32, ST_BREAKER, 0,
	    breaker.failure_rate_pct, 0, 100),
	INT("breaker.slow_rate", K_U32, ST_BREAKER, 0, breaker.slow_rate_pct,
	    0, 100),
	INT("breaker.slow_threshold", K_DUR, ST_BREAKER, 0,
	    breaker.slow_threshold_ns, 0, UINT64_MAX),
	INT("breaker.min_calls", K_U32, ST_BREAKER, 0, breaker.min_calls, 0,
	    U32MAX),
	INT("breaker.window", K_WINDOW, ST_BREAKER, 0, breaker.window_type, 0,
	    0),
	/* The count window's real maximum (lib/breaker.c); a time window's
	 * 3600 buckets are checked by the breaker, which knows the kind. */
	INT("breaker.window_size", K_U32, ST_BREAKER, 0, breaker.window_size,
	    1, WINDOW_MAX),
	INT("breaker.bucket", K_DUR, ST_BREAKER, 0, breaker.bucket_ns, 1,
	    UINT64_MAX),
	INT("breaker.open_wait", K_DUR, ST_BREAKER, 0, breaker.open_wait_ns, 0,
	    UINT64_MAX),
	DBL("breaker.open_wait_multiplier", ST_BREAKER,
	    breaker.open_wait_multiplier, 1.0, 1000.0),
	INT("breaker.open_wait_max", K_DUR, ST_BREAKER, 0,
	    breaker.open_wait_max_ns, 0, UINT64_MAX),
	INT("breaker.probes", K_U32, ST_BREAKER, 0, breaker.permitted_probes,
	    1, 32767),
	INT("breaker.reopen_on_first_failure", K_BOOL, ST_BREAKER, 0,
	    breaker.reopen_on_first_failure, 0, 1),
	INT("breaker.max_half_open", K_DUR, ST_BREAKER, 0,
	    breaker.max_half_open_ns, 0, UINT64_MAX),

	EN("retry.enabled", ST_RETRY, retry_enabled),
	INT("retry.max_attempts", K_U32, ST_RETRY, 0, retry.max_attempts, 1,
	    RESIL_RETRY_MAX_ATTEMPTS),
	INT("retry.backoff", K_BACKOFF, ST_RETRY, 0, retry.backoff, 0, 0),
	INT("retry.delay", K_DUR, ST_RETRY, 0, retry.base_delay_ns, 0,
	    UINT64_MAX),
	DBL("retry.multiplier", ST_RETRY, retry.multiplier, 1.0, 100.0),
	INT("retry.max_delay", K_DUR, ST_RETRY, F_NONE, retry.max_delay_ns, 0,
	    UINT64_MAX),
	INT("retry.jitter", K_JITTER, ST_RETRY, 0, retry.jitter, 0, 0),
	DBL("retry.jitter_factor", ST_RETRY, retry.jitter_factor, 0.0, 1.0),
	INT("retry.seed", K_U64, ST_RETRY, 0, retry.seed, 0, UINT64_MAX),
	INT("retry.deadline", K_DUR, ST_RETRY, 0, retry.deadline_ns, 0,
	    UINT64_MAX),
	INT("retry.on_open", K_BOOL, ST_RETRY, 0, retry.retry_on_open, 0, 1),
	INT("retry.on_limited", K_BOOL, ST_RETRY, 0, retry.retry_on_limited, 0,
	    1),
	INT("retry.fail_after_max_attempts", K_BOOL, ST_RETRY, 0,
	    retry.fail_after_max_attempts, 0, 1),
	DBL("retry.budget_ratio", ST_RETRY, retry.budget_ratio, 0.0, 1000.0),
	INT("retry.budget_max_tokens", K_U32, ST_RETRY, 0,
	    retry.budget_max_tokens, 1, 1000000),
	INT("retry.budget_min_retries", K_U32, ST_RETRY, 0,
	    retry.budget_min_retries, 0, 1000000),
	INT("retry.budget_period", K_DUR, ST_RETRY, 0, retry.budget_period_ns,
	    1, UINT64_MAX),

	EN("cache.enabled", ST_CACHE, cache_enabled),
	INT("cache.max_entries", K_SIZE, ST_CACHE, 0, cache.max_entries, 1,
	    UINT64_C(1) << 32),
	INT("cache.max_bytes", K_SIZE, ST_CACHE, 0, cache.max_bytes, 1,
	    UINT64_MAX),
	INT("cache.max_age", K_DUR, ST_CACHE, F_NONE, cache.max_age, 0,
	    UINT64_MAX),
	INT("cache.shards", K_U32, ST_CACHE, F_POW2, cache.shards, 1, 256),

	EN("ratelimit.enabled", ST_RATELIMIT, ratelimit_enabled),
	INT("ratelimit.rate", K_U32, ST_RATELIMIT, 0, ratelimit.rate, 1,
	    U32MAX),
	INT("ratelimit.period", K_DUR, ST_RATELIMIT, 0, ratelimit.period_ns, 1,
	    UINT64_MAX),
	INT("ratelimit.burst", K_U32, ST_RATELIMIT, 0, ratelimit.burst, 1,
	    U32MAX),
	INT("ratelimit.batch", K_U32, ST_RATELIMIT, 0, ratelimit.batch, 0,
	    65536),

	EN("bulkhead.enabled", ST_BULKHEAD, bulkhead_enabled),
	INT("bulkhead.max_concurrent", K_U32, ST_BULKHEAD, 0,
	    bulkhead.max_concurrent, 1, RESIL_BULKHEAD_MAX_LIMIT),
	INT("bulkhead.adaptive", K_BOOL, ST_BULKHEAD, 0, bulkhead.adaptive, 0,
	    1),
	INT("bulkhead.min_limit", K_U32, ST_BULKHEAD, 0, bulkhead.min_limit, 1,
	    RESIL_BULKHEAD_MAX_LIMIT),
	INT("bulkhead.max_limit", K_U32, ST_BULKHEAD, 0, bulkhead.max_limit, 1,
	    RESIL_BULKHEAD_MAX_LIMIT),
	INT("bulkhead.target_latency", K_DUR, ST_BULKHEAD, 0,
	    bulkhead.target_latency_ns, 1, UINT64_MAX),
	INT("bulkhead.increase", K_U32, ST_BULKHEAD, 0, bulkhead.increase, 1,
	    RESIL_BULKHEAD_MAX_LIMIT),
	INT("bulkhead.backoff_pct", K_U32, ST_BULKHEAD, 0,
	    bulkhead.backoff_pct, 1, 99),
	INT("bulkhead.batch", K_U32, ST_BULKHEAD, 0, bulkhead.batch, 0,
	    RESIL_BULKHEAD_MAX_LIMIT),
	/* Issue 42: the bulkhead that waits, and its class reservations. */
	INT("bulkhead.max_wait", K_DUR, ST_BULKHEAD, 0, bulkhead.max_wait_ns,
	    0, UINT64_MAX),
	INT("bulkhead.queue", K_U32, ST_BULKHEAD, 0, bulkhead.queue, 0,
	    RESIL_BULKHEAD_MAX_LIMIT),
	INT("bulkhead.lifo", K_BOOL, ST_BULKHEAD, 0, bulkhead.order, 0, 1),
	INT("bulkhead.reserve.critical", K_U32, ST_BULKHEAD, 0,
	    bulkhead.reserve_critical, 0, RESIL_BULKHEAD_MAX_LIMIT),
	INT("bulkhead.reserve.default", K_U32, ST_BULKHEAD, 0,
	    bulkhead.reserve_default, 0, RESIL_BULKHEAD_MAX_LIMIT),

	INT("hedge.max", K_U32, ST_NONE, 0, hedge_max, 0, 7),
	INT("hedge.delay", K_DUR, ST_NONE, 0, hedge_delay_ns, 0, UINT64_MAX),
	INT("hedge.on", K_HEDGE_ON, ST_NONE, 0, hedge_fatal, 0, 0),

	/* The cluster (Dubbo's keys; used with a selector). */
	INT("cluster", K_STRATEGY, ST_NONE, 0, cluster.strategy, 0, 0),
	INT("retries", K_I32, ST_NONE, 0, cluster.retries, 0, 999),
	INT("forks", K_I32, ST_NONE, 0, cluster.forks, 1, 2147483647),
	INT("broadcast.fail.percent", K_I32, ST_NONE, 0,
	    cluster.broadcast_fail_percent, 0, 100),
	INT("failback.queue", K_I32, ST_NONE, 0, cluster.failback_queue, 1,
	    2147483647),
	INT("failback.retries", K_I32, ST_NONE, 0, cluster.failback_retries, 0,
	    2147483647),
	INT("failback.period", K_DUR, ST_NONE, 0, cluster.failback_period_ns,
	    1, UINT64_MAX),
	INT("zone", K_ZONE, ST_NONE, 0, cluster.local_zone, 0, 0),
	INT("cross_zone_timeout", K_DUR, ST_NONE, 0,
	    cluster.cross_zone_timeout_ns, 0, UINT64_MAX),

	/* Issue 24.2: shared-memory and fleet state in the pipeline
	 * (lib/pipeline_shared.c opens what they name). */
	INT("breaker.shared", K_SHARED, ST_BREAKER, 0, breaker_shared_url, 0,
	    0),
	INT("breaker.fleet", K_SHARED, ST_BREAKER, 0, breaker_fleet_url, 0,
	    0),
	INT("breaker.fleet_sync", K_DUR, ST_BREAKER, 0, fleet_sync_ns, 0,
	    UINT64_C(3600000000000)),
	INT("ratelimit.shared", K_SHARED, ST_RATELIMIT, 0,
	    ratelimit_shared_url, 0, 0),
	INT("ratelimit.fleet", K_SHARED, ST_RATELIMIT, 0, ratelimit_fleet_url,
	    0, 0),
	INT("bulkhead.shared", K_SHARED, ST_BULKHEAD, 0, bulkhead_shared_url,
	    0, 0),
	INT("endpoint.breaker.shared", K_SHARED, ST_NONE, 0,
	    endpoint_breaker_shared_url, 0, 0),
	/* Issue 44: the fleet breaker's settings (lib/pipeline_shared.c). */
	INT("breaker.fleet.quorum", K_U64, ST_BREAKER, 0,
	    fleet_settings.quorum, 1, 1024),
	INT("breaker.fleet.quorum_traffic", K_U64, ST_BREAKER, 0,
	    fleet_settings.quorum_traffic_pct, 0, 100),
	INT("breaker.fleet.probe_leases", K_U64, ST_BREAKER, 0,
	    fleet_settings.probe_leases, 1, 1024),
	INT("breaker.fleet.max_local_leases", K_U64, ST_BREAKER, 0,
	    fleet_settings.max_local_leases, 1, 64),
	INT("breaker.fleet.buckets", K_U64, ST_BREAKER, 0,
	    fleet_settings.buckets, 1, 1000),
	INT("breaker.fleet.open_wait", K_DUR, ST_BREAKER, 0,
	    fleet_settings.open_wait_ns, UINT64_C(1000000),
	    UINT64_C(86400000000000)),
	INT("breaker.fleet.lease", K_DUR, ST_BREAKER, 0,
	    fleet_settings.lease_ns, UINT64_C(1000000),
	    UINT64_C(86400000000000)),
	INT("breaker.fleet.vote", K_DUR, ST_BREAKER, 0, fleet_settings.vote_ns,
	    UINT64_C(1000000), UINT64_C(86400000000000)),
	INT("breaker.fleet.bucket", K_DUR, ST_BREAKER, 0,
	    fleet_settings.bucket_ns, UINT64_C(1000000),
	    UINT64_C(3600000000000)),
	INT("breaker.fleet.connect_timeout", K_DUR, ST_BREAKER, 0,
	    fleet_settings.connect_timeout_ns, UINT64_C(1000000),
	    UINT64_C(60000000000)),
	INT("breaker.fleet.command_timeout", K_DUR, ST_BREAKER, 0,
	    fleet_settings.command_timeout_ns, UINT64_C(1000000),
	    UINT64_C(60000000000)),
	INT("breaker.fleet.reconnect", K_DUR, ST_BREAKER, 0,
	    fleet_settings.reconnect_ns, UINT64_C(1000000),
	    UINT64_C(3600000000000)),
	/* Issue 44 (h2): the endpoints' breakers on the fleet too. */
	INT("breaker.fleet.endpoints", K_BOOL, ST_BREAKER, 0, fleet_endpoints,
	    0, 1),

	/* Issue 42: adaptive client throttling in front of the breaker
	 * (k: 0 off, else 1..1000000, checked with the window at build). */
	EN("throttle.enabled", ST_THROTTLE, throttle_enabled),
	DBL("throttle.k", ST_THROTTLE, throttle.k, 0.0, RESIL_THROTTLE_MAX_K),
	INT("throttle.window", K_DUR, ST_THROTTLE, 0, throttle.window_ns, 1,
	    UINT64_MAX),
	INT("throttle.buckets", K_U32, ST_THROTTLE, 0, throttle.buckets, 1,
	    RESIL_THROTTLE_MAX_BUCKETS),
	INT("throttle.seed", K_U64, ST_THROTTLE, 0, throttle.seed, 0,
	    UINT64_MAX),

	/* Issue 42 (h2/overload): the rate limiter's priority classes (the
	 * sum below burst, checked by the limiter) and its drain on the
	 * server's pushback. */
	INT("ratelimit.reserve.critical", K_U32, ST_RATELIMIT, 0,
	    ratelimit.reserve_critical, 0, U32MAX),
	INT("ratelimit.reserve.default", K_U32, ST_RATELIMIT, 0,
	    ratelimit.reserve_default, 0, U32MAX),
	INT("ratelimit.drain_on_throttled", K_BOOL, ST_RATELIMIT, 0,
	    ratelimit.drain_on_throttled, 0, 1),

	/* Issue 41: keyed families (lib/config_keyed.c; the overrides,
	 * KIND.key.override.VALUE, are read there too). max_keys and
	 * max_key_len: 0 is the family's default. */
	INT("breaker.key", K_KEYSRC, ST_BREAKER, 0, keyed[0].key, 0, 0),
	INT("breaker.key.max_keys", K_U32, ST_BREAKER, 0, keyed[0].max_keys,
	    0, RESIL_KEYED_MAX_KEYS),
	INT("breaker.key.max_key_len", K_U32, ST_BREAKER, 0,
	    keyed[0].max_key_len, 0, RESIL_KEYED_MAX_KEY_LEN),
	/* h3/kshm: the family in a shared-memory region (shm:REGION/NAME). */
	INT("breaker.key.shared", K_SHARED, ST_BREAKER, 0, keyed[0].shared, 0,
	    0),
	INT("ratelimit.key", K_KEYSRC, ST_RATELIMIT, 0, keyed[1].key, 0, 0),
	INT("ratelimit.key.max_keys", K_U32, ST_RATELIMIT, 0,
	    keyed[1].max_keys, 0, RESIL_KEYED_MAX_KEYS),
	INT("ratelimit.key.max_key_len", K_U32, ST_RATELIMIT, 0,
	    keyed[1].max_key_len, 0, RESIL_KEYED_MAX_KEY_LEN),
	/* h3/kshm2: the rate limiter family in a region (shm:REGION/NAME). */
	INT("ratelimit.key.shared", K_SHARED, ST_RATELIMIT, 0, keyed[1].shared,
	    0, 0),
	INT("bulkhead.key", K_KEYSRC, ST_BULKHEAD, 0, keyed[2].key, 0, 0),
	INT("bulkhead.key.max_keys", K_U32, ST_BULKHEAD, 0, keyed[2].max_keys,
	    0, RESIL_KEYED_MAX_KEYS),
	INT("bulkhead.key.max_key_len", K_U32, ST_BULKHEAD, 0,
	    keyed[2].max_key_len, 0, RESIL_KEYED_MAX_KEY_LEN),
	/* h4/kshm3: the bulkhead family in a region (shm:REGION/NAME). */
	INT("bulkhead.key.shared", K_SHARED, ST_BULKHEAD, 0, keyed[2].shared,
	    0, 0),
	/* Issue 42: a throttle per key (kind 3, RESIL_KEYED_THROTTLE). */
	INT("throttle.key", K_KEYSRC, ST_THROTTLE, 0, keyed[3].key, 0, 0),
	INT("throttle.key.max_keys", K_U32, ST_THROTTLE, 0, keyed[3].max_keys,
	    0, RESIL_KEYED_MAX_KEYS),
	INT("throttle.key.max_key_len", K_U32, ST_THROTTLE, 0,
	    keyed[3].max_key_len, 0, RESIL_KEYED_MAX_KEY_LEN),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *const window_names[] = { "count", "time" };
static const char *const backoff_names[] = { "fixed", "exponential",
	"linear" };
static const resil_retry_backoff backoff_values[] = { RESIL_BACKOFF_FIXED,
	RESIL_BACKOFF_EXPONENTIAL, RESIL_BACKOFF_LINEAR };
static const char *const jitter_names[] = { "none", "proportional", "full",
	"equal", "decorrelated", "decorrelated_v2" };

/* ---- small helpers ---- */

static int
lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int
word_eq(const char *s, const char *w)
{
	while (*s != '\0' && *w != '\0' && lower(*s) == lower(*w)) {
		s++;
		w++;
	}
	return *s == '\0' && *w == '\0';
}

resil_err
resil__config_fail(
    resil_diag *diag, const char *origin, unsigned line, const char *fmt, ...)
{
	char f[512];
	size_t n = 0, i;
	va_list ap;
	resil_err err;

	if (diag == NULL)
		return RESIL_E_INVAL;
	/* "origin:line: " becomes part of the format (its '%' doubled), so
	 * that the values of the message are elided as any diagnostic's. */
	if (line != 0 && origin != NULL) {
		for (i = 0; origin[i] != '\0' && n + 2 < 200; i++) {
			if (origin[i] == '%')
				f[n++] = '%';
			f[n++] = origin[i];
		}
		n += (size_t)snprintf(f + n, sizeof(f) - n, ":%u: ", line);
	}
	if (n + strlen(fmt) + 1 > sizeof(f))
		return resil__diagf(diag, RESIL_E_INVAL, "%s", fmt);
	memcpy(f + n, fmt, strlen(fmt) + 1);
	va_start(ap, fmt);
	err = resil__vdiagf(diag, RESIL_E_INVAL, f, ap);
	va_end(ap);
	return err;
}

/* ---- values ---- */

/* A decimal number, no hex, inf or nan. */
static int
parse_double(const char *s, double *v)
{
	const char *p;
	char *end;
	double d;

	if (*s == '\0')
		return 0;
	for (p = s; *p != '\0'; p++)
		if (!((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' ||
		        *p == 'E' || *p == '+' || *p == '-'))
			return 0;
	d = strtod(s, &end);
	if (*end != '\0' || end == s || !isfinite(d))
		return 0;
	*v = d;
	return 1;
}

static int
parse_enum(const char *s, const char *const *names, size_t n, int *v)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (word_eq(s, names[i])) {
			*v = (int)i;
			return 1;
		}
	}
	return 0;
}

static int
parse_bool(const char *s, int *v)
{
	static const char *const yes[] = { "true", "1", "yes", "on" };
	static const char *const no[] = { "false", "0", "no", "off" };
	int i;

	if (parse_enum(s, yes, 4, &i)) {
		*v = 1;
		return 1;
	}
	if (parse_enum(s, no, 4, &i)) {
		*v = 0;
		return 1;
	}
	return 0;
}

static void
join_names(char *buf, size_t len, const char *const *names, size_t n)
{
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
		    i == 0 ? "" : ", ", names[i]);
}

/* The message for a duration resil__duration_parse() refused. */
resil_err
resil__config_dur_fail(resil_diag *diag, const char *origin, unsigned line,
    const char *key, const char *v, int r, const char *unit_at)
{
	char why[RESIL_DIAG_MAX];

	resil__duration_why(why, sizeof(why), v, r, unit_at);
	return resil__config_fail(
	    diag, origin, line, "%s: \"%s\"%s", key, v, why);
}

/* ---- reading a value into its field ---- */

static resil_err
not_unsigned(const keyval *kv, resil_diag *diag)
{
	return resil__config_fail(diag, kv->origin, kv->line,
	    "%s: \"%s\" is not an unsigned integer", kv->key, kv->value);
}

static resil_err
out_of_range(const keydef *k, const keyval *kv, resil_diag *diag)
{
	uint64_t max =
	    k->kind == K_SIZE && k->max > SIZE_MAX ? SIZE_MAX : k->max;

	if (k->kind == K_DUR) {
		/* The bounds in the unit the value was written in (a number
		 * alone: milliseconds), not in nanoseconds. */
		char lo[64], hi[64];

		resil__duration_in_unit_of(lo, sizeof(lo), kv->value, k->min);
		resil__duration_in_unit_of(hi, sizeof(hi), kv->value, max);
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: %s is out of range %s..%s", kv->key, kv->value, lo,
		    hi);
	}
	return resil__config_fail(diag, kv->origin, kv->line,
	    "%s: %s is out of range %llu..%llu", kv->key, kv->value,
	    (unsigned long long)k->min, (unsigned long long)max);
}

/* A duration (a method's timeout) over 64 bits of nanoseconds. */
static resil_err
out_of_u64(const keyval *kv, resil_diag *diag)
{
	char hi[64];

	resil__duration_in_unit_of(hi, sizeof(hi), kv->value, UINT64_MAX);
	return resil__config_fail(diag, kv->origin, kv->line,
	    "%s: %s is out of range 0..%s", kv->key, kv->value, hi);
}

/* A duration (or "none" where the key allows it) into *u. */
static resil_err
read_duration(const keydef *k, const keyval *kv, uint64_t *u, resil_diag *diag)
{
	const char *unit_at = NULL;
	int r;

	if (k != NULL && (k->flags & F_NONE) && word_eq(kv->value, "none")) {
		*u = UINT64_MAX;
		return RESIL_OK;
	}
	r = resil__duration_parse(kv->value, u, &unit_at);
	if (r == RESIL__DUR_RANGE)
		return k != NULL ? out_of_range(k, kv, diag)
		                 : out_of_u64(kv, diag);
	if (r != RESIL__DUR_OK)
		return resil__config_dur_fail(diag, kv->origin, kv->line,
		    kv->key, kv->value, r, unit_at);
	if (k != NULL && (*u < k->min || *u > k->max))
		return out_of_range(k, kv, diag);
	return RESIL_OK;
}

/* K_ENABLED, K_BOOL: an int. */
static resil_err
read_bool(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	int e;

	(void)k;
	if (!parse_bool(kv->value, &e))
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not a boolean (true, false, yes, no, on, "
		    "off, 1, 0)",
		    kv->key, kv->value);
	memcpy(field, &e, sizeof(e));
	return RESIL_OK;
}

/* K_SERVICE, K_MOCK, K_ZONE: the value itself (it outlives the build). */
static resil_err
read_string(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	if (kv->value[0] == '\0' && k->kind == K_SERVICE)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "service: a service name is required");
	if (kv->value[0] == '\0' && k->kind == K_ZONE)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: a zone name is required", kv->key);
	if (k->kind == K_ZONE && !resil__zone_name_ok(kv->value))
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not a zone name (letters, digits, '_', "
		    "'-', '.')",
		    kv->key, kv->value);
	memcpy(field, &kv->value, sizeof(kv->value));
	return RESIL_OK;
}

/* K_SHARED (issue 24.2): the value checked here, opened by the pipeline
 * (lib/pipeline_shared.c). */
static resil_err
read_shared(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	resil_diag d;

	(void)k;
	d.msg[0] = '\0';
	if (resil__shared_url_check(kv->key, kv->value, &d) != RESIL_OK)
		return resil__config_fail(
		    diag, kv->origin, kv->line, "%s", d.msg);
	memcpy(field, &kv->value, sizeof(kv->value));
	return RESIL_OK;
}

static resil_err
read_strategy(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	resil_cluster_strategy cs;

	(void)k;
	if (resil_cluster_strategy_parse(kv->value, &cs) != RESIL_OK)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not one of failover, failfast, failsafe, "
		    "failback, broadcast, forking, zone-aware",
		    kv->key, kv->value);
	memcpy(field, &cs, sizeof(cs));
	return RESIL_OK;
}

static resil_err
read_i32(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	const char *v = kv->value;
	int neg = v[0] == '-';
	uint64_t u = 0;
	int32_t x;
	int r;

	r = resil__parse_digits(v + neg, strlen(v + neg), &u);
	if (r == 0)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not an integer", kv->key, v);
	if (neg || r < 0 || u < k->min || u > k->max)
		return out_of_range(k, kv, diag);
	x = (int32_t)u;
	memcpy(field, &x, sizeof(x));
	return RESIL_OK;
}

/* The names of an enum-valued key. */
static const struct enumdef {
	const char *const *names;
	size_t n;
} enums[] = {
	{ window_names, 2 },
	{ backoff_names, 3 },
	{ jitter_names, 6 },
};

static const struct enumdef *
enum_of(const keydef *k)
{
	return &enums[k->kind == K_WINDOW ? 0 : k->kind == K_BACKOFF ? 1 : 2];
}

/* K_WINDOW, K_BACKOFF, K_JITTER: one of the names. */
static resil_err
read_enum(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	const struct enumdef *en = enum_of(k);
	char names[128];
	int e;

	if (!parse_enum(kv->value, en->names, en->n, &e)) {
		join_names(names, sizeof(names), en->names, en->n);
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not one of %s", kv->key, kv->value, names);
	}
	if (k->kind == K_WINDOW) {
		resil_breaker_window_type w = (resil_breaker_window_type)e;

		memcpy(field, &w, sizeof(w));
	} else if (k->kind == K_BACKOFF) {
		memcpy(field, &backoff_values[e], sizeof(backoff_values[e]));
	} else {
		resil_retry_jitter j = (resil_retry_jitter)e;

		memcpy(field, &j, sizeof(j));
	}
	return RESIL_OK;
}

static resil_err
read_double(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	double d = 0.0;

	if (!parse_double(kv->value, &d))
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not a number", kv->key, kv->value);
	if (!(d >= k->dmin && d <= k->dmax))
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: %s is out of range %g..%g", kv->key, kv->value,
		    k->dmin, k->dmax);
	memcpy(field, &d, sizeof(d));
	return RESIL_OK;
}

static resil_err
read_dur(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	uint64_t u = 0;
	resil_err err = read_duration(k, kv, &u, diag);

	if (err == RESIL_OK)
		memcpy(field, &u, sizeof(u));
	return err;
}

/* K_U32, K_U64, K_SIZE. */
static resil_err
read_unsigned(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	uint64_t u = 0;
	int r = resil__parse_digits(kv->value, strlen(kv->value), &u);

	if (r == 0)
		return not_unsigned(kv, diag);
	if (r < 0 || u < k->min || u > k->max ||
	    (k->kind == K_SIZE && u > SIZE_MAX))
		return out_of_range(k, kv, diag);
	if ((k->flags & F_POW2) && (u & (u - 1)) != 0)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: %s is not a power of two in %llu..%llu", kv->key,
		    kv->value, (unsigned long long)k->min,
		    (unsigned long long)k->max);
	if (k->kind == K_U32) {
		uint32_t x = (uint32_t)u;

		memcpy(field, &x, sizeof(x));
	} else if (k->kind == K_SIZE) {
		size_t x = (size_t)u;

		memcpy(field, &x, sizeof(x));
	} else {
		memcpy(field, &u, sizeof(u));
	}
	return RESIL_OK;
}

/* ---- writing a field as text ---- */

static resil_err
put(char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (n >= len)
		return RESIL_E_INVAL;
	memcpy(buf, s, n + 1);
	return RESIL_OK;
}

/* An unsigned number as text. */
static resil_err
put_u64(char *buf, size_t len, uint64_t u)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)u);
	return put(buf, len, tmp);
}

/* The shortest decimal text that reads back as d. */
static void
format_double(char *buf, size_t len, double d)
{
	int prec;

	for (prec = 1; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

static resil_err
write_bool(const keydef *k, const void *field, char *buf, size_t len)
{
	int e;

	(void)k;
	memcpy(&e, field, sizeof(e));
	return put(buf, len, e ? "true" : "false");
}

/* K_SERVICE, K_MOCK, K_ZONE: what was set. */
static resil_err
write_string(const keydef *k, const void *field, char *buf, size_t len)
{
	const char *s;

	(void)k;
	memcpy(&s, field, sizeof(s));
	return s == NULL ? RESIL_E_NOTFOUND : put(buf, len, s);
}

static resil_err
write_strategy(const keydef *k, const void *field, char *buf, size_t len)
{
	resil_cluster_strategy cs;

	(void)k;
	memcpy(&cs, field, sizeof(cs));
	return put(buf, len, resil_cluster_strategy_name(cs));
}

static resil_err
write_i32(const keydef *k, const void *field, char *buf, size_t len)
{
	char tmp[32];
	int32_t x;

	(void)k;
	memcpy(&x, field, sizeof(x));
	snprintf(tmp, sizeof(tmp), "%d", (int)x);
	return put(buf, len, tmp);
}

static resil_err
write_enum(const keydef *k, const void *field, char *buf, size_t len)
{
	size_t i;

	if (k->kind == K_WINDOW) {
		resil_breaker_window_type w;

		memcpy(&w, field, sizeof(w));
		return put(buf, len, window_names[w == RESIL_WINDOW_TIME]);
	}
	if (k->kind == K_BACKOFF) {
		resil_retry_backoff b;

		memcpy(&b, field, sizeof(b));
		for (i = 0; i < 3; i++)
			if (backoff_values[i] == b)
				return put(buf, len, backoff_names[i]);
		return put(buf, len, "custom");
	}
	{
		resil_retry_jitter j;

		memcpy(&j, field, sizeof(j));
		if ((unsigned)j > 5u)
			return RESIL_E_NOTFOUND;
		return put(buf, len, jitter_names[j]);
	}
}

static resil_err
write_double(const keydef *k, const void *field, char *buf, size_t len)
{
	char tmp[64];
	double d;

	(void)k;
	memcpy(&d, field, sizeof(d));
	format_double(tmp, sizeof(tmp), d);
	return put(buf, len, tmp);
}

/* K_U32, K_SIZE, K_U64, K_DUR. */
static resil_err
write_unsigned(const keydef *k, const void *field, char *buf, size_t len)
{
	char tmp[64];
	uint64_t u;

	if (k->kind == K_U32) {
		uint32_t x;

		memcpy(&x, field, sizeof(x));
		return put_u64(buf, len, x);
	}
	if (k->kind == K_SIZE) {
		size_t x;

		memcpy(&x, field, sizeof(x));
		return put_u64(buf, len, x);
	}
	memcpy(&u, field, sizeof(u));
	if ((k->flags & F_NONE) && u == UINT64_MAX)
		return put(buf, len, "none");
	if (k->kind == K_DUR) {
		resil__duration_format(tmp, sizeof(tmp), u);
		return put(buf, len, tmp);
	}
	return put_u64(buf, len, u);
}

/* K_CLOCK: "system" (resil_clock_system(), the default) or "fast"
 * (resil_clock_fast(): the invariant TSC where the platform has one,
 * docs/clock.md). */
static resil_err
read_clock_key(
    const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	const resil_clock *c;

	(void)k;
	if (strcmp(kv->value, "system") == 0)
		c = resil_clock_system();
	else if (strcmp(kv->value, "fast") == 0)
		c = resil_clock_fast();
	else
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not one of system, fast", kv->key,
		    kv->value);
	*(const resil_clock **)field = c; /* the field's own type */
	return RESIL_OK;
}

static resil_err
write_clock_key(const keydef *k, const void *field, char *buf, size_t len)
{
	const resil_clock *c;

	(void)k;
	c = *(const resil_clock *const *)field;
	if (c == NULL || c == resil_clock_system())
		return put(buf, len, "system");
	if (c == resil_clock_fast())
		return put(buf, len, "fast");
	return RESIL_E_NOTFOUND; /* the caller's own clock */
}

/* K_KEYSRC (issue 41): a keyed family's key source, checked
 * (lib/keyed_spec.c), the value itself stored; written back as given. */
static resil_err
read_keysrc(const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	const char *dot = strchr(kv->key, '.');
	char kind[16];
	size_t n = dot != NULL ? (size_t)(dot - kv->key) : 0;
	resil_diag d;

	(void)k;
	if (n == 0 || n >= sizeof(kind))
		n = 0;
	memcpy(kind, kv->key, n);
	kind[n] = '\0';
	d.msg[0] = '\0';
	if (resil__keyed_parse_spec(kind, kv->value, &d) != RESIL_OK)
		return resil__config_fail(
		    diag, kv->origin, kv->line, "%s", d.msg);
	memcpy(field, &kv->value, sizeof(kv->value));
	return RESIL_OK;
}

static resil_err
write_keysrc(const keydef *k, const void *field, char *buf, size_t len)
{
	const char *s;
	size_t n;

	(void)k;
	memcpy(&s, field, sizeof(s));
	if (s == NULL)
		return RESIL_E_NOTFOUND;
	n = strlen(s);
	if (n >= len)
		return RESIL_E_INVAL;
	memcpy(buf, s, n + 1);
	return RESIL_OK;
}

/* Each kind of value: how it is read into its field, and written back. */
static const struct kindops {
	resil_err (*read)(
	    const keydef *k, const keyval *kv, void *field, resil_diag *diag);
	resil_err (*write)(
	    const keydef *k, const void *field, char *buf, size_t len);
} kinds[K_COUNT] = {
	[K_ENABLED] = { read_bool, write_bool },
	[K_BOOL] = { read_bool, write_bool },
	[K_U32] = { read_unsigned, write_unsigned },
	[K_U64] = { read_unsigned, write_unsigned },
	[K_SIZE] = { read_unsigned, write_unsigned },
	[K_DUR] = { read_dur, write_unsigned },
	[K_DOUBLE] = { read_double, write_double },
	[K_WINDOW] = { read_enum, write_enum },
	[K_BACKOFF] = { read_enum, write_enum },
	[K_JITTER] = { read_enum, write_enum },
	[K_SERVICE] = { read_string, write_string },
	[K_MOCK] = { read_string, write_string },
	[K_I32] = { read_i32, write_i32 },
	[K_STRATEGY] = { read_strategy, write_strategy },
	[K_ZONE] = { read_string, write_string },
	[K_SHARED] = { read_shared, write_string },      /* issue 24.2 */
	[K_CLOCK] = { read_clock_key, write_clock_key }, /* issue 39 */
	[K_HEDGE_ON] = { resil__hedge_on_read, resil__hedge_on_write },
	[K_KEYSRC] = { read_keysrc, write_keysrc }, /* issue 41 */
};

resil_err
resil__config_read(
    const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	return kinds[k->kind].read(k, kv, field, diag);
}

resil_err
resil__config_write(
    const keydef *k, const resil_pipeline_config *pc, char *buf, size_t len)
{
	return kinds[k->kind].write(k, (const char *)pc + k->off, buf, len);
}

size_t
resil__config_enabled_at(int stage)
{
	size_t i;

	for (i = 0; i < NKEYS; i++)
		if (keys[i].kind == K_ENABLED && keys[i].stage == stage)
			return keys[i].off;
	return 0;
}

/* ---- the keys of a declared method ---- */

static resil_err
mread_type(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	int e;

	for (e = 0; e <= (int)RESIL_TYPE_JSON; e++) {
		if (word_eq(kv->value, resil_type_name((resil_type)e))) {
			m->type = (resil_type)e;
			return RESIL_OK;
		}
	}
	return resil__config_fail(diag, kv->origin, kv->line,
	    "%s: \"%s\" is not a type (any, void, bool, int, double, string, "
	    "bytes, array, object, json)",
	    kv->key, kv->value);
}

static resil_err
mread_mock(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	(void)diag;
	m->mock = kv->value;
	return RESIL_OK;
}

static resil_err
mread_timeout(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	uint64_t u = 0;
	resil_err err = read_duration(NULL, kv, &u, diag);

	if (err == RESIL_OK)
		m->timeout_ns = u;
	return err;
}

/* max_attempts (at most RESIL_RETRY_MAX_ATTEMPTS), or Dubbo's retries
 * (0..999, one attempt more). */
static resil_err
mread_attempts(
    const keyval *kv, resil_method_config *m, resil_diag *diag, int retries)
{
	uint64_t u = 0, max = retries ? 999 : RESIL_RETRY_MAX_ATTEMPTS;
	int r;

	if (retries && kv->value[0] == '-')
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: %s is out of range 0..999", kv->key, kv->value);
	r = resil__parse_digits(kv->value, strlen(kv->value), &u);
	if (r == 0)
		return not_unsigned(kv, diag);
	if (r < 0 || u > max)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: %s is out of range 0..%u", kv->key, kv->value,
		    (unsigned)max);
	m->max_attempts = (uint32_t)u + (retries ? 1u : 0u);
	return RESIL_OK;
}

static resil_err
mread_max_attempts(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	return mread_attempts(kv, m, diag, 0);
}

static resil_err
mread_retries(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	return mread_attempts(kv, m, diag, 1);
}

static resil_err
mread_fresh(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	uint64_t u = 0;
	resil_err err = read_duration(NULL, kv, &u, diag);

	if (err == RESIL_OK)
		m->cache_fresh_ns = u;
	return err;
}

static resil_err
mwrite_type(const resil_method_config *m, char *buf, size_t len)
{
	return put(buf, len, resil_type_name(m->type));
}

static resil_err
mwrite_mock(const resil_method_config *m, char *buf, size_t len)
{
	return m->mock == NULL ? RESIL_E_NOTFOUND : put(buf, len, m->mock);
}

static resil_err
mwrite_timeout(const resil_method_config *m, char *buf, size_t len)
{
	char tmp[64];

	resil__duration_format(tmp, sizeof(tmp), m->timeout_ns);
	return put(buf, len, tmp);
}

static resil_err
mwrite_fresh(const resil_method_config *m, char *buf, size_t len)
{
	char tmp[64];

	if (m->cache_fresh_ns == 0)
		return RESIL_E_NOTFOUND;
	resil__duration_format(tmp, sizeof(tmp), m->cache_fresh_ns);
	return put(buf, len, tmp);
}

static resil_err
mwrite_max_attempts(const resil_method_config *m, char *buf, size_t len)
{
	return put_u64(buf, len, m->max_attempts);
}

static resil_err
mwrite_retries(const resil_method_config *m, char *buf, size_t len)
{
	if (m->max_attempts == 0)
		return RESIL_E_NOTFOUND;
	return put_u64(buf, len, m->max_attempts - 1);
}

/* Issue 42: the method's priority class. */
static resil_err
mread_priority(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	resil_priority p;

	if (resil_priority_parse(kv->value, &p) != RESIL_OK)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not a priority (critical, default, "
		    "sheddable)",
		    kv->key, kv->value);
	m->priority = p;
	return RESIL_OK;
}

static resil_err
mwrite_priority(const resil_method_config *m, char *buf, size_t len)
{
	if (m->priority == RESIL_PRIORITY_UNSET)
		return RESIL_E_NOTFOUND;
	return put(buf, len, resil_priority_name(m->priority));
}

/* Issue 43: coalescing, true (1024 waiters), false, or the bound. */
static resil_err
mread_coalesce(const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	const char *v = kv->value;
	char *end = NULL;
	unsigned long long u;

	if (strcmp(v, "true") == 0) {
		m->coalesce_max_waiters = 1024;
		return RESIL_OK;
	}
	if (strcmp(v, "false") == 0) {
		m->coalesce_max_waiters = 0;
		return RESIL_OK;
	}
	errno = 0;
	u = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
	if (end == NULL || *end != '\0' || errno != 0 || u > 1048576)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: \"%s\" is not true, false or a count of waiters "
		    "(0..1048576)",
		    kv->key, v);
	m->coalesce_max_waiters = (uint32_t)u;
	return RESIL_OK;
}

static resil_err
mwrite_coalesce(const resil_method_config *m, char *buf, size_t len)
{
	if (m->coalesce_max_waiters == 0)
		return RESIL_E_NOTFOUND;
	return put_u64(buf, len, m->coalesce_max_waiters);
}

/* The keys a declared method has, after "<method>.", in enum mkey's
 * order. */
static const struct mkeydef {
	const char *name;
	resil_err (*read)(
	    const keyval *kv, resil_method_config *m, resil_diag *diag);
	resil_err (*write)(
	    const resil_method_config *m, char *buf, size_t len);
} mkeys[MK_COUNT] = {
	{ "type", mread_type, mwrite_type },
	{ "mock", mread_mock, mwrite_mock },
	{ "timeout", mread_timeout, mwrite_timeout },
	{ "retry.max_attempts", mread_max_attempts, mwrite_max_attempts },
	{ "retries", mread_retries, mwrite_retries },
	{ "cache.fresh", mread_fresh, mwrite_fresh },
	{ "priority", mread_priority, mwrite_priority },
	{ "coalesce", mread_coalesce, mwrite_coalesce },
};

resil_err
resil__config_read_method(
    enum mkey mk, const keyval *kv, resil_method_config *m, resil_diag *diag)
{
	return mkeys[mk].read(kv, m, diag);
}

resil_err
resil__config_write_method(
    enum mkey mk, const resil_method_config *m, char *buf, size_t len)
{
	return mkeys[mk].write(m, buf, len);
}

/* ---- which key a line names ---- */

static size_t
edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	size_t row[64], prev, tmp;

	if (lb >= sizeof(row) / sizeof(row[0]) || la >= 64)
		return SIZE_MAX;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			tmp = row[j];
			row[j] = a[i - 1] == b[j - 1] ? prev : 1 + prev;
			if (row[j] > tmp + 1)
				row[j] = tmp + 1;
			if (row[j] > row[j - 1] + 1)
				row[j] = row[j - 1] + 1;
			prev = tmp;
		}
	}
	return row[lb];
}

static resil_err
unknown_key(resil_diag *diag, const char *origin, unsigned line,
    const char *key, const char *method)
{
	const char *best = NULL;
	size_t d, bd = 3, i;

	if (method != NULL) {
		/* A method key: suggest among the method keys. */
		const char *rest = key + strlen(method) + 1;

		for (i = 0; i < MK_COUNT; i++) {
			d = edit_distance(rest, mkeys[i].name);
			if (d < bd) {
				bd = d;
				best = mkeys[i].name;
			}
		}
		if (best != NULL)
			return resil__config_fail(diag, origin, line,
			    "%s: unknown key (did you mean %s.%s?)", key,
			    method, best);
		return resil__config_fail(diag, origin, line,
		    "%s: unknown key (a method has type, mock, timeout, "
		    "retry.max_attempts and priority)",
		    key);
	}
	for (i = 0; i < NKEYS; i++) {
		d = edit_distance(key, keys[i].name);
		if (d < bd) {
			bd = d;
			best = keys[i].name;
		}
	}
	if (best != NULL)
		return resil__config_fail(diag, origin, line,
		    "%s: unknown key (did you mean %s?)", key, best);
	return resil__config_fail(diag, origin, line, "%s: unknown key", key);
}

/* Whether key=value is a selector key (loadbalance=, router.*, outlier.*,
 * panic.threshold, <method>.loadbalance=, ...): *is set to 1 when it is
 * one and its value is good; an error for a bad value; RESIL_OK with *is
 * 0 for a key the selector does not know. value NULL: not tried. */
static resil_err
try_text(const char *key, const char *value, const resil_allocator *a,
    const char *origin, unsigned line, resil_diag *diag, int *is)
{
	resil_cluster_text *ct;
	resil_err err;

	*is = 0;
	if (value == NULL)
		return RESIL_OK;
	if (resil_cluster_text_new(&ct, a) != RESIL_OK)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	err = resil_cluster_text_set(
	    ct, key, value, line > 0 ? origin : NULL, line, diag);
	resil_cluster_text_free(ct);
	if (err == RESIL_E_NOTFOUND) {
		if (diag != NULL)
			diag->msg[0] = '\0';
		return RESIL_OK;
	}
	if (err == RESIL_OK)
		*is = 1;
	return err;
}

resil_err
resil__config_classify(const char *key, const char *value,
    const resil_allocator *a, const keydef **def, size_t *method_len,
    enum mkey *mk, const char *origin, unsigned line, resil_diag *diag)
{
	const char *dot;
	size_t i, n;
	char name[RESIL_DIAG_MAX];
	resil_err err;
	int is_text;

	for (i = 0; i < NKEYS; i++) {
		if (strcmp(key, keys[i].name) == 0) {
			*def = &keys[i];
			return RESIL_OK;
		}
	}
	err = try_text(key, value, a, origin, line, diag, &is_text);
	if (err != RESIL_OK)
		return err;
	if (is_text) {
		*def = NULL;
		*method_len = 0;
		*mk = MK_TEXT;
		return RESIL_OK;
	}
	dot = strchr(key, '.');
	if (dot == NULL)
		return unknown_key(diag, origin, line, key, NULL);
	n = (size_t)(dot - key);
	if (resil__method_reserved(key, n))
		return unknown_key(diag, origin, line, key, NULL);
	if (!resil__method_ident(key, n)) {
		/* Maybe a misspelt stage key rather than a method. */
		return resil__config_fail(diag, origin, line,
		    "%s: \"%.*s\" is not a method name (a letter, '_' or '$', "
		    "then letters, digits, '_' or '$')",
		    key, (int)n, key);
	}
	for (i = 0; i < MK_COUNT; i++) {
		if (strcmp(dot + 1, mkeys[i].name) == 0) {
			*def = NULL;
			*method_len = n;
			*mk = (enum mkey)i;
			return RESIL_OK;
		}
	}
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, key, n);
	name[n] = '\0';
	return unknown_key(diag, origin, line, key, name);
}

/* ---- hedge.on= ---- */

/*
 * hedge.on= (issue 43): a comma-separated list of failure, timeout and
 * rejected (each at most once), or none. Stored as its complement,
 * resil_pipeline_config.hedge_fatal, so that 0 (a zeroed config) keeps
 * every failure a reason to hedge.
 */
static const struct {
	const char *name;
	unsigned bit;
} hedge_kinds[] = {
	{ "failure", RESIL_HEDGE_ON_FAILURE },
	{ "timeout", RESIL_HEDGE_ON_TIMEOUT },
	{ "rejected", RESIL_HEDGE_ON_REJECTED },
};

#define HEDGE_NKINDS (sizeof(hedge_kinds) / sizeof(hedge_kinds[0]))

resil_err
resil__hedge_on_read(
    const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	const char *v = kv->value;
	unsigned on = 0, fatal;
	size_t i;

	(void)k;
	if (strcmp(v, "none") == 0) {
		fatal = RESIL_HEDGE_ON_ALL;
		memcpy(field, &fatal, sizeof(fatal));
		return RESIL_OK;
	}
	while (*v != '\0') {
		const char *end = strchr(v, ',');
		size_t n = end != NULL ? (size_t)(end - v) : strlen(v);

		for (i = 0; i < HEDGE_NKINDS; i++)
			if (strlen(hedge_kinds[i].name) == n &&
			    memcmp(hedge_kinds[i].name, v, n) == 0)
				break;
		if (i == HEDGE_NKINDS)
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%.*s\" is not one of failure, timeout, "
			    "rejected (a comma-separated list), or none",
			    kv->key, (int)(n < 64 ? n : 64), v);
		if (on & hedge_kinds[i].bit)
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: %s is listed twice", kv->key, hedge_kinds[i].name);
		on |= hedge_kinds[i].bit;
		if (end == NULL)
			break;
		v = end + 1;
		if (*v == '\0')
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%s\" ends with a comma", kv->key,
			    kv->value);
	}
	if (on == 0)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: empty: list failure, timeout, rejected, or say none",
		    kv->key);
	fatal = RESIL_HEDGE_ON_ALL & ~on;
	memcpy(field, &fatal, sizeof(fatal));
	return RESIL_OK;
}

resil_err
resil__hedge_on_write(
    const keydef *k, const void *field, char *buf, size_t len)
{
	unsigned fatal, on;
	size_t i, used = 0;

	(void)k;
	memcpy(&fatal, field, sizeof(fatal));
	on = RESIL_HEDGE_ON_ALL & ~fatal;
	if (len == 0)
		return RESIL_E_INVAL;
	buf[0] = '\0';
	if (on == 0) {
		if (len < 5)
			return RESIL_E_INVAL;
		memcpy(buf, "none", 5);
		return RESIL_OK;
	}
	for (i = 0; i < HEDGE_NKINDS; i++) {
		size_t n = strlen(hedge_kinds[i].name), sep = used > 0;

		if (!(on & hedge_kinds[i].bit))
			continue;
		if (used + sep + n >= len)
			return RESIL_E_INVAL;
		if (sep)
			buf[used++] = ',';
		memcpy(buf + used, hedge_kinds[i].name, n + 1);
		used += n;
	}
	return RESIL_OK;
}

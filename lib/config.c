/*
 * resil config: key=value text into a resil_pipeline_config.
 *
 * The config keeps the settings as given (key, value, line). The pipeline
 * configuration is always rebuilt from them, in order, on top of the
 * defaults, so resil_config_set() can try a change on a fresh build and
 * keep the old one when the change is refused.
 */
#include "duration.h"
#include "internal.h"
#include "pipeline_config.h"

#include <resil/config.h>

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORIGIN_STRING "<string>"

/* ---- the key table ---- */

enum stage {
	ST_NONE = 0,
	ST_BREAKER,
	ST_RETRY,
	ST_CACHE,
	ST_RATELIMIT,
	ST_BULKHEAD,
	ST_COUNT
};

enum kind {
	K_ENABLED, /* <stage>.enabled */
	K_BOOL,    /* an int field */
	K_U32,
	K_U64,
	K_SIZE,
	K_DUR, /* uint64_t nanoseconds: milliseconds, or a number with a unit
	        */
	K_DOUBLE,
	K_WINDOW,
	K_BACKOFF,
	K_JITTER,
	K_SERVICE,
	K_MOCK,
	K_I32,      /* an int32_t field; a leading '-' is read (and refused) */
	K_STRATEGY, /* cluster= */
	K_ZONE      /* zone= : a string */
};

#define F_NONE 1u /* "none" means UINT64_MAX (no limit) */
#define F_POW2 2u /* a power of two */

typedef struct keydef {
	const char *name;
	unsigned char kind;
	unsigned char stage;
	unsigned char flags;
	size_t off; /* into resil_pipeline_config */
	uint64_t min, max;
	double dmin, dmax;
} keydef;

#define PC(field) offsetof(resil_pipeline_config, field)
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
#define EN(n, st)                                      \
	{                                              \
		n, K_ENABLED, st, 0, 0, 0, 0, 0.0, 0.0 \
	}

static const keydef keys[] = {
	INT("service", K_SERVICE, ST_NONE, 0, service, 0, 0),
	INT("timeout", K_DUR, ST_NONE, 0, timeout_ns, 0, UINT64_MAX),
	INT("mock", K_MOCK, ST_NONE, 0, mock, 0, 0),

	EN("breaker.enabled", ST_BREAKER),
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

	EN("retry.enabled", ST_RETRY),
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

	EN("cache.enabled", ST_CACHE),
	INT("cache.max_entries", K_SIZE, ST_CACHE, 0, cache.max_entries, 1,
	    UINT64_C(1) << 32),
	INT("cache.max_bytes", K_SIZE, ST_CACHE, 0, cache.max_bytes, 1,
	    UINT64_MAX),
	INT("cache.max_age", K_DUR, ST_CACHE, F_NONE, cache.max_age, 0,
	    UINT64_MAX),
	INT("cache.shards", K_U32, ST_CACHE, F_POW2, cache.shards, 1, 256),

	EN("ratelimit.enabled", ST_RATELIMIT),
	INT("ratelimit.rate", K_U32, ST_RATELIMIT, 0, ratelimit.rate, 1,
	    U32MAX),
	INT("ratelimit.period", K_DUR, ST_RATELIMIT, 0, ratelimit.period_ns, 1,
	    UINT64_MAX),
	INT("ratelimit.burst", K_U32, ST_RATELIMIT, 0, ratelimit.burst, 1,
	    U32MAX),
	INT("ratelimit.batch", K_U32, ST_RATELIMIT, 0, ratelimit.batch, 0,
	    65536),

	EN("bulkhead.enabled", ST_BULKHEAD),
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

	INT("hedge.max", K_U32, ST_NONE, 0, hedge_max, 0, 7),
	INT("hedge.delay", K_DUR, ST_NONE, 0, hedge_delay_ns, 0, UINT64_MAX),

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
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

/* The keys a declared method has, after "<method>.". */
enum mkey {
	MK_TYPE,
	MK_MOCK,
	MK_TIMEOUT,
	MK_MAX_ATTEMPTS,
	MK_RETRIES, /* cluster: max_attempts = retries + 1 */
	MK_COUNT,
	MK_TEXT /* not a method key: a selector key (resil_cluster_text) */
};
static const char *const method_keys[MK_COUNT] = { "type", "mock", "timeout",
	"retry.max_attempts", "retries" };

static const char *const window_names[] = { "count", "time" };
static const char *const backoff_names[] = { "fixed", "exponential",
	"linear" };
static const resil_retry_backoff backoff_values[] = { RESIL_BACKOFF_FIXED,
	RESIL_BACKOFF_EXPONENTIAL, RESIL_BACKOFF_LINEAR };
static const char *const jitter_names[] = { "none", "proportional", "full",
	"equal", "decorrelated", "decorrelated_v2" };

/* ---- a string index ----
 *
 * Keys to array positions, so that reading n settings and n methods is
 * linear: open addressing over the positions (stored + 1, 0 is empty),
 * the strings read back through key_of, so the arrays may move. */

typedef const char *(*key_of_fn)(const void *ctx, size_t i);

typedef struct strtab {
	size_t *slot;
	size_t cap; /* a power of two, or 0 */
	size_t n;
} strtab;

static size_t
str_hash(const char *s)
{
	uint64_t h = UINT64_C(14695981039346656037);

	while (*s != '\0') {
		h ^= (unsigned char)*s++;
		h *= UINT64_C(1099511628211);
	}
	return (size_t)(h ^ (h >> 32));
}

/* The position of key, or -1. */
static long
strtab_find(
    const strtab *t, const char *key, key_of_fn key_of, const void *ctx)
{
	size_t i;

	if (t->cap == 0)
		return -1;
	for (i = str_hash(key) & (t->cap - 1); t->slot[i] != 0;
	     i = (i + 1) & (t->cap - 1))
		if (strcmp(key_of(ctx, t->slot[i] - 1), key) == 0)
			return (long)(t->slot[i] - 1);
	return -1;
}

static void
strtab_put(size_t *slot, size_t cap, size_t h, size_t pos)
{
	size_t i;

	for (i = h & (cap - 1); slot[i] != 0; i = (i + 1) & (cap - 1))
		;
	slot[i] = pos + 1;
}

/* Make room for want entries (at most half full). RESIL_E_NOMEM. */
static resil_err
strtab_reserve(strtab *t, const resil_allocator *a, size_t want,
    key_of_fn key_of, const void *ctx)
{
	if (2 * want > t->cap) {
		size_t cap = t->cap == 0 ? 16 : t->cap * 2, i;
		size_t *slot;

		if (cap > SIZE_MAX / sizeof(*slot))
			return RESIL_E_NOMEM;
		slot = resil__calloc(a, cap * sizeof(*slot));
		if (slot == NULL)
			return RESIL_E_NOMEM;
		for (i = 0; i < t->cap; i++)
			if (t->slot[i] != 0)
				strtab_put(slot, cap,
				    str_hash(key_of(ctx, t->slot[i] - 1)),
				    t->slot[i] - 1);
		if (t->slot != NULL)
			resil__free(a, t->slot, t->cap * sizeof(*t->slot));
		t->slot = slot;
		t->cap = cap;
	}
	return RESIL_OK;
}

/* Add position pos (its key not yet in t). RESIL_OK or RESIL_E_NOMEM. */
static resil_err
strtab_add(strtab *t, const resil_allocator *a, size_t pos, key_of_fn key_of,
    const void *ctx)
{
	if (strtab_reserve(t, a, t->n + 1, key_of, ctx) != RESIL_OK)
		return RESIL_E_NOMEM;
	strtab_put(t->slot, t->cap, str_hash(key_of(ctx, pos)), pos);
	t->n++;
	return RESIL_OK;
}

static void
strtab_free(strtab *t, const resil_allocator *a)
{
	if (t->slot != NULL)
		resil__free(a, t->slot, t->cap * sizeof(*t->slot));
	memset(t, 0, sizeof(*t));
}

/* ---- the config ---- */

typedef struct setting {
	char *key;
	char *value;
	char *method;      /* the method name of a method key, else NULL */
	unsigned line;     /* 0: made by resil_config_set */
	const keydef *def; /* NULL for a method key */
	enum mkey mk;
} setting;

struct resil_config {
	resil_allocator alloc;
	char *origin;
	setting *settings;
	size_t n, cap;
	resil_pipeline_config pc;
	resil_method_config *methods;
	size_t methods_cap;
	strtab index;           /* setting keys -> positions in settings */
	resil_cluster_text *ct; /* the selector keys, or NULL: none */
};

/*
 * A setting's value and line, as a build keeps them: the settings array
 * may move while a text is read, the strings it points to never do.
 */
typedef struct ref {
	const char *value;
	unsigned line;
} ref;

/* A pipeline configuration under construction. */
typedef struct build {
	const resil_allocator *a;
	const char *origin;
	resil_pipeline_config pc;
	resil_method_config *methods;
	ref *method_mock; /* each method's mock setting */
	size_t n, cap;
	strtab names; /* method names -> positions in methods */
	int touched[ST_COUNT];
	int enabled[ST_COUNT];   /* -1: not given */
	unsigned last[ST_COUNT]; /* the line of each stage's last key */
	int set_seen[ST_COUNT];  /* the stage has a key made by set */
	ref mock;
	resil_cluster_text *ct; /* the selector keys, or NULL: none */
	unsigned cluster_line;  /* the line of the last cluster key */
	int cluster_seen;
} build;

/* ---- small helpers ---- */

static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

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

/*
 * Write `origin:line: message` (or the message alone for a setting without
 * a line) into diag. The message is formatted first so that the prefix is
 * not cut by a long message's own truncation rules.
 */
static resil_err fail_at(resil_diag *diag, const char *origin, unsigned line,
    const char *fmt, ...) RESIL__PRINTF(4, 5);

static resil_err
fail_at(
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
			d = edit_distance(rest, method_keys[i]);
			if (d < bd) {
				bd = d;
				best = method_keys[i];
			}
		}
		if (best != NULL)
			return fail_at(diag, origin, line,
			    "%s: unknown key (did you mean %s.%s?)", key,
			    method, best);
		return fail_at(diag, origin, line,
		    "%s: unknown key (a method has type, mock, timeout and "
		    "retry.max_attempts)",
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
		return fail_at(diag, origin, line,
		    "%s: unknown key (did you mean %s?)", key, best);
	return fail_at(diag, origin, line, "%s: unknown key", key);
}

resil_err
resil_config_check_method(const resil_method_config *m, resil_diag *diag)
{
	/* The pipeline's own rules: resil_pipeline_new applies them too. */
	return resil__method_check(m, diag);
}

/*
 * Classify key: a stage key (*def set) or a method key (*method_len and
 * *mk set). Returns RESIL_OK or RESIL_E_INVAL with the message.
 */
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

static resil_err
classify(const char *key, const char *value, const resil_allocator *a,
    const keydef **def, size_t *method_len, enum mkey *mk, const char *origin,
    unsigned line, resil_diag *diag)
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
		return fail_at(diag, origin, line,
		    "%s: \"%.*s\" is not a method name (a letter, '_' or '$', "
		    "then letters, digits, '_' or '$')",
		    key, (int)n, key);
	}
	for (i = 0; i < MK_COUNT; i++) {
		if (strcmp(dot + 1, method_keys[i]) == 0) {
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
parse_bool(const char *s, int *v)
{
	static const char *const yes[] = { "true", "1", "yes", "on" };
	static const char *const no[] = { "false", "0", "no", "off" };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (word_eq(s, yes[i])) {
			*v = 1;
			return 1;
		}
		if (word_eq(s, no[i])) {
			*v = 0;
			return 1;
		}
	}
	return 0;
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

static void
join_names(char *buf, size_t len, const char *const *names, size_t n)
{
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
		    i == 0 ? "" : ", ", names[i]);
}

/* ---- building ---- */

static void
build_init(build *b, const resil_allocator *a, const char *origin)
{
	int i;

	memset(b, 0, sizeof(*b));
	b->a = a;
	b->origin = origin;
	resil_pipeline_config_init(&b->pc);
	for (i = 0; i < ST_COUNT; i++)
		b->enabled[i] = -1;
}

static void
build_discard(build *b)
{
	if (b->methods != NULL) {
		resil__free(b->a, b->methods, b->cap * sizeof(*b->methods));
		resil__free(
		    b->a, b->method_mock, b->cap * sizeof(*b->method_mock));
	}
	b->methods = NULL;
	b->method_mock = NULL;
	b->n = b->cap = 0;
	strtab_free(&b->names, b->a);
	resil_cluster_text_free(b->ct);
	b->ct = NULL;
}

static const char *
method_key(const void *ctx, size_t i)
{
	return ((const build *)ctx)->methods[i].name;
}

/* The index of method name, declaring it if new; -1 on no memory. */
static long
build_method(build *b, const char *name)
{
	resil_method_config *m;
	ref *mm;
	size_t cap;

	{
		long at = strtab_find(&b->names, name, method_key, b);

		if (at >= 0)
			return at;
	}
	if (b->n == b->cap) {
		cap = b->cap == 0 ? 4 : b->cap * 2;
		m = resil__alloc(b->a, cap * sizeof(*m));
		mm = resil__alloc(b->a, cap * sizeof(*mm));
		if (m == NULL || mm == NULL) {
			if (m != NULL)
				resil__free(b->a, m, cap * sizeof(*m));
			if (mm != NULL)
				resil__free(b->a, mm, cap * sizeof(*mm));
			return -1;
		}
		if (b->n > 0) {
			memcpy(m, b->methods, b->n * sizeof(*m));
			memcpy(mm, b->method_mock, b->n * sizeof(*mm));
		}
		if (b->methods != NULL) {
			resil__free(
			    b->a, b->methods, b->cap * sizeof(*b->methods));
			resil__free(b->a, b->method_mock,
			    b->cap * sizeof(*b->method_mock));
		}
		b->methods = m;
		b->method_mock = mm;
		b->cap = cap;
	}
	m = &b->methods[b->n];
	memset(m, 0, sizeof(*m));
	m->name = name;
	m->type = RESIL_TYPE_ANY;
	b->method_mock[b->n].value = NULL;
	b->method_mock[b->n].line = 0;
	if (strtab_add(&b->names, b->a, b->n, method_key, b) != RESIL_OK)
		return -1;
	return (long)b->n++;
}

/* The message for a duration resil__duration_parse() refused. */
static resil_err
dur_fail(resil_diag *diag, const char *origin, unsigned line, const char *key,
    const char *v, int r, const char *unit_at)
{
	const char *hint;

	switch (r) {
	case RESIL__DUR_SPACE:
		return fail_at(diag, origin, line,
		    "%s: \"%s\": write the unit next to the number (%.*s%s)",
		    key, v, (int)strcspn(v, " \t"), v, unit_at);
	case RESIL__DUR_UNIT:
		hint = resil__duration_unit_hint(unit_at);
		if (hint != NULL)
			return fail_at(diag, origin, line,
			    "%s: \"%s\": unknown unit \"%s\" (did you mean "
			    "%.*s%s?)",
			    key, v, unit_at, (int)(unit_at - v), v, hint);
		return fail_at(diag, origin, line,
		    "%s: \"%s\": unknown unit \"%s\" (units: " RESIL__DUR_UNITS
		    ")",
		    key, v, unit_at);
	case RESIL__DUR_COMMA:
		return fail_at(diag, origin, line,
		    "%s: \"%s\": write a fraction with '.', not ','", key, v);
	case RESIL__DUR_FRACT:
		return fail_at(diag, origin, line,
		    "%s: \"%s\" is not a whole number of nanoseconds", key, v);
	default:
		return fail_at(diag, origin, line,
		    "%s: \"%s\" is not a duration (a number of "
		    "milliseconds, or a number with a unit: ns, us, ms, s, m, "
		    "h)",
		    key, v);
	}
}

/* Apply one setting to b. */
static resil_err
build_apply(build *b, const setting *s, resil_diag *diag)
{
	const keydef *k = s->def;
	const char *v = s->value;
	unsigned line = s->line;
	char *field;
	char names[128];
	uint64_t u = 0;
	double d = 0.0;
	const char *unit_at = NULL;
	int r, e;

	if (k == NULL && s->mk == MK_TEXT) {
		if (b->ct == NULL &&
		    resil_cluster_text_new(&b->ct, b->a) != RESIL_OK)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
		return resil_cluster_text_set(b->ct, s->key, s->value,
		    line > 0 ? b->origin : NULL, line, diag);
	}
	if (k == NULL) {
		long i = build_method(b, s->method);
		resil_method_config *m;

		if (i < 0)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
		m = &b->methods[i];
		switch (s->mk) {
		case MK_TYPE:
			for (e = 0; e <= (int)RESIL_TYPE_JSON; e++) {
				if (word_eq(
				        v, resil_type_name((resil_type)e))) {
					m->type = (resil_type)e;
					return RESIL_OK;
				}
			}
			return fail_at(diag, b->origin, line,
			    "%s: \"%s\" is not a type (any, void, bool, int, "
			    "double, string, bytes, array, object, json)",
			    s->key, v);
		case MK_MOCK:
			m->mock = v;
			b->method_mock[i].value = s->value;
			b->method_mock[i].line = s->line;
			return RESIL_OK;
		case MK_TIMEOUT:
			r = resil__duration_parse(v, &u, &unit_at);
			if (r == RESIL__DUR_RANGE)
				goto range_u64;
			if (r != RESIL__DUR_OK)
				return dur_fail(diag, b->origin, line, s->key,
				    v, r, unit_at);
			m->timeout_ns = u;
			return RESIL_OK;
		case MK_RETRIES:
			if (v[0] == '-')
				return fail_at(diag, b->origin, line,
				    "%s: %s is out of range 0..999", s->key,
				    v);
			r = resil__parse_digits(v, strlen(v), &u);
			if (r == 0)
				goto bad_integer;
			if (r < 0 || u > 999)
				return fail_at(diag, b->origin, line,
				    "%s: %s is out of range 0..999", s->key,
				    v);
			m->max_attempts = (uint32_t)u + 1;
			return RESIL_OK;
		default:
			r = resil__parse_digits(v, strlen(v), &u);
			if (r == 0)
				goto bad_integer;
			if (r < 0 || u > RESIL_RETRY_MAX_ATTEMPTS)
				return fail_at(diag, b->origin, line,
				    "%s: %s is out of range 0..%u", s->key, v,
				    (unsigned)RESIL_RETRY_MAX_ATTEMPTS);
			m->max_attempts = (uint32_t)u;
			return RESIL_OK;
		}
	}

	field = (char *)&b->pc + k->off;
	if (k->off >= PC(cluster) &&
	    k->off < PC(cluster) + sizeof(resil_cluster_config)) {
		b->cluster_seen = 1;
		b->cluster_line = line;
	}
	if (k->stage != ST_NONE) {
		/* A setting made by set is newer than every line of the
		 * text: once the stage has one, its errors are the set's. */
		if (s->line == 0)
			b->set_seen[k->stage] = 1;
		b->last[k->stage] = b->set_seen[k->stage] ? 0 : s->line;
		b->touched[k->stage] = 1;
	}
	switch (k->kind) {
	case K_ENABLED:
	case K_BOOL:
		if (!parse_bool(v, &e))
			return fail_at(diag, b->origin, line,
			    "%s: \"%s\" is not a boolean (true, false, yes, "
			    "no, "
			    "on, off, 1, 0)",
			    s->key, v);
		if (k->kind == K_ENABLED)
			b->enabled[k->stage] = e;
		else
			memcpy(field, &e, sizeof(e));
		return RESIL_OK;
	case K_SERVICE:
		if (*v == '\0')
			return fail_at(diag, b->origin, line,
			    "service: a service name is required");
		b->pc.service = v;
		return RESIL_OK;
	case K_MOCK:
		b->pc.mock = v;
		b->mock.value = s->value;
		b->mock.line = s->line;
		return RESIL_OK;
	case K_STRATEGY: {
		resil_cluster_strategy cs;

		if (resil_cluster_strategy_parse(v, &cs) != RESIL_OK)
			return fail_at(diag, b->origin, line,
			    "%s: \"%s\" is not one of failover, failfast, "
			    "failsafe, failback, broadcast, forking, "
			    "zone-aware",
			    s->key, v);
		b->pc.cluster.strategy = cs;
		return RESIL_OK;
	}
	case K_ZONE:
		if (*v == '\0')
			return fail_at(diag, b->origin, line,
			    "%s: a zone name is required", s->key);
		b->pc.cluster.local_zone = v;
		return RESIL_OK;
	case K_I32: {
		int32_t x;
		int neg = v[0] == '-';

		r = resil__parse_digits(v + neg, strlen(v + neg), &u);
		if (r == 0)
			return fail_at(diag, b->origin, line,
			    "%s: \"%s\" is not an integer", s->key, v);
		if (neg || r < 0 || u < k->min || u > k->max)
			return fail_at(diag, b->origin, line,
			    "%s: %s is out of range %llu..%llu", s->key, v,
			    (unsigned long long)k->min,
			    (unsigned long long)k->max);
		x = (int32_t)u;
		memcpy(field, &x, sizeof(x));
		return RESIL_OK;
	}
	case K_WINDOW:
		if (!parse_enum(v, window_names, 2, &e))
			goto bad_enum;
		b->pc.breaker.window_type = (resil_breaker_window_type)e;
		return RESIL_OK;
	case K_BACKOFF:
		if (!parse_enum(v, backoff_names, 3, &e))
			goto bad_enum;
		b->pc.retry.backoff = backoff_values[e];
		return RESIL_OK;
	case K_JITTER:
		if (!parse_enum(v, jitter_names, 6, &e))
			goto bad_enum;
		b->pc.retry.jitter = (resil_retry_jitter)e;
		return RESIL_OK;
	case K_DOUBLE:
		if (!parse_double(v, &d))
			return fail_at(diag, b->origin, line,
			    "%s: \"%s\" is not a number", s->key, v);
		if (!(d >= k->dmin && d <= k->dmax))
			return fail_at(diag, b->origin, line,
			    "%s: %s is out of range %g..%g", s->key, v,
			    k->dmin, k->dmax);
		memcpy(field, &d, sizeof(d));
		return RESIL_OK;
	case K_DUR:
		if ((k->flags & F_NONE) && word_eq(v, "none")) {
			u = UINT64_MAX;
		} else {
			r = resil__duration_parse(v, &u, &unit_at);
			if (r == RESIL__DUR_RANGE)
				goto range;
			if (r != RESIL__DUR_OK)
				return dur_fail(diag, b->origin, line, s->key,
				    v, r, unit_at);
			if (u < k->min)
				goto range;
		}
		memcpy(field, &u, sizeof(u));
		return RESIL_OK;
	default: /* K_U32, K_U64, K_SIZE */
		r = resil__parse_digits(v, strlen(v), &u);
		if (r == 0)
			goto bad_integer;
		if (r < 0 || u < k->min || u > k->max ||
		    (k->kind == K_SIZE && u > SIZE_MAX))
			goto range;
		if ((k->flags & F_POW2) && (u & (u - 1)) != 0)
			return fail_at(diag, b->origin, line,
			    "%s: %s is not a power of two in %llu..%llu",
			    s->key, v, (unsigned long long)k->min,
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

bad_enum:
	if (k->kind == K_WINDOW)
		join_names(names, sizeof(names), window_names, 2);
	else if (k->kind == K_BACKOFF)
		join_names(names, sizeof(names), backoff_names, 3);
	else
		join_names(names, sizeof(names), jitter_names, 6);
	return fail_at(diag, b->origin, line, "%s: \"%s\" is not one of %s",
	    s->key, v, names);
bad_integer:
	return fail_at(diag, b->origin, line,
	    "%s: \"%s\" is not an unsigned integer", s->key, v);
range_u64:
	return fail_at(diag, b->origin, line,
	    "%s: %s is out of range 0..18446744073709551615", s->key, v);
range:
	if (k->kind == K_SIZE && k->max > SIZE_MAX)
		return fail_at(diag, b->origin, line,
		    "%s: %s is out of range %llu..%llu", s->key, v,
		    (unsigned long long)k->min, (unsigned long long)SIZE_MAX);
	return fail_at(diag, b->origin, line,
	    "%s: %s is out of range %llu..%llu", s->key, v,
	    (unsigned long long)k->min, (unsigned long long)k->max);
}

/* Check a mock spec; its message names key instead of "mock". */
static resil_err
check_mock(build *b, const ref *s, const char *name, resil_type type,
    resil_diag *diag)
{
	resil_mock_spec spec;
	resil_diag d;
	resil_err err;
	const char *msg;

	d.msg[0] = '\0';
	err = resil_mock_parse(&spec, s->value, type, b->a, &d);
	if (err == RESIL_OK) {
		resil_mock_spec_free(&spec);
		return RESIL_OK;
	}
	if (err != RESIL_E_INVAL)
		return resil__diagf(diag, err, "config: out of memory");
	msg = d.msg;
	if (strncmp(msg, "mock: ", 6) == 0)
		msg += 6;
	if (name != NULL)
		return fail_at(
		    diag, b->origin, s->line, "%s.mock: %s", name, msg);
	return fail_at(diag, b->origin, s->line, "mock: %s", msg);
}

/*
 * The stages name their struct fields (`retry.max_delay_ns`); a config
 * user wrote keys (`retry.max_delay`). Longer names come first so that
 * open_wait_max_ns is not taken for open_wait_ns.
 */
static const char *const renames[][2] = {
	{ "open_wait_max_ns", "open_wait_max" },
	{ "open_wait_ns", "open_wait" },
	{ "slow_threshold_ns", "slow_threshold" },
	{ "failure_rate_pct", "failure_rate" },
	{ "slow_rate_pct", "slow_rate" },
	{ "max_half_open_ns", "max_half_open" },
	{ "permitted_probes", "probes" },
	{ "window_type", "window" },
	{ "bucket_ns", "bucket" },
	{ "base_delay_ns", "delay" },
	{ "max_delay_ns", "max_delay" },
	{ "deadline_ns", "deadline" },
	{ "budget_period_ns", "budget_period" },
	{ "target_latency_ns", "target_latency" },
	{ "period_ns", "period" },
};

static int
is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_';
}

/* Copy the digits at *in to out as a duration ("10000000000" -> "10s"):
 * the stage's numbers are nanoseconds, the text's are not. */
static void
put_duration(const char **in, char *out, size_t len, size_t *o)
{
	uint64_t v = 0;
	size_t n = 0;
	char tmp[32];
	const char *t;

	while ((*in)[n] >= '0' && (*in)[n] <= '9')
		n++;
	if (n == 0 || is_word((*in)[n]) ||
	    resil__parse_digits(*in, n, &v) != 1)
		return;
	*in += n;
	resil__duration_format(tmp, sizeof(tmp), v);
	for (t = tmp; *t != '\0' && *o + 1 < len; t++)
		out[(*o)++] = *t;
}

/* Copy in to out (len bytes), each whole-word field name renamed; the
 * number that follows a duration field (after ": ", " " or " (") and the
 * bound of a ">= N" after one are written with a unit. */
static void
rename_fields(const char *in, char *out, size_t len)
{
	size_t o = 0, i, n = 0;
	int dur_seen = 0;

	while (*in != '\0' && o + 1 < len) {
		const char *to = NULL;
		int dur = 0;

		if (is_word(*in) && (o == 0 || !is_word(out[o - 1]))) {
			for (i = 0; i < sizeof(renames) / sizeof(renames[0]);
			     i++) {
				n = strlen(renames[i][0]);
				if (strncmp(in, renames[i][0], n) == 0 &&
				    !is_word(in[n])) {
					to = renames[i][1];
					dur = n > 3 &&
					    strcmp(renames[i][0] + n - 3,
					        "_ns") == 0;
					break;
				}
			}
		}
		if (to == NULL) {
			if (dur_seen && strncmp(in, ">= ", 3) == 0 &&
			    in[3] >= '0' && in[3] <= '9') {
				for (i = 0; i < 3 && o + 1 < len; i++)
					out[o++] = *in++;
				put_duration(&in, out, len, &o);
				continue;
			}
			out[o++] = *in++;
			continue;
		}
		in += n;
		while (*to != '\0' && o + 1 < len)
			out[o++] = *to++;
		if (!dur)
			continue;
		dur_seen = 1;
		{
			const char *p = in;

			if (*p == ':')
				p++;
			if (*p == ' ')
				p++;
			if (*p == '(')
				p++;
			if (*p >= '0' && *p <= '9') {
				while (in < p && o + 1 < len)
					out[o++] = *in++;
				put_duration(&in, out, len, &o);
			}
		}
	}
	out[o] = '\0';
}

static resil_err
stage_fail(build *b, int stage, const resil_diag *d, resil_diag *diag)
{
	unsigned line = b->last[stage];
	char msg[RESIL_DIAG_MAX];

	rename_fields(d->msg, msg, sizeof(msg));
	return fail_at(diag, b->origin, line, "%s", msg);
}

/* After the last setting: stage switches, mock specs, stage checks. */
static resil_err
build_finish(build *b, resil_diag *diag)
{
	resil_diag d;
	resil_err err;
	size_t i;
	int st;

	for (st = ST_BREAKER; st < ST_COUNT; st++) {
		int on = b->enabled[st] >= 0 ? b->enabled[st] : b->touched[st];

		switch (st) {
		case ST_BREAKER:
			b->pc.breaker_enabled = on;
			break;
		case ST_RETRY:
			b->pc.retry_enabled = on;
			break;
		case ST_CACHE:
			b->pc.cache_enabled = on;
			break;
		case ST_RATELIMIT:
			b->pc.ratelimit_enabled = on;
			break;
		default:
			b->pc.bulkhead_enabled = on;
			break;
		}
	}
	if (b->mock.value != NULL) {
		err = check_mock(b, &b->mock, NULL, RESIL_TYPE_ANY, diag);
		if (err != RESIL_OK)
			return err;
	}
	for (i = 0; i < b->n; i++) {
		/* The rules of the API too (the text cannot break them:
		 * each was checked as its key was read). */
		d.msg[0] = '\0';
		if (resil_config_check_method(&b->methods[i], &d) != RESIL_OK)
			return fail_at(diag, b->origin, b->method_mock[i].line,
			    "%s", d.msg);
		if (b->method_mock[i].value == NULL)
			continue;
		err = check_mock(b, &b->method_mock[i], b->methods[i].name,
		    b->methods[i].type, diag);
		if (err != RESIL_OK)
			return err;
	}
	d.msg[0] = '\0';
	if (b->pc.breaker_enabled &&
	    resil_breaker_config_validate(&b->pc.breaker, &d) != RESIL_OK)
		return stage_fail(b, ST_BREAKER, &d, diag);
	if (b->pc.retry_enabled &&
	    resil_retry_config_validate(&b->pc.retry, &d) != RESIL_OK)
		return stage_fail(b, ST_RETRY, &d, diag);
	if (b->pc.ratelimit_enabled &&
	    resil_ratelimit_config_validate(&b->pc.ratelimit, &d) != RESIL_OK)
		return stage_fail(b, ST_RATELIMIT, &d, diag);
	if (b->pc.bulkhead_enabled &&
	    resil_bulkhead_config_validate(&b->pc.bulkhead, &d) != RESIL_OK)
		return stage_fail(b, ST_BULKHEAD, &d, diag);
	if (b->cluster_seen &&
	    resil_cluster_config_validate(&b->pc.cluster, &d) != RESIL_OK)
		return fail_at(diag, b->origin, b->cluster_line, "%s", d.msg);
	if (b->ct != NULL &&
	    (err = resil_cluster_text_finish(b->ct, diag)) != RESIL_OK)
		return err;
	/* The cache has no cross-field rule: its fields were checked one by
	 * one as they were read. */
	b->pc.methods = b->n > 0 ? b->methods : NULL;
	b->pc.nmethods = b->n;
	return RESIL_OK;
}

/* Make b the config's pipeline configuration; b is consumed. */
static void
install(resil_config *conf, build *b)
{
	if (conf->methods != NULL)
		resil__free(&conf->alloc, conf->methods,
		    conf->methods_cap * sizeof(*conf->methods));
	if (b->method_mock != NULL)
		resil__free(
		    b->a, b->method_mock, b->cap * sizeof(*b->method_mock));
	conf->pc = b->pc;
	conf->methods = b->methods;
	conf->methods_cap = b->cap;
	resil_cluster_text_free(conf->ct);
	conf->ct = b->ct;
	b->ct = NULL;
	b->methods = NULL;
	b->method_mock = NULL;
	strtab_free(&b->names, b->a);
}

/* Rebuild from every setting. */
static resil_err
rebuild(resil_config *conf, resil_diag *diag)
{
	build b;
	resil_err err = RESIL_OK;
	size_t i;

	build_init(&b, &conf->alloc, conf->origin);
	for (i = 0; i < conf->n && err == RESIL_OK; i++)
		err = build_apply(&b, &conf->settings[i], diag);
	if (err == RESIL_OK)
		err = build_finish(&b, diag);
	if (err != RESIL_OK) {
		build_discard(&b);
		return err;
	}
	install(conf, &b);
	return RESIL_OK;
}

/* ---- settings ---- */

static void
setting_free(const resil_allocator *a, setting *s)
{
	resil__strfree(a, s->key);
	resil__strfree(a, s->value);
	resil__strfree(a, s->method);
	memset(s, 0, sizeof(*s));
}

static resil_err
settings_reserve(resil_config *conf)
{
	setting *ns;
	size_t cap;

	if (conf->n < conf->cap)
		return RESIL_OK;
	cap = conf->cap == 0 ? 16 : conf->cap * 2;
	ns = resil__alloc(&conf->alloc, cap * sizeof(*ns));
	if (ns == NULL)
		return RESIL_E_NOMEM;
	if (conf->n > 0)
		memcpy(ns, conf->settings, conf->n * sizeof(*ns));
	if (conf->settings != NULL)
		resil__free(&conf->alloc, conf->settings,
		    conf->cap * sizeof(*conf->settings));
	conf->settings = ns;
	conf->cap = cap;
	return RESIL_OK;
}

/*
 * Fill *s from key and value (both trimmed, not NUL-terminated), checking
 * the key. Nothing is kept on error.
 */
static resil_err
setting_make(resil_config *conf, setting *s, const char *key, size_t klen,
    const char *value, size_t vlen, unsigned line, resil_diag *diag)
{
	const resil_allocator *a = &conf->alloc;
	size_t mlen = 0;
	resil_err err;

	memset(s, 0, sizeof(*s));
	s->line = line;
	s->key = resil__strndup(a, key, klen);
	s->value = resil__strndup(a, value, vlen);
	if (s->key == NULL || s->value == NULL)
		goto nomem;
	err = classify(s->key, s->value, a, &s->def, &mlen, &s->mk,
	    conf->origin, line, diag);
	if (err != RESIL_OK) {
		setting_free(a, s);
		return err;
	}
	if (s->def == NULL && s->mk != MK_TEXT) {
		s->method = resil__strndup(a, s->key, mlen);
		if (s->method == NULL)
			goto nomem;
	}
	return RESIL_OK;
nomem:
	setting_free(a, s);
	return resil__diagf(diag, RESIL_E_NOMEM, "config: out of memory");
}

static const char *
setting_key(const void *ctx, size_t i)
{
	return ((const resil_config *)ctx)->settings[i].key;
}

static long
setting_find(const resil_config *conf, const char *key)
{
	return strtab_find(&conf->index, key, setting_key, conf);
}

static void
trim(const char **s, size_t *n)
{
	while (*n > 0 && is_blank(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && is_blank((*s)[*n - 1]))
		(*n)--;
}

static resil_err
config_alloc(resil_config **out, const char *origin,
    const resil_allocator *alloc, resil_diag *diag)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil_config *conf;

	if (alloc != NULL && (alloc->alloc == NULL || alloc->free == NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "config.alloc: the allocator lacks alloc or free");
	conf = resil__calloc(a, sizeof(*conf));
	if (conf == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	conf->alloc = *a;
	conf->origin = resil__strndup(a, origin, strlen(origin));
	if (conf->origin == NULL) {
		resil__free(a, conf, sizeof(*conf));
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	}
	resil_pipeline_config_init(&conf->pc);
	*out = conf;
	return RESIL_OK;
}

/* Parse n bytes of text into conf, which is empty. */
static resil_err
parse_text(resil_config *conf, const char *text, size_t len, resil_diag *diag)
{
	build b;
	resil_err err = RESIL_OK;
	size_t pos = 0;
	unsigned line = 0;

	/* A UTF-8 byte order mark is not part of the first key. */
	if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
		pos = 3;
	build_init(&b, &conf->alloc, conf->origin);
	while (pos < len && err == RESIL_OK) {
		const char *ln = text + pos, *eq, *nl;
		const char *k, *v;
		size_t n, kn, vn;
		long prev;

		nl = memchr(ln, '\n', len - pos);
		n = nl != NULL ? (size_t)(nl - ln) : len - pos;
		pos += n + 1;
		line++;
		trim(&ln, &n);
		if (n == 0 || ln[0] == '#')
			continue;
		if (memchr(ln, '\0', n) != NULL) {
			err = fail_at(diag, conf->origin, line,
			    "a NUL byte in the line");
			break;
		}
		eq = memchr(ln, '=', n);
		if (eq == NULL) {
			err = fail_at(diag, conf->origin, line,
			    "\"%.*s\" is not a key=value setting",
			    (int)(n > 64 ? 64 : n), ln);
			break;
		}
		k = ln;
		kn = (size_t)(eq - ln);
		v = eq + 1;
		vn = n - kn - 1;
		trim(&k, &kn);
		trim(&v, &vn);
		if (kn == 0) {
			err = fail_at(
			    diag, conf->origin, line, "empty key before '='");
			break;
		}
		err = settings_reserve(conf);
		if (err != RESIL_OK) {
			err = resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
			break;
		}
		err = setting_make(
		    conf, &conf->settings[conf->n], k, kn, v, vn, line, diag);
		if (err != RESIL_OK)
			break;
		prev = setting_find(conf, conf->settings[conf->n].key);
		/* router.condition appends a rule each time it is given. */
		if (prev >= 0 &&
		    strcmp(conf->settings[conf->n].key, "router.condition") !=
		        0) {
			err = fail_at(diag, conf->origin, line,
			    "%s: set again (first set at line %u)",
			    conf->settings[conf->n].key,
			    conf->settings[prev].line);
			setting_free(&conf->alloc, &conf->settings[conf->n]);
			break;
		}
		conf->n++;
		if (strtab_add(&conf->index, &conf->alloc, conf->n - 1,
		        setting_key, conf) != RESIL_OK) {
			err = resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
			break;
		}
		err = build_apply(&b, &conf->settings[conf->n - 1], diag);
	}
	if (err == RESIL_OK)
		err = build_finish(&b, diag);
	if (err != RESIL_OK) {
		build_discard(&b);
		return err;
	}
	install(conf, &b);
	return RESIL_OK;
}

/* ---- public ---- */

static resil_err
parse_buffer(resil_config **out, const char *text, size_t len,
    const char *origin, const resil_allocator *alloc, resil_diag *diag)
{
	resil_config *conf = NULL;
	resil_err err;

	err = config_alloc(&conf, origin, alloc, diag);
	if (err != RESIL_OK)
		return err;
	err = parse_text(conf, text, len, diag);
	if (err != RESIL_OK) {
		resil_config_free(conf);
		return err;
	}
	*out = conf;
	return RESIL_OK;
}

resil_err
resil_config_parse_string(resil_config **out, const char *text,
    const char *origin, const resil_allocator *alloc, resil_diag *diag)
{
	if (out == NULL || text == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "config: NULL argument");
	return parse_buffer(out, text, strlen(text),
	    origin != NULL ? origin : ORIGIN_STRING, alloc, diag);
}

resil_err
resil_config_new(resil_config **out, const resil_allocator *alloc)
{
	return resil_config_parse_string(out, "", NULL, alloc, NULL);
}

resil_err
resil_config_parse_file(resil_config **out, const char *path,
    const resil_allocator *alloc, resil_diag *diag)
{
	const resil_allocator *a;
	FILE *f;
	char *buf, *nb;
	size_t cap = 4096, len = 0, got;
	resil_err err;
	int e;

	if (out == NULL || path == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "config: NULL argument");
	if (alloc != NULL && (alloc->alloc == NULL || alloc->free == NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "config.alloc: the allocator lacks alloc or free");
	a = resil__allocator(alloc);
	f = fopen(path, "rb");
	if (f == NULL) {
		e = errno;
		return resil__diagf(diag, RESIL_E_NOTFOUND,
		    "%s: cannot open: %s", path,
		    e == ENOENT       ? "no such file"
		        : e == EACCES ? "permission denied"
		                      : "cannot be opened");
	}
	buf = resil__alloc(a, cap);
	if (buf == NULL) {
		fclose(f);
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	}
	for (;;) {
		got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (len < cap)
			break;
		nb = cap <= SIZE_MAX / 2 ? resil__alloc(a, cap * 2) : NULL;
		if (nb == NULL) {
			resil__free(a, buf, cap);
			fclose(f);
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
		}
		memcpy(nb, buf, len);
		resil__free(a, buf, cap);
		buf = nb;
		cap *= 2;
	}
	if (ferror(f)) {
		resil__free(a, buf, cap);
		fclose(f);
		return resil__diagf(
		    diag, RESIL_E_NOTFOUND, "%s: cannot read the file", path);
	}
	fclose(f);
	err = parse_buffer(out, buf, len, path, alloc, diag);
	resil__free(a, buf, cap);
	return err;
}

void
resil_config_free(resil_config *conf)
{
	resil_allocator a;
	size_t i;

	if (conf == NULL)
		return;
	a = conf->alloc;
	for (i = 0; i < conf->n; i++)
		setting_free(&a, &conf->settings[i]);
	if (conf->settings != NULL)
		resil__free(&a, conf->settings, conf->cap * sizeof(setting));
	if (conf->methods != NULL)
		resil__free(&a, conf->methods,
		    conf->methods_cap * sizeof(*conf->methods));
	strtab_free(&conf->index, &a);
	resil_cluster_text_free(conf->ct);
	resil__strfree(&a, conf->origin);
	resil__free(&a, conf, sizeof(*conf));
}

const resil_pipeline_config *
resil_config_pipeline(const resil_config *conf)
{
	return conf != NULL ? &conf->pc : NULL;
}

resil_err
resil_config_set(
    resil_config *conf, const char *key, const char *value, resil_diag *diag)
{
	setting s, old;
	const char *k = key, *v = value;
	size_t kn, vn;
	long at;
	resil_err err;

	if (conf == NULL || key == NULL || value == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "config: NULL argument");
	kn = strlen(k);
	vn = strlen(v);
	trim(&k, &kn);
	trim(&v, &vn);
	if (kn == 0)
		return resil__diagf(diag, RESIL_E_INVAL, "config: empty key");
	if (settings_reserve(conf) != RESIL_OK)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	err = setting_make(conf, &s, k, kn, v, vn, 0, diag);
	if (err != RESIL_OK)
		return err;
	/* router.condition appends a rule, as each line of it in a text
	 * does; every other key replaces the value it had. */
	at = strcmp(s.key, "router.condition") == 0
	    ? -1
	    : setting_find(conf, s.key);
	if (at < 0 &&
	    strtab_reserve(&conf->index, &conf->alloc, conf->n + 1,
	        setting_key, conf) != RESIL_OK) {
		setting_free(&conf->alloc, &s);
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	}
	if (at >= 0) {
		old = conf->settings[at];
		conf->settings[at] = s;
	} else {
		conf->settings[conf->n++] = s;
	}
	err = rebuild(conf, diag);
	if (err == RESIL_OK && at < 0) {
		/* Room was made before: this cannot fail. */
		err = strtab_add(&conf->index, &conf->alloc, conf->n - 1,
		    setting_key, conf);
	}
	if (err != RESIL_OK) {
		/* Put everything back; the old build is still installed. */
		if (at >= 0)
			conf->settings[at] = old;
		else
			conf->n--;
		setting_free(&conf->alloc, &s);
		return err;
	}
	if (at >= 0)
		setting_free(&conf->alloc, &old);
	return RESIL_OK;
}

static resil_err
put(char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (n >= len)
		return RESIL_E_INVAL;
	memcpy(buf, s, n + 1);
	return RESIL_OK;
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

resil_err
resil_config_get(
    const resil_config *conf, const char *key, char *buf, size_t len)
{
	const keydef *k = NULL;
	const resil_pipeline_config *pc;
	const char *field;
	char tmp[64];
	size_t i, mlen = 0;
	enum mkey mk = MK_TYPE;
	uint64_t u;
	uint32_t x32;
	size_t xs;
	double d;
	int e;

	if (conf == NULL || key == NULL || buf == NULL || len == 0)
		return RESIL_E_INVAL;
	pc = &conf->pc;
	if (classify(key, NULL, NULL, &k, &mlen, &mk, NULL, 0, NULL) !=
	    RESIL_OK)
		return RESIL_E_NOTFOUND;
	if (k == NULL) {
		const resil_method_config *m = NULL;

		for (i = 0; i < pc->nmethods; i++) {
			if (strlen(pc->methods[i].name) == mlen &&
			    memcmp(pc->methods[i].name, key, mlen) == 0)
				m = &pc->methods[i];
		}
		if (m == NULL)
			return RESIL_E_NOTFOUND;
		switch (mk) {
		case MK_TYPE:
			return put(buf, len, resil_type_name(m->type));
		case MK_MOCK:
			return m->mock == NULL ? RESIL_E_NOTFOUND
			                       : put(buf, len, m->mock);
		case MK_TIMEOUT:
			resil__duration_format(
			    tmp, sizeof(tmp), m->timeout_ns);
			return put(buf, len, tmp);
		case MK_RETRIES:
			if (m->max_attempts == 0)
				return RESIL_E_NOTFOUND;
			snprintf(tmp, sizeof(tmp), "%u",
			    (unsigned)m->max_attempts - 1);
			return put(buf, len, tmp);
		default:
			snprintf(
			    tmp, sizeof(tmp), "%u", (unsigned)m->max_attempts);
			return put(buf, len, tmp);
		}
	}
	field = (const char *)pc + k->off;
	switch (k->kind) {
	case K_ENABLED:
		e = k->stage == ST_BREAKER     ? pc->breaker_enabled
		    : k->stage == ST_RETRY     ? pc->retry_enabled
		    : k->stage == ST_CACHE     ? pc->cache_enabled
		    : k->stage == ST_RATELIMIT ? pc->ratelimit_enabled
		                               : pc->bulkhead_enabled;
		return put(buf, len, e ? "true" : "false");
	case K_BOOL:
		memcpy(&e, field, sizeof(e));
		return put(buf, len, e ? "true" : "false");
	case K_SERVICE:
		return pc->service == NULL ? RESIL_E_NOTFOUND
		                           : put(buf, len, pc->service);
	case K_MOCK:
		return pc->mock == NULL ? RESIL_E_NOTFOUND
		                        : put(buf, len, pc->mock);
	case K_WINDOW:
		return put(buf, len,
		    window_names[pc->breaker.window_type ==
		        RESIL_WINDOW_TIME]);
	case K_BACKOFF:
		for (i = 0; i < 3; i++)
			if (backoff_values[i] == pc->retry.backoff)
				return put(buf, len, backoff_names[i]);
		return put(buf, len, "custom");
	case K_JITTER:
		if ((unsigned)pc->retry.jitter > 5u)
			return RESIL_E_NOTFOUND;
		return put(buf, len, jitter_names[pc->retry.jitter]);
	case K_STRATEGY:
		return put(buf, len,
		    resil_cluster_strategy_name(pc->cluster.strategy));
	case K_ZONE:
		return pc->cluster.local_zone == NULL
		    ? RESIL_E_NOTFOUND
		    : put(buf, len, pc->cluster.local_zone);
	case K_I32: {
		int32_t x;

		memcpy(&x, field, sizeof(x));
		snprintf(tmp, sizeof(tmp), "%d", (int)x);
		return put(buf, len, tmp);
	}
	case K_DOUBLE:
		memcpy(&d, field, sizeof(d));
		format_double(tmp, sizeof(tmp), d);
		return put(buf, len, tmp);
	case K_U32:
		memcpy(&x32, field, sizeof(x32));
		u = x32;
		break;
	case K_SIZE:
		memcpy(&xs, field, sizeof(xs));
		u = xs;
		break;
	default: /* K_U64, K_DUR */
		memcpy(&u, field, sizeof(u));
		if ((k->flags & F_NONE) && u == UINT64_MAX)
			return put(buf, len, "none");
		if (k->kind == K_DUR) {
			resil__duration_format(tmp, sizeof(tmp), u);
			return put(buf, len, tmp);
		}
		break;
	}
	snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)u);
	return put(buf, len, tmp);
}

int
resil_config_selector(const resil_config *conf, resil_selector_config *out)
{
	if (out == NULL)
		return 0;
	resil_cluster_text_selector(conf != NULL ? conf->ct : NULL, out);
	if (conf == NULL)
		return 0;
	if (out->service == NULL || out->service[0] == '\0')
		out->service = conf->pc.service;
	return conf->ct != NULL;
}

int
resil_config_directory(const resil_config *conf, resil_directory_config *out)
{
	if (conf == NULL || out == NULL)
		return 0;
	if (conf->ct == NULL)
		return 0;
	resil_cluster_text_directory(conf->ct, out);
	return 1;
}

resil_err
resil_config_parse_duration(const char *text, uint64_t *ns, resil_diag *diag)
{
	const char *unit_at = NULL;
	uint64_t v = 0;
	int r;

	if (text == NULL || ns == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "duration: NULL argument");
	r = resil__duration_parse(text, &v, &unit_at);
	if (r == RESIL__DUR_RANGE)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "duration: %s is out of range 0..18446744073709551615ns",
		    text);
	if (r != RESIL__DUR_OK)
		return dur_fail(diag, NULL, 0, "duration", text, r, unit_at);
	*ns = v;
	return RESIL_OK;
}

size_t
resil_config_format_duration(uint64_t ns, char *buf, size_t len)
{
	int n;

	if (buf == NULL)
		len = 0;
	n = resil__duration_format(buf, len, ns);
	return n < 0 ? 0 : (size_t)n;
}

size_t
resil_config_count(const resil_config *conf)
{
	return conf != NULL ? conf->n : 0;
}

resil_err
resil_config_entry(
    const resil_config *conf, size_t i, resil_config_setting *out)
{
	const setting *s;

	if (conf == NULL || out == NULL)
		return RESIL_E_INVAL;
	if (i >= conf->n)
		return RESIL_E_NOTFOUND;
	s = &conf->settings[i];
	out->key = s->key;
	out->value = s->value;
	out->origin = s->line > 0 ? conf->origin : NULL;
	out->line = s->line;
	return RESIL_OK;
}

/* ---- reload from text: the parser above, then the pipeline's reload ---- */

resil_err
resil_pipeline_reload_string(
    resil_pipeline *p, const char *text, const char *origin, resil_diag *diag)
{
	resil_config *conf;
	resil_err err;

	if (p == NULL || text == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline: %s is NULL", p == NULL ? "p" : "text");
	err = resil_config_parse_string(
	    &conf, text, origin, resil__pipeline_allocator(p), diag);
	if (err != RESIL_OK)
		return err;
	err = resil_pipeline_reload(p, resil_config_pipeline(conf), diag);
	resil_config_free(conf);
	return err;
}

resil_err
resil_pipeline_reload_file(
    resil_pipeline *p, const char *path, resil_diag *diag)
{
	resil_config *conf;
	resil_err err;

	if (p == NULL || path == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline: %s is NULL", p == NULL ? "p" : "path");
	err = resil_config_parse_file(
	    &conf, path, resil__pipeline_allocator(p), diag);
	if (err != RESIL_OK)
		return err;
	err = resil_pipeline_reload(p, resil_config_pipeline(conf), diag);
	resil_config_free(conf);
	return err;
}

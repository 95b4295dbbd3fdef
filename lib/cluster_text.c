/*
 * The cluster keys of a configuration text (resil_cluster_text in
 * include/resil/selector.h): loadbalance, router.*, panic, outlier,
 * registry, url (the static endpoints) and endpoint.breaker keys, checked
 * one at a time, into the selector's and the directory's configurations.
 * Above the selector, routers, balancers and directory it configures;
 * lib/config.c feeds it, and asks it about the pipeline keys beside them
 * (lib/cluster_text.h).
 */
#include <resil/selector.h>

#include "cluster_text.h"
#include "directory_internal.h"
#include "duration.h"
#include "router_internal.h"
#include "source_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- configuration text ----------------------------------------------- */

/* Which fields of a method's balancer were set. */
enum {
	SET_KIND = 1,
	SET_NODES = 2,
	SET_ARGS = 4,
	SET_TAU = 8,
	SET_RTT = 16,
	SET_SLIDE = 32
};

typedef struct cc_method {
	unsigned set;
	unsigned line; /* of its last key, for finish()'s messages; 0: none */
	resil_balance_config b;
} cc_method;

struct resil_cluster_text {
	const resil_allocator *a;
	char *service;
	resil_balance_config balance;
	unsigned balance_set;
	resil_method_balance *methods; /* resolved by finish() */
	cc_method *raw;
	size_t nmethods, cap;
	char *zone;
	resil_zone_mode zone_mode;
	uint32_t zone_min;
	char **znames;
	uint32_t *zcons;
	size_t nz;
	int tag_force;
	resil_condition **conds;
	size_t nconds, ccap;
	int cond_force;
	uint32_t panic;
	uint64_t seed; /* loadbalance.seed */
	resil_outlier_config outlier;
	uint32_t enforcing_consecutive; /* issue 38.14; default 100 */
	/* The interval detections: on once one of their keys is given. */
	resil_outlier_rate_config rate;
	int rate_on;
	/* Active health checks: on once a health.* key is given, unless
	 * health.enabled=false (health_enabled: -1 unset, 0, 1). */
	resil_health_config health;
	int health_on, health_enabled;
	int empty_protection; /* registry.empty_protection; default 1 */
	/* The static endpoints (url=), each string its own copy. */
	resil_endpoint_spec *eps;
	size_t neps;
	/* Each endpoint's breaker: on once an endpoint.breaker.* key is
	 * given, unless endpoint.breaker.enabled=false (eb_enabled: -1
	 * unset, 0, 1). */
	resil_breaker_config eb;
	int eb_on, eb_enabled;
	int zone_mode_set; /* router.zone.mode was given */
	int zone_min_set;  /* router.zone.min_cluster_size was given */
	/* Where finish()'s cross-field messages point: the first origin
	 * given to set (a copy), the line of the key being set, and that of
	 * the last outlier key. */
	char *origin;
	unsigned cur_line, outlier_line;
	/* The lines of router.zone, router.zone.mode, url and the last
	 * endpoint.breaker key (0: not given, or given without origin). */
	unsigned zone_line, mode_line, url_line, eb_line;
	unsigned consumers_line,
	    min_line; /* router.zone.consumers, .min_... */
};

resil_err
resil_cluster_text_new(resil_cluster_text **out, const resil_allocator *alloc)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil_cluster_text *cc;
	resil_directory_config dc;

	if (out == NULL)
		return RESIL_E_INVAL;
	cc = resil__calloc(a, sizeof(*cc));
	if (cc == NULL)
		return RESIL_E_NOMEM;
	cc->a = a;
	resil_balance_config_init(&cc->balance);
	cc->zone_mode = RESIL_ZONE_PREFER;
	cc->zone_min = 6;
	cc->panic = 50;
	cc->seed = RESIL_SELECTOR_SEED;
	resil_directory_config_init(&dc);
	cc->outlier = dc.outlier;
	cc->enforcing_consecutive = dc.outlier_enforcing_consecutive_failures;
	cc->empty_protection = dc.empty_protection;
	resil_outlier_rate_config_init(&cc->rate);
	resil_health_config_init(&cc->health);
	cc->health_enabled = -1;
	resil_breaker_config_init(&cc->eb);
	cc->eb_enabled = -1;
	*out = cc;
	return RESIL_OK;
}

static void
zones_free(resil_cluster_text *cc)
{
	size_t i;

	for (i = 0; i < cc->nz; i++)
		resil__strfree(cc->a, cc->znames[i]);
	if (cc->znames != NULL)
		resil__free(cc->a, cc->znames, cc->nz * sizeof(char *));
	if (cc->zcons != NULL)
		resil__free(cc->a, cc->zcons, cc->nz * sizeof(uint32_t));
	cc->znames = NULL;
	cc->zcons = NULL;
	cc->nz = 0;
}

/* specs[0..n) and their strings; NULL strings are skipped. */
static void
eps_free(const resil_allocator *a, resil_endpoint_spec *specs, size_t n)
{
	size_t i;

	if (specs == NULL)
		return;
	for (i = 0; i < n; i++) {
		resil__strfree(a, (char *)(uintptr_t)specs[i].address);
		resil__strfree(a, (char *)(uintptr_t)specs[i].zone);
		resil__strfree(a, (char *)(uintptr_t)specs[i].tag);
		resil__strfree(a, (char *)(uintptr_t)specs[i].params);
	}
	resil__free(a, specs, n * sizeof(*specs));
}

void
resil_cluster_text_free(resil_cluster_text *cc)
{
	size_t i;

	if (cc == NULL)
		return;
	for (i = 0; i < cc->nmethods; i++)
		resil__strfree(
		    cc->a, (char *)(uintptr_t)cc->methods[i].method);
	if (cc->methods != NULL) {
		resil__free(
		    cc->a, cc->methods, cc->cap * sizeof(*cc->methods));
		resil__free(cc->a, cc->raw, cc->cap * sizeof(*cc->raw));
	}
	for (i = 0; i < cc->nconds; i++)
		resil_condition_free(cc->conds[i]);
	if (cc->conds != NULL)
		resil__free(
		    cc->a, cc->conds, cc->ccap * sizeof(resil_condition *));
	zones_free(cc);
	eps_free(cc->a, cc->eps, cc->neps);
	resil__strfree(cc->a, cc->service);
	resil__strfree(cc->a, cc->zone);
	resil__strfree(cc->a, cc->origin);
	resil__free(cc->a, cc, sizeof(*cc));
}

static int
parse_u64(const char *s, uint64_t *v)
{
	uint64_t x = 0;

	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return 1;
}

static int
zone_ok(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		        (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' ||
		        *s == '.'))
			return 0;
	return 1;
}

static int
method_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		        (s[i] >= 'A' && s[i] <= 'Z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		        s[i] == '$'))
			return 0;
	return 1;
}

#define BAD(...) resil__diagf(diag, RESIL_E_INVAL, __VA_ARGS__)

static resil_err
u32_in(const char *key, const char *v, uint32_t lo, uint32_t hi, uint32_t *out,
    resil_diag *diag)
{
	uint64_t x = 0;
	int r = parse_u64(v, &x);

	if (r == 0)
		return BAD("%s: \"%s\" is not an unsigned integer", key, v);
	if (r < 0 || x < lo || x > hi)
		return BAD("%s: %s is out of range %u..%u", key, v, lo, hi);
	*out = (uint32_t)x;
	return RESIL_OK;
}

/* A duration as every key of configuration text reads it
 * (lib/duration.c, DESIGN: a bare number is milliseconds in every
 * duration key), with the parser's messages. */
static resil_err
dur_min(const char *key, const char *v, uint64_t lo, uint64_t *out,
    resil_diag *diag)
{
	const char *unit_at = NULL, *hint;
	char b1[64], b2[64];
	uint64_t x = 0;
	int r = resil__duration_parse(v, &x, &unit_at);

	switch (r) {
	case RESIL__DUR_OK:
		break;
	case RESIL__DUR_RANGE: /* the bounds in the value's unit */
		resil__duration_in_unit_of(b1, sizeof(b1), v, 0);
		resil__duration_in_unit_of(b2, sizeof(b2), v, UINT64_MAX);
		return BAD("%s: %s is out of range %s..%s", key, v, b1, b2);
	case RESIL__DUR_SPACE:
		return BAD("%s: \"%s\": write the unit next to the number "
		           "(%.*s%s)",
		    key, v, (int)strcspn(v, " \t"), v, unit_at);
	case RESIL__DUR_UNIT:
		hint = resil__duration_unit_hint(unit_at);
		if (hint != NULL)
			return BAD("%s: \"%s\": unknown unit \"%s\" (did you "
			           "mean %.*s%s?)",
			    key, v, unit_at, (int)(unit_at - v), v, hint);
		return BAD(
		    "%s: \"%s\": unknown unit \"%s\" (units: " RESIL__DUR_UNITS
		    ")",
		    key, v, unit_at);
	case RESIL__DUR_COMMA:
		return BAD(
		    "%s: \"%s\": write a fraction with '.', not ','", key, v);
	case RESIL__DUR_FRACT:
		return BAD(
		    "%s: \"%s\" is not a whole number of nanoseconds", key, v);
	default:
		return BAD(
		    "%s: \"%s\" is not a duration (a number of "
		    "milliseconds, or a number with a unit: ns, us, ms, "
		    "s, m, h)",
		    key, v);
	}
	if (x < lo) { /* the minimum in the value's unit (issue 38.8) */
		resil__duration_in_unit_of(b1, sizeof(b1), v, lo);
		return BAD("%s: %s is below the minimum of %s", key, v, b1);
	}
	*out = x;
	return RESIL_OK;
}

/* ---- the keys ---------------------------------------------------------- */

/* How a key's value is read into its field: a whole number in lo..hi, a
 * duration of at least lo, a boolean, or by a function of its own (which
 * gets the object the key's table is for). */
enum { K_U32, K_DUR, K_BOOL, K_FN };

typedef resil_err (*key_fn)(
    void *obj, const char *key, const char *v, resil_diag *diag);

/* One key of a table: its name (a balancer key's: after "loadbalance"),
 * how its value is read into the field at off, and the SET_ bit it marks
 * (a method's balancer keys). */
typedef struct key_def {
	const char *name;
	unsigned char kind;
	unsigned set;
	size_t off;
	uint64_t lo, hi;
	key_fn fn;
} key_def;

/* Read v, the value of key, into obj as k says. */
static resil_err
key_apply(const key_def *k, void *obj, const char *key, const char *v,
    resil_diag *diag)
{
	void *field = (char *)obj + k->off;
	int b;

	switch (k->kind) {
	case K_U32:
		return u32_in(
		    key, v, (uint32_t)k->lo, (uint32_t)k->hi, field, diag);
	case K_DUR:
		return dur_min(key, v, k->lo, field, diag);
	case K_BOOL:
		if (!resil__parse_bool(v, &b))
			return BAD("%s: \"%s\" is not a boolean", key, v);
		*(int *)field = b;
		return RESIL_OK;
	default:
		return k->fn(obj, key, v, diag);
	}
}

/* The key of table (n of them) called name; NULL: none. */
static const key_def *
key_find(const key_def *table, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

/* loadbalance: a balancer's name. */
static resil_err
set_kind(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_balance_config *b = obj;
	resil_lb_kind k;

	if (resil_lb_kind_parse(v, &k, diag) != RESIL_OK)
		return BAD("%s: \"%s\" is not one of random, roundrobin, "
		           "leastactive, p2c, peakewma, hash, shortest",
		    key, v);
	b->kind = k;
	return RESIL_OK;
}

/* loadbalance.hash.arguments: a comma list of argument indexes. */
static resil_err
set_hash_args(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_balance_config *b = obj;
	uint32_t args[RESIL_HASH_MAX_ARGS], n = 0;
	const char *p = v;

	for (;;) {
		char num[16];
		size_t len = strcspn(p, ",");
		uint64_t x = 0;
		int r;
		while (*p == ' ' && len > 0) {
			p++;
			len--;
		}
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len == 0 || len >= sizeof(num))
			return BAD("%s: \"%s\" at column %zu: expected an "
			           "argument index",
			    key, v, (size_t)(p - v) + 1);
		memcpy(num, p, len);
		num[len] = '\0';
		r = parse_u64(num, &x);
		if (r == 0)
			return BAD(
			    "%s: \"%s\" at column %zu: \"%s\" is not an "
			    "argument index",
			    key, v, (size_t)(p - v) + 1, num);
		if (r < 0 || x > 255)
			return BAD(
			    "%s: index %s is out of range 0..255", key, num);
		if (n == RESIL_HASH_MAX_ARGS)
			return BAD("%s: more than %d indexes", key,
			    RESIL_HASH_MAX_ARGS);
		args[n++] = (uint32_t)x;
		p += strcspn(p, ",");
		if (*p == '\0')
			break;
		p++;
	}
	memcpy(b->hash_args, args, n * sizeof(args[0]));
	b->hash_nargs = n;
	return RESIL_OK;
}

#define BAL(f) offsetof(resil_balance_config, f)

/* A balancer's keys, after "loadbalance" (the service's) or
 * "<method>.loadbalance". */
static const key_def balance_keys[] = {
	{ "", K_FN, SET_KIND, 0, 0, 0, set_kind },
	{ ".hash.nodes", K_U32, SET_NODES, BAL(hash_nodes), 1, 10000, NULL },
	{ ".hash.arguments", K_FN, SET_ARGS, 0, 0, 0, set_hash_args },
	{ ".peakewma.tau", K_DUR, SET_TAU, BAL(ewma_tau), 1, 0, NULL },
	{ ".peakewma.default_rtt", K_DUR, SET_RTT, BAL(ewma_default_rtt), 0, 0,
	    NULL },
	{ ".shortest.slide", K_DUR, SET_SLIDE, BAL(shortest_slide), 0, 0,
	    NULL },
};

/* A balancer key (sub: after "loadbalance") into *b, marking *set. */
static resil_err
set_balance(const char *key, const char *sub, const char *v,
    resil_balance_config *b, unsigned *set, resil_diag *diag)
{
	const key_def *k = key_find(
	    balance_keys, sizeof(balance_keys) / sizeof(balance_keys[0]), sub);
	resil_err err;

	if (k == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOTFOUND, "%s: unknown key", key);
	/* A number counts as set even when its value is refused. */
	if (k->kind != K_FN)
		*set |= k->set;
	err = key_apply(k, b, key, v, diag);
	if (err == RESIL_OK)
		*set |= k->set;
	return err;
}

static resil_err
method_slot(resil_cluster_text *cc, const char *name, size_t len, size_t *out)
{
	size_t i;

	for (i = 0; i < cc->nmethods; i++)
		if (strlen(cc->methods[i].method) == len &&
		    memcmp(cc->methods[i].method, name, len) == 0) {
			*out = i;
			return RESIL_OK;
		}
	if (cc->nmethods == cc->cap) {
		size_t nc = cc->cap == 0 ? 4 : cc->cap * 2;
		resil_method_balance *m =
		    resil__calloc(cc->a, nc * sizeof(*m));
		cc_method *r = resil__calloc(cc->a, nc * sizeof(*r));
		if (m == NULL || r == NULL) {
			if (m != NULL)
				resil__free(cc->a, m, nc * sizeof(*m));
			if (r != NULL)
				resil__free(cc->a, r, nc * sizeof(*r));
			return RESIL_E_NOMEM;
		}
		if (cc->methods != NULL) {
			memcpy(m, cc->methods, cc->nmethods * sizeof(*m));
			memcpy(r, cc->raw, cc->nmethods * sizeof(*r));
			resil__free(cc->a, cc->methods, cc->cap * sizeof(*m));
			resil__free(cc->a, cc->raw, cc->cap * sizeof(*r));
		}
		cc->methods = m;
		cc->raw = r;
		cc->cap = nc;
	}
	cc->methods[cc->nmethods].method = resil__strndup(cc->a, name, len);
	if (cc->methods[cc->nmethods].method == NULL)
		return RESIL_E_NOMEM;
	resil_balance_config_init(&cc->raw[cc->nmethods].b);
	cc->raw[cc->nmethods].set = 0;
	*out = cc->nmethods++;
	return RESIL_OK;
}

/* router.zone.consumers: zone:count,... */
static resil_err
set_consumers(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;
	char **names = NULL;
	uint32_t *cons = NULL;
	size_t n = 1, i = 0, k;
	const char *p;
	resil_err err;

	for (p = v; *p != '\0'; p++)
		n += *p == ',';
	names = resil__calloc(cc->a, n * sizeof(char *));
	cons = resil__calloc(cc->a, n * sizeof(uint32_t));
	if (names == NULL || cons == NULL) {
		err = RESIL_E_NOMEM;
		goto fail;
	}
	p = v;
	for (i = 0; i < n; i++) {
		size_t len = strcspn(p, ",");
		const char *colon = memchr(p, ':', len);
		char num[16];
		uint64_t x = 0;
		if (colon == NULL || colon == p ||
		    (size_t)(p + len - colon - 1) >= sizeof(num) ||
		    p + len == colon + 1) {
			err = BAD(
			    "%s: \"%s\" at column %zu: expected zone:count",
			    key, v, (size_t)(p - v) + 1);
			goto fail;
		}
		names[i] = resil__strndup(cc->a, p, (size_t)(colon - p));
		if (names[i] == NULL) {
			err = RESIL_E_NOMEM;
			goto fail;
		}
		if (!zone_ok(names[i])) {
			err = BAD(
			    "%s: \"%s\" at column %zu: \"%s\" is not a zone "
			    "name",
			    key, v, (size_t)(p - v) + 1, names[i]);
			goto fail;
		}
		for (k = 0; k < i; k++)
			if (strcmp(names[k], names[i]) == 0) {
				err = BAD("%s: \"%s\" at column %zu: zone "
				          "\"%s\" is given twice",
				    key, v, (size_t)(p - v) + 1, names[i]);
				goto fail;
			}
		memcpy(num, colon + 1, (size_t)(p + len - colon - 1));
		num[p + len - colon - 1] = '\0';
		if (parse_u64(num, &x) != 1 || x > UINT32_MAX) {
			err = BAD("%s: \"%s\" at column %zu: \"%s\" is not a "
			          "count",
			    key, v, (size_t)(colon - v) + 2, num);
			goto fail;
		}
		cons[i] = (uint32_t)x;
		p += len + (p[len] == ',');
	}
	zones_free(cc);
	cc->znames = names;
	cc->zcons = cons;
	cc->nz = n;
	return RESIL_OK;
fail:
	if (names != NULL) {
		for (k = 0; k < n; k++)
			resil__strfree(cc->a, names[k]);
		resil__free(cc->a, names, n * sizeof(char *));
	}
	if (cons != NULL)
		resil__free(cc->a, cons, n * sizeof(uint32_t));
	return err;
}

/* *field = a copy of v, the old one freed. */
static resil_err
str_set(resil_cluster_text *cc, char **field, const char *v)
{
	char *s = resil__strdup(cc->a, v);

	if (s == NULL)
		return RESIL_E_NOMEM;
	resil__strfree(cc->a, *field);
	*field = s;
	return RESIL_OK;
}

static resil_err
set_service(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;

	(void)key;
	(void)diag;
	return str_set(cc, &cc->service, v);
}

static resil_err
set_zone(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;

	if (!zone_ok(v))
		return BAD("%s: \"%s\" is not a zone name (letters, digits, "
		           "'_', '-', '.')",
		    key, v);
	return str_set(cc, &cc->zone, v);
}

static resil_err
set_seed(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;
	uint64_t x = 0;
	int r = parse_u64(v, &x);

	if (r == 0)
		return BAD("%s: \"%s\" is not an unsigned integer", key, v);
	if (r < 0)
		return BAD(
		    "%s: %s is out of range 0..18446744073709551615", key, v);
	cc->seed = x;
	return RESIL_OK;
}

static resil_err
set_zone_mode(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;
	int m;

	for (m = 0; m <= RESIL_ZONE_PROPORTIONAL; m++)
		if (strcmp(v, resil_zone_mode_name((resil_zone_mode)m)) == 0) {
			cc->zone_mode = (resil_zone_mode)m;
			cc->zone_mode_set = 1;
			return RESIL_OK;
		}
	return BAD("%s: \"%s\" is not one of off, prefer, strict, "
	           "proportional",
	    key, v);
}

/* router.condition: each one appends a rule. */
static resil_err
add_condition(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;
	resil_condition *c;
	resil_diag d2;
	resil_err err;

	if ((err = resil_condition_parse(&c, v, 0, cc->a, &d2)) != RESIL_OK) {
		if (err == RESIL_E_NOMEM)
			return err;
		return BAD("%s: %s", key, d2.msg);
	}
	if (cc->nconds == cc->ccap) {
		size_t nc = cc->ccap == 0 ? 4 : cc->ccap * 2;
		resil_condition **n2 =
		    resil__alloc(cc->a, nc * sizeof(resil_condition *));
		if (n2 == NULL) {
			resil_condition_free(c);
			return RESIL_E_NOMEM;
		}
		if (cc->conds != NULL) {
			memcpy(n2, cc->conds,
			    cc->nconds * sizeof(resil_condition *));
			resil__free(cc->a, cc->conds,
			    cc->ccap * sizeof(resil_condition *));
		}
		cc->conds = n2;
		cc->ccap = nc;
	}
	cc->conds[cc->nconds++] = c;
	return RESIL_OK;
}

/* outlier.success_rate_* and outlier.failure_percentage_* (Envoy's
 * names, lib/outlier_sr.c reads them): any of them turns the interval
 * detections on. */
static resil_err
set_rate(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;
	resil_err err = resil_outlier_rate_config_set(&cc->rate, key, v, diag);

	if (err == RESIL_OK)
		cc->rate_on = 1;
	return err;
}

/* ---- url: the static endpoints ---------------------------------------- */

/* The protocols a provider answers on (the registry source's list, Dubbo's
 * RegistryDirectory), and mock:// for Dubbo's mock providers. */
static const char *const url_protocols[] = { "dubbo", "tri", "grpc", "rest",
	"http", "https", "hessian", "rmi", "thrift", "webservice", "redis",
	"memcached", "mock" };
#define URL_PROTOCOLS                                                 \
	"dubbo, tri, grpc, rest, http, https, hessian, rmi, thrift, " \
	"webservice, redis, memcached, mock"

static int
blank(char c)
{
	return c == ' ' || c == '\t';
}

/* A URL parameter that is an endpoint field, not a param (weight stays a
 * param too, as the registry source keeps it). */
static int
url_own(const char *k)
{
	return strcmp(k, "zone") == 0 || strcmp(k, "tag") == 0 ||
	    strcmp(k, "dubbo.tag") == 0;
}

/* The params of *u but its own (the last of a repeat), after protocol=
 * and path= as the registry source writes them (so a condition rule reads
 * an endpoint the same from either); a new string, or NULL for none (-1
 * in *nomem when out of memory). */
static char *
url_params(const resil_allocator *a, const resil__url *u, int *nomem)
{
	size_t need = 0, i;
	char *out;
	resil__msg m;
	int first = 1;

	*nomem = 0;
	need = strlen("protocol=") + strlen(u->protocol) + strlen("&path=") +
	    strlen(u->path) + 1;
	for (i = 0; i < u->nparams; i++)
		if (u->params[i].key != NULL)
			need += strlen(u->params[i].key) +
			    strlen(u->params[i].value) + 2;
	if ((out = resil__alloc(a, need)) == NULL) {
		*nomem = 1;
		return NULL;
	}
	resil__msg_start(&m, out, need);
	if (resil__url_get(u, "protocol") == NULL) {
		RESIL__MSG_LIT(&m, "protocol=");
		resil__msg_str(&m, u->protocol);
		first = 0;
	}
	if (resil__url_get(u, "path") == NULL && u->path[0] != '\0') {
		if (!first)
			RESIL__MSG_LIT(&m, "&");
		RESIL__MSG_LIT(&m, "path=");
		resil__msg_str(&m, u->path);
		first = 0;
	}
	for (i = 0; i < u->nparams; i++) {
		const char *k = u->params[i].key;

		if (k == NULL || url_own(k) ||
		    resil__url_get(u, k) != u->params[i].value)
			continue;
		if (!first)
			RESIL__MSG_LIT(&m, "&");
		resil__msg_str(&m, k);
		RESIL__MSG_LIT(&m, "=");
		resil__msg_str(&m, u->params[i].value);
		first = 0;
	}
	/* A shorter copy, so that its release knows its size. */
	{
		char *s = resil__strdup(a, out);

		resil__free(a, out, need);
		if (s == NULL)
			*nomem = 1;
		return s;
	}
}

/* Item no (1-based) of url=, item, into *sp: Dubbo's provider URL,
 * protocol://host:port[/path][?k=v&...], its weight, zone and tag (tag or
 * dubbo.tag) as endpoint fields, the rest as params. */
static resil_err
url_item(resil_cluster_text *cc, const char *key, const char *item, size_t no,
    resil_endpoint_spec *sp, resil_diag *diag)
{
	resil__url u;
	resil_diag why;
	const char *v;
	size_t i;
	int nomem = 0;
	resil_err err;

	why.msg[0] = '\0';
	err = resil__url_parse(cc->a, item, &u, &why);
	if (err == RESIL_E_NOMEM)
		return err;
	if (err != RESIL_OK)
		return BAD("%s: item %zu \"%s\": %s", key, no, item, why.msg);
	for (i = 0; i < sizeof(url_protocols) / sizeof(url_protocols[0]); i++)
		if (strcmp(u.protocol, url_protocols[i]) == 0)
			break;
	if (i == sizeof(url_protocols) / sizeof(url_protocols[0])) {
		err = BAD("%s: item %zu \"%s\": protocol \"%s\" is not a "
		          "provider's (" URL_PROTOCOLS
		          "; a registry goes in registry=)",
		    key, no, item, u.protocol);
		goto out;
	}
	if (u.port == NULL) {
		err =
		    BAD("%s: item %zu \"%s\": no port (protocol://host:port)",
		        key, no, item);
		goto out;
	}
	for (i = 0; i < u.nparams; i++) {
		const char *k = u.params[i].key, *pv = u.params[i].value;
		uint64_t w = 0;

		if (k == NULL)
			continue;
		if (k[0] == '\0') {
			err = BAD("%s: item %zu \"%s\": a parameter has no "
			          "name (\"=%s\")",
			    key, no, item, pv);
			goto out;
		}
		if (strcmp(k, "weight") == 0 &&
		    (parse_u64(pv, &w) != 1 || w > INT32_MAX)) {
			err = BAD("%s: item %zu \"%s\": weight \"%s\" is not "
			          "a whole number 0..2147483647",
			    key, no, item, pv);
			goto out;
		}
		if (strcmp(k, "zone") == 0 && !zone_ok(pv)) {
			err = BAD("%s: item %zu \"%s\": zone \"%s\" is not a "
			          "zone name (letters, digits, '_', '-', '.')",
			    key, no, item, pv);
			goto out;
		}
	}
	*sp = resil_endpoint_spec_default(NULL);
	if ((v = resil__url_get(&u, "weight")) != NULL) {
		uint64_t w = 0;
		(void)parse_u64(v, &w);
		sp->weight = (int32_t)w;
	}
	sp->mock = strcmp(u.protocol, "mock") == 0;
	err = RESIL_E_NOMEM;
	if ((sp->address = resil__strdup(cc->a, u.address)) == NULL)
		goto out;
	if ((v = resil__url_get(&u, "zone")) != NULL &&
	    (sp->zone = resil__strdup(cc->a, v)) == NULL)
		goto out;
	if ((v = resil__url_get(&u, "dubbo.tag")) == NULL || v[0] == '\0')
		v = resil__url_get(&u, "tag");
	if (v != NULL && v[0] != '\0' &&
	    (sp->tag = resil__strdup(cc->a, v)) == NULL)
		goto out;
	sp->params = url_params(cc->a, &u, &nomem);
	if (nomem)
		goto out;
	/* The directory's grammar of params (a path with a '&' would be
	 * refused by resil_directory_new(), without a line; issue 38.6). */
	if (sp->params != NULL &&
	    (v = resil__params_check(sp->params, &i)) != NULL) {
		err = BAD("%s: item %zu \"%s\": the parameters \"%s\": %s at "
		          "column %zu (key=value items joined by '&')",
		    key, no, item, sp->params, v, i);
		goto out;
	}
	err = RESIL_OK;
out:
	resil__url_free(cc->a, &u);
	return err;
}

/* url: Dubbo's direct connection, provider URLs separated by ';'. Replaces
 * the list a previous url= gave. */
static resil_err
set_url(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_cluster_text *cc = obj;
	resil_endpoint_spec *specs;
	size_t n = 1, i, k;
	const char *p;
	resil_err err;

	for (p = v; *p != '\0'; p++)
		n += *p == ';';
	if ((specs = resil__calloc(cc->a, n * sizeof(*specs))) == NULL)
		return RESIL_E_NOMEM;
	p = v;
	for (i = 0; i < n; i++) {
		size_t len = strcspn(p, ";"), sl = len;
		const char *s = p;
		char *item;
		while (sl > 0 && blank(*s)) {
			s++;
			sl--;
		}
		while (sl > 0 && blank(s[sl - 1]))
			sl--;
		p += len + (p[len] == ';');
		if (sl == 0) {
			err = n == 1
			    ? BAD("%s: empty (provider URLs separated "
			          "by ';': dubbo://10.0.0.1:20880;"
			          "dubbo://10.0.0.2:20880)",
			          key)
			    : BAD("%s: item %zu of %zu is empty (URLs "
			          "are separated by ';')",
			          key, i + 1, n);
			goto fail;
		}
		if ((item = resil__strndup(cc->a, s, sl)) == NULL) {
			err = RESIL_E_NOMEM;
			goto fail;
		}
		err = url_item(cc, key, item, i + 1, &specs[i], diag);
		resil__strfree(cc->a, item);
		if (err != RESIL_OK)
			goto fail;
		for (k = 0; k < i; k++)
			if (strcmp(specs[k].address, specs[i].address) == 0) {
				err = BAD("%s: item %zu: address %s is item "
				          "%zu's too",
				    key, i + 1, specs[i].address, k + 1);
				goto fail;
			}
	}
	eps_free(cc->a, cc->eps, cc->neps);
	cc->eps = specs;
	cc->neps = n;
	return RESIL_OK;
fail:
	eps_free(cc->a, specs, n);
	return err;
}

/* ---- endpoint.breaker: each endpoint's breaker ------------------------- */

/* endpoint.breaker.window: count or time (any case). */
static resil_err
set_window(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_breaker_config *b = obj;
	char low[8];
	size_t i;

	for (i = 0; i < sizeof(low) - 1 && v[i] != '\0'; i++)
		low[i] = v[i] >= 'A' && v[i] <= 'Z' ? (char)(v[i] + 32) : v[i];
	low[i] = '\0';
	if (v[i] == '\0' && strcmp(low, "count") == 0)
		b->window_type = RESIL_WINDOW_COUNT;
	else if (v[i] == '\0' && strcmp(low, "time") == 0)
		b->window_type = RESIL_WINDOW_TIME;
	else
		return BAD("%s: \"%s\" is not one of count, time", key, v);
	return RESIL_OK;
}

/* endpoint.breaker.open_wait_multiplier: a number 1..1000. */
static resil_err
set_multiplier(void *obj, const char *key, const char *v, resil_diag *diag)
{
	resil_breaker_config *b = obj;
	const char *p;
	char *end = NULL;
	double d;

	for (p = v; *p != '\0'; p++)
		if (!((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' ||
		        *p == 'E' || *p == '+' || *p == '-'))
			return BAD("%s: \"%s\" is not a number", key, v);
	if (*v == '\0')
		return BAD("%s: \"%s\" is not a number", key, v);
	d = strtod(v, &end);
	if (end == NULL || *end != '\0')
		return BAD("%s: \"%s\" is not a number", key, v);
	if (!(d >= 1.0 && d <= 1000.0))
		return BAD("%s: %s is out of range 1..1000", key, v);
	b->open_wait_multiplier = d;
	return RESIL_OK;
}

#define EB(f) offsetof(resil_breaker_config, f)

/* The per-endpoint breaker's keys: the service breaker's names
 * (lib/config_keys.c) after "endpoint.", with its ranges. */
static const key_def breaker_keys[] = {
	{ "endpoint.breaker.consecutive_failures", K_U32, 0,
	    EB(consecutive_failures), 0, UINT32_MAX, NULL },
	{ "endpoint.breaker.failure_rate", K_U32, 0, EB(failure_rate_pct), 0,
	    100, NULL },
	{ "endpoint.breaker.slow_rate", K_U32, 0, EB(slow_rate_pct), 0, 100,
	    NULL },
	{ "endpoint.breaker.slow_threshold", K_DUR, 0, EB(slow_threshold_ns),
	    0, 0, NULL },
	{ "endpoint.breaker.min_calls", K_U32, 0, EB(min_calls), 0, UINT32_MAX,
	    NULL },
	{ "endpoint.breaker.window", K_FN, 0, 0, 0, 0, set_window },
	{ "endpoint.breaker.window_size", K_U32, 0, EB(window_size), 1,
	    1048576, NULL },
	{ "endpoint.breaker.bucket", K_DUR, 0, EB(bucket_ns), 1, 0, NULL },
	{ "endpoint.breaker.open_wait", K_DUR, 0, EB(open_wait_ns), 0, 0,
	    NULL },
	{ "endpoint.breaker.open_wait_multiplier", K_FN, 0, 0, 0, 0,
	    set_multiplier },
	{ "endpoint.breaker.open_wait_max", K_DUR, 0, EB(open_wait_max_ns), 0,
	    0, NULL },
	{ "endpoint.breaker.probes", K_U32, 0, EB(permitted_probes), 1, 32767,
	    NULL },
	{ "endpoint.breaker.reopen_on_first_failure", K_BOOL, 0,
	    EB(reopen_on_first_failure), 0, 0, NULL },
	{ "endpoint.breaker.max_half_open", K_DUR, 0, EB(max_half_open_ns), 0,
	    0, NULL },
};

/* Levenshtein distance of a and b, or 99 when either is long. */
static size_t
edit_distance(const char *a, const char *b)
{
	size_t row[48], la = strlen(a), lb = strlen(b), i, j;

	if (la >= 48 || lb >= 48)
		return 99;
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		size_t corner = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = corner + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			corner = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* An endpoint.breaker key that is none of them: RESIL_E_INVAL (the
 * namespace is the cluster text's), with the nearest key. */
static resil_err
breaker_unknown(const char *key, resil_diag *diag)
{
	size_t i, d, bd = 4;
	const char *best = NULL;

	for (i = 0; i < sizeof(breaker_keys) / sizeof(breaker_keys[0]); i++) {
		d = edit_distance(key + 17, breaker_keys[i].name + 17);
		if (d < bd) {
			bd = d;
			best = breaker_keys[i].name;
		}
	}
	if (best != NULL)
		return BAD("%s: unknown key (did you mean %s?)", key, best);
	return BAD("%s: unknown key (the service breaker's keys after "
	           "endpoint., or endpoint.breaker.enabled)",
	    key);
}

/* An endpoint.breaker key. */
static resil_err
set_breaker(
    resil_cluster_text *cc, const char *key, const char *v, resil_diag *diag)
{
	const key_def *k;
	resil_err err;
	int b;

	if (strcmp(key, "endpoint.breaker.enabled") == 0) {
		if (!resil__parse_bool(v, &b))
			return BAD("%s: \"%s\" is not a boolean", key, v);
		cc->eb_enabled = b;
		return RESIL_OK;
	}
	k = key_find(
	    breaker_keys, sizeof(breaker_keys) / sizeof(breaker_keys[0]), key);
	if (k == NULL)
		return breaker_unknown(key, diag);
	err = key_apply(k, &cc->eb, key, v, diag);
	if (err == RESIL_OK)
		cc->eb_on = 1;
	return err;
}

/* The per-endpoint breaker's cross-field rules, in the keys' words. */
static resil_err
breaker_check(const resil_breaker_config *b, resil_diag *diag)
{
	char t1[32], t2[32];
	resil_diag d2;

	if (b->consecutive_failures == 0 && b->failure_rate_pct == 0 &&
	    b->slow_rate_pct == 0)
		return BAD("endpoint.breaker: no trigger: set "
		           "endpoint.breaker.consecutive_failures, "
		           ".failure_rate or .slow_rate above 0");
	if (b->slow_rate_pct > 0 && b->slow_threshold_ns == 0)
		return BAD(
		    "endpoint.breaker.slow_threshold: 0 must be above 0 "
		    "when endpoint.breaker.slow_rate is set");
	if ((b->failure_rate_pct > 0 || b->slow_rate_pct > 0) &&
	    b->min_calls == 0)
		return BAD("endpoint.breaker.min_calls: 0 must be >= 1 when a "
		           "rate trigger is set");
	if (b->window_type == RESIL_WINDOW_TIME && b->window_size > 3600)
		return BAD(
		    "endpoint.breaker.window_size: %u buckets is out of "
		    "range 1..3600 for endpoint.breaker.window=time",
		    b->window_size);
	if (b->open_wait_max_ns != 0 &&
	    b->open_wait_max_ns < b->open_wait_ns) {
		resil__duration_format(t1, sizeof(t1), b->open_wait_max_ns);
		resil__duration_format(t2, sizeof(t2), b->open_wait_ns);
		return BAD("endpoint.breaker.open_wait_max: %s is below "
		           "endpoint.breaker.open_wait (%s)",
		    t1, t2);
	}
	d2.msg[0] = '\0';
	if (resil_breaker_config_validate(b, &d2) != RESIL_OK)
		return BAD("endpoint.%s", d2.msg);
	return RESIL_OK;
}

#define CC(f) offsetof(resil_cluster_text, f)

/* The keys of the cluster layer itself (a balancer's are balance_keys,
 * after "loadbalance" or "<method>.loadbalance"). */
static const key_def text_keys[] = {
	{ "service", K_FN, 0, 0, 0, 0, set_service },
	{ "loadbalance.seed", K_FN, 0, 0, 0, 0, set_seed },
	{ "router.zone", K_FN, 0, 0, 0, 0, set_zone },
	{ "router.zone.mode", K_FN, 0, 0, 0, 0, set_zone_mode },
	{ "router.zone.min_cluster_size", K_U32, 0, CC(zone_min), 0, 1000000,
	    NULL },
	{ "router.zone.consumers", K_FN, 0, 0, 0, 0, set_consumers },
	{ "router.tag.force", K_BOOL, 0, CC(tag_force), 0, 0, NULL },
	{ "router.condition.force", K_BOOL, 0, CC(cond_force), 0, 0, NULL },
	{ "router.condition", K_FN, 0, 0, 0, 0, add_condition },
	{ "panic.threshold", K_U32, 0, CC(panic), 0, 100, NULL },
	{ "registry.empty_protection", K_BOOL, 0, CC(empty_protection), 0, 0,
	    NULL },
	{ "url", K_FN, 0, 0, 0, 0, set_url },
	{ "outlier.consecutive_failures", K_U32, 0,
	    CC(outlier.consecutive_failures), 1, 1000000, NULL },
	{ "outlier.max_ejection_pct", K_U32, 0, CC(outlier.max_ejection_pct),
	    0, 100, NULL },
	{ "outlier.base_ejection", K_DUR, 0, CC(outlier.base_ejection), 1, 0,
	    NULL },
	{ "outlier.max_ejection", K_DUR, 0, CC(outlier.max_ejection), 1, 0,
	    NULL },
	{ "outlier.interval", K_DUR, 0, CC(outlier.interval), 1, 0, NULL },
	{ "outlier.enforcing_consecutive_failures", K_U32, 0,
	    CC(enforcing_consecutive), 0, 100, NULL },
	{ "outlier.success_rate_minimum_hosts", K_FN, 0, 0, 0, 0, set_rate },
	{ "outlier.success_rate_request_volume", K_FN, 0, 0, 0, 0, set_rate },
	{ "outlier.success_rate_stdev_factor", K_FN, 0, 0, 0, 0, set_rate },
	{ "outlier.enforcing_success_rate", K_FN, 0, 0, 0, 0, set_rate },
	{ "outlier.failure_percentage_threshold", K_FN, 0, 0, 0, 0, set_rate },
	{ "outlier.failure_percentage_minimum_hosts", K_FN, 0, 0, 0, 0,
	    set_rate },
	{ "outlier.failure_percentage_request_volume", K_FN, 0, 0, 0, 0,
	    set_rate },
	{ "outlier.enforcing_failure_percentage", K_FN, 0, 0, 0, 0, set_rate },
};

static resil_err
set_one(
    resil_cluster_text *cc, const char *key, const char *v, resil_diag *diag)
{
	const key_def *k;
	const char *dot;
	size_t slot;
	resil_err err;

	if (strncmp(key, "health.", 7) == 0) {
		/* lib/health.c reads the checker's keys. */
		int b;
		if (strcmp(key, "health.enabled") == 0) {
			if (!resil__parse_bool(v, &b))
				return BAD(
				    "%s: \"%s\" is not a boolean", key, v);
			cc->health_enabled = b;
			return RESIL_OK;
		}
		err = resil_health_config_set(&cc->health, key, v, diag);
		if (err == RESIL_OK)
			cc->health_on = 1;
		return err;
	}
	if (strncmp(key, "endpoint.breaker.", 17) == 0)
		return set_breaker(cc, key, v, diag);
	k = key_find(text_keys, sizeof(text_keys) / sizeof(text_keys[0]), key);
	if (k != NULL)
		return key_apply(k, cc, key, v, diag);
	if (strncmp(key, "loadbalance", 11) == 0)
		return set_balance(
		    key, key + 11, v, &cc->balance, &cc->balance_set, diag);
	/* <method>.loadbalance... */
	dot = strchr(key, '.');
	if (dot != NULL && strncmp(dot + 1, "loadbalance", 11) == 0 &&
	    strncmp(key, "router.", 7) != 0 &&
	    strncmp(key, "outlier.", 8) != 0 &&
	    strncmp(key, "panic.", 6) != 0) {
		if (!method_ok(key, (size_t)(dot - key)))
			return BAD("%s: \"%.*s\" is not a method name", key,
			    (int)(dot - key), key);
		if ((err = method_slot(cc, key, (size_t)(dot - key), &slot)) !=
		    RESIL_OK)
			return err;
		cc->raw[slot].line = cc->cur_line;
		return set_balance(key, dot + 12, v, &cc->raw[slot].b,
		    &cc->raw[slot].set, diag);
	}
	return resil__diagf(diag, RESIL_E_NOTFOUND, "%s: unknown key", key);
}

resil_err
resil_cluster_text_set(resil_cluster_text *cc, const char *key,
    const char *value, const char *origin, unsigned line, resil_diag *diag)
{
	resil_err err;

	if (cc == NULL || key == NULL || value == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "cluster: NULL argument");
	cc->cur_line = origin != NULL ? line : 0;
	err = set_one(cc, key, value, diag);
	if (err == RESIL_OK &&
	    strcmp(key, "router.zone.min_cluster_size") == 0)
		cc->zone_min_set = 1;
	if (err == RESIL_OK && origin != NULL && line != 0) {
		if (strncmp(key, "outlier.", 8) == 0)
			cc->outlier_line = line;
		else if (strcmp(key, "router.zone") == 0)
			cc->zone_line = line;
		else if (strcmp(key, "router.zone.mode") == 0)
			cc->mode_line = line;
		else if (strcmp(key, "url") == 0)
			cc->url_line = line;
		else if (strncmp(key, "endpoint.breaker.", 17) == 0)
			cc->eb_line = line;
		else if (strcmp(key, "router.zone.consumers") == 0)
			cc->consumers_line = line;
		else if (strcmp(key, "router.zone.min_cluster_size") == 0)
			cc->min_line = line;
		if (cc->origin == NULL &&
		    (cc->origin = resil__strdup(cc->a, origin)) == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "cluster: out of memory");
	}
	return resil__diag_at(diag, err, origin, line);
}

/* The outlier settings' cross-field rule, in the keys' words and units
 * (issue 38.8: not the directory's nanoseconds). */
static resil_err
outlier_check(const resil_outlier_config *o, resil_diag *diag)
{
	char t1[32], t2[32];

	if (o->max_ejection_pct == 0 || o->max_ejection >= o->base_ejection)
		return RESIL_OK;
	resil__duration_format(t1, sizeof(t1), o->max_ejection);
	resil__duration_format(t2, sizeof(t2), o->base_ejection);
	return BAD("outlier.max_ejection: %s is below outlier.base_ejection "
	           "(%s)",
	    t1, t2);
}

/* finish()'s message, "origin:line: " first where the key's line is
 * known. */
static resil_err
locate_known(const resil_cluster_text *cc, resil_diag *diag, resil_err err,
    unsigned line)
{
	return line != 0 ? resil__diag_at(diag, err, cc->origin, line) : err;
}

resil_err
resil_cluster_text_finish(resil_cluster_text *cc, resil_diag *diag)
{
	resil_directory_config dc;
	size_t i;
	resil_err err;

	if (cc == NULL)
		return RESIL_E_INVAL;
	/* A method inherits every balancer field it does not set. */
	for (i = 0; i < cc->nmethods; i++) {
		const cc_method *r = &cc->raw[i];
		resil_balance_config b = cc->balance;
		char prefix[96];
		if (r->set & SET_KIND)
			b.kind = r->b.kind;
		if (r->set & SET_NODES)
			b.hash_nodes = r->b.hash_nodes;
		if (r->set & SET_ARGS) {
			memcpy(
			    b.hash_args, r->b.hash_args, sizeof(b.hash_args));
			b.hash_nargs = r->b.hash_nargs;
		}
		if (r->set & SET_TAU)
			b.ewma_tau = r->b.ewma_tau;
		if (r->set & SET_RTT)
			b.ewma_default_rtt = r->b.ewma_default_rtt;
		if (r->set & SET_SLIDE)
			b.shortest_slide = r->b.shortest_slide;
		cc->methods[i].balance = b;
		snprintf(prefix, sizeof(prefix), "%s.", cc->methods[i].method);
		if ((err = resil_balance_config_validate(&b, prefix, diag)) !=
		    RESIL_OK)
			return locate_known(cc, diag, err, r->line);
	}
	for (i = 0; i < cc->nconds; i++)
		resil__condition_set_force(cc->conds[i], cc->cond_force);
	/* Envoy's zone-aware routing reads these; another mode would leave
	 * them accepted and unused. */
	if ((cc->nz > 0 || cc->zone_min_set) &&
	    cc->zone_mode != RESIL_ZONE_PROPORTIONAL)
		return locate_known(cc, diag,
		    BAD("%s: read by router.zone.mode=proportional only (the "
		        "mode is %s)",
		        cc->nz > 0 ? "router.zone.consumers"
		                   : "router.zone.min_cluster_size",
		        resil_zone_mode_name(cc->zone_mode)),
		    cc->nz > 0 ? cc->consumers_line : cc->min_line);
	if (cc->eb_enabled != 0 && (cc->eb_on || cc->eb_enabled == 1) &&
	    (err = breaker_check(&cc->eb, diag)) != RESIL_OK)
		return locate_known(cc, diag, err, cc->eb_line);
	if ((err = outlier_check(&cc->outlier, diag)) != RESIL_OK)
		return locate_known(cc, diag, err, cc->outlier_line);
	resil_directory_config_init(&dc);
	dc.outlier = cc->outlier;
	dc.outlier_enforcing_consecutive_failures = cc->enforcing_consecutive;
	dc.outlier_rate = cc->rate_on ? &cc->rate : NULL;
	dc.health = NULL; /* checked by each key */
	return locate_known(cc, diag,
	    resil_directory_config_validate(&dc, diag), cc->outlier_line);
}

/* " (origin:line)" of a key, or "" when not known, into buf. */
static const char *
where(char *buf, size_t len, const char *origin, unsigned line)
{
	if (origin == NULL || line == 0)
		return "";
	snprintf(buf, len, " at %s:%u", origin, line);
	return buf;
}

resil_err
resil__cluster_text_peer_check(const resil_cluster_text *cc,
    const resil__cluster_peer *peer, resil_diag *diag)
{
	char w[RESIL_DIAG_MAX / 2];
	const char *origin;
	resil_err err;

	if (cc == NULL || peer == NULL)
		return RESIL_OK;
	origin = peer->origin != NULL ? peer->origin : cc->origin;
	/* docs/cluster.md: do not turn on the selector's zone routing with
	 * zone-aware (it would remove the other zones before the strategy
	 * could cross). */
	if (peer->zone_aware && cc->zone != NULL &&
	    cc->zone_mode != RESIL_ZONE_OFF) {
		err = BAD("router.zone: the selector's zone routing (mode %s) "
		          "would remove the other zones before zone-aware "
		          "could cross (cluster=zone-aware%s); name the "
		          "caller's zone with zone=, or set "
		          "router.zone.mode=off",
		    resil_zone_mode_name(cc->zone_mode),
		    where(w, sizeof(w), origin, peer->cluster_line));
		return cc->zone_line != 0
		    ? resil__diag_at(diag, err, origin, cc->zone_line)
		    : err;
	}
	if (peer->zone_aware && cc->zone_mode_set &&
	    cc->zone_mode != RESIL_ZONE_OFF) {
		err = BAD("router.zone.mode: %s would remove the other zones "
		          "before zone-aware could cross "
		          "(cluster=zone-aware%s); zone-aware routes by zone "
		          "itself: drop the key or set it to off",
		    resil_zone_mode_name(cc->zone_mode),
		    where(w, sizeof(w), origin, peer->cluster_line));
		return cc->mode_line != 0
		    ? resil__diag_at(diag, err, origin, cc->mode_line)
		    : err;
	}
	/* Zone routing needs the caller's zone: router.zone=, or zone=. */
	if (!peer->local_zone && cc->zone == NULL && cc->zone_mode_set &&
	    cc->zone_mode != RESIL_ZONE_OFF) {
		err = BAD("router.zone.mode: %s routes by the caller's zone, "
		          "and none is given (router.zone= or zone=)",
		    resil_zone_mode_name(cc->zone_mode));
		return cc->mode_line != 0
		    ? resil__diag_at(diag, err, origin, cc->mode_line)
		    : err;
	}
	/* Dubbo lets url= win over the registry; resil refuses the pair:
	 * the registry would be accepted and unused (or replace the listed
	 * endpoints at its first push). */
	if (peer->registry != NULL && cc->neps > 0) {
		err = BAD("url: the listed endpoints and registry=%s%s both "
		          "give the providers; use one (registry=N/A with "
		          "url= is Dubbo's direct connection)",
		    peer->registry,
		    where(w, sizeof(w), origin, peer->registry_line));
		return cc->url_line != 0
		    ? resil__diag_at(diag, err, origin, cc->url_line)
		    : err;
	}
	return RESIL_OK;
}

void
resil_cluster_text_selector(
    const resil_cluster_text *cc, resil_selector_config *out)
{
	resil_selector_config_init(out);
	if (cc == NULL)
		return;
	out->service = cc->service;
	out->balance = cc->balance;
	out->methods = cc->methods;
	out->nmethods = cc->nmethods;
	out->local_zone = cc->zone;
	out->zone_mode = cc->zone_mode;
	out->zone_min_cluster_size = cc->zone_min;
	out->zone_names = (const char *const *)cc->znames;
	out->zone_consumers = cc->zcons;
	out->nzones = cc->nz;
	out->tag_force = cc->tag_force;
	out->conditions = cc->conds;
	out->nconditions = cc->nconds;
	out->panic_threshold_pct = cc->panic;
	out->seed = cc->seed;
}

void
resil_cluster_text_directory(
    const resil_cluster_text *cc, resil_directory_config *out)
{
	if (cc == NULL || out == NULL)
		return;
	out->outlier = cc->outlier;
	out->empty_protection = cc->empty_protection;
	/* The endpoint breaker, the health checks and the endpoints are not
	 * outlier settings: a text without their keys leaves the caller's.
	 * Each is valid while cc is (resil_directory_new() copies them). */
	if (cc->eb_enabled == 0)
		out->endpoint_breaker = NULL;
	else if (cc->eb_enabled == 1 || cc->eb_on)
		out->endpoint_breaker = &cc->eb;
	/* A config of an older size has no such fields. */
	if (out->size > offsetof(resil_directory_config, outlier_rate))
		out->outlier_rate = cc->rate_on ? &cc->rate : NULL;
	if (out->size > offsetof(resil_directory_config, health)) {
		if (cc->health_enabled == 0)
			out->health = NULL;
		else if (cc->health_enabled == 1 || cc->health_on)
			out->health = &cc->health;
	}
	if (out->size > offsetof(resil_directory_config, nendpoints) &&
	    cc->neps > 0) {
		out->endpoints = cc->eps;
		out->nendpoints = cc->neps;
	}
	if (out->size > offsetof(resil_directory_config,
	                    outlier_enforcing_consecutive_failures))
		out->outlier_enforcing_consecutive_failures =
		    cc->enforcing_consecutive;
}

int
resil__zone_name_ok(const char *s)
{
	return zone_ok(s);
}

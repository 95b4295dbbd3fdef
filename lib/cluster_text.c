/*
 * The cluster keys of a configuration text (resil_cluster_text in
 * include/resil/selector.h): loadbalance, router.*, panic, outlier and
 * registry keys, checked one at a time, into the selector's and the
 * directory's configurations. Above the selector, routers, balancers and
 * directory it configures; lib/config.c feeds it.
 */
#include <resil/selector.h>

#include "duration.h"
#include "router_internal.h"

#include <stddef.h>
#include <stdio.h>

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
	/* The interval detections: on once one of their keys is given. */
	resil_outlier_rate_config rate;
	int rate_on;
	/* Active health checks: on once a health.* key is given, unless
	 * health.enabled=false (health_enabled: -1 unset, 0, 1). */
	resil_health_config health;
	int health_on, health_enabled;
	int empty_protection; /* registry.empty_protection; default 1 */
	/* Where finish()'s cross-field messages point: the first origin
	 * given to set (a copy), the line of the key being set, and that of
	 * the last outlier key. */
	char *origin;
	unsigned cur_line, outlier_line;
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
	cc->empty_protection = dc.empty_protection;
	resil_outlier_rate_config_init(&cc->rate);
	resil_health_config_init(&cc->health);
	cc->health_enabled = -1;
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
	resil__strfree(cc->a, cc->service);
	resil__strfree(cc->a, cc->zone);
	resil__strfree(cc->a, cc->origin);
	resil__free(cc->a, cc, sizeof(*cc));
}

/* "origin:line: " before a message already in diag. */
static resil_err
locate(resil_diag *diag, resil_err err, const char *origin, unsigned line)
{
	char tmp[RESIL_DIAG_MAX];
	resil__msg m;

	if (diag == NULL || origin == NULL || err == RESIL_OK)
		return err;

	memcpy(tmp, diag->msg, sizeof(tmp));
	tmp[sizeof(tmp) - 1] = '\0';
	resil__msg_start(&m, diag->msg, sizeof(diag->msg));
	resil__msg_str(&m, origin);
	RESIL__MSG_LIT(&m, ":");
	resil__msg_int(&m, (int)line);
	RESIL__MSG_LIT(&m, ": ");
	resil__msg_str(&m, tmp);
	return err;
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
parse_bool(const char *s, int *v)
{
	static const char *const t[] = { "true", "yes", "on", "1" };
	static const char *const f[] = { "false", "no", "off", "0" };
	char low[8];
	size_t i;

	for (i = 0; i < sizeof(low) - 1 && s[i] != '\0'; i++)
		low[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i];
	if (s[i] != '\0')
		return 0;
	low[i] = '\0';
	for (i = 0; i < 4; i++) {
		if (strcmp(low, t[i]) == 0) {
			*v = 1;
			return 1;
		}
		if (strcmp(low, f[i]) == 0) {
			*v = 0;
			return 1;
		}
	}
	return 0;
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
	uint64_t x = 0;
	int r = resil__duration_parse(v, &x, &unit_at);

	switch (r) {
	case RESIL__DUR_OK:
		break;
	case RESIL__DUR_RANGE:
		return BAD("%s: %s is out of range", key, v);
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
	if (x < lo)
		return BAD(
		    "%s: %s is below %llu", key, v, (unsigned long long)lo);
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
		if (!parse_bool(v, &b))
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
	{ "outlier.consecutive_failures", K_U32, 0,
	    CC(outlier.consecutive_failures), 1, 1000000, NULL },
	{ "outlier.max_ejection_pct", K_U32, 0, CC(outlier.max_ejection_pct),
	    0, 100, NULL },
	{ "outlier.base_ejection", K_DUR, 0, CC(outlier.base_ejection), 1, 0,
	    NULL },
	{ "outlier.max_ejection", K_DUR, 0, CC(outlier.max_ejection), 1, 0,
	    NULL },
	{ "outlier.interval", K_DUR, 0, CC(outlier.interval), 1, 0, NULL },
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
			if (!parse_bool(v, &b))
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
	if (err == RESIL_OK && origin != NULL && line != 0) {
		if (strncmp(key, "outlier.", 8) == 0)
			cc->outlier_line = line;
		if (cc->origin == NULL &&
		    (cc->origin = resil__strdup(cc->a, origin)) == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "cluster: out of memory");
	}
	return locate(diag, err, origin, line);
}

/* finish()'s message, "origin:line: " first where the key's line is
 * known. */
static resil_err
locate_known(const resil_cluster_text *cc, resil_diag *diag, resil_err err,
    unsigned line)
{
	return line != 0 ? locate(diag, err, cc->origin, line) : err;
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
	resil_directory_config_init(&dc);
	dc.outlier = cc->outlier;
	dc.outlier_rate = cc->rate_on ? &cc->rate : NULL;
	dc.health = NULL; /* checked by each key */
	return locate_known(cc, diag,
	    resil_directory_config_validate(&dc, diag), cc->outlier_line);
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
	if (cc != NULL && out != NULL) {
		out->outlier = cc->outlier;
		out->empty_protection = cc->empty_protection;
		/* Valid while cc is: resil_directory_new() copies it. A
		 * config of an older size has no such fields. */
		if (out->size > offsetof(resil_directory_config, outlier_rate))
			out->outlier_rate = cc->rate_on ? &cc->rate : NULL;
		/* Health checks are not an outlier setting: a text without
		 * health keys leaves the caller's. */
		if (out->size <= offsetof(resil_directory_config, health))
			return;
		if (cc->health_enabled == 0)
			out->health = NULL;
		else if (cc->health_enabled == 1 || cc->health_on)
			out->health = &cc->health;
	}
}

/*
 * resil config: key=value text into a resil_pipeline_config.
 *
 * The config keeps the settings as given (key, value, line). The pipeline
 * configuration is always rebuilt from them, in order, on top of the
 * defaults, so resil_config_set() can try a change on a fresh build and
 * keep the old one when the change is refused. What each key is and how
 * its value reads and prints is lib/config_keys.c's; this file is the
 * configuration: the settings, the text, the build, the reload from text.
 */
#include <resil/config.h>
#include <resil/source.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_text.h"
#include "config_keyed.h"
#include "config_keys.h"
#include "duration.h"
#include "internal.h"
#include "keyed_spec.h"
#include "pipeline_config.h"
#include "pipeline_shared.h"
#include "pipeline_keyed_fleet.h"

#define ORIGIN_STRING "<string>"

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
	int source; /* a registry key of the source (resil_source_text) */
	int chaos;  /* issue 28: SK_CHAOS or SK_BULKHEAD (try_chaos), or 0 */
} setting;

/* The keys of issue 28 read outside the key table (try_chaos), and
 * issue 41's overrides (KIND.key.override.VALUE, lib/config_keyed.c). */
enum { SK_CHAOS = 1, SK_BULKHEAD = 2, SK_KEYED = 3 };

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
	resil_source_text *st;  /* the registry keys, or NULL: none */
	resil_chaos *chaos;     /* made from chaos.* (issue 28), or NULL */
	char *ckeys; /* the cluster keys, as a reload compares them */
	resil__kovr kovr[3]; /* issue 41: the keyed families' overrides */
};

/*
 * A setting's value and line, as a build keeps them: the settings array
 * may move while a text is read, the strings it points to never do.
 */
typedef struct ref {
	const char *value;
	unsigned line;
} ref;

/* A chaos setting (issue 28): method NULL for the service's; key the
 * chaos key (chaos.fault, the part after `method.`). */
typedef struct chaos_ref {
	const char *method;
	const char *key;
	const char *value;
	unsigned line;
} chaos_ref;

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
	resil_source_text *st;  /* the registry keys, or NULL: none */
	ref source_first;       /* the first registry key (its key) */
	ref source_other;       /* the first one but registry= itself */
	int registry_seen;      /* registry= was given */
	ref registry;           /* registry= (issue 24.5: against url=) */
	unsigned strategy_line; /* the line of cluster= */
	chaos_ref *cref;        /* the chaos settings in order (issue 28) */
	size_t ncref, capref;
	resil_chaos *chaos; /* made from them by build_finish, or NULL */
	resil__combo combo;     /* the keys config_check.c looks at */
	unsigned eb_shared_line; /* endpoint.breaker.shared (issue 24.2) */
	resil__kovr kovr[3];     /* issue 41: the overrides, by kind */
} build;

/* ---- small helpers ---- */

static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

resil_err
resil_config_check_method(const resil_method_config *m, resil_diag *diag)
{
	/* The pipeline's own rules: resil_pipeline_new applies them too. */
	return resil__method_check(m, diag);
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

static void chaos_discard(build *b);

static void
build_discard(build *b)
{
	int i;

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
	resil_source_text_free(b->st);
	b->st = NULL;
	chaos_discard(b);
	for (i = 0; i < 3; i++)
		resil__kovr_free(&b->kovr[i], b->a);
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

/* A selector key (loadbalance=, router.*, ...): kept for the selector. */
static resil_err
apply_text(build *b, const setting *s, resil_diag *diag)
{
	if (b->ct == NULL && resil_cluster_text_new(&b->ct, b->a) != RESIL_OK)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	return resil_cluster_text_set(b->ct, s->key, s->value,
	    s->line > 0 ? b->origin : NULL, s->line, diag);
}

/* A registry key (registry=, registry.service=, ...): kept for the
 * source (resil_config_source). */
static resil_err
apply_source(build *b, const setting *s, resil_diag *diag)
{
	if (b->st == NULL && resil_source_text_new(&b->st, b->a) != RESIL_OK)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	if (b->source_first.value == NULL) {
		b->source_first.value = s->key;
		b->source_first.line = s->line;
	}
	if (strcmp(s->key, "registry") == 0) {
		b->registry_seen = 1;
		b->registry.value = s->value;
		b->registry.line = s->line;
	} else if (b->source_other.value == NULL) {
		b->source_other.value = s->key;
		b->source_other.line = s->line;
	}
	return resil_source_text_set(b->st, s->key, s->value,
	    s->line > 0 ? b->origin : NULL, s->line, diag);
}

/* A key of a declared method (declared by its first key). */
static resil_err
apply_method(build *b, const setting *s, const keyval *kv, resil_diag *diag)
{
	long i = build_method(b, s->method);
	resil_err err;

	if (i < 0)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	err = resil__config_read_method(s->mk, kv, &b->methods[i], diag);
	if (err == RESIL_OK && s->mk == MK_MOCK) {
		b->method_mock[i].value = s->value;
		b->method_mock[i].line = s->line;
	}
	return err;
}

/* What a stage key tells the build besides its value: the cluster's line,
 * the stage's last line (its cross-field errors carry it) and that the
 * stage was touched (which switches it on). */
static void
note_key(build *b, const keydef *k, const setting *s)
{
	if (k->off >= PC(cluster) &&
	    k->off < PC(cluster) + sizeof(resil_cluster_config)) {
		b->cluster_seen = 1;
		b->cluster_line = s->line;
	}
	if (k->off == PC(endpoint_breaker_shared_url))
		b->eb_shared_line = s->line;
	if (k->stage != ST_NONE) {
		/* A setting made by set is newer than every line of the
		 * text: once the stage has one, its errors are the set's. */
		if (s->line == 0)
			b->set_seen[k->stage] = 1;
		b->last[k->stage] = b->set_seen[k->stage] ? 0 : s->line;
		b->touched[k->stage] = 1;
	}
}

/* ---- issue 28: chaos.*, METHOD.chaos.*, bulkhead.limit and
 * bulkhead.gradient.* (read by resil_chaos_config_set() and
 * resil_bulkhead_config_set(), not by the key table) ---- */

/* The chaos key of key: key itself for chaos.*, the part after the
 * method for METHOD.chaos.* (*method_len its length), else NULL. */
static const char *
chaos_key(const char *key, size_t *method_len)
{
	const char *dot = strchr(key, '.');
	size_t n;

	*method_len = 0;
	if (strncmp(key, "chaos.", 6) == 0)
		return key;
	if (dot == NULL || strncmp(dot + 1, "chaos.", 6) != 0)
		return NULL;
	n = (size_t)(dot - key);
	if (!resil__method_ident(key, n) || resil__method_reserved(key, n))
		return NULL; /* the key table's message */
	*method_len = n;
	return dot + 1;
}

/* Check a chaos value as resil_chaos_config_set() reads it; the message
 * names the whole key (getStock.chaos.fault: ...). */
static resil_err
check_chaos(const resil_config *conf, const setting *s, const char *ck,
    resil_diag *diag)
{
	resil_chaos_config c;
	resil_diag d;
	resil_err err;
	size_t n = strlen(ck);

	if (strncmp(ck, "chaos.behaviour", 15) == 0 &&
	    (ck[15] == '\0' || ck[15] == '.'))
		return resil__config_fail(diag, conf->origin, s->line,
		    "%s: a behaviour is a C callback "
		    "(resil_chaos_config.behaviour_fn): text cannot give one",
		    s->key);
	resil_chaos_config_init(&c);
	c.alloc = &conf->alloc;
	d.msg[0] = '\0';
	err = resil_chaos_config_set(&c, ck, s->value, &d);
	resil_chaos_config_deinit(&c);
	if (err == RESIL_E_NOMEM)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	if (err == RESIL_OK)
		return RESIL_OK;
	if (strncmp(d.msg, ck, n) == 0 && d.msg[n] == ':')
		return resil__config_fail(diag, conf->origin, s->line, "%s%s",
		    s->key, d.msg + n);
	return resil__config_fail(
	    diag, conf->origin, s->line, "%s: %s", s->key, d.msg);
}

/* Whether *s is a key of issue 28 (s->chaos set), its value checked. */
static resil_err
try_chaos(const resil_config *conf, setting *s, resil_diag *diag)
{
	const char *ck;
	size_t n;
	resil_err err;

	if (resil__keyed_override_kind(s->key, &ck) >= 0) {
		/* Issue 41: checked here, collected by the build. */
		keyval kv = { s->key, s->value, conf->origin, s->line };

		err = resil__keyed_override_add(NULL, NULL, &kv, diag);
		if (err == RESIL_OK) {
			s->chaos = SK_KEYED;
			s->mk = MK_TEXT;
		}
		return err;
	}
	if (strcmp(s->key, "bulkhead.limit") == 0 ||
	    strncmp(s->key, "bulkhead.gradient.", 18) == 0) {
		resil_bulkhead_config bc;
		resil_diag d;

		resil_bulkhead_config_init(&bc);
		d.msg[0] = '\0';
		if (resil_bulkhead_config_set(&bc, s->key, s->value, &d) !=
		    RESIL_OK)
			return resil__config_fail(
			    diag, conf->origin, s->line, "%s", d.msg);
		s->chaos = SK_BULKHEAD;
		s->mk = MK_TEXT;
		return RESIL_OK;
	}
	ck = chaos_key(s->key, &n);
	if (ck == NULL)
		return RESIL_OK;
	err = check_chaos(conf, s, ck, diag);
	if (err != RESIL_OK)
		return err;
	if (n > 0) {
		s->method = resil__strndup(&conf->alloc, s->key, n);
		if (s->method == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
	}
	s->chaos = SK_CHAOS;
	s->mk = MK_TEXT;
	return RESIL_OK;
}

/* A key of issue 28 into b: the bulkhead's mode and gradient into its
 * config (the stage is touched, as by its other keys); a chaos key kept
 * for build_finish, its method declared. */
static resil_err
apply_chaos(build *b, const setting *s, resil_diag *diag)
{
	chaos_ref *r;

	if (s->chaos == SK_BULKHEAD) {
		resil_diag d;

		d.msg[0] = '\0';
		if (resil_bulkhead_config_set(
		        &b->pc.bulkhead, s->key, s->value, &d) != RESIL_OK)
			return resil__config_fail(
			    diag, b->origin, s->line, "%s", d.msg);
		if (s->line == 0)
			b->set_seen[ST_BULKHEAD] = 1;
		b->last[ST_BULKHEAD] = b->set_seen[ST_BULKHEAD] ? 0 : s->line;
		b->touched[ST_BULKHEAD] = 1;
		return RESIL_OK;
	}
	if (s->method != NULL && build_method(b, s->method) < 0)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	if (b->ncref == b->capref) {
		size_t cap = b->capref == 0 ? 8 : b->capref * 2;
		chaos_ref *nr = resil__alloc(b->a, cap * sizeof(*nr));

		if (nr == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "config: out of memory");
		if (b->ncref > 0)
			memcpy(nr, b->cref, b->ncref * sizeof(*nr));
		if (b->cref != NULL)
			resil__free(b->a, b->cref, b->capref * sizeof(*nr));
		b->cref = nr;
		b->capref = cap;
	}
	r = &b->cref[b->ncref++];
	r->method = s->method;
	r->key = s->method != NULL ? s->key + strlen(s->method) + 1 : s->key;
	r->value = s->value;
	r->line = s->line;
	return RESIL_OK;
}

/* The chaos of method (NULL: the service's): the service's keys, then
 * the method's over them. */
static resil_err
chaos_make(build *b, const char *method, resil_chaos **out, resil_diag *diag)
{
	resil_chaos_config c;
	resil_diag d;
	resil_err err = RESIL_OK;
	size_t i;
	int pass;

	resil_chaos_config_init(&c);
	c.alloc = b->a;
	d.msg[0] = '\0';
	for (pass = 0; pass < 2 && err == RESIL_OK; pass++)
		for (i = 0; i < b->ncref && err == RESIL_OK; i++) {
			const chaos_ref *r = &b->cref[i];

			if (pass == 0 ? r->method != NULL
			              : method == NULL || r->method == NULL ||
			                strcmp(r->method, method) != 0)
				continue;
			err = resil_chaos_config_set(&c, r->key, r->value, &d);
		}
	if (err == RESIL_OK)
		err = resil_chaos_new(out, &c, &d);
	resil_chaos_config_deinit(&c);
	if (err == RESIL_E_NOMEM)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	if (err != RESIL_OK)
		return resil__config_fail(diag, b->origin,
		    b->cref[b->ncref - 1].line, "%s", d.msg);
	return RESIL_OK;
}

/* After the last setting: the chaos of the service, with a chaos of its
 * own for each method that has chaos keys, as the pipeline's chaos. */
static resil_err
chaos_finish(build *b, resil_diag *diag)
{
	resil_chaos *root = NULL, *ch = NULL;
	resil_err err;
	size_t i, j;

	if (b->ncref == 0)
		return RESIL_OK;
	err = chaos_make(b, NULL, &root, diag);
	for (i = 0; i < b->ncref && err == RESIL_OK; i++) {
		const char *m = b->cref[i].method;

		for (j = 0; m != NULL && j < i; j++)
			if (b->cref[j].method != NULL &&
			    strcmp(b->cref[j].method, m) == 0)
				break;
		if (m == NULL || j < i)
			continue; /* the service's, or a method done */
		err = chaos_make(b, m, &ch, diag);
		if (err == RESIL_OK) {
			err = resil_chaos_set_method(root, m, ch, diag);
			resil_chaos_free(ch);
		}
	}
	if (err != RESIL_OK) {
		resil_chaos_free(root);
		return err;
	}
	b->chaos = root;
	b->pc.chaos = root;
	return RESIL_OK;
}

static void
chaos_discard(build *b)
{
	if (b->cref != NULL)
		resil__free(b->a, b->cref, b->capref * sizeof(*b->cref));
	b->cref = NULL;
	b->ncref = b->capref = 0;
	resil_chaos_free(b->chaos);
	b->chaos = NULL;
}

/* Issue 41: an override of a keyed family, into b (its stage touched, as
 * by the stage's other keys). */
static resil_err
apply_keyed(build *b, const setting *s, resil_diag *diag)
{
	static const int stages[4] = { ST_BREAKER, ST_RATELIMIT, ST_BULKHEAD,
		ST_THROTTLE };
	keyval kv = { s->key, s->value, b->origin, s->line };
	const char *v;
	int k = resil__keyed_override_kind(s->key, &v);

	if (k < 0)
		return RESIL_E_INVAL;
	if (s->line == 0)
		b->set_seen[stages[k]] = 1;
	b->last[stages[k]] = b->set_seen[stages[k]] ? 0 : s->line;
	b->touched[stages[k]] = 1;
	return resil__keyed_override_add(b->kovr, b->a, &kv, diag);
}

/* Apply one setting to b: the key table says how its value is read. */
static resil_err
build_apply(build *b, const setting *s, resil_diag *diag)
{
	const keydef *k = s->def;
	keyval kv;
	resil_err err;
	int on = 0;

	resil__combo_key(&b->combo, s->key, s->method, s->line);
	if (s->source)
		return apply_source(b, s, diag);
	if (s->chaos == SK_KEYED)
		return apply_keyed(b, s, diag);
	if (s->chaos != 0)
		return apply_chaos(b, s, diag);
	if (k == NULL && s->mk == MK_TEXT)
		return apply_text(b, s, diag);
	kv.key = s->key;
	kv.value = s->value;
	kv.origin = b->origin;
	kv.line = s->line;
	if (k == NULL)
		return apply_method(b, s, &kv, diag);
	note_key(b, k, s);
	if (strcmp(s->key, "cluster") == 0)
		b->strategy_line = s->line;
	if (k->kind == K_ENABLED) {
		/* The switch is decided at the end (build_finish). */
		err = resil__config_read(k, &kv, &on, diag);
		if (err == RESIL_OK)
			b->enabled[k->stage] = on;
		return err;
	}
	err = resil__config_read(k, &kv, (char *)&b->pc + k->off, diag);
	if (err == RESIL_OK && k->kind == K_MOCK) {
		b->mock.value = s->value;
		b->mock.line = s->line;
	}
	return err;
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
		return resil__config_fail(
		    diag, b->origin, s->line, "%s.mock: %s", name, msg);
	return resil__config_fail(diag, b->origin, s->line, "mock: %s", msg);
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
	{ "window_ns", "window" }, /* throttle.window (issue 42) */
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
	return resil__config_fail(diag, b->origin, line, "%s", msg);
}

/* Issue 24.2: the shared-state keys against the rest (one service
 * breaker, the stage on, ...), at the line of the stage's last key. */
static resil_err
shared_check(build *b, resil_diag *diag)
{
	resil_diag d;
	int stage = ST_BREAKER;

	d.msg[0] = '\0';
	if (b->pc.endpoint_breaker_shared_url != NULL) {
		resil_directory_config dc;

		resil_directory_config_init(&dc);
		if (b->ct != NULL)
			resil_cluster_text_directory(b->ct, &dc);
		if (dc.endpoint_breaker == NULL)
			return resil__config_fail(diag, b->origin,
			    b->eb_shared_line,
			    "endpoint.breaker.shared: needs the endpoint breaker "
			    "(an endpoint.breaker.* key)");
	}
	if (resil__shared_check(&b->pc, &stage, &d) == RESIL_OK)
		return RESIL_OK;
	return resil__config_fail(diag, b->origin, b->last[stage], "%s", d.msg);
}

/* cluster=zone-aware over endpoints the text lists (url=): each needs a
 * zone, which resil_pipeline_new() checked, without a line (issue 38.6).
 * A registry's endpoints come later: the pipeline checks those. */
static resil_err
zone_aware_check(const build *b, resil_diag *diag)
{
	resil_directory_config dc;
	size_t i;

	if (b->pc.cluster.strategy != RESIL_CLUSTER_ZONE_AWARE)
		return RESIL_OK;
	resil_directory_config_init(&dc);
	resil_cluster_text_directory(b->ct, &dc);
	for (i = 0; i < dc.nendpoints; i++) {
		const resil_endpoint_spec *e = &dc.endpoints[i];

		if (!e->mock && (e->zone == NULL || e->zone[0] == '\0'))
			return resil__config_fail(diag, b->origin,
			    b->strategy_line,
			    "cluster: zone-aware needs every endpoint's zone: "
			    "url= lists %s without one (?zone=)",
			    e->address);
	}
	return RESIL_OK;
}

/* The registry keys together, at the end of the text: what
 * resil_config_source() would refuse is refused here, with a line (issue
 * 38.6), and keys that registry=N/A leaves unused are refused too. */
static resil_err
source_check(const build *b, resil_diag *diag)
{
	resil_source_config rc;
	resil_diag d;

	if (b->source_first.value != NULL && !b->registry_seen)
		return resil__config_fail(diag, b->origin,
		    b->source_first.line,
		    "%s: needs registry= (the registry's URL, "
		    "zookeeper://host:port, or N/A)",
		    b->source_first.value);
	if (!b->registry_seen)
		return RESIL_OK;
	if (!resil_source_text_present(b->st)) {
		if (b->source_other.value == NULL)
			return RESIL_OK;
		return resil__config_fail(diag, b->origin,
		    b->source_other.line,
		    "%s: unused: registry=N/A (line %u) names no registry",
		    b->source_other.value, b->registry.line);
	}
	resil_source_config_init(&rc);
	resil_source_text_config(b->st, &rc);
	if (rc.service == NULL || rc.service[0] == '\0')
		rc.service = b->pc.service;
	if (rc.service == NULL || rc.service[0] == '\0')
		return resil__config_fail(diag, b->origin, b->registry.line,
		    "registry: needs the interface to subscribe to "
		    "(registry.service=, or service=)");
	rc.directory = (resil_directory *)(uintptr_t)1; /* the caller's */
	d.msg[0] = '\0';
	if (resil_source_config_validate(&rc, &d) != RESIL_OK)
		return resil__config_fail(
		    diag, b->origin, b->registry.line, "%s", d.msg);
	return RESIL_OK;
}

/* Issue 41: the keyed families' overrides into b->pc, and the families
 * against the rest (at the line of the stage's last key). */
static resil_err
keyed_finish(build *b, resil_diag *diag)
{
	static const int stages[4] = { ST_BREAKER, ST_RATELIMIT, ST_BULKHEAD,
		ST_THROTTLE };
	resil_diag d;
	int i, kind = -1;

	for (i = 0; i < 3; i++) {
		b->pc.keyed[i].overrides = b->kovr[i].v;
		b->pc.keyed[i].n_overrides = b->kovr[i].n;
	}
	d.msg[0] = '\0';
	if (resil__kfleet_cfg_check(&b->pc, &kind, &d) == RESIL_OK)
		return RESIL_OK;
	return resil__config_fail(diag, b->origin,
	    kind >= 0 ? b->last[stages[kind]] : 0, "%s", d.msg);
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

		memcpy((char *)&b->pc + resil__config_enabled_at(st), &on,
		    sizeof(on));
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
			return resil__config_fail(diag, b->origin,
			    b->method_mock[i].line, "%s", d.msg);
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
	if (b->pc.throttle_enabled &&
	    resil_throttle_config_validate(&b->pc.throttle, &d) != RESIL_OK)
		return stage_fail(b, ST_THROTTLE, &d, diag);
	if ((err = shared_check(b, diag)) != RESIL_OK)
		return err;
	if (b->cluster_seen &&
	    resil_cluster_config_validate(&b->pc.cluster, &d) != RESIL_OK)
		return resil__config_fail(
		    diag, b->origin, b->cluster_line, "%s", d.msg);
	if (b->ct != NULL &&
	    (err = resil_cluster_text_finish(b->ct, diag)) != RESIL_OK)
		return err;
	if (b->ct != NULL) {
		/* The cluster keys against the pipeline's (issue 24.5). */
		resil__cluster_peer peer;

		peer.origin = b->origin;
		peer.zone_aware =
		    b->pc.cluster.strategy == RESIL_CLUSTER_ZONE_AWARE;
		peer.cluster_line = b->strategy_line;
		peer.local_zone = b->pc.cluster.local_zone != NULL;
		peer.registry = resil_source_text_present(b->st)
		    ? b->registry.value
		    : NULL;
		peer.registry_line = b->registry.line;
		if ((err = resil__cluster_text_peer_check(
		         b->ct, &peer, diag)) != RESIL_OK)
			return err;
		if ((err = zone_aware_check(b, diag)) != RESIL_OK)
			return err;
	}
	if ((err = source_check(b, diag)) != RESIL_OK)
		return err;
	if ((err = chaos_finish(b, diag)) != RESIL_OK)
		return err;
	if ((err = keyed_finish(b, diag)) != RESIL_OK)
		return err;
	/* The cache has no cross-field rule: its fields were checked one by
	 * one as they were read. */
	b->pc.methods = b->n > 0 ? b->methods : NULL;
	b->pc.nmethods = b->n;
	/* Accepted-but-unused and contradictory combinations (issue 24.5). */
	return resil__combo_check(
	    &b->combo, b->origin, &b->pc, b->ct != NULL, diag);
}

/* Make b the config's pipeline configuration; b is consumed. */
static void
install(resil_config *conf, build *b)
{
	int i;

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
	resil_source_text_free(conf->st);
	conf->st = b->st;
	b->st = NULL;
	if (resil_chaos_same(b->chaos, conf->chaos)) {
		/* The same chaos keys (a set of another key): the chaos a
		 * pipeline built from conf has stays, so a reload is not
		 * refused for it. */
		resil_chaos_free(b->chaos);
		b->chaos = conf->chaos;
		conf->chaos = NULL;
		conf->pc.chaos = b->chaos;
	}
	resil_chaos_free(conf->chaos);
	conf->chaos = b->chaos;
	b->chaos = NULL;
	chaos_discard(b);
	for (i = 0; i < 3; i++) {
		resil__kovr_free(&conf->kovr[i], &conf->alloc);
		conf->kovr[i] = b->kovr[i];
		memset(&b->kovr[i], 0, sizeof(b->kovr[i]));
	}
	b->methods = NULL;
	b->method_mock = NULL;
	strtab_free(&b->names, b->a);
	conf->pc.cluster_keys = conf->ckeys;
}

/* Whether s is a selector, directory or registry key. */
static int
cluster_key(const setting *s)
{
	return s->source || (s->def == NULL && s->mk == MK_TEXT && !s->chaos);
}

/* conf->ckeys made again from the settings (lib/pipeline_ckeys.h's form:
 * the origin, then "LINE\tKEY=VALUE" lines). */
static resil_err
ckeys_make(resil_config *conf, resil_diag *diag)
{
	const char *origin = conf->origin != NULL ? conf->origin : "<string>";
	size_t i, len = strlen(origin) + 2, at;
	char *s;

	/* Exactly the string's size: resil__strfree gives back strlen + 1. */
	for (i = 0; i < conf->n; i++)
		if (cluster_key(&conf->settings[i]))
			len += (size_t)snprintf(NULL, 0, "%u\t%s=%s\n",
			    conf->settings[i].line, conf->settings[i].key,
			    conf->settings[i].value);
	s = resil__alloc(&conf->alloc, len);
	if (s == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	at = (size_t)snprintf(s, len, "%s\n", origin);
	for (i = 0; i < conf->n; i++) {
		const setting *st = &conf->settings[i];

		if (cluster_key(st))
			at += (size_t)snprintf(s + at, len - at, "%u\t%s=%s\n",
			    st->line, st->key, st->value);
	}
	resil__strfree(&conf->alloc, conf->ckeys);
	conf->ckeys = s;
	return RESIL_OK;
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
	if (err == RESIL_OK)
		err = ckeys_make(conf, diag);
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

/* Whether key=value is a registry key of the source: *is set to 1 when it
 * is one and its value is good; an error for a bad value; RESIL_OK with
 * *is 0 for a key the source does not know (registry.empty_protection is
 * the directory's, read with the selector's keys). */
static resil_err
try_source(const resil_config *conf, const char *key, const char *value,
    unsigned line, resil_diag *diag, int *is)
{
	resil_source_text *st;
	resil_err err;

	*is = 0;
	/* Issue 40: Dubbo's application= and check= are the source's. */
	if (strcmp(key, "registry") != 0 && strncmp(key, "registry.", 9) != 0 &&
	    strcmp(key, "application") != 0 && strcmp(key, "check") != 0)
		return RESIL_OK;
	if (resil_source_text_new(&st, &conf->alloc) != RESIL_OK)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "config: out of memory");
	err = resil_source_text_set(
	    st, key, value, line > 0 ? conf->origin : NULL, line, diag);
	resil_source_text_free(st);
	if (err == RESIL_E_NOTFOUND) {
		if (diag != NULL)
			diag->msg[0] = '\0';
		return RESIL_OK;
	}
	*is = err == RESIL_OK;
	return err;
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
	err = try_source(conf, s->key, s->value, line, diag, &s->source);
	if (err == RESIL_OK && s->source) {
		s->mk = MK_TEXT; /* no method */
		return RESIL_OK;
	}
	if (err == RESIL_OK)
		err = try_chaos(conf, s, diag);
	if (err == RESIL_OK && s->chaos != 0)
		return RESIL_OK;
	if (err == RESIL_OK)
		err = resil__config_classify(s->key, s->value, a, &s->def,
		    &mlen, &s->mk, conf->origin, line, diag);
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
			err = resil__config_fail(diag, conf->origin, line,
			    "a NUL byte in the line");
			break;
		}
		eq = memchr(ln, '=', n);
		if (eq == NULL) {
			err = resil__config_fail(diag, conf->origin, line,
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
			err = resil__config_fail(
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
			err = resil__config_fail(diag, conf->origin, line,
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
	if (err == RESIL_OK)
		err = ckeys_make(conf, diag);
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
	resil_source_text_free(conf->st);
	resil_chaos_free(conf->chaos);
	for (i = 0; i < 3; i++)
		resil__kovr_free(&conf->kovr[i], &a);
	resil__strfree(&a, conf->ckeys);
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

/* A key of issue 28 (chaos.*, bulkhead.limit, ...): its value as given
 * (1, *err set), or 0 for another key. */
static int
config_get_chaos(const resil_config *conf, const char *key, char *buf,
    size_t len, resil_err *err)
{
	long at = setting_find(conf, key);
	size_t n;

	if (at < 0 || conf->settings[at].chaos == 0)
		return 0;
	n = strlen(conf->settings[at].value);
	*err = n < len ? RESIL_OK : RESIL_E_INVAL;
	if (n < len)
		memcpy(buf, conf->settings[at].value, n + 1);
	return 1;
}

resil_err
resil_config_get(
    const resil_config *conf, const char *key, char *buf, size_t len)
{
	const keydef *k = NULL;
	const resil_pipeline_config *pc;
	const resil_method_config *m = NULL;
	size_t i, mlen = 0;
	enum mkey mk = MK_TYPE;
	resil_err err;

	if (conf == NULL || key == NULL || buf == NULL || len == 0)
		return RESIL_E_INVAL;
	pc = &conf->pc;
	if (config_get_chaos(conf, key, buf, len, &err))
		return err;
	if (resil__config_classify(
	        key, NULL, NULL, &k, &mlen, &mk, NULL, 0, NULL) != RESIL_OK)
		return RESIL_E_NOTFOUND;
	if (k != NULL)
		return resil__config_write(k, pc, buf, len);
	for (i = 0; i < pc->nmethods; i++) {
		if (strlen(pc->methods[i].name) == mlen &&
		    memcmp(pc->methods[i].name, key, mlen) == 0)
			m = &pc->methods[i];
	}
	if (m == NULL || mk >= MK_COUNT)
		return RESIL_E_NOTFOUND;
	return resil__config_write_method(mk, m, buf, len);
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
	/* zone= is the selector's local zone too, unless router.zone says
	 * otherwise. zone-aware splits by zone itself: there the zone only
	 * names the consumer (condition rules), with no affinity, which
	 * would remove the other zones before its second phase. */
	if (out->local_zone == NULL && conf->pc.cluster.local_zone != NULL) {
		out->local_zone = conf->pc.cluster.local_zone;
		if (conf->pc.cluster.strategy == RESIL_CLUSTER_ZONE_AWARE)
			out->zone_mode = RESIL_ZONE_OFF;
	}
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
	if (conf->pc.endpoint_breaker_shared_url != NULL) /* issue 24.2 */
		out->endpoint_breaker_shm =
		    conf->pc.endpoint_breaker_shared_url + 4;
	return 1;
}

int
resil_config_source_config(const resil_config *conf, resil_source_config *out)
{
	if (conf == NULL || out == NULL ||
	    !resil_source_text_present(conf->st))
		return 0;
	resil_source_text_config(conf->st, out);
	if (out->service == NULL || out->service[0] == '\0')
		out->service = conf->pc.service;
	return 1;
}

resil_err
resil_config_source(const resil_config *conf, resil_directory *dir,
    resil_selector *sel, resil_registry_source **out, resil_diag *diag)
{
	resil_source_config sc;

	if (conf == NULL || dir == NULL || out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "config: %s is NULL",
		    conf == NULL      ? "conf"
		        : dir == NULL ? "dir"
		                      : "out");
	resil_source_config_init(&sc);
	if (!resil_config_source_config(conf, &sc))
		return resil__diagf(diag, RESIL_E_NOTFOUND,
		    "config: no registry (registry=zookeeper://host:port)");
	sc.directory = dir;
	sc.selector = sel;
	{
		/* Issue 40: the consumer's node says its declared methods. */
		char methods[1024];
		size_t i, len = 0;

		methods[0] = '\0';
		for (i = 0; i < conf->pc.nmethods && len < sizeof(methods);
		     i++)
			len += (size_t)snprintf(methods + len,
			    sizeof(methods) - len, "%s%s", i > 0 ? "," : "",
			    conf->pc.methods[i].name);
		if (len > 0 && len < sizeof(methods))
			sc.methods = methods;
		return resil_source_new(out, &sc, diag);
	}
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
		return resil__config_dur_fail(
		    diag, NULL, 0, "duration", text, r, unit_at);
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

/* ---- reload from text: the parser above, then the pipeline's reload ----
 *
 * conf starts NULL: in this file clang's analyzer follows the parser, and
 * it cannot tell that resil__diagf() returns its error, never RESIL_OK. */

/* The line of key[0..klen) in conf, or of the first key of its family
 * (key.*, <method>.key.*); 0: none (resil__reload_text). */
static unsigned
key_line(const char *key, size_t klen, void *ctx)
{
	const resil_config *conf = ctx;
	unsigned fam = 0;
	size_t i;

	for (i = conf->n; i-- > 0;) {
		const setting *s = &conf->settings[i];
		const char *k = s->key, *dot = strchr(k, '.');

		if (strlen(k) == klen && memcmp(k, key, klen) == 0)
			return s->line; /* the last one is the one in force */
		if ((strncmp(k, key, klen) == 0 && k[klen] == '.') ||
		    (dot != NULL && strncmp(dot + 1, key, klen) == 0 &&
		        dot[1 + klen] == '.'))
			fam = s->line;
	}
	return fam;
}

/* The text parsed into conf (err: how that went): the pipeline reloads
 * with it, and conf goes. */
static resil_err
reload_parsed(
    resil_pipeline *p, resil_config *conf, resil_err err, resil_diag *diag)
{
	resil_pipeline_config pc;

	if (err != RESIL_OK)
		return err;
	pc = *resil_config_pipeline(conf);
	/* Chaos keys like the running chaos's: it stays (issue 28); other
	 * ones are refused by the reload (chaos is fixed at creation). */
	if (resil_chaos_same(pc.chaos, resil_pipeline_chaos(p, NULL)))
		pc.chaos = NULL;
	{
		resil__reload_text t = { conf->origin, key_line, conf };

		err = resil__pipeline_reload_text(p, &pc, &t, diag);
	}
	resil_config_free(conf);
	return err;
}

resil_err
resil_pipeline_reload_string(
    resil_pipeline *p, const char *text, const char *origin, resil_diag *diag)
{
	resil_config *conf = NULL;
	resil_err err;

	if (p == NULL || text == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline: %s is NULL", p == NULL ? "p" : "text");
	err = resil_config_parse_string(
	    &conf, text, origin, resil__pipeline_allocator(p), diag);
	return reload_parsed(p, conf, err, diag);
}

resil_err
resil_pipeline_reload_file(
    resil_pipeline *p, const char *path, resil_diag *diag)
{
	resil_config *conf = NULL;
	resil_err err;

	if (p == NULL || path == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "pipeline: %s is NULL", p == NULL ? "p" : "path");
	err = resil_config_parse_file(
	    &conf, path, resil__pipeline_allocator(p), diag);
	return reload_parsed(p, conf, err, diag);
}

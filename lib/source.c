/*
 * The registry source: configuration, the source's thread, and what it
 * does with each list a backend delivers: providers become one directory
 * push, condition rules the selector's rules, and both the cache file.
 *
 * A backend's threads (the ZooKeeper client's) only copy a list into the
 * pending slot of its category and wake the source's thread; a newer list
 * replaces one not yet applied, so a flood of changes costs one push per
 * turn of the thread, never a queue. Parsed provider URLs are kept by node
 * name (as Dubbo's CacheableFailbackRegistry keeps them), so a change of
 * one provider among many parses one URL.
 */
#define _POSIX_C_SOURCE 200809L

#include "source_internal.h"

#include "clock_internal.h"
#include "configurator.h"
#include "router_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

/* A failed uthash allocation sets the caller's resil__oom. */
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(obj) (resil__oom = 1)

/* One list as received: names in one block. */
typedef struct list {
	char **names;
	size_t n;
	size_t bytes; /* of the block: n pointers, then the strings */
	uint64_t fired;
	int decoded;
} list;

/* A provider node seen in the last list, parsed once. */
typedef struct entry {
	UT_hash_handle hh;
	char *name; /* as received */
	char *decoded;
	int verdict;
	int dup_said;
	resil__provider p;
} entry;

#define EVQ 32

struct resil_registry_source {
	resil_allocator a;
	/* The rules' allocator: the selector's (it frees them, after the
	 * source is gone too; issue 38.2), else the source's. */
	const resil_allocator *rule_alloc;
	resil_clock clk;
	resil_clock wall;
	resil_source_config cfg; /* strings are the copies below */
	char *s_registry, *s_service, *s_group, *s_version, *s_root;
	char *s_protocols, *s_file, *hosts, *key;
	char *s_application, *s_methods;
	char *path[RESIL__NCAT];
	/* Issue 40: this consumer's address, URL and node; the override
	 * rules (lib/configurator.c). */
	char host[64];
	char *consumer_url, *consumer_node;
	resil__overrides ov;
	resil__ov_who who;
	resil__match match;

	const resil__source_backend *be;
	void *be_state;

	/* Deliveries and the thread's life. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, has_thread, woken;
	pthread_t thread;
	list *pend[RESIL__NCAT];
	struct {
		resil_source_event_type type;
		char msg[192];
	} evq[EVQ];
	unsigned evn;

	/* Work: held while a list is applied, the file written, tick. */
	pthread_mutex_t work;
	entry *tab;
	list *saved[RESIL__NCAT];  /* what the file gets */
	list *failed[RESIL__NCAT]; /* to apply again */
	uint64_t retry_at;
	int dirty;
	uint64_t saved_at; /* system clock */
	int rules_given;   /* the selector has the registry's rules */

	pthread_mutex_t smu;
	pthread_cond_t pcv; /* with smu: a push was made (check) */
	resil_source_stats st;
};

const char *
resil_source_event_name(resil_source_event_type t)
{
	static const char *const names[] = { "CONNECTED", "DISCONNECTED",
		"EXPIRED", "PROVIDERS", "EMPTY_KEPT", "SKIPPED",
		"BAD_PROVIDER", "BAD_FIELD", "ROUTES", "BAD_ROUTE",
		"CACHE_LOADED", "CACHE_ERROR", "ERROR", "REGISTERED",
		"OVERRIDE", "BAD_OVERRIDE" };

	if ((unsigned)t < sizeof(names) / sizeof(names[0]))
		return names[t];
	return "UNKNOWN";
}

static uint64_t
sys_now(void)
{
	return resil_clock_now(resil_clock_system());
}

static int64_t
wall_ms(resil_registry_source *src)
{
	return (int64_t)(resil_clock_now(&src->wall) / RESIL_NS_PER_MS);
}

/* ---- events and stats ----------------------------------------------------
 */

static void
emit(resil_registry_source *src, resil_source_event_type type,
    const char *node, const char *msg, size_t count)
{
	resil_source_event ev;

	pthread_mutex_lock(&src->smu);
	switch (type) {
	case RESIL_SOURCE_BAD_PROVIDER:
	case RESIL_SOURCE_BAD_FIELD:
	case RESIL_SOURCE_BAD_ROUTE:
	case RESIL_SOURCE_BAD_OVERRIDE:
		src->st.bad++;
		break;
	case RESIL_SOURCE_SKIPPED:
		src->st.skipped++;
		break;
	case RESIL_SOURCE_ERROR:
	case RESIL_SOURCE_CACHE_ERROR:
		src->st.errors++;
		break;
	case RESIL_SOURCE_EMPTY_KEPT:
		src->st.empty_kept++;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&src->smu);
	if (src->cfg.listener == NULL)
		return;
	ev.type = type;
	ev.node = node != NULL ? node : "";
	ev.message = msg != NULL ? msg : "";
	ev.count = count;
	src->cfg.listener(&ev, src->cfg.listener_ctx);
}

void
resil_source_get_stats(resil_registry_source *src, resil_source_stats *out)
{
	if (src == NULL || out == NULL)
		return;
	pthread_mutex_lock(&src->smu);
	*out = src->st;
	pthread_mutex_unlock(&src->smu);
}

/* ---- lists ----------------------------------------------------------------
 */

static void
list_free(const resil_allocator *a, list *l)
{
	if (l == NULL)
		return;
	resil__free(a, l->names, l->bytes);
	resil__free(a, l, sizeof(*l));
}

static list *
list_copy(const resil_allocator *a, const char *const *names, size_t n,
    uint64_t fired, int decoded)
{
	size_t bytes = n * sizeof(char *), i;
	list *l = resil__calloc(a, sizeof(*l));
	char *s;

	if (l == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		bytes += strlen(names[i]) + 1;
	l->bytes = bytes > 0 ? bytes : 1;
	if ((l->names = resil__alloc(a, l->bytes)) == NULL) {
		resil__free(a, l, sizeof(*l));
		return NULL;
	}
	s = (char *)(l->names + n);
	for (i = 0; i < n; i++) {
		size_t len = strlen(names[i]) + 1;

		memcpy(s, names[i], len);
		l->names[i] = s;
		s += len;
	}
	l->n = n;
	l->fired = fired;
	l->decoded = decoded;
	return l;
}

/* ---- providers ------------------------------------------------------------
 */

static void
entry_free(const resil_allocator *a, entry *e)
{
	resil__strfree(a, e->name);
	resil__strfree(a, e->decoded);
	resil__provider_free(a, &e->p);
	resil__free(a, e, sizeof(*e));
}

/* Parse one node; NULL for out of memory. Events for what is not a
 * candidate or was repaired are sent here, once per node. */
static entry *
entry_new(resil_registry_source *src, const char *name, int decoded,
    uint64_t now, int64_t wms, int *nomem)
{
	const resil_allocator *a = &src->a;
	entry *e = resil__calloc(a, sizeof(*e));
	resil_diag why, field;
	resil__url u;
	resil_err err;
	size_t col = 0;
	char *conf = NULL;
	int v;

	*nomem = 0;
	if (e == NULL || (e->name = resil__strdup(a, name)) == NULL)
		goto oom;
	why.msg[0] = field.msg[0] = '\0';
	if (decoded)
		err = (e->decoded = resil__strdup(a, name)) == NULL
		    ? RESIL_E_NOMEM
		    : RESIL_OK;
	else
		err = resil__url_decode(a, name, &e->decoded, &col);
	if (err == RESIL_E_NOMEM)
		goto oom;
	if (err != RESIL_OK) {
		e->verdict = RESIL__PROVIDER_BAD;
		(void)snprintf(why.msg, sizeof(why.msg),
		    "a malformed %%-escape at column %zu of the node name",
		    col);
		emit(src, RESIL_SOURCE_BAD_PROVIDER, name, why.msg, 0);
		return e;
	}
	/* Issue 40: the override rules' provider keys (weight, disabled,
	 * ...) over the URL, as Dubbo configures a provider URL. */
	v = src->ov.provider_gen > 0
	    ? resil__ov_provider(&src->ov, &src->who, e->decoded, &conf)
	    : 0;
	if (v < 0)
		goto oom;
	err = resil__url_parse(a, v > 0 ? conf : e->decoded, &u, &why);
	resil__strfree(a, conf);
	if (err == RESIL_E_NOMEM)
		goto oom;
	if (err != RESIL_OK) {
		e->verdict = RESIL__PROVIDER_BAD;
		emit(src, RESIL_SOURCE_BAD_PROVIDER, e->decoded, why.msg, 0);
		return e;
	}
	v = resil__provider_map(
	    a, &u, &src->match, now, wms, &e->p, &why, &field);
	resil__url_free(a, &u);
	if (v < 0)
		goto oom;
	e->verdict = v;
	if (v == RESIL__PROVIDER_SKIP)
		emit(src, RESIL_SOURCE_SKIPPED, e->decoded, why.msg, 0);
	else if (v == RESIL__PROVIDER_BAD)
		emit(src, RESIL_SOURCE_BAD_PROVIDER, e->decoded, why.msg, 0);
	else if (field.msg[0] != '\0')
		emit(src, RESIL_SOURCE_BAD_FIELD, e->decoded, field.msg, 0);
	return e;
oom:
	if (e != NULL)
		entry_free(a, e);
	*nomem = 1;
	return NULL;
}

/* A reference to an entry, for the sorts. */
typedef struct eref {
	entry *e;
} eref;

/* Order for choosing one provider per address: the newest timestamp
 * first (a restarted provider whose old node has not expired yet), then
 * by name. */
static int
by_address(const void *x, const void *y)
{
	const entry *a = ((const eref *)x)->e;
	const entry *b = ((const eref *)y)->e;
	int c = strcmp(a->p.spec.address, b->p.spec.address);

	if (c != 0)
		return c;
	if (a->p.timestamp_ms != b->p.timestamp_ms)
		return a->p.timestamp_ms > b->p.timestamp_ms ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int
by_name(const void *x, const void *y)
{
	const entry *a = ((const eref *)x)->e;
	const entry *b = ((const eref *)y)->e;

	return strcmp(a->name, b->name);
}

static void
set_failed(resil_registry_source *src, int cat, list *l)
{
	list_free(&src->a, src->failed[cat]);
	src->failed[cat] = l;
	/* Out of memory or a refused push: try again in a second. */
	src->retry_at = sys_now() + RESIL_NS_PER_SEC;
}

static void
keep_saved(resil_registry_source *src, int cat, list *l)
{
	list_free(&src->a, src->saved[cat]);
	src->saved[cat] = l;
	if (src->cfg.file != NULL)
		src->dirty = 1;
}

/* Parse the names of l into a new table of src, taking the entries of
 * the old one it still lists and freeing the rest. 0, or -1 for out of
 * memory (the table then holds what was parsed). */
static int
retable(resil_registry_source *src, const list *l, uint64_t now, int64_t wms)
{
	const resil_allocator *resil__a = &src->a;
	entry *ntab = NULL, *e, *tmp;
	int resil__oom = 0, nomem = 0;
	size_t i;

	for (i = 0; i < l->n && !nomem; i++) {
		const char *name = l->names[i];
		size_t len = strlen(name);
		unsigned hv;

		/* One hash per name for the three table operations: the
		 * names are long (a whole URL) and this runs for every
		 * provider on every change. */
		HASH_VALUE(name, len, hv);
		HASH_FIND_BYHASHVALUE(hh, ntab, name, len, hv, e);
		if (e != NULL)
			continue; /* listed twice */
		HASH_FIND_BYHASHVALUE(hh, src->tab, name, len, hv, e);
		if (e != NULL)
			HASH_DEL(src->tab, e);
		else if ((e = entry_new(src, name, l->decoded, now, wms,
		              &nomem)) == NULL)
			break;
		HASH_ADD_KEYPTR_BYHASHVALUE(hh, ntab, e->name, len, hv, e);
		if (resil__oom) {
			entry_free(&src->a, e);
			nomem = 1;
		}
	}
	/* What the old list had and this one has not is gone. */
	HASH_ITER(hh, src->tab, e, tmp)
	{
		HASH_DEL(src->tab, e);
		entry_free(&src->a, e);
	}
	src->tab = ntab;
	return nomem ? -1 : 0;
}

/* The candidates of the table, one per address, in name order: *ok (an
 * array of *nok, to free) holds the *nkept chosen first. -1 for out of
 * memory. */
static int
one_per_address(
    resil_registry_source *src, eref **ok, size_t *nok, size_t *nkept)
{
	entry *e;
	size_t i, n = 0, kept = 0;
	eref *r = NULL;
	char msg[160];

	/* In table order (no deletion here: a plain walk). */
	for (e = src->tab; e != NULL; e = e->hh.next)
		n += e->verdict == RESIL__PROVIDER_OK;
	if (n > 0 && (r = resil__alloc(&src->a, n * sizeof(*r))) == NULL)
		return -1;
	i = 0;
	for (e = src->tab; e != NULL; e = e->hh.next)
		if (e->verdict == RESIL__PROVIDER_OK)
			r[i++].e = e;
	if (n > 1)
		qsort(r, n, sizeof(*r), by_address);
	for (i = 0; i < n; i++) {
		if (kept > 0 &&
		    strcmp(r[kept - 1].e->p.spec.address,
		        r[i].e->p.spec.address) == 0) {
			if (!r[i].e->dup_said) {
				(void)snprintf(msg, sizeof(msg),
				    "address %s is listed by a newer "
				    "provider; this one is left out",
				    r[i].e->p.spec.address);
				emit(src, RESIL_SOURCE_BAD_PROVIDER,
				    r[i].e->decoded, msg, 0);
				r[i].e->dup_said = 1;
			}
			continue;
		}
		r[i].e->dup_said = 0;
		r[kept++] = r[i];
	}
	if (kept > 1)
		qsort(r, kept, sizeof(*r), by_name);
	*ok = r;
	*nok = n;
	*nkept = kept;
	return 0;
}

/* Push the kept providers: RESIL_OK, or the directory's refusal (said
 * in *diag); *nprov counts the non-mock ones. */
static resil_err
push_kept(resil_registry_source *src, const eref *ok, size_t nkept,
    size_t *nprov, resil_diag *diag)
{
	resil_endpoint_spec *specs = NULL;
	resil_err err;
	size_t i;

	*nprov = 0;
	if (nkept > 0 &&
	    (specs = resil__alloc(&src->a, nkept * sizeof(*specs))) == NULL)
		return RESIL_E_NOMEM;
	for (i = 0; i < nkept; i++) {
		specs[i] = ok[i].e->p.spec;
		*nprov += !specs[i].mock;
	}
	err = resil_directory_push(src->cfg.directory, specs, nkept, diag);
	if (specs != NULL)
		resil__free(&src->a, specs, nkept * sizeof(*specs));
	return err;
}

static void
count_push(resil_registry_source *src, const list *l, size_t nkept)
{
	uint64_t took = sys_now() - l->fired;

	pthread_mutex_lock(&src->smu);
	src->st.pushes++;
	src->st.providers = nkept;
	src->st.last_update_ns = took;
	if (took > src->st.max_update_ns)
		src->st.max_update_ns = took;
	pthread_cond_broadcast(&src->pcv);
	pthread_mutex_unlock(&src->smu);
}

/* Apply a provider list (owned: kept for the file, or freed). */
static void
apply_providers(resil_registry_source *src, list *l)
{
	uint64_t before_v, after_v;
	eref *ok = NULL;
	size_t nok = 0, nkept = 0, nprov = 0, before_n;
	resil_diag diag;
	resil_err err;
	char msg[160];

	pthread_mutex_lock(&src->smu);
	src->st.lists++;
	pthread_mutex_unlock(&src->smu);
	if (retable(src, l, resil_clock_now(&src->clk), wall_ms(src)) != 0 ||
	    one_per_address(src, &ok, &nok, &nkept) != 0)
		goto oom;
	before_n = resil_directory_count(src->cfg.directory);
	before_v = resil_directory_version(src->cfg.directory);
	err = push_kept(src, ok, nkept, &nprov, &diag);
	after_v = resil_directory_version(src->cfg.directory);
	if (ok != NULL)
		resil__free(&src->a, ok, nok * sizeof(*ok));
	if (err == RESIL_E_NOMEM)
		goto oom;
	if (err != RESIL_OK) {
		emit(src, RESIL_SOURCE_ERROR, "", diag.msg, nkept);
		set_failed(src, RESIL__CAT_PROVIDERS, l);
		return;
	}
	count_push(src, l, nkept);
	if (nprov == 0 && before_n > 0 && after_v == before_v) {
		(void)snprintf(msg, sizeof(msg),
		    "the registry lists no provider of %s; the last %zu are "
		    "kept (empty protection)",
		    src->cfg.service, before_n);
		emit(src, RESIL_SOURCE_EMPTY_KEPT, "", msg, before_n);
		list_free(&src->a, l); /* the file keeps the last list */
		return;
	}
	(void)snprintf(
	    msg, sizeof(msg), "%zu providers of %s", nkept, src->cfg.service);
	emit(src, RESIL_SOURCE_PROVIDERS, "", msg, nkept);
	keep_saved(src, RESIL__CAT_PROVIDERS, l);
	return;
oom:
	emit(src, RESIL_SOURCE_ERROR, "",
	    "out of memory applying the provider list; the directory keeps "
	    "its list and the source tries again",
	    0);
	set_failed(src, RESIL__CAT_PROVIDERS, l);
}

/* ---- routes ----------------------------------------------------------------
 */

/* An element of the array of rules the selector copies. */
typedef resil_condition *rule_ptr;

typedef struct rule_item {
	resil_condition *c;
	const char *name;
	int priority;
} rule_item;

static int
by_priority(const void *x, const void *y)
{
	const rule_item *a = x, *b = y;

	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The rules go to the selector, which owns them from here on; on error
 * they are freed here, so the caller owns them in no case. */
static resil_err
give_rules(
    resil_selector *sel, resil_condition **rules, size_t n, resil_diag *diag)
{
	resil_err err = resil__selector_set_rules(
	    sel, RESIL__RULES_REGISTRY, rules, n, diag);
	size_t i;

	if (err != RESIL_OK)
		for (i = 0; i < n; i++)
			resil_condition_free(rules[i]);
	return err;
}

/* Parse entry i of l into *it: 1 when it is a rule, 0 when it is not (an
 * event says why), -1 for out of memory. */
static int
route_item(resil_registry_source *src, const list *l, size_t i, rule_item *it)
{
	const resil_allocator *a = &src->a;
	char *dec = NULL, *rule = NULL;
	int force = 0, prio = 0, v, r = 0;
	size_t col = 0;
	resil_diag why;
	resil__url u;
	resil_err err;
	char msg[160];

	why.msg[0] = '\0';
	if (l->decoded)
		err = (dec = resil__strdup(a, l->names[i])) == NULL
		    ? RESIL_E_NOMEM
		    : RESIL_OK;
	else
		err = resil__url_decode(a, l->names[i], &dec, &col);
	if (err == RESIL_E_NOMEM)
		return -1;
	if (err != RESIL_OK) {
		(void)snprintf(msg, sizeof(msg),
		    "a malformed %%-escape at column %zu of the node name",
		    col);
		emit(src, RESIL_SOURCE_BAD_ROUTE, l->names[i], msg, 0);
		return 0;
	}
	err = resil__url_parse(a, dec, &u, &why);
	if (err == RESIL_E_NOMEM) {
		r = -1;
		goto done;
	}
	if (err != RESIL_OK) {
		emit(src, RESIL_SOURCE_BAD_ROUTE, dec, why.msg, 0);
		goto done;
	}
	v = resil__route_map(a, &u, &rule, &force, &prio, &why);
	resil__url_free(a, &u);
	if (v < 0) {
		r = -1;
		goto done;
	}
	if (v != RESIL__PROVIDER_OK) {
		emit(src,
		    v == RESIL__PROVIDER_SKIP ? RESIL_SOURCE_SKIPPED
		                              : RESIL_SOURCE_BAD_ROUTE,
		    dec, why.msg, 0);
		goto done;
	}
	err =
	    resil_condition_parse(&it->c, rule, force, src->rule_alloc, &why);
	resil__strfree(a, rule);
	if (err == RESIL_E_NOMEM)
		r = -1;
	else if (err != RESIL_OK)
		emit(src, RESIL_SOURCE_BAD_ROUTE, dec, why.msg, 0);
	else {
		it->name = l->names[i];
		it->priority = prio;
		r = 1;
	}
done:
	resil__strfree(a, dec);
	return r;
}

/* Hand the n rules to the selector (or drop them, with no selector or
 * routes off), the outcome said in msg: RESIL_OK, or the selector's
 * error (said in *why), the rules freed in every case. */
static resil_err
hand_rules(resil_registry_source *src, rule_ptr *rules, size_t n, char *msg,
    size_t msglen, resil_diag *why)
{
	size_t i;

	if (src->cfg.selector != NULL && src->cfg.routes && n == 0 &&
	    !src->rules_given) {
		/* No rule in the registry and none given yet: the
		 * selector's own rules stay. */
		(void)snprintf(msg, msglen,
		    "no condition rule of %s in the registry; the selector's "
		    "own rules stay",
		    src->cfg.service);
	} else if (src->cfg.selector != NULL && src->cfg.routes) {
		resil_err err = give_rules(src->cfg.selector, rules, n, why);

		if (err != RESIL_OK)
			return err;
		src->rules_given = 1;
		(void)snprintf(msg, msglen,
		    "%zu condition rules of %s for the selector", n,
		    src->cfg.service);
	} else {
		for (i = 0; i < n; i++)
			resil_condition_free(rules[i]);
		(void)snprintf(msg, msglen,
		    "%zu condition rules of %s (no selector: not applied)", n,
		    src->cfg.service);
	}
	return RESIL_OK;
}

static void
apply_routes(resil_registry_source *src, list *l)
{
	const resil_allocator *a = &src->a;
	rule_item *items = NULL;
	rule_ptr *rules = NULL;
	size_t i, n = 0;
	resil_diag why;
	resil_err err;
	char msg[160];
	int r;

	if (l->n > 0 &&
	    (items = resil__calloc(a, l->n * sizeof(*items))) == NULL)
		goto oom;
	for (i = 0; i < l->n; i++) {
		if ((r = route_item(src, l, i, &items[n])) < 0)
			goto oom;
		n += (size_t)r;
	}
	/* Dubbo sorts its routers by priority, the lowest first. */
	if (n > 1)
		qsort(items, n, sizeof(*items), by_priority);
	if (n > 0 && (rules = resil__alloc(a, n * sizeof(rule_ptr))) == NULL)
		goto oom;
	for (i = 0; i < n; i++)
		rules[i] = items[i].c;
	why.msg[0] = '\0';
	err = hand_rules(src, rules, n, msg, sizeof(msg), &why);
	if (rules != NULL)
		resil__free(a, rules, n * sizeof(rule_ptr));
	if (items != NULL)
		resil__free(a, items, l->n * sizeof(*items));
	if (err == RESIL_E_NOMEM) {
		items = NULL;
		n = 0;
		goto oom;
	}
	if (err != RESIL_OK) {
		emit(src, RESIL_SOURCE_ERROR, "", why.msg, n);
		set_failed(src, RESIL__CAT_ROUTERS, l);
		return;
	}
	pthread_mutex_lock(&src->smu);
	src->st.route_lists++;
	src->st.rules = n;
	pthread_mutex_unlock(&src->smu);
	emit(src, RESIL_SOURCE_ROUTES, "", msg, n);
	keep_saved(src, RESIL__CAT_ROUTERS, l);
	return;
oom:
	for (i = 0; i < n; i++)
		resil_condition_free(items[i].c);
	if (items != NULL)
		resil__free(a, items, l->n * sizeof(*items));
	emit(src, RESIL_SOURCE_ERROR, "",
	    "out of memory applying the routers; the selector keeps its "
	    "rules and the source tries again",
	    0);
	set_failed(src, RESIL__CAT_ROUTERS, l);
}

/* ---- override rules (issue 40, lib/configurator.c) --------------------
 */

static void
ov_emit(void *ctx, resil_source_event_type t, const char *node,
    const char *msg, size_t count)
{
	emit(ctx, t, node, msg, count);
}

/* The providers mapped again under the rules in force: the table is
 * emptied and the last list applied again. */
static void
remap_providers(resil_registry_source *src)
{
	const resil_allocator *resil__a = &src->a;
	list *l = src->saved[RESIL__CAT_PROVIDERS], *copy;
	entry *e, *tmp;

	if (l == NULL)
		return;
	copy = list_copy(&src->a, (const char *const *)l->names, l->n,
	    sys_now(), l->decoded);
	if (copy == NULL) {
		emit(src, RESIL_SOURCE_ERROR, "",
		    "out of memory applying the override rules to the "
		    "providers",
		    0);
		return;
	}
	HASH_ITER(hh, src->tab, e, tmp)
	{
		HASH_DEL(src->tab, e);
		entry_free(&src->a, e);
	}
	apply_providers(src, copy);
}

static void
apply_overrides(resil_registry_source *src, int cat, list *l)
{
	int set = cat == RESIL__CAT_CONFIGURATORS ? RESIL__OV_URLS
	    : cat == RESIL__CAT_APP_RULES         ? RESIL__OV_APP
	                                          : RESIL__OV_SVC;

	if (resil__ov_set(&src->ov, &src->who, set,
	        (const char *const *)l->names, l->n, l->decoded) != RESIL_OK)
		emit(src, RESIL_SOURCE_ERROR, "",
		    "out of memory reading the override rules; the next "
		    "change reads them again",
		    0);
	list_free(&src->a, l);
	if (src->ov.changed_all)
		resil__ov_apply(&src->ov, &src->who);
	if (src->ov.changed_provider)
		remap_providers(src);
}

static void
apply(resil_registry_source *src, int cat, list *l)
{
	if (cat == RESIL__CAT_PROVIDERS)
		apply_providers(src, l);
	else if (cat == RESIL__CAT_ROUTERS)
		apply_routes(src, l);
	else
		apply_overrides(src, cat, l);
}

/* ---- the cache file ----------------------------------------------------- */

/* The decoded entries of both lists, for the file. */
static void
save_file(resil_registry_source *src)
{
	const resil_allocator *a = &src->a;
	size_t n = 0, i, k = 0, c;
	char **urls;
	resil_diag why;
	resil_err err = RESIL_OK;

	if (src->cfg.file == NULL || !src->dirty)
		return;
	for (c = 0; c < RESIL__NCAT; c++)
		n += src->saved[c] != NULL ? src->saved[c]->n : 0;
	urls = n > 0 ? resil__calloc(a, n * sizeof(*urls)) : NULL;
	if (n > 0 && urls == NULL)
		err = RESIL_E_NOMEM;
	for (c = 0; urls != NULL && c < RESIL__NCAT && err == RESIL_OK; c++) {
		list *l = src->saved[c];

		for (i = 0; l != NULL && i < l->n && err == RESIL_OK; i++) {
			size_t col;

			if (l->decoded)
				err = (urls[k] = resil__strdup(
				           a, l->names[i])) == NULL
				    ? RESIL_E_NOMEM
				    : RESIL_OK;
			else if ((err = resil__url_decode(a, l->names[i],
			              &urls[k], &col)) == RESIL_E_INVAL) {
				/* Not a URL: it has nothing to restore. */
				urls[k] = NULL;
				err = RESIL_OK;
				continue;
			}
			k += err == RESIL_OK;
		}
	}
	why.msg[0] = '\0';
	if (err == RESIL_OK)
		err = resil__cache_write(a, src->cfg.file, src->key,
		    (const char *const *)urls, k, &why);
	for (i = 0; urls != NULL && i < k; i++)
		resil__strfree(a, urls[i]);
	if (urls != NULL)
		resil__free(a, urls, n * sizeof(*urls));
	src->saved_at = sys_now();
	if (err == RESIL_OK) {
		src->dirty = 0;
		pthread_mutex_lock(&src->smu);
		src->st.cache_saves++;
		pthread_mutex_unlock(&src->smu);
		return;
	}
	/* Tried; the next change (or the next interval) tries again. */
	emit(src, RESIL_SOURCE_CACHE_ERROR, "",
	    err == RESIL_E_NOMEM ? "out of memory writing the cache file"
	                         : why.msg,
	    0);
}

static int
is_route_url(const resil_allocator *a, const char *url)
{
	resil__url u;
	const char *cat;
	int r;

	if (strncmp(url, "condition://", 12) == 0 ||
	    strncmp(url, "route://", 8) == 0 ||
	    strncmp(url, "script://", 9) == 0)
		return 1;
	if (resil__url_parse(a, url, &u, NULL) != RESIL_OK)
		return 0;
	cat = resil__url_get(&u, "category");
	r = cat != NULL && strcmp(cat, "routers") == 0;
	resil__url_free(a, &u);
	return r;
}

static void
load_file(resil_registry_source *src)
{
	const resil_allocator *a = &src->a;
	char **urls = NULL, **part[RESIL__NCAT] = { NULL, NULL };
	size_t n = 0, i, cnt[RESIL__NCAT] = { 0, 0 }, c;
	resil_diag why;
	resil_err err;
	int nomem = 0;
	char msg[200];

	why.msg[0] = '\0';
	err = resil__cache_read(a, src->cfg.file, src->key, &urls, &n, &why);
	if (err == RESIL_E_NOTFOUND)
		return;
	if (err != RESIL_OK) {
		emit(src, RESIL_SOURCE_CACHE_ERROR, "",
		    err == RESIL_E_NOMEM ? "out of memory reading the cache "
		                           "file"
		                         : why.msg,
		    0);
		return;
	}
	for (c = 0; c < RESIL__NCAT && n > 0 && !nomem; c++)
		nomem =
		    (part[c] = resil__calloc(a, n * sizeof(char *))) == NULL;
	for (i = 0; i < n && !nomem; i++) {
		if (strncmp(urls[i], "empty://", 8) == 0)
			continue;
		c = is_route_url(a, urls[i]) ? RESIL__CAT_ROUTERS
		                             : RESIL__CAT_PROVIDERS;
		part[c][cnt[c]++] = urls[i];
	}
	for (c = 0; c < RESIL__NCAT && !nomem; c++) {
		list *l;

		if (cnt[c] == 0)
			continue;
		l = list_copy(
		    a, (const char *const *)part[c], cnt[c], sys_now(), 1);
		if (l == NULL) {
			nomem = 1;
			break;
		}
		if (c == RESIL__CAT_PROVIDERS) {
			(void)snprintf(msg, sizeof(msg),
			    "%zu providers of %s from %s", cnt[c],
			    src->cfg.service, src->cfg.file);
			emit(src, RESIL_SOURCE_CACHE_LOADED, "", msg, cnt[c]);
		}
		apply(src, (int)c, l);
	}
	/* Read back as it is: nothing to write until a change. */
	src->dirty = 0;
	for (c = 0; c < RESIL__NCAT; c++)
		if (part[c] != NULL)
			resil__free(a, part[c], n * sizeof(char *));
	resil__cache_urls_free(a, urls, n);
	if (nomem)
		emit(src, RESIL_SOURCE_CACHE_ERROR, "",
		    "out of memory reading the cache file", 0);
}

/* ---- deliveries (any thread) ---------------------------------------------
 */

static void
sink_deliver(resil_registry_source *src, int cat, const char *const *names,
    size_t n, uint64_t fired_ns)
{
	list *l;

	if (cat < 0 || cat >= RESIL__NCAT)
		return;
	l = list_copy(&src->a, names, n, fired_ns, 0);
	pthread_mutex_lock(&src->mu);
	if (l == NULL) {
		/* The list is lost; say so, and the next change brings a
		 * full list again. */
		if (src->evn < EVQ) {
			src->evq[src->evn].type = RESIL_SOURCE_ERROR;
			(void)snprintf(src->evq[src->evn].msg,
			    sizeof(src->evq[0].msg),
			    "out of memory copying a list of %zu from the "
			    "registry",
			    n);
			src->evn++;
		}
	} else {
		list_free(&src->a, src->pend[cat]);
		src->pend[cat] = l;
	}
	src->woken = 1;
	pthread_cond_signal(&src->cv);
	pthread_mutex_unlock(&src->mu);
}

static void
sink_notify(
    resil_registry_source *src, resil_source_event_type type, const char *msg)
{
	pthread_mutex_lock(&src->smu);
	if (type == RESIL_SOURCE_CONNECTED) {
		src->st.connected = 1;
		src->st.connects++;
	} else if (type == RESIL_SOURCE_DISCONNECTED) {
		src->st.connected = 0;
	} else if (type == RESIL_SOURCE_EXPIRED) {
		src->st.connected = 0;
		src->st.expirations++;
	}
	pthread_mutex_unlock(&src->smu);
	pthread_mutex_lock(&src->mu);
	if (src->evn < EVQ) {
		src->evq[src->evn].type = type;
		(void)snprintf(src->evq[src->evn].msg, sizeof(src->evq[0].msg),
		    "%s", msg != NULL ? msg : "");
		src->evn++;
	}
	src->woken = 1;
	pthread_cond_signal(&src->cv);
	pthread_mutex_unlock(&src->mu);
}

static void
sink_session_made(resil_registry_source *src)
{
	pthread_mutex_lock(&src->smu);
	src->st.sessions++;
	pthread_mutex_unlock(&src->smu);
}

static void
sink_wake(resil_registry_source *src)
{
	pthread_mutex_lock(&src->mu);
	src->woken = 1;
	pthread_cond_signal(&src->cv);
	pthread_mutex_unlock(&src->mu);
}

static const resil__source_sink sink = {
	sink_deliver,
	sink_notify,
	sink_session_made,
	sink_wake,
};

/* ---- the source's thread --------------------------------------------------
 */

/* One turn: events, lists, retries, the backend's tick, the file. Returns
 * the ns until the next turn is due (0: none). */
static uint64_t
turn(resil_registry_source *src, list **take, unsigned evn,
    const resil_source_event_type *evt, char (*evm)[192])
{
	uint64_t now, next = 0, t;
	unsigned i;
	int c;

	for (i = 0; i < evn; i++)
		emit(src, evt[i], "", evm[i], 0);
	pthread_mutex_lock(&src->work);
	for (c = 0; c < RESIL__NCAT; c++) {
		if (take[c] != NULL) {
			/* A newer list replaces one to retry. */
			list_free(&src->a, src->failed[c]);
			src->failed[c] = NULL;
			apply(src, c, take[c]);
		}
	}
	now = sys_now();
	for (c = 0; c < RESIL__NCAT; c++) {
		if (src->failed[c] != NULL && now >= src->retry_at) {
			list *l = src->failed[c];

			src->failed[c] = NULL;
			apply(src, c, l);
		}
		if (src->failed[c] != NULL)
			next = src->retry_at > now ? src->retry_at - now : 1;
	}
	if (src->be != NULL && (t = src->be->tick(src->be_state)) > 0 &&
	    (next == 0 || t < next))
		next = t;
	if (src->dirty) {
		now = sys_now();
		if (now - src->saved_at >= src->cfg.file_interval_ns)
			save_file(src);
		if (src->dirty) {
			t = src->saved_at + src->cfg.file_interval_ns - now;
			if (t == 0 || t > src->cfg.file_interval_ns)
				t = src->cfg.file_interval_ns + 1;
			if (next == 0 || t < next)
				next = t;
		}
	}
	pthread_mutex_unlock(&src->work);
	return next;
}

static void *
thread_main(void *arg)
{
	resil_registry_source *src = arg;
	resil_source_event_type evt[EVQ];
	char evm[EVQ][192];
	uint64_t next = 0;

	pthread_mutex_lock(&src->mu);
	for (;;) {
		list *take[RESIL__NCAT];
		unsigned evn, i;
		int c;

		while (!src->stop && !src->woken) {
			if (next == 0) {
				pthread_cond_wait(&src->cv, &src->mu);
			} else {
				/* The condition variable waits on the
				 * monotonic system clock; whole ms, rounded
				 * up (a turn is never early). */
				uint64_t ms = next / RESIL_NS_PER_MS +
				    (next % RESIL_NS_PER_MS != 0);
				struct timespec ts;

				resil__cond_deadline(&ts,
				    ms > UINT32_MAX ? UINT32_MAX
				                    : (uint32_t)ms);
				if (pthread_cond_timedwait(
				        &src->cv, &src->mu, &ts) != 0)
					break;
			}
		}
		if (src->stop)
			break;
		src->woken = 0;
		for (c = 0; c < RESIL__NCAT; c++) {
			take[c] = src->pend[c];
			src->pend[c] = NULL;
		}
		evn = src->evn;
		for (i = 0; i < evn; i++) {
			evt[i] = src->evq[i].type;
			memcpy(evm[i], src->evq[i].msg, sizeof(evm[i]));
		}
		src->evn = 0;
		pthread_mutex_unlock(&src->mu);
		next = turn(src, take, evn, evt, evm);
		pthread_mutex_lock(&src->mu);
	}
	pthread_mutex_unlock(&src->mu);
	return NULL;
}

/* ---- configuration ---------------------------------------------------------
 */

/* Each item of the host list h (n bytes) is host:port with a port
 * 1..65535: the client would otherwise take the list and never connect,
 * and the consumer answer "no provider" for ever (issue 38.6). */
static resil_err
check_hosts(const char *url, const char *h, size_t n, resil_diag *diag)
{
	const char *end = h + n;

	while (h <= end) {
		const char *e = memchr(h, ',', (size_t)(end - h));
		const char *colon, *q;
		unsigned long port = 0;

		if (e == NULL)
			e = end;
		colon = e;
		if (h < e && *h == '[') {
			/* [IPv6]:port: the port's colon follows the ']'. */
			q = memchr(h, ']', (size_t)(e - h));
			if (q != NULL && q + 1 < e && q[1] == ':')
				colon = q + 1;
		} else {
			for (q = h; q < e; q++)
				if (*q == ':')
					colon = q;
		}
		if (colon == e || colon == h || colon + 1 == e)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "registry: \"%s\": \"%.*s\" is not host:port", url,
			    (int)(e - h), h);
		for (q = colon + 1; q < e; q++) {
			if (*q < '0' || *q > '9' || port > 65535)
				break;
			port = port * 10 + (unsigned long)(*q - '0');
		}
		if (q < e || port == 0 || port > 65535)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "registry: \"%s\": port \"%.*s\" is not "
			    "1..65535",
			    url, (int)(e - colon - 1), colon + 1);
		h = e + 1;
	}
	return RESIL_OK;
}

/* Split "zookeeper://h1:2181,h2:2181/x?backup=h3:2181&group=g" into the
 * scheme, the host list (backups appended) and the group (a root). */
static resil_err
parse_registry(const resil_allocator *a, const char *url, char **scheme,
    char **hosts, char **group, resil_diag *diag)
{
	const char *sep = strstr(url, "://"), *h, *he, *q;
	const char *backup = NULL, *grp = NULL;
	size_t bl = 0, gl = 0, hl, sl, n;
	char *hs, *p;

	if (sep == NULL || sep == url)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry: \"%s\" is not scheme://host:port", url);
	sl = (size_t)(sep - url);
	h = sep + 3;
	he = h + strcspn(h, "/?");
	hl = (size_t)(he - h);
	q = strchr(he, '?');
	while (q != NULL && *q != '\0') {
		const char *k = q + 1, *e = k + strcspn(k, "&");

		if (strncmp(k, "backup=", 7) == 0) {
			backup = k + 7;
			bl = (size_t)(e - backup);
		} else if (strncmp(k, "group=", 6) == 0) {
			grp = k + 6;
			gl = (size_t)(e - grp);
		}
		q = *e == '&' ? e : NULL;
	}
	if (hl == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry: \"%s\" names no host", url);
	for (p = (char *)(uintptr_t)h; p < he; p++)
		if (*p == ' ' || *p == '@')
			return resil__diagf(diag, RESIL_E_INVAL,
			    "registry: \"%s\": the hosts \"%.*s\" are not "
			    "host:port,...",
			    url, (int)hl, h);
	if (check_hosts(url, h, hl, diag) != RESIL_OK ||
	    (backup != NULL && check_hosts(url, backup, bl, diag) != RESIL_OK))
		return RESIL_E_INVAL;
	n = hl + (bl > 0 ? bl + 1 : 0) + 1;
	if ((hs = resil__alloc(a, n)) == NULL)
		return RESIL_E_NOMEM;
	memcpy(hs, h, hl);
	if (bl > 0) {
		hs[hl] = ',';
		memcpy(hs + hl + 1, backup, bl);
	}
	hs[n - 1] = '\0';
	*scheme = resil__strndup(a, url, sl);
	*group = gl > 0 ? resil__strndup(a, grp, gl) : NULL;
	if (*scheme == NULL || (gl > 0 && *group == NULL)) {
		resil__free(a, hs, n);
		resil__strfree(a, *scheme);
		resil__strfree(a, *group);
		return RESIL_E_NOMEM;
	}
	*hosts = hs;
	return RESIL_OK;
}

static const resil__source_backend *const backends[] = {
	&resil__source_zookeeper,
};

static const resil__source_backend *
find_backend(const char *scheme)
{
	size_t i;

	if (scheme == NULL)
		return NULL;
	for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strcmp(backends[i]->scheme, scheme) == 0)
			return backends[i];
	return NULL;
}

/* The next item of the comma list at *p, blanks around it dropped: its
 * start and length; 0 at the end of the list. */
static int
list_item(const char **p, const char **item, size_t *len)
{
	const char *s = *p, *e;

	if (s == NULL)
		return 0;
	e = strchr(s, ',');
	*len = e != NULL ? (size_t)(e - s) : strlen(s);
	while (*len > 0 && *s == ' ') {
		s++;
		(*len)--;
	}
	while (*len > 0 && s[*len - 1] == ' ')
		(*len)--;
	*item = s;
	*p = e != NULL ? e + 1 : NULL;
	return 1;
}

/* group: "*" or a comma list of names; version: "*" or one; protocols:
 * a comma list of known ones (issue 38.6: each was taken without a word
 * and matched no provider). */
static resil_err
check_lists(const resil_source_config *cfg, resil_diag *diag)
{
	const char *p = cfg->group, *it;
	size_t n;

	while (p != NULL && p[0] != '\0' && list_item(&p, &it, &n))
		if (n == 0 || memchr(it, ' ', n) != NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "registry.group: \"%s\": \"%.*s\" is not a group "
			    "name (a name, a comma list of names, or *)",
			    cfg->group, (int)n, it);
	if (cfg->version != NULL && strpbrk(cfg->version, ", ") != NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.version: \"%s\" is not one version (a "
		    "version, or * for any)",
		    cfg->version);
	p = cfg->protocols;
	while (p != NULL && list_item(&p, &it, &n)) {
		const char *k = RESIL__DUBBO_PROTOCOLS, *ke;
		int known = 0;

		/* The item, a whole item of the default list. */
		for (; !known && *k != '\0'; k = *ke != '\0' ? ke + 1 : ke) {
			ke = k + strcspn(k, ",");
			known = n > 0 && (size_t)(ke - k) == n &&
			    memcmp(k, it, n) == 0;
		}
		if (!known)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "registry.protocols: \"%s\": \"%.*s\" is not a "
			    "protocol of providers (dubbo, tri, grpc, rest, "
			    "http, https, hessian, rmi, thrift, webservice, "
			    "redis, memcached)",
			    cfg->protocols, (int)n, it);
	}
	return RESIL_OK;
}

resil_err
resil_source_config_validate(const resil_source_config *cfg, resil_diag *diag)
{
	const resil_allocator *a = resil_allocator_default();
	char *scheme = NULL, *hosts = NULL, *group = NULL;
	resil_err err;
	const char *p;

	if (cfg == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "config: NULL");
	if ((err = resil__check_size(diag, "source", "resil_source_config",
	         cfg->size, sizeof(*cfg))) != RESIL_OK)
		return err;
	if (cfg->registry == NULL || cfg->registry[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry: required (zookeeper://host:port)");
	if ((err = parse_registry(
	         a, cfg->registry, &scheme, &hosts, &group, diag)) != RESIL_OK)
		return err;
	if (find_backend(scheme) == NULL)
		err = resil__diagf(diag, RESIL_E_INVAL,
		    "registry: scheme \"%s\" is not supported (zookeeper)",
		    scheme);
	resil__strfree(a, scheme);
	resil__strfree(a, hosts);
	resil__strfree(a, group);
	if (err != RESIL_OK)
		return err;
	if (cfg->service == NULL || cfg->service[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.service: required (the interface)");
	for (p = cfg->service; *p != '\0'; p++)
		if (*p == '/' || *p == ' ')
			return resil__diagf(diag, RESIL_E_INVAL,
			    "registry.service: \"%s\" has a '%c'",
			    cfg->service, *p);
	if (cfg->root != NULL &&
	    (cfg->root[0] != '/' ||
	        (cfg->root[1] != '\0' &&
	            cfg->root[strlen(cfg->root) - 1] == '/')))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.root: \"%s\" is not /name (no '/' at the end)",
		    cfg->root);
	if (cfg->protocols != NULL && cfg->protocols[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.protocols: empty (NULL for the default list)");
	if ((err = check_lists(cfg, diag)) != RESIL_OK)
		return err;
	if (cfg->file != NULL && cfg->file[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.file: empty (NULL for none)");
	if (cfg->session_timeout_ms == 0 ||
	    cfg->session_timeout_ms > (uint32_t)INT32_MAX)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "registry.session_timeout: %lu ms is out of range "
		    "1..2147483647",
		    (unsigned long)cfg->session_timeout_ms);
	if (cfg->directory == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "directory: required (the directory to feed)");
	return RESIL_OK;
}

static void
free_strings(resil_registry_source *src)
{
	const resil_allocator *a = &src->a;
	int c;

	resil__strfree(a, src->s_registry);
	resil__strfree(a, src->s_service);
	resil__strfree(a, src->s_group);
	resil__strfree(a, src->s_version);
	resil__strfree(a, src->s_root);
	resil__strfree(a, src->s_protocols);
	resil__strfree(a, src->s_file);
	resil__strfree(a, src->hosts);
	resil__strfree(a, src->key);
	resil__strfree(a, src->s_application);
	resil__strfree(a, src->s_methods);
	resil__strfree(a, src->consumer_url);
	resil__strfree(a, src->consumer_node);
	for (c = 0; c < RESIL__NCAT; c++)
		resil__strfree(a, src->path[c]);
}

static void
release(resil_registry_source *src)
{
	const resil_allocator *resil__a = &src->a;
	entry *e, *tmp;
	int c;

	HASH_ITER(hh, src->tab, e, tmp)
	{
		HASH_DEL(src->tab, e);
		entry_free(&src->a, e);
	}
	for (c = 0; c < RESIL__NCAT; c++) {
		list_free(&src->a, src->pend[c]);
		list_free(&src->a, src->saved[c]);
		list_free(&src->a, src->failed[c]);
	}
	resil__ov_free(&src->ov, &src->a);
	free_strings(src);
	pthread_mutex_destroy(&src->mu);
	pthread_cond_destroy(&src->cv);
	pthread_mutex_destroy(&src->work);
	pthread_mutex_destroy(&src->smu);
	pthread_cond_destroy(&src->pcv);
	resil__free(&src->a, src, sizeof(*src));
}

/* Dubbo's toServicePath: root + "/" + URL.encode(service) + "/" + cat.
 * An interface name has nothing URLEncoder changes but a '$'. */
static int
plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '*' ||
	    c == '_';
}

static char *
category_path(const resil_allocator *a, const char *root, const char *svc,
    const char *cat)
{
	size_t n = 0, i;
	char *p, *o;

	if (strcmp(root, "/") == 0)
		root = "";
	for (i = 0; svc[i] != '\0'; i++)
		n += plain((unsigned char)svc[i]) ? 1 : 3;
	n += strlen(root) + strlen(cat) + 3;
	if ((p = resil__alloc(a, n)) == NULL)
		return NULL;
	for (o = p; *root != '\0'; root++)
		*o++ = *root;
	*o++ = '/';
	for (i = 0; svc[i] != '\0'; i++) {
		unsigned char c = (unsigned char)svc[i];

		if (plain(c))
			*o++ = (char)c;
		else {
			(void)snprintf(o, 4, "%%%02X", c);
			o += 3;
		}
	}
	*o++ = '/';
	memcpy(o, cat, strlen(cat) + 1);
	return p;
}

/* The root: cfg->root, else the registry URL's group (Dubbo: the group
 * is the root), else /dubbo. A new string, NULL for out of memory. */
static char *
root_of(const resil_allocator *a, const char *root, const char *group)
{
	size_t n;
	char *r;

	if (root != NULL)
		return resil__strdup(a, root);
	if (group == NULL)
		return resil__strdup(a, "/dubbo");
	if (group[0] == '/')
		return resil__strdup(a, group);
	n = strlen(group) + 2;
	if ((r = resil__alloc(a, n)) != NULL)
		(void)snprintf(r, n, "/%s", group);
	return r;
}

/* <root>/config/dubbo/<key>.configurators (Dubbo 3's config center on
 * ZooKeeper: the root, "config", the group "dubbo", the rule key). */
static char *
rule_path(const resil_allocator *a, const char *root, const char *key)
{
	size_t n;
	char *p;

	if (strcmp(root, "/") == 0)
		root = "";
	n = strlen(root) + strlen(key) + sizeof("/config/dubbo/.configurators");
	if ((p = resil__alloc(a, n)) != NULL)
		(void)snprintf(p, n, "%s/config/dubbo/%s.configurators", root,
		    key);
	return p;
}

/* Issue 40: the consumer's URL and node, the override rules' paths.
 * RESIL_E_NOMEM. */
static resil_err
consumer_strings(resil_registry_source *src)
{
	const resil_allocator *a = &src->a;
	const resil_source_config *c = &src->cfg;
	char key[512], *enc;

	resil__local_host(src->host, sizeof(src->host));
	src->who.a = a;
	src->who.service = c->service;
	src->who.group = c->group;
	src->who.version = c->version;
	src->who.host = src->host;
	src->who.application = c->application;
	src->who.emit = ov_emit;
	src->who.ctx = src;
	if (c->register_consumer) {
		char *dir = category_path(a, src->s_root, c->service, "");
		size_t n;

		src->consumer_url = resil__consumer_url(a, src->host,
		    c->service, c->application, c->group, c->version,
		    c->methods, c->check, (long)getpid(), wall_ms(src));
		enc = src->consumer_url != NULL
		    ? resil__url_encode(a, src->consumer_url)
		    : NULL;
		n = dir != NULL && enc != NULL
		    ? strlen(dir) + strlen(enc) + sizeof("consumers/")
		    : 0;
		if (n > 0 && (src->consumer_node = resil__alloc(a, n)) != NULL)
			(void)snprintf(src->consumer_node, n, "%sconsumers/%s",
			    dir, enc);
		resil__strfree(a, dir);
		resil__strfree(a, enc);
		if (src->consumer_node == NULL)
			return RESIL_E_NOMEM;
	}
	if (!c->overrides)
		return RESIL_OK;
	(void)snprintf(key, sizeof(key), "%s%s%s%s%s",
	    c->group != NULL ? c->group : "", c->group != NULL ? ":" : "",
	    c->service, c->version != NULL ? ":" : "",
	    c->version != NULL ? c->version : "");
	if ((src->path[RESIL__CAT_CONFIGURATORS] = category_path(
	         a, src->s_root, c->service, "configurators")) == NULL ||
	    (src->path[RESIL__CAT_SVC_RULES] =
	            rule_path(a, src->s_root, key)) == NULL)
		return RESIL_E_NOMEM;
	if (c->application != NULL &&
	    (src->path[RESIL__CAT_APP_RULES] =
	            rule_path(a, src->s_root, c->application)) == NULL)
		return RESIL_E_NOMEM;
	return RESIL_OK;
}

/* Copy the strings of cfg into src (cfg then points at the copies), the
 * service key and the paths. RESIL_E_NOMEM. */
static resil_err
copy_strings(resil_registry_source *src, const resil_source_config *cfg,
    const char *group)
{
	const resil_allocator *a = &src->a;

#define DUP(field, s)                                                         \
	do {                                                                  \
		if ((s) != NULL && ((field) = resil__strdup(a, (s))) == NULL) \
			return RESIL_E_NOMEM;                                 \
	} while (0)
	DUP(src->s_registry, cfg->registry);
	DUP(src->s_service, cfg->service);
	DUP(src->s_group, cfg->group);
	DUP(src->s_version, cfg->version);
	DUP(src->s_protocols, cfg->protocols);
	DUP(src->s_file, cfg->file);
	DUP(src->s_application, cfg->application);
	DUP(src->s_methods, cfg->methods);
#undef DUP
	if ((src->s_root = root_of(a, cfg->root, group)) == NULL)
		return RESIL_E_NOMEM;
	src->cfg.registry = src->s_registry;
	src->cfg.service = src->s_service;
	src->cfg.group = src->s_group;
	src->cfg.version = src->s_version;
	src->cfg.root = src->s_root;
	src->cfg.protocols = src->s_protocols;
	src->cfg.file = src->s_file;
	src->cfg.application = src->s_application;
	src->cfg.methods = src->s_methods;
	src->cfg.alloc = NULL;
	src->cfg.clock = NULL;
	src->cfg.wall_clock = NULL;
	src->match.service = src->s_service;
	src->match.group = src->s_group;
	src->match.version = src->s_version;
	src->match.protocols = src->s_protocols;
	if ((src->key = resil__service_key(
	         a, src->s_service, src->s_group, src->s_version)) == NULL)
		return RESIL_E_NOMEM;
	if ((src->path[RESIL__CAT_PROVIDERS] = category_path(
	         a, src->s_root, src->s_service, "providers")) == NULL ||
	    (src->path[RESIL__CAT_ROUTERS] = category_path(
	         a, src->s_root, src->s_service, "routers")) == NULL)
		return RESIL_E_NOMEM;
	return consumer_strings(src);
}

/* Open the backend and start the source's thread. On error nothing of
 * either is left. */
static resil_err
attach_backend(resil_registry_source *src, const resil_source_config *cfg,
    resil_diag *diag)
{
	resil__source_where w;
	resil_err err;

	w.hosts = src->hosts;
	memcpy(w.path, src->path, sizeof(w.path));
	w.consumer_node = src->consumer_node;
	w.session_timeout_ms = cfg->session_timeout_ms;
	w.alloc = &src->a;
	w.sink = &sink;
	w.service = src->s_service;
	w.group = src->s_group;
	w.version = src->s_version;
	w.selector = cfg->routes ? cfg->selector : NULL;
	/* The backend first: its deliveries wait in the pending slots for
	 * the thread, which then sees be_state set. */
	if ((err = src->be->open(src, &w, &src->be_state, diag)) != RESIL_OK)
		return err;
	if (pthread_create(&src->thread, NULL, thread_main, src) != 0) {
		src->be->close(src->be_state);
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "source: cannot start its thread");
	}
	src->has_thread = 1;
	sink_wake(src);
	return RESIL_OK;
}

static resil_err
create(resil_registry_source **out, const resil_source_config *cfg, int attach,
    resil_diag *diag)
{
	const resil_allocator *a;
	resil_registry_source *src;
	char *scheme = NULL, *group = NULL;
	pthread_condattr_t ca;
	resil_err err;

	if (out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "out: NULL");
	if ((err = resil_source_config_validate(cfg, diag)) != RESIL_OK)
		return err;
	a = resil__allocator(cfg->alloc);
	if ((src = resil__calloc(a, sizeof(*src))) == NULL)
		return RESIL_E_NOMEM;
	src->a = *a;
	a = &src->a;
	src->rule_alloc =
	    cfg->selector != NULL ? resil__selector_alloc(cfg->selector) : a;
	src->clk = cfg->clock != NULL ? *cfg->clock : *resil_clock_system();
	/* A Dubbo provider's timestamp is wall-clock time. */
	src->wall =
	    cfg->wall_clock != NULL ? *cfg->wall_clock : *resil__clock_wall();
	memcpy(&src->cfg, cfg, sizeof(*cfg));
	pthread_mutex_init(&src->mu, NULL);
	pthread_condattr_init(&ca);
	(void)resil__condattr_monotonic(&ca);
	pthread_cond_init(&src->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&src->work, NULL);
	pthread_mutex_init(&src->smu, NULL);
	pthread_condattr_init(&ca);
	(void)resil__condattr_monotonic(&ca);
	pthread_cond_init(&src->pcv, &ca);
	pthread_condattr_destroy(&ca);
	err = parse_registry(
	    a, cfg->registry, &scheme, &src->hosts, &group, diag);
	if (err != RESIL_OK) {
		release(src);
		return err;
	}
	src->be = attach ? find_backend(scheme) : NULL;
	resil__strfree(a, scheme);
	err = copy_strings(src, cfg, group);
	resil__strfree(a, group);
	if (err != RESIL_OK) {
		src->be = NULL;
		release(src);
		return err;
	}
	/* The cache first: a registry that is down leaves these. A writer
	 * killed before its rename left its temporary file (issue 38.9). */
	if (src->cfg.file != NULL) {
		(void)resil__cache_sweep(src->cfg.file);
		load_file(src);
	}
	if (attach && (err = attach_backend(src, cfg, diag)) != RESIL_OK) {
		src->be = NULL;
		release(src);
		return err;
	}
	/* Dubbo's check=true: the first providers, or the error. */
	if (attach && cfg->check &&
	    (err = resil_source_check(src, cfg->check_timeout_ns, diag)) !=
	        RESIL_OK) {
		resil_source_free(src);
		return err;
	}
	*out = src;
	return RESIL_OK;
}

resil_err
resil_source_check(
    resil_registry_source *src, uint64_t timeout_ns, resil_diag *diag)
{
	uint64_t ms = timeout_ns / RESIL_NS_PER_MS;
	struct timespec ts;
	int rc = 0;

	if (src == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "source: NULL");
	resil__cond_deadline(
	    &ts, ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms);
	pthread_mutex_lock(&src->smu);
	while (resil_directory_count(src->cfg.directory) == 0 && rc == 0)
		rc = pthread_cond_timedwait(&src->pcv, &src->smu, &ts);
	pthread_mutex_unlock(&src->smu);
	if (resil_directory_count(src->cfg.directory) > 0)
		return RESIL_OK;
	/* Dubbo's ReferenceConfig.checkInvokerAvailable. */
	return resil__diagf(diag, RESIL_E_NO_PROVIDER,
	    "Failed to check the status of the service %s. No provider "
	    "available for the service %s from the url %s to the consumer "
	    "%s use resil version %s",
	    src->cfg.service, src->key, src->cfg.registry, src->host,
	    RESIL_VERSION_STRING);
}

resil_err
resil__source_attach(resil_registry_source *src, resil_pipeline *p,
    const resil_config *base, const resil__ov_conf_ops *ops,
    resil_diag *diag)
{
	resil_err err;

	if (src == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "source: NULL");
	pthread_mutex_lock(&src->work);
	err = resil__ov_attach(&src->ov, &src->who, p, base, ops);
	if (err == RESIL_OK)
		resil__ov_apply(&src->ov, &src->who);
	pthread_mutex_unlock(&src->work);
	if (err != RESIL_OK)
		return resil__diagf(diag, err, "source: out of memory");
	return RESIL_OK;
}

resil_err
resil_source_new(resil_registry_source **out, const resil_source_config *cfg,
    resil_diag *diag)
{
	return create(out, cfg, 1, diag);
}

resil_err
resil__source_new_detached(resil_registry_source **out,
    const resil_source_config *cfg, resil_diag *diag)
{
	return create(out, cfg, 0, diag);
}

void
resil_source_free(resil_registry_source *src)
{
	if (src == NULL)
		return;
	/* The thread first (it runs the backend's tick), then the
	 * backend: after close() nothing is delivered. */
	if (src->has_thread) {
		pthread_mutex_lock(&src->mu);
		src->stop = 1;
		pthread_cond_signal(&src->cv);
		pthread_mutex_unlock(&src->mu);
		pthread_join(src->thread, NULL);
	}
	if (src->be != NULL)
		src->be->close(src->be_state);
	src->be = NULL;
	pthread_mutex_lock(&src->work);
	save_file(src);
	pthread_mutex_unlock(&src->work);
	release(src);
}

void
resil__source_apply(resil_registry_source *src, int cat,
    const char *const *names, size_t n, int decoded)
{
	list *l;

	if (cat < 0 || cat >= RESIL__NCAT)
		return;
	pthread_mutex_lock(&src->work);
	l = list_copy(&src->a, names, n, sys_now(), decoded);
	if (l == NULL)
		emit(src, RESIL_SOURCE_ERROR, "",
		    "out of memory copying the list", n);
	else
		apply(src, cat, l);
	pthread_mutex_unlock(&src->work);
}

int
resil__source_zk_session(resil_registry_source *src, int64_t *id, char *passwd)
{
	if (src == NULL || src->be != &resil__source_zookeeper ||
	    src->be->session == NULL)
		return -1;
	return src->be->session(src->be_state, id, passwd);
}

void
resil__source_flush(resil_registry_source *src)
{
	pthread_mutex_lock(&src->work);
	save_file(src);
	pthread_mutex_unlock(&src->work);
}


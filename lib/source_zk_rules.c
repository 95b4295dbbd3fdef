/*
 * Dubbo 3's routing rules in ZooKeeper's config center, watched:
 *
 *   /dubbo/config/dubbo/[GROUP:]SERVICE[:VERSION].condition-router
 *   /dubbo/config/dubbo/APP.tag-router
 *
 * where APP is the providers' application (the `application` of the
 * first provider URL that has one, as Dubbo's TagStateRouter takes the
 * remote application). Each node's data is YAML (lib/router_yaml.c); it
 * is read with a data watch, applied to the selector on every change
 * (the condition rules into the config center's slot, so the file's own
 * rules and the registry's condition:// rules stay; the tag rule as the
 * selector's tag rule), and removed when the node is deleted. A rule that
 * does not parse is refused and the rule in force stays (as Dubbo keeps
 * its last good rule). Every rule applied, removed or refused is an event
 * (ROUTES, BAD_ROUTE) through the backend's sink.
 *
 * Everything here runs on the ZooKeeper client's completion thread (the
 * watchers and completions, and the backend's calls), so the state needs
 * no lock but the count of requests in flight, kept under the backend's
 * mutex: the backend closes a session only when no request of its own or
 * of the rules is in flight (bounded), as the client leaks the watch
 * registration of a request a close cuts short (seen under ASan: a
 * rules node's zoo_awexists outstanding at the close). The selector takes
 * rule replacements from any thread.
 */
#define _POSIX_C_SOURCE 200809L

#include "source_zk_rules.h"

#include "router_internal.h"

#include <stdio.h>

#define NODE_COND 0
#define NODE_TAG 1

#define CENTER "/dubbo/config/dubbo/"

typedef struct rnode {
	resil__zk_rules *r;
	int which;
	char *path; /* NULL: not known yet (the tag rule's app) */
	char *last; /* the data applied last; NULL: none in force */
} rnode;

struct resil__zk_rules {
	resil_allocator a;
	resil_registry_source *src;
	const resil__source_sink *sink;
	resil_selector *sel;
	char *app;
	zhandle_t *zh; /* the session now; the completion thread's */
	rnode node[2];
	/* Requests sent and not completed, under *mu (the backend's; NULL:
	 * not counted), *idle broadcast at 0 (resil__zk_rules_track). */
	pthread_mutex_t *mu;
	pthread_cond_t *idle;
	int inflight;
};

static void rules_watcher(
    zhandle_t *zh, int type, int state, const char *path, void *ctx);
static void data_done(int rc, const char *value, int len,
    const struct Stat *stat, const void *data);

static void
say(resil__zk_rules *r, resil_source_event_type type, const char *msg)
{
	r->sink->notify(r->src, type, msg);
}

static char *
join(const resil_allocator *a, const char *x, const char *y, const char *z)
{
	size_t n = strlen(x) + strlen(y) + strlen(z) + 1;
	char *s = resil__alloc(a, n);

	if (s != NULL)
		(void)snprintf(s, n, "%s%s%s", x, y, z);
	return s;
}

/* [GROUP:]SERVICE[:VERSION], as the console keys a service's rules. */
static char *
cond_path(const resil_allocator *a, const resil__source_where *w)
{
	int g = w->group != NULL && w->group[0] != '\0' &&
	    strcmp(w->group, "*") != 0;
	int v = w->version != NULL && w->version[0] != '\0' &&
	    strcmp(w->version, "*") != 0;
	size_t n = strlen(CENTER) + strlen(w->service) +
	    (g ? strlen(w->group) + 1 : 0) + (v ? strlen(w->version) + 1 : 0) +
	    sizeof(".condition-router");
	char *s = resil__alloc(a, n);

	if (s != NULL)
		(void)snprintf(s, n, "%s%s%s%s%s%s.condition-router", CENTER,
		    g ? w->group : "", g ? ":" : "", w->service, v ? ":" : "",
		    v ? w->version : "");
	return s;
}

resil_err
resil__zk_rules_new(resil__zk_rules **out, const resil__source_where *w,
    resil_registry_source *src)
{
	resil__zk_rules *r;
	int i;

	*out = NULL;
	if (w->selector == NULL || w->service == NULL)
		return RESIL_OK;
	if ((r = resil__calloc(w->alloc, sizeof(*r))) == NULL)
		return RESIL_E_NOMEM;
	r->a = *w->alloc;
	r->src = src;
	r->sink = w->sink;
	r->sel = w->selector;
	for (i = 0; i < 2; i++) {
		r->node[i].r = r;
		r->node[i].which = i;
	}
	if ((r->node[NODE_COND].path = cond_path(&r->a, w)) == NULL) {
		resil__zk_rules_free(r);
		return RESIL_E_NOMEM;
	}
	*out = r;
	return RESIL_OK;
}

void
resil__zk_rules_free(resil__zk_rules *r)
{
	int i;

	if (r == NULL)
		return;
	for (i = 0; i < 2; i++) {
		resil__strfree(&r->a, r->node[i].path);
		resil__strfree(&r->a, r->node[i].last);
	}
	resil__strfree(&r->a, r->app);
	resil__free(&r->a, r, sizeof(*r));
}

void
resil__zk_rules_track(
    resil__zk_rules *r, pthread_mutex_t *mu, pthread_cond_t *idle)
{
	if (r == NULL)
		return;
	r->mu = mu;
	r->idle = idle;
}

int
resil__zk_rules_inflight(const resil__zk_rules *r)
{
	return r != NULL ? r->inflight : 0;
}

/* A request is to be sent. */
static void
rq_begin(resil__zk_rules *r)
{
	if (r->mu == NULL)
		return;
	pthread_mutex_lock(r->mu);
	r->inflight++;
	pthread_mutex_unlock(r->mu);
}

/* A request completed (rc -1), or was sent (rc ZOK: nothing to do) or
 * not (another rc). */
static void
rq_end(resil__zk_rules *r, int rc)
{
	if (rc == ZOK || r->mu == NULL)
		return;
	pthread_mutex_lock(r->mu);
	if (--r->inflight == 0)
		pthread_cond_broadcast(r->idle);
	pthread_mutex_unlock(r->mu);
}

static void
read_node(zhandle_t *zh, rnode *nd)
{
	/* Not connected: the next CONNECTED reads it again. */
	if (zh != NULL && nd->path != NULL) {
		rq_begin(nd->r);
		rq_end(nd->r,
		    zoo_awget(zh, nd->path, rules_watcher, nd, data_done, nd));
	}
}

static void
exists_done(int rc, const struct Stat *stat, const void *data)
{
	rnode *nd = (rnode *)(uintptr_t)data;

	(void)stat;
	if (rc == ZOK) /* created between the read and the watch */
		read_node(nd->r->zh, nd);
	rq_end(nd->r, -1);
}

static void
rules_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	rnode *nd = ctx;

	(void)state;
	(void)path;
	if (type == ZOO_SESSION_EVENT)
		return; /* the backend's session watcher reads again */
	read_node(zh, nd);
}

/* Give the selector the rules of nd: text NULL removes them. 0 when
 * applied, -1 when refused (an event says why in both cases). */
static int
apply(rnode *nd, const char *text)
{
	resil__zk_rules *r = nd->r;
	const resil_allocator *ra = resil__selector_alloc(r->sel);
	resil_rule_info info;
	resil_condition **rules = NULL;
	resil_tag_rule *tag = NULL;
	size_t n = 0;
	resil_diag why;
	resil_err err = RESIL_OK;
	char msg[400];

	why.msg[0] = '\0';
	memset(&info, 0, sizeof(info));
	info.enabled = 1;
	if (text != NULL && nd->which == NODE_COND)
		err = resil_condition_parse_yaml(
		    &rules, &n, text, nd->path, ra, &info, &why);
	else if (text != NULL)
		err = resil_tag_rule_parse_yaml(
		    &tag, text, nd->path, ra, &info, &why);
	if (err != RESIL_OK) {
		(void)snprintf(
		    msg, sizeof(msg), "%s; the rule in force stays", why.msg);
		say(r, RESIL_SOURCE_BAD_ROUTE, msg);
		return -1;
	}
	if (tag != NULL && !tag->enabled) {
		resil_tag_rule_free(tag);
		tag = NULL;
	}
	if (nd->which == NODE_COND) {
		err = resil__selector_set_rules(
		    r->sel, RESIL__RULES_CENTER, rules, n, &why);
		if (err != RESIL_OK) /* the rules were not taken */
			resil_conditions_free(rules, n, ra);
		else if (rules != NULL) /* the selector copied the array */
			resil__free(ra, rules, n * sizeof(resil_condition *));
	} else {
		err = resil_selector_set_tag_rule(r->sel, tag, &why);
		if (err != RESIL_OK)
			resil_tag_rule_free(tag);
	}
	if (err != RESIL_OK) {
		(void)snprintf(msg, sizeof(msg), "%s: %s", nd->path, why.msg);
		say(r, RESIL_SOURCE_ERROR, msg);
		return -1;
	}
	if (text == NULL)
		(void)snprintf(msg, sizeof(msg), "%s removed: its %s gone",
		    nd->path,
		    nd->which == NODE_COND ? "condition rules are"
		                           : "tag rule is");
	else if (!info.enabled)
		(void)snprintf(msg, sizeof(msg),
		    "%s is disabled (enabled: false): no %s applied", nd->path,
		    nd->which == NODE_COND ? "condition rule" : "tag rule");
	else if (nd->which == NODE_COND)
		(void)snprintf(msg, sizeof(msg),
		    "%s applied: %zu condition rules%s", nd->path, n,
		    info.force ? " (force)" : "");
	else
		(void)snprintf(msg, sizeof(msg), "%s applied: %zu tags%s",
		    nd->path, resil_tag_rule_count(tag),
		    info.force ? " (force)" : "");
	say(r, RESIL_SOURCE_ROUTES, msg);
	return 0;
}

/* The node's data now (NULL: no node): applied when it changed. */
static void
arrived(rnode *nd, const char *value, int len)
{
	resil__zk_rules *r = nd->r;
	char *text = NULL;

	if (value != NULL || len >= 0) {
		size_t n = len > 0 ? (size_t)len : 0;

		if ((text = resil__alloc(&r->a, n + 1)) == NULL) {
			say(r, RESIL_SOURCE_ERROR,
			    "out of memory reading a routing rule; the rule "
			    "in force stays");
			return;
		}
		if (n > 0 && value != NULL)
			memcpy(text, value, n);
		else
			n = 0;
		text[n] = '\0';
		if (strlen(text) != n) {
			char msg[400];

			(void)snprintf(msg, sizeof(msg),
			    "rule \"%s\": a NUL byte in the node's data; the "
			    "rule in force stays",
			    nd->path);
			say(r, RESIL_SOURCE_BAD_ROUTE, msg);
			resil__strfree(&r->a, text);
			return;
		}
	}
	/* A read again after a reconnection: nothing changed. */
	if ((text == NULL && nd->last == NULL) ||
	    (text != NULL && nd->last != NULL &&
	        strcmp(text, nd->last) == 0)) {
		resil__strfree(&r->a, text);
		return;
	}
	if (apply(nd, text) != 0) {
		resil__strfree(&r->a, text);
		return;
	}
	resil__strfree(&r->a, nd->last);
	nd->last = text;
}

static void
data_result(rnode *nd, int rc, const char *value, int len)
{
	resil__zk_rules *r = nd->r;
	char msg[400];

	if (rc == ZOK) {
		arrived(nd, value, len);
		return;
	}
	if (rc == ZNONODE) {
		arrived(nd, NULL, -1);
		rq_begin(r);
		rq_end(r,
		    zoo_awexists(
		        r->zh, nd->path, rules_watcher, nd, exists_done, nd));
		return;
	}
	if (rc == ZCLOSING || rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED ||
	    rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED)
		return; /* the next session state reads it again */
	(void)snprintf(
	    msg, sizeof(msg), "reading %s: %s", nd->path, zerror(rc));
	say(r, RESIL_SOURCE_ERROR, msg);
}

static void
data_done(int rc, const char *value, int len, const struct Stat *stat,
    const void *data)
{
	rnode *nd = (rnode *)(uintptr_t)data;

	(void)stat;
	data_result(nd, rc, value, len);
	rq_end(nd->r, -1);
}

void
resil__zk_rules_connected(resil__zk_rules *r, zhandle_t *zh)
{
	int i;

	if (r == NULL)
		return;
	r->zh = zh;
	for (i = 0; i < 2; i++)
		read_node(zh, &r->node[i]);
}

/* The application of the first provider URL that names one; NULL. */
static char *
app_of(const resil_allocator *a, const char *const *names, size_t n)
{
	char *dec, *app = NULL;
	resil__url u;
	resil_diag why;
	size_t i, col;

	for (i = 0; i < n && app == NULL; i++) {
		const char *v;

		if (resil__url_decode(a, names[i], &dec, &col) != RESIL_OK)
			continue;
		if (resil__url_parse(a, dec, &u, &why) == RESIL_OK) {
			v = resil__url_get(&u, "application");
			if (v != NULL && v[0] != '\0' &&
			    strchr(v, '/') == NULL)
				app = resil__strdup(a, v);
			resil__url_free(a, &u);
		}
		resil__strfree(a, dec);
	}
	return app;
}

void
resil__zk_rules_providers(
    resil__zk_rules *r, zhandle_t *zh, const char *const *names, size_t n)
{
	rnode *nd;
	char *app;

	if (r == NULL)
		return;
	if ((app = app_of(&r->a, names, n)) == NULL)
		return; /* no provider names its application: keep */
	if (r->app != NULL && strcmp(app, r->app) == 0) {
		resil__strfree(&r->a, app);
		return;
	}
	nd = &r->node[NODE_TAG];
	/* Another application: its rule, not the last one's. */
	if (nd->last != NULL && apply(nd, NULL) == 0) {
		resil__strfree(&r->a, nd->last);
		nd->last = NULL;
	}
	resil__strfree(&r->a, r->app);
	resil__strfree(&r->a, nd->path);
	r->app = app;
	nd->path = join(&r->a, CENTER, app, ".tag-router");
	if (nd->path == NULL) {
		say(r, RESIL_SOURCE_ERROR,
		    "out of memory watching the tag rule");
		return;
	}
	r->zh = zh;
	read_node(zh, nd);
}

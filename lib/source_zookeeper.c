/*
 * The ZooKeeper backend of the registry source, on Debian's C client
 * (libzookeeper_mt): the client's I/O thread keeps the session, its
 * completion thread runs the watchers and completions below, which only
 * copy what they receive into the source (the sink's deliver) and set the
 * next watch. The source's own thread replaces an expired session
 * (zookeeper_close must not run on the completion thread).
 *
 * Dubbo's ZookeeperRegistry reads each category with a child watch; on
 * reconnection (RECONNECTED) and on a new session (NEW_SESSION_CREATED)
 * it reads them again. So does this: every CONNECTED state reads both
 * lists, which also sets their watches again. A category whose node does
 * not exist is an empty list, with an exists watch for its creation
 * (Dubbo creates the node; a consumer here writes nothing).
 */
#define _POSIX_C_SOURCE 200809L

#include "source_internal.h"
#include "source_zk_rules.h"

#include <pthread.h>
#include <stdio.h>

#include <zookeeper/zookeeper.h>

#define KIND_SESSION 1
#define KIND_WATCH 2

typedef struct zk_backend zk_backend;
typedef struct zk_session zk_session;

/* A category's watch; the context of its watcher and completions. The
 * fields past s are the completion thread's alone. */
typedef struct zk_watch {
	int kind;
	zk_session *s;
	int cat;
	uint64_t fired;
} zk_watch;

struct zk_session {
	int kind;
	zk_backend *b;
	zhandle_t *zh; /* the source's thread's */
	zk_watch w[RESIL__NCAT];
	/* The completion thread's alone. */
	zhandle_t *zh_cb;
	int connected, was_connected;
};

struct zk_backend {
	resil_registry_source *src;
	const resil__source_sink *sink;
	resil_allocator a;
	char *hosts;
	char *path[RESIL__NCAT];
	int timeout_ms;
	pthread_mutex_t mu;
	zk_session *cur;
	int need_new;
	uint64_t new_at;
	resil__zk_rules *rules; /* issue 40.4: the config center's rules */
};

static uint64_t
now_ns(void)
{
	return resil_clock_now(resil_clock_system());
}

/* The client logs through the handle's callback, at the process-wide
 * level (zoo_set_debug_level is the application's). Its lines are for
 * the client's authors; what matters reaches the listener as events. */
static void
zk_log(const char *message)
{
	(void)message;
}

static void watcher(
    zhandle_t *zh, int type, int state, const char *path, void *ctx);

static void children_done(int rc, const struct String_vector *strings,
    const struct Stat *stat, const void *data);

static void
fetch(zhandle_t *zh, zk_watch *w)
{
	/* A failure here (not connected) is no loss: the next CONNECTED
	 * reads the list again. */
	(void)zoo_awget_children2(
	    zh, w->s->b->path[w->cat], watcher, w, children_done, w);
}

static void
exists_done(int rc, const struct Stat *stat, const void *data)
{
	zk_watch *w = (zk_watch *)(uintptr_t)data;

	(void)stat;
	/* Created between the read and the watch: read it now. */
	if (rc == ZOK)
		fetch(w->s->zh_cb, w);
}

static void
children_done(int rc, const struct String_vector *strings,
    const struct Stat *stat, const void *data)
{
	zk_watch *w = (zk_watch *)(uintptr_t)data;
	zk_backend *b = w->s->b;
	char msg[160];

	(void)stat;
	if (rc == ZOK) {
		if (w->cat == RESIL__CAT_PROVIDERS)
			resil__zk_rules_providers(b->rules, w->s->zh_cb,
			    (const char *const *)strings->data,
			    strings->count > 0 ? (size_t)strings->count : 0);
		b->sink->deliver(b->src, w->cat,
		    (const char *const *)strings->data,
		    strings->count > 0 ? (size_t)strings->count : 0, w->fired);
		return;
	}
	if (rc == ZNONODE) {
		/* No node: no entry. Watch for the node to appear. */
		b->sink->deliver(b->src, w->cat, NULL, 0, w->fired);
		(void)zoo_awexists(
		    w->s->zh_cb, b->path[w->cat], watcher, w, exists_done, w);
		return;
	}
	if (rc == ZCLOSING || rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED ||
	    rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED)
		return; /* the next session state reads it again */
	(void)snprintf(
	    msg, sizeof(msg), "reading %s: %s", b->path[w->cat], zerror(rc));
	b->sink->notify(b->src, RESIL_SOURCE_ERROR, msg);
}

static void
watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	zk_session *s;
	zk_backend *b;
	char msg[200];
	int c;

	(void)path;
	if (*(int *)ctx == KIND_WATCH) {
		zk_watch *w = ctx;

		/* Session states reach the session's watcher. */
		if (type == ZOO_SESSION_EVENT)
			return;
		/* Children changed, or the node came or went: read again
		 * (which sets the next watch). */
		w->fired = now_ns();
		fetch(zh, w);
		return;
	}
	s = ctx;
	b = s->b;
	s->zh_cb = zh;
	if (type != ZOO_SESSION_EVENT)
		return;
	if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) {
		const clientid_t *id = zoo_client_id(zh);

		(void)snprintf(msg, sizeof(msg), "%s %s (session 0x%llx)%s",
		    s->was_connected ? "reconnected to" : "connected to",
		    b->hosts,
		    (unsigned long long)(id != NULL ? id->client_id : 0),
		    state == ZOO_READONLY_STATE ? ", read-only" : "");
		s->connected = 1;
		s->was_connected = 1;
		b->sink->notify(b->src, RESIL_SOURCE_CONNECTED, msg);
		resil__zk_rules_connected(b->rules, zh);
		for (c = 0; c < RESIL__NCAT; c++) {
			s->w[c].fired = now_ns();
			fetch(zh, &s->w[c]);
		}
	} else if (state == ZOO_CONNECTING_STATE ||
	    state == ZOO_ASSOCIATING_STATE) {
		if (s->connected) {
			(void)snprintf(msg, sizeof(msg),
			    "lost the connection to %s; the session may "
			    "live on, the providers are kept",
			    b->hosts);
			b->sink->notify(
			    b->src, RESIL_SOURCE_DISCONNECTED, msg);
		}
		s->connected = 0;
	} else if (state == ZOO_EXPIRED_SESSION_STATE) {
		s->connected = 0;
		(void)snprintf(msg, sizeof(msg),
		    "the session with %s expired; a new one is being made",
		    b->hosts);
		b->sink->notify(b->src, RESIL_SOURCE_EXPIRED, msg);
		pthread_mutex_lock(&b->mu);
		if (b->cur == s) {
			b->need_new = 1;
			b->new_at = 0;
		}
		pthread_mutex_unlock(&b->mu);
		b->sink->wake(b->src);
	} else if (state == ZOO_AUTH_FAILED_STATE) {
		(void)snprintf(msg, sizeof(msg),
		    "authentication with %s failed", b->hosts);
		b->sink->notify(b->src, RESIL_SOURCE_ERROR, msg);
	}
}

static zk_session *
session_new(zk_backend *b, resil_diag *diag)
{
	zk_session *s = resil__calloc(&b->a, sizeof(*s));
	int c;

	if (s == NULL) {
		resil__diagf(diag, RESIL_E_NOMEM, "out of memory");
		return NULL;
	}
	s->kind = KIND_SESSION;
	s->b = b;
	for (c = 0; c < RESIL__NCAT; c++) {
		s->w[c].kind = KIND_WATCH;
		s->w[c].s = s;
		s->w[c].cat = c;
	}
	s->zh = zookeeper_init2(
	    b->hosts, watcher, b->timeout_ms, NULL, s, 0, zk_log);
	if (s->zh == NULL) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "registry: the ZooKeeper client refuses \"%s\"", b->hosts);
		resil__free(&b->a, s, sizeof(*s));
		return NULL;
	}
	return s;
}

static void
session_free(zk_backend *b, zk_session *s)
{
	if (s == NULL)
		return;
	/* Joins the client's threads: no callback runs after this. */
	(void)zookeeper_close(s->zh);
	resil__free(&b->a, s, sizeof(*s));
}

static void
backend_free(zk_backend *b)
{
	int c;

	resil__zk_rules_free(b->rules);
	resil__strfree(&b->a, b->hosts);
	for (c = 0; c < RESIL__NCAT; c++)
		resil__strfree(&b->a, b->path[c]);
	pthread_mutex_destroy(&b->mu);
	resil__free(&b->a, b, sizeof(*b));
}

static resil_err
zk_open(resil_registry_source *src, const resil__source_where *w, void **state,
    resil_diag *diag)
{
	zk_backend *b = resil__calloc(w->alloc, sizeof(*b));
	int c;

	if (b == NULL)
		return RESIL_E_NOMEM;
	b->a = *w->alloc;
	b->src = src;
	b->sink = w->sink;
	b->timeout_ms = (int)w->session_timeout_ms;
	pthread_mutex_init(&b->mu, NULL);
	b->hosts = resil__strdup(&b->a, w->hosts);
	for (c = 0; c < RESIL__NCAT; c++)
		b->path[c] = resil__strdup(&b->a, w->path[c]);
	if (b->hosts == NULL || b->path[0] == NULL || b->path[1] == NULL ||
	    resil__zk_rules_new(&b->rules, w, src) != RESIL_OK) {
		backend_free(b);
		return RESIL_E_NOMEM;
	}
	if ((b->cur = session_new(b, diag)) == NULL) {
		backend_free(b);
		return diag != NULL && strstr(diag->msg, "memory") != NULL
		    ? RESIL_E_NOMEM
		    : RESIL_E_INVAL;
	}
	b->sink->session_made(src);
	*state = b;
	return RESIL_OK;
}

static uint64_t
zk_tick(void *state)
{
	zk_backend *b = state;
	zk_session *old, *s;
	uint64_t now = now_ns();
	resil_diag diag;

	pthread_mutex_lock(&b->mu);
	if (!b->need_new) {
		pthread_mutex_unlock(&b->mu);
		return 0;
	}
	if (now < b->new_at) {
		uint64_t wait = b->new_at - now;

		pthread_mutex_unlock(&b->mu);
		return wait;
	}
	old = b->cur;
	b->cur = NULL;
	b->need_new = 0;
	pthread_mutex_unlock(&b->mu);
	session_free(b, old);
	diag.msg[0] = '\0';
	s = session_new(b, &diag);
	pthread_mutex_lock(&b->mu);
	b->cur = s;
	if (s == NULL) {
		/* Try again in a second. */
		b->need_new = 1;
		b->new_at = now_ns() + RESIL_NS_PER_SEC;
	}
	pthread_mutex_unlock(&b->mu);
	if (s == NULL) {
		b->sink->notify(b->src, RESIL_SOURCE_ERROR, diag.msg);
		return RESIL_NS_PER_SEC;
	}
	b->sink->session_made(b->src);
	return 0;
}

static void
zk_close(void *state)
{
	zk_backend *b = state;
	zk_session *s;

	if (b == NULL)
		return;
	pthread_mutex_lock(&b->mu);
	s = b->cur;
	b->cur = NULL;
	pthread_mutex_unlock(&b->mu);
	session_free(b, s);
	backend_free(b);
}

static int
zk_session_id(void *state, int64_t *id, char *passwd)
{
	zk_backend *b = state;
	const clientid_t *cid;
	int r = -1;

	pthread_mutex_lock(&b->mu);
	if (b->cur != NULL && zoo_state(b->cur->zh) == ZOO_CONNECTED_STATE &&
	    (cid = zoo_client_id(b->cur->zh)) != NULL) {
		*id = cid->client_id;
		memcpy(passwd, cid->passwd, sizeof(cid->passwd));
		r = 0;
	}
	pthread_mutex_unlock(&b->mu);
	return r;
}

const resil__source_backend resil__source_zookeeper = {
	"zookeeper",
	zk_open,
	zk_tick,
	zk_close,
	zk_session_id,
};

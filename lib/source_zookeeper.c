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
 * (Dubbo creates the node). The categories past RESIL__NCHILD are one
 * node's data (the 3.x rules of the config center), read with a data
 * watch. Issue 40: at every CONNECTED the consumer's node is created
 * (ephemeral, its parents persistent, as Dubbo's ZookeeperRegistry
 * registers it; "exists" is fine: the same session reconnected).
 */
#define _POSIX_C_SOURCE 200809L

#include "source_internal.h"
#include "source_zk_rules.h"

#include "clock_internal.h"

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
	/* Requests sent and not completed, and no new ones once closing
	 * (under b->mu): the session is closed when none is in flight, as
	 * the client leaks a request's watch registration that a close
	 * cuts short. */
	int inflight, closing;
};

struct zk_backend {
	resil_registry_source *src;
	const resil__source_sink *sink;
	resil_allocator a;
	char *hosts;
	char *path[RESIL__NCAT];
	char *consumer; /* the consumer's node, or NULL */
	int timeout_ms;
	pthread_mutex_t mu;
	pthread_cond_t idle; /* with mu: a session's inflight reached 0 */
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

static void data_done(int rc, const char *value, int len,
    const struct Stat *stat, const void *data);

/* A request is to be sent: 1, or 0 when the session is closing. */
static int
begin(zk_session *s)
{
	int ok;

	pthread_mutex_lock(&s->b->mu);
	ok = !s->closing;
	s->inflight += ok;
	pthread_mutex_unlock(&s->b->mu);
	return ok;
}

/* A request completed (or was not sent: rc is not ZOK). */
static void
end(zk_session *s, int rc)
{
	if (rc == ZOK)
		return;
	pthread_mutex_lock(&s->b->mu);
	if (--s->inflight == 0)
		pthread_cond_broadcast(&s->b->idle);
	pthread_mutex_unlock(&s->b->mu);
}

#define DONE(s) end((s), -1)

static void
fetch(zhandle_t *zh, zk_watch *w)
{
	/* A failure here (not connected) is no loss: the next CONNECTED
	 * reads the list again. */
	if (w->s->b->path[w->cat] == NULL || !begin(w->s))
		return;
	if (w->cat >= RESIL__NCHILD)
		end(w->s, zoo_awget(zh, w->s->b->path[w->cat], watcher, w,
		              data_done, w));
	else
		end(w->s, zoo_awget_children2(zh, w->s->b->path[w->cat],
		              watcher, w, children_done, w));
}

static void
exists_done(int rc, const struct Stat *stat, const void *data)
{
	zk_watch *w = (zk_watch *)(uintptr_t)data;

	(void)stat;
	/* Created between the read and the watch: read it now. */
	if (rc == ZOK)
		fetch(w->s->zh_cb, w);
	DONE(w->s);
}

static void children_result(int rc, const struct String_vector *strings,
    const struct Stat *stat, const void *data);

static void
children_done(int rc, const struct String_vector *strings,
    const struct Stat *stat, const void *data)
{
	zk_watch *w = (zk_watch *)(uintptr_t)data;

	children_result(rc, strings, stat, data);
	DONE(w->s);
}

static void
children_result(int rc, const struct String_vector *strings,
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
		if (begin(w->s))
			end(w->s, zoo_awexists(w->s->zh_cb, b->path[w->cat],
			              watcher, w, exists_done, w));
		return;
	}
	if (rc == ZCLOSING || rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED ||
	    rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED)
		return; /* the next session state reads it again */
	(void)snprintf(
	    msg, sizeof(msg), "reading %s: %s", b->path[w->cat], zerror(rc));
	b->sink->notify(b->src, RESIL_SOURCE_ERROR, msg);
}

/* A rule node's data: a list of one string (none: no node). */
static void
data_done(int rc, const char *value, int len, const struct Stat *stat,
    const void *data)
{
	zk_watch *w = (zk_watch *)(uintptr_t)data;
	zk_backend *b = w->s->b;
	char *text;

	(void)stat;
	if (rc == ZOK) {
		size_t n = len > 0 ? (size_t)len : 0;

		if ((text = resil__alloc(&b->a, n + 1)) == NULL) {
			b->sink->notify(b->src, RESIL_SOURCE_ERROR,
			    "out of memory reading a rule node");
		} else {
			if (n > 0)
				memcpy(text, value, n);
			text[n] = '\0';
			b->sink->deliver(b->src, w->cat,
			    (const char *const *)&text, 1, w->fired);
			resil__free(&b->a, text, n + 1);
		}
	} else {
		/* No node, or a failure the next session state reads
		 * again. */
		children_result(rc, NULL, stat, data);
	}
	DONE(w->s);
}

static void
created(int rc, const char *value, const void *data)
{
	zk_session *s = (zk_session *)(uintptr_t)data;
	zk_backend *b = s->b;
	char msg[200];

	(void)value;
	DONE(s);
	if (rc == ZOK || rc == ZNODEEXISTS) {
		b->sink->notify(b->src, RESIL_SOURCE_REGISTERED,
		    "the consumer's node is written (ephemeral, under the "
		    "service's consumers)");
		return;
	}
	if (rc == ZCLOSING || rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED ||
	    rc == ZOPERATIONTIMEOUT || rc == ZSESSIONMOVED)
		return; /* the next CONNECTED registers again */
	(void)snprintf(msg, sizeof(msg), "registering the consumer: %s",
	    zerror(rc));
	b->sink->notify(b->src, RESIL_SOURCE_ERROR, msg);
}

static void
parent_done(int rc, const char *value, const void *data)
{
	(void)rc;
	(void)value;
	DONE((zk_session *)(uintptr_t)data);
}

/* The consumer's node and its parents, in order (a session's requests
 * are served in order: each parent exists when the next is made). */
static void
register_consumer(zhandle_t *zh, zk_session *s)
{
	zk_backend *b = s->b;
	char path[1024];
	size_t i, n;

	if (b->consumer == NULL)
		return;
	n = strlen(b->consumer);
	for (i = 1; i < n && i < sizeof(path); i++) {
		if (b->consumer[i] != '/')
			continue;
		memcpy(path, b->consumer, i);
		path[i] = '\0';
		if (begin(s))
			end(s, zoo_acreate(zh, path, NULL, -1,
			           &ZOO_OPEN_ACL_UNSAFE, 0, parent_done, s));
	}
	if (begin(s))
		end(s, zoo_acreate(zh, b->consumer, NULL, -1,
		           &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, created, s));
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
		register_consumer(zh, s);
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
	struct timespec ts;
	int rc = 0;

	if (s == NULL)
		return;
	/* No new request, and the ones in flight answered (bounded: a
	 * server that went away answers none; the client then fails them
	 * at its timeout, and the close frees what it can). */
	resil__cond_deadline(&ts, 2000);
	pthread_mutex_lock(&b->mu);
	s->closing = 1;
	while ((s->inflight > 0 || resil__zk_rules_inflight(b->rules) > 0) &&
	    rc == 0)
		rc = pthread_cond_timedwait(&b->idle, &b->mu, &ts);
	pthread_mutex_unlock(&b->mu);
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
	resil__strfree(&b->a, b->consumer);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->idle);
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
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		(void)resil__condattr_monotonic(&ca);
		pthread_cond_init(&b->idle, &ca);
		pthread_condattr_destroy(&ca);
	}
	b->hosts = resil__strdup(&b->a, w->hosts);
	for (c = 0; c < RESIL__NCAT; c++)
		if (w->path[c] != NULL &&
		    (b->path[c] = resil__strdup(&b->a, w->path[c])) == NULL)
			b->hosts = (resil__strfree(&b->a, b->hosts), NULL);
	if (w->consumer_node != NULL &&
	    (b->consumer = resil__strdup(&b->a, w->consumer_node)) == NULL)
		b->hosts = (resil__strfree(&b->a, b->hosts), NULL);
	if (b->hosts == NULL || b->path[0] == NULL || b->path[1] == NULL ||
	    resil__zk_rules_new(&b->rules, w, src) != RESIL_OK) {
		backend_free(b);
		return RESIL_E_NOMEM;
	}
	resil__zk_rules_track(b->rules, &b->mu, &b->idle);
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
	/* Closing the session unregisters the consumer: the server removes
	 * the session's ephemeral node with it (a delete sent just before
	 * the close would race it inside the client). */
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

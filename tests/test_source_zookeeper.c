/*
 * The registry source against a real ZooKeeper: the group setup starts
 * one server (Debian's zookeeper package, run from its jar) on 127.0.0.1
 * on a free port with a temporary data directory, and a second session
 * plays the Dubbo providers (ephemeral nodes under /dubbo/<service>/
 * providers). Each test has a service of its own. Faults: a provider's
 * session ends (an empty list: empty protection), the source's session is
 * expired (the classic trick: a second handle with its id and password,
 * closed), the server is killed and restarted, a consumer starts while
 * the registry is down (the cache file), the registry's condition rules,
 * and a flood (10^4 providers, 10^3 changes a second, bad nodes) while a
 * thread routes calls.
 *
 * Waits poll a condition with a bounded deadline; every assertion is on
 * counts and states, none on timing (the update latency is printed).
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resil/directory.h>
#include <resil/selector.h>
#include <resil/source.h>

#include "source_internal.h"
#include "support/zk_fx.h"

static unsigned seq;

/* A test's consumer. Two per test on the heap, made by fx_setup and
 * closed by fx_teardown, which cmocka runs after a failed test too: a
 * source left running by a failed test would otherwise go on calling its
 * listener with a fixture gone with the test's stack frame. */
typedef struct fx {
	char svc[64];
	resil_directory *dir;
	resil_selector *sel;
	resil_registry_source *src;
	zk_proxy *px;
	zk_heard h;
	char file[96];
} fx;

static void
fx_dir(fx *f)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();

	assert_int_equal(resil_directory_new(&f->dir, &dc, NULL), RESIL_OK);
	sc.service = f->svc;
	assert_int_equal(
	    resil_selector_new(&f->sel, f->dir, &sc, NULL), RESIL_OK);
}

static void
fx_source(fx *f, const char *hosts, const char *file)
{
	resil_source_config sc;
	char reg[96];
	resil_diag diag;

	zk_source_config(
	    &sc, reg, sizeof(reg), hosts, f->svc, f->dir, f->sel, &f->h);
	sc.file = file;
	sc.file_interval_ns = 0;
	assert_int_equal(resil_source_new(&f->src, &sc, &diag), RESIL_OK);
}

static void
fx_open(fx *f)
{
	snprintf(f->svc, sizeof(f->svc), "com.resil.T%uService", ++seq);
	fx_dir(f);
}

/* The source first: after resil_source_free no listener call runs. */
static void
fx_close(fx *f)
{
	resil_source_free(f->src);
	f->src = NULL;
	zk_proxy_stop(f->px);
	f->px = NULL;
	resil_selector_free(f->sel);
	f->sel = NULL;
	resil_directory_free(f->dir);
	f->dir = NULL;
}

static int
fx_setup(void **state)
{
	fx *f = calloc(2, sizeof(*f));

	if (f == NULL)
		return -1;
	zk_heard_init(&f[0].h);
	zk_heard_init(&f[1].h);
	*state = f;
	return 0;
}

static int
fx_teardown(void **state)
{
	fx *f = *state;

	fx_close(&f[0]);
	fx_close(&f[1]);
	zk_heard_destroy(&f[0].h);
	zk_heard_destroy(&f[1].h);
	free(f);
	return 0;
}

/* ---- waiting
 * ---------------------------------------------------------------- */

typedef struct want {
	fx *f;
	size_t count;
	uint64_t n;
} want;

static void
wait_count(fx *f, size_t n)
{
	zk_wait_count(f->dir, n, f->svc);
}

static resil_source_stats
stats(fx *f)
{
	resil_source_stats st;

	resil_source_get_stats(f->src, &st);
	return st;
}

/* The source counts a push after the directory took it: a test that
 * saw the directory change waits for the count too. */
static int
pushes_at_least(void *ctx)
{
	want *w = ctx;

	return stats(w->f).pushes >= w->n;
}

static int
lists_above(void *ctx)
{
	want *w = ctx;

	return stats(w->f).lists > w->n;
}

static int
connected_sessions(void *ctx)
{
	want *w = ctx;
	resil_source_stats st = stats(w->f);

	return st.connected && st.sessions >= w->n;
}

static int
connects_at_least(void *ctx)
{
	want *w = ctx;
	resil_source_stats st = stats(w->f);

	return st.connected && st.connects >= w->n;
}

static int
disconnected(void *ctx)
{
	want *w = ctx;

	return !stats(w->f).connected &&
	    zk_heard_n(&w->f->h, RESIL_SOURCE_DISCONNECTED) >= 1;
}

static int
empty_kept(void *ctx)
{
	want *w = ctx;

	return zk_heard_n(&w->f->h, RESIL_SOURCE_EMPTY_KEPT) >= w->n;
}

/* A push after n, with count endpoints. */
static int
pushed_to(void *ctx)
{
	want *w = ctx;

	return stats(w->f).pushes > w->n &&
	    resil_directory_count(w->f->dir) == w->count;
}

static void
reg(fx *f, const char *url)
{
	assert_int_equal(zk_register(zk_prov, f->svc, url), 0);
}

static void
unreg(fx *f, const char *url)
{
	assert_int_equal(zk_unregister(zk_prov, f->svc, url), 0);
}

static void
url(char *buf, size_t n, fx *f, int host, const char *extra)
{
	snprintf(buf, n,
	    "dubbo://10.1.0.%d:20880/%s?anyhost=true&"
	    "application=demo-provider&dubbo=2.0.2&interface=%s&"
	    "methods=sayHello&side=provider%s",
	    host, f->svc, f->svc, extra);
}

/* ---- providers
 * ---------------------------------------------------------------- */

static void
test_zk_providers_come_and_go(void **state)
{
	char u1[512], u2[512], u3[512];
	resil_endpoint_state es;
	resil_source_stats st;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	url(u1, sizeof(u1), f, 1, "&weight=200");
	url(u2, sizeof(u2), f, 2, "&dubbo.tag=gray");
	url(u3, sizeof(u3), f, 3, "&zone=hz");
	reg(f, u1);
	reg(f, u2);
	fx_source(f, zk_srv.hosts, NULL);
	wait_count(f, 2);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.1.0.1:20880", &es),
	    RESIL_OK);
	assert_int_equal(es.weight, 200);
	reg(f, u3);
	wait_count(f, 3);
	unreg(f, u1);
	wait_count(f, 2);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.1.0.1:20880", &es),
	    RESIL_E_NOTFOUND);
	{
		want w = { f, 0, 3 };

		assert_true(zk_wait(pushes_at_least, &w, ZK_WAIT_MS));
	}
	st = stats(f);
	assert_int_equal(st.connected, 1);
	assert_int_equal(st.sessions, 1);
	assert_true(st.pushes >= 3);
	assert_int_equal(st.providers, 2);
	assert_true(zk_heard_n(&f->h, RESIL_SOURCE_CONNECTED) >= 1);
	fx_close(f);
}

/* Issue 38.1: a provider node whose parameters the directory refuses
 * (an empty name) used to make every push fail while it existed: a
 * provider removed kept its calls, a new one got none. It costs that
 * node only. */
static void
test_zk_bad_parameter_node_costs_that_node_only(void **state)
{
	char u1[512], u2[512], bad[512];
	resil_endpoint_state es;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	url(u1, sizeof(u1), f, 1, "");
	url(u2, sizeof(u2), f, 2, "");
	url(bad, sizeof(bad), f, 9, "&=x");
	reg(f, u1);
	reg(f, bad);
	fx_source(f, zk_srv.hosts, NULL);
	wait_count(f, 1);
	reg(f, u2);
	wait_count(f, 2);
	unreg(f, u1);
	wait_count(f, 1);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.1.0.2:20880", &es),
	    RESIL_OK);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.1.0.9:20880", &es),
	    RESIL_E_NOTFOUND);
	assert_int_equal(zk_heard_n(&f->h, RESIL_SOURCE_BAD_PROVIDER), 1);
	assert_int_equal(zk_heard_n(&f->h, RESIL_SOURCE_ERROR), 0);
	fx_close(f);
}

static void
test_zk_service_not_registered_yet(void **state)
{
	char u1[512];
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	/* No /dubbo/<service> at all: an empty list, and a watch for the
	 * node to appear. */
	fx_source(f, zk_srv.hosts, NULL);
	{
		want w = { f, 0, 0 };

		assert_true(zk_wait(lists_above, &w, ZK_WAIT_MS));
	}
	assert_int_equal(resil_directory_count(f->dir), 0);
	url(u1, sizeof(u1), f, 1, "");
	reg(f, u1);
	wait_count(f, 1);
	fx_close(f);
}

static void
test_zk_provider_session_ends_empty_protection(void **state)
{
	char u1[512], u2[512], u3[512];
	zhandle_t *p2;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	/* Two providers of one process (one session). */
	p2 = zk_connect(&zk_srv);
	assert_non_null(p2);
	url(u1, sizeof(u1), f, 1, "");
	url(u2, sizeof(u2), f, 2, "");
	assert_int_equal(zk_register(p2, f->svc, u1), 0);
	assert_int_equal(zk_register(p2, f->svc, u2), 0);
	fx_source(f, zk_srv.hosts, NULL);
	wait_count(f, 2);
	/* The process dies: its session closes, its nodes go, the
	 * registry lists nobody. The last list stays. */
	zookeeper_close(p2);
	{
		want w = { f, 0, 1 };

		assert_true(zk_wait(empty_kept, &w, ZK_WAIT_MS));
	}
	assert_int_equal(resil_directory_count(f->dir), 2);
	assert_int_equal(stats(f).empty_kept, 1);
	/* A provider comes back: a partial list is applied. */
	url(u3, sizeof(u3), f, 3, "");
	reg(f, u3);
	wait_count(f, 1);
	fx_close(f);
}

static void
test_zk_session_expiry_resubscribes(void **state)
{
	char u1[512], u2[512], passwd[16];
	int64_t id;
	uint64_t lists;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	url(u1, sizeof(u1), f, 1, "");
	reg(f, u1);
	/* The source reaches the server through a proxy the test cuts. */
	f->px = zk_proxy_start(&zk_srv);
	assert_non_null(f->px);
	fx_source(f, zk_proxy_hosts(f->px), NULL);
	wait_count(f, 1);
	{
		want w = { f, 0, 1 };

		assert_true(zk_wait(connected_sessions, &w, ZK_WAIT_MS));
	}
	assert_int_equal(resil__source_zk_session(f->src, &id, passwd), 0);
	lists = stats(f).lists;
	/* The trick: the session's id and password on a second handle,
	 * which is then closed, ends the session. The source's client is
	 * cut off meanwhile: reconnecting, it would take the session back
	 * from the second handle, whose close would then fail. */
	zk_proxy_cut(f->px, 1);
	assert_int_equal(zk_expire(&zk_srv, id, passwd), 0);
	zk_proxy_cut(f->px, 0);
	{
		want w = { f, 0, 2 };

		assert_true(zk_wait(connected_sessions, &w, ZK_WAIT_MS));
		w.n = lists;
		/* The new session read the list again... */
		assert_true(zk_wait(lists_above, &w, ZK_WAIT_MS));
	}
	assert_true(stats(f).expirations >= 1);
	assert_true(zk_heard_n(&f->h, RESIL_SOURCE_EXPIRED) >= 1);
	assert_int_equal(resil_directory_count(f->dir), 1);
	/* ...and watches it: a change is seen. */
	url(u2, sizeof(u2), f, 2, "");
	reg(f, u2);
	wait_count(f, 2);
	fx_close(f);
}

/* ---- routes
 * ---------------------------------------------------------------------- */

static size_t
routed(fx *f)
{
	resil_candidates *c;
	resil_request req;
	size_t n = 0;

	memset(&req, 0, sizeof(req));
	assert_int_equal(resil_candidates_new(&c, f->sel), RESIL_OK);
	if (resil_selector_route(f->sel, &req, c, NULL) == RESIL_OK)
		n = resil_candidates_count(c);
	resil_candidates_free(c);
	return n;
}

typedef struct rules_want {
	fx *f;
	uint64_t lists;
	size_t rules;
} rules_want;

static int
rules_are(void *ctx)
{
	rules_want *w = ctx;
	resil_source_stats st = stats(w->f);

	return st.route_lists > w->lists && st.rules == w->rules;
}

static void
test_zk_routes_of_the_registry(void **state)
{
	char u1[512], u2[512], *node;
	rules_want w;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	url(u1, sizeof(u1), f, 1, "");
	url(u2, sizeof(u2), f, 2, "");
	reg(f, u1);
	reg(f, u2);
	fx_source(f, zk_srv.hosts, NULL);
	wait_count(f, 2);
	assert_int_equal(routed(f), 2);
	/* An operator's rule, as Dubbo's admin writes it. */
	w.f = f;
	w.lists = stats(f).route_lists;
	w.rules = 1;
	node = zk_route(zk_prov, f->svc, "=> host != 10.1.0.2");
	assert_non_null(node);
	assert_true(zk_wait(rules_are, &w, ZK_WAIT_MS));
	assert_int_equal(routed(f), 1);
	/* The rule is removed: all providers again. */
	w.lists = stats(f).route_lists;
	w.rules = 0;
	assert_int_equal(zk_delete_raw(zk_prov, f->svc, "routers", node), 0);
	assert_true(zk_wait(rules_are, &w, ZK_WAIT_MS));
	assert_int_equal(routed(f), 2);
	free(node);
	fx_close(f);
}

/* ---- the cache file
 * ----------------------------------------------------------------- */

static void
test_zk_cache_file_when_the_registry_is_down(void **state)
{
	char u1[512], u2[512], dead[32];
	resil_source_stats st;
	fx *f = *state, *g = f + 1;
	int fd;

	zk_need_server();
	fx_open(f);
	snprintf(f->file, sizeof(f->file), "%s/consumer.cache", zk_srv.dir);
	url(u1, sizeof(u1), f, 1, "&weight=300");
	url(u2, sizeof(u2), f, 2, "");
	reg(f, u1);
	reg(f, u2);
	fx_source(f, zk_srv.hosts, f->file);
	wait_count(f, 2);
	resil__source_flush(f->src);
	fd = access(f->file, R_OK);
	assert_int_equal(fd, 0);
	/* The consumer restarts while no registry answers (a port no one
	 * listens at): the cache file gives it the providers at once. */
	memcpy(g->svc, f->svc, sizeof(g->svc));
	fx_dir(g);
	snprintf(dead, sizeof(dead), "127.0.0.1:1");
	fx_source(g, dead, f->file);
	assert_int_equal(resil_directory_count(g->dir), 2);
	{
		resil_endpoint_state es;

		assert_int_equal(
		    resil_directory_get_state(g->dir, "10.1.0.1:20880", &es),
		    RESIL_OK);
		assert_int_equal(es.weight, 300);
	}
	assert_int_equal(routed(g), 2);
	st = stats(g);
	assert_int_equal(st.connected, 0);
	assert_int_equal(zk_heard_n(&g->h, RESIL_SOURCE_CACHE_LOADED), 1);
	fx_close(g);
	fx_close(f);
	unlink(f->file);
}

/* ---- the server dies and comes back
 * ------------------------------------------------- */

static void
test_zk_server_killed_and_restarted(void **state)
{
	char u1[512], u2[512];
	uint64_t connects;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	url(u1, sizeof(u1), f, 1, "");
	reg(f, u1);
	fx_source(f, zk_srv.hosts, NULL);
	wait_count(f, 1);
	{
		want w = { f, 0, 1 };

		assert_true(zk_wait(connects_at_least, &w, ZK_WAIT_MS));
	}
	connects = stats(f).connects;
	zk_kill(&zk_srv);
	{
		want w = { f, 0, 0 };

		assert_true(zk_wait(disconnected, &w, ZK_WAIT_MS));
	}
	/* Calls go on with the list they had. */
	assert_int_equal(resil_directory_count(f->dir), 1);
	assert_int_equal(routed(f), 1);
	assert_int_equal(zk_restart(&zk_srv), 0);
	{
		want w = { f, 0, connects + 1 };

		/* The same session (the server kept it): reconnected and
		 * the lists read again. */
		assert_true(zk_wait(connects_at_least, &w, ZK_WAIT_MS));
	}
	assert_int_equal(stats(f).sessions, 1);
	/* The providers' session is back too (bounded wait). */
	{
		int i;

		for (i = 0; i < ZK_WAIT_MS / 10 &&
		     zoo_state(zk_prov) != ZOO_CONNECTED_STATE;
		     i++)
			(void)poll(NULL, 0, 10);
	}
	url(u2, sizeof(u2), f, 2, "");
	reg(f, u2);
	wait_count(f, 2);
	fx_close(f);
}

/* ---- a flood
 * ------------------------------------------------------------------------ */

typedef struct caller {
	resil_selector *sel;
	atomic_int stop;
	atomic_ulong routes, no_provider;
} caller;

static void *
caller_main(void *arg)
{
	caller *c = arg;
	resil_candidates *cs;
	resil_request req;

	memset(&req, 0, sizeof(req));
	req.method = "sayHello";
	if (resil_candidates_new(&cs, c->sel) != RESIL_OK)
		return NULL;
	while (!atomic_load(&c->stop)) {
		resil_pick p;

		if (resil_selector_route(c->sel, &req, cs, NULL) != RESIL_OK) {
			atomic_fetch_add(&c->no_provider, 1);
			continue;
		}
		if (resil_selector_pick(c->sel, cs, &req, NULL, 0, &p, NULL) ==
		    RESIL_OK)
			(void)resil_selector_report(
			    c->sel, &p, RESIL_OUTCOME_SUCCESS);
		atomic_fetch_add(&c->routes, 1);
	}
	resil_candidates_free(cs);
	return NULL;
}

static atomic_int acks, ack_errors;

static void
ack(int rc, const char *value, const void *data)
{
	(void)value;
	(void)data;
	if (rc != ZOK)
		atomic_fetch_add(&ack_errors, 1);
	atomic_fetch_add(&acks, 1);
}

static void
ack_void(int rc, const void *data)
{
	ack(rc, NULL, data);
}

static int
acks_reach(void *ctx)
{
	return atomic_load(&acks) >= *(int *)ctx;
}

static void
flood_name(char *buf, size_t n, const char *svc, unsigned i)
{
	char u[256];
	char *e;

	snprintf(u, sizeof(u), "dubbo://10.%u.%u.%u:20880/%s?weight=%u",
	    2 + (i >> 16), (i >> 8) & 255, i & 255, svc, 1 + i % 200);
	e = zk_encode(u);
	snprintf(buf, n, "/dubbo/%s/providers/%s", svc, e);
	free(e);
}

static void
test_zk_flood_and_bad_nodes(void **state)
{
	enum { N = 10000, BAD = 100, CHANGES = 2000 };
	static const char *const bad_names[] = { "not-a-url",
		"foo%3A%2F%2F1.2.3.4%3A5", "dubbo%3A%2F%2F1.2.3.4%3A0%2Fx",
		"%ZZ" };
	char path[512], dir[256];
	caller c;
	pthread_t t;
	int i, target;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	snprintf(dir, sizeof(dir), "/dubbo/%s/providers", f->svc);
	assert_int_equal(zk_mkdirs(zk_prov, dir), ZOK);
	fx_source(f, zk_srv.hosts, NULL);
	atomic_store(&acks, 0);
	atomic_store(&ack_errors, 0);
	for (i = 0; i < N; i++) {
		flood_name(path, sizeof(path), f->svc, (unsigned)i);
		assert_int_equal(
		    zoo_acreate(zk_prov, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
		        ZOO_EPHEMERAL, ack, NULL),
		    ZOK);
	}
	for (i = 0; i < BAD; i++) {
		snprintf(
		    path, sizeof(path), "%s/%s-%d", dir, bad_names[i % 4], i);
		assert_int_equal(
		    zoo_acreate(zk_prov, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
		        ZOO_EPHEMERAL, ack, NULL),
		    ZOK);
	}
	target = N + BAD;
	assert_true(zk_wait(acks_reach, &target, 60000));
	assert_int_equal(atomic_load(&ack_errors), 0);
	wait_count(f, N);

	/* Calls run while the list changes 10^3 times a second. */
	c.sel = f->sel;
	atomic_store(&c.stop, 0);
	atomic_store(&c.routes, 0);
	atomic_store(&c.no_provider, 0);
	assert_int_equal(pthread_create(&t, NULL, caller_main, &c), 0);
	for (i = 0; i < CHANGES; i++) {
		/* Provider i leaves, provider N + i arrives. */
		flood_name(path, sizeof(path), f->svc, (unsigned)(i / 2));
		if (i % 2 == 0)
			assert_int_equal(
			    zoo_adelete(zk_prov, path, -1, ack_void, NULL),
			    ZOK);
		else {
			flood_name(
			    path, sizeof(path), f->svc, (unsigned)(N + i / 2));
			assert_int_equal(zoo_acreate(zk_prov, path, NULL, -1,
			                     &ZOO_OPEN_ACL_UNSAFE,
			                     ZOO_EPHEMERAL, ack, NULL),
			    ZOK);
		}
		if (i % 10 == 9)
			(void)poll(NULL, 0, 10); /* ~10^3 a second */
	}
	target += CHANGES;
	assert_true(zk_wait(acks_reach, &target, 60000));
	assert_int_equal(atomic_load(&ack_errors), 0);
	/* The directory converges on the registry's list. */
	wait_count(f, N);
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	assert_int_equal(atomic_load(&c.no_provider), 0);
	assert_true(atomic_load(&c.routes) > 0);
	/* Each bad node said once, however many lists it was in. */
	assert_int_equal(zk_heard_n(&f->h, RESIL_SOURCE_BAD_PROVIDER), BAD);
	{
		resil_source_stats st = stats(f);

		printf("flood: %lu lists pushed, %lu calls routed meanwhile, "
		       "update %.2f ms last, %.2f ms max\n",
		    (unsigned long)st.pushes,
		    (unsigned long)atomic_load(&c.routes),
		    (double)st.last_update_ns / 1e6,
		    (double)st.max_update_ns / 1e6);
	}
	fx_close(f);
}

/* ---- one change among 1000
 * --------------------------------------------------------- */

static void
test_zk_one_change_among_1000(void **state)
{
	enum { N = 1000, CHANGES = 20 };
	char path[512], dir[256];
	uint64_t sum = 0, max = 0;
	int i, target;
	fx *f = *state;

	zk_need_server();
	fx_open(f);
	snprintf(dir, sizeof(dir), "/dubbo/%s/providers", f->svc);
	assert_int_equal(zk_mkdirs(zk_prov, dir), ZOK);
	atomic_store(&acks, 0);
	for (i = 0; i < N; i++) {
		flood_name(path, sizeof(path), f->svc, (unsigned)i);
		assert_int_equal(
		    zoo_acreate(zk_prov, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
		        ZOO_EPHEMERAL, ack, NULL),
		    ZOK);
	}
	target = N;
	assert_true(zk_wait(acks_reach, &target, 60000));
	fx_source(f, zk_srv.hosts, NULL);
	wait_count(f, N);
	for (i = 0; i < CHANGES; i++) {
		uint64_t pushes = stats(f).pushes;
		resil_source_stats st;

		flood_name(path, sizeof(path), f->svc, (unsigned)(N + i));
		assert_int_equal(
		    zoo_create(zk_prov, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
		        ZOO_EPHEMERAL, NULL, 0),
		    ZOK);
		{
			want w = { f, (size_t)(N + i + 1), pushes };

			assert_true(zk_wait(pushed_to, &w, ZK_WAIT_MS));
		}
		st = stats(f);
		sum += st.last_update_ns;
		if (st.last_update_ns > max)
			max = st.last_update_ns;
	}
	printf("one change among %d: watch fired -> directory updated "
	       "%.2f ms mean, %.2f ms max over %d changes\n",
	    N, (double)sum / CHANGES / 1e6, (double)max / 1e6, CHANGES);
	fx_close(f);
}

/* Each test with its two fixtures (fx_setup, fx_teardown). */
#define ZK_TEST(t) cmocka_unit_test_setup_teardown(t, fx_setup, fx_teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		ZK_TEST(test_zk_providers_come_and_go),
		ZK_TEST(test_zk_bad_parameter_node_costs_that_node_only),
		ZK_TEST(test_zk_service_not_registered_yet),
		ZK_TEST(test_zk_provider_session_ends_empty_protection),
		ZK_TEST(test_zk_session_expiry_resubscribes),
		ZK_TEST(test_zk_routes_of_the_registry),
		ZK_TEST(test_zk_cache_file_when_the_registry_is_down),
		ZK_TEST(test_zk_one_change_among_1000),
		ZK_TEST(test_zk_flood_and_bad_nodes),
		/* Last: it restarts the server. */
		ZK_TEST(test_zk_server_killed_and_restarted),
	};

	/* RESIL_TEST_FILTER=test_zk_session_* runs some of them. */
	if (getenv("RESIL_TEST_FILTER") != NULL)
		cmocka_set_test_filter(getenv("RESIL_TEST_FILTER"));
	return cmocka_run_group_tests_name(
	    "source_zookeeper", tests, zk_group_setup, zk_group_teardown);
}

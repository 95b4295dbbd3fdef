/*
 * Issue 40.4: Dubbo 3's routing rules in ZooKeeper's config center, against
 * a real server the group setup starts (tests/support/zk_server.c): a
 * condition rule (/dubbo/config/dubbo/SERVICE.condition-router) and a tag
 * rule (/dubbo/config/dubbo/APP.tag-router) written as the console writes
 * them, changed, refused and deleted, with the consumer's own rule and a
 * registry condition:// rule beside them (neither dropped). Waits poll with
 * a bounded deadline; assertions are on routes, counts and events.
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/directory.h>
#include <resil/selector.h>
#include <resil/source.h>

#include "source_internal.h"
#include "support/zk_fx.h"

static unsigned seq;

typedef struct fx {
	char svc[64], app[32];
	resil_directory *dir;
	resil_selector *sel;
	resil_registry_source *src;
	resil_condition *own;
	zk_heard h;
	char want[64];
	const char *tag;
} fx;

/* The count of events of type t; its last message into msg, if any. */
static unsigned
heard(fx *f, resil_source_event_type t, char *msg, size_t len)
{
	if (msg != NULL)
		zk_heard_last(&f->h, t, msg, len);
	return zk_heard_n(&f->h, t);
}

static int
fx_setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	zk_heard_init(&f->h);
	*state = f;
	return 0;
}

static void
fx_close(fx *f)
{
	resil_source_free(f->src);
	f->src = NULL;
	resil_selector_free(f->sel);
	f->sel = NULL;
	resil_directory_free(f->dir);
	f->dir = NULL;
	resil_condition_free(f->own);
	f->own = NULL;
}

static int
fx_teardown(void **state)
{
	fx *f = *state;

	fx_close(f);
	zk_heard_destroy(&f->h);
	free(f);
	return 0;
}

/* Providers 1, 2, 3 (10.1.0.N:20880, shard=N, the test's application);
 * the consumer's own rule (its configuration file's) keeps shards 1..2
 * whenever no other rule has a say: `=> shard != 9` (forced). */
static void
fx_open(fx *f, int with_own)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_source_config rc;
	char reg[96], url[512];
	int i;

	seq++;
	snprintf(f->svc, sizeof(f->svc), "com.resil.R%uService", seq);
	snprintf(f->app, sizeof(f->app), "shop-r%u", seq);
	assert_int_equal(resil_directory_new(&f->dir, &dc, NULL), RESIL_OK);
	sc.service = f->svc;
	if (with_own) {
		assert_int_equal(resil_condition_parse(
		                     &f->own, "=> shard != 9", 1, NULL, NULL),
		    RESIL_OK);
		sc.conditions = &f->own;
		sc.nconditions = 1;
	}
	assert_int_equal(
	    resil_selector_new(&f->sel, f->dir, &sc, NULL), RESIL_OK);
	for (i = 1; i <= 3; i++) {
		snprintf(url, sizeof(url),
		    "dubbo://10.1.0.%d:20880/%s?anyhost=true&application=%s&"
		    "interface=%s&methods=get&shard=%d&side=provider",
		    i, f->svc, f->app, f->svc, i);
		assert_int_equal(zk_register(zk_prov, f->svc, url), 0);
	}
	zk_source_config(&rc, reg, sizeof(reg), zk_srv.hosts, f->svc, f->dir,
	    f->sel, &f->h);
	assert_int_equal(resil_source_new(&f->src, &rc, NULL), RESIL_OK);
}

/* The shards routed for the test's request ("1,2"), or "none". */
static void
routed(fx *f, char *out, size_t len)
{
	resil_candidates *c;
	resil_request req;
	size_t i, at = 0;

	memset(&req, 0, sizeof(req));
	req.method = "get";
	req.tag = f->tag;
	assert_int_equal(resil_candidates_new(&c, f->sel), RESIL_OK);
	snprintf(out, len, "none");
	if (resil_selector_route(f->sel, &req, c, NULL) == RESIL_OK)
		for (i = 0; i < resil_candidates_count(c); i++) {
			resil_candidate cd;

			resil_candidates_get(c, i, &cd);
			at += (size_t)snprintf(out + at, len - at, "%s%c",
			    i == 0 ? "" : ",", cd.address[7]);
		}
	resil_candidates_free(c);
}

static int
routes_want(void *ctx)
{
	fx *f = ctx;
	char got[64];

	routed(f, got, sizeof(got));
	return strcmp(got, f->want) == 0;
}

/* Wait until the request with tag routes to want. */
static void
wait_routes(fx *f, const char *tag, const char *want)
{
	char got[64];

	f->tag = tag;
	snprintf(f->want, sizeof(f->want), "%s", want);
	if (!zk_wait(routes_want, f, ZK_WAIT_MS)) {
		routed(f, got, sizeof(got));
		fail_msg("%s tag %s: routed %s, waited for %s", f->svc,
		    tag != NULL ? tag : "(none)", got, want);
	}
}

/* Wait for the n-th event of type t; its message into msg. */
static void
wait_event(fx *f, resil_source_event_type t, unsigned n, char *msg, size_t len)
{
	zk_wait_heard(&f->h, t, n, f->svc);
	(void)heard(f, t, msg, len);
}

/* The console's write of a config center node: created or set. */
static void
put(const char *path, const char *yaml)
{
	assert_int_equal(zk_put(zk_prov, path, yaml), ZOK);
}

static void
test_zk_rules_condition_router_written_changed_deleted(void **state)
{
	fx *f = *state;
	char path[160], msg[RESIL_DIAG_MAX], *node;
	unsigned routes;

	zk_need_server();
	fx_open(f, 1);
	wait_routes(f, NULL, "1,2,3");
	/* A registry condition:// rule (2.7's routers) beside the file's
	 * own: forced, it takes shard 3 away. */
	node = zk_route(zk_prov, f->svc, "=> shard != 3");
	assert_non_null(node);
	wait_routes(f, NULL, "1,2");
	assert_int_equal(resil_selector_condition_count(f->sel), 2);

	/* Written as the console writes it. */
	snprintf(path, sizeof(path), "/dubbo/config/dubbo/%s.condition-router",
	    f->svc);
	routes = heard(f, RESIL_SOURCE_ROUTES, NULL, 0);
	put(path,
	    "configVersion: v3.0\nscope: service\nforce: true\n"
	    "runtime: true\nenabled: true\npriority: 1\nkey: x\n"
	    "conditions:\n  - method = get => shard = 1\n");
	wait_routes(f, NULL, "1");
	assert_int_equal(resil_selector_condition_count(f->sel), 3);
	wait_event(f, RESIL_SOURCE_ROUTES, routes + 1, NULL, 0);

	/* Changed. */
	put(path, "force: true\nconditions:\n  - '=> shard = 2'\n");
	wait_routes(f, NULL, "2");
	assert_int_equal(resil_selector_condition_count(f->sel), 3);

	/* Refused: an event naming the rule; the rule in force stays. */
	put(path, "force: true\nconditions:\n  - '=> shard = '\n");
	wait_event(f, RESIL_SOURCE_BAD_ROUTE, 1, msg, sizeof(msg));
	assert_non_null(strstr(msg, path));
	assert_non_null(strstr(msg, "expected a value after '='"));
	assert_non_null(strstr(msg, "the rule in force stays"));
	wait_routes(f, NULL, "2");
	put(path, "conditions: [\n");
	wait_event(f, RESIL_SOURCE_BAD_ROUTE, 2, msg, sizeof(msg));
	assert_non_null(strstr(msg, "line 2 column 1"));

	/* Disabled: no rule of the config center; the others stay. */
	routes = heard(f, RESIL_SOURCE_ROUTES, NULL, 0);
	put(path, "enabled: false\nconditions:\n  - '=> shard = 2'\n");
	wait_routes(f, NULL, "1,2");
	assert_int_equal(resil_selector_condition_count(f->sel), 2);
	wait_event(f, RESIL_SOURCE_ROUTES, routes + 1, msg, sizeof(msg));
	assert_non_null(strstr(msg, "disabled"));

	/* Back, then deleted: removed, the file's and the registry's
	 * rules stay. */
	put(path, "force: true\nconditions:\n  - '=> shard = 2'\n");
	wait_routes(f, NULL, "2");
	routes = heard(f, RESIL_SOURCE_ROUTES, NULL, 0);
	assert_int_equal(zoo_delete(zk_prov, path, -1), ZOK);
	wait_routes(f, NULL, "1,2");
	wait_event(f, RESIL_SOURCE_ROUTES, routes + 1, msg, sizeof(msg));
	assert_non_null(strstr(msg, "removed"));
	assert_int_equal(resil_selector_condition_count(f->sel), 2);

	/* The registry's condition:// rule gone: the file's own stays. */
	assert_int_equal(zk_delete_raw(zk_prov, f->svc, "routers", node), 0);
	wait_routes(f, NULL, "1,2,3");
	assert_int_equal(resil_selector_condition_count(f->sel), 1);

	/* Written again: read through the exists watch. */
	put(path, "force: true\nconditions:\n  - '=> shard = 3'\n");
	wait_routes(f, NULL, "3");
	assert_int_equal(zoo_delete(zk_prov, path, -1), ZOK);
	wait_routes(f, NULL, "1,2,3");
	free(node);
	fx_close(f);
}

static void
test_zk_rules_tag_router_written_changed_deleted(void **state)
{
	fx *f = *state;
	char path[160], msg[RESIL_DIAG_MAX];
	unsigned bad;

	zk_need_server();
	fx_open(f, 0);
	snprintf(
	    path, sizeof(path), "/dubbo/config/dubbo/%s.tag-router", f->app);
	wait_routes(f, NULL, "1,2,3");
	wait_routes(f, "gray", "1,2,3"); /* no tag: the untagged ones */

	/* The console tags provider 1 gray, without restarting it. */
	put(path,
	    "configVersion: v3.0\nforce: false\nenabled: true\n"
	    "runtime: true\nkey: x\ntags:\n  - name: gray\n"
	    "    addresses: [\"10.1.0.1:20880\"]\n");
	wait_routes(f, "gray", "1");
	wait_routes(f, NULL, "2,3");
	wait_event(f, RESIL_SOURCE_ROUTES, 1, NULL, 0);

	/* Changed: gray by address and by a parameter match. */
	put(path,
	    "tags:\n  - name: gray\n    addresses: [\"10.1.0.2\"]\n"
	    "  - name: big\n    match:\n      - key: shard\n"
	    "        value: {exact: '3'}\n");
	wait_routes(f, "gray", "2");
	wait_routes(f, "big", "3");
	wait_routes(f, NULL, "1");

	/* Refused: the rule in force stays. */
	bad = heard(f, RESIL_SOURCE_BAD_ROUTE, NULL, 0);
	put(path, "tags:\n  - addresses: [10.1.0.1]\n");
	wait_event(f, RESIL_SOURCE_BAD_ROUTE, bad + 1, msg, sizeof(msg));
	assert_non_null(strstr(msg, path));
	assert_non_null(strstr(msg, "a tag without a name"));
	wait_routes(f, "gray", "2");

	/* Deleted: static tags again (none here). */
	assert_int_equal(zoo_delete(zk_prov, path, -1), ZOK);
	wait_routes(f, NULL, "1,2,3");
	wait_routes(f, "gray", "1,2,3");
	fx_close(f);
}

/* A rule already there when the consumer starts is read at connection. */
static void
test_zk_rules_read_at_start(void **state)
{
	fx *f = *state;
	char path[160];

	zk_need_server();
	snprintf(path, sizeof(path),
	    "/dubbo/config/dubbo/com.resil.R%uService.condition-router",
	    seq + 1);
	put(path, "force: true\nconditions:\n  - '=> shard = 2,3'\n");
	fx_open(f, 1);
	wait_routes(f, NULL, "2,3");
	assert_int_equal(resil_selector_condition_count(f->sel), 2);
	fx_close(f);
	assert_int_equal(zoo_delete(zk_prov, path, -1), ZOK);
}

/* Dubbo's mock:// provider has no port (no server needed). */
static void
test_zk_rules_mock_provider_needs_no_port(void **state)
{
	const char *urls[] = {
		"mock://localhost/com.resil.MockService?mock=force:return "
		"null",
		"dubbo://10.0.0.1:20880/com.resil.MockService",
	};
	resil_directory_config dc = resil_directory_config_default();
	resil_source_config sc = resil_source_config_default();
	resil_selector_config scfg = resil_selector_config_default();
	resil_directory *dir;
	resil_selector *sel;
	resil_registry_source *src;
	fx *f = *state;
	char spec[64];

	assert_int_equal(resil_directory_new(&dir, &dc, NULL), RESIL_OK);
	sc.registry = "zookeeper://127.0.0.1:2181";
	sc.service = "com.resil.MockService";
	sc.directory = dir;
	sc.listener = zk_heard_event;
	sc.listener_ctx = &f->h;
	assert_int_equal(
	    resil__source_new_detached(&src, &sc, NULL), RESIL_OK);
	resil__source_apply(src, RESIL__CAT_PROVIDERS, urls, 2, 1);
	assert_int_equal(heard(f, RESIL_SOURCE_BAD_PROVIDER, NULL, 0), 0);
	assert_int_equal(resil_directory_count(dir), 2);
	assert_int_equal(resil_selector_new(&sel, dir, &scfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_selector_mock_spec(sel, "m", spec, sizeof(spec)), 1);
	assert_string_equal(spec, "force:return null");
	resil_selector_free(sel);
	resil_source_free(src);
	resil_directory_free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_zk_rules_condition_router_written_changed_deleted,
		    fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(
		    test_zk_rules_tag_router_written_changed_deleted, fx_setup,
		    fx_teardown),
		cmocka_unit_test_setup_teardown(
		    test_zk_rules_read_at_start, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(
		    test_zk_rules_mock_provider_needs_no_port, fx_setup,
		    fx_teardown),
	};

	return cmocka_run_group_tests_name(
	    "source_zk_rules", tests, zk_group_setup, zk_group_teardown);
}

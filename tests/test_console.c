/*
 * Issue 40, against a real ZooKeeper (started by the group setup, as in
 * test_source_zookeeper): the consumer's own node under /dubbo/S/consumers
 * (written as Dubbo writes it, again after a session expiry, gone on
 * free); the console's override rules in both forms (2.7 override:// URLs
 * under /dubbo/S/configurators, 3.x YAML under /dubbo/config/dubbo/
 * S.configurators and APP.configurators) steering a pipeline through the
 * reload path, a provider's weight and disabled flag, refusals named;
 * Dubbo's check=true with and without providers.
 *
 * Waits poll a condition with a bounded deadline; assertions are on
 * counts and states, never on timing.
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

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/selector.h>
#include <resil/source.h>

#include "configurator.h"
#include "source_internal.h"
#include "support/zk_fx.h"

static unsigned seq;

typedef struct fx {
	char svc[64];
	resil_directory *dir;
	resil_selector *sel;
	resil_registry_source *src;
	resil_pipeline *p;
	resil_config *base;
	zk_proxy *px;
	zk_heard h;
	pthread_mutex_t mu; /* for the three below */
	unsigned summaries; /* OVERRIDE events of the whole set */
	char last_summary[RESIL_DIAG_MAX];
	char bad[4096]; /* BAD_OVERRIDE messages, one a line */
	unsigned calls[4];
} fx;

static void
on_event(const resil_source_event *ev, void *ctx)
{
	fx *f = ctx;

	zk_heard_event(ev, &f->h);
	pthread_mutex_lock(&f->mu);
	if (ev->type == RESIL_SOURCE_OVERRIDE && ev->node[0] == '\0') {
		f->summaries++;
		snprintf(f->last_summary, sizeof(f->last_summary), "%s",
		    ev->message);
	}
	if (ev->type == RESIL_SOURCE_BAD_OVERRIDE) {
		size_t len = strlen(f->bad);

		snprintf(f->bad + len, sizeof(f->bad) - len, "%s | %s\n",
		    ev->node, ev->message);
	}
	pthread_mutex_unlock(&f->mu);
}

static unsigned
heard(fx *f, resil_source_event_type t)
{
	return zk_heard_n(&f->h, t);
}

static unsigned
summaries(fx *f)
{
	unsigned n;

	pthread_mutex_lock(&f->mu);
	n = f->summaries;
	pthread_mutex_unlock(&f->mu);
	return n;
}

static int
fx_setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	pthread_mutex_init(&f->mu, NULL);
	zk_heard_init(&f->h);
	*state = f;
	return 0;
}

static int
fx_teardown(void **state)
{
	fx *f = *state;

	resil_source_free(f->src);
	zk_proxy_stop(f->px);
	resil_pipeline_free(f->p);
	resil_config_free(f->base);
	resil_selector_free(f->sel);
	resil_directory_free(f->dir);
	pthread_mutex_destroy(&f->mu);
	zk_heard_destroy(&f->h);
	free(f);
	return 0;
}

/* The directory, the selector and (base != NULL) a pipeline from base. */
static void
fx_open(fx *f, const char *base)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_pipeline_config pc;
	char text[512];
	resil_diag diag;

	snprintf(f->svc, sizeof(f->svc), "com.resil.C%uService", ++seq);
	assert_int_equal(resil_directory_new(&f->dir, &dc, NULL), RESIL_OK);
	sc.service = f->svc;
	assert_int_equal(
	    resil_selector_new(&f->sel, f->dir, &sc, NULL), RESIL_OK);
	if (base == NULL)
		return;
	snprintf(text, sizeof(text), "service=%s\n%s", f->svc, base);
	if (resil_config_parse_string(
	        &f->base, text, "svc.conf", NULL, &diag) != RESIL_OK)
		fail_msg("%s", diag.msg);
	pc = *resil_config_pipeline(f->base);
	pc.selector = f->sel;
	if (resil_pipeline_new(&f->p, &pc, &diag) != RESIL_OK)
		fail_msg("%s", diag.msg);
}

static resil_err
fx_source(fx *f, const char *hosts, int check, resil_diag *diag)
{
	resil_source_config sc;
	char reg[96];
	resil_err err;

	zk_source_config(
	    &sc, reg, sizeof(reg), hosts, f->svc, f->dir, f->sel, &f->h);
	sc.listener = on_event;
	sc.listener_ctx = f;
	sc.application = "shop";
	sc.methods = "getStock,getRecommendations";
	sc.check = check;
	sc.check_timeout_ns = 2 * RESIL_NS_PER_SEC;
	err = resil_source_new(&f->src, &sc, diag);
	if (err == RESIL_OK && f->p != NULL)
		assert_int_equal(
		    resil_source_attach_pipeline(f->src, f->p, f->base, diag),
		    RESIL_OK);
	return err;
}

/* ---- waiting ------------------------------------------------------------ */

typedef struct want {
	fx *f;
	unsigned n;
	const char *path;
	int count;
} want;

static int
summaries_above(void *ctx)
{
	want *w = ctx;

	return summaries(w->f) > w->n;
}

/* After a change of the rules: the next summary event. */
static void
wait_applied(fx *f, unsigned before)
{
	want w = { f, before, NULL, 0 };

	if (!zk_wait(summaries_above, &w, ZK_WAIT_MS))
		fail_msg("%s: no override summary after %u", f->svc, before);
}

static int
children_are(void *ctx)
{
	want *w = ctx;
	struct String_vector v;
	int n;

	if (zoo_get_children(zk_prov, w->path, 0, &v) != ZOK)
		return w->count == 0;
	n = v.count;
	deallocate_String_vector(&v);
	return n == w->count;
}

static void
wait_count(fx *f, size_t n)
{
	zk_wait_count(f->dir, n, f->svc);
}

static void
wait_heard(fx *f, resil_source_event_type t, unsigned n)
{
	zk_wait_heard(&f->h, t, n, f->svc);
}

/* ---- the console's writes ----------------------------------------------- */

static void
provider(fx *f, int host, const char *extra)
{
	char u[512];

	snprintf(u, sizeof(u),
	    "dubbo://10.2.0.%d:20880/%s?anyhost=true&application=stock&"
	    "dubbo=2.0.2&interface=%s&methods=getStock,getRecommendations&"
	    "side=provider%s",
	    host, f->svc, f->svc, extra);
	assert_int_equal(zk_register(zk_prov, f->svc, u), 0);
}

/* An override URL as the console writes it (its params after the
 * service's ?), under /dubbo/S/configurators: the node's name. */
static char *
override(fx *f, const char *host, const char *params)
{
	char u[1024], *enc;

	snprintf(u, sizeof(u),
	    "override://%s/%s?category=configurators&"
	    "dynamic=false&%s",
	    host, f->svc, params);
	enc = zk_encode(u);
	assert_non_null(enc);
	assert_int_equal(
	    zk_create_raw(zk_prov, f->svc, "configurators", enc, 0), 0);
	return enc;
}

static void
override_gone(fx *f, char *enc)
{
	assert_int_equal(
	    zk_delete_raw(zk_prov, f->svc, "configurators", enc), 0);
	free(enc);
}

/* The config center's node of key (S or APP). */
static void
yaml_rule(const char *key, const char *yaml)
{
	char path[256];

	snprintf(
	    path, sizeof(path), "/dubbo/config/dubbo/%s.configurators", key);
	assert_int_equal(zk_put(zk_prov, path, yaml), ZOK);
}

static void
yaml_gone(const char *key)
{
	char path[256];

	snprintf(
	    path, sizeof(path), "/dubbo/config/dubbo/%s.configurators", key);
	assert_int_equal(zoo_delete(zk_prov, path, -1), ZOK);
}

/* ---- calls -------------------------------------------------------------- */

static int
stock(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	fx *f = ctx;

	(void)args;
	(void)ep;
	f->calls[0]++;
	*out = resil_value_int(42);
	return 0;
}

/* One call of method: 'L' live, 'M' mock, 'E' an error. */
static char
call(fx *f, const char *method)
{
	resil_invocation inv;
	resil_result r;
	char c;

	resil_invocation_init(&inv, method);
	(void)resil_pipeline_invoke_ex(f->p, NULL, &inv, stock, f, &r);
	c = r.err != RESIL_OK               ? 'E'
	    : r.source == RESIL_SOURCE_MOCK ? 'M'
	    : r.source == RESIL_SOURCE_LIVE ? 'L'
	                                    : 'E';
	resil_result_free(&r);
	return c;
}

/* ---- 1. the consumer's node --------------------------------------------- */

static int
consumer_node(fx *f, char *decoded, size_t n)
{
	char path[256];
	struct String_vector v;
	char *d = NULL;
	size_t col;
	int count;

	snprintf(path, sizeof(path), "/dubbo/%s/consumers", f->svc);
	if (zoo_get_children(zk_prov, path, 0, &v) != ZOK)
		return 0;
	count = v.count;
	if (count == 1 &&
	    resil__url_decode(resil__allocator(NULL), v.data[0], &d, &col) ==
	        RESIL_OK) {
		snprintf(decoded, n, "%s", d);
		resil__strfree(resil__allocator(NULL), d);
	}
	deallocate_String_vector(&v);
	return count;
}

static void
test_console_consumer_registers_as_dubbo_does(void **state)
{
	fx *f = *state;
	char node[1024], want_start[512], host[64], path[256];
	resil_diag diag;
	want w = { f, 0, path, 0 };

	zk_need_server();
	fx_open(f, NULL);
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_heard(f, RESIL_SOURCE_REGISTERED, 1);
	assert_int_equal(consumer_node(f, node, sizeof(node)), 1);
	resil__local_host(host, sizeof(host));
	snprintf(want_start, sizeof(want_start),
	    "consumer://%s/%s?application=shop&category=consumers&"
	    "check=false&dubbo=2.0.2&interface=%s&"
	    "methods=getStock,getRecommendations&pid=",
	    host, f->svc, f->svc);
	assert_memory_equal(node, want_start, strlen(want_start));
	assert_non_null(strstr(node, "&side=consumer&timestamp="));
	/* Removed on free. */
	resil_source_free(f->src);
	f->src = NULL;
	snprintf(path, sizeof(path), "/dubbo/%s/consumers", f->svc);
	assert_true(zk_wait(children_are, &w, ZK_WAIT_MS));
}

static void
test_console_consumer_registers_again_after_expiry(void **state)
{
	fx *f = *state;
	char node[1024], path[256], passwd[16];
	int64_t id;
	resil_diag diag;
	want w = { f, 0, path, 0 };

	zk_need_server();
	fx_open(f, NULL);
	f->px = zk_proxy_start(&zk_srv);
	assert_non_null(f->px);
	assert_int_equal(
	    fx_source(f, zk_proxy_hosts(f->px), 0, &diag), RESIL_OK);
	wait_heard(f, RESIL_SOURCE_REGISTERED, 1);
	assert_int_equal(consumer_node(f, node, sizeof(node)), 1);
	assert_int_equal(resil__source_zk_session(f->src, &id, passwd), 0);
	zk_proxy_cut(f->px, 1);
	assert_int_equal(zk_expire(&zk_srv, id, passwd), 0);
	/* The session ended: its node went with it. */
	snprintf(path, sizeof(path), "/dubbo/%s/consumers", f->svc);
	assert_true(zk_wait(children_are, &w, ZK_WAIT_MS));
	zk_proxy_cut(f->px, 0);
	wait_heard(f, RESIL_SOURCE_EXPIRED, 1);
	wait_heard(f, RESIL_SOURCE_REGISTERED, 2);
	w.count = 1;
	assert_true(zk_wait(children_are, &w, ZK_WAIT_MS));
}

static void
test_console_register_false_writes_nothing(void **state)
{
	fx *f = *state;
	resil_source_config sc;
	char reg[96], node[1024];

	zk_need_server();
	fx_open(f, NULL);
	zk_source_config(
	    &sc, reg, sizeof(reg), zk_srv.hosts, f->svc, f->dir, NULL, &f->h);
	sc.listener = on_event;
	sc.listener_ctx = f;
	sc.register_consumer = 0;
	assert_int_equal(resil_source_new(&f->src, &sc, NULL), RESIL_OK);
	wait_heard(f, RESIL_SOURCE_CONNECTED, 1);
	provider(f, 1, "");
	wait_count(f, 1); /* a full round trip since the connection */
	assert_int_equal(consumer_node(f, node, sizeof(node)), 0);
	assert_int_equal(heard(f, RESIL_SOURCE_REGISTERED), 0);
}

/* ---- 2. override rules -------------------------------------------------- */

static void
test_console_override_27_mock_and_restore(void **state)
{
	fx *f = *state;
	resil_diag diag;
	char *rule, *other;
	unsigned before;
	int i;

	zk_need_server();
	fx_open(f, "timeout=1000\n");
	provider(f, 1, "");
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_count(f, 1);
	assert_int_equal(call(f, "getRecommendations"), 'L');

	/* The console's switch, as it writes it. */
	before = summaries(f);
	rule = override(
	    f, "0.0.0.0", "application=shop&mock=force%3Areturn+null");
	wait_applied(f, before);
	f->calls[0] = 0;
	for (i = 0; i < 10; i++)
		assert_int_equal(call(f, "getRecommendations"), 'M');
	assert_int_equal(f->calls[0], 0);

	/* A rule for another application changes nothing. */
	before = summaries(f);
	other = override(f, "0.0.0.0", "application=other&timeout=5");
	wait_applied(f, before);
	assert_non_null(strstr(f->last_summary, "1 setting of 1 rule"));

	/* Every rule gone: the file's values, exactly. */
	before = summaries(f);
	override_gone(f, rule);
	wait_applied(f, before);
	assert_int_equal(call(f, "getRecommendations"), 'L');
	assert_non_null(strstr(f->last_summary, "0 settings"));
	override_gone(f, other);
	assert_int_equal(heard(f, RESIL_SOURCE_BAD_OVERRIDE), 0);
}

static void
test_console_override_method_level_mock(void **state)
{
	fx *f = *state;
	resil_diag diag;
	char *rule;
	unsigned before;

	zk_need_server();
	fx_open(f, "timeout=1000\n");
	provider(f, 1, "");
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_count(f, 1);
	before = summaries(f);
	rule = override(f, "0.0.0.0", "getStock.mock=force%3Areturn+7");
	wait_applied(f, before);
	assert_int_equal(call(f, "getStock"), 'M');
	assert_int_equal(call(f, "getRecommendations"), 'L');
	before = summaries(f);
	override_gone(f, rule);
	wait_applied(f, before);
	assert_int_equal(call(f, "getStock"), 'L');
}

static void
test_console_override_refused_keys_are_named(void **state)
{
	fx *f = *state;
	resil_diag diag;
	char *rule, host[64], *mine;
	unsigned before;

	zk_need_server();
	fx_open(f, "timeout=1000\n");
	provider(f, 1, "");
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_count(f, 1);
	before = summaries(f);
	/* An unknown key, a key a reload refuses (the selector's
	 * balancer is made once), and a good one. */
	rule = override(f, "0.0.0.0",
	    "bogus.key=1&loadbalance=roundrobin&mock=force%3Areturn+null");
	wait_applied(f, before);
	pthread_mutex_lock(&f->mu);
	assert_non_null(strstr(f->bad, "bogus.key=1: refused"));
	assert_non_null(strstr(f->bad, "loadbalance=roundrobin: refused"));
	assert_non_null(strstr(f->bad, "override://0.0.0.0/"));
	pthread_mutex_unlock(&f->mu);
	assert_int_equal(heard(f, RESIL_SOURCE_BAD_OVERRIDE), 2);
	assert_int_equal(call(f, "getStock"), 'M');
	before = summaries(f);
	override_gone(f, rule);
	wait_applied(f, before);

	/* This consumer's own address; enabled=false ignored. */
	resil__local_host(host, sizeof(host));
	before = summaries(f);
	mine = override(f, host, "enabled=false&mock=force%3Areturn+null");
	wait_applied(f, before);
	assert_int_equal(call(f, "getStock"), 'L');
	before = summaries(f);
	override_gone(f, mine);
	wait_applied(f, before);
	before = summaries(f);
	mine = override(f, host, "mock=force%3Areturn+null");
	wait_applied(f, before);
	assert_int_equal(call(f, "getStock"), 'M');
	override_gone(f, mine);
}

/* resil's own keys, under their names: a breaker turned on and off. */
static void
test_console_override_resil_keys(void **state)
{
	fx *f = *state;
	resil_diag diag;
	char *rule;
	unsigned before;

	zk_need_server();
	fx_open(f, "timeout=1000\n");
	provider(f, 1, "");
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_count(f, 1);
	assert_null(resil_pipeline_breaker(f->p, NULL));
	before = summaries(f);
	rule = override(f, "0.0.0.0",
	    "breaker.consecutive_failures=2&breaker.failure_rate=0&"
	    "timeout=2000");
	wait_applied(f, before);
	assert_non_null(strstr(f->last_summary, "3 settings of 1 rule"));
	assert_non_null(resil_pipeline_breaker(f->p, NULL));
	before = summaries(f);
	override_gone(f, rule);
	wait_applied(f, before);
	assert_null(resil_pipeline_breaker(f->p, NULL));
	assert_int_equal(heard(f, RESIL_SOURCE_BAD_OVERRIDE), 0);
}

static void
test_console_override_weight_and_disabled(void **state)
{
	fx *f = *state;
	resil_endpoint_state es;
	resil_diag diag;
	char *w, *d;
	unsigned before;

	zk_need_server();
	fx_open(f, NULL);
	provider(f, 1, "");
	provider(f, 2, "&weight=100");
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_count(f, 2);
	before = heard(f, RESIL_SOURCE_PROVIDERS);
	w = override(f, "10.2.0.1:20880", "weight=300");
	wait_heard(f, RESIL_SOURCE_PROVIDERS, before + 1);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.2.0.1:20880", &es),
	    RESIL_OK);
	assert_int_equal(es.weight, 300);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.2.0.2:20880", &es),
	    RESIL_OK);
	assert_int_equal(es.weight, 100);
	d = override(f, "10.2.0.2:20880", "disabled=true");
	wait_count(f, 1);
	override_gone(f, d);
	wait_count(f, 2);
	before = heard(f, RESIL_SOURCE_PROVIDERS);
	override_gone(f, w);
	wait_heard(f, RESIL_SOURCE_PROVIDERS, before + 1);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.2.0.1:20880", &es),
	    RESIL_OK);
	assert_int_equal(es.weight, 100);
}

static int
no_rule_left(void *ctx)
{
	want *w = ctx;
	int done;

	pthread_mutex_lock(&w->f->mu);
	done = strstr(w->f->last_summary, "0 settings") != NULL;
	pthread_mutex_unlock(&w->f->mu);
	return done;
}

static void
test_console_yaml_service_and_application_rules(void **state)
{
	fx *f = *state;
	resil_endpoint_state es;
	resil_diag diag;
	char yaml[1024];
	unsigned before;

	zk_need_server();
	fx_open(f, "timeout=1000\n");
	provider(f, 1, "");
	provider(f, 2, "");
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	wait_count(f, 2);

	/* Dubbo 3's service rule: the consumer side mocks, a provider's
	 * weight. */
	snprintf(yaml, sizeof(yaml),
	    "configVersion: v3.0\n"
	    "scope: service\n"
	    "key: %s\n"
	    "enabled: true\n"
	    "configs:\n"
	    "  - side: consumer\n"
	    "    addresses: [0.0.0.0]\n"
	    "    parameters:\n"
	    "      getRecommendations.mock: \"force:return null\"\n"
	    "  - side: provider\n"
	    "    addresses: [10.2.0.2:20880]\n"
	    "    parameters:\n"
	    "      weight: 25\n",
	    f->svc);
	before = summaries(f);
	yaml_rule(f->svc, yaml);
	wait_applied(f, before);
	assert_int_equal(call(f, "getRecommendations"), 'M');
	assert_int_equal(call(f, "getStock"), 'L');
	wait_heard(f, RESIL_SOURCE_PROVIDERS, 2);
	assert_int_equal(
	    resil_directory_get_state(f->dir, "10.2.0.2:20880", &es),
	    RESIL_OK);
	assert_int_equal(es.weight, 25);

	/* The application's rule: getStock too; disabled: ignored. */
	before = summaries(f);
	yaml_rule("shop",
	    "configVersion: v3.0\n"
	    "scope: application\n"
	    "key: shop\n"
	    "enabled: false\n"
	    "configs:\n"
	    "  - side: consumer\n"
	    "    parameters:\n"
	    "      mock: \"force:return null\"\n");
	wait_applied(f, before);
	assert_int_equal(call(f, "getStock"), 'L');
	before = summaries(f);
	yaml_rule("shop",
	    "configVersion: v3.0\n"
	    "scope: application\n"
	    "key: shop\n"
	    "enabled: true\n"
	    "configs:\n"
	    "  - side: consumer\n"
	    "    parameters:\n"
	    "      mock: \"force:return null\"\n");
	wait_applied(f, before);
	assert_int_equal(call(f, "getStock"), 'M');

	/* Malformed YAML: said, nothing else changes. */
	before = heard(f, RESIL_SOURCE_BAD_OVERRIDE);
	yaml_rule("shop", "configs: [a, b\n");
	wait_heard(f, RESIL_SOURCE_BAD_OVERRIDE, before + 1);
	pthread_mutex_lock(&f->mu);
	assert_non_null(strstr(f->bad, "YAML: "));
	pthread_mutex_unlock(&f->mu);

	/* Both gone: the file's values. */
	before = summaries(f);
	yaml_gone("shop");
	yaml_gone(f->svc);
	wait_applied(f, before);
	/* The two deletions may come as one summary or two: the last
	 * one has no rule left. */
	{
		want w = { f, 0, NULL, 0 };

		assert_true(zk_wait(no_rule_left, &w, ZK_WAIT_MS));
	}
	assert_int_equal(call(f, "getRecommendations"), 'L');
	assert_int_equal(call(f, "getStock"), 'L');
}

/* ---- 3. check ------------------------------------------------------------
 */

static void
test_console_check_without_providers_fails_as_dubbo(void **state)
{
	fx *f = *state;
	resil_diag diag;
	char want_start[512];

	zk_need_server();
	fx_open(f, NULL);
	diag.msg[0] = '\0';
	assert_int_equal(
	    fx_source(f, zk_srv.hosts, 1, &diag), RESIL_E_NO_PROVIDER);
	assert_null(f->src);
	snprintf(want_start, sizeof(want_start),
	    "Failed to check the status of the service %s. No provider "
	    "available for the service %s from the url zookeeper://%s",
	    f->svc, f->svc, zk_srv.hosts);
	assert_memory_equal(diag.msg, want_start, strlen(want_start));
}

static void
test_console_check_with_providers_waits_for_them(void **state)
{
	fx *f = *state;
	resil_diag diag;

	zk_need_server();
	fx_open(f, NULL);
	provider(f, 1, "");
	provider(f, 2, "");
	assert_int_equal(fx_source(f, zk_srv.hosts, 1, &diag), RESIL_OK);
	/* No wait here: new returned with the list. */
	assert_int_equal(resil_directory_count(f->dir), 2);
}

static void
test_console_check_false_starts_empty(void **state)
{
	fx *f = *state;
	resil_diag diag;

	zk_need_server();
	fx_open(f, NULL);
	assert_int_equal(fx_source(f, zk_srv.hosts, 0, &diag), RESIL_OK);
	assert_int_equal(resil_directory_count(f->dir), 0);
	assert_int_equal(
	    resil_source_check(f->src, 0, &diag), RESIL_E_NO_PROVIDER);
	assert_non_null(strstr(diag.msg, "No provider available"));
}

/* ---- the YAML rules, without a server ----------------------------------- */

static void
free_urls(char **u, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		resil__strfree(resil__allocator(NULL), u[i]);
	if (u != NULL)
		resil__free(resil__allocator(NULL), u, n * sizeof(char *));
}

static void
test_console_yaml_rules_become_dubbo_override_urls(void **state)
{
	char **u = NULL;
	size_t n = 0;
	resil_diag why;

	(void)state;
	/* An application rule: one URL per service, application= its key. */
	assert_int_equal(resil__ov_yaml(resil__allocator(NULL),
	                     "configVersion: v3.0\n"
	                     "scope: application\n"
	                     "key: shop\n"
	                     "configs:\n"
	                     "  - side: consumer\n"
	                     "    services: [a.A, b.B]\n"
	                     "    parameters: {timeout: 3000}\n",
	                     &u, &n, &why),
	    RESIL_OK);
	assert_int_equal(n, 2);
	assert_string_equal(u[0],
	    "override://0.0.0.0/a.A?category=appdynamicconfigurators&"
	    "side=consumer&configVersion=v3.0&enabled=true&timeout=3000&"
	    "application=shop");
	assert_non_null(strstr(u[1], "override://0.0.0.0/b.B?"));
	free_urls(u, n);
	/* A service rule's providerAddresses, a disabled rule. */
	assert_int_equal(resil__ov_yaml(resil__allocator(NULL),
	                     "scope: service\n"
	                     "key: g/a.A:1.0\n"
	                     "enabled: false\n"
	                     "configs:\n"
	                     "  - providerAddresses: [10.0.0.1:1, "
	                     "10.0.0.2:1]\n"
	                     "    parameters: {weight: 5}\n",
	                     &u, &n, &why),
	    RESIL_OK);
	assert_int_equal(n, 1);
	assert_string_equal(u[0],
	    "override://0.0.0.0/a.A?group=g&version=1.0&"
	    "category=dynamicconfigurators&configVersion=v2.7&enabled=false&"
	    "providerAddresses=10.0.0.1%3A1%2C10.0.0.2%3A1&weight=5");
	free_urls(u, n);
	/* Refusals, with the reason. */
	assert_int_equal(resil__ov_yaml(resil__allocator(NULL),
	                     "scope: service\nkey: a.A\nconfigs:\n"
	                     "  - side: consumer\n",
	                     &u, &n, &why),
	    RESIL_E_INVAL);
	assert_non_null(strstr(why.msg, "configs[0]: no parameters"));
	assert_int_equal(
	    resil__ov_yaml(resil__allocator(NULL),
	        "scope: everywhere\nkey: a\nconfigs: []\n", &u, &n, &why),
	    RESIL_E_INVAL);
	assert_string_equal(
	    why.msg, "scope: \"everywhere\" is not service or application");
	assert_int_equal(resil__ov_yaml(resil__allocator(NULL),
	                     "key: [unclosed\n", &u, &n, &why),
	    RESIL_E_INVAL);
	assert_non_null(strstr(why.msg, "YAML: "));
}

/* ---- 5. endpoints' transitions reach the pipeline's listener ----------- */

typedef struct heard_p {
	unsigned breaker_open, ejected;
	char text[256];
} heard_p;

static void
on_pipeline(const resil_pipeline_event *ev, void *ctx)
{
	heard_p *h = ctx;

	if (ev->stage == RESIL_STAGE_BREAKER && ev->breaker != NULL &&
	    strncmp(ev->text, "endpoint ", 9) == 0 &&
	    ev->breaker->to == RESIL_BREAKER_OPEN) {
		h->breaker_open++;
		snprintf(h->text, sizeof(h->text), "%s", ev->text);
	}
	if (ev->stage == RESIL_STAGE_CLUSTER &&
	    strstr(ev->text, " ejected for ") != NULL)
		h->ejected++;
}

static int
failing(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	(void)out;
	return 111;
}

static void
test_console_endpoint_transitions_reach_the_pipeline(void **state)
{
	resil_breaker_config bc = resil_breaker_config_default();
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_pipeline_config pc = resil_pipeline_config_default();
	resil_endpoint_spec spec = resil_endpoint_spec_default("10.3.0.1:1");
	resil_directory *dir;
	resil_selector *sel;
	resil_pipeline *p;
	resil_invocation inv;
	resil_result r;
	heard_p h;
	int i;

	(void)state;
	memset(&h, 0, sizeof(h));
	bc.consecutive_failures = 3;
	bc.failure_rate_pct = 0;
	dc.endpoint_breaker = &bc;
	dc.outlier.consecutive_failures = 5;
	dc.outlier.max_ejection_pct = 100;
	assert_int_equal(resil_directory_new(&dir, &dc, NULL), RESIL_OK);
	sc.service = "S";
	assert_int_equal(resil_selector_new(&sel, dir, &sc, NULL), RESIL_OK);
	pc.service = "S";
	pc.selector = sel;
	pc.listener = on_pipeline;
	pc.listener_ctx = &h;
	pc.cluster.strategy = RESIL_CLUSTER_FAILFAST;
	assert_int_equal(resil_pipeline_new(&p, &pc, NULL), RESIL_OK);
	assert_int_equal(resil_directory_push(dir, &spec, 1, NULL), RESIL_OK);
	for (i = 0; i < 3; i++) {
		resil_invocation_init(&inv, "getStock");
		(void)resil_pipeline_invoke_ex(
		    p, NULL, &inv, failing, NULL, &r);
		resil_result_free(&r);
	}
	assert_int_equal(h.breaker_open, 1);
	assert_string_equal(h.text,
	    "endpoint 10.3.0.1:1 breaker CLOSED -> OPEN "
	    "(consecutive_failures)");
	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(dir);

	/* An ejection (no endpoint breaker): outlier detection after 2. */
	dc = resil_directory_config_default();
	dc.outlier.consecutive_failures = 2;
	dc.outlier.max_ejection_pct = 100;
	assert_int_equal(resil_directory_new(&dir, &dc, NULL), RESIL_OK);
	assert_int_equal(resil_selector_new(&sel, dir, &sc, NULL), RESIL_OK);
	pc.selector = sel;
	assert_int_equal(resil_pipeline_new(&p, &pc, NULL), RESIL_OK);
	assert_int_equal(resil_directory_push(dir, &spec, 1, NULL), RESIL_OK);
	for (i = 0; i < 2; i++) {
		resil_invocation_init(&inv, "getStock");
		(void)resil_pipeline_invoke_ex(
		    p, NULL, &inv, failing, NULL, &r);
		resil_result_free(&r);
	}
	assert_int_equal(h.ejected, 1);
	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
		T(test_console_consumer_registers_as_dubbo_does),
		T(test_console_consumer_registers_again_after_expiry),
		T(test_console_register_false_writes_nothing),
		T(test_console_override_27_mock_and_restore),
		T(test_console_override_method_level_mock),
		T(test_console_override_refused_keys_are_named),
		T(test_console_override_resil_keys),
		T(test_console_override_weight_and_disabled),
		T(test_console_yaml_service_and_application_rules),
		T(test_console_check_without_providers_fails_as_dubbo),
		T(test_console_check_with_providers_waits_for_them),
		T(test_console_check_false_starts_empty),
		T(test_console_endpoint_transitions_reach_the_pipeline),
		T(test_console_yaml_rules_become_dubbo_override_urls),
#undef T
	};

	return cmocka_run_group_tests(
	    tests, zk_group_setup, zk_group_teardown);
}

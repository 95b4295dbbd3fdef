/*
 * "Before the sale": the Dubbo console switches a C consumer's
 * recommendations off and on, and moves its traffic, without a restart.
 *
 *   console_switch HOST:PORT
 *
 * The consumer is what an application writes: one configuration text
 * builds its directory, selector, registry source and pipeline; the source
 * registers the consumer under /dubbo/<service>/consumers (so the console
 * sees it) and hands the console's override rules to the pipeline
 * (resil_source_attach_pipeline). The demo part plays two providers and
 * the console with a ZooKeeper session of its own (support/zk_demo.c),
 * writing exactly what Dubbo's providers and the console write: provider
 * nodes, a 2.7 override:// URL under configurators, a 3.x YAML rule in
 * the config center. Each phase waits (bounded) for the rule to arrive, then
 * makes 100 calls and prints one line:
 *
 *   phase NAME: calls N live L mock M provider-calls P
 *
 * ctest runs it against a ZooKeeper that tests/support/zk_run.c starts.
 */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/selector.h>
#include <resil/source.h>

#include "support/zk_demo.h"

#define SERVICE "com.shop.RecommendationService"
#define P1 "10.0.0.1:20880"
#define P2 "10.0.0.2:20880"

/* ---- the consumer ------------------------------------------------------ */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned overrides_applied; /* summaries of the rule set */

static void
on_event(const resil_source_event *ev, void *ctx)
{
	(void)ctx;
	/* A real program logs these (stderr: the source's thread). */
	fprintf(stderr, "source: %s %s%s%s\n",
	    resil_source_event_name(ev->type), ev->message,
	    ev->node[0] != '\0' ? " rule " : "", ev->node);
	if (ev->type == RESIL_SOURCE_OVERRIDE && ev->node[0] == '\0') {
		pthread_mutex_lock(&mu);
		overrides_applied++;
		pthread_mutex_unlock(&mu);
	}
}

static unsigned provider_calls[2];

/* The remote call: a list of recommendations from the provider picked. */
static int
recommend(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	provider_calls[strcmp(ep->address, P1) == 0 ? 0 : 1]++;
	*out = resil_value_int(2); /* two recommendations */
	return 0;
}

static void
phase(resil_pipeline *p, const char *name)
{
	unsigned live = 0, mock = 0, i, before;
	resil_invocation inv;
	resil_result r;

	before = provider_calls[0] + provider_calls[1];
	for (i = 0; i < 100; i++) {
		resil_invocation_init(&inv, "getRecommendations");
		(void)resil_pipeline_invoke_ex(
		    p, NULL, &inv, recommend, NULL, &r);
		live += r.err == RESIL_OK && r.source == RESIL_SOURCE_LIVE;
		mock += r.err == RESIL_OK && r.source == RESIL_SOURCE_MOCK;
		resil_result_free(&r);
	}
	printf("phase %s: calls 100 live %u mock %u provider-calls %u\n", name,
	    live, mock, provider_calls[0] + provider_calls[1] - before);
}

/* ---- the demo: providers and the console ------------------------------- */

/* A node under /dubbo/SERVICE/CAT named URL.encode(url) (support/zk_demo.c).
 */
static void
node(zhandle_t *zh, const char *cat, const char *url, int create)
{
	demo_node("console_switch", zh, SERVICE, cat, url, create);
}

/* Wait (at most 30 s) for the next rule set applied after n. */
static void
wait_applied(unsigned n)
{
	int i;

	for (i = 0; i < 15000; i++) {
		unsigned now;

		pthread_mutex_lock(&mu);
		now = overrides_applied;
		pthread_mutex_unlock(&mu);
		if (now > n)
			return;
		(void)poll(NULL, 0, 2);
	}
	fprintf(stderr, "console_switch: no rule applied\n");
	exit(1);
}

static unsigned
applied(void)
{
	unsigned n;

	pthread_mutex_lock(&mu);
	n = overrides_applied;
	pthread_mutex_unlock(&mu);
	return n;
}

/* Wait until P2's weight in the directory is w. */
static void
wait_weight(resil_directory *dir, int32_t w)
{
	resil_endpoint_state es;
	int i;

	for (i = 0; i < 15000; i++) {
		if (resil_directory_get_state(dir, P2, &es) == RESIL_OK &&
		    es.weight == w)
			return;
		(void)poll(NULL, 0, 2);
	}
	fprintf(stderr, "console_switch: weight %d did not arrive\n", w);
	exit(1);
}

static const char yaml_rule[] =
    "configVersion: v3.0\n"
    "scope: service\n"
    "key: " SERVICE "\n"
    "enabled: true\n"
    "configs:\n"
    "  - side: consumer\n"
    "    addresses: [0.0.0.0]\n"
    "    applications: [shop-web]\n"
    "    parameters:\n"
    "      getRecommendations.mock: \"force:return null\"\n";

int
main(int argc, char **argv)
{
	const char *hosts = argc > 1 ? argv[1] : "127.0.0.1:2181";
	char text[1024], sale[512], weight[512];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_config *conf = NULL;
	resil_directory *dir = NULL;
	resil_selector *sel = NULL;
	resil_registry_source *src = NULL;
	resil_pipeline *p = NULL;
	resil_diag diag;
	zhandle_t *zh;
	unsigned n;

	zoo_set_debug_level((ZooLogLevel)0);
	zh = demo_session("console_switch", hosts);
	demo_mkdirs("console_switch", zh, "/dubbo/" SERVICE "/providers");
	demo_mkdirs("console_switch", zh, "/dubbo/" SERVICE "/configurators");
	demo_mkdirs("console_switch", zh, "/dubbo/config/dubbo");
	node(zh, "providers",
	    "dubbo://" P1 "/" SERVICE "?application=recommend&"
	    "interface=" SERVICE "&methods=getRecommendations&side=provider&"
	    "weight=100",
	    1);
	node(zh, "providers",
	    "dubbo://" P2 "/" SERVICE "?application=recommend&"
	    "interface=" SERVICE "&methods=getRecommendations&side=provider&"
	    "weight=100",
	    1);

	/* The consumer: one text, Dubbo's keys. check=true waits for the
	 * providers before the first call. */
	snprintf(text, sizeof(text),
	    "service=" SERVICE "\n"
	    "application=shop-web\n"
	    "registry=zookeeper://%s\n"
	    "check=true\n"
	    "timeout=500\n"
	    "getRecommendations.timeout=500\n"
	    "loadbalance=random\n",
	    hosts);
	if (resil_config_parse_string(
	        &conf, text, "shop-web.conf", NULL, &diag) != RESIL_OK)
		goto fail;
	resil_directory_config_init(&dc);
	resil_config_directory(conf, &dc);
	resil_config_selector(conf, &sc);
	if (resil_directory_new(&dir, &dc, &diag) != RESIL_OK ||
	    resil_selector_new(&sel, dir, &sc, &diag) != RESIL_OK)
		goto fail;
	{
		resil_source_config rc = resil_source_config_default();

		resil_config_source_config(conf, &rc);
		rc.directory = dir;
		rc.selector = sel;
		rc.listener = on_event;
		rc.methods = "getRecommendations";
		if (resil_source_new(&src, &rc, &diag) != RESIL_OK)
			goto fail;
	}
	pc = *resil_config_pipeline(conf);
	pc.selector = sel;
	if (resil_pipeline_new(&p, &pc, &diag) != RESIL_OK ||
	    resil_source_attach_pipeline(src, p, conf, &diag) != RESIL_OK)
		goto fail;

	phase(p, "live");

	/* The console: "mock=force:return null" for the sale. */
	snprintf(sale, sizeof(sale),
	    "override://0.0.0.0/" SERVICE "?category=configurators&"
	    "dynamic=false&enabled=true&application=shop-web&"
	    "mock=force%%3Areturn+null");
	n = applied();
	node(zh, "configurators", sale, 1);
	wait_applied(n);
	phase(p, "sale");

	n = applied();
	node(zh, "configurators", sale, 0);
	wait_applied(n);
	phase(p, "after-sale");

	/* The console moves traffic: P2's weight 100 -> 300. */
	snprintf(weight, sizeof(weight),
	    "override://" P2 "/" SERVICE "?category=configurators&"
	    "dynamic=false&enabled=true&weight=300");
	provider_calls[0] = provider_calls[1] = 0;
	node(zh, "configurators", weight, 1);
	wait_weight(dir, 300);
	phase(p, "weight");
	printf("weight: %s %u calls, %s %u calls\n", P1, provider_calls[0], P2,
	    provider_calls[1]);
	node(zh, "configurators", weight, 0);
	wait_weight(dir, 100);

	/* Dubbo 3's console: the same switch as a YAML rule. */
	n = applied();
	if (zoo_create(zh, "/dubbo/config/dubbo/" SERVICE ".configurators",
	        yaml_rule, (int)strlen(yaml_rule), &ZOO_OPEN_ACL_UNSAFE, 0,
	        NULL, 0) != ZOK)
		goto fail;
	wait_applied(n);
	phase(p, "yaml");
	n = applied();
	(void)zoo_delete(
	    zh, "/dubbo/config/dubbo/" SERVICE ".configurators", -1);
	wait_applied(n);
	phase(p, "yaml-removed");

	resil_source_free(src);
	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(dir);
	resil_config_free(conf);
	zookeeper_close(zh);
	return 0;
fail:
	fprintf(stderr, "console_switch: %s\n", diag.msg);
	return 1;
}

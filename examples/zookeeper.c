/*
 * A C consumer of a Dubbo service whose providers are in ZooKeeper.
 *
 *   zookeeper HOST:PORT [CACHE_FILE]
 *
 * The consumer part is what an application writes: a directory, a
 * selector over it, and a registry source (resil/source.h) that
 * subscribes to /dubbo/<service>/providers and keeps the directory
 * up to date. The demo part plays two Dubbo providers with a ZooKeeper
 * session of its own (support/zk_demo.c: ephemeral nodes named
 * URL.encode(provider URL), as Dubbo's ZookeeperRegistry writes them), so
 * the program runs against any empty ZooKeeper: ctest runs it against a server
 * it starts (tests/support/zk_run.c). Each step waits (bounded) for the
 * directory to show the change, so the output is the same on every run.
 */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zookeeper/zookeeper.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/selector.h>
#include <resil/source.h>

#include "support/zk_demo.h"

#define SERVICE "org.apache.dubbo.demo.DemoService"
#define PROVIDERS "/dubbo/" SERVICE "/providers"

/* ---- the consumer ------------------------------------------------------ */

static void
on_event(const resil_source_event *ev, void *ctx)
{
	/* A real program logs these (stderr here: the order of the
	 * source's thread and the main thread is not fixed). */
	(void)ctx;
	fprintf(stderr, "source: %s %s%s%s\n",
	    resil_source_event_name(ev->type), ev->message,
	    ev->node[0] != '\0' ? " node " : "", ev->node);
}

/* 300 calls; how many went to each provider. */
static void
calls(resil_selector *sel)
{
	resil_candidates *c;
	resil_request req;
	char names[4][32];
	unsigned counts[4] = { 0, 0, 0, 0 }, n = 0, i, k;

	memset(&req, 0, sizeof(req));
	req.method = "sayHello";
	if (resil_candidates_new(&c, sel) != RESIL_OK)
		exit(1);
	for (i = 0; i < 300; i++) {
		resil_pick p;
		resil_diag diag;

		if (resil_selector_route(sel, &req, c, &diag) != RESIL_OK ||
		    resil_selector_pick(sel, c, &req, NULL, 0, &p, &diag) !=
		        RESIL_OK) {
			printf("call %u: %s\n", i, diag.msg);
			exit(1);
		}
		/* ... the call to p.address goes here ... */
		for (k = 0; k < n && strcmp(names[k], p.address) != 0; k++)
			;
		if (k == n && n < 4)
			snprintf(
			    names[n++], sizeof(names[0]), "%s", p.address);
		if (k < 4)
			counts[k]++;
		(void)resil_selector_report(sel, &p, RESIL_OUTCOME_SUCCESS);
	}
	resil_candidates_free(c);
	printf("300 calls:");
	for (k = 0; k < n; k++)
		printf(" %s %u", names[k], counts[k]);
	printf("\n");
}

/* ---- the demo providers ------------------------------------------------- */

/* A provider's node, ephemeral, named URL.encode(url)
 * (support/zk_demo.c). */
static void
provide(zhandle_t *zh, const char *url)
{
	demo_node("zookeeper", zh, SERVICE, "providers", url, 1);
}

static void
withdraw(zhandle_t *zh, const char *url)
{
	demo_node("zookeeper", zh, SERVICE, "providers", url, 0);
}

/* Wait (at most 30 s) until the directory has n endpoints and the
 * source has pushed more than pushes lists. */
static void
wait_for(resil_directory *dir, resil_registry_source *src, size_t n,
    uint64_t pushes)
{
	resil_source_stats st;
	int i;

	for (i = 0; i < 15000; i++) {
		resil_source_get_stats(src, &st);
		if (resil_directory_count(dir) == n && st.pushes > pushes)
			return;
		(void)poll(NULL, 0, 2);
	}
	fprintf(stderr, "zookeeper: the directory did not reach %zu\n", n);
	exit(1);
}

static uint64_t
pushes(resil_registry_source *src)
{
	resil_source_stats st;

	resil_source_get_stats(src, &st);
	return st.pushes;
}

static const char p1[] =
    "dubbo://10.0.0.1:20880/" SERVICE "?application=demo-provider&dubbo=2.0.2&"
    "interface=" SERVICE "&methods=sayHello&side=provider";
static const char p2[] =
    "dubbo://10.0.0.2:20880/" SERVICE "?application=demo-provider&dubbo=2.0.2&"
    "interface=" SERVICE "&methods=sayHello&side=provider&"
    "weight=200";

int
main(int argc, char **argv)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_source_config rc = resil_source_config_default();
	resil_directory *dir;
	resil_selector *sel;
	resil_registry_source *src;
	resil_rng rng;
	resil_random rnd;
	resil_source_stats st;
	char registry[256];
	resil_diag diag;
	zhandle_t *demo;
	uint64_t n;

	if (argc < 2) {
		fprintf(stderr, "usage: zookeeper HOST:PORT [CACHE_FILE]\n");
		return 2;
	}
	snprintf(registry, sizeof(registry), "zookeeper://%s", argv[1]);
	/* The ZooKeeper client's own log level is the process's: this
	 * program has two handles (the consumer's and the demo providers'),
	 * and the client formats log lines in one static buffer, so two
	 * handles logging at once race on it. resil drops the lines anyway. */
	zoo_set_debug_level((ZooLogLevel)0);

	/* The consumer: directory, selector, source. In a configuration
	 * text the source's part reads
	 *   registry=zookeeper://127.0.0.1:2181
	 *   registry.service=org.apache.dubbo.demo.DemoService
	 *   registry.file=/var/cache/app/demo.cache */
	if (resil_directory_new(&dir, &dc, &diag) != RESIL_OK)
		return 1;
	resil_rng_seed(&rng, 27);
	rnd = resil_rng_hook(&rng);
	sc.service = SERVICE;
	sc.random = &rnd;
	if (resil_selector_new(&sel, dir, &sc, &diag) != RESIL_OK)
		return 1;
	rc.registry = registry;
	rc.service = SERVICE;
	rc.file = argc > 2 ? argv[2] : NULL;
	rc.directory = dir;
	rc.selector = sel;
	rc.listener = on_event;
	if (resil_source_new(&src, &rc, &diag) != RESIL_OK) {
		fprintf(stderr, "zookeeper: %s\n", diag.msg);
		return 1;
	}

	/* Two providers start. */
	demo = demo_session("zookeeper", argv[1]);
	/* Dubbo's provider creates the persistent path, then its node. */
	demo_mkdirs("zookeeper", demo, PROVIDERS);
	n = pushes(src);
	provide(demo, p1);
	provide(demo, p2);
	wait_for(dir, src, 2, n);
	printf("2 providers in ZooKeeper: 10.0.0.1:20880 weight 100, "
	       "10.0.0.2:20880 weight 200\n");
	calls(sel);

	/* One leaves (its node is deleted). */
	n = pushes(src);
	withdraw(demo, p1);
	wait_for(dir, src, 1, n);
	printf(
	    "10.0.0.1:20880 left: %zu provider\n", resil_directory_count(dir));
	calls(sel);

	/* The provider process dies: its session ends, the registry lists
	 * nobody. Empty protection keeps the last list. */
	n = pushes(src);
	zookeeper_close(demo);
	wait_for(dir, src, 1, n);
	resil_source_get_stats(src, &st);
	printf("the registry lists no provider: %zu kept (empty protection, "
	       "%lu EMPTY_KEPT)\n",
	    resil_directory_count(dir), (unsigned long)st.empty_kept);
	calls(sel);

	resil_source_free(src);
	resil_selector_free(sel);
	resil_directory_free(dir);
	return 0;
}

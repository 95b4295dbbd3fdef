/*
 * registry/zookeeper_update/1000: what the registry source does when a
 * ZooKeeper child watch fires for a service of 1000 providers and one of
 * them changed: from the children list received (1000 URL-encoded Dubbo
 * provider URLs, ~200 bytes each, as ZooKeeper returns them) to the
 * directory updated: the list copied, each name looked up in the parse
 * cache, the one new URL decoded, parsed and mapped, one provider per
 * address, the order, and one whole-list resil_directory_push(). Lists
 * alternate between two that differ in one provider, so every iteration
 * is "one provider among 1000 changed". The ZooKeeper round trip (the
 * getChildren after the watch) is not in it: tests/test_source_zookeeper
 * prints that end to end against a real server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/source.h>

#include "bench.h"
#include "source_internal.h"

#define N 1000
#define SVC "org.apache.dubbo.demo.DemoService"

typedef struct sctx {
	resil_manual_clock mc, wall;
	resil_directory *dir;
	resil_registry_source *src;
	char *names[N + 1];
	const char *list[2][N];
	unsigned flip; /* atomic */
} sctx;

static char *
encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = malloc(3 * strlen(s) + 1), *p = o;

	if (o == NULL)
		abort();
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == '*' || c == '_')
			*p++ = (char)c;
		else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return o;
}

static void *
setup_update(void)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_source_config sc = resil_source_config_default();
	sctx *x = calloc(1, sizeof(*x));
	size_t i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, UINT64_C(1) << 50);
	resil_manual_clock_init(
	    &x->wall, UINT64_C(1630745698310) * RESIL_NS_PER_MS);
	dc.clock = resil_manual_clock_hook(&x->mc);
	if (resil_directory_new(&x->dir, &dc, NULL) != RESIL_OK)
		abort();
	sc.registry = "zookeeper://127.0.0.1:2181";
	sc.service = SVC;
	sc.directory = x->dir;
	sc.clock = resil_manual_clock_hook(&x->mc);
	sc.wall_clock = resil_manual_clock_hook(&x->wall);
	if (resil__source_new_detached(&x->src, &sc, NULL) != RESIL_OK)
		abort();
	for (i = 0; i <= N; i++) {
		char url[512];

		snprintf(url, sizeof(url),
		    "dubbo://10.%zu.%zu.%zu:20880/" SVC "?anyhost=true&"
		    "application=demo-provider&dubbo=2.0.2&interface=" SVC
		    "&methods=sayHello,sayHelloAsync&pid=%zu&side=provider&"
		    "timestamp=1630745000000&weight=%zu",
		    i >> 16, (i >> 8) & 255, i & 255, 1000 + i, 50 + i % 100);
		x->names[i] = encode(url);
	}
	/* List 0: providers 0..999; list 1: 1..1000 (0 left, 1000 came). */
	for (i = 0; i < N; i++) {
		x->list[0][i] = x->names[i];
		x->list[1][i] = x->names[i + 1];
	}
	resil__source_apply(x->src, RESIL__CAT_PROVIDERS, x->list[0], N, 0);
	if (resil_directory_count(x->dir) != N)
		abort();
	return x;
}

static uint64_t
run_update(void *ctx, uint64_t iters)
{
	sctx *x = ctx;
	uint64_t i, sum = 0;

	for (i = 0; i < iters; i++) {
		unsigned f = __atomic_add_fetch(&x->flip, 1, __ATOMIC_RELAXED);

		resil__source_apply(
		    x->src, RESIL__CAT_PROVIDERS, x->list[f & 1], N, 0);
		sum += resil_directory_version(x->dir);
	}
	return sum;
}

static void
teardown_update(void *ctx)
{
	sctx *x = ctx;
	size_t i;

	resil_source_free(x->src);
	resil_directory_free(x->dir);
	for (i = 0; i <= N; i++)
		free(x->names[i]);
	free(x);
}

const resil_bench resil_bench_source[] = {
	{ "registry/zookeeper_update/1000", setup_update, run_update,
	    teardown_update },
	{ NULL, NULL, NULL, NULL },
};

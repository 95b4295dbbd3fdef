/*
 * The registry source without a registry: how a Dubbo provider URL maps
 * onto an endpoint (a test per field, from real provider URLs), which
 * providers are candidates, bad input and its events, empty protection,
 * the cache file (Dubbo's format; a consumer starting while the registry
 * is down), the registry's condition rules, the text keys, and allocation
 * failure. Lists are applied through the source's internal entry point,
 * exactly as its thread applies a list the registry delivered; the tests
 * against a real ZooKeeper are in test_source_zookeeper.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/selector.h>
#include <resil/source.h>
#include <resil/value.h>

#include "source_internal.h"
#include "support/fail_alloc.h"

#define SVC "org.apache.dubbo.demo.DemoService"

/* Real provider URLs (Dubbo 2.7's demo provider, a Dubbo 2.5 provider
 * as ZooKeeper lists it, a 2.0.0 provider with loadbalance). */
#define URL_DEMO                                                              \
	"dubbo://192.168.0.114:20880/org.apache.dubbo.demo.DemoService?"      \
	"anyhost=true&application=dubbo-demo-api-provider&bind.ip=192.168.0." \
	"114&bind.port=20880&default=true&deprecated=false&dubbo=2.0.2&"      \
	"dynamic=true&generic=false&interface=org.apache.dubbo.demo."         \
	"DemoService&methods=sayHello,sayHelloAsync&pid=16459&release=&"      \
	"side=provider&timestamp=1630745698310"
#define TS_DEMO INT64_C(1630745698310)

/* As ZooKeeper has it: a child of /dubbo/com.hcw.api.QSearchService/
 * providers, URL.encode()d. */
#define NODE_QSEARCH                                                          \
	"dubbo%3A%2F%2F192.168.61.99%3A20891%2Fcom.hcw.api.QSearchService%3F" \
	"anyhost%3Dtrue%26application%3Desh-provider%26dubbo%3D2.5.3%26"      \
	"interface%3Dcom.hcw.api.QSearchService%26logger%3Dslf4j%26methods%"  \
	"3D"                                                                  \
	"findStockDoc%26pid%3D18460%26revision%3D0.0.2-SNAPSHOT%26side%3D"    \
	"provider%26threads%3D100%26timestamp%3D1572509354829"

/* What the listener heard: counts, and the last of each type. */
typedef struct heard {
	unsigned n[16];
	char node[16][512];
	char msg[16][RESIL_DIAG_MAX];
	size_t count[16];
} heard;

static void
on_event(const resil_source_event *ev, void *ctx)
{
	heard *h = ctx;

	if ((unsigned)ev->type >= 16)
		return;
	h->n[ev->type]++;
	snprintf(h->node[ev->type], sizeof(h->node[0]), "%s", ev->node);
	snprintf(h->msg[ev->type], sizeof(h->msg[0]), "%s", ev->message);
	h->count[ev->type] = ev->count;
}

typedef struct fx {
	resil_manual_clock mc;   /* the directory's clock */
	resil_manual_clock wall; /* ns since 1970 */
	resil_directory *dir;
	resil_registry_source *src;
	heard h;
} fx;

#define NOW0 (UINT64_C(1000000) * RESIL_NS_PER_SEC)

static void
fx_open(fx *f, const char *service, const char *group, const char *file,
    int protect, const resil_allocator *a)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_source_config sc = resil_source_config_default();
	resil_diag diag;

	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, NOW0);
	/* 30 s after the demo provider started. */
	resil_manual_clock_init(
	    &f->wall, (uint64_t)(TS_DEMO + 30000) * RESIL_NS_PER_MS);
	dc.clock = resil_manual_clock_hook(&f->mc);
	dc.empty_protection = protect;
	dc.alloc = a;
	assert_int_equal(resil_directory_new(&f->dir, &dc, &diag), RESIL_OK);
	sc.registry = "zookeeper://127.0.0.1:2181";
	sc.service = service;
	sc.group = group;
	sc.file = file;
	sc.file_interval_ns = 0;
	sc.directory = f->dir;
	sc.listener = on_event;
	sc.listener_ctx = &f->h;
	sc.clock = resil_manual_clock_hook(&f->mc);
	sc.wall_clock = resil_manual_clock_hook(&f->wall);
	sc.alloc = a;
	assert_int_equal(
	    resil__source_new_detached(&f->src, &sc, &diag), RESIL_OK);
}

static void
fx_close(fx *f)
{
	resil_source_free(f->src);
	resil_directory_free(f->dir);
}

/* Apply decoded URLs as the providers list. */
static void
providers(fx *f, const char *const *urls, size_t n)
{
	resil__source_apply(f->src, RESIL__CAT_PROVIDERS, urls, n, 1);
}

static void
one(fx *f, const char *url)
{
	providers(f, &url, 1);
}

/* The candidates for req when rule (NULL: none) is the one condition;
 * fills out[0..] up to max; returns the count (0 for no provider). */
static size_t
route(
    fx *f, const char *rule, const char *tag, resil_candidate *out, size_t max)
{
	resil_selector_config sc = resil_selector_config_default();
	resil_condition *c = NULL;
	resil_selector *sel;
	resil_candidates *cs;
	resil_request req;
	resil_diag diag;
	size_t n = 0, i;

	memset(&req, 0, sizeof(req));
	req.tag = tag;
	if (rule != NULL) {
		assert_int_equal(
		    resil_condition_parse(&c, rule, 1, NULL, &diag), RESIL_OK);
		sc.conditions = &c;
		sc.nconditions = 1;
	}
	assert_int_equal(
	    resil_selector_new(&sel, f->dir, &sc, &diag), RESIL_OK);
	assert_int_equal(resil_candidates_new(&cs, sel), RESIL_OK);
	if (resil_selector_route(sel, &req, cs, &diag) == RESIL_OK) {
		n = resil_candidates_count(cs);
		for (i = 0; i < n && i < max; i++) {
			assert_int_equal(
			    resil_candidates_get(cs, i, &out[i]), RESIL_OK);
			/* Valid until the set is routed again: keep what
			 * the asserts need past the free. */
		}
	}
	resil_candidates_free(cs);
	resil_selector_free(sel);
	resil_condition_free(c);
	return n;
}

static size_t
route_n(fx *f, const char *rule)
{
	resil_candidate c[4];

	return route(f, rule, NULL, c, 0);
}

static int32_t
weight_of(fx *f, const char *address)
{
	resil_endpoint_state st;

	assert_int_equal(
	    resil_directory_get_state(f->dir, address, &st), RESIL_OK);
	return st.weight;
}

/* ---- a test per field -----------------------------------------------------
 */

static void
test_source_address_and_dubbo_defaults(void **state)
{
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	one(&f, URL_DEMO);
	assert_int_equal(resil_directory_count(f.dir), 1);
	/* Dubbo's weight default. */
	assert_int_equal(weight_of(&f, "192.168.0.114:20880"), 100);
	assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], 1);
	assert_int_equal(f.h.count[RESIL_SOURCE_PROVIDERS], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_FIELD], 0);
	fx_close(&f);
}

static void
test_source_node_name_is_url_decoded(void **state)
{
	fx f;
	const char *node = NODE_QSEARCH;

	(void)state;
	fx_open(&f, "com.hcw.api.QSearchService", NULL, NULL, 1, NULL);
	/* As delivered by ZooKeeper: encoded, decoded = 0. */
	resil__source_apply(f.src, RESIL__CAT_PROVIDERS, &node, 1, 0);
	assert_int_equal(resil_directory_count(f.dir), 1);
	assert_int_equal(weight_of(&f, "192.168.61.99:20891"), 100);
	/* Its parameters are there for condition rules, decoded. */
	assert_int_equal(route_n(&f, "=> application = esh-provider"), 1);
	assert_int_equal(route_n(&f, "=> revision = 0.0.2-SNAPSHOT"), 1);
	assert_int_equal(route_n(&f, "=> threads = 100"), 1);
	fx_close(&f);
}

static void
test_source_params_for_conditions(void **state)
{
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	one(&f, URL_DEMO);
	assert_int_equal(
	    route_n(&f, "=> application = dubbo-demo-api-provider"), 1);
	assert_int_equal(route_n(&f, "=> side = provider"), 1);
	assert_int_equal(route_n(&f, "=> dubbo = 2.0.2"), 1);
	/* The URL's protocol and path are keys too (Dubbo's URL.toMap). */
	assert_int_equal(route_n(&f, "=> protocol = dubbo"), 1);
	assert_int_equal(route_n(&f, "=> path = " SVC), 1);
	assert_int_equal(route_n(&f, "=> host = 192.168.0.114"), 1);
	assert_int_equal(route_n(&f, "=> port = 20880"), 1);
	/* An empty value is a value. */
	assert_int_equal(route_n(&f, "=> application = other"), 0);
	fx_close(&f);
}

static void
test_source_weight(void **state)
{
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	one(&f, "dubbo://10.20.153.10:20880/" SVC "?weight=200");
	assert_int_equal(weight_of(&f, "10.20.153.10:20880"), 200);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_FIELD], 0);
	one(&f, "dubbo://10.20.153.10:20880/" SVC "?weight=0");
	assert_int_equal(weight_of(&f, "10.20.153.10:20880"), 0);
	fx_close(&f);
}

static void
test_source_absurd_weights_are_repaired(void **state)
{
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	/* Dubbo's Math.max(weight, 0). */
	one(&f, "dubbo://10.0.0.1:20880/" SVC "?weight=-5");
	assert_int_equal(weight_of(&f, "10.0.0.1:20880"), 0);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_FIELD], 1);
	assert_string_equal(
	    f.h.msg[RESIL_SOURCE_BAD_FIELD], "weight -5 is negative; 0 used");
	assert_string_equal(f.h.node[RESIL_SOURCE_BAD_FIELD],
	    "dubbo://10.0.0.1:20880/" SVC "?weight=-5");
	one(&f, "dubbo://10.0.0.1:20880/" SVC "?weight=abc");
	assert_int_equal(weight_of(&f, "10.0.0.1:20880"), 100);
	assert_string_equal(f.h.msg[RESIL_SOURCE_BAD_FIELD],
	    "weight \"abc\" is not an integer; 100 used");
	one(&f,
	    "dubbo://10.0.0.1:20880/" SVC "?weight=99999999999999999999999");
	assert_int_equal(weight_of(&f, "10.0.0.1:20880"), INT32_MAX);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_FIELD], 3);
	assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], 3);
	fx_close(&f);
}

static void
test_source_timestamp_and_warmup(void **state)
{
	resil_candidate c[1];
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	/* 30 s into a 60 s warm-up: half the weight. */
	one(&f,
	    "dubbo://10.0.0.1:20880/" SVC
	    "?timestamp=1630745698310&warmup=60000&weight=100");
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 50);
	/* The directory's clock moves on: 45 s of 60. */
	resil_manual_clock_advance(&f.mc, 15 * RESIL_NS_PER_SEC);
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 75);
	resil_manual_clock_advance(&f.mc, 15 * RESIL_NS_PER_SEC);
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 100);
	fx_close(&f);
}

static void
test_source_default_warmup_is_dubbos_ten_minutes(void **state)
{
	resil_candidate c[1];
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	/* timestamp alone: 30 s of 600 s, 100 * 30 / 600 = 5. */
	one(&f, URL_DEMO);
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 5);
	fx_close(&f);

	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	/* 11 minutes up: past the warm-up, full weight. */
	resil_manual_clock_set(
	    &f.wall, (uint64_t)(TS_DEMO + 11 * 60000) * RESIL_NS_PER_MS);
	one(&f, URL_DEMO);
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 100);
	fx_close(&f);

	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	/* A timestamp in the future (the provider's clock ahead): it has
	 * just started, weight 1, and warms up from now. */
	resil_manual_clock_set(
	    &f.wall, (uint64_t)(TS_DEMO - 5000) * RESIL_NS_PER_MS);
	one(&f, URL_DEMO);
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 1);
	resil_manual_clock_advance(&f.mc, 60 * RESIL_NS_PER_SEC);
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 10);
	fx_close(&f);
}

static void
test_source_bad_timestamp_means_no_warmup(void **state)
{
	resil_candidate c[1];
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	one(&f, "dubbo://10.0.0.1:20880/" SVC "?timestamp=yesterday");
	assert_int_equal(route(&f, NULL, NULL, c, 1), 1);
	assert_int_equal(c[0].weight, 100);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_FIELD], 1);
	assert_string_equal(f.h.msg[RESIL_SOURCE_BAD_FIELD],
	    "timestamp \"yesterday\" is not milliseconds since 1970; no "
	    "warm-up");
	fx_close(&f);
}

static void
test_source_tag(void **state)
{
	const char *urls[] = {
		"dubbo://10.20.3.1:20880/" SVC "?dubbo.tag=red",
		"dubbo://10.20.3.2:20880/" SVC "?dubbo.tag=gray",
		"dubbo://10.20.3.3:20880/" SVC,
	};
	resil_candidate c[3];
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 3);
	assert_int_equal(route(&f, NULL, "gray", c, 3), 1);
	assert_string_equal(c[0].address, "10.20.3.2:20880");
	/* The tag is the endpoint's, not a param. */
	assert_int_equal(route_n(&f, "=> dubbo.tag = gray"), 0);
	/* An untagged request: the untagged provider only. */
	assert_int_equal(route(&f, NULL, NULL, c, 3), 1);
	assert_string_equal(c[0].address, "10.20.3.3:20880");
	fx_close(&f);
}

static void
test_source_zone(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC "?zone=hz",
		"dubbo://10.0.0.2:20880/" SVC "?zone=sh",
		"dubbo://10.0.0.3:20880/" SVC "?zone=b%20d",
	};
	resil_candidate c[3];
	fx f;
	size_t n, i, hz = 0;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 3);
	n = route(&f, NULL, NULL, c, 3);
	assert_int_equal(n, 3);
	for (i = 0; i < n; i++)
		if (c[i].zone != NULL && strcmp(c[i].zone, "hz") == 0)
			hz++;
	assert_int_equal(hz, 1);
	assert_int_equal(route_n(&f, "=> zone = sh"), 1);
	/* "b%20d" is not a zone name: none (repaired). */
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_FIELD], 1);
	fx_close(&f);
}

static void
test_source_disabled_providers_are_not_candidates(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC "?enabled=false",
		"dubbo://10.0.0.2:20880/" SVC "?disabled=true",
		/* disabled, when present, decides over enabled. */
		"dubbo://10.0.0.3:20880/" SVC "?disabled=false&enabled=false",
		/* Boolean.parseBoolean: anything but "true" is false. */
		"dubbo://10.0.0.4:20880/" SVC "?enabled=yes",
		"dubbo://10.0.0.5:20880/" SVC "?enabled=TRUE",
	};
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 5);
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(weight_of(&f, "10.0.0.3:20880"), 100);
	assert_int_equal(weight_of(&f, "10.0.0.5:20880"), 100);
	assert_int_equal(f.h.n[RESIL_SOURCE_SKIPPED], 3);
	fx_close(&f);
}

static void
test_source_group_and_version_match_as_dubbo(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC "?group=a&version=1.0.0",
		"dubbo://10.0.0.2:20880/" SVC "?group=b&version=1.0.0",
		"dubbo://10.0.0.3:20880/" SVC "?version=1.0.0",
		"dubbo://10.0.0.4:20880/" SVC,
	};
	resil_source_config sc;
	fx f;

	(void)state;
	/* No group, no version: the plain provider only. */
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 4);
	assert_int_equal(resil_directory_count(f.dir), 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_SKIPPED], 3);
	fx_close(&f);
	/* group a,b (a list), any version. */
	fx_open(&f, SVC, "a,b", NULL, 1, NULL);
	resil_source_free(f.src);
	sc = resil_source_config_default();
	sc.registry = "zookeeper://127.0.0.1:2181";
	sc.service = SVC;
	sc.group = "a,b";
	sc.version = "*";
	sc.directory = f.dir;
	assert_int_equal(
	    resil__source_new_detached(&f.src, &sc, NULL), RESIL_OK);
	providers(&f, urls, 4);
	assert_int_equal(resil_directory_count(f.dir), 2);
	fx_close(&f);
}

static void
test_source_protocols_and_mock_providers(void **state)
{
	const char *urls[] = {
		"tri://10.0.0.1:50051/" SVC,
		"empty://0.0.0.0/" SVC "?category=providers",
		"mock://10.0.0.9:1/" SVC "?mock=return null",
		"thrift2://10.0.0.3:9090/" SVC,
	};
	char spec[64];
	resil_selector_config scfg = resil_selector_config_default();
	resil_selector *sel;
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 4);
	/* tri and the mock endpoint; empty:// is Dubbo's placeholder. */
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(route_n(&f, NULL), 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_SKIPPED], 1);
	assert_int_equal(
	    resil_selector_new(&sel, f.dir, &scfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_selector_mock_spec(sel, "m", spec, sizeof(spec)), 1);
	assert_string_equal(spec, "return null");
	resil_selector_free(sel);
	fx_close(&f);
}

static void
test_source_malformed_urls_give_events(void **state)
{
	static const struct {
		const char *url;
		const char *msg;
	} bad[] = {
		{ "10.0.0.1:20880", "no protocol (no ://)" },
		{ "dubbo://10.0.0.1/" SVC, "no port" },
		{ "dubbo://10.0.0.1:0/" SVC, "port \"0\" is not 1..65535" },
		{ "dubbo://10.0.0.1:70000/" SVC,
		    "port \"70000\" is not 1..65535" },
		{ "dubbo://:20880/" SVC, "no host" },
		{ "dubbo://10.0 .0.1:20880/" SVC,
		    "host \"10.0 .0.1\" has a character that is not in a "
		    "host name" },
		{ "3ubbo://10.0.0.1:20880/" SVC,
		    "protocol \"3ubbo\" is not a URL scheme" },
		{ "dubbo://[::1:20880/" SVC,
		    "host \"[::1:20880\" is not a bracketed IPv6 address" },
		{ "foo://10.0.0.1:20880/" SVC,
		    "protocol \"foo\" is not one of dubbo,tri,grpc,rest,"
		    "http,https,hessian,rmi,thrift,webservice,redis,"
		    "memcached" },
	};
	size_t i;
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *urls[2];

		urls[0] = "dubbo://10.0.0.7:20880/" SVC;
		urls[1] = bad[i].url;
		providers(&f, urls, 2);
		/* The good one is pushed; the bad one is said. */
		assert_int_equal(resil_directory_count(f.dir), 1);
		assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], i + 1);
		assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], i + 1);
		assert_string_equal(
		    f.h.msg[RESIL_SOURCE_PROVIDERS], "1 providers of " SVC);
	}
	fx_close(&f);
}

static void
test_source_malformed_escapes_in_node_names(void **state)
{
	const char *nodes[] = {
		"dubbo%3A%2F%2F10.0.0.1%3A20880%2F" SVC,
		"dubbo%3A%2F%2F10.0.0.2%3A20880%2F%ZZ",
		"dubbo%3A%2F%2F10.0.0.3%3A20880%2F%00",
		"dubbo%3A%2F%2F10.0.0.4%3A20880%2F%4",
	};
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	resil__source_apply(f.src, RESIL__CAT_PROVIDERS, nodes, 4, 0);
	assert_int_equal(resil_directory_count(f.dir), 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 3);
	fx_close(&f);
}

static void
test_source_events_once_per_node(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC,
		"foo://10.0.0.2:20880/" SVC,
		"dubbo://10.0.0.3:20880/" SVC "?enabled=false",
	};
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 3);
	providers(&f, urls, 3);
	providers(&f, urls, 3);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_SKIPPED], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], 3);
	/* Gone and back: seen anew. */
	providers(&f, urls, 1);
	providers(&f, urls, 3);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 2);
	fx_close(&f);
}

static void
test_source_duplicate_address_keeps_newest(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC
		"?application=old&timestamp=1630745000000",
		"dubbo://10.0.0.1:20880/" SVC
		"?application=new&timestamp=1630745600000",
	};
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 2);
	assert_int_equal(resil_directory_count(f.dir), 1);
	assert_int_equal(route_n(&f, "=> application = new"), 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 1);
	assert_string_equal(f.h.node[RESIL_SOURCE_BAD_PROVIDER], urls[0]);
	assert_string_equal(f.h.msg[RESIL_SOURCE_BAD_PROVIDER],
	    "address 10.0.0.1:20880 is listed by a newer provider; this one "
	    "is left out");
	fx_close(&f);
}

static void
test_source_other_interface_or_category_skipped(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/com.foo.Other",
		"dubbo://10.0.0.2:20880/" SVC "?category=configurators",
		"dubbo://10.0.0.3:20880/" SVC "?interface=" SVC,
		"dubbo://10.0.0.4:20880?interface=" SVC,
	};
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 4);
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(f.h.n[RESIL_SOURCE_SKIPPED], 2);
	fx_close(&f);
}

/* ---- empty protection -----------------------------------------------------
 */

static void
test_source_empty_list_keeps_the_last(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC,
		"dubbo://10.0.0.2:20880/" SVC,
	};
	const char *disabled[] = {
		"dubbo://10.0.0.1:20880/" SVC "?enabled=false",
	};
	uint64_t v;
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, urls, 2);
	v = resil_directory_version(f.dir);
	providers(&f, NULL, 0);
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(resil_directory_version(f.dir), v);
	assert_int_equal(f.h.n[RESIL_SOURCE_EMPTY_KEPT], 1);
	assert_int_equal(f.h.count[RESIL_SOURCE_EMPTY_KEPT], 2);
	assert_string_equal(f.h.msg[RESIL_SOURCE_EMPTY_KEPT],
	    "the registry lists no provider of " SVC
	    "; the last 2 are kept (empty protection)");
	/* A list of non-candidates only is empty too. */
	providers(&f, disabled, 1);
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(f.h.n[RESIL_SOURCE_EMPTY_KEPT], 2);
	/* A partial list is applied. */
	providers(&f, urls, 1);
	assert_int_equal(resil_directory_count(f.dir), 1);
	fx_close(&f);

	/* Protection off (registry.empty_protection=false). */
	fx_open(&f, SVC, NULL, NULL, 0, NULL);
	providers(&f, urls, 2);
	providers(&f, NULL, 0);
	assert_int_equal(resil_directory_count(f.dir), 0);
	assert_int_equal(f.h.n[RESIL_SOURCE_EMPTY_KEPT], 0);
	assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], 2);
	fx_close(&f);
}

/* ---- the cache file
 * --------------------------------------------------------- */

static char *
slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	static char buf[8192];
	size_t n;

	assert_non_null(fp);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

static void
temp_file(char *buf, size_t n)
{
	snprintf(buf, n, "/tmp/resil-source-%ld-XXXXXX", (long)getpid());
	{
		int fd = mkstemp(buf);

		assert_true(fd >= 0);
		close(fd);
		unlink(buf);
	}
}

static void
test_source_cache_file_dubbo_format(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC "?weight=200",
		"dubbo://10.0.0.2:20880/" SVC "?application=a b",
	};
	char file[96];
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	fx_open(&f, SVC, NULL, file, 1, NULL);
	providers(&f, urls, 2);
	resil__source_flush(f.src);
	/* Dubbo's: the service key, the URLs blank-separated, : and =
	 * escaped as Properties.store does; a blank inside a URL as %20. */
	assert_string_equal(slurp(file),
	    "#Dubbo Registry Cache\n" SVC "=dubbo\\://10.0.0.1\\:20880/" SVC
	    "?weight\\=200 "
	    "dubbo\\://10.0.0.2\\:20880/" SVC "?application\\=a%20b\n");
	fx_close(&f);
	unlink(file);
}

static void
test_source_cache_file_read_at_start(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC "?weight=200",
		"dubbo://10.0.0.2:20880/" SVC,
	};
	char file[96];
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	fx_open(&f, SVC, NULL, file, 1, NULL);
	providers(&f, urls, 2);
	fx_close(&f); /* free writes what is pending */

	fx_open(&f, SVC, NULL, file, 1, NULL);
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(weight_of(&f, "10.0.0.1:20880"), 200);
	assert_int_equal(f.h.n[RESIL_SOURCE_CACHE_LOADED], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], 1);
	/* An empty list from the registry: the cached list stays, and the
	 * file keeps it. */
	providers(&f, NULL, 0);
	assert_int_equal(resil_directory_count(f.dir), 2);
	fx_close(&f);
	fx_open(&f, SVC, NULL, file, 1, NULL);
	assert_int_equal(resil_directory_count(f.dir), 2);
	fx_close(&f);
	unlink(file);
}

/* Issue 38.9: a blank inside a URL is written %20 (a blank separates two
 * URLs); it is decoded when the file is read back, and a URL that holds
 * "%20" or "%25" itself comes back as it was. Through the public path:
 * a consumer starting from its cache file while the registry is down. */
static void
test_source_cache_file_blank_in_url_comes_back(void **state)
{
	const char *urls[] = {
		"mock://10.0.0.9:1/" SVC "?mock=force:return null",
		"dubbo://10.0.0.1:20880/" SVC "?note=a%20b c%25d\te",
		"dubbo://10.0.0.2:20880/" SVC "?note=100%",
	};
	resil_source_config sc = resil_source_config_default();
	resil_selector_config scfg = resil_selector_config_default();
	resil_registry_source *src;
	resil_selector *sel;
	char file[96], spec[64], **back = NULL;
	size_t n = 0, i;
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	fx_open(&f, SVC, NULL, file, 1, NULL);
	providers(&f, urls, 3);
	fx_close(&f); /* free writes what is pending */
	assert_int_equal(resil__cache_read(resil_allocator_default(), file,
	                     SVC, &back, &n, NULL),
	    RESIL_OK);
	assert_int_equal(n, 3);
	for (i = 0; i < n; i++)
		assert_string_equal(back[i], urls[i]);
	resil__cache_urls_free(resil_allocator_default(), back, n);

	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	sc.registry = "zookeeper://127.0.0.1:1"; /* no one listens there */
	sc.service = SVC;
	sc.file = file;
	sc.directory = f.dir;
	sc.clock = resil_manual_clock_hook(&f.mc);
	assert_int_equal(resil_source_new(&src, &sc, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.dir), 3);
	assert_int_equal(
	    resil_selector_new(&sel, f.dir, &scfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_selector_mock_spec(sel, "m", spec, sizeof(spec)), 1);
	assert_string_equal(spec, "force:return null");
	resil_selector_free(sel);
	resil_source_free(src);
	fx_close(&f);
	unlink(file);
}

/* A consumer killed between its temporary file's creation and the
 * rename left FILE.tmpPID: removed at start when PID is no live process;
 * a live writer's, and files of other names, are left alone. */
static void
test_source_cache_leftover_temporary_files_removed(void **state)
{
	resil_source_config sc = resil_source_config_default();
	resil_registry_source *src;
	char file[96], dead[128], live[128], other[128], odd[128];
	const char *made[4];
	pid_t child;
	size_t i;
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	/* A PID that was a process and is no more: a child, reaped. */
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	snprintf(dead, sizeof(dead), "%s.tmp%ld", file, (long)child);
	snprintf(live, sizeof(live), "%s.tmp%ld", file, (long)getppid());
	snprintf(other, sizeof(other), "%s-x.tmp%ld", file, (long)child);
	snprintf(odd, sizeof(odd), "%s.tmp%ldx", file, (long)child);
	made[0] = dead;
	made[1] = live;
	made[2] = other;
	made[3] = odd;
	for (i = 0; i < 4; i++) {
		FILE *fp = fopen(made[i], "w");

		assert_non_null(fp);
		fputs("#Dubbo Registry Cache\n", fp);
		fclose(fp);
	}
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	sc.registry = "zookeeper://127.0.0.1:1";
	sc.service = SVC;
	sc.file = file;
	sc.directory = f.dir;
	sc.clock = resil_manual_clock_hook(&f.mc);
	assert_int_equal(resil_source_new(&src, &sc, NULL), RESIL_OK);
	assert_int_equal(access(dead, F_OK), -1);
	assert_int_equal(access(live, F_OK), 0);
	assert_int_equal(access(other, F_OK), 0);
	assert_int_equal(access(odd, F_OK), 0);
	resil_source_free(src);
	fx_close(&f);
	for (i = 1; i < 4; i++)
		unlink(made[i]);
}

static void
test_source_cache_file_written_by_dubbo(void **state)
{
	/* As Dubbo's Properties.store writes it: a date comment, another
	 * service, escapes, a continuation line, a \u escape. */
	static const char text[] =
	    "#Dubbo Registry Cache\n"
	    "#Tue Sep 07 10:15:00 CST 2021\n"
	    "com.foo.Other=dubbo\\://10.9.9.9\\:1/com.foo.Other\n" SVC
	    "=dubbo\\://10.0.0.1\\:20880/" SVC "?application\\=d\\u00e9mo "
	    "empty\\://10.0.0.5/" SVC "?category\\=configurators \\\n"
	    "    dubbo\\://10.0.0.2\\:20880/" SVC "?weight\\=50 "
	    "condition\\://0.0.0.0/" SVC
	    "?category\\=routers&rule\\=%3D%3E+host+%21%3D+10.0.0.2\n";
	char file[96];
	FILE *fp;
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	fp = fopen(file, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	fx_open(&f, SVC, NULL, file, 1, NULL);
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(weight_of(&f, "10.0.0.2:20880"), 50);
	assert_int_equal(route_n(&f, "=> application = d\xc3\xa9mo"), 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_CACHE_LOADED], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_ROUTES], 1);
	fx_close(&f);
	unlink(file);
}

static void
test_source_unreadable_cache_file_is_an_event(void **state)
{
	fx f;

	(void)state;
	/* A directory is not a file. */
	fx_open(&f, SVC, NULL, "/tmp", 1, NULL);
	assert_int_equal(f.h.n[RESIL_SOURCE_CACHE_ERROR], 1);
	assert_int_equal(resil_directory_count(f.dir), 0);
	fx_close(&f);
	/* No file yet: nothing to say. */
	fx_open(&f, SVC, NULL, "/tmp/resil-no-such-dir/x.cache", 1, NULL);
	assert_int_equal(f.h.n[RESIL_SOURCE_CACHE_ERROR], 0);
	one(&f, "dubbo://10.0.0.1:20880/" SVC);
	resil__source_flush(f.src);
	/* Its directory does not exist: the write fails, said once. */
	assert_int_equal(f.h.n[RESIL_SOURCE_CACHE_ERROR], 1);
	fx_close(&f);
}

typedef struct ready {
	resil_directory *dir;
} ready;

static void
test_source_starts_from_cache_while_registry_is_down(void **state)
{
	const char *urls[] = {
		"dubbo://10.0.0.1:20880/" SVC,
		"dubbo://10.0.0.2:20880/" SVC,
	};
	resil_source_config sc = resil_source_config_default();
	resil_source_stats st;
	char file[96], reg[64];
	resil_registry_source *src;
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	fx_open(&f, SVC, NULL, file, 1, NULL);
	providers(&f, urls, 2);
	fx_close(&f);
	/* The real source, to a registry no one listens at (port 1). */
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	snprintf(reg, sizeof(reg), "zookeeper://127.0.0.1:1");
	sc.registry = reg;
	sc.service = SVC;
	sc.file = file;
	sc.directory = f.dir;
	sc.clock = resil_manual_clock_hook(&f.mc);
	assert_int_equal(resil_source_new(&src, &sc, NULL), RESIL_OK);
	/* Before any answer from the registry: the cached providers. */
	assert_int_equal(resil_directory_count(f.dir), 2);
	resil_source_get_stats(src, &st);
	assert_int_equal(st.connected, 0);
	assert_int_equal(st.pushes, 1);
	resil_source_free(src);
	fx_close(&f);
	unlink(file);
}

/* Issue 38.1: a provider whose parameters the directory's grammar refuses
 * (an empty name, "&=x"; a path with a '&', which becomes params
 * "path=a&b") is left out alone, with its event: it used to pass the
 * source's checks and make the directory refuse the whole push, so no
 * provider change was applied while the node existed. Through the
 * public path: a consumer starting from its cache file. */
static void
test_source_bad_parameter_costs_that_provider_only(void **state)
{
	resil_source_config sc = resil_source_config_default();
	resil_endpoint_state es;
	resil_registry_source *src;
	char file[96];
	FILE *fp;
	fx f;

	(void)state;
	temp_file(file, sizeof(file));
	fp = fopen(file, "w");
	assert_non_null(fp);
	fputs("#Dubbo Registry Cache\n" SVC "="
	      "dubbo\\://10.0.0.1\\:20880/" SVC "?side\\=provider "
	      "dubbo\\://10.0.0.2\\:20880/" SVC "?side\\=provider&\\=x "
	      "dubbo\\://10.0.0.3\\:20880/a&b?interface\\=" SVC " "
	      "dubbo\\://10.0.0.4\\:20880/" SVC "?weight\\=7\n",
	    fp);
	fclose(fp);
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	sc.registry = "zookeeper://127.0.0.1:1"; /* no one listens there */
	sc.service = SVC;
	sc.file = file;
	sc.directory = f.dir;
	sc.listener = on_event;
	sc.listener_ctx = &f.h;
	sc.clock = resil_manual_clock_hook(&f.mc);
	assert_int_equal(resil_source_new(&src, &sc, NULL), RESIL_OK);
	/* The two good ones are pushed, the two bad ones said. */
	assert_int_equal(resil_directory_count(f.dir), 2);
	assert_int_equal(
	    resil_directory_get_state(f.dir, "10.0.0.1:20880", &es), RESIL_OK);
	assert_int_equal(
	    resil_directory_get_state(f.dir, "10.0.0.4:20880", &es), RESIL_OK);
	assert_int_equal(es.weight, 7);
	assert_int_equal(f.h.n[RESIL_SOURCE_ERROR], 0);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 2);
	assert_int_equal(f.h.count[RESIL_SOURCE_PROVIDERS], 2);
	resil_source_free(src);
	fx_close(&f);
	unlink(file);
}

/* The same node staying in the registry's list: every later change is
 * applied (a provider removed gets no call, a new one gets calls). */
static void
test_source_bad_parameter_does_not_freeze_the_list(void **state)
{
	const char *bad = "dubbo://10.0.0.9:20880/" SVC "?side=provider&=x";
	const char *l1[] = { "dubbo://10.0.0.1:20880/" SVC, bad };
	const char *l2[] = { bad, "dubbo://10.0.0.2:20880/" SVC };
	resil_endpoint_state es;
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, l1, 2);
	assert_int_equal(resil_directory_count(f.dir), 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 1);
	assert_string_equal(f.h.node[RESIL_SOURCE_BAD_PROVIDER], bad);
	assert_string_equal(f.h.msg[RESIL_SOURCE_BAD_PROVIDER],
	    "parameter \"=x\": an empty key (a provider's parameters are "
	    "key=value joined by '&')");
	providers(&f, l2, 2);
	assert_int_equal(resil_directory_count(f.dir), 1);
	assert_int_equal(
	    resil_directory_get_state(f.dir, "10.0.0.2:20880", &es), RESIL_OK);
	assert_int_equal(
	    resil_directory_get_state(f.dir, "10.0.0.1:20880", &es),
	    RESIL_E_NOTFOUND);
	/* Said once per node; no push refused. */
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_ERROR], 0);
	assert_int_equal(f.h.n[RESIL_SOURCE_PROVIDERS], 2);
	fx_close(&f);
}

/* ---- routes
 * ------------------------------------------------------------------ */

static void
test_source_routes_parsed_dubbo_style(void **state)
{
	const char *urls[] = {
		/* Dubbo's example: rule=URL.encode("host = 10.20.153.10 =>
		 * host = 10.20.153.11"), the whole URL encoded once more. */
		"condition%3A%2F%2F0.0.0.0%2F" SVC "%3Fcategory%3Drouters%26"
		"dynamic%3Dfalse%26rule%3Dhost%2B%253D%2B10.20.153.10%2B%253D%"
		"253E%2Bhost%2B%253D%2B10.20.153.11",
		"script%3A%2F%2F0.0.0.0%2F" SVC
		"%3Fcategory%3Drouters%26rule%3D"
		"x",
		"condition%3A%2F%2F0.0.0.0%2F" SVC
		"%3Fcategory%3Drouters%26rule%3D"
		"method%2B%253D%2B%253D%253E",
		"condition%3A%2F%2F0.0.0.0%2F" SVC
		"%3Fenabled%3Dfalse%26rule%3D"
		"%253D%253E%2Bhost%2B%253D%2B1.1.1.1",
	};
	fx f;

	(void)state;
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	resil__source_apply(f.src, RESIL__CAT_ROUTERS, urls, 4, 0);
	/* One rule; script:// and a rule that does not parse are said. */
	assert_int_equal(f.h.n[RESIL_SOURCE_ROUTES], 1);
	assert_int_equal(f.h.count[RESIL_SOURCE_ROUTES], 1);
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_ROUTE], 2);
	assert_int_equal(f.h.n[RESIL_SOURCE_SKIPPED], 1);
	fx_close(&f);
}

/* ---- text
 * --------------------------------------------------------------------- */

static void
test_source_text_keys(void **state)
{
	resil_source_text *st;
	resil_source_config sc = resil_source_config_default();
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_source_text_new(&st, NULL), RESIL_OK);
	assert_false(resil_source_text_present(st));
	assert_int_equal(
	    resil_source_text_set(st, "registry",
	        "zookeeper://127.0.0.1:2181?backup=127.0.0.1:2182", "svc.conf",
	        3, &diag),
	    RESIL_OK);
	assert_int_equal(resil_source_text_set(st, "registry.service", SVC,
	                     "svc.conf", 4, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_source_text_set(st, "registry.group", "g", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_source_text_set(st, "registry.version", "", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(resil_source_text_set(st, "registry.file",
	                     "/var/cache/a.cache", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(resil_source_text_set(st, "registry.file.interval",
	                     "2s", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(resil_source_text_set(st, "registry.session_timeout",
	                     "30000", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(resil_source_text_set(
	                     st, "registry.routes", "off", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(resil_source_text_set(st, "registry.protocols",
	                     "dubbo,tri", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_source_text_set(st, "registry.root", "/rpc", NULL, 0, &diag),
	    RESIL_OK);
	assert_true(resil_source_text_present(st));
	resil_source_text_config(st, &sc);
	assert_string_equal(
	    sc.registry, "zookeeper://127.0.0.1:2181?backup=127.0.0.1:2182");
	assert_string_equal(sc.service, SVC);
	assert_string_equal(sc.group, "g");
	assert_null(sc.version);
	assert_string_equal(sc.file, "/var/cache/a.cache");
	assert_int_equal(sc.file_interval_ns, 2 * RESIL_NS_PER_SEC);
	assert_int_equal(sc.session_timeout_ms, 30000);
	assert_int_equal(sc.routes, 0);
	assert_string_equal(sc.protocols, "dubbo,tri");
	assert_string_equal(sc.root, "/rpc");

	assert_int_equal(resil_source_text_set(st, "registry", "etcd://h:1",
	                     "svc.conf", 9, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "svc.conf:9: registry: scheme \"etcd\" is not supported "
	    "(zookeeper)");
	assert_int_equal(resil_source_text_set(st, "registry.session_timeout",
	                     "0", "svc.conf", 10, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "svc.conf:10: registry.session_timeout: \"0\" is not a duration "
	    "of 1ms..2147483647ms");
	assert_int_equal(resil_source_text_set(
	                     st, "registry.root", "dubbo", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "registry.root: \"dubbo\" is not /name (no '/' at the end)");
	/* The directory's key, and others: not ours. */
	assert_int_equal(resil_source_text_set(st, "registry.empty_protection",
	                     "false", NULL, 0, &diag),
	    RESIL_E_NOTFOUND);
	assert_string_equal(
	    diag.msg, "registry.empty_protection: unknown key");
	assert_int_equal(
	    resil_source_text_set(st, "registry.bogus", "1", NULL, 0, &diag),
	    RESIL_E_NOTFOUND);
	/* Dubbo's N/A: no registry, no source. */
	assert_int_equal(
	    resil_source_text_set(st, "registry", "N/A", NULL, 0, &diag),
	    RESIL_OK);
	assert_false(resil_source_text_present(st));
	resil_source_text_config(st, &sc);
	assert_null(sc.registry);
	resil_source_text_free(st);
}

static void
test_source_config_validate(void **state)
{
	resil_source_config sc = resil_source_config_default();
	resil_diag diag;

	(void)state;
	sc.service = SVC;
	sc.directory = (resil_directory *)(uintptr_t)1;
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "registry: required (zookeeper://host:port)");
	sc.registry = "zookeeper://";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "registry: \"zookeeper://\" names no host");
	sc.registry = "127.0.0.1:2181";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "registry: \"127.0.0.1:2181\" is not scheme://host:port");
	sc.registry = "zookeeper://a:1,b:2";
	assert_int_equal(resil_source_config_validate(&sc, &diag), RESIL_OK);
	sc.service = "a/b";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, "registry.service: \"a/b\" has a '/'");
	sc.service = SVC;
	/* Issue 38.6: the C API refuses what the text refuses. */
	sc.registry = "zookeeper://[::1]:2181,h:2181?backup=[::2]:1";
	assert_int_equal(resil_source_config_validate(&sc, &diag), RESIL_OK);
	sc.registry = "zookeeper://a:1,b:0";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "registry: \"zookeeper://a:1,b:0\": port \"0\" is not "
	    "1..65535");
	sc.registry = "zookeeper://[::1]";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "registry: \"zookeeper://[::1]\": \"[::1]\" is not host:port");
	sc.registry = "zookeeper://a:1";
	sc.group = "g1, g2";
	sc.version = "*";
	sc.protocols = "dubbo, tri";
	assert_int_equal(resil_source_config_validate(&sc, &diag), RESIL_OK);
	sc.group = "g1,,g2";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	sc.group = NULL;
	sc.version = "1.0 2.0";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	sc.version = NULL;
	sc.protocols = "dubbo,";
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	sc.protocols = NULL;
	sc.directory = NULL;
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "directory: required (the directory to feed)");
	sc.size = 3;
	assert_int_equal(
	    resil_source_config_validate(&sc, &diag), RESIL_E_INVAL);
}

/* ---- a flood, in one thread
 * ---------------------------------------------------- */

static void
test_source_flood_of_changes_and_bad_nodes(void **state)
{
	enum { N = 10000, CHANGES = 50 };
	char **urls = calloc(N, sizeof(char *));
	resil_source_stats st;
	size_t i, k;
	fx f;

	(void)state;
	assert_non_null(urls);
	for (i = 0; i < N; i++) {
		urls[i] = malloc(128);
		assert_non_null(urls[i]);
		if (i % 10 == 9) /* one in ten is malformed */
			snprintf(urls[i], 128, "dubbo://10.%zu.%zu.%zu:0/" SVC,
			    i >> 16, (i >> 8) & 255, i & 255);
		else
			snprintf(urls[i], 128,
			    "dubbo://10.%zu.%zu.%zu:20880/" SVC "?weight=%d",
			    i >> 16, (i >> 8) & 255, i & 255,
			    (int)(i % 7) - 3);
	}
	fx_open(&f, SVC, NULL, NULL, 1, NULL);
	providers(&f, (const char *const *)urls, N);
	assert_int_equal(resil_directory_count(f.dir), N - N / 10);
	for (k = 0; k < CHANGES; k++) {
		/* One provider leaves per change. */
		providers(&f, (const char *const *)urls + k + 1, N - k - 1);
	}
	assert_int_equal(resil_directory_count(f.dir),
	    N - CHANGES - (N / 10 - CHANGES / 10));
	resil_source_get_stats(f.src, &st);
	assert_int_equal(st.pushes, CHANGES + 1);
	/* Each bad node said once. */
	assert_int_equal(f.h.n[RESIL_SOURCE_BAD_PROVIDER], N / 10);
	fx_close(&f);
	for (i = 0; i < N; i++)
		free(urls[i]);
	free(urls);
}

/* ---- allocation failure
 * ---------------------------------------------------------- */

static void
test_source_alloc_failure(void **state)
{
	const char *urls[] = {
		URL_DEMO,
		"dubbo://10.0.0.1:20880/" SVC "?weight=-1&dubbo.tag=t&zone=z",
		"foo://10.0.0.2:1/" SVC,
		"dubbo://10.0.0.3:20880/" SVC "?enabled=false",
	};
	const char *routes[] = {
		"condition%3A%2F%2F0.0.0.0%2F" SVC
		"%3Frule%3D%253D%253E%2Bhost"
		"%2B%2521%253D%2B10.0.0.1",
	};
	uint64_t nth, points = 0;
	char file[96];

	(void)state;
	temp_file(file, sizeof(file));
	for (nth = 1; nth < 10000; nth++) {
		fail_alloc fa;
		const resil_allocator *a = fail_alloc_init(&fa, 0);
		resil_directory_config dc = resil_directory_config_default();
		resil_source_config sc = resil_source_config_default();
		resil_directory *dir;
		resil_registry_source *src = NULL;
		resil_err err;

		dc.alloc = a;
		assert_int_equal(
		    resil_directory_new(&dir, &dc, NULL), RESIL_OK);
		sc.registry = "zookeeper://127.0.0.1:2181";
		sc.service = SVC;
		sc.directory = dir;
		sc.alloc = a;
		sc.file = file;
		sc.file_interval_ns = 0;
		fail_alloc_arm(&fa, nth);
		err = resil__source_new_detached(&src, &sc, NULL);
		if (err == RESIL_OK) {
			resil__source_apply(
			    src, RESIL__CAT_PROVIDERS, urls, 4, 1);
			resil__source_apply(
			    src, RESIL__CAT_ROUTERS, routes, 1, 0);
			resil__source_apply(
			    src, RESIL__CAT_PROVIDERS, urls, 2, 1);
			resil__source_flush(src);
			resil_source_free(src);
		} else
			assert_int_equal(err, RESIL_E_NOMEM);
		resil_directory_free(dir);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_int_equal(fa.size_mismatch, 0);
		if (fa.failures == 0)
			break;
		points++;
	}
	assert_true(points > 20);
	unlink(file);
}

/* ---- the registry keys of a configuration text (lib/config.c)
 * ---------------------------------------------------------------- */

static void
write_text(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* One file builds the directory, the selector, the source and the
 * pipeline; the registry is down (port 1), its cache file (as Dubbo
 * writes it) gives the providers and the registry's rule at once. Only
 * _init() and _new() calls: no field set by hand. */
static void
test_source_config_file_builds_the_source(void **state)
{
	static const char cache[] =
	    "#Dubbo Registry Cache\n" SVC "=dubbo\\://10.0.0.1\\:20880/" SVC
	    "?weight\\=300 "
	    "dubbo\\://10.0.0.2\\:20880/" SVC " "
	    "dubbo\\://10.0.0.3\\:20880/" SVC " "
	    "condition\\://0.0.0.0/" SVC
	    "?category\\=routers&rule\\=%3D%3E+host+%21%3D+10.0.0.3\n";
	char file[96], conf_path[96], text[512];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_source_config rc;
	resil_directory *dir;
	resil_selector *sel;
	resil_registry_source *src;
	resil_source_stats st;
	resil_endpoint_state es;
	resil_config *conf;
	resil_diag diag;

	(void)state;
	temp_file(file, sizeof(file));
	temp_file(conf_path, sizeof(conf_path));
	write_text(file, cache);
	snprintf(text, sizeof(text),
	    "service=" SVC "\n"
	    "registry=zookeeper://127.0.0.1:1\n"
	    "registry.file=%s\n"
	    "registry.session_timeout=5s\n"
	    "registry.empty_protection=true\n",
	    file);
	write_text(conf_path, text);
	assert_int_equal(
	    resil_config_parse_file(&conf, conf_path, NULL, &diag), RESIL_OK);
	resil_directory_config_init(&dc);
	(void)resil_config_directory(conf, &dc);
	assert_int_equal(dc.empty_protection, 1);
	assert_int_equal(resil_directory_new(&dir, &dc, &diag), RESIL_OK);
	(void)resil_config_selector(conf, &sc);
	assert_int_equal(resil_selector_new(&sel, dir, &sc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_config_source(conf, dir, sel, &src, &diag), RESIL_OK);
	/* The cache file's providers, before any answer of the registry. */
	assert_int_equal(resil_directory_count(dir), 3);
	assert_int_equal(
	    resil_directory_get_state(dir, "10.0.0.1:20880", &es), RESIL_OK);
	assert_int_equal(es.weight, 300);
	resil_source_get_stats(src, &st);
	assert_int_equal(st.connected, 0);
	assert_int_equal(st.pushes, 1);
	/* ...and its rule is the selector's. */
	assert_int_equal(st.rules, 1);
	{
		resil_candidates *c;
		resil_request req;

		memset(&req, 0, sizeof(req));
		assert_int_equal(resil_candidates_new(&c, sel), RESIL_OK);
		assert_int_equal(
		    resil_selector_route(sel, &req, c, NULL), RESIL_OK);
		assert_int_equal(resil_candidates_count(c), 2);
		resil_candidates_free(c);
	}
	/* The same keys for a source made by hand. */
	resil_source_config_init(&rc);
	assert_int_equal(resil_config_source_config(conf, &rc), 1);
	assert_string_equal(rc.registry, "zookeeper://127.0.0.1:1");
	assert_string_equal(rc.service, SVC); /* from service= */
	assert_string_equal(rc.file, file);
	assert_int_equal(rc.session_timeout_ms, 5000);
	assert_null(rc.directory);
	resil_source_free(src);
	resil_selector_free(sel);
	resil_directory_free(dir);
	resil_config_free(conf);
	unlink(file);
	unlink(conf_path);
}

typedef struct bad_text {
	const char *text;
	const char *msg;
} bad_text;

/* Bad registry keys name the key and the origin:line. */
static void
test_source_config_bad_registry_keys(void **state)
{
	static const bad_text bad[] = {
		{ "service=S\nregistry=etcd://h:2379\n",
		    "svc.conf:2: registry: scheme \"etcd\" is not supported "
		    "(zookeeper)" },
		{ "registry=zookeeper://h:2181\n"
		  "registry.session_timeout=forever\n",
		    "svc.conf:2: registry.session_timeout: \"forever\" is not "
		    "a duration of 1ms..2147483647ms" },
		{ "registry=zookeeper://h:2181\nregistry.routes=maybe\n",
		    "svc.conf:2: registry.routes: \"maybe\" is not a "
		    "boolean" },
		{ "registry=zookeeper://h:2181\nregistry.root=dubbo\n",
		    "svc.conf:2: registry.root: \"dubbo\" is not /name (no "
		    "'/' at the end)" },
		{ "registry=zookeeper://h:2181\nregistry.file=\n",
		    "svc.conf:2: registry.file: empty (NULL for none)" },
		{ "# no registry=\n\nregistry.service=S\nregistry.group=g\n",
		    "svc.conf:3: registry.service: needs registry= (the "
		    "registry's URL, zookeeper://host:port, or N/A)" },
	};
	resil_config *conf;
	resil_diag diag;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		conf = NULL;
		assert_int_equal(resil_config_parse_string(&conf, bad[i].text,
		                     "svc.conf", NULL, &diag),
		    RESIL_E_INVAL);
		assert_null(conf);
		assert_string_equal(diag.msg, bad[i].msg);
	}
	/* A misspelt key is no registry key: the text's own refusal,
	 * naming it and its line. */
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "registry=zookeeper://h:2181\nregistry.servce=S\n", "svc.conf",
	        NULL, &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "svc.conf:2: "));
	assert_non_null(strstr(diag.msg, "registry.servce"));
	/* set(): the same checks, no origin. */
	assert_int_equal(resil_config_parse_string(&conf,
	                     "service=S\nregistry=zookeeper://h:2181\n",
	                     "svc.conf", NULL, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_set(conf, "registry.file.interval", "soon", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "registry.file.interval: \"soon\" is not a duration (500, "
	    "500ms, 1s)");
	assert_int_equal(
	    resil_config_set(conf, "registry.service", "com.foo.Bar", &diag),
	    RESIL_OK);
	{
		resil_source_config rc;

		resil_source_config_init(&rc);
		assert_int_equal(resil_config_source_config(conf, &rc), 1);
		assert_string_equal(rc.service, "com.foo.Bar");
	}
	resil_config_free(conf);
}

/* Issue 38.6: refused when the text is parsed, with origin:line; each was
 * taken without a word, or refused only by resil_config_source() (the
 * last two), without a line. */
static void
expect_refused(const char *text, const char *msg)
{
	resil_config *conf = NULL;
	resil_diag diag;

	assert_int_equal(
	    resil_config_parse_string(&conf, text, "svc.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_null(conf);
	assert_string_equal(diag.msg, msg);
}

static void
test_source_config_refuses_port_out_of_range(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry=zookeeper://127.0.0.1:99999\n",
	    "svc.conf:2: registry: \"zookeeper://127.0.0.1:99999\": "
	    "port \"99999\" is not 1..65535");
}

static void
test_source_config_refuses_backup_without_port(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry=zookeeper://h:2181?backup=h2\n",
	    "svc.conf:2: registry: \"zookeeper://h:2181?backup=h2\": "
	    "\"h2\" is not host:port");
}

static void
test_source_config_refuses_version_list(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry=zookeeper://h:2181\n"
	               "registry.version=1.0,2.0\n",
	    "svc.conf:3: registry.version: \"1.0,2.0\" is not one "
	    "version (a version, or * for any)");
}

static void
test_source_config_refuses_file_with_no_registry(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry=N/A\nregistry.file=/tmp/x.cache\n",
	    "svc.conf:3: registry.file: unused: registry=N/A (line 2) "
	    "names no registry");
}

static void
test_source_config_refuses_empty_file_with_no_registry(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry.file=\nregistry=N/A\n",
	    "svc.conf:2: registry.file: empty (NULL for none)");
}

static void
test_source_config_refuses_group_with_a_blank(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry=zookeeper://h:2181\n"
	               "registry.group=a b\n",
	    "svc.conf:3: registry.group: \"a b\": \"a b\" is not a "
	    "group name (a name, a comma list of names, or *)");
}

static void
test_source_config_refuses_unknown_protocol(void **state)
{
	(void)state;
	expect_refused("service=S\nregistry=zookeeper://h:2181\n"
	               "registry.protocols=dubbo,bogus\n",
	    "svc.conf:3: registry.protocols: \"dubbo,bogus\": "
	    "\"bogus\" is not a protocol of providers (dubbo, tri, "
	    "grpc, rest, http, https, hessian, rmi, thrift, "
	    "webservice, redis, memcached)");
}

static void
test_source_config_refuses_no_interface(void **state)
{
	(void)state;
	expect_refused("registry=zookeeper://h:2181\nregistry.file=/tmp/x\n",
	    "svc.conf:1: registry: needs the interface to subscribe "
	    "to (registry.service=, or service=)");
}

static void
test_source_config_refuses_service_is_no_interface(void **state)
{
	(void)state;
	expect_refused("service=Stock Service\nregistry=zookeeper://h:2181\n",
	    "svc.conf:2: registry.service: \"Stock Service\" has a "
	    "' '");
}

/* No registry key, or Dubbo's registry=N/A: no source. */
static void
test_source_config_without_registry(void **state)
{
	static const char *const texts[] = { "service=S\n",
		"service=S\nregistry=N/A\n" };
	resil_directory_config dc = resil_directory_config_default();
	resil_directory *dir;
	resil_registry_source *src = NULL;
	resil_source_config rc;
	resil_config *conf;
	resil_diag diag;
	size_t i;

	(void)state;
	assert_int_equal(resil_directory_new(&dir, &dc, NULL), RESIL_OK);
	for (i = 0; i < 2; i++) {
		assert_int_equal(resil_config_parse_string(
		                     &conf, texts[i], "svc.conf", NULL, &diag),
		    RESIL_OK);
		assert_int_equal(
		    resil_config_source(conf, dir, NULL, &src, &diag),
		    RESIL_E_NOTFOUND);
		assert_null(src);
		resil_source_config_init(&rc);
		assert_int_equal(resil_config_source_config(conf, &rc), 0);
		assert_null(rc.registry);
		resil_config_free(conf);
	}
	assert_int_equal(
	    resil_config_source(NULL, dir, NULL, &src, &diag), RESIL_E_INVAL);
	resil_directory_free(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_source_address_and_dubbo_defaults),
		cmocka_unit_test(test_source_node_name_is_url_decoded),
		cmocka_unit_test(test_source_params_for_conditions),
		cmocka_unit_test(test_source_weight),
		cmocka_unit_test(test_source_absurd_weights_are_repaired),
		cmocka_unit_test(test_source_timestamp_and_warmup),
		cmocka_unit_test(
		    test_source_default_warmup_is_dubbos_ten_minutes),
		cmocka_unit_test(test_source_bad_timestamp_means_no_warmup),
		cmocka_unit_test(test_source_tag),
		cmocka_unit_test(test_source_zone),
		cmocka_unit_test(
		    test_source_disabled_providers_are_not_candidates),
		cmocka_unit_test(test_source_group_and_version_match_as_dubbo),
		cmocka_unit_test(test_source_protocols_and_mock_providers),
		cmocka_unit_test(test_source_malformed_urls_give_events),
		cmocka_unit_test(test_source_malformed_escapes_in_node_names),
		cmocka_unit_test(test_source_events_once_per_node),
		cmocka_unit_test(test_source_duplicate_address_keeps_newest),
		cmocka_unit_test(
		    test_source_other_interface_or_category_skipped),
		cmocka_unit_test(test_source_empty_list_keeps_the_last),
		cmocka_unit_test(test_source_cache_file_dubbo_format),
		cmocka_unit_test(test_source_cache_file_read_at_start),
		cmocka_unit_test(
		    test_source_cache_file_blank_in_url_comes_back),
		cmocka_unit_test(
		    test_source_cache_leftover_temporary_files_removed),
		cmocka_unit_test(test_source_cache_file_written_by_dubbo),
		cmocka_unit_test(
		    test_source_unreadable_cache_file_is_an_event),
		cmocka_unit_test(
		    test_source_starts_from_cache_while_registry_is_down),
		cmocka_unit_test(
		    test_source_bad_parameter_costs_that_provider_only),
		cmocka_unit_test(
		    test_source_bad_parameter_does_not_freeze_the_list),
		cmocka_unit_test(test_source_routes_parsed_dubbo_style),
		cmocka_unit_test(test_source_text_keys),
		cmocka_unit_test(test_source_config_validate),
		cmocka_unit_test(test_source_flood_of_changes_and_bad_nodes),
		cmocka_unit_test(test_source_alloc_failure),
		cmocka_unit_test(test_source_config_file_builds_the_source),
		cmocka_unit_test(test_source_config_bad_registry_keys),
		cmocka_unit_test(test_source_config_refuses_port_out_of_range),
		cmocka_unit_test(
		    test_source_config_refuses_backup_without_port),
		cmocka_unit_test(test_source_config_refuses_version_list),
		cmocka_unit_test(
		    test_source_config_refuses_file_with_no_registry),
		cmocka_unit_test(
		    test_source_config_refuses_empty_file_with_no_registry),
		cmocka_unit_test(
		    test_source_config_refuses_group_with_a_blank),
		cmocka_unit_test(test_source_config_refuses_unknown_protocol),
		cmocka_unit_test(test_source_config_refuses_no_interface),
		cmocka_unit_test(
		    test_source_config_refuses_service_is_no_interface),
		cmocka_unit_test(test_source_config_without_registry),
	};

	return cmocka_run_group_tests_name("source", tests, NULL, NULL);
}

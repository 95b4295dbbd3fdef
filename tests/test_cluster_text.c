/*
 * Issue 24.5, the cluster-text half: endpoints listed in configuration
 * text (url=, Dubbo's direct connection), the per-endpoint breaker's keys
 * (endpoint.breaker.*), and the combinations refused (zone-aware with the
 * selector's zone routing, url= with a registry). Through the public API:
 * resil_config_parse_string(), resil_config_directory(),
 * resil_directory_new(), a selector over it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/selector.h>

#include "support/fail_alloc.h"

/* A directory and a selector built from a text, on a manual clock. */
typedef struct built {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_candidates *c;
	resil_endpoint_event_type ev[16];
	size_t nev;
	resil_diag diag;
} built;

static void
listen(const resil_endpoint_event *ev, void *ctx)
{
	built *b = ctx;

	if (b->nev < 16)
		b->ev[b->nev++] = ev->type;
}

static void
build(built *b, const char *text)
{
	resil_directory_config dc;
	resil_selector_config sc;

	memset(b, 0, sizeof(*b));
	resil_manual_clock_init(&b->mc, 1000);
	assert_int_equal(resil_config_parse_string(
	                     &b->conf, text, "t.conf", NULL, &b->diag),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&b->mc);
	dc.listener = listen;
	dc.listener_ctx = b;
	assert_int_equal(resil_config_directory(b->conf, &dc), 1);
	assert_int_equal(resil_directory_new(&b->d, &dc, &b->diag), RESIL_OK);
	(void)resil_config_selector(b->conf, &sc);
	assert_int_equal(
	    resil_selector_new(&b->sel, b->d, &sc, &b->diag), RESIL_OK);
	assert_int_equal(resil_candidates_new(&b->c, b->sel), RESIL_OK);
}

static void
unbuild(built *b)
{
	resil_candidates_free(b->c);
	resil_selector_free(b->sel);
	resil_directory_free(b->d);
	resil_config_free(b->conf);
}

/* The text is refused with exactly msg. */
static void
refused(const char *text, const char *msg)
{
	resil_config *conf = NULL;
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(&conf, text, "t.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_null(conf);
	assert_string_equal(diag.msg, msg);
}

static void
accepted(const char *text)
{
	resil_config *conf = NULL;
	resil_diag diag;

	diag.msg[0] = '\0';
	if (resil_config_parse_string(&conf, text, "t.conf", NULL, &diag) !=
	    RESIL_OK)
		fail_msg("refused: %s", diag.msg);
	resil_config_free(conf);
}

/* ---- url= ----------------------------------------------------------------
 */

static void
test_url_endpoints_start_the_directory(void **state)
{
	resil_request req;
	resil_candidate cand;
	resil_endpoint_state st;
	built b;

	(void)state;
	build(&b,
	    "service=com.foo.StockService\n"
	    "registry=N/A\n"
	    "url = dubbo://10.0.0.1:20880?weight=200&zone=hz&tag=gray ; "
	    "dubbo://10.0.0.2:20880/com.foo.StockService?zone=sh&version=1.0"
	    ";tri://[::1]:50051?dubbo.tag=blue\n");
	/* Before the first route: the text's list is the directory's. */
	assert_int_equal(resil_directory_count(b.d), 3);
	assert_int_equal(resil_directory_version(b.d), 1);
	assert_int_equal(b.nev, 3);
	assert_int_equal(b.ev[0], RESIL_ENDPOINT_ADDED);
	assert_int_equal(
	    resil_directory_get_state(b.d, "10.0.0.1:20880", &st), RESIL_OK);
	assert_int_equal(st.position, 0);
	assert_int_equal(st.weight, 200);
	assert_int_equal(
	    resil_directory_get_state(b.d, "10.0.0.2:20880", &st), RESIL_OK);
	assert_int_equal(st.weight, 100); /* Dubbo's default */
	assert_int_equal(
	    resil_directory_get_state(b.d, "[::1]:50051", &st), RESIL_OK);
	assert_int_equal(st.position, 2);

	/* The tag and the zone are the endpoint's. */
	memset(&req, 0, sizeof(req));
	req.tag = "gray";
	assert_int_equal(
	    resil_selector_route(b.sel, &req, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	assert_int_equal(resil_candidates_get(b.c, 0, &cand), RESIL_OK);
	assert_string_equal(cand.address, "10.0.0.1:20880");
	assert_string_equal(cand.zone, "hz");
	assert_string_equal(cand.tag, "gray");
	assert_int_equal(cand.weight, 200);
	req.tag = "blue"; /* dubbo.tag, as a registry's URL has it */
	assert_int_equal(
	    resil_selector_route(b.sel, &req, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	assert_int_equal(resil_candidates_get(b.c, 0, &cand), RESIL_OK);
	assert_string_equal(cand.address, "[::1]:50051");
	assert_null(cand.zone);
	/* Untagged: the untagged one only. */
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	assert_int_equal(resil_candidates_get(b.c, 0, &cand), RESIL_OK);
	assert_string_equal(cand.address, "10.0.0.2:20880");
	assert_string_equal(cand.zone, "sh");
	unbuild(&b);
}

static void
test_url_params_reach_condition_rules(void **state)
{
	resil_candidate cand;
	built b;

	(void)state;
	/* The other parameters (and protocol=, path=, as a registry's
	 * provider URLs give them) are attributes a rule can test. */
	build(&b,
	    "url=dubbo://a:1?version=1.0;dubbo://b:1?version=2.0;"
	    "rest://c:1/com.foo.S?version=2.0\n"
	    "router.condition= => version = 2.0 & protocol = dubbo\n");
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	assert_int_equal(resil_candidates_get(b.c, 0, &cand), RESIL_OK);
	assert_string_equal(cand.address, "b:1");
	unbuild(&b);

	build(&b,
	    "url=dubbo://a:1;rest://c:1/com.foo.S\n"
	    "router.condition= => path = com.foo.S\n");
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	assert_int_equal(resil_candidates_get(b.c, 0, &cand), RESIL_OK);
	assert_string_equal(cand.address, "c:1");
	unbuild(&b);
}

static void
test_url_mock_provider(void **state)
{
	char buf[64];
	built b;

	(void)state;
	/* mock:// is Dubbo's mock provider: never a candidate, its spec
	 * answers the mock stage. */
	build(&b, "url=dubbo://a:1;mock://m:1?mock=return 5\n");
	assert_int_equal(resil_directory_count(b.d), 2);
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	assert_int_equal(
	    resil_selector_mock_spec(b.sel, "getStock", buf, sizeof(buf)), 1);
	assert_string_equal(buf, "return 5");
	unbuild(&b);
}

static void
test_url_without_it_leaves_the_callers_list(void **state)
{
	resil_endpoint_spec s = resil_endpoint_spec_default("x:1");
	resil_directory_config dc;
	resil_config *conf;

	(void)state;
	assert_int_equal(resil_config_parse_string(
	                     &conf, "loadbalance=p2c\n", "t.conf", NULL, NULL),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	dc.endpoints = &s;
	dc.nendpoints = 1;
	assert_int_equal(resil_config_directory(conf, &dc), 1);
	assert_ptr_equal(dc.endpoints, &s);
	assert_int_equal(dc.nendpoints, 1);
	resil_config_free(conf);
}

static void
test_url_bad_urls_refused(void **state)
{
	(void)state;
	refused("service=S\nurl=10.0.0.1:20880\n",
	    "t.conf:2: url: item 1 \"10.0.0.1:20880\": no protocol (no ://)");
	refused("url=dubbo://10.0.0.1:20880;dubbo://10.0.0.2\n",
	    "t.conf:1: url: item 2 \"dubbo://10.0.0.2\": no port "
	    "(protocol://host:port)");
	refused("url=dubbo://10.0.0.1:0\n",
	    "t.conf:1: url: item 1 \"dubbo://10.0.0.1:0\": port \"0\" is not "
	    "1..65535");
	refused("url=dubbo://:20880\n",
	    "t.conf:1: url: item 1 \"dubbo://:20880\": no host");
	refused("url=zookeeper://127.0.0.1:2181\n",
	    "t.conf:1: url: item 1 \"zookeeper://127.0.0.1:2181\": protocol "
	    "\"zookeeper\" is not a provider's (dubbo, tri, grpc, rest, http, "
	    "https, hessian, rmi, thrift, webservice, redis, memcached, mock; "
	    "a registry goes in registry=)");
	refused("url=dubbo://a:1;;dubbo://b:1\n",
	    "t.conf:1: url: item 2 of 3 is empty (URLs are separated by ';')");
	refused("url=dubbo://a:1;\n",
	    "t.conf:1: url: item 2 of 2 is empty (URLs are separated by ';')");
	refused("url=dubbo://a:1?weight=-5\n",
	    "t.conf:1: url: item 1 \"dubbo://a:1?weight=-5\": weight \"-5\" "
	    "is not a whole number 0..2147483647");
	refused("url=dubbo://a:1?weight=2147483648\n",
	    "t.conf:1: url: item 1 \"dubbo://a:1?weight=2147483648\": weight "
	    "\"2147483648\" is not a whole number 0..2147483647");
	refused("url=dubbo://a:1?zone=h/z\n",
	    "t.conf:1: url: item 1 \"dubbo://a:1?zone=h/z\": zone \"h/z\" is "
	    "not a zone name (letters, digits, '_', '-', '.')");
	refused("url=dubbo://a:1?=x\n",
	    "t.conf:1: url: item 1 \"dubbo://a:1?=x\": a parameter has no "
	    "name (\"=x\")");
	refused("url=dubbo://a:1;dubbo://b:1;dubbo://a:1?weight=5\n",
	    "t.conf:1: url: item 3: address a:1 is item 1's too");
	refused("url=dubbo://a b:1\n",
	    "t.conf:1: url: item 1 \"dubbo://a b:1\": host \"a b\" has a "
	    "character that is not in a host name");
	/* Weight 0 is an endpoint's weight, not a mistake. */
	accepted("url=dubbo://a:1?weight=0\n");
}

static void
test_url_with_a_registry(void **state)
{
	(void)state;
	/* Dubbo lets url= win and ignores the registry; resil refuses the
	 * pair (the registry would be accepted and unused). */
	refused("service=S\nregistry=zookeeper://127.0.0.1:2181\n"
	        "url=dubbo://10.0.0.1:20880\n",
	    "t.conf:3: url: the listed endpoints and "
	    "registry=zookeeper://127.0.0.1:2181 at t.conf:2 both give the "
	    "providers; use one (registry=N/A with url= is Dubbo's direct "
	    "connection)");
	/* Whatever the order. */
	refused("url=dubbo://10.0.0.1:20880\nservice=S\n"
	        "registry=zookeeper://127.0.0.1:2181\n",
	    "t.conf:1: url: the listed endpoints and "
	    "registry=zookeeper://127.0.0.1:2181 at t.conf:3 both give the "
	    "providers; use one (registry=N/A with url= is Dubbo's direct "
	    "connection)");
	accepted("service=S\nregistry=N/A\nurl=dubbo://10.0.0.1:20880\n");
	accepted("service=S\nregistry=zookeeper://127.0.0.1:2181\n");
}

static void
test_url_through_the_c_api(void **state)
{
	resil_cluster_text *ct;
	resil_directory_config dc;
	resil_diag diag;

	(void)state;
	/* Without origin: no origin:line; a second url= replaces the
	 * first's list. */
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	assert_int_equal(
	    resil_cluster_text_set(ct, "url", "dubbo://a:1", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_cluster_text_set(
	        ct, "url", "dubbo://b:1;dubbo://c:1?weight=7", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_cluster_text_set(ct, "url", "dubbo://b", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "url: item 1 \"dubbo://b\": no port (protocol://host:port)");
	assert_int_equal(
	    resil_cluster_text_set(ct, "url", "", "x.conf", 4, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "x.conf:4: url: empty (provider URLs separated by ';': "
	    "dubbo://10.0.0.1:20880;dubbo://10.0.0.2:20880)");
	assert_int_equal(resil_cluster_text_finish(ct, &diag), RESIL_OK);
	resil_directory_config_init(&dc);
	resil_cluster_text_directory(ct, &dc);
	assert_int_equal(dc.nendpoints, 2);
	assert_string_equal(dc.endpoints[0].address, "b:1");
	assert_string_equal(dc.endpoints[1].address, "c:1");
	assert_int_equal(dc.endpoints[1].weight, 7);
	assert_string_equal(dc.endpoints[1].params, "protocol=dubbo&weight=7");
	resil_cluster_text_free(ct);
}

static void
test_url_out_of_memory(void **state)
{
	static const char text[] =
	    "url=dubbo://10.0.0.1:20880/com.foo.S?weight=200&zone=hz&tag=g&"
	    "version=1;mock://m:1?mock=return 5\n"
	    "endpoint.breaker.consecutive_failures=3\n";
	resil_config *conf;
	resil_diag diag;
	fail_alloc fa;
	uint64_t nth;
	resil_err err;

	(void)state;
	/* Every allocation refused in turn: RESIL_E_NOMEM, nothing leaked;
	 * then it parses. */
	for (nth = 1;; nth++) {
		const resil_allocator *a = fail_alloc_init(&fa, nth);
		conf = NULL;
		err =
		    resil_config_parse_string(&conf, text, "t.conf", a, &diag);
		if (err == RESIL_OK) {
			resil_config_free(conf);
			assert_int_equal(fail_alloc_live(&fa), 0);
			break;
		}
		assert_int_equal(err, RESIL_E_NOMEM);
		assert_null(conf);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_int_equal(fa.size_mismatch, 0);
		assert_true(nth < 10000);
	}
	assert_int_equal(fa.size_mismatch, 0);
}

/* ---- endpoint.breaker.* ----------------------------------------------------
 */

static void
test_endpoint_breaker_keys(void **state)
{
	resil_directory_config dc;
	resil_config *conf;
	const resil_breaker_config *eb;

	(void)state;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "endpoint.breaker.consecutive_failures=3\n"
	                     "endpoint.breaker.failure_rate=0\n"
	                     "endpoint.breaker.slow_rate=40\n"
	                     "endpoint.breaker.slow_threshold=250\n"
	                     "endpoint.breaker.min_calls=4\n"
	                     "endpoint.breaker.window=TIME\n"
	                     "endpoint.breaker.window_size=60\n"
	                     "endpoint.breaker.bucket=2s\n"
	                     "endpoint.breaker.open_wait=1500\n"
	                     "endpoint.breaker.open_wait_multiplier=2.5\n"
	                     "endpoint.breaker.open_wait_max=1m\n"
	                     "endpoint.breaker.probes=3\n"
	                     "endpoint.breaker.reopen_on_first_failure=true\n"
	                     "endpoint.breaker.max_half_open=10s\n",
	                     "t.conf", NULL, NULL),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	assert_int_equal(resil_config_directory(conf, &dc), 1);
	assert_non_null(eb = dc.endpoint_breaker);
	assert_int_equal(eb->consecutive_failures, 3);
	assert_int_equal(eb->failure_rate_pct, 0);
	assert_int_equal(eb->slow_rate_pct, 40);
	/* A bare number in a duration key is milliseconds. */
	assert_int_equal(eb->slow_threshold_ns, 250 * RESIL_NS_PER_MS);
	assert_int_equal(eb->min_calls, 4);
	assert_int_equal(eb->window_type, RESIL_WINDOW_TIME);
	assert_int_equal(eb->window_size, 60);
	assert_int_equal(eb->bucket_ns, 2 * RESIL_NS_PER_SEC);
	assert_int_equal(eb->open_wait_ns, 1500 * RESIL_NS_PER_MS);
	assert_true(eb->open_wait_multiplier == 2.5);
	assert_int_equal(eb->open_wait_max_ns, 60 * RESIL_NS_PER_SEC);
	assert_int_equal(eb->permitted_probes, 3);
	assert_int_equal(eb->reopen_on_first_failure, 1);
	assert_int_equal(eb->max_half_open_ns, 10 * RESIL_NS_PER_SEC);
	resil_config_free(conf);

	/* Without the keys the caller's breaker stays; enabled=true alone
	 * gives the defaults; enabled=false removes the caller's. */
	{
		resil_breaker_config mine = resil_breaker_config_default();

		assert_int_equal(
		    resil_config_parse_string(
		        &conf, "loadbalance=p2c\n", "t.conf", NULL, NULL),
		    RESIL_OK);
		resil_directory_config_init(&dc);
		dc.endpoint_breaker = &mine;
		assert_int_equal(resil_config_directory(conf, &dc), 1);
		assert_ptr_equal(dc.endpoint_breaker, &mine);
		resil_config_free(conf);
		assert_int_equal(
		    resil_config_parse_string(&conf,
		        "endpoint.breaker.enabled=false\n"
		        "endpoint.breaker.consecutive_failures=3\n",
		        "t.conf", NULL, NULL),
		    RESIL_OK);
		assert_int_equal(resil_config_directory(conf, &dc), 1);
		assert_null(dc.endpoint_breaker);
		resil_config_free(conf);
		assert_int_equal(resil_config_parse_string(&conf,
		                     "endpoint.breaker.enabled=yes\n",
		                     "t.conf", NULL, NULL),
		    RESIL_OK);
		assert_int_equal(resil_config_directory(conf, &dc), 1);
		assert_non_null(eb = dc.endpoint_breaker);
		assert_int_equal(eb->failure_rate_pct, 50);
		assert_int_equal(eb->open_wait_ns, 30 * RESIL_NS_PER_SEC);
		resil_config_free(conf);
	}
}

static void
test_endpoint_breaker_opens_per_endpoint(void **state)
{
	resil_endpoint_state st;
	resil_pick p;
	uint64_t id_a = 0;
	built b;
	int i;

	(void)state;
	build(&b,
	    "registry=N/A\nurl=dubbo://a:1;dubbo://b:1\n"
	    "endpoint.breaker.consecutive_failures=2\n"
	    "endpoint.breaker.failure_rate=0\n"
	    "endpoint.breaker.open_wait=500\n"
	    "outlier.max_ejection_pct=0\n");
	assert_non_null(resil_directory_breaker(b.d, "a:1"));
	assert_non_null(resil_directory_breaker(b.d, "b:1"));
	/* Two failures of a:1 open its breaker, not b:1's. */
	for (i = 0; i < 2; i++) {
		assert_int_equal(
		    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
		assert_int_equal(
		    resil_selector_pick_at(b.sel, b.c, 0, &p, &b.diag),
		    RESIL_OK);
		assert_string_equal(p.address, "a:1");
		id_a = p.id;
		assert_int_equal(
		    resil_selector_report(b.sel, &p, RESIL_OUTCOME_FAILURE),
		    RESIL_OK);
	}
	assert_int_equal(resil_directory_get_state(b.d, "a:1", &st), RESIL_OK);
	assert_int_equal(st.breaker, RESIL_BREAKER_OPEN);
	assert_int_equal(resil_directory_get_state(b.d, "b:1", &st), RESIL_OK);
	assert_int_equal(st.breaker, RESIL_BREAKER_CLOSED);
	/* Open: not a candidate. */
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	/* open_wait=500 is 500 ms: at 499 ms still out, at 500 ms back. */
	resil_manual_clock_advance(&b.mc, 499 * RESIL_NS_PER_MS);
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 1);
	resil_manual_clock_advance(&b.mc, RESIL_NS_PER_MS);
	assert_int_equal(
	    resil_selector_route(b.sel, NULL, b.c, &b.diag), RESIL_OK);
	assert_int_equal(resil_candidates_count(b.c), 2);
	(void)id_a;
	unbuild(&b);
}

static void
test_endpoint_breaker_bad_values(void **state)
{
	(void)state;
	refused("endpoint.breaker.failure_rate=101\n",
	    "t.conf:1: endpoint.breaker.failure_rate: 101 is out of range "
	    "0..100");
	refused("endpoint.breaker.probes=0\n",
	    "t.conf:1: endpoint.breaker.probes: 0 is out of range 1..32767");
	refused("endpoint.breaker.window=sliding\n",
	    "t.conf:1: endpoint.breaker.window: \"sliding\" is not one of "
	    "count, time");
	refused("endpoint.breaker.open_wait_multiplier=0.5\n",
	    "t.conf:1: endpoint.breaker.open_wait_multiplier: 0.5 is out of "
	    "range 1..1000");
	refused("endpoint.breaker.open_wait_multiplier=x2\n",
	    "t.conf:1: endpoint.breaker.open_wait_multiplier: \"x2\" is not a "
	    "number");
	refused("endpoint.breaker.reopen_on_first_failure=sure\n",
	    "t.conf:1: endpoint.breaker.reopen_on_first_failure: \"sure\" is "
	    "not a boolean");
	refused("endpoint.breaker.open_wait=5 s\n",
	    "t.conf:1: endpoint.breaker.open_wait: \"5 s\": write the unit "
	    "next to the number (5s)");
	refused("endpoint.breaker.bucket=0\n",
	    "t.conf:1: endpoint.breaker.bucket: 0 is below the minimum of "
	    "0.000001ms (1ns)");
	/* The cross-field rules, at the line of the last breaker key. */
	refused("endpoint.breaker.failure_rate=0\nloadbalance=p2c\n",
	    "t.conf:1: endpoint.breaker: no trigger: set "
	    "endpoint.breaker.consecutive_failures, .failure_rate or "
	    ".slow_rate above 0");
	refused("endpoint.breaker.slow_rate=50\n",
	    "t.conf:1: endpoint.breaker.slow_threshold: 0 must be above 0 "
	    "when endpoint.breaker.slow_rate is set");
	refused("endpoint.breaker.min_calls=0\n",
	    "t.conf:1: endpoint.breaker.min_calls: 0 must be >= 1 when a rate "
	    "trigger is set");
	refused("endpoint.breaker.window=time\n"
	        "endpoint.breaker.window_size=4000\n",
	    "t.conf:2: endpoint.breaker.window_size: 4000 buckets is out of "
	    "range 1..3600 for endpoint.breaker.window=time");
	refused("endpoint.breaker.open_wait=10s\n"
	        "endpoint.breaker.open_wait_max=5000\n",
	    "t.conf:2: endpoint.breaker.open_wait_max: 5s is below "
	    "endpoint.breaker.open_wait (10s)");
	refused("endpoint.breaker.open_wiat=5s\n",
	    "t.conf:1: endpoint.breaker.open_wiat: unknown key (did you mean "
	    "endpoint.breaker.open_wait?)");
	refused("endpoint.breaker.colour=red\n",
	    "t.conf:1: endpoint.breaker.colour: unknown key (the service "
	    "breaker's keys after endpoint., or endpoint.breaker.enabled)");
	/* Off: its settings are not checked. */
	accepted("endpoint.breaker.failure_rate=0\n"
	         "endpoint.breaker.enabled=false\n");
}

/* ---- zone-aware with the selector's zone routing -------------------------
 */

static void
test_zone_aware_with_router_zone_refused(void **state)
{
	resil_selector_config sc;
	resil_config *conf;

	(void)state;
	/* docs/cluster.md: "Do not turn on the selector's own zone routing
	 * (router.zone=) with zone-aware". */
	refused("cluster=zone-aware\nzone=hz\nrouter.zone=hz\n",
	    "t.conf:3: router.zone: the selector's zone routing (mode prefer) "
	    "would remove the other zones before zone-aware could cross "
	    "(cluster=zone-aware at t.conf:1); name the caller's zone with "
	    "zone=, or set router.zone.mode=off");
	refused("router.zone=hz\nrouter.zone.mode=strict\nzone=hz\n"
	        "cluster=zone-aware\n",
	    "t.conf:1: router.zone: the selector's zone routing (mode strict) "
	    "would remove the other zones before zone-aware could cross "
	    "(cluster=zone-aware at t.conf:4); name the caller's zone with "
	    "zone=, or set router.zone.mode=off");
	/* zone= alone with a mode: the mode would be overridden to off. */
	refused("cluster=zone-aware\nzone=hz\nrouter.zone.mode=proportional\n",
	    "t.conf:3: router.zone.mode: proportional would remove the other "
	    "zones before zone-aware could cross (cluster=zone-aware at "
	    "t.conf:1); zone-aware routes by zone itself: drop the key or set "
	    "it to off");
	/* Mode off: the zone names the caller for condition rules only. */
	accepted("cluster=zone-aware\nzone=hz\nrouter.zone=hz\n"
	         "router.zone.mode=off\n");
	accepted("cluster=zone-aware\nzone=hz\n");
	accepted("cluster=failover\nrouter.zone=hz\n");
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "cluster=zone-aware\nzone=hz\nrouter.zone.mode=off\n",
	        "t.conf", NULL, NULL),
	    RESIL_OK);
	(void)resil_config_selector(conf, &sc);
	assert_string_equal(sc.local_zone, "hz");
	assert_int_equal(sc.zone_mode, RESIL_ZONE_OFF);
	resil_config_free(conf);
}

static void
test_zone_aware_set_without_lines(void **state)
{
	resil_config *conf;
	resil_diag diag;

	(void)state;
	/* A key made by resil_config_set has no line: the message names
	 * the keys without one. */
	assert_int_equal(
	    resil_config_parse_string(
	        &conf, "cluster=zone-aware\nzone=hz\n", "t.conf", NULL, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_set(conf, "router.zone", "hz", &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "router.zone: the selector's zone routing (mode prefer) would "
	    "remove the other zones before zone-aware could cross "
	    "(cluster=zone-aware at t.conf:1); name the caller's zone with "
	    "zone=, or set router.zone.mode=off");
	resil_config_free(conf);
}

static void
test_zone_keys_without_their_mode_refused(void **state)
{
	resil_cluster_text *ct;
	resil_diag diag;

	(void)state;
	/* Envoy's zone-aware routing keys, read by proportional only. */
	refused("router.zone=hz\nrouter.zone.consumers=hz:3,sh:1\n",
	    "t.conf:2: router.zone.consumers: read by "
	    "router.zone.mode=proportional only (the mode is prefer)");
	refused("router.zone=hz\nrouter.zone.mode=strict\n"
	        "router.zone.min_cluster_size=3\n",
	    "t.conf:3: router.zone.min_cluster_size: read by "
	    "router.zone.mode=proportional only (the mode is strict)");
	accepted("router.zone=hz\nrouter.zone.mode=proportional\n"
	         "router.zone.consumers=hz:3,sh:1\n"
	         "router.zone.min_cluster_size=3\n");
	/* Through the C API: at finish, without origin:line. */
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	assert_int_equal(resil_cluster_text_set(ct, "router.zone.consumers",
	                     "hz:1", NULL, 0, &diag),
	    RESIL_OK);
	assert_int_equal(resil_cluster_text_finish(ct, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "router.zone.consumers: read by router.zone.mode=proportional "
	    "only (the mode is prefer)");
	resil_cluster_text_free(ct);

	/* A zone mode needs the caller's zone, from either key. */
	refused("service=S\nrouter.zone.mode=strict\n",
	    "t.conf:2: router.zone.mode: strict routes by the caller's zone, "
	    "and none is given (router.zone= or zone=)");
	accepted("service=S\nzone=sh\nrouter.zone.mode=strict\n");
	accepted("service=S\nrouter.zone=sh\nrouter.zone.mode=strict\n");
	accepted("service=S\nrouter.zone.mode=off\n");
}

/* Issue 38.8: range messages in the user's unit, not the directory's
 * nanoseconds (docs/config.md promises units). */
static void
test_outlier_ranges_in_the_users_unit(void **state)
{
	(void)state;
	/* The text: 10000000000 and 30000000000 before. */
	refused("outlier.base_ejection=30s\noutlier.max_ejection=10s\n",
	    "t.conf:2: outlier.max_ejection: 10s is below "
	    "outlier.base_ejection (30s)");
	/* The default base (30 s), a value in milliseconds, a fraction. */
	refused("outlier.max_ejection=1500\n",
	    "t.conf:1: outlier.max_ejection: 1500ms is below "
	    "outlier.base_ejection (30s)");
	refused("outlier.max_ejection=2.5m\noutlier.base_ejection=1h\n"
	        "outlier.interval=1s\n",
	    "t.conf:3: outlier.max_ejection: 150s is below "
	    "outlier.base_ejection (1h)");
	/* Off (max_ejection_pct=0): not checked, as in C. */
	accepted("outlier.max_ejection_pct=0\noutlier.max_ejection=1s\n");
	accepted("outlier.base_ejection=10s\noutlier.max_ejection=10s\n");
	/* One key's bounds, in the unit the value was written in. */
	refused("outlier.interval=0\n",
	    "t.conf:1: outlier.interval: 0 is below the minimum of "
	    "0.000001ms (1ns)");
	refused("outlier.base_ejection=0s\n",
	    "t.conf:1: outlier.base_ejection: 0s is below the minimum of "
	    "0.000000001s (1ns)");
	refused("loadbalance=peakewma\nloadbalance.peakewma.tau=0us\n",
	    "t.conf:2: loadbalance.peakewma.tau: 0us is below the minimum "
	    "of 0.001us (1ns)");
	refused("outlier.interval=99999999999999999999s\n",
	    "t.conf:1: outlier.interval: 99999999999999999999s is out of "
	    "range 0s..18446744073.709551615s");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_endpoints_start_the_directory),
		cmocka_unit_test(test_url_params_reach_condition_rules),
		cmocka_unit_test(test_url_mock_provider),
		cmocka_unit_test(test_url_without_it_leaves_the_callers_list),
		cmocka_unit_test(test_url_bad_urls_refused),
		cmocka_unit_test(test_url_with_a_registry),
		cmocka_unit_test(test_url_through_the_c_api),
		cmocka_unit_test(test_url_out_of_memory),
		cmocka_unit_test(test_endpoint_breaker_keys),
		cmocka_unit_test(test_endpoint_breaker_opens_per_endpoint),
		cmocka_unit_test(test_endpoint_breaker_bad_values),
		cmocka_unit_test(test_zone_aware_with_router_zone_refused),
		cmocka_unit_test(test_zone_aware_set_without_lines),
		cmocka_unit_test(test_zone_keys_without_their_mode_refused),
		cmocka_unit_test(test_outlier_ranges_in_the_users_unit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

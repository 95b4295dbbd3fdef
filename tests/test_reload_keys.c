/*
 * Issue 24.1: a text reload's selector, directory and registry keys.
 * Each row changes, adds or removes one key of a running cluster
 * pipeline made from text: the reload either takes effect (the condition
 * rules: the next call routes by the new ones) or is refused with the
 * key and origin:line, the pipeline unchanged. None is accepted and
 * ignored (before: every row below returned RESIL_OK).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#define BASE                                        \
	"service=StockService\n"                    \
	"cluster=failover\n"                        \
	"retries=2\n"                               \
	"loadbalance=roundrobin\n"                  \
	"outlier.consecutive_failures=5\n"          \
	"panic.threshold=50\n"                      \
	"router.condition=method = getPrice => tier = premium\n"

static const char *const addr[3] = { "10.0.0.1:20880", "10.0.0.2:20880",
	"10.0.0.3:20880" };

typedef struct fx {
	resil_config *conf;
	resil_directory *dir;
	resil_selector *sel;
	resil_pipeline *p;
} fx;

static void
fx_up(fx *f, const char *text, int with_text)
{
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_endpoint_spec specs[3];
	resil_diag d;
	int i;

	memset(f, 0, sizeof(*f));
	if (resil_config_parse_string(&f->conf, text, "svc.conf", NULL, &d) !=
	    RESIL_OK)
		fail_msg("%s", d.msg);
	resil_directory_config_init(&dc);
	resil_config_directory(f->conf, &dc);
	resil_config_selector(f->conf, &sc);
	pc = *resil_config_pipeline(f->conf);
	if (!with_text)
		pc.cluster_keys = NULL; /* as a configuration made in C */
	assert_int_equal(resil_directory_new(&f->dir, &dc, &d), RESIL_OK);
	assert_int_equal(resil_selector_new(&f->sel, f->dir, &sc, &d), RESIL_OK);
	pc.selector = f->sel;
	if (resil_pipeline_new(&f->p, &pc, &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	for (i = 0; i < 3; i++)
		specs[i] = resil_endpoint_spec_default(addr[i]);
	specs[2].params = "tier=premium";
	assert_int_equal(resil_directory_push(f->dir, specs, 3, &d), RESIL_OK);
}

static void
fx_down(fx *f)
{
	resil_pipeline_free(f->p);
	resil_selector_free(f->sel);
	resil_directory_free(f->dir);
	resil_config_free(f->conf);
}

static int
provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	*out = resil_value_int(1);
	return 0;
}

/* The endpoint that answered method's call ("" for none). */
static const char *
answered(fx *f, const char *method, char *buf)
{
	resil_invocation inv;
	resil_result r;

	resil_invocation_init(&inv, method);
	resil_result_init(&r);
	(void)resil_pipeline_invoke_ex(f->p, NULL, &inv, provider, NULL, &r);
	snprintf(buf, 64, "%s", r.endpoint);
	resil_result_free(&r);
	return buf;
}

/* A refused row: the text (BASE with one line replaced, added or
 * removed) and the exact message. */
typedef struct row {
	const char *text;
	const char *msg;
} row;

#define SEL_WHY                                                         \
	"cannot change by reload (the selector's balancers and routers are " \
	"made once, by resil_selector_new(); build them again to change it)"
#define DIR_WHY                                                            \
	"cannot change by reload (the directory's endpoints, outlier "       \
	"detection and health checks are made once, by resil_directory_new(); " \
	"build them again to change it)"

#define FIXED_WHY                                                             \
	"cannot change by reload (it is fixed when the pipeline is created; " \
	"build a new pipeline to change it)"

static const row refused[] = {
	{ "service=StockService\ncluster=failover\nretries=2\n"
	  "loadbalance=random\noutlier.consecutive_failures=5\n"
	  "panic.threshold=50\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf:4: loadbalance: " SEL_WHY },
	{ BASE "loadbalance.seed=7\n", "svc.conf:8: loadbalance.seed: " SEL_WHY },
	{ BASE "getStock.loadbalance=hash\n",
	    "svc.conf:8: getStock.loadbalance: " SEL_WHY },
	{ BASE "router.zone=hz\n", "svc.conf:8: router.zone: " SEL_WHY },
	{ BASE "router.tag.force=true\n",
	    "svc.conf:8: router.tag.force: " SEL_WHY },
	{ "service=StockService\ncluster=failover\nretries=2\n"
	  "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	  "panic.threshold=60\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf:6: panic.threshold: " SEL_WHY },
	{ "service=StockService\ncluster=failover\nretries=2\n"
	  "loadbalance=roundrobin\noutlier.consecutive_failures=3\n"
	  "panic.threshold=50\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf:5: outlier.consecutive_failures: " DIR_WHY },
	{ BASE "outlier.base_ejection=10s\n",
	    "svc.conf:8: outlier.base_ejection: " DIR_WHY },
	{ BASE "health.interval=5s\n", "svc.conf:8: health.interval: " DIR_WHY },
	{ BASE "registry.empty_protection=false\n",
	    "svc.conf:8: registry.empty_protection: " DIR_WHY },
	{ BASE "endpoint.breaker.consecutive_failures=3\n",
	    "svc.conf:8: endpoint.breaker.consecutive_failures: " DIR_WHY },
	{ BASE "url=dubbo://10.0.0.9:20880\n", "svc.conf:8: url: " DIR_WHY },
	/* A key the reload leaves out: the origin and the key. */
	{ "service=StockService\ncluster=failover\nretries=2\n"
	  "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf: panic.threshold: cannot change by reload (the "
	    "selector's balancers and routers are made once, by "
	    "resil_selector_new(); build them again to remove it)" },
};

static void
test_reload_refuses_each_cluster_key(void **state)
{
	size_t i;
	char buf[64];

	(void)state;
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		fx f;
		resil_diag d;

		fx_up(&f, BASE, 1);
		d.msg[0] = '\0';
		if (resil_pipeline_reload_string(f.p, refused[i].text,
		        "svc.conf", &d) != RESIL_E_INVAL)
			fail_msg("row %zu accepted", i);
		if (strcmp(d.msg, refused[i].msg) != 0)
			fail_msg("row %zu: %s", i, d.msg);
		/* Unchanged: round robin over the three, the rule kept. */
		assert_int_equal(resil_selector_condition_count(f.sel), 1);
		assert_string_equal(answered(&f, "getPrice", buf), addr[2]);
		fx_down(&f);
	}
}

/* Every selector, directory and registry key of docs/config.md, each
 * added to BASE (line 8) with a valid value: refused, naming it. */
static const char *const every_key[][2] = {
	{ "loadbalance.hash.nodes", "160" },
	{ "loadbalance.hash.arguments", "0" },
	{ "loadbalance.peakewma.tau", "10s" },
	{ "loadbalance.peakewma.default_rtt", "5" },
	{ "loadbalance.shortest.slide", "30s" },
	{ "getStock.loadbalance.hash.nodes", "80" },
	{ "loadbalance.seed", "7" },
	{ "router.zone", "hz" },
	{ "router.zone.mode", "off" },
	{ "router.zone.min_cluster_size",
	    "2\nrouter.zone.mode=proportional\nrouter.zone=hz" },
	{ "router.zone.consumers",
	    "hz:2,sh:1\nrouter.zone.mode=proportional\nrouter.zone=hz" },
	{ "router.tag.force", "true" },
	{ "registry.empty_protection", "false" },
	{ "outlier.max_ejection_pct", "20" },
	{ "outlier.base_ejection", "10s" },
	{ "outlier.max_ejection", "600s" },
	{ "outlier.interval", "5s" },
	{ "outlier.success_rate_minimum_hosts", "3" },
	{ "outlier.success_rate_request_volume", "10" },
	{ "outlier.success_rate_stdev_factor", "1000" },
	{ "outlier.enforcing_success_rate", "50" },
	{ "outlier.failure_percentage_threshold", "60" },
	{ "outlier.failure_percentage_minimum_hosts", "3" },
	{ "outlier.failure_percentage_request_volume", "10" },
	{ "outlier.enforcing_failure_percentage", "50" },
	{ "outlier.enforcing_consecutive_failures", "50" },
	{ "health.enabled", "true" },
	{ "health.interval", "5s" },
	{ "health.timeout", "500" },
	{ "health.unhealthy_interval", "2s" },
	{ "health.unhealthy_edge_interval", "1s" },
	{ "health.healthy_edge_interval", "1s" },
	{ "health.interval_jitter", "100" },
	{ "health.initial_jitter", "100" },
	{ "health.interval_jitter_percent", "10" },
	{ "health.unhealthy_threshold", "3" },
	{ "health.healthy_threshold", "2" },
	{ "health.seed", "9" },
	{ "health.initial", "unhealthy" },
	{ "endpoint.breaker.enabled", "true" },
	{ "endpoint.breaker.consecutive_failures", "3" },
	{ "endpoint.breaker.failure_rate", "50" },
	{ "endpoint.breaker.slow_rate",
	    "50\nendpoint.breaker.slow_threshold=2s" },
	{ "endpoint.breaker.slow_threshold", "2s" },
	{ "endpoint.breaker.min_calls", "5" },
	{ "endpoint.breaker.window", "count" },
	{ "endpoint.breaker.window_size", "20" },
	{ "endpoint.breaker.bucket", "1s" },
	{ "endpoint.breaker.open_wait", "10s" },
	{ "endpoint.breaker.open_wait_multiplier", "2" },
	{ "endpoint.breaker.open_wait_max", "60s" },
	{ "endpoint.breaker.probes", "2" },
	{ "endpoint.breaker.reopen_on_first_failure", "true" },
	{ "endpoint.breaker.max_half_open", "30s" },
	{ "url", "dubbo://10.0.0.9:20880" },
	{ "registry", "N/A" },
};

static void
test_reload_refuses_every_key(void **state)
{
	size_t i, bad = 0;

	(void)state;
	for (i = 0; i < sizeof(every_key) / sizeof(every_key[0]); i++) {
		char text[512], want[160];
		resil_diag d;
		fx f;

		snprintf(text, sizeof(text), BASE "%s=%s\n", every_key[i][0],
		    every_key[i][1]);
		snprintf(want, sizeof(want),
		    "svc.conf:8: %s: cannot change by reload (",
		    every_key[i][0]);
		fx_up(&f, BASE, 1);
		d.msg[0] = '\0';
		if (resil_pipeline_reload_string(f.p, text, "svc.conf", &d) !=
		        RESIL_E_INVAL ||
		    strncmp(d.msg, want, strlen(want)) != 0) {
			print_error("%s: %s\n", every_key[i][0],
			    d.msg[0] != '\0' ? d.msg : "accepted");
			bad++;
		}
		fx_down(&f);
	}
	assert_int_equal(bad, 0);
}

static void
test_reload_same_keys_is_ok(void **state)
{
	fx f;
	resil_diag d;

	(void)state;
	fx_up(&f, BASE, 1);
	/* The same keys (and a pipeline key changed) reload. */
	if (resil_pipeline_reload_string(f.p, BASE "timeout=2000\n",
	        "svc.conf", &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	/* Twice: the pipeline keeps the last reload's keys. */
	if (resil_pipeline_reload_string(f.p, BASE, "svc2.conf", &d) !=
	    RESIL_OK)
		fail_msg("%s", d.msg);
	fx_down(&f);
}

static void
test_reload_applies_condition_rules(void **state)
{
	fx f;
	resil_diag d;
	char buf[64];
	int i, premium = 0;

	(void)state;
	fx_up(&f, BASE, 1);
	assert_string_equal(answered(&f, "getPrice", buf), addr[2]);
	/* The rule changed: getStock now goes to the premium tier and
	 * getPrice anywhere. */
	if (resil_pipeline_reload_string(f.p,
	        "service=StockService\ncluster=failover\nretries=2\n"
	        "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	        "panic.threshold=50\n"
	        "router.condition=method = getStock => tier = premium\n",
	        "svc.conf", &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	assert_int_equal(resil_selector_condition_count(f.sel), 1);
	for (i = 0; i < 6; i++) {
		assert_string_equal(answered(&f, "getStock", buf), addr[2]);
		premium += strcmp(answered(&f, "getPrice", buf), addr[2]) == 0;
	}
	assert_true(premium < 6);
	/* Two rules, then none. */
	if (resil_pipeline_reload_string(f.p,
	        BASE "router.condition=method = getStock => tier = premium\n",
	        "svc.conf", &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	assert_int_equal(resil_selector_condition_count(f.sel), 2);
	if (resil_pipeline_reload_string(f.p,
	        "service=StockService\ncluster=failover\nretries=2\n"
	        "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	        "panic.threshold=50\n",
	        "svc.conf", &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	assert_int_equal(resil_selector_condition_count(f.sel), 0);
	premium = 0;
	for (i = 0; i < 6; i++)
		premium += strcmp(answered(&f, "getPrice", buf), addr[2]) == 0;
	assert_true(premium < 6);
	fx_down(&f);
}

static void
test_reload_of_a_pipeline_made_in_c(void **state)
{
	fx f;
	resil_diag d;

	(void)state;
	/* A pipeline whose configuration came from C has no cluster keys:
	 * a text that brings one is refused, not ignored. */
	fx_up(&f, BASE, 0);
	assert_int_equal(
	    resil_pipeline_reload_string(f.p, BASE, "svc.conf", &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "svc.conf:4: loadbalance: " SEL_WHY);
	/* A reload in C (cluster_keys NULL) keeps what runs. */
	{
		resil_pipeline_config pc = *resil_config_pipeline(f.conf);

		pc.cluster_keys = NULL;
		pc.selector = f.sel;
		if (resil_pipeline_reload(f.p, &pc, &d) != RESIL_OK)
			fail_msg("%s", d.msg);
	}
	fx_down(&f);
}

/* Issue 38.10: the pipeline's own keys a reload cannot change are
 * refused naming the key and the reload's origin:line (before: "cluster:
 * cannot change by reload" for any cluster key, with no line). */
static const row fixed_keys[] = {
	{ "service=StockService\ncluster=failover\nretries=5\n"
	  "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	  "panic.threshold=50\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf:3: retries (cluster.retries): " FIXED_WHY },
	{ "service=StockService\ncluster=failfast\n"
	  "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	  "panic.threshold=50\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf:2: cluster (cluster.strategy): " FIXED_WHY },
	{ BASE "zone=hz\n",
	    "svc.conf:8: zone (cluster.local_zone): " FIXED_WHY },
	/* Hedging with a selector (issue 43): fixed at creation. */
	{ BASE "hedge.max=1\n",
	    "svc.conf:8: hedge.max (hedge_max): " FIXED_WHY },
	{ BASE "hedge.on=timeout\n",
	    "svc.conf:8: hedge.on (hedge_fatal): " FIXED_WHY },
	{ BASE "hedge.delay=20\n",
	    "svc.conf:8: hedge.delay (hedge_delay_ns): " FIXED_WHY },
	{ "service=OrderService\ncluster=failover\nretries=2\n"
	  "loadbalance=roundrobin\noutlier.consecutive_failures=5\n"
	  "panic.threshold=50\n"
	  "router.condition=method = getPrice => tier = premium\n",
	    "svc.conf:1: service: cannot change by reload (OrderService is "
	    "not StockService: a pipeline serves one service)" },
	{ BASE "getStock.chaos.fault=-5\ngetStock.chaos.rate=0.5\n",
	    "svc.conf:8: chaos: " FIXED_WHY },
};

static void
test_reload_refusals_name_key_and_line(void **state)
{
	size_t i, bad = 0;

	(void)state;
	for (i = 0; i < sizeof(fixed_keys) / sizeof(fixed_keys[0]); i++) {
		resil_diag d;
		fx f;

		fx_up(&f, BASE, 1);
		d.msg[0] = '\0';
		if (resil_pipeline_reload_string(f.p, fixed_keys[i].text,
		        "svc.conf", &d) != RESIL_E_INVAL ||
		    strcmp(d.msg, fixed_keys[i].msg) != 0) {
			print_error("row %zu: %s\n", i,
			    d.msg[0] != '\0' ? d.msg : "accepted");
			bad++;
		}
		fx_down(&f);
	}
	assert_int_equal(bad, 0);
}

/* A fixed key the reload leaves out: the origin and the key. */
static void
test_reload_refusal_of_a_key_left_out(void **state)
{
	resil_diag d;
	fx f;

	(void)state;
	fx_up(&f, BASE "forks=3\n", 1);
	assert_int_equal(
	    resil_pipeline_reload_string(f.p, BASE, "svc.conf", &d),
	    RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "svc.conf: forks (cluster.forks): " FIXED_WHY);
	fx_down(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reload_refuses_each_cluster_key),
		cmocka_unit_test(test_reload_refuses_every_key),
		cmocka_unit_test(test_reload_same_keys_is_ok),
		cmocka_unit_test(test_reload_applies_condition_rules),
		cmocka_unit_test(test_reload_of_a_pipeline_made_in_c),
		cmocka_unit_test(test_reload_refusals_name_key_and_line),
		cmocka_unit_test(test_reload_refusal_of_a_key_left_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

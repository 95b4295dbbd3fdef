/*
 * Bad input to the functions added with the cluster and the reload: NULL
 * arguments, handles of another pipeline, configurations that do not
 * match, files that are not there. Each must answer with its documented
 * resil_err (or the documented neutral value: 0, NULL), never crash and
 * never accept silently; an object given bad input is unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/chaos.h>
#include <resil/cluster.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/fleet.h>
#include <resil/health.h>
#include <resil/pipeline.h>
#include <resil/router.h>
#include <resil/selector.h>
#include <resil/shm.h>

#define SERVICE "StockService"

typedef struct fx {
	resil_manual_clock mc;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *plain;   /* no selector */
	resil_pipeline *cluster; /* failback over the selector */
	resil_pipeline_recorder rec;
	resil_pipeline_record records[32];
} fx;

static int
ep_ok(void *ctx, const resil_pick *endpoint, const resil_args *args,
    resil_value *out)
{
	(void)ctx;
	(void)endpoint;
	(void)args;
	*out = resil_value_int(1);
	return 0;
}

static int
fx_setup(void **state)
{
	static fx f;
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config cfg;
	resil_endpoint_spec spec;
	resil_diag diag;

	memset(&f, 0, sizeof(f));
	resil_manual_clock_init(&f.mc, 1);
	resil_pipeline_recorder_init(&f.rec, f.records, 32);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&f.mc);
	assert_int_equal(resil_directory_new(&f.d, &dc, &diag), RESIL_OK);
	spec = resil_endpoint_spec_default("10.0.0.1:20880");
	spec.zone = "east";
	assert_int_equal(resil_directory_push(f.d, &spec, 1, &diag), RESIL_OK);
	resil_selector_config_init(&sc);
	sc.service = SERVICE;
	assert_int_equal(
	    resil_selector_new(&f.sel, f.d, &sc, &diag), RESIL_OK);
	resil_pipeline_config_init(&cfg);
	cfg.service = SERVICE;
	cfg.clock = resil_manual_clock_hook(&f.mc);
	cfg.listener = resil_pipeline_recorder_listener;
	cfg.listener_ctx = &f.rec;
	cfg.retry_enabled = 1;
	assert_int_equal(resil_pipeline_new(&f.plain, &cfg, &diag), RESIL_OK);
	cfg.selector = f.sel;
	cfg.cluster.strategy = RESIL_CLUSTER_FAILBACK;
	assert_int_equal(
	    resil_pipeline_new(&f.cluster, &cfg, &diag), RESIL_OK);
	*state = &f;
	return 0;
}

static int
fx_teardown(void **state)
{
	fx *f = *state;

	resil_pipeline_free(f->cluster);
	resil_pipeline_free(f->plain);
	resil_selector_free(f->sel);
	resil_directory_free(f->d);
	return 0;
}

/* ---- reload ---- */

static void
test_bad_reload_null(void **state)
{
	fx *f = *state;
	resil_pipeline_config cfg;
	resil_retry *before = resil_pipeline_retry(f->plain, NULL);
	resil_diag diag;

	resil_pipeline_config_init(&cfg);
	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_pipeline_reload(NULL, &cfg, &diag), RESIL_E_INVAL);
	assert_true(diag.msg[0] != '\0');
	assert_int_equal(
	    resil_pipeline_reload(f->plain, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_reload(f->plain, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_pipeline_reload_string(NULL, "", NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_reload_string(f->plain, NULL, NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_reload_file(NULL, "x.conf", &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_reload_file(f->plain, NULL, &diag), RESIL_E_INVAL);
	/* Nothing changed, nothing reported. */
	assert_ptr_equal(resil_pipeline_retry(f->plain, NULL), before);
	assert_int_equal(f->rec.count, 0);
}

static void
test_bad_reload_config(void **state)
{
	fx *f = *state;
	resil_pipeline_config cfg;
	resil_retry *before = resil_pipeline_retry(f->plain, NULL);
	resil_method_config m[2];
	resil_diag diag;

	/* A struct of another size. */
	resil_pipeline_config_init(&cfg);
	cfg.size = sizeof(cfg) - 8;
	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	assert_true(diag.msg[0] != '\0');
	/* A selector for a pipeline that has none. */
	resil_pipeline_config_init(&cfg);
	cfg.selector = f->sel;
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "selector"));
	/* Methods: NULL with a count, twice the same, a bad name. */
	resil_pipeline_config_init(&cfg);
	cfg.nmethods = 1;
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	memset(m, 0, sizeof(m));
	m[0].name = m[1].name = "getStock";
	cfg.methods = m;
	cfg.nmethods = 2;
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "twice"));
	m[1].name = "get stock";
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	m[1].name = "";
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	m[1].name = "reserve";
	m[1].type = (resil_type)77;
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	/* A mock spec that does not parse. */
	m[1].type = RESIL_TYPE_ANY;
	m[1].mock = "fail:";
	assert_int_equal(
	    resil_pipeline_reload(f->plain, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "reserve"));
	/* The cluster of a cluster pipeline cannot change. */
	resil_pipeline_config_init(&cfg);
	cfg.cluster.strategy = RESIL_CLUSTER_FAILFAST;
	assert_int_equal(
	    resil_pipeline_reload(f->cluster, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "cluster"));
	/* Nothing changed, nothing reported. */
	assert_ptr_equal(resil_pipeline_retry(f->plain, NULL), before);
	assert_int_equal(resil_pipeline_method_count(f->plain), 0);
	assert_int_equal(f->rec.count, 0);
}

static void
test_bad_reload_text(void **state)
{
	fx *f = *state;
	resil_retry *before = resil_pipeline_retry(f->plain, NULL);
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(resil_pipeline_reload_file(
	                     f->plain, "/nonexistent/resil/svc.conf", &diag),
	    RESIL_E_NOTFOUND);
	assert_non_null(strstr(diag.msg, "svc.conf"));
	/* A directory is not a configuration file. */
	assert_int_not_equal(
	    resil_pipeline_reload_file(f->plain, "/", &diag), RESIL_OK);
	assert_int_equal(resil_pipeline_reload_string(f->plain,
	                     "retry.max_attempts=0\n", "svc.conf", &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "svc.conf:1:"));
	assert_int_equal(resil_pipeline_reload_string(
	                     f->plain, "service=Other\n", NULL, &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "service"));
	assert_int_equal(resil_pipeline_reload_string(
	                     f->plain, "hedge.max=1\n", NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_pipeline_reload_string(
	                     f->cluster, "retries=7\n", NULL, &diag),
	    RESIL_E_INVAL);
	assert_ptr_equal(resil_pipeline_retry(f->plain, NULL), before);
	assert_int_equal(f->rec.count, 0);
}

/* ---- invoke, failback, the call machine ---- */

static void
test_bad_invoke(void **state)
{
	fx *f = *state;
	resil_args args = { "getStock", "k", 1 };
	resil_args nomethod = { NULL, "k", 1 };
	const resil_method *h = NULL;
	resil_result r;
	resil_pipeline_metrics m;

	resil_result_init(&r);
	r.rc = 1234; /* untouched on RESIL_E_INVAL */
	assert_int_equal(
	    resil_pipeline_invoke(NULL, NULL, &args, ep_ok, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_invoke(f->cluster, NULL, NULL, ep_ok, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(resil_pipeline_invoke(
	                     f->cluster, NULL, &nomethod, ep_ok, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_invoke(f->cluster, NULL, &args, NULL, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_invoke(f->cluster, NULL, &args, ep_ok, NULL, NULL),
	    RESIL_E_INVAL);
	/* A handle of the other pipeline. */
	assert_int_equal(
	    resil_pipeline_method(f->plain, "getStock", &h), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_invoke(f->cluster, h, &args, ep_ok, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(r.rc, 1234);
	/* None of them counted as a call. */
	assert_int_equal(resil_pipeline_get_metrics(f->cluster, &m), RESIL_OK);
	assert_int_equal(m.calls, 0);
	/* A pipeline with a selector refuses the plain call. */
	assert_int_equal(
	    resil_pipeline_call(f->cluster, &args, NULL, NULL, &r),
	    RESIL_E_INVAL);
}

static void
test_bad_failback(void **state)
{
	fx *f = *state;
	size_t ran = 77;

	assert_int_equal(
	    resil_pipeline_failback_poll(NULL, 0, ep_ok, NULL, &ran),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_failback_poll(f->cluster, 0, NULL, NULL, &ran),
	    RESIL_E_INVAL);
	assert_int_equal(ran, 77);
	/* No failback: nothing to run, *ran 0; ran may be NULL. */
	assert_int_equal(
	    resil_pipeline_failback_poll(f->plain, 0, ep_ok, NULL, &ran),
	    RESIL_OK);
	assert_int_equal(ran, 0);
	assert_int_equal(
	    resil_pipeline_failback_poll(f->cluster, 0, ep_ok, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(resil_pipeline_failback_pending(NULL), 0);
	assert_int_equal(resil_pipeline_failback_pending(f->plain), 0);
	assert_null(resil_pipeline_selector(NULL));
	assert_null(resil_pipeline_selector(f->plain));
	assert_ptr_equal(resil_pipeline_selector(f->cluster), f->sel);
}

static void
test_bad_pipeline_new_cluster(void **state)
{
	fx *f = *state;
	resil_pipeline_config cfg;
	resil_pipeline *p = (resil_pipeline *)state; /* a sentinel */
	resil_diag diag;

	resil_pipeline_config_init(&cfg);
	cfg.service = SERVICE;
	cfg.selector = f->sel;
	/* Bad cluster settings, each refused by name, *out untouched. */
	cfg.cluster.retries = -1;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "retries"));
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.strategy = (resil_cluster_strategy)42;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.failback_queue = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.forks = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.broadcast_fail_percent = 101;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.strategy = RESIL_CLUSTER_ZONE_AWARE;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	/* Forking without an executor is no bad setting (issue 25.5: the
	 * call machine forks without one; resil_pipeline_invoke refuses). */
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.strategy = RESIL_CLUSTER_FORKING;
	{
		resil_pipeline *fp = NULL;

		assert_int_equal(
		    resil_pipeline_new(&fp, &cfg, &diag), RESIL_OK);
		resil_pipeline_free(fp);
	}
	/* Hedging with a selector (issue 43): refused with forking, which
	 * makes its own parallel attempts; hedge_fatal outside its bits. */
	resil_cluster_config_init(&cfg.cluster);
	cfg.cluster.strategy = RESIL_CLUSTER_FORKING;
	cfg.hedge_max = 1;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	cfg.cluster.strategy = RESIL_CLUSTER_FAILOVER;
	cfg.hedge_fatal = 0x8u;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "pipeline.hedge_fatal: 0x8 has bits outside RESIL_HEDGE_ON_ALL "
	    "(0x7)");
	assert_ptr_equal(p, (resil_pipeline *)state);
}

/* ---- config: the selector and directory keys ---- */

static void
test_bad_config_selector(void **state)
{
	resil_config *conf;
	resil_selector_config sc;
	resil_directory_config dc;
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_config_selector(NULL, NULL), 0);
	assert_int_equal(resil_config_directory(NULL, NULL), 0);
	/* A NULL config: *out initialised with defaults, 0. */
	memset(&sc, 0xa5, sizeof(sc));
	assert_int_equal(resil_config_selector(NULL, &sc), 0);
	assert_int_equal(sc.size, sizeof(sc));
	assert_int_equal(resil_selector_config_validate(&sc, &diag), RESIL_OK);
	resil_directory_config_init(&dc);
	dc.outlier.consecutive_failures = 9;
	assert_int_equal(resil_config_directory(NULL, &dc), 0);
	assert_int_equal(dc.outlier.consecutive_failures, 9);
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "service=S\nloadbalance=roundrobin\n", NULL, NULL, &diag),
	    RESIL_OK);
	assert_int_equal(resil_config_directory(conf, NULL), 0);
	assert_int_equal(resil_config_selector(conf, NULL), 0);
	/* Bad selector keys, each with its line and key. */
	assert_int_equal(
	    resil_config_set(conf, "loadbalance", "fastest", &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "loadbalance"));
	assert_int_equal(resil_config_set(conf, "router.condition",
	                     "method = => zone = east", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_set(conf, "panic.threshold", "101", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_set(conf, "outlier.max_ejection_pct", "-1", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_set(conf, "router.zone.consumers", "east:x", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_config_set(conf, "cluster", "fastest", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_set(conf, "forks", "0", &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_set(conf, "getStock.retries", "1000", &diag),
	    RESIL_E_INVAL);
	/* Refused sets changed nothing. */
	assert_int_equal(resil_config_count(conf), 2);
	assert_int_equal(resil_config_selector(conf, &sc), 1);
	assert_int_equal(sc.balance.kind, RESIL_LB_ROUNDROBIN);
	assert_int_equal(sc.nconditions, 0);
	resil_config_free(conf);
	assert_int_equal(
	    resil_config_parse_string(&conf, "service=S\ncluster=zone-aware\n",
	        "z.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "z.conf:2:"));
}

/* router.condition by resil_config_set appends a rule, as a line of text
 * does (it replaced the first rule, keeping the second). */
static void
test_config_set_condition_appends(void **state)
{
	resil_config *conf;
	resil_selector_config sc;
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "service=S\n"
	                     "router.condition=method = a => zone = east\n"
	                     "router.condition=method = b => zone = west\n",
	                     NULL, NULL, &diag),
	    RESIL_OK);
	assert_int_equal(resil_config_selector(conf, &sc), 1);
	assert_int_equal(sc.nconditions, 2);
	assert_int_equal(resil_config_set(conf, "router.condition",
	                     "method = c => tag = gold", &diag),
	    RESIL_OK);
	assert_int_equal(resil_config_selector(conf, &sc), 1);
	assert_int_equal(sc.nconditions, 3);
	assert_string_equal(resil_condition_text(sc.conditions[0]),
	    "method = a => zone = east");
	assert_string_equal(resil_condition_text(sc.conditions[1]),
	    "method = b => zone = west");
	assert_string_equal(resil_condition_text(sc.conditions[2]),
	    "method = c => tag = gold");
	assert_int_equal(resil_config_count(conf), 4);
	resil_config_free(conf);
}

/* ---- directory, selector, cluster, conditions ---- */

static void
test_bad_directory(void **state)
{
	fx *f = *state;
	resil_directory *d = (resil_directory *)state;
	resil_directory_config dc;
	resil_endpoint_spec spec;
	resil_endpoint_state st;
	resil_diag diag;
	uint64_t v = resil_directory_version(f->d);

	assert_int_equal(
	    resil_directory_new(NULL, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_directory_new(&d, NULL, &diag), RESIL_E_INVAL);
	resil_directory_config_init(&dc);
	dc.size = 3;
	assert_int_equal(resil_directory_new(&d, &dc, &diag), RESIL_E_INVAL);
	resil_directory_config_init(&dc);
	dc.outlier.max_ejection_pct = 101;
	assert_int_equal(resil_directory_new(&d, &dc, &diag), RESIL_E_INVAL);
	assert_ptr_equal(d, (resil_directory *)state);
	spec = resil_endpoint_spec_default("10.0.0.9:1");
	assert_int_equal(
	    resil_directory_push(NULL, &spec, 1, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_push(f->d, NULL, 1, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_add(NULL, &spec, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_add(f->d, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_update(f->d, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_remove(f->d, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_remove(NULL, "x", &diag), RESIL_E_INVAL);
	spec.address = NULL;
	assert_int_equal(
	    resil_directory_add(f->d, &spec, &diag), RESIL_E_INVAL);
	spec.address = "";
	assert_int_equal(
	    resil_directory_add(f->d, &spec, &diag), RESIL_E_INVAL);
	spec = resil_endpoint_spec_default("10.0.0.9:1");
	spec.weight = -1;
	assert_int_equal(
	    resil_directory_add(f->d, &spec, &diag), RESIL_E_INVAL);
	spec.weight = 1;
	assert_int_equal(
	    resil_directory_update(f->d, &spec, &diag), RESIL_E_NOTFOUND);
	assert_int_equal(resil_directory_remove(f->d, "10.0.0.9:1", &diag),
	    RESIL_E_NOTFOUND);
	assert_int_equal(
	    resil_directory_get_state(f->d, NULL, &st), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_get_state(f->d, "10.0.0.1:20880", NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_get_state(NULL, "x", &st), RESIL_E_INVAL);
	assert_null(resil_directory_breaker(NULL, "x"));
	assert_null(resil_directory_breaker(f->d, NULL));
	assert_int_equal(resil_directory_count(NULL), 0);
	assert_int_equal(resil_directory_version(NULL), 0);
	/* Nothing was accepted. */
	assert_int_equal(resil_directory_version(f->d), v);
	assert_int_equal(resil_directory_count(f->d), 1);
}

static void
test_bad_selector(void **state)
{
	fx *f = *state;
	resil_selector *s = (resil_selector *)state;
	resil_selector_config sc;
	resil_candidates *c = NULL, *other = (resil_candidates *)state;
	resil_pick pick;
	resil_diag diag;
	char buf[16];

	resil_selector_config_init(&sc);
	assert_int_equal(
	    resil_selector_new(NULL, f->d, &sc, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_new(&s, NULL, &sc, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_new(&s, f->d, NULL, &diag), RESIL_E_INVAL);
	sc.panic_threshold_pct = 101;
	assert_int_equal(
	    resil_selector_new(&s, f->d, &sc, &diag), RESIL_E_INVAL);
	assert_ptr_equal(s, (resil_selector *)state);
	assert_int_equal(resil_candidates_new(NULL, f->sel), RESIL_E_INVAL);
	assert_int_equal(resil_candidates_new(&other, NULL), RESIL_E_INVAL);
	assert_ptr_equal(other, (resil_candidates *)state);
	assert_int_equal(resil_candidates_new(&c, f->sel), RESIL_OK);
	assert_int_equal(
	    resil_selector_route(NULL, NULL, c, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_route(f->sel, NULL, NULL, &diag), RESIL_E_INVAL);
	/* Picking from a set never routed. */
	assert_int_not_equal(
	    resil_selector_pick(f->sel, c, NULL, NULL, 0, &pick, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_pick(NULL, c, NULL, NULL, 0, &pick, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_route(f->sel, NULL, c, &diag), RESIL_OK);
	assert_int_equal(
	    resil_selector_pick(f->sel, c, NULL, NULL, 0, NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_pick_at(f->sel, c, 5, &pick, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_report(f->sel, NULL, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_report(NULL, &pick, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_INVAL);
	assert_int_equal(resil_selector_release(f->sel, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_check_zones(NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_mock_spec(NULL, "m", buf, sizeof(buf)), 0);
	assert_int_equal(resil_selector_mock_spec(f->sel, "m", NULL, 0), 0);
	assert_int_equal(resil_candidates_count(NULL), 0);
	assert_int_equal(resil_candidates_count_zone(NULL, "east", 1), 0);
	resil_candidates_free(c);
	resil_candidates_free(NULL);
	resil_selector_free(NULL);
	resil_directory_free(NULL);
}

static void
test_bad_cluster(void **state)
{
	fx *f = *state;
	resil_cluster *cl = (resil_cluster *)state;
	resil_cluster_config cc;
	resil_cluster_strategy sg = RESIL_CLUSTER_FAILFAST;
	resil_cluster_text *ct = (resil_cluster_text *)state;
	resil_condition *cond = (resil_condition *)state;
	resil_diag diag;

	resil_cluster_config_init(&cc);
	assert_int_equal(
	    resil_cluster_new(NULL, f->sel, &cc, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_new(&cl, NULL, &cc, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_new(&cl, f->sel, NULL, &diag), RESIL_E_INVAL);
	cc.strategy = RESIL_CLUSTER_FORKING; /* pipeline only */
	assert_int_equal(
	    resil_cluster_new(&cl, f->sel, &cc, &diag), RESIL_E_INVAL);
	assert_ptr_equal(cl, (resil_cluster *)state);
	assert_int_equal(
	    resil_cluster_config_validate(NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_invoke(NULL, NULL, NULL, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_cluster_failback_poll(NULL, NULL, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_cluster_failback_pending(NULL), 0);
	assert_int_equal(
	    resil_cluster_strategy_parse(NULL, &sg), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_strategy_parse("failover", NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_strategy_parse("fastest", &sg), RESIL_E_INVAL);
	assert_int_equal(sg, RESIL_CLUSTER_FAILFAST);
	assert_string_equal(
	    resil_cluster_strategy_name((resil_cluster_strategy)99),
	    "unknown");
	assert_string_equal(
	    resil_cluster_event_name((resil_cluster_event_type)99), "unknown");
	resil_cluster_free(NULL);
	/* The text of the cluster keys. */
	assert_int_equal(resil_cluster_text_new(NULL, NULL), RESIL_E_INVAL);
	assert_ptr_equal(ct, (resil_cluster_text *)state);
	assert_int_equal(resil_cluster_text_set(
	                     NULL, "loadbalance", "random", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	assert_int_equal(
	    resil_cluster_text_set(ct, NULL, "random", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_text_set(ct, "loadbalance", NULL, NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_cluster_text_set(ct, "nonsense", "1", NULL, 0, &diag),
	    RESIL_E_NOTFOUND);
	assert_int_equal(
	    resil_cluster_text_finish(NULL, &diag), RESIL_E_INVAL);
	resil_cluster_text_free(ct);
	resil_cluster_text_free(NULL);
	/* Conditions. */
	assert_int_equal(resil_condition_parse(NULL, "a = b", 0, NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_condition_parse(&cond, NULL, 0, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_condition_parse(
	                     &cond, "method = => zone = e", 0, NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_condition_parse(
	                     &cond, "a = b => c = d => e", 0, NULL, &diag),
	    RESIL_E_INVAL);
	assert_ptr_equal(cond, (resil_condition *)state);
	assert_null(resil_condition_text(NULL));
	resil_condition_free(NULL);
}

/* ---- fleet and shared memory: NULL before any connection ---- */

static void
test_bad_fleet_shm(void **state)
{
	resil_fleet *f = (resil_fleet *)state;
	resil_fleet_limit *fl = (resil_fleet_limit *)state;
	resil_shm *shm = (resil_shm *)state;
	resil_breaker *b = (resil_breaker *)state;
	resil_fleet_permit permit;
	resil_fleet_info info;
	resil_fleet_limit_info linfo;
	resil_breaker_config bc;
	uint64_t after = 5;
	resil_diag diag;

	assert_int_equal(resil_fleet_new(NULL, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_new(&f, NULL, &diag), RESIL_E_INVAL);
	assert_ptr_equal(f, (resil_fleet *)state);
	assert_int_equal(
	    resil_fleet_config_validate(NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_acquire(NULL, &permit), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_record(NULL, &permit, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_INVAL);
	assert_int_equal(resil_fleet_release(NULL, &permit), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_sync(NULL, 0), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_start(NULL, 100, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_stop(NULL), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_get_info(NULL, &info), RESIL_E_INVAL);
	assert_null(resil_fleet_breaker(NULL));
	resil_fleet_free(NULL);
	assert_int_equal(
	    resil_fleet_limit_new(NULL, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_new(&fl, NULL, &diag), RESIL_E_INVAL);
	assert_ptr_equal(fl, (resil_fleet_limit *)state);
	assert_int_equal(
	    resil_fleet_limit_config_validate(NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_acquire(NULL, 1, &after), RESIL_E_INVAL);
	assert_int_equal(after, 5);
	assert_int_equal(
	    resil_fleet_limit_get_info(NULL, &linfo), RESIL_E_INVAL);
	resil_fleet_limit_free(NULL);
	assert_int_equal(
	    resil_shm_open(NULL, "/resil-bad", NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_shm_open(&shm, NULL, NULL, &diag), RESIL_E_INVAL);
	assert_ptr_equal(shm, (resil_shm *)state);
	assert_int_equal(resil_shm_unlink(NULL, &diag), RESIL_E_INVAL);
	resil_breaker_config_init(&bc);
	assert_int_equal(
	    resil_shm_breaker(NULL, "b", &bc, &b, &diag), RESIL_E_INVAL);
	assert_ptr_equal(b, (resil_breaker *)state);
	assert_int_equal(resil_shm_reap(NULL), 0);
	resil_shm_close(NULL);
}

/* Issue 24.8: the modules' own duration keys (lib/kv.c: chaos, health,
 * gradient, outlier rates) read durations with the one grammar of
 * lib/duration.c and its messages: exponent notation is named, and a
 * minimum is shown in the unit the value was written in. */
static void
kv_refused(const char *key, const char *value, const char *msg)
{
	resil_diag diag;

	diag.msg[0] = '\0';
	if (strncmp(key, "chaos.", 6) == 0) {
		resil_chaos_config cfg = resil_chaos_config_default();
		assert_int_equal(
		    resil_chaos_config_set(&cfg, key, value, &diag),
		    RESIL_E_INVAL);
		resil_chaos_config_deinit(&cfg);
	} else {
		resil_health_config cfg = resil_health_config_default();
		assert_int_equal(
		    resil_health_config_set(&cfg, key, value, &diag),
		    RESIL_E_INVAL);
	}
	assert_string_equal(diag.msg, msg);
}

static void
test_bad_duration_texts(void **state)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_diag diag;

	(void)state;
	kv_refused("chaos.latency", "1e3",
	    "chaos.latency: \"1e3\": a duration takes no exponent (write "
	    "1000)");
	kv_refused("chaos.latency", "0",
	    "chaos.latency: 0 is below the minimum of 0.000001ms (1ns)");
	kv_refused("health.interval", "0s",
	    "health.interval: 0s is below the minimum of 0.000000001s (1ns)");
	kv_refused("health.interval", "0us",
	    "health.interval: 0us is below the minimum of 0.001us (1ns)");
	kv_refused("health.interval", "1,5s",
	    "health.interval: \"1,5s\": write a fraction with '.', not ','");
	kv_refused("health.interval", "10sec",
	    "health.interval: \"10sec\": unknown unit \"sec\" (did you mean "
	    "10s?)");
	kv_refused("health.interval", "18446744073710",
	    "health.interval: 18446744073710 is out of range "
	    "0ms..18446744073709.551615ms");
	/* What the grammar accepts, kv accepts: fractions, units, ms. */
	assert_int_equal(
	    resil_chaos_config_set(&cfg, "chaos.latency", " 1.5s ", &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_chaos_config_set(&cfg, "chaos.latency", "250", &diag),
	    RESIL_OK);
	resil_chaos_config_deinit(&cfg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_reload_null),
		cmocka_unit_test(test_bad_reload_config),
		cmocka_unit_test(test_bad_reload_text),
		cmocka_unit_test(test_bad_invoke),
		cmocka_unit_test(test_bad_failback),
		cmocka_unit_test(test_bad_pipeline_new_cluster),
		cmocka_unit_test(test_bad_config_selector),
		cmocka_unit_test(test_config_set_condition_appends),
		cmocka_unit_test(test_bad_directory),
		cmocka_unit_test(test_bad_selector),
		cmocka_unit_test(test_bad_cluster),
		cmocka_unit_test(test_bad_fleet_shm),
		cmocka_unit_test(test_bad_duration_texts),
	};

	return cmocka_run_group_tests_name(
	    "bad_input", tests, fx_setup, fx_teardown);
}

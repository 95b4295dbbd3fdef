/*
 * Chaos in the configuration text and per method (issue 28,
 * docs/chaos.md "Configuration text" and "Per method"): chaos.* and
 * METHOD.chaos.* make the pipeline's chaos and the methods' own, each
 * switchable at run time through resil_pipeline_chaos(); every bad value
 * refused as `origin:line: key: message`; a reload keeps the chaos; the
 * text routes bulkhead.limit and bulkhead.gradient.* to the bulkhead.
 * On the manual clock; the chaos's own seeded generator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/config.h>
#include <resil/gradient.h>
#include <resil/pipeline.h>

typedef struct tfx {
	resil_manual_clock mc;
	resil_pipeline *p;
	int calls;
} tfx;

static int
fn(void *ctx, const resil_args *args, resil_value *out)
{
	tfx *x = ctx;

	(void)args;
	x->calls++;
	*out = resil_value_int(1);
	return 0;
}

/* A pipeline from text; the config is freed at once (the pipeline holds
 * its chaos). */
static void
tfx_new(tfx *x, const char *text)
{
	resil_config *conf = NULL;
	resil_pipeline_config cfg;
	resil_diag diag;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000);
	if (resil_config_parse_string(&conf, text, "t.conf", NULL, &diag) !=
	    RESIL_OK)
		fail_msg("config: %s", diag.msg);
	cfg = *resil_config_pipeline(conf);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	resil_config_free(conf);
}

static resil_err
call(tfx *x, const char *method, resil_result *r)
{
	resil_args a = { method, NULL, 0 };

	return resil_pipeline_call(x->p, &a, fn, x, r);
}

/* One call of method: its rc (0 for a success) and value. */
static int
one(tfx *x, const char *method, int64_t *value)
{
	resil_result r;
	resil_err e = call(x, method, &r);
	int rc = e == RESIL_OK ? 0 : r.last_failure_rc;

	*value = r.value.type == RESIL_VALUE_INT ? r.value.u.i : -1;
	resil_result_free(&r);
	return rc;
}

static void
test_service_chaos_from_text(void **state)
{
	resil_chaos_metrics m;
	int64_t v;
	tfx x;

	(void)state;
	tfx_new(&x, "service=StockService\n"
	            "chaos.fault=-5\n"
	            "chaos.rate=1\n");
	assert_non_null(resil_pipeline_chaos(x.p, NULL));
	/* Every method asks the pipeline's chaos. */
	assert_ptr_equal(resil_pipeline_chaos(x.p, "getStock"),
	    resil_pipeline_chaos(x.p, NULL));
	assert_int_equal(one(&x, "getStock", &v), -5);
	assert_int_equal(x.calls, 0);
	assert_int_equal(resil_chaos_set_enabled(resil_pipeline_chaos(x.p, NULL),
	                     RESIL_CHAOS_MASTER, 0),
	    RESIL_OK);
	assert_int_equal(one(&x, "getStock", &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(x.calls, 1);
	assert_int_equal(
	    resil_chaos_get_metrics(resil_pipeline_chaos(x.p, NULL), &m),
	    RESIL_OK);
	assert_int_equal(m.faults, 1);
	assert_int_equal(m.configured, RESIL_CHAOS_FAULT);
	resil_pipeline_free(x.p);
}

/* A method's own chaos: off in the text, switched on for that method in
 * the running program; the other method never sees it. */
static void
test_method_chaos_switched_at_run_time(void **state)
{
	resil_chaos *gs;
	int64_t v;
	tfx x;

	(void)state;
	tfx_new(&x, "service=StockService\n"
	            "getStock.chaos.fault=-5\n"
	            "getStock.chaos.rate=1\n"
	            "getStock.chaos.enabled=false\n"
	            "listItems.timeout=100\n");
	gs = resil_pipeline_chaos(x.p, "getStock");
	assert_non_null(gs);
	assert_ptr_not_equal(gs, resil_pipeline_chaos(x.p, NULL));
	assert_ptr_equal(resil_pipeline_chaos(x.p, "listItems"),
	    resil_pipeline_chaos(x.p, NULL));
	assert_int_equal(resil_chaos_live(gs), 0);
	assert_int_equal(one(&x, "getStock", &v), 0);
	assert_int_equal(
	    resil_chaos_set_enabled(gs, RESIL_CHAOS_MASTER, 1), RESIL_OK);
	assert_int_equal(one(&x, "getStock", &v), -5);
	assert_int_equal(one(&x, "listItems", &v), 0);
	assert_int_equal(one(&x, "other", &v), 0);
	assert_int_equal(x.calls, 3);
	/* The pipeline's chaos has no strategy: nothing to switch on. */
	assert_int_equal(resil_chaos_set_enabled(resil_pipeline_chaos(x.p, NULL),
	                     RESIL_CHAOS_FAULT, 1),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_chaos_set_enabled(gs, RESIL_CHAOS_FAULT, 0), RESIL_OK);
	assert_int_equal(one(&x, "getStock", &v), 0);
	resil_pipeline_free(x.p);
}

/* A method's keys over the service's: the rate and the fault inherited,
 * the fault switched off and an outcome of its own. */
static void
test_method_keys_over_the_service_keys(void **state)
{
	int64_t v;
	tfx x;

	(void)state;
	tfx_new(&x, "service=StockService\n"
	            "chaos.rate=1\n"
	            "chaos.fault=-5\n"
	            "getStock.chaos.outcome=7\n"
	            "getStock.chaos.fault.enabled=false\n");
	assert_int_equal(one(&x, "getStock", &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(one(&x, "listItems", &v), -5);
	assert_int_equal(x.calls, 0);
	/* The method's fault is there, off: one switch turns it on, and
	 * the fault ends the decision before the outcome. */
	assert_int_equal(
	    resil_chaos_set_enabled(resil_pipeline_chaos(x.p, "getStock"),
	        RESIL_CHAOS_FAULT, 1),
	    RESIL_OK);
	assert_int_equal(one(&x, "getStock", &v), -5);
	resil_pipeline_free(x.p);
}

/* chaos.latency: a bare number is milliseconds; the machine WAITs. */
static void
test_latency_and_outcome_values(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_call c;
	resil_call_next st;
	resil_result r;
	tfx x;

	(void)state;
	tfx_new(&x, "service=StockService\n"
	            "getStock.chaos.latency=5\n"
	            "getStock.chaos.latency.rate=1\n"
	            "getStock.chaos.outcome={\"stock\":0}\n"
	            "getStock.chaos.outcome.rate=1\n");
	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start(&c, x.p, NULL, &a, &r, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_WAIT);
	assert_true(st.until == 1000 + 5000000);
	assert_int_equal(resil_call_step(&c, 1000 + 5000000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_JSON);
	assert_string_equal(r.value.u.s.ptr, "{\"stock\":0}");
	resil_result_free(&r);
	assert_int_equal(x.calls, 0);
	resil_pipeline_free(x.p);
}

/* Dubbo's force: mock answers before chaos is asked (no draw). */
static void
test_force_mock_before_chaos(void **state)
{
	resil_chaos_metrics m;
	int64_t v;
	tfx x;

	(void)state;
	tfx_new(&x, "service=StockService\n"
	            "getStock.mock=force:return 3\n"
	            "getStock.chaos.fault=-5\n"
	            "getStock.chaos.rate=1\n"
	            "listItems.mock=fail:return 4\n"
	            "listItems.chaos.fault=-6\n"
	            "listItems.chaos.rate=1\n");
	assert_int_equal(one(&x, "getStock", &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(
	    resil_chaos_get_metrics(resil_pipeline_chaos(x.p, "getStock"), &m),
	    RESIL_OK);
	assert_int_equal(m.decisions, 0);
	/* fail: answers after the injected fault. */
	assert_int_equal(one(&x, "listItems", &v), 0);
	assert_int_equal(v, 4);
	assert_int_equal(
	    resil_chaos_get_metrics(resil_pipeline_chaos(x.p, "listItems"), &m),
	    RESIL_OK);
	assert_int_equal(m.faults, 1);
	assert_int_equal(x.calls, 0);
	resil_pipeline_free(x.p);
}

static void
expect_refused(const char *text, const char *msg)
{
	resil_config *conf = NULL;
	resil_diag diag;

	diag.msg[0] = '\0';
	if (resil_config_parse_string(&conf, text, "t.conf", NULL, &diag) !=
	    RESIL_E_INVAL)
		fail_msg("not refused: %s", text);
	assert_null(conf);
	assert_string_equal(diag.msg, msg);
}

static void
test_bad_values_refused_exactly(void **state)
{
	resil_config *conf = NULL;
	resil_diag diag;

	(void)state;
	expect_refused("service=S\nchaos.fault=0\n",
	    "t.conf:2: chaos.fault: 0 is a success; a fault needs a nonzero "
	    "rc");
	expect_refused("service=S\nchaos.fault=abc\n",
	    "t.conf:2: chaos.fault: \"abc\" is not an integer");
	expect_refused("getStock.chaos.fault.rate=1.5\n",
	    "t.conf:1: getStock.chaos.fault.rate: 1.5 is out of range 0..1");
	expect_refused("chaos.rate=-0.1\n",
	    "t.conf:1: chaos.rate: \"-0.1\" is not a number (decimal, e.g. "
	    "0.25 or 1e-3)");
	expect_refused("chaos.latency=10sec\n",
	    "t.conf:1: chaos.latency: \"10sec\": unknown unit \"sec\" (did "
	    "you mean 10s?)");
	expect_refused("timeout=1\ngetStock.chaos.latency=0\n",
	    "t.conf:2: getStock.chaos.latency: 0 is below the minimum of "
	    "0.000001ms (1ns)");
	expect_refused("chaos.enabled=maybe\n",
	    "t.conf:1: chaos.enabled: \"maybe\" is not a boolean (true, false, "
	    "yes, no, on, off, 1, 0)");
	expect_refused("getStock.chaos.outcome.enabled=1x\n",
	    "t.conf:1: getStock.chaos.outcome.enabled: \"1x\" is not a "
	    "boolean (true, false, yes, no, on, off, 1, 0)");
	expect_refused("getStock.chaos.outcome={\"a\":\n",
	    "t.conf:1: getStock.chaos.outcome: mock: \"return {\"a\":\" at "
	    "column 12: invalid JSON");
	expect_refused("chaos.fualt=1\n",
	    "t.conf:1: chaos.fualt: unknown key (chaos keys: enabled, rate, "
	    "seed, fault, latency, outcome, and S.rate, S.enabled for S in "
	    "fault, latency, outcome, behaviour)");
	expect_refused("getStock.chaos.behaviour.rate=0.5\n",
	    "t.conf:1: getStock.chaos.behaviour.rate: a behaviour is a C "
	    "callback (resil_chaos_config.behaviour_fn): text cannot give "
	    "one");
	expect_refused("chaos.behaviour=restart\n",
	    "t.conf:1: chaos.behaviour: a behaviour is a C callback "
	    "(resil_chaos_config.behaviour_fn): text cannot give one");
	expect_refused("chaos.rate=1\nchaos.rate=0.5\n",
	    "t.conf:2: chaos.rate: set again (first set at line 1)");
	expect_refused("bulkhead.limit=adaptive\n",
	    "t.conf:1: bulkhead.limit: \"adaptive\" is not one of fixed, "
	    "aimd, gradient");
	expect_refused("bulkhead.gradient.smoothing=0\n",
	    "t.conf:1: bulkhead.gradient.smoothing: 0 would never move the "
	    "limit (0 < smoothing <= 1)");
	expect_refused("bulkhead.gradient.speed=3\n",
	    "t.conf:1: bulkhead.gradient.speed: unknown key (gradient keys: "
	    "initial_limit, min_limit, max_limit, smoothing, rtt_tolerance, "
	    "long_window, long_warmup, queue_size, growth)");
	/* Made by set: the message alone, the config unchanged. */
	assert_int_equal(resil_config_parse_string(
	                     &conf, "chaos.fault=-5\n", "t.conf", NULL, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_set(conf, "getStock.chaos.rate", "2", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "getStock.chaos.rate: 2 is out of range 0..1");
	resil_config_free(conf);
}

/* The values read back; a set of another key keeps the chaos. */
static void
test_get_and_set(void **state)
{
	resil_config *conf = NULL;
	const resil_chaos *ch;
	resil_diag diag;
	char buf[64];

	(void)state;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "chaos.fault=-5\ngetStock.chaos.latency=2ms\n",
	                     "t.conf", NULL, &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_get(conf, "getStock.chaos.latency", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "2ms");
	assert_int_equal(resil_config_get(conf, "chaos.fault", buf, 2),
	    RESIL_E_INVAL);
	ch = resil_config_pipeline(conf)->chaos;
	assert_non_null(ch);
	assert_int_equal(resil_config_pipeline(conf)->nmethods, 1);
	assert_int_equal(
	    resil_config_set(conf, "timeout", "50", &diag), RESIL_OK);
	assert_ptr_equal(resil_config_pipeline(conf)->chaos, ch);
	assert_int_equal(
	    resil_config_set(conf, "chaos.rate", "0.5", &diag), RESIL_OK);
	assert_ptr_not_equal(resil_config_pipeline(conf)->chaos, ch);
	resil_config_free(conf);
}

/* A reload from text keeps the chaos when its keys are the same, and
 * refuses other chaos keys (fixed at creation). */
static void
test_reload_keeps_the_chaos(void **state)
{
	const char *text = "service=StockService\n"
	                   "getStock.chaos.fault=-5\n"
	                   "getStock.chaos.rate=1\n";
	resil_chaos *gs;
	resil_diag diag;
	int64_t v;
	tfx x;

	(void)state;
	tfx_new(&x, text);
	gs = resil_pipeline_chaos(x.p, "getStock");
	assert_int_equal(
	    resil_chaos_set_enabled(gs, RESIL_CHAOS_MASTER, 0), RESIL_OK);
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=StockService\n"
	                     "getStock.chaos.fault=-5\n"
	                     "getStock.chaos.rate=1\n"
	                     "timeout=100\n",
	                     "t2.conf", &diag),
	    RESIL_OK);
	/* The same chaos, its switch as flipped. */
	assert_ptr_equal(resil_pipeline_chaos(x.p, "getStock"), gs);
	assert_int_equal(one(&x, "getStock", &v), 0);
	assert_int_equal(
	    resil_chaos_set_enabled(gs, RESIL_CHAOS_MASTER, 1), RESIL_OK);
	assert_int_equal(one(&x, "getStock", &v), -5);
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=StockService\n"
	                     "getStock.chaos.fault=-5\n"
	                     "getStock.chaos.rate=0.5\n",
	                     "t3.conf", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "t3.conf:2: chaos: cannot change by reload (it is fixed when "
	    "the pipeline is created; build a new pipeline to change it)");
	assert_int_equal(one(&x, "getStock", &v), -5);
	resil_pipeline_free(x.p);
}

/* Per method in C: resil_chaos_set_method(). */
static void
test_method_chaos_in_c(void **state)
{
	resil_chaos_config cc;
	resil_chaos *root, *gs;
	resil_pipeline_config cfg;
	resil_method_config mc[1];
	resil_diag diag;
	int64_t v;
	tfx x;

	(void)state;
	memset(&x, 0, sizeof(x));
	resil_manual_clock_init(&x.mc, 1000);
	resil_chaos_config_init(&cc);
	assert_int_equal(resil_chaos_new(&root, &cc, &diag), RESIL_OK);
	cc.fault_rc = -9;
	cc.rate = 1;
	assert_int_equal(resil_chaos_new(&gs, &cc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_chaos_set_method(root, "getStock", gs, &diag), RESIL_OK);
	assert_int_equal(resil_chaos_set_method(root, "getStock", gs, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_set_method(gs, "x", root, &diag),
	    RESIL_E_INVAL);
	assert_ptr_equal(resil_chaos_method(root, "getStock"), gs);
	assert_ptr_equal(resil_chaos_method(root, "other"), root);
	resil_chaos_free(gs); /* root holds it */
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&x.mc);
	cfg.chaos = root;
	/* A method's chaos is its declared method's. */
	memset(mc, 0, sizeof(mc));
	mc[0].name = "getStock";
	mc[0].type = RESIL_TYPE_ANY;
	assert_int_equal(resil_pipeline_new(&x.p, &cfg, &diag), RESIL_OK);
	assert_ptr_equal(resil_pipeline_chaos(x.p, "getStock"), root);
	assert_int_equal(one(&x, "getStock", &v), 0);
	resil_pipeline_free(x.p);
	cfg.methods = mc;
	cfg.nmethods = 1;
	assert_int_equal(resil_pipeline_new(&x.p, &cfg, &diag), RESIL_OK);
	assert_ptr_equal(resil_pipeline_chaos(x.p, "getStock"), gs);
	resil_chaos_free(root); /* the pipeline holds it */
	assert_int_equal(one(&x, "getStock", &v), -9);
	assert_int_equal(one(&x, "listItems", &v), 0);
	resil_pipeline_free(x.p);
}

/* The text routes the bulkhead's mode and gradient keys. */
static void
test_bulkhead_gradient_from_text(void **state)
{
	const resil_pipeline_config *pc;
	resil_config *conf = NULL;
	resil_pipeline *p = NULL;
	resil_diag diag;
	char buf[16];

	(void)state;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "service=S\n"
	                     "bulkhead.max_concurrent=100\n"
	                     "bulkhead.limit=gradient\n"
	                     "bulkhead.gradient.min_limit=2\n"
	                     "bulkhead.gradient.initial_limit=5\n"
	                     "bulkhead.gradient.growth=unloaded\n",
	                     "t.conf", NULL, &diag),
	    RESIL_OK);
	pc = resil_config_pipeline(conf);
	assert_int_equal(pc->bulkhead_enabled, 1);
	assert_int_equal(pc->bulkhead.adaptive, RESIL_BULKHEAD_GRADIENT);
	assert_int_equal(pc->bulkhead.gradient.initial_limit, 5);
	assert_int_equal(pc->bulkhead.gradient.min_limit, 2);
	assert_int_equal(
	    pc->bulkhead.gradient.growth, RESIL_GRADIENT_GROW_UNLOADED);
	assert_int_equal(
	    resil_config_get(conf, "bulkhead.limit", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "gradient");
	assert_int_equal(resil_pipeline_new(&p, pc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_get_limit(resil_pipeline_bulkhead(p)), 5);
	resil_pipeline_free(p);
	/* bulkhead.limit=fixed alone turns the stage on, fixed. */
	assert_int_equal(
	    resil_config_set(conf, "bulkhead.limit", "fixed", &diag),
	    RESIL_OK);
	assert_int_equal(resil_config_pipeline(conf)->bulkhead.adaptive, 0);
	resil_config_free(conf);
}

/* The gradient bulkhead of a pipeline without a timeout samples each
 * attempt's RTT on the pipeline's clock (issue 28: resil-sim's load step
 * relies on it): start at 1000, answer 5 ms later. */
static void
test_gradient_bulkhead_times_attempts(void **state)
{
	resil_args a = { "getStock", NULL, 0 };
	resil_gradient_metrics gm;
	resil_call c;
	resil_call_next st;
	resil_result r;
	resil_value v;
	tfx x;

	(void)state;
	tfx_new(&x, "service=StockService\n"
	            "bulkhead.limit=gradient\n");
	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start(&c, x.p, NULL, &a, &r, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	v = resil_value_int(3);
	assert_int_equal(
	    resil_call_report(&c, st.attempt, 0, &v, 1000 + 5000000), RESIL_OK);
	assert_int_equal(resil_call_step(&c, 1000 + 5000000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	resil_result_free(&r);
	assert_int_equal(resil_gradient_get_metrics(
	                     resil_bulkhead_gradient(resil_pipeline_bulkhead(x.p)),
	                     &gm),
	    RESIL_OK);
	assert_int_equal(gm.samples, 1);
	assert_true(gm.last_rtt == 5000000);
	resil_pipeline_free(x.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_service_chaos_from_text),
		cmocka_unit_test(test_method_chaos_switched_at_run_time),
		cmocka_unit_test(test_method_keys_over_the_service_keys),
		cmocka_unit_test(test_latency_and_outcome_values),
		cmocka_unit_test(test_force_mock_before_chaos),
		cmocka_unit_test(test_bad_values_refused_exactly),
		cmocka_unit_test(test_get_and_set),
		cmocka_unit_test(test_reload_keeps_the_chaos),
		cmocka_unit_test(test_method_chaos_in_c),
		cmocka_unit_test(test_bulkhead_gradient_from_text),
		cmocka_unit_test(test_gradient_bulkhead_times_attempts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

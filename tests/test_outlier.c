/*
 * Success-rate and failure-percentage outlier detection, one interval at
 * a time. The scenarios of Envoy's test/common/upstream/
 * outlier_detection_impl_test.cc are ported with their exact numbers
 * (named in each test); the ejection timing around them (interval timer,
 * base ejection time, returns) is the directory's and is not here.
 * Envoy's tests set max_ejection_percent to 100 through the runtime; the
 * ports do the same, and test_outlier_design_max_share shows DESIGN's rule
 * with Envoy's default of 10.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/outlier.h>

/* loadRq(host, n, 200) and loadRq(host, n, 503) of Envoy's tests. */
static void
load(resil_outlier_host *h, uint64_t ok, uint64_t failed)
{
	h->requests += ok + failed;
	h->successes += ok;
}

static resil_outlier_rate_config
envoy_test_config(void)
{
	resil_outlier_rate_config c = resil_outlier_rate_config_default();

	c.max_ejection_pct = 100;
	return c;
}

/* OutlierUtility.SRThreshold: {50, 100, 100, 100, 100}, factor 1.9:
 * mean 90, threshold 52. BasicFlowSuccessRateExternalOrigin, first
 * interval: the same rates from 200 requests each plus 200 failures on
 * host 4; host 4 is ejected. */
static void
test_outlier_envoy_basic_success_rate(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[5];
	resil_outlier_verdict v[5];
	resil_outlier_summary s;
	int i;

	(void)state;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 200, 0);
	load(&h[4], 0, 200);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_true(s.success_rate_mean == 90.0);
	assert_true(s.success_rate_threshold == 52.0);
	assert_int_equal(s.success_rate_hosts, 5);
	assert_int_equal(s.failure_percentage_hosts, 5);
	for (i = 0; i < 4; i++) {
		assert_int_equal(v[i].action, RESIL_OUTLIER_KEEP);
		assert_true(v[i].success_rate == 100.0);
	}
	assert_int_equal(v[4].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v[4].kind, RESIL_OUTLIER_SUCCESS_RATE);
	assert_true(v[4].success_rate == 50.0);
	assert_int_equal(s.ejected, 1);
	/* Failure percentage: 50 % < 85 %, and it is not enforced anyway. */
	assert_int_equal(s.not_enforced, 0);

	/* Second interval: 25 requests each, host 4 25 more failing. Only
	 * host 4 has the failure-percentage volume (50): its rate is
	 * computed, nothing else is, nobody is ejected. */
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 25, 0);
	load(&h[4], 0, 25);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_true(s.success_rate_mean == -1);
	assert_true(s.success_rate_threshold == -1);
	assert_true(v[4].success_rate == 50.0);
	for (i = 0; i < 4; i++)
		assert_true(v[i].success_rate == -1);
	for (i = 0; i < 5; i++)
		assert_int_equal(v[i].action, RESIL_OUTLIER_KEEP);
	assert_int_equal(s.ejected, 0);
}

/* BasicFlowFailurePercentageExternalOrigin: success-rate enforcement
 * off, failure percentage on; hosts 0-2 perfect, host 3 83.3 % failures
 * (kept, below 85), host 4 85.7 % (ejected). */
static void
test_outlier_envoy_basic_failure_percentage(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[5];
	resil_outlier_verdict v[5];
	resil_outlier_summary s;
	int i;

	(void)state;
	c.enforcing_success_rate = 0;
	c.enforcing_failure_percentage = 100;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 50, 0);
	load(&h[3], 0, 250);
	load(&h[4], 0, 300);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_true(v[3].success_rate == 100.0 * 50.0 / 300.0);
	assert_true(v[4].success_rate == 100.0 * 50.0 / 350.0);
	assert_int_equal(v[3].action, RESIL_OUTLIER_KEEP);
	assert_int_equal(v[4].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v[4].kind, RESIL_OUTLIER_FAILURE_PERCENTAGE);
	/* The success-rate threshold is negative here: no detection. */
	assert_true(s.success_rate_threshold < 0);
	assert_int_equal(s.not_enforced, 0);
	assert_int_equal(s.ejected, 1);

	/* Second interval, as in the success-rate test: nothing. */
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 25, 0);
	load(&h[4], 0, 25);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_true(v[4].success_rate == 50.0);
	assert_int_equal(s.ejected, 0);
	assert_true(s.success_rate_mean == -1);
}

/* BasicFlowFailurePercentageLocalOrigin: the success rate finds host 4
 * (50 < 52) but is not enforced (logged enforced=false); the failure
 * percentage, threshold 40 and enforced, ejects it. */
static void
test_outlier_envoy_failure_percentage_after_success_rate(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[5];
	resil_outlier_verdict v[5];
	resil_outlier_summary s;
	int i;

	(void)state;
	c.enforcing_success_rate = 0;
	c.enforcing_failure_percentage = 100;
	c.failure_percentage_threshold = 40;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 200, 0);
	load(&h[4], 0, 200);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_true(s.success_rate_mean == 90.0);
	assert_true(s.success_rate_threshold == 52.0);
	assert_true(v[4].success_rate == 50.0);
	assert_int_equal(v[4].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v[4].kind, RESIL_OUTLIER_FAILURE_PERCENTAGE);
	assert_int_equal(s.not_enforced, 1); /* the success rate's */
	assert_int_equal(s.ejected, 1);
}

/* EmptySuccessRate: no host and success_rate_minimum_hosts 0 (the
 * regression of a division by zero); also hosts without requests. */
static void
test_outlier_envoy_empty_success_rate(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[3];
	resil_outlier_verdict v[3];
	resil_outlier_summary s;

	(void)state;
	c.success_rate_minimum_hosts = 0;
	c.failure_percentage_minimum_hosts = 0;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, NULL, 0, NULL, NULL, &s, NULL),
	    RESIL_OK);
	assert_true(s.success_rate_mean == -1);
	memset(h, 0, sizeof(h));
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 3, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(s.success_rate_hosts, 0);
	assert_true(s.success_rate_mean == -1);
	assert_int_equal(v[0].action, RESIL_OUTLIER_KEEP);
	assert_true(v[0].success_rate == -1);
}

/* EjectTimeBackoffTimeBasedDetection: one host, failure_percentage
 * minimum hosts 1, 100 failures of 100: ejected by the failure
 * percentage. */
static void
test_outlier_envoy_single_host_failure_percentage(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h = { 0, 0, 0 };
	resil_outlier_verdict v;
	resil_outlier_summary s;

	(void)state;
	c.enforcing_success_rate = 0;
	c.enforcing_failure_percentage = 100;
	c.failure_percentage_minimum_hosts = 1;
	load(&h, 0, 100);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, &h, 1, NULL, &v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(v.action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v.kind, RESIL_OUTLIER_FAILURE_PERCENTAGE);
	assert_true(v.success_rate == 0.0);
	/* Already ejected: not evaluated at all. */
	h.ejected = 1;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, &h, 1, NULL, &v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(v.action, RESIL_OUTLIER_KEEP);
	assert_true(v.success_rate == -1);
}

/* MaxEjectionPercentage (50 %: one of three) and
 * MaxEjectionPercentageSingleHost (90 %: a lone host is never ejected),
 * with three failing hosts found by the failure percentage. */
static void
test_outlier_envoy_max_ejection_percentage(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[3];
	resil_outlier_verdict v[3];
	resil_outlier_summary s;
	int i;

	(void)state;
	c.enforcing_failure_percentage = 100;
	c.failure_percentage_minimum_hosts = 1;
	c.max_ejection_pct = 50;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 3; i++)
		load(&h[i], 0, 60);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 3, NULL, v, &s, NULL),
	    RESIL_OK);
	/* 100 * 1 <= 50 * 3; 100 * 2 > 150. */
	assert_int_equal(v[0].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v[1].action, RESIL_OUTLIER_OVER_MAX);
	assert_int_equal(v[1].kind, RESIL_OUTLIER_FAILURE_PERCENTAGE);
	assert_int_equal(v[2].action, RESIL_OUTLIER_OVER_MAX);
	assert_int_equal(s.ejected, 1);
	assert_int_equal(s.over_max, 2);
	/* One host at 90 %: 100 > 90. */
	c.max_ejection_pct = 90;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 1, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(v[0].action, RESIL_OUTLIER_OVER_MAX);
	/* An ejected host counts in the share: with host 0 ejected, 50 % of
	 * 3 leaves no room. */
	c.max_ejection_pct = 50;
	h[0].ejected = 1;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 3, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(v[0].action, RESIL_OUTLIER_KEEP);
	assert_int_equal(v[1].action, RESIL_OUTLIER_OVER_MAX);
	assert_int_equal(v[2].action, RESIL_OUTLIER_OVER_MAX);
}

/* DESIGN: ejected only if 100 * (ejected + 1) <= max_ejection_pct * N.
 * With Envoy's default of 10 %, one of five (20 %) is over the share. */
static void
test_outlier_design_max_share(void **state)
{
	resil_outlier_rate_config c = resil_outlier_rate_config_default();
	resil_outlier_host h[10];
	resil_outlier_verdict v[10];
	resil_outlier_summary s;
	int i;

	(void)state;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 200, 0);
	load(&h[4], 0, 200);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(v[4].action, RESIL_OUTLIER_OVER_MAX);
	assert_int_equal(v[4].kind, RESIL_OUTLIER_SUCCESS_RATE);
	assert_int_equal(s.over_max, 1);
	/* Ten hosts: 100 * 1 <= 10 * 10, one may go. */
	for (i = 5; i < 10; i++)
		load(&h[i], 200, 0);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 10, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(v[4].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(s.ejected, 1);
}

/* The cap and the order: outliers are taken in input order, the first
 * ones fill the share. */
static void
test_outlier_order_within_share(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[6];
	resil_outlier_verdict v[6];
	resil_outlier_summary s;
	int i;

	(void)state;
	c.max_ejection_pct = 20; /* one of six: 100 <= 120; two: 200 > 120 */
	c.success_rate_stdev_factor = 1000;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 6; i++)
		load(&h[i], 100, 0);
	load(&h[1], 0, 100); /* 50 % */
	load(&h[3], 0, 100); /* 50 % */
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 6, NULL, v, &s, NULL),
	    RESIL_OK);
	/* mean 83.33, stdev 23.57, threshold 59.76 */
	assert_true(s.success_rate_threshold > 59.7 &&
	    s.success_rate_threshold < 59.8);
	assert_int_equal(v[1].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v[3].action, RESIL_OUTLIER_OVER_MAX);
}

/* Enforcing between 0 and 100: one draw per outlier inside the share,
 * u * 100 < enforcing ejects. */
typedef struct script {
	const double *u;
	size_t n, at;
} script;

static double
script_next(void *ctx)
{
	script *sc = ctx;
	double u = sc->at < sc->n ? sc->u[sc->at] : 0.999;

	sc->at++;
	return u;
}

static void
test_outlier_enforcing_draws(void **state)
{
	static const double u[] = { 0.49, 0.5 };
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[8];
	resil_outlier_verdict v[8];
	resil_outlier_summary s;
	script sc = { u, 2, 0 };
	resil_random r = { script_next, &sc };
	int i;

	(void)state;
	c.enforcing_success_rate = 50;
	c.success_rate_stdev_factor = 1000;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 8; i++)
		load(&h[i], 100, 0);
	load(&h[2], 0, 100);
	load(&h[5], 0, 100);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 8, &r, v, &s, NULL), RESIL_OK);
	assert_int_equal(sc.at, 2);
	assert_int_equal(v[2].action, RESIL_OUTLIER_EJECT);
	assert_int_equal(v[5].action, RESIL_OUTLIER_NOT_ENFORCED);
	assert_int_equal(v[5].kind, RESIL_OUTLIER_SUCCESS_RATE);
	assert_int_equal(s.not_enforced, 1);
	/* enforcing 100 and 0 draw nothing. */
	sc.at = 0;
	c.enforcing_success_rate = 100;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 8, &r, v, &s, NULL), RESIL_OK);
	assert_int_equal(sc.at, 0);
	assert_int_equal(s.ejected, 2);
	c.enforcing_success_rate = 0;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 8, &r, v, &s, NULL), RESIL_OK);
	assert_int_equal(sc.at, 0);
	assert_int_equal(s.ejected, 0);
	assert_int_equal(s.not_enforced, 2);
}

/* Too few hosts, too few requests: nothing computed. */
static void
test_outlier_minimums(void **state)
{
	resil_outlier_rate_config c = envoy_test_config();
	resil_outlier_host h[5];
	resil_outlier_verdict v[5];
	resil_outlier_summary s;
	int i;

	(void)state;
	memset(h, 0, sizeof(h));
	for (i = 0; i < 5; i++)
		load(&h[i], 200, 0);
	load(&h[4], 0, 200);
	/* Four hosts, below both minimums of 5: not even the rates. */
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h + 1, 4, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_true(v[3].success_rate == -1);
	assert_int_equal(v[3].action, RESIL_OUTLIER_KEEP);
	/* Volume 401 asked: host 4 has 400 requests, out of the sample. */
	c.success_rate_request_volume = 401;
	c.success_rate_minimum_hosts = 1;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 5, NULL, v, &s, NULL),
	    RESIL_OK);
	assert_int_equal(s.success_rate_hosts, 0);
	assert_int_equal(v[4].action, RESIL_OUTLIER_KEEP);
	assert_true(v[4].success_rate == 50.0); /* >= the 50 of the other */
}

static void
test_outlier_bad_input(void **state)
{
	resil_outlier_rate_config c = resil_outlier_rate_config_default();
	resil_outlier_host h[4];
	resil_outlier_verdict v[4];
	resil_diag diag;

	(void)state;
	memset(h, 0, sizeof(h));
	memset(v, 0x5a, sizeof(v));
	h[3].requests = 10;
	h[3].successes = 12;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 4, NULL, v, NULL, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg, "hosts[3]: 12 successes of 10 requests");
	assert_int_equal(((unsigned char *)v)[0], 0x5a); /* nothing written */
	assert_int_equal(
	    resil_outlier_rate_evaluate(NULL, h, 4, NULL, v, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, NULL, 4, NULL, v, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 4, NULL, NULL, NULL, NULL),
	    RESIL_E_INVAL);
	c.failure_percentage_threshold = 101;
	assert_int_equal(
	    resil_outlier_rate_evaluate(&c, h, 0, NULL, v, NULL, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.failure_percentage_threshold: 101 is out of range "
	    "0..100");
	c = resil_outlier_rate_config_default();
	c.max_ejection_pct = 200;
	assert_int_equal(resil_outlier_rate_config_validate(&c, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "outlier.max_ejection_pct: 200 is out of range 0..100");
	c = resil_outlier_rate_config_default();
	c.size = 3;
	assert_int_equal(resil_outlier_rate_config_validate(&c, &diag),
	    RESIL_E_INVAL);
	{
		char want[RESIL_DIAG_MAX];

		snprintf(want, sizeof(want),
		    "outlier.size: 3 is not a known resil_outlier_rate_config "
		    "size (expected %zu; use resil_outlier_rate_config_init())",
		    sizeof(c));
		assert_string_equal(diag.msg, want);
	}
	assert_int_equal(resil_outlier_rate_config_validate(NULL, NULL),
	    RESIL_E_INVAL);
	assert_string_equal(resil_outlier_action_name(RESIL_OUTLIER_OVER_MAX),
	    "over_max");
	assert_string_equal(
	    resil_outlier_kind_name(RESIL_OUTLIER_FAILURE_PERCENTAGE),
	    "failure_percentage");
	assert_string_equal(
	    resil_outlier_action_name((resil_outlier_action)9), "unknown");
	assert_string_equal(
	    resil_outlier_kind_name((resil_outlier_kind)9), "unknown");
}

static void
test_outlier_text_keys(void **state)
{
	resil_outlier_rate_config c = resil_outlier_rate_config_default();
	resil_outlier_rate_config before;
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.success_rate_stdev_factor", "3000",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(c.success_rate_stdev_factor, 3000);
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.failure_percentage_request_volume",
	                     "25", NULL),
	    RESIL_OK);
	assert_int_equal(c.failure_percentage_request_volume, 25);
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.enforcing_failure_percentage", "100",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(c.enforcing_failure_percentage, 100);
	before = c;
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.enforcing_success_rate", "101", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.enforcing_success_rate: 101 is out of range 0..100");
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.success_rate_minimum_hosts", "-1",
	                     &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.success_rate_minimum_hosts: \"-1\" is not a whole "
	    "number (decimal digits)");
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.max_ejection_pct", "50", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.max_ejection_pct: the directory's key (its "
	    "outlier.max_ejection_pct), not one of the rate keys");
	assert_int_equal(resil_outlier_rate_config_set(&c,
	                     "outlier.success_rate_volume", "50", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.success_rate_volume: unknown key (outlier rate keys: "
	    "success_rate_ and failure_percentage_ minimum_hosts, "
	    "request_volume; success_rate_stdev_factor, "
	    "failure_percentage_threshold, enforcing_success_rate, "
	    "enforcing_failure_percentage)");
	assert_memory_equal(&c, &before, sizeof(c));
	assert_int_equal(resil_outlier_rate_config_set(NULL, "x", "1", NULL),
	    RESIL_E_INVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outlier_envoy_basic_success_rate),
		cmocka_unit_test(test_outlier_envoy_basic_failure_percentage),
		cmocka_unit_test(
		    test_outlier_envoy_failure_percentage_after_success_rate),
		cmocka_unit_test(test_outlier_envoy_empty_success_rate),
		cmocka_unit_test(
		    test_outlier_envoy_single_host_failure_percentage),
		cmocka_unit_test(test_outlier_envoy_max_ejection_percentage),
		cmocka_unit_test(test_outlier_design_max_share),
		cmocka_unit_test(test_outlier_order_within_share),
		cmocka_unit_test(test_outlier_enforcing_draws),
		cmocka_unit_test(test_outlier_minimums),
		cmocka_unit_test(test_outlier_bad_input),
		cmocka_unit_test(test_outlier_text_keys),
	};

	return cmocka_run_group_tests_name("outlier", tests, NULL, NULL);
}

/*
 * The directory's interval detections (Envoy's success rate and failure
 * percentage, docs/outlier.md) through the public API: outcomes reported
 * through the selector are counted per interval, the first route (or
 * state read) at or after the interval's end evaluates them,
 * and each verdict EJECT is an ejection with the consecutive kind's
 * timing (min(base * k, max), an exact return). The scenarios of Envoy's
 * test/common/upstream/outlier_detection_impl_test.cc, with their numbers
 * and times (interval 10 s, base ejection 30 s, in ms ticks here).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/outlier.h>
#include <resil/selector.h>

#include "support/cluster_fx.h"

/* loadRq(host, n, code): n calls to addr, each routed, picked (the others
 * excluded: no draw) and reported with o. */
static void
load(
    fx *f, const char *addr, int n, resil_outlier_kind unused, resil_outcome o)
{
	resil_candidate c;
	resil_pick p;
	uint64_t ex[16];
	size_t i, k;
	int j;

	(void)unused;
	for (j = 0; j < n; j++) {
		assert_int_equal(
		    resil_selector_route(f->sel, NULL, f->c, NULL), RESIL_OK);
		k = 0;
		for (i = 0; i < resil_candidates_count(f->c); i++) {
			resil_candidates_get(f->c, i, &c);
			if (strcmp(c.address, addr) != 0)
				ex[k++] = c.id;
		}
		assert_int_equal(
		    resil_selector_pick(f->sel, f->c, NULL, ex, k, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, addr);
		assert_int_equal(
		    resil_selector_report(f->sel, &p, o), RESIL_OK);
	}
}

#define OK RESIL_OUTLIER_NONE, RESIL_OUTCOME_SUCCESS
#define FAIL RESIL_OUTLIER_NONE, RESIL_OUTCOME_FAILURE

static size_t
candidates(fx *f)
{
	assert_int_equal(
	    resil_selector_route(f->sel, NULL, f->c, NULL), RESIL_OK);
	return resil_candidates_count(f->c);
}

/* Envoy's test setup: interval 10 s, base 30 s, max 300 s, the
 * consecutive kind out of the way (Envoy turns it off by runtime), every
 * endpoint ejectable (Envoy's tests set max_ejection_percent 100), no
 * panic, start at 0. */
static void
envoy_fx_pct(fx *f, resil_outlier_rate_config *rate, size_t n, uint32_t pct,
    uint32_t consecutive)
{
	fx_init(f, 0);
	f->dcfg.outlier.consecutive_failures = consecutive;
	f->dcfg.outlier.base_ejection = 30000;
	f->dcfg.outlier.max_ejection = 300000;
	f->dcfg.outlier.interval = 10000;
	f->dcfg.outlier.max_ejection_pct = pct;
	f->dcfg.outlier_rate = rate;
	f->dcfg.random = &f->hook;
	f->scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(f), 0);
	assert_int_equal(fx_push_weights(f, NULL, n), RESIL_OK);
	f->nev = 0;
}

static void
envoy_fx(fx *f, resil_outlier_rate_config *rate, size_t n)
{
	envoy_fx_pct(f, rate, n, 100, 1000000);
}

/* OutlierDetectorImplTest.BasicFlowSuccessRateExternalOrigin. */
static void
test_directory_rate_envoy_basic_success_rate(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_directory_rate_stats rs;
	resil_endpoint_state st;
	fx f;
	int i;

	(void)state;
	envoy_fx(&f, &rate, 5);
	assert_int_equal(
	    resil_directory_get_rate_stats(f.d, &rs), RESIL_E_NOTFOUND);
	for (i = 0; i < 5; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 200, OK);
	}
	load(&f, "e4:1", 200, FAIL);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e4:1", &st), RESIL_OK);
	assert_int_equal(st.interval_requests, 400);
	assert_int_equal(st.interval_successes, 200);
	assert_true(st.success_rate == -1);
	assert_int_equal(f.nev, 0);
	/* 9999: the interval has not ended. */
	resil_manual_clock_set(&f.mc, 9999);
	assert_int_equal(candidates(&f), 5);
	/* 10000: the first route evaluates: e4 at 50 is below 52. */
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(candidates(&f), 4);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	assert_string_equal(f.ev[0].address, "e4:1");
	assert_int_equal(f.ev[0].time, 10000);
	assert_int_equal(f.ev[0].duration, 30000);
	assert_int_equal(f.ev[0].ejections, 1);
	assert_int_equal(f.ev[0].kind, RESIL_OUTLIER_SUCCESS_RATE);
	assert_int_equal(resil_directory_get_rate_stats(f.d, &rs), RESIL_OK);
	assert_true(rs.last.success_rate_mean == 90.0);
	assert_true(rs.last.success_rate_threshold == 52.0);
	assert_int_equal(rs.last.success_rate_hosts, 5);
	assert_int_equal(rs.last.ejected, 1);
	assert_int_equal(rs.evaluated_at, 10000);
	assert_int_equal(rs.evaluations, 1);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e4:1", &st), RESIL_OK);
	assert_true(st.ejected);
	assert_int_equal(st.ejections, 1);
	assert_int_equal(st.ejected_until, 40000);
	assert_true(st.success_rate == 50.0);
	assert_int_equal(st.interval_requests, 0); /* a new interval */
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_true(st.success_rate == 100.0);
	/* An interval that does not bring it back (Envoy: 19999). */
	resil_manual_clock_set(&f.mc, 19999);
	assert_int_equal(candidates(&f), 4);
	/* It returns exactly at 10000 + 30000 (Envoy notices it at the
	 * interval timer after, 50001). */
	resil_manual_clock_set(&f.mc, 39999);
	assert_int_equal(candidates(&f), 4);
	resil_manual_clock_set(&f.mc, 40000);
	assert_int_equal(candidates(&f), 5);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_RETURNED);
	assert_int_equal(f.ev[1].time, 40000);
	/* 25 requests each, 25 more failing on e4: below the success rate's
	 * volume (100); e4's 50 requests reach the failure percentage's
	 * (50): only its rate is computed, nothing is ejected. */
	for (i = 0; i < 5; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 25, OK);
	}
	load(&f, "e4:1", 25, FAIL);
	resil_manual_clock_set(&f.mc, 60001);
	assert_int_equal(candidates(&f), 5);
	assert_int_equal(f.nev, 2);
	assert_int_equal(resil_directory_get_rate_stats(f.d, &rs), RESIL_OK);
	assert_true(rs.last.success_rate_mean == -1);
	assert_true(rs.last.success_rate_threshold == -1);
	assert_int_equal(rs.last.ejected, 0);
	/* Evaluations: at 10000; at 39999 (the intervals ending at 20000
	 * and 30000, one evaluation); at 40000; at 60001 (50000 and
	 * 60000). */
	assert_int_equal(rs.evaluations, 4);
	assert_int_equal(rs.evaluated_at, 60001);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e4:1", &st), RESIL_OK);
	assert_true(st.success_rate == 50.0);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_true(st.success_rate == -1);
	/* No draw was made: enforcing 100 and 0 draw nothing. */
	assert_int_equal(f.rnd.calls, 0);
	fx_end(&f);
}

/* OutlierDetectorImplTest.BasicFlowFailurePercentageExternalOrigin, from
 * configuration text: the success rate not enforced, the failure
 * percentage enforced; e3 at 83.3 % failures stays, e4 at 85.7 % goes. */
static void
test_directory_rate_envoy_failure_percentage_from_text(void **state)
{
	static const char *const text[][2] = {
		{ "outlier.consecutive_failures", "1000000" },
		{ "outlier.max_ejection_pct", "100" },
		{ "outlier.enforcing_success_rate", "0" },
		{ "outlier.enforcing_failure_percentage", "100" },
		{ "outlier.interval", "10000ns" },
		{ "outlier.base_ejection", "30000ns" },
	};
	resil_cluster_text *ct;
	resil_directory_rate_stats rs;
	resil_endpoint_state st;
	resil_diag diag;
	size_t i;
	fx f;

	(void)state;
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	for (i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		assert_int_equal(resil_cluster_text_set(ct, text[i][0],
		                     text[i][1], NULL, 0, &diag),
		    RESIL_OK);
	assert_int_equal(resil_cluster_text_finish(ct, &diag), RESIL_OK);
	fx_init(&f, 0);
	resil_cluster_text_directory(ct, &f.dcfg);
	assert_non_null(f.dcfg.outlier_rate);
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	resil_cluster_text_free(ct); /* the directory made its copy */
	assert_int_equal(fx_push_weights(&f, NULL, 5), RESIL_OK);
	f.nev = 0;
	for (i = 0; i < 5; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%zu:1", i);
		load(&f, a, 50, OK);
	}
	load(&f, "e3:1", 250, FAIL);
	load(&f, "e4:1", 300, FAIL);
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(candidates(&f), 4);
	assert_int_equal(f.nev, 1);
	assert_string_equal(f.ev[0].address, "e4:1");
	assert_int_equal(f.ev[0].kind, RESIL_OUTLIER_FAILURE_PERCENTAGE);
	assert_int_equal(f.ev[0].duration, 30000);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e3:1", &st), RESIL_OK);
	assert_false(st.ejected);
	assert_true(st.success_rate == 100.0 * 50.0 / 300.0);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e4:1", &st), RESIL_OK);
	assert_true(st.ejected);
	assert_true(st.success_rate == 100.0 * 50.0 / 350.0);
	assert_int_equal(resil_directory_get_rate_stats(f.d, &rs), RESIL_OK);
	assert_int_equal(rs.last.failure_percentage_hosts, 5);
	assert_int_equal(rs.last.ejected, 1);
	fx_end(&f);
}

/* The share counts every ejection: with Envoy's default of 10 % over
 * ten endpoints, one may be out at a time. Mock endpoints are neither
 * evaluated nor counted in N. */
static void
test_directory_rate_share_and_mocks(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_endpoint_spec mock = resil_endpoint_spec_default("m:1");
	resil_directory_rate_stats rs;
	resil_endpoint_state st;
	fx f;
	int i;

	(void)state;
	envoy_fx_pct(&f, &rate, 10, 10, 5);
	mock.mock = 1;
	assert_int_equal(resil_directory_add(f.d, &mock, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 11);
	f.nev = 0;
	/* e1 at 200 of 300, its failures never five in a row. */
	for (i = 0; i < 10; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 100, OK);
	}
	for (i = 0; i < 100; i++) {
		load(&f, "e1:1", 1, FAIL);
		load(&f, "e1:1", 1, OK);
	}
	resil_manual_clock_set(&f.mc, 10000);
	/* 100 * (0 + 1) <= 10 * 10: e1 goes. */
	assert_int_equal(candidates(&f), 9);
	assert_int_equal(f.nev, 1);
	assert_string_equal(f.ev[0].address, "e1:1");
	assert_int_equal(resil_directory_get_rate_stats(f.d, &rs), RESIL_OK);
	assert_int_equal(rs.last.success_rate_hosts, 10);
	fx_end(&f);

	/* Now e0 is out by five failures in a row when the interval ends:
	 * e1, found by the success rate (9 hosts: mean 96.30, threshold
	 * 76.39), is over the share, 100 * (1 + 1) > 10 * 10. */
	envoy_fx_pct(&f, &rate, 10, 10, 5);
	load(&f, "e0:1", 5, FAIL);
	assert_int_equal(f.nev, 1);
	for (i = 1; i < 10; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 100, OK);
	}
	for (i = 0; i < 100; i++) {
		load(&f, "e1:1", 1, FAIL);
		load(&f, "e1:1", 1, OK);
	}
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(candidates(&f), 9);
	assert_int_equal(f.nev, 1);
	assert_int_equal(resil_directory_get_rate_stats(f.d, &rs), RESIL_OK);
	assert_int_equal(rs.last.success_rate_hosts, 9);
	assert_int_equal(rs.last.over_max, 1);
	assert_int_equal(rs.last.ejected, 0);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_false(st.ejected);
	assert_true(st.success_rate == 200.0 * 100.0 / 300.0);
	assert_true(rs.last.success_rate_mean > 96.29 &&
	    rs.last.success_rate_mean < 96.30);
	assert_true(rs.last.success_rate_threshold > 76.39 &&
	    rs.last.success_rate_threshold < 76.40);
	fx_end(&f);
}

/* A failure percentage over two endpoints, the panic rule above it: with
 * one of two ejected, 50 % healthy is below a panic threshold of 60, so
 * both stay routable (the router's rule, unchanged). */
static void
test_directory_rate_panic_still_applies(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_route_stats rst;
	resil_endpoint_state st;
	fx f;

	(void)state;
	rate.enforcing_failure_percentage = 100;
	rate.failure_percentage_minimum_hosts = 2;
	rate.success_rate_minimum_hosts = 2;
	fx_init(&f, 0);
	f.dcfg.outlier.consecutive_failures = 1000000;
	f.dcfg.outlier.interval = 10000;
	f.dcfg.outlier.base_ejection = 30000;
	f.dcfg.outlier.max_ejection_pct = 100;
	f.dcfg.outlier_rate = &rate;
	f.scfg.panic_threshold_pct = 60;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	load(&f, "e0:1", 100, OK);
	load(&f, "e1:1", 100, FAIL);
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(candidates(&f), 2);
	resil_candidates_stats(f.c, &rst);
	assert_int_equal(rst.panic, 1);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_true(st.ejected);
	fx_end(&f);
}

/* Enforcing between 0 and 100: one draw per outlier, from the random
 * source given; u * 100 < enforcing ejects. */
static void
test_directory_rate_enforcing_draws(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	static const double draws[] = { 0.7, 0.2 };
	fx f;
	int i;

	(void)state;
	rate.enforcing_success_rate = 50;
	envoy_fx(&f, &rate, 5);
	scripted_set(&f.rnd, draws, 2);
	for (i = 0; i < 5; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 200, OK);
	}
	load(&f, "e4:1", 200, FAIL);
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(candidates(&f), 5); /* 70 >= 50: not enforced */
	assert_int_equal(f.rnd.calls, 1);
	/* Issue 38.14: a detection let go is evented (Envoy logs it with
	 * enforced=false), the endpoint kept in. */
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_DETECTED);
	assert_int_equal(f.ev[0].kind, RESIL_OUTLIER_SUCCESS_RATE);
	assert_string_equal(f.ev[0].address, "e4:1");
	assert_int_equal(f.ev[0].time, 10000);
	assert_int_equal(f.ev[0].duration, 0);
	f.nev = 0;
	for (i = 0; i < 5; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 200, OK);
	}
	load(&f, "e4:1", 200, FAIL);
	resil_manual_clock_set(&f.mc, 20000);
	assert_int_equal(candidates(&f), 4); /* 20 < 50 */
	assert_int_equal(f.rnd.calls, 2);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	assert_int_equal(f.ev[0].kind, RESIL_OUTLIER_SUCCESS_RATE);
	fx_end(&f);
}

/* Business errors and ignored outcomes are neither requests nor
 * successes; without outlier_rate nothing is counted or evaluated. */
static void
test_directory_rate_counts_and_off(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_directory_rate_stats rs;
	resil_endpoint_state st;
	fx f;

	(void)state;
	envoy_fx(&f, &rate, 2);
	load(&f, "e0:1", 3, OK);
	load(&f, "e0:1", 2, FAIL);
	load(&f, "e0:1", 4, RESIL_OUTLIER_NONE, RESIL_OUTCOME_BUSINESS);
	load(&f, "e0:1", 5, RESIL_OUTLIER_NONE, RESIL_OUTCOME_IGNORED);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.interval_requests, 5);
	assert_int_equal(st.interval_successes, 3);
	/* A state read ends the interval too. */
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.interval_requests, 0);
	assert_int_equal(resil_directory_get_rate_stats(f.d, &rs), RESIL_OK);
	assert_int_equal(rs.evaluations, 1);
	fx_end(&f);

	envoy_fx(&f, NULL, 2);
	load(&f, "e0:1", 3, OK);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.interval_requests, 0);
	resil_manual_clock_set(&f.mc, 10000);
	assert_int_equal(
	    resil_directory_get_rate_stats(f.d, &rs), RESIL_E_NOTFOUND);
	assert_int_equal(rs.evaluations, 0);
	fx_end(&f);
}

/* A bad rate config is refused by name, in C and in the text. */
static void
test_directory_rate_config_refused(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_directory_config cfg = resil_directory_config_default();
	resil_cluster_text *ct;
	resil_directory *d = NULL;
	resil_diag diag;

	(void)state;
	rate.enforcing_success_rate = 101;
	cfg.outlier_rate = &rate;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_null(d);
	assert_string_equal(diag.msg,
	    "outlier.enforcing_success_rate: 101 is out of range "
	    "0..100");
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	assert_int_equal(
	    resil_cluster_text_set(ct, "outlier.failure_percentage_threshold",
	        "101", "c.properties", 3, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "c.properties:3: outlier.failure_percentage_threshold: 101 is "
	    "out of range 0..100");
	assert_int_equal(
	    resil_cluster_text_set(
	        ct, "outlier.success_rate_minimum_host", "3", NULL, 0, &diag),
	    RESIL_E_NOTFOUND);
	assert_string_equal(
	    diag.msg, "outlier.success_rate_minimum_host: unknown key");
	/* No rate key given: the detections stay off. */
	cfg = resil_directory_config_default();
	cfg.outlier_rate = &rate;
	resil_cluster_text_directory(ct, &cfg);
	assert_null(cfg.outlier_rate);
	resil_cluster_text_free(ct);
}

/* The two kinds share the ejection count: an endpoint back from a
 * streak's ejection and found by the success rate before a full interval
 * in is on its second ejection, min(base * 2, max). */
static void
test_directory_rate_shares_k_with_streaks(void **state)
{
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_endpoint_state st;
	fx f;
	int i;

	(void)state;
	envoy_fx_pct(&f, &rate, 5, 100, 5);
	resil_manual_clock_set(&f.mc, 1000);
	load(&f, "e4:1", 5, FAIL);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].kind, RESIL_OUTLIER_NONE);
	assert_int_equal(f.ev[0].duration, 30000);
	/* Back at 31000 (the route evaluates the empty intervals too). */
	resil_manual_clock_set(&f.mc, 31000);
	assert_int_equal(candidates(&f), 5);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_RETURNED);
	for (i = 0; i < 4; i++) {
		char a[16];
		snprintf(a, sizeof(a), "e%d:1", i);
		load(&f, a, 200, OK);
	}
	for (i = 0; i < 200; i++) { /* never five failures in a row */
		load(&f, "e4:1", 1, FAIL);
		load(&f, "e4:1", 1, OK);
	}
	resil_manual_clock_set(&f.mc, 40000);
	assert_int_equal(candidates(&f), 4);
	assert_int_equal(f.nev, 3);
	assert_int_equal(f.ev[2].type, RESIL_ENDPOINT_EJECTED);
	assert_int_equal(f.ev[2].kind, RESIL_OUTLIER_SUCCESS_RATE);
	assert_int_equal(f.ev[2].ejections, 2);
	assert_int_equal(f.ev[2].duration, 60000);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e4:1", &st), RESIL_OK);
	assert_int_equal(st.ejected_until, 100000);
	assert_int_equal(st.streak, 0);
	fx_end(&f);
}

/* Issue 38.14, Envoy's enforcing_consecutive_5xx: a streak detection
 * inside the max share ejects with probability enforcing / 100, one draw
 * of the directory's random source per detection (none for 0 or 100, none
 * for one the share keeps in); a detection let go is the DETECTED event,
 * the endpoint stays in, and its streak restarts all the same. */
static void
consecutive_fx(fx *f, scripted *drs, resil_random *hook, size_t n,
    uint32_t pct, uint32_t enforcing)
{
	fx_init(f, 0);
	memset(drs, 0, sizeof(*drs));
	hook->uniform = scripted_uniform;
	hook->ctx = drs;
	f->dcfg.outlier.consecutive_failures = 3;
	f->dcfg.outlier.base_ejection = 30000;
	f->dcfg.outlier.max_ejection = 300000;
	f->dcfg.outlier.interval = 10000;
	f->dcfg.outlier.max_ejection_pct = pct;
	f->dcfg.outlier_enforcing_consecutive_failures = enforcing;
	f->dcfg.random = hook; /* the directory's draws alone */
	f->scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(f), 0);
	assert_int_equal(fx_push_weights(f, NULL, n), RESIL_OK);
	f->nev = 0;
}

static void
test_directory_enforcing_consecutive(void **state)
{
	static const double draws[] = { 0.5, 0.1 };
	resil_endpoint_state st;
	resil_random hook;
	scripted drs;
	fx f;

	(void)state;
	/* 30 %: the first detection draws 0.5 (50 >= 30, let go), the
	 * second 0.1 (10 < 30, ejected, its first ejection). */
	consecutive_fx(&f, &drs, &hook, 4, 100, 30);
	scripted_set(&drs, draws, 2);
	resil_manual_clock_set(&f.mc, 1000);
	load(&f, "e0:1", 3, FAIL);
	assert_int_equal(drs.calls, 1);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_DETECTED);
	assert_int_equal(f.ev[0].kind, RESIL_OUTLIER_NONE);
	assert_string_equal(f.ev[0].address, "e0:1");
	assert_int_equal(f.ev[0].time, 1000);
	assert_int_equal(f.ev[0].duration, 0);
	assert_int_equal(f.ev[0].ejections, 0);
	assert_int_equal(candidates(&f), 4);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 0); /* restarted, though not ejected */
	assert_false(st.ejected);
	assert_int_equal(st.ejections, 0);
	load(&f, "e0:1", 2, FAIL); /* a streak of 2: no detection */
	assert_int_equal(drs.calls, 1);
	resil_manual_clock_set(&f.mc, 2000);
	load(&f, "e0:1", 1, FAIL);
	assert_int_equal(drs.calls, 2);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_EJECTED);
	assert_int_equal(f.ev[1].kind, RESIL_OUTLIER_NONE);
	assert_int_equal(f.ev[1].time, 2000);
	assert_int_equal(f.ev[1].duration, 30000);
	assert_int_equal(f.ev[1].ejections, 1);
	assert_int_equal(candidates(&f), 3);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_true(st.ejected);
	assert_int_equal(st.ejected_until, 32000);
	fx_end(&f);

	/* 0 %: detected, evented, never ejected, no draw. */
	consecutive_fx(&f, &drs, &hook, 4, 100, 0);
	load(&f, "e1:1", 6, FAIL);
	assert_int_equal(drs.calls, 0);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_DETECTED);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_DETECTED);
	assert_int_equal(candidates(&f), 4);
	fx_end(&f);

	/* 100 % (the default): ejects with no draw. */
	consecutive_fx(&f, &drs, &hook, 4, 100, 100);
	load(&f, "e1:1", 3, FAIL);
	assert_int_equal(drs.calls, 0);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	fx_end(&f);

	/* The share first: with 50 % of two, the second detection is kept
	 * in by the share (Envoy's overflow), with no draw and no event. */
	consecutive_fx(&f, &drs, &hook, 2, 50, 50);
	scripted_set(&drs, draws + 1, 1);
	load(&f, "e0:1", 3, FAIL);
	assert_int_equal(drs.calls, 1);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	load(&f, "e1:1", 3, FAIL);
	assert_int_equal(drs.calls, 1);
	assert_int_equal(f.nev, 1);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 0);
	fx_end(&f);
}

/* The field's default, its range, and the text key that sets it. */
static void
test_directory_enforcing_consecutive_config(void **state)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_config *conf = NULL;
	resil_diag d;

	(void)state;
	assert_int_equal(dc.outlier_enforcing_consecutive_failures, 100);
	dc.outlier_enforcing_consecutive_failures = 101;
	assert_int_equal(
	    resil_directory_config_validate(&dc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "outlier.enforcing_consecutive_failures: 101 is out of range "
	    "0..100");
	assert_int_equal(resil_config_parse_string(&conf,
	                     "outlier.enforcing_consecutive_failures=30\n",
	                     "t.conf", NULL, &d),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	assert_int_equal(resil_config_directory(conf, &dc), 1);
	assert_int_equal(dc.outlier_enforcing_consecutive_failures, 30);
	/* Not one of the interval detections' keys: they stay off. */
	assert_null(dc.outlier_rate);
	resil_config_free(conf);
	conf = NULL;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "service=S\n"
	                     "outlier.enforcing_consecutive_failures=101\n",
	                     "t.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_null(conf);
	assert_string_equal(d.msg,
	    "t.conf:2: outlier.enforcing_consecutive_failures: 101 is out "
	    "of range 0..100");
	/* A text without the key gives the default: resil_config_directory()
	 * overwrites the outlier settings, this one with them. */
	assert_int_equal(resil_config_parse_string(
	                     &conf, "outlier.interval=5s\n", "t.conf", NULL, &d),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	dc.outlier_enforcing_consecutive_failures = 7;
	(void)resil_config_directory(conf, &dc);
	assert_int_equal(dc.outlier_enforcing_consecutive_failures, 100);
	resil_config_free(conf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_directory_rate_envoy_basic_success_rate),
		cmocka_unit_test(
		    test_directory_rate_envoy_failure_percentage_from_text),
		cmocka_unit_test(test_directory_rate_share_and_mocks),
		cmocka_unit_test(test_directory_rate_panic_still_applies),
		cmocka_unit_test(test_directory_rate_enforcing_draws),
		cmocka_unit_test(test_directory_enforcing_consecutive),
		cmocka_unit_test(test_directory_enforcing_consecutive_config),
		cmocka_unit_test(test_directory_rate_counts_and_off),
		cmocka_unit_test(test_directory_rate_config_refused),
		cmocka_unit_test(test_directory_rate_shares_k_with_streaks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

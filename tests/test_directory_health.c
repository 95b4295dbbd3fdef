/*
 * Active health checks wired into the directory, through the public API:
 * resil_directory_config.health makes every non-mock endpoint a target of
 * a checker the caller drives (resil_directory_health(), then
 * resil_health_next() and _report() with readings of the directory's
 * clock); an endpoint the checker holds UNHEALTHY is not a candidate until
 * it passes again. Manual clock; nothing sleeps.
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
#include <resil/health.h>
#include <resil/selector.h>

#include "support/cluster_fx.h"

/* The probes' answers: per address prefix ("e0" ...), the result. */
typedef struct probe_table {
	const char *addr[8];
	resil_probe_result res[8];
	size_t n;
	size_t probes; /* run by drive() */
	void *user[8]; /* the user pointer handed with each probe */
} probe_table;

static resil_probe_result
answer(const probe_table *t, const char *addr)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->addr[i], addr) == 0)
			return t->res[i];
	return RESIL_PROBE_OK;
}

/* Run every probe due at now, each answered at once from t. */
static void
drive(fx *f, probe_table *t)
{
	resil_health *hc = resil_directory_health(f->d);
	uint64_t now = resil_clock_now(resil_manual_clock_hook(&f->mc));
	resil_health_step st;

	assert_non_null(hc);
	for (;;) {
		assert_int_equal(resil_health_next(hc, now, &st), RESIL_OK);
		if (st.action != RESIL_HEALTH_PROBE)
			break;
		if (t->probes < 8)
			t->user[t->probes] = st.user;
		t->probes++;
		assert_int_equal(resil_health_report(
		                     hc, st.probe, answer(t, st.address), now),
		    RESIL_OK);
	}
}

static void
set(probe_table *t, const char *addr, resil_probe_result r)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (strcmp(t->addr[i], addr) == 0) {
			t->res[i] = r;
			return;
		}
	t->addr[t->n] = addr;
	t->res[t->n++] = r;
}

static size_t
candidates(fx *f)
{
	if (resil_selector_route(f->sel, NULL, f->c, NULL) != RESIL_OK)
		return 0;
	return resil_candidates_count(f->c);
}

static int
healthy(fx *f, const char *addr)
{
	resil_endpoint_state st;

	assert_int_equal(resil_directory_get_state(f->d, addr, &st), RESIL_OK);
	return st.healthy;
}

static resil_health_config
hcfg(void)
{
	resil_health_config c = resil_health_config_default();

	c.interval_ns = 1000;
	c.timeout_ns = 100;
	c.unhealthy_threshold = 2;
	c.healthy_threshold = 2;
	return c;
}

static void
test_directory_health_unhealthy_is_not_a_candidate(void **state)
{
	resil_health_config hc = hcfg();
	resil_endpoint_spec sp[3];
	static int users[3];
	probe_table t;
	size_t i;
	fx f;

	(void)state;
	memset(&t, 0, sizeof(t));
	fx_init(&f, 0);
	f.dcfg.health = &hc;
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	sp[0] = resil_endpoint_spec_default("e0:1");
	sp[1] = resil_endpoint_spec_default("e1:1");
	sp[2] = resil_endpoint_spec_default("e2:1");
	for (i = 0; i < 3; i++)
		sp[i].user = &users[i];
	assert_int_equal(resil_directory_push(f.d, sp, 3, NULL), RESIL_OK);
	assert_int_equal(resil_health_count(resil_directory_health(f.d)), 3);
	/* New targets are unhealthy until their first probe passes. */
	assert_false(healthy(&f, "e0:1"));
	assert_int_equal(candidates(&f), 0);
	f.nev = 0;
	set(&t, "e2:1", RESIL_PROBE_FAILED);
	drive(&f, &t);
	assert_int_equal(t.probes, 3);
	/* Probes in the order the targets were added, with their users. */
	assert_ptr_equal(t.user[0], &users[0]);
	assert_ptr_equal(t.user[2], &users[2]);
	assert_true(healthy(&f, "e0:1"));
	assert_true(healthy(&f, "e1:1"));
	assert_false(healthy(&f, "e2:1"));
	assert_int_equal(candidates(&f), 2);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_HEALTHY);
	assert_string_equal(f.ev[0].address, "e0:1");
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_HEALTHY);
	assert_string_equal(f.ev[1].address, "e1:1");
	/* 1000: e1 fails once (still healthy), e2 passes once (still
	 * unhealthy: two in a row needed). */
	set(&t, "e1:1", RESIL_PROBE_FAILED);
	set(&t, "e2:1", RESIL_PROBE_OK);
	resil_manual_clock_set(&f.mc, 1000);
	drive(&f, &t);
	assert_int_equal(t.probes, 6);
	assert_int_equal(candidates(&f), 2);
	/* 2000: the second in a row of each: e1 out, e2 in. */
	resil_manual_clock_set(&f.mc, 2000);
	drive(&f, &t);
	assert_false(healthy(&f, "e1:1"));
	assert_true(healthy(&f, "e2:1"));
	assert_int_equal(candidates(&f), 2);
	assert_int_equal(f.nev, 4);
	assert_int_equal(f.ev[2].type, RESIL_ENDPOINT_UNHEALTHY);
	assert_string_equal(f.ev[2].address, "e1:1");
	assert_int_equal(f.ev[2].time, 2000);
	assert_int_equal(f.ev[3].type, RESIL_ENDPOINT_HEALTHY);
	assert_string_equal(f.ev[3].address, "e2:1");
	{
		size_t k;
		for (k = 0; k < resil_candidates_count(f.c); k++) {
			resil_candidate c;
			resil_candidates_get(f.c, k, &c);
			assert_string_not_equal(c.address, "e1:1");
		}
	}
	/* DOWN: unhealthy at once, whatever the threshold. */
	set(&t, "e0:1", RESIL_PROBE_DOWN);
	resil_manual_clock_set(&f.mc, 3000);
	drive(&f, &t);
	assert_false(healthy(&f, "e0:1"));
	assert_int_equal(candidates(&f), 1);
	fx_end(&f);
}

/* The mark lives with the endpoint's state: a push that keeps the address
 * keeps it; a removed endpoint stops being a target; a new one is probed
 * at once and starts unhealthy; mock endpoints are never targets. The
 * panic rule counts unhealthy endpoints as unhealthy. */
static void
test_directory_health_follows_the_list(void **state)
{
	resil_health_config hc = hcfg();
	resil_endpoint_spec sp[3];
	resil_route_stats rst;
	probe_table t;
	fx f;

	(void)state;
	memset(&t, 0, sizeof(t));
	fx_init(&f, 0);
	f.dcfg.health = &hc;
	f.scfg.panic_threshold_pct = 50;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	/* Neither healthy: panic routes to both. */
	assert_int_equal(candidates(&f), 2);
	resil_candidates_stats(f.c, &rst);
	assert_int_equal(rst.panic, 1);
	set(&t, "e1:1", RESIL_PROBE_FAILED);
	drive(&f, &t);
	/* One of two healthy is 50 %, not below: no panic. */
	assert_int_equal(candidates(&f), 1);
	resil_candidates_stats(f.c, &rst);
	assert_int_equal(rst.panic, 0);
	/* Reordered, a mock and a new endpoint added: e0 stays healthy, e1
	 * unhealthy; e2 is a new target, the mock none. */
	sp[0] = resil_endpoint_spec_default("e1:1");
	sp[1] = resil_endpoint_spec_default("e2:1");
	sp[2] = resil_endpoint_spec_default("m:1");
	sp[2].mock = 1;
	{
		resil_endpoint_spec all[4];
		all[0] = sp[0];
		all[1] = resil_endpoint_spec_default("e0:1");
		all[2] = sp[1];
		all[3] = sp[2];
		assert_int_equal(
		    resil_directory_push(f.d, all, 4, NULL), RESIL_OK);
	}
	assert_int_equal(resil_health_count(resil_directory_health(f.d)), 3);
	assert_true(healthy(&f, "e0:1"));
	assert_false(healthy(&f, "e1:1"));
	assert_false(healthy(&f, "e2:1"));
	assert_int_equal(
	    resil_health_is_healthy(resil_directory_health(f.d), "m:1"), 0);
	/* One of three healthy, below 50 %: panic. */
	assert_int_equal(candidates(&f), 3);
	resil_candidates_stats(f.c, &rst);
	assert_int_equal(rst.panic, 1);
	/* e2 is due at once. */
	t.probes = 0;
	drive(&f, &t);
	assert_int_equal(t.probes, 1);
	assert_true(healthy(&f, "e2:1"));
	assert_int_equal(candidates(&f), 2);
	/* e1 removed: no longer a target. */
	assert_int_equal(resil_directory_remove(f.d, "e1:1", NULL), RESIL_OK);
	assert_int_equal(resil_health_count(resil_directory_health(f.d)), 2);
	assert_false(
	    resil_health_is_healthy(resil_directory_health(f.d), "e1:1"));
	fx_end(&f);
}

/* health.initial=healthy: new endpoints are candidates before any
 * probe; without a checker, resil_directory_set_healthy() marks by
 * hand. */
static void
test_directory_health_initial_and_by_hand(void **state)
{
	resil_health_config hc = hcfg();
	resil_endpoint_state st;
	fx f;

	(void)state;
	hc.initial_healthy = 1;
	fx_init(&f, 0);
	f.dcfg.health = &hc;
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 3), RESIL_OK);
	assert_int_equal(candidates(&f), 3);
	fx_end(&f);

	fx_init(&f, 0);
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_null(resil_directory_health(f.d));
	assert_int_equal(fx_push_weights(&f, NULL, 3), RESIL_OK);
	assert_int_equal(candidates(&f), 3);
	f.nev = 0;
	assert_int_equal(
	    resil_directory_set_healthy(f.d, "e1:1", 0), RESIL_OK);
	assert_int_equal(
	    resil_directory_set_healthy(f.d, "e1:1", 0), RESIL_OK);
	assert_int_equal(f.nev, 1); /* a change only */
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_UNHEALTHY);
	assert_string_equal(
	    resil_endpoint_event_name(f.ev[0].type), "UNHEALTHY");
	assert_int_equal(candidates(&f), 2);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_false(st.healthy);
	assert_false(st.ejected); /* not an ejection */
	assert_int_equal(
	    resil_directory_set_healthy(f.d, "e1:1", 1), RESIL_OK);
	assert_int_equal(candidates(&f), 3);
	assert_string_equal(
	    resil_endpoint_event_name(f.ev[1].type), "HEALTHY");
	assert_int_equal(
	    resil_directory_set_healthy(f.d, "x:1", 1), RESIL_E_NOTFOUND);
	assert_int_equal(
	    resil_directory_set_healthy(NULL, "x:1", 1), RESIL_E_INVAL);
	fx_end(&f);
}

/* An unhealthy endpoint that is also outlier-ejected needs both to end:
 * the ejection's return does not make it a candidate, nor does passing
 * checks while ejected. */
static void
test_directory_health_and_ejection(void **state)
{
	resil_health_config hc = hcfg();
	resil_endpoint_state st;
	probe_table t;
	resil_pick p;
	fx f;

	(void)state;
	memset(&t, 0, sizeof(t));
	hc.initial_healthy = 1;
	fx_init(&f, 0);
	f.dcfg.health = &hc;
	f.dcfg.outlier.consecutive_failures = 1;
	f.dcfg.outlier.base_ejection = 500;
	f.dcfg.outlier.max_ejection_pct = 100;
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 1), RESIL_OK);
	assert_string_equal(fx_pick(&f, NULL, &p), "e0:1");
	resil_selector_report(f.sel, &p, RESIL_OUTCOME_FAILURE);
	assert_int_equal(candidates(&f), 0);
	set(&t, "e0:1", RESIL_PROBE_DOWN);
	drive(&f, &t);
	assert_false(healthy(&f, "e0:1"));
	/* 500: the ejection ends, the check still says unhealthy. */
	resil_manual_clock_set(&f.mc, 500);
	assert_int_equal(candidates(&f), 0);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_false(st.ejected);
	/* Two passes in a row bring it back. */
	set(&t, "e0:1", RESIL_PROBE_OK);
	resil_manual_clock_set(&f.mc, 1000);
	drive(&f, &t);
	assert_int_equal(candidates(&f), 0);
	resil_manual_clock_set(&f.mc, 2000);
	drive(&f, &t);
	assert_int_equal(candidates(&f), 1);
	fx_end(&f);
}

static int nlistened;

static void
user_listener(const resil_health_event *ev, void *ctx)
{
	(void)ev;
	(void)ctx;
	nlistened++;
}

/* From configuration text: health.* keys turn the checker on,
 * health.enabled=false off; a bad key or value is refused by name. The
 * user's listener in the C config is still called. */
static void
test_directory_health_from_text(void **state)
{
	static const char *const text[][2] = {
		{ "health.interval", "1000ns" },
		{ "health.timeout", "100ns" },
		{ "health.unhealthy_threshold", "1" },
		{ "health.healthy_threshold", "1" },
	};
	resil_cluster_text *ct;
	resil_health_config cfg = hcfg();
	resil_directory_config dc = resil_directory_config_default();
	probe_table t;
	resil_diag diag;
	size_t i;
	fx f;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	resil_cluster_text_directory(ct, &dc);
	assert_null(dc.health);
	for (i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		assert_int_equal(resil_cluster_text_set(ct, text[i][0],
		                     text[i][1], NULL, 0, &diag),
		    RESIL_OK);
	assert_int_equal(resil_cluster_text_finish(ct, &diag), RESIL_OK);
	fx_init(&f, 0);
	resil_cluster_text_directory(ct, &f.dcfg);
	assert_non_null(f.dcfg.health);
	assert_int_equal(f.dcfg.health->interval_ns, 1000);
	assert_int_equal(f.dcfg.health->unhealthy_threshold, 1);
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	set(&t, "e1:1", RESIL_PROBE_FAILED);
	drive(&f, &t);
	assert_int_equal(candidates(&f), 1);
	fx_end(&f);
	/* health.enabled=false wins over the keys, and over the C
	 * config's checker; a text without health keys leaves it. */
	assert_int_equal(resil_cluster_text_set(
	                     ct, "health.enabled", "false", NULL, 0, &diag),
	    RESIL_OK);
	dc = resil_directory_config_default();
	dc.health = &cfg;
	resil_cluster_text_directory(ct, &dc);
	assert_null(dc.health);
	{
		resil_cluster_text *none;
		assert_int_equal(
		    resil_cluster_text_new(&none, NULL), RESIL_OK);
		dc.health = &cfg;
		resil_cluster_text_directory(none, &dc);
		assert_ptr_equal(dc.health, &cfg);
		resil_cluster_text_free(none);
	}
	assert_int_equal(
	    resil_cluster_text_set(
	        ct, "health.unhealthy_threshold", "0", "svc.conf", 4, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "svc.conf:4: health.unhealthy_threshold: 0 is out of range "
	    "1..4294967295");
	assert_int_equal(resil_cluster_text_set(
	                     ct, "health.enabled", "maybe", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "health.enabled: \"maybe\" is not a boolean");
	resil_cluster_text_free(ct);

	/* The user's listener hears the checker's transitions. */
	set(&t, "e1:1", RESIL_PROBE_OK);
	nlistened = 0;
	cfg.listener = user_listener;
	fx_init(&f, 0);
	f.dcfg.health = &cfg;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	drive(&f, &t);
	assert_int_equal(nlistened, 2);
	fx_end(&f);

	/* A bad checker config is refused by the directory. */
	cfg.unhealthy_threshold = 0;
	dc = resil_directory_config_default();
	dc.health = &cfg;
	{
		resil_directory *d = NULL;
		assert_int_equal(
		    resil_directory_new(&d, &dc, &diag), RESIL_E_INVAL);
		assert_null(d);
	}
}

/* One configuration file: the pipeline's keys, the selector's, the
 * interval detections' and the checker's, read by resil_config; the
 * directory built from it checks its endpoints. */
static void
test_directory_health_from_a_config_file(void **state)
{
	static const char text[] =
	    "service=S\n"
	    "timeout=3000\n"
	    "outlier.enforcing_failure_percentage=100\n"
	    "outlier.failure_percentage_minimum_hosts=2\n"
	    "health.interval=1s\n"
	    "health.timeout=200\n"
	    "health.unhealthy_threshold=1\n";
	resil_config *conf;
	resil_diag diag;
	probe_table t;
	fx f;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(
	    resil_config_parse_string(&conf, text, "svc.conf", NULL, &diag),
	    RESIL_OK);
	fx_init(&f, 0);
	assert_int_equal(resil_config_directory(conf, &f.dcfg), 1);
	assert_non_null(f.dcfg.health);
	assert_int_equal(f.dcfg.health->interval_ns, RESIL_NS_PER_SEC);
	assert_int_equal(f.dcfg.health->timeout_ns, 200 * RESIL_NS_PER_MS);
	assert_non_null(f.dcfg.outlier_rate);
	assert_int_equal(
	    f.dcfg.outlier_rate->enforcing_failure_percentage, 100);
	assert_int_equal(
	    f.dcfg.outlier_rate->failure_percentage_minimum_hosts, 2);
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	resil_config_free(conf); /* the directory made its copies */
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	set(&t, "e0:1", RESIL_PROBE_FAILED);
	drive(&f, &t);
	assert_int_equal(candidates(&f), 1);
	fx_end(&f);
	/* A bad checker value is refused with its line. */
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "service=S\nhealth.initial=sick\n", "svc.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "svc.conf:2: health.initial: \"sick\" is not healthy or "
	    "unhealthy");
}

/* A probe not answered by its deadline has timed out at deadline + 1,
 * however late the loop notices: the endpoint's event carries that time
 * (a replay gives the same). */
static void
test_directory_health_timeout_time(void **state)
{
	resil_health_config hc = hcfg();
	resil_health_step st;
	resil_health *h;
	fx f;

	(void)state;
	hc.initial_healthy = 1;
	hc.unhealthy_threshold = 1;
	fx_init(&f, 0);
	f.dcfg.health = &hc;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 1), RESIL_OK);
	h = resil_directory_health(f.d);
	f.nev = 0;
	assert_int_equal(resil_health_next(h, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_HEALTH_PROBE);
	assert_int_equal(st.deadline, 100);
	/* Never answered; the loop wakes at 150. */
	resil_manual_clock_set(&f.mc, 150);
	assert_int_equal(resil_health_next(h, 150, &st), RESIL_OK);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_UNHEALTHY);
	assert_int_equal(f.ev[0].time, 101);
	assert_false(healthy(&f, "e0:1"));
	fx_end(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_directory_health_unhealthy_is_not_a_candidate),
		cmocka_unit_test(test_directory_health_follows_the_list),
		cmocka_unit_test(test_directory_health_initial_and_by_hand),
		cmocka_unit_test(test_directory_health_and_ejection),
		cmocka_unit_test(test_directory_health_from_text),
		cmocka_unit_test(test_directory_health_from_a_config_file),
		cmocka_unit_test(test_directory_health_timeout_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

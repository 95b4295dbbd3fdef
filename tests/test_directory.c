#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/selector.h>

#include "support/cluster_fx.h"
#include "support/fail_alloc.h"

static resil_endpoint_spec
spec(const char *addr, const char *zone, int32_t w)
{
	resil_endpoint_spec s = resil_endpoint_spec_default(addr);

	s.zone = zone;
	s.weight = w;
	return s;
}

static void
test_directory_push_keeps_positions_and_state(void **state)
{
	resil_endpoint_spec s[4];
	resil_endpoint_state st;
	resil_pick p;
	uint64_t id_b;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(resil_directory_count(f.d), 0);
	assert_int_equal(resil_directory_version(f.d), 0);
	s[0] = spec("a:1", "hz", 100);
	s[1] = spec("b:1", "hz", 100);
	s[2] = spec("c:1", "sh", 100);
	assert_int_equal(resil_directory_push(f.d, s, 3, NULL), RESIL_OK);
	assert_int_equal(resil_directory_version(f.d), 1);
	/* b is busy across the next push. */
	assert_int_equal(resil_directory_get_state(f.d, "b:1", &st), RESIL_OK);
	id_b = st.id;
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	{
		uint64_t ex[2];
		resil_candidate c0, c2;
		resil_candidates_get(f.c, 0, &c0);
		resil_candidates_get(f.c, 2, &c2);
		ex[0] = c0.id;
		ex[1] = c2.id;
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, NULL, ex, 2, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, "b:1");
	}
	/* A push in another order, without a, with a new d: b and c keep
	 * their places (now 0 and 1), d is appended; b's weight changes. */
	s[0] = spec("d:1", "sh", 100);
	s[1] = spec("c:1", "sh", 100);
	s[2] = spec("b:1", "hz", 7);
	assert_int_equal(resil_directory_push(f.d, s, 3, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 3);
	assert_int_equal(resil_directory_get_state(f.d, "b:1", &st), RESIL_OK);
	assert_int_equal(st.position, 0);
	assert_int_equal(st.id, id_b);
	assert_int_equal(st.active, 1); /* the state survived */
	assert_int_equal(st.weight, 7);
	assert_int_equal(resil_directory_get_state(f.d, "c:1", &st), RESIL_OK);
	assert_int_equal(st.position, 1);
	assert_int_equal(resil_directory_get_state(f.d, "d:1", &st), RESIL_OK);
	assert_int_equal(st.position, 2);
	assert_int_equal(
	    resil_directory_get_state(f.d, "a:1", &st), RESIL_E_NOTFOUND);
	/* Events: a removed, d added, with their addresses. */
	assert_int_equal(f.nev, 5);
	assert_int_equal(f.ev[3].type, RESIL_ENDPOINT_REMOVED);
	assert_string_equal(f.ev[3].address, "a:1");
	assert_int_equal(f.ev[4].type, RESIL_ENDPOINT_ADDED);
	assert_string_equal(f.ev[4].address, "d:1");
	/* The pick made before the push is reported against the same
	 * state. */
	assert_int_equal(
	    resil_selector_report(f.sel, &p, RESIL_OUTCOME_SUCCESS), RESIL_OK);
	assert_int_equal(resil_directory_get_state(f.d, "b:1", &st), RESIL_OK);
	assert_int_equal(st.active, 0);
	fx_end(&f);
}

static void
test_directory_events_add_update_remove(void **state)
{
	resil_endpoint_spec s;
	resil_endpoint_state st;
	resil_diag diag;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	assert_int_equal(fx_start(&f), 0);
	s = spec("a:1", NULL, 10);
	assert_int_equal(resil_directory_add(f.d, &s, NULL), RESIL_OK);
	s = spec("b:1", NULL, 20);
	assert_int_equal(resil_directory_add(f.d, &s, NULL), RESIL_OK);
	assert_int_equal(resil_directory_add(f.d, &s, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoint.address: b:1 is already present");
	s = spec("a:1", "hz", 30);
	assert_int_equal(resil_directory_update(f.d, &s, NULL), RESIL_OK);
	assert_int_equal(resil_directory_get_state(f.d, "a:1", &st), RESIL_OK);
	assert_int_equal(st.position, 0);
	assert_int_equal(st.weight, 30);
	s = spec("z:1", NULL, 1);
	assert_int_equal(
	    resil_directory_update(f.d, &s, &diag), RESIL_E_NOTFOUND);
	assert_string_equal(diag.msg, "endpoint.address: z:1 is not present");
	assert_int_equal(
	    resil_directory_remove(f.d, "z:1", &diag), RESIL_E_NOTFOUND);
	assert_int_equal(resil_directory_remove(f.d, "a:1", NULL), RESIL_OK);
	assert_int_equal(resil_directory_get_state(f.d, "b:1", &st), RESIL_OK);
	assert_int_equal(st.position, 0);
	assert_int_equal(resil_directory_version(f.d), 4);
	/* A refused update names the event's field and changes nothing. */
	s = spec("b:1", NULL, -5);
	assert_int_equal(
	    resil_directory_update(f.d, &s, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoint.weight: -5 is negative (0 is allowed)");
	assert_int_equal(resil_directory_version(f.d), 4);
	fx_end(&f);
}

static void
test_directory_bad_input_changes_nothing(void **state)
{
	resil_endpoint_spec s[3];
	resil_diag diag;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	assert_int_equal(fx_start(&f), 0);
	s[0] = spec("a:1", NULL, 1);
	assert_int_equal(resil_directory_push(f.d, s, 1, NULL), RESIL_OK);

	s[0] = spec("x:1", NULL, 1);
	s[1] = spec("y:1", NULL, 2);
	s[2] = spec("x:1", NULL, 3);
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoints[2].address: duplicate of endpoints[0] (x:1)");
	s[2] = spec("z:1", NULL, -1);
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoints[2].weight: -1 is negative (0 is allowed)");
	s[2] = spec("", NULL, 1);
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, "endpoints[2].address: empty");
	s[2] = spec("z 1", NULL, 1);
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoints[2].address: \"z 1\" contains a blank");
	s[2] = spec("z:1", "", 1);
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoints[2].zone: empty (use NULL for no zone)");
	s[2] = spec("z:1", NULL, 1);
	s[2].params = "a=1&b";
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "endpoints[2].params: \"a=1&b\" at column 5: expected key=value");
	s[2].params = "a=1&";
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "endpoints[2].params: \"a=1&\" at column 5: expected key=value");
	s[2].params = "&a=1";
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	s[2].params = "=1";
	assert_int_equal(
	    resil_directory_push(f.d, s, 3, &diag), RESIL_E_INVAL);
	s[2].params = NULL;
	assert_int_equal(
	    resil_directory_push(NULL, s, 3, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_directory_push(f.d, NULL, 3, &diag), RESIL_E_INVAL);
	/* Nothing changed. */
	assert_int_equal(resil_directory_version(f.d), 1);
	assert_int_equal(resil_directory_count(f.d), 1);
	/* 0 is allowed. */
	s[0] = spec("a:1", NULL, 0);
	assert_int_equal(resil_directory_push(f.d, s, 1, NULL), RESIL_OK);
	fx_end(&f);
}

/* Dubbo's empty protection: an empty push (or one of mock endpoints only)
 * keeps the last non-empty list and says so; turned off, it applies. */
static void
test_directory_empty_push_keeps_last_list(void **state)
{
	resil_endpoint_spec s[2];
	resil_config *conf;
	resil_directory_config dc;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	assert_true(f.dcfg.empty_protection); /* on by default */
	assert_int_equal(fx_start(&f), 0);
	/* An empty directory takes an empty push: nothing to keep. */
	assert_int_equal(resil_directory_push(f.d, NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_directory_version(f.d), 1);
	assert_int_equal(f.nev, 0);
	s[0] = spec("a:1", "hz", 100);
	s[1] = spec("b:1", "hz", 100);
	assert_int_equal(resil_directory_push(f.d, s, 2, NULL), RESIL_OK);
	assert_int_equal(resil_directory_version(f.d), 2);
	assert_int_equal(f.nev, 2);
	assert_int_equal(resil_directory_push(f.d, NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 2);
	assert_int_equal(resil_directory_version(f.d), 2);
	assert_int_equal(f.nev, 3);
	assert_int_equal(f.ev[2].type, RESIL_ENDPOINT_EMPTY_PUSH);
	assert_string_equal(f.ev[2].address, "");
	assert_int_equal(f.ev[2].duration, 2);
	assert_int_equal(f.ev[2].time, 1000);
	assert_string_equal(
	    resil_endpoint_event_name(RESIL_ENDPOINT_EMPTY_PUSH),
	    "EMPTY_PUSH");
	/* Mock endpoints are no providers: the same. */
	s[0] = spec("m:1", NULL, 100);
	s[0].mock = 1;
	assert_int_equal(resil_directory_push(f.d, s, 1, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 2);
	assert_int_equal(f.ev[3].type, RESIL_ENDPOINT_EMPTY_PUSH);
	/* A bad empty-ish push is still refused as bad. */
	s[0] = spec("m:1", NULL, -1);
	s[0].mock = 1;
	assert_int_equal(
	    resil_directory_push(f.d, s, 1, &f.diag), RESIL_E_INVAL);
	assert_int_equal(f.nev, 4);
	/* A partial push is applied (only an empty one is protected). */
	s[0] = spec("b:1", "hz", 100);
	assert_int_equal(resil_directory_push(f.d, s, 1, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 1);
	/* An explicit remove of the last provider is applied. */
	assert_int_equal(resil_directory_remove(f.d, "b:1", NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 0);
	fx_end(&f);

	/* Off: the empty push empties the list. */
	fx_init(&f, 1000);
	f.dcfg.empty_protection = 0;
	assert_int_equal(fx_start(&f), 0);
	s[0] = spec("a:1", "hz", 100);
	assert_int_equal(resil_directory_push(f.d, s, 1, NULL), RESIL_OK);
	assert_int_equal(resil_directory_push(f.d, NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 0);
	assert_int_equal(f.ev[f.nev - 1].type, RESIL_ENDPOINT_REMOVED);
	fx_end(&f);

	/* The text key. */
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "registry.empty_protection=false\n", "t.conf", NULL, &f.diag),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	assert_int_equal(resil_config_directory(conf, &dc), 1);
	assert_int_equal(dc.empty_protection, 0);
	resil_config_free(conf);
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "registry.empty_protection=maybe\n", "t.conf", NULL, &f.diag),
	    RESIL_E_INVAL);
	assert_string_equal(f.diag.msg,
	    "t.conf:1: registry.empty_protection: \"maybe\" is not a "
	    "boolean");
}

static void
test_directory_config_validation(void **state)
{
	resil_directory_config cfg = resil_directory_config_default();
	resil_breaker_config bc = resil_breaker_config_default();
	resil_directory *d;
	resil_diag diag;

	(void)state;
	cfg.outlier.max_ejection = 10;
	cfg.outlier.base_ejection = 30;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.max_ejection: 10 is below outlier.base_ejection (30)");
	cfg = resil_directory_config_default();
	cfg.outlier.max_ejection_pct = 101;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "outlier.max_ejection_pct: 101 is out of range 0..100");
	cfg = resil_directory_config_default();
	cfg.outlier.interval = 0;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, "outlier.interval: must be at least 1");
	cfg = resil_directory_config_default();
	cfg.size = 3;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	cfg = resil_directory_config_default();
	bc.failure_rate_pct = 0; /* no trigger at all */
	cfg.endpoint_breaker = &bc;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	/* Outlier detection off: its durations are not checked. */
	cfg = resil_directory_config_default();
	cfg.outlier.max_ejection_pct = 0;
	cfg.outlier.max_ejection = 0;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_OK);
	resil_directory_free(d);
	resil_directory_free(NULL);
}

/* n calls to addr (the others excluded), each ending in outcome. */
static void
outcome_n(fx *f, const char *addr, int n, resil_outcome outcome)
{
	resil_pick p;
	uint64_t ex[16];
	size_t i, k = 0;
	int j;

	for (j = 0; j < n; j++) {
		assert_int_equal(
		    resil_selector_route(f->sel, NULL, f->c, NULL), RESIL_OK);
		k = 0;
		for (i = 0; i < resil_candidates_count(f->c); i++) {
			resil_candidate c;
			resil_candidates_get(f->c, i, &c);
			if (strcmp(c.address, addr) != 0)
				ex[k++] = c.id;
		}
		assert_int_equal(
		    resil_selector_pick(f->sel, f->c, NULL, ex, k, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, addr);
		resil_selector_report(f->sel, &p, outcome);
	}
}

static void
fail_n(fx *f, const char *addr, int n, void *unused)
{
	(void)unused;
	outcome_n(f, addr, n, RESIL_OUTCOME_FAILURE);
}

/* Four endpoints at 1000, ejected after `failures` in a row for 10, 20,
 * 30, then 35 ticks, with no panic. */
static void
ejecting_fx(fx *f, uint32_t failures)
{
	fx_init(f, 1000);
	f->dcfg.outlier.consecutive_failures = failures;
	f->dcfg.outlier.base_ejection = 10;
	f->dcfg.outlier.max_ejection = 35;
	f->dcfg.outlier.interval = 100;
	f->dcfg.outlier.max_ejection_pct = 100;
	f->scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(f), 0);
	assert_int_equal(fx_push_weights(f, NULL, 4), RESIL_OK);
}

/* A pick made before its endpoint was ejected and reported after the
 * ejection ended: the report itself notices the return (the event, at
 * the report's time), before any route does. Even for a plain success,
 * which otherwise only ends a failure streak. */
static void
test_directory_outlier_return_noticed_by_a_report(void **state)
{
	resil_pick p1, p2;
	resil_endpoint_state st;
	size_t i, at = SIZE_MAX;
	fx f;

	(void)state;
	ejecting_fx(&f, 1);
	assert_int_equal(resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	for (i = 0; i < resil_candidates_count(f.c); i++) {
		resil_candidate c;

		resil_candidates_get(f.c, i, &c);
		if (strcmp(c.address, "e1:1") == 0)
			at = i;
	}
	assert_int_not_equal(at, SIZE_MAX);
	assert_int_equal(resil_selector_pick_at(f.sel, f.c, at, &p1, NULL),
	    RESIL_OK);
	assert_int_equal(resil_selector_pick_at(f.sel, f.c, at, &p2, NULL),
	    RESIL_OK);
	f.nev = 0;
	assert_int_equal(resil_selector_report_duration(
	                     f.sel, &p1, RESIL_OUTCOME_FAILURE, 1),
	    RESIL_OK);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	resil_manual_clock_set(&f.mc, 1010);
	assert_int_equal(resil_selector_report_duration(
	                     f.sel, &p2, RESIL_OUTCOME_SUCCESS, 1),
	    RESIL_OK);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_RETURNED);
	assert_string_equal(f.ev[1].address, "e1:1");
	assert_int_equal(f.ev[1].time, 1010);
	assert_int_equal(resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 0);
	fx_end(&f);
}

static void
test_directory_outlier_ejection_grows_and_returns_exactly(void **state)
{
	resil_endpoint_state st;
	fx f;

	(void)state;
	ejecting_fx(&f, 3);
	f.nev = 0;
	/* Two failures and a success: the streak ends, no ejection. */
	fail_n(&f, "e1:1", 2, NULL);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 2);
	outcome_n(&f, "e1:1", 1, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 0);
	fail_n(&f, "e1:1", 2, NULL);
	assert_int_equal(f.nev, 0);
	fail_n(&f, "e1:1", 1, NULL);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	assert_string_equal(f.ev[0].address, "e1:1");
	assert_int_equal(f.ev[0].time, 1000);
	assert_int_equal(f.ev[0].duration, 10);
	assert_int_equal(f.ev[0].ejections, 1);
	/* Ejected: not a candidate until exactly 1010. */
	resil_manual_clock_set(&f.mc, 1009);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 3);
	resil_manual_clock_set(&f.mc, 1010);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 4);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_RETURNED);
	assert_string_equal(f.ev[1].address, "e1:1");
	assert_int_equal(f.ev[1].time, 1010);
	/* Consecutive ejections: 20, 30, then capped at 35. */
	fail_n(&f, "e1:1", 3, NULL);
	assert_int_equal(f.ev[2].duration, 20);
	assert_int_equal(f.ev[2].ejections, 2);
	resil_manual_clock_advance(&f.mc, 20);
	fail_n(&f, "e1:1", 3, NULL);
	assert_int_equal(f.ev[4].duration, 30);
	resil_manual_clock_advance(&f.mc, 30);
	fail_n(&f, "e1:1", 3, NULL);
	assert_int_equal(f.ev[6].duration, 35);
	assert_int_equal(f.ev[6].ejections, 4);
	/* In for two full intervals: k drops from 4 to 2, the next is 3. */
	resil_manual_clock_advance(&f.mc, 35 + 200);
	fail_n(&f, "e1:1", 3, NULL);
	assert_int_equal(f.ev[8].type, RESIL_ENDPOINT_EJECTED);
	assert_int_equal(f.ev[8].ejections, 3);
	assert_int_equal(f.ev[8].duration, 30);
	fx_end(&f);
}

static void
test_directory_outlier_ejection_cap(void **state)
{
	resil_endpoint_state st;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.dcfg.outlier.consecutive_failures = 1;
	f.dcfg.outlier.base_ejection = 100;
	f.dcfg.outlier.max_ejection = 1000;
	f.dcfg.outlier.max_ejection_pct = 20; /* of 10: at most 2 */
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 10), RESIL_OK);
	fail_n(&f, "e0:1", 1, NULL);
	fail_n(&f, "e1:1", 1, NULL);
	fail_n(&f, "e2:1", 1, NULL); /* 100 * 3 / 10 = 30 > 20: kept */
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_true(st.ejected);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_true(st.ejected);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e2:1", &st), RESIL_OK);
	assert_false(st.ejected);
	assert_int_equal(st.streak, 0); /* the detection restarts it */
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 8);
	/* When e0 returns, e2's next failure may take its place. */
	resil_manual_clock_advance(&f.mc, 100);
	fail_n(&f, "e2:1", 1, NULL);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e2:1", &st), RESIL_OK);
	assert_true(st.ejected);
	fx_end(&f);

	/* A lone endpoint is never ejected below 100%. */
	fx_init(&f, 1000);
	f.dcfg.outlier.consecutive_failures = 1;
	f.dcfg.outlier.max_ejection_pct = 99;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 1), RESIL_OK);
	fail_n(&f, "e0:1", 5, NULL);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_false(st.ejected);
	fx_end(&f);
}

/* DESIGN: the streak restarts after every detection, also one the max
 * share prevented (Envoy resets the monitor after onConsecutive5xx
 * whatever ejectHost decided). */
static void
test_directory_outlier_streak_restarts_after_prevented_detection(void **state)
{
	resil_endpoint_state st;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.dcfg.outlier.consecutive_failures = 3;
	f.dcfg.outlier.base_ejection = 100;
	f.dcfg.outlier.max_ejection = 1000;
	f.dcfg.outlier.max_ejection_pct = 10; /* of 10: one at a time */
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 10), RESIL_OK);
	f.nev = 0;
	fail_n(&f, "e0:1", 3, NULL);
	assert_int_equal(f.nev, 1);
	assert_int_equal(f.ev[0].type, RESIL_ENDPOINT_EJECTED);
	/* e1's detection finds the share full: no ejection, streak 0. */
	fail_n(&f, "e1:1", 3, NULL);
	assert_int_equal(f.nev, 1);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_false(st.ejected);
	assert_int_equal(st.streak, 0);
	fail_n(&f, "e1:1", 2, NULL);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 2);
	/* e0 returns at 1100; the third failure of the new streak ejects e1.
	 */
	resil_manual_clock_set(&f.mc, 1100);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_RETURNED);
	fail_n(&f, "e1:1", 1, NULL);
	assert_int_equal(f.nev, 3);
	assert_int_equal(f.ev[2].type, RESIL_ENDPOINT_EJECTED);
	assert_string_equal(f.ev[2].address, "e1:1");
	assert_int_equal(f.ev[2].time, 1100);
	assert_int_equal(f.ev[2].duration, 100);
	fx_end(&f);
}

/* DESIGN: a bare number is milliseconds in every duration key of the
 * cluster text, as timeout=3000 is 3 s; units and fractions as in
 * docs/config.md, with its messages. */
static void
test_directory_text_durations_are_milliseconds(void **state)
{
	static const char *const text[][2] = {
		{ "outlier.base_ejection", "30000" },
		{ "outlier.max_ejection", "1.5m" },
		{ "outlier.interval", "10" },
		{ "loadbalance.peakewma.tau", "5" },
		{ "loadbalance.peakewma.default_rtt", "250us" },
		{ "loadbalance.shortest.slide", "0.5" },
	};
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc;
	resil_cluster_text *ct;
	resil_diag diag;
	size_t i;

	(void)state;
	assert_int_equal(resil_cluster_text_new(&ct, NULL), RESIL_OK);
	for (i = 0; i < sizeof(text) / sizeof(text[0]); i++)
		assert_int_equal(resil_cluster_text_set(ct, text[i][0],
		                     text[i][1], NULL, 0, &diag),
		    RESIL_OK);
	assert_int_equal(resil_cluster_text_finish(ct, &diag), RESIL_OK);
	resil_cluster_text_directory(ct, &dc);
	assert_int_equal(dc.outlier.base_ejection, 30 * RESIL_NS_PER_SEC);
	assert_int_equal(dc.outlier.max_ejection, 90 * RESIL_NS_PER_SEC);
	assert_int_equal(dc.outlier.interval, 10 * RESIL_NS_PER_MS);
	resil_cluster_text_selector(ct, &sc);
	assert_int_equal(sc.balance.ewma_tau, 5 * RESIL_NS_PER_MS);
	assert_int_equal(sc.balance.ewma_default_rtt, 250 * RESIL_NS_PER_US);
	assert_int_equal(sc.balance.shortest_slide, 500 * RESIL_NS_PER_US);
	/* The parser's refusals. */
	assert_int_equal(resil_cluster_text_set(ct, "outlier.interval",
	                     "10sec", "svc.conf", 2, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "svc.conf:2: outlier.interval: \"10sec\": unknown unit \"sec\" "
	    "(did you mean 10s?)");
	assert_int_equal(resil_cluster_text_set(ct, "outlier.base_ejection",
	                     "0.5ns", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.base_ejection: \"0.5ns\" is "
	    "not a whole number of nanoseconds");
	assert_int_equal(resil_cluster_text_set(ct, "outlier.base_ejection",
	                     "1,5s", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.base_ejection: \"1,5s\": write a fraction with '.', not "
	    "','");
	assert_int_equal(resil_cluster_text_set(ct, "outlier.base_ejection",
	                     "soon", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.base_ejection: \"soon\" is not a duration (a number of "
	    "milliseconds, or a number with a unit: ns, us, ms, s, m, h)");
	assert_int_equal(resil_cluster_text_set(
	                     ct, "outlier.base_ejection", "0", NULL, 0, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "outlier.base_ejection: 0 is below the minimum of 0.000001ms "
	    "(1ns)");
	/* Unchanged by the refusals. */
	dc = resil_directory_config_default();
	resil_cluster_text_directory(ct, &dc);
	assert_int_equal(dc.outlier.base_ejection, 30 * RESIL_NS_PER_SEC);
	resil_cluster_text_free(ct);
}

static void
test_directory_business_and_ignored_outcomes(void **state)
{
	resil_endpoint_state st;
	resil_pick p;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.dcfg.outlier.consecutive_failures = 2;
	f.dcfg.outlier.max_ejection_pct = 100;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	fail_n(&f, "e0:1", 1, NULL);
	/* A business error ends the streak. */
	assert_string_equal(fx_pick(&f, NULL, &p), "e0:1");
	resil_selector_report(f.sel, &p, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 0);
	fail_n(&f, "e0:1", 1, NULL);
	/* An ignored outcome neither adds nor ends. */
	assert_string_equal(fx_pick(&f, NULL, &p), "e0:1");
	resil_selector_report(f.sel, &p, RESIL_OUTCOME_IGNORED);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.streak, 1);
	/* Release: the call was not made. */
	assert_string_equal(fx_pick(&f, NULL, &p), "e0:1");
	assert_int_equal(resil_selector_release(f.sel, &p), RESIL_OK);
	assert_int_equal(resil_selector_release(f.sel, &p), RESIL_E_MISUSE);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.active, 0);
	assert_int_equal(st.streak, 1);
	fx_end(&f);
}

static void
test_directory_endpoint_breaker_filters(void **state)
{
	resil_breaker_config bc = resil_breaker_config_default();
	resil_endpoint_state st;
	resil_pick p;
	resil_breaker *b;
	int i;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	bc.failure_rate_pct = 0;
	bc.consecutive_failures = 2;
	bc.open_wait_ns = 50;
	f.dcfg.endpoint_breaker = &bc;
	f.dcfg.outlier.max_ejection_pct = 0;
	f.scfg.panic_threshold_pct = 0;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 2), RESIL_OK);
	fail_n(&f, "e1:1", 2, NULL);
	b = resil_directory_breaker(f.d, "e1:1");
	assert_non_null(b);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e1:1", &st), RESIL_OK);
	assert_int_equal(st.breaker, RESIL_BREAKER_OPEN);
	/* OPEN: not a candidate, until its wait is over. */
	for (i = 0; i < 5; i++)
		assert_string_equal(fx_call(&f, NULL), "e0:1");
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 1);
	resil_manual_clock_advance(&f.mc, 50);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 2);
	/* Its probe: HALF_OPEN stays a candidate; a success closes it. */
	{
		uint64_t ex[1];
		resil_candidate c0;
		resil_candidates_get(f.c, 0, &c0);
		ex[0] = c0.id;
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, NULL, ex, 1, &p, NULL),
		    RESIL_OK);
	}
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 2);
	resil_selector_report(f.sel, &p, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	/* Forced open: refused. */
	resil_breaker_force_open(b);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 1);
	fx_end(&f);
}

static void
test_directory_pick_outlives_its_endpoint(void **state)
{
	resil_endpoint_spec s[2];
	resil_pick p;
	resil_endpoint_state st;
	fail_alloc fa;
	uint64_t live;
	int i;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.dcfg.alloc = fail_alloc_init(&fa, 0);
	f.scfg.alloc = f.dcfg.alloc;
	assert_int_equal(fx_start(&f), 0);
	s[0] = spec("gone:1", NULL, 100);
	s[1] = spec("stays:1", NULL, 0);
	assert_int_equal(resil_directory_push(f.d, s, 2, NULL), RESIL_OK);
	/* Weight 0 is never picked while another has weight: "gone". */
	assert_string_equal(fx_pick(&f, NULL, &p), "gone:1");
	/* The candidate set still holds the old snapshot; drop it, remove
	 * the endpoint and push many times, so the snapshots that had it
	 * are all reclaimed. */
	resil_candidates_clear(f.c);
	for (i = 0; i < 50; i++)
		assert_int_equal(
		    resil_directory_push(f.d, s + 1, 1, NULL), RESIL_OK);
	assert_int_equal(
	    resil_directory_get_state(f.d, "gone:1", &st), RESIL_E_NOTFOUND);
	/* A push of the same list now frees what it takes. */
	live = fail_alloc_live(&fa);
	assert_int_equal(resil_directory_push(f.d, s + 1, 1, NULL), RESIL_OK);
	assert_int_equal(fail_alloc_live(&fa), live);
	/* The call in flight keeps its endpoint: reporting is safe (ASan
	 * would see a use after free), and the endpoint is freed by the
	 * first update after it, not by the report (which touches it last:
	 * its count on this thread's stripe). */
	assert_string_equal(p.address, "gone:1");
	assert_int_equal(
	    resil_selector_report(f.sel, &p, RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(fail_alloc_live(&fa), live);
	assert_int_equal(resil_directory_push(f.d, s + 1, 1, NULL), RESIL_OK);
	/* The endpoint and its address string. */
	assert_int_equal(fail_alloc_live(&fa), live - 2);
	/* A candidate set routed before pushes still picks from its own
	 * snapshot. */
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_directory_push(f.d, s, 1, NULL), RESIL_OK);
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, NULL, NULL, 0, &p, NULL),
	    RESIL_OK);
	assert_string_equal(p.address, "stays:1");
	resil_selector_release(f.sel, &p);
	fx_end(&f);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
}

static void
test_directory_snapshots_reclaimed(void **state)
{
	fail_alloc fa;
	resil_directory_config cfg = resil_directory_config_default();
	resil_endpoint_spec s[2];
	resil_directory *d;
	int i;

	(void)state;
	cfg.alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_directory_new(&d, &cfg, NULL), RESIL_OK);
	s[0] = spec("a:1", "z", 1);
	s[1] = spec("b:1", "z", 2);
	for (i = 0; i < 100; i++) {
		s[1].weight = i;
		assert_int_equal(
		    resil_directory_push(d, s, 2, NULL), RESIL_OK);
	}
	assert_int_equal(resil_directory_version(d), 100);
	resil_directory_free(d);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
}

static void
test_directory_out_of_memory_changes_nothing(void **state)
{
	resil_breaker_config bc = resil_breaker_config_default();
	resil_directory_config cfg = resil_directory_config_default();
	resil_endpoint_spec s[3];
	resil_directory *d;
	uint64_t n;
	fail_alloc fa;
	resil_err err;

	(void)state;
	cfg.endpoint_breaker = &bc;
	s[0] = spec("a:1", "z", 1);
	s[0].params = "k=v&x=y";
	s[0].tag = "t";
	s[1] = spec("b:1", "z", 2);
	s[2] = spec("c:1", NULL, 3);
	/* Fail each allocation in turn: an error, never a crash or a leak,
	 * and a failed push leaves the old list. */
	for (n = 1; n < 200; n++) {
		cfg.alloc = fail_alloc_init(&fa, n);
		err = resil_directory_new(&d, &cfg, NULL);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_int_equal(fail_alloc_live(&fa), 0);
			continue;
		}
		err = resil_directory_push(d, s, 2, NULL);
		if (err == RESIL_OK)
			err = resil_directory_push(d, s + 1, 2, NULL);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_true(resil_directory_count(d) == 0 ||
			    resil_directory_count(d) == 2);
		}
		resil_directory_free(d);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
		if (fa.failures == 0)
			break;
	}
	assert_true(n < 200);
	/* The same with the rate detections (their scratch per snapshot)
	 * and a health checker (its targets): a target the checker could
	 * not take is left unchecked, a candidate. */
	{
		resil_outlier_rate_config rate =
		    resil_outlier_rate_config_default();
		resil_health_config hc = resil_health_config_default();
		resil_endpoint_state st;
		cfg.outlier_rate = &rate;
		cfg.health = &hc;
		hc.initial_healthy = 0;
		for (n = 1; n < 400; n++) {
			cfg.alloc = fail_alloc_init(&fa, n);
			err = resil_directory_new(&d, &cfg, NULL);
			if (err != RESIL_OK) {
				assert_int_equal(err, RESIL_E_NOMEM);
				assert_int_equal(fail_alloc_live(&fa), 0);
				continue;
			}
			err = resil_directory_push(d, s, 2, NULL);
			if (err == RESIL_OK)
				err = resil_directory_push(d, s + 1, 2, NULL);
			if (err != RESIL_OK)
				assert_int_equal(err, RESIL_E_NOMEM);
			/* Unhealthy only as a target of the checker. */
			if (resil_directory_get_state(d, "b:1", &st) ==
			        RESIL_OK &&
			    !st.healthy) {
				resil_health_target_state ts;
				assert_int_equal(
				    resil_health_get_state(
				        resil_directory_health(d), "b:1", &ts),
				    RESIL_OK);
			}
			resil_directory_free(d);
			assert_int_equal(fail_alloc_live(&fa), 0);
			assert_false(fa.size_mismatch);
			if (fa.failures == 0)
				break;
		}
		assert_true(n < 400);
	}
}

/* Issue 24.5: a directory starts with cfg.endpoints (the static list the
 * text's url= gives), checked and worded as a push. */
static void
test_directory_config_endpoints(void **state)
{
	resil_endpoint_spec s[3];
	resil_endpoint_state st;
	resil_directory_config cfg;
	resil_breaker_config bc = resil_breaker_config_default();
	resil_directory *d = NULL;
	resil_diag diag;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	s[0] = spec("a:1", "hz", 100);
	s[1] = spec("b:1", "sh", 30);
	f.dcfg.endpoints = s;
	f.dcfg.nendpoints = 2;
	f.dcfg.endpoint_breaker = &bc;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(resil_directory_count(f.d), 2);
	assert_int_equal(resil_directory_version(f.d), 1);
	assert_int_equal(f.nev, 2);
	assert_int_equal(f.ev[1].type, RESIL_ENDPOINT_ADDED);
	assert_string_equal(f.ev_addr[1], "b:1");
	assert_int_equal(resil_directory_get_state(f.d, "b:1", &st), RESIL_OK);
	assert_int_equal(st.weight, 30);
	assert_non_null(resil_directory_breaker(f.d, "a:1"));
	/* A later push replaces the list as usual, state kept. */
	s[2] = spec("c:1", NULL, 100);
	assert_int_equal(resil_directory_push(f.d, &s[1], 2, NULL), RESIL_OK);
	assert_int_equal(resil_directory_count(f.d), 2);
	assert_int_equal(resil_directory_get_state(f.d, "b:1", &st), RESIL_OK);
	assert_int_equal(st.position, 0);
	fx_end(&f);

	/* Refused as a push refuses, *out unchanged. */
	cfg = resil_directory_config_default();
	s[1].weight = -1;
	cfg.endpoints = s;
	cfg.nendpoints = 2;
	assert_int_equal(
	    resil_directory_config_validate(&cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "endpoints[1].weight: -1 is negative (0 is allowed)");
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_null(d);
	s[1] = spec("a:1", NULL, 100);
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_null(d);
	assert_string_equal(
	    diag.msg, "endpoints[1].address: duplicate of endpoints[0] (a:1)");
	cfg.endpoints = NULL;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "directory.endpoints: NULL with nendpoints 2");
	/* nendpoints 0: empty, whatever endpoints is. */
	cfg.nendpoints = 0;
	assert_int_equal(resil_directory_new(&d, &cfg, &diag), RESIL_OK);
	assert_int_equal(resil_directory_count(d), 0);
	assert_int_equal(resil_directory_version(d), 0);
	resil_directory_free(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_directory_push_keeps_positions_and_state),
		cmocka_unit_test(test_directory_events_add_update_remove),
		cmocka_unit_test(test_directory_bad_input_changes_nothing),
		cmocka_unit_test(test_directory_empty_push_keeps_last_list),
		cmocka_unit_test(test_directory_config_validation),
		cmocka_unit_test(test_directory_config_endpoints),
		cmocka_unit_test(
		    test_directory_outlier_ejection_grows_and_returns_exactly),
		cmocka_unit_test(
		    test_directory_outlier_return_noticed_by_a_report),
		cmocka_unit_test(test_directory_outlier_ejection_cap),
		cmocka_unit_test(
		    test_directory_text_durations_are_milliseconds),
		cmocka_unit_test(
		    test_directory_outlier_streak_restarts_after_prevented_detection),
		cmocka_unit_test(test_directory_business_and_ignored_outcomes),
		cmocka_unit_test(test_directory_endpoint_breaker_filters),
		cmocka_unit_test(test_directory_pick_outlives_its_endpoint),
		cmocka_unit_test(test_directory_snapshots_reclaimed),
		cmocka_unit_test(test_directory_out_of_memory_changes_nothing),
	};

	return cmocka_run_group_tests_name("directory", tests, NULL, NULL);
}

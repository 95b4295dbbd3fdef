/*
 * Active health checks: Envoy's thresholds and intervals step by step on
 * exact ticks (the caller's now), timeouts found by the checker at
 * deadline + 1, late and stale reports, the probe order, scripted
 * jitter, the text keys, allocation failure and bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/health.h>

#include "support/fail_alloc.h"

typedef struct seen {
	resil_health_event ev[16];
	char addr[16][32];
	int n;
	resil_health *hc; /* the listener asks it back */
	int healthy_seen[16];
} seen;

static void
on_event(const resil_health_event *ev, void *ctx)
{
	seen *s = ctx;

	if (s->n >= 16)
		return;
	s->ev[s->n] = *ev;
	snprintf(s->addr[s->n], sizeof(s->addr[0]), "%s", ev->address);
	s->ev[s->n].address = s->addr[s->n];
	/* Called without the lock: the checker answers. */
	if (s->hc != NULL)
		s->healthy_seen[s->n] = resil_health_is_healthy(s->hc, ev->address);
	s->n++;
}

/* interval 10, unhealthy_interval 20, unhealthy edge 5, healthy edge 3,
 * timeout 2, thresholds 3 and 2, no jitter. */
static resil_health *
make(seen *sn, int initial_healthy)
{
	resil_health_config cfg = resil_health_config_default();
	resil_health *hc;
	resil_diag diag;

	memset(sn, 0, sizeof(*sn));
	cfg.interval_ns = 10;
	cfg.unhealthy_interval_ns = 20;
	cfg.unhealthy_edge_interval_ns = 5;
	cfg.healthy_edge_interval_ns = 3;
	cfg.timeout_ns = 2;
	cfg.unhealthy_threshold = 3;
	cfg.healthy_threshold = 2;
	cfg.initial_healthy = initial_healthy;
	cfg.listener = on_event;
	cfg.listener_ctx = sn;
	assert_int_equal(resil_health_new(&hc, &cfg, &diag), RESIL_OK);
	sn->hc = hc;
	return hc;
}

/* next() at now must answer PROBE of address; returns the probe id. */
static uint64_t
expect_probe(resil_health *hc, uint64_t now, const char *address)
{
	resil_health_step st;

	assert_int_equal(resil_health_next(hc, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_HEALTH_PROBE);
	assert_string_equal(st.address, address);
	return st.probe;
}

static void
expect_wait(resil_health *hc, uint64_t now, uint64_t until)
{
	resil_health_step st;

	assert_int_equal(resil_health_next(hc, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_HEALTH_WAIT);
	assert_true(st.until == until);
}

static void
test_health_envoy_cycle(void **state)
{
	seen sn;
	resil_health *hc = make(&sn, 0);
	resil_health_step st;
	resil_health_target_state ts;
	uint64_t p, late;

	(void)state;
	expect_wait(hc, 0, UINT64_MAX); /* no target */
	assert_int_equal(resil_health_add(hc, "a", NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 0);
	/* The first probe is due at once; its deadline is 0 + 2. */
	assert_int_equal(resil_health_next(hc, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_HEALTH_PROBE);
	assert_int_equal(st.deadline, 2);
	p = st.probe;
	expect_wait(hc, 0, 3); /* the timeout at deadline + 1 */
	/* Envoy's first check: one success is enough. */
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 1),
	    RESIL_OK);
	assert_int_equal(sn.n, 1);
	assert_int_equal(sn.ev[0].type, RESIL_HEALTH_BECAME_HEALTHY);
	assert_int_equal(sn.ev[0].first_check, 1);
	assert_int_equal(sn.ev[0].count, 1);
	assert_int_equal(sn.ev[0].time, 1);
	assert_int_equal(sn.healthy_seen[0], 1);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 1);
	/* Healthy and steady: interval (10). A second report is refused. */
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 1),
	    RESIL_E_NOTFOUND);
	expect_wait(hc, 5, 11);
	expect_wait(hc, 10, 11);
	/* Failing towards UNHEALTHY: the unhealthy edge interval (5). */
	p = expect_probe(hc, 11, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_FAILED, 12),
	    RESIL_OK);
	expect_wait(hc, 12, 17);
	p = expect_probe(hc, 17, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_FAILED, 17),
	    RESIL_OK);
	assert_int_equal(resil_health_get_state(hc, "a", &ts), RESIL_OK);
	assert_int_equal(ts.healthy, 1);
	assert_int_equal(ts.failures, 2);
	assert_int_equal(ts.next_at, 22);
	/* The third is not answered: at 24 it is still in time, at 25
	 * (deadline + 1) it is a timeout, the third failure. */
	late = expect_probe(hc, 22, "a");
	expect_wait(hc, 24, 25);
	assert_int_equal(sn.n, 1);
	expect_wait(hc, 25, 45); /* unhealthy: unhealthy_interval (20) */
	assert_int_equal(sn.n, 2);
	assert_int_equal(sn.ev[1].type, RESIL_HEALTH_BECAME_UNHEALTHY);
	assert_int_equal(sn.ev[1].result, RESIL_PROBE_TIMEOUT);
	assert_int_equal(sn.ev[1].count, 3);
	assert_int_equal(sn.ev[1].time, 25);
	assert_int_equal(sn.ev[1].first_check, 0);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 0);
	/* Its answer comes now: too late. */
	assert_int_equal(resil_health_report(hc, late, RESIL_PROBE_OK, 26),
	    RESIL_E_NOTFOUND);
	/* Passing towards HEALTHY: the healthy edge interval (3), then
	 * healthy_threshold (2) successes make it HEALTHY. */
	p = expect_probe(hc, 45, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_OK, 46), RESIL_OK);
	expect_wait(hc, 46, 49);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 0);
	p = expect_probe(hc, 49, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_OK, 49), RESIL_OK);
	assert_int_equal(sn.n, 3);
	assert_int_equal(sn.ev[2].type, RESIL_HEALTH_BECAME_HEALTHY);
	assert_int_equal(sn.ev[2].count, 2);
	assert_int_equal(sn.ev[2].first_check, 0);
	expect_wait(hc, 49, 59);
	{
		resil_health_metrics m;

		assert_int_equal(resil_health_get_metrics(hc, &m), RESIL_OK);
		assert_int_equal(m.probes, 6);
		assert_int_equal(m.ok, 3);
		assert_int_equal(m.failed, 2);
		assert_int_equal(m.timeouts, 1);
		assert_int_equal(m.refused, 2);
		assert_int_equal(m.became_healthy, 2);
		assert_int_equal(m.became_unhealthy, 1);
		assert_int_equal(m.targets, 1);
		assert_int_equal(m.healthy, 1);
	}
	resil_health_free(hc);
}

static void
test_health_unhealthy_stays_unhealthy(void **state)
{
	seen sn;
	resil_health *hc = make(&sn, 0);
	uint64_t p;

	(void)state;
	assert_int_equal(resil_health_add(hc, "a", NULL, 100, NULL), RESIL_OK);
	/* A first probe that fails: still UNHEALTHY, no event; the next
	 * one after unhealthy_interval. A success then is only the first of
	 * healthy_threshold (not a first check any more). */
	p = expect_probe(hc, 100, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_FAILED, 101),
	    RESIL_OK);
	assert_int_equal(sn.n, 0);
	expect_wait(hc, 101, 121);
	p = expect_probe(hc, 121, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_OK, 121), RESIL_OK);
	assert_int_equal(sn.n, 0);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 0);
	/* A failure resets the successes. */
	p = expect_probe(hc, 124, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_DOWN, 124),
	    RESIL_OK);
	p = expect_probe(hc, 144, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_OK, 144), RESIL_OK);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 0);
	p = expect_probe(hc, 147, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_OK, 147), RESIL_OK);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 1);
	assert_int_equal(sn.n, 1);
	assert_int_equal(sn.ev[0].count, 2);
	resil_health_free(hc);
}

static void
test_health_down_and_streaks(void **state)
{
	seen sn;
	resil_health *hc = make(&sn, 1); /* starts HEALTHY */
	uint64_t p;

	(void)state;
	assert_int_equal(resil_health_add(hc, "a", NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 1);
	/* FAILED, FAILED, OK: the success ends the streak. */
	p = expect_probe(hc, 0, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_FAILED, 0), RESIL_OK);
	p = expect_probe(hc, 5, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_TIMEOUT, 5), RESIL_OK);
	p = expect_probe(hc, 10, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_OK, 10), RESIL_OK);
	expect_wait(hc, 10, 20); /* steady: interval */
	p = expect_probe(hc, 20, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_FAILED, 20), RESIL_OK);
	p = expect_probe(hc, 25, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_FAILED, 25), RESIL_OK);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 1);
	assert_int_equal(sn.n, 0);
	/* DOWN: UNHEALTHY at once, whatever the threshold. */
	p = expect_probe(hc, 30, "a");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_DOWN, 30), RESIL_OK);
	assert_int_equal(sn.n, 1);
	assert_int_equal(sn.ev[0].type, RESIL_HEALTH_BECAME_UNHEALTHY);
	assert_int_equal(sn.ev[0].result, RESIL_PROBE_DOWN);
	assert_int_equal(sn.ev[0].count, 3); /* FAILED, FAILED, DOWN */
	/* With initial_healthy a first success is no event. */
	assert_int_equal(resil_health_add(hc, "b", NULL, 30, NULL), RESIL_OK);
	p = expect_probe(hc, 30, "b");
	assert_int_equal(
	    resil_health_report(hc, p, RESIL_PROBE_DOWN, 31), RESIL_OK);
	assert_int_equal(sn.n, 2);
	assert_int_equal(sn.ev[1].count, 1);
	assert_int_equal(sn.ev[1].first_check, 1);
	resil_health_free(hc);
}

static void
test_health_report_at_deadline(void **state)
{
	seen sn;
	resil_health *hc = make(&sn, 0);
	resil_health_metrics m;
	uint64_t p;

	(void)state;
	assert_int_equal(resil_health_add(hc, "a", NULL, 0, NULL), RESIL_OK);
	p = expect_probe(hc, 0, "a");
	/* At the deadline: in time. */
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 2),
	    RESIL_OK);
	assert_int_equal(resil_health_is_healthy(hc, "a"), 1);
	/* One tick after, before next() looked: a timeout at deadline + 1,
	 * and the answer is refused. */
	p = expect_probe(hc, 12, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 15),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_get_metrics(hc, &m), RESIL_OK);
	assert_int_equal(m.timeouts, 1);
	assert_int_equal(m.ok, 1);
	/* Failing towards UNHEALTHY from the timeout's tick: 15 + 5. */
	expect_wait(hc, 15, 20);
	resil_health_free(hc);
}

static void
test_health_order_and_ties(void **state)
{
	seen sn;
	resil_health *hc = make(&sn, 0);
	uint64_t pa, pb, pc;

	(void)state;
	assert_int_equal(resil_health_add(hc, "a", NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_add(hc, "b", NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_add(hc, "c", NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_count(hc), 3);
	/* Due together: in the order added. */
	pa = expect_probe(hc, 0, "a");
	pb = expect_probe(hc, 0, "b");
	pc = expect_probe(hc, 0, "c");
	expect_wait(hc, 0, 3);
	/* c answers first; the others time out at 3. */
	assert_int_equal(resil_health_report(hc, pc, RESIL_PROBE_OK, 1),
	    RESIL_OK);
	expect_wait(hc, 2, 3);
	expect_wait(hc, 3, 11); /* a and b: 3 + 20; c: 1 + 10 */
	assert_int_equal(resil_health_report(hc, pa, RESIL_PROBE_OK, 3),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_report(hc, pb, RESIL_PROBE_OK, 3),
	    RESIL_E_NOTFOUND);
	/* The most overdue first: at 30, c (due at 11), then a and b (due
	 * at 23) in the order added. */
	assert_string_equal(sn.addr[0], "c");
	pc = expect_probe(hc, 30, "c");
	pa = expect_probe(hc, 30, "a");
	pb = expect_probe(hc, 30, "b");
	(void)pa;
	(void)pb;
	(void)pc;
	resil_health_free(hc);
}

static void
test_health_remove_and_stale_ids(void **state)
{
	seen sn;
	resil_health *hc = make(&sn, 0);
	resil_health_target_state ts;
	resil_diag diag;
	int tag = 7;
	uint64_t p, q;
	resil_health_step st;

	(void)state;
	assert_int_equal(resil_health_add(hc, "a", &tag, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_next(hc, 0, &st), RESIL_OK);
	assert_ptr_equal(st.user, &tag);
	p = st.probe;
	/* Removed with its probe out: the report is refused. */
	assert_int_equal(resil_health_remove(hc, "a"), RESIL_OK);
	assert_int_equal(resil_health_remove(hc, "a"), RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 1),
	    RESIL_E_NOTFOUND);
	/* The slot is reused by the next target; the old id still does not
	 * match its probe. */
	assert_int_equal(resil_health_add(hc, "b", NULL, 1, NULL), RESIL_OK);
	q = expect_probe(hc, 1, "b");
	assert_true(q != p);
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 1),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_report(hc, q, RESIL_PROBE_OK, 1),
	    RESIL_OK);
	/* Ids never handed out. */
	assert_int_equal(resil_health_report(hc, 0, RESIL_PROBE_OK, 1),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_report(hc, UINT64_MAX, RESIL_PROBE_OK,
	                     1),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_report(hc, q, (resil_probe_result)4, 1),
	    RESIL_E_INVAL);
	/* Duplicates, empty and long addresses are refused. */
	assert_int_equal(resil_health_add(hc, "b", NULL, 1, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg, "health: b is already a target");
	assert_int_equal(resil_health_add(hc, "", NULL, 1, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg, "health: empty address");
	{
		char big[RESIL_HEALTH_ADDRESS_MAX + 1];

		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		assert_int_equal(resil_health_add(hc, big, NULL, 1, &diag),
		    RESIL_E_INVAL);
		assert_string_equal(diag.msg,
		    "health: an address of 320 bytes is longer than 319");
		big[RESIL_HEALTH_ADDRESS_MAX - 1] = '\0'; /* 319: fits */
		assert_int_equal(
		    resil_health_add(hc, big, NULL, 1, NULL), RESIL_OK);
		assert_int_equal(resil_health_next(hc, 1, &st), RESIL_OK);
		assert_int_equal(st.action, RESIL_HEALTH_PROBE);
		assert_string_equal(st.address, big);
	}
	assert_int_equal(resil_health_get_state(hc, "b", &ts), RESIL_OK);
	assert_int_equal(ts.healthy, 1);
	assert_int_equal(ts.probes, 1);
	assert_int_equal(resil_health_get_state(hc, "zz", &ts),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_health_count(hc), 2);
	resil_health_free(hc);
}

/* A scripted source for the jitter draws. */
typedef struct script {
	const double *u;
	size_t n, at;
} script;

static double
script_next(void *ctx)
{
	script *s = ctx;
	double u = s->at < s->n ? s->u[s->at] : 0.0;

	s->at++;
	return u;
}

static void
test_health_jitter(void **state)
{
	/* initial 0.25 * 8 = 2; then per result: 0.5 * (50 % of 100) = 25
	 * and 0.3 * 10 = 3. */
	static const double u[] = { 0.25, 0.5, 0.3, 0.999999, 0.0 };
	resil_health_config cfg = resil_health_config_default();
	script s = { u, 5, 0 };
	resil_random r = { script_next, &s };
	resil_health *hc;
	uint64_t p;

	(void)state;
	cfg.interval_ns = 100;
	cfg.timeout_ns = 10;
	cfg.interval_jitter_pct = 50;
	cfg.interval_jitter_ns = 10;
	cfg.initial_jitter_ns = 8;
	cfg.random = &r;
	assert_int_equal(resil_health_new(&hc, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_health_add(hc, "a", NULL, 1000, NULL), RESIL_OK);
	assert_int_equal(s.at, 1);
	expect_wait(hc, 1000, 1002);
	p = expect_probe(hc, 1002, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 1005),
	    RESIL_OK);
	assert_int_equal(s.at, 3);
	expect_wait(hc, 1005, 1005 + 100 + 25 + 3);
	/* u just below 1: floor(u * 50) = 49 and floor(0 * 10) = 0. */
	p = expect_probe(hc, 1133, "a");
	assert_int_equal(resil_health_report(hc, p, RESIL_PROBE_OK, 1133),
	    RESIL_OK);
	expect_wait(hc, 1133, 1133 + 100 + 49);
	resil_health_free(hc);
}

static void
test_health_seeded_jitter_replays(void **state)
{
	resil_health_config cfg = resil_health_config_default();
	resil_health *h1, *h2;
	resil_health_step s1, s2;
	int i;

	(void)state;
	cfg.interval_ns = 1000;
	cfg.interval_jitter_ns = 500;
	cfg.initial_jitter_ns = 500;
	cfg.seed = 99;
	assert_int_equal(resil_health_new(&h1, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_health_new(&h2, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_health_add(h1, "a", NULL, 0, NULL), RESIL_OK);
	assert_int_equal(resil_health_add(h2, "a", NULL, 0, NULL), RESIL_OK);
	for (i = 0; i < 20; i++) {
		resil_health_next(h1, UINT64_MAX / 2, &s1);
		resil_health_next(h2, UINT64_MAX / 2, &s2);
		assert_int_equal(s1.action, RESIL_HEALTH_PROBE);
		assert_int_equal(s1.probe, s2.probe);
		resil_health_report(h1, s1.probe, RESIL_PROBE_OK, (uint64_t)i);
		resil_health_report(h2, s2.probe, RESIL_PROBE_OK, (uint64_t)i);
		resil_health_next(h1, (uint64_t)i, &s1);
		resil_health_next(h2, (uint64_t)i, &s2);
		assert_int_equal(s1.action, RESIL_HEALTH_WAIT);
		assert_true(s1.until == s2.until);
		assert_true(s1.until >= (uint64_t)i + 1000 &&
		    s1.until < (uint64_t)i + 1500);
	}
	resil_health_free(h1);
	resil_health_free(h2);
}

static void
expect_refused(const char *key, const char *value, const char *msg)
{
	resil_health_config cfg = resil_health_config_default();
	resil_health_config before = cfg;
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_health_config_set(&cfg, key, value, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, msg);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void
test_health_text_keys(void **state)
{
	resil_health_config cfg = resil_health_config_default();
	resil_health *hc = NULL;
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_health_config_set(&cfg, "health.interval", "2s",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.interval_ns, 2 * RESIL_NS_PER_SEC);
	assert_int_equal(resil_health_config_set(&cfg, "health.timeout", "250",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.timeout_ns, 250 * RESIL_NS_PER_MS);
	assert_int_equal(resil_health_config_set(&cfg,
	                     "health.unhealthy_edge_interval", "1m", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.unhealthy_edge_interval_ns,
	    60 * RESIL_NS_PER_SEC);
	assert_int_equal(resil_health_config_set(&cfg,
	                     "health.interval_jitter_percent", "20", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.interval_jitter_pct, 20);
	assert_int_equal(resil_health_config_set(&cfg,
	                     "health.unhealthy_threshold", "5", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.unhealthy_threshold, 5);
	assert_int_equal(resil_health_config_set(&cfg,
	                     "health.healthy_threshold", "1", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.healthy_threshold, 1);
	assert_int_equal(resil_health_config_set(&cfg, "health.initial",
	                     "Healthy", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.initial_healthy, 1);
	assert_int_equal(resil_health_config_set(&cfg, "health.seed", "3",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.seed, 3);
	assert_int_equal(resil_health_config_validate(&cfg, NULL), RESIL_OK);

	expect_refused("health.interval", "0",
	    "health.interval: 0 is below the minimum of 0.000001ms (1ns)");
	expect_refused("health.timeout", "1 s",
	    "health.timeout: \"1 s\": write the unit next to the number "
	    "(1s)");
	expect_refused("health.interval_jitter_percent", "101",
	    "health.interval_jitter_percent: 101 is out of range 0..100");
	expect_refused("health.unhealthy_threshold", "0",
	    "health.unhealthy_threshold: 0 is out of range 1..4294967295");
	expect_refused("health.initial", "sick",
	    "health.initial: \"sick\" is not healthy or unhealthy");
	expect_refused("health.intervall", "1",
	    "health.intervall: unknown key (health keys: interval, timeout, "
	    "[un]healthy_edge_interval, unhealthy_interval, interval_jitter, "
	    "interval_jitter_percent, initial_jitter, [un]healthy_threshold, "
	    "initial, seed)");

	cfg = resil_health_config_default();
	cfg.healthy_threshold = 0;
	assert_int_equal(resil_health_new(&hc, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "health.healthy_threshold: 0 must be >= 1");
	assert_null(hc);
	cfg = resil_health_config_default();
	cfg.timeout_ns = 0;
	assert_int_equal(resil_health_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg, "health.timeout_ns: 0 must be >= 1");
	cfg = resil_health_config_default();
	cfg.interval_jitter_pct = 300;
	assert_int_equal(resil_health_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "health.interval_jitter_pct: 300 is out of range 0..100");
	cfg.size = 1;
	assert_int_equal(resil_health_config_validate(&cfg, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_health_config_validate(NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_health_config_set(NULL, "a", "b", NULL),
	    RESIL_E_INVAL);
}

static void
test_health_null(void **state)
{
	resil_health_step st;
	resil_health_metrics m;
	resil_health_target_state ts;
	resil_health_config cfg = resil_health_config_default();
	resil_health *hc;

	(void)state;
	assert_int_equal(resil_health_next(NULL, 0, &st), RESIL_E_INVAL);
	assert_int_equal(resil_health_report(NULL, 1, RESIL_PROBE_OK, 0),
	    RESIL_E_INVAL);
	assert_int_equal(resil_health_add(NULL, "a", NULL, 0, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_health_remove(NULL, "a"), RESIL_E_INVAL);
	assert_int_equal(resil_health_is_healthy(NULL, "a"), 0);
	assert_int_equal(resil_health_count(NULL), 0);
	assert_int_equal(resil_health_get_metrics(NULL, &m), RESIL_E_INVAL);
	assert_int_equal(resil_health_get_state(NULL, "a", &ts),
	    RESIL_E_INVAL);
	assert_int_equal(resil_health_new(NULL, &cfg, NULL), RESIL_E_INVAL);
	resil_health_free(NULL);
	assert_int_equal(resil_health_new(&hc, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_health_next(hc, 0, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_health_add(hc, NULL, NULL, 0, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_health_remove(hc, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_health_is_healthy(hc, NULL), 0);
	assert_int_equal(resil_health_get_state(hc, "a", NULL), RESIL_E_INVAL);
	assert_int_equal(resil_health_get_metrics(hc, NULL), RESIL_E_INVAL);
	resil_health_free(hc);
	assert_string_equal(resil_probe_result_name(RESIL_PROBE_DOWN), "down");
	assert_string_equal(
	    resil_probe_result_name((resil_probe_result)9), "unknown");
	assert_string_equal(resil_health_event_name(
	                        RESIL_HEALTH_BECAME_UNHEALTHY),
	    "UNHEALTHY");
	assert_string_equal(resil_health_event_name(
	                        (resil_health_event_type)5),
	    "UNKNOWN");
}

static void
test_health_alloc_failure(void **state)
{
	uint64_t nth;
	int done = 0, failed = 0;

	(void)state;
	/* new, then 20 targets (the arrays and the hash table grow): each
	 * allocation fails once in turn; a failed add changes nothing. */
	for (nth = 1; !done; nth++) {
		fail_alloc fa;
		resil_health_config cfg = resil_health_config_default();
		resil_health *hc = NULL;
		resil_err e;
		char addr[16];
		size_t i, added = 0;

		cfg.alloc = fail_alloc_init(&fa, nth);
		e = resil_health_new(&hc, &cfg, NULL);
		if (e == RESIL_E_NOMEM) {
			failed++;
			assert_null(hc);
			assert_int_equal(fail_alloc_live(&fa), 0);
			continue;
		}
		assert_int_equal(e, RESIL_OK);
		for (i = 0; i < 20; i++) {
			snprintf(addr, sizeof(addr), "10.0.0.%zu", i);
			e = resil_health_add(hc, addr, NULL, 0, NULL);
			if (e == RESIL_E_NOMEM) {
				failed++;
				assert_int_equal(resil_health_count(hc), added);
				assert_int_equal(
				    resil_health_is_healthy(hc, addr), 0);
				assert_int_equal(resil_health_remove(hc, addr),
				    RESIL_E_NOTFOUND);
				break;
			}
			assert_int_equal(e, RESIL_OK);
			added++;
		}
		/* What was added still works. */
		if (added > 0) {
			resil_health_step st;

			assert_int_equal(
			    resil_health_next(hc, 0, &st), RESIL_OK);
			assert_int_equal(st.action, RESIL_HEALTH_PROBE);
			assert_int_equal(resil_health_report(hc, st.probe,
			                     RESIL_PROBE_OK, 0),
			    RESIL_OK);
		}
		if (i == 20)
			done = 1;
		resil_health_free(hc);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_int_equal(fa.size_mismatch, 0);
	}
	assert_true(failed > 20);
}

static void
test_health_many_targets(void **state)
{
	resil_health_config cfg = resil_health_config_default();
	resil_health *hc;
	resil_health_step st;
	char addr[32];
	uint64_t t;
	int i, probes = 0;

	(void)state;
	cfg.interval_ns = 1000;
	cfg.timeout_ns = 100;
	cfg.interval_jitter_ns = 1000;
	assert_int_equal(resil_health_new(&hc, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 500; i++) {
		snprintf(addr, sizeof(addr), "t%d", i);
		assert_int_equal(
		    resil_health_add(hc, addr, NULL, (uint64_t)i, NULL),
		    RESIL_OK);
	}
	/* Every probe comes out in due order; remove a third on the way. */
	for (t = 0; t < 20000;) {
		uint64_t last = 0;

		assert_int_equal(resil_health_next(hc, t, &st), RESIL_OK);
		if (st.action == RESIL_HEALTH_WAIT) {
			assert_true(st.until > t);
			last = st.until;
			t = last;
			continue;
		}
		probes++;
		assert_true(st.deadline == t + 100);
		if (probes % 3 == 0)
			resil_health_remove(hc, st.address);
		else
			assert_int_equal(resil_health_report(hc, st.probe,
			                     RESIL_PROBE_OK, t),
			    RESIL_OK);
	}
	assert_true(resil_health_count(hc) < 500);
	assert_true(probes > 800);
	resil_health_free(hc);
}

static void
test_health_next_report_allocate_nothing(void **state)
{
	fail_alloc fa;
	resil_health_config cfg = resil_health_config_default();
	resil_health *hc;
	resil_health_step st;
	char addr[16];
	uint64_t before, t;
	int i;

	(void)state;
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.interval_ns = 10;
	cfg.timeout_ns = 3;
	cfg.interval_jitter_ns = 5;
	assert_int_equal(resil_health_new(&hc, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 40; i++) {
		snprintf(addr, sizeof(addr), "h%d", i);
		assert_int_equal(
		    resil_health_add(hc, addr, NULL, (uint64_t)i, NULL),
		    RESIL_OK);
	}
	before = fa.allocs;
	/* Probes, results of every kind, timeouts, late reports. */
	for (t = 0; t < 2000; t++) {
		while (resil_health_next(hc, t, &st) == RESIL_OK &&
		    st.action == RESIL_HEALTH_PROBE) {
			if (st.probe % 5 != 0)
				(void)resil_health_report(hc, st.probe,
				    (resil_probe_result)(st.probe % 4),
				    t + st.probe % 5);
		}
	}
	(void)resil_health_is_healthy(hc, "h3");
	assert_int_equal(fa.allocs, before);
	resil_health_free(hc);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_health_envoy_cycle),
		cmocka_unit_test(test_health_unhealthy_stays_unhealthy),
		cmocka_unit_test(test_health_down_and_streaks),
		cmocka_unit_test(test_health_report_at_deadline),
		cmocka_unit_test(test_health_order_and_ties),
		cmocka_unit_test(test_health_remove_and_stale_ids),
		cmocka_unit_test(test_health_jitter),
		cmocka_unit_test(test_health_seeded_jitter_replays),
		cmocka_unit_test(test_health_text_keys),
		cmocka_unit_test(test_health_null),
		cmocka_unit_test(test_health_alloc_failure),
		cmocka_unit_test(test_health_many_targets),
		cmocka_unit_test(test_health_next_report_allocate_nothing),
	};

	return cmocka_run_group_tests_name("health", tests, NULL, NULL);
}

/*
 * The adaptive client throttle (include/resil/throttle.h): the SRE book's
 * probability computed exactly at known counts with a scripted random
 * source, the boundary requests == k * accepts (p = 0, no draw), the
 * window's expiry at exactly its span, the reports, off, the configuration
 * refusals with their messages, and allocation failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/clock.h>
#include <resil/throttle.h>

#include "support/fail_alloc.h"

/* A scripted random source: its draws in order; a draw past the end
 * fails the test (a draw that should not have been made). */
typedef struct script {
	const double *v;
	size_t n;
	size_t drawn;
} script;

static double
script_draw(void *ctx)
{
	script *s = ctx;

	if (s->drawn >= s->n)
		fail_msg("draw %zu was not expected", s->drawn + 1);
	return s->v[s->drawn++];
}

/* The last event a listener saw, and how many. */
typedef struct seen {
	resil_throttle_event ev;
	int n;
} seen;

static void
on_event(const resil_throttle_event *ev, void *ctx)
{
	seen *s = ctx;

	s->ev = *ev;
	s->n++;
}

/* window 1000 ticks in 10 buckets of 100, k 2, drawing from sc. */
static resil_throttle *
make(resil_manual_clock *mc, script *sc, seen *sn, double k)
{
	resil_throttle_config cfg = resil_throttle_config_default();
	resil_throttle *t = NULL;
	resil_diag diag;

	cfg.k = k;
	cfg.window_ns = 1000;
	cfg.buckets = 10;
	cfg.clock = resil_manual_clock_hook(mc);
	cfg.random.uniform = script_draw;
	cfg.random.ctx = sc;
	if (sn != NULL) {
		cfg.listener = on_event;
		cfg.listener_ctx = sn;
	}
	assert_int_equal(resil_throttle_new(&t, &cfg, &diag), RESIL_OK);
	return t;
}

static resil_throttle_metrics
metrics(resil_throttle *t)
{
	resil_throttle_metrics m;

	assert_int_equal(resil_throttle_get_metrics(t, &m), RESIL_OK);
	return m;
}

static void
test_throttle_p_exact_at_known_counts(void **state)
{
	static const double draws[] = { 0.5, 0.6, 0.75, 0.39 };
	script sc = { draws, 4, 0 };
	seen sn;
	resil_manual_clock mc;
	resil_throttle *t;
	resil_throttle_metrics m;

	(void)state;
	memset(&sn, 0, sizeof(sn));
	resil_manual_clock_init(&mc, 5000);
	t = make(&mc, &sc, &sn, 2.0);

	/* 0 requests: p = 0, no draw. */
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(sc.drawn, 0);
	/* 1 request, 0 accepts: p = 1/2; a draw of exactly p is not below
	 * it. */
	assert_true(metrics(t).reject_probability == 1.0 / 2.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(sc.drawn, 1);
	/* 2 requests: p = 2/3, the draw 0.6 is below it. */
	assert_int_equal(resil_throttle_admit(t), RESIL_E_LIMITED);
	assert_int_equal(sc.drawn, 2);
	assert_int_equal(sn.n, 1);
	assert_int_equal(sn.ev.type, RESIL_THROTTLE_EVENT_REJECTED);
	assert_int_equal(sn.ev.time, 5000);
	assert_int_equal(sn.ev.requests, 2);
	assert_int_equal(sn.ev.accepts, 0);
	assert_true(sn.ev.p == 2.0 / 3.0);
	assert_true(sn.ev.draw == 0.6);
	/* The local rejection counted as a request: 3 now, p = 3/4. */
	m = metrics(t);
	assert_int_equal(m.window_requests, 3);
	assert_true(m.reject_probability == 3.0 / 4.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* 0.75 */
	/* One accept: 4 requests, 1 accept: p = (4 - 2) / 5. */
	assert_int_equal(
	    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	m = metrics(t);
	assert_int_equal(m.window_requests, 4);
	assert_int_equal(m.window_accepts, 1);
	assert_true(m.reject_probability == 2.0 / 5.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_E_LIMITED); /* .39 */
	assert_int_equal(sn.n, 2);
	assert_int_equal(sn.ev.requests, 4);
	assert_int_equal(sn.ev.accepts, 1);
	assert_true(sn.ev.p == 2.0 / 5.0);
	assert_int_equal(sc.drawn, 4);

	m = metrics(t);
	assert_int_equal(m.requests, 5);
	assert_int_equal(m.admitted, 3);
	assert_int_equal(m.local_rejects, 2);
	assert_int_equal(m.accepts, 1);
	assert_int_equal(m.window_requests, 5);
	assert_true(m.k == 2.0);
	assert_int_equal(m.window_ns, 1000);
	assert_int_equal(m.buckets, 10);
	resil_throttle_free(t);
}

static void
test_throttle_no_draw_when_requests_equal_k_accepts(void **state)
{
	static const double draws[] = { 0.2 };
	script sc = { draws, 1, 0 };
	resil_manual_clock mc;
	resil_throttle *t;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	/* k = 2: 2 requests, 1 accept. */
	t = make(&mc, &sc, NULL, 2.0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(resil_throttle_admit(t), RESIL_OK);
		if (i == 0)
			assert_int_equal(
			    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED),
			    RESIL_OK);
	}
	/* 2 requests == 2 * 1 accept: p = 0 exactly, and no draw. */
	assert_true(metrics(t).reject_probability == 0.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(sc.drawn, 0);
	/* One request more than k * accepts: p = 1/4 and a draw. */
	assert_true(metrics(t).reject_probability == 1.0 / 4.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_E_LIMITED);
	assert_int_equal(sc.drawn, 1);
	resil_throttle_free(t);

	/* k = 3: 3 requests, 1 accept; a fractional k: 3 requests, 2
	 * accepts at 1.5. */
	sc.drawn = 0;
	sc.n = 0;
	t = make(&mc, &sc, NULL, 3.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(
	    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	for (i = 0; i < 3; i++) /* 1, 2 and 3 requests <= 3 * 1 */
		assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_true(metrics(t).reject_probability == 1.0 / 5.0);
	resil_throttle_free(t);
	t = make(&mc, &sc, NULL, 1.5);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(
	    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* 1 <= 1.5 */
	/* 2 > 1.5: p = 0.5 / 3, one draw. */
	assert_true(metrics(t).reject_probability == 0.5 / 3.0);
	resil_throttle_free(t);
}

static void
test_throttle_window_expires_at_exactly_span(void **state)
{
	static const double draws[] = { 0.99, 0.99 };
	script sc = { draws, 2, 0 };
	resil_manual_clock mc;
	resil_throttle *t;
	resil_throttle_metrics m;
	int i;

	(void)state;
	/* 5000 starts bucket 50: counts made now last exactly 1000. */
	resil_manual_clock_init(&mc, 5000);
	t = make(&mc, &sc, NULL, 2.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(
	    resil_throttle_report(t, RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	for (i = 0; i < 3; i++) /* p = 0 up to 2 requests, then 1/4 */
		assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(sc.drawn, 1);

	resil_manual_clock_advance(&mc, 999); /* span - 1 */
	m = metrics(t);
	assert_int_equal(m.window_requests, 4);
	assert_int_equal(m.window_accepts, 1);
	assert_true(m.reject_probability == 2.0 / 5.0);
	/* At exactly the span, with no call in between, all gone. */
	resil_manual_clock_advance(&mc, 1);
	m = metrics(t);
	assert_int_equal(m.window_requests, 0);
	assert_int_equal(m.window_accepts, 0);
	assert_true(m.reject_probability == 0.0);
	/* ... and the next admit sees an empty window: no draw. */
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(sc.drawn, 1);
	/* The lifetime counters stay. */
	assert_int_equal(m.requests, 4);
	assert_int_equal(m.accepts, 1);

	/* A count made 50 ticks into bucket 60 (at 6050) lives until bucket
	 * 70 starts: 950 ticks. */
	resil_manual_clock_advance(&mc, 50);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* p 1/2 */
	assert_int_equal(sc.drawn, 2);
	assert_int_equal(metrics(t).window_requests, 2);
	resil_manual_clock_set(&mc, 6999);
	assert_int_equal(metrics(t).window_requests, 2);
	resil_manual_clock_set(&mc, 7000);
	assert_int_equal(metrics(t).window_requests, 0);
	resil_throttle_free(t);
}

static void
test_throttle_expiry_changes_the_decision(void **state)
{
	static const double draws[] = { 0.99, 0.5 };
	script sc = { draws, 2, 0 };
	resil_manual_clock mc;
	resil_throttle *t;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	t = make(&mc, &sc, NULL, 2.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* no draw */
	for (i = 0; i < 4; i++) /* rejected by the backend, all four */
		assert_int_equal(
		    resil_throttle_report(t, RESIL_THROTTLE_REJECTED),
		    RESIL_OK);
	resil_manual_clock_advance(&mc, 100);                /* bucket 1 */
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* .99 >= 1/2 */
	/* At 999 both requests count: p = 2/3 and the draw 0.5 rejects. */
	resil_manual_clock_set(&mc, 999);
	assert_int_equal(resil_throttle_admit(t), RESIL_E_LIMITED);
	/* At 1000 the first request (bucket 0) is gone; up to 1099 two
	 * remain (buckets 1 and 9), p = 2/3; from 1100 only the one of
	 * bucket 9 (made at 999), until 1900. */
	resil_manual_clock_set(&mc, 999);
	assert_true(metrics(t).reject_probability == 3.0 / 4.0);
	resil_manual_clock_set(&mc, 1000);
	assert_true(metrics(t).reject_probability == 2.0 / 3.0);
	resil_manual_clock_set(&mc, 1099);
	assert_true(metrics(t).reject_probability == 2.0 / 3.0);
	resil_manual_clock_set(&mc, 1100);
	assert_true(metrics(t).reject_probability == 1.0 / 2.0);
	resil_manual_clock_set(&mc, 1899);
	assert_true(metrics(t).reject_probability == 1.0 / 2.0);
	resil_manual_clock_set(&mc, 1900);
	assert_true(metrics(t).reject_probability == 0.0);
	assert_int_equal(sc.drawn, 2);
	assert_int_equal(metrics(t).backend_rejects, 4);
	resil_throttle_free(t);
}

static void
test_throttle_clock_edges(void **state)
{
	static const double draws[] = { 0.99, 0.99 };
	script sc = { draws, 2, 0 };
	resil_manual_clock mc;
	resil_throttle *t;

	(void)state;
	/* The last ticks of the clock: UINT64_MAX shares the bucket of the
	 * tick before it, nothing wraps. */
	resil_manual_clock_init(&mc, UINT64_MAX - 1);
	t = make(&mc, &sc, NULL, 2.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	resil_manual_clock_advance(&mc, 1000); /* saturates at the max */
	assert_int_equal(resil_manual_clock_now(&mc), UINT64_MAX);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* p 1/2 */
	assert_int_equal(metrics(t).window_requests, 2);
	/* A clock moved back: the window stays where it was (it never
	 * moves back) and the request counts in its newest bucket (and no
	 * crash). */
	resil_manual_clock_set(&mc, 0);
	assert_int_equal(metrics(t).window_requests, 2);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK); /* p 2/3 */
	assert_int_equal(sc.drawn, 2);
	assert_int_equal(metrics(t).window_requests, 3);
	assert_int_equal(metrics(t).requests, 3);
	resil_throttle_free(t);
}

static void
test_throttle_reports(void **state)
{
	static const double draws[] = { 0.0 };
	script sc = { draws, 1, 0 };
	resil_manual_clock mc;
	resil_throttle *t;
	resil_throttle_metrics m;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	t = make(&mc, &sc, NULL, 1.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_OK);
	assert_int_equal(
	    resil_throttle_report(t, RESIL_THROTTLE_NO_ANSWER), RESIL_OK);
	assert_int_equal(
	    resil_throttle_report(t, (resil_throttle_result)3), RESIL_E_INVAL);
	assert_int_equal(resil_throttle_report(NULL, RESIL_THROTTLE_ACCEPTED),
	    RESIL_E_INVAL);
	assert_int_equal(resil_throttle_admit(NULL), RESIL_E_INVAL);
	assert_int_equal(resil_throttle_get_metrics(t, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_throttle_get_metrics(NULL, &m), RESIL_E_INVAL);
	/* NO_ANSWER is no accept: k = 1, 1 request, 0 accepts: p = 1/2. */
	m = metrics(t);
	assert_int_equal(m.window_accepts, 0);
	assert_int_equal(m.no_answer, 1);
	assert_int_equal(m.accepts, 0);
	assert_true(m.reject_probability == 1.0 / 2.0);
	assert_int_equal(resil_throttle_admit(t), RESIL_E_LIMITED);
	assert_string_equal(
	    resil_throttle_event_name(RESIL_THROTTLE_EVENT_REJECTED),
	    "rejected");
	assert_string_equal(
	    resil_throttle_event_name((resil_throttle_event_type)7),
	    "unknown");
	resil_throttle_free(t);
	resil_throttle_free(NULL);
}

static void
test_throttle_off(void **state)
{
	script sc = { NULL, 0, 0 };
	resil_manual_clock mc;
	resil_throttle *t;
	resil_throttle_metrics m;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	t = make(&mc, &sc, NULL, 0.0);
	for (i = 0; i < 100; i++) {
		assert_int_equal(resil_throttle_admit(t), RESIL_OK);
		assert_int_equal(
		    resil_throttle_report(t, RESIL_THROTTLE_REJECTED),
		    RESIL_OK);
	}
	m = metrics(t);
	assert_int_equal(m.window_requests, 100);
	assert_int_equal(m.admitted, 100);
	assert_true(m.reject_probability == 0.0);
	assert_int_equal(sc.drawn, 0);
	resil_throttle_free(t);
}

/* The seeded generator when no random source is given: the same seed,
 * the same decisions. */
static void
test_throttle_seeded_rng_repeats(void **state)
{
	resil_throttle_config cfg = resil_throttle_config_default();
	resil_manual_clock mc;
	resil_throttle *t;
	uint64_t runs[2];
	int r, i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.seed = 42;
	for (r = 0; r < 2; r++) {
		assert_int_equal(resil_throttle_new(&t, &cfg, NULL), RESIL_OK);
		runs[r] = 0;
		for (i = 0; i < 64; i++)
			runs[r] = runs[r] << 1 |
			    (resil_throttle_admit(t) == RESIL_OK ? 1u : 0u);
		assert_int_equal(metrics(t).requests, 64);
		resil_throttle_free(t);
	}
	assert_int_equal(runs[0], runs[1]);
	/* With no accepts at all, most of 64 are rejected (p = (n-1)/n
	 * for the nth: about ln 64 admitted). */
	assert_true(__builtin_popcountll(runs[0]) < 16);
	assert_true(__builtin_popcountll(runs[0]) >= 1);
}

static void
expect_refused(const resil_throttle_config *cfg, const char *msg)
{
	resil_throttle *t = (resil_throttle *)&t;
	resil_throttle *before = t;
	resil_diag diag;

	assert_int_equal(
	    resil_throttle_config_validate(cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, msg);
	assert_int_equal(resil_throttle_new(&t, cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, msg);
	assert_ptr_equal(t, before);
}

static void
test_throttle_config_refusals(void **state)
{
	resil_throttle_config cfg;
	resil_throttle *t;
	resil_diag diag;

	(void)state;
	cfg = resil_throttle_config_default();
	cfg.k = 0.5;
	expect_refused(&cfg,
	    "throttle.k: 0.5 is out of range: 0 (off) or "
	    "1..1000000");
	cfg.k = 2e6;
	expect_refused(&cfg,
	    "throttle.k: 2e+06 is out of range: 0 (off) or "
	    "1..1000000");
	cfg = resil_throttle_config_default();
	cfg.buckets = 0;
	expect_refused(&cfg, "throttle.buckets: 0 is out of range 1..1024");
	cfg.buckets = 1025;
	expect_refused(&cfg, "throttle.buckets: 1025 is out of range 1..1024");
	cfg = resil_throttle_config_default();
	cfg.window_ns = 1000;
	cfg.buckets = 3;
	expect_refused(&cfg,
	    "throttle.window_ns: 1000 is not a whole number "
	    "of 3 buckets");
	cfg.window_ns = 2;
	expect_refused(&cfg,
	    "throttle.window_ns: 2 is shorter than 3 "
	    "buckets of 1 tick");
	cfg = resil_throttle_config_default();
	cfg.size = 8;
	assert_int_equal(
	    resil_throttle_config_validate(&cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "throttle.size: 8"));
	assert_int_equal(
	    resil_throttle_config_validate(NULL, &diag), RESIL_E_INVAL);
	cfg = resil_throttle_config_default();
	assert_int_equal(resil_throttle_new(NULL, &cfg, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_throttle_new(&t, NULL, NULL), RESIL_E_INVAL);
	/* The defaults are valid; off (k 0) and k 1 too. */
	assert_int_equal(resil_throttle_config_validate(&cfg, NULL), RESIL_OK);
	cfg.k = 0;
	assert_int_equal(resil_throttle_config_validate(&cfg, NULL), RESIL_OK);
	cfg.k = 1;
	assert_int_equal(resil_throttle_config_validate(&cfg, NULL), RESIL_OK);
}

static void
set_refused(const char *key, const char *value, resil_err err, const char *msg)
{
	resil_throttle_config cfg = resil_throttle_config_default();
	resil_throttle_config before = cfg;
	resil_diag diag;

	assert_int_equal(
	    resil_throttle_config_set(&cfg, key, value, &diag), err);
	assert_string_equal(diag.msg, msg);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void
test_throttle_config_text(void **state)
{
	resil_throttle_config cfg = resil_throttle_config_default();
	resil_diag diag;

	(void)state;
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.k", "1.5", &diag),
	    RESIL_OK);
	assert_true(cfg.k == 1.5);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.k", " off ", &diag),
	    RESIL_OK);
	assert_true(cfg.k == 0.0);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.k", "0", &diag),
	    RESIL_OK);
	assert_true(cfg.k == 0.0);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.window", "2m", &diag),
	    RESIL_OK);
	assert_int_equal(cfg.window_ns, 120 * RESIL_NS_PER_SEC);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.window", "1500", &diag),
	    RESIL_OK); /* a number alone is milliseconds */
	assert_int_equal(cfg.window_ns, 1500 * RESIL_NS_PER_MS);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.buckets", "60", &diag),
	    RESIL_OK);
	assert_int_equal(cfg.buckets, 60);
	assert_int_equal(resil_throttle_config_validate(&cfg, NULL), RESIL_OK);

	set_refused("throttle.k", "0.5", RESIL_E_INVAL,
	    "throttle.k: 0.5 is out of range: 0 (off) or 1..1000000");
	set_refused("throttle.k", "1e7", RESIL_E_INVAL,
	    "throttle.k: 1e7 is out of range: 0 (off) or 1..1000000");
	set_refused("throttle.k", "two", RESIL_E_INVAL,
	    "throttle.k: \"two\" is not a number (decimal, e.g. 0.25 or "
	    "1e-3)");
	set_refused("throttle.k", "-2", RESIL_E_INVAL,
	    "throttle.k: \"-2\" is not a number (decimal, e.g. 0.25 or "
	    "1e-3)");
	set_refused("throttle.window", "10sec", RESIL_E_INVAL,
	    "throttle.window: \"10sec\": unknown unit \"sec\" (did you mean "
	    "10s?)");
	set_refused("throttle.window", "0s", RESIL_E_INVAL,
	    "throttle.window: 0s is below the minimum of 0.000000001s (1ns)");
	set_refused("throttle.buckets", "0", RESIL_E_INVAL,
	    "throttle.buckets: 0 is out of range 1..1024");
	set_refused("throttle.buckets", "5000", RESIL_E_INVAL,
	    "throttle.buckets: 5000 is out of range 1..1024");
	set_refused("throttle.window_ns", "5", RESIL_E_NOTFOUND,
	    "throttle.window_ns: unknown key (throttle keys: k, window, "
	    "buckets)");
	assert_int_equal(
	    resil_throttle_config_set(NULL, "throttle.k", "2", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, NULL, "2", &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.k", NULL, &diag),
	    RESIL_E_INVAL);
	/* A window that is no whole number of buckets is refused once
	 * both are set. */
	cfg = resil_throttle_config_default();
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.window", "1s", &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_throttle_config_set(&cfg, "throttle.buckets", "7", &diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_throttle_config_validate(&cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "throttle.window_ns: 1000000000 is not a whole number of 7 "
	    "buckets");
}

static void
test_throttle_alloc(void **state)
{
	resil_throttle_config cfg = resil_throttle_config_default();
	resil_throttle *t = NULL;
	resil_manual_clock mc;
	resil_diag diag;
	fail_alloc fa;
	seen sn;
	int i;

	(void)state;
	cfg.alloc = fail_alloc_init(&fa, 1);
	assert_int_equal(resil_throttle_new(&t, &cfg, &diag), RESIL_E_NOMEM);
	assert_null(t);
	assert_string_equal(diag.msg, "throttle: out of memory");
	cfg.alloc = fail_alloc_init(&fa, 0);
	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.window_ns = 1000;
	cfg.buckets = 10;
	cfg.listener = on_event;
	cfg.listener_ctx = &sn;
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(resil_throttle_new(&t, &cfg, &diag), RESIL_OK);
	/* The hot path allocates nothing: admits granted and refused (a
	 * listener told), every kind of report, buckets recycled. */
	for (i = 0; i < 10000; i++) {
		resil_manual_clock_advance(&mc, 37);
		if (resil_throttle_admit(t) == RESIL_OK)
			assert_int_equal(resil_throttle_report(t,
			                     (resil_throttle_result)(i % 3)),
			    RESIL_OK);
	}
	assert_true(sn.n > 0);
	assert_int_equal(fa.allocs, 1);
	resil_throttle_free(t);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_int_equal(fa.size_mismatch, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_throttle_p_exact_at_known_counts),
		cmocka_unit_test(
		    test_throttle_no_draw_when_requests_equal_k_accepts),
		cmocka_unit_test(test_throttle_window_expires_at_exactly_span),
		cmocka_unit_test(test_throttle_expiry_changes_the_decision),
		cmocka_unit_test(test_throttle_clock_edges),
		cmocka_unit_test(test_throttle_reports),
		cmocka_unit_test(test_throttle_off),
		cmocka_unit_test(test_throttle_seeded_rng_repeats),
		cmocka_unit_test(test_throttle_config_refusals),
		cmocka_unit_test(test_throttle_config_text),
		cmocka_unit_test(test_throttle_alloc),
	};

	return cmocka_run_group_tests_name("throttle", tests, NULL, NULL);
}

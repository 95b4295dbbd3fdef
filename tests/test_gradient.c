/*
 * The gradient concurrency limit: Netflix's ExpAvgMeasurementTest (the
 * long-term RTT's warm-up and average, exact), Gradient2's update rule
 * sample by sample, the app-limited rule, the tolerance, the recovery of
 * the long RTT, the clamps, and a load step against a server of fixed
 * capacity (docs/gradient.md has the numbers). Netflix has no test of
 * Gradient2Limit itself to port.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/gradient.h>

#include "support/fail_alloc.h"

static resil_gradient *
make(const resil_gradient_config *cfg)
{
	resil_gradient *g;
	resil_diag diag;

	assert_int_equal(resil_gradient_new(&g, cfg, &diag), RESIL_OK);
	return g;
}

static double
long_rtt(resil_gradient *g)
{
	resil_gradient_metrics m;

	assert_int_equal(resil_gradient_get_metrics(g, &m), RESIL_OK);
	return m.long_rtt;
}

static double
estimate(resil_gradient *g)
{
	resil_gradient_metrics m;

	assert_int_equal(resil_gradient_get_metrics(g, &m), RESIL_OK);
	return m.estimate;
}

/* ExpAvgMeasurementTest.testWarmup: window 100, warm-up 10; samples
 * 10..19 give 10.0, 10.5, ... 14.5; then 100 gives 16.2 (within 0.1). */
static void
test_gradient_netflix_exp_avg_warmup(void **state)
{
	static const double want[] = { 10.0, 10.5, 11, 11.5, 12, 12.5, 13,
		13.5, 14, 14.5 };
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;
	int i;

	(void)state;
	cfg.long_window = 100;
	g = make(&cfg);
	for (i = 0; i < 10; i++) {
		/* inflight 0: app limited, the limit stays, the RTT is
		 * learnt. */
		assert_int_equal(resil_gradient_sample(g, (uint64_t)(i + 10), 0,
		                     0),
		    20);
		assert_true(fabs(long_rtt(g) - want[i]) < 0.01);
	}
	resil_gradient_sample(g, 100, 0, 0);
	assert_true(fabs(long_rtt(g) - 16.2) < 0.1);
	/* Exactly: 14.5 * (1 - 2/101) + 100 * 2/101. */
	assert_true(fabs(long_rtt(g) - (14.5 * (99.0 / 101.0) +
	                                   100.0 * (2.0 / 101.0))) < 1e-9);
	resil_gradient_free(g);
}

/* The update rule, sample by sample, against the formula in doubles. */
static void
test_gradient_update_rule(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;
	resil_gradient_metrics m;
	double est = 20, lr;
	int i;

	(void)state;
	g = make(&cfg);
	assert_int_equal(resil_gradient_get_limit(g), 20);
	/* Steady: gradient min(1, 1.5 * 10 / 10) = 1, the limit grows by
	 * queue_size * smoothing a sample: 20.8, 21.6, 22.4, ... */
	for (i = 0; i < 10; i++) {
		uint32_t l = resil_gradient_sample(g, 10, 100, 0);

		est = est * 0.8 + (est * 1.0 + 4) * 0.2;
		assert_true(fabs(estimate(g) - est) < 1e-9);
		assert_int_equal(l, (uint32_t)est);
	}
	assert_int_equal(resil_gradient_get_limit(g), 28); /* 28.000...007 */
	/* A slow sample: the long RTT averages it in, the gradient is
	 * 1.5 * long / 40 < 0.5, clamped to 0.5. */
	lr = 10 * (1 - 2.0 / 601) + 40 * (2.0 / 601);
	{
		double want = est * 0.8 + (est * 0.5 + 4) * 0.2;
		uint32_t l = resil_gradient_sample(g, 40, 100, 0);

		assert_true(fabs(estimate(g) - want) < 1e-9);
		assert_int_equal(l, 26); /* 0.9 * 28 + 0.8 */
		est = estimate(g);
	}
	assert_true(fabs(long_rtt(g) - lr) < 1e-6);
	/* Within the tolerance: 1.5 * long / rtt >= 1 for rtt up to 1.5x
	 * the long RTT: no decrease. */
	{
		uint64_t rtt = (uint64_t)(lr * 1.4);
		double lr2 = lr * (1 - 2.0 / 601) + (double)rtt * (2.0 / 601);
		double grad = fmin(1.0, 1.5 * lr2 / (double)rtt);

		resil_gradient_sample(g, rtt, 100, 0);
		est = est * 0.8 + (est * grad + 4) * 0.2;
		assert_true(grad == 1.0);
		assert_true(fabs(estimate(g) - est) < 1e-9);
	}
	assert_int_equal(resil_gradient_get_metrics(g, &m), RESIL_OK);
	assert_int_equal(m.samples, 12);
	assert_int_equal(m.app_limited, 0);
	assert_true(m.decreases == 1);
	resil_gradient_free(g);
}

static void
test_gradient_app_limited(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;
	resil_gradient_metrics m;

	(void)state;
	g = make(&cfg);
	/* inflight < limit / 2 (9 < 10): the limit stays. 10 is not. */
	assert_int_equal(resil_gradient_sample(g, 10, 9, 0), 20);
	assert_true(estimate(g) == 20.0);
	resil_gradient_sample(g, 10, 10, 0);
	assert_true(fabs(estimate(g) - 20.8) < 1e-9);
	assert_int_equal(resil_gradient_get_metrics(g, &m), RESIL_OK);
	assert_int_equal(m.app_limited, 1);
	assert_int_equal(m.last_rtt, 10);
	resil_gradient_free(g);
}

/* Back from a long overload: long / short > 2 takes 5 % off the long
 * RTT at each such sample (this sample's gradient uses it before). */
static void
test_gradient_long_rtt_recovers(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;
	double lr;
	int i;

	(void)state;
	cfg.long_warmup = 1;
	g = make(&cfg);
	resil_gradient_sample(g, 100, 0, 0);
	assert_true(long_rtt(g) == 100.0);
	resil_gradient_sample(g, 10, 0, 0);
	lr = (100.0 * (1 - 2.0 / 601) + 10.0 * (2.0 / 601)) * 0.95;
	assert_true(fabs(long_rtt(g) - lr) < 1e-9);
	for (i = 0; i < 200; i++) {
		resil_gradient_sample(g, 10, 0, 0);
		/* Each sample: average 10 in, then * 0.95 while the long
		 * RTT is more than twice the sample's. */
		lr = lr * (1 - 2.0 / 601) + 10.0 * (2.0 / 601);
		if (lr / 10.0 > 2)
			lr *= 0.95;
		assert_true(fabs(long_rtt(g) - lr) < 1e-9);
	}
	/* 28 samples bring it under 20, the average does the rest. */
	assert_true(long_rtt(g) > 15.0 && long_rtt(g) < 16.0);
	resil_gradient_free(g);
}

static void
test_gradient_clamps_and_rtt_zero(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;
	int i;

	(void)state;
	cfg.initial_limit = 10;
	cfg.min_limit = 5;
	cfg.max_limit = 12;
	cfg.queue_size = 100;
	g = make(&cfg);
	/* rtt 0 counts as 1 tick. */
	assert_int_equal(resil_gradient_sample(g, 0, 10, 0), 12);
	assert_true(estimate(g) == 12.0);
	cfg.queue_size = 0;
	resil_gradient_free(g);
	g = make(&cfg);
	for (i = 0; i < 10; i++)
		resil_gradient_sample(g, 1, 10, 0);
	for (i = 0; i < 100; i++)
		resil_gradient_sample(g, 1000000, 10, 1); /* dropped: same */
	assert_int_equal(resil_gradient_get_limit(g), 5);
	resil_gradient_free(g);
}

static void
test_gradient_grow_unloaded(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;

	(void)state;
	cfg.growth = RESIL_GRADIENT_GROW_UNLOADED;
	cfg.rtt_tolerance = 1.0;
	cfg.long_warmup = 1;
	g = make(&cfg);
	resil_gradient_sample(g, 10, 100, 0); /* gradient 1: + 4 * 0.2 */
	assert_true(fabs(estimate(g) - 20.8) < 1e-9);
	/* long 10.0299, gradient 10.0299 / 12 < 1: no allowance, so the
	 * limit only shrinks: 20.8 * (0.8 + 0.2 * g). */
	{
		double lr = 10 * (1 - 2.0 / 601) + 12 * (2.0 / 601);

		resil_gradient_sample(g, 12, 100, 0);
		assert_true(fabs(estimate(g) -
		                20.8 * (0.8 + 0.2 * (lr / 12.0))) < 1e-9);
	}
	resil_gradient_free(g);
}

/*
 * A load step against a server of capacity C = 50 calls and a base RTT
 * of 10 ms: a call's RTT is base * max(1, inflight / C) (queueing, by
 * Little's law), the caller keeps min(limit, demand) calls in flight.
 * Demand is 30 for 2000 samples, then 400. docs/gradient.md quotes these
 * numbers.
 */
typedef struct step_result {
	uint32_t at_step;  /* the limit when the step comes */
	uint32_t at_1000;  /* 1000 samples after it */
	uint32_t lo, hi;   /* the band from 1000 samples after, to the end */
	uint64_t rtt_end;  /* the last RTT */
} step_result;

static step_result
load_step(const resil_gradient_config *cfg)
{
	const uint64_t base = 10 * RESIL_NS_PER_MS;
	const uint32_t cap = 50;
	resil_gradient *g = make(cfg);
	step_result r;
	uint64_t rtt = base;
	int i;

	memset(&r, 0, sizeof(r));
	r.lo = UINT32_MAX;
	for (i = 0; i < 20000; i++) {
		uint32_t demand = i < 2000 ? 30 : 400;
		uint32_t limit = resil_gradient_get_limit(g);
		uint32_t inflight = limit < demand ? limit : demand;
		uint32_t l;

		rtt = inflight > cap ? base * inflight / cap : base;
		if (i == 2000)
			r.at_step = limit;
		l = resil_gradient_sample(g, rtt, inflight, 0);
		if (i == 3000)
			r.at_1000 = l;
		if (i >= 3000) {
			r.lo = l < r.lo ? l : r.lo;
			r.hi = l > r.hi ? l : r.hi;
		}
	}
	r.rtt_end = rtt;
	resil_gradient_free(g);
	return r;
}

static void
test_gradient_load_step(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	step_result r;

	(void)state;
	/* Netflix's defaults: app limited at 30 in flight, the limit has
	 * grown to 60 (2 x 30); after the step the long RTT learns the
	 * queueing and the limit climbs to max_limit within 1000 samples:
	 * RTT 40 ms, 4x the base, like a fixed bulkhead of 200. */
	r = load_step(&cfg);
	assert_int_equal(r.at_step, 60);
	assert_int_equal(r.at_1000, 200);
	assert_int_equal(r.lo, 200);
	assert_int_equal(r.hi, 200);
	assert_int_equal(r.rtt_end, 40 * RESIL_NS_PER_MS);

	/* GROW_UNLOADED with a tolerance of 1: settles at the capacity. */
	cfg.growth = RESIL_GRADIENT_GROW_UNLOADED;
	cfg.rtt_tolerance = 1.0;
	cfg.min_limit = 1;
	r = load_step(&cfg);
	assert_int_equal(r.at_step, 60);
	assert_int_equal(r.at_1000, 51);
	assert_int_equal(r.lo, 50);
	assert_int_equal(r.hi, 51);
	assert_int_equal(r.rtt_end, 10200 * RESIL_NS_PER_US); /* 51 / 50 */
}

/* The same step with +-10 % noise on every RTT (seeded): the band is
 * wider, up to 1.6 times the capacity. */
static void
test_gradient_load_step_noisy(void **state)
{
	const uint64_t base = 10 * RESIL_NS_PER_MS;
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;
	resil_rng rng;
	uint32_t lo = UINT32_MAX, hi = 0;
	int i;

	(void)state;
	cfg.growth = RESIL_GRADIENT_GROW_UNLOADED;
	cfg.rtt_tolerance = 1.0;
	cfg.min_limit = 1;
	g = make(&cfg);
	resil_rng_seed(&rng, 7);
	for (i = 0; i < 20000; i++) {
		uint32_t demand = i < 2000 ? 30 : 400;
		uint32_t limit = resil_gradient_get_limit(g);
		uint32_t inflight = limit < demand ? limit : demand;
		uint64_t rtt = inflight > 50 ? base * inflight / 50 : base;
		uint32_t l;

		rtt = (uint64_t)((double)rtt *
		    (0.9 + 0.2 * resil_rng_uniform(&rng)));
		l = resil_gradient_sample(g, rtt, inflight, 0);
		if (i >= 3000) {
			lo = l < lo ? l : lo;
			hi = l > hi ? l : hi;
		}
	}
	/* Exact for seed 7: RTT noise reads as queueing now and then. */
	assert_int_equal(lo, 50);
	assert_int_equal(hi, 82);
	resil_gradient_free(g);
}

static void
expect_refused(const char *key, const char *value, const char *msg)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient_config before = cfg;
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_gradient_config_set(&cfg, key, value, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, msg);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void
test_gradient_text_keys(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g = NULL;
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_gradient_config_set(&cfg,
	                     "gradient.initial_limit", "50", NULL),
	    RESIL_OK);
	assert_int_equal(resil_gradient_config_set(&cfg, "gradient.max_limit",
	                     "1000", NULL),
	    RESIL_OK);
	assert_int_equal(resil_gradient_config_set(&cfg, "gradient.smoothing",
	                     "0.5", NULL),
	    RESIL_OK);
	assert_int_equal(resil_gradient_config_set(&cfg,
	                     "gradient.rtt_tolerance", "2", NULL),
	    RESIL_OK);
	assert_int_equal(resil_gradient_config_set(&cfg,
	                     "gradient.queue_size", "0", NULL),
	    RESIL_OK);
	assert_int_equal(resil_gradient_config_set(&cfg, "gradient.growth",
	                     "UNLOADED", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.initial_limit, 50);
	assert_int_equal(cfg.max_limit, 1000);
	assert_true(cfg.smoothing == 0.5);
	assert_true(cfg.rtt_tolerance == 2.0);
	assert_int_equal(cfg.queue_size, 0);
	assert_int_equal(cfg.growth, RESIL_GRADIENT_GROW_UNLOADED);
	assert_int_equal(resil_gradient_config_validate(&cfg, NULL), RESIL_OK);

	expect_refused("gradient.smoothing", "0",
	    "gradient.smoothing: 0 would never move the limit (0 < "
	    "smoothing <= 1)");
	expect_refused("gradient.smoothing", "1.5",
	    "gradient.smoothing: 1.5 is out of range 0..1");
	expect_refused("gradient.rtt_tolerance", "0.9",
	    "gradient.rtt_tolerance: 0.9 is out of range 1..1e+09");
	expect_refused("gradient.long_window", "0",
	    "gradient.long_window: 0 is out of range 1..4294967295");
	expect_refused("gradient.growth", "sometimes",
	    "gradient.growth: \"sometimes\" is not always or unloaded");
	expect_refused("gradient.max", "1",
	    "gradient.max: unknown key (gradient keys: initial_limit, "
	    "min_limit, max_limit, smoothing, rtt_tolerance, long_window, "
	    "long_warmup, queue_size, growth)");

	cfg = resil_gradient_config_default();
	cfg.initial_limit = 10;
	assert_int_equal(resil_gradient_new(&g, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "gradient.initial_limit: 10 is out of range 20..200 "
	    "(min_limit..max_limit)");
	assert_null(g);
	cfg = resil_gradient_config_default();
	cfg.max_limit = 10;
	assert_int_equal(resil_gradient_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "gradient.max_limit: 10 is below gradient.min_limit (20)");
	cfg = resil_gradient_config_default();
	cfg.smoothing = NAN;
	assert_int_equal(resil_gradient_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "gradient.smoothing: nan is out of range (0, 1]");
	cfg = resil_gradient_config_default();
	cfg.min_limit = 0;
	cfg.initial_limit = 0;
	assert_int_equal(resil_gradient_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg, "gradient.min_limit: 0 must be >= 1");
	cfg = resil_gradient_config_default();
	cfg.growth = (resil_gradient_growth)7;
	assert_int_equal(resil_gradient_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "gradient.growth: 7 is not a resil_gradient_growth");
	cfg = resil_gradient_config_default();
	cfg.size = 0;
	assert_int_equal(resil_gradient_config_validate(&cfg, NULL),
	    RESIL_E_INVAL);
}

typedef struct changes {
	uint32_t old[64], now[64];
	int n;
} changes;

static void
on_change(uint32_t old_limit, uint32_t limit, void *ctx)
{
	changes *c = ctx;

	if (c->n < 64) {
		c->old[c->n] = old_limit;
		c->now[c->n] = limit;
		c->n++;
	}
}

static void
test_gradient_listener_null_alloc(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient_metrics m;
	resil_gradient *g;
	changes ch;
	uint64_t nth;
	int i;

	(void)state;
	memset(&ch, 0, sizeof(ch));
	cfg.listener = on_change;
	cfg.listener_ctx = &ch;
	g = make(&cfg);
	for (i = 0; i < 5; i++)
		resil_gradient_sample(g, 10, 100, 0);
	/* 20.8, 21.6, 22.4, 23.2, 24.0: four changes of the integer. */
	assert_int_equal(ch.n, 4);
	assert_int_equal(ch.old[0], 20);
	assert_int_equal(ch.now[0], 21);
	assert_int_equal(ch.now[3], 24);
	assert_int_equal(resil_gradient_get_metrics(g, &m), RESIL_OK);
	assert_int_equal(m.increases, 4);
	resil_gradient_free(g);

	assert_int_equal(resil_gradient_sample(NULL, 1, 1, 0), 0);
	assert_int_equal(resil_gradient_get_limit(NULL), 0);
	assert_int_equal(resil_gradient_get_metrics(NULL, &m), RESIL_E_INVAL);
	assert_int_equal(resil_gradient_new(NULL, &cfg, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_gradient_new(&g, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_gradient_config_set(NULL, "a", "b", NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_gradient_config_validate(NULL, NULL),
	    RESIL_E_INVAL);
	resil_gradient_free(NULL);

	for (nth = 1; nth <= 2; nth++) {
		fail_alloc fa;
		resil_gradient *out = (resil_gradient *)&fa;
		resil_err e;

		cfg = resil_gradient_config_default();
		cfg.alloc = fail_alloc_init(&fa, nth);
		e = resil_gradient_new(&out, &cfg, NULL);
		if (nth == 1) {
			assert_int_equal(e, RESIL_E_NOMEM);
			assert_ptr_equal(out, (resil_gradient *)&fa);
		} else {
			assert_int_equal(e, RESIL_OK);
			resil_gradient_free(out);
		}
		assert_int_equal(fail_alloc_live(&fa), 0);
	}
}

static void
test_gradient_sample_allocates_nothing(void **state)
{
	fail_alloc fa;
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient_metrics m;
	resil_gradient *g;
	uint64_t before;
	int i;

	(void)state;
	cfg.alloc = fail_alloc_init(&fa, 0);
	g = make(&cfg);
	before = fa.allocs;
	for (i = 0; i < 10000; i++)
		(void)resil_gradient_sample(g, (uint64_t)(1000 + i % 777),
		    resil_gradient_get_limit(g), i % 3 == 0);
	(void)resil_gradient_get_metrics(g, &m);
	assert_int_equal(fa.allocs, before);
	resil_gradient_free(g);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gradient_netflix_exp_avg_warmup),
		cmocka_unit_test(test_gradient_update_rule),
		cmocka_unit_test(test_gradient_app_limited),
		cmocka_unit_test(test_gradient_long_rtt_recovers),
		cmocka_unit_test(test_gradient_clamps_and_rtt_zero),
		cmocka_unit_test(test_gradient_grow_unloaded),
		cmocka_unit_test(test_gradient_load_step),
		cmocka_unit_test(test_gradient_load_step_noisy),
		cmocka_unit_test(test_gradient_text_keys),
		cmocka_unit_test(test_gradient_listener_null_alloc),
		cmocka_unit_test(test_gradient_sample_allocates_nothing),
	};

	return cmocka_run_group_tests_name("gradient", tests, NULL, NULL);
}

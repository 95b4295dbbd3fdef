/*
 * The bulkhead's gradient mode (adaptive = RESIL_BULKHEAD_GRADIENT,
 * bulkhead.limit=gradient): its limit is Netflix's Gradient2 limit of
 * docs/gradient.md, fed one sample per completed call. The load step of
 * docs/gradient.md, through the bulkhead, gives the same limits sample by
 * sample as a resil_gradient fed directly; and through a pipeline the
 * bulkhead stage feeds it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/gradient.h>
#include <resil/limit.h>
#include <resil/pipeline.h>

#include "support/fail_alloc.h"

#define MS UINT64_C(1000000)

/* docs/gradient.md's server: capacity 50 calls, 10 ms; beyond 50 in
 * flight the RTT grows with them. */
static uint64_t
server_rtt(uint32_t inflight)
{
	return inflight > 50 ? 10 * MS * inflight / 50 : 10 * MS;
}

static resil_bulkhead_config
gradient_bulkhead(const char *const (*text)[2], size_t n)
{
	resil_bulkhead_config c = resil_bulkhead_config_default();
	resil_diag diag;
	size_t i;

	assert_int_equal(
	    resil_bulkhead_config_set(&c, "bulkhead.limit", "gradient", &diag),
	    RESIL_OK);
	for (i = 0; i < n; i++)
		assert_int_equal(resil_bulkhead_config_set(
		                     &c, text[i][0], text[i][1], &diag),
		    RESIL_OK);
	return c;
}

/*
 * One run of the load step: 30 calls wanted, 400 from sample 2000. Each
 * sample holds min(limit, wanted) calls in flight through the bulkhead
 * (try_acquire until refused or enough), completes one with the server's
 * RTT and releases the rest. A resil_gradient with the same config takes
 * the same samples directly; the limits agree at every step. The limits
 * at the marks are written to got[].
 */
static void
load_step(const resil_bulkhead_config *c, const int *marks, size_t nmarks,
    uint32_t *got)
{
	resil_bulkhead *bh;
	resil_gradient *g;
	resil_diag diag;
	size_t k = 0;
	int i;

	assert_int_equal(resil_bulkhead_new(&bh, c, &diag), RESIL_OK);
	assert_int_equal(
	    resil_gradient_new(&g, &c->gradient, &diag), RESIL_OK);
	for (i = 0; k < nmarks; i++) {
		uint32_t demand = i < 2000 ? 30 : 400;
		uint32_t limit = resil_bulkhead_get_limit(bh);
		uint32_t held = 0, j;

		assert_int_equal(limit, resil_gradient_get_limit(g));
		while (held < demand &&
		    resil_bulkhead_try_acquire(bh) == RESIL_OK)
			held++;
		assert_int_equal(held, limit < demand ? limit : demand);
		if (i == marks[k])
			got[k++] = limit;
		assert_int_equal(resil_bulkhead_complete(bh,
		                     RESIL_OUTCOME_SUCCESS, server_rtt(held)),
		    RESIL_OK);
		for (j = 1; j < held; j++)
			assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
		resil_gradient_sample(g, server_rtt(held), held, 0);
	}
	resil_gradient_free(g);
	resil_bulkhead_free(bh);
}

/* docs/gradient.md's example output, through the bulkhead: Netflix's
 * defaults queue (60, 92, 184, 200), growth=unloaded with no tolerance
 * settles at the capacity (51). */
static void
test_limit_gradient_load_step(void **state)
{
	static const int marks[] = { 2000, 2100, 2500, 3000 };
	static const char *const unloaded[][2] = {
		{ "bulkhead.gradient.growth", "unloaded" },
		{ "bulkhead.gradient.rtt_tolerance", "1" },
		{ "bulkhead.gradient.min_limit", "1" },
	};
	resil_bulkhead_config c;
	uint32_t got[4];

	(void)state;
	c = gradient_bulkhead(NULL, 0);
	load_step(&c, marks, 4, got);
	assert_int_equal(got[0], 60);
	assert_int_equal(got[1], 92);
	assert_int_equal(got[2], 184);
	assert_int_equal(got[3], 200);
	c = gradient_bulkhead(unloaded, 3);
	load_step(&c, marks, 4, got);
	assert_int_equal(got[0], 60);
	assert_int_equal(got[1], 51);
	assert_int_equal(got[2], 51);
	assert_int_equal(got[3], 51);
}

typedef struct events {
	size_t n, inc, dec;
	uint32_t last_old, last_new;
} events;

static void
on_limit(const resil_limit_event *ev, void *ctx)
{
	events *e = ctx;

	e->n++;
	if (ev->type == RESIL_LIMIT_EVENT_LIMIT_INCREASED)
		e->inc++;
	if (ev->type == RESIL_LIMIT_EVENT_LIMIT_DECREASED)
		e->dec++;
	e->last_old = ev->old_limit;
	e->last_new = ev->limit;
}

/* The limit starts at gradient.initial_limit and is enforced; ignored and
 * business outcomes are no sample; a slow sample lowers the limit, told
 * to the listener; the metrics count good and bad samples. */
static void
test_limit_gradient_samples_and_events(void **state)
{
	static const char *const text[][2] = {
		{ "bulkhead.gradient.initial_limit", "4" },
		{ "bulkhead.gradient.min_limit", "2" },
		{ "bulkhead.gradient.max_limit", "8" },
		{ "bulkhead.gradient.queue_size", "0" },
		{ "bulkhead.gradient.long_warmup", "1" },
	};
	resil_bulkhead_config c = gradient_bulkhead(text, 5);
	resil_gradient_metrics gm;
	resil_bulkhead_metrics bm;
	resil_bulkhead *bh;
	resil_diag diag;
	events ev;
	int i;

	(void)state;
	memset(&ev, 0, sizeof(ev));
	c.listener = on_limit;
	c.listener_ctx = &ev;
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_OK);
	assert_non_null(resil_bulkhead_gradient(bh));
	assert_int_equal(resil_bulkhead_get_limit(bh), 4);
	for (i = 0; i < 4; i++)
		assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	/* No sample: the limit and the gradient stay. */
	assert_int_equal(
	    resil_bulkhead_complete(bh, RESIL_OUTCOME_IGNORED, 5), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_complete(bh, RESIL_OUTCOME_BUSINESS, 5), RESIL_OK);
	assert_int_equal(
	    resil_gradient_get_metrics(resil_bulkhead_gradient(bh), &gm),
	    RESIL_OK);
	assert_int_equal(gm.samples, 0);
	/* The first sample, 2 in flight (this call included; not below 4 /
	 * 2, so not app limited): long = short = 100, gradient 1, target
	 * 4 + 0: unchanged. */
	assert_int_equal(
	    resil_bulkhead_complete(bh, RESIL_OUTCOME_SUCCESS, 100), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 4);
	/* A sample 4x slower with 2 in flight: long = 100 + 300 * 2 / 601;
	 * gradient = max(0.5, 1.5 * long / 400) = 0.5; target = 2; limit =
	 * 4 * 0.8 + 2 * 0.2 = 3.6, whose integer part is 3. */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_complete(bh, RESIL_OUTCOME_FAILURE, 400), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 3);
	assert_int_equal(ev.dec, 1);
	assert_int_equal(ev.last_old, 4);
	assert_int_equal(ev.last_new, 3);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &bm), RESIL_OK);
	assert_int_equal(bm.good_samples, 1);
	assert_int_equal(bm.bad_samples, 1);
	assert_int_equal(bm.decreases, 1);
	assert_int_equal(bm.limit, 3);
	assert_int_equal(bm.in_flight, 1);
	assert_int_equal(
	    resil_gradient_get_metrics(resil_bulkhead_gradient(bh), &gm),
	    RESIL_OK);
	assert_int_equal(gm.samples, 2);
	assert_int_equal(gm.last_rtt, 400);
	assert_true(gm.estimate > 3.599 && gm.estimate < 3.601);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
}

/* Keys and checks: the mode's names, the gradient's keys under
 * bulkhead.gradient., each refusal naming its key. */
static void
test_limit_gradient_config(void **state)
{
	resil_bulkhead_config c = resil_bulkhead_config_default();
	resil_bulkhead *bh = NULL;
	resil_diag diag;

	(void)state;
	assert_int_equal(
	    resil_bulkhead_config_set(&c, "bulkhead.limit", "adaptive", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "bulkhead.limit: \"adaptive\" is not "
	    "one of fixed, aimd, gradient");
	assert_int_equal(c.adaptive, RESIL_BULKHEAD_FIXED);
	assert_int_equal(
	    resil_bulkhead_config_set(&c, "bulkhead.limit", "aimd", &diag),
	    RESIL_OK);
	assert_int_equal(c.adaptive, RESIL_BULKHEAD_AIMD);
	assert_int_equal(resil_bulkhead_config_set(
	                     &c, "bulkhead.gradient.smoothing", "0", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "bulkhead.gradient.smoothing: 0 would never move the limit (0 < "
	    "smoothing <= 1)");
	assert_true(c.gradient.smoothing == 0.2);
	assert_int_equal(resil_bulkhead_config_set(
	                     &c, "bulkhead.gradient.smothing", "0.5", &diag),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_bulkhead_config_set(&c, "bulkhead.foo", "1", &diag),
	    RESIL_E_NOTFOUND);
	assert_string_equal(diag.msg, "bulkhead.foo: unknown key");
	assert_int_equal(
	    resil_bulkhead_config_set(NULL, "bulkhead.limit", "fixed", &diag),
	    RESIL_E_INVAL);
	/* A gradient bulkhead takes no batch, and at most the bulkhead's
	 * largest limit. */
	c = resil_bulkhead_config_default();
	c.adaptive = RESIL_BULKHEAD_GRADIENT;
	c.batch = 2;
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "bulkhead.batch: 2 must be 0 for an adaptive bulkhead");
	c.batch = 0;
	c.gradient.max_limit = RESIL_BULKHEAD_MAX_LIMIT + 1;
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "bulkhead.gradient.max_limit: 1073741825 is out of range "
	    "..1073741824");
	c.gradient.max_limit = 200;
	c.gradient.initial_limit = 10;
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "bulkhead.gradient.initial_limit: 10 is out of range 20..200 "
	    "(min_limit..max_limit)");
	/* A cross-field message names both keys as the text spells them. */
	c.gradient.initial_limit = 20;
	c.gradient.max_limit = 10;
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "bulkhead.gradient.max_limit: 10 is below "
	    "bulkhead.gradient.min_limit (20)");
	c.gradient.max_limit = 200;
	c.adaptive = 3;
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "bulkhead.adaptive: 3 is not 0 (fixed), 1 (aimd) or 2 (gradient)");
	assert_null(bh);
	/* Other modes have no gradient. */
	c = resil_bulkhead_config_default();
	assert_int_equal(resil_bulkhead_new(&bh, &c, &diag), RESIL_OK);
	assert_null(resil_bulkhead_gradient(bh));
	resil_bulkhead_free(bh);
	assert_null(resil_bulkhead_gradient(NULL));
}

static int
ok_call(void *ctx, const resil_args *args, resil_value *out)
{
	resil_manual_clock *mc = ctx;

	(void)args;
	(void)out;
	resil_manual_clock_advance(mc, 7);
	return 0;
}

/* In a pipeline the bulkhead stage completes each call with its
 * duration: every call is a sample of the gradient. (The pipeline times
 * an attempt only when it has a timeout: without one the sample's RTT
 * is 0, read as 1 tick.) */
static void
test_limit_gradient_in_a_pipeline(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_gradient_metrics gm;
	resil_pipeline *p;
	resil_result r;
	resil_args args;
	resil_diag diag;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 100);
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.timeout_ns = 1000;
	cfg.bulkhead_enabled = 1;
	cfg.bulkhead.adaptive = RESIL_BULKHEAD_GRADIENT;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_get_limit(resil_pipeline_bulkhead(p)), 20);
	memset(&args, 0, sizeof(args));
	args.method = "get";
	for (i = 0; i < 5; i++)
		assert_int_equal(
		    resil_pipeline_call(p, &args, ok_call, &mc, &r), RESIL_OK);
	assert_int_equal(
	    resil_gradient_get_metrics(
	        resil_bulkhead_gradient(resil_pipeline_bulkhead(p)), &gm),
	    RESIL_OK);
	assert_int_equal(gm.samples, 5);
	assert_int_equal(gm.last_rtt, 7);
	/* One in flight of 20: app limited, the limit stays. */
	assert_int_equal(gm.app_limited, 5);
	resil_pipeline_free(p);
}

/* Each allocation of a gradient bulkhead failing in turn: RESIL_E_NOMEM,
 * nothing left allocated. */
static void
test_limit_gradient_out_of_memory(void **state)
{
	resil_bulkhead_config c = resil_bulkhead_config_default();
	resil_bulkhead *bh;
	fail_alloc fa;
	uint64_t n;
	resil_err err;

	(void)state;
	c.adaptive = RESIL_BULKHEAD_GRADIENT;
	for (n = 1; n < 20; n++) {
		c.alloc = fail_alloc_init(&fa, n);
		bh = NULL;
		err = resil_bulkhead_new(&bh, &c, NULL);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_null(bh);
		} else {
			assert_non_null(resil_bulkhead_gradient(bh));
			resil_bulkhead_free(bh);
		}
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
		if (fa.failures == 0)
			break;
	}
	assert_true(n > 2 && n < 20); /* two allocations, each failed once */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit_gradient_load_step),
		cmocka_unit_test(test_limit_gradient_samples_and_events),
		cmocka_unit_test(test_limit_gradient_config),
		cmocka_unit_test(test_limit_gradient_in_a_pipeline),
		cmocka_unit_test(test_limit_gradient_out_of_memory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

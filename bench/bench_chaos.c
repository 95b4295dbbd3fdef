/*
 * Chaos decision hot paths.
 *
 *   chaos/disabled     resil_chaos_decide() of a chaos whose master
 *                      switch is off (every strategy configured): one
 *                      load and one test of the flag word.
 *   chaos/enabled_miss the fault strategy on at rate 0: past the flag
 *                      word, one draw from the chaos's own generator,
 *                      no injection (the common case of a low rate).
 *
 * Per method in a pipeline (pipeline/success's pipeline: a breaker with a
 * count window of 100, retry, a handler; getStock and listItems declared,
 * getStock with a chaos of its own, fault configured, switched off):
 *
 *   chaos/pipeline/method_off        pipeline/success's loop on getStock:
 *                                    the blocking driver, through the
 *                                    machine (a method with chaos is not
 *                                    run inline)
 *   chaos/pipeline/method_off_async  pipeline/async_success's loop on
 *                                    getStock: the machine by hand, whose
 *                                    attempt pays the NULL test and the
 *                                    flag test
 *   chaos/pipeline/other_method      pipeline/success's loop on listItems,
 *                                    which has no chaos: what
 *                                    pipeline/success pays
 *   chaos/pipeline/other_method_async
 *                                    the machine by hand on listItems: the
 *                                    figure method_off_async is compared
 *                                    with
 */
#include <stdlib.h>

#include <resil/chaos.h>
#include <resil/pipeline.h>

#include "bench.h"

static void
nothing(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
}

static void *
setup_disabled(void)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch;

	cfg.enabled = 0;
	cfg.rate = 0.5;
	cfg.fault_rc = -1;
	cfg.latency_ns = 1000;
	cfg.behaviour_fn = nothing;
	if (resil_chaos_new(&ch, &cfg, NULL) != RESIL_OK)
		abort();
	return ch;
}

static void *
setup_enabled_miss(void)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch;

	cfg.fault_rc = -1;
	cfg.fault.rate = 0;
	if (resil_chaos_new(&ch, &cfg, NULL) != RESIL_OK)
		abort();
	return ch;
}

static void
chaos_free(void *ctx)
{
	resil_chaos_free(ctx);
}

static uint64_t
run_decide(void *ctx, uint64_t iters)
{
	resil_chaos_action act;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_chaos_decide(ctx, i, &act) + 1;
	return n;
}

typedef struct cpb {
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *m;
} cpb;

static int
user_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(8);
	return 0;
}

static resil_verdict
never(void *ctx, const resil_args *args, const resil_failure *f,
    resil_result *out)
{
	(void)ctx;
	(void)args;
	(void)f;
	(void)out;
	return RESIL_FALLBACK_PASS;
}

static void *
setup_pipeline(const char *method)
{
	resil_method_config mc[2] = { { "getStock", RESIL_TYPE_ANY, NULL, 0, 0,
		                          0, RESIL_PRIORITY_UNSET, 0 },
		{ "listItems", RESIL_TYPE_ANY, NULL, 0, 0, 0, RESIL_PRIORITY_UNSET, 0 } };
	resil_chaos_config ccfg = resil_chaos_config_default();
	resil_pipeline_config cfg;
	resil_chaos *root, *own;
	cpb *x = calloc(1, sizeof(*x));

	if (x == NULL || resil_chaos_new(&root, &ccfg, NULL) != RESIL_OK)
		abort();
	ccfg.enabled = 0;
	ccfg.fault_rc = -1;
	if (resil_chaos_new(&own, &ccfg, NULL) != RESIL_OK ||
	    resil_chaos_set_method(root, "getStock", own, NULL) != RESIL_OK)
		abort();
	resil_chaos_free(own);
	resil_manual_clock_init(&x->mc, 1);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.methods = mc;
	cfg.nmethods = 2;
	cfg.chaos = root;
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK)
		abort();
	resil_chaos_free(root); /* the pipeline holds it */
	if (resil_pipeline_add_handler(x->p, never, NULL) != RESIL_OK ||
	    resil_pipeline_method(x->p, method, &x->m) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_method_off(void)
{
	return setup_pipeline("getStock");
}

static void *
setup_other_method(void)
{
	return setup_pipeline("listItems");
}

static void
pipeline_free(void *ctx)
{
	cpb *x = ctx;

	resil_pipeline_free(x->p);
	free(x);
}

static uint64_t
run_pipeline(void *ctx, uint64_t iters)
{
	cpb *x = ctx;
	resil_args args = { resil_method_name(x->m), "12345678", 8 };
	resil_result r;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_pipeline_call_method(
		        x->p, x->m, &args, user_fn, NULL, &r) == RESIL_OK)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

static uint64_t
run_pipeline_async(void *ctx, uint64_t iters)
{
	cpb *x = ctx;
	resil_args args = { resil_method_name(x->m), "12345678", 8 };
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_value v;
	uint64_t i, n = 0, now;
	int rc;

	for (i = 0; i < iters; i++) {
		now = resil_manual_clock_now(&x->mc);
		resil_call_start(&call, x->p, x->m, &args, &r, now, &st);
		while (st.action != RESIL_CALL_DONE) {
			resil_value_init(&v);
			rc = user_fn(NULL, &args, &v);
			resil_call_report(&call, st.attempt, rc, &v, now);
			resil_call_step(&call, now, &st);
		}
		if (r.err == RESIL_OK)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

const resil_bench resil_bench_chaos[] = {
	{ "chaos/disabled", setup_disabled, run_decide, chaos_free },
	{ "chaos/enabled_miss", setup_enabled_miss, run_decide, chaos_free },
	{ "chaos/pipeline/method_off", setup_method_off, run_pipeline,
	    pipeline_free },
	{ "chaos/pipeline/method_off_async", setup_method_off,
	    run_pipeline_async, pipeline_free },
	{ "chaos/pipeline/other_method", setup_other_method, run_pipeline,
	    pipeline_free },
	{ "chaos/pipeline/other_method_async", setup_other_method,
	    run_pipeline_async, pipeline_free },
	{ NULL, NULL, NULL, NULL },
};

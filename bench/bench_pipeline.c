/*
 * The full pipeline on its success path: no mock stage, a fallback chain
 * (a user handler), retry, and a breaker with a count window of 100;
 * without and with cache recording; and with timing (a slow-call
 * threshold and a timeout), which needs the call's duration. Manual clock.
 */
#include <stdlib.h>

#include <resil/pipeline.h>

#include "bench.h"

typedef struct pb {
	resil_manual_clock mc;
	resil_pipeline *p;
} pb;

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
setup(int cached, int timed)
{
	pb *x = calloc(1, sizeof(*x));
	resil_pipeline_config cfg;

	resil_manual_clock_init(&x->mc, 1);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.cache_enabled = cached;
	if (timed) {
		cfg.breaker.slow_threshold_ns = 1000;
		cfg.breaker.slow_rate_pct = 80;
		cfg.timeout_ns = 1000;
	}
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK)
		abort();
	if (resil_pipeline_add_handler(x->p, never, NULL) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_success(void)
{
	return setup(0, 0);
}

static void *
setup_cached(void)
{
	return setup(1, 0);
}

static void *
setup_timed(void)
{
	return setup(0, 1);
}

static void
teardown(void *ctx)
{
	pb *x = ctx;

	resil_pipeline_free(x->p);
	free(x);
}

static uint64_t
run(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_pipeline_call(x->p, &args, user_fn, NULL, &r) ==
		    RESIL_OK)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

const resil_bench resil_bench_pipeline[] = {
	{ "pipeline/success", setup_success, run, teardown },
	{ "pipeline/success_cached", setup_cached, run, teardown },
	{ "pipeline/success_timed", setup_timed, run, teardown },
	{ NULL, NULL, NULL, NULL },
};

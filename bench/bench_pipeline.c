/*
 * The full pipeline on its success path: no mock stage, a fallback chain
 * (a user handler), retry, and a breaker with a count window of 100;
 * without and with cache recording; and with timing (a slow-call
 * threshold and a timeout), which needs the call's duration. Manual clock.
 * pipeline/success passes a method handle to the blocking driver;
 * pipeline/async_success steps the call machine by hand with the same
 * handle; pipeline/success_by_name names the method per call.
 */
#include <stdlib.h>

#include <resil/pipeline.h>

#include "bench.h"

typedef struct pb {
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *m; /* getStock, resolved once */
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
	if (resil_pipeline_add_handler(x->p, never, NULL) != RESIL_OK ||
	    resil_pipeline_method(x->p, "getStock", &x->m) != RESIL_OK)
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

/* The blocking driver with a method handle. */
static uint64_t
run(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
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

/* The blocking driver by name (one method lookup per call). */
static uint64_t
run_by_name(void *ctx, uint64_t iters)
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

/* The machine stepped by hand, as an event loop would: start (RUN),
 * run the attempt, report its answer, step (DONE). */
static uint64_t
run_async(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
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

const resil_bench resil_bench_pipeline[] = {
	{ "pipeline/success", setup_success, run, teardown },
	{ "pipeline/async_success", setup_success, run_async, teardown },
	{ "pipeline/success_by_name", setup_success, run_by_name, teardown },
	{ "pipeline/success_cached", setup_cached, run, teardown },
	{ "pipeline/success_timed", setup_timed, run, teardown },
	{ NULL, NULL, NULL, NULL },
};

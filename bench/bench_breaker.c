/*
 * Breaker hot paths: CLOSED acquire + record success in each window mode,
 * OPEN rejection, HALF_OPEN denial. The breaker runs on a manual clock, so
 * the figures measure resil rather than clock_gettime().
 */
#include <stdlib.h>

#include <resil/breaker.h>
#include <resil/clock.h>

#include "bench.h"

typedef struct bb {
	resil_manual_clock mc;
	resil_breaker *b;
	resil_permit held;
} bb;

static bb *
bb_new(resil_breaker_config *cfg)
{
	bb *x = calloc(1, sizeof(*x));

	resil_manual_clock_init(&x->mc, 1);
	cfg->clock = resil_manual_clock_hook(&x->mc);
	if (resil_breaker_new(&x->b, cfg, NULL) != RESIL_OK)
		abort();
	return x;
}

static void
bb_free(void *ctx)
{
	bb *x = ctx;

	resil_breaker_free(x->b);
	free(x);
}

static void *
setup_consecutive(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();

	cfg.failure_rate_pct = 0;
	cfg.consecutive_failures = 5;
	return bb_new(&cfg);
}

static void *
setup_count100(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();

	cfg.window_size = 100;
	return bb_new(&cfg);
}

static void *
setup_time10s(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();

	cfg.window_type = RESIL_WINDOW_TIME;
	cfg.window_size = 10;
	cfg.bucket_ns = RESIL_NS_PER_SEC;
	return bb_new(&cfg);
}

static void *
setup_open(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();
	bb *x;

	cfg.open_wait_ns = UINT64_MAX / 4;
	x = bb_new(&cfg);
	resil_breaker_transition(x->b, RESIL_BREAKER_OPEN);
	return x;
}

static void *
setup_half_open(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();
	bb *x;

	cfg.permitted_probes = 1;
	x = bb_new(&cfg);
	resil_breaker_transition(x->b, RESIL_BREAKER_HALF_OPEN);
	/* Hold the only probe, so every acquire is denied. */
	if (resil_breaker_acquire(x->b, &x->held) != RESIL_OK)
		abort();
	return x;
}

static uint64_t
run_acquire_record(void *ctx, uint64_t iters)
{
	bb *x = ctx;
	resil_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_breaker_acquire(x->b, &p) == RESIL_OK) {
			resil_breaker_record(x->b, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

static uint64_t
run_rejected(void *ctx, uint64_t iters)
{
	bb *x = ctx;
	resil_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_breaker_acquire(x->b, &p) == RESIL_E_OPEN;
	return n;
}

const resil_bench resil_bench_breaker[] = {
	{ "breaker/closed/consecutive", setup_consecutive, run_acquire_record,
	    bb_free },
	{ "breaker/closed/count100", setup_count100, run_acquire_record,
	    bb_free },
	{ "breaker/closed/time10s", setup_time10s, run_acquire_record,
	    bb_free },
	{ "breaker/open/reject", setup_open, run_rejected, bb_free },
	{ "breaker/half_open/denied", setup_half_open, run_rejected, bb_free },
	{ NULL, NULL, NULL, NULL },
};

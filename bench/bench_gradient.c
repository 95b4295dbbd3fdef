/*
 * Gradient limit hot path.
 *
 *   gradient/sample  resil_gradient_sample() with Netflix's defaults, the
 *                    calls in flight at the limit and RTTs varying by a
 *                    few percent around 10 ms, so every sample runs the
 *                    whole update (no app-limited shortcut).
 *   limit/bulkhead_gradient  resil_bulkhead_try_acquire() and
 *                    resil_bulkhead_complete() on a gradient bulkhead
 *                    (adaptive = RESIL_BULKHEAD_GRADIENT, Netflix's
 *                    defaults), RTTs as above: the gradient's sample and
 *                    the limit's CAS on top of the bulkhead's pair.
 */
#include <stdlib.h>

#include <resil/gradient.h>
#include <resil/limit.h>

#include "bench.h"

static void *
setup_gradient(void)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient *g;

	if (resil_gradient_new(&g, &cfg, NULL) != RESIL_OK)
		abort();
	return g;
}

static void
gradient_free(void *ctx)
{
	resil_gradient_free(ctx);
}

static uint64_t
run_sample(void *ctx, uint64_t iters)
{
	resil_gradient *g = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		uint32_t limit = resil_gradient_get_limit(g);

		n += resil_gradient_sample(
		    g, 10000000 + (i & 255) * 1000, limit, 0);
	}
	return n;
}

static void *
setup_bulkhead_gradient(void)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh;

	cfg.adaptive = RESIL_BULKHEAD_GRADIENT;
	if (resil_bulkhead_new(&bh, &cfg, NULL) != RESIL_OK)
		abort();
	return bh;
}

static void
bulkhead_free(void *ctx)
{
	resil_bulkhead_free(ctx);
}

static uint64_t
run_bulkhead_gradient(void *ctx, uint64_t iters)
{
	resil_bulkhead *bh = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_bulkhead_try_acquire(bh) != RESIL_OK)
			continue;
		n++;
		(void)resil_bulkhead_complete(
		    bh, RESIL_OUTCOME_SUCCESS, 10000000 + (i & 255) * 1000);
	}
	return n;
}

const resil_bench resil_bench_gradient[] = {
	{ "gradient/sample", setup_gradient, run_sample, gradient_free },
	{ "limit/bulkhead_gradient", setup_bulkhead_gradient,
	    run_bulkhead_gradient, bulkhead_free },
	{ NULL, NULL, NULL, NULL },
};

/*
 * Gradient limit hot path.
 *
 *   gradient/sample  resil_gradient_sample() with Netflix's defaults, the
 *                    calls in flight at the limit and RTTs varying by a
 *                    few percent around 10 ms, so every sample runs the
 *                    whole update (no app-limited shortcut).
 */
#include <stdlib.h>

#include <resil/gradient.h>

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

const resil_bench resil_bench_gradient[] = {
	{ "gradient/sample", setup_gradient, run_sample, gradient_free },
	{ NULL, NULL, NULL, NULL },
};

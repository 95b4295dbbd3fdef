/*
 * Adaptive client throttle hot path.
 *
 *   throttle/admit  resil_throttle_admit() and resil_throttle_report() of
 *                   an accepted call, with the defaults (k 2, 12 buckets)
 *                   on a manual clock: every call is accepted, so p stays
 *                   0 and no draw is made (the steady state of a healthy
 *                   backend). Every bucket of the window is in use, as
 *                   after a window of traffic: admit reads them all.
 */
#include <stdlib.h>

#include <resil/clock.h>
#include <resil/throttle.h>

#include "bench.h"

typedef struct tb {
	resil_manual_clock mc;
	resil_throttle *t;
} tb;

static void *
setup_admit(void)
{
	tb *x = calloc(1, sizeof(*x));
	resil_throttle_config cfg = resil_throttle_config_default();
	uint32_t i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_throttle_new(&x->t, &cfg, NULL) != RESIL_OK)
		abort();
	/* Every bucket of the window in use, as in a service that has run
	 * for a window: admit scans them all. */
	for (i = 0; i < cfg.buckets; i++) {
		if (i > 0)
			resil_manual_clock_advance(
			    &x->mc, cfg.window_ns / cfg.buckets);
		if (resil_throttle_admit(x->t) != RESIL_OK ||
		    resil_throttle_report(x->t, RESIL_THROTTLE_ACCEPTED) !=
		        RESIL_OK)
			abort();
	}
	return x;
}

static uint64_t
run_admit(void *ctx, uint64_t iters)
{
	tb *x = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_throttle_admit(x->t) == RESIL_OK) {
			(void)resil_throttle_report(
			    x->t, RESIL_THROTTLE_ACCEPTED);
			n++;
		}
	}
	return n;
}

static void
tb_free(void *ctx)
{
	tb *x = ctx;

	resil_throttle_free(x->t);
	free(x);
}

const resil_bench resil_bench_throttle[] = {
	{ "throttle/admit", setup_admit, run_admit, tb_free },
	{ NULL, NULL, NULL, NULL },
};

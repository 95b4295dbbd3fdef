/*
 * Fleet hot path: CLOSED acquire + record success through a fleet handle
 * whose sync step is not running, to compare with
 * breaker/closed/count100 (the same local breaker). With
 * RESIL_FLEET_BENCH_PORT set to the port of a redis-server on 127.0.0.1,
 * setup joins the fleet with one sync (the fleet is CLOSED, not local);
 * without it the handle finds nothing on port 1 and runs in local mode,
 * which takes the same branch of resil_fleet_acquire.
 */
#include <stdio.h>
#include <stdlib.h>

#include <resil/clock.h>
#include <resil/fleet.h>

#include "bench.h"

typedef struct bf {
	resil_manual_clock mc;
	resil_fleet *f;
} bf;

static void *
setup_closed(void)
{
	resil_fleet_config cfg = resil_fleet_config_default();
	const char *port = getenv("RESIL_FLEET_BENCH_PORT");
	bf *x = calloc(1, sizeof(*x));

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.name = "bench";
	cfg.instance = "bench";
	cfg.port = port != NULL ? (uint32_t)strtoul(port, NULL, 10) : 1;
	cfg.breaker.window_size = 100;
	cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
	if (resil_fleet_new(&x->f, &cfg, NULL) != RESIL_OK)
		abort();
	if (port != NULL && resil_fleet_sync(x->f, 1) != RESIL_OK) {
		fprintf(stderr, "bench_fleet: no redis on port %s\n", port);
		abort();
	}
	return x;
}

static void
teardown(void *ctx)
{
	bf *x = ctx;

	resil_fleet_free(x->f);
	free(x);
}

static uint64_t
run_acquire_record(void *ctx, uint64_t iters)
{
	bf *x = ctx;
	resil_fleet_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_fleet_acquire(x->f, &p) == RESIL_OK) {
			resil_fleet_record(x->f, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

const resil_bench resil_bench_fleet[] = {
	{ "fleet/closed_success", setup_closed, run_acquire_record, teardown },
	{ NULL, NULL, NULL, NULL },
};

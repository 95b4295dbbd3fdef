/*
 * A breaker in shared memory (resil/shm.h) on its hot path: the same
 * CLOSED acquire + record success as breaker/closed/count100, its state in
 * a region. Compare with breaker/closed/count100 of the same run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/shm.h>

#include "bench.h"

typedef struct sb {
	resil_manual_clock mc;
	resil_shm *shm;
	resil_breaker *b;
	char region[64];
} sb;

static void *
setup_shm_count100(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();
	sb *x = calloc(1, sizeof(*x));

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.window_size = 100;
	snprintf(x->region, sizeof(x->region), "bench-%ld", (long)getpid());
	(void)resil_shm_unlink(x->region, NULL);
	if (resil_shm_open(&x->shm, x->region, NULL, NULL) != RESIL_OK ||
	    resil_shm_breaker(x->shm, "count100", &cfg, &x->b, NULL) !=
	        RESIL_OK)
		abort();
	return x;
}

static uint64_t
run_shm(void *ctx, uint64_t iters)
{
	sb *x = ctx;
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

static void
teardown_shm(void *ctx)
{
	sb *x = ctx;

	resil_breaker_free(x->b);
	resil_shm_close(x->shm);
	(void)resil_shm_unlink(x->region, NULL);
	free(x);
}

const resil_bench resil_bench_shm[] = {
	{ "shm/closed_success", setup_shm_count100, run_shm, teardown_shm },
	{ NULL, NULL, NULL, NULL },
};

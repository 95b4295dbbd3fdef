/*
 * A breaker in shared memory (resil/shm.h) on its hot path: the same
 * CLOSED acquire + record success as breaker/closed/count100, its state in
 * a region. Compare with breaker/closed/count100 of the same run.
 *
 * shm/ratelimit, shm/bulkhead: limit/rate and limit/bulkhead (the same
 * configurations and loops) with their state in a region. The bulkhead's
 * acquire and release are each a CAS on the region's count word and one
 * on this process's line (docs/shared.md), where the in-process one has
 * the first only; until issue 39 an acquire summed the lines of all 64
 * process slots (663 instructions a pair, now 139 against 72).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/limit.h>
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

typedef struct sl {
	resil_manual_clock mc;
	resil_shm *shm;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
	char region[64];
} sl;

static sl *
sl_open(void)
{
	sl *x = calloc(1, sizeof(*x));

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	snprintf(x->region, sizeof(x->region), "bench-l-%ld", (long)getpid());
	(void)resil_shm_unlink(x->region, NULL);
	if (resil_shm_open(&x->shm, x->region, NULL, NULL) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_shm_rate(void)
{
	resil_ratelimit_config cfg = resil_ratelimit_config_default();
	sl *x = sl_open();

	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.rate = 1;
	cfg.period_ns = 1;
	cfg.burst = UINT32_C(1) << 20;
	if (resil_shm_ratelimit(x->shm, "rate", &cfg, &x->rl, NULL) !=
	    RESIL_OK)
		abort();
	return x;
}

static void *
setup_shm_bulkhead(void)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	sl *x = sl_open();

	cfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_shm_bulkhead(x->shm, "bulkhead", &cfg, &x->bh, NULL) !=
	    RESIL_OK)
		abort();
	return x;
}

static uint64_t
run_shm_rate(void *ctx, uint64_t iters)
{
	sl *x = ctx;
	uint64_t i, n = 0;

	resil_manual_clock_advance(&x->mc, iters);
	for (i = 0; i < iters; i++)
		n += resil_ratelimit_try_acquire(x->rl, 1, NULL) == RESIL_OK;
	return n;
}

static uint64_t
run_shm_bulkhead(void *ctx, uint64_t iters)
{
	sl *x = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		if (resil_bulkhead_try_acquire(x->bh) == RESIL_OK)
			n += resil_bulkhead_release(x->bh) == RESIL_OK;
	return n;
}

static void
teardown_sl(void *ctx)
{
	sl *x = ctx;

	resil_ratelimit_free(x->rl);
	resil_bulkhead_free(x->bh);
	resil_shm_close(x->shm);
	(void)resil_shm_unlink(x->region, NULL);
	free(x);
}

const resil_bench resil_bench_shm[] = {
	{ "shm/closed_success", setup_shm_count100, run_shm, teardown_shm },
	{ "shm/ratelimit", setup_shm_rate, run_shm_rate, teardown_sl },
	{ "shm/bulkhead", setup_shm_bulkhead, run_shm_bulkhead, teardown_sl },
	{ NULL, NULL, NULL, NULL },
};

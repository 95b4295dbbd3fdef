/*
 * Rate limiter and bulkhead hot paths, on a manual clock.
 *
 *   limit/rate      resil_ratelimit_try_acquire() of one permit, always
 *                   granted: 1 permit per tick, a burst of 2^20, and each
 *                   run() first advances the clock by its iteration count,
 *                   so the permits taken never outrun the clock by more
 *                   than the burst (one clock advance per batch, not per
 *                   call, so the row measures the limiter).
 *   limit/bulkhead  resil_bulkhead_try_acquire() + resil_bulkhead_release()
 *                   on a fixed bulkhead of 25: never full with the one or
 *                   two threads of a run.
 *   limit/bulkhead_wait/uncontended
 *                   resil_bulkhead_acquire_wait() + resil_bulkhead_release()
 *                   on a bulkhead of 25 that waits (max_wait 10 ms, queue
 *                   16, FIFO): never full, so never queued (issue 42).
 *   limit/rate_classed
 *                   resil_ratelimit_try_acquire_prio() of one permit as a
 *                   sheddable call, always granted, on the limit/rate
 *                   limiter with reservations (reserve_critical 1024,
 *                   reserve_default 1024 of the burst; issue 42).
 *   limit/rate_batched, limit/bulkhead_batched
 *                   the same with the opt-in per-thread batches
 *                   (ratelimit.batch 64, bulkhead.batch 8): a thread takes
 *                   from its own stripe and touches the shared word once
 *                   per batch.
 */
#include <stdlib.h>

#include <resil/clock.h>
#include <resil/limit.h>

#include "bench.h"

typedef struct lb {
	resil_manual_clock mc;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
} lb;

static void *
setup_rate_with(uint32_t batch)
{
	lb *x = calloc(1, sizeof(*x));
	resil_ratelimit_config cfg = resil_ratelimit_config_default();

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.rate = 1;
	cfg.period_ns = 1;
	cfg.burst = UINT32_C(1) << 20;
	cfg.batch = batch;
	if (resil_ratelimit_new(&x->rl, &cfg, NULL) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_rate(void)
{
	return setup_rate_with(0);
}

static void *
setup_rate_classed(void)
{
	lb *x = calloc(1, sizeof(*x));
	resil_ratelimit_config cfg = resil_ratelimit_config_default();

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.rate = 1;
	cfg.period_ns = 1;
	cfg.burst = UINT32_C(1) << 20;
	cfg.reserve_critical = 1024;
	cfg.reserve_default = 1024;
	if (resil_ratelimit_new(&x->rl, &cfg, NULL) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_rate_batched(void)
{
	return setup_rate_with(64);
}

static void *
setup_bulkhead_with(uint32_t batch)
{
	lb *x = calloc(1, sizeof(*x));
	resil_bulkhead_config cfg = resil_bulkhead_config_default();

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.batch = batch;
	if (resil_bulkhead_new(&x->bh, &cfg, NULL) != RESIL_OK)
		abort();
	return x;
}

static void *
setup_bulkhead_wait(void)
{
	lb *x = calloc(1, sizeof(*x));
	resil_bulkhead_config cfg = resil_bulkhead_config_default();

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.max_wait_ns = 10 * RESIL_NS_PER_MS;
	cfg.queue = 16;
	if (resil_bulkhead_new(&x->bh, &cfg, NULL) != RESIL_OK)
		abort();
	return x;
}

static uint64_t
run_bulkhead_wait(void *ctx, uint64_t iters)
{
	lb *x = ctx;
	uint64_t i, ok = 0;

	for (i = 0; i < iters; i++) {
		if (resil_bulkhead_acquire_wait(
		        x->bh, RESIL_PRIORITY_UNSET, NULL) == RESIL_OK) {
			ok++;
			(void)resil_bulkhead_release(x->bh);
		}
	}
	return ok;
}

static void *
setup_bulkhead(void)
{
	return setup_bulkhead_with(0);
}

static void *
setup_bulkhead_batched(void)
{
	return setup_bulkhead_with(8);
}

static void
lb_free(void *ctx)
{
	lb *x = ctx;

	resil_ratelimit_free(x->rl);
	resil_bulkhead_free(x->bh);
	free(x);
}

static uint64_t
run_rate(void *ctx, uint64_t iters)
{
	lb *x = ctx;
	uint64_t i, n = 0;

	resil_manual_clock_advance(&x->mc, iters);
	for (i = 0; i < iters; i++)
		n += resil_ratelimit_try_acquire(x->rl, 1, NULL) == RESIL_OK;
	return n;
}

static uint64_t
run_rate_classed(void *ctx, uint64_t iters)
{
	lb *x = ctx;
	uint64_t i, n = 0;

	resil_manual_clock_advance(&x->mc, iters);
	for (i = 0; i < iters; i++)
		n += resil_ratelimit_try_acquire_prio(
		         x->rl, RESIL_PRIORITY_SHEDDABLE, 1, NULL) == RESIL_OK;
	return n;
}

static uint64_t
run_bulkhead(void *ctx, uint64_t iters)
{
	lb *x = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		if (resil_bulkhead_try_acquire(x->bh) == RESIL_OK)
			n += resil_bulkhead_release(x->bh) == RESIL_OK;
	return n;
}

const resil_bench resil_bench_limit[] = {
	{ "limit/rate", setup_rate, run_rate, lb_free },
	{ "limit/bulkhead", setup_bulkhead, run_bulkhead, lb_free },
	{ "limit/bulkhead_wait/uncontended", setup_bulkhead_wait,
	    run_bulkhead_wait, lb_free },
	{ "limit/rate_batched", setup_rate_batched, run_rate, lb_free },
	{ "limit/rate_classed", setup_rate_classed, run_rate_classed,
	    lb_free },
	{ "limit/bulkhead_batched", setup_bulkhead_batched, run_bulkhead,
	    lb_free },
	{ NULL, NULL, NULL, NULL },
};

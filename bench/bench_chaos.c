/*
 * Chaos decision hot paths.
 *
 *   chaos/disabled     resil_chaos_decide() of a chaos whose master
 *                      switch is off (every strategy configured): one
 *                      load and one test of the flag word.
 *   chaos/enabled_miss the fault strategy on at rate 0: past the flag
 *                      word, one draw from the chaos's own generator,
 *                      no injection (the common case of a low rate).
 */
#include <stdlib.h>

#include <resil/chaos.h>

#include "bench.h"

static void
nothing(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
}

static void *
setup_disabled(void)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch;

	cfg.enabled = 0;
	cfg.rate = 0.5;
	cfg.fault_rc = -1;
	cfg.latency_ns = 1000;
	cfg.behaviour_fn = nothing;
	if (resil_chaos_new(&ch, &cfg, NULL) != RESIL_OK)
		abort();
	return ch;
}

static void *
setup_enabled_miss(void)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch;

	cfg.fault_rc = -1;
	cfg.fault.rate = 0;
	if (resil_chaos_new(&ch, &cfg, NULL) != RESIL_OK)
		abort();
	return ch;
}

static void
chaos_free(void *ctx)
{
	resil_chaos_free(ctx);
}

static uint64_t
run_decide(void *ctx, uint64_t iters)
{
	resil_chaos_action act;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_chaos_decide(ctx, i, &act) + 1;
	return n;
}

const resil_bench resil_bench_chaos[] = {
	{ "chaos/disabled", setup_disabled, run_decide, chaos_free },
	{ "chaos/enabled_miss", setup_enabled_miss, run_decide, chaos_free },
	{ NULL, NULL, NULL, NULL },
};

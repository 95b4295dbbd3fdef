/*
 * Retry hot path: the first attempt succeeds, so no wait, no draw and no
 * budget spend; the policy runs on a manual clock.
 */
#include <stdlib.h>

#include <resil/clock.h>
#include <resil/retry.h>

#include "bench.h"

typedef struct rb {
	resil_manual_clock mc;
	resil_retry *r;
} rb;

static int
ok_attempt(void *ctx, resil_retry_attempt *at, void *out)
{
	(void)ctx;
	(void)at;
	(void)out;
	return 0;
}

static void *
setup_first_ok(void)
{
	rb *x = calloc(1, sizeof(*x));
	resil_retry_config cfg = resil_retry_config_default();

	resil_manual_clock_init(&x->mc, 1);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.max_attempts = 3;
	if (resil_retry_new(&x->r, &cfg, NULL) != RESIL_OK)
		abort();
	return x;
}

static void
teardown(void *ctx)
{
	rb *x = ctx;

	resil_retry_free(x->r);
	free(x);
}

static uint64_t
run_first_ok(void *ctx, uint64_t iters)
{
	rb *x = ctx;
	resil_retry_result res;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		if (resil_retry_call(x->r, ok_attempt, NULL, NULL, &res) ==
		    RESIL_OK)
			n += res.attempts;
	return n;
}

const resil_bench resil_bench_retry[] = {
	{ "retry/first_ok", setup_first_ok, run_first_ok, teardown },
	{ NULL, NULL, NULL, NULL },
};

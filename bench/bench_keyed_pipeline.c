/*
 * Issue 41: a keyed pipeline's call (resil_pipeline_invoke_ex through the
 * gate: the key drawn, the key's breaker acquired and recorded around the
 * ordinary driver), for a single source and for a composite (its parts
 * joined on the stack): keyed/pipeline/single (arguments[0]) and
 * keyed/pipeline/composite (method+arguments[0]). One pipeline, no selector, manual
 * clock, 1024 keys (argument 0 "key-0000"..), every call a success,
 * each key's window full of successes before the row is measured (as
 * keyed/breaker/closed/1000's: h4/kgate; before, the windows filled
 * while measured).
 * pipeline/invoke: the same call on the same pipeline without the
 * family (no gate), so that the gate's own cost is seen (issue 41,
 * h4/kgate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/pipeline.h>
#include <resil/pipeline_keyed.h>

#include "bench.h"

#define NKEYS 1024u

typedef struct kp {
	resil_manual_clock mc;
	resil_pipeline *p;
	char keys[NKEYS][16];
} kp;

static int
ok_fn(void *ctx, const resil_pick *ep, const resil_args *args,
    resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	(void)out;
	return 0;
}

/* The steady state (as keyed/breaker/closed/1000's): every key's window
 * of 100 full of successes before the row is measured. */
static void
warm(kp *x)
{
	unsigned i;

	for (i = 0; i < NKEYS * 100u; i++) {
		resil_invocation inv;
		const char *argv[1];
		resil_result r;

		argv[0] = x->keys[i % NKEYS];
		resil_invocation_init(&inv, "get");
		inv.arguments = argv;
		inv.narguments = 1;
		(void)resil_pipeline_invoke_ex(x->p, NULL, &inv, ok_fn, NULL, &r);
		resil_result_free(&r);
	}
}

static void *
setup_spec(const char *spec)
{
	kp *x = calloc(1, sizeof(*x));
	resil_pipeline_config cfg;
	resil_keyed_config kc;
	unsigned i;

	if (x == NULL)
		return NULL;
	resil_manual_clock_init(&x->mc, 1);
	resil_pipeline_config_init(&cfg);
	cfg.service = "bench";
	cfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK) {
		free(x);
		return NULL;
	}
	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_BREAKER;
	kc.max_keys = 4 * NKEYS;
	kc.breaker.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_set_keyed(x->p, spec, &kc, NULL) != RESIL_OK) {
		resil_pipeline_free(x->p);
		free(x);
		return NULL;
	}
	for (i = 0; i < NKEYS; i++)
		(void)snprintf(x->keys[i], sizeof(x->keys[i]), "key-%04u", i);
	warm(x);
	return x;
}

/* pipeline/invoke: the same pipeline and call without a family (no
 * gate): what the keyed rows pay over the gate's own cost. */
static void *
setup_plain(void)
{
	kp *x = calloc(1, sizeof(*x));
	resil_pipeline_config cfg;
	unsigned i;

	if (x == NULL)
		return NULL;
	resil_manual_clock_init(&x->mc, 1);
	resil_pipeline_config_init(&cfg);
	cfg.service = "bench";
	cfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK) {
		free(x);
		return NULL;
	}
	for (i = 0; i < NKEYS; i++)
		(void)snprintf(x->keys[i], sizeof(x->keys[i]), "key-%04u", i);
	warm(x);
	return x;
}

static void *
setup_single(void)
{
	return setup_spec("arguments[0]");
}

static void *
setup_composite(void)
{
	return setup_spec("method+arguments[0]");
}

static uint64_t
run(void *ctx, uint64_t iters)
{
	kp *x = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		resil_invocation inv;
		const char *argv[1];
		resil_result r;

		argv[0] = x->keys[i % NKEYS];
		resil_invocation_init(&inv, "get");
		inv.arguments = argv;
		inv.narguments = 1;
		if (resil_pipeline_invoke_ex(x->p, NULL, &inv, ok_fn, NULL,
		        &r) == RESIL_OK)
			n++;
		resil_result_free(&r);
	}
	return n;
}

static void
kp_free(void *ctx)
{
	kp *x = ctx;

	if (x == NULL)
		return;
	resil_pipeline_free(x->p);
	free(x);
}

const resil_bench resil_bench_keyed_pipeline[] = {
	{ "keyed/pipeline/single", setup_single, run, kp_free },
	{ "keyed/pipeline/composite", setup_composite, run,
	    kp_free },
	{ "pipeline/invoke", setup_plain, run, kp_free },
	{ NULL, NULL, NULL, NULL },
};

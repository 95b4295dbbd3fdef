/*
 * Health checker hot paths, 100 targets.
 *
 *   health/next         resil_health_next() when nothing is due: the
 *                       answer an event loop gets each time it wakes for
 *                       another reason (WAIT until the next probe).
 *   health/probe_cycle  one probe's whole life: next() answers PROBE,
 *                       report() records OK and reschedules it (the
 *                       heap's sift down and back); time moves one
 *                       interval/100 per probe, so every call has one due.
 */
#include <stdio.h>
#include <stdlib.h>

#include <resil/health.h>

#include "bench.h"

#define TARGETS 100
#define INTERVAL 1000000

typedef struct hb {
	resil_health *hc;
	uint64_t now; /* atomic: each probe takes the next slice */
} hb;

static void *
setup_health(void)
{
	hb *x = calloc(1, sizeof(*x));
	resil_health_config cfg = resil_health_config_default();
	char addr[32];
	int i;

	if (x == NULL)
		abort();
	cfg.interval_ns = INTERVAL;
	cfg.timeout_ns = INTERVAL / 2;
	cfg.initial_healthy = 1;
	if (resil_health_new(&x->hc, &cfg, NULL) != RESIL_OK)
		abort();
	for (i = 0; i < TARGETS; i++) {
		snprintf(addr, sizeof(addr), "10.0.%d.%d:20880", i / 250,
		    i % 250);
		/* First due from INTERVAL on, one every interval/100. */
		if (resil_health_add(x->hc, addr, NULL,
		        INTERVAL + (uint64_t)i * (INTERVAL / TARGETS),
		        NULL) != RESIL_OK)
			abort();
	}
	x->now = INTERVAL - INTERVAL / TARGETS;
	return x;
}

static void
hb_free(void *ctx)
{
	hb *x = ctx;

	resil_health_free(x->hc);
	free(x);
}

static uint64_t
run_next(void *ctx, uint64_t iters)
{
	hb *x = ctx;
	resil_health_step st;
	uint64_t i, n = 0;

	/* Every target is first due at INTERVAL or later: at 0 none is. */
	for (i = 0; i < iters; i++) {
		if (resil_health_next(x->hc, 0, &st) == RESIL_OK)
			n += st.action == RESIL_HEALTH_WAIT;
	}
	return n;
}

static uint64_t
run_cycle(void *ctx, uint64_t iters)
{
	hb *x = ctx;
	resil_health_step st;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		uint64_t now = __atomic_fetch_add(&x->now, INTERVAL / TARGETS,
		                   __ATOMIC_SEQ_CST) +
		    INTERVAL / TARGETS;

		if (resil_health_next(x->hc, now, &st) != RESIL_OK ||
		    st.action != RESIL_HEALTH_PROBE)
			continue;
		n += resil_health_report(x->hc, st.probe, RESIL_PROBE_OK,
		         now) == RESIL_OK;
	}
	return n;
}

const resil_bench resil_bench_health[] = {
	{ "health/next", setup_health, run_next, hb_free },
	{ "health/probe_cycle", setup_health, run_cycle, hb_free },
	{ NULL, NULL, NULL, NULL },
};

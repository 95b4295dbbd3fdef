/*
 * Success-rate and failure-percentage detection, one interval.
 *
 *   outlier/success_rate/100  resil_outlier_rate_evaluate() over 100
 *                             endpoints with Envoy's defaults: 95 at
 *                             99 % success, 5 at 50 % (outliers; the 10 %
 *                             share lets all 5 go, the failure
 *                             percentage is detected but not enforced),
 *                             200 requests each. One row iteration is
 *                             one interval's computation.
 *   outlier/pick_cycle/off    route, pick (random) and report a success
 *   outlier/pick_cycle/on     over a directory of 4 endpoints, without
 *                             and with the interval detections
 *                             (outlier_rate): the cost of counting each
 *                             outcome and of the interval check on the
 *                             route (the clock does not move: no
 *                             interval ends).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/outlier.h>
#include <resil/selector.h>

#include "bench.h"

#define HOSTS 100

typedef struct ob {
	resil_outlier_rate_config cfg;
	resil_outlier_host hosts[HOSTS];
} ob;

static void *
setup_sr(void)
{
	ob *x = calloc(1, sizeof(*x));
	int i;

	if (x == NULL)
		abort();
	resil_outlier_rate_config_init(&x->cfg);
	for (i = 0; i < HOSTS; i++) {
		x->hosts[i].requests = 200;
		x->hosts[i].successes = i % 20 == 7 ? 100 : 198;
	}
	return x;
}

static void
ob_free(void *ctx)
{
	free(ctx);
}

static uint64_t
run_sr(void *ctx, uint64_t iters)
{
	ob *x = ctx;
	resil_outlier_verdict v[HOSTS]; /* per thread */
	resil_outlier_summary s;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_outlier_rate_evaluate(&x->cfg, x->hosts, HOSTS, NULL,
		        v, &s, NULL) == RESIL_OK)
			n += s.ejected;
	}
	return n;
}

typedef struct pc {
	resil_manual_clock mc;
	resil_rng rng;
	resil_random rnd;
	resil_outlier_rate_config rate;
	resil_directory *d;
	resil_selector *sel;
	uint64_t gen;
} pc;

static uint64_t pc_generation; /* atomic */

static _Thread_local struct {
	uint64_t gen;
	resil_candidates *c;
} pc_mine;

static void *
setup_pick(int on)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_endpoint_spec specs[4];
	static char addrs[4][32];
	pc *x = calloc(1, sizeof(*x));
	int i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	resil_rng_seed(&x->rng, 1);
	x->rnd = resil_rng_hook(&x->rng);
	resil_outlier_rate_config_init(&x->rate);
	dc.clock = resil_manual_clock_hook(&x->mc);
	dc.outlier_rate = on ? &x->rate : NULL;
	sc.random = &x->rnd;
	if (resil_directory_new(&x->d, &dc, NULL) != RESIL_OK ||
	    resil_selector_new(&x->sel, x->d, &sc, NULL) != RESIL_OK)
		abort();
	for (i = 0; i < 4; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "10.0.0.%d:20880", i);
		specs[i] = resil_endpoint_spec_default(addrs[i]);
	}
	if (resil_directory_push(x->d, specs, 4, NULL) != RESIL_OK)
		abort();
	x->gen = __atomic_add_fetch(&pc_generation, 1, __ATOMIC_SEQ_CST);
	return x;
}

static void *
setup_pick_off(void)
{
	return setup_pick(0);
}

static void *
setup_pick_on(void)
{
	return setup_pick(1);
}

static void
pick_free(void *ctx)
{
	pc *x = ctx;

	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	free(x);
}

static uint64_t
run_pick(void *ctx, uint64_t iters)
{
	pc *x = ctx;
	resil_request req;
	resil_pick p;
	uint64_t i, n = 0;

	/* The thread's candidate set, made once per run (a leak of one set
	 * per thread and run, in a benchmark). */
	if (pc_mine.gen != x->gen) {
		pc_mine.gen = x->gen;
		if (resil_candidates_new(&pc_mine.c, x->sel) != RESIL_OK)
			abort();
	}
	memset(&req, 0, sizeof(req));
	req.method = "get";
	for (i = 0; i < iters; i++) {
		if (resil_selector_route(x->sel, &req, pc_mine.c, NULL) !=
		        RESIL_OK ||
		    resil_selector_pick(x->sel, pc_mine.c, &req, NULL, 0, &p,
		        NULL) != RESIL_OK)
			abort();
		n += (uint64_t)(unsigned char)p.address[8];
		resil_selector_report_duration(
		    x->sel, &p, RESIL_OUTCOME_SUCCESS, 1);
	}
	return n;
}

const resil_bench resil_bench_outlier[] = {
	{ "outlier/success_rate/100", setup_sr, run_sr, ob_free },
	{ "outlier/pick_cycle/off", setup_pick_off, run_pick, pick_free },
	{ "outlier/pick_cycle/on", setup_pick_on, run_pick, pick_free },
	{ NULL, NULL, NULL, NULL },
};

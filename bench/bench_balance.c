/*
 * balance/<lb>/<n>: one pick and its report through a selector over n
 * endpoints (weights 1..5), on a candidate set routed once per thread, with
 * the manual clock and the selector's own generator, seeded (a candidate
 * set draws from its block of it with no atomic; a random hook given in
 * the config is called for every draw instead). directory/push/1024: one
 * whole-list push of 1024 endpoints (alternating lists that share half their
 * addresses, so every push keeps 512, removes 512 and adds 512).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/selector.h>

#include "bench.h"

#define SLOTS 8

typedef struct bctx {
	resil_manual_clock mc;
	resil_directory *d;
	resil_selector *sel;
	resil_candidates *c[SLOTS];
	uint64_t gen;
	unsigned claimed; /* atomic */
	resil_request req;
	const char *args[1];
	char (*addrs)[32];
	resil_endpoint_spec *specs;
	size_t n;
	int flip;
} bctx;

static uint64_t generation; /* atomic: tells one run's ctx from the next */

static _Thread_local struct {
	uint64_t gen;
	resil_candidates *c;
} mine;

static bctx *
make(resil_lb_kind kind, size_t n, int route)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	bctx *b = calloc(1, sizeof(*b));
	size_t i;

	if (b == NULL)
		abort();
	resil_manual_clock_init(&b->mc, 1);
	dc.clock = resil_manual_clock_hook(&b->mc);
	sc.balance.kind = kind;
	sc.seed = 1;
	if (resil_directory_new(&b->d, &dc, NULL) != RESIL_OK ||
	    resil_selector_new(&b->sel, b->d, &sc, NULL) != RESIL_OK)
		abort();
	b->n = n;
	b->addrs = calloc(2 * n, sizeof(*b->addrs));
	b->specs = calloc(2 * n, sizeof(*b->specs));
	if (b->addrs == NULL || b->specs == NULL)
		abort();
	for (i = 0; i < 2 * n; i++) {
		snprintf(b->addrs[i], sizeof(b->addrs[i]),
		    "10.%zu.%zu.%zu:20880", i >> 16, (i >> 8) & 255, i & 255);
		b->specs[i] = resil_endpoint_spec_default(b->addrs[i]);
		b->specs[i].weight = (int32_t)(1 + i % 5);
	}
	if (resil_directory_push(b->d, b->specs, n, NULL) != RESIL_OK)
		abort();
	b->req.method = "get";
	b->req.args = b->args;
	b->req.nargs = 1;
	b->args[0] = "user-42";
	b->gen = __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
	/* Route each thread's set once and pick once from it, so that the
	 * method's balancer, its round-robin counters and its hash ring are
	 * built before the clock starts. */
	for (i = 0; route && i < SLOTS; i++) {
		resil_pick p;
		if (resil_candidates_new(&b->c[i], b->sel) != RESIL_OK ||
		    resil_selector_route(b->sel, &b->req, b->c[i], NULL) !=
		        RESIL_OK ||
		    resil_selector_pick(b->sel, b->c[i], &b->req, NULL, 0, &p,
		        NULL) != RESIL_OK)
			abort();
		resil_selector_report_duration(
		    b->sel, &p, RESIL_OUTCOME_SUCCESS, 1);
	}
	return b;
}

static void
teardown(void *ctx)
{
	bctx *b = ctx;
	size_t i;

	for (i = 0; i < SLOTS; i++)
		resil_candidates_free(b->c[i]);
	resil_selector_free(b->sel);
	resil_directory_free(b->d);
	free(b->addrs);
	free(b->specs);
	free(b);
}

static uint64_t
run_pick(void *ctx, uint64_t iters)
{
	bctx *b = ctx;
	uint64_t i, n = 0;

	/* A candidate set belongs to one thread: claim one per thread. */
	if (mine.gen != b->gen) {
		unsigned k =
		    __atomic_fetch_add(&b->claimed, 1, __ATOMIC_SEQ_CST);
		mine.gen = b->gen;
		mine.c = b->c[k % SLOTS];
	}
	for (i = 0; i < iters; i++) {
		resil_pick p;
		if (resil_selector_pick(b->sel, mine.c, &b->req, NULL, 0, &p,
		        NULL) != RESIL_OK)
			abort();
		n += p.id;
		resil_selector_report_duration(
		    b->sel, &p, RESIL_OUTCOME_SUCCESS, 1 + (i & 63));
	}
	return n;
}

static uint64_t
run_push(void *ctx, uint64_t iters)
{
	bctx *b = ctx;
	uint64_t i;

	for (i = 0; i < iters; i++) {
		/* Alternate between [0, n) and [n/2, 3n/2). */
		b->flip ^= 1;
		if (resil_directory_push(b->d,
		        b->specs + (b->flip ? b->n / 2 : 0), b->n,
		        NULL) != RESIL_OK)
			abort();
	}
	return resil_directory_version(b->d);
}

#define SETUP(lb, kind, n)                  \
	static void *setup_##lb##_##n(void) \
	{                                   \
		return make(kind, n, 1);    \
	}
#define LB(lb, kind) \
	SETUP(lb, kind, 4) SETUP(lb, kind, 64) SETUP(lb, kind, 1024)
LB(random, RESIL_LB_RANDOM)
LB(roundrobin, RESIL_LB_ROUNDROBIN)
LB(leastactive, RESIL_LB_LEASTACTIVE)
LB(p2c, RESIL_LB_P2C)
LB(peakewma, RESIL_LB_PEAKEWMA)
LB(hash, RESIL_LB_HASH)
LB(shortest, RESIL_LB_SHORTEST)

static void *
setup_push(void)
{
	return make(RESIL_LB_RANDOM, 1024, 0);
}

#define ROW(lb, n)                                                          \
	{                                                                   \
		"balance/" #lb "/" #n, setup_##lb##_##n, run_pick, teardown \
	}
#define ROWS(lb) ROW(lb, 4), ROW(lb, 64), ROW(lb, 1024)

const resil_bench resil_bench_balance[] = {
	ROWS(random),
	ROWS(roundrobin),
	ROWS(leastactive),
	ROWS(p2c),
	ROWS(peakewma),
	ROWS(hash),
	ROWS(shortest),
	{ "directory/push/1024", setup_push, run_push, teardown },
	{ NULL, NULL, NULL, NULL },
};

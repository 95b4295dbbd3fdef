/*
 * inventory: the demo of the project's seed (a breaker and an age-limited
 * cache in front of a stock service) rebuilt on a resil pipeline with the
 * manual clock. It prints exactly the eight lines of the seed.
 *
 * The stock service answers 8 when it is up. Two consecutive failures
 * open the breaker for 5 seconds; a probe is admitted exactly when the
 * wait ends. After a failure, or while the breaker rejects, the cache
 * answers with the last live value if it is at most 10 seconds old;
 * otherwise the stock is unavailable (None), never 0. The seed counted
 * whole time units: here a unit is a second of the manual clock, whose
 * ticks are nanoseconds like every resil clock's.
 */
#include <stdio.h>

#include <resil/pipeline.h>

typedef struct stock_service {
	int up;    /* the scripted behaviour at this moment */
	int calls; /* how many times the real service was called */
} stock_service;

static int
get_stock(void *ctx, const resil_args *args, resil_value *out)
{
	stock_service *svc = ctx;

	(void)args;
	svc->calls++;
	if (!svc->up)
		return -1; /* timeout, connection refused, ... */
	*out = resil_value_int(8);
	return 0;
}

int
main(void)
{
	static const struct {
		uint64_t t;
		int up;
	} script[] = { { 0, 1 }, { 1, 0 }, { 2, 0 }, { 3, 1 }, { 8, 1 },
		{ 9, 0 }, { 10, 0 }, { 20, 0 } };
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag diag;
	stock_service svc = { 0, 0 };
	resil_args args = { "getStock", NULL, 0 };
	size_t i;

	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "InventoryService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 2;
	cfg.breaker.open_wait_ns = 5 * RESIL_NS_PER_SEC;
	cfg.breaker.permitted_probes = 1;
	cfg.cache_enabled = 1;
	cfg.cache.max_age = 10 * RESIL_NS_PER_SEC; /* 10 s is served, not 11 */
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "inventory: %s\n", diag.msg);
		return 1;
	}

	for (i = 0; i < sizeof(script) / sizeof(script[0]); i++) {
		resil_result r;

		resil_manual_clock_set(&mc, script[i].t * RESIL_NS_PER_SEC);
		svc.up = script[i].up;
		resil_pipeline_call(p, &args, get_stock, &svc, &r);
		if (r.err == RESIL_OK)
			printf(
			    "时刻%llu: %s, 库存=%lld, 年龄=%llu, 调用数=%d\n",
			    (unsigned long long)script[i].t,
			    resil_source_name(r.source),
			    (long long)r.value.u.i,
			    (unsigned long long)(r.age / RESIL_NS_PER_SEC),
			    svc.calls);
		else
			printf(
			    "时刻%llu: %s, 库存=None, 年龄=None, 调用数=%d\n",
			    (unsigned long long)script[i].t,
			    resil_source_name(r.source), svc.calls);
		resil_result_free(&r);
	}
	resil_pipeline_free(p);
	return 0;
}

/*
 * breaker_demo: the inventory scenario of the project's seed, on a resil
 * breaker and the manual clock. The stock service answers 8 when it is up.
 * Two consecutive failures open the breaker for 5 time units; a probe is
 * let in exactly when the wait ends. While the breaker is open, or after a
 * failure, the last live answer is served from a small cache if it is at
 * most 10 units old; otherwise the stock is unavailable (never 0).
 *
 * The cache here is a few lines of this example; the library's own result
 * cache and fallback chain replace it in examples/inventory.
 */
#include <stdio.h>

#include <resil/breaker.h>
#include <resil/clock.h>

#define MAX_AGE 10

typedef struct stock_service {
	int available; /* the scripted behaviour at this tick */
	int calls;     /* how many times the real service was called */
} stock_service;

static int
query_stock(void *ctx)
{
	stock_service *svc = ctx;

	svc->calls++;
	return svc->available ? 8 : -1; /* -1: the call failed */
}

/* The service returns the stock (>= 0) or -1: classify accordingly. */
static resil_outcome
classify_stock(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc >= 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

typedef struct cached {
	int has;
	int stock;
	uint64_t saved_at;
} cached;

static void
print_result(uint64_t now, const char *source, const cached *c, int calls)
{
	if (c == NULL)
		printf("时刻%llu: %s, 库存=None, 年龄=None, 调用数=%d\n",
		    (unsigned long long)now, source, calls);
	else
		printf("时刻%llu: %s, 库存=%d, 年龄=%llu, 调用数=%d\n",
		    (unsigned long long)now, source, c->stock,
		    (unsigned long long)(now - c->saved_at), calls);
}

int
main(void)
{
	static const struct {
		uint64_t t;
		int available;
	} script[] = { { 0, 1 }, { 1, 0 }, { 2, 0 }, { 3, 1 }, { 8, 1 },
		{ 9, 0 }, { 10, 0 }, { 20, 0 } };
	resil_manual_clock mc;
	resil_breaker_config cfg;
	resil_breaker_recorder rec;
	resil_breaker_event events[16];
	resil_breaker *b;
	resil_diag diag;
	stock_service svc = { 0, 0 };
	resil_classifier cls = { classify_stock, NULL };
	cached cache = { 0, 0, 0 };
	size_t i;

	resil_manual_clock_init(&mc, 0);
	resil_breaker_recorder_init(&rec, events, 16);
	resil_breaker_config_init(&cfg);
	cfg.failure_rate_pct = 0;     /* trip on consecutive failures only */
	cfg.consecutive_failures = 2; /* two in a row */
	cfg.open_wait_ns = 5;         /* ticks of the manual clock */
	cfg.permitted_probes = 1;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.listener = resil_breaker_recorder_listener;
	cfg.listener_ctx = &rec;
	if (resil_breaker_new(&b, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "breaker_demo: %s\n", diag.msg);
		return 1;
	}

	for (i = 0; i < sizeof(script) / sizeof(script[0]); i++) {
		int rc = 0;
		resil_err err;

		resil_manual_clock_set(&mc, script[i].t);
		svc.available = script[i].available;
		err = resil_breaker_call(b, query_stock, &svc, &cls, &rc);
		if (err == RESIL_OK && rc >= 0) {
			cache.has = 1;
			cache.stock = rc;
			cache.saved_at = script[i].t;
			print_result(script[i].t, "live", &cache, svc.calls);
		} else if (cache.has && script[i].t - cache.saved_at <= MAX_AGE) {
			print_result(script[i].t, "cache", &cache, svc.calls);
		} else {
			print_result(script[i].t, "unavailable", NULL, svc.calls);
		}
	}

	printf("\nbreaker transitions:\n");
	for (i = 0; i < rec.count && i < 16; i++)
		printf("  #%llu t=%llu %s -> %s (%s)\n",
		    (unsigned long long)events[i].seq,
		    (unsigned long long)events[i].time,
		    resil_breaker_state_name(events[i].from),
		    resil_breaker_state_name(events[i].to),
		    resil_breaker_reason_name(events[i].reason));
	resil_breaker_free(b);
	return 0;
}

#include <stdio.h>

#include <resil/pipeline.h>

/* The wrapped call, a resil_call_fn: fill *out and return 0, or return a
 * code of your own on failure (the default classifier: 0 is success). */
static int
get_stock(void *ctx, const resil_args *args, resil_value *out)
{
	const int *up = ctx;

	(void)args; /* args->data: the item id, also the cache key */
	if (!*up)
		return -1; /* timeout, connection refused, ... */
	*out = resil_value_int(8);
	return 0;
}

int
main(void)
{
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag diag;
	int up, item_id = 42;
	resil_args args = { "getStock", &item_id, sizeof(item_id) };

	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.breaker_enabled = 1; /* breaker, retry, cache, mock ... */
	cfg.retry_enabled = 1;
	cfg.retry.base_delay_ns = 10 * RESIL_NS_PER_MS;
	cfg.cache_enabled = 1;
	cfg.mock = "fail:return null"; /* Dubbo mock spec, service level */
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 1;
	}
	for (up = 1; up >= 0; up--) {
		resil_result r;
		char text[64];

		resil_pipeline_call(p, &args, get_stock, &up, &r);
		resil_value_format(&r.value, text, sizeof(text));
		/* r.source: live, cache (r.age), mock, fallback or
		 * unavailable; r.attempts: calls of get_stock made */
		printf("%s %s after %u attempt(s)\n",
		    resil_source_name(r.source), text, (unsigned)r.attempts);
		resil_result_free(&r);
	}
	resil_pipeline_free(p);
	return 0;
}

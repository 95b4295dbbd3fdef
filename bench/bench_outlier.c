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
 */
#include <stdlib.h>

#include <resil/outlier.h>

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

const resil_bench resil_bench_outlier[] = {
	{ "outlier/success_rate/100", setup_sr, run_sr, ob_free },
	{ NULL, NULL, NULL, NULL },
};

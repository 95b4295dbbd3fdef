#include <stdio.h>

#include <resil/breaker.h>

/* The wrapped call, a resil_breaker_fn: 0 on success, an error code
 * otherwise (the default classifier's rule). Here it stands for a query
 * to an inventory service that is down. */
static int
get_stock(void *ctx)
{
	int *failures = ctx;

	++*failures;
	return -1; /* connection refused */
}

int
main(void)
{
	resil_breaker_config cfg = resil_breaker_config_default();
	resil_breaker *b;
	resil_diag diag;
	int i, rc, failures = 0, rejected = 0;

	/* Trip at >= 50% failures once 20 outcomes are seen; then reject
	 * for 5 s, and let 3 probes through in HALF_OPEN. */
	cfg.failure_rate_pct = 50;
	cfg.min_calls = 20;
	cfg.open_wait_ns = 5 * RESIL_NS_PER_SEC;
	cfg.permitted_probes = 3;
	if (resil_breaker_new(&b, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg); /* names the bad field */
		return 1;
	}
	for (i = 0; i < 100; i++)
		if (resil_breaker_call(b, get_stock, &failures, NULL, &rc) ==
		    RESIL_E_OPEN)
			rejected++; /* rejected fast: nothing was called */
	printf("%d calls failed, %d rejected, breaker %s\n", failures,
	    rejected, resil_breaker_state_name(resil_breaker_get_state(b)));
	resil_breaker_free(b);
	return 0;
}

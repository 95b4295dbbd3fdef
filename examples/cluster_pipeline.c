/*
 * A cluster pipeline built from one configuration file
 * (cluster_pipeline.conf; no setting made in C: the program only calls
 * _init and _new, and gives the pipeline its selector): three providers
 * and a canary, one provider dead. The load spreads, getStock sticks to
 * an endpoint per SKU (loadbalance=hash on argument 0), a VIP's getPrice
 * goes to the premium tier (a condition rule on arguments[0]), a call
 * tagged canary reaches the canary, and the service breaker stays CLOSED
 * while one endpoint of three is dead: failover answers every call live.
 * The output is exact: the default balancer (random) draws from the
 * selector's own seeded generator, and the hash draws nothing.
 *
 *   cluster_pipeline [CONFIG]    (default: examples/cluster_pipeline.conf)
 */
#include <stdio.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#define N_EP 4

static const char *const addr[N_EP] = { "10.0.0.1:20880", "10.0.0.2:20880",
	"10.0.0.3:20880", "10.0.0.9:20880" };

/* The providers: 10.0.0.2 refuses every connection (rc 111). */
typedef struct providers {
	int calls[N_EP];
	const char *last;
} providers;

static int
index_of(const char *address)
{
	int i;

	for (i = 0; i < N_EP; i++)
		if (strcmp(addr[i], address) == 0)
			return i;
	return 0;
}

static int
provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	providers *pv = ctx;
	int i = index_of(ep->address);

	(void)args;
	pv->calls[i]++;
	pv->last = addr[i];
	if (i == 1)
		return 111; /* ECONNREFUSED */
	*out = resil_value_int(10 + i);
	return 0;
}

/* One call of method with argument arg (NULL: none) and tag (NULL:
 * none): the endpoint that answered, or the error. */
static const char *
call(resil_pipeline *p, providers *pv, const char *method, const char *arg,
    const char *tag, resil_result *r)
{
	resil_invocation inv;

	resil_invocation_init(&inv, method);
	if (arg != NULL) {
		inv.arguments = &arg;
		inv.narguments = 1;
	}
	inv.tag = tag;
	pv->last = NULL;
	if (resil_pipeline_invoke_ex(p, NULL, &inv, provider, pv, r) !=
	        RESIL_OK ||
	    r->source != RESIL_SOURCE_LIVE)
		return "not live";
	return r->endpoint;
}

int
main(int argc, char **argv)
{
	static const char *const skus[] = { "sku-1", "sku-2", "sku-3",
		"sku-4" };
	const char *path =
	    argc > 1 ? argv[1] : "examples/cluster_pipeline.conf";
	resil_endpoint_spec specs[N_EP];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_pipeline_metrics mt;
	resil_config *conf = NULL;
	resil_directory *dir = NULL;
	resil_selector *sel = NULL;
	resil_pipeline *p = NULL;
	resil_diag diag;
	resil_result r;
	providers pv;
	int i, k, live = 0, rc = 1;

	memset(&pv, 0, sizeof(pv));
	if (resil_config_parse_file(&conf, path, NULL, &diag) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 1;
	}
	resil_directory_config_init(&dc);
	resil_config_directory(conf, &dc);
	resil_config_selector(conf, &sc);
	pc = *resil_config_pipeline(conf);
	if (resil_directory_new(&dir, &dc, &diag) != RESIL_OK ||
	    resil_selector_new(&sel, dir, &sc, &diag) != RESIL_OK)
		goto out;
	pc.selector = sel;
	if (resil_pipeline_new(&p, &pc, &diag) != RESIL_OK)
		goto out;

	/* What the registry would push: three providers (10.0.0.3 in the
	 * premium tier) and a canary. */
	for (i = 0; i < N_EP; i++)
		specs[i] = resil_endpoint_spec_default(addr[i]);
	specs[2].params = "tier=premium";
	specs[3].tag = "canary";
	if (resil_directory_push(dir, specs, N_EP, &diag) != RESIL_OK)
		goto out;

	printf("StockService from %s, 10.0.0.2 dead\n",
	    strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path);
	for (k = 0; k < 300; k++) {
		(void)call(p, &pv, "listItems", NULL, NULL, &r);
		live += r.source == RESIL_SOURCE_LIVE && r.err == RESIL_OK;
		resil_result_free(&r);
	}
	printf("listItems x300: %d live; attempts per endpoint:", live);
	for (i = 0; i < N_EP; i++)
		printf(" %s=%d", addr[i], pv.calls[i]);
	printf("\n");

	for (k = 0; k < 4; k++) {
		char first[64];
		int same = 1;

		snprintf(first, sizeof(first), "%s",
		    call(p, &pv, "getStock", skus[k], NULL, &r));
		resil_result_free(&r);
		for (i = 0; i < 5; i++) {
			same &=
			    strcmp(call(p, &pv, "getStock", skus[k], NULL, &r),
			        first) == 0;
			resil_result_free(&r);
		}
		printf("getStock(%s) x6: %s%s\n", skus[k], first,
		    same ? "" : " (moved)");
	}

	printf("getPrice(vip-7): %s\n",
	    call(p, &pv, "getPrice", "vip-7", NULL, &r));
	resil_result_free(&r);
	printf("getPrice(guest): %s\n",
	    call(p, &pv, "getPrice", "guest", NULL, &r));
	resil_result_free(&r);
	printf("getPrice(guest), tag canary: %s\n",
	    call(p, &pv, "getPrice", "guest", "canary", &r));
	resil_result_free(&r);

	if (resil_pipeline_get_metrics(p, &mt) != RESIL_OK)
		goto out;
	printf("service breaker %s; calls %llu, answered by the mock %llu\n",
	    resil_breaker_state_name(
	        resil_breaker_get_state(resil_pipeline_breaker(p, NULL))),
	    (unsigned long long)mt.calls, (unsigned long long)mt.mock);
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "%s\n", diag.msg);
	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(dir);
	resil_config_free(conf);
	return rc;
}

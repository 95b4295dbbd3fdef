/*
 * degrade_switch: Dubbo-style service degradation, switched while running.
 *
 * ItemService has three methods, each declared with its return type so
 * that a mock value arrives as the right type:
 *
 *   getStock   int     healthy: answers 8
 *   getPrice   double  failing: its database is down
 *   listItems  array   never called while its mock is forced
 *
 * The configuration is the Dubbo one: the service-level spec
 * `fail:return null` (call first; after a failure the caller gets null
 * instead of an error) and the method-level `listItems.mock=force:return
 * []` (never call; the caller gets an empty list). While the program runs,
 * an operator flips switches with resil_pipeline_set_mock():
 * `getStock.mock=force:return 0` takes getStock off the service, `false`
 * puts it back (and, being a method-level setting, keeps it live when the
 * whole service is forced later), a bad spec is refused and changes
 * nothing, and `getPrice.mock=fail:throw` makes the failing method answer
 * the degradation error instead of null.
 *
 * The transcript shows, for each call, the answer the caller got (printed
 * with resil_value_format(), or "-" when there is none), where it came
 * from, the error, the original failure behind a mock answer, and whether
 * the call reached the service (with the running count of calls that
 * did). The pipeline runs on the manual clock, one unit per call, so the
 * output is the same at every run.
 */
#include <stdio.h>
#include <string.h>

#include <resil/pipeline.h>

#define PRICE_DB_DOWN 503 /* the service's own failure code */

/* The real service, scripted: counts the calls that reach it. */
typedef struct item_service {
	int calls;     /* calls that reached the service */
	int stock;     /* of which getStock */
	int price;     /* getPrice */
	int listitems; /* listItems */
} item_service;

static int
item_service_call(void *ctx, const resil_args *args, resil_value *out)
{
	item_service *svc = ctx;

	svc->calls++;
	if (strcmp(args->method, "getStock") == 0) {
		svc->stock++;
		*out = resil_value_int(8);
		return 0;
	}
	if (strcmp(args->method, "getPrice") == 0) {
		svc->price++;
		return PRICE_DB_DOWN;
	}
	if (strcmp(args->method, "listItems") == 0) {
		svc->listitems++;
		return resil_value_json(
		           out, "[\"apple\",\"pear\"]", 16, NULL) == RESIL_OK
		    ? 0
		    : -1;
	}
	return -1;
}

/* One step of the script: a call of method, or (spec_set) a switch that
 * sets the mock of method (NULL: the service-level one) to spec, which
 * resil_pipeline_set_mock() must answer with expect. */
typedef struct step {
	const char *method;
	int spec_set;
	const char *spec;
	resil_err expect;
} step;

#define CALL(m)                      \
	{                            \
		m, 0, NULL, RESIL_OK \
	}
#define SWITCH(m, s)              \
	{                         \
		m, 1, s, RESIL_OK \
	}
#define BAD_SWITCH(m, s)               \
	{                              \
		m, 1, s, RESIL_E_INVAL \
	}

static const step script[] = {
	CALL("getStock"),
	CALL("getPrice"),
	CALL("listItems"),
	SWITCH("getStock", "force:return 0"),
	CALL("getStock"),
	CALL("getStock"),
	CALL("getPrice"),
	BAD_SWITCH("getStock", "force:"), /* refused: nothing changes */
	CALL("getStock"),
	SWITCH("getStock", "false"),
	CALL("getStock"),
	SWITCH(NULL, "force:return null"),
	CALL("getStock"),
	CALL("getPrice"),
	CALL("listItems"),
	SWITCH(NULL, "fail:return null"),
	SWITCH("getPrice", "fail:throw"),
	CALL("getPrice"),
	SWITCH("getPrice", NULL),
	CALL("getPrice"),
};

static void
print_call(uint64_t t, const char *method, const resil_result *r, int reached,
    int calls)
{
	char answer[64];

	if (r->err == RESIL_OK)
		resil_value_format(&r->value, answer, sizeof(answer));
	else
		snprintf(answer, sizeof(answer), "-");
	printf("%4llu  %-9s  %-6s  %-6s  %-18s  %-12s  %-7s  %d\n",
	    (unsigned long long)t, method, answer,
	    resil_source_name(r->source), resil_err_name(r->err),
	    r->cause != RESIL_OK ? resil_err_name(r->cause) : "-",
	    reached ? "yes" : "no", calls);
	if (r->err != RESIL_OK)
		printf("      %-9s  message: %s\n", "", r->message);
}

int
main(void)
{
	static const resil_method_config methods[] = {
		{ "getStock", RESIL_TYPE_INT, NULL, 0, 0, 0, RESIL_PRIORITY_UNSET, 0 },
		{ "getPrice", RESIL_TYPE_DOUBLE, NULL, 0, 0, 0, RESIL_PRIORITY_UNSET, 0 },
		{ "listItems", RESIL_TYPE_ARRAY, "force:return []", 0, 0,
		    0, RESIL_PRIORITY_UNSET, 0 },
	};
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag diag;
	item_service svc = { 0 };
	size_t i;
	int rc = 0;

	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "ItemService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.mock = "fail:return null";
	cfg.methods = methods;
	cfg.nmethods = sizeof(methods) / sizeof(methods[0]);
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "degrade_switch: %s\n", diag.msg);
		return 1;
	}

	printf(
	    "ItemService: mock=fail:return null, listItems.mock=force:return "
	    "[]\n");
	printf("time  method     answer  source  error               cause    "
	       "     reached  calls\n");
	for (i = 0; i < sizeof(script) / sizeof(script[0]); i++) {
		const step *s = &script[i];
		resil_result r;
		resil_args args;
		resil_err err;
		int before = svc.calls;

		if (s->spec_set) {
			char key[64];

			snprintf(key, sizeof(key), "%s%smock",
			    s->method != NULL ? s->method : "",
			    s->method != NULL ? "." : "");
			err = resil_pipeline_set_mock(
			    p, s->method, s->spec, &diag);
			if (s->spec == NULL)
				printf("      switch %s unset: inherit the "
				       "service-level spec\n",
				    key);
			else
				printf("      switch %s=%s\n", key, s->spec);
			if (err != RESIL_OK)
				printf("      refused (%s): %s\n",
				    resil_err_name(err), diag.msg);
			if (err != s->expect) {
				fprintf(stderr,
				    "degrade_switch: set_mock gave %s, "
				    "expected %s\n",
				    resil_err_name(err),
				    resil_err_name(s->expect));
				rc = 1;
				break;
			}
			continue;
		}
		args.method = s->method;
		args.data = NULL;
		args.len = 0;
		err =
		    resil_pipeline_call(p, &args, item_service_call, &svc, &r);
		if (err == RESIL_E_INVAL) {
			/* *r is untouched: nothing to print or free. */
			fprintf(stderr, "degrade_switch: bad call\n");
			rc = 1;
			break;
		}
		print_call(resil_manual_clock_now(&mc), s->method, &r,
		    svc.calls != before, svc.calls);
		resil_result_free(&r);
		resil_manual_clock_advance(&mc, 1);
	}
	resil_pipeline_free(p);
	printf("calls that reached ItemService: %d (getStock %d, getPrice %d, "
	       "listItems %d)\n",
	    svc.calls, svc.stock, svc.price, svc.listitems);
	return rc;
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/directory.h>
#include <resil/router.h>
#include <resil/selector.h>

#include "support/cluster_fx.h"

typedef struct ep {
	const char *addr, *zone, *tag, *params;
	int mock;
} ep;

static void
push(fx *f, const ep *eps, size_t n)
{
	resil_endpoint_spec s[16];
	size_t i;

	for (i = 0; i < n; i++) {
		s[i] = resil_endpoint_spec_default(eps[i].addr);
		s[i].zone = eps[i].zone;
		s[i].tag = eps[i].tag;
		s[i].params = eps[i].params;
		s[i].mock = eps[i].mock;
	}
	assert_int_equal(resil_directory_push(f->d, s, n, &f->diag), RESIL_OK);
}

/* The candidates of req as "a,b,c", or the error message. */
static const char *
route(fx *f, const resil_request *req)
{
	static char out[512];
	size_t i, len = 0;

	out[0] = '\0';
	if (resil_selector_route(f->sel, req, f->c, &f->diag) != RESIL_OK) {
		snprintf(out, sizeof(out), "%s", f->diag.msg);
		return out;
	}
	for (i = 0; i < resil_candidates_count(f->c); i++) {
		resil_candidate c;
		resil_candidates_get(f->c, i, &c);
		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s",
		    i == 0 ? "" : ",", c.address);
	}
	return out;
}

static resil_request
req_of(const char *method, const char *tag)
{
	resil_request r;

	memset(&r, 0, sizeof(r));
	r.method = method;
	r.tag = tag;
	return r;
}

static void
test_router_tag(void **state)
{
	static const ep eps[] = { { "a", NULL, NULL, NULL, 0 },
		{ "b", NULL, "canary", NULL, 0 },
		{ "c", NULL, "canary", NULL, 0 },
		{ "d", NULL, "gray", NULL, 0 }, { "m", NULL, NULL, NULL, 1 } };
	resil_request r;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	assert_int_equal(fx_start(&f), 0);
	push(&f, eps, 5);
	r = req_of("get", "canary");
	assert_string_equal(route(&f, &r), "b,c");
	r = req_of("get", "blue"); /* no such tag: the untagged ones */
	assert_string_equal(route(&f, &r), "a");
	r = req_of("get", NULL); /* untagged: untagged only; never a mock */
	assert_string_equal(route(&f, &r), "a");
	r = req_of("get", "");
	assert_string_equal(route(&f, &r), "a");
	fx_end(&f);

	fx_init(&f, 1000);
	f.scfg.tag_force = 1;
	assert_int_equal(fx_start(&f), 0);
	push(&f, eps, 5);
	r = req_of("get", "blue");
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method get in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(tag=blue removed 4)");
	r = req_of("get", "gray");
	assert_string_equal(route(&f, &r), "d");
	fx_end(&f);
}

static void
parse_err(const char *text, const char *want)
{
	resil_condition *c = NULL;
	resil_diag diag;

	assert_int_equal(
	    resil_condition_parse(&c, text, 0, NULL, &diag), RESIL_E_INVAL);
	assert_null(c);
	assert_string_equal(diag.msg, want);
}

static void
test_router_condition_parse_errors_have_columns(void **state)
{
	resil_condition *c;

	(void)state;
	assert_int_equal(
	    resil_condition_parse(
	        &c, "method = getX & zone != sh => zone = hz", 0, NULL, NULL),
	    RESIL_OK);
	assert_string_equal(resil_condition_text(c),
	    "method = getX & zone != sh => zone = hz");
	resil_condition_free(c);
	assert_int_equal(
	    resil_condition_parse(&c, "=>", 0, NULL, NULL), RESIL_OK);
	resil_condition_free(c);
	resil_condition_free(NULL);

	parse_err("method = => zone = hz",
	    "condition \"method = => zone = hz\" at column 10: expected a "
	    "value "
	    "after '='");
	parse_err("method getX => zone = hz",
	    "condition \"method getX => zone = hz\" at column 8: expected '=' "
	    "or '!=' after 'method'");
	parse_err("zone = hz",
	    "condition \"zone = hz\" at column 10: expected '=>'");
	parse_err("=> zone = hz & ",
	    "condition \"=> zone = hz & \" at column 16: expected a key");
	parse_err("arguments[x] = 1 => zone = hz",
	    "condition \"arguments[x] = 1 => zone = hz\" at column 11: "
	    "argument index is not a number in 0..10000");
	parse_err("=> arguments[0] = 1",
	    "condition \"=> arguments[0] = 1\" at column 4: arguments[] can "
	    "only be tested before '=>'");
	parse_err("a = 1 => b = 2 => c = 3",
	    "condition \"a = 1 => b = 2 => c = 3\" at column 16: a second "
	    "'=>'");
	parse_err("method = a b => x = y",
	    "condition \"method = a b => x = y\" at column 12: expected '&' "
	    "or "
	    "the end of the condition before '=>'");
	parse_err("zone = a, => x = y",
	    "condition \"zone = a, => x = y\" at column 11: expected a value "
	    "after ','");
	parse_err("zo[ne = a => x = y",
	    "condition \"zo[ne = a => x = y\" at column 1: '[' is only "
	    "allowed "
	    "in arguments[N] and attachments[key]");
	assert_int_equal(
	    resil_condition_parse(NULL, "=>", 0, NULL, NULL), RESIL_E_INVAL);
}

static const ep zoned[] = { { "10.0.0.1:20880", "hz", NULL, "version=1.0", 0 },
	{ "10.0.0.2:20880", "hz", NULL, "version=2.0", 0 },
	{ "10.0.1.1:20881", "sh", NULL, "version=1.1&app=x", 0 },
	{ "10.0.1.2:20881", "sh", NULL, NULL, 0 } };

static void
with_rule(fx *f, resil_condition **c, const char *text, int force)
{
	fx_init(f, 1000);
	assert_int_equal(
	    resil_condition_parse(c, text, force, NULL, &f->diag), RESIL_OK);
	f->scfg.conditions = c;
	f->scfg.nconditions = 1;
	f->scfg.local_zone = "bj";
	f->scfg.zone_mode = RESIL_ZONE_OFF;
	assert_int_equal(fx_start(f), 0);
	push(f, zoned, 4);
}

static void
end_rule(fx *f, resil_condition *c)
{
	fx_end(f);
	resil_condition_free(c);
}

static void
test_router_condition_matching(void **state)
{
	resil_condition *c;
	resil_request r;
	const char *args[1];
	resil_param param;
	fx f;

	(void)state;
	/* WHEN reads the request (zone: the consumer's); THEN each
	 * endpoint. */
	with_rule(&f, &c, "method = getX & zone != sh => zone = hz", 0);
	r = req_of("getX", NULL);
	assert_string_equal(route(&f, &r), "10.0.0.1:20880,10.0.0.2:20880");
	r = req_of("getY", NULL);
	assert_string_equal(route(&f, &r),
	    "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	end_rule(&f, c);

	/* A suffix wildcard; a key missing on an endpoint excludes it. */
	with_rule(&f, &c, "=> version = 1.*", 0);
	r = req_of("m", NULL);
	assert_string_equal(route(&f, &r), "10.0.0.1:20880,10.0.1.1:20881");
	end_rule(&f, c);

	/* != with a list. */
	with_rule(&f, &c, "=> version != 1.0,2.0", 0);
	assert_string_equal(route(&f, &r), "10.0.1.1:20881");
	end_rule(&f, c);

	/* host, port and address are built in. */
	with_rule(&f, &c, "=> host = 10.0.1.* & port != 20880", 0);
	assert_string_equal(route(&f, &r), "10.0.1.1:20881,10.0.1.2:20881");
	end_rule(&f, c);
	with_rule(&f, &c, "=> address = 10.0.0.2:20880", 0);
	assert_string_equal(route(&f, &r), "10.0.0.2:20880");
	end_rule(&f, c);

	/* Nothing matches THEN: unchanged; with force: empty. */
	with_rule(&f, &c, "method = getX => zone = nowhere", 0);
	r = req_of("getX", NULL);
	assert_string_equal(route(&f, &r),
	    "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	end_rule(&f, c);
	with_rule(&f, &c, "method = getX => zone = nowhere", 1);
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getX in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(condition \"method = getX => zone = nowhere\" removed 4)");
	end_rule(&f, c);

	/* An empty THEN is a blocklist. */
	with_rule(&f, &c, "method = getX =>", 0);
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getX in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(condition \"method = getX =>\" removed 4)");
	r = req_of("getY", NULL);
	assert_int_equal(resil_selector_route(f.sel, &r, f.c, NULL), RESIL_OK);
	end_rule(&f, c);

	/* arguments[i]: a missing argument on the WHEN side: no match. */
	with_rule(&f, &c, "arguments[0] = vip* => zone = sh", 0);
	r = req_of("m", NULL);
	r.args = args;
	r.nargs = 1;
	args[0] = "vip-7";
	assert_string_equal(route(&f, &r), "10.0.1.1:20881,10.0.1.2:20881");
	args[0] = "x";
	assert_int_equal(resil_selector_route(f.sel, &r, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 4);
	r.nargs = 0;
	assert_int_equal(resil_selector_route(f.sel, &r, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 4);
	end_rule(&f, c);

	/* Request params and the request tag on the WHEN side. */
	with_rule(&f, &c, "app = shop & tag = * => app = x", 0);
	r = req_of("m", "t");
	param.key = "app";
	param.value = "shop";
	r.params = &param;
	r.nparams = 1;
	/* The tag router runs first: tag t is absent, the untagged stay. */
	assert_string_equal(route(&f, &r), "10.0.1.1:20881");
	r.tag = NULL; /* tag missing on the WHEN side: no match */
	assert_int_equal(resil_selector_route(f.sel, &r, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 4);
	end_rule(&f, c);
}

/* Fail one call to addr through a plain selector (no zone, no panic), so
 * that any endpoint can be reached; outlier detection ejects it. */
static void
eject(fx *f, const char *addr)
{
	resil_selector_config cfg = resil_selector_config_default();
	resil_selector *sel;
	resil_candidates *c;
	resil_pick p;
	uint64_t ex[16];
	size_t i, k = 0;

	cfg.panic_threshold_pct = 0;
	assert_int_equal(resil_selector_new(&sel, f->d, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_new(&c, sel), RESIL_OK);
	assert_int_equal(resil_selector_route(sel, NULL, c, NULL), RESIL_OK);
	for (i = 0; i < resil_candidates_count(c); i++) {
		resil_candidate cd;
		resil_candidates_get(c, i, &cd);
		if (strcmp(cd.address, addr) != 0)
			ex[k++] = cd.id;
	}
	assert_int_equal(
	    resil_selector_pick(sel, c, NULL, ex, k, &p, NULL), RESIL_OK);
	assert_string_equal(p.address, addr);
	resil_selector_report(sel, &p, RESIL_OUTCOME_FAILURE);
	resil_candidates_free(c);
	resil_selector_free(sel);
}

static void
start_zoned(fx *f, const char *zone, resil_zone_mode mode, uint32_t panic)
{
	fx_init(f, 1000);
	f->dcfg.outlier.consecutive_failures = 1;
	f->dcfg.outlier.max_ejection_pct = 100;
	f->scfg.local_zone = zone;
	f->scfg.zone_mode = mode;
	f->scfg.panic_threshold_pct = panic;
	assert_int_equal(fx_start(f), 0);
	push(f, zoned, 4);
}

/* Rules replaced at run time: the next route uses them; the old ones
 * were borrowed (the caller frees them), the new ones are owned. */
/* Dubbo's ConditionStateRouterTest.testRoute_Arguments: a path after
 * arguments[N] is accepted and ignored (argument N is read whole), so
 * arguments[10].inner never matches a call with one argument, while
 * arguments[0].inner = 1 matches an argument "1"; a bare `arguments`
 * never matches. Each rule is forced, so a match leaves nothing. */
static void
test_router_condition_argument_path(void **state)
{
	static const struct {
		const char *rule;
		const char *arg;
		size_t left;
	} cases[] = {
		{ "arguments[10].inner = a => zone = nowhere", "a", 4 },
		{ "arguments[0].inner = 1 => zone = nowhere", "1", 0 },
		{ "arguments[0].inner = 1 => zone = nowhere", "2", 4 },
		{ "arguments[0].a.b = 1 => zone = nowhere", "1", 0 },
		{ "arguments = b => zone = nowhere", "b", 4 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		resil_condition *c;
		resil_request r;
		const char *args[1];
		fx f;
		resil_err err;

		with_rule(&f, &c, cases[i].rule, 1);
		r = req_of("m", NULL);
		args[0] = cases[i].arg;
		r.args = args;
		r.nargs = 1;
		err = resil_selector_route(f.sel, &r, f.c, &f.diag);
		if (cases[i].left == 0) {
			assert_int_equal(err, RESIL_E_NO_PROVIDER);
		} else {
			assert_int_equal(err, RESIL_OK);
			assert_int_equal(
			    resil_candidates_count(f.c), cases[i].left);
		}
		end_rule(&f, c);
	}
	parse_err("arguments[0]. = 1 => zone = hz",
	    "condition \"arguments[0]. = 1 => zone = hz\" at column 13: "
	    "expected a field name after '.'");
	parse_err("arguments[0].x[1] = 1 => zone = hz",
	    "condition \"arguments[0].x[1] = 1 => zone = hz\" at column 13: "
	    "expected a field name after '.'");
	parse_err("arguments[].x = 1 => zone = hz",
	    "condition \"arguments[].x = 1 => zone = hz\" at column 1: "
	    "expected arguments[N]");
	parse_err("arguments[1.5] = 1 => zone = hz",
	    "condition \"arguments[1.5] = 1 => zone = hz\" at column 12: "
	    "argument index is not a number in 0..10000");
	parse_err("arguments[1]x = 1 => zone = hz",
	    "condition \"arguments[1]x = 1 => zone = hz\" at column 1: "
	    "expected arguments[N]");
	parse_err("=> arguments[0].x = 1",
	    "condition \"=> arguments[0].x = 1\" at column 4: arguments[] "
	    "can only be tested before '=>'");
}

static void
test_router_conditions_replaced_at_run_time(void **state)
{
	resil_request r = req_of("getStock", NULL);
	resil_condition *c0, *rules[2];
	fx f;

	(void)state;
	with_rule(&f, &c0, "=> zone = hz", 0);
	assert_string_equal(route(&f, &r), "10.0.0.1:20880,10.0.0.2:20880");
	assert_int_equal(resil_selector_condition_count(f.sel), 1);
	/* A rule that filters every provider, forced: no provider. */
	assert_int_equal(
	    resil_condition_parse(&rules[0], "=> zone = bj", 1, NULL, &f.diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, rules, 1, &f.diag), RESIL_OK);
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (condition \"=> zone = bj\" removed 4)");
	/* Two rules, in order. */
	assert_int_equal(
	    resil_condition_parse(&rules[0], "=> zone = sh", 0, NULL, &f.diag),
	    RESIL_OK);
	assert_int_equal(resil_condition_parse(&rules[1],
	                     "=> address != 10.0.1.1:20881", 0, NULL, &f.diag),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, rules, 2, &f.diag), RESIL_OK);
	assert_int_equal(resil_selector_condition_count(f.sel), 2);
	assert_string_equal(route(&f, &r), "10.0.1.2:20881");
	/* Bad input changes nothing and takes nothing. */
	rules[1] = NULL;
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, rules, 2, &f.diag),
	    RESIL_E_INVAL);
	assert_string_equal(f.diag.msg, "router.condition[1]: NULL");
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, NULL, 1, &f.diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_selector_set_conditions(NULL, NULL, 0, &f.diag),
	    RESIL_E_INVAL);
	assert_string_equal(route(&f, &r), "10.0.1.2:20881");
	/* None. */
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, NULL, 0, &f.diag), RESIL_OK);
	assert_int_equal(resil_selector_condition_count(f.sel), 0);
	assert_string_equal(route(&f, &r),
	    "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	assert_int_equal(resil_selector_condition_count(NULL), 0);
	end_rule(&f, c0);
}

static void
test_router_health_and_panic(void **state)
{
	resil_route_stats st;
	resil_request r = req_of("getX", NULL);
	fx f;

	(void)state;
	start_zoned(&f, NULL, RESIL_ZONE_OFF, 50);
	eject(&f, "10.0.0.1:20880");
	assert_string_equal(
	    route(&f, &r), "10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	eject(&f, "10.0.0.2:20880");
	/* 100 * 2 / 4 = 50 is not below 50: no panic. */
	assert_string_equal(route(&f, &r), "10.0.1.1:20881,10.0.1.2:20881");
	resil_candidates_stats(f.c, &st);
	assert_int_equal(st.removed_health, 2);
	assert_false(st.panic);
	eject(&f, "10.0.1.1:20881");
	/* 25 < 50: panic, every routed endpoint. */
	assert_string_equal(route(&f, &r),
	    "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	resil_candidates_stats(f.c, &st);
	assert_true(st.panic);
	assert_int_equal(st.removed_health, 0);
	assert_int_equal(st.endpoints, 4);
	assert_int_equal(st.candidates, 4);
	fx_end(&f);

	/* Panic off: ejected ones stay out, down to "no provider". */
	start_zoned(&f, NULL, RESIL_ZONE_OFF, 0);
	eject(&f, "10.0.0.1:20880");
	eject(&f, "10.0.0.2:20880");
	eject(&f, "10.0.1.1:20881");
	eject(&f, "10.0.1.2:20881");
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getX in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(health removed 4)");
	fx_end(&f);
}

static void
test_router_zone_prefer_and_strict(void **state)
{
	resil_request r = req_of("getX", NULL);
	fx f;

	(void)state;
	start_zoned(&f, "hz", RESIL_ZONE_PREFER, 0);
	assert_string_equal(route(&f, &r), "10.0.0.1:20880,10.0.0.2:20880");
	eject(&f, "10.0.0.1:20880");
	assert_string_equal(route(&f, &r), "10.0.0.2:20880");
	eject(&f, "10.0.0.2:20880");
	/* No healthy local one: every candidate. */
	assert_string_equal(route(&f, &r), "10.0.1.1:20881,10.0.1.2:20881");
	fx_end(&f);

	start_zoned(&f, "hz", RESIL_ZONE_STRICT, 0);
	assert_string_equal(route(&f, &r), "10.0.0.1:20880,10.0.0.2:20880");
	eject(&f, "10.0.0.1:20880");
	eject(&f, "10.0.0.2:20880");
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getX in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(health removed 2, zone=hz removed 2)");
	fx_end(&f);

	/* An unknown zone: prefer uses all; strict says so. */
	start_zoned(&f, "xx", RESIL_ZONE_PREFER, 0);
	assert_string_equal(route(&f, &r),
	    "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	fx_end(&f);
	start_zoned(&f, "xx", RESIL_ZONE_STRICT, 0);
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getX in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(zone=xx removed 4: no endpoint is in that zone)");
	fx_end(&f);

	/* Panic skips zone affinity. */
	start_zoned(&f, "hz", RESIL_ZONE_STRICT, 50);
	eject(&f, "10.0.0.1:20880");
	eject(&f, "10.0.1.1:20881");
	assert_string_equal(route(&f, &r), "10.0.0.2:20880");
	eject(&f, "10.0.1.2:20881");
	assert_string_equal(route(&f, &r),
	    "10.0.0.1:20880,10.0.0.2:20880,10.0.1.1:20881,10.0.1.2:20881");
	fx_end(&f);
}

static void
test_router_message_reads_like_dubbo(void **state)
{
	static const ep eight[] = { { "a1", "hz", NULL, NULL, 0 },
		{ "a2", "hz", NULL, NULL, 0 }, { "a3", "hz", NULL, NULL, 0 },
		{ "a4", "hz", NULL, NULL, 0 },
		{ "c1", "sh", "canary", NULL, 0 },
		{ "c2", "sh", "canary", NULL, 0 },
		{ "c3", "sh", "canary", NULL, 0 },
		{ "c4", "sh", "canary", NULL, 0 } };
	resil_request r = req_of("M", "canary");
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.local_zone = "hz";
	f.scfg.zone_mode = RESIL_ZONE_STRICT;
	f.dcfg.empty_protection = 0; /* the empty directory below */
	assert_int_equal(fx_start(&f), 0);
	push(&f, eight, 8);
	assert_int_equal(resil_selector_route(f.sel, &r, f.c, &f.diag),
	    RESIL_E_NO_PROVIDER);
	assert_string_equal(f.diag.msg,
	    "Failed to invoke the method M in the service S. No provider "
	    "available for the service S: 8 endpoints, 0 after routers "
	    "(tag=canary removed 4, zone=hz removed 4)");
	/* An empty directory. */
	push(&f, eight, 0);
	assert_int_equal(resil_selector_route(f.sel, &r, f.c, &f.diag),
	    RESIL_E_NO_PROVIDER);
	assert_string_equal(f.diag.msg,
	    "Failed to invoke the method M in the service S. No provider "
	    "available for the service S: 0 endpoints. Please check if the "
	    "providers have been started and registered.");
	/* Picking from an empty set is a misuse, not a silent pick. */
	{
		resil_pick p;
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, &r, NULL, 0, &p, NULL),
		    RESIL_E_MISUSE);
	}
	fx_end(&f);
}

static void
test_router_zone_proportional(void **state)
{
	static const ep eps[] = { { "h1", "hz", NULL, NULL, 0 },
		{ "h2", "hz", NULL, NULL, 0 }, { "s1", "sh", NULL, NULL, 0 },
		{ "s2", "sh", NULL, NULL, 0 }, { "s3", "sh", NULL, NULL, 0 },
		{ "s4", "sh", NULL, NULL, 0 }, { "s5", "sh", NULL, NULL, 0 },
		{ "s6", "sh", NULL, NULL, 0 } };
	static const char *const names[] = { "hz", "sh" };
	static const uint32_t half[] = { 1, 1 };
	static const uint32_t few[] = { 1, 9 };
	static const double u[] = { 0.3, 0.7 };
	resil_request r = req_of("m", NULL);
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.local_zone = "hz";
	f.scfg.zone_mode = RESIL_ZONE_PROPORTIONAL;
	f.scfg.zone_names = names;
	f.scfg.zone_consumers = half;
	f.scfg.nzones = 2;
	assert_int_equal(fx_start(&f), 0);
	push(&f, eps, 8);
	/* Half the consumers are local, a quarter of the capacity: local
	 * with probability 0.25 / 0.5; else spill to sh. */
	scripted_set(&f.rnd, u, 2);
	assert_string_equal(route(&f, &r), "h1,h2");
	assert_string_equal(route(&f, &r), "s1,s2,s3,s4,s5,s6");
	assert_int_equal(f.rnd.calls, 2);
	fx_end(&f);

	/* Enough local capacity: always local, no draw. */
	fx_init(&f, 1000);
	f.scfg.local_zone = "hz";
	f.scfg.zone_mode = RESIL_ZONE_PROPORTIONAL;
	f.scfg.zone_names = names;
	f.scfg.zone_consumers = few;
	f.scfg.nzones = 2;
	assert_int_equal(fx_start(&f), 0);
	push(&f, eps, 8);
	assert_string_equal(route(&f, &r), "h1,h2");
	assert_int_equal(f.rnd.calls, 0);
	/* Below the minimum cluster size (6): no zone routing. */
	push(&f, eps, 5);
	assert_string_equal(route(&f, &r), "h1,h2,s1,s2,s3");
	fx_end(&f);
}

static void
test_router_config_validation(void **state)
{
	resil_selector_config cfg = resil_selector_config_default();
	resil_directory_config dc = resil_directory_config_default();
	resil_directory *d;
	resil_selector *sel;
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_directory_new(&d, &dc, NULL), RESIL_OK);
	cfg.panic_threshold_pct = 101;
	assert_int_equal(
	    resil_selector_new(&sel, d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "panic.threshold: 101 is out of range 0..100");
	cfg = resil_selector_config_default();
	cfg.local_zone = "";
	assert_int_equal(
	    resil_selector_new(&sel, d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "router.zone: empty (use NULL for no zone routing)");
	cfg = resil_selector_config_default();
	cfg.balance.hash_nodes = 0;
	assert_int_equal(
	    resil_selector_new(&sel, d, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(
	    diag.msg, "loadbalance.hash.nodes: 0 is out of range 1..10000");
	cfg = resil_selector_config_default();
	cfg.nconditions = 1;
	assert_int_equal(
	    resil_selector_new(&sel, d, &cfg, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_new(&sel, NULL, &cfg, &diag), RESIL_E_INVAL);
	resil_directory_free(d);
}

static void
test_router_condition_parse_fuzz(void **state)
{
	static const char alphabet[] = "ab=!&,> []*0123456789argumentsz.";
	resil_rng rng;
	char text[40];
	int i, ok = 0, bad = 0;

	(void)state;
	resil_rng_seed(&rng, 12);
	/* Seeded noise in the grammar's alphabet, and the "=>" the rule
	 * needs half the time: never a crash; an error always says where. */
	for (i = 0; i < 20000; i++) {
		size_t n = resil_rng_next(&rng) % (sizeof(text) - 3), k;
		resil_condition *c;
		resil_diag diag;
		resil_err err;
		for (k = 0; k < n; k++)
			text[k] = alphabet[resil_rng_next(&rng) %
			    (sizeof(alphabet) - 1)];
		text[n] = '\0';
		if (i % 2 == 0 && n > 4)
			memcpy(text + n / 2, "=>", 2);
		err = resil_condition_parse(&c, text, 0, NULL, &diag);
		if (err == RESIL_OK) {
			ok++;
			resil_condition_free(c);
		} else {
			assert_int_equal(err, RESIL_E_INVAL);
			assert_non_null(strstr(diag.msg, "at column "));
			bad++;
		}
	}
	assert_true(ok > 0);
	assert_true(bad > 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_router_tag),
		cmocka_unit_test(
		    test_router_condition_parse_errors_have_columns),
		cmocka_unit_test(test_router_condition_matching),
		cmocka_unit_test(test_router_condition_argument_path),
		cmocka_unit_test(test_router_conditions_replaced_at_run_time),
		cmocka_unit_test(test_router_health_and_panic),
		cmocka_unit_test(test_router_zone_prefer_and_strict),
		cmocka_unit_test(test_router_message_reads_like_dubbo),
		cmocka_unit_test(test_router_zone_proportional),
		cmocka_unit_test(test_router_config_validation),
		cmocka_unit_test(test_router_condition_parse_fuzz),
	};

	return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}

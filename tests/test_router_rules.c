/*
 * Issue 40.4: Dubbo's routing rules as Dubbo writes them. The condition
 * grammar's forms (methods, $-placeholders, attachments[key], ranges,
 * several tags, a provider's own methods), Dubbo 3's YAML condition and
 * tag rules, tag rules in the router chain, and the selector's rule
 * slots (a registry's set never drops the file's own).
 */
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

#include "router_internal.h"
#include "support/cluster_fx.h"

typedef struct ep {
	const char *addr, *tag, *params;
} ep;

static const ep eps[] = {
	{ "10.0.0.1:20880", NULL, "methods=getStock,getPrice&shard=5" },
	{ "10.0.0.2:20880", "gray,canary", "methods=getStock&shard=50" },
	{ "10.0.0.3:20881", NULL, "shard=500" },
	{ "10.0.1.1:20880", "blue", "methods=*&shard=x" },
};

/* Start with conditions c; tags: push the endpoints' static tags. */
static void
start_tags(fx *f, resil_condition **c, size_t nc, int tags)
{
	resil_endpoint_spec s[8];
	size_t i;

	fx_init(f, 1000);
	f->scfg.conditions = c;
	f->scfg.nconditions = nc;
	assert_int_equal(fx_start(f), 0);
	for (i = 0; i < sizeof(eps) / sizeof(eps[0]); i++) {
		s[i] = resil_endpoint_spec_default(eps[i].addr);
		s[i].tag = tags ? eps[i].tag : NULL;
		s[i].params = eps[i].params;
	}
	assert_int_equal(resil_directory_push(f->d, s, i, &f->diag), RESIL_OK);
}

static const char *
label(const char *address)
{
	static const char *const names[] = { "1", "2", "3", "b1" };
	size_t i;

	for (i = 0; i < 4; i++)
		if (strcmp(address, eps[i].addr) == 0)
			return names[i];
	return address;
}

/* The candidates of req as "1,2" (10.0.0.1, 10.0.0.2; b1 is 10.0.1.1),
 * or the error message. */
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
		    i == 0 ? "" : ",", label(c.address));
	}
	return out;
}

static void
start(fx *f, resil_condition **c, size_t nc)
{
	start_tags(f, c, nc, 0);
}

/* Route req with the one rule text (force as given). */
static const char *
with(const char *text, int force, const resil_request *req)
{
	static char out[512];
	resil_condition *c;
	fx f;

	assert_int_equal(
	    resil_condition_parse(&c, text, force, NULL, NULL), RESIL_OK);
	start(&f, &c, 1);
	snprintf(out, sizeof(out), "%s", route(&f, req));
	fx_end(&f);
	resil_condition_free(c);
	return out;
}

static resil_request
req_of(const char *method)
{
	resil_request r;

	memset(&r, 0, sizeof(r));
	r.method = method;
	return r;
}

static void
test_router_rules_methods_is_the_invoked_method(void **state)
{
	resil_request r = req_of("getStock");

	(void)state;
	/* WHEN: methods (Dubbo's key) reads the invoked method. */
	assert_string_equal(
	    with("methods = getStock => shard = 5", 1, &r), "1");
	r.method = "getPrice";
	assert_string_equal(
	    with("methods = getStock => shard = 5", 1, &r), "1,3,b1");
	/* THEN: methods is the provider's list: one of them. */
	r.method = "getStock";
	assert_string_equal(with("=> methods = getPrice", 1, &r), "1");
	assert_string_equal(with("=> methods != getPrice", 1, &r), "2,b1");
	/* methods = $method: the providers exporting the invoked one. */
	assert_string_equal(with("=> methods = $method", 1, &r), "1,2");
}

static void
test_router_rules_provider_methods_filter(void **state)
{
	resil_request r = req_of("getPrice");
	resil_route_stats st;
	fx f;

	(void)state;
	start(&f, NULL, 0);
	/* 2 exports getStock only: no candidate for getPrice. 3 has no
	 * methods (unknown: kept); b1 exports every method (*). */
	assert_string_equal(route(&f, &r), "1,3,b1");
	resil_candidates_stats(f.c, &st);
	assert_int_equal(st.removed_condition, 1);
	r.method = "getStock";
	assert_string_equal(route(&f, &r), "1,2,3,b1");
	r.method = NULL; /* no method asked for: no filter */
	assert_string_equal(route(&f, &r), "1,2,3,b1");
	r.method = "nope";
	assert_string_equal(route(&f, &r), "3,b1");
	fx_end(&f);

	/* Nobody exports it: the message says which stage. */
	assert_string_equal(
	    with("=> shard = 5", 1, &(resil_request) { .method = "sell" }),
	    "Failed to invoke the method sell in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(methods without sell removed 2, condition \"=> shard = 5\" "
	    "removed 2)");
}

static void
test_router_rules_placeholders(void **state)
{
	static const resil_param host2[] = { { "host", "10.0.0.2" } };
	static const resil_param shard[] = { { "s", "50" } };
	resil_request r = req_of("getStock");
	resil_condition *c = NULL;
	resil_diag d;

	(void)state;
	r.params = host2;
	r.nparams = 1;
	assert_string_equal(with("=> host = $host", 1, &r), "2");
	/* A placeholder the request lacks matches nothing. */
	r.params = shard;
	assert_string_equal(with("=> host = $host", 0, &r), "1,2,3,b1");
	assert_string_equal(with("=> host = $host", 1, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (condition \"=> host = $host\" removed 4)");
	assert_string_equal(with("=> shard = $s", 1, &r), "2");
	/* Among other values; and after '=>' only. */
	assert_string_equal(with("=> shard = 5,$s", 1, &r), "1,2");
	assert_int_equal(
	    resil_condition_parse(&c, "host = $host => x = y", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "condition \"host = $host => x = y\" at column 8: a "
	    "$-placeholder can only be used after '=>'");
	assert_int_equal(resil_condition_parse(&c, "=> host = $", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "condition \"=> host = $\" at column 11: expected a key after "
	    "'$'");
	assert_null(c);
}

static void
test_router_rules_attachments(void **state)
{
	static const resil_param att[] = { { "user", "vip" },
		{ "method", "x" } };
	resil_request r = req_of("getStock");
	resil_condition *c = NULL;
	resil_diag d;

	(void)state;
	assert_string_equal(
	    with("attachments[user] = vip => shard = 5", 1, &r), "1,2,3,b1");
	r.params = att;
	r.nparams = 2;
	assert_string_equal(
	    with("attachments[user] = vip => shard = 5", 1, &r), "1");
	assert_string_equal(
	    with("attachments[user] != vip => shard = 5", 1, &r), "1,2,3,b1");
	/* attachments[method] is the attachment, not the method. */
	assert_string_equal(
	    with("attachments[method] = x => shard = 5", 1, &r), "1");
	assert_int_equal(resil_condition_parse(
	                     &c, "=> attachments[user] = vip", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "condition \"=> attachments[user] = vip\" at column 4: "
	    "attachments[] can only be tested before '=>'");
	assert_int_equal(
	    resil_condition_parse(&c, "attachments[] = vip =>", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "condition \"attachments[] = vip =>\" at column 1: expected "
	    "attachments[key]");
}

static void
test_router_rules_ranges(void **state)
{
	const char *args[1];
	resil_request r = req_of("getStock");
	resil_condition *c = NULL;
	resil_diag d;

	(void)state;
	assert_string_equal(with("=> shard = 1~100", 1, &r), "1,2");
	assert_string_equal(with("=> shard = ~5", 1, &r), "1");
	assert_string_equal(with("=> shard = 50~", 1, &r), "2,3");
	/* x is no number: in no range, so it is kept by != only. */
	assert_string_equal(with("=> shard != 1~100", 1, &r), "3,b1");
	/* WHEN: arguments in a range. */
	args[0] = "42";
	r.args = args;
	r.nargs = 1;
	assert_string_equal(
	    with("arguments[0] = 10~99 => shard = 500", 1, &r), "3");
	args[0] = "100";
	assert_string_equal(
	    with("arguments[0] = 10~99 => shard = 500", 1, &r), "1,2,3,b1");
	args[0] = "-3";
	assert_string_equal(
	    with("arguments[0] = -5~-1 => shard = 500", 1, &r), "3");
	assert_int_equal(
	    resil_condition_parse(&c, "=> shard = 9~1", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "condition \"=> shard = 9~1\" at column 12: a range is N~M, ~M "
	    "or N~ with whole numbers N <= M");
	assert_int_equal(
	    resil_condition_parse(&c, "=> a = ~", 0, NULL, &d), RESIL_E_INVAL);
	assert_int_equal(resil_condition_parse(&c, "=> a = 1~x", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_condition_parse(&c, "=> a = 1~2~3", 0, NULL, &d),
	    RESIL_E_INVAL);
	assert_null(c);
}

/* Route req with the one rule text, the endpoints tagged. */
static const char *
with_tags(const char *text, int force, const resil_request *req)
{
	static char out[512];
	resil_condition *c;
	fx f;

	assert_int_equal(
	    resil_condition_parse(&c, text, force, NULL, NULL), RESIL_OK);
	start_tags(&f, &c, 1, 1);
	snprintf(out, sizeof(out), "%s", route(&f, req));
	fx_end(&f);
	resil_condition_free(c);
	return out;
}

static void
test_router_rules_several_tags(void **state)
{
	resil_request r = req_of("getStock");

	(void)state;
	r.tag = "canary";
	assert_string_equal(with_tags("=> shard = 5,50", 1, &r), "2");
	r.tag = "gray";
	assert_string_equal(with_tags("=> shard = 5,50", 1, &r), "2");
	r.tag = "gra"; /* not a prefix match: the untagged ones */
	assert_string_equal(with_tags("=> shard = 5,50", 1, &r), "1");
	r.tag = NULL;
	/* THEN tag: one of the endpoint's tags. */
	assert_string_equal(with_tags("=> tag = canary", 1, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (tag=(none) removed 2, condition \"=> tag = canary\" "
	    "removed 2)");
	r.tag = "canary";
	assert_string_equal(with_tags("=> tag = gray", 1, &r), "2");
}

/* ---- YAML ----------------------------------------------------------------
 */

static const char *cond_yaml = "configVersion: v3.0\n"
                               "scope: service\n"
                               "force: true\n"
                               "runtime: false\n"
                               "enabled: true\n"
                               "priority: 2\n"
                               "key: org.apache.dubbo.demo.DemoService\n"
                               "conditions:\n"
                               "  - method = getStock => shard = 5\n"
                               "  - 'method=getPrice => host = 10.0.0.2'\n";

static void
test_router_rules_condition_yaml(void **state)
{
	resil_condition **rules = NULL;
	resil_rule_info info;
	resil_request r = req_of("getStock");
	size_t n = 0;
	resil_diag d;
	fx f;

	(void)state;
	assert_int_equal(resil_condition_parse_yaml(&rules, &n, cond_yaml,
	                     "DemoService.condition-router", NULL, &info, &d),
	    RESIL_OK);
	assert_int_equal(n, 2);
	assert_string_equal(
	    resil_condition_text(rules[0]), "method = getStock => shard = 5");
	assert_string_equal(resil_condition_text(rules[1]),
	    "method=getPrice => host = 10.0.0.2");
	assert_int_equal(info.enabled, 1);
	assert_int_equal(info.force, 1);
	assert_int_equal(info.runtime, 0);
	assert_int_equal(info.priority, 2);
	assert_int_equal(info.scope, 0);
	assert_string_equal(info.key, "org.apache.dubbo.demo.DemoService");
	assert_string_equal(info.config_version, "v3.0");
	/* The same objects the text makes: routed the same. */
	start(&f, rules, n);
	assert_string_equal(route(&f, &r), "1");
	r.method = "getPrice";
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getPrice in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (methods without getPrice removed 1, condition "
	    "\"method=getPrice => host = 10.0.0.2\" removed 3)");
	fx_end(&f);
	resil_conditions_free(rules, n, NULL);
	resil_conditions_free(NULL, 0, NULL);

	/* enabled: false: no rule, said in info. */
	rules = NULL;
	assert_int_equal(
	    resil_condition_parse_yaml(&rules, &n,
	        "enabled: false\nconditions:\n  - '=> host = x'\n", NULL, NULL,
	        &info, &d),
	    RESIL_OK);
	assert_int_equal(n, 0);
	assert_null(rules);
	assert_int_equal(info.enabled, 0);
}

static void
yaml_err(const char *yaml, const char *want)
{
	resil_condition **rules = (resil_condition **)(uintptr_t)1;
	size_t n = 7;
	resil_diag d;

	assert_int_equal(resil_condition_parse_yaml(&rules, &n, yaml,
	                     "S.condition-router", NULL, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, want);
	assert_true(rules == (resil_condition **)(uintptr_t)1 && n == 7);
}

static void
test_router_rules_condition_yaml_errors(void **state)
{
	(void)state;
	yaml_err("conditions: [a\n",
	    "rule \"S.condition-router\": line 2 column 1: did not find "
	    "expected ',' or ']'");
	yaml_err("", "rule \"S.condition-router\": empty");
	yaml_err("- a\n",
	    "rule \"S.condition-router\": line 1 column 1: expected a "
	    "mapping of the rule's fields");
	yaml_err("force: yes\nconditions: ['=> a = b']\n",
	    "rule \"S.condition-router\": line 1 column 8: force: \"yes\" is "
	    "not true or false");
	yaml_err("priority: high\nconditions: ['=> a = b']\n",
	    "rule \"S.condition-router\": line 1 column 11: priority: "
	    "\"high\" is not a whole number in -1000000..1000000");
	yaml_err("scope: global\nconditions: ['=> a = b']\n",
	    "rule \"S.condition-router\": line 1 column 8: scope: \"global\" "
	    "is not service or application");
	yaml_err("key: x\nconditons: ['=> a = b']\n",
	    "rule \"S.condition-router\": line 2 column 1: unknown field "
	    "\"conditons\" of a condition rule");
	yaml_err("key: x\n",
	    "rule \"S.condition-router\": line 1 column 1: "
	    "no conditions");
	yaml_err("conditions: []\n",
	    "rule \"S.condition-router\": line 1 column 13: conditions: no "
	    "rule");
	yaml_err("conditions: '=> a = b'\n",
	    "rule \"S.condition-router\": line 1 column 13: conditions: "
	    "expected a list of rules");
	yaml_err("conditions:\n  - '=> a = b'\n  - 'method = => x = y'\n",
	    "rule \"S.condition-router\": line 3 column 5: conditions[1]: "
	    "condition \"method = => x = y\" at column 10: expected a value "
	    "after '='");
	yaml_err("configVersion: v3.1\nconditions:\n  - from: {match: a}\n",
	    "rule \"S.condition-router\": line 1 column 16: configVersion "
	    "\"v3.1\" is not supported (v3.0, v2.7)");
	yaml_err("conditions:\n  - {from: a}\n",
	    "rule \"S.condition-router\": line 2 column 5: conditions: "
	    "expected a scalar");
}

static const char *tag_yaml =
    "configVersion: v3.0\n"
    "force: false\n"
    "enabled: true\n"
    "key: shop-provider\n"
    "tags:\n"
    "  - name: gray\n"
    "    addresses: [\"10.0.0.1:20880\", \"10.0.1.*\"]\n"
    "  - name: big\n"
    "    match:\n"
    "      - key: shard\n"
    "        value:\n"
    "          exact: \"500\"\n";

static void
tag_start(fx *f, const char *yaml)
{
	resil_tag_rule *t = NULL;
	resil_diag d;

	start_tags(f, NULL, 0, 1);
	assert_int_equal(resil_tag_rule_parse_yaml(
	                     &t, yaml, "shop.tag-router", NULL, NULL, &d),
	    RESIL_OK);
	assert_int_equal(resil_selector_set_tag_rule(f->sel, t, &d), RESIL_OK);
}

static void
test_router_rules_tag_rule_routes_as_dubbo(void **state)
{
	resil_request r = req_of("getStock");
	fx f;

	(void)state;
	tag_start(&f, tag_yaml);
	/* Untagged: neither the rule's endpoints nor those statically
	 * tagged with one of its names (none here: 2 is gray,canary). */
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method "
	    "getStock in the service S. No "
	    "provider available for the "
	    "service S: 4 endpoints, 0 after "
	    "routers (tag=(none) removed 4)");
	r.method = NULL;
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method  in the service S. No provider "
	    "available for the service S: 4 endpoints, 0 after routers "
	    "(tag=(none) removed 4)");
	r.method = "getStock";
	r.tag = "gray"; /* the rule's addresses, not the static tag */
	assert_string_equal(route(&f, &r), "1,b1");
	r.method = "any";
	assert_string_equal(route(&f, &r), "b1");
	r.tag = "big"; /* by match */
	assert_string_equal(route(&f, &r), "3");
	r.tag = "canary"; /* not in the rule: the static tags */
	r.method = "getStock";
	assert_string_equal(route(&f, &r), "2");
	r.tag = "red"; /* nobody: untagged and not the rule's: none */
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (tag=red removed 4)");
	/* The tag rule gone: static tags again. */
	assert_int_equal(
	    resil_selector_set_tag_rule(f.sel, NULL, NULL), RESIL_OK);
	r.tag = "gray";
	assert_string_equal(route(&f, &r), "2");
	r.tag = NULL;
	assert_string_equal(route(&f, &r), "1,3");
	fx_end(&f);
}

static void
test_router_rules_tag_rule_fallback_and_force(void **state)
{
	resil_request r = req_of("getStock");
	fx f;

	(void)state;
	/* A tag whose endpoints are gone: the untagged ones, not the
	 * rule's; with the rule's force (or the request's): none. */
	tag_start(&f,
	    "tags:\n  - name: gray\n    addresses: [10.9.9.9]\n"
	    "  - name: x\n    addresses: ['0.0.0.0:20881']\n");
	r.tag = "gray";
	assert_string_equal(route(&f, &r), "1");
	r.tag_force = 1;
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (tag=gray removed 4)");
	r.tag_force = 0;
	r.tag = "x"; /* 0.0.0.0:port: any host on that port */
	assert_string_equal(route(&f, &r), "3");
	fx_end(&f);
	tag_start(&f,
	    "force: true\ntags:\n  - name: gray\n"
	    "    addresses: [10.9.9.9]\n");
	r.tag = "gray";
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (tag=gray removed 4)");
	fx_end(&f);
	/* enabled: false: the static tags, as with no rule. */
	tag_start(&f,
	    "enabled: false\ntags:\n  - name: gray\n"
	    "    addresses: [10.0.0.1]\n");
	r.tag = "gray";
	assert_string_equal(route(&f, &r), "2");
	fx_end(&f);
	/* The match kinds. */
	tag_start(&f,
	    "tags:\n"
	    "  - {name: p, match: [{key: shard, value: {prefix: "
	    "'5'}}]}\n"
	    "  - {name: w, match: [{key: methods, value: {wildcard: "
	    "'*Price*'}}]}\n"
	    "  - {name: e, match: [{key: methods, value: {empty: "
	    "x}}]}\n"
	    "  - {name: n, match: [{key: methods, value: {noempty: "
	    "x}}, {key: shard, value: {exact: x}}]}\n");
	r.method = NULL;
	r.tag = "p";
	assert_string_equal(route(&f, &r), "1,2,3");
	r.tag = "w";
	assert_string_equal(route(&f, &r), "1");
	r.tag = "e";
	assert_string_equal(route(&f, &r), "3");
	r.tag = "n";
	assert_string_equal(route(&f, &r), "b1");
	fx_end(&f);
}

static void
tag_err(const char *yaml, const char *want)
{
	resil_tag_rule *t = (resil_tag_rule *)(uintptr_t)1;
	resil_diag d;

	assert_int_equal(resil_tag_rule_parse_yaml(
	                     &t, yaml, "a.tag-router", NULL, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, want);
	assert_true(t == (resil_tag_rule *)(uintptr_t)1);
}

static void
test_router_rules_tag_yaml_errors(void **state)
{
	resil_tag_rule *t = NULL;
	resil_rule_info info;

	(void)state;
	assert_int_equal(
	    resil_tag_rule_parse_yaml(&t, tag_yaml, NULL, NULL, &info, NULL),
	    RESIL_OK);
	assert_int_equal(resil_tag_rule_count(t), 2);
	assert_string_equal(info.key, "shop-provider");
	resil_tag_rule_free(t);
	resil_tag_rule_free(NULL);
	assert_int_equal(resil_tag_rule_count(NULL), 0);
	tag_err("key: a\n", "rule \"a.tag-router\": line 1 column 1: no tags");
	tag_err("tags:\n  - addresses: [1.2.3.4]\n",
	    "rule \"a.tag-router\": line 2 column 5: tags: a tag without a "
	    "name");
	tag_err("tags:\n  - name: a\n  - name: a\n",
	    "rule \"a.tag-router\": line 3 column 5: tags: \"a\" is given "
	    "twice");
	tag_err("tags:\n  - name: a\n    adresses: [x]\n",
	    "rule \"a.tag-router\": line 3 column 5: tags: unknown or "
	    "repeated field \"adresses\"");
	tag_err("tags:\n  - name: a\n    addresses: x\n",
	    "rule \"a.tag-router\": line 3 column 16: tags[a].addresses: "
	    "expected a list");
	tag_err("tags:\n  - name: a\n    match: [{key: k, value: {regex: "
	        "'a.*'}}]\n",
	    "rule \"a.tag-router\": line 3 column 30: match.value: \"regex\" "
	    "is not supported (exact, prefix, wildcard, empty, noempty)");
	tag_err("tags:\n  - name: a\n    match: [{key: k}]\n",
	    "rule \"a.tag-router\": line 3 column 13: match: needs a key and "
	    "a value");
	tag_err("tags: {a: b}\n",
	    "rule \"a.tag-router\": line 1 column 7: tags: expected a list");
	tag_err("tags: [\n",
	    "rule \"a.tag-router\": line 2 column 1: did not find expected "
	    "node content");
}

/* ---- the selector's slots -------------------------------------------------
 */

static void
test_router_rules_registry_set_replaces_only_its_own(void **state)
{
	resil_condition *own, *reg[2], *center, *own2;
	resil_request r = req_of("getStock");
	resil_tag_rule *t;
	fx f;

	(void)state;
	assert_int_equal(
	    resil_condition_parse(&own, "=> shard = 5,50", 1, NULL, NULL),
	    RESIL_OK);
	start(&f, &own, 1);
	assert_string_equal(route(&f, &r), "1,2");
	/* The registry's rules come after the file's own. */
	assert_int_equal(resil_condition_parse(&reg[0], "=> shard = 5,500", 1,
	                     resil__selector_alloc(f.sel), NULL),
	    RESIL_OK);
	assert_int_equal(resil__selector_set_rules(
	                     f.sel, RESIL__RULES_REGISTRY, reg, 1, NULL),
	    RESIL_OK);
	assert_int_equal(resil_selector_condition_count(f.sel), 2);
	assert_string_equal(route(&f, &r), "1");
	/* A config center's set beside both. */
	assert_int_equal(resil_condition_parse(&center, "=> shard != 5", 0,
	                     resil__selector_alloc(f.sel), NULL),
	    RESIL_OK);
	assert_int_equal(resil__selector_set_rules(
	                     f.sel, RESIL__RULES_CENTER, &center, 1, NULL),
	    RESIL_OK);
	assert_int_equal(resil_selector_condition_count(f.sel), 3);
	assert_string_equal(route(&f, &r), "1"); /* unforced, nothing left */
	/* The registry's set replaced by an empty one: the file's stays. */
	assert_int_equal(resil__selector_set_rules(
	                     f.sel, RESIL__RULES_REGISTRY, NULL, 0, NULL),
	    RESIL_OK);
	assert_int_equal(resil_selector_condition_count(f.sel), 2);
	assert_string_equal(route(&f, &r), "2");
	/* A reload's own rules leave the registry's and the tag rule. */
	assert_int_equal(resil_tag_rule_parse_yaml(&t,
	                     "tags: [{name: g, addresses: [10.0.0.3]}]\n",
	                     NULL, resil__selector_alloc(f.sel), NULL, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_set_tag_rule(f.sel, t, NULL), RESIL_OK);
	assert_int_equal(resil_condition_parse(&own2, "=> shard = 500", 1,
	                     resil__selector_alloc(f.sel), NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, &own2, 1, NULL), RESIL_OK);
	assert_int_equal(resil_selector_condition_count(f.sel), 2);
	r.tag = "g";
	assert_string_equal(route(&f, &r), "3");
	r.tag = "nope"; /* the untagged ones; the new own rule forced */
	assert_string_equal(route(&f, &r),
	    "Failed to invoke the method getStock in the service S. No "
	    "provider available for the service S: 4 endpoints, 0 after "
	    "routers (tag=nope removed 1, condition \"=> shard = 500\" "
	    "removed 3)");
	assert_int_equal(resil__selector_set_rules(f.sel, 7, NULL, 0, &f.diag),
	    RESIL_E_INVAL);
	fx_end(&f);
	resil_condition_free(own);
	(void)reg[1];
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_router_rules_methods_is_the_invoked_method),
		cmocka_unit_test(test_router_rules_provider_methods_filter),
		cmocka_unit_test(test_router_rules_placeholders),
		cmocka_unit_test(test_router_rules_attachments),
		cmocka_unit_test(test_router_rules_ranges),
		cmocka_unit_test(test_router_rules_several_tags),
		cmocka_unit_test(test_router_rules_condition_yaml),
		cmocka_unit_test(test_router_rules_condition_yaml_errors),
		cmocka_unit_test(test_router_rules_tag_rule_routes_as_dubbo),
		cmocka_unit_test(
		    test_router_rules_tag_rule_fallback_and_force),
		cmocka_unit_test(test_router_rules_tag_yaml_errors),
		cmocka_unit_test(
		    test_router_rules_registry_set_replaces_only_its_own),
	};

	return cmocka_run_group_tests_name("router_rules", tests, NULL, NULL);
}

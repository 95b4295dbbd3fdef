/*
 * libFuzzer harness: Dubbo 3's routing rules in YAML
 * (resil_condition_parse_yaml, resil_tag_rule_parse_yaml).
 *
 * Input: the first byte's low bit picks the kind (0 condition rule, 1 tag
 * rule), the rest is the YAML (up to its first NUL). Properties:
 *   - a rule is accepted, or refused with RESIL_E_INVAL, a message naming
 *     the rule and the outputs untouched;
 *   - accepted condition rules: none only when disabled; each keeps a
 *     text that resil_condition_parse() accepts again with the rule's
 *     force;
 *   - an accepted tag rule, given to a selector over a fixed directory,
 *     routes tagged and untagged requests to endpoints of the directory,
 *     each once, never more than there are.
 */
#include <string.h>

#include <resil/directory.h>
#include <resil/router.h>
#include <resil/selector.h>

#include "fuzz.h"

static const char *const addrs[] = { "10.0.0.1:20880", "10.0.0.2:20880",
	"10.0.0.3:20881", "10.0.1.4:20880" };

static resil_directory *
directory(void)
{
	static resil_directory *d;
	resil_directory_config cfg;
	resil_endpoint_spec s[4];
	int i;

	if (d != NULL)
		return d;
	resil_directory_config_init(&cfg);
	FUZZ_CHECK(resil_directory_new(&d, &cfg, NULL) == RESIL_OK, "dir");
	for (i = 0; i < 4; i++)
		s[i] = resil_endpoint_spec_default(addrs[i]);
	s[0].tag = "gray";
	s[0].params = "version=1.0&methods=getStock";
	s[1].tag = "gray,blue";
	s[1].params = "shard=5";
	s[3].params = "application=shop&shard=500";
	FUZZ_CHECK(resil_directory_push(d, s, 4, NULL) == RESIL_OK, "push");
	return d;
}

static void
route_tags(resil_tag_rule *t)
{
	static const char *const tags[] = { NULL, "gray", "blue", "a", "" };
	resil_selector_config cfg;
	resil_selector *sel;
	resil_candidates *cs;
	resil_request req;
	size_t i, j, k, n;

	resil_selector_config_init(&cfg);
	cfg.panic_threshold_pct = 0;
	FUZZ_CHECK(
	    resil_selector_new(&sel, directory(), &cfg, NULL) == RESIL_OK,
	    "selector");
	FUZZ_CHECK(resil_selector_set_tag_rule(sel, t, NULL) == RESIL_OK,
	    "set_tag_rule");
	FUZZ_CHECK(resil_candidates_new(&cs, sel) == RESIL_OK, "candidates");
	for (k = 0; k < sizeof(tags) / sizeof(tags[0]); k++) {
		int seen[4] = { 0, 0, 0, 0 };

		memset(&req, 0, sizeof(req));
		req.method = "getStock";
		req.tag = tags[k];
		if (resil_selector_route(sel, &req, cs, NULL) != RESIL_OK)
			continue;
		n = resil_candidates_count(cs);
		FUZZ_CHECK(n >= 1 && n <= 4, "%zu candidates", n);
		for (i = 0; i < n; i++) {
			resil_candidate cd;

			FUZZ_CHECK(
			    resil_candidates_get(cs, i, &cd) == RESIL_OK,
			    "get %zu", i);
			for (j = 0; j < 4; j++)
				if (strcmp(cd.address, addrs[j]) == 0)
					break;
			FUZZ_CHECK(j < 4, "unknown candidate %s", cd.address);
			FUZZ_CHECK(!seen[j], "%s twice", cd.address);
			seen[j] = 1;
		}
	}
	resil_candidates_free(cs);
	resil_selector_free(sel); /* frees t */
}

static void
conditions(const char *text)
{
	resil_condition **rules, **sentinel, *again;
	resil_rule_info info;
	resil_diag d;
	resil_err e;
	size_t n = 12345, i;

	sentinel = (resil_condition **)&d;
	rules = sentinel;
	d.msg[0] = '\0';
	e = resil_condition_parse_yaml(
	    &rules, &n, text, "F.condition-router", NULL, &info, &d);
	if (e != RESIL_OK) {
		FUZZ_CHECK(e == RESIL_E_INVAL, "%s", resil_err_name(e));
		FUZZ_CHECK(rules == sentinel && n == 12345,
		    "outputs changed on error");
		FUZZ_CHECK(strstr(d.msg, "F.condition-router") != NULL ||
		        strstr(d.msg, "condition \"") != NULL,
		    "message without the rule: %s", d.msg);
		return;
	}
	FUZZ_CHECK(n > 0 || !info.enabled, "enabled with no rule");
	for (i = 0; i < n; i++) {
		FUZZ_CHECK(resil_condition_parse(&again,
		               resil_condition_text(rules[i]), info.force,
		               NULL, &d) == RESIL_OK,
		    "rule %zu refused again: %s", i, d.msg);
		resil_condition_free(again);
	}
	resil_conditions_free(rules, n, NULL);
}

static void
tag_rule(const char *text)
{
	resil_tag_rule *t, *sentinel;
	resil_rule_info info;
	resil_diag d;
	resil_err e;

	sentinel = (resil_tag_rule *)&d;
	t = sentinel;
	d.msg[0] = '\0';
	e = resil_tag_rule_parse_yaml(
	    &t, text, "F.tag-router", NULL, &info, &d);
	if (e != RESIL_OK) {
		FUZZ_CHECK(e == RESIL_E_INVAL, "%s", resil_err_name(e));
		FUZZ_CHECK(t == sentinel, "*out changed on error");
		FUZZ_CHECK(strstr(d.msg, "F.tag-router") != NULL,
		    "message without the rule: %s", d.msg);
		return;
	}
	route_tags(t);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size == 0)
		return 0;
	text = malloc(size);
	FUZZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (data[0] & 1)
		tag_rule(text);
	else
		conditions(text);
	free(text);
	return 0;
}

/*
 * libFuzzer harness: Dubbo condition rules (resil_condition_parse).
 *
 * Input: the first byte's low bit is `force`, the rest the rule (up to its
 * first NUL). Properties:
 *   - a rule is accepted, or refused with RESIL_E_INVAL, a message and
 *     *out untouched;
 *   - an accepted rule keeps its text as given (resil_condition_text), and
 *     that text parses again;
 *   - routed by a selector over a fixed directory of four endpoints, the
 *     rule only removes endpoints: the candidates are endpoints of the
 *     directory, each once, the stats add up, and without force a rule
 *     with a THEN part never leaves the set empty (router.h: when nothing
 *     matches the THEN part the set is unchanged, empty with force; an
 *     empty THEN excludes everything).
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
	cfg.outlier.max_ejection_pct = 0;
	FUZZ_CHECK(resil_directory_new(&d, &cfg, NULL) == RESIL_OK, "dir");
	for (i = 0; i < 4; i++)
		s[i] = resil_endpoint_spec_default(addrs[i]);
	s[0].zone = "east";
	s[0].params = "version=1.0&group=a";
	s[1].zone = "west";
	s[1].params = "version=2.0";
	s[2].zone = "east";
	s[3].params = "group=b&application=shop";
	FUZZ_CHECK(resil_directory_push(d, s, 4, NULL) == RESIL_OK, "push");
	return d;
}

/* The rule has a THEN part: something but blanks after its "=>", and
 * not Dubbo's `false`, which keeps nothing as an empty THEN does. */
static int
has_then(const char *text)
{
	const char *p = strstr(text, "=>"), *end;

	if (p == NULL)
		return 1; /* a rule without "=>" is all THEN (Dubbo) */
	for (p += 2; *p == ' ' || *p == '\t'; p++)
		;
	for (end = p + strlen(p);
	     end > p && (end[-1] == ' ' || end[-1] == '\t'); end--)
		;
	if (end - p == 5 && memcmp(p, "false", 5) == 0)
		return 0;
	return end > p;
}

static void
route_check(resil_condition *c, int force)
{
	static const char *const args[] = { "vip-1", "42" };
	resil_selector_config cfg;
	resil_selector *sel;
	resil_candidates *cs;
	resil_request req;
	resil_route_stats st;
	resil_diag d;
	resil_err e;
	size_t i, j, n;
	int seen[4] = { 0, 0, 0, 0 };

	resil_selector_config_init(&cfg);
	cfg.conditions = &c;
	cfg.nconditions = 1;
	cfg.panic_threshold_pct = 0; /* no panic: see the rule alone */
	FUZZ_CHECK(
	    resil_selector_new(&sel, directory(), &cfg, NULL) == RESIL_OK,
	    "selector");
	FUZZ_CHECK(resil_candidates_new(&cs, sel) == RESIL_OK, "candidates");
	memset(&req, 0, sizeof(req));
	req.method = "getStock";
	req.args = args;
	req.nargs = 2;
	d.msg[0] = '\0';
	e = resil_selector_route(sel, &req, cs, &d);
	if (e != RESIL_OK) {
		FUZZ_CHECK(force || !has_then(resil_condition_text(c)),
		    "\"%s\" without force left no candidate: %s",
		    resil_condition_text(c), d.msg);
	} else {
		n = resil_candidates_count(cs);
		FUZZ_CHECK(n >= 1 && n <= 4, "%zu candidates", n);
		resil_candidates_stats(cs, &st);
		FUZZ_CHECK(st.endpoints == 4 && st.candidates == n &&
		        st.removed_tag + st.removed_condition +
		                st.removed_health + st.removed_zone + n ==
		            4,
		    "stats do not add up for \"%s\"", resil_condition_text(c));
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
	resil_selector_free(sel);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	resil_condition *c, *again, *sentinel;
	resil_diag d;
	resil_err e;
	char *text;
	int force;

	if (size == 0)
		return 0;
	force = data[0] & 1;
	text = malloc(size);
	FUZZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';

	sentinel = (resil_condition *)&d;
	c = sentinel;
	d.msg[0] = '\0';
	e = resil_condition_parse(&c, text, force, NULL, &d);
	if (e != RESIL_OK) {
		FUZZ_CHECK(
		    e == RESIL_E_INVAL, "\"%s\": %s", text, resil_err_name(e));
		FUZZ_CHECK(c == sentinel, "*out changed on error");
		FUZZ_CHECK(d.msg[0] != '\0',
		    "\"%s\" refused without a message", text);
		free(text);
		return 0;
	}
	FUZZ_CHECK(strcmp(resil_condition_text(c), text) == 0,
	    "text \"%s\" kept as \"%s\"", text, resil_condition_text(c));
	free(text);
	e = resil_condition_parse(
	    &again, resil_condition_text(c), force, NULL, &d);
	FUZZ_CHECK(e == RESIL_OK, "own text refused: %s", d.msg);
	resil_condition_free(again);
	route_check(c, force);
	resil_condition_free(c);
	return 0;
}

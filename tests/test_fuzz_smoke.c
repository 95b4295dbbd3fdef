/*
 * A deterministic fuzz smoke test of the two text parsers a user feeds:
 * mock specs and configuration text. Seeded random inputs built from the
 * grammars' own tokens; every input must be accepted or refused with a
 * message (never crash, leak or read out of bounds: run under ASan), and
 * an accepted mock spec must print a canonical text that parses back to
 * the same normal form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/mock.h>

#define ROUNDS 20000

static const char *const mock_tokens[] = { "force", "fail", ":", "return",
	"throw", "null", "empty", "true", "false", "default", " ", "  ", "1",
	"-2", "3.5", "1e999", "'x'", "\"y\"", "`z`", "'", "\"", "{", "}", "[",
	"]", "{\"a\":1}", "[1,2]", ",", "N/A", "0", "Exc", "$", ".", "\t",
	"FORCE", "Return", "x", "\\", "\xc3\xa9", "9223372036854775808",
	"'a\\b'", "\"a\\\"b\"", "\\n", "\\u0000", "\\u00e9", "\xff", "\n",
	"{\"k\":\"\\\\\"}", "[\"\\\"\"]", "ture", "-0.0", "1e5", "\"\"",
	"''" };

static const char *const conf_tokens[] = { "service", "=", "\n", "breaker.",
	"retry.", "cache.", "ratelimit.", "bulkhead.", "mock", "getStock.",
	"failure_rate", "consecutive_failures", "max_attempts", "max_age",
	"open_wait", "window", "count", "time", "10", "0", "101", "5s", "3ms",
	"none", "true", "off", "#", " ", "fail:return null", "force:return 0",
	"type", "int", "string", "timeout", "delay", "jitter", "full",
	"enabled", "-1", "18446744073709551616", "\r\n", ".", "x" };

static size_t
build(
    char *buf, size_t cap, resil_rng *rng, const char *const *tok, size_t ntok)
{
	size_t len = 0, n = 1 + resil_rng_next(rng) % 12, i;

	for (i = 0; i < n; i++) {
		const char *t = tok[resil_rng_next(rng) % ntok];
		size_t tl = strlen(t);

		if (len + tl + 1 >= cap)
			break;
		memcpy(buf + len, t, tl);
		len += tl;
	}
	buf[len] = '\0';
	return len;
}

static void
test_fuzz_smoke_mock_specs(void **state)
{
	static const resil_type types[] = { RESIL_TYPE_ANY, RESIL_TYPE_VOID,
		RESIL_TYPE_BOOL, RESIL_TYPE_INT, RESIL_TYPE_DOUBLE,
		RESIL_TYPE_STRING, RESIL_TYPE_BYTES, RESIL_TYPE_ARRAY,
		RESIL_TYPE_OBJECT, RESIL_TYPE_JSON };
	resil_rng rng;
	char buf[256], canon[512], canon2[512];
	unsigned ok = 0, refused = 0;
	int i;

	(void)state;
	resil_rng_seed(&rng, 20261130);
	for (i = 0; i < ROUNDS; i++) {
		resil_type t = types[resil_rng_next(&rng) % 10];
		resil_mock_spec s, again;
		resil_diag d;
		resil_err e;

		build(buf, sizeof(buf), &rng, mock_tokens,
		    sizeof(mock_tokens) / sizeof(mock_tokens[0]));
		d.msg[0] = '\0';
		e = resil_mock_parse(&s, buf, t, NULL, &d);
		if (e == RESIL_E_INVAL) {
			refused++;
			if (d.msg[0] == '\0')
				fail_msg("refused without a message: %s", buf);
			continue;
		}
		assert_int_equal(e, RESIL_OK);
		ok++;
		resil_mock_spec_format(&s, canon, sizeof(canon));
		if (resil_mock_parse(&again, canon, t, NULL, &d) != RESIL_OK)
			fail_msg("canonical \"%s\" of \"%s\" refused: %s",
			    canon, buf, d.msg);
		if (!resil_mock_spec_equal(&s, &again))
			fail_msg(
			    "\"%s\" -> \"%s\" changed meaning", buf, canon);
		/* ...and the canonical text is a fixed point. */
		resil_mock_spec_format(&again, canon2, sizeof(canon2));
		if (strcmp(canon, canon2) != 0)
			fail_msg(
			    "\"%s\" -> \"%s\" -> \"%s\"", buf, canon, canon2);
		resil_mock_spec_free(&again);
		resil_mock_spec_free(&s);
	}
	/* The generator reaches both sides of the grammar. */
	assert_true(ok > 100);
	assert_true(refused > 100);
}

static void
test_fuzz_smoke_config_text(void **state)
{
	resil_rng rng;
	char buf[512];
	unsigned ok = 0, refused = 0;
	int i;

	(void)state;
	resil_rng_seed(&rng, 7);
	for (i = 0; i < ROUNDS; i++) {
		resil_config *conf = NULL;
		resil_diag d;
		resil_err e;

		build(buf, sizeof(buf), &rng, conf_tokens,
		    sizeof(conf_tokens) / sizeof(conf_tokens[0]));
		d.msg[0] = '\0';
		e = resil_config_parse_string(&conf, buf, "fuzz", NULL, &d);
		if (e == RESIL_OK) {
			ok++;
			assert_non_null(resil_config_pipeline(conf));
			resil_config_free(conf);
			continue;
		}
		assert_int_equal(e, RESIL_E_INVAL);
		assert_null(conf);
		refused++;
		/* Every refusal says where: "fuzz:LINE: ..." or the key. */
		if (d.msg[0] == '\0')
			fail_msg("refused without a message: %s", buf);
	}
	assert_true(ok > 50);
	assert_true(refused > 100);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fuzz_smoke_mock_specs),
		cmocka_unit_test(test_fuzz_smoke_config_text),
	};

	return cmocka_run_group_tests_name("fuzz_smoke", tests, NULL, NULL);
}

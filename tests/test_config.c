/* mkstemp, write, unlink, strdup. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resil/config.h>

#include "support/fail_alloc.h"

/* Parse text as "svc.conf"; on success return the config, else NULL with
 * the message in *d. */
static resil_config *
parse(const char *text, resil_diag *d, resil_err *errp)
{
	resil_config *c = NULL;
	resil_err err;

	d->msg[0] = '\0';
	err = resil_config_parse_string(&c, text, "svc.conf", NULL, d);
	if (errp != NULL)
		*errp = err;
	if (err != RESIL_OK)
		assert_null(c);
	return c;
}

static resil_config *
parse_ok(const char *text)
{
	resil_diag d;
	resil_err err;
	resil_config *c = parse(text, &d, &err);

	if (err != RESIL_OK)
		fail_msg("unexpected error: %s", d.msg);
	assert_non_null(c);
	return c;
}

static void
expect_error(const char *text, const char *msg)
{
	resil_diag d;
	resil_err err;
	resil_config *c = parse(text, &d, &err);

	assert_int_equal(err, RESIL_E_INVAL);
	assert_null(c);
	assert_string_equal(d.msg, msg);
}

static void
test_config_issue_examples(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;

	(void)state;
	c = parse_ok("breaker.failure_rate=50\n"
	             "retry.max_attempts=3\n"
	             "mock=fail:return null\n"
	             "getStock.mock=force:return 0\n"
	             "cache.max_age=10s\n");
	pc = resil_config_pipeline(c);
	assert_non_null(pc);
	assert_int_equal(pc->size, sizeof(resil_pipeline_config));
	assert_true(pc->breaker_enabled);
	assert_int_equal(pc->breaker.failure_rate_pct, 50);
	assert_true(pc->retry_enabled);
	assert_int_equal(pc->retry.max_attempts, 3);
	assert_string_equal(pc->mock, "fail:return null");
	assert_int_equal(pc->nmethods, 1);
	assert_string_equal(pc->methods[0].name, "getStock");
	assert_string_equal(pc->methods[0].mock, "force:return 0");
	assert_int_equal(pc->methods[0].type, RESIL_TYPE_ANY);
	assert_true(pc->cache_enabled);
	assert_int_equal(pc->cache.max_age, 10 * RESIL_NS_PER_SEC);
	assert_false(pc->ratelimit_enabled);
	assert_false(pc->bulkhead_enabled);
	resil_config_free(c);
}

static void
test_config_empty_is_defaults(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;
	resil_pipeline_config def = resil_pipeline_config_default();

	(void)state;
	assert_int_equal(resil_config_new(&c, NULL), RESIL_OK);
	pc = resil_config_pipeline(c);
	/* Byte for byte: no stage on, every default in place; the text's
	 * cluster keys (none: its origin alone) as a reload compares them. */
	assert_non_null(pc->cluster_keys);
	assert_string_equal(pc->cluster_keys, "<string>\n");
	def.cluster_keys = pc->cluster_keys;
	assert_memory_equal(pc, &def, sizeof(def));
	assert_int_equal(resil_config_count(c), 0);
	resil_config_free(c);

	c = parse_ok("\n\n   \n# nothing\n\t# still nothing\r\n");
	def.cluster_keys = resil_config_pipeline(c)->cluster_keys;
	assert_string_equal(def.cluster_keys, "svc.conf\n");
	assert_memory_equal(resil_config_pipeline(c), &def, sizeof(def));
	resil_config_free(c);
}

static void
test_config_every_key(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;

	(void)state;
	c = parse_ok("service=com.foo.StockService\n"
	             "timeout=250ms\n"
	             "mock=return null\n"
	             "breaker.per_method=true\n"
	             "breaker.consecutive_failures=5\n"
	             "breaker.failure_rate=40\n"
	             "breaker.slow_rate=80\n"
	             "breaker.slow_threshold=2s\n"
	             "breaker.min_calls=7\n"
	             "breaker.window=time\n"
	             "breaker.window_size=60\n"
	             "breaker.bucket=500ms\n"
	             "breaker.open_wait=10s\n"
	             "breaker.open_wait_multiplier=1.5\n"
	             "breaker.open_wait_max=1m\n"
	             "breaker.probes=3\n"
	             "breaker.reopen_on_first_failure=yes\n"
	             "breaker.max_half_open=1h\n"
	             "retry.max_attempts=4\n"
	             "retry.backoff=exponential\n"
	             "retry.delay=100ms\n"
	             "retry.multiplier=3\n"
	             "retry.max_delay=5s\n"
	             "retry.jitter=decorrelated\n"
	             "retry.jitter_factor=0.25\n"
	             "retry.seed=18446744073709551615\n"
	             "retry.deadline=30s\n"
	             "retry.on_open=on\n"
	             "retry.on_limited=yes\n"
	             "retry.fail_after_max_attempts=1\n"
	             "retry.budget_ratio=0.2\n"
	             "retry.budget_max_tokens=50\n"
	             "retry.budget_min_retries=3\n"
	             "retry.budget_period=2s\n"
	             "cache.max_entries=4096\n"
	             "cache.max_bytes=65536\n"
	             "cache.max_age=90s\n"
	             "cache.shards=8\n"
	             "ratelimit.rate=20\n"
	             "ratelimit.period=1s\n"
	             "ratelimit.burst=5\n"
	             "ratelimit.batch=4\n"
	             "hedge.max=2\n"
	             "hedge.delay=50ms\n"
	             "bulkhead.max_concurrent=10\n"
	             "bulkhead.adaptive=true\n"
	             "bulkhead.min_limit=2\n"
	             "bulkhead.max_limit=40\n"
	             "bulkhead.target_latency=20ms\n"
	             "bulkhead.increase=2\n"
	             "bulkhead.backoff_pct=75\n");
	pc = resil_config_pipeline(c);
	assert_string_equal(pc->service, "com.foo.StockService");
	assert_int_equal(pc->timeout_ns, 250 * RESIL_NS_PER_MS);
	assert_string_equal(pc->mock, "return null");

	assert_true(pc->breaker_enabled);
	assert_true(pc->breaker_per_method);
	assert_int_equal(pc->breaker.consecutive_failures, 5);
	assert_int_equal(pc->breaker.failure_rate_pct, 40);
	assert_int_equal(pc->breaker.slow_rate_pct, 80);
	assert_int_equal(pc->breaker.slow_threshold_ns, 2 * RESIL_NS_PER_SEC);
	assert_int_equal(pc->breaker.min_calls, 7);
	assert_int_equal(pc->breaker.window_type, RESIL_WINDOW_TIME);
	assert_int_equal(pc->breaker.window_size, 60);
	assert_int_equal(pc->breaker.bucket_ns, 500 * RESIL_NS_PER_MS);
	assert_int_equal(pc->breaker.open_wait_ns, 10 * RESIL_NS_PER_SEC);
	assert_true(pc->breaker.open_wait_multiplier == 1.5);
	assert_int_equal(pc->breaker.open_wait_max_ns, 60 * RESIL_NS_PER_SEC);
	assert_int_equal(pc->breaker.permitted_probes, 3);
	assert_int_equal(pc->breaker.reopen_on_first_failure, 1);
	assert_int_equal(
	    pc->breaker.max_half_open_ns, 3600 * RESIL_NS_PER_SEC);

	assert_true(pc->retry_enabled);
	assert_int_equal(pc->retry.max_attempts, 4);
	assert_int_equal(pc->retry.backoff, RESIL_BACKOFF_EXPONENTIAL);
	assert_int_equal(pc->retry.base_delay_ns, 100 * RESIL_NS_PER_MS);
	assert_true(pc->retry.multiplier == 3.0);
	assert_int_equal(pc->retry.max_delay_ns, 5 * RESIL_NS_PER_SEC);
	assert_int_equal(pc->retry.jitter, RESIL_JITTER_DECORRELATED);
	assert_true(pc->retry.jitter_factor == 0.25);
	assert_true(pc->retry.seed == UINT64_MAX);
	assert_int_equal(pc->retry.deadline_ns, 30 * RESIL_NS_PER_SEC);
	assert_int_equal(pc->retry.retry_on_open, 1);
	assert_int_equal(pc->retry.retry_on_limited, 1);
	assert_int_equal(pc->retry.fail_after_max_attempts, 1);
	assert_true(pc->retry.budget_ratio == 0.2);
	assert_int_equal(pc->retry.budget_max_tokens, 50);
	assert_int_equal(pc->retry.budget_min_retries, 3);
	assert_int_equal(pc->retry.budget_period_ns, 2 * RESIL_NS_PER_SEC);

	assert_true(pc->cache_enabled);
	assert_int_equal(pc->cache.max_entries, 4096);
	assert_int_equal(pc->cache.max_bytes, 65536);
	assert_int_equal(pc->cache.max_age, 90 * RESIL_NS_PER_SEC);
	assert_int_equal(pc->cache.shards, 8);

	assert_true(pc->ratelimit_enabled);
	assert_int_equal(pc->ratelimit.rate, 20);
	assert_int_equal(pc->ratelimit.period_ns, RESIL_NS_PER_SEC);
	assert_int_equal(pc->ratelimit.burst, 5);
	assert_int_equal(pc->ratelimit.batch, 4);
	assert_int_equal(pc->hedge_max, 2);
	assert_int_equal(pc->hedge_delay_ns, 50 * RESIL_NS_PER_MS);

	assert_true(pc->bulkhead_enabled);
	assert_int_equal(pc->bulkhead.max_concurrent, 10);
	assert_int_equal(pc->bulkhead.adaptive, 1);
	assert_int_equal(pc->bulkhead.min_limit, 2);
	assert_int_equal(pc->bulkhead.max_limit, 40);
	assert_int_equal(pc->bulkhead.target_latency_ns, 20 * RESIL_NS_PER_MS);
	assert_int_equal(pc->bulkhead.increase, 2);
	assert_int_equal(pc->bulkhead.backoff_pct, 75);

	/* What text cannot say is left for the caller. */
	assert_null(pc->registry);
	assert_null(pc->clock);
	assert_null(pc->alloc);
	assert_null(pc->listener);
	assert_null(pc->classifier.fn);
	assert_null(pc->breaker.clock);
	assert_int_equal(pc->nmethods, 0);
	assert_null(pc->methods);

	/* Each stage's own check accepts what was built. */
	assert_int_equal(
	    resil_breaker_config_validate(&pc->breaker, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_config_validate(&pc->retry, NULL), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_config_validate(&pc->ratelimit, NULL), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_config_validate(&pc->bulkhead, NULL), RESIL_OK);
	resil_config_free(c);
}

static void
test_config_other_enum_and_bool_spellings(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;

	(void)state;
	c = parse_ok("breaker.window=COUNT\n"
	             "breaker.reopen_on_first_failure=Off\n"
	             "retry.backoff=Fixed\n"
	             "retry.jitter=proportional\n"
	             "retry.on_open=NO\n"
	             "retry.max_delay=none\n"
	             "cache.max_age=None\n"
	             "bulkhead.adaptive=0\n");
	pc = resil_config_pipeline(c);
	assert_int_equal(pc->breaker.window_type, RESIL_WINDOW_COUNT);
	assert_int_equal(pc->breaker.reopen_on_first_failure, 0);
	assert_int_equal(pc->retry.backoff, RESIL_BACKOFF_FIXED);
	assert_int_equal(pc->retry.jitter, RESIL_JITTER_PROPORTIONAL);
	assert_int_equal(pc->retry.retry_on_open, 0);
	assert_true(pc->retry.max_delay_ns == UINT64_MAX);
	assert_true(pc->cache.max_age == RESIL_CACHE_NO_AGE_LIMIT);
	assert_int_equal(pc->bulkhead.adaptive, 0);
	resil_config_free(c);

	c = parse_ok("retry.jitter=full\n");
	assert_int_equal(
	    resil_config_pipeline(c)->retry.jitter, RESIL_JITTER_FULL);
	resil_config_free(c);
	c = parse_ok("retry.jitter=equal\n");
	assert_int_equal(
	    resil_config_pipeline(c)->retry.jitter, RESIL_JITTER_EQUAL);
	resil_config_free(c);
	c = parse_ok("retry.jitter=none\n");
	assert_int_equal(
	    resil_config_pipeline(c)->retry.jitter, RESIL_JITTER_NONE);
	resil_config_free(c);
	/* Polly's Linear and its exponential jitter, and read back. */
	c = parse_ok("retry.backoff=Linear\nretry.jitter=decorrelated_v2\n");
	assert_int_equal(
	    resil_config_pipeline(c)->retry.backoff, RESIL_BACKOFF_LINEAR);
	assert_int_equal(resil_config_pipeline(c)->retry.jitter,
	    RESIL_JITTER_DECORRELATED_V2);
	{
		char buf[32];

		assert_int_equal(
		    resil_config_get(c, "retry.backoff", buf, sizeof(buf)),
		    RESIL_OK);
		assert_string_equal(buf, "linear");
		assert_int_equal(
		    resil_config_get(c, "retry.jitter", buf, sizeof(buf)),
		    RESIL_OK);
		assert_string_equal(buf, "decorrelated_v2");
	}
	resil_config_free(c);
}

static void
test_config_stage_switches(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;

	(void)state;
	/* enabled=true alone turns a stage on with its defaults. */
	c = parse_ok("ratelimit.enabled=true\n");
	pc = resil_config_pipeline(c);
	assert_true(pc->ratelimit_enabled);
	assert_int_equal(pc->ratelimit.rate, 100);
	assert_false(pc->breaker_enabled);
	resil_config_free(c);

	/* enabled=false wins, before or after the stage's other keys. */
	c = parse_ok("retry.max_attempts=5\nretry.enabled=false\n");
	pc = resil_config_pipeline(c);
	assert_false(pc->retry_enabled);
	assert_int_equal(pc->retry.max_attempts, 5);
	resil_config_free(c);
	c = parse_ok("breaker.enabled=no\nbreaker.min_calls=3\n");
	assert_false(resil_config_pipeline(c)->breaker_enabled);
	resil_config_free(c);

	/* A disabled stage is not validated. */
	c = parse_ok("breaker.enabled=false\nbreaker.failure_rate=0\n");
	assert_false(resil_config_pipeline(c)->breaker_enabled);
	resil_config_free(c);

	/* per_method is a breaker key: it turns the breaker on. */
	c = parse_ok("breaker.per_method=true\n");
	pc = resil_config_pipeline(c);
	assert_true(pc->breaker_enabled);
	assert_true(pc->breaker_per_method);
	resil_config_free(c);

	/* Method keys turn no stage on. */
	c = parse_ok("getStock.retry.max_attempts=2\n");
	pc = resil_config_pipeline(c);
	assert_false(pc->retry_enabled);
	assert_int_equal(pc->methods[0].max_attempts, 2);
	resil_config_free(c);

	c = parse_ok("cache.enabled=1\nbulkhead.enabled=yes\n");
	pc = resil_config_pipeline(c);
	assert_true(pc->cache_enabled);
	assert_true(pc->bulkhead_enabled);
	resil_config_free(c);
}

static void
test_config_comments_and_blanks(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;

	(void)state;
	c = parse_ok("\xEF\xBB\xBF# StockService degradation\r\n"
	             "\r\n"
	             "   # indented comment\n"
	             "\t service \t=\t StockService \t\r\n"
	             "retry.max_attempts =2\n"
	             "retry.delay= 5ms\n"
	             "mock = return \"a # b\"   \n"
	             "getStock.type = string\n"
	             "getStock.mock=return x # not a comment");
	pc = resil_config_pipeline(c);
	assert_string_equal(pc->service, "StockService");
	assert_int_equal(pc->retry.max_attempts, 2);
	assert_int_equal(pc->retry.base_delay_ns, 5 * RESIL_NS_PER_MS);
	/* '#' after a value belongs to the value. */
	assert_string_equal(pc->mock, "return \"a # b\"");
	assert_string_equal(pc->methods[0].mock, "return x # not a comment");
	assert_int_equal(pc->methods[0].type, RESIL_TYPE_STRING);
	resil_config_free(c);

	/* A trailing comment after a number is not a number. */
	expect_error("# one\n\nretry.max_attempts=3 # three\n",
	    "svc.conf:3: retry.max_attempts: \"3 # three\" is not an unsigned "
	    "integer");
	/* The value may contain '='. */
	c = parse_ok("mock=return \"a=b\"\n");
	assert_string_equal(resil_config_pipeline(c)->mock, "return \"a=b\"");
	resil_config_free(c);
}

static void
test_config_durations(void **state)
{
	/* A tick is a nanosecond on every clock; a number alone is
	 * milliseconds (Dubbo's timeout=3000 is three seconds). */
	static const struct {
		const char *text;
		uint64_t ns;
	} cases[] = {
		{ "timeout=0", 0 },
		{ "timeout=17", 17 * RESIL_NS_PER_MS },
		{ "timeout=3000", 3 * RESIL_NS_PER_SEC },
		{ "timeout=17ns", 17 },
		{ "timeout=3us", 3000 },
		{ "timeout=3ms", 3000000 },
		{ "timeout=3s", UINT64_C(3000000000) },
		{ "timeout=2m", UINT64_C(120000000000) },
		{ "timeout=2h", UINT64_C(7200000000000) },
		{ "timeout=1.5s", UINT64_C(1500000000) },
		{ "timeout=0.25", 250 * RESIL_NS_PER_US },
		{ "timeout=.5ms", 500 * RESIL_NS_PER_US },
		{ "timeout=2.000ns", 2 },
		{ "timeout=0.000001ms", 1 },
		{ "timeout=1.5m", UINT64_C(90000000000) },
		{ "timeout=18446744073709551615ns", UINT64_MAX },
		{ "timeout=18446744073709ms", UINT64_C(18446744073709000000) },
		{ "timeout=18446744073s", UINT64_C(18446744073000000000) },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		resil_config *c = parse_ok(cases[i].text);

		if (resil_config_pipeline(c)->timeout_ns != cases[i].ns)
			fail_msg("%s gave %llu ns", cases[i].text,
			    (unsigned long long)resil_config_pipeline(c)
			        ->timeout_ns);
		resil_config_free(c);
	}
	/* The bounds in the unit the value was written in (issue 24.8). */
	expect_error("timeout=18446744074s",
	    "svc.conf:1: timeout: 18446744074s is out of range "
	    "0s..18446744073.709551615s");
	expect_error("timeout=18446744073710",
	    "svc.conf:1: timeout: 18446744073710 is out of range "
	    "0ms..18446744073709.551615ms");
	expect_error("timeout=18446744073709551616ns",
	    "svc.conf:1: timeout: 18446744073709551616ns is out of range "
	    "0ns..18446744073709551615ns");
	/* Exponent notation is a number, not a unit "e3" (issue 24.8). */
	expect_error("timeout=1e3",
	    "svc.conf:1: timeout: \"1e3\": a duration takes no exponent "
	    "(write 1000)");
	expect_error("timeout=1.5E3ms",
	    "svc.conf:1: timeout: \"1.5E3ms\": a duration takes no exponent "
	    "(write 1500ms)");
	expect_error("timeout=2e-3s",
	    "svc.conf:1: timeout: \"2e-3s\": a duration takes no exponent "
	    "(write 0.002s)");
	expect_error("timeout=0.1e+4",
	    "svc.conf:1: timeout: \"0.1e+4\": a duration takes no exponent "
	    "(write 1000)");
	expect_error("timeout=1e99",
	    "svc.conf:1: timeout: \"1e99\": a duration takes no exponent "
	    "(write the digits, or use a unit: ns, us, ms, s, m, h)");
	expect_error("timeout=1e3sec",
	    "svc.conf:1: timeout: \"1e3sec\": a duration takes no exponent "
	    "(write the digits, or use a unit: ns, us, ms, s, m, h)");
	expect_error("timeout=1e",
	    "svc.conf:1: timeout: \"1e\": unknown unit \"e\" (units: ns, "
	    "us, ms, s, m, h; a number alone is milliseconds)");
	/* Ambiguous or unknown forms are refused, never guessed. */
	expect_error("timeout=5 s",
	    "svc.conf:1: timeout: \"5 s\": write the unit next to the number "
	    "(5s)");
	expect_error("timeout=1,5s",
	    "svc.conf:1: timeout: \"1,5s\": write a fraction with '.', not "
	    "','");
	expect_error("timeout=0.5ns",
	    "svc.conf:1: timeout: \"0.5ns\" is not a whole number of "
	    "nanoseconds");
	expect_error("timeout=0.0000001",
	    "svc.conf:1: timeout: \"0.0000001\" is not a whole number of "
	    "nanoseconds");
	expect_error("timeout=10sec",
	    "svc.conf:1: timeout: \"10sec\": unknown unit \"sec\" (did you "
	    "mean 10s?)");
	expect_error("timeout=10M",
	    "svc.conf:1: timeout: \"10M\": unknown unit \"M\" (units: ns, us, "
	    "ms, s, m, h; a number alone is milliseconds)");
	expect_error("timeout=3MS",
	    "svc.conf:1: timeout: \"3MS\": unknown unit \"MS\" (did you mean "
	    "3ms?)");
	expect_error("timeout=10d",
	    "svc.conf:1: timeout: \"10d\": unknown unit \"d\" (units: ns, us, "
	    "ms, s, m, h; a number alone is milliseconds)");
	expect_error("timeout=-1",
	    "svc.conf:1: timeout: \"-1\" is not a duration (a number of "
	    "milliseconds, or a number with a unit: ns, us, ms, s, m, h)");
	expect_error("timeout=1.",
	    "svc.conf:1: timeout: \"1.\" is not a duration (a number of "
	    "milliseconds, or a number with a unit: ns, us, ms, s, m, h)");
	expect_error("timeout=none",
	    "svc.conf:1: timeout: \"none\" is not a duration (a number of "
	    "milliseconds, or a number with a unit: ns, us, ms, s, m, h)");
	expect_error("breaker.bucket=0",
	    "svc.conf:1: breaker.bucket: 0 is out of range "
	    "0.000001ms (1ns)..18446744073709.551615ms");
	expect_error("breaker.bucket=0s",
	    "svc.conf:1: breaker.bucket: 0s is out of range "
	    "0.000000001s (1ns)..18446744073.709551615s");
	expect_error("breaker.bucket=0m",
	    "svc.conf:1: breaker.bucket: 0m is out of range "
	    "1ns..18446744073709551615ns");
}

static void
test_config_duration_functions(void **state)
{
	static const struct {
		uint64_t ns;
		const char *text;
	} cases[] = { { 0, "0" }, { 1, "1ns" }, { 1500, "1500ns" },
		{ 2000, "2us" }, { 1500000, "1500us" }, { 3000000, "3ms" },
		{ UINT64_C(30000000000), "30s" },
		{ UINT64_C(90000000000), "90s" },
		{ UINT64_C(120000000000), "2m" },
		{ UINT64_C(7200000000000), "2h" },
		{ UINT64_MAX, "18446744073709551615ns" } };
	char buf[32];
	uint64_t ns = 7;
	resil_diag d;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(resil_config_format_duration(
		                     cases[i].ns, buf, sizeof(buf)),
		    strlen(cases[i].text));
		assert_string_equal(buf, cases[i].text);
		assert_int_equal(
		    resil_config_parse_duration(buf, &ns, &d), RESIL_OK);
		assert_true(ns == cases[i].ns);
	}
	assert_int_equal(resil_config_format_duration(30, NULL, 0), 4);
	assert_int_equal(
	    resil_config_parse_duration("3000", &ns, &d), RESIL_OK);
	assert_true(ns == 3 * RESIL_NS_PER_SEC);
	ns = 7;
	assert_int_equal(
	    resil_config_parse_duration("10sec", &ns, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "duration: \"10sec\": unknown unit \"sec\" (did you mean 10s?)");
	assert_true(ns == 7);
	assert_int_equal(resil_config_parse_duration("99999999999h", &ns, &d),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_parse_duration(NULL, &ns, &d), RESIL_E_INVAL);
}

/* issue 14: a 10 KB key keeps "unknown key" (the value is elided in the
 * middle), and so does a 10 KB value its reason. */
static void
test_config_long_values_keep_the_reason(void **state)
{
	static char text[10300];
	resil_config *c = NULL;
	resil_diag d;

	(void)state;
	memset(text, 'k', 10240);
	memcpy(text + 10240, "=1\n", 4);
	assert_int_equal(
	    resil_config_parse_string(&c, text, "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_null(c);
	assert_true(strlen(d.msg) < RESIL_DIAG_MAX);
	assert_true(strncmp(d.msg, "svc.conf:1: kkkk", 16) == 0);
	assert_non_null(strstr(d.msg, "k...k"));
	assert_non_null(strstr(d.msg, "kkk: unknown key"));
	memcpy(text, "timeout=", 8);
	memset(text + 8, '7', 10240);
	memcpy(text + 10248, "x\n", 3);
	assert_int_equal(
	    resil_config_parse_string(&c, text, "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "svc.conf:1: timeout: \"777"));
	assert_non_null(strstr(d.msg, "777x\": unknown unit \"x\""));
}

/* The user's run of issue 14: timeout=200 and breaker.open_wait=30 in a
 * Dubbo habit are 200 ms and 30 ms, never 200 ns and 30 ns. */
static void
test_config_unitless_is_milliseconds(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;
	char buf[32];

	(void)state;
	c = parse_ok("timeout=200\nbreaker.open_wait=30\nretry.delay=100\n"
	             "cache.max_age=10000\ngetStock.timeout=3000\n");
	pc = resil_config_pipeline(c);
	assert_true(pc->timeout_ns == 200 * RESIL_NS_PER_MS);
	assert_true(pc->breaker.open_wait_ns == 30 * RESIL_NS_PER_MS);
	assert_true(pc->retry.base_delay_ns == 100 * RESIL_NS_PER_MS);
	assert_true(pc->cache.max_age == 10 * RESIL_NS_PER_SEC);
	assert_true(pc->methods[0].timeout_ns == 3 * RESIL_NS_PER_SEC);
	/* Read back in the largest unit that holds the value exactly. */
	assert_int_equal(
	    resil_config_get(c, "timeout", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "200ms");
	assert_int_equal(
	    resil_config_get(c, "cache.max_age", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "10s");
	assert_int_equal(
	    resil_config_get(c, "getStock.timeout", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "3s");
	resil_config_free(c);
}

static void
test_config_numbers_and_overflow(void **state)
{
	resil_config *c;

	(void)state;
	c = parse_ok("breaker.consecutive_failures=4294967295\n"
	             "breaker.min_calls=007\n");
	assert_int_equal(
	    resil_config_pipeline(c)->breaker.consecutive_failures,
	    UINT32_MAX);
	assert_int_equal(resil_config_pipeline(c)->breaker.min_calls, 7);
	resil_config_free(c);

	expect_error("breaker.consecutive_failures=4294967296",
	    "svc.conf:1: breaker.consecutive_failures: 4294967296 is out of "
	    "range 0..4294967295");
	expect_error("retry.seed=18446744073709551616",
	    "svc.conf:1: retry.seed: 18446744073709551616 is out of range "
	    "0..18446744073709551615");
	expect_error("retry.seed=99999999999999999999999999",
	    "svc.conf:1: retry.seed: 99999999999999999999999999 is out of "
	    "range 0..18446744073709551615");
	expect_error("retry.max_attempts=-1",
	    "svc.conf:1: retry.max_attempts: \"-1\" is not an unsigned "
	    "integer");
	expect_error("retry.max_attempts=+3",
	    "svc.conf:1: retry.max_attempts: \"+3\" is not an unsigned "
	    "integer");
	expect_error("retry.max_attempts=0x10",
	    "svc.conf:1: retry.max_attempts: \"0x10\" is not an unsigned "
	    "integer");
	expect_error("retry.max_attempts=",
	    "svc.conf:1: retry.max_attempts: \"\" is not an unsigned "
	    "integer");
	expect_error("retry.multiplier=abc",
	    "svc.conf:1: retry.multiplier: \"abc\" is not a number");
	expect_error("retry.multiplier=inf",
	    "svc.conf:1: retry.multiplier: \"inf\" is not a number");
	expect_error("retry.multiplier=nan",
	    "svc.conf:1: retry.multiplier: \"nan\" is not a number");
	expect_error("retry.multiplier=0x2",
	    "svc.conf:1: retry.multiplier: \"0x2\" is not a number");
	expect_error("retry.multiplier=1e999",
	    "svc.conf:1: retry.multiplier: \"1e999\" is not a number");
	expect_error("retry.multiplier=1.5.2",
	    "svc.conf:1: retry.multiplier: \"1.5.2\" is not a number");
	c = parse_ok("retry.multiplier=1e1\n");
	assert_true(resil_config_pipeline(c)->retry.multiplier == 10.0);
	resil_config_free(c);
}

static void
test_config_range_errors(void **state)
{
	(void)state;
	/* The issue's example, on line 3. */
	expect_error("service=S\n# x\nbreaker.failure_rate=101\n",
	    "svc.conf:3: breaker.failure_rate: 101 is out of range 0..100");
	expect_error("retry.max_attempts=0",
	    "svc.conf:1: retry.max_attempts: 0 is out of range 1..1000");
	expect_error("retry.max_attempts=1001",
	    "svc.conf:1: retry.max_attempts: 1001 is out of range 1..1000");
	expect_error("breaker.slow_rate=101",
	    "svc.conf:1: breaker.slow_rate: 101 is out of range 0..100");
	expect_error("breaker.probes=0",
	    "svc.conf:1: breaker.probes: 0 is out of range 1..32767");
	expect_error("breaker.probes=32768",
	    "svc.conf:1: breaker.probes: 32768 is out of range 1..32767");
	/* The range names the real maximum of a count window. */
	expect_error("breaker.window_size=0",
	    "svc.conf:1: breaker.window_size: 0 is out of range "
	    "1..1048576");
	expect_error("breaker.window_size=1048577",
	    "svc.conf:1: breaker.window_size: 1048577 is out of range "
	    "1..1048576");
	{
		resil_config *c = parse_ok("breaker.window_size=1048576\n");

		assert_int_equal(
		    resil_config_pipeline(c)->breaker.window_size, 1048576);
		resil_config_free(c);
	}
	expect_error("breaker.open_wait_multiplier=0.5",
	    "svc.conf:1: breaker.open_wait_multiplier: 0.5 is out of range "
	    "1..1000");
	expect_error("retry.multiplier=101",
	    "svc.conf:1: retry.multiplier: 101 is out of range 1..100");
	/* Cross-field rules of the cluster keys name the line too. */
	expect_error("outlier.base_ejection=30s\nretries=1\n"
	             "outlier.max_ejection=1s\n",
	    "svc.conf:3: outlier.max_ejection: 1s is below "
	    "outlier.base_ejection (30s)");
	expect_error("retry.jitter_factor=1.5",
	    "svc.conf:1: retry.jitter_factor: 1.5 is out of range 0..1");
	expect_error("retry.budget_ratio=-0.5",
	    "svc.conf:1: retry.budget_ratio: -0.5 is out of range 0..1000");
	expect_error("retry.budget_max_tokens=0",
	    "svc.conf:1: retry.budget_max_tokens: 0 is out of range "
	    "1..1000000");
	expect_error("retry.budget_min_retries=1000001",
	    "svc.conf:1: retry.budget_min_retries: 1000001 is out of range "
	    "0..1000000");
	expect_error("retry.budget_period=0",
	    "svc.conf:1: retry.budget_period: 0 is out of range "
	    "0.000001ms (1ns)..18446744073709.551615ms");
	expect_error("retry.budget_min_retries=100\nretry.budget_period=50ns",
	    "svc.conf:2: retry.budget_period: 50ns is too short: it must give "
	    "each of retry.budget_min_retries (100) at least 1 ns");
	expect_error("cache.max_entries=0",
	    "svc.conf:1: cache.max_entries: 0 is out of range 1..4294967296");
	expect_error("cache.max_entries=4294967297",
	    "svc.conf:1: cache.max_entries: 4294967297 is out of range "
	    "1..4294967296");
	expect_error("cache.max_bytes=0",
	    "svc.conf:1: cache.max_bytes: 0 is out of range "
	    "1..18446744073709551615");
	expect_error("cache.shards=3",
	    "svc.conf:1: cache.shards: 3 is not a power of two in 1..256");
	expect_error("cache.shards=512",
	    "svc.conf:1: cache.shards: 512 is out of range 1..256");
	expect_error("cache.shards=0",
	    "svc.conf:1: cache.shards: 0 is out of range 1..256");
	expect_error("ratelimit.rate=0",
	    "svc.conf:1: ratelimit.rate: 0 is out of range 1..4294967295");
	expect_error("ratelimit.period=0",
	    "svc.conf:1: ratelimit.period: 0 is out of range "
	    "0.000001ms (1ns)..18446744073709.551615ms");
	expect_error("ratelimit.burst=0",
	    "svc.conf:1: ratelimit.burst: 0 is out of range 1..4294967295");
	expect_error("bulkhead.max_concurrent=0",
	    "svc.conf:1: bulkhead.max_concurrent: 0 is out of range "
	    "1..1073741824");
	expect_error("bulkhead.backoff_pct=100",
	    "svc.conf:1: bulkhead.backoff_pct: 100 is out of range 1..99");
	expect_error("bulkhead.target_latency=0",
	    "svc.conf:1: bulkhead.target_latency: 0 is out of range "
	    "0.000001ms (1ns)..18446744073709.551615ms");
	expect_error("breaker.enabled=maybe",
	    "svc.conf:1: breaker.enabled: \"maybe\" is not a boolean (true, "
	    "false, yes, no, on, off, 1, 0)");
	expect_error("breaker.per_method=2",
	    "svc.conf:1: breaker.per_method: \"2\" is not a boolean (true, "
	    "false, yes, no, on, off, 1, 0)");
	expect_error("breaker.window=sliding",
	    "svc.conf:1: breaker.window: \"sliding\" is not one of count, "
	    "time");
	expect_error("retry.backoff=custom",
	    "svc.conf:1: retry.backoff: \"custom\" is not one of fixed, "
	    "exponential, linear");
	expect_error("retry.jitter=random",
	    "svc.conf:1: retry.jitter: \"random\" is not one of none, "
	    "proportional, full, equal, decorrelated, decorrelated_v2");
	expect_error(
	    "service=", "svc.conf:1: service: a service name is required");
}

static void
test_config_syntax_errors(void **state)
{
	(void)state;
	expect_error("service=S\nbreaker failure_rate 50\n",
	    "svc.conf:2: \"breaker failure_rate 50\" is not a key=value "
	    "setting");
	expect_error(" = 3", "svc.conf:1: empty key before '='");
	/* The first error by line wins, whatever its kind. */
	expect_error("retry.max_attempts=x\nno equals sign\n",
	    "svc.conf:1: retry.max_attempts: \"x\" is not an unsigned "
	    "integer");
}

static void
test_config_unknown_key(void **state)
{
	(void)state;
	expect_error("breaker.failure_rat=5",
	    "svc.conf:1: breaker.failure_rat: unknown key (did you mean "
	    "breaker.failure_rate?)");
	expect_error("retry.maxattempts=5",
	    "svc.conf:1: retry.maxattempts: unknown key (did you mean "
	    "retry.max_attempts?)");
	expect_error("servise=S",
	    "svc.conf:1: servise: unknown key (did you mean service?)");
	expect_error("breaker.frobnicate=5",
	    "svc.conf:1: breaker.frobnicate: unknown key");
	expect_error("colour=blue", "svc.conf:1: colour: unknown key");
	expect_error("Retry.max_attempts=3",
	    "svc.conf:1: Retry.max_attempts: unknown key (a method has type, "
	    "mock, timeout, retry.max_attempts and priority)");
	expect_error("getStock.mok=return 1",
	    "svc.conf:1: getStock.mok: unknown key (did you mean "
	    "getStock.mock?)");
	expect_error("getStock.retry.delay=1",
	    "svc.conf:1: getStock.retry.delay: unknown key (a method has "
	    "type, "
	    "mock, timeout, retry.max_attempts and priority)");
	expect_error("get-stock.mock=return 1",
	    "svc.conf:1: get-stock.mock: \"get-stock\" is not a method name "
	    "(a "
	    "letter, '_' or '$', then letters, digits, '_' or '$')");
	expect_error("1st.mock=return 1",
	    "svc.conf:1: 1st.mock: \"1st\" is not a method name (a letter, "
	    "'_' "
	    "or '$', then letters, digits, '_' or '$')");
	/* A stage prefix is never a method. */
	expect_error(
	    "cache.mock=return 1", "svc.conf:1: cache.mock: unknown key");
	expect_error(
	    "retry.timeout=1", "svc.conf:1: retry.timeout: unknown key");
}

static void
test_config_duplicate_key(void **state)
{
	(void)state;
	expect_error("retry.max_attempts=2\n\nretry.max_attempts=3\n",
	    "svc.conf:3: retry.max_attempts: set again (first set at line 1)");
	expect_error("getStock.mock=return 1\ngetStock.mock=return 2\n",
	    "svc.conf:2: getStock.mock: set again (first set at line 1)");
	/* Blanks around the key do not make it another key. */
	expect_error("service=A\n  service  =B\n",
	    "svc.conf:2: service: set again (first set at line 1)");
}

static void
test_config_method_keys(void **state)
{
	resil_config *c;
	const resil_pipeline_config *pc;

	(void)state;
	c = parse_ok("service=StockService\n"
	             "mock=fail:return null\n"
	             "getStock.timeout=200ms\n"
	             "listItems.mock=force:return []\n"
	             "getStock.type=int\n"
	             "getStock.mock=force:return 0\n"
	             "getStock.retry.max_attempts=5\n"
	             "listItems.type=array\n"
	             "$ping_2.type=void\n");
	pc = resil_config_pipeline(c);
	/* In the order of first mention. */
	assert_int_equal(pc->nmethods, 3);
	assert_string_equal(pc->methods[0].name, "getStock");
	assert_int_equal(pc->methods[0].type, RESIL_TYPE_INT);
	assert_string_equal(pc->methods[0].mock, "force:return 0");
	assert_int_equal(pc->methods[0].timeout_ns, 200 * RESIL_NS_PER_MS);
	assert_int_equal(pc->methods[0].max_attempts, 5);
	assert_string_equal(pc->methods[1].name, "listItems");
	assert_int_equal(pc->methods[1].type, RESIL_TYPE_ARRAY);
	assert_string_equal(pc->methods[1].mock, "force:return []");
	assert_int_equal(pc->methods[1].timeout_ns, 0);
	assert_int_equal(pc->methods[1].max_attempts, 0);
	assert_string_equal(pc->methods[2].name, "$ping_2");
	assert_int_equal(pc->methods[2].type, RESIL_TYPE_VOID);
	assert_null(pc->methods[2].mock);
	resil_config_free(c);

	/* Every declared type by name, case-insensitive. */
	c = parse_ok("a.type=any\nb.type=VOID\nc.type=bool\nd.type=int\n"
	             "e.type=double\nf.type=string\ng.type=bytes\n"
	             "h.type=array\ni.type=object\nj.type=json\n");
	pc = resil_config_pipeline(c);
	assert_int_equal(pc->nmethods, 10);
	for (int i = 0; i < 10; i++)
		assert_int_equal(pc->methods[i].type, (resil_type)i);
	resil_config_free(c);

	expect_error("getStock.type=float",
	    "svc.conf:1: getStock.type: \"float\" is not a type (any, void, "
	    "bool, int, double, string, bytes, array, object, json)");
	expect_error("getStock.retry.max_attempts=1001",
	    "svc.conf:1: getStock.retry.max_attempts: 1001 is out of range "
	    "0..1000");
	expect_error("getStock.timeout=soon",
	    "svc.conf:1: getStock.timeout: \"soon\" is not a duration (a "
	    "number of milliseconds, or a number with a unit: ns, us, ms, s, "
	    "m, h)");
}

static void
test_config_mock_specs(void **state)
{
	resil_config *c;

	(void)state;
	expect_error("service=S\nmock=fail:\n",
	    "svc.conf:2: mock: \"fail:\" at column 6: empty body after "
	    "'fail:'");
	expect_error("getStock.mock=force:",
	    "svc.conf:1: getStock.mock: \"force:\" at column 7: empty body "
	    "after 'force:'");
	/* Checked against the declared type, wherever the type is given;
	 * the error is on the mock's line. */
	expect_error("getStock.mock=return abc\ngetStock.type=int\n",
	    "svc.conf:1: getStock.mock: \"return abc\" at column 8: cannot "
	    "read an unquoted value as int");
	/* Without a type it is the string itself, as in Dubbo (issue 23),
	 * for the service's spec and a method's alike. */
	c = parse_ok("getStock.mock=return ture\nmock=fail:return aa\n");
	resil_config_free(c);
	c = parse_ok("getStock.mock=return abc\ngetStock.type=string\n");
	resil_config_free(c);
	/* ...and "no mock" spellings are accepted. */
	c = parse_ok("mock=\ngetStock.mock=false\n");
	assert_string_equal(resil_config_pipeline(c)->mock, "");
	resil_config_free(c);
	/* Names are checked for form only: the registry comes later. */
	c = parse_ok("mock=fail:throw com.foo.NoStock\n"
	             "getStock.mock=force:StockMock\n");
	resil_config_free(c);
}

static void
test_config_stage_validation_line(void **state)
{
	(void)state;
	/* Cross-field errors carry the line of the stage's last key and
	 * name the keys, not the struct fields. */
	expect_error("retry.delay=10s\n"
	             "breaker.min_calls=5\n"
	             "retry.max_delay=1s\n"
	             "service=S\n",
	    "svc.conf:3: retry.max_delay: 1s is below retry.delay (10s)");
	expect_error("breaker.failure_rate=0\nbreaker.min_calls=3\n",
	    "svc.conf:2: breaker: no trigger: set consecutive_failures, "
	    "failure_rate or slow_rate");
	expect_error("breaker.slow_rate=50\n",
	    "svc.conf:1: breaker.slow_threshold: 0 must be >= 1ns when "
	    "slow_rate is set");
	expect_error("breaker.open_wait=10s\nbreaker.open_wait_max=5s\n",
	    "svc.conf:2: breaker.open_wait_max: 5s is below "
	    "breaker.open_wait (10s)");
	expect_error("breaker.window=time\nbreaker.window_size=3601\n",
	    "svc.conf:2: breaker.window_size: 3601 buckets is out of range "
	    "1..3600");
	expect_error("retry.budget_ratio=0.0000001\n",
	    "svc.conf:1: retry.budget_ratio: 1e-07 is neither 0 (off) nor in "
	    "range 1e-06..1000");
	expect_error("bulkhead.adaptive=yes\nbulkhead.min_limit=50\n",
	    "svc.conf:2: bulkhead.min_limit: 50 is out of range 1..25 "
	    "(max_concurrent)");
	expect_error("ratelimit.rate=100000000\nratelimit.period=7ns\n",
	    "svc.conf:2: ratelimit.rate: 100000000 per period 7ns needs a "
	    "time "
	    "step of 1/100000000 tick, finer than 1/16777216");
}

/* Issue 38.6: refused when the text is parsed, with origin:line, not
 * left to resil_pipeline_new() (or never said). */
static void
test_config_zone_name_refused_at_parse(void **state)
{
	(void)state;
	expect_error("service=S\nzone=h z\n",
	    "svc.conf:2: zone: \"h z\" is not a zone name (letters, digits, "
	    "'_', '-', '.')");
}

static void
test_config_hedge_with_selector_keys_refused_at_parse(void **state)
{
	(void)state;
	/* A text with selector keys means a selector: hedging runs there
	 * (issue 43) but not with forking or broadcast, which make their
	 * own attempts (resil_pipeline_new refuses it, no line). */
	resil_config_free(
	    parse_ok("service=S\nhedge.max=2\nloadbalance=random\n"));
	expect_error(
	    "service=S\nhedge.max=2\ncluster=forking\nloadbalance=random\n",
	    "svc.conf:2: hedge.max: cluster=forking makes its own parallel "
	    "or serial attempts; hedging runs with failover, failfast, "
	    "failsafe, failback or zone-aware");
}

/* A url= whose params the directory's grammar refuses (a path with a '&'
 * becomes "path=a&b"): refused by resil_directory_new() without a line
 * before, at parse now, by the one grammar the directory checks with. */
static void
test_config_url_params_refused_at_parse(void **state)
{
	(void)state;
	expect_error("service=S\nurl=dubbo://10.0.0.1:20880/a&b?x=1\n",
	    "svc.conf:2: url: item 1 \"dubbo://10.0.0.1:20880/a&b?x=1\": the "
	    "parameters \"protocol=dubbo&path=a&b&x=1\": no '=' at column 23 "
	    "(key=value items joined by '&')");
}

/* cluster=zone-aware over url= endpoints without a zone: refused by
 * resil_pipeline_new() without a line before (issue 38.6). */
static void
test_config_zone_aware_url_without_zone_refused_at_parse(void **state)
{
	(void)state;
	expect_error(
	    "service=S\nzone=a\ncluster=zone-aware\n"
	    "url=dubbo://10.0.0.1:20880?zone=a;dubbo://10.0.0.2:20880\n",
	    "svc.conf:3: cluster: zone-aware needs every endpoint's zone: "
	    "url= lists 10.0.0.2:20880 without one (?zone=)");
}

static char *
write_temp_n(const char *text, size_t n)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/resil_config_XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, n), (ssize_t)n);
	close(fd);
	return path;
}

static char *
write_temp(const char *text)
{
	return write_temp_n(text, strlen(text));
}

static void
test_config_file(void **state)
{
	resil_config *c = NULL;
	resil_diag d;
	char *path;
	char want[160];
	const resil_pipeline_config *pc;
	resil_config_setting s;

	(void)state;
	path = write_temp("# stock service\n"
	                  "service=StockService\n"
	                  "retry.max_attempts=3\n"
	                  "getStock.mock=force:return 0\n");
	assert_int_equal(
	    resil_config_parse_file(&c, path, NULL, &d), RESIL_OK);
	pc = resil_config_pipeline(c);
	assert_string_equal(pc->service, "StockService");
	assert_int_equal(pc->retry.max_attempts, 3);
	assert_string_equal(pc->methods[0].mock, "force:return 0");
	assert_int_equal(resil_config_entry(c, 1, &s), RESIL_OK);
	assert_string_equal(s.origin, path);
	assert_int_equal(s.line, 3);
	resil_config_free(c);
	unlink(path);

	/* The path is the origin of messages. */
	path = write_temp("service=S\n\nbreaker.failure_rate=101\n");
	c = NULL;
	assert_int_equal(
	    resil_config_parse_file(&c, path, NULL, &d), RESIL_E_INVAL);
	assert_null(c);
	snprintf(want, sizeof(want),
	    "%s:3: breaker.failure_rate: 101 is out of range 0..100", path);
	assert_string_equal(d.msg, want);
	unlink(path);

	/* A missing file. */
	assert_int_equal(
	    resil_config_parse_file(&c, path, NULL, &d), RESIL_E_NOTFOUND);
	assert_null(c);
	snprintf(want, sizeof(want), "%s: cannot open: no such file", path);
	assert_string_equal(d.msg, want);

	/* A directory opens but cannot be read. */
	assert_int_equal(
	    resil_config_parse_file(&c, "/tmp", NULL, &d), RESIL_E_NOTFOUND);
	assert_null(c);
	assert_string_equal(d.msg, "/tmp: cannot read the file");
}

static void
test_config_file_allocation_failure(void **state)
{
	fail_alloc fa;
	resil_config *c;
	resil_diag d;
	char *path;
	uint64_t n;
	resil_err err;
	int ok = 0;

	(void)state;
	path = write_temp("service=S\ngetStock.mock=return 1\n");
	for (n = 1; n < 100 && !ok; n++) {
		c = NULL;
		err = resil_config_parse_file(
		    &c, path, fail_alloc_init(&fa, n), &d);
		if (err == RESIL_OK) {
			ok = 1;
			assert_string_equal(
			    resil_config_pipeline(c)->service, "S");
			resil_config_free(c);
		} else {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_string_equal(d.msg, "config: out of memory");
			assert_null(c);
		}
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
	assert_true(ok);
	unlink(path);
}

static void
test_config_file_large_and_nul(void **state)
{
	resil_config *c = NULL;
	resil_diag d;
	char *text, *path, want[160];
	size_t i, n = 0, cap = 200000;

	(void)state;
	/* Larger than the first read buffer: many comment lines, then a
	 * setting on a known line. */
	text = malloc(cap);
	assert_non_null(text);
	for (i = 0; i < 1000; i++)
		n += (size_t)snprintf(text + n, cap - n,
		    "# comment line %zu padded to be longer than usual\n", i);
	n += (size_t)snprintf(text + n, cap - n, "retry.max_attempts=7\n");
	path = write_temp(text);
	free(text);
	assert_int_equal(
	    resil_config_parse_file(&c, path, NULL, &d), RESIL_OK);
	assert_int_equal(resil_config_pipeline(c)->retry.max_attempts, 7);
	resil_config_free(c);
	unlink(path);

	/* A NUL byte is refused, with its line. */
	path = write_temp_n("service=S\nmock=ret\0urn\n", 23);
	c = NULL;
	assert_int_equal(
	    resil_config_parse_file(&c, path, NULL, &d), RESIL_E_INVAL);
	assert_null(c);
	snprintf(want, sizeof(want), "%s:2: a NUL byte in the line", path);
	assert_string_equal(d.msg, want);
	unlink(path);
}

static void
test_config_set(void **state)
{
	resil_config *c;
	resil_diag d;
	const resil_pipeline_config *pc;
	resil_config_setting s;

	(void)state;
	c = parse_ok("service=S\nretry.max_attempts=3\n");
	/* A new key. */
	assert_int_equal(
	    resil_config_set(c, " breaker.failure_rate ", " 30 ", &d),
	    RESIL_OK);
	pc = resil_config_pipeline(c);
	assert_true(pc->breaker_enabled);
	assert_int_equal(pc->breaker.failure_rate_pct, 30);
	assert_int_equal(resil_config_count(c), 3);
	assert_int_equal(resil_config_entry(c, 2, &s), RESIL_OK);
	assert_string_equal(s.key, "breaker.failure_rate");
	assert_string_equal(s.value, "30");
	assert_null(s.origin);
	assert_int_equal(s.line, 0);

	/* A key given by the text takes the new value and loses its line. */
	assert_int_equal(
	    resil_config_set(c, "retry.max_attempts", "5", &d), RESIL_OK);
	assert_int_equal(resil_config_pipeline(c)->retry.max_attempts, 5);
	assert_int_equal(resil_config_count(c), 3);
	assert_int_equal(resil_config_entry(c, 1, &s), RESIL_OK);
	assert_string_equal(s.value, "5");
	assert_int_equal(s.line, 0);

	/* A refused setting: the message alone, nothing changes. */
	assert_int_equal(
	    resil_config_set(c, "retry.max_attempts", "0", &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "retry.max_attempts: 0 is out of range 1..1000");
	assert_int_equal(resil_config_pipeline(c)->retry.max_attempts, 5);
	assert_int_equal(resil_config_count(c), 3);
	assert_int_equal(
	    resil_config_set(c, "retry.frob", "0", &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "retry.frob: unknown key");
	assert_int_equal(resil_config_count(c), 3);

	/* A cross-field refusal: the new key fails the stage check. */
	assert_int_equal(resil_config_set(c, "breaker.failure_rate", "0", &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker: no trigger: set consecutive_failures, failure_rate or "
	    "slow_rate");
	assert_int_equal(
	    resil_config_pipeline(c)->breaker.failure_rate_pct, 30);

	/* Switching a stage off and back on. */
	assert_int_equal(
	    resil_config_set(c, "breaker.enabled", "false", &d), RESIL_OK);
	assert_false(resil_config_pipeline(c)->breaker_enabled);
	assert_int_equal(
	    resil_config_set(c, "breaker.enabled", "true", &d), RESIL_OK);
	assert_true(resil_config_pipeline(c)->breaker_enabled);

	/* Method keys, and a mock checked against a type set later. */
	assert_int_equal(
	    resil_config_set(c, "getStock.mock", "return 1", &d), RESIL_OK);
	assert_int_equal(
	    resil_config_set(c, "getStock.type", "bool", &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "getStock.mock: \"return 1\" at column 8: cannot convert int 1 to "
	    "bool");
	assert_int_equal(
	    resil_config_pipeline(c)->methods[0].type, RESIL_TYPE_ANY);
	assert_int_equal(
	    resil_config_set(c, "getStock.type", "int", &d), RESIL_OK);
	pc = resil_config_pipeline(c);
	assert_int_equal(pc->nmethods, 1);
	assert_int_equal(pc->methods[0].type, RESIL_TYPE_INT);
	assert_string_equal(pc->methods[0].mock, "return 1");

	/* Errors of lines from the text keep their origin:line. */
	resil_config_free(c);
	c = parse_ok("retry.delay=10s\n");
	assert_int_equal(
	    resil_config_set(c, "retry.max_delay", "1s", &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "retry.max_delay: 1s is below retry.delay (10s)");
	assert_int_equal(resil_config_count(c), 1);
	resil_config_free(c);

	/* A replaced key keeps its place, but the stage's errors are the
	 * set's, not those of the text's last line of the stage. */
	c = parse_ok("retry.max_delay=2s\nretry.deadline=5s\n");
	assert_int_equal(
	    resil_config_set(c, "retry.delay", "10s", &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "retry.max_delay: 2s is below retry.delay (10s)");
	assert_int_equal(
	    resil_config_set(c, "retry.max_delay", "1s", &d), RESIL_OK);
	assert_int_equal(
	    resil_config_set(c, "retry.delay", "3s", &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "retry.max_delay: 1s is below retry.delay (3s)");
	assert_int_equal(resil_config_entry(c, 0, &s), RESIL_OK);
	assert_string_equal(s.key, "retry.max_delay");
	assert_string_equal(s.value, "1s");
	resil_config_free(c);
}

static void
test_config_get(void **state)
{
	resil_config *c;
	char buf[128], small[4];

	(void)state;
	c = parse_ok("service=StockService\n"
	             "breaker.failure_rate=40\n"
	             "retry.delay=2s\n"
	             "retry.jitter=equal\n"
	             "retry.jitter_factor=0.1\n"
	             "getStock.type=int\n"
	             "getStock.mock=force:return 0\n");
#define GET(key, want)                                                     \
	do {                                                               \
		assert_int_equal(                                          \
		    resil_config_get(c, key, buf, sizeof(buf)), RESIL_OK); \
		assert_string_equal(buf, want);                            \
	} while (0)
	GET("service", "StockService");
	GET("breaker.enabled", "true");
	GET("breaker.failure_rate", "40");
	GET("breaker.min_calls", "10"); /* a default */
	GET("breaker.window", "count");
	GET("breaker.open_wait", "30s");
	GET("breaker.open_wait_multiplier", "1");
	GET("breaker.per_method", "false");
	GET("retry.enabled", "true");
	GET("retry.delay", "2s");
	GET("retry.max_delay", "none");
	GET("retry.backoff", "fixed");
	GET("retry.jitter", "equal");
	GET("retry.jitter_factor", "0.1");
	GET("cache.enabled", "false");
	GET("cache.max_age", "none");
	GET("cache.max_bytes", "1048576");
	GET("cache.shards", "16");
	GET("ratelimit.period", "1s");
	GET("bulkhead.backoff_pct", "90");
	GET("getStock.type", "int");
	GET("getStock.mock", "force:return 0");
	GET("getStock.timeout", "0");
	GET("getStock.retry.max_attempts", "0");
#undef GET
	assert_int_equal(
	    resil_config_get(c, "mock", buf, sizeof(buf)), RESIL_E_NOTFOUND);
	assert_int_equal(
	    resil_config_get(c, "nope", buf, sizeof(buf)), RESIL_E_NOTFOUND);
	assert_int_equal(resil_config_get(c, "other.type", buf, sizeof(buf)),
	    RESIL_E_NOTFOUND);
	strcpy(small, "ab");
	assert_int_equal(resil_config_get(c, "service", small, sizeof(small)),
	    RESIL_E_INVAL);
	assert_string_equal(small, "ab");
	assert_int_equal(
	    resil_config_get(c, "service", buf, 0), RESIL_E_INVAL);
	resil_config_free(c);
}

/* Every key's effective value reads back to the same configuration. */
static void
test_config_get_round_trips(void **state)
{
	static const char *const all[] = { "timeout", "breaker.enabled",
		"breaker.per_method", "breaker.consecutive_failures",
		"breaker.failure_rate", "breaker.slow_threshold",
		"breaker.slow_rate", "breaker.min_calls", "breaker.window",
		"breaker.window_size", "breaker.bucket", "breaker.open_wait",
		"breaker.open_wait_multiplier", "breaker.open_wait_max",
		"breaker.probes", "breaker.reopen_on_first_failure",
		"breaker.max_half_open", "retry.enabled", "retry.max_attempts",
		"retry.backoff", "retry.delay", "retry.multiplier",
		"retry.max_delay", "retry.jitter", "retry.jitter_factor",
		"retry.seed", "retry.deadline", "retry.on_open",
		"retry.fail_after_max_attempts", "retry.budget_ratio",
		"retry.budget_max_tokens", "retry.budget_min_retries",
		"retry.budget_period", "cache.enabled", "cache.max_entries",
		"cache.max_bytes", "cache.max_age", "cache.shards",
		"ratelimit.enabled", "ratelimit.rate", "ratelimit.period",
		"ratelimit.burst", "bulkhead.enabled",
		"bulkhead.max_concurrent", "bulkhead.adaptive",
		"bulkhead.min_limit", "bulkhead.max_limit",
		"bulkhead.target_latency", "bulkhead.increase",
		"bulkhead.backoff_pct" };
	resil_config *a, *b;
	resil_diag d;
	char buf[64];
	size_t i;

	(void)state;
	a = parse_ok("breaker.slow_rate=30\nbreaker.slow_threshold=7\n"
	             "retry.multiplier=1.1\nretry.jitter_factor=0.3333\n"
	             "retry.budget_ratio=0.05\nretry.seed=12345\n"
	             "bulkhead.adaptive=on\ncache.max_age=99\n"
	             "ratelimit.rate=3\n");
	assert_int_equal(resil_config_new(&b, NULL), RESIL_OK);
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		assert_int_equal(
		    resil_config_get(a, all[i], buf, sizeof(buf)), RESIL_OK);
		if (resil_config_set(b, all[i], buf, &d) != RESIL_OK)
			fail_msg("%s=%s: %s", all[i], buf, d.msg);
	}
	{
		resil_pipeline_config pa = *resil_config_pipeline(a);
		resil_pipeline_config pb = *resil_config_pipeline(b);

		pa.cluster_keys = pb.cluster_keys = NULL;
		assert_memory_equal(&pa, &pb, sizeof(resil_pipeline_config));
	}
	resil_config_free(a);
	resil_config_free(b);
}

static void
test_config_entries(void **state)
{
	resil_config *c;
	resil_config_setting s;

	(void)state;
	c = parse_ok("# head\nservice = S\n\nmock=return 1\n");
	assert_int_equal(resil_config_count(c), 2);
	assert_int_equal(resil_config_entry(c, 0, &s), RESIL_OK);
	assert_string_equal(s.key, "service");
	assert_string_equal(s.value, "S");
	assert_string_equal(s.origin, "svc.conf");
	assert_int_equal(s.line, 2);
	assert_int_equal(resil_config_entry(c, 1, &s), RESIL_OK);
	assert_string_equal(s.key, "mock");
	assert_string_equal(s.value, "return 1");
	assert_int_equal(s.line, 4);
	assert_int_equal(resil_config_entry(c, 2, &s), RESIL_E_NOTFOUND);
	assert_int_equal(resil_config_entry(c, 0, NULL), RESIL_E_INVAL);
	resil_config_free(c);
}

static void
test_config_origin_default(void **state)
{
	resil_config *c = NULL;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_config_parse_string(
	                     &c, "retry.max_attempts=0", NULL, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "<string>:1: retry.max_attempts: 0 is out of range 1..1000");
	/* A NULL diag: the code alone. */
	assert_int_equal(resil_config_parse_string(
	                     &c, "retry.max_attempts=0", NULL, NULL, NULL),
	    RESIL_E_INVAL);
	assert_null(c);
}

static void
test_config_null_arguments(void **state)
{
	resil_config *c = NULL;
	resil_diag d;
	char buf[8];
	resil_allocator bad = { NULL, NULL, NULL };

	(void)state;
	assert_int_equal(resil_config_parse_string(NULL, "", NULL, NULL, &d),
	    RESIL_E_INVAL);
	assert_int_equal(resil_config_parse_string(&c, NULL, NULL, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "config: NULL argument");
	assert_int_equal(
	    resil_config_parse_file(NULL, "x", NULL, &d), RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_parse_file(&c, NULL, NULL, &d), RESIL_E_INVAL);
	assert_int_equal(
	    resil_config_parse_string(&c, "", NULL, &bad, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "config.alloc: the allocator lacks alloc or free");
	assert_null(c);
	assert_int_equal(resil_config_new(NULL, NULL), RESIL_E_INVAL);
	assert_null(resil_config_pipeline(NULL));
	resil_config_free(NULL);
	assert_int_equal(resil_config_count(NULL), 0);
	assert_int_equal(resil_config_set(NULL, "a", "b", &d), RESIL_E_INVAL);
	assert_int_equal(resil_config_get(NULL, "a", buf, 8), RESIL_E_INVAL);

	assert_int_equal(resil_config_new(&c, NULL), RESIL_OK);
	assert_int_equal(resil_config_set(c, NULL, "b", &d), RESIL_E_INVAL);
	assert_int_equal(resil_config_set(c, "a", NULL, &d), RESIL_E_INVAL);
	assert_int_equal(resil_config_set(c, "  ", "1", &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "config: empty key");
	assert_int_equal(resil_config_get(c, NULL, buf, 8), RESIL_E_INVAL);
	assert_int_equal(resil_config_get(c, "a", NULL, 8), RESIL_E_INVAL);
	assert_int_equal(resil_config_entry(NULL, 0, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_config_count(c), 0);
	resil_config_free(c);
}

/* The pointers of resil_config_pipeline() stay valid while conf lives,
 * even after the text they came from is gone. */
static void
test_config_owns_strings(void **state)
{
	resil_config *c;
	char *text = strdup("service=Svc\ngetStock.mock=return 1\n");
	const resil_pipeline_config *pc;

	(void)state;
	assert_non_null(text);
	assert_int_equal(
	    resil_config_parse_string(&c, text, "t", NULL, NULL), RESIL_OK);
	memset(text, 'x', strlen(text));
	free(text);
	pc = resil_config_pipeline(c);
	assert_string_equal(pc->service, "Svc");
	assert_string_equal(pc->methods[0].name, "getStock");
	assert_string_equal(pc->methods[0].mock, "return 1");
	resil_config_free(c);
}

/* Every allocation may fail: the error is RESIL_E_NOMEM, nothing leaks,
 * and a failed set leaves the config as it was. */
static void
test_config_allocation_failure(void **state)
{
	static const char text[] =
	    "service=S\nmock=fail:return \"x\"\nbreaker.min_calls=3\n"
	    "a.mock=return 1\nb.type=int\nc.timeout=1\nd.type=json\n"
	    "e.type=bool\nretry.max_attempts=2\n";
	fail_alloc fa;
	resil_config *c;
	resil_diag d;
	uint64_t n;
	resil_err err;
	int ok = 0;

	(void)state;
	for (n = 1; n < 200 && !ok; n++) {
		c = NULL;
		err = resil_config_parse_string(
		    &c, text, "t", fail_alloc_init(&fa, n), &d);
		if (err == RESIL_OK) {
			ok = 1;
			assert_int_equal(
			    resil_config_pipeline(c)->nmethods, 5);
			resil_config_free(c);
		} else {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_null(c);
		}
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
	assert_true(ok);

	/* set under failure. */
	ok = 0;
	for (n = 1; n < 200 && !ok; n++) {
		fail_alloc_init(&fa, 0);
		assert_int_equal(
		    resil_config_parse_string(&c, text, "t", &fa.hook, &d),
		    RESIL_OK);
		fa.fail_at = fa.allocs + n;
		err = resil_config_set(c, "f.mock", "return 2", &d);
		if (err == RESIL_OK) {
			ok = 1;
			assert_int_equal(
			    resil_config_pipeline(c)->nmethods, 6);
		} else {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_int_equal(
			    resil_config_pipeline(c)->nmethods, 5);
			assert_int_equal(resil_config_count(c), 9);
		}
		resil_config_free(c);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
	assert_true(ok);
}

/* Many settings and many methods grow the arrays. */
static void
test_config_many_methods(void **state)
{
	char *text = malloc(64 * 200);
	size_t n = 0;
	int i;
	resil_config *c;
	const resil_pipeline_config *pc;
	char name[32];

	(void)state;
	assert_non_null(text);
	for (i = 0; i < 100; i++)
		n += (size_t)sprintf(
		    text + n, "m%d.timeout=%dns\nm%d.type=int\n", i, i + 1, i);
	c = parse_ok(text);
	free(text);
	pc = resil_config_pipeline(c);
	assert_int_equal(pc->nmethods, 100);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		assert_string_equal(pc->methods[i].name, name);
		assert_int_equal(pc->methods[i].timeout_ns, (uint64_t)(i + 1));
		assert_int_equal(pc->methods[i].type, RESIL_TYPE_INT);
	}
	assert_int_equal(resil_config_count(c), 200);
	resil_config_free(c);
}

/* issue 14: one validation for the API and the text: method type 77 and
 * the name "get stock" are refused both ways. */
static void
test_config_one_method_validation(void **state)
{
	resil_method_config m;
	resil_diag d;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.name = "getStock";
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_OK);
	m.type = (resil_type)77;
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "getStock.type: 77 is not a type (any, void, bool, int, double, "
	    "string, bytes, array, object, json)");
	m.type = RESIL_TYPE_JSON;
	m.max_attempts = 1001;
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "getStock.retry.max_attempts: 1001 is out of range 0..1000");
	m.max_attempts = 0;
	m.name = "get stock";
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "method \"get stock\": not a method name (a letter, '_' or '$', "
	    "then letters, digits, '_' or '$')");
	m.name = "retry";
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "method \"retry\": a reserved word (it starts stage keys)");
	m.name = "";
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_E_INVAL);
	m.name = NULL;
	assert_int_equal(resil_config_check_method(&m, &d), RESIL_E_INVAL);
	assert_int_equal(resil_config_check_method(NULL, &d), RESIL_E_INVAL);
	/* The text refuses the same. */
	expect_error("get stock.type=int\n",
	    "svc.conf:1: get stock.type: \"get stock\" is not a method name "
	    "(a letter, '_' or '$', then letters, digits, '_' or '$')");
	expect_error("getStock.type=77\n",
	    "svc.conf:1: getStock.type: \"77\" is not a type (any, void, "
	    "bool, int, double, string, bytes, array, object, json)");
	expect_error("getStock.retry.max_attempts=1001\n",
	    "svc.conf:1: getStock.retry.max_attempts: 1001 is out of range "
	    "0..1000");
	/* Every method a text declares passes the API's check. */
	{
		resil_config *c = parse_ok("a.type=int\n$b.timeout=5\n_c.mock="
		                           "return 1\n");
		const resil_pipeline_config *pc = resil_config_pipeline(c);
		size_t i;

		for (i = 0; i < pc->nmethods; i++)
			assert_int_equal(
			    resil_config_check_method(&pc->methods[i], &d),
			    RESIL_OK);
		resil_config_free(c);
	}
}

/* issue 14: parsing was quadratic in the methods (200k: minutes). With
 * the key and method indexes it is linear; the ctest timeout is what a
 * quadratic parser would hit here (no timing is asserted). */
static void
test_config_200k_methods(void **state)
{
	const int n = 200000;
	char *text = malloc((size_t)n * 40 + 32);
	size_t len = 0;
	int i;
	resil_config *c;
	const resil_pipeline_config *pc;
	char buf[32];

	(void)state;
	assert_non_null(text);
	for (i = 0; i < n; i++)
		len += (size_t)sprintf(text + len, "m%d.type=int\n", i);
	/* The last line repeats a key: still found among 200k. */
	len += (size_t)sprintf(text + len, "m7.type=bool\n");
	expect_error(text,
	    "svc.conf:200001: m7.type: set again (first set "
	    "at line 8)");
	text[len - strlen("m7.type=bool\n")] = '\0';
	c = parse_ok(text);
	free(text);
	pc = resil_config_pipeline(c);
	assert_int_equal(pc->nmethods, n);
	assert_string_equal(pc->methods[n - 1].name, "m199999");
	assert_int_equal(pc->methods[n - 1].type, RESIL_TYPE_INT);
	assert_int_equal(resil_config_count(c), n);
	/* set finds and replaces among them too. */
	assert_int_equal(
	    resil_config_set(c, "m123456.type", "string", NULL), RESIL_OK);
	assert_int_equal(
	    resil_config_set(c, "extra.timeout", "5s", NULL), RESIL_OK);
	assert_int_equal(resil_config_count(c), n + 1);
	assert_int_equal(
	    resil_config_get(c, "m123456.type", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "string");
	assert_int_equal(
	    resil_config_get(c, "extra.timeout", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "5s");
	resil_config_free(c);
}

/* clock = system | fast (issue 39): the fast clock chosen by text, read
 * back by name; anything else refused, naming the key and the choices. */
static void
test_config_clock_key(void **state)
{
	resil_config *c;
	resil_diag d;
	resil_err err;
	char buf[32];

	(void)state;
	c = parse_ok("service = S\nclock = fast\n");
	assert_ptr_equal(resil_config_pipeline(c)->clock, resil_clock_fast());
	assert_int_equal(resil_config_get(c, "clock", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(
	    buf, resil_clock_fast() == resil_clock_system() ? "system"
	                                                     : "fast");
	resil_config_free(c);
	c = parse_ok("service = S\nclock = system\n");
	assert_ptr_equal(
	    resil_config_pipeline(c)->clock, resil_clock_system());
	assert_int_equal(resil_config_get(c, "clock", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "system");
	resil_config_free(c);
	c = parse("service = S\nclock = tsc\n", &d, &err);
	assert_null(c);
	assert_int_equal(err, RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "clock: \"tsc\" is not one of system, fast"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_issue_examples),
		cmocka_unit_test(test_config_empty_is_defaults),
		cmocka_unit_test(test_config_every_key),
		cmocka_unit_test(test_config_other_enum_and_bool_spellings),
		cmocka_unit_test(test_config_stage_switches),
		cmocka_unit_test(test_config_comments_and_blanks),
		cmocka_unit_test(test_config_durations),
		cmocka_unit_test(test_config_unitless_is_milliseconds),
		cmocka_unit_test(test_config_duration_functions),
		cmocka_unit_test(test_config_long_values_keep_the_reason),
		cmocka_unit_test(test_config_numbers_and_overflow),
		cmocka_unit_test(test_config_range_errors),
		cmocka_unit_test(test_config_syntax_errors),
		cmocka_unit_test(test_config_unknown_key),
		cmocka_unit_test(test_config_duplicate_key),
		cmocka_unit_test(test_config_method_keys),
		cmocka_unit_test(test_config_mock_specs),
		cmocka_unit_test(test_config_stage_validation_line),
		cmocka_unit_test(test_config_zone_name_refused_at_parse),
		cmocka_unit_test(test_config_url_params_refused_at_parse),
		cmocka_unit_test(
		    test_config_zone_aware_url_without_zone_refused_at_parse),
		cmocka_unit_test(
		    test_config_hedge_with_selector_keys_refused_at_parse),
		cmocka_unit_test(test_config_file),
		cmocka_unit_test(test_config_file_large_and_nul),
		cmocka_unit_test(test_config_file_allocation_failure),
		cmocka_unit_test(test_config_set),
		cmocka_unit_test(test_config_get),
		cmocka_unit_test(test_config_get_round_trips),
		cmocka_unit_test(test_config_entries),
		cmocka_unit_test(test_config_origin_default),
		cmocka_unit_test(test_config_null_arguments),
		cmocka_unit_test(test_config_owns_strings),
		cmocka_unit_test(test_config_allocation_failure),
		cmocka_unit_test(test_config_many_methods),
		cmocka_unit_test(test_config_200k_methods),
		cmocka_unit_test(test_config_one_method_validation),
		cmocka_unit_test(test_config_clock_key),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

/*
 * Issue 41, seen: the pipelines' keyed families in the registry's
 * Prometheus text (lib/keyed_prom.c, lib/prom_text.c): one HELP and TYPE
 * per metric family across pipelines, labels service, kind and key, keys
 * escaped without ambiguity, the cap on series per family
 * (resil_registry_config.key_max_series) with the rest under
 * key="__other__", the overflow instance's series (key="__overflow__"),
 * and promtool check metrics on the text when promtool is installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resil/pipeline.h>
#include <resil/pipeline_keyed.h>
#include <resil/registry.h>

static resil_manual_clock mc;

static resil_pipeline *
pipeline(const char *service)
{
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_diag diag;

	resil_pipeline_config_init(&pc);
	pc.service = service;
	pc.clock = resil_manual_clock_hook(&mc);
	if (resil_pipeline_new(&p, &pc, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	return p;
}

static void
keyed(resil_pipeline *p, resil_keyed_kind kind, uint32_t max_keys)
{
	resil_keyed_config kc;
	resil_diag diag;

	resil_keyed_config_init(&kc);
	kc.kind = kind;
	kc.max_keys = max_keys;
	kc.breaker.clock = resil_manual_clock_hook(&mc);
	kc.breaker.consecutive_failures = 3;
	kc.ratelimit.rate = 2;
	kc.ratelimit.burst = 2;
	kc.ratelimit.period_ns = 1000;
	kc.ratelimit.clock = resil_manual_clock_hook(&mc);
	if (resil_pipeline_set_keyed(p, "args", &kc, &diag) != RESIL_OK)
		fail_msg("keyed: %s", diag.msg);
}

/* n outcomes on key's breaker, the first failures of them failures. */
static void
drive(resil_keyed *k, const void *key, size_t len, int n, int failures)
{
	resil_keyed_permit pm;
	int i;

	for (i = 0; i < n; i++) {
		if (resil_keyed_breaker_acquire(k, key, len, &pm) != RESIL_OK)
			continue;
		assert_int_equal(resil_keyed_breaker_record(k, &pm,
		                     i < failures ? RESIL_OUTCOME_FAILURE
		                                  : RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
}

static char *
text_of(resil_registry *reg)
{
	size_t need, len;
	char *t;

	assert_int_equal(
	    resil_registry_write_prometheus(reg, NULL, 0, &need), RESIL_OK);
	t = malloc(need + 1);
	assert_non_null(t);
	assert_int_equal(
	    resil_registry_write_prometheus(reg, t, need + 1, &len), RESIL_OK);
	assert_int_equal(len, need);
	assert_int_equal(strlen(t), len);
	return t;
}

/* The text of a registry whose figures move: sized, then written with
 * room to spare, again if it outgrew that. */
static char *
live_text_of(resil_registry *reg)
{
	size_t need, len;
	char *t;

	for (;;) {
		assert_int_equal(
		    resil_registry_write_prometheus(reg, NULL, 0, &need),
		    RESIL_OK);
		need += need / 2 + 1024;
		t = malloc(need);
		assert_non_null(t);
		assert_int_equal(
		    resil_registry_write_prometheus(reg, t, need, &len),
		    RESIL_OK);
		if (len < need) {
			assert_int_equal(strlen(t), len);
			return t;
		}
		free(t);
	}
}

static size_t
count(const char *text, const char *s)
{
	size_t n = 0;

	for (text = strstr(text, s); text != NULL; text = strstr(text + 1, s))
		n++;
	return n;
}

/* Every "# TYPE name" and "# HELP name" line once, and every sample's
 * family declared before it. */
static void
families_once(const char *text)
{
	const char *l;

	for (l = text; *l != '\0'; l = strchr(l, '\n') + 1) {
		char line[160];
		size_t n;

		if (strncmp(l, "# TYPE ", 7) == 0 ||
		    strncmp(l, "# HELP ", 7) == 0) {
			n = 7 + strcspn(l + 7, " ");
			assert_true(n + 2 < sizeof(line));
			memcpy(line, l, n);
			line[n] = ' ';
			line[n + 1] = '\0';
			if (count(text, line) != 1)
				fail_msg("\"%s\" %zu times", line,
				    count(text, line));
		}
		assert_non_null(strchr(l, '\n'));
	}
}

/* promtool check metrics on text; skipped (with its reason) when
 * promtool is not installed. promtool exits 1 on a text it cannot parse
 * and 3 on lint problems: neither is allowed, and every line it prints
 * fails the test. */
static void
promtool(const char *text)
{
	char path[] = "/tmp/resil_keyed_promXXXXXX", out[64], cmd[256];
	char line[512];
	FILE *fp;
	int fd, rc;

	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		print_message("skipped promtool check: promtool not found\n");
		return;
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	snprintf(out, sizeof(out), "%s.out", path);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s > %s 2>&1",
	    path, out);
	rc = system(cmd);
	unlink(path);
	fp = fopen(out, "r");
	assert_non_null(fp);
	if (fgets(line, sizeof(line), fp) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		fclose(fp);
		unlink(out);
		fail_msg("promtool check metrics: %s (rc %d)", line, rc);
	}
	fclose(fp);
	unlink(out);
	if (rc != 0)
		fail_msg("promtool check metrics failed (rc %d)", rc);
}

/* Two pipelines, each keyed (alpha: breakers and rate limits; beta:
 * breakers): one HELP/TYPE per metric, samples of both, keys escaped. */
static void
test_keyed_prom_two_pipelines(void **state)
{
	static const char odd[] = { 'a', '"', '\\', '\n', (char)0xff, 'z' };
	static const char lit[] = "\\xff"; /* four bytes: not the byte ff */
	static const char utf8[] = "h\xc3\xb4te";      /* valid: kept */
	static const char bad[] = "\xc3(\xed\xa0\x80"; /* invalid */
	resil_registry_config rc = resil_registry_config_default();
	resil_registry *reg = NULL;
	resil_pipeline *a, *b;
	resil_keyed *ka, *kb, *kr;
	char *t;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	assert_int_equal(rc.key_max_series, 100);
	assert_int_equal(resil_registry_new(&reg, &rc, NULL), RESIL_OK);
	a = pipeline("alpha");
	b = pipeline("be\"ta");
	keyed(a, RESIL_KEYED_BREAKER, 64);
	keyed(a, RESIL_KEYED_RATELIMIT, 64);
	keyed(b, RESIL_KEYED_BREAKER, 64);
	ka = resil_pipeline_keyed(a, RESIL_KEYED_BREAKER);
	kr = resil_pipeline_keyed(a, RESIL_KEYED_RATELIMIT);
	kb = resil_pipeline_keyed(b, RESIL_KEYED_BREAKER);
	assert_non_null(ka);
	assert_non_null(kr);
	assert_non_null(kb);
	assert_int_equal(resil_registry_add(reg, a, NULL), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, b, NULL), RESIL_OK);

	drive(ka, "h1", 2, 5, 3); /* opens after 3: 2 rejections */
	drive(ka, odd, sizeof(odd), 1, 0);
	drive(ka, lit, strlen(lit), 1, 0);
	drive(ka, "\xff", 1, 1, 1);
	drive(kb, utf8, strlen(utf8), 2, 1);
	drive(kb, bad, strlen(bad), 1, 0);
	drive(kb, "__other__", 9, 1, 0);
	assert_int_equal(
	    resil_keyed_ratelimit_try_acquire(kr, "t1", 2, 1, NULL), RESIL_OK);
	assert_int_equal(
	    resil_keyed_ratelimit_try_acquire(kr, "t1", 2, 1, NULL), RESIL_OK);
	assert_int_equal(
	    resil_keyed_ratelimit_try_acquire(kr, "t1", 2, 1, NULL),
	    RESIL_E_LIMITED);

	t = text_of(reg);
	families_once(t);
	assert_int_equal(
	    count(t, "# TYPE resil_keyed_calls_total counter\n"), 1);
	assert_int_equal(count(t, "# TYPE resil_keyed_keys gauge\n"), 1);
	assert_int_equal(
	    count(t, "# TYPE resil_keyed_breaker_open gauge\n"), 1);
	/* The family's own samples, one per pipeline and kind. */
	assert_non_null(strstr(
	    t, "resil_keyed_keys{service=\"alpha\",kind=\"breaker\"} 4\n"));
	assert_non_null(strstr(
	    t, "resil_keyed_keys{service=\"alpha\",kind=\"ratelimit\"} 1\n"));
	assert_non_null(strstr(
	    t, "resil_keyed_keys{service=\"be\\\"ta\",kind=\"breaker\"} 3\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_max_keys{service=\"alpha\","
	    "kind=\"breaker\"} 64\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_evicted_total{service=\"alpha\","
	    "kind=\"ratelimit\"} 0\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_overflow_total{service="
	    "\"be\\\"ta\",kind=\"breaker\"} 0\n"));
	/* Per key. */
	assert_non_null(strstr(t,
	    "resil_keyed_failures_total{service=\"alpha\","
	    "kind=\"breaker\",key=\"h1\"} 3\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_rejections_total{service="
	    "\"alpha\",kind=\"breaker\",key=\"h1\"} 2\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_breaker_open{service=\"alpha\","
	    "kind=\"breaker\",key=\"h1\"} 1\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_rejections_total{service="
	    "\"alpha\",kind=\"ratelimit\",key=\"t1\"} 1\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_calls_total{service=\"alpha\","
	    "kind=\"ratelimit\",key=\"t1\"} 3\n"));
	/* A rate limiter family has no failures nor open gauge. */
	assert_null(strstr(t,
	    "resil_keyed_failures_total{service=\"alpha\","
	    "kind=\"ratelimit\""));
	assert_null(strstr(t,
	    "resil_keyed_breaker_open{service=\"alpha\","
	    "kind=\"ratelimit\""));
	/* Escaping: " \ newline, the byte ff; a literal backslash-x-f-f
	 * differs from the byte; valid UTF-8 kept, invalid bytes as \xNN;
	 * a key spelt __other__ is not the aggregate. */
	assert_non_null(strstr(t,
	    "kind=\"breaker\",key=\"a\\\"\\\\\\\\\\n"
	    "\\\\xffz\"} 1\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_calls_total{service=\"alpha\","
	    "kind=\"breaker\",key=\"\\\\\\\\xff\"} 1\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_failures_total{service=\"alpha\","
	    "kind=\"breaker\",key=\"\\\\xff\"} 1\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_failures_total{service="
	    "\"be\\\"ta\",kind=\"breaker\",key=\"h\xc3\xb4"
	    "te\"} 1\n"));
	assert_non_null(
	    strstr(t, "key=\"\\\\xc3(\\\\xed\\\\xa0\\\\x80\"} 1\n"));
	assert_non_null(strstr(t, "key=\"\\\\x5f_other__\"} 1\n"));
	/* Under the cap: no aggregate. */
	assert_null(strstr(t, "key=\"__other__\""));
	/* The pipelines' own families are still there, once. */
	assert_int_equal(
	    count(t, "# TYPE resil_pipeline_calls_total counter\n"), 1);
	promtool(t);
	free(t);
	resil_registry_free(reg);
}

/* 10 000 keys in one family, 150 of them failing: at most key_max_series
 * (100) series per metric, all failing keys, and __other__ with the
 * rest; 0 series: only __other__. */
static void
test_keyed_prom_cap(void **state)
{
	resil_registry_config rc = resil_registry_config_default();
	resil_registry *reg = NULL;
	resil_pipeline *a;
	resil_keyed *k;
	char key[16], *t;
	const char *l,
	    *other = "resil_keyed_failures_total{service=\"alpha\","
	             "kind=\"breaker\",key=\"__other__\"}";
	size_t series = 0;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	assert_int_equal(resil_registry_new(&reg, &rc, NULL), RESIL_OK);
	a = pipeline("alpha");
	keyed(a, RESIL_KEYED_BREAKER, 10000);
	k = resil_pipeline_keyed(a, RESIL_KEYED_BREAKER);
	assert_int_equal(resil_registry_add(reg, a, NULL), RESIL_OK);
	for (i = 0; i < 10000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		/* k150 and on: 1 success; k0..k149: 1 failure, 1 success. */
		drive(k, key, strlen(key), i < 150 ? 2 : 1, i < 150 ? 1 : 0);
	}
	t = text_of(reg);
	families_once(t);
	assert_non_null(strstr(t,
	    "resil_keyed_keys{service=\"alpha\",kind=\"breaker\"} 10000\n"));
	for (l = strstr(t, "resil_keyed_failures_total{"); l != NULL;
	     l = strstr(l + 1, "resil_keyed_failures_total{")) {
		const char *v = strchr(l, '}');

		assert_non_null(v);
		if (strncmp(l, other, strlen(other)) == 0) {
			/* The 50 failing keys without a series. */
			assert_int_equal(strtoull(v + 2, NULL, 10), 50);
			continue;
		}
		series++;
		/* Only failing keys get a series of their own. */
		assert_int_equal(strtoull(v + 2, NULL, 10), 1);
	}
	assert_int_equal(series, 100);
	assert_int_equal(count(t, "resil_keyed_calls_total{"), 101);
	/* 10 150 calls: the other key's share is the rest. */
	assert_non_null(strstr(t,
	    "resil_keyed_calls_total{service=\"alpha\","
	    "kind=\"breaker\",key=\"__other__\"} 9950\n"));
	promtool(t);
	free(t);
	resil_registry_free(reg);

	/* key_max_series 0: the aggregate only. */
	rc.key_max_series = 0;
	assert_int_equal(resil_registry_new(&reg, &rc, NULL), RESIL_OK);
	a = pipeline("alpha");
	keyed(a, RESIL_KEYED_BREAKER, 100);
	drive(resil_pipeline_keyed(a, RESIL_KEYED_BREAKER), "x", 1, 3, 1);
	assert_int_equal(resil_registry_add(reg, a, NULL), RESIL_OK);
	t = text_of(reg);
	assert_int_equal(count(t, "resil_keyed_calls_total{"), 1);
	assert_non_null(strstr(t,
	    "resil_keyed_calls_total{service=\"alpha\","
	    "kind=\"breaker\",key=\"__other__\"} 3\n"));
	free(t);
	resil_registry_free(reg);
}

/* The option's range, the older config size, and a registry without
 * keyed families writes no resil_keyed_ metric. */
static void
test_keyed_prom_option(void **state)
{
	resil_registry_config rc = resil_registry_config_default();
	resil_registry *reg = NULL;
	resil_diag diag;
	char *t;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	rc.key_max_series = 1000001;
	assert_int_equal(resil_registry_new(&reg, &rc, &diag), RESIL_E_INVAL);
	assert_null(reg);
	assert_string_equal(
	    diag.msg, "registry.key_max_series: 1000001 is over 1000000");
	rc.key_max_series = 1000000;
	assert_int_equal(resil_registry_new(&reg, &rc, &diag), RESIL_OK);
	resil_registry_free(reg);
	reg = NULL;
	/* A caller built before the field: its size, the default cap. */
	rc.key_max_series = 7;
	rc.size = offsetof(resil_registry_config, key_max_series);
	assert_int_equal(resil_registry_new(&reg, &rc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_registry_add(reg, pipeline("plain"), NULL), RESIL_OK);
	t = text_of(reg);
	assert_null(strstr(t, "resil_keyed_"));
	assert_non_null(
	    strstr(t, "resil_pipeline_calls_total{service=\"plain\"}"));
	promtool(t);
	free(t);
	resil_registry_free(reg);
	rc.size = 3;
	assert_int_equal(resil_registry_new(&reg, &rc, &diag), RESIL_E_INVAL);
}

typedef struct churn {
	resil_keyed *k;
	int stop;
} churn;

/* New keys (evicting idle ones) and outcomes on old ones while the
 * registry writes its text. */
static void *
churner(void *arg)
{
	churn *c = arg;
	char key[16];
	int i;

	for (i = 0; i < 20000 && !__atomic_load_n(&c->stop, __ATOMIC_RELAXED);
	     i++) {
		resil_keyed_permit pm;

		snprintf(key, sizeof(key), "c%d", i % 3000);
		/* No cmocka assertion off the test's thread. */
		if (resil_keyed_breaker_acquire(c->k, key, strlen(key), &pm) ==
		    RESIL_OK)
			(void)resil_keyed_breaker_record(c->k, &pm,
			    i % 7 == 0 ? RESIL_OUTCOME_FAILURE
			               : RESIL_OUTCOME_SUCCESS);
	}
	return NULL;
}

#define CALLS \
	"resil_keyed_calls_total{service=\"alpha\",kind=\"breaker\",key=\""

/* The text while another thread makes, evicts and drives keys: each
 * text whole (every family once, the cap held); TSan-clean (make tsan). */
static void
test_keyed_prom_concurrent(void **state)
{
	resil_registry_config rc = resil_registry_config_default();
	resil_registry *reg = NULL;
	resil_pipeline *a;
	pthread_t th;
	churn c;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	rc.key_max_series = 10;
	assert_int_equal(resil_registry_new(&reg, &rc, NULL), RESIL_OK);
	a = pipeline("alpha");
	keyed(a, RESIL_KEYED_BREAKER, 1000);
	c.k = resil_pipeline_keyed(a, RESIL_KEYED_BREAKER);
	c.stop = 0;
	assert_int_equal(resil_registry_add(reg, a, NULL), RESIL_OK);
	assert_int_equal(pthread_create(&th, NULL, churner, &c), 0);
	for (i = 0; i < 20; i++) {
		char *t = live_text_of(reg);

		families_once(t);
		/* At most 10 keys' series, __other__ and (once a new key
		 * found no place) __overflow__. */
		assert_true(count(t, "resil_keyed_calls_total{") -
		        count(t, CALLS "__other__\"}") -
		        count(t, CALLS "__overflow__\"}") <=
		    10);
		assert_true(count(t, CALLS "__other__\"}") <= 1);
		assert_true(count(t, CALLS "__overflow__\"}") <= 1);
		free(t);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELAXED);
	assert_int_equal(pthread_join(th, NULL), 0);
	resil_registry_free(reg);
}

/* A family whose every key is protected sends a new key to its overflow
 * instance: the instance gets series of its own, key="__overflow__"
 * (once it has seen a call); a key spelt __overflow__ is written
 * \x5f_overflow__. */
static void
test_keyed_prom_overflow(void **state)
{
	resil_registry_config rc = resil_registry_config_default();
	resil_registry *reg = NULL;
	resil_pipeline *a, *b;
	resil_keyed *ka, *kb;
	resil_keyed_metrics km;
	char *t;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	assert_int_equal(resil_registry_new(&reg, &rc, NULL), RESIL_OK);
	a = pipeline("full");
	b = pipeline("roomy");
	keyed(a, RESIL_KEYED_BREAKER, 2);
	keyed(b, RESIL_KEYED_BREAKER, 64);
	ka = resil_pipeline_keyed(a, RESIL_KEYED_BREAKER);
	kb = resil_pipeline_keyed(b, RESIL_KEYED_BREAKER);
	assert_non_null(ka);
	assert_non_null(kb);
	assert_int_equal(resil_registry_add(reg, a, NULL), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, b, NULL), RESIL_OK);
	/* Two keys, each with a failure in its window: both protected. */
	drive(ka, "h1", 2, 1, 1);
	drive(ka, "h2", 2, 1, 1);
	drive(kb, "__overflow__", 12, 1, 0);
	t = text_of(reg);
	assert_null(strstr(t, "key=\"__overflow__\""));
	free(t);
	/* A third key finds no place: its 3 calls (a failure, then two
	 * successes) go to the overflow breaker. */
	drive(ka, "h3", 2, 3, 1);
	assert_int_equal(resil_keyed_get_metrics(ka, &km), RESIL_OK);
	assert_int_equal(km.overflowed, 3);
	t = text_of(reg);
	assert_non_null(strstr(t,
	    "resil_keyed_calls_total{service=\"full\",kind=\"breaker\","
	    "key=\"__overflow__\"} 3\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_failures_total{service=\"full\",kind=\"breaker\","
	    "key=\"__overflow__\"} 1\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_rejections_total{service=\"full\","
	    "kind=\"breaker\",key=\"__overflow__\"} 0\n"));
	assert_non_null(strstr(t,
	    "resil_keyed_breaker_open{service=\"full\",kind=\"breaker\","
	    "key=\"__overflow__\"} 0\n"));
	assert_null(strstr(t, "key=\"h3\""));
	/* The other family's overflow saw nothing; its key spelt
	 * __overflow__ is not an overflow's series. */
	assert_null(strstr(t,
	    "service=\"roomy\",kind=\"breaker\","
	    "key=\"__overflow__\""));
	assert_non_null(strstr(t,
	    "resil_keyed_calls_total{service=\"roomy\",kind=\"breaker\","
	    "key=\"\\\\x5f_overflow__\"} 1\n"));
	families_once(t);
	promtool(t);
	free(t);
	resil_registry_free(reg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_prom_two_pipelines),
		cmocka_unit_test(test_keyed_prom_cap),
		cmocka_unit_test(test_keyed_prom_option),
		cmocka_unit_test(test_keyed_prom_concurrent),
		cmocka_unit_test(test_keyed_prom_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/pipeline.h>
#include <resil/registry.h>

#include "support/fail_alloc.h"

/* The user function: advances the manual clock by dur ticks, returns rc. */
typedef struct callee {
	resil_manual_clock *mc;
	uint64_t dur;
	int rc;
} callee;

static int
call_fn(void *ctx, const resil_args *args, resil_value *out)
{
	callee *c = ctx;

	(void)args;
	resil_manual_clock_advance(c->mc, c->dur);
	*out = resil_value_int(7);
	return c->rc;
}

static void
run(resil_pipeline *p, resil_manual_clock *mc, const char *method,
    uint64_t dur, int rc)
{
	callee c;
	resil_args a;
	resil_result r;

	c.mc = mc;
	c.dur = dur;
	c.rc = rc;
	a.method = method;
	a.data = NULL;
	a.len = 0;
	resil_result_init(&r);
	resil_pipeline_call(p, &a, call_fn, &c, &r);
	resil_result_free(&r);
}

static resil_pipeline *
plain_pipeline(const char *service, resil_manual_clock *mc, uint64_t timeout)
{
	resil_pipeline_config cfg = resil_pipeline_config_default();
	resil_pipeline *p = NULL;
	resil_diag d;

	cfg.service = service;
	cfg.timeout_ns = timeout;
	cfg.clock = resil_manual_clock_hook(mc);
	if (resil_pipeline_new(&p, &cfg, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	return p;
}

static resil_registry *
new_registry(const resil_allocator *a)
{
	resil_registry_config cfg = resil_registry_config_default();
	resil_registry *reg = NULL;

	cfg.alloc = a;
	assert_int_equal(resil_registry_new(&reg, &cfg, NULL), RESIL_OK);
	return reg;
}

/* The whole exposition in a malloc'd string. */
static char *
expose(resil_registry *reg)
{
	size_t need = 0;
	char *buf;

	assert_int_equal(
	    resil_registry_write_prometheus(reg, NULL, 0, &need), RESIL_OK);
	buf = malloc(need + 1);
	assert_non_null(buf);
	assert_int_equal(
	    resil_registry_write_prometheus(reg, buf, need + 1, &need),
	    RESIL_OK);
	assert_int_equal(strlen(buf), need);
	return buf;
}

static void
assert_has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *s = text;

	while ((s = strstr(s, line)) != NULL) {
		if ((s == text || s[-1] == '\n') && s[n] == '\n')
			return;
		s++;
	}
	fail_msg("line not found: %s\n--- in ---\n%s", line, text);
}

/* ---- strict validation of the text format ---- */

#define MAXFAM 64

static int
valid_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 ||
	    !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	for (i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' ||
		        s[i] == ':'))
			return 0;
	return 1;
}

static int
valid_value(const char *s)
{
	char *end;

	if (strcmp(s, "NaN") == 0 || strcmp(s, "+Inf") == 0 ||
	    strcmp(s, "-Inf") == 0)
		return 1;
	if (*s == '\0')
		return 0;
	strtod(s, &end);
	return *end == '\0';
}

static void
copy_str(char *dst, size_t size, const char *src, size_t n)
{
	assert_true(n < size);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Parse {k="v",...}; returns the index past '}' or 0 on a syntax error.
 * Copies the value of label le (if any) into le. */
static size_t
parse_labels(const char *s, char *le, size_t lelen)
{
	size_t i = 1;

	le[0] = '\0';
	if (s[0] != '{')
		return 0;
	while (s[i] != '}') {
		size_t k0 = i, k1, o = 0;

		while (isalnum((unsigned char)s[i]) || s[i] == '_')
			i++;
		k1 = i;
		if (!valid_name(s + k0, k1 - k0) || s[i] != '=' ||
		    s[i + 1] != '"')
			return 0;
		i += 2;
		while (s[i] != '"') {
			char ch = s[i];

			if (ch == '\0' || ch == '\n')
				return 0;
			if (ch == '\\') {
				ch = s[i + 1];
				if (ch != '\\' && ch != '"' && ch != 'n')
					return 0;
				i++;
			}
			if (k1 - k0 == 2 && strncmp(s + k0, "le", 2) == 0 &&
			    o + 1 < lelen)
				le[o++] = s[i];
			i++;
		}
		if (k1 - k0 == 2 && strncmp(s + k0, "le", 2) == 0)
			le[o] = '\0';
		i++;
		if (s[i] == ',')
			i++;
		else if (s[i] != '}')
			return 0;
	}
	return i + 1;
}

/* Every line is a HELP, a TYPE or a sample; each family has HELP then
 * TYPE before its samples and appears once; every histogram's buckets are
 * cumulative and end with le="+Inf" equal to its _count. Returns the
 * number of samples. */
static size_t
validate(const char *text)
{
	char fams[MAXFAM][96];
	char types[MAXFAM][16];
	size_t nfam = 0, samples = 0;
	const char *line = text;
	int in_help = 0; /* HELP seen for fams[nfam-1], TYPE not yet */
	double last_bucket = -1, inf_bucket = -1;

	assert_true(*text == '\0' || text[strlen(text) - 1] == '\n');
	while (*line != '\0') {
		const char *nl = strchr(line, '\n');
		size_t len = (size_t)(nl - line);
		char buf[1024];

		assert_non_null(nl);
		assert_true(len < sizeof(buf));
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl + 1;
		if (strncmp(buf, "# HELP ", 7) == 0) {
			char *sp = strchr(buf + 7, ' ');
			size_t i;

			assert_non_null(sp);
			assert_false(in_help);
			assert_true(
			    valid_name(buf + 7, (size_t)(sp - buf - 7)));
			*sp = '\0';
			for (i = 0; i < nfam; i++)
				if (strcmp(fams[i], buf + 7) == 0)
					fail_msg("family %s twice", buf + 7);
			assert_true(nfam < MAXFAM);
			copy_str(fams[nfam], sizeof(fams[0]), buf + 7,
			    strlen(buf + 7));
			types[nfam][0] = '\0';
			nfam++;
			in_help = 1;
			last_bucket = -1;
			inf_bucket = -1;
			continue;
		}
		if (strncmp(buf, "# TYPE ", 7) == 0) {
			char *sp = strchr(buf + 7, ' ');

			assert_true(in_help);
			assert_non_null(sp);
			*sp = '\0';
			assert_string_equal(buf + 7, fams[nfam - 1]);
			assert_true(strcmp(sp + 1, "counter") == 0 ||
			    strcmp(sp + 1, "gauge") == 0 ||
			    strcmp(sp + 1, "histogram") == 0);
			snprintf(
			    types[nfam - 1], sizeof(types[0]), "%s", sp + 1);
			in_help = 0;
			continue;
		}
		/* A sample of the current family. */
		{
			const char *fam;
			size_t flen, nlen = 0, end;
			char le[32], suffix[16] = "";

			assert_true(nfam > 0);
			assert_false(in_help);
			fam = fams[nfam - 1];
			flen = strlen(fam);
			while (valid_name(buf, nlen + 1) && buf[nlen] != '{' &&
			    buf[nlen] != ' ')
				nlen++;
			assert_true(nlen >= flen);
			assert_memory_equal(buf, fam, flen);
			copy_str(
			    suffix, sizeof(suffix), buf + flen, nlen - flen);
			if (strcmp(types[nfam - 1], "histogram") == 0)
				assert_true(strcmp(suffix, "_bucket") == 0 ||
				    strcmp(suffix, "_sum") == 0 ||
				    strcmp(suffix, "_count") == 0);
			else
				assert_string_equal(suffix, "");
			if (strcmp(types[nfam - 1], "counter") == 0)
				assert_true(flen > 6 &&
				    strcmp(fam + flen - 6, "_total") == 0);
			end = parse_labels(buf + nlen, le, sizeof(le));
			if (end == 0)
				fail_msg("bad labels: %s", buf);
			end += nlen;
			assert_int_equal(buf[end], ' ');
			if (!valid_value(buf + end + 1))
				fail_msg("bad value: %s", buf);
			if (strcmp(suffix, "_bucket") == 0) {
				double v = strtod(buf + end + 1, NULL);

				assert_true(le[0] != '\0');
				assert_true(v >= last_bucket);
				last_bucket = v;
				if (strcmp(le, "+Inf") == 0)
					inf_bucket = v;
			} else if (strcmp(suffix, "_count") == 0) {
				assert_true(inf_bucket >= 0);
				assert_true(
				    strtod(buf + end + 1, NULL) == inf_bucket);
				last_bucket = -1;
				inf_bucket = -1;
			}
			samples++;
		}
	}
	assert_false(in_help);
	return samples;
}

/* ---- tests ---- */

static void
test_registry_null_and_bad_config(void **state)
{
	resil_registry_config cfg = resil_registry_config_default();
	resil_registry *reg = NULL;
	resil_pipeline *p = NULL;
	resil_diag d;
	size_t need = 99;
	char buf[8];

	(void)state;
	assert_int_equal(resil_registry_new(NULL, &cfg, &d), RESIL_E_INVAL);
	assert_int_equal(resil_registry_new(&reg, NULL, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "registry: NULL cfg");
	cfg.size = 3;
	assert_int_equal(resil_registry_new(&reg, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "registry.size: 3 is not a known resil_registry_config size");
	assert_null(reg);
	resil_registry_free(NULL);

	reg = new_registry(NULL);
	assert_int_equal(resil_registry_add(NULL, p, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_registry_add(reg, NULL, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "registry: NULL pipeline");
	assert_int_equal(
	    resil_registry_remove(NULL, "x", NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_registry_remove(reg, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_registry_lookup(NULL, "x", &p), RESIL_E_INVAL);
	assert_int_equal(resil_registry_lookup(reg, NULL, &p), RESIL_E_INVAL);
	assert_int_equal(resil_registry_lookup(reg, "x", NULL), RESIL_E_INVAL);
	assert_int_equal(resil_registry_count(NULL), 0);
	assert_int_equal(
	    resil_registry_foreach(NULL, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_registry_foreach(reg, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_registry_write_prometheus_cb(reg, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_registry_write_prometheus(NULL, buf, 8, &need),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_registry_write_prometheus(reg, buf, 8, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_registry_write_prometheus(reg, NULL, 8, &need),
	    RESIL_E_INVAL);
	assert_int_equal(need, 99);
	/* Empty registry: empty text. */
	buf[0] = 'x';
	assert_int_equal(
	    resil_registry_write_prometheus(reg, buf, 8, &need), RESIL_OK);
	assert_int_equal(need, 0);
	assert_string_equal(buf, "");
	resil_registry_free(reg);
}

static int
collect(resil_pipeline *p, void *ctx)
{
	char *names = ctx;

	strcat(names, resil_pipeline_service(p));
	strcat(names, ",");
	return strcmp(resil_pipeline_service(p), "B") == 0;
}

static void
test_registry_add_lookup_remove(void **state)
{
	resil_manual_clock mc;
	resil_registry *reg = new_registry(NULL);
	resil_pipeline *a, *b, *c, *dup, *got = NULL;
	resil_diag d;
	char names[64] = "";

	(void)state;
	resil_manual_clock_init(&mc, 0);
	a = plain_pipeline("A", &mc, 0);
	b = plain_pipeline("B", &mc, 0);
	c = plain_pipeline("C", &mc, 0);
	dup = plain_pipeline("B", &mc, 0);
	assert_int_equal(resil_registry_add(reg, a, &d), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, b, &d), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, c, &d), RESIL_OK);
	assert_int_equal(resil_registry_count(reg), 3);

	/* A duplicate name is refused and stays the caller's. */
	assert_int_equal(resil_registry_add(reg, dup, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "registry: service \"B\" is already registered");
	assert_int_equal(resil_registry_add(reg, b, &d), RESIL_E_INVAL);
	assert_int_equal(resil_registry_count(reg), 3);
	resil_pipeline_free(dup);

	assert_int_equal(resil_registry_lookup(reg, "B", &got), RESIL_OK);
	assert_ptr_equal(got, b);
	got = NULL;
	assert_int_equal(
	    resil_registry_lookup(reg, "Z", &got), RESIL_E_NOTFOUND);
	assert_null(got);
	assert_int_equal(
	    resil_registry_lookup(reg, "", &got), RESIL_E_NOTFOUND);

	/* In insertion order; fn's nonzero return stops the walk. */
	assert_int_equal(
	    resil_registry_foreach(reg, collect, names), RESIL_OK);
	assert_string_equal(names, "A,B,");

	/* Removal hands the pipeline back, or frees it. */
	assert_int_equal(resil_registry_remove(reg, "B", &got), RESIL_OK);
	assert_ptr_equal(got, b);
	assert_int_equal(
	    resil_registry_lookup(reg, "B", &got), RESIL_E_NOTFOUND);
	assert_int_equal(
	    resil_registry_remove(reg, "B", &got), RESIL_E_NOTFOUND);
	assert_ptr_equal(got, b);
	assert_int_equal(resil_registry_remove(reg, "A", NULL), RESIL_OK);
	assert_int_equal(resil_registry_count(reg), 1);
	names[0] = '\0';
	assert_int_equal(
	    resil_registry_foreach(reg, collect, names), RESIL_OK);
	assert_string_equal(names, "C,");
	/* The name is free again: the handed-back pipeline re-registers. */
	assert_int_equal(resil_registry_add(reg, b, &d), RESIL_OK);
	assert_int_equal(resil_registry_count(reg), 2);
	resil_registry_free(reg); /* frees B and C */
}

/* The bucket lines of the histogram of service S with the counts per
 * bucket in counts[0..nb), the rest 0. */
static void
bucket_lines(
    char *out, size_t size, const char *svc, const uint64_t *counts, size_t nb)
{
	uint64_t cum = 0;
	size_t i, off = strlen(out);

	for (i = 0; i + 1 < RESIL_LATENCY_BUCKETS; i++) {
		cum += i < nb ? counts[i] : 0;
		off += (size_t)snprintf(out + off, size - off,
		    "resil_pipeline_latency_ticks_bucket{service=\"%s\","
		    "le=\"%llu\"} %llu\n",
		    svc, (unsigned long long)((UINT64_C(1) << i) - 1),
		    (unsigned long long)cum);
	}
	snprintf(out + off, size - off,
	    "resil_pipeline_latency_ticks_bucket{service=\"%s\",le=\"+Inf\"} "
	    "%llu\n",
	    svc, (unsigned long long)cum);
}

#define HELP_LAT                                                           \
	"# HELP resil_pipeline_latency_ticks Duration of the timed calls " \
	"(pipelines with a timeout), in clock ticks. _sum is an upper "    \
	"bound: each call counts as its bucket's upper bound (the open "   \
	"last bucket as its lower bound, 2^46).\n"                         \
	"# TYPE resil_pipeline_latency_ticks histogram\n"

static resil_verdict
answer_zero(void *ctx, const resil_args *args, const resil_failure *failure,
    resil_result *out)
{
	(void)ctx;
	(void)args;
	(void)failure;
	out->err = RESIL_OK;
	out->value = resil_value_int(0);
	return RESIL_FALLBACK_ANSWER;
}

static void
test_registry_prometheus_exact_text(void **state)
{
	resil_manual_clock mc;
	resil_registry *reg = new_registry(NULL);
	resil_pipeline *p;
	static char want[16384];
	char *got;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p = plain_pipeline("Stock", &mc, 100);
	/* Failures are answered by a handler. (Without one they should
	 * count as "error", but the pipeline counts them "unavailable":
	 * see the report; this test does not depend on it.) */
	assert_int_equal(
	    resil_pipeline_add_handler(p, answer_zero, NULL), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, p, NULL), RESIL_OK);
	/* Durations 0, 1, 2 (a failure) and 5 ticks: buckets 0, 1, 2, 3. */
	run(p, &mc, "get", 0, 0);
	run(p, &mc, "get", 1, 0);
	run(p, &mc, "get", 2, 1);
	run(p, &mc, "get", 5, 0);
	/* A late answer: 200 > 100 ticks, a timeout, bucket 8. */
	run(p, &mc, "get", 200, 0);

	strcpy(want,
	    "# HELP resil_pipeline_calls_total Calls made through the "
	    "pipeline.\n"
	    "# TYPE resil_pipeline_calls_total counter\n"
	    "resil_pipeline_calls_total{service=\"Stock\"} 5\n"
	    "# HELP resil_pipeline_results_total Calls answered, by the "
	    "source of the answer.\n"
	    "# TYPE resil_pipeline_results_total counter\n"
	    "resil_pipeline_results_total{service=\"Stock\",source=\"live\"} "
	    "3\n"
	    "resil_pipeline_results_total{service=\"Stock\",source=\"cache\"} "
	    "0\n"
	    "resil_pipeline_results_total{service=\"Stock\",source=\"mock\"} "
	    "0\n"
	    "resil_pipeline_results_total{service=\"Stock\",source="
	    "\"fallback\"} 2\n"
	    "resil_pipeline_results_total{service=\"Stock\",source="
	    "\"unavailable\"} 0\n"
	    "resil_pipeline_results_total{service=\"Stock\",source=\"error\"} "
	    "0\n"
	    "resil_pipeline_results_total{service=\"Stock\",source="
	    "\"business\"} 0\n"
	    "# HELP resil_pipeline_timeouts_total Attempts that returned "
	    "after their timeout.\n"
	    "# TYPE resil_pipeline_timeouts_total counter\n"
	    "resil_pipeline_timeouts_total{service=\"Stock\"} 1\n" HELP_LAT);
	{
		uint64_t c9[9] = { 1, 1, 1, 1, 0, 0, 0, 0, 1 };

		bucket_lines(want, sizeof(want), "Stock", c9, 9);
	}
	strcat(want,
	    /* 0 + 1 + 3 + 7 + 255 */
	    "resil_pipeline_latency_ticks_sum{service=\"Stock\"} 266\n"
	    "resil_pipeline_latency_ticks_count{service=\"Stock\"} 5\n"
	    "# HELP resil_pipeline_latency_quantile_ticks Latency quantiles "
	    "of the timed calls, in clock ticks: the upper bound of the "
	    "histogram bucket holding the quantile; NaN before the first "
	    "timed call.\n"
	    "# TYPE resil_pipeline_latency_quantile_ticks gauge\n"
	    /* 5 calls: the 3rd (bucket 2), then the 5th (bucket 8). */
	    "resil_pipeline_latency_quantile_ticks{service=\"Stock\","
	    "q=\"0.5\"} 3\n"
	    "resil_pipeline_latency_quantile_ticks{service=\"Stock\","
	    "q=\"0.9\"} 255\n"
	    "resil_pipeline_latency_quantile_ticks{service=\"Stock\","
	    "q=\"0.99\"} 255\n");
	got = expose(reg);
	assert_string_equal(got, want);
	assert_int_equal(validate(got), 1 + 7 + 1 + 48 + 2 + 3);
	free(got);
	resil_registry_free(reg);
}

static void
test_registry_prometheus_empty_histogram_is_nan(void **state)
{
	resil_manual_clock mc;
	resil_registry *reg = new_registry(NULL);
	resil_pipeline *p;
	char *got;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	p = plain_pipeline("Idle", &mc, 0);
	assert_int_equal(resil_registry_add(reg, p, NULL), RESIL_OK);
	run(p, &mc, "get", 3, 0); /* untimed: no timeout */
	got = expose(reg);
	validate(got);
	assert_has_line(got, "resil_pipeline_calls_total{service=\"Idle\"} 1");
	assert_has_line(got,
	    "resil_pipeline_latency_ticks_bucket{service="
	    "\"Idle\",le=\"+Inf\"} 0");
	assert_has_line(
	    got, "resil_pipeline_latency_ticks_sum{service=\"Idle\"} 0");
	assert_has_line(got,
	    "resil_pipeline_latency_quantile_ticks{service="
	    "\"Idle\",q=\"0.99\"} NaN");
	/* No stage: no stage family. */
	assert_null(strstr(got, "resil_breaker"));
	assert_null(strstr(got, "resil_retry"));
	assert_null(strstr(got, "resil_cache"));
	assert_null(strstr(got, "resil_ratelimit"));
	assert_null(strstr(got, "resil_bulkhead"));
	free(got);
	resil_registry_free(reg);
}

static void
test_registry_prometheus_label_escaping(void **state)
{
	resil_manual_clock mc;
	resil_registry *reg = new_registry(NULL);
	resil_pipeline *p;
	char *got;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	p = plain_pipeline("a\"b\\c\nd", &mc, 0);
	assert_int_equal(resil_registry_add(reg, p, NULL), RESIL_OK);
	got = expose(reg);
	validate(got);
	assert_has_line(
	    got, "resil_pipeline_calls_total{service=\"a\\\"b\\\\c\\nd\"} 0");
	free(got);
	assert_int_equal(
	    resil_registry_lookup(reg, "a\"b\\c\nd", &p), RESIL_OK);
	resil_registry_free(reg);
}

static resil_pipeline *
staged_pipeline(resil_manual_clock *mc)
{
	resil_pipeline_config cfg = resil_pipeline_config_default();
	resil_method_config m[2];
	resil_pipeline *p = NULL;
	resil_diag d;

	memset(m, 0, sizeof(m));
	m[0].name = "get";
	m[0].max_attempts = 2;
	m[1].name = "put";
	cfg.service = "Inv";
	cfg.methods = m;
	cfg.nmethods = 2;
	cfg.breaker_enabled = 1;
	cfg.breaker_per_method = 1;
	cfg.breaker.consecutive_failures = 1;
	cfg.breaker.failure_rate_pct = 50;
	cfg.breaker.min_calls = 2;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 1;
	cfg.cache_enabled = 1;
	cfg.ratelimit_enabled = 1;
	cfg.ratelimit.rate = 10;
	cfg.ratelimit.burst = 10;
	cfg.ratelimit.period_ns = 1000;
	cfg.bulkhead_enabled = 1;
	cfg.bulkhead.max_concurrent = 4;
	cfg.clock = resil_manual_clock_hook(mc);
	if (resil_pipeline_new(&p, &cfg, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	return p;
}

static void
test_registry_prometheus_stage_metrics(void **state)
{
	resil_manual_clock mc;
	resil_registry *reg = new_registry(NULL);
	resil_pipeline *p, *q;
	char *got;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	p = staged_pipeline(&mc);
	q = plain_pipeline("Plain", &mc, 0);
	assert_int_equal(resil_registry_add(reg, p, NULL), RESIL_OK);
	assert_int_equal(resil_registry_add(reg, q, NULL), RESIL_OK);
	run(p, &mc, "put", 1, 0); /* live, cached */
	run(p, &mc, "get", 1, 1); /* fails: get's breaker opens */
	run(p, &mc, "get", 1, 0); /* rejected by get's open breaker */
	got = expose(reg);
	validate(got);
	if (getenv("RESIL_SHOW") != NULL)
		puts(got);
	assert_has_line(got, "resil_pipeline_calls_total{service=\"Inv\"} 3");
	assert_has_line(
	    got, "resil_pipeline_calls_total{service=\"Plain\"} 0");
	/* get's own breaker, put's own: one gauge per state. */
	assert_has_line(got,
	    "resil_breaker_state{service=\"Inv\",method="
	    "\"get\",state=\"open\"} 1");
	assert_has_line(got,
	    "resil_breaker_state{service=\"Inv\",method="
	    "\"get\",state=\"closed\"} 0");
	assert_has_line(got,
	    "resil_breaker_state{service=\"Inv\",method="
	    "\"put\",state=\"closed\"} 1");
	assert_has_line(got,
	    "resil_breaker_state{service=\"Inv\",method="
	    "\"put\",state=\"open\"} 0");
	assert_has_line(got,
	    "resil_breaker_calls_total{service=\"Inv\","
	    "method=\"get\",kind=\"failed\"} 1");
	assert_has_line(got,
	    "resil_breaker_calls_total{service=\"Inv\","
	    "method=\"put\",kind=\"successful\"} 1");
	assert_has_line(got,
	    "resil_breaker_transitions_total{service="
	    "\"Inv\",method=\"get\"} 1");
	assert_has_line(got,
	    "resil_breaker_rejections_total{service="
	    "\"Inv\",method=\"get\"} 2");
	/* The service-level breaker (for undeclared methods) has no
	 * method label and saw nothing. */
	assert_has_line(
	    got, "resil_breaker_state{service=\"Inv\",state=\"closed\"} 1");
	assert_has_line(got,
	    "resil_breaker_calls_total{service=\"Inv\","
	    "kind=\"successful\"} 0");
	/* get: a failure then a rejection (2 attempts), then a rejection
	 * that is not retried. */
	assert_has_line(got,
	    "resil_retry_attempts_total{service=\"Inv\","
	    "method=\"get\"} 3");
	assert_has_line(got,
	    "resil_retry_calls_total{service=\"Inv\","
	    "method=\"get\",kind=\"failed_with_retry\"} 1");
	assert_has_line(got,
	    "resil_retry_calls_total{service=\"Inv\","
	    "method=\"get\",kind=\"failed_without_retry\"} 1");
	assert_has_line(got, "resil_cache_misses_total{service=\"Inv\"} 2");
	assert_has_line(got,
	    "resil_pipeline_results_total{service=\"Inv\",source="
	    "\"unavailable\"} 2");
	/* The breaker stops the third call before the limiter. */
	assert_has_line(
	    got, "resil_ratelimit_granted_total{service=\"Inv\"} 2");
	assert_has_line(got,
	    "resil_breaker_failure_rate{service=\"Inv\","
	    "method=\"put\"} -1");
	/* The service-level retry (1 attempt) and get's own (2). */
	assert_has_line(got,
	    "resil_retry_calls_total{service=\"Inv\","
	    "kind=\"successful_without_retry\"} 1");
	assert_has_line(got, "resil_cache_entries{service=\"Inv\"} 1");
	assert_has_line(got, "resil_bulkhead_limit{service=\"Inv\"} 4");
	assert_has_line(got, "resil_bulkhead_in_flight{service=\"Inv\"} 0");
	assert_has_line(
	    got, "resil_ratelimit_rejected_total{service=\"Inv\"} 0");
	/* Plain has no stages: no samples of theirs. */
	assert_null(strstr(got, "resil_breaker_state{service=\"Plain\""));
	assert_null(strstr(got, "resil_cache_entries{service=\"Plain\""));
	free(got);
	resil_registry_free(reg);
}

typedef struct sink {
	size_t calls;
	size_t bytes;
	size_t stop_at; /* return nonzero on this call; 0: never */
} sink;

static int
sink_fn(const char *chunk, size_t n, void *ctx)
{
	sink *s = ctx;

	assert_non_null(chunk);
	assert_true(n > 0);
	s->calls++;
	s->bytes += n;
	return s->stop_at != 0 && s->calls == s->stop_at;
}

static void
test_registry_prometheus_buffer_and_callback(void **state)
{
	resil_manual_clock mc;
	resil_registry *reg = new_registry(NULL);
	sink s;
	size_t need = 0, need2 = 0;
	char small[11];
	char *full;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	assert_int_equal(
	    resil_registry_add(reg, staged_pipeline(&mc), NULL), RESIL_OK);
	full = expose(reg);
	need = strlen(full);
	/* Truncated, NUL-terminated, needed reports the whole length. */
	memset(small, 'x', sizeof(small));
	assert_int_equal(
	    resil_registry_write_prometheus(reg, small, sizeof(small), &need2),
	    RESIL_OK);
	assert_int_equal(need2, need);
	assert_int_equal(strlen(small), 10);
	assert_memory_equal(small, full, 10);
	/* The callback gets the same bytes, in several chunks. */
	memset(&s, 0, sizeof(s));
	assert_int_equal(
	    resil_registry_write_prometheus_cb(reg, sink_fn, &s), RESIL_OK);
	assert_int_equal(s.bytes, need);
	assert_true(s.calls > 1);
	/* A nonzero return stops it at once. */
	memset(&s, 0, sizeof(s));
	s.stop_at = 1;
	assert_int_equal(resil_registry_write_prometheus_cb(reg, sink_fn, &s),
	    RESIL_E_CALL);
	assert_int_equal(s.calls, 1);
	free(full);
	resil_registry_free(reg);
}

static void
test_registry_oom(void **state)
{
	resil_manual_clock mc;
	uint64_t n;
	int done = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	for (n = 1; !done && n < 100; n++) {
		fail_alloc fa;
		const resil_allocator *a = fail_alloc_init(&fa, n);
		resil_registry_config cfg = resil_registry_config_default();
		resil_registry *reg = NULL;
		resil_pipeline *p1 = staged_pipeline(&mc);
		resil_pipeline *p2 = plain_pipeline("B", &mc, 0);
		resil_err err;
		size_t need = 7;

		cfg.alloc = a;
		err = resil_registry_new(&reg, &cfg, NULL);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_null(reg);
			resil_pipeline_free(p1);
			resil_pipeline_free(p2);
			assert_int_equal(fail_alloc_live(&fa), 0);
			continue;
		}
		err = resil_registry_add(reg, p1, NULL);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			resil_pipeline_free(p1); /* still the caller's */
			p1 = NULL;
		}
		err = resil_registry_add(reg, p2, NULL);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			resil_pipeline_free(p2);
			p2 = NULL;
		}
		assert_int_equal(
		    resil_registry_count(reg), (p1 != NULL) + (p2 != NULL));
		err = resil_registry_write_prometheus(reg, NULL, 0, &need);
		if (err != RESIL_OK) {
			assert_int_equal(err, RESIL_E_NOMEM);
			assert_int_equal(need, 7);
		} else if (p1 != NULL && p2 != NULL) {
			done = 1;
		}
		resil_registry_free(reg);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_int_equal(fa.size_mismatch, 0);
	}
	assert_true(done);
	assert_true(n > 4); /* new, two adds and a snapshot could fail */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_null_and_bad_config),
		cmocka_unit_test(test_registry_add_lookup_remove),
		cmocka_unit_test(test_registry_prometheus_exact_text),
		cmocka_unit_test(
		    test_registry_prometheus_empty_histogram_is_nan),
		cmocka_unit_test(test_registry_prometheus_label_escaping),
		cmocka_unit_test(test_registry_prometheus_stage_metrics),
		cmocka_unit_test(test_registry_prometheus_buffer_and_callback),
		cmocka_unit_test(test_registry_oom),
	};

	return cmocka_run_group_tests_name("registry", tests, NULL, NULL);
}

/*
 * resil-sim: replay a scenario against a pipeline configuration on the
 * manual clock and print the timeline; optionally draw it as SVG.
 *
 *   resil-sim CONFIG SCENARIO [--svg FILE] [--metrics FILE]
 *
 * CONFIG is a resil configuration file (docs/config.md). SCENARIO says,
 * line by line, how the dependency behaves from a time on and which calls
 * are made at that time:
 *
 *   # time  behaviour      options
 *   0       ok 8
 *   1       fail           calls=2
 *   5       slow 30 8      method=getStock
 *   9       business
 *
 * behaviour is `ok VALUE` (answers the integer VALUE), `null` (answers
 * null), `fail` (the call fails), `slow TICKS VALUE` (answers VALUE after
 * TICKS ticks of virtual time) or `business` (the callee's own error,
 * code 400). Options: `calls=N` calls at that time (default 1; 0 only
 * changes the behaviour), `method=NAME` (default: the first method the
 * configuration declares, else "call"). Times never decrease. '#' starts
 * a comment. Bad lines are refused as `file:line: message`.
 *
 * The dependency's return code 0 is a success, 400 a business error,
 * anything else a failure. --metrics FILE writes the pipeline's metrics,
 * at the end of the run, in the Prometheus text format (through a
 * resil_registry, as a service would expose them).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>
#include <resil/registry.h>

#define MAX_LINE 512
#define MAX_METHOD 64

enum behaviour { B_OK, B_NULL, B_FAIL, B_SLOW, B_BUSINESS };

typedef struct step {
	uint64_t t;
	enum behaviour b;
	int64_t value;
	uint64_t slow;
	unsigned calls;
	char method[MAX_METHOD];
	unsigned line;
} step;

typedef struct dependency {
	resil_manual_clock *mc;
	const step *now;
	unsigned calls;
} dependency;

typedef struct row {
	uint64_t t;
	char method[MAX_METHOD];
	resil_source source;
	resil_err err;
	int has_value;
	char value[48];
	uint64_t age;
	unsigned calls;
	int breaker;
	uint32_t attempts;
} row;

static int
fail_line(const char *file, unsigned line, const char *msg, const char *arg)
{
	fprintf(stderr, "%s:%u: %s%s%s\n", file, line, msg, arg ? ": " : "",
	    arg ? arg : "");
	return 2;
}

static int
parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int
parse_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* Read the scenario; returns 0, or 2 after printing file:line: message. */
static int
read_scenario(const char *file, const char *dflt_method, step **steps,
    size_t *nsteps)
{
	FILE *f = fopen(file, "r");
	char buf[MAX_LINE + 2];
	unsigned lineno = 0;
	size_t n = 0, cap = 0;
	step *v = NULL;
	uint64_t last = 0;

	if (f == NULL) {
		fprintf(stderr, "%s: cannot open: %s\n", file, strerror(errno));
		return 2;
	}
	while (fgets(buf, sizeof(buf), f) != NULL) {
		char *tok[8], *save = NULL, *hash, *w;
		int ntok = 0, i;
		step s;

		lineno++;
		if (strchr(buf, '\n') == NULL && !feof(f)) {
			fclose(f);
			free(v);
			return fail_line(file, lineno, "line too long", NULL);
		}
		if ((hash = strchr(buf, '#')) != NULL)
			*hash = '\0';
		for (w = strtok_r(buf, " \t\r\n", &save); w != NULL && ntok < 8;
		     w = strtok_r(NULL, " \t\r\n", &save))
			tok[ntok++] = w;
		if (ntok == 0)
			continue;
		if (w != NULL) {
			fclose(f);
			free(v);
			return fail_line(file, lineno, "too many words", NULL);
		}
		memset(&s, 0, sizeof(s));
		s.calls = 1;
		s.line = lineno;
		snprintf(s.method, sizeof(s.method), "%s", dflt_method);
		if (parse_u64(tok[0], &s.t) != 0) {
			fclose(f);
			free(v);
			return fail_line(file, lineno, "bad time", tok[0]);
		}
		if (n > 0 && s.t < last) {
			fclose(f);
			free(v);
			return fail_line(file, lineno, "time goes backwards",
			    tok[0]);
		}
		if (ntok < 2) {
			fclose(f);
			free(v);
			return fail_line(file, lineno,
			    "missing behaviour (ok VALUE, null, fail, slow TICKS "
			    "VALUE, business)",
			    NULL);
		}
		i = 2;
		if (strcmp(tok[1], "ok") == 0) {
			s.b = B_OK;
			if (ntok < 3 || parse_i64(tok[2], &s.value) != 0) {
				fclose(f);
				free(v);
				return fail_line(file, lineno,
				    "ok needs an integer value",
				    ntok < 3 ? NULL : tok[2]);
			}
			i = 3;
		} else if (strcmp(tok[1], "slow") == 0) {
			s.b = B_SLOW;
			if (ntok < 4 || parse_u64(tok[2], &s.slow) != 0 ||
			    parse_i64(tok[3], &s.value) != 0) {
				fclose(f);
				free(v);
				return fail_line(file, lineno,
				    "slow needs TICKS and an integer VALUE", NULL);
			}
			i = 4;
		} else if (strcmp(tok[1], "null") == 0) {
			s.b = B_NULL;
		} else if (strcmp(tok[1], "fail") == 0) {
			s.b = B_FAIL;
		} else if (strcmp(tok[1], "business") == 0) {
			s.b = B_BUSINESS;
		} else {
			fclose(f);
			free(v);
			return fail_line(file, lineno, "unknown behaviour", tok[1]);
		}
		for (; i < ntok; i++) {
			uint64_t c;

			if (strncmp(tok[i], "calls=", 6) == 0 &&
			    parse_u64(tok[i] + 6, &c) == 0 && c <= 100000) {
				s.calls = (unsigned)c;
			} else if (strncmp(tok[i], "method=", 7) == 0 &&
			    tok[i][7] != '\0' && strlen(tok[i] + 7) < MAX_METHOD) {
				snprintf(s.method, sizeof(s.method), "%s",
				    tok[i] + 7);
			} else {
				fclose(f);
				free(v);
				return fail_line(file, lineno,
				    "bad option (calls=N up to 100000, "
				    "method=NAME)",
				    tok[i]);
			}
		}
		if (n == cap) {
			step *nv;

			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (nv == NULL) {
				fclose(f);
				free(v);
				fprintf(stderr, "resil-sim: out of memory\n");
				return 2;
			}
			v = nv;
		}
		v[n++] = s;
		last = s.t;
	}
	fclose(f);
	if (n == 0) {
		free(v);
		fprintf(stderr, "%s: no steps\n", file);
		return 2;
	}
	*steps = v;
	*nsteps = n;
	return 0;
}

static int
dependency_call(void *ctx, const resil_args *args, resil_value *out)
{
	dependency *d = ctx;

	(void)args;
	d->calls++;
	switch (d->now->b) {
	case B_OK:
		*out = resil_value_int(d->now->value);
		return 0;
	case B_NULL:
		return 0;
	case B_SLOW:
		resil_manual_clock_advance(d->mc, d->now->slow);
		*out = resil_value_int(d->now->value);
		return 0;
	case B_BUSINESS:
		return 400;
	case B_FAIL:
		break;
	}
	return -1;
}

static resil_outcome
classify(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 400 ? RESIL_OUTCOME_BUSINESS : RESIL_OUTCOME_FAILURE;
}

static const char *
state_name(int s)
{
	return s < 0 ? "-" : resil_breaker_state_name((resil_breaker_state)s);
}

static const char *
state_color(int s)
{
	switch (s) {
	case RESIL_BREAKER_CLOSED:
		return "#c8e6c9";
	case RESIL_BREAKER_OPEN:
	case RESIL_BREAKER_FORCED_OPEN:
		return "#ffcdd2";
	case RESIL_BREAKER_HALF_OPEN:
		return "#fff9c4";
	default:
		return "#eeeeee";
	}
}

static const char *
source_color(const row *r)
{
	if (r->err != RESIL_OK && r->source != RESIL_SOURCE_MOCK)
		return "#b71c1c";
	switch (r->source) {
	case RESIL_SOURCE_LIVE:
		return "#1b5e20";
	case RESIL_SOURCE_CACHE:
		return "#0d47a1";
	case RESIL_SOURCE_MOCK:
		return "#6a1b9a";
	case RESIL_SOURCE_FALLBACK:
		return "#e65100";
	case RESIL_SOURCE_UNAVAILABLE:
		return "#b71c1c";
	}
	return "#000000";
}

static int
write_chunk(const char *chunk, size_t n, void *ctx)
{
	return fwrite(chunk, 1, n, ctx) == n ? 0 : 1;
}

/* Hand p to a registry and write its metrics; p belongs to the registry
 * afterwards (freed with it). */
static int
write_metrics(const char *path, resil_pipeline *p)
{
	resil_registry_config rcfg = resil_registry_config_default();
	resil_registry *reg;
	resil_diag diag;
	FILE *f;
	int rc = 0;

	if (resil_registry_new(&reg, &rcfg, &diag) != RESIL_OK) {
		fprintf(stderr, "resil-sim: %s\n", diag.msg);
		resil_pipeline_free(p);
		return 2;
	}
	if (resil_registry_add(reg, p, &diag) != RESIL_OK) {
		fprintf(stderr, "resil-sim: %s\n", diag.msg);
		resil_pipeline_free(p);
		resil_registry_free(reg);
		return 2;
	}
	f = fopen(path, "w");
	if (f == NULL ||
	    resil_registry_write_prometheus_cb(reg, write_chunk, f) !=
		RESIL_OK ||
	    fclose(f) != 0) {
		fprintf(stderr, "%s: cannot write: %s\n", path, strerror(errno));
		rc = 2;
	} else {
		fprintf(stderr, "resil-sim: metrics in %s\n", path);
	}
	resil_registry_free(reg);
	return rc;
}

static int
write_svg(const char *path, const row *rows, size_t n)
{
	FILE *f = fopen(path, "w");
	uint64_t t0 = rows[0].t, t1 = rows[n - 1].t;
	double span = (double)(t1 - t0 + 1), x0 = 60.0, w = 800.0;
	size_t i;

	if (f == NULL) {
		fprintf(stderr, "%s: cannot write: %s\n", path, strerror(errno));
		return 2;
	}
	fprintf(f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
	    "height=\"205\" font-family=\"monospace\" font-size=\"11\">\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
	    (int)(x0 + w + 40));
	fprintf(f, "<text x=\"4\" y=\"40\">breaker</text>\n"
		   "<text x=\"4\" y=\"110\">result</text>\n");
	/* Breaker state as bands: each call's state lasts until the next. */
	for (i = 0; i < n; i++) {
		double xa = x0 + w * (double)(rows[i].t - t0) / span;
		double xb = x0 +
		    w * (double)((i + 1 < n ? rows[i + 1].t : t1 + 1) - t0) / span;

		if (xb > xa)
			fprintf(f,
			    "<rect x=\"%.1f\" y=\"25\" width=\"%.1f\" "
			    "height=\"25\" fill=\"%s\"><title>t=%" PRIu64
			    " %s</title></rect>\n",
			    xa, xb - xa, state_color(rows[i].breaker), rows[i].t,
			    state_name(rows[i].breaker));
	}
	/* One mark per call, coloured by where its answer came from, and
	 * the time under the first mark of each tick. */
	for (i = 0; i < n; i++) {
		double x = x0 + w * ((double)(rows[i].t - t0) + 0.5) / span;

		if (i == 0 || rows[i].t != rows[i - 1].t)
			fprintf(f,
			    "<text x=\"%.1f\" y=\"130\" "
			    "text-anchor=\"middle\">%" PRIu64 "</text>\n",
			    x, rows[i].t);

		fprintf(f,
		    "<circle cx=\"%.1f\" cy=\"105\" r=\"5\" fill=\"%s\">"
		    "<title>t=%" PRIu64 " %s %s %s</title></circle>\n",
		    x, source_color(&rows[i]), rows[i].t, rows[i].method,
		    resil_source_name(rows[i].source),
		    rows[i].has_value ? rows[i].value : "-");
	}
	fprintf(f, "<text x=\"4\" y=\"130\">time</text>\n");
	fprintf(f,
	    "<text x=\"%.1f\" y=\"175\">bands: breaker after each call "
	    "(CLOSED green, OPEN red, HALF_OPEN yellow)</text>\n"
	    "<text x=\"%.1f\" y=\"192\">marks: live green, cache blue, "
	    "mock purple, fallback orange, unavailable or error red</text>\n"
	    "</svg>\n",
	    x0, x0);
	if (fclose(f) != 0) {
		fprintf(stderr, "%s: cannot write: %s\n", path, strerror(errno));
		return 2;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	const char *conf_path = NULL, *scn_path = NULL, *svg = NULL;
	const char *metrics = NULL;
	const char *dflt_method = "call";
	resil_pipeline_config pcfg;
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
	resil_diag diag;
	step *steps = NULL;
	size_t nsteps = 0, i, nrows = 0, cap = 0;
	row *rows = NULL;
	dependency dep;
	int a, rc = 0;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--svg") == 0 && a + 1 < argc)
			svg = argv[++a];
		else if (strcmp(argv[a], "--metrics") == 0 && a + 1 < argc)
			metrics = argv[++a];
		else if (conf_path == NULL)
			conf_path = argv[a];
		else if (scn_path == NULL)
			scn_path = argv[a];
		else
			conf_path = NULL, a = argc; /* too many: usage */
	}
	if (conf_path == NULL || scn_path == NULL) {
		fprintf(stderr,
		    "usage: resil-sim CONFIG SCENARIO [--svg FILE] "
		    "[--metrics FILE]\n");
		return 2;
	}
	if (resil_config_parse_file(&conf, conf_path, NULL, &diag) !=
	    RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 2;
	}
	pcfg = *resil_config_pipeline(conf);
	if (pcfg.service == NULL)
		pcfg.service = "Service";
	if (pcfg.nmethods > 0)
		dflt_method = pcfg.methods[0].name;
	resil_manual_clock_init(&mc, 0);
	pcfg.clock = resil_manual_clock_hook(&mc);
	pcfg.classifier.fn = classify;
	if (resil_pipeline_new(&p, &pcfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s: %s\n", conf_path, diag.msg);
		resil_config_free(conf);
		return 2;
	}
	rc = read_scenario(scn_path, dflt_method, &steps, &nsteps);
	if (rc != 0)
		goto out;

	memset(&dep, 0, sizeof(dep));
	dep.mc = &mc;
	printf("%-6s %-12s %-12s %-8s %-5s %-6s %-12s %-8s %s\n", "time",
	    "method", "source", "value", "age", "calls", "breaker", "attempts",
	    "error");
	for (i = 0; i < nsteps; i++) {
		unsigned c;

		if (resil_manual_clock_now(&mc) < steps[i].t)
			resil_manual_clock_set(&mc, steps[i].t);
		dep.now = &steps[i];
		for (c = 0; c < steps[i].calls; c++) {
			resil_args args = { steps[i].method, NULL, 0 };
			resil_result r;
			resil_breaker *b;
			char age[24];
			row rw;

			memset(&rw, 0, sizeof(rw));
			rw.t = resil_manual_clock_now(&mc);
			resil_pipeline_call(p, &args, dependency_call, &dep, &r);
			snprintf(rw.method, sizeof(rw.method), "%s",
			    steps[i].method);
			rw.source = r.source;
			rw.err = r.err;
			rw.has_value = r.err == RESIL_OK;
			if (rw.has_value)
				resil_value_format(
				    &r.value, rw.value, sizeof(rw.value));
			else
				snprintf(rw.value, sizeof(rw.value), "-");
			rw.age = r.age;
			rw.calls = dep.calls;
			b = resil_pipeline_breaker(p, steps[i].method);
			rw.breaker = b != NULL ? (int)resil_breaker_get_state(b)
					       : -1;
			rw.attempts = r.attempts;
			resil_result_free(&r);
			if (rw.source == RESIL_SOURCE_CACHE ||
			    (rw.source == RESIL_SOURCE_LIVE && rw.has_value))
				snprintf(age, sizeof(age), "%" PRIu64, rw.age);
			else
				snprintf(age, sizeof(age), "-");
			printf("%-6" PRIu64
			       " %-12s %-12s %-8s %-5s %-6u %-12s %-8u %s\n",
			    rw.t, rw.method, resil_source_name(rw.source),
			    rw.value, age, rw.calls, state_name(rw.breaker),
			    rw.attempts,
			    rw.err == RESIL_OK ? "-" : resil_err_name(rw.err) + 6);
			if (nrows == cap) {
				row *nv;

				cap = cap ? cap * 2 : 64;
				nv = realloc(rows, cap * sizeof(*rows));
				if (nv == NULL) {
					fprintf(stderr,
					    "resil-sim: out of memory\n");
					rc = 2;
					goto out;
				}
				rows = nv;
			}
			rows[nrows++] = rw;
		}
	}
	if (svg != NULL && nrows > 0) {
		rc = write_svg(svg, rows, nrows);
		if (rc == 0)
			fprintf(stderr, "resil-sim: timeline picture in %s\n",
			    svg);
	}
	if (rc == 0 && metrics != NULL) {
		rc = write_metrics(metrics, p);
		p = NULL; /* the registry had it */
	}
out:
	free(rows);
	free(steps);
	resil_pipeline_free(p);
	resil_config_free(conf);
	return rc;
}

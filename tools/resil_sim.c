/*
 * resil-sim: replay a scenario against a pipeline configuration on the
 * manual clock and print the timeline; optionally draw it as SVG.
 *
 *   resil-sim CONFIG SCENARIO [--svg FILE] [--metrics FILE]
 *   resil-sim CONFIG... SCENARIO [--svg FILE]  (an event scenario)
 *   resil-sim --help | --version
 *
 * Both kinds of scenario run on a discrete-event engine (sim/sim.h): an
 * event queue ordered by (time, sequence) on the manual clock, every call
 * through the call machine. An event scenario (its first word a keyword:
 * zones, endpoints with workers and queues, the network, Poisson
 * arrivals, phases, pushes) is read and run by sim/des.c; the rest of
 * this file is the step scenario.
 *
 * CONFIG is a resil configuration file (docs/config.md). A step SCENARIO says,
 * line by line, how the dependency behaves from a time on and which calls
 * are made at that time:
 *
 *   # time  behaviour      options
 *   0       ok 8
 *   1       fail           calls=2
 *   5       slow 30 8      method=getStock
 *   9       business
 *
 * Times and the duration of `slow` are read as CONFIG reads durations: a
 * number alone is milliseconds, a unit may follow (250us, 1.5s). The clock
 * counts nanoseconds (a tick is a nanosecond on every resil clock); the
 * timeline prints milliseconds.
 *
 * behaviour is `ok VALUE` (answers VALUE: an integer, a number such as
 * 2.5, true, false, null, a "string" without blanks, or JSON without
 * blanks), `null` (answers null), `fail` (the call fails), `slow DURATION
 * VALUE` (answers VALUE after DURATION of virtual time) or `business` (the
 * callee's own error, code 400). Options: `calls=N` calls at that time
 * (default 1; 0 only changes the behaviour), `method=NAME` (default: the
 * first method the configuration declares, else "call"). Times never
 * decrease. '#' starts a comment. Bad lines are refused as
 * `file:line: message`. Each step is an event at its time: a slow call
 * still running then does not delay it.
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

#include "sim/sim.h"

#define MAX_LINE 512
#define MAX_METHOD 64

#define MAX_BANDS 16
#define MAX_VALUE 64
#define MAX_POSITIONAL 5

enum behaviour { B_OK, B_NULL, B_FAIL, B_SLOW, B_BUSINESS };

typedef struct step {
	uint64_t t;
	enum behaviour b;
	char value[MAX_VALUE]; /* the VALUE word, checked by parse_value */
	uint64_t slow;
	unsigned calls;
	char method[MAX_METHOD];
	unsigned line;
} step;

typedef struct row {
	uint64_t t; /* when the answer was given: where its age is measured */
	char method[MAX_METHOD];
	resil_source source;
	resil_err err;
	int has_value;
	char value[48];
	uint64_t age;
	unsigned calls;
	int breaker;
	uint32_t attempts;
	int band_state[MAX_BANDS]; /* every band's breaker after the call */
} row;

/* One breaker band of the picture: the breaker of one or more methods. */
typedef struct band {
	resil_breaker *b;
	char label[MAX_METHOD + 16];
	unsigned nmethods;
} band;

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

/* VALUE into *out: an integer, a number, true, false, null, a "string"
 * (no blanks, no escapes) or JSON. 0, or -1 when it is none of those. */
static int
parse_value(const char *s, resil_value *out)
{
	char *end;
	size_t n = strlen(s);

	resil_value_init(out);
	if (n == 0)
		return -1;
	if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
		*out = resil_value_bool(s[0] == 't');
		return 0;
	}
	if (strcmp(s, "null") == 0)
		return 0;
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"' &&
	    memchr(s + 1, '"', n - 2) == NULL)
		return resil_value_string(out, s + 1, n - 2, NULL) == RESIL_OK
		    ? 0
		    : -1;
	if (s[0] == '{' || s[0] == '[')
		return resil_value_json(out, s, n, NULL) == RESIL_OK ? 0 : -1;
	errno = 0;
	{
		long long v = strtoll(s, &end, 10);

		if (errno == 0 && *end == '\0') {
			*out = resil_value_int((int64_t)v);
			return 0;
		}
	}
	if ((s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '.') {
		double d;

		errno = 0;
		d = strtod(s, &end);
		if (errno == 0 && *end == '\0' && d == d && d - d == 0) {
			*out = resil_value_double(d);
			return 0;
		}
	}
	return -1;
}

/* A time or duration of the scenario (the configuration's rule). */
static int
parse_time(const char *s, uint64_t *ns, resil_diag *diag)
{
	return resil_config_parse_duration(s, ns, diag) == RESIL_OK ? 0 : -1;
}

static int
value_ok(const char *s)
{
	resil_value v;

	if (strlen(s) >= MAX_VALUE || parse_value(s, &v) != 0)
		return 0;
	resil_value_free(&v);
	return 1;
}

/* The behaviours of a step: the word, how many words it takes (the
 * behaviour's own included) and the message for a bad one. */
static const struct behaviour_form {
	const char *word;
	enum behaviour b;
	int nwords;
	const char *usage;
} behaviours[] = {
	{ "ok", B_OK, 2,
	    "ok needs a VALUE (an integer, a number, true, false, null, "
	    "\"text\" or JSON, without blanks)" },
	{ "slow", B_SLOW, 3,
	    "slow needs a DURATION (milliseconds, or with a unit) and a "
	    "VALUE" },
	{ "null", B_NULL, 1, NULL },
	{ "fail", B_FAIL, 1, NULL },
	{ "business", B_BUSINESS, 1, NULL },
};

/* The behaviour of tok[1..] into *s; the index of the first option in
 * *next. 0, or 2 after printing file:line: message. */
static int
read_behaviour(const char *file, unsigned lineno, char **tok, int ntok,
    step *s, int *next)
{
	const struct behaviour_form *f = NULL;
	resil_diag d;
	size_t i;

	for (i = 0; i < sizeof(behaviours) / sizeof(behaviours[0]); i++)
		if (strcmp(tok[1], behaviours[i].word) == 0)
			f = &behaviours[i];
	if (f == NULL)
		return fail_line(file, lineno, "unknown behaviour", tok[1]);
	s->b = f->b;
	*next = 1 + f->nwords;
	if (f->b == B_OK && (ntok < 3 || !value_ok(tok[2])))
		return fail_line(
		    file, lineno, f->usage, ntok < 3 ? NULL : tok[2]);
	if (f->b == B_SLOW &&
	    (ntok < 4 || parse_time(tok[2], &s->slow, &d) != 0 ||
	        !value_ok(tok[3])))
		return fail_line(file, lineno, f->usage, NULL);
	if (f->nwords > 1)
		snprintf(s->value, sizeof(s->value), "%s", tok[f->nwords]);
	return 0;
}

/* The options calls=N and method=NAME of tok[i..ntok). */
static int
read_options(
    const char *file, unsigned lineno, char **tok, int i, int ntok, step *s)
{
	for (; i < ntok; i++) {
		uint64_t c;

		if (strncmp(tok[i], "calls=", 6) == 0 &&
		    parse_u64(tok[i] + 6, &c) == 0 && c <= 100000)
			s->calls = (unsigned)c;
		else if (strncmp(tok[i], "method=", 7) == 0 &&
		    tok[i][7] != '\0' && strlen(tok[i] + 7) < MAX_METHOD)
			snprintf(
			    s->method, sizeof(s->method), "%s", tok[i] + 7);
		else
			return fail_line(file, lineno,
			    "bad option (calls=N up to 100000, method=NAME)",
			    tok[i]);
	}
	return 0;
}

/* One line's words into *s, after *prev (NULL: the first step): 0, 1
 * for a line with none, or 2 after printing file:line: message. */
static int
read_step(const char *file, unsigned lineno, char *buf,
    const char *dflt_method, const step *prev, step *s)
{
	char *tok[8];
	int ntok = sim_split(buf, tok, 8), next = 0, rc;
	resil_diag d;

	if (ntok == 0)
		return 1;
	if (ntok < 0)
		return fail_line(file, lineno, "too many words", NULL);
	memset(s, 0, sizeof(*s));
	s->calls = 1;
	s->line = lineno;
	snprintf(s->method, sizeof(s->method), "%s", dflt_method);
	d.msg[0] = '\0';
	if (parse_time(tok[0], &s->t, &d) != 0)
		return fail_line(file, lineno, "bad time",
		    d.msg[0] != '\0' ? d.msg + 10 : tok[0]);
	if (prev != NULL && s->t < prev->t)
		return fail_line(file, lineno, "time goes backwards", tok[0]);
	if (ntok < 2)
		return fail_line(file, lineno,
		    "missing behaviour (ok VALUE, null, fail, slow DURATION "
		    "VALUE, business)",
		    NULL);
	if ((rc = read_behaviour(file, lineno, tok, ntok, s, &next)) != 0)
		return rc;
	return read_options(file, lineno, tok, next, ntok, s);
}

/* Read the scenario; returns 0, or 2 after printing file:line: message. */
static int
read_scenario(
    const char *file, const char *dflt_method, step **steps, size_t *nsteps)
{
	FILE *f = fopen(file, "r");
	char buf[MAX_LINE + 2];
	unsigned lineno = 0;
	size_t n = 0, cap = 0;
	step *v = NULL, s;
	int rc = 0;

	if (f == NULL) {
		fprintf(
		    stderr, "%s: cannot open: %s\n", file, strerror(errno));
		return 2;
	}
	while (rc == 0 && fgets(buf, sizeof(buf), f) != NULL) {
		lineno++;
		if (strchr(buf, '\n') == NULL && !feof(f)) {
			rc = fail_line(file, lineno, "line too long", NULL);
			break;
		}
		rc = read_step(file, lineno, buf, dflt_method,
		    n > 0 ? &v[n - 1] : NULL, &s);
		if (rc == 1) {
			rc = 0;
			continue;
		}
		if (rc == 0 && n == cap) {
			step *nv;

			cap = cap ? cap * 2 : 16;
			if ((nv = realloc(v, cap * sizeof(*v))) == NULL) {
				fprintf(stderr, "resil-sim: out of memory\n");
				rc = 2;
				break;
			}
			v = nv;
		}
		if (rc == 0)
			v[n++] = s;
	}
	fclose(f);
	if (rc == 0 && n == 0) {
		fprintf(stderr, "%s: no steps\n", file);
		rc = 2;
	}
	if (rc != 0) {
		free(v);
		return rc;
	}
	*steps = v;
	*nsteps = n;
	return 0;
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
		fprintf(
		    stderr, "%s: cannot write: %s\n", path, strerror(errno));
		rc = 2;
	} else {
		fprintf(stderr, "resil-sim: metrics in %s\n", path);
	}
	resil_registry_free(reg);
	return rc;
}

/* The x of time t on an axis from t0 with px pixels per nanosecond. */
static double
x_at(uint64_t t, uint64_t t0, double x0, double px)
{
	return x0 + px * (double)(t - t0);
}

/*
 * The timeline picture. The axis is proportional to time; a slot as wide
 * as the smallest gap between two answer times follows each of them, and
 * the calls answered at one time share their slot side by side. Each band
 * is one breaker (one per method with breaker.per_method, else the
 * service's), sampled after every call whatever its method.
 */
static int
write_svg(const char *path, const row *rows, size_t n, const band *bands,
    size_t nbands)
{
	FILE *f = fopen(path, "w");
	uint64_t t0 = rows[0].t, t1 = rows[n - 1].t, slot = 0;
	double x0 = 150.0, w = 800.0, px, band_h = 22.0, y_marks, y_time;
	size_t i, j, k, first;
	char tb[32];

	if (f == NULL) {
		fprintf(
		    stderr, "%s: cannot write: %s\n", path, strerror(errno));
		return 2;
	}
	for (i = 1; i < n; i++) {
		uint64_t gap = rows[i].t - rows[i - 1].t;

		if (gap > 0 && (slot == 0 || gap < slot))
			slot = gap;
	}
	if (slot == 0)
		slot = RESIL_NS_PER_MS;
	px = w / ((double)(t1 - t0) + (double)slot);
	y_marks = 30.0 + band_h * (double)nbands + 30.0;
	y_time = y_marks + 25.0;
	fprintf(f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
	    "height=\"%d\" font-family=\"monospace\" font-size=\"11\">\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
	    (int)(x0 + w + 40), (int)(y_time + 70.0));
	for (k = 0; k < nbands; k++) {
		double y = 25.0 + band_h * (double)k;

		fprintf(f, "<text x=\"4\" y=\"%.1f\">%s</text>\n", y + 15.0,
		    bands[k].label);
		/* Each call's state lasts until the next call's answer. */
		for (i = 0; i < n; i++) {
			uint64_t te = i + 1 < n ? rows[i + 1].t : t1 + slot;
			double xa = x_at(rows[i].t, t0, x0, px);
			double xb = x_at(te, t0, x0, px);

			if (xb > xa)
				fprintf(f,
				    "<rect x=\"%.1f\" y=\"%.1f\" "
				    "width=\"%.1f\" "
				    "height=\"%.1f\" fill=\"%s\"><title>%s "
				    "t=%sms %s</title></rect>\n",
				    xa, y, xb - xa, band_h - 2.0,
				    state_color(rows[i].band_state[k]),
				    bands[k].label,
				    sim_ms_text(rows[i].t, tb, sizeof(tb)),
				    state_name(rows[i].band_state[k]));
		}
	}
	fprintf(f, "<text x=\"4\" y=\"%.1f\">result</text>\n", y_marks + 4.0);
	fprintf(f, "<text x=\"4\" y=\"%.1f\">time (ms)</text>\n", y_time);
	/* The calls answered at one time, side by side in its slot. */
	for (first = 0; first < n; first = j) {
		double xs = x_at(rows[first].t, t0, x0, px),
		       sw = px * (double)slot;
		double r;
		size_t cnt;

		for (j = first; j < n && rows[j].t == rows[first].t; j++)
			;
		cnt = j - first;
		r = sw / (2.0 * (double)cnt) - 0.5;
		if (r > 5.0)
			r = 5.0;
		if (r < 0.5)
			r = 0.5;
		fprintf(f,
		    "<text x=\"%.1f\" y=\"%.1f\" "
		    "text-anchor=\"middle\">%s</text>\n",
		    xs + sw / 2.0, y_time,
		    sim_ms_text(rows[first].t, tb, sizeof(tb)));
		for (i = first; i < j; i++) {
			double x = xs +
			    sw * ((double)(i - first) + 0.5) / (double)cnt;

			fprintf(f,
			    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" "
			    "fill=\"%s\"><title>t=%sms %s %s %s</title>"
			    "</circle>\n",
			    x, y_marks, r, source_color(&rows[i]),
			    sim_ms_text(rows[i].t, tb, sizeof(tb)),
			    rows[i].method, resil_source_name(rows[i].source),
			    rows[i].has_value ? rows[i].value : "-");
		}
	}
	fprintf(f,
	    "<text x=\"%.1f\" y=\"%.1f\">bands: each breaker after every call "
	    "(CLOSED green, OPEN red, HALF_OPEN yellow)</text>\n"
	    "<text x=\"%.1f\" y=\"%.1f\">marks: live green, cache blue, "
	    "mock purple, fallback orange, unavailable or error red</text>\n"
	    "</svg>\n",
	    x0, y_time + 35.0, x0, y_time + 52.0);
	if (fclose(f) != 0) {
		fprintf(
		    stderr, "%s: cannot write: %s\n", path, strerror(errno));
		return 2;
	}
	return 0;
}

/*
 * The replay, on the event-driven engine (sim/sim.h): each step is an
 * event at its time, and its calls start then through the call machine.
 * An answer that takes no time (ok, null, fail, business) is reported at
 * once, so the calls of one step run one after the other, as a caller
 * would make them; a slow answer is an event DURATION later, during which
 * the clock goes on and later steps start on time. A retry's backoff or a
 * timeout is a wake-up event. A call's row is printed when it is done.
 */
enum { L_STEP, L_WAKE, L_ANSWER };

typedef struct lcall {
	resil_call c;
	resil_result r;
	resil_args args;
	uint64_t wake_at;
	unsigned refs;
	int done;
} lcall;

typedef struct lanswer {
	lcall *c;
	uint32_t attempt;
	const step *s;
} lanswer;

typedef struct replayer {
	resil_pipeline *p;
	resil_manual_clock *mc;
	sim_queue q;
	const step *cur; /* the behaviour now */
	unsigned calls;  /* that reached the dependency */
	const band *bands;
	size_t nbands;
	row *rows;
	size_t nrows, cap;
	int failed;
} replayer;

static void
lcall_release(lcall *c)
{
	if (c->done && c->refs == 0)
		free(c);
}

static void
print_row(replayer *rp, lcall *c, uint64_t now)
{
	resil_breaker *b;
	char age[32], tt[32];
	row rw;
	size_t k;

	memset(&rw, 0, sizeof(rw));
	rw.t = now;
	snprintf(rw.method, sizeof(rw.method), "%s", c->args.method);
	rw.source = c->r.source;
	rw.err = c->r.err;
	rw.has_value = c->r.err == RESIL_OK;
	if (rw.has_value)
		resil_value_format(&c->r.value, rw.value, sizeof(rw.value));
	else
		snprintf(rw.value, sizeof(rw.value), "-");
	rw.age = c->r.age;
	rw.calls = rp->calls;
	b = resil_pipeline_breaker(rp->p, c->args.method);
	rw.breaker = b != NULL ? (int)resil_breaker_get_state(b) : -1;
	for (k = 0; k < rp->nbands; k++)
		rw.band_state[k] =
		    (int)resil_breaker_get_state(rp->bands[k].b);
	rw.attempts = c->r.attempts;
	if (rw.source == RESIL_SOURCE_CACHE ||
	    (rw.source == RESIL_SOURCE_LIVE && rw.has_value))
		sim_ms_text(rw.age, age, sizeof(age));
	else
		snprintf(age, sizeof(age), "-");
	printf("%-6s %-12s %-12s %-8s %-5s %-6u %-12s %-8u %s\n",
	    sim_ms_text(rw.t, tt, sizeof(tt)), rw.method,
	    resil_source_name(rw.source), rw.value, age, rw.calls,
	    state_name(rw.breaker), rw.attempts,
	    rw.err == RESIL_OK ? "-" : resil_err_name(rw.err) + 6);
	if (rp->nrows == rp->cap) {
		size_t cap = rp->cap ? rp->cap * 2 : 64;
		row *nv = realloc(rp->rows, cap * sizeof(*nv));

		if (nv == NULL) {
			rp->failed = 1;
			return;
		}
		rp->rows = nv;
		rp->cap = cap;
	}
	rp->rows[rp->nrows++] = rw;
}

static void
lschedule(replayer *rp, uint64_t t, int kind, void *ptr, uint32_t arg)
{
	if (sim_schedule(&rp->q, t, kind, ptr, arg) != 0)
		rp->failed = 1;
}

/* Move c on from *st until it waits or is done. */
static void
ldrive(replayer *rp, lcall *c, resil_call_next st, uint64_t now)
{
	for (;;) {
		const step *s = rp->cur;
		resil_value v;
		int rc = -1;

		if (st.action == RESIL_CALL_DONE) {
			c->done = 1;
			print_row(rp, c, now);
			resil_result_free(&c->r);
			lcall_release(c);
			return;
		}
		if (st.action == RESIL_CALL_WAIT) {
			if (st.until != UINT64_MAX &&
			    (c->wake_at == 0 || c->wake_at > st.until ||
			        c->wake_at < now)) {
				c->wake_at = st.until;
				c->refs++;
				lschedule(rp, st.until, L_WAKE, c, 0);
			}
			return;
		}
		rp->calls++;
		resil_value_init(&v);
		if (s->b == B_SLOW) {
			lanswer *an = malloc(sizeof(*an));

			if (an == NULL) {
				rp->failed = 1;
				return;
			}
			an->c = c;
			an->attempt = st.attempt;
			an->s = s;
			c->refs++;
			lschedule(rp, now + s->slow, L_ANSWER, an, 0);
		} else {
			switch (s->b) {
			case B_OK:
				rc = parse_value(s->value, &v) == 0 ? 0 : -1;
				break;
			case B_NULL:
				rc = 0;
				break;
			case B_BUSINESS:
				rc = 400;
				break;
			default:
				rc = -1;
				break;
			}
			resil_call_report(&c->c, st.attempt, rc, &v, now);
			resil_value_free(&v);
		}
		if (resil_call_step(&c->c, now, &st) != RESIL_OK) {
			rp->failed = 1;
			return;
		}
	}
}

static int
replay(resil_pipeline *p, resil_manual_clock *mc, const step *steps,
    size_t nsteps, const band *bands, size_t nbands, row **rows, size_t *nrows)
{
	replayer rp;
	sim_event ev;
	size_t i;

	memset(&rp, 0, sizeof(rp));
	rp.p = p;
	rp.mc = mc;
	rp.bands = bands;
	rp.nbands = nbands;
	sim_queue_init(&rp.q);
	for (i = 0; i < nsteps; i++)
		lschedule(&rp, steps[i].t, L_STEP, (void *)&steps[i], 0);
	while (!rp.failed && sim_next(&rp.q, &ev)) {
		uint64_t now = ev.t;
		resil_call_next st;

		resil_manual_clock_set(mc, now);
		if (ev.kind == L_STEP) {
			const step *s = ev.p;
			unsigned k;

			rp.cur = s;
			for (k = 0; k < s->calls && !rp.failed; k++) {
				lcall *c = malloc(sizeof(*c));

				if (c == NULL) {
					rp.failed = 1;
					break;
				}
				memset(c, 0, sizeof(*c));
				c->args.method = s->method;
				if (resil_call_start(&c->c, p, NULL, &c->args,
				        &c->r, now, &st) != RESIL_OK) {
					free(c);
					rp.failed = 1;
					break;
				}
				ldrive(&rp, c, st, now);
			}
		} else if (ev.kind == L_WAKE) {
			lcall *c = ev.p;

			c->refs--;
			if (c->done || ev.t != c->wake_at) {
				lcall_release(c);
				continue;
			}
			c->wake_at = 0;
			if (resil_call_step(&c->c, now, &st) == RESIL_OK)
				ldrive(&rp, c, st, now);
		} else {
			lanswer *an = ev.p;
			lcall *c = an->c;
			resil_value v;
			int rc = parse_value(an->s->value, &v) == 0 ? 0 : -1;

			c->refs--;
			resil_call_report(&c->c, an->attempt, rc, &v, now);
			resil_value_free(&v);
			free(an);
			if (c->done) {
				lcall_release(c);
				continue;
			}
			if (resil_call_step(&c->c, now, &st) == RESIL_OK)
				ldrive(&rp, c, st, now);
		}
	}
	/* On a failure, calls still queued are left to the process's exit. */
	sim_queue_free(&rp.q);
	*rows = rp.rows;
	*nrows = rp.nrows;
	if (rp.failed) {
		fprintf(stderr, "resil-sim: out of memory\n");
		return 2;
	}
	return 0;
}

static void
usage(FILE *to)
{
	fprintf(to,
	    "usage: resil-sim CONFIG SCENARIO [--svg FILE] [--metrics FILE]\n"
	    "       resil-sim CONFIG... SCENARIO [--svg FILE]\n"
	    "       resil-sim --help | --version\n"
	    "Replays SCENARIO against the pipeline CONFIG describes, on a "
	    "manual clock,\n"
	    "as discrete events. A step scenario prints one line per call; "
	    "an event\n"
	    "scenario (zones, endpoints, arrivals, phases) one line per phase "
	    "and\n"
	    "configuration. Times are milliseconds (a unit may follow: "
	    "250us, 1.5s).\n"
	    "See docs/resil-sim.md.\n");
}

/* The bands: one per distinct breaker of the methods the scenario
 * calls, in order of first call. */
static size_t
collect_bands(resil_pipeline *p, const step *steps, size_t nsteps, band *bands)
{
	size_t n = 0, i, k;

	for (i = 0; i < nsteps; i++) {
		resil_breaker *b = resil_pipeline_breaker(p, steps[i].method);

		if (b == NULL)
			continue;
		for (k = 0; k < n && bands[k].b != b; k++)
			;
		if (k == n) {
			if (n == MAX_BANDS)
				continue;
			bands[n].b = b;
			bands[n].nmethods = 0;
			snprintf(bands[n].label, sizeof(bands[n].label), "%s",
			    steps[i].method);
			n++;
		} else if (bands[k].nmethods == 1 &&
		    strcmp(bands[k].label, steps[i].method) != 0) {
			/* One breaker for several methods: the service's. */
			snprintf(
			    bands[k].label, sizeof(bands[k].label), "breaker");
		} else {
			continue;
		}
		bands[k].nmethods++;
	}
	if (n == 1)
		snprintf(bands[0].label, sizeof(bands[0].label), "breaker");
	return n;
}

/* A step scenario calls one implicit endpoint: a cluster key would be
 * ignored, so it is refused (1, the message printed). */
static int
refuse_cluster_conf(const resil_config *conf, const char *conf_path)
{
	resil_config_setting set;

	if (!sim_cluster_setting(conf, &set))
		return 0;
	fprintf(stderr,
	    "%s:%u: %s: a step scenario has one implicit endpoint and no "
	    "cluster; cluster settings need an event scenario "
	    "(docs/resil-sim.md)\n",
	    set.origin != NULL ? set.origin : conf_path, set.line, set.key);
	return 1;
}

int
main(int argc, char **argv)
{
	const char *conf_path = NULL, *scn_path = NULL, *svg = NULL;
	const char *metrics = NULL;
	const char *dflt_method = "call";
	const char *pos[MAX_POSITIONAL];
	size_t npos = 0;
	resil_pipeline_config pcfg;
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
	resil_diag diag;
	step *steps = NULL;
	size_t nsteps = 0, nrows = 0, nbands = 0;
	row *rows = NULL;
	band bands[MAX_BANDS];
	int a, rc = 0;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--help") == 0 ||
		    strcmp(argv[a], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[a], "--version") == 0) {
			printf("resil-sim %s\n", resil_version_string());
			return 0;
		}
	}
	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--svg") == 0 && a + 1 < argc)
			svg = argv[++a];
		else if (strcmp(argv[a], "--metrics") == 0 && a + 1 < argc)
			metrics = argv[++a];
		else if (argv[a][0] == '-' && argv[a][1] != '\0') {
			fprintf(
			    stderr, "resil-sim: unknown option %s\n", argv[a]);
			usage(stderr);
			return 2;
		} else if (npos < MAX_POSITIONAL)
			pos[npos++] = argv[a];
		else
			npos = 0, a = argc; /* too many: usage */
	}
	if (npos < 2) {
		usage(stderr);
		return 2;
	}
	scn_path = pos[npos - 1];
	if (sim_des_detect(scn_path)) {
		if (metrics != NULL) {
			fprintf(stderr,
			    "resil-sim: --metrics is for step scenarios\n");
			return 2;
		}
		return sim_des_main(pos, npos - 1, scn_path, svg);
	}
	if (npos != 2) {
		usage(stderr);
		return 2;
	}
	conf_path = pos[0];
	if (resil_config_parse_file(&conf, conf_path, NULL, &diag) !=
	    RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 2;
	}
	if (refuse_cluster_conf(conf, conf_path)) {
		resil_config_free(conf);
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
	nbands = collect_bands(p, steps, nsteps, bands);

	printf("%-6s %-12s %-12s %-8s %-5s %-6s %-12s %-8s %s\n", "time",
	    "method", "source", "value", "age", "calls", "breaker", "attempts",
	    "error");
	rc = replay(p, &mc, steps, nsteps, bands, nbands, &rows, &nrows);
	if (rc != 0)
		goto out;
	fflush(stdout);
	if (svg != NULL && nrows > 0) {
		rc = write_svg(svg, rows, nrows, bands, nbands);
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

/* The event-driven engine, in this translation unit (see
 * tools/CMakeLists.txt). */
#include "sim/des.c"
#include "sim/des_read.c"
#include "sim/des_report.c"
#include "sim/queue.c"

/*
 * Reading an event scenario (docs/resil-sim.md, EVENT SCENARIO): one
 * directive a line, each read by the function its first word names in
 * the table `directives`; the `at TIME ...` actions by the table
 * `actions`. A bad line is refused as file:line: message.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/router.h>

#include "des.h"

/* A directive's reader: 0, or 2 after printing file:line: message; -1
 * when out of memory. */
typedef struct reader {
	const char *file;
	unsigned line;
	scenario *s;
	uint64_t phase_t; /* where the next phase starts */
	size_t caploss, caplag, capacts, capb;
	char *w[MAX_WORDS];
	int nw;
} reader;

typedef int (*directive_fn)(reader *rd);

static int
bad(const char *file, unsigned line, const char *msg, const char *arg)
{
	fprintf(stderr, "%s:%u: %s%s%s\n", file, line, msg, arg ? ": " : "",
	    arg ? arg : "");
	return 2;
}

/* An error of the whole file (no line to name). */
static int
bad_file(const char *file, const char *msg, const char *arg)
{
	fprintf(stderr, "%s: %s%s%s\n", file, msg, arg ? ": " : "",
	    arg ? arg : "");
	return 2;
}

static int
rbad(const reader *rd, const char *msg, const char *arg)
{
	return bad(rd->file, rd->line, msg, arg);
}

static int
zone_of(scenario *s, const char *name, int create)
{
	int i;

	for (i = 0; i < s->nzones; i++)
		if (strcmp(s->zones[i], name) == 0)
			return i;
	if (!create || s->nzones == MAX_ZONES || strlen(name) >= MAX_NAME)
		return -1;
	snprintf(s->zones[s->nzones], MAX_NAME, "%s", name);
	return s->nzones++;
}

static int
parse_pct(const char *w, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(w, &end);
	if (errno != 0 || end == w || strcmp(end, "%") != 0 || !(v >= 0) ||
	    v > 100)
		return -1;
	*out = v / 100.0;
	return 0;
}

static int
parse_uint(const char *w, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	if (*w < '0' || *w > '9')
		return -1;
	errno = 0;
	v = strtoul(w, &end, 10);
	if (errno != 0 || *end != '\0' || v > max)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* TIME: a duration, PHASE, PHASE+DURATION or DURATION+DURATION. */
static int
parse_at(const scenario *s, const char *w, uint64_t *out)
{
	char name[MAX_NAME];
	const char *plus = strchr(w, '+');
	size_t n = plus ? (size_t)(plus - w) : strlen(w);
	uint64_t d = 0;
	int i;

	if (sim_parse_time(w, out) == 0)
		return 0;
	if (n >= sizeof(name))
		return -1;
	memcpy(name, w, n);
	name[n] = '\0';
	if (plus != NULL && sim_parse_time(plus + 1, &d) != 0)
		return -1;
	if (plus != NULL && sim_parse_time(name, out) == 0) {
		*out += d;
		return 0;
	}
	for (i = 0; i < s->nphases; i++)
		if (strcmp(s->phases[i].name, name) == 0) {
			*out = s->phases[i].start + d;
			return 0;
		}
	return -1;
}

static int
grow(void **v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	{
		size_t nc = *cap ? *cap * 2 : 8;
		void *nv = realloc(*v, nc * size);

		if (nv == NULL)
			return -1;
		*v = nv;
		*cap = nc;
	}
	return 0;
}

/* TARGET: zones and endpoint addresses, comma-separated. */
static int
parse_target(scenario *s, const char *w, epset *out)
{
	char buf[MAX_LINE];
	char *save = NULL, *part;
	int i, n = 0;

	memset(out, 0, sizeof(*out));
	snprintf(buf, sizeof(buf), "%s", w);
	for (part = strtok_r(buf, ",", &save); part != NULL;
	     part = strtok_r(NULL, ",", &save), n++) {
		int z = zone_of(s, part, 0), found = z >= 0;

		for (i = 0; i < s->neps; i++)
			if (z >= 0 ? s->eps[i].zone == z
			           : strcmp(s->eps[i].address, part) == 0) {
				epset_add(out, i);
				found = 1;
			}
		if (!found)
			return -1;
	}
	return n > 0 && w[strlen(w) - 1] != ',' ? 0 : -1;
}

/* "workers=N": 1 if w is KEY=..., with the value checked into *out. */
static int
uint_opt(const char *w, const char *key, unsigned max, unsigned *out, int *err)
{
	size_t n = strlen(key);

	if (strncmp(w, key, n) != 0 || w[n] != '=')
		return 0;
	*err = parse_uint(w + n + 1, max, out) != 0;
	return 1;
}

static int
endpoint_opts(reader *rd, ep *e)
{
	int i, err = 0;

	e->workers = 1;
	e->qcap = UNBOUNDED;
	e->retry_after_ms = -1;
	for (i = 3; i < rd->nw; i++) {
		const char *w = rd->w[i];
		unsigned q;
		uint64_t d;

		if (uint_opt(w, "workers", 100000, &e->workers, &err)) {
			if (err || e->workers == 0)
				return rbad(rd, "workers= needs 1..100000", w);
		} else if (uint_opt(w, "queue", 1000000, &q, &err)) {
			if (err)
				return rbad(rd, "queue= needs 0..1000000", w);
			e->qcap = q;
		} else if (strncmp(w, "service=exp:", 12) == 0 &&
		    sim_parse_time(w + 12, &d) == 0) {
			e->exp = 1;
			e->mean = (double)d;
		} else if (strncmp(w, "service=", 8) == 0 &&
		    sim_parse_time(w + 8, &d) == 0) {
			e->exp = 0;
			e->mean = (double)d;
		} else if (strncmp(w, "retry_after=", 12) == 0 &&
		    sim_parse_time(w + 12, &d) == 0 &&
		    d / RESIL_NS_PER_MS <= RESIL_RC_RETRY_AFTER_MAX_MS) {
			e->retry_after_ms = (long)(d / RESIL_NS_PER_MS);
		} else if (strncmp(w, "reject=", 7) == 0 &&
		    sim_parse_time(w + 7, &d) == 0) {
			e->reject_ns = d;
		} else if (strncmp(w, "tag=", 4) == 0 && w[4] != '\0' &&
		    strlen(w + 4) < sizeof(e->tag)) {
			snprintf(e->tag, sizeof(e->tag), "%s", w + 4);
		} else {
			return rbad(rd,
			    "bad endpoint option (workers=N, queue=N, "
			    "service=DURATION, service=exp:MEAN, tag=T, "
			    "retry_after=DURATION, reject=DURATION)",
			    w);
		}
	}
	return 0;
}

/* `critical P%`: a share of the calls is critical (issue 42). */
static int
d_critical(reader *rd)
{
	if (parse_pct(rd->w[1], &rd->s->critical) != 0)
		return rbad(rd, "critical needs a share (10%)", rd->w[1]);
	rd->s->overload = 1;
	return 0;
}

static int
d_seed(reader *rd)
{
	char *end;

	errno = 0;
	rd->s->seed = strtoull(rd->w[1], &end, 10);
	if (errno != 0 || *end != '\0' || rd->w[1][0] == '-')
		return rbad(rd, "bad seed", rd->w[1]);
	return 0;
}

static int
d_caller(reader *rd)
{
	scenario *s = rd->s;
	int i, err = 0;

	s->caller = zone_of(s, rd->w[1], 1);
	if (s->caller < 0)
		return rbad(rd, "bad zone", rd->w[1]);
	for (i = 2; i < rd->nw; i++) {
		unsigned v;

		if (uint_opt(rd->w[i], "threads", 1000000, &v, &err) && !err &&
		    v > 0)
			s->threads = v;
		else if (uint_opt(rd->w[i], "queue", 10000000, &v, &err) &&
		    !err)
			s->queue = v;
		else
			return rbad(rd,
			    "caller options are threads=N (1..1000000) and "
			    "queue=N",
			    rd->w[i]);
	}
	return 0;
}

static int
d_endpoints(reader *rd)
{
	scenario *s = rd->s;
	int z = zone_of(s, rd->w[1], 1), rc;
	unsigned n, k;
	ep proto;

	if (z < 0 || parse_uint(rd->w[2], MAX_EPS, &n) != 0 || n == 0 ||
	    s->neps + (int)n > MAX_EPS)
		return rbad(rd,
		    "endpoints needs ZONE COUNT (at most 256 endpoints in "
		    "all)",
		    NULL);
	memset(&proto, 0, sizeof(proto));
	if ((rc = endpoint_opts(rd, &proto)) != 0)
		return rc;
	for (k = 0; k < n; k++) {
		ep *e = &s->eps[s->neps];
		unsigned same = 0;
		int j;

		for (j = 0; j < s->neps; j++)
			same += s->eps[j].zone == z;
		*e = proto;
		e->zone = z;
		e->listed = 1;
		snprintf(e->address, sizeof(e->address), "10.0.%d.%u:20880",
		    z + 1, same + 1);
		s->neps++;
	}
	return 0;
}

static int
d_rtt(reader *rd)
{
	scenario *s = rd->s;
	int a = zone_of(s, rd->w[1], 1), b = zone_of(s, rd->w[2], 1);
	uint64_t lo, hi;

	if (a < 0 || b < 0 || sim_parse_time(rd->w[3], &lo) != 0 ||
	    sim_parse_time(rd->w[4], &hi) != 0 || hi < lo)
		return rbad(rd,
		    "rtt needs ZONE ZONE LOW HIGH (durations, LOW <= HIGH)",
		    NULL);
	s->net[a][b].lo = s->net[b][a].lo = lo;
	s->net[a][b].hi = s->net[b][a].hi = hi;
	s->net[a][b].set = s->net[b][a].set = 1;
	return 0;
}

/* The optional "at TIME for DURATION" of w[i..i+4). */
static int
window_of(reader *rd, int i, window *out)
{
	uint64_t d;

	out->from = 0;
	out->until = UINT64_MAX;
	if (rd->nw == i)
		return 0;
	if (rd->nw != i + 4 || strcmp(rd->w[i], "at") != 0 ||
	    strcmp(rd->w[i + 2], "for") != 0 ||
	    parse_at(rd->s, rd->w[i + 1], &out->from) != 0 ||
	    sim_parse_time(rd->w[i + 3], &d) != 0)
		return -1;
	out->until = out->from + d;
	return 0;
}

static int
d_loss(reader *rd)
{
	scenario *s = rd->s;
	int a = zone_of(s, rd->w[1], 1), b = zone_of(s, rd->w[2], 1);
	window lw;

	memset(&lw, 0, sizeof(lw));
	if (a < 0 || b < 0 || parse_pct(rd->w[3], &lw.p) != 0 ||
	    (rd->nw != 4 && rd->nw != 8))
		return rbad(rd,
		    "loss needs ZONE ZONE PERCENT% [at TIME for DURATION]",
		    NULL);
	if (rd->nw == 4) {
		s->net[a][b].loss = s->net[b][a].loss = lw.p;
		return 0;
	}
	if (window_of(rd, 4, &lw) != 0)
		return rbad(rd, "loss ... at TIME for DURATION", NULL);
	lw.a = a;
	lw.b = b;
	if (grow((void **)&s->loss, &rd->caploss, s->nloss, sizeof(lw)) != 0)
		return -1;
	s->loss[s->nloss++] = lw;
	return 0;
}

static int
d_lag(reader *rd)
{
	scenario *s = rd->s;
	window lw;

	memset(&lw, 0, sizeof(lw));
	lw.a = zone_of(s, rd->w[1], 1);
	if (lw.a < 0 || sim_parse_time(rd->w[2], &lw.d) != 0 ||
	    window_of(rd, 3, &lw) != 0)
		return rbad(rd,
		    "lag needs ZONE DURATION [at TIME for DURATION]", NULL);
	if (grow((void **)&s->lag, &rd->caplag, s->nlag, sizeof(lw)) != 0)
		return -1;
	s->lag[s->nlag++] = lw;
	return 0;
}

static int
d_heartbeat(reader *rd)
{
	if (sim_parse_time(rd->w[1], &rd->s->heartbeat) != 0 ||
	    rd->s->heartbeat == 0)
		return rbad(rd, "heartbeat needs a TIMEOUT above 0", rd->w[1]);
	return 0;
}

static int
d_arrivals(reader *rd)
{
	char *end;

	errno = 0;
	rd->s->rate = strtod(rd->w[1], &end);
	if (errno != 0 || *end != '\0' || !(rd->s->rate > 0) ||
	    rd->s->rate > 1e7)
		return rbad(
		    rd, "arrivals needs a rate in calls per second", rd->w[1]);
	return 0;
}

static int
d_call(reader *rd)
{
	scenario *s = rd->s;
	callbatch cb;

	cb.n = 1;
	cb.line = rd->line;
	if (parse_at(s, rd->w[1], &cb.t) != 0 ||
	    (rd->nw == 3 &&
	        (strncmp(rd->w[2], "calls=", 6) != 0 ||
	            parse_uint(rd->w[2] + 6, 100000, &cb.n) != 0)))
		return rbad(rd, "call needs TIME [calls=N]", NULL);
	if (grow((void **)&s->batches, &rd->capb, s->nbatches, sizeof(cb)) !=
	    0)
		return -1;
	s->batches[s->nbatches++] = cb;
	return 0;
}

static int
d_method(reader *rd)
{
	if (strlen(rd->w[1]) >= MAX_NAME)
		return rbad(rd, "unknown or malformed line", rd->w[0]);
	snprintf(rd->s->method, sizeof(rd->s->method), "%s", rd->w[1]);
	return 0;
}

static int
d_phase(reader *rd)
{
	scenario *s = rd->s;
	phase *ph = &s->phases[s->nphases];
	uint64_t d;

	if (s->nphases == MAX_PHASES || strlen(rd->w[1]) >= MAX_NAME ||
	    sim_parse_time(rd->w[2], &d) != 0 || d == 0)
		return rbad(
		    rd, "phase needs NAME DURATION (at most 16 phases)", NULL);
	ph->rate = 0;
	if (rd->nw == 4) {
		char *end = rd->w[3];

		errno = 0;
		ph->rate = strncmp(rd->w[3], "arrivals=", 9) == 0
		    ? strtod(rd->w[3] + 9, &end)
		    : -1;
		if (ph->rate < 0 || errno != 0 || *end != '\0' ||
		    !(ph->rate > 0) || ph->rate > 1e7)
			return rbad(rd,
			    "phase needs NAME DURATION [arrivals=RATE] (calls "
			    "per second)",
			    rd->w[3]);
		s->phase_rates = 1;
	}
	snprintf(ph->name, sizeof(ph->name), "%s", rd->w[1]);
	ph->start = rd->phase_t;
	ph->end = rd->phase_t + d;
	rd->phase_t = ph->end;
	s->nphases++;
	return 0;
}

static int
d_bucket(reader *rd)
{
	if (sim_parse_time(rd->w[1], &rd->s->bucket) != 0 ||
	    rd->s->bucket == 0)
		return rbad(rd, "bad bucket", rd->w[1]);
	return 0;
}

/* request [tag=T] [force] [args=A,B,...] [keys=N]: what every call
 * carries to routing (docs/resil-sim.md). */
static int
d_request(reader *rd)
{
	scenario *s = rd->s;
	int i;

	for (i = 1; i < rd->nw; i++) {
		const char *w = rd->w[i];

		if (strncmp(w, "tag=", 4) == 0 && w[4] != '\0' &&
		    strlen(w + 4) < MAX_NAME) {
			snprintf(s->tag, sizeof(s->tag), "%s", w + 4);
		} else if (strcmp(w, "force") == 0) {
			s->tag_force = 1;
		} else if (strncmp(w, "args=", 5) == 0 && w[5] != '\0' &&
		    strlen(w + 5) < sizeof(s->argbuf)) {
			char *q;

			snprintf(s->argbuf, sizeof(s->argbuf), "%s", w + 5);
			s->nargs = 0;
			for (q = s->argbuf; q != NULL && s->nargs < 7;) {
				char *comma = strchr(q, ',');

				if (comma != NULL)
					*comma = '\0';
				s->nargs++;
				q = comma != NULL ? comma + 1 : NULL;
			}
		} else if (strncmp(w, "keys=", 5) == 0) {
			char *end;
			unsigned long n = strtoul(w + 5, &end, 10);

			if (end == w + 5 || *end != '\0' || n == 0 ||
			    n > 1000000)
				return rbad(rd,
				    "request keys=N needs N in 1..1000000",
				    NULL);
			s->keys = (uint32_t)n;
		} else {
			return rbad(rd,
			    "request takes tag=T, force, args=A,B and keys=N",
			    NULL);
		}
	}
	if (s->tag_force && s->tag[0] == '\0')
		return rbad(rd, "request force needs tag=T", NULL);
	return 0;
}

static int
d_trace(reader *rd)
{
	rd->s->trace = 1;
	return 0;
}

/* compare PHASE LABEL LOCAL% P99 ERRORS% ...: one triple of reference
 * figures per configuration, in order; one such line. */
static int
d_compare(reader *rd)
{
	scenario *s = rd->s;
	int i, k;

	for (i = 0; i < s->nphases; i++)
		if (strcmp(s->phases[i].name, rd->w[1]) == 0)
			break;
	if (i == s->nphases || s->nrefs > 0 || (rd->nw - 3) % 3 != 0 ||
	    strlen(rd->w[2]) >= MAX_NAME)
		return rbad(rd,
		    "compare needs PHASE LABEL and LOCAL% P99 ERRORS% for "
		    "each configuration (a phase declared before; one "
		    "compare line)",
		    NULL);
	for (k = 3; k < rd->nw; k += 3) {
		reference *ref = &s->refs[(k - 3) / 3];
		uint64_t p99;

		if (parse_pct(rd->w[k], &ref->local) != 0 ||
		    sim_parse_time(rd->w[k + 1], &p99) != 0 ||
		    parse_pct(rd->w[k + 2], &ref->errors) != 0)
			return rbad(rd,
			    "compare: figures are LOCAL% P99 ERRORS% (e.g. "
			    "68% 1800ms 1.2%)",
			    rd->w[k]);
		ref->p99_ms = (double)p99 / (double)RESIL_NS_PER_MS;
	}
	s->nrefs = (size_t)(rd->nw - 3) / 3;
	s->ref_phase = i;
	snprintf(s->ref_label, sizeof(s->ref_label), "%s", rd->w[2]);
	return 0;
}

/* at TIME rule none | at TIME rule TEXT: the text is the rest of the
 * line, checked here (and parsed again at run time). */
static int
rule_text(reader *rd, action *a)
{
	char text[MAX_LINE];
	size_t n = 0;
	resil_condition *c;
	resil_diag diag;
	int i;

	if (rd->nw == 4 && strcmp(rd->w[3], "none") == 0)
		return 0;
	text[0] = '\0';
	for (i = 3; i < rd->nw; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s",
		    i > 3 ? " " : "", rd->w[i]);
	switch (resil_condition_parse(&c, text, 0, NULL, &diag)) {
	case RESIL_OK:
		break;
	case RESIL_E_NOMEM:
		return -1;
	default:
		return rbad(rd, diag.msg, NULL);
	}
	resil_condition_free(c);
	a->rule = strdup(text);
	return a->rule != NULL ? 0 : -1;
}

/* The actions of `at TIME VERB ...`: VERB, the words after it, and the
 * kind. */
static const struct act_form {
	const char *verb, *sub;
	int nw; /* the line's words; 0: 4 or more */
	enum act_kind kind;
} act_forms[] = {
	{ "refuse", NULL, 4, A_REFUSE },
	{ "accept", NULL, 4, A_ACCEPT },
	{ "pause", NULL, 5, A_PAUSE },
	{ "push", "remove", 5, A_REMOVE },
	{ "push", "add", 5, A_ADD },
	{ "push", "without", 5, A_WITHOUT },
	{ "push", "empty", 4, A_EMPTY },
	{ "push", "resync", 4, A_RESYNC },
	{ "rule", NULL, 0, A_RULE },
};

static int
d_at(reader *rd)
{
	scenario *s = rd->s;
	const struct act_form *f = NULL;
	action a;
	size_t i;
	int rc = 0;

	for (i = 0; i < sizeof(act_forms) / sizeof(act_forms[0]); i++)
		if (rd->nw >= 3 && strcmp(rd->w[2], act_forms[i].verb) == 0 &&
		    (act_forms[i].sub == NULL ||
		        (rd->nw >= 4 &&
		            strcmp(rd->w[3], act_forms[i].sub) == 0)) &&
		    (act_forms[i].nw == 0 ? rd->nw >= 4
		                          : rd->nw == act_forms[i].nw))
			f = &act_forms[i];
	if (f == NULL)
		return rbad(rd, "unknown or malformed line", rd->w[0]);
	memset(&a, 0, sizeof(a));
	a.line = rd->line;
	a.kind = f->kind;
	if (parse_at(s, rd->w[1], &a.t) != 0)
		return rbad(rd,
		    "bad time (a duration, PHASE or PHASE+DURATION)",
		    rd->w[1]);
	if (f->kind == A_RULE)
		rc = rule_text(rd, &a);
	else if (f->kind == A_PAUSE &&
	    (sim_parse_time(rd->w[4], &a.d) != 0 || a.d == 0))
		rc = rbad(rd, "pause needs TARGET DURATION", rd->w[4]);
	else if (f->kind != A_EMPTY && f->kind != A_RESYNC &&
	    parse_target(s, rd->w[f->sub ? 4 : 3], &a.target) != 0)
		rc = rbad(rd, "not a zone or endpoint address",
		    rd->w[f->sub ? 4 : 3]);
	if (rc == 0 &&
	    grow((void **)&s->acts, &rd->capacts, s->nacts, sizeof(a)) != 0)
		rc = -1;
	if (rc != 0) {
		free(a.rule);
		return rc;
	}
	s->acts[s->nacts++] = a;
	return 0;
}

/* The directives: the first word, the line's words (min, max) and the
 * reader. A line whose word count is out of range is malformed. */
static const struct directive {
	const char *word;
	int min, max;
	directive_fn fn;
} directives[] = {
	{ "seed", 2, 2, d_seed },
	{ "caller", 2, 4, d_caller },
	{ "endpoints", 3, MAX_WORDS, d_endpoints },
	{ "rtt", 5, 5, d_rtt },
	{ "loss", 4, 8, d_loss },
	{ "lag", 3, 7, d_lag },
	{ "heartbeat", 2, 2, d_heartbeat },
	{ "arrivals", 2, 2, d_arrivals },
	{ "call", 2, 3, d_call },
	{ "method", 2, 2, d_method },
	{ "request", 2, 6, d_request },
	{ "phase", 3, 4, d_phase },
	{ "at", 3, MAX_WORDS, d_at },
	{ "compare", 6, 3 + 3 * MAX_CONFS, d_compare },
	{ "bucket", 2, 2, d_bucket },
	{ "trace", 1, 1, d_trace },
	{ "critical", 2, 2, d_critical },
};

static int
read_line(reader *rd, char *buf)
{
	size_t i;

	rd->nw = sim_split(buf, rd->w, MAX_WORDS);
	if (rd->nw == 0)
		return 0;
	if (rd->nw < 0)
		return rbad(rd, "too many words", NULL);
	for (i = 0; i < sizeof(directives) / sizeof(directives[0]); i++)
		if (strcmp(rd->w[0], directives[i].word) == 0 &&
		    rd->nw >= directives[i].min && rd->nw <= directives[i].max)
			return directives[i].fn(rd);
	return rbad(rd, "unknown or malformed line", rd->w[0]);
}

/* What a whole scenario needs; 0 or 2. */
static int
check_whole(const char *file, scenario *s)
{
	size_t i;
	int e;

	if (s->caller < 0)
		return bad_file(file, "no `caller ZONE` line", NULL);
	if (s->neps == 0)
		return bad_file(file, "no endpoints", NULL);
	if (s->nphases == 0)
		return bad_file(file, "no phase", NULL);
	for (e = 0; e < s->neps; e++)
		if (!s->net[s->caller][s->eps[e].zone].set)
			return bad_file(file, "no rtt between zones",
			    s->zones[s->eps[e].zone]);
	for (i = 0; i < s->nlag; i++)
		if (s->lag[i].a != s->caller)
			return bad_file(file,
			    "a lag is for the caller's zone (the one that "
			    "gets pushes)",
			    s->zones[s->lag[i].a]);
	return 0;
}

static int
read_des(const char *file, scenario *s)
{
	FILE *f = fopen(file, "r");
	char buf[MAX_LINE + 2];
	reader rd;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	memset(&rd, 0, sizeof(rd));
	rd.file = s->path = file;
	rd.s = s;
	s->caller = -1;
	s->threads = s->queue = UNBOUNDED;
	s->bucket = 10 * RESIL_NS_PER_SEC;
	s->seed = 1;
	if (f == NULL) {
		fprintf(
		    stderr, "%s: cannot open: %s\n", file, strerror(errno));
		return 2;
	}
	while (rc == 0 && fgets(buf, sizeof(buf), f) != NULL) {
		rd.line++;
		if (strchr(buf, '\n') == NULL && !feof(f))
			rc = rbad(&rd, "line too long", NULL);
		else
			rc = read_line(&rd, buf);
	}
	fclose(f);
	if (rc < 0) {
		fprintf(stderr, "resil-sim: out of memory\n");
		return 2;
	}
	if (rc != 0)
		return rc;
	s->end = rd.phase_t;
	return check_whole(file, s);
}

static void
free_scenario(scenario *s)
{
	size_t i;

	for (i = 0; i < s->nacts; i++)
		free(s->acts[i].rule);
	free(s->loss);
	free(s->lag);
	free(s->acts);
	free(s->batches);
}

/*
 * resil-sim's event-driven figures: one line per phase and
 * configuration, the compare line against a scenario's reference
 * figures, and the picture (local share, p99 and error rate over time,
 * one line per configuration, phases, loss bursts, push lags and the
 * scenario's actions drawn).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "des.h"

/* The k-th smallest of v[0..n) (0-based), reordering v: Wirth's
 * quickselect (Hoare's partition, fine with many equal values; a sort
 * would cost a tenth of a run). */
static uint64_t
select_kth(uint64_t *v, size_t n, size_t k)
{
	long l = 0, r = (long)n - 1, kk = (long)k;

	while (l < r) {
		uint64_t x = v[kk];
		long i = l, j = r;

		do {
			while (v[i] < x)
				i++;
			while (x < v[j])
				j--;
			if (i <= j) {
				uint64_t t = v[i];

				v[i++] = v[j];
				v[j--] = t;
			}
		} while (i <= j);
		if (j < kk)
			l = i;
		if (kk < i)
			r = j;
	}
	return v[kk];
}

/* Which of nbins bins a call started at t falls in (nbins: none): the
 * phases (the last one has no end), or buckets of `width`. */
typedef struct binning {
	const scenario *s;
	uint64_t width; /* 0: by phase */
	size_t nbins;
} binning;

static size_t
bin_of(const binning *b, uint64_t t)
{
	int i;

	if (b->width > 0)
		return t / b->width < b->nbins ? (size_t)(t / b->width)
		                               : b->nbins;
	for (i = b->s->nphases - 1; i > 0 && t < b->s->phases[i].start; i--)
		;
	return (size_t)i;
}

/*
 * The figures of each bin of calls, in one pass over the records and one
 * selection per bin: lat (scratch, as many as records) holds the latencies
 * grouped by bin. p99 is the nearest rank, ceil(0.99 k) of k. Returns 0,
 * -1 when out of memory.
 */
static int
figures_binned(const rec *recs, size_t n, const binning *b, uint64_t *lat,
    figures *out)
{
	size_t *off = calloc(b->nbins + 2, sizeof(*off));
	size_t i, k;

	if (off == NULL)
		return -1;
	memset(out, 0, b->nbins * sizeof(*out));
	for (i = 0; i < n; i++) {
		size_t bi = bin_of(b, recs[i].start);

		off[bi + 1]++;
		if (bi == b->nbins)
			continue;
		out[bi].calls++;
		out[bi].errors += recs[i].err;
		out[bi].sent += recs[i].sent;
		out[bi].local += recs[i].local;
	}
	for (k = 1; k <= b->nbins + 1; k++)
		off[k] += off[k - 1];
	for (i = 0; i < n; i++)
		lat[off[bin_of(b, recs[i].start)]++] = recs[i].lat;
	for (k = 0; k < b->nbins; k++) {
		uint64_t *v = lat + off[k] - out[k].calls;
		size_t cnt = (size_t)out[k].calls;

		if (cnt == 0)
			continue;
		out[k].p99_ms =
		    (double)select_kth(v, cnt, (99 * cnt + 99) / 100 - 1) /
		    (double)RESIL_NS_PER_MS;
	}
	free(off);
	return 0;
}

static double
pct(uint64_t a, uint64_t b)
{
	return b == 0 ? 0.0 : 100.0 * (double)a / (double)b;
}

static double
attempts_of(const figures *f)
{
	return f->calls ? (double)f->sent / (double)f->calls : 0.0;
}

/* One line per phase; with a bulkhead (issue 28), its limit at the
 * phase's last arrival and its range over the phase's second half. */
static void
print_phases(const scenario *s, const figures *ph, const run *r)
{
	int i;

	for (i = 0; i < s->nphases; i++) {
		printf("phase %s: calls %" PRIu64
		       " local %.1f%% p99 %.1f ms errors %.3f%% attempts "
		       "%.3f",
		    s->phases[i].name, ph[i].calls, pct(ph[i].local, ph[i].sent),
		    ph[i].p99_ms, pct(ph[i].errors, ph[i].calls),
		    attempts_of(&ph[i]));
		if (resil_pipeline_bulkhead(r->p) != NULL)
			printf(" limit %" PRIu32 " settled %" PRIu32 "..%" PRIu32,
			    r->lim_last[i], r->lim_lo[i], r->lim_hi[i]);
		printf("\n");
	}
}

/* The scenario's capacity in calls per second: every endpoint's workers
 * over its mean service time (issue 42). */
static double
capacity_of(const scenario *s)
{
	double c = 0;
	int i;

	for (i = 0; i < s->neps; i++)
		if (s->eps[i].mean > 0)
			c += (double)s->eps[i].workers *
			    (double)RESIL_NS_PER_SEC / s->eps[i].mean;
	return c;
}

/*
 * The overload report (issue 42, a scenario with `critical P%`), one line
 * per phase over the calls that arrived in it:
 *   phase NAME: offered X/s goodput Y/s (P% of capacity) critical Z%
 *   p99 T ms shed S%
 * goodput: calls answered RESIL_OK per second; critical: the share of
 * critical calls answered OK; p99: of the calls answered OK (admitted and
 * served; nearest rank); shed: the share of calls not answered OK.
 */
static int
print_overload(const scenario *s, const run *r, uint64_t *lat)
{
	double cap = capacity_of(s);
	int i;

	for (i = 0; i < s->nphases; i++) {
		const phase *ph = &s->phases[i];
		double secs = (double)(ph->end - ph->start) /
		    (double)RESIL_NS_PER_SEC;
		uint64_t calls = 0, ok = 0, crit = 0, crit_ok = 0;
		double p99 = 0;
		size_t k, n = 0;

		for (k = 0; k < r->nrecs; k++) {
			const rec *c = &r->recs[k];

			if (c->start < ph->start || c->start >= ph->end)
				continue;
			calls++;
			crit += c->crit;
			if (c->err)
				continue;
			ok++;
			crit_ok += c->crit;
			lat[n++] = c->lat;
		}
		if (n > 0)
			p99 = (double)select_kth(lat, n, (99 * n + 99) / 100 - 1) /
			    (double)RESIL_NS_PER_MS;
		printf("phase %s: offered %.0f/s goodput %.0f/s (%.1f%% of "
		       "capacity) critical %.2f%% p99 %.1f ms shed %.2f%%\n",
		    ph->name, secs > 0 ? (double)calls / secs : 0.0,
		    secs > 0 ? (double)ok / secs : 0.0,
		    cap > 0 && secs > 0 ? 100.0 * (double)ok / secs / cap : 0.0,
		    pct(crit_ok, crit), p99, pct(calls - ok, calls));
	}
	return 0;
}

/*
 * The compare line: the reference figures (first to last configuration)
 * and the run's, for the compare line's phase:
 *   compare healthy: local 68% -> 93%, p99 1800 -> 400 ms, errors 1.2% ->
 *   0.3% (seed-002); local 67.9% -> 100.0%, ... (resil-sim)
 */
static void
print_compare(const scenario *s, const figures *const *ph, size_t nconfs)
{
	size_t k;
	int p = s->ref_phase;

	printf("compare %s: local", s->phases[p].name);
	for (k = 0; k < s->nrefs; k++)
		printf("%s%g%%", k ? " -> " : " ", s->refs[k].local * 100.0);
	printf(", p99");
	for (k = 0; k < s->nrefs; k++)
		printf("%s%g", k ? " -> " : " ", s->refs[k].p99_ms);
	printf(" ms, errors");
	for (k = 0; k < s->nrefs; k++)
		printf("%s%g%%", k ? " -> " : " ", s->refs[k].errors * 100.0);
	printf(" (%s); local", s->ref_label);
	for (k = 0; k < nconfs; k++)
		printf("%s%.1f%%", k ? " -> " : " ",
		    pct(ph[k][p].local, ph[k][p].sent));
	printf(", p99");
	for (k = 0; k < nconfs; k++)
		printf("%s%.1f", k ? " -> " : " ", ph[k][p].p99_ms);
	printf(" ms, errors");
	for (k = 0; k < nconfs; k++)
		printf("%s%.3f%%", k ? " -> " : " ",
		    pct(ph[k][p].errors, ph[k][p].calls));
	printf(" (resil-sim)\n");
}

/* One series per configuration: figures per bucket. */
typedef struct series {
	const char *label;
	size_t n;
	figures *b;
} series;

static const char *const colours[MAX_CONFS] = { "#c62828", "#1565c0",
	"#2e7d32", "#6a1b9a" };

/* A panel of the picture: its place and what it shows (0: local share,
 * 1: p99 on a log scale, 2: error rate). */
typedef struct panel_at {
	double x0, y0, w, h, vmax;
	int which;
} panel_at;

/* Issue 42: in an overload report, the first panel is the goodput in
 * percent of the capacity: calls answered OK per bucket over this (the
 * calls the capacity serves in a bucket); 0: the local share. */
static double goodput_per_bucket_at_capacity;

static double
value_of(int which, const figures *b)
{
	if (which == 0 && goodput_per_bucket_at_capacity > 0)
		return 100.0 * (double)(b->calls - b->errors) /
		    goodput_per_bucket_at_capacity;
	return which == 0 ? pct(b->local, b->sent)
	    : which == 1  ? b->p99_ms
	                  : pct(b->errors, b->calls);
}

/* Where v falls in a panel whose top is vmax, 0 (bottom) to 1: linear,
 * or for latencies (logarithmic) from 1 ms. The top is at 95% of the
 * panel, so that a line at the maximum stays clear of the frame. */
static double
frac_of(int logscale, double v, double vmax)
{
	if (!logscale)
		return 0.95 * v / vmax;
	if (v <= 1.0)
		return 0.0;
	return 0.95 * sim_log(v) / sim_log(vmax);
}

static double
x_of(const panel_at *pa, const scenario *s, uint64_t t)
{
	return pa->x0 + pa->w * (double)t / (double)s->end;
}

static void
panel_frame(FILE *f, const panel_at *pa, const char *title, const char *unit)
{
	fprintf(f,
	    "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n"
	    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
	    "fill=\"none\" stroke=\"#999\"/>\n"
	    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g%s</text>\n"
	    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
	    pa->x0, pa->y0 - 6.0, title, pa->x0, pa->y0, pa->w, pa->h,
	    pa->x0 - 4.0, pa->y0 + 0.05 * pa->h + 4.0, pa->vmax, unit,
	    pa->x0 - 4.0, pa->y0 + pa->h, pa->which == 1 ? "1 ms" : "0");
	if (pa->which == 1) {
		/* Latencies on a log scale: a line at each power of ten. */
		double g;

		for (g = 10.0; g < pa->vmax; g *= 10.0) {
			double y =
			    pa->y0 + pa->h - pa->h * frac_of(1, g, pa->vmax);

			fprintf(f,
			    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			    "y2=\"%.1f\" stroke=\"#ddd\"/>\n"
			    "<text x=\"%.1f\" y=\"%.1f\" "
			    "text-anchor=\"end\">%g ms</text>\n",
			    pa->x0, y, pa->x0 + pa->w, y, pa->x0 - 4.0, y + 4.0,
			    g);
		}
	}
}

/* Loss bursts (orange) and push lags (blue), shaded. */
static void
panel_windows(FILE *f, const panel_at *pa, const scenario *s)
{
	size_t i;

	for (i = 0; i < s->nloss + s->nlag; i++) {
		int lag = i >= s->nloss;
		const window *lw = lag ? &s->lag[i - s->nloss] : &s->loss[i];
		uint64_t until = lw->until < s->end ? lw->until : s->end;
		double xa = x_of(pa, s, lw->from < s->end ? lw->from : s->end);
		double xb = x_of(pa, s, until);
		char d[32];

		fprintf(f,
		    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		    "height=\"%.1f\" fill=\"%s\"><title>",
		    xa, pa->y0, xb - xa > 1.0 ? xb - xa : 1.0, pa->h,
		    lag ? "#bbdefb" : "#ffe0b2");
		if (lag)
			fprintf(f, "pushes reach %s %s ms late",
			    s->zones[lw->a], sim_ms_text(lw->d, d, sizeof(d)));
		else
			fprintf(f, "loss %s-%s %g%%", s->zones[lw->a],
			    s->zones[lw->b], lw->p * 100.0);
		fprintf(f, "</title></rect>\n");
	}
}

/* The time axis and the phases (dashed, named). */
static void
panel_axis(FILE *f, const panel_at *pa, const scenario *s)
{
	uint64_t tick = s->end > 20 * 60 * RESIL_NS_PER_SEC
	    ? 5 * 60 * RESIL_NS_PER_SEC
	    : s->end / 4 + 1;
	uint64_t t;
	char tb[32];
	int p;

	for (t = 0; t <= s->end; t += tick)
		fprintf(f,
		    "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\" "
		    "text-anchor=\"middle\">%s s</text>\n",
		    x_of(pa, s, t), pa->y0 + pa->h + 12.0,
		    sim_ms_text(t / 1000, tb, sizeof(tb)));
	for (p = 0; p < s->nphases; p++) {
		double x = x_of(pa, s, s->phases[p].start);

		fprintf(f,
		    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		    "stroke=\"#777\" stroke-dasharray=\"4,3\"/>\n"
		    "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">%s</text>\n",
		    x, pa->y0, x, pa->y0 + pa->h, x + 3.0, pa->y0 + 12.0,
		    s->phases[p].name);
	}
}

static const char *const act_names[] = { [A_REFUSE] = "refuse",
	[A_ACCEPT] = "accept", [A_PAUSE] = "pause", [A_REMOVE] = "push remove",
	[A_ADD] = "push add", [A_EMPTY] = "push empty",
	[A_WITHOUT] = "push without", [A_RESYNC] = "push resync",
	[A_RULE] = "rule" };

/* The scenario's actions: a mark at each, its kind on top (in the first
 * panel only), what it does in its title. */
static void
panel_actions(FILE *f, const panel_at *pa, const scenario *s)
{
	size_t i;

	for (i = 0; i < s->nacts; i++) {
		const action *a = &s->acts[i];
		double x = x_of(pa, s, a->t < s->end ? a->t : s->end);
		char tb[32];

		fprintf(f,
		    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		    "stroke=\"#8e24aa\" stroke-width=\"1\"><title>%s ms: "
		    "%s%s%s (line %u)</title></line>\n",
		    x, pa->y0, x, pa->y0 + pa->h,
		    sim_ms_text(a->t, tb, sizeof(tb)), act_names[a->kind],
		    a->kind == A_RULE ? " " : "",
		    a->kind == A_RULE ? (a->rule ? a->rule : "none") : "",
		    a->line);
		if (pa->which == 0)
			fprintf(f,
			    "<text x=\"%.1f\" y=\"%.1f\" fill=\"#8e24aa\" "
			    "font-size=\"9\">%s</text>\n",
			    x + 2.0, pa->y0 + 24.0 + 10.0 * (double)(i % 4),
			    act_names[a->kind]);
	}
}

static void
panel_lines(FILE *f, const panel_at *pa, const scenario *s,
    const series *sr, size_t ns)
{
	size_t k, i;

	for (k = 0; k < ns; k++) {
		fprintf(f,
		    "<polyline fill=\"none\" stroke=\"%s\" "
		    "stroke-width=\"1.5\" points=\"",
		    colours[k]);
		for (i = 0; i < sr[k].n; i++) {
			const figures *b = &sr[k].b[i];
			double x = pa->x0 +
			    pa->w * ((double)i + 0.5) * (double)s->bucket /
			        (double)s->end;

			if (b->calls == 0)
				continue;
			fprintf(f, "%.1f,%.1f ", x,
			    pa->y0 + pa->h -
			        pa->h *
			            frac_of(pa->which == 1,
			                value_of(pa->which, b), pa->vmax));
		}
		fprintf(f, "\"/>\n");
	}
}

static void
panel(FILE *f, const scenario *s, const series *sr, size_t ns, int which,
    double y0, const char *title, const char *unit)
{
	panel_at pa;
	size_t k, i;

	pa.x0 = 70.0;
	pa.w = 860.0;
	pa.y0 = y0;
	pa.h = 150.0;
	pa.which = which;
	pa.vmax = 0.0;
	for (k = 0; k < ns; k++)
		for (i = 0; i < sr[k].n; i++)
			if (sr[k].b[i].calls > 0 &&
			    value_of(which, &sr[k].b[i]) > pa.vmax)
				pa.vmax = value_of(which, &sr[k].b[i]);
	if ((which == 0 && goodput_per_bucket_at_capacity == 0) ||
	    pa.vmax <= 0)
		pa.vmax = which == 0 ? 100.0 : 1.0;
	if (which == 1 && pa.vmax < 10.0)
		pa.vmax = 10.0;
	panel_frame(f, &pa, title, unit);
	panel_windows(f, &pa, s);
	panel_axis(f, &pa, s);
	panel_actions(f, &pa, s);
	panel_lines(f, &pa, s, sr, ns);
}

static int
des_write_svg(const char *path, const scenario *s, const series *sr, size_t ns)
{
	FILE *f = fopen(path, "w");
	double ph = 150.0;
	size_t k;
	char tb[32];

	if (f == NULL) {
		fprintf(
		    stderr, "%s: cannot write: %s\n", path, strerror(errno));
		return 2;
	}
	fprintf(f,
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" "
	    "height=\"%d\" font-family=\"monospace\" font-size=\"11\">\n"
	    "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
	    "<text x=\"70\" y=\"18\">%s: each point is the calls that arrived in "
	    "%s ms (loss bursts orange, push lags blue, phases dashed, "
	    "actions purple)</text>\n",
	    (int)(60 + 3 * (ph + 40) + 20 * (double)ns), s->path,
	    sim_ms_text(s->bucket, tb, sizeof(tb)));
	if (s->overload)
		goodput_per_bucket_at_capacity = capacity_of(s) *
		    (double)s->bucket / (double)RESIL_NS_PER_SEC;
	panel(f, s, sr, ns, 0, 50.0,
	    s->overload ? "goodput, % of capacity (overload report)"
	                : "local-zone share of attempts",
	    "%");
	panel(f, s, sr, ns, 1, 50.0 + ph + 40.0, "p99 latency (log scale)",
	    " ms");
	panel(f, s, sr, ns, 2, 50.0 + 2 * (ph + 40.0), "error rate", "%");
	for (k = 0; k < ns; k++)
		fprintf(f,
		    "<text x=\"70\" y=\"%.1f\" fill=\"%s\">&#9473; "
		    "%s</text>\n",
		    50.0 + 3 * (ph + 40.0) + 20.0 * (double)k, colours[k],
		    sr[k].label);
	fprintf(f, "</svg>\n");
	if (fclose(f) != 0) {
		fprintf(
		    stderr, "%s: cannot write: %s\n", path, strerror(errno));
		return 2;
	}
	return 0;
}

int
sim_des_detect(const char *scn)
{
	FILE *f = fopen(scn, "r");
	char buf[MAX_LINE + 2];
	int des = 0;

	if (f == NULL)
		return 0;
	while (fgets(buf, sizeof(buf), f) != NULL) {
		char *w[2];
		uint64_t t;
		int n = sim_split(buf, w, 2);

		if (n == 0)
			continue;
		des = sim_parse_time(w[0], &t) != 0 &&
		    strcmp(w[0], "0") != 0 && (w[0][0] < '0' || w[0][0] > '9');
		break;
	}
	fclose(f);
	return des;
}

/* Everything sim_des_main() holds. */
typedef struct des_out {
	scenario *s;
	run *r;
	simconf sc[MAX_CONFS];
	size_t loaded;
	series sr[MAX_CONFS];
	figures *ph[MAX_CONFS];
	size_t nseries;
	uint64_t *lat;
} des_out;

/* Run configuration k and keep its figures (per phase, per bucket). */
static int
des_run_conf(des_out *o, size_t k, const char *label)
{
	const scenario *s = o->s;
	binning byphase, bybucket;
	size_t nb = (size_t)((s->end + s->bucket - 1) / s->bucket);
	int rc = run_one(o->r, s, &o->sc[k]);

	if (rc == 0) {
		free(o->lat);
		o->lat = malloc((o->r->nrecs + 1) * sizeof(*o->lat));
		o->sr[k].label = label;
		o->sr[k].n = nb;
		o->sr[k].b = calloc(nb + 1, sizeof(figures));
		o->ph[k] = calloc(MAX_PHASES, sizeof(figures));
		byphase.s = bybucket.s = s;
		byphase.width = 0;
		byphase.nbins = (size_t)s->nphases;
		bybucket.width = s->bucket;
		bybucket.nbins = nb;
		o->nseries++;
		if (o->lat == NULL || o->sr[k].b == NULL || o->ph[k] == NULL ||
		    figures_binned(o->r->recs, o->r->nrecs, &byphase, o->lat,
		        o->ph[k]) != 0 ||
		    figures_binned(o->r->recs, o->r->nrecs, &bybucket, o->lat,
		        o->sr[k].b) != 0)
			rc = 2;
		else if (s->overload)
			(void)print_overload(s, o->r, o->lat);
		else
			print_phases(s, o->ph[k], o->r);
	}
	fflush(stdout);
	free(o->r->recs);
	o->r->recs = NULL;
	free_run(o->r);
	return rc;
}

static void
des_free(des_out *o)
{
	size_t k;

	for (k = 0; k < o->nseries; k++) {
		free(o->sr[k].b);
		free(o->ph[k]);
	}
	for (k = 0; k < o->loaded; k++)
		free_conf(&o->sc[k]);
	free(o->lat);
	if (o->s != NULL)
		free_scenario(o->s);
	free(o->s);
	free(o->r);
}

int
sim_des_main(
    const char *const *confs, size_t nconfs, const char *scn, const char *svg)
{
	des_out o;
	size_t k;
	int rc;

	memset(&o, 0, sizeof(o));
	o.s = calloc(1, sizeof(*o.s));
	o.r = calloc(1, sizeof(*o.r));
	if (o.s == NULL || o.r == NULL || nconfs > MAX_CONFS) {
		if (nconfs > MAX_CONFS)
			fprintf(stderr,
			    "resil-sim: at most %d configurations\n",
			    MAX_CONFS);
		free(o.s);
		free(o.r);
		return 2;
	}
	rc = read_des(scn, o.s);
	if (o.s->method[0] == '\0')
		snprintf(o.s->method, sizeof(o.s->method), "call");
	for (k = 0; rc == 0 && k < nconfs; k++)
		if ((rc = load_conf(confs[k], &o.sc[k])) == 0)
			o.loaded++;
	for (k = 0; rc == 0 && k < nconfs; k++) {
		if (nconfs > 1)
			printf("== %s\n", confs[k]);
		fflush(stdout);
		rc = des_run_conf(&o, k, confs[k]);
	}
	if (rc == 0 && o.s->nrefs > 0)
		print_compare(o.s, (const figures *const *)o.ph, nconfs);
	/* Before the picture's note on stderr: the compare line is last. */
	fflush(stdout);
	if (rc == 0 && svg != NULL) {
		rc = des_write_svg(svg, o.s, o.sr, o.nseries);
		if (rc == 0)
			fprintf(stderr, "resil-sim: picture in %s\n", svg);
	}
	des_free(&o);
	return rc;
}

/*
 * resil-sim's event-driven model: zones, endpoints with a pool of workers
 * and a FIFO queue each, the network between zones (a round-trip time
 * range and a loss rate per zone pair, loss bursts), Poisson arrivals,
 * phases and directory pushes, all on the manual clock with seeded
 * generators. Every call goes through the real call machine
 * (resil_call_start/step/report) of a pipeline built from CONFIG, and
 * every attempt through the real selector (routers, balancer, outlier
 * detection) over a real directory. The syntax is in docs/resil-sim.md.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/cluster.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/selector.h>

#include "sim.h"

#define MAX_LINE 512
#define MAX_NAME 32
#define MAX_ZONES 8
#define MAX_EPS 256
#define MAX_ATT 16
#define MAX_CONFS 4

/* Return codes of a simulated attempt. */
#define RC_OK 0
#define RC_BUSINESS 400
#define RC_REFUSED 111     /* ECONNREFUSED */
#define RC_NO_PROVIDER 503 /* routing left no endpoint */

enum ev_kind {
	EV_ARRIVAL,
	EV_CALLS,
	EV_STEP,
	EV_REACH,
	EV_SERVED,
	EV_ANSWER,
	EV_ACTION,
	EV_POLL
};

/* Failback: the queue is polled this often. */
#define POLL_EVERY (100 * RESIL_NS_PER_MS)

enum act_kind { A_REFUSE, A_ACCEPT, A_REMOVE, A_ADD };

typedef struct job job;

typedef struct ep {
	char address[40];
	int zone;
	unsigned workers, busy;
	int exp;      /* service time exponential (else fixed) */
	double mean;  /* ns */
	int refusing; /* connections refused */
	int listed;   /* in the directory */
	job *qhead, *qtail;
	uint64_t served;
} ep;

typedef struct pair {
	uint64_t lo, hi; /* round-trip time range */
	double loss;     /* per message, each way */
	int set;
} pair;

typedef struct lossw {
	int a, b;
	double p;
	uint64_t from, until;
} lossw;

typedef struct action {
	uint64_t t;
	enum act_kind kind;
	int zone;     /* -1: one endpoint */
	int endpoint; /* -1: a zone */
	unsigned line;
} action;

typedef struct phase {
	char name[MAX_NAME];
	uint64_t start, end;
} phase;

typedef struct callbatch {
	uint64_t t;
	unsigned n;
	unsigned line;
} callbatch;

typedef struct scenario {
	const char *path;
	uint64_t seed;
	int caller;
	char zones[MAX_ZONES][MAX_NAME];
	int nzones;
	ep eps[MAX_EPS];
	int neps;
	pair net[MAX_ZONES][MAX_ZONES];
	lossw *loss;
	size_t nloss;
	action *acts;
	size_t nacts;
	phase phases[16];
	int nphases;
	callbatch *batches;
	size_t nbatches;
	double rate; /* calls per second; 0: none */
	uint64_t end;
	uint64_t bucket;
	int trace;
	char method[MAX_NAME];
} scenario;

/* One attempt of a call. */
typedef struct att {
	uint32_t id;
	ep *e;        /* the endpoint the call machine picked */
	int answered; /* the answer came */
	int rc;
	uint64_t deadline; /* the machine's for this attempt */
} att;

typedef struct scall {
	resil_call mc;
	resil_result res;
	resil_args args;
	uint64_t no, start, step_at;
	unsigned refs;
	int done;
	uint32_t natt, sent, local;
	att a[MAX_ATT];
	struct scall *next_free;
} scall;

struct job {
	scall *c;
	uint32_t ai;
	ep *e;
	uint64_t rtt;
	int rc;
	job *next;
};

typedef struct rec {
	uint64_t start;
	uint64_t lat;
	uint8_t err, sent, local;
} rec;

/* A configuration as the simulator reads it. */
typedef struct simconf {
	const char *path;
	resil_config *conf;
} simconf;

typedef struct run {
	const scenario *s;
	const simconf *sc;
	ep eps[MAX_EPS];
	resil_manual_clock mc;
	sim_queue q;
	sim_rng arrivals, service, net, lb;
	resil_rng lbrng;
	resil_random lbrand;
	resil_pipeline *p;
	resil_directory *dir;
	resil_selector *sel;
	scall *free_calls;
	job *free_jobs;
	uint64_t ncalls;
	rec *recs;
	size_t nrecs, caprecs;
	int oom;
} run;

/* ---- reading the scenario ---- */

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

/* TIME: a duration, PHASE, or PHASE+DURATION. */
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

static int
endpoint_opts(
    const char *file, unsigned line, ep *e, char **w, int from, int nw)
{
	int i;

	e->workers = 1;
	e->exp = 0;
	e->mean = 0;
	for (i = from; i < nw; i++) {
		uint64_t d;

		if (strncmp(w[i], "workers=", 8) == 0) {
			if (parse_uint(w[i] + 8, 100000, &e->workers) != 0 ||
			    e->workers == 0)
				return bad(file, line,
				    "workers= needs 1..100000", w[i]);
		} else if (strncmp(w[i], "service=exp:", 12) == 0 &&
		    sim_parse_time(w[i] + 12, &d) == 0) {
			e->exp = 1;
			e->mean = (double)d;
		} else if (strncmp(w[i], "service=", 8) == 0 &&
		    sim_parse_time(w[i] + 8, &d) == 0) {
			e->exp = 0;
			e->mean = (double)d;
		} else {
			return bad(file, line,
			    "bad endpoint option (workers=N, "
			    "service=DURATION, service=exp:MEAN)",
			    w[i]);
		}
	}
	return 0;
}

static int
target(scenario *s, const char *w, action *a)
{
	int i;

	a->zone = zone_of(s, w, 0);
	a->endpoint = -1;
	if (a->zone >= 0)
		return 0;
	for (i = 0; i < s->neps; i++)
		if (strcmp(s->eps[i].address, w) == 0) {
			a->endpoint = i;
			return 0;
		}
	return -1;
}

static int
read_des(const char *file, scenario *s)
{
	FILE *f = fopen(file, "r");
	char buf[MAX_LINE + 2];
	unsigned line = 0;
	size_t caploss = 0, capacts = 0, capb = 0;
	uint64_t phase_t = 0;

	memset(s, 0, sizeof(*s));
	s->path = file;
	s->caller = -1;
	s->bucket = 10 * RESIL_NS_PER_SEC;
	s->seed = 1;
	if (f == NULL) {
		fprintf(
		    stderr, "%s: cannot open: %s\n", file, strerror(errno));
		return 2;
	}
	while (fgets(buf, sizeof(buf), f) != NULL) {
		char *w[12];
		int nw, rc = 0;

		line++;
		if (strchr(buf, '\n') == NULL && !feof(f)) {
			rc = bad(file, line, "line too long", NULL);
			goto fail;
		}
		nw = sim_split(buf, w, 12);
		if (nw == 0)
			continue;
		if (nw < 0) {
			rc = bad(file, line, "too many words", NULL);
			goto fail;
		}
		if (strcmp(w[0], "seed") == 0 && nw == 2) {
			char *end;

			errno = 0;
			s->seed = strtoull(w[1], &end, 10);
			if (errno != 0 || *end != '\0' || w[1][0] == '-') {
				rc = bad(file, line, "bad seed", w[1]);
				goto fail;
			}
		} else if (strcmp(w[0], "caller") == 0 && nw == 2) {
			s->caller = zone_of(s, w[1], 1);
			if (s->caller < 0) {
				rc = bad(file, line, "bad zone", w[1]);
				goto fail;
			}
		} else if (strcmp(w[0], "endpoints") == 0 && nw >= 3) {
			int z = zone_of(s, w[1], 1);
			unsigned n, k;
			ep proto;

			if (z < 0 || parse_uint(w[2], MAX_EPS, &n) != 0 ||
			    n == 0 || s->neps + (int)n > MAX_EPS) {
				rc = bad(file, line,
				    "endpoints needs ZONE COUNT (at most 256 "
				    "endpoints in all)",
				    NULL);
				goto fail;
			}
			memset(&proto, 0, sizeof(proto));
			if ((rc = endpoint_opts(
			         file, line, &proto, w, 3, nw)) != 0)
				goto fail;
			for (k = 0; k < n; k++) {
				ep *e = &s->eps[s->neps];
				unsigned same = 0;
				int j;

				for (j = 0; j < s->neps; j++)
					same += s->eps[j].zone == z;
				*e = proto;
				e->zone = z;
				e->listed = 1;
				snprintf(e->address, sizeof(e->address),
				    "10.0.%d.%u:20880", z + 1, same + 1);
				s->neps++;
			}
		} else if (strcmp(w[0], "rtt") == 0 && nw == 5) {
			int a = zone_of(s, w[1], 1), b = zone_of(s, w[2], 1);
			uint64_t lo, hi;

			if (a < 0 || b < 0 || sim_parse_time(w[3], &lo) != 0 ||
			    sim_parse_time(w[4], &hi) != 0 || hi < lo) {
				rc = bad(file, line,
				    "rtt needs ZONE ZONE LOW HIGH (durations, "
				    "LOW <= HIGH)",
				    NULL);
				goto fail;
			}
			s->net[a][b].lo = s->net[b][a].lo = lo;
			s->net[a][b].hi = s->net[b][a].hi = hi;
			s->net[a][b].set = s->net[b][a].set = 1;
		} else if (strcmp(w[0], "loss") == 0 &&
		    (nw == 4 ||
		        (nw == 8 && strcmp(w[4], "at") == 0 &&
		            strcmp(w[6], "for") == 0))) {
			int a = zone_of(s, w[1], 1), b = zone_of(s, w[2], 1);
			double p;

			if (a < 0 || b < 0 || parse_pct(w[3], &p) != 0) {
				rc = bad(file, line,
				    "loss needs ZONE ZONE PERCENT% [at TIME "
				    "for DURATION]",
				    NULL);
				goto fail;
			}
			if (nw == 4) {
				s->net[a][b].loss = s->net[b][a].loss = p;
			} else {
				lossw lw;
				uint64_t d;

				lw.a = a;
				lw.b = b;
				lw.p = p;
				if (parse_at(s, w[5], &lw.from) != 0 ||
				    sim_parse_time(w[7], &d) != 0) {
					rc = bad(file, line,
					    "loss ... at TIME for DURATION",
					    NULL);
					goto fail;
				}
				lw.until = lw.from + d;
				if (grow((void **)&s->loss, &caploss, s->nloss,
				        sizeof(lw)) != 0)
					goto oom;
				s->loss[s->nloss++] = lw;
			}
		} else if (strcmp(w[0], "arrivals") == 0 && nw == 2) {
			char *end;

			errno = 0;
			s->rate = strtod(w[1], &end);
			if (errno != 0 || *end != '\0' || !(s->rate > 0) ||
			    s->rate > 1e7) {
				rc = bad(file, line,
				    "arrivals needs a rate in calls per "
				    "second",
				    w[1]);
				goto fail;
			}
		} else if (strcmp(w[0], "call") == 0 && (nw == 2 || nw == 3)) {
			callbatch cb;

			cb.n = 1;
			cb.line = line;
			if (parse_at(s, w[1], &cb.t) != 0 ||
			    (nw == 3 &&
			        (strncmp(w[2], "calls=", 6) != 0 ||
			            parse_uint(w[2] + 6, 100000, &cb.n) !=
			                0))) {
				rc = bad(file, line,
				    "call needs TIME [calls=N]", NULL);
				goto fail;
			}
			if (grow((void **)&s->batches, &capb, s->nbatches,
			        sizeof(cb)) != 0)
				goto oom;
			s->batches[s->nbatches++] = cb;
		} else if (strcmp(w[0], "method") == 0 && nw == 2 &&
		    strlen(w[1]) < MAX_NAME) {
			snprintf(s->method, sizeof(s->method), "%s", w[1]);
		} else if (strcmp(w[0], "phase") == 0 && nw == 3) {
			phase *ph = &s->phases[s->nphases];
			uint64_t d;

			if (s->nphases == 16 || strlen(w[1]) >= MAX_NAME ||
			    sim_parse_time(w[2], &d) != 0 || d == 0) {
				rc = bad(file, line,
				    "phase needs NAME DURATION (at most 16 "
				    "phases)",
				    NULL);
				goto fail;
			}
			snprintf(ph->name, sizeof(ph->name), "%s", w[1]);
			ph->start = phase_t;
			ph->end = phase_t + d;
			phase_t = ph->end;
			s->nphases++;
		} else if (strcmp(w[0], "at") == 0 &&
		    ((nw == 4 &&
		         (strcmp(w[2], "refuse") == 0 ||
		             strcmp(w[2], "accept") == 0)) ||
		        (nw == 5 && strcmp(w[2], "push") == 0 &&
		            (strcmp(w[3], "remove") == 0 ||
		                strcmp(w[3], "add") == 0)))) {
			action a;

			a.line = line;
			if (parse_at(s, w[1], &a.t) != 0) {
				rc = bad(file, line,
				    "bad time (a duration, PHASE or "
				    "PHASE+DURATION)",
				    w[1]);
				goto fail;
			}
			if (nw == 4)
				a.kind = w[2][0] == 'r' ? A_REFUSE : A_ACCEPT;
			else
				a.kind = w[3][0] == 'r' ? A_REMOVE : A_ADD;
			if (target(s, w[nw - 1], &a) != 0) {
				rc = bad(file, line,
				    "not a zone or endpoint address",
				    w[nw - 1]);
				goto fail;
			}
			if (grow((void **)&s->acts, &capacts, s->nacts,
			        sizeof(a)) != 0)
				goto oom;
			s->acts[s->nacts++] = a;
		} else if (strcmp(w[0], "bucket") == 0 && nw == 2) {
			if (sim_parse_time(w[1], &s->bucket) != 0 ||
			    s->bucket == 0) {
				rc = bad(file, line, "bad bucket", w[1]);
				goto fail;
			}
		} else if (strcmp(w[0], "trace") == 0 && nw == 1) {
			s->trace = 1;
		} else {
			rc =
			    bad(file, line, "unknown or malformed line", w[0]);
			goto fail;
		}
		continue;
	fail:
		fclose(f);
		return rc;
	oom:
		fclose(f);
		fprintf(stderr, "resil-sim: out of memory\n");
		return 2;
	}
	fclose(f);
	if (s->caller < 0)
		return bad_file(file, "no `caller ZONE` line", NULL);
	if (s->neps == 0)
		return bad_file(file, "no endpoints", NULL);
	if (s->nphases == 0)
		return bad_file(file, "no phase", NULL);
	{
		int z, e;

		for (e = 0; e < s->neps; e++) {
			z = s->eps[e].zone;
			if (!s->net[s->caller][z].set)
				return bad_file(
				    file, "no rtt between zones", s->zones[z]);
		}
	}
	s->end = phase_t;
	return 0;
}

static void
free_scenario(scenario *s)
{
	free(s->loss);
	free(s->acts);
	free(s->batches);
}

/* ---- reading a configuration ---- */

/*
 * One configuration file holds the pipeline's keys, the cluster's
 * (cluster=, retries=, zone=, cross_zone_timeout=, ...) and the selector's
 * and directory's (loadbalance=, router.*, outlier.*, panic.threshold):
 * resil_config reads them all (docs/config.md, docs/cluster.md).
 */
static int
load_conf(const char *path, simconf *sc)
{
	resil_diag diag;

	memset(sc, 0, sizeof(*sc));
	sc->path = path;
	if (resil_config_parse_file(&sc->conf, path, NULL, &diag) !=
	    RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 2;
	}
	return 0;
}

static void
free_conf(simconf *sc)
{
	resil_config_free(sc->conf);
}

/* ---- the run ---- */

static resil_outcome
des_classify(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == RC_BUSINESS ? RESIL_OUTCOME_BUSINESS
	                         : RESIL_OUTCOME_FAILURE;
}

static void
on_endpoint(const resil_endpoint_event *ev, void *ctx)
{
	run *r = ctx;
	char t[32], d[32];

	if (!r->s->trace)
		return;
	if (ev->type == RESIL_ENDPOINT_EJECTED)
		printf("%s ms: %s ejected for %s ms\n",
		    sim_ms_text(ev->time, t, sizeof(t)), ev->address,
		    sim_ms_text(ev->duration, d, sizeof(d)));
	else if (ev->type == RESIL_ENDPOINT_RETURNED)
		printf("%s ms: %s returned\n",
		    sim_ms_text(ev->time, t, sizeof(t)), ev->address);
}

/* In a trace, the cluster's events (failsafe swallowed, failback queued
 * or retried, zone-aware crossed zones, ...) as the pipeline words them. */
static void
on_pipeline(const resil_pipeline_event *ev, void *ctx)
{
	run *r = ctx;
	char t[32];

	if (!r->s->trace || ev->stage != RESIL_STAGE_CLUSTER)
		return;
	printf("%s ms: %s\n", sim_ms_text(ev->time, t, sizeof(t)), ev->text);
}

static int
push(run *r)
{
	resil_endpoint_spec specs[MAX_EPS];
	resil_diag diag;
	size_t n = 0;
	int i;

	for (i = 0; i < r->s->neps; i++) {
		ep *e = &r->eps[i];

		if (!e->listed)
			continue;
		specs[n] = resil_endpoint_spec_default(e->address);
		specs[n].zone = r->s->zones[e->zone];
		specs[n].user = e;
		n++;
	}
	if (resil_directory_push(r->dir, specs, n, &diag) != RESIL_OK) {
		fprintf(stderr, "resil-sim: push: %s\n", diag.msg);
		return -1;
	}
	return 0;
}

static void
sched(run *r, uint64_t t, int kind, void *p, uint32_t arg)
{
	if (sim_schedule(&r->q, t, kind, p, arg) != 0)
		r->oom = 1;
}

static uint64_t
rtt_draw(run *r, int zone)
{
	const pair *pr = &r->s->net[r->s->caller][zone];

	return pr->lo +
	    (uint64_t)(sim_rng_uniform(&r->net) * (double)(pr->hi - pr->lo));
}

static int
lost(run *r, int zone, uint64_t now)
{
	const scenario *s = r->s;
	double p = s->net[s->caller][zone].loss;
	size_t i;

	for (i = 0; i < s->nloss; i++) {
		const lossw *lw = &s->loss[i];

		if (now >= lw->from && now < lw->until &&
		    ((lw->a == s->caller && lw->b == zone) ||
		        (lw->b == s->caller && lw->a == zone)))
			p = lw->p;
	}
	if (p <= 0)
		return 0;
	return sim_rng_uniform(&r->net) < p;
}

static job *
job_new(run *r)
{
	job *j = r->free_jobs;

	if (j != NULL) {
		r->free_jobs = j->next;
		return j;
	}
	j = malloc(sizeof(*j));
	if (j == NULL)
		r->oom = 1;
	return j;
}

static void
job_free(run *r, job *j)
{
	j->next = r->free_jobs;
	r->free_jobs = j;
}

static void
call_release(run *r, scall *c)
{
	if (!c->done || c->refs > 0)
		return;
	c->next_free = r->free_calls;
	r->free_calls = c;
}

/* What became of attempt a when its call ended at now with err. An
 * attempt times out one tick past its deadline; a forking call, whose
 * forks share one timeout, is a TIMEOUT at the deadline itself. */
static const char *
att_word(const att *a, uint64_t now, resil_err err)
{
	if (a->e == NULL)
		return "no-provider";
	if (!a->answered)
		return a->deadline != UINT64_MAX &&
		        (now > a->deadline ||
		            (now == a->deadline && err == RESIL_E_TIMEOUT))
		    ? "timeout"
		    : "abandoned";
	switch (a->rc) {
	case RC_OK:
		return "ok";
	case RC_REFUSED:
		return "refused";
	case RC_BUSINESS:
		return "business";
	default:
		return "failed";
	}
}

static void
finish(run *r, scall *c, uint64_t now)
{
	uint32_t i;
	rec rc;

	c->done = 1;
	rc.start = c->start;
	rc.lat = now - c->start;
	rc.err = c->res.err != RESIL_OK;
	rc.sent = (uint8_t)c->sent;
	rc.local = (uint8_t)c->local;
	if (grow((void **)&r->recs, &r->caprecs, r->nrecs, sizeof(rc)) != 0)
		r->oom = 1;
	else
		r->recs[r->nrecs++] = rc;
	if (r->s->trace) {
		char t0[32], t1[32];

		printf("%s ms: call %" PRIu64 " (started %s ms) %s",
		    sim_ms_text(now, t1, sizeof(t1)), c->no,
		    sim_ms_text(c->start, t0, sizeof(t0)),
		    c->res.err == RESIL_OK ? "ok"
		                           : resil_err_name(c->res.err) + 6);
		for (i = 0; i < c->natt; i++)
			printf("%s %s %s", i == 0 ? ":" : ",",
			    c->a[i].e ? c->a[i].e->address : "-",
			    att_word(&c->a[i], now, c->res.err));
		if (c->res.err != RESIL_OK && c->res.message[0] != '\0')
			printf(" (%s)", c->res.message);
		printf("\n");
	}
	resil_result_free(&c->res);
	call_release(r, c);
}

static void attempt(run *r, scall *c, const resil_call_next *st, uint64_t now);

/* Move the call on from the action in *st until it waits or is done. */
static void
drive(run *r, scall *c, resil_call_next st, uint64_t now)
{
	for (;;) {
		if (st.action == RESIL_CALL_DONE) {
			finish(r, c, now);
			return;
		}
		if (st.action == RESIL_CALL_RUN) {
			attempt(r, c, &st, now);
		} else {
			if (st.until == UINT64_MAX)
				return;
			if (c->step_at == 0 || c->step_at > st.until ||
			    c->step_at < now) {
				c->step_at = st.until;
				c->refs++;
				sched(r, st.until, EV_STEP, c, 0);
			}
			return;
		}
		if (resil_call_step(&c->mc, now, &st) != RESIL_OK)
			return;
	}
}

/*
 * Attempt id of c goes to the endpoint the call machine picked (routing,
 * balancing, outlier detection and the strategy are the pipeline's): the
 * request travels half a round trip (or is lost, or is refused after a
 * whole one), and the answer comes back as an EV_ANSWER event.
 */
static void
attempt(run *r, scall *c, const resil_call_next *st, uint64_t now)
{
	const resil_pick *pick = st->endpoint;
	att *a;
	job *j;

	if (c->natt == MAX_ATT || pick == NULL || pick->user == NULL) {
		resil_call_report(
		    &c->mc, st->attempt, RC_NO_PROVIDER, NULL, now);
		return;
	}
	a = &c->a[c->natt++];
	memset(a, 0, sizeof(*a));
	a->id = st->attempt;
	a->deadline = st->deadline;
	a->e = pick->user;
	c->sent++;
	if (a->e->zone == r->s->caller)
		c->local++;
	j = job_new(r);
	if (j == NULL)
		return;
	j->c = c;
	j->ai = c->natt - 1;
	j->e = a->e;
	j->rtt = rtt_draw(r, a->e->zone);
	j->rc = RC_OK;
	if (a->e->refusing) {
		j->rc = RC_REFUSED;
		c->refs++;
		sched(r, now + j->rtt, EV_ANSWER, j, 0);
	} else if (lost(r, a->e->zone, now)) {
		job_free(r, j);
	} else {
		c->refs++;
		sched(r, now + j->rtt / 2, EV_REACH, j, 0);
	}
}

static void
start_call(run *r, uint64_t now)
{
	scall *c = r->free_calls;
	resil_call_next st;

	if (c != NULL)
		r->free_calls = c->next_free;
	else if ((c = malloc(sizeof(*c))) == NULL) {
		r->oom = 1;
		return;
	}
	c->no = ++r->ncalls;
	c->start = now;
	c->step_at = 0;
	c->refs = 0;
	c->done = 0;
	c->natt = c->sent = c->local = 0;
	c->args.method = r->s->method;
	c->args.data = NULL;
	c->args.len = 0;
	if (resil_call_start(
	        &c->mc, r->p, NULL, &c->args, &c->res, now, &st) != RESIL_OK) {
		r->oom = 1;
		free(c);
		return;
	}
	drive(r, c, st, now);
}

static void
serve(run *r, job *j, uint64_t now)
{
	ep *e = j->e;
	uint64_t d =
	    e->exp ? sim_rng_exp(&r->service, e->mean) : (uint64_t)e->mean;

	e->busy++;
	sched(r, now + d, EV_SERVED, j, 0);
}

static void
act(run *r, const action *a, uint64_t now)
{
	int i, changed = 0;

	(void)now;
	for (i = 0; i < r->s->neps; i++) {
		ep *e = &r->eps[i];

		if (a->endpoint >= 0 ? i != a->endpoint : e->zone != a->zone)
			continue;
		switch (a->kind) {
		case A_REFUSE:
			e->refusing = 1;
			break;
		case A_ACCEPT:
			e->refusing = 0;
			break;
		case A_REMOVE:
			changed |= e->listed;
			e->listed = 0;
			break;
		case A_ADD:
			changed |= !e->listed;
			e->listed = 1;
			break;
		}
	}
	if (changed && push(r) != 0)
		r->oom = 1;
}

/*
 * A failback retry (resil_pipeline_failback_poll() runs it as a blocking
 * function): it takes no simulated time and fails when the endpoint
 * refuses connections at that moment.
 */
static int
failback_try(void *ctx, const resil_pick *endpoint, const resil_args *args,
    resil_value *out)
{
	const ep *e = endpoint != NULL ? endpoint->user : NULL;

	(void)ctx;
	(void)args;
	(void)out;
	if (e == NULL)
		return RC_NO_PROVIDER;
	return e->refusing ? RC_REFUSED : RC_OK;
}

static void
handle(run *r, const sim_event *ev)
{
	uint64_t now = ev->t;

	resil_manual_clock_set(&r->mc, now);
	switch (ev->kind) {
	case EV_ARRIVAL: {
		uint64_t gap = sim_rng_exp(
		    &r->arrivals, (double)RESIL_NS_PER_SEC / r->s->rate);

		if (now + gap < r->s->end)
			sched(r, now + gap, EV_ARRIVAL, NULL, 0);
		start_call(r, now);
		break;
	}
	case EV_CALLS: {
		unsigned k;

		for (k = 0; k < ev->arg; k++)
			start_call(r, now);
		break;
	}
	case EV_STEP: {
		scall *c = ev->p;
		resil_call_next st;

		c->refs--;
		if (c->done) {
			call_release(r, c);
			break;
		}
		if (ev->t != c->step_at)
			break;
		c->step_at = 0;
		if (resil_call_step(&c->mc, now, &st) == RESIL_OK)
			drive(r, c, st, now);
		break;
	}
	case EV_REACH: {
		job *j = ev->p;
		ep *e = j->e;

		if (e->busy < e->workers) {
			serve(r, j, now);
		} else {
			j->next = NULL;
			if (e->qtail != NULL)
				e->qtail->next = j;
			else
				e->qhead = j;
			e->qtail = j;
		}
		break;
	}
	case EV_SERVED: {
		job *j = ev->p, *nx;
		ep *e = j->e;

		e->busy--;
		e->served++;
		if ((nx = e->qhead) != NULL) {
			e->qhead = nx->next;
			if (e->qhead == NULL)
				e->qtail = NULL;
			serve(r, nx, now);
		}
		if (lost(r, e->zone, now)) {
			scall *c = j->c;

			c->refs--;
			job_free(r, j);
			call_release(r, c);
		} else {
			sched(r, now + (j->rtt - j->rtt / 2), EV_ANSWER, j, 0);
		}
		break;
	}
	case EV_ANSWER: {
		job *j = ev->p;
		scall *c = j->c;
		att *a = &c->a[j->ai];
		resil_value v = resil_value_int(1);
		resil_call_next st;

		c->refs--;
		a->answered = 1;
		a->rc = j->rc;
		resil_call_report(
		    &c->mc, a->id, j->rc, j->rc == RC_OK ? &v : NULL, now);
		resil_value_free(&v);
		job_free(r, j);
		if (c->done) {
			call_release(r, c);
			break;
		}
		if (resil_call_step(&c->mc, now, &st) == RESIL_OK)
			drive(r, c, st, now);
		break;
	}
	case EV_ACTION:
		act(r, &r->s->acts[ev->arg], now);
		break;
	case EV_POLL: {
		size_t ran = 0;
		char t[32];

		resil_pipeline_failback_poll(r->p, now, failback_try, r, &ran);
		if (ran > 0 && r->s->trace)
			printf("%s ms: failback poll: %zu attempts\n",
			    sim_ms_text(now, t, sizeof(t)), ran);
		if (now < r->s->end ||
		    resil_pipeline_failback_pending(r->p) > 0)
			sched(r, now + POLL_EVERY, EV_POLL, NULL, 0);
		break;
	}
	}
}

static int
no_submit(void (*fn)(void *), void *arg, void *ctx)
{
	(void)fn;
	(void)arg;
	(void)ctx;
	return 1;
}

static void
no_wait(uint64_t until, void *ctx)
{
	(void)until;
	(void)ctx;
}

static void
no_wake(void *ctx)
{
	(void)ctx;
}

static int
run_one(run *r, const scenario *s, const simconf *sc)
{
	resil_pipeline_config pcfg;
	resil_directory_config dcfg;
	resil_selector_config scfg;
	resil_diag diag;
	sim_event ev;
	size_t i, j;

	memset(r, 0, sizeof(*r));
	r->s = s;
	r->sc = sc;
	memcpy(r->eps, s->eps, sizeof(r->eps));
	resil_manual_clock_init(&r->mc, 0);
	sim_queue_init(&r->q);
	sim_rng_seed(&r->arrivals, s->seed, 1);
	sim_rng_seed(&r->service, s->seed, 2);
	sim_rng_seed(&r->net, s->seed, 3);
	resil_rng_seed(&r->lbrng, s->seed * 4 + 1);
	r->lbrand = resil_rng_hook(&r->lbrng);

	resil_directory_config_init(&dcfg);
	resil_config_directory(sc->conf, &dcfg);
	dcfg.clock = resil_manual_clock_hook(&r->mc);
	dcfg.listener = on_endpoint;
	dcfg.listener_ctx = r;
	if (resil_directory_new(&r->dir, &dcfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s: %s\n", sc->path, diag.msg);
		return 2;
	}
	resil_config_selector(sc->conf, &scfg);
	scfg.random = &r->lbrand;
	if (resil_selector_new(&r->sel, r->dir, &scfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s: %s\n", sc->path, diag.msg);
		return 2;
	}
	pcfg = *resil_config_pipeline(sc->conf);
	if (pcfg.service == NULL)
		pcfg.service = "Service";
	pcfg.clock = resil_manual_clock_hook(&r->mc);
	pcfg.classifier.fn = des_classify;
	pcfg.selector = r->sel;
	if (s->trace && pcfg.listener == NULL) {
		pcfg.listener = on_pipeline;
		pcfg.listener_ctx = r;
	}
	/* Forking needs an executor for the blocking driver only; the
	 * simulator runs the attempts itself. */
	pcfg.executor.submit = no_submit;
	pcfg.executor.wait = no_wait;
	pcfg.executor.wake = no_wake;
	if (resil_pipeline_new(&r->p, &pcfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s: %s\n", sc->path, diag.msg);
		return 2;
	}
	if (push(r) != 0)
		return 2;
	if (s->rate > 0)
		sched(r, 0, EV_ARRIVAL, NULL, 0);
	if (pcfg.cluster.strategy == RESIL_CLUSTER_FAILBACK)
		sched(r, POLL_EVERY, EV_POLL, NULL, 0);
	/* Calls and actions of one time run in the order of their lines. */
	for (i = 0, j = 0; i < s->nbatches || j < s->nacts;) {
		if (j == s->nacts ||
		    (i < s->nbatches &&
		        s->batches[i].line < s->acts[j].line)) {
			sched(r, s->batches[i].t, EV_CALLS, NULL,
			    s->batches[i].n);
			i++;
		} else {
			sched(r, s->acts[j].t, EV_ACTION, NULL, (uint32_t)j);
			j++;
		}
	}
	while (!r->oom && sim_next(&r->q, &ev))
		handle(r, &ev);
	if (r->oom) {
		fprintf(stderr, "resil-sim: out of memory\n");
		return 2;
	}
	return 0;
}

static void
free_run(run *r)
{
	scall *c;
	job *j;

	while ((c = r->free_calls) != NULL) {
		r->free_calls = c->next_free;
		free(c);
	}
	while ((j = r->free_jobs) != NULL) {
		r->free_jobs = j->next;
		free(j);
	}
	sim_queue_free(&r->q);
	/* The pipeline borrows the selector, which borrows the directory. */
	resil_pipeline_free(r->p);
	resil_selector_free(r->sel);
	resil_directory_free(r->dir);
	r->sel = NULL;
	r->p = NULL;
	r->dir = NULL;
}

/* ---- figures ---- */

typedef struct figures {
	uint64_t calls, errors, sent, local;
	double p99_ms;
} figures;

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The figures of the calls started in [from, until); lat is scratch
 * space for as many latencies as there are records. */
static void
figures_of(const rec *recs, size_t n, uint64_t from, uint64_t until,
    uint64_t *lat, figures *f)
{
	size_t i, k = 0;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < n; i++) {
		const rec *c = &recs[i];

		if (c->start < from || c->start >= until)
			continue;
		f->calls++;
		f->errors += c->err;
		f->sent += c->sent;
		f->local += c->local;
		lat[k++] = c->lat;
	}
	if (k > 0) {
		size_t rank = (99 * k + 99) / 100; /* ceil(0.99 k) */

		qsort(lat, k, sizeof(*lat), cmp_u64);
		f->p99_ms = (double)lat[rank - 1] / (double)RESIL_NS_PER_MS;
	}
}

static double
pct(uint64_t a, uint64_t b)
{
	return b == 0 ? 0.0 : 100.0 * (double)a / (double)b;
}

static void
print_phases(const scenario *s, const run *r, uint64_t *lat)
{
	int i;

	for (i = 0; i < s->nphases; i++) {
		figures f;
		uint64_t until =
		    i + 1 == s->nphases ? UINT64_MAX : s->phases[i].end;

		figures_of(
		    r->recs, r->nrecs, s->phases[i].start, until, lat, &f);
		printf("phase %s: calls %" PRIu64
		       " local %.1f%% p99 %.1f ms errors %.3f%% attempts "
		       "%.3f\n",
		    s->phases[i].name, f.calls, pct(f.local, f.sent), f.p99_ms,
		    pct(f.errors, f.calls),
		    f.calls ? (double)f.sent / (double)f.calls : 0.0);
	}
}

/* One series per configuration: figures per bucket. */
typedef struct series {
	const char *label;
	size_t n;
	figures *b;
} series;

static const char *const colours[MAX_CONFS] = { "#c62828", "#1565c0",
	"#2e7d32", "#6a1b9a" };

/* Where v falls in a panel whose top is vmax, 0 (bottom) to 1: linear,
 * or for latencies (logarithmic) from 1 ms. */
static double
frac_of(int logscale, double v, double vmax)
{
	/* The top at 95% of the panel, so that a line at the maximum
	 * stays clear of the frame. */
	if (!logscale)
		return 0.95 * v / vmax;
	if (v <= 1.0)
		return 0.0;
	return 0.95 * sim_log(v) / sim_log(vmax);
}

static void
panel(FILE *f, const scenario *s, const series *sr, size_t ns, int which,
    double y0, double h, const char *title, const char *unit)
{
	double x0 = 70.0, w = 860.0, vmax = 0.0;
	size_t k, i;
	int p;

	for (k = 0; k < ns; k++)
		for (i = 0; i < sr[k].n; i++) {
			const figures *b = &sr[k].b[i];
			double v = which == 0 ? pct(b->local, b->sent)
			    : which == 1      ? b->p99_ms
			                      : pct(b->errors, b->calls);

			if (b->calls > 0 && v > vmax)
				vmax = v;
		}
	if (which == 0 || vmax <= 0)
		vmax = which == 0 ? 100.0 : 1.0;
	if (which == 1 && vmax < 10.0)
		vmax = 10.0;
	fprintf(f,
	    "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n"
	    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
	    "fill=\"none\" stroke=\"#999\"/>\n"
	    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g%s</text>\n"
	    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
	    x0, y0 - 6.0, title, x0, y0, w, h, x0 - 4.0, y0 + 0.05 * h + 4.0,
	    vmax, unit, x0 - 4.0, y0 + h, which == 1 ? "1 ms" : "0");
	if (which == 1) {
		/* Latencies on a log scale: a line at each power of ten. */
		double g;

		for (g = 10.0; g < vmax; g *= 10.0) {
			double y = y0 + h - h * frac_of(1, g, vmax);

			fprintf(f,
			    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			    "y2=\"%.1f\" stroke=\"#ddd\"/>\n"
			    "<text x=\"%.1f\" y=\"%.1f\" "
			    "text-anchor=\"end\">%g ms</text>\n",
			    x0, y, x0 + w, y, x0 - 4.0, y + 4.0, g);
		}
	}
	for (i = 0; i < s->nloss; i++) {
		const lossw *lw = &s->loss[i];
		double xa = x0 + w * (double)lw->from / (double)s->end;
		double xb = x0 + w * (double)lw->until / (double)s->end;

		fprintf(f,
		    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
		    "height=\"%.1f\" fill=\"#ffe0b2\"><title>loss %s-%s "
		    "%g%%</title></rect>\n",
		    xa, y0, xb - xa > 1.0 ? xb - xa : 1.0, h, s->zones[lw->a],
		    s->zones[lw->b], lw->p * 100.0);
	}
	{
		uint64_t tick = s->end > 20 * 60 * RESIL_NS_PER_SEC
		    ? 5 * 60 * RESIL_NS_PER_SEC
		    : s->end / 4 + 1,
		         t;
		char tb[32];

		for (t = 0; t <= s->end; t += tick)
			fprintf(f,
			    "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\" "
			    "text-anchor=\"middle\">%s s</text>\n",
			    x0 + w * (double)t / (double)s->end, y0 + h + 12.0,
			    sim_ms_text(t / 1000, tb, sizeof(tb)));
	}
	for (p = 0; p < s->nphases; p++) {
		double x =
		    x0 + w * (double)s->phases[p].start / (double)s->end;

		fprintf(f,
		    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
		    "stroke=\"#777\" stroke-dasharray=\"4,3\"/>\n"
		    "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">%s</text>\n",
		    x, y0, x, y0 + h, x + 3.0, y0 + 12.0, s->phases[p].name);
	}
	for (k = 0; k < ns; k++) {
		fprintf(f,
		    "<polyline fill=\"none\" stroke=\"%s\" "
		    "stroke-width=\"1.5\" points=\"",
		    colours[k]);
		for (i = 0; i < sr[k].n; i++) {
			const figures *b = &sr[k].b[i];
			double v = which == 0 ? pct(b->local, b->sent)
			    : which == 1      ? b->p99_ms
			                      : pct(b->errors, b->calls);
			double x = x0 +
			    w * ((double)i + 0.5) * (double)s->bucket /
			        (double)s->end;

			if (b->calls == 0)
				continue;
			fprintf(f, "%.1f,%.1f ", x,
			    y0 + h - h * frac_of(which == 1, v, vmax));
		}
		fprintf(f, "\"/>\n");
	}
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
	    "<text x=\"70\" y=\"18\">%s: each point is the calls started in "
	    "%s ms (loss bursts shaded, phases dashed)</text>\n",
	    (int)(60 + 3 * (ph + 40) + 20 * (double)ns), s->path,
	    sim_ms_text(s->bucket, tb, sizeof(tb)));
	panel(f, s, sr, ns, 0, 50.0, ph, "local-zone share of attempts", "%");
	panel(f, s, sr, ns, 1, 50.0 + ph + 40.0, ph, "p99 latency (log scale)",
	    " ms");
	panel(f, s, sr, ns, 2, 50.0 + 2 * (ph + 40.0), ph, "error rate", "%");
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

int
sim_des_main(
    const char *const *confs, size_t nconfs, const char *scn, const char *svg)
{
	scenario *s = calloc(1, sizeof(*s));
	simconf sc[MAX_CONFS];
	series sr[MAX_CONFS];
	run *r = calloc(1, sizeof(*r));
	uint64_t *lat = NULL;
	size_t k, nb, loaded = 0, nseries = 0;
	int rc;

	if (s == NULL || r == NULL) {
		free(s);
		free(r);
		return 2;
	}
	if (nconfs > MAX_CONFS) {
		fprintf(stderr, "resil-sim: at most %d configurations\n",
		    MAX_CONFS);
		free(s);
		free(r);
		return 2;
	}
	rc = read_des(scn, s);
	if (s->method[0] == '\0')
		snprintf(s->method, sizeof(s->method), "call");
	for (k = 0; rc == 0 && k < nconfs; k++) {
		rc = load_conf(confs[k], &sc[k]);
		if (rc == 0)
			loaded++;
	}
	nb = (size_t)((s->end + s->bucket - 1) / (s->bucket ? s->bucket : 1));
	for (k = 0; rc == 0 && k < nconfs; k++) {
		size_t i;

		if (nconfs > 1)
			printf("== %s\n", confs[k]);
		fflush(stdout);
		rc = run_one(r, s, &sc[k]);
		if (rc == 0) {
			free(lat);
			lat = malloc((r->nrecs + 1) * sizeof(*lat));
			sr[k].label = confs[k];
			sr[k].n = nb;
			sr[k].b = calloc(nb + 1, sizeof(figures));
			if (lat == NULL || sr[k].b == NULL) {
				free(sr[k].b);
				rc = 2;
			} else {
				nseries++;
				print_phases(s, r, lat);
				for (i = 0; i < nb; i++)
					figures_of(r->recs, r->nrecs,
					    s->bucket * i, s->bucket * (i + 1),
					    lat, &sr[k].b[i]);
			}
		}
		fflush(stdout);
		free(r->recs);
		r->recs = NULL;
		free_run(r);
	}
	if (rc == 0 && svg != NULL) {
		rc = des_write_svg(svg, s, sr, nseries);
		if (rc == 0)
			fprintf(stderr, "resil-sim: picture in %s\n", svg);
	}
	for (k = 0; k < nseries; k++)
		free(sr[k].b);
	for (k = 0; k < loaded; k++)
		free_conf(&sc[k]);
	free(lat);
	free_scenario(s);
	free(s);
	free(r);
	return rc;
}

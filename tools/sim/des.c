/*
 * resil-sim's event-driven model: a caller with an optional pool of
 * threads, zones, endpoints with a pool of workers and a FIFO queue each
 * (bounded or not), stop-the-world pauses, the network between zones (a
 * round-trip time range and a loss rate per zone pair, loss bursts),
 * Poisson arrivals, phases, and a registry whose pushes may arrive late,
 * empty or incomplete, all on the manual clock with seeded generators.
 * Every call goes through the real call machine
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

#include "des.h"

enum ev_kind {
	EV_ARRIVAL,
	EV_CALLS,
	EV_STEP,
	EV_REACH,
	EV_SERVED,
	EV_ANSWER,
	EV_ACTION,
	EV_POLL,
	EV_PUSH,     /* a registry push reaches the caller */
	EV_HEARTBEAT /* the registry notices a pause (arg: 2 * endpoint + back)
	              */
};

/* Failback: the queue is polled this often. */
#define POLL_EVERY (100 * RESIL_NS_PER_MS)

/* ---- reading a configuration ---- */

/*
 * One configuration file holds the pipeline's keys, the cluster's
 * (cluster=, retries=, zone=, cross_zone_timeout=, ...) and the selector's
 * and directory's (loadbalance=, router.*, outlier.*, panic.threshold,
 * registry.empty_protection): resil_config reads them all
 * (docs/config.md, docs/cluster.md). The scenario's rules are applied with
 * the configuration's router.condition.force.
 */
/* A key of the cluster, the selector or the directory. */
static int
cluster_word(const char *k)
{
	static const char *const exact[] = { "cluster", "retries", "forks",
		"zone", "cross_zone_timeout", "loadbalance" };
	static const char *const prefix[] = { "broadcast.", "failback.",
		"loadbalance.", "router.", "outlier.", "panic.", "registry." };
	size_t i;

	for (i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strcmp(k, exact[i]) == 0)
			return 1;
	for (i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
		if (strncmp(k, prefix[i], strlen(prefix[i])) == 0)
			return 1;
	return 0;
}

int
sim_cluster_setting(const resil_config *conf, resil_config_setting *out)
{
	size_t i, n = resil_config_count(conf);

	for (i = 0; i < n; i++) {
		const char *dot;

		if (resil_config_entry(conf, i, out) != RESIL_OK)
			continue;
		dot = strchr(out->key, '.');
		if (cluster_word(out->key) ||
		    (dot != NULL &&
		        (strcmp(dot + 1, "retries") == 0 ||
		            strcmp(dot + 1, "loadbalance") == 0 ||
		            strncmp(dot + 1, "loadbalance.", 12) == 0)))
			return 1;
	}
	return 0;
}

static int
load_conf(const char *path, simconf *sc)
{
	resil_config_setting set;
	resil_diag diag;
	char force[16];

	memset(sc, 0, sizeof(*sc));
	sc->path = path;
	if (resil_config_parse_file(&sc->conf, path, NULL, &diag) !=
	    RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 2;
	}
	if (!sim_cluster_setting(sc->conf, &set)) {
		/* A pipeline without one runs on the defaults (failover over
		 * the scenario's endpoints): refused, as it is a mismatch
		 * more often than a choice. */
		fprintf(stderr,
		    "resil-sim: %s has no cluster setting (cluster=, "
		    "loadbalance=, retries=, router.*, outlier.*, ...): an "
		    "event scenario runs a cluster; give it a cluster "
		    "configuration, or use a step scenario\n",
		    path);
		resil_config_free(sc->conf);
		sc->conf = NULL;
		return 2;
	}
	sc->rule_force = resil_config_get(sc->conf, "router.condition.force",
	                     force, sizeof(force)) == RESIL_OK &&
	    strcmp(force, "true") == 0;
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
	else if (ev->type == RESIL_ENDPOINT_EMPTY_PUSH)
		printf("%s ms: empty push not applied (%" PRIu64
		       " providers kept)\n",
		    sim_ms_text(resil_manual_clock_now(&r->mc), t, sizeof(t)),
		    ev->duration);
}

/* In a trace, the cluster's events (failsafe swallowed, failback queued
 * or retried, zone-aware crossed zones, ...) as the pipeline words them. */
static void
on_pipeline(const resil_pipeline_event *ev, void *ctx)
{
	run *r = ctx;
	char t[32];

	/* The endpoints' events (issue 40: they reach the pipeline too,
	 * without .cluster) are printed from the directory's listener. */
	if (!r->s->trace || ev->stage != RESIL_STAGE_CLUSTER ||
	    ev->cluster == NULL)
		return;
	printf("%s ms: %s\n", sim_ms_text(ev->time, t, sizeof(t)), ev->text);
}

static void
sched(run *r, uint64_t t, int kind, void *p, uint32_t arg)
{
	if (sim_schedule(&r->q, t, kind, p, arg) != 0)
		r->oom = 1;
}

/* The caller's directory gets the endpoints of *set (traced: a push
 * from the registry, not the list the run starts with). */
static int
push(run *r, const epset *set, int trace)
{
	resil_endpoint_spec specs[MAX_EPS];
	resil_diag diag;
	size_t n = 0;
	int i;

	for (i = 0; i < r->s->neps; i++) {
		ep *e = &r->eps[i];

		if (!epset_has(set, i))
			continue;
		specs[n] = resil_endpoint_spec_default(e->address);
		specs[n].zone = r->s->zones[e->zone];
		specs[n].user = e;
		if (e->tag[0] != '\0')
			specs[n].tag = e->tag;
		n++;
	}
	if (trace) {
		char t[32];

		printf("%s ms: push of %zu endpoints\n",
		    sim_ms_text(resil_manual_clock_now(&r->mc), t, sizeof(t)),
		    n);
	}
	if (resil_directory_push(r->dir, specs, n, &diag) != RESIL_OK) {
		fprintf(stderr, "resil-sim: push: %s\n", diag.msg);
		return -1;
	}
	return 0;
}

static epset
registered(const run *r)
{
	epset set;
	int i;

	memset(&set, 0, sizeof(set));
	for (i = 0; i < r->s->neps; i++)
		if (r->eps[i].listed)
			epset_add(&set, i);
	return set;
}

/* How late a push issued at now reaches the caller's zone. */
static uint64_t
lag_at(const scenario *s, uint64_t now)
{
	uint64_t d = 0;
	size_t i;

	for (i = 0; i < s->nlag; i++)
		if (now >= s->lag[i].from && now < s->lag[i].until)
			d = s->lag[i].d;
	return d;
}

/*
 * The registry sends *set: it reaches the caller lag_at() later, and
 * never before a push sent earlier (the pushes of one registry arrive in
 * order). One that arrives at once, with none on its way, is applied now.
 */
static void
registry_push(run *r, const epset *set, uint64_t now)
{
	uint64_t at = now + lag_at(r->s, now);

	if (at < r->last_delivery)
		at = r->last_delivery;
	r->last_delivery = at;
	if (at == now && r->npushes == 0) {
		if (push(r, set, r->s->trace) != 0)
			r->oom = 1;
		return;
	}
	if (grow((void **)&r->pushes, &r->cappushes, r->npushes,
	        sizeof(*set)) != 0) {
		r->oom = 1;
		return;
	}
	r->pushes[r->npushes++] = *set;
	sched(r, at, EV_PUSH, NULL, 0);
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
		const window *lw = &s->loss[i];

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
	if (resil_rc_is_throttled(a->rc))
		return "throttled";
	switch (a->rc) {
	case RC_OK:
		return "ok";
	case RC_REFUSED:
		return "refused";
	case RC_EXHAUSTED:
		return "rejected";
	case RC_BUSINESS:
		return "business";
	default:
		return "failed";
	}
}

static void
record(run *r, uint64_t start, uint64_t now, int err, uint32_t sent,
    uint32_t local)
{
	rec rc;

	rc.start = start;
	rc.lat = now - start;
	rc.err = (uint8_t)(err != 0);
	rc.sent = (uint8_t)sent;
	rc.local = (uint8_t)local;
	rc.crit = 0;
	if (grow((void **)&r->recs, &r->caprecs, r->nrecs, sizeof(rc)) != 0)
		r->oom = 1;
	else
		r->recs[r->nrecs++] = rc;
}

static void
trace_call(const scall *c, uint64_t now)
{
	char t0[32], t1[32];
	uint32_t i;

	printf("%s ms: call %" PRIu64 " (started %s ms) %s",
	    sim_ms_text(now, t1, sizeof(t1)), c->no,
	    sim_ms_text(c->start, t0, sizeof(t0)),
	    c->res.err == RESIL_OK ? "ok" : resil_err_name(c->res.err) + 6);
	for (i = 0; i < c->natt; i++)
		printf("%s %s %s", i == 0 ? ":" : ",",
		    c->a[i].e ? c->a[i].e->address : "-",
		    att_word(&c->a[i], now, c->res.err));
	if (c->res.err != RESIL_OK && c->res.message[0] != '\0')
		printf(" (%s)", c->res.message);
	printf("\n");
}

static void
finish(run *r, scall *c, uint64_t now)
{
	c->done = 1;
	r->busy--;
	record(r, c->start, now, c->res.err != RESIL_OK, c->sent, c->local);
	if (!r->oom && r->nrecs > 0)
		r->recs[r->nrecs - 1].crit = (uint8_t)c->crit;
	if (r->s->trace)
		trace_call(c, now);
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
				/* Mostly a timeout ahead, and mostly never
				 * needed (the answer comes first). */
				if (sim_schedule_fifo(
				        &r->q, st.until, EV_STEP, c, 0) != 0)
					r->oom = 1;
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

/* Call no, arrived at t0, gets a thread of the caller's pool at now. */
static void
start_call(run *r, uint64_t no, uint64_t t0, uint64_t now)
{
	scall *c = r->free_calls;
	resil_call_next st;

	if (c != NULL)
		r->free_calls = c->next_free;
	else if ((c = malloc(sizeof(*c))) == NULL) {
		r->oom = 1;
		return;
	}
	r->busy++;
	c->no = no;
	c->start = t0;
	c->step_at = 0;
	c->refs = 0;
	c->done = 0;
	c->natt = c->sent = c->local = 0;
	resil_invocation_init(&c->inv, r->s->method);
	/* Issue 42: a share of the calls is critical (its own draws, so
	 * the arrivals and services are the same with or without). */
	c->crit = r->s->critical > 0 &&
	    sim_rng_uniform(&r->prio) < r->s->critical;
	if (c->crit) {
		static const resil_param crit = { "priority", "critical" };

		c->inv.attachments = &crit;
		c->inv.nattachments = 1;
	}
	if (r->s->tag[0] != '\0') {
		c->inv.tag = r->s->tag;
		c->inv.tag_force = r->s->tag_force;
	}
	if (r->s->nargs > 0 || r->s->keys > 0) {
		size_t k, n = 0;
		const char *a = r->s->argbuf;

		if (r->s->keys > 0) {
			snprintf(c->key, sizeof(c->key), "k%u",
			    (unsigned)(no % r->s->keys));
			c->argv[n++] = c->key;
		}
		for (k = 0; k < r->s->nargs && n < 8; k++) {
			c->argv[n++] = a;
			a += strlen(a) + 1;
		}
		c->inv.arguments = c->argv;
		c->inv.narguments = n;
	}
	if (resil_call_start_ex(
	        &c->mc, r->p, NULL, &c->inv, &c->res, now, &st) != RESIL_OK) {
		r->oom = 1;
		free(c);
		return;
	}
	drive(r, c, st, now);
}

/*
 * A call arrives at the caller. With a pool (caller threads=N), it waits
 * in FIFO order for a thread while all N hold a call, and is refused at
 * once (an error that made no attempt) when queue=M calls wait already.
 */
static void
arrive(run *r, uint64_t now)
{
	const scenario *s = r->s;
	waitq *w = &r->waiting;

	r->ncalls++;
	if (r->busy < s->threads && w->n == 0) {
		start_call(r, r->ncalls, now, now);
		return;
	}
	if (w->n >= s->queue) {
		char t[32];

		record(r, now, now, 1, 0, 0);
		if (s->trace)
			printf("%s ms: call %" PRIu64
			       " rejected: the caller's pool is full\n",
			    sim_ms_text(now, t, sizeof(t)), r->ncalls);
		return;
	}
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64, i;
		waiter *nv = malloc(cap * sizeof(*nv));

		if (nv == NULL) {
			r->oom = 1;
			return;
		}
		for (i = 0; i < w->n; i++)
			nv[i] = w->v[(w->head + i) % w->cap];
		free(w->v);
		w->v = nv;
		w->cap = cap;
		w->head = 0;
	}
	w->v[(w->head + w->n) % w->cap].t = now;
	w->v[(w->head + w->n++) % w->cap].no = r->ncalls;
}

/* Threads freed by calls that ended take the calls waiting, in order. */
static void
pump(run *r, uint64_t now)
{
	waitq *w = &r->waiting;

	while (!r->oom && w->n > 0 && r->busy < r->s->threads) {
		waiter wt = w->v[w->head];

		w->head = (w->head + 1) % w->cap;
		w->n--;
		start_call(r, wt.no, wt.t, now);
	}
}

static void
serve(run *r, job *j, uint64_t now)
{
	ep *e = j->e;
	uint64_t d =
	    e->exp ? sim_rng_exp(&r->service, e->mean) : (uint64_t)e->mean;

	/* The refusals' cost (reject=) is paid by the next service. */
	d += e->debt;
	e->debt = 0;
	e->busy++;
	j->paused_seen = e->paused_total;
	sched(r, now + d, EV_SERVED, j, 0);
}

/* The answer (or the refusal of a full queue) leaves the endpoint: lost,
 * or back half a round trip later. */
static void
send_answer(run *r, job *j, uint64_t now)
{
	if (lost(r, j->e->zone, now)) {
		scall *c = j->c;

		c->refs--;
		job_free(r, j);
		call_release(r, c);
	} else {
		sched(r, now + (j->rtt - j->rtt / 2), EV_ANSWER, j, 0);
	}
}

/*
 * A stop-the-world pause of e from now for d: requests that reach it wait
 * until it ends, those in service finish d later. With a registry
 * heartbeat timeout shorter than the pause, the registry removes e that
 * long into the pause and lists it again when the pause ends.
 */
static void
pause_ep(run *r, int i, uint64_t d, uint64_t now)
{
	ep *e = &r->eps[i];
	uint64_t until, most = now < UINT64_MAX / 4 ? UINT64_MAX / 4 - now : 1;

	/* Far enough: the run is over long before (and no sum wraps). */
	if (d > most)
		d = most;
	until = now + d;
	if (until <= e->paused_until)
		return;
	e->paused_total +=
	    until - (e->paused_until > now ? e->paused_until : now);
	e->paused_until = until;
	if (r->s->heartbeat > 0 && d > r->s->heartbeat) {
		sched(r, now + r->s->heartbeat, EV_HEARTBEAT, NULL,
		    (uint32_t)(2 * i));
		sched(r, until, EV_HEARTBEAT, NULL, (uint32_t)(2 * i + 1));
	}
}

/* The scenario's rule (NULL: none) replaces the selector's rules. */
static void
apply_rule(run *r, const char *text)
{
	resil_condition *c = NULL;
	resil_diag diag;

	if (text != NULL &&
	    resil_condition_parse(&c, text, r->sc->rule_force, NULL, &diag) !=
	        RESIL_OK) {
		r->oom = 1;
		return;
	}
	/* On success the selector owns the rule (and frees it once no
	 * route can see it); on error it is still ours. */
	if (resil_selector_set_conditions(r->sel, c != NULL ? &c : NULL,
	        (size_t)(c != NULL), &diag) != RESIL_OK) {
		fprintf(stderr, "resil-sim: rule: %s\n", diag.msg);
		resil_condition_free(c);
		r->oom = 1;
	}
	if (r->s->trace) {
		char t[32];

		printf("%s ms: rule %s\n",
		    sim_ms_text(resil_manual_clock_now(&r->mc), t, sizeof(t)),
		    text != NULL ? text : "none");
	}
}

static void
act(run *r, const action *a, uint64_t now)
{
	epset set = registered(r);
	int i, changed = 0;

	for (i = 0; i < r->s->neps; i++) {
		ep *e = &r->eps[i];

		if (!epset_has(&a->target, i))
			continue;
		if (a->kind == A_REFUSE || a->kind == A_ACCEPT)
			e->refusing = a->kind == A_REFUSE;
		else if (a->kind == A_PAUSE)
			pause_ep(r, i, a->d, now);
		else if (a->kind == A_REMOVE || a->kind == A_ADD) {
			changed |= e->listed != (a->kind == A_ADD);
			e->listed = a->kind == A_ADD;
		} else if (a->kind == A_WITHOUT)
			set.w[i / 64] &= ~((uint64_t)1 << (i % 64));
	}
	if (a->kind == A_EMPTY)
		memset(&set, 0, sizeof(set));
	if (a->kind == A_REMOVE || a->kind == A_ADD)
		set = registered(r);
	if (changed || a->kind == A_EMPTY || a->kind == A_WITHOUT ||
	    a->kind == A_RESYNC)
		registry_push(r, &set, now);
	if (a->kind == A_RULE)
		apply_rule(r, a->rule);
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

/* ---- one handler per event kind ---- */

/*
 * With arrivals= on phases: the next arrival after t, Poisson at the
 * rate of the phase it falls in (a phase without one: the scenario's
 * `arrivals`, or none). A gap that crosses the phase's end is drawn
 * again from the end at the next phase's rate (memoryless: exact).
 * UINT64_MAX: none before the last phase ends.
 */
static uint64_t
next_arrival(run *r, uint64_t t)
{
	const scenario *s = r->s;
	int i;

	for (i = 0; i < s->nphases; i++) {
		const phase *ph = &s->phases[i];
		double rate = ph->rate > 0 ? ph->rate : s->rate;
		uint64_t gap;

		if (ph->end <= t || !(rate > 0))
			continue;
		if (t < ph->start)
			t = ph->start;
		gap = sim_rng_exp(&r->arrivals, (double)RESIL_NS_PER_SEC / rate);
		if (gap < ph->end - t)
			return t + gap;
		t = ph->end;
	}
	return UINT64_MAX;
}

/* The bulkhead's limit at an arrival at t (issue 28): per phase, the
 * last and the range over the phase's second half. */
static void
note_limit(run *r, uint64_t t)
{
	const scenario *s = r->s;
	resil_bulkhead *bh = resil_pipeline_bulkhead(r->p);
	uint32_t l;
	int i;

	if (bh == NULL)
		return;
	l = resil_bulkhead_get_limit(bh);
	for (i = 0; i < s->nphases; i++) {
		const phase *ph = &s->phases[i];

		if (t < ph->start || t >= ph->end)
			continue;
		r->lim_last[i] = l;
		if (t - ph->start < (ph->end - ph->start) / 2)
			return;
		if (!r->lim_seen[i] || l < r->lim_lo[i])
			r->lim_lo[i] = l;
		if (!r->lim_seen[i] || l > r->lim_hi[i])
			r->lim_hi[i] = l;
		r->lim_seen[i] = 1;
		return;
	}
}

static void
on_arrival(run *r, const sim_event *ev)
{
	uint64_t next;

	if (r->s->phase_rates) {
		next = next_arrival(r, ev->t);
		if (next != UINT64_MAX)
			sched(r, next, EV_ARRIVAL, NULL, 0);
	} else {
		next = ev->t + sim_rng_exp(&r->arrivals,
		                   (double)RESIL_NS_PER_SEC / r->s->rate);
		if (next < r->s->end)
			sched(r, next, EV_ARRIVAL, NULL, 0);
	}
	note_limit(r, ev->t);
	arrive(r, ev->t);
}

static void
on_calls(run *r, const sim_event *ev)
{
	unsigned k;

	for (k = 0; k < ev->arg; k++)
		arrive(r, ev->t);
}

static void
on_step(run *r, const sim_event *ev)
{
	scall *c = ev->p;
	resil_call_next st;

	c->refs--;
	if (c->done) {
		call_release(r, c);
		return;
	}
	if (ev->t != c->step_at)
		return;
	c->step_at = 0;
	if (resil_call_step(&c->mc, ev->t, &st) == RESIL_OK)
		drive(r, c, st, ev->t);
}

/* A request reaches its endpoint: it waits out a pause, then a worker
 * takes it, or it queues, or a full queue refuses it. */
static void
on_reach(run *r, const sim_event *ev)
{
	job *j = ev->p;
	ep *e = j->e;

	if (e->paused_until > ev->t) {
		sched(r, e->paused_until, EV_REACH, j, 0);
	} else if (e->busy < e->workers) {
		serve(r, j, ev->t);
	} else if (e->nq < e->qcap) {
		j->next = NULL;
		if (e->qtail != NULL)
			e->qtail->next = j;
		else
			e->qhead = j;
		e->qtail = j;
		e->nq++;
	} else {
		/* Issue 42: the server's pushback, and what refusing costs. */
		j->rc = e->retry_after_ms >= 0
		    ? RESIL_RC_THROTTLED_MS(e->retry_after_ms)
		    : RC_EXHAUSTED;
		e->debt += e->reject_ns;
		send_answer(r, j, ev->t);
	}
}

static void
on_served(run *r, const sim_event *ev)
{
	job *j = ev->p, *nx;
	ep *e = j->e;

	if (j->paused_seen != e->paused_total) {
		/* A pause began during the service: it ends that much later.
		 */
		uint64_t extra = e->paused_total - j->paused_seen;

		j->paused_seen = e->paused_total;
		sched(r, ev->t + extra, EV_SERVED, j, 0);
		return;
	}
	e->busy--;
	e->served++;
	if ((nx = e->qhead) != NULL) {
		e->qhead = nx->next;
		if (e->qhead == NULL)
			e->qtail = NULL;
		e->nq--;
		serve(r, nx, ev->t);
	}
	send_answer(r, j, ev->t);
}

static void
on_answer(run *r, const sim_event *ev)
{
	job *j = ev->p;
	scall *c = j->c;
	att *a = &c->a[j->ai];
	resil_value v = resil_value_int(1);
	resil_call_next st;

	c->refs--;
	a->answered = 1;
	a->rc = j->rc;
	resil_call_report(
	    &c->mc, a->id, j->rc, j->rc == RC_OK ? &v : NULL, ev->t);
	resil_value_free(&v);
	job_free(r, j);
	if (c->done) {
		call_release(r, c);
		return;
	}
	if (resil_call_step(&c->mc, ev->t, &st) == RESIL_OK)
		drive(r, c, st, ev->t);
}

static void
on_action(run *r, const sim_event *ev)
{
	act(r, &r->s->acts[ev->arg], ev->t);
}

static void
on_poll(run *r, const sim_event *ev)
{
	size_t ran = 0;
	char t[32];

	resil_pipeline_failback_poll(r->p, ev->t, failback_try, r, &ran);
	if (ran > 0 && r->s->trace)
		printf("%s ms: failback poll: %zu attempts\n",
		    sim_ms_text(ev->t, t, sizeof(t)), ran);
	if (ev->t < r->s->end || resil_pipeline_failback_pending(r->p) > 0)
		sched(r, ev->t + POLL_EVERY, EV_POLL, NULL, 0);
}

static void
on_push(run *r, const sim_event *ev)
{
	(void)ev;
	if (push(r, &r->pushes[0], r->s->trace) != 0)
		r->oom = 1;
	memmove(r->pushes, r->pushes + 1, --r->npushes * sizeof(epset));
}

/* The registry's view of a paused endpoint: removed when its heartbeats
 * have been missing for the timeout, listed again when it resumes. */
static void
on_heartbeat(run *r, const sim_event *ev)
{
	ep *e = &r->eps[ev->arg / 2];
	epset set;

	if (ev->arg % 2 == 0 && e->paused_until > ev->t && e->listed) {
		e->listed = 0;
		e->hb_removed = 1;
	} else if (ev->arg % 2 == 1 && e->paused_until <= ev->t &&
	    e->hb_removed) {
		e->listed = 1;
		e->hb_removed = 0;
	} else {
		return;
	}
	set = registered(r);
	registry_push(r, &set, ev->t);
}

typedef void (*handler_fn)(run *r, const sim_event *ev);

static const handler_fn handlers[] = {
	[EV_ARRIVAL] = on_arrival,
	[EV_CALLS] = on_calls,
	[EV_STEP] = on_step,
	[EV_REACH] = on_reach,
	[EV_SERVED] = on_served,
	[EV_ANSWER] = on_answer,
	[EV_ACTION] = on_action,
	[EV_POLL] = on_poll,
	[EV_PUSH] = on_push,
	[EV_HEARTBEAT] = on_heartbeat,
};

static void
handle(run *r, const sim_event *ev)
{
	resil_manual_clock_set(&r->mc, ev->t);
	handlers[ev->kind](r, ev);
	if (r->waiting.n > 0)
		pump(r, ev->t);
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

/* The directory, the selector over it and the pipeline of one run. */
static int
build(run *r, const simconf *sc)
{
	resil_pipeline_config pcfg;
	resil_directory_config dcfg;
	resil_selector_config scfg;
	resil_diag diag;

	resil_directory_config_init(&dcfg);
	resil_config_directory(sc->conf, &dcfg);
	dcfg.clock = resil_manual_clock_hook(&r->mc);
	dcfg.listener = on_endpoint;
	dcfg.listener_ctx = r;
	if (resil_directory_new(&r->dir, &dcfg, &diag) != RESIL_OK)
		goto fail;
	resil_config_selector(sc->conf, &scfg);
	scfg.random = &r->lbrand;
	if (resil_selector_new(&r->sel, r->dir, &scfg, &diag) != RESIL_OK)
		goto fail;
	pcfg = *resil_config_pipeline(sc->conf);
	if (pcfg.service == NULL)
		pcfg.service = "Service";
	pcfg.clock = resil_manual_clock_hook(&r->mc);
	pcfg.classifier.fn = des_classify;
	pcfg.selector = r->sel;
	if (r->s->trace && pcfg.listener == NULL) {
		pcfg.listener = on_pipeline;
		pcfg.listener_ctx = r;
	}
	/* Forking needs an executor for the blocking driver only; the
	 * simulator runs the attempts itself. */
	pcfg.executor.submit = no_submit;
	pcfg.executor.wait = no_wait;
	pcfg.executor.wake = no_wake;
	if (resil_pipeline_new(&r->p, &pcfg, &diag) != RESIL_OK)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "%s: %s\n", sc->path, diag.msg);
	return 2;
}

static int
run_one(run *r, const scenario *s, const simconf *sc)
{
	epset all;
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
	sim_rng_seed(&r->prio, s->seed, 5);
	resil_rng_seed(&r->lbrng, s->seed * 4 + 1);
	r->lbrand = resil_rng_hook(&r->lbrng);
	if (build(r, sc) != 0)
		return 2;
	all = registered(r);
	if (push(r, &all, 0) != 0)
		return 2;
	if (s->phase_rates) {
		uint64_t t0 = next_arrival(r, 0);

		if (t0 != UINT64_MAX)
			sched(r, t0, EV_ARRIVAL, NULL, 0);
	} else if (s->rate > 0) {
		sched(r, 0, EV_ARRIVAL, NULL, 0);
	}
	if (resil_config_pipeline(sc->conf)->cluster.strategy ==
	    RESIL_CLUSTER_FAILBACK)
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
	free(r->waiting.v);
	free(r->pushes);
	memset(&r->waiting, 0, sizeof(r->waiting));
	r->pushes = NULL;
	r->npushes = r->cappushes = 0;
	/* The pipeline borrows the selector, which borrows the directory. */
	resil_pipeline_free(r->p);
	resil_selector_free(r->sel);
	resil_directory_free(r->dir);
	r->sel = NULL;
	r->p = NULL;
	r->dir = NULL;
}

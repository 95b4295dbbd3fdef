/*
 * The cluster inside the call machine (lib/call_cluster.h): route and
 * pick each attempt's endpoint, report each attempt to the selector, the
 * strategies' decisions (broadcast, zone-aware; failover is the retry
 * stage's) and the answer in Dubbo's words.
 */
#include "call_cluster.h"

#include <stdio.h>
#include <string.h>

#include "call_internal.h"
#include "retry_internal.h"
#include "router_internal.h"

/* src into dst (n bytes with the NUL), cut when it does not fit. */
static void
copy_str(char *dst, size_t n, const char *src)
{
	size_t len = src != NULL ? strlen(src) : 0;

	if (len >= n)
		len = n - 1;
	if (len > 0)
		memcpy(dst, src, len);
	dst[len] = '\0';
}

static resil_candidates *
cand_take(resil_pipeline *p, int *at)
{
	unsigned st = resil__thread_stripe(NSTRIPES), k;
	resil_candidates *c;

	for (k = 0; k < NSTRIPES; k++) {
		unsigned i = (st + k) % NSTRIPES;

		if (resil__load64(&p->pool[i].busy) == 0 &&
		    resil__cas64(&p->pool[i].busy, 0, 1)) {
			*at = (int)i;
			return p->pool[i].c;
		}
	}
	/* Every pooled set is in use: one of its own for this pick. */
	*at = -1;
	return resil_candidates_new(&c, p->sel) == RESIL_OK ? c : NULL;
}

static void
cand_put(resil_pipeline *p, resil_candidates *c, int at)
{
	if (at < 0) {
		resil_candidates_free(c);
		return;
	}
	resil_candidates_clear(c);
	resil__store64(&p->pool[at].busy, 0);
}

/* The value of attachment key, or NULL. */
static const char *
attachment(const resil_invocation *inv, const char *key)
{
	size_t i;

	if (inv->attachments == NULL)
		return NULL;
	for (i = 0; i < inv->nattachments; i++)
		if (inv->attachments[i].key != NULL &&
		    strcmp(inv->attachments[i].key, key) == 0)
			return inv->attachments[i].value;
	return NULL;
}

/* A retries count 0..RESIL_RETRY_MAX_ATTEMPTS - 1 in decimal, or -1. */
static int
retries_of(const char *v)
{
	int n = 0;

	if (v == NULL || *v == '\0')
		return -1;
	for (; *v != '\0'; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		n = n * 10 + (*v - '0');
		if (n >= RESIL_RETRY_MAX_ATTEMPTS)
			return -1;
	}
	return n;
}

/* The call's request (Dubbo's Invocation) into c->req; the retries the
 * call asks for, or -1 for the configuration's. */
static int
request_of(callm *c)
{
	const resil_invocation *inv = c->inv;
	const char *v;
	int retries = -1;

	memset(&c->req, 0, sizeof(c->req));
	c->req.method = c->args->method;
	if (inv == NULL)
		return -1;
	c->req.args = inv->arguments;
	c->req.nargs = inv->narguments;
	c->req.params = inv->attachments;
	c->req.nparams = inv->nattachments;
	c->req.tag =
	    inv->tag != NULL ? inv->tag : attachment(inv, "dubbo.tag");
	c->req.tag_force = inv->tag_force != 0;
	if (!c->req.tag_force && (v = attachment(inv, "dubbo.force.tag")) &&
	    strcmp(v, "true") == 0)
		c->req.tag_force = 1;
	if (inv->has_retries)
		retries = inv->retries < RESIL_RETRY_MAX_ATTEMPTS
		    ? (int)inv->retries
		    : RESIL_RETRY_MAX_ATTEMPTS - 1;
	else
		retries = retries_of(attachment(inv, "retries"));
	return retries;
}

int
resil__cl_start(callm *c, const method *m, tsrc ts)
{
	resil_pipeline *p = c->p;
	int retries;

	c->sel = p->sel;
	c->magic = CALL_CLUSTER;
	c->cphase = 1;
	c->cstop = 0;
	c->has_pick = 0;
	c->last_local = 0;
	c->bany = 0;
	c->ncand = c->nother = c->bn = 0;
	c->nlocal = c->nfailed1 = 0;
	c->bidx = c->bfail = c->bthreshold = 0;
	c->blast_rc = 0;
	c->blast_status = RESIL_OK;
	c->ntried = c->nfailed = 0;
	c->in_hedge = 0;
	c->khost = 0; /* issue 41 */
	c->last_timeout = 0;
	c->failed[0] = c->last_addr[0] = c->last_zone[0] = c->cmsg[0] = '\0';
	retries = request_of(c);
	c->retry = p->ccfg.strategy == RESIL_CLUSTER_FAILOVER ||
	        p->ccfg.strategy == RESIL_CLUSTER_ZONE_AWARE
	    ? (m->cretry != NULL ? m->cretry : c->g->cretry)
	    : NULL;
	/* The run is on from the start (with no policy, a run that is never
	 * used: it keeps the machine's first-success shortcut, which knows
	 * nothing of endpoints, away from cluster calls). */
	c->run_on = 1;
	if (c->retry != NULL) {
		run_begin(c, &ts);
		if (retries >= 0)
			c->run.max_attempts = (uint32_t)retries + 1u;
	} else {
		memset(&c->run, 0, sizeof(c->run));
	}
	/* The service breaker records the whole call, after the strategy
	 * (DESIGN): one permit for the call; the attempts take none of it,
	 * each endpoint's own breaker and outlier detection see them. */
	c->sbreaker = c->breaker;
	c->breaker = NULL;
	c->has_spermit = 0;
	c->cstart = c->timeout != 0 ? tnow(&ts) : 0;
	if (c->sbreaker != NULL) {
		if (resil_breaker_acquire(c->sbreaker, &c->spermit) !=
		    RESIL_OK) {
			c->breaker_state =
			    (int)resil_breaker_get_state(c->sbreaker);
			c->cstop = 1;
			snprintf(c->cmsg, sizeof(c->cmsg),
			    "Failed to invoke the method %s in the service "
			    "%s: "
			    "rejected, the service's circuit breaker is %s",
			    c->req.method, p->service,
			    resil_breaker_state_name(
			        (resil_breaker_state)c->breaker_state));
			return 0;
		}
		c->has_spermit = 1;
	} else if (RESIL__UNLIKELY(c->m->fleet != NULL)) {
		/* Issue 44: the service breaker is the fleet's. */
		if (resil_fleet_acquire(c->m->fleet, &c->sfp) != RESIL_OK) {
			c->breaker_state = fleet_bstate(c->m->fleet);
			c->cstop = 1;
			snprintf(c->cmsg, sizeof(c->cmsg),
			    "Failed to invoke the method %s in the service "
			    "%s: "
			    "rejected, the service's circuit breaker is %s",
			    c->req.method, p->service,
			    resil_breaker_state_name(
			        (resil_breaker_state)c->breaker_state));
			return 0;
		}
		c->has_spermit = 2;
	}
	return 1;
}

/* The whole call's outcome into the service breaker (its permit). */
static void
service_record(callm *c, resil_outcome outcome, tsrc *ts)
{
	if (!c->has_spermit)
		return;
	if (RESIL__UNLIKELY(c->has_spermit == 2)) {
		c->has_spermit = 0;
		(void)resil_fleet_record(c->m->fleet, &c->sfp, outcome);
		c->breaker_state = fleet_bstate(c->m->fleet);
		return;
	}
	c->has_spermit = 0;
	if (c->timeout != 0) {
		uint64_t t1 = tnow(ts);

		resil_breaker_record_duration(c->sbreaker, &c->spermit,
		    outcome, t1 > c->cstart ? t1 - c->cstart : 0);
	} else {
		resil_breaker_record(c->sbreaker, &c->spermit, outcome);
	}
	c->breaker_state = (int)resil_breaker_get_state(c->sbreaker);
}

/*
 * The call ends refused by the consumer's own limits (its rate limiter,
 * its bulkhead: the attempt was never made), and no attempt of it ran
 * and failed: no failure of the dependency (DESIGN, decided in turn 4),
 * so the service breaker's permit goes back unused. A call whose earlier
 * attempt did fail at an endpoint still records that failure, as the
 * breaker of a pipeline without a selector records that attempt.
 */
static int
own_refusal(const callm *c, resil_err status)
{
	/* Issue 42: after the server's pushback too (not a failure). */
	return status == RESIL_E_LIMITED &&
	    (c->real_err == RESIL_OK || c->real_err == RESIL_E_THROTTLED);
}

void
resil__cl_cancel(callm *c)
{
	if (!c->has_spermit)
		return;
	if (RESIL__UNLIKELY(c->has_spermit == 2)) {
		c->has_spermit = 0;
		(void)resil_fleet_release(c->m->fleet, &c->sfp);
		c->breaker_state = fleet_bstate(c->m->fleet);
		return;
	}
	c->has_spermit = 0;
	resil_breaker_release(c->sbreaker, &c->spermit);
	c->breaker_state = (int)resil_breaker_get_state(c->sbreaker);
}

static void
note_tried(callm *c, uint64_t id)
{
	uint32_t k;

	for (k = 0; k < c->ntried; k++)
		if (c->tried[k] == id)
			return;
	if (c->ntried < sizeof(c->tried) / sizeof(c->tried[0]))
		c->tried[c->ntried++] = id;
}

/* A broadcast's next endpoint: the first candidate after the last one
 * it passed over (by id). */
static resil_err
pick_broadcast(
    callm *c, resil_candidates *cs, resil_pick *pk, resil_diag *diag)
{
	size_t k, n = resil_candidates_count(cs);
	resil_candidate cd;

	for (k = 0; k < n; k++) {
		if (resil_candidates_get(cs, k, &cd) != RESIL_OK ||
		    (c->bidx > 0 && cd.id <= c->blast_id))
			continue;
		c->blast_id = cd.id; /* refused or not, passed over */
		return resil_selector_pick_at(c->sel, cs, k, pk, diag);
	}
	return RESIL_E_UNAVAILABLE;
}

static resil_err
pick_once(callm *c, unsigned i, uint64_t now)
{
	resil_pipeline *p = c->p;
	const resil_cluster_config *cc = &p->ccfg;
	resil_pick *pk = &c->picks[i];
	const char *zone = p->zone;
	resil_candidates *cs;
	resil_diag diag;
	resil_err err;
	int ps;

	cs = cand_take(p, &ps);
	if (cs == NULL) {
		snprintf(c->cmsg, sizeof(c->cmsg), "pipeline: out of memory");
		return RESIL_E_NOMEM;
	}
	diag.msg[0] = '\0';
	err = resil_selector_route(c->sel, &c->req, cs, &diag);
	if (err != RESIL_OK) {
		cand_put(p, cs, ps);
		copy_str(c->cmsg, sizeof(c->cmsg), diag.msg);
		if (err == RESIL_E_NO_PROVIDER)
			resil__cluster_event(p,
			    RESIL_CLUSTER_EVENT_NO_PROVIDER, c->req.method,
			    NULL, 0, now);
		return err;
	}
	c->ncand = (uint32_t)resil_candidates_count(cs);
	if (c->issued == 0 && cc->strategy == RESIL_CLUSTER_BROADCAST) {
		/* The call's first route sets the broadcast's endpoints and
		 * threshold. */
		c->bn = c->ncand;
		c->bthreshold = (uint32_t)((uint64_t)c->bn *
		    (uint64_t)cc->broadcast_fail_percent / 100u);
	}
	switch (cc->strategy) {
	case RESIL_CLUSTER_BROADCAST:
		err = pick_broadcast(c, cs, pk, &diag);
		break;
	case RESIL_CLUSTER_ZONE_AWARE:
		if (c->cphase == 2) {
			/* The one cross-zone attempt. */
			err = resil_selector_pick_zone(
			    c->sel, cs, &c->req, NULL, 0, zone, 0, pk, &diag);
			c->last_local = 0;
			break;
		}
		c->nother = (uint32_t)resil_candidates_count_zone(cs, zone, 0);
		c->nlocal = (uint32_t)resil_candidates_count_zone(cs, zone, 1);
		if (c->nlocal > 0) {
			err = resil_selector_pick_zone(c->sel, cs, &c->req,
			    c->tried, c->ntried, zone, 1, pk, &diag);
			if (err == RESIL_E_UNAVAILABLE && c->in_hedge) {
				/* A hedge (issue 43): the local zone first,
				 * then an untried endpoint of another. */
				err = resil_selector_pick_zone(c->sel, cs,
				    &c->req, c->tried, c->ntried, zone, 0, pk,
				    &diag);
				c->last_local = 0;
				break;
			}
			if (err == RESIL_E_UNAVAILABLE && c->ntried > 0)
				err = resil_selector_pick_zone(c->sel, cs,
				    &c->req, NULL, 0, zone, 1, pk, &diag);
			c->last_local = 1;
			break;
		}
		/* No usable local endpoint: phase 1 runs over every zone. */
		c->last_local = 0;
		c->nother = 0;
		c->nlocal = c->ncand;
		/* fall through */
	default:
		err = resil_selector_pick(
		    c->sel, cs, &c->req, c->tried, c->ntried, pk, &diag);
		if (err == RESIL_E_UNAVAILABLE && c->ntried > 0 &&
		    cc->strategy != RESIL_CLUSTER_FORKING && !c->in_hedge)
			/* Every candidate tried: tried ones again. */
			err = resil_selector_pick(
			    c->sel, cs, &c->req, NULL, 0, pk, &diag);
		break;
	}
	if (err == RESIL_OK) {
		if (pk->zone != NULL) {
			copy_str(c->pzone[i], sizeof(c->pzone[i]), pk->zone);
			pk->zone = c->pzone[i];
		}
		if (cc->strategy == RESIL_CLUSTER_FAILFAST) {
			/* Its message names the candidates it chose from
			 * and their balancer (Dubbo's "select from all
			 * providers [...]"); cmsg is free: no pick failed. */
			c->clb = (uint8_t)resil__candidates_lb_kind(cs);
			resil__cluster_join(cs, c->cmsg, sizeof(c->cmsg));
		} else if (cc->strategy == RESIL_CLUSTER_FORKING) {
			/* Its message names the forks, in selection order
			 * (Dubbo's "selected"). */
			size_t len = strlen(c->failed);

			snprintf(c->failed + len, sizeof(c->failed) - len,
			    "%s%s", len > 0 ? ", " : "",
			    pk->address != NULL ? pk->address : "");
		}
		note_tried(c, pk->id);
		c->has_pick |= (uint8_t)(1u << i);
		c->slots[i].start = now;
	} else {
		copy_str(c->cmsg, sizeof(c->cmsg), diag.msg);
	}
	cand_put(p, cs, ps);
	return err;
}

/* Issue 41: the endpoint's host admits the attempt (families whose key
 * has the host: a breaker, a rate limiter, a bulkhead), or the endpoint
 * is left out of the call as an open endpoint breaker's is, and the next
 * is picked; when none admits, the call ends with the family's refusal. */
static resil_err
host_admit(callm *c, unsigned i, uint64_t now)
{
	static const char *const what[3][2] = { { "breaker", "breaker" },
		{ "rate limiter", "ratelimit" }, { "bulkhead", "bulkhead" } };
	uint8_t bit = (uint8_t)(1u << i);
	uint32_t tries = 0;
	resil_err err = RESIL_OK, ke;
	unsigned kind = 0;

	while (err == RESIL_OK) {
		ke = resil__keyed_host_admit(c->p, c->args, c->inv,
		    c->picks[i].address, &c->khp[i], &kind);
		if (ke == RESIL_OK) {
			if (c->khp[i].held)
				c->khost |= bit;
			return RESIL_OK;
		}
		resil_selector_release(c->sel, &c->picks[i]);
		c->has_pick &= (uint8_t)~bit;
		if (++tries >= c->ncand) {
			if (kind > 2)
				kind = 0;
			if (ke == RESIL_E_INVAL)
				snprintf(c->cmsg, sizeof(c->cmsg),
				    "%s.key: the composite key is over its "
				    "max_key_len (or not a key) at every "
				    "endpoint",
				    what[kind][1]);
			else
				snprintf(c->cmsg, sizeof(c->cmsg),
				    "the key's %s refused every endpoint "
				    "(%s.key has the host)",
				    what[kind][0], what[kind][1]);
			return ke;
		}
		err = pick_once(c, i, now);
	}
	return err;
}

resil_err
resil__cl_pick(callm *c, unsigned i, uint64_t now)
{
	resil_err err = pick_once(c, i, now);

	if (err == RESIL_OK && RESIL__UNLIKELY(c->p->keyed != NULL) &&
	    resil__keyed_host(c->p))
		return host_admit(c, i, now);
	return err;
}

void
resil__cl_done(callm *c, unsigned i, resil_outcome outcome, uint64_t t1)
{
	resil_pick *pk = &c->picks[i];
	uint64_t dur;
	uint32_t k;

	if (!(c->has_pick & (1u << i)))
		return;
	dur = t1 > c->slots[i].start ? t1 - c->slots[i].start : 0;
	copy_str(c->last_addr, sizeof(c->last_addr),
	    pk->address != NULL ? pk->address : "");
	copy_str(c->last_zone, sizeof(c->last_zone),
	    pk->zone != NULL ? pk->zone : "");
	c->last_timeout = c->timeout;
	if (c->last_rc == RESIL_RC_TIMEOUT)
		c->declared_ns = dur;
	if (outcome == RESIL_OUTCOME_FAILURE &&
	    c->p->ccfg.strategy != RESIL_CLUSTER_FORKING) {
		for (k = 0; k < c->nfailed && c->failed_ids[k] != pk->id; k++)
			;
		if (k == c->nfailed &&
		    c->nfailed <
		        sizeof(c->failed_ids) / sizeof(c->failed_ids[0])) {
			size_t len = strlen(c->failed);

			c->failed_ids[c->nfailed++] = pk->id;
			snprintf(c->failed + len, sizeof(c->failed) - len,
			    "%s%s", len > 0 ? ", " : "", c->last_addr);
		}
	}
	/* Issue 42: the server's pushback is not the endpoint failing. */
	resil_selector_report_duration(c->sel, pk,
	    c->last_status == RESIL_E_THROTTLED ? RESIL_OUTCOME_IGNORED
	                                        : outcome,
	    dur);
	khost_end(c, i,
	    c->last_status == RESIL_E_THROTTLED ? RESIL_OUTCOME_IGNORED
	                                        : outcome);
	c->has_pick &= (uint8_t) ~(1u << i);
}

/* The call ends with the strategy's answer; attempts still out are
 * abandoned first, as for any answer. */
static void
finish(callm *c, resil_err rr, int rc, resil_err status, resil_outcome outcome,
    tsrc *ts, resil_call_next *st)
{
	abandon_running(c);
	resil__cl_conclude(c, rr, rc, status, outcome, ts, st);
}

/* Broadcast's answer once it stops: any failure gives the last failure's
 * error, none the last endpoint's answer. */
static int
broadcast_end(callm *c, tsrc *ts, resil_call_next *st)
{
	if (c->bany) {
		finish(c, c->blast_status, c->blast_rc, c->blast_status,
		    RESIL_OUTCOME_FAILURE, ts, st);
	} else if (c->attempts == 0) {
		finish(c, RESIL_E_UNAVAILABLE, 0, RESIL_E_UNAVAILABLE,
		    RESIL_OUTCOME_FAILURE, ts, st);
	} else {
		finish(c, RESIL_OK, c->last_rc, RESIL_OK,
		    c->last_outcome == RESIL_OUTCOME_FAILURE
		        ? RESIL_OUTCOME_SUCCESS
		        : c->last_outcome,
		    ts, st);
	}
	return RESIL__CL_DONE;
}

/* Broadcast, after an attempt (or a refused one): count a failure, stop
 * at the threshold or the last candidate, else call the next one. */
static int
broadcast_next(callm *c, tsrc *ts, resil_call_next *st)
{
	c->pending = 0;
	if (c->last_status == RESIL_E_LIMITED) {
		/* The consumer's own limit refused the call to this endpoint:
		 * the broadcast stops with the refusal, which is no failure
		 * of the dependency (never counted toward the threshold). */
		finish(c, RESIL_E_LIMITED, 0, RESIL_E_LIMITED,
		    RESIL_OUTCOME_FAILURE, ts, st);
		return RESIL__CL_DONE;
	}
	if (c->last_outcome == RESIL_OUTCOME_BUSINESS) {
		finish(c, RESIL_OK, c->last_rc, RESIL_OK,
		    RESIL_OUTCOME_BUSINESS, ts, st);
		return RESIL__CL_DONE;
	}
	if (c->last_outcome == RESIL_OUTCOME_FAILURE &&
	    c->last_status != RESIL_E_UNAVAILABLE) {
		c->bany = 1;
		c->bfail++;
		c->blast_rc = c->last_rc;
		c->blast_status =
		    c->last_status != RESIL_OK ? c->last_status : RESIL_E_CALL;
		if (c->bfail == c->bthreshold)
			return broadcast_end(c, ts, st);
	}
	if (++c->bidx >= c->bn)
		return broadcast_end(c, ts, st);
	return RESIL__CL_LAUNCH;
}

int
resil__cl_decide(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;

	if (c->cstop && c->last_status != RESIL_OK) {
		/* The last thing that happened is the refusal (a fork that
		 * answered after it still counts: last_status is its). rc is
		 * the last attempt's that ran, as the other strategies'. */
		c->pending = 0;
		finish(c, c->last_status, c->real_rc, c->last_status,
		    RESIL_OUTCOME_FAILURE, ts, st);
		return RESIL__CL_DONE;
	}
	if (p->ccfg.strategy == RESIL_CLUSTER_BROADCAST)
		return broadcast_next(c, ts, st);
	if (p->ccfg.strategy == RESIL_CLUSTER_ZONE_AWARE) {
		if (c->cphase == 2) {
			c->pending = 0;
			finish(c, c->last_status, c->last_rc, c->last_status,
			    c->last_outcome, ts, st);
			return RESIL__CL_DONE;
		}
		if (c->last_status == RESIL_E_TIMEOUT && c->last_local &&
		    c->nother > 0 &&
		    (c->retry == NULL || c->run.n >= c->run.max_attempts)) {
			/* Phase 1 ran all its attempts and ended in a timeout
			 * (a timeout before its last attempt fails over in
			 * the zone, as any failure): one attempt in another
			 * zone, with its own timeout. */
			c->pending = 0;
			c->cphase = 2;
			c->nfailed1 = c->nfailed;
			if (p->ccfg.cross_zone_timeout_ns != 0)
				c->timeout = p->ccfg.cross_zone_timeout_ns;
			resil__cluster_event(p, RESIL_CLUSTER_EVENT_CROSS_ZONE,
			    c->req.method, c->last_addr, 0, tnow(ts));
			return RESIL__CL_LAUNCH;
		}
	}
	return RESIL__CL_PASS;
}

int
resil__cl_refused(
    callm *c, resil_err ls, int lrc, tsrc *ts, resil_call_next *st)
{
	if (c->p->ccfg.strategy == RESIL_CLUSTER_BROADCAST) {
		/* A refusing endpoint is passed over; no candidate at all
		 * ends the call. */
		if (c->cstop) {
			finish(c, c->last_status, 0, c->last_status,
			    RESIL_OUTCOME_FAILURE, ts, st);
			return RESIL__CL_DONE;
		}
		return broadcast_next(c, ts, st);
	}
	/* Zone-aware: no other-zone endpoint would take the cross-zone
	 * attempt, so the timeout stands. */
	c->pending = 0;
	c->cstop = 0;
	c->last_status = ls;
	c->last_rc = lrc;
	c->last_outcome = RESIL_OUTCOME_FAILURE;
	finish(c, ls, lrc, ls, RESIL_OUTCOME_FAILURE, ts, st);
	return RESIL__CL_DONE;
}

/*
 * The last error in words (resil__cluster_last_error), but a timeout the
 * user's function reported (rc RESIL_RC_TIMEOUT) says what happened and
 * when (issue 38.13): "the function's own timeout (RESIL_RC_TIMEOUT)
 * after 200 ms", not the configured timeout, which resil's own deadline
 * (rc 0) keeps. timed: the attempt's time is known (declared_ns).
 */
static void
last_error(const callm *c, char *buf, size_t n, resil_err err, int rc,
    uint64_t timeout, int timed)
{
	uint64_t ms, frac;
	int len;

	if (err != RESIL_E_TIMEOUT || rc != RESIL_RC_TIMEOUT) {
		resil__cluster_last_error(buf, n, err, rc, timeout);
		return;
	}
	len =
	    snprintf(buf, n, "the function's own timeout (RESIL_RC_TIMEOUT)");
	if (!timed || len < 0 || (size_t)len >= n)
		return;
	/* Milliseconds, with the fraction it has (to the nanosecond). */
	ms = c->declared_ns / RESIL_NS_PER_MS;
	frac = c->declared_ns % RESIL_NS_PER_MS;
	if (frac == 0) {
		snprintf(buf + len, n - (size_t)len, " after %llu ms",
		    (unsigned long long)ms);
	} else {
		char f[8];
		int k = 6;

		snprintf(f, sizeof(f), "%06llu", (unsigned long long)frac);
		while (k > 0 && f[k - 1] == '0')
			f[--k] = '\0';
		snprintf(buf + len, n - (size_t)len, " after %llu.%s ms",
		    (unsigned long long)ms, f);
	}
}

/* The answer of a cluster call: as conclude(), with the strategy's say
 * (failsafe, failback), the endpoint and Dubbo's message. */
/* The endpoint and zone of the call's last attempt, into its answer. */
static void
put_endpoint(callm *c)
{
	copy_str(c->out->endpoint, sizeof(c->out->endpoint), c->last_addr);
	copy_str(c->out->zone, sizeof(c->out->zone), c->last_zone);
}

/* No fallback answered a cluster call's failure err (rc): what happened,
 * in Dubbo's words (full: failback's queue refused it, 1 full, 2 out of
 * memory). */
static void
failure_msg(callm *c, resil_err err, int rc, int full)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;
	char lasterr[96];

	if (c->cstop && c->cmsg[0] != '\0') {
		copy_str(out->message, sizeof(out->message), c->cmsg);
	} else if (p->ccfg.strategy == RESIL_CLUSTER_BROADCAST) {
		last_error(c, lasterr, sizeof(lasterr), err, rc,
		    c->last_timeout, 1);
		resil__cluster_broadcast_msg(out->message,
		    sizeof(out->message), c->req.method, p->service, c->bfail,
		    c->bn, c->attempts > 0 ? lasterr : NULL);
	} else if (full) {
		last_error(c, lasterr, sizeof(lasterr), err, rc,
		    c->last_timeout, 1);
		resil__cluster_full_msg(out->message, sizeof(out->message),
		    c->req.method, p->service,
		    full == 1 ? p->ccfg.failback_queue : -1, lasterr);
	} else if (p->ccfg.strategy == RESIL_CLUSTER_FAILFAST ||
	    p->ccfg.strategy == RESIL_CLUSTER_FORKING) {
		char providers[sizeof(c->cmsg)];

		last_error(c, lasterr, sizeof(lasterr),
		    c->real_err != RESIL_OK ? c->real_err : err,
		    c->real_err != RESIL_OK ? c->real_rc : rc,
		    c->last_timeout, 1);
		if (p->ccfg.strategy == RESIL_CLUSTER_FORKING) {
			resil__cluster_forking_msg(out->message,
			    sizeof(out->message), c->failed, lasterr);
			return;
		}
		copy_str(providers, sizeof(providers), c->cmsg);
		resil__cluster_failfast_msg(out->message, sizeof(out->message),
		    c->req.method, p->service, c->last_addr,
		    resil__cluster_lb_name((resil_lb_kind)c->clb), providers,
		    lasterr);
	} else {
		last_error(c, lasterr, sizeof(lasterr),
		    c->real_err != RESIL_OK ? c->real_err : err,
		    c->real_err != RESIL_OK ? c->real_rc : rc,
		    c->last_timeout, 1);
		int zone = p->ccfg.strategy == RESIL_CLUSTER_ZONE_AWARE;

		/* Zone-aware: the counts are phase 1's, over its (local)
		 * candidates. */
		resil__cluster_failed_msg(out->message, sizeof(out->message),
		    c->req.method, p->service, c->attempts, c->failed,
		    zone && c->cphase == 2 ? c->nfailed1 : c->nfailed,
		    zone ? c->nlocal : c->ncand, lasterr);
	}
}

void
resil__cl_conclude(callm *c, resil_err rr, int rc, resil_err status,
    resil_outcome outcome, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;
	resil_cluster_strategy sg = p->ccfg.strategy;
	resil_err err;
	int full = 0;

	if (rr == RESIL_OK && status == RESIL_OK &&
	    outcome != RESIL_OUTCOME_FAILURE) {
		service_record(c, outcome, ts);
		put_endpoint(c);
		conclude_live(c, rc, outcome, ts, st);
		return;
	}
	if (own_refusal(c, status)) {
		/* Refused by the consumer's own limits: the permit goes back,
		 * and the refusal keeps its own words (it reached no
		 * provider; no strategy swallows or queues it). */
		resil__cl_cancel(c);
		resil_value_free(&c->value);
		if (recover_failure(c, status, rc) && c->cstop &&
		    c->cmsg[0] != '\0')
			/* Issue 41: a family keyed by host refused every
			 * endpoint (host_admit's words). */
			copy_str(c->out->message, sizeof(c->out->message),
			    c->cmsg);
		conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
		return;
	}
	/* A failure of the whole call, unless the strategy swallows it
	 * (failsafe, failback: neither a success nor a failure to the
	 * breaker, as to the caller it is no answer). */
	service_record(c,
	    (!c->cstop &&
	        (sg == RESIL_CLUSTER_FAILSAFE ||
	            sg == RESIL_CLUSTER_FAILBACK)) ||
	            status == RESIL_E_THROTTLED /* issue 42: pushback */
	        ? RESIL_OUTCOME_IGNORED
	        : RESIL_OUTCOME_FAILURE,
	    ts);
	resil_value_free(&c->value);
	if (!c->cstop && sg == RESIL_CLUSTER_FAILBACK &&
	    p->ccfg.failback_retries > 0) {
		int q = resil__cluster_enqueue(p->fbq, &c->req, c->args,
		    c->last_addr, c->ntried > 0 ? c->tried[c->ntried - 1] : 0,
		    rc, tnow(ts));

		/* The queue is full: the new failure is dropped (a
		 * QUEUE_FULL event, the failback_dropped metric) and the
		 * caller still gets no error (DESIGN). Memory ran out: the
		 * failure is not swallowed, it goes on as failfast's would.
		 * full: 1 full, 2 out of memory. */
		if (q <= 0)
			full = q == 0 ? 1 : 2;
		if (full == 1)
			resil__inc64(&my_stripe(p)->failback_dropped);
	}
	if (!c->cstop && full != 2 &&
	    (sg == RESIL_CLUSTER_FAILSAFE || sg == RESIL_CLUSTER_FAILBACK)) {
		/* The failure is swallowed: a null value now (failback:
		 * and the call queued for later). No fallback runs. */
		if (sg == RESIL_CLUSTER_FAILSAFE)
			resil__cluster_event(p, RESIL_CLUSTER_EVENT_SWALLOWED,
			    c->req.method, c->last_addr, rc, tnow(ts));
		out->rc = rc;
		out->attempts = c->attempts;
		out->breaker_state = c->breaker_state;
		out->source = RESIL_SOURCE_LIVE;
		out->err = RESIL_OK;
		out->last_failure = c->real_err;
		out->last_failure_rc = c->real_rc;
		put_endpoint(c);
		if (full == 1)
			/* What was dropped, in the answer too. */
			failure_msg(c,
			    c->real_err != RESIL_OK ? c->real_err
			                            : RESIL_E_CALL,
			    c->real_rc, 1);
		conclude_with(c, RESIL_STAGE_CALL, ts, st);
		return;
	}
	/* The final error has the kind of the last attempt's (failover's
	 * exhaustion is that attempt's failure, as in Dubbo). */
	err = status != RESIL_OK               ? status
	    : outcome == RESIL_OUTCOME_FAILURE ? RESIL_E_CALL
	    : rr != RESIL_OK                   ? rr
	                                       : RESIL_E_CALL;
	if (recover_failure(c, err, rc)) {
		/* No fallback answered: the endpoint, and what happened. */
		put_endpoint(c);
		failure_msg(c, err, rc, full);
	}
	conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
}

void
resil__cl_one_failfast(callm *c, resil_err err, int rc)
{
	char lasterr[96];

	if (err == RESIL_E_OPEN || err == RESIL_E_LIMITED)
		return; /* a rejection keeps its own words */
	/* A timed attempt (a timeout is set) knows how long it ran. */
	last_error(c, lasterr, sizeof(lasterr),
	    c->real_err != RESIL_OK ? c->real_err : err,
	    c->real_err != RESIL_OK ? c->real_rc : rc, c->timeout,
	    c->timeout != 0);
	resil__cluster_failfast_msg(c->out->message, sizeof(c->out->message),
	    c->args->method, c->p->service, RESIL__IMPLICIT_ENDPOINT,
	    resil__cluster_lb_name(RESIL_LB_RANDOM), RESIL__IMPLICIT_ENDPOINT,
	    lasterr);
}

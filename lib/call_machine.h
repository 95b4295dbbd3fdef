/*
 * The call machine (lib/call_machine.c): it decides, the drivers run it
 * (the blocking drivers of lib/call_drive.c, the event loop through
 * lib/call.c). Its steps on a call's success path (start, launch, report,
 * step) are here, inline, so that each driver runs them without a call;
 * the decisions after a failure, a wait or a hedge are in
 * lib/call_machine.c. Never installed.
 */
#ifndef RESIL_CALL_MACHINE_H
#define RESIL_CALL_MACHINE_H

#include "call_cluster.h"
#include "call_overload.h"
#include "call_state.h"
#include "fallback_internal.h"
#include "pipeline_mock.h"
#include "retry_internal.h"
#include "value_internal.h"

/* The machine's moves until it has an action for the caller in *st:
 * attend to the attempts out (a report came, or a timer), or (advance)
 * start the next attempt of the retry stage after a backoff (waited: the
 * driver slept through it). */
void resil__call_attend(callm *c, tsrc *ts, resil_call_next *st);
void resil__call_advance(callm *c, tsrc *ts, int waited, resil_call_next *st);

/* A free slot; when every slot is taken, the oldest abandoned attempt is
 * forgotten (its answer, if it ever comes, is then refused); -1 when
 * none can be had. */
int resil__call_free_slot(callm *c);

/* Chaos decided on the attempt just admitted in slot i (1: *st is set,
 * RUN or a WAIT for the held-back attempt). */
int resil__call_chaos(callm *c, unsigned i, tsrc *ts, resil_call_next *st);

/* latency_bucket() in a few instructions: the bit length of d, capped at
 * the last bucket. */
static inline unsigned
lat_bucket(uint64_t d)
{
	unsigned b = d == 0 ? 0 : 64u - (unsigned)__builtin_clzll(d);

	return b < RESIL_LATENCY_BUCKETS - 1 ? b : RESIL_LATENCY_BUCKETS - 1;
}

/* A timed attempt's duration in the stripe's latency histogram (on the
 * stripe gs, unlocked when this thread owns it). */
static inline void
count_latency(resil_pipeline *p, unsigned gs, bool own, uint64_t dur)
{
	stripe *sp = &p->stripes[gs];

	resil__count_inc64(&sp->latency[lat_bucket(dur)], own);
	resil__count_inc64(&sp->latency_count, own);
}

HOT int
free_slot(callm *c)
{
	if (RESIL__LIKELY((c->running | c->abandoned) == 0))
		return 0;
	return resil__call_free_slot(c);
}

/* A rejected attempt: no call was made, the retry policy sees the
 * rejection as that attempt's status. */
static inline void
rejected(callm *c, resil_err status)
{
	c->last_rc = 0;
	c->last_status = status;
	c->last_outcome = RESIL_OUTCOME_FAILURE;
	c->pending = 1;
}

/* A stage below the breaker refused the attempt: its permit goes back. */
static inline void
permit_back(callm *c, resil_permit *permit, resil_fleet_permit *fp)
{
	if (c->breaker != NULL) {
		resil_breaker_release(c->breaker, permit);
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
	} else if (RESIL__UNLIKELY(c->m->fleet != NULL)) {
		resil_fleet_release(c->m->fleet, fp);
		c->breaker_state = fleet_bstate(c->m->fleet);
	}
}

/*
 * Start an attempt: a breaker permit, the rate limiter, the bulkhead.
 * Returns 1 with *st RUN, or 0 when a stage rejected it (pending set with
 * the rejection) or no slot is free.
 */
HOT int launch_tail(callm *c, int i, resil_permit *permit_,
    resil_fleet_permit *fp_, int fleet, tsrc *ts, resil_call_next *st);

/* Issue 42 (lib/call_bhwait.c): the bulkhead of a call whose bulkhead
 * waits or reserves slots by class: 1 a slot, 0 refused, 2 queued (*st
 * is the WAIT; the permits are kept in the call until the slot comes). */
int resil__call_bh_enter(callm *c, unsigned i, resil_permit *permit,
    resil_fleet_permit *fp, int fleet, tsrc *ts, resil_call_next *st);
/* The step of a call queued for a slot; its cancel; the blocking
 * driver's wait for it (through the clock's wait primitive, until the
 * slot comes or the clock reads until). */
void resil__call_bh_step(callm *c, tsrc *ts, resil_call_next *st);
void resil__call_bh_cancel(callm *c);
void resil__call_bh_block(callm *c, uint64_t until);

HOT int
launch(callm *c, tsrc *ts, resil_call_next *st)
{
	uint64_t retry_after;
	int i = free_slot(c);
	resil_permit permit;
	resil_fleet_permit fp;
	int fleet = 0; /* fp holds the fleet's permit */

	if (i < 0)
		return 0;
	/* Issue 42: the throttle stage (and a Retry-After's pause of the
	 * rate limiter), in front of the breaker: a refusal touches none. */
	if (RESIL__UNLIKELY(c->g->thr != NULL || (c->g->rl != NULL &&
	                        resil__load64(&c->g->pause_until) != 0))) {
		resil_err oe = resil__ovl_admit(c, ts);

		if (oe != RESIL_OK) {
			rejected(c, oe);
			return 0;
		}
	}
	if (c->breaker != NULL) {
		if (resil_breaker_acquire(c->breaker, &permit) != RESIL_OK) {
			c->breaker_state =
			    (int)resil_breaker_get_state(c->breaker);
			rejected(c, RESIL_E_OPEN);
			return 0;
		}
	} else if (RESIL__UNLIKELY(c->m->fleet != NULL) &&
	    c->magic != CALL_CLUSTER) { /* a cluster's: the whole call's */
		if (resil_fleet_acquire(c->m->fleet, &fp) != RESIL_OK) {
			c->breaker_state = fleet_bstate(c->m->fleet);
			rejected(c, RESIL_E_OPEN);
			return 0;
		}
		fleet = 1;
	}
	/* A fleet rate limiter stands in for the local one (settings.frl);
	 * a limiter with reservations decides by the call's class (issue
	 * 42, lib/limit_rate_cls.c). */
	if (c->g->rl != NULL &&
	    (RESIL__UNLIKELY(c->g->frl != NULL)
	            ? resil_fleet_limit_acquire(c->g->frl, 1, &retry_after)
	            : RESIL__UNLIKELY(
	                  (c->g->cfg.ratelimit.reserve_critical |
	                      c->g->cfg.ratelimit.reserve_default) != 0)
	            ? resil_ratelimit_try_acquire_prio(
	                  c->g->rl, resil__call_priority(c), 1, &retry_after)
	            : resil_ratelimit_try_acquire(
	                  c->g->rl, 1, &retry_after)) != RESIL_OK) {
		permit_back(c, &permit, &fp);
		rejected(c, RESIL_E_LIMITED);
		return 0;
	}
	/* The bulkhead: by the call's class, and it may queue the launch
	 * (issue 42, lib/call_bhwait.c: 2 is a WAIT for its slot). */
	if (c->g->bh != NULL) {
		int r = RESIL__LIKELY(c->g->cfg.bulkhead.max_wait_ns == 0 &&
		            c->g->cfg.bulkhead.reserve_critical == 0 &&
		            c->g->cfg.bulkhead.reserve_default == 0)
		    ? resil_bulkhead_try_acquire(c->g->bh) == RESIL_OK
		    : resil__call_bh_enter(c, (unsigned)i, &permit, &fp, fleet,
		          ts, st);

		if (r == 2)
			return 1;
		if (r == 0) {
			permit_back(c, &permit, &fp);
			rejected(c, RESIL_E_LIMITED);
			return 0;
		}
	}
	return launch_tail(c, i, &permit, &fp, fleet, ts, st);
}

/* launch() once its bulkhead slot is had (or there is no bulkhead): the
 * endpoint, the slot's attempt (issue 42: also after a wait for it). */
HOT int
launch_tail(callm *c, int i, resil_permit *permit_, resil_fleet_permit *fp_,
    int fleet, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	uint64_t deadline = UINT64_MAX;
	resil_permit permit = *permit_;
	resil_fleet_permit fp = *fp_;
	slot *s = &c->slots[i];

	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER)) {
		/* The endpoint: routed and balanced now. */
		resil_err e = resil__cl_pick(c, (unsigned)i, tnow(ts));

		if (e != RESIL_OK) {
			permit_back(c, &permit, &fp);
			if (c->g->bh != NULL)
				resil_bulkhead_release(c->g->bh);
			if (e == RESIL_E_UNAVAILABLE &&
			    ((p->ccfg.strategy == RESIL_CLUSTER_FORKING &&
			         c->issued > 0) ||
			        c->in_hedge)) {
				/* No distinct candidate left for another fork:
				 * no more forks, and no rejection to stand for
				 * the call (the forks' answers decide it; the
				 * last one may have come already, when the
				 * forks ran one after another); so for a
				 * hedge with no untried endpoint (issue 43). */
				c->no_more_hedges = 1;
				if (c->running == 0)
					c->pending = 1;
				return 0;
			}
			/* No candidate ends the call (never retried); a
			 * broadcast passes over a refusing endpoint, and
			 * forking has no more forks than candidates. */
			if (!(e == RESIL_E_UNAVAILABLE &&
			        (p->ccfg.strategy == RESIL_CLUSTER_BROADCAST ||
			            (p->ccfg.strategy ==
			                    RESIL_CLUSTER_FORKING &&
			                c->issued > 0)))) {
				c->cstop = 1;
				c->no_more_hedges = 1; /* no more forks */
			}
			rejected(c, e);
			return 0;
		}
		st->endpoint = &c->picks[i];
	}
	c->running |= (uint8_t)(1u << i);
	s->id = ++c->issued;
	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER) && !c->in_hedge)
		c->hedge_base = s->id; /* issue 43: hedges hedge this one */
	c->attempts++; /* a call of the user's function is made */
	s->has_permit = c->breaker != NULL ? 1
	    : RESIL__UNLIKELY(fleet) ? fleet_pack(s, &fp)
	                              : 0;
	s->has_bh = c->g->bh != NULL;
	if (c->breaker != NULL)
		s->permit = permit;
	if (c->timeout != 0 || p->hedge_max != 0 || c->m->timed_bh) {
		s->start = c->launched = tnow(ts);
		if (c->timeout != 0)
			deadline = sat_add(s->start, c->timeout);
	}
	if (c->run_on && c->run.has_deadline && c->run.deadline_at < deadline)
		deadline = c->run.deadline_at;
	if (RESIL__UNLIKELY(c->m->chaos != NULL) &&
	    resil__chaos_is_live(c->m->chaos) &&
	    resil__call_chaos(c, (unsigned)i, ts, st))
		return 1;
	next_is(st, RESIL_CALL_RUN, s->id, deadline, 0);
	return 1;
}

/*
 * launch() for the first attempt of a simple method (m->simple: no
 * limiter, bulkhead, timeout, hedging, selector, chaos, retry run), whose
 * slot 0 is free: only the breaker can refuse it, and no time is needed.
 */
HOT int
launch_first_simple(callm *c, resil_call_next *st)
{
	slot *s = &c->slots[0];

	if (c->breaker != NULL) {
		if (RESIL__UNLIKELY(resil_breaker_acquire(
		                        c->breaker, &s->permit) != RESIL_OK)) {
			c->breaker_state =
			    (int)resil_breaker_get_state(c->breaker);
			rejected(c, RESIL_E_OPEN);
			return 0;
		}
		s->has_permit = 1;
	} else {
		s->has_permit = 0;
	}
	s->has_bh = 0;
	c->running = 1;
	s->id = c->issued = 1;
	c->attempts = 1; /* a call of the user's function is made */
	next_is(st, RESIL_CALL_RUN, 1, UINT64_MAX, 0);
	return 1;
}

/*
 * Attempt s answered (rc, *value, moved in; NULL: null) at the time in
 * ts, or (late != 0) did not answer by its timeout. Record it with every
 * stage below retry. A late attempt stays abandoned: its answer, when it
 * comes, is dropped.
 */
HOT void
complete(callm *c, unsigned i, int rc, resil_value *value, int late, tsrc *ts)
{
	slot *s = &c->slots[i];
	resil_pipeline *p = c->p;
	resil_outcome outcome, bo;
	resil_err status = RESIL_OK;
	uint64_t dur = 0;

	if (c->timeout != 0) {
		uint64_t t1 = tnow(ts);
		stripe *sp = my_stripe(p);

		dur = t1 > s->start ? t1 - s->start : 0;
		resil__inc64(&sp->latency[lat_bucket(dur)]);
		resil__inc64(&sp->latency_count);
	} else if (RESIL__UNLIKELY(c->m->timed_bh)) {
		uint64_t t1 = tnow(ts); /* the adaptive bulkhead's sample */

		dur = t1 > s->start ? t1 - s->start : 0;
	}
	if (value != &c->value) {
		if (c->value.type != RESIL_VALUE_NULL) {
			/* The previous attempt's value is dropped. */
			resil_value_free(&c->value);
			vnull(&c->value);
		}
		if (value != NULL) {
			c->value = *value;
			vnull(value);
		}
	}
	if (RESIL__UNLIKELY(rc == RESIL_RC_TIMEOUT) && !late) {
		/* The user's function says it timed out: as late, but its
		 * slot is free (it has answered). */
		late = 2;
		c->declared_ns = dur; /* its message says when */
		if (c->timeout != 0 && dur <= c->timeout)
			dur = sat_add(c->timeout, 1);
	}
	/* The default classifier inline (resil_classify_default). */
	outcome = late ? RESIL_OUTCOME_FAILURE
	    : p->cls.fn == NULL
	    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
	    : resil_classify(&p->cls, rc, &c->value);
	if (RESIL__UNLIKELY(late == 2) ||
	    (c->timeout != 0 &&
	        (late || dur >= sat_add(c->timeout, p->late_edge)))) {
		/* Too late: the answer is dropped and the attempt failed. */
		resil_value_free(&c->value);
		vnull(&c->value);
		outcome = RESIL_OUTCOME_FAILURE;
		status = RESIL_E_TIMEOUT;
		resil__inc64(&my_stripe(p)->timeouts);
	}
	/* Issue 42: the throttle stage's report, and the server's pushback
	 * (bo: what the breaker and the bulkhead record). */
	bo = outcome;
	if (RESIL__UNLIKELY(resil__ovl_wants(c, rc)))
		resil__ovl_complete(c, i, rc, late, &outcome, &status, &bo, ts);
	if (s->has_permit == 1) {
		if (c->timeout != 0)
			resil_breaker_record_duration(
			    c->breaker, &s->permit, bo, dur);
		else
			resil_breaker_record(c->breaker, &s->permit, bo);
		c->breaker_state = (int)resil_breaker_get_state(c->breaker);
	} else if (RESIL__UNLIKELY(s->has_permit != 0)) {
		fleet_done(c, s, 0, bo);
	}
	if (s->has_bh)
		resil_bulkhead_complete(c->g->bh, bo, dur);
	s->has_permit = s->has_bh = 0;
	c->running &= (uint8_t) ~(1u << i);
	if (late == 1)
		c->abandoned |= (uint8_t)(1u << i);
	c->last_rc = late == 1 ? 0 : rc;
	c->last_status = status;
	c->last_outcome = outcome;
	if (outcome == RESIL_OUTCOME_FAILURE) {
		c->real_err = status != RESIL_OK ? status : RESIL_E_CALL;
		c->real_rc = late == 1 ? 0 : rc;
	}
	c->pending = 1;
	if (outcome != RESIL_OUTCOME_FAILURE && p->hedge_max != 0) {
		/* The first answer that is not a failure wins. */
		c->winner = 1;
		if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER) &&
		    resil__cl_hedging(p))
			resil__cl_hedge_won(c, i, tnow(ts));
		abandon_running(c);
	}
}

/* A call's state before its first attempt. */
HOT void
minit(callm *c, resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_result *out)
{
	c->magic = CALL_LIVE;
	c->p = p;
	c->g = g;
	c->gref = 0;
	c->gst = (uint8_t)gs;
	c->m = m;
	c->args = args;
	c->out = out;
	c->has_mock = 0;
	c->run_on = 0;
	c->pending = 0;
	c->winner = 0;
	c->hedges = 0;
	c->no_more_hedges = 0;
	c->issued = 0;
	c->attempts = 0;
	c->wait_until = 0;
	c->breaker_state = -1;
	c->real_err = RESIL_OK;
	c->real_rc = 0;
	c->running = 0;
	c->abandoned = 0;
	c->delayed = 0;
	c->bh_wait = 0; /* issue 42 */
	c->prio_set = 0;
	c->coal = 0; /* issue 43 */
	vnull(&c->value);
	c->phase = P_ATTEMPT;
	c->breaker = m->run_breaker;
	c->retry = m->run_retry;
	c->timeout = m->timeout;
}

/* The call's first attempt (after the mock stage, the read-through and
 * coalescing): the retry run or the cluster begun, then launched. */
HOT void
mlaunch(callm *c, const method *m, tsrc *ts, resil_call_next *st)
{
	if (m->start != START_NONE) {
		if (RESIL__UNLIKELY(m->start == START_CLUSTER)) {
			if (!resil__cl_start(c, m, *ts)) {
				rejected(c, RESIL_E_OPEN);
				resil__call_attend(c, ts, st);
				return;
			}
		} else {
			c->run_on = 1;
			run_begin(c, ts);
		}
	}
	if (!(m->simple && !(m->simple & SIMPLE_TIMED) &&
	            (m->chaos == NULL || !resil__chaos_is_live(m->chaos))
	            ? launch_first_simple(c, st)
	            : launch(c, ts, st)))
		resil__call_attend(c, ts, st);
}

/* Start: the mock stage, then attempt 1. */
HOT resil_err
mstart(callm *c, resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_result *out, tsrc *ts, resil_call_next *st)
{
	resil_mock *mock;

	resil__result_clear(out);
	resil__inc64(&p->stripes[gs].calls);
	minit(c, p, g, gs, m, args, out);

	/* The mock stage: force: answers and nothing below runs. The mock
	 * is held (resil__mock_hold) while it is read: set_mock may replace
	 * it. */
	if (resil__loadptr((void *const *)&g->mock) != NULL) {
		const resil_mock_spec *spec;
		unsigned tok;
		int forced = 0;

		mock = resil__mock_hold(p, g, &tok);
		if (mock != NULL &&
		    resil_mock_lookup(mock, args->method, &spec) == RESIL_OK &&
		    spec->action != RESIL_MOCK_NONE) {
			c->has_mock = 1;
			if (spec->mode == RESIL_MOCK_FORCE) {
				forced = 1;
				if (RESIL__UNLIKELY(p->sel != NULL) &&
				    resil__mock_from_endpoint(
				        p, args, NULL, out))
					;
				else if (resil_mock_invoke(mock, args, NULL,
				             out) == RESIL_E_NOMEM) {
					resil_result_init(out);
					out->err = RESIL_E_NOMEM;
				}
			}
		}
		mock_release(p, tok);
		if (forced) {
			conclude_with(c, RESIL_STAGE_MOCK, ts, st);
			return RESIL_OK;
		}
	}
	/* Read-through (issue 43): a value fresh enough answers, no call. */
	if (RESIL__UNLIKELY(m->fresh != 0) && g->cache != NULL &&
	    resil__cache_fresh(g->cache, args, m->fresh, out)) {
		conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
		return RESIL_OK;
	}
	/* Coalescing (issue 43, lib/call_coalesce.c): a follower waits for
	 * the leader of its key. */
	if (RESIL__UNLIKELY(m->coal != NULL) && resil__coal_start(c, ts, st))
		return RESIL_OK;
	mlaunch(c, m, ts, st);
	return RESIL_OK;
}

/* A call of m may take the machine's first step without it (want
 * SIMPLE_INLINE: the blocking driver's inline step; SIMPLE_PHASE: the
 * call machine's simple phase): m's simple has that bit, no mock that may
 * force (a fail: mock acts only after a failure: resil__call_mock_mark()
 * then), and its chaos (if any) switched off (issue 28: a flag test). */
static inline int
inline_first_ok(const settings *g, const method *m, int want)
{
	return (m->simple & want) &&
	    resil__load64(&g->mock_forces) == 0 &&
	    (m->chaos == NULL || !resil__chaos_is_live(m->chaos));
}

/* A call that skipped the mock stage (its mock may not force) leaves
 * the simple path: c->has_mock as mstart() would have set it (the
 * fallback chain runs for a failure when the mock has a spec for it). */
void resil__call_mock_mark_slow(callm *c);

static inline void
mock_mark(callm *c)
{
	/* has_mock only decides whether the chain runs: with a cache or a
	 * handler it runs anyway (recover_failure()). */
	if (RESIL__UNLIKELY(
	        resil__loadptr((void *const *)&c->g->mock) != NULL) &&
	    c->g->cache == NULL && c->p->handlers == 0)
		resil__call_mock_mark_slow(c);
}

/* The slot of attempt id (running or abandoned), or -1. */
static inline int
find_slot(const callm *c, uint32_t id)
{
	unsigned used = (unsigned)(c->running | c->abandoned), i;

	if (id == 0)
		return -1;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++)
		if ((used & (1u << i)) && c->slots[i].id == id)
			return (int)i;
	return -1;
}

HOT resil_err
mreport_k(callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts, int cl)
{
	int i;
	uint8_t bit;

	/* The common case first: the one attempt out answers. */
	if (RESIL__LIKELY(c->running == 1 && c->slots[0].id == id))
		i = 0;
	else if ((i = find_slot(c, id)) < 0)
		return RESIL_E_MISUSE;
	bit = (uint8_t)(1u << i);
	if (c->abandoned & bit) {
		/* An answer that no longer matters: accepted and dropped;
		 * a hedge that lost still tells its endpoint (issue 43). */
		if (RESIL__UNLIKELY(c->p->sel != NULL))
			resil__cl_late(c, (unsigned)i, rc, value, tnow(ts));
		if (value != NULL) {
			resil_value_free(value);
			vnull(value);
		}
		c->abandoned &= (uint8_t)~bit;
		return RESIL_OK;
	}
	if (c->magic != (cl ? CALL_CLUSTER : CALL_LIVE))
		return RESIL_E_MISUSE;
	complete(c, (unsigned)i, rc, value, 0, ts);
	if (cl)
		resil__cl_done(c, (unsigned)i, c->last_outcome, tnow(ts));
	return RESIL_OK;
}

/* A report to a call without a selector (or one that is over). */
HOT resil_err
mreport(callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts)
{
	return mreport_k(c, id, rc, value, ts, 0);
}

/* A report to a live cluster call: the selector learns it too. */
resil_err resil__call_report_cl(
    callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts);

/* Either, for the drivers. */
resil_err resil__call_report_any(
    callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts);

/* The first attempt of a call with no retry run begun (no policy, or its
 * fast path) succeeded: the answer is live, and the policy has only a
 * count to keep. */
HOT void
live_success(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_result *out = c->out;

	if (c->retry != NULL)
		resil__retry_count_first_success(c->retry);
	out->rc = c->last_rc;
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->source = RESIL_SOURCE_LIVE;
	if (c->g->cache != NULL)
		resil_fallback_record(c->g->fb, c->args, &c->value);
	out->err = RESIL_OK;
	out->value = c->value; /* moved */
	conclude_with(c, RESIL_STAGE_CALL, ts, st);
}

HOT void
mstep(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	if (RESIL__LIKELY(c->pending && c->running == 0 &&
	        c->phase == P_ATTEMPT && !c->run_on &&
	        c->last_status == RESIL_OK &&
	        c->last_outcome == RESIL_OUTCOME_SUCCESS &&
	        c->p->hedge_max == 0)) {
		live_success(c, ts, st);
		return;
	}
	if (RESIL__UNLIKELY(c->bh_wait)) /* issue 42: queued for a slot */
		resil__call_bh_step(c, ts, st);
	else if (RESIL__UNLIKELY(c->coal == RESIL__COAL_FOLLOWER))
		resil__coal_step(c, ts, st); /* issue 43 */
	else if (c->phase == P_WAIT)
		resil__call_advance(c, ts, waited, st);
	else
		resil__call_attend(c, ts, st);
}

#endif /* RESIL_CALL_MACHINE_H */

/*
 * The call machine's decisions (lib/call_machine.h): after an attempt,
 * answer or retry after a backoff; after a backoff, the next attempt;
 * while attempts are out, hedges and timeouts. The answer comes from the
 * live call or the fallback chain.
 */
#include "call_machine.h"

#include "call_internal.h"

int
resil__call_free_slot(callm *c)
{
	unsigned used = (unsigned)(c->running | c->abandoned), i;
	int old = -1;

	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		if (!(used & (1u << i)))
			return (int)i;
		if ((c->abandoned & (1u << i)) &&
		    (old < 0 || c->slots[i].id < c->slots[old].id))
			old = (int)i;
	}
	if (old >= 0) {
		if (c->magic == CALL_CLUSTER && (c->has_pick & (1u << old))) {
			/* A lost hedge's pick (issue 43): its answer will
			 * not be known. */
			resil_selector_release(c->sel, &c->picks[old]);
			khost_end(c, (unsigned)old, RESIL_OUTCOME_IGNORED);
			c->has_pick &= (uint8_t) ~(1u << old);
		}
		c->abandoned &= (uint8_t) ~(1u << old);
	}
	return old;
}

/* The deadline a RUN of slot s carries (its timeout, the retry
 * deadline). */
static uint64_t
run_deadline(const callm *c, const slot *s)
{
	uint64_t d =
	    c->timeout != 0 ? sat_add(s->start, c->timeout) : UINT64_MAX;

	if (c->run_on && c->run.has_deadline && c->run.deadline_at < d)
		d = c->run.deadline_at;
	return d;
}

/* The earliest time something is due: a timeout of a running attempt, a
 * hedge, a held-back attempt. */
static uint64_t
wake_of(const callm *c)
{
	const resil_pipeline *p = c->p;
	uint64_t wake = UINT64_MAX;
	unsigned i;

	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		const slot *s = &c->slots[i];

		if ((c->running & (1u << i)) && c->timeout != 0) {
			uint64_t due = sat_add(
			    sat_add(s->start, c->timeout), p->late_edge);

			if (due < wake)
				wake = due;
		}
		if ((c->delayed & (1u << i)) && c->chaos_at[i] < wake)
			wake = c->chaos_at[i];
	}
	if (p->hedge_max != 0 && !c->no_more_hedges &&
	    c->hedges < p->hedge_max) {
		uint64_t due = sat_add(c->launched, p->hedge_delay);

		if (due < wake)
			wake = due;
	}
	return wake;
}

int
resil__call_chaos(callm *c, unsigned i, tsrc *ts, resil_call_next *st)
{
	resil_chaos_action act;
	uint64_t now = tnow(ts);
	unsigned kinds = resil_chaos_decide(c->m->chaos, now, &act);
	slot *s = &c->slots[i];

	if (kinds == 0)
		return 0;
	if (kinds & RESIL_CHAOS_BEHAVIOUR)
		act.behaviour(act.behaviour_ctx, now);
	s->chaos = (kinds & RESIL_CHAOS_FAULT) ? CH_FAULT
	    : (kinds & RESIL_CHAOS_OUTCOME)    ? CH_OUTCOME
	                                       : CH_RUN;
	if (s->chaos == CH_RUN && !(kinds & RESIL_CHAOS_LATENCY))
		return 0; /* a behaviour only: the attempt runs now */
	/* Held back until its time (now for a fault or an outcome without
	 * latency): the next step answers it, or hands it out. Its timeout
	 * runs from now, its admission. */
	s->start = c->launched = now;
	c->chaos_rc = act.rc;
	c->chaos_value = act.value;
	c->chaos_at[i] = (kinds & RESIL_CHAOS_LATENCY) ? act.until : now;
	c->delayed |= (uint8_t)(1u << i);
	next_is(st, RESIL_CALL_WAIT, 0, 0, wake_of(c));
	st->endpoint = NULL;
	return 1;
}

/* The held-back attempts that are due at now: a fault or an outcome is
 * answered here, an attempt whose latency is over is handed out (1, *st
 * RUN: one at a time). */
static int
chaos_due(callm *c, tsrc *ts, resil_call_next *st)
{
	unsigned i;

	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
		uint8_t bit = (uint8_t)(1u << i);
		slot *s = &c->slots[i];
		resil_value v;

		if (!(c->delayed & bit) || c->chaos_at[i] > tnow(ts))
			continue;
		c->delayed &= (uint8_t)~bit;
		if (s->chaos == CH_RUN) {
			next_is(
			    st, RESIL_CALL_RUN, s->id, run_deadline(c, s), 0);
			if (c->magic == CALL_CLUSTER)
				st->endpoint = &c->picks[i];
			return 1;
		}
		vnull(&v);
		if (s->chaos == CH_OUTCOME && c->chaos_value != NULL &&
		    resil_value_copy(&v, c->chaos_value, NULL) != RESIL_OK)
			vnull(&v); /* out of memory: a null outcome */
		complete(
		    c, i, s->chaos == CH_FAULT ? c->chaos_rc : 0, &v, 0, ts);
		if (c->magic == CALL_CLUSTER)
			resil__cl_done(c, i, c->last_outcome, tnow(ts));
	}
	return 0;
}

/* Failsafe or failback over the one implicit endpoint (no selector):
 * a failure of the call (not a rejection: breaker open, limited) is
 * swallowed, a null value now; failback queues the call for
 * resil_pipeline_failback_poll(). 1 when it answered. */
static int
one_endpoint(callm *c, int rc, resil_err status, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;
	resil_cluster_strategy sg = p->ccfg.strategy;
	resil_request req;

	if (sg == RESIL_CLUSTER_FAILFAST || status == RESIL_E_OPEN ||
	    status == RESIL_E_LIMITED)
		return 0;
	if (sg == RESIL_CLUSTER_FAILBACK && p->ccfg.failback_retries > 0) {
		int q;

		memset(&req, 0, sizeof(req));
		req.method = c->args->method;
		q = resil__cluster_enqueue(
		    p->fbq, &req, c->args, "", 0, rc, tnow(ts));
		if (q < 0)
			return 0; /* out of memory: the failure goes on */
		if (q == 0)
			resil__inc64(&my_stripe(p)->failback_dropped);
	}
	if (sg == RESIL_CLUSTER_FAILSAFE)
		resil__cluster_event(p, RESIL_CLUSTER_EVENT_SWALLOWED,
		    c->args->method, NULL, rc, tnow(ts));
	resil_result_init(out);
	out->err = RESIL_OK;
	out->rc = rc;
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->source = RESIL_SOURCE_LIVE;
	out->last_failure = c->real_err;
	out->last_failure_rc = c->real_rc;
	conclude_with(c, RESIL_STAGE_CALL, ts, st);
	return 1;
}

/* The retry stage is over (rr, and the last attempt's rc, status,
 * outcome): build the answer, live or from the fallback chain. */
static void
conclude(callm *c, resil_err rr, int rc, resil_err status,
    resil_outcome outcome, tsrc *ts, resil_call_next *st)
{
	resil_err err;

	abandon_running(c);
	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER)) {
		resil__cl_conclude(c, rr, rc, status, outcome, ts, st);
		return;
	}
	if (rr == RESIL_OK && status == RESIL_OK &&
	    outcome != RESIL_OUTCOME_FAILURE) {
		conclude_live(c, rc, outcome, ts, st);
		return;
	}

	/* A non-business failure: the fallback chain answers or passes. */
	resil_value_free(&c->value);
	if (RESIL__UNLIKELY(c->p->one_ep) &&
	    one_endpoint(c, rc, status, ts, st))
		return;
	err = status != RESIL_OK              ? status
	    : rr == RESIL_E_RETRIES_EXHAUSTED ? RESIL_E_RETRIES_EXHAUSTED
	                                      : RESIL_E_CALL;
	if (recover_failure(c, err, rc) && RESIL__UNLIKELY(c->p->one_ep) &&
	    c->p->ccfg.strategy == RESIL_CLUSTER_FAILFAST)
		resil__cl_one_failfast(c, err, rc); /* Dubbo's words */
	conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
}

/* End of the retry run: its report decides the answer. */
static void
conclude_run(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_retry_result res;
	resil_err rr = resil__retry_end(c->retry, &c->run, &res);

	conclude(c, rr, res.rc, res.status, res.outcome, ts, st);
}

/*
 * The retry attempt is over: its (last) attempt's answer is in c->last_*.
 * Decide: answer, or retry after a backoff.
 */
static int
decide_core(callm *c, tsrc *ts, resil_call_next *st)
{
	if (RESIL__UNLIKELY(c->magic == CALL_CLUSTER)) {
		int r = resil__cl_decide(c, ts, st);

		/* The strategy may want more attempts: each is launched here,
		 * and a refused one goes back to the strategy. */
		while (r == RESIL__CL_LAUNCH) {
			resil_err ls = c->last_status;
			int lrc = c->last_rc;

			if (launch(c, ts, st))
				return 0;
			r = resil__cl_refused(c, ls, lrc, ts, st);
		}
		if (r == RESIL__CL_DONE)
			return 0;
	}
	c->pending = 0;
	c->winner = 0;
	c->hedges = 0;
	c->no_more_hedges = 0;
	if (c->retry == NULL) {
		conclude(c, c->last_status, c->last_rc, c->last_status,
		    c->last_outcome, ts, st);
		return 0;
	}
	if (!c->run_on) {
		/* The fast path: attempt 1 ran before the run was begun. A
		 * success then needs nothing from the policy but a count. */
		if (c->last_status == RESIL_OK &&
		    c->last_outcome == RESIL_OUTCOME_SUCCESS) {
			resil__retry_count_first_success(c->retry);
			conclude(c, RESIL_OK, c->last_rc, RESIL_OK,
			    RESIL_OUTCOME_SUCCESS, ts, st);
			return 0;
		}
		c->run_on = 1;
		run_begin(c, ts);
	}
	if (!resil__retry_judge(c->retry, &c->run, c->last_rc, c->last_status,
	        &c->value, c->run.timed ? tnow(ts) : 0) ||
	    !resil__retry_plan(c->retry, &c->run, tnow(ts))) {
		conclude_run(c, ts, st);
		return 0;
	}
	c->wait_until = sat_add(c->run.now, c->run.wait);
	c->phase = P_WAIT;
	return 1;
}

/* The kind of a failure for hedge.on (RESIL_HEDGE_ON_*). */
static unsigned
hedge_kind(resil_err status)
{
	if (status == RESIL_E_TIMEOUT)
		return RESIL_HEDGE_ON_TIMEOUT;
	if (status == RESIL_E_OPEN || status == RESIL_E_LIMITED ||
	    status == RESIL_E_THROTTLED)
		return RESIL_HEDGE_ON_REJECTED;
	return RESIL_HEDGE_ON_FAILURE;
}

/* What the machine does next, for the loop in run_machine(). */
enum { M_ATTEND, M_DECIDE, M_ADVANCE, M_STOP };

/*
 * After a backoff: start the next attempt of the retry stage. A
 * rejection is decided at once (M_DECIDE), or, with hedging, attended
 * (M_ATTEND); M_STOP with *st RUN, WAIT or DONE.
 */
static int
advance_once(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	if (!waited && tnow(ts) < c->wait_until) {
		next_is(st, RESIL_CALL_WAIT, 0, 0, c->wait_until);
		return M_STOP;
	}
	if (!resil__retry_resume(c->retry, &c->run, tnow(ts))) {
		conclude_run(c, ts, st);
		return M_STOP;
	}
	c->phase = P_ATTEMPT;
	if (launch(c, ts, st))
		return M_STOP;
	/* Rejected; with hedging a rejection may still be hedged. */
	return c->p->hedge_max != 0 ? M_ATTEND : M_DECIDE;
}

/*
 * Attempts are out, or one has answered: decide (M_DECIDE), hedge, fail
 * the late ones, or say how long to wait (M_STOP with *st set).
 */
static int
attend_once(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	uint64_t wake = UINT64_MAX;
	unsigned i;

	/* The common case: the one attempt has answered. */
	if (RESIL__LIKELY(c->pending && c->running == 0 && p->hedge_max == 0))
		return M_DECIDE;
	if (c->timeout != 0 && c->running != 0) {
		for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++) {
			slot *s = &c->slots[i];
			uint64_t due;

			if (!(c->running & (1u << i)))
				continue;
			/* Late when its duration passes the timeout. */
			due = sat_add(
			    sat_add(s->start, c->timeout), p->late_edge);
			if (tnow(ts) >= due) {
				uint8_t held = c->delayed & (1u << i);

				complete(c, i, 0, NULL, 1, ts);
				if (RESIL__UNLIKELY(held)) {
					/* Held back by chaos past its timeout:
					 * never handed out, no answer to come.
					 */
					c->delayed &= (uint8_t)~held;
					c->abandoned &= (uint8_t)~held;
				}
				if (c->magic == CALL_CLUSTER)
					resil__cl_done(
					    c, i, c->last_outcome, tnow(ts));
			}
		}
	}
	if (RESIL__UNLIKELY(c->delayed) && chaos_due(c, ts, st))
		return M_STOP;
	if (RESIL__UNLIKELY(p->hedge_fatal != 0) && c->pending &&
	    c->last_outcome == RESIL_OUTCOME_FAILURE && !c->winner &&
	    (p->hedge_fatal & hedge_kind(c->last_status))) {
		/* A fatal failure (hedge.on, issue 43): no more hedges, the
		 * others are dropped, the failure is decided on now. */
		c->no_more_hedges = 1;
		abandon_running(c);
		return M_DECIDE;
	}
	if (c->winner ||
	    (c->running == 0 && c->pending &&
	        (p->hedge_max == 0 || c->no_more_hedges ||
	            c->hedges >= p->hedge_max)))
		return M_DECIDE;
	if (p->hedge_max != 0 && !c->no_more_hedges &&
	    c->hedges < p->hedge_max &&
	    (c->pending || tnow(ts) >= sat_add(c->launched, p->hedge_delay))) {
		/* A failure, or no answer within the hedge delay: another
		 * attempt, paid for from the retry budget. A refusal stops
		 * hedging; a failure that was pending stays pending, for the
		 * decision (issue 25.1: dropping it left nothing to wait
		 * for). */
		if (c->retry != NULL &&
		    !resil__retry_spend(c->retry, tnow(ts))) {
			c->no_more_hedges = 1;
			return M_ATTEND;
		}
		c->pending = 0;
		c->hedges++;
		c->in_hedge = c->magic == CALL_CLUSTER && resil__cl_hedging(p);
		if (launch(c, ts, st)) {
			if (RESIL__UNLIKELY(c->in_hedge))
				resil__cl_hedge_event(c,
				    RESIL_CLUSTER_EVENT_HEDGE_STARTED,
				    st->endpoint, tnow(ts));
			c->in_hedge = 0;
			return M_STOP;
		}
		c->in_hedge = 0;
		return M_ATTEND;
	}
	c->pending = 0;
	wake = wake_of(c);
	if (RESIL__UNLIKELY(c->running == 0 && wake == UINT64_MAX))
		/* Nothing out and no timer: nothing can move the call on
		 * but a decision on what it has. */
		return M_DECIDE;
	next_is(st, RESIL_CALL_WAIT, 0, 0, wake);
	return M_STOP;
}

/*
 * The machine's moves until it has an action for the caller: a loop, not
 * a recursion (with retry_on_open, a zero backoff and an open breaker,
 * each of up to RESIL_RETRY_MAX_ATTEMPTS attempts is rejected at once,
 * and each hedge that cannot launch is attended again).
 */
static void
run_machine(callm *c, tsrc *ts, int state, int waited, resil_call_next *st)
{
	for (;;) {
		switch (state) {
		case M_ATTEND:
			state = attend_once(c, ts, st);
			break;
		case M_DECIDE:
			state = decide_core(c, ts, st) ? M_ADVANCE : M_STOP;
			break;
		case M_ADVANCE:
			state = advance_once(c, ts, waited, st);
			waited = 0;
			break;
		default:
			return;
		}
	}
}

/* The retry stage waited (waited: the driver slept through the backoff). */
void
resil__call_advance(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	run_machine(c, ts, M_ADVANCE, waited, st);
}

void
resil__call_attend(callm *c, tsrc *ts, resil_call_next *st)
{
	run_machine(c, ts, M_ATTEND, 0, st);
}

resil_err
resil__call_report_cl(
    callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts)
{
	return mreport_k(c, id, rc, value, ts, 1);
}

resil_err
resil__call_report_any(
    callm *c, uint32_t id, int rc, resil_value *value, tsrc *ts)
{
	return c->magic == CALL_CLUSTER
	    ? resil__call_report_cl(c, id, rc, value, ts)
	    : mreport(c, id, rc, value, ts);
}

void
resil__call_mock_mark_slow(callm *c)
{
	const resil_mock_spec *spec;
	resil_mock *mock;
	unsigned tok;

	mock = resil__mock_hold(c->p, c->g, &tok);
	if (mock == NULL)
		return;
	if (resil_mock_lookup(mock, c->args->method, &spec) == RESIL_OK &&
	    spec->action != RESIL_MOCK_NONE)
		c->has_mock = 1;
	mock_release(c->p, tok);
}

/* ---- issue 42: the step of a launch queued for a bulkhead slot
 * (lib/call_bhwait.c queued it) ---- */

void
resil__call_bh_step(callm *c, tsrc *ts, resil_call_next *st)
{
	int granted = 0;
	resil_err err = resil_bulkhead_wait_poll(
	    c->g->bh, &c->bhw, tnow(ts), &granted);

	st->endpoint = NULL;
	if (err == RESIL_OK && !granted) {
		next_is(st, RESIL_CALL_WAIT, 0, 0,
		    resil_bulkhead_wait_deadline(&c->bhw));
		return;
	}
	c->bh_wait = 0;
	if (err == RESIL_OK) {
		if (!launch_tail(c, c->bh_slot, &c->bh_permit, &c->bh_fp,
		        c->bh_fleet, ts, st))
			resil__call_attend(c, ts, st);
		return;
	}
	/* The wait ended with no slot: a refusal, as a full bulkhead's. */
	permit_back(c, &c->bh_permit, &c->bh_fp);
	rejected(c, RESIL_E_LIMITED);
	resil__call_attend(c, ts, st);
}

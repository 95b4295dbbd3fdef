/*
 * resil call: the call machine's public face (include/resil/call.h,
 * docs/async.md). The caller's event loop drives the machine of
 * lib/call_machine.h with its own clock readings.
 */
#include <resil/call.h>

#include "call_keyed.h"
#include "call_machine.h"

/* The simple phase of a timed call (SIMPLE_TIMED): CALL_SIMPLE's, with
 * slot 0's start and its report answered by simple_answered_timed(). A
 * magic of its own keeps the untimed report's test one compare. */
#define CALL_SIMPLE_T (CALL_TAG | 0x85u)
#define IS_SIMPLE(magic) ((magic) == CALL_SIMPLE || (magic) == CALL_SIMPLE_T)

#if defined(__GNUC__)
#define CALL_NOINLINE __attribute__((noinline))
#define CALL_INLINE __attribute__((always_inline)) inline
#else
#define CALL_NOINLINE
#define CALL_INLINE inline
#endif

/* A call of the machine's API that is over drops its settings (a late
 * report after DONE touches none of them). */
HOT void
call_settle(callm *c)
{
	if (RESIL__UNLIKELY(c->gref) &&
	    (c->magic == CALL_DONE || c->magic == CALL_CANCELLED)) {
		/* Issue 41: the call's outcome into its keys, once. */
		if (RESIL__UNLIKELY(c->p->keyed != NULL) && c->kheld.held)
			resil__keyed_machine_end(c->p, &c->kheld,
			    c->magic == CALL_CANCELLED, c->out);
		if (RESIL__UNLIKELY(c->coal != 0)) /* issue 43: a leader */
			resil__coal_finish(c);
		c->gref = 0;
		conf_drop(c->g);
	}
}

/*
 * The simple phase (issue 29). A call of a method the blocking driver
 * would run inline (inline_first_ok(), the default classifier for the
 * report) starts without the machine's state: its permit by the
 * breaker's fast path in slot 0, the few fields it needs, attempt 1
 * handed out (CALL_SIMPLE). Its report of a success records the breaker
 * and answers *out in place (CALL_ANSWERED); the step that follows counts
 * the retry policy's first success, fills the cache, drops the settings
 * and says DONE, as live_success() would. Anything else (a failure, a
 * step or a cancel before the report, a report of another attempt)
 * first makes the machine's state what its own first launch would have
 * left (to_machine()), then goes on in the machine.
 */
/* The simple phase's start: c's call fields are written; false when the
 * breaker's fast path does not grant (the machine decides then). own:
 * gs is this thread's own stripe (its call count unlocked). */
static inline int
simple_start(callm *c, resil_pipeline *p, unsigned gs, bool own,
    const method *m, resil_call_next *step)
{
	if (m->run_breaker != NULL &&
	    !resil__breaker_grant_fast(
	        m->run_bf.acq_word, &c->slots[0].permit))
		return 0;
	resil__count_inc64(&p->stripes[gs].calls, own);
	c->magic = CALL_SIMPLE;
	c->running = 1;
	c->abandoned = 0;
	c->delayed = 0;
	*step = (resil_call_next) {
		.action = RESIL_CALL_RUN, .attempt = 1, .deadline = UINT64_MAX
	};
	return 1;
}

/* The same for a timed method (SIMPLE_PHASE_T): slot 0's start is now,
 * the attempt's deadline now + timeout. Its acq_word is the state word
 * whatever the breaker's timing: it measures its duration itself
 * (decide_start()). */
static int
simple_start_timed(callm *c, resil_pipeline *p, unsigned gs, bool own,
    const method *m, uint64_t now, resil_call_next *step)
{
	if (!simple_start(c, p, gs, own, m, step))
		return 0;
	c->magic = CALL_SIMPLE_T;
	c->slots[0].start = now;
	step->deadline = sat_add(now, m->timeout);
	return 1;
}

/* The simple phase's call as the machine's after launch_first_simple(). */
static CALL_NOINLINE void
to_machine(callm *c)
{
	slot *s = &c->slots[0];

	c->inv = NULL; /* issue 42: the simple phase kept none */
	minit(c, c->p, c->g, c->gst, c->m, c->args, c->out);
	mock_mark(c);
	c->gref = 1;
	resil__result_clear(c->out);
	s->has_permit = c->breaker != NULL;
	s->has_bh = 0;
	s->chaos = 0;
	c->launched = s->start; /* a timed call's (simple_start()) */
	c->running = 1;
	s->id = c->issued = 1;
	c->attempts = 1;
}

/* Attempt 1's success is the answer: its value moved in, the breaker's
 * state bstate. */
static inline void
simple_answer(callm *c, resil_result *out, resil_value *value, int bstate)
{
	if (value != NULL) {
		out->value = *value;            /* moved */
		value->type = RESIL_VALUE_NULL; /* left null: owns nothing */
	} else {
		vnull(&out->value);
	}
	resil__result_answered(out, 1, bstate);
	out->rc = 0;
	c->running = 0;
	c->magic = CALL_ANSWERED;
}

/* Attempt 1 of a simple-phase call answered a success (rc 0), the
 * breaker's fast path not taking it: its record says. */
static CALL_NOINLINE void
simple_answered_slow(callm *c, resil_value *value, uint64_t dur)
{
	const method *m = c->m;
	int bstate = -1;

	if (m->run_breaker != NULL) {
		resil__tls_method = c->args->method;
		if (m->simple & SIMPLE_TIMED)
			resil_breaker_record_duration(m->run_breaker,
			    &c->slots[0].permit, RESIL_OUTCOME_SUCCESS, dur);
		else
			resil_breaker_record(m->run_breaker,
			    &c->slots[0].permit, RESIL_OUTCOME_SUCCESS);
		bstate = (int)resil_breaker_get_state(m->run_breaker);
		resil__tls_method = NULL;
	}
	simple_answer(c, c->out, value, bstate);
}

/* Attempt 1 of a simple-phase call answered a success (rc 0). Slot 0's
 * permit is a fast grant (simple_start()); once answered the call never
 * reads it again. No call that returns: the common report saves no
 * registers. */
static inline void
simple_answered(callm *c, resil_value *value)
{
	const method *m = c->m;
	int bstate = -1;

	if (m->run_breaker != NULL) {
		if (RESIL__UNLIKELY(
		        !resil__breaker_granted_success_fast(m->run_bf.st,
		            m->run_bf.streak, c->slots[0].permit.start))) {
			simple_answered_slow(c, value, 0);
			return;
		}
		bstate = (int)RESIL_BREAKER_CLOSED;
	}
	simple_answer(c, c->out, value, bstate);
}

static CALL_NOINLINE resil_err machine_report(
    callm *c, uint32_t attempt, int rc, resil_value *value, uint64_t now);

/* The same for a timed call (SIMPLE_TIMED), answered at now: late (its
 * duration reaches timeout + late_edge, as complete() decides) it goes to
 * the machine; in time, its duration goes to the latency histogram and
 * to the breaker, whose fast path takes a success that is not slow. */
static CALL_NOINLINE resil_err
simple_answered_timed(callm *c, resil_value *value, uint64_t now)
{
	const method *m = c->m;
	uint64_t start = c->slots[0].start;
	uint64_t dur = now > start ? now - start : 0;
	int bstate = -1;

	if (RESIL__UNLIKELY(dur >= sat_add(m->timeout, c->p->late_edge))) {
		to_machine(c); /* the machine's complete() times it out */
		return machine_report(c, 1, 0, value, now);
	}
	count_latency(c->p, c->gst, false, dur);
	if (m->run_breaker != NULL) {
		if (RESIL__UNLIKELY(!resil__breaker_timed_success_fast(
		        &m->run_bf, c->slots[0].permit.start, dur))) {
			simple_answered_slow(c, value, dur);
			return RESIL_OK;
		}
		bstate = (int)RESIL_BREAKER_CLOSED;
	}
	simple_answer(c, c->out, value, bstate);
	return RESIL_OK;
}

/* The step after a simple-phase success: the call is over. */
static inline void
simple_over(callm *c, resil_call_next *step)
{
	c->phase = P_DONE;
	c->magic = CALL_DONE;
	c->gref = 0;
	*step = (resil_call_next) { .action = RESIL_CALL_DONE };
}

/* The same on a thread that does not own its stripe, or when the cache
 * stores the success first: the counts locked where they must be. */
static CALL_NOINLINE void
simple_done_any(callm *c, resil_call_next *step)
{
	settings *g = c->g;

	if (c->m->run_first != NULL)
		resil__retry_count_first(c->m->run_first);
	if (g->cache != NULL) {
		resil__tls_method = c->args->method;
		resil_fallback_record(g->fb, c->args, &c->out->value);
		resil__tls_method = NULL;
	}
	simple_over(c, step);
	conf_drop(g);
}

/* The retry policy's first success and the drop of the settings are
 * counted on the stripe of the thread that steps (it may not be the one
 * that started): unlocked on one it owns (lib/internal.h). */
static inline void
simple_done(callm *c, resil_call_next *step)
{
	const method *m = c->m;
	settings *g = c->g;
	unsigned w = resil__stripe_mine, s = w & (NSTRIPES - 1);

	if (RESIL__UNLIKELY(
	        (w & RESIL__STRIPE_OWNED) == 0 || g->cache != NULL)) {
		simple_done_any(c, step);
		return;
	}
	resil__retry_count_first_own(m->run_first_own, s);
	simple_over(c, step);
	conf_drop_own(g, s);
}

/* The machine's start, for a call the simple phase does not take (c's
 * call fields written, its settings held). */
static CALL_NOINLINE resil_err
machine_start(callm *c, uint64_t now, resil_call_next *step)
{
	tsrc ts = tgiven(now);
	settings *g = c->g;
	unsigned gs = c->gst;

	resil__tls_method = c->args->method;
	step->endpoint = NULL;
	c->coal_blk = 0; /* issue 43: a follower waits for its hook */
	mstart(c, c->p, g, gs, c->m, c->args, c->out, &ts, step);
	c->gref = 1;
	c->gst = (uint8_t)gs;
	call_settle(c);
	resil__tls_method = NULL;
	return RESIL_OK;
}

/* Issue 41: a keyed pipeline's start (start_other()): its keys admit the
 * call first (call_settle() records its end), or it is answered at once.
 * Apart, so that start_other() saves nothing for it. */
static CALL_NOINLINE resil_err
keyed_start(callm *c, bool own, uint64_t now, resil_call_next *step)
{
	if (resil__keyed_machine_admit(c->p, c->args, c->inv,
	        c->m != NULL ? c->m->prio : 0, &c->kheld, c->out) == RESIL_OK)
		return machine_start(c, now, step);
	if (own)
		conf_drop_own(c->g, c->gst);
	else
		conf_drop(c->g);
	c->gref = 0;
	c->phase = P_DONE;
	c->magic = CALL_DONE;
	*step = (resil_call_next) { .action = RESIL_CALL_DONE };
	return RESIL_OK;
}

/* A start the untimed simple phase did not take: the timed one, or the
 * machine. */
static CALL_NOINLINE resil_err
start_other(callm *c, bool own, uint64_t now, resil_call_next *step)
{
	if (inline_first_ok(c->g, c->m, SIMPLE_PHASE_T) &&
	    simple_start_timed(c, c->p, c->gst, own, c->m, now, step))
		return RESIL_OK;
	/* Issue 41: a keyed pipeline's methods have no simple phase
	 * (resil__settings_no_phase()), so every start of one comes here. */
	if (RESIL__UNLIKELY(c->p->keyed != NULL))
		return keyed_start(c, own, now, step);
	return machine_start(c, now, step);
}

/* A start with its settings held (count on stripe gs, which this thread
 * owns when own; a constant at each caller): the call's fields, then the
 * simple phase or the machine. c->inv is written for the machine only:
 * only a cluster's call reads it, and a cluster's method is never
 * simple. */
static CALL_INLINE resil_err
start_held(callm *c, resil_pipeline *p, settings *g, unsigned gs, bool own,
    const method *mm, const resil_args *args, const resil_invocation *inv,
    resil_result *out, uint64_t now, resil_call_next *step)
{
	c->p = p;
	c->args = args;
	c->out = out;
	c->g = g;
	c->gref = 1;
	c->gst = (uint8_t)gs;
	c->m = mm;
	if (RESIL__UNLIKELY(!inline_first_ok(g, mm, SIMPLE_PHASE) ||
	        !simple_start(c, p, gs, own, mm, step))) {
		c->inv = inv;
		return start_other(c, own, now, step);
	}
	return RESIL_OK;
}

static CALL_INLINE resil_err
call_start(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_args *args, const resil_invocation *inv, resil_result *out,
    uint64_t now, resil_call_next *step)
{
	callm *c = (callm *)(void *)call;
	settings *g;
	const method *mm;
	unsigned gs;

	if (RESIL__UNLIKELY(call == NULL || p == NULL || args == NULL ||
	        args->method == NULL || out == NULL || step == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(m != NULL && check_method(p, m) != RESIL_OK))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(CALL_IN_FLIGHT(c->magic)))
		/* A call in flight holds permits and settings: starting
		 * over it would lose them (issue 25.4). */
		return RESIL_E_MISUSE;
	g = conf_hold(p, &gs);
	mm = m != NULL ? resolve(g, m) : find_method(g, args->method);
	return start_held(c, p, g, gs, false, mm, args, inv, out, now, step);
}

/* Every start resil_call_start() does not take itself (by name, a
 * thread's first call, a reload met while holding, bad arguments). */
static CALL_NOINLINE resil_err
call_start_any(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_args *args, resil_result *out, uint64_t now,
    resil_call_next *step)
{
	return call_start(call, p, m, args, NULL, out, now, step);
}

/*
 * call_start() of a valid method handle on a thread that owns its stripe
 * (its hold unlocked, lib/internal.h), when the settings do not move
 * under the hold, without a call that
 * returns (so the common start saves no registers): every other case
 * starts over in call_start_any(), having written nothing but a count it
 * drops again.
 */
resil_err
resil_call_start(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_args *args, resil_result *out, uint64_t now,
    resil_call_next *step)
{
	callm *c = (callm *)(void *)call;
	settings *g;
	unsigned gs;

	if (RESIL__UNLIKELY(m == NULL || !conf_stripe_fenced(&gs) ||
	        call == NULL || p == NULL || args == NULL ||
	        args->method == NULL || out == NULL || step == NULL ||
	        check_method(p, m) != RESIL_OK || CALL_IN_FLIGHT(c->magic)))
		return call_start_any(call, p, m, args, out, now, step);
	if (RESIL__UNLIKELY(!conf_try_hold(p, gs, true, &g)))
		return call_start_any(call, p, m, args, out, now, step);
	return start_held(
	    c, p, g, gs, true, resolve(g, m), args, NULL, out, now, step);
}

resil_err
resil_call_start_ex(resil_call *call, resil_pipeline *p, const resil_method *m,
    const resil_invocation *inv, resil_result *out, uint64_t now,
    resil_call_next *step)
{
	if (inv == NULL)
		return RESIL_E_INVAL;
	return call_start(call, p, m, &inv->args, inv, out, now, step);
}

/* A step the simple phase does not answer. */
static CALL_NOINLINE resil_err
machine_step(callm *c, uint64_t now, resil_call_next *step)
{
	tsrc ts = tgiven(now);

	if (IS_SIMPLE(c->magic))
		to_machine(c);
	if (RESIL__UNLIKELY(c->magic != CALL_LIVE) && c->magic != CALL_CLUSTER)
		return RESIL_E_MISUSE;
	resil__tls_method = c->args->method;
	step->endpoint = NULL;
	mstep(c, &ts, 0, step);
	call_settle(c);
	resil__tls_method = NULL;
	return RESIL_OK;
}

resil_err
resil_call_step(resil_call *call, uint64_t now, resil_call_next *step)
{
	callm *c = (callm *)(void *)call;

	if (RESIL__UNLIKELY(call == NULL || step == NULL))
		return RESIL_E_INVAL;
	if (RESIL__LIKELY(c->magic == CALL_ANSWERED)) {
		simple_done(c, step);
		return RESIL_OK;
	}
	return machine_step(c, now, step);
}

/* A report the simple phase does not take. */
static CALL_NOINLINE resil_err
machine_report(
    callm *c, uint32_t attempt, int rc, resil_value *value, uint64_t now)
{
	tsrc ts = tgiven(now);
	resil_err err;

	if (IS_SIMPLE(c->magic))
		to_machine(c);
	else if (c->magic == CALL_ANSWERED)
		return RESIL_E_MISUSE; /* attempt 1 has answered */
	if (RESIL__LIKELY(c->magic == CALL_LIVE)) {
		resil__tls_method = c->args->method;
		err = mreport(c, attempt, rc, value, &ts);
	} else if (c->magic == CALL_CLUSTER) {
		resil__tls_method = c->args->method;
		err = resil__call_report_cl(c, attempt, rc, value, &ts);
	} else if (c->magic == CALL_DONE || c->magic == CALL_CANCELLED) {
		/* After DONE the args may be gone: only a live call names
		 * them. */
		resil__tls_method = NULL;
		err = mreport(c, attempt, rc, value, &ts);
	} else {
		return RESIL_E_MISUSE;
	}
	resil__tls_method = NULL;
	return err;
}

/* A report the untimed simple phase does not take: a timed call's
 * success, or the machine's. */
static CALL_NOINLINE resil_err
report_other(
    callm *c, uint32_t attempt, int rc, resil_value *value, uint64_t now)
{
	if (c->magic == CALL_SIMPLE_T && attempt == 1 && rc == 0)
		return simple_answered_timed(c, value, now);
	return machine_report(c, attempt, rc, value, now);
}

resil_err
resil_call_report(resil_call *call, uint32_t attempt, int rc,
    resil_value *value, uint64_t now)
{
	callm *c = (callm *)(void *)call;

	if (RESIL__UNLIKELY(call == NULL))
		return RESIL_E_INVAL;
	if (RESIL__LIKELY(
	        c->magic == CALL_SIMPLE && attempt == 1 && rc == 0)) {
		simple_answered(c, value);
		return RESIL_OK;
	}
	return report_other(c, attempt, rc, value, now);
}

resil_err
resil_call_cancel(resil_call *call, uint64_t now)
{
	callm *c = (callm *)(void *)call;
	resil__msg o;

	(void)now;
	if (call == NULL)
		return RESIL_E_INVAL;
	if (IS_SIMPLE(c->magic)) {
		to_machine(c);
	} else if (c->magic == CALL_ANSWERED) {
		/* As the machine with attempt 1's success pending: its value
		 * (here in *out) goes. */
		c->attempts = 1;
		c->breaker_state = c->out->breaker_state;
		resil_value_free(&c->out->value);
		vnull(&c->value);
		c->magic = CALL_LIVE;
	}
	if (c->magic != CALL_LIVE && c->magic != CALL_CLUSTER)
		return RESIL_E_MISUSE;
	if (c->bh_wait) /* issue 42: queued for a bulkhead slot */
		resil__call_bh_cancel(c);
	if (c->coal != 0) /* issue 43: leaves its queue, or hands over */
		resil__coal_cancel(c);
	abandon_running(c);
	if (c->magic == CALL_CLUSTER) {
		resil__cl_release_late(c); /* the hedges are cancelled too */
		resil__cl_cancel(c);
	}
	resil_value_free(&c->value);
	vnull(&c->value);
	resil_result_init(c->out);
	c->out->attempts = c->attempts;
	c->out->breaker_state = c->breaker_state;
	resil__msg_start(&o, c->out->message, sizeof(c->out->message));
	RESIL__MSG_LIT(&o, "the call was cancelled");
	resil__inc64(&my_stripe(c->p)->unavailable);
	c->phase = P_DONE;
	c->magic = CALL_CANCELLED;
	call_settle(c);
	return RESIL_OK;
}

uint32_t
resil_call_outstanding(const resil_call *call)
{
	const callm *c = (const callm *)(const void *)call;
	unsigned i, n = 0;

	if (call == NULL ||
	    (c->magic != CALL_LIVE && c->magic != CALL_DONE &&
	        c->magic != CALL_CANCELLED && c->magic != CALL_CLUSTER &&
	        !IS_SIMPLE(c->magic) && c->magic != CALL_ANSWERED))
		return 0;
	for (i = 0; i < RESIL_CALL_MAX_INFLIGHT; i++)
		n += (((c->running & (uint8_t)~c->delayed) | c->abandoned) >>
		         i) &
		    1u;
	return n;
}

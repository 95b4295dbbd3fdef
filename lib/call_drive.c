/*
 * The blocking drivers of the call machine: resil_pipeline_call() and
 * resil_pipeline_call_method() (one attempt after another on the calling
 * thread; with hedging, on the pipeline's executor), and
 * resil_pipeline_invoke() (each attempt on the endpoint the machine
 * chose). Each is a loop over the machine that runs the attempts itself
 * and sleeps through the pipeline's clock.
 */
#include "call_keyed.h"
#include "call_machine.h"
#include "fallback_internal.h"

/* ---- the blocking driver ---- */

/* The function said it timed out (RESIL_RC_TIMEOUT): a timeout, as
 * complete() makes it. */
static void
declared_timeout(callm *c)
{
	resil_value_free(&c->value);
	vnull(&c->value);
	c->last_status = c->real_err = RESIL_E_TIMEOUT;
	resil__inc64(&my_stripe(c->p)->timeouts);
}

#if defined(__GNUC__)
#define COLD __attribute__((noinline, cold))
#define NOINLINE __attribute__((noinline))
#else
#define COLD
#define NOINLINE
#endif

/* The machine's loop on the calling thread, from *st on. */
HOT resil_err
drive_loop(callm *c, tsrc *ts, resil_call_next *st, resil_call_fn fn,
    void *ctx, const resil_args *args, resil_result *out)
{
	resil_pipeline *p = c->p;
	int rc;

	while (st->action != RESIL_CALL_DONE) {
		if (st->action == RESIL_CALL_RUN) {
			/* The attempt writes straight into the call's value
			 * (the previous attempt's is dropped first). */
			if (c->value.type != RESIL_VALUE_NULL) {
				resil_value_free(&c->value);
				vnull(&c->value);
			}
			resil__tls_deadline = st->deadline;
			rc = fn(ctx, args, &c->value);
			resil__tls_deadline = UINT64_MAX;
			tlazy(ts, p);
			mreport(c, st->attempt, rc, &c->value, ts);
			mstep(c, ts, 0, st);
		} else {
			uint64_t now = resil_clock_now(&p->clock);

			/* One attempt at a time: a wait is a backoff, never
			 * an unbounded one; or (issue 42) a wait for a
			 * bulkhead slot, through the clock's wait. */
			if (RESIL__UNLIKELY(c->bh_wait))
				resil__call_bh_block(c, st->until);
			else if (RESIL__UNLIKELY(
			             c->coal == RESIL__COAL_FOLLOWER))
				resil__coal_block(c, st->until); /* issue 43 */
			else if (st->until > now)
				resil_clock_sleep(&p->clock, st->until - now);
			tlazy(ts, p);
			mstep(c, ts, 1, st);
		}
	}
	resil__tls_method = NULL;
	return out->err;
}

/* A call the inline first step cannot take: the whole machine (not
 * cold: every call of a method with a timeout or a limiter comes here). */
NOINLINE static resil_err
drive_machine(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	callm c;
	resil_call_next st;
	tsrc ts;
	resil_err err;

	resil__tls_method = args->method;
	tlazy(&ts, p);
	c.inv = NULL; /* issue 42: the priority reads it */
	c.coal_blk = 1; /* issue 43: a follower blocks on the clock */
	mstart(&c, p, g, gs, m, args, out, &ts, &st);
	err = drive_loop(&c, &ts, &st, fn, ctx, args, out);
	if (RESIL__UNLIKELY(c.coal != 0)) /* issue 43: a leader */
		resil__coal_finish(&c);
	return err;
}

/* The breaker refused the inline first attempt: the machine goes on
 * from its rejection. */
COLD static resil_err
drive_refused(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out,
    resil_breaker *b)
{
	callm c;
	resil_call_next st;
	tsrc ts;

	resil__tls_method = args->method;
	tlazy(&ts, p);
	resil__result_clear(out);
	c.inv = NULL; /* issue 42: the priority reads it */
	minit(&c, p, g, gs, m, args, out);
	mock_mark(&c);
	c.breaker_state = (int)resil_breaker_get_state(b);
	rejected(&c, RESIL_E_OPEN);
	resil__call_attend(&c, &ts, &st);
	return drive_loop(&c, &ts, &st, fn, ctx, args, out);
}

/* The inline first attempt did not succeed (its value in out->value,
 * its code in out->rc, outcome o; b's permit not yet recorded): the
 * machine goes on in the state its own first step would have left it. */
COLD static resil_err
drive_failed(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out,
    resil_breaker *b, resil_permit *permit, resil_outcome o)
{
	callm c;
	resil_call_next st;
	tsrc ts;
	int rc = out->rc;

	resil__tls_method = args->method;
	tlazy(&ts, p);
	c.inv = NULL; /* issue 42: the priority reads it */
	minit(&c, p, g, gs, m, args, out);
	mock_mark(&c);
	c.value = out->value; /* the attempt's, moved to the call */
	resil__result_clear(out);
	if (b != NULL) {
		resil_breaker_record(
		    b, permit, resil__ovl_breaker_outcome(rc, o));
		c.breaker_state = (int)resil_breaker_get_state(b);
	}
	c.issued = 1;
	c.attempts = 1;
	c.last_rc = rc;
	c.last_status = RESIL_OK;
	c.last_outcome = o;
	if (o == RESIL_OUTCOME_FAILURE) {
		c.real_err = RESIL_E_CALL;
		c.real_rc = rc;
	}
	if (RESIL__UNLIKELY(rc == RESIL_RC_TIMEOUT))
		declared_timeout(&c);
	else if (RESIL__UNLIKELY(resil_rc_is_throttled(rc)))
		resil__ovl_inline_failed(&c, rc, &ts); /* issue 42 */
	c.pending = 1;
	mstep(&c, &ts, 0, &st);
	return drive_loop(&c, &ts, &st, fn, ctx, args, out);
}

/* The inline step's breaker went past its fast paths: its acquire in
 * full (a transition may name the call's method in its event). */
COLD static resil_err
drive_acquire(resil_breaker *b, const resil_args *args, resil_permit *permit)
{
	resil_err err;

	resil__tls_method = args->method;
	err = resil_breaker_acquire(b, permit);
	resil__tls_method = NULL;
	return err;
}

/* The inline step's success past the breaker's fast path, or with a
 * cache to fill: its record in full, the state after it, the cache. */
COLD static void
drive_succeeded(resil_pipeline *p, settings *g, const method *m,
    const resil_args *args, resil_result *out, resil_permit *permit)
{
	resil_breaker *b = m->run_breaker;

	resil__tls_method = args->method;
	if (b != NULL && permit->flags != 0) {
		resil_breaker_record(b, permit, RESIL_OUTCOME_SUCCESS);
		out->breaker_state = (int)resil_breaker_get_state(b);
	}
	if (g->cache != NULL)
		resil_fallback_record(g->fb, args, &out->value);
	resil__tls_method = NULL;
	(void)p;
}

/* A timed inline attempt (drive_timed()) that did not succeed in time:
 * the machine's state as its launch() of attempt 1 at t0 would have left
 * it (slot 0 holding b's permit), its answer (the value in out->value,
 * the code in out->rc) completed at t1 as complete() does it (lateness,
 * the histogram, the breaker's record with the duration), then the
 * machine goes on. */
COLD static resil_err
drive_timed_failed(resil_pipeline *p, settings *g, unsigned gs,
    const method *m, const resil_args *args, resil_call_fn fn, void *ctx,
    resil_result *out, const resil_permit *permit, uint64_t t0, uint64_t t1)
{
	callm c;
	resil_call_next st;
	tsrc ts = tgiven(t1);
	slot *s = &c.slots[0];
	int rc = out->rc;

	resil__tls_method = args->method;
	minit(&c, p, g, gs, m, args, out);
	mock_mark(&c);
	c.value = out->value; /* the attempt's, moved to the call */
	resil__result_clear(out);
	s->id = 1;
	s->has_permit = m->run_breaker != NULL;
	s->has_bh = 0;
	s->chaos = 0;
	s->start = c.launched = t0;
	if (s->has_permit)
		s->permit = *permit;
	c.running = 1;
	c.issued = 1;
	c.attempts = 1;
	complete(&c, 0, rc, &c.value, 0, &ts);
	mstep(&c, &ts, 0, &st);
	return drive_loop(&c, &ts, &st, fn, ctx, args, out);
}

/* A timed inline success past the breaker's fast path (or with a cache
 * to fill): its record with the duration, the state after it, the
 * cache. */
COLD static void
drive_timed_succeeded(resil_pipeline *p, settings *g, const method *m,
    const resil_args *args, resil_result *out, resil_permit *permit,
    uint64_t dur, uint64_t t1)
{
	resil_breaker *b = m->run_breaker;

	resil__tls_method = args->method;
	if (b != NULL && permit->flags != 0) {
		resil_breaker_record_duration(
		    b, permit, RESIL_OUTCOME_SUCCESS, dur);
		out->breaker_state = (int)resil_breaker_get_state(b);
	}
	/* Stamped at the call's end, read once for the duration too. */
	if (g->cache != NULL)
		resil__fallback_record1_at(
		    g->fb, args, &out->value, &p->clock, t1);
	resil__tls_method = NULL;
}

/*
 * drive() for a method with a timeout (SIMPLE_TIMED, issue 39): the
 * deadline and the duration from two clock reads (the start, the end),
 * the breaker's grant on its state word whatever its timing (the
 * duration is the call's), nothing formatted, copied or allocated on a
 * success. An attempt whose duration reaches timeout + late_edge is late,
 * exactly as complete() decides (docs/semantics.md); it, and every other
 * answer that is not a success, goes to the machine in the state its own
 * launch would have left (drive_timed_failed()).
 */
static NOINLINE resil_err
drive_timed(resil_pipeline *p, settings *g, unsigned gs, bool own,
    const method *m, const resil_args *args, resil_call_fn fn, void *ctx,
    resil_result *out)
{
	resil_breaker *b = m->run_breaker;
	resil_permit permit;
	uint64_t t0, t1, dur;
	resil_outcome o;
	int rc;

	resil__count_inc64(&p->stripes[gs].calls, own);
	permit.flags = 0;
	if (b != NULL &&
	    RESIL__UNLIKELY(
	        !resil__breaker_grant_fast(m->run_bf.acq_word, &permit)) &&
	    drive_acquire(b, args, &permit) != RESIL_OK)
		return drive_refused(p, g, gs, m, args, fn, ctx, out, b);
	vnull(&out->value);
	t0 = p->clock.now(p->clock.ctx);
	resil__tls_deadline = sat_add(t0, m->timeout);
	rc = fn(ctx, args, &out->value);
	resil__tls_deadline = UINT64_MAX;
	t1 = p->clock.now(p->clock.ctx);
	dur = t1 > t0 ? t1 - t0 : 0;
	out->rc = rc;
	o = p->cls.fn == NULL || RESIL__UNLIKELY(rc == RESIL_RC_TIMEOUT)
	    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
	    : resil_classify(&p->cls, rc, &out->value);
	if (RESIL__UNLIKELY(o != RESIL_OUTCOME_SUCCESS ||
	        dur >= sat_add(m->timeout, p->late_edge)))
		return drive_timed_failed(
		    p, g, gs, m, args, fn, ctx, out, &permit, t0, t1);
	count_latency(p, gs, own, dur);
	resil__result_answered(out, 1,
	    b != NULL ? (int)RESIL_BREAKER_CLOSED : -1);
	if (own)
		resil__retry_count_first_own(m->run_first_own, gs);
	else if (m->run_first != NULL)
		resil__inc64(&m->run_first[(size_t)gs * RESIL__RETRY_STRIDE]);
	if (b != NULL && RESIL__LIKELY(permit.flags == PERMIT_VALID) &&
	    RESIL__LIKELY(resil__breaker_timed_success_fast(
	        &m->run_bf, permit.start, dur)))
		permit.flags = 0;
	if (RESIL__UNLIKELY(permit.flags != 0))
		drive_timed_succeeded(p, g, m, args, out, &permit, dur, t1);
	else if (g->cache != NULL) /* stamped at the call's end */
		resil__fallback_record1_at(
		    g->fb, args, &out->value, &p->clock, t1);
	return RESIL_OK;
}

/* A read-through method (issue 43): a fresh cached value answers here,
 * as the machine's start would (mstart(): counted, its source counted),
 * when nothing else would see that start (no mock that may force, no
 * listener, no call events); 1 if it did. Otherwise the machine starts
 * and asks the cache itself. */
static NOINLINE int
drive_fresh(resil_pipeline *p, settings *g, unsigned gs, bool own,
    const method *m, const resil_args *args, resil_result *out)
{
	if (g->cache == NULL || resil__load64(&g->mock_forces) != 0 ||
	    p->listener != NULL || p->call_events != 0)
		return 0;
	/* The answer writes the whole of *out; a miss leaves it. */
	if (!resil__cache_fresh(g->cache, args, m->fresh, out))
		return 0;
	resil__count_inc64(&p->stripes[gs].calls, own);
	resil__count_inc64(&p->stripes[gs].cache, own); /* count_source() */
	return 1;
}

/*
 * The blocking driver. The machine's first step is inline when the
 * method is simple (no mock stage, no stage that needs the time, no
 * retry run before attempt 1): a success ends the call here exactly as
 * live_success() would, in a frame without the machine's state; anything
 * else goes to the machine (out of line) in the state its own first step
 * would have left it. The breaker's and the retry count's fast paths are
 * inline (breaker_fast.h, retry_internal.h); the call's method is named
 * for the events (resil__tls_method) only on the paths that can emit
 * one, out of line.
 */
HOT resil_err
drive(resil_pipeline *p, settings *g, unsigned gs, bool own, const method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	resil_breaker *b = m->run_breaker;
	resil_permit permit;
	resil_outcome o;
	int rc;

	/* Chaos switched off costs its flag test (issue 28). */
	if (RESIL__UNLIKELY(!inline_first_ok(g, m, SIMPLE_INLINE))) {
		if (RESIL__UNLIKELY(m->fresh != 0) &&
		    drive_fresh(p, g, gs, own, m, args, out))
			return RESIL_OK;
		return drive_machine(p, g, gs, m, args, fn, ctx, out);
	}
	if (RESIL__UNLIKELY(m->simple & SIMPLE_TIMED))
		return drive_timed(p, g, gs, own, m, args, fn, ctx, out);
	resil__count_inc64(&p->stripes[gs].calls, own);
	permit.flags = 0;
	if (b != NULL &&
	    RESIL__UNLIKELY(
	        !resil__breaker_grant_fast(m->run_bf.acq_word, &permit)) &&
	    drive_acquire(b, args, &permit) != RESIL_OK)
		return drive_refused(p, g, gs, m, args, fn, ctx, out, b);
	/* The attempt writes straight into the result's value; the other
	 * fields are written once, below (or by drive_failed()). */
	vnull(&out->value);
	rc = fn(ctx, args, &out->value);
	out->rc = rc;
	/* The default classifier inline; a user's through resil_classify(),
	 * which also guards its answer. */
	o = p->cls.fn == NULL || RESIL__UNLIKELY(rc == RESIL_RC_TIMEOUT)
	    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
	    : resil_classify(&p->cls, rc, &out->value);
	if (RESIL__UNLIKELY(o != RESIL_OUTCOME_SUCCESS))
		return drive_failed(
		    p, g, gs, m, args, fn, ctx, out, b, &permit, o);
	/* A success the breaker's fast path takes was in its CLOSED
	 * episode and changed nothing: the state after it is CLOSED. */
	resil__result_answered(out, 1,
	    b != NULL ? (int)RESIL_BREAKER_CLOSED : -1);
	if (own)
		resil__retry_count_first_own(m->run_first_own, gs);
	else if (m->run_first != NULL)
		resil__inc64(&m->run_first[(size_t)gs * RESIL__RETRY_STRIDE]);
	if (b != NULL &&
	    RESIL__UNLIKELY(!resil__breaker_success_fast(m->run_bf.st,
	        m->run_bf.streak, &permit, own)))
		drive_succeeded(p, g, m, args, out, &permit);
	else if (RESIL__UNLIKELY(g->cache != NULL))
		resil__fallback_record1(g->fb, args, &out->value);
	return RESIL_OK;
}

/* ---- the blocking driver with an executor (hedging) ---- */

enum { J_RUNNING = 0, J_DONE = 1, J_ABANDONED = 2 };

typedef struct job {
	resil_call_fn fn;
	resil_endpoint_call_fn efn; /* a cluster's attempt, or NULL */
	resil_pick pick;            /* efn: its endpoint (strings copied) */
	void *ctx;
	/* Copies: a losing hedge may run on after the call has returned,
	 * and the pipeline may be gone by then. The method and argument
	 * bytes follow the struct. */
	resil_args args;
	resil_executor ex;
	resil_allocator alloc;
	size_t size;
	uint64_t deadline;
	uint32_t id;
	int rc;
	resil_value value;
	uint32_t state; /* J_*, atomic */
	struct job *next;
} job;

static void
job_free(job *j)
{
	resil_allocator a = j->alloc;

	resil_value_free(&j->value);
	resil__free(&a, j, j->size);
}

static job *
job_new(resil_pipeline *p, resil_call_fn fn, resil_endpoint_call_fn efn,
    void *ctx, const resil_args *args, const resil_call_next *st)
{
	size_t mlen = strlen(args->method) + 1, size, alen = 0, zlen = 0;
	job *j;
	char *buf;

	if (efn != NULL && st->endpoint != NULL) {
		alen = strlen(st->endpoint->address != NULL
		               ? st->endpoint->address
		               : "") +
		    1;
		zlen = st->endpoint->zone != NULL
		    ? strlen(st->endpoint->zone) + 1
		    : 0;
	}
	size = sizeof(*j) + mlen + args->len + alen + zlen;
	if (size < mlen + alen + zlen) /* size_t overflow */
		return NULL;
	j = resil__calloc(&p->alloc, size);
	if (j == NULL)
		return NULL;
	buf = (char *)(j + 1);
	memcpy(buf, args->method, mlen);
	if (args->len > 0)
		memcpy(buf + mlen, args->data, args->len);
	j->fn = fn;
	j->efn = efn;
	if (alen > 0) {
		/* The endpoint's strings, for a fork that outlives its
		 * pick. */
		char *a = buf + mlen + args->len;

		j->pick = *st->endpoint;
		memcpy(a,
		    st->endpoint->address != NULL ? st->endpoint->address : "",
		    alen);
		j->pick.address = a;
		if (zlen > 0) {
			memcpy(a + alen, st->endpoint->zone, zlen);
			j->pick.zone = a + alen;
		}
		j->pick.ep_ = NULL; /* not for reporting */
	}
	j->ctx = ctx;
	j->args.method = buf;
	j->args.data = args->len > 0 ? buf + mlen : NULL;
	j->args.len = args->len;
	j->ex = p->executor;
	j->alloc = p->alloc;
	j->size = size;
	j->deadline = st->deadline;
	j->id = st->attempt;
	j->state = J_RUNNING;
	return j;
}

/* On the executor's thread: the attempt, then hand it back, or free it
 * when the call has finished meanwhile. */
static void
run_job(void *vj)
{
	job *j = vj;
	resil_executor ex = j->ex;
	uint32_t st = J_RUNNING;

	vnull(&j->value);
	resil__tls_deadline = j->deadline;
	j->rc = j->efn != NULL
	    ? j->efn(j->ctx, j->pick.address != NULL ? &j->pick : NULL,
	          &j->args, &j->value)
	    : j->fn(j->ctx, &j->args, &j->value);
	resil__tls_deadline = UINT64_MAX;
	/* ex is copied first: once DONE is published the call may free j. */
	if (__atomic_compare_exchange_n(
	        &j->state, &st, J_DONE, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		ex.wake(ex.ctx);
	else
		job_free(j); /* abandoned: nobody will read the answer */
}

/* The machine's next step, with the time read lazily again. */
static void
next_step(callm *c, tsrc *ts, int waited, resil_call_next *st)
{
	tlazy(ts, c->p);
	st->endpoint = NULL;
	mstep(c, ts, waited, st);
}

/* Attempt st->attempt on the calling thread (fn, or efn on its endpoint),
 * reported at once, then the next step. The attempt writes straight into
 * the call's value (the previous attempt's is dropped first). */
static void
run_here(callm *c, tsrc *ts, resil_call_next *st, resil_call_fn fn,
    resil_endpoint_call_fn efn, void *ctx, const resil_args *args)
{
	int rc;

	if (c->value.type != RESIL_VALUE_NULL) {
		resil_value_free(&c->value);
		vnull(&c->value);
	}
	resil__tls_deadline = st->deadline;
	if (efn != NULL) {
		rc = efn(ctx, st->endpoint, args, &c->value);
	} else {
		/* cppcheck-suppress nullPointer ; fn is given when efn is not
		 */
		rc = fn(ctx, args, &c->value);
	}
	resil__tls_deadline = UINT64_MAX;
	tlazy(ts, c->p);
	resil__call_report_any(c, st->attempt, rc, &c->value, ts);
	next_step(c, ts, 0, st);
}

/* A backoff: sleep through the clock until st->until, then step. */
static void
sleep_step(callm *c, tsrc *ts, resil_call_next *st)
{
	const resil_clock *clk = &c->p->clock;
	uint64_t now = resil_clock_now(clk);

	if (RESIL__UNLIKELY(c->bh_wait)) /* issue 42: a bulkhead slot */
		resil__call_bh_block(c, st->until);
	else if (st->until > now)
		resil_clock_sleep(clk, st->until - now);
	next_step(c, ts, 1, st);
}

/* The answered job with the smallest id (answers are reported in the
 * order of their ids), taken off the list; NULL when none answered. */
static job *
take_answered(job **jobs)
{
	job *best = NULL, *j, **pp;

	for (j = *jobs; j != NULL; j = j->next)
		if (__atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == J_DONE &&
		    (best == NULL || j->id < best->id))
			best = j;
	if (best == NULL)
		return NULL;
	for (pp = jobs; *pp != best; pp = &(*pp)->next)
		;
	*pp = best->next;
	return best;
}

/* The call is over: the jobs still out are abandoned (their answers no
 * longer matter), or dropped here when they answered after all. */
static void
abandon_jobs(callm *c, tsrc *ts, job *jobs)
{
	job *j;

	while (jobs != NULL) {
		uint32_t want = J_RUNNING;

		j = jobs;
		jobs = j->next;
		if (!__atomic_compare_exchange_n(&j->state, &want, J_ABANDONED,
		        0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			/* It answered after all: drop the answer here. */
			resil__call_report_any(c, j->id, j->rc, &j->value, ts);
			job_free(j);
		}
	}
}

/* A driver's call starts on this thread (its method names the events):
 * the machine's first step into *st. */
static void
drive_start(callm *c, resil_pipeline *p, settings *g, unsigned gs,
    const method *m, const resil_args *args, const resil_invocation *inv,
    resil_result *out, tsrc *ts, resil_call_next *st)
{
	resil__tls_method = args->method;
	tlazy(ts, p);
	st->endpoint = NULL;
	c->inv = inv;
	mstart(c, p, g, gs, m, args, out, ts, st);
}

/* The driver's call is over on this thread: its answer's error. */
static resil_err
drive_end(const resil_result *out)
{
	resil__tls_method = NULL;
	return out->err;
}

/* The hedging pipeline's blocking loop: attempts run on the executor;
 * the calling thread waits for answers and timers. */
static resil_err
drive_hedged(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, const resil_invocation *inv, resil_call_fn fn,
    resil_endpoint_call_fn efn, void *ctx, resil_result *out)
{
	const resil_executor *ex = &p->executor;
	job *jobs = NULL, *j;
	callm c;
	resil_call_next st;
	tsrc ts;

	drive_start(&c, p, g, gs, m, args, inv, out, &ts, &st);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			j = job_new(p, fn, efn, ctx, args, &st);
			if (j != NULL &&
			    ex->submit(run_job, j, ex->ctx) == 0) {
				j->next = jobs;
				jobs = j;
				next_step(&c, &ts, 0, &st);
				continue;
			}
			/* No executor thread: this attempt runs here. */
			if (j != NULL)
				job_free(j);
			run_here(&c, &ts, &st, fn, efn, ctx, args);
			continue;
		}
		/* WAIT: report the answers that came, in the order of their
		 * ids; else wait for one or for the tick. */
		if ((j = take_answered(&jobs)) != NULL) {
			tlazy(&ts, p);
			resil__call_report_any(
			    &c, j->id, j->rc, &j->value, &ts);
			job_free(j);
			next_step(&c, &ts, 0, &st);
		} else if (jobs == NULL) {
			/* A backoff: sleep through the clock as always. */
			sleep_step(&c, &ts, &st);
		} else {
			ex->wait(st.until, ex->ctx);
			next_step(&c, &ts, 0, &st);
		}
	}
	abandon_jobs(&c, &ts, jobs);
	/* Hedges still out after the answer: their picks go back (their
	 * answers will not come to this call, issue 43). */
	if (c.magic == CALL_DONE && p->sel != NULL)
		resil__cl_release_late(&c);
	return drive_end(out);
}

static resil_err
refuse_selector(resil_pipeline *p, resil_result *out)
{
	resil__msg o;

	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	resil__msg_start(&o, out->message, sizeof(out->message));
	RESIL__MSG_LIT(&o,
	    "a pipeline with a selector gives each attempt its endpoint: "
	    "call it with resil_pipeline_invoke (or the call machine), for ");
	resil__msg_str(&o, p->service);
	return RESIL_E_INVAL;
}

/* Forking under the blocking driver runs its forks on the executor (the
 * call machine needs none). */
static resil_err
refuse_forking(resil_pipeline *p, resil_result *out)
{
	resil__msg o;

	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	out->source = RESIL_SOURCE_UNAVAILABLE;
	resil__msg_start(&o, out->message, sizeof(out->message));
	RESIL__MSG_LIT(&o,
	    "cluster: forking runs its forks in parallel: give the "
	    "pipeline an executor (pipeline.executor), or use the call "
	    "machine (resil_call_start), for ");
	resil__msg_str(&o, p->service);
	return RESIL_E_INVAL;
}

static resil_err
refuse_hedging(resil_pipeline *p, resil_result *out)
{
	resil__msg o;

	resil_result_init(out);
	out->err = RESIL_E_INVAL;
	out->source = RESIL_SOURCE_UNAVAILABLE;
	resil__msg_start(&o, out->message, sizeof(out->message));
	RESIL__MSG_LIT(&o,
	    "hedging runs attempts in parallel: give the pipeline an "
	    "executor, or use the call machine (resil_call_start), for ");
	resil__msg_str(&o, p->service);
	return RESIL_E_INVAL;
}

/* resil_pipeline_call's slow path: hedging or a selector (h NULL: by
 * args->method). */
static resil_err invoke_body(resil_pipeline *p, const resil_method *h,
    const resil_args *args, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out);

/* Issue 41: the call the keyed families' gate runs (lib/call_keyed.c): an
 * invoke by the body of invoke() past its checks and the gate
 * (h4/kgate), a call through the public entry it came in by (the gate
 * lets it pass). */
static resil_err
keyed_run(const resil__kcall *kc, resil_result *out)
{
	if (kc->efn != NULL)
		return invoke_body(
		    kc->p, kc->h, kc->args, kc->inv, kc->efn, kc->ctx, out);
	if (kc->h != NULL)
		return resil_pipeline_call_method(
		    kc->p, kc->h, kc->args, kc->fn, kc->ctx, out);
	return resil_pipeline_call(kc->p, kc->args, kc->fn, kc->ctx, out);
}

static resil_err
call_slow(resil_pipeline *p, const struct resil_method *h,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	settings *g;
	unsigned gs;
	resil_err err;

	if (resil__keyed_gated(p)) /* issue 41: the keyed families' gate */
		return resil__keyed_call(p, h, args, fn, ctx, out, keyed_run);
	if (p->sel != NULL)
		return refuse_selector(p, out);
	if (p->hedge_max != 0 && p->executor.submit == NULL)
		return refuse_hedging(p, out);
	g = conf_hold(p, &gs);
	if (p->hedge_max == 0) /* issue 41: slow for the gate only */
		err = drive(p, g, gs, false,
		    h != NULL ? resolve(g, h) : find_method(g, args->method),
		    args, fn, ctx, out);
	else
		err = drive_hedged(p, g, gs,
		    h != NULL ? resolve(g, h) : find_method(g, args->method),
		    args, NULL, fn, NULL, ctx, out);
	conf_drop(g);
	return err;
}

resil_err
resil_pipeline_call(resil_pipeline *p, const resil_args *args,
    resil_call_fn fn, void *ctx, resil_result *out)
{
	settings *g;
	unsigned gs;
	resil_err err;

	if (RESIL__UNLIKELY(p == NULL || args == NULL ||
	        args->method == NULL || fn == NULL || out == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(p->slow))
		return call_slow(p, NULL, args, fn, ctx, out);
	if (RESIL__LIKELY(conf_stripe_fenced(&gs))) {
		g = conf_hold_on(p, gs, true);
		err = drive(p, g, gs, true, find_method(g, args->method), args,
		    fn, ctx, out);
		conf_drop_own(g, gs);
		return err;
	}
	g = conf_hold(p, &gs);
	err = drive(p, g, gs, false, find_method(g, args->method), args, fn,
	    ctx, out);
	conf_drop(g);
	return err;
}

resil_err
resil_pipeline_call_method(resil_pipeline *p, const resil_method *m,
    const resil_args *args, resil_call_fn fn, void *ctx, resil_result *out)
{
	settings *g;
	unsigned gs;
	resil_err err;

	/* A handle's owner is never NULL: its test is p's too. */
	if (RESIL__UNLIKELY(m == NULL || check_method(p, m) != RESIL_OK ||
	        args == NULL || args->method == NULL || fn == NULL ||
	        out == NULL))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(p->slow))
		return call_slow(p, m, args, fn, ctx, out);
	/* A thread that owns its stripe counts unlocked (lib/internal.h). */
	if (RESIL__LIKELY(conf_stripe_fenced(&gs))) {
		g = conf_hold_on(p, gs, true);
		err = drive(p, g, gs, true, resolve(g, m), args, fn, ctx, out);
		conf_drop_own(g, gs);
		return err;
	}
	g = conf_hold(p, &gs);
	err = drive(p, g, gs, false, resolve(g, m), args, fn, ctx, out);
	conf_drop(g);
	return err;
}

/* ---- the cluster's blocking driver ---- */

/* One attempt after another on the calling thread, each on the endpoint
 * the machine chose. */
static resil_err
drive_ep(resil_pipeline *p, settings *g, unsigned gs, const method *m,
    const resil_args *args, const resil_invocation *inv,
    resil_endpoint_call_fn fn, void *ctx, resil_result *out)
{
	callm c;
	resil_call_next st;
	tsrc ts;

	drive_start(&c, p, g, gs, m, args, inv, out, &ts, &st);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN)
			run_here(&c, &ts, &st, NULL, fn, ctx, args);
		else
			sleep_step(&c, &ts, &st);
	}
	return drive_end(out);
}

/* resil_endpoint_call_fn over a pipeline without a selector. */
typedef struct ep_adapter {
	resil_endpoint_call_fn fn;
	void *ctx;
} ep_adapter;

static int
ep_adapt(void *ctx, const resil_args *args, resil_value *out)
{
	const ep_adapter *a = ctx;

	return a->fn(a->ctx, NULL, args, out);
}

/*
 * Issue 42: whether a blocking call over a pipeline without a selector
 * must run the machine with its invocation: it gives a class (its
 * priority, or attachments that may name one) and a stage decides by
 * class (a rate limiter or bulkhead with reservations, a bulkhead that
 * waits, the throttle). drive() has no invocation to give the machine;
 * a coalesced or read-through method keeps its own path.
 */
static inline __attribute__((always_inline)) int
inv_classed(const settings *g, const method *m, const resil_invocation *inv)
{
	return inv != NULL &&
	    (inv->priority != RESIL_PRIORITY_UNSET || inv->nattachments > 0) &&
	    m->coal == NULL && m->fresh == 0 &&
	    ((g->rl != NULL && g->frl == NULL &&
	         (g->cfg.ratelimit.reserve_critical |
	             g->cfg.ratelimit.reserve_default) != 0) ||
	        (g->bh != NULL &&
	            (g->cfg.bulkhead.reserve_critical |
	                g->cfg.bulkhead.reserve_default) != 0) ||
	        g->thr != NULL);
}

static inline __attribute__((always_inline)) resil_err
invoke(resil_pipeline *p, const resil_method *h, const resil_args *args,
    const resil_invocation *inv, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	if (RESIL__UNLIKELY(p == NULL || args == NULL ||
	        args->method == NULL || fn == NULL || out == NULL ||
	        (h != NULL && check_method(p, h) != RESIL_OK)))
		return RESIL_E_INVAL;
	/* Issue 41: the keyed families' gate (asked only with families). */
	if (RESIL__UNLIKELY(p->keyed != NULL) && resil__keyed_gated(p))
		return resil__keyed_invoke(
		    p, h, args, inv, fn, ctx, out, keyed_run);
	return invoke_body(p, h, args, inv, fn, ctx, out);
}

/* invoke() past its checks and the keyed gate (the gate's invoke runs
 * it directly: keyed_run). */
static inline __attribute__((always_inline)) resil_err
invoke_body(resil_pipeline *p, const resil_method *h, const resil_args *args,
    const resil_invocation *inv, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	const method *pm;
	settings *g;
	unsigned gs;
	resil_err err;

	if (p->sel == NULL && p->hedge_max != 0 && p->executor.submit == NULL)
		return refuse_hedging(p, out);
	if (p->sel != NULL && p->ccfg.strategy == RESIL_CLUSTER_FORKING &&
	    p->executor.submit == NULL)
		return refuse_forking(p, out);
	g = conf_hold(p, &gs);
	pm = h != NULL ? resolve(g, h) : find_method(g, args->method);
	if (p->sel == NULL) {
		ep_adapter a;

		a.fn = fn;
		a.ctx = ctx;
		if (p->hedge_max != 0)
			err = drive_hedged(
			    p, g, gs, pm, args, inv, NULL, fn, ctx, out);
		else if (RESIL__UNLIKELY(inv_classed(g, pm, inv)))
			err = drive_ep(p, g, gs, pm, args, inv, fn, ctx, out);
		else
			err = drive(p, g, gs, false, pm, args, ep_adapt, &a, out);
	} else if (p->ccfg.strategy == RESIL_CLUSTER_FORKING)
		err =
		    drive_hedged(p, g, gs, pm, args, inv, NULL, fn, ctx, out);
	else
		err = drive_ep(p, g, gs, pm, args, inv, fn, ctx, out);
	conf_drop(g);
	return err;
}

resil_err
resil_pipeline_invoke(resil_pipeline *p, const resil_method *h,
    const resil_args *args, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	return invoke(p, h, args, NULL, fn, ctx, out);
}

/* resil_pipeline_invoke_ex() but for a keyed pipeline's gate: apart, so
 * that the entry below only tests and jumps (h4/kgate). */
static __attribute__((noinline)) resil_err
invoke_ex(resil_pipeline *p, const resil_method *h,
    const resil_invocation *inv, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	return invoke(p, h, &inv->args, inv, fn, ctx, out);
}

resil_err
resil_pipeline_invoke_ex(resil_pipeline *p, const resil_method *h,
    const resil_invocation *inv, resil_endpoint_call_fn fn, void *ctx,
    resil_result *out)
{
	if (inv == NULL)
		return RESIL_E_INVAL;
	/* Issue 41 (h4/kgate): a keyed pipeline's invoke straight to its
	 * gate (its checks there), past invoke()'s frame. */
	if (RESIL__UNLIKELY(p != NULL && p->keyed != NULL) && h == NULL)
		return resil__keyed_invoke_ex(p, h, inv, fn, ctx, out, keyed_run);
	return invoke_ex(p, h, inv, fn, ctx, out);
}

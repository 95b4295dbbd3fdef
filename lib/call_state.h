/*
 * One call's state, in the caller's resil_call, and how a call is
 * answered (counted, told to the listener, ended) (lib/call_state.c):
 * shared by the call machine (lib/call_machine.[ch]), the cluster inside
 * it (lib/call_cluster.[ch]), the drivers (lib/call_drive.c) and the
 * machine's public face (lib/call.c). It names nothing of those rooms.
 * Never installed.
 *
 * The machine decides; the driver (resil_pipeline_call's loop, or the
 * caller's event loop) runs the attempts and the timers. Phases: ATTEMPT
 * (attempts of one retry attempt are out: one, or several when hedging),
 * WAIT (a retry backoff), DONE. A completed attempt is recorded at once,
 * by report (breaker, bulkhead, timing); the decisions that follow
 * (retry, hedge, fallback) are taken by the next step.
 */
#ifndef RESIL_CALL_STATE_H
#define RESIL_CALL_STATE_H

#include "pipeline_events.h"
#include "pipeline_internal.h"

#include "call_coalesce.h"
#include "call_keyed.h"
#include "retry_internal.h"
#include <resil/fleet.h>

/* A call's magic: one tag, and in its low byte the state, 0x80 set while
 * the call is in flight (CALL_IN_FLIGHT() is one test). */
#define CALL_TAG 0x52534c00u
#define CALL_LIVE (CALL_TAG | 0x81u)
#define CALL_CLUSTER (CALL_TAG | 0x82u) /* live, with a selector */
/* The simple phase (lib/call.c): attempt 1 of a simple method out, its
 * permit in slot 0, nothing else of the machine's state written yet; then
 * its success answered in *out, the call's DONE still to be stepped. */
#define CALL_SIMPLE (CALL_TAG | 0x83u)
#define CALL_ANSWERED (CALL_TAG | 0x84u)
#define CALL_DONE (CALL_TAG | 0x01u)
#define CALL_CANCELLED (CALL_TAG | 0x02u)
#define CALL_IN_FLIGHT(magic) (((magic) & ~0x7fu) == (CALL_TAG | 0x80u))

enum { P_ATTEMPT = 0, P_WAIT = 1, P_DONE = 2 };

/* What a slot held back by chaos does when its time comes. */
enum { CH_RUN = 1, CH_FAULT = 2, CH_OUTCOME = 3 };

typedef struct slot {
	uint32_t id;
	uint8_t has_permit;
	uint8_t has_bh;
	uint8_t chaos;  /* delayed by chaos: CH_RUN, CH_FAULT, CH_OUTCOME */
	uint64_t start; /* when it was started (where time is needed) */
	/* has_permit 1: the breaker's; 2 and 3: the fleet's (fleet_pack) */
	resil_permit permit;
} slot;

typedef struct callm {
	uint32_t magic;
	uint8_t phase;
	uint8_t has_mock;
	uint8_t run_on;  /* the retry run is begun */
	uint8_t pending; /* an attempt completed; not yet decided on */
	uint8_t winner;  /* a hedged attempt won: the others are abandoned */
	uint8_t hedges;  /* hedges started in this retry attempt */
	uint8_t no_more_hedges;
	/* Slots by bit: attempts out and running, and abandoned ones whose
	 * answers are still to come (and will be dropped). */
	uint8_t running;
	uint8_t abandoned;
	resil_pipeline *p;
	settings *g;  /* the settings it runs with, held */
	uint8_t gref; /* the call machine's API holds g (drop at the end) */
	uint8_t gst;  /* the stripe g is counted on */
	const method *m;
	resil_breaker *breaker;
	resil_retry *retry;
	const resil_args *args;
	resil_result *out;
	uint64_t timeout;
	uint64_t wait_until; /* WAIT: the end of the backoff */
	uint64_t launched;   /* when the last attempt was started */
	int breaker_state;
	uint32_t attempts; /* calls of the user's function */
	uint32_t issued;   /* attempt ids handed out */
	/* The last attempt that ran and failed: RESIL_OK, or E_CALL /
	 * E_TIMEOUT with its rc. */
	resil_err real_err;
	int real_rc;
	/* How long the last attempt whose function reported a timeout
	 * (RESIL_RC_TIMEOUT) ran, for the message (issue 38.13): set by
	 * complete() when the attempt was timed, and by the cluster's
	 * report of every attempt with a selector. */
	uint64_t declared_ns;
	/* The last completed attempt, as the breaker saw it. */
	int last_rc;
	resil_err last_status;
	resil_outcome last_outcome;
	resil_value value; /* its value */
	resil__retry_run run;
	slot slots[RESIL_CALL_MAX_INFLIGHT];
	/* Chaos: slots admitted but held back (running, not handed out),
	 * by bit; when each is due; the fault's rc. */
	uint8_t delayed;
	int chaos_rc;
	const resil_value *chaos_value; /* the outcome's (the chaos's own) */
	uint64_t chaos_at[RESIL_CALL_MAX_INFLIGHT];
	/* ---- the cluster (sel != NULL); read only when sel is set ---- */
	uint8_t cphase;     /* zone-aware: 1 local first, 2 cross-zone */
	uint8_t cstop;      /* no candidate: conclude at once */
	uint8_t has_pick;   /* slots holding a pick, by bit */
	uint8_t last_local; /* zone-aware: the last attempt was local */
	uint8_t bany;       /* broadcast: a failure was seen */
	uint8_t clb;        /* failfast: its pick's balancer (message) */
	uint8_t in_hedge;   /* the attempt being launched is a hedge */
	uint8_t khost; /* issue 41: slots holding a host's keys (khp), by bit */
	resil_selector *sel;
	/* The call's invocation (resil_call_start_ex, invoke_ex), or NULL:
	 * set by the entry points, read by the cluster's start only. */
	const resil_invocation *inv;
	/* The service breaker, which records the whole call (its attempts
	 * see c->breaker NULL), and the call's permit. */
	resil_breaker *sbreaker;
	resil_permit spermit;
	uint8_t has_spermit; /* 1: spermit; 2: sfp (issue 44) */
	/* Issue 42 (lib/call_bhwait.c), in has_spermit's padding: bh_wait
	 * (set by minit()) 1 while queued for the slot of attempt bh_slot;
	 * bh_fleet: bh_fp holds the fleet's permit; prio: the call's
	 * resil_priority once prio_set (resil__call_priority). */
	uint8_t bh_wait;
	uint8_t bh_slot;
	uint8_t bh_fleet;
	uint8_t prio;
	uint8_t prio_set;
	/* Issue 43 (lib/call_coalesce.c), in the same padding: coal (set by
	 * minit()) RESIL__COAL_NONE, _LEADER or _FOLLOWER; coal_blk (set by
	 * the driver before mstart()): the blocking driver's, it blocks to
	 * wait. */
	uint8_t coal;
	uint8_t coal_blk;
	/* Issue 44: the service breaker on the fleet (m->fleet): the
	 * call's fleet permit. */
	resil_fleet_permit sfp;
	uint64_t cstart; /* when the call started (a timeout is set) */
	uint32_t ncand;  /* candidates at the last route (messages) */
	/* zone-aware: phase 1's candidates (local, or all when none is)
	 * and the endpoints failed in it, for the message */
	uint32_t nlocal, nfailed1;
	uint32_t bn;     /* broadcast: candidates at the first route */
	uint32_t nother; /* zone-aware: other-zone candidates, last route */
	uint32_t bidx;   /* broadcast: the candidate of the next attempt */
	uint32_t bfail, bthreshold;
	uint32_t hedge_base; /* the id of the attempt hedges hedge */
	/* broadcast: the endpoint of the last attempt. Every attempt routes
	 * again, and an endpoint whose breaker opened meanwhile is no longer
	 * a candidate, so the next one is found by id (directory order), not
	 * by position. */
	uint64_t blast_id;
	int blast_rc;
	resil_err blast_status;
	uint32_t ntried, nfailed;
	uint64_t tried[16];
	uint64_t failed_ids[16];
	uint64_t last_timeout; /* the timeout of the last attempt */
	resil_request req;
	char failed[128];   /* the addresses that failed, ", " joined */
	char last_addr[64]; /* the endpoint of the last completed attempt */
	char last_zone[32];
	char
	    cmsg[RESIL_RESULT_MSG_MAX]; /* no provider: the selector's words */
	char pzone[RESIL_CALL_MAX_INFLIGHT][32]; /* each pick's zone */
	resil_pick picks[RESIL_CALL_MAX_INFLIGHT];
	/* ---- issue 42: a launch waiting for a bulkhead slot
	 * (lib/call_bhwait.c); bh_wait is set by minit() ---- */
	resil_permit bh_permit;
	resil_fleet_permit bh_fp;
	resil_bulkhead_waiter bhw;
	/* ---- issue 43: coalescing (lib/call_coalesce.c) ---- */
	uint64_t coal_until; /* a follower's deadline (UINT64_MAX: none) */
	resil__coal_ent *coal_on; /* the entry it waits on (under the lock) */
	resil__coal_ent coal_ent; /* a leader's entry */
	resil__waiter coal_w;     /* a follower's waiter */
	/* ---- issue 41 (lib/call_keyed.c): what the call holds of its
	 * keys (the call machine's; the blocking driver's gate keeps its
	 * own), and per attempt (khost above, by slot bit) what it holds of
	 * the families keyed by its host (breaker permit, bulkhead slot;
	 * the cluster's) ---- */
	resil__kheld kheld;
	resil__khost khp[RESIL_CALL_MAX_INFLIGHT];
} callm;

/* Issue 41: what slot i holds of its host's keys (families keyed by
 * host) ends with o (IGNORED: given back), if it holds any. */
static inline void
khost_end(callm *c, unsigned i, resil_outcome o)
{
	if (RESIL__UNLIKELY(c->khost & (1u << i))) {
		c->khost &= (uint8_t) ~(1u << i);
		resil__keyed_host_end(c->p, &c->khp[i], o);
	}
}

/* Issue 42 (lib/call_bhwait.c): the call's priority class, resolved
 * once: its invocation's, its `resil.priority` (or `priority`)
 * attachment's, its method's `priority` key, else DEFAULT. The throttle
 * stage (lib/call_overload.c) and the bulkhead read it. */
resil_priority resil__call_priority(callm *c);

_Static_assert(sizeof(callm) <= sizeof(resil_call),
    "resil_call is too small for the machine's state");
_Static_assert(_Alignof(callm) <= _Alignof(resil_call),
    "resil_call is not aligned enough for the machine's state");

typedef struct tsrc tsrc;

/* The time for one step: given by the caller (known), or read from the
 * pipeline's clock the first time something needs it (the blocking
 * driver reads no clock on a success path that needs no time). */
struct tsrc {
	uint64_t now;
	const resil_clock *clk; /* NULL: now is given */
};

/* The state a fleet breaker shows a call (its breaker_state): the fleet's
 * when it is not CLOSED, else its local breaker's (which then decides). */
static inline int
fleet_bstate(resil_fleet *f)
{
	resil_fleet_state s = resil_fleet_get_state(f);

	if (s == RESIL_FLEET_CLOSED)
		return (int)resil_breaker_get_state(resil_fleet_breaker(f));
	return s == RESIL_FLEET_OPEN ? (int)RESIL_BREAKER_OPEN
	                             : (int)RESIL_BREAKER_HALF_OPEN;
}

/* A fleet permit into a slot's breaker permit (the slot keeps no room for
 * more): a local permit as it is (has_permit 2), a probe's episode and
 * lease in episode and reserved (has_permit 3, resil_fleet_permit's
 * kind 2, its local permit empty). */
static inline uint8_t
fleet_pack(slot *s, const resil_fleet_permit *fp)
{
	if (fp->kind != 2) {
		s->permit = fp->local;
		return 2;
	}
	memset(&s->permit, 0, sizeof(s->permit));
	s->permit.episode = fp->episode;
	s->permit.reserved = fp->slot;
	return 3;
}

static inline void
fleet_unpack(const slot *s, resil_fleet_permit *fp)
{
	memset(fp, 0, sizeof(*fp));
	if (s->has_permit == 2) {
		fp->local = s->permit;
		return;
	}
	fp->kind = 2;
	fp->episode = s->permit.episode;
	fp->slot = s->permit.reserved;
}

/* Record (outcome) or give back (release) a slot's fleet permit. */
static inline void
fleet_done(callm *c, slot *s, int release, resil_outcome outcome)
{
	resil_fleet_permit fp;

	fleet_unpack(s, &fp);
	if (release)
		resil_fleet_release(c->m->fleet, &fp);
	else
		resil_fleet_record(c->m->fleet, &fp, outcome);
	c->breaker_state = fleet_bstate(c->m->fleet);
}

static inline uint64_t
tnow(tsrc *t)
{
	if (t->clk != NULL) {
		t->now = resil_clock_now(t->clk);
		t->clk = NULL;
	}
	return t->now;
}

static inline void
tlazy(tsrc *t, const resil_pipeline *p)
{
	t->now = 0;
	t->clk = &p->clock;
}

static inline tsrc
tgiven(uint64_t now)
{
	tsrc t;

	t.now = now;
	t.clk = NULL;
	return t;
}

static inline unsigned
latency_bucket(uint64_t d)
{
	unsigned b = 0;

	while (d != 0 && b < RESIL_LATENCY_BUCKETS - 1) {
		d >>= 1;
		b++;
	}
	return b;
}

/* A null value, as resil_value_init() makes it (all zero bits), without
 * a call on the hot path. */
HOT void
vnull(resil_value *v)
{
	memset(v, 0, sizeof(*v));
}

static inline uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline void
count_source(resil_pipeline *p, const resil_result *r)
{
	stripe *s = my_stripe(p);

	switch (r->source) {
	case RESIL_SOURCE_CACHE:
		resil__inc64(&s->cache);
		break;
	case RESIL_SOURCE_MOCK:
		resil__inc64(&s->mock);
		break;
	case RESIL_SOURCE_FALLBACK:
		resil__inc64(&s->fallback);
		break;
	case RESIL_SOURCE_UNAVAILABLE:
		/* Every fallback passed, or (no fallback) the failure
		 * itself propagated. */
		if (r->err == RESIL_E_UNAVAILABLE)
			resil__inc64(&s->unavailable);
		else
			resil__inc64(&s->errors);
		break;
	case RESIL_SOURCE_LIVE:
		if (r->err == RESIL_E_BUSINESS)
			resil__inc64(&s->business);
		else if (r->err != RESIL_OK)
			resil__inc64(&s->errors);
		break;
	}
}

/* The action the caller is given next. */
static inline void
next_is(resil_call_next *st, resil_call_action action, uint32_t attempt,
    uint64_t deadline, uint64_t until)
{
	st->action = action;
	st->attempt = attempt;
	st->deadline = deadline;
	st->until = until;
}

/* Begin the retry run of the call (the policy reads the time at its start
 * only when it needs it). */
static inline void
run_begin(callm *c, tsrc *ts)
{
	int timed = resil__retry_needs_time(c->retry);

	resil__retry_begin(c->retry, &c->run, timed, timed ? tnow(ts) : 0);
}

/* The call is answered: count it, tell the listener, and stop. */
HOT void
conclude_with(callm *c, resil_stage stage, tsrc *ts, resil_call_next *st)
{
	resil_pipeline *p = c->p;
	resil_result *out = c->out;

	if (RESIL__UNLIKELY(
	        out->source != RESIL_SOURCE_LIVE || out->err != RESIL_OK))
		count_source(p, out);
	if (p->listener != NULL && stage != RESIL_STAGE_CALL)
		resil__emit_result(p, stage, out, tnow(ts));
	if (RESIL__UNLIKELY(p->call_events != 0))
		resil__emit_call(p, c, out, tnow(ts));
	c->phase = P_DONE;
	c->magic = CALL_DONE;
	next_is(st, RESIL_CALL_DONE, 0, 0, 0);
}

/* Give back what the still running attempts hold; their late answers will
 * be dropped. The common case, nothing out, costs no call. */
void resil__call_abandon(callm *c);

/* Hedging across endpoints (issue 43): hedging with a selector, not
 * forking. A hedge that lost keeps its pick until its late answer, which
 * resil__cl_late() reports to its endpoint (slot i, answered at now);
 * resil__cl_release_late() gives back the picks of those still out (the
 * call was cancelled, or the blocking driver returned without them). */
int resil__cl_hedging(const resil_pipeline *p);
void resil__cl_late(
    callm *c, unsigned i, int rc, const resil_value *v, uint64_t now);
void resil__cl_release_late(callm *c);
/* Its events: started (pk: the hedge's endpoint), and at a winner in
 * slot i, won (when slot i is a hedge) and dropped (each attempt out). */
void resil__cl_hedge_event(callm *c, resil_cluster_event_type t,
    const resil_pick *pk, uint64_t now);
void resil__cl_hedge_won(callm *c, unsigned i, uint64_t now);

static inline void
abandon_running(callm *c)
{
	if (c->running != 0)
		resil__call_abandon(c);
}

/* The answer is the live call's (a success, a business error or an
 * ignored outcome): the callee's own, untouched, never degraded. */
static inline void
conclude_live(
    callm *c, int rc, resil_outcome outcome, tsrc *ts, resil_call_next *st)
{
	resil_result *out = c->out;

	out->rc = rc;
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->source = RESIL_SOURCE_LIVE;
	if (outcome == RESIL_OUTCOME_BUSINESS) {
		resil_value_free(&c->value);
		out->err = RESIL_E_BUSINESS;
		conclude_with(c, RESIL_STAGE_CALL, ts, st);
		return;
	}
	if (outcome == RESIL_OUTCOME_SUCCESS && c->g->cache != NULL)
		resil_fallback_record(c->g->fb, c->args, &c->value);
	/* IGNORED passes as it is: RESIL_OK with rc 0, else E_CALL. */
	out->err = outcome == RESIL_OUTCOME_SUCCESS || rc == 0 ? RESIL_OK
	                                                       : RESIL_E_CALL;
	out->value = c->value; /* moved */
	vnull(&c->value);
	conclude_with(c, RESIL_STAGE_CALL, ts, st);
}

/* A non-business failure (err, rc): the fallback chain answers into
 * *c->out, or passes, and the answer carries the call's provenance. No
 * cache, no mock for this method and no handler: no fallback is
 * configured, so the original error propagates (source UNAVAILABLE: 1 is
 * returned). */
static inline int
recover_failure(callm *c, resil_err err, int rc)
{
	int propagated;
	resil_result *out = c->out;
	resil_failure failure;

	failure.err = err;
	failure.rc = rc;
	failure.attempts = c->attempts;
	resil_fallback_recover(
	    c->g->cache != NULL || c->has_mock || c->p->handlers > 0 ? c->g->fb
	                                                             : NULL,
	    c->args, &failure, out);
	propagated = out->source == RESIL_SOURCE_LIVE;
	if (propagated)
		/* The original failure propagates: nothing answered (issue
		 * 24.8), not the live call. */
		out->source = RESIL_SOURCE_UNAVAILABLE;
	out->attempts = c->attempts;
	out->breaker_state = c->breaker_state;
	out->last_failure = c->real_err;
	out->last_failure_rc = c->real_rc;
	return propagated;
}

#endif /* RESIL_CALL_STATE_H */

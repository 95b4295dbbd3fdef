/*
 * Peer scenarios not yet in test_scenarios.c: more of Resilience4j's
 * CircuitBreakerStateMachineTest, IntervalFunctionTest, RetryImplTest,
 * AtomicRateLimiterTest and SemaphoreBulkheadTest, Polly v8's retry and
 * circuit breaker tests and gobreaker_test.go, rewritten against resil's
 * public API (the peers' code is not copied: each test restates the
 * scenario). Each test names the peer file and test it comes from.
 *
 * Units: one tick is one millisecond where a peer mixes seconds and
 * milliseconds (Resilience4j), otherwise one tick is the peer's unit.
 *
 * Where resil differs from a peer, the comment says so and whether
 * DESIGN.md's "Decided semantics" decides it (the test follows DESIGN) or
 * it is a design choice documented in docs/semantics.md, "Peer scenarios
 * (issue audit)" (the test pins what resil does).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/limit.h>
#include <resil/resil.h>
#include <resil/retry.h>

/* ------------------------------------------------------------------ */
/* Breaker helpers                                                    */
/* ------------------------------------------------------------------ */

#include "support/breaker_fx.h"

#define S RESIL_OUTCOME_SUCCESS
#define F RESIL_OUTCOME_FAILURE
#define I RESIL_OUTCOME_IGNORED
#define B RESIL_OUTCOME_BUSINESS

/* CircuitBreakerStateMachineTest.setUp() of the current Resilience4j:
 * failure rate 50%, 4 probes, slow above 4 s at a slow rate of 50%, a
 * TIME_BASED window of 20 s with 5 minimum calls, OPEN wait 5 s, at most
 * 1 s in HALF_OPEN. One tick is one millisecond. */
static void
r4j_setup(bfx *f, int max_half_open)
{
	bfx_init(f, 0);
	f->cfg.failure_rate_pct = 50;
	f->cfg.permitted_probes = 4;
	f->cfg.slow_threshold_ns = 4000;
	f->cfg.slow_rate_pct = 50;
	f->cfg.window_type = RESIL_WINDOW_TIME;
	f->cfg.window_size = 20;
	f->cfg.bucket_ns = 1000;
	f->cfg.min_calls = 5;
	f->cfg.open_wait_ns = 5000;
	f->cfg.max_half_open_ns = max_half_open ? 1000 : 0;
	bfx_new(f);
}

/* ---- Resilience4j CircuitBreakerStateMachineTest ----------------- */

/* .shouldOpenAfterFailureRateThresholdExceeded2: one outcome a second in
 * a 20 s time window. S S S F F is 40%: CLOSED, and a second later still
 * CLOSED (time alone never trips); a third failure makes 3 of 6 = 50%,
 * which is >= the threshold: OPEN at that tick. */
static void
test_peers_r4j_time_window_trips_at_exactly_half(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f, 0);
	call_dur(&f, S, 0);
	resil_manual_clock_advance(&f.mc, 1000);
	call_dur(&f, S, 0);
	resil_manual_clock_advance(&f.mc, 1000);
	call_dur(&f, S, 0);
	resil_manual_clock_advance(&f.mc, 1000);
	call_dur(&f, F, 0);
	resil_manual_clock_advance(&f.mc, 1000);
	call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 5);
	assert_true(m.failure_rate == 40.0f);
	resil_manual_clock_advance(&f.mc, 1000);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.window_calls, 6);
	assert_int_equal(m.window_failures, 3);
	assert_true(m.failure_rate == 50.0f);
	assert_int_equal(f.rec.count, 1);
	assert_int_equal(f.events[0].time, 5000);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_FAILURE_RATE);
	resil_breaker_free(f.b);
}

typedef struct sleeper {
	resil_manual_clock *mc;
	uint64_t ticks;
	int rc;
} sleeper;

static int
sleeper_fn(void *ctx)
{
	sleeper *s = ctx;

	resil_manual_clock_advance(s->mc, s->ticks);
	return s->rc;
}

/* .shouldOpenAfterSlowCallRateThresholdExceededUsingMockClock: the
 * decorated call itself moves the clock (5 s, 5 s, 1 s, 1 s, 5 s), so the
 * breaker measures each duration. Buffered and slow counts after each
 * call: 1/1, 2/2, 3/2, 4/2, then 5/3 = 60% slow: OPEN. */
static void
test_peers_r4j_breaker_call_measures_slow_calls(void **state)
{
	static const uint64_t ticks[] = { 5000, 5000, 1000, 1000, 5000 };
	static const uint32_t slow[] = { 1, 2, 2, 2, 3 };
	bfx f;
	sleeper s;
	resil_breaker_metrics m;
	int i, rc = -1;

	(void)state;
	r4j_setup(&f, 0);
	s.mc = &f.mc;
	s.rc = 0;
	for (i = 0; i < 5; i++) {
		s.ticks = ticks[i];
		assert_int_equal(
		    resil_breaker_call(f.b, sleeper_fn, &s, NULL, &rc),
		    RESIL_OK);
		assert_int_equal(rc, 0);
		m = mx(&f);
		assert_int_equal(m.window_calls, (uint32_t)i + 1);
		assert_int_equal(m.window_slow, slow[i]);
		assert_int_equal(m.state,
		    i < 4 ? RESIL_BREAKER_CLOSED : RESIL_BREAKER_OPEN);
	}
	assert_true(m.slow_call_rate == 60.0f);
	assert_true(m.failure_rate == 0.0f);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_SLOW_CALL_RATE);
	assert_int_equal(f.events[0].time, 17000);
	resil_breaker_free(f.b);
}

/* .shouldThrowCallNotPermittedExceptionWhenStateIsOpen, ...WhenStateIs
 * ForcedOpen and ...WhenNotFurtherTestCallsArePermitted: one refused
 * acquire counts one not-permitted call, whichever state refused it. */
static void
test_peers_r4j_not_permitted_counts(void **state)
{
	bfx f;
	int i;

	(void)state;
	r4j_setup(&f, 0);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	assert_false(try_acquire(&f));
	assert_int_equal(mx(&f).rejections, 1);
	resil_breaker_free(f.b);

	r4j_setup(&f, 0);
	resil_breaker_force_open(f.b);
	assert_false(try_acquire(&f));
	assert_int_equal(mx(&f).rejections, 1);
	resil_breaker_free(f.b);

	r4j_setup(&f, 0);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	for (i = 0; i < 4; i++)
		assert_true(try_acquire(&f));
	assert_false(try_acquire(&f));
	assert_int_equal(mx(&f).rejections, 1);
	assert_int_equal(mx(&f).probes_granted, 4);
	resil_breaker_free(f.b);
}

/* .shouldTransitionToHalfOpenAfterWaitDuration asserts that the
 * not-permitted count is back to 0 in HALF_OPEN. Design choice
 * (docs/semantics.md, "Peer scenarios"): resil's rejections is a lifetime
 * total, like successes and failures; the window figures are the ones
 * that start empty in HALF_OPEN. */
static void
test_peers_r4j_rejections_are_lifetime(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f, 0);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	assert_false(try_acquire(&f));
	resil_manual_clock_advance(&f.mc, 3000);
	assert_false(try_acquire(&f));
	resil_manual_clock_advance(&f.mc, 3000);
	assert_true(try_acquire(&f));
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(m.rejections, 2);
	assert_int_equal(m.window_calls, 0);
	assert_true(m.failure_rate == -1.0f);
	resil_breaker_free(f.b);
}

/* .circuitBreakerDoesNotPublishStateTransitionEventsForInternalTransitions:
 * a manual transition to the state the breaker is already in is no
 * transition and tells the listener nothing. */
static void
test_peers_r4j_same_state_transition_is_silent(void **state)
{
	static const resil_breaker_state seq[] = { RESIL_BREAKER_OPEN,
		RESIL_BREAKER_HALF_OPEN, RESIL_BREAKER_DISABLED,
		RESIL_BREAKER_METRICS_ONLY, RESIL_BREAKER_FORCED_OPEN };
	bfx f;
	size_t i;

	(void)state;
	r4j_setup(&f, 0);
	for (i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
		assert_int_equal(
		    resil_breaker_transition(f.b, seq[i]), RESIL_OK);
		assert_int_equal(f.rec.count, i + 1);
		assert_int_equal(
		    resil_breaker_transition(f.b, seq[i]), RESIL_OK);
		assert_int_equal(f.rec.count, i + 1);
		assert_int_equal(st(&f), seq[i]);
		assert_int_equal(mx(&f).transitions, i + 1);
	}
	resil_breaker_free(f.b);
}

/* .allCircuitBreakerStatesAllowTransitionToMetricsOnlyMode and
 * .allCircuitBreakerStatesAllowTransitionToItsOwnState: from every state
 * the breaker can move to METRICS_ONLY, with an empty window. */
static void
test_peers_r4j_metrics_only_from_every_state(void **state)
{
	resil_breaker_state from;
	bfx f;

	(void)state;
	for (from = RESIL_BREAKER_CLOSED; from <= RESIL_BREAKER_METRICS_ONLY;
	     from++) {
		r4j_setup(&f, 0);
		call_dur(&f, S, 0);
		if (from == RESIL_BREAKER_HALF_OPEN)
			resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
		assert_int_equal(
		    resil_breaker_transition(f.b, from), RESIL_OK);
		assert_int_equal(st(&f), from);
		assert_int_equal(resil_breaker_metrics_only(f.b), RESIL_OK);
		assert_int_equal(st(&f), RESIL_BREAKER_METRICS_ONLY);
		assert_int_equal(mx(&f).window_calls, 0);
		assert_true(try_acquire(&f));
		resil_breaker_free(f.b);
	}
}

/* .circuitBreakerTransitionsToOpenAfterWaitDurationInHalfOpenState, on the
 * manual clock: maxWaitDurationInHalfOpenState 1 s; HALF_OPEN without any
 * probe reported is OPEN again once the second has passed (the peer reads
 * the state after sleeping 2 s). resil: at exactly +1 s, on the next
 * acquire or metrics read. */
static void
test_peers_r4j_half_open_max_wait_without_probes(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f, 1);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	resil_manual_clock_advance(&f.mc, 999);
	assert_true(try_acquire(&f));
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	resil_manual_clock_advance(&f.mc, 1001);
	assert_false(try_acquire(&f));
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[f.rec.count - 1].reason,
	    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT);
	resil_breaker_free(f.b);
}

/* .shouldOpenAfterSlowCallRateThresholdExceeded, first call: a failure
 * that took 5 s counts as a failure and as a slow call, in the window and
 * in the lifetime totals. */
static void
test_peers_r4j_slow_failure_counts_twice(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f, 0);
	call_dur(&f, F, 5000);
	m = mx(&f);
	assert_int_equal(m.window_calls, 1);
	assert_int_equal(m.window_failures, 1);
	assert_int_equal(m.window_slow, 1);
	assert_int_equal(m.failures, 1);
	assert_int_equal(m.slow_calls, 1);
	assert_int_equal(m.successes, 0);
	resil_breaker_free(f.b);
}

/* gobreaker TestDefaultCircuitBreaker reads State() after the timeout and
 * sees half-open; Resilience4j's getState() stays OPEN until a call asks
 * for a permission. DESIGN: "The passage of time alone never trips a
 * breaker"; resil reports OPEN until the first acquire at or after the
 * deadline makes the move (its retry_after says 0 ticks are left). */
static void
test_peers_gobreaker_state_read_after_timeout(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.consecutive_failures = 1;
	f.cfg.failure_rate_pct = 0;
	f.cfg.open_wait_ns = 60;
	bfx_new(&f);
	call_dur(&f, F, 0);
	resil_manual_clock_set(&f.mc, 59);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 60);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(f.rec.count, 1);
	assert_true(try_acquire(&f));
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(f.events[1].time, 60);
	resil_breaker_free(f.b);
}

/* The time window after a long idle (Resilience4j SlidingTimeWindowMetrics
 * with a clock that jumps ahead): outcomes older than the span are gone,
 * so one new failure after an hour is 1 of 1, below min_calls. */
static void
test_peers_r4j_time_window_after_long_idle(void **state)
{
	bfx f;
	resil_breaker_metrics m;
	int i;

	(void)state;
	r4j_setup(&f, 0);
	for (i = 0; i < 4; i++)
		call_dur(&f, F, 0);
	assert_int_equal(mx(&f).window_calls, 4);
	resil_manual_clock_advance(&f.mc, 3600 * 1000);
	m = mx(&f);
	assert_int_equal(m.window_calls, 0);
	call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 1);
	assert_true(m.failure_rate == -1.0f);
	resil_breaker_free(f.b);
}

/* OPEN with a clock that moves back (STYLE: step time backwards): the
 * deadline stays opened_at + wait; retry_after counts from the earlier
 * reading, and no probe is let in early. */
static void
test_peers_open_wait_with_clock_moved_back(void **state)
{
	bfx f;
	resil_permit p;
	uint64_t after = 0;

	(void)state;
	r4j_setup(&f, 0);
	resil_manual_clock_set(&f.mc, 10000);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 9000);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_int_equal(after, 6000);
	resil_manual_clock_set(&f.mc, 14999);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_int_equal(after, 1);
	resil_manual_clock_set(&f.mc, 15000);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_release(f.b, &p), RESIL_OK);
	resil_breaker_free(f.b);
}

/* Polly CircuitStateControllerTests.OnActionFailureAsync_EnsureBreakDuration
 * NotOverflow: a break that would end past the clock's largest value ends
 * at that value (no wrap to an early probe). The manual clock near
 * UINT64_MAX; a 5000-tick wait from UINT64_MAX - 4990. */
static void
test_peers_polly_open_deadline_does_not_overflow(void **state)
{
	bfx f;
	resil_permit p;
	uint64_t after = 0;

	(void)state;
	bfx_init(&f, UINT64_MAX - 10000);
	f.cfg.consecutive_failures = 1;
	f.cfg.failure_rate_pct = 0;
	f.cfg.open_wait_ns = 5000;
	bfx_new(&f);
	/* Without overflow: opened at MAX - 10000, due at MAX - 5000. */
	call_dur(&f, F, 0);
	resil_manual_clock_set(&f.mc, UINT64_MAX - 5001);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_int_equal(after, 1);
	resil_manual_clock_set(&f.mc, UINT64_MAX - 5000);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(f.b, &p, F), RESIL_OK);
	/* Reopened at MAX - 5000 + 10 below: the deadline would pass
	 * UINT64_MAX; it saturates, so no probe comes early. */
	resil_manual_clock_set(&f.mc, UINT64_MAX - 4990);
	assert_int_equal(resil_breaker_reset(f.b), RESIL_OK);
	call_dur(&f, F, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 5); /* wrapped "future" */
	assert_false(try_acquire(&f));
	resil_manual_clock_set(&f.mc, UINT64_MAX - 1);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_true(after >= 1);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* Polly AdvancedCircuitBehaviorTests.OnActionFailure_WhenClosed_Ensure
 * CorrectBehavior: (throughput, minimum, failure rate, threshold) ->
 * break: (10, 10, 0.0, 0.1) no; (10, 10, 0.1, 0.1) yes; (10, 10, 0.2,
 * 0.1) yes; (9, 10, 0.11, 0.1) no. resil: a count window of 20, min_calls
 * 10, failure_rate_pct 10; the failures come last, so the decision is
 * made on a failure as in Polly. (Polly's row (11, 10, 0.2) cannot be
 * reached one outcome at a time: the breaker decides at the tenth.) */
static void
test_peers_polly_throughput_and_ratio_table(void **state)
{
	static const struct {
		int calls, failures;
		resil_breaker_state want;
	} rows[] = {
		{ 10, 0, RESIL_BREAKER_CLOSED },
		{ 10, 1, RESIL_BREAKER_OPEN },
		{ 10, 2, RESIL_BREAKER_OPEN },
		{ 9, 1, RESIL_BREAKER_CLOSED },
	};
	bfx f;
	size_t r;
	int i;

	(void)state;
	for (r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		bfx_init(&f, 0);
		f.cfg.window_size = 20;
		f.cfg.min_calls = 10;
		f.cfg.failure_rate_pct = 10;
		bfx_new(&f);
		for (i = 0; i < rows[r].calls; i++)
			call_dur(&f,
			    i >= rows[r].calls - rows[r].failures ? F : S, 0);
		assert_int_equal(st(&f), rows[r].want);
		resil_breaker_free(f.b);
	}
}

/* Where the peers disagree: Polly decides only when a failure is
 * recorded; Resilience4j after every outcome (its
 * shouldOpenAfterFailureRateThresholdExceeded trips on a success, the
 * fifth call). resil follows Resilience4j: one failure then nine
 * successes reach min_calls 10 at 10% on a success, and trip. */
static void
test_peers_polly_r4j_trip_on_a_success(void **state)
{
	bfx f;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.window_size = 20;
	f.cfg.min_calls = 10;
	f.cfg.failure_rate_pct = 10;
	bfx_new(&f);
	call_dur(&f, F, 0);
	for (i = 0; i < 8; i++)
		call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_FAILURE_RATE);
	resil_breaker_free(f.b);
}

typedef struct counted {
	int calls;
	int rc;
} counted;

static int
counted_fn(void *ctx)
{
	counted *c = ctx;

	c->calls++;
	return c->rc;
}

/* rc 99 stands for a JVM Error (StackOverflowError): neither success nor
 * failure. */
static resil_outcome
rc_99_ignored(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 99 ? RESIL_OUTCOME_IGNORED : RESIL_OUTCOME_FAILURE;
}

/* resilience4j CircuitBreakerTest: .shouldDecorateSupplierAndReturnWith
 * Success / ...WithException (one buffered call each), .shouldNotMeasure
 * ErrorsAsFailures (an Error is not counted), .shouldDecorateFutureWith
 * SupplierAndCallCancel (a cancelled call records nothing: release the
 * permit) and .shouldReturnFailureWithCircuitBreakerOpenExceptionWith
 * Futures (window 2, 50%: the window full at 50% opens it; the next call
 * is refused without running, one not-permitted call, the window
 * unchanged). */
static void
test_peers_r4j_decorated_call_counts(void **state)
{
	bfx f;
	counted c = { 0, 0 };
	resil_classifier cls = { rc_99_ignored, NULL };
	resil_breaker_metrics m;
	resil_permit p;
	int rc = -1;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.window_size = 2;
	f.cfg.min_calls = 2;
	f.cfg.permitted_probes = 2;
	f.cfg.open_wait_ns = 1000;
	bfx_new(&f);
	assert_int_equal(
	    resil_breaker_call(f.b, counted_fn, &c, &cls, &rc), RESIL_OK);
	m = mx(&f);
	assert_int_equal(m.window_calls, 1);
	assert_int_equal(m.successes, 1);
	c.rc = 99;
	assert_int_equal(
	    resil_breaker_call(f.b, counted_fn, &c, &cls, &rc), RESIL_OK);
	assert_int_equal(rc, 99);
	m = mx(&f);
	assert_int_equal(m.window_calls, 1);
	assert_int_equal(m.ignored, 1);
	/* Cancelled: the permit is released, nothing recorded. */
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_release(f.b, &p), RESIL_OK);
	m = mx(&f);
	assert_int_equal(m.window_calls, 1);
	assert_int_equal(m.successes + m.failures, 1);
	c.rc = 5; /* S then F: 1 of 2 is 50%, the window is full */
	assert_int_equal(
	    resil_breaker_call(f.b, counted_fn, &c, &cls, &rc), RESIL_OK);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.window_calls, 2);
	assert_int_equal(m.window_failures, 1);
	assert_int_equal(c.calls, 3);
	rc = -1;
	assert_int_equal(
	    resil_breaker_call(f.b, counted_fn, &c, &cls, &rc), RESIL_E_OPEN);
	assert_int_equal(c.calls, 3); /* not run */
	assert_int_equal(rc, -1);     /* not written */
	m = mx(&f);
	assert_int_equal(m.rejections, 1);
	assert_int_equal(m.window_calls, 2);
	assert_int_equal(m.window_failures, 1);
	resil_breaker_free(f.b);
}

/* Resilience4j's metrics are floats (failed * 100.0f / buffered): 1 of 3
 * reads 33.333332f and 2 of 3 66.666664f; resil gives the same values,
 * while its trip decision compares integers (2 * 100 >= 50 * 3), so no
 * rounding can move a boundary. */
static void
test_peers_r4j_rates_as_floats(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.window_size = 3;
	f.cfg.min_calls = 3;
	f.cfg.failure_rate_pct = 67;
	bfx_new(&f);
	call_dur(&f, F, 0);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	m = mx(&f);
	assert_true(m.failure_rate == 1 * 100.0f / 3);
	call_dur(&f, F, 0); /* evicts the first F: 1 of 3 */
	call_dur(&f, F, 0); /* 2 of 3 = 66.67% < 67 */
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_true(m.failure_rate == 2 * 100.0f / 3);
	call_dur(&f, F, 0); /* 3 of 3 */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* Polly CircuitStateControllerTests.OnActionFailureAsync_EnsureCorrect
 * Behavior (Open, Open, false): a failure reported while the circuit is
 * OPEN, by a call let in before it opened, changes nothing (DESIGN: a
 * permit from an earlier episode); and HALF_OPEN's probe given back by a
 * business outcome as by an ignored one (DESIGN), so the next caller
 * probes. */
static void
test_peers_polly_late_outcome_and_business_probe(void **state)
{
	bfx f;
	resil_permit early, p;
	resil_breaker_metrics m;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.consecutive_failures = 1;
	f.cfg.failure_rate_pct = 0;
	f.cfg.open_wait_ns = 100;
	bfx_new(&f);
	assert_int_equal(resil_breaker_acquire(f.b, &early), RESIL_OK);
	call_dur(&f, F, 0); /* opens */
	assert_int_equal(resil_breaker_record(f.b, &early, F), RESIL_OK);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.stale, 1);
	assert_int_equal(m.failures, 1);
	assert_int_equal(f.rec.count, 1);
	resil_manual_clock_set(&f.mc, 100);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(f.b, &p, B), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(mx(&f).probes_granted, 0);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(f.b, &p, S), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	resil_breaker_free(f.b);
}

/* ---- what counts toward min_calls -------------------------------- */

/* Resilience4j CircuitBreakerConfig minimumNumberOfCalls (count window 10,
 * minimum 5): 4 failures are below the minimum (rate -1, CLOSED); ignored
 * and business outcomes are no calls and do not reach it; slow successes
 * do; the fifth recorded failure trips. */
static void
test_peers_min_calls_counts_recorded_outcomes_only(void **state)
{
	bfx f;
	resil_breaker_metrics m;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.window_size = 10;
	f.cfg.min_calls = 5;
	f.cfg.failure_rate_pct = 50;
	f.cfg.slow_threshold_ns = 100;
	f.cfg.slow_rate_pct = 100;
	bfx_new(&f);
	for (i = 0; i < 4; i++)
		call_dur(&f, F, 0);
	call_dur(&f, I, 0);
	call_dur(&f, B, 0);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 4);
	assert_true(m.failure_rate == -1.0f);
	assert_true(m.slow_call_rate == -1.0f);
	assert_int_equal(m.ignored, 2);
	call_dur(&f, S, 101); /* a slow success is a call */
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.window_calls, 5);
	assert_true(m.failure_rate == 80.0f);
	assert_true(m.slow_call_rate == 20.0f);
	resil_breaker_free(f.b);
}

/* Slow-call rate at the boundary (Resilience4j slowCallRateThreshold 50,
 * count window 4, minimum 4): a call of exactly the threshold is not
 * slow; 2 slow of 4 is 50% and trips on the fourth call, with the slow
 * reason, though none failed. */
static void
test_peers_slow_rate_boundary(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 50;
	f.cfg.window_size = 4;
	f.cfg.min_calls = 4;
	f.cfg.slow_threshold_ns = 4000;
	f.cfg.slow_rate_pct = 50;
	bfx_new(&f);
	call_dur(&f, S, 4000); /* == threshold: not slow */
	call_dur(&f, S, 4001);
	call_dur(&f, S, 3999);
	assert_int_equal(mx(&f).window_slow, 1);
	call_dur(&f, S, 4000);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED); /* 1 of 4: 25% */
	call_dur(&f, S, 5000); /* evicts the first: slow 2 of 4 */
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_OPEN);
	assert_int_equal(m.window_slow, 2);
	assert_true(m.slow_call_rate == 50.0f);
	assert_true(m.failure_rate == 0.0f);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_SLOW_CALL_RATE);
	resil_breaker_free(f.b);
}

/* ---- gobreaker ---------------------------------------------------- */

/* gobreaker_test.go TestDefaultCircuitBreaker's Counts: with the
 * consecutive trigger on (next to a rate trigger), the metrics carry the
 * streak after each outcome: 5 failures, a success resets it, then 1. */
static void
test_peers_gobreaker_consecutive_count_in_metrics(void **state)
{
	bfx f;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.consecutive_failures = 6;
	f.cfg.failure_rate_pct = 100;
	f.cfg.min_calls = 100;
	bfx_new(&f);
	for (i = 0; i < 5; i++) {
		call_dur(&f, F, 0);
		assert_int_equal(mx(&f).consecutive_failures, (uint32_t)i + 1);
	}
	call_dur(&f, S, 0);
	assert_int_equal(mx(&f).consecutive_failures, 0);
	call_dur(&f, F, 0);
	assert_int_equal(mx(&f).consecutive_failures, 1);
	assert_int_equal(mx(&f).window_calls, 7);
	for (i = 0; i < 5; i++)
		call_dur(&f, F, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES);
	resil_breaker_free(f.b);
}

/* gobreaker_test.go TestStateConstants: each state has a name and an
 * unknown value has one too (gobreaker: "unknown state: 100"; resil:
 * "UNKNOWN", never NULL). */
static void
test_peers_gobreaker_state_names(void **state)
{
	(void)state;
	assert_string_equal(
	    resil_breaker_state_name(RESIL_BREAKER_CLOSED), "CLOSED");
	assert_string_equal(
	    resil_breaker_state_name(RESIL_BREAKER_OPEN), "OPEN");
	assert_string_equal(
	    resil_breaker_state_name(RESIL_BREAKER_HALF_OPEN), "HALF_OPEN");
	assert_string_equal(
	    resil_breaker_state_name((resil_breaker_state)100), "UNKNOWN");
}

/* gobreaker v2 gobreaker_test.go TestRollingWindowCircuitBreaker: a
 * rolling window of 30 s in 10 buckets of 3 s, tripping at >= 3 requests
 * with a failure ratio >= 0.6, 90 s open, 3 requests in half-open. resil:
 * a TIME window of 10 buckets of 3000 ticks (1 tick = 1 ms), min_calls 3,
 * failure_rate_pct 60, permitted_probes 3. The window figures after each
 * step are gobreaker's Counts (Requests, TotalFailures); the first bucket
 * leaves at 30 s; 14 failures of 23 trip. */
static void
test_peers_gobreaker_rolling_window(void **state)
{
	bfx f;
	resil_breaker_metrics m;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 60;
	f.cfg.min_calls = 3;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 10;
	f.cfg.bucket_ns = 3000;
	f.cfg.open_wait_ns = 90000;
	f.cfg.permitted_probes = 3;
	bfx_new(&f);
	for (i = 0; i < 5; i++) {
		call_dur(&f, S, 0);
		call_dur(&f, F, 0);
	}
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 10);
	assert_int_equal(m.window_failures, 5);
	/* gobreaker's ConsecutiveFailures is 1 here. Design choice
	 * (docs/semantics.md, "Peer scenarios"): resil keeps the streak only
	 * where the consecutive trigger is on, so that the rate-only
	 * success path writes nothing; the metric is 0 otherwise. */
	assert_int_equal(m.consecutive_failures, 0);
	resil_manual_clock_set(&f.mc, 3000);
	call_dur(&f, S, 0);
	assert_int_equal(mx(&f).window_calls, 11);
	resil_manual_clock_set(&f.mc, 5000);
	call_dur(&f, S, 0);
	resil_manual_clock_set(&f.mc, 7000);
	call_dur(&f, S, 0);
	assert_int_equal(mx(&f).window_calls, 13);
	resil_manual_clock_set(&f.mc, 9000);
	call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(m.window_calls, 14);
	assert_int_equal(m.window_failures, 6);
	for (i = 0; i < 6; i++) {
		resil_manual_clock_advance(&f.mc, 3000);
		call_dur(&f, S, 0);
		call_dur(&f, F, 0);
		m = mx(&f);
		assert_int_equal(m.window_calls, 16 + 2 * i);
		assert_int_equal(m.window_failures, 7 + i);
	}
	/* 30 s: the first bucket (10 calls, 5 failures) leaves. */
	resil_manual_clock_advance(&f.mc, 3000);
	assert_int_equal(resil_manual_clock_now(&f.mc), 30000);
	call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(m.window_calls, 17);
	assert_int_equal(m.window_failures, 8);
	for (i = 0; i < 5; i++) {
		call_dur(&f, F, 0);
		m = mx(&f);
		assert_int_equal(m.window_calls, 18 + i);
		assert_int_equal(m.window_failures, 9 + i);
	}
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED); /* 13 of 22 */
	call_dur(&f, F, 0);                              /* 14 of 23 >= 60% */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.rec.count, 1);
	assert_int_equal(f.events[0].time, 30000);
	resil_manual_clock_advance(&f.mc, 89999);
	assert_false(try_acquire(&f));
	resil_manual_clock_advance(&f.mc, 1);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	m = mx(&f);
	assert_int_equal(m.probes_reported, 2);
	{
		resil_permit p3, p4;

		assert_int_equal(resil_breaker_acquire(f.b, &p3), RESIL_OK);
		/* over MaxRequests while the third is in flight */
		assert_int_equal(
		    resil_breaker_acquire(f.b, &p4), RESIL_E_OPEN);
		assert_int_equal(resil_breaker_record(f.b, &p3, S), RESIL_OK);
	}
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 0);
	assert_int_equal(
	    f.events[f.rec.count - 1].from, RESIL_BREAKER_HALF_OPEN);
	resil_breaker_free(f.b);
}

/* gobreaker_test.go TestGeneration, the CLOSED half: Interval 30 s clears
 * the counts, and a request that started before the clear and ends after
 * it has no effect on the new counts. resil's nearest window is one
 * bucket of 30 s (a tumbling window). Design choice (docs/semantics.md,
 * "Peer scenarios"): in CLOSED an outcome counts in the window of the time
 * it is recorded, as in Resilience4j; only a permit from another episode
 * (a trip in between) is stale. */
static void
test_peers_gobreaker_interval_clear_and_late_outcome(void **state)
{
	bfx f;
	resil_permit late;
	resil_breaker_metrics m;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 60;
	f.cfg.min_calls = 3;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 1;
	f.cfg.bucket_ns = 30000;
	bfx_new(&f);
	resil_manual_clock_set(&f.mc, 29000);
	call_dur(&f, S, 0);
	assert_int_equal(resil_breaker_acquire(f.b, &late), RESIL_OK);
	resil_manual_clock_set(&f.mc, 29500);
	assert_int_equal(mx(&f).window_calls, 1);
	resil_manual_clock_set(&f.mc, 30000); /* over the interval */
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.window_calls, 0);
	resil_manual_clock_set(&f.mc, 30500);
	assert_int_equal(resil_breaker_record(f.b, &late, S), RESIL_OK);
	m = mx(&f);
	assert_int_equal(m.window_calls, 1); /* gobreaker: 0 */
	assert_int_equal(m.stale, 0);
	resil_breaker_free(f.b);
}

/* ------------------------------------------------------------------ */
/* Retry                                                              */
/* ------------------------------------------------------------------ */

/* A scripted dependency: the n-th attempt returns script[n] (0 after the
 * script), and records its start. */
typedef struct rdep {
	const int *script;
	int n;
	int calls;
	uint64_t starts[16];
} rdep;

static int
rdep_fn(void *ctx, resil_retry_attempt *a, void *out)
{
	rdep *d = ctx;
	int rc = d->calls < d->n ? d->script[d->calls] : 0;

	(void)out;
	if (d->calls < 16)
		d->starts[d->calls] = a->start;
	d->calls++;
	return rc;
}

/* rc 0 and 1 are answers (1: "try again" in the result), 2 a failure. */
static resil_outcome
rc_01_success(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc <= 1 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

static int
retry_if_rc_1(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc == 1;
}

static void
retry_new_manual(
    resil_retry **r, resil_retry_config *cfg, resil_manual_clock *mc)
{
	resil_diag d;

	cfg->clock = resil_manual_clock_hook(mc);
	d.msg[0] = '\0';
	if (resil_retry_new(r, cfg, &d) != RESIL_OK)
		fail_msg("resil_retry_new: %s", d.msg);
}

/* resilience4j-retry SupplierRetryTest.testDecorateCallableWithRetryResult
 * (maxAttempts 2, retryOnResult matching the answer; the first attempt
 * throws, the second returns the matching answer): two attempts, one
 * default wait (500 ms), and the caller gets that last answer. */
static void
test_peers_r4j_retry_result_after_exception(void **state)
{
	static const int script[] = { 2, 1 };
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry *r;
	rdep d = { script, 2, 0, { 0 } };
	resil_retry_result res;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 2;
	cfg.base_delay_ns = 500;
	cfg.classifier.fn = rc_01_success;
	cfg.retry_on_result = retry_if_rc_1;
	retry_new_manual(&r, &cfg, &mc);
	assert_int_equal(
	    resil_retry_call(r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 2);
	assert_int_equal(res.rc, 1);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(res.waited, 500);
	assert_int_equal(resil_manual_clock_now(&mc), 500);
	resil_retry_free(r);
}

/* MaxRetriesExceededTest (failAfterMaxAttempts): Resilience4j throws
 * MaxRetriesExceeded only when the retries were spent on results; when
 * the last attempt threw, the caller gets that exception. DESIGN: "On
 * exhaustion the caller gets the last attempt's own error; with
 * retry-on-result, the last result, or RESIL_E_RETRIES_EXHAUSTED". So:
 * result, result, failure -> the failure's own rc; failure, failure,
 * result -> RESIL_E_RETRIES_EXHAUSTED. */
static void
test_peers_r4j_fail_after_max_attempts_kind_of_last(void **state)
{
	static const int results_then_failure[] = { 1, 1, 2 };
	static const int failures_then_result[] = { 2, 2, 1 };
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry *r;
	rdep d = { results_then_failure, 3, 0, { 0 } };
	resil_retry_result res;
	resil_retry_metrics m;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 3;
	cfg.base_delay_ns = 10;
	cfg.classifier.fn = rc_01_success;
	cfg.retry_on_result = retry_if_rc_1;
	cfg.fail_after_max_attempts = 1;
	retry_new_manual(&r, &cfg, &mc);
	assert_int_equal(
	    resil_retry_call(r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.rc, 2);
	assert_int_equal(res.outcome, RESIL_OUTCOME_FAILURE);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	d.script = failures_then_result;
	d.calls = 0;
	assert_int_equal(resil_retry_call(r, rdep_fn, &d, NULL, &res),
	    RESIL_E_RETRIES_EXHAUSTED);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.rc, 1);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(resil_retry_get_metrics(r, &m), RESIL_OK);
	assert_int_equal(m.calls, 2);
	assert_int_equal(m.exhausted, 2);
	assert_int_equal(m.failed_after_retry, 2);
	resil_retry_free(r);
}

/* SupplierRetryTest.testDecorateSupplierAndInvokeTwice (defaults: 3
 * attempts, 500 ms): two calls that each fail once then succeed; 1000 ms
 * slept in all, and the metrics after each call. */
static void
test_peers_r4j_retry_metrics_two_calls(void **state)
{
	static const int script[] = { 2, 0, 2, 0 };
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry *r;
	rdep d = { script, 4, 0, { 0 } };
	resil_retry_result res;
	resil_retry_metrics m;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_retry_config_init(&cfg);
	cfg.base_delay_ns = 500;
	retry_new_manual(&r, &cfg, &mc);
	assert_int_equal(
	    resil_retry_call(r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(res.attempts, 2);
	assert_int_equal(res.rc, 0);
	assert_int_equal(resil_retry_get_metrics(r, &m), RESIL_OK);
	assert_int_equal(m.calls, 1);
	assert_int_equal(m.succeeded_after_retry, 1);
	assert_int_equal(m.retries, 1);
	assert_int_equal(
	    resil_retry_call(r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 4);
	assert_int_equal(resil_manual_clock_now(&mc), 1000);
	assert_int_equal(d.starts[3], 1000);
	assert_int_equal(resil_retry_get_metrics(r, &m), RESIL_OK);
	assert_int_equal(m.calls, 2);
	assert_int_equal(m.attempts, 4);
	assert_int_equal(m.retries, 2);
	assert_int_equal(m.succeeded_after_retry, 2);
	assert_int_equal(m.succeeded_without_retry, 0);
	assert_int_equal(m.failed_after_retry, 0);
	assert_int_equal(m.failed_without_retry, 0);
	resil_retry_free(r);
}

/* resilience4j-core IntervalFunctionTest.generatesCappedExponentialIntervals:
 * ofExponentialBackoff(100, 2, 100000) grows strictly up to the cap, and
 * the 12th and 13th intervals are the cap. */
static void
test_peers_r4j_capped_exponential_intervals(void **state)
{
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t prev, w;
	uint32_t n;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 20;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.base_delay_ns = 100;
	cfg.multiplier = 2.0;
	cfg.max_delay_ns = 100000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_next_delay(r, 1, 0, 0.0, &prev), RESIL_OK);
	assert_int_equal(prev, 100);
	for (n = 2; n < 12; n++) {
		assert_int_equal(
		    resil_retry_next_delay(r, n, 0, 0.0, &w), RESIL_OK);
		assert_true(w > prev);
		prev = w;
	}
	assert_int_equal(prev, 100000); /* 100 * 2^10 = 102400, capped */
	assert_int_equal(resil_retry_next_delay(r, 12, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 100000);
	assert_int_equal(resil_retry_next_delay(r, 13, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 100000);
	resil_retry_free(r);
}

/* IntervalFunctionTest.generatesCappedExponentialRandomIntervals:
 * ofExponentialRandomBackoff(100, 1.5, 0.5, 100000): every interval is
 * within [e/2 - 1, 3e/2 + 1] of e = 100 * 1.5^(n-1), or is the cap. Here
 * u runs over [0, 1) in steps, so both ends are reached. DESIGN caps
 * after jitter, so near the cap resil gives min(jittered, cap), which the
 * peer's bounds accept; the backoff is truncated to whole ticks before
 * the jitter scales it (the first four values pin that). */
static void
test_peers_r4j_capped_exponential_random_intervals(void **state)
{
	/* u = n / 8: 100 * 0.625, 150 * 0.75, 225 * 0.875, 337 * 1.0 */
	static const uint64_t first[] = { 62, 112, 196, 337 };
	resil_retry_config cfg;
	resil_retry *r;
	double e = 100.0;
	uint64_t w;
	uint32_t n;
	int capped = 0;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 50;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.base_delay_ns = 100;
	cfg.multiplier = 1.5;
	cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	cfg.jitter_factor = 0.5;
	cfg.max_delay_ns = 100000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	for (n = 1; n < 50; n++) {
		double u = (double)(n % 8) / 8.0;

		assert_int_equal(
		    resil_retry_next_delay(r, n, 0, u, &w), RESIL_OK);
		if (w == 100000) {
			capped++;
		} else {
			assert_true((double)w >= e * 0.5 - 1);
			assert_true((double)w <= e * 1.5 + 1);
		}
		if (n <= 4) /* the backoff truncated, then jittered */
			assert_int_equal(w, first[n - 1]);
		e = (double)(uint64_t)(e * 1.5);
	}
	assert_true(capped > 30);
	assert_int_equal(resil_retry_next_delay(r, 49, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 100000); /* e/2 is far above the cap */
	resil_retry_free(r);
}

/* IntervalFunctionTest.shouldRejectAttemptLessThenOne and
 * .shouldPassAttemptGreaterThenZero: attempt numbers start at 1. */
static void
test_peers_r4j_attempt_zero_refused(void **state)
{
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t w = 77;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.base_delay_ns = 100;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_next_delay(r, 0, 0, 0.0, &w), RESIL_E_INVAL);
	assert_int_equal(w, 77); /* untouched on error */
	assert_int_equal(resil_retry_next_delay(r, 1, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 100);
	assert_int_equal(resil_retry_next_delay(r, 2, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 100);
	resil_retry_free(r);
}

/* IntervalFunctionTest.shouldRejectOutOfBoundsRandomizationFactor,
 * .shouldPassPositiveRandomizationFactor and .shouldPassPositiveMultiplier:
 * a factor must be within [0, 1], both ends accepted; a multiplier just
 * above 1 is accepted, one below 1 refused, each naming the field. */
static void
test_peers_r4j_interval_config_bounds(void **state)
{
	static const double ok[] = { 0.0, 0.1, 0.25, 0.5, 0.75, 1.0 };
	resil_retry_config cfg;
	resil_diag d;
	size_t i;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.base_delay_ns = 100;
	cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cfg.jitter_factor = ok[i];
		assert_int_equal(
		    resil_retry_config_validate(&cfg, &d), RESIL_OK);
	}
	cfg.jitter_factor = -0.0001;
	assert_int_equal(resil_retry_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "jitter_factor"));
	cfg.jitter_factor = 1.0001;
	assert_int_equal(resil_retry_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "jitter_factor"));
	cfg.jitter_factor = 0.5;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.multiplier = 1.0001;
	assert_int_equal(resil_retry_config_validate(&cfg, &d), RESIL_OK);
	cfg.multiplier = 0.9999;
	assert_int_equal(resil_retry_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "multiplier"));
}

/* Polly RetryHelperTests (GetRetryDelay overflow: an exponential delay
 * that overflows gives the maximum, never a wrapped small one): at the
 * 1000th attempt the doubling delay saturates; with MaxDelay it is the
 * cap. */
static void
test_peers_polly_exponential_overflow_saturates(void **state)
{
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t w, prev = 0;
	uint32_t n;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 1000;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.base_delay_ns = 1000;
	cfg.multiplier = 2.0;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	for (n = 1; n < 1000; n++) {
		assert_int_equal(
		    resil_retry_next_delay(r, n, 0, 0.0, &w), RESIL_OK);
		assert_true(w >= prev); /* never wraps */
		prev = w;
	}
	assert_true(w == UINT64_MAX);
	resil_retry_free(r);
	cfg.max_delay_ns = 5000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 999, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 5000);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 4000);
	resil_retry_free(r);
}

static uint64_t
fixed_5000(uint32_t attempt, uint64_t prev_wait, void *ctx)
{
	(void)attempt;
	(void)prev_wait;
	(void)ctx;
	return 5000;
}

/* Polly RetryResilienceStrategyTests (MaxDelay applies to a
 * DelayGenerator's answer too): a custom backoff of 5000 with a cap of
 * 1000 waits 1000. */
static void
test_peers_polly_max_delay_caps_custom_backoff(void **state)
{
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t w;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.backoff = RESIL_BACKOFF_CUSTOM;
	cfg.backoff_fn = fixed_5000;
	cfg.base_delay_ns = 0;
	cfg.max_delay_ns = 1000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 1, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 1000);
	resil_retry_free(r);
}

static resil_outcome
rc_7_ignored(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 7 ? RESIL_OUTCOME_IGNORED : RESIL_OUTCOME_FAILURE;
}

/* resilience4j-retry EventPublisherTest (shouldConsumeOnRetryEvent,
 * shouldConsumeOnSuccessEvent, shouldConsumeOnErrorEvent,
 * shouldConsumeIgnoredErrorEvent): F, S gives RETRY then SUCCESS; F, F, F
 * gives RETRY, RETRY, then an error event (resil: GIVE_UP, stop
 * EXHAUSTED); an ignored error gives Resilience4j's IGNORED_ERROR event.
 * Design choice (docs/semantics.md, "Peer scenarios"): resil's events are
 * about retrying, so an outcome that ends the call at its first attempt
 * (success, ignored, business) sends none; the metrics count it. */
static void
test_peers_r4j_retry_events(void **state)
{
	static const int fs[] = { 2, 0 };
	static const int fff[] = { 2, 2, 2 };
	static const int ign[] = { 7 };
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry *r;
	resil_retry_event ev[8];
	resil_retry_recorder rec;
	rdep d = { fs, 2, 0, { 0 } };
	resil_retry_result res;
	resil_retry_metrics m;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_retry_config_init(&cfg);
	cfg.base_delay_ns = 100;
	cfg.classifier.fn = rc_7_ignored;
	resil_retry_recorder_init(&rec, ev, 8);
	cfg.listener = resil_retry_recorder_listener;
	cfg.listener_ctx = &rec;
	retry_new_manual(&r, &cfg, &mc);
	resil_retry_call(r, rdep_fn, &d, NULL, &res);
	assert_int_equal(rec.count, 2);
	assert_int_equal(ev[0].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(ev[0].attempt, 1);
	assert_int_equal(ev[0].wait, 100);
	assert_int_equal(ev[0].time, 0);
	assert_int_equal(ev[1].type, RESIL_RETRY_EVENT_SUCCESS);
	assert_int_equal(ev[1].attempt, 2);
	assert_int_equal(ev[1].time, 100);
	d.script = fff;
	d.n = 3;
	d.calls = 0;
	resil_retry_call(r, rdep_fn, &d, NULL, &res);
	assert_int_equal(rec.count, 5);
	assert_int_equal(ev[2].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(ev[3].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(ev[3].attempt, 2);
	assert_int_equal(ev[4].type, RESIL_RETRY_EVENT_GIVE_UP);
	assert_int_equal(ev[4].attempt, 3);
	assert_int_equal(ev[4].stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(ev[4].rc, 2);
	d.script = ign;
	d.n = 1;
	d.calls = 0;
	resil_retry_call(r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 1);
	assert_int_equal(res.outcome, RESIL_OUTCOME_IGNORED);
	assert_int_equal(rec.count, 5); /* no event */
	assert_int_equal(resil_retry_get_metrics(r, &m), RESIL_OK);
	assert_int_equal(m.calls, 3);
	assert_int_equal(m.failed_without_retry, 1);
	assert_int_equal(m.succeeded_after_retry, 1);
	assert_int_equal(m.failed_after_retry, 1);
	resil_retry_free(r);
}

static double
half(void *ctx)
{
	(void)ctx;
	return 0.5;
}

/* Polly RetryHelperTests.MaxDelay_Ok (each backoff, with and without
 * jitter, third attempt, MaxDelay 1 s, u = 0.5: 1 s; Polly's base is
 * 10 s, here a base of 500 ticks grown past the cap: linear 1500,
 * exponential 2000, jittered or not), .MaxDelay_DelayLessThanMaxDelay_
 * Respected (1 s under a 2 s cap: 1 s) and Constant_Ok / Linear_Ok /
 * Exponential_Ok with a zero base: 0. A cap below the base itself (Polly's
 * 10 s under 1 s) is refused: design choice, docs/semantics.md "Peer
 * scenarios". */
static void
test_peers_polly_max_delay_every_backoff(void **state)
{
	static const resil_retry_backoff kinds[] = { RESIL_BACKOFF_LINEAR,
		RESIL_BACKOFF_EXPONENTIAL };
	resil_retry_config cfg;
	resil_retry *r;
	resil_diag d;
	uint64_t waits[4];
	size_t k, j, n;

	(void)state;
	for (k = 0; k < 2; k++) {
		for (j = 0; j < 2; j++) {
			resil_retry_config_init(&cfg);
			cfg.max_attempts = 4;
			cfg.backoff = kinds[k];
			cfg.base_delay_ns = 500;
			cfg.max_delay_ns = 1000;
			cfg.jitter =
			    j ? RESIL_JITTER_PROPORTIONAL : RESIL_JITTER_NONE;
			cfg.jitter_factor = 0.25;
			cfg.random.uniform = half;
			assert_int_equal(
			    resil_retry_new(&r, &cfg, NULL), RESIL_OK);
			assert_int_equal(
			    resil_retry_next_delay(r, 3, 0, 0.5, &waits[0]),
			    RESIL_OK);
			assert_int_equal(waits[0], 1000);
			resil_retry_free(r);
		}
	}
	for (k = 0; k < 3; k++) {
		resil_retry_config_init(&cfg);
		cfg.max_attempts = 4;
		cfg.backoff = k == 0 ? RESIL_BACKOFF_FIXED : kinds[k - 1];
		cfg.base_delay_ns = 0;
		cfg.jitter = RESIL_JITTER_PROPORTIONAL;
		cfg.jitter_factor = 0.25;
		assert_int_equal(
		    resil_retry_plan(&cfg, NULL, waits, 4, &n, NULL),
		    RESIL_OK);
		assert_int_equal(n, 3);
		assert_int_equal(waits[0], 0);
		assert_int_equal(waits[1], 0);
		assert_int_equal(waits[2], 0);
	}
	/* Polly's exponential jitter under MaxDelay too. */
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 4;
	cfg.base_delay_ns = 1000;
	cfg.max_delay_ns = 1000;
	cfg.jitter = RESIL_JITTER_DECORRELATED_V2;
	cfg.random.uniform = half;
	assert_int_equal(
	    resil_retry_plan(&cfg, &cfg.random, waits, 4, &n, NULL), RESIL_OK);
	assert_int_equal(n, 3);
	assert_int_equal(waits[2], 1000);
	/* A delay under the cap is kept. */
	resil_retry_config_init(&cfg);
	cfg.base_delay_ns = 1000;
	cfg.max_delay_ns = 2000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_next_delay(r, 3, 0, 0.0, &waits[0]), RESIL_OK);
	assert_int_equal(waits[0], 1000);
	resil_retry_free(r);
	/* A cap below the base is refused, naming both fields. */
	cfg.base_delay_ns = 10000;
	cfg.max_delay_ns = 1000;
	assert_int_equal(resil_retry_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "retry.max_delay_ns: 1000 is below "
	    "retry.base_delay_ns"));
}

/* Polly RetryHelperTests.GetRetryDelay_Exponential_Is_Positive_When_No_
 * Maximum_Delay and .._Does_Not_Exceed_MaxDelay (exponential with jitter,
 * base 2 s, attempts up to 1025; resil's limit is 1000): every wait of a
 * seeded 1000-attempt plan is > 0, and <= 30 s under that cap. */
static void
test_peers_polly_v2_jitter_positive_and_capped(void **state)
{
	static uint64_t waits[RESIL_RETRY_MAX_ATTEMPTS];
	resil_retry_config cfg;
	resil_rng rng;
	resil_random rnd;
	size_t n, i;

	(void)state;
	resil_retry_config_init(&cfg);
	cfg.max_attempts = RESIL_RETRY_MAX_ATTEMPTS;
	cfg.base_delay_ns = 2000;
	cfg.jitter = RESIL_JITTER_DECORRELATED_V2;
	resil_rng_seed(&rng, 0);
	rnd = resil_rng_hook(&rng);
	assert_int_equal(resil_retry_plan(&cfg, &rnd, waits,
	                     RESIL_RETRY_MAX_ATTEMPTS, &n, NULL),
	    RESIL_OK);
	assert_int_equal(n, RESIL_RETRY_MAX_ATTEMPTS - 1);
	for (i = 0; i < n; i++)
		assert_true(waits[i] > 0);
	assert_true(waits[n - 1] == UINT64_MAX); /* 2^999 s saturates */
	cfg.max_delay_ns = 30000;
	resil_rng_seed(&rng, 0);
	assert_int_equal(resil_retry_plan(&cfg, &rnd, waits,
	                     RESIL_RETRY_MAX_ATTEMPTS, &n, NULL),
	    RESIL_OK);
	for (i = 0; i < n; i++) {
		assert_true(waits[i] > 0);
		assert_true(waits[i] <= 30000);
	}
}

typedef struct answer {
	int rc;
	uint64_t await; /* the "Await N" the answer carries */
} answer;

typedef struct answers {
	const answer *script;
	int n, calls;
} answers;

static int
answers_fn(void *ctx, resil_retry_attempt *a, void *out)
{
	answers *as = ctx;
	const answer *x =
	    &as->script[as->calls < as->n ? as->calls : as->n - 1];

	(void)a;
	as->calls++;
	*(answer *)out = *x;
	return x->rc;
}

static int
retry_if_await(int rc, const void *value, void *ctx)
{
	(void)rc;
	(void)ctx;
	return ((const answer *)value)->await != 0;
}

/* The wait the answer asks for; 1000 after an exception (rc != 0). */
static uint64_t
await_backoff(
    uint32_t attempt, uint64_t prev_wait, int rc, const void *value, void *ctx)
{
	(void)attempt;
	(void)prev_wait;
	(void)ctx;
	if (rc != 0 || value == NULL)
		return 1000;
	return ((const answer *)value)->await;
}

/* SupplierRetryTest.shouldUseBackoffBiFunctionWhenRetryWithResult: the
 * answers "Await 100", "Await 200", "Hello world" with retry-on-result for
 * "Await" and an interval function of the attempt and its result: waits
 * of 100 then 200, 300 in all, and the third answer. (Polly's
 * DelayGenerator sees the outcome the same way.) An exception in between
 * gets the function's 1000; resil_retry_plan(), with no attempt, gets rc
 * 0 and a NULL value. */
static void
test_peers_r4j_backoff_from_the_result(void **state)
{
	static const answer script[] = { { 0, 100 }, { 0, 200 }, { 0, 0 } };
	static const answer with_error[] = { { 0, 100 }, { 5, 0 }, { 0, 0 } };
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry *r;
	answers as = { script, 3, 0 };
	answer out;
	resil_retry_result res;
	uint64_t waits[2];
	size_t n;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_retry_config_init(&cfg);
	cfg.backoff = RESIL_BACKOFF_CUSTOM;
	cfg.backoff_fn = NULL;
	cfg.backoff_result_fn = await_backoff;
	cfg.base_delay_ns = 0;
	cfg.retry_on_result = retry_if_await;
	retry_new_manual(&r, &cfg, &mc);
	assert_int_equal(
	    resil_retry_call(r, answers_fn, &as, &out, &res), RESIL_OK);
	assert_int_equal(as.calls, 3);
	assert_int_equal(out.await, 0);
	assert_int_equal(res.waited, 300);
	assert_int_equal(resil_manual_clock_now(&mc), 300);
	as.script = with_error;
	as.calls = 0;
	assert_int_equal(
	    resil_retry_call(r, answers_fn, &as, &out, &res), RESIL_OK);
	assert_int_equal(as.calls, 3);
	assert_int_equal(res.waited, 1100);
	resil_retry_free(r);
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, waits, 2, &n, NULL), RESIL_OK);
	assert_int_equal(n, 2);
	assert_int_equal(waits[0], 1000);
	assert_int_equal(waits[1], 1000);
}

/* ------------------------------------------------------------------ */
/* Rate limiter and bulkhead                                          */
/* ------------------------------------------------------------------ */

/* resilience4j-ratelimiter AtomicRateLimiterTest (reservation with a
 * timeout: a permit due later than the timeout is refused at once and
 * nothing is reserved; one due within it is waited for, exactly). 1 per
 * 1000 ticks, burst 1. */
static void
test_peers_r4j_rate_limiter_wait_within_timeout(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit_config cfg;
	resil_ratelimit *rl;
	resil_ratelimit_metrics m;
	uint64_t waited = 77, after = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_ratelimit_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.rate = 1;
	cfg.period_ns = 1000;
	cfg.burst = 1;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 0, &waited), RESIL_OK);
	assert_int_equal(waited, 0);
	waited = 77;
	assert_int_equal(resil_ratelimit_acquire_wait(rl, 1, 0, &waited),
	    RESIL_E_LIMITED); /* timeout 0: no wait */
	assert_int_equal(resil_ratelimit_acquire_wait(rl, 1, 999, &waited),
	    RESIL_E_LIMITED);
	assert_int_equal(waited, 77);
	assert_int_equal(resil_manual_clock_now(&mc), 0); /* no sleep */
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 1000, &waited), RESIL_OK);
	assert_int_equal(waited, 1000);
	assert_int_equal(resil_manual_clock_now(&mc), 1000);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 1000);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_calls, 2);
	assert_int_equal(m.granted_permits, 2);
	assert_int_equal(m.rejected_calls, 3);
	assert_int_equal(m.waited_calls, 1);
	assert_int_equal(m.available, 0);
	resil_ratelimit_free(rl);
}

/* AtomicRateLimiterTest (permits and their refresh, 10 per 1000 ticks,
 * burst 10, drained at 0): available after each step; one permit back
 * each 100 ticks, the first at exactly 100 (retry_after 1 at 99); a
 * request for more than the burst could never be granted and is refused
 * as invalid, as is a request for 0. */
static void
test_peers_r4j_rate_limiter_refresh_steps(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit_config cfg;
	resil_ratelimit *rl;
	resil_ratelimit_metrics m;
	uint64_t after = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_ratelimit_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.rate = 10;
	cfg.period_ns = 1000;
	cfg.burst = 10;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.available, 10);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 11, &after), RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 0, &after), RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 10, &after), RESIL_OK);
	resil_manual_clock_set(&mc, 99);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 1);
	resil_manual_clock_set(&mc, 500);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.available, 5);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 6, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 100);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 5, &after), RESIL_OK);
	resil_manual_clock_set(&mc, 5000); /* long idle: back to the burst */
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.available, 10);
	assert_int_equal(m.granted_permits, 15);
	assert_int_equal(m.rejected_calls, 2);
	resil_ratelimit_free(rl);
}

/* AtomicRateLimiterTest with a clock that moves back: the limiter's
 * answer covers the way back, so waiting retry_after is always enough.
 * 1 per 1000 ticks, burst 1: taken at 5000, asked at 4000 -> 2000. */
static void
test_peers_r4j_rate_limiter_clock_moved_back(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit_config cfg;
	resil_ratelimit *rl;
	uint64_t after = 0;

	(void)state;
	resil_manual_clock_init(&mc, 5000);
	resil_ratelimit_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.rate = 1;
	cfg.period_ns = 1000;
	cfg.burst = 1;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &after), RESIL_OK);
	resil_manual_clock_set(&mc, 4000);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 2000);
	resil_manual_clock_set(&mc, 4000 + after);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &after), RESIL_OK);
	resil_ratelimit_free(rl);
}

/* A clock whose sleep lets "another thread" act while the sleeper waits,
 * then advances the manual clock: what a reservation looks like from
 * outside while it is held. */
typedef struct peek_clock {
	resil_manual_clock mc;
	resil_clock clk;
	resil_ratelimit *rl;
	uint64_t slept;
	resil_err other;      /* the other caller's answer */
	uint64_t other_after; /* and its retry_after */
	uint64_t available;   /* metrics during the sleep */
} peek_clock;

static uint64_t
peek_now(void *ctx)
{
	peek_clock *pc = ctx;

	return resil_manual_clock_now(&pc->mc);
}

static void
peek_sleep(uint64_t ticks, void *ctx)
{
	peek_clock *pc = ctx;
	resil_ratelimit_metrics m;

	pc->slept = ticks;
	pc->other = resil_ratelimit_try_acquire(pc->rl, 1, &pc->other_after);
	resil_ratelimit_get_metrics(pc->rl, &m);
	pc->available = m.available;
	resil_manual_clock_advance(&pc->mc, ticks);
}

/* AtomicRateLimiterTest.reserveAndRefresh and
 * .reserveFewThenSkipCyclesBeforeRefresh (1 permit per 1000-tick cycle,
 * timeout one cycle): taken at 1000; a second caller reserves the next
 * permit and waits 1000; while it waits, a third is told 2000 (two
 * cycles: it queues behind the reservation) and nothing is available
 * (Resilience4j shows -1 there; resil's count is unsigned and shows 0).
 * After idle cycles the limiter holds its one permit again. */
static void
test_peers_r4j_rate_limiter_reservation_seen_while_waiting(void **state)
{
	peek_clock pc;
	resil_ratelimit_config cfg;
	resil_ratelimit_metrics m;
	uint64_t waited = 0, after = 0;

	(void)state;
	memset(&pc, 0, sizeof(pc));
	resil_manual_clock_init(&pc.mc, 1000);
	pc.clk.now = peek_now;
	pc.clk.sleep = peek_sleep;
	pc.clk.ctx = &pc;
	resil_ratelimit_config_init(&cfg);
	cfg.clock = &pc.clk;
	cfg.rate = 1;
	cfg.period_ns = 1000;
	cfg.burst = 1;
	assert_int_equal(resil_ratelimit_new(&pc.rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(pc.rl, 1, &after), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(pc.rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 1000);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(pc.rl, 1, 1000, &waited), RESIL_OK);
	assert_int_equal(waited, 1000);
	assert_int_equal(pc.slept, 1000);
	assert_int_equal(pc.other, RESIL_E_LIMITED);
	assert_int_equal(pc.other_after, 2000);
	assert_int_equal(pc.available, 0);
	assert_int_equal(resil_manual_clock_now(&pc.mc), 2000);
	/* Reserved and waited-for: nothing left at 2000 + 10. */
	resil_manual_clock_set(&pc.mc, 2010);
	assert_int_equal(resil_ratelimit_get_metrics(pc.rl, &m), RESIL_OK);
	assert_int_equal(m.available, 0);
	assert_int_equal(
	    resil_ratelimit_try_acquire(pc.rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 990);
	resil_manual_clock_set(&pc.mc, 6010);
	assert_int_equal(resil_ratelimit_get_metrics(pc.rl, &m), RESIL_OK);
	assert_int_equal(m.available, 1);
	assert_int_equal(m.waited_calls, 1);
	resil_ratelimit_free(pc.rl);
}

/* resilience4j-bulkhead SemaphoreBulkheadTest.testBulkhead
 * (maxConcurrentCalls 2): two enter, the third is refused; the metrics
 * after each step; a release lets one more in. */
static void
test_peers_r4j_bulkhead_metrics_each_step(void **state)
{
	resil_bulkhead_config cfg;
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;

	(void)state;
	resil_bulkhead_config_init(&cfg);
	cfg.max_concurrent = 2;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 1);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 2);
	assert_int_equal(m.granted, 2);
	assert_int_equal(m.rejected, 1);
	assert_int_equal(m.peak_in_flight, 2);
	assert_int_equal(m.limit, 2);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 1);
	assert_int_equal(m.released, 1);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.granted, 3);
	assert_int_equal(m.rejected, 2);
	assert_int_equal(m.peak_in_flight, 2);
	resil_bulkhead_free(bh);
}

typedef struct limit_log {
	resil_limit_event ev[8];
	int n;
} limit_log;

static void
limit_log_fn(const resil_limit_event *ev, void *ctx)
{
	limit_log *l = ctx;

	if (l->n < 8)
		l->ev[l->n++] = *ev;
}

/* SemaphoreBulkheadTest.testBulkhead's events (maxConcurrentCalls 2):
 * Resilience4j publishes PERMITTED, PERMITTED, REJECTED, FINISHED,
 * FINISHED, PERMITTED. Design choice (docs/semantics.md, "Peer
 * scenarios"): resil's listener hears only the rejection (with the limit
 * and the calls in flight), grants and releases are counted in the
 * metrics, so the grant path calls nothing. */
static void
test_peers_r4j_bulkhead_events(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead_config cfg;
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;
	limit_log log;

	(void)state;
	memset(&log, 0, sizeof(log));
	resil_manual_clock_init(&mc, 42);
	resil_bulkhead_config_init(&cfg);
	cfg.max_concurrent = 2;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.listener = limit_log_fn;
	cfg.listener_ctx = &log;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.limit - m.in_flight, 1); /* available */
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.limit - m.in_flight, 2);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(log.n, 1);
	assert_int_equal(log.ev[0].type, RESIL_LIMIT_EVENT_REJECTED);
	assert_int_equal(log.ev[0].time, 42);
	assert_int_equal(log.ev[0].limit, 2);
	assert_int_equal(log.ev[0].in_flight, 2);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.granted, 3);
	assert_int_equal(m.rejected, 1);
	assert_int_equal(m.released, 2);
	resil_bulkhead_free(bh);
}

/* SemaphoreBulkheadTest.testZeroMaxConcurrentCalls: Resilience4j accepts
 * maxConcurrentCalls 0 (every call refused). Design choice
 * (docs/semantics.md, "Peer scenarios"): resil refuses it at
 * configuration time, naming the field. */
static void
test_peers_r4j_bulkhead_zero_limit_refused(void **state)
{
	resil_bulkhead_config cfg;
	resil_bulkhead *bh = NULL;
	resil_diag d;

	(void)state;
	resil_bulkhead_config_init(&cfg);
	cfg.max_concurrent = 0;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, &d), RESIL_E_INVAL);
	assert_null(bh);
	assert_string_equal(
	    d.msg, "bulkhead.max_concurrent: 0 is out of range 1..1073741824");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_peers_r4j_time_window_trips_at_exactly_half),
		cmocka_unit_test(
		    test_peers_r4j_breaker_call_measures_slow_calls),
		cmocka_unit_test(test_peers_r4j_not_permitted_counts),
		cmocka_unit_test(test_peers_r4j_rejections_are_lifetime),
		cmocka_unit_test(
		    test_peers_r4j_same_state_transition_is_silent),
		cmocka_unit_test(test_peers_r4j_metrics_only_from_every_state),
		cmocka_unit_test(
		    test_peers_r4j_half_open_max_wait_without_probes),
		cmocka_unit_test(test_peers_r4j_slow_failure_counts_twice),
		cmocka_unit_test(
		    test_peers_gobreaker_state_read_after_timeout),
		cmocka_unit_test(test_peers_r4j_time_window_after_long_idle),
		cmocka_unit_test(test_peers_open_wait_with_clock_moved_back),
		cmocka_unit_test(
		    test_peers_polly_open_deadline_does_not_overflow),
		cmocka_unit_test(test_peers_polly_throughput_and_ratio_table),
		cmocka_unit_test(test_peers_polly_r4j_trip_on_a_success),
		cmocka_unit_test(test_peers_r4j_decorated_call_counts),
		cmocka_unit_test(test_peers_r4j_rates_as_floats),
		cmocka_unit_test(
		    test_peers_polly_late_outcome_and_business_probe),
		cmocka_unit_test(
		    test_peers_min_calls_counts_recorded_outcomes_only),
		cmocka_unit_test(test_peers_slow_rate_boundary),
		cmocka_unit_test(test_peers_gobreaker_state_names),
		cmocka_unit_test(test_peers_gobreaker_rolling_window),
		cmocka_unit_test(
		    test_peers_gobreaker_interval_clear_and_late_outcome),
		cmocka_unit_test(
		    test_peers_gobreaker_consecutive_count_in_metrics),
		cmocka_unit_test(test_peers_r4j_retry_result_after_exception),
		cmocka_unit_test(
		    test_peers_r4j_fail_after_max_attempts_kind_of_last),
		cmocka_unit_test(test_peers_r4j_retry_metrics_two_calls),
		cmocka_unit_test(test_peers_r4j_retry_events),
		cmocka_unit_test(test_peers_r4j_capped_exponential_intervals),
		cmocka_unit_test(
		    test_peers_r4j_capped_exponential_random_intervals),
		cmocka_unit_test(test_peers_r4j_attempt_zero_refused),
		cmocka_unit_test(test_peers_r4j_interval_config_bounds),
		cmocka_unit_test(
		    test_peers_polly_exponential_overflow_saturates),
		cmocka_unit_test(
		    test_peers_polly_max_delay_caps_custom_backoff),
		cmocka_unit_test(test_peers_polly_max_delay_every_backoff),
		cmocka_unit_test(test_peers_r4j_backoff_from_the_result),
		cmocka_unit_test(
		    test_peers_polly_v2_jitter_positive_and_capped),
		cmocka_unit_test(
		    test_peers_r4j_rate_limiter_wait_within_timeout),
		cmocka_unit_test(test_peers_r4j_rate_limiter_refresh_steps),
		cmocka_unit_test(test_peers_r4j_rate_limiter_clock_moved_back),
		cmocka_unit_test(
		    test_peers_r4j_rate_limiter_reservation_seen_while_waiting),
		cmocka_unit_test(test_peers_r4j_bulkhead_metrics_each_step),
		cmocka_unit_test(test_peers_r4j_bulkhead_zero_limit_refused),
		cmocka_unit_test(test_peers_r4j_bulkhead_events),
	};

	return cmocka_run_group_tests_name(
	    "scenarios_peers", tests, NULL, NULL);
}

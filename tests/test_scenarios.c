/*
 * Black-box scenarios ported from the peers' test suites (Resilience4j,
 * Polly, gobreaker, Dubbo) and from the project's seeds, run against the
 * public API only. Each test names the peer file and test it comes from.
 *
 * Units: a peer's durations become manual-clock ticks. Where a scenario
 * used seconds and milliseconds at once (Resilience4j's slow calls), one
 * tick is one millisecond; elsewhere one tick is the peer's unit (gobreaker
 * and Polly: seconds; the inventory seed: its time units).
 *
 * Where resil differs from a peer, the comment says so and says whether
 * DESIGN.md's "Decided semantics" decides it (the test follows DESIGN) or
 * not (the test follows what resil does, and the difference is listed for
 * review).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/config.h>
#include <resil/fallback.h>
#include <resil/limit.h>
#include <resil/mock.h>
#include <resil/pipeline.h>
#include <resil/resil.h>
#include <resil/retry.h>
#include <resil/value.h>

#ifdef RESIL_TEST_MACHINE
/* Run every call through the call machine, stepped by hand. */
#include "support/machine_driver.h"
#define resil_pipeline_call machine_pipeline_call
#define resil_pipeline_deadline machine_pipeline_deadline
#endif

/* ------------------------------------------------------------------ */
/* Breaker helpers                                                    */
/* ------------------------------------------------------------------ */

#include "support/breaker_fx.h"

static void
call_o(bfx *f, resil_outcome o)
{
	resil_permit p;

	assert_int_equal(resil_breaker_acquire(f->b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(f->b, &p, o), RESIL_OK);
}

#define S RESIL_OUTCOME_SUCCESS
#define F RESIL_OUTCOME_FAILURE
#define I RESIL_OUTCOME_IGNORED

/*
 * Resilience4j CircuitBreakerStateMachineTest.setUp(): failure rate 50%,
 * 4 calls in HALF_OPEN, slow threshold 4 s at a slow rate of 50%, a
 * TIME_BASED window of 5 s with 5 minimum calls, OPEN wait 5 s. One tick is
 * one millisecond.
 */
static void
r4j_setup(bfx *f)
{
	bfx_init(f, 0);
	f->cfg.failure_rate_pct = 50;
	f->cfg.permitted_probes = 4;
	f->cfg.slow_threshold_ns = 4000;
	f->cfg.slow_rate_pct = 50;
	f->cfg.window_type = RESIL_WINDOW_TIME;
	f->cfg.window_size = 5;
	f->cfg.bucket_ns = 1000;
	f->cfg.min_calls = 5;
	f->cfg.open_wait_ns = 5000;
	bfx_new(f);
}

/* ---- Resilience4j ------------------------------------------------ */

/* resilience4j-circuitbreaker CircuitBreakerStateMachineTest
 * .shouldOpenAfterFailureRateThresholdExceeded */
static void
test_scenarios_r4j_open_after_failure_rate_exceeded(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f);
	call_dur(&f, F, 0);
	call_dur(&f, F, 0);
	call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_true(m.failure_rate == -1.0f); /* below min calls */
	assert_int_equal(m.window_calls, 3);
	assert_int_equal(m.window_failures, 3);
	call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_dur(&f, S, 0);
	/* 3 of 5 = 60% >= 50%: OPEN. */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	m = mx(&f);
	/* As Resilience4j: OPEN still reports the window that tripped it,
	 * 5 buffered calls, 3 failed, a 60% failure rate. */
	assert_int_equal(m.window_calls, 5);
	assert_int_equal(m.window_failures, 3);
	assert_true(m.failure_rate == 60.0f);
	assert_int_equal(m.failures, 3);
	assert_int_equal(m.successes, 2);
	assert_int_equal(f.rec.count, 1);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_FAILURE_RATE);
	assert_false(try_acquire(&f));
	assert_int_equal(mx(&f).rejections, 1);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldOpenAfterSlowCallRateThresholdExceeded:
 * 5 s calls are slow against the 4 s threshold, 100 ms calls are not. */
static void
test_scenarios_r4j_open_after_slow_call_rate_exceeded(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f);
	call_dur(&f, F, 5000);
	call_dur(&f, S, 5000);
	call_dur(&f, F, 100);
	call_dur(&f, S, 100);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_dur(&f, S, 5000);
	/* 2 of 5 failed (40%), 3 of 5 slow (60%). */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	m = mx(&f);
	/* As Resilience4j: 5 buffered, 3 slow, slow rate 60% in OPEN. */
	assert_int_equal(m.slow_calls, 3);
	assert_int_equal(m.window_calls, 5);
	assert_int_equal(m.window_slow, 3);
	assert_true(m.slow_call_rate == 60.0f);
	assert_true(m.failure_rate == 40.0f);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_SLOW_CALL_RATE);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldTransitionToHalfOpenAfterWaitDuration.
 * Resilience4j checks +3 s (OPEN) and +6 s (HALF_OPEN); DESIGN decides the
 * exact boundary, checked here too: rejected at opened_at + wait - 1 with
 * retry_after 1, admitted at opened_at + wait. */
static void
test_scenarios_r4j_half_open_after_wait_duration(void **state)
{
	bfx f;
	resil_permit p;
	uint64_t after = 0;

	(void)state;
	r4j_setup(&f);
	assert_int_equal(
	    resil_breaker_transition(f.b, RESIL_BREAKER_OPEN), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_false(try_acquire(&f));
	resil_manual_clock_advance(&f.mc, 3000);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_int_equal(after, 2000);
	assert_int_equal(mx(&f).rejections, 2);
	resil_manual_clock_set(&f.mc, 4999);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_int_equal(after, 1);
	resil_manual_clock_set(&f.mc, 5000);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	/* Counts start empty in HALF_OPEN. */
	assert_int_equal(mx(&f).window_calls, 0);
	assert_int_equal(mx(&f).probes_granted, 1);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldTransitionToHalfOpenAfterWaitInterval
 * (IntervalFunction.ofExponentialBackoff(5000): 5 s, then 7.5 s).
 * As in Resilience4j, every consecutive reopening from HALF_OPEN grows
 * the wait, whether a failed probe or a manual transition reopens it
 * (checked at the end); entering CLOSED brings it back to the base. */
static void
test_scenarios_r4j_open_wait_grows_exponentially(void **state)
{
	bfx f;
	resil_permit p;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 5000;
	f.cfg.open_wait_multiplier = 1.5;
	bfx_new(&f);
	call_o(&f, F); /* OPEN at 0, wait 5000 */
	resil_manual_clock_set(&f.mc, 4999);
	assert_false(try_acquire(&f));
	resil_manual_clock_set(&f.mc, 5000);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(f.b, &p, F), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(mx(&f).open_wait, 7500);
	resil_manual_clock_set(&f.mc, 5000 + 7499);
	assert_false(try_acquire(&f));
	resil_manual_clock_set(&f.mc, 5000 + 7500);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(f.b, &p, F), RESIL_OK);
	assert_int_equal(mx(&f).open_wait, 11250);
	/* A success closes and brings the wait back to the base. */
	resil_manual_clock_advance(&f.mc, 11250);
	call_o(&f, S);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).open_wait, 5000);
	/* By hand: OPEN (base), HALF_OPEN, OPEN again: 7500, as in
	 * Resilience4j. */
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	assert_int_equal(mx(&f).open_wait, 5000);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	assert_int_equal(mx(&f).open_wait, 7500);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldOnlyPermitFourCallsInHalfOpenState
 * and .shouldThrowCallNotPermittedExceptionWhenNotFurtherTestCallsArePermitted
 */
static void
test_scenarios_r4j_only_four_probes_in_half_open(void **state)
{
	bfx f;
	int round;

	(void)state;
	r4j_setup(&f);
	for (round = 0; round < 2; round++) {
		assert_int_equal(
		    resil_breaker_transition(f.b, RESIL_BREAKER_OPEN),
		    RESIL_OK);
		assert_int_equal(
		    resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN),
		    RESIL_OK);
		assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
		assert_true(try_acquire(&f));
		assert_true(try_acquire(&f));
		assert_true(try_acquire(&f));
		assert_true(try_acquire(&f));
		assert_false(try_acquire(&f));
		assert_false(try_acquire(&f));
	}
	assert_int_equal(mx(&f).rejections, 4);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldIncreaseCounterOnReleasePermission */
static void
test_scenarios_r4j_release_permission_gives_probe_back(void **state)
{
	bfx f;
	resil_permit p[4];
	int i;

	(void)state;
	r4j_setup(&f);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	for (i = 0; i < 4; i++)
		assert_int_equal(resil_breaker_acquire(f.b, &p[i]), RESIL_OK);
	assert_false(try_acquire(&f));
	assert_false(try_acquire(&f));
	assert_int_equal(resil_breaker_release(f.b, &p[3]), RESIL_OK);
	assert_true(try_acquire(&f));
	assert_false(try_acquire(&f));
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest
 * .shouldTransitionBackToOpenStateWhenFailureRateIsAboveThreshold:
 * F, F, S, F in HALF_OPEN is 75% -> OPEN. */
static void
test_scenarios_r4j_half_open_reopens_on_failure_rate(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	call_dur(&f, F, 0);
	call_dur(&f, F, 0);
	call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(mx(&f).probes_reported, 3);
	assert_int_equal(mx(&f).window_calls, 3);
	assert_true(mx(&f).failure_rate == -1.0f); /* 3 of 4 reported */
	call_dur(&f, F, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[f.rec.count - 1].reason,
	    RESIL_BREAKER_REASON_PROBES_FAILED);
	/* As Resilience4j: the reopened breaker shows the probes' 75%. */
	assert_int_equal(mx(&f).window_calls, 4);
	assert_int_equal(mx(&f).window_failures, 3);
	assert_true(mx(&f).failure_rate == 75.0f);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest
 * .shouldTransitionBackToOpenStateWhenSlowCallRateIsAboveThreshold:
 * three 5 s successes and one 1 s success: slow rate 75% -> OPEN. */
static void
test_scenarios_r4j_half_open_reopens_on_slow_rate(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	call_dur(&f, S, 5000);
	call_dur(&f, S, 5000);
	call_dur(&f, S, 5000);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	call_dur(&f, S, 1000);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[f.rec.count - 1].reason,
	    RESIL_BREAKER_REASON_PROBES_FAILED);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest
 * .shouldTransitionBackToClosedStateWhenFailureIsBelowThreshold:
 * F, S, S, S (25%) -> CLOSED with empty counts; the next success is the
 * first outcome of the new window. */
static void
test_scenarios_r4j_half_open_closes_below_threshold(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	call_dur(&f, F, 0);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	m = mx(&f);
	assert_int_equal(m.window_calls, 0);
	assert_true(m.failure_rate == -1.0f);
	call_dur(&f, S, 0);
	m = mx(&f);
	assert_int_equal(m.window_calls, 1);
	assert_int_equal(m.window_failures, 0);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldReleasePermissionWhenExceptionIgnored:
 * S, S, S, an ignored exception (the permit comes back), then a failure:
 * 1 of 4 -> CLOSED. */
static void
test_scenarios_r4j_ignored_outcome_releases_probe(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	assert_int_equal(mx(&f).probes_reported, 3);
	call_dur(&f, I, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(mx(&f).probes_reported, 3);
	assert_int_equal(mx(&f).probes_granted, 3);
	call_dur(&f, F, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).window_calls, 0);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldIgnoreExceptionsAndThenTransitionToClosed:
 * four ignored outcomes decide nothing, four successes close. */
static void
test_scenarios_r4j_ignored_then_closed(void **state)
{
	bfx f;
	int i;

	(void)state;
	r4j_setup(&f);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN);
	for (i = 0; i < 4; i++) {
		call_dur(&f, I, 0);
		assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	}
	assert_int_equal(mx(&f).probes_reported, 0);
	for (i = 0; i < 3; i++) {
		call_dur(&f, S, 0);
		assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	}
	call_dur(&f, S, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldForceOpenCircuitBreaker and
 * .shouldDisableCircuitBreaker */
static void
test_scenarios_r4j_forced_open_and_disabled(void **state)
{
	bfx f;
	resil_permit p;
	uint64_t after = 0;
	resil_breaker_metrics m;
	int i;

	(void)state;
	r4j_setup(&f);
	assert_int_equal(resil_breaker_force_open(f.b), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_FORCED_OPEN);
	assert_false(try_acquire(&f));
	resil_manual_clock_advance(&f.mc, 6000); /* past the 5 s wait */
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_true(after == UINT64_MAX);
	assert_int_equal(st(&f), RESIL_BREAKER_FORCED_OPEN);
	assert_int_equal(mx(&f).rejections, 2);

	assert_int_equal(resil_breaker_disable(f.b), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_DISABLED);
	call_dur(&f, S, 0);
	for (i = 0; i < 4; i++)
		call_dur(&f, F, 0);
	m = mx(&f);
	assert_int_equal(st(&f), RESIL_BREAKER_DISABLED);
	assert_int_equal(m.successes, 0); /* records nothing */
	assert_int_equal(m.failures, 0);
	assert_int_equal(m.window_calls, 0);
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldResetMetrics, .shouldResetToClosedState
 */
static void
test_scenarios_r4j_reset_clears_counts(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f);
	call_dur(&f, S, 0);
	call_dur(&f, F, 0);
	assert_int_equal(mx(&f).window_calls, 2);
	assert_int_equal(mx(&f).window_failures, 1);
	assert_int_equal(resil_breaker_reset(f.b), RESIL_OK);
	assert_int_equal(mx(&f).window_calls, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	resil_breaker_transition(f.b, RESIL_BREAKER_OPEN);
	assert_int_equal(resil_breaker_reset(f.b), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_true(try_acquire(&f));
	resil_breaker_free(f.b);
}

/* CircuitBreakerStateMachineTest.shouldNotAllowTransitionFromClosedToHalfOpen.
 * Difference to review (DESIGN silent): Resilience4j refuses CLOSED ->
 * HALF_OPEN with IllegalStateTransitionException; resil_breaker_transition
 * moves to any state, so here it succeeds and starts a probe episode. */
static void
test_scenarios_r4j_transition_closed_to_half_open(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f);
	assert_int_equal(
	    resil_breaker_transition(f.b, RESIL_BREAKER_HALF_OPEN), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(f.rec.count, 1);
	assert_int_equal(f.events[0].from, RESIL_BREAKER_CLOSED);
	assert_int_equal(f.events[0].reason, RESIL_BREAKER_REASON_MANUAL);
	resil_breaker_free(f.b);
}

/* resilience4j SlidingTimeWindowMetricsTest (outcomes leave the window when
 * its span has passed). DESIGN: they leave even when no call arrives:
 * metrics read later show it. 5 buckets of 1000 ticks. */
static void
test_scenarios_r4j_time_window_drops_old_outcomes(void **state)
{
	bfx f;

	(void)state;
	r4j_setup(&f);
	call_dur(&f, F, 0); /* bucket 0 */
	resil_manual_clock_set(&f.mc, 2500);
	call_dur(&f, S, 0); /* bucket 2 */
	resil_manual_clock_set(&f.mc, 4999);
	assert_int_equal(mx(&f).window_calls, 2);
	resil_manual_clock_set(&f.mc, 5000); /* bucket 0 has left */
	assert_int_equal(mx(&f).window_calls, 1);
	assert_int_equal(mx(&f).window_failures, 0);
	resil_manual_clock_set(&f.mc, 7000); /* so has bucket 2 */
	assert_int_equal(mx(&f).window_calls, 0);
	resil_breaker_free(f.b);
}

/* resilience4j FixedSizeSlidingWindowMetricsTest (a count window evicts its
 * oldest outcome), with the breaker in METRICS_ONLY so it cannot trip. */
static void
test_scenarios_r4j_count_window_evicts_oldest(void **state)
{
	bfx f;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.window_size = 5;
	f.cfg.min_calls = 5;
	bfx_new(&f);
	assert_int_equal(resil_breaker_metrics_only(f.b), RESIL_OK);
	call_o(&f, F);
	call_o(&f, F);
	call_o(&f, S);
	call_o(&f, S);
	call_o(&f, S);
	assert_int_equal(mx(&f).window_calls, 5);
	assert_int_equal(mx(&f).window_failures, 2);
	assert_true(mx(&f).failure_rate == 40.0f);
	call_o(&f, S); /* evicts the first F */
	assert_int_equal(mx(&f).window_calls, 5);
	assert_int_equal(mx(&f).window_failures, 1);
	call_o(&f, S); /* evicts the second F */
	assert_int_equal(mx(&f).window_failures, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_METRICS_ONLY);
	resil_breaker_free(f.b);
}

/* resilience4j CircuitBreakerConfigTest (minimumNumberOfCalls larger than a
 * COUNT_BASED slidingWindowSize is capped at the window size; DESIGN too). */
static void
test_scenarios_r4j_min_calls_capped_at_window(void **state)
{
	bfx f;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.window_size = 3;
	f.cfg.min_calls = 10;
	bfx_new(&f);
	call_o(&f, F);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* resilience4j CircuitBreakerConfigTest (zeroSlidingWindowSizeShouldFail,
 * failureRateThresholdAboveHundredShouldFail,
 * zeroPermittedNumberOfCallsInHalfOpenStateShouldFail) and
 * RetryConfigBuilderTest (zeroMaxAttemptsShouldFail): refused with a message
 * naming the field. */
static void
test_scenarios_r4j_config_refusals_name_the_field(void **state)
{
	resil_breaker_config bc;
	resil_retry_config rc;
	resil_breaker *b = NULL;
	resil_retry *r = NULL;
	resil_diag d;

	(void)state;
	bc = resil_breaker_config_default();
	bc.failure_rate_pct = 101;
	assert_int_equal(resil_breaker_new(&b, &bc, &d), RESIL_E_INVAL);
	assert_null(b);
	assert_non_null(strstr(d.msg, "breaker.failure_rate_pct"));

	bc = resil_breaker_config_default();
	bc.window_size = 0;
	assert_int_equal(
	    resil_breaker_config_validate(&bc, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "breaker.window_size"));

	bc = resil_breaker_config_default();
	bc.permitted_probes = 0;
	assert_int_equal(
	    resil_breaker_config_validate(&bc, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "breaker.permitted_probes"));

	rc = resil_retry_config_default();
	rc.max_attempts = 0;
	assert_int_equal(resil_retry_new(&r, &rc, &d), RESIL_E_INVAL);
	assert_null(r);
	assert_string_equal(
	    d.msg, "retry.max_attempts: 0 is out of range 1..1000");
}

/* ---- gobreaker ------------------------------------------------------ */

/* sony/gobreaker gobreaker_test.go TestDefaultCircuitBreaker: ReadyToTrip
 * is ConsecutiveFailures > 5 (consecutive_failures = 6), Timeout 60 s,
 * MaxRequests 1. One tick is one second.
 * Difference (DESIGN silent, to review): gobreaker's State() moves OPEN to
 * HALF_OPEN by itself once the timeout has passed; resil's state is a plain
 * load and the move happens at the first acquire after the wait. */
static void
test_scenarios_gobreaker_default_breaker(void **state)
{
	bfx f;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 6;
	f.cfg.open_wait_ns = 60;
	bfx_new(&f);
	for (i = 0; i < 5; i++)
		call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).consecutive_failures, 5);
	call_o(&f, S);
	assert_int_equal(mx(&f).consecutive_failures, 0);
	call_o(&f, F);
	assert_int_equal(mx(&f).consecutive_failures, 1);
	for (i = 0; i < 5; i++)
		call_o(&f, F); /* 6 consecutive failures */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_false(try_acquire(&f));
	assert_false(try_acquire(&f));

	resil_manual_clock_set(&f.mc, 59);
	assert_false(try_acquire(&f));
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 60);
	/* HALF_OPEN -> OPEN on a failed probe. */
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 120);
	/* HALF_OPEN -> CLOSED on a successful probe, counts empty. */
	call_o(&f, S);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).consecutive_failures, 0);
	assert_int_equal(f.rec.count, 5);
	assert_int_equal(f.events[0].to, RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[1].to, RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(f.events[1].time, 60);
	assert_int_equal(f.events[2].to, RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[3].to, RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(f.events[4].to, RESIL_BREAKER_CLOSED);
	resil_breaker_free(f.b);
}

/* gobreaker_test.go TestCustomCircuitBreaker: Interval 30 s (the counts are
 * cleared every 30 s: a time window of one 30-tick bucket), ReadyToTrip
 * requests >= 3 and failure ratio >= 0.6, Timeout 90 s, MaxRequests 3.
 * Difference (DESIGN decides: HALF_OPEN decides only after all K probes
 * reported): gobreaker reopens on the first failed probe and closes after
 * MaxRequests consecutive successes; resil judges the K probes by the rate. */
static void
test_scenarios_gobreaker_custom_breaker(void **state)
{
	bfx f;
	resil_permit p1, p2, p3;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 60;
	f.cfg.min_calls = 3;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 1;
	f.cfg.bucket_ns = 30;
	f.cfg.open_wait_ns = 90;
	f.cfg.permitted_probes = 3;
	bfx_new(&f);
	for (i = 0; i < 5; i++) {
		call_o(&f, S);
		call_o(&f, F);
	}
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).window_calls, 10);
	resil_manual_clock_set(&f.mc, 29);
	call_o(&f, S);
	assert_int_equal(mx(&f).window_calls, 11);
	resil_manual_clock_set(&f.mc, 30); /* over Interval */
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).window_calls, 1);
	assert_int_equal(mx(&f).window_failures, 1);
	call_o(&f, S);
	call_o(&f, F); /* 2 of 3 >= 0.6 */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[0].from, RESIL_BREAKER_CLOSED);
	assert_int_equal(f.events[0].to, RESIL_BREAKER_OPEN);

	resil_manual_clock_set(&f.mc, 30 + 90);
	assert_int_equal(resil_breaker_acquire(f.b, &p1), RESIL_OK);
	assert_int_equal(f.events[1].to, RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_breaker_record(f.b, &p1, S), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(f.b, &p2), RESIL_OK);
	assert_int_equal(resil_breaker_record(f.b, &p2, S), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(resil_breaker_acquire(f.b, &p3), RESIL_OK);
	assert_false(try_acquire(&f)); /* over MaxRequests */
	assert_int_equal(resil_breaker_record(f.b, &p3, S), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).window_calls, 0);
	assert_int_equal(f.rec.count, 3);
	assert_int_equal(f.events[2].from, RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(f.events[2].to, RESIL_BREAKER_CLOSED);
	resil_breaker_free(f.b);
}

/* gobreaker_test.go TestGeneration: "the request from the previous
 * generation has no effect". In resil a permit remembers its episode: a
 * call that started while CLOSED and reports after the breaker tripped and
 * moved to HALF_OPEN changes nothing (it must not close the breaker). */
static void
test_scenarios_gobreaker_previous_generation_has_no_effect(void **state)
{
	bfx f;
	resil_permit old;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 2;
	f.cfg.open_wait_ns = 10;
	bfx_new(&f);
	assert_int_equal(resil_breaker_acquire(f.b, &old), RESIL_OK);
	call_o(&f, F);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 10);
	assert_true(try_acquire(&f)); /* HALF_OPEN, its one probe out */
	assert_int_equal(resil_breaker_record(f.b, &old, S), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(mx(&f).stale, 1);
	assert_int_equal(mx(&f).probes_reported, 0);
	resil_breaker_free(f.b);
}

/* gobreaker_test.go TestErrorStateOpen: gobreaker says "circuit breaker is
 * open". Difference (DESIGN silent, to review): resil's text for
 * RESIL_E_OPEN is "rejected: circuit breaker open". */
static void
test_scenarios_gobreaker_error_state_open_text(void **state)
{
	(void)state;
	assert_string_equal(
	    resil_strerror(RESIL_E_OPEN), "rejected: circuit breaker open");
	assert_string_equal(resil_err_name(RESIL_E_OPEN), "RESIL_E_OPEN");
}

/* ---- Polly ---------------------------------------------------------- */

typedef struct counter {
	int calls;
	int rc;
} counter;

static int
count_fn(void *ctx)
{
	counter *c = ctx;

	c->calls++;
	return c->rc;
}

/* Polly CircuitBreakerSpecs
 * .Should_open_circuit_blocking_executions_and_noting_the_last_raised_exception_after_specified_number_of_specified_exception_have_been_raised
 * (handledEventsAllowedBeforeBreaking 2): the third call is rejected
 * without running. */
static void
test_scenarios_polly_breaks_after_two_exceptions(void **state)
{
	bfx f;
	counter c = { 0, -1 };
	int rc = 0;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 2;
	f.cfg.open_wait_ns = 60;
	bfx_new(&f);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, &rc), RESIL_OK);
	assert_int_equal(rc, -1);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, &rc), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	rc = 12345;
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, &rc), RESIL_E_OPEN);
	assert_int_equal(c.calls, 2);
	assert_int_equal(rc, 12345); /* untouched */
	resil_breaker_free(f.b);
}

/* Polly CircuitBreakerSpecs
 * .Should_halfopen_circuit_after_the_specified_duration_has_passed,
 * .Should_open_circuit_again_after_the_specified_duration_has_passed_if_the_next_call_raises_an_exception,
 * .Should_reset_circuit_after_the_specified_duration_has_passed_if_the_next_call_does_not_raise_an_exception
 * (durationOfBreak 30 s). After the reset a single failure does not break
 * again: counts start empty on entering CLOSED. */
static void
test_scenarios_polly_break_duration_then_trial(void **state)
{
	bfx f;
	counter c = { 0, -1 };

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 2;
	f.cfg.open_wait_ns = 30;
	bfx_new(&f);
	resil_breaker_call(f.b, count_fn, &c, NULL, NULL);
	resil_breaker_call(f.b, count_fn, &c, NULL, NULL);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 29);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_E_OPEN);
	resil_manual_clock_set(&f.mc, 30);
	/* The trial raises: open again for another 30. */
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_OK);
	assert_int_equal(c.calls, 3);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_E_OPEN);
	resil_manual_clock_set(&f.mc, 60);
	c.rc = 0; /* the trial succeeds: closed */
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	c.rc = -1;
	resil_breaker_call(f.b, count_fn, &c, NULL, NULL);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(c.calls, 5);
	resil_breaker_free(f.b);
}

/* Polly CircuitBreakerSpecs
 * .Should_only_allow_single_execution_on_first_entering_halfopen_state__test_execution_permit_directly
 * and
 * .Should_allow_single_execution_per_break_duration_in_halfopen_state__test_execution_permit_directly.
 * The first holds. Difference (DESIGN silent, to review): Polly permits one
 * more trial each further break duration while the first trial has not
 * reported; resil rejects (retry_after 0) until the probe reports, or, with
 * max_half_open_ns set to the break duration, reopens at the half-open
 * timeout and waits a whole further break duration (the next trial at 90,
 * Polly's at 60). */
static void
test_scenarios_polly_single_trial_per_break_duration(void **state)
{
	bfx f;
	resil_permit p;
	uint64_t after = 99;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 30;
	bfx_new(&f);
	call_o(&f, F);
	resil_manual_clock_set(&f.mc, 30);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_acquire_ex(f.b, &p, &after), RESIL_E_OPEN);
	assert_int_equal(after, 0);
	resil_manual_clock_set(&f.mc, 60);
	assert_false(try_acquire(&f)); /* Polly would permit here */
	resil_breaker_free(f.b);

	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 30;
	f.cfg.max_half_open_ns = 30;
	bfx_new(&f);
	call_o(&f, F);
	resil_manual_clock_set(&f.mc, 30);
	assert_true(try_acquire(&f));
	resil_manual_clock_set(&f.mc, 60);
	assert_false(try_acquire(&f)); /* half-open timeout: OPEN again */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 89);
	assert_false(try_acquire(&f));
	resil_manual_clock_set(&f.mc, 90);
	assert_true(try_acquire(&f));
	assert_int_equal(st(&f), RESIL_BREAKER_HALF_OPEN);
	resil_breaker_free(f.b);
}

/* The exception type Polly's policy does not handle. */
static resil_outcome
unhandled_is_ignored(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 7 ? RESIL_OUTCOME_IGNORED : RESIL_OUTCOME_FAILURE;
}

/* Polly CircuitBreakerSpecs
 * .Should_not_open_circuit_if_exception_raised_is_not_the_specified_exception
 */
static void
test_scenarios_polly_unhandled_exception_does_not_break(void **state)
{
	bfx f;
	counter c = { 0, 7 };
	resil_classifier cls = { unhandled_is_ignored, NULL };
	int rc = 0, i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 2;
	bfx_new(&f);
	for (i = 0; i < 3; i++) {
		assert_int_equal(
		    resil_breaker_call(f.b, count_fn, &c, &cls, &rc),
		    RESIL_OK);
		assert_int_equal(rc, 7);
	}
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).ignored, 3);
	assert_int_equal(mx(&f).failures, 0);
	resil_breaker_free(f.b);
}

/* Polly CircuitBreakerSpecs
 * .Should_hold_circuit_open_despite_elapsed_time_if_manual_override_open
 * (Isolate) and .Should_close_circuit_again_on_reset_after_manual_override */
static void
test_scenarios_polly_isolate_then_reset(void **state)
{
	bfx f;
	counter c = { 0, 0 };

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 2;
	f.cfg.open_wait_ns = 30;
	bfx_new(&f);
	assert_int_equal(resil_breaker_force_open(f.b), RESIL_OK);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_E_OPEN);
	resil_manual_clock_set(&f.mc, 1000);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_E_OPEN);
	assert_int_equal(c.calls, 0);
	assert_int_equal(resil_breaker_reset(f.b), RESIL_OK);
	assert_int_equal(
	    resil_breaker_call(f.b, count_fn, &c, NULL, NULL), RESIL_OK);
	assert_int_equal(c.calls, 1);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	resil_breaker_free(f.b);
}

/* Polly AdvancedCircuitBreakerSpecs (failureThreshold 0.5, samplingDuration
 * 10 s, minimumThroughput 4):
 * .Should_open_circuit_with_the_last_raised_exception_if_failure_threshold_exceeded_and_throughput_threshold_equalled_within_timeslice_in_same_window
 * and
 * .Should_not_open_circuit_if_failure_threshold_exceeded_but_throughput_threshold_not_met.
 * The sampling duration is a time window of 10 one-tick buckets. */
static void
test_scenarios_polly_advanced_threshold_and_throughput(void **state)
{
	bfx f;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 50;
	f.cfg.min_calls = 4;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 10;
	f.cfg.bucket_ns = 1;
	f.cfg.open_wait_ns = 30;
	bfx_new(&f);
	/* Three failures: 100% but throughput 3 < 4. */
	call_o(&f, F);
	call_o(&f, F);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	/* Past the sampling duration they are gone: S, S, F, F then trips
	 * at exactly 50% with exactly 4 calls. */
	resil_manual_clock_set(&f.mc, 10);
	call_o(&f, S);
	call_o(&f, S);
	call_o(&f, F);
	assert_int_equal(mx(&f).window_calls, 3);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* Polly AdvancedCircuitBreakerSpecs
 * .Should_open_circuit_if_failures_at_end_of_last_timeslice_below_failure_threshold_and_failures_in_beginning_of_new_timeslice_where_total_equals_failure_threshold:
 * the window rolls, the failures of both slices count together. */
static void
test_scenarios_polly_advanced_rolling_window(void **state)
{
	bfx f;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 50;
	f.cfg.min_calls = 4;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 10;
	f.cfg.bucket_ns = 1;
	bfx_new(&f);
	call_o(&f, S); /* t0 */
	call_o(&f, S);
	resil_manual_clock_set(&f.mc, 9); /* end of the sampling duration */
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	resil_manual_clock_set(&f.mc, 10); /* t0's outcomes roll out */
	call_o(&f, F);
	/* window: F (t9), F (t10) = 2 calls < 4 */
	assert_int_equal(mx(&f).window_calls, 2);
	call_o(&f, S);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_o(&f, F); /* 3 of 4 */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* ------------------------------------------------------------------ */
/* Retry                                                              */
/* ------------------------------------------------------------------ */

typedef struct rdep {
	const int *script; /* return codes, in attempt order; then 0 */
	size_t n;
	int calls;
	resil_err status; /* set on every attempt when not OK */
	uint64_t starts[16];
} rdep;

static int
rdep_fn(void *ctx, resil_retry_attempt *a, void *out)
{
	rdep *d = ctx;
	int rc = (size_t)d->calls < d->n ? d->script[d->calls] : 0;

	(void)out;
	if (d->calls < 16)
		d->starts[d->calls] = a->start;
	d->calls++;
	if (d->status != RESIL_OK)
		a->status = d->status;
	return rc;
}

typedef struct rfx {
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry *r;
	resil_retry_event events[16];
	resil_retry_recorder rec;
} rfx;

static void
rfx_init(rfx *f)
{
	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, 0);
	resil_retry_config_init(&f->cfg);
	f->cfg.clock = resil_manual_clock_hook(&f->mc);
	resil_retry_recorder_init(&f->rec, f->events, 16);
	f->cfg.listener = resil_retry_recorder_listener;
	f->cfg.listener_ctx = &f->rec;
}

static void
rfx_new(rfx *f)
{
	resil_diag d;

	d.msg[0] = '\0';
	if (resil_retry_new(&f->r, &f->cfg, &d) != RESIL_OK)
		fail_msg("resil_retry_new: %s", d.msg);
}

/* resilience4j-retry RetryImplTest.shouldNotRetry */
static void
test_scenarios_r4j_retry_success_not_retried(void **state)
{
	rfx f;
	rdep d = { NULL, 0, 0, RESIL_OK, { 0 } };
	resil_retry_result res;
	resil_retry_metrics m;

	(void)state;
	rfx_init(&f);
	f.cfg.base_delay_ns = 500;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 1);
	assert_int_equal(res.attempts, 1);
	assert_int_equal(res.waited, 0);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(resil_manual_clock_now(&f.mc), 0);
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_int_equal(m.succeeded_without_retry, 1);
	assert_int_equal(f.rec.count, 0);
	resil_retry_free(f.r);
}

/* RetryImplTest.shouldReturnAfterThreeAttemptsAndRethrowException: the
 * default 3 attempts with the default 500 ms wait: slept 2 x 500; the
 * caller gets the last attempt's own error (DESIGN). */
static void
test_scenarios_r4j_retry_three_attempts_then_last_error(void **state)
{
	static const int script[] = { -1, -2, -3, 0 };
	rfx f;
	rdep d = { script, 4, 0, RESIL_OK, { 0 } };
	resil_retry_result res;
	resil_retry_metrics m;

	(void)state;
	rfx_init(&f);
	f.cfg.base_delay_ns = 500; /* 500 ms, one tick a millisecond */
	rfx_new(&f);
	assert_int_equal(f.cfg.max_attempts, 3);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.attempts, 3);
	assert_int_equal(res.rc, -3);
	assert_int_equal(res.outcome, RESIL_OUTCOME_FAILURE);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(res.waited, 1000);
	assert_int_equal(d.starts[0], 0);
	assert_int_equal(d.starts[1], 500);
	assert_int_equal(d.starts[2], 1000);
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_int_equal(m.failed_after_retry, 1);
	assert_int_equal(m.exhausted, 1);
	assert_int_equal(m.retries, 2);
	/* Events: RETRY after 1 and 2, GIVE_UP after 3. */
	assert_int_equal(f.rec.count, 3);
	assert_int_equal(f.events[0].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(f.events[0].attempt, 1);
	assert_int_equal(f.events[0].wait, 500);
	assert_int_equal(f.events[2].type, RESIL_RETRY_EVENT_GIVE_UP);
	assert_int_equal(f.events[2].stop, RESIL_RETRY_STOP_EXHAUSTED);
	resil_retry_free(f.r);
}

static resil_outcome
rc_400_business_7_ignored(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	if (rc == 400)
		return RESIL_OUTCOME_BUSINESS;
	return rc == 7 ? RESIL_OUTCOME_IGNORED : RESIL_OUTCOME_FAILURE;
}

/* RetryImplTest.shouldReturnAfterOneAttemptAndIgnoreException: an ignored
 * exception is not retried; nor is a business error (DESIGN). */
static void
test_scenarios_r4j_retry_ignored_and_business_not_retried(void **state)
{
	static const int ignored[] = { 7, 0 };
	static const int business[] = { 400, 0 };
	rfx f;
	rdep d1 = { ignored, 2, 0, RESIL_OK, { 0 } };
	rdep d2 = { business, 2, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.classifier.fn = rc_400_business_7_ignored;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d1, NULL, &res), RESIL_OK);
	assert_int_equal(d1.calls, 1);
	assert_int_equal(res.rc, 7);
	assert_int_equal(res.outcome, RESIL_OUTCOME_IGNORED);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d2, NULL, &res), RESIL_OK);
	assert_int_equal(d2.calls, 1);
	assert_int_equal(res.rc, 400);
	assert_int_equal(res.outcome, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(resil_manual_clock_now(&f.mc), 0);
	resil_retry_free(f.r);
}

static uint64_t
square_backoff(uint32_t attempt, uint64_t prev, void *ctx)
{
	(void)attempt;
	(void)ctx;
	return prev == 0 ? 500 : prev * prev;
}

/* RetryImplTest.shouldTakeIntoAccountBackoffFunction
 * (IntervalFunction.of(500 ms, x -> x * x)): waits 500 then 250000. */
static void
test_scenarios_r4j_retry_backoff_function(void **state)
{
	static const int script[] = { -1, -1, -1 };
	rfx f;
	rdep d = { script, 3, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.backoff = RESIL_BACKOFF_CUSTOM;
	f.cfg.backoff_fn = square_backoff;
	f.cfg.base_delay_ns = 500;
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.waited, 500 + 250000);
	assert_int_equal(resil_manual_clock_now(&f.mc), 250500);
	resil_retry_free(f.r);
}

/* resilience4j-core IntervalFunctionTest (ofExponentialBackoff(100, 1.5)
 * and the same with a max interval): 100, 150, 225, 337, 506 truncated to
 * whole ticks; capped at 300. */
static void
test_scenarios_r4j_exponential_intervals(void **state)
{
	static const uint64_t want[] = { 100, 150, 225, 337, 506 };
	static const uint64_t capped[] = { 100, 150, 225, 300, 300 };
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t w;
	uint32_t n;

	(void)state;
	cfg = resil_retry_config_default();
	cfg.max_attempts = 10;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.base_delay_ns = 100;
	cfg.multiplier = 1.5;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	for (n = 1; n <= 5; n++) {
		assert_int_equal(
		    resil_retry_next_delay(r, n, 0, 0.0, &w), RESIL_OK);
		assert_int_equal(w, want[n - 1]);
	}
	resil_retry_free(r);
	cfg.max_delay_ns = 300;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	for (n = 1; n <= 5; n++) {
		assert_int_equal(
		    resil_retry_next_delay(r, n, 0, 0.0, &w), RESIL_OK);
		assert_int_equal(w, capped[n - 1]);
	}
	resil_retry_free(r);
}

typedef struct script_rng {
	const double *u;
	size_t n, i;
} script_rng;

static double
script_uniform(void *ctx)
{
	script_rng *s = ctx;

	return s->i < s->n ? s->u[s->i++] : 0.0;
}

/* IntervalFunctionTest (ofRandomized(1000, 0.5): within [500, 1500]) and
 * ofExponentialRandomBackoff. DESIGN: w = d * (1 - f + 2 f u), truncated;
 * one draw per wait, in attempt order, from the injected source. */
static void
test_scenarios_r4j_randomized_intervals(void **state)
{
	static const double u[] = { 0.0, 0.25, 0.75 };
	static const int script[] = { -1, -1, -1, -1 };
	rfx f;
	rdep d = { script, 4, 0, RESIL_OK, { 0 } };
	script_rng s = { u, 3, 0 };
	resil_retry_result res;
	uint64_t w;

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 4;
	f.cfg.base_delay_ns = 1000;
	f.cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	f.cfg.jitter_factor = 0.5;
	f.cfg.random.uniform = script_uniform;
	f.cfg.random.ctx = &s;
	rfx_new(&f);
	assert_int_equal(resil_retry_next_delay(f.r, 1, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 500);
	assert_int_equal(resil_retry_next_delay(f.r, 1, 0, 0.5, &w), RESIL_OK);
	assert_int_equal(w, 1000);
	assert_int_equal(
	    resil_retry_next_delay(f.r, 1, 0, 0.9999999, &w), RESIL_OK);
	assert_int_equal(w, 1499);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 4);
	assert_int_equal(s.i, 3); /* one draw per wait */
	assert_int_equal(d.starts[1], 500);
	assert_int_equal(d.starts[2], 500 + 750);
	assert_int_equal(d.starts[3], 500 + 750 + 1250);
	assert_int_equal(res.waited, 2500);
	resil_retry_free(f.r);

	/* ofExponentialRandomBackoff(100, 2.0, 0.5) at u = 0: d / 2. */
	rfx_init(&f);
	f.cfg.max_attempts = 5;
	f.cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	f.cfg.base_delay_ns = 100;
	f.cfg.multiplier = 2.0;
	f.cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	f.cfg.jitter_factor = 0.5;
	rfx_new(&f);
	assert_int_equal(resil_retry_next_delay(f.r, 3, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 200);
	assert_int_equal(resil_retry_next_delay(f.r, 3, 0, 0.5, &w), RESIL_OK);
	assert_int_equal(w, 400);
	resil_retry_free(f.r);
}

/* AWS Architecture Blog "Exponential Backoff And Jitter" (the formulas
 * Polly.Contrib.WaitAndRetry and the AWS SDKs implement): full, equal and
 * decorrelated jitter, the cap after the jitter (DESIGN). */
static void
test_scenarios_aws_jitter_formulas(void **state)
{
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t w;

	(void)state;
	cfg = resil_retry_config_default();
	cfg.max_attempts = 10;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.base_delay_ns = 100;
	cfg.multiplier = 2.0;
	cfg.max_delay_ns = 1000;

	cfg.jitter = RESIL_JITTER_FULL; /* d * u */
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	resil_retry_next_delay(r, 3, 0, 0.5, &w);
	assert_int_equal(w, 200);
	resil_retry_next_delay(r, 5, 0, 0.75, &w); /* 1600 * .75, capped */
	assert_int_equal(w, 1000);
	resil_retry_free(r);

	cfg.jitter = RESIL_JITTER_EQUAL; /* d/2 + u d/2 */
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	resil_retry_next_delay(r, 3, 0, 0.5, &w);
	assert_int_equal(w, 300);
	resil_retry_free(r);

	cfg.jitter = RESIL_JITTER_DECORRELATED; /* base + u (3 prev - base) */
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	resil_retry_next_delay(r, 1, 0, 0.5, &w); /* prev = base */
	assert_int_equal(w, 200);
	resil_retry_next_delay(r, 2, 200, 0.5, &w);
	assert_int_equal(w, 100 + 250);
	resil_retry_next_delay(r, 3, 900, 0.5, &w); /* 100 + 1300: cap */
	assert_int_equal(w, 1000);
	resil_retry_free(r);
}

/* Polly (v8) RetryHelperTests.Constant_Jitter_Ok, Linear_Ok,
 * Linear_Jitter_Ok and Exponential_Ok: one tick is one millisecond, a
 * base of 1 s is 1000. Polly's jitter for Constant and Linear is
 * delay * (0.75 + 0.5 u), which is PROPORTIONAL with jitter_factor 0.25;
 * Linear is (attempt + 1) * base with Polly's 0-based attempt, so n * base
 * here. Polly's randomizer of 1.0 is outside [0, 1) and is not ported. */
static void
test_scenarios_polly_constant_linear_exponential(void **state)
{
	resil_retry_config cfg;
	resil_retry *r;
	uint64_t w;

	(void)state;
	cfg = resil_retry_config_default();
	cfg.max_attempts = 10;
	cfg.base_delay_ns = 1000;
	cfg.max_delay_ns = 100000;

	/* Constant_Jitter_Ok: 0.75, 0.95, 1.05 s. */
	cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	cfg.jitter_factor = 0.25;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 1, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 750);
	assert_int_equal(resil_retry_next_delay(r, 1, 0, 0.4, &w), RESIL_OK);
	assert_int_equal(w, 950);
	assert_int_equal(resil_retry_next_delay(r, 2, 0, 0.6, &w), RESIL_OK);
	assert_int_equal(w, 1050);
	resil_retry_free(r);

	/* Linear_Ok: 1, 2, 3 s. */
	cfg.backoff = RESIL_BACKOFF_LINEAR;
	cfg.jitter = RESIL_JITTER_NONE;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 1, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 1000);
	assert_int_equal(resil_retry_next_delay(r, 2, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 2000);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 3000);
	resil_retry_free(r);

	/* Linear_Jitter_Ok, Polly's attempt 2: 2.25, 2.85, 3, 3.15 s. */
	cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 2250);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.4, &w), RESIL_OK);
	assert_int_equal(w, 2850);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.5, &w), RESIL_OK);
	assert_int_equal(w, 3000);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.6, &w), RESIL_OK);
	assert_int_equal(w, 3150);
	resil_retry_free(r);

	/* MaxDelay_Ok's rule (the cap after the jitter), with a cap of 2 s:
	 * Polly's own case (base 10 s, cap 1 s) is refused here, because
	 * max_delay_ns below base_delay_ns is refused. */
	cfg.max_delay_ns = 2000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.5, &w), RESIL_OK);
	assert_int_equal(w, 2000);
	resil_retry_free(r);
	cfg.base_delay_ns = 10000;
	cfg.max_delay_ns = 1000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_E_INVAL);

	/* Exponential_Ok: 1, 2, 4 s (Polly's factor is 2). */
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.multiplier = 2.0;
	cfg.jitter = RESIL_JITTER_NONE;
	cfg.base_delay_ns = 1000;
	cfg.max_delay_ns = 100000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_retry_next_delay(r, 1, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 1000);
	assert_int_equal(resil_retry_next_delay(r, 2, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 2000);
	assert_int_equal(resil_retry_next_delay(r, 3, 0, 0.0, &w), RESIL_OK);
	assert_int_equal(w, 4000);
	resil_retry_free(r);
}

/* Polly (v8) RetryHelper.DecorrelatedJitterBackoffV2, the jitter of
 * Exponential with UseJitter: f(t) = 2^t tanh(sqrt(4 t)), t = attempt + u
 * (Polly's 0-based attempt), wait = (f(t) - f(t_prev)) / 1.4 * base,
 * truncated. Exact waits for a scripted u (expected values computed
 * outside resil, in Python's math module), through the plan and through a
 * real call; then RetryHelperTests.DecorrelatedJitterBackoffV2_Meets_
 * Specification: 0 <= wait <= base * 2^attempt * 4 - 1, here over seeded
 * draws, every attempt up to 60 and a range of bases; and
 * GetRetryDelay_Exponential_Does_Not_Exceed_MaxDelay. */
static void
test_scenarios_polly_decorrelated_jitter_v2(void **state)
{
	static const double u[] = { 0.5, 0.25, 0.75, 0.0, 0.9 };
	static const uint64_t want[] = { 897, 763, 3131, 910, 15617 };
	static const int script[] = { -1, -1, -1, -1, -1, -1 };
	resil_retry_config cfg;
	resil_retry *r;
	script_rng s = { u, 5, 0 };
	resil_random src = { script_uniform, &s };
	uint64_t waits[64], w, bound, at;
	size_t count, i;
	uint32_t base;
	rfx f;
	rdep d = { script, 6, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	cfg = resil_retry_config_default();
	cfg.max_attempts = 6;
	cfg.base_delay_ns = 1000;
	cfg.max_delay_ns = UINT64_MAX;
	cfg.jitter = RESIL_JITTER_DECORRELATED_V2;
	assert_int_equal(
	    resil_retry_plan(&cfg, &src, waits, 64, &count, NULL), RESIL_OK);
	assert_int_equal(count, 5);
	for (i = 0; i < 5; i++)
		assert_int_equal(waits[i], want[i]);
	/* Stateful: the policy refuses the one-wait question. */
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_next_delay(r, 1, 0, 0.5, &w), RESIL_E_INVAL);
	resil_retry_free(r);

	/* The same waits from a call (state per call, not per policy). */
	rfx_init(&f);
	f.cfg.max_attempts = 6;
	f.cfg.base_delay_ns = 1000;
	f.cfg.max_delay_ns = UINT64_MAX;
	f.cfg.jitter = RESIL_JITTER_DECORRELATED_V2;
	f.cfg.random.uniform = script_uniform;
	f.cfg.random.ctx = &s;
	rfx_new(&f);
	for (i = 0; i < 2; i++) {
		s.i = 0;
		d.calls = 0;
		resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
		assert_int_equal(d.calls, 6);
		assert_int_equal(d.starts[1] - d.starts[0], want[0]);
		assert_int_equal(d.starts[3] - d.starts[2], want[2]);
		assert_int_equal(d.starts[5] - d.starts[4], want[4]);
		assert_int_equal(res.waited, 897 + 763 + 3131 + 910 + 15617);
	}
	resil_retry_free(f.r);

	/* The specification's bounds over seeded draws. */
	cfg.max_attempts = 61;
	for (base = 1; base <= 3600000; base = base * 7 + 3) {
		cfg.base_delay_ns = base;
		cfg.seed = base;
		assert_int_equal(
		    resil_retry_plan(&cfg, NULL, waits, 64, &count, NULL),
		    RESIL_OK);
		assert_int_equal(count, 60);
		for (i = 0; i < count; i++) {
			at = (uint64_t)i; /* Polly's attempt */
			if (at >= 40)
				break; /* the bound passes 2^64 */
			bound = (uint64_t)base * (UINT64_C(4) << at);
			assert_true(waits[i] <= bound - 1);
		}
	}
	/* The cap: base 2 s, cap 30 s. */
	cfg.base_delay_ns = 2000;
	cfg.max_delay_ns = 30000;
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, waits, 64, &count, NULL), RESIL_OK);
	for (i = 0; i < count; i++)
		assert_true(waits[i] <= 30000);
	assert_int_equal(waits[count - 1], 30000);
}

/* Polly RetrySpecs
 * .Should_not_throw_when_specified_exception_thrown_fewer_times_than_retry_count
 * and .Should_call_onretry_on_each_retry_with_the_current_retry_count:
 * Retry(3) is max_attempts 4 (the first attempt counts, DESIGN). */
static void
test_scenarios_polly_retry_three_then_success(void **state)
{
	static const int script[] = { -1, -1, -1, 0 };
	rfx f;
	rdep d = { script, 4, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 4;
	f.cfg.base_delay_ns = 0;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(res.attempts, 4);
	assert_int_equal(res.rc, 0);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(f.rec.count, 4);
	assert_int_equal(f.events[0].attempt, 1);
	assert_int_equal(f.events[1].attempt, 2);
	assert_int_equal(f.events[2].attempt, 3);
	assert_int_equal(f.events[2].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(f.events[3].type, RESIL_RETRY_EVENT_SUCCESS);
	assert_int_equal(f.events[3].attempt, 4);
	resil_retry_free(f.r);
}

static uint64_t
polly_sleeps(uint32_t attempt, uint64_t prev, void *ctx)
{
	(void)prev;
	(void)ctx;
	return attempt; /* 1 s, 2 s, 3 s */
}

/* Polly WaitAndRetrySpecs
 * .Should_sleep_for_the_specified_duration_each_retry_when_specified_exception_thrown_more_times_than_there_are_sleep_durations
 * (sleep durations 1, 2, 3 s): slept 6 s in all, and the caller gets the
 * last failure. */
static void
test_scenarios_polly_wait_and_retry_durations(void **state)
{
	static const int script[] = { -1, -1, -1, -4, 0 };
	rfx f;
	rdep d = { script, 5, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 4;
	f.cfg.backoff = RESIL_BACKOFF_CUSTOM;
	f.cfg.backoff_fn = polly_sleeps;
	f.cfg.base_delay_ns = 1;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 4);
	assert_int_equal(res.rc, -4);
	assert_int_equal(res.waited, 6);
	assert_int_equal(d.starts[1], 1);
	assert_int_equal(d.starts[2], 3);
	assert_int_equal(d.starts[3], 6);
	resil_retry_free(f.r);
}

/* DESIGN decided (deadline), as with Polly's timeout around a retry: an
 * attempt starts only before the deadline, and no wait is begun for an
 * attempt that would not start. Fixed 10, deadline 25: attempts at 0, 10,
 * 20; the one at 30 would not start, so no third wait. */
static void
test_scenarios_design_retry_deadline(void **state)
{
	static const int script[] = { -1, -1, -1, -1, -1 };
	rfx f;
	rdep d = { script, 5, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 5;
	f.cfg.base_delay_ns = 10;
	f.cfg.deadline_ns = 25;
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_DEADLINE);
	assert_int_equal(res.waited, 20);
	assert_int_equal(resil_manual_clock_now(&f.mc), 20);
	resil_retry_free(f.r);
}

static int
retry_if_rc_1(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc == 1;
}

static resil_outcome
rc_01_success(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc <= 1 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

/* RetryImplTest (retryOnResult: returns the last result after max
 * attempts) and the failAfterMaxAttempts variant (MaxRetriesExceeded):
 * DESIGN: the last result, or RESIL_E_RETRIES_EXHAUSTED when
 * fail_after_max_attempts is set. */
static void
test_scenarios_r4j_retry_on_result(void **state)
{
	static const int script[] = { 1, 1, 1, 1 };
	rfx f;
	rdep d = { script, 4, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.base_delay_ns = 0;
	f.cfg.classifier.fn = rc_01_success;
	f.cfg.retry_on_result = retry_if_rc_1;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_OK);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.rc, 1);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	resil_retry_free(f.r);

	f.cfg.fail_after_max_attempts = 1;
	d.calls = 0;
	rfx_new(&f);
	assert_int_equal(resil_retry_call(f.r, rdep_fn, &d, NULL, &res),
	    RESIL_E_RETRIES_EXHAUSTED);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.attempts, 3);
	resil_retry_free(f.r);
}

/* DESIGN "breaker open: retry does not retry a rejection by default"
 * (Resilience4j's CallNotPermittedException is retried unless excluded;
 * resil decides the other way), and with retry_on_open it is retried. */
static void
test_scenarios_design_retry_does_not_retry_open(void **state)
{
	rfx f;
	rdep d = { NULL, 0, 0, RESIL_E_OPEN, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.base_delay_ns = 5;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_E_OPEN);
	assert_int_equal(d.calls, 1);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	resil_retry_free(f.r);

	f.cfg.retry_on_open = 1;
	d.calls = 0;
	rfx_new(&f);
	assert_int_equal(
	    resil_retry_call(f.r, rdep_fn, &d, NULL, &res), RESIL_E_OPEN);
	assert_int_equal(d.calls, 3);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	resil_retry_free(f.r);
}

/* Seed 002 (Dubbo failover, retries=2): "Tried 3 times of the providers
 * ... Last error is: ...TimeoutException: Waiting server-side response
 * timeout by scan timer is 3000 ms." retries=2 is max_attempts 3. */
static void
test_scenarios_seed002_tried_three_times_message(void **state)
{
	static const int script[] = { -1, -1, -1 };
	rfx f;
	rdep d = { script, 3, 0, RESIL_OK, { 0 } };
	resil_retry_result res;
	char buf[256];

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 2 + 1;
	f.cfg.base_delay_ns = 0;
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 3);
	assert_int_equal(resil_retry_result_format(&res,
	                     "org.apache.dubbo.remoting.TimeoutException: "
	                     "Waiting server-side response timeout by scan "
	                     "timer is 3000 ms.",
	                     buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf,
	    "Tried 3 times. Last error is: "
	    "org.apache.dubbo.remoting.TimeoutException: Waiting server-side "
	    "response timeout by scan timer is 3000 ms.");
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(
	    buf, "Tried 3 times. Last error is: rc -1 (failure)");
	resil_retry_free(f.r);
}

/* ------------------------------------------------------------------ */
/* Mock (Dubbo)                                                       */
/* ------------------------------------------------------------------ */

#define IHELLO "IHelloService"

/* The live IHelloService of MockClusterInvokerTest (there getSomething ->
 * "something"; here the method name without "get": getSomething ->
 * "Something", getSomething3 -> "Something3"), sayHello -> null; with error
 * set every call fails (the "invoke_return_error" parameter). */
typedef struct hello {
	int error;
	int calls;
} hello;

static int
hello_fn(void *ctx, const resil_args *args, resil_value *out)
{
	hello *h = ctx;

	h->calls++;
	if (h->error)
		return -1;
	if (strcmp(args->method, "sayHello") == 0)
		return 0;
	return resil_value_string(out, args->method + 3,
	           strlen(args->method + 3), NULL) == RESIL_OK
	    ? 0
	    : -2;
}

static void
assert_str_value(const resil_result *r, const char *want)
{
	assert_int_equal(r->err, RESIL_OK);
	assert_int_equal(r->value.type, RESIL_VALUE_STRING);
	assert_string_equal(r->value.u.s.ptr, want);
}

static resil_err
mcall(const resil_mock *m, const char *method, hello *h, resil_result *r)
{
	resil_args a = { method, NULL, 0 };

	return resil_mock_call(m, &a, hello_fn, h, NULL, r);
}

static resil_mock *
hello_mock(const char *spec, const resil_mock_registry *reg)
{
	resil_mock_config cfg;
	resil_mock *m = NULL;
	resil_diag d;

	resil_mock_config_init(&cfg);
	cfg.service = IHELLO;
	cfg.spec = spec;
	cfg.registry = reg;
	d.msg[0] = '\0';
	if (resil_mock_new(&m, &cfg, &d) != RESIL_OK)
		fail_msg("resil_mock_new: %s", d.msg);
	return m;
}

static void
set_method(resil_mock *m, const char *method, resil_type t, const char *spec)
{
	resil_diag d;

	d.msg[0] = '\0';
	if (resil_mock_set_method(m, method, t, spec, &d) != RESIL_OK)
		fail_msg("set_method %s: %s", method, d.msg);
}

/* dubbo-cluster MockClusterInvokerTest
 * .testMockInvokerFromOverride_Invoke_Fock_someMethods:
 * getSomething.mock=fail:return x, getSomething2.mock=force:return y. */
static void
test_scenarios_dubbo_mock_some_methods(void **state)
{
	resil_mock *m;
	hello h = { 0, 0 };
	resil_result r;

	(void)state;
	m = hello_mock(NULL, NULL);
	set_method(m, "getSomething", RESIL_TYPE_STRING, "fail:return x");
	set_method(m, "getSomething2", RESIL_TYPE_STRING, "force:return y");
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "Something");
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	mcall(m, "getSomething2", &h, &r);
	assert_str_value(&r, "y");
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	mcall(m, "getSomething3", &h, &r);
	assert_str_value(&r, "Something3");
	resil_result_free(&r);
	mcall(m, "sayHello", &h, &r);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	assert_int_equal(h.calls, 3); /* getSomething2 never called */
	resil_mock_free(m);
}

/* MockClusterInvokerTest.testMockInvokerFromOverride_Invoke_Fock_WithForceDefault:
 * mock=force:return z at the service, method-level fail:return x and
 * force:return y, every call failing: x, y, z, z. */
static void
test_scenarios_dubbo_mock_force_default_with_overrides(void **state)
{
	resil_mock *m;
	hello h = { 1, 0 };
	resil_result r;

	(void)state;
	m = hello_mock("force:return 'z'", NULL);
	set_method(m, "getSomething", RESIL_TYPE_STRING, "fail:return x");
	set_method(m, "getSomething2", RESIL_TYPE_STRING, "force:return y");
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "x");
	assert_int_equal(r.cause, RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(h.calls, 1);
	mcall(m, "getSomething2", &h, &r);
	assert_str_value(&r, "y");
	resil_result_free(&r);
	mcall(m, "getSomething3", &h, &r);
	assert_str_value(&r, "z");
	resil_result_free(&r);
	mcall(m, "sayHello", &h, &r);
	assert_str_value(&r, "z");
	resil_result_free(&r);
	assert_int_equal(h.calls, 1); /* only the fail: method called */
	resil_mock_free(m);
}

/* MockClusterInvokerTest.testMockInvokerFromOverride_Invoke_Fock_Default
 * (mock=fail:return x, every call failing: x for every method) and
 * .testMockInvokerFromOverride_Invoke_checkCompatible_return (a spec
 * without prefix, "return x", is a fail mock). */
static void
test_scenarios_dubbo_mock_fail_default_and_no_prefix(void **state)
{
	resil_mock *m;
	hello h = { 1, 0 };
	resil_result r;

	(void)state;
	m = hello_mock("fail:return 'x'", NULL);
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "x");
	resil_result_free(&r);
	mcall(m, "getSomething2", &h, &r);
	assert_str_value(&r, "x");
	resil_result_free(&r);
	mcall(m, "sayHello", &h, &r);
	assert_str_value(&r, "x");
	resil_result_free(&r);
	assert_int_equal(h.calls, 3);
	resil_mock_free(m);

	m = hello_mock(NULL, NULL);
	set_method(m, "getSomething", RESIL_TYPE_STRING, "return x");
	h.calls = 0;
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "x");
	assert_int_equal(h.calls, 1);
	resil_result_free(&r);
	h.error = 0;
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "Something");
	resil_result_free(&r);
	resil_mock_free(m);
}

static int
hello_mock_impl(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	return resil_value_string(out, "somethingmock", 13, NULL) == RESIL_OK
	    ? 0
	    : -2;
}

/* MockClusterInvokerTest.testMockInvokerFromOverride_Invoke_checkCompatible_ImplMock
 * (mock=true), _ImplMock2 (mock=fail), _ImplMock3 (mock=force): the
 * service's default mock IHelloServiceMock answers "somethingmock". */
static void
test_scenarios_dubbo_mock_default_impl(void **state)
{
	static const char *const specs[] = { "true", "fail", "default",
		"force" };
	resil_mock_registry *reg;
	resil_mock *m;
	hello h = { 1, 0 };
	resil_result r;
	size_t i;

	(void)state;
	assert_int_equal(resil_mock_registry_new(&reg, NULL), RESIL_OK);
	assert_int_equal(resil_mock_registry_add_impl(reg, IHELLO "Mock",
	                     IHELLO, hello_mock_impl, NULL, NULL),
	    RESIL_OK);
	for (i = 0; i < 4; i++) {
		m = hello_mock(specs[i], reg);
		h.calls = 0;
		mcall(m, "getSomething", &h, &r);
		assert_str_value(&r, "somethingmock");
		assert_int_equal(r.source, RESIL_SOURCE_MOCK);
		/* "force" bypasses the call, the others call first. */
		assert_int_equal(h.calls, i == 3 ? 0 : 1);
		resil_result_free(&r);
		resil_mock_free(m);
	}
	resil_mock_registry_free(reg);
}

/* MockClusterInvokerTest ..._Invoke_check_String, _check_int,
 * _check_boolean, _check_ListString_empty, _check_ListString: the mock
 * value arrives as the method's declared type. */
static void
test_scenarios_dubbo_mock_return_types(void **state)
{
	resil_mock *m;
	hello h = { 0, 0 };
	resil_result r;

	(void)state;
	m = hello_mock(NULL, NULL);
	set_method(m, "getSomething", RESIL_TYPE_STRING, "force:return 1688");
	set_method(m, "getInt1", RESIL_TYPE_INT, "force:return 1688");
	set_method(m, "getBoolean1", RESIL_TYPE_BOOL, "force:return true");
	set_method(m, "getListString", RESIL_TYPE_ARRAY, "force:return empty");
	set_method(m, "getListString2", RESIL_TYPE_ARRAY,
	    "force:return [\"hi\",\"hi2\"]");
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "1688");
	resil_result_free(&r);
	mcall(m, "getInt1", &h, &r);
	assert_int_equal(r.value.type, RESIL_VALUE_INT);
	assert_int_equal(r.value.u.i, 1688);
	resil_result_free(&r);
	mcall(m, "getBoolean1", &h, &r);
	assert_int_equal(r.value.type, RESIL_VALUE_BOOL);
	assert_int_equal(r.value.u.b, 1);
	resil_result_free(&r);
	mcall(m, "getListString", &h, &r);
	assert_int_equal(r.value.type, RESIL_VALUE_JSON);
	assert_string_equal(r.value.u.s.ptr, "[]");
	resil_result_free(&r);
	mcall(m, "getListString2", &h, &r);
	assert_int_equal(r.value.type, RESIL_VALUE_JSON);
	assert_string_equal(r.value.u.s.ptr, "[\"hi\",\"hi2\"]");
	resil_result_free(&r);
	assert_int_equal(h.calls, 0);
	resil_mock_free(m);
}

/* MockClusterInvokerTest.testMockInvokerFromOverride_Invoke_force_throw
 * (not business, Dubbo's message), _force_throwCustemException (business,
 * the custom error) and _force_throwCustemExceptionNotFound. Difference
 * (DESIGN decides: refused at configuration time): Dubbo fails the unknown
 * class at invocation; resil refuses the spec when it is set. */
static void
test_scenarios_dubbo_mock_force_throw(void **state)
{
	resil_mock_registry *reg;
	resil_mock *m;
	hello h = { 0, 0 };
	resil_result r;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_mock_registry_new(&reg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_mock_registry_add_error(reg, "MyMockException", 451, NULL),
	    RESIL_OK);
	m = hello_mock(NULL, reg);
	set_method(m, "getBoolean2", RESIL_TYPE_BOOL, "force:throw ");
	set_method(
	    m, "getBoolean3", RESIL_TYPE_BOOL, "force:throw MyMockException");
	assert_int_equal(mcall(m, "getBoolean2", &h, &r), RESIL_E_MOCK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_string_equal(r.message, RESIL_MOCK_MESSAGE);
	assert_string_equal(
	    r.message, "mocked exception for service degradation.");
	resil_result_free(&r);
	assert_int_equal(mcall(m, "getBoolean3", &h, &r), RESIL_E_BUSINESS);
	assert_int_equal(r.rc, 451);
	assert_string_equal(r.error_name, "MyMockException");
	assert_string_equal(r.message, RESIL_MOCK_MESSAGE);
	resil_result_free(&r);
	assert_int_equal(h.calls, 0);
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_mock_set_method(m, "getBoolean4", RESIL_TYPE_BOOL,
	        "force:throw java.lang.RuntimeException2", &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "RuntimeException2"));
	resil_mock_free(m);
	resil_mock_registry_free(reg);
}

/* MockClusterInvokerTest.testMockInvokerFromOverride_Invoke_mock_false:
 * mock=false and a failing call: the failure propagates. */
static void
test_scenarios_dubbo_mock_false_propagates(void **state)
{
	resil_mock *m;
	hello h = { 1, 0 };
	resil_result r;

	(void)state;
	m = hello_mock("false", NULL);
	assert_int_equal(mcall(m, "getSomething", &h, &r), RESIL_E_CALL);
	assert_int_equal(r.rc, -1);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(h.calls, 1);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
assert_canon(const char *spec, const char *want)
{
	resil_mock_spec s;
	resil_diag d;
	char buf[128];

	d.msg[0] = '\0';
	if (resil_mock_parse(&s, spec, RESIL_TYPE_ANY, NULL, &d) != RESIL_OK)
		fail_msg("parse \"%s\": %s", spec, d.msg);
	resil_mock_spec_format(&s, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		fail_msg("\"%s\" -> \"%s\", want \"%s\"", spec, buf, want);
	resil_mock_spec_free(&s);
}

/* dubbo-rpc MockInvokerTest.testNormalizeMock: "return" is "return null";
 * "fail", "true", "default" are the default mock; keywords are
 * case-insensitive and blanks ignored (DESIGN). Differences (DESIGN
 * decides): Dubbo normalizes "fail:" and "force:" to "" (no mock); resil
 * refuses an empty body after a prefix, quoting the spec. */
static void
test_scenarios_dubbo_normalize_mock(void **state)
{
	resil_mock_spec s;
	resil_diag d;

	(void)state;
	assert_canon("return", "fail:return null");
	assert_canon("return null", "fail:return null");
	assert_canon("fail:return", "fail:return null");
	assert_canon("force:return", "force:return null");
	assert_canon("FORCE:RETURN NULL", "force:return null");
	assert_canon("  fail :  return   'x' ", "fail:return \"x\"");
	assert_canon("fail", "fail:default");
	assert_canon("true", "fail:default");
	assert_canon("default", "fail:default");
	assert_canon("throw", "fail:throw");
	assert_canon("false", "false");
	assert_canon("", "false");
	assert_canon("N/A", "false");
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_mock_parse(&s, "fail:", RESIL_TYPE_ANY, NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "\"fail:\""));
	assert_int_equal(
	    resil_mock_parse(&s, "force:", RESIL_TYPE_ANY, NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "\"force:\""));
}

static resil_outcome
business_400(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 400 ? RESIL_OUTCOME_BUSINESS : RESIL_OUTCOME_FAILURE;
}

static int
biz_fn(void *ctx, const resil_args *args, resil_value *out)
{
	int *calls = ctx;

	(void)args;
	(void)out;
	++*calls;
	return 400;
}

/* Failsafe: the failure is swallowed below and a null returned. */
static int
failsafe_fn(void *ctx, const resil_args *args, resil_value *out)
{
	int *calls = ctx;

	(void)args;
	(void)out;
	++*calls;
	return 0;
}

/* Seeds 000 and 004 (MockClusterInvoker.invoke): a business RpcException
 * propagates and is not mocked; a failsafe cluster below swallows the
 * failure, so the fail: mock never sees one. */
static void
test_scenarios_seed000_business_and_failsafe(void **state)
{
	resil_mock *m;
	resil_classifier cls = { business_400, NULL };
	resil_args a = { "getSomething", NULL, 0 };
	resil_result r;
	int calls = 0;

	(void)state;
	m = hello_mock("fail:return 'x'", NULL);
	assert_int_equal(resil_mock_call(m, &a, biz_fn, &calls, &cls, &r),
	    RESIL_E_BUSINESS);
	assert_int_equal(r.rc, 400);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(calls, 1);
	resil_result_free(&r);
	assert_int_equal(
	    resil_mock_call(m, &a, failsafe_fn, &calls, &cls, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	resil_mock_free(m);
}

/* ------------------------------------------------------------------ */
/* Pipelines: seeds                                                   */
/* ------------------------------------------------------------------ */

typedef struct stock {
	int up;
	int calls;
} stock;

static int
stock_fn(void *ctx, const resil_args *args, resil_value *out)
{
	stock *s = ctx;

	(void)args;
	s->calls++;
	if (!s->up)
		return -1;
	*out = resil_value_int(8);
	return 0;
}

/* Seed 003's Inventory: pause after two failures in a row for 5 units,
 * serve the cache while its age is at most 10. */
static resil_pipeline *
inventory(resil_manual_clock *mc)
{
	resil_pipeline_config cfg;
	resil_pipeline *p = NULL;
	resil_diag d;

	resil_manual_clock_init(mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "InventoryService";
	cfg.clock = resil_manual_clock_hook(mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 2;
	cfg.breaker.open_wait_ns = 5;
	cfg.cache_enabled = 1;
	cfg.cache.max_age = 10;
	d.msg[0] = '\0';
	if (resil_pipeline_new(&p, &cfg, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	return p;
}

typedef struct step {
	uint64_t t;
	int up;
	resil_source source;
	int64_t stock; /* -1: None */
	uint64_t age;
	int calls;
} step;

static void
run_steps(const step *steps, size_t n)
{
	resil_manual_clock mc;
	resil_pipeline *p = inventory(&mc);
	resil_args a = { "getStock", NULL, 0 };
	stock s = { 0, 0 };
	size_t i;

	for (i = 0; i < n; i++) {
		resil_result r;

		resil_manual_clock_set(&mc, steps[i].t);
		s.up = steps[i].up;
		resil_pipeline_call(p, &a, stock_fn, &s, &r);
		if (r.source != steps[i].source || s.calls != steps[i].calls)
			fail_msg("t=%llu: %s calls=%d, want %s calls=%d",
			    (unsigned long long)steps[i].t,
			    resil_source_name(r.source), s.calls,
			    resil_source_name(steps[i].source),
			    steps[i].calls);
		if (steps[i].stock < 0) {
			assert_int_equal(r.err, RESIL_E_UNAVAILABLE);
			assert_int_equal(r.value.type, RESIL_VALUE_NULL);
		} else {
			assert_int_equal(r.err, RESIL_OK);
			assert_int_equal(r.value.type, RESIL_VALUE_INT);
			assert_int_equal(r.value.u.i, steps[i].stock);
			assert_int_equal(r.age, steps[i].age);
		}
		resil_result_free(&r);
	}
	resil_pipeline_free(p);
}

#define LIVE RESIL_SOURCE_LIVE
#define CACHE RESIL_SOURCE_CACHE
#define UNAV RESIL_SOURCE_UNAVAILABLE

/* Seed 003 fallback_demo.py run_demo(): the complete fixed output. */
static void
test_scenarios_seed003_inventory_timeline(void **state)
{
	static const step steps[] = {
		{ 0, 1, LIVE, 8, 0, 1 }, { 1, 0, CACHE, 8, 1, 2 },
		{ 2, 0, CACHE, 8, 2, 3 },
		{ 3, 1, CACHE, 8, 3, 3 }, /* paused: not called */
		{ 8, 1, LIVE, 8, 0, 4 }, { 9, 0, CACHE, 8, 1, 5 },
		{ 10, 0, CACHE, 8, 2, 6 },
		{ 20, 0, UNAV, -1, 0, 7 }, /* age 12 > 10 */
	};

	(void)state;
	run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}

/* Seed 003 "改一处输入": (3, True) -> (7, True): at 7, exactly the end of
 * the pause, the probe is let through (DESIGN: at the deadline). */
static void
test_scenarios_seed003_probe_at_pause_end(void **state)
{
	static const step steps[] = {
		{ 0, 1, LIVE, 8, 0, 1 },
		{ 1, 0, CACHE, 8, 1, 2 },
		{ 2, 0, CACHE, 8, 2, 3 },
		{ 7, 1, LIVE, 8, 0, 4 },
		{ 8, 1, LIVE, 8, 0, 5 },
	};

	(void)state;
	run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}

/* Seed 003 test_fallback_demo.py test_failed_probe_opens_again and
 * test_open_skips_call_and_probe_recovers. */
static void
test_scenarios_seed003_failed_probe_opens_again(void **state)
{
	static const step steps[] = {
		{ 0, 0, UNAV, -1, 0, 1 }, /* no cache yet */
		{ 1, 0, UNAV, -1, 0, 2 }, /* paused until 6 */
		{ 6, 0, UNAV, -1, 0, 3 }, /* the probe fails: until 11 */
		{ 7, 1, UNAV, -1, 0, 3 }, /* not called */
		{ 11, 1, LIVE, 8, 0, 4 },
	};

	(void)state;
	run_steps(steps, sizeof(steps) / sizeof(steps[0]));
}

/* Seed 003 test_stale_cache_is_unavailable (age 11 > 10) and
 * test_no_cache_is_unavailable; DESIGN: the age limit is inclusive. */
static void
test_scenarios_seed003_cache_age_limit(void **state)
{
	static const step stale[] = {
		{ 0, 1, LIVE, 8, 0, 1 },
		{ 10, 0, CACHE, 8, 10, 2 }, /* age == limit: served */
		{ 11, 0, UNAV, -1, 0, 3 },  /* limit + 1: not */
	};
	static const step none[] = {
		{ 0, 0, UNAV, -1, 0, 1 },
	};

	(void)state;
	run_steps(stale, 3);
	run_steps(none, 1);
}

/* Seed 001 (CacheFallback with the NULL placeholder, then MockFallback): a
 * cached null answers null from the cache; a miss falls through to the
 * mock. */
static void
test_scenarios_seed001_cached_null_then_mock(void **state)
{
	resil_manual_clock mc;
	resil_cache_config cc;
	resil_cache *c;
	resil_fallback *fb;
	resil_mock *m;
	resil_failure fail = { RESIL_E_CALL, -1, 1 };
	resil_args a = { "getUser", "A", 1 };
	resil_args b = { "getUser", "B", 1 };
	resil_result r;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_cache_config_init(&cc);
	cc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_cache_new(&c, &cc, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	m = hello_mock("fail:return empty", NULL);
	set_method(m, "getUser", RESIL_TYPE_ARRAY, NULL);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(resil_fallback_add_mock(fb, m), RESIL_OK);
	assert_int_equal(resil_fallback_record(fb, &a, NULL), RESIL_OK);
	resil_manual_clock_set(&mc, 4);
	assert_int_equal(resil_fallback_recover(fb, &a, &fail, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.age, 4);
	assert_int_equal(r.cause, RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(resil_fallback_recover(fb, &b, &fail, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.type, RESIL_VALUE_JSON);
	assert_string_equal(r.value.u.s.ptr, "[]");
	resil_result_free(&r);
	resil_fallback_free(fb);
	resil_mock_free(m);
	resil_cache_free(c);
}

static int
fail_fn(void *ctx, const resil_args *args, resil_value *out)
{
	int *calls = ctx;

	(void)args;
	(void)out;
	++*calls;
	return -1;
}

/* Seed 000's order table: force: answers and nothing below runs; fail: +
 * failover retries=2 (3 attempts) tries three times first, then mocks;
 * without a fallback the original error propagates (DESIGN). */
static void
test_scenarios_seed000_mock_order_in_pipeline(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_args a = { "getSomething", NULL, 0 };
	resil_result r;
	resil_diag d;
	int calls = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = IHELLO;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.retry.base_delay_ns = 0;
	cfg.breaker_enabled = 1;
	cfg.mock = "fail:return 'degraded'";
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call(p, &a, fail_fn, &calls, &r), RESIL_OK);
	assert_int_equal(calls, 3);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_str_value(&r, "degraded");
	resil_result_free(&r);

	assert_int_equal(
	    resil_pipeline_set_mock(p, NULL, "force:throw", &d), RESIL_OK);
	calls = 0;
	assert_int_equal(
	    resil_pipeline_call(p, &a, fail_fn, &calls, &r), RESIL_E_MOCK);
	assert_int_equal(calls, 0);
	assert_string_equal(r.message, RESIL_MOCK_MESSAGE);
	resil_result_free(&r);

	assert_int_equal(
	    resil_pipeline_set_mock(p, NULL, "false", &d), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call(p, &a, fail_fn, &calls, &r), RESIL_E_CALL);
	assert_int_equal(calls, 3);
	assert_int_equal(r.rc, -1);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

/* ------------------------------------------------------------------ */
/* More edges                                                         */
/* ------------------------------------------------------------------ */

/* Polly CircuitBreakerSpecs
 * .Should_not_open_circuit_if_exception_raised_is_not_one_of_the_specified_exceptions
 * read with ConsecutiveCount: an unhandled (ignored) exception between two
 * handled ones neither counts nor resets the consecutive count, so the
 * second handled one breaks (handledEventsAllowedBeforeBreaking 2); a
 * success in between does reset it. */
static void
test_scenarios_polly_ignored_does_not_reset_consecutive(void **state)
{
	bfx f;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 2;
	bfx_new(&f);
	call_o(&f, F);
	call_o(&f, S);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_o(&f, I);
	call_o(&f, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(mx(&f).consecutive_failures, 1);
	call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    f.events[0].reason, RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES);
	resil_breaker_free(f.b);
}

/* gobreaker_test.go TestCustomCircuitBreaker (HALF_OPEN, MaxRequests 3)
 * with gobreaker's default ReadyToTrip (consecutive failures only).
 * gobreaker reopens at the first failed probe. DESIGN decides otherwise:
 * HALF_OPEN decides after all K probes reported ("with only the
 * consecutive-failure trigger, any failed probe reopens" - at the
 * decision); reopen_on_first_failure gives gobreaker's behaviour, and the
 * outstanding probes then report stale. */
static void
test_scenarios_gobreaker_half_open_failed_probe(void **state)
{
	bfx f;
	resil_permit p1, p2, p3;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 60;
	f.cfg.permitted_probes = 3;
	bfx_new(&f);
	call_o(&f, F);
	resil_manual_clock_set(&f.mc, 60);
	assert_int_equal(resil_breaker_acquire(f.b, &p1), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(f.b, &p2), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(f.b, &p3), RESIL_OK);
	resil_breaker_record(f.b, &p1, S);
	resil_breaker_record(f.b, &p2, F);
	assert_int_equal(
	    st(&f), RESIL_BREAKER_HALF_OPEN); /* gobreaker: OPEN */
	resil_breaker_record(f.b, &p3, S);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[f.rec.count - 1].reason,
	    RESIL_BREAKER_REASON_PROBES_FAILED);
	resil_breaker_free(f.b);

	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 60;
	f.cfg.permitted_probes = 3;
	f.cfg.reopen_on_first_failure = 1;
	bfx_new(&f);
	call_o(&f, F);
	resil_manual_clock_set(&f.mc, 60);
	assert_int_equal(resil_breaker_acquire(f.b, &p1), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(f.b, &p2), RESIL_OK);
	resil_breaker_record(f.b, &p1, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(f.events[f.rec.count - 1].reason,
	    RESIL_BREAKER_REASON_PROBE_FAILED);
	assert_int_equal(resil_breaker_record(f.b, &p2, S), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(mx(&f).stale, 1);
	resil_breaker_free(f.b);
}

/* Resilience4j CircuitBreakerStateMachineTest slow calls
 * (slowCallDurationThreshold 4 s) at the boundary. DESIGN: slow when
 * duration > threshold, strictly: a 4000-tick call is not slow, 4001 is. */
static void
test_scenarios_r4j_slow_threshold_is_strict(void **state)
{
	bfx f;
	int i;

	(void)state;
	r4j_setup(&f);
	for (i = 0; i < 5; i++)
		call_dur(&f, S, 4000);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).window_slow, 0);
	assert_true(mx(&f).slow_call_rate == 0.0f);
	resil_breaker_reset(f.b);
	for (i = 0; i < 4; i++)
		call_dur(&f, S, 4001);
	assert_int_equal(mx(&f).window_slow, 4);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED); /* 4 < min calls */
	call_dur(&f, S, 4001);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* DESIGN: "the passage of time alone never trips a breaker; only a
 * recorded outcome does" (Polly's advanced breaker and Resilience4j's time
 * window both evaluate on a recorded outcome). Two successes leave the
 * window; the remaining failure is 100%, yet the breaker stays CLOSED
 * until an outcome is recorded. */
static void
test_scenarios_design_time_alone_never_trips(void **state)
{
	bfx f;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 60;
	f.cfg.min_calls = 1;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 2;
	f.cfg.bucket_ns = 10;
	bfx_new(&f);
	resil_manual_clock_set(&f.mc, 5);
	call_o(&f, S);
	call_o(&f, S);
	resil_manual_clock_set(&f.mc, 15);
	call_o(&f, F);                     /* 1 of 3 */
	resil_manual_clock_set(&f.mc, 20); /* bucket 0 leaves: 1 of 1 */
	assert_true(mx(&f).failure_rate == 100.0f);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_true(try_acquire(&f));
	assert_int_equal(f.rec.count, 0);
	call_o(&f, S); /* 1 of 2 = 50% < 60% */
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	call_o(&f, F); /* 2 of 3 */
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_breaker_free(f.b);
}

/* Dubbo MockClusterInvokerTest (method-level parameters override the
 * service-level mock, getMethodParameter) and DESIGN: a method-level
 * `false` turns a service-level force mock off for that method alone. */
static void
test_scenarios_dubbo_method_false_overrides_service_force(void **state)
{
	resil_mock *m;
	hello h = { 0, 0 };
	resil_result r;

	(void)state;
	m = hello_mock("force:return 'z'", NULL);
	set_method(m, "getSomething", RESIL_TYPE_STRING, "false");
	mcall(m, "getSomething", &h, &r);
	assert_str_value(&r, "Something");
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	mcall(m, "getSomething2", &h, &r);
	assert_str_value(&r, "z");
	resil_result_free(&r);
	assert_int_equal(h.calls, 1);
	resil_mock_free(m);
}

/* Dubbo MockInvoker.getInvoker ("mock object must implement the service
 * interface"; a missing IHelloServiceMock for mock=true) - DESIGN: both
 * refused at configuration time, the message quoting the spec. */
static void
test_scenarios_dubbo_mock_impl_refusals(void **state)
{
	resil_mock_registry *reg;
	resil_mock_config cfg;
	resil_mock *m = NULL;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_mock_registry_new(&reg, NULL), RESIL_OK);
	assert_int_equal(resil_mock_registry_add_impl(reg, "OtherMock",
	                     "IOtherService", hello_mock_impl, NULL, NULL),
	    RESIL_OK);
	resil_mock_config_init(&cfg);
	cfg.service = IHELLO;
	cfg.registry = reg;
	cfg.spec = "true";
	d.msg[0] = '\0';
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_null(m);
	assert_non_null(strstr(d.msg, "\"true\""));
	cfg.spec = "force:OtherMock";
	d.msg[0] = '\0';
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_null(m);
	assert_non_null(strstr(d.msg, "OtherMock"));
	cfg.spec = "fail:throw NoSuchError";
	d.msg[0] = '\0';
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "NoSuchError"));
	resil_mock_registry_free(reg);
}

/* dubbo-rpc MockInvokerTest.testParseMockValue: null, empty, true, false,
 * numbers, quoted strings, JSON object and array; an unquoted word is a
 * string (as Dubbo keeps the raw text). */
static void
test_scenarios_dubbo_parse_mock_value(void **state)
{
	static const struct {
		const char *spec;
		resil_type type;
		resil_vtype vt;
		const char *text; /* resil_value_format */
	} cases[] = {
		{ "return null", RESIL_TYPE_ANY, RESIL_VALUE_NULL, "null" },
		{ "return empty", RESIL_TYPE_ANY, RESIL_VALUE_NULL, "null" },
		{ "return empty", RESIL_TYPE_STRING, RESIL_VALUE_STRING,
		    "\"\"" },
		{ "return empty", RESIL_TYPE_INT, RESIL_VALUE_INT, "0" },
		{ "return empty", RESIL_TYPE_OBJECT, RESIL_VALUE_JSON, "{}" },
		{ "return true", RESIL_TYPE_ANY, RESIL_VALUE_BOOL, "true" },
		{ "return FALSE", RESIL_TYPE_ANY, RESIL_VALUE_BOOL, "false" },
		{ "return 123", RESIL_TYPE_ANY, RESIL_VALUE_INT, "123" },
		{ "return -5", RESIL_TYPE_ANY, RESIL_VALUE_INT, "-5" },
		{ "return 1.5", RESIL_TYPE_ANY, RESIL_VALUE_DOUBLE, "1.5" },
		{ "return 'foo'", RESIL_TYPE_ANY, RESIL_VALUE_STRING,
		    "\"foo\"" },
		{ "return \"foo\"", RESIL_TYPE_ANY, RESIL_VALUE_STRING,
		    "\"foo\"" },
		{ "return `foo`", RESIL_TYPE_ANY, RESIL_VALUE_STRING,
		    "\"foo\"" },
		{ "return foo", RESIL_TYPE_STRING, RESIL_VALUE_STRING,
		    "\"foo\"" },
		{ "return 1688", RESIL_TYPE_STRING, RESIL_VALUE_STRING,
		    "\"1688\"" },
		{ "return {\"a\":1}", RESIL_TYPE_ANY, RESIL_VALUE_JSON,
		    "{\"a\":1}" },
		{ "return []", RESIL_TYPE_ANY, RESIL_VALUE_JSON, "[]" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		resil_mock_spec s;
		resil_diag d;
		char buf[64];

		d.msg[0] = '\0';
		if (resil_mock_parse(&s, cases[i].spec, cases[i].type, NULL,
		        &d) != RESIL_OK)
			fail_msg("%s: %s", cases[i].spec, d.msg);
		assert_int_equal(s.action, RESIL_MOCK_RETURN);
		resil_value_format(&s.value, buf, sizeof(buf));
		if (s.value.type != cases[i].vt ||
		    strcmp(buf, cases[i].text) != 0)
			fail_msg("%s as %s: %s %s", cases[i].spec,
			    resil_type_name(cases[i].type),
			    resil_vtype_name(s.value.type), buf);
		resil_mock_spec_free(&s);
	}
}

/* A dependency that takes `took` ticks of the manual clock. */
typedef struct slow_dep {
	resil_manual_clock *mc;
	uint64_t took;
	int calls;
	uint64_t deadline;
} slow_dep;

static int
slow_fn(void *ctx, const resil_args *args, resil_value *out)
{
	slow_dep *s = ctx;

	(void)args;
	s->calls++;
	s->deadline = resil_pipeline_deadline();
	resil_manual_clock_advance(s->mc, s->took);
	*out = resil_value_int(1);
	return 0;
}

/* Seed 002: "Tried 3 times ... Last error is: ...TimeoutException:
 * Waiting server-side response timeout by scan timer is 3000 ms."
 * (timeout 3000 ms, retries 2). A call that returns after its timeout is a
 * failure (RESIL_E_TIMEOUT) and its late value is dropped; one that takes
 * exactly the timeout is in time (Dubbo's DefaultFuture times out when
 * elapsed > timeout). */
static void
test_scenarios_seed002_timeout_then_retries(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_pipeline_metrics pm;
	resil_args a = { "sayHello", NULL, 0 };
	resil_result r;
	resil_diag d;
	slow_dep s;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	s.mc = &mc;
	s.took = 3001;
	s.calls = 0;
	resil_pipeline_config_init(&cfg);
	cfg.service = "com.example.api.UserService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.timeout_ns = 3000;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.retry.base_delay_ns = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call(p, &a, slow_fn, &s, &r), RESIL_E_TIMEOUT);
	assert_int_equal(s.calls, 3);
	assert_int_equal(r.attempts, 3);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL); /* dropped */
	assert_int_equal(s.deadline, 2 * 3001 + 3000);
	resil_result_free(&r);
	assert_int_equal(resil_pipeline_get_metrics(p, &pm), RESIL_OK);
	assert_int_equal(pm.timeouts, 3);

	s.took = 3000;
	s.calls = 0;
	assert_int_equal(
	    resil_pipeline_call(p, &a, slow_fn, &s, &r), RESIL_OK);
	assert_int_equal(s.calls, 1);
	assert_int_equal(r.value.u.i, 1);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

/* Seed 000 / DESIGN composition: a business error is propagated
 * untouched: not counted by the breaker, not retried, no fallback. */
static void
test_scenarios_seed000_business_through_pipeline(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_breaker_metrics bm;
	resil_args a = { "getSomething", NULL, 0 };
	resil_result r;
	resil_diag d;
	int calls = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = IHELLO;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.classifier.fn = business_400;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.retry.base_delay_ns = 0;
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 1;
	cfg.cache_enabled = 1;
	cfg.mock = "fail:return 'x'";
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call(p, &a, biz_fn, &calls, &r), RESIL_E_BUSINESS);
	assert_int_equal(r.rc, 400);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(calls, 1);
	resil_result_free(&r);
	assert_int_equal(resil_breaker_get_metrics(
	                     resil_pipeline_breaker(p, "getSomething"), &bm),
	    RESIL_OK);
	assert_int_equal(bm.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(bm.failures, 0);
	assert_int_equal(bm.ignored, 1);
	resil_pipeline_free(p);
}

/* Dubbo method-level retries (<dubbo:method name="x" retries="0"/>): a
 * method's max_attempts overrides the service-level retry setting. */
static void
test_scenarios_dubbo_method_level_retries(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_method_config methods[1];
	resil_pipeline *p;
	resil_args a = { "createOrder", NULL, 0 };
	resil_args b = { "getSomething", NULL, 0 };
	resil_result r;
	resil_diag d;
	int calls = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "createOrder";
	methods[0].max_attempts = 1; /* retries=0 */
	cfg.service = IHELLO;
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3; /* retries=2 */
	cfg.retry.base_delay_ns = 0;
	cfg.methods = methods;
	cfg.nmethods = 1;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call(p, &a, fail_fn, &calls, &r), RESIL_E_CALL);
	assert_int_equal(calls, 1);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	calls = 0;
	assert_int_equal(
	    resil_pipeline_call(p, &b, fail_fn, &calls, &r), RESIL_E_CALL);
	assert_int_equal(calls, 3);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

/* Seed 001 (bounded local cache) and DESIGN: the cache never grows past
 * its bound; an entry read since it was stored gets a second chance (the
 * cache's CLOCK eviction, docs/fallback.md), so the unread one goes. */
static void
test_scenarios_seed001_cache_bound_second_chance(void **state)
{
	resil_cache_config cc;
	resil_cache *c;
	resil_cache_stats cs;
	resil_value v = resil_value_int(1), out;
	resil_args k1 = { "m", "1", 1 }, k2 = { "m", "2", 1 },
	           k3 = { "m", "3", 1 };
	resil_manual_clock mc;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_cache_config_init(&cc);
	cc.clock = resil_manual_clock_hook(&mc);
	cc.max_entries = 2;
	cc.shards = 1;
	assert_int_equal(resil_cache_new(&c, &cc, NULL), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k1, &v), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &k2, &v), RESIL_OK);
	assert_int_equal(resil_cache_get(c, &k1, &out, NULL), RESIL_OK);
	resil_value_free(&out);
	assert_int_equal(resil_cache_put(c, &k3, &v), RESIL_OK); /* evicts 2 */
	assert_int_equal(
	    resil_cache_get(c, &k2, &out, NULL), RESIL_E_NOTFOUND);
	assert_int_equal(resil_cache_get(c, &k1, &out, NULL), RESIL_OK);
	resil_value_free(&out);
	assert_int_equal(resil_cache_get(c, &k3, &out, NULL), RESIL_OK);
	resil_value_free(&out);
	assert_int_equal(resil_cache_stats_get(c, &cs), RESIL_OK);
	assert_int_equal(cs.entries, 2);
	assert_int_equal(cs.evictions, 1);
	resil_cache_free(c);
}

/* Seed 003 again, configured as Dubbo-style key=value text (the form of
 * examples/sim/inventory.conf), so the configuration path gives the same
 * timeline as the C configuration. */
static void
test_scenarios_seed003_inventory_from_config_text(void **state)
{
	static const char text[] = "service=InventoryService\n"
	                           "getStock.type=int\n"
	                           "breaker.enabled=true\n"
	                           "breaker.failure_rate=0\n"
	                           "breaker.consecutive_failures=2\n"
	                           "breaker.open_wait=5ns\n"
	                           "breaker.probes=1\n"
	                           "cache.enabled=true\n"
	                           "cache.max_age=10ns\n";
	static const step steps[] = {
		{ 0, 1, LIVE, 8, 0, 1 },
		{ 1, 0, CACHE, 8, 1, 2 },
		{ 2, 0, CACHE, 8, 2, 3 },
		{ 3, 1, CACHE, 8, 3, 3 },
		{ 8, 1, LIVE, 8, 0, 4 },
		{ 9, 0, CACHE, 8, 1, 5 },
		{ 10, 0, CACHE, 8, 2, 6 },
		{ 20, 0, UNAV, -1, 0, 7 },
	};
	resil_config *conf;
	resil_pipeline_config pc;
	resil_pipeline *p;
	resil_manual_clock mc;
	resil_args a = { "getStock", NULL, 0 };
	stock sk = { 0, 0 };
	resil_diag d;
	size_t i;

	(void)state;
	d.msg[0] = '\0';
	if (resil_config_parse_string(
	        &conf, text, "inventory.conf", NULL, &d) != RESIL_OK)
		fail_msg("config: %s", d.msg);
	resil_manual_clock_init(&mc, 0);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		resil_result r;

		resil_manual_clock_set(&mc, steps[i].t);
		sk.up = steps[i].up;
		resil_pipeline_call(p, &a, stock_fn, &sk, &r);
		assert_int_equal(r.source, steps[i].source);
		assert_int_equal(sk.calls, steps[i].calls);
		if (steps[i].stock >= 0) {
			assert_int_equal(r.value.u.i, steps[i].stock);
			assert_int_equal(r.age, steps[i].age);
		}
		resil_result_free(&r);
	}
	resil_pipeline_free(p);
	resil_config_free(conf);
}

/* Config errors in Dubbo-style text name the origin, line and key
 * (resilience4j CircuitBreakerConfigTest refusals, through the text). */
static void
test_scenarios_config_text_refusal_names_line(void **state)
{
	resil_config *conf = NULL;
	resil_diag d;

	(void)state;
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "service=S\nbreaker.failure_rate=101\n", "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_null(conf);
	assert_string_equal(d.msg,
	    "svc.conf:2: breaker.failure_rate: 101 is out of range 0..100");
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(&conf,
	        "service=S\ngetStock.mock=fail:\n", "svc.conf", NULL, &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "svc.conf:2:"));
	assert_non_null(strstr(d.msg, "\"fail:\""));
}

/* Finagle RetryBudget / gRPC retry throttling, as DESIGN's retry budget:
 * each call deposits budget_ratio tokens, each retry spends one; with the
 * bank empty and no floor, a failing call is not retried (stop BUDGET);
 * after ten calls at 0.1 there is one whole token: one retry. */
static void
test_scenarios_budget_bounds_retries(void **state)
{
	static const int fails[] = { -1, -1, -1 };
	rfx f;
	rdep ok = { NULL, 0, 0, RESIL_OK, { 0 } };
	rdep bad = { fails, 3, 0, RESIL_OK, { 0 } };
	resil_retry_result res;
	resil_retry_metrics m;
	int i;

	(void)state;
	rfx_init(&f);
	f.cfg.base_delay_ns = 0;
	f.cfg.budget_ratio = 0.1;
	f.cfg.budget_max_tokens = 10;
	f.cfg.budget_min_retries = 0;
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &bad, NULL, &res);
	assert_int_equal(bad.calls, 1);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_BUDGET);
	for (i = 0; i < 8; i++)
		resil_retry_call(f.r, rdep_fn, &ok, NULL, &res);
	/* Ten calls so far with this one: exactly one token. */
	bad.calls = 0;
	resil_retry_call(f.r, rdep_fn, &bad, NULL, &res);
	assert_int_equal(bad.calls, 2);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_BUDGET);
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_int_equal(m.budget_refusals, 2);
	assert_int_equal(m.retries, 1);
	resil_retry_free(f.r);

	/* The floor: 2 retries per 10 ticks with an empty bank. */
	rfx_init(&f);
	f.cfg.max_attempts = 10;
	f.cfg.base_delay_ns = 0;
	f.cfg.budget_ratio = 0.000001;
	f.cfg.budget_min_retries = 2;
	f.cfg.budget_period_ns = 10;
	rfx_new(&f);
	bad.calls = 0;
	bad.n = 3;
	resil_retry_call(f.r, rdep_fn, &bad, NULL, &res);
	assert_int_equal(bad.calls, 3); /* first + 2 floor retries */
	assert_int_equal(res.stop, RESIL_RETRY_STOP_BUDGET);
	resil_manual_clock_set(&f.mc, 10);
	bad.calls = 0;
	resil_retry_call(f.r, rdep_fn, &bad, NULL, &res);
	assert_int_equal(bad.calls, 3);
	resil_retry_free(f.r);
}

/* resilience4j CircuitBreakerStateMachineTest (metrics are reset on the
 * move to CLOSED) with a TIME window: outcomes recorded before the trip, in
 * buckets still inside the span, do not count after the breaker closes
 * (DESIGN: counts start empty on entering CLOSED). */
static void
test_scenarios_r4j_time_window_empty_after_close(void **state)
{
	bfx f;
	int i;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 50;
	f.cfg.min_calls = 4;
	f.cfg.window_type = RESIL_WINDOW_TIME;
	f.cfg.window_size = 10;
	f.cfg.bucket_ns = 10; /* a 100-tick span */
	f.cfg.open_wait_ns = 5;
	bfx_new(&f);
	for (i = 0; i < 4; i++)
		call_o(&f, F);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&f.mc, 5);
	call_o(&f, S); /* the probe closes */
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	assert_int_equal(mx(&f).window_calls, 0);
	/* One failure now is 1 of 1 in the new window, not 5 of 5. */
	call_o(&f, F);
	assert_int_equal(mx(&f).window_calls, 1);
	call_o(&f, S);
	call_o(&f, S);
	assert_int_equal(st(&f), RESIL_BREAKER_CLOSED);
	resil_breaker_free(f.b);
}

/* DESIGN (with a fixed seed and the manual clock the backoff sequence is
 * exact): the plan a configuration announces is the waits a call makes,
 * here with AWS decorrelated jitter from a seeded generator. */
static void
test_scenarios_retry_plan_matches_call(void **state)
{
	static const int fails[] = { -1, -1, -1, -1, -1, -1 };
	rfx f;
	rdep d = { fails, 6, 0, RESIL_OK, { 0 } };
	resil_retry_result res;
	uint64_t waits[8];
	size_t n = 0, i;

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 6;
	f.cfg.base_delay_ns = 100;
	f.cfg.max_delay_ns = 5000;
	f.cfg.jitter = RESIL_JITTER_DECORRELATED;
	f.cfg.seed = 42;
	assert_int_equal(
	    resil_retry_plan(&f.cfg, NULL, waits, 8, &n, NULL), RESIL_OK);
	assert_int_equal(n, 5);
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 6);
	for (i = 0; i < 5; i++) {
		assert_int_equal(f.events[i].wait, waits[i]);
		assert_true(waits[i] >= 100 && waits[i] <= 5000);
		assert_int_equal(d.starts[i + 1] - d.starts[i], waits[i]);
	}
	resil_retry_free(f.r);
}

static resil_verdict
pass_handler(void *ctx, const resil_args *args, const resil_failure *failure,
    resil_result *out)
{
	int *asked = ctx;

	(void)args;
	(void)failure;
	(void)out;
	++*asked;
	return RESIL_FALLBACK_PASS;
}

/* Seed 001 ("先试缓存，缓存没命中就试Mock") and DESIGN: a chain whose handlers
 * all pass yields UNAVAILABLE with no value and the original failure
 * attached; no chain at all propagates the original error. */
static void
test_scenarios_seed001_chain_all_pass_is_unavailable(void **state)
{
	resil_cache_config cc;
	resil_cache *c;
	resil_fallback *fb;
	resil_failure fail = { RESIL_E_OPEN, 0, 0 };
	resil_args a = { "getUser", "A", 1 };
	resil_result r;
	int asked = 0;

	(void)state;
	resil_cache_config_init(&cc);
	assert_int_equal(resil_cache_new(&c, &cc, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_new(&fb, NULL, NULL), RESIL_OK);
	assert_int_equal(resil_fallback_recover(fb, &a, &fail, &r),
	    RESIL_E_OPEN); /* empty chain: the original error */
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	assert_int_equal(resil_fallback_add_cache(fb, c), RESIL_OK);
	assert_int_equal(
	    resil_fallback_add_handler(fb, pass_handler, &asked), RESIL_OK);
	assert_int_equal(
	    resil_fallback_recover(fb, &a, &fail, &r), RESIL_E_UNAVAILABLE);
	assert_int_equal(asked, 1);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.cause, RESIL_E_OPEN);
	resil_result_free(&r);
	resil_fallback_free(fb);
	resil_cache_free(c);
}

/* resilience4j CircuitBreakerConfigTest (maxWaitDurationInOpenState with an
 * exponential wait interval): the growing OPEN wait stops at its cap. */
static void
test_scenarios_r4j_open_wait_cap(void **state)
{
	bfx f;
	uint64_t t = 0;
	int i;
	static const uint64_t want[] = { 20, 40, 50, 50 };

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 10;
	f.cfg.open_wait_multiplier = 2.0;
	f.cfg.open_wait_max_ns = 50;
	bfx_new(&f);
	call_o(&f, F);
	assert_int_equal(mx(&f).open_wait, 10);
	t = 10;
	for (i = 0; i < 4; i++) {
		resil_manual_clock_set(&f.mc, t);
		call_o(&f, F); /* the probe fails */
		assert_int_equal(mx(&f).open_wait, want[i]);
		t += want[i];
		resil_manual_clock_set(&f.mc, t - 1);
		assert_false(try_acquire(&f));
	}
	resil_breaker_free(f.b);
}

static int
mock_impl_fails(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return -9;
}

/* Dubbo MockClusterInvoker.doMockInvoke: a non-business failure of the
 * mock itself is rethrown with a message naming the mock's failure and
 * the original one (getMockExceptionMessage). resil: RESIL_E_CALL with the
 * implementation's rc, the original failure kept as the cause. */
static void
test_scenarios_dubbo_mock_impl_failure_rethrown(void **state)
{
	resil_mock_registry *reg;
	resil_mock *m;
	hello h = { 1, 0 };
	resil_result r;

	(void)state;
	assert_int_equal(resil_mock_registry_new(&reg, NULL), RESIL_OK);
	assert_int_equal(resil_mock_registry_add_impl(reg, IHELLO "Mock",
	                     IHELLO, mock_impl_fails, NULL, NULL),
	    RESIL_OK);
	m = hello_mock("fail:default", reg);
	assert_int_equal(mcall(m, "getSomething", &h, &r), RESIL_E_CALL);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.rc, -9);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, -1);
	assert_non_null(strstr(r.message, "rc -9"));
	assert_non_null(strstr(r.message, "rc -1"));
	resil_result_free(&r);
	resil_mock_free(m);
	resil_mock_registry_free(reg);
}

/* Resilience4j (one CircuitBreaker instance per backend name) and Dubbo
 * (method-level configuration): with breaker_per_method, a declared method
 * trips its own breaker; the other methods keep calling. */
static void
test_scenarios_breaker_per_method_isolation(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_method_config methods[2];
	resil_pipeline *p;
	resil_args a = { "getStock", NULL, 0 };
	resil_args b = { "getPrice", NULL, 0 };
	resil_result r;
	resil_diag d;
	int calls = 0;
	stock sk = { 1, 0 };

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "getStock";
	methods[1].name = "getPrice";
	cfg.service = "InventoryService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.breaker_enabled = 1;
	cfg.breaker_per_method = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 2;
	cfg.breaker.open_wait_ns = 5;
	cfg.methods = methods;
	cfg.nmethods = 2;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	assert_ptr_not_equal(resil_pipeline_breaker(p, "getStock"),
	    resil_pipeline_breaker(p, "getPrice"));
	resil_pipeline_call(p, &a, fail_fn, &calls, &r);
	resil_result_free(&r);
	resil_pipeline_call(p, &a, fail_fn, &calls, &r);
	resil_result_free(&r);
	assert_int_equal(
	    resil_pipeline_call(p, &a, fail_fn, &calls, &r), RESIL_E_OPEN);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_OPEN);
	resil_result_free(&r);
	assert_int_equal(calls, 2);
	assert_int_equal(
	    resil_pipeline_call(p, &b, stock_fn, &sk, &r), RESIL_OK);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_CLOSED);
	assert_int_equal(sk.calls, 1);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

/* DESIGN deadline boundary: an attempt starts only if its start time is
 * before the deadline; one that would start exactly at it does not, and
 * the wait for it is not begun. Fixed 5, deadline 10: attempts at 0, 5. */
static void
test_scenarios_design_retry_deadline_boundary(void **state)
{
	static const int fails[] = { -1, -1, -1, -1 };
	rfx f;
	rdep d = { fails, 4, 0, RESIL_OK, { 0 } };
	resil_retry_result res;

	(void)state;
	rfx_init(&f);
	f.cfg.max_attempts = 4;
	f.cfg.base_delay_ns = 5;
	f.cfg.deadline_ns = 10;
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	assert_int_equal(d.calls, 2);
	assert_int_equal(d.starts[1], 5);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_DEADLINE);
	assert_int_equal(resil_manual_clock_now(&f.mc), 5);
	assert_int_equal(
	    f.events[f.rec.count - 1].type, RESIL_RETRY_EVENT_GIVE_UP);
	assert_int_equal(
	    f.events[f.rec.count - 1].stop, RESIL_RETRY_STOP_DEADLINE);
	resil_retry_free(f.r);
}

/* Resilience4j CircuitBreakerConfig.maxWaitDurationInHalfOpenState (HALF_OPEN
 * goes back to OPEN when the probes have not decided within it; Resilience4j
 * runs a timer, resil decides at the next acquire or record): a probe that
 * reports after the half-open limit is stale; the breaker is OPEN from the
 * limit (not from the late report). */
static void
test_scenarios_r4j_max_wait_in_half_open(void **state)
{
	bfx f;
	resil_permit p;

	(void)state;
	bfx_init(&f, 0);
	f.cfg.failure_rate_pct = 0;
	f.cfg.consecutive_failures = 1;
	f.cfg.open_wait_ns = 30;
	f.cfg.max_half_open_ns = 30;
	bfx_new(&f);
	call_o(&f, F);
	resil_manual_clock_set(&f.mc, 30);
	assert_int_equal(resil_breaker_acquire(f.b, &p), RESIL_OK);
	resil_manual_clock_set(&f.mc, 70);
	assert_int_equal(resil_breaker_record(f.b, &p, S), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_OPEN);
	assert_int_equal(mx(&f).stale, 1);
	assert_int_equal(f.events[f.rec.count - 1].reason,
	    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT);
	assert_int_equal(f.events[f.rec.count - 1].time, 60);
	resil_manual_clock_set(&f.mc, 89);
	assert_false(try_acquire(&f));
	resil_manual_clock_set(&f.mc, 90);
	assert_true(try_acquire(&f));
	resil_breaker_free(f.b);
}

/* STYLE/brief: a NULL argument anywhere returns RESIL_E_INVAL, never
 * crashes (the peers throw NullPointerException / ArgumentNullException). */
static void
test_scenarios_null_arguments_are_refused(void **state)
{
	resil_breaker_config bc = resil_breaker_config_default();
	resil_retry_config rc = resil_retry_config_default();
	resil_breaker *b;
	resil_retry *r;
	resil_permit p;
	resil_result res;
	resil_retry_result rr;
	resil_value v;
	resil_args a = { NULL, NULL, 0 };
	resil_failure fl = { RESIL_E_CALL, -1, 1 };
	resil_pipeline_config pc;
	resil_pipeline *pp;
	resil_diag d;
	uint64_t w;
	char buf[8];

	(void)state;
	assert_int_equal(resil_breaker_new(NULL, &bc, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_new(&b, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_acquire(NULL, &p), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_record(NULL, &p, S), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_release(NULL, &p), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_get_metrics(NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_reset(NULL), RESIL_E_INVAL);
	assert_int_equal(resil_retry_new(NULL, &rc, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_retry_new(&r, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_call(NULL, rdep_fn, NULL, NULL, &rr), RESIL_E_INVAL);
	assert_int_equal(resil_retry_new(&r, &rc, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_call(r, NULL, NULL, NULL, &rr), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_next_delay(r, 0, 0, 0.0, &w), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_next_delay(r, 1, 0, 0.0, NULL), RESIL_E_INVAL);
	resil_retry_free(r);
	assert_int_equal(
	    resil_retry_result_format(NULL, NULL, buf, 8), RESIL_E_INVAL);
	assert_int_equal(
	    resil_mock_parse(NULL, "return 1", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_mock_new(NULL, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_mock_call(NULL, &a, hello_fn, NULL, NULL, &res),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_fallback_recover(NULL, NULL, &fl, &res), RESIL_E_INVAL);
	assert_int_equal(resil_cache_get(NULL, &a, &v, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_value_string(NULL, "x", 1, NULL), RESIL_E_INVAL);
	resil_pipeline_config_init(&pc);
	pc.service = "S";
	assert_int_equal(resil_pipeline_new(&pp, &pc, &d), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call(pp, &a, hello_fn, NULL, &res), RESIL_E_INVAL);
	assert_int_equal(resil_pipeline_call(pp, NULL, hello_fn, NULL, &res),
	    RESIL_E_INVAL);
	resil_pipeline_free(pp);
	assert_int_equal(resil_pipeline_new(&pp, NULL, &d), RESIL_E_INVAL);
	assert_int_equal(resil_config_parse_string(NULL, "", NULL, NULL, NULL),
	    RESIL_E_INVAL);
}

/* CircuitBreakerStateMachineTest.shouldRecordMetricsInMetricsOnlyState and
 * .shouldResetMetricsAfterMetricsOnlyStateTransition: METRICS_ONLY starts
 * with empty counts, records (3 of 5 failed: 60%) and never trips. */
static void
test_scenarios_r4j_metrics_only_records_never_trips(void **state)
{
	bfx f;
	resil_breaker_metrics m;

	(void)state;
	r4j_setup(&f);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	assert_int_equal(mx(&f).window_calls, 2);
	assert_int_equal(resil_breaker_metrics_only(f.b), RESIL_OK);
	assert_int_equal(st(&f), RESIL_BREAKER_METRICS_ONLY);
	assert_int_equal(mx(&f).window_calls, 0);
	call_dur(&f, F, 0);
	call_dur(&f, F, 0);
	call_dur(&f, F, 0);
	assert_true(mx(&f).failure_rate == -1.0f);
	call_dur(&f, S, 0);
	call_dur(&f, S, 0);
	m = mx(&f);
	assert_int_equal(m.state, RESIL_BREAKER_METRICS_ONLY);
	assert_int_equal(m.window_calls, 5);
	assert_int_equal(m.window_failures, 3);
	assert_true(m.failure_rate == 60.0f);
	call_dur(&f, F, 0);
	assert_int_equal(st(&f), RESIL_BREAKER_METRICS_ONLY);
	assert_int_equal(f.rec.count, 1); /* only the manual transition */
	resil_breaker_free(f.b);
}

/* resilience4j-ratelimiter AtomicRateLimiterTest (limitForPeriod 1,
 * limitRefreshPeriod 1 s: one permit, refused until the next period).
 * Difference to review (DESIGN silent): Resilience4j refills
 * limitForPeriod permits at each period boundary (cycles counted from
 * creation); resil is a GCRA: permits come back one every period / rate
 * after they were taken. 10 per 1000 ticks, all 10 taken at 999: at 1000
 * Resilience4j grants again (a new cycle), resil at 1099. */
static void
test_scenarios_r4j_rate_limiter_period(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit_config cfg;
	resil_ratelimit *rl;
	uint64_t after = 0;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil_ratelimit_config_init(&cfg);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.rate = 1;
	cfg.period_ns = 1000;
	cfg.burst = 1;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &after), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 1000);
	resil_manual_clock_set(&mc, 999);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 1);
	resil_manual_clock_set(&mc, 1000);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &after), RESIL_OK);
	resil_ratelimit_free(rl);

	resil_manual_clock_init(&mc, 0);
	cfg.rate = 10;
	cfg.burst = 10;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, NULL), RESIL_OK);
	resil_manual_clock_set(&mc, 999);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 10, &after), RESIL_OK);
	resil_manual_clock_set(&mc, 1000);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &after), RESIL_E_LIMITED);
	assert_int_equal(after, 99);
	resil_manual_clock_set(&mc, 1099);
	assert_int_equal(resil_ratelimit_try_acquire(rl, 1, &after), RESIL_OK);
	resil_ratelimit_free(rl);
}

/* resilience4j-bulkhead SemaphoreBulkheadTest (maxConcurrentCalls 1: a
 * second concurrent call gets BulkheadFullException; after the first
 * ends, a call enters). */
static void
test_scenarios_r4j_bulkhead_full(void **state)
{
	resil_bulkhead_config cfg;
	resil_bulkhead *bh;

	(void)state;
	resil_bulkhead_config_init(&cfg);
	cfg.max_concurrent = 1;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	resil_bulkhead_free(bh);
}

typedef struct evlog {
	char text[16][96];
	uint64_t time[16];
	int n;
} evlog;

static void
evlog_listener(const resil_pipeline_event *ev, void *ctx)
{
	evlog *l = ctx;

	if (ev->stage != RESIL_STAGE_BREAKER || l->n >= 16)
		return;
	snprintf(l->text[l->n], sizeof(l->text[0]), "%s", ev->text);
	l->time[l->n] = ev->time;
	l->n++;
}

/* Seed 003 timeline seen through the pipeline's events and counters: the
 * breaker's transitions, in the text pipeline.h documents ("breaker CLOSED
 * -> OPEN (consecutive_failures)"), at their ticks; 2 live answers, 5
 * cached, 1 unavailable. */
static void
test_scenarios_seed003_events_and_metrics(void **state)
{
	static const struct {
		uint64_t t;
		int up;
	} script[] = { { 0, 1 }, { 1, 0 }, { 2, 0 }, { 3, 1 }, { 8, 1 },
		{ 9, 0 }, { 10, 0 }, { 20, 0 } };
	static const struct {
		uint64_t t;
		const char *text;
	} want[] = {
		{ 2, "breaker CLOSED -> OPEN (consecutive_failures)" },
		{ 8, "breaker OPEN -> HALF_OPEN (wait_elapsed)" },
		{ 8, "breaker HALF_OPEN -> CLOSED (probes_passed)" },
		{ 10, "breaker CLOSED -> OPEN (consecutive_failures)" },
		{ 20, "breaker OPEN -> HALF_OPEN (wait_elapsed)" },
		{ 20, "breaker HALF_OPEN -> OPEN (probes_failed)" },
	};
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_pipeline_metrics pm;
	resil_args a = { "getStock", NULL, 0 };
	stock sk = { 0, 0 };
	evlog log;
	resil_diag d;
	size_t i;

	(void)state;
	memset(&log, 0, sizeof(log));
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "InventoryService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 2;
	cfg.breaker.open_wait_ns = 5;
	cfg.cache_enabled = 1;
	cfg.cache.max_age = 10;
	cfg.listener = evlog_listener;
	cfg.listener_ctx = &log;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &d), RESIL_OK);
	for (i = 0; i < sizeof(script) / sizeof(script[0]); i++) {
		resil_result r;

		resil_manual_clock_set(&mc, script[i].t);
		sk.up = script[i].up;
		resil_pipeline_call(p, &a, stock_fn, &sk, &r);
		if (script[i].t == 3) {
			/* Rejected by the OPEN breaker: no attempt made. */
			assert_int_equal(r.attempts, 0);
			assert_int_equal(r.cause, RESIL_E_OPEN);
			assert_int_equal(r.breaker_state, RESIL_BREAKER_OPEN);
		}
		if (script[i].t == 20)
			assert_non_null(strstr(
			    r.message, resil_strerror(RESIL_E_UNAVAILABLE)));
		resil_result_free(&r);
	}
	assert_int_equal(log.n, 6);
	for (i = 0; i < 6; i++) {
		assert_string_equal(log.text[i], want[i].text);
		assert_int_equal(log.time[i], want[i].t);
	}
	assert_int_equal(resil_pipeline_get_metrics(p, &pm), RESIL_OK);
	assert_int_equal(pm.calls, 8);
	assert_int_equal(pm.live, 2);
	assert_int_equal(pm.cache, 5);
	assert_int_equal(pm.unavailable, 1);
	assert_int_equal(pm.mock + pm.errors + pm.fallback, 0);
	resil_pipeline_free(p);
}

/* Seed 002's "Tried N times ... Last error is: ..." for every way a call
 * stops, as retry.h documents the lines. */
static void
test_scenarios_seed002_format_every_stop(void **state)
{
	static const int fails[] = { -1, -1, -1, -1 };
	static const int biz[] = { 400 };
	static const int late_ok[] = { -1, 0 };
	rfx f;
	rdep d = { fails, 4, 0, RESIL_OK, { 0 } };
	resil_retry_result res;
	char buf[160];

	(void)state;
	/* The deadline: attempts at 0 and 5, the next would start at 10. */
	rfx_init(&f);
	f.cfg.base_delay_ns = 5;
	f.cfg.deadline_ns = 10;
	rfx_new(&f);
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	resil_retry_result_format(&res, NULL, buf, sizeof(buf));
	assert_string_equal(buf,
	    "Tried 2 times, stopped at the deadline. Last error is: rc -1 "
	    "(failure)");
	resil_retry_free(f.r);

	/* The budget: an empty bank and no floor. */
	rfx_init(&f);
	f.cfg.base_delay_ns = 0;
	f.cfg.budget_ratio = 0.1;
	f.cfg.budget_min_retries = 0;
	rfx_new(&f);
	d.calls = 0;
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	resil_retry_result_format(
	    &res, "java.net.ConnectException", buf, sizeof(buf));
	assert_string_equal(buf,
	    "Tried 1 time, retry budget exhausted. Last error is: "
	    "java.net.ConnectException");
	resil_retry_free(f.r);

	/* Not retryable: a business error. */
	rfx_init(&f);
	f.cfg.classifier.fn = rc_400_business_7_ignored;
	rfx_new(&f);
	d.script = biz;
	d.n = 1;
	d.calls = 0;
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	resil_retry_result_format(&res, NULL, buf, sizeof(buf));
	assert_string_equal(buf,
	    "Tried 1 time, not retryable. Last error is: rc 400 (business)");

	/* Success after a retry. */
	d.script = late_ok;
	d.n = 2;
	d.calls = 0;
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	resil_retry_result_format(&res, NULL, buf, sizeof(buf));
	assert_string_equal(buf, "Tried 2 times, succeeded.");

	/* A rejection (the status's text). */
	d.script = NULL;
	d.n = 0;
	d.calls = 0;
	d.status = RESIL_E_OPEN;
	resil_retry_call(f.r, rdep_fn, &d, NULL, &res);
	resil_retry_result_format(&res, NULL, buf, sizeof(buf));
	assert_string_equal(buf,
	    "Tried 1 time, not retryable. Last error is: rejected: circuit "
	    "breaker open");
	/* Cut like snprintf, always terminated. */
	resil_retry_result_format(&res, NULL, buf, 6);
	assert_string_equal(buf, "Tried");
	resil_retry_free(f.r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_scenarios_r4j_open_after_failure_rate_exceeded),
		cmocka_unit_test(
		    test_scenarios_r4j_open_after_slow_call_rate_exceeded),
		cmocka_unit_test(
		    test_scenarios_r4j_half_open_after_wait_duration),
		cmocka_unit_test(
		    test_scenarios_r4j_open_wait_grows_exponentially),
		cmocka_unit_test(
		    test_scenarios_r4j_only_four_probes_in_half_open),
		cmocka_unit_test(
		    test_scenarios_r4j_release_permission_gives_probe_back),
		cmocka_unit_test(
		    test_scenarios_r4j_half_open_reopens_on_failure_rate),
		cmocka_unit_test(
		    test_scenarios_r4j_half_open_reopens_on_slow_rate),
		cmocka_unit_test(
		    test_scenarios_r4j_half_open_closes_below_threshold),
		cmocka_unit_test(
		    test_scenarios_r4j_ignored_outcome_releases_probe),
		cmocka_unit_test(test_scenarios_r4j_ignored_then_closed),
		cmocka_unit_test(test_scenarios_r4j_forced_open_and_disabled),
		cmocka_unit_test(test_scenarios_r4j_reset_clears_counts),
		cmocka_unit_test(
		    test_scenarios_r4j_transition_closed_to_half_open),
		cmocka_unit_test(
		    test_scenarios_r4j_time_window_drops_old_outcomes),
		cmocka_unit_test(
		    test_scenarios_r4j_count_window_evicts_oldest),
		cmocka_unit_test(
		    test_scenarios_r4j_min_calls_capped_at_window),
		cmocka_unit_test(
		    test_scenarios_r4j_config_refusals_name_the_field),
		cmocka_unit_test(test_scenarios_gobreaker_default_breaker),
		cmocka_unit_test(test_scenarios_gobreaker_custom_breaker),
		cmocka_unit_test(
		    test_scenarios_gobreaker_previous_generation_has_no_effect),
		cmocka_unit_test(
		    test_scenarios_gobreaker_error_state_open_text),
		cmocka_unit_test(
		    test_scenarios_polly_breaks_after_two_exceptions),
		cmocka_unit_test(
		    test_scenarios_polly_break_duration_then_trial),
		cmocka_unit_test(
		    test_scenarios_polly_single_trial_per_break_duration),
		cmocka_unit_test(
		    test_scenarios_polly_unhandled_exception_does_not_break),
		cmocka_unit_test(test_scenarios_polly_isolate_then_reset),
		cmocka_unit_test(
		    test_scenarios_polly_advanced_threshold_and_throughput),
		cmocka_unit_test(test_scenarios_polly_advanced_rolling_window),
		cmocka_unit_test(test_scenarios_r4j_retry_success_not_retried),
		cmocka_unit_test(
		    test_scenarios_r4j_retry_three_attempts_then_last_error),
		cmocka_unit_test(
		    test_scenarios_r4j_retry_ignored_and_business_not_retried),
		cmocka_unit_test(test_scenarios_r4j_retry_backoff_function),
		cmocka_unit_test(test_scenarios_r4j_exponential_intervals),
		cmocka_unit_test(test_scenarios_r4j_randomized_intervals),
		cmocka_unit_test(test_scenarios_aws_jitter_formulas),
		cmocka_unit_test(
		    test_scenarios_polly_constant_linear_exponential),
		cmocka_unit_test(test_scenarios_polly_decorrelated_jitter_v2),
		cmocka_unit_test(
		    test_scenarios_polly_retry_three_then_success),
		cmocka_unit_test(
		    test_scenarios_polly_wait_and_retry_durations),
		cmocka_unit_test(test_scenarios_design_retry_deadline),
		cmocka_unit_test(test_scenarios_r4j_retry_on_result),
		cmocka_unit_test(
		    test_scenarios_design_retry_does_not_retry_open),
		cmocka_unit_test(
		    test_scenarios_seed002_tried_three_times_message),
		cmocka_unit_test(test_scenarios_dubbo_mock_some_methods),
		cmocka_unit_test(
		    test_scenarios_dubbo_mock_force_default_with_overrides),
		cmocka_unit_test(
		    test_scenarios_dubbo_mock_fail_default_and_no_prefix),
		cmocka_unit_test(test_scenarios_dubbo_mock_default_impl),
		cmocka_unit_test(test_scenarios_dubbo_mock_return_types),
		cmocka_unit_test(test_scenarios_dubbo_mock_force_throw),
		cmocka_unit_test(test_scenarios_dubbo_mock_false_propagates),
		cmocka_unit_test(test_scenarios_dubbo_normalize_mock),
		cmocka_unit_test(test_scenarios_seed000_business_and_failsafe),
		cmocka_unit_test(test_scenarios_seed003_inventory_timeline),
		cmocka_unit_test(test_scenarios_seed003_probe_at_pause_end),
		cmocka_unit_test(
		    test_scenarios_seed003_failed_probe_opens_again),
		cmocka_unit_test(test_scenarios_seed003_cache_age_limit),
		cmocka_unit_test(test_scenarios_seed001_cached_null_then_mock),
		cmocka_unit_test(
		    test_scenarios_seed000_mock_order_in_pipeline),
		cmocka_unit_test(
		    test_scenarios_polly_ignored_does_not_reset_consecutive),
		cmocka_unit_test(
		    test_scenarios_gobreaker_half_open_failed_probe),
		cmocka_unit_test(test_scenarios_r4j_slow_threshold_is_strict),
		cmocka_unit_test(test_scenarios_design_time_alone_never_trips),
		cmocka_unit_test(
		    test_scenarios_dubbo_method_false_overrides_service_force),
		cmocka_unit_test(test_scenarios_dubbo_mock_impl_refusals),
		cmocka_unit_test(test_scenarios_dubbo_parse_mock_value),
		cmocka_unit_test(test_scenarios_seed002_timeout_then_retries),
		cmocka_unit_test(
		    test_scenarios_seed000_business_through_pipeline),
		cmocka_unit_test(test_scenarios_dubbo_method_level_retries),
		cmocka_unit_test(
		    test_scenarios_seed001_cache_bound_second_chance),
		cmocka_unit_test(
		    test_scenarios_seed003_inventory_from_config_text),
		cmocka_unit_test(
		    test_scenarios_config_text_refusal_names_line),
		cmocka_unit_test(test_scenarios_budget_bounds_retries),
		cmocka_unit_test(
		    test_scenarios_r4j_time_window_empty_after_close),
		cmocka_unit_test(test_scenarios_retry_plan_matches_call),
		cmocka_unit_test(
		    test_scenarios_seed001_chain_all_pass_is_unavailable),
		cmocka_unit_test(test_scenarios_r4j_open_wait_cap),
		cmocka_unit_test(
		    test_scenarios_dubbo_mock_impl_failure_rethrown),
		cmocka_unit_test(test_scenarios_breaker_per_method_isolation),
		cmocka_unit_test(
		    test_scenarios_design_retry_deadline_boundary),
		cmocka_unit_test(test_scenarios_r4j_max_wait_in_half_open),
		cmocka_unit_test(test_scenarios_null_arguments_are_refused),
		cmocka_unit_test(
		    test_scenarios_r4j_metrics_only_records_never_trips),
		cmocka_unit_test(test_scenarios_r4j_rate_limiter_period),
		cmocka_unit_test(test_scenarios_r4j_bulkhead_full),
		cmocka_unit_test(test_scenarios_seed003_events_and_metrics),
		cmocka_unit_test(test_scenarios_seed002_format_every_stop),
	};

	int failed = cmocka_run_group_tests(tests, NULL, NULL);
#ifdef RESIL_TEST_MACHINE
	/* The suite really went through the machine driver. */
	if (machine_driver_steps() == 0)
		return 1;
#endif
	return failed;
}

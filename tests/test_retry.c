#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/retry.h>

#include "support/fail_alloc.h"

/* A scripted call: return codes per attempt (the last repeats), an
 * optional duration per attempt (advanced on the manual clock while the
 * attempt runs), an optional status per attempt, and a log of what each
 * attempt was told. */
#define MAX_LOG 64

typedef struct script {
	resil_manual_clock *mc;
	const int *rcs;
	size_t nrcs;
	const resil_err *statuses; /* NULL: RESIL_OK */
	size_t nstatuses;
	const int *values; /* written to *(int *)out; NULL: rc */
	size_t nvalues;
	uint64_t duration;
	size_t calls;
	resil_retry_attempt seen[MAX_LOG];
} script;

static size_t
pick(size_t i, size_t n)
{
	return i < n ? i : n - 1;
}

static int
scripted(void *ctx, resil_retry_attempt *at, void *out)
{
	script *s = ctx;
	size_t i = s->calls++;
	int rc = s->rcs[pick(i, s->nrcs)];

	if (i < MAX_LOG)
		s->seen[i] = *at;
	if (s->duration > 0)
		resil_manual_clock_advance(s->mc, s->duration);
	if (s->statuses != NULL)
		at->status = s->statuses[pick(i, s->nstatuses)];
	if (out != NULL)
		*(int *)out =
		    s->values != NULL ? s->values[pick(i, s->nvalues)] : rc;
	return rc;
}

static const int always_fail[] = { 5 };

static void
script_init(script *s, resil_manual_clock *mc, const int *rcs, size_t n)
{
	memset(s, 0, sizeof(*s));
	s->mc = mc;
	s->rcs = rcs;
	s->nrcs = n;
}

/* A test config on a manual clock, with an event recorder. */
typedef struct fixture {
	resil_manual_clock mc;
	resil_retry_config cfg;
	resil_retry_event events[MAX_LOG];
	resil_retry_recorder rec;
	resil_retry *r;
} fixture;

static void
fixture_init(fixture *f, uint64_t start)
{
	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, start);
	resil_retry_config_init(&f->cfg);
	f->cfg.clock = resil_manual_clock_hook(&f->mc);
	f->cfg.base_delay_ns = 100;
	resil_retry_recorder_init(&f->rec, f->events, MAX_LOG);
	f->cfg.listener = resil_retry_recorder_listener;
	f->cfg.listener_ctx = &f->rec;
}

static void
fixture_new(fixture *f)
{
	resil_diag d;

	assert_int_equal(resil_retry_new(&f->r, &f->cfg, &d), RESIL_OK);
}

/* Scripted uniform draws. */
typedef struct draws {
	const double *u;
	size_t n;
	size_t next;
} draws;

static double
draw_next(void *ctx)
{
	draws *d = ctx;

	return d->u[pick(d->next++, d->n)];
}

static resil_random
draws_hook(draws *d, const double *u, size_t n)
{
	resil_random r;

	d->u = u;
	d->n = n;
	d->next = 0;
	r.uniform = draw_next;
	r.ctx = d;
	return r;
}

static resil_outcome
classify_codes(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	switch (rc) {
	case 0:
		return RESIL_OUTCOME_SUCCESS;
	case 7:
		return RESIL_OUTCOME_BUSINESS;
	case 8:
		return RESIL_OUTCOME_IGNORED;
	default:
		return RESIL_OUTCOME_FAILURE;
	}
}

static void
test_retry_config_defaults(void **state)
{
	resil_retry_config cfg = resil_retry_config_default();
	resil_diag d;
	resil_retry *r = NULL;

	(void)state;
	assert_int_equal(cfg.size, sizeof(cfg));
	assert_int_equal(cfg.max_attempts, 3);
	assert_int_equal(cfg.backoff, RESIL_BACKOFF_FIXED);
	assert_int_equal(cfg.base_delay_ns, 500 * RESIL_NS_PER_MS);
	assert_true(cfg.multiplier == 2.0);
	assert_int_equal(cfg.max_delay_ns, UINT64_MAX);
	assert_int_equal(cfg.jitter, RESIL_JITTER_NONE);
	assert_true(cfg.jitter_factor == 0.5);
	assert_int_equal(cfg.deadline_ns, 0);
	assert_true(cfg.budget_ratio == 0.0);
	assert_int_equal(resil_retry_config_validate(&cfg, &d), RESIL_OK);
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_non_null(r);
	resil_retry_free(r);
	resil_retry_free(NULL);
}

static void
expect_refused(const resil_retry_config *cfg, const char *msg)
{
	resil_diag d;
	resil_retry *r = (resil_retry *)&d; /* a sentinel: must stay */

	memset(&d, 0, sizeof(d));
	assert_int_equal(resil_retry_config_validate(cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, msg);
	memset(&d, 0, sizeof(d));
	assert_int_equal(resil_retry_new(&r, cfg, &d), RESIL_E_INVAL);
	assert_ptr_equal(r, (resil_retry *)&d);
	assert_string_equal(d.msg, msg);
	/* A NULL diag is allowed. */
	assert_int_equal(
	    resil_retry_config_validate(cfg, NULL), RESIL_E_INVAL);
}

static void
test_retry_config_refuses_bad_fields(void **state)
{
	resil_retry_config cfg;
	char msg[RESIL_DIAG_MAX];

	(void)state;
#define RESET() resil_retry_config_init(&cfg)
	RESET();
	cfg.max_attempts = 0;
	expect_refused(&cfg, "retry.max_attempts: 0 is out of range 1..1000");
	RESET();
	cfg.max_attempts = 1001;
	expect_refused(
	    &cfg, "retry.max_attempts: 1001 is out of range 1..1000");
	RESET();
	cfg.multiplier = 0.5;
	expect_refused(&cfg, "retry.multiplier: 0.5 is out of range 1..100");
	RESET();
	cfg.multiplier = NAN;
	expect_refused(&cfg, "retry.multiplier: nan is out of range 1..100");
	RESET();
	cfg.multiplier = 101;
	expect_refused(&cfg, "retry.multiplier: 101 is out of range 1..100");
	RESET();
	cfg.base_delay_ns = 100;
	cfg.max_delay_ns = 99;
	expect_refused(
	    &cfg, "retry.max_delay_ns: 99 is below retry.base_delay_ns (100)");
	RESET();
	cfg.backoff = RESIL_BACKOFF_CUSTOM;
	expect_refused(
	    &cfg, "retry.backoff_fn: NULL, but retry.backoff is CUSTOM");
	RESET();
	cfg.backoff = (resil_retry_backoff)4;
	expect_refused(&cfg,
	    "retry.backoff: 4 is not FIXED, EXPONENTIAL, CUSTOM or LINEAR");
	RESET();
	cfg.jitter = (resil_retry_jitter)6;
	expect_refused(&cfg,
	    "retry.jitter: 6 is not NONE, PROPORTIONAL, FULL, EQUAL, "
	    "DECORRELATED or DECORRELATED_V2");
	RESET();
	cfg.jitter_factor = 1.5;
	expect_refused(&cfg, "retry.jitter_factor: 1.5 is out of range 0..1");
	RESET();
	cfg.jitter_factor = -0.1;
	expect_refused(&cfg, "retry.jitter_factor: -0.1 is out of range 0..1");
	RESET();
	cfg.budget_ratio = -1;
	expect_refused(&cfg,
	    "retry.budget_ratio: -1 is neither 0 (off) nor in range "
	    "1e-06..1000");
	RESET();
	cfg.budget_ratio = 1001;
	expect_refused(&cfg,
	    "retry.budget_ratio: 1001 is neither 0 (off) nor in range "
	    "1e-06..1000");
	RESET();
	cfg.budget_max_tokens = 0;
	expect_refused(
	    &cfg, "retry.budget_max_tokens: 0 is out of range 1..1000000");
	RESET();
	cfg.budget_min_retries = 1000001;
	cfg.budget_period_ns = UINT64_MAX;
	expect_refused(&cfg,
	    "retry.budget_min_retries: 1000001 is out of range 0..1000000");
	RESET();
	cfg.budget_min_retries = 10;
	cfg.budget_period_ns = 9;
	expect_refused(&cfg,
	    "retry.budget_period_ns: 9 is too short: it must give each of "
	    "retry.budget_min_retries (10) at least 1 ns");
	RESET();
	cfg.budget_min_retries = 0;
	cfg.budget_period_ns = 0;
	expect_refused(&cfg,
	    "retry.budget_period_ns: 0 is below 1 ns");
	RESET();
	cfg.size = sizeof(cfg) - 8;
	snprintf(msg, sizeof(msg),
	    "retry.size: %zu is not a known resil_retry_config size "
	    "(expected %zu; use resil_retry_config_init())",
	    sizeof(cfg) - 8, sizeof(cfg));
	expect_refused(&cfg, msg);
#undef RESET

	/* The boundaries themselves are accepted. */
	resil_retry_config_init(&cfg);
	cfg.max_attempts = 1000;
	cfg.multiplier = 1.0;
	cfg.jitter_factor = 1.0;
	cfg.base_delay_ns = 100;
	cfg.max_delay_ns = 100;
	cfg.budget_ratio = 1000;
	cfg.budget_min_retries = 10;
	cfg.budget_period_ns = 10;
	assert_int_equal(resil_retry_config_validate(&cfg, NULL), RESIL_OK);
	cfg.max_attempts = 1;
	cfg.multiplier = 100.0;
	cfg.jitter_factor = 0.0;
	cfg.budget_ratio = 0.000001;
	assert_int_equal(resil_retry_config_validate(&cfg, NULL), RESIL_OK);
}

static void
test_retry_null_arguments(void **state)
{
	resil_retry_config cfg = resil_retry_config_default();
	resil_retry_result res;
	resil_retry_metrics m;
	resil_retry *r;
	resil_diag d;
	uint64_t w = 77;
	size_t count = 99;
	char buf[8];
	script s;
	resil_manual_clock mc;

	(void)state;
	assert_int_equal(resil_retry_new(NULL, &cfg, &d), RESIL_E_INVAL);
	assert_int_equal(resil_retry_new(&r, NULL, &d), RESIL_E_INVAL);
	assert_int_equal(resil_retry_config_validate(NULL, &d), RESIL_E_INVAL);
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);

	resil_manual_clock_init(&mc, 0);
	script_init(&s, &mc, always_fail, 1);
	memset(&res, 0xab, sizeof(res));
	assert_int_equal(
	    resil_retry_call(NULL, scripted, &s, NULL, &res), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_call(r, NULL, &s, NULL, &res), RESIL_E_INVAL);
	assert_int_equal(res.attempts, 0xabababab); /* unchanged */
	assert_int_equal(s.calls, 0);

	assert_int_equal(
	    resil_retry_next_delay(NULL, 1, 0, 0.5, &w), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_next_delay(r, 1, 0, 0.5, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_next_delay(r, 0, 0, 0.5, &w), RESIL_E_INVAL);
	assert_int_equal(w, 77);

	assert_int_equal(
	    resil_retry_plan(NULL, NULL, &w, 1, &count, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, &w, 1, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_retry_plan(&cfg, NULL, NULL, 1, &count, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(count, 99);
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, NULL, 0, &count, NULL), RESIL_OK);
	assert_int_equal(count, 2);

	assert_int_equal(resil_retry_get_metrics(NULL, &m), RESIL_E_INVAL);
	assert_int_equal(resil_retry_get_metrics(r, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_result_format(NULL, NULL, buf, 8), RESIL_E_INVAL);
	res.attempts = 1;
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, NULL, 8), RESIL_E_INVAL);
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, 0), RESIL_E_INVAL);
	resil_retry_recorder_init(NULL, NULL, 0);
	resil_retry_recorder_listener(NULL, NULL);
	resil_retry_free(r);
}

static void
test_retry_allocation_failure(void **state)
{
	fail_alloc fa;
	resil_retry_config cfg = resil_retry_config_default();
	resil_retry *r = NULL;
	resil_diag d;

	(void)state;
	cfg.alloc = fail_alloc_init(&fa, 1);
	assert_int_equal(resil_retry_new(&r, &cfg, &d), RESIL_E_NOMEM);
	assert_null(r);
	assert_int_equal(fa.failures, 1);
	assert_int_equal(fail_alloc_live(&fa), 0);

	cfg.alloc = fail_alloc_init(&fa, 0);
	assert_int_equal(resil_retry_new(&r, &cfg, &d), RESIL_OK);
	assert_int_equal(fail_alloc_live(&fa), 1);
	resil_retry_free(r);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_int_equal(fa.size_mismatch, 0);
}

static void
test_retry_attempt_counts(void **state)
{
	static const uint32_t maxes[] = { 1, 2, 3, 10 };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
		fixture f;
		script s;
		resil_retry_result res;
		resil_retry_metrics m;
		int out = -1;

		fixture_init(&f, 1000);
		f.cfg.max_attempts = maxes[i];
		fixture_new(&f);
		script_init(&s, &f.mc, always_fail, 1);
		assert_int_equal(
		    resil_retry_call(f.r, scripted, &s, &out, &res), RESIL_OK);
		assert_int_equal(s.calls, maxes[i]);
		assert_int_equal(res.attempts, maxes[i]);
		assert_int_equal(res.rc, 5); /* the last attempt's own */
		assert_int_equal(res.status, RESIL_OK);
		assert_int_equal(res.outcome, RESIL_OUTCOME_FAILURE);
		assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
		assert_int_equal(res.waited, 100 * (maxes[i] - 1));
		assert_int_equal(res.elapsed, 100 * (maxes[i] - 1));
		assert_int_equal(out, 5);
		assert_int_equal(resil_manual_clock_now(&f.mc),
		    1000 + 100 * (maxes[i] - 1));
		/* maxes[i] - 1 retries and one give-up. */
		assert_int_equal(f.rec.count, maxes[i]);
		assert_int_equal(
		    f.events[maxes[i] - 1].type, RESIL_RETRY_EVENT_GIVE_UP);
		assert_int_equal(
		    f.events[maxes[i] - 1].stop, RESIL_RETRY_STOP_EXHAUSTED);
		assert_int_equal(f.events[maxes[i] - 1].attempt, maxes[i]);
		assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
		assert_int_equal(m.calls, 1);
		assert_int_equal(m.attempts, maxes[i]);
		assert_int_equal(m.retries, maxes[i] - 1);
		assert_int_equal(m.exhausted, 1);
		assert_int_equal(m.failed_without_retry, maxes[i] == 1);
		assert_int_equal(m.failed_after_retry, maxes[i] > 1);
		resil_retry_free(f.r);
	}
}

static void
test_retry_success_after_retry(void **state)
{
	static const int rcs[] = { 5, 6, 0 };
	fixture f;
	script s;
	resil_retry_result res;
	resil_retry_metrics m;
	char buf[128];

	(void)state;
	fixture_init(&f, 50);
	f.cfg.max_attempts = 5;
	fixture_new(&f);
	script_init(&s, &f.mc, rcs, 3);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(res.attempts, 3);
	assert_int_equal(res.rc, 0);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);

	/* What each attempt was told. */
	assert_int_equal(s.seen[0].number, 1);
	assert_int_equal(s.seen[0].start, 50);
	assert_int_equal(s.seen[0].time_left, UINT64_MAX);
	assert_int_equal(s.seen[0].last_wait, 0);
	assert_int_equal(s.seen[0].last_rc, 0);
	assert_int_equal(s.seen[1].number, 2);
	assert_int_equal(s.seen[1].start, 150);
	assert_int_equal(s.seen[1].last_wait, 100);
	assert_int_equal(s.seen[1].last_rc, 5);
	assert_int_equal(s.seen[2].number, 3);
	assert_int_equal(s.seen[2].start, 250);
	assert_int_equal(s.seen[2].last_rc, 6);

	/* retry(1, 100), retry(2, 100), success(3). */
	assert_int_equal(f.rec.count, 3);
	assert_int_equal(f.events[0].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(f.events[0].attempt, 1);
	assert_int_equal(f.events[0].wait, 100);
	assert_int_equal(f.events[0].rc, 5);
	assert_int_equal(f.events[0].time, 50);
	assert_int_equal(f.events[1].type, RESIL_RETRY_EVENT_RETRY);
	assert_int_equal(f.events[1].attempt, 2);
	assert_int_equal(f.events[1].rc, 6);
	assert_int_equal(f.events[1].time, 150);
	assert_int_equal(f.events[2].type, RESIL_RETRY_EVENT_SUCCESS);
	assert_int_equal(f.events[2].attempt, 3);
	assert_int_equal(f.events[2].outcome, RESIL_OUTCOME_SUCCESS);

	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, 128), RESIL_OK);
	assert_string_equal(buf, "Tried 3 times, succeeded.");

	/* A first-time success: no retry, no event. */
	script_init(&s, &f.mc, rcs + 2, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(res.attempts, 1);
	assert_int_equal(f.rec.count, 3);
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_int_equal(m.calls, 2);
	assert_int_equal(m.succeeded_after_retry, 1);
	assert_int_equal(m.succeeded_without_retry, 1);
	assert_int_equal(m.retries, 2);
	resil_retry_free(f.r);
}

static void
test_retry_business_and_ignored_not_retried(void **state)
{
	static const int business[] = { 7 }, ignored[] = { 8 };
	static const int fail_then_business[] = { 5, 7, 0 };
	fixture f;
	script s;
	resil_retry_result res;
	resil_retry_metrics m;
	char buf[128];

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 5;
	f.cfg.classifier.fn = classify_codes;
	/* Even a predicate that asks for everything cannot make a
	 * business error retryable. */
	f.cfg.retry_on_result = NULL;
	fixture_new(&f);

	script_init(&s, &f.mc, business, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1);
	assert_int_equal(res.outcome, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(res.rc, 7);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, 128), RESIL_OK);
	assert_string_equal(buf,
	    "Tried 1 time, not retryable. Last error is: rc 7 (business)");

	script_init(&s, &f.mc, ignored, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1);
	assert_int_equal(res.outcome, RESIL_OUTCOME_IGNORED);

	/* A failure is retried; the business error that follows ends it. */
	script_init(&s, &f.mc, fail_then_business, 3);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 2);
	assert_int_equal(res.rc, 7);
	assert_int_equal(res.outcome, RESIL_OUTCOME_BUSINESS);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(f.rec.count, 1); /* one retry, no give-up */
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_int_equal(m.failed_without_retry, 2);
	assert_int_equal(m.failed_after_retry, 1);
	assert_int_equal(m.exhausted, 0);
	resil_retry_free(f.r);
}

static int
only_rc5(int rc, const void *value, void *ctx)
{
	(void)value;
	++*(int *)ctx;
	return rc == 5;
}

static void
test_retry_on_failure_predicate_narrows(void **state)
{
	static const int rcs[] = { 5, 5, 6, 0 };
	fixture f;
	script s;
	resil_retry_result res;
	int asked = 0;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 10;
	f.cfg.retry_on_failure = only_rc5;
	f.cfg.retry_on_failure_ctx = &asked;
	fixture_new(&f);
	script_init(&s, &f.mc, rcs, 4);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3);
	assert_int_equal(res.rc, 6);
	assert_int_equal(res.outcome, RESIL_OUTCOME_FAILURE);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(asked, 3);
	resil_retry_free(f.r);
}

static int
empty_answer(int rc, const void *value, void *ctx)
{
	(void)rc;
	(void)ctx;
	return *(const int *)value == 0;
}

static void
test_retry_on_result_gives_last_result(void **state)
{
	static const int ok[] = { 0 };
	static const int empty_then_full[] = { 0, 0, 42 };
	static const int always_empty[] = { 0 };
	static const int empty_then_other[] = { 0, 0, 0, 0 };
	fixture f;
	script s;
	resil_retry_result res;
	resil_retry_metrics m;
	int out = -1;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 4;
	f.cfg.retry_on_result = empty_answer;
	fixture_new(&f);

	/* Retried while the answer is empty; a full one ends it. */
	script_init(&s, &f.mc, ok, 1);
	s.values = empty_then_full;
	s.nvalues = 3;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, &out, &res), RESIL_OK);
	assert_int_equal(s.calls, 3);
	assert_int_equal(out, 42);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(
	    f.events[f.rec.count - 1].type, RESIL_RETRY_EVENT_SUCCESS);

	/* Out of attempts: the caller gets the last result. */
	script_init(&s, &f.mc, ok, 1);
	s.values = always_empty;
	s.nvalues = 1;
	out = -1;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, &out, &res), RESIL_OK);
	assert_int_equal(s.calls, 4);
	assert_int_equal(out, 0);
	assert_int_equal(res.rc, 0);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(
	    f.events[f.rec.count - 1].type, RESIL_RETRY_EVENT_GIVE_UP);
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_int_equal(m.succeeded_after_retry, 1);
	assert_int_equal(m.failed_after_retry, 1); /* a rejected result */
	resil_retry_free(f.r);

	/* With fail_after_max_attempts: RESIL_E_RETRIES_EXHAUSTED, and
	 * out still holds the last result. */
	fixture_init(&f, 0);
	f.cfg.max_attempts = 4;
	f.cfg.retry_on_result = empty_answer;
	f.cfg.fail_after_max_attempts = 1;
	fixture_new(&f);
	script_init(&s, &f.mc, ok, 1);
	s.values = empty_then_other;
	s.nvalues = 4;
	out = -1;
	assert_int_equal(resil_retry_call(f.r, scripted, &s, &out, &res),
	    RESIL_E_RETRIES_EXHAUSTED);
	assert_int_equal(s.calls, 4);
	assert_int_equal(res.attempts, 4);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(out, 0);
	/* A failure is not turned into RETRIES_EXHAUSTED: its own code. */
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, &out, &res), RESIL_OK);
	assert_int_equal(res.rc, 5);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	resil_retry_free(f.r);
}

static void
test_retry_open_not_retried_unless_configured(void **state)
{
	static const resil_err open[] = { RESIL_E_OPEN };
	static const resil_err timeout_then_ok[] = { RESIL_E_TIMEOUT,
		RESIL_E_LIMITED, RESIL_OK };
	static const int zero[] = { 0 };
	fixture f;
	script s;
	resil_retry_result res;
	char buf[128];

	(void)state;
	fixture_init(&f, 0);
	fixture_new(&f);
	script_init(&s, &f.mc, zero, 1);
	s.statuses = open;
	s.nstatuses = 1;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_E_OPEN);
	assert_int_equal(s.calls, 1);
	assert_int_equal(res.status, RESIL_E_OPEN);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(f.rec.count, 0);
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, 128), RESIL_OK);
	assert_string_equal(buf,
	    "Tried 1 time, not retryable. Last error is: rejected: circuit "
	    "breaker open");

	/* A timeout is a failure: retried. A limiter's rejection is final
	 * by default, like the breaker's. */
	script_init(&s, &f.mc, zero, 1);
	s.statuses = timeout_then_ok;
	s.nstatuses = 3;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_E_LIMITED);
	assert_int_equal(s.calls, 2);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_FINAL);
	assert_int_equal(f.events[0].status, RESIL_E_TIMEOUT);
	resil_retry_free(f.r);

	/* With retry_on_limited it is retried like a failure. */
	fixture_init(&f, 0);
	f.cfg.retry_on_limited = 1;
	fixture_new(&f);
	script_init(&s, &f.mc, zero, 1);
	s.statuses = timeout_then_ok;
	s.nstatuses = 3;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(f.events[0].status, RESIL_E_TIMEOUT);
	assert_int_equal(f.events[1].status, RESIL_E_LIMITED);
	resil_retry_free(f.r);

	fixture_init(&f, 0);
	f.cfg.retry_on_open = 1;
	fixture_new(&f);
	script_init(&s, &f.mc, zero, 1);
	s.statuses = open;
	s.nstatuses = 1;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_E_OPEN);
	assert_int_equal(s.calls, 3);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_EXHAUSTED);
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, 128), RESIL_OK);
	assert_string_equal(buf,
	    "Tried 3 times. Last error is: rejected: circuit breaker open");
	resil_retry_free(f.r);
}

/* Run a policy whose every attempt fails at once and collect its waits
 * from the RETRY events. */
static size_t
run_waits(fixture *f, uint64_t *waits)
{
	script s;
	resil_retry_result res;
	size_t i, n = 0;
	uint64_t t0 = resil_manual_clock_now(&f->mc), sum = 0;

	script_init(&s, &f->mc, always_fail, 1);
	f->rec.count = 0;
	assert_int_equal(
	    resil_retry_call(f->r, scripted, &s, NULL, &res), RESIL_OK);
	for (i = 0; i < f->rec.count; i++) {
		if (f->events[i].type != RESIL_RETRY_EVENT_RETRY)
			continue;
		assert_int_equal(f->events[i].attempt, n + 1);
		/* The wait chosen is the wait taken. */
		assert_int_equal(
		    s.seen[n + 1].start - s.seen[n].start, f->events[i].wait);
		waits[n++] = f->events[i].wait;
		sum += f->events[i].wait;
	}
	assert_int_equal(res.waited, sum);
	assert_int_equal(resil_manual_clock_now(&f->mc) - t0, sum);
	return n;
}

static void
test_retry_jitter_sequences_with_seed(void **state)
{
	/* Seed 42, exponential 1000 * 2^(n-1), cap 20000, factor 0.5. The
	 * draws of resil_rng seeded 42 are 0.74156, 0.15991, 0.27860,
	 * 0.34419, 0.03803; the values below were computed apart, from
	 * SplitMix64 and the formulas in retry.h. */
	static const struct {
		resil_retry_jitter jitter;
		uint64_t waits[5];
	} cases[] = {
		{ RESIL_JITTER_NONE, { 1000, 2000, 4000, 8000, 16000 } },
		{ RESIL_JITTER_PROPORTIONAL,
		    { 1241, 1319, 3114, 6753, 8608 } },
		{ RESIL_JITTER_FULL, { 741, 319, 1114, 2753, 608 } },
		{ RESIL_JITTER_EQUAL, { 870, 1159, 2557, 5376, 8304 } },
		{ RESIL_JITTER_DECORRELATED,
		    { 2483, 2031, 2418, 3152, 1321 } },
	};
	size_t i, j, n, count;
	uint64_t waits[8], plan[8];

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fixture f;

		fixture_init(&f, 0);
		f.cfg.max_attempts = 6;
		f.cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
		f.cfg.base_delay_ns = 1000;
		f.cfg.multiplier = 2.0;
		f.cfg.max_delay_ns = 20000;
		f.cfg.jitter = cases[i].jitter;
		f.cfg.jitter_factor = 0.5;
		f.cfg.seed = 42;
		/* The plan is computed without running anything... */
		assert_int_equal(
		    resil_retry_plan(&f.cfg, NULL, plan, 8, &count, NULL),
		    RESIL_OK);
		assert_int_equal(count, 5);
		fixture_new(&f);
		/* ...and is what a fresh policy does. */
		n = run_waits(&f, waits);
		assert_int_equal(n, 5);
		for (j = 0; j < 5; j++) {
			assert_int_equal(waits[j], cases[i].waits[j]);
			assert_int_equal(plan[j], cases[i].waits[j]);
		}
		resil_retry_free(f.r);
	}
}

static void
test_retry_jitter_scripted_draws(void **state)
{
	/* Fixed 1000, draws 0, 0.25, 0.5, 0.75, 0.9999: each formula by
	 * hand. */
	static const double u[] = { 0.0, 0.25, 0.5, 0.75, 0.9999 };
	static const struct {
		resil_retry_jitter jitter;
		uint64_t waits[5];
	} cases[] = {
		/* 1000 * (1 - 0.2 + 0.4u) */
		{ RESIL_JITTER_PROPORTIONAL, { 800, 900, 1000, 1100, 1199 } },
		/* 1000u */
		{ RESIL_JITTER_FULL, { 0, 250, 500, 750, 999 } },
		/* 500 + 500u */
		{ RESIL_JITTER_EQUAL, { 500, 625, 750, 875, 999 } },
		/* 1000 + u (3 prev - 1000), prev starting at 1000 */
		{ RESIL_JITTER_DECORRELATED,
		    { 1000, 1500, 2750, 6437, 19309 } },
	};
	size_t i, j, count;
	uint64_t waits[8], plan[8];
	draws d, dp;
	resil_random rp;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fixture f;

		fixture_init(&f, 0);
		f.cfg.max_attempts = 6;
		f.cfg.base_delay_ns = 1000;
		f.cfg.jitter = cases[i].jitter;
		f.cfg.jitter_factor = 0.2;
		f.cfg.random = draws_hook(&d, u, 5);
		rp = draws_hook(&dp, u, 5);
		assert_int_equal(
		    resil_retry_plan(&f.cfg, &rp, plan, 8, &count, NULL),
		    RESIL_OK);
		assert_int_equal(count, 5);
		assert_int_equal(dp.next, 5); /* one draw per wait */
		fixture_new(&f);
		assert_int_equal(run_waits(&f, waits), 5);
		assert_int_equal(d.next, 5);
		for (j = 0; j < 5; j++) {
			assert_int_equal(waits[j], cases[i].waits[j]);
			assert_int_equal(plan[j], cases[i].waits[j]);
		}
		resil_retry_free(f.r);
	}
}

static void
test_retry_no_jitter_draws_nothing(void **state)
{
	static const double u[] = { 0.5 };
	fixture f;
	draws d;
	uint64_t waits[4];

	(void)state;
	fixture_init(&f, 0);
	f.cfg.random = draws_hook(&d, u, 1);
	fixture_new(&f);
	assert_int_equal(run_waits(&f, waits), 2);
	assert_int_equal(d.next, 0);
	assert_int_equal(waits[0], 100);
	assert_int_equal(waits[1], 100);
	resil_retry_free(f.r);
}

static void
test_retry_exponential_cap_after_jitter(void **state)
{
	static const double u[] = { 0.1 };
	fixture f;
	draws d;
	uint64_t waits[8], w;
	static const uint64_t expect[] = { 100, 200, 400, 800, 1000, 1000,
		1000 };
	size_t i;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 8;
	f.cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	f.cfg.base_delay_ns = 100;
	f.cfg.multiplier = 2.0;
	f.cfg.max_delay_ns = 1000;
	fixture_new(&f);
	assert_int_equal(run_waits(&f, waits), 7);
	for (i = 0; i < 7; i++)
		assert_int_equal(waits[i], expect[i]);
	resil_retry_free(f.r);

	/* The cap applies after the jitter: attempt 5's backoff is 1600;
	 * u = 0.1 with factor 0.5 scales it to 960, under the cap (capping
	 * first would have given 600). Attempt 4: 800 * 0.6 = 480. */
	fixture_init(&f, 0);
	f.cfg.max_attempts = 8;
	f.cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	f.cfg.base_delay_ns = 100;
	f.cfg.max_delay_ns = 1000;
	f.cfg.jitter = RESIL_JITTER_PROPORTIONAL;
	f.cfg.jitter_factor = 0.5;
	f.cfg.random = draws_hook(&d, u, 1);
	fixture_new(&f);
	assert_int_equal(resil_retry_next_delay(f.r, 4, 0, 0.1, &w), RESIL_OK);
	assert_int_equal(w, 480);
	assert_int_equal(resil_retry_next_delay(f.r, 5, 0, 0.1, &w), RESIL_OK);
	assert_int_equal(w, 960);
	assert_int_equal(resil_retry_next_delay(f.r, 6, 0, 0.1, &w), RESIL_OK);
	assert_int_equal(w, 1000); /* 3200 * 0.6 = 1920, capped */
	/* Out-of-range draws are clamped to [0, 1). */
	assert_int_equal(
	    resil_retry_next_delay(f.r, 1, 0, -3.0, &w), RESIL_OK);
	assert_int_equal(w, 50);
	assert_int_equal(
	    resil_retry_next_delay(f.r, 1, 0, 0.99, &w), RESIL_OK);
	assert_int_equal(w, 149);
	/* 7.0 becomes the largest double below 1, and 0.5 + that rounds to
	 * 1.5 in the sum: the top of the range, d * (1 + f), is reachable. */
	assert_int_equal(resil_retry_next_delay(f.r, 1, 0, 7.0, &w), RESIL_OK);
	assert_int_equal(w, 150);
	/* Far past 2^64 the backoff saturates, and the cap still holds. */
	assert_int_equal(
	    resil_retry_next_delay(f.r, 1000, 0, 0.5, &w), RESIL_OK);
	assert_int_equal(w, 1000);
	resil_retry_free(f.r);
}

static uint64_t
linear_backoff(uint32_t attempt, uint64_t prev_wait, void *ctx)
{
	++*(int *)ctx;
	return 10 * (uint64_t)attempt + prev_wait;
}

static void
test_retry_custom_backoff(void **state)
{
	fixture f;
	uint64_t waits[8];
	int asked = 0;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 5;
	f.cfg.backoff = RESIL_BACKOFF_CUSTOM;
	f.cfg.backoff_fn = linear_backoff;
	f.cfg.backoff_ctx = &asked;
	f.cfg.base_delay_ns = 0;
	f.cfg.max_delay_ns = 50;
	fixture_new(&f);
	/* 10, 20 + 10, 30 + 30, capped to 50; 40 + 50 capped to 50. */
	assert_int_equal(run_waits(&f, waits), 4);
	assert_int_equal(waits[0], 10);
	assert_int_equal(waits[1], 30);
	assert_int_equal(waits[2], 50);
	assert_int_equal(waits[3], 50);
	assert_int_equal(asked, 4);
	resil_retry_free(f.r);
}

static void
test_retry_deadline_boundaries(void **state)
{
	fixture f;
	script s;
	resil_retry_result res;
	char buf[128];

	(void)state;
	/* Deadline 1000 from t = 10000; each attempt takes 100 ticks. A
	 * wait of 899 puts attempt 2's start at 10999, one tick before the
	 * deadline: it starts, told it has 1 tick left. */
	fixture_init(&f, 10000);
	f.cfg.base_delay_ns = 899;
	f.cfg.deadline_ns = 1000;
	fixture_new(&f);
	script_init(&s, &f.mc, always_fail, 1);
	s.duration = 100;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 2);
	assert_int_equal(s.seen[0].time_left, 1000);
	assert_int_equal(s.seen[1].start, 10999);
	assert_int_equal(s.seen[1].time_left, 1);
	/* Attempt 2 ended past the deadline: no third. */
	assert_int_equal(res.stop, RESIL_RETRY_STOP_DEADLINE);
	assert_int_equal(res.attempts, 2);
	assert_int_equal(res.elapsed, 1099);
	resil_retry_free(f.r);

	/* A wait of 900 would start attempt 2 exactly at the deadline: it
	 * does not start, and the wait is not begun. */
	fixture_init(&f, 10000);
	f.cfg.base_delay_ns = 900;
	f.cfg.deadline_ns = 1000;
	fixture_new(&f);
	script_init(&s, &f.mc, always_fail, 1);
	s.duration = 100;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1);
	assert_int_equal(resil_manual_clock_now(&f.mc), 10100);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_DEADLINE);
	assert_int_equal(res.waited, 0);
	assert_int_equal(f.rec.count, 1);
	assert_int_equal(f.events[0].type, RESIL_RETRY_EVENT_GIVE_UP);
	assert_int_equal(f.events[0].stop, RESIL_RETRY_STOP_DEADLINE);
	assert_int_equal(
	    resil_retry_result_format(&res, "timeout 3000 ms", buf, 128),
	    RESIL_OK);
	assert_string_equal(buf,
	    "Tried 1 time, stopped at the deadline. Last error is: timeout "
	    "3000 ms");
	resil_retry_free(f.r);

	/* An attempt that ends exactly at the deadline leaves no time: no
	 * retry even with no wait. One that ends a tick before it may be
	 * retried at once. */
	fixture_init(&f, 0);
	f.cfg.base_delay_ns = 0;
	f.cfg.max_attempts = 10;
	f.cfg.deadline_ns = 300;
	fixture_new(&f);
	script_init(&s, &f.mc, always_fail, 1);
	s.duration = 100;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3); /* ends at 100, 200, 300 */
	assert_int_equal(s.seen[2].time_left, 100);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_DEADLINE);
	resil_retry_free(f.r);

	fixture_init(&f, 0);
	f.cfg.base_delay_ns = 0;
	f.cfg.max_attempts = 10;
	f.cfg.deadline_ns = 301;
	fixture_new(&f);
	script_init(&s, &f.mc, always_fail, 1);
	s.duration = 100;
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 4); /* the 4th starts at 300 < 301 */
	assert_int_equal(s.seen[3].time_left, 1);
	resil_retry_free(f.r);
}

/* A clock whose sleep overshoots by 50 ticks, like a real one can. */
static uint64_t
late_now(void *ctx)
{
	return *(uint64_t *)ctx;
}

static void
late_sleep(uint64_t ticks, void *ctx)
{
	*(uint64_t *)ctx += ticks + 50;
}

static int
fail_once_then_ok(void *ctx, resil_retry_attempt *at, void *out)
{
	(void)ctx;
	(void)out;
	return at->number == 1 ? 5 : 0;
}

static void
test_retry_deadline_after_late_sleep(void **state)
{
	uint64_t t = 0;
	resil_clock late = { late_now, NULL, late_sleep, &t, NULL, NULL,
		NULL };
	resil_retry_config cfg = resil_retry_config_default();
	resil_retry_result res;
	resil_retry *r;

	(void)state;
	cfg.clock = &late;
	cfg.base_delay_ns = 960;
	cfg.deadline_ns = 1000;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	/* The wait of 960 may begin (960 < 1000) but ends at 1010: past the
	 * deadline, so attempt 2 does not start. */
	assert_int_equal(
	    resil_retry_call(r, fail_once_then_ok, NULL, NULL, &res),
	    RESIL_OK);
	assert_int_equal(res.attempts, 1);
	assert_int_equal(res.rc, 5);
	assert_int_equal(res.stop, RESIL_RETRY_STOP_DEADLINE);
	assert_int_equal(res.elapsed, 1010);
	/* With room to spare, the same late sleep is harmless. */
	cfg.deadline_ns = 2000;
	resil_retry_free(r);
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_call(r, fail_once_then_ok, NULL, NULL, &res),
	    RESIL_OK);
	assert_int_equal(res.attempts, 2);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	resil_retry_free(r);
}

static void
test_retry_deadline_in_plan(void **state)
{
	resil_retry_config cfg = resil_retry_config_default();
	uint64_t plan[8];
	size_t count;

	(void)state;
	cfg.max_attempts = 8;
	cfg.backoff = RESIL_BACKOFF_EXPONENTIAL;
	cfg.base_delay_ns = 100;
	/* Starts at 0, 100, 300, 700, 1500: with a deadline of 1500 the
	 * fifth attempt would start at the deadline and is not planned. */
	cfg.deadline_ns = 1500;
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, plan, 8, &count, NULL), RESIL_OK);
	assert_int_equal(count, 3);
	assert_int_equal(plan[0], 100);
	assert_int_equal(plan[1], 200);
	assert_int_equal(plan[2], 400);
	cfg.deadline_ns = 1501;
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, plan, 8, &count, NULL), RESIL_OK);
	assert_int_equal(count, 4);
	assert_int_equal(plan[3], 800);
	/* A short array gets the head; count says how long the plan is. */
	cfg.deadline_ns = 0;
	plan[2] = 12345;
	assert_int_equal(
	    resil_retry_plan(&cfg, NULL, plan, 2, &count, NULL), RESIL_OK);
	assert_int_equal(count, 7);
	assert_int_equal(plan[1], 200);
	assert_int_equal(plan[2], 12345);
	/* A bad config is refused, with the field named. */
	{
		resil_diag d;

		cfg.max_attempts = 0;
		assert_int_equal(
		    resil_retry_plan(&cfg, NULL, plan, 2, &count, &d),
		    RESIL_E_INVAL);
		assert_string_equal(
		    d.msg, "retry.max_attempts: 0 is out of range 1..1000");
	}
}

static void
test_retry_budget_exhaustion_and_refill(void **state)
{
	fixture f;
	script s;
	resil_retry_result res;
	resil_retry_metrics m;
	char buf[128];

	(void)state;
	/* Each call deposits half a token; no floor. */
	fixture_init(&f, 0);
	f.cfg.max_attempts = 10;
	f.cfg.base_delay_ns = 0;
	f.cfg.budget_ratio = 0.5;
	f.cfg.budget_min_retries = 0;
	fixture_new(&f);

	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1); /* half a token: no retry */
	assert_int_equal(res.stop, RESIL_RETRY_STOP_BUDGET);
	assert_int_equal(f.events[0].type, RESIL_RETRY_EVENT_GIVE_UP);
	assert_int_equal(f.events[0].stop, RESIL_RETRY_STOP_BUDGET);
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, 128), RESIL_OK);
	assert_string_equal(buf,
	    "Tried 1 time, retry budget exhausted. Last error is: rc 5 "
	    "(failure)");

	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 2); /* one whole token: one retry */
	assert_int_equal(res.stop, RESIL_RETRY_STOP_BUDGET);
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_true(m.budget_tokens == 0.0);
	assert_int_equal(m.budget_refusals, 2);

	/* Refill by traffic: four successful calls bank two tokens. */
	{
		static const int ok[] = { 0 };
		int i;

		for (i = 0; i < 4; i++) {
			script_init(&s, &f.mc, ok, 1);
			assert_int_equal(
			    resil_retry_call(f.r, scripted, &s, NULL, &res),
			    RESIL_OK);
		}
	}
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_true(m.budget_tokens == 2.0);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3); /* 2.5 tokens: two retries */
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_true(m.budget_tokens == 0.5);
	resil_retry_free(f.r);
}

static void
test_retry_budget_bank_is_capped(void **state)
{
	static const int ok[] = { 0 };
	fixture f;
	script s;
	resil_retry_result res;
	resil_retry_metrics m;
	int i;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 10;
	f.cfg.base_delay_ns = 0;
	f.cfg.budget_ratio = 1.0;
	f.cfg.budget_max_tokens = 2;
	f.cfg.budget_min_retries = 0;
	fixture_new(&f);
	for (i = 0; i < 50; i++) {
		script_init(&s, &f.mc, ok, 1);
		assert_int_equal(
		    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	}
	assert_int_equal(resil_retry_get_metrics(f.r, &m), RESIL_OK);
	assert_true(m.budget_tokens == 2.0);
	/* The failing call deposits one more, still capped at 2. */
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3);
	resil_retry_free(f.r);
}

static void
test_retry_budget_floor_refills_with_time(void **state)
{
	fixture f;
	script s;
	resil_retry_result res;

	(void)state;
	/* A negligible ratio; a floor of 2 retries per 1000 ticks, one
	 * every 500. */
	fixture_init(&f, 5000);
	f.cfg.max_attempts = 10;
	f.cfg.base_delay_ns = 0;
	f.cfg.budget_ratio = 0.000001;
	f.cfg.budget_min_retries = 2;
	f.cfg.budget_period_ns = 1000;
	fixture_new(&f);

	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3); /* the floor's burst of 2 */
	assert_int_equal(res.stop, RESIL_RETRY_STOP_BUDGET);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1);

	resil_manual_clock_advance(&f.mc, 499);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1); /* one tick short */
	resil_manual_clock_advance(&f.mc, 1);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 2); /* one step refilled */

	/* A long quiet spell refills the burst, no more. */
	resil_manual_clock_advance(&f.mc, 1000000);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 3);
	/* A clock moved backwards refuses, never underflows. */
	resil_manual_clock_set(&f.mc, 0);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(s.calls, 1);
	resil_retry_free(f.r);
}

static void
test_retry_budget_off_by_default(void **state)
{
	fixture f;
	script s;
	resil_retry_result res;
	int i;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 4;
	f.cfg.base_delay_ns = 0;
	fixture_new(&f);
	for (i = 0; i < 100; i++) {
		script_init(&s, &f.mc, always_fail, 1);
		assert_int_equal(
		    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
		assert_int_equal(s.calls, 4);
	}
	resil_retry_free(f.r);
}

static void
test_retry_recorder_counts_dropped(void **state)
{
	fixture f;
	script s;
	resil_retry_result res;
	resil_retry_event few[2];

	(void)state;
	fixture_init(&f, 0);
	f.cfg.max_attempts = 5;
	resil_retry_recorder_init(&f.rec, few, 2);
	fixture_new(&f);
	script_init(&s, &f.mc, always_fail, 1);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, NULL, &res), RESIL_OK);
	assert_int_equal(f.rec.count, 2);
	assert_int_equal(f.rec.dropped, 3); /* 4 retries + give-up - 2 */
	assert_int_equal(few[1].attempt, 2);
	resil_retry_free(f.r);
}

static void
test_retry_names(void **state)
{
	(void)state;
	assert_string_equal(
	    resil_retry_stop_name(RESIL_RETRY_STOP_FINAL), "final");
	assert_string_equal(
	    resil_retry_stop_name(RESIL_RETRY_STOP_EXHAUSTED), "exhausted");
	assert_string_equal(
	    resil_retry_stop_name(RESIL_RETRY_STOP_DEADLINE), "deadline");
	assert_string_equal(
	    resil_retry_stop_name(RESIL_RETRY_STOP_BUDGET), "budget");
	assert_string_equal(
	    resil_retry_stop_name((resil_retry_stop)9), "unknown");
	assert_string_equal(
	    resil_retry_event_name(RESIL_RETRY_EVENT_RETRY), "retry");
	assert_string_equal(
	    resil_retry_event_name(RESIL_RETRY_EVENT_GIVE_UP), "give_up");
	assert_string_equal(
	    resil_retry_event_name(RESIL_RETRY_EVENT_SUCCESS), "success");
	assert_string_equal(
	    resil_retry_event_name((resil_retry_event_type)9), "unknown");
}

static void
test_retry_format_is_cut_safely(void **state)
{
	resil_retry_result res;
	char buf[10];

	(void)state;
	memset(&res, 0, sizeof(res));
	res.attempts = 3;
	res.rc = 5;
	res.outcome = RESIL_OUTCOME_FAILURE;
	res.stop = RESIL_RETRY_STOP_EXHAUSTED;
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(
	    resil_retry_result_format(&res, NULL, buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "Tried 3 t");
}

/* A clock that counts its readings. */
typedef struct counting_clock {
	resil_manual_clock mc;
	unsigned reads;
} counting_clock;

static uint64_t
counting_now(void *ctx)
{
	counting_clock *c = ctx;

	c->reads++;
	return resil_manual_clock_now(&c->mc);
}

static void
counting_sleep(uint64_t ticks, void *ctx)
{
	resil_manual_clock_advance(&((counting_clock *)ctx)->mc, ticks);
}

static int
fail_then_ok(void *ctx, resil_retry_attempt *at, void *out)
{
	(void)out;
	(*(int *)ctx)++;
	return at->number == 1 ? 7 : 0;
}

static int
ok_at_once(void *ctx, resil_retry_attempt *at, void *out)
{
	(void)at;
	(void)out;
	(*(int *)ctx)++;
	return 0;
}

static void
test_retry_reads_the_clock_only_when_needed(void **state)
{
	counting_clock cc;
	resil_clock clk = { counting_now, NULL, counting_sleep, &cc, NULL,
		NULL, NULL };
	resil_retry_config cfg = resil_retry_config_default();
	resil_retry_result res;
	resil_retry *r;
	int calls = 0;

	(void)state;
	memset(&cc, 0, sizeof(cc));
	resil_manual_clock_init(&cc.mc, 1000);
	cfg.clock = &clk;
	cfg.base_delay_ns = 10;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	/* No deadline, no listener, success at once: no reading at all. */
	assert_int_equal(
	    resil_retry_call(r, ok_at_once, &calls, NULL, &res), RESIL_OK);
	assert_int_equal(cc.reads, 0);
	assert_int_equal(res.elapsed, 0);
	/* A retry reads the clock from the first wait on. */
	assert_int_equal(
	    resil_retry_call(r, fail_then_ok, &calls, NULL, &res), RESIL_OK);
	assert_int_equal(res.attempts, 2);
	assert_true(cc.reads >= 2);
	assert_int_equal(res.waited, 10);
	assert_int_equal(res.elapsed, 10);
	assert_int_equal(resil_manual_clock_now(&cc.mc), 1010);
	resil_retry_free(r);
	/* With a deadline the start is read even for an immediate success. */
	cc.reads = 0;
	cfg.deadline_ns = 100;
	assert_int_equal(resil_retry_new(&r, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_retry_call(r, ok_at_once, &calls, NULL, &res), RESIL_OK);
	assert_int_equal(cc.reads, 2);
	resil_retry_free(r);
	assert_int_equal(calls, 4);
}

static resil_outcome
counting_classifier(int rc, const void *value, void *ctx)
{
	(void)value;
	(*(int *)ctx)++;
	return rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

/* Each attempt's outcome is classified exactly once, the first attempt
 * included (the policy's fast first attempt must hand its outcome on). */
static void
test_retry_classifier_called_once_per_attempt(void **state)
{
	static const int rcs[] = { 5, 5, 0 };
	fixture f;
	script s;
	resil_retry_result res;
	int out = 0, calls = 0;

	(void)state;
	fixture_init(&f, 0);
	f.cfg.listener = NULL; /* the fast first attempt */
	f.cfg.classifier.fn = counting_classifier;
	f.cfg.classifier.ctx = &calls;
	fixture_new(&f);
	script_init(&s, &f.mc, rcs, 3);
	assert_int_equal(
	    resil_retry_call(f.r, scripted, &s, &out, &res), RESIL_OK);
	assert_int_equal(res.attempts, 3);
	assert_int_equal(res.outcome, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(calls, 3);
	resil_retry_free(f.r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_retry_classifier_called_once_per_attempt),
		cmocka_unit_test(test_retry_config_defaults),
		cmocka_unit_test(test_retry_config_refuses_bad_fields),
		cmocka_unit_test(test_retry_null_arguments),
		cmocka_unit_test(test_retry_allocation_failure),
		cmocka_unit_test(test_retry_attempt_counts),
		cmocka_unit_test(test_retry_success_after_retry),
		cmocka_unit_test(test_retry_reads_the_clock_only_when_needed),
		cmocka_unit_test(test_retry_business_and_ignored_not_retried),
		cmocka_unit_test(test_retry_on_failure_predicate_narrows),
		cmocka_unit_test(test_retry_on_result_gives_last_result),
		cmocka_unit_test(
		    test_retry_open_not_retried_unless_configured),
		cmocka_unit_test(test_retry_jitter_sequences_with_seed),
		cmocka_unit_test(test_retry_jitter_scripted_draws),
		cmocka_unit_test(test_retry_no_jitter_draws_nothing),
		cmocka_unit_test(test_retry_exponential_cap_after_jitter),
		cmocka_unit_test(test_retry_custom_backoff),
		cmocka_unit_test(test_retry_deadline_boundaries),
		cmocka_unit_test(test_retry_deadline_after_late_sleep),
		cmocka_unit_test(test_retry_deadline_in_plan),
		cmocka_unit_test(test_retry_budget_exhaustion_and_refill),
		cmocka_unit_test(test_retry_budget_bank_is_capped),
		cmocka_unit_test(test_retry_budget_floor_refills_with_time),
		cmocka_unit_test(test_retry_budget_off_by_default),
		cmocka_unit_test(test_retry_recorder_counts_dropped),
		cmocka_unit_test(test_retry_names),
		cmocka_unit_test(test_retry_format_is_cut_safely),
	};

	return cmocka_run_group_tests_name("retry", tests, NULL, NULL);
}

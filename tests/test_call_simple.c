/*
 * The call machine's simple phase (issue 29, lib/call.c): a call of a
 * simple method with the default classifier starts without the machine's
 * state and answers a first success in place; anything else turns it
 * into the machine's state first. Differential: the same seeded scripts
 * of starts, reports (successes, failures, other attempts, values owning
 * memory), steps, cancels and starts over a live call run against two
 * pipelines configured alike, one on the simple phase (no classifier) and
 * one on the machine alone (a user classifier equal to the default, which
 * keeps calls off the simple phase). Every return code, every step, every
 * outstanding count, every result field and the pipeline's, breaker's and
 * retry policy's metrics must be equal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/pipeline.h>

#define SCRIPTS 300
#define CALLS 12
#define OPS 10

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t
below(rng *r, uint64_t n)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s % n;
}

static resil_outcome
like_default(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

typedef struct side {
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *m;
	resil_call call;
	resil_call_next st;
	resil_result r;
	int live; /* a call started and not DONE or cancelled */
} side;

/* timed: a timeout of 3 ticks and a slow-call rate over 1 tick, so the
 * script's clock moves make attempts slow and late (issue 39's timed
 * simple phase); mock: a fail: mock (which keeps the simple phase). */
static void
side_new_ex(side *s, int machine, int retry, int breaker, int timed, int mock)
{
	resil_pipeline_config cfg;
	resil_diag d;

	memset(s, 0, sizeof(*s));
	resil_manual_clock_init(&s->mc, 1000);
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = resil_manual_clock_hook(&s->mc);
	cfg.breaker_enabled = breaker;
	cfg.breaker.window_size = 4;
	cfg.breaker.min_calls = 2;
	cfg.breaker.failure_rate_pct = 50;
	cfg.breaker.open_wait_ns = 3;
	cfg.retry_enabled = retry;
	cfg.retry.max_attempts = 3;
	cfg.retry.base_delay_ns = 2;
	cfg.retry.max_delay_ns = 2;
	if (machine)
		cfg.classifier.fn = like_default;
	if (timed) {
		cfg.timeout_ns = 3;
		cfg.breaker.slow_threshold_ns = 1;
		cfg.breaker.slow_rate_pct = 50;
	}
	if (mock)
		cfg.mock = "fail:return 9";
	if (resil_pipeline_new(&s->p, &cfg, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	assert_int_equal(resil_pipeline_method(s->p, "get", &s->m), RESIL_OK);
}

static void
side_new(side *s, int machine, int retry, int breaker)
{
	side_new_ex(s, machine, retry, breaker, 0, 0);
}

static const resil_args args = { "get", "k", 1 };

/* One operation on one side; its return code (or count). */
static long
op(side *s, int what, uint32_t attempt, int rc, int kind)
{
	resil_value v;
	uint64_t now = resil_manual_clock_now(&s->mc);
	long ret;

	switch (what) {
	case 0: /* start (a new call, or over a live one) */
		if (!s->live)
			resil_result_init(&s->r);
		ret = resil_call_start(
		    &s->call, s->p, s->m, &args, &s->r, now, &s->st);
		if (ret == RESIL_OK)
			s->live = s->st.action != RESIL_CALL_DONE;
		return ret;
	case 1: /* report */
		if (kind == 0)
			v = resil_value_int(7);
		else if (kind == 1)
			assert_int_equal(
			    resil_value_string(&v, "owned", 5, NULL), RESIL_OK);
		ret = resil_call_report(&s->call, attempt, rc,
		    kind == 2 ? NULL : &v, now);
		if (kind != 2) {
			/* Moved in when taken; dropped when refused. */
			if (ret == RESIL_OK)
				assert_int_equal(v.type, RESIL_VALUE_NULL);
			resil_value_free(&v);
		}
		return ret;
	case 2: /* step */
		ret = resil_call_step(&s->call, now, &s->st);
		if (ret == RESIL_OK && s->st.action == RESIL_CALL_DONE)
			s->live = 0;
		return ret;
	case 3: /* cancel */
		ret = resil_call_cancel(&s->call, now);
		if (ret == RESIL_OK)
			s->live = 0;
		return ret;
	default:
		return (long)resil_call_outstanding(&s->call);
	}
}

static void
same_results(const resil_result *a, const resil_result *b)
{
	assert_int_equal(a->err, b->err);
	assert_int_equal(a->source, b->source);
	assert_int_equal(a->rc, b->rc);
	assert_int_equal(a->attempts, b->attempts);
	assert_int_equal(a->cause, b->cause);
	assert_int_equal(a->cause_rc, b->cause_rc);
	assert_int_equal(a->breaker_state, b->breaker_state);
	assert_int_equal(a->last_failure, b->last_failure);
	assert_int_equal(a->last_failure_rc, b->last_failure_rc);
	assert_string_equal(a->message, b->message);
	assert_int_equal(a->value.type, b->value.type);
	assert_true(resil_value_equal(&a->value, &b->value));
}

static void
same_metrics(const side *a, const side *b)
{
	resil_pipeline_metrics pa, pb;
	resil_retry_metrics ra, rb;
	resil_breaker_metrics ba, bb;
	resil_retry *xa = resil_pipeline_retry(a->p, "get");
	resil_breaker *ka = resil_pipeline_breaker(a->p, "get");

	assert_int_equal(resil_pipeline_get_metrics(a->p, &pa), RESIL_OK);
	assert_int_equal(resil_pipeline_get_metrics(b->p, &pb), RESIL_OK);
	assert_memory_equal(&pa, &pb, sizeof(pa));
	if (xa != NULL) {
		assert_int_equal(resil_retry_get_metrics(xa, &ra), RESIL_OK);
		assert_int_equal(resil_retry_get_metrics(
		                     resil_pipeline_retry(b->p, "get"), &rb),
		    RESIL_OK);
		assert_int_equal(ra.succeeded_without_retry,
		    rb.succeeded_without_retry);
		assert_int_equal(
		    ra.succeeded_after_retry, rb.succeeded_after_retry);
		assert_int_equal(ra.retries, rb.retries);
		assert_int_equal(ra.exhausted, rb.exhausted);
	}
	if (ka != NULL) {
		assert_int_equal(resil_breaker_get_metrics(ka, &ba), RESIL_OK);
		assert_int_equal(resil_breaker_get_metrics(
		                     resil_pipeline_breaker(b->p, "get"), &bb),
		    RESIL_OK);
		assert_int_equal(ba.state, bb.state);
		assert_int_equal(ba.successes, bb.successes);
		assert_int_equal(ba.failures, bb.failures);
		assert_int_equal(ba.rejections, bb.rejections);
		assert_int_equal(ba.stale, bb.stale);
		assert_int_equal(ba.window_calls, bb.window_calls);
		assert_int_equal(ba.slow_calls, bb.slow_calls);
		assert_int_equal(ba.window_slow, bb.window_slow);
		assert_int_equal(ba.probes_granted, bb.probes_granted);
	}
}

static void
run_script_ex(uint64_t seed, int timed)
{
	side a, b;
	rng r = { seed * 2654435761u + 1 };
	int retry = (int)below(&r, 2), breaker = (int)below(&r, 4) != 0;
	int mock = timed && below(&r, 2) == 0;
	int call, i;

	side_new_ex(&a, 0, retry, breaker, timed, mock);
	side_new_ex(&b, 1, retry, breaker, timed, mock);
	for (call = 0; call < CALLS; call++) {
		long ra = op(&a, 0, 0, 0, 0), rb = op(&b, 0, 0, 0, 0);

		assert_int_equal(ra, rb);
		for (i = 0; i < OPS && a.live; i++) {
			int what = (int)below(&r, 10);
			uint32_t attempt = a.st.attempt;
			int rc = below(&r, 3) == 0 ? 5 : 0;
			int kind = (int)below(&r, 3);

			/* Mostly the protocol, sometimes its misuse. */
			what = what < 4 ? 1 : what < 7 ? 2 : what < 8 ? 0
			    : what < 9                            ? 4
			                                          : 3;
			if (what == 3 && below(&r, 3) != 0)
				what = 2; /* cancels stay rare */
			if (below(&r, 8) == 0)
				attempt += 1 + (uint32_t)below(&r, 2);
			ra = op(&a, what, attempt, rc, kind);
			rb = op(&b, what, attempt, rc, kind);
			if (ra != rb)
				fail_msg("seed %llu call %d op %d (%d): %ld vs "
				         "%ld",
				    (unsigned long long)seed, call, i, what, ra,
				    rb);
			assert_int_equal(a.live, b.live);
			assert_int_equal(a.st.action, b.st.action);
			assert_int_equal(a.st.attempt, b.st.attempt);
			assert_int_equal(a.st.deadline, b.st.deadline);
			assert_int_equal(a.st.until, b.st.until);
			assert_int_equal(op(&a, 4, 0, 0, 0), op(&b, 4, 0, 0, 0));
			if (below(&r, 3) == 0) {
				/* Timed: 1 or 2 ticks, so that an attempt is
				 * in time, slow, or late (>= 4 ticks). */
				uint64_t dt = timed ? 1 + below(&r, 2) : 1;

				resil_manual_clock_advance(&a.mc, dt);
				resil_manual_clock_advance(&b.mc, dt);
			}
		}
		if (a.live) { /* end it: cancel */
			assert_int_equal(op(&a, 3, 0, 0, 0), RESIL_OK);
			assert_int_equal(op(&b, 3, 0, 0, 0), RESIL_OK);
		}
		same_results(&a.r, &b.r);
		resil_result_free(&a.r);
		resil_result_free(&b.r);
		same_metrics(&a, &b);
		resil_manual_clock_advance(&a.mc, 2);
		resil_manual_clock_advance(&b.mc, 2);
	}
	resil_pipeline_free(a.p);
	resil_pipeline_free(b.p);
}

static void
run_script(uint64_t seed)
{
	run_script_ex(seed, 0);
}

static void
test_call_simple_phase_is_the_machine(void **state)
{
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= SCRIPTS; seed++)
		run_script(seed);
}

/* The same for a method with a timeout (issue 39: the timed simple
 * phase, CALL_SIMPLE_T) and a breaker timing slow calls, with or without
 * a fail: mock: in time, slow, late (a TIMEOUT), every field and count as
 * the machine's own. */
static void
test_call_simple_phase_timed_is_the_machine(void **state)
{
	uint64_t seed;

	(void)state;
	for (seed = 1; seed <= SCRIPTS; seed++)
		run_script_ex(seed, 1);
}

/* The simple phase is taken (its success costs no machine state): a
 * call started and answered has nothing out, and a string value moved
 * in is the result's after DONE. */
static void
test_call_simple_phase_moves_the_value(void **state)
{
	side a;
	resil_value v;

	(void)state;
	side_new(&a, 0, 1, 1);
	resil_result_init(&a.r);
	assert_int_equal(resil_call_start(&a.call, a.p, a.m, &args, &a.r,
	                     resil_manual_clock_now(&a.mc), &a.st),
	    RESIL_OK);
	assert_int_equal(a.st.action, RESIL_CALL_RUN);
	assert_int_equal(a.st.attempt, 1);
	assert_int_equal(a.st.deadline, UINT64_MAX);
	assert_null(a.st.endpoint);
	assert_int_equal(resil_call_outstanding(&a.call), 1);
	assert_int_equal(resil_call_start(&a.call, a.p, a.m, &args, &a.r,
	                     resil_manual_clock_now(&a.mc), &a.st),
	    RESIL_E_MISUSE);
	assert_int_equal(resil_value_string(&v, "stock", 5, NULL), RESIL_OK);
	assert_int_equal(resil_call_report(&a.call, 1, 0, &v, 0), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_NULL);
	assert_int_equal(resil_call_outstanding(&a.call), 0);
	assert_int_equal(
	    resil_call_report(&a.call, 1, 0, NULL, 0), RESIL_E_MISUSE);
	assert_int_equal(resil_call_step(&a.call, 0, &a.st), RESIL_OK);
	assert_int_equal(a.st.action, RESIL_CALL_DONE);
	assert_int_equal(a.r.err, RESIL_OK);
	assert_int_equal(a.r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(a.r.breaker_state, RESIL_BREAKER_CLOSED);
	assert_int_equal(a.r.value.type, RESIL_VALUE_STRING);
	assert_memory_equal(a.r.value.u.s.ptr, "stock", 5);
	assert_int_equal(resil_call_step(&a.call, 0, &a.st), RESIL_E_MISUSE);
	resil_result_free(&a.r);
	resil_pipeline_free(a.p);
}

/* A classifier that calls every answer a failure, counting its calls. */
static resil_outcome
all_fail(int rc, const void *value, void *ctx)
{
	(void)rc;
	(void)value;
	++*(int *)ctx;
	return RESIL_OUTCOME_FAILURE;
}

/* With a user classifier the call machine never takes its simple phase
 * (which would answer rc 0 as a success without asking): rc 0 is what
 * the classifier says, a failure, asked once per report. */
static void
test_call_simple_phase_asks_a_users_classifier(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	const resil_method *m;
	resil_call call;
	resil_call_next st;
	resil_result r;
	resil_value v;
	int asked = 0;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.breaker_enabled = 1;
	cfg.classifier.fn = all_fail;
	cfg.classifier.ctx = &asked;
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_pipeline_method(p, "get", &m), RESIL_OK);
	resil_result_init(&r);
	assert_int_equal(
	    resil_call_start(&call, p, m, &args, &r, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	v = resil_value_int(7);
	assert_int_equal(resil_call_report(&call, 1, 0, &v, 1000), RESIL_OK);
	assert_int_equal(asked, 1);
	assert_int_equal(resil_call_step(&call, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(asked, 1);
	assert_int_not_equal(r.err, RESIL_OK);
	assert_int_equal(r.last_failure, RESIL_E_CALL);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

/* A manual clock that counts its readings. */
typedef struct counting {
	resil_manual_clock mc;
	resil_clock clk;
	uint64_t reads;
} counting;

static uint64_t
counting_now(void *ctx)
{
	counting *c = ctx;

	c->reads++;
	return resil_manual_clock_now(&c->mc);
}

static int
ok_fn(void *ctx, const resil_args *a, resil_value *out)
{
	(void)ctx;
	(void)a;
	*out = resil_value_int(8);
	return 0;
}

/* The seeds' configuration: a timeout, a count window with a slow-call
 * rate, retry, the cache with an age limit, a fail: mock. */
static resil_pipeline *
seed_pipeline(counting *c, int cache)
{
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag d;

	resil_manual_clock_init(&c->mc, 1000);
	memset(&c->clk, 0, sizeof(c->clk)); /* no wait, wake or time word */
	c->clk.now = counting_now;
	c->clk.coarse = counting_now;
	c->clk.sleep = NULL;
	c->clk.ctx = c;
	c->reads = 0;
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = &c->clk;
	cfg.timeout_ns = 1000;
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.breaker.slow_threshold_ns = 500;
	cfg.breaker.slow_rate_pct = 80;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.cache_enabled = cache;
	cfg.cache.max_age = 60 * RESIL_NS_PER_SEC;
	cfg.mock = "fail:return 9";
	if (resil_pipeline_new(&p, &cfg, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	return p;
}

/* Issue 39: a timed call pays for time, not bookkeeping: the blocking
 * driver reads the clock twice per successful call (the start, for the
 * deadline; the end, for the duration), the call machine never (its
 * caller gives the time). Before, a timed call read it 3 to 4 times. The
 * seeds' configuration without the cache, whose record stamps its entry
 * with a reading of its own (lib/fallback.c). */
static void
test_call_timed_success_reads_the_clock_twice(void **state)
{
	counting c;
	resil_pipeline *p = seed_pipeline(&c, 0);
	const resil_method *m;
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_value v;
	uint64_t before;
	int i;

	(void)state;
	assert_int_equal(resil_pipeline_method(p, "get", &m), RESIL_OK);
	for (i = 0; i < 150; i++) { /* past the window's filling */
		before = c.reads;
		assert_int_equal(resil_pipeline_call_method(
		                     p, m, &args, ok_fn, NULL, &r),
		    RESIL_OK);
		assert_int_equal(r.source, RESIL_SOURCE_LIVE);
		assert_int_equal(r.value.u.i, 8);
		resil_result_free(&r);
		if (i >= 100)
			assert_int_equal(c.reads - before, 2);
		resil_manual_clock_advance(&c.mc, 1);
	}
	for (i = 0; i < 10; i++) {
		uint64_t now = resil_manual_clock_now(&c.mc);

		before = c.reads;
		resil_result_init(&r);
		assert_int_equal(
		    resil_call_start(&call, p, m, &args, &r, now, &st),
		    RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_RUN);
		assert_int_equal(st.deadline, now + 1000);
		v = resil_value_int(8);
		assert_int_equal(
		    resil_call_report(&call, st.attempt, 0, &v, now + 10),
		    RESIL_OK);
		assert_int_equal(resil_call_step(&call, now + 10, &st), RESIL_OK);
		assert_int_equal(st.action, RESIL_CALL_DONE);
		assert_int_equal(r.err, RESIL_OK);
		resil_result_free(&r);
		assert_int_equal(c.reads - before, 0);
	}
	resil_pipeline_free(p);
}

static int
fail_fn(void *ctx, const resil_args *a, resil_value *out)
{
	(void)ctx;
	(void)a;
	(void)out;
	return 5;
}

/* The seeds' configuration with the cache: its record stamps the entry
 * with the call's end, read once for the duration too (issue 39: at most
 * two clock reads per timed call); the entry's age counts from it. */
static void
test_call_timed_cached_success_reads_the_clock_twice(void **state)
{
	counting c;
	resil_pipeline *p = seed_pipeline(&c, 1);
	const resil_method *m;
	resil_result r;
	uint64_t before;
	int i;

	(void)state;
	assert_int_equal(resil_pipeline_method(p, "get", &m), RESIL_OK);
	for (i = 0; i < 150; i++) {
		before = c.reads;
		assert_int_equal(resil_pipeline_call_method(
		                     p, m, &args, ok_fn, NULL, &r),
		    RESIL_OK);
		assert_int_equal(r.source, RESIL_SOURCE_LIVE);
		assert_int_equal(r.value.u.i, 8);
		resil_result_free(&r);
		if (i >= 100)
			assert_int_equal(c.reads - before, 2);
		resil_manual_clock_advance(&c.mc, 1);
	}
	/* The last success was stamped at its end (1149, the clock not
	 * moved by the call): 7 ticks later, a failure is answered from the
	 * cache aged 7. */
	resil_manual_clock_advance(&c.mc, 6);
	assert_int_equal(
	    resil_pipeline_call_method(p, m, &args, fail_fn, NULL, &r),
	    RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.value.u.i, 8);
	assert_int_equal(r.age, 7);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

/* A fail: mock keeps calls on the simple paths (issue 39); a force: spec
 * set while calls run takes effect at the next call, and a failure with
 * only the mock configured is still answered by it. */
static void
test_call_fail_mock_then_force(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	const resil_method *m;
	resil_result r;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	resil_pipeline_config_init(&cfg);
	cfg.service = "S";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.timeout_ns = 1000;
	cfg.breaker_enabled = 1;
	cfg.mock = "fail:return 9";
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_pipeline_method(p, "get", &m), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call_method(p, m, &args, ok_fn, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 8);
	resil_result_free(&r);
	/* A failure: the fail: mock answers (no cache, no handler). */
	assert_int_equal(resil_pipeline_call_method(
	                     p, m, &args, fail_fn, NULL, &r),
	    RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 9);
	resil_result_free(&r);
	assert_int_equal(
	    resil_pipeline_set_mock(p, NULL, "force:return 5", NULL), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call_method(p, m, &args, ok_fn, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 5);
	resil_result_free(&r);
	assert_int_equal(
	    resil_pipeline_set_mock(p, NULL, "fail:return 9", NULL), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_call_method(p, m, &args, ok_fn, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	resil_pipeline_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_simple_phase_is_the_machine),
		cmocka_unit_test(test_call_simple_phase_timed_is_the_machine),
		cmocka_unit_test(test_call_timed_success_reads_the_clock_twice),
		cmocka_unit_test(
		    test_call_timed_cached_success_reads_the_clock_twice),
		cmocka_unit_test(test_call_fail_mock_then_force),
		cmocka_unit_test(test_call_simple_phase_moves_the_value),
		cmocka_unit_test(test_call_simple_phase_asks_a_users_classifier),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Chaos strategies: the decision's order of draws with a scripted random
 * source, the switches, the rates, the text keys and their messages, the
 * seeded generator, the listener and metrics, and bad input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <resil/chaos.h>
#include <resil/clock.h>

#include "support/fail_alloc.h"

/* A scripted source: the draws in order, then 0.999 forever; counts. */
typedef struct script {
	const double *u;
	size_t n, at;
} script;

static double
script_next(void *ctx)
{
	script *s = ctx;
	double u = s->at < s->n ? s->u[s->at] : 0.999;

	s->at++;
	return u;
}

static resil_random
script_hook(script *s, const double *u, size_t n)
{
	resil_random r;

	s->u = u;
	s->n = n;
	s->at = 0;
	r.uniform = script_next;
	r.ctx = s;
	return r;
}

static int behaviour_runs;

static void
behave(void *ctx, uint64_t now)
{
	(void)ctx;
	(void)now;
	behaviour_runs++;
}

/* All four strategies, each at rate 0.1. */
static resil_chaos *
all_four(script *s, const double *u, size_t n, resil_random *r)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch;
	resil_diag diag;

	*r = script_hook(s, u, n);
	cfg.rate = 0.1;
	cfg.fault_rc = -7;
	cfg.latency_ns = 250;
	assert_int_equal(resil_value_string(&cfg.outcome_value, "cached", 6,
	                     NULL),
	    RESIL_OK);
	cfg.has_outcome = 1;
	cfg.behaviour_fn = behave;
	cfg.random = r;
	assert_int_equal(resil_chaos_new(&ch, &cfg, &diag), RESIL_OK);
	resil_chaos_config_deinit(&cfg);
	return ch;
}

static void
test_chaos_draw_order(void **state)
{
	/* fault misses (0.5), latency hits (0.05), outcome misses (0.9),
	 * behaviour hits (0.01): four draws, in that order. */
	static const double u[] = { 0.5, 0.05, 0.9, 0.01 };
	script s;
	resil_random r;
	resil_chaos_action act;
	resil_chaos *ch = all_four(&s, u, 4, &r);
	unsigned k;

	(void)state;
	k = resil_chaos_decide(ch, 1000, &act);
	assert_int_equal(k, RESIL_CHAOS_LATENCY | RESIL_CHAOS_BEHAVIOUR);
	assert_int_equal(act.kinds, k);
	assert_int_equal(s.at, 4);
	assert_int_equal(act.delay, 250);
	assert_int_equal(act.until, 1250);
	assert_ptr_equal(act.behaviour, behave);
	assert_null(act.value);
	resil_chaos_free(ch);
}

static void
test_chaos_fault_is_terminal(void **state)
{
	/* A fault ends the decision: one draw, nothing else. */
	static const double u[] = { 0.0999, 0.0, 0.0, 0.0 };
	script s;
	resil_random r;
	resil_chaos_action act;
	resil_chaos *ch = all_four(&s, u, 4, &r);

	(void)state;
	assert_int_equal(resil_chaos_decide(ch, 5, &act), RESIL_CHAOS_FAULT);
	assert_int_equal(s.at, 1);
	assert_int_equal(act.rc, -7);
	assert_int_equal(act.delay, 0);
	resil_chaos_free(ch);
}

static void
test_chaos_outcome_skips_behaviour(void **state)
{
	/* Latency misses, the outcome hits and is terminal: the behaviour
	 * is not drawn (three draws). */
	static const double u[] = { 0.2, 0.1, 0.0, 0.0 };
	script s;
	resil_random r;
	resil_chaos_action act;
	resil_chaos *ch = all_four(&s, u, 4, &r);

	(void)state;
	/* 0.1 is not below the rate 0.1: u < rate is strict. */
	assert_int_equal(resil_chaos_decide(ch, 5, &act), RESIL_CHAOS_OUTCOME);
	assert_int_equal(s.at, 3);
	assert_non_null(act.value);
	assert_int_equal(act.value->type, RESIL_VALUE_STRING);
	assert_string_equal(act.value->u.s.ptr, "cached");
	resil_chaos_free(ch);
}

static void
test_chaos_latency_with_outcome(void **state)
{
	static const double u[] = { 0.5, 0.0, 0.0 };
	script s;
	resil_random r;
	resil_chaos_action act;
	resil_chaos *ch = all_four(&s, u, 3, &r);

	(void)state;
	assert_int_equal(resil_chaos_decide(ch, UINT64_MAX - 100, &act),
	    RESIL_CHAOS_LATENCY | RESIL_CHAOS_OUTCOME);
	assert_int_equal(s.at, 3);
	assert_true(act.until == UINT64_MAX); /* saturates */
	resil_chaos_free(ch);
}

static void
test_chaos_disabled_draws_nothing(void **state)
{
	static const double u[] = { 0.0, 0.0, 0.0, 0.0 };
	script s;
	resil_random r;
	resil_chaos_action act;
	resil_chaos *ch = all_four(&s, u, 4, &r);
	resil_chaos_metrics m;

	(void)state;
	assert_int_equal(resil_chaos_get_enabled(ch),
	    RESIL_CHAOS_STRATEGIES | RESIL_CHAOS_MASTER);
	assert_int_equal(
	    resil_chaos_set_enabled(ch, RESIL_CHAOS_MASTER, 0), RESIL_OK);
	assert_int_equal(resil_chaos_live(ch), 0);
	assert_int_equal(resil_chaos_decide(ch, 1, &act), 0);
	assert_int_equal(s.at, 0);
	/* The strategies keep their switches under the master. */
	assert_int_equal(resil_chaos_get_enabled(ch), RESIL_CHAOS_STRATEGIES);
	/* Master on, every strategy off but the behaviour: one draw. */
	assert_int_equal(resil_chaos_set_enabled(ch,
	                     RESIL_CHAOS_FAULT | RESIL_CHAOS_LATENCY |
	                         RESIL_CHAOS_OUTCOME,
	                     0),
	    RESIL_OK);
	assert_int_equal(
	    resil_chaos_set_enabled(ch, RESIL_CHAOS_MASTER, 1), RESIL_OK);
	assert_int_equal(resil_chaos_live(ch), RESIL_CHAOS_BEHAVIOUR);
	assert_int_equal(
	    resil_chaos_decide(ch, 1, &act), RESIL_CHAOS_BEHAVIOUR);
	assert_int_equal(s.at, 1);
	/* Off, then on again at run time. */
	assert_int_equal(
	    resil_chaos_set_enabled(ch, RESIL_CHAOS_BEHAVIOUR, 0), RESIL_OK);
	assert_int_equal(resil_chaos_decide(ch, 2, &act), 0);
	assert_int_equal(s.at, 1);
	assert_int_equal(
	    resil_chaos_set_enabled(ch, RESIL_CHAOS_FAULT, 1), RESIL_OK);
	assert_int_equal(resil_chaos_decide(ch, 3, &act), RESIL_CHAOS_FAULT);
	assert_int_equal(s.at, 2);
	assert_int_equal(resil_chaos_get_metrics(ch, &m), RESIL_OK);
	assert_int_equal(m.decisions, 2);
	assert_int_equal(m.faults, 1);
	assert_int_equal(m.behaviours, 1);
	assert_int_equal(m.configured, RESIL_CHAOS_STRATEGIES);
	assert_int_equal(m.enabled, RESIL_CHAOS_FAULT | RESIL_CHAOS_MASTER);
	resil_chaos_free(ch);
}

static void
test_chaos_switch_refusals(void **state)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch;

	(void)state;
	cfg.fault_rc = 1;
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	/* Only the fault is configured: the others have no switch. */
	assert_int_equal(resil_chaos_get_enabled(ch),
	    RESIL_CHAOS_FAULT | RESIL_CHAOS_MASTER);
	assert_int_equal(resil_chaos_set_enabled(ch, RESIL_CHAOS_LATENCY, 1),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_set_enabled(ch,
	                     RESIL_CHAOS_FAULT | RESIL_CHAOS_LATENCY, 0),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_get_enabled(ch),
	    RESIL_CHAOS_FAULT | RESIL_CHAOS_MASTER); /* unchanged */
	assert_int_equal(resil_chaos_set_enabled(ch, 0, 1), RESIL_E_INVAL);
	assert_int_equal(resil_chaos_set_enabled(ch, 0x20, 1), RESIL_E_INVAL);
	assert_int_equal(resil_chaos_set_enabled(NULL, RESIL_CHAOS_MASTER, 1),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_set_enabled(ch,
	                     RESIL_CHAOS_FAULT | RESIL_CHAOS_MASTER, 0),
	    RESIL_OK);
	assert_int_equal(resil_chaos_get_enabled(ch), 0);
	resil_chaos_free(ch);
}

static void
test_chaos_rates_zero_and_one(void **state)
{
	static const double u[] = { 0.0, 0.999999, 0.0, 0.999999 };
	resil_chaos_config cfg = resil_chaos_config_default();
	script s;
	resil_random r = script_hook(&s, u, 4);
	resil_chaos_action act;
	resil_chaos *ch;

	(void)state;
	cfg.random = &r;
	cfg.fault_rc = 3;
	cfg.fault.rate = 0; /* never, even at u == 0: still one draw */
	cfg.latency_ns = 9;
	cfg.latency.rate = 1; /* always, even at u just below 1 */
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_chaos_decide(ch, 0, &act), RESIL_CHAOS_LATENCY);
	assert_int_equal(s.at, 2);
	assert_int_equal(resil_chaos_decide(ch, 0, &act), RESIL_CHAOS_LATENCY);
	assert_int_equal(s.at, 4);
	resil_chaos_free(ch);
}

static void
test_chaos_rate_inherited(void **state)
{
	/* chaos.rate is the rate of the strategies without their own. */
	static const double u[] = { 0.3, 0.3 };
	resil_chaos_config cfg = resil_chaos_config_default();
	script s;
	resil_random r = script_hook(&s, u, 2);
	resil_chaos_action act;
	resil_chaos *ch;

	(void)state;
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.rate", "0.5",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.fault.rate",
	                     "0.25", NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_chaos_config_set(&cfg, "chaos.fault", "-1", NULL), RESIL_OK);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.latency", "1.5s",
	                     NULL),
	    RESIL_OK);
	cfg.random = &r;
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	/* fault: 0.3 >= 0.25 misses; latency: 0.3 < 0.5 hits. */
	assert_int_equal(resil_chaos_decide(ch, 0, &act), RESIL_CHAOS_LATENCY);
	assert_int_equal(act.delay, 1500 * RESIL_NS_PER_MS);
	resil_chaos_free(ch);
	resil_chaos_config_deinit(&cfg);
}

static void
test_chaos_seeded_generator(void **state)
{
	/* Without a source: the chaos's own SplitMix64, seeded; its draws
	 * are those of a resil_rng with the same seed. */
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos_action act;
	resil_chaos *ch;
	resil_rng twin;
	unsigned i, hits = 0, want = 0;

	(void)state;
	cfg.seed = 42;
	cfg.fault_rc = 5;
	cfg.fault.rate = 0.3;
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	resil_rng_seed(&twin, 42);
	for (i = 0; i < 1000; i++) {
		if (resil_rng_uniform(&twin) < 0.3)
			want++;
		if (resil_chaos_decide(ch, i, &act) == RESIL_CHAOS_FAULT)
			hits++;
	}
	assert_int_equal(hits, want);
	assert_true(hits > 250 && hits < 350);
	resil_chaos_free(ch);
}

typedef struct seen {
	resil_chaos_event ev[8];
	int n;
} seen;

static void
on_event(const resil_chaos_event *ev, void *ctx)
{
	seen *s = ctx;

	if (s->n < 8)
		s->ev[s->n++] = *ev;
}

static void
test_chaos_listener(void **state)
{
	static const double u[] = { 0.5, 0.0, 0.5, 0.0 };
	resil_chaos_config cfg = resil_chaos_config_default();
	script s;
	resil_random r = script_hook(&s, u, 4);
	resil_chaos_action act;
	resil_chaos_metrics m;
	resil_chaos *ch;
	seen sn;

	(void)state;
	memset(&sn, 0, sizeof(sn));
	cfg.random = &r;
	cfg.rate = 0.1;
	cfg.fault_rc = 2;
	cfg.latency_ns = 40;
	cfg.has_outcome = 1;
	cfg.outcome_value = resil_value_int(7);
	cfg.behaviour_fn = behave;
	cfg.listener = on_event;
	cfg.listener_ctx = &sn;
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	behaviour_runs = 0;
	assert_int_equal(resil_chaos_decide(ch, 77, &act),
	    RESIL_CHAOS_LATENCY | RESIL_CHAOS_BEHAVIOUR);
	/* resil never runs the behaviour: the driver does. */
	assert_int_equal(behaviour_runs, 0);
	act.behaviour(act.behaviour_ctx, 77);
	assert_int_equal(behaviour_runs, 1);
	assert_int_equal(sn.n, 2);
	assert_int_equal(sn.ev[0].kind, RESIL_CHAOS_LATENCY);
	assert_int_equal(sn.ev[0].time, 77);
	assert_int_equal(sn.ev[0].delay, 40);
	assert_int_equal(sn.ev[1].kind, RESIL_CHAOS_BEHAVIOUR);
	assert_int_equal(resil_chaos_get_metrics(ch, &m), RESIL_OK);
	assert_int_equal(m.latencies, 1);
	assert_int_equal(m.latency_ns, 40);
	assert_int_equal(m.behaviours, 1);
	resil_chaos_free(ch);
}

static void
expect_refused(const char *key, const char *value, const char *msg)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos_config before = cfg;
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_chaos_config_set(&cfg, key, value, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg, msg);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void
test_chaos_text_keys(void **state)
{
	resil_chaos_config cfg = resil_chaos_config_default();

	(void)state;
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.enabled", "off",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.enabled, 0);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.latency", "250",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.latency_ns, 250 * RESIL_NS_PER_MS);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.latency",
	                     " 2us ", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.latency_ns, 2000);
	assert_int_equal(resil_chaos_config_set(&cfg,
	                     "chaos.behaviour.enabled", "false", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.behaviour.enabled, 0);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.outcome.rate",
	                     "1", NULL),
	    RESIL_OK);
	assert_true(cfg.outcome.rate == 1.0);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.seed", "9",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.seed, 9);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.outcome",
	                     "{\"stock\": 0}", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.outcome_value.type, RESIL_VALUE_JSON);
	assert_string_equal(cfg.outcome_value.u.s.ptr, "{\"stock\":0}");
	/* A second outcome replaces (and frees) the first. */
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.outcome", "42",
	                     NULL),
	    RESIL_OK);
	assert_int_equal(cfg.outcome_value.type, RESIL_VALUE_INT);
	assert_int_equal(cfg.outcome_value.u.i, 42);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.outcome",
	                     "'unknown'", NULL),
	    RESIL_OK);
	assert_int_equal(cfg.outcome_value.type, RESIL_VALUE_STRING);
	assert_int_equal(resil_chaos_config_validate(&cfg, NULL), RESIL_OK);
	resil_chaos_config_deinit(&cfg);
	assert_int_equal(cfg.has_outcome, 0);

	expect_refused("chaos.fault.rate", "1.5",
	    "chaos.fault.rate: 1.5 is out of range 0..1");
	expect_refused("chaos.rate", "-0.1",
	    "chaos.rate: \"-0.1\" is not a number (decimal, e.g. 0.25 or "
	    "1e-3)");
	expect_refused("chaos.fault", "0",
	    "chaos.fault: 0 is a success; a fault needs a nonzero rc");
	expect_refused(
	    "chaos.fault", "boom", "chaos.fault: \"boom\" is not an integer");
	expect_refused("chaos.latency", "10sec",
	    "chaos.latency: \"10sec\": unknown unit \"sec\" (did you mean "
	    "10s?)");
	expect_refused("chaos.latency", "0",
	    "chaos.latency: 0 is below the minimum of 0.000001ms (1ns)");
	expect_refused("chaos.latency", "5 ms",
	    "chaos.latency: \"5 ms\": write the unit next to the number "
	    "(5ms)");
	expect_refused("chaos.latency", "1.5ns",
	    "chaos.latency: \"1.5ns\" is not a whole number of nanoseconds");
	expect_refused("chaos.enabled", "maybe",
	    "chaos.enabled: \"maybe\" is not a boolean (true, false, yes, "
	    "no, on, off, 1, 0)");
	expect_refused("chaos.fualt", "1",
	    "chaos.fualt: unknown key (chaos keys: enabled, rate, seed, "
	    "fault, latency, outcome, and S.rate, S.enabled for S in fault, "
	    "latency, outcome, behaviour)");
	expect_refused("chaos.behaviour.delay", "1",
	    "chaos.behaviour.delay: unknown key (chaos keys: enabled, rate, "
	    "seed, fault, latency, outcome, and S.rate, S.enabled for S in "
	    "fault, latency, outcome, behaviour)");
	expect_refused("chaos.outcome", "{\"a\":",
	    "chaos.outcome: mock: \"return {\"a\":\" at column 12: invalid "
	    "JSON");
}

static void
test_chaos_validate(void **state)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos *ch = NULL;
	resil_diag diag;

	(void)state;
	cfg.latency.rate = 2;
	assert_int_equal(resil_chaos_new(&ch, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "chaos.latency.rate: 2 is out of range 0..1 (negative: "
	    "chaos.rate)");
	assert_null(ch);
	cfg = resil_chaos_config_default();
	cfg.rate = NAN;
	assert_int_equal(resil_chaos_config_validate(&cfg, &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg, "chaos.rate: nan is out of range 0..1");
	cfg = resil_chaos_config_default();
	cfg.size = 8;
	assert_int_equal(resil_chaos_config_validate(&cfg, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_new(NULL, &cfg, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_chaos_new(&ch, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_chaos_config_set(NULL, "chaos.rate", "1", NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_config_set(&cfg, NULL, "1", NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.rate", NULL,
	                     NULL),
	    RESIL_E_INVAL);
}

static void
test_chaos_null_and_no_strategy(void **state)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos_action act;
	resil_chaos_metrics m;
	resil_chaos *ch;

	(void)state;
	assert_int_equal(resil_chaos_decide(NULL, 0, &act), 0);
	assert_int_equal(resil_chaos_get_enabled(NULL), 0);
	assert_int_equal(resil_chaos_live(NULL), 0);
	assert_int_equal(resil_chaos_get_metrics(NULL, &m), RESIL_E_INVAL);
	resil_chaos_free(NULL);
	resil_chaos_config_deinit(NULL);
	/* Nothing configured: a chaos that never draws. */
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_chaos_live(ch), 0);
	assert_int_equal(resil_chaos_get_enabled(ch), RESIL_CHAOS_MASTER);
	assert_int_equal(resil_chaos_decide(ch, 0, &act), 0);
	assert_int_equal(resil_chaos_get_metrics(ch, NULL), RESIL_E_INVAL);
	resil_chaos_free(ch);
	/* A NULL out decides nothing. */
	cfg.fault_rc = 1;
	cfg.fault.rate = 1;
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_chaos_decide(ch, 0, NULL), 0);
	assert_int_equal(resil_chaos_get_metrics(ch, &m), RESIL_OK);
	assert_int_equal(m.decisions, 0);
	resil_chaos_free(ch);
	assert_string_equal(resil_chaos_kind_name(RESIL_CHAOS_FAULT), "fault");
	assert_string_equal(
	    resil_chaos_kind_name(RESIL_CHAOS_BEHAVIOUR), "behaviour");
	assert_string_equal(resil_chaos_kind_name((resil_chaos_kind)3),
	    "unknown");
}

static void
test_chaos_alloc_failure(void **state)
{
	uint64_t nth;
	int done = 0, failed = 0;

	(void)state;
	/* chaos.outcome through the config's allocator, then new: every
	 * allocation fails once; nothing leaks, *out is untouched. */
	for (nth = 1; !done; nth++) {
		fail_alloc fa;
		resil_chaos_config cfg = resil_chaos_config_default();
		resil_chaos *ch = (resil_chaos *)&fa;
		resil_err e;

		cfg.alloc = fail_alloc_init(&fa, nth);
		e = resil_chaos_config_set(
		    &cfg, "chaos.outcome", "\"a long string value\"", NULL);
		if (e == RESIL_E_NOMEM) {
			failed++;
			assert_int_equal(cfg.has_outcome, 0);
			assert_int_equal(fail_alloc_live(&fa), 0);
			continue;
		}
		assert_int_equal(e, RESIL_OK);
		e = resil_chaos_new(&ch, &cfg, NULL);
		if (e == RESIL_E_NOMEM) {
			failed++;
			assert_ptr_equal(ch, (resil_chaos *)&fa);
		} else {
			assert_int_equal(e, RESIL_OK);
			resil_chaos_free(ch);
			done = 1;
		}
		resil_chaos_config_deinit(&cfg);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_int_equal(fa.size_mismatch, 0);
	}
	assert_true(failed >= 2);
}

static void
test_chaos_decide_allocates_nothing(void **state)
{
	static const double u[] = { 0.5, 0.0, 0.0, 0.0, 0.0 };
	fail_alloc fa;
	resil_chaos_config cfg = resil_chaos_config_default();
	script s;
	resil_random r = script_hook(&s, u, 5);
	resil_chaos_action act;
	resil_chaos *ch;
	uint64_t before;
	int i;

	(void)state;
	cfg.alloc = fail_alloc_init(&fa, 0);
	cfg.random = &r;
	cfg.rate = 0.1;
	cfg.fault_rc = 1;
	cfg.latency_ns = 5;
	assert_int_equal(resil_chaos_config_set(&cfg, "chaos.outcome",
	                     "\"a string\"", NULL),
	    RESIL_OK);
	cfg.behaviour_fn = behave;
	assert_int_equal(resil_chaos_new(&ch, &cfg, NULL), RESIL_OK);
	before = fa.allocs;
	/* Injecting (latency and outcome: the value is the chaos's own,
	 * handed out, not copied), missing, switching. */
	for (i = 0; i < 100; i++)
		(void)resil_chaos_decide(ch, (uint64_t)i, &act);
	resil_chaos_set_enabled(ch, RESIL_CHAOS_MASTER, 0);
	(void)resil_chaos_decide(ch, 0, &act);
	assert_int_equal(fa.allocs, before);
	resil_chaos_free(ch);
	resil_chaos_config_deinit(&cfg);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chaos_draw_order),
		cmocka_unit_test(test_chaos_fault_is_terminal),
		cmocka_unit_test(test_chaos_outcome_skips_behaviour),
		cmocka_unit_test(test_chaos_latency_with_outcome),
		cmocka_unit_test(test_chaos_disabled_draws_nothing),
		cmocka_unit_test(test_chaos_switch_refusals),
		cmocka_unit_test(test_chaos_rates_zero_and_one),
		cmocka_unit_test(test_chaos_rate_inherited),
		cmocka_unit_test(test_chaos_seeded_generator),
		cmocka_unit_test(test_chaos_listener),
		cmocka_unit_test(test_chaos_text_keys),
		cmocka_unit_test(test_chaos_validate),
		cmocka_unit_test(test_chaos_null_and_no_strategy),
		cmocka_unit_test(test_chaos_alloc_failure),
		cmocka_unit_test(test_chaos_decide_allocates_nothing),
	};

	return cmocka_run_group_tests_name("chaos", tests, NULL, NULL);
}

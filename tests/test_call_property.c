/*
 * Issue 25.1's property, over seeded random scripts: hedging (1..3
 * hedges, a delay), a retry policy with or without a budget and a
 * deadline, a breaker that trips fast (and is sometimes forced OPEN), a
 * small bulkhead, a timeout, attempts that fail, answer late or never,
 * and in a third of the scripts a chaos (latency, fault and outcome at
 * 30%). A quarter of the scripts have no hedging, so that a timed call
 * takes the simple paths (issue 39: the blocking driver's drive_timed(),
 * the machine's timed simple phase), some with a breaker timing slow
 * calls; a third of the scripts with the cache (an age limit of 0..39
 * ticks), whose answers are checked (a success's value, within the
 * limit).
 * Every call reaches DONE by its bound (what its timeouts, hedge delays,
 * backoffs and answers can add up to) plus one step, through both
 * drivers: the call machine stepped here by an event loop, and
 * resil_pipeline_call() with an executor on the calling thread. A
 * machine that waits for ever with nothing out fails the first; a
 * blocking driver that sleeps for ever fails the second (its clock's
 * sleep refuses a sleep past the bound). 400 scripts by default;
 * RESIL_PROPERTY_SCRIPTS=N runs N (docs/TESTING.md).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/pipeline.h>

#define SCRIPTS 400
#define CALLS 6
#define MAXQ 64

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t
next(rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s;
}

static uint64_t
below(rng *r, uint64_t n)
{
	return next(r) % n;
}

/* One script: the pipeline's settings and how its attempts answer. */
typedef struct script {
	uint32_t hedge_max;
	uint64_t hedge_delay, timeout;
	int retry, budget, breaker, force_open, bulkhead;
	uint32_t attempts, probes;
	uint64_t backoff, deadline;
	uint32_t max_concurrent;
	uint64_t max_delay; /* an answer comes within this, or never */
	int lose;           /* attempts may never answer (a timeout is set) */
	int chaos;          /* a chaos: latency, fault, outcome at rates */
	uint64_t latency;
	uint64_t slow; /* the breaker's slow-call threshold; 0: none */
	int cache;     /* the cache records successes, answers failures */
	uint64_t max_age;
} script;

static void
script_of(rng *r, script *s)
{
	memset(s, 0, sizeof(*s));
	s->hedge_max = 1 + (uint32_t)below(r, 3);
	s->hedge_delay = 1 + below(r, 20);
	s->timeout = below(r, 2) ? 5 + below(r, 45) : 0;
	s->retry = (int)below(r, 2);
	s->budget = s->retry && below(r, 2);
	s->attempts = 1 + (uint32_t)below(r, 3);
	s->backoff = below(r, 10);
	s->deadline = s->retry && below(r, 2) ? 30 + below(r, 150) : 0;
	s->breaker = (int)below(r, 2);
	s->force_open = s->breaker && below(r, 5) == 0;
	s->bulkhead = (int)below(r, 2);
	s->max_concurrent = 1 + (uint32_t)below(r, 3);
	s->max_delay = 1 + below(r, 30);
	s->lose = s->timeout != 0 && below(r, 2);
	s->chaos = below(r, 3) == 0;
	s->latency = s->chaos ? 1 + below(r, 20) : 0;
	/* Drawn last, so the other draws (and the scripts that had
	 * hedging before) stay as they were. */
	if (below(r, 4) == 0)
		s->hedge_max = 0;
	s->slow = s->breaker && below(r, 2) ? 1 + below(r, 10) : 0;
	/* The cache (issue 39: the timed and cached paths), drawn after
	 * the rest for the same reason. */
	s->cache = below(r, 3) == 0;
	s->max_age = below(r, 40);
}

/* A cache's answer is a value a success gives (int 1, or the chaos's
 * outcome 2), no older than the age limit. */
static void
check_answer(const script *s, const resil_result *res, unsigned seed)
{
	if (res->source != RESIL_SOURCE_CACHE)
		return;
	if (!s->cache || res->err != RESIL_OK ||
	    res->value.type != RESIL_VALUE_INT ||
	    !(res->value.u.i == 1 || (s->chaos && res->value.u.i == 2)) ||
	    res->age > s->max_age)
		fail_msg("script %u: a cache answer err %d type %d age %llu "
		         "(limit %llu)",
		    seed, (int)res->err, (int)res->value.type,
		    (unsigned long long)res->age,
		    (unsigned long long)s->max_age);
}

/* The latest a call may end, from its start. */
static uint64_t
bound_of(const script *s)
{
	uint64_t answer = s->timeout != 0 && s->timeout + 1 < s->max_delay
	    ? s->timeout + 1
	    : s->max_delay;
	uint64_t per = (uint64_t)s->hedge_max * (s->hedge_delay + s->latency) +
	    answer + s->latency + (s->timeout != 0 ? s->timeout + 1 : 0);
	uint32_t n = s->retry ? s->attempts : 1;

	return (uint64_t)n * (per + s->backoff) + 1;
}

/* The pipeline's clock: the manual clock, whose sleep refuses to sleep
 * past the call's bound (the blocking driver's endless wait). */
typedef struct pclock {
	resil_manual_clock mc;
	const resil_clock *inner;
	uint64_t limit; /* no reading past this */
	resil_clock hook;
} pclock;

static uint64_t
pc_now(void *ctx)
{
	pclock *c = ctx;

	return c->inner->now(c->inner->ctx);
}

static void
pc_sleep(uint64_t ticks, void *ctx)
{
	pclock *c = ctx;
	uint64_t now = pc_now(c);

	if (ticks > c->limit - now)
		fail_msg("the blocking driver sleeps %llu ticks at %llu, past "
		         "the bound %llu",
		    (unsigned long long)ticks, (unsigned long long)now,
		    (unsigned long long)c->limit);
	c->inner->sleep(ticks, c->inner->ctx);
}

static void
pclock_init(pclock *c)
{
	memset(c, 0, sizeof(*c));
	resil_manual_clock_init(&c->mc, 1000);
	c->inner = resil_manual_clock_hook(&c->mc);
	c->limit = UINT64_MAX;
	c->hook.now = pc_now;
	c->hook.coarse = pc_now;
	c->hook.sleep = pc_sleep;
	c->hook.ctx = c;
}

/* The executor of the blocking driver, on the calling thread: submit
 * queues a job with its answer time; wait runs the earliest when it is
 * due by until, else moves the clock to until. */
typedef struct exq {
	pclock *clk;
	rng *r;
	const script *s;
	void (*run[MAXQ])(void *job);
	void *job[MAXQ];
	uint64_t at[MAXQ]; /* UINT64_MAX: never answers */
	int n;
} exq;

static int
ex_submit(void (*run)(void *job), void *job, void *ctx)
{
	exq *q = ctx;
	uint64_t now = pc_now(q->clk);

	if (q->n == MAXQ)
		return 1;
	q->run[q->n] = run;
	q->job[q->n] = job;
	q->at[q->n] = q->s->lose && below(q->r, 4) == 0
	    ? UINT64_MAX
	    : now + below(q->r, q->s->max_delay + 1);
	q->n++;
	return 0;
}

static void
ex_run(exq *q, int i)
{
	void (*run)(void *job) = q->run[i];
	void *job = q->job[i];

	q->n--;
	q->run[i] = q->run[q->n];
	q->job[i] = q->job[q->n];
	q->at[i] = q->at[q->n];
	run(job);
}

static void
ex_wait(uint64_t until, void *ctx)
{
	exq *q = ctx;
	uint64_t now = pc_now(q->clk);
	int i, best = -1;

	for (i = 0; i < q->n; i++)
		if (q->at[i] != UINT64_MAX &&
		    (best < 0 || q->at[i] < q->at[best]))
			best = i;
	if (best >= 0 && q->at[best] <= until) {
		if (q->at[best] > now)
			resil_manual_clock_set(&q->clk->mc, q->at[best]);
		ex_run(q, best);
		return;
	}
	if (until == UINT64_MAX)
		fail_msg("the blocking driver waits for ever at %llu",
		    (unsigned long long)now);
	if (until > now)
		pc_sleep(until - now, q->clk);
}

static void
ex_wake(void *ctx)
{
	(void)ctx;
}

/* The attempts' answers: a failure (rc 5) half the time. */
static int
attempt_fn(void *ctx, const resil_args *args, resil_value *out)
{
	rng *r = ctx;

	(void)args;
	if (below(r, 2) == 0)
		return 5;
	*out = resil_value_int(1);
	return 0;
}

static resil_pipeline *
pipeline_of(const script *s, pclock *clk, exq *q, resil_chaos **ch)
{
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag diag;

	*ch = NULL;
	if (s->chaos) {
		resil_chaos_config cc;

		resil_chaos_config_init(&cc);
		cc.rate = 0.3;
		cc.latency_ns = s->latency;
		cc.fault_rc = 5;
		cc.has_outcome = 1;
		cc.outcome_value = resil_value_int(2);
		cc.seed = s->latency * 7919u;
		if (resil_chaos_new(ch, &cc, &diag) != RESIL_OK)
			fail_msg("chaos: %s", diag.msg);
	}
	resil_pipeline_config_init(&cfg);
	cfg.chaos = *ch;
	cfg.service = "PropService";
	cfg.clock = &clk->hook;
	cfg.hedge_max = s->hedge_max;
	cfg.hedge_delay_ns = s->hedge_delay;
	cfg.timeout_ns = s->timeout;
	if (s->retry) {
		cfg.retry_enabled = 1;
		cfg.retry.max_attempts = s->attempts;
		cfg.retry.base_delay_ns = s->backoff;
		cfg.retry.deadline_ns = s->deadline;
		if (s->budget) {
			cfg.retry.budget_ratio = 0.3;
			cfg.retry.budget_max_tokens = 1;
			cfg.retry.budget_min_retries = 0;
		}
	}
	if (s->breaker) {
		cfg.breaker_enabled = 1;
		cfg.breaker.consecutive_failures = 2;
		cfg.breaker.failure_rate_pct = 0;
		cfg.breaker.open_wait_ns = 40;
		if (s->slow != 0) {
			cfg.breaker.slow_threshold_ns = s->slow;
			cfg.breaker.slow_rate_pct = 50;
		}
	}
	if (s->cache) {
		cfg.cache_enabled = 1;
		cfg.cache.max_age = s->max_age;
	}
	if (s->bulkhead) {
		cfg.bulkhead_enabled = 1;
		cfg.bulkhead.max_concurrent = s->max_concurrent;
	}
	if (q != NULL) {
		cfg.executor.submit = ex_submit;
		cfg.executor.wait = ex_wait;
		cfg.executor.wake = ex_wake;
		cfg.executor.ctx = q;
	}
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	if (s->force_open)
		assert_int_equal(
		    resil_breaker_force_open(resil_pipeline_breaker(p, NULL)),
		    RESIL_OK);
	return p;
}

/* An attempt out in the event loop: its id and answer time. */
typedef struct outq {
	uint32_t id[MAXQ];
	uint64_t at[MAXQ];
	int n;
} outq;

/* One call stepped by an event loop; the clock at DONE. */
static uint64_t
loop_call(resil_pipeline *p, pclock *clk, rng *r, const script *s,
    uint64_t limit, unsigned seed)
{
	resil_args args = { "get", NULL, 0 };
	resil_call call;
	resil_call_next st;
	resil_result res;
	outq o;
	int steps = 0, i;
	uint32_t maxid = 0;

	memset(&o, 0, sizeof(o));
	assert_int_equal(
	    resil_call_start(&call, p, NULL, &args, &res, pc_now(clk), &st),
	    RESIL_OK);
	while (st.action != RESIL_CALL_DONE) {
		uint64_t now = pc_now(clk), wake;
		int best = -1;

		if (++steps > 10000)
			fail_msg("script %u: no end after 10000 steps", seed);
		if (st.action == RESIL_CALL_RUN) {
			assert_true(o.n < MAXQ);
			o.id[o.n] = st.attempt;
			if (st.attempt > maxid)
				maxid = st.attempt;
			o.at[o.n] = s->lose && below(r, 4) == 0
			    ? UINT64_MAX
			    : now + below(r, s->max_delay + 1);
			o.n++;
			assert_int_equal(
			    resil_call_step(&call, now, &st), RESIL_OK);
			continue;
		}
		for (i = 0; i < o.n; i++)
			if (o.at[i] != UINT64_MAX &&
			    (best < 0 || o.at[i] < o.at[best]))
				best = i;
		wake = st.until;
		if (best >= 0 && o.at[best] < wake)
			wake = o.at[best];
		if (wake == UINT64_MAX)
			fail_msg("script %u: WAIT for ever at %llu with %u "
			         "out",
			    seed, (unsigned long long)now,
			    (unsigned)resil_call_outstanding(&call));
		if (wake > limit)
			fail_msg("script %u: WAIT until %llu past the bound "
			         "%llu",
			    seed, (unsigned long long)wake,
			    (unsigned long long)limit);
		if (wake > now)
			resil_manual_clock_set(&clk->mc, wake);
		now = pc_now(clk);
		if (best >= 0 && o.at[best] <= now) {
			int rc = below(r, 2) == 0 ? 5 : 0;
			resil_value v =
			    rc == 0 ? resil_value_int(1) : resil_value_null();

			assert_int_equal(
			    resil_call_report(&call, o.id[best], rc, &v, now),
			    RESIL_OK);
			o.n--;
			o.id[best] = o.id[o.n];
			o.at[best] = o.at[o.n];
		}
		assert_int_equal(resil_call_step(&call, now, &st), RESIL_OK);
	}
	/* Late answers after DONE are accepted and dropped; when more than
	 * RESIL_CALL_MAX_INFLIGHT slots were taken (attempts out, abandoned
	 * or held back by chaos), the oldest abandoned were forgotten and
	 * their answers are refused (call.h). */
	for (i = 0; i < o.n; i++) {
		resil_err e =
		    resil_call_report(&call, o.id[i], 0, NULL, pc_now(clk));

		if (e != RESIL_OK &&
		    !(e == RESIL_E_MISUSE &&
		        (maxid >= RESIL_CALL_MAX_INFLIGHT || s->chaos)))
			fail_msg("script %u: a late answer refused (%d), %d "
			         "out",
			    seed, (int)e, o.n);
	}
	check_answer(s, &res, seed);
	resil_result_free(&res);
	return pc_now(clk);
}

static void
test_call_property_every_call_ends(void **state)
{
	unsigned seed, scripts = SCRIPTS;
	uint64_t calls = 0;
	const char *env = getenv("RESIL_PROPERTY_SCRIPTS");

	(void)state;
	if (env != NULL && atoi(env) > 0)
		scripts = (unsigned)atoi(env); /* longer runs: make soak */
	for (seed = 1; seed <= scripts; seed++) {
		rng r = { 0x9e3779b97f4a7c15ull * seed };
		script s;
		int driver;

		script_of(&r, &s);
		for (driver = 0; driver < 2; driver++) {
			pclock clk;
			exq q;
			resil_pipeline *p;
			resil_chaos *ch;
			int k;

			pclock_init(&clk);
			memset(&q, 0, sizeof(q));
			q.clk = &clk;
			q.r = &r;
			q.s = &s;
			p = pipeline_of(&s, &clk, driver ? &q : NULL, &ch);
			for (k = 0; k < CALLS; k++) {
				uint64_t t0 = pc_now(&clk), end;
				uint64_t limit = t0 + bound_of(&s);

				if (driver == 0) {
					end = loop_call(
					    p, &clk, &r, &s, limit, seed);
				} else {
					resil_args args = { "get", NULL, 0 };
					resil_result res;

					clk.limit = limit;
					(void)resil_pipeline_call(
					    p, &args, attempt_fn, &r, &res);
					check_answer(&s, &res, seed);
					resil_result_free(&res);
					clk.limit = UINT64_MAX;
					end = pc_now(&clk);
					/* Jobs that never answered: run
					 * now, they free themselves. */
					while (q.n > 0)
						ex_run(&q, 0);
				}
				if (end > limit)
					fail_msg(
					    "script %u driver %d call %d: "
					    "DONE at +%llu, bound +%llu",
					    seed, driver, k,
					    (unsigned long long)(end - t0),
					    (unsigned long long)(limit - t0));
				calls++;
				/* Some time between calls: breakers
				 * half-open, budgets refill. */
				resil_manual_clock_advance(
				    &clk.mc, below(&r, 60));
			}
			resil_pipeline_free(p);
			resil_chaos_free(ch);
		}
	}
	assert_int_equal(calls, (uint64_t)scripts * 2 * CALLS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_property_every_call_ends),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

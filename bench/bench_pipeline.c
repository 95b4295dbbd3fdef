/*
 * The full pipeline on its success path: no mock stage, a fallback chain
 * (a user handler), retry, and a breaker with a count window of 100;
 * without and with cache recording; and with timing (a slow-call
 * threshold and a timeout), which needs the call's duration. Manual clock.
 * pipeline/success passes a method handle to the blocking driver;
 * pipeline/async_success steps the call machine by hand with the same
 * handle; pipeline/success_by_name names the method per call.
 *
 * Issue 39's rows, what users run:
 *   pipeline/success_seed   the seeds' configuration: a timeout, a count
 *                           window with a slow-call rate, retry, the cache
 *                           recording every success (with an age limit), a
 *                           `fail:` mock; manual clock.
 *   pipeline/success_timed_sysclock  success_timed on the default system
 *                           clock (ns: compare with success_timed plus two
 *                           baseline/clock_monotonic).
 *   pipeline/success_timed_tsc  the same on resil_clock_fast() (the TSC
 *                           where it is invariant, docs/clock.md).
 *   pipeline/async_success_timed  the call machine stepped by hand with a
 *                           timeout (success_timed's configuration).
 *   pipeline/cache_answer   the breaker forced OPEN: every call is refused
 *                           and the cache answers with its age.
 *
 * Issue 43's row:
 *   pipeline/cache_fresh_hit  the seeds' configuration with getStock's
 *                           read-through (cache.fresh = 60 s): one success
 *                           recorded, then every call is answered by the
 *                           fresh value with its age, no call.
 *   pipeline/coalesce_follower  getStock coalescing: a helper thread's
 *                           call leads (its dependency answers once a
 *                           follower waits); each measured call is a
 *                           follower of it: the join, the wait on the
 *                           manual clock, the copy of the answer (and the
 *                           bench thread's spin until the next leader is
 *                           in flight).
 *   pipeline/async_coalesce_follower  the same follower as a call
 *                           machine: its start answers WAIT, the leader's
 *                           end calls its wake hook, its step is DONE with
 *                           the copy (and the spins on both flags).
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <resil/pipeline.h>

#include "bench.h"

typedef struct pb {
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *m; /* getStock, resolved once */
} pb;

static int
user_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(8);
	return 0;
}

static resil_verdict
never(void *ctx, const resil_args *args, const resil_failure *f,
    resil_result *out)
{
	(void)ctx;
	(void)args;
	(void)f;
	(void)out;
	return RESIL_FALLBACK_PASS;
}

enum { CLK_MANUAL = 0, CLK_SYSTEM = 1, CLK_FAST = 2 };

static void *
setup_on(int cached, int timed, int clk, const char *mock)
{
	pb *x = calloc(1, sizeof(*x));
	resil_pipeline_config cfg;

	resil_manual_clock_init(&x->mc, 1);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = clk == CLK_MANUAL ? resil_manual_clock_hook(&x->mc)
	    : clk == CLK_FAST         ? resil_clock_fast()
	                              : NULL;
	cfg.mock = mock;
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.cache_enabled = cached;
	if (cached)
		cfg.cache.max_age = 60 * RESIL_NS_PER_SEC;
	if (timed) {
		/* On the manual clock every call takes 0 ticks; on a system
		 * clock the thresholds are Dubbo's default timeout and half
		 * of it, far above the call's few ns. */
		cfg.breaker.slow_threshold_ns =
		    clk == CLK_MANUAL ? 1000 : 500 * RESIL_NS_PER_MS;
		cfg.breaker.slow_rate_pct = 80;
		cfg.timeout_ns = clk == CLK_MANUAL ? 1000 : RESIL_NS_PER_SEC;
	}
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK)
		abort();
	if (resil_pipeline_add_handler(x->p, never, NULL) != RESIL_OK ||
	    resil_pipeline_method(x->p, "getStock", &x->m) != RESIL_OK)
		abort();
	return x;
}

static void *
setup(int cached, int timed)
{
	return setup_on(cached, timed, CLK_MANUAL, NULL);
}

static void *
setup_success(void)
{
	return setup(0, 0);
}

static void *
setup_seed(void)
{
	return setup_on(1, 1, CLK_MANUAL, "fail:return null");
}

static void *
setup_timed_sysclock(void)
{
	return setup_on(0, 1, CLK_SYSTEM, NULL);
}

static void *
setup_timed_fast(void)
{
	return setup_on(0, 1, CLK_FAST, NULL);
}

/* The seeds' configuration, one success recorded in the cache, then the
 * breaker forced OPEN: every call is refused and the cache answers. */
static void *
setup_cache_answer(void)
{
	pb *x = setup_seed();
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;

	if (resil_pipeline_call_method(
	        x->p, x->m, &args, user_fn, NULL, &r) != RESIL_OK)
		abort();
	resil_result_free(&r);
	resil_manual_clock_advance(&x->mc, RESIL_NS_PER_SEC);
	if (resil_breaker_force_open(resil_pipeline_breaker(x->p, "getStock")) !=
	    RESIL_OK)
		abort();
	return x;
}

/* The seeds' configuration, getStock read-through (fresh for 60 s), one
 * success recorded, the clock a second on. */
static void *
setup_cache_fresh(void)
{
	pb *x = calloc(1, sizeof(*x));
	resil_pipeline_config cfg;
	resil_method_config mcfg;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;

	resil_manual_clock_init(&x->mc, 1);
	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.cache_fresh_ns = 60 * RESIL_NS_PER_SEC;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.mock = "fail:return null";
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.breaker.slow_threshold_ns = 1000;
	cfg.breaker.slow_rate_pct = 80;
	cfg.timeout_ns = 1000;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.cache_enabled = 1;
	cfg.cache.max_age = 60 * RESIL_NS_PER_SEC;
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK ||
	    resil_pipeline_add_handler(x->p, never, NULL) != RESIL_OK ||
	    resil_pipeline_method(x->p, "getStock", &x->m) != RESIL_OK ||
	    resil_pipeline_call_method(x->p, x->m, &args, user_fn, NULL, &r) !=
	        RESIL_OK)
		abort();
	resil_result_free(&r);
	resil_manual_clock_advance(&x->mc, RESIL_NS_PER_SEC);
	return x;
}

static void *
setup_cached(void)
{
	return setup(1, 0);
}

static void *
setup_timed(void)
{
	return setup(0, 1);
}

static void
teardown(void *ctx)
{
	pb *x = ctx;

	resil_pipeline_free(x->p);
	free(x);
}

/* The blocking driver with a method handle. */
static uint64_t
run(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_pipeline_call_method(
		        x->p, x->m, &args, user_fn, NULL, &r) == RESIL_OK)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

/* The cache answers (with its age): the sum of the ages read. */
static uint64_t
run_cache_answer(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_pipeline_call_method(
		        x->p, x->m, &args, user_fn, NULL, &r) == RESIL_OK &&
		    r.source == RESIL_SOURCE_CACHE)
			n += r.age + (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

/* The blocking driver by name (one method lookup per call). */
static uint64_t
run_by_name(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_pipeline_call(x->p, &args, user_fn, NULL, &r) ==
		    RESIL_OK)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

/* The machine stepped by hand, as an event loop would: start (RUN),
 * run the attempt, report its answer, step (DONE). */
static uint64_t
run_async(void *ctx, uint64_t iters)
{
	pb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	resil_call call;
	resil_call_next st;
	resil_value v;
	uint64_t i, n = 0, now;
	int rc;

	for (i = 0; i < iters; i++) {
		now = resil_manual_clock_now(&x->mc);
		resil_call_start(&call, x->p, x->m, &args, &r, now, &st);
		while (st.action != RESIL_CALL_DONE) {
			resil_value_init(&v);
			rc = user_fn(NULL, &args, &v);
			resil_call_report(&call, st.attempt, rc, &v, now);
			resil_call_step(&call, now, &st);
		}
		if (r.err == RESIL_OK)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

/* ---- pipeline/coalesce_follower (issue 43) ---- */

typedef struct cb {
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *m;
	pthread_t leader;
	int in_dep; /* atomic: the leader's call is in its dependency */
	int stop;   /* atomic */
	int async;  /* the followers are call machines */
	int joined; /* atomic: async: a follower waits (its start said so) */
	int woken;  /* atomic: async: the follower's hook was called */
} cb;

/* The leader's dependency: in flight until a follower waits. */
static int
lead_fn(void *ctx, const resil_args *args, resil_value *out)
{
	cb *x = ctx;

	(void)args;
	__atomic_store_n(&x->in_dep, 1, __ATOMIC_SEQ_CST);
	while ((x->async ? !__atomic_load_n(&x->joined, __ATOMIC_SEQ_CST)
	                 : resil_manual_clock_waiters(&x->mc) == 0) &&
	    !__atomic_load_n(&x->stop, __ATOMIC_SEQ_CST))
		sched_yield();
	__atomic_store_n(&x->joined, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&x->in_dep, 0, __ATOMIC_SEQ_CST);
	*out = resil_value_int(8);
	return 0;
}

static void *
leader_loop(void *arg)
{
	cb *x = arg;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;

	while (!__atomic_load_n(&x->stop, __ATOMIC_SEQ_CST)) {
		(void)resil_pipeline_call_method(
		    x->p, x->m, &args, lead_fn, x, &r);
		resil_result_free(&r);
	}
	return NULL;
}

static void *
setup_coalesce_as(int async)
{
	cb *x = calloc(1, sizeof(*x));
	resil_pipeline_config cfg;
	resil_method_config mcfg;

	x->async = async;
	resil_manual_clock_init(&x->mc, 1);
	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.coalesce_max_waiters = 16;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	if (resil_pipeline_new(&x->p, &cfg, NULL) != RESIL_OK ||
	    resil_pipeline_method(x->p, "getStock", &x->m) != RESIL_OK ||
	    pthread_create(&x->leader, NULL, leader_loop, x) != 0)
		abort();
	return x;
}

static void *
setup_coalesce(void)
{
	return setup_coalesce_as(0);
}

static void *
setup_coalesce_async(void)
{
	return setup_coalesce_as(1);
}

static void
teardown_coalesce(void *ctx)
{
	cb *x = ctx;

	__atomic_store_n(&x->stop, 1, __ATOMIC_SEQ_CST);
	(void)pthread_join(x->leader, NULL);
	resil_pipeline_free(x->p);
	free(x);
}

/* Each call once the leader is in flight: a follower (attempts 0). */
static uint64_t
run_coalesce(void *ctx, uint64_t iters)
{
	cb *x = ctx;
	resil_args args = { "getStock", "12345678", 8 };
	resil_result r;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		while (!__atomic_load_n(&x->in_dep, __ATOMIC_SEQ_CST))
			sched_yield();
		if (resil_pipeline_call_method(
		        x->p, x->m, &args, user_fn, NULL, &r) == RESIL_OK &&
		    r.attempts == 0)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

static void
coal_wake(void *ctx)
{
	cb *x = ctx;

	__atomic_store_n(&x->woken, 1, __ATOMIC_SEQ_CST);
}

/* The same with the call machine: the start answers WAIT (it follows),
 * the leader's end calls the hook, the step says DONE with the copy. */
static uint64_t
run_coalesce_async(void *ctx, uint64_t iters)
{
	cb *x = ctx;
	resil_invocation inv;
	resil_call call;
	resil_call_next st;
	resil_result r;
	uint64_t i, n = 0;

	resil_invocation_init(&inv, "getStock");
	inv.args.data = "12345678";
	inv.args.len = 8;
	inv.wake = coal_wake;
	inv.wake_ctx = x;
	memset(&call, 0, sizeof(call));
	for (i = 0; i < iters; i++) {
		while (!__atomic_load_n(&x->in_dep, __ATOMIC_SEQ_CST))
			sched_yield();
		__atomic_store_n(&x->woken, 0, __ATOMIC_SEQ_CST);
		resil_call_start_ex(&call, x->p, x->m, &inv, &r, 1, &st);
		if (st.action == RESIL_CALL_WAIT) {
			__atomic_store_n(&x->joined, 1, __ATOMIC_SEQ_CST);
			while (!__atomic_load_n(&x->woken, __ATOMIC_SEQ_CST))
				sched_yield();
		}
		while (st.action != RESIL_CALL_DONE) {
			if (st.action == RESIL_CALL_RUN) {
				resil_value v = resil_value_int(8);

				resil_call_report(&call, st.attempt, 0, &v, 1);
			}
			resil_call_step(&call, 1, &st);
		}
		if (r.err == RESIL_OK && r.attempts == 0)
			n += (uint64_t)r.value.u.i;
		resil_result_free(&r);
	}
	return n;
}

const resil_bench resil_bench_pipeline[] = {
	{ "pipeline/success", setup_success, run, teardown },
	{ "pipeline/async_success", setup_success, run_async, teardown },
	{ "pipeline/success_by_name", setup_success, run_by_name, teardown },
	{ "pipeline/success_cached", setup_cached, run, teardown },
	{ "pipeline/success_timed", setup_timed, run, teardown },
	{ "pipeline/success_seed", setup_seed, run, teardown },
	{ "pipeline/success_timed_sysclock", setup_timed_sysclock, run,
	    teardown },
	{ "pipeline/success_timed_tsc", setup_timed_fast, run, teardown },
	{ "pipeline/async_success_timed", setup_timed, run_async, teardown },
	{ "pipeline/cache_answer", setup_cache_answer, run_cache_answer,
	    teardown },
	{ "pipeline/cache_fresh_hit", setup_cache_fresh, run_cache_answer,
	    teardown },
	{ "pipeline/coalesce_follower", setup_coalesce, run_coalesce,
	    teardown_coalesce },
	{ "pipeline/async_coalesce_follower", setup_coalesce_async,
	    run_coalesce_async, teardown_coalesce },
	{ NULL, NULL, NULL, NULL },
};

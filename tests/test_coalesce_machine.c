/*
 * Issue 43's coalescing in the call machine, through the public API on
 * the manual clock: the machine is stepped by hand (no threads but where
 * a blocking call must block). A follower answers WAIT until the leader's
 * answer and is woken through its invocation's hook; it gets a copy with
 * its own provenance; a cancelled leader hands the call over to the next
 * waiter; a cancelled follower leaves the queue; the bound per key; a
 * machine call without a hook does not follow; a follower's own deadline
 * (the method's timeout) ends it with RESIL_E_TIMEOUT at exactly
 * start + timeout + 1, or the fallback chain answers; both drivers mixed
 * (a blocking leader with machine followers, and the reverse, with a
 * hand-over to a blocking follower).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <resil/call.h>
#include <resil/pipeline.h>

#define T0 1000

/* A caller's call: its invocation with a wake hook that counts. */
typedef struct mcall {
	resil_call call;
	resil_invocation inv;
	resil_result r;
	resil_call_next st;
	int woken; /* atomic */
} mcall;

static void
wake_hook(void *ctx)
{
	mcall *m = ctx;

	__atomic_fetch_add(&m->woken, 1, __ATOMIC_SEQ_CST);
}

static int
woken(mcall *m)
{
	return __atomic_load_n(&m->woken, __ATOMIC_SEQ_CST);
}

typedef struct opts {
	uint32_t max_waiters;
	uint64_t timeout;
	int cache;
	uint32_t attempts; /* retry: max attempts (0: no retry) */
	uint64_t backoff;
	const resil_clock *clock; /* NULL: the manual clock's */
} opts;

static resil_pipeline *
mk(resil_manual_clock *mc, const opts *o)
{
	resil_pipeline_config cfg;
	resil_method_config mcfg;
	resil_pipeline *p = NULL;
	resil_diag diag;

	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.coalesce_max_waiters = o->max_waiters;
	mcfg.timeout_ns = o->timeout;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = o->clock != NULL ? o->clock : resil_manual_clock_hook(mc);
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	if (o->cache) {
		cfg.cache_enabled = 1;
		cfg.cache.max_age = 1000000;
	}
	if (o->attempts != 0) {
		cfg.retry_enabled = 1;
		cfg.retry.max_attempts = o->attempts;
		cfg.retry.backoff = RESIL_BACKOFF_FIXED;
		cfg.retry.base_delay_ns = o->backoff;
		cfg.retry.max_delay_ns = o->backoff;
	}
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	return p;
}

/* Start m: getStock(key) with a wake hook (hook 0: none, through
 * resil_call_start). */
static void
start(resil_pipeline *p, mcall *m, const char *key, int hook, uint64_t now)
{
	memset(m, 0, sizeof(*m));
	resil_invocation_init(&m->inv, "getStock");
	m->inv.args.data = key;
	m->inv.args.len = strlen(key);
	if (hook) {
		m->inv.wake = wake_hook;
		m->inv.wake_ctx = m;
		assert_int_equal(resil_call_start_ex(&m->call, p, NULL, &m->inv,
		                     &m->r, now, &m->st),
		    RESIL_OK);
	} else {
		assert_int_equal(resil_call_start(&m->call, p, NULL, &m->inv.args,
		                     &m->r, now, &m->st),
		    RESIL_OK);
	}
}

static void
step(mcall *m, uint64_t now)
{
	assert_int_equal(resil_call_step(&m->call, now, &m->st), RESIL_OK);
}

/* m's attempt answers rc (value v when rc is 0) at now, then a step. */
static void
answer(mcall *m, int rc, int64_t v, uint64_t now)
{
	resil_value val = rc == 0 ? resil_value_int(v) : resil_value_null();

	assert_int_equal(m->st.action, RESIL_CALL_RUN);
	assert_int_equal(
	    resil_call_report(&m->call, m->st.attempt, rc, &val, now), RESIL_OK);
	step(m, now);
}

static void
expect_wait(const mcall *m, uint64_t until)
{
	assert_int_equal(m->st.action, RESIL_CALL_WAIT);
	assert_true(m->st.until == until);
}

/* m is DONE with a copy of the leader's 42 (attempts 0, "coalesced"). */
static void
expect_copy(mcall *m, int64_t v)
{
	assert_int_equal(m->st.action, RESIL_CALL_DONE);
	assert_int_equal(m->r.err, RESIL_OK);
	assert_int_equal(m->r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(m->r.value.type, RESIL_VALUE_INT);
	assert_true(m->r.value.u.i == v);
	assert_int_equal(m->r.attempts, 0);
	assert_string_equal(m->r.message, "coalesced");
	resil_result_free(&m->r);
}

static uint64_t
calls_of(resil_pipeline *p)
{
	resil_pipeline_metrics mx;

	assert_int_equal(resil_pipeline_get_metrics(p, &mx), RESIL_OK);
	return mx.calls;
}

static void
test_coalesce_machine_followers_get_a_copy(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f1, f2, other;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	assert_int_equal(l.st.action, RESIL_CALL_RUN);
	start(p, &f1, "sku-1", 1, T0 + 1);
	expect_wait(&f1, UINT64_MAX); /* no timeout: only the leader */
	start(p, &f2, "sku-1", 1, T0 + 2);
	expect_wait(&f2, UINT64_MAX);
	start(p, &other, "sku-2", 1, T0 + 2); /* another key: its own */
	assert_int_equal(other.st.action, RESIL_CALL_RUN);
	/* A follower has nothing out; stepping early waits on. */
	assert_int_equal(resil_call_outstanding(&f1.call), 0);
	assert_int_equal(
	    resil_call_report(&f1.call, 1, 0, NULL, T0 + 3), RESIL_E_MISUSE);
	step(&f1, T0 + 3);
	expect_wait(&f1, UINT64_MAX);
	assert_int_equal(woken(&f1) + woken(&f2), 0);

	answer(&l, 0, 42, T0 + 10);
	assert_int_equal(l.st.action, RESIL_CALL_DONE);
	assert_int_equal(l.r.attempts, 1);
	assert_string_equal(l.r.message, "");
	/* Each follower's hook once, on the leader's step. */
	assert_int_equal(woken(&f1), 1);
	assert_int_equal(woken(&f2), 1);
	step(&f2, T0 + 11);
	expect_copy(&f2, 42);
	step(&f1, T0 + 11);
	expect_copy(&f1, 42);
	answer(&other, 0, 7, T0 + 12);
	resil_result_free(&other.r);
	resil_result_free(&l.r);
	assert_true(calls_of(p) == 4); /* every caller's call counts */

	/* The key is free again: the next call leads. */
	start(p, &l, "sku-1", 1, T0 + 20);
	assert_int_equal(l.st.action, RESIL_CALL_RUN);
	answer(&l, 0, 43, T0 + 21);
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

static void
test_coalesce_machine_leader_failure_fails_the_followers(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	start(p, &f, "sku-1", 1, T0);
	expect_wait(&f, UINT64_MAX);
	answer(&l, 5, 0, T0 + 10);
	assert_int_equal(l.r.err, RESIL_E_CALL);
	assert_int_equal(woken(&f), 1);
	step(&f, T0 + 10);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_E_CALL);
	assert_int_equal(f.r.rc, 5);
	assert_int_equal(f.r.attempts, 0);
	assert_non_null(strstr(f.r.message, "coalesced: "));
	resil_result_free(&f.r);
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

/* The leader is cancelled: the first follower leads (its own attempt),
 * the second follows it; the old leader's late answer is dropped. */
static void
test_coalesce_machine_cancelled_leader_hands_over(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f1, f2, f3;
	resil_value late = resil_value_int(1);
	uint32_t id;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	id = l.st.attempt;
	start(p, &f1, "sku-1", 1, T0 + 1);
	start(p, &f2, "sku-1", 1, T0 + 2);
	start(p, &f3, "sku-1", 1, T0 + 3);
	assert_int_equal(resil_call_cancel(&l.call, T0 + 5), RESIL_OK);
	assert_int_equal(l.r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(woken(&f1), 1); /* the lead, to the first */
	assert_int_equal(woken(&f2) + woken(&f3), 0);
	assert_int_equal(
	    resil_call_report(&l.call, id, 0, &late, T0 + 6), RESIL_OK);

	/* f2 cancelled meanwhile: it leaves the new leader's queue. */
	assert_int_equal(resil_call_cancel(&f2.call, T0 + 6), RESIL_OK);
	assert_int_equal(f2.r.err, RESIL_E_UNAVAILABLE);
	step(&f3, T0 + 6);
	expect_wait(&f3, UINT64_MAX);
	step(&f1, T0 + 7);
	assert_int_equal(f1.st.action, RESIL_CALL_RUN); /* it calls */
	answer(&f1, 0, 42, T0 + 9);
	assert_int_equal(f1.st.action, RESIL_CALL_DONE);
	assert_int_equal(f1.r.attempts, 1);
	assert_int_equal(woken(&f3), 1);
	assert_int_equal(woken(&f2), 0);
	step(&f3, T0 + 9);
	expect_copy(&f3, 42);
	resil_result_free(&f1.r);
	resil_result_free(&l.r);
	resil_result_free(&f2.r);
	resil_pipeline_free(p);
}

/* Handed the lead and cancelled before it was stepped: the lead goes on
 * to the next; a cancelled leader with no follower leaves nothing. */
static void
test_coalesce_machine_hand_over_twice(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f1, f2, n;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	start(p, &f1, "sku-1", 1, T0);
	start(p, &f2, "sku-1", 1, T0);
	assert_int_equal(resil_call_cancel(&l.call, T0 + 1), RESIL_OK);
	assert_int_equal(resil_call_cancel(&f1.call, T0 + 2), RESIL_OK);
	assert_int_equal(woken(&f2), 1);
	step(&f2, T0 + 3);
	assert_int_equal(f2.st.action, RESIL_CALL_RUN);
	assert_int_equal(resil_call_cancel(&f2.call, T0 + 4), RESIL_OK);
	/* Nobody leads sku-1 now: a new call leads. */
	start(p, &n, "sku-1", 1, T0 + 5);
	assert_int_equal(n.st.action, RESIL_CALL_RUN);
	answer(&n, 0, 9, T0 + 6);
	assert_int_equal(n.r.attempts, 1);
	resil_result_free(&n.r);
	resil_result_free(&l.r);
	resil_result_free(&f1.r);
	resil_result_free(&f2.r);
	resil_pipeline_free(p);
}

/* A cancelled follower leaves the queue: the leader's answer skips it,
 * and a cancel after the copy frees the copy (ASan: no leak). */
static void
test_coalesce_machine_cancel_follower_leaves(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f1, f2;
	resil_value v;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	start(p, &f1, "sku-1", 1, T0);
	start(p, &f2, "sku-1", 1, T0);
	assert_int_equal(resil_call_cancel(&f1.call, T0 + 1), RESIL_OK);
	assert_int_equal(f1.r.err, RESIL_E_UNAVAILABLE);
	assert_string_equal(f1.r.message, "the call was cancelled");
	assert_int_equal(
	    resil_call_step(&f1.call, T0 + 1, &f1.st), RESIL_E_MISUSE);
	assert_int_equal(resil_value_string(&v, "a string, copied", 16, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_call_report(&l.call, l.st.attempt, 0, &v, T0 + 2), RESIL_OK);
	step(&l, T0 + 2);
	assert_int_equal(woken(&f1), 0);
	assert_int_equal(woken(&f2), 1);
	/* Served, then cancelled before its step: the copy goes. */
	assert_int_equal(resil_call_cancel(&f2.call, T0 + 3), RESIL_OK);
	assert_int_equal(f2.r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(f2.r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

/* Bound 1: the second identical call goes on its own; a machine call
 * without a wake hook never follows (it may lead). */
static void
test_coalesce_machine_bound_and_no_hook(void **state)
{
	static const opts o = { 1, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f, own, nohook, f2;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 0, T0); /* no hook: it leads all the same */
	assert_int_equal(l.st.action, RESIL_CALL_RUN);
	start(p, &nohook, "sku-1", 0, T0);
	assert_int_equal(nohook.st.action, RESIL_CALL_RUN); /* its own */
	start(p, &f, "sku-1", 1, T0);
	expect_wait(&f, UINT64_MAX);
	start(p, &own, "sku-1", 1, T0); /* past the bound */
	assert_int_equal(own.st.action, RESIL_CALL_RUN);
	answer(&own, 0, 2, T0 + 1);
	assert_int_equal(own.r.attempts, 1);
	answer(&nohook, 0, 3, T0 + 1);
	answer(&l, 0, 1, T0 + 2);
	assert_int_equal(woken(&f), 1);
	step(&f, T0 + 2);
	expect_copy(&f, 1);
	/* The bound is per key and freed with the waiter. */
	start(p, &l, "sku-1", 1, T0 + 3);
	start(p, &f2, "sku-1", 1, T0 + 3);
	expect_wait(&f2, UINT64_MAX);
	answer(&l, 0, 4, T0 + 4);
	step(&f2, T0 + 4);
	expect_copy(&f2, 4);
	resil_result_free(&l.r);
	resil_result_free(&own.r);
	resil_result_free(&nohook.r);
	resil_pipeline_free(p);
}

/* A follower's own deadline: the method's timeout from its start, the
 * edge of an attempt's (late when now - start > timeout). The leader is
 * in its retry backoff meanwhile and ends on its own. */
static void
test_coalesce_machine_follower_deadline(void **state)
{
	static const opts o = { 8, 50, 0, 2, 100, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	assert_int_equal(l.st.action, RESIL_CALL_RUN);
	assert_true(l.st.deadline == T0 + 50);
	start(p, &f, "sku-1", 1, T0 + 5);
	expect_wait(&f, T0 + 5 + 50 + 1);
	answer(&l, 5, 0, T0 + 10); /* fails: a backoff of 100 */
	expect_wait(&l, T0 + 110);
	step(&f, T0 + 55);
	expect_wait(&f, T0 + 56);
	assert_int_equal(woken(&f), 0);
	step(&f, T0 + 56);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_E_TIMEOUT);
	assert_int_equal(f.r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(f.r.attempts, 0);
	assert_string_equal(
	    f.r.message, "coalesced: timeout after 50 ns waiting for the leader");
	resil_result_free(&f.r);
	step(&l, T0 + 110);
	answer(&l, 0, 42, T0 + 120);
	assert_int_equal(l.r.err, RESIL_OK);
	assert_int_equal(l.r.attempts, 2);
	assert_int_equal(woken(&f), 0); /* it left at its deadline */
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

/* A follower that times out is answered by the fallback chain as any
 * timeout: here the cache's value of its key. */
static void
test_coalesce_machine_follower_deadline_cache_answers(void **state)
{
	static const opts o = { 8, 50, 1, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	mcall l, f;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	resil_manual_clock_set(&mc, T0 + 1); /* the cache reads it */
	answer(&l, 0, 7, T0 + 1); /* cached */
	resil_result_free(&l.r);
	start(p, &l, "sku-1", 1, T0 + 100);
	start(p, &f, "sku-1", 1, T0 + 100);
	expect_wait(&f, T0 + 151);
	resil_manual_clock_set(&mc, T0 + 151);
	step(&f, T0 + 151);
	assert_int_equal(f.st.action, RESIL_CALL_DONE);
	assert_int_equal(f.r.err, RESIL_OK);
	assert_int_equal(f.r.source, RESIL_SOURCE_CACHE);
	assert_true(f.r.value.u.i == 7);
	assert_true(f.r.age == 150);
	assert_int_equal(f.r.cause, RESIL_E_TIMEOUT);
	resil_result_free(&f.r);
	assert_int_equal(resil_call_cancel(&l.call, T0 + 152), RESIL_OK);
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

/* ---- both drivers ---- */

typedef struct blk {
	resil_pipeline *p;
	resil_manual_clock *mc;
	int calls; /* atomic: the blocking callers' dependency calls */
	resil_err err;
	resil_result r;
	int done; /* atomic */
} blk;

/* A blocking caller's dependency: waits 100 ticks on the manual clock,
 * then answers 42. */
static int
slow_fn(void *ctx, const resil_args *args, resil_value *out)
{
	blk *b = ctx;
	uint32_t word = 0;
	const resil_clock *ck = resil_manual_clock_hook(b->mc);
	uint64_t until = resil_manual_clock_now(b->mc) + 100;

	(void)args;
	__atomic_fetch_add(&b->calls, 1, __ATOMIC_SEQ_CST);
	while (resil_manual_clock_now(b->mc) < until)
		(void)resil_clock_wait(ck, &word, 0, until);
	*out = resil_value_int(42);
	return 0;
}

static void *
blocking_call(void *arg)
{
	blk *b = arg;
	resil_args a = { "getStock", "sku-1", 5 };

	resil_result_init(&b->r);
	b->err = resil_pipeline_call(b->p, &a, slow_fn, b, &b->r);
	__atomic_store_n(&b->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void
wait_waiters(resil_manual_clock *mc, uint32_t n)
{
	while (resil_manual_clock_waiters(mc) < n)
		sched_yield();
}

/* A blocking leader, machine followers: their hooks fire on the
 * leader's thread. */
static void
test_coalesce_mixed_blocking_leader_machine_followers(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	blk b;
	pthread_t t;
	mcall f1, f2;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	memset(&b, 0, sizeof(b));
	b.p = p;
	b.mc = &mc;
	assert_int_equal(pthread_create(&t, NULL, blocking_call, &b), 0);
	wait_waiters(&mc, 1); /* the leader in its dependency */
	start(p, &f1, "sku-1", 1, T0);
	expect_wait(&f1, UINT64_MAX);
	start(p, &f2, "sku-1", 1, T0);
	resil_manual_clock_advance(&mc, 100);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(b.err, RESIL_OK);
	assert_int_equal(b.r.attempts, 1);
	assert_int_equal(woken(&f1), 1);
	assert_int_equal(woken(&f2), 1);
	step(&f1, T0 + 100);
	expect_copy(&f1, 42);
	step(&f2, T0 + 100);
	expect_copy(&f2, 42);
	assert_int_equal(b.calls, 1);
	resil_result_free(&b.r);
	resil_pipeline_free(p);
}

/* A machine leader, blocking followers: they block on the clock's wait
 * until the leader's step; then the leader is cancelled with a blocking
 * follower queued, which leads and calls the dependency itself. */
static void
test_coalesce_mixed_machine_leader_blocking_followers(void **state)
{
	static const opts o = { 8, 0, 0, 0, 0, NULL };
	resil_manual_clock mc;
	resil_pipeline *p;
	blk b[2];
	pthread_t t[2];
	mcall l;
	int i;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0);
	memset(b, 0, sizeof(b));
	for (i = 0; i < 2; i++) {
		b[i].p = p;
		b[i].mc = &mc;
		assert_int_equal(
		    pthread_create(&t[i], NULL, blocking_call, &b[i]), 0);
	}
	wait_waiters(&mc, 2);
	answer(&l, 0, 42, T0 + 1);
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(b[i].err, RESIL_OK);
		assert_int_equal(b[i].r.attempts, 0);
		assert_true(b[i].r.value.u.i == 42);
		assert_string_equal(b[i].r.message, "coalesced");
		assert_int_equal(b[i].calls, 0);
		resil_result_free(&b[i].r);
	}
	resil_result_free(&l.r);

	/* The hand-over to a blocking follower. */
	start(p, &l, "sku-1", 1, T0 + 2);
	memset(b, 0, sizeof(b));
	b[0].p = p;
	b[0].mc = &mc;
	assert_int_equal(pthread_create(&t[0], NULL, blocking_call, &b[0]), 0);
	wait_waiters(&mc, 1);
	assert_int_equal(resil_call_cancel(&l.call, T0 + 3), RESIL_OK);
	/* It leads: in its dependency, which waits 100 ticks. */
	while (__atomic_load_n(&b[0].calls, __ATOMIC_SEQ_CST) == 0)
		sched_yield();
	wait_waiters(&mc, 1);
	resil_manual_clock_advance(&mc, 100);
	assert_int_equal(pthread_join(t[0], NULL), 0);
	assert_int_equal(b[0].err, RESIL_OK);
	assert_int_equal(b[0].r.attempts, 1);
	assert_true(b[0].r.value.u.i == 42);
	resil_result_free(&b[0].r);
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

/* A clock that records the deadline of each wait (the manual clock's
 * otherwise). */
typedef struct rec_clock {
	resil_manual_clock *mc;
	resil_clock hook;
	uint64_t last_deadline; /* atomic */
} rec_clock;

static uint64_t
rec_now(void *ctx)
{
	rec_clock *rc = ctx;
	const resil_clock *m = resil_manual_clock_hook(rc->mc);

	return m->now(m->ctx);
}

static void
rec_sleep(uint64_t ns, void *ctx)
{
	rec_clock *rc = ctx;
	const resil_clock *m = resil_manual_clock_hook(rc->mc);

	m->sleep(ns, m->ctx);
}

static void
rec_wait(const uint32_t *word, uint32_t expected, uint64_t deadline,
    void *ctx)
{
	rec_clock *rc = ctx;
	const resil_clock *m = resil_manual_clock_hook(rc->mc);

	__atomic_store_n(&rc->last_deadline, deadline, __ATOMIC_SEQ_CST);
	m->wait(word, expected, deadline, m->ctx);
}

static void
rec_wake(const uint32_t *word, void *ctx)
{
	rec_clock *rc = ctx;
	const resil_clock *m = resil_manual_clock_hook(rc->mc);

	m->wake(word, m->ctx);
}

/* The blocking driver's follower: it blocks until exactly its deadline
 * (start + timeout + 1) and ends with RESIL_E_TIMEOUT. */
static void
test_coalesce_blocking_follower_deadline(void **state)
{
	resil_manual_clock mc;
	rec_clock rc;
	opts o = { 8, 50, 0, 0, 0, NULL };
	resil_pipeline *p;
	blk b;
	pthread_t t;
	mcall l;

	(void)state;
	resil_manual_clock_init(&mc, T0);
	memset(&rc, 0, sizeof(rc));
	rc.mc = &mc;
	rc.hook = *resil_manual_clock_hook(&mc);
	rc.hook.now = rec_now;
	rc.hook.now_word = NULL; /* every reading through rec_now */
	rc.hook.coarse = rec_now;
	rc.hook.sleep = rec_sleep;
	rc.hook.wait = rec_wait;
	rc.hook.wake = rec_wake;
	rc.hook.ctx = &rc;
	o.clock = &rc.hook;
	p = mk(&mc, &o);
	start(p, &l, "sku-1", 1, T0); /* the leader: a machine, not stepped */
	resil_manual_clock_advance(&mc, 5);
	memset(&b, 0, sizeof(b));
	b.p = p;
	b.mc = &mc;
	assert_int_equal(pthread_create(&t, NULL, blocking_call, &b), 0);
	wait_waiters(&mc, 1);
	assert_true(__atomic_load_n(&rc.last_deadline, __ATOMIC_SEQ_CST) ==
	    T0 + 5 + 50 + 1);
	resil_manual_clock_advance(&mc, 50); /* T0 + 55: one tick early */
	wait_waiters(&mc, 1);
	resil_manual_clock_advance(&mc, 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(b.err, RESIL_E_TIMEOUT);
	assert_int_equal(b.r.err, RESIL_E_TIMEOUT);
	assert_int_equal(b.r.attempts, 0);
	assert_int_equal(b.calls, 0);
	assert_string_equal(
	    b.r.message, "coalesced: timeout after 50 ns waiting for the leader");
	resil_result_free(&b.r);
	assert_int_equal(resil_call_cancel(&l.call, T0 + 56), RESIL_OK);
	resil_result_free(&l.r);
	resil_pipeline_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalesce_machine_followers_get_a_copy),
		cmocka_unit_test(
		    test_coalesce_machine_leader_failure_fails_the_followers),
		cmocka_unit_test(
		    test_coalesce_machine_cancelled_leader_hands_over),
		cmocka_unit_test(test_coalesce_machine_hand_over_twice),
		cmocka_unit_test(test_coalesce_machine_cancel_follower_leaves),
		cmocka_unit_test(test_coalesce_machine_bound_and_no_hook),
		cmocka_unit_test(test_coalesce_machine_follower_deadline),
		cmocka_unit_test(
		    test_coalesce_machine_follower_deadline_cache_answers),
		cmocka_unit_test(
		    test_coalesce_mixed_blocking_leader_machine_followers),
		cmocka_unit_test(
		    test_coalesce_mixed_machine_leader_blocking_followers),
		cmocka_unit_test(test_coalesce_blocking_follower_deadline),
	};

	return cmocka_run_group_tests_name("coalesce_machine", tests, NULL, NULL);
}

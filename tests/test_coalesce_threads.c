/*
 * Issue 43's coalescing under threads (run it under TSan too): threads
 * call a few keys of one coalescing method through both drivers at once;
 * machine callers (woken through their invocation's hook) cancel some of
 * their calls at random (seeded), as leaders (the call is handed over to
 * the next waiter, which may be a blocking caller) and as followers
 * (they leave the queue, or free the copy already made for them). Every
 * call that was not cancelled ends with the dependency's answer, copied
 * or its own; nothing leaks (ASan) and nothing hangs. The second test
 * gives the method a timeout and moves the clock from a ticker thread:
 * followers' deadlines race the leaders' answers (RESIL_E_TIMEOUT is
 * then an answer too).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <resil/call.h>
#include <resil/pipeline.h>

#define NTHREADS 4
#define ITERS 1500

static const char *const keys[] = { "k0", "k1", "k2" };

typedef struct shared {
	resil_pipeline *p;
	resil_manual_clock *mc;
	int timed;      /* the method has a timeout: TIMEOUT may answer */
	int timeouts;   /* atomic */
	int dep_calls;  /* atomic */
	int copies;     /* atomic: answers with attempts 0 */
	int cancels;    /* atomic */
	int handovers;  /* atomic: leaders cancelled with an attempt out */
} shared;

typedef struct worker {
	shared *sh;
	uint64_t rng;
	int woken; /* atomic: the hook's flag */
	int bad;
} worker;

static uint32_t
draw(worker *w, uint32_t n)
{
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	return (uint32_t)(w->rng % n);
}

static void
hook(void *ctx)
{
	worker *w = ctx;

	__atomic_store_n(&w->woken, 1, __ATOMIC_SEQ_CST);
}

/* The dependency: a few yields (so that others join), then "v42". */
static int
dep_fn(void *ctx, const resil_args *args, resil_value *out)
{
	shared *sh = ctx;
	int i;

	(void)args;
	__atomic_fetch_add(&sh->dep_calls, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < 3; i++)
		sched_yield();
	return resil_value_string(out, "v42", 3, NULL) == RESIL_OK ? 0 : 1;
}

static uint64_t
now_of(const shared *sh)
{
	return resil_manual_clock_now(sh->mc);
}

static int
good(const resil_result *r)
{
	return r->err == RESIL_OK && r->value.type == RESIL_VALUE_STRING &&
	    r->value.u.s.len == 3 && memcmp(r->value.u.s.ptr, "v42", 3) == 0;
}

static int
good_or_timeout(shared *sh, const resil_result *r)
{
	if (good(r))
		return 1;
	if (sh->timed && r->err == RESIL_E_TIMEOUT &&
	    r->value.type == RESIL_VALUE_NULL) {
		__atomic_fetch_add(&sh->timeouts, 1, __ATOMIC_SEQ_CST);
		return 1;
	}
	return 0;
}

static void
count_copy(worker *w, const resil_result *r)
{
	if (r->attempts == 0)
		__atomic_fetch_add(&w->sh->copies, 1, __ATOMIC_SEQ_CST);
}

static void
blocking_one(worker *w, const char *key)
{
	resil_args a = { "getStock", key, 2 };
	resil_result r;

	resil_result_init(&r);
	(void)resil_pipeline_call(w->sh->p, &a, dep_fn, w->sh, &r);
	if (!good_or_timeout(w->sh, &r))
		w->bad++;
	count_copy(w, &r);
	resil_result_free(&r);
}

static void
machine_one(worker *w, const char *key)
{
	resil_call c;
	resil_invocation inv;
	resil_result r;
	resil_call_next st;
	int cancelled = 0;

	memset(&c, 0, sizeof(c));
	resil_invocation_init(&inv, "getStock");
	inv.args.data = key;
	inv.args.len = 2;
	inv.wake = hook;
	inv.wake_ctx = w;
	__atomic_store_n(&w->woken, 0, __ATOMIC_SEQ_CST);
	if (resil_call_start_ex(&c, w->sh->p, NULL, &inv, &r, now_of(w->sh),
	        &st) != RESIL_OK) {
		w->bad++;
		return;
	}
	while (st.action != RESIL_CALL_DONE && !cancelled) {
		if (draw(w, 10) == 0) {
			if (st.action == RESIL_CALL_RUN)
				__atomic_fetch_add(
				    &w->sh->handovers, 1, __ATOMIC_SEQ_CST);
			if (resil_call_cancel(&c, now_of(w->sh)) != RESIL_OK)
				w->bad++;
			__atomic_fetch_add(&w->sh->cancels, 1, __ATOMIC_SEQ_CST);
			cancelled = 1;
			break;
		}
		if (st.action == RESIL_CALL_RUN) {
			resil_value v;
			int rc = dep_fn(w->sh, &inv.args, &v);

			if (resil_call_report(&c, st.attempt, rc, &v,
			        now_of(w->sh)) != RESIL_OK)
				w->bad++;
		} else {
			/* Woken, or its time (a deadline) has come. */
			while (!__atomic_load_n(&w->woken, __ATOMIC_SEQ_CST) &&
			    now_of(w->sh) < st.until)
				sched_yield();
			__atomic_store_n(&w->woken, 0, __ATOMIC_SEQ_CST);
		}
		if (resil_call_step(&c, now_of(w->sh), &st) != RESIL_OK)
			w->bad++;
	}
	if (cancelled) {
		if (r.err != RESIL_E_UNAVAILABLE ||
		    r.value.type != RESIL_VALUE_NULL)
			w->bad++;
	} else {
		if (!good_or_timeout(w->sh, &r))
			w->bad++;
		count_copy(w, &r);
	}
	resil_result_free(&r);
}

static void *
run_worker(void *arg)
{
	worker *w = arg;
	int i;

	for (i = 0; i < ITERS; i++) {
		const char *key = keys[draw(w, 3)];

		if (draw(w, 3) == 0)
			blocking_one(w, key);
		else
			machine_one(w, key);
	}
	return NULL;
}

typedef struct ticker {
	resil_manual_clock *mc;
	int stop; /* atomic */
} ticker;

/* Moves the clock a tick at a time until told to stop. */
static void *
tick(void *arg)
{
	ticker *tk = arg;

	while (!__atomic_load_n(&tk->stop, __ATOMIC_SEQ_CST)) {
		resil_manual_clock_advance(tk->mc, 1);
		sched_yield();
	}
	return NULL;
}

static void
run_all(uint64_t timeout)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_method_config mcfg;
	resil_diag diag;
	shared sh;
	worker ws[NTHREADS];
	pthread_t t[NTHREADS], tt;
	ticker tk = { NULL, 0 };
	resil_pipeline_metrics mx;
	int i, bad = 0;

	resil_manual_clock_init(&mc, 1000);
	memset(&mcfg, 0, sizeof(mcfg));
	mcfg.name = "getStock";
	mcfg.coalesce_max_waiters = 2; /* small: the bound is met too */
	mcfg.timeout_ns = timeout;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.methods = &mcfg;
	cfg.nmethods = 1;
	memset(&sh, 0, sizeof(sh));
	sh.mc = &mc;
	sh.timed = timeout != 0;
	assert_int_equal(resil_pipeline_new(&sh.p, &cfg, &diag), RESIL_OK);
	tk.mc = &mc;
	if (timeout != 0)
		assert_int_equal(pthread_create(&tt, NULL, tick, &tk), 0);
	for (i = 0; i < NTHREADS; i++) {
		memset(&ws[i], 0, sizeof(ws[i]));
		ws[i].sh = &sh;
		ws[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		assert_int_equal(
		    pthread_create(&t[i], NULL, run_worker, &ws[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		bad += ws[i].bad;
	}
	if (timeout != 0) {
		__atomic_store_n(&tk.stop, 1, __ATOMIC_SEQ_CST);
		assert_int_equal(pthread_join(tt, NULL), 0);
	}
	assert_int_equal(bad, 0);
	assert_int_equal(resil_pipeline_get_metrics(sh.p, &mx), RESIL_OK);
	assert_true(mx.calls == (uint64_t)NTHREADS * ITERS);
	assert_true(sh.dep_calls <= NTHREADS * ITERS);
	printf("coalesce threads (timeout %llu): %d calls, %d dependency "
	       "calls, %d copies, %d cancels (%d with an attempt out), %d "
	       "timeouts\n",
	    (unsigned long long)timeout, NTHREADS * ITERS, sh.dep_calls,
	    sh.copies, sh.cancels, sh.handovers, sh.timeouts);
	resil_pipeline_free(sh.p);
}

static void
test_coalesce_threads_hand_over(void **state)
{
	(void)state;
	run_all(0);
}

static void
test_coalesce_threads_deadlines(void **state)
{
	(void)state;
	run_all(3);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalesce_threads_hand_over),
		cmocka_unit_test(test_coalesce_threads_deadlines),
	};

	return cmocka_run_group_tests_name("coalesce_threads", tests, NULL, NULL);
}

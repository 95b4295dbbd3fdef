/*
 * Pipeline under concurrency: threads call one pipeline (breaker, retry,
 * cache, mock) while another thread flips mock specs with
 * resil_pipeline_set_mock. Checks that every answer is one the
 * configuration can give, and that the counters add up. Run under TSan in
 * CI (label "threads").
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <resil/pipeline.h>

#include "internal.h"

#define THREADS 4

/* A counting allocator that several threads may use (the hedging tests
 * free a late attempt's job on the executor's thread). */
typedef struct fail_alloc_lite {
	resil_allocator hook;
	int64_t live;
} fail_alloc_lite;

static void *
lite_alloc(size_t size, void *ctx)
{
	fail_alloc_lite *fa = ctx;
	void *p = malloc(size);

	if (p != NULL)
		__atomic_add_fetch(&fa->live, 1, __ATOMIC_SEQ_CST);
	return p;
}

static void
lite_free(void *ptr, size_t size, void *ctx)
{
	fail_alloc_lite *fa = ctx;

	(void)size;
	if (ptr != NULL)
		__atomic_sub_fetch(&fa->live, 1, __ATOMIC_SEQ_CST);
	free(ptr);
}

static void
fail_alloc_lite_init(fail_alloc_lite *fa)
{
	fa->hook.alloc = lite_alloc;
	fa->hook.free = lite_free;
	fa->hook.ctx = fa;
	fa->live = 0;
}

static int64_t
fail_alloc_lite_live(fail_alloc_lite *fa)
{
	return __atomic_load_n(&fa->live, __ATOMIC_SEQ_CST);
}
/* StockService with one declared method, getStock of type int. */
static void
stock_config(resil_pipeline_config *cfg, resil_method_config methods[1])
{
	resil_pipeline_config_init(cfg);
	memset(methods, 0, sizeof(*methods));
	methods[0].name = "getStock";
	methods[0].type = RESIL_TYPE_INT;
	cfg->methods = methods;
	cfg->nmethods = 1;
	cfg->service = "StockService";
}

#define CALLS 3000

typedef struct shared {
	resil_manual_clock mc;
	resil_pipeline *p;
	pthread_barrier_t go;
	uint64_t stop;
	uint64_t dep_calls; /* calls that reached the dependency */
} shared;

typedef struct worker {
	shared *sh;
	unsigned id;
	uint64_t live, mock, cache, unavailable, other, bad;
} worker;

/* Fails every third call; answers 8 otherwise. */
static int
dep(void *ctx, const resil_args *args, resil_value *out)
{
	shared *sh = ctx;
	uint64_t n = __atomic_add_fetch(&sh->dep_calls, 1, __ATOMIC_RELAXED);

	(void)args;
	if (n % 3 == 0)
		return -1;
	*out = resil_value_int(8);
	return 0;
}

static void *
caller(void *arg)
{
	worker *w = arg;
	shared *sh = w->sh;
	resil_args args = { "getStock", "k", 1 };
	resil_result r;
	int i;

	for (i = 0; i < CALLS; i++) {
		resil_err e;

		/* Each caller makes its first call before the switcher
		 * starts (no mock yet: a live answer), so that the check
		 * below does not depend on how the threads are scheduled. */
		if (i == 1)
			pthread_barrier_wait(&sh->go);
		e = resil_pipeline_call(sh->p, &args, dep, sh, &r);

		switch (r.source) {
		case RESIL_SOURCE_LIVE:
			w->live++;
			if (e != RESIL_OK || r.value.u.i != 8)
				w->bad++;
			break;
		case RESIL_SOURCE_MOCK:
			w->mock++;
			/* force:return 0 or fail:return 1 */
			if (e != RESIL_OK ||
			    (r.value.u.i != 0 && r.value.u.i != 1))
				w->bad++;
			break;
		case RESIL_SOURCE_CACHE:
			w->cache++;
			if (e != RESIL_OK || r.value.u.i != 8)
				w->bad++;
			break;
		case RESIL_SOURCE_UNAVAILABLE:
			w->unavailable++;
			break;
		default:
			w->other++;
			break;
		}
		resil_result_free(&r);
		if ((i & 15) == (int)w->id)
			resil_manual_clock_advance(&sh->mc, 1);
	}
	return NULL;
}

static void *
switcher(void *arg)
{
	shared *sh = arg;
	static const char *const specs[] = { "force:return 0", "fail:return 1",
		"false", NULL };
	unsigned n = 0;

	pthread_barrier_wait(&sh->go);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		/* Every 4th switch is a bad spec: refused, nothing changes. */
		const char *spec = (n % 4 == 3) ? "fail:" : specs[n % 4];
		resil_err e =
		    resil_pipeline_set_mock(sh->p, "getStock", spec, NULL);

		if ((n % 4 == 3) != (e == RESIL_E_INVAL))
			__atomic_store_n(&sh->stop, 2, __ATOMIC_RELEASE);
		n++;
		if (n > 2000)
			break;
	}
	/* End with the mock off, whoever finishes first: the callers'
	 * remaining calls are live, so "some call went live" does not hang
	 * on the scheduler (the last of the cycle was force:). */
	if (resil_pipeline_set_mock(sh->p, "getStock", "false", NULL) !=
	    RESIL_OK)
		__atomic_store_n(&sh->stop, 2, __ATOMIC_RELEASE);
	return NULL;
}

static void
test_pipeline_threads_calls_while_mock_switches(void **state)
{
	static shared sh;
	resil_method_config methods[1];
	resil_pipeline_config cfg;
	resil_pipeline_metrics m;
	pthread_t tid[THREADS], sw;
	worker wk[THREADS];
	uint64_t live = 0, mock = 0, cache = 0, unav = 0;
	int i;

	(void)state;
	memset(&sh, 0, sizeof(sh));
	resil_manual_clock_init(&sh.mc, 0);
	stock_config(&cfg, methods);
	cfg.clock = resil_manual_clock_hook(&sh.mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 3;
	cfg.breaker.open_wait_ns = 5;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 2;
	cfg.retry.base_delay_ns = 0;
	cfg.cache_enabled = 1;
	cfg.cache.max_age = 50;
	assert_int_equal(resil_pipeline_new(&sh.p, &cfg, NULL), RESIL_OK);
	pthread_barrier_init(&sh.go, NULL, THREADS + 1);
	for (i = 0; i < THREADS; i++) {
		memset(&wk[i], 0, sizeof(wk[i]));
		wk[i].sh = &sh;
		wk[i].id = (unsigned)i;
		assert_int_equal(
		    pthread_create(&tid[i], NULL, caller, &wk[i]), 0);
	}
	assert_int_equal(pthread_create(&sw, NULL, switcher, &sh), 0);
	for (i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		assert_int_equal(wk[i].bad, 0);
		assert_int_equal(wk[i].other, 0);
		live += wk[i].live;
		mock += wk[i].mock;
		cache += wk[i].cache;
		unav += wk[i].unavailable;
	}
	{
		uint64_t zero = 0;

		/* Stop the switcher, unless it already flagged a failure. */
		__atomic_compare_exchange_n(
		    &sh.stop, &zero, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	pthread_join(sw, NULL);
	pthread_barrier_destroy(&sh.go);
	assert_int_not_equal(sh.stop, 2); /* every switch answered as due */

	assert_int_equal(live + mock + cache + unav, THREADS * CALLS);
	assert_int_equal(resil_pipeline_get_metrics(sh.p, &m), RESIL_OK);
	assert_int_equal(m.calls, THREADS * CALLS);
	assert_int_equal(m.live, live);
	assert_int_equal(m.mock, mock);
	assert_int_equal(m.cache, cache);
	assert_int_equal(m.unavailable, unav);
	assert_true(live >= THREADS); /* at least the first calls */
	resil_pipeline_free(sh.p);
}

/* The call machine from several threads at once: each thread steps its
 * own calls by hand on one shared pipeline (a call is stepped by one
 * thread at a time; calls are independent). */
typedef struct mworker {
	resil_pipeline *p;
	pthread_barrier_t *go;
	uint64_t live, cache, other;
} mworker;

static void *
machine_caller(void *arg)
{
	mworker *w = arg;
	resil_args args = { "getStock", "k", 1 };
	resil_call call[2];
	resil_call_next st[2];
	resil_result r[2];
	resil_value v;
	int i, j;

	pthread_barrier_wait(w->go);
	for (i = 0; i < CALLS; i++) {
		/* Two calls interleaved: the first attempt of each fails
		 * on every fourth call, the retry answers. */
		for (j = 0; j < 2; j++)
			assert_int_equal(resil_call_start(&call[j], w->p, NULL,
			                     &args, &r[j], 0, &st[j]),
			    RESIL_OK);
		for (j = 0; j < 2; j++) {
			while (st[j].action != RESIL_CALL_DONE) {
				int fail = st[j].action == RESIL_CALL_RUN &&
				    st[j].attempt == 1 && (i & 3) == j;

				if (st[j].action == RESIL_CALL_RUN) {
					v = fail ? resil_value_null()
					         : resil_value_int(8);
					assert_int_equal(
					    resil_call_report(&call[j],
					        st[j].attempt, fail ? -1 : 0,
					        &v, 0),
					    RESIL_OK);
				}
				assert_int_equal(
				    resil_call_step(&call[j], 0, &st[j]),
				    RESIL_OK);
			}
			if (r[j].source == RESIL_SOURCE_LIVE &&
			    r[j].err == RESIL_OK && r[j].value.u.i == 8)
				w->live++;
			else
				w->other++;
			resil_result_free(&r[j]);
		}
	}
	return NULL;
}

static void
test_pipeline_threads_machine_calls_on_one_pipeline(void **state)
{
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_pipeline_metrics m;
	resil_retry_metrics rm;
	pthread_barrier_t go;
	pthread_t tid[THREADS];
	mworker wk[THREADS];
	uint64_t live = 0;
	int i;

	(void)state;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = NULL; /* a wait of 0 ticks needs no clock reading */
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 90;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 2;
	cfg.retry.base_delay_ns = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	pthread_barrier_init(&go, NULL, THREADS);
	for (i = 0; i < THREADS; i++) {
		memset(&wk[i], 0, sizeof(wk[i]));
		wk[i].p = p;
		wk[i].go = &go;
		assert_int_equal(
		    pthread_create(&tid[i], NULL, machine_caller, &wk[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(tid[i], NULL);
		assert_int_equal(wk[i].other, 0);
		live += wk[i].live;
	}
	pthread_barrier_destroy(&go);
	assert_int_equal(live, THREADS * CALLS * 2);
	assert_int_equal(resil_pipeline_get_metrics(p, &m), RESIL_OK);
	assert_int_equal(m.calls, THREADS * CALLS * 2);
	assert_int_equal(m.live, THREADS * CALLS * 2);
	assert_int_equal(
	    resil_retry_get_metrics(resil_pipeline_retry(p, NULL), &rm),
	    RESIL_OK);
	/* One retry in every four calls of each of the two slots. */
	assert_int_equal(rm.retries, THREADS * CALLS / 2);
	assert_int_equal(rm.succeeded_after_retry, THREADS * CALLS / 2);
	resil_pipeline_free(p);
}

/* ---- owned stripes: counts that stay exact past the owners ---- */

/*
 * Threads that own their stripe count unlocked (lib/internal.h), others
 * share the rest with locked counts; a call started on one thread and
 * finished on another drops its settings and counts its first success
 * on the finishing thread's stripe. More threads than there are owned
 * stripes, in two waves (the first wave's exits give their stripes
 * back to the second), each making blocking calls by handle and
 * finishing machine calls its neighbour started: every count adds up
 * exactly, and the settings the calls held are freed by the next
 * reload (their holds summed to 0 across the stripes).
 */
enum { OWN_THREADS = 6, OWN_ROUNDS = 200, OWN_BATCH = 4 };

typedef struct owave {
	resil_pipeline *p;
	const resil_pipeline_config *cfg;
	const resil_method *h;
	pthread_barrier_t *bar;
	uint64_t reload_errors;
	resil_call calls[OWN_THREADS][OWN_BATCH];
	resil_result res[OWN_THREADS][OWN_BATCH];
	resil_call_next st[OWN_THREADS][OWN_BATCH];
} owave;

typedef struct oworker {
	owave *w;
	unsigned id;
	uint64_t ok, bad;
	unsigned word; /* its stripe word at the end (lib/internal.h) */
} oworker;

/* Answers 8. */
static int
dep_ok(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(8);
	return 0;
}

static void
own_reload(owave *w)
{
	if (resil_pipeline_reload(w->p, w->cfg, NULL) != RESIL_OK)
		w->reload_errors++;
}

static void *
own_caller(void *arg)
{
	oworker *o = arg;
	owave *w = o->w;
	resil_args args = { "getStock", "k", 1 };
	unsigned next = (o->id + 1) % OWN_THREADS, r, j;

	for (r = 0; r < OWN_ROUNDS; r++) {
		for (j = 0; j < OWN_BATCH; j++) {
			resil_result res;

			if (resil_call_start(&w->calls[o->id][j], w->p, w->h,
			        &args, &w->res[o->id][j], 0,
			        &w->st[o->id][j]) != RESIL_OK)
				o->bad++;
			if (resil_pipeline_call_method(w->p, w->h, &args,
			        dep_ok, NULL, &res) == RESIL_OK &&
			    res.value.u.i == 8)
				o->ok++;
			else
				o->bad++;
			resil_result_free(&res);
		}
		/* The started calls hold settings this reload replaces. */
		if (o->id == 0)
			own_reload(w);
		pthread_barrier_wait(w->bar);
		/* The neighbour's calls: reported and stepped here. */
		for (j = 0; j < OWN_BATCH; j++) {
			resil_call *c = &w->calls[next][j];
			resil_call_next *st = &w->st[next][j];
			resil_value v = resil_value_int(8);

			if (st->action != RESIL_CALL_RUN ||
			    resil_call_report(c, st->attempt, 0, &v, 0) !=
			        RESIL_OK ||
			    resil_call_step(c, 0, st) != RESIL_OK ||
			    st->action != RESIL_CALL_DONE ||
			    w->res[next][j].err != RESIL_OK ||
			    w->res[next][j].value.u.i != 8)
				o->bad++;
			else
				o->ok++;
			resil_result_free(&w->res[next][j]);
		}
		pthread_barrier_wait(w->bar);
	}
	o->word = resil__stripe_mine;
	return NULL;
}

static void
test_pipeline_threads_owned_stripes_count_exactly(void **state)
{
	static owave w;
	fail_alloc_lite fa;
	resil_method_config methods[1];
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_pipeline_metrics m;
	resil_retry_metrics rm;
	resil_breaker_metrics bm;
	pthread_barrier_t bar;
	pthread_t tid[OWN_THREADS];
	oworker ow[OWN_THREADS];
	int64_t base;
	uint64_t ok = 0, total;
	int wave, i, owners;

	(void)state;
	fail_alloc_lite_init(&fa);
	stock_config(&cfg, methods);
	cfg.clock = NULL;
	cfg.alloc = &fa.hook;
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 50;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 2;
	cfg.retry.base_delay_ns = 0;
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_pipeline_method(p, "getStock", &w.h), RESIL_OK);
	w.p = p;
	w.cfg = &cfg;
	w.bar = &bar;
	w.reload_errors = 0;
	/* Settings and a free shell: what two reloads leave. */
	own_reload(&w);
	own_reload(&w);
	base = fail_alloc_lite_live(&fa);
	for (wave = 0; wave < 2; wave++) {
		pthread_barrier_init(&bar, NULL, OWN_THREADS);
		for (i = 0; i < OWN_THREADS; i++) {
			ow[i].w = &w;
			ow[i].id = (unsigned)i;
			ow[i].ok = ow[i].bad = 0;
			assert_int_equal(pthread_create(&tid[i], NULL,
			                     own_caller, &ow[i]),
			    0);
		}
		for (i = 0, owners = 0; i < OWN_THREADS; i++) {
			assert_int_equal(pthread_join(tid[i], NULL), 0);
			assert_int_equal(ow[i].bad, 0);
			ok += ow[i].ok;
			owners += (ow[i].word & RESIL__STRIPE_OWNED) != 0;
#if defined(RESIL_TEST_UNFENCED)
			assert_int_equal(ow[i].word & RESIL__STRIPE_FENCED, 0);
#endif
		}
		/* The first wave's owners gave theirs back to the second. */
		assert_true(owners >= 1);
		assert_true((unsigned)owners <= RESIL__STRIPES_OWNED);
		pthread_barrier_destroy(&bar);
	}
	assert_int_equal(w.reload_errors, 0);
	total = 2u * OWN_THREADS * OWN_ROUNDS * OWN_BATCH * 2u;
	assert_int_equal(ok, total);
	assert_int_equal(resil_pipeline_get_metrics(p, &m), RESIL_OK);
	assert_int_equal(m.calls, total);
	assert_int_equal(m.live, total);
	assert_int_equal(
	    resil_retry_get_metrics(resil_pipeline_retry(p, NULL), &rm),
	    RESIL_OK);
	assert_int_equal(rm.succeeded_without_retry, total);
	assert_int_equal(resil_breaker_get_metrics(
	                     resil_pipeline_breaker(p, NULL), &bm),
	    RESIL_OK);
	assert_int_equal(bm.successes, total);
	/* Each round's reload replaced settings its started calls held,
	 * dropped on other threads' stripes: had a drop been lost, the
	 * replaced settings would pile up (one per round). */
	own_reload(&w);
	own_reload(&w);
	assert_true(fail_alloc_lite_live(&fa) <= base + 2);
	resil_pipeline_free(p);
	assert_int_equal(fail_alloc_lite_live(&fa), 0);
}

/* ---- hedging through resil_pipeline_call with an executor ---- */

typedef struct texec {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int woken;
	resil_manual_clock *mc;
	pthread_t threads[8];
	int n;
	/* The dependency: the first attempt waits for the gate. */
	int gate_open;
	int calls;
	int fail;
} texec;

typedef struct tjob {
	void (*run)(void *job);
	void *job;
} tjob;

static void *
texec_thread(void *arg)
{
	tjob *t = arg;

	t->run(t->job);
	return NULL;
}

static int
texec_submit(void (*run)(void *job), void *job, void *ctx)
{
	texec *x = ctx;
	static tjob slots[8];
	tjob *t = &slots[x->n];

	t->run = run;
	t->job = job;
	return pthread_create(&x->threads[x->n++], NULL, texec_thread, t);
}

static void
texec_wait(uint64_t until, void *ctx)
{
	texec *x = ctx;

	pthread_mutex_lock(&x->mu);
	while (!x->woken && until == UINT64_MAX)
		pthread_cond_wait(&x->cv, &x->mu);
	if (!x->woken) /* a timed wait: time passes at once */
		resil_manual_clock_set(x->mc, until);
	x->woken = 0;
	pthread_mutex_unlock(&x->mu);
}

static void
texec_wake(void *ctx)
{
	texec *x = ctx;

	pthread_mutex_lock(&x->mu);
	x->woken = 1;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
}

static int
hedged_dep(void *ctx, const resil_args *args, resil_value *out)
{
	texec *x = ctx;
	int n;

	(void)args;
	pthread_mutex_lock(&x->mu);
	n = ++x->calls;
	while (n == 1 && !x->fail && !x->gate_open)
		pthread_cond_wait(&x->cv, &x->mu);
	pthread_mutex_unlock(&x->mu);
	if (x->fail)
		return -n;
	*out = resil_value_int(n == 1 ? 11 : 22);
	return 0;
}

static void
hedged_pipeline(
    texec *x, resil_manual_clock *mc, fail_alloc_lite *fa, resil_pipeline **p)
{
	resil_pipeline_config cfg;

	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cv, NULL);
	resil_manual_clock_init(mc, 100);
	x->mc = mc;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(mc);
	cfg.alloc = &fa->hook;
	cfg.breaker_enabled = 1;
	cfg.hedge_max = 1;
	cfg.hedge_delay_ns = 10;
	cfg.executor.submit = texec_submit;
	cfg.executor.wait = texec_wait;
	cfg.executor.wake = texec_wake;
	cfg.executor.ctx = x;
	assert_int_equal(resil_pipeline_new(p, &cfg, NULL), RESIL_OK);
}

static void
texec_join(texec *x)
{
	int i;

	pthread_mutex_lock(&x->mu);
	x->gate_open = 1;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	for (i = 0; i < x->n; i++)
		pthread_join(x->threads[i], NULL);
	pthread_cond_destroy(&x->cv);
	pthread_mutex_destroy(&x->mu);
}

static void
test_pipeline_threads_hedge_with_executor_first_success_wins(void **state)
{
	static texec x;
	resil_manual_clock mc;
	fail_alloc_lite fa;
	resil_pipeline *p;
	resil_args args = { "getStock", "k", 1 };
	resil_result r;

	(void)state;
	fail_alloc_lite_init(&fa);
	hedged_pipeline(&x, &mc, &fa, &p);
	/* Attempt 1 hangs; after 10 ticks the hedge answers 22. */
	assert_int_equal(
	    resil_pipeline_call(p, &args, hedged_dep, &x, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 22);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(resil_manual_clock_now(&mc), 110);
	resil_result_free(&r);
	/* The pipeline may go before the loser answers: its answer is
	 * dropped and its job frees itself. */
	resil_pipeline_free(p);
	texec_join(&x);
	assert_int_equal(fail_alloc_lite_live(&fa), 0);
}

static void
test_pipeline_threads_hedge_with_executor_all_fail_last_error(void **state)
{
	static texec x;
	resil_manual_clock mc;
	fail_alloc_lite fa;
	resil_pipeline *p;
	resil_args args = { "getStock", "k", 1 };
	resil_result r;

	(void)state;
	fail_alloc_lite_init(&fa);
	hedged_pipeline(&x, &mc, &fa, &p);
	x.fail = 1;
	assert_int_equal(
	    resil_pipeline_call(p, &args, hedged_dep, &x, &r), RESIL_E_CALL);
	/* One of the two failures: which thread reports last is the
	 * scheduler's (the hedge may start before attempt 1 even runs, when
	 * the executor's timed wait lets the hedge delay pass). That the
	 * last failure in report order stands is tested deterministically
	 * through the machine in tests/test_call.c. */
	assert_true(r.rc == -1 || r.rc == -2);
	assert_int_equal(r.attempts, 2);
	assert_int_equal(x.calls, 2);
	resil_result_free(&r);
	texec_join(&x);
	resil_pipeline_free(p);
	assert_int_equal(fail_alloc_lite_live(&fa), 0);
}

static void
test_pipeline_threads_executor_needs_all_three_hooks(void **state)
{
	resil_pipeline_config cfg;
	resil_pipeline *p = NULL;
	resil_diag diag;

	(void)state;
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.hedge_max = 1;
	cfg.executor.submit = texec_submit;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "pipeline.executor: submit, wait and wake are all required");
	assert_null(p);
}

/* 1000 attempts, each rejected at once by a forced-open breaker, with
 * retry_on_open and no backoff: the machine iterates, it does not
 * recurse, so a small thread stack is enough. */
typedef struct deep {
	resil_pipeline *p;
	resil_err err;
	uint32_t attempts;
	int calls;
} deep;

static int
deep_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)args;
	(void)out;
	((deep *)ctx)->calls++;
	return 0;
}

static void *
deep_caller(void *arg)
{
	deep *d = arg;
	resil_args args = { "getStock", "k", 1 };
	resil_result r;

	d->err = resil_pipeline_call(d->p, &args, deep_fn, d, &r);
	d->attempts = r.attempts;
	resil_result_free(&r);
	return NULL;
}

static void
test_pipeline_threads_many_rejected_retries_on_a_small_stack(void **state)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_retry_metrics rm;
	pthread_attr_t attr;
	pthread_t t;
	deep d;

	(void)state;
	memset(&d, 0, sizeof(d));
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.breaker_enabled = 1;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = RESIL_RETRY_MAX_ATTEMPTS;
	cfg.retry.base_delay_ns = 0;
	cfg.retry.retry_on_open = 1;
	assert_int_equal(resil_pipeline_new(&d.p, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_breaker_force_open(resil_pipeline_breaker(d.p, NULL)),
	    RESIL_OK);
	pthread_attr_init(&attr);
	assert_int_equal(pthread_attr_setstacksize(&attr, 64 * 1024), 0);
	assert_int_equal(pthread_create(&t, &attr, deep_caller, &d), 0);
	pthread_join(t, NULL);
	pthread_attr_destroy(&attr);
	assert_int_equal(d.err, RESIL_E_OPEN);
	assert_int_equal(d.attempts, 0);
	assert_int_equal(d.calls, 0);
	assert_int_equal(
	    resil_retry_get_metrics(resil_pipeline_retry(d.p, NULL), &rm),
	    RESIL_OK);
	assert_int_equal(rm.retries, RESIL_RETRY_MAX_ATTEMPTS - 1);
	assert_int_equal(rm.exhausted, 1);
	resil_pipeline_free(d.p);
}

/* ---- memory stays bounded however often the mock specs switch ---- */

typedef struct counting {
	int64_t live; /* bytes allocated now (atomic) */
	int64_t peak;
} counting;

static void *
count_alloc(size_t size, void *ctx)
{
	counting *c = ctx;
	int64_t now =
	    __atomic_add_fetch(&c->live, (int64_t)size, __ATOMIC_SEQ_CST);
	int64_t peak = __atomic_load_n(&c->peak, __ATOMIC_RELAXED);

	while (now > peak &&
	    !__atomic_compare_exchange_n(
	        &c->peak, &peak, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
	return malloc(size);
}

static void
count_free(void *ptr, size_t size, void *ctx)
{
	counting *c = ctx;

	if (ptr == NULL)
		return;
	__atomic_sub_fetch(&c->live, (int64_t)size, __ATOMIC_SEQ_CST);
	free(ptr);
}

typedef struct churn {
	resil_pipeline *p;
	int stop;
	uint64_t calls;
} churn;

static void *
churn_caller(void *arg)
{
	churn *ch = arg;
	resil_args args = { "getStock", "k", 1 };
	resil_result r;

	while (!__atomic_load_n(&ch->stop, __ATOMIC_ACQUIRE)) {
		resil_pipeline_call(ch->p, &args, dep_ok, NULL, &r);
		resil_result_free(&r);
		__atomic_add_fetch(&ch->calls, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

#if defined(__SANITIZE_THREAD__)
#define SWITCHES 20000
#else
#define SWITCHES 200000
#endif

static void
test_pipeline_threads_mock_switches_keep_memory_bounded(void **state)
{
	static const char *const specs[] = { "force:return 1", "fail:return 2",
		"return 3" };
	static counting cnt;
	resil_allocator a = { count_alloc, count_free, &cnt };
	resil_method_config methods[1];
	resil_pipeline_config cfg;
	churn ch;
	pthread_t tid[2];
	int64_t after_warmup = 0;
	int i;

	(void)state;
	memset(&cnt, 0, sizeof(cnt));
	memset(&ch, 0, sizeof(ch));
	stock_config(&cfg, methods);
	cfg.alloc = &a;
	cfg.mock = "return 0";
	assert_int_equal(resil_pipeline_new(&ch.p, &cfg, NULL), RESIL_OK);
	for (i = 0; i < 2; i++)
		assert_int_equal(
		    pthread_create(&tid[i], NULL, churn_caller, &ch), 0);
	for (i = 0; i < SWITCHES; i++) {
		assert_int_equal(resil_pipeline_set_mock(
		                     ch.p, "getStock", specs[i % 3], NULL),
		    RESIL_OK);
		if (i == 1000)
			after_warmup =
			    __atomic_load_n(&cnt.live, __ATOMIC_SEQ_CST);
	}
	__atomic_store_n(&ch.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++)
		pthread_join(tid[i], NULL);
	/* With no reader left, a few more switches let the last grace
	 * periods pass (each switch polls the epoch). */
	for (i = 0; i < 8; i++)
		assert_int_equal(resil_pipeline_set_mock(ch.p, "getStock",
				     specs[i % 3], NULL),
		    RESIL_OK);
	/* Each switch retires one configuration (~1 KB); kept until the
	 * pipeline is freed they would be 200 MB here (20 MB under TSan).
	 * Reclaimed (a grace period or two behind), they stay small. */
	print_message("live %lld after warm-up, %lld at the end, peak %lld, "
	              "%llu calls\n",
	    (long long)after_warmup, (long long)cnt.live, (long long)cnt.peak,
	    (unsigned long long)ch.calls);
	assert_true(cnt.live < 1024 * 1024);
	assert_true(cnt.peak < 64 * 1024 * 1024);
	resil_pipeline_free(ch.p);
	assert_int_equal(cnt.live, 0);
}

int
main(void)
{
#if defined(RESIL_TEST_UNFENCED)
	/* The same tests where owners hold with a locked add (no
	 * membarrier), before any thread has its stripe. */
	resil__stripes_unfenced();
#endif
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_pipeline_threads_calls_while_mock_switches),
		cmocka_unit_test(
		    test_pipeline_threads_machine_calls_on_one_pipeline),
		cmocka_unit_test(
		    test_pipeline_threads_owned_stripes_count_exactly),
		cmocka_unit_test(
		    test_pipeline_threads_hedge_with_executor_first_success_wins),
		cmocka_unit_test(
		    test_pipeline_threads_hedge_with_executor_all_fail_last_error),
		cmocka_unit_test(
		    test_pipeline_threads_executor_needs_all_three_hooks),
		cmocka_unit_test(
		    test_pipeline_threads_many_rejected_retries_on_a_small_stack),
		cmocka_unit_test(
		    test_pipeline_threads_mock_switches_keep_memory_bounded),
	};

	return cmocka_run_group_tests_name(
	    "pipeline_threads", tests, NULL, NULL);
}

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
#include <string.h>

#include <resil/pipeline.h>

#define THREADS 4
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

		/* The first call of each worker comes before any mock switch:
		 * live, however the scheduler runs the switcher later. */
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
	static const char *const specs[] = { "force:return 0",
		"fail:return 1", "false", NULL };
	unsigned n = 0;

	pthread_barrier_wait(&sh->go);
	while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
		/* Every 4th switch is a bad spec: refused, nothing changes. */
		const char *spec = (n % 4 == 3) ? "fail:" : specs[n % 4];
		resil_err e = resil_pipeline_set_mock(sh->p, "getStock", spec,
		    NULL);

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
	resil_pipeline_config_init(&cfg);
	memset(methods, 0, sizeof(methods));
	methods[0].name = "getStock";
	methods[0].type = RESIL_TYPE_INT;
	cfg.methods = methods;
	cfg.nmethods = 1;
	cfg.service = "StockService";
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
		__atomic_compare_exchange_n(&sh.stop, &zero, 1, 0,
		    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
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
	assert_true(live > 0);
	resil_pipeline_free(sh.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_pipeline_threads_calls_while_mock_switches),
	};

	return cmocka_run_group_tests_name("pipeline_threads", tests, NULL, NULL);
}

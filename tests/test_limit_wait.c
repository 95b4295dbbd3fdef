/*
 * Issue 42: the clock's wait primitive, the bulkhead that waits and its
 * priority reservations, through the public API. Threads block on a
 * manual clock and are woken by a release or by the clock advancing:
 * no sleep anywhere (the main thread yields while it waits for a thread
 * to be queued, which the bulkhead's waiting count shows).
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/limit.h>
#include <resil/pipeline.h>

#include "waitq.h" /* the generic queue (internal, issue 43 reuses it) */

/* ---- the clock's wait ---- */

typedef struct cw {
	resil_manual_clock *mc;
	uint32_t word;
	uint64_t deadline;
	resil_err got;
	int started;
} cw;

static void *
clock_waiter(void *arg)
{
	cw *x = arg;

	__atomic_store_n(&x->started, 1, __ATOMIC_SEQ_CST);
	x->got = resil_clock_wait(
	    resil_manual_clock_hook(x->mc), &x->word, 0, x->deadline);
	return NULL;
}

static void
test_clock_wait_manual_deadline_and_wake(void **state)
{
	resil_manual_clock mc;
	pthread_t t;
	cw x;

	(void)state;
	resil_manual_clock_init(&mc, 100);
	memset(&x, 0, sizeof(x));
	x.mc = &mc;
	x.deadline = 150;
	/* Deadline already reached, word unchanged: at once. */
	assert_int_equal(resil_clock_wait(resil_manual_clock_hook(&mc),
	                     &x.word, 0, 100),
	    RESIL_E_TIMEOUT);
	assert_int_equal(resil_clock_wait(resil_manual_clock_hook(&mc),
	                     &x.word, 1, UINT64_MAX),
	    RESIL_OK);
	assert_int_equal(resil_clock_wait(NULL, NULL, 0, 0), RESIL_E_INVAL);

	/* A thread waits until the clock is moved to its deadline. */
	assert_int_equal(pthread_create(&t, NULL, clock_waiter, &x), 0);
	while (!__atomic_load_n(&x.started, __ATOMIC_SEQ_CST))
		sched_yield();
	resil_manual_clock_advance(&mc, 49); /* 149: not yet */
	resil_manual_clock_advance(&mc, 1);  /* 150 */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.got, RESIL_E_TIMEOUT);

	/* A thread waits with no deadline until the word changes. */
	x.deadline = UINT64_MAX;
	x.started = 0;
	assert_int_equal(pthread_create(&t, NULL, clock_waiter, &x), 0);
	while (!__atomic_load_n(&x.started, __ATOMIC_SEQ_CST))
		sched_yield();
	resil_manual_clock_advance(&mc, 1000000); /* no deadline: waits on */
	__atomic_store_n(&x.word, 7, __ATOMIC_SEQ_CST);
	resil_clock_wake(resil_manual_clock_hook(&mc), &x.word);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.got, RESIL_OK);
}

static void
test_clock_wait_system_futex(void **state)
{
	uint32_t word = 0;
	uint64_t now = resil_clock_now(NULL);

	(void)state;
	/* A deadline in the past, and a word that differs: no block. */
	assert_int_equal(resil_clock_wait(NULL, &word, 0, now), RESIL_E_TIMEOUT);
	assert_int_equal(resil_clock_wait(resil_clock_system(), &word, 1,
	                     UINT64_MAX),
	    RESIL_OK);
	/* 1 ms of real time through the futex's monotonic deadline. */
	assert_int_equal(resil_clock_wait(resil_clock_system(), &word, 0,
	                     resil_clock_now(NULL) + RESIL_NS_PER_MS),
	    RESIL_E_TIMEOUT);
	resil_clock_wake(NULL, &word); /* nobody waits: harmless */
}

/* ---- the bulkhead that waits ---- */

static resil_bulkhead *
new_bh(resil_manual_clock *mc, uint32_t limit, uint32_t queue,
    uint64_t max_wait, int order, uint32_t rc, uint32_t rd)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh = NULL;
	resil_diag d;

	cfg.clock = resil_manual_clock_hook(mc);
	cfg.max_concurrent = limit;
	cfg.queue = queue;
	cfg.max_wait_ns = max_wait;
	cfg.order = order;
	cfg.reserve_critical = rc;
	cfg.reserve_default = rd;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, &d), RESIL_OK);
	return bh;
}

static void
wait_queued(resil_bulkhead *bh, uint32_t n)
{
	while (resil_bulkhead_waiting(bh) != n)
		sched_yield();
}

typedef struct aw {
	resil_bulkhead *bh;
	resil_priority prio;
	resil_err got;
	uint64_t waited;
} aw;

static void *
acquirer(void *arg)
{
	aw *x = arg;

	x->got = resil_bulkhead_acquire_wait(x->bh, x->prio, &x->waited);
	return NULL;
}

static void
test_bulkhead_wait_release_hands_the_slot_to_the_waiter(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;
	pthread_t t;
	aw x = { 0 };

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	bh = new_bh(&mc, 1, 4, 100, RESIL_BULKHEAD_FIFO, 0, 0);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	x.bh = bh;
	x.waited = 12345;
	assert_int_equal(pthread_create(&t, NULL, acquirer, &x), 0);
	wait_queued(bh, 1);
	/* A newcomer does not overtake the waiter. */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_E_LIMITED);
	resil_manual_clock_advance(&mc, 40); /* wakes it; 40 < 100: waits on */
	assert_int_equal(resil_bulkhead_waiting(bh), 1);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK); /* handed on */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.got, RESIL_OK);
	assert_int_equal(x.waited, 40);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 1); /* the waiter's, never 2 */
	assert_int_equal(m.peak_in_flight, 1);
	assert_int_equal(m.waited, 1);
	assert_int_equal(m.waiting, 0);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	resil_bulkhead_free(bh);
}

static void
test_bulkhead_wait_ends_at_max_wait(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_bulkhead_metrics m;
	pthread_t t;
	aw x = { 0 };

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	bh = new_bh(&mc, 1, 4, 100, RESIL_BULKHEAD_FIFO, 0, 0);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	x.bh = bh;
	assert_int_equal(pthread_create(&t, NULL, acquirer, &x), 0);
	wait_queued(bh, 1);
	resil_manual_clock_advance(&mc, 99); /* 1099: one tick short */
	assert_int_equal(resil_bulkhead_waiting(bh), 1);
	resil_manual_clock_advance(&mc, 1); /* 1100 = start + max_wait */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(x.got, RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.wait_timeouts, 1);
	assert_int_equal(m.waiting, 0);
	assert_int_equal(m.in_flight, 1);
	/* The slot freed later goes back to the pool (nobody waits). */
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
}

/* The non-blocking waiter: a hook that notes who was woken. */
typedef struct woke {
	int order[8];
	int n;
} woke;

typedef struct hk {
	woke *w;
	int id;
} hk;

static void
on_wake(void *ctx)
{
	hk *h = ctx;

	h->w->order[h->w->n++] = h->id;
}

static void
check_order(int order, const int *expect)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_bulkhead_waiter w[3];
	hk h[3];
	woke wk = { { 0 }, 0 };
	int i, queued, granted;

	resil_manual_clock_init(&mc, 0);
	bh = new_bh(&mc, 1, 3, 1000, order, 0, 0);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	for (i = 0; i < 3; i++) {
		h[i].w = &wk;
		h[i].id = i;
		assert_int_equal(resil_bulkhead_wait_start(bh,
		                     RESIL_PRIORITY_UNSET, &w[i], on_wake, &h[i],
		                     (uint64_t)i, &queued),
		    RESIL_OK);
		assert_int_equal(queued, 1);
		assert_int_equal(resil_bulkhead_wait_deadline(&w[i]),
		    (uint64_t)i + 1000);
	}
	/* The queue is full: the fourth is refused. */
	{
		resil_bulkhead_waiter w4;
		resil_bulkhead_metrics m;

		assert_int_equal(resil_bulkhead_wait_start(bh,
		                     RESIL_PRIORITY_UNSET, &w4, on_wake, &h[0], 3,
		                     &queued),
		    RESIL_E_LIMITED);
		assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
		assert_int_equal(m.queue_full, 1);
	}
	for (i = 0; i < 3; i++) {
		assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
		assert_int_equal(wk.n, i + 1);
		assert_int_equal(wk.order[i], expect[i]);
		assert_int_equal(resil_bulkhead_wait_poll(bh, &w[expect[i]], 10,
		                     &granted),
		    RESIL_OK);
		assert_int_equal(granted, 1);
	}
	assert_int_equal(resil_bulkhead_wait_poll(bh, &w[0], 10, &granted),
	    RESIL_E_MISUSE); /* over */
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_E_MISUSE);
	resil_bulkhead_free(bh);
}

static void
test_bulkhead_wait_fifo_and_lifo_order(void **state)
{
	static const int fifo[3] = { 0, 1, 2 }, lifo[3] = { 2, 1, 0 };

	(void)state;
	check_order(RESIL_BULKHEAD_FIFO, fifo);
	check_order(RESIL_BULKHEAD_LIFO, lifo);
}

static void
test_bulkhead_wait_cancel_leaves_the_queue(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_bulkhead_waiter w, w2;
	resil_bulkhead_metrics m;
	hk h;
	woke wk = { { 0 }, 0 };
	int queued, granted;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	bh = new_bh(&mc, 1, 2, 50, RESIL_BULKHEAD_FIFO, 0, 0);
	h.w = &wk;
	h.id = 1;
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_UNSET,
	                     &w, on_wake, &h, 0, &queued),
	    RESIL_OK);
	assert_int_equal(queued, 1);
	assert_int_equal(resil_bulkhead_wait_poll(bh, &w, 49, &granted),
	    RESIL_OK);
	assert_int_equal(granted, 0);
	assert_int_equal(resil_bulkhead_wait_cancel(bh, &w), RESIL_OK);
	assert_int_equal(resil_bulkhead_waiting(bh), 0);
	assert_int_equal(resil_bulkhead_wait_cancel(bh, &w), RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(wk.n, 0); /* nobody was woken */
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);

	/* Cancelled after a slot was handed to it: the slot goes back. */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_UNSET,
	                     &w2, on_wake, &h, 0, &queued),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(wk.n, 1);
	assert_int_equal(resil_bulkhead_wait_cancel(bh, &w2), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);
	/* The deadline passes with no slot: E_LIMITED at exactly start + 50. */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_UNSET,
	                     &w, NULL, NULL, 100, &queued),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_poll(bh, &w, 149, &granted),
	    RESIL_OK);
	assert_int_equal(granted, 0);
	assert_int_equal(resil_bulkhead_wait_poll(bh, &w, 150, &granted),
	    RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_waiting(bh), 0);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
}

static void
test_bulkhead_wait_config_refused(void **state)
{
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_diag d;

	(void)state;
	cfg.max_wait_ns = 10;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.queue"));
	cfg.queue = 3;
	cfg.order = 2;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.order"));
	cfg.order = RESIL_BULKHEAD_LIFO;
	cfg.batch = 2;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.batch"));
	cfg.batch = 0;
	cfg.reserve_critical = 20;
	cfg.reserve_default = 5; /* 25 = max_concurrent */
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.reserve"));
	cfg.reserve_default = 4;
	assert_int_equal(resil_bulkhead_config_validate(&cfg, &d), RESIL_OK);
	cfg.max_wait_ns = 0;
	assert_int_equal(
	    resil_bulkhead_config_validate(&cfg, &d), RESIL_E_INVAL);
}

/* ---- priorities ---- */

static void
test_bulkhead_priority_reservations_are_exact(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_priority p;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	/* 5 slots: 1 for critical only, 1 more for default and critical. */
	bh = new_bh(&mc, 5, 0, 0, RESIL_BULKHEAD_FIFO, 1, 1);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_SHEDDABLE),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_SHEDDABLE),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_SHEDDABLE),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_SHEDDABLE),
	    RESIL_E_LIMITED); /* 3 = 5 - 1 - 1 */
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK); /* dflt */
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_DEFAULT),
	    RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_CRITICAL),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_CRITICAL),
	    RESIL_E_LIMITED); /* 5: the limit, for every class */
	assert_int_equal(resil_bulkhead_try_acquire_prio(bh, 9), RESIL_E_INVAL);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	/* 4 in flight: only critical may take the fifth. */
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_DEFAULT),
	    RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_try_acquire_prio(
	                     bh, RESIL_PRIORITY_CRITICAL),
	    RESIL_OK);
	resil_bulkhead_free(bh);

	assert_int_equal(resil_priority_parse("Critical", &p), RESIL_OK);
	assert_int_equal(p, RESIL_PRIORITY_CRITICAL);
	assert_int_equal(resil_priority_parse("urgent", &p), RESIL_E_INVAL);
	assert_string_equal(resil_priority_name(RESIL_PRIORITY_SHEDDABLE),
	    "sheddable");
}

static void
test_bulkhead_priority_queue_wakes_the_highest_class(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_bulkhead_waiter ws, wd, wc;
	hk hs, hd, hc;
	woke wk = { { 0 }, 0 };
	int queued, granted;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	bh = new_bh(&mc, 1, 8, 1000, RESIL_BULKHEAD_FIFO, 0, 0);
	hs.w = hd.w = hc.w = &wk;
	hs.id = 0;
	hd.id = 1;
	hc.id = 2;
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh,
	                     RESIL_PRIORITY_SHEDDABLE, &ws, on_wake, &hs, 0,
	                     &queued),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_DEFAULT,
	                     &wd, on_wake, &hd, 0, &queued),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh,
	                     RESIL_PRIORITY_CRITICAL, &wc, on_wake, &hc, 0,
	                     &queued),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_waiting(bh), 3);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	assert_int_equal(wk.n, 2);
	assert_int_equal(wk.order[0], 2); /* critical first */
	assert_int_equal(wk.order[1], 1); /* then default */
	assert_int_equal(resil_bulkhead_wait_poll(bh, &ws, 1, &granted),
	    RESIL_OK);
	assert_int_equal(granted, 0); /* sheddable waits on */
	assert_int_equal(resil_bulkhead_wait_poll(bh, &wc, 1, &granted),
	    RESIL_OK);
	assert_int_equal(granted, 1);
	assert_int_equal(resil_bulkhead_wait_poll(bh, &wd, 1, &granted),
	    RESIL_OK);
	assert_int_equal(granted, 1);
	assert_int_equal(resil_bulkhead_wait_cancel(bh, &ws), RESIL_OK);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
}

/* ---- stress: never more holders than the limit, exact shares ---- */

#define ST_THREADS 6
#define ST_ITERS 3000
#define ST_LIMIT 4

typedef struct st_t {
	resil_bulkhead *bh;
	uint64_t held[3];   /* by class: sheddable, default, critical */
	uint64_t maxh[4];   /* the most seen: per class, and in all */
	uint64_t total;
	uint64_t errors;
} st_t;

static void
note_max(uint64_t *m, uint64_t v)
{
	uint64_t cur = __atomic_load_n(m, __ATOMIC_SEQ_CST);

	while (v > cur &&
	    !__atomic_compare_exchange_n(
	        m, &cur, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		;
}

typedef struct stt {
	st_t *s;
	unsigned id;
} stt;

static void *
stress(void *arg)
{
	stt *a = arg;
	st_t *s = a->s;
	int i;

	for (i = 0; i < ST_ITERS; i++) {
		unsigned c = (a->id + (unsigned)i) % 3;
		resil_priority p = (resil_priority)(c + 1);
		resil_err e = (i & 1) ? resil_bulkhead_acquire_wait(s->bh, p, NULL)
		                      : resil_bulkhead_try_acquire_prio(s->bh, p);
		uint64_t h, t;

		if (e == RESIL_E_LIMITED)
			continue;
		if (e != RESIL_OK) {
			__atomic_add_fetch(&s->errors, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		h = __atomic_add_fetch(&s->held[c], 1, __ATOMIC_SEQ_CST);
		t = __atomic_add_fetch(&s->total, 1, __ATOMIC_SEQ_CST);
		note_max(&s->maxh[c], h);
		note_max(&s->maxh[3], t);
		sched_yield();
		__atomic_sub_fetch(&s->held[c], 1, __ATOMIC_SEQ_CST);
		__atomic_sub_fetch(&s->total, 1, __ATOMIC_SEQ_CST);
		if (resil_bulkhead_release(s->bh) != RESIL_OK)
			__atomic_add_fetch(&s->errors, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void
test_bulkhead_wait_threads_never_over_the_limit(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead_metrics m;
	pthread_t t[ST_THREADS];
	stt a[ST_THREADS];
	st_t s;
	unsigned i;

	(void)state;
	memset(&s, 0, sizeof(s));
	resil_manual_clock_init(&mc, 0);
	/* Nobody moves the clock: every wait ends by a hand-over. */
	s.bh = new_bh(&mc, ST_LIMIT, ST_THREADS, UINT64_MAX / 2,
	    RESIL_BULKHEAD_FIFO, 1, 1);
	for (i = 0; i < ST_THREADS; i++) {
		a[i].s = &s;
		a[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, stress, &a[i]), 0);
	}
	for (i = 0; i < ST_THREADS; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	assert_int_equal(s.errors, 0);
	assert_true(s.maxh[3] <= ST_LIMIT);
	assert_true(s.maxh[0] <= ST_LIMIT - 2); /* sheddable's share */
	assert_true(s.maxh[1] <= ST_LIMIT - 1); /* default's */
	assert_int_equal(resil_bulkhead_get_metrics(s.bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 0);
	assert_int_equal(m.waiting, 0);
	assert_true(m.peak_in_flight <= ST_LIMIT);
	assert_int_equal(m.granted, m.released);
	print_message("stress: %llu granted, %llu after a wait, %llu refused\n",
	    (unsigned long long)m.granted, (unsigned long long)m.waited,
	    (unsigned long long)m.rejected);
	resil_bulkhead_free(s.bh);
}

/* ---- the call machine and the blocking driver ---- */

#define MS RESIL_NS_PER_MS

typedef struct pfx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
} pfx;

static void
pfx_begin(pfx *x, const char *text)
{
	resil_pipeline_config pc;
	resil_diag d;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000 * MS);
	if (resil_config_parse_string(&x->conf, text, "w.conf", NULL, &d) !=
	    RESIL_OK)
		fail_msg("config: %s", d.msg);
	pc = *resil_config_pipeline(x->conf);
	pc.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &pc, &d) != RESIL_OK)
		fail_msg("pipeline: %s", d.msg);
}

static void
pfx_end(pfx *x)
{
	resil_pipeline_free(x->p);
	resil_config_free(x->conf);
}

#define WAIT_CONF                                                     \
	"service=svc\nbulkhead.enabled=true\nbulkhead.max_concurrent=1\n" \
	"bulkhead.max_wait=50\nbulkhead.queue=4\n"

static void
on_flag(void *ctx)
{
	__atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

static void
test_call_machine_waits_for_a_bulkhead_slot(void **state)
{
	pfx x;
	resil_call a, b, c2;
	resil_call_next st, sb, sc;
	resil_result ra, rb, rc;
	resil_invocation inv;
	uint64_t now;
	int woken = 0;

	(void)state;
	pfx_begin(&x, WAIT_CONF);
	now = resil_manual_clock_now(&x.mc);
	resil_invocation_init(&inv, "get");
	inv.wake = on_flag;
	inv.wake_ctx = &woken;
	inv.priority = RESIL_PRIORITY_CRITICAL;
	assert_int_equal(
	    resil_call_start_ex(&a, x.p, NULL, &inv, &ra, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	/* The slot is taken: b waits for it, with the wait's end as until. */
	assert_int_equal(
	    resil_call_start_ex(&b, x.p, NULL, &inv, &rb, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_WAIT);
	assert_int_equal(sb.until, now + 50 * MS);
	assert_int_equal(resil_call_priority(&b), RESIL_PRIORITY_CRITICAL);
	assert_int_equal(resil_bulkhead_waiting(resil_pipeline_bulkhead(x.p)),
	    1);
	/* Stepping early is harmless. */
	assert_int_equal(resil_call_step(&b, now + MS, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_WAIT);
	/* a answers: its slot goes to b, whose hook is called. */
	assert_int_equal(
	    resil_call_report(&a, st.attempt, 0, NULL, now + 2 * MS), RESIL_OK);
	assert_int_equal(woken, 1);
	assert_int_equal(resil_call_step(&a, now + 2 * MS, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(ra.err, RESIL_OK);
	assert_int_equal(resil_call_step(&b, now + 2 * MS, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_RUN);
	/* c waits and its wait runs out at exactly now + 3 ms + 50 ms. */
	assert_int_equal(resil_call_start_ex(&c2, x.p, NULL, &inv, &rc,
	                     now + 3 * MS, &sc),
	    RESIL_OK);
	assert_int_equal(sc.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_step(&c2, now + 53 * MS - 1, &sc), RESIL_OK);
	assert_int_equal(sc.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_step(&c2, now + 53 * MS, &sc), RESIL_OK);
	assert_int_equal(sc.action, RESIL_CALL_DONE);
	assert_int_equal(rc.err, RESIL_E_LIMITED);
	resil_result_free(&rc);
	/* A cancelled waiter leaves the queue. */
	assert_int_equal(resil_call_start_ex(&c2, x.p, NULL, &inv, &rc,
	                     now + 60 * MS, &sc),
	    RESIL_OK);
	assert_int_equal(sc.action, RESIL_CALL_WAIT);
	assert_int_equal(resil_call_cancel(&c2, now + 61 * MS), RESIL_OK);
	assert_int_equal(resil_bulkhead_waiting(resil_pipeline_bulkhead(x.p)),
	    0);
	resil_result_free(&rc);
	assert_int_equal(
	    resil_call_report(&b, sb.attempt, 0, NULL, now + 62 * MS),
	    RESIL_OK);
	assert_int_equal(resil_call_step(&b, now + 62 * MS, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_DONE);
	assert_int_equal(rb.err, RESIL_OK);
	assert_int_equal(woken, 1); /* c was never handed a slot */
	resil_result_free(&ra);
	resil_result_free(&rb);
	pfx_end(&x);
}

static int
ok_fn(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return 0;
}

typedef struct bd {
	resil_pipeline *p;
	resil_result r;
	resil_err got;
} bd;

static void *
blocking_call(void *arg)
{
	bd *x = arg;
	resil_args args;

	memset(&args, 0, sizeof(args));
	args.method = "get";
	x->got = resil_pipeline_call(x->p, &args, ok_fn, NULL, &x->r);
	return NULL;
}

static void
test_blocking_driver_waits_through_the_clock(void **state)
{
	pfx x;
	resil_call a;
	resil_call_next st;
	resil_result ra;
	resil_invocation inv;
	pthread_t t;
	bd y;
	uint64_t now;

	(void)state;
	pfx_begin(&x, WAIT_CONF);
	now = resil_manual_clock_now(&x.mc);
	resil_invocation_init(&inv, "get");
	assert_int_equal(
	    resil_call_start_ex(&a, x.p, NULL, &inv, &ra, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	memset(&y, 0, sizeof(y));
	y.p = x.p;
	assert_int_equal(pthread_create(&t, NULL, blocking_call, &y), 0);
	wait_queued(resil_pipeline_bulkhead(x.p), 1);
	resil_manual_clock_advance(&x.mc, 10 * MS); /* wakes it: waits on */
	assert_int_equal(
	    resil_call_report(&a, st.attempt, 0, NULL, now + 10 * MS),
	    RESIL_OK); /* the slot goes to the blocked thread */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(y.got, RESIL_OK);
	assert_int_equal(resil_call_step(&a, now + 10 * MS, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	resil_result_free(&ra);
	resil_result_free(&y.r);

	/* Nobody releases: the blocked call ends at its max_wait. */
	assert_int_equal(resil_call_start_ex(&a, x.p, NULL, &inv, &ra,
	                     resil_manual_clock_now(&x.mc), &st),
	    RESIL_OK);
	assert_int_equal(pthread_create(&t, NULL, blocking_call, &y), 0);
	wait_queued(resil_pipeline_bulkhead(x.p), 1);
	resil_manual_clock_advance(&x.mc, 50 * MS);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(y.got, RESIL_E_LIMITED);
	resil_result_free(&y.r);
	assert_int_equal(resil_call_cancel(&a, resil_manual_clock_now(&x.mc)),
	    RESIL_OK);
	resil_result_free(&ra);
	pfx_end(&x);
}

/* The class from the method's configuration, the invocation and an
 * attachment, against a bulkhead's reservation. */
static void
test_call_priority_from_method_invocation_attachment(void **state)
{
	pfx x;
	resil_call a, b;
	resil_call_next st, sb;
	resil_result ra, rb;
	resil_invocation inv;
	resil_param att = { "resil.priority", "critical" };
	uint64_t now;

	(void)state;
	pfx_begin(&x, "service=svc\nbulkhead.enabled=true\n"
	              "bulkhead.max_concurrent=2\n"
	              "bulkhead.reserve.critical=1\n"
	              "crit.priority=critical\nget.type=any\n");
	now = resil_manual_clock_now(&x.mc);
	resil_invocation_init(&inv, "get");
	assert_int_equal(
	    resil_call_start_ex(&a, x.p, NULL, &inv, &ra, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_int_equal(resil_call_priority(&a), RESIL_PRIORITY_DEFAULT);
	/* A second default call: the last slot is critical's. */
	assert_int_equal(
	    resil_call_start_ex(&b, x.p, NULL, &inv, &rb, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_DONE);
	assert_int_equal(rb.err, RESIL_E_LIMITED);
	resil_result_free(&rb);
	/* The attachment says critical: it gets the slot. */
	inv.attachments = &att;
	inv.nattachments = 1;
	assert_int_equal(
	    resil_call_start_ex(&b, x.p, NULL, &inv, &rb, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_RUN);
	assert_int_equal(resil_call_priority(&b), RESIL_PRIORITY_CRITICAL);
	assert_int_equal(
	    resil_call_report(&b, sb.attempt, 0, NULL, now), RESIL_OK);
	assert_int_equal(resil_call_step(&b, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_DONE);
	resil_result_free(&rb);
	/* The method's class (crit.priority=critical)... */
	resil_invocation_init(&inv, "crit");
	assert_int_equal(
	    resil_call_start_ex(&b, x.p, NULL, &inv, &rb, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_RUN);
	assert_int_equal(resil_call_priority(&b), RESIL_PRIORITY_CRITICAL);
	assert_int_equal(
	    resil_call_report(&b, sb.attempt, 0, NULL, now), RESIL_OK);
	assert_int_equal(resil_call_step(&b, now, &sb), RESIL_OK);
	resil_result_free(&rb);
	/* ...unless the call says otherwise. */
	inv.priority = RESIL_PRIORITY_SHEDDABLE;
	assert_int_equal(
	    resil_call_start_ex(&b, x.p, NULL, &inv, &rb, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_DONE);
	assert_int_equal(rb.err, RESIL_E_LIMITED);
	resil_result_free(&rb);
	assert_int_equal(resil_call_report(&a, st.attempt, 0, NULL, now),
	    RESIL_OK);
	assert_int_equal(resil_call_step(&a, now, &st), RESIL_OK);
	resil_result_free(&ra);
	pfx_end(&x);
}

/* ---- the generic waiter queue (lib/waitq.h) ---- */

static void
test_waitq_order_bound_cancel_wake_one_and_all(void **state)
{
	resil_manual_clock mc;
	resil__waitq q;
	resil__waiter w[5];
	hk h[5];
	woke wk = { { 0 }, 0 };
	int i;

	(void)state;
	resil_manual_clock_init(&mc, 0);
	resil__waitq_init(&q, 4, 0);
	for (i = 0; i < 5; i++) {
		h[i].w = &wk;
		h[i].id = i;
		resil__waiter_init(&w[i], resil_manual_clock_hook(&mc), on_wake,
		    &h[i]);
	}
	resil__waitq_lock(&q);
	assert_int_equal(resil__waitq_push(&q, &w[0], 0), RESIL_OK);
	assert_int_equal(resil__waitq_push(&q, &w[1], 0), RESIL_OK);
	assert_int_equal(resil__waitq_push(&q, &w[2], 2), RESIL_OK);
	assert_int_equal(resil__waitq_push(&q, &w[3], 0), RESIL_OK);
	assert_int_equal(resil__waitq_push(&q, &w[4], 0), RESIL_E_LIMITED);
	assert_int_equal(resil__waitq_count_from(&q, 1), 1);
	/* Cancel leaves the queue, once. */
	assert_int_equal(resil__waitq_remove(&q, &w[1]), 1);
	assert_int_equal(resil__waitq_remove(&q, &w[1]), 0);
	resil__waitq_unlock(&q);
	/* Wake one: the highest class first; then all, FIFO. */
	assert_int_equal(resil__waitq_wake(&q, 1, 5), 1);
	assert_int_equal(wk.n, 1);
	assert_int_equal(wk.order[0], 2);
	assert_int_equal(resil__waiter_state(&w[2]), 5);
	assert_int_equal(resil__waiter_state(&w[0]), RESIL__W_WAITING);
	assert_int_equal(resil__waitq_wake(&q, UINT32_MAX, 6), 2);
	assert_int_equal(wk.order[1], 0);
	assert_int_equal(wk.order[2], 3);
	assert_int_equal(resil__waiter_state(&w[1]), RESIL__W_WAITING);
	assert_int_equal(resil__waitq_wake(&q, UINT32_MAX, 6), 0);
	/* A settled waiter's wait returns at once; an unsettled one at its
	 * deadline (the manual clock reads 0 >= 0). */
	assert_int_equal(resil__waiter_wait(&w[0], UINT64_MAX), 6);
	resil__waiter_init(&w[1], resil_manual_clock_hook(&mc), NULL, NULL);
	assert_int_equal(resil__waiter_wait(&w[1], 0), RESIL__W_WAITING);
}

/* A clock that can neither wait nor sleep: a full bulkhead that waits
 * refuses at once instead of spinning until the wait's end. */
static uint64_t
frozen_now(void *ctx)
{
	(void)ctx;
	return 5;
}

static void
test_bulkhead_wait_clock_that_cannot_block(void **state)
{
	resil_clock frozen = { frozen_now, NULL, NULL, NULL, NULL, NULL,
		NULL };
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh;
	uint64_t waited = 99;

	(void)state;
	cfg.clock = &frozen;
	cfg.max_concurrent = 1;
	cfg.max_wait_ns = 1000;
	cfg.queue = 2;
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_bulkhead_acquire_wait(
	                     bh, RESIL_PRIORITY_UNSET, &waited),
	    RESIL_OK);
	assert_int_equal(waited, 0);
	assert_int_equal(resil_bulkhead_acquire_wait(
	                     bh, RESIL_PRIORITY_UNSET, &waited),
	    RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_waiting(bh), 0);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
}

/* ---- issue 42 (h2/overload): the wait cut at the caller's deadline;
 * an adaptive limit's rise reaches the queue at once ---- */

static void
count_wake(void *ctx)
{
	__atomic_add_fetch((int *)ctx, 1, __ATOMIC_SEQ_CST);
}

static void
test_bulkhead_wait_cut(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead *bh;
	resil_bulkhead_waiter w;
	resil_bulkhead_metrics m;
	uint64_t t0;
	int queued = 0, granted = 1;

	(void)state;
	memset(&w, 0, sizeof(w));
	resil_manual_clock_init(&mc, 1000);
	bh = new_bh(&mc, 1, 4, 100, RESIL_BULKHEAD_FIFO, 0, 0);
	t0 = resil_manual_clock_now(&mc);
	assert_int_equal(resil_bulkhead_try_acquire(bh), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_cut(&w, t0), RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_DEFAULT,
	                     &w, NULL, NULL, t0, &queued),
	    RESIL_OK);
	assert_int_equal(queued, 1);
	assert_int_equal(resil_bulkhead_wait_deadline(&w), t0 + 100);
	assert_int_equal(resil_bulkhead_wait_cut(&w, t0 + 70), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_cut(&w, t0 + 90), RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_deadline(&w), t0 + 70);
	assert_int_equal(resil_bulkhead_wait_cut(NULL, t0), RESIL_E_INVAL);
	assert_int_equal(
	    resil_bulkhead_wait_poll(bh, &w, t0 + 69, &granted), RESIL_OK);
	assert_int_equal(granted, 0);
	assert_int_equal(resil_bulkhead_wait_poll(bh, &w, t0 + 70, &granted),
	    RESIL_E_LIMITED);
	assert_int_equal(resil_bulkhead_waiting(bh), 0);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.wait_timeouts, 1);
	assert_int_equal(resil_bulkhead_wait_cut(&w, t0), RESIL_E_MISUSE);
	assert_int_equal(resil_bulkhead_release(bh), RESIL_OK);
	resil_bulkhead_free(bh);
}

#define DEADLINE_CONF WAIT_CONF "retry.enabled=true\nretry.deadline=30\n"

/* The machine: a call whose retry deadline (30 ms) comes before its
 * wait's end (50 ms) waits until the deadline exactly, then is refused. */
static void
test_call_machine_wait_ends_at_retry_deadline(void **state)
{
	pfx x;
	resil_call a, b;
	resil_call_next st, sb;
	resil_result ra, rb;
	resil_invocation inv;
	uint64_t now;

	(void)state;
	pfx_begin(&x, DEADLINE_CONF);
	now = resil_manual_clock_now(&x.mc);
	resil_invocation_init(&inv, "get");
	assert_int_equal(
	    resil_call_start_ex(&a, x.p, NULL, &inv, &ra, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_int_equal(
	    resil_call_start_ex(&b, x.p, NULL, &inv, &rb, now, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_WAIT);
	assert_int_equal(sb.until, now + 30 * MS);
	assert_int_equal(
	    resil_call_step(&b, now + 30 * MS - 1, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_WAIT);
	assert_int_equal(sb.until, now + 30 * MS);
	assert_int_equal(resil_call_step(&b, now + 30 * MS, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_DONE);
	assert_int_equal(rb.err, RESIL_E_LIMITED);
	assert_int_equal(
	    resil_bulkhead_waiting(resil_pipeline_bulkhead(x.p)), 0);
	assert_int_equal(
	    resil_call_report(&a, st.attempt, 0, NULL, now + 31 * MS),
	    RESIL_OK);
	assert_int_equal(resil_call_step(&a, now + 31 * MS, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	resil_result_free(&ra);
	resil_result_free(&rb);
	pfx_end(&x);
}

/* The blocking driver: the blocked call ends at its retry deadline
 * (30 ms), not at its wait's end (50 ms). */
static void
test_blocking_driver_wait_ends_at_retry_deadline(void **state)
{
	pfx x;
	resil_call a;
	resil_call_next st;
	resil_result ra;
	resil_invocation inv;
	pthread_t t;
	bd y;
	long spins;

	(void)state;
	pfx_begin(&x, DEADLINE_CONF);
	resil_invocation_init(&inv, "get");
	assert_int_equal(resil_call_start_ex(&a, x.p, NULL, &inv, &ra,
	                     resil_manual_clock_now(&x.mc), &st),
	    RESIL_OK);
	memset(&y, 0, sizeof(y));
	y.p = x.p;
	assert_int_equal(pthread_create(&t, NULL, blocking_call, &y), 0);
	wait_queued(resil_pipeline_bulkhead(x.p), 1);
	resil_manual_clock_advance(&x.mc, 30 * MS);
	/* It leaves the queue now; a bounded look, so that a wait that
	 * went on to 50 ms fails the test instead of hanging it. */
	for (spins = 0; spins < 100000000L &&
	     resil_bulkhead_waiting(resil_pipeline_bulkhead(x.p)) != 0;
	     spins++)
		sched_yield();
	if (resil_bulkhead_waiting(resil_pipeline_bulkhead(x.p)) != 0)
		resil_manual_clock_advance(&x.mc, 20 * MS);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(y.got, RESIL_E_LIMITED);
	assert_int_equal(resil_manual_clock_now(&x.mc), 1030 * MS);
	resil_result_free(&y.r);
	assert_int_equal(
	    resil_call_cancel(&a, resil_manual_clock_now(&x.mc)), RESIL_OK);
	resil_result_free(&ra);
	pfx_end(&x);
}

/* An adaptive (AIMD) limit that rises hands its new slot to a queued
 * waiter at once: its hook is called by the record that raised it, no
 * release needed. */
static void
test_bulkhead_adaptive_rise_wakes_a_waiter(void **state)
{
	resil_manual_clock mc;
	resil_bulkhead_config cfg = resil_bulkhead_config_default();
	resil_bulkhead *bh = NULL;
	resil_bulkhead_waiter w1, w2;
	resil_bulkhead_metrics m;
	resil_diag d;
	int q1 = 0, q2 = 0, g1 = 0, g2 = 0, woken = 0, i;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.max_concurrent = 2;
	cfg.adaptive = RESIL_BULKHEAD_AIMD;
	cfg.min_limit = 1;
	cfg.max_limit = 10;
	cfg.target_latency_ns = 100;
	cfg.increase = 1;
	cfg.max_wait_ns = 1000;
	cfg.queue = 4;
	cfg.reserve_critical = 1; /* default calls may use limit - 1 */
	assert_int_equal(resil_bulkhead_new(&bh, &cfg, &d), RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_try_acquire_prio(bh, RESIL_PRIORITY_CRITICAL),
	    RESIL_OK);
	assert_int_equal(
	    resil_bulkhead_try_acquire_prio(bh, RESIL_PRIORITY_CRITICAL),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_DEFAULT,
	                     &w1, count_wake, &woken, 1000, &q1),
	    RESIL_OK);
	assert_int_equal(resil_bulkhead_wait_start(bh, RESIL_PRIORITY_CRITICAL,
	                     &w2, count_wake, &woken, 1000, &q2),
	    RESIL_OK);
	assert_int_equal(q1 + q2, 2);
	/* Two good samples at limit 2: the limit becomes 3; the slot goes
	 * to the critical waiter (the default one's cap is 3 - 1 = 2). */
	assert_int_equal(
	    resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 10), RESIL_OK);
	assert_int_equal(woken, 0);
	assert_int_equal(
	    resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 10), RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 3);
	assert_int_equal(woken, 1);
	assert_int_equal(
	    resil_bulkhead_wait_poll(bh, &w2, 1001, &g2), RESIL_OK);
	assert_int_equal(g2, 1);
	assert_int_equal(
	    resil_bulkhead_wait_poll(bh, &w1, 1001, &g1), RESIL_OK);
	assert_int_equal(g1, 0);
	/* Three more at limit 3: 4, still the reserved slot for the
	 * default waiter (3 in flight, its cap 4 - 1); four more: 5, and
	 * its turn. */
	for (i = 0; i < 3; i++)
		assert_int_equal(
		    resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 10),
		    RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 4);
	assert_int_equal(woken, 1);
	for (i = 0; i < 4; i++)
		assert_int_equal(
		    resil_bulkhead_record(bh, RESIL_OUTCOME_SUCCESS, 10),
		    RESIL_OK);
	assert_int_equal(resil_bulkhead_get_limit(bh), 5);
	assert_int_equal(woken, 2);
	assert_int_equal(
	    resil_bulkhead_wait_poll(bh, &w1, 1002, &g1), RESIL_OK);
	assert_int_equal(g1, 1);
	assert_int_equal(resil_bulkhead_get_metrics(bh, &m), RESIL_OK);
	assert_int_equal(m.in_flight, 4);
	assert_int_equal(m.waiting, 0);
	assert_int_equal(m.waited, 2);
	resil_bulkhead_free(bh);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_wait_manual_deadline_and_wake),
		cmocka_unit_test(test_clock_wait_system_futex),
		cmocka_unit_test(
		    test_waitq_order_bound_cancel_wake_one_and_all),
		cmocka_unit_test(
		    test_bulkhead_wait_release_hands_the_slot_to_the_waiter),
		cmocka_unit_test(test_bulkhead_wait_ends_at_max_wait),
		cmocka_unit_test(test_bulkhead_wait_fifo_and_lifo_order),
		cmocka_unit_test(test_bulkhead_wait_cancel_leaves_the_queue),
		cmocka_unit_test(test_bulkhead_wait_config_refused),
		cmocka_unit_test(test_bulkhead_wait_clock_that_cannot_block),
		cmocka_unit_test(test_bulkhead_priority_reservations_are_exact),
		cmocka_unit_test(
		    test_bulkhead_priority_queue_wakes_the_highest_class),
		cmocka_unit_test(test_bulkhead_wait_threads_never_over_the_limit),
		cmocka_unit_test(test_call_machine_waits_for_a_bulkhead_slot),
		cmocka_unit_test(test_blocking_driver_waits_through_the_clock),
		cmocka_unit_test(test_bulkhead_wait_cut),
		cmocka_unit_test(
		    test_call_machine_wait_ends_at_retry_deadline),
		cmocka_unit_test(
		    test_blocking_driver_wait_ends_at_retry_deadline),
		cmocka_unit_test(test_bulkhead_adaptive_rise_wakes_a_waiter),
		cmocka_unit_test(
		    test_call_priority_from_method_invocation_attachment),
	};

	return cmocka_run_group_tests_name("limit_wait", tests, NULL, NULL);
}

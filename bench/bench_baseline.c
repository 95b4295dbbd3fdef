/*
 * Baselines, measured in the same binary and run as every resil figure:
 * a bare call through a function pointer, a mutex-guarded reference
 * breaker, a minimal lock-free reference breaker (one atomic load of the
 * state and one atomic add per call), and the clock reads themselves.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>

#include <resil/clock.h>

#include "bench.h"

static void *
no_setup(void)
{
	return NULL;
}

static void
no_teardown(void *ctx)
{
	(void)ctx;
}

/* The "user function": an opaque call the compiler cannot inline. */
__attribute__((noinline)) int bench_user_fn(void *ctx);

__attribute__((noinline)) int
bench_user_fn(void *ctx)
{
	__asm__ volatile("" ::"r"(ctx) : "memory");
	return 0;
}

int (*volatile bench_user_fp)(void *) = bench_user_fn;

static uint64_t
run_bare_call(void *ctx, uint64_t iters)
{
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += (uint64_t)(bench_user_fp(ctx) == 0);
	return n;
}

/* A reference breaker as a straightforward implementation would write
 * it: one mutex around the state for acquire and again for record. */
typedef struct mutex_breaker {
	pthread_mutex_t mu;
	int state;
	uint64_t calls, failures, consecutive;
} mutex_breaker;

static void *
mutex_setup(void)
{
	mutex_breaker *m = calloc(1, sizeof(*m));

	pthread_mutex_init(&m->mu, NULL);
	return m;
}

static void
mutex_teardown(void *ctx)
{
	mutex_breaker *m = ctx;

	pthread_mutex_destroy(&m->mu);
	free(m);
}

static uint64_t
run_mutex_breaker(void *ctx, uint64_t iters)
{
	mutex_breaker *m = ctx;
	uint64_t i, n = 0;
	int ok;

	for (i = 0; i < iters; i++) {
		pthread_mutex_lock(&m->mu);
		ok = m->state == 0;
		pthread_mutex_unlock(&m->mu);
		if (!ok)
			continue;
		pthread_mutex_lock(&m->mu);
		m->calls++;
		m->consecutive = 0;
		pthread_mutex_unlock(&m->mu);
		n++;
	}
	return n;
}

/* The least a lock-free breaker can do: load the state, add one. */
typedef struct lf_breaker {
	uint64_t state;
	uint64_t calls;
} lf_breaker;

static void *
lf_setup(void)
{
	return calloc(1, sizeof(lf_breaker));
}

static void
lf_teardown(void *ctx)
{
	free(ctx);
}

static uint64_t
run_lockfree_breaker(void *ctx, uint64_t iters)
{
	lf_breaker *b = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) != 0)
			continue;
		__atomic_fetch_add(&b->calls, 1, __ATOMIC_SEQ_CST);
		n++;
	}
	return n;
}

static uint64_t
run_clock_monotonic(void *ctx, uint64_t iters)
{
	uint64_t i, n = 0;

	(void)ctx;
	for (i = 0; i < iters; i++)
		n += resil_clock_now(NULL);
	return n;
}

/* resil_clock_fast(): calibrated once, in the setup. */
static void *
fast_setup(void)
{
	return (void *)(uintptr_t)resil_clock_fast();
}

static uint64_t
run_clock_fast(void *ctx, uint64_t iters)
{
	const resil_clock *clk = ctx;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_clock_now(clk);
	return n;
}

static uint64_t
run_clock_coarse(void *ctx, uint64_t iters)
{
	uint64_t i, n = 0;

	(void)ctx;
	for (i = 0; i < iters; i++)
		n += resil_clock_coarse(NULL);
	return n;
}

/*
 * The seeds' configuration written by hand in plain C (issue 39), the
 * floor for pipeline/success_seed as lockfree_breaker is for the breaker:
 * a timeout, a breaker counting failures and slow calls over a count
 * window of 100 (a byte ring with its two counts, the state one word), a
 * retry of up to 3 attempts, the cache recorded on every success (one
 * slot per key hash; a success that leaves the cached value as it is
 * re-stamps it, a compare and a store), an age limit, and a `fail:` mock
 * answering when the cache cannot; the clock through a function pointer
 * (the manual clock's reading, or CLOCK_MONOTONIC for the _sysclock row).
 * Two clock reads per attempt: the start (the deadline) and the end (the
 * duration). Safe on several threads at once as the bench runs it: the
 * counts are atomic adds, the cache slot a seqlock.
 */
#define HW_WINDOW 100
#define HW_SLOTS 64

typedef struct hw_entry {
	uint64_t seq; /* odd while written */
	uint64_t hash;
	uint64_t key;
	int64_t value;
	uint64_t at;
} hw_entry;

typedef struct hw {
	uint64_t (*now)(void *ctx);
	void *clk;
	resil_manual_clock mc;
	uint64_t timeout, slow_ns, max_age;
	uint64_t state; /* 0 CLOSED, 1 OPEN */
	uint64_t head, failures, slow;
	uint8_t ring[HW_WINDOW];
	hw_entry cache[HW_SLOTS];
	int64_t mock_value;
} hw;

static uint64_t
hw_manual_now(void *ctx)
{
	return resil_manual_clock_now(ctx);
}

static uint64_t
hw_system_now(void *ctx)
{
	(void)ctx;
	return resil_clock_now(NULL);
}

static void *
hw_setup_on(int sys)
{
	hw *h = calloc(1, sizeof(*h));

	resil_manual_clock_init(&h->mc, 1);
	h->now = sys ? hw_system_now : hw_manual_now;
	h->clk = &h->mc;
	h->timeout = sys ? RESIL_NS_PER_SEC : 1000;
	h->slow_ns = sys ? 500 * RESIL_NS_PER_MS : 1000;
	h->max_age = 60 * RESIL_NS_PER_SEC;
	return h;
}

static void *
hw_setup(void)
{
	return hw_setup_on(0);
}

static void *
hw_setup_sys(void)
{
	return hw_setup_on(1);
}

static void
hw_teardown(void *ctx)
{
	free(ctx);
}

/* The user's function: the int 8 for any key (opaque to the compiler). */
__attribute__((noinline)) int bench_stock_fn(uint64_t key, int64_t *out);

__attribute__((noinline)) int
bench_stock_fn(uint64_t key, int64_t *out)
{
	__asm__ volatile("" ::"r"(key) : "memory");
	*out = 8;
	return 0;
}

int (*volatile bench_stock_fp)(uint64_t, int64_t *) = bench_stock_fn;

static inline uint64_t
hw_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	return k ^ (k >> 33);
}

/* One outcome into the window; 1 when a rate reached its threshold
 * (failures >= 50%, slow >= 80%, once the window is full). */
static int
hw_record(hw *h, int fail, int slow)
{
	uint64_t i = __atomic_fetch_add(&h->head, 1, __ATOMIC_RELAXED);
	uint8_t nv = (uint8_t)(0x80 | (fail ? 1 : 0) | (slow ? 2 : 0));
	uint8_t *slot = &h->ring[i % HW_WINDOW];
	uint8_t ov = __atomic_load_n(slot, __ATOMIC_RELAXED);

	if (ov == nv)
		return 0; /* the same outcome over the same one */
	ov = __atomic_exchange_n(slot, nv, __ATOMIC_RELAXED);
	if ((ov ^ nv) & 1)
		__atomic_fetch_add(&h->failures, fail ? 1 : (uint64_t)-1,
		    __ATOMIC_RELAXED);
	if ((ov ^ nv) & 2)
		__atomic_fetch_add(
		    &h->slow, slow ? 1 : (uint64_t)-1, __ATOMIC_RELAXED);
	return i >= HW_WINDOW &&
	    (__atomic_load_n(&h->failures, __ATOMIC_RELAXED) * 100 >=
	            50 * HW_WINDOW ||
	        __atomic_load_n(&h->slow, __ATOMIC_RELAXED) * 100 >=
	            80 * HW_WINDOW);
}

static void
hw_cache_put(hw *h, uint64_t hash, uint64_t key, int64_t v, uint64_t now)
{
	hw_entry *e = &h->cache[hash % HW_SLOTS];
	uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);

	if (!(s & 1) && e->hash == hash && e->key == key && e->value == v) {
		__atomic_store_n(&e->at, now, __ATOMIC_RELAXED); /* re-stamp */
		return;
	}
	if ((s & 1) || !__atomic_compare_exchange_n(&e->seq, &s, s + 1, 0,
	                   __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return; /* another writer has it: this one is dropped */
	e->hash = hash;
	e->key = key;
	e->value = v;
	__atomic_store_n(&e->at, now, __ATOMIC_RELAXED);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

static int
hw_cache_get(hw *h, uint64_t hash, uint64_t key, uint64_t now, int64_t *v,
    uint64_t *age)
{
	hw_entry *e = &h->cache[hash % HW_SLOTS];
	uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE), at;

	if ((s & 1) || e->hash != hash || e->key != key)
		return 0;
	*v = e->value;
	at = __atomic_load_n(&e->at, __ATOMIC_RELAXED);
	if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != s)
		return 0;
	*age = now > at ? now - at : 0;
	return *age <= h->max_age;
}

/* One call of the seeds' configuration: 0 with *out (live, cached or
 * mocked), *age the cached answer's age (else 0). */
static int
hw_call(hw *h, uint64_t key, int64_t *out, uint64_t *age)
{
	uint64_t hash = hw_hash(key), t0, t1, dur = 0;
	int attempt, rc = -1;

	*age = 0;
	for (attempt = 0; attempt < 3; attempt++) {
		if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != 0)
			break;
		t0 = h->now(h->clk); /* the deadline: t0 + timeout */
		rc = bench_stock_fp(key, out);
		t1 = h->now(h->clk);
		dur = t1 > t0 ? t1 - t0 : 0;
		if (dur > h->timeout)
			rc = -2; /* too late: a timeout */
		if (hw_record(h, rc != 0, dur > h->slow_ns))
			__atomic_store_n(&h->state, 1, __ATOMIC_RELEASE);
		if (rc == 0) {
			hw_cache_put(h, hash, key, *out, t1);
			return 0;
		}
	}
	if (hw_cache_get(h, hash, key, h->now(h->clk), out, age))
		return 0;
	*out = h->mock_value; /* fail:return 0 */
	return 0;
}

static uint64_t
run_seed_handwritten(void *ctx, uint64_t iters)
{
	hw *h = ctx;
	uint64_t i, n = 0, age;
	int64_t v;

	for (i = 0; i < iters; i++)
		if (hw_call(h, UINT64_C(12345678), &v, &age) == 0)
			n += (uint64_t)v + age;
	return n;
}

const resil_bench resil_bench_baseline[] = {
	{ "baseline/bare_call", no_setup, run_bare_call, no_teardown },
	{ "baseline/mutex_breaker", mutex_setup, run_mutex_breaker,
	    mutex_teardown },
	{ "baseline/lockfree_breaker", lf_setup, run_lockfree_breaker,
	    lf_teardown },
	{ "baseline/clock_monotonic", no_setup, run_clock_monotonic,
	    no_teardown },
	{ "baseline/clock_coarse", no_setup, run_clock_coarse, no_teardown },
	{ "baseline/clock_fast", fast_setup, run_clock_fast, no_teardown },
	{ "baseline/seed_handwritten", hw_setup, run_seed_handwritten,
	    hw_teardown },
	{ "baseline/seed_handwritten_sysclock", hw_setup_sys,
	    run_seed_handwritten, hw_teardown },
	{ NULL, NULL, NULL, NULL },
};

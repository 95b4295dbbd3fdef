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

static uint64_t
run_clock_coarse(void *ctx, uint64_t iters)
{
	uint64_t i, n = 0;

	(void)ctx;
	for (i = 0; i < iters; i++)
		n += resil_clock_coarse(NULL);
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
	{ NULL, NULL, NULL, NULL },
};

/*
 * resil clock: the only source file that reads the system's time.
 */
#define _POSIX_C_SOURCE 200809L

#include <resil/clock.h>

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "atomic.h"
#include "clock_internal.h"
#include "internal.h"

static uint64_t
read_clock(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * RESIL_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t
system_now(void *ctx)
{
	(void)ctx;
	return read_clock(CLOCK_MONOTONIC);
}

static uint64_t
system_coarse(void *ctx)
{
	(void)ctx;
#ifdef CLOCK_MONOTONIC_COARSE
	return read_clock(CLOCK_MONOTONIC_COARSE);
#else
	return read_clock(CLOCK_MONOTONIC);
#endif
}

static void
system_sleep(uint64_t ticks, void *ctx)
{
	struct timespec ts, rem;

	(void)ctx;
	ts.tv_sec = (time_t)(ticks / RESIL_NS_PER_SEC);
	ts.tv_nsec = (long)(ticks % RESIL_NS_PER_SEC);
	/* Resume after a signal, so the caller sleeps the whole time. */
	while (nanosleep(&ts, &rem) != 0 && errno == EINTR)
		ts = rem;
}

static const resil_clock system_clock = {
	system_now,
	system_coarse,
	system_sleep,
	NULL,
};

const resil_clock *
resil_clock_system(void)
{
	return &system_clock;
}

uint64_t
resil_clock_now(const resil_clock *clk)
{
	if (clk == NULL || clk->now == NULL)
		clk = &system_clock;
	return clk->now(clk->ctx);
}

uint64_t
resil_clock_coarse(const resil_clock *clk)
{
	if (clk == NULL || clk->now == NULL)
		clk = &system_clock;
	if (clk->coarse != NULL)
		return clk->coarse(clk->ctx);
	return clk->now(clk->ctx);
}

void
resil_clock_sleep(const resil_clock *clk, uint64_t ticks)
{
	if (clk == NULL || clk->now == NULL)
		clk = &system_clock;
	if (clk->sleep != NULL && ticks > 0)
		clk->sleep(ticks, clk->ctx);
}

/* ---- real-time waits (lib/fleet.c's helper thread) ---- */

int
resil__condattr_monotonic(pthread_condattr_t *ca)
{
	return pthread_condattr_setclock(ca, CLOCK_MONOTONIC);
}

void
resil__cond_deadline(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static uint64_t
manual_now(void *ctx)
{
	return resil__load64(&((resil_manual_clock *)ctx)->now_);
}

static void
manual_sleep(uint64_t ticks, void *ctx)
{
	resil_manual_clock_advance(ctx, ticks);
}

void
resil_manual_clock_init(resil_manual_clock *mc, uint64_t start)
{
	if (mc == NULL)
		return;
	mc->now_ = start;
	mc->hook_.now = manual_now;
	mc->hook_.coarse = manual_now;
	mc->hook_.sleep = manual_sleep;
	mc->hook_.ctx = mc;
	resil__fence();
}

const resil_clock *
resil_manual_clock_hook(resil_manual_clock *mc)
{
	return mc == NULL ? NULL : &mc->hook_;
}

uint64_t
resil_manual_clock_now(const resil_manual_clock *mc)
{
	return mc == NULL ? 0 : resil__load64(&mc->now_);
}

void
resil_manual_clock_set(resil_manual_clock *mc, uint64_t t)
{
	if (mc != NULL)
		resil__store64(&mc->now_, t);
}

uint64_t
resil_manual_clock_advance(resil_manual_clock *mc, uint64_t ticks)
{
	uint64_t cur, next;

	if (mc == NULL)
		return 0;
	cur = resil__load64(&mc->now_);
	for (;;) {
		next = cur > UINT64_MAX - ticks ? UINT64_MAX : cur + ticks;
		if (resil__cas64(&mc->now_, cur, next))
			return next;
		cur = resil__load64(&mc->now_);
	}
}

void
resil_rng_seed(resil_rng *rng, uint64_t seed)
{
	if (rng != NULL)
		resil__store64(&rng->state_, seed);
}

uint64_t
resil_rng_next(resil_rng *rng)
{
	if (rng == NULL)
		return 0;
	/* SplitMix64: the state is a counter, so concurrent draws need only
	 * one fetch-and-add and still each get a distinct output. */
	return resil__mix64(
	    resil__faa64(&rng->state_, RESIL__RNG_STEP) + RESIL__RNG_STEP);
}

void
resil__rng_reserve(resil_rng *rng, uint64_t n, uint64_t *next, uint64_t *end)
{
	*next = resil__faa64(&rng->state_, n * RESIL__RNG_STEP);
	*end = *next + n * RESIL__RNG_STEP;
}

void
resil__rng_give_back(resil_rng *rng, uint64_t next, uint64_t end)
{
	if (next != end)
		(void)resil__cas64(&rng->state_, end, next);
}

double
resil_rng_uniform(resil_rng *rng)
{
	return (double)(resil_rng_next(rng) >> 11) * 0x1.0p-53;
}

static double
rng_uniform_hook(void *ctx)
{
	return resil_rng_uniform(ctx);
}

resil_random
resil_rng_hook(resil_rng *rng)
{
	resil_random r;

	r.uniform = rng_uniform_hook;
	r.ctx = rng;
	return r;
}

double
resil_random_uniform(const resil_random *r)
{
	double u;

	if (r == NULL || r->uniform == NULL)
		return 0.0;
	u = r->uniform(r->ctx);
	/* NaN fails both comparisons and lands on 0. */
	if (!(u >= 0.0))
		return 0.0;
	if (u >= 1.0)
		return 0x1.fffffffffffffp-1;
	return u;
}

/* ---- the wall clock (lib/source.c: Dubbo's provider timestamps) ---- */

static uint64_t
system_wall(void *ctx)
{
	(void)ctx;
	return read_clock(CLOCK_REALTIME);
}

static const resil_clock wall_clock = {
	system_wall,
	NULL,
	NULL,
	NULL,
};

const resil_clock *
resil__clock_wall(void)
{
	return &wall_clock;
}

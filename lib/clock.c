/*
 * resil clock: the only source file that reads the system's time.
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall() */

#include <resil/clock.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

/* ---- the wait primitive: a futex, the deadline in CLOCK_MONOTONIC ---- */

/* Block while *word == expected, until a wake or the monotonic time
 * deadline (ns; UINT64_MAX: none). Returns early on a signal or a
 * spurious wake: the caller looks again. */
static void
futex_wait_until(const uint32_t *word, uint32_t expected, uint64_t deadline)
{
#if defined(__linux__)
	struct timespec ts, *tp = NULL;

	if (deadline != UINT64_MAX) {
		ts.tv_sec = (time_t)(deadline / RESIL_NS_PER_SEC);
		ts.tv_nsec = (long)(deadline % RESIL_NS_PER_SEC);
		tp = &ts;
	}
	/* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC time. */
	(void)syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
	    expected, tp, NULL, FUTEX_BITSET_MATCH_ANY);
#else
	uint64_t now = read_clock(CLOCK_MONOTONIC);

	/* No futex: look again within a millisecond. */
	if (resil__load32(word) == expected && now < deadline)
		system_sleep(deadline - now < RESIL_NS_PER_MS ? deadline - now
		                                               : RESIL_NS_PER_MS,
		    NULL);
#endif
}

static void
futex_wake_all(const uint32_t *word)
{
#if defined(__linux__)
	(void)syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
	    INT_MAX, NULL, NULL, 0);
#else
	(void)word;
#endif
}

static void
system_wait(const uint32_t *word, uint32_t expected, uint64_t deadline,
    void *ctx)
{
	(void)ctx;
	futex_wait_until(word, expected, deadline);
}

static void
system_wake(const uint32_t *word, void *ctx)
{
	(void)ctx;
	futex_wake_all(word);
}

static const resil_clock system_clock = {
	system_now,
	system_coarse,
	system_sleep,
	NULL,
	system_wait,
	system_wake,
	NULL, /* now_word: the time is not held in memory */
};

const resil_clock *
resil_clock_system(void)
{
	return &system_clock;
}

/* ---- the fast clock: the invariant TSC, calibrated (docs/clock.md) ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_TSC 1
__extension__ typedef unsigned __int128 u128;
#else
#define HAVE_TSC 0
#endif

/* Whether the TSC is used and its rate bound: written once under
 * pthread_once, read only after it. */
static int cal_on;
static uint32_t cal_ppm;
static pthread_once_t cal_once = PTHREAD_ONCE_INIT;

#if HAVE_TSC
/* The calibration: ns = base_ns + ((tsc - base_tsc) * mult) >> 32. */
static struct {
	uint64_t base_tsc;
	uint64_t base_ns;
	uint64_t mult; /* nanoseconds per tick, times 2^32 */
} cal;

/* rdtsc after every earlier instruction has completed (lfence), as the
 * kernel's rdtsc_ordered(): a reading taken after an acquire is not
 * moved before it, so happens-before orders the readings of two threads. */
static inline uint64_t
tsc_read(void)
{
	uint32_t lo, hi;

	__asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
	return ((uint64_t)hi << 32) | lo;
}

static uint64_t
tsc_now(void *ctx)
{
	uint64_t d = tsc_read() - cal.base_tsc;

	(void)ctx;
	if (RESIL__UNLIKELY((int64_t)d < 0))
		d = 0; /* a core a few ticks behind the calibrating one */
	return cal.base_ns + (uint64_t)(((u128)d * cal.mult) >> 32);
}

/* Whether the word w stands alone in the line (blank-separated). */
static int
has_word(const char *line, const char *w)
{
	size_t n = strlen(w);
	const char *p = line;

	while ((p = strstr(p, w)) != NULL) {
		if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
		    (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
			return 1;
		p += n;
	}
	return 0;
}

/* The TSC is invariant (constant rate, runs in every C-state) and the
 * kernel keeps it as its clocksource (so it found it synchronised across
 * CPUs): /proc/cpuinfo's flags and the current clocksource say. */
static int
tsc_usable(void)
{
	char line[4096];
	int ok = 0;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "flags", 5) == 0) {
			ok = has_word(line, "constant_tsc") &&
			    has_word(line, "nonstop_tsc");
			break;
		}
	fclose(f);
	if (!ok)
		return 0;
	f = fopen("/sys/devices/system/clocksource/clocksource0/"
	          "current_clocksource",
	    "r");
	if (f == NULL)
		return 1; /* not told otherwise */
	if (fgets(line, sizeof(line), f) == NULL || strcmp(line, "tsc\n") != 0)
		ok = 0;
	fclose(f);
	return ok;
}

/* One pairing of the two clocks: the TSC at the middle of a
 * CLOCK_MONOTONIC read, the narrowest bracket of a few; *half is half its
 * width in ticks (the pairing's uncertainty). */
static void
tsc_pair(uint64_t *tsc, uint64_t *ns, uint64_t *half)
{
	uint64_t t0, t1, n, best = UINT64_MAX;
	int i;

	for (i = 0; i < 8; i++) {
		t0 = tsc_read();
		n = read_clock(CLOCK_MONOTONIC);
		t1 = tsc_read();
		if (t1 - t0 < best) {
			best = t1 - t0;
			*tsc = t0 + best / 2;
			*ns = n;
		}
	}
	*half = best / 2 + 1;
}
#endif

/* The calibration window: long enough for a rate error of a few ppm,
 * short enough to spend once per process. */
#define CAL_WINDOW_NS (2 * RESIL_NS_PER_MS)

static void
calibrate(void)
{
#if HAVE_TSC
	uint64_t ta, na, ha, tb, nb, hb, dt, dn, err;

	if (!tsc_usable())
		return;
	tsc_pair(&ta, &na, &ha);
	do
		tsc_pair(&tb, &nb, &hb);
	while (nb - na < CAL_WINDOW_NS);
	dt = tb - ta;
	dn = nb - na;
	if (dt == 0 || tb < ta)
		return;
	cal.mult = (uint64_t)(((u128)dn << 32) / dt);
	if (cal.mult == 0)
		return;
	/* Each end is uncertain by its half bracket (in ns) plus the
	 * monotonic clock's own nanosecond: the rate is good to
	 * (err / dn), rounded up to whole ppm. */
	err = (uint64_t)((((u128)(ha + hb)) * cal.mult) >> 32) + 2;
	cal_ppm = (uint32_t)((err * 1000000u + dn - 1) / dn);
	cal.base_tsc = tb;
	cal.base_ns = nb;
	cal_on = 1;
#endif
}

#if HAVE_TSC
static const resil_clock fast_clock = {
	tsc_now,
	system_coarse,
	system_sleep,
	NULL,
	system_wait,
	system_wake,
	NULL, /* now_word: the time is not held in memory */
};
#endif

const resil_clock *
resil_clock_fast(void)
{
	pthread_once(&cal_once, calibrate);
#if HAVE_TSC
	if (cal_on)
		return &fast_clock;
#endif
	return &system_clock;
}

int
resil_clock_fast_info(uint32_t *ppm)
{
	pthread_once(&cal_once, calibrate);
	if (ppm != NULL)
		*ppm = cal_on ? cal_ppm : 0;
	return cal_on;
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

resil_err
resil_clock_wait(const resil_clock *clk, const uint32_t *word,
    uint32_t expected, uint64_t deadline)
{
	uint64_t now;

	if (word == NULL)
		return RESIL_E_INVAL;
	if (clk == NULL || clk->now == NULL)
		clk = &system_clock;
	for (;;) {
		if (resil__load32(word) != expected)
			return RESIL_OK;
		now = clk->now(clk->ctx);
		if (now >= deadline)
			return RESIL_E_TIMEOUT;
		if (clk->wait != NULL && clk->wake != NULL)
			clk->wait(word, expected, deadline, clk->ctx);
		else if (clk->sleep != NULL)
			/* No wait of its own: poll, a millisecond at most. */
			clk->sleep(deadline - now < RESIL_NS_PER_MS
			        ? deadline - now
			        : RESIL_NS_PER_MS,
			    clk->ctx);
		else
			return resil__load32(word) != expected
			    ? RESIL_OK
			    : RESIL_E_TIMEOUT;
	}
}

void
resil_clock_wake(const resil_clock *clk, const uint32_t *word)
{
	if (word == NULL)
		return;
	if (clk == NULL || clk->now == NULL)
		clk = &system_clock;
	if (clk->wait != NULL && clk->wake != NULL)
		clk->wake(word, clk->ctx);
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

/* Waiters on a manual clock wait on its seq_, which every advance, set
 * and wake moves: each then looks at its word and the time again. The
 * announce (nwait_ up) before the look, and the mover's store before its
 * look at nwait_, are a Dekker handshake: a mover that sees no waiter
 * moved the time before the waiter read it. */
static void
manual_wait(const uint32_t *word, uint32_t expected, uint64_t deadline,
    void *ctx)
{
	resil_manual_clock *mc = ctx;
	uint32_t seq;

	resil__faa32(&mc->nwait_, 1);
	seq = resil__load32(&mc->seq_);
	if (resil__load32(word) == expected &&
	    resil__load64(&mc->now_) < deadline)
		futex_wait_until(&mc->seq_, seq, UINT64_MAX);
	resil__faa32(&mc->nwait_, UINT32_MAX);
}

static void
manual_kick(resil_manual_clock *mc)
{
	if (resil__load32(&mc->nwait_) != 0) {
		resil__faa32(&mc->seq_, 1);
		futex_wake_all(&mc->seq_);
	}
}

static void
manual_wake(const uint32_t *word, void *ctx)
{
	(void)word;
	manual_kick(ctx);
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
	mc->hook_.wait = manual_wait;
	mc->hook_.wake = manual_wake;
	mc->hook_.now_word = &mc->now_;
	mc->seq_ = 0;
	mc->nwait_ = 0;
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
	if (mc == NULL)
		return;
	resil__fas64(&mc->now_, t); /* a full barrier before manual_kick */
	manual_kick(mc);
}

uint32_t
resil_manual_clock_waiters(const resil_manual_clock *mc)
{
	return mc != NULL ? resil__load32(&mc->nwait_) : 0;
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
		if (resil__cas64(&mc->now_, cur, next)) {
			manual_kick(mc);
			return next;
		}
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
	NULL,
	NULL,
	NULL,
};

const resil_clock *
resil__clock_wall(void)
{
	return &wall_clock;
}

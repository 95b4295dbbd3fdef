/*
 * resil clock: the injected time source and sleeper, the manual clock for
 * tests, and the seeded random number generator.
 *
 * Time is a count of integer ticks, and a tick is one nanosecond on every
 * clock: the system clock counts nanoseconds of CLOCK_MONOTONIC, and a
 * manual clock counts nanoseconds of virtual time. So every duration field
 * ending in _ns holds nanoseconds whichever clock an object is given, and a
 * test moves a manual clock by RESIL_NS_PER_MS * 5 to mean five
 * milliseconds (a custom clock must count nanoseconds too). In
 * configuration text a duration without a unit is milliseconds
 * (docs/config.md).
 *
 * Thread safety: the system clocks may be used from any thread. A manual
 * clock may be read, advanced and set from any number of threads at once
 * (its reading is one atomic word). A resil_rng may be drawn from by any
 * number of threads at once; single-threaded, its sequence is exact.
 */
#ifndef RESIL_CLOCK_H
#define RESIL_CLOCK_H

#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A time source. now is required and returns a non-decreasing tick count.
 * coarse, if not NULL, returns a cheaper, possibly older reading of the
 * same clock (CLOCK_MONOTONIC_COARSE for the system clock); resil uses it
 * where a few milliseconds of staleness are harmless (OPEN waits, time
 * windows) and now where a duration must be exact. sleep waits the given
 * number of ticks; NULL means the clock cannot sleep. ctx is passed to each
 * function; resil never frees it.
 */
typedef struct resil_clock {
	uint64_t (*now)(void *ctx);
	uint64_t (*coarse)(void *ctx);
	void (*sleep)(uint64_t ticks, void *ctx);
	void *ctx;
	/*
	 * The wait primitive (issue 42), optional, both or neither: wait
	 * blocks the calling thread while *word == expected, until wake is
	 * called for word, or until the clock reads deadline or later
	 * (UINT64_MAX: no deadline); it may also return early (spuriously):
	 * callers look at *word and the time again (resil_clock_wait() does).
	 * wake wakes every thread waiting on word. word is a process-private
	 * 32-bit word (a futex). NULL: the clock cannot wait, and
	 * resil_clock_wait() polls with sleep instead (docs/clock.md). A
	 * clock written as { now, coarse, sleep, ctx } has neither.
	 */
	void (*wait)(const uint32_t *word, uint32_t expected, uint64_t deadline,
	    void *ctx);
	void (*wake)(const uint32_t *word, void *ctx);
	/*
	 * Optional (issue 39): a 64-bit word that always holds what now
	 * would return, so that a hot path may read the time with one
	 * atomic load instead of a call: an event loop's cached time (as
	 * libuv's uv_now()), a ticker thread's coarse time, the manual
	 * clock's. The owner stores it atomically and aligned; a reader
	 * that has it never calls now. NULL (the default): now is called.
	 * The system and fast clocks leave it NULL (their time is not held
	 * in memory); resil_manual_clock_hook() sets it.
	 */
	const uint64_t *now_word;
} resil_clock;

/* CLOCK_MONOTONIC in nanoseconds, with CLOCK_MONOTONIC_COARSE as coarse and
 * nanosleep() as sleep. Static; never NULL. */
RESIL_API const resil_clock *resil_clock_system(void);

/*
 * The cheapest monotonic clock this platform gives with a stated error
 * bound (docs/clock.md), as a drop-in for resil_clock_system(): on x86-64
 * whose TSC is invariant (/proc/cpuinfo's constant_tsc and nonstop_tsc)
 * and is the kernel's own clocksource, now reads the TSC (ordered by an
 * lfence) scaled to nanoseconds of CLOCK_MONOTONIC, calibrated against it
 * once per process (the first call of this function spins about 2 ms);
 * coarse is CLOCK_MONOTONIC_COARSE and sleep is nanosleep(), as the
 * system clock's. Anywhere else it is resil_clock_system() itself.
 * Readings are non-decreasing on each thread and across threads ordered by
 * happens-before. Static; never NULL. Thread-safe (the calibration runs
 * once, under pthread_once).
 */
RESIL_API const resil_clock *resil_clock_fast(void);

/* 1 when resil_clock_fast() reads the TSC, 0 when it is the system clock;
 * *ppm (if not NULL) gets the bound on its rate error against
 * CLOCK_MONOTONIC, in parts per million (0 for the system clock). */
RESIL_API int resil_clock_fast_info(uint32_t *ppm);

/* Read clk (NULL means the system clock). */
RESIL_API uint64_t resil_clock_now(const resil_clock *clk);

/* The coarse reading of clk, or its precise one where it has no coarse. */
RESIL_API uint64_t resil_clock_coarse(const resil_clock *clk);

/* Sleep ticks on clk; a clock without sleep returns at once. */
RESIL_API void resil_clock_sleep(const resil_clock *clk, uint64_t ticks);

/*
 * Block the calling thread while *word == expected, until another thread
 * changes *word and calls resil_clock_wake(clk, word), or until clk reads
 * deadline or later (UINT64_MAX: no deadline). The word is read with
 * sequentially consistent loads; the waker stores the new value first,
 * then wakes. Through clk's wait; a clock without one polls: sleep in
 * steps of at most RESIL_NS_PER_MS ticks, and a clock without sleep
 * either does not block (RESIL_E_TIMEOUT at once unless *word changed).
 *
 * The system and fast clocks wait on a futex with the deadline in
 * CLOCK_MONOTONIC; a manual clock blocks the thread for real until a
 * wake, or until resil_manual_clock_advance()/_set() moves it to the
 * deadline (so a test's threads wait without a sleep of their own).
 *
 * Returns RESIL_OK when *word != expected; RESIL_E_TIMEOUT when the
 * deadline came first; RESIL_E_INVAL for a NULL word. NULL clk: the
 * system clock. Thread-safe.
 */
RESIL_API resil_err resil_clock_wait(const resil_clock *clk,
    const uint32_t *word, uint32_t expected, uint64_t deadline);

/* Wake every thread in resil_clock_wait(clk, word, ...): call it after
 * changing *word. NULL word: nothing. Thread-safe. */
RESIL_API void resil_clock_wake(const resil_clock *clk, const uint32_t *word);

/*
 * The manual clock: time moves only when the test moves it. Sleeping on it
 * advances it by the ticks asked, so code that waits through the injected
 * clock runs instantly and exactly. Advancing saturates at UINT64_MAX.
 * Waiting on it (resil_clock_wait) blocks the thread until a wake, or
 * until another thread advances or sets it to the deadline: each
 * advance and set wakes the clock's waiters to look again.
 *
 * The struct lives in the caller's storage and must outlive every object
 * that was given its hook. Its fields are private.
 */
typedef struct resil_manual_clock {
	uint64_t now_;
	resil_clock hook_;
	uint32_t seq_;   /* moves at each advance, set and wake */
	uint32_t nwait_; /* threads in its wait */
} resil_manual_clock;

/* Start mc at the given tick. */
RESIL_API void resil_manual_clock_init(resil_manual_clock *mc, uint64_t start);

/* The resil_clock that reads mc; valid as long as mc is. */
RESIL_API const resil_clock *resil_manual_clock_hook(resil_manual_clock *mc);

RESIL_API uint64_t resil_manual_clock_now(const resil_manual_clock *mc);

/* Set mc to t. Moving it backwards is allowed (to test clock skew). */
RESIL_API void resil_manual_clock_set(resil_manual_clock *mc, uint64_t t);

/* Move mc forward by ticks, saturating at UINT64_MAX; returns the new time. */
RESIL_API uint64_t resil_manual_clock_advance(
    resil_manual_clock *mc, uint64_t ticks);

/* Issue 43: how many threads are in a wait on mc now (resil_clock_wait
 * through its hook), so that a test moves the time once every thread it
 * started is blocked. 0 for NULL. Thread-safe. */
RESIL_API uint32_t resil_manual_clock_waiters(const resil_manual_clock *mc);

/*
 * The seeded random number generator: SplitMix64 over one atomic counter.
 * The same seed gives the same sequence; concurrent draws each get a
 * distinct value of that sequence. The struct lives in the caller's
 * storage; its fields are private.
 */
typedef struct resil_rng {
	uint64_t state_;
} resil_rng;

RESIL_API void resil_rng_seed(resil_rng *rng, uint64_t seed);

/* The next 64 random bits. */
RESIL_API uint64_t resil_rng_next(resil_rng *rng);

/* A uniform double in [0, 1) with 53 random bits. */
RESIL_API double resil_rng_uniform(resil_rng *rng);

/*
 * An injected source of uniform numbers in [0, 1), for anything random
 * (jitter). A test can script its draws with its own function; ctx is the
 * caller's and resil never frees it. Values outside [0, 1) are clamped.
 */
typedef struct resil_random {
	double (*uniform)(void *ctx);
	void *ctx;
} resil_random;

/* A resil_random that draws from rng; valid as long as rng is. */
RESIL_API resil_random resil_rng_hook(resil_rng *rng);

/* One draw from r (NULL, or a NULL function, gives 0.0), clamped to [0, 1). */
RESIL_API double resil_random_uniform(const resil_random *r);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_CLOCK_H */

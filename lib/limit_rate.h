/*
 * The rate limiter's state and its decision (lib/limit.c, and the
 * priority classes and the drain of lib/limit_rate_cls.c, issue 42).
 * Never installed.
 */
#ifndef RESIL_LIMIT_RATE_H
#define RESIL_LIMIT_RATE_H

#include <resil/limit.h>

#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "internal.h"

/* The hot paths inline the decision; the slow paths stay out of line. */
#if defined(__GNUC__)
#define LIMIT_INLINE __attribute__((always_inline)) inline
#define LIMIT_NOINLINE __attribute__((noinline))
#else
#define LIMIT_INLINE inline
#define LIMIT_NOINLINE
#endif

static inline uint64_t
ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0 ? 1u : 0u);
}

static inline uint64_t
sat_add_u64(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t
sat_mul_u64(uint64_t a, uint64_t b)
{
	return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/*
 * The state word is [gen:11][tat:53]. tat is the theoretical arrival time
 * in scaled ticks (ticks * scale, scale = rate / gcd(rate, period)), so
 * that the emission interval period / rate is the integer ts = period /
 * gcd and nothing is ever rounded. 64 bits cannot hold an absolute clock
 * reading times scale, so tat is relative to a time base, and the base
 * moves forward (a new generation) when the clock gets far from it.
 *
 * Each generation's base lives in base[gen & 1], tagged with the
 * generation in its low GEN_BITS bits (the base itself is rounded down to
 * a multiple of 2^GEN_BITS ticks, which costs nothing: any base <= now
 * will do). A reader that finds the tag of its word's generation in the
 * slot has the right base: the slot can only be rewritten for generation
 * gen + 2, and that needs the word to have moved on to gen + 1 first.
 *
 * Bounds: n (now, scaled) <= REBASE_AT = 2^52 before a rebase is forced;
 * burst * ts <= 2^50 and a wait <= 2^50 (validated / capped), so every
 * tat ever stored is <= 2^52 + 2^51 < 2^53, and no sum below overflows.
 */
#define GEN_BITS 11
#define TAT_BITS 53
#define GEN_MASK ((UINT64_C(1) << GEN_BITS) - 1)
#define TAT_MASK ((UINT64_C(1) << TAT_BITS) - 1)
#define REBASE_AT (UINT64_C(1) << 52)

/*
 * Metric counters are striped per thread (resil__thread_stripe): each
 * stripe is one cache line, so a thread's counting writes a line no other
 * thread writes (while there are at most NSTRIPES threads), and the
 * metrics getters sum the stripes. The state words stay alone on their
 * own lines. The struct is placed at a cache-line boundary inside an
 * over-sized allocation (mem), so these lines are real cache lines.
 */
#define NSTRIPES 8u

/* Rate limiter stripe. granted_permits is derived: granted_calls +
 * extra_permits, where only an acquire of k > 1 adds k - 1, so a granted
 * single permit costs one add. */
typedef struct rl_stripe {
	uint64_t granted_calls; /* grants decided on the shared state */
	uint64_t extra_permits; /* k - 1 of those grants with k > 1 */
	uint64_t rejected_calls;
	uint64_t waited_calls;
	/* The batch cache (batch > 0 only): filled counts the permits ever
	 * put in it, used those ever granted from it (so used is also the
	 * permits it granted), used_extra the k - 1 of its grants with
	 * k > 1. It holds filled - used <= batch permits: used only grows
	 * by a CAS that keeps used <= filled, filled only by a CAS that
	 * keeps filled - used <= batch. */
	uint64_t filled;
	uint64_t used;
	uint64_t used_extra;
	uint64_t pad;
} rl_stripe;

struct resil_ratelimit {
	uint64_t state; /* written by every grant: its own cache line */
	char pad0[RESIL__CACHELINE - sizeof(uint64_t)];
	uint64_t base[2]; /* read by every decision, written rarely */
	char pad1[RESIL__CACHELINE - 2 * sizeof(uint64_t)];
	rl_stripe stripes[NSTRIPES];
	/* Read-only after creation. */
	uint64_t scale; /* rate / gcd(rate, period) */
	uint64_t ts;    /* emission interval, scaled: period / gcd */
	uint64_t bs;    /* burst * ts */
	/* Issue 42: the part of the burst each class may use, scaled
	 * (RL_CLS_*: bs less reserve_critical + reserve_default, less
	 * reserve_critical, bs); bs for each without reservations. */
	uint64_t bsc[3];
	uint64_t rebase_ticks; /* REBASE_AT / scale */
	uint64_t period;
	uint32_t rate;
	uint32_t burst;
	uint32_t batch;   /* 0: exact */
	uint32_t kmax[3]; /* the most permits a class may ask: bsc / ts */
	/* The GCRA word, &state here or (shared) in a shared-memory region
	 * (lib/limit_shared.h); in both its bases are the next cache line,
	 * RL_BASE(rl). */
	uint64_t *statep;
	resil_limit_listener_fn listener;
	void *listener_ctx;
	resil_clock clock;
	resil_allocator alloc;
	void *mem; /* what was allocated: the struct sits aligned inside */
};

_Static_assert(sizeof(rl_stripe) == RESIL__CACHELINE, "rl_stripe size");

/* The classes' indices in bsc (resil_priority - 1). */
#define RL_CLS_SHEDDABLE 0
#define RL_CLS_DEFAULT 1
#define RL_CLS_CRITICAL 2

/* The time bases: the cache line after the state word's. */
#define RL_BASE(rl) ((rl)->statep + RESIL__CACHELINE / sizeof(uint64_t))
_Static_assert(offsetof(struct resil_ratelimit, base) == RESIL__CACHELINE,
    "ratelimit: base on its own line");
_Static_assert(
    offsetof(struct resil_ratelimit, stripes) == 2 * RESIL__CACHELINE,
    "ratelimit: stripes line-aligned");
_Static_assert(offsetof(struct resil_ratelimit, scale) ==
        (2 + NSTRIPES) * RESIL__CACHELINE,
    "ratelimit: configuration after the stripes");

static inline rl_stripe *
rl_my_stripe(resil_ratelimit *rl)
{
	return &rl->stripes[resil__thread_stripe(NSTRIPES)];
}

/* Count a grant of k permits decided on the shared state: one add for
 * k = 1. */
static inline void
rl_granted(rl_stripe *sp, uint32_t k)
{
	resil__inc64(&sp->granted_calls);
	if (k > 1)
		resil__faa64(&sp->extra_permits, k - 1);
}

/* A refusal of k permits at now, due in ticks (lib/limit.c): counted,
 * told to the listener, *retry_after written; RESIL_E_LIMITED. */
resil_err resil__rl_refuse(resil_ratelimit *rl, uint32_t k, uint64_t ticks,
    uint64_t now, uint64_t *retry_after);

/* Move the time base to (about) now (lib/limit.c); the caller of a
 * decision starts over after it in every case. */
void resil__rl_rebase(
    resil_ratelimit *rl, uint64_t w, uint64_t base, uint64_t now);

/* The clock, which _new() made sure has a now function. */
static inline uint64_t
rl_now(const resil_ratelimit *rl)
{
	return rl->clock.now(rl->clock.ctx);
}

/*
 * The GCRA decision at clock reading now, against the allowance of class
 * cls, rl->bsc[cls] scaled ticks (the whole burst for the critical class
 * and for every class without reservations: the permits left after a
 * grant are never fewer than the classes above cls reserve). Grants
 * when the k permits are due within wait_max_s scaled ticks of now (0:
 * only when due now),
 * storing the ticks to wait in *ticks; otherwise stores the ticks until
 * they would be due (>= 1) and returns RESIL_E_LIMITED.
 *
 * With more > 0 (and wait_max_s 0: the batch refill), a grant also takes
 * up to more further permits, as many as are due now, in the same CAS,
 * and adds their number to *got (which the exact callers pass as NULL,
 * with more 0, so that code folds away).
 */
static LIMIT_INLINE resil_err
rl_take(resil_ratelimit *rl, uint64_t now, uint32_t k, uint32_t more,
    uint64_t wait_max_s, unsigned cls, uint64_t *ticks, uint32_t *got)
{
	uint64_t need = (uint64_t)k * rl->ts;
	/* Read once: the atomics below would make the compiler reload it. */
	uint64_t *const st = rl->statep;
	uint64_t *const bases = st + RESIL__CACHELINE / sizeof(uint64_t);
	uint64_t w, gen, b, base, n, tat, t, nt, lim, excess, x;

	for (;;) {
		w = resil__load64(st);
		gen = w >> TAT_BITS;
		b = resil__load64(&bases[gen & 1]);
		if (RESIL__UNLIKELY((b & GEN_MASK) != gen)) {
			/* The word moved on twice since we read it. */
			resil__stall();
			continue;
		}
		base = b & ~GEN_MASK;
		if (RESIL__UNLIKELY(
		        now > base && now - base > rl->rebase_ticks)) {
			resil__rl_rebase(rl, w, base, now);
			continue;
		}
		/* A reading before the base (a clock that went back past a
		 * rebase) counts as the base for the schedule; but a wait
		 * must first cover the way back up to the base, or waiting
		 * the answer would not make the permits due. */
		n = RESIL__LIKELY(now > base) ? (now - base) * rl->scale : 0;
		tat = w & TAT_MASK;
		t = tat > n ? tat : n;
		nt = t + need;
		/* Read here, after the word: a load in the loop, as bs's. */
		lim = n + rl->bsc[cls];
		if (RESIL__LIKELY(nt <= lim)) {
			x = 0;
			if (more > 0) {
				/* More permits, as many as are due now. */
				x = (lim - nt) / rl->ts;
				if (x > more)
					x = more;
				nt += x * rl->ts;
			}
			if (!resil__cas64(st, w, (gen << TAT_BITS) | nt))
				continue;
			if (more > 0)
				*got += (uint32_t)x;
			*ticks = 0;
			return RESIL_OK;
		}
		excess = nt - lim;
		if (now < base)
			excess = sat_add_u64(
			    excess, sat_mul_u64(base - now, rl->scale));
		*ticks = ceil_div(excess, rl->scale);
		if (excess <= wait_max_s) {
			if (!resil__cas64(st, w, (gen << TAT_BITS) | nt))
				continue;
			return RESIL_OK;
		}
		return RESIL_E_LIMITED;
	}
}

#endif /* RESIL_LIMIT_RATE_H */

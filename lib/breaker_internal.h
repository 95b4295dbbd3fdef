/*
 * Private: the breaker's layout, shared by its sources. lib/breaker.c
 * holds the state machine (creation, windows, transitions, acquire,
 * record, manual control) and the lock-free protocol, described at its
 * top; lib/breaker_config.c validates a configuration;
 * lib/breaker_metrics.c reads the metrics and names states and reasons;
 * lib/breaker_snapshot.c writes and restores snapshots. The last three
 * call into breaker.c through the functions below, never the other way.
 * Never installed.
 */
#ifndef RESIL_BREAKER_INTERNAL_H
#define RESIL_BREAKER_INTERNAL_H

#include <resil/breaker.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "atomic.h"
#include "breaker_fast.h"
#include "breaker_shared.h"
#include "internal.h"
#include "proc.h"

#define W_PROBE_SHIFT 4
#define W_PROBE_ONE (UINT64_C(1) << W_PROBE_SHIFT)
#define W_PROBE_MASK (UINT64_C(0xffff) << W_PROBE_SHIFT)
#define W_EP_SHIFT 20
/* While TRANSIT is set in a shared breaker, the probe field names the
 * owner of the transition: its process slot + 1 (7 bits), the state it
 * left (3 bits) and the reason (4 bits), so another process can finish
 * the transition of an owner that died. Local breakers leave it 0. */
#define W_OWNER(slot, from, why)                             \
	((((uint64_t)(slot) + 1) | ((uint64_t)(from) << 7) | \
	     ((uint64_t)(why) << 10))                        \
	    << W_PROBE_SHIFT)

#define MAX_PROBES 32767u
#define MAX_COUNT_WINDOW (1u << 20)
#define MAX_TIME_BUCKETS 3600u

/* The probe report word of a HALF_OPEN episode: reported, failed and slow
 * counts, tagged with the episode so that a report that raced a later
 * transition cannot land in the wrong episode. */
#define P_FIELD_BITS 15
#define P_FIELD_MASK UINT64_C(0x7fff)
#define P_REPORTED(p) ((p)&P_FIELD_MASK)
#define P_FAILED(p) (((p) >> 15) & P_FIELD_MASK)
#define P_SLOW(p) (((p) >> 30) & P_FIELD_MASK)
#define P_TAG(p) ((p) >> 45)
#define P_TAG_OF(ep) ((ep)&UINT64_C(0x7ffff))

/* Count-window slot: FILLED marks a slot that holds an outcome. */
#define SLOT_FAIL 0x1u
#define SLOT_SLOW 0x2u
#define SLOT_BAD (SLOT_FAIL | SLOT_SLOW)
#define SLOT_FILLED 0x80u

#define NSTRIPES 8u

/* A permit's other flags (PERMIT_VALID: breaker_fast.h). */
#define PERMIT_PROBE 0x2u
#define PERMIT_TIMED 0x4u
/* episode holds the permit's episode. A permit whose flags are exactly
 * PERMIT_VALID (an untimed CLOSED grant) holds the word it was granted
 * under in start instead, and its episode is that word's: the fast acquire
 * writes no episode. */
#define PERMIT_EPF 0x8u

typedef struct stripe {
	uint64_t successes;
	uint64_t failures;
	uint64_t slow;
	uint64_t ignored;
	uint64_t rejections;
	uint64_t stale;
	/* Records writing window or probe state now, by episode parity. */
	uint64_t active[2];
} stripe;

typedef struct bucket {
	uint64_t epoch; /* bucket index + 1; 0: never used */
	uint64_t calls;
	uint64_t failures;
	uint64_t slow;
} bucket;

/* Each field that many threads write sits on its own cache line: the
 * success path of CLOSED must not bounce a line between cores. */
struct bstate {
	uint64_t word;
	uint64_t pad0[7];
	uint64_t since; /* clock reading when the current state began */
	uint64_t wait;  /* the current OPEN wait */
	uint64_t probes;
	/* Which counts an OPEN breaker's metrics show: 0, the window that
	 * tripped it; 1, the probes of the HALF_OPEN episode that reopened
	 * it. Written by the transition's owner. */
	uint64_t open_shows_probes;
	/* since + wait (saturated), written with them by a transition's
	 * owner: where an OPEN wait ends, in one load (acquire_other()). */
	uint64_t until;
	uint64_t pad1[3];
	uint64_t consecutive;
	uint64_t pad2[7];
	uint64_t head; /* count window: outcomes ever added since reset */
	uint64_t win_failures;
	uint64_t win_slow;
	/* Count window: slots not holding a plain success (a failure, a
	 * slow call, or nothing yet), so 0 exactly when the window is full
	 * of successes: the one word FAST_COUNT's success tests. */
	uint64_t win_bad;
	uint64_t pad3[4];
	stripe stripes[NSTRIPES];
	/* Then the window: uint8_t slots[window_size] (COUNT) or
	 * bucket buckets[window_size] (TIME). */
};

/* The shared part of a breaker in a region: announcements per process (a
 * dead process's are skipped by its slot), and the last transitions, for
 * the listeners of every process. */
typedef struct shared_ann {
	uint64_t active[2];
	uint64_t pad[6];
} shared_ann;

typedef struct shared_ev {
	uint64_t seq; /* written last; 0: empty */
	uint64_t time;
	uint32_t from, to, reason, pad;
} shared_ev;

struct bshared {
	shared_ann ann[RESIL__PROCS];
	shared_ev ring[RESIL__SHM_RING];
};

struct resil_breaker {
	resil_breaker_config cfg;
	resil_allocator alloc;
	resil_clock clock;
	uint64_t (*coarse)(void *ctx); /* clock.coarse, else clock.now */
	size_t alloc_size;
	uint32_t min_calls; /* capped at a count window's size */
	bool timing;        /* slow-call detection needs durations */
	bool rate_triggers; /* a failure or slow rate is configured */
	/* Which success needs no announcement (record's fast path):
	 * FAST_CONSEC, the consecutive trigger alone, without timing;
	 * FAST_COUNT, a count window alone, without timing; FAST_TIME, a
	 * time window alone, without timing (its own success path,
	 * time_success()); FAST_WINDOW, any other window without timing;
	 * else 0. */
	uint8_t fast;
	void *mem; /* the allocation; st is aligned inside it */
	struct bstate *st;
	/* The acquire fast path reads this word: &st->word, or never_fast
	 * where timing is needed (so it needs no test of its own). */
	const uint64_t *acq_word;
	/* The record fast path's one test beyond the permit: FAST_CONSEC,
	 * &st->consecutive (a success ends no streak when it is 0);
	 * FAST_COUNT, &st->win_bad (a window full of successes: one more
	 * changes nothing); other modes, never_zero. */
	const uint64_t *streak;
	/* The same word for a success whose duration the caller measured
	 * (resil_breaker_record_duration(), a pipeline's timed call): the
	 * streak this breaker would have without timing; such a success
	 * changes nothing when its duration is <= slow_ns too (the
	 * threshold; UINT64_MAX without timing). */
	const uint64_t *tstreak;
	uint64_t slow_ns;
	uint8_t *slots;
	/* TIME: NSTRIPES arrays of window_size buckets, stride apart (a
	 * whole number of cache lines), so threads on different stripes
	 * never write the same line. */
	bucket *buckets;
	uint32_t stride;
	/* Shared mode (lib/shm.c): st lives in a region. */
	bool shared;
	unsigned slot;            /* this process's slot */
	const resil__proc *procs; /* the region's process table */
	struct bshared *sh;
	uint64_t delivered; /* events given to this process's listener */
	resil__spinlock deliver_lock;
};

/* ---- the state word ---- */

static inline resil_breaker_state
w_state(uint64_t w)
{
	return (resil_breaker_state)(w & W_STATE_MASK);
}

/* w's state for a reader outside the machine: RESIL_BREAKER_CORRUPT when
 * the word holds none (a damaged shm region). */
static inline resil_breaker_state
w_state_checked(uint64_t w)
{
	uint64_t s = w & W_STATE_MASK;

	return (resil_breaker_state)(s <= RESIL_BREAKER_METRICS_ONLY
	        ? s
	        : RESIL_BREAKER_CORRUPT);
}

static inline uint64_t
w_episode(uint64_t w)
{
	return w >> W_EP_SHIFT;
}

static inline uint32_t
w_probes(uint64_t w)
{
	return (uint32_t)((w & W_PROBE_MASK) >> W_PROBE_SHIFT);
}

static inline uint64_t
w_make(resil_breaker_state s, uint64_t episode, uint64_t flags)
{
	return (episode << W_EP_SHIFT) | flags | (uint64_t)s;
}

static inline uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline uint64_t
now_coarse(const resil_breaker *b)
{
	return b->coarse(b->clock.ctx);
}

static inline uint64_t
now_precise(const resil_breaker *b)
{
	return b->clock.now(b->clock.ctx);
}

static inline stripe *
my_stripe(resil_breaker *b)
{
	return &b->st->stripes[resil__thread_stripe(NSTRIPES)];
}

typedef struct totals {
	uint64_t calls;
	uint64_t failures;
	uint64_t slow;
} totals;

static inline uint64_t
clamp_count(uint64_t v, uint64_t max)
{
	/* Racing adds and evictions may leave a transiently "negative"
	 * (wrapped) count: read it as signed and clamp. */
	if ((int64_t)v < 0)
		return 0;
	return v > max ? max : v;
}

/* The bucket index of time now. The clock's last tick shares the bucket
 * of the tick before it, so that index + 1 (a bucket's epoch) never wraps
 * to 0, "never used". */
static inline uint64_t
bucket_index(const resil_breaker *b, uint64_t now)
{
	if (RESIL__UNLIKELY(now == UINT64_MAX))
		now--;
	return now / b->cfg.bucket_ns;
}

/* ---- what the other breaker sources call in lib/breaker.c ---- */

/* The window's figures at now. */
totals resil__breaker_window_totals(resil_breaker *b, uint64_t now);

/* Empty the window and the consecutive count (by a transition's owner). */
void resil__breaker_window_reset(resil_breaker *b);

/* Wait for the transition in progress to be published; false when this
 * thread is making it (a listener calling back). */
bool resil__breaker_await_transit(resil_breaker *b);

/* Writes a transition's new state's fields in place of emptying them
 * (restore: from a snapshot), called by its owner after the old episode
 * quiesced. */
typedef void (*resil__breaker_fill_fn)(resil_breaker *b, const void *ctx);

/* Move from the state in word w to `to` at time, with fill(b, ctx)
 * writing the new state's fields. False when the word is no longer w. */
bool resil__breaker_transition_fill(resil_breaker *b, uint64_t w,
    resil_breaker_state to, resil_breaker_reason reason, uint64_t time,
    resil__breaker_fill_fn fill, const void *ctx);

/* The fast paths, for a handle that wraps a breaker: breaker_fast.h. */

#endif /* RESIL_BREAKER_INTERNAL_H */

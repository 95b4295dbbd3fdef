/*
 * resil breaker: the lock-free circuit breaker.
 *
 * All mutable state lives in struct bstate: integers only, no pointers, so
 * that it can later be placed in shared memory or mirrored to a store. Its
 * heart is one 64-bit word:
 *
 *   bits  0..2   state (resil_breaker_state)
 *   bit   3      TRANSIT: one thread owns a transition in progress
 *   bits  4..19  probe permits granted in this HALF_OPEN episode
 *   bits 20..63  episode: +1 on every transition (the event's seq)
 *
 * A transition is a compare-and-swap from the word the deciding thread saw
 * to (new state, episode + 1, TRANSIT). Exactly one thread wins it. The
 * winner alone then writes the new state's fields (entry time, OPEN wait,
 * emptied counts), tells the listener, and publishes the word without
 * TRANSIT. While TRANSIT is set, acquires wait for it to clear (a few
 * stores and the listener call) and then decide on the new state, so a
 * transition in progress never turns a call away by itself; outcomes of
 * the old episode are stale. Nothing can observe half-reset counts, and
 * listener calls are strictly ordered.
 *
 * An outcome must never land in the window of a later episode. A record
 * that will write window or probe state announces itself first: it adds
 * one to its stripe's `active[episode & 1]`, then re-reads the word; only
 * if the episode is still its permit's does it write, and it withdraws the
 * announcement when done. The owner of a transition out of episode E,
 * after its compare-and-swap and before it empties any count, waits until
 * no announcement for E's parity is left. Both sides are sequentially
 * consistent read-modify-writes followed by a load (Dekker's pattern), so
 * either the record sees the new episode and writes nothing, or the owner
 * sees the announcement and waits for the write to finish. The announced
 * stretch contains no clock read, no callback and no wait, so it is a few
 * instructions long; a record reads its clock before it announces.
 */
#include <resil/breaker.h>

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "breaker_shared.h"
#include "internal.h"
#include "proc.h"

/* A permit's flags (PERMIT_*): lib/breaker_internal.h. */

#define FAST_CONSEC 1u
#define FAST_COUNT 2u
#define FAST_WINDOW 3u /* no timing: straight to window_record() */
#define FAST_TIME 4u   /* a time window alone: time_success() */

/* The breaker whose listener this thread is running, if any: a listener
 * that calls back into its own breaker in a way that would wait for the
 * transition it is part of gets RESIL_E_MISUSE instead of a hang. */
static RESIL__TLS const resil_breaker *in_listener;

void (*resil__breaker_transit_hook)(void);

/* Targets of acq_word and streak that send every call to the full path:
 * TRANSIT is never clear, the streak never 0. */
static const uint64_t never_fast = W_TRANSIT;
static const uint64_t never_zero = 1;

/* This thread's lifetime-success counter (lib/breaker_fast.h) is defined
 * in lib/internal.c, which forgets it when the thread's stripe goes. */

/* ---- creation ---- */

/* The bytes of a breaker's window. */
static size_t
window_bytes_of(const resil_breaker_config *cfg)
{
	if (cfg->window_type == RESIL_WINDOW_COUNT)
		return cfg->window_size;
	return (size_t)(((cfg->window_size + 1u) & ~1u) * NSTRIPES) *
	    sizeof(bucket);
}

/* A handle for cfg (validated), without its state. */
static resil_err
handle_new(
    resil_breaker **out, const resil_breaker_config *cfg, resil_diag *diag)
{
	resil_breaker *b;
	const resil_allocator *a;
	resil_err err;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "breaker: out is NULL");
	err = resil_breaker_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	a = resil__allocator(cfg->alloc);
	b = resil__alloc(a, sizeof(*b));
	if (b == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "breaker: out of memory");
	memset(b, 0, sizeof(*b));
	memcpy(&b->cfg, cfg, sizeof(b->cfg));
	b->alloc = *a;
	b->cfg.alloc = &b->alloc;
	b->clock = cfg->clock != NULL ? *cfg->clock : *resil_clock_system();
	b->cfg.clock = &b->clock;
	b->coarse = b->clock.coarse != NULL ? b->clock.coarse : b->clock.now;
	*out = b;
	return RESIL_OK;
}

/* Point b at its state st (cache-line aligned, window after it) and set
 * the derived fields; init writes a fresh CLOSED state. */
static void
handle_bind(resil_breaker *b, struct bstate *st, bool init)
{
	const resil_breaker_config *cfg = &b->cfg;

	b->st = st;
	b->acq_word = cfg->slow_threshold_ns > 0 ? &never_fast : &st->word;
	if (cfg->window_type == RESIL_WINDOW_COUNT)
		b->slots = (uint8_t *)(b->st + 1);
	else {
		b->buckets = (bucket *)(void *)(b->st + 1);
		/* Two 32-byte buckets make a 64-byte line. */
		b->stride = (cfg->window_size + 1u) & ~1u;
	}
	b->min_calls = cfg->min_calls;
	if (cfg->window_type == RESIL_WINDOW_COUNT &&
	    b->min_calls > cfg->window_size)
		b->min_calls = cfg->window_size;
	b->timing = cfg->slow_threshold_ns > 0;
	b->rate_triggers = cfg->failure_rate_pct > 0 || cfg->slow_rate_pct > 0;
	if (!b->timing && !b->rate_triggers)
		b->fast = FAST_CONSEC;
	else if (!b->timing && b->slots != NULL &&
	    cfg->consecutive_failures == 0)
		b->fast = FAST_COUNT;
	else if (!b->timing && b->buckets != NULL &&
	    cfg->consecutive_failures == 0 && !b->shared &&
	    cfg->bucket_ns > 1)
		b->fast = FAST_TIME;
	else if (!b->timing)
		b->fast = FAST_WINDOW;
	b->streak = b->fast == FAST_CONSEC ? &st->consecutive
	    : b->fast == FAST_COUNT        ? &st->win_bad
	                                   : &never_zero;
	/* As streak, were there no timing: a success the caller timed
	 * tests its duration against slow_ns itself. */
	b->tstreak = !b->rate_triggers ? &st->consecutive
	    : b->slots != NULL && cfg->consecutive_failures == 0
	    ? &st->win_bad
	    : &never_zero;
	b->slow_ns = b->timing ? cfg->slow_threshold_ns : UINT64_MAX;
	if (init) {
		b->st->word = w_make(RESIL_BREAKER_CLOSED, 0, 0);
		/* Every slot of an empty count window is "not a success". */
		b->st->win_bad = b->slots != NULL ? cfg->window_size : 0;
		b->st->since = now_coarse(b);
		b->st->wait = cfg->open_wait_ns;
		b->st->until = sat_add(b->st->since, b->st->wait);
	}
	resil__fence();
}

resil_err
resil_breaker_new(
    resil_breaker **out, const resil_breaker_config *cfg, resil_diag *diag)
{
	resil_breaker *b;
	size_t size;
	uintptr_t p;
	resil_err err;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "breaker: out is NULL");
	err = handle_new(&b, cfg, diag);
	if (err != RESIL_OK)
		return err;
	/* One allocation holds the state and its window, aligned to a cache
	 * line: memory per breaker is fixed here and never grows. */
	size = sizeof(struct bstate) + window_bytes_of(cfg) + RESIL__CACHELINE;
	b->mem = resil__alloc(&b->alloc, size);
	if (b->mem == NULL) {
		resil__free(&b->alloc, b, sizeof(*b));
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "breaker: out of memory");
	}
	b->alloc_size = size;
	memset(b->mem, 0, size);
	p = ((uintptr_t)b->mem + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	handle_bind(b, (struct bstate *)p, true);
	*out = b;
	return RESIL_OK;
}

/* ---- shared mode (lib/shm.c places the state in a region) ---- */

static size_t
shared_offset(const resil_breaker_config *cfg)
{
	return (sizeof(struct bstate) + window_bytes_of(cfg) +
	           RESIL__CACHELINE - 1) &
	    ~(size_t)(RESIL__CACHELINE - 1);
}

_Static_assert(sizeof(shared_ann) == 64 && sizeof(struct bshared) % 64 == 0,
    "lib/shm.c relies on the shared part's layout");
_Static_assert(W_TRANSIT == 8 && W_STATE_MASK == 7 &&
        W_OWNER(0, 1, 0) == (UINT64_C(1) << 4 | UINT64_C(1) << 11),
    "resil__shared_word_corrupt() reads the word's layout");

size_t
resil__breaker_shared_size(const resil_breaker_config *cfg)
{
	return shared_offset(cfg) + sizeof(struct bshared);
}

size_t
resil__breaker_shared_tail(void)
{
	return sizeof(struct bshared);
}

resil_err
resil__breaker_new_shared(resil_breaker **out, const resil_breaker_config *cfg,
    void *mem, bool init, const resil__proc *procs, unsigned slot,
    resil_diag *diag)
{
	resil_breaker_config c;
	resil_breaker *b;
	resil_err err;

	if (cfg == NULL || mem == NULL || procs == NULL ||
	    slot >= RESIL__PROCS ||
	    ((uintptr_t)mem & (RESIL__CACHELINE - 1)) != 0)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "breaker: bad shared placement");
	c = *cfg;
	/* A probe permit of a process that dies must not be held for ever:
	 * the HALF_OPEN episode ends after this at the latest. */
	if (c.max_half_open_ns == 0)
		c.max_half_open_ns = c.open_wait_ns > 0 ? c.open_wait_ns : 1;
	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "breaker: out is NULL");
	err = handle_new(&b, &c, diag);
	if (err != RESIL_OK)
		return err;
	b->shared = true;
	b->slot = slot;
	b->procs = procs;
	b->sh = (struct bshared *)(void *)((uint8_t *)mem + shared_offset(&c));
	resil__spin_init(&b->deliver_lock);
	handle_bind(b, (struct bstate *)mem, init);
	/* Events before this process attached are not its to hear. */
	b->delivered = w_episode(resil__load64(&b->st->word));
	/* With a listener, every acquire goes to acquire_shared(), which
	 * first gives it the transitions other processes made. */
	if (b->cfg.listener != NULL)
		b->acq_word = &never_fast;
	*out = b;
	return RESIL_OK;
}

/* Give this process's listener the transitions it has not heard yet, in
 * order, from the ring. Events that fell out of the ring are skipped. */
static void
deliver(resil_breaker *b)
{
	resil_breaker_event ev;
	const resil_breaker *outer;
	uint64_t cur, seq;

	if (b->cfg.listener == NULL || in_listener == b)
		return;
	resil__spin_lock(&b->deliver_lock);
	cur = w_episode(resil__load64(&b->st->word));
	for (seq = b->delivered + 1; seq <= cur; seq++) {
		shared_ev *e = &b->sh->ring[seq % RESIL__SHM_RING];

		if (cur - seq >= RESIL__SHM_RING)
			continue; /* overwritten: missed */
		if (resil__load64(&e->seq) != seq)
			break; /* being written (a transition in progress) */
		ev.seq = seq;
		ev.time = resil__load64(&e->time);
		ev.from = (resil_breaker_state)e->from;
		ev.to = (resil_breaker_state)e->to;
		ev.reason = (resil_breaker_reason)e->reason;
		if (resil__load64(&e->seq) != seq)
			break;
		resil__store64(&b->delivered, seq);
		outer = in_listener;
		in_listener = b;
		b->cfg.listener(&ev, b->cfg.listener_ctx);
		in_listener = outer;
	}
	if (seq > cur)
		resil__store64(&b->delivered, cur);
	resil__spin_unlock(&b->deliver_lock);
}

resil_err
resil_breaker_poll(resil_breaker *b)
{
	if (b == NULL)
		return RESIL_E_INVAL;
	if (b->shared)
		deliver(b);
	return RESIL_OK;
}

void
resil_breaker_free(resil_breaker *b)
{
	resil_allocator a;

	if (b == NULL)
		return;
	a = b->alloc;
	if (b->mem != NULL) /* a shared breaker's state stays in its region */
		resil__free(&a, b->mem, b->alloc_size);
	resil__free(&a, b, sizeof(*b));
}

/* ---- the sliding window ---- */

static void
window_reset(resil_breaker *b)
{
	struct bstate *st = b->st;
	uint32_t i;

	resil__store64(&st->consecutive, 0);
	resil__store64(&st->head, 0);
	resil__store64(&st->win_failures, 0);
	resil__store64(&st->win_slow, 0);
	resil__store64(
	    &st->win_bad, b->slots != NULL ? b->cfg.window_size : 0);
	if (b->slots != NULL) {
		for (i = 0; i < b->cfg.window_size; i++)
			resil__store8(&b->slots[i], 0);
	} else {
		for (i = 0; i < b->stride * NSTRIPES; i++) {
			resil__store64(&b->buckets[i].epoch, 0);
			resil__store64(&b->buckets[i].calls, 0);
			resil__store64(&b->buckets[i].failures, 0);
			resil__store64(&b->buckets[i].slow, 0);
		}
	}
}

static totals
window_totals(resil_breaker *b, uint64_t now)
{
	struct bstate *st = b->st;
	totals t = { 0, 0, 0 };
	uint64_t idx, e;
	uint32_t i, n = b->cfg.window_size;

	if (b->slots != NULL) {
		uint64_t head = resil__load64(&st->head);

		t.calls = head < n ? head : n;
		t.failures =
		    clamp_count(resil__load64(&st->win_failures), t.calls);
		t.slow = clamp_count(resil__load64(&st->win_slow), t.calls);
		return t;
	}
	idx = bucket_index(b, now);
	/* Padding buckets of a stripe stay empty (epoch 0). */
	for (i = 0; i < b->stride * NSTRIPES; i++) {
		e = resil__load64(&b->buckets[i].epoch);
		/* Bucket e - 1 is live while idx - (e - 1) < n. */
		if (e == 0 || e - 1 > idx || idx - (e - 1) >= n)
			continue;
		t.calls += resil__load64(&b->buckets[i].calls);
		t.failures += resil__load64(&b->buckets[i].failures);
		t.slow += resil__load64(&b->buckets[i].slow);
	}
	return t;
}

/* Add one outcome; a time window's `now` is read by the caller, before
 * it announced itself. Returns true when the add may have raised a rate
 * (so the trip rule must be evaluated). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline bool
window_add(resil_breaker *b, bool fail, bool slow, uint64_t now)
{
	struct bstate *st = b->st;

	if (b->slots != NULL) {
		uint64_t i = resil__faa64(&st->head, 1);
		/* While the window fills, a success can lift the count to
		 * min_calls and so make a rate count. */
		bool filling = i + 1 == b->min_calls;
		uint8_t nv = (uint8_t)(SLOT_FILLED | (fail ? SLOT_FAIL : 0) |
		    (slow ? SLOT_SLOW : 0));
		uint8_t *slot = &b->slots[i % b->cfg.window_size];
		uint8_t ov = resil__load8(slot);

		/* The same outcome over the same outcome (a success over a
		 * success, the common case) needs no write: it is as if it
		 * had been written before any racing lap of the ring. */
		if (ov != nv)
			ov = resil__fas8(slot, nv);

		if ((ov & SLOT_FAIL) != (nv & SLOT_FAIL))
			resil__faa64(&st->win_failures,
			    fail ? 1 : UINT64_MAX); /* + or - 1 */
		if ((ov & SLOT_SLOW) != (nv & SLOT_SLOW))
			resil__faa64(&st->win_slow, slow ? 1 : UINT64_MAX);
		/* win_bad counts the slots that are not a success, the
		 * empty ones included (ov 0: the window is filling). */
		if ((ov == 0 || (ov & SLOT_BAD) != 0) !=
		    ((nv & SLOT_BAD) != 0))
			resil__faa64(
			    &st->win_bad, (nv & SLOT_BAD) ? 1 : UINT64_MAX);
		/* Otherwise a success never raises a count window's rates:
		 * it adds a non-failure or evicts an outcome. */
		return fail || slow || filling;
	} else {
		uint64_t idx = bucket_index(b, now);
		bucket *bk =
		    &b->buckets[resil__thread_stripe(NSTRIPES) * b->stride +
		        idx % b->cfg.window_size];
		uint64_t e = resil__load64(&bk->epoch);
		bool rolled = false;
		uint64_t calls;

		if (e < idx + 1 && resil__cas64(&bk->epoch, e, idx + 1)) {
			/* Recycle the bucket. An add racing this reset may
			 * be lost; lifetime totals stay exact. */
			resil__store64(&bk->calls, 0);
			resil__store64(&bk->failures, 0);
			resil__store64(&bk->slow, 0);
			rolled = true;
		}
		calls = resil__faa64(&bk->calls, 1) + 1;
		if (fail)
			resil__inc64(&bk->failures);
		if (slow)
			resil__inc64(&bk->slow);
		/* A success can raise a rate only when outcomes expire,
		 * which first shows as a rollover (time reached a new
		 * bucket: every stripe sees its own on its first add there),
		 * or lift the window to min_calls, which needs this bucket to
		 * hold no more than min_calls outcomes (the window holds at
		 * least as many as any one bucket of any stripe). */
		return fail || slow || rolled || calls <= b->min_calls;
	}
}

/* ---- transitions ---- */

static uint64_t
grow_wait(const resil_breaker *b, uint64_t wait)
{
	double next;
	uint64_t cap =
	    b->cfg.open_wait_max_ns ? b->cfg.open_wait_max_ns : UINT64_MAX;

	if (b->cfg.open_wait_multiplier <= 1.0)
		return wait;
	next = (double)wait * b->cfg.open_wait_multiplier;
	/* 2^64 as a double: anything at or above it saturates. */
	if (next >= 18446744073709551616.0 || (uint64_t)next >= cap)
		return cap;
	return (uint64_t)next;
}

/* Wait until no record of an episode of parity par is writing window or
 * probe state. Records announce themselves only for a few instructions
 * (no clock read, callback or wait inside), so this is short unless the
 * recording thread is preempted in that stretch. */
static void
quiesce(resil_breaker *b, unsigned par)
{
	unsigned i, spins = 0, rounds;

	if (b->shared) {
		/* A process that died announced stays announced: after a
		 * while, its slot is checked and skipped. */
		for (i = 0; i < RESIL__PROCS; i++)
			for (rounds = 0; resil__load64_after_rmw(
			                     &b->sh->ann[i].active[par]) != 0;
			     rounds++) {
				resil__backoff(&spins);
				if (rounds % 4096 == 4095 &&
				    !resil__proc_alive(b->procs, i))
					break;
			}
		return;
	}
	for (i = 0; i < NSTRIPES; i++)
		while (resil__load64_after_rmw(
		           &b->st->stripes[i].active[par]) != 0)
			resil__backoff(&spins);
}

/* Announce a record of episode ep, and confirm ep is still the current
 * episode (word without TRANSIT). On false the announcement is already
 * withdrawn and the outcome is stale. */
/* The announcement counters of this caller: its stripe's, or in a shared
 * breaker its process's. */
static inline uint64_t *
ann_of(resil_breaker *b, stripe *sp)
{
	if (RESIL__UNLIKELY(b->shared))
		return b->sh->ann[b->slot].active;
	return sp->active;
}

static inline bool
announce(resil_breaker *b, stripe *sp, uint64_t ep)
{
	uint64_t w, *a = ann_of(b, sp);

	resil__inc64(&a[ep & 1]);
	w = resil__load64_after_rmw(&b->st->word);
	if (RESIL__LIKELY(w_episode(w) == ep))
		return true; /* a word with TRANSIT has the next episode */
	resil__dec64(&a[ep & 1]);
	return false;
}

static inline void
withdraw(resil_breaker *b, stripe *sp, uint64_t ep)
{
	resil__faa64(&ann_of(b, sp)[ep & 1], UINT64_MAX); /* - 1 */
}

/* The rest of a transition, by the thread that owns it (won the CAS to
 * (to, ep, TRANSIT), or took it over from a dead owner): wait for the old
 * episode's announced records, write the new state's fields, tell the
 * listener(s), publish. */
static void
finish(resil_breaker *b, resil_breaker_state from, resil_breaker_state to,
    uint64_t ep, resil_breaker_reason reason, uint64_t time,
    resil__breaker_fill_fn fill, const void *ctx)
{
	struct bstate *st = b->st;
	resil_breaker_event ev;
	const resil_breaker *outer;

	/* Records of the old episode that confirmed it before the swap
	 * finish their writes first; later ones see the new episode and
	 * write nothing. */
	quiesce(b, (unsigned)((ep - 1) & 1));
	if (RESIL__UNLIKELY(resil__breaker_transit_hook != NULL) && b->shared)
		resil__breaker_transit_hook(); /* tests: die holding it */
	resil__store64(&st->since, time);
	if (fill != NULL) {
		fill(b, ctx);
		goto tell;
	}
	switch (to) {
	case RESIL_BREAKER_OPEN:
	case RESIL_BREAKER_FORCED_OPEN:
		/* Consecutive re-openings (from HALF_OPEN, automatic or by
		 * hand) grow the wait; anything else starts at the base. */
		if (to == RESIL_BREAKER_OPEN) {
			if (from == RESIL_BREAKER_HALF_OPEN)
				resil__store64(&st->wait,
				    grow_wait(b, resil__load64(&st->wait)));
			else
				resil__store64(&st->wait, b->cfg.open_wait_ns);
		}
		resil__store64(
		    &st->open_shows_probes, from == RESIL_BREAKER_HALF_OPEN);
		break;
	case RESIL_BREAKER_HALF_OPEN:
		resil__store64(&st->probes, P_TAG_OF(ep) << 45);
		break;
	case RESIL_BREAKER_CLOSED:
		resil__store64(&st->wait, b->cfg.open_wait_ns);
		window_reset(b);
		break;
	case RESIL_BREAKER_METRICS_ONLY:
		window_reset(b);
		break;
	case RESIL_BREAKER_DISABLED:
	case RESIL_BREAKER_CORRUPT: /* never a target */
		break;
	}
tell:
	resil__store64(&st->until,
	    sat_add(resil__load64(&st->since), resil__load64(&st->wait)));
	if (b->shared) {
		/* Every process's listener hears it, in order: from the ring,
		 * after the publication (a listener never runs while this
		 * process holds a transition of a shared breaker). */
		shared_ev *e = &b->sh->ring[ep % RESIL__SHM_RING];

		resil__store64(&e->seq, 0);
		resil__store64(&e->time, time);
		e->from = (uint32_t)from;
		e->to = (uint32_t)to;
		e->reason = (uint32_t)reason;
		resil__store64(&e->seq, ep);
		resil__store64(&st->word, w_make(to, ep, 0));
		deliver(b);
		return;
	}
	if (b->cfg.listener != NULL) {
		ev.seq = ep;
		ev.time = time;
		ev.from = from;
		ev.to = to;
		ev.reason = reason;
		outer = in_listener;
		in_listener = b;
		b->cfg.listener(&ev, b->cfg.listener_ctx);
		in_listener = outer;
	}
	resil__store64(&st->word, w_make(to, ep, 0));
}

/*
 * Move from the state in word w to `to`. Fails (returns false) when the
 * word is no longer w: another thread changed the state first. With fill,
 * the new state's fields are fill's (a restore's snapshot) instead of
 * being emptied.
 */
static bool
transition_ex(resil_breaker *b, uint64_t w, resil_breaker_state to,
    resil_breaker_reason reason, uint64_t time, resil__breaker_fill_fn fill,
    const void *ctx)
{
	uint64_t ep = w_episode(w) + 1;
	uint64_t owner = b->shared ? W_OWNER(b->slot, w_state(w), reason) : 0;

	if (!resil__cas64(&b->st->word, w, w_make(to, ep, W_TRANSIT | owner)))
		return false;
	/* This thread owns the transition until finish() publishes it. */
	finish(b, w_state(w), to, ep, reason, time, fill, ctx);
	return true;
}

/* A shared breaker's transition whose owner died (SIGKILL at any
 * instruction): take it over and finish it. */
static void
take_over(resil_breaker *b, uint64_t w)
{
	uint64_t bits = (w & W_PROBE_MASK) >> W_PROBE_SHIFT;
	unsigned owner = (unsigned)(bits & 0x7f);
	resil_breaker_state from = (resil_breaker_state)((bits >> 7) & 7);
	resil_breaker_reason why = (resil_breaker_reason)((bits >> 10) & 15);

	if (owner == 0 || resil__proc_alive(b->procs, owner - 1))
		return;
	if (!resil__cas64(&b->st->word, w,
	        (w & ~W_PROBE_MASK) | W_OWNER(b->slot, from, why)))
		return;
	finish(
	    b, from, w_state(w), w_episode(w), why, now_coarse(b), NULL, NULL);
}

static bool
transition(resil_breaker *b, uint64_t w, resil_breaker_state to,
    resil_breaker_reason reason, uint64_t time)
{
	return transition_ex(b, w, to, reason, time, NULL, NULL);
}

/* Wait for the transition in progress to be published. False when this
 * thread is the one making it (a listener calling back): waiting would
 * never end. */
static bool
await_transit(resil_breaker *b)
{
	unsigned spins = 0, rounds = 0;
	uint64_t w;

	if (in_listener == b)
		return false;
	while ((w = resil__load64(&b->st->word)) & W_TRANSIT) {
		/* A damaged region's word: no transition ends there. */
		if (b->shared && resil__shared_word_corrupt(w))
			return false;
		resil__backoff(&spins);
		/* Shared: an owner that takes this long may be dead. */
		if (b->shared && ++rounds % 8192 == 0)
			take_over(b, w);
	}
	return true;
}

/* ---- acquire ---- */

static resil_err
reject(resil_breaker *b, uint64_t *retry_after, uint64_t left)
{
	resil__inc64(&my_stripe(b)->rejections);
	if (retry_after != NULL)
		*retry_after = left;
	return RESIL_E_OPEN;
}

#if defined(__GNUC__)
#define RESIL__NOINLINE __attribute__((noinline))
#else
#define RESIL__NOINLINE
#endif

static RESIL__NOINLINE resil_err
acquire_slow(resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	struct bstate *st = b->st;
	uint64_t w, now, deadline;

	for (;;) {
		w = resil__load64(&st->word);
		if (RESIL__UNLIKELY(w & W_TRANSIT)) {
			/* Another thread is finishing a transition: decide on
			 * the state it publishes, not on its being busy. */
			if (!await_transit(b))
				return RESIL_E_MISUSE;
			continue;
		}
		switch (w_state(w)) {
		case RESIL_BREAKER_CLOSED:
		case RESIL_BREAKER_METRICS_ONLY:
		case RESIL_BREAKER_DISABLED:
			permit->episode = w_episode(w);
			/* Untimed: the word it was granted under, CLOSED
			 * only (see resil_breaker_record). */
			if (w_state(w) == RESIL_BREAKER_CLOSED) {
				permit->flags = PERMIT_VALID;
				permit->start = w;
			} else {
				permit->flags = PERMIT_VALID | PERMIT_EPF;
				permit->start = 0;
			}
			permit->reserved = 0;
			if (b->timing) {
				permit->start = now_precise(b);
				permit->flags |= PERMIT_TIMED;
			}
			return RESIL_OK;
		case RESIL_BREAKER_OPEN:
			now = now_coarse(b);
			deadline = sat_add(resil__load64(&st->since),
			    resil__load64(&st->wait));
			if (now < deadline)
				return reject(b, retry_after, deadline - now);
			/* The wait is over: the first acquire after it moves
			 * to HALF_OPEN and then asks for a probe. */
			transition(b, w, RESIL_BREAKER_HALF_OPEN,
			    RESIL_BREAKER_REASON_WAIT_ELAPSED, now);
			continue;
		case RESIL_BREAKER_HALF_OPEN:
			if (b->cfg.max_half_open_ns != 0) {
				uint64_t end =
				    sat_add(resil__load64(&st->since),
				        b->cfg.max_half_open_ns);

				now = now_coarse(b);
				if (now >= end) {
					transition(b, w, RESIL_BREAKER_OPEN,
					    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT,
					    end);
					continue;
				}
			}
			if (w_probes(w) >= b->cfg.permitted_probes)
				return reject(b, retry_after, 0);
			if (!resil__cas64(&st->word, w, w + W_PROBE_ONE))
				continue;
			permit->episode = w_episode(w);
			permit->flags = PERMIT_VALID | PERMIT_PROBE;
			permit->start = 0;
			permit->reserved = 0;
			if (b->timing) {
				permit->start = now_precise(b);
				permit->flags |= PERMIT_TIMED;
			}
			return RESIL_OK;
		case RESIL_BREAKER_FORCED_OPEN:
			return reject(b, retry_after, UINT64_MAX);
		case RESIL_BREAKER_CORRUPT:
			break;
		}
		return RESIL_E_MISUSE; /* a corrupt state word */
	}
}

/* An acquire that is not an untimed CLOSED grant: an OPEN breaker whose
 * wait is not over rejects here, with as little as the CLOSED grant does
 * (issue 39: an OPEN rejection costs no more than a CLOSED success); a
 * FORCED_OPEN one too. Everything else goes to acquire_slow(). */
/* This thread's lifetime-success offset (lib/breaker_fast.h), found. */
static RESIL__NOINLINE uintptr_t
success_offset(void)
{
	uintptr_t off = offsetof(struct bstate, stripes) +
	    resil__thread_stripe(NSTRIPES) * sizeof(stripe) +
	    offsetof(stripe, successes) + 1;

	resil__breaker_success_at = off;
	return off;
}

/* Count a rejection on this thread's stripe: through the offset the
 * success fast path keeps (lib/breaker_fast.h) once it is known. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void
count_rejection(struct bstate *st)
{
	uintptr_t off = resil__breaker_success_at;

	if (RESIL__UNLIKELY(off == 0))
		off = success_offset();
	resil__inc64((uint64_t *)(void *)((char *)st + off - 1 +
	    (offsetof(stripe, rejections) - offsetof(stripe, successes))));
}

/* Whether w is HALF_OPEN, in no transition, with every one of its
 * probes out. */
static inline bool
half_open_full(uint64_t w, uint32_t probes)
{
	return (w & (W_STATE_MASK | W_TRANSIT)) == RESIL_BREAKER_HALF_OPEN &&
	    w_probes(w) >= probes;
}

#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline resil_err
acquire_other(resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	uint64_t w = resil__load64(&b->st->word) & (W_STATE_MASK | W_TRANSIT);
	uint64_t now, deadline;
	struct bstate *st;

	if (RESIL__LIKELY(w == RESIL_BREAKER_OPEN)) {
		now = now_coarse(b);
		st = b->st; /* read once after the call */
		deadline = resil__load64(&st->until);
		if (RESIL__LIKELY(now < deadline)) {
			count_rejection(st);
			if (retry_after != NULL)
				*retry_after = deadline - now;
			return RESIL_E_OPEN;
		}
	} else if (w == RESIL_BREAKER_FORCED_OPEN) {
		return reject(b, retry_after, UINT64_MAX);
	} else if (w == RESIL_BREAKER_HALF_OPEN &&
	    b->cfg.max_half_open_ns == 0 &&
	    half_open_full(resil__load64(&b->st->word),
	        b->cfg.permitted_probes)) {
		/* Every probe of the episode is out (on a word read again,
		 * HALF_OPEN and in no transition): denied here, as
		 * acquire_slow() would, without its frame. */
		return reject(b, retry_after, 0);
	}
	return acquire_slow(b, permit, retry_after);
}

/* acquire_shared() when there is something to hear: hear it, then
 * decide on the state now. */
static RESIL__NOINLINE resil_err
acquire_hear(resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	deliver(b);
	return acquire_slow(b, permit, retry_after);
}

/* A shared breaker's acquire off the inline path (with a listener, every
 * one: resil__breaker_new_shared()): first the transitions other
 * processes made since this process last heard (one load and a compare
 * when there are none), so its next call hears them, granted or
 * rejected; then an untimed CLOSED grant as acquire_fast() makes it, or
 * the full path. */
static RESIL__NOINLINE resil_err
acquire_shared(resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	uint64_t w = resil__load64(&b->st->word);

	if (RESIL__UNLIKELY(b->cfg.listener != NULL &&
	        w_episode(w) != resil__load64(&b->delivered)))
		return acquire_hear(b, permit, retry_after);
	if (RESIL__LIKELY(
	        (w & (W_STATE_MASK | W_TRANSIT)) == RESIL_BREAKER_CLOSED &&
	        !b->timing)) {
		permit->start = w;
		permit->flags = PERMIT_VALID;
		return RESIL_OK;
	}
	return acquire_slow(b, permit, retry_after);
}

/* acquire_other() without the time left to report (resil_breaker_acquire),
 * and with it. */
static RESIL__NOINLINE resil_err
acquire_other_nr(resil_breaker *b, resil_permit *permit)
{
	return acquire_other(b, permit, NULL);
}

static RESIL__NOINLINE resil_err
acquire_other_ra(resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	return acquire_other(b, permit, retry_after);
}

/* The hot path, CLOSED without timing: small enough to need no saved
 * registers; everything else goes to acquire_other() (a shared breaker's
 * to acquire_shared()). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline resil_err
acquire_fast(resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	uint64_t w;

	if (RESIL__UNLIKELY(b == NULL || permit == NULL))
		return RESIL_E_INVAL;
	w = resil__load64(b->acq_word);
	if (RESIL__LIKELY(
	        (w & (W_STATE_MASK | W_TRANSIT)) == RESIL_BREAKER_CLOSED)) {
		/* Untimed: the word of the grant, which also gives the
		 * episode (see PERMIT_EPF). episode and reserved are
		 * written by the slow path alone. */
		permit->start = w;
		permit->flags = PERMIT_VALID;
		return RESIL_OK;
	}
	if (RESIL__UNLIKELY(b->shared))
		return acquire_shared(b, permit, retry_after);
	if (retry_after == NULL)
		return acquire_other_nr(b, permit);
	return acquire_other_ra(b, permit, retry_after);
}

resil_err
resil_breaker_acquire_ex(
    resil_breaker *b, resil_permit *permit, uint64_t *retry_after)
{
	return acquire_fast(b, permit, retry_after);
}

resil_err
resil_breaker_acquire(resil_breaker *b, resil_permit *permit)
{
	return acquire_fast(b, permit, NULL);
}

/* ---- record ---- */

/* Give a probe permit of episode ep back. */
static void
give_back_probe(resil_breaker *b, uint64_t ep)
{
	struct bstate *st = b->st;
	uint64_t w;

	for (;;) {
		w = resil__load64(&st->word);
		if ((w & W_TRANSIT) || w_episode(w) != ep ||
		    w_state(w) != RESIL_BREAKER_HALF_OPEN || w_probes(w) == 0)
			return;
		if (resil__cas64(&st->word, w, w - W_PROBE_ONE))
			return;
	}
}

static RESIL__NOINLINE void
rate_evaluate(resil_breaker *b, uint64_t w, uint64_t now)
{
	totals t = window_totals(b, now);

	if (t.calls == 0 || t.calls < b->min_calls)
		return;
	if (b->cfg.failure_rate_pct != 0 &&
	    t.failures * 100 >= (uint64_t)b->cfg.failure_rate_pct * t.calls)
		transition(b, w, RESIL_BREAKER_OPEN,
		    RESIL_BREAKER_REASON_FAILURE_RATE, now_coarse(b));
	else if (b->cfg.slow_rate_pct != 0 &&
	    t.slow * 100 >= (uint64_t)b->cfg.slow_rate_pct * t.calls)
		transition(b, w, RESIL_BREAKER_OPEN,
		    RESIL_BREAKER_REASON_SLOW_CALL_RATE, now_coarse(b));
}

/* Count one lifetime outcome on this thread's stripe. */
static inline void
count_outcome(stripe *sp, bool fail, bool slow)
{
	resil__inc64(fail ? &sp->failures : &sp->successes);
	if (slow)
		resil__inc64(&sp->slow);
}

/*
 * An outcome in CLOSED (consecutive counts too) or METRICS_ONLY (window
 * only), with the permit of episode w_episode(w). The clock is read
 * before the announcement; the trip decision is made after it is
 * withdrawn, since a transition waits for announced records.
 */
static RESIL__NOINLINE resil_err
window_record(resil_breaker *b, stripe *sp, uint64_t w, bool fail, bool slow)
{
	struct bstate *st = b->st;
	uint64_t ep = w_episode(w);
	uint64_t now =
	    b->buckets != NULL && b->rate_triggers ? now_coarse(b) : 0;
	uint32_t n = w_state(w) == RESIL_BREAKER_CLOSED
	    ? b->cfg.consecutive_failures
	    : 0;
	bool trip = false, maybe = false;

	if (!announce(b, sp, ep)) {
		resil__inc64(&sp->stale);
		return RESIL_OK;
	}
	count_outcome(sp, fail, slow);
	/* The window serves the rate triggers only: without one, the
	 * success path writes nothing shared at all. */
	if (b->rate_triggers)
		maybe = window_add(b, fail, slow, now);
	if (n != 0) {
		if (fail)
			trip = resil__faa64(&st->consecutive, 1) + 1 >= n;
		else if (resil__load64(&st->consecutive) != 0)
			/* Write only when needed: the common success path
			 * leaves the shared line untouched. */
			resil__store64(&st->consecutive, 0);
	}
	withdraw(b, sp, ep);
	if (w_state(w) != RESIL_BREAKER_CLOSED)
		return RESIL_OK; /* METRICS_ONLY never trips */
	if (trip)
		transition(b, w, RESIL_BREAKER_OPEN,
		    RESIL_BREAKER_REASON_CONSECUTIVE_FAILURES, now_coarse(b));
	else if (maybe)
		rate_evaluate(b, w, now);
	return RESIL_OK;
}

/* Whether the K probe outcomes breach a threshold. With a rate trigger
 * the probes are judged by their rates; with the consecutive-failure
 * trigger alone, any failed probe reopens (as gobreaker does). */
static bool
probes_failed(
    const resil_breaker *b, uint64_t reported, uint64_t failed, uint64_t slow)
{
	if (b->cfg.failure_rate_pct != 0 &&
	    failed * 100 >= (uint64_t)b->cfg.failure_rate_pct * reported)
		return true;
	if (b->cfg.slow_rate_pct != 0 &&
	    slow * 100 >= (uint64_t)b->cfg.slow_rate_pct * reported)
		return true;
	if (b->cfg.failure_rate_pct == 0 && failed > 0)
		return true;
	return false;
}

/* End HALF_OPEN episode ep. The word may have changed since the decision
 * (permits given back and granted again), so retry the CAS for as long as
 * the episode is still the current one. */
static void
decide(resil_breaker *b, uint64_t ep, bool reopen, resil_breaker_reason why)
{
	uint64_t cw;

	for (;;) {
		cw = resil__load64(&b->st->word);
		if ((cw & W_TRANSIT) || w_episode(cw) != ep ||
		    w_state(cw) != RESIL_BREAKER_HALF_OPEN)
			return;
		if (transition(b, cw,
		        reopen ? RESIL_BREAKER_OPEN : RESIL_BREAKER_CLOSED,
		        why, now_coarse(b)))
			return;
	}
}

static resil_err
half_open_record(
    resil_breaker *b, stripe *sp, uint64_t w, bool fail, bool slow)
{
	struct bstate *st = b->st;
	uint64_t ep = w_episode(w), p, np = 0, reported;
	resil_err err = RESIL_OK;

	if (!announce(b, sp, ep)) {
		resil__inc64(&sp->stale);
		return RESIL_OK;
	}
	/* Announced: the episode cannot end before the add below lands, so
	 * the probe word is this episode's (its tag only keeps metrics
	 * readers consistent). */
	for (;;) {
		p = resil__load64(&st->probes);
		reported = P_REPORTED(p) + 1;
		if (P_TAG(p) != P_TAG_OF(ep) ||
		    reported > b->cfg.permitted_probes) {
			/* More outcomes than permits: a copied permit. */
			err = RESIL_E_MISUSE;
			break;
		}
		np = p + 1 + (fail ? UINT64_C(1) << 15 : 0) +
		    (slow ? UINT64_C(1) << 30 : 0);
		if (resil__cas64(&st->probes, p, np))
			break;
	}
	if (err == RESIL_OK)
		count_outcome(sp, fail, slow);
	withdraw(b, sp, ep);
	if (err != RESIL_OK)
		return err;
	if (fail && b->cfg.reopen_on_first_failure) {
		decide(b, ep, true, RESIL_BREAKER_REASON_PROBE_FAILED);
		return RESIL_OK;
	}
	if (P_REPORTED(np) < b->cfg.permitted_probes)
		return RESIL_OK;
	/* The last probe reported: this thread decides. */
	if (probes_failed(b, P_REPORTED(np), P_FAILED(np), P_SLOW(np)))
		decide(b, ep, true, RESIL_BREAKER_REASON_PROBES_FAILED);
	else
		decide(b, ep, false, RESIL_BREAKER_REASON_PROBES_PASSED);
	return RESIL_OK;
}

/* The episode of a permit with these flags (see PERMIT_EPF). */
static inline uint64_t
permit_episode(const resil_permit *permit, uint32_t flags)
{
	return flags == PERMIT_VALID ? w_episode(permit->start)
	                             : permit->episode;
}

/* Take the permit: a second record or release of it is misuse. Returns
 * its flags, 0 when it was never granted or is already spent. */
static inline uint32_t
consume(resil_permit *permit)
{
	uint32_t flags = permit->flags;

	if (RESIL__UNLIKELY(!(flags & PERMIT_VALID)))
		return 0;
	permit->flags = 0;
	return flags;
}

static RESIL__NOINLINE resil_err
record_impl(resil_breaker *b, resil_permit *permit, resil_outcome outcome,
    bool have_duration, uint64_t duration)
{
	struct bstate *st;
	uint64_t w, ep;
	uint32_t flags;
	bool fail, slow = false;
	stripe *sp;

	if (RESIL__UNLIKELY(b == NULL || permit == NULL ||
	        (unsigned)outcome > (unsigned)RESIL_OUTCOME_BUSINESS))
		return RESIL_E_INVAL;
	flags = consume(permit);
	if (RESIL__UNLIKELY(flags == 0))
		return RESIL_E_MISUSE;
	ep = permit_episode(permit, flags);
	st = b->st;
	sp = my_stripe(b);
	/* Everything that reads the clock comes before the announcement. */
	fail = outcome == RESIL_OUTCOME_FAILURE;
	if (b->timing && (outcome == RESIL_OUTCOME_SUCCESS || fail)) {
		if (!have_duration && (flags & PERMIT_TIMED)) {
			uint64_t now = now_precise(b);

			duration =
			    now > permit->start ? now - permit->start : 0;
			have_duration = true;
		}
		slow = have_duration && duration > b->cfg.slow_threshold_ns;
	}
	w = resil__load64(&st->word);
	/* A damaged region's word: no state to add the outcome to. */
	if (RESIL__UNLIKELY(b->shared) && resil__shared_word_corrupt(w))
		return RESIL_E_MISUSE;
	if (w_episode(w) != ep) {
		/* From an earlier episode: a slow call from before the trip
		 * must not close (or trip) the breaker. */
		resil__inc64(&sp->stale);
		return RESIL_OK;
	}
	if (w_state(w) == RESIL_BREAKER_DISABLED)
		return RESIL_OK;
	if (w_state(w) == RESIL_BREAKER_HALF_OPEN &&
	    b->cfg.max_half_open_ns != 0) {
		uint64_t end = sat_add(
		    resil__load64(&st->since), b->cfg.max_half_open_ns);

		if (now_coarse(b) >= end) {
			/* Too late: the episode expired before this probe
			 * reported, so its outcome is stale. */
			transition(b, w, RESIL_BREAKER_OPEN,
			    RESIL_BREAKER_REASON_HALF_OPEN_TIMEOUT, end);
			resil__inc64(&sp->stale);
			return RESIL_OK;
		}
	}
	if (outcome == RESIL_OUTCOME_IGNORED ||
	    outcome == RESIL_OUTCOME_BUSINESS) {
		resil__inc64(&sp->ignored);
		if (flags & PERMIT_PROBE)
			give_back_probe(b, ep);
		return RESIL_OK;
	}

	switch (w_state(w)) {
	case RESIL_BREAKER_CLOSED:
	case RESIL_BREAKER_METRICS_ONLY:
		return window_record(b, sp, w, fail, slow);
	case RESIL_BREAKER_HALF_OPEN:
		if (!(flags & PERMIT_PROBE))
			return RESIL_E_MISUSE;
		return half_open_record(b, sp, w, fail, slow);
	case RESIL_BREAKER_OPEN:
	case RESIL_BREAKER_FORCED_OPEN:
	case RESIL_BREAKER_DISABLED:
	case RESIL_BREAKER_CORRUPT:
		break;
	}
	/* No permit is ever granted in an OPEN episode. */
	return RESIL_E_MISUSE;
}

static RESIL__NOINLINE resil_err
record_slow(resil_breaker *b, resil_permit *permit, resil_outcome outcome)
{
	return record_impl(b, permit, outcome, false, 0);
}

/* A success to add to the window, the permit checked: the fast path's
 * second stage, kept out of line so the first saves no registers. */
static RESIL__NOINLINE resil_err
record_window_success(resil_breaker *b, resil_permit *permit, uint64_t w)
{
	permit->flags = 0;
	return window_record(b, my_stripe(b), w, false, false);
}

/*
 * A success in a time window (FAST_TIME, the permit checked against the
 * CLOSED word w, which it holds): when the bucket of now is this stripe's current one (no
 * rollover), the add is the announcement, one add to the bucket's calls
 * and to the lifetime count, and the withdrawal; the trip rule runs only
 * where window_add() would run it (the bucket holds no more than
 * min_calls). Anything else goes through window_record().
 */
/* time_success()'s trip rule: the window may have reached min_calls. */
static RESIL__NOINLINE resil_err
time_evaluate(resil_breaker *b, uint64_t w)
{
	rate_evaluate(b, w, now_coarse(b));
	return RESIL_OK;
}

/* time_success() on a thread whose success offset is not known yet. */
static RESIL__NOINLINE resil_err
time_success_first(resil_breaker *b, resil_permit *permit, uint64_t w)
{
	(void)success_offset();
	return record_window_success(b, permit, w);
}

static RESIL__NOINLINE resil_err
time_success(resil_breaker *b, resil_permit *permit)
{
	/* Only the arguments live across the clock's call: the rest ends in
	 * returns and tail calls. The word is the permit's (the caller
	 * found them equal). */
	uint64_t now = now_coarse(b), w = permit->start;
	struct bstate *st = b->st;
	/* bucket_index() without its cap at the clock's last tick: with
	 * buckets of 2 ticks or more (FAST_TIME) idx + 1 is never 0, and an
	 * index one past the general path's finds no bucket of that epoch
	 * (the general path then decides). */
	uint64_t idx = now / b->cfg.bucket_ns, calls;
	uint64_t *a, *succ;
	uintptr_t off = resil__breaker_success_at, s;
	bucket *bk;

	/* The thread's stripe from its success offset (a TLS load; no call
	 * that returns, so no registers to save). */
	if (RESIL__UNLIKELY(off == 0))
		return time_success_first(b, permit, w);
	s = (off - 1 - offsetof(struct bstate, stripes) -
	        offsetof(stripe, successes)) /
	    sizeof(stripe);
	succ = (uint64_t *)(void *)((char *)st + off - 1);
	bk = &b->buckets[s * b->stride + idx % b->cfg.window_size];
	if (RESIL__UNLIKELY(resil__load64(&bk->epoch) != idx + 1))
		return record_window_success(b, permit, w);
	a = (uint64_t *)(void *)((char *)succ +
	        (offsetof(stripe, active) - offsetof(stripe, successes))) +
	    (w_episode(w) & 1);
	resil__inc64(a);
	if (RESIL__UNLIKELY(resil__load64_after_rmw(&st->word) != w)) {
		/* A transition began: the general path decides (stale). */
		resil__dec64(a);
		return record_window_success(b, permit, w);
	}
	permit->flags = 0;
	calls = resil__faa64(&bk->calls, 1); /* the count before this one */
	resil__inc64(succ);
	resil__dec64(a); /* withdraw */
	if (RESIL__UNLIKELY(calls < b->min_calls))
		return time_evaluate(b, w);
	return RESIL_OK;
}

/* A thread's first fast success: find its counter, then count. */
static RESIL__NOINLINE resil_err
count_first_success(struct bstate *st)
{
	uintptr_t off = offsetof(struct bstate, stripes) +
	    resil__thread_stripe(NSTRIPES) * sizeof(stripe) +
	    offsetof(stripe, successes) + 1;

	resil__breaker_success_at = off;
	resil__inc64((uint64_t *)(void *)((char *)st + off - 1));
	return RESIL_OK;
}

/* The state word is the state's first field (breaker_fast.h). */
_Static_assert(offsetof(struct bstate, word) == 0, "word first");

void
resil__breaker_fast_refs(const resil_breaker *b, resil__bfast *f)
{
	f->acq_word = b->acq_word;
	f->st = b->st;
	f->streak = b->shared ? &never_zero : b->streak;
	/* A shared breaker's acquire first hears other processes'
	 * transitions (acquire_shared()): no grant on its word. */
	f->word = b->shared ? b->acq_word : &b->st->word;
	f->tstreak = b->shared ? &never_zero : b->tstreak;
	f->slow_ns = b->slow_ns;
}

resil_err
resil_breaker_record(
    resil_breaker *b, resil_permit *permit, resil_outcome outcome)
{
	struct bstate *st;
	uint64_t w;
	uintptr_t off;

	if (RESIL__UNLIKELY(b == NULL || permit == NULL))
		return RESIL_E_INVAL;
	/* The hot path: a success in the permit's own CLOSED episode that
	 * writes nothing but its stripe's lifetime count, so it cannot leak
	 * into a later episode and needs no announcement. Everything else
	 * goes to record_impl(). A plain permit (flags exactly VALID: not a
	 * probe, not timed, not spent) holds in start the word it was
	 * granted under, and only a CLOSED word (else 0, which no later
	 * word equals: episode 0 is CLOSED's alone); the word equal to it
	 * means this CLOSED episode, no transition in progress, in one
	 * compare. */
	st = b->st;
	w = resil__load64(&st->word);
	if (RESIL__LIKELY(outcome == RESIL_OUTCOME_SUCCESS &&
	        permit->flags == PERMIT_VALID && permit->start == w)) {
		/* FAST_CONSEC: no failure streak to end. FAST_COUNT: a
		 * count window full of successes (win_bad counts the slots
		 * that are not one, empty ones included): one more changes
		 * nothing, the ring stays all successes. Exact: an outcome
		 * that does write evicts a success either way, so the
		 * success takes effect at the win_bad reading, before it. */
		if (RESIL__LIKELY(resil__load64(b->streak) == 0))
			goto nothing_changes;
		if (b->fast == FAST_TIME)
			return time_success(b, permit);
		if (b->fast >= FAST_COUNT)
			return record_window_success(b, permit, w);
	}
	return record_slow(b, permit, outcome);
nothing_changes:
	permit->flags = 0;
	off = resil__breaker_success_at;
	if (RESIL__UNLIKELY(off == 0))
		return count_first_success(st);
	resil__inc64((uint64_t *)(void *)((char *)st + off - 1));
	return RESIL_OK;
}

/* A success the caller timed, as resil_breaker_record()'s hot path: a
 * plain permit of this CLOSED episode, not slow, nothing it would end
 * (tstreak, the streak without timing, is 0): only the lifetime count. */
resil_err
resil_breaker_record_duration(resil_breaker *b, resil_permit *permit,
    resil_outcome outcome, uint64_t duration)
{
	uintptr_t off;

	if (RESIL__LIKELY(b != NULL && permit != NULL &&
	        outcome == RESIL_OUTCOME_SUCCESS &&
	        permit->flags == PERMIT_VALID && duration <= b->slow_ns &&
	        permit->start == resil__load64(&b->st->word) &&
	        !b->shared && resil__load64(b->tstreak) == 0)) {
		permit->flags = 0;
		off = resil__breaker_success_at;
		if (RESIL__UNLIKELY(off == 0))
			return count_first_success(b->st);
		resil__inc64((uint64_t *)(void *)((char *)b->st + off - 1));
		return RESIL_OK;
	}
	return record_impl(b, permit, outcome, true, duration);
}

resil_err
resil_breaker_release(resil_breaker *b, resil_permit *permit)
{
	uint32_t flags;

	if (b == NULL || permit == NULL)
		return RESIL_E_INVAL;
	flags = consume(permit);
	if (flags == 0)
		return RESIL_E_MISUSE;
	if (flags & PERMIT_PROBE)
		give_back_probe(b, permit->episode);
	return RESIL_OK;
}

resil_err
resil_breaker_call(resil_breaker *b, resil_breaker_fn fn, void *ctx,
    const resil_classifier *cls, int *rc)
{
	resil_permit p;
	resil_err err;
	int r;

	if (b == NULL || fn == NULL)
		return RESIL_E_INVAL;
	err = resil_breaker_acquire(b, &p);
	if (err != RESIL_OK)
		return err;
	r = fn(ctx);
	err = resil_breaker_record(b, &p, resil_classify(cls, r, NULL));
	if (rc != NULL)
		*rc = r;
	return err;
}

/* ---- state and manual control ---- */

resil_breaker_state
resil_breaker_get_state(const resil_breaker *b)
{
	uint64_t w;

	if (b == NULL)
		return RESIL_BREAKER_CLOSED;
	w = resil__load64(&b->st->word);
	/* What the handle does with it: a word that holds no state (a
	 * damaged region, lib/breaker_shared.h) refuses every permit. */
	if (RESIL__UNLIKELY(w & W_TRANSIT) && b->shared &&
	    resil__shared_word_corrupt(w))
		return RESIL_BREAKER_CORRUPT;
	return w_state_checked(w);
}

resil_err
resil_breaker_transition(resil_breaker *b, resil_breaker_state to)
{
	uint64_t w;

	if (b == NULL || (unsigned)to > (unsigned)RESIL_BREAKER_METRICS_ONLY)
		return RESIL_E_INVAL;
	for (;;) {
		w = resil__load64(&b->st->word);
		if (w & W_TRANSIT) {
			/* Another thread is finishing a transition: a few
			 * stores and a listener call. Its own listener must
			 * not wait for it. */
			if (!await_transit(b))
				return RESIL_E_MISUSE;
			continue;
		}
		if (w_state(w) > RESIL_BREAKER_METRICS_ONLY)
			return RESIL_E_MISUSE; /* CORRUPT is never left */
		if (w_state(w) == to && to != RESIL_BREAKER_CLOSED)
			return RESIL_OK;
		if (transition(
		        b, w, to, RESIL_BREAKER_REASON_MANUAL, now_coarse(b)))
			return RESIL_OK;
	}
}

resil_err
resil_breaker_reset(resil_breaker *b)
{
	return resil_breaker_transition(b, RESIL_BREAKER_CLOSED);
}

resil_err
resil_breaker_force_open(resil_breaker *b)
{
	return resil_breaker_transition(b, RESIL_BREAKER_FORCED_OPEN);
}

resil_err
resil_breaker_disable(resil_breaker *b)
{
	return resil_breaker_transition(b, RESIL_BREAKER_DISABLED);
}

resil_err
resil_breaker_metrics_only(resil_breaker *b)
{
	return resil_breaker_transition(b, RESIL_BREAKER_METRICS_ONLY);
}

/* ---- for the other breaker sources (breaker_internal.h) ---- */

/* Out-of-line doors to the static functions above, so that their callers
 * here keep the same code (and instruction counts) as before the split. */
totals
resil__breaker_window_totals(resil_breaker *b, uint64_t now)
{
	return window_totals(b, now);
}

void
resil__breaker_window_reset(resil_breaker *b)
{
	window_reset(b);
}

bool
resil__breaker_await_transit(resil_breaker *b)
{
	return await_transit(b);
}

bool
resil__breaker_transition_fill(resil_breaker *b, uint64_t w,
    resil_breaker_state to, resil_breaker_reason reason, uint64_t time,
    resil__breaker_fill_fn fill, const void *ctx)
{
	return transition_ex(b, w, to, reason, time, fill, ctx);
}

/*
 * resil limit: the GCRA rate limiter and the (adaptive) bulkhead.
 */
#include <resil/limit.h>

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "atomic.h"
#include "internal.h"
#include "limit_rate.h"
#include "limit_shared.h"
#include "limit_wait.h"
#include "proc.h"

const char *
resil_limit_event_name(resil_limit_event_type t)
{
	switch (t) {
	case RESIL_LIMIT_EVENT_REJECTED:
		return "rejected";
	case RESIL_LIMIT_EVENT_LIMIT_INCREASED:
		return "limit_increased";
	case RESIL_LIMIT_EVENT_LIMIT_DECREASED:
		return "limit_decreased";
	}
	return "unknown";
}

/* ------------------------------------------------------------------ */
/* Rate limiter                                                        */
/* ------------------------------------------------------------------ */

/* The state word, the struct and the decision: lib/limit_rate.h. */

/*
 * Allocate size bytes (zeroed) starting at a cache-line boundary; *mem
 * gets what to hand back to resil__free() with size + RESIL__CACHELINE.
 */
static void *
alloc_aligned(const resil_allocator *a, size_t size, void **mem)
{
	uintptr_t p;

	*mem = resil__calloc(a, size + RESIL__CACHELINE);
	if (*mem == NULL)
		return NULL;
	p = ((uintptr_t)*mem + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	return (void *)p;
}


/* The reservations and the drain flag (issue 42, lib/limit_rate_cls.c:
 * the classes' decision). */
static resil_err
validate_cls(
    const resil_ratelimit_config *cfg, resil_diag *diag)
{
	uint64_t res = (uint64_t)cfg->reserve_critical + cfg->reserve_default;

	if (res > 0 && res >= cfg->burst)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.reserve.critical + ratelimit.reserve.default: "
		    "%" PRIu64 " must be below burst (%" PRIu32 ")",
		    res, cfg->burst);
	if (res > 0 && cfg->batch != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.batch: %" PRIu32
		    " must be 0 for a rate limiter that reserves permits",
		    cfg->batch);
	if (cfg->drain_on_throttled != 0 && cfg->drain_on_throttled != 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.drain_on_throttled: %d is not 0 or 1",
		    cfg->drain_on_throttled);
	return RESIL_OK;
}

resil_err
resil_ratelimit_config_validate(
    const resil_ratelimit_config *cfg, resil_diag *diag)
{
	uint64_t g, scale, ts;

	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "ratelimit: config is NULL");
	if (cfg->size != sizeof(*cfg))
		return resil__check_size(diag, "ratelimit",
		    "resil_ratelimit_config", cfg->size, sizeof(*cfg));
	if (cfg->rate == 0)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "ratelimit.rate: 0 must be >= 1");
	if (cfg->period_ns == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.period_ns: 0 must be >= 1");
	if (cfg->burst == 0)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "ratelimit.burst: 0 must be >= 1");
	g = resil__gcd64(cfg->rate, cfg->period_ns);
	scale = cfg->rate / g;
	ts = cfg->period_ns / g;
	if (scale > RESIL_RATELIMIT_MAX_SCALE)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.rate: %" PRIu32 " per period_ns %" PRIu64
		    " needs a time step of 1/%" PRIu64
		    " tick, finer than 1/%" PRIu64,
		    cfg->rate, cfg->period_ns, scale,
		    RESIL_RATELIMIT_MAX_SCALE);
	if (ts > RESIL_RATELIMIT_MAX_SPAN / cfg->burst)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.burst: %" PRIu32
		    " is too large for rate %" PRIu32 " per period_ns %" PRIu64
		    " (burst * period_ns / gcd(rate, period_ns) must be <= "
		    "2^50)",
		    cfg->burst, cfg->rate, cfg->period_ns);
	if (cfg->batch > RESIL_RATELIMIT_MAX_BATCH || cfg->batch > cfg->burst)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.batch: %" PRIu32 " is out of range 0..%" PRIu32
		    " (the smaller of burst and %" PRIu32 ")",
		    cfg->batch,
		    cfg->burst < RESIL_RATELIMIT_MAX_BATCH
		        ? cfg->burst
		        : RESIL_RATELIMIT_MAX_BATCH,
		    RESIL_RATELIMIT_MAX_BATCH);
	return validate_cls(cfg, diag);
}

/* Create a rate limiter whose GCRA words are its own (shared NULL) or at
 * shared, in a region; init: set them up (always when its own). */
static resil_err
rl_create(resil_ratelimit **out, const resil_ratelimit_config *cfg,
    void *shared, bool init, resil_diag *diag)
{
	resil_ratelimit *rl;
	resil_err err;
	uint64_t g, now, base;
	void *mem;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "ratelimit: out is NULL");
	err = resil_ratelimit_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	rl = alloc_aligned(cfg->alloc, sizeof(*rl), &mem);
	if (rl == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "ratelimit: out of memory");
	rl->mem = mem;
	rl->alloc = *resil__allocator(cfg->alloc);
	rl->clock = cfg->clock != NULL && cfg->clock->now != NULL
	    ? *cfg->clock
	    : *resil_clock_system();
	g = resil__gcd64(cfg->rate, cfg->period_ns);
	rl->scale = cfg->rate / g;
	rl->ts = cfg->period_ns / g;
	rl->bs = (uint64_t)cfg->burst * rl->ts;
	/* Issue 42: each class's share of the burst (lib/limit_rate_cls.c). */
	rl->bsc[0] = (uint64_t)(cfg->burst - cfg->reserve_critical -
	                 cfg->reserve_default) *
	    rl->ts;
	rl->bsc[1] = (uint64_t)(cfg->burst - cfg->reserve_critical) * rl->ts;
	rl->bsc[2] = rl->bs;
	rl->kmax[0] =
	    cfg->burst - cfg->reserve_critical - cfg->reserve_default;
	rl->kmax[1] = cfg->burst - cfg->reserve_critical;
	rl->kmax[2] = cfg->burst;
	rl->rebase_ticks = REBASE_AT / rl->scale;
	rl->period = cfg->period_ns;
	rl->rate = cfg->rate;
	rl->burst = cfg->burst;
	rl->batch = cfg->batch;
	rl->listener = cfg->listener;
	rl->listener_ctx = cfg->listener_ctx;
	if (shared == NULL) {
		rl->statep = &rl->state;
		init = true;
	} else {
		rl->statep = shared;
	}
	if (init) {
		/* Generation 0; slot 1 is tagged with generation GEN_MASK
		 * (that is, -1), so that it reads as "not prepared" for
		 * generation 1. A full burst: tat = now. */
		now = resil_clock_now(&rl->clock);
		base = now & ~GEN_MASK;
		uint64_t *bases = shared == NULL ? rl->base : RL_BASE(rl);

		resil__store64(&bases[0], base);
		resil__store64(&bases[1], GEN_MASK);
		resil__store64(rl->statep, (now - base) * rl->scale);
	}
	*out = rl;
	return RESIL_OK;
}

resil_err
resil_ratelimit_new(
    resil_ratelimit **out, const resil_ratelimit_config *cfg, resil_diag *diag)
{
	return rl_create(out, cfg, NULL, true, diag);
}

size_t
resil__ratelimit_shared_size(void)
{
	return 2 * RESIL__CACHELINE;
}

resil_err
resil__ratelimit_new_shared(resil_ratelimit **out,
    const resil_ratelimit_config *cfg, void *mem, bool init, resil_diag *diag)
{
	if (mem == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "ratelimit: no shared memory");
	return rl_create(out, cfg, mem, init, diag);
}

void *
resil__ratelimit_shared_mem(const resil_ratelimit *rl)
{
	return (void *)rl->statep;
}

void
resil_ratelimit_free(resil_ratelimit *rl)
{
	resil_allocator a;

	if (rl == NULL)
		return;
	a = rl->alloc;
	resil__free(&a, rl->mem, sizeof(*rl) + RESIL__CACHELINE);
}

/*
 * Move the time base to (about) now: prepare the next generation's slot,
 * then swing the word to it with tat made relative to the new base. Any
 * step may lose a race; the caller starts over in every case.
 */
void
resil__rl_rebase(resil_ratelimit *rl, uint64_t w, uint64_t base, uint64_t now)
{
	uint64_t gen = w >> TAT_BITS;
	uint64_t ngen = (gen + 1) & GEN_MASK;
	uint64_t *slot = &RL_BASE(rl)[ngen & 1];
	uint64_t cur, want, nbase, shift, tat, ntat;

	cur = resil__load64(slot);
	if ((cur & GEN_MASK) != ngen) {
		/* The first preparer wins; the others adopt its base, so the
		 * word is only ever paired with the base it was made for. */
		want = (now & ~GEN_MASK) | ngen;
		if (resil__cas64(slot, cur, want)) {
			cur = want;
		} else {
			cur = resil__load64(slot);
			if ((cur & GEN_MASK) != ngen)
				return;
		}
	}
	nbase = cur & ~GEN_MASK;
	if (nbase <= base) {
		/* A legitimate preparer's base is past ours (it saw now -
		 * base > rebase_ticks), so this tag is left over from 2^11
		 * generations ago: replace it and retry. */
		(void)resil__cas64(slot, cur, (now & ~GEN_MASK) | ngen);
		return;
	}
	shift = nbase - base;
	tat = w & TAT_MASK;
	/* A tat before the new base is in the past: 0 means the same. */
	ntat = shift <= tat / rl->scale ? tat - shift * rl->scale : 0;
	(void)resil__cas64(rl->statep, w, (ngen << TAT_BITS) | ntat);
}

/*
 * Give r permits taken at an earlier decision back to the shared state,
 * as if they had not been taken: TAT moves back by r * T, but never below
 * now (permits that would have been due before now are lost, as idle time
 * never banks more than the burst). A rebase race just drops them.
 */
static void
rl_give_back(resil_ratelimit *rl, uint64_t now, uint32_t r)
{
	uint64_t back = (uint64_t)r * rl->ts;
	uint64_t w, gen, b, base, n, tat, ntat;

	for (;;) {
		w = resil__load64(rl->statep);
		gen = w >> TAT_BITS;
		b = resil__load64(&RL_BASE(rl)[gen & 1]);
		if ((b & GEN_MASK) != gen) {
			resil__stall();
			continue;
		}
		base = b & ~GEN_MASK;
		if (now > base && now - base > rl->rebase_ticks)
			return;
		n = now > base ? (now - base) * rl->scale : 0;
		tat = w & TAT_MASK;
		if (tat <= n)
			return; /* full at now: nothing to give back to */
		ntat = tat - n > back ? tat - back : n;
		if (resil__cas64(rl->statep, w, (gen << TAT_BITS) | ntat))
			return;
	}
}

static LIMIT_NOINLINE void
rl_rejected(resil_ratelimit *rl, uint32_t k, uint64_t retry, uint64_t now)
{
	resil_limit_event ev;

	resil__inc64(&rl_my_stripe(rl)->rejected_calls);
	if (rl->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.type = RESIL_LIMIT_EVENT_REJECTED;
	ev.time = now;
	ev.permits = k;
	ev.retry_after = retry;
	ev.limit = rl->burst;
	ev.old_limit = rl->burst;
	rl->listener(&ev, rl->listener_ctx);
}

/* Grant k permits from the cache of stripe sp if it holds k: one CAS on
 * the stripe's own line, no clock read, no shared write. */
static LIMIT_INLINE bool
rl_cache_take(rl_stripe *sp, uint32_t k)
{
	uint64_t f = resil__load64(&sp->filled);
	uint64_t u = resil__load64(&sp->used);

	while (u + k <= f) {
		if (resil__cas64(&sp->used, u, u + k)) {
			if (k > 1)
				resil__faa64(&sp->used_extra, k - 1);
			return true;
		}
		f = resil__load64(&sp->filled);
		u = resil__load64(&sp->used);
	}
	return false;
}

/* Put up to r permits in the cache of sp, keeping it at most batch;
 * returns how many did not fit. */
static uint32_t
rl_cache_put(resil_ratelimit *rl, rl_stripe *sp, uint32_t r)
{
	for (;;) {
		uint64_t f = resil__load64(&sp->filled);
		uint64_t u = resil__load64(&sp->used);
		uint64_t room = rl->batch - (f - u);
		uint64_t add = r < room ? r : room;

		if (add == 0)
			return r;
		if (resil__cas64(&sp->filled, f, f + add))
			return r - (uint32_t)add;
	}
}

/*
 * The batched decision when the own cache holds fewer than k: take k
 * plus a refill of the cache (up to batch, as many as are due) in one
 * decision on the shared state; failing that, k from another stripe's
 * cache. Returns RESIL_OK or RESIL_E_LIMITED (with *ticks as the exact
 * decision's retry_after).
 */
static LIMIT_NOINLINE resil_err
rl_take_batched(resil_ratelimit *rl, rl_stripe *sp, uint32_t k,
    uint64_t *ticks, uint64_t *now_out)
{
	uint64_t now = rl_now(rl);
	uint64_t f = resil__load64(&sp->filled);
	uint64_t u = resil__load64(&sp->used);
	uint64_t held = f >= u ? f - u : 0;
	uint32_t more = 0, got = 0, left;
	unsigned i;

	*now_out = now;
	if (held < rl->batch)
		more = rl->batch - (uint32_t)held;
	if (more > rl->burst - k)
		more = rl->burst - k;
	if (rl_take(rl, now, k, more, 0, RL_CLS_CRITICAL, ticks, &got) ==
	    RESIL_OK) {
		rl_granted(sp, k);
		if (got > 0) {
			left = rl_cache_put(rl, sp, got);
			if (left > 0)
				rl_give_back(rl, now, left);
		}
		return RESIL_OK;
	}
	/* The shared state has fewer than k: take them from any cache that
	 * holds k (a refusal then means none did). */
	for (i = 0; i < NSTRIPES; i++)
		if (rl_cache_take(&rl->stripes[i], k))
			return RESIL_OK;
	return RESIL_E_LIMITED;
}

/* A refusal: count it, tell the listener, report the wait. */
static LIMIT_NOINLINE resil_err
rl_refuse(resil_ratelimit *rl, uint32_t k, uint64_t ticks, uint64_t now,
    uint64_t *retry_after)
{
	rl_rejected(rl, k, ticks, now);
	if (retry_after != NULL)
		*retry_after = ticks;
	return RESIL_E_LIMITED;
}

resil_err
resil__rl_refuse(resil_ratelimit *rl, uint32_t k, uint64_t ticks, uint64_t now,
    uint64_t *retry_after)
{
	return rl_refuse(rl, k, ticks, now, retry_after);
}

/* Batched try_acquire when the own cache holds fewer than k. */
static LIMIT_NOINLINE resil_err
rl_try_batched(
    resil_ratelimit *rl, rl_stripe *sp, uint32_t k, uint64_t *retry_after)
{
	uint64_t ticks, now;

	if (rl_take_batched(rl, sp, k, &ticks, &now) == RESIL_OK)
		return RESIL_OK;
	return rl_refuse(rl, k, ticks, now, retry_after);
}

resil_err
resil_ratelimit_try_acquire(
    resil_ratelimit *rl, uint32_t k, uint64_t *retry_after)
{
	uint64_t ticks, now;
	rl_stripe *sp;

	if (RESIL__UNLIKELY(
	        rl == NULL || k == 0 || k > rl->kmax[RL_CLS_DEFAULT]))
		return RESIL_E_INVAL;
	if (rl->batch != 0) {
		sp = rl_my_stripe(rl);
		if (RESIL__LIKELY(rl_cache_take(sp, k)))
			return RESIL_OK;
		return rl_try_batched(rl, sp, k, retry_after);
	}
	now = rl_now(rl);
	if (RESIL__UNLIKELY(rl_take(rl, now, k, 0, 0, RL_CLS_DEFAULT, &ticks,
	                        NULL) != RESIL_OK))
		return rl_refuse(rl, k, ticks, now, retry_after);
	rl_granted(rl_my_stripe(rl), k);
	return RESIL_OK;
}

resil_err
resil_ratelimit_acquire_wait(
    resil_ratelimit *rl, uint32_t k, uint64_t max_wait, uint64_t *waited)
{
	uint64_t ticks, now, wait_s;
	rl_stripe *sp;

	if (rl == NULL || k == 0 || k > rl->kmax[RL_CLS_DEFAULT])
		return RESIL_E_INVAL;
	sp = rl_my_stripe(rl);
	/* Batched: the own cache first; a wait is decided exactly. */
	if (rl->batch > 0 && rl_cache_take(sp, k)) {
		if (waited != NULL)
			*waited = 0;
		return RESIL_OK;
	}
	/* Waiting needs a clock that can sleep; otherwise only "now" is
	 * acceptable. */
	if (rl->clock.sleep == NULL)
		wait_s = 0;
	else if (max_wait > RESIL_RATELIMIT_MAX_SPAN / rl->scale)
		wait_s = RESIL_RATELIMIT_MAX_SPAN;
	else
		wait_s = max_wait * rl->scale;
	now = rl_now(rl);
	if (rl_take(rl, now, k, 0, wait_s, RL_CLS_DEFAULT, &ticks, NULL) !=
	    RESIL_OK) {
		rl_rejected(rl, k, ticks, now);
		return RESIL_E_LIMITED;
	}
	rl_granted(sp, k);
	if (ticks > 0) {
		resil__inc64(&sp->waited_calls);
		resil_clock_sleep(&rl->clock, ticks);
	}
	if (waited != NULL)
		*waited = ticks;
	return RESIL_OK;
}

resil_err
resil_ratelimit_get_metrics(resil_ratelimit *rl, resil_ratelimit_metrics *out)
{
	resil_ratelimit_metrics m;
	uint64_t now, w, gen, b, base, n, t, cached = 0;
	unsigned i;

	if (rl == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&m, 0, sizeof(m));
	now = rl_now(rl);
	for (;;) {
		w = resil__load64(rl->statep);
		gen = w >> TAT_BITS;
		b = resil__load64(&RL_BASE(rl)[gen & 1]);
		if ((b & GEN_MASK) == gen)
			break;
		resil__stall();
	}
	base = b & ~GEN_MASK;
	if (now > base && now - base > (UINT64_C(1) << 54) / rl->scale) {
		/* n > 2^54 > any stored tat: a full burst. */
		m.available = rl->burst;
	} else {
		n = now > base ? (now - base) * rl->scale : 0;
		t = (w & TAT_MASK) > n ? (w & TAT_MASK) : n;
		m.available = n + rl->bs >= t ? (n + rl->bs - t) / rl->ts : 0;
	}
	for (i = 0; i < NSTRIPES; i++) {
		rl_stripe *sp = &rl->stripes[i];
		/* In this order: a cache grant adds to used before
		 * used_extra, and used never passes filled. */
		uint64_t used_extra = resil__load64(&sp->used_extra);
		uint64_t used = resil__load64(&sp->used);
		uint64_t filled = resil__load64(&sp->filled);
		uint64_t calls = resil__load64(&sp->granted_calls);

		m.granted_calls += calls + (used - used_extra);
		m.granted_permits +=
		    calls + resil__load64(&sp->extra_permits) + used;
		m.rejected_calls += resil__load64(&sp->rejected_calls);
		m.waited_calls += resil__load64(&sp->waited_calls);
		cached += filled - used;
	}
	/* The batch caches' permits can be taken now too. */
	m.available += cached;
	m.rate = rl->rate;
	m.burst = rl->burst;
	m.period_ns = rl->period;
	*out = m;
	return RESIL_OK;
}

/* ------------------------------------------------------------------ */
/* Bulkhead                                                            */
/* ------------------------------------------------------------------ */

/*
 * ctl is [limit:32][good samples since the last change:32], one word, so
 * that each adaptive sample is one CAS and acquire reads the limit with
 * one load. in_flight is its own word: acquire and release CAS it
 * without touching ctl. Each is alone on its cache line.
 */

/* Bulkhead stripe. peak is this stripe's highest in-flight count seen by
 * a grant; the peak of the bulkhead is the highest of the stripes', so an
 * acquire reads its own line, not a shared one, to check it.
 *
 * slots (batch > 0 only) is [leased:32][used:32]: slots this stripe holds
 * of the shared count, and how many of them calls use. One word, so that
 * an acquire (used < leased) and a release that hands leases back see
 * each other. Two cache lines: what the hot path touches in the first. */
typedef struct bh_stripe {
	uint64_t granted;
	uint64_t released;
	uint64_t slots;
	uint64_t peak;
	uint64_t rejected;
	uint64_t good;
	uint64_t bad;
	uint64_t increases;
	uint64_t decreases;
	uint64_t pad[7];
} bh_stripe;

struct resil_bulkhead {
	uint64_t in_flight; /* batch > 0: the slots leased to stripes */
	char pad0[RESIL__CACHELINE - sizeof(uint64_t)];
	uint64_t ctl;
	char pad1[RESIL__CACHELINE - sizeof(uint64_t)];
	bh_stripe stripes[NSTRIPES];
	/* Read-only after creation. */
	int adaptive;
	uint32_t min_limit;
	uint32_t max_limit;
	uint32_t increase;
	uint32_t backoff_pct;
	uint32_t batch; /* 0: exact */
	uint64_t target;
	/* Shared only (else NULL; batch is then BH_SHARED, so the exact
	 * path does not test for it): the region's state (shmem), its count
	 * word (gw), its process lines (counts; ours at line), the last
	 * sweep's time, the region's process table, our slot and our
	 * identity word (me). See "The shared bulkhead" below. */
	void *shmem;
	uint64_t *gw;
	uint64_t *counts;
	uint64_t *line;
	uint64_t *sweep_at;
	const resil__proc *procs;
	uint64_t me;
	uint64_t slot1_hi; /* (slot + 1) << 32: our changes' mark in G */
	unsigned slot;
	unsigned lwords; /* words a process line takes: 8, or 2 packed */
	resil_limit_listener_fn listener;
	void *listener_ctx;
	resil_clock clock;
	resil_allocator alloc;
	void *mem; /* what was allocated: the struct sits aligned inside */
	resil_gradient *grad; /* adaptive == RESIL_BULKHEAD_GRADIENT */
	resil__bhq *wq; /* waits or priorities (lib/limit_wait.c), or NULL */
};

_Static_assert(sizeof(bh_stripe) == 2 * RESIL__CACHELINE, "bh_stripe size");
_Static_assert(offsetof(struct resil_bulkhead, ctl) == RESIL__CACHELINE,
    "bulkhead: ctl on its own line");
_Static_assert(
    offsetof(struct resil_bulkhead, stripes) == 2 * RESIL__CACHELINE,
    "bulkhead: stripes line-aligned");
_Static_assert(offsetof(struct resil_bulkhead, adaptive) ==
        (2 + 2 * NSTRIPES) * RESIL__CACHELINE,
    "bulkhead: configuration after the stripes");

static inline bh_stripe *
bh_my_stripe(resil_bulkhead *bh)
{
	return &bh->stripes[resil__thread_stripe(NSTRIPES)];
}

#define MAX_LIMIT RESIL_BULKHEAD_MAX_LIMIT

/* "bulkhead." before every key a gradient's message names (its keys are
 * bulkhead.gradient.* here: "gradient.max_limit: 3 is below
 * gradient.min_limit (5)" names both); RESIL_E_INVAL. */
static resil_err
bh_prefix(resil_diag *diag)
{
	char tmp[RESIL_DIAG_MAX];
	size_t i, o = 0;

	if (diag == NULL)
		return RESIL_E_INVAL;
	memcpy(tmp, diag->msg, sizeof(tmp));
	tmp[sizeof(tmp) - 1] = '\0';
	for (i = 0; tmp[i] != '\0' && o + 1 < sizeof(diag->msg); i++) {
		if (strncmp(tmp + i, "gradient.", 9) == 0 &&
		    (i == 0 || tmp[i - 1] == ' ' || tmp[i - 1] == '(') &&
		    o + 9 < sizeof(diag->msg)) {
			memcpy(diag->msg + o, "bulkhead.", 9);
			o += 9;
		}
		diag->msg[o++] = tmp[i];
	}
	diag->msg[o] = '\0';
	return RESIL_E_INVAL;
}

resil_err
resil_bulkhead_config_set(resil_bulkhead_config *cfg, const char *key,
    const char *value, resil_diag *diag)
{
	static const char *const modes[] = { "fixed", "aimd", "gradient" };
	resil_gradient_config g;
	int i;

	if (cfg == NULL || key == NULL || value == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "bulkhead: NULL argument");
	if (strcmp(key, "bulkhead.limit") == 0) {
		for (i = 0; i < 3; i++)
			if (strcmp(value, modes[i]) == 0) {
				cfg->adaptive = i;
				return RESIL_OK;
			}
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not one of fixed, aimd, gradient", key,
		    value);
	}
	if (strncmp(key, "bulkhead.gradient.", 18) == 0) {
		g = cfg->gradient;
		if (g.size != sizeof(g))
			resil_gradient_config_init(&g);
		if (resil_gradient_config_set(&g, key + 9, value, diag) !=
		    RESIL_OK)
			return bh_prefix(diag);
		cfg->gradient = g;
		return RESIL_OK;
	}
	return resil__diagf(diag, RESIL_E_NOTFOUND, "%s: unknown key", key);
}

/* The waiting and priority fields (issue 42). */
static resil_err
bh_validate_wait(const resil_bulkhead_config *cfg, resil_diag *diag)
{
	uint64_t res = (uint64_t)cfg->reserve_critical + cfg->reserve_default;

	if (cfg->max_wait_ns > 0 &&
	    (cfg->queue < 1 || cfg->queue > MAX_LIMIT))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.queue: %" PRIu32 " is out of range 1..%" PRIu32
		    " (bulkhead.max_wait is set)",
		    cfg->queue, MAX_LIMIT);
	if (cfg->max_wait_ns == 0 && cfg->queue != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.queue: %" PRIu32
		    " needs bulkhead.max_wait > 0 (a queue nobody waits in)",
		    cfg->queue);
	if (cfg->order != RESIL_BULKHEAD_FIFO &&
	    cfg->order != RESIL_BULKHEAD_LIFO)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.order: %d is not 0 (fifo) or 1 (lifo)",
		    cfg->order);
	if (res > 0 && res >= cfg->max_concurrent)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.reserve.critical + bulkhead.reserve.default: "
		    "%" PRIu64 " must be below max_concurrent (%" PRIu32 ")",
		    res, cfg->max_concurrent);
	if ((res > 0 || cfg->max_wait_ns > 0) && cfg->batch != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.batch: %" PRIu32
		    " must be 0 for a bulkhead that waits or reserves slots",
		    cfg->batch);
	return RESIL_OK;
}

resil_err
resil_bulkhead_config_validate(
    const resil_bulkhead_config *cfg, resil_diag *diag)
{
	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "bulkhead: config is NULL");
	if (cfg->size != sizeof(*cfg))
		return resil__check_size(diag, "bulkhead",
		    "resil_bulkhead_config", cfg->size, sizeof(*cfg));
	if (cfg->max_concurrent < 1 || cfg->max_concurrent > MAX_LIMIT)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.max_concurrent: %" PRIu32
		    " is out of range 1..%" PRIu32,
		    cfg->max_concurrent, MAX_LIMIT);
	if (cfg->batch > cfg->max_concurrent)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.batch: %" PRIu32 " is out of range 0..%" PRIu32
		    " (max_concurrent)",
		    cfg->batch, cfg->max_concurrent);
	if (bh_validate_wait(cfg, diag) != RESIL_OK)
		return RESIL_E_INVAL;
	if (!cfg->adaptive)
		return RESIL_OK;
	if (cfg->batch != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.batch: %" PRIu32
		    " must be 0 for an adaptive bulkhead",
		    cfg->batch);
	if (cfg->adaptive != RESIL_BULKHEAD_AIMD &&
	    cfg->adaptive != RESIL_BULKHEAD_GRADIENT)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.adaptive: %d is not 0 (fixed), 1 (aimd) or 2 "
		    "(gradient)",
		    cfg->adaptive);
	if (cfg->adaptive == RESIL_BULKHEAD_GRADIENT) {
		if (resil_gradient_config_validate(&cfg->gradient, diag) !=
		    RESIL_OK)
			return bh_prefix(diag);
		if (cfg->gradient.max_limit > MAX_LIMIT)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "bulkhead.gradient.max_limit: %" PRIu32
			    " is out of range ..%" PRIu32,
			    cfg->gradient.max_limit, MAX_LIMIT);
		return RESIL_OK;
	}
	if (cfg->min_limit < 1 || cfg->min_limit > cfg->max_concurrent)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.min_limit: %" PRIu32
		    " is out of range 1..%" PRIu32 " (max_concurrent)",
		    cfg->min_limit, cfg->max_concurrent);
	if (cfg->max_limit < cfg->max_concurrent || cfg->max_limit > MAX_LIMIT)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.max_limit: %" PRIu32 " is out of range %" PRIu32
		    " (max_concurrent)..%" PRIu32,
		    cfg->max_limit, cfg->max_concurrent, MAX_LIMIT);
	if (cfg->target_latency_ns == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.target_latency_ns: 0 must be >= 1");
	if (cfg->increase < 1 || cfg->increase > cfg->max_limit)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.increase: %" PRIu32
		    " is out of range 1..%" PRIu32 " (max_limit)",
		    cfg->increase, cfg->max_limit);
	if (cfg->backoff_pct < 1 || cfg->backoff_pct > 99)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.backoff_pct: %" PRIu32 " is out of range 1..99",
		    cfg->backoff_pct);
	return RESIL_OK;
}

static resil_err bh_reject(resil_bulkhead *bh, uint64_t lim);

/* batch of a shared-memory bulkhead. */
#define BH_SHARED UINT32_MAX
/* Words of a process's line in a shared bulkhead (a cache line each); a
 * packed one (h4/kshm3: a keyed family's slot) has BH_PACKED_WORDS. */
#define BH_LINE_WORDS (RESIL__CACHELINE / sizeof(uint64_t))
#define BH_PACKED_WORDS 2u
/* batch of a bulkhead that reserves slots for priority classes: every
 * acquire decides its class's share (lib/limit_wait.c). */
#define BH_CLASSED (UINT32_MAX - 1)
static inline void bh_note_peak(bh_stripe *sp, uint64_t v);

/* Create a bulkhead whose limit word is its own (shared NULL) or in a
 * region's shared bulkhead at shared; init: set it up. */
static resil_err
bh_create(resil_bulkhead **out, const resil_bulkhead_config *cfg, void *shared,
    bool init, resil_diag *diag)
{
	resil_bulkhead *bh;
	resil_err err;
	void *mem;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "bulkhead: out is NULL");
	err = resil_bulkhead_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	if (shared != NULL && cfg->batch != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.batch: %" PRIu32
		    " must be 0 for a shared-memory bulkhead",
		    cfg->batch);
	if (shared != NULL && cfg->adaptive)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.adaptive: a shared-memory bulkhead has a fixed "
		    "limit (adaptive must be 0)");
	if (shared != NULL &&
	    (cfg->max_wait_ns > 0 || cfg->reserve_critical > 0 ||
	        cfg->reserve_default > 0))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.max_wait: a shared-memory bulkhead neither "
		    "waits nor reserves slots (docs/shared.md)");
	bh = alloc_aligned(cfg->alloc, sizeof(*bh), &mem);
	if (bh == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "bulkhead: out of memory");
	bh->mem = mem;
	bh->alloc = *resil__allocator(cfg->alloc);
	bh->clock = cfg->clock != NULL && cfg->clock->now != NULL
	    ? *cfg->clock
	    : *resil_clock_system();
	bh->adaptive = cfg->adaptive;
	if (cfg->adaptive == RESIL_BULKHEAD_GRADIENT) {
		resil_gradient_config g = cfg->gradient;
		if (g.alloc == NULL)
			g.alloc = &bh->alloc;
		err = resil_gradient_new(&bh->grad, &g, diag);
		if (err != RESIL_OK) {
			resil__free(
			    &bh->alloc, mem, sizeof(*bh) + RESIL__CACHELINE);
			return err == RESIL_E_INVAL ? bh_prefix(diag) : err;
		}
	}
	bh->min_limit = cfg->min_limit;
	bh->max_limit = cfg->max_limit;
	bh->increase = cfg->increase;
	bh->backoff_pct = cfg->backoff_pct;
	bh->batch = cfg->batch;
	bh->target = cfg->target_latency_ns;
	bh->listener = cfg->listener;
	bh->listener_ctx = cfg->listener_ctx;
	bh->ctl =
	    (uint64_t)(bh->grad != NULL ? resil_gradient_get_limit(bh->grad)
	                                : cfg->max_concurrent)
	    << 32;
	if (shared != NULL) {
		bh->batch = BH_SHARED;
		bh->shmem = shared;
		bh->sweep_at =
		    (uint64_t *)(void *)((char *)shared + RESIL__CACHELINE);
		bh->gw = (uint64_t *)(void *)((char *)shared +
		    2 * RESIL__CACHELINE);
		bh->counts = (uint64_t *)(void *)((char *)shared +
		    3 * RESIL__CACHELINE);
		bh->lwords = BH_LINE_WORDS;
	}
	if (shared != NULL && init)
		resil__store64(
		    (uint64_t *)shared, bh->ctl); /* for reference */
	if (shared == NULL) {
		bh->wq = resil__bhq_new(
		    cfg, &bh->alloc, &bh->in_flight, &bh->ctl, &bh->clock, &err);
		if (err != RESIL_OK) {
			resil_gradient_free(bh->grad);
			resil__free(
			    &bh->alloc, mem, sizeof(*bh) + RESIL__CACHELINE);
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "bulkhead: out of memory");
		}
		if (cfg->reserve_critical + cfg->reserve_default > 0)
			bh->batch = BH_CLASSED;
	}
	*out = bh;
	return RESIL_OK;
}

resil_err
resil_bulkhead_new(
    resil_bulkhead **out, const resil_bulkhead_config *cfg, resil_diag *diag)
{
	return bh_create(out, cfg, NULL, true, diag);
}

/*
 * The shared bulkhead (in a region, lib/shm.c): line 0 the limit (for
 * reference), line 1 the last sweep's time, line 2 the count word G,
 * then one line per process slot i: L_i = [version:32][calls in
 * flight:32] of the process whose identity word is the line's second
 * word O_i.
 *
 * G = [version:25][slot + 1:7][dec:1][count:31]: the calls in flight of
 * all processes, and the last change logged: line slot's count moves by
 * one (down if dec) to that version. An acquire or release is one CAS on
 * G, which decides (the count against the limit) and logs its line's
 * change, then one CAS on its own line that applies it. Whoever moves G
 * on applies the change logged there first (bhs_apply), so a process
 * killed between its two CASes leaves nothing undone: its change is
 * applied by the next, and the count and the lines always agree, which a
 * reap of a dead process's line (its count given back one logged change
 * at a time) relies on.
 */
#define BH_G_COUNT(g) ((g)&UINT64_C(0x7fffffff))
#define BH_G_DEC UINT64_C(0x80000000)
#define BH_G_SLOT(g) ((unsigned)((g) >> 32) & 0x7fu)
#define BH_G_VER(g) ((uint32_t)((g) >> 39))
#define BH_VER_MASK ((UINT32_C(1) << 25) - 1)

_Static_assert(RESIL__PROCS < 0x7f, "slot + 1 fits G's 7 bits");
_Static_assert(RESIL_BULKHEAD_MAX_LIMIT <= 0x7fffffff,
    "a count fits G's 31 bits");

size_t
resil__bulkhead_shared_size(void)
{
	return (3 + (size_t)RESIL__PROCS) * RESIL__CACHELINE;
}

/* G after changing line i (now l) by one; the count moved with it. */
static inline uint64_t
bhs_next(uint64_t g, bool dec, unsigned i, uint64_t l)
{
	uint64_t ver = ((uint32_t)(l >> 32) + 1u) & BH_VER_MASK;

	return (dec ? BH_G_COUNT(g) - 1 : BH_G_COUNT(g) + 1) |
	    (dec ? BH_G_DEC : 0) | (uint64_t)(i + 1) << 32 | ver << 39;
}

/* Line l after its change by one. */
static inline uint64_t
bhs_line_next(uint64_t l, bool dec)
{
	uint32_t n = (uint32_t)l;

	return (uint64_t)((uint32_t)(l >> 32) + 1u) << 32 |
	    (uint32_t)(dec ? n - 1 : n + 1);
}

/* Apply the change logged in g (read from G) to its line, unless done:
 * the line is at its version already, or G moved on (whoever moved it
 * applied it first). A line neither at the version nor one before is
 * corrupt: left alone. */
static inline void
bhs_apply(uint64_t *gw, uint64_t *counts, unsigned lwords, uint64_t g)
{
	unsigned ps = BH_G_SLOT(g);
	uint64_t *lw, l;
	uint32_t ver;

	if (ps == 0 || ps > RESIL__PROCS)
		return;
	lw = &counts[(ps - 1) * lwords];
	for (;;) {
		l = resil__load64(lw);
		ver = (uint32_t)(l >> 32);
		if ((ver & BH_VER_MASK) == BH_G_VER(g) ||
		    ((ver + 1u) & BH_VER_MASK) != BH_G_VER(g) ||
		    resil__load64(gw) != g)
			return;
		if (resil__cas64(lw, l, bhs_line_next(l, (g & BH_G_DEC) != 0)))
			return;
	}
}

/* Give back the calls counted in line i for the process of identity o,
 * which is gone, one logged change at a time; stops when the line is
 * empty or belongs to another process. Returns how many. */
static uint32_t
bhs_reap_line(uint64_t *gw, uint64_t *counts, unsigned lwords, unsigned i,
    uint64_t o)
{
	uint64_t *lw = &counts[i * lwords];
	uint64_t g, l, ng;
	uint32_t got = 0;

	for (;;) {
		g = resil__load64(gw);
		bhs_apply(gw, counts, lwords, g);
		/* The line, then its owner: a new owner writes itself
		 * before it counts a call there. */
		l = resil__load64(lw);
		if ((uint32_t)l == 0 || resil__load64(lw + 1) != o ||
		    BH_G_COUNT(g) == 0)
			return got;
		ng = bhs_next(g, true, i, l);
		if (resil__cas64(gw, g, ng)) {
			bhs_apply(gw, counts, lwords, ng);
			got++;
		}
	}
}

/* Reap the lines (but skip) whose process is gone: the slot now has
 * another owner (or none), or (alive: true, a system call per line) the
 * owner is dead. */
static uint32_t
bhs_reap(uint64_t *gw, uint64_t *counts, unsigned lwords,
    const resil__proc *procs, unsigned skip, bool alive)
{
	uint32_t got = 0;
	unsigned i;

	for (i = 0; i < RESIL__PROCS; i++) {
		uint64_t *lw = &counts[i * lwords];
		uint64_t o;

		if (i == skip || (uint32_t)resil__load64(lw) == 0)
			continue;
		o = resil__load64(lw + 1);
		if (o == resil__load64(&procs[i].owner) &&
		    (!alive || resil__proc_id_alive(o)))
			continue;
		got += bhs_reap_line(gw, counts, lwords, i, o);
	}
	return got;
}

/* A packed shared bulkhead (h4/kshm3): line 0 holds the limit (for
 * reference), the last sweep's time and G; then RESIL__PROCS lines of
 * BH_PACKED_WORDS words, [L_i, O_i] each. */
#define BH_PK_SWEEP 1u
#define BH_PK_G 2u

size_t
resil__bulkhead_packed_size(void)
{
	return RESIL__CACHELINE +
	    (size_t)RESIL__PROCS * BH_PACKED_WORDS * sizeof(uint64_t);
}

static void bh_shared_adopt(resil_bulkhead *bh);

static resil_err
bh_new_shared(resil_bulkhead **out, const resil_bulkhead_config *cfg,
    void *mem, bool init, bool packed, const resil__proc *procs,
    unsigned slot, resil_diag *diag)
{
	resil_err err;

	if (mem == NULL || procs == NULL || slot >= RESIL__PROCS)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "bulkhead: no shared memory");
	err = bh_create(out, cfg, mem, init, diag);
	if (err != RESIL_OK)
		return err;
	(*out)->procs = procs;
	(*out)->slot = slot;
	if (packed) {
		(*out)->sweep_at = (uint64_t *)mem + BH_PK_SWEEP;
		(*out)->gw = (uint64_t *)mem + BH_PK_G;
		(*out)->counts =
		    (uint64_t *)(void *)((char *)mem + RESIL__CACHELINE);
		(*out)->lwords = BH_PACKED_WORDS;
	}
	(*out)->line = &(*out)->counts[slot * (*out)->lwords];
	(*out)->me = resil__load64(&procs[slot].owner);
	(*out)->slot1_hi = (uint64_t)(slot + 1) << 32;
	/* The slot is ours while we are attached: no other process writes
	 * the line's owner, so this one look serves every call. */
	if (resil__load64((*out)->line + 1) != (*out)->me)
		bh_shared_adopt(*out);
	return RESIL_OK;
}

resil_err
resil__bulkhead_new_shared(resil_bulkhead **out,
    const resil_bulkhead_config *cfg, void *mem, bool init,
    const resil__proc *procs, unsigned slot, resil_diag *diag)
{
	return bh_new_shared(out, cfg, mem, init, false, procs, slot, diag);
}

resil_err
resil__bulkhead_new_packed(resil_bulkhead **out,
    const resil_bulkhead_config *cfg, void *mem, bool init,
    const resil__proc *procs, unsigned slot, resil_diag *diag)
{
	return bh_new_shared(out, cfg, mem, init, true, procs, slot, diag);
}

uint32_t
resil__bulkhead_shared_reap(void *mem, const resil__proc *procs, unsigned skip)
{
	return bhs_reap((uint64_t *)(void *)((char *)mem + 2 * RESIL__CACHELINE),
	    (uint64_t *)(void *)((char *)mem + 3 * RESIL__CACHELINE),
	    BH_LINE_WORDS, procs, skip, true);
}

uint32_t
resil__bulkhead_packed_reap(void *mem, const resil__proc *procs, unsigned skip)
{
	return bhs_reap((uint64_t *)mem + BH_PK_G,
	    (uint64_t *)(void *)((char *)mem + RESIL__CACHELINE),
	    BH_PACKED_WORDS, procs, skip, true);
}

uint32_t
resil__bulkhead_packed_in_flight(const void *mem)
{
	return (uint32_t)BH_G_COUNT(resil__load64((const uint64_t *)mem + BH_PK_G));
}

void *
resil__bulkhead_shared_mem(const resil_bulkhead *bh)
{
	return bh->shmem;
}

/* Sweep at most this often for dead processes (system clock). */
#define BH_SWEEP_NS (10 * RESIL_NS_PER_MS)

/* A refusal of a shared bulkhead: give back the lines of slots that now
 * have another owner (no system call), and sweep for dead processes (at
 * most once per BH_SWEEP_NS across the region, the first one at once);
 * true when that gave something back, so the caller tries again. */
static LIMIT_NOINLINE bool
bh_shared_sweep(resil_bulkhead *bh)
{
	uint64_t now, last;
	uint32_t got = bhs_reap(
	    bh->gw, bh->counts, bh->lwords, bh->procs, bh->slot, false);

	now = resil_clock_now(resil_clock_system());
	last = resil__load64(bh->sweep_at);
	if ((last == 0 || now - last >= BH_SWEEP_NS) &&
	    resil__cas64(bh->sweep_at, last, now != 0 ? now : 1))
		got += bhs_reap(
		    bh->gw, bh->counts, bh->lwords, bh->procs, bh->slot, true);
	return got > 0;
}

/* At attach: our line may still hold another process's calls (one that
 * had our process slot before us and died, or detached, holding some):
 * give them back, then make the line ours. */
static void
bh_shared_adopt(resil_bulkhead *bh)
{
	(void)bhs_reap_line(bh->gw, bh->counts, bh->lwords, bh->slot,
	    resil__load64(bh->line + 1));
	resil__store64(bh->line + 1, bh->me);
}

/*
 * One call more (dec false: while below lim) or fewer (dec: while our
 * line has one) on a shared bulkhead: one CAS on G logs the change of our
 * line, one CAS on the line applies it (failing only when another did).
 * Returns the count before, or UINT64_MAX when refused. When G's last
 * change is our own, applied (one process: every time), that is our
 * line's version: nothing else to read.
 */
/* G's upper half once line l's change is logged: its version and our
 * slot + 1 (slot1 shifted in place). */
#define BH_G_TAG(l, slot1_hi) ((((l) >> 32) & BH_VER_MASK) << 39 | (slot1_hi))
#define BH_G_HI(g) ((g) & ~(uint64_t)UINT32_MAX)

static uint64_t
bh_shared_change(resil_bulkhead *bh, bool dec, uint64_t lim)
{
	uint64_t g, l, nl;

	for (;;) {
		g = resil__load64(bh->gw);
		l = resil__load64(bh->line);
		if (BH_G_HI(g) != BH_G_TAG(l, bh->slot1_hi)) {
			bhs_apply(bh->gw, bh->counts, bh->lwords, g);
			l = resil__load64(bh->line);
		}
		if (dec ? (uint32_t)l == 0 || BH_G_COUNT(g) == 0
		        : BH_G_COUNT(g) >= lim)
			return UINT64_MAX;
		nl = l + (UINT64_C(1) << 32) + (dec ? UINT64_MAX : 1);
		if (resil__cas64(bh->gw, g,
		        BH_G_TAG(nl, bh->slot1_hi) | (dec ? BH_G_DEC : 0) |
		            (dec ? BH_G_COUNT(g) - 1 : BH_G_COUNT(g) + 1)))
			break;
	}
	(void)resil__cas64(bh->line, l, nl);
	return BH_G_COUNT(g);
}

/* bh_shared_acquire() when the first look did not do: our line to adopt,
 * another process's change to apply, a lost race or the limit. At the
 * limit, sweep once for the slots of processes that are gone, then
 * refuse. */
static LIMIT_NOINLINE resil_err
bh_shared_acquire_slow(resil_bulkhead *bh, bh_stripe *sp)
{
	uint64_t n, lim = resil__load64(&bh->ctl) >> 32;
	bool swept = false;

	while ((n = bh_shared_change(bh, false, lim)) == UINT64_MAX) {
		if (swept || !bh_shared_sweep(bh))
			return bh_reject(bh, lim);
		swept = true;
	}
	resil__inc64(&sp->granted);
	bh_note_peak(sp, n + 1);
	return RESIL_OK;
}

/* Enter a shared bulkhead. The first look: G's last change is our own
 * and applied, below the limit, and the CAS wins. */
static LIMIT_NOINLINE resil_err
bh_shared_acquire(resil_bulkhead *bh, bh_stripe *sp)
{
	uint64_t *gw = bh->gw, *lw = bh->line;
	uint64_t g = resil__load64(gw), l = resil__load64(lw);
	uint64_t nl = l + (UINT64_C(1) << 32) + 1;

	if (RESIL__LIKELY(BH_G_HI(g) == BH_G_TAG(l, bh->slot1_hi) &&
	        BH_G_COUNT(g) < resil__load64(&bh->ctl) >> 32 &&
	        /* G's mark moves to the line's next version (it wraps
	         * with the 64 bits), the count up by one. */
	        resil__cas64(gw, g,
	            (g & ~BH_G_DEC) + (UINT64_C(1) << 39) + 1))) {
		(void)resil__cas64(lw, l, nl);
		resil__inc64(&sp->granted);
		bh_note_peak(sp, BH_G_COUNT(g) + 1);
		return RESIL_OK;
	}
	return bh_shared_acquire_slow(bh, sp);
}

/* Leave a shared bulkhead: one call fewer on our line; the first look as
 * in acquire. */
static LIMIT_NOINLINE resil_err
bh_shared_release(resil_bulkhead *bh, bh_stripe *sp)
{
	uint64_t *gw = bh->gw, *lw = bh->line;
	uint64_t g = resil__load64(gw), l = resil__load64(lw);
	uint64_t nl = l + (UINT64_C(1) << 32) - 1;

	if (RESIL__LIKELY(BH_G_HI(g) == BH_G_TAG(l, bh->slot1_hi) &&
	        (uint32_t)l != 0 && BH_G_COUNT(g) != 0 &&
	        resil__cas64(gw, g, (g | BH_G_DEC) + (UINT64_C(1) << 39) - 1)))
		(void)resil__cas64(lw, l, nl);
	else if (bh_shared_change(bh, true, 0) == UINT64_MAX)
		return RESIL_E_MISUSE;
	resil__inc64(&sp->released);
	return RESIL_OK;
}

void
resil_bulkhead_free(resil_bulkhead *bh)
{
	resil_allocator a;

	if (bh == NULL)
		return;
	resil_gradient_free(bh->grad);
	resil__bhq_free(bh->wq, &bh->alloc);
	a = bh->alloc;
	resil__free(&a, bh->mem, sizeof(*bh) + RESIL__CACHELINE);
}

#define SLOT_USED(w) ((w)&UINT32_MAX)
#define SLOT_LEASED(w) ((w) >> 32)

/* Calls in flight: the shared count, or (batched) the stripes' used
 * slots, summed without a snapshot (exact when no call is in progress). */
static uint64_t
bh_in_flight(resil_bulkhead *bh)
{
	uint64_t n = 0;
	unsigned i;

	if (bh->counts != NULL)
		return BH_G_COUNT(resil__load64(bh->gw));
	if (bh->batch == 0 || bh->batch == BH_CLASSED)
		return BHQ_COUNT(resil__load64(&bh->in_flight));
	for (i = 0; i < NSTRIPES; i++)
		n += SLOT_USED(resil__load64(&bh->stripes[i].slots));
	return n;
}

static void
bh_event(resil_bulkhead *bh, resil_limit_event_type type, uint32_t old_limit,
    uint32_t limit)
{
	resil_limit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.time = resil_clock_now(&bh->clock);
	ev.permits = 1;
	ev.limit = limit;
	ev.old_limit = old_limit;
	ev.in_flight = (uint32_t)bh_in_flight(bh);
	bh->listener(&ev, bh->listener_ctx);
}

static LIMIT_NOINLINE resil_err
bh_reject(resil_bulkhead *bh, uint64_t lim)
{
	resil__inc64(&bh_my_stripe(bh)->rejected);
	if (bh->listener != NULL)
		bh_event(bh, RESIL_LIMIT_EVENT_REJECTED, (uint32_t)lim,
		    (uint32_t)lim);
	return RESIL_E_LIMITED;
}

/* Raise the stripe's peak to v: one load of our own line in the common
 * case (a CAS, because threads beyond NSTRIPES share stripes). */
static inline void
bh_note_peak(bh_stripe *sp, uint64_t v)
{
	uint64_t p = resil__load64(&sp->peak);

	while (v > p && !resil__cas64(&sp->peak, p, v))
		p = resil__load64(&sp->peak);
}

/* Use a free leased slot of stripe sp, if it has one. */
static LIMIT_INLINE bool
bh_slot_take(bh_stripe *sp)
{
	uint64_t w = resil__load64(&sp->slots);

	while (SLOT_USED(w) < SLOT_LEASED(w)) {
		if (resil__cas64(&sp->slots, w, w + 1))
			return true;
		w = resil__load64(&sp->slots);
	}
	return false;
}

/* Give back a used slot of stripe sp, if it has one, keeping at most
 * batch slots leased and free there: the rest go back to the shared
 * count (after the stripe gave them up, so the shared count never falls
 * below the leases). */
static LIMIT_INLINE bool
bh_slot_give(resil_bulkhead *bh, bh_stripe *sp)
{
	uint64_t w = resil__load64(&sp->slots);

	while (SLOT_USED(w) > 0) {
		uint64_t used = SLOT_USED(w) - 1;
		uint64_t leased = SLOT_LEASED(w);
		uint64_t spare = leased - used;
		uint64_t back = spare > bh->batch ? spare - bh->batch : 0;

		if (resil__cas64(
		        &sp->slots, w, ((leased - back) << 32) | used)) {
			if (back > 0)
				resil__faa64(
				    &bh->in_flight, (uint64_t)0 - back);
			return true;
		}
		w = resil__load64(&sp->slots);
	}
	return false;
}

/* Batched acquire when the own stripe has no free slot: lease up to
 * batch more from the shared count, else use any stripe's free slot. */
static LIMIT_NOINLINE resil_err
bh_acquire_slow(resil_bulkhead *bh, bh_stripe *sp)
{
	uint64_t lim = resil__load64(&bh->ctl) >> 32;
	uint64_t cur, d, w;
	unsigned i;

	cur = resil__load64(&bh->in_flight);
	while (cur < lim) {
		d = lim - cur < bh->batch ? lim - cur : bh->batch;
		if (resil__cas64(&bh->in_flight, cur, cur + d)) {
			/* One slot for this call, d - 1 kept free. */
			w = resil__load64(&sp->slots);
			while (!resil__cas64(&sp->slots, w, w + (d << 32) + 1))
				w = resil__load64(&sp->slots);
			resil__inc64(&sp->granted);
			bh_note_peak(sp, cur + d);
			return RESIL_OK;
		}
		cur = resil__load64(&bh->in_flight);
	}
	for (i = 0; i < NSTRIPES; i++)
		if (bh_slot_take(&bh->stripes[i])) {
			resil__inc64(&sp->granted);
			return RESIL_OK;
		}
	return bh_reject(bh, lim);
}

static resil_err bh_try_classed(resil_bulkhead *bh, unsigned cls);

resil_err
resil_bulkhead_try_acquire(resil_bulkhead *bh)
{
	uint64_t cur, lim;
	bh_stripe *sp;

	if (RESIL__UNLIKELY(bh == NULL))
		return RESIL_E_INVAL;
	sp = bh_my_stripe(bh);
	if (bh->batch > 0) {
		if (RESIL__LIKELY(bh_slot_take(sp))) {
			resil__inc64(&sp->granted);
			return RESIL_OK;
		}
		/* A shared bulkhead's stripes lease nothing: here. */
		if (bh->batch == BH_SHARED)
			return bh_shared_acquire(bh, sp);
		if (bh->batch == BH_CLASSED)
			return bh_try_classed(bh, 1); /* default */
		return bh_acquire_slow(bh, sp);
	}
	cur = resil__load64(&bh->in_flight);
	for (;;) {
		lim = resil__load64(&bh->ctl) >> 32;
		if (RESIL__UNLIKELY(cur >= lim))
			return bh_reject(bh, lim);
		if (RESIL__LIKELY(resil__cas64(&bh->in_flight, cur, cur + 1)))
			break;
		cur = resil__load64(&bh->in_flight);
	}
	resil__inc64(&sp->granted);
	bh_note_peak(sp, cur + 1);
	return RESIL_OK;
}

/* How many times a batched release whose own stripe has nothing in
 * flight looks through the other stripes before it calls it misuse. */
#define BH_RELEASE_SCANS 3

/* A batched release whose own stripe has nothing in flight: the call was
 * acquired on another thread's stripe (or this is misuse). */
static resil_err bh_release_exact(resil_bulkhead *bh);

static LIMIT_NOINLINE resil_err
bh_release_scan(resil_bulkhead *bh, bh_stripe *sp)
{
	unsigned i, pass;

	/* A classed bulkhead leases nothing: its count is exact. */
	if (bh->batch == BH_CLASSED)
		return bh_release_exact(bh);
	for (pass = 0; pass < BH_RELEASE_SCANS; pass++)
		for (i = 0; i < NSTRIPES; i++)
			if (bh_slot_give(bh, &bh->stripes[i])) {
				resil__inc64(&sp->released);
				return RESIL_OK;
			}
	return RESIL_E_MISUSE;
}

/* An exact release whose word is 0 (misuse) or has waiters (issue 42:
 * the slot is handed on under the queue's lock). */
static LIMIT_NOINLINE resil_err
bh_release_odd(resil_bulkhead *bh, uint64_t cur)
{
	resil_err err;

	if (cur == 0)
		return RESIL_E_MISUSE; /* more releases than acquires */
	err = resil__bhq_release(bh->wq);
	if (err == RESIL_OK)
		resil__inc64(&bh_my_stripe(bh)->released);
	return err;
}

/* ---- what lib/limit_wait.c needs of a bulkhead ---- */

resil__bhq *
resil__bulkhead_q(resil_bulkhead *bh)
{
	return bh->wq;
}

void
resil__bulkhead_granted(resil_bulkhead *bh, uint64_t peak)
{
	bh_stripe *sp = bh_my_stripe(bh);

	resil__inc64(&sp->granted);
	bh_note_peak(sp, peak);
}

void
resil__bulkhead_refused(resil_bulkhead *bh)
{
	(void)bh_reject(bh, resil__load64(&bh->ctl) >> 32);
}

/* An acquire of class cls (lib/limit_queue.c's) that never waits: no
 * reservations, no queue: try_acquire decides (a waiter in the word
 * refuses it, which is right: without reservations a waiter means
 * every class's share is taken). */
resil_err
resil__bulkhead_try_cls(resil_bulkhead *bh, unsigned cls)
{
	if (bh->wq == NULL || bh->batch != BH_CLASSED)
		return resil_bulkhead_try_acquire(bh);
	return bh_try_classed(bh, cls);
}

/* A classed bulkhead's (BH_CLASSED, its queue set) try for class cls. */
static resil_err
bh_try_classed(resil_bulkhead *bh, unsigned cls)
{
	uint64_t peak = 0;

	if (resil__bhq_try(bh->wq, cls, &peak) != RESIL_OK)
		return bh_reject(bh, resil__load64(&bh->ctl) >> 32);
	resil__bulkhead_granted(bh, peak);
	return RESIL_OK;
}

/* resil_bulkhead_acquire_wait() past its fast path: queue and block
 * through the clock's wait until a slot comes or the wait ends. */
static LIMIT_NOINLINE resil_err
bh_acquire_wait_slow(
    resil_bulkhead *bh, resil_priority prio, uint64_t *waited)
{
	resil_bulkhead_waiter w;
	uint64_t now, peak = 0, wt = 0;
	int r;

	if (bh == NULL || (unsigned)prio > (unsigned)RESIL_PRIORITY_CRITICAL)
		return RESIL_E_INVAL;
	/* A clock that can neither wait nor sleep cannot block: no queue
	 * (the thread would spin until the deadline). */
	if (bh->wq == NULL || bh->wq->max_wait == 0 ||
	    ((bh->clock.wait == NULL || bh->clock.wake == NULL) &&
	        bh->clock.sleep == NULL)) {
		r = (int)resil__bulkhead_try_cls(bh, resil__bhq_cls(prio));
		if (r == RESIL_OK && waited != NULL)
			*waited = 0;
		return (resil_err)r;
	}
	now = resil_clock_now(&bh->clock);
	r = resil__bhq_start(
	    bh->wq, resil__bhq_cls(prio), &w, NULL, NULL, now, &peak);
	while (r == BHQ_QUEUED || r == BHQ_WAITS) {
		resil__bulkhead_wait_block(&w, resil_bulkhead_wait_deadline(&w));
		now = resil_clock_now(&bh->clock);
		r = resil__bhq_poll(bh->wq, &w, now, &peak);
		if (r == BHQ_GRANTED && now > resil__bhq_start_time(&w))
			wt = now - resil__bhq_start_time(&w);
	}
	if (r != BHQ_GRANTED)
		return bh_reject(bh, resil__load64(&bh->ctl) >> 32);
	resil__bulkhead_granted(bh, peak);
	if (waited != NULL)
		*waited = wt;
	return RESIL_OK;
}

resil_err
resil_bulkhead_acquire_wait(
    resil_bulkhead *bh, resil_priority prio, uint64_t *waited)
{
	uint64_t cur, lim;
	bh_stripe *sp;
	unsigned si;

	/* An exact bulkhead (no reservations: every class's share is the
	 * limit) with a free slot and nobody queued: try_acquire's path,
	 * one CAS; anything else (a lost race, a thread's first call, NULL)
	 * goes on in lib/limit_wait.c. No call on this path, so no frame. */
	if (RESIL__LIKELY(bh != NULL && bh->batch == 0 &&
	        (unsigned)prio <= (unsigned)RESIL_PRIORITY_CRITICAL &&
	        resil__thread_stripe_known(NSTRIPES, &si))) {
		cur = resil__load64(&bh->in_flight);
		lim = resil__load64(&bh->ctl) >> 32;
		if (RESIL__LIKELY(cur < lim) &&
		    RESIL__LIKELY(resil__cas64(&bh->in_flight, cur, cur + 1))) {
			sp = &bh->stripes[si];
			resil__inc64(&sp->granted);
			bh_note_peak(sp, cur + 1);
			if (waited != NULL)
				*waited = 0;
			return RESIL_OK;
		}
	}
	return bh_acquire_wait_slow(bh, prio, waited);
}

resil_err
resil_bulkhead_release(resil_bulkhead *bh)
{
	uint64_t cur;
	bh_stripe *sp;

	if (RESIL__UNLIKELY(bh == NULL))
		return RESIL_E_INVAL;
	sp = bh_my_stripe(bh);
	if (bh->batch > 0) {
		if (RESIL__LIKELY(bh_slot_give(bh, sp))) {
			resil__inc64(&sp->released);
			return RESIL_OK;
		}
		if (bh->batch == BH_SHARED)
			return bh_shared_release(bh, sp);
		return bh_release_scan(bh, sp);
	}
	cur = resil__load64(&bh->in_flight);
	for (;;) {
		/* One test for two cases (the count is below 2^30): nothing
		 * in flight (cur 0), or waiters in the high half. */
		if (RESIL__UNLIKELY(cur - 1 > (uint64_t)INT32_MAX))
			return bh_release_odd(bh, cur);
		if (RESIL__LIKELY(resil__cas64(&bh->in_flight, cur, cur - 1)))
			break;
		cur = resil__load64(&bh->in_flight);
	}
	resil__inc64(&sp->released);
	return RESIL_OK;
}

/* The exact release of a classed bulkhead (through the batched path). */
static resil_err
bh_release_exact(resil_bulkhead *bh)
{
	uint64_t cur = resil__load64(&bh->in_flight);

	for (;;) {
		if (cur - 1 > (uint64_t)INT32_MAX)
			return bh_release_odd(bh, cur);
		if (resil__cas64(&bh->in_flight, cur, cur - 1))
			break;
		cur = resil__load64(&bh->in_flight);
	}
	resil__inc64(&bh_my_stripe(bh)->released);
	return RESIL_OK;
}

/* The limit rose: a bulkhead that waits hands the slots it opened to
 * its queue now, not at the next release (issue 42). */
static inline void
bh_grown(resil_bulkhead *bh)
{
	if (bh->wq != NULL && BHQ_NWAIT(resil__load64(&bh->in_flight)) != 0)
		(void)resil__bhq_grow(bh->wq);
}

/* A gradient bulkhead's sample: the gradient's answer becomes the
 * limit. */
static LIMIT_NOINLINE void
bh_gradient_sample(resil_bulkhead *bh, bh_stripe *sp, resil_outcome outcome,
    uint64_t latency, uint64_t inflight)
{
	uint64_t w, lim, nlim;

	nlim = resil_gradient_sample(bh->grad, latency,
	    inflight > UINT32_MAX ? UINT32_MAX : (uint32_t)inflight,
	    outcome == RESIL_OUTCOME_FAILURE);
	for (;;) {
		w = resil__load64(&bh->ctl);
		lim = w >> 32;
		if (lim == nlim ||
		    resil__cas64(&bh->ctl, w, (nlim << 32) | (w & UINT32_MAX)))
			break;
	}
	if (nlim > lim) {
		resil__inc64(&sp->increases);
		if (bh->listener != NULL)
			bh_event(bh, RESIL_LIMIT_EVENT_LIMIT_INCREASED,
			    (uint32_t)lim, (uint32_t)nlim);
		bh_grown(bh);
	} else if (nlim < lim) {
		resil__inc64(&sp->decreases);
		if (bh->listener != NULL)
			bh_event(bh, RESIL_LIMIT_EVENT_LIMIT_DECREASED,
			    (uint32_t)lim, (uint32_t)nlim);
	}
}

/* record, with the calls in flight a gradient sample takes. */
static resil_err
bh_record(resil_bulkhead *bh, resil_outcome outcome, uint64_t latency,
    uint64_t inflight)
{
	uint64_t w, lim, cnt, nlim, ncnt;
	bh_stripe *sp;
	int good;

	if (outcome == RESIL_OUTCOME_IGNORED ||
	    outcome == RESIL_OUTCOME_BUSINESS)
		return RESIL_OK;
	sp = bh_my_stripe(bh);
	if (bh->grad != NULL) {
		resil__faa64(
		    outcome == RESIL_OUTCOME_SUCCESS ? &sp->good : &sp->bad,
		    1);
		bh_gradient_sample(bh, sp, outcome, latency, inflight);
		return RESIL_OK;
	}
	good = outcome == RESIL_OUTCOME_SUCCESS && latency <= bh->target;
	resil__inc64(good ? &sp->good : &sp->bad);
	if (!bh->adaptive)
		return RESIL_OK;
	for (;;) {
		w = resil__load64(&bh->ctl);
		lim = w >> 32;
		cnt = w & UINT32_MAX;
		if (good) {
			ncnt = cnt + 1;
			nlim = lim;
			if (ncnt >= lim) {
				nlim = lim + bh->increase;
				if (nlim > bh->max_limit)
					nlim = bh->max_limit;
				ncnt = 0;
			}
		} else {
			nlim = lim * bh->backoff_pct / 100;
			if (nlim < bh->min_limit)
				nlim = bh->min_limit;
			ncnt = 0;
		}
		if (resil__cas64(&bh->ctl, w, (nlim << 32) | ncnt))
			break;
	}
	if (nlim > lim) {
		resil__inc64(&sp->increases);
		if (bh->listener != NULL)
			bh_event(bh, RESIL_LIMIT_EVENT_LIMIT_INCREASED,
			    (uint32_t)lim, (uint32_t)nlim);
		bh_grown(bh);
	} else if (nlim < lim) {
		resil__inc64(&sp->decreases);
		if (bh->listener != NULL)
			bh_event(bh, RESIL_LIMIT_EVENT_LIMIT_DECREASED,
			    (uint32_t)lim, (uint32_t)nlim);
	}
	return RESIL_OK;
}

resil_err
resil_bulkhead_record(
    resil_bulkhead *bh, resil_outcome outcome, uint64_t latency)
{
	if (bh == NULL || (unsigned)outcome > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_E_INVAL;
	return bh_record(
	    bh, outcome, latency, bh->grad != NULL ? bh_in_flight(bh) : 0);
}

resil_err
resil_bulkhead_complete(
    resil_bulkhead *bh, resil_outcome outcome, uint64_t latency)
{
	uint64_t inflight = 0;
	resil_err err;

	if (bh == NULL || (unsigned)outcome > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_E_INVAL;
	if (bh->grad != NULL)
		inflight = bh_in_flight(bh); /* this call included */
	err = resil_bulkhead_release(bh);
	if (err != RESIL_OK)
		return err;
	return bh_record(bh, outcome, latency, inflight);
}

resil_gradient *
resil_bulkhead_gradient(resil_bulkhead *bh)
{
	return bh != NULL ? bh->grad : NULL;
}

uint32_t
resil_bulkhead_get_limit(const resil_bulkhead *bh)
{
	if (bh == NULL)
		return 0;
	return (uint32_t)(resil__load64(&bh->ctl) >> 32);
}

resil_err
resil_bulkhead_get_metrics(resil_bulkhead *bh, resil_bulkhead_metrics *out)
{
	resil_bulkhead_metrics m;
	uint64_t p, peak = 0;
	unsigned i;

	if (bh == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&m, 0, sizeof(m));
	for (i = 0; i < NSTRIPES; i++) {
		bh_stripe *sp = &bh->stripes[i];

		m.granted += resil__load64(&sp->granted);
		m.rejected += resil__load64(&sp->rejected);
		m.released += resil__load64(&sp->released);
		m.good_samples += resil__load64(&sp->good);
		m.bad_samples += resil__load64(&sp->bad);
		m.increases += resil__load64(&sp->increases);
		m.decreases += resil__load64(&sp->decreases);
		p = resil__load64(&sp->peak);
		if (p > peak)
			peak = p;
	}
	m.limit = (uint32_t)(resil__load64(&bh->ctl) >> 32);
	m.in_flight = (uint32_t)bh_in_flight(bh);
	m.peak_in_flight = (uint32_t)peak;
	if (bh->wq != NULL) {
		m.waiting = (uint32_t)BHQ_NWAIT(resil__load64(&bh->in_flight));
		m.waited = resil__load64(&bh->wq->waited);
		m.wait_timeouts = resil__load64(&bh->wq->timeouts);
		m.queue_full = resil__load64(&bh->wq->full);
	}
	*out = m;
	return RESIL_OK;
}

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
	uint64_t granted_calls;
	uint64_t extra_permits;
	uint64_t rejected_calls;
	uint64_t waited_calls;
	uint64_t pad[4];
} rl_stripe;

struct resil_ratelimit {
	uint64_t state; /* written by every grant: its own cache line */
	char pad0[RESIL__CACHELINE - sizeof(uint64_t)];
	uint64_t base[2]; /* read by every decision, written rarely */
	char pad1[RESIL__CACHELINE - 2 * sizeof(uint64_t)];
	rl_stripe stripes[NSTRIPES];
	/* Read-only after creation. */
	uint64_t scale;        /* rate / gcd(rate, period) */
	uint64_t ts;           /* emission interval, scaled: period / gcd */
	uint64_t bs;           /* burst * ts */
	uint64_t rebase_ticks; /* REBASE_AT / scale */
	uint64_t period;
	uint32_t rate;
	uint32_t burst;
	resil_limit_listener_fn listener;
	void *listener_ctx;
	resil_clock clock;
	resil_allocator alloc;
	void *mem; /* what was allocated: the struct sits aligned inside */
};

_Static_assert(sizeof(rl_stripe) == RESIL__CACHELINE, "rl_stripe size");
_Static_assert(offsetof(struct resil_ratelimit, base) == RESIL__CACHELINE,
    "ratelimit: base on its own line");
_Static_assert(
    offsetof(struct resil_ratelimit, stripes) == 2 * RESIL__CACHELINE,
    "ratelimit: stripes line-aligned");
_Static_assert(offsetof(struct resil_ratelimit, scale) ==
        (2 + NSTRIPES) * RESIL__CACHELINE,
    "ratelimit: configuration after the stripes");

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

static uint64_t
gcd64(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static uint64_t
ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0 ? 1u : 0u);
}

static uint64_t
sat_add_u64(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t
sat_mul_u64(uint64_t a, uint64_t b)
{
	return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
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
	g = gcd64(cfg->rate, cfg->period_ns);
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
	return RESIL_OK;
}

resil_err
resil_ratelimit_new(
    resil_ratelimit **out, const resil_ratelimit_config *cfg, resil_diag *diag)
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
	g = gcd64(cfg->rate, cfg->period_ns);
	rl->scale = cfg->rate / g;
	rl->ts = cfg->period_ns / g;
	rl->bs = (uint64_t)cfg->burst * rl->ts;
	rl->rebase_ticks = REBASE_AT / rl->scale;
	rl->period = cfg->period_ns;
	rl->rate = cfg->rate;
	rl->burst = cfg->burst;
	rl->listener = cfg->listener;
	rl->listener_ctx = cfg->listener_ctx;

	/* Generation 0; slot 1 is tagged with generation GEN_MASK (that is,
	 * -1), so that it reads as "not prepared" for generation 1. A full
	 * burst: tat = now. */
	now = resil_clock_now(&rl->clock);
	base = now & ~GEN_MASK;
	rl->base[0] = base;
	rl->base[1] = GEN_MASK;
	rl->state = (now - base) * rl->scale;
	/* No fence: handing *out to another thread (pthread_create, a lock,
	 * an atomic store) already orders these plain stores before it. */
	*out = rl;
	return RESIL_OK;
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
static void
rebase(resil_ratelimit *rl, uint64_t w, uint64_t base, uint64_t now)
{
	uint64_t gen = w >> TAT_BITS;
	uint64_t ngen = (gen + 1) & GEN_MASK;
	uint64_t *slot = &rl->base[ngen & 1];
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
	(void)resil__cas64(&rl->state, w, (ngen << TAT_BITS) | ntat);
}

/*
 * The GCRA decision. Grants when the k permits are due within
 * wait_max_s scaled ticks of now (0: only when due now), storing the
 * ticks to wait in *ticks; otherwise stores the ticks until they would be
 * due (>= 1) and returns RESIL_E_LIMITED. *now_out gets the clock reading.
 */
static resil_err
rl_take(resil_ratelimit *rl, uint32_t k, uint64_t wait_max_s, uint64_t *ticks,
    uint64_t *now_out)
{
	uint64_t now = resil_clock_now(&rl->clock);
	uint64_t need = (uint64_t)k * rl->ts;
	uint64_t w, gen, b, base, n, tat, t, nt, lim, excess;

	*now_out = now;
	for (;;) {
		w = resil__load64(&rl->state);
		gen = w >> TAT_BITS;
		b = resil__load64(&rl->base[gen & 1]);
		if ((b & GEN_MASK) != gen) {
			/* The word moved on twice since we read it. */
			resil__stall();
			continue;
		}
		base = b & ~GEN_MASK;
		if (now > base && now - base > rl->rebase_ticks) {
			rebase(rl, w, base, now);
			continue;
		}
		/* A reading before the base (a clock that went back past a
		 * rebase) counts as the base for the schedule; but a wait
		 * must first cover the way back up to the base, or waiting
		 * the answer would not make the permits due. */
		n = now > base ? (now - base) * rl->scale : 0;
		tat = w & TAT_MASK;
		t = tat > n ? tat : n;
		nt = t + need;
		lim = n + rl->bs;
		excess = 0;
		if (nt > lim) {
			excess = nt - lim;
			if (now < base)
				excess = sat_add_u64(excess,
				    sat_mul_u64(base - now, rl->scale));
		}
		if (excess <= wait_max_s) {
			if (!resil__cas64(
			        &rl->state, w, (gen << TAT_BITS) | nt))
				continue;
			*ticks = ceil_div(excess, rl->scale);
			return RESIL_OK;
		}
		*ticks = ceil_div(excess, rl->scale);
		return RESIL_E_LIMITED;
	}
}

static inline rl_stripe *
rl_my_stripe(resil_ratelimit *rl)
{
	return &rl->stripes[resil__thread_stripe(NSTRIPES)];
}

/* Count a grant of k permits: one add for k = 1. */
static inline void
rl_granted(rl_stripe *sp, uint32_t k)
{
	resil__faa64(&sp->granted_calls, 1);
	if (k > 1)
		resil__faa64(&sp->extra_permits, k - 1);
}

static void
rl_rejected(resil_ratelimit *rl, uint32_t k, uint64_t retry, uint64_t now)
{
	resil_limit_event ev;

	resil__faa64(&rl_my_stripe(rl)->rejected_calls, 1);
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

resil_err
resil_ratelimit_try_acquire(
    resil_ratelimit *rl, uint32_t k, uint64_t *retry_after)
{
	uint64_t ticks, now;

	if (rl == NULL || k == 0 || k > rl->burst)
		return RESIL_E_INVAL;
	if (rl_take(rl, k, 0, &ticks, &now) != RESIL_OK) {
		rl_rejected(rl, k, ticks, now);
		if (retry_after != NULL)
			*retry_after = ticks;
		return RESIL_E_LIMITED;
	}
	rl_granted(rl_my_stripe(rl), k);
	return RESIL_OK;
}

resil_err
resil_ratelimit_acquire_wait(
    resil_ratelimit *rl, uint32_t k, uint64_t max_wait, uint64_t *waited)
{
	uint64_t ticks, now, wait_s;
	rl_stripe *sp;

	if (rl == NULL || k == 0 || k > rl->burst)
		return RESIL_E_INVAL;
	/* Waiting needs a clock that can sleep; otherwise only "now" is
	 * acceptable. */
	if (rl->clock.sleep == NULL)
		wait_s = 0;
	else if (max_wait > RESIL_RATELIMIT_MAX_SPAN / rl->scale)
		wait_s = RESIL_RATELIMIT_MAX_SPAN;
	else
		wait_s = max_wait * rl->scale;
	if (rl_take(rl, k, wait_s, &ticks, &now) != RESIL_OK) {
		rl_rejected(rl, k, ticks, now);
		return RESIL_E_LIMITED;
	}
	sp = rl_my_stripe(rl);
	rl_granted(sp, k);
	if (ticks > 0) {
		resil__faa64(&sp->waited_calls, 1);
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
	uint64_t now, w, gen, b, base, n, t;
	unsigned i;

	if (rl == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&m, 0, sizeof(m));
	now = resil_clock_now(&rl->clock);
	for (;;) {
		w = resil__load64(&rl->state);
		gen = w >> TAT_BITS;
		b = resil__load64(&rl->base[gen & 1]);
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

		m.granted_calls += resil__load64(&sp->granted_calls);
		m.granted_permits += resil__load64(&sp->extra_permits);
		m.rejected_calls += resil__load64(&sp->rejected_calls);
		m.waited_calls += resil__load64(&sp->waited_calls);
	}
	m.granted_permits += m.granted_calls;
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
 * acquire reads its own line, not a shared one, to check it. */
typedef struct bh_stripe {
	uint64_t granted;
	uint64_t rejected;
	uint64_t released;
	uint64_t peak;
	uint64_t good;
	uint64_t bad;
	uint64_t increases;
	uint64_t decreases;
} bh_stripe;

struct resil_bulkhead {
	uint64_t in_flight;
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
	uint64_t target;
	resil_limit_listener_fn listener;
	void *listener_ctx;
	resil_clock clock;
	resil_allocator alloc;
	void *mem; /* what was allocated: the struct sits aligned inside */
};

_Static_assert(sizeof(bh_stripe) == RESIL__CACHELINE, "bh_stripe size");
_Static_assert(offsetof(struct resil_bulkhead, ctl) == RESIL__CACHELINE,
    "bulkhead: ctl on its own line");
_Static_assert(
    offsetof(struct resil_bulkhead, stripes) == 2 * RESIL__CACHELINE,
    "bulkhead: stripes line-aligned");
_Static_assert(offsetof(struct resil_bulkhead, adaptive) ==
        (2 + NSTRIPES) * RESIL__CACHELINE,
    "bulkhead: configuration after the stripes");

static inline bh_stripe *
bh_my_stripe(resil_bulkhead *bh)
{
	return &bh->stripes[resil__thread_stripe(NSTRIPES)];
}

#define MAX_LIMIT RESIL_BULKHEAD_MAX_LIMIT

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
	if (!cfg->adaptive)
		return RESIL_OK;
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

resil_err
resil_bulkhead_new(
    resil_bulkhead **out, const resil_bulkhead_config *cfg, resil_diag *diag)
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
	bh = alloc_aligned(cfg->alloc, sizeof(*bh), &mem);
	if (bh == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "bulkhead: out of memory");
	bh->mem = mem;
	bh->alloc = *resil__allocator(cfg->alloc);
	bh->clock = cfg->clock != NULL && cfg->clock->now != NULL
	    ? *cfg->clock
	    : *resil_clock_system();
	bh->adaptive = cfg->adaptive != 0;
	bh->min_limit = cfg->min_limit;
	bh->max_limit = cfg->max_limit;
	bh->increase = cfg->increase;
	bh->backoff_pct = cfg->backoff_pct;
	bh->target = cfg->target_latency_ns;
	bh->listener = cfg->listener;
	bh->listener_ctx = cfg->listener_ctx;
	bh->ctl = (uint64_t)cfg->max_concurrent << 32;
	*out = bh;
	return RESIL_OK;
}

void
resil_bulkhead_free(resil_bulkhead *bh)
{
	resil_allocator a;

	if (bh == NULL)
		return;
	a = bh->alloc;
	resil__free(&a, bh->mem, sizeof(*bh) + RESIL__CACHELINE);
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
	ev.in_flight = (uint32_t)resil__load64(&bh->in_flight);
	bh->listener(&ev, bh->listener_ctx);
}

resil_err
resil_bulkhead_try_acquire(resil_bulkhead *bh)
{
	uint64_t cur, lim, p;
	bh_stripe *sp;

	if (bh == NULL)
		return RESIL_E_INVAL;
	cur = resil__load64(&bh->in_flight);
	for (;;) {
		lim = resil__load64(&bh->ctl) >> 32;
		if (cur >= lim) {
			resil__faa64(&bh_my_stripe(bh)->rejected, 1);
			if (bh->listener != NULL)
				bh_event(bh, RESIL_LIMIT_EVENT_REJECTED,
				    (uint32_t)lim, (uint32_t)lim);
			return RESIL_E_LIMITED;
		}
		if (resil__cas64(&bh->in_flight, cur, cur + 1))
			break;
		cur = resil__load64(&bh->in_flight);
	}
	sp = bh_my_stripe(bh);
	resil__faa64(&sp->granted, 1);
	/* The peak rarely moves: one load of our own line in the common
	 * case (a CAS, because threads beyond NSTRIPES share stripes). */
	p = resil__load64(&sp->peak);
	while (cur + 1 > p && !resil__cas64(&sp->peak, p, cur + 1))
		p = resil__load64(&sp->peak);
	return RESIL_OK;
}

resil_err
resil_bulkhead_release(resil_bulkhead *bh)
{
	uint64_t cur;

	if (bh == NULL)
		return RESIL_E_INVAL;
	cur = resil__load64(&bh->in_flight);
	for (;;) {
		if (cur == 0)
			return RESIL_E_MISUSE; /* more releases than acquires
			                        */
		if (resil__cas64(&bh->in_flight, cur, cur - 1))
			break;
		cur = resil__load64(&bh->in_flight);
	}
	resil__faa64(&bh_my_stripe(bh)->released, 1);
	return RESIL_OK;
}

resil_err
resil_bulkhead_record(
    resil_bulkhead *bh, resil_outcome outcome, uint64_t latency)
{
	uint64_t w, lim, cnt, nlim, ncnt;
	bh_stripe *sp;
	int good;

	if (bh == NULL || (unsigned)outcome > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_E_INVAL;
	if (outcome == RESIL_OUTCOME_IGNORED ||
	    outcome == RESIL_OUTCOME_BUSINESS)
		return RESIL_OK;
	good = outcome == RESIL_OUTCOME_SUCCESS && latency <= bh->target;
	sp = bh_my_stripe(bh);
	resil__faa64(good ? &sp->good : &sp->bad, 1);
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
		resil__faa64(&sp->increases, 1);
		if (bh->listener != NULL)
			bh_event(bh, RESIL_LIMIT_EVENT_LIMIT_INCREASED,
			    (uint32_t)lim, (uint32_t)nlim);
	} else if (nlim < lim) {
		resil__faa64(&sp->decreases, 1);
		if (bh->listener != NULL)
			bh_event(bh, RESIL_LIMIT_EVENT_LIMIT_DECREASED,
			    (uint32_t)lim, (uint32_t)nlim);
	}
	return RESIL_OK;
}

resil_err
resil_bulkhead_complete(
    resil_bulkhead *bh, resil_outcome outcome, uint64_t latency)
{
	resil_err err;

	if (bh == NULL || (unsigned)outcome > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_E_INVAL;
	err = resil_bulkhead_release(bh);
	if (err != RESIL_OK)
		return err;
	return resil_bulkhead_record(bh, outcome, latency);
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
	m.in_flight = (uint32_t)resil__load64(&bh->in_flight);
	m.peak_in_flight = (uint32_t)peak;
	*out = m;
	return RESIL_OK;
}

/*
 * Keyed families: one breaker, rate limiter or bulkhead per key.
 *
 * The layout. A pool of max_keys entries (128 bytes each, two cache lines,
 * fixed at creation) holds the keys; an open-addressed table of 2^n slots
 * (at least three times max_keys + 1, so never more than a third full)
 * maps a key's hash to its entry. A slot is the entry's address, an empty
 * one kempty's (always DEAD: a probe tests the pin word, not for empty
 * first). A probe that passes another key's entry reads it (about one call
 * in six at a third full). Deletion shifts the run back (Knuth's algorithm
 * R): no tombstones, and churn never lengthens the probes.
 *
 * Why no epoch. Entries are never freed while the family lives, so a
 * reader may always touch one, even one that was evicted and reused. What
 * keeps an entry from changing under a reader is one of two holds:
 *
 * The pin. The entry's pin word holds a count of callers holding the
 * entry, a DEAD bit (free, or being evicted), a COLD bit (not used since
 * the CLOCK hand passed) and a generation. A reader pins with one
 * compare-and-swap that fails on DEAD, and only then reads the entry's key
 * and instance: the writer (under the family's lock) rewrites those only
 * after its own compare-and-swap moved a count of 0 to DEAD, and publishes
 * them by storing the pin word (a release) before the slot.
 *
 * The hazard slot (a family made where membarrier(2)'s private expedited
 * fence is available). Each thread has one slot, a word in a process-wide
 * list (khaz below). A reader stores the entry's address there with a
 * plain store, then reads the pin word: not DEAD, the entry is its own
 * until the slot is cleared. The evictor, after its compare-and-swap to
 * DEAD, makes every thread of the process pass a full fence (membarrier)
 * and reads every slot: an entry in a slot goes back to live, untouched.
 * Either the reader's load sees DEAD or the evictor's scan sees the slot
 * (the fence stands in for the one the reader does not make), so an
 * existing key's call makes no locked instruction. A thread whose slot is
 * busy (it holds a permit already: nested calls), a thread's first call,
 * the lock's finds, handles, bulkheads and throttles pin instead; a family
 * made without the fence (refused, e.g. by seccomp, or
 * RESIL_KEYED_NO_MEMBARRIER set in the environment) pins always.
 *
 * A reader that holds a reused entry finds another key there, lets go and
 * probes on. A find that misses while the table is being changed (a slot
 * shifted under it) is only a miss: the caller then takes the lock and
 * finds again, where nothing moves. So a key is never given a wrong
 * instance, and a key's instance is made once, under the lock.
 *
 * Holding is also what keeps a key with a call in flight: a breaker
 * permit or a bulkhead slot holds its entry (its pin, or its thread's
 * slot: the permit then names the slot, which whoever records it clears)
 * until it is recorded or released, and eviction takes only entries with
 * a count of 0 in no slot.
 */
#include <resil/keyed.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if !defined(__linux__)
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED 0 /* never used: no fence here */
#endif

#include "atomic.h"
#include "breaker_fast.h"
#include "breaker_internal.h"
#include "internal.h"
#include "keyed_maker.h"

#define PIN_COUNT UINT64_C(0xffffff)
/* Not used since the CLOCK hand passed (kept inverted so that a
 * call tests DEAD and it in one instruction). */
#define PIN_COLD (UINT64_C(1) << 30)
#define PIN_DEAD (UINT64_C(1) << 31)
#define PIN_GEN (UINT64_C(1) << 32)

/* The first cache line holds what a call on an existing key reads (the
 * key's first 8 bytes included); a longer inline key runs on into the
 * second. */
typedef struct kentry {
	uint64_t pin;
	uint64_t hash;
	void *inst;
	/* A breaker's fast paths (lib/breaker_fast.h), taken at creation. */
	const uint64_t *acq_word;
	struct bstate *st;
	const uint64_t *streak;
	uint32_t len;
	uint32_t ov; /* override index + 1; 0: the family's settings */
	union {
		uint8_t small[RESIL_KEYED_INLINE_KEY];
		uint8_t *heap;
	} k;
} kentry;

_Static_assert(sizeof(kentry) == 128, "an entry is two cache lines");

typedef struct kover {
	resil_keyed_override o;
	uint64_t hash;
	uint8_t *key; /* a copy */
} kover;

struct resil_keyed {
	/* Read by every call: first. */
	uint64_t seed;
	uint64_t seed2; /* the hash's second word's (from seed) */
	uint64_t *slots;
	uint64_t mask;
	kentry *pool;
	/* By kind: max_key_len for the family's kind, 0 for the others, so
	 * that len - 1 < kmax[kind] tests the length and the kind at once. */
	uint32_t kmax[RESIL_KEYED_KINDS];
	/* The fast case's, by kind: for the family's kind in a fenced
	 * family, min(max_key_len, 16) - 7 (0 when under 8), else 0: a key
	 * of 8..16 bytes held by slot is len - 8 < kfast[kind], one test. */
	uint32_t kfast[RESIL_KEYED_KINDS];
	bool fenced; /* calls hold entries by hazard slot (membarrier) */
	size_t max_len;
	resil_keyed_kind kind;
	resil_keyed_config cfg;
	resil_allocator user;   /* the caller's */
	resil_allocator walloc; /* counts into bytes, then the caller's */
	resil_clock clock;
	uint64_t bytes; /* held through walloc now */
	uint64_t bytes_fixed;
	uint64_t instance_bytes;
	void *pool_mem;
	size_t pool_size;
	uint32_t *free_idx; /* a stack of free entries */
	uint32_t n_free;
	uint32_t hand; /* the CLOCK hand */
	/* New keys that go to the overflow without a sweep, after a sweep
	 * found no place: a family full of protected keys must not cost a
	 * sweep per new key (at most 2 * 64 metrics reads each, amortised). */
	uint32_t skip;
	uint32_t keys;
	uint64_t created, evicted, overflowed;
	kover *ov;
	size_t n_ov;
	resil__spinlock lock;
	kentry ovf; /* the overflow instance's entry: never in the table */
	/* Instances made elsewhere (lib/keyed_maker.h); make NULL: here. */
	resil__keyed_maker mk;
};

#if defined(__GNUC__)
#define KINLINE inline __attribute__((always_inline))
#define KNOINLINE __attribute__((noinline))
#define KCOLD __attribute__((noinline, cold))
#else
#define KINLINE inline
#define KNOINLINE
#define KCOLD
#endif

/* ---- hazard slots (see the top comment) ----
 *
 * One record per live thread that called a fenced family, in a list
 * that only grows (records are malloc'd, 64 bytes, kept for the process):
 * a thread that exits gives its record back (khaz_key's destructor) and a
 * later thread takes it. e: the kentry * the thread's find or permit
 * holds, 0 for none; only its thread stores a non-zero value, and only
 * over 0; whoever records the permit stores the 0. A record given back
 * with a permit still out keeps it until that permit is recorded (its
 * next thread finds the slot busy and pins). khaz_mine is never NULL. */
typedef struct khaz {
	uint64_t e;
	uint64_t used; /* a live thread has it */
	struct khaz *next;
	/* Where a permit held here counts a breaker's success: the offset
	 * in struct bstate of the lifetime successes of stripe (the record's
	 * number) mod 4, one no thread owns (lib/internal.h), so any thread
	 * adds to it, locked. Set before the record is published. */
	uintptr_t succ;
	char pad[RESIL__CACHELINE - 4 * sizeof(uint64_t)];
} khaz;

_Static_assert(sizeof(khaz) == RESIL__CACHELINE, "a slot is one line");

static khaz *khaz_head;
static pthread_once_t khaz_once = PTHREAD_ONCE_INIT;
static pthread_key_t khaz_key;
static bool khaz_key_ok;
static bool khaz_fence_ok;
/* A thread without a record points at this one, busy for ever: its
 * calls test one word to know they cannot hold by slot. */
static khaz khaz_none = { 1, 1, NULL, 0, { 0 } };
static uint64_t khaz_made; /* records made, for their stripes */

_Static_assert(RESIL__STRIPE_OWN0 <= NSTRIPES &&
        (RESIL__STRIPE_OWN0 & (RESIL__STRIPE_OWN0 - 1)) == 0,
    "stripes 0..RESIL__STRIPE_OWN0 - 1 are a breaker's, owned by none");
static RESIL__TLS khaz *khaz_mine = &khaz_none;

static int
kmembarrier(int cmd)
{
#if defined(__linux__) && defined(SYS_membarrier)
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
#else
	(void)cmd;
	return -1;
#endif
}

static void
khaz_give_back(void *v)
{
	khaz *r = v;

	khaz_mine = &khaz_none;
	resil__store64(&r->used, 0);
}

/* A fork's child has one thread: what the others held, nobody holds. */
static void
khaz_after_fork(void)
{
	khaz *r;

	for (r = khaz_head; r != NULL; r = r->next)
		if (r != khaz_mine) {
			r->e = 0;
			r->used = 0;
		}
}

static void
khaz_init(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
	int q = kmembarrier(MEMBARRIER_CMD_QUERY);

	khaz_fence_ok = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
	    kmembarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#endif
	khaz_key_ok = pthread_key_create(&khaz_key, khaz_give_back) == 0 &&
	    pthread_atfork(NULL, NULL, khaz_after_fork) == 0;
}

#if defined(__GNUC__)
/* Unloaded (dlclose) with threads still holding records: their exits
 * must not call into unmapped code. */
__attribute__((destructor)) static void
khaz_fini(void)
{
	if (__atomic_exchange_n(&khaz_key_ok, false, __ATOMIC_ACQ_REL))
		(void)pthread_key_delete(khaz_key);
}
#endif

/* Whether a family made now holds entries by hazard slot: the fence is
 * registered, threads can give their slots back, and
 * RESIL_KEYED_NO_MEMBARRIER is unset (or "0"). Decided once per family. */
static bool
khaz_family_fenced(void)
{
	const char *env = getenv("RESIL_KEYED_NO_MEMBARRIER");

	(void)pthread_once(&khaz_once, khaz_init);
	if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0)
		return false;
	return khaz_fence_ok && __atomic_load_n(&khaz_key_ok, __ATOMIC_ACQUIRE);
}

/* This thread's record, taken on its first call to a fenced family; NULL
 * when none can be had (the caller pins). */
static KCOLD khaz *
khaz_join(void)
{
	khaz *r;

	if (!__atomic_load_n(&khaz_key_ok, __ATOMIC_ACQUIRE))
		return NULL;
	for (r = __atomic_load_n(&khaz_head, __ATOMIC_ACQUIRE); r != NULL;
	     r = r->next)
		if (resil__load64(&r->used) == 0 && resil__cas64(&r->used, 0, 1))
			break;
	if (r == NULL) {
		r = aligned_alloc(RESIL__CACHELINE, sizeof(*r));
		if (r == NULL)
			return NULL;
		memset(r, 0, sizeof(*r));
		r->used = 1;
		r->succ = offsetof(struct bstate, stripes) +
		    (resil__faa64(&khaz_made, 1) & (RESIL__STRIPE_OWN0 - 1)) *
		        sizeof(stripe) +
		    offsetof(stripe, successes);
		r->next = __atomic_load_n(&khaz_head, __ATOMIC_ACQUIRE);
		while (!__atomic_compare_exchange_n(&khaz_head, &r->next, r,
		    false, __ATOMIC_SEQ_CST, __ATOMIC_ACQUIRE))
			;
	}
	if (pthread_setspecific(khaz_key, r) != 0) {
		resil__store64(&r->used, 0);
		return NULL;
	}
	khaz_mine = r;
	return r;
}

/* Hold e in slot r: a plain store; the evictor's fence orders it before
 * the caller's next load (the pin word's). TSan knows no membarrier: its
 * build makes the store a full fence itself. */
static inline void
khaz_set(khaz *r, const kentry *e)
{
#if defined(RESIL__TSAN)
	(void)__atomic_exchange_n(&r->e, (uint64_t)(uintptr_t)e,
	    __ATOMIC_SEQ_CST);
#else
	resil__store64(&r->e, (uint64_t)(uintptr_t)e);
#endif
}

/* Let go: what the holder did to the instance before, the evictor sees
 * after it reads the slot empty (a release). */
static inline void
khaz_clear(khaz *r)
{
	resil__store64(&r->e, 0);
}

/* Whether some thread's slot holds e: after the fence, see evict_one. */
static bool
khaz_held(const kentry *e)
{
	const khaz *r;

	for (r = __atomic_load_n(&khaz_head, __ATOMIC_ACQUIRE); r != NULL;
	     r = r->next)
		if (resil__load64(&r->e) == (uint64_t)(uintptr_t)e)
			return true;
	return false;
}

/* A family freed with permits still out: the slots that hold its
 * entries are let go (else a thread would pin for ever, and another
 * family's entry made at the same address would never be evicted). */
static void
khaz_forget(const kentry *pool, size_t n)
{
	khaz *r;

	for (r = __atomic_load_n(&khaz_head, __ATOMIC_ACQUIRE); r != NULL;
	     r = r->next) {
		uint64_t e = resil__load64(&r->e);

		if (e >= (uint64_t)(uintptr_t)pool &&
		    e < (uint64_t)(uintptr_t)(pool + n))
			(void)resil__cas64(&r->e, e, 0);
	}
}

/* A permit's entry word: a kentry * (pinned), or a khaz * + 1 (held in
 * that slot). */
#define KPERMIT_SLOT ((uintptr_t)1)

static inline kentry *
permit_entry(const void *v)
{
	uintptr_t u = (uintptr_t)v;

	if (u & KPERMIT_SLOT)
		return (kentry *)(uintptr_t)resil__load64(
		    &((khaz *)(u - KPERMIT_SLOT))->e);
	return (kentry *)u;
}

/* What an empty slot holds: an entry of no family, DEAD for ever (never
 * written: its pin word is only read); and the entry of a slot. */
static kentry kempty = { .pin = PIN_DEAD };
#define KEMPTY ((uint64_t)(uintptr_t)&kempty)
#define slot_entry(s) ((kentry *)(uintptr_t)(s))

/* ---- memory ---- */

static void *
walloc_fn(size_t size, void *ctx)
{
	resil_keyed *k = ctx;
	void *p = k->user.alloc(size, k->user.ctx);

	if (p != NULL)
		resil__faa64(&k->bytes, size);
	return p;
}

static void
wfree_fn(void *ptr, size_t size, void *ctx)
{
	resil_keyed *k = ctx;

	if (ptr == NULL)
		return;
	resil__faa64(&k->bytes, (uint64_t)0 - size);
	k->user.free(ptr, size, k->user.ctx);
}

/* ---- the hash: one multiply for a key of 8..16 bytes ----
 *
 * Keys of 8 to 16 bytes are read as two 8-byte words, the last one
 * overlapping the first (so a 12-byte host name is two loads), and folded
 * by one 64x64->128 multiply whose product's halves are folded (wyhash's
 * "mum"): the first word with the seed, the second with a second seed
 * and the length. Keys of 4..7 are read as two overlapping 4-byte words;
 * 1..3 as three bytes; a longer key folds 16 bytes per multiply first;
 * these take two multiplies: the words with the seed, then the length.
 * The slot is taken from the low bits and the tag from the high 32.
 * Fast, not cryptographic; key_eq() decides. */

static inline uint64_t
ld64(const uint8_t *p)
{
	uint64_t w;

	memcpy(&w, p, 8);
	return w;
}

static inline uint32_t
ld32(const uint8_t *p)
{
	uint32_t w;

	memcpy(&w, p, 4);
	return w;
}

#define K1 UINT64_C(0x9e3779b97f4a7c15)
#define K2 UINT64_C(0xff51afd7ed558ccd)
#define K3 UINT64_C(0xc4ceb9fe1a85ec53)

/* The 128-bit product's two halves folded: every bit of both factors
 * reaches the low half through the high one. */
static inline uint64_t
kmum(uint64_t a, uint64_t b)
{
#if defined(__x86_64__) && defined(__GNUC__)
	/* The same product, one mulq: GCC's __int128 product here also
	 * saves a register it never uses (a push and a pop per call). */
	uint64_t lo = a, hi;

	__asm__("mulq %2" : "+a"(lo), "=d"(hi) : "rm"(b) : "cc");
	return lo ^ hi;
#elif defined(__SIZEOF_INT128__)
	__extension__ typedef unsigned __int128 u128;
	u128 r = (u128)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
#else
	uint64_t h = a * b;

	return h ^ (h >> 29) ^ ((a >> 32) * (b >> 32));
#endif
}

/* A key longer than 16 bytes or shorter than 8. */
static KNOINLINE uint64_t
khash_other(uint64_t seed, const uint8_t *p, size_t n)
{
	uint64_t a, b, len = n;

	if (n >= 8) {
		a = seed;
		/* Longer than 16: 8-byte words folded in pairs first. */
		while (n > 16) {
			a = kmum(a ^ ld64(p) ^ K1, ld64(p + 8) ^ K2);
			p += 16;
			n -= 16;
			if (n < 8) {
				p -= 8 - n;
				n = 8;
			}
		}
		a ^= ld64(p);
		b = ld64(p + n - 8);
	} else if (n >= 4) {
		a = seed ^ ld32(p);
		b = ld32(p + n - 4);
	} else {
		a = seed ^ p[0];
		b = (uint64_t)p[n >> 1] << 8 | p[n - 1];
	}
	/* Two multiplies: the key's words, then the length and a second
	 * spread (the slot is taken from the low bits, the tag from the
	 * high 32). */
	return kmum(kmum(a ^ K1, b ^ K2) ^ K3, K1 ^ (len << 56) ^ len);
}

/* Keys of 8 to 16 bytes (a host name, an id): one multiply of the two
 * words, each with its own seed, the length in the second. */
static inline uint64_t
khash_short(const resil_keyed *k, const uint8_t *p, size_t n)
{
	return kmum(ld64(p) ^ k->seed, ld64(p + n - 8) ^ k->seed2 ^ n);
}

static inline uint64_t
khash(const resil_keyed *k, const uint8_t *p, size_t n)
{
	if (RESIL__LIKELY(n - 8 <= 8))
		return khash_short(k, p, n);
	return khash_other(k->seed, p, n);
}

static inline const uint8_t *
kbytes(const kentry *e)
{
	return e->len <= RESIL_KEYED_INLINE_KEY ? e->k.small : e->k.heap;
}

/* ---- instances ---- */

static void
inst_free(const resil_keyed *k, void *inst)
{
	resil_keyed_kind kind = k->cfg.kind;

	if (k->mk.drop != NULL)
		k->mk.drop(k->mk.ctx, inst);
	else if (kind == RESIL_KEYED_BREAKER)
		resil_breaker_free(inst);
	else if (kind == RESIL_KEYED_RATELIMIT)
		resil_ratelimit_free(inst);
	else if (kind == RESIL_KEYED_THROTTLE)
		resil_throttle_free(inst);
	else
		resil_bulkhead_free(inst);
}

/* The configuration of override ov (NULL: the family's) applied to the
 * family's. */
static void
apply_override(const resil_keyed *k, const resil_keyed_override *ov,
    resil_ratelimit_config *rl, resil_bulkhead_config *bh)
{
	*rl = k->cfg.ratelimit;
	*bh = k->cfg.bulkhead;
	if (ov == NULL)
		return;
	if (ov->rate != 0)
		rl->rate = ov->rate;
	if (ov->period_ns != 0)
		rl->period_ns = ov->period_ns;
	if (ov->burst != 0)
		rl->burst = ov->burst;
	if (ov->max_concurrent != 0)
		bh->max_concurrent = ov->max_concurrent;
}

/* key's instance (key NULL: the overflow instance). */
static resil_err
inst_new(const resil_keyed *k, const resil_keyed_override *ov, const void *key,
    size_t len, void **out, resil_diag *diag)
{
	resil_ratelimit_config rl;
	resil_bulkhead_config bh;

	if (k->mk.make != NULL)
		return k->mk.make(k->mk.ctx, &k->cfg, key, len, out, diag);
	apply_override(k, ov, &rl, &bh);
	if (k->cfg.kind == RESIL_KEYED_BREAKER)
		return resil_breaker_new(
		    (resil_breaker **)out, &k->cfg.breaker, diag);
	if (k->cfg.kind == RESIL_KEYED_RATELIMIT)
		return resil_ratelimit_new((resil_ratelimit **)out, &rl, diag);
	if (k->cfg.kind == RESIL_KEYED_THROTTLE)
		return resil_throttle_new(
		    (resil_throttle **)out, &k->cfg.throttle, diag);
	return resil_bulkhead_new((resil_bulkhead **)out, &bh, diag);
}

/* The limit a fresh bulkhead of e's settings starts with. */
static uint32_t
bulkhead_start(const resil_keyed *k, const kentry *e)
{
	const resil_bulkhead_config *c = &k->cfg.bulkhead;

	if (e->ov != 0 && k->ov[e->ov - 1].o.max_concurrent != 0)
		return k->ov[e->ov - 1].o.max_concurrent;
	if (c->adaptive == RESIL_BULKHEAD_GRADIENT)
		return c->gradient.initial_limit;
	return c->max_concurrent;
}

/* True when evicting e would lose something a fresh instance lacks. */
static bool
protected_entry(resil_keyed *k, const kentry *e)
{
	if (k->cfg.kind == RESIL_KEYED_BREAKER) {
		resil_breaker_metrics m;

		if (resil_breaker_get_metrics(e->inst, &m) != RESIL_OK)
			return true;
		return m.state != RESIL_BREAKER_CLOSED ||
		    m.window_failures != 0 || m.window_slow != 0 ||
		    m.consecutive_failures != 0;
	}
	if (k->cfg.kind == RESIL_KEYED_RATELIMIT) {
		resil_ratelimit_metrics m;

		if (resil_ratelimit_get_metrics(e->inst, &m) != RESIL_OK)
			return true;
		return m.available < m.burst;
	} else if (k->cfg.kind == RESIL_KEYED_THROTTLE) {
		resil_throttle_metrics m;

		/* Something not accepted in the window: a fresh throttle
		 * would admit what this one sheds. */
		if (resil_throttle_get_metrics(e->inst, &m) != RESIL_OK)
			return true;
		return m.window_requests > m.window_accepts;
	} else {
		resil_bulkhead_metrics m;

		if (resil_bulkhead_get_metrics(e->inst, &m) != RESIL_OK)
			return true;
		return m.in_flight != 0 || m.limit != bulkhead_start(k, e);
	}
}

/* ---- creation ---- */

static resil_err
check_config(const resil_keyed_config *cfg, resil_diag *diag)
{
	resil_err err;

	if (cfg->size != sizeof(resil_keyed_config))
		return resil__check_size(diag, "keyed", "resil_keyed_config",
		    cfg->size, sizeof(resil_keyed_config));
	if ((unsigned)cfg->kind > RESIL_KEYED_THROTTLE)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.kind: %d is not breaker, ratelimit, bulkhead or "
		    "throttle",
		    (int)cfg->kind);
	if (cfg->max_keys < 1 || cfg->max_keys > RESIL_KEYED_MAX_KEYS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.max_keys: %u is out of range 1..%u",
		    (unsigned)cfg->max_keys, (unsigned)RESIL_KEYED_MAX_KEYS);
	if (cfg->max_key_len < 1 || cfg->max_key_len > RESIL_KEYED_MAX_KEY_LEN)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.max_key_len: %u is out of range 1..%u",
		    (unsigned)cfg->max_key_len,
		    (unsigned)RESIL_KEYED_MAX_KEY_LEN);
	if (cfg->n_overrides > 0 &&
	    (cfg->kind == RESIL_KEYED_BREAKER ||
	        cfg->kind == RESIL_KEYED_THROTTLE))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.override: a %s family takes no overrides "
		    "(they are limits: ratelimit or bulkhead)",
		    resil_keyed_kind_name(cfg->kind));
	if (cfg->n_overrides > RESIL_KEYED_MAX_OVERRIDES)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.override: %zu overrides, at most %u",
		    cfg->n_overrides, RESIL_KEYED_MAX_OVERRIDES);
	if (cfg->n_overrides > 0 && cfg->overrides == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.override: overrides is NULL");
	if (cfg->kind == RESIL_KEYED_BREAKER)
		err = resil_breaker_config_validate(&cfg->breaker, diag);
	else if (cfg->kind == RESIL_KEYED_RATELIMIT)
		err = resil_ratelimit_config_validate(&cfg->ratelimit, diag);
	else if (cfg->kind == RESIL_KEYED_THROTTLE)
		err = resil_throttle_config_validate(&cfg->throttle, diag);
	else
		err = resil_bulkhead_config_validate(&cfg->bulkhead, diag);
	return err;
}

/* Copy the overrides, each checked by making (and freeing) its instance,
 * which also measures the largest instance. */
static resil_err
copy_overrides(resil_keyed *k, const resil_keyed_config *cfg,
    uint64_t *largest, resil_diag *diag)
{
	size_t i, j;
	resil_err err;

	if (cfg->n_overrides == 0)
		return RESIL_OK;
	k->ov = resil__calloc(&k->walloc, cfg->n_overrides * sizeof(kover));
	if (k->ov == NULL)
		return resil__diagf(diag, RESIL_E_NOMEM, "keyed: out of memory");
	for (i = 0; i < cfg->n_overrides; i++) {
		const resil_keyed_override *o = &cfg->overrides[i];
		uint64_t before;
		void *inst;

		if (o->key == NULL || o->key_len == 0 ||
		    o->key_len > cfg->max_key_len)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "keyed.override[%zu]: the key must be 1..%u bytes",
			    i, (unsigned)cfg->max_key_len);
		k->ov[i].o = *o;
		k->ov[i].hash = khash(k, o->key, o->key_len);
		k->ov[i].key = resil__alloc(&k->walloc, o->key_len);
		if (k->ov[i].key == NULL)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "keyed: out of memory");
		memcpy(k->ov[i].key, o->key, o->key_len);
		k->ov[i].o.key = k->ov[i].key;
		k->n_ov = i + 1;
		for (j = 0; j < i; j++)
			if (k->ov[j].o.key_len == o->key_len &&
			    memcmp(k->ov[j].key, o->key, o->key_len) == 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "keyed.override[%zu]: the key of "
				    "override[%zu] again",
				    i, j);
		before = resil__load64(&k->bytes);
		err =
		    inst_new(k, &k->ov[i].o, o->key, o->key_len, &inst, diag);
		if (err != RESIL_OK)
			return resil__diag_prefix(diag, err, "keyed.override");
		if (resil__load64(&k->bytes) - before > *largest)
			*largest = resil__load64(&k->bytes) - before;
		inst_free(k, inst);
	}
	return RESIL_OK;
}

static uint64_t
table_size(uint32_t max_keys)
{
	uint64_t n = 16;

	while (n < 3 * ((uint64_t)max_keys + 1))
		n <<= 1;
	return n;
}

static resil_err
alloc_tables(resil_keyed *k, resil_diag *diag)
{
	uint32_t i, n = k->cfg.max_keys;
	uint64_t size = table_size(n);
	uintptr_t p;

	k->mask = size - 1;
	k->slots = resil__alloc(&k->walloc, size * sizeof(uint64_t));
	k->pool_size = (size_t)n * sizeof(kentry) + RESIL__CACHELINE;
	k->pool_mem = resil__calloc(&k->walloc, k->pool_size);
	k->free_idx = resil__alloc(&k->walloc, (size_t)n * sizeof(uint32_t));
	if (k->slots == NULL || k->pool_mem == NULL || k->free_idx == NULL)
		return resil__diagf(diag, RESIL_E_NOMEM, "keyed: out of memory");
	for (uint64_t j = 0; j < size; j++)
		k->slots[j] = KEMPTY;
	p = ((uintptr_t)k->pool_mem + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	k->pool = (kentry *)p;
	/* Taken from the top of the stack: entry 0 first. */
	for (i = 0; i < n; i++) {
		k->pool[i].pin = PIN_DEAD;
		k->free_idx[i] = n - 1 - i;
	}
	k->n_free = n;
	return RESIL_OK;
}

void
resil_keyed_free(resil_keyed *k)
{
	resil_allocator u;
	uint32_t i;
	size_t j;

	if (k == NULL)
		return;
	u = k->user;
	if (k->pool != NULL && k->fenced)
		khaz_forget(k->pool, k->cfg.max_keys);
	if (k->pool != NULL)
		for (i = 0; i < k->cfg.max_keys; i++) {
			kentry *e = &k->pool[i];

			if (e->pin & PIN_DEAD)
				continue;
			inst_free(k, e->inst);
			if (e->len > RESIL_KEYED_INLINE_KEY)
				resil__free(&k->walloc, e->k.heap, e->len);
		}
	if (k->ovf.inst != NULL)
		inst_free(k, k->ovf.inst);
	for (j = 0; j < k->n_ov; j++)
		resil__free(&k->walloc, k->ov[j].key, k->ov[j].o.key_len);
	if (k->ov != NULL)
		resil__free(&k->walloc, k->ov, k->cfg.n_overrides * sizeof(kover));
	if (k->slots != NULL)
		resil__free(&k->walloc, k->slots, (k->mask + 1) * sizeof(uint64_t));
	if (k->pool_mem != NULL)
		resil__free(&k->walloc, k->pool_mem, k->pool_size);
	if (k->free_idx != NULL)
		resil__free(&k->walloc, k->free_idx,
		    (size_t)k->cfg.max_keys * sizeof(uint32_t));
	if (k->mk.done != NULL)
		k->mk.done(k->mk.ctx);
	resil__free(&u, k, sizeof(*k));
}

static resil_err
keyed_new(resil_keyed **out, const resil_keyed_config *cfg,
    const resil__keyed_maker *mk, resil_diag *diag)
{
	resil_keyed *k;
	const resil_allocator *a;
	uint64_t largest = 0, before;
	resil_err err;

	if (out == NULL || cfg == NULL) {
		if (mk != NULL && mk->done != NULL)
			mk->done(mk->ctx);
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed: %s is NULL", out == NULL ? "out" : "cfg");
	}
	err = check_config(cfg, diag);
	if (err != RESIL_OK) {
		if (mk != NULL && mk->done != NULL)
			mk->done(mk->ctx);
		return err;
	}
	a = resil__allocator(cfg->alloc);
	k = resil__alloc(a, sizeof(*k));
	if (k == NULL) {
		if (mk != NULL && mk->done != NULL)
			mk->done(mk->ctx);
		return resil__diagf(diag, RESIL_E_NOMEM, "keyed: out of memory");
	}
	memset(k, 0, sizeof(*k));
	if (mk != NULL)
		k->mk = *mk;
	k->cfg = *cfg;
	k->max_len = cfg->max_key_len;
	k->kind = cfg->kind;
	k->user = *a;
	k->walloc.alloc = walloc_fn;
	k->walloc.free = wfree_fn;
	k->walloc.ctx = k;
	k->cfg.alloc = &k->user;
	k->bytes = sizeof(*k);
	k->seed = cfg->hash_seed != 0 ? cfg->hash_seed
	                              : UINT64_C(0x6b657965642d7265);
	k->seed2 = kmum(k->seed ^ K2, K3);
	k->kmax[cfg->kind] = cfg->max_key_len;
	k->fenced = khaz_family_fenced();
	if (k->fenced && cfg->max_key_len >= 8)
		k->kfast[cfg->kind] =
		    (cfg->max_key_len < 16 ? cfg->max_key_len : 16) - 7;
	resil__spin_init(&k->lock);
	/* Every instance allocates through the family, which counts. */
	if (cfg->kind == RESIL_KEYED_BREAKER && cfg->breaker.clock != NULL)
		k->clock = *cfg->breaker.clock;
	else if (cfg->kind == RESIL_KEYED_RATELIMIT &&
	    cfg->ratelimit.clock != NULL)
		k->clock = *cfg->ratelimit.clock;
	else if (cfg->kind == RESIL_KEYED_BULKHEAD &&
	    cfg->bulkhead.clock != NULL)
		k->clock = *cfg->bulkhead.clock;
	else if (cfg->kind == RESIL_KEYED_THROTTLE &&
	    cfg->throttle.clock != NULL)
		k->clock = *cfg->throttle.clock;
	else
		k->clock = *resil_clock_system();
	k->cfg.breaker.alloc = &k->walloc;
	k->cfg.ratelimit.alloc = &k->walloc;
	k->cfg.bulkhead.alloc = &k->walloc;
	k->cfg.throttle.alloc = &k->walloc;
	k->cfg.breaker.clock = &k->clock;
	k->cfg.ratelimit.clock = &k->clock;
	k->cfg.bulkhead.clock = &k->clock;
	k->cfg.throttle.clock = &k->clock;
	k->cfg.overrides = NULL;
	err = alloc_tables(k, diag);
	if (err == RESIL_OK) {
		before = resil__load64(&k->bytes);
		err = inst_new(k, NULL, NULL, 0, &k->ovf.inst, diag);
		largest = resil__load64(&k->bytes) - before;
		if (err == RESIL_OK && cfg->kind == RESIL_KEYED_BREAKER) {
			resil__bfast f;

			resil__breaker_fast_refs(k->ovf.inst, &f);
			k->ovf.acq_word = f.acq_word;
			k->ovf.st = f.st;
			k->ovf.streak = f.streak;
		}
	}
	if (err == RESIL_OK)
		err = copy_overrides(k, cfg, &largest, diag);
	if (err != RESIL_OK) {
		resil_keyed_free(k);
		return err;
	}
	k->instance_bytes = largest;
	/* The overflow instance included. */
	k->bytes_fixed = resil__load64(&k->bytes);
	*out = k;
	return RESIL_OK;
}

resil_err
resil_keyed_new(
    resil_keyed **out, const resil_keyed_config *cfg, resil_diag *diag)
{
	return keyed_new(out, cfg, NULL, diag);
}

resil_err
resil__keyed_new_made(resil_keyed **out, const resil_keyed_config *cfg,
    const resil__keyed_maker *mk, resil_diag *diag)
{
	return keyed_new(out, cfg, mk, diag);
}

resil_keyed_kind
resil_keyed_get_kind(const resil_keyed *k)
{
	return k == NULL ? RESIL_KEYED_BREAKER : k->cfg.kind;
}

/* ---- find ---- */

/* e's pin word is DEAD or COLD, tested where it lies (see resil__zero64(),
 * lib/breaker_fast.h). */
static KINLINE bool
dead_or_cold(const kentry *e)
{
#if defined(RESIL__MEM_TEST)
	bool nz;

	_Static_assert(
	    (PIN_DEAD | PIN_COLD) == UINT64_C(0xc0000000), "the asm's mask");
	__asm__ __volatile__("testl $0xc0000000, %1"
	                     : "=@ccnz"(nz)
	                     : "m"(e->pin)
	                     : "memory");
	return nz;
#else
	return (resil__load64(&e->pin) & (PIN_DEAD | PIN_COLD)) != 0;
#endif
}

static inline void
unpin(kentry *e)
{
	resil__faa64(&e->pin, UINT64_MAX);
}

/* Pin e if it is live; false when it is free or being evicted. */
static inline bool
pin(kentry *e)
{
	uint64_t w = resil__load64(&e->pin);

	for (;;) {
		if (w & PIN_DEAD)
			return false;
		/* 2^24 - 1 holders at once: the next waits for one to let go
		 * (giving up would let the lock's find make a second entry
		 * for the key). */
		if (RESIL__LIKELY((w & PIN_COUNT) != PIN_COUNT) &&
		    resil__cas64(&e->pin, w, (w + 1) & ~PIN_COLD))
			return true;
		w = resil__load64(&e->pin);
	}
}

/* The n bytes at a and b equal (n >= 1, not 8..16), read as khash()
 * reads them. */
static KNOINLINE bool
key_eq_other(const uint8_t *a, const uint8_t *b, size_t n)
{
	if (n >= 8) {
		while (n > 16) {
			if (ld64(a) != ld64(b))
				return false;
			a += 8;
			b += 8;
			n -= 8;
		}
		return ((ld64(a) ^ ld64(b)) |
		           (ld64(a + n - 8) ^ ld64(b + n - 8))) == 0;
	}
	if (n >= 4)
		return ((ld32(a) ^ ld32(b)) |
		           (ld32(a + n - 4) ^ ld32(b + n - 4))) == 0;
	/* 1..3 bytes: these three positions cover them all. */
	return a[0] == b[0] && a[n >> 1] == b[n >> 1] && a[n - 1] == b[n - 1];
}

/* e holds key. 8..16 bytes (inline in the entry): two overlapping 8-byte
 * words each. */
static inline bool
same_key(const kentry *e, const void *key, size_t len)
{
	const uint8_t *b = key;

	if (e->len != len)
		return false;
	if (RESIL__LIKELY(len - 8 <= 8))
		return ((ld64(e->k.small) ^ ld64(b)) |
		           (ld64(e->k.small + len - 8) ^ ld64(b + len - 8))) ==
		    0;
	return key_eq_other(kbytes(e), b, len);
}

/* key's entry, pinned, or NULL (absent, or missed while the table
 * changed: the caller then finds again under the lock). */
static KINLINE kentry *
find(resil_keyed *k, uint64_t h, const void *key, size_t len)
{
	uint64_t i = h & k->mask, s;

	for (;; i = (i + 1) & k->mask) {
		kentry *e;

		s = resil__load64(&k->slots[i]);
		if (s == KEMPTY)
			return NULL;
		e = slot_entry(s);
		/* Another key's, most likely: no pin (an entry's hash is
		 * stored atomically, so this read is only a filter). */
		if (resil__load64(&e->hash) != h || !pin(e))
			continue;
		if (same_key(e, key, len))
			return e;
		unpin(e);
	}
}

/* key's entry, held in this thread's slot r (empty on entry), or NULL
 * with r empty (absent, or missed while the table changed). A DEAD entry
 * may stay in r until the next store: an evictor that sees it there
 * only keeps it a while longer. */
static KINLINE kentry *
find_held(resil_keyed *k, uint64_t h, const void *key, size_t len, khaz *r)
{
	uint64_t i = h & k->mask, w;

	for (;; i = (i + 1) & k->mask) {
		kentry *e = slot_entry(resil__load64(&k->slots[i]));

		khaz_set(r, e);
		w = resil__load64(&e->pin);
		if (RESIL__UNLIKELY((w & (PIN_DEAD | PIN_COLD)) != 0)) {
			if (w & PIN_DEAD) {
				if (e != &kempty)
					continue;
				khaz_clear(r);
				return NULL;
			}
			/* Used since the hand passed (once per pass): the
			 * key's own entry, not another a probe passes (that
			 * would keep whole runs from ever being evicted). */
			if (!same_key(e, key, len))
				continue;
			(void)resil__cas64(&e->pin, w, w & ~PIN_COLD);
			return e;
		}
		if (RESIL__LIKELY(same_key(e, key, len)))
			return e;
	}
}

/* Makes x a value the compiler cannot see through: a key's address and
 * length so marked are not kept as key + len - 8 in a register of their
 * own across the probe (a callee-saved one, saved and restored on every
 * call); an address mode makes it again where it is read. */
static inline size_t
kfresh_len(size_t x)
{
#if defined(__GNUC__)
	__asm__("" : "+r"(x));
#endif
	return x;
}

static inline const void *
kfresh_key(const void *x)
{
#if defined(__GNUC__)
	__asm__("" : "+r"(x));
#endif
	return x;
}

/* A key of 8..16 bytes, the caller's own variables (see find_short()), is
 * e's (inline). */
static KINLINE bool
short_key_is(const kentry *e, const void **keyp, size_t *lenp)
{
	*keyp = kfresh_key(*keyp);
	*lenp = kfresh_len(*lenp);
	return ((ld64(e->k.small) ^ ld64(*keyp)) |
	           (ld64(e->k.small + *lenp - 8) ^
	               ld64((const uint8_t *)*keyp + *lenp - 8)) |
	           (e->len ^ *lenp)) == 0;
}

/* find_held()'s common case, for a key of 8..16 bytes (inline in its
 * entry): true with key's entry in *ep, held in r; false (r empty) for
 * everything else, *ep then &kempty for a miss, else the entry DEAD or
 * COLD that the caller's general path decides (find_held()). The probe
 * walks by
 * adding 1 to h itself (its low bits are the slot). The key and its
 * length are the caller's own variables (kfresh_key(), kfresh_len()). */
static KINLINE bool
find_short(resil_keyed *k, uint64_t h, const void **keyp, size_t *lenp,
    khaz *r, kentry **ep)
{
	for (;; h++) {
		kentry *e = slot_entry(resil__load64(&k->slots[h & k->mask]));

		khaz_set(r, e);
		/* The pin word tested where it lies: DEAD (or the empty
		 * slot's) or COLD, the caller goes the general way (its
		 * find_held() decides). */
		if (RESIL__UNLIKELY(dead_or_cold(e))) {
			khaz_clear(r);
			*ep = e;
			return false;
		}
		if (RESIL__LIKELY(short_key_is(e, keyp, lenp))) {
			*ep = e;
			return true;
		}
	}
}

/* ---- the slow path: a new key, under the lock ---- */

static void
slot_insert(resil_keyed *k, uint64_t h, uint32_t idx)
{
	uint64_t i = h & k->mask;

	while (k->slots[i] != KEMPTY)
		i = (i + 1) & k->mask;
	resil__store64(&k->slots[i], (uint64_t)(uintptr_t)&k->pool[idx]);
}

/* Remove entry idx's slot, shifting the run after it back. */
static void
slot_remove(resil_keyed *k, uint32_t idx)
{
	uint64_t i = k->pool[idx].hash & k->mask, j, home, s;

	while (k->slots[i] != (uint64_t)(uintptr_t)&k->pool[idx])
		i = (i + 1) & k->mask;
	for (j = i;;) {
		j = (j + 1) & k->mask;
		s = k->slots[j];
		if (s == KEMPTY)
			break;
		home = slot_entry(s)->hash & k->mask;
		/* s may move to i when its home is not in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			resil__store64(&k->slots[i], s);
			i = j;
		}
	}
	resil__store64(&k->slots[i], KEMPTY);
}

/* What the slow path tells the listener once the lock is let go. */
typedef struct pending {
	bool evicted, created, overflow;
	uint8_t small[RESIL_KEYED_INLINE_KEY];
	uint8_t *heap; /* an evicted long key, freed after the event */
	uint32_t evicted_len;
	uint32_t keys;
} pending;

/* Free an entry of the CLOCK's choice: idle (no holder, not used since the
 * hand last passed) and not protected. Two turns at most. */
static bool
evict_one(resil_keyed *k, uint32_t *idx, pending *pe)
{
	uint64_t n, turns = 2 * (uint64_t)k->cfg.max_keys;

	for (n = 0; n < turns; n++) {
		uint32_t i = k->hand;
		kentry *e = &k->pool[i];
		uint64_t w = resil__load64(&e->pin);

		k->hand = i + 1 == k->cfg.max_keys ? 0 : i + 1;
		if ((w & (PIN_DEAD | PIN_COUNT)) != 0)
			continue;
		if ((w & PIN_COLD) == 0) {
			(void)resil__cas64(&e->pin, w, w | PIN_COLD);
			continue;
		}
		if (protected_entry(k, e) ||
		    !resil__cas64(&e->pin, w, w | PIN_DEAD))
			continue;
		/* Nobody can pin it now. In a fenced family a thread may have
		 * it in its slot: after every thread passed a full fence, a
		 * slot that does not hold it now never will (its reader sees
		 * DEAD), and one that held it let go of it (a release). A
		 * failed fence keeps it. */
		if (k->fenced && (kmembarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) !=
		                         0 ||
		                     khaz_held(e))) {
			resil__store64(&e->pin, w);
			continue;
		}
		/* Nothing changes it now: look again, a call may have ended
		 * between the first look and the CAS. */
		if (protected_entry(k, e)) {
			resil__store64(&e->pin, w);
			continue;
		}
		slot_remove(k, i);
		inst_free(k, e->inst);
		e->inst = NULL;
		pe->evicted = true;
		pe->evicted_len = e->len;
		if (e->len <= RESIL_KEYED_INLINE_KEY)
			memcpy(pe->small, e->k.small, e->len);
		else
			pe->heap = e->k.heap;
		k->keys--;
		k->evicted++;
		*idx = i;
		return true;
	}
	return false;
}

static const resil_keyed_override *
override_of(const resil_keyed *k, uint64_t h, const void *key, size_t len,
    uint32_t *ov)
{
	size_t i;

	for (i = 0; i < k->n_ov; i++)
		if (k->ov[i].hash == h && k->ov[i].o.key_len == len &&
		    memcmp(k->ov[i].key, key, len) == 0) {
			*ov = (uint32_t)i + 1;
			return &k->ov[i].o;
		}
	*ov = 0;
	return NULL;
}

/* Make key's entry in free entry idx, pinned once for the caller;
 * RESIL_E_NOTFOUND when the maker gave the key no instance: it is sent to
 * the overflow (h4/kshm3, lib/keyed_maker.h), idx left free. */
static resil_err
fill(resil_keyed *k, uint32_t idx, uint64_t h, const void *key, size_t len)
{
	kentry *e = &k->pool[idx];
	const resil_keyed_override *o;
	uint32_t ov;
	void *inst = NULL;
	resil_err err;

	o = override_of(k, h, key, len, &ov);
	err = inst_new(k, o, key, len, &inst, NULL);
	if (err != RESIL_OK)
		return err;
	if (inst == NULL)
		return RESIL_E_NOTFOUND;
	if (len > RESIL_KEYED_INLINE_KEY) {
		e->k.heap = resil__alloc(&k->walloc, len);
		if (e->k.heap == NULL) {
			inst_free(k, inst);
			return RESIL_E_NOMEM;
		}
		memcpy(e->k.heap, key, len);
	} else
		memcpy(e->k.small, key, len);
	e->inst = inst;
	if (k->cfg.kind == RESIL_KEYED_BREAKER) {
		resil__bfast f;

		resil__breaker_fast_refs(inst, &f);
		e->acq_word = f.acq_word;
		e->st = f.st;
		e->streak = f.streak;
	}
	resil__store64(&e->hash, h); /* read unpinned by find() */
	e->len = (uint32_t)len;
	e->ov = ov;
	/* Publish: the fields above before the pin word, the pin word before
	 * the slot. */
	resil__store64(&e->pin,
	    ((resil__load64(&e->pin) & ~(PIN_GEN - 1)) + PIN_GEN) |
	        1);
	slot_insert(k, h, idx);
	return RESIL_OK;
}

static void
tell(resil_keyed *k, pending *pe, const void *key, size_t len)
{
	resil_keyed_event ev;

	if (k->cfg.listener != NULL) {
		ev.keys = pe->keys;
		if (pe->evicted) {
			ev.type = RESIL_KEYED_EVENT_EVICTED;
			ev.key = pe->heap != NULL ? (const void *)pe->heap
			                          : (const void *)pe->small;
			ev.key_len = pe->evicted_len;
			k->cfg.listener(&ev, k->cfg.listener_ctx);
		}
		ev.key = key;
		ev.key_len = len;
		ev.type = pe->overflow ? RESIL_KEYED_EVENT_OVERFLOW
		                       : RESIL_KEYED_EVENT_CREATED;
		if (pe->overflow || pe->created)
			k->cfg.listener(&ev, k->cfg.listener_ctx);
	}
	if (pe->heap != NULL)
		resil__free(&k->walloc, pe->heap, pe->evicted_len);
}

/* Under the lock: key is given the overflow instance, pinned; the lock
 * let go and the listener told (OVERFLOW). */
static kentry *
to_overflow(resil_keyed *k, pending *pe, const void *key, size_t len)
{
	k->overflowed++;
	pe->overflow = true;
	pe->keys = k->keys;
	pin(&k->ovf);
	resil__spin_unlock(&k->lock);
	tell(k, pe, key, len);
	return &k->ovf;
}

#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
static kentry *
get_slow(resil_keyed *k, uint64_t h, const void *key, size_t len,
    resil_err *err)
{
	pending pe;
	kentry *e;
	uint32_t idx;

	memset(&pe, 0, sizeof(pe));
	resil__spin_lock(&k->lock);
	e = find(k, h, key, len);
	if (e != NULL) {
		resil__spin_unlock(&k->lock);
		return e;
	}
	if (k->n_free > 0)
		idx = k->free_idx[--k->n_free];
	else if (k->skip > 0 || !evict_one(k, &idx, &pe)) {
		if (k->skip > 0)
			k->skip--;
		else
			k->skip = k->cfg.max_keys / 64;
		return to_overflow(k, &pe, key, len);
	}
	*err = fill(k, idx, h, key, len);
	if (*err == RESIL_E_NOTFOUND) {
		/* The maker has no place for key (h4/kshm3: a region's full
		 * table, lib/keyed_maker.h): an idle key of ours gives its
		 * place back (a sweep as above, unless this call evicted
		 * already), and the maker is asked once more; else the
		 * overflow. */
		k->free_idx[k->n_free++] = idx;
		*err = RESIL_OK;
		if (pe.evicted || k->skip > 0 || !evict_one(k, &idx, &pe)) {
			if (k->skip > 0)
				k->skip--;
			else if (!pe.evicted)
				k->skip = k->cfg.max_keys / 64;
			return to_overflow(k, &pe, key, len);
		}
		*err = fill(k, idx, h, key, len);
		if (*err == RESIL_E_NOTFOUND) {
			k->free_idx[k->n_free++] = idx;
			*err = RESIL_OK;
			return to_overflow(k, &pe, key, len);
		}
	}
	if (*err != RESIL_OK) {
		k->free_idx[k->n_free++] = idx;
		e = NULL;
	} else {
		e = &k->pool[idx];
		k->keys++;
		k->created++;
		pe.created = true;
	}
	pe.keys = k->keys;
	resil__spin_unlock(&k->lock);
	tell(k, &pe, key, len);
	return e;
}

/* A key's call is refused before any lookup: no family, no key, an empty
 * or too long key, or a family of another kind (len - 1 < kmax[kind]
 * tests 1..max_key_len and the kind at once). */
static KINLINE bool
bad_key(const resil_keyed *k, const void *key, size_t len,
    resil_keyed_kind kind)
{
	return k == NULL || key == NULL || len - 1 >= k->kmax[kind];
}

/* A permit's entry, held in slot r, or pinned (r NULL). */
static inline void *
permit_word(kentry *e, khaz *r)
{
	return r != NULL ? (void *)((uintptr_t)r | KPERMIT_SLOT) : (void *)e;
}

/* Let go of what permit->entry holds. */
static inline void
permit_let_go(resil_keyed_permit *permit, kentry *e)
{
	uintptr_t u = (uintptr_t)permit->entry;

	permit->entry = NULL;
	if (u & KPERMIT_SLOT)
		khaz_clear((khaz *)(u - KPERMIT_SLOT));
	else
		unpin(e);
}

/* The rest of a breaker acquire on an entry held (in slot r, or pinned
 * when r is NULL) that the fast grant did not answer: the full acquire;
 * the entry is let go on a refusal. */
static KNOINLINE resil_err
breaker_acquire_entry(kentry *e, khaz *r, resil_keyed_permit *permit)
{
	resil_err err = resil_breaker_acquire(e->inst, &permit->permit);

	permit->entry = permit_word(e, r);
	if (err != RESIL_OK)
		permit_let_go(permit, e);
	return err;
}

/* A pinned entry's acquire. */
static resil_err
breaker_acquire_pinned(kentry *e, resil_keyed_permit *permit)
{
	if (resil__breaker_grant_fast(e->acq_word, &permit->permit)) {
		permit->entry = e;
		return RESIL_OK;
	}
	return breaker_acquire_entry(e, NULL, permit);
}

/* A key the lock-free find did not see: found or made under the lock. */
static KNOINLINE resil_err
breaker_acquire_new(resil_keyed *k, uint64_t h, const void *key,
    size_t len, resil_keyed_permit *permit)
{
	resil_err err = RESIL_E_NOMEM;
	kentry *e = get_slow(k, h, key, len, &err);

	if (e == NULL)
		return err;
	return breaker_acquire_pinned(e, permit);
}

/* A call that pins: a family without the fence, a thread whose slot is
 * busy (it holds a permit: nested calls) or that has none yet (its
 * first call takes one for the next). */
static KNOINLINE resil_err
breaker_acquire_pin(resil_keyed *k, uint64_t h, const void *key,
    size_t len, resil_keyed_permit *permit)
{
	kentry *e;

	if (k->fenced && khaz_mine == &khaz_none)
		(void)khaz_join();
	e = find(k, h, key, len);
	if (e == NULL)
		return breaker_acquire_new(k, h, key, len, permit);
	return breaker_acquire_pinned(e, permit);
}

/* ---- breakers ---- */

/* Every acquire but the fast case's (see resil_keyed_breaker_acquire()):
 * the checks, then by slot where the thread's is free, else pinned. */
static KNOINLINE resil_err
breaker_acquire_any(resil_keyed *k, const void *key, size_t key_len,
    resil_keyed_permit *permit)
{
	uint64_t h;
	kentry *e;
	khaz *r;

	if (permit == NULL || bad_key(k, key, key_len, RESIL_KEYED_BREAKER))
		return RESIL_E_INVAL;
	h = khash(k, key, key_len);
	r = khaz_mine;
	if (!k->fenced || resil__load64(&r->e) != 0)
		return breaker_acquire_pin(k, h, key, key_len, permit);
	e = find_held(k, h, key, key_len, r);
	if (e == NULL)
		return breaker_acquire_new(k, h, key, key_len, permit);
	if (resil__breaker_grant_fast(e->acq_word, &permit->permit)) {
		permit->entry = (void *)((uintptr_t)r | KPERMIT_SLOT);
		return RESIL_OK;
	}
	return breaker_acquire_entry(e, r, permit);
}

/* The fast case's other answers (find_short()): a miss, made under the
 * lock (the hash again: the fast path keeps no copy); an entry DEAD or
 * COLD, the general path. */
static KNOINLINE resil_err
breaker_acquire_other(resil_keyed *k, const void *key, size_t len,
    resil_keyed_permit *permit, const kentry *e)
{
	if (e == &kempty)
		return breaker_acquire_new(k, khash(k, key, len), key, len, permit);
	return breaker_acquire_any(k, key, len, permit);
}

/* The fast case: a key of 8..16 bytes in a fenced family (one test,
 * kfast) on a thread whose slot is free, found; everything else goes to
 * breaker_acquire_any(), a new key to the lock. */
resil_err
resil_keyed_breaker_acquire(resil_keyed *k, const void *key, size_t key_len,
    resil_keyed_permit *permit)
{
	uint64_t h;
	kentry *e;
	khaz *r;

	/* One test and branch each (joined, the compiler makes a flag of
	 * each first). */
	if (RESIL__UNLIKELY(k == NULL))
		return breaker_acquire_any(k, key, key_len, permit);
	if (RESIL__UNLIKELY(key == NULL))
		return breaker_acquire_any(k, key, key_len, permit);
	if (RESIL__UNLIKELY(permit == NULL))
		return breaker_acquire_any(k, key, key_len, permit);
	if (RESIL__UNLIKELY(key_len - 8 >= k->kfast[RESIL_KEYED_BREAKER]))
		return breaker_acquire_any(k, key, key_len, permit);
	r = khaz_mine;
	if (RESIL__UNLIKELY(!resil__zero64(&r->e)))
		return breaker_acquire_any(k, key, key_len, permit);
	h = khash_short(k, key, key_len);
	if (RESIL__UNLIKELY(!find_short(k, h, &key, &key_len, r, &e)))
		return breaker_acquire_other(k, key, key_len, permit, e);
	if (RESIL__LIKELY(
	        resil__breaker_grant_fast(e->acq_word, &permit->permit))) {
		permit->entry = (void *)((uintptr_t)r | KPERMIT_SLOT);
		return RESIL_OK;
	}
	return breaker_acquire_entry(e, r, permit);
}

/* Let the permit's entry go unless err says the permit was not used. */
static inline resil_err
let_go(resil_keyed_permit *permit, kentry *e, resil_err err)
{
	if (err != RESIL_E_INVAL)
		permit_let_go(permit, e);
	return err;
}

/* A permit's entry; NULL for a permit that holds none (zeroed, spent, or
 * a copy of one recorded already). */
static inline kentry *
permit_held(const resil_keyed *k, const resil_keyed_permit *permit)
{
	if (k == NULL || permit == NULL || permit->entry == NULL)
		return NULL;
	return permit_entry(permit->entry);
}

/* Every record but a slot-held permit's success that changes nothing. */
static KNOINLINE resil_err
breaker_record_full(
    resil_keyed *k, resil_keyed_permit *permit, resil_outcome outcome)
{
	kentry *e = permit_held(k, permit);

	if (e == NULL)
		return RESIL_E_INVAL;
	if (outcome == RESIL_OUTCOME_SUCCESS &&
	    resil__breaker_success_fast(
	        e->st, e->streak, &permit->permit, false)) {
		permit_let_go(permit, e);
		return RESIL_OK;
	}
	return let_go(permit, e,
	    resil_breaker_record(e->inst, &permit->permit, outcome));
}

resil_err
resil_keyed_breaker_record(
    resil_keyed *k, resil_keyed_permit *permit, resil_outcome outcome)
{
	uintptr_t u, off;
	khaz *r;
	kentry *e;

	if (RESIL__UNLIKELY(k == NULL || permit == NULL))
		return RESIL_E_INVAL;
	u = (uintptr_t)permit->entry;
	if (RESIL__LIKELY((u & KPERMIT_SLOT) != 0 &&
	        outcome == RESIL_OUTCOME_SUCCESS)) {
		r = (khaz *)(u - KPERMIT_SLOT);
		off = r->succ; /* never changes */
		e = (kentry *)(uintptr_t)resil__load64(&r->e);
		if (RESIL__LIKELY(e != NULL &&
		        resil__breaker_success_fast_at(
		            e->st, e->streak, &permit->permit, off))) {
			permit->entry = NULL;
			khaz_clear(r);
			return RESIL_OK;
		}
	}
	return breaker_record_full(k, permit, outcome);
}

resil_err
resil_keyed_breaker_record_duration(resil_keyed *k,
    resil_keyed_permit *permit, resil_outcome outcome, uint64_t duration)
{
	kentry *e = permit_held(k, permit);

	if (e == NULL)
		return RESIL_E_INVAL;
	return let_go(permit, e,
	    resil_breaker_record_duration(
	        e->inst, &permit->permit, outcome, duration));
}

resil_err
resil_keyed_breaker_release(resil_keyed *k, resil_keyed_permit *permit)
{
	kentry *e = permit_held(k, permit);

	if (e == NULL)
		return RESIL_E_INVAL;
	return let_go(
	    permit, e, resil_breaker_release(e->inst, &permit->permit));
}

/* key's entry, pinned: found, made, or the overflow's; NULL with *err. */
static KINLINE kentry *
get(resil_keyed *k, const void *key, size_t len, resil_keyed_kind kind,
    resil_err *err)
{
	uint64_t h;
	kentry *e;

	if (RESIL__UNLIKELY(bad_key(k, key, len, kind))) {
		*err = RESIL_E_INVAL;
		return NULL;
	}
	h = khash(k, key, len);
	e = find(k, h, key, len);
	if (RESIL__LIKELY(e != NULL))
		return e;
	return get_slow(k, h, key, len, err);
}

/* ---- rate limiters ---- */

/* A rate limiter's call that pins (see breaker_acquire_pin()). */
static KNOINLINE resil_err
ratelimit_pin(resil_keyed *k, uint64_t h, const void *key, size_t len,
    uint32_t permits, uint64_t *retry_after)
{
	resil_err err = RESIL_E_NOMEM;
	kentry *e;

	if (k->fenced && khaz_mine == &khaz_none)
		(void)khaz_join();
	e = find(k, h, key, len);
	if (e == NULL)
		e = get_slow(k, h, key, len, &err);
	if (e == NULL)
		return err;
	err = resil_ratelimit_try_acquire(e->inst, permits, retry_after);
	unpin(e);
	return err;
}

/* Every call but the fast case's (see breaker_acquire_any()). */
static KNOINLINE resil_err
ratelimit_any(resil_keyed *k, const void *key, size_t key_len,
    uint32_t permits, uint64_t *retry_after)
{
	resil_err err;
	uint64_t h;
	kentry *e;
	khaz *r;

	if (bad_key(k, key, key_len, RESIL_KEYED_RATELIMIT))
		return RESIL_E_INVAL;
	h = khash(k, key, key_len);
	r = khaz_mine;
	if (!k->fenced || resil__load64(&r->e) != 0)
		return ratelimit_pin(k, h, key, key_len, permits, retry_after);
	e = find_held(k, h, key, key_len, r);
	if (e == NULL)
		return ratelimit_pin(k, h, key, key_len, permits, retry_after);
	err = resil_ratelimit_try_acquire(e->inst, permits, retry_after);
	khaz_clear(r);
	return err;
}

resil_err
resil_keyed_ratelimit_try_acquire(resil_keyed *k, const void *key,
    size_t key_len, uint32_t permits, uint64_t *retry_after)
{
	resil_err err;
	uint64_t h;
	kentry *e;
	khaz *r;

	if (RESIL__UNLIKELY(k == NULL))
		return ratelimit_any(k, key, key_len, permits, retry_after);
	if (RESIL__UNLIKELY(key == NULL))
		return ratelimit_any(k, key, key_len, permits, retry_after);
	if (RESIL__UNLIKELY(key_len - 8 >= k->kfast[RESIL_KEYED_RATELIMIT]))
		return ratelimit_any(k, key, key_len, permits, retry_after);
	r = khaz_mine;
	if (RESIL__UNLIKELY(!resil__zero64(&r->e)))
		return ratelimit_any(k, key, key_len, permits, retry_after);
	h = khash_short(k, key, key_len);
	if (RESIL__UNLIKELY(!find_short(k, h, &key, &key_len, r, &e)))
		return ratelimit_any(k, key, key_len, permits, retry_after);
	err = resil_ratelimit_try_acquire(e->inst, permits, retry_after);
	khaz_clear(r);
	return err;
}

/* ---- bulkheads ---- */

/* A permit's answer: e stays pinned in *permit when err is RESIL_OK (its
 * release, complete or report lets it go), else it is unpinned. */
static resil_err
hold(resil_keyed_permit *permit, kentry *e, resil_err err)
{
	if (err == RESIL_OK) {
		memset(&permit->permit, 0, sizeof(permit->permit));
		permit->entry = e;
	} else
		unpin(e);
	return err;
}

resil_err
resil_keyed_bulkhead_try_acquire(resil_keyed *k, const void *key,
    size_t key_len, resil_keyed_permit *permit)
{
	resil_err err = RESIL_E_NOMEM;
	kentry *e;

	if (permit == NULL)
		return RESIL_E_INVAL;
	e = get(k, key, key_len, RESIL_KEYED_BULKHEAD, &err);
	if (e == NULL)
		return err;
	return hold(permit, e, resil_bulkhead_try_acquire(e->inst));
}

resil_err
resil_keyed_bulkhead_release(resil_keyed *k, resil_keyed_permit *permit)
{
	kentry *e = permit_held(k, permit);

	if (e == NULL)
		return RESIL_E_INVAL;
	return let_go(permit, e, resil_bulkhead_release(e->inst));
}

resil_err
resil_keyed_bulkhead_complete(resil_keyed *k, resil_keyed_permit *permit,
    resil_outcome outcome, uint64_t latency)
{
	kentry *e = permit_held(k, permit);

	if (e == NULL)
		return RESIL_E_INVAL;
	return let_go(permit, e,
	    resil_bulkhead_complete(e->inst, outcome, latency));
}

/* ---- throttles (issue 42) ---- */

resil_err
resil_keyed_throttle_admit(resil_keyed *k, const void *key, size_t key_len,
    int cls, resil_keyed_permit *permit)
{
	resil_err err = RESIL_E_NOMEM;
	kentry *e;

	if (permit == NULL)
		return RESIL_E_INVAL;
	e = get(k, key, key_len, RESIL_KEYED_THROTTLE, &err);
	if (e == NULL)
		return err;
	return hold(permit, e, resil_throttle_admit_class(e->inst, cls));
}

resil_err
resil_keyed_throttle_report(resil_keyed *k, resil_keyed_permit *permit,
    resil_throttle_result result)
{
	kentry *e = permit_held(k, permit);

	if (e == NULL)
		return RESIL_E_INVAL;
	return let_go(permit, e, resil_throttle_report(e->inst, result));
}

/* ---- looking ---- */

static void
instance_of(const resil_keyed *k, void *inst, resil_keyed_instance *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = k->cfg.kind;
	if (k->cfg.kind == RESIL_KEYED_BREAKER)
		out->breaker = inst;
	else if (k->cfg.kind == RESIL_KEYED_RATELIMIT)
		out->ratelimit = inst;
	else if (k->cfg.kind == RESIL_KEYED_THROTTLE)
		out->throttle = inst;
	else
		out->bulkhead = inst;
}

resil_err
resil_keyed_with(resil_keyed *k, const void *key, size_t key_len,
    resil_keyed_visit_fn fn, void *ctx)
{
	resil_keyed_instance in;
	uint64_t h;
	kentry *e;

	if (k == NULL || key == NULL || fn == NULL || key_len == 0 ||
	    key_len > k->cfg.max_key_len)
		return RESIL_E_INVAL;
	h = khash(k, key, key_len);
	e = find(k, h, key, key_len);
	if (e == NULL) {
		resil__spin_lock(&k->lock);
		e = find(k, h, key, key_len);
		resil__spin_unlock(&k->lock);
	}
	if (e == NULL)
		return RESIL_E_NOTFOUND;
	instance_of(k, e->inst, &in);
	fn(kbytes(e), e->len, &in, ctx);
	unpin(e);
	return RESIL_OK;
}

resil_err
resil_keyed_get(resil_keyed *k, const void *key, size_t key_len,
    resil_keyed_handle *h)
{
	resil_err err = RESIL_E_NOMEM;
	kentry *e;

	if (k == NULL || h == NULL)
		return RESIL_E_INVAL;
	e = get(k, key, key_len, k->kind, &err);
	if (e == NULL)
		return err;
	instance_of(k, e->inst, &h->instance);
	h->overflow = e == &k->ovf;
	h->entry = e;
	return RESIL_OK;
}

resil_err
resil_keyed_put(resil_keyed *k, resil_keyed_handle *h)
{
	kentry *e;

	if (k == NULL || h == NULL || h->entry == NULL)
		return RESIL_E_INVAL;
	e = h->entry;
	h->entry = NULL;
	memset(&h->instance, 0, sizeof(h->instance));
	unpin(e);
	return RESIL_OK;
}

resil_err
resil_keyed_overflow(resil_keyed *k, resil_keyed_instance *out)
{
	if (k == NULL || out == NULL)
		return RESIL_E_INVAL;
	instance_of(k, k->ovf.inst, out);
	return RESIL_OK;
}

resil_err
resil_keyed_foreach(resil_keyed *k, resil_keyed_visit_fn fn, void *ctx)
{
	resil_keyed_instance in;
	uint32_t i;

	if (k == NULL || fn == NULL)
		return RESIL_E_INVAL;
	resil__spin_lock(&k->lock);
	for (i = 0; i < k->cfg.max_keys; i++) {
		kentry *e = &k->pool[i];

		if (resil__load64(&e->pin) & PIN_DEAD)
			continue;
		instance_of(k, e->inst, &in);
		fn(kbytes(e), e->len, &in, ctx);
	}
	resil__spin_unlock(&k->lock);
	return RESIL_OK;
}

resil_err
resil_keyed_get_metrics(resil_keyed *k, resil_keyed_metrics *out)
{
	uint64_t key_extra;

	if (k == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	resil__spin_lock(&k->lock);
	out->keys = k->keys;
	out->created = k->created;
	out->evicted = k->evicted;
	out->overflowed = k->overflowed;
	resil__spin_unlock(&k->lock);
	out->max_keys = k->cfg.max_keys;
	out->bytes = resil__load64(&k->bytes);
	out->bytes_fixed = k->bytes_fixed;
	out->instance_bytes = k->instance_bytes;
	key_extra = k->cfg.max_key_len > RESIL_KEYED_INLINE_KEY
	    ? k->cfg.max_key_len
	    : 0;
	/* The overflow instance is in bytes_fixed; an evicted long key is
	 * freed after its event, while the new key may hold one: one more
	 * key's worth. */
	out->bytes_bound = k->bytes_fixed +
	    (uint64_t)k->cfg.max_keys * (k->instance_bytes + key_extra) +
	    key_extra;
	return RESIL_OK;
}

const char *
resil_keyed_kind_name(resil_keyed_kind kind)
{
	switch (kind) {
	case RESIL_KEYED_BREAKER:
		return "breaker";
	case RESIL_KEYED_RATELIMIT:
		return "ratelimit";
	case RESIL_KEYED_BULKHEAD:
		return "bulkhead";
	case RESIL_KEYED_THROTTLE:
		return "throttle";
	}
	return "unknown";
}

const char *
resil_keyed_event_name(resil_keyed_event_type t)
{
	switch (t) {
	case RESIL_KEYED_EVENT_CREATED:
		return "created";
	case RESIL_KEYED_EVENT_EVICTED:
		return "evicted";
	case RESIL_KEYED_EVENT_OVERFLOW:
		return "overflow";
	}
	return "unknown";
}

/* ---- seen: per-key figures, top-N, Prometheus: lib/keyed_prom.c ---- */

const resil_allocator *resil__keyed_user_alloc(const resil_keyed *k);

const resil_allocator *
resil__keyed_user_alloc(const resil_keyed *k)
{
	return &k->user;
}

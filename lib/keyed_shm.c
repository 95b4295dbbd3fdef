/*
 * Keyed breaker and rate limiter families in a shared-memory region
 * (issue 41): the processes of one host share key K's breaker, or key
 * K's rate limiter (h3/kshm2).
 *
 * The table, one region object (lib/shm.c's entry of kind keyed):
 *
 *   head     128 bytes: magic, slots, slot size, the index's place, the
 *            hash seed, the table lock, the processes that have it open,
 *            counters
 *   slots    max_keys + 1 of slot_bytes each: a 128-byte header {state,
 *            hash, attach mask, key length, key (up to 64 bytes)} and the
 *            key's breaker state (lib/breaker.c's shared layout, as
 *            resil_shm_breaker() places it); the last slot is the
 *            overflow breaker, never a key's
 *   index    an open-addressed table of 2^n words (at least twice the
 *            slots): the hash's high 32 bits and the slot + 1
 *
 * A rate limiter family's table (its head's kind KSHM_RATELIMIT, a region
 * entry of its own kind) is the same but for its slots: the header, which
 * also records the rate, period and burst its claimer gave the key (the
 * family's, or the key's keyed.override), and the key's GCRA state as
 * resil_shm_ratelimit() places it (lib/limit_shared.h), 256 bytes a slot.
 * A process attaching to a slot with other settings for its key is
 * refused (every process must agree). Its reclaim protection is the
 * local family's: a slot is reclaimable only when its limiter holds its
 * full burst, so churning keys never resets a limit.
 *
 * Each process's resil_keyed is an ordinary family (lib/keyed.c) whose
 * instances are made here (lib/keyed_maker.h): a key's instance is a
 * breaker handle attached to the key's slot, so the family's lookup,
 * pinning and local eviction are unchanged, and every call on a key goes
 * to the shared state. A process's bit in a slot's attach mask says it
 * holds a handle on it; the bit is set under the table lock and cleared
 * when the local family drops the handle (or when the process is seen
 * dead, or its process slot is taken over).
 *
 * Finding, claiming and reclaiming slots take the table lock: a spin
 * lock word holding the holder's process slot + 1, taken over once the
 * holder is seen dead (lib/proc.c). A claim marks its slot with a state
 * tagged with the claimer's process slot (CLAIM or RECLAIM), writes the
 * key, zeroes and initialises the breaker, inserts it in the index and
 * only then stores READY. A process that takes the lock over from a dead
 * holder repairs the table first: every slot not FREE or READY is rolled
 * back to FREE (nobody else can hold a handle on it: handles are made
 * under the lock, after READY), and the index and the count of slots in
 * use are rebuilt from the READY slots. So a claimer killed at any
 * instruction leaves a table the next process repairs.
 *
 * Reclaiming: when no slot is free, a new key takes the slot of a key
 * that no live process holds (attach mask 0 once the bits of dead
 * processes are cleared) and whose breaker a fresh one would equal:
 * CLOSED, no failure, slow call or failure streak in its window (the
 * local family's protection, lib/keyed.c). A scan looks at every slot at
 * most once from a rotating hand; when it finds none, the key gets a
 * handle on the overflow breaker and the next max_keys / 64 new keys go
 * to the overflow without a scan.
 */
#define _GNU_SOURCE 1

#include <resil/keyed.h>
#include <resil/shm.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "atomic.h"
#include "breaker_fast.h"
#include "breaker_internal.h"
#include "breaker_shared.h"
#include "internal.h"
#include "keyed_maker.h"
#include "keyed_shm_table.h"
#include "limit_shared.h"
#include "proc.h"
#include "shm_internal.h"

/* Tests only: called by a claimer after it tagged its slot and wrote the
 * key, before the slot is READY (NULL in production). */
void (*resil__kshm_claim_hook)(void);

/* A rate limiter or bulkhead family's keyed.override, copied (h3/kshm2,
 * h4/kshm3): the maker is given the family's settings, not the key's. */
typedef struct kov {
	uint8_t key[RESIL_SHM_KEYED_KEY_MAX];
	uint32_t len;
	uint32_t rate;
	uint64_t period_ns;
	uint32_t burst;
	uint32_t max_concurrent; /* a bulkhead family's (h4/kshm3) */
} kov;

/* This process's view of one table (the ctx of lib/keyed_maker.h). */
typedef struct kfam {
	resil_allocator alloc;
	char *mem;
	kshm_head *head;
	const resil__proc *procs;
	unsigned slot;
	char name[64];
	resil_shm *own; /* a region the family opened and closes (NULL: not) */
	kov *ov;        /* a rate limiter family's overrides */
	size_t n_ov;
} kfam;

/* ---- the hash (not the local family's: its seed is the table's) ---- */

static uint64_t
kshm_hash(uint64_t seed, const uint8_t *p, size_t n)
{
	uint64_t h = resil__fnv1a64(seed ^ RESIL__FNV0, p, n);

	h ^= n;
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	return h ^ (h >> 33);
}

/* ---- the index, under the table lock ---- */

static void
index_insert(kshm_head *h, uint64_t hash, uint64_t slot)
{
	uint64_t *ix = index_of(h), i = hash & h->index_mask;

	while (ix[i] != 0)
		i = (i + 1) & h->index_mask;
	resil__store64(&ix[i], (hash >> 32) << 32 | (slot + 1));
}

static void
index_remove(kshm_head *h, uint64_t slot)
{
	uint64_t *ix = index_of(h), m = h->index_mask;
	uint64_t i = slot_at(h, slot)->hash & m, j, home, s;
	uint64_t n;

	for (n = 0; (uint32_t)ix[i] != slot + 1; n++) {
		if (n > m)
			return; /* not there (a repaired table) */
		i = (i + 1) & m;
	}
	for (j = i;;) {
		j = (j + 1) & m;
		s = ix[j];
		if (s == 0)
			break;
		home = slot_at(h, (uint32_t)s - 1)->hash & m;
		if (i <= j ? (home <= i || home > j)
		           : (home <= i && home > j)) {
			resil__store64(&ix[i], s);
			i = j;
		}
	}
	resil__store64(&ix[i], 0);
}

/* key's slot, or UINT64_MAX. */
static uint64_t
index_find(const kshm_head *h, uint64_t hash, const void *key, size_t len)
{
	const uint64_t *ix = index_of(h);
	uint64_t i = hash & h->index_mask, s, n;

	for (n = 0; n <= h->index_mask; n++, i = (i + 1) & h->index_mask) {
		const kshm_slot *sl;

		s = ix[i];
		if (s == 0)
			return UINT64_MAX;
		if ((s >> 32) != hash >> 32 || (uint32_t)s > h->max_keys)
			continue;
		sl = slot_at(h, (uint32_t)s - 1);
		if (sl->hash == hash && sl->len == len &&
		    memcmp(sl->key, key, len) == 0)
			return (uint32_t)s - 1;
	}
	return UINT64_MAX;
}

/* ---- the table lock ---- */

/* Under the lock taken over from a dead holder: roll back what it left
 * half done and rebuild the index from the READY slots. */
static void
repair(kshm_head *h)
{
	uint64_t i, used = 0;

	memset(index_of(h), 0, (h->index_mask + 1) * sizeof(uint64_t));
	for (i = 0; i < h->max_keys; i++) {
		kshm_slot *s = slot_at(h, i);
		uint64_t st = resil__load64(&s->state);

		if (st == KS_READY && s->len >= 1 &&
		    s->len <= RESIL_SHM_KEYED_KEY_MAX) {
			index_insert(h, s->hash, i);
			used++;
		} else if (st != KS_FREE) {
			memset(s, 0, sizeof(*s));
			resil__faa64(&h->repaired, 1);
		}
	}
	resil__store64(&h->used, used);
}

static void
kshm_lock(const kfam *f)
{
	uint64_t mine = (uint64_t)f->slot + 1, cur;
	unsigned rounds = 0;

	for (;;) {
		cur = resil__load64(&f->head->lock);
		if (cur == 0 && resil__cas64(&f->head->lock, 0, mine))
			return;
		if (++rounds % 1024 == 0) {
			sched_yield();
			if (cur != 0 && cur <= RESIL__PROCS &&
			    !resil__proc_alive(f->procs, (unsigned)cur - 1) &&
			    resil__cas64(&f->head->lock, cur, mine)) {
				repair(f->head); /* its holder died */
				return;
			}
		} else {
			resil__stall();
		}
	}
}

static void
kshm_unlock(const kfam *f)
{
	resil__store64(&f->head->lock, 0);
}

/* ---- slots ---- */

/* The settings this process gives slot i's key: the family's, or its
 * keyed.override's (the overflow slot: the family's). */
static void
rate_cfg(const kfam *f, const resil_keyed_config *cfg, uint64_t i,
    resil_ratelimit_config *rl)
{
	const kshm_slot *s = slot_at(f->head, i);
	size_t k;

	*rl = cfg->ratelimit;
	if (i >= f->head->max_keys)
		return;
	for (k = 0; k < f->n_ov; k++) {
		const kov *o = &f->ov[k];

		if (o->len != s->len || memcmp(o->key, s->key, o->len) != 0)
			continue;
		if (o->rate != 0)
			rl->rate = o->rate;
		if (o->period_ns != 0)
			rl->period_ns = o->period_ns;
		if (o->burst != 0)
			rl->burst = o->burst;
		return;
	}
}

/* A handle on slot i's rate limiter; init: the claimer records its
 * settings, else they must be the slot's. */
static resil_err
rate_attach(const kfam *f, const resil_keyed_config *cfg, uint64_t i,
    bool init, void **out, resil_diag *diag)
{
	kshm_slot *s = slot_at(f->head, i);
	resil_ratelimit_config rl;

	rate_cfg(f, cfg, i, &rl);
	if (init) {
		resil__store64(&s->rl_rate, rl.rate);
		resil__store64(&s->rl_period, rl.period_ns);
		resil__store64(&s->rl_burst, rl.burst);
	} else if (resil__load64(&s->rl_rate) != rl.rate ||
	    resil__load64(&s->rl_period) != rl.period_ns ||
	    resil__load64(&s->rl_burst) != rl.burst)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: family %s: %s%.*s%s's rate limiter has rate "
		    "%llu per %llu ns, burst %llu; this process gives it "
		    "rate %u per %llu ns, burst %u (every process must "
		    "have the same ratelimit and keyed.override settings)",
		    f->name, i < f->head->max_keys ? "key \"" : "the overflow",
		    i < f->head->max_keys ? (int)s->len : 0, (const char *)s->key,
		    i < f->head->max_keys ? "\"" : "",
		    (unsigned long long)resil__load64(&s->rl_rate),
		    (unsigned long long)resil__load64(&s->rl_period),
		    (unsigned long long)resil__load64(&s->rl_burst),
		    (unsigned)rl.rate, (unsigned long long)rl.period_ns,
		    (unsigned)rl.burst);
	return resil__ratelimit_new_shared(
	    (resil_ratelimit **)out, &rl, bmem(f->head, i), init, diag);
}

/* h4/kshm3: the max_concurrent this process gives slot i's key: the
 * family's, or its keyed.override's (the overflow slot: the family's). */
static uint32_t
bulk_limit(const kfam *f, const resil_keyed_config *cfg, uint64_t i)
{
	const kshm_slot *s = slot_at(f->head, i);
	size_t k;

	if (i < f->head->max_keys)
		for (k = 0; k < f->n_ov; k++)
			if (f->ov[k].len == s->len &&
			    memcmp(f->ov[k].key, s->key, s->len) == 0 &&
			    f->ov[k].max_concurrent != 0)
				return f->ov[k].max_concurrent;
	return cfg->bulkhead.max_concurrent;
}

/* A handle on slot i's bulkhead (h4/kshm3); init: the claimer records
 * its limit, else it must be the slot's. */
static resil_err
bulk_attach(const kfam *f, const resil_keyed_config *cfg, uint64_t i,
    bool init, void **out, resil_diag *diag)
{
	kshm_slot *s = slot_at(f->head, i);
	resil_bulkhead_config bc = cfg->bulkhead;

	bc.max_concurrent = bulk_limit(f, cfg, i);
	if (init)
		resil__store64(&s->rl_rate, bc.max_concurrent);
	else if (resil__load64(&s->rl_rate) != bc.max_concurrent)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: family %s: %s%.*s%s's bulkhead has "
		    "max_concurrent %llu; this process gives it %u (every "
		    "process must have the same bulkhead and keyed.override "
		    "settings)",
		    f->name, i < f->head->max_keys ? "key \"" : "the overflow",
		    i < f->head->max_keys ? (int)s->len : 0, (const char *)s->key,
		    i < f->head->max_keys ? "\"" : "",
		    (unsigned long long)resil__load64(&s->rl_rate),
		    (unsigned)bc.max_concurrent);
	return resil__bulkhead_new_packed((resil_bulkhead **)out, &bc,
	    bmem(f->head, i), init, f->procs, f->slot, diag);
}

static resil_err
attach(const kfam *f, const resil_keyed_config *cfg, uint64_t i, bool init,
    void **out, resil_diag *diag)
{
	if (f->head->kind == KSHM_RATELIMIT)
		return rate_attach(f, cfg, i, init, out, diag);
	if (f->head->kind == KSHM_BULKHEAD)
		return bulk_attach(f, cfg, i, init, out, diag);
	return resil__breaker_new_shared((resil_breaker **)out, &cfg->breaker,
	    bmem(f->head, i), init, f->procs, f->slot, diag);
}

/* Whether slot i's rate limiter holds less than its full burst (read with
 * the settings the slot records); a state that cannot be read does. */
static bool
rate_protected(const kfam *f, const resil_keyed_config *cfg, uint64_t i)
{
	const kshm_slot *s = slot_at(f->head, i);
	resil_ratelimit_config rl = cfg->ratelimit;
	resil_ratelimit_metrics m;
	resil_ratelimit *r;
	bool prot = true;

	rl.rate = (uint32_t)resil__load64(&s->rl_rate);
	rl.period_ns = resil__load64(&s->rl_period);
	rl.burst = (uint32_t)resil__load64(&s->rl_burst);
	rl.reserve_critical = 0;
	rl.reserve_default = 0;
	if (resil__ratelimit_new_shared(&r, &rl, bmem(f->head, i), false,
	        NULL) != RESIL_OK)
		return true;
	if (resil_ratelimit_get_metrics(r, &m) == RESIL_OK)
		prot = m.available < m.burst;
	resil_ratelimit_free(r);
	return prot;
}

/* Whether slot i's breaker is one a fresh breaker would not equal (the
 * local family's protection); a slot whose state cannot be read is. */
static bool
slot_protected(const kfam *f, const resil_keyed_config *cfg, uint64_t i)
{
	uint64_t w = resil__load64((const uint64_t *)bmem(f->head, i));
	resil_breaker_metrics m;
	resil_breaker *b;
	void *vb;
	bool prot = true;

	if (f->head->kind == KSHM_RATELIMIT)
		return rate_protected(f, cfg, i);
	if (f->head->kind == KSHM_BULKHEAD) {
		/* No live process holds it (the caller checked): calls
		 * counted are dead processes', given back first. */
		if (resil__bulkhead_packed_in_flight(bmem(f->head, i)) != 0)
			(void)resil__bulkhead_packed_reap(
			    bmem(f->head, i), f->procs, f->slot);
		return resil__bulkhead_packed_in_flight(bmem(f->head, i)) != 0;
	}
	if ((w & (W_STATE_MASK | W_TRANSIT)) != RESIL_BREAKER_CLOSED)
		return true;
	if (attach(f, cfg, i, false, &vb, NULL) != RESIL_OK)
		return true;
	b = vb;
	if (resil_breaker_get_metrics(b, &m) == RESIL_OK)
		prot = m.state != RESIL_BREAKER_CLOSED ||
		    m.window_failures != 0 || m.window_slow != 0 ||
		    m.consecutive_failures != 0;
	resil_breaker_free(b);
	return prot;
}

/* The attach mask of slot i once the bits of dead processes are cleared
 * (*alive, *seen: which process slots were looked at, and found alive,
 * during this scan: one liveness check each at most). */
static uint64_t
live_mask(const kfam *f, kshm_slot *s, uint64_t *seen, uint64_t *alive)
{
	uint64_t m = __atomic_load_n(&s->attach, __ATOMIC_ACQUIRE), dead = 0;
	unsigned b;

	for (b = 0; b < RESIL__PROCS; b++) {
		uint64_t bit = UINT64_C(1) << b;

		if ((m & bit) == 0)
			continue;
		if ((*seen & bit) == 0) {
			*seen |= bit;
			if (b == f->slot || resil__proc_alive(f->procs, b))
				*alive |= bit;
		}
		if ((*alive & bit) == 0)
			dead |= bit;
	}
	if (dead != 0)
		m = __atomic_and_fetch(&s->attach, ~dead, __ATOMIC_ACQ_REL);
	return m;
}

/* Under the lock, with no slot free: a slot no live process holds whose
 * breaker is as a fresh one, taken out of the index and tagged RECLAIM;
 * UINT64_MAX when there is none. */
static uint64_t
reclaim(const kfam *f, const resil_keyed_config *cfg)
{
	kshm_head *h = f->head;
	uint64_t n, seen = 0, alive = 0;

	for (n = 0; n < h->max_keys; n++) {
		uint64_t i = h->hand % h->max_keys;
		kshm_slot *s = slot_at(h, i);

		h->hand = i + 1;
		if (resil__load64(&s->state) != KS_READY ||
		    live_mask(f, s, &seen, &alive) != 0 ||
		    slot_protected(f, cfg, i))
			continue;
		resil__store64(
		    &s->state, (uint64_t)(f->slot + 1) << 8 | KS_RECLAIM);
		index_remove(h, i);
		resil__store64(&h->used, h->used - 1);
		resil__faa64(&h->reclaimed, 1);
		return i;
	}
	return UINT64_MAX;
}

/* Under the lock: a slot for a new key, tagged (CLAIM), or UINT64_MAX. */
static uint64_t
take_slot(const kfam *f, const resil_keyed_config *cfg)
{
	kshm_head *h = f->head;
	uint64_t n, i;

	if (h->used < h->max_keys)
		for (n = 0; n < h->max_keys; n++) {
			i = (h->hand + n) % h->max_keys;
			if (resil__cas64(&slot_at(h, i)->state, KS_FREE,
			        (uint64_t)(f->slot + 1) << 8 | KS_CLAIM))
				return i;
		}
	if (h->skip > 0) {
		h->skip--;
		return UINT64_MAX;
	}
	i = reclaim(f, cfg);
	if (i == UINT64_MAX) {
		h->skip = h->max_keys / 64;
		return UINT64_MAX;
	}
	resil__store64(
	    &slot_at(h, i)->state, (uint64_t)(f->slot + 1) << 8 | KS_CLAIM);
	return i;
}

/* Under the lock: claim a slot for key and attach to it (init). */
static resil_err
claim(const kfam *f, const resil_keyed_config *cfg, uint64_t hash,
    const void *key, size_t len, uint64_t *slot, void **out,
    resil_diag *diag)
{
	kshm_head *h = f->head;
	uint64_t i = take_slot(f, cfg);
	kshm_slot *s;
	resil_err err;

	*slot = i;
	if (i == UINT64_MAX)
		return RESIL_OK; /* no slot: the caller takes the overflow */
	s = slot_at(h, i);
	s->hash = hash;
	s->len = (uint32_t)len;
	memcpy(s->key, key, len);
	__atomic_store_n(&s->attach, 0, __ATOMIC_RELEASE);
	memset(bmem(h, i), 0, h->slot_bytes - KSHM_HDR);
	if (resil__kshm_claim_hook != NULL)
		resil__kshm_claim_hook();
	err = attach(f, cfg, i, true, out, diag);
	if (err != RESIL_OK) {
		memset(s, 0, sizeof(*s)); /* back to FREE */
		*slot = UINT64_MAX;
		return err;
	}
	index_insert(h, hash, i);
	resil__store64(&h->used, h->used + 1);
	resil__faa64(&h->claimed, 1);
	resil__store64(&s->state, KS_READY);
	return RESIL_OK;
}

/* ---- the maker (lib/keyed_maker.h) ---- */

static resil_err
kf_make(void *ctx, const resil_keyed_config *cfg, const void *key, size_t len,
    void **inst, resil_diag *diag)
{
	kfam *f = ctx;
	kshm_head *h = f->head;
	void *b = NULL;
	uint64_t hash, i;
	resil_err err;

	if (key == NULL) /* the family's overflow instance */
		return attach(f, cfg, h->max_keys, false, inst, diag);
	if (len < 1 || len > RESIL_SHM_KEYED_KEY_MAX)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: a key of %zu bytes (1..%u)", len,
		    RESIL_SHM_KEYED_KEY_MAX);
	hash = kshm_hash(h->seed, key, len);
	kshm_lock(f);
	i = index_find(h, hash, key, len);
	if (i != UINT64_MAX)
		err = attach(f, cfg, i, false, &b, diag);
	else
		err = claim(f, cfg, hash, key, len, &i, &b, diag);
	if (err == RESIL_OK && i == UINT64_MAX) {
		/* No slot: the key is sent to the family's overflow instance
		 * (lib/keyed_maker.h: b NULL), and asks again at its next
		 * use (h4/kshm3). */
		resil__faa64(&h->overflowed, 1);
	} else if (err == RESIL_OK)
		__atomic_fetch_or(&slot_at(h, i)->attach,
		    UINT64_C(1) << f->slot, __ATOMIC_ACQ_REL);
	kshm_unlock(f);
	if (err == RESIL_OK)
		*inst = b;
	return err;
}

/* Free a handle of the table's kind. */
static void
inst_drop(const kshm_head *h, void *inst)
{
	if (h->kind == KSHM_RATELIMIT)
		resil_ratelimit_free(inst);
	else if (h->kind == KSHM_BULKHEAD)
		resil_bulkhead_free(inst);
	else
		resil_breaker_free(inst);
}

static void
kf_drop(void *ctx, void *inst)
{
	kfam *f = ctx;
	kshm_head *h = f->head;
	resil__bfast fr;
	const char *st;
	uint64_t off, i;

	if (inst == NULL) /* an override's key sent to the overflow */
		return;
	if (h->kind == KSHM_RATELIMIT)
		st = resil__ratelimit_shared_mem(inst);
	else if (h->kind == KSHM_BULKHEAD)
		st = resil__bulkhead_shared_mem(inst);
	else {
		resil__breaker_fast_refs(inst, &fr);
		st = (const char *)fr.st;
	}
	off = (uint64_t)(st - (char *)h) - KSHM_HDR - KSHM_HDR;
	i = off / h->slot_bytes;
	/* A key's handle gives its bit back; no bit is kept for the
	 * overflow. One handle per key and process slot: the family is
	 * open once per region handle. */
	if (i < h->max_keys)
		__atomic_fetch_and(&slot_at(h, i)->attach,
		    ~(UINT64_C(1) << f->slot), __ATOMIC_ACQ_REL);
	inst_drop(h, inst);
}

static void
kf_done(void *ctx)
{
	kfam *f = ctx;
	resil_allocator a = f->alloc;
	resil_shm *own = f->own;

	__atomic_fetch_and(
	    &f->head->opened, ~(UINT64_C(1) << f->slot), __ATOMIC_ACQ_REL);
	if (f->ov != NULL)
		resil__free(&a, f->ov, f->n_ov * sizeof(kov));
	resil__free(&a, f, sizeof(*f));
	resil_shm_close(own);
}

/* ---- the public calls ---- */

/* A slot's and the table's bytes for cfg's kind. */
static size_t
want_slot_bytes(const resil_keyed_config *cfg)
{
	if (cfg->kind == RESIL_KEYED_BULKHEAD)
		return bulk_slot_bytes();
	return cfg->kind == RESIL_KEYED_RATELIMIT ? rate_slot_bytes()
	                                          : slot_bytes_of(&cfg->breaker);
}

static size_t
want_table_bytes(const resil_keyed_config *cfg)
{
	if (cfg->kind == RESIL_KEYED_BULKHEAD)
		return resil__kshm_bulk_bytes(cfg->max_keys);
	return cfg->kind == RESIL_KEYED_RATELIMIT
	    ? resil__kshm_rate_bytes(cfg->max_keys)
	    : resil__kshm_bytes(&cfg->breaker, cfg->max_keys);
}

/* The table kind (its head's) of cfg's family. */
static uint64_t
want_kind(const resil_keyed_config *cfg)
{
	if (cfg->kind == RESIL_KEYED_BULKHEAD)
		return KSHM_BULKHEAD;
	return cfg->kind == RESIL_KEYED_RATELIMIT ? KSHM_RATELIMIT
	                                          : KSHM_BREAKER;
}

typedef struct init_arg {
	const resil_keyed_config *cfg;
	uint64_t seed;
} init_arg;

static void
table_init(void *mem, void *arg)
{
	const init_arg *ia = arg;
	kshm_head *h = mem;

	h->max_keys = ia->cfg->max_keys;
	h->key_max = RESIL_SHM_KEYED_KEY_MAX;
	h->kind = want_kind(ia->cfg);
	h->slot_bytes = want_slot_bytes(ia->cfg);
	h->index_off = KSHM_HDR + ((uint64_t)h->max_keys + 1) * h->slot_bytes;
	h->index_mask = index_words(h->max_keys) - 1;
	h->seed = ia->seed;
	resil__fence();
	resil__store64(&h->magic, KSHM_MAGIC);
}

/* A family's keyed.override list, as the maker keeps it. */
static resil_err
overrides_check(const resil_keyed_config *cfg, resil_diag *diag)
{
	size_t i;

	if (cfg->n_overrides > RESIL_KEYED_MAX_OVERRIDES ||
	    (cfg->n_overrides > 0 && cfg->overrides == NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.override: %zu overrides, at most %u and not NULL",
		    cfg->n_overrides, RESIL_KEYED_MAX_OVERRIDES);
	for (i = 0; i < cfg->n_overrides; i++)
		if (cfg->overrides[i].key == NULL ||
		    cfg->overrides[i].key_len < 1 ||
		    cfg->overrides[i].key_len > cfg->max_key_len)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "keyed.override[%zu]: the key must be 1..%u bytes",
			    i, (unsigned)cfg->max_key_len);
	return RESIL_OK;
}

/* A rate limiter family's settings (h3/kshm2). */
static resil_err
rate_check(const resil_keyed_config *cfg, resil_diag *diag)
{
	resil_err err;

	if (cfg->ratelimit.batch != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "ratelimit.batch: %u must be 0 for a shared family (a "
		    "process's cached permits are not the others')",
		    (unsigned)cfg->ratelimit.batch);
	err = overrides_check(cfg, diag);
	if (err != RESIL_OK)
		return err;
	return resil_ratelimit_config_validate(&cfg->ratelimit, diag);
}

/* A bulkhead family's settings (h4/kshm3): a fixed limit, counted
 * exactly in the region (the shared bulkhead's rules, docs/shared.md). */
static resil_err
bulk_check(const resil_keyed_config *cfg, resil_diag *diag)
{
	const resil_bulkhead_config *b = &cfg->bulkhead;
	resil_err err;

	if (b->batch != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.batch: %u must be 0 for a shared family (a "
		    "process's leased slots are not the others')",
		    (unsigned)b->batch);
	if (b->adaptive)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.adaptive: a shared family's bulkheads have a "
		    "fixed limit (adaptive must be 0)");
	if (b->max_wait_ns > 0 || b->reserve_critical > 0 ||
	    b->reserve_default > 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "bulkhead.max_wait: a shared family's bulkheads neither "
		    "wait nor reserve slots (max_wait, reserve_critical and "
		    "reserve_default must be 0)");
	err = overrides_check(cfg, diag);
	if (err != RESIL_OK)
		return err;
	return resil_bulkhead_config_validate(b, diag);
}

static resil_err
check_cfg(resil_shm *shm, const char *name, const resil_keyed_config *cfg,
    resil_keyed **out, resil_diag *diag)
{
	if (shm == NULL || cfg == NULL || out == NULL || name == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "shm keyed: NULL argument");
	if (cfg->size != sizeof(resil_keyed_config))
		return resil__check_size(diag, "shm keyed",
		    "resil_keyed_config", cfg->size,
		    sizeof(resil_keyed_config));
	if (cfg->kind != RESIL_KEYED_BREAKER &&
	    cfg->kind != RESIL_KEYED_RATELIMIT &&
	    cfg->kind != RESIL_KEYED_BULKHEAD)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: a %s family: only breaker, rate limiter and "
		    "bulkhead families are shared in a region (there is no "
		    "shared %s)",
		    resil_keyed_kind_name(cfg->kind),
		    resil_keyed_kind_name(cfg->kind));
	if (cfg->max_keys < 1 || cfg->max_keys > RESIL__KSHM_MAX_KEYS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.max_keys: %u is out of range 1..%u for a shared "
		    "family",
		    (unsigned)cfg->max_keys, (unsigned)RESIL__KSHM_MAX_KEYS);
	if (cfg->max_key_len < 1 || cfg->max_key_len > RESIL_SHM_KEYED_KEY_MAX)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "keyed.max_key_len: %u is out of range 1..%u for a "
		    "shared family (its keys are kept in the region)",
		    (unsigned)cfg->max_key_len, RESIL_SHM_KEYED_KEY_MAX);
	if (cfg->kind == RESIL_KEYED_RATELIMIT)
		return rate_check(cfg, diag);
	if (cfg->kind == RESIL_KEYED_BULKHEAD)
		return bulk_check(cfg, diag);
	return resil_breaker_config_validate(&cfg->breaker, diag);
}

/* The overflow slot's breaker, made once (again after a creator died
 * before it was READY). Under the table lock. */
static resil_err
overflow_ready(const kfam *f, const resil_keyed_config *cfg, resil_diag *diag)
{
	kshm_head *h = f->head;
	kshm_slot *s = slot_at(h, h->max_keys);
	void *b;
	resil_err err;

	if (resil__load64(&s->state) == KS_READY)
		return RESIL_OK;
	memset(bmem(h, h->max_keys), 0, h->slot_bytes - KSHM_HDR);
	err = attach(f, cfg, h->max_keys, true, &b, diag);
	if (err != RESIL_OK)
		return err;
	inst_drop(h, b);
	resil__store64(&s->state, KS_READY);
	return RESIL_OK;
}

/* A rate limiter family's overrides, kept for the maker. */
static resil_err
copy_overrides(kfam *f, const resil_keyed_config *cfg, resil_diag *diag)
{
	size_t i;

	if ((cfg->kind != RESIL_KEYED_RATELIMIT &&
	        cfg->kind != RESIL_KEYED_BULKHEAD) ||
	    cfg->n_overrides == 0)
		return RESIL_OK;
	f->ov = resil__alloc(&f->alloc, cfg->n_overrides * sizeof(kov));
	if (f->ov == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "shm keyed: out of memory");
	f->n_ov = cfg->n_overrides;
	memset(f->ov, 0, f->n_ov * sizeof(kov));
	for (i = 0; i < f->n_ov; i++) {
		const resil_keyed_override *o = &cfg->overrides[i];

		memcpy(f->ov[i].key, o->key, o->key_len);
		f->ov[i].len = (uint32_t)o->key_len;
		f->ov[i].rate = o->rate;
		f->ov[i].period_ns = o->period_ns;
		f->ov[i].burst = o->burst;
		f->ov[i].max_concurrent = o->max_concurrent;
	}
	return RESIL_OK;
}

static resil_err keyed_open(resil_shm *shm, const char *name,
    const resil_keyed_config *cfg, kfam **fout, resil_keyed **out,
    resil_diag *diag);

resil_err
resil_shm_keyed(resil_shm *shm, const char *name,
    const resil_keyed_config *cfg, resil_keyed **out, resil_diag *diag)
{
	kfam *f;

	return keyed_open(shm, name, cfg, &f, out, diag);
}

resil_err
resil__shm_keyed_owned(const char *url, const resil_keyed_config *cfg,
    resil_keyed **out, resil_diag *diag)
{
	char region[201], name[64];
	const char *slash;
	resil_shm_config sc;
	resil_shm *shm;
	resil_diag d;
	resil_err err;
	kfam *f = NULL;
	size_t n;

	if (url == NULL || cfg == NULL || strncmp(url, "shm:", 4) != 0 ||
	    (slash = strchr(url + 4, '/')) == NULL ||
	    (n = (size_t)(slash - url - 4)) == 0 || n >= sizeof(region) ||
	    strlen(slash + 1) >= sizeof(name))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: \"%.80s\" is not shm:REGION/NAME",
		    url != NULL ? url : "(null)");
	memcpy(region, url + 4, n);
	region[n] = '\0';
	memcpy(name, slash + 1, strlen(slash + 1) + 1);
	resil_shm_config_init(&sc);
	sc.alloc = cfg->alloc;
	/* A region made here has room for the table (an existing one keeps
	 * its size). */
	if (cfg->kind != RESIL_KEYED_THROTTLE &&
	    cfg->max_keys >= 1 && cfg->max_keys <= RESIL__KSHM_MAX_KEYS)
		sc.region_bytes += want_table_bytes(cfg);
	d.msg[0] = '\0';
	err = resil_shm_open(&shm, region, &sc, &d);
	if (err != RESIL_OK)
		return resil__diagf(diag, err, "%s", d.msg);
	err = keyed_open(shm, name, cfg, &f, out, diag);
	if (err != RESIL_OK || f == NULL) { /* f is set on RESIL_OK */
		resil_shm_close(shm);
		return err != RESIL_OK ? err : RESIL_E_INVAL;
	}
	f->own = shm; /* closed by kf_done(), after the family */
	return RESIL_OK;
}

static resil_err
keyed_open(resil_shm *shm, const char *name, const resil_keyed_config *cfg,
    kfam **fout, resil_keyed **out, resil_diag *diag)
{
	resil__shm_keyed_want w;
	resil__keyed_maker mk;
	init_arg ia;
	kfam *f;
	void *mem = NULL;
	uint64_t bit;
	resil_err err;

	err = check_cfg(shm, name, cfg, out, diag);
	if (err != RESIL_OK)
		return err;
	ia.cfg = cfg;
	ia.seed = cfg->hash_seed != 0 ? cfg->hash_seed
	                              : UINT64_C(0x6b73686d2d6b6579);
	memset(&w, 0, sizeof(w));
	w.breaker = &cfg->breaker;
	w.ratelimit = cfg->kind == RESIL_KEYED_RATELIMIT;
	w.bulkhead = cfg->kind == RESIL_KEYED_BULKHEAD;
	w.max_keys = cfg->max_keys;
	w.init = table_init;
	w.arg = &ia;
	err = resil__shm_keyed_table(shm, name, &w, &mem, diag);
	if (err != RESIL_OK)
		return err;
	if (!head_sane(mem, want_table_bytes(cfg)) ||
	    ((kshm_head *)mem)->slot_bytes != want_slot_bytes(cfg) ||
	    ((kshm_head *)mem)->kind != want_kind(cfg))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm %s: corrupt region: keyed family %s: its table's "
		    "head is not one of %u slots of %zu bytes "
		    "(resil_shm_unlink it)",
		    resil__shm_name(shm), name, (unsigned)cfg->max_keys,
		    want_slot_bytes(cfg));
	f = resil__alloc(resil__allocator(cfg->alloc), sizeof(*f));
	if (f == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "shm keyed: out of memory");
	memset(f, 0, sizeof(*f));
	f->alloc = *resil__allocator(cfg->alloc);
	f->mem = mem;
	f->head = mem;
	f->procs = resil__shm_procs(shm);
	f->slot = resil__shm_slot(shm);
	snprintf(f->name, sizeof(f->name), "%s", name);
	bit = UINT64_C(1) << f->slot;
	if (__atomic_fetch_or(&f->head->opened, bit, __ATOMIC_ACQ_REL) & bit) {
		resil__free(&f->alloc, f, sizeof(*f));
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: family %s is open already through this region "
		    "handle (one family per handle: open the region again "
		    "or share the family)",
		    name);
	}
	err = copy_overrides(f, cfg, diag);
	if (err == RESIL_OK) {
		kshm_lock(f);
		err = overflow_ready(f, cfg, diag);
		kshm_unlock(f);
	}
	mk.make = kf_make;
	mk.drop = kf_drop;
	mk.done = kf_done;
	mk.ctx = f;
	if (err != RESIL_OK) {
		kf_done(f);
		return err;
	}
	err = resil__keyed_new_made(out, cfg, &mk, diag);
	if (err == RESIL_OK)
		*fout = f; /* else kf_done() freed it */
	return err;
}

resil_err
resil_shm_keyed_stat(resil_shm *shm, const char *name,
    resil_shm_keyed_info *out, resil_diag *diag)
{
	resil__shm_keyed_want w;
	resil_breaker_config bc;
	const kshm_head *h;
	void *mem = NULL;
	resil_err err;

	if (shm == NULL || name == NULL || out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "shm keyed: NULL argument");
	resil_breaker_config_init(&bc);
	memset(&w, 0, sizeof(w));
	w.breaker = &bc;
	w.max_keys = 1;
	w.find_only = true;
	err = resil__shm_keyed_table(shm, name, &w, &mem, diag);
	if (err != RESIL_OK)
		return err;
	h = mem;
	if (resil__load64(&h->magic) != KSHM_MAGIC)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm keyed: family %s: its table is not initialised",
		    name);
	memset(out, 0, sizeof(*out));
	out->max_keys = h->max_keys;
	out->used = (uint32_t)resil__load64(&h->used);
	out->claimed = resil__load64(&h->claimed);
	out->reclaimed = resil__load64(&h->reclaimed);
	out->overflowed = resil__load64(&h->overflowed);
	out->repaired = resil__load64(&h->repaired);
	out->slot_bytes = (size_t)h->slot_bytes;
	out->table_bytes = (size_t)h->index_off +
	    (size_t)(h->index_mask + 1) * sizeof(uint64_t);
	return RESIL_OK;
}

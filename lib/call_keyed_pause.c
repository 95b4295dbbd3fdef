/*
 * Issue 41 (turn 4): a key's pushback slows that key. A throttled answer
 * with a Retry-After pauses the key's rate limiter (the keyed gate,
 * lib/call_keyed.c, refuses the key's calls but critical ones until the
 * pause ends), as lib/call_overload.c pauses the pipeline's lone limiter.
 * The paused keys are kept here, apart from the family (lib/keyed.c):
 * by a 64-bit hash of the key's bytes, in an open-addressed table of at
 * most RESIL__KPAUSE_MAX live pauses, made at the first pause and emptied
 * when every pause has ended. A call's check costs one atomic load while
 * no key is paused; while one is, a hash and a short spin-locked probe.
 */
#include <string.h>

#include "call_keyed.h"
#include "internal.h"
#include "keyed_gate.h"
#include "pipeline_internal.h"

/* FNV-1a over the key's bytes, never 0 (0: an empty slot). */
static uint64_t
khash(const void *key, size_t len)
{
	uint64_t h = resil__fnv1a64(RESIL__FNV0, key, len);

	return h != 0 ? h : 1;
}

/* Under mu: every pause has ended at now: the table emptied. */
static void
clear_if_over(resil__kpause *kp, uint64_t now)
{
	uint64_t live = resil__load64(&kp->live);

	if (live == 0 || live > now)
		return;
	if (kp->slot != NULL)
		memset(kp->slot, 0, (size_t)kp->cap * sizeof(*kp->slot));
	kp->used = 0;
	resil__store64(&kp->live, 0);
}

/* Under mu: h's slot, or the empty one where it would go. */
static resil__kpslot *
probe(resil__kpause *kp, uint64_t h)
{
	uint32_t i = (uint32_t)h & (kp->cap - 1u), n;

	for (n = 0; n < kp->cap; n++, i = (i + 1u) & (kp->cap - 1u))
		if (kp->slot[i].h == h || kp->slot[i].h == 0)
			return &kp->slot[i];
	return NULL; /* not reached: the table is at most half full */
}

uint64_t
resil__kpause_until(
    resil_pipeline *p, const void *key, size_t len, uint64_t now)
{
	resil__kpause *kp = &p->keyed->kp;
	const resil__kpslot *s;
	uint64_t until = 0, h;

	if (resil__load64(&kp->live) <= now) {
		if (resil__load64(&kp->live) != 0) {
			resil__spin_lock(&kp->mu);
			clear_if_over(kp, now);
			resil__spin_unlock(&kp->mu);
		}
		return 0;
	}
	h = khash(key, len);
	resil__spin_lock(&kp->mu);
	if (kp->slot != NULL && (s = probe(kp, h)) != NULL && s->h == h &&
	    s->until > now)
		until = s->until;
	resil__spin_unlock(&kp->mu);
	return until;
}

/* Under mu: the table remade with room for one more live pause (the
 * ended ones dropped): 0, or -1 (RESIL__KPAUSE_MAX live already, or out
 * of memory: nothing changed). */
static int
make_room(resil_pipeline *p, resil__kpause *kp, uint64_t now)
{
	uint32_t live = 0, cap, i;
	resil__kpslot *ns;

	for (i = 0; kp->slot != NULL && i < kp->cap; i++)
		live += kp->slot[i].h != 0 && kp->slot[i].until > now;
	if (live >= RESIL__KPAUSE_MAX)
		return -1;
	/* At most half full after one more (so a probe always ends). */
	for (cap = 16; cap < 4u * (live + 1u) && cap < 2u * RESIL__KPAUSE_MAX;)
		cap *= 2u;
	ns = resil__calloc(&p->alloc, (size_t)cap * sizeof(*ns));
	if (ns == NULL)
		return -1;
	{
		resil__kpslot *old = kp->slot;
		uint32_t ocap = kp->cap;

		kp->slot = ns;
		kp->cap = cap;
		kp->used = 0;
		for (i = 0; old != NULL && i < ocap; i++)
			if (old[i].h != 0 && old[i].until > now) {
				*probe(kp, old[i].h) = old[i];
				kp->used++;
			}
		if (old != NULL)
			resil__free(&p->alloc, old, (size_t)ocap * sizeof(*old));
	}
	return 0;
}

int
resil__kpause_set(resil_pipeline *p, const void *key, size_t len,
    uint64_t until, uint64_t now)
{
	resil__kpause *kp = &p->keyed->kp;
	uint64_t h = khash(key, len), live;
	resil__kpslot *s = NULL;
	int kept = 0;

	resil__spin_lock(&kp->mu);
	clear_if_over(kp, now);
	if (kp->slot != NULL && (s = probe(kp, h)) != NULL && s->h == 0 &&
	    2u * (kp->used + 1u) > kp->cap)
		s = NULL; /* a new key past half full: remade first */
	if (s == NULL && make_room(p, kp, now) == 0)
		s = probe(kp, h);
	if (s != NULL) {
		if (s->h == 0) {
			s->h = h;
			s->until = 0;
			kp->used++;
		}
		/* Never shorten a pause another answer set. */
		if (s->until < until)
			s->until = until;
		live = resil__load64(&kp->live);
		if (live < until)
			resil__store64(&kp->live, until);
		kept = 1;
	}
	resil__spin_unlock(&kp->mu);
	return kept;
}

void
resil__kpause_free(resil_pipeline *p)
{
	resil__kpause *kp = &p->keyed->kp;

	if (kp->slot != NULL)
		resil__free(&p->alloc, kp->slot, (size_t)kp->cap * sizeof(*kp->slot));
	kp->slot = NULL;
	kp->cap = kp->used = 0;
}

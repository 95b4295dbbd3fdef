/*
 * Safe memory reclamation over ck_epoch; see epoch.h.
 */
#include "epoch.h"

#include "atomic.h"

#if defined(RESIL__TSAN)
#include <sanitizer/tsan_interface.h>
#endif

/* One reader slot on its own cache lines: a record and its claim flag. */
typedef struct slot {
	ck_epoch_record_t rec;
	uint8_t busy;
	char pad_[RESIL__CACHELINE - 1];
} slot;

struct resil__epoch {
	ck_epoch_t ck;
	resil_allocator a;
	unsigned nslots; /* a power of 2 */
	slot *slots;
	void *slots_raw;
	size_t slots_raw_size;
	resil__spinlock wlock;
	ck_epoch_record_t *writer; /* the writers' record, under wlock */
	uint64_t pending;          /* under wlock */
};

static void
acquire_all(resil__epoch *e)
{
#if defined(RESIL__TSAN)
	unsigned i;

	for (i = 0; i < e->nslots; i++)
		__tsan_acquire(&e->slots[i]);
#else
	(void)e;
#endif
}

resil_err
resil__epoch_new(
    resil__epoch **out, unsigned slots, const resil_allocator *alloc)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil__epoch *e;
	unsigned n = 1, i;
	uintptr_t p;

	if (out == NULL)
		return RESIL_E_INVAL;
	if (slots == 0)
		slots = 64;
	if (slots > 4096)
		return RESIL_E_INVAL;
	while (n < slots)
		n <<= 1;
	e = resil__calloc(a, sizeof(*e));
	if (e == NULL)
		return RESIL_E_NOMEM;
	e->a = *a;
	e->nslots = n;
	/* ck wants each record cache-line aligned; allocate one line more
	 * and align by hand, since the hook promises only malloc's
	 * alignment. */
	e->slots_raw_size = (size_t)(n + 1) * sizeof(slot) + RESIL__CACHELINE;
	e->slots_raw = resil__calloc(a, e->slots_raw_size);
	if (e->slots_raw == NULL) {
		resil__free(a, e, sizeof(*e));
		return RESIL_E_NOMEM;
	}
	p = ((uintptr_t)e->slots_raw + RESIL__CACHELINE - 1) &
	    ~(uintptr_t)(RESIL__CACHELINE - 1);
	e->slots = (slot *)p;
	ck_epoch_init(&e->ck);
	for (i = 0; i < n; i++)
		ck_epoch_register(&e->ck, &e->slots[i].rec, NULL);
	/* The writers' record sits after the readers' (ck wants it
	 * aligned like them). */
	e->writer = &e->slots[n].rec;
	ck_epoch_register(&e->ck, e->writer, NULL);
	resil__spin_init(&e->wlock);
	*out = e;
	return RESIL_OK;
}

void
resil__epoch_free(resil__epoch *e)
{
	resil_allocator a;

	if (e == NULL)
		return;
	resil__epoch_synchronize(e);
	a = e->a;
	resil__free(&a, e->slots_raw, e->slots_raw_size);
	resil__free(&a, e, sizeof(*e));
}

void
resil__epoch_enter(resil__epoch *e, resil__epoch_guard *g)
{
	unsigned i = resil__thread_stripe(e->nslots);
	slot *s;

	/* Claim a slot: the thread's own stripe first, then the next free
	 * one. A record is single-owner in ck, so the claim flag is what
	 * lets any thread read without registering. */
	for (;;) {
		s = &e->slots[i];
		if (resil__load8(&s->busy) == 0 &&
		    resil__fas8(&s->busy, 1) == 0)
			break;
		i = (i + 1) & (e->nslots - 1);
		resil__stall();
	}
	ck_epoch_begin(&s->rec, NULL);
	g->slot = s;
}

void
resil__epoch_exit(resil__epoch *e, resil__epoch_guard *g)
{
	slot *s = g->slot;

	(void)e;
#if defined(RESIL__TSAN)
	/* Before ck_epoch_end: once the record reads inactive, a writer may
	 * run a destructor (and acquire this slot) at once; a release after
	 * the end could come too late for TSan to see this section's reads
	 * happen before the free. */
	__tsan_release(s);
#endif
	ck_epoch_end(&s->rec, NULL);
	resil__store8(&s->busy, 0);
	g->slot = NULL;
}

static void
trampoline(ck_epoch_entry_t *ck)
{
	resil__epoch_entry *entry = (resil__epoch_entry *)(void *)ck;
	resil__epoch *e = entry->domain;

	acquire_all(e);
	e->pending--;
	entry->fn(entry);
}

void
resil__epoch_retire(
    resil__epoch *e, resil__epoch_entry *entry, resil__epoch_fn fn)
{
	entry->fn = fn;
	entry->domain = e;
	resil__spin_lock(&e->wlock);
	e->pending++;
	/* ck files a callback under its record's epoch: inside a section of
	 * the writers' record that is the current global epoch. Outside one,
	 * a stale record epoch would file it under an older epoch and poll
	 * could run it while readers still hold the object. */
	ck_epoch_begin(e->writer, NULL);
	ck_epoch_call(e->writer, &entry->ck, trampoline);
	ck_epoch_end(e->writer, NULL);
	/* Poll now, so that a steady stream of updates frees as it goes. */
	(void)ck_epoch_poll(e->writer);
	resil__spin_unlock(&e->wlock);
}

void
resil__epoch_reclaim(resil__epoch *e)
{
	resil__spin_lock(&e->wlock);
	(void)ck_epoch_poll(e->writer);
	resil__spin_unlock(&e->wlock);
}

void
resil__epoch_synchronize(resil__epoch *e)
{
	resil__spin_lock(&e->wlock);
	ck_epoch_barrier(e->writer);
	resil__spin_unlock(&e->wlock);
}

uint64_t
resil__epoch_pending(resil__epoch *e)
{
	uint64_t n;

	resil__spin_lock(&e->wlock);
	n = e->pending;
	resil__spin_unlock(&e->wlock);
	return n;
}

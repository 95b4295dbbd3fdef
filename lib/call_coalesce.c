/*
 * Issue 43: coalescing of identical calls in the blocking driver (see
 * lib/call_coalesce.h, docs/fallback.md "Coalescing"). A follower's wait
 * is a resil__waiter on its own stack, queued on the leader's entry
 * (lib/waitq.c) and woken through the clock's wait primitive: no wait
 * mechanism of its own.
 */
#include <stdio.h>
#include <string.h>

#include "call_coalesce.h"

/* A follower: its waiter first (a queued waiter is the follower). */
typedef struct coal_fol {
	resil__waiter w;
	resil_result *out;
	resil_err copy_err;
} coal_fol;

void
resil__coal_init(resil__coal *t, uint32_t max_waiters)
{
	memset(t, 0, sizeof(*t));
	resil__spin_init(&t->lock);
	t->max_waiters = max_waiters;
}

static uint64_t
coal_hash(const resil_args *a)
{
	const unsigned char *b = a->data;
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < a->len; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

static int
same_args(const resil_args *a, const resil_args *b)
{
	return a->len == b->len &&
	    (a->len == 0 || memcmp(a->data, b->data, a->len) == 0) &&
	    strcmp(a->method, b->method) == 0;
}

int
resil__coal_join(resil__coal *t, const resil_clock *clock,
    const resil_args *args, resil__coal_ent *e, resil_result *out)
{
	uint64_t h = coal_hash(args);
	resil__coal_ent **head = &t->heads[h % RESIL__COAL_BUCKETS];
	resil__coal_ent *it;
	coal_fol f;
	resil_err pe;

	if (args->data == NULL && args->len > 0)
		return RESIL__COAL_ALONE; /* the call itself refuses it */
	resil__spin_lock(&t->lock);
	for (it = *head; it != NULL; it = it->next)
		if (it->hash == h && same_args(it->args, args))
			break;
	if (it == NULL) {
		e->args = args;
		e->hash = h;
		resil__waitq_init(&e->q, t->max_waiters, 0);
		e->next = *head;
		*head = e;
		resil__spin_unlock(&t->lock);
		return RESIL__COAL_LEADER;
	}
	resil__waiter_init(&f.w, clock, NULL, NULL);
	/* cppcheck-suppress unreadVariable ; the leader writes through it */
	f.out = out;
	f.copy_err = RESIL_OK;
	resil__waitq_lock(&it->q);
	pe = resil__waitq_push(&it->q, &f.w, 0);
	resil__waitq_unlock(&it->q);
	resil__spin_unlock(&t->lock);
	if (pe != RESIL_OK) /* the bound: on its own */
		return RESIL__COAL_ALONE;
	/* No deadline: the leader always ends (its own timeouts). */
	while (resil__waiter_wait(&f.w, UINT64_MAX) == RESIL__W_WAITING)
		;
	return f.copy_err == RESIL_OK ? RESIL__COAL_FOLLOWED
	                              : RESIL__COAL_ALONE;
}

/* The follower's result: the leader's, with its own provenance (no
 * attempt of its own; the message says it was coalesced). */
static resil_err
copy_result(resil_result *dst, const resil_result *src)
{
	resil_value v;
	resil_err err = resil_value_copy(&v, &src->value, NULL);

	if (err != RESIL_OK)
		return err;
	*dst = *src;
	dst->value = v;
	dst->attempts = 0;
	/* "coalesced" then the leader's account, cut to fit. */
	{
		static const char tag[] = "coalesced: ";
		size_t n = strlen(src->message), room;

		memcpy(dst->message, tag, sizeof(tag) - 1);
		room = sizeof(dst->message) - sizeof(tag);
		if (n > room)
			n = room;
		memcpy(dst->message + sizeof(tag) - 1, src->message, n);
		dst->message[sizeof(tag) - 1 + n] = '\0';
		if (n == 0)
			dst->message[sizeof(tag) - 3] = '\0';
	}
	return RESIL_OK;
}

void
resil__coal_done(resil__coal *t, resil__coal_ent *e, const resil_result *out)
{
	resil__coal_ent **pp;
	resil__waiter *w;
	resil__wakeup wk;

	resil__spin_lock(&t->lock);
	for (pp = &t->heads[e->hash % RESIL__COAL_BUCKETS]; *pp != e;
	     pp = &(*pp)->next)
		;
	*pp = e->next;
	resil__spin_unlock(&t->lock);
	/* Unlinked: nobody joins any more; the followers queued wait. */
	resil__waitq_lock(&e->q);
	while ((w = resil__waitq_first(&e->q, 0)) != NULL) {
		coal_fol *f = (coal_fol *)(void *)w;

		f->copy_err = copy_result(f->out, out);
		(void)resil__waitq_pop_settle(&e->q, 0, 1, &wk);
		resil__waitq_unlock(&e->q);
		resil__wakeup_fire(&wk);
		resil__waitq_lock(&e->q);
	}
	resil__waitq_unlock(&e->q);
}

/*
 * Issue 43: coalescing of identical calls, in the call machine (see
 * lib/call_coalesce.h, docs/fallback.md "Coalescing", docs/async.md).
 * A follower's wait is a resil__waiter in its call state, queued on the
 * leader's entry (lib/waitq.c) and woken through the invocation's hook or
 * the clock's wait primitive: no wait mechanism of its own. Both drivers
 * run it: the blocking driver's follower is a machine stepped by
 * lib/call_drive.c's loop, which blocks on the waiter's word.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "call_coalesce.h"
#include "call_machine.h"

void
resil__coal_init(resil__coal *t, uint32_t max_waiters)
{
	memset(t, 0, sizeof(*t));
	resil__spin_init(&t->lock);
	t->max_waiters = max_waiters;
}

/* The key's hash: eight bytes a step (a multiply and a shift each),
 * then the tail; only the bucket and a first compare read it. */
static uint64_t
coal_hash(const resil_args *a)
{
	const unsigned char *b = a->data;
	uint64_t h = 1469598103934665603ull ^ a->len, w;
	size_t i = 0;

	for (; i + 8 <= a->len; i += 8) {
		memcpy(&w, b + i, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h ^= h >> 29;
	}
	for (; i < a->len; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h ^ (h >> 32);
}

static int
same_args(const resil_args *a, const resil_args *b)
{
	return a->len == b->len &&
	    (a->len == 0 || memcmp(a->data, b->data, a->len) == 0) &&
	    strcmp(a->method, b->method) == 0;
}

/* The call whose waiter w is (every queued waiter is a call's coal_w). */
static callm *
of_waiter(resil__waiter *w)
{
	return (callm *)(void *)((char *)w - offsetof(callm, coal_w));
}

static resil__coal_ent **
bucket(resil__coal *t, uint64_t h)
{
	return &t->heads[h % RESIL__COAL_BUCKETS];
}

/* Under t's lock: take e out of its bucket. */
static void
unlink_ent(resil__coal *t, resil__coal_ent *e)
{
	resil__coal_ent **pp;

	for (pp = bucket(t, e->hash); *pp != NULL && *pp != e;
	     pp = &(*pp)->next)
		;
	if (*pp == e)
		*pp = e->next;
}

/* Under t's lock: link c's own entry, c the leader of its key. */
static void
lead(resil__coal *t, callm *c, uint64_t h)
{
	resil__coal_ent *e = &c->coal_ent;
	resil__coal_ent **head = bucket(t, h);

	e->args = c->args;
	e->hash = h;
	resil__waitq_init(&e->q, t->max_waiters, 0);
	e->next = *head;
	*head = e;
	c->coal = RESIL__COAL_LEADER;
}

/* Settle a waiter off any queue with value, filling *wk: once the state
 * is set, the waiter may see it, return, and its storage go. */
static void
settle(resil__waiter *w, uint32_t value, resil__wakeup *wk)
{
	wk->word = &w->state;
	wk->clock = w->clock;
	wk->hook = w->hook;
	wk->hook_ctx = w->hook_ctx;
	resil__store32(&w->state, value);
}

/*
 * Whether c can wait: the call machine's caller gave a wake hook (its
 * invocation's); the blocking driver blocks through a clock that can wait
 * (or at least sleep, polling). A machine call without a hook could be
 * moved on only at its deadline: it never follows (it may lead).
 */
static int
can_follow(const callm *c, resil__wake_hook *hook, void **ctx)
{
	const resil_clock *ck = &c->p->clock;

	*hook = NULL;
	*ctx = NULL;
	if (c->coal_blk)
		return (ck->wait != NULL && ck->wake != NULL) ||
		    ck->sleep != NULL;
	if (c->inv == NULL || c->inv->wake == NULL)
		return 0;
	*hook = c->inv->wake;
	*ctx = c->inv->wake_ctx;
	return 1;
}

int
resil__coal_start(callm *c, tsrc *ts, resil_call_next *st)
{
	resil__coal *t = c->m->coal;
	const resil_args *args = c->args;
	resil__coal_ent *it;
	resil__wake_hook hook;
	void *hctx;
	uint64_t h, now;
	int may;

	c->coal = RESIL__COAL_NONE;
	if (args->data == NULL && args->len > 0)
		return 0; /* the stages below refuse it */
	may = can_follow(c, &hook, &hctx);
	/* Its own deadline runs from its start, as an attempt's: it times
	 * out when its wait passes the method's timeout. */
	now = c->timeout != 0 ? tnow(ts) : 0;
	h = coal_hash(args);
	resil__spin_lock(&t->lock);
	for (it = *bucket(t, h); it != NULL; it = it->next)
		if (it->hash == h && same_args(it->args, args))
			break;
	if (it == NULL) {
		lead(t, c, h);
		resil__spin_unlock(&t->lock);
		return 0;
	}
	if (!may) {
		resil__spin_unlock(&t->lock);
		return 0;
	}
	resil__waiter_init(&c->coal_w, c->coal_blk ? &c->p->clock : NULL, hook,
	    hctx);
	if (resil__waitq_push(&it->q, &c->coal_w, 0) != RESIL_OK) {
		/* The bound: a call of its own. */
		resil__spin_unlock(&t->lock);
		return 0;
	}
	c->coal_on = it;
	c->coal = RESIL__COAL_FOLLOWER;
	resil__spin_unlock(&t->lock);
	c->coal_until = c->timeout != 0
	    ? sat_add(sat_add(now, c->timeout), c->p->late_edge)
	    : UINT64_MAX;
	st->endpoint = NULL;
	next_is(st, RESIL_CALL_WAIT, 0, 0, c->coal_until);
	return 1;
}

/* The follower's result: the leader's, with its own provenance (no
 * attempt of its own; the message says it was coalesced). */
static resil_err
copy_result(resil_result *dst, const resil_result *src)
{
	static const char tag[] = "coalesced: ";
	resil_value v;
	resil_err err = resil_value_copy(&v, &src->value, NULL);
	size_t n = strlen(src->message), room;

	if (err != RESIL_OK)
		return err;
	*dst = *src;
	dst->value = v;
	dst->attempts = 0;
	/* "coalesced" then the leader's account, cut to fit. */
	memcpy(dst->message, tag, sizeof(tag) - 1);
	room = sizeof(dst->message) - sizeof(tag);
	if (n > room)
		n = room;
	memcpy(dst->message + sizeof(tag) - 1, src->message, n);
	dst->message[sizeof(tag) - 1 + n] = '\0';
	if (n == 0)
		dst->message[sizeof(tag) - 3] = '\0';
	return RESIL_OK;
}

/*
 * The leader c was cancelled: its first follower (if any) leads now, the
 * others queue on the new leader's entry (each told where it waits), in
 * their order. The new leader starts its call when it is stepped.
 */
static void
hand_over(callm *c)
{
	resil__coal *t = c->m->coal;
	resil__coal_ent *e = &c->coal_ent, *ne;
	resil__waiter *w, *x;
	resil__wakeup wk;
	callm *n;

	c->coal = RESIL__COAL_NONE;
	resil__spin_lock(&t->lock);
	unlink_ent(t, e);
	w = resil__waitq_first(&e->q, 0);
	if (w == NULL) {
		resil__spin_unlock(&t->lock);
		return;
	}
	(void)resil__waitq_remove(&e->q, w);
	n = of_waiter(w);
	ne = &n->coal_ent;
	ne->args = n->args;
	ne->hash = e->hash;
	resil__waitq_init(&ne->q, t->max_waiters, 0);
	while ((x = resil__waitq_first(&e->q, 0)) != NULL) {
		(void)resil__waitq_remove(&e->q, x);
		(void)resil__waitq_push(&ne->q, x, 0);
		of_waiter(x)->coal_on = ne;
	}
	ne->next = *bucket(t, ne->hash);
	*bucket(t, ne->hash) = ne;
	settle(w, RESIL__COAL_LEAD, &wk);
	resil__spin_unlock(&t->lock);
	resil__wakeup_fire(&wk);
}

void
resil__coal_finish(callm *c)
{
	resil__coal *t = c->m->coal;
	resil__coal_ent *e = &c->coal_ent;
	resil__waiter *w, *head = NULL, **tail = &head, *nx;
	resil__wakeup wk;

	if (c->magic != CALL_DONE) {
		hand_over(c);
		return;
	}
	c->coal = RESIL__COAL_NONE;
	/* Unlinked, nobody joins; the followers are detached from the queue
	 * (neither queued nor settled: one that leaves now waits for its
	 * copy) and served outside the lock, in their order. */
	resil__spin_lock(&t->lock);
	unlink_ent(t, e);
	while ((w = resil__waitq_first(&e->q, 0)) != NULL) {
		(void)resil__waitq_remove(&e->q, w);
		*tail = w;
		tail = &w->next;
	}
	resil__spin_unlock(&t->lock);
	for (w = head; w != NULL; w = nx) {
		callm *f = of_waiter(w);

		nx = w->next; /* before the settle: then f may be gone */
		settle(w,
		    copy_result(f->out, c->out) == RESIL_OK ? RESIL__COAL_SERVED
		                                            : RESIL__COAL_ALONE,
		    &wk);
		resil__wakeup_fire(&wk);
	}
}

/* The stage an answer copied from the leader is told to the listener
 * with (as the leader's was). */
static resil_stage
stage_of(const resil_result *r)
{
	if (r->source == RESIL_SOURCE_LIVE)
		return RESIL_STAGE_CALL;
	return r->source == RESIL_SOURCE_MOCK ? RESIL_STAGE_MOCK
	                                      : RESIL_STAGE_FALLBACK;
}

/* The follower's wait passed its deadline: a timeout of its call, which
 * made no attempt (nothing for a breaker to count), answered by the
 * fallback chain as any timeout, or propagated. */
static void
timed_out(callm *c, tsrc *ts, resil_call_next *st)
{
	resil_result *out = c->out;
	int propagated;

	c->real_err = RESIL_E_TIMEOUT;
	c->real_rc = 0;
	propagated = recover_failure(c, RESIL_E_TIMEOUT, 0);
	if (propagated) {
		uint64_t ms = c->timeout / RESIL_NS_PER_MS;

		if (c->timeout % RESIL_NS_PER_MS == 0)
			snprintf(out->message, sizeof(out->message),
			    "coalesced: timeout after %llu ms waiting for "
			    "the leader",
			    (unsigned long long)ms);
		else
			snprintf(out->message, sizeof(out->message),
			    "coalesced: timeout after %llu ns waiting for "
			    "the leader",
			    (unsigned long long)c->timeout);
	}
	conclude_with(c, RESIL_STAGE_FALLBACK, ts, st);
}

/* The follower's waiter was settled with s. */
static void
settled(callm *c, uint32_t s, tsrc *ts, resil_call_next *st)
{
	c->coal = RESIL__COAL_NONE;
	if (s == RESIL__COAL_SERVED) {
		conclude_with(c, stage_of(c->out), ts, st);
		return;
	}
	if (s == RESIL__COAL_LEAD)
		c->coal = RESIL__COAL_LEADER; /* its entry is linked */
	/* LEAD or ALONE: the call of its own starts now. */
	mlaunch(c, c->m, ts, st);
}

void
resil__coal_step(callm *c, tsrc *ts, resil_call_next *st)
{
	resil__coal *t = c->m->coal;
	uint32_t s = resil__waiter_state(&c->coal_w);

	st->endpoint = NULL;
	if (s == RESIL__W_WAITING) {
		if (tnow(ts) < c->coal_until) {
			next_is(st, RESIL_CALL_WAIT, 0, 0, c->coal_until);
			return;
		}
		resil__spin_lock(&t->lock);
		if (resil__waitq_remove(&c->coal_on->q, &c->coal_w)) {
			resil__spin_unlock(&t->lock);
			c->coal = RESIL__COAL_NONE;
			timed_out(c, ts, st);
			return;
		}
		resil__spin_unlock(&t->lock);
		s = resil__waiter_state(&c->coal_w);
		if (s == RESIL__W_WAITING) {
			/* Detached: its copy is being made; the wake-up comes
			 * right after. */
			next_is(st, RESIL_CALL_WAIT, 0, 0, UINT64_MAX);
			return;
		}
	}
	settled(c, s, ts, st);
}

void
resil__coal_block(callm *c, uint64_t until)
{
	(void)resil__waiter_wait(&c->coal_w, until);
}

void
resil__coal_cancel(callm *c)
{
	resil__coal *t = c->m->coal;
	uint32_t s;

	if (c->coal == RESIL__COAL_LEADER) {
		hand_over(c);
		return;
	}
	resil__spin_lock(&t->lock);
	if (resil__waitq_remove(&c->coal_on->q, &c->coal_w)) {
		resil__spin_unlock(&t->lock);
		c->coal = RESIL__COAL_NONE;
		return;
	}
	resil__spin_unlock(&t->lock);
	/* Detached: the leader is copying its answer (a short, bounded
	 * wait: the copies of the followers before it). */
	while ((s = resil__waiter_state(&c->coal_w)) == RESIL__W_WAITING)
		resil__stall();
	c->coal = RESIL__COAL_NONE;
	if (s == RESIL__COAL_SERVED)
		resil_value_free(&c->out->value);
	else if (s == RESIL__COAL_LEAD) {
		/* Handed the lead before it was stepped: on to the next. */
		c->coal = RESIL__COAL_LEADER;
		hand_over(c);
	}
}

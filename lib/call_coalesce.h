/*
 * Coalescing (issue 43, lib/call_coalesce.c): identical calls of a
 * method (same method, same argument bytes: the cache's key) in flight
 * at once share one attempt. The first is the leader and runs the call;
 * the others (followers, up to the method's coalesce bound) wait on the
 * leader's entry through the generic waiter queue (lib/waitq.h) and get
 * a copy of its result. It lives in the call machine, so both drivers
 * share it: a follower's machine answers WAIT (until its own deadline:
 * the method's timeout) and is woken through the invocation's hook (the
 * call machine's caller) or the clock's wait primitive (the blocking
 * driver, which blocks in lib/call_drive.c's loop). A cancelled leader
 * hands the call over to its first follower. Never installed.
 *
 * Every queue of a method's table is under the table's one spin lock:
 * a hand-over moves the waiters from one entry to another, and a
 * follower leaving (its deadline, a cancel) must find the entry it is
 * on. Copies of the answer are made outside the lock, the followers
 * detached first (a detached follower is neither queued nor settled).
 */
#ifndef RESIL_CALL_COALESCE_H
#define RESIL_CALL_COALESCE_H

#include <resil/call.h>
#include <resil/value.h>

#include "waitq.h"

#define RESIL__COAL_BUCKETS 64

/* A leader's entry: in the leader's call state while its call runs. */
typedef struct resil__coal_ent {
	struct resil__coal_ent *next;
	const resil_args *args; /* the leader's: valid while it runs */
	uint64_t hash;
	resil__waitq q; /* its followers (the queue's own lock unused) */
} resil__coal_ent;

/* A method's table of calls in flight (allocated with the method). */
typedef struct resil__coal {
	resil__spinlock lock;
	uint32_t max_waiters;
	resil__coal_ent *heads[RESIL__COAL_BUCKETS];
} resil__coal;

void resil__coal_init(resil__coal *t, uint32_t max_waiters);

/* A call's part in coalescing (callm.coal): none, the leader of the
 * entry in its state, a follower queued on another call's entry. */
enum { RESIL__COAL_NONE = 0, RESIL__COAL_LEADER = 1,
	RESIL__COAL_FOLLOWER = 2 };

/* What a follower's waiter is settled with. */
enum { RESIL__COAL_SERVED = 1, /* the leader's answer is in its out */
	RESIL__COAL_LEAD = 2,  /* the leader was cancelled: lead now */
	RESIL__COAL_ALONE = 3 }; /* no memory for the copy: call alone */

struct callm;
struct tsrc;

/* The machine's start of a coalescing method (mstart(), after the mock
 * stage and the read-through): 1 when the call follows (*st is its
 * WAIT), 0 when it goes on (the leader, or on its own: c->coal says). */
int resil__coal_start(
    struct callm *c, struct tsrc *ts, resil_call_next *st);

/* The step of a follower (c->coal FOLLOWER): WAIT still; its deadline
 * passed (RESIL_E_TIMEOUT through the fallback chain); the leader's
 * answer (DONE); or the lead handed over (the call's first attempt). */
void resil__coal_step(struct callm *c, struct tsrc *ts, resil_call_next *st);

/* The blocking driver's wait of a follower: until its waiter is settled
 * or the clock reads until. */
void resil__coal_block(struct callm *c, uint64_t until);

/* A leader's call is over (c->coal LEADER; *c->out its answer when it is
 * DONE): its followers get a copy each, or (cancelled) the first of them
 * the lead. c->coal is NONE after. */
void resil__coal_finish(struct callm *c);

/* resil_call_cancel() of a call with c->coal set: a follower leaves its
 * queue (a copy already made for it is freed), a leader hands over. */
void resil__coal_cancel(struct callm *c);

#endif /* RESIL_CALL_COALESCE_H */

/*
 * Coalescing (issue 43, lib/call_coalesce.c): identical calls of a
 * method (same method, same argument bytes: the cache's key) in flight
 * at once share one attempt. The first is the leader and runs the call;
 * the others (followers, up to the method's coalesce bound) wait on the
 * leader's entry through the generic waiter queue (lib/waitq.h), woken
 * through the clock's wait primitive, and get a copy of its result.
 * Never installed.
 */
#ifndef RESIL_CALL_COALESCE_H
#define RESIL_CALL_COALESCE_H

#include <resil/value.h>

#include "waitq.h"

#define RESIL__COAL_BUCKETS 64

/* A leader's entry: in the leader's frame while its call runs. */
typedef struct resil__coal_ent {
	struct resil__coal_ent *next;
	const resil_args *args; /* the leader's: valid while it runs */
	uint64_t hash;
	resil__waitq q; /* its followers */
} resil__coal_ent;

/* A method's table of calls in flight (allocated with the method). */
typedef struct resil__coal {
	resil__spinlock lock;
	uint32_t max_waiters;
	resil__coal_ent *heads[RESIL__COAL_BUCKETS];
} resil__coal;

void resil__coal_init(resil__coal *t, uint32_t max_waiters);

enum { RESIL__COAL_ALONE = 0, RESIL__COAL_LEADER = 1,
	RESIL__COAL_FOLLOWED = 2 };

/* Join the call of args: LEADER (e is linked: run the call, then
 * resil__coal_done), FOLLOWED (*out is the leader's answer, copied),
 * ALONE (the bound is full, or no memory for the copy: run the call on
 * its own, e unused). */
int resil__coal_join(resil__coal *t, const resil_clock *clock,
    const resil_args *args, resil__coal_ent *e, resil_result *out);

/* The leader's call ended with *out: unlink e, copy *out to every
 * follower and wake it. */
void resil__coal_done(
    resil__coal *t, resil__coal_ent *e, const resil_result *out);

#endif /* RESIL_CALL_COALESCE_H */

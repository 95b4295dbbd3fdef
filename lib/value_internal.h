/*
 * resil_result_init() inline, for the call paths (lib/call*.c,
 * lib/fallback.c): an exported function is not inlined in a shared
 * library, and a result is initialised on every call. Writes the fields a
 * result must hold (scalars and the first byte of each string), never
 * the buffers. Never installed.
 */
#ifndef RESIL_VALUE_INTERNAL_H
#define RESIL_VALUE_INTERNAL_H

#include <resil/value.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* resil__result_clear() but for the value, which the caller set. */
static inline void
resil__result_clear_but_value(resil_result *r)
{
	r->err = RESIL_E_UNAVAILABLE;
	r->source = RESIL_SOURCE_UNAVAILABLE;
	r->rc = 0;
	r->attempts = 0;
	r->age = 0;
	r->cause = RESIL_OK;
	r->cause_rc = 0;
	r->breaker_state = -1;
	r->last_failure = RESIL_OK;
	r->last_failure_rc = 0;
	r->error_name = NULL;
	r->message[0] = '\0';
	r->endpoint[0] = '\0';
	r->zone[0] = '\0';
}

/* An empty result (resil_result_init()): a null value. */
static inline void
resil__result_clear(resil_result *r)
{
	r->value.type = RESIL_VALUE_NULL;
	r->value.u.s.ptr = NULL;
	r->value.u.s.len = 0;
	resil__result_clear_but_value(r);
}

/* A live answer: every field but value (set by the call) and rc (set
 * from its code), written once, as resil__result_clear() and the answer
 * would together. */
static inline void
resil__result_answered(resil_result *r, uint32_t attempts, int bstate)
{
	r->err = RESIL_OK;
	r->source = RESIL_SOURCE_LIVE;
	r->attempts = attempts;
	/* age to error_name are zeros (RESIL_OK is 0, NULL all zero bits
	 * on every platform resil builds for): one range, a few wide
	 * stores; breaker_state over it. */
	memset(&r->age, 0,
	    offsetof(resil_result, message) - offsetof(resil_result, age));
	r->breaker_state = bstate;
	r->message[0] = '\0';
	r->endpoint[0] = '\0';
	r->zone[0] = '\0';
}

/*
 * The alloc hook of a value whose bytes a result cache shares with the
 * value (lib/fallback_cache.c): it marks such a value for
 * resil_result_free(), whose ctx is the entry's reference count, dropped
 * in place; when that was the last reference, free is called with size
 * RESIL__SERVED_LAST (the count already 0: the entry is freed). Nothing
 * ever allocates through it (it answers NULL). Here, not in the cache's
 * file, so that value.c names nothing of the cache's.
 */
void *resil__value_served_alloc(size_t size, void *ctx);
#define RESIL__SERVED_LAST SIZE_MAX

#endif /* RESIL_VALUE_INTERNAL_H */

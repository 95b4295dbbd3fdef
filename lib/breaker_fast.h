/*
 * Private: the breaker's two fast paths, for a caller that keeps a
 * breaker's handles (lib/fleet.c, the pipeline's drivers) and inlines
 * them: the same first tests resil_breaker_acquire() and
 * resil_breaker_record() make, without their argument checks. Each says
 * true when it has done the whole call, false when the caller must go to
 * the public entry, which decides it in full. Needs nothing of the
 * breaker's layout but its state word, which is the first field of its
 * state (struct bstate, lib/breaker_internal.h). Never installed.
 */
#ifndef RESIL_BREAKER_FAST_H
#define RESIL_BREAKER_FAST_H

#include <resil/breaker.h>

#include <stdbool.h>
#include <stdint.h>

#include "atomic.h"
#include "internal.h"

#define W_STATE_MASK UINT64_C(0x7)
#define W_TRANSIT UINT64_C(0x8)

/* A permit's flags (the rest in breaker_internal.h). */
#define PERMIT_VALID 0x1u

struct bstate;

/* A word tested where it lies (x86-64 with the compiler's flag outputs,
 * no sanitizer): one compare or test of memory that sets the flags the
 * branch reads, where resil__load64() and a test take a register and an
 * instruction more. The same access as resil__load64() there (one
 * aligned load, a compiler barrier); a sanitizer's build, which sees no
 * asm, loads. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RESIL__NO_MEM_TEST 1
#endif
#endif
#if defined(__x86_64__) && defined(__GCC_ASM_FLAG_OUTPUTS__) && \
    !defined(RESIL__TSAN) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(RESIL__NO_MEM_TEST)
#define RESIL__MEM_TEST 1
#endif

/* *p == 0. */
static inline bool
resil__zero64(const uint64_t *p)
{
#if defined(RESIL__MEM_TEST)
	bool z;

	__asm__ __volatile__("cmpq $0, %1"
	                     : "=@ccz"(z)
	                     : "m"(*p)
	                     : "memory");
	return z;
#else
	return resil__load64(p) == 0;
#endif
}

/* This thread's lifetime-success counter, as a byte offset into struct
 * bstate, plus 1 (0: not computed yet). The stripe index is the thread's,
 * the layout every breaker's, so one offset serves them all: the record
 * fast path adds to it without computing the stripe. */
extern RESIL__TLS uintptr_t resil__breaker_success_at;

/* What the fast paths read of one breaker, taken once
 * (resil__breaker_fast_refs()): the word acquire tests (the state word,
 * or one never CLOSED where timing is needed), the state, and the word a
 * success tests (0: it changes nothing; never 0 for a breaker in a
 * shared region, whose counters no thread owns, so that every success
 * of one goes to resil_breaker_record()). Valid while the breaker
 * lives. */
typedef struct resil__bfast {
	const uint64_t *acq_word;
	struct bstate *st;
	const uint64_t *streak;
	/* For a caller that measures each call's duration itself (a timed
	 * call): the state word (also for a breaker with slow-call timing,
	 * whose acq_word never grants), the streak word its success tests,
	 * and the slow-call threshold (UINT64_MAX: none). */
	const uint64_t *word;
	const uint64_t *tstreak;
	uint64_t slow_ns;
} resil__bfast;

void resil__breaker_fast_refs(const resil_breaker *b, resil__bfast *f);

/* An untimed CLOSED grant: the permit holds the word it was granted under
 * (see PERMIT_EPF in breaker_internal.h). */
static inline bool
resil__breaker_grant_fast(const uint64_t *acq_word, resil_permit *permit)
{
	uint64_t w = resil__load64(acq_word);

	if (RESIL__LIKELY(
	        (w & (W_STATE_MASK | W_TRANSIT)) == RESIL_BREAKER_CLOSED)) {
		permit->start = w;
		permit->flags = PERMIT_VALID;
		return true;
	}
	return false;
}

/* A success that changes nothing (see resil_breaker_record()): the
 * permit's own CLOSED episode, no transition in progress, nothing the
 * success would end; it counts on this thread's lifetime counter,
 * unlocked when own (the thread owns its stripe, lib/internal.h; st is
 * then local, resil__breaker_fast_refs()). */
static inline bool
resil__breaker_success_fast(struct bstate *st, const uint64_t *streak,
    resil_permit *permit, bool own)
{
	/* The state word is struct bstate's first field. */
	uint64_t w = resil__load64((const uint64_t *)(const void *)st);
	uintptr_t off;

	if (RESIL__LIKELY(permit->flags == PERMIT_VALID &&
	        permit->start == w && resil__zero64(streak))) {
		off = resil__breaker_success_at;
		if (RESIL__UNLIKELY(off == 0))
			return false;
		permit->flags = 0;
		resil__count_inc64(
		    (uint64_t *)(void *)((char *)st + off - 1), own);
		return true;
	}
	return false;
}

/* resil__breaker_success_fast() counting at off, the byte offset into
 * struct bstate of a lifetime-success counter of a stripe no thread owns
 * (so a locked add, from any thread): for a caller that keeps one
 * (lib/keyed.c, in its thread's hazard record) and so reads no TLS. */
static inline bool
resil__breaker_success_fast_at(struct bstate *st, const uint64_t *streak,
    resil_permit *permit, uintptr_t off)
{
	uint64_t w = resil__load64((const uint64_t *)(const void *)st);

	if (RESIL__LIKELY(permit->flags == PERMIT_VALID &&
	        permit->start == w && resil__zero64(streak))) {
		permit->flags = 0;
		resil__inc64((uint64_t *)(void *)((char *)st + off));
		return true;
	}
	return false;
}

/* The same test for a permit known to be a fast grant of the word
 * start (resil__breaker_grant_fast() gave it): the caller spends the
 * permit itself. */
static inline bool
resil__breaker_granted_success_fast(
    struct bstate *st, const uint64_t *streak, uint64_t start)
{
	uintptr_t off;

	if (RESIL__LIKELY(
	        start == resil__load64((const uint64_t *)(const void *)st) &&
	        resil__load64(streak) == 0)) {
		off = resil__breaker_success_at;
		if (RESIL__UNLIKELY(off == 0))
			return false;
		resil__inc64((uint64_t *)(void *)((char *)st + off - 1));
		return true;
	}
	return false;
}

/* A success of duration dur (measured by the caller) under a permit that
 * resil__breaker_grant_fast(f->word, ...) granted under the word start:
 * not slow, the permit's own CLOSED episode, nothing the success would
 * end (the caller spends the permit itself). Else the caller records it
 * with resil_breaker_record_duration(). */
static inline bool
resil__breaker_timed_success_fast(
    const resil__bfast *f, uint64_t start, uint64_t dur)
{
	uintptr_t off;

	if (RESIL__LIKELY(dur <= f->slow_ns &&
	        start == resil__load64((const uint64_t *)(const void *)f->st) &&
	        resil__load64(f->tstreak) == 0)) {
		off = resil__breaker_success_at;
		if (RESIL__UNLIKELY(off == 0))
			return false;
		resil__inc64((uint64_t *)(void *)((char *)f->st + off - 1));
		return true;
	}
	return false;
}

#endif /* RESIL_BREAKER_FAST_H */

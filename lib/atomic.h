/*
 * Atomic primitives for resil, over Concurrency Kit's ck_pr.
 *
 * This is the only file that names ck_pr. ThreadSanitizer cannot see ck's
 * inline assembly and treats its volatile loads as plain accesses, so a
 * TSan build (where GCC and Clang define __SANITIZE_THREAD__) maps the same
 * names onto the compiler's __atomic builtins, which TSan understands.
 * Every operation here is sequentially consistent or stronger on x86; the
 * names say which ordering the caller relies on.
 */
#ifndef RESIL_ATOMIC_H
#define RESIL_ATOMIC_H

#include <stdbool.h>
#include <stdint.h>

_Static_assert(sizeof(void *) == sizeof(uint64_t),
    "resil's atomics assume 64-bit pointers");

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RESIL__TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RESIL__TSAN 1
#endif

#if defined(RESIL__TSAN)

static inline uint64_t
resil__load64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void
resil__store64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline bool
resil__cas64(uint64_t *p, uint64_t expect, uint64_t desired)
{
	return __atomic_compare_exchange_n(
	    p, &expect, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static inline uint64_t
resil__faa64(uint64_t *p, uint64_t d)
{
	return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST);
}

/* Add one, the old value not needed (x86: one `lock inc`). */
static inline void
resil__inc64(uint64_t *p)
{
	__atomic_fetch_add(p, 1, __ATOMIC_SEQ_CST);
}

/* Take one, the old value not needed (x86: one `lock dec`). */
static inline void
resil__dec64(uint64_t *p)
{
	__atomic_fetch_sub(p, 1, __ATOMIC_SEQ_CST);
}

static inline uint64_t
resil__fas64(uint64_t *p, uint64_t v)
{
	return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}

static inline uint8_t
resil__fas8(uint8_t *p, uint8_t v)
{
	return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}

static inline uint8_t
resil__load8(const uint8_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void
resil__store8(uint8_t *p, uint8_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline void
resil__fence(void)
{
	/* GCC's TSan refuses standalone fences (-Wtsan). resil uses the
	 * fence only to publish a new object before handing it to other
	 * threads, which pthread_create or the caller's own sync already
	 * orders for TSan. */
}

static inline void
resil__stall(void)
{
}

#else /* !RESIL__TSAN */

#include <ck_pr.h>

static inline uint64_t
resil__load64(const uint64_t *p)
{
	uint64_t v = ck_pr_load_64(p);

	ck_pr_fence_acquire();
	return v;
}

static inline void
resil__store64(uint64_t *p, uint64_t v)
{
	ck_pr_fence_release();
	ck_pr_store_64(p, v);
}

static inline bool
resil__cas64(uint64_t *p, uint64_t expect, uint64_t desired)
{
	return ck_pr_cas_64(p, expect, desired);
}

static inline uint64_t
resil__faa64(uint64_t *p, uint64_t d)
{
	return ck_pr_faa_64(p, d);
}

static inline void
resil__inc64(uint64_t *p)
{
	ck_pr_inc_64(p);
}

static inline void
resil__dec64(uint64_t *p)
{
	ck_pr_dec_64(p);
}

static inline uint64_t
resil__fas64(uint64_t *p, uint64_t v)
{
	return ck_pr_fas_64(p, v);
}

static inline uint8_t
resil__fas8(uint8_t *p, uint8_t v)
{
	return ck_pr_fas_8(p, v);
}

static inline uint8_t
resil__load8(const uint8_t *p)
{
	uint8_t v = ck_pr_load_8(p);

	ck_pr_fence_acquire();
	return v;
}

static inline void
resil__store8(uint8_t *p, uint8_t v)
{
	ck_pr_fence_release();
	ck_pr_store_8(p, v);
}

static inline void
resil__fence(void)
{
	ck_pr_fence_memory();
}

static inline void
resil__stall(void)
{
	ck_pr_stall();
}

#endif /* RESIL__TSAN */

/*
 * A spin lock, for short critical sections such as the cache's shards:
 * ck_spinlock_fas normally; under TSan, which cannot see ck's volatile
 * loads as synchronisation, a test-and-test-and-set on __atomic builtins.
 */
#if defined(RESIL__TSAN)

typedef struct resil__spinlock {
	unsigned char held;
} resil__spinlock;

static inline void
resil__spin_init(resil__spinlock *l)
{
	__atomic_store_n(&l->held, 0, __ATOMIC_RELEASE);
}

static inline void
resil__spin_lock(resil__spinlock *l)
{
	while (__atomic_exchange_n(&l->held, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&l->held, __ATOMIC_RELAXED))
			;
}

static inline void
resil__spin_unlock(resil__spinlock *l)
{
	__atomic_store_n(&l->held, 0, __ATOMIC_RELEASE);
}

#else /* !RESIL__TSAN */

#include <ck_spinlock.h>

typedef ck_spinlock_t resil__spinlock;

static inline void
resil__spin_init(resil__spinlock *l)
{
	ck_spinlock_init(l);
}

static inline void
resil__spin_lock(resil__spinlock *l)
{
	ck_spinlock_lock(l);
}

static inline void
resil__spin_unlock(resil__spinlock *l)
{
	ck_spinlock_unlock(l);
}

#endif /* RESIL__TSAN */

/*
 * A load ordered after the caller's preceding read-modify-write, for
 * Dekker-style handshakes ("I announce, then look at yours"): both sides
 * do a sequentially consistent RMW, then this load. x86's locked RMW is
 * already a full fence; elsewhere ck's RMWs may be relaxed, so a full
 * fence goes first.
 */
static inline uint64_t
resil__load64_after_rmw(const uint64_t *p)
{
#if defined(RESIL__TSAN)
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
#elif defined(__x86_64__) || defined(__i386__)
	return resil__load64(p);
#else
	ck_pr_fence_memory();
	return resil__load64(p);
#endif
}

/*
 * A counter that one thread alone writes (a stripe it owns,
 * lib/internal.h): add or take one without a locked instruction. Other
 * threads only load it, and see the old value or the new one. The take
 * is a release (what the thread read before it stays before it); both
 * are compiler barriers. On x86 each is one unlocked instruction.
 */
static inline void
resil__own_inc64(uint64_t *p)
{
#if !defined(RESIL__TSAN) && defined(__x86_64__)
	__asm__ volatile("addq $1, %0" : "+m"(*p) : : "memory", "cc");
#else
	__atomic_store_n(
	    p, __atomic_load_n(p, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

static inline void
resil__own_dec64(uint64_t *p)
{
#if !defined(RESIL__TSAN) && defined(__x86_64__)
	__asm__ volatile("subq $1, %0" : "+m"(*p) : : "memory", "cc");
#else
	__atomic_store_n(
	    p, __atomic_load_n(p, __ATOMIC_RELAXED) - 1, __ATOMIC_RELEASE);
#endif
}

/* Add or take one: unlocked when own (the caller alone writes *p). */
static inline void
resil__count_inc64(uint64_t *p, bool own)
{
	if (own)
		resil__own_inc64(p);
	else
		resil__inc64(p);
}

static inline void
resil__count_dec64(uint64_t *p, bool own)
{
	if (own)
		resil__own_dec64(p);
	else
		resil__dec64(p);
}

/* A pointer published with release and read with acquire semantics. */
static inline void *
resil__loadptr(void *const *p)
{
	return (void *)(uintptr_t)resil__load64(
	    (const uint64_t *)(const void *)p);
}

static inline void
resil__storeptr(void **p, void *v)
{
	resil__store64((uint64_t *)(void *)p, (uint64_t)(uintptr_t)v);
}

/* Add d to *p if the result stays <= max; returns false (and changes
 * nothing) otherwise. */
static inline bool
resil__add_bounded64(uint64_t *p, uint64_t d, uint64_t max)
{
	uint64_t cur = resil__load64(p);

	for (;;) {
		if (cur > max || d > max - cur)
			return false;
		if (resil__cas64(p, cur, cur + d))
			return true;
		cur = resil__load64(p);
	}
}

/*
 * 32-bit words that threads wait on (lib/waitq.c, the clocks' wait and
 * wake: a futex is 32 bits): sequentially consistent loads, stores and
 * adds (a store is an exchange, a full barrier, as a Dekker handshake
 * with the waker needs).
 */
#if defined(RESIL__TSAN)
static inline uint32_t
resil__load32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static inline void
resil__store32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

static inline uint32_t
resil__faa32(uint32_t *p, uint32_t d)
{
	return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST);
}
#else
static inline uint32_t
resil__load32(const uint32_t *p)
{
	uint32_t v;

	ck_pr_fence_memory();
	v = ck_pr_load_32(p);
	ck_pr_fence_acquire();
	return v;
}

static inline void
resil__store32(uint32_t *p, uint32_t v)
{
	(void)ck_pr_fas_32(p, v);
}

static inline uint32_t
resil__faa32(uint32_t *p, uint32_t d)
{
	return ck_pr_faa_32(p, d);
}
#endif

#endif /* RESIL_ATOMIC_H */

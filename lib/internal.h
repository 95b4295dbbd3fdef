/*
 * Private helpers shared by resil's sources (lib/internal.c): allocation
 * through the hook, strings, diagnostics, thread stripes, the backoff of a
 * wait, and uthash configured to allocate through the hook. The bottom of
 * the house: it names nothing of the modules above it. Never installed;
 * never included by a public header.
 */
#ifndef RESIL_INTERNAL_H
#define RESIL_INTERNAL_H

#include <resil/resil.h>

#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "atomic.h"

#if defined(__GNUC__)
#define RESIL__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define RESIL__LIKELY(x) __builtin_expect(!!(x), 1)
#define RESIL__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RESIL__PRINTF(f, a)
#define RESIL__LIKELY(x) (x)
#define RESIL__UNLIKELY(x) (x)
#endif

#define RESIL__CACHELINE 64

/* Thread-local storage without a call to __tls_get_addr on every access
 * (the default model for position-independent code). */
#if defined(__GNUC__)
#define RESIL__TLS _Thread_local __attribute__((tls_model("initial-exec")))
#else
#define RESIL__TLS _Thread_local
#endif

/* The allocator to use for a and its free counterpart; a may be NULL. */
const resil_allocator *resil__allocator(const resil_allocator *a);
void *resil__alloc(const resil_allocator *a, size_t size);
void *resil__calloc(const resil_allocator *a, size_t size);
void resil__free(const resil_allocator *a, void *ptr, size_t size);

/* RESIL_OK when a caller's config struct size got is the one this library
 * knows (want: the first released layout is the only one so far);
 * otherwise RESIL_E_INVAL with "PREFIX.size: GOT is not a known TYPE
 * size (expected WANT; use TYPE_init())". */
resil_err resil__check_size(resil_diag *diag, const char *prefix,
    const char *type, size_t got, size_t want);

/* The message in diag (if any and err is not RESIL_OK) prefixed with
 * "what.": "retry.max_attempts: ..." becomes "getStock.retry.max_attempts:
 * ...". Returns err. */
resil_err resil__diag_prefix(
    resil_diag *diag, resil_err err, const char *what);

/* A NUL-terminated copy of the n bytes at s (resil__strndup) or of the
 * string s (resil__strdup; NULL gives NULL) through a, and its release
 * (NULL is a no-op). The size given to free is strlen + 1. */
char *resil__strndup(const resil_allocator *a, const char *s, size_t n);
char *resil__strdup(const resil_allocator *a, const char *s);
void resil__strfree(const resil_allocator *a, char *s);

/* Put "origin:line: " before the message already in diag (a text's
 * reader locating an error); returns err. Nothing when diag or origin is
 * NULL or err is RESIL_OK. */
resil_err resil__diag_at(
    resil_diag *diag, resil_err err, const char *origin, unsigned line);

/* As resil__diagf, with a va_list. */
resil_err resil__vdiagf(
    resil_diag *diag, resil_err err, const char *fmt, va_list ap);

/* Write a message into diag (if not NULL) and return err. */
resil_err resil__diagf(resil_diag *diag, resil_err err, const char *fmt, ...)
    RESIL__PRINTF(3, 4);

/* SplitMix64's finaliser: resil_rng's output, the view's identity, the
 * balancers' hashes. */
static inline uint64_t
resil__mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Euclid's gcd (0 with 0): the rate limiters' scale, local (lib/limit.c)
 * and on the fleet (lib/fleet.c, lib/fleet_keyed.c). */
static inline uint64_t
resil__gcd64(uint64_t a, uint64_t b)
{
	while (b != 0) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* FNV-1a, 64 bits, over n bytes from h (RESIL__FNV0 to start): the hashes
 * that must be the same in every build and process (a shared region's
 * table, a snapshot's check, the hash balancer's picks) and the short
 * ones off the hot paths. */
#define RESIL__FNV0 UINT64_C(0xcbf29ce484222325)

static inline uint64_t
resil__fnv1a64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

/* resil_rng's step: its state is a counter moved by this much a draw. */
#define RESIL__RNG_STEP UINT64_C(0x9e3779b97f4a7c15)

/*
 * A block of a resil_rng's sequence for one user at a time (a candidate
 * set): one fetch-and-add takes the next n draws, which the user then
 * makes with no atomic (resil__rng_block_draw()) while *next != *end.
 * Given back when unused (resil__rng_give_back()): if no draw was taken
 * from rng since, its state steps back, so a single thread's draws are
 * the sequence rng alone would have given.
 */
struct resil_rng;
void resil__rng_reserve(
    struct resil_rng *rng, uint64_t n, uint64_t *next, uint64_t *end);
void resil__rng_give_back(struct resil_rng *rng, uint64_t next, uint64_t end);

static inline uint64_t
resil__rng_block_draw(uint64_t *next)
{
	*next += RESIL__RNG_STEP;
	return resil__mix64(*next);
}

/*
 * A small per-thread index in [0, n): threads get distinct indexes round
 * robin, so striped counters rarely share a cache line. n is a power of 2.
 * The slow path assigns the index on a thread's first call.
 *
 * Counters striped RESIL__STRIPES ways may be owned: the first
 * RESIL__STRIPES_OWNED threads that ask each get one of the stripes 4..7
 * to themselves until they exit (RESIL__STRIPE_OWNED in their word), and
 * may write its counters with resil__own_inc64()/resil__own_dec64()
 * (lib/atomic.h), no locked instruction; every other thread shares
 * stripes 0..3 and writes them with locked ones. So no thread ever
 * writes a counter of a stripe another thread owns: a count that can be
 * finished on another thread (a call reported elsewhere) is finished on
 * the finishing thread's own stripe, and a sum over the stripes stays
 * exact. RESIL__STRIPE_FENCED: owned, and a reclaimer waiting for counts
 * on the stripes fences every thread first (resil__stripes_fence()), so
 * an owner may count a hold with no fence of its own.
 *
 * The word: bits 0-2 the index among RESIL__STRIPES, 3-28 a ticket that
 * spreads wider arrays, then the flags; 0 before the first call (read
 * as stripe 0, a shared one).
 */
#define RESIL__STRIPES 8u
#define RESIL__STRIPES_OWNED 4u
#define RESIL__STRIPE_VALID (1u << 29)
#define RESIL__STRIPE_OWNED (1u << 31)
#define RESIL__STRIPE_FENCED (1u << 30)
/* The first owned stripe: 4..7 are. */
#define RESIL__STRIPE_OWN0 (RESIL__STRIPES - RESIL__STRIPES_OWNED)
_Static_assert(RESIL__STRIPES_OWNED < RESIL__STRIPES,
    "stripe 0 is never owned (the stripe of a thread without one)");
extern RESIL__TLS unsigned resil__stripe_mine;
unsigned resil__thread_stripe_slow(unsigned n);

/* The same without the slow path: false on a thread's first call. */
static inline int
resil__thread_stripe_known(unsigned n, unsigned *out)
{
	unsigned s = resil__stripe_mine;

	*out = s & (n - 1);
	return s != 0;
}

static inline unsigned
resil__thread_stripe(unsigned n)
{
	unsigned s;

	if (RESIL__LIKELY(resil__thread_stripe_known(n, &s)))
		return s;
	return resil__thread_stripe_slow(n);
}

/* This thread's stripe of a counter striped RESIL__STRIPES ways, stride
 * bytes apart from base; *own: the thread owns it (unlocked counts). */
static inline uint64_t *
resil__stripe_at(void *base, size_t stride, bool *own)
{
	unsigned w = resil__stripe_mine;

	*own = (w & RESIL__STRIPE_OWNED) != 0;
	return (uint64_t *)(void *)((char *)base +
	    (size_t)(w & (RESIL__STRIPES - 1)) * stride);
}

/* Add one to it, or take one. */
static inline void
resil__stripe_inc(void *base, size_t stride)
{
	bool own;
	uint64_t *c = resil__stripe_at(base, stride, &own);

	resil__count_inc64(c, own);
}

static inline void
resil__stripe_dec(void *base, size_t stride)
{
	bool own;
	uint64_t *c = resil__stripe_at(base, stride, &own);

	resil__count_dec64(c, own);
}

/* Before reading counts that owners took with no fence (a hold on
 * settings being reclaimed): make every thread of the process pass a
 * full fence (Linux membarrier; nothing to do when no thread is
 * RESIL__STRIPE_FENCED). False when the fence failed: the caller must
 * treat the counts as unknown, not yet zero. */
bool resil__stripes_fence(void);

/* For tests, before any thread has its stripe: owners count holds with a
 * locked add, as where membarrier is not available. */
void resil__stripes_unfenced(void);

/*
 * One round of a wait for another thread: a pause, and after 1024 of them
 * a yield, since on an oversubscribed machine the thread waited for may be
 * preempted and need this CPU. For rare, contended paths only.
 */
void resil__backoff(unsigned *spins);

/*
 * A message built in a bounded buffer, truncated exactly as snprintf
 * truncates (the longest prefix that fits, always NUL-terminated), without
 * the cost of the printf machinery on the answer path. Truncation of a
 * human-readable message is harmless.
 */
typedef struct resil__msg {
	char *buf;
	size_t size; /* > 0 */
	size_t len;  /* < size */
} resil__msg;

static inline void
resil__msg_start(resil__msg *o, char *buf, size_t size)
{
	o->buf = buf;
	o->size = size;
	o->len = 0;
	buf[0] = '\0';
}

/* Two copies so that a literal that fits, the common case, is a copy of
 * a size known at compile time (a few moves) once this is inlined. */
static inline void
resil__msg_put(resil__msg *o, const char *s, size_t n)
{
	size_t room = o->size - 1 - o->len;

	if (n <= room) {
		memcpy(o->buf + o->len, s, n);
		o->len += n;
	} else {
		memcpy(o->buf + o->len, s, room);
		o->len += room;
	}
	o->buf[o->len] = '\0';
}

/* A string literal, its length known at compile time. */
#define RESIL__MSG_LIT(o, lit) resil__msg_put((o), (lit), sizeof(lit) - 1)

static inline void
resil__msg_str(resil__msg *o, const char *s)
{
	resil__msg_put(o, s, strlen(s));
}

/* As %d. */
static inline void
resil__msg_int(resil__msg *o, int v)
{
	char tmp[16];
	size_t i = sizeof(tmp), j, n, room;
	unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;

	do {
		tmp[--i] = (char)('0' + u % 10u);
		u /= 10u;
	} while (u != 0);
	if (v < 0)
		tmp[--i] = '-';
	/* A byte loop, not resil__msg_put(): inlined, GCC cannot see that
	 * a truncated copy out of tmp stays inside it (-Warray-bounds). */
	n = sizeof(tmp) - i;
	room = o->size - 1 - o->len;
	if (n > room)
		n = room;
	for (j = 0; j < n; j++)
		o->buf[o->len + j] = tmp[i + j];
	o->len += n;
	o->buf[o->len] = '\0';
}

/*
 * An output cursor with snprintf's contract, for printers that return the
 * length of the whole text: it stores what fits (keeping room for the
 * NUL) and counts everything; resil__out_finish() terminates and returns
 * the full length. size may be 0 (buf then untouched).
 */
typedef struct resil__out {
	char *buf;
	size_t size;
	size_t len;
} resil__out;

static inline void
resil__out_start(resil__out *o, char *buf, size_t size)
{
	o->buf = buf;
	o->size = buf == NULL ? 0 : size;
	o->len = 0;
}

static inline void
resil__out_c(resil__out *o, char c)
{
	if (o->size > 0 && o->len + 1 < o->size)
		o->buf[o->len] = c;
	o->len++;
}

static inline void
resil__out_s(resil__out *o, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		resil__out_c(o, s[i]);
}

static inline void
resil__out_z(resil__out *o, const char *s)
{
	resil__out_s(o, s, strlen(s));
}

static inline size_t
resil__out_finish(resil__out *o)
{
	if (o->size > 0)
		o->buf[o->len < o->size ? o->len : o->size - 1] = '\0';
	return o->len;
}

/*
 * uthash through the allocator hook. A function that touches a table
 * declares `const resil_allocator *resil__a = ...;` first.
 */
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) resil__alloc(resil__a, (sz))
#define uthash_free(ptr, sz) resil__free(resil__a, (ptr), (sz))

#endif /* RESIL_INTERNAL_H */

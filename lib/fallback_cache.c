/*
 * resil fallback: the result cache (sharded, second-chance eviction,
 * age-limited), and the chain's record of a success into its caches (the
 * chain itself is lib/fallback.c).
 *
 * The cache's read path takes no lock and writes nothing another thread
 * writes (docs/fallback.md, "How a get reads without a lock"): per shard
 * an open-addressing table of entry pointers (linear probing,
 * tombstones), published with release stores, entries immutable once
 * published but for their reference bit, stamp and liveness; CLOCK
 * eviction (a hit sets a bit, where LRU would move the entry); readers
 * announced in their thread's stripe under the shard generation's parity,
 * writers retiring what they unlink and freeing it in batches of 16 once
 * no reader of the old parity is left (retire()); a hit's value holds a
 * reference on its entry (entry_unref()). The structures are in
 * lib/fallback_cache_internal.h, the cache's making in
 * lib/fallback_cache_new.c.
 *
 * Why not ck_hs with ck_epoch: its probes are inline assembly that
 * ThreadSanitizer cannot see, it grows through its own allocator
 * protocol, and its epoch adds a domain-wide writer lock.
 */
#include "internal.h"

#include <resil/fallback.h>

#include <stddef.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "atomic.h"
#include "fallback_cache_internal.h"
#include "fallback_internal.h"
#include "value_internal.h"

/* ---- The cache ---- */

/* Removed keys leave this in their slot, so probes go on past it. */
static char tomb_;
#define TOMB ((entry *)(void *)&tomb_)

/* The cache's clock, read without resil_clock_now()'s checks (the clock
 * is checked once, in resil_cache_new()). */
static inline uint64_t
cache_now(const resil_cache *c)
{
	return c->clock.now(c->clock.ctx);
}

/* cache_now() without a call when the clock keeps its time in a word
 * (resil_clock.now_word): the leaf path of the public put. */
static FB_INLINE uint64_t
clock_word(const resil_cache *c)
{
	return resil__load64(c->now_word);
}

/* Bytes p[0..n) as two words (unaligned loads, none past n), for
 * 1 <= n <= 16: the first and the last 8 (or 4) bytes, which overlap
 * when n < 16; with n, they determine the bytes. No loop: keys and
 * small values are a word or two. */
static FB_INLINE void
load_small(const unsigned char *p, size_t n, uint64_t *a, uint64_t *b)
{
	if (n >= 8) {
		memcpy(a, p, 8);
		memcpy(b, p + n - 8, 8);
	} else if (n >= 4) {
		uint32_t x, y;

		memcpy(&x, p, 4);
		memcpy(&y, p + n - 4, 4);
		*a = x;
		*b = y;
	} else {
		*a = (uint64_t)p[0] | (uint64_t)p[n >> 1] << 8 |
		    (uint64_t)p[n - 1] << 16;
		*b = 0;
	}
}

#define HASH_MUL UINT64_C(0x9e3779b97f4a7c15)
#define HASH_P0 UINT64_C(0xa0761d6478bd642f)
#define HASH_P1 UINT64_C(0xe7037ed1a0b428db)
#define HASH_P2 UINT64_C(0x8ebc6af09c88c6e3)
#define HASH_P3 UINT64_C(0x589965cc75374cc3)

/* a * b in 128 bits folded to 64 (wyhash's mum). */
static FB_INLINE uint64_t
mum(uint64_t a, uint64_t b)
{
	__extension__ typedef unsigned __int128 u128; /* as lib/clock.c */
	u128 r = (u128)a * b;

	return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* A long part's bytes (n > 16) folded into one word. */
static FB_NOINLINE uint64_t
fold_long(const unsigned char *p, size_t n)
{
	uint64_t h = (uint64_t)n * HASH_MUL, a;

	for (; n > 8; n -= 8, p += 8) {
		memcpy(&a, p, sizeof(a));
		h = (h ^ a) * HASH_MUL;
		h = (h << 27) | (h >> 37);
	}
	/* The last 8 bytes, overlapping the ones before. */
	memcpy(&a, p + n - 8, sizeof(a));
	return (h ^ a) * HASH_MUL;
}

/* A key's part as two words: n <= 16, its bytes (load_small()), else a
 * fold (the key then compares bytes). */
static FB_INLINE void
part_words(const void *p, size_t n, uint64_t *a, uint64_t *b)
{
	if (RESIL__UNLIKELY(n == 0)) {
		*a = *b = 0;
	} else if (RESIL__LIKELY(n <= 16)) {
		load_small(p, n, a, b);
	} else {
		*a = fold_long(p, n);
		*b = 0;
	}
}

/* The method's part of its keys' hash (resil__cache_method keeps it). */
static FB_INLINE uint64_t
method_part(uint64_t w0, uint64_t w1, size_t mlen)
{
	return mum(w0 ^ HASH_P0, w1 ^ HASH_P1 ^ (uint64_t)mlen);
}

/* A short key's part lengths (each <= 16) as one word. */
static FB_INLINE uint64_t
key_lens(size_t mlen, size_t len)
{
	return (uint64_t)mlen | (uint64_t)len << 32;
}

/* A key: its parts, its hash, its bytes as four words (the method's two,
 * the arguments'), which with the lengths determine a short key's bytes
 * (both parts <= 16 bytes): its compare is four words. */
typedef struct kkey {
	const resil_args *args;
	size_t mlen;
	size_t klen; /* mlen + 1 + args->len */
	uint64_t h;    /* key_hash() */
	uint64_t seed; /* the method's part; 0 with !seeded: not yet */
	int seeded;
	uint64_t w[4];
	int small;
} kkey;

/* *k for args (checked), the method's length, words and part of the
 * hash given. 0 when the key's length overflows (never stored). */
static FB_INLINE int
key_prep(kkey *k, const resil_args *args, size_t mlen, uint64_t mw0,
    uint64_t mw1, uint64_t seed)
{
	size_t len = args->len;

	k->args = args;
	k->mlen = mlen;
	k->klen = mlen + 1 + len;
	if (RESIL__UNLIKELY(k->klen < mlen)) /* size_t overflow */
		return 0;
	k->small = mlen <= 16 && len <= 16;
	k->seed = seed;
	k->seeded = 1;
	k->w[0] = mw0;
	k->w[1] = mw1;
	part_words(args->data, len, &k->w[2], &k->w[3]);
	return 1;
}

/* k->h, once a probe needs it (shards from its top, slots its bottom). */
static FB_INLINE void
key_hash(kkey *k)
{
	if (!k->seeded) {
		k->seed = method_part(k->w[0], k->w[1], k->mlen);
		k->seeded = 1;
	}
	k->h = mum(k->w[2] ^ k->seed ^ HASH_P2,
	    k->w[3] ^ HASH_P3 ^ (uint64_t)k->args->len);
}

/* key_prep() of a method named by a C string (its hash part: lazily). */
static FB_INLINE int
key_prep_str(kkey *k, const resil_args *args, size_t mlen)
{
	uint64_t a, b;

	part_words(args->method, mlen, &a, &b);
	if (!key_prep(k, args, mlen, a, b, 0))
		return 0;
	k->seeded = 0;
	return 1;
}

#if defined(__SSE2__)
/* The 16 bytes at p + i and q + i, equal byte by byte (0xff each). */
static FB_INLINE __m128i
eq16(const unsigned char *p, const unsigned char *q, size_t i)
{
	return _mm_cmpeq_epi8(
	    _mm_loadu_si128((const __m128i *)(const void *)(p + i)),
	    _mm_loadu_si128((const __m128i *)(const void *)(q + i)));
}

/* 16 < n <= 64 bytes equal, no loop, no call: the 16-byte chunks at 0,
 * i, j and n - 16 (i = 16 and j = n - 32 above 32 bytes; else the
 * first and last chunk again), overlapping, all inside the n bytes. */
static FB_INLINE int
bytes_eq_64(const void *a, const void *b, size_t n)
{
	const unsigned char *p = a, *q = b;
	/* i: 16 above 32 bytes, else 0, without a branch or a select; j is
	 * then n - 32, or the last chunk again. */
	size_t i = ((n - 1) >> 5) << 4, j = n - 16 - i;
	__m128i x = _mm_and_si128(eq16(p, q, 0), eq16(p, q, i));
	__m128i y = _mm_and_si128(eq16(p, q, j), eq16(p, q, n - 16));

	return _mm_movemask_epi8(_mm_and_si128(x, y)) == 0xffff;
}
#endif

/* memcmp(a, b, n) == 0 inline: up to 16 bytes as two loads each side,
 * longer ones through libc's vector compare. */
static FB_INLINE int
bytes_eq(const void *a, const void *b, size_t n)
{
	uint64_t a1, a2, b1, b2;

	if (n == 0)
		return 1;
	if (n > 16)
		return memcmp(a, b, n) == 0;
	load_small(a, n, &a1, &a2);
	load_small(b, n, &b1, &b2);
	return ((a1 ^ b1) | (a2 ^ b2)) == 0;
}

static char *
key_of(const entry *e)
{
	return (char *)(uintptr_t)(e + 1);
}

/* Equal lengths and, for a short key, equal words: the same bytes;
 * a long key compares its bytes (after the struct: method, NUL,
 * arguments). */
static FB_INLINE int
key_eq(const entry *e, const kkey *k)
{
	const char *b;

	if (e->hash != k->h || e->key_len != k->klen || e->mlen != k->mlen)
		return 0;
	if (RESIL__LIKELY(k->small))
		return ((e->w[0] ^ k->w[0]) | (e->w[1] ^ k->w[1]) |
		           (e->w[2] ^ k->w[2]) | (e->w[3] ^ k->w[3])) == 0;
	b = key_of(e);
	return bytes_eq(b, k->args->method, k->mlen) &&
	    bytes_eq(b + k->mlen + 1, k->args->data, k->args->len);
}

/* Drop one reference to e; the last one frees it (an opaque value
 * through its ops, the rest is e's own allocation). */
static void
entry_unref(entry *e)
{
	resil_allocator a;

	if (resil__faa64(&e->refs, (uint64_t)0 - 1) != 1)
		return;
	if (e->value.type == RESIL_VALUE_OPAQUE)
		resil_value_free(&e->value);
	a = e->alloc;
	resil__free(&a, e, e->size);
}


/* ctx: the entry's reference count (resil_result_free() drops it in
 * place, lib/value.c). */
void
resil__cache_served_free(void *ptr, size_t size, void *ctx)
{
	entry *e = (entry *)(void *)((char *)ctx - offsetof(entry, refs));
	resil_allocator a;

	(void)ptr;
	if (size != RESIL__SERVED_LAST) { /* resil_value_free(): one drop */
		entry_unref(e);
		return;
	}
	/* resil_result_free() dropped the last reference in place. */
	if (e->value.type == RESIL_VALUE_OPAQUE)
		resil_value_free(&e->value);
	a = e->alloc;
	resil__free(&a, e, e->size);
}

/* The clock's order, under the lock: the hand is the oldest. */
static void
clock_unlink(shard *s, entry *e)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		s->hand = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		s->last = e->prev;
	e->prev = e->next = NULL;
}

static void
clock_append(shard *s, entry *e)
{
	e->next = NULL;
	e->prev = s->last;
	if (s->last != NULL)
		s->last->next = e;
	else
		s->hand = e;
	s->last = e;
}

/* The writers' lock of a shard (gets take it only to drop a stale
 * entry). A waiter pauses, then yields: on a machine with more threads
 * than CPUs the holder may be preempted, and a plain spin would burn the
 * waiter's whole time slice. */
static void
shard_lock(shard *s)
{
	unsigned spins = 0;

	while (resil__fas8(&s->lock, 1) != 0)
		do
			resil__backoff(&spins);
		while (resil__load8(&s->lock) != 0);
}

static void
shard_unlock(shard *s)
{
	resil__store8(&s->lock, 0);
}

/* ---- the read side ---- */

/* Announce a read of s; returns the generation it is announced in (its
 * parity is the one to withdraw from): until the read ends, nothing in
 * s's table of that generation is freed. */
static FB_INLINE uint64_t
read_enter(shard *s, readers *rd)
{
	uint64_t g;

	for (;;) {
		g = resil__load64(&s->gen);
		resil__inc64(&rd->in[g & 1]);
		if (RESIL__LIKELY(resil__load64_after_rmw(&s->gen) == g))
			return g;
		resil__inc64(&rd->idle[g & 1]);
	}
}

/* End a read; hit says whether it served a value. */
static FB_INLINE void
read_exit(readers *rd, unsigned parity, int hit)
{
	resil__inc64(hit ? &rd->out[parity] : &rd->idle[parity]);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define FB_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FB_SANITIZED 1
#endif
/* The memo's own copy of its key (memo_fast()): its 16-byte load of the
 * method reads past the name's NUL, inside the page, which sanitizers
 * (and valgrind's memcheck) would report: their builds go without. */
#if defined(__SSE2__) && !defined(FB_SANITIZED)
#define FB_MEMO_KEY 1
#endif

/* A thread's memo (docs/fallback.md): the entry its last re-stamp, hit
 * or new entry was, where (the cache's id, the shard, this thread's
 * stripe) and the shard's generation then. Checked inside a read: while
 * the generation is the memo's, no quiesce has ended since, so the entry
 * is not freed; its lengths (0 once it is out of the table) and the
 * key's words: the entry a probe would find. With FB_MEMO_KEY the memo
 * also holds a copy of a short key (method of at most 15 bytes, 1 to 16
 * argument bytes), which a call's arguments are compared with before any
 * of them is measured (memo_fast()). */
typedef struct memo {
#if defined(FB_MEMO_KEY)
	__m128i mkey;   /* the method's bytes, its NUL, zeros */
	unsigned mneed; /* bits 0..mlen: the bytes of mkey that count;
	                 * ~0u: no copy */
	size_t dlen;    /* the argument bytes' length (1..16) */
	uint64_t dw0;   /* and their words (load_small()) */
	uint64_t dw1;
	/* A copy of the entry's value when it is a string, bytes or JSON of
	 * 17 to 64 bytes (immutable in the entry): its 16-byte chunks at 0,
	 * vi, vj and vlen - 16 (bytes_eq_64()'s); vtype its type, else -1.
	 * The public put compares with it before the read (memo_value_eq()). */
	__m128i v[4];
	int vtype;
	size_t vlen;
	size_t vi;
	size_t vj;
#endif
	uint64_t id; /* the cache's id; 0: none */
	shard *s;
	readers *rd;
	entry *e;
	uint64_t gen;
	uint64_t *in;   /* &rd->in[gen & 1]: the read announced there */
	uint64_t *idle; /* &rd->idle[gen & 1]: and ended there */
} memo;

static RESIL__TLS memo memo_;

/* The memo's entry for k in c in a read begun here (*gen), or NULL. */
static FB_INLINE entry *
memo_find(const resil_cache *c, const kkey *k, uint64_t *gen)
{
	memo *mo = &memo_;
	entry *e;
	uint64_t g;

	if (mo->id != c->id || !k->small)
		return NULL;
	g = read_enter(mo->s, mo->rd);
	e = mo->e;
	/* The generation first: only then may e be read at all. */
	if (RESIL__LIKELY(g == mo->gen) &&
	    resil__load64(&e->lens) == key_lens(k->mlen, k->args->len) &&
	    ((e->w[0] ^ k->w[0]) | (e->w[1] ^ k->w[1]) |
	        (e->w[2] ^ k->w[2]) | (e->w[3] ^ k->w[3])) == 0) {
		*gen = g;
		return e;
	}
	read_exit(mo->rd, (unsigned)(g & 1), 0);
	return NULL;
}

static char *key_of(const entry *e);

#if defined(FB_MEMO_KEY)
/* The memo's copy of v (an entry's), or none (vtype -1). */
static FB_INLINE void
memo_value(memo *mo, const resil_value *v)
{
	const unsigned char *p = (const unsigned char *)v->u.s.ptr;
	size_t n = v->u.s.len;

	mo->vtype = -1;
	if (v->type < RESIL_VALUE_STRING || v->type > RESIL_VALUE_JSON ||
	    n - 17 >= 48)
		return;
	mo->vi = ((n - 1) >> 5) << 4; /* as bytes_eq_64() */
	mo->vj = n - 16 - mo->vi;
	mo->v[0] = _mm_loadu_si128((const __m128i *)(const void *)p);
	mo->v[1] = _mm_loadu_si128((const __m128i *)(const void *)(p + mo->vi));
	mo->v[2] = _mm_loadu_si128((const __m128i *)(const void *)(p + mo->vj));
	mo->v[3] = _mm_loadu_si128(
	    (const __m128i *)(const void *)(p + n - 16));
	mo->vlen = n;
	mo->vtype = (int)v->type;
}

/* The memo's copy of e's key (e protected by the caller: a read, or the
 * shard's lock), or none when it is not a short one. */
static FB_NOINLINE void
memo_key(memo *mo, const entry *e)
{
	size_t dlen = e->key_len - e->mlen - 1;

	if (resil__load64(&e->lens) == 0 || e->mlen > 15 || dlen == 0) {
		/* No copy: bits 16..31 of ~m are set, the method never
		 * matches (and no length is then read as the arguments'). */
		mo->mneed = ~0u;
		mo->dlen = 0;
		mo->vtype = -1;
		return;
	}
	const char *k = key_of(e);
	unsigned char b[32];

	/* The key's first 16 bytes; past the method's NUL they do not count
	 * (mneed). A key shorter than 16 is loaded as the 16 bytes ending
	 * where it ends (the entry's struct before it is e's memory), then
	 * moved into place through b: one load, a store, a load. */
	if (e->key_len >= 16) {
		mo->mkey = _mm_loadu_si128((const __m128i *)(const void *)k);
	} else {
		_mm_storeu_si128((__m128i *)(void *)b,
		    _mm_loadu_si128((const __m128i *)(const void *)(k +
		        e->key_len - 16)));
		_mm_storeu_si128(
		    (__m128i *)(void *)(b + 16), _mm_setzero_si128());
		mo->mkey = _mm_loadu_si128(
		    (const __m128i *)(const void *)(b + 16 - e->key_len));
	}
	mo->mneed = (2u << e->mlen) - 1;
	mo->dlen = dlen;
	mo->dw0 = e->w[2];
	mo->dw1 = e->w[3];
	memo_value(mo, &e->value);
}
#endif

/* e found by a probe in s in a read of generation g: the memo. */
static FB_INLINE void
memo_keep(const resil_cache *c, shard *s, readers *rd, entry *e, uint64_t g)
{
	memo *mo = &memo_;

	mo->id = c->id;
	mo->s = s;
	mo->rd = rd;
	mo->e = e;
	mo->gen = g;
	mo->in = &rd->in[g & 1];
	mo->idle = &rd->idle[g & 1];
#if defined(FB_MEMO_KEY)
	memo_key(mo, e);
#endif
}

#if defined(FB_MEMO_KEY)
/* 1 when args (method not NULL) is the key of c's memo; nothing of args
 * is measured: the method's 16 bytes are loaded at once (when they lie
 * inside its page, so that the load cannot fault: SSE2 means x86, whose
 * pages are 4096 bytes or larger) and compared with the memo's copy up to
 * and including its NUL; the arguments' length, then their words. A short
 * key that is the memo's costs a few compares; no strlen, no key prepared,
 * no call (the record's fast path stays a leaf). checked: the caller
 * refused NULL bytes of a length above 0 already (args_ok()). */
static FB_INLINE int
memo_key_eq(const resil_cache *c, const resil_args *args, int checked)
{
	const memo *mo = &memo_;
	uintptr_t p = (uintptr_t)args->method;
	size_t len = args->len;
	uint64_t a, b;
	unsigned m;

	if (mo->id != c->id || len != mo->dlen || (p & 4095) > 4096 - 16)
		return 0;
	m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
	    _mm_loadu_si128((const __m128i *)p), mo->mkey));
	if ((~m & mo->mneed) != 0)
		return 0;
	/* len > 0: NULL bytes are refused (checked: by the caller). */
	if (!checked && RESIL__UNLIKELY(args->data == NULL))
		return 0;
	if (RESIL__LIKELY(len >= 8)) { /* load_small()'s, laid out first */
		memcpy(&a, args->data, 8);
		memcpy(&b, (const unsigned char *)args->data + len - 8, 8);
	} else {
		load_small(args->data, len, &a, &b);
	}
	return ((a ^ mo->dw0) | (b ^ mo->dw1)) == 0;
}
#endif

#if defined(FB_MEMO_KEY)
/* The memo's read announced (in its generation's parity, without
 * read_enter()'s first look and retry): 1 when the generation is still the
 * memo's after the announcement (only then may its entry be read at all:
 * no wait for readers has ended since, nor can one end before the read
 * does) and the entry (*ep) is still its key's; end the read with
 * memo_exit(). 0 otherwise, no read left open (the general path's). */
static FB_INLINE int
memo_enter(entry **ep)
{
	const memo *mo = &memo_;
	entry *e = mo->e; /* the pointer only: e is read after the check */

	resil__inc64(mo->in);
	*ep = e;
	if (RESIL__LIKELY(resil__load64_after_rmw(&mo->s->gen) == mo->gen) &&
	    resil__load64(&e->lens) != 0)
		return 1;
	resil__inc64(mo->idle);
	return 0;
}

/* End memo_enter()'s read, having served nothing. */
static FB_INLINE void
memo_exit(void)
{
	resil__inc64(memo_.idle);
}
#endif

/* 1 with the memo's entry (*ep) when args (method not NULL) is its key
 * (memo_key_eq()), in a read begun here (*gen: memo_enter()); 0 otherwise
 * (no read left open): the general path then measures, prepares and looks
 * the key up. */
static FB_INLINE int
memo_fast_in(const resil_cache *c, const resil_args *args, entry **ep,
    uint64_t *gen, int checked)
{
#if defined(FB_MEMO_KEY)
	if (!memo_key_eq(c, args, checked) || !memo_enter(ep))
		return 0;
	*gen = memo_.gen;
	return 1;
#else
	(void)c;
	(void)args;
	(void)ep;
	(void)gen;
	(void)checked;
	return 0;
#endif
}

/* memo_fast_in() of arguments whose bytes are not checked yet. */
static FB_INLINE int
memo_fast(
    const resil_cache *c, const resil_args *args, entry **ep, uint64_t *gen)
{
	return memo_fast_in(c, args, ep, gen, 0);
}

/* Find the key in t (NULL: no table); from a reader or a writer. */
static FB_INLINE entry *
lookup(const table *t, const kkey *k)
{
	size_t i;

	if (t == NULL)
		return NULL;
	for (i = (size_t)k->h & t->mask;; i = (i + 1) & t->mask) {
		entry *e = resil__loadptr((void *const *)&t->slot[i]);

		if (e == NULL)
			return NULL;
		if (e != TOMB && key_eq(e, k))
			return e;
	}
}

/* ---- the write side, under the shard's lock ---- */

/* After unlinking: wait until no read that may still see what was
 * unlinked (announced under the old generation's parity) is running. */
static void
quiesce(shard *s)
{
	unsigned p = (unsigned)(resil__faa64(&s->gen, 1) & 1);
	unsigned i, spins = 0;

	/* Ended first (acquire loads, in this order), then begun: all are
	 * monotonic, so out at the first look plus idle at the second is at
	 * most what had ended at the second, which is at most what had
	 * begun then and at the third look; equal means every read of the
	 * parity begun before the second look has ended. */
	for (i = 0; i < NSTRIPES; i++)
		while (resil__load64_after_rmw(&s->rd[i].out[p]) +
		        resil__load64(&s->rd[i].idle[p]) !=
		    resil__load64(&s->rd[i].in[p]))
			resil__backoff(&spins);
}

/* The slot of the key, or (*found NULL) the slot an insert of it takes:
 * the first tombstone on its probe, else the empty slot that ends it. */
static size_t
probe(const table *t, const kkey *k, entry **found)
{
	size_t i, free_at = SIZE_MAX;

	for (i = (size_t)k->h & t->mask;; i = (i + 1) & t->mask) {
		entry *e = t->slot[i];

		if (e == NULL) {
			*found = NULL;
			return free_at != SIZE_MAX ? free_at : i;
		}
		if (e == TOMB) {
			if (free_at == SIZE_MAX)
				free_at = i;
		} else if (key_eq(e, k)) {
			*found = e;
			return i;
		}
	}
}

/* The slot holding e (which is in t). */
static size_t
slot_of(const table *t, const entry *e)
{
	size_t i = (size_t)e->hash & t->mask;

	while (t->slot[i] != e)
		i = (i + 1) & t->mask;
	return i;
}

/* Take e out of the table and the clock; the caller retires it. */
static void
detach(shard *s, entry *e)
{
	resil__store64(&e->lens, 0);
	resil__storeptr((void **)&s->tab->slot[slot_of(s->tab, e)], TOMB);
	clock_unlink(s, e);
	s->count--;
	s->bytes -= e->charge;
}

/* A table for the shard's entries with room for one more, without
 * tombstones: at most a quarter full, so probes stay short and an empty
 * slot always ends them. NULL when out of memory. */
static table *
table_rebuild(const resil_allocator *a, const shard *s)
{
	size_t slots = 8, i;
	table *t;
	entry *e;

	while (slots / 4 < s->count + 1)
		slots <<= 1;
	t = resil__calloc(a, table_size(slots));
	if (t == NULL)
		return NULL;
	t->mask = slots - 1;
	for (e = s->hand; e != NULL; e = e->next) {
		for (i = (size_t)e->hash & t->mask; t->slot[i] != NULL;
		     i = (i + 1) & t->mask)
			;
		t->slot[i] = e;
	}
	return t;
}

static void
free_list(entry *list)
{
	while (list != NULL) {
		entry *e = list;

		list = e->next;
		entry_unref(e);
	}
}

/* Entries a writer unlinked from s (a list through next) wait in s, under
 * its lock, until RETIRE_BATCH of them or a quarter of the shard's byte
 * share have gathered (or force: a table was retired too); then one wait
 * for the shard's readers (quiesce) covers them all, where each put that
 * replaced or evicted an entry waited on its own: the generation's line,
 * which every get reads, and the readers' stripes stay unwritten by most
 * puts. Returns the list the caller frees once it unlocked, or NULL. */
#define RETIRE_BATCH 16

static entry *
retire(shard *s, entry *list, int force)
{
	entry *out;

	while (list != NULL) {
		entry *e = list;

		list = e->next;
		e->next = s->retired;
		s->retired = e;
		s->nretired++;
		s->retired_bytes += e->size;
	}
	if (!force &&
	    (s->retired == NULL ||
	        (s->nretired < RETIRE_BATCH &&
	            s->retired_bytes <= s->max_bytes / 4)))
		return NULL;
	quiesce(s);
	out = s->retired;
	s->retired = NULL;
	s->nretired = 0;
	s->retired_bytes = 0;
	return out;
}

void
resil_cache_free(resil_cache *c)
{
	if (c == NULL)
		return;
	resil_cache_clear(c);
	resil__free(&c->alloc, c->shards_raw, c->shards_raw_size);
	resil__free(&c->alloc, c, sizeof(*c));
}

void
resil_cache_clear(resil_cache *c)
{
	uint32_t i;

	if (c == NULL)
		return;
	for (i = 0; i < c->nshards; i++) {
		shard *s = &c->shards[i];
		entry *list;
		table *t;

		entry *dead;

		shard_lock(s);
		list = s->hand;
		t = s->tab;
		resil__storeptr((void **)&s->tab, NULL);
		s->hand = s->last = NULL;
		s->count = 0;
		s->bytes = 0;
		s->used = 0;
		dead = t != NULL ? retire(s, NULL, 1) : NULL;
		shard_unlock(s);
		free_list(list);
		free_list(dead);
		if (t != NULL)
			resil__free(&c->alloc, t, table_size(t->mask + 1));
	}
}

#define args_ok resil__cache_args_ok

static shard *
shard_of(const resil_cache *c, uint64_t h)
{
	return &c->shards[(h >> 32) & (c->nshards - 1)];
}

/* Remove the key's entry (if any) under the lock; RESIL_OK if there was
 * one. */
static resil_err
remove_key(shard *s, const kkey *k)
{
	entry *e, *dead = NULL;

	shard_lock(s);
	e = lookup(s->tab, k);
	if (e != NULL) {
		detach(s, e);
		dead = retire(s, e, 0);
	}
	shard_unlock(s);
	free_list(dead);
	return e != NULL ? RESIL_OK : RESIL_E_NOTFOUND;
}

/* A value a put may hold: a string's, bytes' or JSON's bytes are not NULL
 * when its length is above 0. Such a value is never the same as a held
 * one (same_value(), the copies' compares), so it reaches put_new(),
 * which refuses it (RESIL_E_INVAL) before anything changes. */
static FB_INLINE int
value_ok(const resil_value *v)
{
	return v == NULL || v->type < RESIL_VALUE_STRING ||
	    v->type > RESIL_VALUE_JSON || v->u.s.ptr != NULL || v->u.s.len == 0;
}

/* The same value, bit for bit (what a copy of it would hold): doubles by
 * their bits (0.0 and -0.0 differ), booleans by their int; opaque values
 * never (their equal is the user's idea of equal). NULL is the null
 * value. */
static FB_INLINE int
same_value(const resil_value *held, const resil_value *v)
{
	resil_value null;

	if (v == NULL) {
		resil_value_init(&null);
		v = &null;
	}
	if (held->type != v->type)
		return 0;
	if (RESIL__LIKELY(held->type == RESIL_VALUE_INT))
		return held->u.i == v->u.i;
	switch (held->type) {
	case RESIL_VALUE_NULL:
		return 1;
	case RESIL_VALUE_BOOL:
		return held->u.b == v->u.b;
	case RESIL_VALUE_INT:
		return held->u.i == v->u.i;
	case RESIL_VALUE_DOUBLE: {
		/* The bits, on purpose: 0.0 and -0.0 are two answers. */
		uint64_t x, y;

		memcpy(&x, &held->u.d, sizeof(x));
		memcpy(&y, &v->u.d, sizeof(y));
		return x == y;
	}
	case RESIL_VALUE_STRING:
	case RESIL_VALUE_BYTES:
	case RESIL_VALUE_JSON:
		/* NULL bytes of a length above 0: never the same (put_new()
		 * refuses them). */
		if (held->u.s.len != v->u.s.len ||
		    (v->u.s.ptr == NULL && v->u.s.len > 0))
			return 0;
#if defined(__SSE2__)
		/* Answers of 17 to 64 bytes without a call. */
		if (v->u.s.len > 16 && v->u.s.len <= 64)
			return bytes_eq_64(
			    held->u.s.ptr, v->u.s.ptr, v->u.s.len);
#endif
		return bytes_eq(held->u.s.ptr, v->u.s.ptr, v->u.s.len);
	case RESIL_VALUE_OPAQUE:
		break;
	}
	return 0;
}


/* e stamped now (at, else the clock's), written only when it changes. */
static FB_INLINE void
restamp(resil_cache *c, entry *e, const uint64_t *at)
{
	uint64_t now = at != NULL ? *at : cache_now(c);

	if (resil__load64(&e->stored_at) != now)
		resil__store64(&e->stored_at, now);
}

/* A put of the value the key holds already only re-stamps its entry, on
 * the read side: no lock, no allocation, no copy (a compare), and the
 * entry keeps its place on the clock and its reference bit. 1 if done. A
 * writer removing the entry at that moment takes the stamp with it, as
 * if the removal came just after this put: the key misses. */
static FB_NOINLINE int
refresh(resil_cache *c, shard *s, const kkey *k, const resil_value *value,
    const uint64_t *at)
{
	readers *rd = &s->rd[resil__thread_stripe(NSTRIPES)];
	uint64_t g = read_enter(s, rd);
	entry *e = lookup(resil__loadptr((void *const *)&s->tab), k);
	int done = e != NULL && same_value(&e->value, value);

	if (done) {
		restamp(c, e, at);
		memo_keep(c, s, rd, e, g);
	}
	read_exit(rd, (unsigned)(g & 1), 0);
	return done;
}

/* A new entry for args holding a copy of value (NULL: the sentinel),
 * stamped now, with the cache's reference; NULL when out of memory. The
 * bytes of a string, bytes or JSON value go in the same allocation. */
static entry *
entry_make(resil_cache *c, const kkey *k, size_t charge,
    const resil_value *value, uint64_t now)
{
	const resil_args *args = k->args;
	size_t mlen = k->mlen, key_len = k->klen;
	int inline_bytes = value != NULL &&
	    (value->type == RESIL_VALUE_STRING ||
	        value->type == RESIL_VALUE_BYTES ||
	        value->type == RESIL_VALUE_JSON);
	size_t size = sizeof(entry) + key_len;
	entry *e;

	if (inline_bytes) {
		if (value->u.s.len > SIZE_MAX - 1 - size ||
		    (value->u.s.ptr == NULL && value->u.s.len > 0))
			return NULL;
		size += value->u.s.len + 1;
	}
	e = resil__alloc(&c->alloc, size);
	if (e == NULL)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->hash = k->h;
	e->key_len = key_len;
	e->mlen = mlen;
	memcpy(e->w, k->w, sizeof(e->w));
	e->charge = charge;
	e->size = size;
	e->refs = 1;
	/* Published by the caller's release store. */
	e->lens = k->small ? key_lens(mlen, args->len) : 0;
	e->alloc = c->alloc;
	e->stored_at = now;
	memcpy(key_of(e), args->method, mlen + 1);
	if (args->len > 0)
		memcpy(key_of(e) + mlen + 1, args->data, args->len);
	if (inline_bytes) {
		char *bytes = key_of(e) + key_len;

		if (value->u.s.len > 0)
			memcpy(bytes, value->u.s.ptr, value->u.s.len);
		bytes[value->u.s.len] = '\0';
		e->value.type = value->type;
		e->value.u.s.ptr = bytes;
		e->value.u.s.len = value->u.s.len;
	} else if (value != NULL && value->type == RESIL_VALUE_OPAQUE) {
		if (resil_value_copy(&e->value, value, &c->alloc) !=
		    RESIL_OK) {
			resil__free(&c->alloc, e, size);
			return NULL;
		}
	} else if (value != NULL) {
		e->value.type = value->type; /* a scalar: no heap */
		e->value.u = value->u;
	}
	return e;
}

/* Make room for charge more bytes and one more entry in s (under its
 * lock): the hand gives an entry with its bit set a second chance (clears
 * the bit, moves it behind the newest), for one round at most, then
 * evicts whatever it points at, however often hits set the bits again
 * meanwhile. Evicted entries are pushed on *victims. */
static void
make_room(shard *s, size_t charge, entry **victims)
{
	size_t turns = s->count;

	while (s->hand != NULL &&
	    (s->count + 1 > s->max_count ||
	        s->bytes + charge > s->max_bytes)) {
		entry *v = s->hand;

		if (turns > 0 && resil__load8(&v->ref) != 0) {
			turns--;
			resil__store8(&v->ref, 0);
			clock_unlink(s, v);
			clock_append(s, v);
			continue;
		}
		detach(s, v);
		s->evictions++;
		v->next = *victims;
		*victims = v;
	}
}

/* A put that stores a new entry (the key is new, or its value changed). */
static FB_NOINLINE resil_err
put_new(resil_cache *c, shard *s, const kkey *k, const resil_value *value,
    const uint64_t *at)
{
	const resil_allocator *a = &c->alloc;
	entry *e, *old, *victims = NULL;
	table *t, *dead_tab = NULL;
	size_t charge, idx;

	if (RESIL__UNLIKELY(!value_ok(value)))
		return RESIL_E_INVAL;
	charge = sizeof(entry) + k->klen + resil_value_heap_size(value);
	if (charge > s->max_bytes) {
		/* Too big to keep: drop the older answer of the key too, so
		 * that the cache never serves one older than the last. */
		(void)remove_key(s, k);
		return RESIL_E_LIMITED;
	}
	/* Allocate and copy before taking the lock. */
	e = entry_make(c, k, charge, value, at != NULL ? *at : cache_now(c));
	if (e == NULL)
		return RESIL_E_NOMEM;

	shard_lock(s);
	t = s->tab;
	old = NULL;
	idx = t != NULL ? probe(t, k, &old) : 0;
	if (t == NULL ||
	    (old == NULL && t->slot[idx] == NULL &&
	        (s->used + 1) * 2 > t->mask + 1)) {
		/* A new key would fill the table past half (tombstones
		 * count): rebuild it first, the only step that can fail, so
		 * that a failure leaves the cache as it was. */
		table *nt = table_rebuild(a, s);

		if (nt == NULL) {
			shard_unlock(s);
			entry_unref(e);
			return RESIL_E_NOMEM;
		}
		resil__storeptr((void **)&s->tab, nt);
		dead_tab = t;
		t = nt;
		s->used = s->count;
		idx = probe(t, k, &old);
	}
	/* Publish: a reader sees the old entry or the new one, never
	 * neither. */
	if (t->slot[idx] == NULL)
		s->used++;
	if (old != NULL)
		resil__store64(&old->lens, 0);
	resil__storeptr((void **)&t->slot[idx], e);
	if (old != NULL) {
		clock_unlink(s, old);
		s->count--;
		s->bytes -= old->charge;
		old->next = victims;
		victims = old;
	}
	/* e is in the table but not yet on the clock or in the counts, so
	 * it cannot evict itself. */
	make_room(s, charge, &victims);
	clock_append(s, e);
	s->count++;
	s->bytes += charge;
	victims = retire(s, victims, dead_tab != NULL);
	/* The generation cannot move under the lock, and e is in the
	 * table: the memo's next check finds it without a probe. */
	memo_keep(c, s, &s->rd[resil__thread_stripe(NSTRIPES)], e,
	    resil__load64(&s->gen));
	shard_unlock(s);
	if (dead_tab != NULL)
		resil__free(a, dead_tab, table_size(dead_tab->mask + 1));
	free_list(victims);
	return RESIL_OK;
}

/* resil_cache_put() of a prepared key (key_prep()); at: the time of the
 * put on the cache's clock, read by the caller (NULL: read here). */
static FB_INLINE resil_err
cache_put(resil_cache *c, kkey *k, const resil_value *value,
    const uint64_t *at)
{
	uint64_t g;
	entry *e = memo_find(c, k, &g);
	shard *s;

	if (RESIL__LIKELY(e != NULL)) {
		int done = same_value(&e->value, value);

		if (done)
			restamp(c, e, at);
		read_exit(memo_.rd, (unsigned)(g & 1), 0);
		if (done)
			return RESIL_OK;
		/* The key holds another value: a new entry (no probe for a
		 * re-stamp first). */
		key_hash(k);
		return put_new(c, memo_.s, k, value, at);
	}
	key_hash(k);
	s = shard_of(c, k->h);
	if (RESIL__LIKELY(refresh(c, s, k, value, at)))
		return RESIL_OK;
	return put_new(c, s, k, value, at);
}

/* The general put of args (method not NULL) at now. The time by value: a pointer
 * to the caller's would give the caller a frame. */
static FB_NOINLINE resil_err
put_args(resil_cache *c, const resil_args *args, const resil_value *value,
    uint64_t now)
{
	kkey k;

	if (RESIL__UNLIKELY(args->data == NULL && args->len > 0))
		return RESIL_E_INVAL;
	if (RESIL__UNLIKELY(!key_prep_str(&k, args, strlen(args->method))))
		return RESIL_E_NOMEM;
	return cache_put(c, &k, value, &now);
}

/* A put of args (the memo's key, method not NULL, bytes checked) whose
 * value changed: a new entry in the memo's shard, no second look for a
 * re-stamp (cache_put()'s memo path). */
static FB_NOINLINE resil_err
put_replace(resil_cache *c, const resil_args *args, const resil_value *value,
    uint64_t now)
{
	kkey k;

	if (RESIL__UNLIKELY(!key_prep_str(&k, args, strlen(args->method))))
		return RESIL_E_NOMEM;
	key_hash(&k);
	return put_new(c, memo_.s, &k, value, &now);
}

/* e stamped now, written only when it changes; the read ends. */
static FB_INLINE void
stamp_exit(entry *e, uint64_t now, uint64_t g)
{
	if (resil__load64(&e->stored_at) != now)
		resil__store64(&e->stored_at, now);
	read_exit(memo_.rd, (unsigned)(g & 1), 0);
}

/* put_at() of a key that is the memo's (e, in a read of generation g)
 * with a value other than an int: compared in full (same_value()); the
 * same re-stamps, another is put the general way. Out of line, so that
 * the int's path keeps few registers (no frame). */
static FB_NOINLINE resil_err
put_memo_other(resil_cache *c, const resil_args *args,
    const resil_value *value, uint64_t now, entry *e, uint64_t g)
{
	const resil_value *h = &e->value;
	int same;

#if defined(__SSE2__)
	/* A string, bytes or JSON of 17 to 64 bytes (an answer's usual
	 * size): its four chunks straight, no switch. */
	if (value != NULL && h->type == value->type &&
	    h->type >= RESIL_VALUE_STRING && h->type <= RESIL_VALUE_JSON &&
	    h->u.s.len == value->u.s.len && h->u.s.len - 17 < 48)
		same = value->u.s.ptr != NULL &&
		    bytes_eq_64(h->u.s.ptr, value->u.s.ptr, h->u.s.len);
	else
#endif
		same = same_value(h, value);
	if (same) {
		stamp_exit(e, now, g);
		return RESIL_OK;
	}
	read_exit(memo_.rd, (unsigned)(g & 1), 0);
	return put_replace(c, args, value, now);
}

/* A put of args (checked) at now (value_set, a constant: value is not
 * NULL). A key that is this thread's memo's
 * (memo_fast()) holding the same int is re-stamped here without a call:
 * the record's fast path is a leaf, no frame; any other value of the
 * memo's key, put_memo_other(); another key, the general way. */
static FB_INLINE resil_err
put_at(resil_cache *c, const resil_args *args, const resil_value *value,
    uint64_t now, int value_set)
{
	uint64_t g;
	entry *e;

	if (!memo_fast(c, args, &e, &g))
		return put_args(c, args, value, now);
	if (RESIL__LIKELY((value_set || value != NULL) &&
	        value->type == RESIL_VALUE_INT &&
	        e->value.type == RESIL_VALUE_INT &&
	        e->value.u.i == value->u.i)) {
		stamp_exit(e, now, g);
		return RESIL_OK;
	}
	return put_memo_other(c, args, value, now, e, g);
}

#if defined(FB_MEMO_KEY)
/* 1 when value is the memo's copy (memo_value()): the same type, length
 * and bytes, its four chunks compared at once; no look at the entry. */
static FB_INLINE int
memo_value_eq(const resil_value *value)
{
	const memo *mo = &memo_;
	const unsigned char *q;
	__m128i x, y;

	if (value == NULL || (int)value->type != mo->vtype ||
	    value->u.s.len != mo->vlen)
		return 0;
	q = (const unsigned char *)value->u.s.ptr;
	if (RESIL__UNLIKELY(q == NULL)) /* refused: put_new() */
		return 0;
	x = _mm_and_si128(
	    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)q),
	        mo->v[0]),
	    _mm_cmpeq_epi8(
	        _mm_loadu_si128((const __m128i *)(const void *)(q + mo->vi)),
	        mo->v[1]));
	y = _mm_and_si128(
	    _mm_cmpeq_epi8(
	        _mm_loadu_si128((const __m128i *)(const void *)(q + mo->vj)),
	        mo->v[2]),
	    _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(q +
	                       mo->vlen - 16)),
	        mo->v[3]));
	return _mm_movemask_epi8(_mm_and_si128(x, y)) == 0xffff;
}
#endif

/* The cache's time for the public put: its clock's word, else its call. */
static FB_INLINE uint64_t
put_now(const resil_cache *c)
{
	return c->now_word != NULL ? clock_word(c) : cache_now(c);
}

/* resil_cache_put() of args (checked) the general way (another key than
 * the memo's). */
static FB_NOINLINE resil_err
put_general(resil_cache *c, const resil_args *args, const resil_value *value)
{
	return put_args(c, args, value, put_now(c));
}

#if defined(FB_MEMO_KEY)
/* resil_cache_put() of the memo's key (args checked) with a value other
 * than the memo's copy (memo_value_eq()): an int or any other value
 * compared with the entry's in a read (put_memo_other()); the general way
 * when the memo's entry is gone. */
static FB_NOINLINE resil_err
put_memo_any(
    resil_cache *c, const resil_args *args, const resil_value *value)
{
	uint64_t now = put_now(c), g;
	entry *e;

	/* The copy's type, other bytes or length: another value, put in
	 * full without a second compare. */
	if (value != NULL && (int)value->type == memo_.vtype)
		return put_replace(c, args, value, now);
	if (!memo_fast_in(c, args, &e, &g, 1))
		return put_args(c, args, value, now);
	if (value != NULL && value->type == RESIL_VALUE_INT &&
	    e->value.type == RESIL_VALUE_INT && e->value.u.i == value->u.i) {
		stamp_exit(e, now, g);
		return RESIL_OK;
	}
	return put_memo_other(c, args, value, now, e, g);
}

/* The memo's entry stamped now in a read begun here, when it is still its
 * key's (memo_enter()); else the general way. */
static FB_INLINE resil_err
put_same_at(resil_cache *c, const resil_args *args, const resil_value *value,
    uint64_t now)
{
	entry *e;

	if (RESIL__UNLIKELY(!memo_enter(&e))) /* the entry is gone */
		return put_args(c, args, value, now);
	if (resil__load64(&e->stored_at) != now)
		resil__store64(&e->stored_at, now);
	memo_exit();
	return RESIL_OK;
}

/* put_same_at() on a clock without a time word (the system and fast
 * clocks): called before the read, never inside it, with the frame the
 * call needs out of the word's leaf path. */
static FB_NOINLINE resil_err
put_same_called(
    resil_cache *c, const resil_args *args, const resil_value *value)
{
	return put_same_at(c, args, value, cache_now(c));
}
#endif

resil_err
resil_cache_put(
    resil_cache *c, const resil_args *args, const resil_value *value)
{
	if (RESIL__UNLIKELY(c == NULL || !args_ok(args)))
		return RESIL_E_INVAL;
#if defined(FB_MEMO_KEY)
	/* The memo's key and the value of its copy (a string, bytes or JSON
	 * of 17 to 64 bytes, an answer's usual size), compared before the
	 * read and before the clock: a re-stamp in a read announced only
	 * then, a leaf (no saved register) on a clock's time word. */
	if (RESIL__UNLIKELY(!memo_key_eq(c, args, 1)))
		return put_general(c, args, value);
	if (RESIL__UNLIKELY(!memo_value_eq(value)))
		return put_memo_any(c, args, value);
	if (RESIL__UNLIKELY(c->now_word == NULL))
		return put_same_called(c, args, value);
	return put_same_at(c, args, value, clock_word(c));
#else
	return put_general(c, args, value);
#endif
}

/* Age of e at now (0 if the clock went backwards). */
static uint64_t
age_of(const entry *e, uint64_t now)
{
	uint64_t at = resil__load64(&e->stored_at);

	return now >= at ? now - at : 0;
}

/* A hit (from a reader, or under the lock): *out shares e's bytes
 * (a reference on e, no copy, no allocation), a scalar is copied, an
 * opaque value copied through its ops. Then the reference bit, written
 * only when clear, so that hits on a hot entry write it once. */
static FB_INLINE resil_err
serve(const resil_cache *c, entry *e, resil_value *out)
{
	switch (e->value.type) {
	case RESIL_VALUE_STRING:
	case RESIL_VALUE_BYTES:
	case RESIL_VALUE_JSON:
		resil__inc64(&e->refs);
		out->type = e->value.type;
		out->u.s.ptr = e->value.u.s.ptr;
		out->u.s.len = e->value.u.s.len;
		out->alloc_.alloc = resil__value_served_alloc;
		out->alloc_.free = resil__cache_served_free;
		out->alloc_.ctx = &e->refs;
		break;
	case RESIL_VALUE_OPAQUE: {
		resil_err err = resil_value_copy(out, &e->value, &c->alloc);

		if (err != RESIL_OK)
			return err;
		break;
	}
	default:
		out->type = e->value.type;
		out->u = e->value.u;
		memset(&out->alloc_, 0, sizeof(out->alloc_));
		break;
	}
	if (resil__load8(&e->ref) == 0)
		resil__store8(&e->ref, 1);
	return RESIL_OK;
}

/* A stale entry met by a reader: removed under the lock, if it is still
 * the key's entry and still stale (a put may have replaced it
 * meanwhile, and then it is served). */
static FB_NOINLINE resil_err
get_stale(resil_cache *c, shard *s, readers *rd, const kkey *k, uint64_t now,
    resil_value *out, uint64_t *age)
{
	entry *e, *dead = NULL;
	uint64_t a = 0;
	resil_err err;

	shard_lock(s);
	e = lookup(s->tab, k);
	if (e == NULL) {
		resil__inc64(&rd->misses);
		err = RESIL_E_NOTFOUND;
	} else if ((a = age_of(e, now)) > c->max_age) {
		detach(s, e);
		s->stale++;
		dead = retire(s, e, 0);
		err = RESIL_E_NOTFOUND;
	} else if ((err = serve(c, e, out)) == RESIL_OK) {
		s->hits_locked++;
	}
	shard_unlock(s);
	free_list(dead);
	if (err == RESIL_OK && age != NULL)
		*age = a;
	return err;
}

/* The key's entry, the memo's or a probe's (kept), in a read begun here
 * (*sp, *rdp, *g); NULL: a miss, counted, no read left open. */
static FB_INLINE entry *
find(resil_cache *c, kkey *k, shard **sp, readers **rdp, uint64_t *g)
{
	entry *e = memo_find(c, k, g);
	readers *rd;
	shard *s;

	if (RESIL__LIKELY(e != NULL)) {
		*sp = memo_.s;
		*rdp = memo_.rd;
		return e;
	}
	key_hash(k);
	s = shard_of(c, k->h);
	rd = &s->rd[resil__thread_stripe(NSTRIPES)];
	*g = read_enter(s, rd);
	e = lookup(resil__loadptr((void *const *)&s->tab), k);
	if (e == NULL) {
		resil__inc64(&rd->misses);
		read_exit(rd, (unsigned)(*g & 1), 0);
		return NULL;
	}
	memo_keep(c, s, rd, e, *g);
	*sp = s;
	*rdp = rd;
	return e;
}

/* resil_cache_get() at now of a prepared key (c and out not NULL). */
static FB_INLINE resil_err
cache_get(
    resil_cache *c, kkey *k, uint64_t now, resil_value *out, uint64_t *age)
{
	uint64_t a, g;
	unsigned parity;
	resil_err err;
	readers *rd;
	shard *s;
	entry *e = find(c, k, &s, &rd, &g);

	if (e == NULL)
		return RESIL_E_NOTFOUND;
	parity = (unsigned)(g & 1);
	a = age_of(e, now);
	if (RESIL__LIKELY(a <= c->max_age)) { /* inclusive: == is served */
		err = serve(c, e, out);
		read_exit(rd, parity, err == RESIL_OK);
		if (err == RESIL_OK && age != NULL)
			*age = a;
		return err;
	}
	read_exit(rd, parity, 0);
	key_hash(k); /* the probe under the lock needs it */
	return get_stale(c, s, rd, k, now, out, age);
}

/* A get at now of a key that is this thread's memo's (memo_fast()),
 * when its value is at most limit old and not an opaque one: *out served
 * (serve()), *age; 1. Otherwise 0 (no read left open): the general way,
 * which also drops a stale entry. */
static FB_INLINE int
get_memo(resil_cache *c, const resil_args *args, uint64_t now,
    uint64_t limit, resil_value *out, uint64_t *age)
{
	uint64_t g, a;
	entry *e;

	if (!memo_fast(c, args, &e, &g))
		return 0;
	a = age_of(e, now);
	if (RESIL__UNLIKELY(a > limit || e->value.type == RESIL_VALUE_OPAQUE)) {
		read_exit(memo_.rd, (unsigned)(g & 1), 0);
		return 0;
	}
	(void)serve(c, e, out); /* not opaque: cannot fail */
	read_exit(memo_.rd, (unsigned)(g & 1), 1);
	*age = a;
	return 1;
}

resil_err
resil_cache_get(
    resil_cache *c, const resil_args *args, resil_value *out, uint64_t *age)
{
	uint64_t now, a;
	kkey k;

	if (c == NULL || !args_ok(args) || out == NULL)
		return RESIL_E_INVAL;
	now = cache_now(c);
	if (RESIL__LIKELY(get_memo(c, args, now, c->max_age, out, &a))) {
		if (age != NULL)
			*age = a;
		return RESIL_OK;
	}
	if (RESIL__UNLIKELY(!key_prep_str(&k, args, strlen(args->method))))
		return RESIL_E_NOMEM; /* never stored */
	return cache_get(c, &k, now, out, age);
}

void
resil__cache_method_init(resil__cache_method *m, const char *name)
{
	m->name = name;
	m->len = strlen(name);
	part_words(name, m->len, &m->w0, &m->w1);
	m->seed = method_part(m->w0, m->w1, m->len);
}

resil_err
resil__cache_put_m(resil_cache *c, const resil__cache_method *m,
    const void *data, size_t len, const resil_value *value)
{
	resil_args args;

	if (RESIL__UNLIKELY(c == NULL || m == NULL || m->name == NULL ||
	        (data == NULL && len > 0)))
		return RESIL_E_INVAL;
	kkey k;

	args.method = m->name;
	args.data = data;
	args.len = len;
	if (RESIL__UNLIKELY(!key_prep(&k, &args, m->len, m->w0, m->w1, m->seed)))
		return RESIL_E_NOMEM;
	return cache_put(c, &k, value, NULL);
}

resil_err
resil__cache_get_m(resil_cache *c, const resil__cache_method *m,
    const void *data, size_t len, resil_value *out, uint64_t *age)
{
	resil_args args;

	if (c == NULL || m == NULL || m->name == NULL ||
	    (data == NULL && len > 0) || out == NULL)
		return RESIL_E_INVAL;
	kkey k;

	args.method = m->name;
	args.data = data;
	args.len = len;
	if (RESIL__UNLIKELY(!key_prep(&k, &args, m->len, m->w0, m->w1, m->seed)))
		return RESIL_E_NOMEM;
	return cache_get(c, &k, cache_now(c), out, age);
}

/* A read-through's answer: every field of *r but the value (served
 * there) written once, as resil__result_clear() and the answer's fields
 * would together. */
static FB_INLINE void
fresh_answer(resil_result *r, uint64_t age)
{
	r->err = RESIL_OK;
	r->source = RESIL_SOURCE_CACHE;
	r->rc = 0;
	r->attempts = 0;
	/* age to error_name are zeros (resil__result_answered()). */
	memset(&r->age, 0,
	    offsetof(resil_result, message) - offsetof(resil_result, age));
	r->age = age;
	r->breaker_state = -1;
	r->message[0] = '\0';
	r->endpoint[0] = '\0';
	r->zone[0] = '\0';
}

/* resil__cache_fresh() the general way (its key not the memo's, or its
 * value opaque or older than the limits). */
static FB_NOINLINE int
fresh_key(resil_cache *c, const resil_args *args, uint64_t now,
    uint64_t fresh, resil_result *out)
{
	uint64_t a, g;
	resil_err err;
	readers *rd;
	shard *s;
	entry *e;
	kkey k;

	if (RESIL__UNLIKELY(args->data == NULL && args->len > 0) ||
	    !key_prep_str(&k, args, strlen(args->method)))
		return 0;
	if ((e = find(c, &k, &s, &rd, &g)) == NULL)
		return 0;
	a = age_of(e, now);
	/* Both limits inclusive: age == fresh still answers. A value past
	 * fresh stays for a failure's fallback (the age limit's rules). */
	err = a <= fresh && a <= c->max_age ? serve(c, e, &out->value)
	                                     : RESIL_E_NOTFOUND;
	read_exit(rd, (unsigned)(g & 1), err == RESIL_OK);
	if (err != RESIL_OK)
		return 0;
	fresh_answer(out, a);
	return 1;
}

/* resil__cache_fresh() of a key that is the memo's (e, in a read of
 * generation g), a value other than a scalar, a old: served (a reference,
 * or an opaque copy). Out of line: the scalar's path keeps few
 * registers. */
static FB_NOINLINE int
fresh_other(resil_cache *c, entry *e, uint64_t g, uint64_t a,
    resil_result *out)
{
	resil_err err = serve(c, e, &out->value);

	read_exit(memo_.rd, (unsigned)(g & 1), err == RESIL_OK);
	if (err != RESIL_OK)
		return 0;
	fresh_answer(out, a);
	return 1;
}

int
resil__cache_fresh(
    resil_cache *c, const resil_args *args, uint64_t fresh, resil_result *out)
{
	uint64_t now = cache_now(c), a, g;
	entry *e;

	if (RESIL__UNLIKELY(!memo_fast(c, args, &e, &g)))
		return fresh_key(c, args, now, fresh, out);
	a = age_of(e, now);
	/* Both limits inclusive: age == fresh still answers. A value past
	 * fresh stays for a failure's fallback (the age limit's rules). */
	if (RESIL__UNLIKELY(a > fresh || a > c->max_age)) {
		read_exit(memo_.rd, (unsigned)(g & 1), 0);
		return 0;
	}
	if (RESIL__UNLIKELY(e->value.type >= RESIL_VALUE_STRING))
		return fresh_other(c, e, g, a, out);
	/* A scalar (null, bool, int, double): copied, no heap. */
	out->value.type = e->value.type;
	out->value.u = e->value.u;
	memset(&out->value.alloc_, 0, sizeof(out->value.alloc_));
	if (resil__load8(&e->ref) == 0)
		resil__store8(&e->ref, 1);
	read_exit(memo_.rd, (unsigned)(g & 1), 1);
	fresh_answer(out, a);
	return 1;
}

resil_err
resil_cache_remove(resil_cache *c, const resil_args *args)
{
	kkey k;

	if (c == NULL || !args_ok(args))
		return RESIL_E_INVAL;
	if (!key_prep_str(&k, args, strlen(args->method)))
		return RESIL_E_NOTFOUND;
	key_hash(&k);
	return remove_key(shard_of(c, k.h), &k);
}

resil_err
resil_cache_stats_get(const resil_cache *c, resil_cache_stats *out)
{
	resil_cache_stats st;
	uint32_t i;
	unsigned j;

	if (c == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&st, 0, sizeof(st));
	st.shards = c->nshards;
	st.memory = sizeof(*c) + c->shards_raw_size;
	for (i = 0; i < c->nshards; i++) {
		/* The lock is the only mutable part of a const cache. */
		shard *s = &c->shards[i];

		shard_lock(s);
		st.entries += s->count;
		st.bytes += s->bytes;
		st.stale += s->stale;
		st.evictions += s->evictions;
		st.hits += s->hits_locked;
		st.memory += s->retired_bytes;
		if (s->tab != NULL)
			st.memory += table_size(s->tab->mask + 1);
		shard_unlock(s);
		for (j = 0; j < NSTRIPES; j++) {
			const readers *rd = &s->rd[j];

			st.hits += resil__load64(&rd->out[0]) +
			    resil__load64(&rd->out[1]);
			st.misses += resil__load64(&rd->misses);
		}
	}
	st.memory += st.bytes;
	*out = st;
	return RESIL_OK;
}


/* resil__cache_answer() the general way. */
static FB_NOINLINE resil_err
answer_key(resil_cache *c, const resil_args *args, uint64_t now,
    resil_value *out, uint64_t *age)
{
	kkey k;

	if (RESIL__UNLIKELY(!key_prep_str(&k, args, strlen(args->method))))
		return RESIL_E_NOMEM; /* never stored */
	return cache_get(c, &k, now, out, age);
}

/* resil__cache_answer() of a key that is the memo's (e, in a read of
 * generation g, a old, within the age limit) holding an opaque value:
 * copied through its ops. */
static FB_NOINLINE resil_err
answer_other(resil_cache *c, entry *e, uint64_t g, uint64_t a,
    resil_value *out, uint64_t *age)
{
	resil_err err = serve(c, e, out);

	read_exit(memo_.rd, (unsigned)(g & 1), err == RESIL_OK);
	if (err == RESIL_OK)
		*age = a;
	return err;
}

/* resil__cache_answer() at now. */
static FB_INLINE resil_err
answer_at(resil_cache *c, const resil_args *args, resil_value *out,
    uint64_t *age, uint64_t now)
{
	uint64_t a, g;
	entry *e;

	if (RESIL__UNLIKELY(!memo_fast_in(c, args, &e, &g, 1)))
		return answer_key(c, args, now, out, age);
	a = age_of(e, now);
	if (RESIL__UNLIKELY(a > c->max_age)) { /* stale: dropped there */
		read_exit(memo_.rd, (unsigned)(g & 1), 0);
		return answer_key(c, args, now, out, age);
	}
	if (RESIL__UNLIKELY(e->value.type == RESIL_VALUE_OPAQUE))
		return answer_other(c, e, g, a, out, age);
	out->type = e->value.type;
	out->u = e->value.u;
	if (e->value.type >= RESIL_VALUE_STRING) {
		/* Bytes: shared (serve()). */
		resil__inc64(&e->refs);
		out->alloc_.alloc = resil__value_served_alloc;
		out->alloc_.free = resil__cache_served_free;
		out->alloc_.ctx = &e->refs;
	} else { /* a scalar (null, bool, int, double): no heap */
		memset(&out->alloc_, 0, sizeof(out->alloc_));
	}
	if (resil__load8(&e->ref) == 0)
		resil__store8(&e->ref, 1);
	read_exit(memo_.rd, (unsigned)(g & 1), 1);
	*age = a;
	return RESIL_OK;
}

/* resil__cache_answer() on a clock without a time word: the clock's
 * call (and the frame it needs) out of the word's leaf path. */
static FB_NOINLINE resil_err
answer_called(resil_cache *c, const resil_args *args, resil_value *out,
    uint64_t *age)
{
	return answer_at(c, args, out, age, cache_now(c));
}

resil_err
resil__cache_answer(resil_cache *c, const resil_args *args, resil_value *out,
    uint64_t *age)
{
	if (RESIL__UNLIKELY(c->now_word == NULL))
		return answer_called(c, args, out, age);
	return answer_at(c, args, out, age, clock_word(c));
}

/* ---- the chain's record of a success ---- */

/* The seeds' chain's one cache put, at now (value_set: value not NULL). */
static FB_INLINE resil_err
record_one(resil_fallback *fb, const resil_args *args,
    const resil_value *value, uint64_t now, int value_set)
{
	/* args and args->method are not NULL here; the bytes may be
	 * (memo_fast() and put_args() check them). */
	return put_at(fb->cache1, args, value, now, value_set);
}

resil_err
resil_fallback_record(
    resil_fallback *fb, const resil_args *args, const resil_value *value)
{
	resil_err first = RESIL_OK;
	size_t i;

	if (fb == NULL || !args_ok(args))
		return RESIL_E_INVAL;
	/* The seeds' chain: one cache, no loop over the stages. */
	if (RESIL__LIKELY(fb->ncache == 1))
		return record_one(fb, args, value, cache_now(fb->cache1), 0);
	for (i = 0; i < fb->n; i++) {
		resil_err err;

		if (fb->h[i].k != RESIL__FB_CACHE)
			continue;
		err = resil_cache_put(fb->h[i].cache, args, value);
		if (err != RESIL_OK && first == RESIL_OK)
			first = err;
	}
	return first;
}

resil_err
resil__fallback_record1(
    resil_fallback *fb, const resil_args *args, const resil_value *value)
{
	resil_cache *c = fb->cache1;

	return put_at(c, args, value, cache_now(c), 1);
}

resil_err
resil__fallback_record1_at(resil_fallback *fb, const resil_args *args,
    const resil_value *value, const resil_clock *clock, uint64_t now)
{
	resil_cache *c = fb->cache1;

	/* now is the cache's time only when the cache reads the same
	 * clock (the one it was made with, the pipeline's: one compare);
	 * otherwise the record reads its own. */
	if (RESIL__UNLIKELY(c->clock_src != clock &&
	        (c->clock.now != clock->now || c->clock.ctx != clock->ctx)))
		now = cache_now(c);
	return put_at(c, args, value, now, 1);
}

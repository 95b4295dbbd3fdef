/*
 * The result cache's structures (lib/fallback_cache.c: its read and write
 * paths; lib/fallback_cache_new.c: its making and an entry's charge).
 * docs/fallback.md describes how they are read without a lock. Never
 * installed.
 */
#ifndef RESIL_FALLBACK_CACHE_INTERNAL_H
#define RESIL_FALLBACK_CACHE_INTERNAL_H

#include <resil/clock.h>
#include <resil/fallback.h>
#include <resil/value.h>

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Reader stripes per shard (threads get distinct ones round robin). */
#define NSTRIPES 8u

/* One allocation per entry: the struct, the key, then (string, bytes,
 * JSON) the value's bytes and a NUL. A hit hands those bytes to the
 * caller without a copy: the value it returns holds a reference on the
 * entry (refs), dropped by resil_value_free(), so an entry lives until
 * the cache and every value served from it are done with it. */
typedef struct entry {
	struct entry *prev; /* the clock's order: towards the hand */
	struct entry *next; /* away from the hand */
	uint64_t hash;
	size_t key_len; /* method, NUL, argument bytes; after the struct */
	size_t mlen;    /* the method's part of them */
	/* A short key's bytes as words (key_prep()): compared without
	 * touching the bytes after the struct. */
	uint64_t w[4];
	/* Atomic: the lengths of a short key's parts (key_lens()) while e is
	 * its key's entry in the table (set before it is published, 0 once
	 * it is taken out or replaced), else 0: with the words, what a
	 * thread's memo checks in place of a probe, in one compare. */
	uint64_t lens;
	size_t charge;
	size_t size;        /* bytes allocated: struct, key, value bytes */
	uint64_t stored_at; /* atomic: a put of the same value re-stamps it */
	uint64_t refs;      /* atomic: the cache's own, one per served value */
	resil_allocator alloc; /* the cache's: a value may outlive it */
	resil_value value;     /* a null value is the NULL sentinel */
	uint8_t ref;           /* set by a hit, cleared by the hand */
} entry;

typedef struct table {
	size_t mask;   /* slots - 1; slots a power of 2 */
	entry *slot[]; /* mask + 1 of them: NULL, TOMB or an entry */
} table;

/* One thread stripe's readers of a shard, on its own cache line. */
typedef struct readers {
	/* Reads begun, and ended (as hits, or not), per generation parity:
	 * in == out + idle when none of that parity is in progress.
	 * Monotonic, and a read ends with exactly one add, so that every
	 * read costs two atomic adds in all (a put's re-stamp too): out is
	 * also the hit count. */
	uint64_t in[2];
	uint64_t out[2];  /* reads ended that served a value */
	uint64_t idle[2]; /* reads ended that did not */
	uint64_t misses;  /* gets with no entry */
	uint64_t pad_[1];
} readers;

typedef struct shard {
	/* Read by every get, written by writers only. */
	table *tab;
	uint64_t gen;
	size_t max_count;
	size_t max_bytes;
	uint64_t hits_locked; /* hits served on the stale path, under lock */
	uint64_t pad0_[3];
	/* The writers' state, under lock. */
	uint8_t lock; /* shard_lock() */
	entry *hand;  /* the clock's next candidate: the oldest entry */
	entry *last;  /* the newest */
	size_t count;
	size_t bytes;
	size_t used; /* slots not NULL: entries and tombstones */
	uint64_t stale;
	uint64_t evictions;
	/* Unlinked entries waiting for one wait for the readers to cover
	 * them all (retire()), under lock, on a line of their own. */
	entry *retired;
	size_t nretired;
	size_t retired_bytes; /* their memory */
	uint64_t pad1_[5];
	readers rd[NSTRIPES];
} shard;

_Static_assert(sizeof(readers) == RESIL__CACHELINE, "one line per stripe");
_Static_assert(sizeof(double) == sizeof(uint64_t), "doubles are 64 bits");
_Static_assert(offsetof(shard, lock) == RESIL__CACHELINE &&
        offsetof(shard, retired) == 2 * RESIL__CACHELINE &&
        offsetof(shard, rd) == 3 * RESIL__CACHELINE,
    "readers' fields, writers' fields and each stripe on lines of their own");

struct resil_cache {
	uint64_t id; /* unique per cache made (never 0): the memos' key */
	resil_allocator alloc;
	resil_clock clock;
	/* The clock given to resil_cache_new() (NULL: the system's), which
	 * the cache copied: a pipeline's, never changed after it is made
	 * (resil__cache_record_at()). */
	const resil_clock *clock_src;
	/* The clock's time word (resil_clock.now_word: the manual clock's,
	 * an event loop's cached time), else NULL: the public put and the
	 * chain's answer read it with one load, no call (clock_word()). */
	const uint64_t *now_word;
	uint64_t max_age;
	uint32_t nshards;
	shard *shards; /* cache-line aligned, in shards_raw */
	void *shards_raw;
	size_t shards_raw_size;
};

/* The bytes of a table of slots slots. */
static inline size_t
table_size(size_t slots)
{
	return offsetof(table, slot) + slots * sizeof(entry *);
}

#endif /* RESIL_FALLBACK_CACHE_INTERNAL_H */

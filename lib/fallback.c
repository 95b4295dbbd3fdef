/*
 * resil fallback: the result cache (sharded, LRU, age-limited) and the
 * chain of fallback handlers.
 */
#include "internal.h"

#include <resil/fallback.h>

#include <string.h>

#include "atomic.h"

/* A failed table insert sets this flag instead of exiting. */
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(obj) (resil__oom = 1)
#include <uthash.h>

/* ---------------------------------------------------------------- */
/* The cache */

typedef struct entry {
	UT_hash_handle hh;
	struct entry *prev; /* towards the most recently used */
	struct entry *next; /* towards the least recently used */
	char *key;          /* method, NUL, argument bytes; after the struct */
	size_t key_len;
	size_t charge;
	uint64_t stored_at;
	resil_value value; /* a null value is the NULL sentinel */
} entry;

typedef struct shard {
	resil__spinlock lock;
	entry *table;
	entry *mru;
	entry *lru;
	size_t count;
	size_t bytes;
	size_t max_count;
	size_t max_bytes;
	uint64_t hits;
	uint64_t misses;
	uint64_t stale;
	uint64_t evictions;
	/* Keep neighbouring shards' locks off one cache line. */
	char pad_[RESIL__CACHELINE];
} shard;

struct resil_cache {
	resil_allocator alloc;
	resil_clock clock;
	uint64_t max_age;
	uint32_t nshards;
	shard *shards;
};

/* FNV-1a over the key parts, without building the key. */
static uint64_t
key_hash(const resil_args *args, size_t mlen)
{
	const unsigned char *p = (const unsigned char *)args->method;
	uint64_t h = UINT64_C(14695981039346656037);
	size_t i;

	for (i = 0; i <= mlen; i++) { /* the NUL separates method and args */
		h ^= p[i];
		h *= UINT64_C(1099511628211);
	}
	p = args->data;
	for (i = 0; i < args->len; i++) {
		h ^= p[i];
		h *= UINT64_C(1099511628211);
	}
	/* Mix the high bits down: the shard comes from the top, uthash's
	 * bucket from the bottom. */
	h ^= h >> 29;
	h *= UINT64_C(0xbf58476d1ce4e5b9);
	h ^= h >> 32;
	return h;
}

static void
key_write(char *dst, const resil_args *args, size_t mlen)
{
	memcpy(dst, args->method, mlen + 1);
	if (args->len > 0)
		memcpy(dst + mlen + 1, args->data, args->len);
}

size_t
resil_cache_entry_charge(const resil_args *args, const resil_value *value)
{
	size_t key_len;

	if (args == NULL || args->method == NULL)
		return 0;
	key_len = strlen(args->method) + 1 + args->len;
	return sizeof(entry) + key_len + resil_value_heap_size(value);
}

resil_err
resil_cache_new(
    resil_cache **out, const resil_cache_config *cfg, resil_diag *diag)
{
	resil_cache_config c;
	const resil_allocator *al;
	resil_cache *cache;
	uint32_t n, i;

	if (out == NULL || cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "cache: NULL argument");
	/* This struct is the first released one: nothing shorter exists. */
	if (cfg->size != sizeof(c))
		return resil__check_size(
		    diag, "cache", "resil_cache_config", cfg->size, sizeof(c));
	resil_cache_config_init(&c);
	memcpy(&c, cfg, cfg->size);
	if (c.max_entries < 1 || (uint64_t)c.max_entries > (UINT64_C(1) << 32))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cache.max_entries: %zu is out of range 1..4294967296",
		    c.max_entries);
	if (c.max_bytes < 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cache.max_bytes: 0 is out of range 1..%zu", SIZE_MAX);
	if (c.shards < 1 || c.shards > 256 || (c.shards & (c.shards - 1)))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "cache.shards: %u is not a power of two in 1..256",
		    (unsigned)c.shards);
	/* Never more shards than entries or bytes: each gets a share. */
	n = c.shards;
	while (n > 1 && ((size_t)n > c.max_entries || (size_t)n > c.max_bytes))
		n >>= 1;

	al = resil__allocator(c.alloc);
	cache = resil__calloc(al, sizeof(*cache));
	if (cache == NULL)
		return RESIL_E_NOMEM;
	cache->shards = resil__calloc(al, sizeof(shard) * n);
	if (cache->shards == NULL) {
		resil__free(al, cache, sizeof(*cache));
		return RESIL_E_NOMEM;
	}
	cache->alloc = *al;
	cache->clock = c.clock != NULL ? *c.clock : *resil_clock_system();
	cache->max_age = c.max_age;
	cache->nshards = n;
	for (i = 0; i < n; i++) {
		shard *s = &cache->shards[i];

		resil__spin_init(&s->lock);
		s->max_count = c.max_entries / n + (i < c.max_entries % n);
		s->max_bytes = c.max_bytes / n + (i < c.max_bytes % n);
	}
	*out = cache;
	return RESIL_OK;
}

static void
entry_free(const resil_allocator *a, entry *e)
{
	resil_value_free(&e->value);
	resil__free(a, e, sizeof(*e) + e->key_len);
}

static void
lru_unlink(shard *s, entry *e)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		s->mru = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		s->lru = e->prev;
	e->prev = e->next = NULL;
}

static void
lru_push(shard *s, entry *e)
{
	e->prev = NULL;
	e->next = s->mru;
	if (s->mru != NULL)
		s->mru->prev = e;
	s->mru = e;
	if (s->lru == NULL)
		s->lru = e;
}

/* Take e out of the shard (table, list, counts); the caller frees it
 * after unlocking. Called with the lock held. */
static void
detach(const resil_allocator *resil__a, shard *s, entry *e)
{
	(void)resil__a;
	HASH_DELETE(hh, s->table, e);
	lru_unlink(s, e);
	s->count--;
	s->bytes -= e->charge;
}

void
resil_cache_free(resil_cache *c)
{
	const resil_allocator *resil__a;

	if (c == NULL)
		return;
	resil__a = &c->alloc;
	resil_cache_clear(c);
	resil__free(resil__a, c->shards, sizeof(shard) * c->nshards);
	resil__free(resil__a, c, sizeof(*c));
}

void
resil_cache_clear(resil_cache *c)
{
	const resil_allocator *resil__a;
	uint32_t i;

	if (c == NULL)
		return;
	resil__a = &c->alloc;
	for (i = 0; i < c->nshards; i++) {
		shard *s = &c->shards[i];
		entry *list, *e;

		resil__spin_lock(&s->lock);
		list = s->mru;
		/* HASH_CLEAR frees the buckets: the entries are freed below,
		 * outside the lock, through the LRU list. */
		HASH_CLEAR(hh, s->table);
		s->mru = s->lru = NULL;
		s->count = 0;
		s->bytes = 0;
		resil__spin_unlock(&s->lock);
		while (list != NULL) {
			e = list;
			list = e->next;
			entry_free(resil__a, e);
		}
	}
}

/* A key on the stack when it is small, on the heap otherwise. */
typedef struct key_buf {
	char small[256];
	char *p;
	size_t len;
} key_buf;

static resil_err
key_make(
    key_buf *k, const resil_allocator *a, const resil_args *args, size_t mlen)
{
	k->len = mlen + 1 + args->len;
	if (k->len < mlen) /* size_t overflow */
		return RESIL_E_NOMEM;
	k->p = k->len <= sizeof(k->small) ? k->small : resil__alloc(a, k->len);
	if (k->p == NULL)
		return RESIL_E_NOMEM;
	key_write(k->p, args, mlen);
	return RESIL_OK;
}

static void
key_done(key_buf *k, const resil_allocator *a)
{
	if (k->p != k->small)
		resil__free(a, k->p, k->len);
}

static int
args_ok(const resil_args *args)
{
	return args != NULL && args->method != NULL &&
	    (args->data != NULL || args->len == 0);
}

resil_err
resil_cache_put(
    resil_cache *c, const resil_args *args, const resil_value *value)
{
	const resil_allocator *resil__a;
	entry *e, *old, *victims = NULL;
	shard *s;
	size_t mlen, key_len, charge;
	uint64_t h;
	int resil__oom = 0;
	resil_err err = RESIL_OK;

	if (c == NULL || !args_ok(args))
		return RESIL_E_INVAL;
	resil__a = &c->alloc;
	mlen = strlen(args->method);
	key_len = mlen + 1 + args->len;
	h = key_hash(args, mlen);
	s = &c->shards[(h >> 32) & (c->nshards - 1)];
	charge = sizeof(entry) + key_len + resil_value_heap_size(value);

	if (charge > s->max_bytes) {
		/* Too big to keep: drop the older answer of the key too, so
		 * that the cache never serves one older than the last. */
		key_buf k;

		if (key_make(&k, resil__a, args, mlen) != RESIL_OK)
			return RESIL_E_NOMEM;
		resil__spin_lock(&s->lock);
		HASH_FIND_BYHASHVALUE(
		    hh, s->table, k.p, key_len, (unsigned)h, old);
		if (old != NULL)
			detach(resil__a, s, old);
		resil__spin_unlock(&s->lock);
		key_done(&k, resil__a);
		if (old != NULL)
			entry_free(resil__a, old);
		return RESIL_E_LIMITED;
	}
	/* Allocate and copy before taking the lock. */
	e = resil__calloc(resil__a, sizeof(*e) + key_len);
	if (e == NULL)
		return RESIL_E_NOMEM;
	e->key = (char *)(e + 1);
	e->key_len = key_len;
	key_write(e->key, args, mlen);
	e->charge = charge;
	resil_value_init(&e->value);
	if (value != NULL &&
	    resil_value_copy(&e->value, value, resil__a) != RESIL_OK) {
		resil__free(resil__a, e, sizeof(*e) + key_len);
		return RESIL_E_NOMEM;
	}

	e->stored_at = resil_clock_now(&c->clock);
	resil__spin_lock(&s->lock);
	HASH_FIND_BYHASHVALUE(hh, s->table, e->key, key_len, (unsigned)h, old);
	/* Insert first, next to the old entry of the key if any: the insert
	 * is the only step that can fail (uthash allocates buckets), and a
	 * failure must leave the cache as it was. */
	HASH_ADD_KEYPTR_BYHASHVALUE(
	    hh, s->table, e->key, key_len, (unsigned)h, e);
	if (resil__oom) {
		err = RESIL_E_NOMEM;
	} else {
		if (old != NULL) {
			detach(resil__a, s, old);
			old->next = victims;
			victims = old;
		}
		/* e is in the table but not yet in the LRU list or the
		 * counts, so it cannot evict itself. */
		while (s->lru != NULL &&
		    (s->count + 1 > s->max_count ||
		        s->bytes + charge > s->max_bytes)) {
			entry *v = s->lru;

			detach(resil__a, s, v);
			s->evictions++;
			v->next = victims;
			victims = v;
		}
		lru_push(s, e);
		s->count++;
		s->bytes += charge;
		e = NULL;
	}
	resil__spin_unlock(&s->lock);
	if (e != NULL)
		entry_free(resil__a, e);
	while (victims != NULL) {
		entry *v = victims;

		victims = v->next;
		entry_free(resil__a, v);
	}
	return err;
}

resil_err
resil_cache_get(
    resil_cache *c, const resil_args *args, resil_value *out, uint64_t *age)
{
	const resil_allocator *resil__a;
	entry *e, *dead = NULL;
	shard *s;
	key_buf k;
	size_t mlen;
	uint64_t h, now, a = 0;
	resil_err err;

	if (c == NULL || !args_ok(args) || out == NULL)
		return RESIL_E_INVAL;
	resil__a = &c->alloc;
	mlen = strlen(args->method);
	h = key_hash(args, mlen);
	s = &c->shards[(h >> 32) & (c->nshards - 1)];
	err = key_make(&k, resil__a, args, mlen);
	if (err != RESIL_OK)
		return err;
	now = resil_clock_now(&c->clock);

	resil__spin_lock(&s->lock);
	HASH_FIND_BYHASHVALUE(hh, s->table, k.p, k.len, (unsigned)h, e);
	if (e == NULL) {
		s->misses++;
		err = RESIL_E_NOTFOUND;
	} else {
		a = now >= e->stored_at ? now - e->stored_at : 0;
		if (a > c->max_age) {
			/* Inclusive limit: age == max_age is still served. */
			detach(resil__a, s, e);
			s->stale++;
			dead = e;
			err = RESIL_E_NOTFOUND;
		} else {
			err = resil_value_copy(out, &e->value, resil__a);
			if (err == RESIL_OK) {
				s->hits++;
				lru_unlink(s, e);
				lru_push(s, e);
			}
		}
	}
	resil__spin_unlock(&s->lock);
	key_done(&k, resil__a);
	if (dead != NULL)
		entry_free(resil__a, dead);
	if (err == RESIL_OK && age != NULL)
		*age = a;
	return err;
}

resil_err
resil_cache_remove(resil_cache *c, const resil_args *args)
{
	const resil_allocator *resil__a;
	entry *e;
	shard *s;
	key_buf k;
	size_t mlen;
	uint64_t h;
	resil_err err;

	if (c == NULL || !args_ok(args))
		return RESIL_E_INVAL;
	resil__a = &c->alloc;
	mlen = strlen(args->method);
	h = key_hash(args, mlen);
	s = &c->shards[(h >> 32) & (c->nshards - 1)];
	err = key_make(&k, resil__a, args, mlen);
	if (err != RESIL_OK)
		return err;
	resil__spin_lock(&s->lock);
	HASH_FIND_BYHASHVALUE(hh, s->table, k.p, k.len, (unsigned)h, e);
	if (e != NULL)
		detach(resil__a, s, e);
	resil__spin_unlock(&s->lock);
	key_done(&k, resil__a);
	if (e == NULL)
		return RESIL_E_NOTFOUND;
	entry_free(resil__a, e);
	return RESIL_OK;
}

resil_err
resil_cache_stats_get(const resil_cache *c, resil_cache_stats *out)
{
	resil_cache_stats st;
	uint32_t i;

	if (c == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&st, 0, sizeof(st));
	st.shards = c->nshards;
	st.memory = sizeof(*c) + (uint64_t)sizeof(shard) * c->nshards;
	for (i = 0; i < c->nshards; i++) {
		/* The lock is the only mutable part of a const cache. */
		shard *s = &c->shards[i];

		resil__spin_lock(&s->lock);
		st.entries += s->count;
		st.bytes += s->bytes;
		st.hits += s->hits;
		st.misses += s->misses;
		st.stale += s->stale;
		st.evictions += s->evictions;
		if (s->table != NULL)
			st.memory += sizeof(UT_hash_table) +
			    (uint64_t)s->table->hh.tbl->num_buckets *
			        sizeof(UT_hash_bucket);
		resil__spin_unlock(&s->lock);
	}
	st.memory += st.bytes;
	*out = st;
	return RESIL_OK;
}

/* ---------------------------------------------------------------- */
/* The chain */

typedef enum kind { K_CACHE, K_MOCK, K_USER } kind;

typedef struct handler {
	kind k;
	resil_cache *cache;
	const resil_mock *mock;
	resil_fallback_fn fn;
	void *ctx;
} handler;

struct resil_fallback {
	resil_allocator alloc;
	handler *h;
	size_t n;
	size_t ncache; /* how many of the handlers are caches */
	size_t nmock;  /* how many are mocks */
};

resil_err
resil_fallback_new(
    resil_fallback **out, const resil_fallback_config *cfg, resil_diag *diag)
{
	resil_fallback_config c;
	const resil_allocator *al;
	resil_fallback *fb;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fallback: NULL argument");
	resil_fallback_config_init(&c);
	if (cfg != NULL) {
		/* This struct is the first released one: nothing shorter
		 * exists. */
		if (cfg->size != sizeof(c))
			return resil__check_size(diag, "fallback",
			    "resil_fallback_config", cfg->size, sizeof(c));
		memcpy(&c, cfg, cfg->size);
	}
	al = resil__allocator(c.alloc);
	fb = resil__calloc(al, sizeof(*fb));
	if (fb == NULL)
		return RESIL_E_NOMEM;
	fb->alloc = *al;
	*out = fb;
	return RESIL_OK;
}

void
resil_fallback_free(resil_fallback *fb)
{
	if (fb == NULL)
		return;
	if (fb->h != NULL)
		resil__free(&fb->alloc, fb->h, sizeof(handler) * fb->n);
	resil__free(&fb->alloc, fb, sizeof(*fb));
}

static resil_err
add(resil_fallback *fb, const handler *h)
{
	handler *grown;

	/* Configuration time: one allocation per handler is fine. */
	grown = resil__alloc(&fb->alloc, sizeof(handler) * (fb->n + 1));
	if (grown == NULL)
		return RESIL_E_NOMEM;
	if (fb->n > 0)
		memcpy(grown, fb->h, sizeof(handler) * fb->n);
	grown[fb->n] = *h;
	if (fb->h != NULL)
		resil__free(&fb->alloc, fb->h, sizeof(handler) * fb->n);
	fb->h = grown;
	fb->n++;
	fb->ncache += h->k == K_CACHE;
	fb->nmock += h->k == K_MOCK;
	return RESIL_OK;
}

resil_err
resil_fallback_add_cache(resil_fallback *fb, resil_cache *c)
{
	handler h;

	if (fb == NULL || c == NULL)
		return RESIL_E_INVAL;
	memset(&h, 0, sizeof(h));
	h.k = K_CACHE;
	h.cache = c;
	return add(fb, &h);
}

resil_err
resil_fallback_add_mock(resil_fallback *fb, const resil_mock *m)
{
	handler h;

	if (fb == NULL || m == NULL)
		return RESIL_E_INVAL;
	memset(&h, 0, sizeof(h));
	h.k = K_MOCK;
	h.mock = m;
	return add(fb, &h);
}

resil_err
resil_fallback_add_handler(resil_fallback *fb, resil_fallback_fn fn, void *ctx)
{
	handler h;

	if (fb == NULL || fn == NULL)
		return RESIL_E_INVAL;
	memset(&h, 0, sizeof(h));
	h.k = K_USER;
	h.fn = fn;
	h.ctx = ctx;
	return add(fb, &h);
}

size_t
resil_fallback_count(const resil_fallback *fb)
{
	return fb == NULL ? 0 : fb->n;
}

resil_err
resil_fallback_record(
    resil_fallback *fb, const resil_args *args, const resil_value *value)
{
	resil_err first = RESIL_OK;
	size_t i;

	if (fb == NULL || !args_ok(args))
		return RESIL_E_INVAL;
	for (i = 0; i < fb->n; i++) {
		resil_err err;

		if (fb->h[i].k != K_CACHE)
			continue;
		err = resil_cache_put(fb->h[i].cache, args, value);
		if (err != RESIL_OK && first == RESIL_OK)
			first = err;
	}
	return first;
}

/* "(rc N)": the user's return code in a message. */
static void
msg_rc(resil__msg *o, int rc)
{
	RESIL__MSG_LIT(o, "(rc ");
	resil__msg_int(o, rc);
	RESIL__MSG_LIT(o, ")");
}

/* "<what>; original failure: <error>[ (rc N)]"; what is a literal. */
#define DESCRIBE(r, what, f) describe((r), (what), sizeof(what) - 1, (f))

static void
describe(
    resil_result *r, const char *what, size_t what_len, const resil_failure *f)
{
	resil__msg o;

	resil__msg_start(&o, r->message, sizeof(r->message));
	resil__msg_put(&o, what, what_len);
	RESIL__MSG_LIT(&o, "; original failure: ");
	resil__msg_str(&o, resil_strerror(f->err));
	if (f->err == RESIL_E_CALL) {
		RESIL__MSG_LIT(&o, " ");
		msg_rc(&o, f->rc);
	}
}

/* An empty result that carries the original failure. */
static void
result_start(resil_result *r, const resil_failure *failure)
{
	resil_result_init(r);
	r->cause = failure->err;
	r->cause_rc = failure->rc;
	r->attempts = failure->attempts;
}

resil_err
resil_fallback_recover(resil_fallback *fb, const resil_args *args,
    const resil_failure *failure, resil_result *out)
{
	resil_result r;
	resil_value v;
	resil__msg o;
	size_t i;

	if (!args_ok(args) || failure == NULL || out == NULL ||
	    failure->err == RESIL_OK || failure->err == RESIL_E_BUSINESS)
		return RESIL_E_INVAL;
	if (fb == NULL || fb->n == 0) {
		/* No fallback configured: the original error stands. */
		resil_result_init(&r);
		r.err = failure->err;
		r.rc = failure->rc;
		r.source = RESIL_SOURCE_LIVE;
		r.attempts = failure->attempts;
		r.cause = failure->err;
		r.cause_rc = failure->rc;
		resil__msg_start(&o, r.message, sizeof(r.message));
		resil__msg_str(&o, resil_strerror(failure->err));
		*out = r;
		return r.err;
	}
	for (i = 0; i < fb->n; i++) {
		const handler *h = &fb->h[i];
		resil_err err;
		uint64_t age = 0;

		switch (h->k) {
		case K_CACHE:
			/* v is written only on a hit; the answer is built
			 * straight in *out. */
			err = resil_cache_get(h->cache, args, &v, &age);
			if (err == RESIL_E_NOTFOUND)
				continue;
			if (err != RESIL_OK)
				continue; /* out of memory: try the next */
			result_start(out, failure);
			out->value = v;
			out->err = RESIL_OK;
			out->source = RESIL_SOURCE_CACHE;
			out->age = age;
			DESCRIBE(out, "cached value", failure);
			return RESIL_OK;
		case K_MOCK:
			/* The mock writes *out only when it answers (it
			 * builds the whole result itself), so it can write
			 * there directly: no copy. */
			err = resil_mock_invoke(h->mock, args, failure, out);
			if (err == RESIL_E_NOTFOUND || err == RESIL_E_NOMEM ||
			    err == RESIL_E_INVAL)
				continue;
			return out->err;
		case K_USER:
			result_start(&r, failure);
			if (h->fn(h->ctx, args, failure, &r) !=
			    RESIL_FALLBACK_ANSWER) {
				resil_result_free(&r);
				continue;
			}
			/* An answer of RESIL_E_UNAVAILABLE stops the chain
			 * and stays "unavailable". */
			if (r.source == RESIL_SOURCE_UNAVAILABLE &&
			    r.err != RESIL_E_UNAVAILABLE)
				r.source = RESIL_SOURCE_FALLBACK;
			*out = r;
			return r.err;
		}
	}
	result_start(&r, failure);
	DESCRIBE(&r, "no live, cached or mock value", failure);
	*out = r;
	return r.err;
}

resil_err
resil_fallback_call(resil_fallback *fb, const resil_args *args,
    resil_call_fn fn, void *ctx, const resil_classifier *cls,
    resil_result *out)
{
	resil_failure f;
	resil_result r;
	resil_value v;
	resil_outcome o;
	resil__msg m_;
	size_t i;
	int rc;

	if (!args_ok(args) || fn == NULL || out == NULL)
		return RESIL_E_INVAL;
	/* The mock stage wraps everything: a force mock never calls. */
	for (i = 0; fb != NULL && fb->nmock > 0 && i < fb->n; i++) {
		const resil_mock_spec *spec;

		if (fb->h[i].k != K_MOCK ||
		    resil_mock_lookup(fb->h[i].mock, args->method, &spec) !=
		        RESIL_OK)
			continue;
		if (spec->action != RESIL_MOCK_NONE &&
		    spec->mode == RESIL_MOCK_FORCE) {
			/* Written only when it answers: no copy needed. */
			resil_err err =
			    resil_mock_invoke(fb->h[i].mock, args, NULL, out);

			if (err == RESIL_E_NOMEM)
				return err;
			return out->err;
		}
	}

	/* A null value is all zero bits (resil_value_init), and the default
	 * classifier is inlined: this is the path of every call. */
	memset(&v, 0, sizeof(v));
	rc = fn(ctx, args, &v);
	o = cls == NULL || cls->fn == NULL
	    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
	    : resil_classify(cls, rc, &v);
	if (o == RESIL_OUTCOME_SUCCESS ||
	    (o == RESIL_OUTCOME_IGNORED && rc == 0)) {
		/* Only a success is recorded; both are answered live,
		 * straight into *out. */
		if (o == RESIL_OUTCOME_SUCCESS && fb != NULL && fb->ncache > 0)
			(void)resil_fallback_record(fb, args, &v);
		resil_result_init(out);
		out->err = RESIL_OK;
		out->rc = rc;
		out->attempts = 1;
		out->source = RESIL_SOURCE_LIVE;
		out->value = v;
		return RESIL_OK;
	}
	resil_value_free(&v);
	if (o == RESIL_OUTCOME_BUSINESS || o == RESIL_OUTCOME_IGNORED) {
		/* Business, or ignored with a code: answered live, without
		 * a fallback. */
		resil_result_init(&r);
		r.rc = rc;
		r.attempts = 1;
		r.source = RESIL_SOURCE_LIVE;
		resil__msg_start(&m_, r.message, sizeof(r.message));
		if (o == RESIL_OUTCOME_BUSINESS) {
			r.err = RESIL_E_BUSINESS;
			RESIL__MSG_LIT(&m_, "business error ");
			msg_rc(&m_, rc);
		} else {
			r.err = RESIL_E_CALL;
			RESIL__MSG_LIT(&m_, "the call failed ");
			msg_rc(&m_, rc);
			RESIL__MSG_LIT(&m_, ", outcome ignored");
		}
		*out = r;
		return r.err;
	}
	f.err = RESIL_E_CALL;
	f.rc = rc;
	f.attempts = 1;
	return resil_fallback_recover(fb, args, &f, out);
}

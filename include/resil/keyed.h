/*
 * resil keyed: families of breakers, rate limiters or bulkheads, one
 * instance per key (a host, a tenant, an argument's value).
 *
 * A family holds one configuration (issue 42 adds adaptive client
 * throttles, include/resil/throttle.h, as a fourth kind). The first use of a key (any bytes, up
 * to max_key_len) makes that key's instance from it; later uses find the
 * instance without a lock. A family never holds more than max_keys
 * instances: when it is full, a new key takes the place of an idle key
 * (CLOCK, "second chance": a key used since the hand last passed it is
 * skipped once). A key is never evicted while it is protected:
 *   - a call holds one of its permits (a breaker permit not yet recorded or
 *     released, a bulkhead slot not yet released);
 *   - breaker: its state is not CLOSED, or its window holds a failure or a
 *     slow call, or a failure streak is running;
 *   - rate limiter: it has fewer permits than its burst (it would come back
 *     with a full burst: churning keys must not reset a limit);
 *   - bulkhead: an adaptive limit has moved from its start;
 *   - throttle: its window holds a request that was not accepted (a local
 *     rejection, a refusal by the server, a call with no answer or one
 *     still running: window_requests > window_accepts). A fresh throttle
 *     would admit what this one sheds.
 * So an evicted key's instance is, but for the successes it counted, the
 * same as a fresh one: nothing a caller can reset by churning keys. When
 * every key is protected, a new key gets the family's overflow instance,
 * one instance made with the family (from the same configuration) and
 * shared by every key that found no place, with a RESIL_KEYED_EVENT_OVERFLOW
 * event and the overflowed count; the key itself is not remembered, and
 * its next call tries again for a place. A sweep that finds no place looks
 * at every key at most twice; the next max_keys / 64 new keys then go to
 * the overflow without one, so that a family full of protected keys costs
 * at most about 128 looks per new key.
 *
 * Memory: fixed at creation for the table (24 to 48 bytes per key of
 * max_keys) and the entries (128 bytes each, a key of up to 72 bytes
 * inline), plus, per live key, its instance (resil_keyed_metrics.
 * instance_bytes: about 1.2 KiB for the default breaker, a count window of
 * 100) and a longer key's bytes. resil_keyed_metrics.bytes_bound is the
 * most the family can ever hold; every byte goes through cfg.alloc.
 *
 * Thread safety: every function except _new and _free may run concurrently
 * on one family from any number of threads; _new and _free must not
 * overlap any other call on the same family. Finding an existing key takes
 * no lock, allocates nothing and makes no system call: one hash of the key
 * and a probe of the table, then the instance's own path. A breaker's
 * acquire and a rate limiter's try_acquire hold the key's entry in the
 * calling thread's hazard slot (a plain store, no locked instruction; a
 * breaker permit keeps it until it is recorded or released, on any
 * thread) where the family was made with membarrier(2)'s private
 * expedited fence; elsewhere, on a thread's first call (which takes its
 * slot: 64 bytes from malloc, kept for the process and reused by later
 * threads), in a call made while the thread holds a permit already, and
 * for handles, bulkheads and throttles, the entry is pinned by one
 * compare-and-swap. RESIL_KEYED_NO_MEMBARRIER set (not "0") in the
 * environment when a family is made makes it pin always. A key's first
 * use, an eviction (one membarrier system call in a fenced family) and an
 * overflow take the family's lock and allocate. Concurrent first uses of
 * one key make exactly one instance. A key holds at most 2^24 - 1 pins at
 * once; one more waits (spins) for one of them to end. The listener is called after the change took
 * effect, outside the lock, on the thread that made it; it must not free
 * the family.
 */
#ifndef RESIL_KEYED_H
#define RESIL_KEYED_H

#include <stdbool.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/limit.h>
#include <resil/resil.h>
#include <resil/throttle.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_keyed resil_keyed;

typedef enum resil_keyed_kind {
	RESIL_KEYED_BREAKER = 0,
	RESIL_KEYED_RATELIMIT = 1,
	RESIL_KEYED_BULKHEAD = 2,
	RESIL_KEYED_THROTTLE = 3 /* issue 42: adaptive throttles per key */
} resil_keyed_kind;

/* How many kinds there are. */
#define RESIL_KEYED_KINDS 4

/* "breaker", "ratelimit", "bulkhead", "throttle" or "unknown". */
RESIL_API const char *resil_keyed_kind_name(resil_keyed_kind kind);

/* The largest max_keys and max_key_len a family accepts. */
#define RESIL_KEYED_MAX_KEYS (UINT32_C(1) << 24)
#define RESIL_KEYED_MAX_KEY_LEN 4096u
/* Keys up to this many bytes are kept inside their entry. */
#define RESIL_KEYED_INLINE_KEY 72u

typedef enum resil_keyed_event_type {
	RESIL_KEYED_EVENT_CREATED = 0,  /* a key's instance was made */
	RESIL_KEYED_EVENT_EVICTED = 1,  /* an idle key made room */
	RESIL_KEYED_EVENT_OVERFLOW = 2  /* a new key got the overflow
	                                   instance: every key protected */
} resil_keyed_event_type;

/* "created", "evicted", "overflow" or "unknown". */
RESIL_API const char *resil_keyed_event_name(resil_keyed_event_type t);

/* One event: the key it is about (valid during the call only) and the
 * keys live after it. */
typedef struct resil_keyed_event {
	resil_keyed_event_type type;
	const void *key;
	size_t key_len;
	uint32_t keys;
} resil_keyed_event;

typedef void (*resil_keyed_listener_fn)(
    const resil_keyed_event *ev, void *ctx);

/*
 * A value with limits of its own (Sentinel's hot-parameter exceptions):
 * the key's instance is made with these instead of the family's. Rate
 * limiter families: rate, period_ns and burst (each 0: the family's);
 * bulkhead families: max_concurrent (0: the family's). Refused on a breaker
 * family. The key is copied at creation.
 */
typedef struct resil_keyed_override {
	const void *key;
	size_t key_len;
	uint32_t rate;
	uint64_t period_ns;
	uint32_t burst;
	uint32_t max_concurrent;
} resil_keyed_override;

/* The most overrides a family takes. */
#define RESIL_KEYED_MAX_OVERRIDES 1024u

typedef struct resil_keyed_config {
	size_t size; /* sizeof(resil_keyed_config), set by _init() */
	resil_keyed_kind kind;
	uint32_t max_keys;    /* live instances, 1..RESIL_KEYED_MAX_KEYS */
	uint32_t max_key_len; /* 1..RESIL_KEYED_MAX_KEY_LEN; a longer key is
	                         refused (RESIL_E_INVAL) */
	/* The instances' configuration, the one of kind. Its alloc is
	 * ignored (the family's is used); its clock and listener are every
	 * instance's. */
	resil_breaker_config breaker;
	resil_ratelimit_config ratelimit;
	resil_bulkhead_config bulkhead;
	/* Throttle families (issue 42): every key's throttle is made from
	 * this (its seed included: the draws of each key are the same
	 * seeded sequence). Its alloc is ignored, its clock and listener
	 * are every instance's. */
	resil_throttle_config throttle;
	/* Per-value limits (rate limiter and bulkhead families). */
	const resil_keyed_override *overrides;
	size_t n_overrides;

	resil_keyed_listener_fn listener; /* optional */
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	/* The table's hash seed (0: a fixed default). Keys come from
	 * requests: a seed of the caller's makes colliding keys harder to
	 * build. The hash is fast, not cryptographic. */
	uint64_t hash_seed;
} resil_keyed_config;

/* Defaults: a breaker family of 10000 keys of up to 256 bytes, each
 * instance with its module's defaults, no overrides, malloc(). */
static inline void
resil_keyed_config_init(resil_keyed_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->kind = RESIL_KEYED_BREAKER;
	cfg->max_keys = 10000;
	cfg->max_key_len = 256;
	resil_breaker_config_init(&cfg->breaker);
	resil_ratelimit_config_init(&cfg->ratelimit);
	resil_bulkhead_config_init(&cfg->bulkhead);
	resil_throttle_config_init(&cfg->throttle);
}

static inline resil_keyed_config
resil_keyed_config_default(void)
{
	resil_keyed_config cfg;

	resil_keyed_config_init(&cfg);
	return cfg;
}

/*
 * Create an empty family (and its overflow instance) and store it in *out.
 *
 * *cfg, the configuration of its kind, *cfg->alloc, the clock and the
 * overrides (their keys included) are copied. The ctx pointers (the
 * listeners' and the clock's) must outlive the family. The caller owns
 * *out and releases it with resil_keyed_free(). diag may be NULL.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown
 * cfg->size or kind, a bad setting of the family or of its kind (named in
 * *diag, e.g. "keyed.max_keys: 0 is out of range 1..16777216"), an
 * override on a breaker family, an empty, too long or repeated override
 * key, an override whose limits do not validate; RESIL_E_NOMEM. On error
 * *out is unchanged.
 */
RESIL_API resil_err resil_keyed_new(
    resil_keyed **out, const resil_keyed_config *cfg, resil_diag *diag);

/* Release k, every instance and every key. NULL is a harmless no-op.
 * Permits still out must not be used after this (the threads' slots they
 * held are let go). */
RESIL_API void resil_keyed_free(resil_keyed *k);

/* This family's kind. */
RESIL_API resil_keyed_kind resil_keyed_get_kind(const resil_keyed *k);

/*
 * A permit of a keyed breaker or bulkhead: the instance's permit and the
 * key's entry, which stays in the family (it cannot be evicted) until the
 * permit is recorded or released. Opaque.
 */
typedef struct resil_keyed_permit {
	resil_permit permit;
	void *entry;
} resil_keyed_permit;

/*
 * Breaker families. acquire finds (or makes) key's breaker and asks it for
 * a permit, exactly as resil_breaker_acquire() does: RESIL_OK, *permit
 * filled; RESIL_E_OPEN. Also RESIL_E_INVAL for a NULL argument, an empty
 * key, a key longer than max_key_len or a family of another kind;
 * RESIL_E_NOMEM when a new key's instance could not be made (nothing is
 * held then). *permit is written only on RESIL_OK.
 *
 * record, record_duration and release end the permit as their
 * resil_breaker_ namesakes do, with their return codes; the entry is let
 * go whatever they return, except RESIL_E_INVAL for a NULL argument or a
 * permit that holds no entry (a zeroed or spent one), which changes
 * nothing.
 */
RESIL_API resil_err resil_keyed_breaker_acquire(resil_keyed *k,
    const void *key, size_t key_len, resil_keyed_permit *permit);
RESIL_API resil_err resil_keyed_breaker_record(
    resil_keyed *k, resil_keyed_permit *permit, resil_outcome outcome);
RESIL_API resil_err resil_keyed_breaker_record_duration(resil_keyed *k,
    resil_keyed_permit *permit, resil_outcome outcome, uint64_t duration);
RESIL_API resil_err resil_keyed_breaker_release(
    resil_keyed *k, resil_keyed_permit *permit);

/*
 * Rate limiter families: resil_ratelimit_try_acquire() on key's limiter
 * (made on first use, from its override if it has one), with its return
 * codes, and RESIL_E_INVAL / RESIL_E_NOMEM as for the breaker's acquire.
 */
RESIL_API resil_err resil_keyed_ratelimit_try_acquire(resil_keyed *k,
    const void *key, size_t key_len, uint32_t permits,
    uint64_t *retry_after);

/*
 * Bulkhead families: resil_bulkhead_try_acquire() on key's bulkhead;
 * on RESIL_OK *permit holds the slot until resil_keyed_bulkhead_complete()
 * (release and record, as resil_bulkhead_complete()) or
 * resil_keyed_bulkhead_release() gives it back.
 */
RESIL_API resil_err resil_keyed_bulkhead_try_acquire(resil_keyed *k,
    const void *key, size_t key_len, resil_keyed_permit *permit);
RESIL_API resil_err resil_keyed_bulkhead_release(
    resil_keyed *k, resil_keyed_permit *permit);
RESIL_API resil_err resil_keyed_bulkhead_complete(resil_keyed *k,
    resil_keyed_permit *permit, resil_outcome outcome, uint64_t latency);

/*
 * Throttle families (issue 42): resil_throttle_admit_class() on key's
 * throttle (made on first use), with its return codes (RESIL_OK,
 * RESIL_E_LIMITED: shed locally), and RESIL_E_INVAL / RESIL_E_NOMEM as for
 * the breaker's acquire. On RESIL_OK *permit holds the key (it cannot be
 * evicted) until resil_keyed_throttle_report() tells the throttle what
 * became of the call (resil_throttle_report()) and lets the key go. An
 * admitted call that is never reported stays a request without an accept
 * in the key's window. report: RESIL_E_INVAL for a NULL argument or a
 * spent permit, which changes nothing.
 */
RESIL_API resil_err resil_keyed_throttle_admit(resil_keyed *k,
    const void *key, size_t key_len, int cls, resil_keyed_permit *permit);
RESIL_API resil_err resil_keyed_throttle_report(resil_keyed *k,
    resil_keyed_permit *permit, resil_throttle_result result);

/* One key's instance, as one of the four; NULL for another kind. */
typedef struct resil_keyed_instance {
	resil_keyed_kind kind;
	resil_breaker *breaker;
	resil_ratelimit *ratelimit;
	resil_bulkhead *bulkhead;
	resil_throttle *throttle;
} resil_keyed_instance;

/*
 * Run fn on key's live instance, which cannot be evicted while fn runs
 * (fn may read its metrics or state, or drive it by hand; it must not call
 * into the family). Makes no instance: RESIL_E_NOTFOUND when key has none
 * now. Returns RESIL_OK after fn ran; RESIL_E_INVAL for a NULL argument or
 * a bad key.
 */
typedef void (*resil_keyed_visit_fn)(const void *key, size_t key_len,
    const resil_keyed_instance *inst, void *ctx);

RESIL_API resil_err resil_keyed_with(resil_keyed *k, const void *key,
    size_t key_len, resil_keyed_visit_fn fn, void *ctx);

/*
 * A held key: find (or make) key's instance once, then drive it directly
 * with the resil_breaker_ / resil_ratelimit_ / resil_bulkhead_ calls on
 * h->instance, paying only the instance (no hash, no lookup, no pin per
 * call). resil_keyed_get() finds or makes key's instance as acquire does
 * (RESIL_E_INVAL, RESIL_E_NOMEM likewise) and holds it: the key cannot be
 * evicted, and its instance stays valid, until resil_keyed_put(). When
 * the family has no place for a new key, h->instance is the overflow
 * instance and h->overflow is true (the event and the count are as for
 * acquire). Every permit taken on h->instance must be recorded or
 * released before the put. A held key counts as protected, so a family
 * whose every key is held sends new keys to the overflow. A handle may be
 * used and put from any thread; put it once (a second put of the same
 * handle, or a put of a zeroed one, is RESIL_E_INVAL and changes nothing).
 */
typedef struct resil_keyed_handle {
	resil_keyed_instance instance;
	bool overflow;
	void *entry; /* opaque */
} resil_keyed_handle;

RESIL_API resil_err resil_keyed_get(resil_keyed *k, const void *key,
    size_t key_len, resil_keyed_handle *h);
RESIL_API resil_err resil_keyed_put(resil_keyed *k, resil_keyed_handle *h);

/* The overflow instance (shared by the keys that found no place). Valid
 * while k is. */
RESIL_API resil_err resil_keyed_overflow(
    resil_keyed *k, resil_keyed_instance *out);

/*
 * Visit every live key, in the order of the entries (not of use), under
 * the family's lock: no key is made or evicted meanwhile, and calls on
 * existing keys go on. fn must not call into the family. Returns RESIL_OK
 * or RESIL_E_INVAL for a NULL argument.
 */
RESIL_API resil_err resil_keyed_foreach(
    resil_keyed *k, resil_keyed_visit_fn fn, void *ctx);

typedef struct resil_keyed_metrics {
	uint32_t keys;         /* live keys now */
	uint32_t max_keys;     /* the configured bound */
	uint64_t created;      /* instances made for keys (overflow not) */
	uint64_t evicted;      /* idle keys evicted */
	uint64_t overflowed;   /* calls of new keys given the overflow */
	uint64_t bytes;        /* bytes the family holds now */
	uint64_t bytes_fixed;  /* of which fixed at creation */
	uint64_t instance_bytes; /* one instance of the family's config */
	uint64_t bytes_bound;  /* the most it can ever hold */
} resil_keyed_metrics;

/* Fill *out. RESIL_OK or RESIL_E_INVAL for a NULL argument. */
RESIL_API resil_err resil_keyed_get_metrics(
    resil_keyed *k, resil_keyed_metrics *out);


/*
 * Seen: what each live key's instance counted, and the worst keys.
 *
 * A key's figures are those of its live instance: calls (breaker: outcomes
 * recorded; limits: acquires answered; throttle: admits answered),
 * failures (breaker: failures; throttle: refusals by the server, reports
 * of RESIL_THROTTLE_REJECTED) and rejections (RESIL_E_OPEN or
 * RESIL_E_LIMITED answers); state is the
 * breaker's (RESIL_BREAKER_CLOSED for the limits). An evicted key's counts
 * go with it (only idle, unprotected keys are evicted).
 */
typedef enum resil_keyed_rank {
	RESIL_KEYED_BY_FAILURES = 0,   /* then rejections, then calls */
	RESIL_KEYED_BY_REJECTIONS = 1  /* then failures, then calls */
} resil_keyed_rank;

#define RESIL_KEYED_TOP_KEY 64u

typedef struct resil_keyed_top_entry {
	uint8_t key[RESIL_KEYED_TOP_KEY]; /* the key's first bytes */
	size_t key_len;                   /* its whole length */
	uint64_t calls;
	uint64_t failures;
	uint64_t rejections;
	resil_breaker_state state;
} resil_keyed_top_entry;

/*
 * The n live keys ranked first by `by` (ties: the entry order), into
 * out[0..*got), best first; *got <= n (fewer keys live). Under the
 * family's lock, one metrics read per live key. Returns RESIL_OK;
 * RESIL_E_INVAL for a NULL argument or an unknown rank; RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_keyed_top(resil_keyed *k, resil_keyed_rank by,
    resil_keyed_top_entry *out, size_t n, size_t *got);

/*
 * The family in Prometheus's text format (version 0.0.4), with a label
 * family="<family>" on every sample and key="<key>" on the per-key ones:
 * resil_keyed_keys, resil_keyed_max_keys, resil_keyed_bytes (gauges),
 * resil_keyed_created_total, resil_keyed_evicted_total,
 * resil_keyed_overflow_total (counters); per key resil_keyed_calls_total,
 * resil_keyed_failures_total (breaker and throttle families),
 * resil_keyed_rejections_total and, for a
 * breaker family, resil_keyed_breaker_open (1 when not CLOSED).
 *
 * Cardinality cap: at most max_series keys get series of their own, those
 * first by failures + rejections (then calls); the rest are summed under
 * key="__other__" (the open gauge: how many of them are open); the
 * overflow instance, once it has seen a call, has series of its own
 * under key="__overflow__". A key's label value is the key with a
 * backslash doubled, bytes of no valid UTF-8 sequence and control bytes
 * but newline as \xNN, and a key spelt __other__ as \x5f_other__ (valid
 * UTF-8 kept; __overflow__ likewise), then the format's escapes (\\,
 * \", \n): any key gives valid text, no two keys the same value
 * (docs/keyed.md, "Seen"). The registry writes every pipeline's families
 * in its own text (resil_registry_write_prometheus()).
 *
 * Writes at most cap bytes, NUL included, and the length the whole text
 * needs (without the NUL) to *len. Returns RESIL_OK when it fit;
 * RESIL_E_INVAL for a NULL argument (buf may be NULL with cap 0, to ask
 * the length) or a text that did not fit (*len tells the size needed);
 * RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_keyed_prometheus(resil_keyed *k, const char *family,
    size_t max_series, char *buf, size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_KEYED_H */

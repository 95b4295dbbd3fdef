/*
 * The pipeline's private types, shared by its rooms (lib/pipeline*.c,
 * lib/call*.c): the pipeline, the settings a call runs with (everything a
 * reload may change: stage objects, the method table, the mock), the
 * method handles, and the few steps every room takes on them inline
 * (holding the current settings, finding a method).
 * Header only: it names nothing of the rooms that include it. Never
 * installed.
 *
 * A call counts itself on the current settings (per thread stripe) and
 * runs on them to its end; a reload publishes new settings with one
 * pointer store, carrying over the stage objects whose configuration did
 * not change (shared, reference counted parts), and frees replaced
 * settings once no call counts on them. Runtime mock changes build a
 * whole new resil_mock, publish it with one pointer store and free the
 * old one once its readers are gone.
 */
#ifndef RESIL_PIPELINE_INTERNAL_H
#define RESIL_PIPELINE_INTERNAL_H

#include <resil/pipeline.h>

#include <stddef.h>
#include <string.h>

#include "atomic.h"
#include "breaker_fast.h"
#include "chaos_internal.h"
#include "internal.h"
#include "retry_internal.h"

#include <uthash.h>

#define NSTRIPES 8u

/* method.simple's bits. */
#define SIMPLE_INLINE 1
#define SIMPLE_PHASE 2
/* With either: the method has a timeout, which the simple paths time
 * themselves (issue 39: two clock reads, lib/call_drive.c, lib/call.c). */
#define SIMPLE_TIMED 4
/* The call machine's simple phase for a timed method (in place of
 * SIMPLE_PHASE, so that an untimed start tests one bit, lib/call.c). */
#define SIMPLE_PHASE_T 8

#if defined(__GNUC__)
#define HOT __attribute__((always_inline)) static inline
#else
#define HOT static inline
#endif

enum { START_NONE = 0, START_RUN = 1, START_CLUSTER = 2 };

/* A method handle (resil_pipeline_method): stable for the pipeline's
 * life, it names a declared method; idx indexes each settings' byidx. The
 * service-level handle has idx 0 (byidx[0] is always the service-level
 * settings). */
struct resil_method {
	const struct resil_pipeline *owner;
	char *name; /* NULL: the service-level handle */
	uint32_t idx;
	UT_hash_handle hh;
};

/* A stage object shared by consecutive settings (a breaker carried over
 * by a reload): freed when the last settings holding it go. */
enum { PART_BREAKER, PART_RETRY, PART_CACHE, PART_RL, PART_BH, PART_THR };
typedef struct part {
	uint64_t refs; /* atomic */
	int kind;
	void *obj;
} part;

/* One declared method in one settings generation. */
typedef struct pmethod {
	const struct resil_pipeline *owner;
	char *name;
	resil_type type;
	uint64_t timeout;
	uint64_t fresh; /* read-through: cache.fresh (issue 43); 0: off */
	char *mock_spec;         /* method-level spec (owned), or NULL */
	int mock_set;            /* mock_spec applies (NULL + set: none) */
	resil_retry *retry;      /* own policy, or NULL: the service's */
	resil_breaker *breaker;  /* own breaker, or NULL: the service's */
	part *pretry, *pbreaker; /* what holds them */
	uint32_t max_attempts;   /* as configured */
	uint32_t idx;            /* its handle's */
	resil_retry *cretry;     /* the cluster's failover policy, or NULL:
	                          * the service's */
	int declared;            /* from the configuration */
	int retry_fast; /* its policy allows the first-attempt fast path */
	/* What a call of it does before attempt 1 (decided once): START_NONE,
	 * START_RUN (begin the retry run: no fast path), START_CLUSTER. */
	int start;
	/* No stage needs the machine on its success path (no limiter, no
	 * timeout, no hedging, no retry run): the blocking driver may run
	 * the machine's first step inline (SIMPLE_INLINE); with the default
	 * classifier the call machine too may start in its simple phase
	 * (SIMPLE_PHASE, lib/call.c). 0: neither. */
	int simple;
	/* The chaos its attempts ask: its own (resil_chaos_method), else the
	 * pipeline's; NULL when that has no strategy (issue 28). */
	resil_chaos *chaos;
	/* An adaptive bulkhead (AIMD, gradient) samples each attempt's
	 * duration: its attempts are timed without a timeout too. */
	int timed_bh;
	/* The breaker and retry policy its calls run with: its own, or the
	 * service's (decided once, for the driver's inline step). */
	resil_breaker *run_breaker;
	resil_retry *run_retry;
	/* What the inline step reads of them (method_run_with()): the
	 * breaker's fast-path words, the retry policy's first-success
	 * counters (NULL without a policy; run_first_own: the same, or
	 * counters nobody reads, for a thread that owns its stripe to count
	 * on with no test). */
	resil__bfast run_bf;
	uint64_t *run_first;
	uint64_t *run_first_own;
	uint8_t prio; /* issue 42: its resil_priority (0: unset) */
	struct resil__coal *coal; /* issue 43: its calls in flight, or NULL */
	/* The fleet breaker its calls use in place of a breaker (its own
	 * with breaker.per_method, else settings.fleet), or NULL
	 * (lib/pipeline_shared.c sets it). */
	struct resil_fleet *fleet;
	UT_hash_handle hh;
} method;

/* The breaker (or NULL) and retry policy (or NULL) m's calls run with. */
static inline void
method_run_with(method *m, resil_breaker *b, resil_retry *r)
{
	m->run_breaker = b;
	if (b != NULL)
		resil__breaker_fast_refs(b, &m->run_bf);
	m->run_retry = r;
	m->run_first = r != NULL ? resil__retry_first_counters(r) : NULL;
	m->run_first_own =
	    m->run_first != NULL ? m->run_first : resil__retry_first_sink;
}

/* Readers of the mock configuration, per thread stripe and generation
 * parity (the breaker's announce protocol): a call announces itself, checks
 * the generation, reads, withdraws. set_mock swaps the pointer, bumps the
 * generation and waits until no reader of the old parity is left, then
 * frees the old configuration at once. */
typedef struct mock_readers {
	uint64_t n[2];
	uint64_t pad[6];
} mock_readers;

typedef struct stripe {
	uint64_t calls;
	uint64_t cache;
	uint64_t mock;
	uint64_t fallback;
	uint64_t unavailable;
	uint64_t errors;
	uint64_t business;
	uint64_t timeouts;
	uint64_t latency_count;
	uint64_t latency[RESIL_LATENCY_BUCKETS];
	uint64_t failback_dropped;
	/* Issue 42: throttled answers (the server's pushback), and
	 * attempts refused while a Retry-After paused the rate limiter. */
	uint64_t pushbacks;
	uint64_t paused;
	uint64_t pad[4];
} stripe;

/*
 * The settings a call runs with: everything a reload may change. A call
 * holds one (refs) from its start to its end, so it finishes on the
 * settings it started with; a reload publishes new ones with one pointer
 * store (cur) and the old ones go when their last call drops them.
 */
typedef struct settings {
	/* Calls holding these settings, per thread stripe (a call drops
	 * its count on the stripe of the thread it ends on; only the sum is
	 * a count): no shared counter on the call path. */
	struct {
		uint64_t n;
		/* cppcheck-suppress unusedStructMember ; a cache line each */
		uint64_t pad[7];
	} rc[NSTRIPES];
	struct resil_pipeline *p;
	struct settings *next_free; /* in p->retired or p->shells */
	/* What these were built from, for a reload's comparison: a shallow
	 * copy (its strings and methods are not to be read). */
	resil_pipeline_config cfg;
	resil_breaker *breaker;
	resil_retry *retry;
	resil_cache *cache;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
	part *pbreaker, *pretry, *pcache, *prl, *pbh;
	resil_retry *cretry; /* failover / zone-aware attempts, or NULL */
	resil_fallback *fb;
	uint64_t timeout;
	method *methods; /* uthash by name; immutable */
	method dflt;     /* the service-level settings */
	method **byidx;  /* by handle index: the method, or &dflt */
	uint32_t nidx;
	/* Mock state: the current resil_mock (atomic pointer; NULL when no
	 * spec is configured at all) and the service spec it was built from
	 * (set_mock replaces both, under mock_lock). */
	resil_mock *mock;
	char *service_spec;
	/* The mock may force (a force: spec at some level): the simple paths
	 * need the mock stage only then (issue 39: a fail: mock costs a
	 * success nothing). Written before the pointer when it becomes 1,
	 * after it when it becomes 0 (atomic). */
	uint64_t mock_forces;
	/* Shared state (lib/pipeline_shared.c), the pipeline's, set on
	 * every settings it builds: the fleet breaker (then breaker is
	 * NULL) and the fleet rate limiter (asked instead of rl, which is
	 * then set but not used), or NULL. */
	struct resil_fleet *fleet;
	struct resil_fleet_limit *frl;
	/* Issue 42 (lib/call_overload.c): the throttle stage, or NULL;
	 * and the server's pushback: the rate limiter stage grants nothing
	 * before pause_until (atomic; 0: no pause). */
	resil_throttle *thr;
	part *pthr;
	uint64_t pause_until;
} settings;

typedef struct handler {
	resil_fallback_fn fn;
	void *ctx;
} handler;

struct resil_pipeline {
	char *service;
	resil_allocator alloc;
	resil_clock clock;
	resil_classifier cls;
	resil_pipeline_listener_fn listener;
	void *listener_ctx;
	const resil_mock_registry *registry;

	settings *cur; /* atomic pointer: the current settings */
	/* Under mock_lock: settings replaced but maybe still held by calls,
	 * and free shells reused by reloads (a shell is never given back to
	 * the allocator before the pipeline is freed). */
	settings *retired;
	settings *shells;

	/* Method handles, by name (under mock_lock once calls run). */
	struct resil_method *names;
	struct resil_method svc; /* the service-level handle */
	uint32_t nnames;

	handler *hlist; /* user handlers added, re-added at each reload */
	size_t handlers;
	unsigned call_events; /* RESIL_CALL_EVENT_* to tell the listener */
	uint32_t hedge_max;   /* extra attempts a hedge may start; 0: off */
	uint64_t hedge_delay; /* ticks without an answer before a hedge */
	unsigned hedge_fatal; /* RESIL_HEDGE_ON_* that end hedging */
	/* An attempt is late once its duration reaches timeout + late_edge:
	 * 1, past the timeout (duration > timeout); 0 for forking, whose
	 * call is a TIMEOUT at start + timeout (DESIGN). */
	uint64_t late_edge;
	resil_executor executor;

	/* +1 at every swap of a settings' mock; reload and set_mock
	 * serialise on mock_lock. */
	uint64_t mock_gen;
	mock_readers mock_rd[NSTRIPES];
	resil__spinlock mock_lock;

	void *stripes_mem;
	stripe *stripes;

	/* The cluster: selector NULL for none. */
	resil_selector *sel;
	resil_cluster_config ccfg; /* copied; local_zone is zone */
	char *zone;
	resil_cluster *fbq; /* failback's queue, or NULL */
	int slow;           /* resil_pipeline_call's slow path: hedging or
	                     * a selector, or keyed families (issue 41) */
	struct resil__kgate *keyed; /* issue 41: lib/call_keyed.c, or NULL */
	/* Without a selector: failfast, failsafe or failback over the one
	 * implicit endpoint (ccfg set, fbq for failback); 0: none. */
	int one_ep;
	resil_chaos *chaos; /* borrowed, or NULL */
	/* The cluster keys of the text it runs with (lib/pipeline_ckeys.h;
	 * owned, NULL: none): a text reload compares its own with them. */
	char *ckeys;
	/* Shared-memory and fleet state (lib/pipeline_shared.c), or NULL:
	 * none. */
	struct resil__pshared *sh;
	struct {
		resil_candidates *c;
		uint64_t busy; /* atomic 0/1 */
		/* cppcheck-suppress unusedStructMember ; a cache line each */
		uint64_t pad[6];
	} pool[NSTRIPES]; /* candidate sets, reused by calls */
};

static inline stripe *
my_stripe(const resil_pipeline *p)
{
	return &p->stripes[resil__thread_stripe(NSTRIPES)];
}

_Static_assert(NSTRIPES == RESIL__STRIPES, "the thread stripes");

/* Drop a hold, on this thread's stripe (a call reported on another
 * thread than it started on drops there: only the sum over the stripes
 * counts). Replaced settings are freed by the next reload after their
 * last call dropped them (or by free). */
HOT void
conf_drop(settings *g)
{
	resil__stripe_dec(&g->rc[0].n, sizeof(g->rc[0]));
}

/* Drop a hold conf_try_hold(own) took, on the same thread. */
HOT void
conf_drop_own(settings *g, unsigned s)
{
	resil__own_dec64(&g->rc[s].n);
}

/* Whether s is this thread's own stripe with holds counted unfenced
 * (RESIL__STRIPE_FENCED, lib/internal.h); s, its index. */
static inline int
conf_stripe_fenced(unsigned *s)
{
	unsigned w = resil__stripe_mine;

	*s = w & (NSTRIPES - 1);
	return (w & RESIL__STRIPE_FENCED) != 0;
}

/* One try at a hold (see conf_hold()): *out, the settings counted on
 * this thread's stripe s and current after the count; false when they
 * were replaced meanwhile (the stray count dropped again). own: s is
 * fenced (conf_stripe_fenced()), and the count is unlocked and
 * unfenced; the check after it is still ordered after it for any
 * reclaim, which fences every thread before it reads the counts
 * (resil__stripes_fence()): either this thread's count was seen, or the
 * check sees the pointer moved. */
HOT int
conf_try_hold(resil_pipeline *p, unsigned s, bool own, settings **out)
{
	settings *g = resil__loadptr((void *const *)&p->cur);
	const uint64_t *cur = (const uint64_t *)(const void *)&p->cur;

	resil__count_inc64(&g->rc[s].n, own);
	if (RESIL__UNLIKELY((void *)(uintptr_t)(own ? resil__load64(cur)
	                                            : resil__load64_after_rmw(
	                                                  cur)) != (void *)g)) {
		resil__count_dec64(&g->rc[s].n, own);
		return 0;
	}
	*out = g;
	return 1;
}

/* A hold on stripe s, this thread's, trying until the settings do not
 * move under it. */
HOT settings *
conf_hold_on(resil_pipeline *p, unsigned s, bool own)
{
	settings *g;

	while (RESIL__UNLIKELY(!conf_try_hold(p, s, own, &g)))
		;
	return g;
}

/*
 * Take a reference on the current settings: load the pointer, count
 * oneself on what it pointed to (on this thread's stripe, *st), and check
 * that it still points there (then they were current after the count, so
 * no reclaim can miss it). Otherwise they were replaced meanwhile: drop
 * the stray count and try again. Shells are never freed while the
 * pipeline lives (retired ones are reused), so a stray count never
 * touches freed memory. A reload never waits for a call.
 */
HOT settings *
conf_hold(resil_pipeline *p, unsigned *st)
{
	unsigned s = resil__thread_stripe(NSTRIPES);

	*st = s;
	return conf_hold_on(p, s, false);
}

static inline method *
find_in(const settings *g, const char *name)
{
	method *m = NULL;

	if (g->methods != NULL)
		HASH_FIND_STR(g->methods, name, m);
	return m;
}

static inline const method *
find_method(const settings *g, const char *name)
{
	method *m = find_in(g, name);

	return m != NULL ? m : &g->dflt;
}

/* The settings of handle h in g: its method, or the service-level ones
 * when g does not declare it. */
HOT const method *
resolve(const settings *g, const struct resil_method *h)
{
	/* A handle is given out (resil_pipeline_method) only when the
	 * current settings have its index, and settings built later have
	 * every earlier index: any settings a call holds have it. */
	return g->byidx[h->idx];
}

static inline resil_err
check_method(const resil_pipeline *p, const struct resil_method *m)
{
	return m->owner == p ? RESIL_OK : RESIL_E_INVAL;
}

#endif /* RESIL_PIPELINE_INTERNAL_H */

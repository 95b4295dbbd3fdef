/*
 * Private: the directory's room (lib/directory.c). Endpoints, the
 * snapshots that hold them, and views (candidate lists over a snapshot),
 * with their functions. The routers, balancers and selector above read
 * these; nothing here names them. Never installed.
 */
#ifndef RESIL_DIRECTORY_INTERNAL_H
#define RESIL_DIRECTORY_INTERNAL_H

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/shm.h>

#include "atomic.h"
#include "epoch.h"
#include "internal.h"

/* Per-address state; lives while a snapshot holds it or a pick is in
 * flight on it (resil__ep_unhold()). */
typedef struct resil__endpoint {
	/* Allocated on a cache line of its own (ep_new()). The first line
	 * holds what a pick and a plain success's report touch (issue 29):
	 * the calls in flight, counted per thread stripe (lib/internal.h):
	 * fl[0] for every thread that shares a stripe (a locked add), fl[1 +
	 * k] for the owner of stripe RESIL__STRIPE_OWN0 + k (unlocked); a
	 * pick counts on its thread's, its report on the reporting
	 * thread's, and the count is the sum. Then the endpoint's state
	 * that a report reads and its breaker. */
	uint64_t fl[1 + RESIL__STRIPES_OWNED];
	uint64_t ejected; /* atomic 0/1 */
	uint64_t streak;  /* atomic */
	resil_breaker *breaker;
	/* The second line: what the estimates of shortest response and
	 * PeakEWMA read besides the calls in flight. Shortest response's
	 * window, written under lock, read atomically; */
	uint64_t sr_successes, sr_elapsed, sr_reset_at;
	/* PeakEWMA: cost as double bits and its time; seen 0 or 1. */
	uint64_t ewma_bits, ewma_stamp, ewma_seen;
	uint64_t until; /* atomic */
	uint64_t holds; /* atomic: the snapshots holding it */
	/* Cold: a pick reads the address and id from its entry. */
	void *mem; /* the allocation this struct is aligned in */
	uint64_t id;
	char *address;
	struct resil_directory *dir;
	/* Issue 44 (h2): the endpoint's fleet breaker (atomic pointer, set
	 * once under the directory's wlock, freed with the endpoint), or
	 * NULL: its picks ask the fleet instead of breaker (which is then
	 * kept only for permits granted before the fleet came). */
	struct resil_fleet *fleet;
	/* Outlier detection, under lock. */
	resil__spinlock lock;
	uint32_t k;
	uint64_t returned_at;
	/* The interval detections: atomic (successes << 32) | requests
	 * since the last evaluation, and that evaluation's success rate
	 * (double bits; -1 when not computed). */
	uint64_t iv;
	uint64_t iv_rate;
	int hc_target; /* a target of the directory's checker (wlock) */
	/* Held by no snapshot, with calls still in flight: on the
	 * directory's list of endpoints to free (under its rlock). */
	struct resil__endpoint *retired_next;
} resil__endpoint;
_Static_assert(offsetof(resil__endpoint, sr_successes) == RESIL__CACHELINE &&
        offsetof(resil__endpoint, mem) == 2 * RESIL__CACHELINE,
    "a pick's and a report's words on the first line, the estimates' on "
    "the second");

/* ep->ejected's bits: ejected by outlier detection; marked unhealthy by
 * an active health check. Either keeps it out of the candidates. */
#define RESIL__EP_OUT 1u
#define RESIL__EP_DOWN 2u

/* The scratch of one evaluation of the interval detections over a
 * snapshot: its non-mock entries' counters and verdicts. */
typedef struct resil__rate_scratch {
	resil_outlier_host *hosts;
	resil_outlier_verdict *verdicts;
	uint32_t *idx; /* the entry of each host */
	uint64_t *dur; /* the ejection each verdict made, 0: none */
	uint32_t *k;
} resil__rate_scratch;

typedef struct resil__param {
	const char *key;
	size_t klen;
	const char *val;
	size_t vlen;
} resil__param;

/* One endpoint of a snapshot: its attributes at that version. */
typedef struct resil__entry {
	/* What a pick reads, side by side: the endpoint, the user's
	 * pointer, and the endpoint's address and id (copies, so that the
	 * pick reads them from here, not the endpoint's cold line). */
	resil__endpoint *ep;
	void *user;
	const char *address; /* ep->address */
	uint64_t id;         /* ep->id */
	char *zone;          /* NULL: none */
	char *tag;           /* NULL: untagged */
	char *params_src;
	char *params_buf;
	resil__param *params;
	size_t nparams;
	/* Its params' `methods` (the methods the provider exports, a comma
	 * list), or NULL: the router's method filter reads it here. */
	const char *methods;
	size_t host_len;  /* address up to its last ':' */
	const char *port; /* after it, or "" */
	int32_t weight;
	uint64_t start, warmup;
	int mock;
} resil__entry;

typedef struct resil__snapshot {
	resil__epoch_entry retire;
	uint64_t refs; /* atomic */
	uint64_t version;
	size_t n, n_live;
	resil__entry *e;
	/* eps[i] == e[i].ep: what a balancer's sample reads, 8 bytes an
	 * entry instead of e[i]'s line (issue 29). */
	resil__endpoint **eps;
	struct resil_directory *dir;
	resil__rate_scratch rate; /* allocated when outlier_rate is on */
} resil__snapshot;

/* The current snapshot with a reference the caller drops; with the rate
 * detections on, it first ends their interval if it is over (a clock
 * read). */
resil__snapshot *resil__dir_acquire(struct resil_directory *d);
void resil__snap_release(resil__snapshot *s);

/* A snapshot's hold on ep dropped: the last one frees ep, or leaves it
 * to the directory when calls are still in flight (freed by a later
 * update, or the directory's end). */
void resil__ep_unhold(resil__endpoint *ep);

/* For tests: how many endpoints wait for their calls to end. */
size_t resil__dir_retired(struct resil_directory *d);

/* The calls in flight on ep: the sum over the stripes. */
static inline uint64_t
resil__ep_active(const resil__endpoint *ep)
{
	const uint64_t *f = ep->fl;

	_Static_assert(RESIL__STRIPES_OWNED == 4, "one load per count below");
	return (resil__load64(&f[0]) + resil__load64(&f[1])) +
	    (resil__load64(&f[2]) + resil__load64(&f[3])) +
	    resil__load64(&f[4]);
}

/* This thread's count of calls in flight on ep; *own: unlocked. */
static inline uint64_t *
resil__ep_count(resil__endpoint *ep, bool *own)
{
	unsigned w = resil__stripe_mine;

	*own = (w & RESIL__STRIPE_OWNED) != 0;
	return &ep->fl[*own
	        ? (w & (RESIL__STRIPES - 1)) - RESIL__STRIPE_OWN0 + 1
	        : 0];
}

/* A call starts on ep (a pick, which holds a snapshot that holds ep):
 * counted on this thread's stripe, unlocked when the thread owns it. */
static inline void
resil__ep_enter(resil__endpoint *ep)
{
	uint64_t *c;
	bool own;

	(void)resil__thread_stripe(RESIL__STRIPES); /* assigned if not yet */
	c = resil__ep_count(ep, &own);
	resil__count_inc64(c, own);
}

/* A call on ep ends (its report, on any thread): the last touch of ep by
 * the caller, which may be freed by the directory right after. */
static inline void
resil__ep_leave(resil__endpoint *ep)
{
	bool own;
	uint64_t *c = resil__ep_count(ep, &own);

	resil__count_dec64(c, own);
}

resil__epoch *resil__dir_epoch(struct resil_directory *d);
uint64_t resil__dir_now(struct resil_directory *d);
/* Whether d runs the interval detections (its reports count each call). */
int resil__dir_rate_on(const struct resil_directory *d);

/*
 * The report of a success that feeds no estimate, on a directory without
 * interval detections, of an endpoint not ejected nor down (the caller
 * tests the first two): all resil__ep_report() would do is end a
 * failure streak. False, having done nothing, when ep is ejected or
 * down (the report notices a return).
 */
/* A success or a business error ends a failure streak (no write when
 * there is none). */
static inline void
resil__ep_end_streak(resil__endpoint *ep)
{
	if (resil__load64(&ep->streak) != 0)
		resil__store64(&ep->streak, 0);
}

static inline bool
resil__ep_quiet_success(resil__endpoint *ep)
{
	if (RESIL__UNLIKELY(resil__load64(&ep->ejected) != 0))
		return false;
	resil__ep_end_streak(ep);
	return true;
}

/* Ejected at now (notices a return, firing its event). */
int resil__ep_ejected(resil__endpoint *ep, uint64_t now);
/* The breaker would give a permit now (no breaker: yes). */
int resil__ep_breaker_admits(resil__endpoint *ep);

/* What an outcome feeds besides outlier detection (resil__ep_report's
 * feeds): the latency EWMA (PeakEWMA balancing), the success window
 * (shortest-response balancing). */
#define RESIL__EP_EWMA 1u
#define RESIL__EP_WINDOW 2u

/* Outcome of one call to ep, at now: RESIL__EP_EWMA in feeds takes it as
 * a latency sample (decay tau), RESIL__EP_WINDOW a success into the
 * window (slide). */
void resil__ep_report(resil__endpoint *ep, resil_outcome outcome,
    uint64_t duration, uint64_t now, unsigned feeds, uint64_t tau,
    uint64_t slide);

/* PeakEWMA cost at now; default_rtt when never observed. */
double resil__ep_ewma(
    const resil__endpoint *ep, uint64_t now, double tau, double default_rtt);

/* exp(-x) for x >= 0, without libm. */
double resil__exp_neg(double x);

/* Look up key in an entry's attributes: built-ins then params. */
int resil__entry_attr(const resil__entry *e, const char *key, size_t klen,
    const char **val, size_t *vlen);

/* The grammar of resil_endpoint_spec.params ("k=v&k2=v2"), shared with
 * the registry source: NULL when well-formed, else the reason and the
 * bad item's 1-based column in *col. */
const char *resil__params_check(const char *params, size_t *col);

/* A candidate list over one snapshot: positions in directory order (so
 * endpoint ids grow along it), weights after warm-up, their running sums. */
typedef struct resil__view {
	resil__snapshot *snap;
	uint32_t *idx;
	uint64_t *w;
	uint64_t *cum;
	size_t n;
	uint64_t total;
	int same;     /* all weights equal */
	uint64_t sig; /* identity of the candidate set */
	/* Identity of its weights (round robin's fast state). */
	uint64_t wsig;
} resil__view;

/* Fill v's sums and sig from v->idx and v->w. */
void resil__view_finish(resil__view *v);

/* Endpoint breakers in shared memory (lib/directory_shm.c; resil_directory_
 * config.endpoint_breaker_shm): open the region name into *out
 * (has_breaker: the directory has endpoint breakers, else refused), and
 * the breaker of address in it (named "ep." and the address, characters
 * other than [A-Za-z0-9._-] made '_', with a hash of the address when one
 * was, or it was too long). */
resil_err resil__dir_shm_region(const char *name, int has_breaker,
    const resil_allocator *a, resil_shm **out, resil_diag *diag);
resil_err resil__dir_shm_breaker(resil_shm *shm, const char *address,
    const resil_breaker_config *cfg, resil_breaker **out, resil_diag *diag);

/* Issue 40: watchers of d's endpoint events besides its listener (a
 * pipeline over a selector of d hears its endpoints' ejections and breaker
 * transitions). At most RESIL__DIR_WATCHERS; 0, or -1 when full. A
 * watcher is called after the listener, on the same thread; unwatch
 * returns once no call of it runs. */
#define RESIL__DIR_WATCHERS 8
int resil__dir_watch(
    resil_directory *d, resil_endpoint_listener_fn fn, void *ctx);
void resil__dir_unwatch(resil_directory *d, void *ctx);

/* ---- issue 44 (h2): the endpoints' breakers on the fleet ---- */

struct resil_fleet;
struct resil_fleet_group;

/* What a directory's endpoints' fleet breakers are made of
 * (resil__dir_fleet_attach). */
typedef struct resil__dir_fleet {
	/* The group every endpoint's fleet breaker joins, one reference of
	 * it the directory holds: put is called when the directory no
	 * longer needs it (its free, or a refused attach). */
	struct resil_fleet_group *group;
	void (*put)(struct resil_fleet_group *g);
	char prefix[64]; /* the fleet NAME: endpoints are NAME.ep.ADDRESS */
	/* quorum, leases and times as resil_fleet_config's (the name,
	 * group, breaker and listener are set per endpoint). */
	uint32_t quorum, quorum_traffic_pct, probe_leases, max_local_leases;
	uint32_t buckets;
	uint64_t open_wait_ms, lease_ms, vote_ms, bucket_ms;
} resil__dir_fleet;

/*
 * Put d's endpoints' breakers on the fleet: every endpoint (those of the
 * current list, and each one an update adds) gets a fleet breaker in
 * df->group named PREFIX.ep.ADDRESS (resil__dir_fleet_name), its local
 * breaker from d's endpoint breaker config (its transitions are d's
 * endpoint events, as a local endpoint breaker's); picks then ask
 * resil_fleet_acquire / _record / _release. *df is copied. The group
 * reference passes to d on every return. A second attach with the same
 * group and prefix changes nothing (RESIL_OK); another is refused, as is
 * a directory without endpoint breakers (RESIL_E_INVAL, "key: why").
 */
resil_err resil__dir_fleet_attach(struct resil_directory *d,
    const resil__dir_fleet *df, const char *key, resil_diag *diag);

/* lib/directory_fleet.c: the fleet breaker of address (bc: its local
 * breaker's config, listener set) into *out. */
resil_err resil__dir_fleet_new(const resil__dir_fleet *df,
    const char *address, const resil_breaker_config *bc,
    struct resil_fleet **out, resil_diag *diag);

/* The fleet name of address: PREFIX.ep.ADDRESS with any character
 * outside [A-Za-z0-9._-] (':' among them) as '_'; when the name would
 * pass 63 characters, the address part is cut and "-HHHHHHHHHHHHHHHH"
 * (the address's FNV-1a hash) follows. name: 64 bytes. */
void resil__dir_fleet_name(
    const char *prefix, const char *address, char name[64]);

/* The breaker an endpoint's state is read from: its fleet's local one,
 * else its own (NULL: none). */
resil_breaker *resil__ep_breaker(const resil__endpoint *ep);

#endif /* RESIL_DIRECTORY_INTERNAL_H */

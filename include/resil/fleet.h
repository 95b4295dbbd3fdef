/*
 * resil fleet: one circuit breaker shared by the instances of a fleet
 * (processes on many hosts), through Redis, with Redis never on the call
 * path.
 *
 * Each instance holds a fleet handle: a local resil_breaker plus a locally
 * cached fleet state. resil_fleet_acquire, _record and _release decide
 * from those alone (atomic loads; no Redis, no lock, no system call when
 * the fleet is CLOSED). The user's loop calls resil_fleet_sync(), which
 * makes one round trip to Redis: it pushes this instance's aggregates
 * (calls and failures since the last sync) into per-instance time-bucket
 * keys with a TTL, and runs a Lua script that, on Redis's own clock
 * (TIME, never the instances' clocks) and atomically:
 *
 * - counts the instances that vote "tripped" (their local breaker crossed
 *   its own threshold) and opens the fleet only when at least quorum of
 *   them do, and (quorum_traffic_pct) they carry at least that share of
 *   the fleet's traffic, summed from the per-instance aggregates: one
 *   sick instance opens only its own local breaker;
 * - moves OPEN to HALF_OPEN once open_wait_ms has passed;
 * - in HALF_OPEN grants probe leases, at most probe_leases (K) fleet-wide
 *   per episode, each with an expiry of lease_ms: a lease that lapses
 *   unreported (its instance died) reopens the fleet, so a dead instance
 *   delays recovery by at most lease_ms + open_wait_ms;
 * - closes the fleet once K leased probes reported success, or reopens it
 *   on the first failed probe.
 * The sync then applies the fleet state locally: OPEN forces the local
 * breaker open; HALF_OPEN admits only as many probe calls as leases this
 * instance holds; CLOSED hands decisions back to the local breaker.
 *
 * When Redis is unreachable, slow (no answer within command_timeout_ms) or
 * answers nonsense (a script error, a malformed value written by someone
 * else), the sync that saw it returns RESIL_E_UNAVAILABLE and the instance
 * is in local mode from then on: its local breaker alone decides (a fleet
 * OPEN or HALF_OPEN becomes a local OPEN with a fresh wait). Callers are
 * never delayed by this: at most the one sync waits, for one timeout. A
 * later sync reconnects (at most once per reconnect_ms) and resyncs.
 * Every such change is reported to the listener.
 *
 * The members of one fleet must agree on quorum, quorum_traffic_pct,
 * probe_leases, open_wait_ms, lease_ms, vote_ms, bucket_ms and buckets
 * (the fleet's bounds are made of them). Each sync sends them; a member
 * whose settings differ from the fleet's while a live member has the
 * fleet's is refused before the script writes anything: its sync returns
 * RESIL_E_UNAVAILABLE, it decides locally, and its listener hears one
 * RESIL_FLEET_EV_SETTINGS event naming the differing keys and both
 * values. When no live member has the fleet's settings, the next
 * member's become the fleet's. (A fleet rate limiter likewise for rate,
 * period_ms and burst.)
 *
 * Keys (one Redis, not Cluster): resil:fleet:NAME:state (hash),
 * :votes (sorted set), :leases (hash), :agg:INSTANCE:BUCKET (hashes
 * {calls, failures, traffic} with a TTL), :instances (sorted set),
 * :members (hash: each member's settings), :at (string "STATE:EPISODE",
 * written with the state; read by a group's sync, below).
 *
 * Redis Sentinel (cfg.sentinels, cfg.master; issue 44): each
 * (re)connection asks the sentinels for the master and checks it (ROLE);
 * a sync that meets a failover (a refused or broken connection, a
 * timeout, READONLY) goes local, and the next one asks again and
 * resyncs. Across one failover an episode lets at most 2K probes through
 * (docs/fleet.md, SENTINEL).
 * docs/fleet.md describes the protocol and what is guaranteed.
 *
 * Thread safety: acquire, record, release, get_state and get_info may run
 * concurrently from any number of threads. sync must not overlap another
 * sync of the same handle (call it from one loop, or let the helper
 * thread, resil_fleet_start(), do it), but may run concurrently with the
 * calls above. new and free must not overlap any
 * other call on the same handle. The listener runs on the thread calling
 * sync.
 */
#ifndef RESIL_FLEET_H
#define RESIL_FLEET_H

#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/keyed.h>
#include <resil/limit.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_fleet resil_fleet;
/* A connection shared by many fleet breakers: one round trip syncs them
 * all (resil_fleet_group_sync, below). */
typedef struct resil_fleet_group resil_fleet_group;

/* The fleet's own states (a subset of the breaker's). */
typedef enum resil_fleet_state {
	RESIL_FLEET_CLOSED = 0,
	RESIL_FLEET_OPEN = 1,
	RESIL_FLEET_HALF_OPEN = 2
} resil_fleet_state;

/* "CLOSED", "OPEN", "HALF_OPEN" or "UNKNOWN". */
RESIL_API const char *resil_fleet_state_name(resil_fleet_state s);

typedef enum resil_fleet_event_kind {
	RESIL_FLEET_EV_CONNECTED = 0, /* synced with Redis (again) */
	RESIL_FLEET_EV_LOCAL = 1,     /* fell back to local decisions */
	RESIL_FLEET_EV_STATE = 2,     /* the fleet state applied changed */
	RESIL_FLEET_EV_LEASES = 3,    /* probe leases granted to us */
	RESIL_FLEET_EV_ERROR = 4,     /* Redis answered nonsense */
	/* This member's fleet settings differ from the fleet's (detail:
	 * the keys, both values): refused, it decides locally. */
	RESIL_FLEET_EV_SETTINGS = 5
} resil_fleet_event_kind;

/* "connected", "local", "state", "leases", "error", "settings" or
 * "unknown". */
RESIL_API const char *resil_fleet_event_name(resil_fleet_event_kind k);

typedef struct resil_fleet_event {
	resil_fleet_event_kind kind;
	resil_fleet_state state; /* the fleet state, as last known */
	uint64_t episode;        /* the fleet episode, as last known */
	uint32_t leases;         /* LEASES: how many were granted */
	uint32_t votes;          /* instances voting "tripped" */
	const char *detail;      /* why (LOCAL, ERROR, SETTINGS); never NULL */
} resil_fleet_event;

typedef void (*resil_fleet_listener_fn)(
    const resil_fleet_event *ev, void *ctx);

typedef struct resil_fleet_config {
	size_t size; /* sizeof(resil_fleet_config), set by _init() */

	/* Identity. name: 1..63 characters of [A-Za-z0-9._-]; instance the
	 * same, or NULL for "HOST-pPID" (HOST cut to 40 characters, others
	 * than [A-Za-z0-9._-] made '_'). Each instance of a fleet needs its
	 * own: two handles with one name count as one vote. */
	const char *name;
	const char *instance;

	/* Redis. host: NULL for "127.0.0.1". Give an address: a name is
	 * resolved by the system resolver, which no timeout here bounds. */
	const char *host;
	uint32_t port;               /* 1..65535, default 6379 */
	/* 1..60000, default 250 (both). Only the sync waits for Redis,
	 * never a call, so these bound how long one sync (on its loop or
	 * helper thread) may take, not any caller's latency. The old 5 ms
	 * flapped into local mode on a busy host: a run queue of a few
	 * processes delays the sync thread's wake-up by tens of ms, and so
	 * does Redis's own fork for a snapshot; 250 ms rides those out and
	 * still falls back well within a Sentinel failover (seconds). */
	uint32_t connect_timeout_ms;
	uint32_t command_timeout_ms;
	uint32_t reconnect_ms; /* 0..3600000, default 1000: between attempts */

	/* The fleet breaker; times on Redis's clock. */
	uint32_t quorum; /* 1..1024, default 1 */
	/* Quorum by traffic share, 0..100, default 0 (off): the fleet opens
	 * only when, besides quorum instances voting, the voters carry at
	 * least this percent of the fleet's traffic over the kept buckets
	 * (from the aggregates every instance pushes). */
	uint32_t quorum_traffic_pct;
	uint32_t probe_leases;     /* K per episode, 1..1024, default 1 */
	uint32_t max_local_leases; /* leases one instance holds, 0..64;
	                              0 (default): min(K, 64) */
	uint64_t open_wait_ms;     /* 1..86400000, default 30000 */
	uint64_t lease_ms;         /* 1..86400000, default 10000 */
	uint64_t vote_ms;   /* a vote's life, 1..86400000, default 10000 */
	uint64_t bucket_ms; /* aggregate bucket, 1..3600000, default 1000 */
	uint32_t buckets;   /* buckets kept (TTL), 1..1000, default 10 */

	/* The local breaker: its triggers decide this instance's vote, its
	 * clock (ns) times local lease deadlines and reconnects, and it
	 * decides alone in local mode. */
	resil_breaker_config breaker;

	resil_fleet_listener_fn listener; /* optional */
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */

	/* Issue 44. Redis Sentinel: sentinels "H1:P1,H2:P2,..." (1..8, PORT
	 * 1..65535) and master, the name the sentinels know the master by
	 * (1..63 characters of [A-Za-z0-9._-]); host and port are then
	 * unused. Each (re)connection asks the sentinels for the master
	 * and keeps it only when it says it is one (ROLE); a failover is
	 * followed at the first sync that meets it (see docs/fleet.md).
	 * NULL (both): host and port. */
	const char *sentinels;
	const char *master;
	/* Issue 44. A group (resil_fleet_group_new): the handle syncs
	 * through the group's one connection, and resil_fleet_group_sync
	 * syncs every handle of the group in one round trip; host, port,
	 * sentinels, master and the three timeouts above are then the
	 * group's (these are unused). The group must outlive the handle.
	 * NULL: the handle's own connection. */
	resil_fleet_group *group;
} resil_fleet_config;

static inline void
resil_fleet_config_init(resil_fleet_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->port = 6379;
	cfg->connect_timeout_ms = 250;
	cfg->command_timeout_ms = 250;
	cfg->reconnect_ms = 1000;
	cfg->quorum = 1;
	cfg->probe_leases = 1;
	cfg->open_wait_ms = 30000;
	cfg->lease_ms = 10000;
	cfg->vote_ms = 10000;
	cfg->bucket_ms = 1000;
	cfg->buckets = 10;
	resil_breaker_config_init(&cfg->breaker);
}

static inline resil_fleet_config
resil_fleet_config_default(void)
{
	resil_fleet_config cfg;

	resil_fleet_config_init(&cfg);
	return cfg;
}

/* Check cfg (and its breaker config) without creating anything: RESIL_OK,
 * or RESIL_E_INVAL naming the field in *diag (diag may be NULL). */
RESIL_API resil_err resil_fleet_config_validate(
    const resil_fleet_config *cfg, resil_diag *diag);

/*
 * Create a fleet handle in *out. Strings in *cfg are copied; listener_ctx
 * and the breaker's clock must outlive the handle. Connects to Redis and
 * loads the script (bounded by connect_timeout_ms + command_timeout_ms)
 * but does not sync: the handle starts in
 * local mode and the first resil_fleet_sync() joins the fleet. Redis being
 * unreachable is not an error here.
 *
 * Returns RESIL_OK; RESIL_E_INVAL (reason in *diag) for a NULL argument or
 * a bad setting; RESIL_E_NOMEM. *out is written only on RESIL_OK.
 */
RESIL_API resil_err resil_fleet_new(
    resil_fleet **out, const resil_fleet_config *cfg, resil_diag *diag);

/* Close the connection and release everything. Leases held lapse in Redis
 * after lease_ms. NULL is a no-op. */
RESIL_API void resil_fleet_free(resil_fleet *f);

/* A permit from resil_fleet_acquire: a local breaker permit or a fleet
 * probe (a lease). Opaque; spent by its first record or release. */
typedef struct resil_fleet_permit {
	resil_permit local;
	uint64_t episode; /* the fleet episode of a probe */
	uint32_t kind;    /* 2: a probe (p->local empty); else p->local */
	uint32_t slot;    /* the lease a probe uses */
} resil_fleet_permit;

/*
 * Ask for a permit. Local mode and fleet CLOSED: the local breaker
 * decides. Fleet OPEN: RESIL_E_OPEN. Fleet HALF_OPEN: RESIL_OK with a
 * probe permit while this instance holds an unused, unexpired lease, else
 * RESIL_E_OPEN. RESIL_E_INVAL for a NULL argument. *p is written only on
 * RESIL_OK. Never talks to Redis.
 */
RESIL_API resil_err resil_fleet_acquire(resil_fleet *f, resil_fleet_permit *p);

/* Record the call's outcome. A probe's outcome is reported to the fleet
 * at the next sync (BUSINESS and IGNORED give the lease back for another
 * call). Returns as resil_breaker_record: RESIL_OK (also for a probe of an
 * episode that has ended, which changes nothing); RESIL_E_MISUSE for a
 * spent or never granted permit; RESIL_E_INVAL for a NULL argument or an
 * unknown outcome (the permit is then not spent). */
RESIL_API resil_err resil_fleet_record(
    resil_fleet *f, resil_fleet_permit *p, resil_outcome outcome);

/* Give an unused permit back (the call was never made); a probe's lease
 * can be used again. RESIL_OK, RESIL_E_INVAL, RESIL_E_MISUSE as above. */
RESIL_API resil_err resil_fleet_release(resil_fleet *f, resil_fleet_permit *p);

/*
 * One round trip with Redis (see the top of this header); now is a reading
 * of the local breaker's clock. Returns RESIL_OK when synced;
 * RESIL_E_UNAVAILABLE when the handle is (now, or still) in local mode,
 * the reason reported to the listener; RESIL_E_INVAL for a NULL handle.
 * Waits at most connect_timeout_ms + 4 * command_timeout_ms (a reconnect,
 * the script load, the call, and on NOSCRIPT its retry and reload); with
 * Sentinel, plus connect_timeout_ms + command_timeout_ms per sentinel
 * asked, and one command_timeout_ms more for ROLE.
 */
RESIL_API resil_err resil_fleet_sync(resil_fleet *f, uint64_t now);

/*
 * The optional helper thread: resil_fleet_start() starts a thread that
 * calls the sync step every interval_ms (1..3600000) of real time
 * (CLOCK_MONOTONIC), with now read from the local breaker's clock; the
 * listener then runs on that thread. While it runs, resil_fleet_sync()
 * returns RESIL_E_MISUSE (one sync at a time). resil_fleet_stop() asks
 * it to stop, waits for its sync in progress (bounded by that sync's
 * timeouts) and joins it; resil_fleet_free() stops it too.
 *
 * start: RESIL_OK; RESIL_E_INVAL for NULL or a bad interval;
 * RESIL_E_MISUSE when it runs already; RESIL_E_NOMEM when no thread can
 * be made. stop: RESIL_OK (also when none runs); RESIL_E_INVAL for NULL.
 * start and stop must not be called concurrently with each other or
 * with free.
 */
RESIL_API resil_err resil_fleet_start(
    resil_fleet *f, uint32_t interval_ms, resil_diag *diag);
RESIL_API resil_err resil_fleet_stop(resil_fleet *f);

/* The fleet state as applied locally (one atomic load). In local mode the
 * last state known. */
RESIL_API resil_fleet_state resil_fleet_get_state(const resil_fleet *f);

typedef struct resil_fleet_info {
	resil_fleet_state state;
	uint64_t episode;     /* the fleet episode last synced */
	int local_mode;       /* nonzero: Redis unreachable, local decisions */
	uint32_t leases_held; /* unused leases of this episode */
	uint32_t votes;       /* instances voting "tripped" at the last sync */
	/* The voters' share of the fleet's traffic in percent, as computed
	 * at the last sync; -1 when it was not (quorum_traffic_pct 0, the
	 * fleet not CLOSED, or fewer than quorum votes). */
	int32_t sick_traffic_pct;
	uint64_t syncs;                  /* successful syncs */
	uint64_t sync_errors;            /* syncs that fell back */
	resil_breaker_state local_state; /* the local breaker */
	/* Issue 44: the handle's settings, as made (the timeouts and
	 * reconnect of its connection, or its group's), and the text of
	 * those every member must agree on ("quorum=1 ... buckets=10"). */
	uint32_t connect_timeout_ms, command_timeout_ms, reconnect_ms;
	uint32_t max_local_leases;
	char settings[256];
} resil_fleet_info;

RESIL_API resil_err resil_fleet_get_info(
    resil_fleet *f, resil_fleet_info *out);

/* The local breaker (owned by f; do not free it). Manual transitions on it
 * are overridden by the next sync while Redis is reachable. */
RESIL_API resil_breaker *resil_fleet_breaker(resil_fleet *f);

/* ------------------------------------------------------------------ */
/* A group: one connection, one round trip per sync for many breakers  */
/* ------------------------------------------------------------------ */

/*
 * resil_fleet_group (issue 44): one connection to the fleet's Redis (a
 * server, or the master the sentinels name) shared by the fleet handles
 * made with cfg.group = g. resil_fleet_group_sync() syncs every one of
 * them in one round trip: it writes each handle's command into the
 * connection's buffer (hiredis pipelining, redisAppendCommandArgv) and
 * then reads the answers in order, so Redis serves other clients
 * between them (never one long script). It sends only what changed: a
 * handle whose fleet is CLOSED, with no call, vote, traffic or report
 * since its last sync and a full sync less than half its instance TTL
 * (bucket_ms * buckets) and half its vote_ms ago, sends a read of the
 * fleet's state (HMGET state episode) instead of the script; when that
 * read shows the fleet moved on (another state or episode, or no state
 * at all), the handle's script goes in a second round trip of the same
 * sync (as do scripts Redis had lost: NOSCRIPT). A failure of the
 * connection puts every handle of the group in local mode (a LOCAL
 * event each) and the next sync reconnects (Sentinel: asks again).
 *
 * resil_fleet_sync() of a handle in a group syncs that handle alone
 * (its script, through the group's connection). Thread safety: the
 * group's connection is used under the group's mutex, so group syncs
 * and handle syncs may come from any threads (one at a time get the
 * connection); a handle's listener runs with that mutex held and must
 * not call the group's functions. The group's new and free must not
 * overlap any other call on the group, nor resil_fleet_new / _free of a
 * handle of the group; resil_fleet_new / _free of its handles may run
 * while the group syncs (a join or leave waits for the group's mutex).
 */
typedef struct resil_fleet_group_config {
	size_t size;      /* sizeof(resil_fleet_group_config), by _init() */
	const char *host; /* NULL: "127.0.0.1" */
	uint32_t port;    /* 1..65535, default 6379 */
	const char *sentinels; /* as resil_fleet_config; NULL: host:port */
	const char *master;
	uint32_t connect_timeout_ms;  /* 1..60000, default 250 */
	uint32_t command_timeout_ms;  /* 1..60000, default 250 */
	uint32_t reconnect_ms;        /* 0..3600000, default 1000 */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	/* The clock the helper thread (resil_fleet_group_start) reads now
	 * from: the members' breakers' clock. NULL: the system clock. Must
	 * outlive the group. */
	const resil_clock *clock;
} resil_fleet_group_config;

static inline void
resil_fleet_group_config_init(resil_fleet_group_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->port = 6379;
	cfg->connect_timeout_ms = 250;
	cfg->command_timeout_ms = 250;
	cfg->reconnect_ms = 1000;
}

/* RESIL_OK, or RESIL_E_INVAL naming the field ("fleet_group.port: ..."). */
RESIL_API resil_err resil_fleet_group_config_validate(
    const resil_fleet_group_config *cfg, resil_diag *diag);

/* Create a group in *out (strings copied). Does not connect: its first
 * sync does. RESIL_OK; RESIL_E_INVAL; RESIL_E_NOMEM. */
RESIL_API resil_err resil_fleet_group_new(resil_fleet_group **out,
    const resil_fleet_group_config *cfg, resil_diag *diag);

/* Close the connection. Every handle of the group must be freed first
 * (RESIL_E_MISUSE otherwise, and nothing is freed). NULL: RESIL_OK. */
RESIL_API resil_err resil_fleet_group_free(resil_fleet_group *g);

/* Sync every handle of g (now: a reading of their clocks, in ns; they
 * should share one). RESIL_OK when the round trip(s) answered (a handle
 * refused or answered nonsense is in local mode and says so to its
 * listener); RESIL_E_UNAVAILABLE when Redis did not (every handle is in
 * local mode); RESIL_E_INVAL for NULL. Waits at most connect_timeout_ms
 * (times 1 + the number of sentinels) + 4 * command_timeout_ms. */
RESIL_API resil_err resil_fleet_group_sync(resil_fleet_group *g, uint64_t now);

/*
 * The group's optional helper thread (as resil_fleet_start for one
 * handle): resil_fleet_group_start() starts a thread that syncs the whole
 * group every interval_ms (1..3600000) of real time (CLOCK_MONOTONIC),
 * with now read from cfg.clock; the members' listeners then run on that
 * thread. resil_fleet_group_stop() asks it to stop, waits for its sync in
 * progress and joins it; resil_fleet_group_free() stops it too. Handles
 * may join and leave the group while it runs (each under the group's
 * mutex); resil_fleet_sync() of a member returns RESIL_E_MISUSE while it
 * runs. start: RESIL_OK; RESIL_E_INVAL for NULL or a bad interval;
 * RESIL_E_MISUSE when it runs already; RESIL_E_NOMEM when no thread can
 * be made. stop: RESIL_OK (also when none runs); RESIL_E_INVAL for NULL.
 * start and stop must not be called concurrently with each other or with
 * free.
 */
RESIL_API resil_err resil_fleet_group_start(
    resil_fleet_group *g, uint32_t interval_ms, resil_diag *diag);
RESIL_API resil_err resil_fleet_group_stop(resil_fleet_group *g);

typedef struct resil_fleet_group_info {
	uint32_t members;         /* handles in the group */
	int connected;            /* a connection is open */
	uint64_t round_trips;     /* batches written and read, all syncs */
	uint64_t scripts;         /* full syncs (the script) sent */
	uint64_t reads;           /* state reads sent in place of one */
	uint64_t master_switches; /* Sentinel: a new master found */
	char master[272];         /* "HOST:PORT" of the server in use */
} resil_fleet_group_info;

RESIL_API resil_err resil_fleet_group_get_info(
    resil_fleet_group *g, resil_fleet_group_info *out);

/* ------------------------------------------------------------------ */
/* A fleet-wide rate limiter (GCRA on Redis's clock)                   */
/* ------------------------------------------------------------------ */

/*
 * resil_fleet_limit: `rate` permits per `period_ms` and a burst of
 * `burst`, shared by every instance of the fleet. Each acquire is one
 * round trip: a Lua script runs the GCRA decision (limit.h's rule,
 * exactly, in integer microseconds scaled by rate / gcd) on Redis's own
 * TIME, so instances' clocks never matter; it also registers the
 * instance in a sorted set with a TTL, so every answer says how many
 * instances were seen (N).
 *
 * When Redis is unreachable, slow (no answer within command_timeout_ms)
 * or answers nonsense (a script error, a malformed value written by
 * someone else), that acquire decides locally instead, and so does every
 * acquire for the next reconnect_ms (local clock); then one acquire tries
 * Redis again and, when it answers, the fleet decides again (resync). So
 * an acquire waits at most connect_timeout_ms + 3 * command_timeout_ms
 * (a reconnect, the script load, the call, on NOSCRIPT its retry),
 * and only one per reconnect_ms waits at all while Redis is away. The
 * local decision is a local GCRA limiter holding a 1/N share: rate per
 * N * period_ms, burst max(1, burst / N), N = the instances seen at the
 * last answer (at least min_instances; min_instances before any answer).
 * Both changes are reported to the listener (LOCAL, CONNECTED; ERROR for
 * nonsense; ev.votes holds N). The fleet state kept in Redis survives the
 * fallback; after a Redis restart it starts again with a full burst.
 *
 * Keys: resil:limit:NAME:gcra (hash base, tat; PEXPIREs once idle for the
 * burst's span) and resil:limit:NAME:instances (sorted set).
 *
 * Thread safety: acquire and get_info may be called from any number of
 * threads. Acquires share the handle's one connection, one at a time (a
 * mutex; get_info never waits for it), so for concurrent round trips
 * give each thread its own handle
 * (with its own instance name, or they count as one instance). new and
 * free must not overlap any other call on the handle.
 */
typedef struct resil_fleet_limit resil_fleet_limit;

typedef struct resil_fleet_limit_config {
	size_t size; /* sizeof(resil_fleet_limit_config), set by _init() */
	const char *name;            /* 1..63 characters of [A-Za-z0-9._-] */
	const char *instance;        /* as resil_fleet_config.instance */
	const char *host;            /* NULL: "127.0.0.1" */
	uint32_t port;               /* 1..65535, default 6379 */
	uint32_t connect_timeout_ms; /* 1..60000, default 5 */
	uint32_t command_timeout_ms; /* 1..60000, default 5 */
	uint32_t reconnect_ms;       /* 0..3600000, default 1000 */
	uint32_t rate;               /* permits per period, 1..10^9 */
	uint64_t period_ms;          /* 1..86400000, default 1000 */
	uint32_t burst;              /* 1..10^9, default 100 */
	/* How long an instance counts as seen after its last acquire,
	 * 1..86400000, default 10000. */
	uint64_t instance_ttl_ms;
	/* N for the local share before any answer, and its floor,
	 * 1..4096, default 1. */
	uint32_t min_instances;
	const resil_clock *clock;         /* local: the fallback, reconnects */
	resil_fleet_listener_fn listener; /* optional */
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	/* Issue 44 (h2). Redis Sentinel, as resil_fleet_config's: each
	 * (re)connection asks the sentinels for the master (checked with
	 * ROLE); an acquire that meets a failover (no answer, READONLY,
	 * MASTERDOWN, ...) decides locally and, after reconnect_ms, the
	 * next one asks the sentinels again. NULL (both): host and port. */
	const char *sentinels;
	const char *master;
	/* Issue 41 (h3): keyed limits (resil_fleet_limit_acquire_key).
	 * max_keys 0: the handle is not keyed (acquire_key refuses);
	 * 1..RESIL_KEYED_MAX_KEYS: the bound of the local keyed family the
	 * keys decide on while Redis is away. max_key_len: 0 is 256, else
	 * 1..RESIL_KEYED_MAX_KEY_LEN; a longer key is refused. overrides:
	 * values with limits of their own (rate, period_ns rounded up to a
	 * whole ms, burst; each 0: the handle's; max_concurrent must be 0),
	 * at most RESIL_KEYED_MAX_OVERRIDES, copied at creation. */
	uint32_t max_keys;
	uint32_t max_key_len;
	const resil_keyed_override *overrides;
	size_t n_overrides;
} resil_fleet_limit_config;

/* 100 per second, burst 100, timeouts 5 ms, reconnect after 1 s. */
static inline void
resil_fleet_limit_config_init(resil_fleet_limit_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->port = 6379;
	cfg->connect_timeout_ms = 5;
	cfg->command_timeout_ms = 5;
	cfg->reconnect_ms = 1000;
	cfg->rate = 100;
	cfg->period_ms = 1000;
	cfg->burst = 100;
	cfg->instance_ttl_ms = 10000;
	cfg->min_instances = 1;
}

/* RESIL_OK, or RESIL_E_INVAL naming the field (e.g.
 * "fleet_limit.rate: 0 is out of range 1..1000000000"). Besides the
 * ranges, rate / gcd(rate, period in us) must be <= 2^24 and burst *
 * period_us / gcd <= 2^50, and the local limiter (limit.h) at N = 1 must
 * be valid. */
RESIL_API resil_err resil_fleet_limit_config_validate(
    const resil_fleet_limit_config *cfg, resil_diag *diag);

/* Create a handle in *out (strings copied; listener_ctx and clock must
 * outlive it). Connects and loads the script, bounded by
 * connect_timeout_ms + command_timeout_ms; Redis unreachable is not an
 * error (the handle starts local, and says so with a LOCAL event).
 * RESIL_OK; RESIL_E_INVAL; RESIL_E_NOMEM. */
RESIL_API resil_err resil_fleet_limit_new(resil_fleet_limit **out,
    const resil_fleet_limit_config *cfg, resil_diag *diag);

/* NULL is a no-op. */
RESIL_API void resil_fleet_limit_free(resil_fleet_limit *fl);

/*
 * Take k permits now, or none. RESIL_OK; RESIL_E_LIMITED with the wait in
 * *retry_after_ns (may be NULL): from Redis, the smallest whole number of
 * microseconds after which the k permits would be due, rounded UP (never
 * early), times 1000; from the local share, its ticks (limit.h). For an
 * HTTP Retry-After header use resil_retry_after_seconds(), which rounds
 * up too (a wait of 0.4 s is "1", not "0"). RESIL_E_INVAL for NULL, k == 0
 * or k > burst.
 */
RESIL_API resil_err resil_fleet_limit_acquire(
    resil_fleet_limit *fl, uint32_t k, uint64_t *retry_after_ns);

/*
 * Issue 41 (h3): keyed fleet limits. Take k permits of key's limit now,
 * or none: the same GCRA rule, round trip and answers as
 * resil_fleet_limit_acquire(), with one state per key in Redis,
 * resil:limit:NAME:k:HEX:gcra (HEX: the key's bytes in lowercase hex, so
 * any bytes are safe; PEXPIREd once idle for the burst's span, as the
 * lone limiter's), the key's own rate, period and burst when it has an
 * override, else the handle's. Keyed acquires count their instances apart
 * (resil:limit:NAME:k:instances, :k:members) and agree on settings in
 * resil:limit:NAME:k:settings: the handle's rate, period, burst and a
 * digest of its overrides (in order), so members whose overrides differ
 * are refused as for differing rates (a SETTINGS event; the member decides
 * locally); a key whose own settings changed starts again full.
 *
 * When Redis is away (as for acquire: no answer, nonsense, refused
 * settings; the same LOCAL, CONNECTED and ERROR events, the same
 * reconnect_ms), each key decides on its 1/N share in a local keyed
 * family (include/resil/keyed.h, kind RESIL_KEYED_RATELIMIT): rate per
 * N * period, burst max(1, burst / N), overrides likewise, at most
 * max_keys keys (a key beyond them gets the family's overflow share). The
 * family is made at the first local decision (none is kept while Redis
 * answers) and made again, empty, when N changes.
 *
 * RESIL_OK; RESIL_E_LIMITED with the wait in *retry_after_ns (may be
 * NULL) as acquire's; RESIL_E_INVAL for a NULL handle or key, a handle
 * made with max_keys 0, key_len 0 or above max_key_len, k == 0 or k above
 * the key's burst; RESIL_E_NOMEM. Thread safety as acquire's (the same
 * mutex and connection).
 */
RESIL_API resil_err resil_fleet_limit_acquire_key(resil_fleet_limit *fl,
    const void *key, size_t key_len, uint32_t k, uint64_t *retry_after_ns);

/* The local keyed family's metrics (keys, bytes, bound: keyed.h's) into
 * *out. RESIL_OK; RESIL_E_NOTFOUND when the handle has no local family
 * now (not keyed, or no key has decided locally since N last changed);
 * RESIL_E_INVAL for a NULL argument. */
RESIL_API resil_err resil_fleet_limit_key_metrics(
    resil_fleet_limit *fl, resil_keyed_metrics *out);

/* Whole seconds, rounded up: ceil(retry_after_ns / 10^9). */
RESIL_API uint64_t resil_retry_after_seconds(uint64_t retry_after_ns);

/*
 * Tell the fleet of a server's pushback (issue 42: a Retry-After): no
 * member is granted a permit before Redis's now + pause_ns (rounded up to
 * a microsecond, at most 2^50 / (rate / gcd(rate, period_us)) us), and
 * the fleet's bucket refills from empty after it, its first permit due
 * exactly then. One round trip: a script moves the fleet's TAT to that
 * point, never back (a shorter pause than one in force changes nothing),
 * so the members' acquires need nothing new: they are refused with the
 * time left as their retry-after. *until_us (may be NULL) gets Redis's
 * TIME at the pause's end. RESIL_OK; RESIL_E_INVAL for NULL or a pause of
 * 0; RESIL_E_UNAVAILABLE when the fleet was not told: the member decides
 * locally now, Redis gave no answer (the next acquire reconnects; an
 * ERROR event) or the fleet's settings differ from the member's.
 */
RESIL_API resil_err resil_fleet_limit_pause(
    resil_fleet_limit *fl, uint64_t pause_ns, uint64_t *until_us);

/*
 * Issue 41 (turn 4): the server's pushback for one key of a keyed limiter
 * (made with max_keys > 0): as resil_fleet_limit_pause(), on that key's
 * GCRA state alone (its override's rates, else the limiter's): no member
 * is granted a permit for key before Redis's now + pause_ns, and the
 * key's bucket refills from empty after it. One round trip; the key's TAT
 * moves forward, never back; other keys are untouched. *until_us (may be
 * NULL) as resil_fleet_limit_pause()'s. RESIL_OK; RESIL_E_INVAL for NULL,
 * a pause of 0, a handle not keyed, key_len 0 or above max_key_len;
 * RESIL_E_UNAVAILABLE as resil_fleet_limit_pause() (also when the key's
 * state in Redis holds other settings than the key's). Thread safety as
 * acquire's.
 */
RESIL_API resil_err resil_fleet_limit_pause_key(resil_fleet_limit *fl,
    const void *key, size_t key_len, uint64_t pause_ns, uint64_t *until_us);

typedef struct resil_fleet_limit_info {
	int local_mode;          /* nonzero: deciding on the local share */
	uint32_t instances_seen; /* N at the last answer */
	uint32_t share_n;        /* the N of the local share (0: none yet) */
	uint64_t redis_grants;   /* granted by the fleet */
	uint64_t local_grants;   /* granted by the local share */
	uint64_t rejected;
	uint64_t errors; /* acquires that fell back */
	/* Redis's TIME at the last answer, in microseconds (the decision's
	 * clock reading: for logs and tests). */
	uint64_t redis_time_us;
} resil_fleet_limit_info;

RESIL_API resil_err resil_fleet_limit_get_info(
    resil_fleet_limit *fl, resil_fleet_limit_info *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_FLEET_H */

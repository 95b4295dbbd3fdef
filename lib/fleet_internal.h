/*
 * Private: what lib/fleet.c (the handles, the call path, the sync) uses
 * of lib/fleet_redis.c (the scripts, the connection, the answers'
 * parsing). fleet_redis.c never calls into fleet.c. Never installed.
 */
#ifndef RESIL_FLEET_INTERNAL_H
#define RESIL_FLEET_INTERNAL_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <resil/fleet.h>
#include <stddef.h>
#include <stdint.h>

/* Lease slots per instance. */
#define RESIL__FLEET_MAX_SLOTS 64u

/* The fleet breaker's script (joined once from its two parts). */
const char *resil__fleet_lua(void);
/* The fleet limiter's script: the lone limiter's (keyed 0) or the keyed
 * one's (issue 41, lib/fleet_keyed.c), joined once from their parts. */
const char *resil__fleet_limit_lua(int keyed);

/* The GCRA state's rebase, Lua text shared by the limiter's scripts
 * (lib/fleet_redis.c) and the pause (lib/fleet_pause.c): once Redis's now
 * is more than REBASE / scale past base, base moves to now and tat by the
 * same span (never below 0), so the scaled numbers stay below 2^53. Needs
 * now, base, tat, scale and REBASE in scope. */
#define RESIL__FLEET_LUA_REBASE                                      \
	"if now > base and (now - base) > REBASE / scale then\n"     \
	"  local shift = now - base\n"                                \
	"  if tat / scale > shift then tat = tat - shift * scale else " \
	"tat = 0 end\n"                                               \
	"  base = now\n"                                              \
	"end\n"

/* lib/fleet_pause.c (issue 42): pause the fleet limiter whose state is
 * key for pause_us on Redis's clock (its scale, ts, bs and settings
 * texts as the limiter script's): 0 (*until_us: Redis's TIME when it
 * ends), 1 the fleet's settings differ (nothing done), -1 no answer or
 * nonsense; why says what in the last two. */
int resil__fleet_limit_pause_eval(redisContext *c, const char *key,
    uint64_t pause_us, const char *scale_s, const char *ts_s, const char *bs_s,
    const char *settings, uint64_t *until_us, char *why, size_t cap);

/* Why a command on c got no answer, in buf. */
void resil__fleet_no_answer(const redisContext *c, const char *what,
    uint32_t timeout_ms, char *buf, size_t cap);

/* Connect to host:port with the two timeouts and load script, its sha
 * into sha[41]. 0 on success; otherwise -1, *cp NULL and a reason in
 * buf. */
int resil__fleet_redis_open(redisContext **cp, const char *host, uint32_t port,
    uint32_t connect_ms, uint32_t command_ms, const char *script, char *sha,
    char *buf, size_t cap);

/* Run script with argv[2..argc) (see fleet_redis.c). NULL: no answer. */
redisReply *resil__fleet_eval_script(redisContext *c, const char *script,
    char *sha, int *have_sha, int reload, int argc, const char **argv,
    size_t *argl);

/* Parse the fleet breaker script's answer strictly: 0, or -1 and a
 * reason in buf. */
int resil__fleet_parse_reply(const redisReply *r, uint64_t *state,
    uint64_t *ep, uint64_t *votes, uint64_t *share,
    uint64_t granted[RESIL__FLEET_MAX_SLOTS], size_t *ngranted, char *buf,
    size_t cap);

/* Why a member with settings mine was refused by a fleet whose settings
 * are theirs, in why. */
void resil__fleet_settings_diff(const char *what, const char *mine,
    const char *theirs, char *why, size_t cap);

/* The fleet's settings text when r is the scripts' refusal of this
 * member's settings ({"settings", the fleet's}), else NULL. */
const char *resil__fleet_settings_refusal(const redisReply *r);

/* ---- lib/fleet_conn.c: the connection to the master (issue 44) ---- */

#define RESIL__FLEET_MAX_SENTINELS 8u
#define RESIL__FLEET_HOST_MAX 255u

/* Where the fleet's Redis is: one server (nsent 0), or the master that
 * the sentinels name (Redis Sentinel), found again after each failover. */
typedef struct resil__fconn {
	redisContext *c;
	char sha[41];
	int have_sha;
	int tried; /* a connection has been attempted */
	uint64_t next_reconnect;
	char host[RESIL__FLEET_HOST_MAX + 1]; /* the server, or the master */
	uint32_t port;
	uint32_t nsent, first; /* sentinels; the one asked first */
	char sent_host[RESIL__FLEET_MAX_SENTINELS][RESIL__FLEET_HOST_MAX + 1];
	uint32_t sent_port[RESIL__FLEET_MAX_SENTINELS];
	char master[64]; /* the sentinels' name of the master */
	uint32_t connect_ms, command_ms, reconnect_ms;
	uint64_t switches; /* masters found other than the last one */
} resil__fconn;

/* "H1:P1,H2:P2,..." (1..8 sentinels) and a master name checked: NULL, or
 * why not (a static string naming the fault). */
const char *resil__fleet_sentinels_check(const char *list, const char *master);

/* Set up cn (unconnected) for host:port, or for the sentinels (list not
 * NULL: host and port unused). The list must have passed the check. */
void resil__fconn_init(resil__fconn *cn, const char *host, uint32_t port,
    const char *sentinels, const char *master, uint32_t connect_ms,
    uint32_t command_ms, uint32_t reconnect_ms);

/* Connect (through the sentinels when there are: the master they name,
 * which must say it is one) and load script: 0, or -1 and why in buf. */
int resil__fconn_open(
    resil__fconn *cn, const char *script, char *buf, size_t cap);

void resil__fconn_close(resil__fconn *cn);

/* Whether an error answer means this server is no longer the writable
 * master (READONLY, MASTERDOWN, LOADING, ...): find the master again. */
int resil__fleet_moved(const char *err);

/* ---- the group (lib/fleet_group.c) and its handles (lib/fleet.c) ---- */

struct resil_fleet;
struct resil_fleet_group;

/* fleet_group.c: add f to g (and point f at g's connection): 0, or -1
 * when out of memory; take it out; hold (on 1) or let go (on 0) of g's
 * mutex. */
/* A group's state (its members' list is kept by lib/fleet.c, its sync
 * by lib/fleet_group.c: so that neither file calls the other back). */
struct resil_fleet_group {
	resil_allocator alloc;
	pthread_mutex_t mu; /* everything below */
	resil__fconn cn;
	resil_fleet **m;      /* the handles */
	unsigned char *again; /* per handle: 1 its script, 2 NOSCRIPT */
	size_t n, cap;
	uint64_t round_trips, scripts, reads;
	/* The helper thread (resil_fleet_group_start): its own mutex and
	 * condition variable, apart from mu (which a sync holds). */
	resil_clock clock;
	pthread_t helper;
	pthread_mutex_t hmu;
	pthread_cond_t hcv;
	int hinit, hrunning, hstop;
	uint32_t hinterval_ms;
	uint64_t helper_on; /* atomic: resil_fleet_sync of a member refuses */
};

/* Open g's connection now when it is closed (the reconnect wait
 * respected): 0 when open; otherwise -1, and every member not yet told
 * hears a LOCAL event with why (as a handle made alone does when its
 * Redis is unreachable at creation). */
int resil__fleet_group_connect(struct resil_fleet_group *g, uint64_t now);

int resil__fleet_group_join(
    struct resil_fleet_group *g, struct resil_fleet *f);
void resil__fleet_group_leave(
    struct resil_fleet_group *g, struct resil_fleet *f);
void resil__fleet_group_lock(struct resil_fleet_group *g, int on);

/* fleet.c: f syncs through cn, g's. */
void resil__fleet_attach(
    struct resil_fleet *f, struct resil_fleet_group *g, resil__fconn *cn);
/* Read f's state to report and append its command to its connection: the
 * script (0), or (light_ok, nothing changed) a read of the fleet's state
 * (1); -1 when hiredis is out of memory. */
int resil__fleet_prep(struct resil_fleet *f, uint64_t now, int light_ok);
/* Take r, the answer to f's script: 0 synced; 2 its script must go again
 * (NOSCRIPT); -1 local mode. */
int resil__fleet_take(struct resil_fleet *f, redisReply *r, uint64_t now);
/* The key of f's state mirror ("STATE:EPISODE"), and the take of its
 * value r (read in place of the script): 0 the fleet is as f last saw it
 * (CLOSED, the same episode), 1 it moved on or is unknown (the script
 * must go). */
const char *resil__fleet_at_key(const struct resil_fleet *f);
int resil__fleet_take_at(struct resil_fleet *f, const redisReply *r);
/* f is in local mode: why. */
void resil__fleet_lost(struct resil_fleet *f, const char *why);

#endif

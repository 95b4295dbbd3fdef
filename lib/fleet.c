/*
 * resil fleet: a breaker shared through Redis, off the call path.
 *
 * The call path reads one word, ctl = episode << 8 | LOCAL bit | state,
 * and in HALF_OPEN claims one of this instance's lease slots by CAS. A
 * slot word is episode << 3 | slot state, so an outcome recorded with a
 * permit of an older episode fails its CAS and changes nothing, however
 * it races the sync that moved the episode on.
 *
 * The sync (one thread at a time) owns the connection and everything
 * else; the fleet's transitions are made by one Lua script, which Redis
 * runs atomically: its read-modify-write of the state hash is the
 * compare-and-set.
 */
#define _GNU_SOURCE 1

#include <resil/fleet.h>

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "clock_internal.h"
#include "fleet_internal.h"
#include "fleet_limit.h"
#include "internal.h"

#define NAME_MAX_LEN 63u
#define HOST_MAX_LEN 255u
#define MAX_SLOTS RESIL__FLEET_MAX_SLOTS
#define CTL_LOCAL 0x10u
#define CTL_STATE 0x0fu
/* Set when the fleet decides (not local, not CLOSED): the call path's one
 * test. */
#define CTL_FLEET 0x20u

/* Lease slot states (low 3 bits of a slot word). */
enum {
	LEASE_EMPTY = 0,
	LEASE_FREE = 1,
	LEASE_INUSE = 2,
	LEASE_OK = 3,
	LEASE_FAIL = 4
};

/* One sync's reading of this instance: the counts it reports since the
 * last sync, and its lease slots' reports of episode ep. */
typedef struct sync_in {
	uint64_t ctl, ep, calls, fails, sick, traffic, tr_now;
	resil_breaker_metrics m;
	uint64_t reported[MAX_SLOTS], rep_ok[MAX_SLOTS];
	size_t nrep;
} sync_in;

struct resil_fleet {
	resil_allocator alloc;
	resil_clock clock;
	resil_breaker *b;

	/* The call path's words. acq is the word the acquire's fast path
	 * reads (as an address): the local breaker's acq_word while the
	 * local breaker decides, fleet_decides while the fleet does (set
	 * with ctl, by set_ctl()). bst and bstreak are the local breaker's,
	 * for the record's fast path (lib/breaker_internal.h). */
	uint64_t ctl;
	uint64_t acq;
	struct bstate *bst;
	const uint64_t *bstreak;
	uint64_t slots[MAX_SLOTS];
	/* Local clock: each lease is unusable from then (its grant's sync
	 * began before Redis granted it, so this is never later). */
	uint64_t deadline[MAX_SLOTS];
	/* 1: the local breaker tripped on its own, not CLOSED since */
	uint64_t sick;

	/* The sync's own (one thread at a time). cn: &own, or the
	 * group's connection (used under the group's mutex). */
	resil__fconn own;
	resil__fconn *cn;
	resil_fleet_group *grp;
	resil_fleet *gnext; /* the group's list */
	int forced;         /* we forced the local breaker open */
	uint64_t last_calls, last_fails, last_traffic;
	/* Issue 44, the group's sync: the reading sent (kept until its
	 * answer), whether a state read went in place of the script, the
	 * vote of the last full sync and its time (local clock). */
	sync_in *pend;
	int pend_light, told;
	uint64_t last_sick, last_full, refresh_ns;
	/* Written by the sync, read by get_info from any thread. */
	uint64_t syncs, sync_errors, votes;
	uint64_t share; /* the sick traffic share + 1 (0: not computed) */

	/* Copies of the configuration. */
	char name[NAME_MAX_LEN + 1];
	char instance[NAME_MAX_LEN + 1];
	char key_state[NAME_MAX_LEN + 32];
	char key_votes[NAME_MAX_LEN + 32];
	char key_leases[NAME_MAX_LEN + 32];
	char key_agg[NAME_MAX_LEN + 32];
	char key_inst[NAME_MAX_LEN + 32];
	char key_members[NAME_MAX_LEN + 32];
	char key_at[NAME_MAX_LEN + 32]; /* the state mirror (issue 44) */
	char settings[256]; /* the keys that must agree, "key=value ..." */
	int refused;        /* the fleet refused our settings */
	uint32_t quorum, quorum_pct, k, max_local;
	uint64_t open_wait_ms, lease_ms, vote_ms, bucket_ms;
	uint32_t buckets;
	resil_fleet_listener_fn listener;
	void *listener_ctx;
	resil_breaker_listener_fn user_listener;
	void *user_ctx;

	/* The optional helper thread (resil_fleet_start). */
	pthread_mutex_t hmu;
	pthread_cond_t hcv;
	pthread_t helper;
	int hinit;          /* hmu and hcv exist */
	int hrunning;       /* a helper thread exists (joined by stop) */
	int hstop;          /* asked to stop */
	uint64_t helper_on; /* atomic: the public sync refuses */
	uint32_t hinterval_ms;
};

static uint64_t
mkctl(uint64_t ep, unsigned state, int local)
{
	return ep << 8 | (local ? CTL_LOCAL : 0u) |
	    (!local && state != RESIL_FLEET_CLOSED ? CTL_FLEET : 0u) | state;
}

static uint64_t
mkslot(uint64_t ep, unsigned st)
{
	return ep << 3 | st;
}

/* Never a CLOSED word: acq points here while the fleet decides, so the
 * acquire's one test sends every call to acquire_other(). */
static const uint64_t fleet_decides = W_TRANSIT;

/* Publish ctl, then the acquire's word for it. An acquire that read the
 * old word decides as one that read the old ctl just before. */
static void
set_ctl(resil_fleet *f, uint64_t ctl)
{
	resil__store64(&f->ctl, ctl);
	resil__store64(&f->acq,
	    (uint64_t)(uintptr_t)((ctl & CTL_FLEET) ? &fleet_decides
	                                            : f->b->acq_word));
}

const char *
resil_fleet_state_name(resil_fleet_state s)
{
	switch (s) {
	case RESIL_FLEET_CLOSED:
		return "CLOSED";
	case RESIL_FLEET_OPEN:
		return "OPEN";
	case RESIL_FLEET_HALF_OPEN:
		return "HALF_OPEN";
	}
	return "UNKNOWN";
}

const char *
resil_fleet_event_name(resil_fleet_event_kind k)
{
	switch (k) {
	case RESIL_FLEET_EV_CONNECTED:
		return "connected";
	case RESIL_FLEET_EV_LOCAL:
		return "local";
	case RESIL_FLEET_EV_STATE:
		return "state";
	case RESIL_FLEET_EV_LEASES:
		return "leases";
	case RESIL_FLEET_EV_ERROR:
		return "error";
	case RESIL_FLEET_EV_SETTINGS:
		return "settings";
	}
	return "unknown";
}

static bool
name_ok(const char *s)
{
	size_t i, n;

	n = strlen(s);
	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-'))
			return false;
	}
	return true;
}

/* v within lo..hi, or an error naming what.field. */
static resil_err
range_of(resil_diag *diag, const char *what, const char *field, uint64_t v,
    uint64_t lo, uint64_t hi)
{
	if (v >= lo && v <= hi)
		return RESIL_OK;
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s.%s: %llu is out of range %llu..%llu", what, field,
	    (unsigned long long)v, (unsigned long long)lo,
	    (unsigned long long)hi);
}

static resil_err
range(
    resil_diag *diag, const char *field, uint64_t v, uint64_t lo, uint64_t hi)
{
	return range_of(diag, "fleet", field, v, lo, hi);
}

/* The settings the fleet breaker and the fleet limiter share: names,
 * the server and the timeouts, with what ("fleet", "fleet_limit") in
 * messages. */
static resil_err
check_conn(resil_diag *diag, const char *what, const char *name,
    const char *instance, const char *host, uint32_t port, uint32_t connect_ms,
    uint32_t command_ms, uint32_t reconnect_ms)
{
	resil_err err;

	if (name == NULL || !name_ok(name))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.name: must be 1..63 characters of [A-Za-z0-9._-]",
		    what);
	if (instance != NULL && !name_ok(instance))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.instance: must be NULL or 1..63 characters of "
		    "[A-Za-z0-9._-]",
		    what);
	if (host != NULL && (host[0] == '\0' || strlen(host) > HOST_MAX_LEN))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s.host: must be NULL or 1..255 characters", what);
	if ((err = range_of(diag, what, "port", port, 1, 65535)) ||
	    (err = range_of(
	         diag, what, "connect_timeout_ms", connect_ms, 1, 60000)) ||
	    (err = range_of(
	         diag, what, "command_timeout_ms", command_ms, 1, 60000)) ||
	    (err = range_of(
	         diag, what, "reconnect_ms", reconnect_ms, 0, 3600000)))
		return err;
	return RESIL_OK;
}

resil_err
resil_fleet_config_validate(const resil_fleet_config *cfg, resil_diag *diag)
{
	const uint64_t day = 86400000;
	resil_err err;

	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fleet: config is NULL");
	err = resil__check_size(diag, "fleet", "resil_fleet_config", cfg->size,
	    sizeof(resil_fleet_config));
	if (err != RESIL_OK)
		return err;
	if ((err = check_conn(diag, "fleet", cfg->name, cfg->instance,
	         cfg->host, cfg->port, cfg->connect_timeout_ms,
	         cfg->command_timeout_ms, cfg->reconnect_ms)) ||
	    (err = range(diag, "quorum", cfg->quorum, 1, 1024)) ||
	    (err = range(diag, "quorum_traffic_pct", cfg->quorum_traffic_pct,
	         0, 100)) ||
	    (err = range(diag, "probe_leases", cfg->probe_leases, 1, 1024)) ||
	    (err = range(diag, "max_local_leases", cfg->max_local_leases, 0,
	         MAX_SLOTS)) ||
	    (err = range(diag, "open_wait_ms", cfg->open_wait_ms, 1, day)) ||
	    (err = range(diag, "lease_ms", cfg->lease_ms, 1, day)) ||
	    (err = range(diag, "vote_ms", cfg->vote_ms, 1, day)) ||
	    (err = range(diag, "bucket_ms", cfg->bucket_ms, 1, 3600000)) ||
	    (err = range(diag, "buckets", cfg->buckets, 1, 1000)))
		return err;
	if ((cfg->sentinels != NULL || cfg->master != NULL) &&
	    resil__fleet_sentinels_check(cfg->sentinels, cfg->master) != NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "fleet.%s: %s",
		    cfg->sentinels == NULL ? "sentinels" : "master",
		    resil__fleet_sentinels_check(cfg->sentinels, cfg->master));
	return resil_breaker_config_validate(&cfg->breaker, diag);
}

static void
emit(resil_fleet *f, resil_fleet_event_kind kind, uint32_t leases,
    const char *detail)
{
	resil_fleet_event ev;
	uint64_t ctl = resil__load64(&f->ctl);

	if (f->listener == NULL)
		return;
	ev.kind = kind;
	ev.state = (resil_fleet_state)(ctl & CTL_STATE);
	ev.episode = ctl >> 8;
	ev.leases = leases;
	ev.votes = (uint32_t)resil__load64(&f->votes);
	ev.detail = detail != NULL ? detail : "";
	f->listener(&ev, f->listener_ctx);
}

/* The local breaker's own trips make this instance's vote. */
static void
on_local(const resil_breaker_event *ev, void *ctx)
{
	resil_fleet *f = ctx;

	if (ev->to == RESIL_BREAKER_OPEN &&
	    ev->reason != RESIL_BREAKER_REASON_MANUAL &&
	    ev->reason != RESIL_BREAKER_REASON_RESTORED) {
		resil__store64(&f->sick, 1);
	} else if (ev->to == RESIL_BREAKER_CLOSED) {
		resil__store64(&f->sick, 0);
	}
	if (f->user_listener != NULL)
		f->user_listener(ev, f->user_ctx);
}

static void
disconnect(resil_fleet *f)
{
	resil__fconn_close(f->cn);
}

/* Leave fleet decisions to the local breaker. */
static resil_err
go_local(resil_fleet *f, const char *why, int error_event)
{
	uint64_t ctl = resil__load64(&f->ctl);

	resil__inc64(&f->sync_errors);
	if (error_event)
		emit(f, RESIL_FLEET_EV_ERROR, 0, why);
	if (ctl & CTL_LOCAL)
		return RESIL_E_UNAVAILABLE;
	/* A fleet OPEN or HALF_OPEN becomes a local OPEN with a fresh wait:
	 * the local breaker probes on its own after it. */
	if (f->forced) {
		resil_breaker_transition(f->b, RESIL_BREAKER_OPEN);
		f->forced = 0;
	}
	set_ctl(f, (ctl | CTL_LOCAL) & ~(uint64_t)CTL_FLEET);
	emit(f, RESIL_FLEET_EV_LOCAL, 0, why);
	return RESIL_E_UNAVAILABLE;
}

/* Connect and load the script. 0 on success; otherwise a reason in buf. */
static int
connect_redis(resil_fleet *f, char *buf, size_t cap)
{
	return resil__fconn_open(f->cn, resil__fleet_lua(), buf, cap);
}

/* HOST-pPID, HOST cut to 40 characters of [A-Za-z0-9._-] (others become
 * '_'): PIDs alone collide across hosts. */
static void
default_instance(char *buf, size_t cap)
{
	char host[256];
	size_t i;

	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	host[40] = '\0';
	for (i = 0; host[i] != '\0'; i++) {
		char c = host[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-'))
			host[i] = '_';
	}
	if (host[0] == '\0')
		snprintf(buf, cap, "p%ld", (long)getpid());
	else
		snprintf(buf, cap, "%.40s-p%ld", host, (long)getpid());
}

resil_err
resil_fleet_new(
    resil_fleet **out, const resil_fleet_config *cfg, resil_diag *diag)
{
	resil_breaker_config bc;
	resil_fleet *f;
	resil_err err;
	char why[RESIL_DIAG_MAX];

	if (out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "fleet: out is NULL");
	err = resil_fleet_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	f = resil__calloc(cfg->alloc, sizeof(*f));
	if (f == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet: out of memory");
	f->alloc = *resil__allocator(cfg->alloc);
	f->clock = cfg->breaker.clock != NULL ? *cfg->breaker.clock
	                                      : *resil_clock_system();
	snprintf(f->name, sizeof(f->name), "%s", cfg->name);
	if (cfg->instance != NULL)
		snprintf(
		    f->instance, sizeof(f->instance), "%s", cfg->instance);
	else
		default_instance(f->instance, sizeof(f->instance));
	snprintf(f->key_state, sizeof(f->key_state), "resil:fleet:%s:state",
	    f->name);
	snprintf(f->key_votes, sizeof(f->key_votes), "resil:fleet:%s:votes",
	    f->name);
	snprintf(f->key_leases, sizeof(f->key_leases), "resil:fleet:%s:leases",
	    f->name);
	snprintf(
	    f->key_agg, sizeof(f->key_agg), "resil:fleet:%s:agg:", f->name);
	snprintf(f->key_inst, sizeof(f->key_inst), "resil:fleet:%s:instances",
	    f->name);
	snprintf(f->key_members, sizeof(f->key_members),
	    "resil:fleet:%s:members", f->name);
	snprintf(f->key_at, sizeof(f->key_at), "resil:fleet:%s:at", f->name);
	resil__fconn_init(&f->own, cfg->host, cfg->port, cfg->sentinels,
	    cfg->master, cfg->connect_timeout_ms, cfg->command_timeout_ms,
	    cfg->reconnect_ms);
	f->cn = &f->own;
	{
		uint64_t keep = cfg->bucket_ms * cfg->buckets;

		f->refresh_ns = (keep < cfg->vote_ms ? keep : cfg->vote_ms) *
		    (RESIL_NS_PER_MS / 2);
	}
	f->quorum = cfg->quorum;
	f->quorum_pct = cfg->quorum_traffic_pct;
	f->k = cfg->probe_leases;
	f->max_local = cfg->max_local_leases != 0
	    ? cfg->max_local_leases
	    : (cfg->probe_leases < MAX_SLOTS ? cfg->probe_leases : MAX_SLOTS);
	f->open_wait_ms = cfg->open_wait_ms;
	f->lease_ms = cfg->lease_ms;
	f->vote_ms = cfg->vote_ms;
	f->bucket_ms = cfg->bucket_ms;
	f->buckets = cfg->buckets;
	snprintf(f->settings, sizeof(f->settings),
	    "quorum=%u quorum_traffic_pct=%u probe_leases=%u "
	    "open_wait_ms=%llu lease_ms=%llu vote_ms=%llu bucket_ms=%llu "
	    "buckets=%u",
	    (unsigned)f->quorum, (unsigned)f->quorum_pct, (unsigned)f->k,
	    (unsigned long long)f->open_wait_ms,
	    (unsigned long long)f->lease_ms, (unsigned long long)f->vote_ms,
	    (unsigned long long)f->bucket_ms, (unsigned)f->buckets);
	f->listener = cfg->listener;
	f->listener_ctx = cfg->listener_ctx;
	f->user_listener = cfg->breaker.listener;
	f->user_ctx = cfg->breaker.listener_ctx;
	f->ctl = mkctl(0, RESIL_FLEET_CLOSED, 1);

	bc = cfg->breaker;
	if (bc.alloc == NULL)
		bc.alloc = cfg->alloc;
	bc.listener = on_local;
	bc.listener_ctx = f;
	err = resil_breaker_new(&f->b, &bc, diag);
	if (err != RESIL_OK) {
		resil__free(&f->alloc, f, sizeof(*f));
		return err;
	}
	f->bst = f->b->st;
	f->bstreak = f->b->streak;
	set_ctl(f, f->ctl);
	if (cfg->group != NULL) {
		/* The group connects at its first sync. */
		f->pend = resil__calloc(&f->alloc, sizeof(*f->pend));
		if (f->pend == NULL) {
			resil_breaker_free(f->b);
			resil__free(&f->alloc, f, sizeof(*f));
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "fleet: out of memory");
		}
		if (resil__fleet_group_join(cfg->group, f) != 0) {
			resil__free(&f->alloc, f->pend, sizeof(*f->pend));
			resil_breaker_free(f->b);
			resil__free(&f->alloc, f, sizeof(*f));
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "fleet: out of memory");
		}
		*out = f;
		return RESIL_OK;
	}
	/* Unreachable now is not an error: the handle starts local. */
	f->cn->tried = 1;
	if (connect_redis(f, why, sizeof(why)) != 0) {
		f->cn->next_reconnect = resil_clock_now(&f->clock) +
		    (uint64_t)f->cn->reconnect_ms * RESIL_NS_PER_MS;
		resil__inc64(&f->sync_errors);
		emit(f, RESIL_FLEET_EV_LOCAL, 0, why);
	}
	*out = f;
	return RESIL_OK;
}

void
resil_fleet_free(resil_fleet *f)
{
	resil_allocator a;

	if (f == NULL)
		return;
	(void)resil_fleet_stop(f);
	if (f->hinit) {
		pthread_cond_destroy(&f->hcv);
		pthread_mutex_destroy(&f->hmu);
	}
	if (f->grp != NULL)
		resil__fleet_group_leave(f->grp, f);
	else
		disconnect(f);
	if (f->pend != NULL)
		resil__free(&f->alloc, f->pend, sizeof(*f->pend));
	resil_breaker_free(f->b);
	a = f->alloc;
	resil__free(&a, f, sizeof(*f));
}

resil_breaker *
resil_fleet_breaker(resil_fleet *f)
{
	return f != NULL ? f->b : NULL;
}

resil_fleet_state
resil_fleet_get_state(const resil_fleet *f)
{
	if (f == NULL)
		return RESIL_FLEET_CLOSED;
	return (resil_fleet_state)(resil__load64(&f->ctl) & CTL_STATE);
}

/* HALF_OPEN (and OPEN): off the fast path, so that path keeps no
 * registers for it. */
static __attribute__((noinline)) resil_err
acquire_probe(resil_fleet *f, resil_fleet_permit *p, uint64_t ctl)
{
	uint64_t ep, now;
	unsigned j;

	if (p == NULL)
		return RESIL_E_INVAL;
	if ((ctl & CTL_STATE) != RESIL_FLEET_HALF_OPEN)
		return RESIL_E_OPEN;
	ep = ctl >> 8;
	now = resil_clock_now(&f->clock);
	for (j = 0; j < f->max_local; j++) {
		uint64_t w = resil__load64(&f->slots[j]);

		/* A lease past its local deadline may have lapsed in
		 * Redis: never use it. */
		if (w == mkslot(ep, LEASE_FREE) &&
		    now < resil__load64(&f->deadline[j]) &&
		    resil__cas64(&f->slots[j], w, mkslot(ep, LEASE_INUSE))) {
			memset(&p->local, 0, sizeof(p->local));
			p->kind = 2;
			p->episode = ep;
			p->slot = j;
			return RESIL_OK;
		}
	}
	return RESIL_E_OPEN;
}

/* Everything but the local breaker's CLOSED grant: the fleet decides
 * (OPEN, HALF_OPEN), or the local breaker's full path. */
static __attribute__((noinline)) resil_err
acquire_other(resil_fleet *f, resil_fleet_permit *p)
{
	uint64_t ctl = resil__load64(&f->ctl);

	if (ctl & CTL_FLEET)
		return acquire_probe(f, p, ctl);
	return resil_breaker_acquire(f->b, (resil_permit *)(void *)p);
}

/*
 * The call path is the local breaker's own fast path, inlined
 * (lib/breaker_internal.h): its one word is f->acq, the local breaker's
 * while it decides (fleet CLOSED or local mode), a word never CLOSED while
 * the fleet does, so that the fleet's state costs no test of its own. A
 * local permit is the breaker's own (p->local, the first member); a
 * probe permit has kind 2 and an empty p->local. kind is written for
 * probes only: a permit struct reused for a local call after a probe may
 * still say 2, so its granted p->local (flags set) decides (record_probe).
 */
resil_err
resil_fleet_acquire(resil_fleet *f, resil_fleet_permit *p)
{
	if (RESIL__UNLIKELY(f == NULL || p == NULL))
		return RESIL_E_INVAL;
	if (RESIL__LIKELY(resil__breaker_grant_fast(
	        (const uint64_t *)(uintptr_t)resil__load64(&f->acq),
	        &p->local)))
		return RESIL_OK;
	return acquire_other(f, p);
}

static __attribute__((noinline)) resil_err
record_probe(resil_fleet *f, resil_fleet_permit *p, resil_outcome outcome)
{
	unsigned st;

	/* A local permit in a struct that held a probe before. */
	if (p->local.flags != 0)
		return resil_breaker_record(f->b, &p->local, outcome);
	if (p->slot >= f->max_local)
		return RESIL_E_MISUSE;
	switch (outcome) {
	case RESIL_OUTCOME_SUCCESS:
		st = LEASE_OK;
		break;
	case RESIL_OUTCOME_FAILURE:
		st = LEASE_FAIL;
		break;
	case RESIL_OUTCOME_IGNORED:
	case RESIL_OUTCOME_BUSINESS:
		st = LEASE_FREE;
		break;
	default:
		return RESIL_E_INVAL;
	}
	p->kind = 0;
	/* Fails harmlessly when the episode has moved on. */
	(void)resil__cas64(&f->slots[p->slot], mkslot(p->episode, LEASE_INUSE),
	    mkslot(p->episode, st));
	return RESIL_OK;
}

static __attribute__((noinline)) resil_err
record_other(resil_fleet *f, resil_fleet_permit *p, resil_outcome outcome)
{
	if (p->kind == 2)
		return record_probe(f, p, outcome);
	/* A local permit (or a spent one): the breaker tracks its
	 * spending itself. */
	return resil_breaker_record(f->b, &p->local, outcome);
}

/* A success that changes nothing in the local breaker is its fast path,
 * inlined; a probe's p->local is empty, so never takes it. */
resil_err
resil_fleet_record(
    resil_fleet *f, resil_fleet_permit *p, resil_outcome outcome)
{
	if (RESIL__UNLIKELY(f == NULL || p == NULL))
		return RESIL_E_INVAL;
	if (RESIL__LIKELY(outcome == RESIL_OUTCOME_SUCCESS &&
	        resil__breaker_success_fast(
	            f->bst, f->bstreak, &p->local, false)))
		return RESIL_OK;
	return record_other(f, p, outcome);
}

resil_err
resil_fleet_release(resil_fleet *f, resil_fleet_permit *p)
{
	if (f == NULL || p == NULL)
		return RESIL_E_INVAL;
	if (p->kind != 2 || p->local.flags != 0)
		return resil_breaker_release(f->b, &p->local);
	if (p->slot >= f->max_local)
		return RESIL_E_MISUSE;
	p->kind = 0;
	(void)resil__cas64(&f->slots[p->slot], mkslot(p->episode, LEASE_INUSE),
	    mkslot(p->episode, LEASE_FREE));
	return RESIL_OK;
}

#define ARG_FIXED 27u
#define ARG_MAX (ARG_FIXED + 3u + 3u * MAX_SLOTS)
#define ARG_LEN 32u

static resil_err sync_step(resil_fleet *f, uint64_t now);

resil_err
resil_fleet_sync(resil_fleet *f, uint64_t now)
{
	if (f == NULL)
		return RESIL_E_INVAL;
	if (resil__load64(&f->helper_on) != 0 ||
	    (f->grp != NULL && resil__load64(&f->grp->helper_on) != 0))
		return RESIL_E_MISUSE; /* the (group's) helper thread syncs */
	return sync_step(f, now);
}

static void *
helper_main(void *arg)
{
	resil_fleet *f = arg;
	struct timespec ts;

	pthread_mutex_lock(&f->hmu);
	while (!f->hstop) {
		pthread_mutex_unlock(&f->hmu);
		(void)sync_step(f, resil_clock_now(&f->clock));
		pthread_mutex_lock(&f->hmu);
		if (f->hstop)
			break;
		/* The optional helper thread sleeps real time on a condition
		 * variable of the monotonic system clock (an injected clock
		 * cannot wake one; lib/clock.c reads it). Its sync steps read
		 * the fleet's own clock. */
		resil__cond_deadline(&ts, f->hinterval_ms);
		while (!f->hstop &&
		    pthread_cond_timedwait(&f->hcv, &f->hmu, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&f->hmu);
	return NULL;
}

resil_err
resil_fleet_start(resil_fleet *f, uint32_t interval_ms, resil_diag *diag)
{
	pthread_condattr_t ca;
	int rc;

	if (f == NULL || interval_ms == 0 || interval_ms > 3600000)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet: start needs a handle and interval_ms 1..3600000");
	if (!f->hinit) {
		if (pthread_condattr_init(&ca) != 0)
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "fleet: no condattr");
		(void)resil__condattr_monotonic(&ca);
		rc = pthread_cond_init(&f->hcv, &ca);
		pthread_condattr_destroy(&ca);
		if (rc != 0)
			return resil__diagf(diag, RESIL_E_NOMEM,
			    "fleet: no condition variable");
		if (pthread_mutex_init(&f->hmu, NULL) != 0) {
			pthread_cond_destroy(&f->hcv);
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "fleet: no mutex");
		}
		f->hinit = 1;
	}
	pthread_mutex_lock(&f->hmu);
	if (f->hrunning) {
		pthread_mutex_unlock(&f->hmu);
		return resil__diagf(diag, RESIL_E_MISUSE,
		    "fleet: the helper thread is running already");
	}
	f->hstop = 0;
	f->hinterval_ms = interval_ms;
	resil__store64(&f->helper_on, 1);
	rc = pthread_create(&f->helper, NULL, helper_main, f);
	if (rc != 0) {
		resil__store64(&f->helper_on, 0);
		pthread_mutex_unlock(&f->hmu);
		return resil__diagf(diag, RESIL_E_NOMEM,
		    "fleet: cannot start the helper thread: %s", strerror(rc));
	}
	f->hrunning = 1;
	pthread_mutex_unlock(&f->hmu);
	return RESIL_OK;
}

resil_err
resil_fleet_stop(resil_fleet *f)
{
	pthread_t t;

	if (f == NULL)
		return RESIL_E_INVAL;
	if (!f->hinit)
		return RESIL_OK;
	pthread_mutex_lock(&f->hmu);
	if (!f->hrunning) {
		pthread_mutex_unlock(&f->hmu);
		return RESIL_OK;
	}
	f->hstop = 1;
	t = f->helper;
	pthread_cond_broadcast(&f->hcv);
	pthread_mutex_unlock(&f->hmu);
	/* The thread finishes its sync in progress (bounded by the sync's
	 * own timeouts) and exits. */
	pthread_join(t, NULL);
	pthread_mutex_lock(&f->hmu);
	f->hrunning = 0;
	resil__store64(&f->helper_on, 0);
	pthread_mutex_unlock(&f->hmu);
	return RESIL_OK;
}

/* The script's answer (resil__fleet_parse_reply). */
typedef struct sync_out {
	uint64_t state, ep, votes, share;
	uint64_t granted[MAX_SLOTS];
	size_t ngranted;
} sync_out;

/* The script's arguments; argv[0] and [1] are resil__fleet_eval_script's. */
typedef struct sync_args {
	const char *argv[ARG_MAX];
	size_t argl[ARG_MAX];
	char nums[ARG_MAX][ARG_LEN];
	size_t argc;
} sync_args;

static void
args_str(sync_args *a, const char *s)
{
	a->argv[a->argc] = s;
	a->argl[a->argc] = strlen(s);
	a->argc++;
}

static void
args_num(sync_args *a, uint64_t v)
{
	snprintf(a->nums[a->argc], ARG_LEN, "%llu", (unsigned long long)v);
	args_str(a, a->nums[a->argc]);
}

/* Connected, or (re)connect now when it is time: RESIL_OK, else
 * go_local's answer. */
static resil_err
sync_connect(resil_fleet *f, uint64_t now)
{
	char why[RESIL_DIAG_MAX];
	resil__fconn *cn = f->cn;

	if (cn->c != NULL)
		return RESIL_OK;
	if (cn->tried && now < cn->next_reconnect)
		return go_local(f, "redis unreachable", 0);
	cn->tried = 1;
	if (connect_redis(f, why, sizeof(why)) != 0) {
		cn->next_reconnect =
		    now + (uint64_t)cn->reconnect_ms * RESIL_NS_PER_MS;
		return go_local(f, why, 0);
	}
	return RESIL_OK;
}

/* What this sync reports: the local breaker's counts since the last one,
 * and whether this instance votes the fleet sick. */
static void
sync_read(resil_fleet *f, sync_in *in)
{
	int was_local = (in->ctl & CTL_LOCAL) != 0;
	const resil_breaker_metrics *m = &in->m;

	in->ep = in->ctl >> 8;
	resil_breaker_get_metrics(f->b, &in->m);
	in->calls = m->successes + m->failures - f->last_calls;
	in->fails = m->failures - f->last_fails;
	/* Traffic: every call asked of this instance while the fleet let
	 * the local breaker decide. */
	in->tr_now = m->successes + m->failures + m->ignored + m->rejections;
	in->traffic = in->tr_now - f->last_traffic;
	/* The vote is the local breaker's state now: tripped on its own and
	 * not CLOSED since. A trip healed before this sync (one made in local
	 * mode while Redis was away, say) casts no vote. */
	in->sick = resil__load64(&f->sick) != 0;
	/* Votes count only while the fleet is CLOSED (the script clears them
	 * when it closes): a trip from before the fleet opened must not vote
	 * again in the sync that learns it closed. */
	if (!was_local && (in->ctl & CTL_STATE) != RESIL_FLEET_CLOSED)
		in->sick = 0;
}

/* The script's arguments (see lib/fleet_redis.c): the keys, the counts, the
 * episode's reports, then the slots offered for leases. */
static void
sync_args_build(resil_fleet *f, sync_in *in, sync_args *a)
{
	uint64_t held = 0, w;
	size_t i, ncand = 0;

	a->argc = 2; /* EVALSHA or EVAL, and the script */
	args_str(a, "7");
	args_str(a, f->key_state);
	args_str(a, f->key_votes);
	args_str(a, f->key_leases);
	args_str(a, f->key_agg);
	args_str(a, f->key_inst);
	args_str(a, f->key_members);
	args_str(a, f->key_at);
	args_str(a, f->instance);
	args_num(a, in->sick);
	args_num(a, in->calls);
	args_num(a, in->fails);
	args_num(a, f->quorum);
	args_num(a, f->k);
	args_num(a, f->open_wait_ms);
	args_num(a, f->lease_ms);
	args_num(a, f->vote_ms);
	args_num(a, f->bucket_ms);
	args_num(a, f->bucket_ms * f->buckets);
	args_num(a, in->traffic);
	args_num(a, f->quorum_pct);
	args_num(a, in->ep);
	in->nrep = 0;
	for (i = 0; i < f->max_local; i++) {
		w = resil__load64(&f->slots[i]);
		if ((w >> 3) != in->ep || (w & 7u) == LEASE_EMPTY)
			continue;
		held++;
		if ((w & 7u) == LEASE_OK || (w & 7u) == LEASE_FAIL) {
			in->reported[in->nrep] = i;
			in->rep_ok[in->nrep++] = (w & 7u) == LEASE_OK;
		}
	}
	args_num(a, in->nrep);
	args_str(a, f->settings);
	for (i = 0; i < in->nrep; i++) {
		args_num(a, in->reported[i]);
		args_num(a, in->rep_ok[i]);
	}
	for (i = 0; i < f->max_local && held + ncand < f->max_local; i++) {
		w = resil__load64(&f->slots[i]);
		if ((w >> 3) != in->ep || (w & 7u) == LEASE_EMPTY) {
			args_num(a, i);
			ncand++;
		}
	}
}

/* Synced: take the script's answer o into this instance at now. */
static void
sync_apply(resil_fleet *f, const sync_in *in, const sync_out *o, uint64_t now)
{
	int was_local = (in->ctl & CTL_LOCAL) != 0, changed;
	uint64_t ep = in->ep;
	size_t i;

	/* Reports sent are done with. */
	for (i = 0; i < in->nrep; i++)
		(void)resil__cas64(&f->slots[in->reported[i]],
		    mkslot(ep, in->rep_ok[i] ? LEASE_OK : LEASE_FAIL),
		    mkslot(ep, LEASE_EMPTY));
	f->last_calls = in->m.successes + in->m.failures;
	f->last_fails = in->m.failures;
	f->last_traffic = in->tr_now;
	resil__store64(&f->votes, o->votes);
	resil__store64(&f->share, o->share);
	resil__inc64(&f->syncs);
	f->refused = 0;

	if (o->state == RESIL_FLEET_CLOSED) {
		if (f->forced)
			resil_breaker_reset(f->b);
		f->forced = 0;
	} else if (resil_breaker_get_state(f->b) !=
	    RESIL_BREAKER_FORCED_OPEN) {
		resil_breaker_force_open(f->b);
		f->forced = 1;
	} else {
		f->forced = 1;
	}
	changed = o->ep != ep || o->state != (in->ctl & CTL_STATE);
	/* Leases of other episodes are void. Episode numbers can come back
	 * (a Redis restart, someone resetting the keys), so a slot must not
	 * keep an old episode's lease that could match a later one; a call
	 * holding one finds its slot changed and its outcome is stale. */
	if (o->ep != ep)
		for (i = 0; i < f->max_local; i++)
			if ((resil__load64(&f->slots[i]) >> 3) != o->ep)
				resil__store64(&f->slots[i], 0);
	set_ctl(f, mkctl(o->ep, (unsigned)o->state, 0));
	for (i = 0; i < o->ngranted; i++) {
		resil__store64(&f->deadline[o->granted[i]],
		    now + f->lease_ms * RESIL_NS_PER_MS);
		resil__store64(
		    &f->slots[o->granted[i]], mkslot(o->ep, LEASE_FREE));
	}
	if (was_local)
		emit(f, RESIL_FLEET_EV_CONNECTED, 0, "synced");
	if (changed)
		emit(f, RESIL_FLEET_EV_STATE, 0, "");
	if (o->ngranted > 0)
		emit(f, RESIL_FLEET_EV_LEASES, (uint32_t)o->ngranted, "");
}
/* The fleet refused this member's settings (the fleet's are theirs):
 * name the keys that differ, once per refusal, and decide locally. */
static resil_err
refuse_settings(resil_fleet *f, const char *theirs)
{
	char why[RESIL_DIAG_MAX], what[NAME_MAX_LEN + 16];

	snprintf(what, sizeof(what), "fleet %s", f->name);
	resil__fleet_settings_diff(
	    what, f->settings, theirs, why, sizeof(why));
	if (!f->refused)
		emit(f, RESIL_FLEET_EV_SETTINGS, 0, why);
	f->refused = 1;
	return go_local(f, why, 0);
}

/* The answer r to a script sent at now for in: RESIL_OK when synced;
 * otherwise local mode (go_local's answer). */
static resil_err
sync_take(resil_fleet *f, sync_in *in, redisReply *r, uint64_t now)
{
	char why[RESIL_DIAG_MAX];
	sync_out o;

	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(why, sizeof(why), "redis script: %.200s", r->str);
		if (resil__fleet_moved(r->str)) {
			/* Not the writable master (any more): find it. */
			disconnect(f);
			f->cn->next_reconnect = now;
			return go_local(f, why, 0);
		}
		return go_local(f, why, 1);
	}
	if (resil__fleet_settings_refusal(r) != NULL)
		return refuse_settings(f, resil__fleet_settings_refusal(r));
	if (resil__fleet_parse_reply(r, &o.state, &o.ep, &o.votes, &o.share,
	        o.granted, &o.ngranted, why, sizeof(why)) != 0)
		return go_local(f, why, 1);
	sync_apply(f, in, &o, now);
	f->last_sick = in->sick;
	f->last_full = now;
	return RESIL_OK;
}

/* The connection is gone (no answer within the timeout, or broken): a
 * late answer could still arrive, so it is done; local mode. */
static resil_err
sync_lost(resil_fleet *f, uint64_t now)
{
	char why[RESIL_DIAG_MAX];

	resil__fleet_no_answer(
	    f->cn->c, "redis", f->cn->command_ms, why, sizeof(why));
	disconnect(f);
	f->cn->next_reconnect = now;
	return go_local(f, why, 0);
}

static resil_err
sync_step(resil_fleet *f, uint64_t now)
{
	sync_args a;
	sync_in in;
	redisReply *r;
	resil_err err;

	if (f == NULL)
		return RESIL_E_INVAL;
	if (f->grp != NULL)
		resil__fleet_group_lock(f->grp, 1);
	in.ctl = resil__load64(&f->ctl);
	if ((err = sync_connect(f, now)) != RESIL_OK)
		goto out;
	sync_read(f, &in);
	sync_args_build(f, &in, &a);
	r = resil__fleet_eval_script(f->cn->c, resil__fleet_lua(), f->cn->sha,
	    &f->cn->have_sha, 1, (int)a.argc, a.argv, a.argl);
	if (r == NULL) {
		err = sync_lost(f, now);
		goto out;
	}
	err = sync_take(f, &in, r, now);
	freeReplyObject(r);
out:
	if (f->grp != NULL)
		resil__fleet_group_lock(f->grp, 0);
	return err;
}

/* ---- the group's side (lib/fleet_group.c, fleet_internal.h) ---- */

/* The group's members (the group's mutex), here beside
 * resil__fleet_attach() which a join calls. */
void
resil__fleet_group_lock(resil_fleet_group *g, int on)
{
	if (on)
		pthread_mutex_lock(&g->mu);
	else
		pthread_mutex_unlock(&g->mu);
}

int
resil__fleet_group_join(resil_fleet_group *g, resil_fleet *f)
{
	pthread_mutex_lock(&g->mu);
	if (g->n == g->cap) {
		size_t cap = g->cap != 0 ? g->cap * 2 : 16;
		resil_fleet **m =
		    resil__calloc(&g->alloc, cap * sizeof(resil_fleet *));
		unsigned char *again = resil__calloc(&g->alloc, cap);

		if (m == NULL || again == NULL) {
			if (m != NULL)
				resil__free(
				    &g->alloc, m, cap * sizeof(resil_fleet *));
			if (again != NULL)
				resil__free(&g->alloc, again, cap);
			pthread_mutex_unlock(&g->mu);
			return -1;
		}
		if (g->n != 0)
			memcpy(m, g->m, g->n * sizeof(resil_fleet *));
		if (g->m != NULL) {
			resil__free(
			    &g->alloc, g->m, g->cap * sizeof(resil_fleet *));
			resil__free(&g->alloc, g->again, g->cap);
		}
		g->m = m;
		g->again = again;
		g->cap = cap;
	}
	g->m[g->n++] = f;
	resil__fleet_attach(f, g, &g->cn);
	pthread_mutex_unlock(&g->mu);
	return 0;
}

void
resil__fleet_group_leave(resil_fleet_group *g, resil_fleet *f)
{
	size_t i;

	pthread_mutex_lock(&g->mu);
	for (i = 0; i < g->n; i++)
		if (g->m[i] == f) {
			g->m[i] = g->m[--g->n];
			break;
		}
	pthread_mutex_unlock(&g->mu);
}


void
resil__fleet_attach(resil_fleet *f, resil_fleet_group *g, resil__fconn *cn)
{
	f->grp = g;
	f->cn = cn;
}

/* Whether nothing the fleet decides by changed since f's last full
 * sync, so that a read of the fleet's state may stand in for the script
 * (see fleet.h): the fleet CLOSED, no vote cast or withdrawn, no lease,
 * the registration fresh, and no traffic to push when the traffic share
 * counts it (quorum_traffic_pct > 0; otherwise the counts wait for the
 * next full sync, in the bucket of that sync). */
static int
unchanged(const resil_fleet *f, const sync_in *in, uint64_t now)
{
	return !(in->ctl & CTL_LOCAL) &&
	    (in->ctl & CTL_STATE) == RESIL_FLEET_CLOSED && !f->refused &&
	    (f->quorum_pct == 0 ||
	        (in->calls == 0 && in->fails == 0 && in->traffic == 0)) &&
	    in->sick == 0 && f->last_sick == 0 && f->last_full != 0 &&
	    now >= f->last_full && now - f->last_full < f->refresh_ns;
}

int
resil__fleet_prep(resil_fleet *f, uint64_t now, int light_ok)
{
	sync_args a;
	sync_in *in = f->pend;
	redisContext *c = f->cn->c;

	in->ctl = resil__load64(&f->ctl);
	sync_read(f, in);
	f->pend_light = light_ok && unchanged(f, in, now);
	if (f->pend_light)
		return 1; /* the group reads f's mirror (resil__fleet_at_key)
		           */
	sync_args_build(f, in, &a);
	a.argv[0] = "EVALSHA";
	a.argv[1] = f->cn->sha;
	a.argl[0] = 7;
	a.argl[1] = 40;
	return redisAppendCommandArgv(c, (int)a.argc, a.argv, a.argl) ==
	        REDIS_OK
	    ? 0
	    : -1;
}

const char *
resil__fleet_at_key(const resil_fleet *f)
{
	return f->key_at;
}

int
resil__fleet_take_at(resil_fleet *f, const redisReply *r)
{
	uint64_t ctl = f->pend->ctl;
	char want[32];

	snprintf(want, sizeof(want), "0:%llu", (unsigned long long)(ctl >> 8));
	if (r->type != REDIS_REPLY_STRING || strcmp(r->str, want) != 0)
		return 1;
	resil__inc64(&f->syncs);
	return 0;
}

int
resil__fleet_take(resil_fleet *f, redisReply *r, uint64_t now)
{
	if (r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOSCRIPT", 8) == 0)
		return 2;
	return sync_take(f, f->pend, r, now) == RESIL_OK ? 0 : -1;
}

void
resil__fleet_lost(resil_fleet *f, const char *why)
{
	/* A handle of a group starts local without a word (the group
	 * connects at its first sync): the first failure says it. */
	if (!f->told && resil__load64(&f->syncs) == 0)
		emit(f, RESIL_FLEET_EV_LOCAL, 0, why);
	f->told = 1;
	(void)go_local(f, why, 0);
}

resil_err
resil_fleet_get_info(resil_fleet *f, resil_fleet_info *out)
{
	uint64_t ctl, ep;
	unsigned j;

	if (f == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	ctl = resil__load64(&f->ctl);
	ep = ctl >> 8;
	out->state = (resil_fleet_state)(ctl & CTL_STATE);
	out->episode = ep;
	out->local_mode = (ctl & CTL_LOCAL) != 0;
	for (j = 0; j < f->max_local; j++)
		if (resil__load64(&f->slots[j]) == mkslot(ep, LEASE_FREE))
			out->leases_held++;
	out->votes = (uint32_t)resil__load64(&f->votes);
	out->sick_traffic_pct = (int32_t)resil__load64(&f->share) - 1;
	out->syncs = resil__load64(&f->syncs);
	out->sync_errors = resil__load64(&f->sync_errors);
	out->local_state = resil_breaker_get_state(f->b);
	out->connect_timeout_ms = f->cn->connect_ms;
	out->command_timeout_ms = f->cn->command_ms;
	out->reconnect_ms = f->cn->reconnect_ms;
	out->max_local_leases = f->max_local;
	snprintf(out->settings, sizeof(out->settings), "%s", f->settings);
	return RESIL_OK;
}

/* ------------------------------------------------------------------ */
/* The fleet-wide GCRA rate limiter                                    */
/* ------------------------------------------------------------------ */

static resil_err
lrange(
    resil_diag *diag, const char *field, uint64_t v, uint64_t lo, uint64_t hi)
{
	return range_of(diag, "fleet_limit", field, v, lo, hi);
}

resil_err
resil_fleet_limit_config_validate(
    const resil_fleet_limit_config *cfg, resil_diag *diag)
{
	resil_ratelimit_config lc;
	uint64_t g, scale, ts;
	resil_err err;

	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fleet_limit: config is NULL");
	err =
	    resil__check_size(diag, "fleet_limit", "resil_fleet_limit_config",
	        cfg->size, sizeof(resil_fleet_limit_config));
	if (err != RESIL_OK)
		return err;
	if ((err = check_conn(diag, "fleet_limit", cfg->name, cfg->instance,
	         cfg->host, cfg->port, cfg->connect_timeout_ms,
	         cfg->command_timeout_ms, cfg->reconnect_ms)) ||
	    (err = lrange(diag, "rate", cfg->rate, 1, 1000000000)) ||
	    (err = lrange(diag, "period_ms", cfg->period_ms, 1, 86400000)) ||
	    (err = lrange(diag, "burst", cfg->burst, 1, 1000000000)) ||
	    (err = lrange(diag, "instance_ttl_ms", cfg->instance_ttl_ms, 1,
	         86400000)) ||
	    (err = lrange(diag, "min_instances", cfg->min_instances, 1, 4096)))
		return err;
	if ((cfg->sentinels != NULL || cfg->master != NULL) &&
	    resil__fleet_sentinels_check(cfg->sentinels, cfg->master) != NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "fleet_limit.%s: %s",
		    cfg->sentinels == NULL ? "sentinels" : "master",
		    resil__fleet_sentinels_check(cfg->sentinels, cfg->master));
	g = resil__gcd64(cfg->rate, cfg->period_ms * 1000);
	if (g == 0 || cfg->burst == 0) /* not reached: the ranges above */
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fleet_limit: rate or burst is 0");
	scale = cfg->rate / g;
	ts = cfg->period_ms * 1000 / g;
	if (scale > (UINT64_C(1) << 24) ||
	    ts > (UINT64_C(1) << 50) / cfg->burst)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_limit.rate: %u per %llu ms with burst %u needs "
		    "rate / gcd(rate, period_us) <= 2^24 and burst * "
		    "period_us / gcd <= 2^50",
		    cfg->rate, (unsigned long long)cfg->period_ms, cfg->burst);
	/* The local fallback at N = 1 must be a valid limiter. */
	resil_ratelimit_config_init(&lc);
	lc.rate = cfg->rate;
	lc.period_ns = cfg->period_ms * RESIL_NS_PER_MS;
	lc.burst = cfg->burst;
	err = resil_ratelimit_config_validate(&lc, diag);
	if (err != RESIL_OK)
		return err;
	return resil__fkeyed_validate(cfg, diag); /* issue 41 */
}

static void
lemit(resil_fleet_limit *fl, resil_fleet_event_kind kind, const char *detail)
{
	resil_fleet_event ev;

	if (fl->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = kind;
	ev.votes = (uint32_t)fl->seen; /* instances seen */
	ev.detail = detail != NULL ? detail : "";
	fl->listener(&ev, fl->listener_ctx);
}

static void
ldisconnect(resil_fleet_limit *fl)
{
	resil__fconn_close(&fl->cn);
}

/* Connect (through the sentinels when there are) and load the script. */
static int
lconnect(resil_fleet_limit *fl, char *buf, size_t cap)
{
	return resil__fconn_open(&fl->cn, resil__fleet_limit_lua(0), buf, cap);
}

resil_err
resil_fleet_limit_new(resil_fleet_limit **out,
    const resil_fleet_limit_config *cfg, resil_diag *diag)
{
	resil_fleet_limit *fl;
	resil_err err;
	uint64_t g;
	char why[RESIL_DIAG_MAX];

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fleet_limit: out is NULL");
	err = resil_fleet_limit_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	fl = resil__calloc(cfg->alloc, sizeof(*fl));
	if (fl == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_limit: out of memory");
	fl->alloc = *resil__allocator(cfg->alloc);
	fl->clock = cfg->clock != NULL && cfg->clock->now != NULL
	    ? *cfg->clock
	    : *resil_clock_system();
	if (pthread_mutex_init(&fl->mu, NULL) != 0) {
		resil__free(&fl->alloc, fl, sizeof(*fl));
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_limit: no mutex");
	}
	if (cfg->instance != NULL)
		snprintf(
		    fl->instance, sizeof(fl->instance), "%s", cfg->instance);
	else
		default_instance(fl->instance, sizeof(fl->instance));
	resil__fconn_init(&fl->cn, cfg->host, cfg->port, cfg->sentinels,
	    cfg->master, cfg->connect_timeout_ms, cfg->command_timeout_ms,
	    cfg->reconnect_ms);
	snprintf(fl->key_state, sizeof(fl->key_state), "resil:limit:%s:gcra",
	    cfg->name);
	snprintf(fl->key_inst, sizeof(fl->key_inst),
	    "resil:limit:%s:instances", cfg->name);
	snprintf(fl->key_members, sizeof(fl->key_members),
	    "resil:limit:%s:members", cfg->name);
	snprintf(fl->name, sizeof(fl->name), "%s", cfg->name);
	snprintf(fl->settings, sizeof(fl->settings),
	    "rate=%u period_ms=%llu burst=%u", (unsigned)cfg->rate,
	    (unsigned long long)cfg->period_ms, (unsigned)cfg->burst);
	g = resil__gcd64(cfg->rate, cfg->period_ms * 1000);
	if (g == 0) /* not reached: the check refuses rate 0 */
		g = 1;
	snprintf(fl->scale_s, sizeof(fl->scale_s), "%llu",
	    (unsigned long long)(cfg->rate / g));
	snprintf(fl->ts_s, sizeof(fl->ts_s), "%llu",
	    (unsigned long long)(cfg->period_ms * 1000 / g));
	snprintf(fl->bs_s, sizeof(fl->bs_s), "%llu",
	    (unsigned long long)cfg->burst * (cfg->period_ms * 1000 / g));
	snprintf(fl->ttl_s, sizeof(fl->ttl_s), "%llu",
	    (unsigned long long)cfg->instance_ttl_ms);
	fl->command_ms = cfg->command_timeout_ms;
	fl->reconnect_ms = cfg->reconnect_ms;
	fl->rate = cfg->rate;
	fl->burst = cfg->burst;
	fl->period_ms = cfg->period_ms;
	fl->ttl_ms = cfg->instance_ttl_ms;
	fl->min_instances = cfg->min_instances;
	fl->seen = cfg->min_instances;
	fl->listener = cfg->listener;
	fl->listener_ctx = cfg->listener_ctx;
	fl->local = 1;
	err = resil__fkeyed_new(fl, cfg, diag); /* issue 41 */
	if (err != RESIL_OK) {
		pthread_mutex_destroy(&fl->mu);
		resil__free(&fl->alloc, fl, sizeof(*fl));
		return err;
	}
	if (lconnect(fl, why, sizeof(why)) != 0) {
		fl->retry_at = resil_clock_now(&fl->clock) +
		    (uint64_t)fl->reconnect_ms * RESIL_NS_PER_MS;
		resil__inc64(&fl->errors);
		lemit(fl, RESIL_FLEET_EV_LOCAL, why);
	}
	*out = fl;
	return RESIL_OK;
}

void
resil_fleet_limit_free(resil_fleet_limit *fl)
{
	resil_allocator a;

	if (fl == NULL)
		return;
	ldisconnect(fl);
	resil_ratelimit_free(fl->share);
	resil__fkeyed_free(fl);
	pthread_mutex_destroy(&fl->mu);
	a = fl->alloc;
	resil__free(&a, fl, sizeof(*fl));
}

/* The local 1/N share: rate per N periods, burst / N (at least 1). A
 * share that would not be a valid limiter halves N until it is (N = 1 is
 * validated with the config). */
static resil_ratelimit *
local_share(resil_fleet_limit *fl)
{
	uint64_t n =
	    fl->seen > fl->min_instances ? fl->seen : fl->min_instances;
	resil_ratelimit_config lc;

	if (fl->share != NULL && fl->share_n == n)
		return fl->share;
	resil_ratelimit_free(fl->share);
	fl->share = NULL;
	for (; n >= 1; n /= 2) {
		resil_ratelimit_config_init(&lc);
		lc.rate = fl->rate;
		lc.period_ns = fl->period_ms * RESIL_NS_PER_MS * n;
		lc.burst =
		    fl->burst / (uint32_t)n > 0 ? fl->burst / (uint32_t)n : 1;
		lc.clock = &fl->clock;
		lc.alloc = &fl->alloc;
		if (resil_ratelimit_new(&fl->share, &lc, NULL) == RESIL_OK) {
			resil__store64(&fl->share_n,
			    fl->seen > fl->min_instances ? fl->seen
			                                 : fl->min_instances);
			return fl->share;
		}
	}
	return NULL;
}

static resil_err
decide_local(
    resil_fleet_limit *fl, const resil__flreq *rq, uint64_t *retry_after_ns)
{
	resil_ratelimit *rl;
	uint32_t k = rq->k;
	uint64_t ticks = 0;
	resil_err e;

	if (rq->key != NULL) /* issue 41: the key's share */
		return resil__fkeyed_local(
		    fl, rq->key, rq->key_len, k, retry_after_ns);
	rl = local_share(fl);
	if (rl == NULL) {
		/* Out of memory: refuse (a limiter fails closed). */
		if (retry_after_ns != NULL)
			*retry_after_ns = fl->period_ms * RESIL_NS_PER_MS;
		resil__inc64(&fl->rejected);
		return RESIL_E_LIMITED;
	}
	e = resil_ratelimit_try_acquire(rl, k, &ticks);
	if (e == RESIL_OK) {
		resil__inc64(&fl->local_grants);
		return RESIL_OK;
	}
	if (e == RESIL_E_INVAL) /* k is more than the share's burst */
		ticks = fl->period_ms * RESIL_NS_PER_MS * fl->share_n;
	resil__inc64(&fl->rejected);
	if (retry_after_ns != NULL)
		*retry_after_ns = ticks;
	return RESIL_E_LIMITED;
}

/* Fall back: say so once, hold Redis off for reconnect_ms. */
static resil_err
limit_go_local(resil_fleet_limit *fl, uint64_t now, const char *why,
    int error_event, const resil__flreq *rq, uint64_t *retry_after_ns)
{
	resil__inc64(&fl->errors);
	fl->retry_at = now + (uint64_t)fl->reconnect_ms * RESIL_NS_PER_MS;
	if (error_event)
		lemit(fl, RESIL_FLEET_EV_ERROR, why);
	if (!fl->local) {
		resil__store64(&fl->local, 1);
		lemit(fl, RESIL_FLEET_EV_LOCAL, why);
	}
	return decide_local(fl, rq, retry_after_ns);
}

static resil_err
flimit_locked(
    resil_fleet_limit *fl, const resil__flreq *rq, uint64_t *retry_after_ns)
{
	char why[RESIL_DIAG_MAX], what[NAME_MAX_LEN + 24];
	uint64_t now = resil_clock_now(&fl->clock);
	redisReply *r;

	/* Local until retry_at after a failure; then one attempt. */
	if (fl->local && now < fl->retry_at)
		return decide_local(fl, rq, retry_after_ns);
	if (fl->cn.c == NULL && lconnect(fl, why, sizeof(why)) != 0)
		return limit_go_local(fl, now, why, 0, rq, retry_after_ns);
	/* The lone script without a reload: a lost script is sent whole
	 * until the next connection loads it. The keyed one (its sha kept
	 * apart, lib/fleet_keyed.c) is loaded again at once. */
	r = resil__fleet_eval_script(fl->cn.c,
	    resil__fleet_limit_lua(rq->keyed), rq->sha, rq->have_sha,
	    rq->keyed, rq->argc, rq->argv, rq->argl);
	if (r == NULL) {
		resil__fleet_no_answer(
		    fl->cn.c, "redis", fl->command_ms, why, sizeof(why));
		ldisconnect(fl);
		return limit_go_local(fl, now, why, 0, rq, retry_after_ns);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		int moved = resil__fleet_moved(r->str);

		snprintf(why, sizeof(why), "redis script: %.200s", r->str);
		freeReplyObject(r);
		/* Issue 44: no longer the master (a failover): find it again
		 * (Sentinel) at the next attempt. */
		if (moved)
			ldisconnect(fl);
		return limit_go_local(fl, now, why, !moved, rq, retry_after_ns);
	}
	if (resil__fleet_settings_refusal(r) != NULL) {
		snprintf(what, sizeof(what), "fleet limiter %s", fl->name);
		resil__fleet_settings_diff(what, rq->settings,
		    resil__fleet_settings_refusal(r), why, sizeof(why));
		freeReplyObject(r);
		if (!fl->refused)
			lemit(fl, RESIL_FLEET_EV_SETTINGS, why);
		fl->refused = 1;
		return limit_go_local(fl, now, why, 0, rq, retry_after_ns);
	}
	fl->refused = 0;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_INTEGER ||
	    r->element[2]->type != REDIS_REPLY_INTEGER ||
	    r->element[3]->type != REDIS_REPLY_INTEGER ||
	    r->element[3]->integer < 0 || r->element[0]->integer < 0 ||
	    r->element[0]->integer > 1 || r->element[1]->integer < 0 ||
	    r->element[1]->integer > (long long)(UINT64_MAX / 1000 / 2) ||
	    r->element[2]->integer < 1) {
		freeReplyObject(r);
		return limit_go_local(fl, now, "script: unexpected answer", 1,
		    rq, retry_after_ns);
	}
	resil__store64(&fl->seen, (uint64_t)r->element[2]->integer);
	resil__store64(&fl->redis_us, (uint64_t)r->element[3]->integer);
	if (fl->local) {
		resil__store64(&fl->local, 0);
		lemit(fl, RESIL_FLEET_EV_CONNECTED, "synced");
	}
	if (r->element[0]->integer == 1) {
		freeReplyObject(r);
		resil__inc64(&fl->redis_grants);
		return RESIL_OK;
	}
	if (retry_after_ns != NULL)
		*retry_after_ns = (uint64_t)r->element[1]->integer * 1000;
	freeReplyObject(r);
	resil__inc64(&fl->rejected);
	return RESIL_E_LIMITED;
}

resil_err
resil_fleet_limit_acquire(
    resil_fleet_limit *fl, uint32_t k, uint64_t *retry_after_ns)
{
	const char *argv[13];
	size_t argl[13], i;
	char kbuf[16];
	resil__flreq rq;
	resil_err e;

	if (fl == NULL || k == 0 || k > fl->burst)
		return RESIL_E_INVAL;
	snprintf(kbuf, sizeof(kbuf), "%u", k);
	argv[2] = "3";
	argv[3] = fl->key_state;
	argv[4] = fl->key_inst;
	argv[5] = fl->key_members;
	argv[6] = fl->instance;
	argv[7] = kbuf;
	argv[8] = fl->scale_s;
	argv[9] = fl->ts_s;
	argv[10] = fl->bs_s;
	argv[11] = fl->ttl_s;
	argv[12] = fl->settings;
	for (i = 2; i < 13; i++)
		argl[i] = strlen(argv[i]);
	rq.keyed = 0;
	rq.sha = fl->cn.sha;
	rq.have_sha = &fl->cn.have_sha;
	rq.argc = 13;
	rq.argv = argv;
	rq.argl = argl;
	rq.key = NULL;
	rq.key_len = 0;
	rq.k = k;
	rq.settings = fl->settings;
	pthread_mutex_lock(&fl->mu);
	e = flimit_locked(fl, &rq, retry_after_ns);
	pthread_mutex_unlock(&fl->mu);
	return e;
}

/* Issue 41 (h3): a key's permits (the request: lib/fleet_keyed.c). */
resil_err
resil_fleet_limit_acquire_key(resil_fleet_limit *fl, const void *key,
    size_t key_len, uint32_t k, uint64_t *retry_after_ns)
{
	const char *argv[RESIL__FKEYED_ARGC];
	size_t argl[RESIL__FKEYED_ARGC];
	char kbuf[16];
	resil__flreq rq;
	resil_err e;

	if (fl == NULL)
		return RESIL_E_INVAL;
	pthread_mutex_lock(&fl->mu);
	e = resil__fkeyed_request(fl, key, key_len, k, &rq, argv, argl, kbuf);
	if (e == RESIL_OK)
		e = flimit_locked(fl, &rq, retry_after_ns);
	pthread_mutex_unlock(&fl->mu);
	return e;
}

resil_err
resil_fleet_limit_key_metrics(resil_fleet_limit *fl, resil_keyed_metrics *out)
{
	resil_err e;

	if (fl == NULL || out == NULL)
		return RESIL_E_INVAL;
	pthread_mutex_lock(&fl->mu);
	e = resil__fkeyed_metrics(fl, out);
	pthread_mutex_unlock(&fl->mu);
	return e;
}

/* Issue 42: the server's pushback, told to the fleet (the script is
 * lib/fleet_pause.c's). Only while the fleet decides: a member deciding
 * locally has no fleet to tell. */
resil_err
resil_fleet_limit_pause(
    resil_fleet_limit *fl, uint64_t pause_ns, uint64_t *until_us)
{
	char why[RESIL_DIAG_MAX];
	uint64_t until = 0;
	int r;

	if (fl == NULL || pause_ns == 0)
		return RESIL_E_INVAL;
	pthread_mutex_lock(&fl->mu);
	if (fl->cn.c == NULL || fl->local) {
		pthread_mutex_unlock(&fl->mu);
		return RESIL_E_UNAVAILABLE;
	}
	r = resil__fleet_limit_pause_eval(fl->cn.c, fl->key_state,
	    pause_ns / 1000 + (pause_ns % 1000 != 0 ? 1u : 0u), fl->scale_s,
	    fl->ts_s, fl->bs_s, fl->settings, &until, why, sizeof(why));
	if (r < 0) {
		/* As an acquire's failure: the next acquire reconnects. */
		resil__inc64(&fl->errors);
		ldisconnect(fl);
		lemit(fl, RESIL_FLEET_EV_ERROR, why);
	}
	pthread_mutex_unlock(&fl->mu);
	if (r != 0)
		return RESIL_E_UNAVAILABLE;
	if (until_us != NULL)
		*until_us = until;
	return RESIL_OK;
}

uint64_t
resil_retry_after_seconds(uint64_t retry_after_ns)
{
	return retry_after_ns / RESIL_NS_PER_SEC +
	    (retry_after_ns % RESIL_NS_PER_SEC != 0 ? 1u : 0u);
}

resil_err
resil_fleet_limit_get_info(resil_fleet_limit *fl, resil_fleet_limit_info *out)
{
	if (fl == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	out->local_mode = resil__load64(&fl->local) != 0;
	out->instances_seen = (uint32_t)resil__load64(&fl->seen);
	out->share_n = (uint32_t)resil__load64(&fl->share_n);
	out->redis_time_us = resil__load64(&fl->redis_us);
	out->redis_grants = resil__load64(&fl->redis_grants);
	out->local_grants = resil__load64(&fl->local_grants);
	out->rejected = resil__load64(&fl->rejected);
	out->errors = resil__load64(&fl->errors);
	return RESIL_OK;
}

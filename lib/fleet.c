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

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "atomic.h"
#include "internal.h"

#define NAME_MAX_LEN 63u
#define HOST_MAX_LEN 255u
#define MAX_SLOTS 64u
#define CTL_LOCAL 0x10u
#define CTL_STATE 0x0fu

/* Lease slot states (low 3 bits of a slot word). */
enum {
	SLOT_EMPTY = 0,
	SLOT_FREE = 1,
	SLOT_INUSE = 2,
	SLOT_OK = 3,
	SLOT_FAIL = 4
};

/* KEYS: state hash, votes zset, leases hash, aggregate key prefix.
 * ARGV: instance, sick, calls, failures, quorum, K, open wait, lease,
 * vote life, bucket, bucket TTL (ms), the episode the reports are for,
 * the number of reports, reports (slot, 1 ok / 0 failed), then the slots
 * offered for leases. Returns {state, episode, votes, wait left, why,
 * granted slots...}. */
static const char fleet_lua[] =
    "local function int(v, what, lo, hi)\n"
    "  local n = tonumber(v)\n"
    "  if n == nil or n ~= math.floor(n) or n < lo or n > hi then\n"
    "    error({err = 'RESILFLEET malformed ' .. what .. ': ' ..\n"
    "      tostring(v)})\n"
    "  end\n"
    "  return n\n"
    "end\n"
    "local BIG = 9007199254740991\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / "
    "1000)\n"
    "local inst = ARGV[1]\n"
    "local sick = ARGV[2]\n"
    "local calls = tonumber(ARGV[3])\n"
    "local fails = tonumber(ARGV[4])\n"
    "local q = tonumber(ARGV[5])\n"
    "local k = tonumber(ARGV[6])\n"
    "local wait = tonumber(ARGV[7])\n"
    "local lease = tonumber(ARGV[8])\n"
    "local vote = tonumber(ARGV[9])\n"
    "local bucket = tonumber(ARGV[10])\n"
    "local keep = tonumber(ARGV[11])\n"
    "local rep_ep = tonumber(ARGV[12])\n"
    "local nrep = tonumber(ARGV[13])\n"
    "local i = 14\n"
    "local s = redis.call('HMGET', KEYS[1], 'state', 'episode', 'since',\n"
    "  'granted', 'ok')\n"
    "local state, ep, since, granted, ok = 0, 1, now, 0, 0\n"
    "if s[1] or s[2] or s[3] or s[4] or s[5] then\n"
    "  state = int(s[1], 'state', 0, 2)\n"
    "  ep = int(s[2], 'episode', 1, BIG)\n"
    "  since = int(s[3], 'since', 0, BIG)\n"
    "  granted = int(s[4], 'granted', 0, BIG)\n"
    "  ok = int(s[5], 'ok', 0, BIG)\n"
    "end\n"
    "if calls > 0 or fails > 0 then\n"
    "  local ak = KEYS[4] .. inst .. ':' .. "
    "string.format('%d', math.floor(now / bucket))\n"
    "  redis.call('HINCRBY', ak, 'calls', calls)\n"
    "  redis.call('HINCRBY', ak, 'failures', fails)\n"
    "  redis.call('PEXPIRE', ak, keep)\n"
    "end\n"
    "if sick == '1' then\n"
    "  redis.call('ZADD', KEYS[2], now + vote, inst)\n"
    "else\n"
    "  redis.call('ZREM', KEYS[2], inst)\n"
    "end\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"
    "local votes = redis.call('ZCARD', KEYS[2])\n"
    "local why = ''\n"
    "local function go(to, reason)\n"
    "  state = to\n"
    "  ep = ep + 1\n"
    "  since = now\n"
    "  granted = 0\n"
    "  ok = 0\n"
    "  why = reason\n"
    "  redis.call('DEL', KEYS[3])\n"
    "end\n"
    "if state == 0 and votes >= q then go(1, 'quorum') end\n"
    "if state == 1 and now - since >= wait then go(2, 'wait_elapsed') "
    "end\n"
    "local got = {}\n"
    "if state == 2 then\n"
    "  local failed = false\n"
    "  if rep_ep == ep then\n"
    "    for j = 1, nrep do\n"
    "      local f = inst .. ':' .. ARGV[i]\n"
    "      if redis.call('HDEL', KEYS[3], f) == 1 then\n"
    "        if ARGV[i + 1] == '1' then ok = ok + 1 else failed = true "
    "end\n"
    "      end\n"
    "      i = i + 2\n"
    "    end\n"
    "  else\n"
    "    i = i + 2 * nrep\n"
    "  end\n"
    "  if failed then\n"
    "    go(1, 'probe_failed')\n"
    "  elseif ok >= k then\n"
    "    go(0, 'probes_passed')\n"
    "    redis.call('DEL', KEYS[2])\n"
    "    votes = 0\n"
    "  else\n"
    "    local l = redis.call('HGETALL', KEYS[3])\n"
    "    local expired = false\n"
    "    for j = 2, #l, 2 do\n"
    "      if int(l[j], 'lease', 0, BIG) <= now then expired = true end\n"
    "    end\n"
    "    if expired then\n"
    "      go(1, 'lease_expired')\n"
    "    else\n"
    "      while i <= #ARGV and granted < k do\n"
    "        redis.call('HSET', KEYS[3], inst .. ':' .. ARGV[i], now + "
    "lease)\n"
    "        granted = granted + 1\n"
    "        got[#got + 1] = tonumber(ARGV[i])\n"
    "        i = i + 1\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'state', state, 'episode', ep, 'since',\n"
    "  since, 'granted', granted, 'ok', ok)\n"
    "local left = 0\n"
    "if state == 1 then\n"
    "  left = wait - (now - since)\n"
    "  if left < 0 then left = 0 end\n"
    "end\n"
    "local r = {state, ep, votes, left, why}\n"
    "for j = 1, #got do r[#r + 1] = got[j] end\n"
    "return r\n";

struct resil_fleet {
	resil_allocator alloc;
	resil_clock clock;
	resil_breaker *b;

	/* The call path's words. */
	uint64_t ctl;
	uint64_t slots[MAX_SLOTS];
	/* Local clock: each lease is unusable from then (its grant's sync
	 * began before Redis granted it, so this is never later). */
	uint64_t deadline[MAX_SLOTS];
	uint64_t sick;  /* 1: the local breaker tripped on its own */
	uint64_t trips; /* local trips so far */

	/* The sync's own (one thread at a time). */
	redisContext *c;
	char sha[41];
	int have_sha;
	int forced; /* we forced the local breaker open */
	int tried;  /* a connection has been attempted */
	uint64_t next_reconnect;
	uint64_t last_calls, last_fails, last_trips;
	/* Written by the sync, read by get_info from any thread. */
	uint64_t syncs, sync_errors, votes;

	/* Copies of the configuration. */
	char name[NAME_MAX_LEN + 1];
	char instance[NAME_MAX_LEN + 1];
	char host[HOST_MAX_LEN + 1];
	char key_state[NAME_MAX_LEN + 32];
	char key_votes[NAME_MAX_LEN + 32];
	char key_leases[NAME_MAX_LEN + 32];
	char key_agg[NAME_MAX_LEN + 32];
	uint32_t port, connect_ms, command_ms, reconnect_ms;
	uint32_t quorum, k, max_local;
	uint64_t open_wait_ms, lease_ms, vote_ms, bucket_ms;
	uint32_t buckets;
	resil_fleet_listener_fn listener;
	void *listener_ctx;
	resil_breaker_listener_fn user_listener;
	void *user_ctx;
};

static uint64_t
mkctl(uint64_t ep, unsigned state, int local)
{
	return ep << 8 | (local ? CTL_LOCAL : 0u) | state;
}

static uint64_t
mkslot(uint64_t ep, unsigned st)
{
	return ep << 3 | st;
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

static resil_err
range(
    resil_diag *diag, const char *field, uint64_t v, uint64_t lo, uint64_t hi)
{
	if (v >= lo && v <= hi)
		return RESIL_OK;
	return resil__diagf(diag, RESIL_E_INVAL,
	    "fleet.%s: %llu is out of range %llu..%llu", field,
	    (unsigned long long)v, (unsigned long long)lo,
	    (unsigned long long)hi);
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
	if (cfg->name == NULL || !name_ok(cfg->name))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet.name: must be 1..63 characters of [A-Za-z0-9._-]");
	if (cfg->instance != NULL && !name_ok(cfg->instance))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet.instance: must be NULL or 1..63 characters of "
		    "[A-Za-z0-9._-]");
	if (cfg->host != NULL &&
	    (cfg->host[0] == '\0' || strlen(cfg->host) > HOST_MAX_LEN))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet.host: must be NULL or 1..255 characters");
	if ((err = range(diag, "port", cfg->port, 1, 65535)) ||
	    (err = range(diag, "connect_timeout_ms", cfg->connect_timeout_ms,
	         1, 60000)) ||
	    (err = range(diag, "command_timeout_ms", cfg->command_timeout_ms,
	         1, 60000)) ||
	    (err = range(
	         diag, "reconnect_ms", cfg->reconnect_ms, 0, 3600000)) ||
	    (err = range(diag, "quorum", cfg->quorum, 1, 1024)) ||
	    (err = range(diag, "probe_leases", cfg->probe_leases, 1, 1024)) ||
	    (err = range(diag, "max_local_leases", cfg->max_local_leases, 0,
	         MAX_SLOTS)) ||
	    (err = range(diag, "open_wait_ms", cfg->open_wait_ms, 1, day)) ||
	    (err = range(diag, "lease_ms", cfg->lease_ms, 1, day)) ||
	    (err = range(diag, "vote_ms", cfg->vote_ms, 1, day)) ||
	    (err = range(diag, "bucket_ms", cfg->bucket_ms, 1, 3600000)) ||
	    (err = range(diag, "buckets", cfg->buckets, 1, 1000)))
		return err;
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
		resil__faa64(&f->trips, 1);
	} else if (ev->to == RESIL_BREAKER_CLOSED) {
		resil__store64(&f->sick, 0);
	}
	if (f->user_listener != NULL)
		f->user_listener(ev, f->user_ctx);
}

static void
disconnect(resil_fleet *f)
{
	if (f->c != NULL)
		redisFree(f->c);
	f->c = NULL;
	f->have_sha = 0;
}

/* Leave fleet decisions to the local breaker. */
static resil_err
go_local(resil_fleet *f, const char *why, int error_event)
{
	uint64_t ctl = resil__load64(&f->ctl);

	resil__faa64(&f->sync_errors, 1);
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
	resil__store64(&f->ctl, ctl | CTL_LOCAL);
	emit(f, RESIL_FLEET_EV_LOCAL, 0, why);
	return RESIL_E_UNAVAILABLE;
}

static struct timeval
ms_tv(uint32_t ms)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}

/* Connect and load the script. 0 on success; otherwise a reason in buf. */
static int
connect_redis(resil_fleet *f, char *buf, size_t cap)
{
	redisReply *r;

	f->c = redisConnectWithTimeout(
	    f->host, (int)f->port, ms_tv(f->connect_ms));
	if (f->c == NULL) {
		snprintf(buf, cap, "connect: out of memory");
		return -1;
	}
	if (f->c->err) {
		snprintf(buf, cap, "connect %.100s:%u: %.120s", f->host,
		    f->port, f->c->errstr);
		disconnect(f);
		return -1;
	}
	if (redisSetTimeout(f->c, ms_tv(f->command_ms)) != REDIS_OK) {
		snprintf(buf, cap, "connect: cannot set the timeout");
		disconnect(f);
		return -1;
	}
	r = redisCommand(f->c, "SCRIPT LOAD %s", fleet_lua);
	if (r == NULL) {
		snprintf(buf, cap, "SCRIPT LOAD: %s",
		    f->c->errstr[0] ? f->c->errstr : "no answer");
		disconnect(f);
		return -1;
	}
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		snprintf(buf, cap, "SCRIPT LOAD: unexpected answer (%s)",
		    r->type == REDIS_REPLY_ERROR ? r->str : "not a sha");
		freeReplyObject(r);
		disconnect(f);
		return -1;
	}
	memcpy(f->sha, r->str, 40);
	f->sha[40] = '\0';
	f->have_sha = 1;
	freeReplyObject(r);
	return 0;
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
	snprintf(f->host, sizeof(f->host), "%s",
	    cfg->host != NULL ? cfg->host : "127.0.0.1");
	snprintf(f->key_state, sizeof(f->key_state), "resil:fleet:%s:state",
	    f->name);
	snprintf(f->key_votes, sizeof(f->key_votes), "resil:fleet:%s:votes",
	    f->name);
	snprintf(f->key_leases, sizeof(f->key_leases), "resil:fleet:%s:leases",
	    f->name);
	snprintf(
	    f->key_agg, sizeof(f->key_agg), "resil:fleet:%s:agg:", f->name);
	f->port = cfg->port;
	f->connect_ms = cfg->connect_timeout_ms;
	f->command_ms = cfg->command_timeout_ms;
	f->reconnect_ms = cfg->reconnect_ms;
	f->quorum = cfg->quorum;
	f->k = cfg->probe_leases;
	f->max_local = cfg->max_local_leases != 0
	    ? cfg->max_local_leases
	    : (cfg->probe_leases < MAX_SLOTS ? cfg->probe_leases : MAX_SLOTS);
	f->open_wait_ms = cfg->open_wait_ms;
	f->lease_ms = cfg->lease_ms;
	f->vote_ms = cfg->vote_ms;
	f->bucket_ms = cfg->bucket_ms;
	f->buckets = cfg->buckets;
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
	/* Unreachable now is not an error: the handle starts local. */
	f->tried = 1;
	if (connect_redis(f, why, sizeof(why)) != 0) {
		f->next_reconnect = resil_clock_now(&f->clock) +
		    (uint64_t)f->reconnect_ms * RESIL_NS_PER_MS;
		resil__faa64(&f->sync_errors, 1);
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
	disconnect(f);
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

	if ((ctl & CTL_STATE) != RESIL_FLEET_HALF_OPEN)
		return RESIL_E_OPEN;
	ep = ctl >> 8;
	now = resil_clock_now(&f->clock);
	for (j = 0; j < f->max_local; j++) {
		uint64_t w = resil__load64(&f->slots[j]);

		/* A lease past its local deadline may have lapsed in
		 * Redis: never use it. */
		if (w == mkslot(ep, SLOT_FREE) &&
		    now < resil__load64(&f->deadline[j]) &&
		    resil__cas64(&f->slots[j], w, mkslot(ep, SLOT_INUSE))) {
			memset(&p->local, 0, sizeof(p->local));
			p->kind = 2;
			p->episode = ep;
			p->slot = j;
			return RESIL_OK;
		}
	}
	return RESIL_E_OPEN;
}

resil_err
resil_fleet_acquire(resil_fleet *f, resil_fleet_permit *p)
{
	uint64_t ctl;
	resil_err err;

	if (RESIL__UNLIKELY(f == NULL || p == NULL))
		return RESIL_E_INVAL;
	ctl = resil__load64(&f->ctl);
	/* Fleet CLOSED or local mode: the local breaker decides. */
	if (RESIL__UNLIKELY((ctl & CTL_LOCAL) == 0 && (ctl & CTL_STATE) != 0))
		return acquire_probe(f, p, ctl);
	err = resil_breaker_acquire(f->b, &p->local);
	if (RESIL__LIKELY(err == RESIL_OK))
		p->kind = 1;
	return err;
}

resil_err
resil_fleet_record(
    resil_fleet *f, resil_fleet_permit *p, resil_outcome outcome)
{
	unsigned st;

	if (f == NULL || p == NULL)
		return RESIL_E_INVAL;
	/* A local permit: the breaker tracks its spending itself. */
	if (RESIL__LIKELY(p->kind == 1))
		return resil_breaker_record(f->b, &p->local, outcome);
	if (p->kind != 2 || p->slot >= f->max_local)
		return RESIL_E_MISUSE;
	switch (outcome) {
	case RESIL_OUTCOME_SUCCESS:
		st = SLOT_OK;
		break;
	case RESIL_OUTCOME_FAILURE:
		st = SLOT_FAIL;
		break;
	case RESIL_OUTCOME_IGNORED:
	case RESIL_OUTCOME_BUSINESS:
		st = SLOT_FREE;
		break;
	default:
		return RESIL_E_INVAL;
	}
	p->kind = 0;
	/* Fails harmlessly when the episode has moved on. */
	(void)resil__cas64(&f->slots[p->slot], mkslot(p->episode, SLOT_INUSE),
	    mkslot(p->episode, st));
	return RESIL_OK;
}

resil_err
resil_fleet_release(resil_fleet *f, resil_fleet_permit *p)
{
	if (f == NULL || p == NULL)
		return RESIL_E_INVAL;
	if (p->kind == 1)
		return resil_breaker_release(f->b, &p->local);
	if (p->kind != 2 || p->slot >= f->max_local)
		return RESIL_E_MISUSE;
	p->kind = 0;
	(void)resil__cas64(&f->slots[p->slot], mkslot(p->episode, SLOT_INUSE),
	    mkslot(p->episode, SLOT_FREE));
	return RESIL_OK;
}

/* Parse the script's answer strictly: anything else is an error. */
static int
parse_reply(const redisReply *r, uint64_t *state, uint64_t *ep,
    uint64_t *votes, uint64_t granted[MAX_SLOTS], size_t *ngranted, char *buf,
    size_t cap)
{
	size_t i;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 5 ||
	    r->elements > 5 + MAX_SLOTS) {
		snprintf(buf, cap, "script: unexpected answer shape");
		return -1;
	}
	for (i = 0; i < 4; i++)
		if (r->element[i]->type != REDIS_REPLY_INTEGER ||
		    r->element[i]->integer < 0) {
			snprintf(
			    buf, cap, "script: field %zu is malformed", i);
			return -1;
		}
	if (r->element[4]->type != REDIS_REPLY_STRING &&
	    r->element[4]->type != REDIS_REPLY_NIL) {
		snprintf(buf, cap, "script: reason is malformed");
		return -1;
	}
	*state = (uint64_t)r->element[0]->integer;
	*ep = (uint64_t)r->element[1]->integer;
	*votes = (uint64_t)r->element[2]->integer;
	if (*state > RESIL_FLEET_HALF_OPEN || *ep == 0 ||
	    *ep > (UINT64_MAX >> 8)) {
		snprintf(buf, cap, "script: state %llu episode %llu malformed",
		    (unsigned long long)*state, (unsigned long long)*ep);
		return -1;
	}
	*ngranted = 0;
	for (i = 5; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_INTEGER || e->integer < 0 ||
		    e->integer >= (long long)MAX_SLOTS) {
			snprintf(buf, cap, "script: lease slot malformed");
			return -1;
		}
		granted[(*ngranted)++] = (uint64_t)e->integer;
	}
	return 0;
}

#define ARG_FIXED 13u
#define ARG_MAX (ARG_FIXED + 3u + 3u * MAX_SLOTS)
#define ARG_LEN 32u

resil_err
resil_fleet_sync(resil_fleet *f, uint64_t now)
{
	const char *argv[ARG_MAX];
	size_t argl[ARG_MAX];
	char nums[ARG_MAX][ARG_LEN];
	char why[RESIL_DIAG_MAX];
	uint64_t reported[MAX_SLOTS], rep_ok[MAX_SLOTS];
	uint64_t granted[MAX_SLOTS];
	uint64_t ctl, ep, held = 0, calls, fails, trips, sick;
	uint64_t nstate, nep, nvotes;
	size_t nrep = 0, ncand = 0, ngranted = 0, argc = 0, i;
	resil_breaker_metrics m;
	redisReply *r;
	int was_local, changed;

	if (f == NULL)
		return RESIL_E_INVAL;
	ctl = resil__load64(&f->ctl);
	was_local = (ctl & CTL_LOCAL) != 0;
	if (f->c == NULL) {
		if (f->tried && now < f->next_reconnect)
			return go_local(f, "redis unreachable", 0);
		f->tried = 1;
		if (connect_redis(f, why, sizeof(why)) != 0) {
			f->next_reconnect =
			    now + (uint64_t)f->reconnect_ms * RESIL_NS_PER_MS;
			return go_local(f, why, 0);
		}
	}

	ep = ctl >> 8;
	resil_breaker_get_metrics(f->b, &m);
	calls = m.successes + m.failures - f->last_calls;
	fails = m.failures - f->last_fails;
	trips = resil__load64(&f->trips);
	sick = resil__load64(&f->sick) != 0 || trips != f->last_trips;
	/* Votes count only while the fleet is CLOSED (the script clears them
	 * when it closes): a trip from before the fleet opened must not vote
	 * again in the sync that learns it closed. */
	if (!was_local && (ctl & CTL_STATE) != RESIL_FLEET_CLOSED)
		sick = 0;

#define PUT_STR(s)                      \
	do {                            \
		argv[argc] = (s);       \
		argl[argc] = strlen(s); \
		argc++;                 \
	} while (0)
#define PUT_NUM(v)                                                         \
	do {                                                               \
		snprintf(                                                  \
		    nums[argc], ARG_LEN, "%llu", (unsigned long long)(v)); \
		PUT_STR(nums[argc]);                                       \
	} while (0)

	PUT_STR(f->have_sha ? "EVALSHA" : "EVAL");
	PUT_STR(f->have_sha ? f->sha : fleet_lua);
	PUT_STR("4");
	PUT_STR(f->key_state);
	PUT_STR(f->key_votes);
	PUT_STR(f->key_leases);
	PUT_STR(f->key_agg);
	PUT_STR(f->instance);
	PUT_NUM(sick);
	PUT_NUM(calls);
	PUT_NUM(fails);
	PUT_NUM(f->quorum);
	PUT_NUM(f->k);
	PUT_NUM(f->open_wait_ms);
	PUT_NUM(f->lease_ms);
	PUT_NUM(f->vote_ms);
	PUT_NUM(f->bucket_ms);
	PUT_NUM(f->bucket_ms * f->buckets);
	PUT_NUM(ep);
	for (i = 0; i < f->max_local; i++) {
		uint64_t w = resil__load64(&f->slots[i]);

		if ((w >> 3) != ep || (w & 7u) == SLOT_EMPTY)
			continue;
		held++;
		if ((w & 7u) == SLOT_OK || (w & 7u) == SLOT_FAIL) {
			reported[nrep] = i;
			rep_ok[nrep++] = (w & 7u) == SLOT_OK;
		}
	}
	PUT_NUM(nrep);
	for (i = 0; i < nrep; i++) {
		PUT_NUM(reported[i]);
		PUT_NUM(rep_ok[i]);
	}
	for (i = 0; i < f->max_local && held + ncand < f->max_local; i++) {
		uint64_t w = resil__load64(&f->slots[i]);

		if ((w >> 3) != ep || (w & 7u) == SLOT_EMPTY) {
			PUT_NUM(i);
			ncand++;
		}
	}
#undef PUT_NUM
#undef PUT_STR

	r = redisCommandArgv(f->c, (int)argc, argv, argl);
	if (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    strncmp(r->str, "NOSCRIPT", 8) == 0) {
		/* The server lost its script cache (a restart, SCRIPT
		 * FLUSH): send the body, and load it again next time. */
		freeReplyObject(r);
		f->have_sha = 0;
		argv[0] = "EVAL";
		argv[1] = fleet_lua;
		argl[0] = 4;
		argl[1] = strlen(fleet_lua);
		r = redisCommandArgv(f->c, (int)argc, argv, argl);
		if (r != NULL && r->type != REDIS_REPLY_ERROR) {
			redisReply *l =
			    redisCommand(f->c, "SCRIPT LOAD %s", fleet_lua);

			if (l != NULL && l->type == REDIS_REPLY_STRING &&
			    l->len == 40) {
				memcpy(f->sha, l->str, 40);
				f->have_sha = 1;
			}
			if (l != NULL)
				freeReplyObject(l);
		}
	}
	if (r == NULL) {
		/* A timeout or a broken connection: a late answer could
		 * still arrive, so this connection is done. */
		snprintf(why, sizeof(why), "redis: %s",
		    f->c != NULL && f->c->errstr[0] ? f->c->errstr
		                                    : "no answer");
		disconnect(f);
		f->next_reconnect = now;
		return go_local(f, why, 0);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(why, sizeof(why), "redis script: %.200s", r->str);
		freeReplyObject(r);
		return go_local(f, why, 1);
	}
	if (parse_reply(r, &nstate, &nep, &nvotes, granted, &ngranted, why,
	        sizeof(why)) != 0) {
		freeReplyObject(r);
		return go_local(f, why, 1);
	}
	freeReplyObject(r);

	/* Synced: apply. Reports sent are done with. */
	for (i = 0; i < nrep; i++)
		(void)resil__cas64(&f->slots[reported[i]],
		    mkslot(ep, rep_ok[i] ? SLOT_OK : SLOT_FAIL),
		    mkslot(ep, SLOT_EMPTY));
	f->last_calls = m.successes + m.failures;
	f->last_fails = m.failures;
	f->last_trips = trips;
	resil__store64(&f->votes, nvotes);
	resil__faa64(&f->syncs, 1);

	if (nstate == RESIL_FLEET_CLOSED) {
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
	changed = nep != ep || nstate != (ctl & CTL_STATE);
	/* Leases of other episodes are void. Episode numbers can come back
	 * (a Redis restart, someone resetting the keys), so a slot must not
	 * keep an old episode's lease that could match a later one; a call
	 * holding one finds its slot changed and its outcome is stale. */
	if (nep != ep)
		for (i = 0; i < f->max_local; i++)
			if ((resil__load64(&f->slots[i]) >> 3) != nep)
				resil__store64(&f->slots[i], 0);
	resil__store64(&f->ctl, mkctl(nep, (unsigned)nstate, 0));
	for (i = 0; i < ngranted; i++) {
		resil__store64(&f->deadline[granted[i]],
		    now + f->lease_ms * RESIL_NS_PER_MS);
		resil__store64(&f->slots[granted[i]], mkslot(nep, SLOT_FREE));
	}
	if (was_local)
		emit(f, RESIL_FLEET_EV_CONNECTED, 0, "synced");
	if (changed)
		emit(f, RESIL_FLEET_EV_STATE, 0, "");
	if (ngranted > 0)
		emit(f, RESIL_FLEET_EV_LEASES, (uint32_t)ngranted, "");
	return RESIL_OK;
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
		if (resil__load64(&f->slots[j]) == mkslot(ep, SLOT_FREE))
			out->leases_held++;
	out->votes = (uint32_t)resil__load64(&f->votes);
	out->syncs = resil__load64(&f->syncs);
	out->sync_errors = resil__load64(&f->sync_errors);
	out->local_state = resil_breaker_get_state(f->b);
	return RESIL_OK;
}

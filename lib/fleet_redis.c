/*
 * resil fleet, the Redis side: the two Lua scripts (the fleet breaker's
 * and the fleet limiter's), the connection and script calls, and the
 * strict parsing of the scripts' answers. lib/fleet.c (the handles, the
 * call path, the sync) calls into this file through lib/fleet_internal.h,
 * never the other way.
 */
#define _GNU_SOURCE 1

#include <resil/fleet.h>

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "fleet_internal.h"

/* KEYS: state hash, votes zset, leases hash, aggregate key prefix,
 * instances zset, members hash, and (issue 44) the state mirror: a
 * string "STATE:EPISODE" written with the state hash, which a group's
 * sync reads with MGET for its breakers that have nothing to report. ARGV:
 * instance, sick, calls, failures, quorum, K, open wait, lease, vote life,
 * bucket, bucket TTL (ms), traffic, traffic quorum (percent, 0 off), the
 * episode the reports are for, the number of reports, this member's settings
 * text, reports (slot, 1 ok / 0 failed), then the slots offered for leases.
 * Returns {state, episode, votes, wait left, why, the sick instances' traffic
 * share in percent (-1: not computed), granted slots...}; or {"settings", the
 * fleet's settings text} when this member's differ from the fleet's and
 * a live member (in the instances set) still has the fleet's: refused
 * before anything is written. A fleet whose members with its settings
 * are all gone takes the next member's.
 *
 * The settings: every key that must agree for the fleet's bounds to
 * hold (quorum, K, the waits and windows), as "key=value ..." text; the
 * members hash keeps each member's, so that the check needs no scan
 * unless they differ.
 *
 * The traffic share: each instance pushes its traffic (every call it was
 * asked for: recorded, ignored or refused by its local breaker) into its
 * bucket hash; the share is the voters' traffic over everyone's, summed
 * over the buckets kept, for the instances in the instances set (those
 * that synced within the kept buckets). */
/* In two parts: ISO C caps a string literal at 4095 characters. */
static const char fleet_lua_1[] =
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
    "local traffic = tonumber(ARGV[12])\n"
    "local pct = tonumber(ARGV[13])\n"
    "local rep_ep = tonumber(ARGV[14])\n"
    "local nrep = tonumber(ARGV[15])\n"
    "local mine = ARGV[16]\n"
    "local i = 17\n"
    "local s = redis.call('HMGET', KEYS[1], 'state', 'episode', 'since',\n"
    "  'granted', 'ok', 'settings')\n"
    "if s[6] ~= mine then\n"
    "  if s[6] then\n"
    "    for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5],\n"
    "        '(' .. now, '+inf')) do\n"
    "      if m ~= inst and redis.call('HGET', KEYS[6], m) == s[6] then\n"
    "        return {'settings', s[6]}\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  redis.call('HSET', KEYS[1], 'settings', mine)\n"
    "end\n"
    "if redis.call('HSET', KEYS[6], inst, mine) == 1 then\n"
    "  for _, m in ipairs(redis.call('HKEYS', KEYS[6])) do\n"
    "    if m ~= inst and not redis.call('ZSCORE', KEYS[5], m) then\n"
    "      redis.call('HDEL', KEYS[6], m)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[6], keep)\n"
    "local state, ep, since, granted, ok = 0, 1, now, 0, 0\n"
    "if s[1] or s[2] or s[3] or s[4] or s[5] then\n"
    "  state = int(s[1], 'state', 0, 2)\n"
    "  ep = int(s[2], 'episode', 1, BIG)\n"
    "  since = int(s[3], 'since', 0, BIG)\n"
    "  granted = int(s[4], 'granted', 0, BIG)\n"
    "  ok = int(s[5], 'ok', 0, BIG)\n"
    "end\n"
    "if calls > 0 or fails > 0 or traffic > 0 then\n"
    "  local ak = KEYS[4] .. inst .. ':' .. "
    "string.format('%d', math.floor(now / bucket))\n"
    "  redis.call('HINCRBY', ak, 'calls', calls)\n"
    "  redis.call('HINCRBY', ak, 'failures', fails)\n"
    "  redis.call('HINCRBY', ak, 'traffic', traffic)\n"
    "  redis.call('PEXPIRE', ak, keep)\n"
    "end\n"
    "redis.call('ZADD', KEYS[5], now + keep, inst)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)\n"
    "redis.call('PEXPIRE', KEYS[5], keep)\n"
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
    "local share, share_ok = -1, true\n"
    "if pct > 0 and state == 0 and votes >= q then\n"
    " local cur, nb, sk, tot, st = math.floor(now / bucket),\n"
    "  math.floor(keep / bucket), {}, 0, 0\n"
    " for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do\n"
    "  sk[m] = true end\n"
    " for _, m in ipairs(redis.call('ZRANGE', KEYS[5], 0, -1)) do\n"
    "  for b = cur - nb + 1, cur do\n"
    "   local v = redis.call('HGET', KEYS[4] .. m .. ':' ..\n"
    "    string.format('%d', b), 'traffic')\n"
    "   if v then\n"
    "    v = int(v, 'traffic', 0, BIG)\n"
    "    tot = tot + v\n"
    "    if sk[m] then st = st + v end\n"
    "   end\n"
    "  end\n"
    " end\n"
    " share = 0\n"
    " if tot > 0 then share = math.floor(st * 100 / tot) end\n"
    " share_ok = tot > 0 and st * 100 >= pct * tot\n"
    "end\n"
    "if state == 0 and votes >= q and share_ok then go(1, 'quorum') end\n"
    "if state == 1 and now - since >= wait then go(2, 'wait_elapsed') "
    "end\n";
static const char fleet_lua_2[] =
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
    "redis.call('SET', KEYS[7], state .. ':' .. ep)\n"
    "local left = 0\n"
    "if state == 1 then\n"
    "  left = wait - (now - since)\n"
    "  if left < 0 then left = 0 end\n"
    "end\n"
    "local r = {state, ep, votes, left, why, share}\n"
    "for j = 1, #got do r[#r + 1] = got[j] end\n"
    "return r\n";

static char fleet_lua[sizeof(fleet_lua_1) + sizeof(fleet_lua_2)];
static pthread_once_t fleet_lua_once = PTHREAD_ONCE_INIT;

static void
fleet_lua_join(void)
{
	memcpy(fleet_lua, fleet_lua_1, sizeof(fleet_lua_1) - 1);
	memcpy(fleet_lua + sizeof(fleet_lua_1) - 1, fleet_lua_2,
	    sizeof(fleet_lua_2));
}

const char *
resil__fleet_lua(void)
{
	(void)pthread_once(&fleet_lua_once, fleet_lua_join);
	return fleet_lua;
}

static struct timeval
ms_tv(uint32_t ms)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}

/* Why a command on c got no answer, in buf: a timeout (hiredis reports
 * the socket's EAGAIN as "Resource temporarily unavailable") names the
 * bound that ran out; a broken connection its reason. */
void
resil__fleet_no_answer(const redisContext *c, const char *what,
    uint32_t timeout_ms, char *buf, size_t cap)
{
	if (c == NULL || c->errstr[0] == '\0')
		snprintf(buf, cap, "%s: no answer", what);
	else if (c->err == REDIS_ERR_IO &&
	    (strcmp(c->errstr, strerror(EAGAIN)) == 0 ||
	        strcmp(c->errstr, strerror(EWOULDBLOCK)) == 0 ||
	        strcmp(c->errstr, strerror(ETIMEDOUT)) == 0))
		snprintf(buf, cap, "%s: no answer within %u ms", what,
		    (unsigned)timeout_ms);
	else
		snprintf(buf, cap, "%s: %.150s", what, c->errstr);
}

/* Connect to host:port with the two timeouts and load script, its sha
 * into sha[41]. 0 on success; otherwise -1, *cp NULL and a reason in
 * buf. Shared by the fleet breaker and the fleet limiter. */
int
resil__fleet_redis_open(redisContext **cp, const char *host, uint32_t port,
    uint32_t connect_ms, uint32_t command_ms, const char *script, char *sha,
    char *buf, size_t cap)
{
	redisContext *c;
	redisReply *r;

	*cp = NULL;
	c = redisConnectWithTimeout(host, (int)port, ms_tv(connect_ms));
	if (c == NULL) {
		snprintf(buf, cap, "connect: out of memory");
		return -1;
	}
	if (c->err) {
		char what[128];

		snprintf(what, sizeof(what), "connect %.100s:%u", host, port);
		resil__fleet_no_answer(c, what, connect_ms, buf, cap);
		redisFree(c);
		return -1;
	}
	if (redisSetTimeout(c, ms_tv(command_ms)) != REDIS_OK) {
		snprintf(buf, cap, "connect: cannot set the timeout");
		redisFree(c);
		return -1;
	}
	r = redisCommand(c, "SCRIPT LOAD %s", script);
	if (r == NULL) {
		resil__fleet_no_answer(c, "SCRIPT LOAD", command_ms, buf, cap);
		redisFree(c);
		return -1;
	}
	if (r->type != REDIS_REPLY_STRING || r->len != 40) {
		snprintf(buf, cap, "SCRIPT LOAD: unexpected answer (%s)",
		    r->type == REDIS_REPLY_ERROR ? r->str : "not a sha");
		freeReplyObject(r);
		redisFree(c);
		return -1;
	}
	memcpy(sha, r->str, 40);
	sha[40] = '\0';
	freeReplyObject(r);
	*cp = c;
	return 0;
}

/* Run script with argv[2..argc) (argv[0] and [1] are set here: EVALSHA
 * and sha once loaded, else EVAL and the body). When the server has lost
 * its script cache (NOSCRIPT: a restart, SCRIPT FLUSH), send the body
 * instead; reload: and load it again for next time. NULL: no answer.
 * Shared by the fleet breaker and the fleet limiter. */
redisReply *
resil__fleet_eval_script(redisContext *c, const char *script, char *sha,
    int *have_sha, int reload, int argc, const char **argv, size_t *argl)
{
	redisReply *r, *l;

	argv[0] = *have_sha ? "EVALSHA" : "EVAL";
	argv[1] = *have_sha ? sha : script;
	argl[0] = strlen(argv[0]);
	argl[1] = strlen(argv[1]);
	r = redisCommandArgv(c, argc, argv, argl);
	if (r == NULL || r->type != REDIS_REPLY_ERROR ||
	    strncmp(r->str, "NOSCRIPT", 8) != 0)
		return r;
	freeReplyObject(r);
	*have_sha = 0;
	argv[0] = "EVAL";
	argv[1] = script;
	argl[0] = 4;
	argl[1] = strlen(script);
	r = redisCommandArgv(c, argc, argv, argl);
	if (!reload || r == NULL || r->type == REDIS_REPLY_ERROR)
		return r;
	l = redisCommand(c, "SCRIPT LOAD %s", script);
	if (l != NULL && l->type == REDIS_REPLY_STRING && l->len == 40) {
		memcpy(sha, l->str, 40);
		*have_sha = 1;
	}
	if (l != NULL)
		freeReplyObject(l);
	return r;
}

/* Parse the script's answer strictly: anything else is an error. */
int
resil__fleet_parse_reply(const redisReply *r, uint64_t *state, uint64_t *ep,
    uint64_t *votes, uint64_t *share, uint64_t granted[RESIL__FLEET_MAX_SLOTS],
    size_t *ngranted, char *buf, size_t cap)
{
	size_t i;

	if (r->type != REDIS_REPLY_ARRAY || r->elements < 6 ||
	    r->elements > 6 + RESIL__FLEET_MAX_SLOTS) {
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
	if (r->element[5]->type != REDIS_REPLY_INTEGER ||
	    r->element[5]->integer < -1 || r->element[5]->integer > 100) {
		snprintf(buf, cap, "script: traffic share is malformed");
		return -1;
	}
	*share = (uint64_t)(r->element[5]->integer + 1);
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
	for (i = 6; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_INTEGER || e->integer < 0 ||
		    e->integer >= (long long)RESIL__FLEET_MAX_SLOTS) {
			snprintf(buf, cap, "script: lease slot malformed");
			return -1;
		}
		granted[(*ngranted)++] = (uint64_t)e->integer;
	}
	return 0;
}

/* The value of key in settings text s ("key=value ..."), copied into
 * buf; false when s has no such key. */
static bool
settings_value(const char *s, const char *key, char *buf, size_t cap)
{
	size_t kl = strlen(key), n;
	const char *p = s;

	while (*p != '\0') {
		const char *end = strchr(p, ' ');

		n = end != NULL ? (size_t)(end - p) : strlen(p);
		if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			snprintf(
			    buf, cap, "%.*s", (int)(n - kl - 1), p + kl + 1);
			return true;
		}
		p += n;
		while (*p == ' ')
			p++;
	}
	return false;
}

/* Why a member with settings mine was refused by a fleet whose settings
 * are theirs, in why: what (the fleet breaker or limiter and its name),
 * then each differing key with both values. */
void
resil__fleet_settings_diff(const char *what, const char *mine,
    const char *theirs, char *why, size_t cap)
{
	char key[32], val[32], other[32];
	const char *p = mine;
	size_t len;
	int n = 0;

	len = (size_t)snprintf(
	    why, cap, "%s: settings differ from the fleet's:", what);
	while (*p != '\0' && len < cap) {
		const char *eq = strchr(p, '='), *end;

		if (eq == NULL)
			break;
		snprintf(key, sizeof(key), "%.*s", (int)(eq - p), p);
		end = strchr(eq, ' ');
		snprintf(val, sizeof(val), "%.*s",
		    (int)(end != NULL ? (size_t)(end - eq - 1)
		                      : strlen(eq + 1)),
		    eq + 1);
		if (!settings_value(theirs, key, other, sizeof(other)))
			snprintf(other, sizeof(other), "(none)");
		if (strcmp(val, other) != 0)
			len += (size_t)snprintf(why + len, cap - len,
			    "%s %s=%s (the fleet's %s)", n++ > 0 ? "," : "",
			    key, val, other);
		if (end == NULL)
			break;
		p = end + 1;
	}
	if (n == 0 && len < cap)
		snprintf(why + len, cap - len, " the fleet's are \"%.100s\"",
		    theirs);
}

/* Whether r is the scripts' refusal of this member's settings:
 * {"settings", the fleet's}. */
const char *
resil__fleet_settings_refusal(const redisReply *r)
{
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "settings") == 0 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		return r->element[1]->str;
	return NULL;
}

/*
 * KEYS: the limiter's hash {base, tat, settings}, the instances sorted
 * set, the members hash (instance -> its settings). ARGV: instance, k,
 * scale, ts, bs (see below), instance TTL (ms), this member's settings
 * ("rate=R period_ms=P burst=B"). A member whose settings differ from the
 * limiter's while a live member (in the instances set) has the
 * limiter's is refused before anything is written: {"settings", the
 * limiter's}. When none has them any more, the next member's become the
 * limiter's and the state starts full (tat in the old scale means
 * nothing in the new one).
 * Time is Redis's TIME in microseconds, scaled by scale = rate / gcd(rate,
 * period_us) so that the emission interval ts = period_us / gcd is an
 * integer and nothing is rounded; tat is relative to base, which moves to
 * now when (now - base) * scale would pass 2^52 (every number stays below
 * 2^53, exact in Lua's doubles). Returns {granted 0/1, retry_us (the
 * smallest whole number of microseconds after which the k permits would
 * be due, rounded up), instances seen, TIME in microseconds}.
 */
/* The two scripts' common start: the arguments (above), and whether a
 * live member other than this one has the settings agreed. */
static const char limit_lua_args[] =
    "local function int(v, what, lo, hi)\n"
    "  local n = tonumber(v)\n"
    "  if n == nil or n ~= math.floor(n) or n < lo or n > hi then\n"
    "    error({err = 'RESILFLEET malformed ' .. what .. ': ' ..\n"
    "      tostring(v)})\n"
    "  end\n"
    "  return n\n"
    "end\n"
    "local BIG = 9007199254740991\n"
    "local REBASE = 4503599627370496\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local inst = ARGV[1]\n"
    "local k = tonumber(ARGV[2])\n"
    "local scale = tonumber(ARGV[3])\n"
    "local ts = tonumber(ARGV[4])\n"
    "local bs = tonumber(ARGV[5])\n"
    "local ttl = tonumber(ARGV[6])\n"
    "local mine = ARGV[7]\n"
    "local function live_has(agreed)\n"
    "  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2],\n"
    "      '(' .. now, '+inf')) do\n"
    "    if m ~= inst and redis.call('HGET', KEYS[3], m) == agreed then\n"
    "      return true\n"
    "    end\n"
    "  end\n"
    "  return false\n"
    "end\n";

/* The lone limiter's agreement on the settings (above); the key's
 * settings are the limiter's. */
static const char limit_lua_agree[] =
    "local agreed = redis.call('HGET', KEYS[1], 'settings')\n"
    "if agreed and agreed ~= mine then\n"
    "  if live_has(agreed) then return {'settings', agreed} end\n"
    "  redis.call('DEL', KEYS[1])\n"
    "end\n"
    "local kset = mine\n";

/* Issue 41 (h3), the keyed limiter's agreement: KEYS[1] is one key's
 * state hash (resil:limit:NAME:k:HEX:gcra), KEYS[4] a string holding the
 * settings the limiter's members agree on (the whole handle's: rates and
 * the overrides' digest), kept apart from any key's state; ARGV[8] the
 * key's own settings (its override's, else the limiter's), written with
 * its state: a key whose settings changed starts again full. */
static const char limit_lua_agree_keyed[] =
    "local kset = ARGV[8]\n"
    "local agreed = redis.call('GET', KEYS[4])\n"
    "if agreed ~= mine then\n"
    "  if agreed and live_has(agreed) then\n"
    "    return {'settings', agreed}\n"
    "  end\n"
    "  redis.call('SET', KEYS[4], mine)\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[4], ttl)\n"
    "if redis.call('HGET', KEYS[1], 'settings') ~= kset then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "end\n";

/* The members, the instances seen and the GCRA decision (both). */
static const char limit_lua_gcra[] =
    "if redis.call('HSET', KEYS[3], inst, mine) == 1 then\n"
    "  for _, m in ipairs(redis.call('HKEYS', KEYS[3])) do\n"
    "    if m ~= inst and not redis.call('ZSCORE', KEYS[2], m) then\n"
    "      redis.call('HDEL', KEYS[3], m)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[3], ttl)\n"
    "redis.call('ZADD', KEYS[2], now + ttl * 1000, inst)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)\n"
    "redis.call('PEXPIRE', KEYS[2], ttl)\n"
    "local seen = redis.call('ZCARD', KEYS[2])\n"
    "local h = redis.call('HMGET', KEYS[1], 'base', 'tat')\n"
    "local base, tat = now, 0\n"
    "if h[1] or h[2] then\n"
    "  base = int(h[1], 'base', 0, BIG)\n"
    "  tat = int(h[2], 'tat', 0, BIG)\n"
    "end\n"
    RESIL__FLEET_LUA_REBASE
    "local n = 0\n"
    "if now > base then n = (now - base) * scale end\n"
    "local tt = tat\n"
    "if n > tt then tt = n end\n"
    "local nt = tt + k * ts\n"
    "local lim = n + bs\n"
    "local keep = math.floor((bs + ts) / scale / 1000) + 1000\n"
    "if nt <= lim then\n"
    "  redis.call('HSET', KEYS[1], 'base', string.format('%d', base),\n"
    "    'tat', string.format('%d', nt), 'settings', kset)\n"
    "  redis.call('PEXPIRE', KEYS[1], keep)\n"
    "  return {1, 0, seen, now}\n"
    "end\n"
    "local excess = nt - lim\n"
    "if now < base then excess = excess + (base - now) * scale end\n"
    "local q = math.floor(excess / scale)\n"
    "while q * scale < excess do q = q + 1 end\n"
    "while q > 1 and (q - 1) * scale >= excess do q = q - 1 end\n"
    "return {0, q, seen, now}\n";

static char limit_lua[2][sizeof(limit_lua_args) +
    sizeof(limit_lua_agree_keyed) + sizeof(limit_lua_agree) +
    sizeof(limit_lua_gcra)];
static pthread_once_t limit_lua_once = PTHREAD_ONCE_INIT;

static void
limit_lua_join(void)
{
	int i;

	for (i = 0; i < 2; i++)
		snprintf(limit_lua[i], sizeof(limit_lua[i]), "%s%s%s",
		    limit_lua_args,
		    i == 0 ? limit_lua_agree : limit_lua_agree_keyed,
		    limit_lua_gcra);
}

const char *
resil__fleet_limit_lua(int keyed)
{
	(void)pthread_once(&limit_lua_once, limit_lua_join);
	return limit_lua[keyed != 0];
}

/*
 * The fleet rate limiter told of the server's pushback (issue 42): one
 * script moves the fleet's GCRA state (resil:limit:NAME:gcra, written by
 * lib/fleet_redis.c's limiter script) so that no member is granted a
 * permit before Redis's now + the pause, and the bucket refills from
 * empty after it. The members' own script honours it unchanged: it is
 * only a TAT further ahead. Kept apart from lib/fleet.c (the handles)
 * and lib/fleet_redis.c (the call path's scripts).
 */
#include "fleet_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/*
 * KEYS[1] the state hash; ARGV: pause (us), scale, ts, bs (as the
 * limiter script's), the member's settings text. The pause is capped at
 * 2^50 / scale us so that every TAT stays below 2^53 (exact in Lua's
 * doubles, and what the limiter script accepts). Answers {1, until}
 * (moved), {0, until} (a pause at least as long was there already), or
 * {"settings", the fleet's} (not ours: settings differ). until is
 * Redis's TIME (us) when the pause ends.
 */
static const char pause_lua[] =
    "local BIG = 9007199254740991\n"
    "local REBASE = 4503599627370496\n"
    "local SPAN = 1125899906842624\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local p = tonumber(ARGV[1])\n"
    "local scale = tonumber(ARGV[2])\n"
    "local ts = tonumber(ARGV[3])\n"
    "local bs = tonumber(ARGV[4])\n"
    "local mine = ARGV[5]\n"
    "local agreed = redis.call('HGET', KEYS[1], 'settings')\n"
    "if agreed and agreed ~= mine then return {'settings', agreed} end\n"
    "if p * scale > SPAN then p = math.floor(SPAN / scale) end\n"
    "local h = redis.call('HMGET', KEYS[1], 'base', 'tat')\n"
    "local base, tat = now, 0\n"
    "if h[1] and h[2] then\n"
    "  base = tonumber(h[1])\n"
    "  tat = tonumber(h[2])\n"
    "  if base == nil or tat == nil or base < 0 or tat < 0 or\n"
    "      base > BIG or tat > BIG then base, tat = now, 0 end\n"
    "end\n"
    RESIL__FLEET_LUA_REBASE
    "local n = 0\n"
    "if now > base then n = (now - base) * scale end\n"
    "local want = n + p * scale + bs - ts\n"
    "if want <= tat then return {0, now + p} end\n"
    "redis.call('HSET', KEYS[1], 'base', string.format('%d', base),\n"
    "  'tat', string.format('%d', want), 'settings', mine)\n"
    "redis.call('PEXPIRE', KEYS[1],\n"
    "  math.floor((bs + ts) / scale / 1000) + 1000 + math.floor(p / 1000))\n"
    "return {1, now + p}\n";

int
resil__fleet_limit_pause_eval(redisContext *c, const char *key,
    uint64_t pause_us, const char *scale_s, const char *ts_s, const char *bs_s,
    const char *settings, uint64_t *until_us, char *why, size_t cap)
{
	const char *argv[9];
	size_t argl[9], i;
	char p[24];
	redisReply *r;
	int ret = -1;

	snprintf(p, sizeof(p), "%" PRIu64, pause_us);
	argv[0] = "EVAL";
	argv[1] = pause_lua;
	argv[2] = "1";
	argv[3] = key;
	argv[4] = p;
	argv[5] = scale_s;
	argv[6] = ts_s;
	argv[7] = bs_s;
	argv[8] = settings;
	for (i = 0; i < 9; i++)
		argl[i] = strlen(argv[i]);
	r = redisCommandArgv(c, 9, argv, argl);
	if (r == NULL) {
		snprintf(why, cap, "redis: no answer to the pause");
		return -1;
	}
	if (resil__fleet_settings_refusal(r) != NULL) {
		snprintf(why, cap, "settings differ from the fleet's");
		ret = 1;
	} else if (r->type == REDIS_REPLY_ERROR) {
		snprintf(why, cap, "redis pause script: %.200s", r->str);
	} else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->integer < 0) {
		snprintf(why, cap, "pause script: unexpected answer");
	} else {
		*until_us = (uint64_t)r->element[1]->integer;
		ret = 0;
	}
	freeReplyObject(r);
	return ret;
}

/*
 * Private: what lib/fleet.c (the handles, the call path, the sync) uses
 * of lib/fleet_redis.c (the scripts, the connection, the answers'
 * parsing). fleet_redis.c never calls into fleet.c. Never installed.
 */
#ifndef RESIL_FLEET_INTERNAL_H
#define RESIL_FLEET_INTERNAL_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

/* Lease slots per instance. */
#define RESIL__FLEET_MAX_SLOTS 64u

/* The fleet breaker's script (joined once from its two parts). */
const char *resil__fleet_lua(void);
/* The fleet limiter's script. */
extern const char resil__fleet_limit_lua[];

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

#endif

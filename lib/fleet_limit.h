/*
 * Private: the fleet rate limiter's handle, shared by lib/fleet.c (the
 * lone limiter: connection, round trip, local share) and lib/fleet_keyed.c
 * (issue 41: a limit per key on the same handle). Never installed.
 */
#ifndef RESIL_FLEET_LIMIT_H
#define RESIL_FLEET_LIMIT_H

#include <pthread.h>
#include <resil/fleet.h>
#include <resil/keyed.h>
#include <stdint.h>

#include "fleet_internal.h"

#define RESIL__FLIMIT_NAME_MAX 63u

struct resil__fkeyed; /* lib/fleet_keyed.c */

struct resil_fleet_limit {
	resil_allocator alloc;
	resil_clock clock;
	pthread_mutex_t mu; /* the connection and the fallback */
	/* The connection: host:port, or the master the sentinels name
	 * (lib/fleet_conn.c; issue 44). */
	resil__fconn cn;
	/* Written under mu with atomic stores, so that get_info reads them
	 * without waiting for an acquire's round trip. */
	uint64_t local;    /* deciding locally */
	uint64_t retry_at; /* local clock: no Redis before this */
	uint64_t seen;     /* instances seen at the last answer */
	uint64_t redis_us; /* Redis's TIME then */
	resil_ratelimit *share;
	uint64_t share_n; /* the N the share was made for */

	uint64_t redis_grants, local_grants, rejected, errors;

	char instance[RESIL__FLIMIT_NAME_MAX + 1];
	char key_state[RESIL__FLIMIT_NAME_MAX + 32];
	char key_inst[RESIL__FLIMIT_NAME_MAX + 32];
	char key_members[RESIL__FLIMIT_NAME_MAX + 32];
	char name[RESIL__FLIMIT_NAME_MAX + 1];
	char settings[96]; /* "rate=R period_ms=P burst=B" */
	int refused;       /* the fleet refused our settings */
	char scale_s[24], ts_s[24], bs_s[24], ttl_s[24];
	uint32_t command_ms, reconnect_ms;
	uint32_t rate, burst, min_instances;
	uint64_t period_ms, ttl_ms;
	resil_fleet_listener_fn listener;
	void *listener_ctx;
	/* Issue 41 (h3): the keyed limits (lib/fleet_keyed.c); NULL when
	 * the handle was made with max_keys 0. */
	struct resil__fkeyed *kx;
};

/* One acquire's round trip: the script (keyed or the lone one's), its
 * sha, argv[2..argc) filled (numkeys, keys, arguments), and what a local
 * decision needs (key NULL: the lone limiter's share). */
typedef struct resil__flreq {
	int keyed;
	char *sha;
	int *have_sha;
	int argc;
	const char **argv;
	size_t *argl;
	const void *key;
	size_t key_len;
	uint32_t k;
	const char *settings; /* this member's, as sent (for a refusal) */
} resil__flreq;

/* The keyed request's argv entries. */
#define RESIL__FKEYED_ARGC 15

/* lib/fleet_keyed.c: the keyed settings of cfg checked (RESIL_OK when
 * max_keys is 0 and nothing keyed is set); made into fl->kx (max_keys 0:
 * none); freed; a key's local decision on its 1/N share; under fl->mu,
 * a key's request built into *rq (argv, argl: RESIL__FKEYED_ARGC
 * entries; kbuf 16 bytes; the keyed script loaded when the connection
 * is open): RESIL_OK or RESIL_E_INVAL (the checks of
 * resil_fleet_limit_acquire_key); the local family's metrics. */
resil_err resil__fkeyed_validate(
    const resil_fleet_limit_config *cfg, resil_diag *diag);
resil_err resil__fkeyed_new(resil_fleet_limit *fl,
    const resil_fleet_limit_config *cfg, resil_diag *diag);
void resil__fkeyed_free(resil_fleet_limit *fl);
resil_err resil__fkeyed_local(resil_fleet_limit *fl, const void *key,
    size_t key_len, uint32_t k, uint64_t *retry_after_ns);
resil_err resil__fkeyed_request(resil_fleet_limit *fl, const void *key,
    size_t key_len, uint32_t k, resil__flreq *rq, const char **argv,
    size_t *argl, char *kbuf);
resil_err resil__fkeyed_metrics(
    resil_fleet_limit *fl, resil_keyed_metrics *out);

#endif

/*
 * resil fleet groups (issue 44, <resil/fleet.h>): one connection shared
 * by many fleet breakers, and a sync of them all in one round trip. Each
 * handle's command (its script, or a read of the fleet's state when
 * nothing changed: lib/fleet.c decides and writes it) is appended to
 * hiredis's output buffer; the first read flushes the buffer and the
 * answers are read in order. Redis runs each command on its own, so other
 * clients are served between them. A second round trip goes only for the
 * handles whose read showed the fleet moved on, or whose script Redis had
 * lost (NOSCRIPT: the script is loaded again first).
 */
#define _GNU_SOURCE 1

#include <resil/fleet.h>

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "clock_internal.h"
#include "fleet_internal.h"
#include "internal.h"


static resil_err
grange(
    resil_diag *diag, const char *field, uint64_t v, uint64_t lo, uint64_t hi)
{
	if (v >= lo && v <= hi)
		return RESIL_OK;
	return resil__diagf(diag, RESIL_E_INVAL,
	    "fleet_group.%s: %llu is out of range %llu..%llu", field,
	    (unsigned long long)v, (unsigned long long)lo,
	    (unsigned long long)hi);
}

resil_err
resil_fleet_group_config_validate(
    const resil_fleet_group_config *cfg, resil_diag *diag)
{
	resil_err err;

	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fleet_group: config is NULL");
	err =
	    resil__check_size(diag, "fleet_group", "resil_fleet_group_config",
	        cfg->size, sizeof(resil_fleet_group_config));
	if (err != RESIL_OK)
		return err;
	if (cfg->host != NULL &&
	    (cfg->host[0] == '\0' ||
	        strlen(cfg->host) > RESIL__FLEET_HOST_MAX))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_group.host: must be NULL or 1..255 characters");
	if ((err = grange(diag, "port", cfg->port, 1, 65535)) ||
	    (err = grange(diag, "connect_timeout_ms", cfg->connect_timeout_ms,
	         1, 60000)) ||
	    (err = grange(diag, "command_timeout_ms", cfg->command_timeout_ms,
	         1, 60000)) ||
	    (err = grange(
	         diag, "reconnect_ms", cfg->reconnect_ms, 0, 3600000)))
		return err;
	if ((cfg->sentinels != NULL || cfg->master != NULL) &&
	    resil__fleet_sentinels_check(cfg->sentinels, cfg->master) != NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "fleet_group.%s: %s",
		    cfg->sentinels == NULL ? "sentinels" : "master",
		    resil__fleet_sentinels_check(cfg->sentinels, cfg->master));
	return RESIL_OK;
}

resil_err
resil_fleet_group_new(resil_fleet_group **out,
    const resil_fleet_group_config *cfg, resil_diag *diag)
{
	resil_fleet_group *g;
	resil_err err;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fleet_group: out is NULL");
	err = resil_fleet_group_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	g = resil__calloc(cfg->alloc, sizeof(*g));
	if (g == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_group: out of memory");
	g->alloc = *resil__allocator(cfg->alloc);
	g->clock = cfg->clock != NULL && cfg->clock->now != NULL
	    ? *cfg->clock
	    : *resil_clock_system();
	if (pthread_mutex_init(&g->mu, NULL) != 0) {
		resil__free(&g->alloc, g, sizeof(*g));
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_group: no mutex");
	}
	resil__fconn_init(&g->cn, cfg->host, cfg->port, cfg->sentinels,
	    cfg->master, cfg->connect_timeout_ms, cfg->command_timeout_ms,
	    cfg->reconnect_ms);
	*out = g;
	return RESIL_OK;
}

resil_err
resil_fleet_group_free(resil_fleet_group *g)
{
	resil_allocator a;

	if (g == NULL)
		return RESIL_OK;
	if (g->n != 0)
		return RESIL_E_MISUSE;
	(void)resil_fleet_group_stop(g);
	if (g->hinit) {
		pthread_cond_destroy(&g->hcv);
		pthread_mutex_destroy(&g->hmu);
	}
	resil__fconn_close(&g->cn);
	pthread_mutex_destroy(&g->mu);
	a = g->alloc;
	if (g->m != NULL)
		resil__free(&a, g->m, g->cap * sizeof(resil_fleet *));
	if (g->again != NULL)
		resil__free(&a, g->again, g->cap);
	resil__free(&a, g, sizeof(*g));
	return RESIL_OK;
}

/* Every handle from i on (again set when only) is in local mode: why. */
static void
lose_from(resil_fleet_group *g, size_t i, int only, const char *why)
{
	for (; i < g->n; i++)
		if (!only || g->again[i] != 0)
			resil__fleet_lost(g->m[i], why);
}

#define LIGHT 4u

/* The connection failed: close it; every handle whose answer was not
 * taken (from i on, again set when only; and every read) is local. */
static resil_err
broken(resil_fleet_group *g, size_t i, int only, uint64_t now)
{
	char why[RESIL_DIAG_MAX];
	size_t j;

	resil__fleet_no_answer(
	    g->cn.c, "redis", g->cn.command_ms, why, sizeof(why));
	resil__fconn_close(&g->cn);
	g->cn.next_reconnect = now;
	for (j = 0; j < g->n; j++)
		if ((j >= i && (!only || g->again[j] != 0)) ||
		    g->again[j] == LIGHT)
			resil__fleet_lost(g->m[j], why);
	return RESIL_E_UNAVAILABLE;
}

/* Keys per MGET of the mirrors: Redis serves other clients between
 * two of them. */
#define AT_CHUNK 256u

/* Append one MGET per AT_CHUNK handles marked LIGHT, in order. 0, or -1
 * when hiredis is out of memory. */
static int
append_reads(resil_fleet_group *g)
{
	const char *argv[AT_CHUNK + 1];
	size_t argl[AT_CHUNK + 1], i, n = 0;

	argv[0] = "MGET";
	argl[0] = 4;
	for (i = 0; i <= g->n; i++) {
		if (n > 0 && (i == g->n || n == AT_CHUNK)) {
			if (redisAppendCommandArgv(
			        g->cn.c, (int)n + 1, argv, argl) != REDIS_OK)
				return -1;
			n = 0;
		}
		if (i < g->n && g->again[i] == LIGHT) {
			argv[n + 1] = resil__fleet_at_key(g->m[i]);
			argl[n + 1] = strlen(argv[n + 1]);
			n++;
		}
	}
	return 0;
}

/* The MGET answers, in the order append_reads() sent them. */
static resil_err
take_reads(resil_fleet_group *g, uint64_t now)
{
	size_t i = 0, j;

	while (i < g->n) {
		redisReply *r;
		void *rv = NULL;
		size_t n = 0;

		for (j = i; j < g->n && n < AT_CHUNK; j++)
			n += g->again[j] == LIGHT;
		if (n == 0)
			break;
		if (redisGetReply(g->cn.c, &rv) != REDIS_OK || rv == NULL)
			return broken(g, i, 1, now);
		r = rv;
		for (n = 0; i < j; i++) {
			if (g->again[i] != LIGHT)
				continue;
			/* A malformed answer: send the script. */
			g->again[i] =
			    (unsigned char)(r->type != REDIS_REPLY_ARRAY ||
			        n >= r->elements ||
			        resil__fleet_take_at(g->m[i], r->element[n]));
			n++;
		}
		freeReplyObject(r);
	}
	return RESIL_OK;
}

/* One round trip: every handle's command (only: those with again set,
 * their scripts) then every answer. The scripts go first, in order, then
 * the reads of the unchanged handles' mirrors (the first round only). */
static resil_err
round_trip(resil_fleet_group *g, uint64_t now, int only)
{
	redisReply *r;
	size_t i, sent = 0, reads = 0;
	int t;

	for (i = 0; i < g->n; i++) {
		if (only && g->again[i] == 0)
			continue;
		t = resil__fleet_prep(g->m[i], now, !only);
		if (t < 0) {
			lose_from(g, 0, only, "redis: out of memory");
			resil__fconn_close(&g->cn);
			return RESIL_E_NOMEM;
		}
		if (t == 1) {
			g->again[i] = LIGHT;
			reads++;
		} else {
			g->scripts++;
		}
		sent++;
	}
	if (reads > 0 && append_reads(g) != 0) {
		lose_from(g, 0, only, "redis: out of memory");
		resil__fconn_close(&g->cn);
		return RESIL_E_NOMEM;
	}
	g->reads += reads;
	if (sent == 0)
		return RESIL_OK;
	g->round_trips++;
	for (i = 0; i < g->n; i++) {
		void *rv = NULL;

		if ((only && g->again[i] == 0) || g->again[i] == LIGHT)
			continue;
		if (redisGetReply(g->cn.c, &rv) != REDIS_OK || rv == NULL)
			return broken(g, i, only, now);
		r = rv;
		t = resil__fleet_take(g->m[i], r, now);
		freeReplyObject(r);
		if (only && t > 0) {
			resil__fleet_lost(g->m[i],
			    "redis: the script was lost "
			    "twice in one sync");
			t = 0;
		}
		g->again[i] = (unsigned char)(t > 0 ? t : 0);
	}
	return reads > 0 ? take_reads(g, now) : RESIL_OK;
}

/* Load the script again (Redis lost it): 0, or -1. */
static int
reload(resil_fleet_group *g)
{
	redisReply *r =
	    redisCommand(g->cn.c, "SCRIPT LOAD %s", resil__fleet_lua());
	int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;

	if (ok)
		memcpy(g->cn.sha, r->str, 41);
	if (r != NULL)
		freeReplyObject(r);
	return ok ? 0 : -1;
}

/* Open the connection when closed (not before next_reconnect after a
 * failure): 0, or -1 with every handle in local mode. */
static int
open_locked(resil_fleet_group *g, uint64_t now)
{
	char why[RESIL_DIAG_MAX];

	if (g->cn.c != NULL)
		return 0;
	if (g->cn.tried && now < g->cn.next_reconnect) {
		lose_from(g, 0, 0, "redis unreachable");
		return -1;
	}
	g->cn.tried = 1;
	if (resil__fconn_open(&g->cn, resil__fleet_lua(), why, sizeof(why)) !=
	    0) {
		g->cn.next_reconnect =
		    now + (uint64_t)g->cn.reconnect_ms * RESIL_NS_PER_MS;
		lose_from(g, 0, 0, why);
		return -1;
	}
	return 0;
}

int
resil__fleet_group_connect(resil_fleet_group *g, uint64_t now)
{
	int rc;

	pthread_mutex_lock(&g->mu);
	rc = open_locked(g, now);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static resil_err
group_sync_locked(resil_fleet_group *g, uint64_t now)
{
	resil_err err;
	size_t i;
	int any = 0, lost = 0;

	if (g->n == 0)
		return RESIL_OK;
	if (open_locked(g, now) != 0)
		return RESIL_E_UNAVAILABLE;
	memset(g->again, 0, g->n);
	err = round_trip(g, now, 0);
	if (err != RESIL_OK)
		return err;
	for (i = 0; i < g->n; i++) {
		any |= g->again[i] != 0;
		lost |= g->again[i] == 2;
	}
	if (!any)
		return RESIL_OK;
	if (lost && reload(g) != 0)
		return broken(g, 0, 1, now);
	return round_trip(g, now, 1);
}

resil_err
resil_fleet_group_sync(resil_fleet_group *g, uint64_t now)
{
	resil_err err;

	if (g == NULL)
		return RESIL_E_INVAL;
	pthread_mutex_lock(&g->mu);
	err = group_sync_locked(g, now);
	pthread_mutex_unlock(&g->mu);
	return err;
}

/* ---- the helper thread ---- */

static void *
ghelper_main(void *arg)
{
	resil_fleet_group *g = arg;
	struct timespec ts;

	pthread_mutex_lock(&g->hmu);
	while (!g->hstop) {
		pthread_mutex_unlock(&g->hmu);
		(void)resil_fleet_group_sync(g, resil_clock_now(&g->clock));
		pthread_mutex_lock(&g->hmu);
		if (g->hstop)
			break;
		/* Real time on the monotonic system clock (lib/clock.c reads
		 * it), as resil_fleet_start's thread does. */
		resil__cond_deadline(&ts, g->hinterval_ms);
		while (!g->hstop &&
		    pthread_cond_timedwait(&g->hcv, &g->hmu, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&g->hmu);
	return NULL;
}

static resil_err
ghelper_init(resil_fleet_group *g, resil_diag *diag)
{
	pthread_condattr_t ca;
	int rc;

	if (g->hinit)
		return RESIL_OK;
	if (pthread_condattr_init(&ca) != 0)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_group: no condattr");
	(void)resil__condattr_monotonic(&ca);
	rc = pthread_cond_init(&g->hcv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc != 0)
		return resil__diagf(diag, RESIL_E_NOMEM,
		    "fleet_group: no condition variable");
	if (pthread_mutex_init(&g->hmu, NULL) != 0) {
		pthread_cond_destroy(&g->hcv);
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_group: no mutex");
	}
	g->hinit = 1;
	return RESIL_OK;
}

resil_err
resil_fleet_group_start(
    resil_fleet_group *g, uint32_t interval_ms, resil_diag *diag)
{
	resil_err err;
	int rc;

	if (g == NULL || interval_ms == 0 || interval_ms > 3600000)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_group: start needs a group and interval_ms "
		    "1..3600000");
	if ((err = ghelper_init(g, diag)) != RESIL_OK)
		return err;
	pthread_mutex_lock(&g->hmu);
	if (g->hrunning) {
		pthread_mutex_unlock(&g->hmu);
		return resil__diagf(diag, RESIL_E_MISUSE,
		    "fleet_group: the helper thread is running already");
	}
	g->hstop = 0;
	g->hinterval_ms = interval_ms;
	resil__store64(&g->helper_on, 1);
	rc = pthread_create(&g->helper, NULL, ghelper_main, g);
	if (rc != 0) {
		resil__store64(&g->helper_on, 0);
		pthread_mutex_unlock(&g->hmu);
		return resil__diagf(diag, RESIL_E_NOMEM,
		    "fleet_group: cannot start the helper thread: %s",
		    strerror(rc));
	}
	g->hrunning = 1;
	pthread_mutex_unlock(&g->hmu);
	return RESIL_OK;
}

resil_err
resil_fleet_group_stop(resil_fleet_group *g)
{
	pthread_t t;

	if (g == NULL)
		return RESIL_E_INVAL;
	if (!g->hinit)
		return RESIL_OK;
	pthread_mutex_lock(&g->hmu);
	if (!g->hrunning) {
		pthread_mutex_unlock(&g->hmu);
		return RESIL_OK;
	}
	g->hstop = 1;
	t = g->helper;
	pthread_cond_broadcast(&g->hcv);
	pthread_mutex_unlock(&g->hmu);
	pthread_join(t, NULL);
	pthread_mutex_lock(&g->hmu);
	g->hrunning = 0;
	resil__store64(&g->helper_on, 0);
	pthread_mutex_unlock(&g->hmu);
	return RESIL_OK;
}

resil_err
resil_fleet_group_get_info(resil_fleet_group *g, resil_fleet_group_info *out)
{
	if (g == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&g->mu);
	out->members = (uint32_t)g->n;
	out->connected = g->cn.c != NULL;
	out->round_trips = g->round_trips;
	out->scripts = g->scripts;
	out->reads = g->reads;
	out->master_switches = g->cn.switches;
	if (g->cn.port != 0)
		snprintf(out->master, sizeof(out->master), "%s:%u", g->cn.host,
		    (unsigned)g->cn.port);
	pthread_mutex_unlock(&g->mu);
	return RESIL_OK;
}

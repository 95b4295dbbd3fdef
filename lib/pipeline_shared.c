/*
 * Shared-memory and fleet state inside a pipeline (issue 24.2,
 * lib/pipeline_shared.h): the shm breaker, rate limiter and bulkhead
 * (<resil/shm.h>) and the Redis fleet breaker and rate limiter
 * (<resil/fleet.h>), given as borrowed handles or named in text
 * ("shm:REGION/NAME", "redis://HOST[:PORT]/NAME") and then opened here
 * and owned by the pipeline.
 *
 * A shm object is an ordinary resil_breaker / resil_ratelimit /
 * resil_bulkhead handle: it takes the place of the pipeline's own in
 * every settings, and the call path is the local one, unchanged. The
 * fleet breaker keeps its own permit logic (probe leases): a settings
 * with a fleet has no breaker, and the call machine asks the fleet
 * (resil_fleet_acquire / _record / _release) where it would ask the
 * breaker, in the branch taken only when there is no breaker; the fleet
 * rate limiter stands in for the local one (built, as ratelimit.* must be
 * on, and not asked), in the branch taken only with a rate limiter.
 */
#include "pipeline_shared.h"

#include "pipeline_internal.h"

#include <resil/fleet.h>
#include <resil/shm.h>

#include <stdio.h>
#include <string.h>

#include "directory_internal.h"
#include "fleet_internal.h"
#include "pipeline_events.h"
#include "router_internal.h"
#include "pipeline_keyed_fleet.h"

#define NREGIONS 3

/* A fleet handle opened here and its listener's context: the pipeline,
 * and the fleet's name for the events' text. */
struct fhandle {
	resil_pipeline *p;
	resil_fleet *f;
	char *method; /* NULL: the service's */
	char name[64];
};

struct resil__pshared {
	resil_shm *region[NREGIONS];
	char *region_name[NREGIONS];
	/* In use (borrowed or opened); own_* set for those opened here. */
	resil_breaker *breaker;
	resil_fleet *fleet;
	resil_ratelimit *rl;
	resil_bulkhead *bh;
	resil_fleet_limit *frl;
	int own_breaker, own_fleet, own_rl, own_bh, own_frl;
	/* What the pipeline was created with, for a reload's check. */
	char *url[5];
	uint64_t fleet_sync_ns;
	char *eb_url; /* endpoint.breaker.shared, kept from changing */
	/* Issue 44: breaker.fleet.* as created (a reload keeps them), and
	 * the fleet's name for its events' text. */
	uint64_t fleet_settings[12];
	char fleet_name[64];
	/* Issue 44 (pipelines through groups): the group every fleet
	 * handle opened here syncs through (lib/pipeline_fleet.c), and
	 * the methods' own fleet breakers (breaker.per_method), by method
	 * name ("NAME.METHOD" in Redis). */
	struct resil_fleet_group *grp;
	int per_method, endpoints;
	struct fhandle svc; /* the service's handle's listener context */
	struct fhandle lim; /* the fleet limiter's (issue 41, h3) */
	struct fhandle **mf;
	size_t nmf, capmf;
};

enum { U_BREAKER, U_FLEET, U_RL, U_BH, U_FRL };

static const char *const url_key[5] = { "breaker.shared", "breaker.fleet",
	"ratelimit.shared", "bulkhead.shared", "ratelimit.fleet" };

static const char *
url_of(const resil_pipeline_config *cfg, int i)
{
	switch (i) {
	case U_BREAKER:
		return cfg->breaker_shared_url;
	case U_FLEET:
		return cfg->breaker_fleet_url;
	case U_RL:
		return cfg->ratelimit_shared_url;
	case U_BH:
		return cfg->bulkhead_shared_url;
	default:
		return cfg->ratelimit_fleet_url;
	}
}

static const void *
handle_of(const resil_pipeline_config *cfg, int i)
{
	switch (i) {
	case U_BREAKER:
		return cfg->shared_breaker;
	case U_FLEET:
		return cfg->fleet;
	case U_RL:
		return cfg->shared_ratelimit;
	case U_BH:
		return cfg->shared_bulkhead;
	default:
		return cfg->fleet_ratelimit;
	}
}

static const char *const handle_field[5] = { "shared_breaker", "fleet",
	"shared_ratelimit", "shared_bulkhead", "fleet_ratelimit" };

static int
given(const resil_pipeline_config *cfg, int i)
{
	return url_of(cfg, i) != NULL || handle_of(cfg, i) != NULL;
}

/* ---- text values ---- */

static int
name_ok(const char *s, size_t n, size_t max)
{
	size_t i;

	if (n == 0 || n > max)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-'))
			return 0;
	}
	return 1;
}

/* "REGION/NAME" of "shm:REGION/NAME" into region and name. */
static resil_err
parse_shm(const char *key, const char *v, char *region, char *name,
    resil_diag *diag)
{
	const char *slash;

	if (strncmp(v, "shm:", 4) != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%.80s\" is not shm:REGION/NAME", key, v);
	v += 4;
	slash = strchr(v, '/');
	if (slash == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"shm:%.80s\" names no object (shm:REGION/NAME)",
		    key, v);
	if (!name_ok(v, (size_t)(slash - v), 200))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: region \"%.*s\" is not 1..200 characters of "
		    "[A-Za-z0-9._-]",
		    key, (int)((slash - v) > 80 ? 80 : slash - v), v);
	if (!name_ok(slash + 1, strlen(slash + 1), 63))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: name \"%.80s\" is not 1..63 characters of "
		    "[A-Za-z0-9._-]",
		    key, slash + 1);
	if (region != NULL) {
		memcpy(region, v, (size_t)(slash - v));
		region[slash - v] = '\0';
		memcpy(name, slash + 1, strlen(slash + 1) + 1); /* <= 63 */
	}
	return RESIL_OK;
}

/* "redis://HOST[:PORT]/NAME" into host (up to 255), port and name. */
static resil_err
parse_redis(const char *key, const char *v, char *host, uint32_t *port,
    char *name, resil_diag *diag)
{
	const char *h, *slash, *colon;
	uint32_t pt = 6379;

	if (strncmp(v, "redis://", 8) != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%.80s\" is not redis://HOST[:PORT]/NAME", key, v);
	h = v + 8;
	slash = strchr(h, '/');
	if (slash == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%.80s\" names no fleet "
		    "(redis://HOST[:PORT]/NAME)",
		    key, v);
	colon = memchr(h, ':', (size_t)(slash - h));
	if (colon == NULL)
		colon = slash;
	if (colon == h || colon - h > 255)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%.80s\" has no host (redis://HOST[:PORT]/NAME)",
		    key, v);
	if (colon != slash) {
		const char *d;

		pt = 0;
		for (d = colon + 1; d < slash; d++) {
			if (*d < '0' || *d > '9' || pt > 65535)
				break;
			pt = pt * 10 + (uint32_t)(*d - '0');
		}
		if (d != slash || d == colon + 1 || pt < 1 || pt > 65535)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: port \"%.*s\" is not 1..65535", key,
			    (int)((slash - colon - 1) > 20
			            ? 20
			            : slash - colon - 1),
			    colon + 1);
	}
	if (!name_ok(slash + 1, strlen(slash + 1), 63))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: name \"%.80s\" is not 1..63 characters of "
		    "[A-Za-z0-9._-]",
		    key, slash + 1);
	if (host != NULL) {
		memcpy(host, h, (size_t)(colon - h));
		host[colon - h] = '\0';
		*port = pt;
		memcpy(name, slash + 1, strlen(slash + 1) + 1); /* <= 63 */
	}
	return RESIL_OK;
}

/* Issue 44: "redis-sentinel://H1:P1,H2:P2,.../MASTER/NAME" into sent
 * (the list, up to 2200), master and name (each up to 63). */
static resil_err
parse_sentinel(const char *key, const char *v, char *sent, char *master,
    char *name, resil_diag *diag)
{
	char list[2201], m[64];
	const char *p = v + 17, *s1, *s2;
	const char *why;

	s1 = strchr(p, '/');
	s2 = s1 != NULL ? strchr(s1 + 1, '/') : NULL;
	if (s1 == NULL || s2 == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%.80s\" is not redis-sentinel://HOST:PORT[,...]/"
		    "MASTER/NAME",
		    key, v);
	if ((size_t)(s1 - p) >= sizeof(list) || (size_t)(s2 - s1 - 1) >= 64)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "%s: \"%.80s\" is too long", key, v);
	memcpy(list, p, (size_t)(s1 - p));
	list[s1 - p] = '\0';
	memcpy(m, s1 + 1, (size_t)(s2 - s1 - 1));
	m[s2 - s1 - 1] = '\0';
	if ((why = resil__fleet_sentinels_check(list, m)) != NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "%s: %s", key, why);
	if (!name_ok(s2 + 1, strlen(s2 + 1), 63))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: name \"%.80s\" is not 1..63 characters of "
		    "[A-Za-z0-9._-]",
		    key, s2 + 1);
	if (sent != NULL) {
		memcpy(sent, list, strlen(list) + 1);
		memcpy(master, m, strlen(m) + 1);
		memcpy(name, s2 + 1, strlen(s2 + 1) + 1);
	}
	return RESIL_OK;
}

resil_err
resil__shared_url_check(const char *key, const char *value, resil_diag *diag)
{
	size_t n = strlen(key);

	if (strcmp(key, "endpoint.breaker.shared") == 0) {
		if (strncmp(value, "shm:", 4) != 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%.80s\" is not shm:REGION", key, value);
		if (!name_ok(value + 4, strlen(value + 4), 200))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: region \"%.80s\" is not 1..200 characters "
			    "of [A-Za-z0-9._-] (the endpoints' breakers are "
			    "named by address)",
			    key, value + 4);
		return RESIL_OK;
	}
	if ((strcmp(key, "breaker.fleet") == 0 ||
	        strcmp(key, "ratelimit.fleet") == 0) &&
	    strncmp(value, "redis-sentinel://", 17) == 0)
		return parse_sentinel(key, value, NULL, NULL, NULL, diag);
	if (n >= 6 && strcmp(key + n - 6, ".fleet") == 0)
		return parse_redis(key, value, NULL, NULL, NULL, diag);
	return parse_shm(key, value, NULL, NULL, diag);
}

/* ---- the rules ---- */

static resil_err
refuse(int *stage, int st, resil_diag *diag, const char *fmt, const char *a,
    const char *b)
{
	if (stage != NULL)
		*stage = st;
	return resil__diagf(diag, RESIL_E_INVAL, fmt, a, b);
}

/* Issue 44: the breaker.fleet.* keys, in the order of
 * resil_pipeline_config.fleet_settings. */
static const char *const fs_key[12] = { "breaker.fleet.quorum",
	"breaker.fleet.quorum_traffic", "breaker.fleet.probe_leases",
	"breaker.fleet.max_local_leases", "breaker.fleet.buckets",
	"breaker.fleet.open_wait", "breaker.fleet.lease", "breaker.fleet.vote",
	"breaker.fleet.bucket", "breaker.fleet.connect_timeout",
	"breaker.fleet.command_timeout", "breaker.fleet.reconnect" };

static void
fs_of(const resil_pipeline_config *cfg, uint64_t v[12])
{
	memcpy(v, &cfg->fleet_settings, 12 * sizeof(uint64_t));
}

static resil_err
check_one(const resil_pipeline_config *cfg, int i, int *stage,
    resil_diag *diag)
{
	static const int st_of[5] = { 1, 1, 4, 5, 4 };
	resil_diag d;
	int on = i <= U_FLEET ? cfg->breaker_enabled
	    : i == U_BH       ? cfg->bulkhead_enabled
	                      : cfg->ratelimit_enabled;

	if (!given(cfg, i))
		return RESIL_OK;
	if (url_of(cfg, i) != NULL && handle_of(cfg, i) != NULL)
		return refuse(stage, st_of[i], diag,
		    "%s: given twice (as text and as %s)", url_key[i],
		    handle_field[i]);
	if (url_of(cfg, i) != NULL &&
	    resil__shared_url_check(url_key[i], url_of(cfg, i), &d) !=
	        RESIL_OK)
		return refuse(stage, st_of[i], diag, "%s%s", d.msg, "");
	if (!on)
		return refuse(stage, st_of[i], diag,
		    "%s: the stage is off (%s=false)", url_key[i],
		    i <= U_FLEET ? "breaker.enabled"
		    : i == U_BH  ? "bulkhead.enabled"
		                 : "ratelimit.enabled");
	return RESIL_OK;
}

resil_err
resil__shared_check(
    const resil_pipeline_config *cfg, int *stage, resil_diag *diag)
{
	resil_err err;
	int i;

	for (i = 0; i < 5; i++)
		if ((err = check_one(cfg, i, stage, diag)) != RESIL_OK)
			return err;
	if (given(cfg, U_BREAKER) && given(cfg, U_FLEET))
		return refuse(stage, 1, diag,
		    "%s: not with %s (a service has one breaker)",
		    "breaker.fleet", "breaker.shared");
	/* Issue 44: a fleet from text gives each method its own fleet
	 * breaker (NAME.METHOD); a borrowed one is the service's only. */
	if ((given(cfg, U_BREAKER) || cfg->fleet != NULL) &&
	    cfg->breaker_per_method)
		return refuse(stage, 1, diag,
		    "%s: not with %s (the shared breaker is the service's)",
		    cfg->fleet != NULL ? "fleet" : "breaker.shared",
		    "breaker.per_method");
	if (given(cfg, U_RL) && given(cfg, U_FRL))
		return refuse(stage, 4, diag,
		    "%s: not with %s (a pipeline has one rate limiter)",
		    "ratelimit.fleet", "ratelimit.shared");
	if (cfg->fleet_sync_ns != 0 && cfg->breaker_fleet_url == NULL)
		return refuse(stage, 1, diag,
		    "%s: needs %s (a fleet given as a handle is synced by "
		    "its owner)",
		    "breaker.fleet_sync", "breaker.fleet");
	if (cfg->fleet_endpoints && cfg->breaker_fleet_url == NULL)
		return refuse(stage, 1, diag,
		    "%s: needs %s (the endpoints' breakers join the fleet "
		    "the text names)",
		    "breaker.fleet.endpoints", "breaker.fleet");
	if (cfg->breaker_fleet_url == NULL) {
		uint64_t v[12];

		fs_of(cfg, v);
		for (i = 0; i < 12; i++)
			if (v[i] != 0)
				return refuse(stage, 1, diag,
				    "%s: needs %s (a fleet given as a handle "
				    "has its own settings)",
				    fs_key[i], "breaker.fleet");
	}
	return RESIL_OK;
}

/* ---- opening what the text names ---- */

static resil_err
nomem(resil_diag *diag)
{
	return resil__diagf(diag, RESIL_E_NOMEM, "pipeline: out of memory");
}

/* The region called name, opened once per pipeline. */
static resil_err
region(resil_pipeline *p, struct resil__pshared *sh, const char *key,
    const char *name, resil_shm **out, resil_diag *diag)
{
	resil_shm_config sc;
	resil_diag d;
	resil_err err;
	int i;

	for (i = 0; i < NREGIONS && sh->region[i] != NULL; i++)
		if (strcmp(sh->region_name[i], name) == 0) {
			*out = sh->region[i];
			return RESIL_OK;
		}
	if (i == NREGIONS)
		return resil__diagf(diag, RESIL_E_INVAL, "%s: too many regions",
		    key); /* three keys, three regions: never */
	sh->region_name[i] = resil__strdup(&p->alloc, name);
	if (sh->region_name[i] == NULL)
		return nomem(diag);
	resil_shm_config_init(&sc);
	sc.alloc = &p->alloc;
	d.msg[0] = '\0';
	err = resil_shm_open(&sh->region[i], name, &sc, &d);
	if (err != RESIL_OK) {
		resil__strfree(&p->alloc, sh->region_name[i]);
		sh->region_name[i] = NULL;
		return resil__diagf(diag, err, "%s: %s", key, d.msg);
	}
	*out = sh->region[i];
	return RESIL_OK;
}

/* The shm object of key i (breaker, rate limiter or bulkhead). */
static resil_err
open_shm(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, int i, resil_diag *diag)
{
	char rname[201], oname[64];
	resil_shm *shm = NULL;
	resil_diag d;
	resil_err err;

	err = parse_shm(url_key[i], url_of(cfg, i), rname, oname, diag);
	if (err == RESIL_OK)
		err = region(p, sh, url_key[i], rname, &shm, diag);
	if (err != RESIL_OK)
		return err;
	d.msg[0] = '\0';
	if (i == U_BREAKER) {
		resil_breaker_config bc = cfg->breaker;

		bc.clock = &p->clock;
		bc.alloc = &p->alloc;
		/* Only with a pipeline listener: a shared breaker with a
		 * listener takes the acquire's full path (it hears the other
		 * processes' transitions there). */
		bc.listener = p->listener != NULL ? resil__on_breaker : NULL;
		bc.listener_ctx = p;
		err = resil_shm_breaker(shm, oname, &bc, &sh->breaker, &d);
		sh->own_breaker = err == RESIL_OK;
	} else if (i == U_RL) {
		resil_ratelimit_config rc = cfg->ratelimit;

		rc.clock = &p->clock;
		rc.alloc = &p->alloc;
		rc.listener = resil__on_ratelimit;
		rc.listener_ctx = p;
		err = resil_shm_ratelimit(shm, oname, &rc, &sh->rl, &d);
		sh->own_rl = err == RESIL_OK;
	} else {
		resil_bulkhead_config bc = cfg->bulkhead;

		bc.clock = &p->clock;
		bc.alloc = &p->alloc;
		bc.listener = resil__on_bulkhead;
		bc.listener_ctx = p;
		err = resil_shm_bulkhead(shm, oname, &bc, &sh->bh, &d);
		sh->own_bh = err == RESIL_OK;
	}
	if (err != RESIL_OK)
		return resil__diagf(diag, err, "%s: %s", url_key[i], d.msg);
	return RESIL_OK;
}

static uint64_t
ms_up(uint64_t ns)
{
	return ns / 1000000u + (ns % 1000000u != 0);
}

_Static_assert(sizeof(((resil_pipeline_config *)0)->fleet_settings) ==
        12 * sizeof(uint64_t),
    "fleet_settings: twelve uint64_t, in fs_key's order");

/* Issue 44: the fleet's events, to the pipeline's listener (a BREAKER
 * event with .fleet set), from the thread that synced. */
static void
on_fleet(const resil_fleet_event *fe, void *ctx)
{
	const struct fhandle *fh = ctx;
	resil_pipeline *p = fh->p;
	resil_pipeline_event ev;
	char text[RESIL_DIAG_MAX + 96];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	if (fe->detail[0] != '\0')
		snprintf(text, sizeof(text), "fleet %s %s (%s)",
		    fh->name, resil_fleet_event_name(fe->kind),
		    fe->detail);
	else
		snprintf(text, sizeof(text), "fleet %s %s %s",
		    fh->name, resil_fleet_event_name(fe->kind),
		    resil_fleet_state_name(fe->state));
	ev.fleet = fe;
	resil__emit(
	    p, &ev, RESIL_STAGE_BREAKER, resil_clock_now(&p->clock), text, "");
}

/* Issue 41 (h3): the fleet limiter's events (local, connected, error,
 * settings), to the pipeline's listener (a RATELIMIT event with .fleet
 * set), from the thread whose acquire had them. */
static void
on_fleet_limit(const resil_fleet_event *fe, void *ctx)
{
	const struct fhandle *fh = ctx;
	resil_pipeline *p = fh->p;
	resil_pipeline_event ev;
	char text[RESIL_DIAG_MAX + 96];

	if (p->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	snprintf(text, sizeof(text), "fleet limiter %s %s (%s)", fh->name,
	    resil_fleet_event_name(fe->kind), fe->detail);
	ev.fleet = fe;
	resil__emit(p, &ev, RESIL_STAGE_RATELIMIT, resil_clock_now(&p->clock),
	    text, "");
}

static uint32_t
ms32(uint64_t ns)
{
	uint64_t ms = ms_up(ns);

	return ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
}

/* breaker.fleet.* into fc (0: the default kept). */
static void
fleet_settings(resil_fleet_config *fc, const uint64_t v[12])
{
	if (v[0] != 0)
		fc->quorum = (uint32_t)v[0];
	fc->quorum_traffic_pct = (uint32_t)v[1];
	if (v[2] != 0)
		fc->probe_leases = (uint32_t)v[2];
	fc->max_local_leases = (uint32_t)v[3];
	if (v[4] != 0)
		fc->buckets = (uint32_t)v[4];
	if (v[5] != 0)
		fc->open_wait_ms = ms_up(v[5]);
	if (v[6] != 0)
		fc->lease_ms = ms_up(v[6]);
	if (v[7] != 0)
		fc->vote_ms = ms_up(v[7]);
	if (v[8] != 0)
		fc->bucket_ms = ms_up(v[8]);
	if (v[9] != 0)
		fc->connect_timeout_ms = ms32(v[9]);
	if (v[10] != 0)
		fc->command_timeout_ms = ms32(v[10]);
	if (v[11] != 0)
		fc->reconnect_ms = ms32(v[11]);
}

/* NAME, the last part of a breaker.fleet value checked already. */
static int
parse_fleet_name(const char *url, char *name)
{
	const char *slash = strrchr(url, '/');

	if (slash == NULL || strlen(slash + 1) > 63)
		return -1; /* not reached: the value was checked */
	memcpy(name, slash + 1, strlen(slash + 1) + 1);
	return 0;
}

/* The group of the fleet cfg names (its Redis, timeouts, sync). */
static resil_err
open_group(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	char host[2201], master[64], name[64];
	resil_fleet_group_config gc;
	uint64_t sync_ms = ms_up(cfg->fleet_sync_ns);
	resil_diag d;
	resil_err err;

	resil_fleet_group_config_init(&gc);
	if (strncmp(cfg->breaker_fleet_url, "redis-sentinel://", 17) == 0) {
		err = parse_sentinel(url_key[U_FLEET], cfg->breaker_fleet_url,
		    host, master, name, diag);
		gc.sentinels = host;
		gc.master = master;
	} else {
		err = parse_redis(url_key[U_FLEET], cfg->breaker_fleet_url,
		    host, &gc.port, name, diag);
		gc.host = host;
	}
	if (err != RESIL_OK)
		return err;
	if (sh->fleet_settings[9] != 0)
		gc.connect_timeout_ms = ms32(sh->fleet_settings[9]);
	if (sh->fleet_settings[10] != 0)
		gc.command_timeout_ms = ms32(sh->fleet_settings[10]);
	if (sh->fleet_settings[11] != 0)
		gc.reconnect_ms = ms32(sh->fleet_settings[11]);
	gc.alloc = &p->alloc;
	gc.clock = &p->clock;
	d.msg[0] = '\0';
	err = resil__pfleet_group_get(&gc,
	    sync_ms > 3600000u ? 3600000u : (uint32_t)sync_ms, &sh->grp, &d);
	if (err != RESIL_OK)
		return resil__diagf(diag, err, "%s: %s",
		    cfg->fleet_sync_ns != 0 ? "breaker.fleet_sync"
		                            : url_key[U_FLEET],
		    d.msg);
	return RESIL_OK;
}

/* A fleet handle of sh's group: the service's (method NULL: named
 * NAME), or method's own (NAME.METHOD). */
static resil_err
make_fleet(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, const char *method_name,
    struct fhandle *fh, resil_diag *diag)
{
	char *name = fh->name;
	resil_fleet_config fc;
	resil_diag d;
	resil_err err;

	resil_fleet_config_init(&fc);
	if (method_name == NULL)
		(void)snprintf(name, sizeof(fh->name), "%s", sh->fleet_name);
	else if (!name_ok(method_name, strlen(method_name), 63) ||
	    strlen(sh->fleet_name) + 1 + strlen(method_name) > 63)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: method \"%.80s\" cannot name a fleet breaker "
		    "(%s.METHOD must be 1..63 characters of [A-Za-z0-9._-])",
		    "breaker.fleet", method_name, sh->fleet_name);
	else {
		size_t n = strlen(sh->fleet_name); /* n + 1 + method <= 63 */

		memcpy(name, sh->fleet_name, n);
		name[n] = '.';
		memcpy(name + n + 1, method_name, strlen(method_name) + 1);
	}
	fh->p = p;
	fc.name = name;
	fc.group = sh->grp;
	fc.alloc = &p->alloc;
	fc.breaker = cfg->breaker;
	fc.breaker.clock = &p->clock;
	fc.breaker.alloc = &p->alloc;
	fc.breaker.listener = resil__on_breaker;
	fc.breaker.listener_ctx = p;
	fc.listener = on_fleet;
	fc.listener_ctx = fh;
	if (cfg->breaker.open_wait_ns != 0)
		fc.open_wait_ms = ms_up(cfg->breaker.open_wait_ns);
	fleet_settings(&fc, sh->fleet_settings);
	d.msg[0] = '\0';
	err = resil_fleet_new(&fh->f, &fc, &d);
	if (err != RESIL_OK)
		return resil__diagf(
		    diag, err, "%s: %s", url_key[U_FLEET], d.msg);
	return RESIL_OK;
}

/* method's own fleet handle, made when it has none yet (a method a reload
 * declares gets one too). */
static resil_err
method_fleet(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, const char *method_name,
    resil_fleet **out, resil_diag *diag)
{
	struct fhandle **mf, *fh;
	resil_err err;
	size_t i;

	for (i = 0; i < sh->nmf; i++)
		if (strcmp(sh->mf[i]->method, method_name) == 0) {
			*out = sh->mf[i]->f;
			return RESIL_OK;
		}
	if (sh->nmf == sh->capmf) {
		size_t cap = sh->capmf != 0 ? sh->capmf * 2 : 8;

		mf = resil__calloc(&p->alloc, cap * sizeof(struct fhandle *));
		if (mf == NULL)
			return nomem(diag);
		if (sh->nmf != 0)
			memcpy(mf, sh->mf, sh->nmf * sizeof(struct fhandle *));
		if (sh->mf != NULL)
			resil__free(&p->alloc, sh->mf, sh->capmf * sizeof(struct fhandle *));
		sh->mf = mf;
		sh->capmf = cap;
	}
	fh = resil__calloc(&p->alloc, sizeof(*fh));
	if (fh == NULL ||
	    (fh->method = resil__strdup(&p->alloc, method_name)) == NULL) {
		if (fh != NULL)
			resil__free(&p->alloc, fh, sizeof(*fh));
		return nomem(diag);
	}
	err = make_fleet(p, sh, cfg, method_name, fh, diag);
	if (err != RESIL_OK) {
		resil__strfree(&p->alloc, fh->method);
		resil__free(&p->alloc, fh, sizeof(*fh));
		return err;
	}
	sh->mf[sh->nmf++] = fh;
	*out = fh->f;
	return RESIL_OK;
}

/* Issue 44 (h2): the selector's endpoints' breakers on the fleet, in
 * sh's group (the directory holds a reference of it). */
static resil_err
fleet_endpoints(
    resil_pipeline *p, struct resil__pshared *sh, resil_diag *diag)
{
	const uint64_t *v = sh->fleet_settings;
	resil__dir_fleet df;

	if (p->sel == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: needs a selector (the endpoints of a cluster)",
		    "breaker.fleet.endpoints");
	memset(&df, 0, sizeof(df));
	df.group = sh->grp;
	df.put = resil__pfleet_group_put;
	memcpy(df.prefix, sh->fleet_name, sizeof(df.prefix));
	df.quorum = (uint32_t)v[0];
	df.quorum_traffic_pct = (uint32_t)v[1];
	df.probe_leases = (uint32_t)v[2];
	df.max_local_leases = (uint32_t)v[3];
	df.buckets = (uint32_t)v[4];
	df.open_wait_ms = ms_up(v[5]);
	df.lease_ms = ms_up(v[6]);
	df.vote_ms = ms_up(v[7]);
	df.bucket_ms = ms_up(v[8]);
	if (strlen(sh->fleet_name) > 63 - 4 - 18)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: the fleet name \"%s\" leaves no room for the "
		    "endpoints' (NAME.ep.ADDRESS: NAME at most 41 characters)",
		    "breaker.fleet.endpoints", sh->fleet_name);
	resil__pfleet_group_ref(sh->grp);
	sh->endpoints = 1;
	return resil__dir_fleet_attach(resil__selector_dir(p->sel), &df,
	    "breaker.fleet.endpoints", diag);
}

static resil_err
open_fleet(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	resil_fleet *f;
	resil_err err;
	size_t i;

	fs_of(cfg, sh->fleet_settings);
	(void)parse_fleet_name(cfg->breaker_fleet_url, sh->fleet_name);
	err = open_group(p, sh, cfg, diag);
	if (err == RESIL_OK)
		err = make_fleet(p, sh, cfg, NULL, &sh->svc, diag);
	if (err != RESIL_OK)
		return err;
	sh->fleet = sh->svc.f;
	sh->own_fleet = 1;
	sh->per_method = cfg->breaker_per_method;
	for (i = 0; sh->per_method && i < cfg->nmethods; i++)
		if ((err = method_fleet(p, sh, cfg, cfg->methods[i].name, &f,
		         diag)) != RESIL_OK)
			return err;
	if (cfg->fleet_endpoints &&
	    (err = fleet_endpoints(p, sh, diag)) != RESIL_OK)
		return err;
	/* As a handle made alone does: Redis unreachable now is said now
	 * (a LOCAL event each), not at the first sync. */
	(void)resil__fleet_group_connect(
	    sh->grp, resil_clock_now(&p->clock));
	return RESIL_OK;
}

static resil_err
open_fleet_limit(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	char host[2201], master[64], name[64];
	resil_fleet_limit_config fc;
	resil_diag d;
	resil_err err;

	resil_fleet_limit_config_init(&fc);
	if (strncmp(cfg->ratelimit_fleet_url, "redis-sentinel://", 17) == 0) {
		/* Issue 44 (h2): the limiter through Sentinel too. */
		err = parse_sentinel(url_key[U_FRL], cfg->ratelimit_fleet_url,
		    host, master, name, diag);
		fc.sentinels = host;
		fc.master = master;
	} else {
		err = parse_redis(url_key[U_FRL], cfg->ratelimit_fleet_url,
		    host, &fc.port, name, diag);
		fc.host = host;
	}
	if (err != RESIL_OK)
		return err;
	fc.name = name;
	fc.alloc = &p->alloc;
	fc.clock = &p->clock;
	sh->lim.p = p;
	snprintf(sh->lim.name, sizeof(sh->lim.name), "%s", name);
	fc.listener = on_fleet_limit;
	fc.listener_ctx = &sh->lim;
	fc.rate = cfg->ratelimit.rate;
	fc.period_ms = ms_up(cfg->ratelimit.period_ns);
	fc.burst = cfg->ratelimit.burst;
	resil__kfleet_config(cfg, &fc); /* issue 41 (h3): keyed */
	d.msg[0] = '\0';
	err = resil_fleet_limit_new(&sh->frl, &fc, &d);
	if (err != RESIL_OK)
		return resil__diagf(diag, err, "%s: %s", url_key[U_FRL], d.msg);
	sh->own_frl = 1;
	return RESIL_OK;
}

static resil_err
open_all(resil_pipeline *p, struct resil__pshared *sh,
    const resil_pipeline_config *cfg, resil_diag *diag)
{
	resil_err err = RESIL_OK;
	int i;

	for (i = 0; i < 5; i++) {
		if (url_of(cfg, i) != NULL) {
			sh->url[i] = resil__strdup(&p->alloc, url_of(cfg, i));
			if (sh->url[i] == NULL)
				return nomem(diag);
		}
	}
	sh->breaker = cfg->shared_breaker;
	sh->fleet = cfg->fleet;
	sh->rl = cfg->shared_ratelimit;
	sh->bh = cfg->shared_bulkhead;
	sh->frl = cfg->fleet_ratelimit;
	sh->fleet_sync_ns = cfg->fleet_sync_ns;
	if (cfg->endpoint_breaker_shared_url != NULL &&
	    (sh->eb_url = resil__strdup(&p->alloc,
	         cfg->endpoint_breaker_shared_url)) == NULL)
		return nomem(diag);
	if (sh->url[U_BREAKER] != NULL)
		err = open_shm(p, sh, cfg, U_BREAKER, diag);
	if (err == RESIL_OK && sh->url[U_RL] != NULL)
		err = open_shm(p, sh, cfg, U_RL, diag);
	if (err == RESIL_OK && sh->url[U_BH] != NULL)
		err = open_shm(p, sh, cfg, U_BH, diag);
	if (err == RESIL_OK && sh->url[U_FLEET] != NULL)
		err = open_fleet(p, sh, cfg, diag);
	if (err == RESIL_OK && sh->url[U_FRL] != NULL)
		err = open_fleet_limit(p, sh, cfg, diag);
	return err;
}

resil_err
resil__shared_setup(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag)
{
	struct resil__pshared *sh;
	resil_err err;
	int i, any = cfg->fleet_sync_ns != 0 || cfg->fleet_endpoints ||
	    cfg->endpoint_breaker_shared_url != NULL;

	for (i = 0; i < 5; i++)
		any |= given(cfg, i);
	if (!any)
		return RESIL_OK;
	err = resil__shared_check(cfg, NULL, diag);
	if (err != RESIL_OK)
		return err;
	sh = resil__calloc(&p->alloc, sizeof(*sh));
	if (sh == NULL)
		return nomem(diag);
	p->sh = sh;
	return open_all(p, sh, cfg, diag);
}

/* ---- into the settings ---- */

static resil_err
immutable(resil_diag *diag, const char *key)
{
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s: cannot change by reload (shared state is fixed when the "
	    "pipeline is created)",
	    key);
}

/* A reload's cfg keeps p's shared state: NULL or the same. */
static resil_err
reload_keeps(const resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_diag *diag)
{
	const struct resil__pshared *sh = p->sh;
	const void *has[5];
	int i;

	has[U_BREAKER] = sh != NULL ? sh->breaker : NULL;
	has[U_FLEET] = sh != NULL ? (const void *)sh->fleet : NULL;
	has[U_RL] = sh != NULL ? sh->rl : NULL;
	has[U_BH] = sh != NULL ? sh->bh : NULL;
	has[U_FRL] = sh != NULL ? (const void *)sh->frl : NULL;
	for (i = 0; i < 5; i++) {
		const char *u = url_of(cfg, i);
		const char *was = sh != NULL ? sh->url[i] : NULL;

		if (handle_of(cfg, i) != NULL && handle_of(cfg, i) != has[i])
			return immutable(diag, handle_field[i]);
		if (u != NULL && (was == NULL || strcmp(u, was) != 0))
			return immutable(diag, url_key[i]);
	}
	if (cfg->fleet_sync_ns != 0 &&
	    (sh == NULL || cfg->fleet_sync_ns != sh->fleet_sync_ns))
		return immutable(diag, "breaker.fleet_sync");
	{
		uint64_t v[12];

		fs_of(cfg, v);
		for (i = 0; i < 12; i++)
			if (v[i] != 0 &&
			    (sh == NULL || v[i] != sh->fleet_settings[i]))
				return immutable(diag, fs_key[i]);
	}
	if (cfg->endpoint_breaker_shared_url != NULL &&
	    (sh == NULL || sh->eb_url == NULL ||
	        strcmp(cfg->endpoint_breaker_shared_url, sh->eb_url) != 0))
		return immutable(diag, "endpoint.breaker.shared");
	if (cfg->fleet_endpoints && (sh == NULL || !sh->endpoints))
		return immutable(diag, "breaker.fleet.endpoints");
	if (sh != NULL && sh->breaker != NULL && cfg->breaker_per_method)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: not with breaker.per_method (the shared breaker is "
		    "the service's)",
		    "breaker.shared");
	if (sh != NULL && sh->fleet != NULL &&
	    (cfg->breaker_per_method != 0) != (sh->per_method != 0))
		return sh->own_fleet ? immutable(diag, "breaker.per_method")
		                     : resil__diagf(diag, RESIL_E_INVAL,
		                           "%s: not with breaker.per_method (the "
		                           "shared breaker is the service's)",
		                           "fleet");
	return RESIL_OK;
}

/* Issue 44: the fleet in place of g's breakers: the service's, and with
 * breaker.per_method each declared method's own fleet breaker (in place
 * of the local one the settings built, which no call then asks). */
static resil_err
fleet_methods(resil_pipeline *p, const resil_pipeline_config *cfg,
    settings *g, resil_diag *diag)
{
	struct resil__pshared *sh = p->sh;
	method *it, *tmp;
	resil_err err;

	g->breaker = NULL;
	g->fleet = sh->fleet;
	g->dflt.fleet = sh->fleet;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		it->fleet = sh->fleet;
		if (!sh->per_method)
			continue;
		/* cppcheck-suppress uninitvar ; it is set by HASH_ITER */
		err = method_fleet(p, sh, cfg, it->name, &it->fleet, diag);
		if (err != RESIL_OK)
			return err;
		method_run_with(it, NULL, it->run_retry);
	}
	return RESIL_OK;
}

resil_err
resil__shared_apply(resil_pipeline *p, const resil_pipeline_config *cfg,
    settings *g, int reload, resil_diag *diag)
{
	const struct resil__pshared *sh = p->sh;
	method *it, *tmp;

	if (reload) {
		resil_err err = reload_keeps(p, cfg, diag);

		if (err != RESIL_OK)
			return err;
	}
	g->fleet = NULL;
	g->frl = NULL;
	if (sh == NULL || (sh->breaker == NULL && sh->fleet == NULL &&
	                      sh->rl == NULL && sh->frl == NULL &&
	                      sh->bh == NULL))
		return RESIL_OK;
	if (sh->breaker != NULL)
		g->breaker = sh->breaker;
	if (sh->fleet != NULL) {
		resil_err err = fleet_methods(p, cfg, g, diag);

		if (err != RESIL_OK)
			return err;
	}
	if (sh->rl != NULL)
		g->rl = sh->rl;
	/* In place of g->rl (on: checked); with ratelimit.key, the keyed
	 * family's instead (issue 41, h3). */
	if (sh->frl != NULL && !resil__kfleet_take(p, cfg, sh->frl))
		g->frl = sh->frl;
	if (sh->bh != NULL)
		g->bh = sh->bh;
	/* The service breaker each method runs with was decided by the
	 * settings before this substitution (pipeline_settings.c's
	 * decide_start): follow it. */
	if (g->dflt.breaker == NULL)
		method_run_with(&g->dflt, g->breaker, g->dflt.run_retry);
	for (it = g->methods; it != NULL; it = it->hh.next)
		if (it->breaker == NULL)
			method_run_with(it, g->breaker, it->run_retry);
	/* The blocking driver's inline first step knows only a breaker
	 * (a shm one is one: it keeps it); with the fleet, every call
	 * takes the machine. (A shm limiter or bulkhead replaces one the
	 * settings built, which already keeps calls off that step.) */
	if (sh->fleet == NULL && sh->frl == NULL)
		return RESIL_OK;
	g->dflt.simple = 0;
	HASH_ITER(hh, g->methods, it, tmp)
	{
		it->simple = 0;
	}
	return RESIL_OK;
}

/* <resil/pipeline.h>: the group the pipeline's fleet breakers sync
 * through (here, not in pipeline_fleet.c: that file is below this one). */
resil_fleet_group *
resil_pipeline_fleet_group(resil_pipeline *p)
{
	return p != NULL && p->sh != NULL ? p->sh->grp : NULL;
}

void
resil__shared_free(resil_pipeline *p)
{
	struct resil__pshared *sh = p->sh;
	size_t j;
	int i;

	if (sh == NULL)
		return;
	if (sh->own_fleet)
		resil_fleet_free(sh->fleet);
	for (j = 0; j < sh->nmf; j++) {
		resil_fleet_free(sh->mf[j]->f);
		resil__strfree(&p->alloc, sh->mf[j]->method);
		resil__free(&p->alloc, sh->mf[j], sizeof(*sh->mf[j]));
	}
	if (sh->mf != NULL)
		resil__free(&p->alloc, sh->mf, sh->capmf * sizeof(struct fhandle *));
	resil__pfleet_group_put(sh->grp);
	if (sh->own_frl)
		resil_fleet_limit_free(sh->frl);
	if (sh->own_breaker)
		resil_breaker_free(sh->breaker);
	if (sh->own_rl)
		resil_ratelimit_free(sh->rl);
	if (sh->own_bh)
		resil_bulkhead_free(sh->bh);
	for (i = 0; i < NREGIONS; i++) {
		resil_shm_close(sh->region[i]);
		resil__strfree(&p->alloc, sh->region_name[i]);
	}
	for (i = 0; i < 5; i++)
		resil__strfree(&p->alloc, sh->url[i]);
	resil__strfree(&p->alloc, sh->eb_url);
	resil__free(&p->alloc, sh, sizeof(*sh));
	p->sh = NULL;
}

/*
 * The fleet groups of pipelines (issue 44, lib/pipeline_shared.h): every
 * fleet breaker a pipeline opens from text (the service's, each method's
 * with breaker.per_method, each endpoint's with breaker.fleet.endpoints)
 * joins one resil_fleet_group, so that one group sync is one round trip
 * for all of them. The pipelines of one process that name the same Redis
 * (the same host:port, or the same sentinels and master) with the same
 * timeouts, sync interval, clock and allocator share one group: a table
 * here, under its own mutex, holds each group with a count of the
 * pipelines using it; the last one to go stops its helper thread and
 * frees it.
 */
#include "pipeline_shared.h"

#include "pipeline_internal.h"

#include <resil/fleet.h>

#include <pthread.h>
#include <string.h>

#include "fleet_internal.h"

typedef struct pgroup {
	struct pgroup *next;
	resil_fleet_group *g;
	uint64_t refs;
	/* What two pipelines must share to share the group. */
	char where[2400]; /* "H:host:port" or "S:sentinels/master" */
	uint32_t connect_ms, command_ms, reconnect_ms, sync_ms;
	uint64_t (*now)(void *ctx);
	void *clock_ctx;
	resil_allocator alloc;
} pgroup;

static pthread_mutex_t groups_mu = PTHREAD_MUTEX_INITIALIZER;
static pgroup *groups;

static void
where_of(const resil_fleet_group_config *gc, char *buf, size_t cap)
{
	if (gc->sentinels != NULL)
		(void)snprintf(
		    buf, cap, "S:%s/%s", gc->sentinels, gc->master);
	else
		(void)snprintf(buf, cap, "H:%s:%u",
		    gc->host != NULL ? gc->host : "127.0.0.1",
		    (unsigned)gc->port);
}

static int
same(const pgroup *e, const char *where, const resil_fleet_group_config *gc,
    uint32_t sync_ms, const resil_allocator *a)
{
	return strcmp(e->where, where) == 0 &&
	    e->connect_ms == gc->connect_timeout_ms &&
	    e->command_ms == gc->command_timeout_ms &&
	    e->reconnect_ms == gc->reconnect_ms && e->sync_ms == sync_ms &&
	    e->now == gc->clock->now && e->clock_ctx == gc->clock->ctx &&
	    e->alloc.alloc == a->alloc && e->alloc.free == a->free &&
	    e->alloc.ctx == a->ctx;
}

resil_err
resil__pfleet_group_get(const resil_fleet_group_config *gc, uint32_t sync_ms,
    resil_fleet_group **out, resil_diag *diag)
{
	const resil_allocator *a = resil__allocator(gc->alloc);
	char where[sizeof(((pgroup *)0)->where)];
	pgroup *e;
	resil_err err;

	where_of(gc, where, sizeof(where));
	pthread_mutex_lock(&groups_mu);
	for (e = groups; e != NULL; e = e->next)
		if (same(e, where, gc, sync_ms, a)) {
			e->refs++;
			*out = e->g;
			pthread_mutex_unlock(&groups_mu);
			return RESIL_OK;
		}
	e = resil__calloc(a, sizeof(*e));
	if (e == NULL) {
		pthread_mutex_unlock(&groups_mu);
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "pipeline: out of memory");
	}
	err = resil_fleet_group_new(&e->g, gc, diag);
	if (err == RESIL_OK && sync_ms != 0)
		err = resil_fleet_group_start(e->g, sync_ms, diag);
	if (err != RESIL_OK) {
		(void)resil_fleet_group_free(e->g);
		resil__free(a, e, sizeof(*e));
		pthread_mutex_unlock(&groups_mu);
		return err;
	}
	memcpy(e->where, where, sizeof(where));
	e->connect_ms = gc->connect_timeout_ms;
	e->command_ms = gc->command_timeout_ms;
	e->reconnect_ms = gc->reconnect_ms;
	e->sync_ms = sync_ms;
	e->now = gc->clock->now;
	e->clock_ctx = gc->clock->ctx;
	e->alloc = *a;
	e->refs = 1;
	e->next = groups;
	groups = e;
	*out = e->g;
	pthread_mutex_unlock(&groups_mu);
	return RESIL_OK;
}

void
resil__pfleet_group_put(resil_fleet_group *g)
{
	pgroup **pp, *e;

	if (g == NULL)
		return;
	pthread_mutex_lock(&groups_mu);
	for (pp = &groups; (e = *pp) != NULL; pp = &e->next)
		if (e->g == g)
			break;
	if (e != NULL && --e->refs == 0) {
		*pp = e->next;
		/* Its pipelines freed their handles first: the group is
		 * empty, so its free (which stops the thread) succeeds. */
		(void)resil_fleet_group_free(e->g);
		resil__free(&e->alloc, e, sizeof(*e));
	}
	pthread_mutex_unlock(&groups_mu);
}

void
resil__pfleet_group_ref(resil_fleet_group *g)
{
	pgroup *e;

	pthread_mutex_lock(&groups_mu);
	for (e = groups; e != NULL; e = e->next)
		if (e->g == g)
			e->refs++;
	pthread_mutex_unlock(&groups_mu);
}

/* ---- the public accessors (<resil/pipeline.h>) ---- */

static const settings *
cur_settings(resil_pipeline *p)
{
	return resil__loadptr((void *const *)&p->cur);
}

resil_fleet *
resil_pipeline_fleet_of(resil_pipeline *p, const char *method_name)
{
	const settings *g;
	const method *m;

	if (p == NULL)
		return NULL;
	g = cur_settings(p);
	m = method_name != NULL ? find_method(g, method_name) : &g->dflt;
	return m->fleet != NULL ? m->fleet : g->fleet;
}

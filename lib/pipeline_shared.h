/*
 * Shared-memory and fleet state inside a pipeline (lib/pipeline_shared.c,
 * issue 24.2): the handles a configuration gives or names in text, opened
 * and owned where named, and put into every settings the pipeline builds.
 * Never installed.
 */
#ifndef RESIL_PIPELINE_SHARED_H
#define RESIL_PIPELINE_SHARED_H

#include <resil/pipeline.h>
#include <resil/shm.h>

struct settings;

/*
 * The rules between cfg's shared fields and the rest of cfg (one service
 * breaker, one rate limiter, the stage switched on, no per-method
 * breaker but a fleet's from text). RESIL_OK, or RESIL_E_INVAL with the
 * message (naming the key) in *diag and, when stage is not NULL, the
 * stage the key belongs to in *stage (1 breaker, 4 ratelimit, 5
 * bulkhead: enum stage of config_keys.h).
 */
resil_err resil__shared_check(
    const resil_pipeline_config *cfg, int *stage, resil_diag *diag);

/* One text value of key (breaker.shared, ...): "shm:REGION/NAME" for the
 * .shared keys, "redis://HOST[:PORT]/NAME" for the .fleet ones.
 * RESIL_OK, or RESIL_E_INVAL with "key: message" in *diag. */
resil_err resil__shared_url_check(
    const char *key, const char *value, resil_diag *diag);

/* At resil_pipeline_new, before the settings: check cfg, open what its
 * text names, into p->sh (left NULL when cfg has none). */
resil_err resil__shared_setup(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag);

/* Put p's shared state into g, built from cfg. reload: cfg is a reload's,
 * refused (naming the key) when it would change the shared state (NULL
 * keeps it). */
resil_err resil__shared_apply(resil_pipeline *p,
    const resil_pipeline_config *cfg, struct settings *g, int reload,
    resil_diag *diag);

/* Free what the pipeline opened (after its settings). NULL sh: no-op. */
void resil__shared_free(resil_pipeline *p);

/* ---- issue 44: the fleet's group (lib/pipeline_fleet.c) ---- */

struct resil_fleet_group;
struct resil_fleet_group_config;

/* The group of the process for gc's Redis, timeouts, clock, allocator and
 * sync interval (sync_ms 0: none; else its helper thread syncs every
 * sync_ms), made when there is none yet; its count of users goes up.
 * RESIL_OK; RESIL_E_INVAL, RESIL_E_NOMEM with the reason in *diag. */
resil_err resil__pfleet_group_get(const struct resil_fleet_group_config *gc,
    uint32_t sync_ms, struct resil_fleet_group **out, resil_diag *diag);

/* One user fewer (its handles freed first); the last frees the group. */
void resil__pfleet_group_put(struct resil_fleet_group *g);

/* One user more of g (a directory whose endpoints' fleet breakers are in
 * it, issue 44 h2): put when done. */
void resil__pfleet_group_ref(struct resil_fleet_group *g);

#endif /* RESIL_PIPELINE_SHARED_H */

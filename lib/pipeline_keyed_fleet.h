/*
 * Issue 41 (h3): a pipeline's keyed rate limiter on the fleet
 * (ratelimit.key with ratelimit.fleet; lib/pipeline_keyed_fleet.c,
 * docs/fleet.md "Keyed limits"). Never installed.
 */
#ifndef RESIL_PIPELINE_KEYED_FLEET_H
#define RESIL_PIPELINE_KEYED_FLEET_H

#include <resil/fleet.h>
#include <resil/pipeline.h>

struct resil__kgate;

/* Whether cfg names a keyed rate limiter with a fleet one and no shm
 * one (those two are refused together elsewhere). */
int resil__kfleet_on(const resil_pipeline_config *cfg);

/* Whether frl was made keyed (max_keys > 0). */
int resil__kfleet_keyed(const resil_fleet_limit *frl);

/* lib/pipeline_keyed_fleet_check.c: resil__keyed_cfg_check()
 * (lib/keyed_spec.h), with ratelimit.key and a
 * fleet rate limiter accepted together: the fleet limiter is then the
 * keyed one. */
resil_err resil__kfleet_cfg_check(
    const resil_pipeline_config *cfg, int *kind, resil_diag *diag);

/* The keyed settings of cfg's rate limiter family into fc (the fleet
 * limiter ratelimit.fleet opens); nothing without ratelimit.key. */
void resil__kfleet_config(
    const resil_pipeline_config *cfg, resil_fleet_limit_config *fc);

/* Nonzero when frl, the pipeline's fleet limiter, is its keyed rate
 * limiter (p's family named by cfg): the gate asks it per key, and it
 * does not stand in for the pipeline's own limiter. */
int resil__kfleet_take(resil_pipeline *p, const resil_pipeline_config *cfg,
    resil_fleet_limit *frl);

/* The family p makes for kind k (lib/pipeline_keyed.c), kc: on the
 * fleet, a placeholder of one key (the fleet limiter's keys are asked in
 * its place; its local family is its own). */
void resil__kfleet_family(
    const resil_pipeline_config *cfg, unsigned k, resil_keyed_config *kc);

/* The gate's one call: key's permit from the fleet when the family is on
 * it, else from the local family. */
resil_err resil__kfleet_acquire(struct resil__kgate *g, const void *key,
    size_t len, uint64_t *retry_after);

/* The keyed fleet limiter of p, or NULL. */
resil_fleet_limit *resil__kfleet_of(const resil_pipeline *p);

#endif

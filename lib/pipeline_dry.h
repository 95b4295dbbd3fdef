/*
 * A reload tried without being taken (lib/pipeline_reload.c), for the
 * registry's override rules (issue 40, lib/configurator.c): the same
 * checks and build as resil_pipeline_reload(), nothing published.
 */
#ifndef RESIL_PIPELINE_DRY_H
#define RESIL_PIPELINE_DRY_H

#include <resil/pipeline.h>

resil_err resil__pipeline_reload_dry(
    resil_pipeline *p, const resil_pipeline_config *cfg, resil_diag *diag);

#endif /* RESIL_PIPELINE_DRY_H */

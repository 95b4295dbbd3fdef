/*
 * Issue 40 (lib/pipeline_endpoint.c): a pipeline with a selector and a
 * listener hears its endpoints' ejections and breaker transitions.
 */
#ifndef RESIL_PIPELINE_ENDPOINT_H
#define RESIL_PIPELINE_ENDPOINT_H

#include "pipeline_internal.h"

void resil__pipeline_watch_endpoints(resil_pipeline *p);
void resil__pipeline_unwatch_endpoints(resil_pipeline *p);

#endif /* RESIL_PIPELINE_ENDPOINT_H */

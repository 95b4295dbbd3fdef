/*
 * Issue 40: what happens to a pipeline's endpoints reaches its listener.
 * A pipeline made with a selector watches the selector's directory
 * (resil__dir_watch): an endpoint's ejection and return, its breaker's
 * transitions and its health changes become RESIL_STAGE_CLUSTER events
 * (RESIL_STAGE_BREAKER, with .breaker set, for a breaker's), with a text
 * that names the endpoint: "endpoint 10.0.0.1:20880 breaker CLOSED ->
 * OPEN (consecutive_failures)", "endpoint 10.0.0.1:20880 ejected for
 * 30000 ms (ejection 1)". Added, removed and empty pushes are the
 * registry's and stay with the directory's listener.
 */
#include "pipeline_internal.h"

#include <stdio.h>
#include <string.h>

#include "pipeline_endpoint.h"
#include "pipeline_events.h"
#include "router_internal.h"

static const char *
state_name(resil_breaker_state s)
{
	return resil_breaker_state_name(s);
}

static void
on_endpoint(const resil_endpoint_event *ev, void *ctx)
{
	resil_pipeline *p = ctx;
	resil_pipeline_event pe;
	resil_stage stage = RESIL_STAGE_CLUSTER;
	char text[200];

	switch (ev->type) {
	case RESIL_ENDPOINT_BREAKER:
		(void)snprintf(text, sizeof(text),
		    "endpoint %s breaker %s -> %s (%s)", ev->address,
		    state_name(ev->breaker->from), state_name(ev->breaker->to),
		    resil_breaker_reason_name(ev->breaker->reason));
		stage = RESIL_STAGE_BREAKER;
		break;
	case RESIL_ENDPOINT_EJECTED:
		(void)snprintf(text, sizeof(text),
		    "endpoint %s ejected for %llu ms (ejection %u)",
		    ev->address,
		    (unsigned long long)(ev->duration / RESIL_NS_PER_MS),
		    ev->ejections);
		break;
	case RESIL_ENDPOINT_RETURNED:
	case RESIL_ENDPOINT_UNHEALTHY:
	case RESIL_ENDPOINT_HEALTHY:
	case RESIL_ENDPOINT_DETECTED:
		(void)snprintf(text, sizeof(text), "endpoint %s %s",
		    ev->address,
		    ev->type == RESIL_ENDPOINT_RETURNED      ? "returned"
		        : ev->type == RESIL_ENDPOINT_HEALTHY ? "healthy"
		        : ev->type == RESIL_ENDPOINT_UNHEALTHY
		        ? "unhealthy"
		        : "detected as an outlier (not ejected)");
		break;
	default:
		return;
	}
	memset(&pe, 0, sizeof(pe));
	pe.breaker = ev->breaker;
	resil__emit(p, &pe, stage, ev->time, text, NULL);
}

void
resil__pipeline_watch_endpoints(resil_pipeline *p)
{
	if (p->sel != NULL && p->listener != NULL)
		(void)resil__dir_watch(
		    resil__selector_dir(p->sel), on_endpoint, p);
}

void
resil__pipeline_unwatch_endpoints(resil_pipeline *p)
{
	if (p->sel != NULL && p->listener != NULL)
		resil__dir_unwatch(resil__selector_dir(p->sel), p);
}

/*
 * The mock stage's configuration in a pipeline (lib/pipeline_mock.c): the
 * resil_mock built from the service's and the methods' specs, swapped at
 * run time (resil_pipeline_set_mock) under the readers protocol of
 * resil__mock_hold(); the fallback chain's mock handler; the mock endpoints of
 * a directory answering for the mock stage. Never installed.
 */
#ifndef RESIL_PIPELINE_MOCK_H
#define RESIL_PIPELINE_MOCK_H

#include "pipeline_internal.h"

/* A resil_mock from service_spec and every method's own spec in g; with
 * method_name, that method's spec is method_spec instead (method_unset: it
 * has none). */
resil_err resil__build_mock(resil_pipeline *p, const settings *g,
    const char *service_spec, const char *method_name, const char *method_spec,
    int method_unset, resil_mock **out, resil_diag *diag);

/* The fallback chain's mock handler (ctx: the settings). */
resil_verdict resil__mock_handler(void *ctx, const resil_args *args,
    const resil_failure *failure, resil_result *out);

/* A mock endpoint of the directory answers (failure NULL: force): 1 when
 * it answered into *out, 0 when there is none. */
int resil__mock_from_endpoint(resil_pipeline *p, const resil_args *args,
    const resil_failure *failure, resil_result *out);

/* Hold the mock configuration of g for a short read (the readers
 * protocol of struct mock_readers); *tok says what to release. NULL: none
 * configured (nothing to release then either). */
resil_mock *resil__mock_hold(
    resil_pipeline *p, const settings *g, unsigned *tok);

static inline void
mock_release(resil_pipeline *p, unsigned tok)
{
	resil__dec64(&p->mock_rd[tok >> 1].n[tok & 1]);
}

#endif /* RESIL_PIPELINE_MOCK_H */

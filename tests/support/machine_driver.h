/*
 * A second driver for the pipeline's call machine, written on the test
 * side: it steps resil_call_start/step/report by hand, runs each attempt
 * itself and moves the pipeline's clock (a manual clock: sleeping advances
 * it) to each WAIT's tick. Compiled into test_pipeline_machine and
 * test_scenarios_machine in place of resil_pipeline_call(), so the whole
 * pipeline and scenario suites run through both drivers and any
 * difference between them fails a test.
 */
#ifndef RESIL_TEST_MACHINE_DRIVER_H
#define RESIL_TEST_MACHINE_DRIVER_H

#include <resil/pipeline.h>

/* As resil_pipeline_call(). */
resil_err machine_pipeline_call(resil_pipeline *p, const resil_args *args,
    resil_call_fn fn, void *ctx, resil_result *out);

/* As resil_pipeline_deadline(), for attempts run by the driver above. */
uint64_t machine_pipeline_deadline(void);

/* Steps taken by the driver so far on this thread (to show a test ran
 * through it). */
uint64_t machine_driver_steps(void);

#endif

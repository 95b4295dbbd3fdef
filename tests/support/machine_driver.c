#include "machine_driver.h"

#include <stdio.h>
#include <stdlib.h>

static _Thread_local int in_attempt;
static _Thread_local uint64_t attempt_deadline = UINT64_MAX;
static _Thread_local uint64_t steps;

uint64_t
machine_pipeline_deadline(void)
{
	return in_attempt ? attempt_deadline : UINT64_MAX;
}

uint64_t
machine_driver_steps(void)
{
	return steps;
}

resil_err
machine_pipeline_call(resil_pipeline *p, const resil_args *args,
    resil_call_fn fn, void *ctx, resil_result *out)
{
	const resil_clock *clk;
	resil_call call;
	resil_call_next st;
	resil_value v;
	resil_err err;
	int rc;

	if (p == NULL || fn == NULL)
		return RESIL_E_INVAL;
	clk = resil_pipeline_clock(p);
	err = resil_call_start(
	    &call, p, NULL, args, out, resil_clock_now(clk), &st);
	if (err != RESIL_OK)
		return err;
	while (st.action != RESIL_CALL_DONE) {
		steps++;
		if (st.action == RESIL_CALL_RUN) {
			resil_value_init(&v);
			in_attempt = 1;
			attempt_deadline = st.deadline;
			rc = fn(ctx, args, &v);
			in_attempt = 0;
			attempt_deadline = UINT64_MAX;
			if (resil_call_report(&call, st.attempt, rc, &v,
			        resil_clock_now(clk)) != RESIL_OK) {
				fprintf(stderr,
				    "machine driver: report refused\n");
				abort();
			}
		} else {
			uint64_t now = resil_clock_now(clk);

			/* One attempt at a time: a wait always has an end. */
			if (st.until == UINT64_MAX) {
				fprintf(
				    stderr, "machine driver: endless wait\n");
				abort();
			}
			if (st.until > now)
				resil_clock_sleep(clk, st.until - now);
		}
		if (resil_call_step(&call, resil_clock_now(clk), &st) !=
		    RESIL_OK) {
			fprintf(stderr, "machine driver: step refused\n");
			abort();
		}
	}
	return out->err;
}

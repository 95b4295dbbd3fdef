/*
 * One invocation run to its end through the pipeline's call machine
 * (resil_call_start_ex, resil_call_step, resil_call_report), each attempt
 * run here by fn at the clock's reading, the manual clock moved to each
 * WAIT's tick: the second driver of the tests that run every case through
 * both (resil_pipeline_invoke_ex being the first). Header-only; the test
 * includes cmocka first.
 */
#ifndef RESIL_TEST_MACHINE_INVOKE_H
#define RESIL_TEST_MACHINE_INVOKE_H

#include <string.h>

#include <resil/call.h>
#include <resil/clock.h>
#include <resil/pipeline.h>

/* *r as resil_pipeline_invoke_ex(p, m, inv, fn, ctx, r) fills it. */
static inline void
machine_invoke(resil_pipeline *p, const resil_method *m,
    const resil_invocation *inv, resil_endpoint_call_fn fn, void *ctx,
    resil_manual_clock *mc, resil_result *r)
{
	resil_call c;
	resil_call_next st;
	uint64_t now = resil_manual_clock_now(mc);

	memset(&c, 0, sizeof(c));
	assert_int_equal(
	    resil_call_start_ex(&c, p, m, inv, r, now, &st), RESIL_OK);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			resil_value v;
			uint32_t id = st.attempt;
			int rc = fn(ctx, st.endpoint, &inv->args, &v);

			assert_int_equal(
			    resil_call_report(&c, id, rc, &v, now), RESIL_OK);
		} else if (st.until > now) {
			resil_manual_clock_advance(mc, st.until - now);
			now = st.until;
		}
		assert_int_equal(resil_call_step(&c, now, &st), RESIL_OK);
	}
}

#endif

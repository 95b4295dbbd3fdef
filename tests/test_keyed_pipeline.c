/*
 * Issue 41, in the pipeline: keyed families drawn from the request
 * (resil_pipeline_set_keyed(), include/resil/pipeline_keyed.h) through the
 * blocking driver (resil_pipeline_call) and the cluster's
 * (resil_pipeline_invoke_ex, with arguments and attachments); the call
 * machine's gate, the text keys and the host source are in
 * tests/test_keyed_text.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/call.h>
#include <resil/config.h>
#include <resil/pipeline.h>
#include <resil/pipeline_keyed.h>

typedef struct fx {
	resil_manual_clock mc;
	resil_pipeline *p;
	resil_diag diag;
	int ran;
} fx;

static void
fx_start(fx *x)
{
	resil_pipeline_config pc;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000 * RESIL_NS_PER_MS);
	resil_pipeline_config_init(&pc);
	pc.service = "svc";
	pc.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &pc, &x->diag) != RESIL_OK)
		fail_msg("pipeline: %s", x->diag.msg);
}

/* A breaker family that opens on 2 failures in a row. */
static resil_keyed_config
breakers(fx *x)
{
	resil_keyed_config kc;

	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_BREAKER;
	kc.max_keys = 100;
	kc.breaker.clock = resil_manual_clock_hook(&x->mc);
	kc.breaker.consecutive_failures = 2;
	return kc;
}

/* Fails for the key "bad" (the call's args bytes or argument 0). */
static int
fn(void *ctx, const resil_args *args, resil_value *out)
{
	fx *x = ctx;

	(void)out;
	x->ran++;
	return args->len == 3 && memcmp(args->data, "bad", 3) == 0 ? 111 : 0;
}

static int
efn(void *ctx, const resil_pick *ep, const resil_args *args,
    resil_value *out)
{
	(void)ep;
	return fn(ctx, args, out);
}

static resil_err
call_args(fx *x, const char *key)
{
	resil_args a = {"get", key, strlen(key)};
	resil_result r;
	resil_err err;

	err = resil_pipeline_call(x->p, &a, fn, x, &r);
	resil_result_free(&r);
	return err;
}

static resil_err
invoke_arg(fx *x, const char *arg0, const char *tenant)
{
	resil_invocation inv;
	const char *argv[1];
	resil_param att[1];
	resil_result r;
	resil_err err;

	resil_invocation_init(&inv, "get");
	inv.args.data = arg0;
	inv.args.len = arg0 != NULL ? strlen(arg0) : 0;
	argv[0] = arg0;
	inv.arguments = argv;
	inv.narguments = arg0 != NULL ? 1 : 0;
	att[0].key = "tenant";
	att[0].value = tenant;
	inv.attachments = att;
	inv.nattachments = tenant != NULL ? 1 : 0;
	err = resil_pipeline_invoke_ex(x->p, NULL, &inv, efn, x, &r);
	resil_result_free(&r);
	return err;
}

typedef struct bst {
	int state;
} bst;

static void
visit(const void *key, size_t len, const resil_keyed_instance *inst,
    void *ctx)
{
	(void)key;
	(void)len;
	((bst *)ctx)->state = (int)resil_breaker_get_state(inst->breaker);
}

static int
state_of(fx *x, const char *key, size_t len)
{
	bst s = {-1};

	(void)resil_keyed_with(resil_pipeline_keyed(x->p, RESIL_KEYED_BREAKER),
	    key, len, visit, &s);
	return s.state;
}

/* One bad key (the call's bytes) opens only its breaker. */
static void
test_keyed_pipeline_bad_key_opens_alone(void **state)
{
	fx x;
	resil_keyed_config kc;
	int i;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "args", &kc, &x.diag), RESIL_OK);
	for (i = 0; i < 3; i++) {
		assert_int_equal(call_args(&x, "ok1"), RESIL_OK);
		(void)call_args(&x, "bad");
		assert_int_equal(call_args(&x, "ok2"), RESIL_OK);
	}
	assert_int_equal(state_of(&x, "bad", 3), RESIL_BREAKER_OPEN);
	assert_int_equal(state_of(&x, "ok1", 3), RESIL_BREAKER_CLOSED);
	assert_int_equal(state_of(&x, "ok2", 3), RESIL_BREAKER_CLOSED);
	x.ran = 0;
	assert_int_equal(call_args(&x, "bad"), RESIL_E_OPEN);
	assert_int_equal(x.ran, 0);
	assert_int_equal(call_args(&x, "ok1"), RESIL_OK);
	assert_int_equal(x.ran, 1);
	resil_pipeline_free(x.p);
}

/* Through the cluster's driver, keyed by arguments[0]. */
static void
test_keyed_pipeline_invoke_argument(void **state)
{
	fx x;
	resil_keyed_config kc;
	int i;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	assert_int_equal(resil_pipeline_set_keyed(x.p, "arguments[0]", &kc,
	                     &x.diag),
	    RESIL_OK);
	for (i = 0; i < 3; i++) {
		(void)invoke_arg(&x, "bad", NULL);
		assert_int_equal(invoke_arg(&x, "h1", NULL), RESIL_OK);
	}
	assert_int_equal(state_of(&x, "bad", 3), RESIL_BREAKER_OPEN);
	assert_int_equal(state_of(&x, "h1", 2), RESIL_BREAKER_CLOSED);
	assert_int_equal(invoke_arg(&x, "bad", NULL), RESIL_E_OPEN);
	assert_int_equal(invoke_arg(&x, "h1", NULL), RESIL_OK);
	resil_pipeline_free(x.p);
}

/* A rate limit per tenant attachment; calls without one share "\0". */
static void
test_keyed_pipeline_ratelimit_per_tenant(void **state)
{
	fx x;
	resil_keyed_config kc;
	int i;

	(void)state;
	fx_start(&x);
	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_RATELIMIT;
	kc.ratelimit.clock = resil_manual_clock_hook(&x.mc);
	kc.ratelimit.rate = 2;
	kc.ratelimit.burst = 2;
	kc.ratelimit.period_ns = RESIL_NS_PER_SEC;
	assert_int_equal(resil_pipeline_set_keyed(x.p, "attachment:tenant",
	                     &kc, &x.diag),
	    RESIL_OK);
	for (i = 0; i < 2; i++) {
		assert_int_equal(invoke_arg(&x, "a", "t1"), RESIL_OK);
		assert_int_equal(invoke_arg(&x, "a", "t2"), RESIL_OK);
		assert_int_equal(invoke_arg(&x, "a", NULL), RESIL_OK);
	}
	x.ran = 0;
	assert_int_equal(invoke_arg(&x, "a", "t1"), RESIL_E_LIMITED);
	assert_int_equal(invoke_arg(&x, "a", "t2"), RESIL_E_LIMITED);
	/* Missing: the shared instance of "\0", drained as well. */
	assert_int_equal(invoke_arg(&x, "a", NULL), RESIL_E_LIMITED);
	assert_int_equal(invoke_arg(&x, "a", "t3"), RESIL_OK);
	assert_int_equal(x.ran, 1);
	(void)resil_manual_clock_advance(&x.mc, RESIL_NS_PER_SEC);
	assert_int_equal(invoke_arg(&x, "a", "t1"), RESIL_OK);
	resil_pipeline_free(x.p);
}

/* A missing key (no invocation, no argument): the shared "\0" breaker. */
static void
test_keyed_pipeline_missing_key_shared(void **state)
{
	fx x;
	resil_keyed_config kc;
	resil_args a = {"get", "bad", 3};
	resil_result r;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	assert_int_equal(resil_pipeline_set_keyed(x.p, "arguments[0]", &kc,
	                     &x.diag),
	    RESIL_OK);
	/* resil_pipeline_call carries no arguments: all share "\0". */
	(void)resil_pipeline_call(x.p, &a, fn, &x, &r);
	resil_result_free(&r);
	(void)resil_pipeline_call(x.p, &a, fn, &x, &r);
	resil_result_free(&r);
	assert_int_equal(state_of(&x, "\0", 1), RESIL_BREAKER_OPEN);
	assert_int_equal(invoke_arg(&x, NULL, NULL), RESIL_E_OPEN);
	assert_int_equal(invoke_arg(&x, "h1", NULL), RESIL_OK);
	resil_pipeline_free(x.p);
}

static void
test_keyed_pipeline_bad_spec(void **state)
{
	fx x;
	resil_keyed_config kc;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	assert_int_equal(resil_pipeline_set_keyed(x.p, "argument[0]", &kc,
	                     &x.diag),
	    RESIL_E_INVAL);
	assert_string_equal(x.diag.msg,
	    "breaker.key: \"argument[0]\" is not a key source (method, args, "
	    "arguments[N], attachment:NAME, host)");
	assert_int_equal(resil_pipeline_set_keyed(x.p, "arguments[256]", &kc,
	                     &x.diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(x.diag.msg, "0..255"));
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "attachment:", &kc, &x.diag),
	    RESIL_E_INVAL);
	kc.max_keys = 0;
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "method", &kc, &x.diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(x.diag.msg, "breaker.key."));
	assert_null(resil_pipeline_keyed(x.p, RESIL_KEYED_BREAKER));
	kc.max_keys = 10;
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "method", &kc, &x.diag), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "args", &kc, &x.diag),
	    RESIL_E_MISUSE);
	resil_pipeline_free(x.p);
}

/* Calls the pipeline again from inside an attempt, with another key. */
static int
nest_fn(void *ctx, const resil_args *args, resil_value *out)
{
	fx *x = ctx;
	resil_args a = {"other", "k", 1};
	resil_result r;

	(void)args;
	(void)out;
	x->ran++;
	if (x->ran == 1) {
		/* Same key (the method "get"): its one slot is held. */
		resil_args same = {"get", "k", 1};

		assert_int_equal(resil_pipeline_call(x->p, &same, nest_fn, x,
		                     &r),
		    RESIL_E_LIMITED);
		resil_result_free(&r);
		assert_int_equal(
		    resil_pipeline_call(x->p, &a, nest_fn, x, &r), RESIL_OK);
		resil_result_free(&r);
	}
	return 0;
}

/* A bulkhead per method: a nested call is gated again (not let past). */
static void
test_keyed_pipeline_bulkhead_per_method(void **state)
{
	fx x;
	resil_keyed_config kc;
	resil_args a = {"get", "k", 1};
	resil_result r;

	(void)state;
	fx_start(&x);
	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_BULKHEAD;
	kc.bulkhead.max_concurrent = 1;
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "method", &kc, &x.diag), RESIL_OK);
	assert_int_equal(resil_pipeline_call(x.p, &a, nest_fn, &x, &r),
	    RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(x.ran, 2);
	assert_int_equal(resil_pipeline_call(x.p, &a, fn, &x, &r), RESIL_OK);
	resil_result_free(&r);
	resil_pipeline_free(x.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_pipeline_bad_key_opens_alone),
		cmocka_unit_test(test_keyed_pipeline_invoke_argument),
		cmocka_unit_test(test_keyed_pipeline_ratelimit_per_tenant),
		cmocka_unit_test(test_keyed_pipeline_missing_key_shared),
		cmocka_unit_test(test_keyed_pipeline_bad_spec),
		cmocka_unit_test(test_keyed_pipeline_bulkhead_per_method),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Issue 42 on issue 41's families: a keyed throttle (throttle.key=, kind
 * RESIL_KEYED_THROTTLE). One tenant's overloaded backend sheds that
 * tenant's calls only, in the blocking driver and the call machine; a
 * key whose window holds what was not accepted is never evicted; the
 * text's throttle.key, .key.max_keys, .key.max_key_len and their
 * refusals. Every clock is a manual one, every throttle seeded.
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
#include <resil/keyed.h>
#include <resil/pipeline.h>
#include <resil/pipeline_keyed.h>
#include <resil/value.h>

#define MS RESIL_NS_PER_MS

/* ---- the family, by the C API ---- */

static resil_keyed *
family(resil_manual_clock *mc, uint32_t max_keys)
{
	resil_keyed_config kc;
	resil_keyed *k = NULL;
	resil_diag diag;

	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_THROTTLE;
	kc.max_keys = max_keys;
	kc.throttle.k = 2.0;
	kc.throttle.window_ns = 10 * RESIL_NS_PER_SEC;
	kc.throttle.buckets = 10;
	kc.throttle.seed = 42;
	kc.throttle.clock = resil_manual_clock_hook(mc);
	if (resil_keyed_new(&k, &kc, &diag) != RESIL_OK)
		fail_msg("keyed: %s", diag.msg);
	return k;
}

/* One call of key: admitted, then reported as r. RESIL_E_LIMITED: shed. */
static resil_err
one(resil_keyed *k, const char *key, resil_throttle_result r)
{
	resil_keyed_permit pm;
	resil_err err;

	memset(&pm, 0, sizeof(pm));
	err = resil_keyed_throttle_admit(
	    k, key, strlen(key), RESIL_THROTTLE_DEFAULT, &pm);
	if (err == RESIL_OK)
		assert_int_equal(resil_keyed_throttle_report(k, &pm, r), RESIL_OK);
	return err;
}

static void
grab(const void *key, size_t len, const resil_keyed_instance *in, void *ctx)
{
	(void)key;
	(void)len;
	assert_int_equal(in->kind, RESIL_KEYED_THROTTLE);
	assert_non_null(in->throttle);
	assert_int_equal(
	    resil_throttle_get_metrics(in->throttle, ctx), RESIL_OK);
}

static resil_throttle_metrics
key_metrics(resil_keyed *k, const char *key)
{
	resil_throttle_metrics m;

	memset(&m, 0, sizeof(m));
	assert_int_equal(
	    resil_keyed_with(k, key, strlen(key), grab, &m), RESIL_OK);
	return m;
}

static void
test_keyed_throttle_family(void **state)
{
	resil_manual_clock mc;
	resil_keyed *k;
	resil_keyed_permit pm;
	resil_throttle_metrics m;
	int i, shed = 0;

	(void)state;
	resil_manual_clock_init(&mc, 1000 * MS);
	k = family(&mc, 100);
	assert_int_equal(resil_keyed_get_kind(k), RESIL_KEYED_THROTTLE);
	assert_string_equal(resil_keyed_kind_name(RESIL_KEYED_THROTTLE),
	    "throttle");
	for (i = 0; i < 200; i++) {
		if (one(k, "bad", RESIL_THROTTLE_REJECTED) == RESIL_E_LIMITED)
			shed++;
		assert_int_equal(
		    one(k, "good", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
		resil_manual_clock_advance(&mc, MS);
	}
	/* The refusing tenant is shed (most of its calls, p near 1), the
	 * healthy one never. */
	assert_true(shed > 150);
	m = key_metrics(k, "bad");
	assert_int_equal(m.local_rejects, (uint64_t)shed);
	assert_int_equal(m.backend_rejects, (uint64_t)(200 - shed));
	m = key_metrics(k, "good");
	assert_int_equal(m.requests, 200);
	assert_int_equal(m.accepts, 200);
	assert_int_equal(m.local_rejects, 0);
	/* A spent permit changes nothing; wrong kinds and bad keys. */
	memset(&pm, 0, sizeof(pm));
	assert_int_equal(resil_keyed_throttle_admit(k, "good", 4,
	                     RESIL_THROTTLE_DEFAULT, &pm),
	    RESIL_OK);
	assert_int_equal(
	    resil_keyed_throttle_report(k, &pm, RESIL_THROTTLE_ACCEPTED),
	    RESIL_OK);
	assert_int_equal(
	    resil_keyed_throttle_report(k, &pm, RESIL_THROTTLE_ACCEPTED),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_throttle_admit(k, "", 0,
	                     RESIL_THROTTLE_DEFAULT, &pm),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_throttle_admit(k, "x", 1,
	                     RESIL_THROTTLE_DEFAULT, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_keyed_ratelimit_try_acquire(k, "x", 1, 1, NULL),
	    RESIL_E_INVAL);
	/* The window passes: the tenant is admitted again. */
	resil_manual_clock_advance(&mc, 11 * RESIL_NS_PER_SEC);
	assert_int_equal(one(k, "bad", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	resil_keyed_free(k);
}

/* Protected keys (a rejection, a refusal or a call without an accept in
 * the window) stay; an idle key whose window is all accepts goes. */
static void
test_keyed_throttle_eviction(void **state)
{
	resil_manual_clock mc;
	resil_keyed *k;
	resil_keyed_metrics km;
	resil_keyed_permit pm;
	resil_throttle_metrics m;

	(void)state;
	resil_manual_clock_init(&mc, 1000 * MS);
	k = family(&mc, 2);
	/* "a": refused by the server once (protected); "b": accepted. */
	assert_int_equal(one(k, "a", RESIL_THROTTLE_REJECTED), RESIL_OK);
	assert_int_equal(one(k, "b", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	/* "c" takes b's place, never a's. */
	assert_int_equal(one(k, "c", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.evicted, 1);
	m = key_metrics(k, "a");
	assert_int_equal(m.backend_rejects, 1);
	assert_int_equal(resil_keyed_with(k, "b", 1, grab, &m),
	    RESIL_E_NOTFOUND);
	/* "c" now in flight (admitted, not reported) is protected too:
	 * a new key finds no place and gets the overflow throttle. */
	memset(&pm, 0, sizeof(pm));
	assert_int_equal(resil_keyed_throttle_admit(
	                     k, "c", 1, RESIL_THROTTLE_DEFAULT, &pm),
	    RESIL_OK);
	assert_int_equal(one(k, "d", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.overflowed, 1);
	assert_int_equal(km.evicted, 1);
	assert_int_equal(
	    resil_keyed_throttle_report(k, &pm, RESIL_THROTTLE_ACCEPTED),
	    RESIL_OK);
	/* Once a's window has moved past its refusal it may go. */
	resil_manual_clock_advance(&mc, 11 * RESIL_NS_PER_SEC);
	assert_int_equal(one(k, "e", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	assert_int_equal(one(k, "f", RESIL_THROTTLE_ACCEPTED), RESIL_OK);
	assert_int_equal(resil_keyed_get_metrics(k, &km), RESIL_OK);
	assert_int_equal(km.evicted, 3);
	assert_int_equal(km.overflowed, 1);
	assert_int_equal(resil_keyed_with(k, "a", 1, grab, &m),
	    RESIL_E_NOTFOUND);
	resil_keyed_free(k);
}

static void
test_keyed_throttle_refused_c(void **state)
{
	resil_keyed_config kc;
	resil_keyed_override o = { "x", 1, 5, 0, 0, 0 };
	resil_keyed *k = NULL;
	resil_diag diag;

	(void)state;
	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_THROTTLE;
	kc.overrides = &o;
	kc.n_overrides = 1;
	assert_int_equal(resil_keyed_new(&k, &kc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "keyed.override: a throttle family takes no overrides (they are "
	    "limits: ratelimit or bulkhead)");
	kc.n_overrides = 0;
	kc.throttle.buckets = 7; /* 120s is not a whole number of 7 */
	assert_int_equal(resil_keyed_new(&k, &kc, &diag), RESIL_E_INVAL);
	assert_null(k);
	kc.kind = (resil_keyed_kind)4;
	assert_int_equal(resil_keyed_new(&k, &kc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "keyed.kind: 4 is not breaker, ratelimit, bulkhead or throttle");
}

/* ---- in the pipeline, from the text ---- */

typedef struct fx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
	int ran;
} fx;

static resil_config *
parse_ok(const char *text)
{
	resil_config *conf = NULL;
	resil_diag diag;

	diag.msg[0] = '\0';
	if (resil_config_parse_string(&conf, text, "k.conf", NULL, &diag) !=
	    RESIL_OK)
		fail_msg("parse: %s", diag.msg);
	return conf;
}

static void
refused(const char *text, const char *msg)
{
	resil_config *conf = NULL;
	resil_diag diag;

	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(&conf, text, "k.conf", NULL, &diag),
	    RESIL_E_INVAL);
	assert_null(conf);
	assert_string_equal(diag.msg, msg);
}

static const char thr_text[] = "service=S\n"
                               "throttle.key=args\n"
                               "throttle.k=2\n"
                               "throttle.window=10s\n"
                               "throttle.buckets=10\n"
                               "throttle.seed=7\n";

static void
fx_start(fx *x, const char *text)
{
	resil_pipeline_config cfg;
	resil_diag diag;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000 * MS);
	x->conf = parse_ok(text);
	cfg = *resil_config_pipeline(x->conf);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
}

static void
fx_end(fx *x)
{
	resil_pipeline_free(x->p);
	resil_config_free(x->conf);
}

/* The server refuses (overloaded) every call of the key "bad". */
static int
fn(void *ctx, const resil_args *args, resil_value *out)
{
	fx *x = ctx;

	(void)out;
	x->ran++;
	return args->len == 3 && memcmp(args->data, "bad", 3) == 0
	    ? RESIL_RC_THROTTLED
	    : 0;
}

static resil_err
call_key(fx *x, const char *key)
{
	resil_args a = { "get", key, strlen(key) };
	resil_result r;
	resil_err err = resil_pipeline_call(x->p, &a, fn, x, &r);

	resil_result_free(&r);
	return err;
}

static resil_throttle_metrics
pkey(fx *x, const char *key)
{
	resil_keyed *k = resil_pipeline_keyed(x->p, RESIL_KEYED_THROTTLE);

	assert_non_null(k);
	return key_metrics(k, key);
}

static void
test_keyed_throttle_pipeline(void **state)
{
	fx x;
	resil_throttle_metrics m;
	int i, shed = 0, refused_by_server = 0;

	(void)state;
	fx_start(&x, thr_text);
	/* The family takes the stage's place. */
	assert_null(resil_pipeline_throttle(x.p));
	for (i = 0; i < 100; i++) {
		resil_err e = call_key(&x, "bad");

		if (e == RESIL_E_LIMITED)
			shed++;
		else if (e == RESIL_E_THROTTLED)
			refused_by_server++;
		else
			fail_msg("bad: %s", resil_err_name(e));
		assert_int_equal(call_key(&x, "good"), RESIL_OK);
		resil_manual_clock_advance(&x.mc, MS);
	}
	assert_true(shed > 50);
	assert_int_equal(shed + refused_by_server, 100);
	m = pkey(&x, "bad");
	assert_int_equal(m.local_rejects, (uint64_t)shed);
	assert_int_equal(m.backend_rejects, (uint64_t)refused_by_server);
	m = pkey(&x, "good");
	assert_int_equal(m.requests, 100);
	assert_int_equal(m.accepts, 100);
	assert_int_equal(m.local_rejects, 0);
	fx_end(&x);
}

/* One call through the machine, its attempts answered by fn. */
static resil_err
machine_call(fx *x, const char *key)
{
	resil_call c;
	resil_call_next st;
	resil_args a = { "get", key, strlen(key) };
	resil_result r;
	uint64_t now = resil_manual_clock_now(&x->mc);
	resil_err err;

	err = resil_call_start(&c, x->p, NULL, &a, &r, now, &st);
	if (err != RESIL_OK)
		return err;
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			int rc = fn(x, &a, NULL);

			assert_int_equal(
			    resil_call_report(&c, st.attempt, rc, NULL, now),
			    RESIL_OK);
		} else {
			now = st.deadline;
		}
		assert_int_equal(resil_call_step(&c, now, &st), RESIL_OK);
	}
	err = r.err;
	resil_result_free(&r);
	return err;
}

static void
test_keyed_throttle_machine(void **state)
{
	fx x;
	resil_throttle_metrics m;
	int i, shed = 0;

	(void)state;
	fx_start(&x, thr_text);
	for (i = 0; i < 100; i++) {
		resil_err e = machine_call(&x, "bad");

		if (e == RESIL_E_LIMITED)
			shed++;
		else
			assert_int_equal(e, RESIL_E_THROTTLED);
		assert_int_equal(machine_call(&x, "good"), RESIL_OK);
		resil_manual_clock_advance(&x.mc, MS);
	}
	assert_true(shed > 50);
	m = pkey(&x, "bad");
	assert_int_equal(m.local_rejects, (uint64_t)shed);
	assert_int_equal(m.backend_rejects, (uint64_t)(100 - shed));
	m = pkey(&x, "good");
	assert_int_equal(m.requests, 100);
	assert_int_equal(m.accepts, 100);
	fx_end(&x);
}

/* A reload that repeats the text keeps every key's throttle; one that
 * changes the throttle's settings, or drops the key, is refused. */
static void
test_keyed_throttle_reload(void **state)
{
	fx x;
	resil_diag diag;
	resil_throttle_metrics m;
	int i;

	(void)state;
	fx_start(&x, thr_text);
	for (i = 0; i < 20; i++)
		(void)call_key(&x, "bad");
	m = pkey(&x, "bad");
	assert_int_equal(m.requests, 20);
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=S\n"
	                     "throttle.key=args\n"
	                     "throttle.k=2\n"
	                     "throttle.window=10s\n"
	                     "throttle.buckets=10\n"
	                     "throttle.seed=7\n"
	                     "timeout=5s\n",
	                     "k.conf", &diag),
	    RESIL_OK);
	assert_null(resil_pipeline_throttle(x.p));
	m = pkey(&x, "bad");
	assert_int_equal(m.requests, 20);
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=S\n"
	                     "throttle.key=args\n"
	                     "throttle.k=3\n"
	                     "throttle.window=10s\n"
	                     "throttle.buckets=10\n"
	                     "throttle.seed=7\n",
	                     "k.conf", &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg,
	    "throttle.key: the throttle.* settings cannot change by reload"));
	assert_int_equal(
	    resil_pipeline_reload_string(x.p, "service=S\n", "k.conf", &diag),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(diag.msg, "throttle.key: cannot change by reload"));
	assert_int_equal(call_key(&x, "good"), RESIL_OK);
	fx_end(&x);
}

static void
test_keyed_throttle_text(void **state)
{
	resil_config *conf;
	const resil_pipeline_config *pc;
	char buf[64];

	(void)state;
	conf = parse_ok("service=S\n"
	                "throttle.key=attachment:tenant\n"
	                "throttle.key.max_keys=500\n"
	                "throttle.key.max_key_len=64\n");
	pc = resil_config_pipeline(conf);
	/* Setting the key turns the stage on. */
	assert_true(pc->throttle_enabled);
	assert_string_equal(pc->keyed[RESIL_KEYED_THROTTLE].key,
	    "attachment:tenant");
	assert_int_equal(pc->keyed[RESIL_KEYED_THROTTLE].max_keys, 500);
	assert_int_equal(pc->keyed[RESIL_KEYED_THROTTLE].max_key_len, 64);
	assert_int_equal(
	    resil_config_get(conf, "throttle.key", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "attachment:tenant");
	assert_int_equal(resil_config_get(
	                     conf, "throttle.key.max_keys", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "500");
	resil_config_free(conf);

	refused("throttle.key=host\n",
	    "k.conf:1: throttle.key: \"host\" is a source of breaker, rate "
	    "limiter and bulkhead families only (a throttle is asked once per "
	    "call, before the selector chose an endpoint)");
	refused("throttle.key=tenant\n",
	    "k.conf:1: throttle.key: \"tenant\" is not a key source "
	    "(method, args, arguments[N], attachment:NAME, host)");
	refused("throttle.key=method\nthrottle.key.max_keys=20000000\n",
	    "k.conf:2: throttle.key.max_keys: 20000000 is out of range "
	    "0..16777216");
	refused("throttle.key=method\nthrottle.key.max_key_len=5000\n",
	    "k.conf:2: throttle.key.max_key_len: 5000 is out of range "
	    "0..4096");
	refused("throttle.key.max_keys=5\n",
	    "k.conf:1: throttle.key.max_keys: needs throttle.key");
	refused("throttle.key=method\nthrottle.enabled=false\n",
	    "k.conf:2: throttle.key: the throttle stage is off "
	    "(throttle.enabled=false): its family would never be asked");
	refused("throttle.key=method\nthrottle.key.override.x=5\n",
	    "k.conf:2: throttle.key.override.x: a throttle family takes no "
	    "overrides (rate limiter and bulkhead families do)");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_throttle_family),
		cmocka_unit_test(test_keyed_throttle_eviction),
		cmocka_unit_test(test_keyed_throttle_refused_c),
		cmocka_unit_test(test_keyed_throttle_pipeline),
		cmocka_unit_test(test_keyed_throttle_machine),
		cmocka_unit_test(test_keyed_throttle_reload),
		cmocka_unit_test(test_keyed_throttle_text),
	};

	return cmocka_run_group_tests_name("keyed_throttle", tests, NULL, NULL);
}

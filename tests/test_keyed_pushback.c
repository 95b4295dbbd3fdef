/*
 * Issue 41 (turn 4): a key's pushback slows that key. With
 * ratelimit.key, a throttled answer with a Retry-After pauses the call's
 * key's rate limiter (its calls but critical ones refused until the
 * pause ends, the paused metric counts them), ratelimit.drain_on_throttled
 * drains that key's limiter; other keys are untouched; the pipeline's
 * pushback event and metrics are as for an unkeyed pushback; no breaker
 * (keyed or not) counts the answer. Both drivers, on the manual clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <resil/call.h>
#include <resil/config.h>
#include <resil/keyed.h>
#include <resil/pipeline.h>
#include <resil/pipeline_keyed.h>
#include <resil/selector.h>

#include "support/machine_invoke.h"

#define MS RESIL_NS_PER_MS
#define T0 (1000 * MS)

typedef struct fx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
	resil_diag diag;
	resil_pipeline_record rec[256];
	resil_pipeline_recorder r;
	int machine;
	const int *rcs; /* what the function answers, attempt by attempt */
	int nrc;
	int ran;
	resil_result res;
	resil_priority prio;
} fx;

static void
fx_start(fx *x, const char *text, int machine)
{
	resil_pipeline_config pc;

	memset(x, 0, sizeof(*x));
	x->machine = machine;
	resil_manual_clock_init(&x->mc, T0);
	if (resil_config_parse_string(
	        &x->conf, text, "svc.conf", NULL, &x->diag) != RESIL_OK)
		fail_msg("config: %s", x->diag.msg);
	pc = *resil_config_pipeline(x->conf);
	pc.clock = resil_manual_clock_hook(&x->mc);
	resil_pipeline_recorder_init(&x->r, x->rec, 256);
	pc.listener = resil_pipeline_recorder_listener;
	pc.listener_ctx = &x->r;
	if (resil_pipeline_new(&x->p, &pc, &x->diag) != RESIL_OK)
		fail_msg("pipeline: %s", x->diag.msg);
}

static void
fx_end(fx *x)
{
	resil_pipeline_free(x->p);
	resil_config_free(x->conf);
}

static int
provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	fx *x = ctx;
	int i = x->ran < x->nrc ? x->ran : x->nrc - 1;

	(void)ep;
	(void)args;
	x->ran++;
	*out = resil_value_int(7);
	return x->rcs[i];
}

/* One call for tenant to its end, through the driver x->machine says. */
static resil_err
call_for(fx *x, const char *tenant)
{
	resil_invocation inv;
	resil_param att[1];
	resil_result *r = &x->res;

	resil_invocation_init(&inv, "getStock");
	inv.priority = x->prio;
	att[0].key = "tenant";
	att[0].value = tenant;
	inv.attachments = att;
	inv.nattachments = 1;
	if (!x->machine) {
		(void)resil_pipeline_invoke_ex(x->p, NULL, &inv, provider, x, r);
	} else {
		machine_invoke(x->p, NULL, &inv, provider, x, &x->mc, r);
	}
	resil_value_free(&r->value);
	return r->err;
}

static resil_pipeline_metrics
pm(fx *x)
{
	resil_pipeline_metrics m;

	assert_int_equal(resil_pipeline_get_metrics(x->p, &m), RESIL_OK);
	return m;
}

static int
has_event(fx *x, resil_stage stage, const char *text)
{
	size_t i;

	for (i = 0; i < x->r.count; i++)
		if (x->rec[i].stage == stage &&
		    strstr(x->rec[i].text, text) != NULL)
			return 1;
	return 0;
}

#define KEYED_RL                               \
	"service=StockService\n"               \
	"ratelimit.enabled=true\n"             \
	"ratelimit.key=attachment:tenant\n"    \
	"ratelimit.rate=10\n"                  \
	"ratelimit.period=1s\n"                \
	"ratelimit.burst=10\n"

/* A Retry-After of 500 ms for tenant a: a's calls are refused locally
 * (RESIL_E_LIMITED, the function not called, the paused metric) until
 * it has passed, then go again; b's go all along; a critical call of a
 * passes the pause. The pushback's event and metric as an unkeyed
 * pushback's. */
static void
key_pauses(int machine)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(500), 0 };
	fx x;

	fx_start(&x, KEYED_RL, machine);
	x.rcs = rcs;
	x.nrc = 2;
	assert_int_equal(call_for(&x, "a"), RESIL_E_THROTTLED);
	assert_int_equal(pm(&x).pushbacks, 1);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "server throttled: Retry-After 500ms, rate limiter paused until "
	    "1500000000"));
	resil_manual_clock_advance(&x.mc, 499 * MS);
	assert_int_equal(call_for(&x, "a"), RESIL_E_LIMITED);
	assert_non_null(strstr(x.res.message, "paused"));
	assert_int_equal(x.ran, 1);
	assert_int_equal(pm(&x).paused, 1);
	/* Another key: untouched. */
	assert_int_equal(call_for(&x, "b"), RESIL_OK);
	assert_int_equal(x.ran, 2);
	/* A critical call passes the pause (its key's limiter decides). */
	x.prio = RESIL_PRIORITY_CRITICAL;
	assert_int_equal(call_for(&x, "a"), RESIL_OK);
	assert_int_equal(x.ran, 3);
	x.prio = RESIL_PRIORITY_UNSET;
	assert_int_equal(call_for(&x, "a"), RESIL_E_LIMITED);
	assert_int_equal(pm(&x).paused, 2);
	resil_manual_clock_advance(&x.mc, 1 * MS);
	assert_int_equal(call_for(&x, "a"), RESIL_OK);
	assert_int_equal(x.ran, 4);
	assert_int_equal(pm(&x).paused, 2);
	assert_int_equal(pm(&x).pushbacks, 1);
	fx_end(&x);
}

static void
test_keyed_pushback_pauses_key_blocking(void **state)
{
	(void)state;
	key_pauses(0);
}

static void
test_keyed_pushback_pauses_key_machine(void **state)
{
	(void)state;
	key_pauses(1);
}

/* A longer pause is never shortened by a shorter one; RESIL_RC_THROTTLED
 * without a Retry-After pauses nothing. */
static void
test_keyed_pushback_never_shortened(void **state)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(800),
		RESIL_RC_THROTTLED_MS(100), 0 };
	static const int bare[] = { RESIL_RC_THROTTLED, 0 };
	fx x;

	(void)state;
	fx_start(&x, KEYED_RL, 0);
	x.rcs = rcs;
	x.nrc = 3;
	x.prio = RESIL_PRIORITY_CRITICAL; /* passes: the second answer */
	assert_int_equal(call_for(&x, "a"), RESIL_E_THROTTLED);
	assert_int_equal(call_for(&x, "a"), RESIL_E_THROTTLED);
	x.prio = RESIL_PRIORITY_UNSET;
	resil_manual_clock_advance(&x.mc, 799 * MS);
	assert_int_equal(call_for(&x, "a"), RESIL_E_LIMITED);
	resil_manual_clock_advance(&x.mc, 1 * MS);
	assert_int_equal(call_for(&x, "a"), RESIL_OK);
	x.rcs = bare;
	x.ran = 0;
	x.nrc = 2;
	assert_int_equal(call_for(&x, "c"), RESIL_E_THROTTLED);
	assert_int_equal(call_for(&x, "c"), RESIL_OK);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "server throttled: no Retry-After"));
	fx_end(&x);
}

/* ratelimit.drain_on_throttled per key: a's limiter drained (9 permits
 * left of its 10), its next call waits for the next permit (100 ms at
 * 10/s); b keeps its 10. */
static void
key_drains(int machine)
{
	static const int bare[] = { RESIL_RC_THROTTLED, 0 };
	fx x;
	int i;

	fx_start(&x, KEYED_RL "ratelimit.drain_on_throttled=true\n", machine);
	x.rcs = bare;
	x.nrc = 2;
	assert_int_equal(call_for(&x, "a"), RESIL_E_THROTTLED);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "server throttled: no Retry-After, rate limiter drained (9 "
	    "permits)"));
	assert_int_equal(call_for(&x, "a"), RESIL_E_LIMITED);
	assert_int_equal(x.ran, 1);
	for (i = 0; i < 10; i++)
		assert_int_equal(call_for(&x, "b"), RESIL_OK);
	assert_int_equal(call_for(&x, "b"), RESIL_E_LIMITED);
	resil_manual_clock_advance(&x.mc, 100 * MS - 1);
	assert_int_equal(call_for(&x, "a"), RESIL_E_LIMITED);
	resil_manual_clock_advance(&x.mc, 1);
	assert_int_equal(call_for(&x, "a"), RESIL_OK);
	fx_end(&x);
}

static void
test_keyed_pushback_drains_key_blocking(void **state)
{
	(void)state;
	key_drains(0);
}

static void
test_keyed_pushback_drains_key_machine(void **state)
{
	(void)state;
	key_drains(1);
}

/* At most RESIL__KPAUSE_MAX (1024) keys paused at once: the 1025th key's
 * pushback is not kept as a pause: its limiter is drained instead and
 * the event says so; once the pauses end, keys pause again. */
static void
test_keyed_pushback_pauses_bounded(void **state)
{
	static const int rcs[] = { RESIL_RC_THROTTLED_MS(500) };
	char key[16];
	fx x;
	int i;

	(void)state;
	fx_start(&x, KEYED_RL, 0);
	x.rcs = rcs;
	x.nrc = 1;
	for (i = 0; i < 1025; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		x.r.count = 0; /* the recorder keeps 256 */
		assert_int_equal(call_for(&x, key), RESIL_E_THROTTLED);
	}
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "rate limiter drained (9 permits), key not paused (1024 keys "
	    "paused already)"));
	assert_int_equal(call_for(&x, "k0"), RESIL_E_LIMITED);   /* paused */
	assert_int_equal(call_for(&x, "k1023"), RESIL_E_LIMITED); /* paused */
	assert_int_equal(pm(&x).paused, 2);
	/* k1024: drained, not paused: refused by its limiter. */
	assert_int_equal(call_for(&x, "k1024"), RESIL_E_LIMITED);
	assert_int_equal(pm(&x).paused, 2);
	resil_manual_clock_advance(&x.mc, 500 * MS);
	x.r.count = 0;
	assert_int_equal(call_for(&x, "k1024"), RESIL_E_THROTTLED);
	assert_true(has_event(&x, RESIL_STAGE_THROTTLE,
	    "rate limiter paused until 2000000000"));
	assert_false(has_event(&x, RESIL_STAGE_THROTTLE, "not paused"));
	fx_end(&x);
}

/* Two threads push back on their own keys (400 pauses each, the table
 * made and remade while the other reads it), then every key of both is
 * paused and a key nobody pushed back is not (TSan: the table's lock). */
typedef struct tharg {
	fx *x;
	int id;
	int throttled;
} tharg;

static int
th_provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	(void)out;
	return RESIL_RC_THROTTLED_MS(60000);
}

static void *
th_run(void *arg)
{
	tharg *a = arg;
	int i;

	for (i = 0; i < 400; i++) {
		resil_invocation inv;
		resil_param att[1];
		resil_result r;
		char key[16];

		snprintf(key, sizeof(key), "t%d-%d", a->id, i);
		resil_invocation_init(&inv, "getStock");
		att[0].key = "tenant";
		att[0].value = key;
		inv.attachments = att;
		inv.nattachments = 1;
		a->throttled += resil_pipeline_invoke_ex(a->x->p, NULL, &inv,
		                    th_provider, NULL, &r) == RESIL_E_THROTTLED;
		resil_result_free(&r);
	}
	return NULL;
}

static void
test_keyed_pushback_threads(void **state)
{
	static const int ok[] = { 0 };
	pthread_t t[2];
	tharg a[2];
	char key[16];
	fx x;
	int i, j;

	(void)state;
	fx_start(&x, KEYED_RL, 0);
	for (i = 0; i < 2; i++) {
		a[i].x = &x;
		a[i].id = i;
		a[i].throttled = 0;
		assert_int_equal(pthread_create(&t[i], NULL, th_run, &a[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(a[i].throttled, 400);
	}
	x.rcs = ok;
	x.nrc = 1;
	for (i = 0; i < 2; i++)
		for (j = 0; j < 400; j += 7) {
			snprintf(key, sizeof(key), "t%d-%d", i, j);
			assert_int_equal(call_for(&x, key), RESIL_E_LIMITED);
		}
	assert_int_equal(x.ran, 0);
	assert_int_equal(call_for(&x, "nobody"), RESIL_OK);
	assert_int_equal(pm(&x).pushbacks, 800);
	fx_end(&x);
}

/* ratelimit.key=host: the endpoint that answered with a Retry-After is
 * paused (the selector's next pick goes elsewhere: its key refuses the
 * attempt as a spent limit does), the other endpoint is untouched; after
 * the Retry-After the endpoint is used again. */
typedef struct hfx {
	int e0, e1;
} hfx;

static int
host_provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	hfx *h = ctx;

	(void)args;
	*out = resil_value_int(7);
	if (strcmp(ep->address, "e0:1") == 0) {
		h->e0++;
		return RESIL_RC_THROTTLED_MS(500);
	}
	h->e1++;
	return 0;
}

static void
test_keyed_pushback_pauses_host(void **state)
{
	resil_endpoint_spec spec[2];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_directory *d = NULL;
	resil_selector *sel = NULL;
	resil_config *conf = NULL;
	resil_pipeline *p = NULL;
	resil_manual_clock mc;
	resil_diag diag;
	hfx h;
	int i, throttled = 0;

	(void)state;
	memset(&h, 0, sizeof(h));
	resil_manual_clock_init(&mc, T0);
	if (resil_config_parse_string(&conf,
	        "service=StockService\n"
	        "cluster=failfast\n"
	        "ratelimit.enabled=true\n"
	        "ratelimit.key=host\n"
	        "ratelimit.rate=1000\nratelimit.period=1s\n"
	        "ratelimit.burst=1000\n",
	        "svc.conf", NULL, &diag) != RESIL_OK)
		fail_msg("config: %s", diag.msg);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&mc);
	(void)resil_config_directory(conf, &dc);
	assert_int_equal(resil_directory_new(&d, &dc, &diag), RESIL_OK);
	(void)resil_config_selector(conf, &sc);
	assert_int_equal(resil_selector_new(&sel, d, &sc, &diag), RESIL_OK);
	spec[0] = resil_endpoint_spec_default("e0:1");
	spec[1] = resil_endpoint_spec_default("e1:1");
	assert_int_equal(resil_directory_push(d, spec, 2, &diag), RESIL_OK);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	pc.selector = sel;
	if (resil_pipeline_new(&p, &pc, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
	/* Until e0 has answered once (its pushback). */
	for (i = 0; i < 50 && h.e0 == 0; i++) {
		resil_invocation inv;
		resil_result r;

		resil_invocation_init(&inv, "getStock");
		throttled += resil_pipeline_invoke_ex(
		                 p, NULL, &inv, host_provider, &h, &r) ==
		    RESIL_E_THROTTLED;
		resil_result_free(&r);
	}
	assert_int_equal(h.e0, 1);
	assert_int_equal(throttled, 1);
	/* Paused: every call goes to e1 for the next 499 ms. */
	resil_manual_clock_advance(&mc, 499 * MS);
	for (i = 0; i < 30; i++) {
		resil_invocation inv;
		resil_result r;

		resil_invocation_init(&inv, "getStock");
		assert_int_equal(resil_pipeline_invoke_ex(
		                     p, NULL, &inv, host_provider, &h, &r),
		    RESIL_OK);
		resil_result_free(&r);
	}
	assert_int_equal(h.e0, 1);
	/* Over: e0 is picked again. */
	resil_manual_clock_advance(&mc, 1 * MS);
	for (i = 0; i < 30 && h.e0 == 1; i++) {
		resil_invocation inv;
		resil_result r;

		resil_invocation_init(&inv, "getStock");
		(void)resil_pipeline_invoke_ex(
		    p, NULL, &inv, host_provider, &h, &r);
		resil_result_free(&r);
	}
	assert_int_equal(h.e0, 2);
	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(d);
	resil_config_free(conf);
}

/* Key a's breaker state and failures (keyed breaker family). */
static void
kb_visit(const void *key, size_t len, const resil_keyed_instance *inst,
    void *ctx)
{
	resil_breaker_metrics *m = ctx;

	(void)key;
	(void)len;
	assert_int_equal(resil_breaker_get_metrics(inst->breaker, m), RESIL_OK);
}

/* Ten throttled answers never open a breaker that opens at two failures
 * in a row, keyed (breaker.key) or not; the same answers as failures
 * open it. */
static void
breaker_ignores(int keyed_breaker, int machine)
{
	static const int thr[] = { RESIL_RC_THROTTLED };
	static const int bad[] = { 111 };
	resil_breaker_metrics m;
	char text[512];
	fx x;
	int i;

	snprintf(text, sizeof(text),
	    KEYED_RL "breaker.enabled=true\n"
	             "breaker.consecutive_failures=2\n"
	             "breaker.failure_rate=0\n%s",
	    keyed_breaker ? "breaker.key=attachment:tenant\n" : "");
	fx_start(&x, text, machine);
	x.rcs = thr;
	x.nrc = 1;
	for (i = 0; i < 10; i++)
		assert_int_equal(call_for(&x, "a"), RESIL_E_THROTTLED);
	memset(&m, 0, sizeof(m));
	if (keyed_breaker)
		assert_int_equal(
		    resil_keyed_with(resil_pipeline_keyed(x.p,
		                         RESIL_KEYED_BREAKER),
		        "a", 1, kb_visit, &m),
		    RESIL_OK);
	else
		assert_int_equal(resil_breaker_get_metrics(resil_pipeline_breaker(
		                                               x.p, "getStock"),
		                     &m),
		    RESIL_OK);
	assert_int_equal(m.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(m.failures, 0);
	x.rcs = bad;
	resil_manual_clock_advance(&x.mc, 2 * RESIL_NS_PER_SEC); /* refilled */
	for (i = 0; i < 2; i++)
		assert_int_equal(call_for(&x, "a"), RESIL_E_CALL);
	assert_int_equal(call_for(&x, "a"), RESIL_E_OPEN);
	fx_end(&x);
}

static void
test_keyed_pushback_breaker_ignores(void **state)
{
	(void)state;
	breaker_ignores(0, 0);
	breaker_ignores(0, 1);
	breaker_ignores(1, 0);
	breaker_ignores(1, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_pushback_pauses_key_blocking),
		cmocka_unit_test(test_keyed_pushback_pauses_key_machine),
		cmocka_unit_test(test_keyed_pushback_never_shortened),
		cmocka_unit_test(test_keyed_pushback_drains_key_blocking),
		cmocka_unit_test(test_keyed_pushback_drains_key_machine),
		cmocka_unit_test(test_keyed_pushback_pauses_bounded),
		cmocka_unit_test(test_keyed_pushback_pauses_host),
		cmocka_unit_test(test_keyed_pushback_breaker_ignores),
		cmocka_unit_test(test_keyed_pushback_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

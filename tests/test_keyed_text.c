/*
 * Issue 41: keyed families named in configuration text (breaker.key=,
 * ratelimit.key=, bulkhead.key=, .key.max_keys, .key.max_key_len,
 * .key.override.VALUE), the endpoint's host as a key source under a
 * cluster, a reload of a text-built keyed pipeline, and the call
 * machine's gate (resil_call_start: admitted at start, recorded once at
 * DONE, given back on cancel). Every clock is a manual one.
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
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/pipeline_keyed.h>
#include <resil/selector.h>

#define MS RESIL_NS_PER_MS

/* ---- the text ---- */

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

static void
test_keyed_text_parse(void **state)
{
	resil_config *conf;
	const resil_pipeline_config *pc;
	char buf[64];

	(void)state;
	conf =
	    parse_ok("service=S\n"
	             "breaker.key=arguments[0]\n"
	             "breaker.key.max_keys=500\n"
	             "breaker.key.max_key_len=64\n"
	             "ratelimit.key=attachment:tenant\n"
	             "ratelimit.rate=2\n"
	             "ratelimit.burst=2\n"
	             "ratelimit.key.override.VIP=1000/s\n"
	             "ratelimit.key.override.gold.example=50/100ms,burst=10\n"
	             "bulkhead.key=method\n"
	             "bulkhead.key.override.getStock=3\n"
	             "bulkhead.key.override.10.0.0.1:20880=7\n");
	pc = resil_config_pipeline(conf);
	/* Setting a key turns its stage on (ratelimit, bulkhead). */
	assert_true(pc->breaker_enabled && pc->ratelimit_enabled &&
	    pc->bulkhead_enabled);
	assert_string_equal(
	    pc->keyed[RESIL_KEYED_BREAKER].key, "arguments[0]");
	assert_int_equal(pc->keyed[RESIL_KEYED_BREAKER].max_keys, 500);
	assert_int_equal(pc->keyed[RESIL_KEYED_BREAKER].max_key_len, 64);
	assert_int_equal(pc->keyed[RESIL_KEYED_BREAKER].n_overrides, 0);
	assert_string_equal(
	    pc->keyed[RESIL_KEYED_RATELIMIT].key, "attachment:tenant");
	assert_int_equal(pc->keyed[RESIL_KEYED_RATELIMIT].n_overrides, 2);
	{
		const resil_keyed_override *o =
		    pc->keyed[RESIL_KEYED_RATELIMIT].overrides;

		assert_int_equal(o[0].key_len, 3);
		assert_memory_equal(o[0].key, "VIP", 3);
		assert_int_equal(o[0].rate, 1000);
		assert_true(o[0].period_ns == RESIL_NS_PER_SEC);
		assert_int_equal(o[0].burst, 0); /* the family's */
		assert_memory_equal(o[1].key, "gold.example", 12);
		assert_int_equal(o[1].rate, 50);
		assert_true(o[1].period_ns == 100 * MS);
		assert_int_equal(o[1].burst, 10);
	}
	assert_string_equal(pc->keyed[RESIL_KEYED_BULKHEAD].key, "method");
	assert_int_equal(pc->keyed[RESIL_KEYED_BULKHEAD].n_overrides, 2);
	assert_int_equal(
	    pc->keyed[RESIL_KEYED_BULKHEAD].overrides[0].max_concurrent, 3);
	assert_int_equal(pc->keyed[RESIL_KEYED_BULKHEAD].overrides[1].key_len,
	    strlen("10.0.0.1:20880"));
	assert_int_equal(
	    pc->keyed[RESIL_KEYED_BULKHEAD].overrides[1].max_concurrent, 7);
	/* Read back as given. */
	assert_int_equal(
	    resil_config_get(conf, "breaker.key", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "arguments[0]");
	assert_int_equal(
	    resil_config_get(conf, "breaker.key.max_keys", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "500");
	assert_int_equal(resil_config_get(conf, "ratelimit.key.override.VIP",
	                     buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "1000/s");
	assert_int_equal(
	    resil_config_get(conf, "bulkhead.key", buf, sizeof(buf)),
	    RESIL_OK);
	assert_string_equal(buf, "method");
	/* resil_config_set: one more override, then a bad one (unchanged). */
	{
		resil_diag diag;

		assert_int_equal(
		    resil_config_set(
		        conf, "ratelimit.key.override.acme", "5/m", &diag),
		    RESIL_OK);
		pc = resil_config_pipeline(conf);
		assert_int_equal(
		    pc->keyed[RESIL_KEYED_RATELIMIT].n_overrides, 3);
		assert_true(
		    pc->keyed[RESIL_KEYED_RATELIMIT].overrides[2].period_ns ==
		    60 * RESIL_NS_PER_SEC);
		assert_int_equal(
		    resil_config_set(
		        conf, "ratelimit.key.override.acme", "5/x", &diag),
		    RESIL_E_INVAL);
		assert_non_null(
		    strstr(diag.msg, "ratelimit.key.override.acme"));
	}
	resil_config_free(conf);
}

/* The example of docs/keyed.md, "In the text", parses. */
static void
test_keyed_text_doc_example(void **state)
{
	resil_config *conf;
	const resil_pipeline_config *pc;

	(void)state;
	conf =
	    parse_ok("service=Orders\n"
	             "loadbalance=roundrobin\n"
	             "# one breaker per endpoint\n"
	             "breaker.key=host\n"
	             "breaker.consecutive_failures=5\n"
	             "breaker.open_wait=10s\n"
	             "# 20 calls a second per tenant, 1000 for one of them\n"
	             "ratelimit.key=attachment:tenant\n"
	             "ratelimit.rate=20\n"
	             "ratelimit.burst=20\n"
	             "ratelimit.key.override.VIP=1000/s,burst=1000\n"
	             "ratelimit.key.max_keys=100000\n");
	pc = resil_config_pipeline(conf);
	assert_string_equal(pc->keyed[RESIL_KEYED_BREAKER].key, "host");
	assert_int_equal(pc->keyed[RESIL_KEYED_RATELIMIT].max_keys, 100000);
	assert_int_equal(
	    pc->keyed[RESIL_KEYED_RATELIMIT].overrides[0].burst, 1000);
	resil_config_free(conf);
}

static void
test_keyed_text_refused(void **state)
{
	(void)state;
	refused("breaker.key=argument[0]\n",
	    "k.conf:1: breaker.key: \"argument[0]\" is not a key source "
	    "(method, args, arguments[N], attachment:NAME, host)");
	refused("breaker.key=arguments[300]\n",
	    "k.conf:1: breaker.key: \"arguments[300]\": the index of "
	    "arguments[N] must be 0..255");
	refused("ratelimit.key=attachment:\n",
	    "k.conf:1: ratelimit.key: \"attachment:\": an attachment's name "
	    "is 1..128 bytes");
	refused("breaker.key=method\nbreaker.key.max_keys=20000000\n",
	    "k.conf:2: breaker.key.max_keys: 20000000 is out of range "
	    "0..16777216");
	refused("breaker.key=method\nbreaker.key.max_key_len=x\n",
	    "k.conf:2: breaker.key.max_key_len: \"x\" is not an unsigned "
	    "integer");
	refused("breaker.key=method\nbreaker.key.override.x=5\n",
	    "k.conf:2: breaker.key.override.x: a breaker family takes no "
	    "overrides (rate limiter and bulkhead families do)");
	refused("ratelimit.key=method\nratelimit.key.override.VIP=abc\n",
	    "k.conf:2: ratelimit.key.override.VIP: \"abc\" is not an unsigned "
	    "integer (the rate)");
	refused("ratelimit.key=method\nratelimit.key.override.VIP=0/s\n",
	    "k.conf:2: ratelimit.key.override.VIP: the rate 0 is out of range "
	    "1..4294967295");
	refused("ratelimit.key=method\nratelimit.key.override.VIP=10/sec\n",
	    "k.conf:2: ratelimit.key.override.VIP: \"1sec\": unknown unit "
	    "\"sec\" (did you mean 1s?)");
	refused("ratelimit.key=method\nratelimit.key.override.VIP=10/\n",
	    "k.conf:2: ratelimit.key.override.VIP: \"10/\": the period after "
	    "'/' is a duration (1s, 100ms, or a unit alone: s, ms, m, h)");
	refused("ratelimit.key=method\n"
	        "ratelimit.key.override.VIP=10/s,bursty=3\n",
	    "k.conf:2: ratelimit.key.override.VIP: \"10/s,bursty=3\": after "
	    "',' only burst=N (RATE[/PERIOD][,burst=N])");
	refused("bulkhead.key=method\nbulkhead.key.override.a=0\n",
	    "k.conf:2: bulkhead.key.override.a: the max_concurrent 0 is out "
	    "of range 1..1073741824");
	refused("bulkhead.key=method\nbulkhead.key.override.=3\n",
	    "k.conf:2: bulkhead.key.override.: the value after "
	    "bulkhead.key.override. is empty");
	/* The family settings without the family. */
	refused("ratelimit.rate=5\nratelimit.key.override.VIP=10\n",
	    "k.conf:2: ratelimit.key.override.VIP: needs ratelimit.key (the "
	    "family the value is in)");
	refused("breaker.failure_rate=50\nbreaker.key.max_keys=10\n",
	    "k.conf:2: breaker.key.max_keys: needs breaker.key");
	/* Against the rest of the text. */
	refused("breaker.key=method\nbreaker.enabled=false\n",
	    "k.conf:2: breaker.key: the breaker stage is off "
	    "(breaker.enabled=false): its family would never be asked");
	refused("breaker.key=method\nbreaker.per_method=true\n",
	    "k.conf:2: breaker.key: not with breaker.per_method (a breaker "
	    "per "
	    "method: breaker.key=method)");
	refused("bulkhead.key=method\nbulkhead.max_wait=10\n"
	        "bulkhead.queue=4\n",
	    "k.conf:3: bulkhead.key: a keyed bulkhead does not wait "
	    "(bulkhead.max_wait, bulkhead.queue)");
	refused("breaker.key=method\nbreaker.shared=shm:r/b\n",
	    "k.conf:2: breaker.key: not with a shared or fleet breaker "
	    "(breaker.shared, breaker.fleet)");
	/* With ratelimit.fleet: taken (issue 41, h3; test_fleet_keyed). */
	refused("ratelimit.key=method\nratelimit.shared=shm:r/x\n",
	    "k.conf:2: ratelimit.key: not with a shared rate limiter "
	    "(ratelimit.shared)");
	refused("ratelimit.key=method\nratelimit.reserve.critical=5\n",
	    "k.conf:2: ratelimit.key: a keyed rate limiter keeps no class "
	    "reserves (ratelimit.reserve.*)");
	/* ratelimit.drain_on_throttled: taken, per key (issue 41, turn 4;
	 * test_keyed_pushback). */
	refused("breaker.key.maxkeys=3\n",
	    "k.conf:1: breaker.key.maxkeys: unknown key (did you mean "
	    "breaker.key.max_keys?)");
}

/* ---- a text-built keyed pipeline ---- */

typedef struct dep {
	int dead[8]; /* endpoint i always fails */
	int calls[8];
} dep;

static int
dep_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	dep *d = ctx;
	int i = ep->address[1] - '0';

	(void)args;
	(void)out;
	d->calls[i]++;
	return d->dead[i] ? 5 : 0;
}

typedef struct cl {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	dep dp;
} cl;

static void
cl_start(cl *x, const char *text)
{
	resil_pipeline_config cfg;
	resil_selector_config sc;
	resil_directory_config dc;
	resil_endpoint_spec specs[3];
	resil_diag diag;
	int k;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000 * MS);
	x->conf = parse_ok(text);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&x->mc);
	(void)resil_config_directory(x->conf, &dc);
	(void)resil_config_selector(x->conf, &sc);
	assert_int_equal(resil_directory_new(&x->d, &dc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_selector_new(&x->sel, x->d, &sc, &diag), RESIL_OK);
	for (k = 0; k < 3; k++) {
		static const char *const addr[] = { "e0:1", "e1:1", "e2:1" };

		specs[k] = resil_endpoint_spec_default(addr[k]);
	}
	assert_int_equal(
	    resil_directory_push(x->d, specs, 3, &diag), RESIL_OK);
	cfg = *resil_config_pipeline(x->conf);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.selector = x->sel;
	if (resil_pipeline_new(&x->p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
}

static void
cl_end(cl *x)
{
	resil_pipeline_free(x->p);
	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	resil_config_free(x->conf);
}

static resil_err
cl_call(cl *x)
{
	resil_args a = { "get", NULL, 0 };
	resil_result r;
	resil_err err;

	err = resil_pipeline_invoke(x->p, NULL, &a, dep_call, &x->dp, &r);
	resil_result_free(&r);
	return err;
}

typedef struct bstate {
	int state;
	resil_breaker_metrics m;
} bstate;

static void
visit(const void *key, size_t len, const resil_keyed_instance *in, void *ctx)
{
	bstate *s = ctx;

	(void)key;
	(void)len;
	s->state = (int)resil_breaker_get_state(in->breaker);
	(void)resil_breaker_get_metrics(in->breaker, &s->m);
}

static bstate
key_state(resil_pipeline *p, const char *key)
{
	bstate s;

	memset(&s, 0, sizeof(s));
	s.state = -1;
	(void)resil_keyed_with(resil_pipeline_keyed(p, RESIL_KEYED_BREAKER),
	    key, strlen(key), visit, &s);
	return s;
}

static const char host_text[] = "service=S\n"
                                "loadbalance=roundrobin\n"
                                "retries=2\n"
                                "breaker.key=host\n"
                                "breaker.consecutive_failures=2\n"
                                "breaker.failure_rate=0\n"
                                "breaker.open_wait=10s\n";

/* breaker.key=host: one breaker per endpoint, the dead one's opens, the
 * others stay CLOSED, and the pipeline has no service breaker. */
static void
test_keyed_text_host_breaker(void **state)
{
	cl x;
	int i, before;

	(void)state;
	cl_start(&x, host_text);
	assert_non_null(resil_pipeline_keyed(x.p, RESIL_KEYED_BREAKER));
	/* The family stands in for the pipeline's own breaker. */
	assert_null(resil_pipeline_breaker(x.p, NULL));
	x.dp.dead[1] = 1;
	for (i = 0; i < 12; i++) {
		assert_int_equal(cl_call(&x), RESIL_OK); /* failover */
		resil_manual_clock_advance(&x.mc, MS);
	}
	assert_int_equal(key_state(x.p, "e1:1").state, RESIL_BREAKER_OPEN);
	assert_int_equal(key_state(x.p, "e0:1").state, RESIL_BREAKER_CLOSED);
	assert_int_equal(key_state(x.p, "e2:1").state, RESIL_BREAKER_CLOSED);
	assert_true(key_state(x.p, "e0:1").m.successes > 0);
	assert_int_equal(key_state(x.p, "e0:1").m.failures, 0);
	assert_int_equal(key_state(x.p, "e1:1").m.failures, 2);
	/* Open: e1 is left out of the calls (no more calls reach it). */
	before = x.dp.calls[1];
	for (i = 0; i < 9; i++)
		assert_int_equal(cl_call(&x), RESIL_OK);
	assert_int_equal(x.dp.calls[1], before);
	assert_true(key_state(x.p, "e1:1").m.rejections > 0);
	/* Every endpoint dead and open: the call ends with the refusal. */
	x.dp.dead[0] = x.dp.dead[2] = 1;
	for (i = 0; i < 6; i++)
		(void)cl_call(&x);
	assert_int_equal(key_state(x.p, "e0:1").state, RESIL_BREAKER_OPEN);
	assert_int_equal(key_state(x.p, "e2:1").state, RESIL_BREAKER_OPEN);
	{
		resil_args a = { "get", NULL, 0 };
		resil_result r;

		assert_int_equal(
		    resil_pipeline_invoke(x.p, NULL, &a, dep_call, &x.dp, &r),
		    RESIL_E_OPEN);
		assert_non_null(strstr(r.message,
		    "the key's breaker refused every endpoint (breaker.key "
		    "has the host)"));
		resil_result_free(&r);
	}
	cl_end(&x);
}

/* The same host family through the call machine (the event loop runs
 * each attempt on the endpoint the step names). */
static void
test_keyed_text_host_machine(void **state)
{
	cl x;
	int i;

	(void)state;
	cl_start(&x, host_text);
	x.dp.dead[2] = 1;
	for (i = 0; i < 12; i++) {
		resil_call c;
		resil_call_next st;
		resil_result r;
		resil_args a = { "get", NULL, 0 };
		uint64_t now = resil_manual_clock_now(&x.mc);

		assert_int_equal(
		    resil_call_start(&c, x.p, NULL, &a, &r, now, &st),
		    RESIL_OK);
		while (st.action != RESIL_CALL_DONE) {
			assert_int_equal(st.action, RESIL_CALL_RUN);
			assert_non_null(st.endpoint);
			assert_int_equal(
			    resil_call_report(&c, st.attempt,
			        dep_call(&x.dp, st.endpoint, &a, NULL), NULL,
			        now),
			    RESIL_OK);
			assert_int_equal(
			    resil_call_step(&c, now, &st), RESIL_OK);
		}
		assert_int_equal(r.err, RESIL_OK);
		resil_result_free(&r);
		resil_manual_clock_advance(&x.mc, MS);
	}
	assert_int_equal(key_state(x.p, "e2:1").state, RESIL_BREAKER_OPEN);
	assert_int_equal(key_state(x.p, "e0:1").state, RESIL_BREAKER_CLOSED);
	assert_int_equal(key_state(x.p, "e1:1").state, RESIL_BREAKER_CLOSED);
	cl_end(&x);
}

/* A host family needs a selector. */
static void
test_keyed_text_host_needs_selector(void **state)
{
	resil_config *conf = parse_ok(host_text);
	resil_pipeline *p = NULL;
	resil_diag diag;

	(void)state;
	assert_int_equal(
	    resil_pipeline_new(&p, resil_config_pipeline(conf), &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "breaker.key: host is the endpoint the selector chose: the "
	    "pipeline has no selector");
	assert_null(p);
	resil_config_free(conf);
}

/* ---- without a selector: args, attachments, overrides, reload ---- */

typedef struct fx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
	int ran;
} fx;

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

/* Fails for the key "bad". */
static int
fn(void *ctx, const resil_args *args, resil_value *out)
{
	fx *x = ctx;

	(void)out;
	x->ran++;
	return args->len == 3 && memcmp(args->data, "bad", 3) == 0 ? 9 : 0;
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

static const char args_text[] = "service=S\n"
                                "breaker.key=args\n"
                                "breaker.consecutive_failures=2\n"
                                "breaker.failure_rate=0\n";

static void
test_keyed_text_args_breaker(void **state)
{
	fx x;
	int i;

	(void)state;
	fx_start(&x, args_text);
	assert_int_equal(call_key(&x, "bad"), RESIL_E_CALL);
	assert_int_equal(call_key(&x, "bad"), RESIL_E_CALL);
	assert_int_equal(call_key(&x, "bad"), RESIL_E_OPEN);
	for (i = 0; i < 5; i++)
		assert_int_equal(call_key(&x, "good"), RESIL_OK);
	assert_int_equal(key_state(x.p, "bad").state, RESIL_BREAKER_OPEN);
	assert_int_equal(key_state(x.p, "good").state, RESIL_BREAKER_CLOSED);
	assert_int_equal(x.ran, 7);
	fx_end(&x);
}

static int
efn(void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ep;
	return fn(ctx, args, out);
}

static resil_err
invoke_tenant(fx *x, const char *tenant)
{
	resil_invocation inv;
	resil_param att[1];
	resil_result r;
	resil_err err;

	resil_invocation_init(&inv, "get");
	att[0].key = "tenant";
	att[0].value = tenant;
	inv.attachments = att;
	inv.nattachments = 1;
	err = resil_pipeline_invoke_ex(x->p, NULL, &inv, efn, x, &r);
	resil_result_free(&r);
	return err;
}

/* ratelimit.key=attachment:tenant with a hot value of its own. */
static void
test_keyed_text_ratelimit_override(void **state)
{
	fx x;
	int i, acme = 0, vip = 0;

	(void)state;
	fx_start(&x,
	    "service=S\n"
	    "ratelimit.key=attachment:tenant\n"
	    "ratelimit.rate=1\n"
	    "ratelimit.burst=1\n"
	    "ratelimit.key.override.vip=100/s,burst=100\n");
	for (i = 0; i < 5; i++) {
		acme += invoke_tenant(&x, "acme") == RESIL_OK;
		vip += invoke_tenant(&x, "vip") == RESIL_OK;
	}
	assert_int_equal(acme, 1);
	assert_int_equal(vip, 5);
	assert_int_equal(invoke_tenant(&x, "acme"), RESIL_E_LIMITED);
	fx_end(&x);
}

/* A reload keeps a text-built family when the text repeats it, and is
 * refused, naming the key, when it would change or drop it. */
static void
test_keyed_text_reload(void **state)
{
	fx x;
	resil_diag diag;

	(void)state;
	fx_start(&x, args_text);
	assert_int_equal(call_key(&x, "bad"), RESIL_E_CALL);
	assert_int_equal(call_key(&x, "bad"), RESIL_E_CALL);
	assert_int_equal(key_state(x.p, "bad").state, RESIL_BREAKER_OPEN);
	/* The same text, and another key: taken; the family kept. */
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=S\n"
	                     "breaker.key=args\n"
	                     "breaker.consecutive_failures=2\n"
	                     "breaker.failure_rate=0\n"
	                     "timeout=5s\n",
	                     "k.conf", &diag),
	    RESIL_OK);
	assert_int_equal(key_state(x.p, "bad").state, RESIL_BREAKER_OPEN);
	assert_null(resil_pipeline_breaker(x.p, NULL));
	assert_int_equal(call_key(&x, "bad"), RESIL_E_OPEN);
	/* Another source. */
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=S\n"
	                     "breaker.key=method\n"
	                     "breaker.consecutive_failures=2\n"
	                     "breaker.failure_rate=0\n",
	                     "k.conf", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "k.conf:2: breaker.key: cannot change by reload (its source, "
	    "bounds and overrides are fixed when the pipeline is created; "
	    "build a new pipeline to change them)");
	/* Every key's settings. */
	assert_int_equal(resil_pipeline_reload_string(x.p,
	                     "service=S\n"
	                     "breaker.key=args\n"
	                     "breaker.consecutive_failures=3\n"
	                     "breaker.failure_rate=0\n",
	                     "k.conf", &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg,
	    "breaker.key: the breaker.* settings cannot change by reload"));
	/* Dropped. */
	assert_int_equal(
	    resil_pipeline_reload_string(x.p, "service=S\n", "k.conf", &diag),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(diag.msg, "breaker.key: cannot change by reload"));
	/* Nothing changed. */
	assert_int_equal(call_key(&x, "bad"), RESIL_E_OPEN);
	assert_int_equal(call_key(&x, "good"), RESIL_OK);
	fx_end(&x);
}

/* ---- the call machine's gate ---- */

/* One call through the machine: attempts answer rc; *r kept for the
 * caller, the call's start code returned in *start. */
static resil_err
machine_call(fx *x, const char *key, int rc, resil_result *r)
{
	resil_call c;
	resil_call_next st;
	resil_args a = { "get", key, strlen(key) };
	uint64_t now = resil_manual_clock_now(&x->mc);
	resil_err err;

	err = resil_call_start(&c, x->p, NULL, &a, r, now, &st);
	if (err != RESIL_OK)
		return err;
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			x->ran++;
			assert_int_equal(
			    resil_call_report(&c, st.attempt, rc, NULL, now),
			    RESIL_OK);
		} else {
			now = st.deadline;
		}
		assert_int_equal(resil_call_step(&c, now, &st), RESIL_OK);
	}
	return r->err;
}

/* The machine gates as the blocking driver: a bad key opens alone, once
 * per call (retries inside count one outcome), refused at the start. */
static void
test_keyed_machine_breaker(void **state)
{
	fx x;
	resil_result r;

	(void)state;
	fx_start(&x,
	    "service=S\n"
	    "breaker.key=args\n"
	    "breaker.consecutive_failures=2\n"
	    "breaker.failure_rate=0\n"
	    "retry.max_attempts=3\n"
	    "retry.delay=0\n");
	assert_int_equal(machine_call(&x, "bad", 9, &r), RESIL_E_CALL);
	assert_int_equal(r.attempts, 3);
	resil_result_free(&r);
	assert_int_equal(x.ran, 3);
	/* Three attempts, one failure for the key. */
	assert_int_equal(key_state(x.p, "bad").m.failures, 1);
	assert_int_equal(key_state(x.p, "bad").state, RESIL_BREAKER_CLOSED);
	assert_int_equal(machine_call(&x, "bad", 9, &r), RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(key_state(x.p, "bad").state, RESIL_BREAKER_OPEN);
	/* Refused at its start: DONE at once, nothing run. */
	x.ran = 0;
	assert_int_equal(machine_call(&x, "bad", 0, &r), RESIL_E_OPEN);
	assert_string_equal(r.message, "the key's breaker refused the call");
	resil_result_free(&r);
	assert_int_equal(x.ran, 0);
	assert_int_equal(machine_call(&x, "good", 0, &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(key_state(x.p, "good").m.successes, 1);
	assert_int_equal(key_state(x.p, "good").state, RESIL_BREAKER_CLOSED);
	fx_end(&x);
}

/* A keyed bulkhead's slot is held from the start to DONE, and a cancel
 * gives it back (and records nothing in the key's breaker). */
static void
test_keyed_machine_cancel(void **state)
{
	fx x;
	resil_call c1, c2;
	resil_call_next st;
	resil_result r1, r2;
	resil_args a = { "get", "k", 1 };

	(void)state;
	fx_start(&x,
	    "service=S\n"
	    "bulkhead.key=args\n"
	    "bulkhead.max_concurrent=1\n"
	    "breaker.key=args\n"
	    "breaker.consecutive_failures=1\n"
	    "breaker.failure_rate=0\n");
	assert_int_equal(
	    resil_call_start(&c1, x.p, NULL, &a, &r1, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	/* The key's one slot is taken: refused at the start. */
	assert_int_equal(
	    resil_call_start(&c2, x.p, NULL, &a, &r2, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r2.err, RESIL_E_LIMITED);
	assert_string_equal(r2.message, "the key's bulkhead refused the call");
	resil_result_free(&r2);
	/* Cancelled: the slot and the breaker permit go back. */
	assert_int_equal(resil_call_cancel(&c1, 0), RESIL_OK);
	resil_result_free(&r1);
	assert_int_equal(key_state(x.p, "k").m.failures, 0);
	assert_int_equal(key_state(x.p, "k").m.successes, 0);
	assert_int_equal(key_state(x.p, "k").state, RESIL_BREAKER_CLOSED);
	assert_int_equal(machine_call(&x, "k", 0, &r1), RESIL_OK);
	resil_result_free(&r1);
	assert_int_equal(key_state(x.p, "k").m.successes, 1);
	fx_end(&x);
}

/* A family given in C (resil_pipeline_set_keyed) gates the machine too. */
static void
test_keyed_machine_c_family(void **state)
{
	fx x;
	resil_keyed_config kc;
	resil_diag diag;
	resil_result r;
	const resil_method *m = NULL;
	resil_call c;
	resil_call_next st;
	resil_args a = { "get", "t", 1 };

	(void)state;
	fx_start(&x, "service=S\n");
	resil_keyed_config_init(&kc);
	kc.kind = RESIL_KEYED_RATELIMIT;
	kc.ratelimit.rate = 1;
	kc.ratelimit.burst = 1;
	kc.ratelimit.clock = resil_manual_clock_hook(&x.mc);
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "args", &kc, &diag), RESIL_OK);
	assert_int_equal(machine_call(&x, "t", 0, &r), RESIL_OK);
	resil_result_free(&r);
	/* By handle (resil_call_start's own path) too. */
	assert_int_equal(resil_pipeline_method(x.p, "get", &m), RESIL_OK);
	assert_int_equal(
	    resil_call_start(&c, x.p, m, &a, &r, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_LIMITED);
	resil_result_free(&r);
	assert_int_equal(machine_call(&x, "u", 0, &r), RESIL_OK);
	resil_result_free(&r);
	fx_end(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_text_parse),
		cmocka_unit_test(test_keyed_text_doc_example),
		cmocka_unit_test(test_keyed_text_refused),
		cmocka_unit_test(test_keyed_text_host_breaker),
		cmocka_unit_test(test_keyed_text_host_machine),
		cmocka_unit_test(test_keyed_text_host_needs_selector),
		cmocka_unit_test(test_keyed_text_args_breaker),
		cmocka_unit_test(test_keyed_text_ratelimit_override),
		cmocka_unit_test(test_keyed_text_reload),
		cmocka_unit_test(test_keyed_machine_breaker),
		cmocka_unit_test(test_keyed_machine_cancel),
		cmocka_unit_test(test_keyed_machine_c_family),
	};

	return cmocka_run_group_tests_name("keyed_text", tests, NULL, NULL);
}

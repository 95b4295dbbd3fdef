/*
 * Issue 41: composite keys (KIND.key=SOURCE+SOURCE..., up to 4 parts,
 * joined by a zero byte) and a bulkhead keyed by the endpoint's host (a
 * slot per attempt), through the blocking driver and the call machine.
 * docs/keyed.md "In the pipeline". Every clock is a manual one.
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

/* ---- without a selector: the C API ---- */

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
	resil_manual_clock_init(&x->mc, 1000 * MS);
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
	kc.max_key_len = 16;
	kc.breaker.clock = resil_manual_clock_hook(&x->mc);
	kc.breaker.consecutive_failures = 2;
	return kc;
}

/* Fails when argument 0 is "bad" (its bytes are the call's args). */
static int
efn(void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	fx *x = ctx;

	(void)ep;
	(void)out;
	x->ran++;
	return args->len == 3 && memcmp(args->data, "bad", 3) == 0 ? 111 : 0;
}

/* Invoke method with argument 0 arg0 (NULL: no argument). */
static resil_err
invoke(fx *x, const char *method, const char *arg0, resil_result *r)
{
	resil_invocation inv;
	const char *argv[1];

	resil_invocation_init(&inv, method);
	inv.args.data = arg0;
	inv.args.len = arg0 != NULL ? strlen(arg0) : 0;
	argv[0] = arg0;
	inv.arguments = argv;
	inv.narguments = arg0 != NULL ? 1 : 0;
	return resil_pipeline_invoke_ex(x->p, NULL, &inv, efn, x, r);
}

static resil_err
invoke1(fx *x, const char *method, const char *arg0)
{
	resil_result r;
	resil_err err = invoke(x, method, arg0, &r);

	resil_result_free(&r);
	return err;
}

typedef struct inst {
	int state;
	resil_breaker_metrics m;
	resil_bulkhead_metrics bm;
} inst;

static void
visit(const void *key, size_t len, const resil_keyed_instance *in, void *ctx)
{
	inst *s = ctx;

	(void)key;
	(void)len;
	if (in->breaker != NULL) {
		s->state = (int)resil_breaker_get_state(in->breaker);
		(void)resil_breaker_get_metrics(in->breaker, &s->m);
	}
	if (in->bulkhead != NULL)
		(void)resil_bulkhead_get_metrics(in->bulkhead, &s->bm);
}

/* Key (len bytes)'s instance in p's family of kind k; state -1: none. */
static inst
inst_of(resil_pipeline *p, resil_keyed_kind k, const char *key, size_t len)
{
	inst s;

	memset(&s, 0, sizeof(s));
	s.state = -1;
	(void)resil_keyed_with(
	    resil_pipeline_keyed(p, k), key, len, visit, &s);
	return s;
}

/* "a"+"bc" and "ab"+"c" are two keys ("a\0bc", "ab\0c"), neither
 * "abc"; a bad pair opens alone. */
static void
test_keyed_composite_joins(void **state)
{
	fx x;
	resil_keyed_config kc;
	int i;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "method+arguments[0]", &kc, &x.diag),
	    RESIL_OK);
	assert_int_equal(invoke1(&x, "a", "bc"), RESIL_OK);
	assert_int_equal(invoke1(&x, "ab", "c"), RESIL_OK);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "a\0bc", 4).m.successes, 1);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "ab\0c", 4).m.successes, 1);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "abc", 3).state, -1);
	/* "get"+"bad" fails twice: its breaker opens, "put"+"bad" and
	 * "get"+"ok" stay CLOSED. */
	for (i = 0; i < 2; i++)
		assert_int_equal(invoke1(&x, "get", "bad"), RESIL_E_CALL);
	assert_int_equal(invoke1(&x, "get", "bad"), RESIL_E_OPEN);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "get\0bad", 7).state,
	    RESIL_BREAKER_OPEN);
	assert_int_equal(invoke1(&x, "put", "bad"), RESIL_E_CALL);
	assert_int_equal(invoke1(&x, "get", "ok"), RESIL_OK);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "put\0bad", 7).state,
	    RESIL_BREAKER_CLOSED);
	assert_int_equal(inst_of(x.p, RESIL_KEYED_BREAKER, "get\0ok", 6).state,
	    RESIL_BREAKER_CLOSED);
	resil_pipeline_free(x.p);
}

/* A part missing: the whole call uses the reserved key "\0". */
static void
test_keyed_composite_missing_part(void **state)
{
	fx x;
	resil_keyed_config kc;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "method+arguments[0]", &kc, &x.diag),
	    RESIL_OK);
	assert_int_equal(invoke1(&x, "get", NULL), RESIL_OK);
	assert_int_equal(invoke1(&x, "get", ""), RESIL_OK);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "\0", 1).m.successes, 2);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "get\0", 4).state, -1);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "get", 3).state, -1);
	resil_pipeline_free(x.p);
}

/* A composite longer than max_key_len is refused at the call, in both
 * drivers, and nothing runs. */
static void
test_keyed_composite_too_long(void **state)
{
	fx x;
	resil_keyed_config kc;
	resil_result r;
	resil_call c;
	resil_call_next st;
	resil_invocation inv;
	const char *argv[1] = { "0123456789ab" };

	(void)state;
	fx_start(&x);
	kc = breakers(&x); /* max_key_len 16 */
	assert_int_equal(
	    resil_pipeline_set_keyed(x.p, "method+arguments[0]", &kc, &x.diag),
	    RESIL_OK);
	/* "get" 0 "0123456789ab": 16 bytes, the bound itself. */
	assert_int_equal(invoke1(&x, "get", "0123456789ab"), RESIL_OK);
	assert_int_equal(x.ran, 1);
	assert_int_equal(
	    invoke(&x, "get", "0123456789abc", &r), RESIL_E_INVAL);
	assert_int_equal(r.err, RESIL_E_INVAL);
	assert_string_equal(r.message,
	    "breaker.key: the call's composite key is 17 bytes, over "
	    "max_key_len 16");
	resil_result_free(&r);
	assert_int_equal(x.ran, 1);
	/* The call machine: DONE at the start with the same answer. */
	resil_invocation_init(&inv, "post");
	argv[0] = "0123456789ab";
	inv.arguments = argv;
	inv.narguments = 1;
	assert_int_equal(
	    resil_call_start_ex(&c, x.p, NULL, &inv, &r, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(r.err, RESIL_E_INVAL);
	assert_non_null(strstr(r.message, "17 bytes, over max_key_len 16"));
	resil_result_free(&r);
	resil_pipeline_free(x.p);
}

/* Bad composites, in C and in the text, each named. */
static void
test_keyed_composite_bad_spec(void **state)
{
	static const struct {
		const char *spec, *msg;
	} bad[] = {
		{ "method+",
		    "breaker.key: \"method+\": an empty part (a "
		    "composite key is SOURCE+SOURCE..., up to 4)" },
		{ "method++host",
		    "breaker.key: \"method++host\": an empty part "
		    "(a composite key is SOURCE+SOURCE..., up to "
		    "4)" },
		{ "method+args+host+method+method",
		    "breaker.key: \"method+args+host+method+method\": 5 "
		    "parts, "
		    "a composite key has 2..4 (SOURCE+SOURCE...)" },
		{ "args+method",
		    "breaker.key: \"args+method\": args (bytes, a "
		    "zero byte included) can only be a composite "
		    "key's last part" },
		{ "method+argument[0]",
		    "breaker.key: \"method+argument[0]\": \"argument[0]\" is "
		    "not "
		    "a key source (method, args, arguments[N], "
		    "attachment:NAME, host)" },
		{ "method+arguments[256]",
		    "breaker.key: \"method+arguments[256]\": "
		    "\"arguments[256]\": the index of arguments[N] must be "
		    "0..255" },
		{ "attachment:+method",
		    "breaker.key: \"attachment:+method\": \"attachment:\": an "
		    "attachment's name is 1..128 bytes" },
	};
	fx x;
	resil_keyed_config kc;
	size_t i;

	(void)state;
	fx_start(&x);
	kc = breakers(&x);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		resil_config *conf = NULL;
		resil_diag d;
		char text[256], want[512];

		assert_int_equal(
		    resil_pipeline_set_keyed(x.p, bad[i].spec, &kc, &x.diag),
		    RESIL_E_INVAL);
		assert_string_equal(x.diag.msg, bad[i].msg);
		(void)snprintf(
		    text, sizeof(text), "breaker.key=%s\n", bad[i].spec);
		(void)snprintf(want, sizeof(want), "k.conf:1: %s", bad[i].msg);
		assert_int_equal(
		    resil_config_parse_string(&conf, text, "k.conf", NULL, &d),
		    RESIL_E_INVAL);
		assert_string_equal(d.msg, want);
	}
	/* A throttle takes no host, in a composite neither. */
	{
		resil_config *conf = NULL;
		resil_diag d;

		assert_int_equal(
		    resil_config_parse_string(&conf,
		        "throttle.key=method+host\n", "k.conf", NULL, &d),
		    RESIL_E_INVAL);
		assert_string_equal(d.msg,
		    "k.conf:1: throttle.key: \"method+host\": \"host\" is a "
		    "source of breaker, rate limiter and bulkhead families "
		    "only (a throttle is asked once per call, before the "
		    "selector chose an endpoint)");
	}
	/* Four parts, args last: accepted, read back as given. */
	{
		resil_config *conf = NULL;
		resil_diag d;
		char buf[128];

		assert_int_equal(resil_config_parse_string(&conf,
		                     "ratelimit.key=method+attachment:tenant+"
		                     "arguments[1]+args\n",
		                     "k.conf", NULL, &d),
		    RESIL_OK);
		assert_int_equal(
		    resil_config_get(conf, "ratelimit.key", buf, sizeof(buf)),
		    RESIL_OK);
		assert_string_equal(
		    buf, "method+attachment:tenant+arguments[1]+args");
		resil_config_free(conf);
	}
	assert_null(resil_pipeline_keyed(x.p, RESIL_KEYED_BREAKER));
	resil_pipeline_free(x.p);
}

/* ---- with a selector: the host in a key ---- */

typedef struct cl cl;

typedef struct dep {
	cl *x;
	int dead[8]; /* endpoint i always fails */
	int calls[8];
	int nest;           /* the depth of nested calls to make */
	int depth;          /* the nesting now */
	int on[4];          /* the endpoint each depth ran on */
	resil_err inner[4]; /* each depth's nested call's answer */
	char inner_msg[RESIL_RESULT_MSG_MAX]; /* the last refusal's */
} dep;

struct cl {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	dep dp;
};

static int
dep_call(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	dep *d = ctx;
	int i = ep->address[1] - '0';

	(void)out;
	d->calls[i]++;
	d->on[d->depth] = i;
	if (d->depth < d->nest) {
		resil_result r;

		d->depth++;
		d->inner[d->depth] = resil_pipeline_invoke(
		    d->x->p, NULL, args, dep_call, d, &r);
		if (d->inner[d->depth] != RESIL_OK)
			(void)snprintf(d->inner_msg, sizeof(d->inner_msg),
			    "%s", r.message);
		resil_result_free(&r);
		d->depth--;
	}
	return d->dead[i] ? 5 : 0;
}

static void
cl_start(cl *x, const char *text, int n)
{
	static const char *const addr[] = { "e0:1", "e1:1", "e2:1" };
	resil_pipeline_config cfg;
	resil_selector_config sc;
	resil_directory_config dc;
	resil_endpoint_spec specs[3];
	resil_diag diag;
	resil_config *conf = NULL;
	int k;

	memset(x, 0, sizeof(*x));
	x->dp.x = x;
	resil_manual_clock_init(&x->mc, 1000 * MS);
	if (resil_config_parse_string(&conf, text, "k.conf", NULL, &diag) !=
	    RESIL_OK)
		fail_msg("parse: %s", diag.msg);
	x->conf = conf;
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&x->mc);
	(void)resil_config_directory(x->conf, &dc);
	(void)resil_config_selector(x->conf, &sc);
	assert_int_equal(resil_directory_new(&x->d, &dc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_selector_new(&x->sel, x->d, &sc, &diag), RESIL_OK);
	for (k = 0; k < n; k++)
		specs[k] = resil_endpoint_spec_default(addr[k]);
	assert_int_equal(
	    resil_directory_push(x->d, specs, (size_t)n, &diag), RESIL_OK);
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
cl_call(cl *x, const char *method)
{
	resil_args a = { method, NULL, 0 };
	resil_result r;
	resil_err err;

	err = resil_pipeline_invoke(x->p, NULL, &a, dep_call, &x->dp, &r);
	resil_result_free(&r);
	return err;
}

/* breaker.key=method+host: a breaker per method and endpoint; the dead
 * endpoint opens for the method that failed on it only. */
static void
test_keyed_composite_method_host(void **state)
{
	cl x;
	int i, before;

	(void)state;
	cl_start(&x,
	    "service=S\n"
	    "loadbalance=roundrobin\n"
	    "retries=2\n"
	    "breaker.key=method+host\n"
	    "breaker.consecutive_failures=2\n"
	    "breaker.failure_rate=0\n"
	    "breaker.open_wait=10s\n",
	    3);
	x.dp.dead[1] = 1;
	for (i = 0; i < 12; i++)
		assert_int_equal(cl_call(&x, "get"), RESIL_OK); /* failover */
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "get\0e1:1", 8).state,
	    RESIL_BREAKER_OPEN);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "get\0e0:1", 8).state,
	    RESIL_BREAKER_CLOSED);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "e1:1", 4).state, -1);
	/* "put" still reaches e1 (its own breaker, CLOSED until it fails
	 * there). */
	x.dp.dead[1] = 0;
	before = x.dp.calls[1];
	for (i = 0; i < 6; i++)
		assert_int_equal(cl_call(&x, "put"), RESIL_OK);
	assert_true(x.dp.calls[1] > before);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "put\0e1:1", 8).state,
	    RESIL_BREAKER_CLOSED);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BREAKER, "get\0e1:1", 8).state,
	    RESIL_BREAKER_OPEN);
	cl_end(&x);
}

/* ratelimit.key=method+host: a limit per method and endpoint; a spent
 * endpoint is passed over, every one spent refuses, another method
 * still passes. */
static void
test_keyed_composite_ratelimit_host(void **state)
{
	cl x;
	resil_args a = { "get", NULL, 0 };
	resil_result r;

	(void)state;
	cl_start(&x,
	    "service=S\n"
	    "loadbalance=roundrobin\n"
	    "retries=0\n"
	    "ratelimit.key=method+host\n"
	    "ratelimit.rate=1\n"
	    "ratelimit.period=1h\n"
	    "ratelimit.burst=1\n",
	    2);
	assert_int_equal(cl_call(&x, "get"), RESIL_OK);
	assert_int_equal(cl_call(&x, "get"), RESIL_OK);
	assert_int_equal(x.dp.calls[0], 1);
	assert_int_equal(x.dp.calls[1], 1);
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, dep_call, &x.dp, &r),
	    RESIL_E_LIMITED);
	assert_string_equal(r.message,
	    "the key's rate limiter refused every endpoint (ratelimit.key has "
	    "the host)");
	resil_result_free(&r);
	assert_int_equal(cl_call(&x, "put"), RESIL_OK);
	assert_int_equal(x.dp.calls[0] + x.dp.calls[1], 3);
	cl_end(&x);
}

static const char bh_text[] = "service=S\n"
                              "loadbalance=roundrobin\n"
                              "retries=0\n"
                              "bulkhead.key=host\n"
                              "bulkhead.max_concurrent=1\n";

static uint32_t
in_flight(cl *x, const char *host)
{
	return inst_of(x->p, RESIL_KEYED_BULKHEAD, host, strlen(host))
	    .bm.in_flight;
}

/* The example of docs/keyed.md ("In the text", composite keys) builds
 * a pipeline with its three families. */
static void
test_keyed_composite_doc_example(void **state)
{
	cl x;
	inst seen;

	(void)state;
	cl_start(&x,
	    "service=Orders\n"
	    "loadbalance=roundrobin\n"
	    "# one breaker per method and endpoint\n"
	    "breaker.key=method+host\n"
	    "breaker.consecutive_failures=5\n"
	    "# at most 4 attempts in flight to each endpoint\n"
	    "bulkhead.key=host\n"
	    "bulkhead.max_concurrent=4\n"
	    "# 20 calls a second per tenant and item\n"
	    "ratelimit.key=attachment:tenant+arguments[0]\n"
	    "ratelimit.rate=20\n"
	    "ratelimit.burst=20\n",
	    2);
	assert_non_null(resil_pipeline_keyed(x.p, RESIL_KEYED_BREAKER));
	assert_non_null(resil_pipeline_keyed(x.p, RESIL_KEYED_BULKHEAD));
	assert_non_null(resil_pipeline_keyed(x.p, RESIL_KEYED_RATELIMIT));
	assert_int_equal(cl_call(&x, "get"), RESIL_OK);
	/* No invocation: the rate limit's key is the reserved one. */
	assert_int_equal(
	    resil_keyed_with(resil_pipeline_keyed(x.p, RESIL_KEYED_RATELIMIT),
	        "\0", 1, visit, &seen),
	    RESIL_OK);
	assert_int_equal(in_flight(&x, "e0:1") + in_flight(&x, "e1:1"), 0);
	cl_end(&x);
}

/* bulkhead.key=host, the blocking driver: an attempt holds its host's
 * one slot while it runs; a call made meanwhile goes to the other host,
 * and one more (both full) is refused. */
static void
test_keyed_host_bulkhead_blocking(void **state)
{
	cl x;
	int first;

	(void)state;
	cl_start(&x, bh_text, 2);
	assert_null(resil_pipeline_bulkhead(x.p));
	x.dp.nest = 2;
	assert_int_equal(cl_call(&x, "get"), RESIL_OK);
	first = x.dp.on[0];
	/* The nested call skipped the full host and ran on the other. */
	assert_int_equal(x.dp.on[1], 1 - first);
	assert_int_equal(x.dp.calls[0], 1);
	assert_int_equal(x.dp.calls[1], 1);
	/* The innermost: both hosts full. */
	assert_int_equal(x.dp.inner[1], RESIL_OK);
	assert_int_equal(x.dp.inner[2], RESIL_E_LIMITED);
	assert_string_equal(x.dp.inner_msg,
	    "the key's bulkhead refused every endpoint (bulkhead.key has the "
	    "host)");
	/* Every slot given back, each attempt completed once. */
	assert_int_equal(in_flight(&x, "e0:1"), 0);
	assert_int_equal(in_flight(&x, "e1:1"), 0);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BULKHEAD, "e0:1", 4).bm.granted, 1);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BULKHEAD, "e0:1", 4).bm.rejected, 1);
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BULKHEAD, "e1:1", 4).bm.rejected, 1);
	/* One at a time, both hosts serve. */
	x.dp.nest = 0;
	assert_int_equal(cl_call(&x, "get"), RESIL_OK);
	assert_int_equal(cl_call(&x, "get"), RESIL_OK);
	assert_int_equal(x.dp.calls[0] + x.dp.calls[1], 4);
	cl_end(&x);
}

/* The same through the call machine: a slot held from the attempt's RUN
 * to its report, and a cancelled call gives it back. */
static void
test_keyed_host_bulkhead_machine(void **state)
{
	cl x;
	resil_call ca, cb, cc;
	resil_call_next sa, sb, st;
	resil_result ra, rb, rc;
	resil_args a = { "get", NULL, 0 };
	char hosta[8];

	(void)state;
	cl_start(&x, bh_text, 2);
	assert_int_equal(
	    resil_call_start(&ca, x.p, NULL, &a, &ra, 0, &sa), RESIL_OK);
	assert_int_equal(sa.action, RESIL_CALL_RUN);
	(void)snprintf(hosta, sizeof(hosta), "%s", sa.endpoint->address);
	assert_int_equal(in_flight(&x, hosta), 1);
	/* The other host still takes a call. */
	assert_int_equal(
	    resil_call_start(&cb, x.p, NULL, &a, &rb, 0, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_RUN);
	assert_string_not_equal(sb.endpoint->address, hosta);
	/* Both full: refused at once. */
	assert_int_equal(
	    resil_call_start(&cc, x.p, NULL, &a, &rc, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(rc.err, RESIL_E_LIMITED);
	assert_string_equal(rc.message,
	    "the key's bulkhead refused every endpoint (bulkhead.key has the "
	    "host)");
	resil_result_free(&rc);
	/* Cancelled: a's slot goes back, and a new call runs on its host. */
	assert_int_equal(resil_call_cancel(&ca, 0), RESIL_OK);
	resil_result_free(&ra);
	assert_int_equal(in_flight(&x, hosta), 0);
	assert_int_equal(
	    resil_call_start(&cc, x.p, NULL, &a, &rc, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	assert_string_equal(st.endpoint->address, hosta);
	assert_int_equal(in_flight(&x, hosta), 1);
	/* Reported: b's and c's slots go back at their DONE. */
	assert_int_equal(
	    resil_call_report(&cb, sb.attempt, 0, NULL, 0), RESIL_OK);
	assert_int_equal(resil_call_step(&cb, 0, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_DONE);
	assert_int_equal(rb.err, RESIL_OK);
	resil_result_free(&rb);
	assert_int_equal(
	    resil_call_report(&cc, st.attempt, 0, NULL, 0), RESIL_OK);
	assert_int_equal(resil_call_step(&cc, 0, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	resil_result_free(&rc);
	assert_int_equal(in_flight(&x, "e0:1"), 0);
	assert_int_equal(in_flight(&x, "e1:1"), 0);
	cl_end(&x);
}

/* A hedge whose endpoint's bulkhead is full is not launched: the call
 * goes on with its first attempt (not ended by the refusal). */
static void
test_keyed_host_bulkhead_hedge(void **state)
{
	cl x;
	resil_call ca, cb;
	resil_call_next sa, sb;
	resil_result ra, rb;
	resil_args a = { "get", NULL, 0 };
	uint64_t t = 0;

	(void)state;
	cl_start(&x,
	    "service=S\n"
	    "loadbalance=roundrobin\n"
	    "retries=0\n"
	    "hedge.max=1\n"
	    "hedge.delay=10ms\n"
	    "bulkhead.key=host\n"
	    "bulkhead.max_concurrent=1\n",
	    2);
	assert_int_equal(
	    resil_call_start(&ca, x.p, NULL, &a, &ra, t, &sa), RESIL_OK);
	assert_int_equal(sa.action, RESIL_CALL_RUN);
	assert_int_equal(
	    resil_call_start(&cb, x.p, NULL, &a, &rb, t, &sb), RESIL_OK);
	assert_int_equal(sb.action, RESIL_CALL_RUN);
	/* a's attempt is out: step it until its hedge is due and past. */
	assert_int_equal(resil_call_step(&ca, t, &sa), RESIL_OK);
	t += 20 * MS;
	assert_int_equal(resil_call_step(&ca, t, &sa), RESIL_OK);
	assert_int_not_equal(sa.action, RESIL_CALL_DONE);
	assert_int_not_equal(sa.action, RESIL_CALL_RUN);
	/* The hedge was asked for on b's endpoint and refused there. */
	assert_int_equal(
	    inst_of(x.p, RESIL_KEYED_BULKHEAD, sb.endpoint->address, 4)
	        .bm.rejected,
	    1);
	/* a's first attempt answers: a succeeds. */
	assert_int_equal(resil_call_report(&ca, 1, 0, NULL, t), RESIL_OK);
	while (sa.action != RESIL_CALL_DONE)
		assert_int_equal(resil_call_step(&ca, t, &sa), RESIL_OK);
	assert_int_equal(ra.err, RESIL_OK);
	resil_result_free(&ra);
	assert_int_equal(
	    resil_call_report(&cb, sb.attempt, 0, NULL, t), RESIL_OK);
	while (sb.action != RESIL_CALL_DONE)
		assert_int_equal(resil_call_step(&cb, t, &sb), RESIL_OK);
	resil_result_free(&rb);
	assert_int_equal(in_flight(&x, "e0:1") + in_flight(&x, "e1:1"), 0);
	cl_end(&x);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_composite_joins),
		cmocka_unit_test(test_keyed_composite_missing_part),
		cmocka_unit_test(test_keyed_composite_too_long),
		cmocka_unit_test(test_keyed_composite_bad_spec),
		cmocka_unit_test(test_keyed_composite_method_host),
		cmocka_unit_test(test_keyed_composite_ratelimit_host),
		cmocka_unit_test(test_keyed_composite_doc_example),
		cmocka_unit_test(test_keyed_host_bulkhead_blocking),
		cmocka_unit_test(test_keyed_host_bulkhead_machine),
		cmocka_unit_test(test_keyed_host_bulkhead_hedge),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Shared-memory and fleet state inside a pipeline (issue 24.2): a shm
 * breaker, rate limiter and bulkhead as the pipeline's stages, from C and
 * from text, across processes (fork); the fleet breaker and the fleet
 * rate limiter through the pipeline against a real redis-server (ctest
 * runs this under with_server, which passes its port as the last
 * argument; without it those tests are skipped); reloads keeping the
 * shared state; every refusal's message; allocation failures.
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/selector.h>
#include <resil/fleet.h>
#include <resil/pipeline.h>
#include <resil/shm.h>

#include "support/fail_alloc.h"

static int redis_port; /* 0: no server */
static char region[64];
static int calls; /* calls of the user's function */

static int
failing(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	calls++;
	return 7;
}

static int
working(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	calls++;
	*out = resil_value_int(1);
	return 0;
}

static resil_err
call(resil_pipeline *p, resil_call_fn fn, resil_result *r)
{
	resil_args a = { "get", NULL, 0 };

	return resil_pipeline_call(p, &a, fn, NULL, r);
}

static int
setup(void **state)
{
	static int n;

	(void)state;
	snprintf(region, sizeof(region), "tps-%ld-%d", (long)getpid(), ++n);
	(void)resil_shm_unlink(region, NULL);
	calls = 0;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	(void)resil_shm_unlink(region, NULL);
	return 0;
}

/* A pipeline from text (%s: the region, twice at most). */
static resil_pipeline *
from_text(const char *fmt, resil_config **conf, const resil_clock *clk)
{
	char text[1024];
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_diag d;

	snprintf(text, sizeof(text), fmt, region, region);
	d.msg[0] = '\0';
	if (resil_config_parse_string(conf, text, NULL, NULL, &d) != RESIL_OK) {
		fprintf(stderr, "parse: %s\n", d.msg);
		return NULL;
	}
	pc = *resil_config_pipeline(*conf);
	pc.clock = clk;
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK) {
		fprintf(stderr, "new: %s\n", d.msg);
		resil_config_free(*conf);
		return NULL;
	}
	return p;
}

/* ---- shm, from C, across processes ---- */

static resil_pipeline *
c_pipeline(resil_shm **shm, resil_breaker **b)
{
	resil_pipeline_config pc;
	resil_breaker_config bc;
	resil_pipeline *p = NULL;
	resil_diag d;

	assert_int_equal(resil_shm_open(shm, region, NULL, &d), RESIL_OK);
	resil_breaker_config_init(&bc);
	bc.consecutive_failures = 2;
	bc.failure_rate_pct = 0;
	bc.open_wait_ns = UINT64_C(3600000000000);
	assert_int_equal(resil_shm_breaker(*shm, "b", &bc, b, &d), RESIL_OK);
	resil_pipeline_config_init(&pc);
	pc.service = "S";
	pc.breaker_enabled = 1;
	pc.breaker = bc;
	pc.shared_breaker = *b;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	return p;
}

static void
shm_breaker_across_processes(void **state)
{
	resil_shm *shm;
	resil_breaker *b;
	resil_pipeline *p;
	resil_result r;
	pid_t kid;
	int st;

	(void)state;
	p = c_pipeline(&shm, &b);
	assert_ptr_equal(resil_pipeline_breaker(p, NULL), b);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		/* Another process: its own handles on the same breaker. */
		resil_shm *cs;
		resil_breaker *cb;
		resil_pipeline *cp = c_pipeline(&cs, &cb);
		int ok;

		(void)call(cp, failing, &r);
		resil_result_free(&r);
		(void)call(cp, failing, &r);
		resil_result_free(&r);
		ok = resil_breaker_get_state(cb) == RESIL_BREAKER_OPEN;
		resil_pipeline_free(cp);
		resil_breaker_free(cb);
		resil_shm_close(cs);
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Opened by the other process's failures: rejected here. */
	assert_int_equal(call(p, working, &r), RESIL_E_OPEN);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_OPEN);
	assert_int_equal(calls, 0);
	resil_result_free(&r);
	resil_pipeline_free(p);
	/* Borrowed: still the caller's. */
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	resil_breaker_free(b);
	resil_shm_close(shm);
}

/* ---- shm, from text ---- */

#define BREAKER_TEXT                                                         \
	"service=S\nbreaker.shared=shm:%s/b\nbreaker.consecutive_failures=2\n" \
	"breaker.failure_rate=0\nbreaker.open_wait=1h\nretry.max_attempts=1\n"

static void
shm_breaker_text(void **state)
{
	resil_config *c1, *c2;
	resil_pipeline *p1, *p2;
	resil_result r;
	char buf[128];
	resil_diag d;

	(void)state;
	p1 = from_text(BREAKER_TEXT, &c1, NULL);
	p2 = from_text(BREAKER_TEXT, &c2, NULL);
	assert_non_null(p1);
	assert_non_null(p2);
	assert_int_equal(
	    resil_config_get(c1, "breaker.shared", buf, sizeof(buf)),
	    RESIL_OK);
	assert_true(strncmp(buf, "shm:tps-", 8) == 0);
	assert_int_equal(call(p1, failing, &r), RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(call(p1, failing, &r), RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(calls, 2);
	/* The other pipeline's breaker is the same one. */
	assert_int_equal(call(p2, working, &r), RESIL_E_OPEN);
	resil_result_free(&r);
	assert_int_equal(calls, 2);
	assert_int_equal(resil_breaker_get_state(resil_pipeline_breaker(p2, NULL)),
	    RESIL_BREAKER_OPEN);

	/* A reload keeps it (the same text, or one that does not name it);
	 * naming another is refused. */
	{
		char text[512];

		snprintf(text, sizeof(text), BREAKER_TEXT, region);
		assert_int_equal(
		    resil_pipeline_reload_string(p2, text, NULL, &d), RESIL_OK);
		assert_int_equal(call(p2, working, &r), RESIL_E_OPEN);
		resil_result_free(&r);
		assert_int_equal(resil_pipeline_reload_string(p2,
		                     "service=S\nbreaker.enabled=true\n", NULL,
		                     &d),
		    RESIL_OK);
		assert_int_equal(call(p2, working, &r), RESIL_E_OPEN);
		resil_result_free(&r);
		snprintf(text, sizeof(text),
		    "service=S\nbreaker.shared=shm:%s/other\n", region);
		assert_int_equal(
		    resil_pipeline_reload_string(p2, text, NULL, &d),
		    RESIL_E_INVAL);
		/* Issue 38.10: at its line in the reload's text. */
		assert_string_equal(d.msg,
		    "<string>:2: breaker.shared: cannot change by reload "
		    "(shared state is fixed when the pipeline is created)");
	}
	resil_pipeline_free(p1);
	resil_pipeline_free(p2);
	resil_config_free(c1);
	resil_config_free(c2);
}

static void
shm_ratelimit_text(void **state)
{
	resil_manual_clock mc;
	resil_config *c1, *c2;
	resil_pipeline *p1, *p2;
	resil_result r;
	const char *t = "service=S\nratelimit.shared=shm:%s/rl\n"
	                "ratelimit.rate=2\nratelimit.period=1h\n"
	                "ratelimit.burst=2\n";

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	p1 = from_text(t, &c1, resil_manual_clock_hook(&mc));
	p2 = from_text(t, &c2, resil_manual_clock_hook(&mc));
	assert_non_null(p1);
	assert_non_null(p2);
	assert_int_equal(call(p1, working, &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(call(p2, working, &r), RESIL_OK);
	resil_result_free(&r);
	/* The burst of 2 is the region's, spent by both. */
	assert_int_equal(call(p1, working, &r), RESIL_E_LIMITED);
	resil_result_free(&r);
	assert_int_equal(call(p2, working, &r), RESIL_E_LIMITED);
	resil_result_free(&r);
	assert_int_equal(calls, 2);
	resil_pipeline_free(p1);
	resil_pipeline_free(p2);
	resil_config_free(c1);
	resil_config_free(c2);
}

static resil_pipeline *inner; /* called from inside another's call */
static resil_err inner_err;

static int
nested(void *ctx, const resil_args *args, resil_value *out)
{
	resil_result r;

	(void)ctx;
	(void)args;
	inner_err = call(inner, working, &r);
	resil_result_free(&r);
	*out = resil_value_int(2);
	return 0;
}

static void
shm_bulkhead_text(void **state)
{
	resil_config *c1, *c2;
	resil_pipeline *p1;
	resil_result r;
	const char *t = "service=S\nbulkhead.shared=shm:%s/bh\n"
	                "bulkhead.max_concurrent=1\n";

	(void)state;
	p1 = from_text(t, &c1, NULL);
	inner = from_text(t, &c2, NULL);
	assert_non_null(p1);
	assert_non_null(inner);
	/* While p1's call holds the one slot, the other pipeline's call is
	 * refused: the limit is the region's. */
	assert_int_equal(call(p1, nested, &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(inner_err, RESIL_E_LIMITED);
	assert_int_equal(call(inner, working, &r), RESIL_OK);
	resil_result_free(&r);
	resil_pipeline_free(p1);
	resil_pipeline_free(inner);
	resil_config_free(c1);
	resil_config_free(c2);
}

/* ---- per endpoint: the directory's breakers in a region ---- */

typedef struct worker {
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
} worker;

static void
worker_up(worker *w, const resil_clock *clk)
{
	char text[512];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_diag d;

	snprintf(text, sizeof(text),
	    "service=S\nregistry=N/A\nurl=dubbo://10.0.0.1:20880\n"
	    "cluster=failfast\n"
	    "endpoint.breaker.consecutive_failures=1\n"
	    "endpoint.breaker.failure_rate=0\n"
	    "endpoint.breaker.open_wait=1h\n"
	    "endpoint.breaker.shared=shm:%s\n",
	    region);
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(&w->conf, text, "t.conf", NULL, &d),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	dc.clock = clk;
	assert_int_equal(resil_config_directory(w->conf, &dc), 1);
	assert_string_equal(dc.endpoint_breaker_shm, region);
	assert_int_equal(resil_directory_new(&w->d, &dc, &d), RESIL_OK);
	(void)resil_config_selector(w->conf, &sc);
	assert_int_equal(resil_selector_new(&w->sel, w->d, &sc, &d), RESIL_OK);
	pc = *resil_config_pipeline(w->conf);
	pc.selector = w->sel;
	pc.clock = clk;
	assert_int_equal(resil_pipeline_new(&w->p, &pc, &d), RESIL_OK);
}

static void
worker_down(worker *w)
{
	resil_pipeline_free(w->p);
	resil_selector_free(w->sel);
	resil_directory_free(w->d);
	resil_config_free(w->conf);
}

static int
ep_call(void *ctx, const resil_pick *ep, const resil_args *args,
    resil_value *out)
{
	(void)ep;
	return ctx != NULL ? failing(NULL, args, out) : working(NULL, args, out);
}

static void
endpoint_shared(void **state)
{
	resil_manual_clock mc;
	resil_args a = { "get", NULL, 0 };
	resil_result r;
	worker w1, w2;
	resil_breaker *b1, *b2;
	int fail = 1;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	worker_up(&w1, resil_manual_clock_hook(&mc));
	worker_up(&w2, resil_manual_clock_hook(&mc));
	b1 = resil_directory_breaker(w1.d, "10.0.0.1:20880");
	b2 = resil_directory_breaker(w2.d, "10.0.0.1:20880");
	assert_non_null(b1);
	assert_non_null(b2);
	assert_ptr_not_equal(b1, b2); /* two handles, one state */
	assert_int_equal(resil_pipeline_invoke(w1.p, NULL, &a, ep_call, &fail,
	                     &r),
	    RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(resil_breaker_get_state(b2), RESIL_BREAKER_OPEN);
	/* The other worker's only endpoint is open: no candidate, and its
	 * function is not called. */
	calls = 0;
	assert_int_not_equal(
	    resil_pipeline_invoke(w2.p, NULL, &a, ep_call, NULL, &r),
	    RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	resil_result_free(&r);
	assert_int_equal(calls, 0);
	/* A reload may not name another region. */
	{
		char text[256];
		resil_diag d;

		snprintf(text, sizeof(text),
		    "service=S\nregistry=N/A\nurl=dubbo://10.0.0.1:20880\n"
		    "cluster=failfast\nendpoint.breaker.consecutive_failures=1\n"
		    "endpoint.breaker.shared=shm:%s-other\n",
		    region);
		assert_int_equal(
		    resil_pipeline_reload_string(w2.p, text, NULL, &d),
		    RESIL_E_INVAL);
		assert_string_equal(d.msg,
		    "<string>:6: endpoint.breaker.shared: cannot change by "
		    "reload (shared state is fixed when the pipeline is "
		    "created)");
	}
	worker_down(&w1);
	worker_down(&w2);
}

/* Without the text: the directory's C field, and its refusal. */
static void
endpoint_shared_c(void **state)
{
	resil_directory_config dc;
	resil_breaker_config bc;
	resil_directory *d1 = NULL, *d2 = NULL;
	resil_endpoint_spec ep;
	resil_permit pm;
	resil_diag d;
	char longaddr[128];

	(void)state;
	memset(&ep, 0, sizeof(ep));
	memset(longaddr, 'x', sizeof(longaddr) - 8);
	memcpy(longaddr + sizeof(longaddr) - 8, ":2088/q", 8);
	ep.address = longaddr; /* made a name: cut, with a hash */
	resil_directory_config_init(&dc);
	dc.endpoint_breaker_shm = region;
	assert_int_equal(resil_directory_new(&d1, &dc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "endpoint.breaker.shared: needs the endpoint breaker "
	    "(endpoint.breaker.* keys, endpoint_breaker)");
	resil_breaker_config_init(&bc);
	bc.consecutive_failures = 1;
	bc.failure_rate_pct = 0;
	dc.endpoint_breaker = &bc;
	dc.endpoints = &ep;
	dc.nendpoints = 1;
	assert_int_equal(resil_directory_new(&d1, &dc, &d), RESIL_OK);
	assert_int_equal(resil_directory_new(&d2, &dc, &d), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(
	                     resil_directory_breaker(d1, longaddr), &pm),
	    RESIL_OK);
	assert_int_equal(resil_breaker_record(resil_directory_breaker(d1,
	                                          longaddr),
	                     &pm, RESIL_OUTCOME_FAILURE),
	    RESIL_OK);
	assert_int_equal(
	    resil_breaker_get_state(resil_directory_breaker(d2, longaddr)),
	    RESIL_BREAKER_OPEN);
	resil_directory_free(d1);
	resil_directory_free(d2);
}

/* ---- refusals ---- */

static void
bad_text(void **state)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{ "service=S\nbreaker.shared=mem:a/b\n",
		    "t.conf:2: breaker.shared: \"mem:a/b\" is not "
		    "shm:REGION/NAME" },
		{ "service=S\nbreaker.shared=shm:a\n",
		    "t.conf:2: breaker.shared: \"shm:a\" names no object "
		    "(shm:REGION/NAME)" },
		{ "service=S\nratelimit.shared=shm:a b/c\n",
		    "t.conf:2: ratelimit.shared: region \"a b\" is not "
		    "1..200 characters of [A-Za-z0-9._-]" },
		{ "service=S\nbulkhead.shared=shm:a/\n",
		    "t.conf:2: bulkhead.shared: name \"\" is not 1..63 "
		    "characters of [A-Za-z0-9._-]" },
		{ "service=S\nbreaker.fleet=http://h/n\n",
		    "t.conf:2: breaker.fleet: \"http://h/n\" is not "
		    "redis://HOST[:PORT]/NAME" },
		{ "service=S\nbreaker.fleet=redis://h:0/n\n",
		    "t.conf:2: breaker.fleet: port \"0\" is not 1..65535" },
		{ "service=S\nbreaker.fleet=redis://h:6379x/n\n",
		    "t.conf:2: breaker.fleet: port \"6379x\" is not "
		    "1..65535" },
		{ "service=S\nratelimit.fleet=redis://:1/n\n",
		    "t.conf:2: ratelimit.fleet: \"redis://:1/n\" has no host "
		    "(redis://HOST[:PORT]/NAME)" },
		{ "service=S\nratelimit.fleet=redis://h\n",
		    "t.conf:2: ratelimit.fleet: \"redis://h\" names no fleet "
		    "(redis://HOST[:PORT]/NAME)" },
		{ "service=S\nbreaker.fleet=redis://h/n\nbreaker.fleet_sync=x\n",
		    NULL },
		{ "service=S\nbreaker.shared=shm:a/b\n"
		  "breaker.fleet=redis://h/n\n",
		    "t.conf:3: breaker.fleet: not with breaker.shared (a "
		    "service has one breaker)" },
		{ "service=S\nbreaker.shared=shm:a/b\nbreaker.enabled=false\n",
		    "t.conf:3: breaker.shared: the stage is off "
		    "(breaker.enabled=false)" },
		{ "service=S\nratelimit.fleet=redis://h/n\n"
		  "ratelimit.enabled=false\n",
		    "t.conf:3: ratelimit.fleet: the stage is off "
		    "(ratelimit.enabled=false)" },
		{ "service=S\nbulkhead.enabled=false\nbulkhead.shared=shm:a/b\n",
		    "t.conf:3: bulkhead.shared: the stage is off "
		    "(bulkhead.enabled=false)" },
		{ "service=S\nbreaker.per_method=true\n"
		  "breaker.shared=shm:a/b\n",
		    "t.conf:3: breaker.shared: not with breaker.per_method "
		    "(the shared breaker is the service's)" },
		{ "service=S\nratelimit.shared=shm:a/b\n"
		  "ratelimit.fleet=redis://h/n\n",
		    "t.conf:3: ratelimit.fleet: not with ratelimit.shared (a "
		    "pipeline has one rate limiter)" },
		{ "service=S\nendpoint.breaker.shared=shm:a/b\n",
		    "t.conf:2: endpoint.breaker.shared: region \"a/b\" is "
		    "not 1..200 characters of [A-Za-z0-9._-] (the endpoints' "
		    "breakers are named by address)" },
		{ "service=S\nendpoint.breaker.shared=a\n",
		    "t.conf:2: endpoint.breaker.shared: \"a\" is not "
		    "shm:REGION" },
		{ "service=S\nendpoint.breaker.shared=shm:a\n",
		    "t.conf:2: endpoint.breaker.shared: needs the endpoint "
		    "breaker (an endpoint.breaker.* key)" },
		{ "service=S\nbreaker.fleet_sync=1s\n",
		    "t.conf:2: breaker.fleet_sync: needs breaker.fleet (a "
		    "fleet given as a handle is synced by its owner)" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		resil_config *c = NULL;
		resil_diag d;
		resil_err e;

		d.msg[0] = '\0';
		e = resil_config_parse_string(
		    &c, cases[i].text, "t.conf", NULL, &d);
		if (cases[i].msg == NULL) {
			/* A duration's own message (config.md). */
			assert_int_equal(e, RESIL_E_INVAL);
			assert_non_null(strstr(d.msg, "t.conf:3: "));
			continue;
		}
		if (e == RESIL_OK)
			resil_config_free(c);
		assert_int_equal(e, RESIL_E_INVAL);
		assert_string_equal(d.msg, cases[i].msg);
	}
}

static void
bad_c(void **state)
{
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_breaker *b;
	resil_shm *shm;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_shm_open(&shm, region, NULL, &d), RESIL_OK);
	{
		resil_breaker_config bc;

		resil_breaker_config_init(&bc);
		assert_int_equal(
		    resil_shm_breaker(shm, "b", &bc, &b, &d), RESIL_OK);
	}
	resil_pipeline_config_init(&pc);
	pc.service = "S";
	pc.shared_breaker = b;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker.shared: the stage is off (breaker.enabled=false)");
	pc.breaker_enabled = 1;
	pc.breaker_per_method = 1;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker.shared: not with breaker.per_method (the shared breaker "
	    "is the service's)");
	pc.breaker_per_method = 0;
	pc.breaker_shared_url = "shm:x/y";
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker.shared: given twice (as text and as shared_breaker)");
	pc.breaker_shared_url = NULL;
	pc.fleet = (resil_fleet *)(void *)&pc; /* never used: refused */
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker.fleet: not with breaker.shared (a service has one "
	    "breaker)");
	pc.fleet = NULL;
	/* The handle alone: accepted. */
	assert_null(p);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	assert_ptr_equal(resil_pipeline_breaker(p, NULL), b);
	resil_pipeline_free(p);
	resil_breaker_free(b);
	resil_shm_close(shm);
}

static void
alloc_failures(void **state)
{
	char text[256];
	uint64_t n;
	int done = 0;

	(void)state;
	snprintf(text, sizeof(text),
	    "service=S\nbreaker.shared=shm:%s/b\nratelimit.shared=shm:%s/r\n",
	    region, region);
	for (n = 1; n < 400 && !done; n++) {
		resil_config *c = NULL;
		resil_pipeline_config pc;
		resil_pipeline *p = NULL;
		fail_alloc fa;
		resil_diag d;
		resil_err e;

		assert_int_equal(
		    resil_config_parse_string(&c, text, NULL, NULL, &d),
		    RESIL_OK);
		pc = *resil_config_pipeline(c);
		pc.alloc = fail_alloc_init(&fa, n);
		e = resil_pipeline_new(&p, &pc, &d);
		if (e == RESIL_OK) {
			resil_result r;

			assert_int_equal(call(p, working, &r), RESIL_OK);
			resil_result_free(&r);
			resil_pipeline_free(p);
			done = 1;
		} else {
			assert_int_equal(e, RESIL_E_NOMEM);
			assert_null(p);
		}
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
		resil_config_free(c);
	}
	assert_true(done);
}

/* ---- the fleet, against redis ---- */

static void
nap(void)
{
	struct timespec ts = { 0, 20000000 };

	nanosleep(&ts, NULL);
}

static resil_fleet *
fleet_of(const char *name, const char *instance, const resil_clock *clk)
{
	resil_fleet_config fc;
	resil_fleet *f = NULL;
	resil_diag d;

	resil_fleet_config_init(&fc);
	fc.name = name;
	fc.instance = instance;
	fc.host = "127.0.0.1";
	fc.port = (uint32_t)redis_port;
	fc.connect_timeout_ms = 5000;
	fc.command_timeout_ms = 5000;
	fc.open_wait_ms = 100;
	fc.breaker.consecutive_failures = 2;
	fc.breaker.failure_rate_pct = 0;
	fc.breaker.open_wait_ns = UINT64_C(3600000000000);
	fc.breaker.clock = clk;
	assert_int_equal(resil_fleet_new(&f, &fc, &d), RESIL_OK);
	return f;
}

static resil_pipeline *
fleet_pipeline(resil_fleet *f, const resil_clock *clk)
{
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_diag d;

	resil_pipeline_config_init(&pc);
	pc.service = "S";
	pc.breaker_enabled = 1;
	pc.fleet = f;
	pc.clock = clk;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	return p;
}

/* Sync f until it shows s (bounded generously: no timing asserted). */
static int
sync_until(resil_fleet *f, resil_manual_clock *mc, resil_fleet_state s)
{
	int i;

	for (i = 0; i < 1500; i++) {
		if (resil_fleet_sync(f, resil_manual_clock_now(mc)) ==
		        RESIL_OK &&
		    resil_fleet_get_state(f) == s)
			return 1;
		nap();
	}
	return 0;
}

static void
fleet_breaker(void **state)
{
	resil_manual_clock mc;
	resil_fleet *fa, *fb;
	resil_pipeline *pa, *pb;
	resil_result r;
	char name[64];

	(void)state;
	if (redis_port == 0)
		skip();
	snprintf(name, sizeof(name), "tps-%ld", (long)getpid());
	resil_manual_clock_init(&mc, 1000);
	fa = fleet_of(name, "a", resil_manual_clock_hook(&mc));
	fb = fleet_of(name, "b", resil_manual_clock_hook(&mc));
	pa = fleet_pipeline(fa, resil_manual_clock_hook(&mc));
	pb = fleet_pipeline(fb, resil_manual_clock_hook(&mc));
	assert_ptr_equal(resil_pipeline_fleet(pa), fa);
	assert_true(sync_until(fa, &mc, RESIL_FLEET_CLOSED));
	assert_true(sync_until(fb, &mc, RESIL_FLEET_CLOSED));
	/* Host a's failures trip its local breaker: its vote opens the
	 * fleet (quorum 1) at its next sync; host b hears it at its own. */
	assert_int_equal(call(pa, failing, &r), RESIL_E_CALL);
	resil_result_free(&r);
	assert_int_equal(call(pa, failing, &r), RESIL_E_CALL);
	resil_result_free(&r);
	assert_true(sync_until(fa, &mc, RESIL_FLEET_OPEN));
	assert_true(sync_until(fb, &mc, RESIL_FLEET_OPEN));
	calls = 0;
	assert_int_equal(call(pb, working, &r), RESIL_E_OPEN);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_OPEN);
	resil_result_free(&r);
	assert_int_equal(calls, 0);
	/* After the fleet's open wait, b's sync takes the probe lease: its
	 * next call is the fleet's probe, and its success closes the fleet
	 * (through resil_fleet_record, the lease reported at the sync). */
	assert_true(sync_until(fb, &mc, RESIL_FLEET_HALF_OPEN));
	assert_int_equal(call(pb, working, &r), RESIL_OK);
	assert_int_equal(r.breaker_state, RESIL_BREAKER_HALF_OPEN);
	resil_result_free(&r);
	assert_int_equal(calls, 1);
	assert_true(sync_until(fb, &mc, RESIL_FLEET_CLOSED));
	assert_int_equal(call(pb, working, &r), RESIL_OK);
	resil_result_free(&r);
	/* A reload keeps the fleet (NULL: keep); another one is refused. */
	{
		resil_pipeline_config pc;
		resil_diag d;

		resil_pipeline_config_init(&pc);
		pc.breaker_enabled = 1;
		pc.breaker.consecutive_failures = 3;
		assert_int_equal(resil_pipeline_reload(pb, &pc, &d), RESIL_OK);
		assert_ptr_equal(resil_pipeline_fleet(pb), fb);
		assert_ptr_equal(
		    resil_pipeline_breaker(pb, NULL), resil_fleet_breaker(fb));
		pc.fleet = fa;
		assert_int_equal(
		    resil_pipeline_reload(pb, &pc, &d), RESIL_E_INVAL);
		assert_string_equal(d.msg,
		    "fleet: cannot change by reload (shared state is fixed "
		    "when the pipeline is created)");
	}
	resil_pipeline_free(pa);
	resil_pipeline_free(pb);
	resil_fleet_free(fa);
	resil_fleet_free(fb);
}

static void
fleet_text(void **state)
{
	char text[512];
	resil_config *c = NULL;
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_manual_clock mc;
	resil_result r;
	resil_diag d;
	long id = (long)getpid();

	(void)state;
	if (redis_port == 0)
		skip();
	resil_manual_clock_init(&mc, 1000);
	snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:%d/tpsb-%ld\n"
	    "ratelimit.fleet=redis://127.0.0.1:%d/tpsl-%ld\n"
	    "ratelimit.rate=2\nratelimit.period=1h\nratelimit.burst=2\n",
	    redis_port, id, redis_port, id);
	assert_int_equal(
	    resil_config_parse_string(&c, text, NULL, NULL, &d), RESIL_OK);
	pc = *resil_config_pipeline(c);
	pc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	assert_non_null(resil_pipeline_fleet(p));
	assert_non_null(resil_pipeline_fleet_limit(p));
	assert_null(resil_pipeline_ratelimit(p));
	(void)resil_fleet_sync(resil_pipeline_fleet(p), 1000);
	assert_int_equal(call(p, working, &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(call(p, working, &r), RESIL_OK);
	resil_result_free(&r);
	/* The fleet's burst (2) is spent. */
	assert_int_equal(call(p, working, &r), RESIL_E_LIMITED);
	resil_result_free(&r);
	resil_pipeline_free(p);
	resil_config_free(c);

	/* breaker.fleet_sync: the pipeline's fleet syncs on its own thread
	 * (stopped by resil_pipeline_free). */
	snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:%d/tpss-%ld\n"
	    "breaker.fleet_sync=5\n",
	    redis_port, id);
	assert_int_equal(
	    resil_config_parse_string(&c, text, NULL, NULL, &d), RESIL_OK);
	pc = *resil_config_pipeline(c);
	assert_int_equal(pc.fleet_sync_ns, 5 * RESIL_NS_PER_MS);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	{
		resil_fleet_info info;
		int i;

		memset(&info, 0, sizeof(info));
		for (i = 0; i < 3000 && info.syncs == 0; i++) {
			nap();
			assert_int_equal(resil_fleet_get_info(
			                     resil_pipeline_fleet(p), &info),
			    RESIL_OK);
		}
		assert_true(info.syncs > 0);
		assert_int_equal(resil_fleet_sync(resil_pipeline_fleet(p), 0),
		    RESIL_E_MISUSE); /* the thread syncs */
	}
	assert_int_equal(call(p, working, &r), RESIL_OK);
	resil_result_free(&r);
	resil_pipeline_free(p);
	resil_config_free(c);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    shm_breaker_across_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    shm_breaker_text, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    shm_ratelimit_text, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    shm_bulkhead_text, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    endpoint_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    endpoint_shared_c, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_text, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_c, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    alloc_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    fleet_breaker, setup, teardown),
		cmocka_unit_test_setup_teardown(fleet_text, setup, teardown),
	};

	if (argc > 1)
		redis_port = atoi(argv[argc - 1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Issue 44 (pipelines through groups): every fleet breaker a pipeline
 * opens from text (the service's, and each method's with
 * breaker.per_method) syncs through one resil_fleet_group, shared by the
 * pipelines of the process on the same Redis, so that one sync is one
 * round trip whatever the number of methods. Against a real redis-server
 * that with_server starts (its port: the last argument); without it the
 * Redis parts skip. The clock is manual; the round trips are the group's
 * count (resil_fleet_group_get_info), the commands Redis's (INFO
 * commandstats).
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/fleet.h>
#include <resil/pipeline.h>
#include <resil/selector.h>

static int port;
static resil_manual_clock mc;

static redisContext *
admin(void)
{
	struct timeval tv = { 5, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	assert_non_null(c);
	assert_int_equal(c->err, 0);
	redisSetTimeout(c, tv);
	return c;
}

/* Redis's count of calls of cmd (INFO commandstats), e.g. "evalsha". */
static long
calls_of(const char *cmd)
{
	redisContext *c = admin();
	redisReply *r = redisCommand(c, "INFO commandstats");
	char want[64];
	const char *p;
	long n = 0;

	assert_non_null(r);
	snprintf(want, sizeof(want), "cmdstat_%s:calls=", cmd);
	p = strstr(r->str, want);
	if (p != NULL)
		n = atol(p + strlen(want));
	freeReplyObject(r);
	redisFree(c);
	return n;
}

static uint64_t
round_trips(resil_fleet_group *g)
{
	resil_fleet_group_info gi;

	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	return gi.round_trips;
}

static int
works(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	*out = resil_value_int(1);
	return 0;
}

static int
fails(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return 111;
}

static resil_err
call(resil_pipeline *p, const char *method, resil_call_fn fn)
{
	resil_args a;
	resil_result r;
	resil_err err;

	memset(&a, 0, sizeof(a));
	a.method = method;
	err = resil_pipeline_call(p, &a, fn, NULL, &r);
	resil_result_free(&r);
	return err;
}

#define NM 64

/* A pipeline on the fleet NAME with NM methods m0..m63, each on its own
 * fleet breaker (breaker.per_method); extra: more lines. */
static resil_pipeline *
make(const char *name, const char *extra, resil_config **cp)
{
	static char text[8192];
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_diag d;
	size_t n;
	int i;

	n = (size_t)snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:%d/%s\n"
	    "breaker.per_method=true\n"
	    "breaker.consecutive_failures=3\nbreaker.failure_rate=0\n"
	    "breaker.fleet.command_timeout=5s\n"
	    "breaker.fleet.connect_timeout=5s\n%s",
	    port, name, extra);
	for (i = 0; i < NM; i++)
		n += (size_t)snprintf(
		    text + n, sizeof(text) - n, "m%d.type=any\n", i);
	d.msg[0] = '\0';
	assert_int_equal(
	    resil_config_parse_string(cp, text, "t.conf", NULL, &d), RESIL_OK);
	pc = *resil_config_pipeline(*cp);
	pc.clock = resil_manual_clock_hook(&mc);
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	return p;
}

/* A pipeline of 64 fleet methods: one round trip per sync, each method
 * its own fleet breaker (NAME.METHOD) with the fleet's decisions. */
static void
test_fleet_pipeline_one_round_trip(void **state)
{
	char name[64];
	resil_pipeline *p;
	resil_config *c;
	resil_fleet_group *g;
	resil_fleet_group_info gi;
	resil_fleet *other;
	long ev, mg;
	uint64_t rt;
	int i;

	(void)state;
	if (port == 0)
		skip();
	snprintf(name, sizeof(name), "fpl-%ld", (long)getpid());
	p = make(name, "", &c);
	g = resil_pipeline_fleet_group(p);
	assert_non_null(g);
	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	assert_int_equal(gi.members, NM + 1); /* the service's and 64 */
	assert_true(gi.connected);
	assert_ptr_equal(resil_pipeline_fleet_of(p, NULL),
	    resil_pipeline_fleet(p));
	assert_ptr_not_equal(resil_pipeline_fleet_of(p, "m0"),
	    resil_pipeline_fleet_of(p, "m1"));
	assert_ptr_equal(resil_pipeline_fleet_of(p, "undeclared"),
	    resil_pipeline_fleet(p));
	assert_ptr_equal(resil_pipeline_breaker(p, "m5"),
	    resil_fleet_breaker(resil_pipeline_fleet_of(p, "m5")));

	/* The first sync: every breaker's script, in one round trip. */
	ev = calls_of("evalsha");
	rt = round_trips(g);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	assert_int_equal(round_trips(g) - rt, 1);
	assert_int_equal(calls_of("evalsha") - ev, NM + 1);
	for (i = 0; i < NM; i++) {
		char m[8];

		snprintf(m, sizeof(m), "m%d", i);
		assert_int_equal(call(p, m, works), RESIL_OK);
	}
	/* Healthy breakers with calls: one round trip, no script. */
	ev = calls_of("evalsha");
	mg = calls_of("mget");
	rt = round_trips(g);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	assert_int_equal(round_trips(g) - rt, 1);
	assert_int_equal(calls_of("evalsha") - ev, 0);
	assert_int_equal(calls_of("mget") - mg, 1);

	/* m0's failures open m0's fleet (quorum 1) and no other's: its
	 * script and the others' read still go in one round trip. */
	for (i = 0; i < 3; i++)
		assert_int_not_equal(call(p, "m0", fails), RESIL_E_OPEN);
	ev = calls_of("evalsha");
	rt = round_trips(g);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	assert_int_equal(round_trips(g) - rt, 1);
	assert_int_equal(calls_of("evalsha") - ev, 1);
	assert_int_equal(resil_fleet_get_state(resil_pipeline_fleet_of(p, "m0")),
	    RESIL_FLEET_OPEN);
	assert_int_equal(resil_fleet_get_state(resil_pipeline_fleet_of(p, "m1")),
	    RESIL_FLEET_CLOSED);
	assert_int_equal(call(p, "m0", works), RESIL_E_OPEN);
	assert_int_equal(call(p, "m1", works), RESIL_OK);

	/* Another instance of the fleet sees m0's breaker OPEN: its name in
	 * Redis is NAME.m0. */
	{
		resil_fleet_config fc = resil_fleet_config_default();
		resil_diag d;
		char n0[80];

		snprintf(n0, sizeof(n0), "%s.m0", name);
		fc.name = n0;
		fc.instance = "other";
		fc.port = (uint32_t)port;
		fc.command_timeout_ms = 5000;
		fc.breaker.clock = resil_manual_clock_hook(&mc);
		assert_int_equal(resil_fleet_new(&other, &fc, &d), RESIL_OK);
		assert_int_equal(resil_fleet_sync(other, 10), RESIL_OK);
		assert_int_equal(
		    resil_fleet_get_state(other), RESIL_FLEET_OPEN);
		resil_fleet_free(other);
	}
	resil_pipeline_free(p);
	resil_config_free(c);
}

/* Pipelines on one Redis with the same timeouts share one group (one
 * round trip for all); other timeouts, another group. */
static void
test_fleet_pipeline_shared_group(void **state)
{
	char a[64], b[64];
	resil_pipeline *p1, *p2, *p3;
	resil_config *c1, *c2, *c3;
	resil_fleet_group *g;
	resil_fleet_group_info gi;
	uint64_t rt;

	(void)state;
	if (port == 0)
		skip();
	snprintf(a, sizeof(a), "fpa-%ld", (long)getpid());
	snprintf(b, sizeof(b), "fpb-%ld", (long)getpid());
	p1 = make(a, "", &c1);
	p2 = make(b, "", &c2);
	p3 = make(b, "breaker.fleet.reconnect=2s\n", &c3);
	g = resil_pipeline_fleet_group(p1);
	assert_ptr_equal(g, resil_pipeline_fleet_group(p2));
	assert_ptr_not_equal(g, resil_pipeline_fleet_group(p3));
	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	assert_int_equal(gi.members, 2 * (NM + 1));
	rt = round_trips(g);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	assert_int_equal(round_trips(g) - rt, 1);
	assert_int_equal(resil_fleet_get_info(resil_pipeline_fleet_of(p2,
	                                          "m63"),
	                     &(resil_fleet_info) { 0 }),
	    RESIL_OK);
	/* A reload that declares one method more gives it its fleet
	 * breaker, in the same group; one that turns breaker.per_method off
	 * is refused. */
	{
		static char text[8192];
		resil_diag d;
		size_t n;
		int i;

		n = (size_t)snprintf(text, sizeof(text),
		    "service=S\nbreaker.fleet=redis://127.0.0.1:%d/%s\n"
		    "breaker.per_method=true\n"
		    "breaker.consecutive_failures=3\nbreaker.failure_rate=0\n"
		    "breaker.fleet.command_timeout=5s\n"
		    "breaker.fleet.connect_timeout=5s\n",
		    port, b);
		for (i = 0; i <= NM; i++)
			n += (size_t)snprintf(
			    text + n, sizeof(text) - n, "m%d.type=any\n", i);
		d.msg[0] = '\0';
		if (resil_pipeline_reload_string(p2, text, "r.conf", &d) !=
		    RESIL_OK)
			fail_msg("reload: %s", d.msg);
		assert_non_null(resil_pipeline_fleet_of(p2, "m64"));
		assert_ptr_not_equal(resil_pipeline_fleet_of(p2, "m64"),
		    resil_pipeline_fleet(p2));
		assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
		assert_int_equal(gi.members, 2 * (NM + 1) + 1);
		assert_int_equal(resil_pipeline_reload_string(p2,
		                     "service=S\nbreaker.per_method=false\n",
		                     "r.conf", &d),
		    RESIL_E_INVAL);
		assert_non_null(strstr(d.msg, "breaker.per_method"));
	}
	/* The first pipeline gone, the group stays for the second. */
	resil_pipeline_free(p1);
	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	assert_int_equal(gi.members, NM + 2);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	resil_pipeline_free(p2);
	resil_pipeline_free(p3);
	resil_config_free(c1);
	resil_config_free(c2);
	resil_config_free(c3);
}

/* What cannot be: a method name that cannot name a fleet breaker, a
 * borrowed fleet with breaker.per_method, a reload that turns
 * breaker.per_method off. */
static void
test_fleet_pipeline_refused(void **state)
{
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_config *c;
	resil_diag d;
	char text[512];

	(void)state;
	snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:1/"
	    "a-very-long-fleet-name-of-forty-characters\n"
	    "breaker.per_method=true\n"
	    "a_method_name_long_enough_to_pass_63.type=any\n");
	assert_int_equal(
	    resil_config_parse_string(&c, text, "t.conf", NULL, &d), RESIL_OK);
	pc = *resil_config_pipeline(c);
	pc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker.fleet: method \"a_method_name_long_enough_to_pass_63\" "
	    "cannot name a fleet breaker "
	    "(a-very-long-fleet-name-of-forty-characters.METHOD must be "
	    "1..63 characters of [A-Za-z0-9._-])");
	assert_null(p);
	resil_config_free(c);

	{
		resil_fleet_config fc = resil_fleet_config_default();
		resil_fleet *f;

		fc.name = "borrowed";
		fc.port = 1;
		fc.connect_timeout_ms = 50;
		assert_int_equal(resil_fleet_new(&f, &fc, &d), RESIL_OK);
		assert_int_equal(resil_config_parse_string(&c,
		                     "service=S\nbreaker.per_method=true\n"
		                     "m.type=any\n",
		                     "t.conf", NULL, &d),
		    RESIL_OK);
		pc = *resil_config_pipeline(c);
		pc.fleet = f;
		assert_int_equal(
		    resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
		assert_string_equal(d.msg,
		    "fleet: not with breaker.per_method (the shared breaker "
		    "is the service's)");
		resil_config_free(c);
		resil_fleet_free(f);
	}
}

/* ---- the endpoints' breakers on the fleet (breaker.fleet.endpoints) */

static int dead[2]; /* endpoint i fails (ECONNREFUSED) */
static int attempts[2];

static int
provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	int i = strcmp(ep->address, "10.0.0.1:20880") == 0 ? 0 : 1;

	(void)ctx;
	(void)args;
	attempts[i]++;
	if (dead[i])
		return 111;
	*out = resil_value_int(i);
	return 0;
}

static resil_err
invoke(resil_pipeline *p)
{
	resil_invocation inv;
	resil_result r;
	resil_err err;

	resil_invocation_init(&inv, "m");
	err = resil_pipeline_invoke_ex(p, NULL, &inv, provider, NULL, &r);
	resil_result_free(&r);
	return err;
}

/* Another instance's handle of fleet name (its own connection). */
static resil_fleet *
member(const char *name)
{
	resil_fleet_config fc = resil_fleet_config_default();
	resil_fleet *f;
	resil_diag d;

	fc.name = name;
	fc.instance = "other";
	fc.port = (uint32_t)port;
	fc.command_timeout_ms = 5000;
	fc.breaker.clock = resil_manual_clock_hook(&mc);
	fc.breaker.consecutive_failures = 1;
	fc.breaker.failure_rate_pct = 0;
	assert_int_equal(resil_fleet_new(&f, &fc, &d), RESIL_OK);
	return f;
}

/* Under a cluster, breaker.fleet.endpoints: each endpoint's breaker is a
 * fleet breaker NAME.ep.ADDRESS in the pipeline's group (one round trip
 * with the service's), whose trips are the fleet's: this instance's
 * failures on one endpoint open it for every member, and another
 * member's open it here. */
static void
test_fleet_pipeline_endpoints(void **state)
{
	resil_endpoint_spec specs[2] = {
		resil_endpoint_spec_default("10.0.0.1:20880"),
		resil_endpoint_spec_default("10.0.0.2:20880"),
	};
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_fleet_group_info gi;
	resil_directory *dir = NULL;
	resil_selector *sel = NULL;
	resil_pipeline *p = NULL;
	resil_fleet_group *g;
	resil_fleet *o0, *o1;
	resil_config *c;
	resil_diag d;
	char text[768], name[64], n0[96], n1[96];
	long ev;
	uint64_t rt;
	int k;

	(void)state;
	if (port == 0)
		skip();
	snprintf(name, sizeof(name), "fpe-%ld", (long)getpid());
	snprintf(text, sizeof(text),
	    "service=S\ncluster=failover\nretries=1\n"
	    "breaker.fleet=redis://127.0.0.1:%d/%s\n"
	    "breaker.fleet.endpoints=true\n"
	    "breaker.consecutive_failures=100\nbreaker.failure_rate=0\n"
	    "breaker.fleet.command_timeout=5s\n"
	    "endpoint.breaker.consecutive_failures=2\n"
	    "endpoint.breaker.failure_rate=0\n",
	    port, name);
	assert_int_equal(
	    resil_config_parse_string(&c, text, "t.conf", NULL, &d), RESIL_OK);
	resil_directory_config_init(&dc);
	resil_config_directory(c, &dc);
	resil_config_selector(c, &sc);
	assert_int_equal(resil_directory_new(&dir, &dc, &d), RESIL_OK);
	assert_int_equal(resil_selector_new(&sel, dir, &sc, &d), RESIL_OK);
	/* One endpoint before the pipeline, both after. */
	assert_int_equal(resil_directory_push(dir, specs, 1, &d), RESIL_OK);
	pc = *resil_config_pipeline(c);
	pc.selector = sel;
	pc.clock = resil_manual_clock_hook(&mc);
	d.msg[0] = '\0';
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("resil_pipeline_new: %s", d.msg);
	assert_int_equal(resil_directory_push(dir, specs, 2, &d), RESIL_OK);
	g = resil_pipeline_fleet_group(p);
	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	assert_int_equal(gi.members, 3); /* the service's and 2 endpoints */

	/* One round trip for the three. */
	ev = calls_of("evalsha");
	rt = round_trips(g);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	assert_int_equal(round_trips(g) - rt, 1);
	assert_int_equal(calls_of("evalsha") - ev, 3);

	/* Endpoint 0 dead: failover answers every call; its breaker trips
	 * and the sync opens its fleet breaker; endpoint 1's stays
	 * CLOSED. */
	dead[0] = 1;
	for (k = 0; k < 12; k++)
		assert_int_equal(invoke(p), RESIL_OK);
	assert_true(attempts[0] >= 2);
	rt = round_trips(g);
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	assert_int_equal(round_trips(g) - rt, 1);
	snprintf(n0, sizeof(n0), "%s.ep.10.0.0.1_20880", name);
	snprintf(n1, sizeof(n1), "%s.ep.10.0.0.2_20880", name);
	o0 = member(n0);
	o1 = member(n1);
	assert_int_equal(resil_fleet_sync(o0, 10), RESIL_OK);
	assert_int_equal(resil_fleet_sync(o1, 10), RESIL_OK);
	assert_int_equal(resil_fleet_get_state(o0), RESIL_FLEET_OPEN);
	assert_int_equal(resil_fleet_get_state(o1), RESIL_FLEET_CLOSED);
	assert_int_equal(
	    resil_breaker_get_state(resil_directory_breaker(dir, specs[0].address)),
	    RESIL_BREAKER_FORCED_OPEN);
	/* Endpoint 0 is no candidate now: no attempt reaches it. */
	attempts[0] = attempts[1] = 0;
	for (k = 0; k < 6; k++)
		assert_int_equal(invoke(p), RESIL_OK);
	assert_int_equal(attempts[0], 0);
	assert_int_equal(attempts[1], 6);

	/* Another member's failure on endpoint 1 opens its fleet breaker
	 * here too, at this instance's next sync: no endpoint is left. */
	{
		resil_fleet_permit fp;

		assert_int_equal(resil_fleet_acquire(o1, &fp), RESIL_OK);
		assert_int_equal(
		    resil_fleet_record(o1, &fp, RESIL_OUTCOME_FAILURE),
		    RESIL_OK);
		assert_int_equal(resil_fleet_sync(o1, 11), RESIL_OK);
		assert_int_equal(resil_fleet_get_state(o1), RESIL_FLEET_OPEN);
	}
	assert_int_equal(
	    resil_fleet_group_sync(g, resil_manual_clock_advance(&mc, 1)),
	    RESIL_OK);
	attempts[0] = attempts[1] = 0;
	assert_int_not_equal(invoke(p), RESIL_OK);
	assert_int_equal(attempts[0] + attempts[1], 0);
	dead[0] = 0;
	resil_fleet_free(o0);
	resil_fleet_free(o1);

	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(dir);
	resil_config_free(c);
}

/* breaker.fleet.endpoints needs a selector. */
static void
test_fleet_pipeline_endpoints_refused(void **state)
{
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_config *c;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\nbreaker.fleet=redis://127.0.0.1:1/x\n"
	                     "breaker.fleet.endpoints=true\n"
	                     "breaker.fleet.connect_timeout=50ms\n",
	                     "t.conf", NULL, &d),
	    RESIL_OK);
	pc = *resil_config_pipeline(c);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "breaker.fleet.endpoints: needs a selector (the endpoints of a "
	    "cluster)");
	resil_config_free(c);
}

/* The group's helper thread (resil_fleet_group_start / _stop), which
 * breaker.fleet_sync runs: it syncs the group; a member's own sync is
 * refused meanwhile; the group's free stops it. */
static void
test_fleet_pipeline_group_thread(void **state)
{
	resil_fleet_group_config gc;
	resil_fleet_config fc = resil_fleet_config_default();
	resil_fleet_group *g;
	resil_fleet_info fi;
	resil_fleet *f;
	resil_diag d;
	char name[64];
	int i;

	(void)state;
	if (port == 0)
		skip();
	resil_fleet_group_config_init(&gc);
	gc.port = (uint32_t)port;
	gc.command_timeout_ms = 5000;
	gc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_OK);
	snprintf(name, sizeof(name), "fpt-%ld", (long)getpid());
	fc.name = name;
	fc.group = g;
	fc.breaker.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_fleet_new(&f, &fc, &d), RESIL_OK);
	assert_int_equal(resil_fleet_group_start(g, 0, &d), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_group_start(NULL, 5, &d), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_group_start(g, 5, &d), RESIL_OK);
	assert_int_equal(resil_fleet_group_start(g, 5, &d), RESIL_E_MISUSE);
	assert_int_equal(resil_fleet_sync(f, 1), RESIL_E_MISUSE);
	memset(&fi, 0, sizeof(fi));
	for (i = 0; i < 2000 && fi.syncs == 0; i++) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* the thread's own pace, real time */
		assert_int_equal(resil_fleet_get_info(f, &fi), RESIL_OK);
	}
	assert_true(fi.syncs > 0);
	assert_int_equal(resil_fleet_group_stop(g), RESIL_OK);
	assert_int_equal(resil_fleet_group_stop(g), RESIL_OK);
	assert_int_equal(resil_fleet_sync(f, 2), RESIL_OK);
	/* Running when freed: the free stops it. */
	assert_int_equal(resil_fleet_group_start(g, 1000, &d), RESIL_OK);
	resil_fleet_free(f);
	assert_int_equal(resil_fleet_group_free(g), RESIL_OK);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_pipeline_one_round_trip),
		cmocka_unit_test(test_fleet_pipeline_shared_group),
		cmocka_unit_test(test_fleet_pipeline_refused),
		cmocka_unit_test(test_fleet_pipeline_endpoints),
		cmocka_unit_test(test_fleet_pipeline_endpoints_refused),
		cmocka_unit_test(test_fleet_pipeline_group_thread),
	};

	if (argc > 1)
		port = atoi(argv[argc - 1]);
	resil_manual_clock_init(&mc, 1000);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

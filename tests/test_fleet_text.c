/*
 * Issue 44: every fleet setting in text (breaker.fleet.*, the
 * redis-sentinel:// form) and the fleet's events at the pipeline's
 * listener. Run under with_server (a redis-server's port, the last
 * argument); the tests that need it skip without.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/fleet.h>
#include <resil/pipeline.h>
#include <resil/selector.h>

static int port;

/* Parse text and make its pipeline: RESIL_OK and *p, or the error with
 * the message in d. */
static resil_err
make(const char *text, resil_pipeline **p, resil_config **c, resil_diag *d)
{
	resil_pipeline_config pc;
	resil_err e;

	*p = NULL;
	*c = NULL;
	d->msg[0] = '\0';
	e = resil_config_parse_string(c, text, "t.conf", NULL, d);
	if (e != RESIL_OK)
		return e;
	pc = *resil_config_pipeline(*c);
	e = resil_pipeline_new(p, &pc, d);
	if (e != RESIL_OK) {
		resil_config_free(*c);
		*c = NULL;
	}
	return e;
}

/* Every key reaches the fleet: the settings text its members agree on,
 * the timeouts, reconnect and the local lease cap. */
static void
test_fleet_text_every_key(void **state)
{
	resil_fleet_info fi;
	resil_pipeline *p;
	resil_config *c;
	resil_diag d;
	char text[1024];

	(void)state;
	snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:1/ftk\n"
	    "breaker.fleet.quorum=3\n"
	    "breaker.fleet.quorum_traffic=40\n"
	    "breaker.fleet.probe_leases=5\n"
	    "breaker.fleet.max_local_leases=2\n"
	    "breaker.fleet.open_wait=45s\n"
	    "breaker.fleet.lease=2500\n"
	    "breaker.fleet.vote=12s\n"
	    "breaker.fleet.bucket=500ms\n"
	    "breaker.fleet.buckets=20\n"
	    "breaker.fleet.connect_timeout=300ms\n"
	    "breaker.fleet.command_timeout=1.5s\n"
	    "breaker.fleet.reconnect=2s\n"
	    "breaker.open_wait=1s\n");
	assert_int_equal(make(text, &p, &c, &d), RESIL_OK);
	assert_int_equal(
	    resil_fleet_get_info(resil_pipeline_fleet(p), &fi), RESIL_OK);
	assert_string_equal(fi.settings,
	    "quorum=3 quorum_traffic_pct=40 probe_leases=5 "
	    "open_wait_ms=45000 lease_ms=2500 vote_ms=12000 bucket_ms=500 "
	    "buckets=20");
	assert_int_equal(fi.connect_timeout_ms, 300);
	assert_int_equal(fi.command_timeout_ms, 1500);
	assert_int_equal(fi.reconnect_ms, 2000);
	assert_int_equal(fi.max_local_leases, 2);
	resil_pipeline_free(p);
	resil_config_free(c);

	/* Without them: the defaults; the fleet's open wait from
	 * breaker.open_wait when only that is set. */
	assert_int_equal(make("service=S\nbreaker.fleet=redis://127.0.0.1:1/"
	                      "ftk\nbreaker.open_wait=7s\n",
	                     &p, &c, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_fleet_get_info(resil_pipeline_fleet(p), &fi), RESIL_OK);
	assert_string_equal(fi.settings,
	    "quorum=1 quorum_traffic_pct=0 probe_leases=1 open_wait_ms=7000 "
	    "lease_ms=10000 vote_ms=10000 bucket_ms=1000 buckets=10");
	assert_int_equal(fi.connect_timeout_ms, 250);
	assert_int_equal(fi.command_timeout_ms, 250);
	assert_int_equal(fi.reconnect_ms, 1000);
	assert_int_equal(fi.max_local_leases, 1);
	resil_pipeline_free(p);
	resil_config_free(c);
}

static void
test_fleet_text_bad_values(void **state)
{
	static const struct {
		const char *line, *msg;
	} cases[] = {
		{ "breaker.fleet.quorum=0",
		    "t.conf:3: breaker.fleet.quorum: 0 is out of range "
		    "1..1024" },
		{ "breaker.fleet.quorum=2000",
		    "t.conf:3: breaker.fleet.quorum: 2000 is out of range "
		    "1..1024" },
		{ "breaker.fleet.quorum=two",
		    "t.conf:3: breaker.fleet.quorum: \"two\" is not an "
		    "unsigned integer" },
		{ "breaker.fleet.quorum_traffic=101",
		    "t.conf:3: breaker.fleet.quorum_traffic: 101 is out of "
		    "range 0..100" },
		{ "breaker.fleet.probe_leases=0",
		    "t.conf:3: breaker.fleet.probe_leases: 0 is out of range "
		    "1..1024" },
		{ "breaker.fleet.max_local_leases=65",
		    "t.conf:3: breaker.fleet.max_local_leases: 65 is out of "
		    "range 1..64" },
		{ "breaker.fleet.buckets=1001",
		    "t.conf:3: breaker.fleet.buckets: 1001 is out of range "
		    "1..1000" },
		{ "breaker.fleet.open_wait=0",
		    "t.conf:3: breaker.fleet.open_wait: 0 is out of range "
		    "1ms..86400000ms" },
		{ "breaker.fleet.open_wait=25h",
		    "t.conf:3: breaker.fleet.open_wait: 25h is out of range "
		    "1ms..24h" },
		{ "breaker.fleet.lease=500us",
		    "t.conf:3: breaker.fleet.lease: 500us is out of range "
		    "1000us..86400000000us" },
		{ "breaker.fleet.vote=0s",
		    "t.conf:3: breaker.fleet.vote: 0s is out of range "
		    "0.001s (1ms)..86400s" },
		{ "breaker.fleet.bucket=2h",
		    "t.conf:3: breaker.fleet.bucket: 2h is out of range "
		    "1ms..1h" },
		{ "breaker.fleet.connect_timeout=61s",
		    "t.conf:3: breaker.fleet.connect_timeout: 61s is out of "
		    "range 0.001s (1ms)..60s" },
		{ "breaker.fleet.command_timeout=0",
		    "t.conf:3: breaker.fleet.command_timeout: 0 is out of "
		    "range 1ms..60000ms" },
		{ "breaker.fleet.command_timeout=5 parsecs", NULL },
		{ "breaker.fleet.reconnect=0",
		    "t.conf:3: breaker.fleet.reconnect: 0 is out of range "
		    "1ms..3600000ms" },
	};
	char text[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		resil_config *c = NULL;
		resil_diag d;
		resil_err e;

		snprintf(text, sizeof(text),
		    "service=S\nbreaker.fleet=redis://h/n\n%s\n",
		    cases[i].line);
		d.msg[0] = '\0';
		e = resil_config_parse_string(&c, text, "t.conf", NULL, &d);
		if (e == RESIL_OK)
			resil_config_free(c);
		assert_int_equal(e, RESIL_E_INVAL);
		if (cases[i].msg == NULL) /* a duration's own message */
			assert_non_null(strstr(d.msg,
			    "t.conf:3: breaker."
			    "fleet.command_timeout: "));
		else
			assert_string_equal(d.msg, cases[i].msg);
	}
}

static void
test_fleet_text_refused(void **state)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{ "service=S\nbreaker.fleet.quorum=2\n",
		    "t.conf:2: breaker.fleet.quorum: needs breaker.fleet (a "
		    "fleet given as a handle has its own settings)" },
		{ "service=S\nbreaker.enabled=true\n"
		  "breaker.fleet.reconnect=5s\n",
		    "t.conf:3: breaker.fleet.reconnect: needs breaker.fleet "
		    "(a "
		    "fleet given as a handle has its own settings)" },
		{ "service=S\nbreaker.fleet=redis-sentinel://h1:1,h2/m/n\n",
		    "t.conf:2: breaker.fleet: must be 1..8 sentinels, "
		    "HOST:PORT separated by ',' (PORT 1..65535)" },
		{ "service=S\nbreaker.fleet=redis-sentinel://h1:1/m\n",
		    "t.conf:2: breaker.fleet: \"redis-sentinel://h1:1/m\" is "
		    "not redis-sentinel://HOST:PORT[,...]/MASTER/NAME" },
		{ "service=S\nbreaker.fleet=redis-sentinel://h1:1//n\n",
		    "t.conf:2: breaker.fleet: the master's name must be "
		    "1..63 characters of [A-Za-z0-9._-]" },
		{ "service=S\nbreaker.fleet=redis-sentinel://h1:0/m/n\n",
		    "t.conf:2: breaker.fleet: must be 1..8 sentinels, "
		    "HOST:PORT separated by ',' (PORT 1..65535)" },
		{ "service=S\nbreaker.fleet=redis-sentinel://a:1,b:2,c:3,d:4,"
		  "e:5,f:6,g:7,h:8,i:9/m/n\n",
		    "t.conf:2: breaker.fleet: must be 1..8 sentinels, "
		    "HOST:PORT separated by ',' (PORT 1..65535)" },
		{ "service=S\nbreaker.fleet=redis-sentinel://h1:1/m/n n\n",
		    "t.conf:2: breaker.fleet: name \"n n\" is not 1..63 "
		    "characters of [A-Za-z0-9._-]" },
		/* Issue 44 (h2): the fleet limiter through Sentinel too. */
		{ "service=S\nratelimit.fleet=redis-sentinel://h1:1/m\n",
		    "t.conf:2: ratelimit.fleet: \"redis-sentinel://h1:1/m\" is "
		    "not redis-sentinel://HOST:PORT[,...]/MASTER/NAME" },
		{ "service=S\nbreaker.fleet.endpoints=true\n",
		    "t.conf:2: breaker.fleet.endpoints: needs breaker.fleet "
		    "(the endpoints' breakers join the fleet the text "
		    "names)" },
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
		if (e == RESIL_OK)
			resil_config_free(c);
		assert_int_equal(e, RESIL_E_INVAL);
		assert_string_equal(d.msg, cases[i].msg);
	}
}

/* A reload keeps them: another value is refused, the same accepted. */
static void
test_fleet_text_reload(void **state)
{
	resil_pipeline *p;
	resil_config *c;
	resil_diag d;

	(void)state;
	assert_int_equal(make("service=S\nbreaker.fleet=redis://127.0.0.1:1/"
	                      "ftr\nbreaker.fleet.quorum=2\n",
	                     &p, &c, &d),
	    RESIL_OK);
	assert_int_equal(resil_pipeline_reload_string(p,
	                     "service=S\nbreaker.fleet=redis://127.0.0.1:1/"
	                     "ftr\nbreaker.fleet.quorum=3\n",
	                     "r.conf", &d),
	    RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "breaker.fleet.quorum: cannot change by reload (shared state is "
	    "fixed when the pipeline is created)"));
	assert_int_equal(resil_pipeline_reload_string(p,
	                     "service=S\nbreaker.fleet=redis://127.0.0.1:1/"
	                     "ftr\nbreaker.fleet.quorum=2\n",
	                     "r.conf", &d),
	    RESIL_OK);
	resil_pipeline_free(p);
	resil_config_free(c);
}

typedef struct events {
	unsigned n, fleet;
	char text[16][256];
} events;

static void
on_event(const resil_pipeline_event *ev, void *ctx)
{
	events *e = ctx;

	if (ev->fleet == NULL)
		return;
	assert_int_equal(ev->stage, RESIL_STAGE_BREAKER);
	if (e->fleet < 16)
		snprintf(
		    e->text[e->fleet], sizeof(e->text[0]), "%s", ev->text);
	e->fleet++;
}

/* The fleet's events reach the pipeline's listener: local (Redis
 * unreachable at creation), connected and state at the first sync, a
 * settings refusal with the keys that differ. */
static void
test_fleet_text_events(void **state)
{
	resil_pipeline_config pc;
	resil_pipeline *p;
	resil_fleet *other;
	resil_config *c;
	resil_diag d;
	events e;
	char text[512], want[512];
	long id = (long)getpid();

	(void)state;
	memset(&e, 0, sizeof(e));
	assert_int_equal(resil_config_parse_string(&c,
	                     "service=S\nbreaker.fleet=redis://127.0.0.1:1/"
	                     "fte\nbreaker.fleet.connect_timeout=100ms\n",
	                     "t.conf", NULL, &d),
	    RESIL_OK);
	pc = *resil_config_pipeline(c);
	pc.listener = on_event;
	pc.listener_ctx = &e;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	assert_int_equal(e.fleet, 1);
	assert_non_null(strstr(e.text[0],
	    "fleet fte local (connect "
	    "127.0.0.1:1: "));
	resil_pipeline_free(p);
	resil_config_free(c);
	if (port == 0)
		skip();

	/* Another member (instance "other") holds the fleet's settings,
	 * quorum 3; the pipeline's member, quorum 2, is refused. */
	{
		resil_fleet_config fc = resil_fleet_config_default();
		char name[64];

		snprintf(name, sizeof(name), "fte-%ld", id);
		fc.name = name;
		fc.instance = "other";
		fc.port = (uint32_t)port;
		fc.quorum = 3;
		fc.command_timeout_ms = 5000;
		assert_int_equal(resil_fleet_new(&other, &fc, &d), RESIL_OK);
		assert_int_equal(resil_fleet_sync(other, 1), RESIL_OK);
	}
	memset(&e, 0, sizeof(e));
	snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:%d/fte-%ld\n"
	    "breaker.fleet.quorum=2\nbreaker.fleet.command_timeout=5s\n",
	    port, id);
	assert_int_equal(
	    resil_config_parse_string(&c, text, "t.conf", NULL, &d), RESIL_OK);
	pc = *resil_config_pipeline(c);
	pc.listener = on_event;
	pc.listener_ctx = &e;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	assert_int_equal(e.fleet, 0);
	assert_int_equal(
	    resil_fleet_sync(resil_pipeline_fleet(p), 1), RESIL_E_UNAVAILABLE);
	assert_int_equal(e.fleet, 1);
	snprintf(want, sizeof(want),
	    "fleet fte-%ld settings (fleet fte-%ld: settings differ from the "
	    "fleet's: quorum=2 (the fleet's 3))",
	    id, id);
	assert_string_equal(e.text[0], want);

	/* The other member gone (its settings then no one's), the pipeline's
	 * member joins: connected, state. */
	resil_fleet_free(other);
	{
		redisContext *a = redisConnect("127.0.0.1", port);
		redisReply *r;

		assert_non_null(a);
		r = redisCommand(a, "DEL resil:fleet:fte-%ld:instances", id);
		freeReplyObject(r);
		assert_int_equal(
		    resil_fleet_sync(resil_pipeline_fleet(p), 2), RESIL_OK);
		assert_int_equal(e.fleet, 3);
		snprintf(want, sizeof(want),
		    "fleet fte-%ld connected (synced)", id);
		assert_string_equal(e.text[1], want);
		snprintf(want, sizeof(want), "fleet fte-%ld state CLOSED", id);
		assert_string_equal(e.text[2], want);

		/* Nonsense in Redis: an error event, then local. */
		r = redisCommand(
		    a, "HSET resil:fleet:fte-%ld:state state banana", id);
		freeReplyObject(r);
		assert_int_equal(resil_fleet_sync(resil_pipeline_fleet(p), 3),
		    RESIL_E_UNAVAILABLE);
		assert_int_equal(e.fleet, 5);
		assert_non_null(strstr(e.text[3], "fleet fte-"));
		assert_non_null(strstr(e.text[3], " error (redis script: "));
		assert_non_null(strstr(e.text[3], "malformed state"));
		assert_non_null(strstr(e.text[4], " local (redis script: "));
		redisFree(a);
	}
	resil_pipeline_free(p);
	resil_config_free(c);
}

/* ---- issue 44: the fleet under a cluster ---- */

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
invoke(resil_pipeline *p, resil_result *r)
{
	resil_invocation inv;

	resil_invocation_init(&inv, "m");
	return resil_pipeline_invoke_ex(p, NULL, &inv, provider, NULL, r);
}

/* breaker.fleet with a selector: the service breaker is the fleet's and
 * records whole calls (an attempt that failed over is no failure of the
 * call); the endpoints' breakers are local (endpoint.breaker.*). The
 * fleet's OPEN rejects the next call with the service breaker's message
 * and is seen by another member. */
static void
test_fleet_text_cluster(void **state)
{
	resil_endpoint_spec specs[2] = {
		resil_endpoint_spec_default("10.0.0.1:20880"),
		resil_endpoint_spec_default("10.0.0.2:20880"),
	};
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_breaker_metrics bm;
	resil_fleet_config fc = resil_fleet_config_default();
	resil_directory *dir = NULL;
	resil_selector *sel = NULL;
	resil_pipeline *p = NULL;
	resil_fleet *other;
	resil_config *c;
	resil_result r;
	resil_diag d;
	char text[512], name[64];
	long id = (long)getpid();
	int k;

	(void)state;
	if (port == 0)
		skip();
	snprintf(name, sizeof(name), "ftc-%ld", id);
	snprintf(text, sizeof(text),
	    "service=S\ncluster=failover\nretries=1\n"
	    "breaker.fleet=redis://127.0.0.1:%d/%s\n"
	    "breaker.consecutive_failures=3\nbreaker.failure_rate=0\n"
	    "breaker.fleet.command_timeout=5s\n"
	    "endpoint.breaker.consecutive_failures=100\n",
	    port, name);
	assert_int_equal(
	    resil_config_parse_string(&c, text, "t.conf", NULL, &d), RESIL_OK);
	resil_directory_config_init(&dc);
	resil_config_directory(c, &dc);
	resil_config_selector(c, &sc);
	assert_int_equal(resil_directory_new(&dir, &dc, &d), RESIL_OK);
	assert_int_equal(resil_selector_new(&sel, dir, &sc, &d), RESIL_OK);
	pc = *resil_config_pipeline(c);
	pc.selector = sel;
	d.msg[0] = '\0';
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	assert_int_equal(resil_directory_push(dir, specs, 2, &d), RESIL_OK);
	assert_int_equal(
	    resil_fleet_sync(resil_pipeline_fleet(p), 1), RESIL_OK);

	/* One endpoint dead: failover answers every call; the fleet's local
	 * breaker sees whole calls, all successes. */
	dead[0] = 1;
	for (k = 0; k < 20; k++) {
		assert_int_equal(invoke(p, &r), RESIL_OK);
		assert_int_equal(r.err, RESIL_OK);
		resil_result_free(&r);
	}
	assert_true(attempts[0] > 0);
	resil_breaker_get_metrics(
	    resil_fleet_breaker(resil_pipeline_fleet(p)), &bm);
	assert_int_equal(bm.successes, 20);
	assert_int_equal(bm.failures, 0);

	/* Both dead: three failed calls trip it, the sync opens the fleet,
	 * the next call is rejected before any attempt. */
	dead[1] = 1;
	for (k = 0; k < 3; k++) {
		(void)invoke(p, &r); /* the call's error */
		assert_int_not_equal(r.err, RESIL_OK);
		resil_result_free(&r);
	}
	resil_breaker_get_metrics(
	    resil_fleet_breaker(resil_pipeline_fleet(p)), &bm);
	assert_int_equal(bm.failures, 3);
	assert_int_equal(
	    resil_fleet_sync(resil_pipeline_fleet(p), 2), RESIL_OK);
	assert_int_equal(
	    resil_fleet_get_state(resil_pipeline_fleet(p)), RESIL_FLEET_OPEN);
	attempts[0] = attempts[1] = 0;
	assert_int_equal(invoke(p, &r), RESIL_E_OPEN);
	assert_int_equal(r.err, RESIL_E_OPEN);
	assert_non_null(strstr(
	    r.message, "rejected, the service's circuit breaker is OPEN"));
	resil_result_free(&r);
	assert_int_equal(attempts[0] + attempts[1], 0);

	/* Another member of the fleet sees it OPEN. */
	fc.name = name;
	fc.instance = "other";
	fc.port = (uint32_t)port;
	fc.command_timeout_ms = 5000;
	assert_int_equal(resil_fleet_new(&other, &fc, &d), RESIL_OK);
	assert_int_equal(resil_fleet_sync(other, 1), RESIL_OK);
	assert_int_equal(resil_fleet_get_state(other), RESIL_FLEET_OPEN);
	resil_fleet_free(other);

	resil_pipeline_free(p);
	resil_selector_free(sel);
	resil_directory_free(dir);
	resil_config_free(c);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_text_every_key),
		cmocka_unit_test(test_fleet_text_bad_values),
		cmocka_unit_test(test_fleet_text_refused),
		cmocka_unit_test(test_fleet_text_reload),
		cmocka_unit_test(test_fleet_text_events),
		cmocka_unit_test(test_fleet_text_cluster),
	};

	if (argc > 1)
		port = atoi(argv[argc - 1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Issue 44: fleet groups (resil_fleet_group): many fleet breakers of one
 * instance synced in one round trip, only what changed sent. Against a
 * real redis-server that with_server starts (its port: the last
 * argument); without it every test skips. The clock is manual; the
 * round trips are counted by the group (resil_fleet_group_get_info) and
 * the commands by Redis (INFO commandstats).
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

#include <resil/clock.h>
#include <resil/fleet.h>

static int port;
static unsigned seq;
static resil_manual_clock mc;

typedef struct heard {
	unsigned n[8];
	char last[RESIL_DIAG_MAX];
} heard;

static void
on_event(const resil_fleet_event *ev, void *ctx)
{
	heard *h = ctx;

	if ((unsigned)ev->kind < 8)
		h->n[ev->kind]++;
	snprintf(h->last, sizeof(h->last), "%s", ev->detail);
}

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

#define N 64

typedef struct fx {
	resil_fleet_group *g;
	resil_fleet *f[N];
	char names[N][32];
	heard h[N];
	unsigned n;
} fx;

/* n handles of instance "a", fleets PREFIX-0.., in a group on port pt. */
static void
fx_make(fx *x, unsigned n, uint32_t pct, int pt)
{
	resil_fleet_group_config gc;
	unsigned i;

	memset(x, 0, sizeof(*x));
	x->n = n;
	resil_fleet_group_config_init(&gc);
	gc.port = (uint32_t)pt;
	gc.command_timeout_ms = 5000;
	gc.connect_timeout_ms = 5000;
	gc.reconnect_ms = 0;
	assert_int_equal(resil_fleet_group_new(&x->g, &gc, NULL), RESIL_OK);
	seq++;
	for (i = 0; i < n; i++) {
		resil_fleet_config cfg = resil_fleet_config_default();

		snprintf(x->names[i], sizeof(x->names[i]), "g%d-%u-%u",
		    (int)getpid(), seq, i);
		cfg.name = x->names[i];
		cfg.instance = "a";
		cfg.group = x->g;
		cfg.quorum_traffic_pct = pct;
		cfg.breaker.failure_rate_pct = 0;
		cfg.breaker.consecutive_failures = 1;
		cfg.breaker.clock = resil_manual_clock_hook(&mc);
		cfg.listener = on_event;
		cfg.listener_ctx = &x->h[i];
		assert_int_equal(
		    resil_fleet_new(&x->f[i], &cfg, NULL), RESIL_OK);
	}
}

static void
fx_free(fx *x)
{
	unsigned i;

	assert_int_equal(resil_fleet_group_free(x->g), RESIL_E_MISUSE);
	for (i = 0; i < x->n; i++)
		resil_fleet_free(x->f[i]);
	assert_int_equal(resil_fleet_group_free(x->g), RESIL_OK);
}

static void
one_call(resil_fleet *f, resil_outcome o)
{
	resil_fleet_permit p;

	assert_int_equal(resil_fleet_acquire(f, &p), RESIL_OK);
	assert_int_equal(resil_fleet_record(f, &p, o), RESIL_OK);
}

static resil_fleet_group_info
info_of(resil_fleet_group *g)
{
	resil_fleet_group_info gi;

	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	return gi;
}

/* 64 breakers, one round trip per sync; after the first (every script),
 * healthy breakers with calls send only a read of their state mirror:
 * one MGET for the 64, no script. */
static void
test_fleet_group_one_round_trip(void **state)
{
	resil_fleet_group_info gi;
	resil_fleet_info fi;
	long ev0, mg0;
	fx x;
	unsigned i;

	if (port == 0)
		skip();
	(void)state;
	fx_make(&x, N, 0, port);
	ev0 = calls_of("evalsha");
	assert_int_equal(resil_fleet_group_sync(x.g, 1000), RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.members, N);
	assert_int_equal(gi.round_trips, 1);
	assert_int_equal(gi.scripts, N);
	assert_int_equal(gi.reads, 0);
	assert_int_equal(calls_of("evalsha") - ev0, N);
	for (i = 0; i < N; i++) {
		assert_int_equal(resil_fleet_get_info(x.f[i], &fi), RESIL_OK);
		assert_int_equal(fi.local_mode, 0);
		assert_int_equal(fi.syncs, 1);
		assert_int_equal(x.h[i].n[RESIL_FLEET_EV_CONNECTED], 1);
		one_call(x.f[i], RESIL_OUTCOME_SUCCESS);
	}
	ev0 = calls_of("evalsha");
	mg0 = calls_of("mget");
	assert_int_equal(resil_fleet_group_sync(x.g, 2000), RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.round_trips, 2);
	assert_int_equal(gi.scripts, N);
	assert_int_equal(gi.reads, N);
	assert_int_equal(calls_of("evalsha") - ev0, 0);
	assert_int_equal(calls_of("mget") - mg0, 1);
	for (i = 0; i < N; i++) {
		assert_int_equal(resil_fleet_get_info(x.f[i], &fi), RESIL_OK);
		assert_int_equal(fi.syncs, 2);
		assert_int_equal(fi.state, RESIL_FLEET_CLOSED);
	}
	fx_free(&x);
}

/* With the traffic share on, traffic counts: breakers with calls send
 * their scripts, the others read; still one round trip. A failure that
 * trips a local breaker is a vote: its script goes. */
static void
test_fleet_group_sends_what_changed(void **state)
{
	resil_fleet_group_info gi;
	fx x;

	if (port == 0)
		skip();
	(void)state;
	fx_make(&x, 8, 1, port);
	assert_int_equal(resil_fleet_group_sync(x.g, 1000), RESIL_OK);
	one_call(x.f[1], RESIL_OUTCOME_SUCCESS);
	one_call(x.f[5], RESIL_OUTCOME_FAILURE); /* trips: a vote */
	assert_int_equal(resil_fleet_group_sync(x.g, 2000), RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.round_trips, 2);
	assert_int_equal(gi.scripts, 8 + 2);
	assert_int_equal(gi.reads, 6);
	/* quorum 1, share 1%: f[5]'s fleet opened. */
	assert_int_equal(resil_fleet_get_state(x.f[5]), RESIL_FLEET_OPEN);
	assert_int_equal(resil_fleet_get_state(x.f[1]), RESIL_FLEET_CLOSED);
	/* OPEN: its script goes at every sync. */
	assert_int_equal(resil_fleet_group_sync(x.g, 3000), RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.scripts, 8 + 2 + 1);
	assert_int_equal(gi.reads, 6 + 7);
	fx_free(&x);
}

/* Another instance opens one of the fleets: the group's read of that
 * fleet's mirror shows it moved on, and its script goes in a second round
 * trip of the same sync, which applies OPEN. */
static void
test_fleet_group_sees_others(void **state)
{
	resil_fleet_config cfg = resil_fleet_config_default();
	resil_fleet_group_info gi;
	resil_fleet *b;
	fx x;

	if (port == 0)
		skip();
	(void)state;
	fx_make(&x, 4, 0, port);
	assert_int_equal(resil_fleet_group_sync(x.g, 1000), RESIL_OK);
	assert_int_equal(x.h[2].n[RESIL_FLEET_EV_STATE], 1); /* episode 1 */
	cfg.name = x.names[2];
	cfg.instance = "b";
	cfg.port = (uint32_t)port;
	cfg.command_timeout_ms = 5000;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 1;
	cfg.breaker.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_fleet_new(&b, &cfg, NULL), RESIL_OK);
	one_call(b, RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_fleet_sync(b, 1000), RESIL_OK);
	assert_int_equal(resil_fleet_get_state(b), RESIL_FLEET_OPEN);

	assert_int_equal(resil_fleet_group_sync(x.g, 2000), RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.round_trips, 3);
	assert_int_equal(gi.reads, 4);
	assert_int_equal(gi.scripts, 4 + 1);
	assert_int_equal(resil_fleet_get_state(x.f[2]), RESIL_FLEET_OPEN);
	assert_int_equal(x.h[2].n[RESIL_FLEET_EV_STATE], 2);
	assert_int_equal(resil_fleet_get_state(x.f[1]), RESIL_FLEET_CLOSED);
	resil_fleet_free(b);
	fx_free(&x);
}

/* The registration is refreshed: once half the instance TTL (buckets *
 * bucket_ms = 10 s) has passed since a breaker's script, it goes again. */
static void
test_fleet_group_refresh(void **state)
{
	resil_fleet_group_info gi;
	uint64_t t0 = resil_manual_clock_now(&mc);
	fx x;

	if (port == 0)
		skip();
	(void)state;
	fx_make(&x, 3, 0, port);
	assert_int_equal(resil_fleet_group_sync(x.g, t0), RESIL_OK);
	assert_int_equal(
	    resil_fleet_group_sync(x.g, t0 + 4999 * RESIL_NS_PER_MS),
	    RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.scripts, 3);
	assert_int_equal(gi.reads, 3);
	assert_int_equal(
	    resil_fleet_group_sync(x.g, t0 + 5000 * RESIL_NS_PER_MS),
	    RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.scripts, 6);
	assert_int_equal(gi.reads, 3);
	fx_free(&x);
}

/* Redis lost its scripts (SCRIPT FLUSH): the answers say NOSCRIPT, the
 * script is loaded again and those scripts go in a second round trip. */
static void
test_fleet_group_noscript(void **state)
{
	resil_fleet_group_info gi;
	resil_fleet_info fi;
	redisContext *c;
	redisReply *r;
	fx x;
	unsigned i;

	if (port == 0)
		skip();
	(void)state;
	fx_make(&x, 5, 1, port);
	assert_int_equal(resil_fleet_group_sync(x.g, 1000), RESIL_OK);
	c = admin();
	r = redisCommand(c, "SCRIPT FLUSH");
	assert_non_null(r);
	freeReplyObject(r);
	redisFree(c);
	for (i = 0; i < 5; i++)
		one_call(x.f[i], RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_fleet_group_sync(x.g, 2000), RESIL_OK);
	gi = info_of(x.g);
	assert_int_equal(gi.round_trips, 3);
	assert_int_equal(gi.scripts, 15);
	for (i = 0; i < 5; i++) {
		assert_int_equal(resil_fleet_get_info(x.f[i], &fi), RESIL_OK);
		assert_int_equal(fi.local_mode, 0);
		assert_int_equal(fi.syncs, 2);
		assert_int_equal(x.h[i].n[RESIL_FLEET_EV_LOCAL], 0);
	}
	fx_free(&x);
}

/* No Redis: every handle of the group is in local mode, one `local`
 * event each, and decides locally. */
static void
test_fleet_group_unreachable(void **state)
{
	resil_fleet_info fi;
	fx x;
	unsigned i;

	(void)state;
	fx_make(&x, 3, 0, 1);
	assert_int_equal(
	    resil_fleet_group_sync(x.g, 1000), RESIL_E_UNAVAILABLE);
	for (i = 0; i < 3; i++) {
		assert_int_equal(resil_fleet_get_info(x.f[i], &fi), RESIL_OK);
		assert_int_equal(fi.local_mode, 1);
		assert_int_equal(x.h[i].n[RESIL_FLEET_EV_LOCAL], 1);
		assert_non_null(strstr(x.h[i].last, "connect 127.0.0.1:1"));
		one_call(x.f[i], RESIL_OUTCOME_SUCCESS);
	}
	assert_false(info_of(x.g).connected);
	fx_free(&x);
}

static void
test_fleet_group_config(void **state)
{
	resil_fleet_group_config gc;
	resil_fleet_group *g = NULL;
	resil_diag d;

	(void)state;
	resil_fleet_group_config_init(&gc);
	assert_int_equal(gc.command_timeout_ms, 250);
	assert_int_equal(gc.connect_timeout_ms, 250);
	gc.port = 0;
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "fleet_group.port: 0 is out of range 1..65535");
	gc.port = 6379;
	gc.command_timeout_ms = 0;
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_group.command_timeout_ms: 0 is out of range 1..60000");
	gc.command_timeout_ms = 250;
	gc.sentinels = "h1:1,h2";
	gc.master = "m";
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_group.master: must be 1..8 sentinels, HOST:PORT separated "
	    "by ',' (PORT 1..65535)");
	gc.sentinels = "h1:1,h2:2";
	gc.master = "a b";
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_group.master: the master's name must be 1..63 characters "
	    "of [A-Za-z0-9._-]");
	gc.master = NULL;
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_E_INVAL);
	gc.master = "mymaster";
	assert_int_equal(resil_fleet_group_new(&g, &gc, &d), RESIL_OK);
	assert_int_equal(resil_fleet_group_sync(NULL, 1), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_group_free(g), RESIL_OK);
	assert_int_equal(resil_fleet_group_free(NULL), RESIL_OK);
}

/* The server becomes a replica (a failover demoted it): the script's
 * writes answer READONLY. The sync goes local without an `error` event
 * (the server is no longer the master: find it again), and the next sync
 * reconnects at once and, the server a master again, resyncs. */
static void
test_fleet_readonly_finds_master_again(void **state)
{
	resil_fleet_config cfg = resil_fleet_config_default();
	resil_fleet_info fi;
	redisContext *c;
	redisReply *r;
	resil_fleet *f;
	heard h;
	char name[64];

	if (port == 0)
		skip();
	(void)state;
	memset(&h, 0, sizeof(h));
	snprintf(name, sizeof(name), "ro%d", (int)getpid());
	cfg.name = name;
	cfg.instance = "a";
	cfg.port = (uint32_t)port;
	cfg.command_timeout_ms = 5000;
	cfg.reconnect_ms = 3600000; /* only a moved master reconnects now */
	cfg.breaker.clock = resil_manual_clock_hook(&mc);
	cfg.listener = on_event;
	cfg.listener_ctx = &h;
	assert_int_equal(resil_fleet_new(&f, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_sync(f, 1000), RESIL_OK);
	c = admin();
	r = redisCommand(c, "REPLICAOF 127.0.0.1 1");
	assert_non_null(r);
	freeReplyObject(r);
	assert_int_equal(resil_fleet_sync(f, 1000), RESIL_E_UNAVAILABLE);
	assert_int_equal(h.n[RESIL_FLEET_EV_LOCAL], 1);
	assert_int_equal(h.n[RESIL_FLEET_EV_ERROR], 0);
	assert_non_null(strstr(h.last, "READONLY"));
	r = redisCommand(c, "REPLICAOF NO ONE");
	assert_non_null(r);
	freeReplyObject(r);
	redisFree(c);
	assert_int_equal(resil_fleet_sync(f, 1000), RESIL_OK);
	assert_int_equal(h.n[RESIL_FLEET_EV_CONNECTED], 2);
	assert_int_equal(resil_fleet_get_info(f, &fi), RESIL_OK);
	assert_int_equal(fi.local_mode, 0);
	resil_fleet_free(f);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_group_config),
		cmocka_unit_test(test_fleet_group_unreachable),
		cmocka_unit_test(test_fleet_group_one_round_trip),
		cmocka_unit_test(test_fleet_group_sends_what_changed),
		cmocka_unit_test(test_fleet_group_sees_others),
		cmocka_unit_test(test_fleet_group_refresh),
		cmocka_unit_test(test_fleet_group_noscript),
		cmocka_unit_test(test_fleet_readonly_finds_master_again),
	};

	if (argc > 1)
		port = atoi(argv[argc - 1]);
	resil_manual_clock_init(&mc, 1000);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

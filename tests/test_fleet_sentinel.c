/*
 * Issue 44: the fleet breaker through Redis Sentinel, against real
 * servers that with_sentinel starts (a master, a replica, three
 * sentinels; their addresses and process ids are the last seven
 * arguments). In order: the master found through the sentinels; a
 * sentinel down (SIGKILL); the master paused (SIGSTOP) while the fleet is
 * HALF_OPEN with its probe leases out, followed to the promoted replica;
 * the new master killed (SIGKILL) the same way. Each failover must keep
 * the probe bound docs/fleet.md states: at most 2K probes in an episode
 * across one failover (K granted by the old master and, when its grants
 * were lost, K by the new), and none from the local breakers meanwhile
 * (their open wait, on the manual clock, does not pass).
 *
 * The real clock is used only to wait for the servers' own progress (the
 * fleet's open wait on Redis's clock, the sentinels' failover), polling
 * with a bounded number of rounds; nothing asserts a duration.
 * Label "sentinel": ctest -LE sentinel skips it.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <signal.h>
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
#include <resil/fleet.h>

static char sentinels[128];
static char master_name[64];
static int sent_port[3];
static pid_t pid_master, pid_replica, pid_sent[3];
static resil_manual_clock mc;
static int have;

#define K 2u
#define HOSTS 3

static void
nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static redisContext *
at(int port)
{
	struct timeval tv = { 1, 0 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	if (c != NULL && c->err) {
		redisFree(c);
		return NULL;
	}
	if (c != NULL)
		redisSetTimeout(c, tv);
	return c;
}

/* The master's port as sentinel i says (0: no answer). */
static int
master_port(int i)
{
	redisContext *c = at(sent_port[i]);
	redisReply *r;
	int p = 0;

	if (c == NULL)
		return 0;
	r = redisCommand(
	    c, "SENTINEL get-master-addr-by-name %s", master_name);
	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
		p = atoi(r->element[1]->str);
	if (r != NULL)
		freeReplyObject(r);
	redisFree(c);
	return p;
}

/* Whether the server on port says it is a replica with its link up. */
static int
replica_up(int port)
{
	redisContext *c = at(port);
	redisReply *r;
	int ok = 0;

	if (c == NULL)
		return 0;
	r = redisCommand(c, "INFO replication");
	if (r != NULL && r->type == REDIS_REPLY_STRING)
		ok = strstr(r->str, "role:slave") != NULL &&
		    strstr(r->str, "master_link_status:up") != NULL;
	if (r != NULL)
		freeReplyObject(r);
	redisFree(c);
	return ok;
}

/* The pid of the server on port (INFO server). */
static pid_t
pid_on(int port)
{
	redisContext *c = at(port);
	redisReply *r;
	pid_t pid = 0;

	if (c == NULL)
		return 0;
	r = redisCommand(c, "INFO server");
	if (r != NULL && r->type == REDIS_REPLY_STRING &&
	    strstr(r->str, "process_id:") != NULL)
		pid = (pid_t)atol(strstr(r->str, "process_id:") + 11);
	if (r != NULL)
		freeReplyObject(r);
	redisFree(c);
	return pid;
}

static int
group_setup(void **state)
{
	(void)state;
	resil_manual_clock_init(&mc, 1000);
	return 0;
}

/* ---- the fleet of HOSTS instances ---- */

typedef struct host {
	resil_fleet *f;
	resil_fleet_permit held[8];
	unsigned nheld;
	unsigned local_events;
} host;

typedef struct fleet {
	host h[HOSTS];
	char name[64];
	unsigned probes; /* probe permits granted in the episode watched */
	uint64_t episode;
} fleet;

static void
on_event(const resil_fleet_event *ev, void *ctx)
{
	host *h = ctx;

	if (ev->kind == RESIL_FLEET_EV_LOCAL)
		h->local_events++;
}

static void
fleet_make(fleet *x, const char *tag)
{
	static char inst[HOSTS][8];
	unsigned i;

	memset(x, 0, sizeof(*x));
	snprintf(x->name, sizeof(x->name), "s%d-%s", (int)getpid(), tag);
	for (i = 0; i < HOSTS; i++) {
		resil_fleet_config cfg = resil_fleet_config_default();

		snprintf(inst[i], sizeof(inst[i]), "h%u", i);
		cfg.name = x->name;
		cfg.instance = inst[i];
		cfg.sentinels = sentinels;
		cfg.master = master_name;
		cfg.connect_timeout_ms = 200;
		cfg.command_timeout_ms = 200;
		cfg.reconnect_ms = 0; /* the manual clock does not move */
		cfg.quorum = 1;
		cfg.probe_leases = K;
		cfg.open_wait_ms = 300;
		cfg.lease_ms = 600000;
		cfg.breaker.failure_rate_pct = 0;
		cfg.breaker.consecutive_failures = 1;
		cfg.breaker.open_wait_ns = 3600ull * 1000 * RESIL_NS_PER_MS;
		cfg.breaker.clock = resil_manual_clock_hook(&mc);
		cfg.listener = on_event;
		cfg.listener_ctx = &x->h[i];
		assert_int_equal(
		    resil_fleet_new(&x->h[i].f, &cfg, NULL), RESIL_OK);
	}
}

static void
fleet_free(fleet *x)
{
	unsigned i;

	for (i = 0; i < HOSTS; i++)
		resil_fleet_free(x->h[i].f);
}

/* Every host syncs; the number that synced. */
static unsigned
sync_round(fleet *x)
{
	unsigned i, n = 0;

	for (i = 0; i < HOSTS; i++)
		n += resil_fleet_sync(
		         x->h[i].f, resil_manual_clock_now(&mc)) == RESIL_OK;
	return n;
}

/* Every host asks for permits: each probe permit is counted and held
 * (a call in flight), other permits are recorded as successes. */
static void
ask_round(fleet *x)
{
	unsigned i, j;

	for (i = 0; i < HOSTS; i++) {
		host *h = &x->h[i];

		for (j = 0; j < 3; j++) {
			resil_fleet_permit p;

			if (resil_fleet_acquire(h->f, &p) != RESIL_OK)
				continue;
			if (p.kind == 2) {
				x->probes++;
				assert_true(h->nheld < 8);
				h->held[h->nheld++] = p;
			} else {
				assert_int_equal(resil_fleet_record(h->f, &p,
				                     RESIL_OUTCOME_SUCCESS),
				    RESIL_OK);
			}
		}
	}
}

/* The probes in flight succeed. */
static void
probes_succeed(fleet *x)
{
	unsigned i, j;

	for (i = 0; i < HOSTS; i++) {
		for (j = 0; j < x->h[i].nheld; j++)
			assert_int_equal(
			    resil_fleet_record(x->h[i].f, &x->h[i].held[j],
			        RESIL_OUTCOME_SUCCESS),
			    RESIL_OK);
		x->h[i].nheld = 0;
	}
}

static resil_fleet_state
state_of(fleet *x, unsigned i)
{
	return resil_fleet_get_state(x->h[i].f);
}

/* Open the fleet (h0's failure) and wait (Redis's clock) for HALF_OPEN
 * with its K probes out. */
static void
fleet_to_half_open(fleet *x)
{
	resil_fleet_permit p;
	resil_fleet_info fi;
	int round;

	assert_int_equal(sync_round(x), HOSTS);
	assert_int_equal(resil_fleet_acquire(x->h[0].f, &p), RESIL_OK);
	assert_int_equal(
	    resil_fleet_record(x->h[0].f, &p, RESIL_OUTCOME_FAILURE),
	    RESIL_OK);
	assert_int_equal(sync_round(x), HOSTS);
	assert_int_equal(state_of(x, 0), RESIL_FLEET_OPEN);
	for (round = 0; round < 200 && x->probes < K; round++) {
		nap_ms(50);
		assert_int_equal(sync_round(x), HOSTS);
		ask_round(x);
	}
	assert_int_equal(x->probes, K);
	assert_int_equal(resil_fleet_get_info(x->h[0].f, &fi), RESIL_OK);
	x->episode = fi.episode;
}

/* Every host's fleet CLOSED. */
static int
all_closed(fleet *x)
{
	unsigned i;

	for (i = 0; i < HOSTS; i++)
		if (state_of(x, i) != RESIL_FLEET_CLOSED)
			return 0;
	return 1;
}

/* After the failover: every host synced with the new master, the
 * probes of the episode within 2K, then the probes succeed and the
 * fleet closes. */
static void
fleet_recovers(fleet *x, int new_port)
{
	resil_fleet_info fi;
	int round, p = 0;
	unsigned i, synced = 0;

	/* Server-side progress: the sentinels promote the replica. */
	for (round = 0; round < 600 && synced < HOSTS; round++) {
		ask_round(x);
		synced = sync_round(x);
		if (synced < HOSTS)
			nap_ms(50);
	}
	assert_int_equal(synced, HOSTS);
	for (i = 0; i < 3 && p == 0; i++)
		p = master_port((int)i);
	assert_int_equal(p, new_port);
	for (i = 0; i < HOSTS; i++) {
		assert_int_equal(
		    resil_fleet_get_info(x->h[i].f, &fi), RESIL_OK);
		assert_int_equal(fi.local_mode, 0);
		assert_true(x->h[i].local_events >= 1);
	}
	ask_round(x);
	assert_true(x->probes <= 2 * K);
	/* The probes report; the fleet closes (new grants if the new
	 * master lost the old ones, still within 2K). */
	/* Until every host has seen the fleet close: the leases and votes
	 * run on the real clock, so a loaded host takes more rounds. */
	for (round = 0; round < 400 && !all_closed(x); round++) {
		probes_succeed(x);
		(void)sync_round(x);
		ask_round(x);
		assert_true(x->probes <= 2 * K);
		if (!all_closed(x))
			nap_ms(25);
	}
	for (i = 0; i < HOSTS; i++)
		assert_int_equal(state_of(x, i), RESIL_FLEET_CLOSED);
	assert_true(x->probes <= 2 * K);
}

/* ---- the tests, in order ---- */

static void
test_fleet_sentinel_finds_master(void **state)
{
	resil_fleet_group_config gc;
	resil_fleet_group *g;
	resil_fleet_group_info gi;
	resil_fleet *f;
	resil_fleet_config cfg = resil_fleet_config_default();
	char want[64];

	(void)state;
	if (!have)
		skip();
	resil_fleet_group_config_init(&gc);
	gc.sentinels = sentinels;
	gc.master = master_name;
	gc.command_timeout_ms = 1000;
	assert_int_equal(resil_fleet_group_new(&g, &gc, NULL), RESIL_OK);
	cfg.name = "find";
	cfg.instance = "a";
	cfg.group = g;
	cfg.breaker.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_fleet_new(&f, &cfg, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_group_sync(g, 1), RESIL_OK);
	assert_int_equal(resil_fleet_group_get_info(g, &gi), RESIL_OK);
	snprintf(want, sizeof(want), "127.0.0.1:%d", master_port(0));
	assert_string_equal(gi.master, want);
	assert_int_equal(pid_on(master_port(0)), pid_master);
	assert_int_equal(gi.master_switches, 0);
	resil_fleet_free(f);
	assert_int_equal(resil_fleet_group_free(g), RESIL_OK);
}

/* Issue 44 (h2): the fleet rate limiter through the sentinels too: made
 * here (granted by the first master), followed to the promoted replica
 * in test_fleet_sentinel_limit_follows. */
static resil_fleet_limit *lim;
static int lim_events[8];

static void
on_lim(const resil_fleet_event *ev, void *ctx)
{
	(void)ctx;
	if ((unsigned)ev->kind < 8)
		lim_events[ev->kind]++;
}

static void
test_fleet_sentinel_limit_finds_master(void **state)
{
	resil_fleet_limit_config lc;
	resil_fleet_limit_info li;
	redisContext *c;
	redisReply *r;

	(void)state;
	if (!have)
		skip();
	resil_fleet_limit_config_init(&lc);
	lc.name = "lim";
	lc.instance = "a";
	lc.sentinels = sentinels;
	lc.master = master_name;
	lc.connect_timeout_ms = 1000;
	lc.command_timeout_ms = 1000;
	lc.reconnect_ms = 0;
	lc.rate = 1000;
	lc.burst = 1000;
	lc.clock = resil_manual_clock_hook(&mc);
	lc.listener = on_lim;
	assert_int_equal(resil_fleet_limit_new(&lim, &lc, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_acquire(lim, 1, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_get_info(lim, &li), RESIL_OK);
	assert_int_equal(li.local_mode, 0);
	assert_int_equal(li.redis_grants, 1);
	/* Its state is on the master the sentinels name. */
	c = at(master_port(0));
	assert_non_null(c);
	r = redisCommand(c, "EXISTS resil:limit:lim:gcra");
	assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER &&
	    r->integer == 1);
	freeReplyObject(r);
	redisFree(c);
}

/* The first sentinel of the list down: the next one answers. */
static void
test_fleet_sentinel_one_down(void **state)
{
	fleet x;

	(void)state;
	if (!have)
		skip();
	assert_int_equal(kill(pid_sent[0], SIGKILL), 0);
	fleet_make(&x, "down");
	assert_int_equal(sync_round(&x), HOSTS);
	assert_int_equal(state_of(&x, 0), RESIL_FLEET_CLOSED);
	fleet_free(&x);
}

/* The master paused (SIGSTOP) with the probes out: local mode (the
 * syncs time out), the replica promoted, every host follows it; within
 * 2K probes; the fleet closes on the new master. The old master, let go
 * (SIGCONT), becomes a replica. */
static void
test_fleet_sentinel_master_paused(void **state)
{
	int old_port, new_port, round;
	fleet x;

	(void)state;
	if (!have)
		skip();
	old_port = master_port(1);
	assert_int_equal(pid_on(old_port), pid_master);
	new_port = 0;
	fleet_make(&x, "pause");
	fleet_to_half_open(&x);
	assert_int_equal(kill(pid_master, SIGSTOP), 0);
	/* The replica is the only candidate: it will be the master. */
	{
		redisContext *c;
		redisReply *r;

		c = at(sent_port[1]);
		assert_non_null(c);
		r = redisCommand(c, "SENTINEL replicas %s", master_name);
		assert_non_null(r);
		assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 1);
		{
			size_t j;
			const redisReply *e = r->element[0];

			for (j = 0; j + 1 < e->elements; j += 2)
				if (strcmp(e->element[j]->str, "port") == 0)
					new_port =
					    atoi(e->element[j + 1]->str);
		}
		freeReplyObject(r);
		redisFree(c);
	}
	assert_int_not_equal(new_port, 0);
	assert_int_equal(sync_round(&x), 0); /* timeouts: local */
	fleet_recovers(&x, new_port);
	fleet_free(&x);
	assert_int_equal(kill(pid_master, SIGCONT), 0);
	for (round = 0; round < 600 && !replica_up(old_port); round++)
		nap_ms(50);
	assert_true(replica_up(old_port));
}

/* The limiter's master is a replica now: its next acquire decides
 * locally (the old master refuses or drops it), the one after asks the
 * sentinels and is granted by the promoted replica. */
static void
test_fleet_sentinel_limit_follows(void **state)
{
	resil_fleet_limit_info li;
	redisContext *c;
	redisReply *r;
	int round;

	(void)state;
	if (!have || lim == NULL)
		skip();
	assert_int_equal(resil_fleet_limit_acquire(lim, 1, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_get_info(lim, &li), RESIL_OK);
	assert_int_equal(li.local_mode, 1);
	assert_int_equal(lim_events[RESIL_FLEET_EV_LOCAL], 1);
	for (round = 0; round < 100; round++) {
		assert_int_equal(
		    resil_fleet_limit_acquire(lim, 1, NULL), RESIL_OK);
		assert_int_equal(resil_fleet_limit_get_info(lim, &li), RESIL_OK);
		if (!li.local_mode)
			break;
		nap_ms(50); /* the sentinels may still be electing */
	}
	assert_int_equal(li.local_mode, 0);
	assert_int_equal(li.redis_grants, 2);
	assert_int_equal(lim_events[RESIL_FLEET_EV_CONNECTED], 2);
	c = at(master_port(1)); /* sentinel 0 is down */
	assert_non_null(c);
	assert_int_equal(pid_on(master_port(1)), pid_replica);
	r = redisCommand(c, "EXISTS resil:limit:lim:gcra");
	assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER &&
	    r->integer == 1);
	freeReplyObject(r);
	redisFree(c);
	resil_fleet_limit_free(lim);
	lim = NULL;
}

/* The new master killed (SIGKILL) with the probes out: followed back to
 * the first server, within 2K probes. */
static void
test_fleet_sentinel_master_killed(void **state)
{
	int old_port, new_port;
	fleet x;

	(void)state;
	if (!have)
		skip();
	old_port = master_port(1);
	assert_int_equal(pid_on(old_port), pid_replica);
	new_port = 0;
	fleet_make(&x, "kill");
	fleet_to_half_open(&x);
	/* The first server (a replica now) is the candidate. */
	{
		redisContext *c = at(sent_port[1]);
		redisReply *r;
		size_t j;

		assert_non_null(c);
		r = redisCommand(c, "SENTINEL replicas %s", master_name);
		assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY &&
		    r->elements == 1);
		for (j = 0; j + 1 < r->element[0]->elements; j += 2)
			if (strcmp(r->element[0]->element[j]->str, "port") ==
			    0)
				new_port =
				    atoi(r->element[0]->element[j + 1]->str);
		freeReplyObject(r);
		redisFree(c);
	}
	assert_int_equal(pid_on(new_port), pid_master);
	assert_int_equal(kill(pid_replica, SIGKILL), 0);
	assert_int_equal(sync_round(&x), 0); /* refused: local */
	fleet_recovers(&x, new_port);
	fleet_free(&x);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_sentinel_finds_master),
		cmocka_unit_test(test_fleet_sentinel_limit_finds_master),
		cmocka_unit_test(test_fleet_sentinel_one_down),
		cmocka_unit_test(test_fleet_sentinel_master_paused),
		cmocka_unit_test(test_fleet_sentinel_limit_follows),
		cmocka_unit_test(test_fleet_sentinel_master_killed),
	};
	int i;

	if (argc >= 8) {
		char *p, *q;

		snprintf(sentinels, sizeof(sentinels), "%s", argv[argc - 7]);
		snprintf(
		    master_name, sizeof(master_name), "%s", argv[argc - 6]);
		pid_master = (pid_t)atol(argv[argc - 5]);
		pid_replica = (pid_t)atol(argv[argc - 4]);
		for (i = 0; i < 3; i++)
			pid_sent[i] = (pid_t)atol(argv[argc - 3 + i]);
		p = sentinels;
		for (i = 0; i < 3 && p != NULL; i++) {
			q = strchr(p, ':');
			sent_port[i] = q != NULL ? atoi(q + 1) : 0;
			p = strchr(p, ',');
			if (p != NULL)
				p++;
		}
		have = sent_port[2] != 0;
	}
	if (!have)
		fprintf(stderr,
		    "test_fleet_sentinel: no sentinels given "
		    "(run it under with_sentinel)\n");
	return cmocka_run_group_tests(tests, group_setup, NULL);
}

/*
 * Issue 41 (h3): keyed fleet limits (resil_fleet_limit_acquire_key)
 * against a real redis-server the test starts itself on a free port
 * (tests/support/redis_server.c; every test skips, saying why, when it
 * cannot start). Redis decides on its own TIME, so the checks count
 * grants inside a burst that cannot refill while a test runs (40 permits
 * an hour: one per 90 s), as the fleet limiter's other tests do; the
 * local side runs on a manual clock that never moves unless told.
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resil/config.h>
#include <resil/fleet.h>
#include <resil/pipeline.h>

#include "support/redis_server.h"

#define MS RESIL_NS_PER_MS

static redis_server srv = { -1, 0 };
static int have_server;
static unsigned seq;
static resil_manual_clock mc;

/* Events heard by one handle. */
typedef struct heard {
	unsigned n[8];
	uint32_t last_n; /* ev.votes of the last event: N */
	char settings[RESIL_DIAG_MAX];
} heard;

static void
on_event(const resil_fleet_event *ev, void *ctx)
{
	heard *h = ctx;

	if ((unsigned)ev->kind < 8)
		h->n[ev->kind]++;
	h->last_n = ev->votes;
	if (ev->kind == RESIL_FLEET_EV_SETTINGS)
		snprintf(h->settings, sizeof(h->settings), "%s", ev->detail);
}

/* A fresh limiter name per test. */
static const char *
fresh(char *buf, size_t cap)
{
	snprintf(buf, cap, "tfk-%ld-%u", (long)getpid(), ++seq);
	return buf;
}

/* 40 per hour, a burst of 10, keyed (100 keys), generous timeouts. */
static resil_fleet_limit_config
kcfg(const char *name, const char *inst, heard *h)
{
	resil_fleet_limit_config c;

	resil_fleet_limit_config_init(&c);
	c.name = name;
	c.instance = inst;
	c.port = (uint32_t)srv.port;
	c.connect_timeout_ms = 1000;
	c.command_timeout_ms = 1000;
	c.reconnect_ms = 10;
	c.rate = 40;
	c.period_ms = 3600000;
	c.burst = 10;
	c.clock = resil_manual_clock_hook(&mc);
	c.listener = h != NULL ? on_event : NULL;
	c.listener_ctx = h;
	c.max_keys = 100;
	return c;
}

static int
grants(resil_fleet_limit *fl, const void *key, size_t len, int tries)
{
	int i, n = 0;

	for (i = 0; i < tries; i++)
		n += resil_fleet_limit_acquire_key(fl, key, len, 1, NULL) ==
		    RESIL_OK;
	return n;
}

#define S(s) (s), (sizeof(s) - 1)

/* The milliseconds to live of a Redis key (-2: none). */
static long long
pttl(const char *key, size_t len)
{
	redisContext *c = redisConnect("127.0.0.1", srv.port);
	redisReply *r;
	long long v;

	assert_non_null(c);
	assert_int_equal(c->err, 0);
	r = redisCommand(c, "PTTL %b", key, len);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	v = r->integer;
	freeReplyObject(r);
	redisFree(c);
	return v;
}

#define NEED_SERVER()             \
	do {                      \
		if (!have_server) \
			skip();   \
	} while (0)

/* Two instances share key A's limit exactly; key B has its own; the lone
 * limiter of the same name is apart; nothing is kept locally while Redis
 * answers. */
static void
test_fleet_keyed_shared(void **state)
{
	resil_fleet_limit *a, *b;
	resil_fleet_limit_config c;
	resil_fleet_limit_info ia, ib;
	resil_keyed_metrics km;
	char name[64], key[160];
	heard ha, hb;
	int i, ga = 0, gb = 0;
	uint64_t ra = 0;

	(void)state;
	NEED_SERVER();
	memset(&ha, 0, sizeof(ha));
	memset(&hb, 0, sizeof(hb));
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "a", &ha);
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	c = kcfg(name, "b", &hb);
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	for (i = 0; i < 12; i++) {
		ga += resil_fleet_limit_acquire_key(a, S("A"), 1, NULL) ==
		    RESIL_OK;
		gb += resil_fleet_limit_acquire_key(b, S("A"), 1, NULL) ==
		    RESIL_OK;
	}
	assert_int_equal(ga + gb, 10);
	assert_true(ga >= 5 && gb >= 4);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(a, S("A"), 1, &ra), RESIL_E_LIMITED);
	/* The next permit is a whole emission interval away (90 s) at
	 * most, rounded up to a microsecond. */
	assert_true(ra > 0 && ra <= UINT64_C(90000000000));
	/* B: its own 10, whoever asks. */
	assert_int_equal(grants(b, S("B"), 7), 7);
	assert_int_equal(grants(a, S("B"), 7), 3);
	/* The lone limiter of the same name: its own state. */
	assert_int_equal(resil_fleet_limit_acquire(a, 1, NULL), RESIL_OK);
	/* Each key's state in Redis, PEXPIREd. */
	snprintf(key, sizeof(key), "resil:limit:%s:k:41:gcra", name);
	assert_true(pttl(key, strlen(key)) > 0);
	snprintf(key, sizeof(key), "resil:limit:%s:k:42:gcra", name);
	assert_true(pttl(key, strlen(key)) > 0);

	assert_int_equal(resil_fleet_limit_get_info(a, &ia), RESIL_OK);
	assert_int_equal(resil_fleet_limit_get_info(b, &ib), RESIL_OK);
	assert_int_equal(ia.local_mode, 0);
	assert_int_equal(ia.local_grants + ib.local_grants, 0);
	assert_int_equal(ia.redis_grants + ib.redis_grants, 10 + 10 + 1);
	assert_int_equal(ia.errors + ib.errors, 0);
	/* N: the instances the last answer saw (b's: keyed, 2; a's last
	 * was the lone limiter's, which only a uses). */
	assert_int_equal(ib.instances_seen, 2);
	assert_int_equal(ia.instances_seen, 1);
	assert_int_equal(ha.n[RESIL_FLEET_EV_LOCAL], 0);
	/* No local family while Redis answers. */
	assert_int_equal(
	    resil_fleet_limit_key_metrics(a, &km), RESIL_E_NOTFOUND);
	resil_fleet_limit_free(b);
	resil_fleet_limit_free(a);
}

/* Overrides: a hot value with its own burst, a slow one; k above a key's
 * burst refused; a member whose overrides differ is refused by the
 * fleet (its settings event names the digest) and decides locally. */
static void
test_fleet_keyed_override(void **state)
{
	resil_keyed_override ov[2];
	resil_fleet_limit *a, *odd;
	resil_fleet_limit_config c;
	resil_fleet_limit_info info;
	char name[64];
	heard h, ho;

	(void)state;
	NEED_SERVER();
	memset(&h, 0, sizeof(h));
	memset(&ho, 0, sizeof(ho));
	memset(ov, 0, sizeof(ov));
	ov[0].key = "vip";
	ov[0].key_len = 3;
	ov[0].burst = 25;
	ov[1].key = "slow";
	ov[1].key_len = 4;
	ov[1].rate = 1;
	ov[1].burst = 2;
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "a", &h);
	c.overrides = ov;
	c.n_overrides = 2;
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	assert_int_equal(grants(a, S("vip"), 30), 25);
	assert_int_equal(grants(a, S("slow"), 5), 2);
	assert_int_equal(grants(a, S("plain"), 15), 10);
	/* k: at most the key's own burst. */
	assert_int_equal(resil_fleet_limit_acquire_key(a, S("other"), 11, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_fleet_limit_acquire_key(a, S("vip2"), 10, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(a, S("vip"), 26, NULL), RESIL_E_INVAL);
	assert_int_equal(h.n[RESIL_FLEET_EV_SETTINGS], 0);

	/* Another member without the overrides. */
	c = kcfg(name, "odd", &ho);
	assert_int_equal(resil_fleet_limit_new(&odd, &c, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(odd, S("vip"), 1, NULL), RESIL_OK);
	assert_int_equal(ho.n[RESIL_FLEET_EV_SETTINGS], 1);
	assert_non_null(strstr(ho.settings, "overrides=0/"));
	assert_non_null(strstr(ho.settings, "(the fleet's 2/"));
	assert_int_equal(resil_fleet_limit_get_info(odd, &info), RESIL_OK);
	assert_int_equal(info.local_mode, 1);
	assert_int_equal(info.local_grants, 1);
	/* The fleet's vip is untouched by it. */
	assert_int_equal(grants(a, S("vip"), 3), 0);
	resil_fleet_limit_free(odd);
	resil_fleet_limit_free(a);
}

/* Redis killed: each key decides on its 1/N share of a local keyed
 * family (LOCAL event, N = 2 instances seen), bounded by max_keys; Redis
 * back (after reconnect_ms on the local clock): the fleet again
 * (CONNECTED), a fresh server's full burst. */
static void
test_fleet_keyed_redis_away(void **state)
{
	resil_fleet_limit *a, *b;
	resil_fleet_limit_config c;
	resil_fleet_limit_info info;
	resil_keyed_metrics km;
	char name[64], key[16];
	heard h;
	int i, k;

	(void)state;
	NEED_SERVER();
	memset(&h, 0, sizeof(h));
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "a", &h);
	c.max_keys = 4;
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	c = kcfg(name, "b", NULL);
	c.max_keys = 4;
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(grants(a, S("A"), 1), 1);
	assert_int_equal(grants(b, S("A"), 1), 1);
	assert_int_equal(grants(a, S("A"), 1), 1); /* a sees N = 2 */
	assert_int_equal(h.n[RESIL_FLEET_EV_CONNECTED], 1);

	redis_kill(&srv);
	/* Local: burst 10 / 2 = 5 per key, per instance. */
	assert_int_equal(grants(a, S("A"), 8), 5);
	assert_int_equal(h.n[RESIL_FLEET_EV_LOCAL], 1);
	assert_int_equal(h.last_n, 2);
	assert_int_equal(grants(a, S("B"), 8), 5);
	assert_int_equal(resil_fleet_limit_get_info(a, &info), RESIL_OK);
	assert_int_equal(info.local_mode, 1);
	assert_int_equal(info.local_grants, 10);
	assert_int_equal(resil_fleet_limit_key_metrics(a, &km), RESIL_OK);
	assert_int_equal(km.keys, 2);
	/* Many keys: never more than max_keys live. */
	for (i = 0; i < 50; i++) {
		k = snprintf(key, sizeof(key), "k%d", i);
		(void)grants(a, key, (size_t)k, 1);
	}
	assert_int_equal(resil_fleet_limit_key_metrics(a, &km), RESIL_OK);
	assert_true(km.keys <= 4);
	assert_int_equal(km.max_keys, 4);
	assert_true(km.bytes <= km.bytes_bound);
	assert_int_equal(h.n[RESIL_FLEET_EV_LOCAL], 1);

	assert_int_equal(redis_restart(&srv), 0);
	/* Within reconnect_ms: still local, Redis not asked. */
	assert_int_equal(grants(a, S("A"), 1), 0);
	assert_int_equal(h.n[RESIL_FLEET_EV_CONNECTED], 1);
	resil_manual_clock_advance(&mc, 10 * MS);
	/* The fleet again: a fresh server's full burst for A. */
	assert_int_equal(grants(a, S("A"), 12), 10);
	assert_int_equal(h.n[RESIL_FLEET_EV_CONNECTED], 2);
	assert_int_equal(resil_fleet_limit_get_info(a, &info), RESIL_OK);
	assert_int_equal(info.local_mode, 0);
	resil_fleet_limit_free(b);
	resil_fleet_limit_free(a);
}

/* Keys with any bytes: NUL, ':', 200 bytes of every value; each its own
 * limit and its own Redis key (hex); bad keys refused. */
static void
test_fleet_keyed_odd_bytes(void **state)
{
	resil_fleet_limit *a, *plain;
	resil_fleet_limit_config c;
	unsigned char big[257];
	char name[64], key[600];
	size_t i;

	(void)state;
	NEED_SERVER();
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "a", NULL);
	c.burst = 3;
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	for (i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(255 - i % 256);
	assert_int_equal(grants(a, S("a\0b"), 5), 3);
	assert_int_equal(grants(a, S("a\0c"), 5), 3);
	assert_int_equal(grants(a, S("a"), 5), 3);
	assert_int_equal(grants(a, S("a:b"), 5), 3);
	assert_int_equal(grants(a, S(":"), 5), 3);
	assert_int_equal(grants(a, S("\0"), 5), 3);
	assert_int_equal(grants(a, big, 200, 5), 3);
	assert_int_equal(grants(a, big, 199, 5), 3);
	snprintf(key, sizeof(key), "resil:limit:%s:k:610062:gcra", name);
	assert_true(pttl(key, strlen(key)) > 0);
	snprintf(key, sizeof(key), "resil:limit:%s:k:3a:gcra", name);
	assert_true(pttl(key, strlen(key)) > 0);
	/* Refused: too long (max_key_len 256), empty, NULL, k 0. */
	assert_int_equal(resil_fleet_limit_acquire_key(a, big, 257, 1, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_fleet_limit_acquire_key(a, big, 256, 1, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(a, "x", 0, 1, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(a, NULL, 1, 1, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(a, "x", 1, 0, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_limit_acquire_key(NULL, "x", 1, 1, NULL),
	    RESIL_E_INVAL);
	/* A handle made without max_keys is not keyed. */
	c = kcfg(name, "p", NULL);
	c.max_keys = 0;
	assert_int_equal(resil_fleet_limit_new(&plain, &c, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_acquire_key(plain, "x", 1, 1, NULL),
	    RESIL_E_INVAL);
	resil_fleet_limit_free(plain);
	resil_fleet_limit_free(a);
}

/* Threads on one handle: the keys' bursts are granted exactly, never
 * more (the handle's mutex serializes the round trips). */
typedef struct tharg {
	resil_fleet_limit *fl;
	int got[2];
} tharg;

static void *
th_main(void *p)
{
	tharg *t = p;
	int i;

	for (i = 0; i < 20; i++) {
		t->got[0] += resil_fleet_limit_acquire_key(
		                 t->fl, S("tA"), 1, NULL) == RESIL_OK;
		t->got[1] += resil_fleet_limit_acquire_key(
		                 t->fl, S("tB"), 1, NULL) == RESIL_OK;
	}
	return NULL;
}

static void
test_fleet_keyed_threads(void **state)
{
	resil_fleet_limit *a;
	resil_fleet_limit_config c;
	pthread_t th[4];
	tharg ta[4];
	char name[64];
	int i, ga = 0, gb = 0;

	(void)state;
	NEED_SERVER();
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "a", NULL);
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	for (i = 0; i < 4; i++) {
		memset(&ta[i], 0, sizeof(ta[i]));
		ta[i].fl = a;
		assert_int_equal(
		    pthread_create(&th[i], NULL, th_main, &ta[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		ga += ta[i].got[0];
		gb += ta[i].got[1];
	}
	assert_int_equal(ga, 10);
	assert_int_equal(gb, 10);
	resil_fleet_limit_free(a);
}

/* The keyed settings' checks (no server needed). */
static void
test_fleet_keyed_config(void **state)
{
	resil_keyed_override ov[2];
	resil_fleet_limit_config c;
	resil_diag d;

	(void)state;
	memset(ov, 0, sizeof(ov));
	ov[0].key = "v";
	ov[0].key_len = 1;
	ov[1] = ov[0];
	c = kcfg("cfg", "a", NULL);
	assert_int_equal(resil_fleet_limit_config_validate(&c, &d), RESIL_OK);
	c.max_keys = 0;
	c.overrides = ov;
	c.n_overrides = 1;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_limit.max_keys: 0 (not keyed) with overrides set");
	c.max_keys = RESIL_KEYED_MAX_KEYS + 1;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_limit.max_keys: 16777217 is out of range 0..16777216");
	c.max_keys = 10;
	c.n_overrides = 2;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "fleet_limit.overrides[1].key: repeats overrides[0]'s");
	c.n_overrides = 1;
	ov[0].max_concurrent = 3;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_limit.overrides[0].max_concurrent: a rate limiter's "
	    "override takes rate, period_ns and burst only");
	ov[0].max_concurrent = 0;
	ov[0].rate = 2000000000u;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_limit.overrides[0].rate: 2000000000 is out of range "
	    "1..1000000000");
	ov[0].rate = 0;
	c.max_key_len = 0;
	ov[0].key_len = 257;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "fleet_limit.overrides[0].key: bad length (1..256 bytes)");
	ov[0].key_len = 1;
	c.overrides = NULL;
	assert_int_equal(
	    resil_fleet_limit_config_validate(&c, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "fleet_limit.overrides: NULL with n_overrides 1");
}

/* ---- in the pipeline ---- */

static int
efn(void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	(void)out;
	return 0;
}

static resil_err
invoke_tenant(resil_pipeline *p, const char *tenant)
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
	err = resil_pipeline_invoke_ex(p, NULL, &inv, efn, NULL, &r);
	resil_result_free(&r);
	return err;
}

static int
tenant_grants(resil_pipeline *p, const char *tenant, int tries)
{
	int i, n = 0;

	for (i = 0; i < tries; i++)
		n += invoke_tenant(p, tenant) == RESIL_OK;
	return n;
}

/* ratelimit.key with ratelimit.fleet in the text: the pipeline's keyed
 * rate limiter is the fleet's, shared with another instance (a C handle
 * of the same name and settings); an override from the text. */
static void
test_fleet_keyed_pipeline_text(void **state)
{
	resil_keyed_override ov;
	resil_fleet_limit *b, *pl;
	resil_fleet_limit_config c;
	resil_fleet_limit_info info;
	resil_pipeline_config pc;
	resil_config *conf = NULL;
	resil_pipeline *p = NULL;
	resil_diag d;
	char name[64], text[512];

	(void)state;
	NEED_SERVER();
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	snprintf(text, sizeof(text),
	    "service=S\n"
	    "ratelimit.key=attachment:tenant\n"
	    "ratelimit.rate=40\nratelimit.period=1h\nratelimit.burst=5\n"
	    "ratelimit.key.override.vip=40/1h,burst=8\n"
	    "ratelimit.fleet=redis://127.0.0.1:%d/%s\n",
	    srv.port, name);
	d.msg[0] = '\0';
	if (resil_config_parse_string(&conf, text, "k.conf", NULL, &d) !=
	    RESIL_OK)
		fail_msg("parse: %s", d.msg);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("pipeline: %s", d.msg);
	pl = resil_pipeline_fleet_limit(p);
	assert_non_null(pl);
	/* The other instance: the same settings, overrides included. */
	memset(&ov, 0, sizeof(ov));
	ov.key = "vip";
	ov.key_len = 3;
	ov.rate = 40;
	ov.period_ns = 3600000 * MS;
	ov.burst = 8;
	c = kcfg(name, "b", NULL);
	c.burst = 5;
	c.max_keys = 10000;
	c.overrides = &ov;
	c.n_overrides = 1;
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);

	assert_int_equal(tenant_grants(p, "t1", 3), 3);
	assert_int_equal(grants(b, S("t1"), 5), 2);
	assert_int_equal(invoke_tenant(p, "t1"), RESIL_E_LIMITED);
	assert_int_equal(tenant_grants(p, "t2", 7), 5);
	assert_int_equal(tenant_grants(p, "vip", 10), 8);
	assert_int_equal(grants(b, S("vip"), 1), 0);
	assert_int_equal(resil_fleet_limit_get_info(pl, &info), RESIL_OK);
	assert_int_equal(info.local_mode, 0);
	assert_int_equal(info.redis_grants, 3 + 5 + 8);
	/* The pipeline's own (unkeyed) limiter is not made. */
	assert_null(resil_pipeline_ratelimit(p));
	/* A reload repeating the text, or leaving ratelimit.fleet out,
	 * keeps the keyed fleet limiter: t1 is still spent. */
	assert_int_equal(
	    resil_pipeline_reload_string(p, text, "k.conf", &d), RESIL_OK);
	assert_int_equal(invoke_tenant(p, "t1"), RESIL_E_LIMITED);
	assert_int_equal(resil_pipeline_reload_string(p,
	                     "service=S\n"
	                     "ratelimit.key=attachment:tenant\n"
	                     "ratelimit.rate=40\nratelimit.period=1h\n"
	                     "ratelimit.burst=5\n"
	                     "ratelimit.key.override.vip=40/1h,burst=8\n",
	                     "k.conf", &d),
	    RESIL_OK);
	assert_ptr_equal(resil_pipeline_fleet_limit(p), pl);
	assert_int_equal(invoke_tenant(p, "t1"), RESIL_E_LIMITED);
	assert_int_equal(tenant_grants(p, "t3", 7), 5);
	assert_int_equal(resil_fleet_limit_get_info(pl, &info), RESIL_OK);
	assert_int_equal(info.redis_grants, 3 + 5 + 8 + 5);
	resil_fleet_limit_free(b);
	resil_pipeline_free(p);
	resil_config_free(conf);

	/* A composite key (its parts joined by a zero byte): the same key
	 * in Redis as the C handle's "t1\0get". */
	fresh(name, sizeof(name));
	snprintf(text, sizeof(text),
	    "service=S\n"
	    "ratelimit.key=attachment:tenant+method\n"
	    "ratelimit.rate=40\nratelimit.period=1h\nratelimit.burst=5\n"
	    "ratelimit.fleet=redis://127.0.0.1:%d/%s\n",
	    srv.port, name);
	conf = NULL;
	if (resil_config_parse_string(&conf, text, "k.conf", NULL, &d) !=
	    RESIL_OK)
		fail_msg("parse: %s", d.msg);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("pipeline: %s", d.msg);
	c = kcfg(name, "b", NULL);
	c.burst = 5;
	c.max_keys = 10000;
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(tenant_grants(p, "t1", 2), 2);
	assert_int_equal(grants(b, S("t1\0get"), 5), 3);
	assert_int_equal(invoke_tenant(p, "t1"), RESIL_E_LIMITED);
	resil_fleet_limit_free(b);
	resil_pipeline_free(p);
	resil_config_free(conf);
}

/* The same from C: a borrowed keyed handle (fleet_ratelimit) with
 * keyed[RATELIMIT]; a handle that is not keyed, or overrides beside a
 * borrowed handle, refused. */
static void
test_fleet_keyed_pipeline_c(void **state)
{
	resil_keyed_override ov;
	resil_fleet_limit *b, *plain;
	resil_fleet_limit_config c;
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_diag d;
	char name[64];

	(void)state;
	NEED_SERVER();
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "b", NULL);
	c.burst = 4;
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	c.max_keys = 0;
	assert_int_equal(resil_fleet_limit_new(&plain, &c, NULL), RESIL_OK);
	resil_pipeline_config_init(&pc);
	pc.service = "S";
	pc.clock = resil_manual_clock_hook(&mc);
	pc.ratelimit_enabled = 1;
	pc.ratelimit.rate = 40;
	pc.ratelimit.period_ns = 3600000 * MS;
	pc.ratelimit.burst = 4;
	pc.keyed[RESIL_KEYED_RATELIMIT].key = "attachment:tenant";
	pc.fleet_ratelimit = plain;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "ratelimit.key: the fleet_ratelimit handle "
	                           "is not keyed (made with max_keys 0)");
	pc.fleet_ratelimit = b;
	memset(&ov, 0, sizeof(ov));
	ov.key = "vip";
	ov.key_len = 3;
	ov.burst = 9;
	pc.keyed[RESIL_KEYED_RATELIMIT].overrides = &ov;
	pc.keyed[RESIL_KEYED_RATELIMIT].n_overrides = 1;
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "ratelimit.key.override: not with a fleet_ratelimit handle "
	    "(give the overrides to the handle's configuration)");
	pc.keyed[RESIL_KEYED_RATELIMIT].overrides = NULL;
	pc.keyed[RESIL_KEYED_RATELIMIT].n_overrides = 0;
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("pipeline: %s", d.msg);
	assert_ptr_equal(resil_pipeline_fleet_limit(p), b);
	assert_int_equal(tenant_grants(p, "t1", 3), 3);
	assert_int_equal(grants(b, S("t1"), 3), 1);
	assert_int_equal(tenant_grants(p, "t2", 6), 4);
	resil_pipeline_free(p);
	resil_fleet_limit_free(plain);
	resil_fleet_limit_free(b);
}

/* The fleet limiter's events at the pipeline's listener. */
typedef struct pheard {
	unsigned local, connected, other;
	char text[RESIL_DIAG_MAX + 96];
} pheard;

static void
on_pev(const resil_pipeline_event *ev, void *ctx)
{
	pheard *h = ctx;

	if (ev->stage != RESIL_STAGE_RATELIMIT || ev->fleet == NULL) {
		h->other++;
		return;
	}
	if (ev->fleet->kind == RESIL_FLEET_EV_LOCAL)
		h->local++;
	else if (ev->fleet->kind == RESIL_FLEET_EV_CONNECTED)
		h->connected++;
	snprintf(h->text, sizeof(h->text), "%s", ev->text);
}

/* Redis unreachable (nobody on port 1): the pipeline's keyed fleet
 * limiter decides each key on its local share (N = 1: the whole burst,
 * per key), and the pipeline's listener hears one LOCAL event. */
static void
test_fleet_keyed_pipeline_local(void **state)
{
	resil_keyed_metrics km;
	resil_pipeline_config pc;
	resil_config *conf = NULL;
	resil_pipeline *p = NULL;
	resil_diag d;
	pheard h;

	(void)state;
	memset(&h, 0, sizeof(h));
	resil_manual_clock_init(&mc, 1000);
	if (resil_config_parse_string(&conf,
	        "service=S\n"
	        "ratelimit.key=attachment:tenant\n"
	        "ratelimit.rate=40\nratelimit.period=1h\nratelimit.burst=5\n"
	        "ratelimit.key.max_keys=3\n"
	        "ratelimit.fleet=redis://127.0.0.1:1/tfk-none\n",
	        "k.conf", NULL, &d) != RESIL_OK)
		fail_msg("parse: %s", d.msg);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	pc.listener = on_pev;
	pc.listener_ctx = &h;
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("pipeline: %s", d.msg);
	assert_int_equal(h.local, 1);
	assert_non_null(
	    strstr(h.text, "fleet limiter tfk-none local (connect 127.0.0.1:1"));
	assert_int_equal(tenant_grants(p, "t1", 8), 5);
	assert_int_equal(tenant_grants(p, "t2", 8), 5);
	assert_int_equal(h.local, 1);
	assert_int_equal(h.connected, 0);
	assert_int_equal(resil_fleet_limit_key_metrics(
	                     resil_pipeline_fleet_limit(p), &km),
	    RESIL_OK);
	assert_int_equal(km.keys, 2);
	assert_int_equal(km.max_keys, 3);
	resil_pipeline_free(p);
	resil_config_free(conf);
}

/* The combinations the text refuses, naming both keys. */
static void
test_fleet_keyed_pipeline_refused(void **state)
{
	static const struct {
		const char *text, *msg;
	} cases[] = {
		{ "breaker.key=method\nbreaker.fleet=redis://h/x\n",
		    "k.conf:2: breaker.key: not with a shared or fleet breaker "
		    "(breaker.shared, breaker.fleet)" },
		{ "ratelimit.key=method\nratelimit.shared=shm:r/x\n",
		    "k.conf:2: ratelimit.key: not with a shared rate limiter "
		    "(ratelimit.shared)" },
		{ "ratelimit.key=method\nratelimit.fleet=redis://h/x\n"
		  "ratelimit.reserve.critical=2\n",
		    "k.conf:3: ratelimit.key: a keyed rate limiter keeps no "
		    "class reserves (ratelimit.reserve.*)" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		resil_config *conf = NULL;
		resil_diag d;

		d.msg[0] = '\0';
		assert_int_equal(resil_config_parse_string(&conf,
		                     cases[i].text, "k.conf", NULL, &d),
		    RESIL_E_INVAL);
		assert_null(conf);
		assert_string_equal(d.msg, cases[i].msg);
	}
}

/* Issue 41 (turn 4): resil_fleet_limit_pause_key. Key A paused for 60 s
 * by one member: the other is refused A with about 60 s to wait, and
 * gets B's whole burst; a shorter pause changes nothing (the TAT never
 * moves back); the bad arguments refused. */
static void
test_fleet_keyed_pause_key(void **state)
{
	resil_fleet_limit *a, *b, *plain;
	resil_fleet_limit_config c;
	char name[64];
	uint64_t until = 0, until2 = 0, ra = 0;

	(void)state;
	NEED_SERVER();
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	c = kcfg(name, "a", NULL);
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	c = kcfg(name, "b", NULL);
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(grants(a, S("A"), 1), 1);
	assert_int_equal(resil_fleet_limit_pause_key(
	                     a, S("A"), 60000 * MS, &until),
	    RESIL_OK);
	assert_true(until > 0);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(b, S("A"), 1, &ra), RESIL_E_LIMITED);
	assert_true(ra > UINT64_C(55000000000) && ra <= UINT64_C(60000000000));
	assert_int_equal(grants(b, S("B"), 12), 10);
	/* Shorter: nothing moves back. */
	assert_int_equal(
	    resil_fleet_limit_pause_key(b, S("A"), 1000 * MS, &until2),
	    RESIL_OK);
	ra = 0;
	assert_int_equal(
	    resil_fleet_limit_acquire_key(a, S("A"), 1, &ra), RESIL_E_LIMITED);
	assert_true(ra > UINT64_C(55000000000));
	/* The lone limiter of the same name is not paused. */
	assert_int_equal(resil_fleet_limit_acquire(a, 1, NULL), RESIL_OK);
	/* Refused. */
	assert_int_equal(resil_fleet_limit_pause_key(NULL, S("A"), MS, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_pause_key(a, NULL, 1, MS, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_pause_key(a, "A", 0, MS, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_fleet_limit_pause_key(a, S("A"), 0, NULL), RESIL_E_INVAL);
	c = kcfg(name, "p", NULL);
	c.max_keys = 0;
	assert_int_equal(resil_fleet_limit_new(&plain, &c, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_pause_key(plain, S("A"), MS, NULL),
	    RESIL_E_INVAL);
	resil_fleet_limit_free(plain);
	resil_fleet_limit_free(b);
	resil_fleet_limit_free(a);
}

static int
throttled_fn(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)ep;
	(void)args;
	(void)out;
	return RESIL_RC_THROTTLED_MS(60000);
}

/* Issue 41 (turn 4), in the pipeline: ratelimit.key with
 * ratelimit.fleet; tenant t1's call answered with a Retry-After of 60 s
 * pauses t1 on the fleet (another member is refused t1 with about 60 s
 * to wait) and here (the next call refused locally); t2 is untouched. */
static void
test_fleet_keyed_pipeline_pushback(void **state)
{
	resil_fleet_limit *b;
	resil_fleet_limit_config c;
	resil_pipeline_config pc;
	resil_config *conf = NULL;
	resil_pipeline *p = NULL;
	resil_invocation inv;
	resil_param att[1];
	resil_result r;
	resil_diag d;
	char name[64], text[512];
	uint64_t ra = 0;

	(void)state;
	NEED_SERVER();
	resil_manual_clock_init(&mc, 1000);
	fresh(name, sizeof(name));
	snprintf(text, sizeof(text),
	    "service=S\n"
	    "ratelimit.key=attachment:tenant\n"
	    "ratelimit.rate=40\nratelimit.period=1h\nratelimit.burst=5\n"
	    "ratelimit.fleet=redis://127.0.0.1:%d/%s\n",
	    srv.port, name);
	if (resil_config_parse_string(&conf, text, "k.conf", NULL, &d) !=
	    RESIL_OK)
		fail_msg("parse: %s", d.msg);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("pipeline: %s", d.msg);
	c = kcfg(name, "b", NULL);
	c.burst = 5;
	c.max_keys = 10000;
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);

	resil_invocation_init(&inv, "get");
	att[0].key = "tenant";
	att[0].value = "t1";
	inv.attachments = att;
	inv.nattachments = 1;
	assert_int_equal(
	    resil_pipeline_invoke_ex(p, NULL, &inv, throttled_fn, NULL, &r),
	    RESIL_E_THROTTLED);
	resil_result_free(&r);
	assert_int_equal(
	    resil_fleet_limit_acquire_key(b, S("t1"), 1, &ra), RESIL_E_LIMITED);
	assert_true(ra > UINT64_C(55000000000) && ra <= UINT64_C(60000000000));
	assert_int_equal(invoke_tenant(p, "t1"), RESIL_E_LIMITED);
	assert_int_equal(grants(b, S("t2"), 2), 2);
	assert_int_equal(tenant_grants(p, "t2", 4), 3);
	resil_fleet_limit_free(b);
	resil_pipeline_free(p);
	resil_config_free(conf);
}

static int
group_setup(void **state)
{
	(void)state;
	if (!redis_installed()) {
		fprintf(stderr, "test_fleet_keyed: redis-server is not "
		                "installed; the Redis tests are skipped\n");
		return 0;
	}
	if (redis_start(&srv) != 0) {
		fprintf(stderr,
		    "test_fleet_keyed: cannot start redis-server on "
		    "127.0.0.1:%d; the Redis tests are skipped\n",
		    srv.port);
		return 0;
	}
	have_server = 1;
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	redis_kill(&srv);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_keyed_shared),
		cmocka_unit_test(test_fleet_keyed_override),
		cmocka_unit_test(test_fleet_keyed_odd_bytes),
		cmocka_unit_test(test_fleet_keyed_threads),
		cmocka_unit_test(test_fleet_keyed_config),
		cmocka_unit_test(test_fleet_keyed_pipeline_text),
		cmocka_unit_test(test_fleet_keyed_pipeline_c),
		cmocka_unit_test(test_fleet_keyed_pipeline_local),
		cmocka_unit_test(test_fleet_keyed_pipeline_refused),
		cmocka_unit_test(test_fleet_keyed_pause_key),
		cmocka_unit_test(test_fleet_keyed_pipeline_pushback),
		/* Last: it kills the server (and starts it again). */
		cmocka_unit_test(test_fleet_keyed_redis_away),
	};

	return cmocka_run_group_tests_name(
	    "fleet_keyed", tests, group_setup, group_teardown);
}

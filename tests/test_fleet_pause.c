/*
 * Issue 42: the fleet rate limiter told of the server's pushback
 * (resil_fleet_limit_pause(), lib/fleet_pause.c), against the
 * redis-server with_server starts (its port, the last argument; skipped
 * without it). The pause is on Redis's clock, so the checks read the
 * fleet's state back from Redis and compare it exactly with the script's
 * own answer, instead of waiting for real time to pass.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <resil/config.h>
#include <resil/fleet.h>
#include <resil/pipeline.h>

#define MS RESIL_NS_PER_MS

static int redis_port;
static resil_manual_clock mc;

/* 40 per hour, a burst of 40: scale 1, ts 90 000 000 us, bs 40 ts (no
 * refill while a test runs). */
#define TS UINT64_C(90000000)
#define BS (40 * TS)

static resil_fleet_limit_config
cfg(const char *name, const char *inst, uint32_t port)
{
	resil_fleet_limit_config c;

	resil_fleet_limit_config_init(&c);
	c.name = name;
	c.instance = inst;
	c.port = port;
	c.connect_timeout_ms = 200;
	c.command_timeout_ms = 200;
	c.reconnect_ms = 10;
	c.rate = 40;
	c.period_ms = 3600000;
	c.burst = 40;
	c.clock = resil_manual_clock_hook(&mc);
	return c;
}

/* The fleet's state: base and tat of resil:limit:NAME:gcra. */
static void
state_of(const char *name, uint64_t *base, uint64_t *tat)
{
	redisContext *c = redisConnect("127.0.0.1", redis_port);
	redisReply *r;

	assert_non_null(c);
	assert_int_equal(c->err, 0);
	r = redisCommand(c, "HMGET resil:limit:%s:gcra base tat", name);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->elements, 2);
	assert_int_equal(r->element[0]->type, REDIS_REPLY_STRING);
	*base = strtoull(r->element[0]->str, NULL, 10);
	*tat = strtoull(r->element[1]->str, NULL, 10);
	freeReplyObject(r);
	redisFree(c);
}

static void
test_fleet_limit_pause(void **state)
{
	resil_fleet_limit *a, *b, *odd;
	resil_fleet_limit_config c;
	char name[64];
	uint64_t until = 0, until2 = 0, base, tat, tat2, ra = 0;

	(void)state;
	if (redis_port == 0)
		skip();
	resil_manual_clock_init(&mc, 1000);
	snprintf(name, sizeof(name), "tfp-%ld", (long)getpid());
	c = cfg(name, "a", (uint32_t)redis_port);
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	c = cfg(name, "b", (uint32_t)redis_port);
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_acquire(a, 1, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_acquire(b, 1, NULL), RESIL_OK);

	/* a is told "Retry-After 500 ms" (and 1 ns more: a whole us). */
	assert_int_equal(
	    resil_fleet_limit_pause(a, 500 * MS + 1, &until), RESIL_OK);
	state_of(name, &base, &tat);
	/* The first permit due exactly at the pause's end, none before. */
	assert_int_equal(tat, (until - base) + BS - TS);
	/* b is refused, told to come back within the pause. */
	assert_int_equal(
	    resil_fleet_limit_acquire(b, 1, &ra), RESIL_E_LIMITED);
	assert_true(ra > 0 && ra <= 500 * MS + 1000);
	/* A shorter pause changes nothing; a longer one moves it. */
	assert_int_equal(
	    resil_fleet_limit_pause(b, 100 * MS, &until2), RESIL_OK);
	state_of(name, &base, &tat2);
	assert_int_equal(tat2, tat);
	assert_int_equal(
	    resil_fleet_limit_pause(b, 2000 * MS, &until2), RESIL_OK);
	state_of(name, &base, &tat2);
	assert_int_equal(tat2, (until2 - base) + BS - TS);
	assert_true(tat2 > tat);

	/* A member with other settings does not move the fleet. */
	c = cfg(name, "odd", (uint32_t)redis_port);
	c.burst = 100;
	assert_int_equal(resil_fleet_limit_new(&odd, &c, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_pause(odd, 9000 * MS, NULL),
	    RESIL_E_UNAVAILABLE);
	state_of(name, &base, &tat);
	assert_int_equal(tat, tat2);
	resil_fleet_limit_free(odd);

	assert_int_equal(
	    resil_fleet_limit_pause(NULL, MS, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_fleet_limit_pause(a, 0, NULL), RESIL_E_INVAL);
	resil_fleet_limit_free(b);
	resil_fleet_limit_free(a);
}

/* No Redis (a port nobody listens on): the member decides locally and
 * the fleet is not told. */
static void
test_fleet_limit_pause_unreachable(void **state)
{
	resil_fleet_limit *a;
	resil_fleet_limit_config c;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	c = cfg("tfp-none", "a", 1);
	assert_int_equal(resil_fleet_limit_new(&a, &c, NULL), RESIL_OK);
	assert_int_equal(
	    resil_fleet_limit_pause(a, MS, NULL), RESIL_E_UNAVAILABLE);
	resil_fleet_limit_free(a);
}

static int
throttled(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return RESIL_RC_THROTTLED_MS(500);
}

/* In a pipeline: a Retry-After answered to one member pauses the fleet:
 * another member (same settings) is refused. */
static void
test_fleet_limit_pause_from_pipeline(void **state)
{
	char text[512], name[64];
	resil_config *conf = NULL;
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_fleet_limit *b;
	resil_fleet_limit_config c;
	resil_args args;
	resil_result r;
	resil_diag d;
	uint64_t ra = 0;

	(void)state;
	if (redis_port == 0)
		skip();
	resil_manual_clock_init(&mc, 1000);
	snprintf(name, sizeof(name), "tfpp-%ld", (long)getpid());
	snprintf(text, sizeof(text),
	    "service=S\nratelimit.fleet=redis://127.0.0.1:%d/%s\n"
	    "ratelimit.rate=40\nratelimit.period=1h\nratelimit.burst=40\n",
	    redis_port, name);
	assert_int_equal(
	    resil_config_parse_string(&conf, text, NULL, NULL, &d), RESIL_OK);
	pc = *resil_config_pipeline(conf);
	pc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_pipeline_new(&p, &pc, &d), RESIL_OK);
	c = cfg(name, "b", (uint32_t)redis_port);
	assert_int_equal(resil_fleet_limit_new(&b, &c, NULL), RESIL_OK);
	assert_int_equal(resil_fleet_limit_acquire(b, 1, NULL), RESIL_OK);
	memset(&args, 0, sizeof(args));
	args.method = "get";
	assert_int_equal(resil_pipeline_call(p, &args, throttled, NULL, &r),
	    RESIL_E_THROTTLED);
	resil_result_free(&r);
	/* b holds 39 of the burst's 40 but is refused: the pause. */
	assert_int_equal(
	    resil_fleet_limit_acquire(b, 1, &ra), RESIL_E_LIMITED);
	assert_true(ra > 0 && ra <= 500 * MS);
	resil_fleet_limit_free(b);
	resil_pipeline_free(p);
	resil_config_free(conf);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_limit_pause),
		cmocka_unit_test(test_fleet_limit_pause_unreachable),
		cmocka_unit_test(test_fleet_limit_pause_from_pipeline),
	};

	if (argc > 1)
		redis_port = atoi(argv[argc - 1]);
	return cmocka_run_group_tests_name("fleet_pause", tests, NULL, NULL);
}

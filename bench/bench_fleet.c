/*
 * Fleet hot path: CLOSED acquire + record success through a fleet handle
 * whose sync step is not running, to compare with
 * breaker/closed/count100 (the same local breaker). With
 * RESIL_FLEET_BENCH_PORT set to the port of a redis-server on 127.0.0.1,
 * setup joins the fleet with one sync (the fleet is CLOSED, not local);
 * without it the handle finds nothing on port 1 and runs in local mode,
 * which takes the same branch of resil_fleet_acquire.
 *
 * fleet/sync/N, fleet/sync_idle/N: one group sync of N breakers (one
 * connection, one round trip) per iteration, below. Meaningful only with
 * RESIL_FLEET_BENCH_PORT (without it each sync is the local-mode early
 * return). Threads of one run take turns (a mutex).
 *
 * fleet/closed_success_redis_paused: fleet/closed_success while the
 * helper thread (resil_fleet_start, every 1 ms) syncs against a Redis
 * paused by DEBUG SLEEP 0.5 sent at setup: callers must not be delayed.
 * Needs RESIL_FLEET_BENCH_PORT and a redis-server started with
 * --enable-debug-command yes (setup aborts, saying so, when the pause
 * does not take); setup first waits (up to 2 s) for the previous run's
 * pause to end. Without the port it is fleet/closed_success plus an idle
 * helper thread.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/fleet.h>
#include <resil/pipeline.h>

#include "bench.h"

typedef struct bf {
	resil_manual_clock mc;
	resil_fleet *f;
} bf;

static void *
setup_closed(void)
{
	resil_fleet_config cfg = resil_fleet_config_default();
	const char *port = getenv("RESIL_FLEET_BENCH_PORT");
	bf *x = calloc(1, sizeof(*x));

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.name = "bench";
	cfg.instance = "bench";
	cfg.port = port != NULL ? (uint32_t)strtoul(port, NULL, 10) : 1;
	cfg.breaker.window_size = 100;
	cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
	if (resil_fleet_new(&x->f, &cfg, NULL) != RESIL_OK)
		abort();
	if (port != NULL && resil_fleet_sync(x->f, 1) != RESIL_OK) {
		fprintf(stderr, "bench_fleet: no redis on port %s\n", port);
		abort();
	}
	return x;
}

static void
teardown(void *ctx)
{
	bf *x = ctx;

	resil_fleet_free(x->f);
	free(x);
}

static uint64_t
run_acquire_record(void *ctx, uint64_t iters)
{
	bf *x = ctx;
	resil_fleet_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_fleet_acquire(x->f, &p) == RESIL_OK) {
			resil_fleet_record(x->f, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

/* fleet/sync/N (issue 44): N breakers of one instance in one group
 * (resil_fleet_group), one resil_fleet_group_sync per iteration: one
 * round trip for all N. Each iteration first records one success on
 * every breaker: healthy breakers of a CLOSED fleet with traffic, the
 * steady state, where each sends a read of the fleet's state (nothing
 * the fleet decides by changed; quorum_traffic_pct 0). The manual clock
 * never moves, so no refresh is due.
 * fleet/sync_scripts/N: the same with quorum_traffic_pct 1, so every
 * breaker's traffic counts and each sends its script: the worst case,
 * and the script's cost inside Redis. */
typedef struct bs {
	resil_manual_clock mc;
	pthread_mutex_t mu;
	unsigned n;
	int busy;
	resil_fleet_group *g;
	resil_fleet **f;
	char (*names)[24];
	uint32_t pct;
} bs;

static void *
setup_sync(unsigned n, uint32_t pct)
{
	const char *port = getenv("RESIL_FLEET_BENCH_PORT");
	resil_fleet_group_config gc;
	bs *x = calloc(1, sizeof(*x));
	unsigned i;

	if (x == NULL)
		abort();
	x->f = calloc(n, sizeof(*x->f));
	x->names = calloc(n, sizeof(*x->names));
	if (x->f == NULL || x->names == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	pthread_mutex_init(&x->mu, NULL);
	x->n = n;
	x->busy = 1;
	x->pct = pct;
	resil_fleet_group_config_init(&gc);
	gc.port = port != NULL ? (uint32_t)strtoul(port, NULL, 10) : 1;
	/* A loaded machine must not turn the row into local mode. */
	gc.command_timeout_ms = 5000;
	gc.reconnect_ms = 0;
	if (resil_fleet_group_new(&x->g, &gc, NULL) != RESIL_OK)
		abort();
	for (i = 0; i < n; i++) {
		resil_fleet_config cfg = resil_fleet_config_default();

		snprintf(x->names[i], sizeof(x->names[i]), "bench-sync-%u", i);
		cfg.name = x->names[i];
		cfg.instance = "bench";
		cfg.group = x->g;
		cfg.quorum_traffic_pct = x->pct;
		cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
		if (resil_fleet_new(&x->f[i], &cfg, NULL) != RESIL_OK)
			abort();
	}
	/* Joined: the first sync sends every script. */
	if (port != NULL && resil_fleet_group_sync(x->g, 1) != RESIL_OK) {
		fprintf(stderr, "bench_fleet: no redis on port %s\n", port);
		abort();
	}
	return x;
}

static void *
setup_sync1(void)
{
	return setup_sync(1, 0);
}

static void *
setup_sync64(void)
{
	return setup_sync(64, 0);
}

static void *
setup_sync10000(void)
{
	return setup_sync(10000, 0);
}

static void *
setup_scripts1(void)
{
	return setup_sync(1, 1);
}

static void *
setup_scripts64(void)
{
	return setup_sync(64, 1);
}

static void *
setup_scripts1000(void)
{
	return setup_sync(1000, 1);
}

static void
teardown_sync(void *ctx)
{
	bs *x = ctx;
	unsigned i;

	for (i = 0; i < x->n; i++)
		resil_fleet_free(x->f[i]);
	if (resil_fleet_group_free(x->g) != RESIL_OK)
		abort();
	pthread_mutex_destroy(&x->mu);
	free(x->f);
	free(x->names);
	free(x);
}

static uint64_t
run_sync(void *ctx, uint64_t iters)
{
	bs *x = ctx;
	resil_fleet_permit p;
	uint64_t i, n = 0;
	unsigned j;

	pthread_mutex_lock(&x->mu);
	for (i = 0; i < iters; i++) {
		for (j = 0; x->busy && j < x->n; j++)
			if (resil_fleet_acquire(x->f[j], &p) == RESIL_OK)
				(void)resil_fleet_record(
				    x->f[j], &p, RESIL_OUTCOME_SUCCESS);
		n += resil_fleet_group_sync(x->g, 1) == RESIL_OK;
	}
	pthread_mutex_unlock(&x->mu);
	return n;
}

/* A raw RESP exchange on a fresh loopback connection: send cmd, wait up
 * to ms for a reply starting with want. 1 when it came. */
static int
redis_says(unsigned port, const char *cmd, const char *want, int ms)
{
	struct sockaddr_in a;
	struct timeval tv;
	char buf[64];
	ssize_t n;
	int s = socket(AF_INET, SOCK_STREAM, 0), ok = 0;

	if (s < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    write(s, cmd, strlen(cmd)) == (ssize_t)strlen(cmd)) {
		if (want == NULL) {
			ok = 1; /* sent; do not wait */
		} else {
			n = read(s, buf, sizeof(buf) - 1);
			ok = n > 0 && strncmp(buf, want, strlen(want)) == 0;
		}
	}
	close(s);
	return ok;
}

typedef struct bp {
	resil_manual_clock mc;
	resil_fleet *f;
} bp;

static void *
setup_paused(void)
{
	resil_fleet_config cfg = resil_fleet_config_default();
	const char *port = getenv("RESIL_FLEET_BENCH_PORT");
	unsigned pn = port != NULL ? (unsigned)strtoul(port, NULL, 10) : 1;
	bp *x = calloc(1, sizeof(*x));
	int i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	if (port != NULL) {
		/* The previous run's pause must be over before we join. */
		for (i = 0;
		     i < 20 && !redis_says(pn, "PING\r\n", "+PONG", 100); i++)
			;
	}
	cfg.name = "bench-paused";
	cfg.instance = "bench";
	cfg.port = pn;
	cfg.breaker.window_size = 100;
	cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
	if (resil_fleet_new(&x->f, &cfg, NULL) != RESIL_OK)
		abort();
	if (port != NULL && resil_fleet_sync(x->f, 1) != RESIL_OK) {
		fprintf(stderr, "bench_fleet: no redis on port %s\n", port);
		abort();
	}
	if (resil_fleet_start(x->f, 1, NULL) != RESIL_OK)
		abort();
	if (port != NULL) {
		if (!redis_says(pn, "DEBUG SLEEP 0.5\r\n", NULL, 0) ||
		    redis_says(pn, "PING\r\n", "+PONG", 50)) {
			fprintf(stderr,
			    "bench_fleet: DEBUG SLEEP did not pause redis on "
			    "port %s (start it with --enable-debug-command "
			    "yes)\n",
			    port);
			abort();
		}
	}
	return x;
}

static void
teardown_paused(void *ctx)
{
	bp *x = ctx;

	resil_fleet_free(x->f); /* stops and joins the helper */
	free(x);
}

static uint64_t
run_paused(void *ctx, uint64_t iters)
{
	bp *x = ctx;
	resil_fleet_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		if (resil_fleet_acquire(x->f, &p) == RESIL_OK) {
			resil_fleet_record(x->f, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

/* fleet/pipeline_sync/64 (issue 44, pipelines through groups): a
 * pipeline from text with breaker.fleet and breaker.per_method over 64
 * declared methods (64 fleet breakers NAME.mI and the service's, all in
 * the pipeline's group); each iteration makes one successful call of
 * every method through the pipeline, then one resil_fleet_group_sync of
 * the pipeline's group: one round trip for the 65 breakers. */
typedef struct bpl {
	resil_manual_clock mc;
	pthread_mutex_t mu;
	resil_config *c;
	resil_pipeline *p;
	resil_fleet_group *g;
	char methods[64][8];
	int busy;
} bpl;

static int
bp_ok(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	(void)out;
	return 0;
}

static void *
setup_psync64(void)
{
	const char *port = getenv("RESIL_FLEET_BENCH_PORT");
	static char text[4096];
	resil_pipeline_config pc;
	bpl *x = calloc(1, sizeof(*x));
	size_t n;
	unsigned i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	pthread_mutex_init(&x->mu, NULL);
	x->busy = 1;
	n = (size_t)snprintf(text, sizeof(text),
	    "service=S\nbreaker.fleet=redis://127.0.0.1:%s/bench-psync\n"
	    "breaker.per_method=true\nbreaker.fleet.command_timeout=5s\n"
	    "breaker.fleet.reconnect=1ms\n",
	    port != NULL ? port : "1");
	for (i = 0; i < 64; i++) {
		snprintf(x->methods[i], sizeof(x->methods[i]), "m%u", i);
		n += (size_t)snprintf(
		    text + n, sizeof(text) - n, "m%u.type=any\n", i);
	}
	if (resil_config_parse_string(&x->c, text, NULL, NULL, NULL) !=
	    RESIL_OK)
		abort();
	pc = *resil_config_pipeline(x->c);
	pc.clock = resil_manual_clock_hook(&x->mc);
	if (resil_pipeline_new(&x->p, &pc, NULL) != RESIL_OK)
		abort();
	x->g = resil_pipeline_fleet_group(x->p);
	if (port != NULL && resil_fleet_group_sync(x->g, 1) != RESIL_OK) {
		fprintf(stderr, "bench_fleet: no redis on port %s\n", port);
		abort();
	}
	return x;
}

static uint64_t
run_psync(void *ctx, uint64_t iters)
{
	bpl *x = ctx;
	resil_result r;
	resil_args a;
	uint64_t i, n = 0;
	unsigned j;

	memset(&a, 0, sizeof(a));
	pthread_mutex_lock(&x->mu);
	for (i = 0; i < iters; i++) {
		for (j = 0; x->busy && j < 64; j++) {
			a.method = x->methods[j];
			(void)resil_pipeline_call(x->p, &a, bp_ok, NULL, &r);
			resil_result_free(&r);
		}
		n += resil_fleet_group_sync(x->g, 1) == RESIL_OK;
	}
	pthread_mutex_unlock(&x->mu);
	return n;
}

static void
teardown_psync(void *ctx)
{
	bpl *x = ctx;

	resil_pipeline_free(x->p);
	resil_config_free(x->c);
	pthread_mutex_destroy(&x->mu);
	free(x);
}

const resil_bench resil_bench_fleet[] = {
	{ "fleet/closed_success", setup_closed, run_acquire_record, teardown },
	{ "fleet/sync/1", setup_sync1, run_sync, teardown_sync },
	{ "fleet/sync/64", setup_sync64, run_sync, teardown_sync },
	{ "fleet/sync/10000", setup_sync10000, run_sync, teardown_sync },
	{ "fleet/pipeline_sync/64", setup_psync64, run_psync, teardown_psync },
	{ "fleet/sync_scripts/1", setup_scripts1, run_sync, teardown_sync },
	{ "fleet/sync_scripts/64", setup_scripts64, run_sync, teardown_sync },
	{ "fleet/sync_scripts/1000", setup_scripts1000, run_sync,
	    teardown_sync },
	{ "fleet/closed_success_redis_paused", setup_paused, run_paused,
	    teardown_paused },
	{ NULL, NULL, NULL, NULL },
};

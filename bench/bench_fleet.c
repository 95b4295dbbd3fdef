/*
 * Fleet hot path: CLOSED acquire + record success through a fleet handle
 * whose sync step is not running, to compare with
 * breaker/closed/count100 (the same local breaker). With
 * RESIL_FLEET_BENCH_PORT set to the port of a redis-server on 127.0.0.1,
 * setup joins the fleet with one sync (the fleet is CLOSED, not local);
 * without it the handle finds nothing on port 1 and runs in local mode,
 * which takes the same branch of resil_fleet_acquire.
 *
 * fleet/sync/N: one sync step of N breakers (N handles, one connection
 * each) per iteration, to give the sync's cost per second at a sync
 * interval. Meaningful only with RESIL_FLEET_BENCH_PORT (without it each
 * sync is the local-mode early return). A sync must not overlap another
 * of the same handle, so threads of one run take turns (a mutex).
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
#include <resil/fleet.h>

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

#define SYNC_MAX 64

typedef struct bs {
	resil_manual_clock mc;
	pthread_mutex_t mu;
	unsigned n;
	resil_fleet *f[SYNC_MAX];
} bs;

static void *
setup_sync(unsigned n)
{
	const char *port = getenv("RESIL_FLEET_BENCH_PORT");
	bs *x = calloc(1, sizeof(*x));
	static char names[SYNC_MAX][16];
	unsigned i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	pthread_mutex_init(&x->mu, NULL);
	x->n = n;
	for (i = 0; i < n; i++) {
		resil_fleet_config cfg = resil_fleet_config_default();

		snprintf(names[i], sizeof(names[i]), "bench-sync-%u", i);
		cfg.name = names[i];
		cfg.instance = "bench";
		cfg.port =
		    port != NULL ? (uint32_t)strtoul(port, NULL, 10) : 1;
		cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
		/* A loaded machine must not turn the row into local mode. */
		cfg.command_timeout_ms = 1000;
		cfg.reconnect_ms = 0;
		if (resil_fleet_new(&x->f[i], &cfg, NULL) != RESIL_OK)
			abort();
	}
	return x;
}

static void *
setup_sync1(void)
{
	return setup_sync(1);
}

static void *
setup_sync8(void)
{
	return setup_sync(8);
}

static void *
setup_sync64(void)
{
	return setup_sync(64);
}

static void
teardown_sync(void *ctx)
{
	bs *x = ctx;
	unsigned i;

	for (i = 0; i < x->n; i++)
		resil_fleet_free(x->f[i]);
	pthread_mutex_destroy(&x->mu);
	free(x);
}

static uint64_t
run_sync(void *ctx, uint64_t iters)
{
	bs *x = ctx;
	uint64_t i, n = 0;
	unsigned j;

	pthread_mutex_lock(&x->mu);
	for (i = 0; i < iters; i++)
		for (j = 0; j < x->n; j++)
			n += resil_fleet_sync(x->f[j], 1) == RESIL_OK;
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

const resil_bench resil_bench_fleet[] = {
	{ "fleet/closed_success", setup_closed, run_acquire_record, teardown },
	{ "fleet/sync/1", setup_sync1, run_sync, teardown_sync },
	{ "fleet/sync/8", setup_sync8, run_sync, teardown_sync },
	{ "fleet/sync/64", setup_sync64, run_sync, teardown_sync },
	{ "fleet/closed_success_redis_paused", setup_paused, run_paused,
	    teardown_paused },
	{ NULL, NULL, NULL, NULL },
};

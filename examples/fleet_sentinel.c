/*
 * Three hosts of one service share a circuit breaker through Redis
 * behind Sentinel (resil/fleet.h, issue 44), and the Redis master dies
 * in the middle of the run.
 *
 * The dependency fails; host-a's breaker trips and opens the fleet
 * (quorum 1); after the fleet's open wait (Redis's clock) the fleet lets
 * K = 2 probe calls through, fleet-wide. With those probes in flight the
 * master is killed (SIGKILL): every host falls back to its own breaker
 * (forced open: no call goes through meanwhile), the sentinels promote
 * the replica, each host's next sync asks them for the new master and
 * resyncs. The probes report; the fleet closes. The dependency fails
 * once more and the fleet reopens and recovers on the new master.
 *
 * Printed last: `episodes N max_probes K'`: the HALF_OPEN episodes seen
 * and the most probe calls any one of them let through, fleet-wide.
 * docs/fleet.md bounds that at 2K across a failover (the old master's K
 * grants, lost, and the new master's K); the program exits 1 if it is
 * exceeded.
 *
 * Usage: fleet_sentinel H1:P1,H2:P2,H3:P3 MASTER PID_MASTER ...
 * (ctest runs it under with_sentinel, which starts a master, a replica
 * and three sentinels on free local ports and passes their addresses and
 * process ids). Without them it says why and exits 77 (skipped).
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include <resil/fleet.h>

#define HOSTS 3
#define K 2u
#define MAX_EPISODES 16

static resil_fleet *host[HOSTS];
static const char *const host_name[HOSTS] = { "host-a", "host-b", "host-c" };
static resil_manual_clock clk; /* the hosts' own clock: never moves */

/* Probes let through per fleet episode (HALF_OPEN ones). */
static uint64_t episode_of[MAX_EPISODES];
static unsigned probes_in[MAX_EPISODES], episodes;
static resil_fleet_permit held[HOSTS][8];
static unsigned nheld[HOSTS];

static void
nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static unsigned
sync_all(void)
{
	unsigned h, n = 0;

	for (h = 0; h < HOSTS; h++)
		n += resil_fleet_sync(host[h], resil_manual_clock_now(&clk)) ==
		    RESIL_OK;
	return n;
}

static void
count_probe(uint64_t ep)
{
	unsigned i;

	for (i = 0; i < episodes; i++)
		if (episode_of[i] == ep)
			break;
	if (i == episodes && episodes < MAX_EPISODES)
		episode_of[episodes++] = ep;
	if (i < MAX_EPISODES)
		probes_in[i]++;
}

/* Every host tries a call. A probe is held (in flight) until
 * probes_end(); an ordinary call ends at once with outcome. */
static void
calls(resil_outcome outcome)
{
	unsigned h;

	for (h = 0; h < HOSTS; h++) {
		resil_fleet_permit p;

		if (resil_fleet_acquire(host[h], &p) != RESIL_OK)
			continue;
		if (p.kind == 2 && nheld[h] < 8) {
			count_probe(p.episode);
			held[h][nheld[h]++] = p;
		} else {
			resil_fleet_record(host[h], &p, outcome);
		}
	}
}

static void
probes_end(resil_outcome outcome)
{
	unsigned h, i;

	for (h = 0; h < HOSTS; h++) {
		for (i = 0; i < nheld[h]; i++)
			resil_fleet_record(host[h], &held[h][i], outcome);
		nheld[h] = 0;
	}
}

/* Whether every host is in state s (any: s < 0). */
static int
all_in(int s)
{
	unsigned h;

	for (h = 0; h < HOSTS; h++)
		if (s >= 0 && (int)resil_fleet_get_state(host[h]) != s)
			return 0;
	return 1;
}

static unsigned
in_local_mode(void)
{
	resil_fleet_info fi;
	unsigned h, n = 0;

	for (h = 0; h < HOSTS; h++)
		n += resil_fleet_get_info(host[h], &fi) == RESIL_OK &&
		    fi.local_mode;
	return n;
}

/* Sync and call (the dependency healthy) until every host synced and
 * sees state s (any: s < 0) with want_probes in flight, or about a
 * minute has passed (the servers' own progress). */
static int
until(int s, unsigned want_probes)
{
	unsigned held_now = 0, h;
	int round;

	for (round = 0; round < 1200; round++) {
		unsigned ok = sync_all();

		calls(RESIL_OUTCOME_SUCCESS);
		for (h = 0, held_now = 0; h < HOSTS; h++)
			held_now += nheld[h];
		if (ok == HOSTS && all_in(s) && held_now >= want_probes)
			return 1;
		nap_ms(50);
	}
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned h, i, max = 0;
	pid_t master;

	if (argc < 4) {
		fprintf(stderr,
		    "fleet_sentinel: skipped: give the sentinels, "
		    "the master's name and its pid (ctest runs it "
		    "under with_sentinel)\n");
		return 77;
	}
	master = (pid_t)atol(argv[3]);
	resil_manual_clock_init(&clk, 1);
	for (h = 0; h < HOSTS; h++) {
		resil_fleet_config cfg = resil_fleet_config_default();

		cfg.name = "checkout";
		cfg.instance = host_name[h];
		cfg.sentinels = argv[1];
		cfg.master = argv[2];
		cfg.command_timeout_ms = 1000; /* a loaded test machine */
		cfg.reconnect_ms = 0;          /* the clock here never moves */
		cfg.probe_leases = K;
		cfg.max_local_leases = 1; /* the probes spread over hosts */
		cfg.open_wait_ms = 300;
		cfg.lease_ms = 600000;
		cfg.breaker.failure_rate_pct = 0;
		cfg.breaker.consecutive_failures = 1;
		cfg.breaker.open_wait_ns = 3600ull * 1000 * RESIL_NS_PER_MS;
		cfg.breaker.clock = resil_manual_clock_hook(&clk);
		if (resil_fleet_new(&host[h], &cfg, NULL) != RESIL_OK)
			return 2;
	}
	if (sync_all() != HOSTS) {
		fprintf(stderr, "fleet_sentinel: no master\n");
		return 2;
	}

	/* The dependency fails at host-a: the fleet opens, then lets K
	 * probes through; the master dies with them in flight. */
	{
		resil_fleet_permit p;

		if (resil_fleet_acquire(host[0], &p) == RESIL_OK)
			resil_fleet_record(host[0], &p, RESIL_OUTCOME_FAILURE);
	}
	if (!until(RESIL_FLEET_HALF_OPEN, K))
		return 2;
	printf("fleet HALF_OPEN, %u probes in flight; the master is "
	       "killed\n",
	    K);
	kill(master, SIGKILL);
	(void)sync_all();
	printf("hosts deciding locally: %u\n", in_local_mode());
	if (!until(-1, 0))
		return 2;
	printf("resynced with the new master\n");
	probes_end(RESIL_OUTCOME_SUCCESS);
	for (i = 0; i < 40 && !all_in(RESIL_FLEET_CLOSED); i++) {
		(void)sync_all();
		calls(RESIL_OUTCOME_SUCCESS);
		probes_end(RESIL_OUTCOME_SUCCESS);
	}
	if (!until(RESIL_FLEET_CLOSED, 0))
		return 2;
	printf("fleet CLOSED\n");

	/* Once more on the new master: open, probe, close. */
	{
		resil_fleet_permit p;

		if (resil_fleet_acquire(host[1], &p) == RESIL_OK)
			resil_fleet_record(host[1], &p, RESIL_OUTCOME_FAILURE);
	}
	if (!until(RESIL_FLEET_HALF_OPEN, K))
		return 2;
	probes_end(RESIL_OUTCOME_SUCCESS);
	if (!until(RESIL_FLEET_CLOSED, 0))
		return 2;
	printf("fleet CLOSED again\n");

	for (i = 0; i < episodes; i++)
		if (probes_in[i] > max)
			max = probes_in[i];
	printf("episodes %u max_probes %u\n", episodes, max);
	if (max > 2 * K)
		printf(
		    "max_probes %u exceeds the bound 2K = %u\n", max, 2 * K);
	for (h = 0; h < HOSTS; h++)
		resil_fleet_free(host[h]);
	return max <= 2 * K ? 0 : 1;
}

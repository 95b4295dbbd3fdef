/*
 * Three hosts of one service share a circuit breaker through Redis
 * (resil/fleet.h). Each host is a fleet handle with its own instance
 * name; here they live in one process so that the turns are exact, but
 * each would be its own process on its own machine.
 *
 * The fleet needs two of the three to agree (quorum 2): one sick host
 * opens only its own local breaker, and the fleet opens for everyone,
 * the healthy host included, once a second host's breaker trips.
 *
 * Usage: fleet_redis PORT (ctest runs it under with_server redis, which
 * starts a redis-server of its own on a free local port).
 */
#include <stdio.h>
#include <stdlib.h>

#include <resil/fleet.h>

#define HOSTS 3

static resil_fleet *host[HOSTS];
static const char *const host_name[HOSTS] = { "host-a", "host-b",
	"host-c" };

/* One call on host h whose outcome is given; says what the host decided. */
static const char *
call(int h, resil_outcome outcome)
{
	resil_fleet_permit p;

	if (resil_fleet_acquire(host[h], &p) != RESIL_OK)
		return "rejected";
	resil_fleet_record(host[h], &p, outcome);
	return "admitted";
}

static void
sync_all(void)
{
	int h;

	for (h = 0; h < HOSTS; h++)
		resil_fleet_sync(host[h], resil_clock_now(NULL));
}

/* Each host's fleet state, and in brackets its own breaker's. */
static void
show(const char *when)
{
	int h;

	printf("%s\n", when);
	for (h = 0; h < HOSTS; h++)
		printf("  %s: fleet %s (own breaker %s)\n", host_name[h],
		    resil_fleet_state_name(resil_fleet_get_state(host[h])),
		    resil_breaker_state_name(resil_breaker_get_state(
			resil_fleet_breaker(host[h]))));
}

int
main(int argc, char **argv)
{
	resil_fleet_config cfg;
	resil_fleet_info info;
	resil_diag d;
	int h, i, rc = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: fleet_redis PORT\n");
		return 2;
	}
	for (h = 0; h < HOSTS; h++) {
		resil_fleet_config_init(&cfg);
		cfg.name = "inventory";
		cfg.instance = host_name[h];
		cfg.port = (uint32_t)atoi(argv[1]);
		cfg.connect_timeout_ms = 1000; /* a loaded test machine */
		cfg.command_timeout_ms = 1000;
		cfg.quorum = 2;
		cfg.probe_leases = 1;
		cfg.open_wait_ms = 60000;
		/* Each host's own breaker: 5 failures in a row trip it. */
		cfg.breaker.consecutive_failures = 5;
		cfg.breaker.failure_rate_pct = 0;
		if (resil_fleet_new(&host[h], &cfg, &d) != RESIL_OK) {
			fprintf(stderr, "%s: %s\n", host_name[h], d.msg);
			return 1;
		}
	}
	sync_all();
	show("all healthy:");

	/* host-a's database replica dies: its breaker trips, it votes. */
	for (i = 0; i < 5; i++)
		call(0, RESIL_OUTCOME_FAILURE);
	sync_all();
	show("host-a tripped (1 vote of 2):");
	printf("  host-c's next call: %s\n", call(2, RESIL_OUTCOME_SUCCESS));

	/* host-b sees it too: two votes, the fleet opens for all three. */
	for (i = 0; i < 5; i++)
		call(1, RESIL_OUTCOME_FAILURE);
	sync_all(); /* host-b's vote opens the fleet... */
	sync_all(); /* ...and every host applies it at its next sync */
	show("host-b tripped (2 votes of 2):");
	printf("  host-c's next call: %s\n", call(2, RESIL_OUTCOME_SUCCESS));

	for (h = 0; h < HOSTS; h++) {
		if (resil_fleet_get_info(host[h], &info) != RESIL_OK ||
		    info.local_mode) {
			printf("%s is not on Redis\n", host_name[h]);
			rc = 1;
		}
		resil_fleet_free(host[h]);
	}
	return rc;
}

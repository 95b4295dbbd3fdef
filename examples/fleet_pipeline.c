/*
 * Three hosts (three processes here; three machines in production) each
 * run one pipeline -- retry, a result cache, a mock fallback -- whose
 * circuit breaker is ONE fleet breaker on Redis (resil/fleet.h), given to
 * the pipeline as resil_pipeline_config.fleet. The pipeline asks the fleet
 * for every permit (resil_fleet_acquire: its probe leases included) and
 * reports every outcome to it; the host's loop syncs with Redis.
 *
 * The fleet needs two hosts to agree (quorum 2): host-a's sickness opens
 * only its own breaker; when host-b's trips too, the fleet opens for all
 * three, and healthy host-c's calls are rejected without reaching its
 * dependency (answered from its cache). After the fleet's wait, host-c
 * holds the one probe lease: its call is the fleet's probe, and its
 * success closes the fleet for everybody.
 *
 * The hosts take turns (the parent hands the turn around) and every sync
 * is made explicitly, so the output is the same on every run; where the
 * fleet waits on Redis's clock, a host syncs until it sees the state
 * (bounded by a generous deadline, no timing asserted). ctest runs it
 * under with_server redis, which starts a redis-server of its own on a
 * free local port, and compares the output byte for byte.
 *
 * Usage: fleet_pipeline PORT
 */
#define _GNU_SOURCE 1

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <resil/fleet.h>
#include <resil/pipeline.h>

#define HOSTS 3

static const char *const host_name[HOSTS] = { "host-a", "host-b",
	"host-c" };

typedef struct stage {
	int turn; /* whose turn it is, -1: nobody's */
	int step; /* what to do in it */
	int want; /* STEP_SYNC: the fleet state to sync until */
	int sick[HOSTS];
	int dep_calls; /* calls that reached a dependency */
	int failed;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} stage;

enum { STEP_READY, STEP_CALL, STEP_SYNC, STEP_EXIT };

static stage *sg;
static int me;

static int
get_stock(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	__atomic_add_fetch(&sg->dep_calls, 1, __ATOMIC_SEQ_CST);
	if (sg->sick[me])
		return -1;
	*out = resil_value_int(42);
	return 0;
}

static int
wait_turn(void)
{
	int step;

	pthread_mutex_lock(&sg->mu);
	while (sg->turn != me)
		pthread_cond_wait(&sg->cv, &sg->mu);
	step = sg->step;
	pthread_mutex_unlock(&sg->mu);
	return step;
}

static void
end_turn(void)
{
	fflush(stdout);
	pthread_mutex_lock(&sg->mu);
	sg->turn = -1;
	pthread_cond_broadcast(&sg->cv);
	pthread_mutex_unlock(&sg->mu);
}

static void
run_turn(int id, int step, int want)
{
	pthread_mutex_lock(&sg->mu);
	sg->step = step;
	sg->want = want;
	sg->turn = id;
	pthread_cond_broadcast(&sg->cv);
	while (sg->turn != -1)
		pthread_cond_wait(&sg->cv, &sg->mu);
	pthread_mutex_unlock(&sg->mu);
}

/* Sync until the fleet shows want: at most ~60 s on a loaded machine
 * (the fleet's own waits are on Redis's clock). */
static void
sync_until(resil_fleet *f, resil_fleet_state want)
{
	struct timespec ts = { 0, 20000000 };
	int i;

	for (i = 0; i < 3000; i++) {
		if (resil_fleet_sync(f, resil_clock_now(NULL)) == RESIL_OK &&
		    resil_fleet_get_state(f) == want)
			break;
		nanosleep(&ts, NULL);
	}
	printf("  %s synced: fleet %s (own breaker %s)\n", host_name[me],
	    resil_fleet_state_name(resil_fleet_get_state(f)),
	    resil_breaker_state_name(
	        resil_breaker_get_state(resil_fleet_breaker(f))));
	if (resil_fleet_get_state(f) != want)
		sg->failed = 1;
}

static void
one_call(resil_pipeline *p)
{
	resil_args args = { "getStock", NULL, 0 };
	resil_result r;
	int before = __atomic_load_n(&sg->dep_calls, __ATOMIC_SEQ_CST);

	(void)resil_pipeline_call(p, &args, get_stock, NULL, &r);
	printf("  %s: getStock = ", host_name[me]);
	if (r.value.type == RESIL_VALUE_INT)
		printf("%lld", (long long)r.value.u.i);
	else
		printf("null");
	printf(" (%s; %d call(s) reached the dependency)\n",
	    resil_source_name(r.source),
	    __atomic_load_n(&sg->dep_calls, __ATOMIC_SEQ_CST) - before);
	resil_result_free(&r);
}

static void
host(int id, uint32_t port)
{
	resil_fleet_config fc;
	resil_pipeline_config pc;
	resil_fleet *f = NULL;
	resil_pipeline *p = NULL;
	resil_diag d;

	me = id;
	resil_fleet_config_init(&fc);
	fc.name = "inventory";
	fc.instance = host_name[id];
	fc.port = port;
	fc.connect_timeout_ms = 2000; /* a loaded test machine */
	fc.command_timeout_ms = 2000;
	fc.quorum = 2;
	fc.probe_leases = 1;
	fc.open_wait_ms = 200;
	fc.lease_ms = 600000;
	fc.vote_ms = 600000;
	/* Each host's own breaker: 2 failures in a row trip it (its vote). */
	fc.breaker.consecutive_failures = 2;
	fc.breaker.failure_rate_pct = 0;
	fc.breaker.open_wait_ns = UINT64_C(3600) * RESIL_NS_PER_SEC;
	resil_pipeline_config_init(&pc);
	pc.service = "InventoryService";
	pc.breaker_enabled = 1;
	pc.fleet = f; /* set below, once made */
	pc.retry_enabled = 1;
	pc.retry.max_attempts = 2;
	pc.retry.base_delay_ns = 0;
	pc.cache_enabled = 1;
	pc.mock = "fail:return null";
	if (resil_fleet_new(&f, &fc, &d) != RESIL_OK) {
		fprintf(stderr, "%s: %s\n", host_name[id], d.msg);
		_exit(1);
	}
	pc.fleet = f; /* borrowed: it outlives the pipeline */
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK) {
		fprintf(stderr, "%s: %s\n", host_name[id], d.msg);
		_exit(1);
	}
	for (;;) {
		int step = wait_turn();

		if (step == STEP_EXIT)
			break;
		if (step == STEP_READY)
			sync_until(f, RESIL_FLEET_CLOSED);
		else if (step == STEP_CALL)
			one_call(p);
		else
			sync_until(f, (resil_fleet_state)sg->want);
		end_turn();
	}
	resil_pipeline_free(p);
	resil_fleet_free(f);
	end_turn();
	_exit(0);
}

static void
say(const char *s)
{
	printf("%s\n", s);
	fflush(stdout);
}

static void
sync_all(resil_fleet_state want)
{
	int h;

	for (h = 0; h < HOSTS; h++)
		run_turn(h, STEP_SYNC, (int)want);
}

int
main(int argc, char **argv)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	pid_t kids[HOSTS];
	int i, st, failed = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: fleet_pipeline PORT\n");
		return 2;
	}
	sg = mmap(NULL, sizeof(*sg), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sg == MAP_FAILED)
		return 1;
	memset(sg, 0, sizeof(*sg));
	sg->turn = -1;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&sg->mu, &ma);
	pthread_condattr_init(&ca);
	pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
	pthread_cond_init(&sg->cv, &ca);
	fflush(stdout);
	for (i = 0; i < HOSTS; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0)
			host(i, (uint32_t)atoi(argv[1]));
	}

	say("all healthy: every host joins the fleet; host-c calls");
	for (i = 0; i < HOSTS; i++)
		run_turn(i, STEP_READY, 0);
	run_turn(2, STEP_CALL, 0);

	say("host-a's dependency is sick: its own breaker trips (1 vote of "
	    "2)");
	sg->sick[0] = 1;
	run_turn(0, STEP_CALL, 0);
	sync_all(RESIL_FLEET_CLOSED);
	run_turn(2, STEP_CALL, 0);

	say("host-b's too: 2 votes of 2, the fleet opens for all three");
	sg->sick[1] = 1;
	run_turn(1, STEP_CALL, 0);
	run_turn(1, STEP_SYNC, RESIL_FLEET_OPEN); /* its vote opens it */
	sync_all(RESIL_FLEET_OPEN);               /* every host applies it */
	run_turn(2, STEP_CALL, 0);

	say("the dependencies heal; after the fleet's wait host-c takes the "
	    "probe lease: its call is the probe, and closes the fleet");
	sg->sick[0] = sg->sick[1] = 0;
	run_turn(2, STEP_SYNC, RESIL_FLEET_HALF_OPEN);
	run_turn(2, STEP_CALL, 0);
	run_turn(2, STEP_SYNC, RESIL_FLEET_CLOSED); /* the probe reported */
	sync_all(RESIL_FLEET_CLOSED);
	run_turn(0, STEP_CALL, 0);
	run_turn(2, STEP_CALL, 0);

	for (i = 0; i < HOSTS; i++)
		run_turn(i, STEP_EXIT, 0);
	for (i = 0; i < HOSTS; i++)
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			failed = 1;
	printf("%d calls reached a dependency in all\n", sg->dep_calls);
	return failed || sg->failed;
}

/*
 * Three worker processes (a prefork server) each run one pipeline -- retry,
 * a result cache, a mock fallback -- over ONE circuit breaker in shared
 * memory, named in the pipeline's configuration text:
 *
 *   breaker.shared=shm:REGION/inventory
 *
 * The dependency falls sick: worker 1's and worker 2's failures open the
 * breaker, and from then on worker 0's calls are rejected without reaching
 * the dependency too (answered from its own cache), though worker 0 never
 * saw a failure. When the wait is over, one probe closes it for everybody.
 *
 * The processes take turns (the parent hands the turn around) and read one
 * clock in shared memory, so the output is the same on every run: ctest
 * compares it byte for byte (examples/shm_pipeline.expected).
 */
#define _GNU_SOURCE 1

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/config.h>
#include <resil/pipeline.h>
#include <resil/shm.h>

#define WORKERS 3

typedef struct stage {
	uint64_t now;  /* the shared clock */
	int turn;      /* whose turn it is, -1: nobody's */
	int step;      /* what to do in it */
	int sick;      /* the dependency fails while set */
	int dep_calls; /* calls that reached the dependency */
	pthread_mutex_t mu;
	pthread_cond_t cv;
} stage;

enum { STEP_READY, STEP_CALL, STEP_EXIT };

static stage *sg;

static uint64_t
stage_now(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&sg->now, __ATOMIC_ACQUIRE);
}

/* Retries here wait 0: nothing to sleep through. */
static void
stage_sleep(uint64_t ticks, void *ctx)
{
	(void)ticks;
	(void)ctx;
}

static const resil_clock stage_clock = { stage_now, NULL, stage_sleep,
	NULL, NULL, NULL, NULL };

static int
get_stock(void *ctx, const resil_args *args, resil_value *out)
{
	(void)ctx;
	(void)args;
	__atomic_add_fetch(&sg->dep_calls, 1, __ATOMIC_SEQ_CST);
	if (sg->sick)
		return -1;
	*out = resil_value_int(42);
	return 0;
}

/* The breaker transitions this worker's pipeline heard: its own, and
 * at its next call those the other workers made. */
static void
on_event(const resil_pipeline_event *ev, void *ctx)
{
	int id = *(const int *)ctx;

	if (ev->stage == RESIL_STAGE_BREAKER)
		printf("  worker %d heard: %s\n", id, ev->text);
}

static int
wait_turn(int id)
{
	int step;

	pthread_mutex_lock(&sg->mu);
	while (sg->turn != id)
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
run_turn(int id, int step)
{
	pthread_mutex_lock(&sg->mu);
	sg->step = step;
	sg->turn = id;
	pthread_cond_broadcast(&sg->cv);
	while (sg->turn != -1)
		pthread_cond_wait(&sg->cv, &sg->mu);
	pthread_mutex_unlock(&sg->mu);
}

static const char *const conf_text =
    "service=InventoryService\n"
    "breaker.shared=shm:%s/inventory\n"
    "breaker.failure_rate=0\n"
    "breaker.consecutive_failures=3\n"
    "breaker.open_wait=5s\n"
    "retry.max_attempts=2\n"
    "retry.delay=0\n"
    "cache.enabled=true\n"
    "mock=fail:return null\n";

static resil_pipeline *
open_pipeline(int *id, const char *region, resil_config **conf)
{
	char text[512];
	resil_pipeline_config pc;
	resil_pipeline *p = NULL;
	resil_diag d;

	snprintf(text, sizeof(text), conf_text, region);
	if (resil_config_parse_string(conf, text, "worker.conf", NULL, &d) !=
	    RESIL_OK) {
		fprintf(stderr, "worker %d: %s\n", *id, d.msg);
		_exit(1);
	}
	pc = *resil_config_pipeline(*conf);
	pc.clock = &stage_clock;
	pc.listener = on_event;
	pc.listener_ctx = id;
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK) {
		fprintf(stderr, "worker %d: %s\n", *id, d.msg);
		_exit(1);
	}
	return p;
}

static void
one_call(int id, resil_pipeline *p)
{
	resil_args args = { "getStock", NULL, 0 };
	resil_result r;
	int before = __atomic_load_n(&sg->dep_calls, __ATOMIC_SEQ_CST);

	(void)resil_pipeline_call(p, &args, get_stock, NULL, &r);
	printf("  worker %d: getStock = ", id);
	if (r.value.type == RESIL_VALUE_INT)
		printf("%lld", (long long)r.value.u.i);
	else
		printf("null");
	printf(" (%s; %d call(s) reached the dependency; breaker %s)\n",
	    resil_source_name(r.source),
	    __atomic_load_n(&sg->dep_calls, __ATOMIC_SEQ_CST) - before,
	    resil_breaker_state_name(
	        resil_breaker_get_state(resil_pipeline_breaker(p, NULL))));
	resil_result_free(&r);
}

static void
worker(int id, const char *region)
{
	resil_config *conf = NULL;
	resil_pipeline *p = open_pipeline(&id, region, &conf);

	for (;;) {
		int step = wait_turn(id);

		if (step == STEP_EXIT)
			break;
		if (step == STEP_CALL)
			one_call(id, p);
		end_turn();
	}
	resil_pipeline_free(p); /* closes its region handle too */
	resil_config_free(conf);
	end_turn();
	_exit(0);
}

static void
say(const char *s)
{
	printf("%s\n", s);
	fflush(stdout);
}

int
main(void)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
	pid_t kids[WORKERS];
	char region[64];
	int i, st, failed = 0;

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
	snprintf(region, sizeof(region), "shm-pipeline-%ld", (long)getpid());
	(void)resil_shm_unlink(region, NULL);

	fflush(stdout);
	for (i = 0; i < WORKERS; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0)
			worker(i, region);
	}
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_READY); /* every pipeline is built */

	say("0s: the dependency is healthy; worker 0 calls");
	run_turn(0, STEP_CALL);
	say("1s: the dependency is sick; workers 1 and 2 call (up to 2 "
	    "attempts each)");
	__atomic_store_n(&sg->now, 1 * RESIL_NS_PER_SEC, __ATOMIC_RELEASE);
	sg->sick = 1;
	run_turn(1, STEP_CALL);
	run_turn(2, STEP_CALL);
	say("2s: every worker calls: the breaker is open for all of them");
	__atomic_store_n(&sg->now, 2 * RESIL_NS_PER_SEC, __ATOMIC_RELEASE);
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_CALL);
	say("7s: the wait is over and the dependency healthy again; worker 1 "
	    "probes, then worker 0 calls");
	__atomic_store_n(&sg->now, 7 * RESIL_NS_PER_SEC, __ATOMIC_RELEASE);
	sg->sick = 0;
	run_turn(1, STEP_CALL);
	run_turn(0, STEP_CALL);

	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_EXIT);
	for (i = 0; i < WORKERS; i++)
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			failed = 1;
	(void)resil_shm_unlink(region, NULL);
	printf("%d calls reached the dependency in all\n", sg->dep_calls);
	return failed;
}

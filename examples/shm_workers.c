/*
 * Four worker processes share one circuit breaker through shared memory
 * (seed 003: "a multi-worker system must limit how many recovery probes
 * run at once"). Their dependency is sick: three failures, from three
 * different workers, open the breaker for all four at once; when the wait
 * is over the whole fleet sends exactly K = 2 probes, and their successes
 * close it for everybody. Then each worker prints the transitions its own
 * listener heard, in order, including those other workers made.
 *
 * The processes take turns (the parent hands the turn around) and read one
 * clock in shared memory that counts seconds as nanosecond ticks, so the
 * output is the same on every run: ctest compares it byte for byte.
 */
#define _GNU_SOURCE 1

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/breaker.h>
#include <resil/shm.h>

#define WORKERS 4
#define K 2

typedef struct stage {
	uint64_t now;  /* the shared clock */
	int turn;      /* whose turn it is, -1: nobody's */
	int step;      /* what to do in it */
	int sick;      /* the dependency fails while set */
	int dep_calls; /* calls that reached the dependency */
	pthread_mutex_t mu;
	pthread_cond_t cv;
} stage;

enum {
	STEP_READY,
	STEP_CALL,
	STEP_ACQUIRE,
	STEP_REPORT,
	STEP_PRINT,
	STEP_EXIT
};

static stage *sg;

static uint64_t
stage_now(void *ctx)
{
	(void)ctx;
	return __atomic_load_n(&sg->now, __ATOMIC_ACQUIRE);
}

static const resil_clock stage_clock = { stage_now, NULL, NULL, NULL, NULL,
	NULL, NULL };

typedef struct heard {
	resil_breaker_event ev[16];
	int n;
} heard;

static void
hear(const resil_breaker_event *ev, void *ctx)
{
	heard *h = ctx;

	if (h->n < 16)
		h->ev[h->n++] = *ev;
}

static int
dependency(void *ctx)
{
	(void)ctx;
	__atomic_add_fetch(&sg->dep_calls, 1, __ATOMIC_SEQ_CST);
	return sg->sick ? -1 : 0;
}

/* Wait for this worker's turn; returns the step to do. */
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
	pthread_mutex_lock(&sg->mu);
	sg->turn = -1;
	pthread_cond_broadcast(&sg->cv);
	pthread_mutex_unlock(&sg->mu);
}

/* The parent: give worker id the turn for step, wait until it is done. */
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

static void
worker(int id, const char *region)
{
	resil_breaker_config cfg;
	resil_shm *shm;
	resil_breaker *b;
	resil_permit probe;
	resil_diag d;
	heard h;
	int step, i, have_probe = 0;

	memset(&h, 0, sizeof(h));
	resil_breaker_config_init(&cfg);
	cfg.clock = &stage_clock;
	cfg.failure_rate_pct = 0;
	cfg.consecutive_failures = 3;
	cfg.open_wait_ns = 5 * RESIL_NS_PER_SEC;
	cfg.permitted_probes = K;
	cfg.max_half_open_ns = 10 * RESIL_NS_PER_SEC;
	cfg.listener = hear;
	cfg.listener_ctx = &h;
	if (resil_shm_open(&shm, region, NULL, &d) != RESIL_OK ||
	    resil_shm_breaker(shm, "inventory", &cfg, &b, &d) != RESIL_OK) {
		fprintf(stderr, "worker %d: %s\n", id, d.msg);
		_exit(1);
	}
	for (;;) {
		step = wait_turn(id);
		if (step == STEP_READY) {
			/* Attached: it hears every transition from now on. */
		} else if (step == STEP_CALL) {
			int rc;

			if (resil_breaker_call(b, dependency, NULL, NULL,
			        &rc) == RESIL_E_OPEN)
				printf("  worker %d: rejected, breaker open\n",
				    id);
			else
				printf("  worker %d: called, %s\n", id,
				    rc == 0 ? "ok" : "failed");
		} else if (step == STEP_ACQUIRE) {
			have_probe =
			    resil_breaker_acquire(b, &probe) == RESIL_OK;
			printf("  worker %d: %s\n", id,
			    have_probe ? "got a probe permit"
			               : "rejected, no probe left");
		} else if (step == STEP_REPORT) {
			if (have_probe) {
				resil_breaker_record(b, &probe,
				    dependency(NULL) == 0
				        ? RESIL_OUTCOME_SUCCESS
				        : RESIL_OUTCOME_FAILURE);
				printf("  worker %d: probe succeeded\n", id);
			}
		} else if (step == STEP_PRINT) {
			resil_breaker_poll(b);
			printf("  worker %d heard:", id);
			for (i = 0; i < h.n; i++)
				printf(" %llu %s->%s (%s, %llus)%s",
				    (unsigned long long)h.ev[i].seq,
				    resil_breaker_state_name(h.ev[i].from),
				    resil_breaker_state_name(h.ev[i].to),
				    resil_breaker_reason_name(h.ev[i].reason),
				    (unsigned long long)(h.ev[i].time /
				        RESIL_NS_PER_SEC),
				    i + 1 < h.n ? "," : "");
			printf("\n");
		} else {
			end_turn();
			break;
		}
		fflush(stdout);
		end_turn();
	}
	resil_breaker_free(b);
	resil_shm_close(shm);
	_exit(0);
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
	snprintf(region, sizeof(region), "fleet-example-%ld", (long)getpid());
	(void)resil_shm_unlink(region, NULL);

	fflush(stdout);
	for (i = 0; i < WORKERS; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0)
			worker(i, region);
	}

	/* Every worker has attached before the first call. */
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_READY);
	printf("0s: the dependency is sick; each worker calls once\n");
	fflush(stdout);
	sg->sick = 1;
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_CALL);

	printf("5s: the wait is over and the dependency is healthy again; "
	       "every worker asks for a probe\n");
	fflush(stdout);
	__atomic_store_n(&sg->now, 5 * RESIL_NS_PER_SEC, __ATOMIC_RELEASE);
	sg->sick = 0;
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_ACQUIRE);
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_REPORT);

	printf("what each worker's listener heard:\n");
	fflush(stdout);
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_PRINT);
	for (i = 0; i < WORKERS; i++)
		run_turn(i, STEP_EXIT);
	for (i = 0; i < WORKERS; i++)
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			failed = 1;
	printf("the dependency was called %d times: 3 failures, %d probes "
	       "for the whole fleet\n",
	    sg->dep_calls, sg->dep_calls - 3);
	(void)resil_shm_unlink(region, NULL);
	return failed;
}

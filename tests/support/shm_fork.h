/*
 * The fork fixtures of the shared-memory tests: a zeroed page the forked
 * processes share, a barrier in it for n processes, the test's region
 * name (PREFIX-PID, unlinked before and after), a child process that runs
 * one function and exits, and its clean exit checked. Header-only; the
 * test includes cmocka first.
 */
#ifndef RESIL_TEST_SHM_FORK_H
#define RESIL_TEST_SHM_FORK_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/shm.h>

/* size zeroed bytes shared with every process forked after. */
static inline void *
shm_fork_page(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	memset(p, 0, size);
	return p;
}

static inline void
shm_fork_unpage(void *p, size_t size)
{
	munmap(p, size);
}

/* A barrier for n processes, in a shared page. */
static inline void
shm_fork_barrier(pthread_barrier_t *b, unsigned n)
{
	pthread_barrierattr_t ba;

	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(b, &ba, n);
	pthread_barrierattr_destroy(&ba);
}

/* buf gets "PREFIX-PID" (this test's region), no region of that name
 * left over. */
static inline void
shm_fork_region(char *buf, size_t cap, const char *prefix)
{
	snprintf(buf, cap, "%s-%ld", prefix, (long)getpid());
	(void)resil_shm_unlink(buf, NULL);
}

/* A child process that runs fn, then _exit(0) (fn _exits otherwise). */
static inline pid_t
shm_fork_child(void (*fn)(void))
{
	pid_t kid = fork();

	assert_true(kid >= 0);
	if (kid == 0) {
		fn();
		_exit(0);
	}
	return kid;
}

/* kid exited, with status 0. */
static inline void
shm_fork_wait_ok(pid_t kid)
{
	int st;

	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

#endif

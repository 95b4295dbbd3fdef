/*
 * An executor (resil_executor) that takes no job: submit refuses, so each
 * attempt of a forking or hedging call runs on the caller's thread, one
 * after the other, which keeps a test deterministic. Header-only.
 */
#ifndef RESIL_TEST_CALLER_EXECUTOR_H
#define RESIL_TEST_CALLER_EXECUTOR_H

#include <stdint.h>

#include <resil/pipeline.h>

static inline int
caller_submit(void (*run)(void *job), void *job, void *ctx)
{
	(void)run;
	(void)job;
	(void)ctx;
	return -1; /* no thread: the attempt runs on the caller's */
}

static inline void
caller_wait(uint64_t until, void *ctx)
{
	(void)until;
	(void)ctx;
}

static inline void
caller_wake(void *ctx)
{
	(void)ctx;
}

static inline resil_executor
caller_executor(void)
{
	resil_executor e = { caller_submit, caller_wait, caller_wake, NULL };

	return e;
}

#endif

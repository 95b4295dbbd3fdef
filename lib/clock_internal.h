/*
 * Private: the system clock for a thread that sleeps real time on a
 * condition variable (lib/clock.c, the only file that reads the system's
 * time). Never installed.
 */
#ifndef RESIL_CLOCK_INTERNAL_H
#define RESIL_CLOCK_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Let condition variables made with ca time their waits on the monotonic
 * system clock (as resil__cond_deadline() counts). Returns
 * pthread_condattr_setclock's result. */
int resil__condattr_monotonic(pthread_condattr_t *ca);

/* *ts = the monotonic system time ms milliseconds from now: the absolute
 * time for pthread_cond_timedwait() on such a condition variable. */
void resil__cond_deadline(struct timespec *ts, uint32_t ms);

/* The real-time (wall) clock in ns since the epoch, as a resil_clock
 * (now only; no coarse, no sleep): what a Dubbo provider's timestamp
 * counts. */
struct resil_clock;
const struct resil_clock *resil__clock_wall(void);

#endif /* RESIL_CLOCK_INTERNAL_H */

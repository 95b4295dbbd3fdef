/*
 * The health checker under threads: two probe loops (next and report)
 * and a thread that adds and removes targets, as a directory's listener
 * would, on one checker. Nothing is lost or reported twice: every probe
 * handed out ends exactly once (reported, timed out, or forgotten with
 * its removed target), and the healthy count matches the targets.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/health.h>

#include "atomic.h"

#define TARGETS 64
#define ROUNDS 40000

typedef struct shared {
	resil_health *hc;
	uint64_t clock; /* a shared logical clock */
	uint64_t stop;
	uint64_t reported, refused, errors, events;
} shared;

static void
on_event(const resil_health_event *ev, void *ctx)
{
	shared *s = ctx;

	/* The lock is not held: the checker may be asked. */
	(void)resil_health_is_healthy(s->hc, ev->address);
	resil__inc64(&s->events);
}

static void *
prober(void *arg)
{
	shared *s = arg;
	resil_health_step st;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		uint64_t now = resil__faa64(&s->clock, 1);
		resil_err e;

		if (resil_health_next(s->hc, now, &st) != RESIL_OK) {
			resil__inc64(&s->errors);
			continue;
		}
		if (st.action != RESIL_HEALTH_PROBE)
			continue;
		e = resil_health_report(s->hc, st.probe,
		    (st.probe >> 21) % 3 == 0 ? RESIL_PROBE_FAILED
		                              : RESIL_PROBE_OK,
		    now + (st.probe >> 20) % 4);
		if (e == RESIL_OK)
			resil__inc64(&s->reported);
		else if (e == RESIL_E_NOTFOUND)
			resil__inc64(&s->refused);
		else
			resil__inc64(&s->errors);
	}
	return NULL;
}

static void *
churner(void *arg)
{
	shared *s = arg;
	char addr[32];
	unsigned n = 0;

	while (resil__load64(&s->stop) == 0) {
		snprintf(addr, sizeof(addr), "10.0.0.%u", n % TARGETS);
		if (resil_health_remove(s->hc, addr) == RESIL_E_NOTFOUND &&
		    resil_health_add(s->hc, addr, NULL,
		        resil__load64(&s->clock), NULL) != RESIL_OK)
			resil__inc64(&s->errors);
		n += 7;
	}
	return NULL;
}

static void
test_health_threads_probe_while_churning(void **state)
{
	resil_health_config cfg = resil_health_config_default();
	resil_health_metrics m;
	pthread_t p1, p2, c;
	shared s;
	char addr[32];
	size_t healthy = 0;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	cfg.interval_ns = 3;
	cfg.timeout_ns = 2;
	cfg.unhealthy_threshold = 2;
	cfg.healthy_threshold = 1;
	cfg.interval_jitter_ns = 3;
	cfg.listener = on_event;
	cfg.listener_ctx = &s;
	assert_int_equal(resil_health_new(&s.hc, &cfg, NULL), RESIL_OK);
	for (i = 0; i < TARGETS; i += 2) {
		snprintf(addr, sizeof(addr), "10.0.0.%d", i);
		assert_int_equal(
		    resil_health_add(s.hc, addr, NULL, 0, NULL), RESIL_OK);
	}
	assert_int_equal(pthread_create(&c, NULL, churner, &s), 0);
	assert_int_equal(pthread_create(&p1, NULL, prober, &s), 0);
	assert_int_equal(pthread_create(&p2, NULL, prober, &s), 0);
	pthread_join(p1, NULL);
	pthread_join(p2, NULL);
	resil__store64(&s.stop, 1);
	pthread_join(c, NULL);
	assert_int_equal(s.errors, 0);
	assert_int_equal(resil_health_get_metrics(s.hc, &m), RESIL_OK);
	assert_true(m.probes > 1000);
	assert_int_equal(m.refused, s.refused);
	/* Every result recorded is a report accepted or a timeout. */
	assert_int_equal(m.ok + m.failed, s.reported);
	assert_int_equal(m.became_healthy + m.became_unhealthy, s.events);
	for (i = 0; i < TARGETS; i++) {
		snprintf(addr, sizeof(addr), "10.0.0.%d", i);
		healthy += (size_t)resil_health_is_healthy(s.hc, addr);
	}
	assert_int_equal(m.healthy, healthy);
	assert_int_equal(m.targets, resil_health_count(s.hc));
	resil_health_free(s.hc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_health_threads_probe_while_churning),
	};

	return cmocka_run_group_tests_name(
	    "health_threads", tests, NULL, NULL);
}

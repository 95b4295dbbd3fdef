/*
 * Chaos under threads: decisions on several threads while another flips
 * the switches. Every decision sees a consistent word (a fault when live,
 * nothing otherwise), the counters add up, and a switch turned off is
 * seen by every decision that starts after it.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <resil/chaos.h>

#include "atomic.h"

#define THREADS 4
#define ROUNDS 200000

typedef struct shared {
	resil_chaos *ch;
	uint64_t stop;
	uint64_t injected;
	uint64_t errors;
} shared;

static void *
decider(void *arg)
{
	shared *s = arg;
	resil_chaos_action act;
	uint64_t mine = 0;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		unsigned k = resil_chaos_decide(s->ch, (uint64_t)i, &act);

		if (k == 0)
			continue;
		if (k != RESIL_CHAOS_FAULT || act.rc != -3)
			resil__inc64(&s->errors);
		mine++;
	}
	resil__faa64(&s->injected, mine);
	return NULL;
}

static void *
flipper(void *arg)
{
	shared *s = arg;
	unsigned n = 0;

	while (resil__load64(&s->stop) == 0) {
		unsigned which = (n & 1) ? RESIL_CHAOS_MASTER : RESIL_CHAOS_FAULT;

		if (resil_chaos_set_enabled(s->ch, which, (n >> 1) & 1) !=
		    RESIL_OK)
			resil__inc64(&s->errors);
		n++;
	}
	return NULL;
}

static void
test_chaos_threads_switch_while_deciding(void **state)
{
	resil_chaos_config cfg = resil_chaos_config_default();
	resil_chaos_metrics m;
	resil_chaos_action act;
	pthread_t t[THREADS], f;
	shared s;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	cfg.fault_rc = -3;
	cfg.fault.rate = 1;
	assert_int_equal(resil_chaos_new(&s.ch, &cfg, NULL), RESIL_OK);
	assert_int_equal(pthread_create(&f, NULL, flipper, &s), 0);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, decider, &s), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	resil__store64(&s.stop, 1);
	pthread_join(f, NULL);
	assert_int_equal(s.errors, 0);
	assert_int_equal(resil_chaos_get_metrics(s.ch, &m), RESIL_OK);
	/* Rate 1: every decision past the word injects. */
	assert_int_equal(m.decisions, s.injected);
	assert_int_equal(m.faults, s.injected);
	/* Off: no decision injects any more, on any thread. */
	assert_int_equal(resil_chaos_set_enabled(s.ch, RESIL_CHAOS_MASTER, 0),
	    RESIL_OK);
	for (i = 0; i < 1000; i++)
		assert_int_equal(resil_chaos_decide(s.ch, 0, &act), 0);
	resil_chaos_free(s.ch);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chaos_threads_switch_while_deciding),
	};

	return cmocka_run_group_tests_name("chaos_threads", tests, NULL, NULL);
}

/*
 * The gradient limit under threads: samples from several threads are
 * serialised (none is lost), the limit read without the lock is always
 * one the gradient held, within min..max.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/gradient.h>

#include "atomic.h"

#define THREADS 4
#define ROUNDS 50000

typedef struct shared {
	resil_gradient *g;
	uint64_t errors;
} shared;

static void *
sampler(void *arg)
{
	shared *s = arg;
	resil_rng rng;
	int i;

	resil_rng_seed(&rng, (uint64_t)(uintptr_t)&rng);
	for (i = 0; i < ROUNDS; i++) {
		uint32_t lim = resil_gradient_get_limit(s->g);
		uint64_t rtt = 1000 + resil_rng_next(&rng) % 3000;
		uint32_t l = resil_gradient_sample(s->g, rtt, lim, 0);

		if (lim < 5 || lim > 300 || l < 5 || l > 300)
			resil__inc64(&s->errors);
	}
	return NULL;
}

static void
test_gradient_threads_samples_serialised(void **state)
{
	resil_gradient_config cfg = resil_gradient_config_default();
	resil_gradient_metrics m;
	pthread_t t[THREADS];
	shared s;
	int i;

	(void)state;
	memset(&s, 0, sizeof(s));
	cfg.min_limit = 5;
	cfg.initial_limit = 20;
	cfg.max_limit = 300;
	assert_int_equal(resil_gradient_new(&s.g, &cfg, NULL), RESIL_OK);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, sampler, &s), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(s.errors, 0);
	assert_int_equal(resil_gradient_get_metrics(s.g, &m), RESIL_OK);
	assert_int_equal(m.samples, (uint64_t)THREADS * ROUNDS);
	assert_int_equal(m.limit, resil_gradient_get_limit(s.g));
	resil_gradient_free(s.g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gradient_threads_samples_serialised),
	};

	return cmocka_run_group_tests_name(
	    "gradient_threads", tests, NULL, NULL);
}

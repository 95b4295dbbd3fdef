#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <resil/breaker.h>
#include <resil/clock.h>
#include <resil/config.h>

static void
test_clock_manual_set_advance_sleep(void **state)
{
	resil_manual_clock mc;
	const resil_clock *c;

	(void)state;
	resil_manual_clock_init(&mc, 1000);
	c = resil_manual_clock_hook(&mc);
	assert_non_null(c);
	assert_int_equal(resil_clock_now(c), 1000);
	assert_int_equal(resil_clock_coarse(c), 1000);
	assert_int_equal(resil_manual_clock_advance(&mc, 5), 1005);
	resil_clock_sleep(c, 7); /* sleeping advances virtual time */
	assert_int_equal(resil_manual_clock_now(&mc), 1012);
	resil_manual_clock_set(&mc, 3); /* backwards is allowed */
	assert_int_equal(resil_clock_now(c), 3);
	resil_clock_sleep(c, 0);
	assert_int_equal(resil_clock_now(c), 3);
}

static void
test_clock_manual_saturates_at_max(void **state)
{
	resil_manual_clock mc;

	(void)state;
	resil_manual_clock_init(&mc, UINT64_MAX - 2);
	assert_int_equal(resil_manual_clock_advance(&mc, 1), UINT64_MAX - 1);
	assert_int_equal(resil_manual_clock_advance(&mc, 10), UINT64_MAX);
	assert_int_equal(
	    resil_manual_clock_advance(&mc, UINT64_MAX), UINT64_MAX);
}

static void
test_clock_system_is_monotonic(void **state)
{
	uint64_t a, b, c;

	(void)state;
	a = resil_clock_now(NULL);
	b = resil_clock_now(resil_clock_system());
	c = resil_clock_coarse(NULL);
	assert_true(a > 0);
	assert_true(b >= a);
	/* The coarse clock lags by at most a few milliseconds. */
	assert_true(c + 100 * RESIL_NS_PER_MS >= a);
	resil_clock_sleep(NULL, 0);
}

static void
test_clock_rng_is_seeded_and_exact(void **state)
{
	resil_rng a, b;
	uint64_t first;
	int i;

	(void)state;
	resil_rng_seed(&a, 42);
	resil_rng_seed(&b, 42);
	first = resil_rng_next(&a);
	assert_int_equal(first, resil_rng_next(&b));
	for (i = 0; i < 1000; i++) {
		double u = resil_rng_uniform(&a);

		assert_true(u >= 0.0 && u < 1.0);
		assert_true(u == resil_rng_uniform(&b));
	}
	resil_rng_seed(&a, 0);
	/* SplitMix64's first output for seed 0 (reference value). */
	assert_int_equal(resil_rng_next(&a), UINT64_C(0xe220a8397b1dcdaf));
	resil_rng_seed(&b, 43);
	resil_rng_seed(&a, 42);
	assert_true(resil_rng_next(&a) != resil_rng_next(&b));
}

static double
scripted(void *ctx)
{
	double **p = ctx;

	return *(*p)++;
}

static void
test_clock_random_hook_clamps(void **state)
{
	double script[] = { 0.25, -1.0, 1.0, 7.5, 0.0 / 0.0 };
	double *p = script;
	resil_random r = { scripted, &p };
	resil_rng rng;
	resil_random h;

	(void)state;
	assert_true(resil_random_uniform(&r) == 0.25);
	assert_true(resil_random_uniform(&r) == 0.0);
	assert_true(resil_random_uniform(&r) < 1.0);
	assert_true(resil_random_uniform(&r) < 1.0);
	assert_true(resil_random_uniform(&r) == 0.0);
	assert_true(resil_random_uniform(NULL) == 0.0);
	resil_rng_seed(&rng, 1);
	h = resil_rng_hook(&rng);
	assert_true(resil_random_uniform(&h) >= 0.0);
}

/* A tick is a nanosecond on every clock, the manual one included: text
 * says breaker.open_wait=30 (milliseconds), the test moves the manual
 * clock by 30 * RESIL_NS_PER_MS, and the probe comes exactly then. */
static void
test_clock_manual_ticks_are_nanoseconds(void **state)
{
	resil_manual_clock mc;
	resil_config *conf;
	resil_breaker_config bc;
	resil_breaker *b;
	resil_permit pm;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_config_parse_string(&conf,
	                     "breaker.failure_rate=0\n"
	                     "breaker.consecutive_failures=1\n"
	                     "breaker.open_wait=30\n",
	                     "t.conf", NULL, &d),
	    RESIL_OK);
	bc = resil_config_pipeline(conf)->breaker;
	assert_true(bc.open_wait_ns == 30 * RESIL_NS_PER_MS);
	resil_manual_clock_init(&mc, 0);
	bc.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_breaker_new(&b, &bc, &d), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(b, &pm), RESIL_OK);
	assert_int_equal(
	    resil_breaker_record(b, &pm, RESIL_OUTCOME_FAILURE), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	resil_manual_clock_advance(&mc, 30 * RESIL_NS_PER_MS - 1);
	assert_int_equal(resil_breaker_acquire(b, &pm), RESIL_E_OPEN);
	resil_manual_clock_advance(&mc, 1); /* one nanosecond */
	assert_int_equal(resil_breaker_acquire(b, &pm), RESIL_OK);
	assert_int_equal(resil_breaker_release(b, &pm), RESIL_OK);
	resil_breaker_free(b);
	resil_config_free(conf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_manual_set_advance_sleep),
		cmocka_unit_test(test_clock_manual_saturates_at_max),
		cmocka_unit_test(test_clock_system_is_monotonic),
		cmocka_unit_test(test_clock_rng_is_seeded_and_exact),
		cmocka_unit_test(test_clock_random_hook_clamps),
		cmocka_unit_test(test_clock_manual_ticks_are_nanoseconds),
	};

	return cmocka_run_group_tests_name("clock", tests, NULL, NULL);
}

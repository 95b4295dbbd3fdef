/*
 * Issue 42: the rate limiter's priority classes (reserve_critical,
 * reserve_default) and its drain, through the public API on the manual
 * clock. docs/limit.md, "Priorities in the rate limiter".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/clock.h>
#include <resil/limit.h>

#define SHED RESIL_PRIORITY_SHEDDABLE
#define DEF RESIL_PRIORITY_DEFAULT
#define CRIT RESIL_PRIORITY_CRITICAL

/* 10 permits per 1000 ticks (one every 100), a burst of 10: 2 of them
 * critical only, 3 more default and critical only. */
static resil_ratelimit *
mk(resil_manual_clock *mc, uint32_t rc, uint32_t rd)
{
	resil_ratelimit_config cfg;
	resil_ratelimit *rl = NULL;
	resil_diag d;

	resil_manual_clock_init(mc, 1000000);
	resil_ratelimit_config_init(&cfg);
	cfg.rate = 10;
	cfg.period_ns = 1000;
	cfg.burst = 10;
	cfg.reserve_critical = rc;
	cfg.reserve_default = rd;
	cfg.clock = resil_manual_clock_hook(mc);
	if (resil_ratelimit_new(&rl, &cfg, &d) != RESIL_OK)
		fail_msg("ratelimit: %s", d.msg);
	return rl;
}

static int
take(resil_ratelimit *rl, resil_priority p, uint64_t *ra)
{
	return resil_ratelimit_try_acquire_prio(rl, p, 1, ra) == RESIL_OK;
}

/* Each class takes down to its floor and no further, and each refusal
 * says when the class's next permit is due. */
static void
test_ratelimit_prio_shares(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl = mk(&mc, 2, 3);
	uint64_t ra = 0;
	int i;

	(void)state;
	for (i = 0; i < 5; i++)
		assert_true(take(rl, SHED, &ra));
	assert_false(take(rl, SHED, &ra));
	assert_int_equal(ra, 100); /* 6 available are needed: one more */
	for (i = 0; i < 3; i++)
		assert_true(take(rl, DEF, &ra));
	assert_false(take(rl, DEF, &ra));
	assert_int_equal(ra, 100);
	/* try_acquire is a default acquire. */
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 1, &ra), RESIL_E_LIMITED);
	assert_int_equal(ra, 100);
	for (i = 0; i < 2; i++)
		assert_true(take(rl, CRIT, &ra));
	assert_false(take(rl, CRIT, &ra));
	assert_int_equal(ra, 100);
	assert_false(take(rl, SHED, &ra));
	assert_int_equal(ra, 600);
	assert_false(take(rl, DEF, &ra));
	assert_int_equal(ra, 300);
	/* The refill goes to the higher classes first. */
	resil_manual_clock_advance(&mc, 99);
	assert_false(take(rl, CRIT, &ra));
	assert_int_equal(ra, 1);
	resil_manual_clock_advance(&mc, 1);
	assert_false(take(rl, DEF, &ra));
	assert_int_equal(ra, 200);
	assert_true(take(rl, CRIT, &ra));
	resil_manual_clock_advance(&mc, 300);
	assert_false(take(rl, SHED, &ra));
	assert_true(take(rl, DEF, &ra));
	assert_false(take(rl, DEF, &ra));
	resil_ratelimit_free(rl);
}

/* A flood of sheddable and default calls at every tick never takes the
 * permits a critical demand of reserve_critical per period needs; the
 * total never passes burst + rate * elapsed / period. */
static void
test_ratelimit_prio_reserve_per_period(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl = mk(&mc, 2, 3);
	resil_ratelimit_metrics m;
	uint64_t t, total = 0, crit = 0, shed = 0, def = 0;

	(void)state;
	for (t = 0; t < 100 * 1000; t += 10) {
		if (t % 500 == 0) {
			assert_true(take(rl, CRIT, NULL));
			crit++;
		}
		while (take(rl, SHED, NULL))
			shed++;
		while (take(rl, DEF, NULL))
			def++;
		total = crit + shed + def;
		assert_true(total <= 10 + 10 * t / 1000);
		resil_manual_clock_advance(&mc, 10);
	}
	assert_int_equal(crit, 200);
	/* The rest went to the lower classes, the default one first:
	 * sheddable got only 4 of the starting burst (9 left after the
	 * first critical call, down to its floor of 5). Of the 10 + 999
	 * permits due by the last step, the 2 critical ones are left. */
	assert_int_equal(shed, 4);
	assert_int_equal(total, 10 + 999 - 2);
	assert_int_equal(resil_ratelimit_get_metrics(rl, &m), RESIL_OK);
	assert_int_equal(m.granted_permits, total);
	resil_ratelimit_free(rl);
}

/* Without reservations every class is a plain acquire. */
static void
test_ratelimit_prio_none_reserved(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl = mk(&mc, 0, 0);
	uint64_t ra = 0;
	int i;

	(void)state;
	for (i = 0; i < 10; i++)
		assert_true(take(rl, SHED, &ra));
	assert_false(take(rl, CRIT, &ra));
	assert_int_equal(ra, 100);
	assert_false(take(rl, RESIL_PRIORITY_UNSET, &ra));
	resil_ratelimit_free(rl);
}

static void
test_ratelimit_prio_bad_input(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit_config cfg;
	resil_ratelimit *rl = NULL;
	resil_diag d;

	(void)state;
	resil_manual_clock_init(&mc, 1);
	resil_ratelimit_config_init(&cfg);
	cfg.burst = 10;
	cfg.reserve_critical = 4;
	cfg.reserve_default = 6;
	assert_int_equal(resil_ratelimit_new(&rl, &cfg, &d), RESIL_E_INVAL);
	assert_null(rl);
	assert_string_equal(d.msg,
	    "ratelimit.reserve.critical + ratelimit.reserve.default: 10 "
	    "must be below burst (10)");
	cfg.reserve_default = 5;
	cfg.batch = 4;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "ratelimit.batch: 4 must be 0 for a rate limiter that reserves "
	    "permits");
	cfg.batch = 0;
	cfg.drain_on_throttled = 2;
	assert_int_equal(
	    resil_ratelimit_config_validate(&cfg, &d), RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "ratelimit.drain_on_throttled: 2 is not 0 or 1");
	cfg.drain_on_throttled = 1;
	assert_int_equal(resil_ratelimit_config_validate(&cfg, &d), RESIL_OK);

	rl = mk(&mc, 2, 3);
	/* More than a class may ever take: invalid, not "later". */
	assert_int_equal(resil_ratelimit_try_acquire_prio(rl, SHED, 6, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_try_acquire_prio(rl, SHED, 5, NULL), RESIL_OK);
	assert_int_equal(
	    resil_ratelimit_try_acquire(rl, 9, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_try_acquire_prio(rl, DEF, 9, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_try_acquire_prio(rl, CRIT, 11, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_try_acquire_prio(rl, CRIT, 0, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_ratelimit_try_acquire_prio(rl, (resil_priority)4, 1, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_try_acquire_prio(NULL, CRIT, 1, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_ratelimit_drain(NULL, NULL), RESIL_E_INVAL);
	resil_ratelimit_free(rl);
}

/* A drain takes every permit, the reserved ones too: the next is due one
 * emission interval later, each class's after its floor refills. */
static void
test_ratelimit_drain(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl = mk(&mc, 2, 3);
	uint64_t ra = 0, n = 99;

	(void)state;
	assert_true(take(rl, SHED, &ra));
	assert_int_equal(resil_ratelimit_drain(rl, &n), RESIL_OK);
	assert_int_equal(n, 9);
	assert_false(take(rl, CRIT, &ra));
	assert_int_equal(ra, 100);
	assert_false(take(rl, DEF, &ra));
	assert_int_equal(ra, 300);
	assert_false(take(rl, SHED, &ra));
	assert_int_equal(ra, 600);
	/* Empty: nothing more to drain. */
	assert_int_equal(resil_ratelimit_drain(rl, &n), RESIL_OK);
	assert_int_equal(n, 0);
	resil_manual_clock_advance(&mc, 99);
	assert_false(take(rl, CRIT, &ra));
	resil_manual_clock_advance(&mc, 1);
	assert_true(take(rl, CRIT, &ra));
	/* Full again a period later; drained, a default wait is for its
	 * floor's 3 permits. */
	resil_manual_clock_advance(&mc, 1000);
	assert_int_equal(resil_ratelimit_drain(rl, &n), RESIL_OK);
	assert_int_equal(n, 10);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 1000, &ra), RESIL_OK);
	assert_int_equal(ra, 300);
	resil_ratelimit_free(rl);
}

/* acquire_wait decides as DEFAULT: it waits until the default floor
 * allows one more. */
static void
test_ratelimit_prio_wait_is_default(void **state)
{
	resil_manual_clock mc;
	resil_ratelimit *rl = mk(&mc, 2, 3);
	uint64_t waited = 0;
	int i;

	(void)state;
	for (i = 0; i < 8; i++)
		assert_true(take(rl, DEF, NULL));
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 99, &waited), RESIL_E_LIMITED);
	assert_int_equal(
	    resil_ratelimit_acquire_wait(rl, 1, 100, &waited), RESIL_OK);
	assert_int_equal(waited, 100);
	resil_ratelimit_free(rl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ratelimit_prio_shares),
		cmocka_unit_test(test_ratelimit_prio_reserve_per_period),
		cmocka_unit_test(test_ratelimit_prio_none_reserved),
		cmocka_unit_test(test_ratelimit_prio_bad_input),
		cmocka_unit_test(test_ratelimit_drain),
		cmocka_unit_test(test_ratelimit_prio_wait_is_default),
	};

	return cmocka_run_group_tests_name(
	    "ratelimit_prio", tests, NULL, NULL);
}

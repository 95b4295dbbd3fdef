#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/resil.h>

#include "internal.h"

static void
test_resil_strerror_every_code(void **state)
{
	(void)state;
	assert_string_equal(resil_strerror(RESIL_OK), "success");
	assert_string_equal(resil_strerror(RESIL_E_OPEN),
	    "rejected: circuit breaker open");
	assert_string_equal(resil_strerror(RESIL_E_MOCK),
	    "mocked exception for service degradation.");
	assert_string_equal(
	    resil_strerror((resil_err)9999), "unknown resil error");
	assert_string_equal(resil_err_name(RESIL_E_UNAVAILABLE),
	    "RESIL_E_UNAVAILABLE");
	assert_string_equal(resil_err_name((resil_err)-1), "RESIL_E_UNKNOWN");
}

static void
test_resil_error_numbers_are_stable(void **state)
{
	(void)state;
	/* Released numbers never change: these are ABI. */
	assert_int_equal(RESIL_OK, 0);
	assert_int_equal(RESIL_E_INVAL, 1);
	assert_int_equal(RESIL_E_NOMEM, 2);
	assert_int_equal(RESIL_E_MISUSE, 3);
	assert_int_equal(RESIL_E_OPEN, 4);
	assert_int_equal(RESIL_E_RETRIES_EXHAUSTED, 5);
	assert_int_equal(RESIL_E_UNAVAILABLE, 6);
	assert_int_equal(RESIL_E_LIMITED, 7);
}

static void
test_resil_version_matches_header(void **state)
{
	(void)state;
	assert_int_equal(resil_version(), RESIL_VERSION_NUM);
	assert_string_equal(resil_version_string(), RESIL_VERSION_STRING);
	assert_true(RESIL_VERSION_AT_LEAST(0, 1, 0));
	assert_false(RESIL_VERSION_AT_LEAST(99, 0, 0));
}

static resil_outcome
business_on_7(int rc, const void *value, void *ctx)
{
	(void)value;
	(*(int *)ctx)++;
	if (rc == 7)
		return RESIL_OUTCOME_BUSINESS;
	if (rc == 8)
		return (resil_outcome)42; /* garbage from a buggy classifier */
	return rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_IGNORED;
}

static void
test_resil_classifier_default_and_custom(void **state)
{
	int calls = 0;
	resil_classifier cls = { business_on_7, &calls };

	(void)state;
	assert_int_equal(resil_classify(NULL, 0, NULL), RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_classify(NULL, -1, NULL), RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_classify(NULL, 1, NULL), RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_classify(&cls, 7, NULL), RESIL_OUTCOME_BUSINESS);
	assert_int_equal(resil_classify(&cls, 3, NULL), RESIL_OUTCOME_IGNORED);
	assert_int_equal(resil_classify(&cls, 8, NULL), RESIL_OUTCOME_FAILURE);
	assert_int_equal(calls, 3);
	assert_string_equal(resil_outcome_name(RESIL_OUTCOME_BUSINESS), "business");
	assert_string_equal(resil_outcome_name((resil_outcome)9), "unknown");
}

static void
test_resil_diag_truncates_safely(void **state)
{
	resil_diag d;
	char big[600];

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(resil__diagf(&d, RESIL_E_INVAL, "f: %s", big),
	    RESIL_E_INVAL);
	assert_int_equal(strlen(d.msg), RESIL_DIAG_MAX - 1);
	assert_int_equal(resil__diagf(NULL, RESIL_E_NOMEM, "x"), RESIL_E_NOMEM);
}

static void
test_resil_thread_stripe_in_range(void **state)
{
	unsigned s = resil__thread_stripe(8);

	(void)state;
	assert_true(s < 8);
	/* Stable for one thread. */
	assert_int_equal(resil__thread_stripe(8), s);
	assert_int_equal(resil__thread_stripe(1), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resil_strerror_every_code),
		cmocka_unit_test(test_resil_error_numbers_are_stable),
		cmocka_unit_test(test_resil_version_matches_header),
		cmocka_unit_test(test_resil_classifier_default_and_custom),
		cmocka_unit_test(test_resil_diag_truncates_safely),
		cmocka_unit_test(test_resil_thread_stripe_in_range),
	};

	return cmocka_run_group_tests_name("resil", tests, NULL, NULL);
}

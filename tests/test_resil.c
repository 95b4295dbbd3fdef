#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <string.h>

#include <resil/resil.h>

#include "internal.h"

static void
test_resil_strerror_every_code(void **state)
{
	(void)state;
	assert_string_equal(resil_strerror(RESIL_OK), "success");
	assert_string_equal(
	    resil_strerror(RESIL_E_OPEN), "rejected: circuit breaker open");
	assert_string_equal(resil_strerror(RESIL_E_MOCK),
	    "mocked exception for service degradation.");
	assert_string_equal(
	    resil_strerror((resil_err)9999), "unknown resil error");
	assert_string_equal(
	    resil_err_name(RESIL_E_UNAVAILABLE), "RESIL_E_UNAVAILABLE");
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
	assert_int_equal(
	    resil_classify(NULL, -1, NULL), RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_classify(NULL, 1, NULL), RESIL_OUTCOME_FAILURE);
	assert_int_equal(
	    resil_classify(&cls, 7, NULL), RESIL_OUTCOME_BUSINESS);
	assert_int_equal(resil_classify(&cls, 3, NULL), RESIL_OUTCOME_IGNORED);
	assert_int_equal(resil_classify(&cls, 8, NULL), RESIL_OUTCOME_FAILURE);
	assert_int_equal(calls, 3);
	assert_string_equal(
	    resil_outcome_name(RESIL_OUTCOME_BUSINESS), "business");
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
	assert_int_equal(
	    resil__diagf(&d, RESIL_E_INVAL, "f: %s", big), RESIL_E_INVAL);
	assert_true(strlen(d.msg) < RESIL_DIAG_MAX);
	assert_int_equal(
	    resil__diagf(NULL, RESIL_E_NOMEM, "x"), RESIL_E_NOMEM);
}

/* issue 14: a 10 KB value must not push the reason out of the message:
 * a value longer than a diagnostic is elided in the middle. */
static void
test_resil_diag_elides_long_values_keeps_reason(void **state)
{
	resil_diag d;
	static char key[10240];
	char want[128];

	(void)state;
	memset(key, 'k', sizeof(key) - 1);
	key[0] = 'A';
	key[sizeof(key) - 2] = 'Z';
	resil__diagf(&d, RESIL_E_INVAL, "%s: unknown key", key);
	snprintf(want, sizeof(want), "A%.43s...%.43sZ: unknown key", key + 1,
	    key + 1);
	assert_string_equal(d.msg, want);
	/* A value that fits is never cut, nor a message passed on. */
	resil__diagf(&d, RESIL_E_INVAL, "%s: %s", "outer",
	    "a message of its own that is long enough to be a real message "
	    "passed on from another diagnostic, but still below 255 bytes");
	assert_string_equal(d.msg,
	    "outer: a message of its own that is long enough to be a real "
	    "message passed on from another diagnostic, but still below 255 "
	    "bytes");
	/* The conversions resil writes come out as printf's. */
	resil__diagf(&d, RESIL_E_INVAL,
	    "%zu %llu %u %d %ld %c %g %.3f %% %.*s|%5s|%-3d|%x %" PRIu64,
	    (size_t)7, 18446744073709551615ull, 4294967295u, -3, -4L, 'q', 0.5,
	    1.25, 2, "abcdef", "ab", 9, 255u, (uint64_t)42);
	assert_string_equal(d.msg,
	    "7 18446744073709551615 4294967295 -3 -4 q 0.5 1.250 % ab|ab|9  "
	    "|ff 42");
	/* Many long values: the head and the tail (the reason) stay. */
	resil__diagf(
	    &d, RESIL_E_INVAL, "%s %s %s %s: the reason", key, key, key, key);
	assert_true(strlen(d.msg) < RESIL_DIAG_MAX);
	assert_true(strncmp(d.msg, "Akkk", 4) == 0);
	assert_non_null(strstr(d.msg, "kZ: the reason"));
	/* UTF-8 is never cut inside a character. */
	{
		static char u[900];
		size_t i;

		for (i = 0; i + 2 < sizeof(u); i += 2)
			memcpy(u + i, "\xc3\xa9", 2);
		u[i] = '\0';
		resil__diagf(&d, RESIL_E_INVAL, "%s", u);
		assert_int_equal(strlen(d.msg), 44 + 3 + 44);
		assert_true(strncmp(d.msg + 44, "...", 3) == 0);
		assert_true((unsigned char)d.msg[47] == 0xc3);
	}
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
		cmocka_unit_test(
		    test_resil_diag_elides_long_values_keeps_reason),
		cmocka_unit_test(test_resil_thread_stripe_in_range),
	};

	return cmocka_run_group_tests_name("resil", tests, NULL, NULL);
}

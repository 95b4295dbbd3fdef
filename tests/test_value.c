#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <resil/value.h>

#include "support/fail_alloc.h"

static void
test_value_scalars_and_names(void **state)
{
	resil_value v = resil_value_int(-42);
	char buf[64];

	(void)state;
	assert_int_equal(v.type, RESIL_VALUE_INT);
	assert_int_equal(v.u.i, -42);
	assert_int_equal(resil_value_format(&v, buf, sizeof(buf)), 3);
	assert_string_equal(buf, "-42");
	v = resil_value_bool(7);
	assert_int_equal(v.u.b, 1);
	resil_value_format(&v, buf, sizeof(buf));
	assert_string_equal(buf, "true");
	v = resil_value_double(2.0);
	resil_value_format(&v, buf, sizeof(buf));
	assert_string_equal(buf, "2.0");
	v = resil_value_double(0.1);
	resil_value_format(&v, buf, sizeof(buf));
	assert_string_equal(buf, "0.1");
	v = resil_value_null();
	resil_value_format(&v, buf, sizeof(buf));
	assert_string_equal(buf, "null");
	assert_string_equal(resil_vtype_name(RESIL_VALUE_JSON), "json");
	assert_string_equal(resil_type_name(RESIL_TYPE_OBJECT), "object");
	assert_string_equal(resil_source_name(RESIL_SOURCE_CACHE), "cache");
	assert_string_equal(
	    resil_source_name(RESIL_SOURCE_UNAVAILABLE), "unavailable");
	assert_string_equal(resil_vtype_name((resil_vtype)99), "unknown");
}

static void
test_value_heap_copy_free_through_hook(void **state)
{
	fail_alloc fa;
	const resil_allocator *a = fail_alloc_init(&fa, 0);
	resil_value s, b, c;
	char buf[64];

	(void)state;
	assert_int_equal(resil_value_string(&s, "a\"b\n", 4, a), RESIL_OK);
	assert_int_equal(s.u.s.len, 4);
	assert_int_equal(s.u.s.ptr[4], '\0');
	resil_value_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "\"a\\\"b\\n\"");
	assert_int_equal(resil_value_bytes(&b, "\x00\xff", 2, a), RESIL_OK);
	resil_value_format(&b, buf, sizeof(buf));
	assert_string_equal(buf, "0x00ff");
	assert_int_equal(resil_value_copy(&c, &s, a), RESIL_OK);
	assert_true(resil_value_equal(&c, &s));
	assert_ptr_not_equal(c.u.s.ptr, s.u.s.ptr);
	assert_int_equal(fail_alloc_live(&fa), 3);
	assert_int_equal(resil_value_heap_size(&c), 5);
	resil_value_free(&s);
	resil_value_free(&b);
	resil_value_free(&c);
	assert_int_equal(s.type, RESIL_VALUE_NULL);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_int_equal(fa.live_bytes, 0);
	assert_false(fa.size_mismatch);
	resil_value_free(NULL);
}

static void
test_value_nomem_leaves_out_unchanged(void **state)
{
	fail_alloc fa;
	const resil_allocator *a = fail_alloc_init(&fa, 1);
	resil_value v = resil_value_int(5);

	(void)state;
	assert_int_equal(resil_value_string(&v, "xyz", 3, a), RESIL_E_NOMEM);
	assert_int_equal(v.type, RESIL_VALUE_INT);
	assert_int_equal(v.u.i, 5);
	assert_int_equal(fail_alloc_live(&fa), 0);
}

static void
test_value_null_arguments_are_refused(void **state)
{
	resil_value v;

	(void)state;
	assert_int_equal(
	    resil_value_string(NULL, "x", 1, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_value_string(&v, NULL, 1, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_value_bytes(&v, NULL, 0, NULL), RESIL_OK);
	assert_int_equal(v.u.s.len, 0);
	resil_value_free(&v);
	assert_int_equal(resil_value_copy(NULL, &v, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_value_copy(&v, &v, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_value_json(&v, NULL, 0, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_value_coerce(&v, NULL, RESIL_TYPE_INT, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_value_empty(NULL, RESIL_TYPE_INT, NULL), RESIL_E_INVAL);
	assert_true(resil_value_equal(NULL, NULL));
	assert_false(resil_value_equal(NULL, &v));
}

static void
test_value_json_is_validated_and_compacted(void **state)
{
	resil_value v;
	const char *doc = " { \"a\" : [1, 2] } ";

	(void)state;
	assert_int_equal(
	    resil_value_json(&v, doc, strlen(doc), NULL), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_JSON);
	assert_string_equal(v.u.s.ptr, "{\"a\":[1,2]}");
	resil_value_free(&v);
	assert_int_equal(
	    resil_value_json(&v, "{\"a\":", 5, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_value_json(&v, "[1] x", 5, NULL), RESIL_E_INVAL);
	/* Only len bytes are read: the document is "[1]". */
	assert_int_equal(resil_value_json(&v, "[1]]]", 3, NULL), RESIL_OK);
	assert_string_equal(v.u.s.ptr, "[1]");
	resil_value_free(&v);
}

static void
test_value_equality_is_by_type_and_content(void **state)
{
	resil_value a = resil_value_int(1), b = resil_value_double(1.0);
	resil_value s1, s2;

	(void)state;
	assert_false(resil_value_equal(&a, &b));
	b = resil_value_int(1);
	assert_true(resil_value_equal(&a, &b));
	assert_int_equal(resil_value_string(&s1, "ab", 2, NULL), RESIL_OK);
	assert_int_equal(resil_value_bytes(&s2, "ab", 2, NULL), RESIL_OK);
	assert_false(resil_value_equal(&s1, &s2)); /* string != bytes */
	resil_value_free(&s2);
	assert_int_equal(resil_value_string(&s2, "ab", 2, NULL), RESIL_OK);
	assert_true(resil_value_equal(&s1, &s2));
	resil_value_free(&s1);
	resil_value_free(&s2);
	a = resil_value_null();
	b = resil_value_null();
	assert_true(resil_value_equal(&a, &b));
}

static void
test_value_coerce_each_type(void **state)
{
	resil_value in, out;
	resil_diag d;

	(void)state;
	/* double -> int only when integral */
	in = resil_value_double(3.0);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_INT, NULL, &d), RESIL_OK);
	assert_int_equal(out.type, RESIL_VALUE_INT);
	assert_int_equal(out.u.i, 3);
	in = resil_value_double(2.5);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_INT, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "cannot convert double 2.5 to int");
	/* int -> double */
	in = resil_value_int(7);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_DOUBLE, NULL, &d),
	    RESIL_OK);
	assert_true(out.type == RESIL_VALUE_DOUBLE && out.u.d == 7.0);
	/* int -> string */
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_STRING, NULL, &d),
	    RESIL_OK);
	assert_int_equal(out.type, RESIL_VALUE_STRING);
	assert_string_equal(out.u.s.ptr, "7");
	resil_value_free(&out);
	/* int -> bool is refused */
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_BOOL, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "cannot convert int 7 to bool");
	/* string -> int / double */
	assert_int_equal(resil_value_string(&in, "12", 2, NULL), RESIL_OK);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_INT, NULL, &d), RESIL_OK);
	assert_int_equal(out.u.i, 12);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_DOUBLE, NULL, &d),
	    RESIL_OK);
	assert_true(out.u.d == 12.0);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_BYTES, NULL, &d),
	    RESIL_OK);
	assert_int_equal(out.type, RESIL_VALUE_BYTES);
	resil_value_free(&out);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_JSON, NULL, &d),
	    RESIL_OK);
	assert_string_equal(out.u.s.ptr, "\"12\"");
	resil_value_free(&out);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_ARRAY, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "cannot convert string \"12\" to array");
	resil_value_free(&in);
	/* null converts to everything but stays null */
	in = resil_value_null();
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_INT, NULL, &d), RESIL_OK);
	assert_int_equal(out.type, RESIL_VALUE_NULL);
	/* void takes only null */
	in = resil_value_bool(1);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_VOID, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "cannot convert bool true to void");
	/* JSON kinds */
	assert_int_equal(resil_value_json(&in, "[]", 2, NULL), RESIL_OK);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_ARRAY, NULL, &d),
	    RESIL_OK);
	resil_value_free(&out);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_OBJECT, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg, "cannot convert json [] to object");
	resil_value_free(&in);
	/* an int64 overflow from a string is refused */
	assert_int_equal(
	    resil_value_string(&in, "9223372036854775808", 19, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_value_coerce(&out, &in, RESIL_TYPE_INT, NULL, &d),
	    RESIL_E_INVAL);
	resil_value_free(&in);
}

static void
test_value_empty_of_each_type(void **state)
{
	static const struct {
		resil_type t;
		const char *text;
	} rows[] = {
		{ RESIL_TYPE_ANY, "null" },
		{ RESIL_TYPE_VOID, "null" },
		{ RESIL_TYPE_BOOL, "false" },
		{ RESIL_TYPE_INT, "0" },
		{ RESIL_TYPE_DOUBLE, "0.0" },
		{ RESIL_TYPE_STRING, "\"\"" },
		{ RESIL_TYPE_BYTES, "0x" },
		{ RESIL_TYPE_ARRAY, "[]" },
		{ RESIL_TYPE_OBJECT, "{}" },
		{ RESIL_TYPE_JSON, "[]" },
	};
	size_t i;
	char buf[16];
	resil_value v;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(
		    resil_value_empty(&v, rows[i].t, NULL), RESIL_OK);
		resil_value_format(&v, buf, sizeof(buf));
		assert_string_equal(buf, rows[i].text);
		resil_value_free(&v);
	}
}

static void
test_value_format_truncates_like_snprintf(void **state)
{
	resil_value v;
	char buf[4];

	(void)state;
	assert_int_equal(resil_value_string(&v, "hello", 5, NULL), RESIL_OK);
	assert_int_equal(resil_value_format(&v, buf, sizeof(buf)), 7);
	assert_string_equal(buf, "\"he");
	assert_int_equal(resil_value_format(&v, NULL, 0), 7);
	resil_value_free(&v);
}

static void
test_value_result_init_is_unavailable_not_zero(void **state)
{
	resil_result r;

	(void)state;
	memset(&r, 0x5a, sizeof(r));
	resil_result_init(&r);
	assert_int_equal(r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.cause, RESIL_OK);
	assert_null(r.error_name);
	assert_int_equal(resil_value_string(&r.value, "x", 1, NULL), RESIL_OK);
	resil_result_free(&r); /* asan checks the string is released */
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_value_scalars_and_names),
		cmocka_unit_test(test_value_heap_copy_free_through_hook),
		cmocka_unit_test(test_value_nomem_leaves_out_unchanged),
		cmocka_unit_test(test_value_null_arguments_are_refused),
		cmocka_unit_test(test_value_json_is_validated_and_compacted),
		cmocka_unit_test(test_value_equality_is_by_type_and_content),
		cmocka_unit_test(test_value_coerce_each_type),
		cmocka_unit_test(test_value_empty_of_each_type),
		cmocka_unit_test(test_value_format_truncates_like_snprintf),
		cmocka_unit_test(
		    test_value_result_init_is_unavailable_not_zero),
	};

	return cmocka_run_group_tests_name("value", tests, NULL, NULL);
}

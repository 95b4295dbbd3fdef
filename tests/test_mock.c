#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/mock.h>

#include "support/fail_alloc.h"

#define SERVICE "com.foo.DemoService"

/* The real call: counts its calls and answers rc with value 8. */
typedef struct live {
	int calls;
	int rc;
} live;

static int
live_fn(void *ctx, const resil_args *args, resil_value *out)
{
	live *l = ctx;

	(void)args;
	l->calls++;
	if (l->rc == 0)
		*out = resil_value_int(8);
	return l->rc;
}

/* A mock implementation: counts calls, answers "mocked" or fails. */
typedef struct impl {
	int calls;
	int rc;
	int answer_int; /* answer 41 instead of a string */
} impl;

static int
impl_fn(void *ctx, const resil_args *args, resil_value *out)
{
	impl *m = ctx;

	(void)args;
	m->calls++;
	if (m->rc != 0)
		return m->rc;
	if (m->answer_int) {
		*out = resil_value_int(41);
		return 0;
	}
	return resil_value_string(out, "mocked", 6, NULL) == RESIL_OK ? 0 : 1;
}

/* Business for rc 400, failure otherwise. */
static resil_outcome
classify_400(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	if (rc == 0)
		return RESIL_OUTCOME_SUCCESS;
	return rc == 400 ? RESIL_OUTCOME_BUSINESS : RESIL_OUTCOME_FAILURE;
}

typedef struct fixture {
	resil_mock_registry *reg;
	impl def;   /* com.foo.DemoServiceMock */
	impl named; /* BackupMock, for DemoService */
	impl other; /* OtherMock, for another service */
} fixture;

static int
setup(void **state)
{
	static fixture f;

	memset(&f, 0, sizeof(f));
	if (resil_mock_registry_new(&f.reg, NULL) != RESIL_OK)
		return -1;
	if (resil_mock_registry_add_impl(f.reg, SERVICE "Mock", SERVICE,
	        impl_fn, &f.def, NULL) != RESIL_OK ||
	    resil_mock_registry_add_impl(f.reg, "BackupMock", SERVICE, impl_fn,
	        &f.named, NULL) != RESIL_OK ||
	    resil_mock_registry_add_impl(f.reg, "OtherMock",
	        "com.foo.OtherService", impl_fn, &f.other, NULL) != RESIL_OK ||
	    resil_mock_registry_add_error(f.reg, "OutOfStock", 409, NULL) !=
	        RESIL_OK)
		return -1;
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	resil_mock_registry_free(f->reg);
	return 0;
}

static resil_mock *
make(fixture *f, const char *spec)
{
	resil_mock_config cfg = resil_mock_config_default();
	resil_mock *m = NULL;
	resil_diag d;

	cfg.service = SERVICE;
	cfg.spec = spec;
	cfg.registry = f->reg;
	d.msg[0] = '\0';
	if (resil_mock_new(&m, &cfg, &d) != RESIL_OK)
		fail_msg("resil_mock_new(%s): %s", spec, d.msg);
	return m;
}

static void
canon(const char *spec, resil_type t, const char *want)
{
	resil_mock_spec s, again;
	resil_diag d;
	char buf[128];

	d.msg[0] = '\0';
	if (resil_mock_parse(&s, spec, t, NULL, &d) != RESIL_OK)
		fail_msg("parse \"%s\": %s", spec ? spec : "(NULL)", d.msg);
	resil_mock_spec_format(&s, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		fail_msg("\"%s\" -> \"%s\", want \"%s\"",
		    spec ? spec : "(NULL)", buf, want);
	/* The canonical text is itself a spelling of the same form. */
	assert_int_equal(resil_mock_parse(&again, buf, t, NULL, &d), RESIL_OK);
	assert_true(resil_mock_spec_equal(&s, &again));
	resil_mock_spec_free(&again);
	resil_mock_spec_free(&s);
}

static void
refused(const char *spec, resil_type t, const char *want_msg)
{
	resil_mock_spec s;
	resil_diag d;

	d.msg[0] = '\0';
	s.action = RESIL_MOCK_THROW; /* must stay untouched */
	assert_int_equal(
	    resil_mock_parse(&s, spec, t, NULL, &d), RESIL_E_INVAL);
	assert_int_equal(s.action, RESIL_MOCK_THROW);
	if (strcmp(d.msg, want_msg) != 0)
		fail_msg("\"%s\": got '%s', want '%s'", spec, d.msg, want_msg);
}

/* ---- the table of seed 000, one row each ---- */

static void
test_mock_force_return_null_never_calls(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:return null");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 0);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(r.cause, RESIL_OK);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_force_return_value_never_calls(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:return \"x\"");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;
	int i;

	for (i = 0; i < 3; i++) {
		assert_int_equal(
		    resil_mock_call(m, &args, live_fn, &l, NULL, &r),
		    RESIL_OK);
		assert_int_equal(r.value.type, RESIL_VALUE_STRING);
		assert_string_equal(r.value.u.s.ptr, "x");
		assert_int_equal(r.source, RESIL_SOURCE_MOCK);
		resil_result_free(&r);
	}
	assert_int_equal(l.calls, 0);
	resil_mock_free(m);
}

static void
test_mock_force_throw_gives_mock_error(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:throw");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_E_MOCK);
	assert_int_equal(l.calls, 0);
	assert_int_equal(r.err, RESIL_E_MOCK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_string_equal(
	    r.message, "mocked exception for service degradation.");
	assert_string_equal(resil_strerror(r.err), r.message);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_force_impl_runs_the_implementation(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:com.foo.DemoServiceMock");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	f->def.calls = 0;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 0);
	assert_int_equal(f->def.calls, 1);
	assert_string_equal(r.value.u.s.ptr, "mocked");
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_fail_return_null_calls_first(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:return null");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	/* A healthy call answers live. */
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 1);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.u.i, 8);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	/* A failed call is called first, then mocked. */
	l.rc = 503;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 2);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, 503);
	assert_int_equal(r.attempts, 1);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_fail_return_value_after_failure(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:return \"x\"");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 1 };
	resil_result r;

	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 1);
	assert_string_equal(r.value.u.s.ptr, "x");
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_fail_throw_after_failure(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:throw");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	resil_result_free(&r);
	l.rc = 2;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_E_MOCK);
	assert_int_equal(l.calls, 2);
	assert_string_equal(r.message, RESIL_MOCK_MESSAGE);
	assert_int_equal(r.cause, RESIL_E_CALL);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_fail_impl_after_failure(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:com.foo.DemoServiceMock");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	f->def.calls = 0;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(f->def.calls, 0);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	l.rc = 1;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 2);
	assert_int_equal(f->def.calls, 1);
	assert_string_equal(r.value.u.s.ptr, "mocked");
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_default_words_are_the_service_mock(void **state)
{
	static const struct {
		const char *spec;
		const char *canon;
	} rows[] = {
		{ "true", "fail:default" },
		{ "default", "fail:default" },
		{ "fail", "fail:default" },
		{ "force", "force:default" },
		{ " TRUE ", "fail:default" },
		{ "Default", "fail:default" },
		{ "fail:default", "fail:default" },
		{ "force:true", "force:default" },
		{ "fail:force", "fail:default" },
	};
	fixture *f = *state;
	size_t i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		resil_mock *m = make(f, rows[i].spec);
		resil_args args = { "getStock", NULL, 0 };
		live l = { 0, 1 };
		resil_result r;
		const resil_mock_spec *s;

		canon(rows[i].spec, RESIL_TYPE_ANY, rows[i].canon);
		assert_int_equal(
		    resil_mock_lookup(m, "getStock", &s), RESIL_OK);
		assert_int_equal(s->action, RESIL_MOCK_IMPL);
		assert_null(s->name);
		f->def.calls = 0;
		assert_int_equal(
		    resil_mock_call(m, &args, live_fn, &l, NULL, &r),
		    RESIL_OK);
		assert_int_equal(f->def.calls, 1);
		/* force alone never calls; the others call first */
		assert_int_equal(l.calls, s->mode == RESIL_MOCK_FORCE ? 0 : 1);
		resil_result_free(&r);
		resil_mock_free(m);
	}
}

static void
test_mock_bare_return_is_return_null(void **state)
{
	(void)state;
	canon("return", RESIL_TYPE_ANY, "fail:return null");
	canon("return", RESIL_TYPE_INT, "fail:return null");
	canon("force:return", RESIL_TYPE_ANY, "force:return null");
	canon("fail: RETURN ", RESIL_TYPE_ANY, "fail:return null");
}

/* ---- normal forms ---- */

static void
test_mock_every_spelling_has_one_normal_form(void **state)
{
	(void)state;
	canon("return null", RESIL_TYPE_ANY, "fail:return null");
	canon("  fail :  return   NULL  ", RESIL_TYPE_ANY, "fail:return null");
	canon("FAIL:Return Null", RESIL_TYPE_ANY, "fail:return null");
	canon("Force:return null", RESIL_TYPE_ANY, "force:return null");
	canon("return 'x'", RESIL_TYPE_ANY, "fail:return \"x\"");
	canon("return \"x\"", RESIL_TYPE_ANY, "fail:return \"x\"");
	canon("return `x`", RESIL_TYPE_ANY, "fail:return \"x\"");
	canon("return x", RESIL_TYPE_STRING, "fail:return \"x\"");
	canon("return ''", RESIL_TYPE_ANY, "fail:return \"\"");
	canon("return empty", RESIL_TYPE_STRING, "fail:return \"\"");
	canon("throw", RESIL_TYPE_ANY, "fail:throw");
	canon("force : THROW", RESIL_TYPE_ANY, "force:throw");
	canon("force:throw  OutOfStock ", RESIL_TYPE_ANY,
	    "force:throw OutOfStock");
	canon("com.foo.DemoServiceMock", RESIL_TYPE_ANY,
	    "fail:com.foo.DemoServiceMock");
	canon("return TRUE", RESIL_TYPE_ANY, "fail:return true");
	canon("return false", RESIL_TYPE_BOOL, "fail:return false");
	canon("return empty", RESIL_TYPE_BOOL, "fail:return false");
	canon("return 1", RESIL_TYPE_ANY, "fail:return 1");
	canon("return 1", RESIL_TYPE_DOUBLE, "fail:return 1.0");
	canon("return 1.0", RESIL_TYPE_INT, "fail:return 1");
	canon("return -2.5e1", RESIL_TYPE_ANY, "fail:return -25.0");
	canon("return empty", RESIL_TYPE_INT, "fail:return 0");
	canon("return {\"a\" : [1, 2]}", RESIL_TYPE_ANY,
	    "fail:return {\"a\":[1,2]}");
	canon("return [ ]", RESIL_TYPE_ARRAY, "fail:return []");
	canon("return empty", RESIL_TYPE_ARRAY, "fail:return []");
	canon("return empty", RESIL_TYPE_OBJECT, "fail:return {}");
	canon("return empty", RESIL_TYPE_ANY, "fail:return null");
	canon("return a\"b\"", RESIL_TYPE_STRING, "fail:return \"a\"b\"\"");
}

static void
test_mock_no_mock_values(void **state)
{
	static const char *const none[] = { NULL, "", "   ", "false", "FALSE",
		"0", "null", "NULL", "N/A", "n/a", " false " };
	fixture *f = *state;
	size_t i;

	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		resil_mock_spec s;
		resil_mock *m;
		resil_args args = { "getStock", NULL, 0 };
		live l = { 0, 7 };
		resil_result r;

		assert_int_equal(
		    resil_mock_parse(&s, none[i], RESIL_TYPE_ANY, NULL, NULL),
		    RESIL_OK);
		assert_int_equal(s.action, RESIL_MOCK_NONE);
		resil_mock_spec_free(&s);
		canon(none[i], RESIL_TYPE_ANY, "false");
		/* With no mock a failure propagates. */
		m = make(f, none[i]);
		assert_int_equal(
		    resil_mock_call(m, &args, live_fn, &l, NULL, &r),
		    RESIL_E_CALL);
		assert_int_equal(r.rc, 7);
		assert_int_equal(r.source, RESIL_SOURCE_LIVE);
		assert_int_equal(l.calls, 1);
		assert_int_equal(
		    resil_mock_invoke(m, &args, NULL, &r), RESIL_E_NOTFOUND);
		resil_mock_free(m);
	}
}

/* ---- values and coercion ---- */

static void
test_mock_return_values_take_the_declared_type(void **state)
{
	resil_mock_spec s;

	(void)state;
	assert_int_equal(
	    resil_mock_parse(&s, "return 1", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_INT);
	assert_int_equal(s.value.u.i, 1);
	resil_mock_spec_free(&s);
	assert_int_equal(
	    resil_mock_parse(&s, "return 1", RESIL_TYPE_DOUBLE, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_DOUBLE);
	assert_true(s.value.u.d == 1.0);
	resil_mock_spec_free(&s);
	/* For a string method the unquoted text stays text. */
	assert_int_equal(
	    resil_mock_parse(&s, "return 123", RESIL_TYPE_STRING, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_STRING);
	assert_string_equal(s.value.u.s.ptr, "123");
	resil_mock_spec_free(&s);
	assert_int_equal(resil_mock_parse(&s, "return hello world ",
	                     RESIL_TYPE_STRING, NULL, NULL),
	    RESIL_OK);
	assert_string_equal(s.value.u.s.ptr, "hello world");
	resil_mock_spec_free(&s);
	/* A quoted number for an int method is converted. */
	assert_int_equal(
	    resil_mock_parse(&s, "return '12'", RESIL_TYPE_INT, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_INT);
	assert_int_equal(s.value.u.i, 12);
	resil_mock_spec_free(&s);
	/* An unquoted word on an untyped method is the string itself, as
	 * in Dubbo (issue 23); quoted, it is text too. */
	assert_int_equal(
	    resil_mock_parse(&s, "return abc", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_STRING);
	assert_string_equal(s.value.u.s.ptr, "abc");
	resil_mock_spec_free(&s);
	assert_int_equal(
	    resil_mock_parse(&s, "return 'abc'", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_STRING);
	resil_mock_spec_free(&s);
	/* Too big for int64: a double. */
	assert_int_equal(resil_mock_parse(&s, "return 99999999999999999999",
	                     RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_DOUBLE);
	resil_mock_spec_free(&s);
	assert_int_equal(resil_mock_parse(&s, "return [1,\"a\"]",
	                     RESIL_TYPE_JSON, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_JSON);
	assert_string_equal(s.value.u.s.ptr, "[1,\"a\"]");
	resil_mock_spec_free(&s);
	assert_int_equal(resil_mock_parse(&s, "return \"hi\"",
	                     RESIL_TYPE_BYTES, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(s.value.type, RESIL_VALUE_BYTES);
	resil_mock_spec_free(&s);
}

/* Issue 23: an unquoted body on an untyped method is the string itself,
 * as in Dubbo (`return aa` gives "aa"), and the parser's note says how it
 * read it, so a typo such as `ture` is visible without a refusal. A spec
 * without such text leaves the note empty. */
static void
test_mock_unquoted_text_is_the_string_with_a_note(void **state)
{
	static const struct {
		const char *spec;
		const char *value;
		const char *note;
	} cases[] = {
		{ "return aa", "aa",
		    "mock: \"return aa\" at column 8: unquoted text read as "
		    "the "
		    "string \"aa\"" },
		{ "return ture", "ture",
		    "mock: \"return ture\" at column 8: unquoted text read as "
		    "the string \"ture\" (did you mean true?)" },
		{ "fail:return flase", "flase",
		    "mock: \"fail:return flase\" at column 13: unquoted text "
		    "read as the string \"flase\" (did you mean false?)" },
		{ "force: return hello world ", "hello world",
		    "mock: \"force: return hello world \" at column 15: "
		    "unquoted "
		    "text read as the string \"hello world\"" },
	};
	resil_mock_spec s;
	resil_diag d;
	size_t i;
	char buf[64];

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		strcpy(d.msg, "stale");
		assert_int_equal(resil_mock_parse(&s, cases[i].spec,
		                     RESIL_TYPE_ANY, NULL, &d),
		    RESIL_OK);
		assert_int_equal(s.action, RESIL_MOCK_RETURN);
		assert_int_equal(s.value.type, RESIL_VALUE_STRING);
		assert_string_equal(s.value.u.s.ptr, cases[i].value);
		assert_string_equal(d.msg, cases[i].note);
		resil_mock_spec_free(&s);
	}
	/* Its canonical text quotes it. */
	assert_int_equal(
	    resil_mock_parse(&s, "return aa", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	resil_mock_spec_format(&s, buf, sizeof(buf));
	assert_string_equal(buf, "fail:return \"aa\"");
	resil_mock_spec_free(&s);
	/* Nothing unquoted: no note. */
	strcpy(d.msg, "stale");
	assert_int_equal(
	    resil_mock_parse(&s, "return 'aa'", RESIL_TYPE_ANY, NULL, &d),
	    RESIL_OK);
	assert_string_equal(d.msg, "");
	resil_mock_spec_free(&s);
	/* A typed method still cannot take such text. */
	refused("return aa", RESIL_TYPE_BOOL,
	    "mock: \"return aa\" at column 8: cannot read an unquoted value "
	    "as bool");
	refused("return ture", RESIL_TYPE_BOOL,
	    "mock: \"return ture\" at column 8: cannot read an unquoted value "
	    "as bool (did you mean true?)");
}

/* The same reading for a mock a pipeline builds from a spec (a
 * consumer's, or a mock endpoint's, which lib/pipeline_mock.c turns into
 * "force:<body>" for resil_mock_new): `return aa` answers "aa". */
static void
test_mock_unquoted_text_answers_the_string(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:return aa");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_STRING);
	assert_string_equal(r.value.u.s.ptr, "aa");
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(l.calls, 0);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_invalid_specs_quote_and_point(void **state)
{
	(void)state;
	refused("fail:", RESIL_TYPE_ANY,
	    "mock: \"fail:\" at column 6: empty body after 'fail:'");
	refused("force:   ", RESIL_TYPE_ANY,
	    "mock: \"force:   \" at column 7: empty body after 'force:'");
	refused("  FAIL :", RESIL_TYPE_ANY,
	    "mock: \"  FAIL :\" at column 9: empty body after 'fail:'");
	refused("fail:force:return null", RESIL_TYPE_ANY,
	    "mock: \"fail:force:return null\" at column 6: a second prefix "
	    "after 'fail:'");
	refused("force:false", RESIL_TYPE_ANY,
	    "mock: \"force:false\" at column 7: 'false' means no mock and "
	    "cannot follow 'force:'");
	refused("return 'abc", RESIL_TYPE_ANY,
	    "mock: \"return 'abc\" at column 12: unterminated string: no "
	    "closing '");
	refused("return {\"a\":}", RESIL_TYPE_ANY,
	    "mock: \"return {\"a\":}\" at column 13: invalid JSON");
	refused("return [1] 2", RESIL_TYPE_ANY,
	    "mock: \"return [1] 2\" at column 11: unexpected text after the "
	    "JSON value");
	refused("throw 1abc", RESIL_TYPE_ANY,
	    "mock: \"throw 1abc\" at column 7: an error name must start with "
	    "a letter, '_' or '$'");
	refused("throw Out Of", RESIL_TYPE_ANY,
	    "mock: \"throw Out Of\" at column 10: invalid character in error "
	    "name");
	refused("my mock", RESIL_TYPE_ANY,
	    "mock: \"my mock\" at column 3: invalid character in mock "
	    "implementation name");
	refused("=x", RESIL_TYPE_ANY,
	    "mock: \"=x\" at column 1: expected return, throw or a mock "
	    "implementation name");
	refused("return abc", RESIL_TYPE_INT,
	    "mock: \"return abc\" at column 8: cannot read an unquoted value "
	    "as int");
	refused("return nul", RESIL_TYPE_INT,
	    "mock: \"return nul\" at column 8: cannot read an unquoted value "
	    "as int (did you mean null?)");
	refused("return emtpy", RESIL_TYPE_JSON,
	    "mock: \"return emtpy\" at column 8: cannot read an unquoted "
	    "value "
	    "as json (did you mean empty?)");
	refused("return {\"a\":\"\\u0000\"}", RESIL_TYPE_ANY,
	    "mock: \"return {\"a\":\"\\u0000\"}\" at column 8: invalid JSON: "
	    "not UTF-8, or a string holds \\u0000");
	refused("return 2.5", RESIL_TYPE_INT,
	    "mock: \"return 2.5\" at column 8: cannot convert double 2.5 to "
	    "int");
	refused("return 1", RESIL_TYPE_BOOL,
	    "mock: \"return 1\" at column 8: cannot convert int 1 to bool");
	refused("return {}", RESIL_TYPE_ARRAY,
	    "mock: \"return {}\" at column 8: cannot convert json {} to "
	    "array");
	refused("return 1", RESIL_TYPE_VOID,
	    "mock: \"return 1\" at column 8: cannot convert int 1 to void");
	refused("return 1e999", RESIL_TYPE_ANY,
	    "mock: \"return 1e999\" at column 8: number out of range");
}

/* ---- registries, resolved at configuration time ---- */

static void
test_mock_throw_name_is_a_business_error(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:throw OutOfStock");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;

	assert_int_equal(resil_mock_call(m, &args, live_fn, &l, NULL, &r),
	    RESIL_E_BUSINESS);
	assert_int_equal(l.calls, 0);
	assert_int_equal(r.rc, 409);
	assert_string_equal(r.error_name, "OutOfStock");
	assert_string_equal(r.message, RESIL_MOCK_MESSAGE);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_unknown_names_are_refused_at_configuration(void **state)
{
	fixture *f = *state;
	resil_mock_config cfg = resil_mock_config_default();
	resil_mock *m = (resil_mock *)&cfg; /* must stay untouched */
	resil_mock *ok;
	resil_diag d;

	cfg.service = SERVICE;
	cfg.registry = f->reg;
	cfg.spec = "fail:throw NoSuchError";
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_ptr_equal(m, (resil_mock *)&cfg);
	assert_string_equal(d.msg,
	    "mock: \"fail:throw NoSuchError\": unknown error \"NoSuchError\"");
	cfg.spec = "force:NoSuchMock";
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "mock: \"force:NoSuchMock\": no mock implementation "
	    "\"NoSuchMock\" is registered");
	/* An implementation of another service. */
	cfg.spec = "OtherMock";
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "mock: \"OtherMock\": \"OtherMock\" implements "
	    "\"com.foo.OtherService\", not \"com.foo.DemoService\"");
	/* default where no <service>Mock is registered */
	cfg.service = "com.foo.Lonely";
	cfg.spec = "default";
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "mock: \"default\": no mock implementation "
	    "\"com.foo.LonelyMock\" is registered");
	/* No registry at all. */
	cfg.service = SERVICE;
	cfg.registry = NULL;
	cfg.spec = "true";
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	/* Method-level specs are checked the same way. */
	cfg.registry = f->reg;
	cfg.spec = "return 1";
	assert_int_equal(resil_mock_new(&ok, &cfg, &d), RESIL_OK);
	assert_int_equal(resil_mock_set_method(
	                     ok, "getStock", RESIL_TYPE_INT, "OtherMock", &d),
	    RESIL_E_INVAL);
	/* The service-level spec is converted to each method's type. */
	assert_int_equal(
	    resil_mock_set_method(ok, "isOpen", RESIL_TYPE_BOOL, NULL, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "mock: \"return 1\" at column 8: cannot convert int 1 to bool");
	resil_mock_free(ok);
}

static void
test_mock_registry_refuses_bad_entries(void **state)
{
	fixture *f = *state;
	resil_diag d;

	assert_int_equal(
	    resil_mock_registry_add_error(f->reg, "OutOfStock", 1, &d),
	    RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "mock.registry: error \"OutOfStock\" is already registered");
	assert_int_equal(
	    resil_mock_registry_add_error(f->reg, "bad name", 1, &d),
	    RESIL_E_INVAL);
	assert_string_equal(
	    d.msg, "mock.registry: \"bad name\" is not a valid error name");
	assert_int_equal(
	    resil_mock_registry_add_impl(f->reg, "X", "", impl_fn, NULL, &d),
	    RESIL_E_INVAL);
	assert_int_equal(resil_mock_registry_add_impl(
	                     f->reg, "BackupMock", SERVICE, impl_fn, NULL, &d),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_mock_registry_add_impl(f->reg, "Y", SERVICE, NULL, NULL, &d),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_mock_registry_add_error(NULL, "Z", 1, &d), RESIL_E_INVAL);
	assert_int_equal(resil_mock_registry_new(NULL, NULL), RESIL_E_INVAL);
	resil_mock_registry_free(NULL);
}

/* ---- method level over service level ---- */

static void
test_mock_method_level_overrides_service_level(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "force:return 1");
	resil_args stock = { "getStock", NULL, 0 };
	resil_args price = { "getPrice", NULL, 0 };
	resil_args name = { "getName", NULL, 0 };
	resil_args other = { "getOther", NULL, 0 };
	live l = { 0, 0 };
	resil_result r;
	resil_diag d;

	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "fail:return 2", &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_mock_set_method(m, "getPrice", RESIL_TYPE_DOUBLE, NULL, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_mock_set_method(m, "getName", RESIL_TYPE_INT, "false", &d),
	    RESIL_OK);
	/* getStock: its own fail mock, so the live call answers. */
	assert_int_equal(
	    resil_mock_call(m, &stock, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(l.calls, 1);
	resil_result_free(&r);
	l.rc = 5;
	assert_int_equal(
	    resil_mock_call(m, &stock, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 2);
	assert_int_equal(l.calls, 2);
	resil_result_free(&r);
	/* getPrice: the service-level force mock, as a double. */
	assert_int_equal(
	    resil_mock_call(m, &price, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(l.calls, 2);
	assert_int_equal(r.value.type, RESIL_VALUE_DOUBLE);
	assert_true(r.value.u.d == 1.0);
	resil_result_free(&r);
	/* getName: mock switched off for this method alone. */
	assert_int_equal(
	    resil_mock_call(m, &name, live_fn, &l, NULL, &r), RESIL_E_CALL);
	assert_int_equal(l.calls, 3);
	resil_result_free(&r);
	/* An undeclared method: the service-level spec as parsed. */
	assert_int_equal(
	    resil_mock_call(m, &other, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_INT);
	assert_int_equal(l.calls, 3);
	resil_result_free(&r);
	/* Setting a method again replaces it; a refusal keeps the old one. */
	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "fail:return oops", &d),
	    RESIL_E_INVAL);
	assert_int_equal(resil_mock_set_method(m, "getStock", RESIL_TYPE_INT,
	                     "force:return 3", &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_mock_call(m, &stock, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 3);
	assert_int_equal(l.calls, 3);
	resil_result_free(&r);
	resil_mock_free(m);
}

/* ---- business errors, failing mocks ---- */

static void
test_mock_business_errors_pass_untouched(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:return 0");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 400 };
	resil_classifier cls = { classify_400, NULL };
	resil_result r;

	assert_int_equal(resil_mock_call(m, &args, live_fn, &l, &cls, &r),
	    RESIL_E_BUSINESS);
	assert_int_equal(r.rc, 400);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r);
	l.rc = 500;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, &cls, &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.value.u.i, 0);
	resil_result_free(&r);
	resil_mock_free(m);
}

static void
test_mock_failing_impl_names_both_failures(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:BackupMock");
	resil_args args = { "getStock", NULL, 0 };
	live l = { 0, 503 };
	resil_result r;
	resil_diag d;

	f->named.rc = 77;
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_E_CALL);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	assert_int_equal(r.rc, 77);
	assert_int_equal(r.cause, RESIL_E_CALL);
	assert_int_equal(r.cause_rc, 503);
	assert_string_equal(r.message,
	    "mock BackupMock failed (rc 77); original failure: the call "
	    "failed (rc 503)");
	resil_result_free(&r);
	f->named.rc = 0;
	/* The implementation's value is converted to the method's type. */
	f->named.answer_int = 1;
	assert_int_equal(
	    resil_mock_set_method(m, "getPrice", RESIL_TYPE_DOUBLE, NULL, &d),
	    RESIL_OK);
	args.method = "getPrice";
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_OK);
	assert_int_equal(r.value.type, RESIL_VALUE_DOUBLE);
	assert_true(r.value.u.d == 41.0);
	resil_result_free(&r);
	assert_int_equal(
	    resil_mock_set_method(m, "isUp", RESIL_TYPE_BOOL, NULL, &d),
	    RESIL_OK);
	args.method = "isUp";
	assert_int_equal(
	    resil_mock_call(m, &args, live_fn, &l, NULL, &r), RESIL_E_CALL);
	assert_string_equal(r.message,
	    "mock BackupMock failed: cannot convert int 41 to bool; original "
	    "failure: the call failed (rc 503)");
	resil_result_free(&r);
	f->named.answer_int = 0;
	resil_mock_free(m);
}

static void
test_mock_config_errors_name_the_field(void **state)
{
	resil_mock_config cfg = resil_mock_config_default();
	resil_mock *m;
	resil_diag d;
	resil_args args = { "x", NULL, 0 };
	resil_result r;
	const resil_mock_spec *s;

	(void)state;
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, "mock.service: a service name is required");
	cfg.service = SERVICE;
	cfg.size = 3;
	assert_int_equal(resil_mock_new(&m, &cfg, &d), RESIL_E_INVAL);
	assert_true(strncmp(d.msg,
	                "mock.size: 3 is not a known resil_mock_config size",
	                50) == 0);
	assert_int_equal(resil_mock_new(NULL, &cfg, NULL), RESIL_E_INVAL);
	assert_int_equal(resil_mock_new(&m, NULL, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_mock_set_method(NULL, "x", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_E_INVAL);
	assert_int_equal(resil_mock_lookup(NULL, "x", &s), RESIL_E_INVAL);
	assert_int_equal(
	    resil_mock_invoke(NULL, &args, NULL, &r), RESIL_E_INVAL);
	assert_int_equal(resil_mock_call(NULL, &args, live_fn, NULL, NULL, &r),
	    RESIL_E_INVAL);
	assert_int_equal(
	    resil_mock_parse(NULL, "x", RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_E_INVAL);
	resil_mock_free(NULL);
	resil_mock_spec_free(NULL);
}

static void
test_mock_nomem_at_every_allocation(void **state)
{
	fixture *f = *state;
	uint64_t n;
	int done = 0;

	for (n = 1; !done && n < 200; n++) {
		fail_alloc fa;
		resil_mock_config cfg = resil_mock_config_default();
		resil_mock *m = NULL;
		resil_err err;

		cfg.service = SERVICE;
		cfg.spec = "force:return {\"a\":1}";
		cfg.registry = f->reg;
		cfg.alloc = fail_alloc_init(&fa, n);
		err = resil_mock_new(&m, &cfg, NULL);
		if (err == RESIL_OK) {
			err = resil_mock_set_method(m, "getStock",
			    RESIL_TYPE_INT, "fail:throw OutOfStock", NULL);
			if (err == RESIL_OK)
				err = resil_mock_set_method(m, "getName",
				    RESIL_TYPE_STRING, "BackupMock", NULL);
			if (err == RESIL_OK) {
				resil_args args = { "getOther", NULL, 0 };
				resil_result r;

				err = resil_mock_invoke(m, &args, NULL, &r);
				if (err == RESIL_OK) {
					assert_int_equal(
					    r.value.type, RESIL_VALUE_JSON);
					resil_result_free(&r);
					done = fa.failures == 0;
				}
			}
			resil_mock_free(m);
		}
		if (err != RESIL_OK)
			assert_int_equal(err, RESIL_E_NOMEM);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
	assert_true(done);
}

static void
test_mock_registry_nomem_at_every_allocation(void **state)
{
	uint64_t n;
	int done = 0;

	(void)state;
	for (n = 1; !done && n < 100; n++) {
		fail_alloc fa;
		const resil_allocator *a = fail_alloc_init(&fa, n);
		resil_mock_registry *reg = NULL;
		resil_err err;

		err = resil_mock_registry_new(&reg, a);
		if (err == RESIL_OK) {
			err = resil_mock_registry_add_error(
			    reg, "OutOfStock", 409, NULL);
			if (err == RESIL_OK)
				err = resil_mock_registry_add_impl(reg,
				    SERVICE "Mock", SERVICE, impl_fn, NULL,
				    NULL);
			if (err == RESIL_OK)
				err = resil_mock_registry_add_error(
				    reg, "Gone", 410, NULL);
			if (err == RESIL_OK)
				done = fa.failures == 0;
			resil_mock_registry_free(reg);
		}
		if (err != RESIL_OK)
			assert_int_equal(err, RESIL_E_NOMEM);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
	assert_true(done);
}

static void
test_mock_invoke_carries_the_failure(void **state)
{
	fixture *f = *state;
	resil_mock *m = make(f, "fail:return 'degraded'");
	resil_args args = { "getStock", NULL, 0 };
	resil_failure open = { RESIL_E_OPEN, 0, 0 };
	resil_failure exhausted = { RESIL_E_RETRIES_EXHAUSTED, 503, 3 };
	const resil_mock_spec *s;
	resil_mock_spec other;
	resil_result r;

	assert_int_equal(resil_mock_invoke(m, &args, &open, &r), RESIL_OK);
	assert_int_equal(r.cause, RESIL_E_OPEN);
	assert_int_equal(r.attempts, 0);
	assert_string_equal(r.value.u.s.ptr, "degraded");
	resil_result_free(&r);
	assert_int_equal(
	    resil_mock_invoke(m, &args, &exhausted, &r), RESIL_OK);
	assert_int_equal(r.cause, RESIL_E_RETRIES_EXHAUSTED);
	assert_int_equal(r.cause_rc, 503);
	assert_int_equal(r.attempts, 3);
	resil_result_free(&r);
	/* lookup gives the normal form; equality tells forms apart */
	assert_int_equal(resil_mock_lookup(m, "getStock", &s), RESIL_OK);
	assert_int_equal(s->action, RESIL_MOCK_RETURN);
	assert_int_equal(s->mode, RESIL_MOCK_FAIL);
	assert_int_equal(resil_mock_parse(&other, "force:return 'degraded'",
	                     RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	assert_false(resil_mock_spec_equal(s, &other));
	resil_mock_spec_free(&other);
	assert_int_equal(resil_mock_parse(&other, "return \"degraded\"",
	                     RESIL_TYPE_ANY, NULL, NULL),
	    RESIL_OK);
	assert_true(resil_mock_spec_equal(s, &other));
	resil_mock_spec_free(&other);
	assert_string_equal(resil_mock_action_name(RESIL_MOCK_IMPL), "impl");
	assert_string_equal(resil_mock_mode_name(RESIL_MOCK_FORCE), "force");
	resil_mock_free(m);
}

/* parse -> format -> parse gives an equal spec, and formatting the second
 * gives the same text again, for every spec the parser accepts. */
static int
round_trips(const char *spec, resil_type t)
{
	resil_mock_spec s, again;
	resil_diag d;
	char one[512], two[512];

	d.msg[0] = '\0';
	if (resil_mock_parse(&s, spec, t, NULL, &d) != RESIL_OK)
		return 0; /* refused: nothing to hold */
	resil_mock_spec_format(&s, one, sizeof(one));
	if (resil_mock_parse(&again, one, t, NULL, &d) != RESIL_OK)
		fail_msg("\"%s\" as %s -> \"%s\" refused: %s", spec,
		    resil_type_name(t), one, d.msg);
	if (!resil_mock_spec_equal(&s, &again))
		fail_msg("\"%s\" as %s -> \"%s\" changed meaning", spec,
		    resil_type_name(t), one);
	resil_mock_spec_format(&again, two, sizeof(two));
	if (strcmp(one, two) != 0)
		fail_msg("\"%s\" as %s: \"%s\" then \"%s\"", spec,
		    resil_type_name(t), one, two);
	resil_mock_spec_free(&again);
	resil_mock_spec_free(&s);
	return 1;
}

/* issue 10 #5: a JSON-typed string with a backslash formatted as
 * `fail:return "a\\b"`, which parsed back as "a\\\\b": backslashes doubled
 * on every cycle. */
static void
test_mock_json_string_survives_its_canonical_text(void **state)
{
	(void)state;
	canon("return 'a\\b'", RESIL_TYPE_JSON, "fail:return \"a\\b\"");
	canon("return 'a\"b'", RESIL_TYPE_JSON, "fail:return \"a\"b\"");
	canon("force:return `tab\there`", RESIL_TYPE_JSON,
	    "force:return \"tab\there\"");
	canon("return '\\\\u0041'", RESIL_TYPE_JSON,
	    "fail:return \"\\\\u0041\"");
	canon("return \"\xff\"", RESIL_TYPE_JSON,
	    "fail:return \"\xef\xbf\xbd\"");
}

/* issue 14: a 10 KB spec is elided in the middle of the message, so the
 * column and the reason stay. */
static void
test_mock_long_spec_keeps_the_reason(void **state)
{
	static char spec[10240];
	resil_mock_spec s;
	resil_diag d;

	(void)state;
	memcpy(spec, "return 'x", 9);
	memset(spec + 9, 'y', sizeof(spec) - 10);
	spec[sizeof(spec) - 1] = '\0';
	assert_int_equal(resil_mock_parse(&s, spec, RESIL_TYPE_ANY, NULL, &d),
	    RESIL_E_INVAL);
	assert_true(strlen(d.msg) < RESIL_DIAG_MAX);
	assert_true(strncmp(d.msg, "mock: \"return 'xyyy", 19) == 0);
	assert_non_null(strstr(d.msg, "y...y"));
	assert_non_null(strstr(d.msg,
	    "yyy\" at column 10240: unterminated string: no closing '"));
}

static void
test_mock_round_trip_property(void **state)
{
	static const char *const specs[] = { "", "false", "0", "null", "N/A",
		"true", "default", "fail", "force", "return", "fail:return",
		"force:return null", "return empty", "return EMPTY",
		"return true", "return False", "return 1", "return -0",
		"return -0.0", "return 2.5", "return 1e5", "return -1E-3",
		"return 99999999999999999999", "return 9223372036854775807",
		"return -9223372036854775808", "return 0.1", "return 1.0",
		"return 5e-324", "return 1.7976931348623157e308", "return 'x'",
		"return \"x\"", "return `x`", "return ''", "return \"\"",
		"return ' x '", "return 'a\\b'", "return 'a\\\\b'",
		"return 'a\"b'", "return \"a'b\"", "return 'a`b'",
		"return '\"'", "return \"'\"", "return '\\n'",
		"return 'tab\tin'", "return 'line\nbreak'", "return '\\u0000'",
		"return '\xc3\xa9'", "return '\xff\xfe'", "return '{\"a\":1}'",
		"return '[1]'", "return '1'", "return '2.5'", "return 'true'",
		"return 'null'", "return {\"a\":1}",
		"return { \"a\" : [ 1 , 2 ] }", "return [1,\"a\",null,true]",
		"return []", "return {}", "return {\"k\":\"a\\\\b\\\"c\\n\"}",
		"return {\"e\":\"\\u00e9\"}", "return [\"\\ud83d\\ude00\"]",
		"return [1e400]", "return {\"a\":1}x", "return abc",
		"return hello world", "return ture", "fail:throw",
		"force:throw", "throw Exc", "fail:throw com.foo.NoStock",
		"throw $x-1.y", "fail:default", "force:default", "fail:true",
		"force:fail", "fail:force", "myMock", "force:myMock",
		"fail:com.foo.StockMock", "FORCE : RETURN 1",
		"  fail :  return  'x'  ", "return\t1", "returnx",
		"force:returnx", "throwit", "fail:throwit" };
	resil_type t;
	size_t i;
	unsigned accepted = 0;

	(void)state;
	for (t = RESIL_TYPE_ANY; t <= RESIL_TYPE_JSON; t++)
		for (i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
			accepted += (unsigned)round_trips(specs[i], t);
	/* The set reaches every declared type's accepting side. */
	assert_true(accepted > 400);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_mock_json_string_survives_its_canonical_text),
		cmocka_unit_test(test_mock_round_trip_property),
		cmocka_unit_test(test_mock_long_spec_keeps_the_reason),
		cmocka_unit_test(test_mock_force_return_null_never_calls),
		cmocka_unit_test(test_mock_force_return_value_never_calls),
		cmocka_unit_test(test_mock_force_throw_gives_mock_error),
		cmocka_unit_test(test_mock_force_impl_runs_the_implementation),
		cmocka_unit_test(test_mock_fail_return_null_calls_first),
		cmocka_unit_test(test_mock_fail_return_value_after_failure),
		cmocka_unit_test(test_mock_fail_throw_after_failure),
		cmocka_unit_test(test_mock_fail_impl_after_failure),
		cmocka_unit_test(test_mock_default_words_are_the_service_mock),
		cmocka_unit_test(test_mock_bare_return_is_return_null),
		cmocka_unit_test(test_mock_every_spelling_has_one_normal_form),
		cmocka_unit_test(test_mock_no_mock_values),
		cmocka_unit_test(
		    test_mock_return_values_take_the_declared_type),
		cmocka_unit_test(test_mock_invalid_specs_quote_and_point),
		cmocka_unit_test(
		    test_mock_unquoted_text_is_the_string_with_a_note),
		cmocka_unit_test(test_mock_unquoted_text_answers_the_string),
		cmocka_unit_test(test_mock_throw_name_is_a_business_error),
		cmocka_unit_test(
		    test_mock_unknown_names_are_refused_at_configuration),
		cmocka_unit_test(test_mock_registry_refuses_bad_entries),
		cmocka_unit_test(
		    test_mock_method_level_overrides_service_level),
		cmocka_unit_test(test_mock_business_errors_pass_untouched),
		cmocka_unit_test(test_mock_failing_impl_names_both_failures),
		cmocka_unit_test(test_mock_config_errors_name_the_field),
		cmocka_unit_test(test_mock_nomem_at_every_allocation),
		cmocka_unit_test(test_mock_registry_nomem_at_every_allocation),
		cmocka_unit_test(test_mock_invoke_carries_the_failure),
	};

	return cmocka_run_group_tests_name("mock", tests, setup, teardown);
}

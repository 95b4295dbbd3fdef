#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/fallback.h>
#include <resil/pipeline.h>
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

/* Issue 29: resil_result_free() releases what the value owns and leaves
 * the result empty (never reads as an answer); the scalar constructors
 * are macros in C that give what the functions give. */
static void
test_value_result_free_leaves_unavailable(void **state)
{
	resil_result r;
	resil_value f, m;

	(void)state;
	resil_result_init(&r);
	r.err = RESIL_OK;
	r.source = RESIL_SOURCE_LIVE;
	r.value = resil_value_int(8);
	resil_result_free(&r);
	assert_int_equal(r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	r.err = RESIL_OK;
	r.source = RESIL_SOURCE_CACHE;
	assert_int_equal(resil_value_json(&r.value, "[1]", 3, NULL), RESIL_OK);
	resil_result_free(&r); /* asan: the text is released */
	assert_int_equal(r.err, RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);
	resil_result_free(&r); /* twice: harmless */
	assert_int_equal(r.value.type, RESIL_VALUE_NULL);

	f = (resil_value_int)(-3);
	m = resil_value_int(-3);
	assert_true(resil_value_equal(&f, &m));
	assert_int_equal(m.u.i, -3);
	assert_null(m.alloc_.alloc);
	f = (resil_value_bool)(7);
	m = resil_value_bool(7);
	assert_true(resil_value_equal(&f, &m));
	assert_int_equal(m.u.b, 1);
	f = (resil_value_double)(2.5);
	m = resil_value_double(2.5);
	assert_true(resil_value_equal(&f, &m));
	f = (resil_value_null)();
	m = resil_value_null();
	assert_true(resil_value_equal(&f, &m));
	assert_int_equal(m.type, RESIL_VALUE_NULL);
}

/* ---- opaque values: a user struct cached and returned as it is ---- */

typedef struct stock {
	char sku[16];
	int qty;
	double price;
} stock;

static int stock_live; /* objects made and not yet freed */

static int
stock_copy(void **dst, const void *src, void *ctx)
{
	stock *s = malloc(sizeof(*s));

	(void)ctx;
	if (s == NULL)
		return -1;
	*s = *(const stock *)src;
	stock_live++;
	*dst = s;
	return 0;
}

static void
stock_free(void *obj, void *ctx)
{
	(void)ctx;
	stock_live--;
	free(obj);
}

static int
stock_equal(const void *a, const void *b, void *ctx)
{
	const stock *x = a, *y = b;

	(void)ctx;
	return strcmp(x->sku, y->sku) == 0 && x->qty == y->qty &&
	    x->price == y->price;
}

static size_t
stock_size(const void *obj, void *ctx)
{
	(void)obj;
	(void)ctx;
	return sizeof(stock);
}

static size_t
stock_format(const void *obj, char *buf, size_t size, void *ctx)
{
	const stock *s = obj;
	int n;

	(void)ctx;
	n = snprintf(buf, size, "{\"sku\":\"%s\",\"qty\":%d}", s->sku, s->qty);
	return n < 0 ? 0 : (size_t)n;
}

static const resil_value_ops stock_ops = { stock_copy, stock_free, stock_equal,
	stock_size, stock_format, "Stock", NULL };
static const resil_value_ops bare_ops = { stock_copy, stock_free, NULL, NULL,
	NULL, NULL, NULL };

static stock *
stock_new(const char *sku, int qty)
{
	stock *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	snprintf(s->sku, sizeof(s->sku), "%s", sku);
	s->qty = qty;
	s->price = 2.5;
	stock_live++;
	return s;
}

static void
test_value_opaque_copy_free_equal_format(void **state)
{
	resil_value v, c, d;
	stock *s = stock_new("A-1", 8);
	char buf[64];

	(void)state;
	stock_live = 1;
	/* Refusals keep the object the caller's. */
	assert_int_equal(resil_value_opaque(&v, s, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_value_opaque(&v, NULL, &stock_ops), RESIL_E_INVAL);
	{
		resil_value_ops no_free = stock_ops;

		no_free.free = NULL;
		assert_int_equal(
		    resil_value_opaque(&v, s, &no_free), RESIL_E_INVAL);
	}
	assert_int_equal(resil_value_opaque(&v, s, &stock_ops), RESIL_OK);
	assert_int_equal(v.type, RESIL_VALUE_OPAQUE);
	assert_string_equal(resil_vtype_name(v.type), "opaque");
	assert_ptr_equal(resil_value_opaque_get(&v, &stock_ops), s);
	assert_null(resil_value_opaque_get(&v, &bare_ops)); /* other kind */
	assert_int_equal(resil_value_heap_size(&v), sizeof(stock));

	assert_int_equal(resil_value_copy(&c, &v, NULL), RESIL_OK);
	assert_int_equal(stock_live, 2);
	assert_ptr_not_equal(resil_value_opaque_get(&c, &stock_ops), s);
	assert_true(resil_value_equal(&v, &c));
	((stock *)resil_value_opaque_get(&c, &stock_ops))->qty = 9;
	assert_false(resil_value_equal(&v, &c));
	assert_int_equal(s->qty, 8); /* a deep copy */

	assert_int_equal(resil_value_format(&c, buf, sizeof(buf)), 21);
	assert_string_equal(buf, "{\"sku\":\"A-1\",\"qty\":9}");
	assert_int_equal(resil_value_format(&c, NULL, 0), 21);

	/* A kind without equal compares by pointer; without format it
	 * prints its name as a JSON string. */
	assert_int_equal(
	    resil_value_opaque(&d, stock_new("B", 1), &bare_ops), RESIL_OK);
	resil_value_format(&d, buf, sizeof(buf));
	assert_string_equal(buf, "\"<opaque>\"");
	assert_false(resil_value_equal(&d, &v));
	assert_true(resil_value_equal(&d, &d));
	assert_int_equal(resil_value_heap_size(&d), 0);
	/* Only ANY keeps an opaque value: it converts to nothing else. */
	{
		resil_value o;
		resil_diag diag;

		assert_int_equal(
		    resil_value_coerce(&o, &v, RESIL_TYPE_INT, NULL, &diag),
		    RESIL_E_INVAL);
		assert_string_equal(diag.msg,
		    "cannot convert opaque {\"sku\":\"A-1\",\"qty\":8} to "
		    "int");
		assert_int_equal(
		    resil_value_coerce(&o, &v, RESIL_TYPE_ANY, NULL, &diag),
		    RESIL_OK);
		assert_true(resil_value_equal(&o, &v));
		resil_value_free(&o);
	}
	resil_value_free(&v);
	resil_value_free(&c);
	resil_value_free(&d);
	assert_int_equal(stock_live, 0);
	assert_int_equal(v.type, RESIL_VALUE_NULL);
}

static int
failing_copy(void **dst, const void *src, void *ctx)
{
	(void)dst;
	(void)src;
	(void)ctx;
	return -1;
}

static void
test_value_opaque_copy_failure_is_nomem(void **state)
{
	static const resil_value_ops ops = { failing_copy, stock_free, NULL,
		NULL, NULL, "Stock", NULL };
	resil_value v, c = resil_value_int(5);

	(void)state;
	stock_live = 0;
	assert_int_equal(
	    resil_value_opaque(&v, stock_new("A", 1), &ops), RESIL_OK);
	assert_int_equal(resil_value_copy(&c, &v, NULL), RESIL_E_NOMEM);
	assert_int_equal(c.type, RESIL_VALUE_INT); /* unchanged */
	resil_value_free(&v);
	assert_int_equal(stock_live, 0);
}

/* The cache keeps its own copy, charges the kind's size, and gives every
 * lookup a copy; nothing leaks. */
static void
test_value_opaque_in_the_cache(void **state)
{
	resil_cache_config cfg = resil_cache_config_default();
	resil_manual_clock mc;
	resil_cache *c;
	resil_value v, out;
	resil_cache_stats st;
	resil_args a = { "getStock", "k", 1 };
	uint64_t age = 0;

	(void)state;
	stock_live = 0;
	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	assert_int_equal(resil_cache_new(&c, &cfg, NULL), RESIL_OK);
	assert_int_equal(
	    resil_value_opaque(&v, stock_new("A-1", 8), &stock_ops), RESIL_OK);
	assert_int_equal(resil_cache_put(c, &a, &v), RESIL_OK);
	assert_int_equal(stock_live, 2);
	assert_int_equal(resil_cache_stats_get(c, &st), RESIL_OK);
	assert_int_equal(st.bytes, resil_cache_entry_charge(&a, &v));
	assert_true(st.bytes >= sizeof(stock));
	resil_value_free(&v);
	assert_int_equal(stock_live, 1);
	resil_manual_clock_advance(&mc, 3 * RESIL_NS_PER_SEC);
	assert_int_equal(resil_cache_get(c, &a, &out, &age), RESIL_OK);
	assert_int_equal(age, 3 * RESIL_NS_PER_SEC);
	assert_int_equal(stock_live, 2);
	assert_string_equal(
	    ((stock *)resil_value_opaque_get(&out, &stock_ops))->sku, "A-1");
	resil_value_free(&out);
	resil_cache_free(c);
	assert_int_equal(stock_live, 0);
}

typedef struct stock_dep {
	int up;
} stock_dep;

static int
get_stock_struct(void *ctx, const resil_args *args, resil_value *out)
{
	stock_dep *d = ctx;

	(void)args;
	if (!d->up)
		return -1;
	return resil_value_opaque(out, stock_new("A-1", 8), &stock_ops) ==
	        RESIL_OK
	    ? 0
	    : -1;
}

/* Through a whole pipeline: live, then (the service down) the cached
 * struct, without a byte of serialisation. */
static void
test_value_opaque_through_a_pipeline(void **state)
{
	resil_pipeline_config cfg;
	resil_manual_clock mc;
	resil_pipeline *p;
	resil_result r;
	stock_dep d = { 1 };
	resil_args a = { "getStock", "k", 1 };
	stock *s;

	(void)state;
	stock_live = 0;
	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.cache_enabled = 1;
	assert_int_equal(resil_pipeline_new(&p, &cfg, NULL), RESIL_OK);
	resil_pipeline_call(p, &a, get_stock_struct, &d, &r);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	s = resil_value_opaque_get(&r.value, &stock_ops);
	assert_non_null(s);
	assert_int_equal(s->qty, 8);
	resil_result_free(&r);
	d.up = 0;
	resil_manual_clock_advance(&mc, RESIL_NS_PER_SEC);
	resil_pipeline_call(p, &a, get_stock_struct, &d, &r);
	assert_int_equal(r.err, RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	assert_int_equal(r.age, RESIL_NS_PER_SEC);
	s = resil_value_opaque_get(&r.value, &stock_ops);
	assert_non_null(s);
	assert_string_equal(s->sku, "A-1");
	assert_true(s->price == 2.5);
	resil_result_free(&r);
	resil_pipeline_free(p);
	assert_int_equal(stock_live, 0);
}

/* ---- JSON and UTF-8 ---- */

static void
test_value_json_nul_escape_refused(void **state)
{
	resil_value v = resil_value_int(1);
	static const char *const bad[] = { "\"x\\u0000y\"",
		"{\"k\":\"a\\u0000\"}", "[\"\\u0000\"]" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
		    resil_value_json(&v, bad[i], strlen(bad[i]), NULL),
		    RESIL_E_INVAL);
		assert_int_equal(v.type, RESIL_VALUE_INT); /* unchanged */
	}
	/* An escaped backslash before u0000 is not the escape. */
	assert_int_equal(
	    resil_value_json(&v, "\"a\\\\u0000\"", 10, NULL), RESIL_OK);
	assert_string_equal(v.u.s.ptr, "\"a\\\\u0000\"");
	resil_value_free(&v);
	assert_int_equal(
	    resil_value_json(&v, "\"x\\u0001y\"", 10, NULL), RESIL_OK);
	resil_value_free(&v);
	/* JSON text must be UTF-8. */
	assert_int_equal(
	    resil_value_json(&v, "\"\xff\"", 3, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_value_json(&v, "\"\xc3\xa9\"", 4, NULL), RESIL_OK);
	resil_value_free(&v);
}

/* resil_value_format promises JSON: a string's invalid UTF-8 bytes are
 * replaced by U+FFFD (EF BF BD), well-formed UTF-8 is kept, NUL is
 * \u0000. */
#define RCH "\xef\xbf\xbd"
static void
test_value_format_escapes_invalid_utf8(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "caf\xc3\xa9", 5, "\"caf\xc3\xa9\"" },
		{ "a\xff"
		  "b",
		    3, "\"a" RCH "b\"" },
		{ "\xc3", 1, "\"" RCH "\"" },                 /* truncated */
		{ "\xc0\xaf", 2, "\"" RCH RCH "\"" },         /* overlong */
		{ "\xed\xa0\x80", 3, "\"" RCH RCH RCH "\"" }, /* surrogate */
		{ "\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"" },
		{ "\xf4\x90\x80\x80", 4,
		    "\"" RCH RCH RCH RCH "\"" }, /* > U+10FFFF */
		{ "x\0y", 3, "\"x\\u0000y\"" },
	};
	resil_value v;
	char buf[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(
		    resil_value_string(&v, cases[i].in, cases[i].len, NULL),
		    RESIL_OK);
		assert_int_equal(resil_value_format(&v, buf, sizeof(buf)),
		    strlen(cases[i].out));
		assert_string_equal(buf, cases[i].out);
		resil_value_free(&v);
	}
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
		cmocka_unit_test(test_value_opaque_copy_free_equal_format),
		cmocka_unit_test(test_value_opaque_copy_failure_is_nomem),
		cmocka_unit_test(test_value_opaque_in_the_cache),
		cmocka_unit_test(test_value_opaque_through_a_pipeline),
		cmocka_unit_test(test_value_json_nul_escape_refused),
		cmocka_unit_test(test_value_format_escapes_invalid_utf8),
		cmocka_unit_test(test_value_format_truncates_like_snprintf),
		cmocka_unit_test(
		    test_value_result_init_is_unavailable_not_zero),
		cmocka_unit_test(test_value_result_free_leaves_unavailable),
	};

	return cmocka_run_group_tests_name("value", tests, NULL, NULL);
}

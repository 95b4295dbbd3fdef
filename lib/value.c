/*
 * resil value: tagged values, coercion to a declared type, results.
 */
#include "internal.h"
#include "atomic.h"
#include "value_internal.h"

#include <resil/value.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

const char *
resil_vtype_name(resil_vtype t)
{
	switch (t) {
	case RESIL_VALUE_NULL:
		return "null";
	case RESIL_VALUE_BOOL:
		return "bool";
	case RESIL_VALUE_INT:
		return "int";
	case RESIL_VALUE_DOUBLE:
		return "double";
	case RESIL_VALUE_STRING:
		return "string";
	case RESIL_VALUE_BYTES:
		return "bytes";
	case RESIL_VALUE_JSON:
		return "json";
	case RESIL_VALUE_OPAQUE:
		return "opaque";
	}
	return "unknown";
}

const char *
resil_type_name(resil_type t)
{
	switch (t) {
	case RESIL_TYPE_ANY:
		return "any";
	case RESIL_TYPE_VOID:
		return "void";
	case RESIL_TYPE_BOOL:
		return "bool";
	case RESIL_TYPE_INT:
		return "int";
	case RESIL_TYPE_DOUBLE:
		return "double";
	case RESIL_TYPE_STRING:
		return "string";
	case RESIL_TYPE_BYTES:
		return "bytes";
	case RESIL_TYPE_ARRAY:
		return "array";
	case RESIL_TYPE_OBJECT:
		return "object";
	case RESIL_TYPE_JSON:
		return "json";
	}
	return "unknown";
}

const char *
resil_source_name(resil_source s)
{
	switch (s) {
	case RESIL_SOURCE_LIVE:
		return "live";
	case RESIL_SOURCE_CACHE:
		return "cache";
	case RESIL_SOURCE_MOCK:
		return "mock";
	case RESIL_SOURCE_UNAVAILABLE:
		return "unavailable";
	case RESIL_SOURCE_FALLBACK:
		return "fallback";
	}
	return "unknown";
}

/* resil_value_init without the NULL check, for this file's own calls: a
 * call to the exported function is not inlined in a shared library (it can
 * be interposed), and values are cleared on every call of the hot paths. */
static void
value_clear(resil_value *v)
{
	memset(v, 0, sizeof(*v));
	v->type = RESIL_VALUE_NULL;
}

void
(resil_value_init)(resil_value *v)
{
	if (v == NULL)
		return;
	value_clear(v);
}

resil_value
(resil_value_null)(void)
{
	resil_value v;

	value_clear(&v);
	return v;
}

resil_value
(resil_value_bool)(int b)
{
	resil_value v;

	value_clear(&v);
	v.type = RESIL_VALUE_BOOL;
	v.u.b = b != 0;
	return v;
}

resil_value
(resil_value_int)(int64_t i)
{
	resil_value v;

	value_clear(&v);
	v.type = RESIL_VALUE_INT;
	v.u.i = i;
	return v;
}

resil_value
(resil_value_double)(double d)
{
	resil_value v;

	value_clear(&v);
	v.type = RESIL_VALUE_DOUBLE;
	v.u.d = d;
	return v;
}

/* The common tail of string, bytes and JSON: one allocation of len + 1 so
 * the text is always NUL-terminated. */
static resil_err
set_heap(resil_value *out, resil_vtype t, const void *p, size_t len,
    const resil_allocator *a)
{
	const resil_allocator *al = resil__allocator(a);
	char *buf;

	if (len == SIZE_MAX)
		return RESIL_E_NOMEM;
	buf = resil__alloc(al, len + 1);
	if (buf == NULL)
		return RESIL_E_NOMEM;
	if (len > 0)
		memcpy(buf, p, len);
	buf[len] = '\0';
	value_clear(out);
	out->type = t;
	out->u.s.ptr = buf;
	out->u.s.len = len;
	out->alloc_ = *al;
	return RESIL_OK;
}

resil_err
resil_value_string(
    resil_value *out, const char *p, size_t len, const resil_allocator *a)
{
	if (out == NULL || (p == NULL && len > 0))
		return RESIL_E_INVAL;
	return set_heap(out, RESIL_VALUE_STRING, p, len, a);
}

resil_err
resil_value_bytes(
    resil_value *out, const void *p, size_t len, const resil_allocator *a)
{
	if (out == NULL || (p == NULL && len > 0))
		return RESIL_E_INVAL;
	return set_heap(out, RESIL_VALUE_BYTES, p, len, a);
}

/* The length of the well-formed UTF-8 sequence at s[0..n), or 0 when
 * s[0] does not start one (overlong forms, surrogates and code points
 * past U+10FFFF are not well-formed). */
static size_t
utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len, i;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3Fu);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
		return 0;
	return len;
}

static int
utf8_valid(const char *p, size_t n)
{
	const unsigned char *s = (const unsigned char *)p;
	size_t i = 0, k;

	while (i < n) {
		k = utf8_seq(s + i, n - i);
		if (k == 0)
			return 0;
		i += k;
	}
	return 1;
}

/* 1 if JSON text p holds the string escape \u0000 (a backslash appears
 * only inside strings of valid JSON, so no string tracking is needed). */
static int
json_has_nul_escape(const char *p, size_t len)
{
	size_t i;

	for (i = 0; i + 1 < len; i++) {
		if (p[i] != '\\')
			continue;
		if (p[i + 1] == 'u' && i + 6 <= len &&
		    memcmp(p + i + 2, "0000", 4) == 0)
			return 1;
		i++; /* skip the escaped character */
	}
	return 0;
}

resil_err
resil_value_json(
    resil_value *out, const char *p, size_t len, const resil_allocator *a)
{
	cJSON *doc;
	const char *end = NULL;
	size_t used;
	char *text;
	resil_err err;

	if (out == NULL || p == NULL)
		return RESIL_E_INVAL;
	if (!utf8_valid(p, len) || json_has_nul_escape(p, len) ||
	    memchr(p, '\0', len) != NULL)
		return RESIL_E_INVAL;
	doc = cJSON_ParseWithLengthOpts(p, len, &end, 0);
	if (doc == NULL)
		return RESIL_E_INVAL;
	/* The parser stops after one document; anything but blanks after it
	 * makes the text something other than one JSON document. */
	used = (size_t)(end - p);
	while (used < len &&
	    (p[used] == ' ' || p[used] == '\t' || p[used] == '\n' ||
	        p[used] == '\r'))
		used++;
	if (used < len) {
		cJSON_Delete(doc);
		return RESIL_E_INVAL;
	}
	text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	if (text == NULL)
		return RESIL_E_NOMEM;
	err = set_heap(out, RESIL_VALUE_JSON, text, strlen(text), a);
	cJSON_free(text);
	return err;
}

static int
is_heap(resil_vtype t)
{
	return t == RESIL_VALUE_STRING || t == RESIL_VALUE_BYTES ||
	    t == RESIL_VALUE_JSON;
}

resil_err
resil_value_opaque(resil_value *out, void *obj, const resil_value_ops *ops)
{
	if (out == NULL || obj == NULL || ops == NULL || ops->copy == NULL ||
	    ops->free == NULL)
		return RESIL_E_INVAL;
	value_clear(out);
	out->type = RESIL_VALUE_OPAQUE;
	out->u.o.ptr = obj;
	out->u.o.ops = ops;
	return RESIL_OK;
}

void *
resil_value_opaque_get(const resil_value *v, const resil_value_ops *ops)
{
	if (v == NULL || v->type != RESIL_VALUE_OPAQUE || ops == NULL ||
	    v->u.o.ops != ops)
		return NULL;
	return v->u.o.ptr;
}

resil_err
resil_value_copy(
    resil_value *dst, const resil_value *src, const resil_allocator *a)
{
	if (dst == NULL || src == NULL || dst == src)
		return RESIL_E_INVAL;
	if (is_heap(src->type))
		return set_heap(dst, src->type, src->u.s.ptr, src->u.s.len, a);
	if (src->type == RESIL_VALUE_OPAQUE) {
		const resil_value_ops *ops = src->u.o.ops;
		void *obj = NULL;

		if (ops == NULL || ops->copy == NULL)
			return RESIL_E_INVAL;
		if (ops->copy(&obj, src->u.o.ptr, ops->ctx) != 0 ||
		    obj == NULL)
			return RESIL_E_NOMEM;
		value_clear(dst);
		dst->type = RESIL_VALUE_OPAQUE;
		dst->u.o.ptr = obj;
		dst->u.o.ops = ops;
		return RESIL_OK;
	}
	*dst = *src;
	memset(&dst->alloc_, 0, sizeof(dst->alloc_));
	return RESIL_OK;
}

/* resil_value_free() of a non-NULL v, inline: an exported function is
 * not inlined into another in a shared library, and a result's value
 * (a cache's hit, shared with its entry) is freed on every call that
 * served one. The value's own allocator is called straight, without
 * resil__free()'s frame. */
static inline void
value_free(resil_value *v)
{
	if (is_heap(v->type) && v->u.s.ptr != NULL) {
		if (RESIL__LIKELY(v->alloc_.alloc != NULL &&
		        v->alloc_.free != NULL))
			v->alloc_.free(v->u.s.ptr, v->u.s.len + 1,
			    v->alloc_.ctx);
		else
			resil__free(&v->alloc_, v->u.s.ptr, v->u.s.len + 1);
	} else if (v->type == RESIL_VALUE_OPAQUE && v->u.o.ptr != NULL &&
	    v->u.o.ops != NULL)
		v->u.o.ops->free(v->u.o.ptr, v->u.o.ops->ctx);
	value_clear(v);
}

void
resil_value_free(resil_value *v)
{
	if (v == NULL)
		return;
	value_free(v);
}

int
resil_value_equal(const resil_value *a, const resil_value *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case RESIL_VALUE_NULL:
		return 1;
	case RESIL_VALUE_BOOL:
		return (a->u.b != 0) == (b->u.b != 0);
	case RESIL_VALUE_INT:
		return a->u.i == b->u.i;
	case RESIL_VALUE_DOUBLE:
		return a->u.d == b->u.d;
	case RESIL_VALUE_STRING:
	case RESIL_VALUE_BYTES:
	case RESIL_VALUE_JSON:
		return a->u.s.len == b->u.s.len &&
		    (a->u.s.len == 0 ||
		        memcmp(a->u.s.ptr, b->u.s.ptr, a->u.s.len) == 0);
	case RESIL_VALUE_OPAQUE:
		if (a->u.o.ops != b->u.o.ops)
			return 0;
		if (a->u.o.ptr == b->u.o.ptr)
			return 1;
		if (a->u.o.ops == NULL || a->u.o.ops->equal == NULL)
			return 0;
		return a->u.o.ops->equal(
		           a->u.o.ptr, b->u.o.ptr, a->u.o.ops->ctx) != 0;
	}
	return 0;
}

size_t
resil_value_heap_size(const resil_value *v)
{
	if (v != NULL && v->type == RESIL_VALUE_OPAQUE)
		return v->u.o.ops != NULL && v->u.o.ops->size != NULL
		    ? v->u.o.ops->size(v->u.o.ptr, v->u.o.ops->ctx)
		    : 0;
	if (v == NULL || !is_heap(v->type))
		return 0;
	return v->u.s.len + 1;
}

/* The shortest %.*g text that reads back to d, with ".0" added when it
 * would otherwise read as an integer. */
static void
format_double(double d, char *tmp, size_t size)
{
	int prec;

	if (isnan(d)) {
		snprintf(tmp, size, "nan");
		return;
	}
	if (isinf(d)) {
		snprintf(tmp, size, d < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(tmp, size, "%.*g", prec, d);
		if (strtod(tmp, NULL) == d)
			break;
	}
	if (strpbrk(tmp, ".eE") == NULL) {
		size_t n = strlen(tmp);

		if (n + 2 < size) {
			tmp[n] = '.';
			tmp[n + 1] = '0';
			tmp[n + 2] = '\0';
		}
	}
}

static void
put_json_string(resil__out *o, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	resil__out_c(o, '"');
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '"':
			resil__out_s(o, "\\\"", 2);
			break;
		case '\\':
			resil__out_s(o, "\\\\", 2);
			break;
		case '\n':
			resil__out_s(o, "\\n", 2);
			break;
		case '\r':
			resil__out_s(o, "\\r", 2);
			break;
		case '\t':
			resil__out_s(o, "\\t", 2);
			break;
		default:
			if (c < 0x20) {
				resil__out_s(o, "\\u00", 4);
				resil__out_c(o, hex[c >> 4]);
				resil__out_c(o, hex[c & 15]);
			} else if (c < 0x80) {
				resil__out_c(o, (char)c);
			} else {
				/* Well-formed UTF-8 as it is; any other byte
				 * as U+FFFD, the replacement character (its
				 * UTF-8 bytes, so that the text reads back to
				 * itself). */
				size_t k = utf8_seq(
				    (const unsigned char *)s + i, n - i);

				if (k == 0) {
					resil__out_s(o, "\xEF\xBF\xBD", 3);
				} else {
					resil__out_s(o, s + i, k);
					i += k - 1;
				}
			}
		}
	}
	resil__out_c(o, '"');
}

size_t
resil_value_format(const resil_value *v, char *buf, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	resil__out o;
	char tmp[40];
	size_t i;

	if (v != NULL && v->type == RESIL_VALUE_OPAQUE && v->u.o.ops != NULL &&
	    v->u.o.ops->format != NULL) {
		/* The kind prints itself, like snprintf. */
		if (buf == NULL)
			size = 0;
		return v->u.o.ops->format(
		    v->u.o.ptr, buf, size, v->u.o.ops->ctx);
	}
	resil__out_start(&o, buf, size);
	if (v == NULL) {
		resil__out_s(&o, "null", 4);
		return resil__out_finish(&o);
	}
	switch (v->type) {
	case RESIL_VALUE_NULL:
		resil__out_s(&o, "null", 4);
		break;
	case RESIL_VALUE_BOOL:
		if (v->u.b)
			resil__out_s(&o, "true", 4);
		else
			resil__out_s(&o, "false", 5);
		break;
	case RESIL_VALUE_INT:
		snprintf(tmp, sizeof(tmp), "%" PRId64, v->u.i);
		resil__out_s(&o, tmp, strlen(tmp));
		break;
	case RESIL_VALUE_DOUBLE:
		format_double(v->u.d, tmp, sizeof(tmp));
		resil__out_s(&o, tmp, strlen(tmp));
		break;
	case RESIL_VALUE_STRING:
		put_json_string(&o, v->u.s.ptr, v->u.s.len);
		break;
	case RESIL_VALUE_BYTES:
		resil__out_s(&o, "0x", 2);
		for (i = 0; i < v->u.s.len; i++) {
			unsigned char c = (unsigned char)v->u.s.ptr[i];

			resil__out_c(&o, hex[c >> 4]);
			resil__out_c(&o, hex[c & 15]);
		}
		break;
	case RESIL_VALUE_JSON:
		resil__out_s(&o, v->u.s.ptr, v->u.s.len);
		break;
	case RESIL_VALUE_OPAQUE: {
		const resil_value_ops *ops = v->u.o.ops;
		const char *name =
		    ops != NULL && ops->name != NULL ? ops->name : "opaque";

		resil__out_c(&o, '"');
		resil__out_c(&o, '<');
		resil__out_s(&o, name, strlen(name));
		resil__out_c(&o, '>');
		resil__out_c(&o, '"');
		break;
	}
	default:
		resil__out_s(&o, "?", 1);
	}
	return resil__out_finish(&o);
}

/* Parse all of s[0..len) as a decimal int64; 0 on success. */
static int
parse_i64(const char *s, size_t len, int64_t *out)
{
	char tmp[32];
	char *end;
	long long v;

	if (len == 0 || len >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	if (tmp[0] == ' ' || tmp[0] == '\t' || tmp[0] == '+')
		return -1;
	errno = 0;
	v = strtoll(tmp, &end, 10);
	if (errno != 0 || *end != '\0' || end == tmp)
		return -1;
	*out = (int64_t)v;
	return 0;
}

/* Parse all of s[0..len) as a finite double; 0 on success. */
static int
parse_f64(const char *s, size_t len, double *out)
{
	char tmp[64];
	char *end;
	double v;
	size_t i;

	if (len == 0 || len >= sizeof(tmp))
		return -1;
	for (i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' ||
		        c == 'E' || c == '-' || c == '+'))
			return -1; /* no hex, inf or nan */
	}
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	errno = 0;
	v = strtod(tmp, &end);
	if (errno != 0 || *end != '\0' || end == tmp || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

static resil_err
refuse(resil_diag *diag, const resil_value *in, resil_type t)
{
	char shown[48];
	size_t n = resil_value_format(in, shown, sizeof(shown));

	if (n >= sizeof(shown))
		memcpy(shown + sizeof(shown) - 4, "...", 4);
	return resil__diagf(diag, RESIL_E_INVAL, "cannot convert %s %s to %s",
	    resil_vtype_name(in->type), shown, resil_type_name(t));
}

static resil_err
scalar_text(resil_value *out, const resil_value *in, resil_vtype as,
    const resil_allocator *a)
{
	char tmp[40];
	size_t n = resil_value_format(in, tmp, sizeof(tmp));

	return set_heap(out, as, tmp, n, a);
}

static int
json_kind(const resil_value *in)
{
	/* Compact JSON text starts with its kind. */
	if (in->type != RESIL_VALUE_JSON || in->u.s.len == 0)
		return 0;
	return in->u.s.ptr[0];
}

resil_err
resil_value_coerce(resil_value *out, const resil_value *in, resil_type t,
    const resil_allocator *a, resil_diag *diag)
{
	int64_t i;
	double d;

	if (out == NULL || in == NULL || out == in)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "value: NULL argument to coerce");
	if (t == RESIL_TYPE_ANY || in->type == RESIL_VALUE_NULL)
		return resil_value_copy(out, in, a);
	switch (t) {
	case RESIL_TYPE_ANY:
	case RESIL_TYPE_VOID:
		break;
	case RESIL_TYPE_BOOL:
		if (in->type == RESIL_VALUE_BOOL)
			return resil_value_copy(out, in, a);
		break;
	case RESIL_TYPE_INT:
		if (in->type == RESIL_VALUE_INT)
			return resil_value_copy(out, in, a);
		/* 2^63 is exactly representable, so < is the right test. */
		if (in->type == RESIL_VALUE_DOUBLE && isfinite(in->u.d) &&
		    in->u.d >= -9223372036854775808.0 &&
		    in->u.d < 9223372036854775808.0 &&
		    (double)(int64_t)in->u.d == in->u.d) {
			*out = resil_value_int((int64_t)in->u.d);
			return RESIL_OK;
		}
		if (in->type == RESIL_VALUE_STRING &&
		    parse_i64(in->u.s.ptr, in->u.s.len, &i) == 0) {
			*out = resil_value_int(i);
			return RESIL_OK;
		}
		break;
	case RESIL_TYPE_DOUBLE:
		if (in->type == RESIL_VALUE_DOUBLE)
			return resil_value_copy(out, in, a);
		if (in->type == RESIL_VALUE_INT) {
			*out = resil_value_double((double)in->u.i);
			return RESIL_OK;
		}
		if (in->type == RESIL_VALUE_STRING &&
		    parse_f64(in->u.s.ptr, in->u.s.len, &d) == 0) {
			*out = resil_value_double(d);
			return RESIL_OK;
		}
		break;
	case RESIL_TYPE_STRING:
		if (in->type == RESIL_VALUE_STRING)
			return resil_value_copy(out, in, a);
		if (in->type == RESIL_VALUE_BOOL ||
		    in->type == RESIL_VALUE_INT ||
		    in->type == RESIL_VALUE_DOUBLE)
			return scalar_text(out, in, RESIL_VALUE_STRING, a);
		if (in->type == RESIL_VALUE_BYTES &&
		    memchr(in->u.s.ptr, 0, in->u.s.len) == NULL)
			return set_heap(out, RESIL_VALUE_STRING, in->u.s.ptr,
			    in->u.s.len, a);
		break;
	case RESIL_TYPE_BYTES:
		if (in->type == RESIL_VALUE_BYTES ||
		    in->type == RESIL_VALUE_STRING)
			return set_heap(out, RESIL_VALUE_BYTES, in->u.s.ptr,
			    in->u.s.len, a);
		break;
	case RESIL_TYPE_ARRAY:
		if (json_kind(in) == '[')
			return resil_value_copy(out, in, a);
		break;
	case RESIL_TYPE_OBJECT:
		if (json_kind(in) == '{')
			return resil_value_copy(out, in, a);
		break;
	case RESIL_TYPE_JSON:
		if (in->type == RESIL_VALUE_JSON)
			return resil_value_copy(out, in, a);
		if (in->type == RESIL_VALUE_BOOL ||
		    in->type == RESIL_VALUE_INT ||
		    (in->type == RESIL_VALUE_DOUBLE && isfinite(in->u.d)))
			return scalar_text(out, in, RESIL_VALUE_JSON, a);
		if (in->type == RESIL_VALUE_STRING) {
			resil__out o;
			char *tmp;
			size_t n;
			resil_err err;
			const resil_allocator *al = resil__allocator(a);

			resil__out_start(&o, NULL, 0);
			put_json_string(&o, in->u.s.ptr, in->u.s.len);
			n = o.len;
			tmp = resil__alloc(al, n + 1);
			if (tmp == NULL)
				return RESIL_E_NOMEM;
			resil__out_start(&o, tmp, n + 1);
			put_json_string(&o, in->u.s.ptr, in->u.s.len);
			resil__out_finish(&o);
			err = set_heap(out, RESIL_VALUE_JSON, tmp, n, a);
			resil__free(al, tmp, n + 1);
			return err;
		}
		break;
	default:
		return resil__diagf(diag, RESIL_E_INVAL,
		    "value: unknown declared type %d", (int)t);
	}
	return refuse(diag, in, t);
}

resil_err
resil_value_empty(resil_value *out, resil_type t, const resil_allocator *a)
{
	if (out == NULL)
		return RESIL_E_INVAL;
	switch (t) {
	case RESIL_TYPE_ANY:
	case RESIL_TYPE_VOID:
		value_clear(out);
		return RESIL_OK;
	case RESIL_TYPE_BOOL:
		*out = resil_value_bool(0);
		return RESIL_OK;
	case RESIL_TYPE_INT:
		*out = resil_value_int(0);
		return RESIL_OK;
	case RESIL_TYPE_DOUBLE:
		*out = resil_value_double(0.0);
		return RESIL_OK;
	case RESIL_TYPE_STRING:
		return set_heap(out, RESIL_VALUE_STRING, "", 0, a);
	case RESIL_TYPE_BYTES:
		return set_heap(out, RESIL_VALUE_BYTES, "", 0, a);
	case RESIL_TYPE_ARRAY:
	case RESIL_TYPE_JSON:
		return set_heap(out, RESIL_VALUE_JSON, "[]", 2, a);
	case RESIL_TYPE_OBJECT:
		return set_heap(out, RESIL_VALUE_JSON, "{}", 2, a);
	}
	return RESIL_E_INVAL;
}

void
resil_result_init(resil_result *r)
{
	if (r == NULL)
		return;
	resil__result_clear(r);
}

void *
resil__value_served_alloc(size_t size, void *ctx)
{
	(void)size;
	(void)ctx;
	return NULL;
}

/* resil_result_free() of a value other than a cache's answer: out of
 * line, so that the answer's path is a leaf (no saved register). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static void
result_value_free(resil_result *r)
{
	value_free(&r->value); /* makes it null */
}

void
(resil_result_free)(resil_result *r)
{
	if (r == NULL)
		return;
	r->err = RESIL_E_UNAVAILABLE;
	r->source = RESIL_SOURCE_UNAVAILABLE;
	/* A null or scalar value owns nothing: one test, no call. */
	if (RESIL__UNLIKELY(r->value.type >= RESIL_VALUE_STRING)) {
		/* A cache's answer shares its entry's bytes: the entry's
		 * reference dropped here, no call (the entry freed by a
		 * call only when that was its last reference). */
		if (RESIL__LIKELY(
		        r->value.alloc_.alloc == resil__value_served_alloc)) {
			uint64_t *refs = r->value.alloc_.ctx;
			void (*last)(void *, size_t, void *) =
			    r->value.alloc_.free;

			value_clear(&r->value);
			if (resil__faa64(refs, (uint64_t)0 - 1) == 1)
				last(NULL, RESIL__SERVED_LAST, refs); /* tail */
			return;
		}
		result_value_free(r);
		return;
	}
	r->value.type = RESIL_VALUE_NULL;
}

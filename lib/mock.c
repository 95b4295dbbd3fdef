/*
 * resil mock: the Dubbo mock grammar, its normal form, the registries and
 * the MockClusterInvoker decision.
 */
#include "internal.h"
#include "mock_internal.h"

#include <resil/mock.h>

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

/* A failed table insert sets this flag instead of exiting. */
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(obj) (resil__oom = 1)
#include <uthash.h>

/* ---------------------------------------------------------------- */
/* Names and small helpers */

const char *
resil_mock_action_name(resil_mock_action a)
{
	switch (a) {
	case RESIL_MOCK_NONE:
		return "none";
	case RESIL_MOCK_RETURN:
		return "return";
	case RESIL_MOCK_THROW:
		return "throw";
	case RESIL_MOCK_IMPL:
		return "impl";
	}
	return "unknown";
}

const char *
resil_mock_mode_name(resil_mock_mode m)
{
	switch (m) {
	case RESIL_MOCK_FAIL:
		return "fail";
	case RESIL_MOCK_FORCE:
		return "force";
	}
	return "unknown";
}

static int
is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static char
lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Does s[0..n) equal the lower-case keyword kw, ignoring case? */
static int
word_is(const char *s, size_t n, const char *kw)
{
	size_t i;

	if (strlen(kw) != n)
		return 0;
	for (i = 0; i < n; i++)
		if (lower(s[i]) != kw[i])
			return 0;
	return 1;
}

/* Does s[0..n) start with keyword kw followed by a blank or its end? */
static int
starts_word(const char *s, size_t n, const char *kw)
{
	size_t k = strlen(kw);

	return n >= k && word_is(s, k, kw) && (n == k || is_blank(s[k]));
}

static int
name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	    c == '$';
}

static int
name_char(char c)
{
	return name_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

/* Index of the first character of s[0..n) that makes it no valid name,
 * or n when it is one. */
static size_t
name_bad_at(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || !name_start(s[0]))
		return 0;
	for (i = 1; i < n; i++)
		if (!name_char(s[i]))
			return i;
	return n;
}

static int
valid_name(const char *s)
{
	size_t n;

	if (s == NULL)
		return 0;
	n = strlen(s);
	return n > 0 && name_bad_at(s, n) == n;
}

/* ---------------------------------------------------------------- */
/* The parser */

typedef struct parser {
	const char *text;
	resil_type type;
	const resil_allocator *a;
	resil_diag *diag;
} parser;

static resil_err
fail_at(const parser *p, size_t pos, const char *why)
{
	return resil__diagf(p->diag, RESIL_E_INVAL,
	    "mock: \"%s\" at column %zu: %s", p->text, pos + 1, why);
}

static int
is_number(const char *s, size_t n, int *integral)
{
	size_t i = 0;

	*integral = 1;
	if (i < n && s[i] == '-')
		i++;
	if (i >= n || s[i] < '0' || s[i] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i < n && s[i] == '.') {
		*integral = 0;
		i++;
		if (i >= n || s[i] < '0' || s[i] > '9')
			return 0;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		*integral = 0;
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= n || s[i] < '0' || s[i] > '9')
			return 0;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	return i == n;
}

/* Edit distance of a[0..la) (any case) and the keyword b, counting a
 * swap of two neighbours as one edit (ture: true); 3 when above 2. */
static size_t
near_distance(const char *a, size_t la, const char *b)
{
	size_t lb = strlen(b), i, j, v;
	size_t d[16][16];

	if (la >= 16 || lb >= 16 || la > lb + 2 || lb > la + 2)
		return 3;
	for (i = 0; i <= la; i++)
		d[i][0] = i;
	for (j = 0; j <= lb; j++)
		d[0][j] = j;
	for (i = 1; i <= la; i++) {
		for (j = 1; j <= lb; j++) {
			size_t cost = lower(a[i - 1]) == b[j - 1] ? 0 : 1;

			v = d[i - 1][j - 1] + cost;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && lower(a[i - 1]) == b[j - 2] &&
			    lower(a[i - 2]) == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb] > 3 ? 3 : d[la][lb];
}

/* The payload keyword s[0..n) is a misspelling of, or NULL. */
static const char *
near_keyword(const char *s, size_t n)
{
	static const char *const kw[] = { "true", "false", "null", "empty" };
	size_t i, best = 3, d;
	const char *hit = NULL;

	for (i = 0; i < sizeof(kw) / sizeof(kw[0]); i++) {
		d = near_distance(s, n, kw[i]);
		/* One edit for a short word, two for a long one. */
		if (d < best && d <= (strlen(kw[i]) > 4 ? 2u : 1u)) {
			best = d;
			hit = kw[i];
		}
	}
	return hit;
}

/* An unquoted text at text[pos..pos+n) that the declared type cannot
 * take ("return abc" for an int method). */
static resil_err
unquoted_fail(const parser *p, size_t pos, size_t n)
{
	const char *near = near_keyword(p->text + pos, n);
	char why[128];

	snprintf(why, sizeof(why), "cannot read an unquoted value as %s%s%s%s",
	    resil_type_name(p->type), near != NULL ? " (did you mean " : "",
	    near != NULL ? near : "", near != NULL ? "?)" : "");
	return fail_at(p, pos, why);
}

/* The note of a spec that parsed: an unquoted text was read as the
 * string itself. */
static void
unquoted_note(const parser *p, size_t pos, size_t n)
{
	const char *near = near_keyword(p->text + pos, n);

	if (p->diag == NULL)
		return;
	snprintf(p->diag->msg, sizeof(p->diag->msg),
	    "mock: \"%s\" at column %zu: unquoted text read as the string "
	    "\"%.*s\"%s%s%s",
	    p->text, pos + 1, (int)n, p->text + pos,
	    near != NULL ? " (did you mean " : "", near != NULL ? near : "",
	    near != NULL ? "?)" : "");
}

/* The payload of `return`, at text[pos..pos+n), into *out, converted to
 * the declared type. The order is Dubbo's parseMockValue. */
static resil_err
parse_payload(const parser *p, size_t pos, size_t n, resil_value *out)
{
	const char *s = p->text + pos;
	resil_value raw;
	resil_err err;
	int integral, unquoted = 0;
	char q;

	resil_value_init(&raw);
	if (n == 0 || word_is(s, n, "null")) {
		/* null converts to every type; nothing to check. */
	} else if (word_is(s, n, "empty")) {
		err = resil_value_empty(out, p->type, p->a);
		return err;
	} else if (word_is(s, n, "true") || word_is(s, n, "false")) {
		raw = resil_value_bool(lower(s[0]) == 't');
	} else if (s[0] == '"' || s[0] == '\'' || s[0] == '`') {
		q = s[0];
		if (n < 2 || s[n - 1] != q) {
			char why[64];

			snprintf(why, sizeof(why),
			    "unterminated string: no closing %c", q);
			return fail_at(p, pos + n, why);
		}
		err = resil_value_string(&raw, s + 1, n - 2, p->a);
		if (err != RESIL_OK)
			return err;
	} else if (p->type == RESIL_TYPE_STRING ||
	    p->type == RESIL_TYPE_BYTES) {
		/* Dubbo keeps an unquoted payload as text when the method
		 * returns a string, before any number parsing. */
		err = resil_value_string(&raw, s, n, p->a);
		if (err != RESIL_OK)
			return err;
	} else if (is_number(s, n, &integral)) {
		resil_value str;

		err = resil_value_string(&str, s, n, p->a);
		if (err != RESIL_OK)
			return err;
		/* An integer too big for int64 becomes a double. */
		err = resil_value_coerce(&raw, &str,
		    integral ? RESIL_TYPE_INT : RESIL_TYPE_DOUBLE, p->a, NULL);
		if (err == RESIL_E_INVAL && integral)
			err = resil_value_coerce(
			    &raw, &str, RESIL_TYPE_DOUBLE, p->a, NULL);
		resil_value_free(&str);
		if (err == RESIL_E_INVAL)
			return fail_at(p, pos, "number out of range");
		if (err != RESIL_OK)
			return err;
	} else if (s[0] == '{' || s[0] == '[') {
		const char *end = NULL;
		cJSON *doc = cJSON_ParseWithLengthOpts(s, n, &end, 0);
		size_t at;

		if (doc == NULL) {
			at = end != NULL && end >= s ? (size_t)(end - s) : 0;
			if (at > n)
				at = n;
			return fail_at(p, pos + at, "invalid JSON");
		}
		cJSON_Delete(doc);
		at = (size_t)(end - s);
		if (at < n)
			return fail_at(p, pos + at,
			    "unexpected text after the JSON value");
		err = resil_value_json(&raw, s, n, p->a);
		if (err == RESIL_E_INVAL)
			return fail_at(p, pos,
			    "invalid JSON: not UTF-8, or a string holds "
			    "\\u0000");
		if (err != RESIL_OK)
			return err;
	} else {
		/* Neither quoted nor a number, a keyword or JSON: on an
		 * untyped method the text itself, as Dubbo's parseMockValue
		 * ends. A typo such as `return ture` is then the string
		 * "ture": the note in diag says how it was read, with a
		 * did-you-mean. A declared type other than a string cannot
		 * take such text (an int, or JSON, which it is not). */
		if (p->type != RESIL_TYPE_ANY)
			return unquoted_fail(p, pos, n);
		err = resil_value_string(&raw, s, n, p->a);
		if (err != RESIL_OK)
			return err;
		unquoted = 1;
	}
	{
		resil_diag d;

		d.msg[0] = '\0';
		err = resil_value_coerce(out, &raw, p->type, p->a, &d);
		resil_value_free(&raw);
		if (err == RESIL_E_INVAL)
			return fail_at(p, pos, d.msg);
		if (err == RESIL_OK && unquoted)
			unquoted_note(p, pos, n);
		return err;
	}
}

/* "false", "0", "null" and "n/a" mean no mock. */
static int
means_none(const char *s, size_t n)
{
	return word_is(s, n, "false") || word_is(s, n, "0") ||
	    word_is(s, n, "null") || word_is(s, n, "n/a");
}

/* A prefix at text[i..end): force or fail, blanks, a colon. Its word's
 * length (5 or 4) with *colon where the colon is; 0 when there is none. */
static size_t
prefix_at(const char *text, size_t i, size_t end, size_t *colon)
{
	size_t n = end - i, k = 0, j;

	if (n >= 5 && word_is(text + i, 5, "force"))
		k = 5;
	else if (n >= 4 && word_is(text + i, 4, "fail"))
		k = 4;
	j = i + k;
	while (k > 0 && j < end && is_blank(text[j]))
		j++;
	if (k > 0 && j < end && text[j] == ':') {
		*colon = j;
		return k;
	}
	return 0;
}

/* The prefix of the spec at *i (its mode into s, *prefix its text, *i
 * past it and its blanks), and what may not follow it: nothing, a second
 * prefix, a word that means no mock. */
static resil_err
read_prefix(const parser *p, resil_mock_spec *s, size_t *i, size_t end,
    const char **prefix)
{
	const char *text = p->text;
	size_t colon = 0, k = prefix_at(text, *i, end, &colon), n;
	char why[80];

	if (k == 0)
		return RESIL_OK;
	s->mode = k == 5 ? RESIL_MOCK_FORCE : RESIL_MOCK_FAIL;
	*prefix = k == 5 ? "force:" : "fail:";
	*i = colon + 1;
	while (*i < end && is_blank(text[*i]))
		(*i)++;
	if (*i == end) {
		snprintf(why, sizeof(why), "empty body after '%s'", *prefix);
		return fail_at(p, *i, why);
	}
	n = end - *i;
	if (prefix_at(text, *i, end, &colon) > 0) {
		snprintf(
		    why, sizeof(why), "a second prefix after '%s'", *prefix);
		return fail_at(p, *i, why);
	}
	if (means_none(text + *i, n)) {
		snprintf(why, sizeof(why),
		    "'%.*s' means no mock and cannot follow '%s'", (int)n,
		    text + *i, *prefix);
		return fail_at(p, *i, why);
	}
	return RESIL_OK;
}

/* The body of throw at text[j..end): nothing, or an error name. */
static resil_err
read_throw(const parser *p, resil_mock_spec *s, size_t j, size_t end)
{
	const char *text = p->text;
	size_t bad;

	while (j < end && is_blank(text[j]))
		j++;
	s->action = RESIL_MOCK_THROW;
	if (j < end) {
		bad = name_bad_at(text + j, end - j);
		if (bad < end - j)
			return fail_at(p, j + bad,
			    bad == 0
			        ? "an error name must start with a letter, "
			          "'_' or '$'"
			        : "invalid character in error name");
		s->name = resil__strndup(&s->alloc_, text + j, end - j);
		if (s->name == NULL)
			return RESIL_E_NOMEM;
	}
	return RESIL_OK;
}

/* The body of the spec at text[i..end): a default implementation, a
 * return, a throw, or an implementation's name. */
static resil_err
read_body(const parser *p, resil_mock_spec *s, size_t i, size_t end,
    const char *prefix)
{
	const char *text = p->text;
	size_t n = end - i, j, bad;

	if (word_is(text + i, n, "true") || word_is(text + i, n, "default") ||
	    word_is(text + i, n, "fail") || word_is(text + i, n, "force")) {
		/* force alone is a force mock of the default implementation,
		 * as Dubbo's startsWith("force") makes it. */
		if (prefix == NULL && word_is(text + i, n, "force"))
			s->mode = RESIL_MOCK_FORCE;
		s->action = RESIL_MOCK_IMPL;
		return RESIL_OK;
	}
	if (starts_word(text + i, n, "return")) {
		j = i + 6;
		while (j < end && is_blank(text[j]))
			j++;
		s->action = RESIL_MOCK_RETURN;
		return parse_payload(p, j, end - j, &s->value);
	}
	if (starts_word(text + i, n, "throw"))
		return read_throw(p, s, i + 5, end);
	bad = name_bad_at(text + i, n);
	if (bad < n)
		return fail_at(p, i + bad,
		    bad == 0
		        ? "expected return, throw or a mock "
		          "implementation name"
		        : "invalid character in mock implementation name");
	s->action = RESIL_MOCK_IMPL;
	s->name = resil__strndup(&s->alloc_, text + i, n);
	if (s->name == NULL)
		return RESIL_E_NOMEM;
	return RESIL_OK;
}

resil_err
resil_mock_parse(resil_mock_spec *out, const char *text, resil_type declared,
    const resil_allocator *a, resil_diag *diag)
{
	parser p;
	resil_mock_spec s;
	const char *prefix = NULL;
	size_t i = 0, end;
	resil_err err;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "mock: NULL spec out");
	if (diag != NULL)
		diag->msg[0] = '\0'; /* a note, if any, comes on success */
	memset(&s, 0, sizeof(s));
	s.action = RESIL_MOCK_NONE;
	s.mode = RESIL_MOCK_FAIL;
	resil_value_init(&s.value);
	s.alloc_ = *resil__allocator(a);
	if (text == NULL) {
		*out = s;
		return RESIL_OK;
	}
	p.text = text;
	p.type = declared;
	p.a = &s.alloc_;
	p.diag = diag;
	if ((unsigned)declared > (unsigned)RESIL_TYPE_JSON)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock: unknown declared type %d", (int)declared);

	end = strlen(text);
	while (i < end && is_blank(text[i]))
		i++;
	while (end > i && is_blank(text[end - 1]))
		end--;
	if (end == i || means_none(text + i, end - i)) {
		*out = s;
		return RESIL_OK;
	}
	/* An error leaves nothing in s to free. */
	err = read_prefix(&p, &s, &i, end, &prefix);
	if (err == RESIL_OK)
		err = read_body(&p, &s, i, end, prefix);
	if (err != RESIL_OK)
		return err;
	*out = s;
	return RESIL_OK;
}

void
resil_mock_spec_free(resil_mock_spec *s)
{
	if (s == NULL)
		return;
	resil_value_free(&s->value);
	resil__strfree(&s->alloc_, s->name);
	s->name = NULL;
	s->action = RESIL_MOCK_NONE;
	s->mode = RESIL_MOCK_FAIL;
}

size_t
resil_mock_spec_format(const resil_mock_spec *s, char *buf, size_t size)
{
	resil__out o;

	resil__out_start(&o, buf, size);
	if (s == NULL || s->action == RESIL_MOCK_NONE) {
		resil__out_z(&o, "false");
	} else {
		resil__out_z(
		    &o, s->mode == RESIL_MOCK_FORCE ? "force:" : "fail:");
		switch (s->action) {
		case RESIL_MOCK_RETURN:
			resil__out_z(&o, "return ");
			if (s->value.type == RESIL_VALUE_STRING ||
			    s->value.type == RESIL_VALUE_BYTES) {
				/* Raw between quotes: the parser takes
				 * everything between the outer quotes. */
				resil__out_s(&o, "\"", 1);
				resil__out_s(
				    &o, s->value.u.s.ptr, s->value.u.s.len);
				resil__out_s(&o, "\"", 1);
			} else if (s->value.type == RESIL_VALUE_JSON &&
			    s->value.u.s.len > 0 &&
			    s->value.u.s.ptr[0] == '"') {
				/* A JSON string came from quoted text: print
				 * that text, raw, which parses back to the
				 * same JSON (its JSON escapes would double).
				 */
				cJSON *doc = cJSON_ParseWithLength(
				    s->value.u.s.ptr, s->value.u.s.len);
				const char *raw = cJSON_GetStringValue(doc);

				resil__out_s(&o, "\"", 1);
				if (raw != NULL)
					resil__out_z(&o, raw);
				resil__out_s(&o, "\"", 1);
				cJSON_Delete(doc);
			} else {
				char tmp[48];
				size_t n = resil_value_format(
				    &s->value, tmp, sizeof(tmp));

				if (n < sizeof(tmp))
					resil__out_s(&o, tmp, n);
				else
					resil__out_s(&o, s->value.u.s.ptr,
					    s->value.u.s.len);
			}
			break;
		case RESIL_MOCK_THROW:
			resil__out_z(&o, "throw");
			if (s->name != NULL) {
				resil__out_z(&o, " ");
				resil__out_z(&o, s->name);
			}
			break;
		case RESIL_MOCK_IMPL:
			resil__out_z(
			    &o, s->name != NULL ? s->name : "default");
			break;
		default:
			resil__out_z(&o, "?");
		}
	}
	return resil__out_finish(&o);
}

int
resil_mock_spec_equal(const resil_mock_spec *a, const resil_mock_spec *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	if (a->action != b->action)
		return 0;
	if (a->action == RESIL_MOCK_NONE)
		return 1;
	if (a->mode != b->mode || !resil_value_equal(&a->value, &b->value))
		return 0;
	if ((a->name == NULL) != (b->name == NULL))
		return 0;
	return a->name == NULL || strcmp(a->name, b->name) == 0;
}

/* ---------------------------------------------------------------- */
/* The registry */

typedef struct reg_error {
	char *name;
	int code;
	UT_hash_handle hh;
} reg_error;

typedef struct reg_impl {
	char *name;
	char *service;
	resil_call_fn fn;
	void *ctx;
	UT_hash_handle hh;
} reg_impl;

struct resil_mock_registry {
	resil_allocator alloc;
	reg_error *errors;
	reg_impl *impls;
};

resil_err
resil_mock_registry_new(resil_mock_registry **out, const resil_allocator *a)
{
	const resil_allocator *al = resil__allocator(a);
	resil_mock_registry *r;

	if (out == NULL)
		return RESIL_E_INVAL;
	r = resil__calloc(al, sizeof(*r));
	if (r == NULL)
		return RESIL_E_NOMEM;
	r->alloc = *al;
	*out = r;
	return RESIL_OK;
}

void
resil_mock_registry_free(resil_mock_registry *r)
{
	const resil_allocator *resil__a;
	reg_error *e, *etmp;
	reg_impl *m, *mtmp;

	if (r == NULL)
		return;
	resil__a = &r->alloc;
	HASH_ITER(hh, r->errors, e, etmp)
	{
		HASH_DEL(r->errors, e);
		resil__strfree(resil__a, e->name);
		resil__free(resil__a, e, sizeof(*e));
	}
	HASH_ITER(hh, r->impls, m, mtmp)
	{
		HASH_DEL(r->impls, m);
		resil__strfree(resil__a, m->name);
		resil__strfree(resil__a, m->service);
		resil__free(resil__a, m, sizeof(*m));
	}
	resil__free(&r->alloc, r, sizeof(*r));
}

resil_err
resil_mock_registry_add_error(
    resil_mock_registry *r, const char *name, int code, resil_diag *diag)
{
	const resil_allocator *resil__a;
	reg_error *e;
	int resil__oom = 0;
	size_t n;

	if (r == NULL || name == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "mock.registry: NULL argument");
	if (!valid_name(name))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock.registry: \"%s\" is not a valid error name", name);
	resil__a = &r->alloc;
	n = strlen(name);
	HASH_FIND(hh, r->errors, name, n, e);
	if (e != NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock.registry: error \"%s\" is already registered", name);
	e = resil__calloc(resil__a, sizeof(*e));
	if (e == NULL)
		return RESIL_E_NOMEM;
	e->name = resil__strndup(resil__a, name, n);
	if (e->name == NULL) {
		resil__free(resil__a, e, sizeof(*e));
		return RESIL_E_NOMEM;
	}
	e->code = code;
	HASH_ADD_KEYPTR(hh, r->errors, e->name, n, e);
	if (resil__oom) {
		resil__strfree(resil__a, e->name);
		resil__free(resil__a, e, sizeof(*e));
		return RESIL_E_NOMEM;
	}
	return RESIL_OK;
}

resil_err
resil_mock_registry_add_impl(resil_mock_registry *r, const char *name,
    const char *service, resil_call_fn fn, void *ctx, resil_diag *diag)
{
	const resil_allocator *resil__a;
	reg_impl *m;
	int resil__oom = 0;
	size_t n;

	if (r == NULL || name == NULL || service == NULL || fn == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "mock.registry: NULL argument");
	if (!valid_name(name))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock.registry: \"%s\" is not a valid implementation "
		    "name",
		    name);
	if (service[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock.registry: empty service for implementation \"%s\"",
		    name);
	resil__a = &r->alloc;
	n = strlen(name);
	HASH_FIND(hh, r->impls, name, n, m);
	if (m != NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock.registry: implementation \"%s\" is already "
		    "registered",
		    name);
	m = resil__calloc(resil__a, sizeof(*m));
	if (m == NULL)
		return RESIL_E_NOMEM;
	m->name = resil__strndup(resil__a, name, n);
	m->service = resil__strndup(resil__a, service, strlen(service));
	if (m->name == NULL || m->service == NULL) {
		resil__strfree(resil__a, m->name);
		resil__strfree(resil__a, m->service);
		resil__free(resil__a, m, sizeof(*m));
		return RESIL_E_NOMEM;
	}
	m->fn = fn;
	m->ctx = ctx;
	HASH_ADD_KEYPTR(hh, r->impls, m->name, n, m);
	if (resil__oom) {
		resil__strfree(resil__a, m->name);
		resil__strfree(resil__a, m->service);
		resil__free(resil__a, m, sizeof(*m));
		return RESIL_E_NOMEM;
	}
	return RESIL_OK;
}

/* ---------------------------------------------------------------- */
/* The service's mock configuration */

/* A spec with its names resolved against the registry. */
typedef struct bound {
	resil_mock_spec spec;
	resil_type type;
	resil_call_fn fn; /* IMPL */
	void *ctx;
	int code;        /* THROW NAME */
	char *impl_name; /* IMPL: the resolved name, for messages */
} bound;

typedef struct method_entry {
	char *method;
	bound b;
	UT_hash_handle hh;
} method_entry;

struct resil_mock {
	resil_allocator alloc;
	char *service;
	char *spec_text; /* service level; NULL: none */
	const resil_mock_registry *registry;
	bound service_level;
	method_entry *methods;
	size_t nforce; /* bounds with an active force: spec (issue 29) */
};

static size_t
bound_force(const bound *b)
{
	return b->spec.action != RESIL_MOCK_NONE &&
	    b->spec.mode == RESIL_MOCK_FORCE;
}

int
resil__mock_may_force(const resil_mock *m)
{
	return m->nforce != 0;
}

const size_t *
resil__mock_force_count(const resil_mock *m)
{
	return &m->nforce;
}

static void
bound_free(const resil_allocator *a, bound *b)
{
	resil_mock_spec_free(&b->spec);
	resil__strfree(a, b->impl_name);
	b->impl_name = NULL;
}

/* Parse text for type and resolve its names into *out. */
static resil_err
bind(const resil_mock *m, const char *text, resil_type type, bound *out,
    resil_diag *diag)
{
	const resil_allocator *resil__a = &m->alloc;
	const resil_mock_registry *r = m->registry;
	bound b;
	resil_err err;

	memset(&b, 0, sizeof(b));
	err = resil_mock_parse(&b.spec, text, type, resil__a, diag);
	if (err != RESIL_OK)
		return err;
	b.type = type;
	if (b.spec.action == RESIL_MOCK_THROW && b.spec.name != NULL) {
		reg_error *e = NULL;

		if (r != NULL)
			HASH_FIND(hh, r->errors, b.spec.name,
			    strlen(b.spec.name), e);
		if (e == NULL) {
			err = resil__diagf(diag, RESIL_E_INVAL,
			    "mock: \"%s\": unknown error \"%s\"", text,
			    b.spec.name);
			goto fail;
		}
		b.code = e->code;
	} else if (b.spec.action == RESIL_MOCK_IMPL) {
		reg_impl *impl = NULL;
		const char *name = b.spec.name;
		size_t n;

		if (name == NULL) {
			n = strlen(m->service) + 4;
			b.impl_name = resil__alloc(resil__a, n + 1);
			if (b.impl_name == NULL) {
				err = RESIL_E_NOMEM;
				goto fail;
			}
			snprintf(b.impl_name, n + 1, "%sMock", m->service);
		} else {
			b.impl_name =
			    resil__strndup(resil__a, name, strlen(name));
			if (b.impl_name == NULL) {
				err = RESIL_E_NOMEM;
				goto fail;
			}
		}
		if (r != NULL)
			HASH_FIND(hh, r->impls, b.impl_name,
			    strlen(b.impl_name), impl);
		if (impl == NULL) {
			err = resil__diagf(diag, RESIL_E_INVAL,
			    "mock: \"%s\": no mock implementation \"%s\" is "
			    "registered",
			    text, b.impl_name);
			goto fail;
		}
		if (strcmp(impl->service, m->service) != 0) {
			err = resil__diagf(diag, RESIL_E_INVAL,
			    "mock: \"%s\": \"%s\" implements \"%s\", not "
			    "\"%s\"",
			    text, b.impl_name, impl->service, m->service);
			goto fail;
		}
		b.fn = impl->fn;
		b.ctx = impl->ctx;
	}
	*out = b;
	return RESIL_OK;
fail:
	bound_free(resil__a, &b);
	return err;
}

resil_err
resil_mock_new(
    resil_mock **out, const resil_mock_config *cfg, resil_diag *diag)
{
	resil_mock_config c;
	const resil_allocator *al;
	resil_mock *m;
	resil_err err;

	if (out == NULL || cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "mock: NULL argument");
	/* This struct is the first released one: nothing shorter exists. */
	if (cfg->size != sizeof(c))
		return resil__check_size(
		    diag, "mock", "resil_mock_config", cfg->size, sizeof(c));
	resil_mock_config_init(&c);
	memcpy(&c, cfg, cfg->size);
	if (c.service == NULL || c.service[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "mock.service: a service name is required");
	al = resil__allocator(c.alloc);
	m = resil__calloc(al, sizeof(*m));
	if (m == NULL)
		return RESIL_E_NOMEM;
	m->alloc = *al;
	m->registry = c.registry;
	m->service = resil__strndup(al, c.service, strlen(c.service));
	if (m->service == NULL)
		goto nomem;
	if (c.spec != NULL) {
		m->spec_text = resil__strndup(al, c.spec, strlen(c.spec));
		if (m->spec_text == NULL)
			goto nomem;
	}
	err = bind(m, m->spec_text, RESIL_TYPE_ANY, &m->service_level, diag);
	if (err != RESIL_OK) {
		resil_mock_free(m);
		return err;
	}
	m->nforce = bound_force(&m->service_level);
	*out = m;
	return RESIL_OK;
nomem:
	resil_mock_free(m);
	return RESIL_E_NOMEM;
}

void
resil_mock_free(resil_mock *m)
{
	const resil_allocator *resil__a;
	method_entry *e, *tmp;

	if (m == NULL)
		return;
	resil__a = &m->alloc;
	HASH_ITER(hh, m->methods, e, tmp)
	{
		HASH_DEL(m->methods, e);
		bound_free(resil__a, &e->b);
		resil__strfree(resil__a, e->method);
		resil__free(resil__a, e, sizeof(*e));
	}
	bound_free(resil__a, &m->service_level);
	resil__strfree(resil__a, m->service);
	resil__strfree(resil__a, m->spec_text);
	resil__free(resil__a, m, sizeof(*m));
}

resil_err
resil_mock_set_method(resil_mock *m, const char *method, resil_type type,
    const char *spec, resil_diag *diag)
{
	const resil_allocator *resil__a;
	method_entry *e;
	bound b;
	int resil__oom = 0;
	resil_err err;
	size_t n;

	if (m == NULL || method == NULL || method[0] == '\0')
		return resil__diagf(
		    diag, RESIL_E_INVAL, "mock: NULL or empty method");
	resil__a = &m->alloc;
	err = bind(m, spec != NULL ? spec : m->spec_text, type, &b, diag);
	if (err != RESIL_OK)
		return err;
	n = strlen(method);
	HASH_FIND(hh, m->methods, method, n, e);
	if (e != NULL) {
		m->nforce = m->nforce - bound_force(&e->b) + bound_force(&b);
		bound_free(resil__a, &e->b);
		e->b = b;
		return RESIL_OK;
	}
	e = resil__calloc(resil__a, sizeof(*e));
	if (e == NULL)
		goto nomem;
	e->method = resil__strndup(resil__a, method, n);
	if (e->method == NULL) {
		resil__free(resil__a, e, sizeof(*e));
		goto nomem;
	}
	e->b = b;
	HASH_ADD_KEYPTR(hh, m->methods, e->method, n, e);
	if (resil__oom) {
		resil__strfree(resil__a, e->method);
		resil__free(resil__a, e, sizeof(*e));
		goto nomem;
	}
	m->nforce += bound_force(&b);
	return RESIL_OK;
nomem:
	bound_free(resil__a, &b);
	return RESIL_E_NOMEM;
}

/* Up to this many method-level specs, a walk of the insertion-ordered
 * list is cheaper than hashing the name. */
#define SCAN_MAX 8

/* The spec that applies to method: its own, else the service level. The
 * same match as the hash table's (the same bytes, the same length), found
 * without hashing when there are no or few method-level specs. */
static const bound *
effective(const resil_mock *m, const char *method)
{
	const resil_allocator *resil__a = &m->alloc;
	method_entry *e = m->methods;

	(void)resil__a;
	if (e == NULL)
		return &m->service_level;
	if (HASH_COUNT(m->methods) <= SCAN_MAX) {
		/* The first byte rules most names out without a call. */
		for (; e != NULL; e = (method_entry *)e->hh.next)
			if (e->method[0] == method[0] &&
			    strcmp(e->method, method) == 0)
				return &e->b;
		return &m->service_level;
	}
	HASH_FIND(hh, m->methods, method, strlen(method), e);
	return e != NULL ? &e->b : &m->service_level;
}

resil_err
resil_mock_lookup(
    const resil_mock *m, const char *method, const resil_mock_spec **out)
{
	if (m == NULL || method == NULL || out == NULL)
		return RESIL_E_INVAL;
	*out = &effective(m, method)->spec;
	return RESIL_OK;
}

static void
describe(const resil_failure *f, char *buf, size_t size)
{
	resil__msg o;

	resil__msg_start(&o, buf, size);
	if (f == NULL) {
		RESIL__MSG_LIT(&o, "no call (force)");
	} else {
		resil__msg_str(&o, resil_strerror(f->err));
		if (f->err == RESIL_E_CALL) {
			RESIL__MSG_LIT(&o, " (rc ");
			resil__msg_int(&o, f->rc);
			RESIL__MSG_LIT(&o, ")");
		}
	}
}

/* An empty mock answer that carries the original failure, if any. */
static void
result_start(resil_result *r, const resil_failure *cause)
{
	resil_result_init(r);
	r->source = RESIL_SOURCE_MOCK;
	if (cause != NULL) {
		r->cause = cause->err;
		r->cause_rc = cause->rc;
		r->attempts = cause->attempts;
	}
}

resil_err
resil_mock_invoke(const resil_mock *m, const resil_args *args,
    const resil_failure *cause, resil_result *out)
{
	const bound *b;
	resil_result r;
	resil_value v;
	resil__msg o;
	int rc;

	if (m == NULL || args == NULL || args->method == NULL || out == NULL)
		return RESIL_E_INVAL;
	b = effective(m, args->method);
	/* return and throw cannot fail once the value is copied: they build
	 * the result straight in *out. An implementation runs the user's
	 * code and is built aside: *out is written only when it answers. */
	switch (b->spec.action) {
	case RESIL_MOCK_NONE:
		return RESIL_E_NOTFOUND;
	case RESIL_MOCK_RETURN:
		if (resil_value_copy(&v, &b->spec.value, &m->alloc) !=
		    RESIL_OK)
			return RESIL_E_NOMEM;
		result_start(out, cause);
		out->value = v;
		out->err = RESIL_OK;
		resil__msg_start(&o, out->message, sizeof(out->message));
		RESIL__MSG_LIT(&o, "mock return");
		return RESIL_OK;
	case RESIL_MOCK_THROW:
		result_start(out, cause);
		resil__msg_start(&o, out->message, sizeof(out->message));
		RESIL__MSG_LIT(&o, RESIL_MOCK_MESSAGE);
		if (b->spec.name == NULL) {
			out->err = RESIL_E_MOCK;
		} else {
			out->err = RESIL_E_BUSINESS;
			out->rc = b->code;
			out->error_name = b->spec.name;
		}
		return out->err;
	case RESIL_MOCK_IMPL: {
		char orig[64];

		result_start(&r, cause);
		resil_value_init(&v);
		rc = b->fn(b->ctx, args, &v);
		if (rc == 0) {
			resil_diag d;
			resil_err err;

			d.msg[0] = '\0';
			err = resil_value_coerce(
			    &r.value, &v, b->type, &m->alloc, &d);
			resil_value_free(&v);
			resil__msg_start(&o, r.message, sizeof(r.message));
			RESIL__MSG_LIT(&o, "mock ");
			resil__msg_str(&o, b->impl_name);
			if (err == RESIL_OK) {
				r.err = RESIL_OK;
				break;
			}
			if (err == RESIL_E_NOMEM)
				return err;
			describe(cause, orig, sizeof(orig));
			r.err = RESIL_E_CALL;
			RESIL__MSG_LIT(&o, " failed: ");
			resil__msg_str(&o, d.msg);
			RESIL__MSG_LIT(&o, "; original failure: ");
			resil__msg_str(&o, orig);
			break;
		}
		resil_value_free(&v);
		describe(cause, orig, sizeof(orig));
		r.err = RESIL_E_CALL;
		r.rc = rc;
		resil__msg_start(&o, r.message, sizeof(r.message));
		RESIL__MSG_LIT(&o, "mock ");
		resil__msg_str(&o, b->impl_name);
		RESIL__MSG_LIT(&o, " failed (rc ");
		resil__msg_int(&o, rc);
		RESIL__MSG_LIT(&o, "); original failure: ");
		resil__msg_str(&o, orig);
		break;
	}
	default:
		return RESIL_E_NOTFOUND;
	}
	*out = r;
	return r.err;
}

resil_err
resil_mock_call(const resil_mock *m, const resil_args *args, resil_call_fn fn,
    void *ctx, const resil_classifier *cls, resil_result *out)
{
	const bound *b;
	resil_failure f;
	resil_result r;
	resil_value v;
	resil_outcome o;
	resil_err err;
	resil__msg m_;
	int rc;

	if (m == NULL || args == NULL || args->method == NULL || fn == NULL ||
	    out == NULL)
		return RESIL_E_INVAL;
	b = effective(m, args->method);
	if (b->spec.action != RESIL_MOCK_NONE &&
	    b->spec.mode == RESIL_MOCK_FORCE)
		return resil_mock_invoke(m, args, NULL, out);

	resil_result_init(&r);
	resil_value_init(&v);
	rc = fn(ctx, args, &v);
	o = resil_classify(cls, rc, &v);
	r.attempts = 1;
	r.rc = rc;
	r.source = RESIL_SOURCE_LIVE;
	if (o == RESIL_OUTCOME_SUCCESS ||
	    (o == RESIL_OUTCOME_IGNORED && rc == 0)) {
		r.err = RESIL_OK;
		r.value = v;
		*out = r;
		return RESIL_OK;
	}
	resil_value_free(&v);
	resil__msg_start(&m_, r.message, sizeof(r.message));
	if (o == RESIL_OUTCOME_BUSINESS) {
		r.err = RESIL_E_BUSINESS;
		RESIL__MSG_LIT(&m_, "business error (rc ");
		resil__msg_int(&m_, rc);
		RESIL__MSG_LIT(&m_, ")");
		*out = r;
		return r.err;
	}
	if (o == RESIL_OUTCOME_FAILURE) {
		f.err = RESIL_E_CALL;
		f.rc = rc;
		f.attempts = 1;
		err = resil_mock_invoke(m, args, &f, out);
		if (err != RESIL_E_NOTFOUND && err != RESIL_E_NOMEM)
			return err;
	}
	/* Only when no mock answered: the message is not built for
	 * nothing. */
	r.err = RESIL_E_CALL;
	RESIL__MSG_LIT(&m_, "the call failed (rc ");
	resil__msg_int(&m_, rc);
	RESIL__MSG_LIT(&m_, ")");
	*out = r;
	return r.err;
}

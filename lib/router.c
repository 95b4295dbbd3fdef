/*
 * The router chain: tag, condition rules, health and panic, zone
 * affinity; see router.h for the rules.
 */
#include <resil/router.h>

#include "router_internal.h"

#include <limits.h>
#include <stdio.h>

const char *
resil_zone_mode_name(resil_zone_mode m)
{
	switch (m) {
	case RESIL_ZONE_OFF:
		return "off";
	case RESIL_ZONE_PREFER:
		return "prefer";
	case RESIL_ZONE_STRICT:
		return "strict";
	case RESIL_ZONE_PROPORTIONAL:
		return "proportional";
	}
	return "unknown";
}

/* --- condition rules --------------------------------------------------- */

typedef struct span {
	const char *p;
	size_t n;
} span;

/* What a condition's key reads. */
#define K_PLAIN 0  /* the request's params / the endpoint's attribute */
#define K_ARG 1    /* arguments[i] (WHEN) */
#define K_ATTACH 2 /* attachments[key] (WHEN): the request's params */
#define K_METHOD 3 /* method, methods (WHEN): the invoked method */
#define K_LIST 4   /* tag, methods (THEN): any item of a comma list */

typedef struct cond {
	span key;  /* K_ATTACH: the key inside the brackets */
	long argi; /* arguments[i]: i; otherwise -1 */
	int kind;
	int neg;
	int dollar; /* a value is a $-placeholder */
	span *vals;
	size_t nvals;
} cond;

struct resil_condition {
	/* A copy: the rule may outlive the allocator struct it was parsed
	 * with (a reload's or a registry source's rules live on in the
	 * selector after the pipeline or the source is freed). */
	resil_allocator a;
	char *text;
	int force;
	cond *when, *then;
	size_t nwhen, nthen;
};

static int
sp(char c)
{
	return c == ' ' || c == '\t';
}

static int
keych(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' ||
	    c == '[' || c == ']';
}

static int
valch(char c)
{
	return c != '\0' && !sp(c) && c != '&' && c != ',' && c != '=' &&
	    c != '!' && c != '>';
}

#define KEYIS(sp_, lit) \
	((sp_).n == sizeof(lit) - 1 && memcmp((sp_).p, lit, (sp_).n) == 0)

/* A whole number (an optional '-' and digits, at most 18) at p[0..n)
 * into *v: 1, else 0. */
static int
num(const char *p, size_t n, long long *v)
{
	size_t i = 0;
	int neg = 0;

	*v = 0;
	if (n > 0 && p[0] == '-') {
		neg = 1;
		i = 1;
	}
	if (i == n || n - i > 18)
		return 0;
	for (; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		*v = *v * 10 + (p[i] - '0');
	}
	if (neg)
		*v = -*v;
	return 1;
}

/* Dubbo's range values: `1~100` (both ends included), `~100` (up to),
 * `100~` (from). 1 with the ends (a missing one: LLONG_MIN / LLONG_MAX),
 * 0 when v is not a range, -1 when it is one with a bad end. */
static int
range_of(const span *v, long long *lo, long long *hi)
{
	const char *t = memchr(v->p, '~', v->n);
	size_t a, b;

	if (t == NULL)
		return 0;
	a = (size_t)(t - v->p);
	b = v->n - a - 1;
	if ((a == 0 && b == 0) || memchr(t + 1, '~', b) != NULL)
		return -1;
	*lo = LLONG_MIN;
	*hi = LLONG_MAX;
	if ((a > 0 && !num(v->p, a, lo)) || (b > 0 && !num(t + 1, b, hi)) ||
	    *lo > *hi)
		return -1;
	return 1;
}

/* Free n conditions in an array of cap. */
static void
conds_free(const resil_allocator *a, cond *c, size_t n, size_t cap)
{
	size_t i;

	if (c == NULL)
		return;
	for (i = 0; i < n; i++)
		if (c[i].vals != NULL)
			resil__free(a, c[i].vals, c[i].nvals * sizeof(span));
	resil__free(a, c, cap * sizeof(*c));
}

/* p (n elements of elem bytes in use, room for *cap) moved to twice the
 * room (2 at first); NULL when out of memory, p unchanged. */
static void *
grow(const resil_allocator *a, void *p, size_t *cap, size_t n, size_t elem)
{
	size_t nc = *cap == 0 ? 2 : *cap * 2;
	void *np = resil__calloc(a, nc * elem);

	if (np == NULL)
		return NULL;
	if (p != NULL) {
		memcpy(np, p, n * elem);
		resil__free(a, p, *cap * elem);
	}
	*cap = nc;
	return np;
}

/* p moved to room for exactly its n elements, so that free knows the
 * size; NULL when out of memory, p unchanged. */
static void *
fit(const resil_allocator *a, void *p, size_t *cap, size_t n, size_t elem)
{
	void *np;

	if (*cap == n)
		return p;
	np = resil__alloc(a, n * elem);
	if (np == NULL)
		return NULL;
	memcpy(np, p, n * elem);
	resil__free(a, p, *cap * elem);
	*cap = n;
	return np;
}

#define PERR(col, ...) perr(diag, text, (col), __VA_ARGS__)

static resil_err perr(resil_diag *diag, const char *text, size_t col,
    const char *fmt, ...) RESIL__PRINTF(4, 5);

static resil_err
perr(resil_diag *diag, const char *text, size_t col, const char *fmt, ...)
{
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return resil__diagf(diag, RESIL_E_INVAL,
	    "condition \"%s\" at column %zu: %s", text, col, what);
}

/* attachments[key] (Dubbo's AttachmentConditionMatcher): the request's
 * attachment (resil_request.params) key, before '=>' only. */
static resil_err
attach_key(const char *text, size_t col, int when, cond *c, resil_diag *diag)
{
	const char *k = c->key.p + 12;
	size_t n = c->key.n - 12;

	if (n < 2 || k[n - 1] != ']' || memchr(k, '[', n) != NULL ||
	    memchr(k, ']', n - 1) != NULL)
		return PERR(col, "expected attachments[key]");
	if (!when)
		return PERR(
		    col, "attachments[] can only be tested before '=>'");
	c->key.p = k;
	c->key.n = n - 1;
	c->kind = K_ATTACH;
	return RESIL_OK;
}

/* The key of a condition at text[*at..to) into c: a word, or
 * arguments[N] (before '=>' only). As Dubbo's ArgumentConditionMatcher,
 * a path after it (arguments[10].inner) is accepted and reads argument N
 * whole: the text arguments have no fields, so the path is ignored, and
 * an index the call does not have never matches. */
static resil_err
parse_key(const char *text, size_t *at, size_t to, int when, cond *c,
    resil_diag *diag)
{
	size_t i = *at, k = 10, col, end;
	long v = 0;
	const char *dot;

	if (i == to || !keych(text[i]))
		return PERR(i + 1, "expected a key");
	c->key.p = text + i;
	while (i < to && keych(text[i]))
		i++;
	c->key.n = (size_t)(text + i - c->key.p);
	*at = i;
	col = (size_t)(c->key.p - text) + 1;
	if (c->key.n > 12 && memcmp(c->key.p, "attachments[", 12) == 0)
		return attach_key(text, col, when, c, diag);
	if (!(c->key.n > 10 && memcmp(c->key.p, "arguments[", 10) == 0)) {
		if (memchr(c->key.p, '[', c->key.n) != NULL ||
		    memchr(c->key.p, ']', c->key.n) != NULL)
			return PERR(col,
			    "'[' is only allowed in arguments[N] and "
			    "attachments[key]");
		if (when &&
		    (KEYIS(c->key, "method") || KEYIS(c->key, "methods")))
			c->kind = K_METHOD;
		else if (!when &&
		    (KEYIS(c->key, "methods") || KEYIS(c->key, "tag")))
			c->kind = K_LIST;
		return RESIL_OK;
	}
	/* arguments[N] ends at its ']'; a path may follow after a '.'. */
	dot = memchr(c->key.p, ']', c->key.n);
	end = dot != NULL ? (size_t)(dot - c->key.p) + 1 : c->key.n;
	if (end < c->key.n && c->key.p[end] != '.')
		return PERR(col, "expected arguments[N]");
	dot = end < c->key.n ? c->key.p + end : NULL;
	if (dot != NULL &&
	    (end + 1 == c->key.n || memchr(dot, '[', c->key.n - end) != NULL ||
	        memchr(dot, ']', c->key.n - end) != NULL))
		return PERR(col + end, "expected a field name after '.'");
	if (end <= 10 || c->key.p[end - 1] != ']' || k == end - 1)
		return PERR(col, "expected arguments[N]");
	for (; k < end - 1; k++) {
		if (c->key.p[k] < '0' || c->key.p[k] > '9' || v > 10000)
			return PERR(col + k,
			    "argument index is not a number in 0..10000");
		v = v * 10 + (c->key.p[k] - '0');
	}
	if (!when)
		return PERR(col, "arguments[] can only be tested before '=>'");
	c->argi = v;
	c->kind = K_ARG;
	return RESIL_OK;
}

/* A value of a condition: a $-placeholder (after '=>' only, a key after
 * the '$') or a range must be well formed. */
static resil_err
check_value(
    const char *text, const span *v, int when, cond *c, resil_diag *diag)
{
	size_t col = (size_t)(v->p - text) + 1, k;
	long long lo, hi;

	if (v->p[0] == '$') {
		if (when)
			return PERR(col,
			    "a $-placeholder can only be used after '=>'");
		for (k = 1; k < v->n && keych(v->p[k]) && v->p[k] != '[' &&
		     v->p[k] != ']';
		     k++)
			;
		if (v->n == 1 || k != v->n)
			return PERR(col, "expected a key after '$'");
		c->dollar = 1;
		return RESIL_OK;
	}
	if (range_of(v, &lo, &hi) < 0)
		return PERR(
		    col, "a range is N~M, ~M or N~ with whole numbers N <= M");
	return RESIL_OK;
}

/* The values of a condition, after its '=' or '!=' at text[*at..to), into
 * c->vals (exactly c->nvals of them; freed here on error). */
static resil_err
parse_values(const resil_allocator *a, const char *text, size_t *at, size_t to,
    int when, cond *c, resil_diag *diag)
{
	size_t i = *at, vcap = 0;
	resil_err err;
	span v, *nv;

	for (;;) {
		while (i < to && sp(text[i]))
			i++;
		if (i == to || !valch(text[i])) {
			err = PERR(i + 1, "expected a value after '%s'",
			    c->nvals == 0 ? (c->neg ? "!=" : "=") : ",");
			goto fail;
		}
		v.p = text + i;
		while (i < to && valch(text[i]))
			i++;
		v.n = (size_t)(text + i - v.p);
		if ((err = check_value(text, &v, when, c, diag)) != RESIL_OK)
			goto fail;
		if (c->nvals == vcap) {
			nv = grow(a, c->vals, &vcap, c->nvals, sizeof(span));
			if (nv == NULL) {
				err = RESIL_E_NOMEM;
				goto fail;
			}
			c->vals = nv;
		}
		c->vals[c->nvals++] = v;
		while (i < to && sp(text[i]))
			i++;
		if (i < to && text[i] == ',') {
			i++;
			continue;
		}
		break;
	}
	if ((nv = fit(a, c->vals, &vcap, c->nvals, sizeof(span))) == NULL) {
		err = RESIL_E_NOMEM;
		goto fail;
	}
	c->vals = nv;
	*at = i;
	return RESIL_OK;
fail:
	if (c->vals != NULL)
		resil__free(a, c->vals, vcap * sizeof(span));
	c->vals = NULL;
	return err;
}

/* One condition, `key = v1,v2` or `key != v`, at text[*at..to) into *c. */
static resil_err
parse_cond(const resil_allocator *a, const char *text, size_t *at, size_t to,
    int when, cond *c, resil_diag *diag)
{
	size_t i = *at;
	resil_err err;

	memset(c, 0, sizeof(*c));
	c->argi = -1;
	while (i < to && sp(text[i]))
		i++;
	if ((err = parse_key(text, &i, to, when, c, diag)) != RESIL_OK)
		return err;
	while (i < to && sp(text[i]))
		i++;
	if (i < to && text[i] == '=') {
		i++;
	} else if (i + 1 < to && text[i] == '!' && text[i + 1] == '=') {
		c->neg = 1;
		i += 2;
	} else {
		return PERR(i + 1, "expected '=' or '!=' after '%.*s'",
		    (int)c->key.n, c->key.p);
	}
	if ((err = parse_values(a, text, &i, to, when, c, diag)) != RESIL_OK)
		return err;
	*at = i;
	return RESIL_OK;
}

/* Parse one side, text[from..to), into *out: conditions joined by '&'. */
static resil_err
parse_side(const resil_allocator *a, const char *text, size_t from, size_t to,
    int when, cond **out, size_t *nout, resil_diag *diag)
{
	size_t i = from, n = 0, cap = 0;
	cond *cs = NULL, *ncs, c;
	resil_err err;

	while (i < to && sp(text[i]))
		i++;
	if (i == to) {
		*out = NULL;
		*nout = 0;
		return RESIL_OK;
	}
	for (;;) {
		if ((err = parse_cond(a, text, &i, to, when, &c, diag)) !=
		    RESIL_OK)
			goto fail;
		if (n == cap) {
			ncs = grow(a, cs, &cap, n, sizeof(*cs));
			if (ncs == NULL) {
				resil__free(a, c.vals, c.nvals * sizeof(span));
				err = RESIL_E_NOMEM;
				goto fail;
			}
			cs = ncs;
		}
		cs[n++] = c;
		if (i == to)
			break;
		if (text[i] != '&') {
			err = PERR(i + 1, "expected '&' or the end of the %s",
			    when ? "condition before '=>'" : "rule");
			goto fail;
		}
		i++;
	}
	if ((ncs = fit(a, cs, &cap, n, sizeof(*cs))) == NULL) {
		err = RESIL_E_NOMEM;
		goto fail;
	}
	*out = ncs;
	*nout = n;
	return RESIL_OK;
fail:
	conds_free(a, cs, n, cap);
	return err;
}

/* Is text[from..to), blanks around it ignored, exactly the word w? */
static int
side_is(const char *text, size_t from, size_t to, const char *w)
{
	size_t n = strlen(w);

	while (from < to && sp(text[from]))
		from++;
	while (to > from && sp(text[to - 1]))
		to--;
	return to - from == n && memcmp(text + from, w, n) == 0;
}

resil_err
resil_condition_parse(resil_condition **out, const char *text, int force,
    const resil_allocator *alloc, resil_diag *diag)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil_condition *c;
	const char *arrow;
	size_t len, at;
	resil_err err;

	if (out == NULL || text == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "condition: NULL");
	len = strlen(text);
	c = resil__calloc(a, sizeof(*c));
	if (c == NULL)
		return RESIL_E_NOMEM;
	c->a = *a;
	c->force = force != 0;
	c->text = resil__strdup(a, text);
	if (c->text == NULL) {
		resil__free(a, c, sizeof(*c));
		return RESIL_E_NOMEM;
	}
	arrow = strstr(c->text, "=>");
	if (arrow == NULL) {
		err = perr(diag, text, len + 1, "expected '=>'");
		goto fail;
	}
	if (strstr(arrow + 2, "=>") != NULL) {
		err = perr(diag, text,
		    (size_t)(strstr(arrow + 2, "=>") - c->text) + 1,
		    "a second '=>'");
		goto fail;
	}
	at = (size_t)(arrow - c->text);
	/* Dubbo's words: a WHEN of `true` matches every request (as an empty
	 * one), a THEN of `false` keeps nothing (as an empty one). */
	if (!side_is(c->text, 0, at, "true")) {
		err = parse_side(
		    a, c->text, 0, at, 1, &c->when, &c->nwhen, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	if (!side_is(c->text, at + 2, len, "false")) {
		err = parse_side(
		    a, c->text, at + 2, len, 0, &c->then, &c->nthen, diag);
		if (err != RESIL_OK)
			goto fail;
	}
	*out = c;
	return RESIL_OK;
fail:
	resil_condition_free(c);
	return err;
}

void
resil_condition_free(resil_condition *c)
{
	resil_allocator a;

	if (c == NULL)
		return;
	a = c->a; /* c itself is freed with it */
	conds_free(&a, c->when, c->nwhen, c->nwhen);
	conds_free(&a, c->then, c->nthen, c->nthen);
	resil__strfree(&a, c->text);
	resil__free(&a, c, sizeof(*c));
}

const char *
resil_condition_text(const resil_condition *c)
{
	return c != NULL ? c->text : NULL;
}

static int
pat_match(const span *p, const char *s, size_t n)
{
	if (p->n == 1 && p->p[0] == '*')
		return 1;
	if (p->n > 0 && p->p[p->n - 1] == '*')
		return n >= p->n - 1 && memcmp(s, p->p, p->n - 1) == 0;
	if (p->n > 0 && p->p[0] == '*')
		return n >= p->n - 1 &&
		    memcmp(s + n - (p->n - 1), p->p + 1, p->n - 1) == 0;
	return p->n == n && memcmp(s, p->p, n) == 0;
}

/* The request's param (attachment) key. */
static int
req_param(const char *key, size_t klen, const resil_request *req,
    const char **v, size_t *n)
{
	size_t i;

	if (req == NULL || req->params == NULL)
		return 0;
	for (i = 0; i < req->nparams; i++)
		if (req->params[i].key != NULL &&
		    strlen(req->params[i].key) == klen &&
		    memcmp(req->params[i].key, key, klen) == 0 &&
		    req->params[i].value != NULL) {
			*v = req->params[i].value;
			*n = strlen(*v);
			return 1;
		}
	return 0;
}

/* The request's value of key, as the WHEN side reads a plain key:
 * method, tag, zone (the consumer's), else the request's params. */
static int
req_key(const char *key, size_t klen, const resil_request *req,
    const char *local_zone, const char **v, size_t *n)
{
	span k;

	k.p = key;
	k.n = klen;
	if (KEYIS(k, "method") || KEYIS(k, "methods")) {
		*v = req != NULL && req->method != NULL ? req->method : "";
	} else if (KEYIS(k, "tag")) {
		if (req == NULL || req->tag == NULL || req->tag[0] == '\0')
			return 0;
		*v = req->tag;
	} else if (KEYIS(k, "zone")) {
		if (local_zone == NULL)
			return 0;
		*v = local_zone;
	} else {
		return req_param(key, klen, req, v, n);
	}
	*n = strlen(*v);
	return 1;
}

/* What a THEN value's $-placeholder is matched against: the request. */
typedef struct ph_ctx {
	const resil_request *req;
	const char *zone;
} ph_ctx;

/* One value (a pattern, a range or a $-placeholder) against s[0..n). */
static int
val_match(const span *p, const char *s, size_t n, const ph_ctx *ph)
{
	long long lo, hi, x;
	span r;

	if (ph != NULL && p->p[0] == '$') {
		/* Dubbo substitutes the consumer's value, then matches it
		 * as a pattern; a value the request lacks matches
		 * nothing. */
		if (!req_key(
		        p->p + 1, p->n - 1, ph->req, ph->zone, &r.p, &r.n) ||
		    r.n == 0)
			return 0;
		return pat_match(&r, s, n);
	}
	if (memchr(p->p, '~', p->n) != NULL && range_of(p, &lo, &hi) == 1)
		return num(s, n, &x) && x >= lo && x <= hi;
	return pat_match(p, s, n);
}

/* A present value against a condition: one of the values matches (=),
 * none does (!=). K_LIST: the value is a comma list, any of its items
 * counts. */
static int
cond_match(const cond *c, const char *s, size_t n, const ph_ctx *ph)
{
	size_t i, a, b;
	int any = 0;

	for (i = 0; i < c->nvals && !any; i++) {
		if (c->kind != K_LIST) {
			any = val_match(&c->vals[i], s, n, ph);
			continue;
		}
		for (a = 0; a <= n && !any; a = b + 1) {
			const char *comma = memchr(s + a, ',', n - a);

			b = comma != NULL ? (size_t)(comma - s) : n;
			any = val_match(&c->vals[i], s + a, b - a, ph);
		}
	}
	return c->neg ? !any : any;
}

static int
req_attr(const cond *c, const resil_request *req, const char *local_zone,
    const char **v, size_t *n)
{
	if (c->kind == K_ARG) {
		if (req == NULL || req->args == NULL ||
		    (size_t)c->argi >= req->nargs ||
		    req->args[c->argi] == NULL)
			return 0;
		*v = req->args[c->argi];
		*n = strlen(*v);
		return 1;
	}
	if (c->kind == K_ATTACH) /* the attachments are the params */
		return req_param(c->key.p, c->key.n, req, v, n);
	return req_key(c->key.p, c->key.n, req, local_zone, v, n);
}

static int
when_matches(
    const resil_condition *r, const resil_request *req, const char *local_zone)
{
	size_t i, n;
	const char *v;

	for (i = 0; i < r->nwhen; i++) {
		if (!req_attr(&r->when[i], req, local_zone, &v, &n))
			return 0; /* missing on the WHEN side: no match */
		if (!cond_match(&r->when[i], v, n, NULL))
			return 0;
	}
	return 1;
}

static int
then_matches(const resil_condition *r, const resil__entry *e, const ph_ctx *ph)
{
	size_t i, n;
	const char *v;

	for (i = 0; i < r->nthen; i++) {
		if (!resil__entry_attr(
		        e, r->then[i].key.p, r->then[i].key.n, &v, &n))
			return 0; /* missing on an endpoint: excluded */
		if (!cond_match(&r->then[i], v, n, ph))
			return 0;
	}
	return 1;
}

/* --- the chain --------------------------------------------------------- */

static int
streq0(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* Keep the idx[i] for which keep[i]; returns the new count. */
static size_t
compact(uint32_t *idx, size_t n, const unsigned char *keep)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (keep[i])
			idx[k++] = idx[i];
	return k;
}

/* Is t one of the items of the comma list l (NULL: none)? */
static int
tag_in(const char *l, const char *t)
{
	size_t tn = strlen(t);
	const char *c;

	if (l == NULL)
		return 0;
	for (;;) {
		c = strchr(l, ',');
		if ((c != NULL ? (size_t)(c - l) : strlen(l)) == tn &&
		    memcmp(l, t, tn) == 0)
			return 1;
		if (c == NULL)
			return 0;
		l = c + 1;
	}
}

/* Does the provider (its `methods`) export the request's method? No
 * method asked for, or `*` among them: yes. */
static int
exports(const resil__entry *e, const resil_request *req)
{
	if (req == NULL || req->method == NULL || req->method[0] == '\0')
		return 1;
	return tag_in(e->methods, req->method) || tag_in(e->methods, "*");
}

/* A glob: '*' matches any run of characters. */
static int
glob(const char *p, size_t pn, const char *s, size_t sn)
{
	size_t i = 0, j = 0, star = SIZE_MAX, mark = 0;

	while (j < sn) {
		if (i < pn && p[i] == '*') {
			star = i++;
			mark = j;
		} else if (i < pn && p[i] == s[j]) {
			i++;
			j++;
		} else if (star != SIZE_MAX) {
			i = star + 1;
			j = ++mark;
		} else {
			return 0;
		}
	}
	while (i < pn && p[i] == '*')
		i++;
	return i == pn;
}

/* A tag rule's address against an endpoint (Dubbo's checkAddressMatch):
 * `host:port`, `host` (any port), `0.0.0.0:port` (any host); '*' in the
 * host is a wildcard. */
static int
addr_match(const char *pat, const resil__entry *e)
{
	const char *colon = strrchr(pat, ':');
	const char *rb = strchr(pat, ']');
	size_t hn = colon != NULL && (rb == NULL || rb < colon)
	    ? (size_t)(colon - pat)
	    : strlen(pat);

	if (pat[hn] == ':' && strcmp(pat + hn + 1, e->port) != 0)
		return 0;
	if (hn == 7 && memcmp(pat, "0.0.0.0", 7) == 0)
		return 1;
	return glob(pat, hn, e->address, e->host_len);
}

static int
param_match(const resil__param_match *m, const resil__entry *e)
{
	const char *v;
	size_t n;
	int has = resil__entry_attr(e, m->key, strlen(m->key), &v, &n);

	switch (m->kind) {
	case RESIL__SM_EMPTY:
		return !has || n == 0;
	case RESIL__SM_NOEMPTY:
		return has && n > 0;
	case RESIL__SM_PREFIX:
		return has && n >= strlen(m->value) &&
		    memcmp(v, m->value, strlen(m->value)) == 0;
	case RESIL__SM_WILDCARD:
		return has && glob(m->value, strlen(m->value), v, n);
	default:
		return has && n == strlen(m->value) &&
		    memcmp(v, m->value, n) == 0;
	}
}

/* Is e one of tag t's endpoints? */
static int
tag_member(const resil__tag *t, const resil__entry *e)
{
	size_t i;

	for (i = 0; i < t->naddrs; i++)
		if (addr_match(t->addrs[i], e))
			return 1;
	if (t->nmatch == 0)
		return 0;
	for (i = 0; i < t->nmatch; i++)
		if (!param_match(&t->match[i], e))
			return 0;
	return 1;
}

/* Is e an endpoint of any tag of r (Dubbo: in the rule's addresses)? */
static int
tagged_by_rule(const resil_tag_rule *r, const resil__entry *e)
{
	size_t i;

	for (i = 0; i < r->ntags; i++)
		if (tag_member(&r->tags[i], e))
			return 1;
	return 0;
}

/* Is one of e's static tags a tag name of r? */
static int
static_named(const resil_tag_rule *r, const resil__entry *e)
{
	size_t i;

	for (i = 0; i < r->ntags; i++)
		if (tag_in(e->tag, r->tags[i].name))
			return 1;
	return 0;
}

/* Dubbo's TagStateRouter over idx[0..n) with the rule r; the kept count. */
static size_t
tag_rule_stage(const resil_tag_rule *r, const resil__snapshot *s,
    uint32_t *idx, size_t n, unsigned char *keep, const char *tag, int force)
{
	const resil__tag *t = NULL;
	size_t i, m = 0;

	if (tag == NULL) {
		/* Untagged: neither the rule's endpoints nor those
		 * statically tagged with one of its names. */
		for (i = 0; i < n; i++) {
			const resil__entry *e = &s->e[idx[i]];
			keep[i] = (unsigned char)(!tagged_by_rule(r, e) &&
			    (e->tag == NULL || !static_named(r, e)));
		}
		return compact(idx, n, keep);
	}
	for (i = 0; i < r->ntags && t == NULL; i++)
		if (strcmp(r->tags[i].name, tag) == 0)
			t = &r->tags[i];
	for (i = 0; i < n; i++) {
		const resil__entry *e = &s->e[idx[i]];
		keep[i] = (unsigned char)(t != NULL ? tag_member(t, e)
		                                    : tag_in(e->tag, tag));
		m += keep[i];
	}
	if (m > 0 || force || (t != NULL && r->force))
		return compact(idx, n, keep);
	/* No endpoint of that tag: the untagged ones, neither static nor
	 * the rule's. */
	for (i = 0; i < n; i++) {
		const resil__entry *e = &s->e[idx[i]];
		keep[i] =
		    (unsigned char)(e->tag == NULL && !tagged_by_rule(r, e));
	}
	return compact(idx, n, keep);
}

/* The tag router over idx[0..n); the kept count. */
static size_t
tag_stage(const resil__route_cfg *cfg, const resil__snapshot *s, uint32_t *idx,
    size_t n, unsigned char *keep, const char *tag, int force)
{
	size_t i, k = 0;

	if (cfg->tag_rule != NULL && cfg->tag_rule->enabled)
		return tag_rule_stage(
		    cfg->tag_rule, s, idx, n, keep, tag, force);
	if (tag != NULL)
		for (i = 0; i < n; i++)
			k += (size_t)tag_in(s->e[idx[i]].tag, tag);
	for (i = 0; i < n; i++) {
		const char *et = s->e[idx[i]].tag;
		if (tag != NULL && k > 0)
			keep[i] = (unsigned char)tag_in(et, tag);
		else if (tag != NULL && force)
			keep[i] = 0;
		else
			keep[i] = et == NULL;
	}
	return compact(idx, n, keep);
}

/* Envoy's zone-aware routing: which zone this call goes to, or NULL for
 * no zone routing. */
static const char *
proportional(const resil__route_cfg *cfg, const resil__snapshot *s,
    const uint32_t *idx, size_t n, const resil_random *rnd)
{
	double cons_total = 0, cons_local = 0, up_local = 0, u,
	       residual_sum = 0;
	double acc;
	size_t i, z;

	if (n < cfg->zone_min || cfg->nzones == 0)
		return NULL;
	for (z = 0; z < cfg->nzones; z++) {
		cons_total += (double)cfg->zone_consumers[z];
		if (streq0(cfg->zone_names[z], cfg->local_zone))
			cons_local = (double)cfg->zone_consumers[z];
	}
	if (cons_total <= 0 || cons_local <= 0)
		return NULL;
	for (i = 0; i < n; i++)
		up_local += streq0(s->e[idx[i]].zone, cfg->local_zone);
	up_local /= (double)n;
	cons_local /= cons_total;
	if (up_local >= cons_local)
		return cfg->local_zone; /* enough local capacity */
	/* Route locally with probability up/cons, else spill over in
	 * proportion to each other zone's spare capacity. */
	u = resil_random_uniform(rnd);
	if (u < up_local / cons_local)
		return cfg->local_zone;
	for (z = 0; z < cfg->nzones; z++) {
		double up = 0, res;
		if (streq0(cfg->zone_names[z], cfg->local_zone))
			continue;
		for (i = 0; i < n; i++)
			up += streq0(s->e[idx[i]].zone, cfg->zone_names[z]);
		res = up / (double)n -
		    (double)cfg->zone_consumers[z] / cons_total;
		if (res > 0)
			residual_sum += res;
	}
	if (residual_sum <= 0)
		return NULL;
	/* Reuse the rest of the draw: u is uniform in [p, 1). */
	u = (u - up_local / cons_local) / (1.0 - up_local / cons_local) *
	    residual_sum;
	acc = 0;
	for (z = 0; z < cfg->nzones; z++) {
		double up = 0, res;
		if (streq0(cfg->zone_names[z], cfg->local_zone))
			continue;
		for (i = 0; i < n; i++)
			up += streq0(s->e[idx[i]].zone, cfg->zone_names[z]);
		res = up / (double)n -
		    (double)cfg->zone_consumers[z] / cons_total;
		if (res <= 0)
			continue;
		acc += res;
		if (u < acc)
			return cfg->zone_names[z];
	}
	return NULL;
}

resil_err
resil__route(const resil__route_cfg *cfg, resil__snapshot *s,
    const resil_request *req, uint64_t now, const resil_random *rnd,
    resil__view *v, unsigned char *keep, resil__route_stats *st)
{
	size_t i, n = 0, before, healthy = 0, k;
	const char *tag =
	    req != NULL && req->tag != NULL && req->tag[0] != '\0' ? req->tag
	                                                           : NULL;
	ph_ctx ph;

	ph.req = req;
	ph.zone = cfg->local_zone;

	memset(st, 0, sizeof(*st));
	for (i = 0; i < s->n; i++) {
		if (s->e[i].mock)
			continue;
		st->endpoints++;
		if (s->e[i].methods != NULL && !exports(&s->e[i], req))
			st->removed_method++;
		else
			v->idx[n++] = (uint32_t)i;
	}

	/* Tag router. */
	before = n;
	n = tag_stage(cfg, s, v->idx, n, keep, tag,
	    cfg->tag_force || (req != NULL && req->tag_force));
	st->removed_tag = before - n;

	/* Condition rules, in order. */
	for (k = 0; k < cfg->nconds; k++) {
		const resil_condition *r = cfg->conds[k];
		size_t m = 0;
		if (!when_matches(r, req, cfg->local_zone))
			continue;
		before = n;
		for (i = 0; i < n; i++) {
			keep[i] = r->nthen > 0 &&
			    (unsigned char)then_matches(
			        r, &s->e[v->idx[i]], &ph);
			m += keep[i];
		}
		if (m == 0 && r->nthen > 0 && !r->force)
			continue; /* nothing matched: unchanged */
		n = compact(v->idx, n, keep);
		st->removed_condition += before - n;
		if (before != n && st->first_condition == 0)
			st->first_condition = k + 1;
	}
	st->routed = n;

	/* Health filter and panic. */
	for (i = 0; i < n; i++) {
		resil__endpoint *ep = s->e[v->idx[i]].ep;
		keep[i] = (unsigned char)(!resil__ep_ejected(ep, now) &&
		    resil__ep_breaker_admits(ep));
		healthy += keep[i];
	}
	if (n > 0 && cfg->panic != 0 &&
	    100 * (uint64_t)healthy < (uint64_t)cfg->panic * n) {
		st->panic = 1;
	} else {
		n = compact(v->idx, n, keep);
		st->removed_health = st->routed - n;
	}

	/* Zone affinity. */
	if (!st->panic && cfg->local_zone != NULL &&
	    cfg->zone_mode != RESIL_ZONE_OFF && n > 0) {
		const char *zone = cfg->local_zone;
		size_t local = 0;
		if (cfg->zone_mode == RESIL_ZONE_PROPORTIONAL)
			zone = proportional(cfg, s, v->idx, n, rnd);
		if (zone != NULL) {
			for (i = 0; i < n; i++) {
				keep[i] = (unsigned char)streq0(
				    s->e[v->idx[i]].zone, zone);
				local += keep[i];
			}
			if (local > 0 || cfg->zone_mode == RESIL_ZONE_STRICT) {
				before = n;
				n = compact(v->idx, n, keep);
				st->removed_zone = before - n;
			}
		}
		st->zone_used = zone;
	}
	if (cfg->local_zone != NULL && cfg->zone_mode == RESIL_ZONE_STRICT) {
		st->zone_known = 0;
		for (i = 0; i < s->n && !st->zone_known; i++)
			st->zone_known = streq0(s->e[i].zone, cfg->local_zone);
	}

	/* Weights now, after warm-up. */
	v->snap = s;
	v->n = n;
	for (i = 0; i < n; i++) {
		const resil__entry *e = &s->e[v->idx[i]];
		v->w[i] = (uint64_t)resil_warmup_weight(
		    e->weight, e->start, e->warmup, now);
	}
	resil__view_finish(v);
	return RESIL_OK;
}

/*
 * Dubbo's words (AbstractClusterInvoker.checkInvokers): "Failed to invoke
 * the method M in the service S. No provider available for the service S",
 * then what resil knows that Dubbo's message does not: how many endpoints
 * the directory had and which router stage removed them. An empty
 * directory keeps Dubbo's advice to check the providers.
 */
void
resil__no_provider(const resil__route_cfg *cfg, const char *service,
    const resil_request *req, const resil__route_stats *st, resil_diag *diag)
{
	resil__msg m;
	int first = 1;

	if (diag == NULL)
		return;
	if (service == NULL)
		service = "";
	resil__msg_start(&m, diag->msg, sizeof(diag->msg));
	RESIL__MSG_LIT(&m, "Failed to invoke the method ");
	resil__msg_str(
	    &m, req != NULL && req->method != NULL ? req->method : "");
	RESIL__MSG_LIT(&m, " in the service ");
	resil__msg_str(&m, service);
	RESIL__MSG_LIT(&m, ". No provider available for the service ");
	resil__msg_str(&m, service);
	if (st->endpoints == 0) {
		RESIL__MSG_LIT(&m,
		    ": 0 endpoints. Please check if the "
		    "providers have been started and "
		    "registered.");
		return;
	}
	RESIL__MSG_LIT(&m, ": ");
	resil__msg_int(&m, (int)st->endpoints);
	if (st->endpoints == 1)
		RESIL__MSG_LIT(&m, " endpoint, 0 after routers");
	else
		RESIL__MSG_LIT(&m, " endpoints, 0 after routers");
#define SEP()                                     \
	do {                                      \
		if (first)                        \
			RESIL__MSG_LIT(&m, " ("); \
		else                              \
			RESIL__MSG_LIT(&m, ", "); \
		first = 0;                        \
	} while (0)
	if (st->removed_method > 0) {
		SEP();
		RESIL__MSG_LIT(&m, "methods without ");
		resil__msg_str(
		    &m, req != NULL && req->method != NULL ? req->method : "");
		RESIL__MSG_LIT(&m, " removed ");
		resil__msg_int(&m, (int)st->removed_method);
	}
	if (st->removed_tag > 0) {
		SEP();
		RESIL__MSG_LIT(&m, "tag=");
		resil__msg_str(&m,
		    req != NULL && req->tag != NULL && req->tag[0] != '\0'
		        ? req->tag
		        : "(none)");
		RESIL__MSG_LIT(&m, " removed ");
		resil__msg_int(&m, (int)st->removed_tag);
	}
	if (st->removed_condition > 0) {
		SEP();
		RESIL__MSG_LIT(&m, "condition \"");
		resil__msg_str(&m, cfg->conds[st->first_condition - 1]->text);
		RESIL__MSG_LIT(&m, "\" removed ");
		resil__msg_int(&m, (int)st->removed_condition);
	}
	if (st->removed_health > 0) {
		SEP();
		RESIL__MSG_LIT(&m, "health removed ");
		resil__msg_int(&m, (int)st->removed_health);
	}
	if (st->removed_zone > 0) {
		SEP();
		RESIL__MSG_LIT(&m, "zone=");
		resil__msg_str(&m,
		    st->zone_used != NULL ? st->zone_used : cfg->local_zone);
		RESIL__MSG_LIT(&m, " removed ");
		resil__msg_int(&m, (int)st->removed_zone);
		if (!st->zone_known)
			RESIL__MSG_LIT(&m, ": no endpoint is in that zone");
	}
	if (!first)
		RESIL__MSG_LIT(&m, ")");
#undef SEP
}

void
resil__condition_set_force(resil_condition *c, int force)
{
	c->force = force != 0;
}

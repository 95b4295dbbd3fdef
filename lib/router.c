/*
 * The router chain: tag, condition rules, health and panic, zone
 * affinity; see router.h for the rules.
 */
#include <resil/router.h>

#include "router_internal.h"

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

typedef struct cond {
	span key;
	long argi; /* arguments[i]: i; otherwise -1 */
	int neg;
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
	if (!(c->key.n > 10 && memcmp(c->key.p, "arguments[", 10) == 0)) {
		if (memchr(c->key.p, '[', c->key.n) != NULL ||
		    memchr(c->key.p, ']', c->key.n) != NULL)
			return PERR(
			    col, "'[' is only allowed in arguments[N]");
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
	return RESIL_OK;
}

/* The values of a condition, after its '=' or '!=' at text[*at..to), into
 * c->vals (exactly c->nvals of them; freed here on error). */
static resil_err
parse_values(const resil_allocator *a, const char *text, size_t *at, size_t to,
    cond *c, resil_diag *diag)
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
	if ((err = parse_values(a, text, &i, to, c, diag)) != RESIL_OK)
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

/* A present value against a condition. */
static int
cond_match(const cond *c, const char *s, size_t n)
{
	size_t i;
	int any = 0;

	for (i = 0; i < c->nvals && !any; i++)
		any = pat_match(&c->vals[i], s, n);
	return c->neg ? !any : any;
}

#define KEYIS(sp_, lit) \
	((sp_).n == sizeof(lit) - 1 && memcmp((sp_).p, lit, (sp_).n) == 0)

static int
req_attr(const cond *c, const resil_request *req, const char *local_zone,
    const char **v, size_t *n)
{
	size_t i;

	if (c->argi >= 0) {
		if (req == NULL || req->args == NULL ||
		    (size_t)c->argi >= req->nargs ||
		    req->args[c->argi] == NULL)
			return 0;
		*v = req->args[c->argi];
	} else if (KEYIS(c->key, "method")) {
		*v = req != NULL && req->method != NULL ? req->method : "";
	} else if (KEYIS(c->key, "tag")) {
		if (req == NULL || req->tag == NULL || req->tag[0] == '\0')
			return 0;
		*v = req->tag;
	} else if (KEYIS(c->key, "zone")) {
		if (local_zone == NULL)
			return 0;
		*v = local_zone;
	} else {
		if (req == NULL || req->params == NULL)
			return 0;
		for (i = 0; i < req->nparams; i++)
			if (req->params[i].key != NULL &&
			    strlen(req->params[i].key) == c->key.n &&
			    memcmp(req->params[i].key, c->key.p, c->key.n) ==
			        0 &&
			    req->params[i].value != NULL)
				break;
		if (i == req->nparams)
			return 0;
		*v = req->params[i].value;
	}
	*n = strlen(*v);
	return 1;
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
		if (!cond_match(&r->when[i], v, n))
			return 0;
	}
	return 1;
}

static int
then_matches(const resil_condition *r, const resil__entry *e)
{
	size_t i, n;
	const char *v;

	for (i = 0; i < r->nthen; i++) {
		if (!resil__entry_attr(
		        e, r->then[i].key.p, r->then[i].key.n, &v, &n))
			return 0; /* missing on an endpoint: excluded */
		if (!cond_match(&r->then[i], v, n))
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

	memset(st, 0, sizeof(*st));
	for (i = 0; i < s->n; i++)
		if (!s->e[i].mock)
			v->idx[n++] = (uint32_t)i;
	st->endpoints = n;

	/* Tag router. */
	before = n;
	k = 0;
	if (tag != NULL)
		for (i = 0; i < n; i++)
			k += (size_t)streq0(s->e[v->idx[i]].tag, tag);
	for (i = 0; i < n; i++) {
		const char *et = s->e[v->idx[i]].tag;
		if (tag != NULL && k > 0)
			keep[i] = (unsigned char)streq0(et, tag);
		else if (tag != NULL && (cfg->tag_force || req->tag_force))
			keep[i] = 0;
		else
			keep[i] = et == NULL;
	}
	n = compact(v->idx, n, keep);
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
			    (unsigned char)then_matches(r, &s->e[v->idx[i]]);
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

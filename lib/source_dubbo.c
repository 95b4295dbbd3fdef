/*
 * Dubbo's registry layout, consumer side: URL decoding as
 * java.net.URLDecoder does it (Dubbo's URL.decode), the split of a
 * provider URL, Dubbo's rules for which providers are candidates
 * (RegistryDirectory.toInvokers, UrlUtils.isMatch) and how a provider URL
 * maps onto an endpoint (weight, timestamp and warm-up as
 * AbstractLoadBalance reads them, dubbo.tag, zone), and the condition
 * rules of the routers category (ConditionRouter).
 */
#include "source_internal.h"

#include "directory_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Dubbo's defaults (rpc.cluster.Constants): weight 100, warm-up 10 min. */
#define DUBBO_WEIGHT 100
#define DUBBO_WARMUP_MS INT64_C(600000)

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

resil_err
resil__url_decode(
    const resil_allocator *a, const char *s, char **out, size_t *col)
{
	size_t n = 0, i;
	char *o, *p;

	/* One pass to validate and count, so the copy is exactly
	 * strlen + 1 (what resil__strfree gives back). */
	for (i = 0; s[i] != '\0'; i++, n++) {
		if (s[i] != '%')
			continue;
		if (hexval(s[i + 1]) < 0 ||
		    (s[i + 1] != '\0' && hexval(s[i + 2]) < 0) ||
		    (hexval(s[i + 1]) == 0 && hexval(s[i + 2]) == 0)) {
			if (col != NULL)
				*col = i + 1;
			return RESIL_E_INVAL;
		}
		i += 2;
	}
	if ((o = resil__alloc(a, n + 1)) == NULL)
		return RESIL_E_NOMEM;
	for (p = o; *s != '\0'; s++) {
		if (*s == '+')
			*p++ = ' ';
		else if (*s == '%') {
			*p++ = (char)(hexval(s[1]) * 16 + hexval(s[2]));
			s += 2;
		} else
			*p++ = *s;
	}
	*p = '\0';
	*out = o;
	return RESIL_OK;
}

static int
scheme_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 ||
	    !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
		return 0;
	for (i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		        (s[i] >= 'A' && s[i] <= 'Z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '+' ||
		        s[i] == '-' || s[i] == '.'))
			return 0;
	return 1;
}

static int
host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
}

/* host (a name, an IPv4 address or [IPv6]) and, when given, a port
 * 1..65535. */
static resil_err
check_address(const char *h, size_t hn, const char *port, resil_diag *why)
{
	size_t i;
	unsigned long v = 0;

	if (hn == 0)
		return resil__diagf(why, RESIL_E_INVAL, "no host");
	if (h[0] == '[') {
		if (hn < 3 || h[hn - 1] != ']')
			return resil__diagf(why, RESIL_E_INVAL,
			    "host \"%.*s\" is not a bracketed IPv6 address",
			    (int)hn, h);
		for (i = 1; i + 1 < hn; i++)
			if (!(hexval(h[i]) >= 0 || h[i] == ':' || h[i] == '.'))
				return resil__diagf(why, RESIL_E_INVAL,
				    "host \"%.*s\" is not an IPv6 address",
				    (int)hn, h);
	} else {
		for (i = 0; i < hn; i++)
			if (!host_char(h[i]))
				return resil__diagf(why, RESIL_E_INVAL,
				    "host \"%.*s\" has a character that is "
				    "not in a host name",
				    (int)hn, h);
	}
	if (port == NULL)
		return RESIL_OK;
	if (port[0] == '\0')
		return resil__diagf(why, RESIL_E_INVAL, "no port");
	for (i = 0; port[i] != '\0'; i++) {
		if (port[i] < '0' || port[i] > '9' || i >= 5)
			return resil__diagf(why, RESIL_E_INVAL,
			    "port \"%s\" is not 1..65535", port);
		v = v * 10 + (unsigned long)(port[i] - '0');
	}
	if (v == 0 || v > 65535)
		return resil__diagf(
		    why, RESIL_E_INVAL, "port \"%s\" is not 1..65535", port);
	return RESIL_OK;
}

void
resil__url_free(const resil_allocator *a, resil__url *u)
{
	if (u == NULL)
		return;
	if (u->buf_ != NULL)
		resil__free(a, u->buf_, u->buflen_);
	if (u->params != NULL)
		resil__free(a, u->params, u->nparams * sizeof(*u->params));
	memset(u, 0, sizeof(*u));
}

resil_err
resil__url_parse(
    const resil_allocator *a, const char *text, resil__url *u, resil_diag *why)
{
	const char *sep = strstr(text, "://");
	size_t len = strlen(text), np = 0, i;
	char *b, *auth, *end, *at, *q, *colon, *p;
	resil_err err;

	memset(u, 0, sizeof(*u));
	if (sep == NULL)
		return resil__diagf(
		    why, RESIL_E_INVAL, "no protocol (no ://)");
	if (!scheme_ok(text, (size_t)(sep - text)))
		return resil__diagf(why, RESIL_E_INVAL,
		    "protocol \"%.*s\" is not a URL scheme",
		    (int)(sep - text) > 40 ? 40 : (int)(sep - text), text);
	/* The text, twice over: the split copy, then host alone. */
	u->buflen_ = 2 * (len + 1);
	if ((b = resil__alloc(a, u->buflen_)) == NULL)
		return RESIL_E_NOMEM;
	u->buf_ = b;
	memcpy(b, text, len + 1);
	b[sep - text] = '\0';
	u->protocol = b;
	auth = b + (sep - text) + 3;
	end = auth + strcspn(auth, "/?");
	q = strchr(end, '?');
	/* Count the parameters before cutting the text. */
	if (q != NULL)
		for (p = q + 1, np = 1; *p != '\0'; p++)
			np += *p == '&';
	if (*end == '/') {
		*end = '\0';
		u->path = end + 1;
		if (q != NULL)
			*q = '\0';
	} else {
		u->path = b + len; /* "" */
		if (*end == '?')
			*end = '\0';
	}
	/* user:password@ is dropped (a provider URL has none). */
	if ((at = strrchr(auth, '@')) != NULL)
		auth = at + 1;
	u->address = auth;
	colon = auth[0] == '[' ? strchr(auth, ']') : auth;
	colon = colon != NULL ? strrchr(colon, ':') : NULL;
	u->hostlen_ = colon != NULL ? (size_t)(colon - auth) : strlen(auth);
	u->port = colon != NULL ? colon + 1 : NULL;
	if ((err = check_address(auth, u->hostlen_, u->port, why)) !=
	    RESIL_OK) {
		resil__url_free(a, u);
		return err;
	}
	p = b + len + 1;
	memcpy(p, auth, u->hostlen_);
	p[u->hostlen_] = '\0';
	u->host = p;
	if (np > 0) {
		u->params = resil__calloc(a, np * sizeof(*u->params));
		if (u->params == NULL) {
			resil__url_free(a, u);
			return RESIL_E_NOMEM;
		}
		for (p = q + 1, i = 0; p != NULL;) {
			char *amp = strchr(p, '&'), *eq;

			if (amp != NULL)
				*amp = '\0';
			if (*p != '\0') {
				eq = strchr(p, '=');
				if (eq != NULL) {
					*eq = '\0';
					u->params[i].value = eq + 1;
				} else
					u->params[i].value = p; /* Dubbo */
				u->params[i].key = p;
				i++;
			}
			p = amp != NULL ? amp + 1 : NULL;
		}
		u->nparams = np;
		/* Empty items ("a=1&&b=2") are left out; the array keeps
		 * its size for the free. */
		for (; i < np; i++) {
			u->params[i].key = NULL;
			u->params[i].value = NULL;
		}
	}
	return RESIL_OK;
}

const char *
resil__url_get(const resil__url *u, const char *key)
{
	size_t i = u->nparams;

	/* The last one wins, as a Java map's put. */
	while (i-- > 0)
		if (u->params[i].key != NULL &&
		    strcmp(u->params[i].key, key) == 0)
			return u->params[i].value;
	return NULL;
}

static int
lower_eq(const char *s, const char *lit)
{
	for (; *s != '\0' && *lit != '\0'; s++, lit++) {
		char c = *s >= 'A' && *s <= 'Z' ? (char)(*s + 32) : *s;

		if (c != *lit)
			return 0;
	}
	return *s == '\0' && *lit == '\0';
}

/* Boolean.parseBoolean, with Dubbo's "absent or empty is the default". */
static int
dubbo_bool(const char *v, int dflt)
{
	if (v == NULL || v[0] == '\0')
		return dflt;
	return lower_eq(v, "true");
}

/* Whether item is in the comma list (blanks around items ignored). */
static int
in_list(const char *list, const char *item, size_t n)
{
	const char *p = list;

	while (*p != '\0') {
		const char *e = strchr(p, ',');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		const char *s = p;

		while (len > 0 && *s == ' ') {
			s++;
			len--;
		}
		while (len > 0 && s[len - 1] == ' ')
			len--;
		if (len == n && memcmp(s, item, n) == 0)
			return 1;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return 0;
}

static const char *
nonempty(const char *s)
{
	return s != NULL && s[0] != '\0' ? s : NULL;
}

/* UrlUtils.isMatch for group and version: "*" takes any; a consumer group
 * may be a list; an unset one takes providers without one. */
static int
group_match(const char *want, const char *have)
{
	want = nonempty(want);
	have = nonempty(have);
	if (want != NULL && strcmp(want, "*") == 0)
		return 1;
	if (want == NULL || have == NULL)
		return want == have;
	return strcmp(want, have) == 0 || in_list(want, have, strlen(have));
}

static int
version_match(const char *want, const char *have)
{
	want = nonempty(want);
	have = nonempty(have);
	if (want != NULL && strcmp(want, "*") == 0)
		return 1;
	if (want == NULL || have == NULL)
		return want == have;
	return strcmp(want, have) == 0;
}

/* A decimal integer with an optional sign; 1 with *v, 0 when it is not
 * one, -1 (with *v the bound) when it overflows 64 bits. */
static int
parse_i64(const char *s, int64_t *v)
{
	int neg = 0;
	uint64_t x = 0;

	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		if (x > (UINT64_C(1) << 62)) {
			*v = neg ? INT64_MIN : INT64_MAX;
			while (*s >= '0' && *s <= '9')
				s++;
			return *s == '\0' ? -1 : 0;
		}
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = neg ? -(int64_t)x : (int64_t)x;
	return 1;
}

static void field_note(resil_diag *field, const char *fmt, ...)
    RESIL__PRINTF(2, 3);

static void
field_note(resil_diag *field, const char *fmt, ...)
{
	size_t used;
	va_list ap;

	if (field == NULL)
		return;
	used = strlen(field->msg);
	if (used > 0 && used + 2 < sizeof(field->msg)) {
		memcpy(field->msg + used, "; ", 3);
		used += 2;
	}
	if (used + 1 >= sizeof(field->msg))
		return;
	va_start(ap, fmt);
	(void)vsnprintf(field->msg + used, sizeof(field->msg) - used, fmt, ap);
	va_end(ap);
}

static int
zone_ok(const char *s)
{
	for (; *s != '\0'; s++)
		if (!host_char(*s))
			return 0;
	return 1;
}

/* Keys that are endpoint fields, not params. */
static int
own_key(const char *k)
{
	return strcmp(k, "dubbo.tag") == 0 || strcmp(k, "zone") == 0;
}

void
resil__provider_free(const resil_allocator *a, resil__provider *p)
{
	if (p != NULL && p->block_ != NULL)
		resil__free(a, p->block_, p->blocklen_);
	if (p != NULL)
		memset(p, 0, sizeof(*p));
}

/* Whether u is a candidate of m, as RegistryDirectory.toInvokers and
 * the consumer's URL matching decide: RESIL__PROVIDER_OK (*mock set),
 * _SKIP or _BAD with the reason in *why. */
static int
candidate(
    const resil__url *u, const resil__match *m, int *mock, resil_diag *why)
{
	const char *proto = u->protocol, *v, *iface;
	const char *dflt = RESIL__DUBBO_PROTOCOLS;

	*mock = 0;
	/* Which protocols are calls (RegistryDirectory.toInvokers). */
	if (strcmp(proto, "empty") == 0) {
		resil__diagf(why, RESIL_E_INVAL, "an empty:// placeholder");
		return RESIL__PROVIDER_SKIP;
	}
	if (strcmp(proto, "mock") == 0)
		*mock = 1;
	else if (!in_list(m->protocols != NULL ? m->protocols : dflt, proto,
	             strlen(proto))) {
		resil__diagf(why, RESIL_E_INVAL,
		    "protocol \"%s\" is not one of %s", proto,
		    m->protocols != NULL ? m->protocols : dflt);
		return RESIL__PROVIDER_BAD;
	}
	if (u->port == NULL && !*mock) { /* a mock:// provider calls nothing */
		resil__diagf(why, RESIL_E_INVAL, "no port");
		return RESIL__PROVIDER_BAD;
	}
	v = resil__url_get(u, "category");
	if (v != NULL && v[0] != '\0' && strcmp(v, "providers") != 0) {
		resil__diagf(
		    why, RESIL_E_INVAL, "category \"%s\" is not providers", v);
		return RESIL__PROVIDER_SKIP;
	}
	iface = nonempty(resil__url_get(u, "interface"));
	if (iface == NULL)
		iface = nonempty(u->path);
	if (iface != NULL && strcmp(iface, "*") != 0 &&
	    strcmp(iface, m->service) != 0) {
		resil__diagf(why, RESIL_E_INVAL, "interface \"%s\" is not %s",
		    iface, m->service);
		return RESIL__PROVIDER_SKIP;
	}
	/* disabled, when present, decides; else enabled (default true). */
	v = resil__url_get(u, "disabled");
	if (v != NULL ? dubbo_bool(v, 0)
	              : !dubbo_bool(resil__url_get(u, "enabled"), 1)) {
		resil__diagf(why, RESIL_E_INVAL, "disabled (%s=%s)",
		    v != NULL ? "disabled" : "enabled",
		    v != NULL ? v : resil__url_get(u, "enabled"));
		return RESIL__PROVIDER_SKIP;
	}
	if (!group_match(m->group, resil__url_get(u, "group"))) {
		v = nonempty(resil__url_get(u, "group"));
		resil__diagf(why, RESIL_E_INVAL,
		    "group \"%s\" is not the consumer's (%s)",
		    v != NULL ? v : "", m->group != NULL ? m->group : "none");
		return RESIL__PROVIDER_SKIP;
	}
	if (!version_match(m->version, resil__url_get(u, "version"))) {
		v = nonempty(resil__url_get(u, "version"));
		resil__diagf(why, RESIL_E_INVAL,
		    "version \"%s\" is not the consumer's (%s)",
		    v != NULL ? v : "",
		    m->version != NULL ? m->version : "none");
		return RESIL__PROVIDER_SKIP;
	}
	return RESIL__PROVIDER_OK;
}

/* The endpoint fields of a provider URL, repaired as Dubbo repairs them
 * (each repair said in *field). */
typedef struct fields {
	int64_t weight, ts, warmup;
	const char *tag, *zone;
} fields;

static void
read_fields(const resil__url *u, fields *f, resil_diag *field)
{
	const char *v;
	int r;

	f->weight = DUBBO_WEIGHT;
	f->ts = 0;
	f->warmup = DUBBO_WARMUP_MS;
	/* Weight: AbstractLoadBalance.getWeight, Math.max(weight, 0). */
	if ((v = resil__url_get(u, "weight")) != NULL) {
		r = parse_i64(v, &f->weight);
		if (r == 0) {
			field_note(field,
			    "weight \"%s\" is not an integer; %d used", v,
			    DUBBO_WEIGHT);
			f->weight = DUBBO_WEIGHT;
		} else if (f->weight < 0) {
			field_note(field, "weight %s is negative; 0 used", v);
			f->weight = 0;
		} else if (f->weight > INT32_MAX) {
			field_note(field, "weight %s is above %d; %d used", v,
			    INT32_MAX, INT32_MAX);
			f->weight = INT32_MAX;
		}
	}
	if ((v = resil__url_get(u, "timestamp")) != NULL && v[0] != '\0') {
		if (parse_i64(v, &f->ts) != 1 || f->ts < 0) {
			field_note(field,
			    "timestamp \"%s\" is not milliseconds since "
			    "1970; no warm-up",
			    v);
			f->ts = 0;
		}
	}
	if ((v = resil__url_get(u, "warmup")) != NULL && v[0] != '\0') {
		if (parse_i64(v, &f->warmup) != 1) {
			field_note(field,
			    "warmup \"%s\" is not milliseconds; %lld used", v,
			    (long long)DUBBO_WARMUP_MS);
			f->warmup = DUBBO_WARMUP_MS;
		}
	}
	f->tag = nonempty(resil__url_get(u, "dubbo.tag"));
	f->zone = nonempty(resil__url_get(u, "zone"));
	if (f->zone != NULL && !zone_ok(f->zone)) {
		field_note(field, "zone \"%s\" is not [A-Za-z0-9_.-]+; none",
		    f->zone);
		f->zone = NULL;
	}
}

/* The params string: protocol and path (unless the URL has them as
 * params), then the params but the endpoint's own, the last of a repeat;
 * into p of plen + 1 bytes. */
static void
write_params(const resil__url *u, char *p, size_t plen)
{
	resil__out o;
	size_t i;

	resil__out_start(&o, p, plen + 1);
	if (resil__url_get(u, "protocol") == NULL) {
		resil__out_z(&o, "protocol=");
		resil__out_z(&o, u->protocol);
	}
	if (resil__url_get(u, "path") == NULL && u->path[0] != '\0') {
		if (o.len > 0)
			resil__out_c(&o, '&');
		resil__out_z(&o, "path=");
		resil__out_z(&o, u->path);
	}
	for (i = 0; i < u->nparams; i++) {
		const char *k = u->params[i].key;

		if (k == NULL || own_key(k) ||
		    resil__url_get(u, k) != u->params[i].value)
			continue; /* a repeat: the last one is used */
		if (o.len > 0)
			resil__out_c(&o, '&');
		resil__out_z(&o, k);
		resil__out_c(&o, '=');
		resil__out_z(&o, u->params[i].value);
	}
	(void)resil__out_finish(&o);
}

/* out's spec strings in one block: address, zone, tag, params. -1 for out
 * of memory. */
static int
build_block(const resil_allocator *a, const resil__url *u, const fields *f,
    resil__provider *out)
{
	size_t need, i, alen, plen;
	char *blk, *p;

	alen = strlen(u->address);
	plen = strlen("protocol=") + strlen(u->protocol) + 1 +
	    strlen("path=") + strlen(u->path) + 1;
	for (i = 0; i < u->nparams; i++) {
		if (u->params[i].key == NULL || own_key(u->params[i].key))
			continue;
		plen +=
		    strlen(u->params[i].key) + strlen(u->params[i].value) + 2;
	}
	need = alen + 1 + (f->zone != NULL ? strlen(f->zone) + 1 : 0) +
	    (f->tag != NULL ? strlen(f->tag) + 1 : 0) + plen + 1;
	if ((blk = resil__alloc(a, need)) == NULL)
		return -1;
	out->block_ = blk;
	out->blocklen_ = need;
	p = blk;
	memcpy(p, u->address, alen + 1);
	out->spec = resil_endpoint_spec_default(p);
	p += alen + 1;
	if (f->zone != NULL) {
		memcpy(p, f->zone, strlen(f->zone) + 1);
		out->spec.zone = p;
		p += strlen(f->zone) + 1;
	}
	if (f->tag != NULL) {
		memcpy(p, f->tag, strlen(f->tag) + 1);
		out->spec.tag = p;
		p += strlen(f->tag) + 1;
	}
	out->spec.params = p;
	p[0] = '\0';
	write_params(u, p, plen);
	return 0;
}

int
resil__provider_map(const resil_allocator *a, const resil__url *u,
    const resil__match *m, uint64_t now, int64_t wall_ms, resil__provider *out,
    resil_diag *why, resil_diag *field)
{
	const char *bad;
	size_t col;
	fields f;
	int mock, r;

	if (field != NULL)
		field->msg[0] = '\0';
	memset(out, 0, sizeof(*out));
	if ((r = candidate(u, m, &mock, why)) != RESIL__PROVIDER_OK)
		return r;
	read_fields(u, &f, field);
	if (build_block(a, u, &f, out) != 0)
		return -1;
	/* The directory's own grammar of params: a provider the directory
	 * would refuse is left out here, alone, instead of failing the
	 * whole push (issue 38.1: "&=x", a path with a '&'). */
	if ((bad = resil__params_check(out->spec.params, &col)) != NULL) {
		const char *item = out->spec.params + col - 1;

		resil__diagf(why, RESIL_E_INVAL,
		    "parameter \"%.*s\": %s (a provider's parameters are "
		    "key=value joined by '&')",
		    (int)strcspn(item, "&") > 80 ? 80
		                                 : (int)strcspn(item, "&"),
		    item, bad);
		resil__provider_free(a, out);
		return RESIL__PROVIDER_BAD;
	}
	out->spec.weight = (int32_t)f.weight;
	out->spec.mock = mock;
	out->timestamp_ms = f.ts;
	/* Warm-up from the provider's start, on the directory's clock: the
	 * uptime is wall_now - timestamp (Dubbo reads System.
	 * currentTimeMillis() - timestamp); a start in the future counts as
	 * now, a provider past its warm-up has none. */
	if (f.ts > 0 && f.warmup > 0) {
		int64_t up = wall_ms - f.ts;

		if (up < 0)
			up = 0;
		if (up < f.warmup) {
			uint64_t up_ns = (uint64_t)up * RESIL_NS_PER_MS;

			out->spec.start_time = up_ns < now ? now - up_ns : 0;
			out->spec.warmup =
			    (uint64_t)f.warmup * RESIL_NS_PER_MS;
		}
	}
	return RESIL__PROVIDER_OK;
}

int
resil__route_map(const resil_allocator *a, const resil__url *u, char **rule,
    int *force, int *priority, resil_diag *why)
{
	const char *proto = u->protocol, *v, *kind;
	char *r, *s, *d;
	size_t col = 0;
	int64_t pr = 0;
	resil_err err;

	if (strcmp(proto, "empty") == 0) {
		resil__diagf(why, RESIL_E_INVAL, "an empty:// placeholder");
		return RESIL__PROVIDER_SKIP;
	}
	/* route://...?router=condition is the old spelling. */
	kind = proto;
	if (strcmp(proto, "route") == 0 &&
	    (v = nonempty(resil__url_get(u, "router"))) != NULL)
		kind = v;
	if (strcmp(kind, "condition") != 0) {
		resil__diagf(why, RESIL_E_INVAL,
		    "router \"%s\" is not supported (condition only)", kind);
		return RESIL__PROVIDER_BAD;
	}
	if (!dubbo_bool(resil__url_get(u, "enabled"), 1)) {
		resil__diagf(why, RESIL_E_INVAL, "disabled (enabled=%s)",
		    resil__url_get(u, "enabled"));
		return RESIL__PROVIDER_SKIP;
	}
	v = resil__url_get(u, "rule");
	if (v == NULL || v[0] == '\0') {
		resil__diagf(why, RESIL_E_INVAL, "no rule");
		return RESIL__PROVIDER_BAD;
	}
	/* The rule is encoded once more (getParameterAndDecoded). */
	err = resil__url_decode(a, v, &r, &col);
	if (err == RESIL_E_NOMEM)
		return -1;
	if (err != RESIL_OK) {
		resil__diagf(why, RESIL_E_INVAL,
		    "rule \"%s\": a malformed %%-escape at column %zu", v,
		    col);
		return RESIL__PROVIDER_BAD;
	}
	/* ConditionRouter: rule.replace("consumer.", "").replace(
	 * "provider.", ""), every occurrence, as Dubbo does. */
	for (s = d = r; *s != '\0';) {
		if (strncmp(s, "consumer.", 9) == 0)
			s += 9;
		else if (strncmp(s, "provider.", 9) == 0)
			s += 9;
		else
			*d++ = *s++;
	}
	*d = '\0';
	if (d != s) {
		/* Shorter now: copy to an exact size for the free. */
		char *t = resil__strdup(a, r);

		resil__free(a, r, (size_t)(s - r) + 1);
		if (t == NULL)
			return -1;
		r = t;
	}
	*force = dubbo_bool(resil__url_get(u, "force"), 0);
	*priority = 0;
	if ((v = resil__url_get(u, "priority")) != NULL &&
	    parse_i64(v, &pr) == 1 && pr >= INT32_MIN && pr <= INT32_MAX)
		*priority = (int)pr;
	*rule = r;
	return RESIL__PROVIDER_OK;
}

char *
resil__service_key(const resil_allocator *a, const char *service,
    const char *group, const char *version)
{
	size_t n = strlen(service) + 1;
	char *k;

	group = nonempty(group);
	version = nonempty(version);
	n += group != NULL ? strlen(group) + 1 : 0;
	n += version != NULL ? strlen(version) + 1 : 0;
	if ((k = resil__alloc(a, n)) == NULL)
		return NULL;
	(void)snprintf(k, n, "%s%s%s%s%s", group != NULL ? group : "",
	    group != NULL ? "/" : "", service, version != NULL ? ":" : "",
	    version != NULL ? version : "");
	return k;
}

/* ---- the consumer's node (issue 40) ---------------------------------- */

static int
url_plain(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '*' ||
	    c == '_';
}

char *
resil__url_encode(const resil_allocator *a, const char *s)
{
	size_t n = 1, i;
	char *o, *p;

	for (i = 0; s[i] != '\0'; i++)
		n += url_plain((unsigned char)s[i]) || s[i] == ' ' ? 1 : 3;
	if ((o = resil__alloc(a, n)) == NULL)
		return NULL;
	for (p = o, i = 0; s[i] != '\0'; i++) {
		unsigned char c = (unsigned char)s[i];

		if (url_plain(c))
			*p++ = (char)c;
		else if (c == ' ')
			*p++ = '+';
		else {
			(void)snprintf(p, 4, "%%%02X", c);
			p += 3;
		}
	}
	*p = '\0';
	return o;
}

char *
resil__consumer_url(const resil_allocator *a, const char *host,
    const char *service, const char *application, const char *group,
    const char *version, const char *methods, int check, long pid,
    int64_t timestamp_ms)
{
	char buf[2048];
	size_t len = 0;

#define ADD(...)                                                             \
	do {                                                                 \
		if (len < sizeof(buf))                                       \
			len += (size_t)snprintf(                             \
			    buf + len, sizeof(buf) - len, __VA_ARGS__);      \
	} while (0)
	/* Dubbo's URL.toFullString: the parameters in name order. */
	ADD("consumer://%s/%s?", host, service);
	if (application != NULL)
		ADD("application=%s&", application);
	ADD("category=consumers&check=%s&dubbo=2.0.2&",
	    check ? "true" : "false");
	if (group != NULL)
		ADD("group=%s&", group);
	ADD("interface=%s&", service);
	if (methods != NULL && methods[0] != '\0')
		ADD("methods=%s&", methods);
	ADD("pid=%ld&side=consumer&timestamp=%lld", pid,
	    (long long)timestamp_ms);
	if (version != NULL)
		ADD("&version=%s", version);
#undef ADD
	if (len >= sizeof(buf))
		return NULL;
	return resil__strdup(a, buf);
}

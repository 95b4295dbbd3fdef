/*
 * Dubbo's override rules for a consumer (issue 40), both forms reduced to
 * override URLs (lib/configurator_yaml.c makes them of a 3.x rule, as
 * Dubbo's ConfigParser does), matched as Dubbo's AbstractConfigurator
 * matches them:
 *
 * - enabled=false: the rule is ignored.
 * - the rule's path is the service (or * for an application rule naming
 *   no service); its group and version, when given, the consumer's.
 * - for the consumer (its reference settings: mock, timeout, retries, the
 *   stages' keys): no port, side consumer (or, in a 2.7 URL, no side),
 *   host 0.0.0.0 or this consumer's address, application absent, * or
 *   this consumer's, no providerAddresses (or one that lists 0.0.0.0),
 *   each ~KEY condition equal to the consumer's KEY.
 * - for a provider (weight, disabled, dubbo.tag, warmup, applied to its
 *   URL before it is mapped, as Dubbo configures a provider URL): a rule
 *   with the provider's port and host (or 0.0.0.0), or side provider; or
 *   a consumer rule as above (0.0.0.0 weight=50: every provider); and,
 *   when providerAddresses is given, the provider's address in it.
 *
 * Order: the 2.7 URLs sorted as Dubbo sorts configurators (by host, then
 * priority), then the application's YAML rule, then the service's, each
 * in its order; a later setting of a key wins. The consumer keys go over
 * the base configuration one by one, each through resil_config_set() and
 * a dry reload (the same checks as the reload): a key refused is a
 * BAD_OVERRIDE naming the rule and the key, the rest goes on; then one
 * resil_pipeline_reload(). With no rule, the base alone: the file's
 * values exactly.
 */
#include "configurator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dubbo's condition keys (AbstractConfigurator.configureIfMatch) and the
 * priority: they select, they are not settings. */
static int
condition_key(const char *k)
{
	static const char *const keys[] = { "category", "check", "dynamic",
		"enabled", "group", "version", "application", "side",
		"configVersion", "compatible_config", "interfaces",
		"interface", "providerAddresses", "priority" };
	size_t i;

	if (k[0] == '~')
		return 1;
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strcmp(k, keys[i]) == 0)
			return 1;
	return 0;
}

/* What a provider URL takes from a rule (the endpoint's fields). */
static int
provider_key(const char *k)
{
	return strcmp(k, "weight") == 0 || strcmp(k, "disabled") == 0 ||
	    strcmp(k, "dubbo.tag") == 0 || strcmp(k, "warmup") == 0;
}

static int
is_any(const char *s)
{
	return s != NULL && strcmp(s, "0.0.0.0") == 0;
}

/* s in the comma list l. */
static int
in_list(const char *l, const char *s)
{
	size_t n = strlen(s);

	while (l != NULL && *l != '\0') {
		const char *c = strchr(l, ',');
		size_t len = c != NULL ? (size_t)(c - l) : strlen(l);

		if (len == n && strncmp(l, s, n) == 0)
			return 1;
		l = c != NULL ? c + 1 : NULL;
	}
	return 0;
}

static int
rule_enabled(const resil__url *u)
{
	const char *e = resil__url_get(u, "enabled");

	return e == NULL || strcmp(e, "false") != 0;
}

/* Service, group and version. */
static int
for_service(const resil__url *u, const resil__ov_who *w)
{
	const char *g = resil__url_get(u, "group");
	const char *v = resil__url_get(u, "version");

	if (strcmp(u->path, "*") != 0 && strcmp(u->path, w->service) != 0)
		return 0;
	if (g != NULL && strcmp(g, "*") != 0 &&
	    (w->group == NULL || strcmp(g, w->group) != 0))
		return 0;
	if (v != NULL && strcmp(v, "*") != 0 &&
	    (w->version == NULL || strcmp(v, w->version) != 0))
		return 0;
	return 1;
}

static int
app_ok(const char *rule_app, const char *app)
{
	return rule_app == NULL || strcmp(rule_app, "*") == 0 ||
	    (app != NULL && strcmp(rule_app, app) == 0);
}

/* The ~KEY conditions against the consumer's URL (its keys that a rule
 * may test: application, side, interface, category). */
static int
tilde_ok(const resil__url *u, const resil__ov_who *w)
{
	size_t i;

	for (i = 0; i < u->nparams; i++) {
		const char *k = u->params[i].key, *v = u->params[i].value;
		const char *mine = NULL;

		if (k == NULL || k[0] != '~' || strcmp(v, "*") == 0)
			continue;
		if (strcmp(k + 1, "application") == 0)
			mine = w->application;
		else if (strcmp(k + 1, "side") == 0)
			mine = "consumer";
		else if (strcmp(k + 1, "interface") == 0)
			mine = w->service;
		else if (strcmp(k + 1, "category") == 0)
			mine = "consumers";
		if (mine == NULL || strcmp(mine, v) != 0)
			return 0;
	}
	return 1;
}

/* Whether the rule configures this consumer. */
static int
match_consumer(const resil__url *u, const resil__ov_who *w)
{
	const char *side = resil__url_get(u, "side");
	const char *pa = resil__url_get(u, "providerAddresses");

	if (!rule_enabled(u) || !for_service(u, w) || u->port != NULL)
		return 0;
	if (resil__url_get(u, "configVersion") != NULL
	        ? side == NULL || strcmp(side, "consumer") != 0
	        : side != NULL && strcmp(side, "consumer") != 0)
		return 0;
	if (!is_any(u->host) && strcmp(u->host, w->host) != 0)
		return 0;
	if (pa != NULL && !in_list(pa, "0.0.0.0"))
		return 0;
	return app_ok(resil__url_get(u, "application"), w->application) &&
	    tilde_ok(u, w);
}

/* Whether the rule configures the provider pu. */
static int
match_provider(
    const resil__url *u, const resil__ov_who *w, const resil__url *pu)
{
	const char *side = resil__url_get(u, "side");
	const char *pa = resil__url_get(u, "providerAddresses");
	const char *app = w->application;

	if (!rule_enabled(u) || !for_service(u, w))
		return 0;
	if (side != NULL && strcmp(side, "provider") == 0) {
		/* What the provider would apply to itself and register
		 * again. */
		if (u->port != NULL &&
		    (pu->port == NULL || strcmp(u->port, pu->port) != 0))
			return 0;
		if (!is_any(u->host) && strcmp(u->host, pu->host) != 0)
			return 0;
		app = resil__url_get(pu, "application");
	} else if (u->port != NULL) {
		if (pu->port == NULL || strcmp(u->port, pu->port) != 0 ||
		    (!is_any(u->host) && strcmp(u->host, pu->host) != 0))
			return 0;
	} else if (!is_any(u->host) && strcmp(u->host, w->host) != 0) {
		return 0;
	}
	if (pa != NULL && !in_list(pa, "0.0.0.0") && !in_list(pa, pu->address))
		return 0;
	return app_ok(resil__url_get(u, "application"), app);
}

/* A rule aimed at providers only: its other keys have no consumer. */
static int
provider_only(const resil__url *u)
{
	const char *side = resil__url_get(u, "side");
	const char *pa = resil__url_get(u, "providerAddresses");

	return u->port != NULL ||
	    (side != NULL && strcmp(side, "provider") == 0) ||
	    (pa != NULL && !in_list(pa, "0.0.0.0"));
}

/* A value as Dubbo reads it: URL-decoded (mock=force:return+null); a
 * value that is no valid escape stays as it is. */
static char *
value_of(const resil_allocator *a, const char *v)
{
	char *out = NULL;
	size_t col;

	if (resil__url_decode(a, v, &out, &col) == RESIL_OK)
		return out;
	return resil__strdup(a, v);
}

/* ---- rule sets ----------------------------------------------------------
 */

static void
rules_free(const resil_allocator *a, resil__ov_rule *r, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		resil__strfree(a, r[i].name);
		resil__url_free(a, &r[i].u);
	}
	if (r != NULL)
		resil__free(a, r, n * sizeof(*r));
}

/* Dubbo's order of 2.7 configurators: by host (0.0.0.0 first), then
 * priority; then by name, so that a run replays. */
static int
by_host(const void *x, const void *y)
{
	const resil__ov_rule *a = x, *b = y;
	int c = strcmp(a->u.host, b->u.host);

	if (c != 0)
		return c;
	if (a->priority != b->priority)
		return a->priority < b->priority ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* One URL (decoded) into r: 1, 0 when it is left out (an event says
 * why), -1 for out of memory. */
static int
rule_of(const resil__ov_who *w, const char *url, const char *origin,
    resil__ov_rule *r)
{
	resil_diag why;
	resil_err err;
	const char *pr;
	char name[RESIL_DIAG_MAX];

	why.msg[0] = '\0';
	memset(r, 0, sizeof(*r));
	if (origin != NULL)
		(void)snprintf(name, sizeof(name), "%s: %s", origin, url);
	else
		(void)snprintf(name, sizeof(name), "%s", url);
	err = resil__url_parse(w->a, url, &r->u, &why);
	if (err == RESIL_E_NOMEM)
		return -1;
	if (err == RESIL_OK && strcmp(r->u.protocol, "override") != 0 &&
	    strcmp(r->u.protocol, "absent") != 0) {
		resil__url_free(w->a, &r->u);
		(void)snprintf(
		    why.msg, sizeof(why.msg), "not an override:// rule");
		err = RESIL_E_INVAL;
	}
	if (err != RESIL_OK) {
		w->emit(w->ctx, RESIL_SOURCE_BAD_OVERRIDE, name, why.msg, 0);
		return 0;
	}
	if ((r->name = resil__strdup(w->a, name)) == NULL) {
		resil__url_free(w->a, &r->u);
		return -1;
	}
	pr = resil__url_get(&r->u, "priority");
	r->priority = pr != NULL ? (int)strtol(pr, NULL, 10) : 0;
	return 1;
}

/* The decoded URLs of set: the node names of the 2.7 category, or what
 * one YAML text makes. */
static resil_err
urls_of(const resil__ov_who *w, int set, const char *const *items, size_t n,
    int decoded, char ***urls, size_t *nurls)
{
	size_t i, k = 0, col;
	char **u;
	resil_diag why;
	resil_err err;

	*urls = NULL;
	*nurls = 0;
	if (set != RESIL__OV_URLS) {
		if (n == 0 || items[0][0] == '\0')
			return RESIL_OK;
		why.msg[0] = '\0';
		err = resil__ov_yaml(w->a, items[0], urls, nurls, &why);
		if (err == RESIL_E_INVAL)
			w->emit(w->ctx, RESIL_SOURCE_BAD_OVERRIDE,
			    set == RESIL__OV_APP ? "application rule"
			                         : "service rule",
			    why.msg, 0);
		return err == RESIL_E_NOMEM ? err : RESIL_OK;
	}
	if (n == 0)
		return RESIL_OK;
	if ((u = resil__calloc(w->a, n * sizeof(*u))) == NULL)
		return RESIL_E_NOMEM;
	for (i = 0; i < n; i++) {
		if (decoded)
			err = (u[k] = resil__strdup(w->a, items[i])) == NULL
			    ? RESIL_E_NOMEM
			    : RESIL_OK;
		else
			err = resil__url_decode(w->a, items[i], &u[k], &col);
		if (err == RESIL_E_NOMEM)
			break;
		if (err != RESIL_OK) {
			(void)snprintf(why.msg, sizeof(why.msg),
			    "a malformed %%-escape at column %zu of the node "
			    "name",
			    col);
			w->emit(w->ctx, RESIL_SOURCE_BAD_OVERRIDE, items[i],
			    why.msg, 0);
			continue;
		}
		k++;
	}
	if (i < n) {
		while (k-- > 0)
			resil__strfree(w->a, u[k]);
		resil__free(w->a, u, n * sizeof(*u));
		return RESIL_E_NOMEM;
	}
	/* The array is n long; the unused tail is NULL. */
	*urls = u;
	*nurls = n;
	return RESIL_OK;
}

static uint64_t
fnv(uint64_t h, const char *s)
{
	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	return (h ^ 0xff) * UINT64_C(1099511628211);
}

static int
has_provider_key(const resil__url *u)
{
	size_t i;

	for (i = 0; i < u->nparams; i++)
		if (u->params[i].key != NULL && provider_key(u->params[i].key))
			return 1;
	return 0;
}

/* The digests of the rules with set's new rules r[0..k), and whether
 * they changed. */
static void
sign(resil__overrides *ov, const resil__ov_rule *r, size_t k, int set)
{
	uint64_t all = 0, prov = 0;
	size_t s, i;

	for (s = 0; s < RESIL__OV_NSETS; s++) {
		const resil__ov_rule *rs = (int)s == set ? r : ov->rules[s];
		size_t n = (int)s == set ? k : ov->n[s];

		/* No rule at all: 0, as before the first list. */
		for (i = 0; i < n; i++) {
			const char tag[2] = { (char)('0' + s), '\0' };

			all = fnv(fnv(all, tag), rs[i].name);
			if (has_provider_key(&rs[i].u))
				prov = fnv(fnv(prov, tag), rs[i].name);
		}
	}
	ov->changed_all = all != ov->sig_all;
	ov->changed_provider = prov != ov->sig_provider;
	ov->sig_all = all;
	ov->sig_provider = prov;
	if (ov->changed_provider)
		ov->provider_gen++;
}

resil_err
resil__ov_set(resil__overrides *ov, const resil__ov_who *w, int set,
    const char *const *items, size_t n, int decoded)
{
	char **urls = NULL;
	size_t nurls = 0, i, k = 0;
	resil__ov_rule *r = NULL;
	resil_err err;
	const char *origin = set == RESIL__OV_URLS ? NULL
	    : set == RESIL__OV_APP                 ? "application rule"
	                                           : "service rule";

	err = urls_of(w, set, items, n, decoded, &urls, &nurls);
	if (err != RESIL_OK)
		return err;
	if (nurls > 0 && (r = resil__calloc(w->a, nurls * sizeof(*r))) == NULL)
		err = RESIL_E_NOMEM;
	for (i = 0; i < nurls && err == RESIL_OK; i++) {
		int v;

		if (urls[i] == NULL)
			continue;
		v = rule_of(w, urls[i], origin, &r[k]);
		if (v < 0)
			err = RESIL_E_NOMEM;
		k += v > 0;
	}
	for (i = 0; i < nurls; i++)
		resil__strfree(w->a, urls[i]);
	if (urls != NULL)
		resil__free(w->a, urls, nurls * sizeof(*urls));
	if (err != RESIL_OK) {
		rules_free(w->a, r, nurls);
		return err;
	}
	/* The new set replaces the old one from here. */
	if (set == RESIL__OV_URLS && k > 1)
		qsort(r, k, sizeof(*r), by_host);
	sign(ov, r, k, set);
	rules_free(w->a, ov->rules[set], ov->n[set]);
	/* The array stays nurls long (its tail zeroed) for the free. */
	ov->rules[set] = r;
	ov->n[set] = k;
	if (r != NULL && k < nurls) {
		resil__ov_rule *exact = resil__calloc(w->a, k * sizeof(*r));

		if (k > 0 && exact == NULL) {
			rules_free(w->a, r, nurls);
			ov->rules[set] = NULL;
			ov->n[set] = 0;
			return RESIL_E_NOMEM;
		}
		if (k > 0)
			memcpy(exact, r, k * sizeof(*r));
		resil__free(w->a, r, nurls * sizeof(*r));
		ov->rules[set] = k > 0 ? exact : NULL;
	}
	return RESIL_OK;
}

/* ---- providers ----------------------------------------------------------
 */

int
resil__ov_provider(const resil__overrides *ov, const resil__ov_who *w,
    const char *decoded, char **out)
{
	const char *val[4] = { NULL, NULL, NULL, NULL };
	static const char *const keys[4] = { "weight", "disabled", "dubbo.tag",
		"warmup" };
	char buf[8192];
	size_t len, s, i, j;
	resil__url pu;
	int any = 0, w_;

	*out = NULL;
	for (s = 0; s < RESIL__OV_NSETS && !any; s++)
		any = ov->n[s] > 0;
	if (!any || resil__url_parse(w->a, decoded, &pu, NULL) != RESIL_OK)
		return 0;
	any = 0;
	for (s = 0; s < RESIL__OV_NSETS; s++)
		for (i = 0; i < ov->n[s]; i++) {
			const resil__url *u = &ov->rules[s][i].u;

			if (!match_provider(u, w, &pu))
				continue;
			for (j = 0; j < 4; j++) {
				const char *v = resil__url_get(u, keys[j]);

				if (v != NULL) {
					val[j] = v;
					any = 1;
				}
			}
		}
	if (!any) {
		resil__url_free(w->a, &pu);
		return 0;
	}
	w_ = snprintf(
	    buf, sizeof(buf), "%s://%s/%s?", pu.protocol, pu.address, pu.path);
	len = w_ > 0 ? (size_t)w_ : 0;
	for (i = 0; i < pu.nparams && len < sizeof(buf); i++) {
		const char *k = pu.params[i].key;
		int skip = 0;

		if (k == NULL)
			continue;
		for (j = 0; j < 4; j++)
			skip |= val[j] != NULL && strcmp(k, keys[j]) == 0;
		if (!skip)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len,
			    "%s=%s&", k, pu.params[i].value);
	}
	for (j = 0; j < 4 && len < sizeof(buf); j++) {
		char *v;

		if (val[j] == NULL)
			continue;
		if ((v = value_of(w->a, val[j])) == NULL) {
			resil__url_free(w->a, &pu);
			return -1;
		}
		len += (size_t)snprintf(
		    buf + len, sizeof(buf) - len, "%s=%s&", keys[j], v);
		resil__strfree(w->a, v);
	}
	resil__url_free(w->a, &pu);
	if (len >= sizeof(buf))
		return 0;    /* too long to rewrite: as it is */
	buf[len - 1] = '\0'; /* the last '&' (or the '?') */
	if ((*out = resil__strdup(w->a, buf)) == NULL)
		return -1;
	return 1;
}

/* ---- the pipeline -------------------------------------------------------
 */

typedef struct taken {
	const char *key; /* in a rule's URL */
	char *value;
} taken;

typedef struct applying {
	resil__overrides *ov;
	const resil__ov_who *w;
	resil_config *conf;
	taken *t;
	size_t nt, cap;
} applying;

/* A new configuration: the base, then what was taken. NULL when the
 * base does not parse any more (cannot happen: it parsed at attach) or
 * out of memory. */
static resil_config *
rebuild(applying *ap)
{
	resil_config *c = NULL;
	size_t i;

	if (ap->ov->ops->parse(&c, ap->ov->base != NULL ? ap->ov->base : "",
	        "configuration", ap->w->a, NULL) != RESIL_OK)
		return NULL;
	for (i = 0; i < ap->nt; i++)
		(void)ap->ov->ops->set(c, ap->t[i].key, ap->t[i].value, NULL);
	return c;
}

/* Try key=value of rule over what is taken: 1 taken, 0 refused (the
 * event is sent), -1 out of memory. */
static int
try_key(
    applying *ap, const resil__ov_rule *r, const char *key, const char *raw)
{
	char *v = value_of(ap->w->a, raw);
	char msg[RESIL_DIAG_MAX + 64];
	resil_diag d;
	resil_err err;

	if (v == NULL)
		return -1;
	d.msg[0] = '\0';
	err = ap->ov->ops->set(ap->conf, key, v, &d);
	if (err == RESIL_OK) {
		resil_pipeline_config pc = *ap->ov->ops->pipeline(ap->conf);

		if (resil_chaos_same(
		        pc.chaos, resil_pipeline_chaos(ap->ov->p, NULL)))
			pc.chaos = NULL;
		err = resil__pipeline_reload_dry(ap->ov->p, &pc, &d);
		if (err != RESIL_OK) {
			ap->ov->ops->free(ap->conf);
			ap->conf = rebuild(ap);
			if (ap->conf == NULL) {
				resil__strfree(ap->w->a, v);
				return -1;
			}
		}
	}
	if (err == RESIL_E_NOMEM) {
		resil__strfree(ap->w->a, v);
		return -1;
	}
	if (err != RESIL_OK) {
		(void)snprintf(msg, sizeof(msg),
		    "%s=%s: refused, as a reload refuses it: %s", key, v,
		    d.msg);
		ap->w->emit(
		    ap->w->ctx, RESIL_SOURCE_BAD_OVERRIDE, r->name, msg, 0);
		resil__strfree(ap->w->a, v);
		return 0;
	}
	if (ap->nt == ap->cap) {
		size_t cap = ap->cap > 0 ? ap->cap * 2 : 8;
		taken *t = resil__calloc(ap->w->a, cap * sizeof(*t));

		if (t == NULL) {
			resil__strfree(ap->w->a, v);
			return -1;
		}
		if (ap->nt > 0)
			memcpy(t, ap->t, ap->nt * sizeof(*t));
		if (ap->t != NULL)
			resil__free(ap->w->a, ap->t, ap->cap * sizeof(*t));
		ap->t = t;
		ap->cap = cap;
	}
	ap->t[ap->nt].key = key;
	ap->t[ap->nt].value = v;
	ap->nt++;
	return 1;
}

/* The consumer keys of one matching rule. -1 for out of memory. */
static int
apply_rule(applying *ap, const resil__ov_rule *r, size_t *nkeys)
{
	char said[160], msg[RESIL_DIAG_MAX + 200];
	size_t i, len = 0, n = 0;
	int only = provider_only(&r->u);

	said[0] = '\0';
	for (i = 0; i < r->u.nparams; i++) {
		const char *k = r->u.params[i].key;
		int v;

		if (k == NULL || condition_key(k) || provider_key(k))
			continue;
		if (only) {
			(void)snprintf(msg, sizeof(msg),
			    "%s: refused: a rule for providers sets weight, "
			    "disabled, dubbo.tag or warmup only",
			    k);
			ap->w->emit(ap->w->ctx, RESIL_SOURCE_BAD_OVERRIDE,
			    r->name, msg, 0);
			continue;
		}
		if ((v = try_key(ap, r, k, r->u.params[i].value)) < 0)
			return -1;
		if (v == 0)
			continue;
		n++;
		if (len < sizeof(said))
			len += (size_t)snprintf(said + len, sizeof(said) - len,
			    "%s%s=%s", n > 1 ? ", " : "", k,
			    ap->t[ap->nt - 1].value);
	}
	if (n > 0) {
		(void)snprintf(msg, sizeof(msg), "applied: %s", said);
		ap->w->emit(
		    ap->w->ctx, RESIL_SOURCE_OVERRIDE, r->name, msg, n);
	}
	*nkeys += n;
	return 0;
}

void
resil__ov_apply(resil__overrides *ov, const resil__ov_who *w)
{
	applying ap;
	size_t s, i, nkeys = 0, nrules = 0;
	resil_diag d;
	resil_err err;
	int oom = 0;
	char msg[RESIL_DIAG_MAX + 64];

	if (ov->p == NULL)
		return; /* applied when a pipeline is attached */
	memset(&ap, 0, sizeof(ap));
	ap.ov = ov;
	ap.w = w;
	if ((ap.conf = rebuild(&ap)) == NULL)
		oom = 1;
	for (s = 0; s < RESIL__OV_NSETS && !oom; s++)
		for (i = 0; i < ov->n[s] && !oom; i++) {
			const resil__ov_rule *r = &ov->rules[s][i];
			size_t before = nkeys;

			if (!match_consumer(&r->u, w) && !provider_only(&r->u))
				continue;
			oom = apply_rule(&ap, r, &nkeys) != 0;
			nrules += nkeys > before;
		}
	d.msg[0] = '\0';
	if (!oom) {
		/* As resil_pipeline_reload_string(): the running chaos stays
		 * when the text names the same. */
		resil_pipeline_config pc = *ov->ops->pipeline(ap.conf);

		if (resil_chaos_same(
		        pc.chaos, resil_pipeline_chaos(ov->p, NULL)))
			pc.chaos = NULL;
		err = resil_pipeline_reload(ov->p, &pc, &d);
	} else
		err = RESIL_E_NOMEM;
	if (err == RESIL_OK) {
		(void)snprintf(msg, sizeof(msg),
		    "%zu setting%s of %zu rule%s over the configuration",
		    nkeys, nkeys == 1 ? "" : "s", nrules,
		    nrules == 1 ? "" : "s");
		w->emit(w->ctx, RESIL_SOURCE_OVERRIDE, "", msg, nkeys);
	} else {
		(void)snprintf(msg, sizeof(msg),
		    "the override rules could not be applied: %s",
		    err == RESIL_E_NOMEM ? "out of memory" : d.msg);
		w->emit(w->ctx, RESIL_SOURCE_BAD_OVERRIDE, "", msg, 0);
	}
	for (i = 0; i < ap.nt; i++)
		resil__strfree(w->a, ap.t[i].value);
	if (ap.t != NULL)
		resil__free(w->a, ap.t, ap.cap * sizeof(*ap.t));
	if (ap.conf != NULL)
		ov->ops->free(ap.conf);
}

resil_err
resil__ov_attach(resil__overrides *ov, const resil__ov_who *w,
    resil_pipeline *p, const resil_config *base, const resil__ov_conf_ops *ops)
{
	size_t n = base != NULL ? ops->count(base) : 0, i, len = 1;
	resil_config_setting st;
	char *text;

	for (i = 0; i < n; i++)
		if (ops->entry(base, i, &st) == RESIL_OK)
			len += strlen(st.key) + strlen(st.value) + 2;
	if ((text = resil__alloc(w->a, len)) == NULL)
		return RESIL_E_NOMEM;
	text[0] = '\0';
	for (i = 0, len = 0; i < n; i++)
		if (ops->entry(base, i, &st) == RESIL_OK)
			len += (size_t)sprintf(
			    text + len, "%s=%s\n", st.key, st.value);
	resil__strfree(w->a, ov->base);
	ov->base = text;
	ov->p = p;
	ov->ops = ops;
	return RESIL_OK;
}

void
resil__ov_free(resil__overrides *ov, const resil_allocator *a)
{
	size_t s;

	for (s = 0; s < RESIL__OV_NSETS; s++)
		rules_free(a, ov->rules[s], ov->n[s]);
	resil__strfree(a, ov->base);
	memset(ov, 0, sizeof(*ov));
}

/*
 * Dubbo 3's override rules as the config center holds them (YAML, read
 * with libyaml; never a parser of our own), turned into the override URLs
 * Dubbo's ConfigParser.parseConfigurators makes of them, so that one
 * matcher (lib/configurator.c) serves both forms:
 *
 *   configVersion: v2.7 | v3.0
 *   scope: service | application
 *   key: SERVICE (service scope) | APPLICATION (application scope)
 *   enabled: true
 *   configs:
 *   - side: consumer | provider
 *     addresses: [0.0.0.0]          # none: 0.0.0.0
 *     providerAddresses: [10.0.0.1:20880]
 *     applications: [app]           # service scope
 *     services: [SERVICE]           # application scope; none: *
 *     enabled: true
 *     parameters: { timeout: 3000, mock: "force:return null" }
 *
 * gives, per address (and per application or service),
 * override://ADDRESS/SERVICE?category=dynamicconfigurators&side=..&
 * configVersion=..&enabled=..&providerAddresses=..&application=..&K=V,
 * each value URL-encoded (the matcher decodes every value).
 */
#include "configurator.h"

#include <stdio.h>
#include <string.h>

#include <yaml.h>

typedef struct ybuild {
	const resil_allocator *a;
	yaml_document_t *doc;
	char **urls;
	size_t n, cap;
	resil_diag *why;
} ybuild;

static const char *
scalar(yaml_node_t *nd)
{
	if (nd == NULL || nd->type != YAML_SCALAR_NODE)
		return NULL;
	return (const char *)nd->data.scalar.value;
}

static yaml_node_t *
get(yaml_document_t *d, yaml_node_t *map, const char *key)
{
	yaml_node_pair_t *pr;

	if (map == NULL || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (pr = map->data.mapping.pairs.start;
	     pr < map->data.mapping.pairs.top; pr++) {
		const char *k = scalar(yaml_document_get_node(d, pr->key));

		if (k != NULL && strcmp(k, key) == 0)
			return yaml_document_get_node(d, pr->value);
	}
	return NULL;
}

/* The items of a list (a sequence of scalars, or one scalar): count, and
 * the i-th. */
static size_t
items(yaml_node_t *nd)
{
	if (nd == NULL)
		return 0;
	if (nd->type == YAML_SCALAR_NODE)
		return 1;
	if (nd->type != YAML_SEQUENCE_NODE)
		return 0;
	return (size_t)(nd->data.sequence.items.top -
	    nd->data.sequence.items.start);
}

static const char *
item(yaml_document_t *d, yaml_node_t *nd, size_t i)
{
	if (nd->type == YAML_SCALAR_NODE)
		return scalar(nd);
	return scalar(
	    yaml_document_get_node(d, nd->data.sequence.items.start[i]));
}

static int
truthy(const char *s, int dflt)
{
	if (s == NULL)
		return dflt;
	return strcmp(s, "false") != 0 && strcmp(s, "False") != 0 &&
	    strcmp(s, "FALSE") != 0;
}

/* buf += &k=URL.encode(v); 0, or -1 when it does not fit or no memory. */
static int
addp(const resil_allocator *a, char *buf, size_t cap, size_t *len,
    const char *k, const char *v)
{
	char *e = resil__url_encode(a, v);
	int w;

	if (e == NULL)
		return -1;
	w = snprintf(buf + *len, cap - *len, "&%s=%s", k, e);
	resil__strfree(a, e);
	if (w < 0 || (size_t)w >= cap - *len)
		return -1;
	*len += (size_t)w;
	return 0;
}

static resil_err
push(ybuild *b, const char *url)
{
	if (b->n == b->cap) {
		size_t cap = b->cap > 0 ? b->cap * 2 : 8;
		char **u = resil__calloc(b->a, cap * sizeof(*u));

		if (u == NULL)
			return RESIL_E_NOMEM;
		if (b->n > 0)
			memcpy(u, b->urls, b->n * sizeof(*u));
		if (b->urls != NULL)
			resil__free(b->a, b->urls, b->cap * sizeof(*u));
		b->urls = u;
		b->cap = cap;
	}
	if ((b->urls[b->n] = resil__strdup(b->a, url)) == NULL)
		return RESIL_E_NOMEM;
	b->n++;
	return RESIL_OK;
}

/* The parameters and the common keys of one config item into buf. */
static resil_err
item_params(ybuild *b, yaml_node_t *it, const char *cv, int enabled,
    const char *category, size_t idx, char *buf, size_t cap, size_t *len)
{
	yaml_document_t *d = b->doc;
	yaml_node_t *params = get(d, it, "parameters");
	yaml_node_t *pa = get(d, it, "providerAddresses");
	const char *side = scalar(get(d, it, "side"));
	yaml_node_pair_t *pr;
	char joined[512];
	size_t i, jl = 0;

	if (params == NULL || params->type != YAML_MAPPING_NODE ||
	    params->data.mapping.pairs.top == params->data.mapping.pairs.start)
		return resil__diagf(b->why, RESIL_E_INVAL,
		    "configs[%zu]: no parameters (Dubbo: \"please specify at "
		    "least one parameter you want to change in the rule\")",
		    idx);
	if (addp(b->a, buf, cap, len, "category", category) != 0 ||
	    (side != NULL && addp(b->a, buf, cap, len, "side", side) != 0) ||
	    addp(b->a, buf, cap, len, "configVersion", cv) != 0 ||
	    addp(b->a, buf, cap, len, "enabled",
	        enabled && truthy(scalar(get(d, it, "enabled")), 1)
	            ? "true"
	            : "false") != 0)
		return RESIL_E_NOMEM;
	for (i = 0; i < items(pa); i++) {
		const char *s = item(d, pa, i);
		int w = snprintf(joined + jl, sizeof(joined) - jl, "%s%s",
		    i > 0 ? "," : "", s != NULL ? s : "");

		if (w < 0 || (size_t)w >= sizeof(joined) - jl)
			return resil__diagf(b->why, RESIL_E_INVAL,
			    "configs[%zu]: providerAddresses: too long", idx);
		jl += (size_t)w;
	}
	if (jl > 0 &&
	    addp(b->a, buf, cap, len, "providerAddresses", joined) != 0)
		return RESIL_E_NOMEM;
	for (pr = params->data.mapping.pairs.start;
	     pr < params->data.mapping.pairs.top; pr++) {
		const char *k = scalar(yaml_document_get_node(d, pr->key));
		const char *v = scalar(yaml_document_get_node(d, pr->value));

		if (k == NULL || v == NULL || k[0] == '\0')
			return resil__diagf(b->why, RESIL_E_INVAL,
			    "configs[%zu].parameters: %s is not key: value "
			    "(a scalar)",
			    idx, k != NULL ? k : "an entry");
		if (addp(b->a, buf, cap, len, k, v) != 0)
			return resil__diagf(b->why, RESIL_E_INVAL,
			    "configs[%zu].parameters: too long", idx);
	}
	return RESIL_OK;
}

/* The service of a key: [group/]service[:version] (Dubbo's
 * ConfigParser.appendService: the group and version become the URL's
 * group= and version=), or the config center's group:service:version.
 * out: "service?" and those parameters, each followed by '&'. */
static void
service_of(const char *key, char *out, size_t n)
{
	const char *slash = strchr(key, '/');
	const char *s = slash != NULL ? slash + 1 : key;
	const char *c1 = strchr(s, ':');
	const char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
	int g = slash != NULL ? (int)(slash - key) : 0;

	if (c2 != NULL) /* group:service:version */
		(void)snprintf(out, n, "%.*s?%s%.*s%s%s%s", (int)(c2 - c1 - 1),
		    c1 + 1, c1 > s ? "group=" : "", (int)(c1 - s), s,
		    c1 > s ? "&" : "", c2[1] != '\0' ? "version=" : "",
		    c2[1] != '\0' ? c2 + 1 : "");
	else if (c1 != NULL)
		(void)snprintf(out, n, "%.*s?%s%.*s%sversion=%s",
		    (int)(c1 - s), s, g > 0 ? "group=" : "", g, key,
		    g > 0 ? "&" : "", c1 + 1);
	else
		(void)snprintf(
		    out, n, "%s?%s%.*s", s, g > 0 ? "group=" : "", g, key);
	if (strchr(out, '=') != NULL) {
		size_t len = strlen(out);

		if (len + 1 < n) {
			out[len] = '&';
			out[len + 1] = '\0';
		}
	}
}

/* One config item: a URL per address and per application (service
 * scope) or per service (application scope). */
static resil_err
one_item(ybuild *b, yaml_node_t *it, size_t idx, int app_scope,
    const char *key, const char *cv, int enabled)
{
	yaml_document_t *d = b->doc;
	yaml_node_t *addrs = get(d, it, "addresses");
	yaml_node_t *multi =
	    get(d, it, app_scope ? "services" : "applications");
	size_t na = items(addrs), nm = items(multi), i, j;
	char svc[256], params[2048], url[3072];
	size_t plen = 0;
	resil_err err;

	if (it == NULL || it->type != YAML_MAPPING_NODE)
		return resil__diagf(
		    b->why, RESIL_E_INVAL, "configs[%zu]: not a mapping", idx);
	params[0] = '\0';
	err = item_params(b, it, cv, enabled,
	    app_scope ? "appdynamicconfigurators" : "dynamicconfigurators",
	    idx, params, sizeof(params), &plen);
	if (err != RESIL_OK)
		return err;
	for (i = 0; i < (na > 0 ? na : 1); i++) {
		const char *addr = na > 0 ? item(d, addrs, i) : "0.0.0.0";

		for (j = 0; j < (nm > 0 ? nm : 1); j++) {
			const char *m = nm > 0 ? item(d, multi, j) : NULL;
			int w;

			if (app_scope)
				service_of(
				    m != NULL ? m : "*", svc, sizeof(svc));
			else
				service_of(key, svc, sizeof(svc));
			w = snprintf(url, sizeof(url),
			    "override://%s/%s%s%s%s", addr != NULL ? addr : "",
			    svc, params + 1,
			    app_scope || m != NULL ? "&application=" : "",
			    app_scope       ? key
			        : m != NULL ? m
			                    : "");
			if (w < 0 || (size_t)w >= sizeof(url))
				return resil__diagf(b->why, RESIL_E_INVAL,
				    "configs[%zu]: too long", idx);
			if ((err = push(b, url)) != RESIL_OK)
				return err;
		}
	}
	return RESIL_OK;
}

static resil_err
from_doc(ybuild *b)
{
	yaml_document_t *d = b->doc;
	yaml_node_t *root = yaml_document_get_root_node(d), *configs;
	const char *scope, *key, *cv;
	size_t i;
	resil_err err;
	int enabled;

	if (root == NULL)
		return resil__diagf(b->why, RESIL_E_INVAL, "an empty rule");
	if (root->type != YAML_MAPPING_NODE)
		return resil__diagf(
		    b->why, RESIL_E_INVAL, "not a mapping of rule fields");
	scope = scalar(get(d, root, "scope"));
	key = scalar(get(d, root, "key"));
	cv = scalar(get(d, root, "configVersion"));
	configs = get(d, root, "configs");
	if (scope == NULL ||
	    (strcmp(scope, "service") != 0 &&
	        strcmp(scope, "application") != 0))
		return resil__diagf(b->why, RESIL_E_INVAL,
		    "scope: \"%s\" is not service or application",
		    scope != NULL ? scope : "");
	if (key == NULL || key[0] == '\0')
		return resil__diagf(b->why, RESIL_E_INVAL, "key: required");
	if (configs == NULL || configs->type != YAML_SEQUENCE_NODE)
		return resil__diagf(
		    b->why, RESIL_E_INVAL, "configs: required (a list)");
	enabled = truthy(scalar(get(d, root, "enabled")), 1);
	for (i = 0; i < items(configs); i++) {
		yaml_node_t *it = yaml_document_get_node(
		    d, configs->data.sequence.items.start[i]);

		err = one_item(b, it, i, strcmp(scope, "application") == 0,
		    key, cv != NULL ? cv : "v2.7", enabled);
		if (err != RESIL_OK)
			return err;
	}
	return RESIL_OK;
}

resil_err
resil__ov_yaml(const resil_allocator *a, const char *text, char ***urls,
    size_t *n, resil_diag *why)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	ybuild b;
	resil_err err;
	size_t i;

	memset(&b, 0, sizeof(b));
	b.a = a;
	b.why = why;
	*urls = NULL;
	*n = 0;
	if (!yaml_parser_initialize(&parser))
		return RESIL_E_NOMEM;
	yaml_parser_set_input_string(
	    &parser, (const unsigned char *)text, strlen(text));
	if (!yaml_parser_load(&parser, &doc)) {
		err = parser.error == YAML_MEMORY_ERROR
		    ? RESIL_E_NOMEM
		    : resil__diagf(why, RESIL_E_INVAL, "YAML: %s at line %zu",
		          parser.problem != NULL ? parser.problem : "error",
		          parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		return err;
	}
	b.doc = &doc;
	err = from_doc(&b);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (err != RESIL_OK) {
		for (i = 0; i < b.n; i++)
			resil__strfree(a, b.urls[i]);
		if (b.urls != NULL)
			resil__free(a, b.urls, b.cap * sizeof(char *));
		return err;
	}
	/* Exactly n entries, as the caller frees them. */
	if (b.n > 0 && b.n < b.cap) {
		char **u = resil__calloc(a, b.n * sizeof(char *));

		if (u == NULL) {
			for (i = 0; i < b.n; i++)
				resil__strfree(a, b.urls[i]);
			resil__free(a, b.urls, b.cap * sizeof(char *));
			return RESIL_E_NOMEM;
		}
		memcpy(u, b.urls, b.n * sizeof(char *));
		resil__free(a, b.urls, b.cap * sizeof(char *));
		b.urls = u;
	}
	*urls = b.urls;
	*n = b.n;
	return RESIL_OK;
}

/*
 * Dubbo 3's routing rules as a config center stores them, YAML read with
 * libyaml: condition rules (SERVICE.condition-router) become the same
 * resil_condition objects the text rules make, tag rules
 * (APP.tag-router) a resil_tag_rule (lib/router_internal.h). libyaml
 * builds the document (its own malloc); the rules come from the
 * caller's allocator. Every field is checked: an unknown or mistyped one
 * is refused with its line and column, never ignored.
 */
#include <resil/router.h>

#include "router_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include <yaml.h>

typedef struct ydoc {
	yaml_document_t doc;
	const char *name;
	resil_diag *diag;
} ydoc;

static resil_err yerr(const ydoc *d, const yaml_node_t *at, const char *fmt,
    ...) RESIL__PRINTF(3, 4);

/* `rule "NAME": line L column C: what`. */
static resil_err
yerr(const ydoc *d, const yaml_node_t *at, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (at == NULL)
		return resil__diagf(
		    d->diag, RESIL_E_INVAL, "rule \"%s\": %s", d->name, what);
	return resil__diagf(d->diag, RESIL_E_INVAL,
	    "rule \"%s\": line %zu column %zu: %s", d->name,
	    (size_t)at->start_mark.line + 1, (size_t)at->start_mark.column + 1,
	    what);
}

/* Load text into d->doc (a mapping at its root). */
static resil_err
load(ydoc *d, const char *text)
{
	yaml_parser_t p;
	yaml_node_t *root;
	resil_err err = RESIL_OK;

	if (!yaml_parser_initialize(&p))
		return resil__diagf(d->diag, RESIL_E_NOMEM,
		    "rule \"%s\": out of memory", d->name);
	yaml_parser_set_input_string(
	    &p, (const unsigned char *)text, strlen(text));
	if (!yaml_parser_load(&p, &d->doc)) {
		err = p.error == YAML_MEMORY_ERROR
		    ? resil__diagf(d->diag, RESIL_E_NOMEM,
		          "rule \"%s\": out of memory", d->name)
		    : resil__diagf(d->diag, RESIL_E_INVAL,
		          "rule \"%s\": line %zu column %zu: %s", d->name,
		          (size_t)p.problem_mark.line + 1,
		          (size_t)p.problem_mark.column + 1,
		          p.problem != NULL ? p.problem : "not YAML");
		yaml_parser_delete(&p);
		return err;
	}
	yaml_parser_delete(&p);
	root = yaml_document_get_root_node(&d->doc);
	if (root == NULL)
		err = yerr(d, NULL, "empty");
	else if (root->type != YAML_MAPPING_NODE)
		err = yerr(d, root, "expected a mapping of the rule's fields");
	if (err != RESIL_OK)
		yaml_document_delete(&d->doc);
	return err;
}

static yaml_node_t *
node(ydoc *d, int id)
{
	return yaml_document_get_node(&d->doc, id);
}

/* The scalar's text, or NULL (with the error said) for another node. */
static const char *
scalar(ydoc *d, const yaml_node_t *n, const char *field, resil_err *err)
{
	if (n == NULL || n->type != YAML_SCALAR_NODE) {
		*err = yerr(d, n, "%s: expected a scalar", field);
		return NULL;
	}
	/* A NUL inside the scalar would cut it short silently. */
	if (strlen((const char *)n->data.scalar.value) !=
	    n->data.scalar.length) {
		*err = yerr(d, n, "%s: a NUL byte in the value", field);
		return NULL;
	}
	return (const char *)n->data.scalar.value;
}

static resil_err
boolean(ydoc *d, const yaml_node_t *n, const char *field, int *out)
{
	resil_err err = RESIL_OK;
	const char *v = scalar(d, n, field, &err);

	if (v == NULL)
		return err;
	if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 ||
	    strcmp(v, "TRUE") == 0)
		*out = 1;
	else if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 ||
	    strcmp(v, "FALSE") == 0)
		*out = 0;
	else
		return yerr(d, n, "%s: \"%s\" is not true or false", field, v);
	return RESIL_OK;
}

static resil_err
integer(ydoc *d, const yaml_node_t *n, const char *field, int *out)
{
	resil_err err = RESIL_OK;
	const char *v = scalar(d, n, field, &err);
	char *end;
	long x;

	if (v == NULL)
		return err;
	x = strtol(v, &end, 10);
	if (v[0] == '\0' || *end != '\0' || x < -1000000 || x > 1000000)
		return yerr(d, n,
		    "%s: \"%s\" is not a whole number in -1000000..1000000",
		    field, v);
	*out = (int)x;
	return RESIL_OK;
}

/* A string field into buf[cap]; too long is refused. */
static resil_err
text(ydoc *d, const yaml_node_t *n, const char *field, char *buf, size_t cap)
{
	resil_err err = RESIL_OK;
	const char *v = scalar(d, n, field, &err);

	if (v == NULL)
		return err;
	if (strlen(v) >= cap)
		return yerr(
		    d, n, "%s: longer than %zu characters", field, cap - 1);
	memcpy(buf, v, strlen(v) + 1);
	return RESIL_OK;
}

/* One of the fields every rule has (AbstractRouterRule): 1 when key was
 * one (read into info, or an error in *err), 0 when it is not. */
static int
common_field(ydoc *d, const char *key, const yaml_node_t *v,
    resil_rule_info *info, resil_err *err)
{
	char scope[16];

	if (strcmp(key, "enabled") == 0)
		*err = boolean(d, v, key, &info->enabled);
	else if (strcmp(key, "force") == 0)
		*err = boolean(d, v, key, &info->force);
	else if (strcmp(key, "runtime") == 0)
		*err = boolean(d, v, key, &info->runtime);
	else if (strcmp(key, "priority") == 0)
		*err = integer(d, v, key, &info->priority);
	else if (strcmp(key, "key") == 0)
		*err = text(d, v, key, info->key, sizeof(info->key));
	else if (strcmp(key, "configVersion") == 0) {
		*err = text(d, v, key, info->config_version,
		    sizeof(info->config_version));
		/* v3.1's conditions are mappings (from/to): another
		 * grammar, refused rather than misread. */
		if (*err == RESIL_OK &&
		    strncmp(info->config_version, "v3.1", 4) == 0)
			*err = yerr(d, v,
			    "configVersion \"%s\" is not supported (v3.0, "
			    "v2.7)",
			    info->config_version);
	} else if (strcmp(key, "scope") == 0) {
		*err = text(d, v, key, scope, sizeof(scope));
		if (*err != RESIL_OK)
			return 1;
		if (strcmp(scope, "service") == 0)
			info->scope = 0;
		else if (strcmp(scope, "application") == 0)
			info->scope = 1;
		else
			*err = yerr(d, v,
			    "scope: \"%s\" is not service or application",
			    scope);
	} else
		return 0;
	return 1;
}

static void
info_init(resil_rule_info *info)
{
	memset(info, 0, sizeof(*info));
	info->enabled = 1;
	info->runtime = 1;
}

#define PAIRS(n) \
	((size_t)((n)->data.mapping.pairs.top - (n)->data.mapping.pairs.start))
#define ITEMS(n)                                 \
	((size_t)((n)->data.sequence.items.top - \
	    (n)->data.sequence.items.start))

/* Load yaml and walk the root's fields, the same for both kinds of rule:
 * the common ones into *ri, the rule's own list (the field named list:
 * conditions or tags) into *lv. Any other field of a kind rule, or no
 * list, is refused. On success d->doc is the caller's to delete; on an
 * error it is gone. */
static resil_err
read_rule(ydoc *d, const char *yaml, const char *list, const char *kind,
    resil_rule_info *ri, const yaml_node_t **lv)
{
	const yaml_node_t *root;
	resil_err err;
	size_t i;

	if ((err = load(d, yaml)) != RESIL_OK)
		return err;
	info_init(ri);
	*lv = NULL;
	root = yaml_document_get_root_node(&d->doc);
	for (i = 0; i < PAIRS(root) && err == RESIL_OK; i++) {
		const yaml_node_pair_t *pr =
		    &root->data.mapping.pairs.start[i];
		const yaml_node_t *k = node(d, pr->key),
		                  *v = node(d, pr->value);
		const char *key = scalar(d, k, "a field name", &err);

		if (key == NULL)
			break;
		if (common_field(d, key, v, ri, &err))
			continue;
		if (strcmp(key, list) == 0)
			*lv = v;
		else
			err = yerr(d, k, "unknown field \"%s\" of a %s rule",
			    key, kind);
	}
	if (err == RESIL_OK && *lv == NULL)
		err = yerr(d, root, "no %s", list);
	if (err != RESIL_OK)
		yaml_document_delete(&d->doc);
	return err;
}

/* ---- condition rules ---------------------------------------------------- */

void
resil_conditions_free(
    resil_condition **rules, size_t n, const resil_allocator *alloc)
{
	size_t i;

	if (rules == NULL)
		return;
	for (i = 0; i < n; i++)
		resil_condition_free(rules[i]);
	resil__free(
	    resil__allocator(alloc), rules, n * sizeof(resil_condition *));
}

/* The conditions sequence into *out (n rules). */
static resil_err
conditions(ydoc *d, const yaml_node_t *seq, int force,
    const resil_allocator *alloc, resil_condition ***out, size_t *nout)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil_condition **rules;
	resil_err err = RESIL_OK;
	size_t i, n;

	if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
		return yerr(d, seq, "conditions: expected a list of rules");
	n = ITEMS(seq);
	if (n == 0)
		return yerr(d, seq, "conditions: no rule");
	if ((rules = resil__calloc(a, n * sizeof(resil_condition *))) == NULL)
		return RESIL_E_NOMEM;
	for (i = 0; i < n && err == RESIL_OK; i++) {
		const yaml_node_t *it =
		    node(d, seq->data.sequence.items.start[i]);
		const char *t = scalar(d, it, "conditions", &err);
		resil_diag why;

		if (t == NULL)
			break;
		why.msg[0] = '\0';
		err = resil_condition_parse(&rules[i], t, force, alloc, &why);
		if (err == RESIL_E_INVAL)
			err = yerr(d, it, "conditions[%zu]: %s", i, why.msg);
	}
	if (err != RESIL_OK) {
		resil_conditions_free(rules, n, alloc);
		return err;
	}
	*out = rules;
	*nout = n;
	return RESIL_OK;
}

resil_err
resil_condition_parse_yaml(resil_condition ***out, size_t *n, const char *yaml,
    const char *name, const resil_allocator *alloc, resil_rule_info *info,
    resil_diag *diag)
{
	resil_rule_info ri;
	const yaml_node_t *conds;
	resil_err err;
	ydoc d;

	d.name = name != NULL ? name : "rule";
	d.diag = diag;
	if (out == NULL || n == NULL || yaml == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "rule \"%s\": NULL argument", d.name);
	err = read_rule(&d, yaml, "conditions", "condition", &ri, &conds);
	if (err != RESIL_OK)
		return err;
	if (!ri.enabled) {
		*out = NULL;
		*n = 0;
	} else
		err = conditions(&d, conds, ri.force, alloc, out, n);
	yaml_document_delete(&d.doc);
	if (err == RESIL_OK && info != NULL)
		*info = ri;
	return err;
}

/* ---- tag rules ---------------------------------------------------------- */

static void
tag_free(const resil_allocator *a, resil__tag *t)
{
	size_t i;

	resil__strfree(a, t->name);
	for (i = 0; t->addrs != NULL && i < t->naddrs; i++)
		resil__strfree(a, t->addrs[i]);
	if (t->addrs != NULL)
		resil__free(a, t->addrs, t->naddrs * sizeof(char *));
	for (i = 0; t->match != NULL && i < t->nmatch; i++) {
		resil__strfree(a, t->match[i].key);
		resil__strfree(a, t->match[i].value);
	}
	if (t->match != NULL)
		resil__free(a, t->match, t->nmatch * sizeof(*t->match));
}

void
resil_tag_rule_free(resil_tag_rule *r)
{
	resil_allocator a;
	size_t i;

	if (r == NULL)
		return;
	a = r->a;
	for (i = 0; r->tags != NULL && i < r->ntags; i++)
		tag_free(&a, &r->tags[i]);
	if (r->tags != NULL)
		resil__free(&a, r->tags, r->ntags * sizeof(*r->tags));
	resil__strfree(&a, r->key);
	resil__strfree(&a, r->text);
	resil__free(&a, r, sizeof(*r));
}

size_t
resil_tag_rule_count(const resil_tag_rule *r)
{
	return r != NULL ? r->ntags : 0;
}

/* A scalar copied with the rule's allocator; NULL with *err set. */
static char *
dup_scalar(ydoc *d, const resil_allocator *a, const yaml_node_t *n,
    const char *field, resil_err *err)
{
	const char *v = scalar(d, n, field, err);
	char *s;

	if (v == NULL)
		return NULL;
	if ((s = resil__strdup(a, v)) == NULL)
		*err = RESIL_E_NOMEM;
	return s;
}

static resil_err
addresses(
    ydoc *d, const resil_allocator *a, const yaml_node_t *seq, resil__tag *t)
{
	resil_err err = RESIL_OK;
	size_t i;

	if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
		return yerr(d, seq, "tags[%s].addresses: expected a list",
		    t->name != NULL ? t->name : "");
	if (ITEMS(seq) == 0)
		return RESIL_OK;
	t->addrs = resil__calloc(a, ITEMS(seq) * sizeof(char *));
	if (t->addrs == NULL)
		return RESIL_E_NOMEM;
	t->naddrs = ITEMS(seq);
	for (i = 0; i < t->naddrs && err == RESIL_OK; i++) {
		const yaml_node_t *it =
		    node(d, seq->data.sequence.items.start[i]);

		t->addrs[i] = dup_scalar(d, a, it, "addresses", &err);
		if (t->addrs[i] != NULL && t->addrs[i][0] == '\0')
			err = yerr(d, it, "addresses: an empty address");
	}
	return err;
}

/* One StringMatch: a mapping with one of its kinds. */
static resil_err
string_match(ydoc *d, const resil_allocator *a, const yaml_node_t *m,
    resil__param_match *pm)
{
	static const char *const kinds[] = { "exact", "prefix", "wildcard",
		"empty", "noempty" };
	const yaml_node_pair_t *pr;
	const char *k;
	resil_err err = RESIL_OK;
	size_t i;

	if (m == NULL || m->type != YAML_MAPPING_NODE || PAIRS(m) != 1)
		return yerr(d, m,
		    "match.value: expected one of exact, prefix, wildcard, "
		    "empty, noempty");
	pr = &m->data.mapping.pairs.start[0];
	if ((k = scalar(d, node(d, pr->key), "match.value", &err)) == NULL)
		return err;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(k, kinds[i]) == 0)
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0]))
		return yerr(d, node(d, pr->key),
		    "match.value: \"%s\" is not supported (exact, prefix, "
		    "wildcard, empty, noempty)",
		    k);
	pm->kind = (int)i;
	if (i == RESIL__SM_EMPTY || i == RESIL__SM_NOEMPTY)
		return RESIL_OK;
	pm->value = dup_scalar(d, a, node(d, pr->value), k, &err);
	return err;
}

static resil_err
matches(
    ydoc *d, const resil_allocator *a, const yaml_node_t *seq, resil__tag *t)
{
	resil_err err = RESIL_OK;
	size_t i, j;

	if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
		return yerr(d, seq, "match: expected a list");
	if (ITEMS(seq) == 0)
		return RESIL_OK;
	t->match = resil__calloc(a, ITEMS(seq) * sizeof(*t->match));
	if (t->match == NULL)
		return RESIL_E_NOMEM;
	t->nmatch = ITEMS(seq);
	for (i = 0; i < t->nmatch && err == RESIL_OK; i++) {
		const yaml_node_t *it =
		    node(d, seq->data.sequence.items.start[i]);
		const yaml_node_t *val = NULL;

		if (it == NULL || it->type != YAML_MAPPING_NODE)
			return yerr(d, it, "match: expected key and value");
		for (j = 0; j < PAIRS(it) && err == RESIL_OK; j++) {
			const yaml_node_pair_t *pr =
			    &it->data.mapping.pairs.start[j];
			const char *k =
			    scalar(d, node(d, pr->key), "match", &err);

			if (k == NULL)
				break;
			if (strcmp(k, "key") == 0 && t->match[i].key == NULL)
				t->match[i].key = dup_scalar(d, a,
				    node(d, pr->value), "match.key", &err);
			else if (strcmp(k, "value") == 0 && val == NULL)
				val = node(d, pr->value);
			else
				err = yerr(d, node(d, pr->key),
				    "match: unknown or repeated field \"%s\"",
				    k);
		}
		if (err == RESIL_OK &&
		    (t->match[i].key == NULL || t->match[i].key[0] == '\0' ||
		        val == NULL))
			err = yerr(d, it, "match: needs a key and a value");
		if (err == RESIL_OK)
			err = string_match(d, a, val, &t->match[i]);
	}
	return err;
}

static resil_err
one_tag(ydoc *d, const resil_allocator *a, const yaml_node_t *m, resil__tag *t)
{
	resil_err err = RESIL_OK;
	size_t j;

	if (m == NULL || m->type != YAML_MAPPING_NODE)
		return yerr(d, m, "tags: expected name, addresses, match");
	for (j = 0; j < PAIRS(m) && err == RESIL_OK; j++) {
		const yaml_node_pair_t *pr = &m->data.mapping.pairs.start[j];
		const yaml_node_t *kn = node(d, pr->key),
		                  *v = node(d, pr->value);
		const char *k = scalar(d, kn, "tags", &err);

		if (k == NULL)
			break;
		if (strcmp(k, "name") == 0 && t->name == NULL)
			t->name = dup_scalar(d, a, v, "tags.name", &err);
		else if (strcmp(k, "addresses") == 0 && t->addrs == NULL)
			err = addresses(d, a, v, t);
		else if (strcmp(k, "match") == 0 && t->match == NULL)
			err = matches(d, a, v, t);
		else
			err = yerr(d, kn,
			    "tags: unknown or repeated field \"%s\"", k);
	}
	if (err == RESIL_OK && (t->name == NULL || t->name[0] == '\0'))
		err = yerr(d, m, "tags: a tag without a name");
	return err;
}

static resil_err
tags(ydoc *d, const yaml_node_t *seq, resil_tag_rule *r)
{
	resil_err err = RESIL_OK;
	size_t i, j;

	if (seq == NULL || seq->type != YAML_SEQUENCE_NODE)
		return yerr(d, seq, "tags: expected a list");
	if (ITEMS(seq) == 0)
		return RESIL_OK;
	r->tags = resil__calloc(&r->a, ITEMS(seq) * sizeof(*r->tags));
	if (r->tags == NULL)
		return RESIL_E_NOMEM;
	r->ntags = ITEMS(seq);
	for (i = 0; i < r->ntags && err == RESIL_OK; i++) {
		const yaml_node_t *m =
		    node(d, seq->data.sequence.items.start[i]);

		err = one_tag(d, &r->a, m, &r->tags[i]);
		for (j = 0; j < i && err == RESIL_OK; j++)
			if (strcmp(r->tags[j].name, r->tags[i].name) == 0)
				err = yerr(d, m, "tags: \"%s\" is given twice",
				    r->tags[i].name);
	}
	return err;
}

resil_err
resil_tag_rule_parse_yaml(resil_tag_rule **out, const char *yaml,
    const char *name, const resil_allocator *alloc, resil_rule_info *info,
    resil_diag *diag)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil_rule_info ri;
	const yaml_node_t *tl;
	resil_tag_rule *r;
	resil_err err;
	ydoc d;

	d.name = name != NULL ? name : "rule";
	d.diag = diag;
	if (out == NULL || yaml == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "rule \"%s\": NULL argument", d.name);
	if ((err = read_rule(&d, yaml, "tags", "tag", &ri, &tl)) != RESIL_OK)
		return err;
	if ((r = resil__calloc(a, sizeof(*r))) == NULL)
		err = RESIL_E_NOMEM;
	if (r != NULL) {
		r->a = *a;
		r->enabled = ri.enabled;
		r->force = ri.force;
		r->runtime = ri.runtime;
		r->priority = ri.priority;
		if ((r->key = resil__strdup(a, ri.key)) == NULL ||
		    (r->text = resil__strdup(a, yaml)) == NULL)
			err = RESIL_E_NOMEM;
		if (err == RESIL_OK)
			err = tags(&d, tl, r);
		if (err != RESIL_OK) {
			resil_tag_rule_free(r);
			r = NULL;
		}
	}
	yaml_document_delete(&d.doc);
	if (err == RESIL_E_NOMEM)
		resil__diagf(diag, err, "rule \"%s\": out of memory", d.name);
	if (err != RESIL_OK)
		return err;
	*out = r;
	if (info != NULL)
		*info = ri;
	return RESIL_OK;
}

/*
 * The selector: routes over a directory snapshot, balances per method, and
 * takes outcomes back into the endpoints' state. The cluster keys of the
 * configuration text are lib/cluster_text.c's.
 */
#include <resil/selector.h>
#include <resil/fleet.h>

#include "balance_internal.h"
#include "router_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define MSLOTS 128

typedef struct mslot {
	char *name;
	resil__lb lb;
} mslot;

/*
 * The condition rules routes read, with the route settings they go with:
 * published by one pointer store, replaced a slot at a time (the
 * configuration's own rules, a registry's condition:// rules, a config
 * center's rules, the tag rule) and retired through the directory's
 * epoch, so a route in progress keeps the set it started with. A
 * replacement moves the other slots' rules to the new set, with their
 * ownership: a retired set frees only what it alone held.
 */
#define NSLOT RESIL__RULES_SLOTS
#define TAG_BIT (1u << NSLOT)

typedef struct rule_set {
	resil__epoch_entry retire; /* first: the epoch gives it back */
	resil_allocator a;         /* a copy: the set may outlive sel */
	resil__route_cfg rc;       /* rc.conds is conds */
	resil_condition **conds;   /* the slots' rules, slot after slot */
	size_t n;
	size_t cnt[NSLOT];
	resil_tag_rule *tag;
	unsigned owned; /* bit s: slot s's rules; TAG_BIT: tag */
} rule_set;

struct resil_selector {
	resil_allocator a;
	resil_directory *dir;
	char *service;
	char *local_zone;
	char **zone_names;
	uint32_t *zone_consumers;
	size_t nzones;
	rule_set *rules;             /* atomic */
	resil__spinlock rules_wlock; /* serialises replacements */
	resil__route_cfg rc;         /* the base: everything but the rules */
	/* The config's random source; uniform NULL when it gave none. */
	resil_random rnd;
	/* The draws when the config gave no random source: one atomic word
	 * (resil_rng) that candidate sets take blocks of (cand_uniform()),
	 * so concurrent picks take no lock and each gets its own value of
	 * the seeded sequence. */
	resil_rng rng;
	resil_balance_config deflt;
	resil_method_balance *methods; /* names owned */
	size_t nmethods;
	resil__lb base;       /* the unnamed method, and overflow */
	mslot *slots[MSLOTS]; /* atomic; filled once each */
	/* The directory runs no interval detections: a plain success's
	 * report may be the quiet one (resil__ep_quiet_success()). */
	bool quiet;
};

struct resil_candidates {
	resil_selector *sel;
	resil__view v, x;
	unsigned char *keep;
	size_t cap;
	resil__route_stats st;
	resil__lb *lb; /* the routed method's balancer */
	/* Its draws (routing, picks): the config's random source, or a
	 * block of the selector's own generator, drawn with no atomic
	 * (cand_uniform(); resil__rng_reserve()). */
	resil_random rnd;
	uint64_t rnext, rend;
};

/* A candidate set's block of the selector's own generator: this many
 * draws a fetch-and-add. */
#define CAND_DRAWS 64u

static double
cand_uniform(void *ctx)
{
	resil_candidates *c = ctx;

	if (RESIL__UNLIKELY(c->rnext == c->rend))
		resil__rng_reserve(
		    &c->sel->rng, CAND_DRAWS, &c->rnext, &c->rend);
	return (double)(resil__rng_block_draw(&c->rnext) >> 11) * 0x1.0p-53;
}

resil_err
resil_selector_config_validate(
    const resil_selector_config *cfg, resil_diag *diag)
{
	resil_err err;
	size_t i;

	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: NULL config");
	if (resil__check_size(diag, "selector", "resil_selector_config",
	        cfg->size, sizeof(*cfg)) != RESIL_OK)
		return RESIL_E_INVAL;
	if ((err = resil_balance_config_validate(&cfg->balance, "", diag)) !=
	    RESIL_OK)
		return err;
	if (cfg->nmethods > 0 && cfg->methods == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "selector.methods: NULL with %zu methods", cfg->nmethods);
	for (i = 0; i < cfg->nmethods; i++) {
		char prefix[96];
		if (cfg->methods[i].method == NULL ||
		    cfg->methods[i].method[0] == '\0')
			return resil__diagf(diag, RESIL_E_INVAL,
			    "selector.methods[%zu].method: empty", i);
		snprintf(
		    prefix, sizeof(prefix), "%s.", cfg->methods[i].method);
		if ((err = resil_balance_config_validate(
		         &cfg->methods[i].balance, prefix, diag)) != RESIL_OK)
			return err;
	}
	if ((unsigned)cfg->zone_mode > RESIL_ZONE_PROPORTIONAL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "router.zone.mode: %d is not a mode", (int)cfg->zone_mode);
	if (cfg->local_zone != NULL && cfg->local_zone[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "router.zone: empty (use NULL for no zone routing)");
	if (cfg->panic_threshold_pct > 100)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "panic.threshold: %u is out of range 0..100",
		    cfg->panic_threshold_pct);
	if (cfg->nconditions > 0 && cfg->conditions == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "router.condition: NULL with %zu rules", cfg->nconditions);
	for (i = 0; i < cfg->nconditions; i++)
		if (cfg->conditions[i] == NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "router.condition[%zu]: NULL", i);
	if (cfg->nzones > 0 &&
	    (cfg->zone_names == NULL || cfg->zone_consumers == NULL))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "router.zone.consumers: NULL with %zu zones", cfg->nzones);
	for (i = 0; i < cfg->nzones; i++) {
		size_t j;
		if (cfg->zone_names[i] == NULL ||
		    cfg->zone_names[i][0] == '\0')
			return resil__diagf(diag, RESIL_E_INVAL,
			    "router.zone.consumers[%zu]: empty zone", i);
		for (j = 0; j < i; j++)
			if (strcmp(cfg->zone_names[j], cfg->zone_names[i]) ==
			    0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "router.zone.consumers[%zu]: zone \"%s\" "
				    "is given twice",
				    i, cfg->zone_names[i]);
	}
	return RESIL_OK;
}

static void
rules_free(rule_set *rs)
{
	size_t i, at = 0, k;

	if (rs == NULL)
		return;
	for (k = 0; k < NSLOT; k++) {
		if (rs->owned & (1u << k))
			for (i = 0; i < rs->cnt[k]; i++)
				resil_condition_free(rs->conds[at + i]);
		at += rs->cnt[k];
	}
	if ((rs->owned & TAG_BIT) != 0)
		resil_tag_rule_free(rs->tag);
	if (rs->conds != NULL)
		resil__free(
		    &rs->a, rs->conds, rs->n * sizeof(resil_condition *));
	resil__free(&rs->a, rs, sizeof(*rs));
}

static void
rules_retired(resil__epoch_entry *e)
{
	rules_free((rule_set *)(void *)e);
}

/* A set over old's slots with slot replaced by rules[0..n) (slot NSLOT:
 * the tag rule by tag) and the base settings, owning nothing yet; old
 * NULL: every other slot empty. NULL: out of memory. */
static rule_set *
rules_new(const resil_selector *sel, const rule_set *old, int slot,
    resil_condition *const *rules, size_t n, resil_tag_rule *tag)
{
	rule_set *rs = resil__calloc(&sel->a, sizeof(*rs));
	size_t k, at = 0, from = 0;

	if (rs == NULL)
		return NULL;
	rs->a = sel->a;
	for (k = 0; k < NSLOT; k++)
		rs->cnt[k] = (int)k == slot ? n
		    : old != NULL           ? old->cnt[k]
		                            : 0;
	for (k = 0; k < NSLOT; k++)
		rs->n += rs->cnt[k];
	rs->tag = slot == NSLOT ? tag : old != NULL ? old->tag : NULL;
	if (rs->n > 0) {
		rs->conds =
		    resil__alloc(&sel->a, rs->n * sizeof(resil_condition *));
		if (rs->conds == NULL) {
			resil__free(&sel->a, rs, sizeof(*rs));
			return NULL;
		}
	}
	for (k = 0; k < NSLOT; k++) {
		if ((int)k == slot && n > 0)
			memcpy(rs->conds + at, rules,
			    n * sizeof(resil_condition *));
		else if ((int)k != slot && rs->cnt[k] > 0)
			memcpy(rs->conds + at, old->conds + from,
			    rs->cnt[k] * sizeof(resil_condition *));
		at += rs->cnt[k];
		from += old != NULL ? old->cnt[k] : 0;
	}
	rs->rc = sel->rc;
	rs->rc.conds = rs->conds;
	rs->rc.nconds = rs->n;
	rs->rc.tag_rule = rs->tag;
	return rs;
}

/* Replace slot (NSLOT: the tag rule) and publish; the selector owns the
 * new rules from here on. On error nothing changes. */
static resil_err
replace(resil_selector *sel, int slot, resil_condition *const *rules, size_t n,
    resil_tag_rule *tag, resil_diag *diag)
{
	unsigned bit = slot == NSLOT ? TAG_BIT : 1u << slot;
	resil__epoch *ep = resil__dir_epoch(sel->dir);
	resil__epoch_guard g;
	rule_set *rs, *old;

	for (;;) {
		/* Built outside the lock (no allocation under a spinlock),
		 * inside an epoch section (a concurrent replacement may
		 * retire old meanwhile: it stays readable until the section
		 * ends); published only if no other replacement came in
		 * between. */
		resil__epoch_enter(ep, &g);
		old = resil__loadptr((void *const *)&sel->rules);
		rs = rules_new(sel, old, slot, rules, n, tag);
		if (rs == NULL) {
			resil__epoch_exit(ep, &g);
			return resil__diagf(
			    diag, RESIL_E_NOMEM, "selector: out of memory");
		}
		resil__spin_lock(&sel->rules_wlock);
		if (sel->rules == old)
			break;
		resil__spin_unlock(&sel->rules_wlock);
		resil__epoch_exit(ep, &g);
		rs->owned = 0;
		rules_free(rs);
	}
	rs->owned = (old->owned & ~bit) | bit;
	old->owned &= bit;
	resil__storeptr((void **)&sel->rules, rs);
	resil__spin_unlock(&sel->rules_wlock);
	resil__epoch_exit(ep, &g);
	resil__epoch_retire(ep, &old->retire, rules_retired);
	return RESIL_OK;
}

static void
sel_destroy(resil_selector *sel)
{
	const resil_allocator *a = &sel->a;
	size_t i;

	for (i = 0; i < MSLOTS; i++)
		if (sel->slots[i] != NULL) {
			resil__lb_deinit(&sel->slots[i]->lb);
			resil__strfree(a, sel->slots[i]->name);
			resil__free(a, sel->slots[i], sizeof(mslot));
		}
	resil__lb_deinit(&sel->base);
	if (sel->methods != NULL) {
		for (i = 0; i < sel->nmethods; i++)
			resil__strfree(
			    a, (char *)(uintptr_t)sel->methods[i].method);
		resil__free(
		    a, sel->methods, sel->nmethods * sizeof(*sel->methods));
	}
	if (sel->zone_names != NULL) {
		for (i = 0; i < sel->nzones; i++)
			resil__strfree(a, sel->zone_names[i]);
		resil__free(a, sel->zone_names, sel->nzones * sizeof(char *));
	}
	if (sel->zone_consumers != NULL)
		resil__free(
		    a, sel->zone_consumers, sel->nzones * sizeof(uint32_t));
	rules_free(sel->rules);
	resil__strfree(a, sel->service);
	resil__strfree(a, sel->local_zone);
	resil__free(a, sel, sizeof(*sel));
}

resil_err
resil_selector_new(resil_selector **out, resil_directory *dir,
    const resil_selector_config *cfg, resil_diag *diag)
{
	const resil_allocator *a;
	resil_selector *sel;
	resil_err err;
	size_t i;

	if (out == NULL || dir == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: NULL argument");
	if ((err = resil_selector_config_validate(cfg, diag)) != RESIL_OK)
		return err;
	a = resil__allocator(cfg->alloc);
	sel = resil__calloc(a, sizeof(*sel));
	if (sel == NULL)
		return RESIL_E_NOMEM;
	sel->a = *a;
	a = &sel->a;
	sel->dir = dir;
	sel->quiet = !resil__dir_rate_on(dir);
	sel->deflt = cfg->balance;
	if (cfg->random != NULL && cfg->random->uniform != NULL)
		sel->rnd = *cfg->random;
	else
		resil_rng_seed(&sel->rng, cfg->seed);
	if ((cfg->service != NULL &&
	        (sel->service = resil__strdup(a, cfg->service)) == NULL) ||
	    (cfg->local_zone != NULL &&
	        (sel->local_zone = resil__strdup(a, cfg->local_zone)) == NULL))
		goto nomem;
	if (cfg->nmethods > 0) {
		sel->methods =
		    resil__calloc(a, cfg->nmethods * sizeof(*sel->methods));
		if (sel->methods == NULL)
			goto nomem;
		sel->nmethods = cfg->nmethods;
		for (i = 0; i < cfg->nmethods; i++) {
			sel->methods[i] = cfg->methods[i];
			sel->methods[i].method =
			    resil__strdup(a, cfg->methods[i].method);
			if (sel->methods[i].method == NULL)
				goto nomem;
		}
	}
	if (cfg->nzones > 0) {
		sel->zone_names =
		    resil__calloc(a, cfg->nzones * sizeof(char *));
		sel->zone_consumers =
		    resil__calloc(a, cfg->nzones * sizeof(uint32_t));
		sel->nzones = cfg->nzones;
		if (sel->zone_names == NULL || sel->zone_consumers == NULL)
			goto nomem;
		for (i = 0; i < cfg->nzones; i++) {
			sel->zone_names[i] =
			    resil__strdup(a, cfg->zone_names[i]);
			if (sel->zone_names[i] == NULL)
				goto nomem;
			sel->zone_consumers[i] = cfg->zone_consumers[i];
		}
	}
	sel->rc.local_zone = sel->local_zone;
	sel->rc.zone_mode = cfg->zone_mode;
	sel->rc.zone_min = cfg->zone_min_cluster_size;
	sel->rc.zone_names = (const char *const *)sel->zone_names;
	sel->rc.zone_consumers = sel->zone_consumers;
	sel->rc.nzones = sel->nzones;
	sel->rc.tag_force = cfg->tag_force != 0;
	sel->rc.panic = cfg->panic_threshold_pct;
	resil__spin_init(&sel->rules_wlock);
	/* The configuration's rules are borrowed (they outlive sel). */
	sel->rules = rules_new(sel, NULL, RESIL__RULES_OWN, cfg->conditions,
	    cfg->nconditions, NULL);
	if (sel->rules == NULL)
		goto nomem;
	resil__lb_init(&sel->base, &sel->deflt, a, resil__dir_epoch(dir));
	*out = sel;
	return RESIL_OK;
nomem:
	resil__lb_init(&sel->base, &sel->deflt, a, resil__dir_epoch(dir));
	sel_destroy(sel);
	return RESIL_E_NOMEM;
}

void
resil_selector_free(resil_selector *sel)
{
	if (sel == NULL)
		return;
	/* A retired hash ring may still be pending in the epoch. */
	resil__epoch_synchronize(resil__dir_epoch(sel->dir));
	sel_destroy(sel);
}

static resil_err
check_rules(resil_selector *sel, resil_condition *const *rules, size_t n,
    resil_diag *diag)
{
	size_t i;

	if (sel == NULL || (rules == NULL && n > 0))
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: NULL argument");
	for (i = 0; i < n; i++)
		if (rules[i] == NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "router.condition[%zu]: NULL", i);
	return RESIL_OK;
}

resil_err
resil_selector_set_conditions(resil_selector *sel,
    resil_condition *const *rules, size_t n, resil_diag *diag)
{
	resil_err err = check_rules(sel, rules, n, diag);

	if (err != RESIL_OK)
		return err;
	return replace(sel, RESIL__RULES_OWN, rules, n, NULL, diag);
}

resil_err
resil__selector_set_rules(resil_selector *sel, int slot,
    resil_condition *const *rules, size_t n, resil_diag *diag)
{
	resil_err err = check_rules(sel, rules, n, diag);

	if (err != RESIL_OK)
		return err;
	if (slot < 0 || slot >= NSLOT)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "selector: rule slot %d is not 0..%d", slot, NSLOT - 1);
	return replace(sel, slot, rules, n, NULL, diag);
}

resil_err
resil_selector_set_tag_rule(
    resil_selector *sel, resil_tag_rule *rule, resil_diag *diag)
{
	if (sel == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: NULL argument");
	return replace(sel, NSLOT, NULL, 0, rule, diag);
}

const resil_allocator *
resil__selector_alloc(const resil_selector *sel)
{
	return &sel->a;
}

resil_directory *
resil__selector_dir(const resil_selector *sel)
{
	return sel->dir;
}

size_t
resil_selector_condition_count(resil_selector *sel)
{
	resil__epoch *ep;
	resil__epoch_guard g;
	size_t n;

	if (sel == NULL)
		return 0;
	ep = resil__dir_epoch(sel->dir);
	resil__epoch_enter(ep, &g);
	n = ((const rule_set *)resil__loadptr((void *const *)&sel->rules))->n;
	resil__epoch_exit(ep, &g);
	return n;
}

static uint64_t
str_hash(const char *s)
{
	return resil__fnv1a64(RESIL__FNV0, s, strlen(s));
}

/* The balancer of method: created once on its first pick. */
static resil__lb *
lb_for(resil_selector *sel, const char *method)
{
	uint64_t h;
	size_t i, p;

	if (method == NULL || method[0] == '\0')
		return &sel->base;
	h = str_hash(method);
	for (p = 0; p < MSLOTS; p++) {
		mslot **at = &sel->slots[(h + p) % MSLOTS];
		mslot *ms = resil__loadptr((void *const *)at);
		const resil_balance_config *bc = &sel->deflt;
		if (ms == NULL) {
			ms = resil__calloc(&sel->a, sizeof(*ms));
			if (ms == NULL)
				return &sel->base;
			ms->name = resil__strdup(&sel->a, method);
			if (ms->name == NULL) {
				resil__free(&sel->a, ms, sizeof(*ms));
				return &sel->base;
			}
			for (i = 0; i < sel->nmethods; i++)
				if (strcmp(sel->methods[i].method, method) ==
				    0)
					bc = &sel->methods[i].balance;
			resil__lb_init(
			    &ms->lb, bc, &sel->a, resil__dir_epoch(sel->dir));
			if (resil__cas64((uint64_t *)(void *)at, 0,
			        (uint64_t)(uintptr_t)ms))
				return &ms->lb;
			resil__strfree(&sel->a, ms->name);
			resil__free(&sel->a, ms, sizeof(*ms));
			ms = resil__loadptr((void *const *)at);
		}
		if (strcmp(ms->name, method) == 0)
			return &ms->lb;
	}
	return &sel->base;
}

static void
view_free(const resil_allocator *a, resil__view *v, size_t cap)
{
	if (v->idx != NULL)
		resil__free(a, v->idx, cap * sizeof(*v->idx));
	if (v->w != NULL)
		resil__free(a, v->w, cap * sizeof(*v->w));
	if (v->cum != NULL)
		resil__free(a, v->cum, cap * sizeof(*v->cum));
	v->idx = NULL;
	v->w = NULL;
	v->cum = NULL;
}

static int
view_alloc(const resil_allocator *a, resil__view *v, size_t cap)
{
	v->idx = resil__alloc(a, cap * sizeof(*v->idx));
	v->w = resil__alloc(a, cap * sizeof(*v->w));
	v->cum = resil__alloc(a, cap * sizeof(*v->cum));
	if (v->idx == NULL || v->w == NULL || v->cum == NULL) {
		view_free(a, v, cap);
		return 0;
	}
	return 1;
}

resil_err
resil_candidates_new(resil_candidates **out, resil_selector *sel)
{
	resil_candidates *c;

	if (out == NULL || sel == NULL)
		return RESIL_E_INVAL;
	c = resil__calloc(&sel->a, sizeof(*c));
	if (c == NULL)
		return RESIL_E_NOMEM;
	c->sel = sel;
	c->rnd = sel->rnd;
	if (c->rnd.uniform == NULL) {
		c->rnd.uniform = cand_uniform;
		c->rnd.ctx = c;
	}
	*out = c;
	return RESIL_OK;
}

void
resil_candidates_clear(resil_candidates *c)
{
	if (c == NULL)
		return;
	resil__snap_release(c->v.snap);
	c->v.snap = NULL;
	c->v.n = 0;
	c->x.snap = NULL;
	c->x.n = 0;
}

void
resil_candidates_free(resil_candidates *c)
{
	const resil_allocator *a;

	if (c == NULL)
		return;
	resil_candidates_clear(c);
	/* The draws it did not make go back, if no one drew after them. */
	resil__rng_give_back(&c->sel->rng, c->rnext, c->rend);
	a = &c->sel->a;
	view_free(a, &c->v, c->cap);
	view_free(a, &c->x, c->cap);
	if (c->keep != NULL)
		resil__free(a, c->keep, c->cap);
	resil__free(a, c, sizeof(*c));
}

static resil_err
grow(resil_candidates *c, size_t n)
{
	const resil_allocator *a = &c->sel->a;
	size_t cap = c->cap == 0 ? 16 : c->cap;
	resil__view v, x;
	unsigned char *keep;

	if (n <= c->cap)
		return RESIL_OK;
	while (cap < n)
		cap *= 2;
	memset(&v, 0, sizeof(v));
	memset(&x, 0, sizeof(x));
	if (!view_alloc(a, &v, cap))
		return RESIL_E_NOMEM;
	if (!view_alloc(a, &x, cap)) {
		view_free(a, &v, cap);
		return RESIL_E_NOMEM;
	}
	keep = resil__alloc(a, cap);
	if (keep == NULL) {
		view_free(a, &v, cap);
		view_free(a, &x, cap);
		return RESIL_E_NOMEM;
	}
	view_free(a, &c->v, c->cap);
	view_free(a, &c->x, c->cap);
	if (c->keep != NULL)
		resil__free(a, c->keep, c->cap);
	c->v.idx = v.idx;
	c->v.w = v.w;
	c->v.cum = v.cum;
	c->x.idx = x.idx;
	c->x.w = x.w;
	c->x.cum = x.cum;
	c->keep = keep;
	c->cap = cap;
	return RESIL_OK;
}

/* A request whose counts promise arrays it does not have is refused (a
 * rule or a hash balancer would read through the NULL). The test is one
 * branch on the hot path; the message is built out of line. */
#define REQ_BAD(req)                                      \
	((req) != NULL &&                                 \
	    (((req)->nargs > 0 && (req)->args == NULL) || \
	        ((req)->nparams > 0 && (req)->params == NULL)))

#if defined(__GNUC__) || defined(__clang__)
#define SEL_COLD __attribute__((noinline, cold))
#else
#define SEL_COLD
#endif

static SEL_COLD resil_err
req_refuse(const resil_request *req, resil_diag *diag)
{
	if (req->nargs > 0 && req->args == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "request: args is NULL with nargs %zu", req->nargs);
	return resil__diagf(diag, RESIL_E_INVAL,
	    "request: params is NULL with nparams %zu", req->nparams);
}

resil_err
resil_selector_route(resil_selector *sel, const resil_request *req,
    resil_candidates *c, resil_diag *diag)
{
	resil__epoch *ep;
	resil__epoch_guard g;
	const rule_set *rs;
	resil__snapshot *s;
	resil_err err = RESIL_OK;
	uint64_t now;

	if (sel == NULL || c == NULL || c->sel != sel)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: bad argument");
	if (RESIL__UNLIKELY(REQ_BAD(req)))
		return req_refuse(req, diag);
	resil_candidates_clear(c);
	now = resil__dir_now(sel->dir);
	s = resil__dir_acquire(sel->dir);
	if ((err = grow(c, s->n)) != RESIL_OK) {
		resil__snap_release(s);
		return err;
	}
	/* The rules stay alive for the section: a replacement retires them
	 * only after it closes. */
	ep = resil__dir_epoch(sel->dir);
	resil__epoch_enter(ep, &g);
	rs = resil__loadptr((void *const *)&sel->rules);
	resil__route(&rs->rc, s, req, now, &c->rnd, &c->v, c->keep, &c->st);
	if (c->v.n == 0) {
		resil__no_provider(&rs->rc, sel->service, req, &c->st, diag);
		err = RESIL_E_NO_PROVIDER;
	}
	resil__epoch_exit(ep, &g);
	c->lb = lb_for(sel, req != NULL ? req->method : NULL);
	if (err != RESIL_OK)
		resil_candidates_clear(c);
	return err;
}

void
resil_candidates_stats(const resil_candidates *c, resil_route_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return;
	out->endpoints = c->st.endpoints;
	out->candidates = c->v.n;
	out->removed_tag = c->st.removed_tag;
	out->removed_condition =
	    c->st.removed_condition + c->st.removed_method;
	out->removed_health = c->st.removed_health;
	out->removed_zone = c->st.removed_zone;
	out->panic = c->st.panic;
	out->version = c->v.snap != NULL ? c->v.snap->version : 0;
}

size_t
resil_candidates_count(const resil_candidates *c)
{
	return c != NULL ? c->v.n : 0;
}

resil_lb_kind
resil__candidates_lb_kind(const resil_candidates *c)
{
	if (c == NULL || c->lb == NULL)
		return c != NULL ? c->sel->deflt.kind : RESIL_LB_RANDOM;
	return c->lb->cfg.kind;
}

resil_err
resil_candidates_get(const resil_candidates *c, size_t i, resil_candidate *out)
{
	const resil__entry *e;

	if (c == NULL || out == NULL || i >= c->v.n)
		return RESIL_E_INVAL;
	e = &c->v.snap->e[c->v.idx[i]];
	out->address = e->ep->address;
	out->zone = e->zone;
	out->tag = e->tag;
	out->weight = (int32_t)c->v.w[i];
	out->id = e->ep->id;
	out->user = e->user;
	return RESIL_OK;
}

/* Copy v into x without the candidates keep[i] == 0. */
static void
view_filter(const resil__view *v, resil__view *x, const unsigned char *keep)
{
	size_t i, k = 0;

	x->snap = v->snap;
	for (i = 0; i < v->n; i++)
		if (keep[i]) {
			x->idx[k] = v->idx[i];
			x->w[k] = v->w[i];
			k++;
		}
	x->n = k;
	resil__view_finish(x);
}

/* Whether entry e is in zone (in_zone) or outside it. */
static int
zone_match(const resil__entry *e, const char *zone, int in_zone)
{
	int same = e->zone != NULL && strcmp(e->zone, zone) == 0;

	return in_zone ? same : !same;
}

size_t
resil_candidates_count_zone(
    const resil_candidates *c, const char *zone, int in_zone)
{
	size_t i, n = 0;

	if (c == NULL || c->v.snap == NULL)
		return 0;
	if (zone == NULL)
		return c->v.n;
	for (i = 0; i < c->v.n; i++)
		n += (size_t)zone_match(
		    &c->v.snap->e[c->v.idx[i]], zone, in_zone);
	return n;
}

#if defined(__GNUC__)
#define PICK_INLINE __attribute__((always_inline)) static inline
#define RESIL__SEL_NOINLINE __attribute__((noinline))
#else
#define PICK_INLINE static inline
#define RESIL__SEL_NOINLINE
#endif

PICK_INLINE void
pick_fill(resil_pick *out, const resil__view *view, size_t pos,
    resil__endpoint *ep, const resil__lb *lb, uint64_t now)
{
	const resil__entry *e = &view->snap->e[view->idx[pos]];

	resil__ep_enter(ep); /* in flight (the candidates hold ep) */
	out->address = e->address;
	out->id = e->id;
	out->user = e->user;
	out->zone = e->zone;
	out->start = now;
	out->ep_ = ep;
	out->tau_ = lb->cfg.ewma_tau;
	out->slide_ = lb->cfg.shortest_slide;
	/* kind_ carries what the outcome feeds (RESIL__EP_*): the report
	 * needs no more of the balancer. */
	out->kind_ = lb->feeds;
}

static resil_err pick_refused(resil_candidates *c, resil__view *view,
    size_t pos, const resil_request *req, uint64_t now, resil_pick *out,
    resil_diag *diag);

/* Issue 44 (h2): a permit of ep's fleet breaker into out: 0, or -1
 * refused. A local one (its breaker's, flags set) is kept whole
 * (has_permit_ 2); a probe lease's local part is empty, so its episode
 * and slot go in its place (has_permit_ 3). */
static RESIL__SEL_NOINLINE int
fleet_acquire(struct resil_fleet *f, resil_pick *out)
{
	resil_fleet_permit fp;

	memset(&fp, 0, sizeof(fp));
	if (resil_fleet_acquire(f, &fp) != RESIL_OK)
		return -1;
	if (fp.local.flags != 0 || fp.kind != 2) {
		out->permit_ = fp.local;
		out->has_permit_ = 2;
		return 0;
	}
	memset(&out->permit_, 0, sizeof(out->permit_));
	out->permit_.episode = fp.episode;
	out->permit_.reserved = fp.slot;
	out->has_permit_ = 3;
	return 0;
}

/* A permit of ep's breaker (it has one), or of its fleet's: 0, or -1
 * refused. */
static inline int
ep_acquire(resil__endpoint *ep, resil_pick *out)
{
	struct resil_fleet *f =
	    resil__loadptr((void *const *)(void *)&ep->fleet);

	if (RESIL__UNLIKELY(f != NULL))
		return fleet_acquire(f, out);
	if (resil_breaker_acquire(ep->breaker, &out->permit_) != RESIL_OK)
		return -1;
	out->has_permit_ = 1;
	return 0;
}

/* The fleet permit a pick holds (has_permit_ 2 or 3). */
static void
fleet_permit(const resil_pick *pick, resil_fleet_permit *fp)
{
	memset(fp, 0, sizeof(*fp));
	if (pick->has_permit_ == 2) {
		fp->local = pick->permit_;
		return;
	}
	fp->kind = 2;
	fp->episode = pick->permit_.episode;
	fp->slot = pick->permit_.reserved;
}

/* One pick from view by the balancer of the method routed for; an
 * endpoint whose breaker refuses is passed over (pick_refused()). */
PICK_INLINE resil_err
pick_from(resil_candidates *c, resil__view *view, const resil_request *req,
    uint64_t now, resil_pick *out, resil_diag *diag)
{
	resil__endpoint *ep;
	resil_err err;
	size_t pos;

	if ((err = resil__lb_pick(
	         c->lb, view, req, &c->rnd, now, &pos, diag)) != RESIL_OK)
		return err;
	ep = view->snap->eps[view->idx[pos]];
	out->has_permit_ = 0;
	if (ep->breaker != NULL && ep_acquire(ep, out) != 0)
		return pick_refused(c, view, pos, req, now, out, diag);
	pick_fill(out, view, pos, ep, c->lb, now);
	return RESIL_OK;
}

/* Candidate pos of view was refused by its breaker between routing and
 * now: pass over it and pick again from the rest, until one admits. */
static RESIL__SEL_NOINLINE resil_err
pick_refused(resil_candidates *c, resil__view *view, size_t pos,
    const resil_request *req, uint64_t now, resil_pick *out, resil_diag *diag)
{
	resil__endpoint *ep;
	resil_err err;

	for (;;) {
		if (view == &c->v) {
			memset(c->keep, 1, c->v.n);
			view_filter(&c->v, &c->x, c->keep);
			view = &c->x;
		}
		memset(c->keep, 1, view->n);
		c->keep[pos] = 0;
		view_filter(view, &c->x, c->keep);
		if (c->x.n == 0)
			return resil__diagf(diag, RESIL_E_UNAVAILABLE,
			    "all %zu candidates excluded or refused by their "
			    "breakers",
			    c->v.n);
		if ((err = resil__lb_pick(c->lb, view, req, &c->rnd, now, &pos,
		         diag)) != RESIL_OK)
			return err;
		ep = view->snap->eps[view->idx[pos]];
		out->has_permit_ = 0;
		if (ep->breaker == NULL || ep_acquire(ep, out) == 0)
			break;
	}
	pick_fill(out, view, pos, ep, c->lb, now);
	return RESIL_OK;
}

static resil_err pick_filtered(resil_candidates *c, const resil_request *req,
    const uint64_t *exclude, size_t nexclude, const char *zone, int in_zone,
    uint64_t now, resil_pick *out, resil_diag *diag);

PICK_INLINE resil_err pick_impl(resil_selector *sel, resil_candidates *c,
    const resil_request *req, const uint64_t *exclude, size_t nexclude,
    const char *zone, int in_zone, resil_pick *out, resil_diag *diag);

resil_err
resil_selector_pick(resil_selector *sel, resil_candidates *c,
    const resil_request *req, const uint64_t *exclude, size_t nexclude,
    resil_pick *out, resil_diag *diag)
{
	return pick_impl(sel, c, req, exclude, nexclude, NULL, 0, out, diag);
}

resil_err
resil_selector_pick_zone(resil_selector *sel, resil_candidates *c,
    const resil_request *req, const uint64_t *exclude, size_t nexclude,
    const char *zone, int in_zone, resil_pick *out, resil_diag *diag)
{
	return pick_impl(
	    sel, c, req, exclude, nexclude, zone, in_zone, out, diag);
}

int
resil_selector_mock_spec(
    resil_selector *sel, const char *method, char *buf, size_t len)
{
	resil__snapshot *snap;
	char key[160];
	size_t i, klen;
	int found = 0;

	if (sel == NULL || buf == NULL || len == 0)
		return 0;
	klen = (size_t)snprintf(
	    key, sizeof(key), "%s.mock", method != NULL ? method : "");
	if (klen >= sizeof(key))
		klen = 0; /* too long a name: the service-level one only */
	snap = resil__dir_acquire(sel->dir);
	for (i = 0; i < snap->n && !found; i++) {
		const resil__entry *e = &snap->e[i];
		const char *v;
		size_t n;

		if (!e->mock)
			continue;
		if ((klen > 0 && resil__entry_attr(e, key, klen, &v, &n)) ||
		    resil__entry_attr(e, "mock", 4, &v, &n)) {
			if (n >= len)
				n = len - 1;
			memcpy(buf, v, n);
			buf[n] = '\0';
			found = 1;
		}
	}
	resil__snap_release(snap);
	return found;
}

resil_err
resil_selector_check_zones(resil_selector *sel, resil_diag *diag)
{
	resil__snapshot *snap;
	resil_err err = RESIL_OK;
	size_t i;

	if (sel == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: bad argument");
	snap = resil__dir_acquire(sel->dir);
	for (i = 0; i < snap->n; i++) {
		const resil__entry *e = &snap->e[i];

		if (!e->mock && (e->zone == NULL || e->zone[0] == '\0')) {
			err = resil__diagf(diag, RESIL_E_INVAL,
			    "endpoint %s has no zone", e->ep->address);
			break;
		}
	}
	resil__snap_release(snap);
	return err;
}

resil_err
resil_selector_pick_at(resil_selector *sel, resil_candidates *c, size_t i,
    resil_pick *out, resil_diag *diag)
{
	resil__endpoint *ep;

	if (sel == NULL || c == NULL || out == NULL || c->sel != sel ||
	    c->v.snap == NULL || i >= c->v.n)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: bad argument");
	ep = c->v.snap->eps[c->v.idx[i]];
	out->has_permit_ = 0;
	if (ep->breaker != NULL && ep_acquire(ep, out) != 0)
		return resil__diagf(diag, RESIL_E_UNAVAILABLE,
		    "%s: refused by its breaker", ep->address);
	pick_fill(out, &c->v, i, ep, c->lb, resil__dir_now(sel->dir));
	return RESIL_OK;
}

PICK_INLINE resil_err
pick_impl(resil_selector *sel, resil_candidates *c, const resil_request *req,
    const uint64_t *exclude, size_t nexclude, const char *zone, int in_zone,
    resil_pick *out, resil_diag *diag)
{
	uint64_t now;

	if (sel == NULL || c == NULL || out == NULL || c->sel != sel ||
	    (exclude == NULL && nexclude > 0))
		return resil__diagf(
		    diag, RESIL_E_INVAL, "selector: bad argument");
	/* req is read again only by a hash balancer, which checks it. */
	if (c->v.snap == NULL || c->v.n == 0)
		return resil__diagf(diag, RESIL_E_MISUSE,
		    "selector: pick from an empty candidate set (route "
		    "first)");
	now = resil__dir_now(sel->dir);
	if (RESIL__UNLIKELY(nexclude > 0 || zone != NULL))
		return pick_filtered(
		    c, req, exclude, nexclude, zone, in_zone, now, out, diag);
	return pick_from(c, &c->v, req, now, out, diag);
}

/* A pick with exclusions or a zone: from the candidates they leave. */
static RESIL__SEL_NOINLINE resil_err
pick_filtered(resil_candidates *c, const resil_request *req,
    const uint64_t *exclude, size_t nexclude, const char *zone, int in_zone,
    uint64_t now, resil_pick *out, resil_diag *diag)
{
	size_t inzone = 0, i, j;

	for (i = 0; i < c->v.n; i++) {
		const resil__entry *e = &c->v.snap->e[c->v.idx[i]];
		uint64_t id = e->ep->id;

		c->keep[i] = 1;
		if (zone != NULL && !zone_match(e, zone, in_zone))
			c->keep[i] = 0;
		else
			inzone++;
		for (j = 0; j < nexclude; j++)
			if (exclude[j] == id)
				c->keep[i] = 0;
	}
	view_filter(&c->v, &c->x, c->keep);
	if (c->x.n == 0 && zone != NULL && inzone == 0)
		return resil__diagf(diag, RESIL_E_UNAVAILABLE,
		    "no candidate %s zone %s", in_zone ? "in" : "outside",
		    zone);
	if (c->x.n == 0)
		return resil__diagf(diag, RESIL_E_UNAVAILABLE,
		    "all %zu candidates excluded", c->v.n);
	return pick_from(c, &c->x, req, now, out, diag);
}

/* The report in full (anything but the quiet success below). */
static RESIL__SEL_NOINLINE resil_err
report_full(resil_selector *sel, resil_pick *pick, resil__endpoint *ep,
    resil_outcome outcome, uint64_t duration)
{
	/* The time matters only to the estimates, a failure streak and a
	 * return from ejection: a plain success does without the clock. */
	uint64_t now = pick->kind_ != 0 || outcome == RESIL_OUTCOME_FAILURE ||
	        resil__load64(&ep->ejected) != 0
	    ? resil__dir_now(sel->dir)
	    : 0;

	if (RESIL__UNLIKELY(pick->has_permit_ >= 2)) {
		resil_fleet_permit fp;

		fleet_permit(pick, &fp);
		(void)resil_fleet_record(ep->fleet, &fp, outcome);
	} else if (pick->has_permit_) {
		(void)resil_breaker_record_duration(
		    ep->breaker, &pick->permit_, outcome, duration);
	}
	resil__ep_report(
	    ep, outcome, duration, now, pick->kind_, pick->tau_, pick->slide_);
	pick->ep_ = NULL;
	resil__ep_leave(ep);
	return RESIL_OK;
}

resil_err
resil_selector_report_duration(resil_selector *sel, resil_pick *pick,
    resil_outcome outcome, uint64_t duration)
{
	resil__endpoint *ep;

	if (sel == NULL || pick == NULL ||
	    (unsigned)outcome > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_E_INVAL; /* the pick stays open */
	ep = pick->ep_;
	if (ep == NULL)
		return RESIL_E_MISUSE;
	/* A success that feeds nothing, without a permit, on an endpoint in
	 * service: it only ends a failure streak, inline. */
	if (RESIL__LIKELY(outcome == RESIL_OUTCOME_SUCCESS &&
	        pick->kind_ == 0 && pick->has_permit_ == 0 && sel->quiet &&
	        resil__ep_quiet_success(ep))) {
		pick->ep_ = NULL;
		resil__ep_leave(ep);
		return RESIL_OK;
	}
	return report_full(sel, pick, ep, outcome, duration);
}

resil_err
resil_selector_report(
    resil_selector *sel, resil_pick *pick, resil_outcome outcome)
{
	uint64_t now;

	if (sel == NULL || pick == NULL)
		return RESIL_E_INVAL;
	now = resil__dir_now(sel->dir);
	return resil_selector_report_duration(
	    sel, pick, outcome, now > pick->start ? now - pick->start : 0);
}

resil_err
resil_selector_release(resil_selector *sel, resil_pick *pick)
{
	resil__endpoint *ep;

	if (sel == NULL || pick == NULL)
		return RESIL_E_INVAL;
	ep = pick->ep_;
	if (ep == NULL)
		return RESIL_E_MISUSE;
	if (RESIL__UNLIKELY(pick->has_permit_ >= 2)) {
		resil_fleet_permit fp;

		fleet_permit(pick, &fp);
		(void)resil_fleet_release(ep->fleet, &fp);
	} else if (pick->has_permit_) {
		(void)resil_breaker_release(ep->breaker, &pick->permit_);
	}
	pick->ep_ = NULL;
	resil__ep_leave(ep);
	return RESIL_OK;
}

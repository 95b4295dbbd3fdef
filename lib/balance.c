/*
 * The load balancers over a candidate view; see balance.h for the rules.
 */
#include <resil/balance.h>

#include "balance_internal.h"

#include <stdlib.h>

static const char *const names[RESIL_LB_KINDS] = { "random", "roundrobin",
	"leastactive", "p2c", "peakewma", "hash", "shortest" };

const char *
resil_lb_kind_name(resil_lb_kind k)
{
	return (unsigned)k < RESIL_LB_KINDS ? names[k] : "unknown";
}

static int
ieq(const char *a, const char *b)
{
	for (; *a != '\0' && *b != '\0'; a++, b++) {
		char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
		if (x != *b)
			return 0;
	}
	return *a == *b;
}

resil_err
resil_lb_kind_parse(const char *name, resil_lb_kind *out, resil_diag *diag)
{
	unsigned i;

	if (name == NULL || out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "loadbalance: NULL");
	for (i = 0; i < RESIL_LB_KINDS; i++)
		if (ieq(name, names[i])) {
			*out = (resil_lb_kind)i;
			return RESIL_OK;
		}
	if (ieq(name, "consistenthash")) {
		*out = RESIL_LB_HASH;
		return RESIL_OK;
	}
	if (ieq(name, "shortestresponse")) {
		*out = RESIL_LB_SHORTEST;
		return RESIL_OK;
	}
	return resil__diagf(diag, RESIL_E_INVAL,
	    "loadbalance: \"%s\" is not one of random, roundrobin, "
	    "leastactive, p2c, peakewma, hash, shortest",
	    name);
}

resil_err
resil_balance_config_validate(
    const resil_balance_config *c, const char *prefix, resil_diag *diag)
{
	uint32_t i;

	if (prefix == NULL)
		prefix = "";
	if ((unsigned)c->kind >= RESIL_LB_KINDS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%sloadbalance: %d is not a balancer", prefix,
		    (int)c->kind);
	if (c->hash_nodes == 0 || c->hash_nodes > 10000)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%sloadbalance.hash.nodes: %u is out of range 1..10000",
		    prefix, c->hash_nodes);
	if (c->hash_nargs == 0 || c->hash_nargs > RESIL_HASH_MAX_ARGS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%sloadbalance.hash.arguments: %u indexes is out of range "
		    "1..%d",
		    prefix, c->hash_nargs, RESIL_HASH_MAX_ARGS);
	for (i = 0; i < c->hash_nargs; i++)
		if (c->hash_args[i] > 255)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%sloadbalance.hash.arguments: index %u is out of "
			    "range 0..255",
			    prefix, c->hash_args[i]);
	if (c->ewma_tau == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%sloadbalance.peakewma.tau: must be at least 1", prefix);
	return RESIL_OK;
}

/* --- hashes and draws ------------------------------------------------- */

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

#define FNV0 UINT64_C(0xcbf29ce484222325)

static double
draw(const resil_random *rnd)
{
	return resil_random_uniform(rnd);
}

/* floor(u * n), kept below n whatever the rounding. */
static size_t
scaled(double u, uint64_t n)
{
	uint64_t k = (uint64_t)(u * (double)n);

	return (size_t)(k >= n ? n - 1 : k);
}

/* The weighted choice over v. */
static size_t
weighted(const resil__view *v, const resil_random *rnd)
{
	const uint64_t *base;
	uint64_t off;
	size_t len;
	double u;

	if (v->n == 1)
		return 0;
	u = draw(rnd);
	if (v->total == 0 || v->same)
		return scaled(u, v->n);
	off = (uint64_t)scaled(u, v->total);
	/* The first running sum above off (the last one, the total, is).
	 * Branch-free halving: the draws make every branch a coin flip. */
	base = v->cum;
	len = v->n;
	while (len > 1) {
		size_t half = len / 2;
		base = base[half - 1] <= off ? base + half : base;
		len -= half;
	}
	return (size_t)(base - v->cum);
}

/* The weighted choice among ties t[0..nt) of v (one draw iff nt > 1). */
static size_t
weighted_ties(
    const resil__view *v, const size_t *t, size_t nt, const resil_random *rnd)
{
	uint64_t total = 0, off, sum = 0;
	size_t i;
	int same = 1;
	double u;

	if (nt <= 1) /* callers pass nt >= 1 */
		return nt == 1 ? t[0] : 0;
	for (i = 0; i < nt; i++) {
		total += v->w[t[i]];
		if (v->w[t[i]] != v->w[t[0]])
			same = 0;
	}
	u = draw(rnd);
	if (total == 0 || same)
		return t[scaled(u, nt)];
	off = (uint64_t)scaled(u, total);
	for (i = 0; i < nt; i++) {
		sum += v->w[t[i]];
		if (sum > off)
			return t[i];
	}
	return t[nt - 1];
}

/* --- round robin ------------------------------------------------------- */

/* Align the counters with snapshot s, carrying them over by id (ids grow
 * along every snapshot, so this is a merge). */
static resil_err
rr_sync(resil__lb *lb, const resil__snapshot *s)
{
	uint64_t *ids = NULL;
	int64_t *cur = NULL;
	size_t i, j = 0;

	if (s->n > 0) {
		ids = resil__alloc(lb->a, s->n * sizeof(*ids));
		cur = resil__alloc(lb->a, s->n * sizeof(*cur));
		if (ids == NULL || cur == NULL) {
			if (ids != NULL)
				resil__free(lb->a, ids, s->n * sizeof(*ids));
			if (cur != NULL)
				resil__free(lb->a, cur, s->n * sizeof(*cur));
			return RESIL_E_NOMEM;
		}
	}
	for (i = 0; i < s->n; i++) {
		uint64_t id = s->e[i].ep->id;
		while (
		    j < lb->rr_n && lb->rr_ids != NULL && lb->rr_ids[j] < id)
			j++;
		ids[i] = id;
		cur[i] =
		    j < lb->rr_n && lb->rr_ids != NULL && lb->rr_ids[j] == id
		    ? lb->rr_cur[j]
		    : 0;
	}
	if (lb->rr_ids != NULL) {
		resil__free(lb->a, lb->rr_ids, lb->rr_n * sizeof(*lb->rr_ids));
		resil__free(lb->a, lb->rr_cur, lb->rr_n * sizeof(*lb->rr_cur));
	}
	lb->rr_ids = ids;
	lb->rr_cur = cur;
	lb->rr_n = s->n;
	lb->rr_version = s->version;
	return RESIL_OK;
}

static resil_err
roundrobin(resil__lb *lb, const resil__view *v, size_t *out)
{
	size_t i, best = 0;
	int64_t total = 0;
	int unit = v->total == 0; /* all 0: plain round robin */

	resil__spin_lock(&lb->lock);
	if (lb->rr_ids == NULL || lb->rr_version != v->snap->version ||
	    lb->rr_n != v->snap->n) {
		resil_err err = rr_sync(lb, v->snap);
		if (err != RESIL_OK) {
			resil__spin_unlock(&lb->lock);
			return err;
		}
	}
	for (i = 0; i < v->n; i++) {
		int64_t w = unit ? 1 : (int64_t)v->w[i];
		int64_t *c = &lb->rr_cur[v->idx[i]];
		*c += w;
		total += w;
		if (i == 0 || *c > lb->rr_cur[v->idx[best]])
			best = i;
	}
	lb->rr_cur[v->idx[best]] -= total;
	resil__spin_unlock(&lb->lock);
	*out = best;
	return RESIL_OK;
}

/* --- consistent hash --------------------------------------------------- */

typedef struct point {
	uint64_t h;
	uint64_t id;
} point;

typedef struct ring {
	resil__epoch_entry retire; /* first */
	const resil_allocator *a;
	uint64_t sig;
	size_t n;
	point *p;
} ring;

static int
point_cmp(const void *x, const void *y)
{
	const point *a = x, *b = y;

	if (a->h != b->h)
		return a->h < b->h ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

static void
ring_free(ring *r)
{
	if (r == NULL)
		return;
	if (r->p != NULL)
		resil__free(r->a, r->p, r->n * sizeof(*r->p));
	resil__free(r->a, r, sizeof(*r));
}

static void
ring_retired(resil__epoch_entry *e)
{
	ring_free((ring *)(void *)e);
}

/* The point of virtual node i of address. */
static uint64_t
node_hash(const char *address, uint32_t i)
{
	uint64_t h = fnv(FNV0, address, strlen(address));

	h = fnv(h, "#", 1);
	h = fnv(h, &i, sizeof(i));
	return resil__mix64(h);
}

static ring *
ring_build(resil__lb *lb, const resil__view *v)
{
	ring *r = resil__calloc(lb->a, sizeof(*r));
	size_t i, k = 0;
	uint32_t j;

	if (r == NULL)
		return NULL;
	r->a = lb->a;
	r->sig = v->sig;
	r->n = v->n * lb->cfg.hash_nodes;
	r->p = resil__alloc(lb->a, r->n * sizeof(*r->p));
	if (r->p == NULL) {
		resil__free(lb->a, r, sizeof(*r));
		return NULL;
	}
	for (i = 0; i < v->n; i++) {
		const resil__endpoint *ep = v->snap->e[v->idx[i]].ep;
		for (j = 0; j < lb->cfg.hash_nodes; j++) {
			r->p[k].h = node_hash(ep->address, j);
			r->p[k].id = ep->id;
			k++;
		}
	}
	qsort(r->p, r->n, sizeof(*r->p), point_cmp);
	return r;
}

static resil_err
hash_key(const resil__lb *lb, const resil_request *req, uint64_t *out,
    resil_diag *diag)
{
	uint64_t h = FNV0;
	uint32_t i;
	size_t nargs = req != NULL ? req->nargs : 0;

	if (nargs > 0 && req->args == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "request: args is NULL with nargs %zu", nargs);
	for (i = 0; i < lb->cfg.hash_nargs; i++) {
		uint32_t a = lb->cfg.hash_args[i];
		const char *s;
		if (a >= nargs)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "loadbalance.hash.arguments: index %u is out of "
			    "range for method %s with %zu argument%s",
			    a,
			    req != NULL && req->method != NULL ? req->method
			                                       : "",
			    nargs, nargs == 1 ? "" : "s");
		s = req->args[a] != NULL ? req->args[a] : "";
		h = fnv(h, s, strlen(s));
		h = fnv(h, "\x1f", 1);
	}
	*out = resil__mix64(h);
	return RESIL_OK;
}

static resil_err
consistent(resil__lb *lb, const resil__view *v, const resil_request *req,
    size_t *out, resil_diag *diag)
{
	resil__epoch_guard g;
	uint64_t key = 0, id;
	resil_err err;
	ring *r;
	size_t lo, hi;

	if ((err = hash_key(lb, req, &key, diag)) != RESIL_OK)
		return err;
	for (;;) {
		unsigned i;
		resil__epoch_enter(lb->epoch, &g);
		for (i = 0; i < RESIL__RINGS; i++) {
			r = resil__loadptr((void *const *)&lb->rings[i]);
			if (r != NULL && r->sig == v->sig)
				break;
		}
		if (i < RESIL__RINGS)
			break;
		resil__epoch_exit(lb->epoch, &g);
		/* A candidate set not seen lately: build its ring, once,
		 * in place of the oldest. */
		resil__spin_lock(&lb->lock);
		for (i = 0; i < RESIL__RINGS; i++) {
			r = lb->rings[i];
			if (r != NULL && r->sig == v->sig)
				break;
		}
		if (i == RESIL__RINGS) {
			ring *nr = ring_build(lb, v);
			if (nr == NULL) {
				resil__spin_unlock(&lb->lock);
				return RESIL_E_NOMEM;
			}
			i = lb->ring_next++ % RESIL__RINGS;
			r = lb->rings[i];
			resil__storeptr(&lb->rings[i], nr);
			if (r != NULL)
				resil__epoch_retire(
				    lb->epoch, &r->retire, ring_retired);
		}
		resil__spin_unlock(&lb->lock);
	}
	/* The first point at or after the key, wrapping. */
	{
		const point *b = r->p;
		size_t len = r->n;
		while (len > 1) { /* branch-free, as in weighted() */
			size_t half = len / 2;
			b = b[half - 1].h < key ? b + half : b;
			len -= half;
		}
		id = b->h < key ? r->p[0].id : b->id; /* past the last: wrap */
	}
	resil__epoch_exit(lb->epoch, &g);
	/* Ids grow along the view. */
	lo = 0;
	hi = v->n - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v->snap->e[v->idx[mid]].ep->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	*out = lo;
	return RESIL_OK;
}

/* --- the rest ---------------------------------------------------------- */

static uint64_t
active_of(const resil__view *v, size_t i)
{
	return resil__ep_active(v->snap->e[v->idx[i]].ep);
}

/* The two distinct samples (Finagle). */
static void
two(const resil__view *v, const resil_random *rnd, size_t *i, size_t *j)
{
	if (v->n == 2) {
		*i = 0;
		*j = 1;
		return;
	}
	*i = scaled(draw(rnd), v->n);
	*j = scaled(draw(rnd), v->n - 1);
	if (*j >= *i)
		(*j)++;
}

static double
ewma_load(const resil__lb *lb, const resil__view *v, size_t i, uint64_t now)
{
	const resil__endpoint *ep = v->snap->e[v->idx[i]].ep;

	return resil__ep_ewma(ep, now, (double)lb->cfg.ewma_tau,
	           (double)lb->cfg.ewma_default_rtt) *
	    (double)(resil__ep_active(ep) + 1);
}

/* Least-active's and shortest-response's cost of candidate i. */
static uint64_t
scan_cost(const resil__lb *lb, const resil__view *v, size_t i, uint64_t now,
    int shortest)
{
	const resil__endpoint *ep = v->snap->e[v->idx[i]].ep;
	uint64_t s, reset;

	if (!shortest)
		return resil__ep_active(ep);
	s = resil__load64(&ep->sr_successes);
	reset = resil__load64(&ep->sr_reset_at);
	if (s == 0 ||
	    (lb->cfg.shortest_slide != 0 &&
	        now - reset > lb->cfg.shortest_slide))
		return 0;
	return resil__load64(&ep->sr_elapsed) / s * (resil__ep_active(ep) + 1);
}

/* Up to this many ties are kept on the stack; beyond, a second pass
 * walks the candidates that still cost the minimum. */
#define TIES 64

static size_t
min_scan(const resil__lb *lb, const resil__view *v, const resil_random *rnd,
    uint64_t now, int shortest)
{
	size_t ties[TIES], nt = 0, count = 0, i, k = 0, want;
	uint64_t min = UINT64_MAX, c, total = 0, off, sum = 0;
	int same = 1;
	double u;

	for (i = 0; i < v->n; i++) {
		c = scan_cost(lb, v, i, now, shortest);
		if (c < min) {
			min = c;
			nt = 0;
			count = 0;
		}
		if (c == min) {
			if (nt < TIES)
				ties[nt++] = i;
			count++;
		}
	}
	if (count <= TIES)
		return weighted_ties(v, ties, nt, rnd);
	for (i = 0; i < v->n; i++)
		if (scan_cost(lb, v, i, now, shortest) == min) {
			total += v->w[i];
			same &= v->w[i] == v->w[ties[0]];
		}
	u = draw(rnd);
	if (total == 0 || same) {
		want = scaled(u, count);
		for (i = 0; i < v->n; i++)
			if (scan_cost(lb, v, i, now, shortest) == min &&
			    k++ == want)
				return i;
		return ties[0];
	}
	off = (uint64_t)scaled(u, total);
	for (i = 0; i < v->n; i++)
		if (scan_cost(lb, v, i, now, shortest) == min) {
			sum += v->w[i];
			if (sum > off)
				return i;
		}
	return ties[0];
}

resil_err
resil__lb_pick(resil__lb *lb, const resil__view *v, const resil_request *req,
    const resil_random *rnd, uint64_t now, size_t *out, resil_diag *diag)
{
	size_t i, j;

	switch (lb->cfg.kind) {
	case RESIL_LB_RANDOM:
		*out = weighted(v, rnd);
		return RESIL_OK;
	case RESIL_LB_ROUNDROBIN:
		return roundrobin(lb, v, out);
	case RESIL_LB_LEASTACTIVE:
		*out = min_scan(lb, v, rnd, now, 0);
		return RESIL_OK;
	case RESIL_LB_SHORTEST:
		*out = min_scan(lb, v, rnd, now, 1);
		return RESIL_OK;
	case RESIL_LB_P2C:
		if (v->n == 1) {
			*out = 0;
			return RESIL_OK;
		}
		two(v, rnd, &i, &j);
		*out = active_of(v, j) < active_of(v, i) ? j : i;
		return RESIL_OK;
	case RESIL_LB_PEAKEWMA:
		if (v->n == 1) {
			*out = 0;
			return RESIL_OK;
		}
		two(v, rnd, &i, &j);
		*out = ewma_load(lb, v, j, now) < ewma_load(lb, v, i, now) ? j
		                                                           : i;
		return RESIL_OK;
	case RESIL_LB_HASH:
		return consistent(lb, v, req, out, diag);
	}
	return RESIL_E_INVAL;
}

void
resil__lb_init(resil__lb *lb, const resil_balance_config *cfg,
    const resil_allocator *a, resil__epoch *epoch)
{
	memset(lb, 0, sizeof(*lb));
	lb->cfg = *cfg;
	lb->a = a;
	lb->epoch = epoch;
	/* PeakEWMA and shortest response choose by what the endpoints learn
	 * from each outcome: their picks' reports feed it. */
	if (cfg->kind == RESIL_LB_PEAKEWMA)
		lb->feeds = RESIL__EP_EWMA;
	else if (cfg->kind == RESIL_LB_SHORTEST)
		lb->feeds = RESIL__EP_WINDOW;
	resil__spin_init(&lb->lock);
}

void
resil__lb_deinit(resil__lb *lb)
{
	if (lb->rr_ids != NULL) {
		resil__free(lb->a, lb->rr_ids, lb->rr_n * sizeof(*lb->rr_ids));
		resil__free(lb->a, lb->rr_cur, lb->rr_n * sizeof(*lb->rr_cur));
	}
	/* Readers are gone by now (the selector is being freed). */
	{
		unsigned i;
		for (i = 0; i < RESIL__RINGS; i++) {
			ring_free(lb->rings[i]);
			lb->rings[i] = NULL;
		}
	}
}

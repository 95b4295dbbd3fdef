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

#if defined(__GNUC__)
#define RESIL__BAL_NOINLINE __attribute__((noinline))
#define RESIL__BAL_INLINE static inline __attribute__((always_inline))
#else
#define RESIL__BAL_NOINLINE
#define RESIL__BAL_INLINE static inline
#endif

/* resil_random_uniform(rnd), inlined: one call less per draw. */
static inline double
draw(const resil_random *rnd)
{
	double u;

	if (rnd == NULL || rnd->uniform == NULL)
		return 0.0;
	u = rnd->uniform(rnd->ctx);
	if (!(u >= 0.0)) /* NaN too */
		return 0.0;
	return u >= 1.0 ? 0x1.fffffffffffffp-1 : u;
}

/* floor(u * n), kept below n whatever the rounding. */
static size_t
scaled(double u, uint64_t n)
{
	/* Signed conversions (one instruction each way on x86-64): n and
	 * u * n are below 2^63. */
	uint64_t k = (uint64_t)(int64_t)(u * (double)(int64_t)n);

	return (size_t)(k >= n ? n - 1 : k);
}

/* The first i with cum[i] > off (off < total = cum[n - 1]), for a large
 * view: from the guess the running sums give if they were even, a
 * doubling step outwards, then halving: a few loads when the weights
 * are about even, O(log n) whatever they are. */
static size_t
find_cum(const resil__view *v, uint64_t off)
{
	const uint64_t *c = v->cum;
	size_t n = v->n, g, lo, hi, step;

	g = (size_t)((double)off / (double)v->total * (double)n);
	if (g >= n)
		g = n - 1;
	if (c[g] <= off) { /* above g */
		lo = g + 1;
		hi = lo;
		for (step = 1; hi < n - 1 && c[hi] <= off; step *= 2) {
			lo = hi + 1;
			hi = g + 2 * step < n - 1 ? g + 2 * step : n - 1;
		}
	} else { /* at or below g */
		hi = g;
		lo = 0;
		for (step = 1; step <= g; step *= 2) {
			if (c[g - step] <= off) {
				lo = g - step + 1;
				break;
			}
			hi = g - step;
		}
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c[mid] > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The weighted choice over v (n >= 2) by draw u. */
static size_t
weighted_at(const resil__view *v, double u)
{
	const uint64_t *base;
	uint64_t off;
	size_t len;

	if (v->total == 0 || v->same)
		return scaled(u, v->n);
	off = (uint64_t)scaled(u, v->total);
	if (v->n > RESIL_LB_SCAN_MAX)
		return find_cum(v, off);
	/* The first running sum above off (the last one, the total, is).
	 * Branch-free halving: the draws make every branch a coin flip. */
	base = v->cum;
	len = v->n;
	while (len > 1) {
		size_t half = len / 2;
		base += half & ((size_t)0 - (size_t)(base[half - 1] <= off));
		len -= half;
	}
	return (size_t)(base - v->cum);
}

/* Two weighted choices over v (n >= 2), by u1 and by u2, in one loop:
 * the two searches have the same steps, so their loads overlap. */
static void
weighted_two(const resil__view *v, double u1, double u2, size_t *a, size_t *b)
{
	const uint64_t *x, *y;
	uint64_t o1, o2;
	size_t len;

	if (v->total == 0 || v->same) {
		*a = scaled(u1, v->n);
		*b = scaled(u2, v->n);
		return;
	}
	o1 = (uint64_t)scaled(u1, v->total);
	o2 = (uint64_t)scaled(u2, v->total);
	if (v->n > RESIL_LB_SCAN_MAX) {
		*a = find_cum(v, o1);
		*b = find_cum(v, o2);
		return;
	}
	x = y = v->cum;
	len = v->n;
	while (len > 1) {
		size_t half = len / 2;
		/* Arithmetic, not a choice, so that no branch is made. */
		x += half & ((size_t)0 - (size_t)(x[half - 1] <= o1));
		y += half & ((size_t)0 - (size_t)(y[half - 1] <= o2));
		len -= half;
	}
	*a = (size_t)(x - v->cum);
	*b = (size_t)(y - v->cum);
}

/* The weighted choice over v. */
static size_t
weighted(const resil__view *v, const resil_random *rnd)
{
	if (v->n == 1)
		return 0;
	return weighted_at(v, draw(rnd));
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

/*
 * Smooth weighted round robin, exactly (balance.h), in O(groups) per pick
 * instead of a scan. Over a fixed view every pick adds each candidate's
 * weight to its counter, so after t picks counter p is c[p] + w[p] * t:
 * only the winner's intercept c[p] changes (it gives back the total).
 * Candidates of one weight keep their order as t grows, so each weight's
 * candidates form a ring sorted by intercept (first in order on a tie),
 * and a pick compares the heads of the groups at t + 1 (rf_requeue: the
 * winner nearly always becomes the last of its ring). The state
 * is built for the view picked from (its snapshot version, candidate set
 * and weights) and folded back into rr_cur when another view, a new
 * snapshot or too long a run comes; a view of more than RESIL__RR_GROUPS
 * distinct weights is scanned as before.
 */

static void
rf_free(resil__lb *lb)
{
	if (lb->rf_cap == 0)
		return;
	resil__free(lb->a, lb->rf_c, lb->rf_cap * sizeof(*lb->rf_c));
	resil__free(lb->a, lb->rf_idx, lb->rf_cap * sizeof(*lb->rf_idx));
	resil__free(lb->a, lb->rf_heap, lb->rf_cap * sizeof(*lb->rf_heap));
	lb->rf_c = NULL;
	lb->rf_idx = NULL;
	lb->rf_heap = NULL;
	lb->rf_cap = 0;
}

/* Write the fast state's counters back into rr_cur and drop it. */
static void
rf_fold(resil__lb *lb)
{
	size_t g, k;

	if (lb->rf_ok != 1) {
		lb->rf_ok = 0;
		return;
	}
	for (g = 0; g < lb->rf_ng; g++) {
		int64_t add = lb->rf_gw[g] * (int64_t)lb->rf_t;
		for (k = 0; k < lb->rf_gn[g]; k++) {
			uint32_t p = lb->rf_heap[lb->rf_g0[g] + k];
			lb->rr_cur[lb->rf_idx[p]] = lb->rf_c[p] + add;
		}
	}
	lb->rf_ok = 0;
}

/* Whether heap entry a goes above b: the larger intercept, then the
 * first in order. */
static int
rf_above(const resil__lb *lb, uint32_t a, uint32_t b)
{
	int64_t ca = lb->rf_c[a], cb = lb->rf_c[b];

	/* Bitwise, not short-circuit: no branch on the data. */
	return (ca > cb) | ((ca == cb) & (a < b));
}

static void
rf_sift(resil__lb *lb, uint32_t *h, size_t n, size_t i)
{
	uint32_t x = h[i];

	for (;;) {
		size_t l = 2 * i + 1, m;
		if (l >= n)
			break;
		/* The larger child, chosen by arithmetic: which one is a
		 * coin flip for the branch predictor. */
		m = l + (size_t)(l + 1 < n && rf_above(lb, h[l + 1], h[l]));
		if (!rf_above(lb, h[m], x))
			break;
		h[i] = h[m];
		i = m;
	}
	h[i] = x;
}

/* Build the fast state for v from rr_cur (in step with v's snapshot);
 * 0 if v has too many distinct weights. */
static int
rf_build(resil__lb *lb, const resil__view *v, int unit)
{
	uint32_t fill[RESIL__RR_GROUPS];
	size_t i, g, ng = 0, last = 0;

	if (v->n > lb->rf_cap)
		return 0; /* the arrays have the snapshot's size */
	for (i = 0; i < v->n; i++) {
		int64_t w = unit ? 1 : (int64_t)v->w[i];
		if (ng > 0 && lb->rf_gw[last] == w)
			continue;
		for (g = 0; g < ng && lb->rf_gw[g] != w; g++)
			;
		if (g == ng) {
			if (ng == RESIL__RR_GROUPS)
				return 0;
			lb->rf_gw[ng] = w;
			lb->rf_gn[ng++] = 0;
		}
		last = g;
	}
	for (i = 0; i < v->n; i++) {
		int64_t w = unit ? 1 : (int64_t)v->w[i];
		if (lb->rf_gw[last] != w)
			for (last = 0; lb->rf_gw[last] != w; last++)
				;
		lb->rf_gn[last]++;
		lb->rf_idx[i] = v->idx[i];
		lb->rf_c[i] = lb->rr_cur[v->idx[i]];
	}
	for (g = 0, i = 0; g < ng; g++) {
		lb->rf_g0[g] = (uint32_t)i;
		fill[g] = (uint32_t)i;
		i += lb->rf_gn[g];
	}
	for (i = 0; i < v->n; i++) {
		int64_t w = unit ? 1 : (int64_t)v->w[i];
		if (lb->rf_gw[last] != w)
			for (last = 0; lb->rf_gw[last] != w; last++)
				;
		lb->rf_heap[fill[last]++] = (uint32_t)i;
	}
	for (g = 0; g < ng; g++) {
		uint32_t *h = lb->rf_heap + lb->rf_g0[g];
		size_t n = lb->rf_gn[g], k;
		/* Heapsort (the first one last), then reversed: the ring in
		 * order, the first to win at its head. */
		for (k = n / 2; k-- > 0;)
			rf_sift(lb, h, n, k);
		for (k = n; k-- > 1;) {
			uint32_t top = h[0];
			h[0] = h[k];
			h[k] = top;
			rf_sift(lb, h, k, 0);
		}
		for (k = 0; k < n / 2; k++) {
			uint32_t tmp = h[k];
			h[k] = h[n - 1 - k];
			h[n - 1 - k] = tmp;
		}
		lb->rf_gs[g] = 0;
	}
	lb->rf_ng = ng;
	lb->rf_n = v->n;
	lb->rf_version = v->snap->version;
	lb->rf_sig = v->sig;
	lb->rf_wsig = v->wsig;
	lb->rf_t = 0;
	lb->rf_total = unit ? (int64_t)v->n : (int64_t)v->total;
	lb->rf_ok = 1;
	return 1;
}

/* Align the counters with snapshot s, carrying them over by id (ids grow
 * along every snapshot, so this is a merge). The fast state is folded
 * back first. */
static resil_err
rr_sync(resil__lb *lb, const resil__snapshot *s)
{
	uint64_t *ids = NULL;
	int64_t *cur = NULL, *fc = NULL;
	uint32_t *fi = NULL, *fh = NULL;
	size_t i, j = 0;

	rf_fold(lb);
	if (s->n > 0) {
		ids = resil__alloc(lb->a, s->n * sizeof(*ids));
		cur = resil__alloc(lb->a, s->n * sizeof(*cur));
		if (s->n > lb->rf_cap) {
			fc = resil__alloc(lb->a, s->n * sizeof(*fc));
			fi = resil__alloc(lb->a, s->n * sizeof(*fi));
			fh = resil__alloc(lb->a, s->n * sizeof(*fh));
		}
		if (ids == NULL || cur == NULL ||
		    (s->n > lb->rf_cap &&
		        (fc == NULL || fi == NULL || fh == NULL))) {
			if (ids != NULL)
				resil__free(lb->a, ids, s->n * sizeof(*ids));
			if (cur != NULL)
				resil__free(lb->a, cur, s->n * sizeof(*cur));
			if (fc != NULL)
				resil__free(lb->a, fc, s->n * sizeof(*fc));
			if (fi != NULL)
				resil__free(lb->a, fi, s->n * sizeof(*fi));
			if (fh != NULL)
				resil__free(lb->a, fh, s->n * sizeof(*fh));
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
	if (fc != NULL) {
		rf_free(lb);
		lb->rf_c = fc;
		lb->rf_idx = fi;
		lb->rf_heap = fh;
		lb->rf_cap = s->n;
	}
	lb->rr_ids = ids;
	lb->rr_cur = cur;
	lb->rr_n = s->n;
	lb->rr_version = s->version;
	return RESIL_OK;
}

/* The scan over rr_cur (the fast state folded back). */
static size_t
rr_scan(resil__lb *lb, const resil__view *v, int unit)
{
	size_t i, best = 0;
	int64_t total = 0;

	for (i = 0; i < v->n; i++) {
		int64_t w = unit ? 1 : (int64_t)v->w[i];
		int64_t *c = &lb->rr_cur[v->idx[i]];
		*c += w;
		total += w;
		if (i == 0 || *c > lb->rr_cur[v->idx[best]])
			best = i;
	}
	lb->rr_cur[v->idx[best]] -= total;
	return best;
}

/* The head of group g has just given back the total: put it in its
 * place in the ring. It is nearly always the last (candidates of one
 * weight take turns: the ring only turns); else it moves up past the
 * ones it now goes before, as in an insertion sort. */
static void
rf_requeue(resil__lb *lb, size_t g)
{
	uint32_t *r = lb->rf_heap + lb->rf_g0[g];
	size_t n = lb->rf_gn[g], s = lb->rf_gs[g], j, k;
	uint32_t p;

	if (n == 1)
		return;
	p = r[s];
	s = s + 1 == n ? 0 : s + 1;
	lb->rf_gs[g] = (uint32_t)s;
	/* Now p is the last, at slot s - 1; j walks back from there. */
	j = s == 0 ? n - 1 : s - 1;
	for (;;) {
		k = j == 0 ? n - 1 : j - 1; /* the one before j */
		if (k == j || j == s || !rf_above(lb, p, r[k]))
			break;
		r[j] = r[k];
		j = k;
	}
	r[j] = p;
}

/* Fold the run back before t * weight could overflow. */
#define RF_RUN (UINT64_C(1) << 24)

static size_t
rf_pick(resil__lb *lb)
{
	int64_t t = (int64_t)lb->rf_t + 1, bv = 0;
	uint32_t bp = 0;
	size_t g, bg = 0;

	for (g = 0; g < lb->rf_ng; g++) {
		uint32_t p = lb->rf_heap[lb->rf_g0[g] + lb->rf_gs[g]];
		int64_t val = lb->rf_c[p] + lb->rf_gw[g] * t;
		if (g == 0 || val > bv || (val == bv && p < bp)) {
			bv = val;
			bp = p;
			bg = g;
		}
	}
	lb->rf_c[bp] -= lb->rf_total;
	rf_requeue(lb, bg);
	lb->rf_t = (uint64_t)t;
	if (lb->rf_t >= RF_RUN) {
		/* c + w * t for every candidate: the heaps keep their order
		 * (one weight per heap). */
		for (g = 0; g < lb->rf_ng; g++) {
			int64_t add = lb->rf_gw[g] * t;
			size_t k;
			for (k = 0; k < lb->rf_gn[g]; k++)
				lb->rf_c[lb->rf_heap[lb->rf_g0[g] + k]] += add;
		}
		lb->rf_t = 0;
	}
	return bp;
}

/* Up to this many candidates the scan is cheaper than the heaps. */
#define RR_SCAN 8

static RESIL__BAL_NOINLINE resil_err
roundrobin(resil__lb *lb, const resil__view *v, size_t *out)
{
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
	if (v->n <= RR_SCAN) {
		rf_fold(lb);
		*out = rr_scan(lb, v, unit);
		resil__spin_unlock(&lb->lock);
		return RESIL_OK;
	}
	if (lb->rf_ok == 0 || lb->rf_version != v->snap->version ||
	    lb->rf_sig != v->sig || lb->rf_wsig != v->wsig ||
	    lb->rf_n != v->n) {
		rf_fold(lb);
		if (!rf_build(lb, v, unit)) {
			/* Remember the view: it is scanned until another. */
			lb->rf_ok = 2;
			lb->rf_n = v->n;
			lb->rf_version = v->snap->version;
			lb->rf_sig = v->sig;
			lb->rf_wsig = v->wsig;
		}
	}
	*out = lb->rf_ok == 1 ? rf_pick(lb) : rr_scan(lb, v, unit);
	resil__spin_unlock(&lb->lock);
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
	uint64_t h = resil__fnv1a64(RESIL__FNV0, address, strlen(address));

	h = resil__fnv1a64(h, "#", 1);
	h = resil__fnv1a64(h, &i, sizeof(i));
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
		const resil__endpoint *ep = v->snap->eps[v->idx[i]];
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
	uint64_t h = RESIL__FNV0;
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
		h = resil__fnv1a64(h, s, strlen(s));
		h = resil__fnv1a64(h, "\x1f", 1);
	}
	*out = resil__mix64(h);
	return RESIL_OK;
}

static RESIL__BAL_NOINLINE resil_err
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
		if (v->snap->eps[v->idx[mid]]->id < id)
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
	return resil__ep_active(v->snap->eps[v->idx[i]]);
}

/* The second draw of a pick that takes one (balance.h): the top 53 bits
 * of mix64 of u's bits. */
static double
second(double u)
{
	uint64_t bits;

	memcpy(&bits, &u, sizeof(bits));
	return (double)(resil__mix64(bits ^ UINT64_C(0x9e3779b97f4a7c15)) >>
	           11) *
	    0x1p-53;
}

/* The two distinct samples (Finagle: two draws; above RESIL_LB_SCAN_MAX
 * candidates one, u and second(u)). */
RESIL__BAL_INLINE void
two(const resil__view *v, const resil_random *rnd, size_t *i, size_t *j)
{
	double u;

	if (v->n == 2) {
		*i = 0;
		*j = 1;
		return;
	}
	u = draw(rnd);
	*i = scaled(u, v->n);
	*j =
	    scaled(v->n > RESIL_LB_SCAN_MAX ? second(u) : draw(rnd), v->n - 1);
	if (*j >= *i)
		(*j)++;
}

static double
ewma_load(const resil__lb *lb, const resil__view *v, size_t i, uint64_t now)
{
	const resil__endpoint *ep = v->snap->eps[v->idx[i]];

	return resil__ep_ewma(ep, now, (double)lb->cfg.ewma_tau,
	           (double)lb->cfg.ewma_default_rtt) *
	    (double)(resil__ep_active(ep) + 1);
}

/* Shortest response's estimate of ep at now. */
static uint64_t
sr_estimate(const resil__endpoint *ep, uint64_t now, uint64_t slide)
{
	uint64_t s, reset;

	s = resil__load64(&ep->sr_successes);
	reset = resil__load64(&ep->sr_reset_at);
	if (s == 0 || (slide != 0 && now - reset > slide))
		return 0;
	return resil__load64(&ep->sr_elapsed) / s * (resil__ep_active(ep) + 1);
}

/* Least-active's and shortest-response's cost of candidate i. */
static uint64_t
scan_cost(const resil__lb *lb, const resil__view *v, size_t i, uint64_t now,
    int shortest)
{
	const resil__endpoint *ep = v->snap->eps[v->idx[i]];

	if (!shortest)
		return resil__ep_active(ep);
	return sr_estimate(ep, now, lb->cfg.shortest_slide);
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

/* Above RESIL_LB_SCAN_MAX candidates, least-active and shortest response
 * sample (balance.h): one draw u gives two weighted choices, by u and by
 * u' (the top 53 bits of mix64 of u's bits); the lower cost wins, a tie
 * goes to the first, so over equal costs this is the weighted choice. */
static size_t
min_sample(const resil__lb *lb, const resil__view *v, const resil_random *rnd,
    uint64_t now, int shortest)
{
	double u = draw(rnd);
	uint64_t ca, cb;
	size_t a, b;

	weighted_two(v, u, second(u), &a, &b);
	if (shortest) {
		const resil__endpoint *ea = v->snap->eps[v->idx[a]];
		const resil__endpoint *eb = v->snap->eps[v->idx[b]];

		/* Each estimate reads its endpoint's first two lines (in
		 * flight, the window): ask for all four before the first is
		 * used. */
		__builtin_prefetch(ea->fl);
		__builtin_prefetch(eb->fl);
		__builtin_prefetch(&ea->sr_successes);
		__builtin_prefetch(&eb->sr_successes);
		ca = sr_estimate(ea, now, lb->cfg.shortest_slide);
		cb = sr_estimate(eb, now, lb->cfg.shortest_slide);
		return cb < ca ? b : a;
	}
	/* Both costs are read before either is used: their loads overlap. */
	ca = scan_cost(lb, v, a, now, shortest);
	cb = scan_cost(lb, v, b, now, shortest);
	return cb < ca ? b : a;
}

/* Each balancer's pick on its own, out of line: the dispatch below is a
 * tail call that saves no registers and keeps no frame, and a pick pays only
 * for its own (least-active's scan keeps its ties on the stack, the hash its
 * key). */
static RESIL__BAL_NOINLINE resil_err
pick_random(const resil__view *v, const resil_random *rnd, size_t *out)
{
	*out = weighted(v, rnd);
	return RESIL_OK;
}

static RESIL__BAL_NOINLINE resil_err
pick_min(const resil__lb *lb, const resil__view *v, const resil_random *rnd,
    uint64_t now, int shortest, size_t *out)
{
	*out = v->n > RESIL_LB_SCAN_MAX ? min_sample(lb, v, rnd, now, shortest)
	                                : min_scan(lb, v, rnd, now, shortest);
	return RESIL_OK;
}

static RESIL__BAL_NOINLINE resil_err
pick_p2c(const resil__view *v, const resil_random *rnd, size_t *out)
{
	size_t i, j;

	if (v->n == 1) {
		*out = 0;
		return RESIL_OK;
	}
	two(v, rnd, &i, &j);
	*out = active_of(v, j) < active_of(v, i) ? j : i;
	return RESIL_OK;
}

static RESIL__BAL_NOINLINE resil_err
pick_peakewma(const resil__lb *lb, const resil__view *v,
    const resil_random *rnd, uint64_t now, size_t *out)
{
	size_t i, j;

	if (v->n == 1) {
		*out = 0;
		return RESIL_OK;
	}
	two(v, rnd, &i, &j);
	*out = ewma_load(lb, v, j, now) < ewma_load(lb, v, i, now) ? j : i;
	return RESIL_OK;
}

resil_err
resil__lb_pick(resil__lb *lb, const resil__view *v, const resil_request *req,
    const resil_random *rnd, uint64_t now, size_t *out, resil_diag *diag)
{
	switch (lb->cfg.kind) {
	case RESIL_LB_RANDOM:
		return pick_random(v, rnd, out);
	case RESIL_LB_ROUNDROBIN:
		return roundrobin(lb, v, out);
	case RESIL_LB_LEASTACTIVE:
		return pick_min(lb, v, rnd, now, 0, out);
	case RESIL_LB_SHORTEST:
		return pick_min(lb, v, rnd, now, 1, out);
	case RESIL_LB_P2C:
		return pick_p2c(v, rnd, out);
	case RESIL_LB_PEAKEWMA:
		return pick_peakewma(lb, v, rnd, now, out);
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
	rf_free(lb);
	/* Readers are gone by now (the selector is being freed). */
	{
		unsigned i;
		for (i = 0; i < RESIL__RINGS; i++) {
			ring_free(lb->rings[i]);
			lb->rings[i] = NULL;
		}
	}
}

resil_err
resil_balance_endpoint_get(resil_directory *d, const resil_balance_config *c,
    const char *address, resil_balance_endpoint *out)
{
	resil_balance_config dflt;
	resil__snapshot *s;
	const resil__entry *e = NULL;
	const resil__endpoint *ep;
	uint64_t now, slide;
	size_t i;

	if (d == NULL || address == NULL || out == NULL)
		return RESIL_E_INVAL;
	if (c == NULL) {
		resil_balance_config_init(&dflt);
		c = &dflt;
	}
	if (resil_balance_config_validate(c, "", NULL) != RESIL_OK)
		return RESIL_E_INVAL;
	now = resil__dir_now(d);
	s = resil__dir_acquire(d);
	for (i = 0; i < s->n && e == NULL; i++)
		if (strcmp(s->e[i].ep->address, address) == 0)
			e = &s->e[i];
	if (e == NULL) {
		resil__snap_release(s);
		return RESIL_E_NOTFOUND;
	}
	ep = e->ep;
	slide = c->shortest_slide;
	memset(out, 0, sizeof(*out));
	out->id = ep->id;
	out->active = resil__ep_active(ep);
	out->weight = resil_warmup_weight(e->weight, e->start, e->warmup, now);
	out->ewma_seen = resil__load64(&ep->ewma_seen) != 0;
	out->ewma_cost = resil__ep_ewma(
	    ep, now, (double)c->ewma_tau, (double)c->ewma_default_rtt);
	out->ewma_load = out->ewma_cost * (double)(out->active + 1);
	out->sr_successes = resil__load64(&ep->sr_successes);
	out->sr_elapsed = resil__load64(&ep->sr_elapsed);
	out->sr_reset_at = resil__load64(&ep->sr_reset_at);
	out->sr_expired = slide != 0 && now - out->sr_reset_at > slide;
	out->sr_estimate = sr_estimate(ep, now, slide);
	resil__snap_release(s);
	return RESIL_OK;
}

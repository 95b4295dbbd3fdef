/*
 * Active health checks driven by the caller: a heap of targets keyed by
 * the next thing due (a probe, or an outstanding probe's timeout), and
 * Envoy's threshold and interval rules.
 */
#include <resil/health.h>

#include "atomic.h"
#include "internal.h"
#include "kv.h"

#include <uthash.h>

/* A failed uthash allocation sets the caller's resil__oom. */
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(obj) (resil__oom = 1)

/* A probe id: a sequence number over the checker above the target's slot,
 * so a report finds its target in one step and a stale id (a timed-out
 * probe, a removed target, a slot reused) never matches. */
#define SLOT_BITS 20

/* The size of a tgt pointer, the element of the heap and slot arrays
 * (sizeof(void *): a sizeof of a pointer to a struct reads as a bug). */
#define TGTP sizeof(void *)
#define SLOT_MASK ((UINT64_C(1) << SLOT_BITS) - 1)

typedef struct tgt {
	UT_hash_handle hh;
	char *address;
	size_t alen;
	void *user;
	uint64_t order;    /* add order: ties go to the older target */
	uint64_t key;      /* heap key: the next due, or deadline + 1 */
	size_t hpos;       /* position in the heap */
	uint32_t slot;     /* index in slots */
	uint64_t probe;    /* the probe out, when probing */
	uint64_t deadline; /* its deadline */
	uint64_t nprobes;
	uint32_t succ; /* consecutive OK while UNHEALTHY */
	uint32_t fail; /* consecutive failures while HEALTHY */
	int healthy;
	int probing;
	int first; /* no result yet */
} tgt;

_Static_assert(sizeof(tgt *) == sizeof(void *), "TGTP");

struct resil_health {
	resil__spinlock lock;
	resil_allocator a;
	resil_health_config cfg; /* the intervals resolved */
	int own_rng;
	resil_rng rng;
	resil_random rnd;
	tgt *table; /* by address */
	tgt **heap;
	size_t n;
	tgt **slots;
	uint32_t *free_slots;
	size_t nslots, nfree, cap; /* cap: of heap, slots and free_slots */
	uint64_t seq, order;
	size_t healthy;
	resil_health_metrics m;
};

const char *
resil_probe_result_name(resil_probe_result r)
{
	switch (r) {
	case RESIL_PROBE_OK:
		return "ok";
	case RESIL_PROBE_FAILED:
		return "failed";
	case RESIL_PROBE_TIMEOUT:
		return "timeout";
	case RESIL_PROBE_DOWN:
		return "down";
	}
	return "unknown";
}

const char *
resil_health_event_name(resil_health_event_type t)
{
	switch (t) {
	case RESIL_HEALTH_BECAME_HEALTHY:
		return "HEALTHY";
	case RESIL_HEALTH_BECAME_UNHEALTHY:
		return "UNHEALTHY";
	}
	return "UNKNOWN";
}

/* ---- configuration ---- */

typedef struct dkey {
	const char *key;
	size_t off;
	uint64_t lo;
} dkey;

#define DK(k, f, lo)                                                         \
	{                                                                    \
		k, offsetof(resil_health_config, f), lo                      \
	}

static const dkey durations[] = {
	DK("health.interval", interval_ns, 1),
	DK("health.timeout", timeout_ns, 1),
	DK("health.unhealthy_interval", unhealthy_interval_ns, 0),
	DK("health.unhealthy_edge_interval", unhealthy_edge_interval_ns, 0),
	DK("health.healthy_edge_interval", healthy_edge_interval_ns, 0),
	DK("health.interval_jitter", interval_jitter_ns, 0),
	DK("health.initial_jitter", initial_jitter_ns, 0),
};

resil_err
resil_health_config_set(resil_health_config *cfg, const char *key,
    const char *value, resil_diag *diag)
{
	char b[32];
	uint64_t u = 0;
	uint32_t x = 0;
	size_t i;
	resil_err e;

	if (cfg == NULL || key == NULL || value == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "health: NULL argument");
		return RESIL_E_INVAL;
	}
	for (i = 0; i < sizeof(durations) / sizeof(durations[0]); i++) {
		if (strcmp(key, durations[i].key) != 0)
			continue;
		e = resil__kv_duration(key, value, durations[i].lo, &u, diag);
		if (e == RESIL_OK)
			memcpy((char *)cfg + durations[i].off, &u, sizeof(u));
		return e;
	}
	if (strcmp(key, "health.interval_jitter_percent") == 0) {
		if ((e = resil__kv_u32(key, value, 0, 100, &x, diag)) ==
		    RESIL_OK)
			cfg->interval_jitter_pct = x;
		return e;
	}
	if (strcmp(key, "health.unhealthy_threshold") == 0 ||
	    strcmp(key, "health.healthy_threshold") == 0) {
		e = resil__kv_u32(key, value, 1, UINT32_MAX, &x, diag);
		if (e == RESIL_OK) {
			if (key[7] == 'u')
				cfg->unhealthy_threshold = x;
			else
				cfg->healthy_threshold = x;
		}
		return e;
	}
	if (strcmp(key, "health.seed") == 0) {
		if ((e = resil__kv_u64(key, value, 0, UINT64_MAX, &u, diag)) ==
		    RESIL_OK)
			cfg->seed = u;
		return e;
	}
	if (strcmp(key, "health.initial") == 0) {
		if (resil__kv_trim(key, value, b, sizeof(b), diag) != 0)
			return RESIL_E_INVAL;
		for (i = 0; b[i] != '\0'; i++)
			if (b[i] >= 'A' && b[i] <= 'Z')
				b[i] = (char)(b[i] - 'A' + 'a');
		if (strcmp(b, "healthy") == 0 || strcmp(b, "unhealthy") == 0) {
			cfg->initial_healthy = b[0] == 'h';
			return RESIL_OK;
		}
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not healthy or unhealthy", key, b);
		return RESIL_E_INVAL;
	}
	resil__diagf(diag, RESIL_E_INVAL,
	    "%s: unknown key (health keys: interval, timeout, "
	    "[un]healthy_edge_interval, unhealthy_interval, interval_jitter, "
	    "interval_jitter_percent, initial_jitter, [un]healthy_threshold, "
	    "initial, seed)",
	    key);
	return RESIL_E_INVAL;
}

resil_err
resil_health_config_validate(const resil_health_config *cfg, resil_diag *diag)
{
	if (cfg == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "health: NULL config");
		return RESIL_E_INVAL;
	}
	if (cfg->size != sizeof(*cfg)) {
		resil__check_size(diag, "health", "resil_health_config",
		    cfg->size, sizeof(*cfg));
		return RESIL_E_INVAL;
	}
	if (cfg->interval_ns == 0) {
		resil__diagf(
		    diag, RESIL_E_INVAL, "health.interval_ns: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	if (cfg->timeout_ns == 0) {
		resil__diagf(
		    diag, RESIL_E_INVAL, "health.timeout_ns: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	if (cfg->interval_jitter_pct > 100) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "health.interval_jitter_pct: %u is out of range 0..100",
		    cfg->interval_jitter_pct);
		return RESIL_E_INVAL;
	}
	if (cfg->unhealthy_threshold == 0) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "health.unhealthy_threshold: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	if (cfg->healthy_threshold == 0) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "health.healthy_threshold: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	return RESIL_OK;
}

resil_err
resil_health_new(
    resil_health **out, const resil_health_config *cfg, resil_diag *diag)
{
	const resil_allocator *a;
	resil_health *hc;
	resil_err e;

	if (out == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "health: NULL out");
		return RESIL_E_INVAL;
	}
	if ((e = resil_health_config_validate(cfg, diag)) != RESIL_OK)
		return e;
	a = resil__allocator(cfg->alloc);
	hc = resil__calloc(a, sizeof(*hc));
	if (hc == NULL)
		return RESIL_E_NOMEM;
	hc->a = *a;
	hc->cfg = *cfg;
	hc->cfg.alloc = NULL;
	hc->cfg.random = NULL;
	/* Envoy's defaults for the intervals left at 0. */
	if (hc->cfg.unhealthy_interval_ns == 0)
		hc->cfg.unhealthy_interval_ns = hc->cfg.interval_ns;
	if (hc->cfg.unhealthy_edge_interval_ns == 0)
		hc->cfg.unhealthy_edge_interval_ns =
		    hc->cfg.unhealthy_interval_ns;
	if (hc->cfg.healthy_edge_interval_ns == 0)
		hc->cfg.healthy_edge_interval_ns = hc->cfg.interval_ns;
	if (cfg->random != NULL && cfg->random->uniform != NULL) {
		hc->rnd = *cfg->random;
	} else {
		hc->own_rng = 1;
		resil_rng_seed(&hc->rng, cfg->seed);
	}
	resil__spin_init(&hc->lock);
	*out = hc;
	return RESIL_OK;
}

static void
tgt_free(const resil_allocator *a, tgt *t)
{
	resil__free(a, t->address, t->alen + 1);
	resil__free(a, t, sizeof(*t));
}

void
resil_health_free(resil_health *hc)
{
	const resil_allocator *resil__a;
	tgt *t, *tmp;

	if (hc == NULL)
		return;
	resil__a = &hc->a;
	HASH_ITER(hh, hc->table, t, tmp)
	{
		HASH_DELETE(hh, hc->table, t);
		tgt_free(&hc->a, t);
	}
	HASH_CLEAR(hh, hc->table);
	resil__free(resil__a, hc->heap, hc->cap * TGTP);
	resil__free(resil__a, hc->slots, hc->cap * TGTP);
	resil__free(
	    resil__a, hc->free_slots, hc->cap * sizeof(*hc->free_slots));
	{
		resil_allocator a = hc->a;

		resil__free(&a, hc, sizeof(*hc));
	}
}

/* ---- the heap: the smallest (key, order) on top ---- */

static int
before(const tgt *x, const tgt *y)
{
	return x->key < y->key || (x->key == y->key && x->order < y->order);
}

static void
heap_set(resil_health *hc, size_t i, tgt *t)
{
	hc->heap[i] = t;
	t->hpos = i;
}

static void
sift_up(resil_health *hc, size_t i)
{
	tgt *t = hc->heap[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!before(t, hc->heap[p]))
			break;
		heap_set(hc, i, hc->heap[p]);
		i = p;
	}
	heap_set(hc, i, t);
}

static void
sift_down(resil_health *hc, size_t i)
{
	tgt *t = hc->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= hc->n)
			break;
		if (c + 1 < hc->n && before(hc->heap[c + 1], hc->heap[c]))
			c++;
		if (!before(hc->heap[c], t))
			break;
		heap_set(hc, i, hc->heap[c]);
		i = c;
	}
	heap_set(hc, i, t);
}

/* t's key changed: put it back in place. */
static void
heap_fix(resil_health *hc, tgt *t)
{
	size_t i = t->hpos;

	if (i > 0 && before(t, hc->heap[(i - 1) / 2]))
		sift_up(hc, i);
	else
		sift_down(hc, i);
}

static void
heap_remove(resil_health *hc, tgt *t)
{
	size_t i = t->hpos;
	tgt *last = hc->heap[--hc->n];

	if (last == t)
		return;
	heap_set(hc, i, last);
	heap_fix(hc, last);
}

/* ---- timing ---- */

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static double
draw(resil_health *hc)
{
	return hc->own_rng ? resil_rng_uniform(&hc->rng)
	                   : resil_random_uniform(&hc->rnd);
}

/* floor(u * span) for a span of ticks: one draw, nothing for 0. */
static uint64_t
jitter(resil_health *hc, uint64_t span)
{
	double j;

	if (span == 0)
		return 0;
	j = draw(hc) * (double)span;
	/* u < 1, but the product of a u near 1 and a huge span may round
	 * up to span itself. */
	if (!(j < (double)span))
		return span - 1;
	return (uint64_t)j;
}

/* Envoy's interval for the result just recorded, with its jitter. */
static uint64_t
interval_for(resil_health *hc, int passed, int pending)
{
	const resil_health_config *c = &hc->cfg;
	uint64_t base, pct;

	if (passed)
		base = pending ? c->healthy_edge_interval_ns : c->interval_ns;
	else
		base = pending ? c->unhealthy_edge_interval_ns
		               : c->unhealthy_interval_ns;
	/* pct * base / 100 without overflow: base / 100 * pct + the rest. */
	pct = base / 100 * c->interval_jitter_pct +
	    base % 100 * c->interval_jitter_pct / 100;
	base = sat_add(base, jitter(hc, pct));
	base = sat_add(base, jitter(hc, c->interval_jitter_ns));
	return base == 0 ? 1 : base;
}

/* A transition to tell once the lock is dropped. */
typedef struct pending_ev {
	int set;
	resil_health_event ev;
	char address[RESIL_HEALTH_ADDRESS_MAX];
} pending_ev;

/* Record a result of t's probe at the reading at (lock held). */
static void
record(resil_health *hc, tgt *t, resil_probe_result r, uint64_t at,
    pending_ev *pe)
{
	int passed = r == RESIL_PROBE_OK, changed = 0, pending = 0;
	uint32_t count = 0;

	t->probing = 0;
	switch (r) {
	case RESIL_PROBE_OK:
		hc->m.ok++;
		break;
	case RESIL_PROBE_FAILED:
		hc->m.failed++;
		break;
	case RESIL_PROBE_TIMEOUT:
		hc->m.timeouts++;
		break;
	case RESIL_PROBE_DOWN:
		hc->m.down++;
		break;
	}
	if (passed) {
		t->fail = 0;
		if (!t->healthy) {
			if (t->succ < UINT32_MAX)
				t->succ++;
			if (t->first || t->succ >= hc->cfg.healthy_threshold) {
				changed = 1;
				count = t->first ? 1 : t->succ;
				t->healthy = 1;
				t->succ = 0;
				hc->healthy++;
				hc->m.became_healthy++;
			} else {
				pending = 1;
			}
		}
	} else {
		t->succ = 0;
		if (t->healthy) {
			if (t->fail < UINT32_MAX)
				t->fail++;
			if (r == RESIL_PROBE_DOWN ||
			    t->fail >= hc->cfg.unhealthy_threshold) {
				changed = 1;
				count = t->fail;
				t->healthy = 0;
				t->fail = 0;
				hc->healthy--;
				hc->m.became_unhealthy++;
			} else {
				pending = 1;
			}
		}
	}
	if (changed && pe != NULL) {
		pe->set = 1;
		pe->ev.type = passed ? RESIL_HEALTH_BECAME_HEALTHY
		                     : RESIL_HEALTH_BECAME_UNHEALTHY;
		pe->ev.user = t->user;
		pe->ev.time = at;
		pe->ev.result = r;
		pe->ev.count = count;
		pe->ev.first_check = t->first;
		memcpy(pe->address, t->address, t->alen + 1);
		pe->ev.address = pe->address;
	}
	t->first = 0;
	t->key = sat_add(at, interval_for(hc, passed, pending));
	heap_fix(hc, t);
}

static void
tell(const resil_health *hc, const pending_ev *pe)
{
	if (pe->set && hc->cfg.listener != NULL)
		hc->cfg.listener(&pe->ev, hc->cfg.listener_ctx);
}

/* ---- targets ---- */

/* Room for one more target (lock held); 0, or -1 out of memory. */
static int
reserve(resil_health *hc)
{
	size_t ncap;
	tgt **heap, **slots;
	uint32_t *fs;

	if (hc->n < hc->cap && (hc->nfree > 0 || hc->nslots < hc->cap))
		return 0;
	ncap = hc->cap == 0 ? 8 : hc->cap * 2;
	if (ncap > RESIL_HEALTH_TARGETS_MAX)
		ncap = RESIL_HEALTH_TARGETS_MAX;
	heap = resil__alloc(&hc->a, ncap * TGTP);
	slots = resil__alloc(&hc->a, ncap * TGTP);
	fs = resil__alloc(&hc->a, ncap * sizeof(*fs));
	if (heap == NULL || slots == NULL || fs == NULL) {
		resil__free(&hc->a, heap, ncap * TGTP);
		resil__free(&hc->a, slots, ncap * TGTP);
		resil__free(&hc->a, fs, ncap * sizeof(*fs));
		return -1;
	}
	if (hc->cap > 0) {
		memcpy(heap, hc->heap, hc->n * TGTP);
		memcpy(slots, hc->slots, hc->nslots * TGTP);
		memcpy(fs, hc->free_slots, hc->nfree * sizeof(*fs));
	}
	resil__free(&hc->a, hc->heap, hc->cap * TGTP);
	resil__free(&hc->a, hc->slots, hc->cap * TGTP);
	resil__free(&hc->a, hc->free_slots, hc->cap * sizeof(*fs));
	hc->heap = heap;
	hc->slots = slots;
	hc->free_slots = fs;
	hc->cap = ncap;
	return 0;
}

resil_err
resil_health_add(resil_health *hc, const char *address, void *user,
    uint64_t now, resil_diag *diag)
{
	const resil_allocator *resil__a;
	int resil__oom = 0;
	size_t len;
	tgt *t, *hit = NULL;

	if (hc == NULL || address == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "health: NULL argument");
		return RESIL_E_INVAL;
	}
	len = strlen(address);
	if (len == 0) {
		resil__diagf(diag, RESIL_E_INVAL, "health: empty address");
		return RESIL_E_INVAL;
	}
	if (len >= RESIL_HEALTH_ADDRESS_MAX) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "health: an address of %zu bytes is longer than %d", len,
		    RESIL_HEALTH_ADDRESS_MAX - 1);
		return RESIL_E_INVAL;
	}
	resil__a = &hc->a;
	t = resil__calloc(resil__a, sizeof(*t));
	if (t == NULL)
		return RESIL_E_NOMEM;
	t->address = resil__strndup(resil__a, address, len);
	if (t->address == NULL) {
		resil__free(resil__a, t, sizeof(*t));
		return RESIL_E_NOMEM;
	}
	t->alen = len;
	t->user = user;
	t->first = 1;
	t->healthy = hc->cfg.initial_healthy != 0;
	resil__spin_lock(&hc->lock);
	HASH_FIND(hh, hc->table, address, len, hit);
	if (hit != NULL) {
		resil__spin_unlock(&hc->lock);
		tgt_free(&hc->a, t);
		resil__diagf(diag, RESIL_E_INVAL,
		    "health: %s is already a target", address);
		return RESIL_E_INVAL;
	}
	if (hc->n >= RESIL_HEALTH_TARGETS_MAX) {
		resil__spin_unlock(&hc->lock);
		tgt_free(&hc->a, t);
		resil__diagf(diag, RESIL_E_LIMITED,
		    "health: %u targets already", RESIL_HEALTH_TARGETS_MAX);
		return RESIL_E_LIMITED;
	}
	if (reserve(hc) != 0) {
		resil__spin_unlock(&hc->lock);
		tgt_free(&hc->a, t);
		return RESIL_E_NOMEM;
	}
	HASH_ADD_KEYPTR(hh, hc->table, t->address, len, t);
	if (resil__oom) {
		resil__spin_unlock(&hc->lock);
		tgt_free(&hc->a, t);
		return RESIL_E_NOMEM;
	}
	t->slot = hc->nfree > 0 ? hc->free_slots[--hc->nfree]
	                        : (uint32_t)hc->nslots++;
	hc->slots[t->slot] = t;
	t->order = ++hc->order;
	t->key = sat_add(now, jitter(hc, hc->cfg.initial_jitter_ns));
	if (t->healthy)
		hc->healthy++;
	heap_set(hc, hc->n++, t);
	sift_up(hc, t->hpos);
	resil__spin_unlock(&hc->lock);
	return RESIL_OK;
}

resil_err
resil_health_remove(resil_health *hc, const char *address)
{
	const resil_allocator *resil__a;
	tgt *t = NULL;

	if (hc == NULL || address == NULL)
		return RESIL_E_INVAL;
	resil__a = &hc->a;
	resil__spin_lock(&hc->lock);
	HASH_FIND(hh, hc->table, address, strlen(address), t);
	if (t == NULL) {
		resil__spin_unlock(&hc->lock);
		return RESIL_E_NOTFOUND;
	}
	HASH_DELETE(hh, hc->table, t);
	heap_remove(hc, t);
	hc->slots[t->slot] = NULL;
	hc->free_slots[hc->nfree++] = t->slot;
	if (t->healthy)
		hc->healthy--;
	resil__spin_unlock(&hc->lock);
	tgt_free(resil__a, t);
	return RESIL_OK;
}

size_t
resil_health_count(resil_health *hc)
{
	size_t n;

	if (hc == NULL)
		return 0;
	resil__spin_lock(&hc->lock);
	n = hc->n;
	resil__spin_unlock(&hc->lock);
	return n;
}

/* ---- the machine ---- */

resil_err
resil_health_next(resil_health *hc, uint64_t now, resil_health_step *step)
{
	pending_ev pe;
	tgt *t;

	if (hc == NULL || step == NULL)
		return RESIL_E_INVAL;
	resil__spin_lock(&hc->lock);
	for (;;) {
		if (hc->n == 0) {
			step->action = RESIL_HEALTH_WAIT;
			step->until = UINT64_MAX;
			break;
		}
		t = hc->heap[0];
		if (t->key > now) {
			step->action = RESIL_HEALTH_WAIT;
			step->until = t->key;
			break;
		}
		if (t->probing) {
			/* Its deadline has passed: a timeout, at the exact
			 * tick it became one. */
			pe.set = 0;
			record(hc, t, RESIL_PROBE_TIMEOUT, t->key, &pe);
			if (pe.set) {
				resil__spin_unlock(&hc->lock);
				tell(hc, &pe);
				resil__spin_lock(&hc->lock);
			}
			continue;
		}
		t->probing = 1;
		t->probe = (++hc->seq << SLOT_BITS) | t->slot;
		t->deadline = sat_add(now, hc->cfg.timeout_ns);
		t->key = sat_add(t->deadline, 1);
		t->nprobes++;
		hc->m.probes++;
		sift_down(hc, 0);
		step->action = RESIL_HEALTH_PROBE;
		step->probe = t->probe;
		step->deadline = t->deadline;
		step->until = 0;
		step->user = t->user;
		memcpy(step->address, t->address, t->alen + 1);
		break;
	}
	resil__spin_unlock(&hc->lock);
	return RESIL_OK;
}

resil_err
resil_health_report(resil_health *hc, uint64_t probe,
    resil_probe_result result, uint64_t now)
{
	uint64_t slot = probe & SLOT_MASK;
	pending_ev pe;
	resil_err e = RESIL_OK;
	tgt *t;

	if (hc == NULL || (unsigned)result > RESIL_PROBE_DOWN)
		return RESIL_E_INVAL;
	pe.set = 0;
	resil__spin_lock(&hc->lock);
	t = slot < hc->nslots ? hc->slots[slot] : NULL;
	if (t == NULL || !t->probing || t->probe != probe) {
		hc->m.refused++;
		resil__spin_unlock(&hc->lock);
		return RESIL_E_NOTFOUND;
	}
	if (now > t->deadline) {
		/* Too late, even if next() has not looked yet: the timeout
		 * stands and the answer is refused. */
		record(hc, t, RESIL_PROBE_TIMEOUT, t->key, &pe);
		hc->m.refused++;
		e = RESIL_E_NOTFOUND;
	} else {
		record(hc, t, result, now, &pe);
	}
	resil__spin_unlock(&hc->lock);
	tell(hc, &pe);
	return e;
}

int
resil_health_is_healthy(resil_health *hc, const char *address)
{
	tgt *t = NULL;
	int h;

	if (hc == NULL || address == NULL)
		return 0;
	resil__spin_lock(&hc->lock);
	HASH_FIND(hh, hc->table, address, strlen(address), t);
	h = t != NULL && t->healthy;
	resil__spin_unlock(&hc->lock);
	return h;
}

resil_err
resil_health_get_state(resil_health *hc, const char *address,
    resil_health_target_state *out)
{
	tgt *t = NULL;

	if (hc == NULL || address == NULL || out == NULL)
		return RESIL_E_INVAL;
	resil__spin_lock(&hc->lock);
	HASH_FIND(hh, hc->table, address, strlen(address), t);
	if (t == NULL) {
		resil__spin_unlock(&hc->lock);
		return RESIL_E_NOTFOUND;
	}
	memset(out, 0, sizeof(*out));
	out->healthy = t->healthy;
	out->probing = t->probing;
	out->first_check = t->first;
	out->successes = t->succ;
	out->failures = t->fail;
	out->next_at = t->probing ? t->deadline : t->key;
	out->probes = t->nprobes;
	resil__spin_unlock(&hc->lock);
	return RESIL_OK;
}

resil_err
resil_health_get_metrics(resil_health *hc, resil_health_metrics *out)
{
	if (hc == NULL || out == NULL)
		return RESIL_E_INVAL;
	resil__spin_lock(&hc->lock);
	*out = hc->m;
	out->targets = hc->n;
	out->healthy = hc->healthy;
	resil__spin_unlock(&hc->lock);
	return RESIL_OK;
}

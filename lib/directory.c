/*
 * The directory: endpoints, snapshots published with one pointer store and
 * reclaimed with ck_epoch, and per-address state that survives updates.
 */
#include <resil/directory.h>
#include <resil/fleet.h>

#include "directory_internal.h"

#include <pthread.h>
#include <stdio.h>

#include <uthash.h>

/* A failed uthash allocation sets the caller's resil__oom. */
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(obj) (resil__oom = 1)

struct resil_directory {
	resil_allocator a;
	resil_clock clk;
	resil_directory_config cfg;
	resil_breaker_config bcfg;
	int has_breaker;
	resil_shm *bshm; /* issue 24.2: the endpoint breakers' region */
	/* Issue 44 (h2): the endpoints' breakers on the fleet (wlock). */
	resil__dir_fleet fl;
	int has_fleet;
	resil__epoch *epoch;
	resil__spinlock wlock; /* updates */
	resil__spinlock elock; /* ejection decisions */
	/* Endpoints no snapshot holds with calls still in flight
	 * (resil__ep_unhold()), freed by the update after their last
	 * report or by resil_directory_free(). */
	resil__spinlock rlock;
	resil__endpoint *retired;
	resil__snapshot *cur; /* atomic */
	uint64_t next_id;
	uint64_t version;
	/* The interval detections (cfg.outlier_rate): on when rate_on; the
	 * end of the interval being counted (atomic; UINT64_MAX when off),
	 * one evaluation at a time (rate_busy, atomic), its last summary
	 * (under elock). */
	int rate_on;
	resil_outlier_rate_config rate;
	resil_random rnd;
	resil_rng rng;
	uint64_t rate_due;
	uint64_t rate_busy;
	resil_directory_rate_stats rate_stats;
	/* Active health checks (cfg.health): the checker, whether a new
	 * endpoint starts unhealthy, and the user's listener. */
	resil_health *hc;
	int hc_down_first;
	resil_health_listener_fn hc_listener;
	void *hc_listener_ctx;
	/* Issue 40: the watchers (resil__dir_watch), under watch_lock. */
	pthread_rwlock_t watch_lock;
	struct {
		resil_endpoint_listener_fn fn;
		void *ctx;
	} watch[RESIL__DIR_WATCHERS];
};

const char *
resil_endpoint_event_name(resil_endpoint_event_type t)
{
	switch (t) {
	case RESIL_ENDPOINT_EJECTED:
		return "EJECTED";
	case RESIL_ENDPOINT_RETURNED:
		return "RETURNED";
	case RESIL_ENDPOINT_ADDED:
		return "ADDED";
	case RESIL_ENDPOINT_BREAKER:
		return "BREAKER";
	case RESIL_ENDPOINT_REMOVED:
		return "REMOVED";
	case RESIL_ENDPOINT_EMPTY_PUSH:
		return "EMPTY_PUSH";
	case RESIL_ENDPOINT_UNHEALTHY:
		return "UNHEALTHY";
	case RESIL_ENDPOINT_HEALTHY:
		return "HEALTHY";
	case RESIL_ENDPOINT_DETECTED:
		return "DETECTED";
	}
	return "UNKNOWN";
}

int32_t
resil_warmup_weight(int32_t w, uint64_t start, uint64_t warmup, uint64_t now)
{
	__extension__ typedef unsigned __int128 u128;
	uint64_t up, ww;

	if (w <= 0)
		return 0;
	if (warmup == 0)
		return w;
	if (now < start)
		return 1;
	up = now - start;
	if (up >= warmup)
		return w;
	ww = (uint64_t)((u128)up * (u128)(uint32_t)w / (u128)warmup);
	if (ww < 1)
		ww = 1;
	return ww > (uint64_t)w ? w : (int32_t)ww;
}

double
resil__exp_neg(double x)
{
	/* e^-x = 2^-k * e^-r with r = x - k ln 2 in [0, ln 2): a short
	 * series is exact to ~1e-13 there, and 2^-k is an exponent. */
	static const double ln2 = 0.69314718055994530942;
	double r, t, sum, p;
	uint64_t k;
	int i;

	if (!(x > 0.0))
		return 1.0;
	if (x > 700.0)
		return 0.0;
	k = (uint64_t)(x / ln2);
	r = x - (double)k * ln2;
	sum = 1.0;
	t = 1.0;
	for (i = 1; i <= 16; i++) {
		t *= -r / i;
		sum += t;
	}
	p = 1.0;
	while (k >= 60) {
		p /= (double)(UINT64_C(1) << 60);
		k -= 60;
	}
	p /= (double)(UINT64_C(1) << k);
	return sum * p;
}

static double
bits_double(uint64_t b)
{
	double d;

	memcpy(&d, &b, sizeof(d));
	return d;
}

static uint64_t
double_bits(double d)
{
	uint64_t b;

	memcpy(&b, &d, sizeof(b));
	return b;
}

static resil_err check_specs(
    const resil_endpoint_spec *specs, size_t n, resil_diag *diag);

resil_err
resil_directory_config_validate(
    const resil_directory_config *cfg, resil_diag *diag)
{
	const resil_outlier_config *o;

	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "directory: NULL config");
	if (resil__check_size(diag, "directory", "resil_directory_config",
	        cfg->size, sizeof(*cfg)) != RESIL_OK)
		return RESIL_E_INVAL;
	o = &cfg->outlier;
	if (o->max_ejection_pct > 100)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "outlier.max_ejection_pct: %u is out of range 0..100",
		    o->max_ejection_pct);
	if (o->consecutive_failures == 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "outlier.consecutive_failures: 0 must be >= 1 "
		    "(outlier.max_ejection_pct=0 turns outlier detection "
		    "off)");
	if (o->max_ejection_pct != 0) {
		if (o->base_ejection == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "outlier.base_ejection: must be at least 1");
		if (o->max_ejection < o->base_ejection)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "outlier.max_ejection: %llu is below "
			    "outlier.base_ejection (%llu)",
			    (unsigned long long)o->max_ejection,
			    (unsigned long long)o->base_ejection);
		if (o->interval == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "outlier.interval: must be at least 1");
	}
	if (cfg->size > offsetof(resil_directory_config,
	                    outlier_enforcing_consecutive_failures) &&
	    cfg->outlier_enforcing_consecutive_failures > 100)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "outlier.enforcing_consecutive_failures: %u is out of "
		    "range 0..100",
		    cfg->outlier_enforcing_consecutive_failures);
	if (cfg->reader_slots > 4096)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "directory.reader_slots: %u is out of range 0..4096",
		    cfg->reader_slots);
	if (cfg->endpoint_breaker != NULL) {
		resil_err err =
		    resil_breaker_config_validate(cfg->endpoint_breaker, diag);
		if (err != RESIL_OK)
			return err;
	}
	if (cfg->size > offsetof(resil_directory_config, outlier_rate) &&
	    cfg->outlier_rate != NULL) {
		resil_outlier_rate_config r = *cfg->outlier_rate;
		r.max_ejection_pct = o->max_ejection_pct;
		if (resil_outlier_rate_config_validate(&r, diag) != RESIL_OK)
			return RESIL_E_INVAL;
	}
	if (cfg->size > offsetof(resil_directory_config, health) &&
	    cfg->health != NULL &&
	    resil_health_config_validate(cfg->health, diag) != RESIL_OK)
		return RESIL_E_INVAL;
	if (cfg->size > offsetof(resil_directory_config, nendpoints) &&
	    cfg->nendpoints > 0) {
		if (cfg->endpoints == NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "directory.endpoints: NULL with nendpoints %zu",
			    cfg->nendpoints);
		if (check_specs(cfg->endpoints, cfg->nendpoints, diag) !=
		    RESIL_OK)
			return RESIL_E_INVAL;
	}
	return RESIL_OK;
}

static uint64_t
now_of(resil_directory *d)
{
	return resil_clock_now(&d->clk);
}

static void rate_tick(resil_directory *d, uint64_t now);

int
resil__dir_rate_on(const resil_directory *d)
{
	return d->rate_on;
}

uint64_t
resil__dir_now(resil_directory *d)
{
	return now_of(d);
}

/* The end of an interval of the rate detections, noticed at now. */
static void
rate_check(resil_directory *d, uint64_t now)
{
	if (now >= resil__load64(&d->rate_due))
		rate_tick(d, now);
}

resil__epoch *
resil__dir_epoch(resil_directory *d)
{
	return d->epoch;
}

static void
entry_clear(const resil_allocator *a, resil__entry *e)
{
	resil__strfree(a, e->zone);
	resil__strfree(a, e->tag);
	/* NULs were written into the buffer: its size is the source's. */
	if (e->params_buf != NULL)
		resil__free(a, e->params_buf, strlen(e->params_src) + 1);
	resil__strfree(a, e->params_src);
	if (e->params != NULL)
		resil__free(a, e->params, e->nparams * sizeof(*e->params));
	memset(e, 0, sizeof(*e));
}

/* An endpoint on a cache line of its own, zeroed (the allocator gives no
 * alignment: a line more, and the struct where the first one begins). */
#define EP_ALLOC (sizeof(resil__endpoint) + RESIL__CACHELINE - 1)
/* A snapshot's eps[] of n endpoints, in bytes. */
#define EPS_BYTES(n) ((n) * sizeof(void *))
_Static_assert(sizeof(void *) == sizeof(resil__endpoint *), "eps[]");

static resil__endpoint *
ep_alloc(const resil_allocator *a)
{
	char *mem = resil__calloc(a, EP_ALLOC);
	resil__endpoint *ep;

	if (mem == NULL)
		return NULL;
	ep = (resil__endpoint *)(void *)(mem +
	    ((RESIL__CACHELINE - (uintptr_t)mem % RESIL__CACHELINE) %
	        RESIL__CACHELINE));
	ep->mem = mem;
	return ep;
}

static void
ep_release(const resil_allocator *a, resil__endpoint *ep)
{
	resil__free(a, ep->mem, EP_ALLOC);
}

static void
ep_free(resil__endpoint *ep)
{
	const resil_allocator *a = &ep->dir->a;

	resil_fleet_free(ep->fleet);
	resil_breaker_free(ep->breaker);
	resil__strfree(a, ep->address);
	ep_release(a, ep);
}

void
resil__ep_unhold(resil__endpoint *ep)
{
	resil_directory *d = ep->dir;

	if (resil__faa64(&ep->holds, (uint64_t)-1) != 1)
		return;
	/* No snapshot holds it, so no pick can start on it: every start
	 * was counted before its snapshot's release, which ordered it
	 * before this. A call in flight ends with its report's count, its
	 * last touch of ep. */
	if (resil__ep_active(ep) == 0) {
		ep_free(ep);
		return;
	}
	resil__spin_lock(&d->rlock);
	ep->retired_next = d->retired;
	d->retired = ep;
	resil__spin_unlock(&d->rlock);
}

size_t
resil__dir_retired(resil_directory *d)
{
	resil__endpoint *ep;
	size_t n = 0;

	resil__spin_lock(&d->rlock);
	for (ep = d->retired; ep != NULL; ep = ep->retired_next)
		n++;
	resil__spin_unlock(&d->rlock);
	return n;
}

/* Free the retired endpoints whose calls have all ended (all of them:
 * the directory's end, where a pick still open is the caller's error). */
static void
retired_reclaim(resil_directory *d, int all)
{
	resil__endpoint **pp, *ep, *done = NULL;

	resil__spin_lock(&d->rlock);
	for (pp = &d->retired; (ep = *pp) != NULL;) {
		if (all || resil__ep_active(ep) == 0) {
			*pp = ep->retired_next;
			ep->retired_next = done;
			done = ep;
		} else {
			pp = &ep->retired_next;
		}
	}
	resil__spin_unlock(&d->rlock);
	while ((ep = done) != NULL) {
		done = ep->retired_next;
		ep_free(ep);
	}
}

static void
scratch_free(const resil_allocator *a, resil__rate_scratch *r, size_t n)
{
	if (r->hosts != NULL)
		resil__free(a, r->hosts, n * sizeof(*r->hosts));
	if (r->verdicts != NULL)
		resil__free(a, r->verdicts, n * sizeof(*r->verdicts));
	if (r->idx != NULL)
		resil__free(a, r->idx, n * sizeof(*r->idx));
	if (r->dur != NULL)
		resil__free(a, r->dur, n * sizeof(*r->dur));
	if (r->k != NULL)
		resil__free(a, r->k, n * sizeof(*r->k));
	memset(r, 0, sizeof(*r));
}

static void
snap_destroy(resil__snapshot *s)
{
	const resil_allocator *a = &s->dir->a;
	size_t i;

	for (i = 0; i < s->n; i++) {
		resil__endpoint *ep = s->e[i].ep;
		entry_clear(a, &s->e[i]);
		if (ep != NULL)
			resil__ep_unhold(ep);
	}
	if (s->e != NULL)
		resil__free(a, s->e, s->n * sizeof(*s->e));
	if (s->eps != NULL)
		resil__free(a, s->eps, EPS_BYTES(s->n));
	scratch_free(a, &s->rate, s->n);
	resil__free(a, s, sizeof(*s));
}

void
resil__snap_release(resil__snapshot *s)
{
	if (s != NULL && resil__faa64(&s->refs, (uint64_t)-1) == 1)
		snap_destroy(s);
}

static void
snap_retired(resil__epoch_entry *entry)
{
	resil__snap_release((resil__snapshot *)(void *)entry);
}

/* The current snapshot with a reference (no interval check: the
 * directory's own functions, some under elock). */
static resil__snapshot *
snap_get(resil_directory *d)
{
	resil__epoch_guard g;
	resil__snapshot *s;

	/* The epoch section covers only the window between reading the
	 * pointer and taking the reference: after it, the reference keeps
	 * the snapshot alive for as long as the caller needs it. */
	resil__epoch_enter(d->epoch, &g);
	s = resil__loadptr((void *const *)&d->cur);
	resil__inc64(&s->refs);
	resil__epoch_exit(d->epoch, &g);
	return s;
}

resil__snapshot *
resil__dir_acquire(resil_directory *d)
{
	/* A route (or another reader above) ends the interval of the rate
	 * detections first: one load and a branch when they are off. */
	if (RESIL__UNLIKELY(d->rate_on))
		rate_check(d, now_of(d));
	return snap_get(d);
}

static resil_err
snap_alloc(resil_directory *d, size_t n, resil__snapshot **out)
{
	resil__snapshot *s = resil__calloc(&d->a, sizeof(*s));

	if (s == NULL)
		return RESIL_E_NOMEM;
	if (n > 0) {
		s->e = resil__calloc(&d->a, n * sizeof(*s->e));
		s->eps = resil__calloc(&d->a, EPS_BYTES(n));
		if (s->e == NULL || s->eps == NULL) {
			if (s->e != NULL)
				resil__free(&d->a, s->e, n * sizeof(*s->e));
			if (s->eps != NULL)
				resil__free(&d->a, s->eps, EPS_BYTES(n));
			resil__free(&d->a, s, sizeof(*s));
			return RESIL_E_NOMEM;
		}
	}
	if (n > 0 && d->rate_on) {
		resil__rate_scratch *r = &s->rate;
		r->hosts = resil__calloc(&d->a, n * sizeof(*r->hosts));
		r->verdicts = resil__calloc(&d->a, n * sizeof(*r->verdicts));
		r->idx = resil__calloc(&d->a, n * sizeof(*r->idx));
		r->dur = resil__calloc(&d->a, n * sizeof(*r->dur));
		r->k = resil__calloc(&d->a, n * sizeof(*r->k));
		if (r->hosts == NULL || r->verdicts == NULL ||
		    r->idx == NULL || r->dur == NULL || r->k == NULL) {
			scratch_free(&d->a, r, n);
			resil__free(&d->a, s->e, n * sizeof(*s->e));
			resil__free(&d->a, s->eps, EPS_BYTES(n));
			resil__free(&d->a, s, sizeof(*s));
			return RESIL_E_NOMEM;
		}
	}
	s->n = n;
	s->refs = 1;
	s->dir = d;
	*out = s;
	return RESIL_OK;
}

static void health_event(const resil_health_event *ev, void *ctx);

resil_err
resil_directory_new(
    resil_directory **out, const resil_directory_config *cfg, resil_diag *diag)
{
	const resil_allocator *a;
	resil_directory *d;
	resil_err err;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "directory: NULL out");
	err = resil_directory_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	a = resil__allocator(cfg->alloc);
	d = resil__calloc(a, sizeof(*d));
	if (d == NULL)
		return RESIL_E_NOMEM;
	d->a = *a;
	pthread_rwlock_init(&d->watch_lock, NULL);
	d->clk = *(cfg->clock != NULL ? cfg->clock : resil_clock_system());
	resil_directory_config_init(&d->cfg);
	memcpy(&d->cfg, cfg, cfg->size);
	d->cfg.alloc = &d->a;
	d->cfg.clock = &d->clk;
	if (cfg->endpoint_breaker != NULL) {
		d->bcfg = *cfg->endpoint_breaker;
		d->bcfg.alloc = &d->a;
		d->bcfg.clock = &d->clk;
		d->has_breaker = 1;
	}
	d->cfg.endpoint_breaker = NULL;
	d->cfg.endpoint_breaker_shm = NULL;
	d->rate_due = UINT64_MAX;
	if (d->cfg.outlier_rate != NULL && d->cfg.outlier.max_ejection_pct) {
		uint64_t t0 = now_of(d);
		d->rate = *d->cfg.outlier_rate;
		d->rate.max_ejection_pct = d->cfg.outlier.max_ejection_pct;
		d->rate_on = 1;
		d->rate_due = t0 > UINT64_MAX - d->cfg.outlier.interval
		    ? UINT64_MAX - 1
		    : t0 + d->cfg.outlier.interval;
	}
	d->cfg.outlier_rate = NULL;
	resil_rng_seed(&d->rng, UINT64_C(0x5eed0d1ec7043));
	if (d->cfg.random != NULL)
		d->rnd = *d->cfg.random;
	else
		d->rnd = resil_rng_hook(&d->rng);
	d->cfg.random = NULL;
	resil__spin_init(&d->wlock);
	resil__spin_init(&d->elock);
	resil__spin_init(&d->rlock);
	d->next_id = 1;
	err = resil__epoch_new(&d->epoch, cfg->reader_slots, &d->a);
	if (err != RESIL_OK) {
		resil__free(a, d, sizeof(*d));
		return err;
	}
	err = snap_alloc(d, 0, &d->cur);
	if (err != RESIL_OK) {
		resil__epoch_free(d->epoch);
		resil__free(a, d, sizeof(*d));
		return err;
	}
	if (d->cfg.health != NULL) {
		resil_health_config hcfg = *d->cfg.health;
		d->hc_listener = hcfg.listener;
		d->hc_listener_ctx = hcfg.listener_ctx;
		d->hc_down_first = !hcfg.initial_healthy;
		hcfg.listener = health_event;
		hcfg.listener_ctx = d;
		if (hcfg.alloc == NULL)
			hcfg.alloc = &d->a;
		err = resil_health_new(&d->hc, &hcfg, diag);
		if (err != RESIL_OK) {
			resil__snap_release(d->cur);
			resil__epoch_free(d->epoch);
			resil__free(a, d, sizeof(*d));
			return err;
		}
	}
	d->cfg.health = NULL;
	d->cfg.endpoints = NULL;
	d->cfg.nendpoints = 0;
	if (cfg->size >
	        offsetof(resil_directory_config, endpoint_breaker_shm) &&
	    cfg->endpoint_breaker_shm != NULL &&
	    (err = resil__dir_shm_region(cfg->endpoint_breaker_shm,
	         d->has_breaker, &d->a, &d->bshm, diag)) != RESIL_OK) {
		resil_directory_free(d); /* issue 24.2: the region's */
		return err;
	}
	/* The static list, as a first push (the caller's size decides
	 * whether it has one). */
	if (cfg->size > offsetof(resil_directory_config, nendpoints) &&
	    cfg->nendpoints > 0) {
		err = resil_directory_push(
		    d, cfg->endpoints, cfg->nendpoints, diag);
		if (err != RESIL_OK) {
			resil_directory_free(d);
			return err;
		}
	}
	*out = d;
	return RESIL_OK;
}

void
resil_directory_free(resil_directory *d)
{
	resil_allocator a;

	if (d == NULL)
		return;
	resil_health_free(d->hc);
	resil__epoch_free(d->epoch); /* runs the retired snapshots' ends */
	resil__snap_release(d->cur);
	retired_reclaim(d, 1);
	if (d->has_fleet && d->fl.put != NULL)
		d->fl.put(d->fl.group); /* its endpoints' handles are gone */
	resil_shm_close(d->bshm);
	pthread_rwlock_destroy(&d->watch_lock);
	a = d->a;
	resil__free(&a, d, sizeof(*d));
}

/* The listener, then the watchers. */
static void
deliver(resil_directory *d, const resil_endpoint_event *ev)
{
	int i;

	if (d->cfg.listener != NULL)
		d->cfg.listener(ev, d->cfg.listener_ctx);
	pthread_rwlock_rdlock(&d->watch_lock);
	for (i = 0; i < RESIL__DIR_WATCHERS; i++)
		if (d->watch[i].fn != NULL)
			d->watch[i].fn(ev, d->watch[i].ctx);
	pthread_rwlock_unlock(&d->watch_lock);
}

int
resil__dir_watch(resil_directory *d, resil_endpoint_listener_fn fn, void *ctx)
{
	int i, r = -1;

	pthread_rwlock_wrlock(&d->watch_lock);
	for (i = 0; i < RESIL__DIR_WATCHERS && r < 0; i++)
		if (d->watch[i].fn == NULL) {
			d->watch[i].fn = fn;
			d->watch[i].ctx = ctx;
			r = 0;
		}
	pthread_rwlock_unlock(&d->watch_lock);
	return r;
}

void
resil__dir_unwatch(resil_directory *d, void *ctx)
{
	int i;

	pthread_rwlock_wrlock(&d->watch_lock);
	for (i = 0; i < RESIL__DIR_WATCHERS; i++)
		if (d->watch[i].ctx == ctx) {
			d->watch[i].fn = NULL;
			d->watch[i].ctx = NULL;
		}
	pthread_rwlock_unlock(&d->watch_lock);
}

/* An endpoint breaker's transition: the directory's event (with the
 * address), then the listener the breaker config had. */
static void
ep_breaker_event(const resil_breaker_event *be, void *ctx)
{
	resil__endpoint *ep = ctx;
	resil_directory *d = ep->dir;
	resil_endpoint_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = RESIL_ENDPOINT_BREAKER;
	ev.address = ep->address;
	ev.time = be->time;
	ev.breaker = be;
	deliver(d, &ev);
	if (d->bcfg.listener != NULL)
		d->bcfg.listener(be, d->bcfg.listener_ctx);
}

static void
emit_kind(resil_directory *d, resil_endpoint_event_type t, const char *addr,
    uint64_t time, uint64_t duration, uint32_t k, resil_outlier_kind kind)
{
	resil_endpoint_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = t;
	ev.address = addr;
	ev.time = time;
	ev.duration = duration;
	ev.ejections = k;
	ev.kind = kind;
	deliver(d, &ev);
}

static void
emit(resil_directory *d, resil_endpoint_event_type t, const char *addr,
    uint64_t time, uint64_t duration, uint32_t k)
{
	emit_kind(d, t, addr, time, duration, k, RESIL_OUTLIER_NONE);
}

/* --- validation and building ------------------------------------------ */

static int
blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The grammar of an endpoint's params, written once: the directory checks
 * every push with it and the registry source every provider it maps
 * (lib/source_dubbo.c), so a provider the source keeps is never refused
 * here (issue 38.1). Items key=value joined by '&': no empty item, a key
 * that is not empty (it ends at the item's first '='), a value that may be
 * empty or hold '='. NULL for well-formed params, else the reason, with
 * the 1-based column of the bad item in *col (one past the end for a
 * trailing '&'). */
const char *
resil__params_check(const char *params, size_t *col)
{
	const char *q = params;

	while (*q != '\0') {
		const char *amp = strchr(q, '&');
		const char *end = amp != NULL ? amp : q + strlen(q);
		const char *eq = memchr(q, '=', (size_t)(end - q));

		if (eq == NULL || eq == q) {
			*col = (size_t)(q - params) + 1;
			return q == end  ? "an empty item"
			    : eq == NULL ? "no '='"
			                 : "an empty key";
		}
		if (amp != NULL && amp[1] == '\0') {
			*col = strlen(params) + 1;
			return "an empty item";
		}
		q = amp != NULL ? amp + 1 : end;
	}
	return NULL;
}

/* Inlined into check_specs' loop, as it was into the push's before
 * resil_directory_config_validate() called it too (directory/push/1024:
 * ~14 instructions per endpoint for the call). */
__attribute__((always_inline)) static inline resil_err
check_spec(const resil_endpoint_spec *s, size_t i, resil_diag *diag)
{
	const char *p;
	size_t col;

	if (s->address == NULL || s->address[0] == '\0')
		return resil__diagf(
		    diag, RESIL_E_INVAL, "endpoints[%zu].address: empty", i);
	for (p = s->address; *p != '\0'; p++)
		if (blank(*p))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "endpoints[%zu].address: \"%s\" contains a blank",
			    i, s->address);
	if (s->weight < 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "endpoints[%zu].weight: %d is negative (0 is allowed)", i,
		    (int)s->weight);
	if (s->zone != NULL && s->zone[0] == '\0')
		return resil__diagf(diag, RESIL_E_INVAL,
		    "endpoints[%zu].zone: empty (use NULL for no zone)", i);
	if (s->params != NULL && s->params[0] != '\0' &&
	    resil__params_check(s->params, &col) != NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "endpoints[%zu].params: \"%s\" at column %zu: expected "
		    "key=value",
		    i, s->params, col);
	return RESIL_OK;
}

/* Every spec of a push (and of cfg.endpoints); one caller of check_spec,
 * which stays inlined in the loop. */
static resil_err
check_specs(const resil_endpoint_spec *specs, size_t n, resil_diag *diag)
{
	size_t i;
	resil_err err;

	for (i = 0; i < n; i++)
		if ((err = check_spec(&specs[i], i, diag)) != RESIL_OK)
			return err;
	return RESIL_OK;
}

static resil_err
entry_fill(resil_directory *d, resil__entry *e, const resil_endpoint_spec *s)
{
	const resil_allocator *a = &d->a;
	const char *addr = e->ep->address;
	const char *colon = strrchr(addr, ':');

	e->address = addr;
	e->id = e->ep->id;
	e->weight = s->weight;
	e->start = s->start_time;
	e->warmup = s->warmup;
	e->mock = s->mock != 0;
	e->user = s->user;
	e->host_len = colon != NULL ? (size_t)(colon - addr) : strlen(addr);
	e->port = colon != NULL ? colon + 1 : "";
	if (s->zone != NULL && (e->zone = resil__strdup(a, s->zone)) == NULL)
		return RESIL_E_NOMEM;
	if (s->tag != NULL && s->tag[0] != '\0' &&
	    (e->tag = resil__strdup(a, s->tag)) == NULL)
		return RESIL_E_NOMEM;
	if (s->params != NULL && s->params[0] != '\0') {
		size_t n = 1, i = 0;
		char *p;
		if ((e->params_src = resil__strdup(a, s->params)) == NULL ||
		    (e->params_buf = resil__strdup(a, s->params)) == NULL)
			return RESIL_E_NOMEM;
		for (p = e->params_buf; *p != '\0'; p++)
			n += *p == '&';
		e->params = resil__calloc(a, n * sizeof(*e->params));
		if (e->params == NULL)
			return RESIL_E_NOMEM;
		e->nparams = n;
		p = e->params_buf;
		while (i < n) {
			char *amp = strchr(p, '&');
			char *eq = strchr(p, '=');
			if (amp != NULL)
				*amp = '\0';
			e->params[i].key = p;
			e->params[i].klen = (size_t)(eq - p);
			e->params[i].val = eq + 1;
			e->params[i].vlen = strlen(eq + 1);
			i++;
			if (amp == NULL)
				break;
			p = amp + 1;
		}
		e->nparams = i;
		for (i = 0; i < e->nparams; i++)
			if (e->params[i].klen == 7 &&
			    memcmp(e->params[i].key, "methods", 7) == 0)
				e->methods = e->params[i].val;
	}
	return RESIL_OK;
}

/* The endpoint's breaker, its transitions through ep_breaker_event. */
static resil_err
ep_breaker_new(resil_directory *d, resil__endpoint *ep, resil_diag *diag)
{
	resil_breaker_config bc = d->bcfg;

	bc.listener = ep_breaker_event;
	bc.listener_ctx = ep;
	return resil_breaker_new(&ep->breaker, &bc, diag);
}

/* Issue 44 (h2): the endpoint's fleet breaker (wlock held). */
static resil_err
ep_fleet_new(resil_directory *d, resil__endpoint *ep, resil_diag *diag)
{
	resil_breaker_config bc = d->bcfg;
	struct resil_fleet *f;
	resil_err err;

	bc.listener = ep_breaker_event;
	bc.listener_ctx = ep;
	bc.alloc = &d->a;
	err = resil__dir_fleet_new(&d->fl, ep->address, &bc, &f, diag);
	if (err == RESIL_OK)
		resil__storeptr((void **)(void *)&ep->fleet, f);
	return err;
}

resil_err
resil__dir_fleet_attach(resil_directory *d, const resil__dir_fleet *df,
    const char *key, resil_diag *diag)
{
	resil__snapshot *s;
	resil_err err = RESIL_OK;
	size_t i;

	resil__spin_lock(&d->wlock);
	if (!d->has_breaker || d->has_fleet || d->bshm != NULL) {
		int same = d->has_fleet && d->fl.group == df->group &&
		    strcmp(d->fl.prefix, df->prefix) == 0;

		resil__spin_unlock(&d->wlock);
		if (df->put != NULL)
			df->put(df->group);
		if (same)
			return RESIL_OK;
		return resil__diagf(diag, RESIL_E_INVAL, "%s: %s", key,
		    !d->has_breaker
		        ? "the directory has no endpoint breakers "
		          "(endpoint.breaker.* keys, endpoint_breaker)"
		    : d->bshm != NULL
		        ? "not with endpoint.breaker.shared (the endpoints' "
		          "breakers are in shared memory)"
		        : "the directory's endpoints are on another fleet "
		          "already");
	}
	d->fl = *df;
	d->has_fleet = 1;
	s = resil__loadptr((void *const *)&d->cur);
	for (i = 0; s != NULL && i < s->n && err == RESIL_OK; i++)
		if (s->e[i].ep != NULL && s->e[i].ep->fleet == NULL)
			err = ep_fleet_new(d, s->e[i].ep, diag);
	resil__spin_unlock(&d->wlock);
	return err;
}

static resil__endpoint *
ep_new(resil_directory *d, const char *address)
{
	resil__endpoint *ep = ep_alloc(&d->a);
	resil_diag diag;

	if (ep == NULL)
		return NULL;
	ep->dir = d;
	ep->address = resil__strdup(&d->a, address);
	if (ep->address == NULL) {
		ep_release(&d->a, ep);
		return NULL;
	}
	if (d->has_breaker &&
	    (d->bshm != NULL ? resil__dir_shm_breaker(d->bshm, address,
	                           &d->bcfg, &ep->breaker, &diag)
	                     : ep_breaker_new(d, ep, &diag)) != RESIL_OK) {
		resil__strfree(&d->a, ep->address);
		ep_release(&d->a, ep);
		return NULL;
	}
	if (d->has_fleet && ep_fleet_new(d, ep, &diag) != RESIL_OK) {
		resil_breaker_free(ep->breaker);
		resil__strfree(&d->a, ep->address);
		ep_release(&d->a, ep);
		return NULL;
	}
	resil__spin_init(&ep->lock);
	ep->id = d->next_id++;
	ep->iv_rate = double_bits(-1.0);
	/* A new target of the checker is unhealthy until its first probe
	 * passes (unless health.initial=healthy). */
	ep->ejected = d->hc != NULL && d->hc_down_first ? RESIL__EP_DOWN : 0;
	return ep;
}

typedef struct addr_slot {
	const char *key;
	size_t index;
	int used;
	UT_hash_handle hh;
} addr_slot;

/* A spec rebuilt from a snapshot entry, to re-push what is kept. */
static resil_endpoint_spec
spec_of(const resil__entry *e)
{
	resil_endpoint_spec s;

	memset(&s, 0, sizeof(s));
	s.address = e->ep->address;
	s.zone = e->zone;
	s.weight = e->weight;
	s.tag = e->tag;
	s.params = e->params_src;
	s.start_time = e->start;
	s.warmup = e->warmup;
	s.mock = e->mock;
	s.user = e->user;
	return s;
}

static size_t
live_count(const resil_endpoint_spec *specs, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += specs[i].mock == 0;
	return k;
}

/* Set (on) or clear bit b of *p; 1 when that changed it. */
static int
bits_put(uint64_t *p, uint64_t b, int on)
{
	uint64_t v = resil__load64(p);

	for (;;) {
		uint64_t w = on ? v | b : v & ~b;
		if (w == v)
			return 0;
		if (resil__cas64(p, v, w))
			return 1;
		v = resil__load64(p);
	}
}

/* The checker's targets follow the list (under wlock, after s is
 * published): each non-mock endpoint is one; a new target starts as the
 * checker starts it, and one the checker refuses (an address too long)
 * is left unchecked, healthy. */
static void
health_sync(resil_directory *d, const resil__snapshot *old,
    const resil__snapshot *s, addr_slot *table)
{
	addr_slot *hit;
	size_t i;

	for (i = 0; i < old->n; i++) {
		resil__endpoint *ep = old->e[i].ep;
		HASH_FIND(hh, table, ep->address, strlen(ep->address), hit);
		if (hit == NULL && ep->hc_target) {
			(void)resil_health_remove(d->hc, ep->address);
			ep->hc_target = 0;
		}
	}
	for (i = 0; i < s->n; i++) {
		resil__endpoint *ep = s->e[i].ep;
		if (s->e[i].mock) {
			if (ep->hc_target)
				(void)resil_health_remove(d->hc, ep->address);
			ep->hc_target = 0;
			(void)bits_put(&ep->ejected, RESIL__EP_DOWN, 0);
			continue;
		}
		if (ep->hc_target)
			continue;
		(void)bits_put(&ep->ejected, RESIL__EP_DOWN, d->hc_down_first);
		if (resil_health_add(d->hc, ep->address, s->e[i].user,
		        now_of(d), NULL) == RESIL_OK)
			ep->hc_target = 1;
		else
			(void)bits_put(&ep->ejected, RESIL__EP_DOWN, 0);
	}
}

/*
 * Replace the list with specs (under wlock). Kept addresses keep their
 * position, new ones are appended in order. Builds everything before
 * publishing, so a failure changes nothing.
 */
static resil_err
rebuild(resil_directory *d, const resil_endpoint_spec *specs, size_t n,
    int protect, resil_diag *diag)
{
	const resil_allocator *resil__a = &d->a;
	addr_slot *table = NULL, *slots = NULL, *hit, *tmp;
	resil__snapshot *old = d->cur, *s = NULL;
	resil_err err = RESIL_OK;
	size_t i, j, pos = 0;
	int resil__oom = 0;

	if ((err = check_specs(specs, n, diag)) != RESIL_OK)
		return err;
	if (n > 0) {
		slots = resil__calloc(&d->a, n * sizeof(*slots));
		if (slots == NULL)
			return RESIL_E_NOMEM;
	}
	for (i = 0; i < n; i++) {
		size_t len = strlen(specs[i].address);
		HASH_FIND(hh, table, specs[i].address, len, hit);
		if (hit != NULL) {
			err = resil__diagf(diag, RESIL_E_INVAL,
			    "endpoints[%zu].address: duplicate of "
			    "endpoints[%zu] (%s)",
			    i, hit->index, specs[i].address);
			goto out;
		}
		slots[i].key = specs[i].address;
		slots[i].index = i;
		HASH_ADD_KEYPTR(hh, table, slots[i].key, len, &slots[i]);
		if (resil__oom) {
			/* The index could not grow: refuse, change nothing. */
			err = RESIL_E_NOMEM;
			goto out;
		}
	}
	if (protect && old->n_live > 0 && live_count(specs, n) == 0) {
		/* Empty protection: a registry that lost its providers (or
		 * sent an empty list by mistake) must not leave the callers
		 * with none; the list stays, valid as it was checked. */
		emit(d, RESIL_ENDPOINT_EMPTY_PUSH, "", now_of(d), old->n_live,
		    0);
		goto out;
	}
	if ((err = snap_alloc(d, n, &s)) != RESIL_OK)
		goto out;
	/* Kept addresses, in their old order. */
	for (j = 0; j < old->n; j++) {
		const char *addr = old->e[j].ep->address;
		HASH_FIND(hh, table, addr, strlen(addr), hit);
		if (hit == NULL)
			continue;
		hit->used = 1;
		s->e[pos].ep = old->e[j].ep;
		resil__inc64(&old->e[j].ep->holds);
		if ((err = entry_fill(d, &s->e[pos], &specs[hit->index])) !=
		    RESIL_OK) {
			pos++;
			goto fail;
		}
		pos++;
	}
	/* New addresses, in the order given. */
	for (i = 0; i < n; i++) {
		if (slots[i].used)
			continue;
		s->e[pos].ep = ep_new(d, specs[i].address);
		if (s->e[pos].ep == NULL) {
			err = RESIL_E_NOMEM;
			goto fail;
		}
		resil__inc64(&s->e[pos].ep->holds);
		if ((err = entry_fill(d, &s->e[pos], &specs[i])) != RESIL_OK) {
			pos++;
			goto fail;
		}
		pos++;
	}
	for (i = 0; i < n; i++) {
		s->n_live += s->e[i].mock == 0;
		s->eps[i] = s->e[i].ep;
	}
	s->version = ++d->version;
	resil__storeptr((void **)&d->cur, s);
	/* Events, with old still alive (its reference is released below). */
	for (j = 0; j < old->n; j++) {
		const char *addr = old->e[j].ep->address;
		HASH_FIND(hh, table, addr, strlen(addr), hit);
		if (hit == NULL)
			emit(d, RESIL_ENDPOINT_REMOVED, addr, now_of(d), 0, 0);
	}
	for (i = 0; i < n; i++)
		if (!slots[i].used)
			emit(d, RESIL_ENDPOINT_ADDED, specs[i].address,
			    now_of(d), 0, 0);
	if (d->hc != NULL)
		health_sync(d, old, s, table);
	resil__epoch_retire(d->epoch, &old->retire, snap_retired);
	retired_reclaim(d, 0);
	goto out;
fail:
	/* Undo what was built: the first pos entries hold a reference. */
	for (i = 0; i < pos; i++) {
		resil__endpoint *ep = s->e[i].ep;
		entry_clear(&d->a, &s->e[i]);
		if (ep != NULL)
			resil__ep_unhold(ep);
	}
	snap_destroy(s); /* its entries are empty now */
out:
	HASH_ITER(hh, table, hit, tmp)
	{
		HASH_DELETE(hh, table, hit);
	}
	if (slots != NULL)
		resil__free(&d->a, slots, n * sizeof(*slots));
	return err;
}

resil_err
resil_directory_push(resil_directory *d, const resil_endpoint_spec *specs,
    size_t n, resil_diag *diag)
{
	resil_err err;

	if (d == NULL || (specs == NULL && n > 0))
		return resil__diagf(
		    diag, RESIL_E_INVAL, "directory: NULL argument");
	resil__spin_lock(&d->wlock);
	err = rebuild(d, specs, n, d->cfg.empty_protection != 0, diag);
	resil__spin_unlock(&d->wlock);
	return err;
}

#define NOPOS ((size_t)-1)

static size_t
find_pos(const resil__snapshot *s, const char *address)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->e[i].ep->address, address) == 0)
			return i;
	return NOPOS;
}

/* 0 add, 1 update, 2 remove: the current list as specs, changed. */
static resil_err
edit(resil_directory *d, int op, const resil_endpoint_spec *spec,
    const char *address, resil_diag *diag)
{
	resil__snapshot *cur;
	resil_endpoint_spec *specs = NULL;
	size_t n, i, k = 0, cap;
	size_t pos;
	resil_err err;

	resil__spin_lock(&d->wlock);
	cur = d->cur;
	pos = find_pos(cur, address);
	if (op == 0 && pos != NOPOS) {
		err = resil__diagf(diag, RESIL_E_INVAL,
		    "endpoint.address: %s is already present", address);
		goto out;
	}
	if (op != 0 && pos == NOPOS) {
		err = resil__diagf(diag, RESIL_E_NOTFOUND,
		    "endpoint.address: %s is not present", address);
		goto out;
	}
	n = cur->n;
	cap = n + 1;
	specs = resil__calloc(&d->a, cap * sizeof(*specs));
	if (specs == NULL) {
		err = RESIL_E_NOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (i == pos && op == 2)
			continue;
		specs[k++] = i == pos ? *spec : spec_of(&cur->e[i]);
	}
	if (op == 0)
		specs[k++] = *spec;
	err = rebuild(d, specs, k, 0, diag);
	if (err == RESIL_E_INVAL && diag != NULL && op != 2) {
		/* Name the event's field, not the rebuilt list's index. */
		char *br = strchr(diag->msg, ']');
		if (br != NULL && strncmp(diag->msg, "endpoints[", 10) == 0) {
			size_t off = (size_t)(br + 1 - diag->msg);
			memmove(diag->msg + 8, diag->msg + off,
			    strlen(diag->msg + off) + 1);
			memcpy(diag->msg, "endpoint", 8);
		}
	}
out:
	if (specs != NULL)
		resil__free(&d->a, specs, cap * sizeof(*specs));
	resil__spin_unlock(&d->wlock);
	return err;
}

resil_err
resil_directory_add(
    resil_directory *d, const resil_endpoint_spec *spec, resil_diag *diag)
{
	if (d == NULL || spec == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "directory: NULL argument");
	if (spec->address == NULL || spec->address[0] == '\0')
		return resil__diagf(
		    diag, RESIL_E_INVAL, "endpoint.address: empty");
	return edit(d, 0, spec, spec->address, diag);
}

resil_err
resil_directory_update(
    resil_directory *d, const resil_endpoint_spec *spec, resil_diag *diag)
{
	if (d == NULL || spec == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "directory: NULL argument");
	if (spec->address == NULL || spec->address[0] == '\0')
		return resil__diagf(
		    diag, RESIL_E_INVAL, "endpoint.address: empty");
	return edit(d, 1, spec, spec->address, diag);
}

resil_err
resil_directory_remove(
    resil_directory *d, const char *address, resil_diag *diag)
{
	if (d == NULL || address == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "directory: NULL argument");
	return edit(d, 2, NULL, address, diag);
}

size_t
resil_directory_count(resil_directory *d)
{
	resil__snapshot *s;
	size_t n;

	if (d == NULL)
		return 0;
	s = snap_get(d);
	n = s->n;
	resil__snap_release(s);
	return n;
}

uint64_t
resil_directory_version(resil_directory *d)
{
	resil__snapshot *s;
	uint64_t v;

	if (d == NULL)
		return 0;
	s = snap_get(d);
	v = s->version;
	resil__snap_release(s);
	return v;
}

/* --- per-endpoint health ----------------------------------------------- */

int
resil__ep_ejected(resil__endpoint *ep, uint64_t now)
{
	uint64_t v = resil__load64(&ep->ejected), until;

	if (RESIL__LIKELY(v == 0))
		return 0;
	while (v & RESIL__EP_OUT) {
		until = resil__load64(&ep->until);
		if (now < until)
			return 1;
		/* The return is noticed lazily; the one who clears the bit
		 * tells. */
		if (resil__cas64(
		        &ep->ejected, v, v & ~(uint64_t)RESIL__EP_OUT)) {
			uint32_t k;
			resil__spin_lock(&ep->lock);
			ep->returned_at = until;
			resil__store64(&ep->streak, 0);
			k = ep->k;
			resil__spin_unlock(&ep->lock);
			emit(ep->dir, RESIL_ENDPOINT_RETURNED, ep->address,
			    until, 0, k);
			break;
		}
		v = resil__load64(&ep->ejected);
	}
	return (resil__load64(&ep->ejected) & RESIL__EP_DOWN) != 0;
}

int
resil__ep_breaker_admits(resil__endpoint *ep)
{
	resil_breaker_metrics m;
	resil_breaker *b = ep->breaker;

	if (b == NULL)
		return 1;
	if (RESIL__UNLIKELY(resil__loadptr((void *const *)(void *)&ep->fleet) !=
	        NULL)) {
		/* Issue 44 (h2): the fleet decides; HALF_OPEN lets the
		 * acquire ask for a probe lease. */
		resil_fleet_state fs = resil_fleet_get_state(ep->fleet);

		if (fs != RESIL_FLEET_CLOSED)
			return fs == RESIL_FLEET_HALF_OPEN;
		b = resil_fleet_breaker(ep->fleet);
	}
	switch (resil_breaker_get_state(b)) {
	case RESIL_BREAKER_FORCED_OPEN:
	case RESIL_BREAKER_CORRUPT: /* a damaged shared word: never grants */
		return 0;
	case RESIL_BREAKER_OPEN:
		/* OPEN past its wait lets the next acquire probe. */
		if (resil_breaker_get_metrics(b, &m) != RESIL_OK)
			return 0;
		return m.state != RESIL_BREAKER_OPEN ||
		    m.time_in_state >= m.open_wait;
	default:
		return 1;
	}
}

double
resil__ep_ewma(
    const resil__endpoint *ep, uint64_t now, double tau, double default_rtt)
{
	uint64_t stamp;
	double cost;

	if (resil__load64(&ep->ewma_seen) == 0)
		return default_rtt;
	cost = bits_double(resil__load64(&ep->ewma_bits));
	stamp = resil__load64(&ep->ewma_stamp);
	if (now > stamp && tau > 0.0)
		cost *= resil__exp_neg((double)(now - stamp) / tau);
	return cost;
}

/* Eject ep at now for min(base * k, max), k the consecutive ejections
 * (dropping by one per full interval in since the last return); d->elock
 * and ep->lock held. Returns the duration. */
static uint64_t
eject_locked(resil__endpoint *ep, uint64_t now)
{
	const resil_outlier_config *o = &ep->dir->cfg.outlier;
	uint64_t dur, intervals;

	intervals =
	    now > ep->returned_at ? (now - ep->returned_at) / o->interval : 0;
	ep->k = ep->k > intervals ? ep->k - (uint32_t)intervals : 0;
	ep->k++;
	dur = o->base_ejection * ep->k;
	if (dur / ep->k != o->base_ejection || dur > o->max_ejection)
		dur = o->max_ejection;
	resil__store64(&ep->until, now + dur);
	(void)bits_put(&ep->ejected, RESIL__EP_OUT, 1);
	resil__store64(&ep->streak, 0);
	return dur;
}

/* Outlier-ejected now (not counting a health check's verdict). */
static int
ep_out(resil__endpoint *ep, uint64_t now)
{
	return (resil__load64(&ep->ejected) & RESIL__EP_OUT) != 0 &&
	    now < resil__load64(&ep->until);
}

/* Whether a consecutive-failure detection inside the share ejects
 * (Envoy's enforcing_consecutive_5xx, as outlier_sr.c draws for the
 * interval detections: none for 0 or 100); d->elock held, which
 * serialises the draws with the interval detections'. */
static int
enforced(resil_directory *d)
{
	uint32_t e = d->cfg.outlier_enforcing_consecutive_failures;

	return e >= 100 ||
	    (e > 0 && resil_random_uniform(&d->rnd) * 100.0 < (double)e);
}

/* A detection of ep at now (d->elock and ep->lock held): eject it if the
 * max share and the enforcing percentage allow; returns the duration or
 * 0, and *let_go 1 when the percentage let it go. The streak restarts
 * either way (DESIGN: also after a detection the share prevented). */
static uint64_t
try_eject(resil__endpoint *ep, uint64_t now, int *let_go)
{
	resil_directory *d = ep->dir;
	const resil_outlier_config *o = &d->cfg.outlier;
	resil__snapshot *s;
	uint64_t ejected = 0, dur = 0;
	size_t i;
	int member = 0;

	s = snap_get(d);
	for (i = 0; i < s->n; i++) {
		resil__endpoint *x = s->e[i].ep;
		if (x == ep)
			member = !s->e[i].mock;
		if (s->e[i].mock || x == ep)
			continue;
		ejected += (uint64_t)ep_out(x, now);
	}
	/* The cap: 100 * (ejected + 1) / N <= max_pct, in integers. */
	if (member &&
	    100 * (ejected + 1) <=
	        (uint64_t)o->max_ejection_pct * (uint64_t)s->n_live) {
		if (enforced(d))
			dur = eject_locked(ep, now);
		else
			*let_go = 1;
	}
	if (dur == 0)
		resil__store64(&ep->streak, 0);
	resil__snap_release(s);
	return dur;
}

/*
 * The end of an interval of the rate detections, noticed at now: the
 * first caller to move rate_due past now evaluates the counters kept
 * since the last evaluation and ejects each verdict EJECT as a
 * consecutive-failure ejection would (its k, min(base * k, max)), at now.
 * One evaluation at a time: one that finds another running leaves the
 * counters to the next interval.
 */
static void
rate_tick(resil_directory *d, uint64_t now)
{
	const resil_outlier_config *o = &d->cfg.outlier;
	uint64_t due = resil__load64(&d->rate_due), next, steps;
	resil__rate_scratch *r;
	resil_outlier_summary sum;
	resil__snapshot *s;
	size_t i, n = 0;
	int evaluated;

	if (now < due)
		return;
	steps = (now - due) / o->interval + 1;
	next = steps > (UINT64_MAX - 1 - due) / o->interval
	    ? UINT64_MAX - 1
	    : due + steps * o->interval;
	if (!resil__cas64(&d->rate_due, due, next))
		return; /* another caller has this interval */
	if (!resil__cas64(&d->rate_busy, 0, 1))
		return;
	s = snap_get(d);
	r = &s->rate;
	/* Notice the returns first (their events run with no lock held). */
	for (i = 0; i < s->n; i++)
		if (!s->e[i].mock)
			(void)resil__ep_ejected(s->e[i].ep, now);
	resil__spin_lock(&d->elock);
	for (i = 0; i < s->n && r->hosts != NULL; i++) {
		resil__endpoint *x = s->e[i].ep;
		uint64_t iv;
		if (s->e[i].mock)
			continue;
		iv = resil__fas64(&x->iv, 0);
		r->hosts[n].requests = iv & UINT32_MAX;
		r->hosts[n].successes = iv >> 32;
		r->hosts[n].ejected = ep_out(x, now);
		r->idx[n] = (uint32_t)i;
		r->dur[n] = 0;
		n++;
	}
	evaluated = resil_outlier_rate_evaluate(&d->rate, r->hosts, n,
	                &d->rnd, r->verdicts, &sum, NULL) == RESIL_OK;
	if (evaluated) {
		for (i = 0; i < n; i++) {
			resil__endpoint *x = s->e[r->idx[i]].ep;
			resil__store64(&x->iv_rate,
			    double_bits(r->verdicts[i].success_rate));
			if (r->verdicts[i].action != RESIL_OUTLIER_EJECT)
				continue;
			resil__spin_lock(&x->lock);
			r->dur[i] = eject_locked(x, now);
			r->k[i] = x->k;
			resil__spin_unlock(&x->lock);
		}
		d->rate_stats.last = sum;
		d->rate_stats.evaluated_at = now;
		d->rate_stats.evaluations++;
	}
	resil__spin_unlock(&d->elock);
	for (i = 0; i < n; i++)
		if (r->dur[i] != 0)
			emit_kind(d, RESIL_ENDPOINT_EJECTED,
			    s->e[r->idx[i]].ep->address, now, r->dur[i],
			    r->k[i], r->verdicts[i].kind);
		else if (evaluated &&
		    r->verdicts[i].action == RESIL_OUTLIER_NOT_ENFORCED)
			emit_kind(d, RESIL_ENDPOINT_DETECTED,
			    s->e[r->idx[i]].ep->address, now, 0, 0,
			    r->verdicts[i].kind);
	resil__store64(&d->rate_busy, 0);
	resil__snap_release(s);
}

resil_err
resil_directory_get_rate_stats(
    resil_directory *d, resil_directory_rate_stats *out)
{
	if (d == NULL || out == NULL)
		return RESIL_E_INVAL;
	if (d->rate_on)
		rate_check(d, now_of(d));
	resil__spin_lock(&d->elock);
	*out = d->rate_stats;
	resil__spin_unlock(&d->elock);
	if (out->evaluations == 0) {
		memset(out, 0, sizeof(*out));
		return RESIL_E_NOTFOUND;
	}
	return RESIL_OK;
}

void
resil__ep_report(resil__endpoint *ep, resil_outcome outcome, uint64_t duration,
    uint64_t now, unsigned feeds, uint64_t tau, uint64_t slide)
{
	const resil_outlier_config *o = &ep->dir->cfg.outlier;
	uint64_t dur = 0, streak;
	uint32_t k = 0;
	int let_go = 0;

	if (outcome == RESIL_OUTCOME_IGNORED)
		return;
	(void)resil__ep_ejected(ep, now); /* notice a return first */
	if (ep->dir->rate_on && outcome != RESIL_OUTCOME_BUSINESS)
		resil__faa64(&ep->iv,
		    outcome == RESIL_OUTCOME_SUCCESS ? (UINT64_C(1) << 32) + 1
		                                     : 1);
	if (feeds & RESIL__EP_EWMA) {
		/* Every answer is a latency sample. */
		resil__spin_lock(&ep->lock);
		if (resil__load64(&ep->ewma_seen) == 0) {
			resil__store64(
			    &ep->ewma_bits, double_bits((double)duration));
			resil__store64(&ep->ewma_seen, 1);
		} else {
			double cost =
			    bits_double(resil__load64(&ep->ewma_bits));
			uint64_t stamp = resil__load64(&ep->ewma_stamp);
			double w = now > stamp && tau > 0
			    ? resil__exp_neg(
			          (double)(now - stamp) / (double)tau)
			    : 1.0;
			double decayed = cost * w;
			cost = (double)duration > decayed
			    ? (double)duration
			    : decayed + (double)duration * (1.0 - w);
			resil__store64(&ep->ewma_bits, double_bits(cost));
		}
		resil__store64(&ep->ewma_stamp, now);
		resil__spin_unlock(&ep->lock);
	}
	if ((feeds & RESIL__EP_WINDOW) && outcome == RESIL_OUTCOME_SUCCESS) {
		resil__spin_lock(&ep->lock);
		if (slide != 0 && now - ep->sr_reset_at > slide) {
			resil__store64(&ep->sr_successes, 0);
			resil__store64(&ep->sr_elapsed, 0);
			resil__store64(&ep->sr_reset_at, now);
		}
		resil__store64(&ep->sr_successes, ep->sr_successes + 1);
		resil__store64(&ep->sr_elapsed, ep->sr_elapsed + duration);
		resil__spin_unlock(&ep->lock);
	}
	if (outcome != RESIL_OUTCOME_FAILURE) {
		resil__ep_end_streak(ep);
		return;
	}
	streak = resil__faa64(&ep->streak, 1) + 1;
	if (o->max_ejection_pct == 0 || streak < o->consecutive_failures ||
	    (resil__load64(&ep->ejected) & RESIL__EP_OUT) != 0)
		return;
	/* Ejection decisions are serialised by the directory's lock (the
	 * cap across endpoints), then the endpoint's (its k); in that order
	 * everywhere. */
	resil__spin_lock(&ep->dir->elock);
	resil__spin_lock(&ep->lock);
	if ((resil__load64(&ep->ejected) & RESIL__EP_OUT) == 0 &&
	    resil__load64(&ep->streak) >= o->consecutive_failures) {
		dur = try_eject(ep, now, &let_go);
		k = ep->k;
	}
	resil__spin_unlock(&ep->lock);
	resil__spin_unlock(&ep->dir->elock);
	if (dur != 0)
		emit(
		    ep->dir, RESIL_ENDPOINT_EJECTED, ep->address, now, dur, k);
	else if (let_go)
		emit(ep->dir, RESIL_ENDPOINT_DETECTED, ep->address, now, 0, 0);
}

int
resil__entry_attr(const resil__entry *e, const char *key, size_t klen,
    const char **val, size_t *vlen)
{
	size_t i;

#define KEYIS(lit) (klen == sizeof(lit) - 1 && memcmp(key, lit, klen) == 0)
	if (KEYIS("address")) {
		*val = e->ep->address;
		*vlen = strlen(e->ep->address);
		return 1;
	}
	if (KEYIS("host")) {
		*val = e->ep->address;
		*vlen = e->host_len;
		return 1;
	}
	if (KEYIS("port")) {
		*val = e->port;
		*vlen = strlen(e->port);
		return *vlen > 0;
	}
	if (KEYIS("zone")) {
		if (e->zone == NULL)
			return 0;
		*val = e->zone;
		*vlen = strlen(e->zone);
		return 1;
	}
	if (KEYIS("tag")) {
		if (e->tag == NULL)
			return 0;
		*val = e->tag;
		*vlen = strlen(e->tag);
		return 1;
	}
#undef KEYIS
	for (i = 0; i < e->nparams; i++)
		if (e->params[i].klen == klen &&
		    memcmp(e->params[i].key, key, klen) == 0) {
			*val = e->params[i].val;
			*vlen = e->params[i].vlen;
			return 1;
		}
	return 0;
}

/* --- views ------------------------------------------------------------ */

void
resil__view_finish(resil__view *v)
{
	uint64_t sum = 0, sig = UINT64_C(0xcbf29ce484222325) ^ v->n;
	uint64_t wsig = sig;
	size_t i;

	v->same = 1;
	for (i = 0; i < v->n; i++) {
		sum += v->w[i];
		v->cum[i] = sum;
		if (v->w[i] != v->w[0])
			v->same = 0;
		sig = resil__mix64(sig ^ v->snap->e[v->idx[i]].ep->id);
		wsig = resil__mix64(wsig ^ v->w[i]);
	}
	v->total = sum;
	v->sig = sig;
	v->wsig = wsig;
}

resil_err
resil_directory_get_state(
    resil_directory *d, const char *address, resil_endpoint_state *out)
{
	resil__snapshot *s;
	resil__endpoint *ep;
	uint64_t now;
	size_t pos;

	if (d == NULL || address == NULL || out == NULL)
		return RESIL_E_INVAL;
	now = now_of(d);
	if (d->rate_on)
		rate_check(d, now); /* a state read ends an interval too */
	s = snap_get(d);
	pos = find_pos(s, address);
	if (pos == NOPOS) {
		resil__snap_release(s);
		return RESIL_E_NOTFOUND;
	}
	ep = s->e[pos].ep;
	memset(out, 0, sizeof(*out));
	out->position = pos;
	out->id = ep->id;
	out->active = resil__ep_active(ep);
	(void)resil__ep_ejected(ep, now); /* notice a return */
	out->ejected = ep_out(ep, now);
	out->streak = (uint32_t)resil__load64(&ep->streak);
	resil__spin_lock(&ep->lock);
	out->ejections = ep->k;
	resil__spin_unlock(&ep->lock);
	out->ejected_until = resil__load64(&ep->until);
	out->ewma_cost = resil__load64(&ep->ewma_seen)
	    ? (uint64_t)resil__ep_ewma(ep, now, 0.0, 0.0)
	    : 0;
	out->sr_successes = resil__load64(&ep->sr_successes);
	out->sr_elapsed = resil__load64(&ep->sr_elapsed);
	out->weight = s->e[pos].weight;
	out->breaker = ep->breaker != NULL
	    ? resil_breaker_get_state(resil__ep_breaker(ep))
	    : RESIL_BREAKER_CLOSED;
	{
		uint64_t iv = resil__load64(&ep->iv);
		out->interval_requests = iv & UINT32_MAX;
		out->interval_successes = iv >> 32;
	}
	out->success_rate = bits_double(resil__load64(&ep->iv_rate));
	out->healthy = (resil__load64(&ep->ejected) & RESIL__EP_DOWN) == 0;
	resil__snap_release(s);
	return RESIL_OK;
}

resil_health *
resil_directory_health(resil_directory *d)
{
	return d != NULL ? d->hc : NULL;
}

/* Mark address at time (the event's). */
static resil_err
mark_health(
    resil_directory *d, const char *address, int healthy, uint64_t time)
{
	resil__snapshot *s;
	resil__endpoint *ep = NULL;
	size_t pos;
	int changed;

	s = snap_get(d);
	pos = find_pos(s, address);
	if (pos == NOPOS) {
		resil__snap_release(s);
		return RESIL_E_NOTFOUND;
	}
	ep = s->e[pos].ep;
	changed = bits_put(&ep->ejected, RESIL__EP_DOWN, !healthy);
	if (changed)
		emit(d,
		    healthy ? RESIL_ENDPOINT_HEALTHY
		            : RESIL_ENDPOINT_UNHEALTHY,
		    ep->address, time, 0, 0);
	resil__snap_release(s);
	return RESIL_OK;
}

resil_err
resil_directory_set_healthy(
    resil_directory *d, const char *address, int healthy)
{
	if (d == NULL || address == NULL)
		return RESIL_E_INVAL;
	return mark_health(d, address, healthy, now_of(d));
}

/* The directory's checker: a transition marks the endpoint, then the
 * user's listener hears it. */
static void
health_event(const resil_health_event *ev, void *ctx)
{
	resil_directory *d = ctx;

	(void)mark_health(
	    d, ev->address, ev->type == RESIL_HEALTH_BECAME_HEALTHY, ev->time);
	if (d->hc_listener != NULL)
		d->hc_listener(ev, d->hc_listener_ctx);
}

resil_breaker *
resil_directory_breaker(resil_directory *d, const char *address)
{
	resil__snapshot *s;
	resil_breaker *b = NULL;
	size_t pos;

	if (d == NULL || address == NULL)
		return NULL;
	s = snap_get(d);
	pos = find_pos(s, address);
	if (pos != NOPOS)
		b = s->e[pos].ep->breaker != NULL
		    ? resil__ep_breaker(s->e[pos].ep)
		    : NULL;
	resil__snap_release(s);
	return b;
}

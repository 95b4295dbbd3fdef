/*
 * A fixture for the cluster tests (directory, router, balance, selector):
 * a manual clock, a scripted RNG that counts its draws, a directory and a
 * selector over it. Header-only; every function is static.
 */
#ifndef RESIL_TEST_CLUSTER_FX_H
#define RESIL_TEST_CLUSTER_FX_H

#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/selector.h>

#define FX_MAX_DRAWS 4096
#define FX_MAX_EVENTS 64

typedef struct scripted {
	double v[FX_MAX_DRAWS];
	size_t n;      /* scripted values */
	size_t next;   /* the next one to give */
	size_t calls;  /* draws made */
	resil_rng rng; /* after the script: the seeded generator */
	int seeded;
} scripted;

static inline double
scripted_uniform(void *ctx)
{
	scripted *s = ctx;

	s->calls++;
	if (s->next < s->n)
		return s->v[s->next++];
	return s->seeded ? resil_rng_uniform(&s->rng) : 0.0;
}

static inline void
scripted_set(scripted *s, const double *v, size_t n)
{
	memcpy(s->v, v, n * sizeof(*v));
	s->n = n;
	s->next = 0;
}

typedef struct fx {
	resil_manual_clock mc;
	scripted rnd;
	resil_random hook;
	resil_directory_config dcfg;
	resil_selector_config scfg;
	resil_directory *d;
	resil_selector *sel;
	resil_candidates *c;
	resil_endpoint_event ev[FX_MAX_EVENTS];
	char ev_addr[FX_MAX_EVENTS][64];
	size_t nev;
	resil_diag diag;
} fx;

static inline void
fx_listener(const resil_endpoint_event *ev, void *ctx)
{
	fx *f = ctx;

	if (f->nev < FX_MAX_EVENTS) {
		f->ev[f->nev] = *ev;
		snprintf(f->ev_addr[f->nev], sizeof(f->ev_addr[0]), "%s",
		    ev->address);
		f->ev[f->nev].address = f->ev_addr[f->nev];
		f->nev++;
	}
}

/* Configs with defaults; the caller adjusts them, then fx_start(). */
static inline void
fx_init(fx *f, uint64_t start)
{
	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, start);
	f->hook.uniform = scripted_uniform;
	f->hook.ctx = &f->rnd;
	resil_directory_config_init(&f->dcfg);
	f->dcfg.clock = resil_manual_clock_hook(&f->mc);
	f->dcfg.listener = fx_listener;
	f->dcfg.listener_ctx = f;
	resil_selector_config_init(&f->scfg);
	f->scfg.random = &f->hook;
	f->scfg.service = "S";
}

static inline int
fx_start(fx *f)
{
	if (resil_directory_new(&f->d, &f->dcfg, &f->diag) != RESIL_OK)
		return -1;
	if (resil_selector_new(&f->sel, f->d, &f->scfg, &f->diag) != RESIL_OK)
		return -2;
	if (resil_candidates_new(&f->c, f->sel) != RESIL_OK)
		return -3;
	return 0;
}

static inline void
fx_end(fx *f)
{
	resil_candidates_free(f->c);
	resil_selector_free(f->sel);
	resil_directory_free(f->d);
}

/* Push n endpoints "e0:1".. with the given weights (NULL: 100). */
static inline resil_err
fx_push_weights(fx *f, const int32_t *w, size_t n)
{
	resil_endpoint_spec specs[64];
	static char addr[64][32];
	size_t i;

	for (i = 0; i < n; i++) {
		snprintf(addr[i], sizeof(addr[i]), "e%zu:1", i);
		specs[i] = resil_endpoint_spec_default(addr[i]);
		if (w != NULL)
			specs[i].weight = w[i];
	}
	return resil_directory_push(f->d, specs, n, &f->diag);
}

/* Route and pick once for req; the address, or "" on error. */
static inline const char *
fx_pick(fx *f, const resil_request *req, resil_pick *p)
{
	if (resil_selector_route(f->sel, req, f->c, &f->diag) != RESIL_OK)
		return "";
	if (resil_selector_pick(f->sel, f->c, req, NULL, 0, p, &f->diag) !=
	    RESIL_OK)
		return "";
	return p->address;
}

/* Route, pick and report success at once: the address picked (copied). */
static inline const char *
fx_call(fx *f, const resil_request *req)
{
	static char last[64];
	resil_pick p;
	const char *a = fx_pick(f, req, &p);

	if (a[0] == '\0')
		return "";
	snprintf(last, sizeof(last), "%s", a);
	resil_selector_report(f->sel, &p, RESIL_OUTCOME_SUCCESS);
	return last;
}

#endif

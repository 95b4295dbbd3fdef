/*
 * Seen: the keyed families' figures ranked, and their Prometheus text,
 * shared by resil_keyed_top(), resil_keyed_prometheus() and the
 * registry's text (lib/keyed_prom.c). Internal.
 */
#ifndef RESIL_KEYED_PROM_H
#define RESIL_KEYED_PROM_H

#include <resil/keyed.h>

#include "prom_text.h"

/* One key's figures (docs/keyed.md, "Seen"), and a copy of its bytes. */
typedef struct resil__kfig {
	uint64_t calls, failures, rejections;
	uint64_t open; /* 1 when the breaker is not CLOSED */
	resil_breaker_state state;
	uint64_t seq; /* visit (entry) order: the last tie-break */
	int by;       /* how to rank (every key of a ranking the same) */
	uint8_t *key;
	size_t len, cap;
} resil__kfig;

/* The best cap keys of a family, the rest summed. */
typedef struct resil__ktop {
	const resil_allocator *a;
	int by; /* a resil_keyed_rank, or -1: failures + rejections */
	size_t cap, n;
	resil__kfig *key; /* n keys, best first */
	resil__kfig rest; /* the other live keys' figures, summed */
	uint64_t live;    /* live keys seen */
	int nomem;
} resil__ktop;

/* One pass over k's live keys (resil_keyed_foreach: under the family's
 * lock, one metrics read per key), keeping the best cap in a heap: time
 * O(keys log cap), memory cap figures and key copies, through a.
 * RESIL_OK or RESIL_E_NOMEM (t holds nothing then). */
resil_err resil__ktop_take(resil__ktop *t, resil_keyed *k, int by, size_t cap,
    const resil_allocator *a);
void resil__ktop_free(resil__ktop *t);

/* One family in the text: labelled family="F" when family is not NULL
 * (resil_keyed_prometheus()), else service="S",kind="K" (the registry). */
typedef struct resil__kfam {
	const char *family;
	const char *service;
	resil_keyed_kind kind;
	resil_keyed_metrics km;
	resil__ktop top;
	/* The overflow instance's figures (has_over: it has seen a call,
	 * and gets key="__overflow__" series). */
	resil__kfig over;
	int has_over;
} resil__kfam;

/* Fill f->over and f->has_over from k's overflow instance. */
void resil__kfam_overflow(resil__kfam *f, resil_keyed *k);

/* Every metric family of the keyed families f[0..n), each with one HELP
 * and TYPE, then its samples for every family in turn (per key: the top
 * keys, key="__other__" for the rest, key="__overflow__" for the
 * overflow instance once it has seen a call); a metric no
 * family has (failures: breakers and throttles; open: breakers) is left
 * out, and so is everything when n is 0. */
void resil__keyed_prom_write(resil__prom *w, const resil__kfam *f, size_t n);

/* lib/keyed.c: the allocator k was given (temporary memory of the seen
 * functions comes from it directly; it is not the family's). */
const resil_allocator *resil__keyed_user_alloc(const resil_keyed *k);

#endif

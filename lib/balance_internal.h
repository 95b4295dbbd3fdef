/*
 * Private: the balancers' room (lib/balance.c). One method's balancer and
 * its choice over a view (lib/directory_internal.h); the selector above
 * holds one per method. Never installed.
 */
#ifndef RESIL_BALANCE_INTERNAL_H
#define RESIL_BALANCE_INTERNAL_H

#include <resil/balance.h>
#include <resil/router.h> /* resil_request: the hash balancer's keys */

#include "directory_internal.h"

/* One method's balancer. */
typedef struct resil__lb {
	resil_balance_config cfg;
	unsigned feeds; /* what its picks' outcomes feed: RESIL__EP_* */
	const resil_allocator *a;
	resil__epoch *epoch; /* the directory's, for the ring */
	resil__spinlock lock;
	/* Round robin: the counters by snapshot position (rr_n of them,
	 * carried over by id), under lock. */
	uint64_t rr_version;
	size_t rr_n;
	uint64_t *rr_ids;
	int64_t *rr_cur;
	/* Its fast state over the last view picked from (rf_ok): candidate
	 * p's counter is rf_c[p] + w(p) * rf_t, and the candidates of each
	 * distinct weight form a ring in order (largest rf_c, first in order
	 * on a tie), starting at rf_gs[g], in rf_heap[rf_g0[g] .. +
	 * rf_gn[g]). rr_cur is stale for them
	 * until the state is folded back (balance.c). */
#define RESIL__RR_GROUPS 32
	int rf_ok; /* 0 none, 1 fast, 2 this view is scanned */
	uint64_t rf_version, rf_sig, rf_wsig;
	size_t rf_n, rf_cap, rf_ng;
	uint64_t rf_t;
	int64_t rf_total;
	int64_t *rf_c;
	uint32_t *rf_idx; /* the view's snapshot positions */
	uint32_t *rf_heap;
	int64_t rf_gw[RESIL__RR_GROUPS];
	uint32_t rf_g0[RESIL__RR_GROUPS], rf_gn[RESIL__RR_GROUPS];
	uint32_t rf_gs[RESIL__RR_GROUPS]; /* where each ring starts */
	/* Hash rings of the last RESIL__RINGS candidate sets (atomic), so
	 * that requests routed to different sets (tags, conditions) do not
	 * rebuild one ring back and forth. */
#define RESIL__RINGS 4
	void *rings[RESIL__RINGS];
	unsigned ring_next; /* under lock */
} resil__lb;

void resil__lb_init(resil__lb *lb, const resil_balance_config *cfg,
    const resil_allocator *a, resil__epoch *epoch);
void resil__lb_deinit(resil__lb *lb);

/* Choose one of v (n >= 1) into *out (a position in v). */
resil_err resil__lb_pick(resil__lb *lb, const resil__view *v,
    const resil_request *req, const resil_random *rnd, uint64_t now,
    size_t *out, resil_diag *diag);

#endif /* RESIL_BALANCE_INTERNAL_H */

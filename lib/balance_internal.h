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
	uint64_t rr_version;
	size_t rr_n;
	uint64_t *rr_ids;
	int64_t *rr_cur;
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

/*
 * The rate limiter's priority classes and its drain (issue 42): the GCRA
 * decision of lib/limit_rate.h against the part of the burst a class may
 * use. A class's share and the schedule are the same word, so one CAS
 * decides both and the reservations never overshoot under races.
 */
#include "limit_rate.h"

resil_err
resil_ratelimit_try_acquire_prio(resil_ratelimit *rl, resil_priority prio,
    uint32_t k, uint64_t *retry_after)
{
	unsigned cls;
	uint64_t ticks, now;

	if (rl == NULL || (unsigned)prio > (unsigned)RESIL_PRIORITY_CRITICAL)
		return RESIL_E_INVAL;
	cls = prio == RESIL_PRIORITY_UNSET ? RL_CLS_DEFAULT
	                                   : (unsigned)prio - 1u;
	/* No reservations (batched limiters have none): every class is the
	 * default one. */
	if (cls == RL_CLS_DEFAULT || rl->bsc[RL_CLS_SHEDDABLE] == rl->bs)
		return resil_ratelimit_try_acquire(rl, k, retry_after);
	if (k == 0 || k > rl->kmax[cls])
		return RESIL_E_INVAL;
	now = rl_now(rl);
	if (rl_take(rl, now, k, 0, 0, cls, &ticks, NULL) != RESIL_OK)
		return resil__rl_refuse(rl, k, ticks, now, retry_after);
	rl_granted(rl_my_stripe(rl), k);
	return RESIL_OK;
}

resil_err
resil_ratelimit_drain(resil_ratelimit *rl, uint64_t *drained)
{
	uint64_t *const st = rl == NULL ? NULL : rl->statep;
	uint64_t now, w, gen, b, base, n, t, lim;

	if (rl == NULL)
		return RESIL_E_INVAL;
	now = rl_now(rl);
	for (;;) {
		w = resil__load64(st);
		gen = w >> TAT_BITS;
		b = resil__load64(&RL_BASE(rl)[gen & 1]);
		if ((b & GEN_MASK) != gen) {
			resil__stall();
			continue;
		}
		base = b & ~GEN_MASK;
		if (now > base && now - base > rl->rebase_ticks) {
			resil__rl_rebase(rl, w, base, now);
			continue;
		}
		n = now > base ? (now - base) * rl->scale : 0;
		t = (w & TAT_MASK) > n ? (w & TAT_MASK) : n;
		lim = n + rl->bs;
		/* Empty already (or booked ahead by a wait): nothing to take,
		 * and a booking is never moved back. */
		if (t >= lim) {
			if (drained != NULL)
				*drained = 0;
			return RESIL_OK;
		}
		/* TAT = now + burst: no permit available, the next one due
		 * one emission interval from now. */
		if (resil__cas64(st, w, (gen << TAT_BITS) | lim))
			break;
	}
	if (drained != NULL)
		*drained = (lim - t) / rl->ts;
	return RESIL_OK;
}

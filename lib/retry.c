/*
 * resil retry: attempt limits, backoff and jitter, deadline, retry budget.
 */
#include <resil/retry.h>
#include <resil/value.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "atomic.h"
#include "retry_internal.h"
#include "internal.h"

/* Budget tokens are fixed point, in millionths, so a deposit of a fraction
 * of a token is exact and one atomic word holds the bank. */
#define TOKEN UINT64_C(1000000)
#define MAX_MULTIPLIER 100.0
#define MAX_RATIO 1000.0
#define MIN_RATIO 0.000001
#define MAX_BANK 1000000u
#define MAX_FLOOR 1000000u
/* 2^64 as a double: the first value that does not fit a uint64_t. */
#define TWO64 18446744073709551616.0

#define RSTRIPES 8u

struct resil_retry {
	resil_retry_config cfg;
	resil_clock clock;
	resil_allocator alloc;
	resil_random random;
	uint64_t deposit;     /* fixed-point tokens each call deposits */
	uint64_t bank_max;    /* fixed-point cap on the bank */
	uint64_t floor_step;  /* ticks between two floor retries */
	uint64_t floor_burst; /* how far ahead of now the floor may run */
	int budget_on;
	/* Decided once: no deadline, no listener, no budget and no
	 * retry-on-result, so a first attempt that succeeds needs nothing
	 * but a count. */
	int first_fast;
	/* The shared words below are written by every thread: keep them
	 * off the cache line of the read-only configuration above, and off
	 * each other's, so a busy bank does not slow the floor or the RNG. */
	char pad0[RESIL__CACHELINE];
	resil_rng rng; /* the default random source */
	char pad1[RESIL__CACHELINE - sizeof(resil_rng)];
	uint64_t bank; /* fixed-point tokens */
	char pad2[RESIL__CACHELINE - sizeof(uint64_t)];
	uint64_t floor_tat; /* GCRA: the time the floor is next free */
	char pad3[RESIL__CACHELINE - sizeof(uint64_t)];
	/* Outcome counters, striped per thread on their own cache lines:
	 * the success path of a call adds to one of them and writes
	 * nothing that every thread shares. */
	struct rstripe {
		uint64_t succeeded_first;
		uint64_t succeeded_retry;
		uint64_t failed_first;
		uint64_t failed_retry;
		uint64_t retries; /* attempts after the first */
		uint64_t exhausted;
		uint64_t deadline_stops;
		uint64_t budget_refusals;
	} stripes[RSTRIPES];
};

const char *
resil_retry_stop_name(resil_retry_stop stop)
{
	switch (stop) {
	case RESIL_RETRY_STOP_FINAL:
		return "final";
	case RESIL_RETRY_STOP_EXHAUSTED:
		return "exhausted";
	case RESIL_RETRY_STOP_DEADLINE:
		return "deadline";
	case RESIL_RETRY_STOP_BUDGET:
		return "budget";
	}
	return "unknown";
}

const char *
resil_retry_event_name(resil_retry_event_type type)
{
	switch (type) {
	case RESIL_RETRY_EVENT_RETRY:
		return "retry";
	case RESIL_RETRY_EVENT_GIVE_UP:
		return "give_up";
	case RESIL_RETRY_EVENT_SUCCESS:
		return "success";
	}
	return "unknown";
}

resil_err
resil_retry_config_validate(const resil_retry_config *cfg, resil_diag *diag)
{
	if (cfg == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "retry: NULL config");
	/* This is the first released layout: nothing shorter is known, and
	 * nothing longer can be read. */
	if (cfg->size != sizeof(resil_retry_config))
		return resil__check_size(diag, "retry", "resil_retry_config",
		    cfg->size, sizeof(resil_retry_config));
	if (cfg->max_attempts < 1 ||
	    cfg->max_attempts > RESIL_RETRY_MAX_ATTEMPTS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.max_attempts: %u is out of range 1..%u",
		    (unsigned)cfg->max_attempts,
		    (unsigned)RESIL_RETRY_MAX_ATTEMPTS);
	if ((unsigned)cfg->backoff > (unsigned)RESIL_BACKOFF_LINEAR)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.backoff: %u is not FIXED, EXPONENTIAL, CUSTOM or "
		    "LINEAR",
		    (unsigned)cfg->backoff);
	/* Written so that NaN fails too. */
	if (!(cfg->multiplier >= 1.0 && cfg->multiplier <= MAX_MULTIPLIER))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.multiplier: %g is out of range 1..%g",
		    cfg->multiplier, MAX_MULTIPLIER);
	if (cfg->backoff == RESIL_BACKOFF_CUSTOM && cfg->backoff_fn == NULL &&
	    cfg->backoff_result_fn == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.backoff_fn: NULL, but retry.backoff is CUSTOM");
	if (cfg->max_delay_ns < cfg->base_delay_ns)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.max_delay_ns: %llu is below retry.base_delay_ns "
		    "(%llu)",
		    (unsigned long long)cfg->max_delay_ns,
		    (unsigned long long)cfg->base_delay_ns);
	if ((unsigned)cfg->jitter > (unsigned)RESIL_JITTER_DECORRELATED_V2)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.jitter: %u is not NONE, PROPORTIONAL, FULL, EQUAL, "
		    "DECORRELATED or DECORRELATED_V2",
		    (unsigned)cfg->jitter);
	if (!(cfg->jitter_factor >= 0.0 && cfg->jitter_factor <= 1.0))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.jitter_factor: %g is out of range 0..1",
		    cfg->jitter_factor);
	if (!(cfg->budget_ratio == 0.0 ||
	        (cfg->budget_ratio >= MIN_RATIO &&
	            cfg->budget_ratio <= MAX_RATIO)))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.budget_ratio: %g is neither 0 (off) nor in range "
		    "%g..%g",
		    cfg->budget_ratio, MIN_RATIO, MAX_RATIO);
	if (cfg->budget_max_tokens < 1 || cfg->budget_max_tokens > MAX_BANK)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.budget_max_tokens: %u is out of range 1..%u",
		    (unsigned)cfg->budget_max_tokens, MAX_BANK);
	if (cfg->budget_min_retries > MAX_FLOOR)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.budget_min_retries: %u is out of range 0..%u",
		    (unsigned)cfg->budget_min_retries, MAX_FLOOR);
	if (cfg->budget_period_ns < 1)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.budget_period_ns: 0 is below 1 ns");
	if (cfg->budget_period_ns < cfg->budget_min_retries)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "retry.budget_period_ns: %llu is too short: it must "
		    "give each of retry.budget_min_retries (%u) at least "
		    "1 ns",
		    (unsigned long long)cfg->budget_period_ns,
		    (unsigned)cfg->budget_min_retries);
	return RESIL_OK;
}

/* A non-negative double, truncated to a whole tick, saturating. */
static uint64_t
to_ticks(double d)
{
	if (!(d > 0.0))
		return 0;
	if (d >= TWO64)
		return UINT64_MAX;
	return (uint64_t)d;
}

/* Polly's decorrelated jitter V2 at t: 2^t * tanh(sqrt(4 t)). */
static double
v2_formula(double t)
{
	return exp2(t) * tanh(sqrt(4.0 * t));
}

/* The wait before attempt n + 1: backoff, then jitter, then cap. *state is
 * DECORRELATED_V2's f(t) of the previous wait (0 before the first); other
 * modes leave it alone. */
static uint64_t
compute_wait(const resil_retry_config *cfg, uint32_t n, uint64_t prev,
    double u, double *state, int rc, const void *value)
{
	double d, base = (double)cfg->base_delay_ns, w, next;
	uint32_t i;

	switch (cfg->backoff) {
	case RESIL_BACKOFF_LINEAR:
		d = base * (double)n;
		break;
	case RESIL_BACKOFF_EXPONENTIAL:
		d = base;
		/* Repeated products rather than pow(): exact for the usual
		 * multipliers (2, 1.5) while the result fits 53 bits. Past
		 * 2^64 it only saturates. */
		for (i = 1; i < n && d < TWO64; i++)
			d *= cfg->multiplier;
		break;
	case RESIL_BACKOFF_CUSTOM:
		d = cfg->backoff_result_fn != NULL
		    ? (double)cfg->backoff_result_fn(
		          n, prev, rc, value, cfg->backoff_ctx)
		    : (double)cfg->backoff_fn(n, prev, cfg->backoff_ctx);
		break;
	case RESIL_BACKOFF_FIXED:
	default:
		d = base;
		break;
	}
	/* Truncate the backoff itself first, so that NONE gives exactly
	 * the backoff and the jitter scales a whole number of ticks. */
	d = (double)to_ticks(d);
	switch (cfg->jitter) {
	case RESIL_JITTER_PROPORTIONAL:
		w = d *
		    (1.0 - cfg->jitter_factor + 2.0 * cfg->jitter_factor * u);
		break;
	case RESIL_JITTER_FULL:
		w = d * u;
		break;
	case RESIL_JITTER_EQUAL:
		w = d / 2.0 + u * (d / 2.0);
		break;
	case RESIL_JITTER_DECORRELATED:
		if (prev == 0)
			prev = cfg->base_delay_ns;
		w = base + u * (3.0 * (double)prev - base);
		break;
	case RESIL_JITTER_DECORRELATED_V2:
		/* t grows by 1 + u - u_prev > 0 from wait to wait, so the
		 * difference is positive; max_attempts <= 1000 keeps 2^t
		 * finite. The products in Polly's order. */
		next = v2_formula((double)(n - 1u) + u);
		w = (next - *state) * (1.0 / 1.4) * base;
		*state = next;
		break;
	case RESIL_JITTER_NONE:
	default:
		w = d;
		break;
	}
	return to_ticks(w) < cfg->max_delay_ns ? to_ticks(w)
	                                       : cfg->max_delay_ns;
}

static double
clamp_unit(double u)
{
	if (!(u >= 0.0))
		return 0.0;
	if (u >= 1.0)
		return 0x1.fffffffffffffp-1;
	return u;
}

resil_err
resil_retry_new(
    resil_retry **out, const resil_retry_config *cfg, resil_diag *diag)
{
	resil_retry *r;
	resil_err err;

	if (out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "retry: NULL out");
	err = resil_retry_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	r = resil__calloc(cfg->alloc, sizeof(*r));
	if (r == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "retry: out of memory");
	memcpy(&r->cfg, cfg, cfg->size);
	r->alloc = *resil__allocator(cfg->alloc);
	r->clock = *(cfg->clock != NULL && cfg->clock->now != NULL
	        ? cfg->clock
	        : resil_clock_system());
	r->cfg.alloc = &r->alloc;
	r->cfg.clock = &r->clock;
	resil_rng_seed(&r->rng, cfg->seed);
	if (cfg->random.uniform != NULL)
		r->random = cfg->random;
	else
		r->random = resil_rng_hook(&r->rng);
	r->budget_on = cfg->budget_ratio > 0.0;
	r->first_fast = cfg->deadline_ns == 0 && cfg->listener == NULL &&
	    !r->budget_on && cfg->retry_on_result == NULL;
	r->deposit = (uint64_t)(cfg->budget_ratio * (double)TOKEN + 0.5);
	r->bank_max = (uint64_t)cfg->budget_max_tokens * TOKEN;
	if (cfg->budget_min_retries > 0) {
		r->floor_step =
		    cfg->budget_period_ns / cfg->budget_min_retries;
		r->floor_burst =
		    r->floor_step * (cfg->budget_min_retries - 1u);
	}
	/* The bank starts empty (calloc) and the floor full: its next free
	 * time, 0, is never ahead of now. */
	*out = r;
	return RESIL_OK;
}

void
resil_retry_free(resil_retry *r)
{
	resil_allocator a;

	if (r == NULL)
		return;
	a = r->alloc;
	resil__free(&a, r, sizeof(*r));
}

static void
budget_deposit(resil_retry *r)
{
	uint64_t cur = resil__load64(&r->bank), next;

	for (;;) {
		next = cur + r->deposit;
		if (next > r->bank_max)
			next = r->bank_max;
		if (next == cur || resil__cas64(&r->bank, cur, next))
			return;
		cur = resil__load64(&r->bank);
	}
}

/* Spend one retry: from the bank if it holds a whole token, otherwise
 * from the floor (a GCRA over one word: each retry moves the floor's next
 * free time one step on; it may run at most floor_burst ahead of now). */
static int
budget_withdraw(resil_retry *r, uint64_t now)
{
	uint64_t cur, t, next;

	cur = resil__load64(&r->bank);
	while (cur >= TOKEN) {
		if (resil__cas64(&r->bank, cur, cur - TOKEN))
			return 1;
		cur = resil__load64(&r->bank);
	}
	if (r->floor_step == 0)
		return 0;
	cur = resil__load64(&r->floor_tat);
	for (;;) {
		t = cur > now ? cur : now;
		if (t - now > r->floor_burst)
			return 0;
		next = t > UINT64_MAX - r->floor_step ? UINT64_MAX
		                                      : t + r->floor_step;
		if (resil__cas64(&r->floor_tat, cur, next))
			return 1;
		cur = resil__load64(&r->floor_tat);
	}
}

static void
emit(const resil_retry *r, resil_retry_event_type type, uint32_t attempt,
    uint64_t wait, uint64_t time, int rc, resil_err status,
    resil_outcome outcome, resil_retry_stop stop)
{
	resil_retry_event ev;

	if (r->cfg.listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.type = type;
	ev.attempt = attempt;
	ev.wait = wait;
	ev.time = time;
	ev.rc = rc;
	ev.status = status;
	ev.outcome = outcome;
	ev.stop = stop;
	r->cfg.listener(&ev, r->cfg.listener_ctx);
}

int
resil__retry_needs_time(const resil_retry *r)
{
	return r->cfg.deadline_ns != 0 || r->cfg.listener != NULL;
}

#if defined(__GNUC__)
#define RESIL__ALWAYS_INLINE __attribute__((always_inline))
#else
#define RESIL__ALWAYS_INLINE
#endif

/* The steps are inlined into resil_retry_call(); the pipeline's machine
 * calls the exported wrappers below. */
RESIL__ALWAYS_INLINE static inline void
run_begin(resil_retry *r, resil__retry_run *run, int timed, uint64_t now)
{
	const resil_retry_config *cfg = &r->cfg;

	run->has_deadline = cfg->deadline_ns != 0;
	run->timed = timed;
	run->now = run->t0 = timed ? now : 0;
	run->deadline_at = run->t0 > UINT64_MAX - cfg->deadline_ns
	    ? UINT64_MAX
	    : run->t0 + cfg->deadline_ns;
	run->wait = 0;
	run->waited = 0;
	run->jstate = 0.0;
	run->n = 1;
	run->max_attempts = cfg->max_attempts;
	run->rc = 0;
	run->value = NULL;
	run->by_result = 0;
	run->status = RESIL_OK;
	run->outcome = RESIL_OUTCOME_SUCCESS;
	run->stop = RESIL_RETRY_STOP_FINAL;
	if (r->budget_on)
		budget_deposit(r);
}

RESIL__ALWAYS_INLINE static inline int
run_judge(resil_retry *r, resil__retry_run *run, int rc, resil_err status,
    const void *value, uint64_t now, int classified, resil_outcome known)
{
	const resil_retry_config *cfg = &r->cfg;
	int want;

	if (run->timed)
		run->now = now;
	run->rc = rc;
	run->value = value;
	run->status = status;
	run->by_result = 0;
	if (status == RESIL_OK) {
		/* Classified once per attempt: a first attempt may have
		 * been classified already. */
		run->outcome = classified
		    ? known
		    : resil_classify(&cfg->classifier, rc, value);
		if (run->outcome == RESIL_OUTCOME_FAILURE)
			want = cfg->retry_on_failure == NULL ||
			    cfg->retry_on_failure(
			        rc, value, cfg->retry_on_failure_ctx);
		else if (run->outcome == RESIL_OUTCOME_SUCCESS)
			want = run->by_result = cfg->retry_on_result != NULL &&
			    cfg->retry_on_result(
			        rc, value, cfg->retry_on_result_ctx);
		else
			want = 0; /* business and ignored: never */
	} else {
		/* A lower layer answered for the call; to the caller it is a
		 * failed call. A rejection is retried only on request:
		 * retrying into an open breaker or a full limit just burns
		 * attempts. */
		run->outcome = RESIL_OUTCOME_FAILURE;
		if (status == RESIL_E_OPEN)
			want = cfg->retry_on_open;
		else if (status == RESIL_E_LIMITED)
			want = cfg->retry_on_limited;
		else
			want = 1;
	}
	if (!want) {
		run->stop = RESIL_RETRY_STOP_FINAL;
		return 0;
	}
	if (run->n >= run->max_attempts) {
		run->stop = RESIL_RETRY_STOP_EXHAUSTED;
		return 0;
	}
	return 1;
}

static int
run_plan(resil_retry *r, resil__retry_run *run, uint64_t now)
{
	const resil_retry_config *cfg = &r->cfg;
	uint64_t wait;

	if (!run->timed) {
		/* The first wait: from here on, time is read. */
		run->timed = 1;
		run->now = run->t0 = now;
	}
	now = run->now;
	wait = compute_wait(cfg, run->n, run->wait,
	    cfg->jitter == RESIL_JITTER_NONE
	        ? 0.0
	        : resil_random_uniform(&r->random),
	    &run->jstate, run->rc, run->value);
	/* The server's pushback (value.h): at least its Retry-After, as
	 * gRPC's retry pushback (which waits exactly that long). */
	if (RESIL__UNLIKELY(resil_rc_is_throttled(run->rc)) &&
	    resil_rc_retry_after_ms(run->rc) > 0) {
		uint64_t ra = (uint64_t)resil_rc_retry_after_ms(run->rc) *
		    RESIL_NS_PER_MS;

		if (ra > wait)
			wait = ra;
	}
	run->wait = wait;
	/* The next attempt would start at now + wait; it starts only before
	 * the deadline, and no wait is begun for an attempt that would not
	 * start. */
	if (run->has_deadline &&
	    (now >= run->deadline_at || wait >= run->deadline_at - now)) {
		run->stop = RESIL_RETRY_STOP_DEADLINE;
		return 0;
	}
	if (r->budget_on && !budget_withdraw(r, now)) {
		run->stop = RESIL_RETRY_STOP_BUDGET;
		return 0;
	}
	emit(r, RESIL_RETRY_EVENT_RETRY, run->n, wait, now, run->rc,
	    run->status, run->outcome, RESIL_RETRY_STOP_FINAL);
	return 1;
}

static int
run_resume(resil_retry *r, resil__retry_run *run, uint64_t now)
{
	(void)r;
	run->waited += run->wait;
	run->now = now;
	/* A real sleep may overshoot; the rule is about when the attempt
	 * actually starts. */
	if (run->has_deadline && now >= run->deadline_at) {
		run->stop = RESIL_RETRY_STOP_DEADLINE;
		return 0;
	}
	run->n++;
	return 1;
}

int
resil__retry_spend(resil_retry *r, uint64_t now)
{
	if (!r->budget_on || budget_withdraw(r, now))
		return 1;
	resil__inc64(
	    &r->stripes[resil__thread_stripe(RSTRIPES)].budget_refusals);
	return 0;
}

RESIL__ALWAYS_INLINE static inline resil_err
run_end(resil_retry *r, const resil__retry_run *run, resil_retry_result *res)
{
	struct rstripe *st = &r->stripes[resil__thread_stripe(RSTRIPES)];
	uint32_t n = run->n;

	if (n > 1)
		resil__faa64(&st->retries, n - 1);
	if (run->outcome == RESIL_OUTCOME_SUCCESS && !run->by_result)
		resil__inc64(
		    n > 1 ? &st->succeeded_retry : &st->succeeded_first);
	else
		resil__inc64(n > 1 ? &st->failed_retry : &st->failed_first);
	switch (run->stop) {
	case RESIL_RETRY_STOP_EXHAUSTED:
		resil__inc64(&st->exhausted);
		break;
	case RESIL_RETRY_STOP_DEADLINE:
		resil__inc64(&st->deadline_stops);
		break;
	case RESIL_RETRY_STOP_BUDGET:
		resil__inc64(&st->budget_refusals);
		break;
	case RESIL_RETRY_STOP_FINAL:
		break;
	}

	if (run->stop != RESIL_RETRY_STOP_FINAL)
		emit(r, RESIL_RETRY_EVENT_GIVE_UP, n, 0, run->now, run->rc,
		    run->status, run->outcome, run->stop);
	else if (run->outcome == RESIL_OUTCOME_SUCCESS && n > 1)
		emit(r, RESIL_RETRY_EVENT_SUCCESS, n, 0, run->now, run->rc,
		    run->status, run->outcome, run->stop);

	if (res != NULL) {
		res->attempts = n;
		res->rc = run->rc;
		res->status = run->status;
		res->outcome = run->outcome;
		res->stop = run->stop;
		res->waited = run->waited;
		res->elapsed = run->now >= run->t0 ? run->now - run->t0 : 0;
	}
	if (run->by_result && run->stop != RESIL_RETRY_STOP_FINAL &&
	    r->cfg.fail_after_max_attempts)
		return RESIL_E_RETRIES_EXHAUSTED;
	return run->status;
}

void
resil__retry_begin(
    resil_retry *r, resil__retry_run *run, int timed, uint64_t now)
{
	run_begin(r, run, timed, now);
}

int
resil__retry_judge(resil_retry *r, resil__retry_run *run, int rc,
    resil_err status, const void *value, uint64_t now)
{
	return run_judge(
	    r, run, rc, status, value, now, 0, RESIL_OUTCOME_SUCCESS);
}

int
resil__retry_plan(resil_retry *r, resil__retry_run *run, uint64_t now)
{
	return run_plan(r, run, now);
}

int
resil__retry_resume(resil_retry *r, resil__retry_run *run, uint64_t now)
{
	return run_resume(r, run, now);
}

resil_err
resil__retry_end(
    resil_retry *r, const resil__retry_run *run, resil_retry_result *res)
{
	return run_end(r, run, res);
}

resil_err
resil_retry_call(resil_retry *r, resil_retry_fn fn, void *ctx, void *out,
    resil_retry_result *res)
{
	resil__retry_run run;
	resil_retry_attempt at;
	resil_outcome first = RESIL_OUTCOME_SUCCESS;
	int rc, timed, classified = 0;

	if (r == NULL || fn == NULL)
		return RESIL_E_INVAL;
	/* The clock is read only where something needs the time: a
	 * deadline, a listener (events carry times), or a wait before a
	 * retry. A call that succeeds at once without either reads none. */
	if (RESIL__LIKELY(r->first_fast)) {
		/* The first attempt is made before anything else is set up:
		 * when it succeeds, the policy has only a count to keep. */
		at.number = 1;
		at.start = 0;
		at.time_left = UINT64_MAX;
		at.last_wait = 0;
		at.last_rc = 0;
		at.status = RESIL_OK;
		rc = fn(ctx, &at, out);
		/* The default classifier inline; a user's through
		 * resil_classify(), which guards its answer. */
		first = r->cfg.classifier.fn == NULL
		    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
		    : resil_classify(&r->cfg.classifier, rc, out);
		if (RESIL__LIKELY(at.status == RESIL_OK &&
		        first == RESIL_OUTCOME_SUCCESS)) {
			resil__retry_count_first(
			    &r->stripes[0].succeeded_first);
			if (res != NULL) {
				res->attempts = 1;
				res->rc = rc;
				res->status = RESIL_OK;
				res->outcome = RESIL_OUTCOME_SUCCESS;
				res->stop = RESIL_RETRY_STOP_FINAL;
				res->waited = 0;
				res->elapsed = 0;
			}
			return RESIL_OK;
		}
		run_begin(r, &run, 0, 0);
		classified = at.status == RESIL_OK;
		goto judge;
	}
	timed = resil__retry_needs_time(r);
	run_begin(r, &run, timed, timed ? resil_clock_now(&r->clock) : 0);
	for (;;) {
		at.number = run.n;
		at.start = run.now;
		at.time_left =
		    run.has_deadline ? run.deadline_at - run.now : UINT64_MAX;
		at.last_wait = run.wait;
		at.last_rc = run.rc;
		at.status = RESIL_OK;
		rc = fn(ctx, &at, out);
	judge:
		if (!run_judge(r, &run, rc, at.status, out,
		        run.timed ? resil_clock_now(&r->clock) : 0, classified,
		        first))
			break;
		classified = 0;
		if (!run_plan(r, &run,
		        run.timed ? run.now : resil_clock_now(&r->clock)))
			break;
		resil_clock_sleep(&r->clock, run.wait);
		if (!run_resume(r, &run, resil_clock_now(&r->clock)))
			break;
	}
	return run_end(r, &run, res);
}

int
resil__retry_fast_ok(const resil_retry *r)
{
	return r->cfg.deadline_ns == 0 && !r->budget_on &&
	    r->cfg.retry_on_result == NULL;
}

_Static_assert(RSTRIPES == RESIL__RETRY_STRIPES &&
        sizeof(struct rstripe) == RESIL__RETRY_STRIDE * sizeof(uint64_t),
    "retry_internal.h's stripe layout");

/* Each stripe on its own cache line, as a policy's. */
_Alignas(64) uint64_t
    resil__retry_first_sink[RESIL__RETRY_STRIPES * RESIL__RETRY_STRIDE];

uint64_t *
resil__retry_first_counters(resil_retry *r)
{
	return &r->stripes[0].succeeded_first;
}

void
resil__retry_count_first_success(resil_retry *r)
{
	resil__retry_count_first(&r->stripes[0].succeeded_first);
}

resil_err
resil_retry_next_delay(const resil_retry *r, uint32_t attempt,
    uint64_t prev_wait, double u, uint64_t *wait)
{
	double state = 0.0;

	if (r == NULL || wait == NULL || attempt == 0 ||
	    r->cfg.jitter == RESIL_JITTER_DECORRELATED_V2)
		return RESIL_E_INVAL;
	*wait = compute_wait(
	    &r->cfg, attempt, prev_wait, clamp_unit(u), &state, 0, NULL);
	return RESIL_OK;
}

resil_err
resil_retry_plan(const resil_retry_config *cfg, const resil_random *random,
    uint64_t *waits, size_t cap, size_t *count, resil_diag *diag)
{
	resil_rng rng;
	resil_random src;
	uint64_t wait = 0, t = 0;
	double state = 0.0;
	size_t len = 0;
	uint32_t n;
	resil_err err;

	if (count == NULL || (waits == NULL && cap > 0))
		return resil__diagf(
		    diag, RESIL_E_INVAL, "retry: NULL count or waits");
	err = resil_retry_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	if (random != NULL && random->uniform != NULL) {
		src = *random;
	} else if (cfg->random.uniform != NULL) {
		src = cfg->random;
	} else {
		resil_rng_seed(&rng, cfg->seed);
		src = resil_rng_hook(&rng);
	}
	/* The same walk as resil_retry_call() with attempts that fail at
	 * once: time moves only by the waits. */
	for (n = 1; n < cfg->max_attempts; n++) {
		wait = compute_wait(cfg, n, wait,
		    cfg->jitter == RESIL_JITTER_NONE
		        ? 0.0
		        : resil_random_uniform(&src),
		    &state, 0, NULL);
		if (cfg->deadline_ns != 0 &&
		    (t >= cfg->deadline_ns || wait >= cfg->deadline_ns - t))
			break;
		if (len < cap)
			waits[len] = wait;
		len++;
		t = t > UINT64_MAX - wait ? UINT64_MAX : t + wait;
	}
	*count = len;
	return RESIL_OK;
}

static const char *
stop_phrase(const resil_retry_result *res)
{
	switch (res->stop) {
	case RESIL_RETRY_STOP_EXHAUSTED:
		return "";
	case RESIL_RETRY_STOP_DEADLINE:
		return ", stopped at the deadline";
	case RESIL_RETRY_STOP_BUDGET:
		return ", retry budget exhausted";
	case RESIL_RETRY_STOP_FINAL:
		return ", not retryable";
	}
	return "";
}

resil_err
resil_retry_result_format(const resil_retry_result *res,
    const char *last_error, char *buf, size_t len)
{
	const char *times;

	if (res == NULL || buf == NULL || len == 0)
		return RESIL_E_INVAL;
	times = res->attempts == 1 ? "time" : "times";
	if (res->stop == RESIL_RETRY_STOP_FINAL && res->status == RESIL_OK &&
	    res->outcome == RESIL_OUTCOME_SUCCESS) {
		snprintf(buf, len, "Tried %u %s, succeeded.",
		    (unsigned)res->attempts, times);
		return RESIL_OK;
	}
	if (last_error != NULL)
		snprintf(buf, len, "Tried %u %s%s. Last error is: %s",
		    (unsigned)res->attempts, times, stop_phrase(res),
		    last_error);
	else if (res->status != RESIL_OK)
		snprintf(buf, len, "Tried %u %s%s. Last error is: %s",
		    (unsigned)res->attempts, times, stop_phrase(res),
		    resil_strerror(res->status));
	else
		snprintf(buf, len, "Tried %u %s%s. Last error is: rc %d (%s)",
		    (unsigned)res->attempts, times, stop_phrase(res), res->rc,
		    resil_outcome_name(res->outcome));
	return RESIL_OK;
}

resil_err
resil_retry_get_metrics(const resil_retry *r, resil_retry_metrics *out)
{
	resil_retry *w = (resil_retry *)r; /* the loads take non-const */
	resil_retry_metrics m;
	unsigned i;

	if (r == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(&m, 0, sizeof(m));
	for (i = 0; i < RSTRIPES; i++) {
		struct rstripe *st = &w->stripes[i];

		m.succeeded_without_retry +=
		    resil__load64(&st->succeeded_first);
		m.succeeded_after_retry += resil__load64(&st->succeeded_retry);
		m.failed_without_retry += resil__load64(&st->failed_first);
		m.failed_after_retry += resil__load64(&st->failed_retry);
		m.retries += resil__load64(&st->retries);
		m.exhausted += resil__load64(&st->exhausted);
		m.deadline_stops += resil__load64(&st->deadline_stops);
		m.budget_refusals += resil__load64(&st->budget_refusals);
	}
	m.calls = m.succeeded_without_retry + m.succeeded_after_retry +
	    m.failed_without_retry + m.failed_after_retry;
	m.attempts = m.calls + m.retries;
	m.budget_tokens = (double)resil__load64(&w->bank) / (double)TOKEN;
	*out = m;
	return RESIL_OK;
}

void
resil_retry_recorder_init(
    resil_retry_recorder *rec, resil_retry_event *events, size_t capacity)
{
	if (rec == NULL)
		return;
	rec->events = events;
	rec->capacity = events == NULL ? 0 : capacity;
	rec->count = 0;
	rec->dropped = 0;
}

void
resil_retry_recorder_listener(const resil_retry_event *ev, void *ctx)
{
	resil_retry_recorder *rec = ctx;

	if (rec == NULL || ev == NULL)
		return;
	if (rec->count < rec->capacity)
		rec->events[rec->count++] = *ev;
	else
		rec->dropped++;
}

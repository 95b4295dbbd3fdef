/*
 * Adaptive client-side throttling (include/resil/throttle.h): a ring of
 * time buckets of requests and accepts, read whole at each admit.
 */
#include <resil/throttle.h>

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "kv.h"

/* One time bucket: 32 bytes, two to a cache line. */
typedef struct tbucket {
	uint64_t epoch; /* bucket index + 1; 0: never used */
	uint64_t requests;
	uint64_t accepts;
	uint64_t pad_;
} tbucket;

/* Lifetime counters of one thread stripe, one cache line. */
typedef struct tstripe {
	uint64_t admitted;
	uint64_t local_rejects;
	uint64_t accepts;
	uint64_t backend_rejects;
	uint64_t no_answer;
	uint64_t pad_[3];
} tstripe;

_Static_assert(sizeof(tstripe) == RESIL__CACHELINE, "one line a stripe");

struct resil_throttle {
	double k;
	uint64_t window_ns;
	uint64_t bucket_ns;
	uint32_t buckets;
	resil_random random; /* uniform NULL: rng */
	resil_rng rng;
	resil_throttle_listener_fn listener;
	void *listener_ctx;
	resil_allocator alloc;
	resil_clock clock;
	size_t bytes; /* the allocation, for free */
	tstripe stripes[RESIL__STRIPES];
	tbucket ring[]; /* buckets of them */
};

const char *
resil_throttle_event_name(resil_throttle_event_type t)
{
	return t == RESIL_THROTTLE_EVENT_REJECTED ? "rejected" : "unknown";
}

/* The bucket index of time now. The clock's last tick shares the bucket
 * of the tick before it, so that index + 1 (an epoch) never wraps to 0,
 * "never used". */
static inline uint64_t
bucket_index(const resil_throttle *t, uint64_t now)
{
	if (RESIL__UNLIKELY(now == UINT64_MAX))
		now--;
	return now / t->bucket_ns;
}

/* The bucket of index idx, recycled first when it still holds an older
 * index's counts. An add racing the recycling may be lost (the header
 * says so); a clock that moved back adds to the newer bucket. */
static inline tbucket *
bucket_for(resil_throttle *t, uint64_t idx)
{
	tbucket *bk = &t->ring[idx % t->buckets];
	uint64_t e = resil__load64(&bk->epoch);

	if (RESIL__UNLIKELY(e < idx + 1) &&
	    resil__cas64(&bk->epoch, e, idx + 1)) {
		resil__store64(&bk->requests, 0);
		resil__store64(&bk->accepts, 0);
	}
	return bk;
}

/* The window's counts at bucket index idx. */
static void
window_counts(resil_throttle *t, uint64_t idx, uint64_t *req, uint64_t *acc)
{
	/* Locals: the loads' compiler barriers would reload fields. */
	const tbucket *ring = t->ring;
	const uint64_t n = t->buckets, next = idx + 1;
	uint64_t r = 0, a = 0, i;

	for (i = 0; i < n; i++) {
		/* Bucket e - 1 is live while idx - (e - 1) < buckets. One
		 * ahead of idx (a clock that moved back) wraps to a huge
		 * age; a bucket never used (epoch 0) has counts 0, so it
		 * adds nothing whatever its age reads as. */
		if (next - resil__load64(&ring[i].epoch) >= n)
			continue;
		r += resil__load64(&ring[i].requests);
		a += resil__load64(&ring[i].accepts);
	}
	*req = r;
	*acc = a;
}

/* max(0, (req - k * acc) / (req + 1)); 0 when off. */
static double
reject_p(double k, uint64_t req, uint64_t acc)
{
	double num;

	if (k == 0)
		return 0;
	num = (double)req - k * (double)acc;
	return num > 0 ? num / ((double)req + 1) : 0;
}

static void
stripe_count(resil_throttle *t, size_t field)
{
	(void)resil__thread_stripe(RESIL__STRIPES);
	resil__stripe_inc((char *)t->stripes + field, sizeof(tstripe));
}

resil_err
resil_throttle_config_validate(
    const resil_throttle_config *cfg, resil_diag *diag)
{
	if (cfg == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "throttle: config is NULL");
	if (cfg->size != sizeof(*cfg))
		return resil__check_size(diag, "throttle",
		    "resil_throttle_config", cfg->size, sizeof(*cfg));
	/* !(k >= 1) also refuses NaN. */
	if (cfg->k != 0 && !(cfg->k >= 1 && cfg->k <= RESIL_THROTTLE_MAX_K))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "throttle.k: %g is out of range: 0 (off) or 1..%.0f",
		    cfg->k, RESIL_THROTTLE_MAX_K);
	if (cfg->buckets == 0 || cfg->buckets > RESIL_THROTTLE_MAX_BUCKETS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "throttle.buckets: %" PRIu32 " is out of range 1..%u",
		    cfg->buckets, RESIL_THROTTLE_MAX_BUCKETS);
	if (cfg->window_ns < cfg->buckets)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "throttle.window_ns: %" PRIu64 " is shorter than %" PRIu32
		    " buckets of 1 tick",
		    cfg->window_ns, cfg->buckets);
	if (cfg->window_ns % cfg->buckets != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "throttle.window_ns: %" PRIu64
		    " is not a whole number of %" PRIu32 " buckets",
		    cfg->window_ns, cfg->buckets);
	return RESIL_OK;
}

resil_err
resil_throttle_config_set(resil_throttle_config *cfg, const char *key,
    const char *value, resil_diag *diag)
{
	char b[64];
	double d = 0;
	uint64_t w = 0;
	uint32_t n = 0;
	resil_err e;

	if (cfg == NULL || key == NULL || value == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "throttle: NULL argument");
	if (strcmp(key, "throttle.k") == 0) {
		if (resil__kv_trim(key, value, b, sizeof(b), diag) != 0)
			return RESIL_E_INVAL;
		if (strcmp(b, "off") == 0) {
			cfg->k = 0;
			return RESIL_OK;
		}
		/* One message for both ends of the range, and its gap. */
		e = resil__kv_number(key, b, 0, 1e300, &d, diag);
		if (e != RESIL_OK)
			return e;
		if (d != 0 && (d < 1 || d > RESIL_THROTTLE_MAX_K))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: %s is out of range: 0 (off) or 1..%.0f", key,
			    b, RESIL_THROTTLE_MAX_K);
		cfg->k = d;
		return RESIL_OK;
	}
	if (strcmp(key, "throttle.window") == 0) {
		e = resil__kv_duration(key, value, 1, &w, diag);
		if (e == RESIL_OK)
			cfg->window_ns = w;
		return e;
	}
	if (strcmp(key, "throttle.buckets") == 0) {
		e = resil__kv_u32(
		    key, value, 1, RESIL_THROTTLE_MAX_BUCKETS, &n, diag);
		if (e == RESIL_OK)
			cfg->buckets = n;
		return e;
	}
	return resil__diagf(diag, RESIL_E_NOTFOUND,
	    "%s: unknown key (throttle keys: k, window, buckets)", key);
}

resil_err
resil_throttle_new(
    resil_throttle **out, const resil_throttle_config *cfg, resil_diag *diag)
{
	resil_throttle *t;
	resil_err err;
	size_t bytes;
	uint64_t now;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "throttle: out is NULL");
	err = resil_throttle_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	bytes = sizeof(*t) + (size_t)cfg->buckets * sizeof(tbucket);
	t = resil__calloc(cfg->alloc, bytes);
	if (t == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "throttle: out of memory");
	t->bytes = bytes;
	t->k = cfg->k;
	t->window_ns = cfg->window_ns;
	t->buckets = cfg->buckets;
	t->bucket_ns = cfg->window_ns / cfg->buckets;
	t->random = cfg->random;
	resil_rng_seed(&t->rng, cfg->seed);
	t->listener = cfg->listener;
	t->listener_ctx = cfg->listener_ctx;
	t->alloc = *resil__allocator(cfg->alloc);
	t->clock = cfg->clock != NULL && cfg->clock->now != NULL
	    ? *cfg->clock
	    : *resil_clock_system();
	/* The current bucket is ready: with a clock that stays in it, no
	 * count can race a recycling. */
	now = resil_clock_coarse(&t->clock);
	(void)bucket_for(t, bucket_index(t, now));
	*out = t;
	return RESIL_OK;
}

void
resil_throttle_free(resil_throttle *t)
{
	resil_allocator a;

	if (t == NULL)
		return;
	a = t->alloc;
	resil__free(&a, t, t->bytes);
}

/* Tell the listener about a local rejection. */
static void
tell_rejected(resil_throttle *t, uint64_t now, uint64_t req, uint64_t acc,
    double p, double u)
{
	resil_throttle_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.type = RESIL_THROTTLE_EVENT_REJECTED;
	ev.time = now;
	ev.requests = req;
	ev.accepts = acc;
	ev.p = p;
	ev.draw = u;
	t->listener(&ev, t->listener_ctx);
}

resil_err
resil_throttle_admit(resil_throttle *t)
{
	uint64_t now, idx, req = 0, acc = 0;
	double p = 0, u;

	if (RESIL__UNLIKELY(t == NULL))
		return RESIL_E_INVAL;
	now = resil_clock_coarse(&t->clock);
	idx = bucket_index(t, now);
	if (t->k != 0) {
		window_counts(t, idx, &req, &acc);
		p = reject_p(t->k, req, acc);
	}
	/* The request counts either way: a locally rejected one too. */
	resil__inc64(&bucket_for(t, idx)->requests);
	if (p > 0) {
		u = t->random.uniform != NULL
		    ? resil_random_uniform(&t->random)
		    : resil_rng_uniform(&t->rng);
		if (u < p) {
			stripe_count(t, offsetof(tstripe, local_rejects));
			if (t->listener != NULL)
				tell_rejected(t, now, req, acc, p, u);
			return RESIL_E_LIMITED;
		}
	}
	stripe_count(t, offsetof(tstripe, admitted));
	return RESIL_OK;
}

resil_err
resil_throttle_report(resil_throttle *t, resil_throttle_result result)
{
	uint64_t now;

	if (RESIL__UNLIKELY(t == NULL))
		return RESIL_E_INVAL;
	switch (result) {
	case RESIL_THROTTLE_ACCEPTED:
		now = resil_clock_coarse(&t->clock);
		resil__inc64(&bucket_for(t, bucket_index(t, now))->accepts);
		stripe_count(t, offsetof(tstripe, accepts));
		return RESIL_OK;
	case RESIL_THROTTLE_REJECTED:
		stripe_count(t, offsetof(tstripe, backend_rejects));
		return RESIL_OK;
	case RESIL_THROTTLE_NO_ANSWER:
		stripe_count(t, offsetof(tstripe, no_answer));
		return RESIL_OK;
	default:
		return RESIL_E_INVAL;
	}
}

resil_err
resil_throttle_get_metrics(resil_throttle *t, resil_throttle_metrics *out)
{
	uint64_t now;
	unsigned i;

	if (t == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	for (i = 0; i < RESIL__STRIPES; i++) {
		const tstripe *s = &t->stripes[i];

		out->admitted += resil__load64(&s->admitted);
		out->local_rejects += resil__load64(&s->local_rejects);
		out->accepts += resil__load64(&s->accepts);
		out->backend_rejects += resil__load64(&s->backend_rejects);
		out->no_answer += resil__load64(&s->no_answer);
	}
	out->requests = out->admitted + out->local_rejects;
	now = resil_clock_coarse(&t->clock);
	window_counts(t, bucket_index(t, now), &out->window_requests,
	    &out->window_accepts);
	out->reject_probability =
	    reject_p(t->k, out->window_requests, out->window_accepts);
	out->k = t->k;
	out->window_ns = t->window_ns;
	out->buckets = t->buckets;
	return RESIL_OK;
}

/*
 * Adaptive client-side throttling (include/resil/throttle.h): a ring of
 * time buckets of requests and accepts, with running totals of the
 * window, so that an admit reads two words instead of every bucket.
 */
#include <resil/throttle.h>

#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "kv.h"

/* One time bucket: 32 bytes, two to a cache line. Its index is implied
 * by head (below). Requests by class (RESIL_THROTTLE_CRITICAL ..
 * SHEDDABLE). */
typedef struct tbucket {
	uint64_t requests[3];
	uint64_t accepts;
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
	/* The window: head is the newest bucket index + 1 (never 0 after
	 * _new); tot_req (by class) and tot_acc the sums of the ring's
	 * counts, kept as the counts change (two's complement: a
	 * subtraction may be seen before the addition it undoes, so a
	 * reading is clamped at 0). Every admit writes tot_req, every
	 * accepted report tot_acc: each on its own line. */
	uint64_t head;
	uint64_t pad0_[7];
	uint64_t tot_req[3];
	uint64_t pad1_[5];
	uint64_t tot_acc;
	uint64_t pad2_[7];
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

/*
 * Move the window to bucket index idx and return the index to count in:
 * idx, or the newest one when the clock moved back. The thread that moves
 * head empties the buckets that left the window (at most all of them,
 * after a long silence: amortised O(1) per bucket period), each with one
 * exchange whose old counts leave the totals: a count is in a total from
 * before it is in its bucket (the adders add to the total first), so the
 * totals never drift. A count added to a bucket that is being emptied
 * for a newer index is lost (the header says so).
 */
static uint64_t
advance(resil_throttle *t, uint64_t idx)
{
	uint64_t h = resil__load64(&t->head), j, first;

	if (RESIL__LIKELY(idx + 1 <= h))
		return h - 1;
	if (!resil__cas64(&t->head, h, idx + 1)) {
		/* Another thread moved it: to idx, or past it. */
		h = resil__load64(&t->head);
		return idx + 1 <= h ? h - 1 : idx;
	}
	/* Indices h .. idx enter the window; only the last buckets of them
	 * (one ring's worth) are distinct slots. */
	first = idx - h + 1 > t->buckets ? idx - t->buckets + 1 : h;
	for (j = first; j <= idx; j++) {
		tbucket *bk = &t->ring[j % t->buckets];
		uint64_t a = resil__fas64(&bk->accepts, 0);
		int c;

		for (c = 0; c < 3; c++) {
			uint64_t r = resil__fas64(&bk->requests[c], 0);

			if (r != 0)
				(void)resil__faa64(
				    &t->tot_req[c], (uint64_t)0 - r);
		}
		if (a != 0)
			(void)resil__faa64(&t->tot_acc, (uint64_t)0 - a);
	}
	return idx;
}

/* A running total, clamped at 0 (a subtraction seen before its add). */
static inline uint64_t
total(const uint64_t *w)
{
	uint64_t v = resil__load64(w);

	return (int64_t)v < 0 ? 0 : v;
}

/* Count one in field f of bucket idx and in its total. */
static inline void
count_in(resil_throttle *t, uint64_t idx, uint64_t *tot, size_t f)
{
	resil__inc64(tot);
	resil__inc64((uint64_t *)((char *)&t->ring[idx % t->buckets] + f));
}

/*
 * The probability for a request of class cls, from the window's requests
 * by class (r) and accepts: the excess E = requests - k * accepts is
 * shed from the lowest class up, sheddable first: p = min(1, what is
 * left of E after the lower classes' requests / (this class's requests +
 * 1)). With default requests only, the book's formula.
 */
static double
class_p(double k, const uint64_t r[3], uint64_t acc, int cls, uint64_t *req)
{
	double e, below = 0, p;
	int c;

	*req = r[0] + r[1] + r[2];
	if (k == 0)
		return 0;
	e = (double)*req - k * (double)acc;
	for (c = RESIL_THROTTLE_SHEDDABLE; c > cls; c--)
		below += (double)r[c];
	e -= below;
	if (!(e > 0))
		return 0;
	p = e / ((double)r[cls] + 1);
	return p < 1 ? p : 1;
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
	/* The current bucket is the window's newest: with a clock that
	 * stays in it, no count can race an emptying. */
	now = resil_clock_coarse(&t->clock);
	t->head = bucket_index(t, now) + 1;
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

const char *
resil_throttle_class_name(int cls)
{
	switch (cls) {
	case RESIL_THROTTLE_CRITICAL:
		return "critical";
	case RESIL_THROTTLE_DEFAULT:
		return "default";
	case RESIL_THROTTLE_SHEDDABLE:
		return "sheddable";
	default:
		return "unknown";
	}
}

resil_err
resil_throttle_admit_class(resil_throttle *t, int cls)
{
	uint64_t now, idx, req = 0, acc = 0;
	double p = 0, u;

	if (RESIL__UNLIKELY(t == NULL || (unsigned)cls > 2u))
		return RESIL_E_INVAL;
	now = resil_clock_coarse(&t->clock);
	idx = advance(t, bucket_index(t, now));
	if (t->k != 0) {
		uint64_t r[3];

		r[0] = total(&t->tot_req[0]);
		r[1] = total(&t->tot_req[1]);
		r[2] = total(&t->tot_req[2]);
		acc = total(&t->tot_acc);
		p = class_p(t->k, r, acc, cls, &req);
	}
	/* The request counts either way: a locally rejected one too. */
	count_in(t, idx, &t->tot_req[cls],
	    offsetof(tbucket, requests) + (size_t)cls * sizeof(uint64_t));
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
resil_throttle_admit(resil_throttle *t)
{
	return resil_throttle_admit_class(t, RESIL_THROTTLE_DEFAULT);
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
		count_in(t, advance(t, bucket_index(t, now)), &t->tot_acc,
		    offsetof(tbucket, accepts));
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
	(void)advance(t, bucket_index(t, now));
	{
		uint64_t r[3];

		r[0] = total(&t->tot_req[0]);
		r[1] = total(&t->tot_req[1]);
		r[2] = total(&t->tot_req[2]);
		out->window_accepts = total(&t->tot_acc);
		/* A default request's. */
		out->reject_probability = class_p(t->k, r,
		    out->window_accepts, RESIL_THROTTLE_DEFAULT,
		    &out->window_requests);
	}
	out->k = t->k;
	out->window_ns = t->window_ns;
	out->buckets = t->buckets;
	return RESIL_OK;
}

/*
 * resil gradient: a concurrency limit that follows the ratio of a
 * long-term to a short-term round-trip time, as Netflix
 * concurrency-limits' Gradient2Limit computes it (Envoy's adaptive
 * concurrency filter is its cousin, with a measured minimum RTT instead
 * of a long average). Feed it one sample per completed call; it answers
 * the limit to hold the calls in flight to.
 *
 * For each sample (rtt, inflight), in doubles:
 *
 *   short = rtt (at least 1 tick)
 *   long  = the long-term RTT after adding rtt: the mean of the first
 *           long_warmup samples, then an exponential average with factor
 *           2 / (long_window + 1)
 *   if long / short > 2: the long-term RTT is multiplied by 0.95 (the
 *           value kept; this sample goes on with long as it was), so it
 *           comes back down quickly after a long overload
 *   if inflight < limit / 2: the limit stays (the caller is not using
 *           it: "app limited"), the RTTs are still learnt
 *   gradient = max(0.5, min(1, rtt_tolerance * long / short))
 *   target   = limit * gradient + queue_size   (GROW_UNLOADED: queue_size
 *              only while gradient is 1)
 *   limit    = limit * (1 - smoothing) + target * smoothing,
 *              then clamped to min_limit..max_limit
 *
 * The limit kept is a double; the one answered is its integer part. The
 * defaults are Netflix's: initial and minimum 20, maximum 200, smoothing
 * 0.2, tolerance 1.5, window 600 samples after a warm-up of 10, queue 4.
 * dropped is taken and ignored, as Gradient2 ignores it: a dropped call's
 * RTT is a sample like another.
 *
 * Under a load that stays above capacity the long-term RTT learns the
 * queueing latency within a few long_window samples and the limit climbs
 * back towards max_limit (Netflix issue #137, pull request #134); see
 * docs/gradient.md for the numbers and for GROW_UNLOADED, which settles
 * at the capacity with a tolerance of 1.
 *
 * Thread safety: every function except new and free may run concurrently
 * on one gradient from any number of threads. A sample takes the
 * gradient's spin lock for its few dozen instructions (samples are
 * serialised: one writer at a time); resil_gradient_get_limit() reads one
 * atomic word without the lock. new and free must not overlap any other
 * call. The listener runs on the sampling thread with the lock held: it
 * must not call the gradient. Allocates nothing after new.
 */
#ifndef RESIL_GRADIENT_H
#define RESIL_GRADIENT_H

#include <resil/resil.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_gradient resil_gradient;

typedef enum resil_gradient_growth {
	/* Netflix: the queue allowance is added at every sample. */
	RESIL_GRADIENT_GROW_ALWAYS = 0,
	/* The allowance only while the gradient is 1 (no queueing seen),
	 * so a steady overload cannot ratchet the limit up. */
	RESIL_GRADIENT_GROW_UNLOADED = 1
} resil_gradient_growth;

/* Told when the integer limit changes, by the sampling thread. */
typedef void (*resil_gradient_listener_fn)(
    uint32_t old_limit, uint32_t limit, void *ctx);

typedef struct resil_gradient_config {
	size_t size; /* sizeof(resil_gradient_config), set by _init() */
	uint32_t initial_limit; /* default 20; min_limit..max_limit */
	uint32_t min_limit;     /* default 20; >= 1 */
	uint32_t max_limit;     /* default 200 */
	double smoothing;       /* default 0.2; (0, 1] */
	double rtt_tolerance;   /* default 1.5; >= 1 */
	uint32_t long_window;   /* samples; default 600; >= 1 */
	uint32_t long_warmup;   /* samples averaged first; default 10; >= 1 */
	uint32_t queue_size;    /* default 4 */
	resil_gradient_growth growth; /* default GROW_ALWAYS */
	resil_gradient_listener_fn listener; /* NULL: none */
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_gradient_config;

static inline void
resil_gradient_config_init(resil_gradient_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->initial_limit = 20;
	cfg->min_limit = 20;
	cfg->max_limit = 200;
	cfg->smoothing = 0.2;
	cfg->rtt_tolerance = 1.5;
	cfg->long_window = 600;
	cfg->long_warmup = 10;
	cfg->queue_size = 4;
}

static inline resil_gradient_config
resil_gradient_config_default(void)
{
	resil_gradient_config cfg;

	resil_gradient_config_init(&cfg);
	return cfg;
}

/*
 * Apply one setting of configuration text: gradient.initial_limit,
 * gradient.min_limit, gradient.max_limit, gradient.long_window,
 * gradient.long_warmup, gradient.queue_size (integers),
 * gradient.smoothing (0..1), gradient.rtt_tolerance (>= 1),
 * gradient.growth (always or unloaded). The ranges that depend on other
 * fields are checked by _validate(). RESIL_OK; RESIL_E_INVAL for NULL,
 * an unknown key or a bad value, with a message naming the key, *cfg
 * unchanged.
 */
RESIL_API resil_err resil_gradient_config_set(resil_gradient_config *cfg,
    const char *key, const char *value, resil_diag *diag);

/* RESIL_OK, or RESIL_E_INVAL naming the field in *diag
 * (`gradient.initial_limit: 10 is out of range 20..200 (min_limit..max_limit)`). */
RESIL_API resil_err resil_gradient_config_validate(
    const resil_gradient_config *cfg, resil_diag *diag);

/*
 * Create a gradient limit at initial_limit. *cfg and *cfg->alloc are
 * copied; the listener's ctx and the allocator's must outlive it. Free it
 * with resil_gradient_free(). RESIL_OK; RESIL_E_INVAL (message in *diag);
 * RESIL_E_NOMEM. *out is unchanged on error.
 */
RESIL_API resil_err resil_gradient_new(resil_gradient **out,
    const resil_gradient_config *cfg, resil_diag *diag);

/* Release g; NULL is a harmless no-op. */
RESIL_API void resil_gradient_free(resil_gradient *g);

/*
 * One completed call: its round-trip time in ticks (0 counts as 1), the
 * calls in flight when it was sent (or finished: whichever the caller
 * measures, consistently), and whether it was dropped (ignored). Returns
 * the new limit (0 for a NULL g).
 */
RESIL_API uint32_t resil_gradient_sample(
    resil_gradient *g, uint64_t rtt, uint32_t inflight, int dropped);

/* The limit now; 0 for NULL. Lock-free. */
RESIL_API uint32_t resil_gradient_get_limit(const resil_gradient *g);

typedef struct resil_gradient_metrics {
	uint32_t limit;      /* the integer limit */
	double estimate;     /* the limit as kept (a double) */
	double long_rtt;     /* the long-term RTT, in ticks */
	uint64_t last_rtt;   /* the last sample's (short-term) RTT */
	uint64_t samples;    /* every sample */
	uint64_t app_limited; /* samples that left the limit (inflight <
	                       * limit / 2) */
	uint64_t increases, decreases; /* changes of the integer limit */
} resil_gradient_metrics;

/* A consistent snapshot (taken under the lock). RESIL_OK, or
 * RESIL_E_INVAL for NULL. */
RESIL_API resil_err resil_gradient_get_metrics(
    resil_gradient *g, resil_gradient_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_GRADIENT_H */

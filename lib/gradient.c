/*
 * The gradient concurrency limit: Netflix concurrency-limits'
 * Gradient2Limit, sample by sample, under one spin lock.
 */
#include <resil/gradient.h>

#include "atomic.h"
#include "internal.h"
#include "kv.h"

struct resil_gradient {
	uint64_t limit; /* atomic: the integer limit, read without the lock */
	resil__spinlock lock;
	resil_gradient_config cfg;
	resil_allocator a;
	double estimate;
	/* The long-term RTT: Netflix's ExpAvgMeasurement. */
	double long_value;
	double long_sum;
	uint32_t long_count;
	double factor; /* 2 / (long_window + 1) */
	uint64_t last_rtt;
	uint64_t samples, app_limited, increases, decreases;
};

resil_err
resil_gradient_config_set(resil_gradient_config *cfg, const char *key,
    const char *value, resil_diag *diag)
{
	static const struct {
		const char *key;
		size_t off;
	} ints[] = {
		{ "gradient.initial_limit",
		    offsetof(resil_gradient_config, initial_limit) },
		{ "gradient.min_limit",
		    offsetof(resil_gradient_config, min_limit) },
		{ "gradient.max_limit",
		    offsetof(resil_gradient_config, max_limit) },
		{ "gradient.long_window",
		    offsetof(resil_gradient_config, long_window) },
		{ "gradient.long_warmup",
		    offsetof(resil_gradient_config, long_warmup) },
		{ "gradient.queue_size",
		    offsetof(resil_gradient_config, queue_size) },
	};
	char b[32];
	size_t i;
	uint32_t x = 0;
	double d = 0;
	resil_err e;

	if (cfg == NULL || key == NULL || value == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "gradient: NULL argument");
		return RESIL_E_INVAL;
	}
	for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		if (strcmp(key, ints[i].key) != 0)
			continue;
		/* queue_size may be 0; the others >= 1. */
		e = resil__kv_u32(key, value, ints[i].off ==
		            offsetof(resil_gradient_config, queue_size)
		        ? 0
		        : 1,
		    UINT32_MAX, &x, diag);
		if (e == RESIL_OK)
			memcpy((char *)cfg + ints[i].off, &x, sizeof(x));
		return e;
	}
	if (strcmp(key, "gradient.smoothing") == 0) {
		e = resil__kv_number(key, value, 0, 1, &d, diag);
		if (e != RESIL_OK)
			return e;
		if (d == 0) {
			resil__diagf(diag, RESIL_E_INVAL,
			    "%s: 0 would never move the limit (0 < smoothing "
			    "<= 1)",
			    key);
			return RESIL_E_INVAL;
		}
		cfg->smoothing = d;
		return RESIL_OK;
	}
	if (strcmp(key, "gradient.rtt_tolerance") == 0) {
		e = resil__kv_number(key, value, 1, 1e9, &d, diag);
		if (e == RESIL_OK)
			cfg->rtt_tolerance = d;
		return e;
	}
	if (strcmp(key, "gradient.growth") == 0) {
		if (resil__kv_trim(key, value, b, sizeof(b), diag) != 0)
			return RESIL_E_INVAL;
		for (i = 0; b[i] != '\0'; i++)
			if (b[i] >= 'A' && b[i] <= 'Z')
				b[i] = (char)(b[i] - 'A' + 'a');
		if (strcmp(b, "always") == 0) {
			cfg->growth = RESIL_GRADIENT_GROW_ALWAYS;
			return RESIL_OK;
		}
		if (strcmp(b, "unloaded") == 0) {
			cfg->growth = RESIL_GRADIENT_GROW_UNLOADED;
			return RESIL_OK;
		}
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not always or unloaded", key, b);
		return RESIL_E_INVAL;
	}
	resil__diagf(diag, RESIL_E_INVAL,
	    "%s: unknown key (gradient keys: initial_limit, min_limit, "
	    "max_limit, smoothing, rtt_tolerance, long_window, long_warmup, "
	    "queue_size, growth)",
	    key);
	return RESIL_E_INVAL;
}

resil_err
resil_gradient_config_validate(
    const resil_gradient_config *cfg, resil_diag *diag)
{
	if (cfg == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "gradient: NULL config");
		return RESIL_E_INVAL;
	}
	if (cfg->size != sizeof(*cfg)) {
		resil__check_size(diag, "gradient", "resil_gradient_config",
		    cfg->size, sizeof(*cfg));
		return RESIL_E_INVAL;
	}
	if (cfg->min_limit == 0) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.min_limit: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	if (cfg->max_limit < cfg->min_limit) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.max_limit: %u is below gradient.min_limit (%u)",
		    cfg->max_limit, cfg->min_limit);
		return RESIL_E_INVAL;
	}
	if (cfg->initial_limit < cfg->min_limit ||
	    cfg->initial_limit > cfg->max_limit) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.initial_limit: %u is out of range %u..%u "
		    "(min_limit..max_limit)",
		    cfg->initial_limit, cfg->min_limit, cfg->max_limit);
		return RESIL_E_INVAL;
	}
	/* !(x > 0 && x <= 1) also refuses NaN. */
	if (!(cfg->smoothing > 0 && cfg->smoothing <= 1)) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.smoothing: %g is out of range (0, 1]",
		    cfg->smoothing);
		return RESIL_E_INVAL;
	}
	if (!(cfg->rtt_tolerance >= 1 && cfg->rtt_tolerance <= 1e9)) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.rtt_tolerance: %g must be >= 1",
		    cfg->rtt_tolerance);
		return RESIL_E_INVAL;
	}
	if (cfg->long_window == 0) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.long_window: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	if (cfg->long_warmup == 0) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.long_warmup: 0 must be >= 1");
		return RESIL_E_INVAL;
	}
	if (cfg->growth != RESIL_GRADIENT_GROW_ALWAYS &&
	    cfg->growth != RESIL_GRADIENT_GROW_UNLOADED) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "gradient.growth: %d is not a resil_gradient_growth",
		    (int)cfg->growth);
		return RESIL_E_INVAL;
	}
	return RESIL_OK;
}

resil_err
resil_gradient_new(resil_gradient **out, const resil_gradient_config *cfg,
    resil_diag *diag)
{
	const resil_allocator *a;
	resil_gradient *g;
	resil_err e;

	if (out == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "gradient: NULL out");
		return RESIL_E_INVAL;
	}
	if ((e = resil_gradient_config_validate(cfg, diag)) != RESIL_OK)
		return e;
	a = resil__allocator(cfg->alloc);
	g = resil__calloc(a, sizeof(*g));
	if (g == NULL)
		return RESIL_E_NOMEM;
	g->a = *a;
	g->cfg = *cfg;
	g->cfg.alloc = NULL;
	g->estimate = (double)cfg->initial_limit;
	g->factor = 2.0 / ((double)cfg->long_window + 1.0);
	resil__spin_init(&g->lock);
	resil__store64(&g->limit, cfg->initial_limit);
	*out = g;
	return RESIL_OK;
}

void
resil_gradient_free(resil_gradient *g)
{
	resil_allocator a;

	if (g == NULL)
		return;
	a = g->a;
	resil__free(&a, g, sizeof(*g));
}

/* Netflix's ExpAvgMeasurement.add(): the warm-up mean, then the EMA. */
static double
long_add(resil_gradient *g, double rtt)
{
	if (g->long_count < g->cfg.long_warmup) {
		g->long_count++;
		g->long_sum += rtt;
		g->long_value = g->long_sum / (double)g->long_count;
	} else {
		g->long_value =
		    g->long_value * (1.0 - g->factor) + rtt * g->factor;
	}
	return g->long_value;
}

uint32_t
resil_gradient_sample(
    resil_gradient *g, uint64_t rtt, uint32_t inflight, int dropped)
{
	const resil_gradient_config *c;
	double cur, shortv, longv, grad, target, next;
	uint32_t old, now;

	(void)dropped; /* Gradient2 takes a dropped call's RTT as any other */
	if (g == NULL)
		return 0;
	c = &g->cfg;
	if (rtt == 0)
		rtt = 1;
	resil__spin_lock(&g->lock);
	g->samples++;
	g->last_rtt = rtt;
	cur = g->estimate;
	old = (uint32_t)cur;
	shortv = (double)rtt;
	longv = long_add(g, shortv);
	/* Back to normal after a long overload: bring the long RTT down
	 * without waiting for the average (this sample keeps longv). */
	if (longv / shortv > 2.0)
		g->long_value *= 0.95;
	if ((double)inflight < cur / 2.0) {
		g->app_limited++;
		resil__spin_unlock(&g->lock);
		return old;
	}
	grad = c->rtt_tolerance * longv / shortv;
	if (grad > 1.0)
		grad = 1.0;
	if (grad < 0.5)
		grad = 0.5;
	target = cur * grad;
	if (c->growth == RESIL_GRADIENT_GROW_ALWAYS || grad >= 1.0)
		target += (double)c->queue_size;
	next = cur * (1.0 - c->smoothing) + target * c->smoothing;
	if (next > (double)c->max_limit)
		next = (double)c->max_limit;
	if (next < (double)c->min_limit)
		next = (double)c->min_limit;
	g->estimate = next;
	now = (uint32_t)next;
	if (now != old) {
		if (now > old)
			g->increases++;
		else
			g->decreases++;
		resil__store64(&g->limit, now);
		if (c->listener != NULL)
			c->listener(old, now, c->listener_ctx);
	}
	resil__spin_unlock(&g->lock);
	return now;
}

uint32_t
resil_gradient_get_limit(const resil_gradient *g)
{
	return g == NULL ? 0 : (uint32_t)resil__load64(&g->limit);
}

resil_err
resil_gradient_get_metrics(resil_gradient *g, resil_gradient_metrics *out)
{
	if (g == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	resil__spin_lock(&g->lock);
	out->limit = (uint32_t)g->estimate;
	out->estimate = g->estimate;
	out->long_rtt = g->long_value;
	out->last_rtt = g->last_rtt;
	out->samples = g->samples;
	out->app_limited = g->app_limited;
	out->increases = g->increases;
	out->decreases = g->decreases;
	resil__spin_unlock(&g->lock);
	return RESIL_OK;
}

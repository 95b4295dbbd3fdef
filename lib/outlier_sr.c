/*
 * Envoy's success-rate and failure-percentage outlier detection: one
 * interval's computation over the endpoints' counters, nothing kept.
 */
#include <resil/outlier.h>

#include "internal.h"
#include "kv.h"

#include <math.h>

const char *
resil_outlier_action_name(resil_outlier_action a)
{
	switch (a) {
	case RESIL_OUTLIER_KEEP:
		return "keep";
	case RESIL_OUTLIER_EJECT:
		return "eject";
	case RESIL_OUTLIER_NOT_ENFORCED:
		return "not_enforced";
	case RESIL_OUTLIER_OVER_MAX:
		return "over_max";
	}
	return "unknown";
}

const char *
resil_outlier_kind_name(resil_outlier_kind k)
{
	switch (k) {
	case RESIL_OUTLIER_NONE:
		return "none";
	case RESIL_OUTLIER_SUCCESS_RATE:
		return "success_rate";
	case RESIL_OUTLIER_FAILURE_PERCENTAGE:
		return "failure_percentage";
	}
	return "unknown";
}

typedef struct okey {
	const char *key;
	size_t off;
	int wide;     /* a uint64_t field */
	uint64_t hi;  /* the largest value */
} okey;

#define OK32(k, f, hi)                                                       \
	{                                                                    \
		"outlier." k, offsetof(resil_outlier_rate_config, f), 0, hi  \
	}
#define OK64(k, f)                                                           \
	{                                                                    \
		"outlier." k, offsetof(resil_outlier_rate_config, f), 1,     \
		    UINT64_MAX                                               \
	}

static const okey okeys[] = {
	OK32("success_rate_minimum_hosts", success_rate_minimum_hosts,
	    UINT32_MAX),
	OK64("success_rate_request_volume", success_rate_request_volume),
	OK32("success_rate_stdev_factor", success_rate_stdev_factor,
	    UINT32_MAX),
	OK32("enforcing_success_rate", enforcing_success_rate, 100),
	OK32("failure_percentage_threshold", failure_percentage_threshold,
	    100),
	OK32("failure_percentage_minimum_hosts",
	    failure_percentage_minimum_hosts, UINT32_MAX),
	OK64("failure_percentage_request_volume",
	    failure_percentage_request_volume),
	OK32("enforcing_failure_percentage", enforcing_failure_percentage,
	    100),
};

resil_err
resil_outlier_rate_config_set(resil_outlier_rate_config *cfg,
    const char *key, const char *value, resil_diag *diag)
{
	size_t i;
	uint64_t u = 0;
	uint32_t x;
	resil_err e;

	if (cfg == NULL || key == NULL || value == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "outlier: NULL argument");
		return RESIL_E_INVAL;
	}
	for (i = 0; i < sizeof(okeys) / sizeof(okeys[0]); i++) {
		if (strcmp(key, okeys[i].key) != 0)
			continue;
		e = resil__kv_u64(key, value, 0, okeys[i].hi, &u, diag);
		if (e != RESIL_OK)
			return e;
		if (okeys[i].wide) {
			memcpy((char *)cfg + okeys[i].off, &u, sizeof(u));
		} else {
			x = (uint32_t)u;
			memcpy((char *)cfg + okeys[i].off, &x, sizeof(x));
		}
		return RESIL_OK;
	}
	if (strcmp(key, "outlier.max_ejection_pct") == 0) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: the directory's key (its outlier.max_ejection_pct), "
		    "not one of the rate keys",
		    key);
		return RESIL_E_INVAL;
	}
	resil__diagf(diag, RESIL_E_INVAL,
	    "%s: unknown key (outlier rate keys: success_rate_ and "
	    "failure_percentage_ minimum_hosts, request_volume; "
	    "success_rate_stdev_factor, failure_percentage_threshold, "
	    "enforcing_success_rate, enforcing_failure_percentage)",
	    key);
	return RESIL_E_INVAL;
}

resil_err
resil_outlier_rate_config_validate(
    const resil_outlier_rate_config *cfg, resil_diag *diag)
{
	static const struct {
		const char *name;
		size_t off;
	} pct[] = {
		{ "enforcing_success_rate",
		    offsetof(resil_outlier_rate_config, enforcing_success_rate) },
		{ "failure_percentage_threshold",
		    offsetof(resil_outlier_rate_config,
		        failure_percentage_threshold) },
		{ "enforcing_failure_percentage",
		    offsetof(resil_outlier_rate_config,
		        enforcing_failure_percentage) },
		{ "max_ejection_pct",
		    offsetof(resil_outlier_rate_config, max_ejection_pct) },
	};
	size_t i;
	uint32_t v;

	if (cfg == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "outlier: NULL config");
		return RESIL_E_INVAL;
	}
	if (cfg->size != sizeof(*cfg)) {
		resil__check_size(diag, "outlier", "resil_outlier_rate_config",
		    cfg->size, sizeof(*cfg));
		return RESIL_E_INVAL;
	}
	for (i = 0; i < sizeof(pct) / sizeof(pct[0]); i++) {
		memcpy(&v, (const char *)cfg + pct[i].off, sizeof(v));
		if (v > 100) {
			resil__diagf(diag, RESIL_E_INVAL,
			    "outlier.%s: %u is out of range 0..100",
			    pct[i].name, v);
			return RESIL_E_INVAL;
		}
	}
	return RESIL_OK;
}

typedef struct pass {
	const resil_outlier_rate_config *cfg;
	const resil_random *rnd;
	size_t n;
	size_t ejected; /* already ejected plus ejected by this call */
	resil_outlier_summary *sum;
} pass;

/* An outlier found by kind: the max share, then the enforcing draw. */
static void
detect(pass *p, resil_outlier_verdict *v, resil_outlier_kind kind,
    uint32_t enforcing)
{
	resil_outlier_action a;

	/* 100 * (ejected + 1) <= pct * n, in 64 bits: n is a size_t. */
	if ((uint64_t)100 * (p->ejected + 1) >
	    (uint64_t)p->cfg->max_ejection_pct * p->n) {
		a = RESIL_OUTLIER_OVER_MAX;
		p->sum->over_max++;
	} else if (enforcing >= 100 ||
	    (enforcing > 0 &&
	        resil_random_uniform(p->rnd) * 100.0 < (double)enforcing)) {
		a = RESIL_OUTLIER_EJECT;
		p->ejected++;
		p->sum->ejected++;
	} else {
		a = RESIL_OUTLIER_NOT_ENFORCED;
		p->sum->not_enforced++;
	}
	if (v->action == RESIL_OUTLIER_KEEP || a == RESIL_OUTLIER_EJECT) {
		v->action = a;
		v->kind = kind;
	}
}

resil_err
resil_outlier_rate_evaluate(const resil_outlier_rate_config *cfg,
    const resil_outlier_host *hosts, size_t n, const resil_random *rnd,
    resil_outlier_verdict *verdicts, resil_outlier_summary *summary,
    resil_diag *diag)
{
	resil_outlier_summary local;
	const resil_outlier_rate_config *c = cfg;
	uint64_t lo_volume;
	double sum = 0, mean, var = 0, stdev, threshold;
	size_t i, nsr = 0, nfp = 0;
	resil_err e;
	pass p;

	if (cfg == NULL || (n > 0 && (hosts == NULL || verdicts == NULL))) {
		resil__diagf(diag, RESIL_E_INVAL, "outlier: NULL argument");
		return RESIL_E_INVAL;
	}
	if ((e = resil_outlier_rate_config_validate(cfg, diag)) != RESIL_OK)
		return e;
	for (i = 0; i < n; i++)
		if (hosts[i].successes > hosts[i].requests) {
			resil__diagf(diag, RESIL_E_INVAL,
			    "hosts[%zu]: %llu successes of %llu requests", i,
			    (unsigned long long)hosts[i].successes,
			    (unsigned long long)hosts[i].requests);
			return RESIL_E_INVAL;
		}
	if (summary == NULL)
		summary = &local;
	memset(summary, 0, sizeof(*summary));
	summary->success_rate_mean = -1;
	summary->success_rate_threshold = -1;
	p.cfg = c;
	p.rnd = rnd;
	p.n = n;
	p.ejected = 0;
	p.sum = summary;
	for (i = 0; i < n; i++) {
		verdicts[i].action = RESIL_OUTLIER_KEEP;
		verdicts[i].kind = RESIL_OUTLIER_NONE;
		verdicts[i].success_rate = -1;
		if (hosts[i].ejected)
			p.ejected++;
	}
	if (n < c->success_rate_minimum_hosts &&
	    n < c->failure_percentage_minimum_hosts)
		return RESIL_OK;
	lo_volume = c->success_rate_request_volume <
	        c->failure_percentage_request_volume
	    ? c->success_rate_request_volume
	    : c->failure_percentage_request_volume;
	/* The rates and the two samples. */
	for (i = 0; i < n; i++) {
		const resil_outlier_host *h = &hosts[i];
		double rate;

		if (h->ejected || h->requests == 0)
			continue;
		rate = (double)h->successes * 100.0 / (double)h->requests;
		if (h->requests >= lo_volume)
			verdicts[i].success_rate = rate;
		if (h->requests >= c->success_rate_request_volume) {
			nsr++;
			sum += rate;
		}
		if (h->requests >= c->failure_percentage_request_volume)
			nfp++;
	}
	summary->success_rate_hosts = nsr;
	summary->failure_percentage_hosts = nfp;
	if (nsr > 0 && nsr >= c->success_rate_minimum_hosts) {
		mean = sum / (double)nsr;
		for (i = 0; i < n; i++) {
			const resil_outlier_host *h = &hosts[i];
			double d;

			if (h->ejected || h->requests == 0 ||
			    h->requests < c->success_rate_request_volume)
				continue;
			/* In the sample, so its rate was written above. */
			d = verdicts[i].success_rate - mean;
			var += d * d;
		}
		var /= (double)nsr;
		stdev = sqrt(var);
		threshold = mean -
		    (double)c->success_rate_stdev_factor / 1000.0 * stdev;
		summary->success_rate_mean = mean;
		summary->success_rate_threshold = threshold;
		for (i = 0; i < n; i++) {
			const resil_outlier_host *h = &hosts[i];

			if (h->ejected || h->requests == 0 ||
			    h->requests < c->success_rate_request_volume)
				continue;
			if (verdicts[i].success_rate < threshold)
				detect(&p, &verdicts[i],
				    RESIL_OUTLIER_SUCCESS_RATE,
				    c->enforcing_success_rate);
		}
	}
	if (nfp > 0 && nfp >= c->failure_percentage_minimum_hosts) {
		for (i = 0; i < n; i++) {
			const resil_outlier_host *h = &hosts[i];

			if (h->ejected || h->requests == 0 ||
			    h->requests < c->failure_percentage_request_volume ||
			    verdicts[i].action == RESIL_OUTLIER_EJECT)
				continue;
			if (100.0 - verdicts[i].success_rate >=
			    (double)c->failure_percentage_threshold)
				detect(&p, &verdicts[i],
				    RESIL_OUTLIER_FAILURE_PERCENTAGE,
				    c->enforcing_failure_percentage);
		}
	}
	return RESIL_OK;
}

/*
 * resil outlier: Envoy's success-rate and failure-percentage outlier
 * detection, as the pure computation of one interval. Given each
 * endpoint's successes and requests counted over the interval (and which
 * endpoints are ejected already), it says which to eject now; counting,
 * ejecting and returning stay with the caller (the directory, which has
 * the consecutive-failure kind and the ejection times).
 *
 * The rules, Envoy's (source/common/upstream/outlier_detection_impl.cc),
 * in this order:
 *
 *   1. Fewer than min(success_rate_minimum_hosts,
 *      failure_percentage_minimum_hosts) endpoints (ejected ones
 *      included): nothing is computed.
 *   2. An endpoint that is ejected, or has no request, is not evaluated.
 *      Its success rate is 100 * successes / requests (a double).
 *   3. Success rate: the endpoints with requests >=
 *      success_rate_request_volume are its sample; with at least
 *      success_rate_minimum_hosts of them (and one), mean and population
 *      standard deviation give threshold = mean - stdev_factor / 1000 *
 *      stdev, and each endpoint of the sample whose rate is below it
 *      (strictly) is an outlier, in input order.
 *   4. Failure percentage: the endpoints with requests >=
 *      failure_percentage_request_volume; with at least
 *      failure_percentage_minimum_hosts of them, each whose failure
 *      percentage 100 - rate is >= failure_percentage_threshold is an
 *      outlier, in input order; one ejected by step 3 is not looked at
 *      again.
 *   5. Each outlier, as it is found: if 100 * (ejected + 1) >
 *      max_ejection_pct * N (N = n, ejected = those already ejected plus
 *      those ejected so far by this call), it stays (OVER_MAX); otherwise
 *      it is ejected with probability enforcing / 100: 100 ejects, 0 never
 *      does, and anything between draws one u from the random source,
 *      ejecting when u * 100 < enforcing (NOT_ENFORCED otherwise).
 *
 * Defaults are Envoy's: 5 hosts and 100 requests for the success rate,
 * factor 1900, enforcing 100; 5 hosts, 50 requests and 85 % for the
 * failure percentage, enforcing 0 (detected and reported, never ejected,
 * until it is turned on); max_ejection_pct 10.
 *
 * Arithmetic: doubles for rates, mean, variance (the sum of squared
 * differences over the count) and the square root; counts are 64-bit
 * integers. Allocates nothing; O(n).
 *
 * Thread safety: the functions touch only their arguments (and draw from
 * the random source given).
 */
#ifndef RESIL_OUTLIER_H
#define RESIL_OUTLIER_H

#include <resil/clock.h>
#include <resil/resil.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_outlier_rate_config {
	size_t size; /* sizeof(resil_outlier_rate_config), set by _init() */
	uint32_t success_rate_minimum_hosts;  /* default 5 */
	uint64_t success_rate_request_volume; /* default 100 */
	uint32_t success_rate_stdev_factor;   /* default 1900: 1.9 stdev */
	uint32_t enforcing_success_rate;      /* percent; default 100 */
	uint32_t failure_percentage_threshold; /* percent; default 85 */
	uint32_t failure_percentage_minimum_hosts;  /* default 5 */
	uint64_t failure_percentage_request_volume; /* default 50 */
	uint32_t enforcing_failure_percentage; /* percent; default 0 */
	/* The share of endpoints that may be ejected at once; the
	 * directory's outlier.max_ejection_pct. 0..100; default 10. */
	uint32_t max_ejection_pct;
} resil_outlier_rate_config;

static inline void
resil_outlier_rate_config_init(resil_outlier_rate_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->success_rate_minimum_hosts = 5;
	cfg->success_rate_request_volume = 100;
	cfg->success_rate_stdev_factor = 1900;
	cfg->enforcing_success_rate = 100;
	cfg->failure_percentage_threshold = 85;
	cfg->failure_percentage_minimum_hosts = 5;
	cfg->failure_percentage_request_volume = 50;
	cfg->enforcing_failure_percentage = 0;
	cfg->max_ejection_pct = 10;
}

static inline resil_outlier_rate_config
resil_outlier_rate_config_default(void)
{
	resil_outlier_rate_config cfg;

	resil_outlier_rate_config_init(&cfg);
	return cfg;
}

/*
 * Apply one setting of configuration text, Envoy's names under outlier.:
 * outlier.success_rate_minimum_hosts, outlier.success_rate_request_volume,
 * outlier.success_rate_stdev_factor, outlier.enforcing_success_rate (0..100),
 * outlier.failure_percentage_threshold (0..100),
 * outlier.failure_percentage_minimum_hosts,
 * outlier.failure_percentage_request_volume,
 * outlier.enforcing_failure_percentage (0..100). (outlier.max_ejection_pct
 * is the directory's key; copy it into max_ejection_pct.) RESIL_OK;
 * RESIL_E_INVAL for NULL, an unknown key or a bad value, with a message
 * naming the key, *cfg unchanged.
 */
RESIL_API resil_err resil_outlier_rate_config_set(
    resil_outlier_rate_config *cfg, const char *key, const char *value,
    resil_diag *diag);

/* RESIL_OK, or RESIL_E_INVAL naming the field in *diag
 * (`outlier.failure_percentage_threshold: 101 is out of range 0..100`). */
RESIL_API resil_err resil_outlier_rate_config_validate(
    const resil_outlier_rate_config *cfg, resil_diag *diag);

/* One endpoint's interval, as its counters give it. */
typedef struct resil_outlier_host {
	uint64_t requests;  /* outcomes counted (successes and failures) */
	uint64_t successes; /* of those, the successes; <= requests */
	int ejected;        /* nonzero: ejected now (by any detection) */
} resil_outlier_host;

typedef enum resil_outlier_action {
	RESIL_OUTLIER_KEEP = 0,         /* not an outlier, or not evaluated */
	RESIL_OUTLIER_EJECT = 1,        /* eject it now */
	RESIL_OUTLIER_NOT_ENFORCED = 2, /* an outlier the enforcing share
	                                 * let go (Envoy: enforced=false) */
	RESIL_OUTLIER_OVER_MAX = 3      /* an outlier the max_ejection_pct
	                                 * kept in (Envoy's overflow) */
} resil_outlier_action;

typedef enum resil_outlier_kind {
	RESIL_OUTLIER_NONE = 0,
	RESIL_OUTLIER_SUCCESS_RATE = 1,
	RESIL_OUTLIER_FAILURE_PERCENTAGE = 2
} resil_outlier_kind;

/* "keep", "eject", "not_enforced", "over_max" or "unknown";
 * "none", "success_rate", "failure_percentage" or "unknown". */
RESIL_API const char *resil_outlier_action_name(resil_outlier_action a);
RESIL_API const char *resil_outlier_kind_name(resil_outlier_kind k);

/* The verdict on one endpoint. An EJECT by the failure percentage wins
 * over a success-rate verdict that did not eject; otherwise the first
 * detection stands. */
typedef struct resil_outlier_verdict {
	resil_outlier_action action;
	resil_outlier_kind kind; /* the detection behind action */
	/* 100 * successes / requests when the endpoint was evaluated with
	 * at least min(both request volumes) requests; -1 otherwise (Envoy's
	 * per-host success rate). */
	double success_rate;
} resil_outlier_verdict;

typedef struct resil_outlier_summary {
	/* -1 when the success-rate step did not run (too few hosts). */
	double success_rate_mean;
	double success_rate_threshold;
	size_t success_rate_hosts;       /* in that step's sample */
	size_t failure_percentage_hosts; /* in that step's sample */
	size_t ejected;      /* verdicts EJECT */
	size_t not_enforced; /* detections let go by enforcing */
	size_t over_max;     /* detections kept in by max_ejection_pct */
} resil_outlier_summary;

/*
 * Evaluate one interval over hosts[0..n) (n may be 0) into verdicts[0..n)
 * (caller storage) and *summary (may be NULL). rnd gives the enforcing
 * draws (NULL: every draw is 0, so any enforcing > 0 ejects).
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL cfg, a NULL hosts or
 * verdicts with n > 0, a bad cfg, or a host with more successes than
 * requests (`hosts[3]: 12 successes of 10 requests`), with nothing
 * written.
 */
RESIL_API resil_err resil_outlier_rate_evaluate(
    const resil_outlier_rate_config *cfg, const resil_outlier_host *hosts,
    size_t n, const resil_random *rnd, resil_outlier_verdict *verdicts,
    resil_outlier_summary *summary, resil_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_OUTLIER_H */

/*
 * resil balance: the load balancers that choose one endpoint among the
 * candidates the routers left, and their configuration.
 *
 * Every random draw comes from the selector's injected resil_random and
 * every time from the directory's clock. A draw u in [0, 1) chooses a
 * weighted candidate as offset = floor(u * W), the first candidate in
 * order whose cumulative weight exceeds offset (equal weights:
 * floor(u * n); all weights 0: uniform; one candidate: no draw).
 *
 * RANDOM       weighted random, one draw per pick, O(log n).
 * ROUNDROBIN   smooth weighted round robin (nginx, Dubbo): each candidate's
 *              current += weight, the largest wins (first in order on a
 *              tie) and gives back the total; no draw. State per method;
 *              removed endpoints drop out, the others keep their
 *              counters, a new endpoint starts at 0. Exact, in
 *              O(distinct weights) per pick over a candidate set picked
 *              from again (up to 32 distinct weights; more: a scan).
 * LEASTACTIVE  Dubbo: the fewest calls in flight; ties by the weighted
 *              choice, one draw only on a tie. Above RESIL_LB_SCAN_MAX
 *              candidates it samples (Envoy's least request): one draw u
 *              gives two weighted choices, by u and by u' (below); the
 *              fewer in flight wins, a tie goes to the first, so over
 *              equally busy candidates it is the weighted choice by u.
 * P2C          two distinct uniform samples (Finagle: i = floor(u1 * n),
 *              j = floor(u2 * (n - 1)), j >= i gives j + 1; two candidates:
 *              no draw); the fewer in flight wins, a tie goes to i. Above
 *              RESIL_LB_SCAN_MAX candidates one draw: u1 = u, u2 = u'.
 * PEAKEWMA     P2C on cost * (in flight + 1), cost a peak-sensitive EWMA
 *              of latency decaying by exp(-dt / tau); never observed:
 *              default_rtt. Draws as P2C.
 * HASH         consistent hash (Dubbo): a ring of `hash_nodes` virtual
 *              nodes per candidate keyed by the chosen arguments; weights
 *              ignored; no draw. When one endpoint leaves only its keys
 *              move.
 * SHORTEST     Dubbo's shortest response: estimate = (sum of successful
 *              durations / successes) * (in flight + 1); no success yet
 *              gives 0 (preferred); ties by the weighted choice. The
 *              window restarts when now - last restart > slide. Above
 *              RESIL_LB_SCAN_MAX candidates it samples as LEASTACTIVE does,
 *              on the estimate.
 *
 * u', the second draw of a pick that takes one: the top 53 bits of
 * SplitMix64's finaliser of (the bits of u as an IEEE double ^
 * 0x9e3779b97f4a7c15), times 2^-53. All of these are O(1) or O(log n)
 * per pick except ROUNDROBIN over more than 32 distinct weights.
 *
 * Warm-up (resil_warmup_weight() in directory.h) applies to the weighted
 * ones: RANDOM, ROUNDROBIN, LEASTACTIVE and SHORTEST's ties.
 *
 * Thread safety: the functions here are pure.
 */
#ifndef RESIL_BALANCE_H
#define RESIL_BALANCE_H

#include <resil/directory.h>
#include <resil/resil.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum resil_lb_kind {
	RESIL_LB_RANDOM = 0,
	RESIL_LB_ROUNDROBIN = 1,
	RESIL_LB_LEASTACTIVE = 2,
	RESIL_LB_P2C = 3,
	RESIL_LB_PEAKEWMA = 4,
	RESIL_LB_HASH = 5,
	RESIL_LB_SHORTEST = 6
} resil_lb_kind;

#define RESIL_LB_KINDS 7
/* Up to this many candidates LEASTACTIVE and SHORTEST scan them all
 * (Dubbo); above, they sample two (see the top of this file). */
#define RESIL_LB_SCAN_MAX 16
#define RESIL_HASH_MAX_ARGS 8

/* "random", "roundrobin", "leastactive", "p2c", "peakewma", "hash",
 * "shortest" (Dubbo's consistenthash and shortestresponse are accepted
 * by the parser too), or "unknown". */
RESIL_API const char *resil_lb_kind_name(resil_lb_kind k);

/* Parse a name (any case); RESIL_E_INVAL naming the choices otherwise. */
RESIL_API resil_err resil_lb_kind_parse(
    const char *name, resil_lb_kind *out, resil_diag *diag);

typedef struct resil_balance_config {
	resil_lb_kind kind;                      /* default RANDOM (Dubbo) */
	uint32_t hash_nodes;                     /* default 160; 1..10000 */
	uint32_t hash_args[RESIL_HASH_MAX_ARGS]; /* argument indexes */
	uint32_t hash_nargs;                     /* default 1 (argument 0) */
	uint64_t ewma_tau;                       /* default 10 s; >= 1 */
	uint64_t ewma_default_rtt;               /* default 1 ms */
	uint64_t shortest_slide;                 /* default 30 s; 0: never */
} resil_balance_config;

static inline void
resil_balance_config_init(resil_balance_config *c)
{
	memset(c, 0, sizeof(*c));
	c->kind = RESIL_LB_RANDOM;
	c->hash_nodes = 160;
	c->hash_nargs = 1;
	c->ewma_tau = 10 * RESIL_NS_PER_SEC;
	c->ewma_default_rtt = RESIL_NS_PER_MS;
	c->shortest_slide = 30 * RESIL_NS_PER_SEC;
}

/* RESIL_OK or RESIL_E_INVAL naming the field ("loadbalance.hash.nodes: 0
 * is out of range 1..10000"); prefix names the scope ("" or "getX."). */
RESIL_API resil_err resil_balance_config_validate(
    const resil_balance_config *c, const char *prefix, resil_diag *diag);

/*
 * What the balancers see of one endpoint now: why a pick went where it
 * did. Every figure is the one the balancer of configuration c compares
 * (c gives PeakEWMA's tau and default RTT and the shortest-response slide;
 * NULL: the defaults), read at the directory's clock.
 */
typedef struct resil_balance_endpoint {
	uint64_t id;
	uint64_t active;  /* calls in flight: P2C's and least-active's load */
	int32_t weight;   /* after warm-up, as the weighted choice sees it */
	int ewma_seen;    /* 0: never observed, the cost is the default RTT */
	double ewma_cost; /* PeakEWMA's cost, decayed to now */
	double
	    ewma_load; /* ewma_cost * (active + 1): what PeakEWMA compares */
	uint64_t sr_successes; /* shortest response: the window's successes */
	uint64_t sr_elapsed;   /* and their total duration */
	uint64_t sr_reset_at;  /* when the window last restarted */
	int sr_expired;        /* now - sr_reset_at > slide: counts as empty */
	uint64_t sr_estimate;  /* elapsed / successes * (active + 1); 0 with no
	                        * success in the window (preferred) */
} resil_balance_endpoint;

/* The balancers' view of address in d: RESIL_OK, RESIL_E_NOTFOUND when it
 * is not in the current list, RESIL_E_INVAL for a NULL d, address or out
 * or a configuration resil_balance_config_validate() refuses. */
RESIL_API resil_err resil_balance_endpoint_get(resil_directory *d,
    const resil_balance_config *c, const char *address,
    resil_balance_endpoint *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_BALANCE_H */

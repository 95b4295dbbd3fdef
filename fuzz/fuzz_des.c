/*
 * libFuzzer harness: resil-sim's event-engine scenarios (read_des() in
 * tools/sim/des_read.c: the caller's pool, zones, endpoints and their
 * queues, round trips, losses, push lags, the heartbeat timeout, phases,
 * calls, pauses, pushes (remove, add, empty, without, resync), rules,
 * the compare line), and short runs of them through a cluster pipeline.
 *
 * As fuzz_scenario, this compiles tools/resil_sim.c (which includes
 * the files of tools/sim/) into the harness with its main renamed, serves the
 * scenario "file" from memory and captures what it prints.
 *
 * Input: the scenario text. The configuration it runs against is one of
 * four fixed texts (failover, zone-aware, failback, forking), chosen by
 * the input's length.
 *
 * Properties:
 *   - read_des() returns 0, or 2 with a message that starts with
 *     "fuzz.scn" (or is the out of memory message);
 *   - accepted: the caller's zone is one of the zones, its pool has at
 *     least one thread; 1..256 endpoints, each in a known zone with a
 *     round trip from the caller's zone and at least one worker; the
 *     phases follow each other from 0 and end at the scenario's end;
 *     every call batch has at most 100000 calls (0 is accepted: a line
 *     that calls nothing); every action's target holds only endpoints
 *     of the scenario, a pause lasts, a rule is text that parses; every
 *     lag is for the caller's zone; the compare line names a phase and
 *     has at most 4 triples;
 *   - accepted, short (at most 3 simulated seconds and 500 calls): the
 *     run succeeds (run_one() returns 0) and frees everything;
 *   - no leak, no undefined behaviour.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

static const char *fuzz_text;
static size_t fuzz_len;
static char fuzz_msg[1024];

static FILE *
fuzz_fopen(const char *path, const char *mode)
{
	(void)path;
	(void)mode;
	if (fuzz_len == 0)
		return fmemopen((void *)"\n", 1, "r");
	return fmemopen((void *)fuzz_text, fuzz_len, "r");
}

static int fuzz_fprintf(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int fuzz_printf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static int
fuzz_fprintf(FILE *f, const char *fmt, ...)
{
	char sink[1024];
	va_list ap;
	int r;

	va_start(ap, fmt);
	if (f == stderr)
		r = vsnprintf(fuzz_msg, sizeof(fuzz_msg), fmt, ap);
	else
		r = vsnprintf(sink, sizeof(sink), fmt, ap);
	va_end(ap);
	return r;
}

/* The run's output (a trace, the figures) is formatted and dropped. */
static int
fuzz_printf(const char *fmt, ...)
{
	char sink[1024];
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(sink, sizeof(sink), fmt, ap);
	va_end(ap);
	return r;
}

int resil_sim_main(int argc, char **argv);

#define fopen fuzz_fopen
#define fprintf fuzz_fprintf
#define printf fuzz_printf
#define main resil_sim_main
#include "../tools/resil_sim.c"
#undef main
#undef printf
#undef fprintf
#undef fopen

static const char *const confs[] = {
	"service=StockService\ntimeout=100\nretries=2\n"
	"outlier.consecutive_failures=2\n",
	"service=StockService\ntimeout=100\ncluster=zone-aware\nzone=a\n"
	"cross_zone_timeout=50\n",
	"service=StockService\ntimeout=50\ncluster=failback\n"
	"failback.period=200ms\nfailback.retries=2\n",
	"service=StockService\ntimeout=50\ncluster=forking\nforks=3\n"
	"loadbalance=leastactive\n",
};

static void
check_scenario(const scenario *s)
{
	uint64_t t = 0;
	size_t i;
	int e;

	FUZZ_CHECK(
	    s->nzones >= 1 && s->nzones <= MAX_ZONES, "%d zones", s->nzones);
	FUZZ_CHECK(s->caller >= 0 && s->caller < s->nzones, "caller zone %d",
	    s->caller);
	FUZZ_CHECK(
	    s->neps >= 1 && s->neps <= MAX_EPS, "%d endpoints", s->neps);
	for (e = 0; e < s->neps; e++) {
		FUZZ_CHECK(s->eps[e].zone >= 0 && s->eps[e].zone < s->nzones,
		    "endpoint %d in zone %d", e, s->eps[e].zone);
		FUZZ_CHECK(s->net[s->caller][s->eps[e].zone].set,
		    "endpoint %d: no round trip from the caller", e);
	}
	FUZZ_CHECK(
	    s->nphases >= 1 && s->nphases <= 16, "%d phases", s->nphases);
	for (i = 0; i < (size_t)s->nphases; i++) {
		FUZZ_CHECK(s->phases[i].start == t &&
		        s->phases[i].end > s->phases[i].start,
		    "phase %zu: %llu..%llu after %llu", i,
		    (unsigned long long)s->phases[i].start,
		    (unsigned long long)s->phases[i].end,
		    (unsigned long long)t);
		t = s->phases[i].end;
	}
	FUZZ_CHECK(s->end == t, "end %llu, the phases end at %llu",
	    (unsigned long long)s->end, (unsigned long long)t);
	for (i = 0; i < s->nbatches; i++)
		FUZZ_CHECK(s->batches[i].n <= 100000, "batch %zu: %u calls", i,
		    s->batches[i].n);
	FUZZ_CHECK(s->threads >= 1, "a pool of %u threads", s->threads);
	for (e = 0; e < s->neps; e++)
		FUZZ_CHECK(s->eps[e].workers >= 1, "endpoint %d: %u workers", e,
		    s->eps[e].workers);
	for (i = 0; i < s->nacts; i++) {
		const action *a = &s->acts[i];

		for (e = s->neps; e < MAX_EPS; e++)
			FUZZ_CHECK(!epset_has(&a->target, e),
			    "action %zu targets endpoint %d of %d", i, e,
			    s->neps);
		FUZZ_CHECK(a->kind != A_PAUSE || a->d > 0,
		    "action %zu: a pause of 0", i);
		FUZZ_CHECK(a->kind == A_RULE || a->rule == NULL,
		    "action %zu: a rule text on another action", i);
		if (a->kind == A_RULE && a->rule != NULL) {
			resil_condition *c;
			resil_diag d;

			FUZZ_CHECK(a->rule[0] != '\0', "action %zu: empty rule",
			    i);
			if (resil_condition_parse(&c, a->rule, 0, NULL, &d) ==
			    RESIL_OK)
				resil_condition_free(c);
			else
				FUZZ_CHECK(strstr(d.msg, "memory") != NULL,
				    "action %zu: rule accepted, then refused: "
				    "%s",
				    i, d.msg);
		}
	}
	for (i = 0; i < s->nlag; i++)
		FUZZ_CHECK(s->lag[i].a == s->caller, "lag %zu for zone %d", i,
		    s->lag[i].a);
	FUZZ_CHECK(s->nrefs <= MAX_CONFS &&
	        (s->nrefs == 0 ||
	            (s->ref_phase >= 0 && s->ref_phase < s->nphases)),
	    "%zu references for phase %d", s->nrefs, s->ref_phase);
}

/* Calls the run would make, roughly: the batches and the arrivals. */
static double
calls_of(const scenario *s)
{
	double n = s->rate * ((double)s->end / 1e9);
	size_t i;

	for (i = 0; i < s->nbatches; i++)
		n += s->batches[i].n;
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static scenario sc_s;
	static run sc_r;
	scenario *s = &sc_s;
	simconf conf;
	resil_diag diag;
	int rc;

	fuzz_text = (const char *)data;
	fuzz_len = size;
	fuzz_msg[0] = '\0';
	rc = read_des("fuzz.scn", s);
	if (rc != 0) {
		FUZZ_CHECK(rc == 2, "read_des returned %d", rc);
		FUZZ_CHECK(strncmp(fuzz_msg, "fuzz.scn", 8) == 0 ||
		        strcmp(fuzz_msg, "resil-sim: out of memory\n") == 0,
		    "refusal without the file: \"%s\"", fuzz_msg);
		free_scenario(s);
		return 0;
	}
	check_scenario(s);
	if (s->method[0] == '\0')
		snprintf(s->method, sizeof(s->method), "call");
	if (s->end <= 3 * RESIL_NS_PER_SEC && calls_of(s) <= 500) {
		conf.path = "fuzz.conf";
		FUZZ_CHECK(
		    resil_config_parse_string(&conf.conf, confs[size % 4],
		        "fuzz.conf", NULL, &diag) == RESIL_OK,
		    "fixed configuration: %s", diag.msg);
		fuzz_msg[0] = '\0';
		rc = run_one(&sc_r, s, &conf);
		FUZZ_CHECK(rc == 0, "run refused (configuration %zu): %s",
		    size % 4, fuzz_msg);
		free(sc_r.recs);
		sc_r.recs = NULL;
		free_run(&sc_r);
		resil_config_free(conf.conf);
	}
	free_scenario(s);
	return 0;
}

/*
 * resil-sim internals: the event queue of the discrete-event engine, a
 * seeded generator, and the helpers both scenario formats share.
 *
 * Events are ordered by (time, sequence): two events at one time run in
 * the order they were scheduled, so a run is a pure function of its
 * input. Single-threaded.
 */
#ifndef RESIL_SIM_H
#define RESIL_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <resil/config.h>
#include <resil/resil.h>

typedef struct sim_event {
	uint64_t t;
	uint64_t seq;
	int kind;
	uint32_t arg;
	void *p;
} sim_event;

/* A FIFO of events in (time, sequence) order, beside the heap. */
typedef struct sim_lane {
	sim_event *v;
	size_t head, n, cap;
} sim_lane;

typedef struct sim_queue {
	sim_event *heap;
	size_t n, cap;
	uint64_t seq;
	sim_lane lane;
} sim_queue;

void sim_queue_init(sim_queue *q);
void sim_queue_free(sim_queue *q);
/* 0, or -1 when out of memory. */
int sim_schedule(sim_queue *q, uint64_t t, int kind, void *p, uint32_t arg);
/*
 * As sim_schedule(), for events that mostly come in time order (wake-ups
 * a fixed timeout ahead): such an event goes to a FIFO, the others to the
 * heap. The order of events is the same as with sim_schedule(); only the
 * cost differs (many wake-ups that are never needed stay out of the heap).
 */
int sim_schedule_fifo(
    sim_queue *q, uint64_t t, int kind, void *p, uint32_t arg);
/* 1 with the earliest event in *out, 0 when empty. */
int sim_next(sim_queue *q, sim_event *out);

/* SplitMix64, one stream per use so that streams do not disturb each
 * other (the arrivals are the same whatever the configuration does). */
typedef struct sim_rng {
	uint64_t s;
} sim_rng;

void sim_rng_seed(sim_rng *r, uint64_t seed, uint64_t stream);
uint64_t sim_rng_next(sim_rng *r);
double sim_rng_uniform(sim_rng *r); /* [0, 1) */
/* The natural logarithm of x > 0 (no libm). */
double sim_log(double x);

/* Exponential with the given mean (in ticks), rounded to a tick. */
uint64_t sim_rng_exp(sim_rng *r, double mean);

/* ns as milliseconds: "12", "12.5", "0.000001". */
const char *sim_ms_text(uint64_t ns, char *buf, size_t len);

/* A duration as configuration text reads it (a number alone is ms). */
int sim_parse_time(const char *s, uint64_t *ns);

/* Split a line into words ('#' starts a comment); returns the count, or
 * -1 when there are more than max. */
int sim_split(char *line, char **words, int max);

/* Run a scenario in the event-driven format (docs/resil-sim.md) against
 * each configuration; returns the exit status. */
int sim_des_main(
    const char *const *confs, size_t nconfs, const char *scn, const char *svg);

/* Nonzero when the scenario file is in the event-driven format: its
 * first word is a keyword, not a time. */
int sim_des_detect(const char *scn);

/* The first cluster setting of conf (cluster=, retries=, loadbalance=,
 * router.*, outlier.*, <method>.retries, ...) into *out: 1, or 0 when it
 * has none. An event scenario needs a cluster configuration; a step
 * scenario (one implicit endpoint) refuses one. */
int sim_cluster_setting(const resil_config *conf, resil_config_setting *out);

#endif /* RESIL_SIM_H */

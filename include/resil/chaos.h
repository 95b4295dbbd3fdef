/*
 * resil chaos: Polly v8's chaos strategies (Simmy) as one decision a
 * driver asks for before each attempt: inject a fault (the attempt fails
 * with a return code of the user's choosing), latency (the attempt starts
 * late, the driver waits through its clock), an outcome (the attempt
 * answers a value without running) or a behaviour (a callback of the
 * user's runs first), each at its own injection rate, each with a switch
 * that flips at run time.
 *
 * A chaos decides and never acts: resil_chaos_decide() says what to
 * inject and the driver (the pipeline, the call machine, a test's own
 * loop) does it. Nothing here sleeps, reads a clock or calls the
 * behaviour callback.
 *
 * The decision, with the strategies in Polly's documented order:
 *
 *   1. the one flag word: no strategy live (the master switch off, or
 *      every configured strategy switched off): nothing, no draw;
 *   2. fault, if live: one draw u; u < rate injects the fault and ends
 *      the decision (terminal: nothing below is drawn);
 *   3. latency, if live: one draw; u < rate adds the delay (not terminal);
 *   4. outcome, if live: one draw; u < rate injects the value and ends the
 *      decision (terminal);
 *   5. behaviour, if live: one draw; u < rate adds the callback.
 *
 * So a decision draws 0 to 4 values of the chaos's resil_random, in that
 * order, and a test that scripts the draws knows exactly which one each
 * strategy gets. A rate of 0 never injects and 1 always does; both still
 * draw, so that changing one rate does not shift the draws of the others.
 *
 * Thread safety: resil_chaos_decide(), _set_enabled(), _get_enabled() and
 * _get_metrics() may run concurrently from any number of threads on one
 * chaos; a switch flipped by one thread is seen by the next decision of
 * every thread (one atomic word). new and free must not overlap any other
 * call on the same chaos. With several threads deciding at once, the
 * draws of the chaos's own generator are distinct values of its seeded
 * sequence (which thread gets which is not fixed); a scripted
 * resil_random must be thread-safe itself. The listener runs on the
 * deciding thread. The config functions touch only their arguments.
 */
#ifndef RESIL_CHAOS_H
#define RESIL_CHAOS_H

#include <resil/clock.h>
#include <resil/resil.h>
#include <resil/value.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_chaos resil_chaos;

/* The strategies, as bits: a decision answers a mask of them. */
typedef enum resil_chaos_kind {
	RESIL_CHAOS_FAULT = 1,
	RESIL_CHAOS_LATENCY = 2,
	RESIL_CHAOS_OUTCOME = 4,
	RESIL_CHAOS_BEHAVIOUR = 8
} resil_chaos_kind;

/* Every strategy bit. */
#define RESIL_CHAOS_STRATEGIES 0xFu
/* The master switch, for resil_chaos_set_enabled(): off, nothing is
 * injected whatever the strategies' own switches say; on, each strategy
 * follows its own switch. */
#define RESIL_CHAOS_MASTER 0x100u

/* "fault", "latency", "outcome", "behaviour" or "unknown". */
RESIL_API const char *resil_chaos_kind_name(resil_chaos_kind k);

/* A behaviour: the user's code, run by the driver before the attempt
 * (Polly's behaviour strategy: restart a dependency, fill a disk, ...).
 * now is the reading the decision was made at. */
typedef void (*resil_chaos_behaviour_fn)(void *ctx, uint64_t now);

/* One strategy's switch and rate. */
typedef struct resil_chaos_strategy {
	int enabled; /* its switch at creation; default 1 */
	double rate; /* injection rate in [0, 1]; negative (the default, -1):
	              * the config's rate */
} resil_chaos_strategy;

/* Told once per injected strategy, on the deciding thread, after the
 * decision (Polly's OnFaultInjected and the like). */
typedef struct resil_chaos_event {
	resil_chaos_kind kind;
	uint64_t time;  /* the decision's now */
	int rc;         /* FAULT: the rc */
	uint64_t delay; /* LATENCY: the delay */
} resil_chaos_event;

typedef void (*resil_chaos_listener_fn)(
    const resil_chaos_event *ev, void *ctx);

/*
 * A strategy is configured when its parameter is set: fault_rc != 0,
 * latency_ns > 0, has_outcome, behaviour_fn != NULL. An unconfigured
 * strategy never draws and cannot be switched on.
 */
typedef struct resil_chaos_config {
	size_t size; /* sizeof(resil_chaos_config), set by _init() */
	int enabled; /* the master switch at creation; default 1 */
	double rate; /* the rate of a strategy whose own is negative;
	              * default 0.001 (Polly's InjectionRate) */

	resil_chaos_strategy fault;
	int fault_rc; /* the attempt fails as if the function returned it
	               * (its classifier decides the outcome); 0: no fault */

	resil_chaos_strategy latency;
	uint64_t latency_ns; /* ticks the attempt is delayed; 0: none */

	resil_chaos_strategy outcome;
	int has_outcome;
	/* The attempt answers rc 0 and a copy of this value without
	 * running. Owned by the config when set by resil_chaos_config_set()
	 * (free it with resil_chaos_config_deinit()); copied by _new(). */
	resil_value outcome_value;

	resil_chaos_strategy behaviour;
	resil_chaos_behaviour_fn behaviour_fn; /* NULL: none */
	void *behaviour_ctx;

	/* The draws; NULL: a generator of the chaos's own, seeded with
	 * seed (default 0x5EED). *random is copied; its ctx must outlive
	 * the chaos. */
	const resil_random *random;
	uint64_t seed;
	resil_chaos_listener_fn listener; /* NULL: none */
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_chaos_config;

static inline void
resil_chaos_config_init(resil_chaos_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->enabled = 1;
	cfg->rate = 0.001;
	cfg->fault.enabled = 1;
	cfg->fault.rate = -1.0;
	cfg->latency.enabled = 1;
	cfg->latency.rate = -1.0;
	cfg->outcome.enabled = 1;
	cfg->outcome.rate = -1.0;
	cfg->behaviour.enabled = 1;
	cfg->behaviour.rate = -1.0;
	cfg->seed = 0x5EED;
}

static inline resil_chaos_config
resil_chaos_config_default(void)
{
	resil_chaos_config cfg;

	resil_chaos_config_init(&cfg);
	return cfg;
}

/* Release the outcome value a config holds (NULL is a no-op); the rest
 * of *cfg stays. */
RESIL_API void resil_chaos_config_deinit(resil_chaos_config *cfg);

/*
 * Apply one setting of configuration text to *cfg. Keys (docs/chaos.md):
 * chaos.enabled (boolean), chaos.rate (0..1), chaos.seed, chaos.fault (a
 * nonzero integer rc), chaos.latency (a duration >= 1ns; a bare number is
 * milliseconds), chaos.outcome (a value, as a mock's `return` payload:
 * null, true, 42, 2.5, "text", 'text', {"a":1}, [1]), and for each
 * strategy S of fault, latency, outcome, behaviour: chaos.S.rate (0..1)
 * and chaos.S.enabled (boolean). chaos.outcome allocates through
 * cfg->alloc and replaces (frees) a value set before.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown key or
 * a bad value, with a message naming the key
 * (`chaos.fault.rate: 1.5 is out of range 0..1`), *cfg unchanged;
 * RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_chaos_config_set(resil_chaos_config *cfg,
    const char *key, const char *value, resil_diag *diag);

/* RESIL_OK, or RESIL_E_INVAL naming the field in *diag
 * (`chaos.latency.rate: 2 is out of range 0..1`). */
RESIL_API resil_err resil_chaos_config_validate(
    const resil_chaos_config *cfg, resil_diag *diag);

/*
 * Create a chaos. *cfg, *cfg->random, *cfg->alloc and the outcome value
 * are copied (the value deeply); the ctx pointers of the random source,
 * the listener, the behaviour and the allocator must outlive the chaos.
 * Free it with resil_chaos_free(). Returns RESIL_OK; RESIL_E_INVAL for a
 * NULL argument, an unknown cfg->size or a bad setting (named in *diag);
 * RESIL_E_NOMEM. *out is unchanged on error.
 */
RESIL_API resil_err resil_chaos_new(
    resil_chaos **out, const resil_chaos_config *cfg, resil_diag *diag);

/* Release a reference to ch (the one new gave, or one of
 * resil_chaos_ref()); the chaos, with its methods' chaoses, is freed with
 * the last. NULL is a harmless no-op. */
RESIL_API void resil_chaos_free(resil_chaos *ch);

/* Take another reference to ch (a pipeline takes one on its chaos, so
 * the caller may free its own after resil_pipeline_new()); returns ch.
 * NULL gives NULL. May run concurrently with decisions. */
RESIL_API resil_chaos *resil_chaos_ref(resil_chaos *ch);

/*
 * Per method: give method `method` the chaos child, asked instead of ch
 * for that method's attempts by a pipeline whose chaos is ch (its own
 * strategies, rates, switches and draws; ch's are not asked for it). ch
 * takes a reference to child (free yours when you like). Returns
 * RESIL_OK; RESIL_E_INVAL for a NULL argument, a method given twice, or
 * child not a plain chaos (ch itself, a method's chaos already, a chaos
 * with methods, or ch a method's chaos): one level only; RESIL_E_NOMEM.
 * Like new and free, it must not overlap any other call on ch or child.
 */
RESIL_API resil_err resil_chaos_set_method(resil_chaos *ch,
    const char *method, resil_chaos *child, resil_diag *diag);

/* The chaos that method's attempts ask: its own (set_method), else ch
 * itself; ch for a NULL method; NULL for a NULL ch. */
RESIL_API resil_chaos *resil_chaos_method(resil_chaos *ch, const char *method);

/* Whether a and b were created alike, their methods' chaoses included
 * (strategies, parameters, rates, switches at creation, seed, callbacks;
 * the switches flipped since do not count): what a reload from text
 * compares. Two NULLs are alike. */
RESIL_API int resil_chaos_same(const resil_chaos *a, const resil_chaos *b);

/* What a decision injects; written only when the decision injects. */
typedef struct resil_chaos_action {
	unsigned kinds; /* the resil_chaos_kind bits injected */
	int rc;         /* FAULT: the rc the attempt fails with */
	uint64_t delay; /* LATENCY: ticks to wait before the attempt */
	uint64_t until; /* LATENCY: now + delay (saturating at UINT64_MAX) */
	/* OUTCOME: the value to answer; the chaos's own, valid until it is
	 * freed: copy it (resil_value_copy) to hand it on. */
	const resil_value *value;
	resil_chaos_behaviour_fn behaviour; /* BEHAVIOUR: run it first */
	void *behaviour_ctx;
} resil_chaos_action;

/*
 * Decide what to inject into one attempt that is about to run at now.
 * Returns the mask of strategies injected (0: none; the common answer)
 * and, when it is not 0, fills *out. FAULT and OUTCOME never come
 * together; LATENCY and BEHAVIOUR may come with either.
 *
 * The driver then, in this order: runs the behaviour; waits until
 * out->until (a blocking driver sleeps out->delay on its clock, an event
 * loop arms a timer); and answers the attempt itself with out->rc
 * (FAULT) or with rc 0 and a copy of *out->value (OUTCOME) instead of
 * calling the function, or calls the function.
 *
 * A NULL ch is a chaos that never injects (0). A NULL out decides
 * nothing: 0, no draw. Allocates nothing, takes no lock; with every
 * strategy off it is one load and one test of the flag word.
 */
RESIL_API unsigned resil_chaos_decide(
    resil_chaos *ch, uint64_t now, resil_chaos_action *out);

/*
 * Flip switches at run time: which is RESIL_CHAOS_MASTER, or a mask of
 * strategy bits (or both); on is 0 or not. The next decision of every
 * thread follows. Returns RESIL_OK; RESIL_E_INVAL for a NULL ch, an
 * unknown bit, no bit at all, or a strategy that is not configured (then
 * nothing changes).
 */
RESIL_API resil_err resil_chaos_set_enabled(
    resil_chaos *ch, unsigned which, int on);

/* The switches now: the strategy bits switched on, plus
 * RESIL_CHAOS_MASTER when the master switch is on; 0 for NULL. */
RESIL_API unsigned resil_chaos_get_enabled(const resil_chaos *ch);

/* The strategies that would draw now (configured, switched on, master
 * on); 0 for NULL. */
RESIL_API unsigned resil_chaos_live(const resil_chaos *ch);

typedef struct resil_chaos_metrics {
	uint64_t decisions;    /* decisions that got past the flag word */
	uint64_t faults;       /* injected, per strategy */
	uint64_t latencies;
	uint64_t outcomes;
	uint64_t behaviours;
	uint64_t latency_ns;   /* the sum of the delays injected */
	unsigned configured;   /* the strategy bits configured */
	unsigned enabled;      /* resil_chaos_get_enabled() */
} resil_chaos_metrics;

/* Each figure is exact; they are not read atomically together while
 * other threads decide. RESIL_OK, or RESIL_E_INVAL for NULL. */
RESIL_API resil_err resil_chaos_get_metrics(
    const resil_chaos *ch, resil_chaos_metrics *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_CHAOS_H */

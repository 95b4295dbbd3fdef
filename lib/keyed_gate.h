/*
 * Issue 41: a pipeline's keyed families (p->keyed), shared by the gate
 * (lib/call_keyed.c) and the families' making and keeping
 * (lib/pipeline_keyed.c). Never installed.
 */
#ifndef RESIL_KEYED_GATE_H
#define RESIL_KEYED_GATE_H

#include <resil/keyed.h>

#include "atomic.h"
#include "keyed_spec.h"

/* Issue 41 (turn 4): the server's pushback per key
 * (lib/call_keyed_pause.c): the rate limiter family's keys paused by a
 * Retry-After, by a 64-bit hash of the key's bytes (0: an empty slot),
 * until a time on the pipeline's clock. */
typedef struct resil__kpslot {
	uint64_t h;
	uint64_t until;
} resil__kpslot;

/* At most this many keys paused at once per pipeline (a pause past it
 * is not kept: the key's limiter is drained instead, and the pushback
 * event says so). */
#define RESIL__KPAUSE_MAX 1024u

typedef struct resil__kpause {
	/* The end of the latest pause kept, 0 when none is (atomic: the
	 * gate's one load when no key is paused). */
	uint64_t live;
	resil__spinlock mu; /* the slots */
	resil__kpslot *slot; /* cap slots (a power of two), NULL until the first pause */
	uint32_t cap, used; /* used: slots not empty (ended pauses too) */
} resil__kpause;

struct resil__kgate {
	resil_keyed *fam[RESIL_KEYED_KINDS];
	kspec spec[RESIL_KEYED_KINDS];
	/* Families made from the pipeline's configuration (keyed[k], the
	 * text's KIND.key): what made them, for a reload to compare. */
	uint8_t from_cfg[RESIL_KEYED_KINDS];
	resil_keyed_config kc[RESIL_KEYED_KINDS]; /* overrides NULL */
	char *fp[RESIL_KEYED_KINDS];            /* the key, bounds and overrides, as text */
	/* Issue 41 (h3): the rate limiter family on the fleet (borrowed
	 * from the pipeline's fleet limiter; lib/pipeline_keyed_fleet.c),
	 * asked in place of fam[RATELIMIT]; NULL: local. */
	struct resil_fleet_limit *frl;
	/* Issue 41 (turn 4): the keys the server pushed back (rate limiter
	 * family), and the family's ratelimit.drain_on_throttled when given
	 * in C (resil_pipeline_set_keyed). */
	resil__kpause kp;
	uint8_t rl_drain;
	/* h4/kgate: a breaker family alone, its key drawn per call (not by
	 * the host): the gate's short path (lib/call_keyed.c). */
	uint8_t br_only;
};

#endif

/*
 * Issue 41: a pipeline's keyed families (p->keyed), shared by the gate
 * (lib/call_keyed.c) and the families' making and keeping
 * (lib/pipeline_keyed.c). Never installed.
 */
#ifndef RESIL_KEYED_GATE_H
#define RESIL_KEYED_GATE_H

#include <resil/keyed.h>

#include "keyed_spec.h"

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
};

#endif

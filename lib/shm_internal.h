/*
 * Private: what lib/keyed_shm.c (issue 41: keyed breaker families in a
 * region) needs of lib/shm.c, and what lib/shm.c asks of it about a
 * keyed family's table (which process slots it names, clearing a slot
 * taken over from a dead process). Never installed.
 */
#ifndef RESIL_SHM_INTERNAL_H
#define RESIL_SHM_INTERNAL_H

#include <resil/shm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proc.h"

#define RESIL__SHM_KIND_KEYED 4u
#define RESIL__SHM_KIND_KEYED_RATE 5u /* h3/kshm2 */
#define RESIL__SHM_KIND_KEYED_BULK 6u /* h4/kshm3 */
/* The most slots a keyed family's table holds. */
#define RESIL__KSHM_MAX_KEYS (UINT32_C(1) << 20)

typedef struct resil__shm_keyed_want {
	const resil_breaker_config *breaker; /* the layout fields */
	bool ratelimit; /* a rate limiter family's table (breaker unused) */
	bool bulkhead;  /* h4/kshm3: a bulkhead family's (breaker unused) */
	uint32_t max_keys;
	bool find_only; /* RESIL_E_NOTFOUND rather than make it */
	/* Called under the region's table lock on a new table's zeroed
	 * bytes, before the entry is committed. */
	void (*init)(void *mem, void *arg);
	void *arg;
} resil__shm_keyed_want;

/* The keyed family called name in the region: found (same layout, else
 * RESIL_E_INVAL naming both) or made (RESIL_E_NOMEM when the region is
 * full). *mem: its table. */
resil_err resil__shm_keyed_table(resil_shm *shm, const char *name,
    const resil__shm_keyed_want *w, void **mem, resil_diag *diag);

const resil__proc *resil__shm_procs(const resil_shm *shm);
unsigned resil__shm_slot(const resil_shm *shm);
const resil_allocator *resil__shm_alloc(const resil_shm *shm);
const char *resil__shm_name(const resil_shm *shm);

/* lib/keyed_shm_table.c: the table's bytes for breakers of bc's layout (a
 * multiple of 64). */
size_t resil__kshm_bytes(const resil_breaker_config *bc, uint32_t max_keys);

/* The table's bytes for a rate limiter family (h3/kshm2). */
size_t resil__kshm_rate_bytes(uint32_t max_keys);

/* The table's bytes for a bulkhead family (h4/kshm3). */
size_t resil__kshm_bulk_bytes(uint32_t max_keys);

/* A bulkhead family's table at mem: give back the calls in flight of
 * processes found dead in every key's bulkhead (resil_shm_reap); skip:
 * the caller's process slot. Returns how many. */
uint32_t resil__kshm_reap(
    void *mem, size_t bytes, const resil__proc *procs, unsigned skip);

/* Whether dead process slot i is still named by the table at mem (its
 * lock, a claim, a breaker's transition). */
bool resil__kshm_slot_busy(const void *mem, size_t bytes, unsigned i);

/* Process slot i was taken over from a dead process: clear its attach
 * bits and its announcements in every breaker of the table. */
void resil__kshm_clear_slot(void *mem, size_t bytes, unsigned i);

/* h3/kshm, the pipeline's breaker.key.shared: resil_shm_keyed() on a
 * region the family opens itself from url ("shm:REGION/NAME", made with
 * room for the table when it does not exist) and closes when it is
 * freed. */
resil_err resil__shm_keyed_owned(const char *url,
    const resil_keyed_config *cfg, resil_keyed **out, resil_diag *diag);

/* Tests only: called by a claimer after it tagged its slot and wrote the
 * key, before the slot is READY (NULL in production). */
extern void (*resil__kshm_claim_hook)(void);

#endif /* RESIL_SHM_INTERNAL_H */

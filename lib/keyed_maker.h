/*
 * Private: a keyed family whose instances are made elsewhere (issue 41,
 * lib/keyed_shm.c: a family whose breakers live in a shared-memory
 * region). lib/keyed.c calls make for each key's first use (and once
 * with key NULL for the overflow instance) instead of resil_breaker_new
 * and its kin, drop instead of the instance's free, and done once, after
 * every instance was dropped, when the family is freed. make runs under
 * the family's lock; cfg is the family's configuration with its counting
 * allocator and its clock (the instance's alloc and clock). make may
 * answer RESIL_OK with *inst NULL for a key (h4/kshm3: no slot for it in
 * the region): the key gets the family's overflow instance, as when the
 * family is full (its listener hears OVERFLOW), and is not entered, so its
 * next use asks make again; drop is then given NULL when the family
 * checks an override's instance at creation. Never installed.
 */
#ifndef RESIL_KEYED_MAKER_H
#define RESIL_KEYED_MAKER_H

#include <resil/keyed.h>

typedef struct resil__keyed_maker {
	resil_err (*make)(void *ctx, const resil_keyed_config *cfg,
	    const void *key, size_t len, void **inst, resil_diag *diag);
	void (*drop)(void *ctx, void *inst);
	void (*done)(void *ctx);
	void *ctx;
} resil__keyed_maker;

/* resil_keyed_new() with mk's instances (mk copied; mk->done is called by
 * resil_keyed_free(), or here when creation fails). */
resil_err resil__keyed_new_made(resil_keyed **out,
    const resil_keyed_config *cfg, const resil__keyed_maker *mk,
    resil_diag *diag);

#endif /* RESIL_KEYED_MAKER_H */

/*
 * A keyed breaker family in shared memory (issue 41, resil_shm_keyed):
 * keyed/shm/breaker/closed/1000 is keyed/breaker/closed/1000 (an existing
 * key's CLOSED acquire + record success, 1000 live keys of 12 bytes, the
 * walk over all of them, each key's window of 100 full of successes) with
 * every key's breaker in a region. Compare with keyed/breaker/closed/1000
 * and shm/closed_success of the same run: the family's lookup
 * is the in-process one, the breaker's path the shared one.
 * keyed/shm/bulkhead/1000 (h4/kshm3): an existing key's try_acquire +
 * release on a keyed bulkhead family in a region, 1000 live keys of 12
 * bytes walked in turn (compare shm/bulkhead: the lone shared bulkhead).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/keyed.h>
#include <resil/shm.h>

#include "bench.h"

#define KS_KEYS 1000u
#define KS_KEYLEN 12

typedef struct ksb {
	resil_manual_clock mc;
	resil_shm *shm;
	resil_keyed *k;
	char keys[KS_KEYS][KS_KEYLEN + 1];
	char region[64];
} ksb;

static void *
setup_kshm_1000(void)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_shm_config sc;
	ksb *x = calloc(1, sizeof(*x));
	uint32_t i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.max_keys = KS_KEYS;
	cfg.max_key_len = 64;
	cfg.breaker.window_size = 100;
	cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
	resil_shm_config_init(&sc);
	sc.region_bytes = (size_t)16 << 20;
	snprintf(x->region, sizeof(x->region), "bench-k-%ld", (long)getpid());
	(void)resil_shm_unlink(x->region, NULL);
	if (resil_shm_open(&x->shm, x->region, &sc, NULL) != RESIL_OK ||
	    resil_shm_keyed(x->shm, "hosts", &cfg, &x->k, NULL) != RESIL_OK)
		abort();
	for (i = 0; i < KS_KEYS; i++)
		snprintf(x->keys[i], KS_KEYLEN + 1, "host-%07u", i);
	/* Every key made, its window of 100 full of successes. */
	for (i = 0; i < KS_KEYS * 100; i++) {
		resil_keyed_permit p;

		if (resil_keyed_breaker_acquire(
		        x->k, x->keys[i % KS_KEYS], KS_KEYLEN, &p) != RESIL_OK)
			abort();
		resil_keyed_breaker_record(x->k, &p, RESIL_OUTCOME_SUCCESS);
	}
	return x;
}

static uint64_t
run_kshm(void *ctx, uint64_t iters)
{
	ksb *x = ctx;
	resil_keyed_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		const char *key = x->keys[i % KS_KEYS];

		if (resil_keyed_breaker_acquire(x->k, key, KS_KEYLEN, &p) ==
		    RESIL_OK) {
			resil_keyed_breaker_record(
			    x->k, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

static void
teardown_kshm(void *ctx)
{
	ksb *x = ctx;

	resil_keyed_free(x->k);
	resil_shm_close(x->shm);
	(void)resil_shm_unlink(x->region, NULL);
	free(x);
}

static void *
setup_kshm_bulkhead_1000(void)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_shm_config sc;
	ksb *x = calloc(1, sizeof(*x));
	uint32_t i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.kind = RESIL_KEYED_BULKHEAD;
	cfg.max_keys = KS_KEYS;
	cfg.max_key_len = 64;
	cfg.bulkhead.max_concurrent = 8;
	cfg.bulkhead.clock = resil_manual_clock_hook(&x->mc);
	resil_shm_config_init(&sc);
	sc.region_bytes = (size_t)8 << 20;
	snprintf(x->region, sizeof(x->region), "bench-kb-%ld", (long)getpid());
	(void)resil_shm_unlink(x->region, NULL);
	if (resil_shm_open(&x->shm, x->region, &sc, NULL) != RESIL_OK ||
	    resil_shm_keyed(x->shm, "hosts", &cfg, &x->k, NULL) != RESIL_OK)
		abort();
	for (i = 0; i < KS_KEYS; i++) {
		resil_keyed_permit p;

		snprintf(x->keys[i], KS_KEYLEN + 1, "host-%07u", i);
		if (resil_keyed_bulkhead_try_acquire(
		        x->k, x->keys[i], KS_KEYLEN, &p) != RESIL_OK ||
		    resil_keyed_bulkhead_release(x->k, &p) != RESIL_OK)
			abort();
	}
	return x;
}

static uint64_t
run_kshm_bulkhead(void *ctx, uint64_t iters)
{
	ksb *x = ctx;
	resil_keyed_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		if (resil_keyed_bulkhead_try_acquire(x->k, x->keys[i % KS_KEYS],
		        KS_KEYLEN, &p) == RESIL_OK)
			n += resil_keyed_bulkhead_release(x->k, &p) == RESIL_OK;
	return n;
}

const resil_bench resil_bench_keyed_shm[] = {
	{ "keyed/shm/breaker/closed/1000", setup_kshm_1000, run_kshm,
	    teardown_kshm },
	{ "keyed/shm/bulkhead/1000", setup_kshm_bulkhead_1000,
	    run_kshm_bulkhead, teardown_kshm },
	{ NULL, NULL, NULL, NULL },
};

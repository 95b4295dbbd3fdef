/*
 * Keyed families (issue 41): an existing key's CLOSED acquire + record
 * success at 10^3 and 10^6 live keys (the breaker of
 * breaker/closed/count100, one per key), a rate limiter's try_acquire at
 * 10^6 keys, and the first use of a key in a full family (which evicts an
 * idle one). Keys are 12-byte host names ("host-0000042"); the calls walk
 * a working set of 1024 keys spread over the whole family (every probe of
 * a full-size table, the hot keys in cache as with skewed traffic); each
 * thread of a 2-thread run walks keys of its own. Manual clock.
 * keyed/throttle/1000 (issue 42): an existing key's throttle admit +
 * report accepted at 10^3 keys (every call accepted: never shed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/keyed.h>

#include "bench.h"

#define HOT 1024u
#define KEYLEN 12

typedef struct kb {
	resil_manual_clock mc;
	resil_keyed *k;
	uint32_t n;
	char (*hot)[KEYLEN + 1]; /* HOT keys, each thread half of them */
	const char **keyp;       /* the HOT keys' addresses */
	uint64_t threads;        /* atomic: threads that joined */
	uint64_t next;           /* atomic: new_key's counter */
	resil_keyed_handle *held; /* the HOT keys held (the handle rows) */
} kb;

static _Thread_local int thread_slot = -1;

static unsigned
my_half(kb *x)
{
	if (thread_slot < 0)
		thread_slot = (int)(__atomic_fetch_add(
		                        &x->threads, 1, __ATOMIC_RELAXED) &
		    1);
	return (unsigned)thread_slot;
}

static kb *
kb_new(resil_keyed_kind kind, uint32_t n, int fill)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	kb *x = calloc(1, sizeof(*x));
	char key[KEYLEN + 1];
	uint32_t i;

	if (x == NULL)
		abort();
	resil_manual_clock_init(&x->mc, 1);
	cfg.kind = kind;
	cfg.max_keys = n;
	cfg.breaker.window_size = 100;
	cfg.breaker.clock = resil_manual_clock_hook(&x->mc);
	/* Never limited: the row measures the path, not the refusals. */
	cfg.ratelimit.rate = 1u << 20;
	cfg.ratelimit.burst = 1u << 20;
	cfg.ratelimit.period_ns = 1;
	cfg.ratelimit.clock = resil_manual_clock_hook(&x->mc);
	cfg.throttle.clock = resil_manual_clock_hook(&x->mc);
	cfg.throttle.seed = 1;
	if (resil_keyed_new(&x->k, &cfg, NULL) != RESIL_OK)
		abort();
	x->n = n;
	x->hot = calloc(HOT, sizeof(*x->hot));
	x->keyp = calloc(HOT, sizeof(*x->keyp));
	if (x->hot == NULL || x->keyp == NULL)
		abort();
	for (i = 0; fill && i < n; i++) {
		resil_keyed_permit p;

		snprintf(key, sizeof(key), "host-%07u", i);
		if (kind == RESIL_KEYED_BREAKER) {
			if (resil_keyed_breaker_acquire(x->k, key, KEYLEN, &p) !=
			    RESIL_OK)
				abort();
			resil_keyed_breaker_record(
			    x->k, &p, RESIL_OUTCOME_SUCCESS);
		} else if (kind == RESIL_KEYED_THROTTLE) {
			if (resil_keyed_throttle_admit(x->k, key, KEYLEN,
			        RESIL_THROTTLE_DEFAULT, &p) != RESIL_OK)
				abort();
			resil_keyed_throttle_report(
			    x->k, &p, RESIL_THROTTLE_ACCEPTED);
		} else if (resil_keyed_ratelimit_try_acquire(
		               x->k, key, KEYLEN, 1, NULL) != RESIL_OK)
			abort();
	}
	for (i = 0; i < HOT; i++) {
		snprintf(x->hot[i], KEYLEN + 1, "host-%07u",
		    (unsigned)((uint64_t)i * n / HOT));
		x->keyp[i] = x->hot[i];
	}
	/* The steady state of breaker/closed/count100: each hot key's
	 * window of 100 full of successes. */
	for (i = 0; fill && kind == RESIL_KEYED_BREAKER && i < HOT * 100; i++) {
		resil_keyed_permit p;

		if (resil_keyed_breaker_acquire(
		        x->k, x->hot[i % HOT], KEYLEN, &p) != RESIL_OK)
			abort();
		resil_keyed_breaker_record(x->k, &p, RESIL_OUTCOME_SUCCESS);
	}
	return x;
}

static void
kb_free(void *ctx)
{
	kb *x = ctx;

	for (unsigned i = 0; x->held != NULL && i < HOT; i++)
		resil_keyed_put(x->k, &x->held[i]);
	free(x->held);
	resil_keyed_free(x->k);
	free(x->hot);
	free(x->keyp);
	free(x);
}

static void *
setup_breaker_1000(void)
{
	return kb_new(RESIL_KEYED_BREAKER, 1000, 1);
}

static void *
setup_breaker_1000000(void)
{
	return kb_new(RESIL_KEYED_BREAKER, 1000000, 1);
}

static void *
setup_ratelimit_1000000(void)
{
	return kb_new(RESIL_KEYED_RATELIMIT, 1000000, 1);
}

static void *
setup_throttle_1000(void)
{
	return kb_new(RESIL_KEYED_THROTTLE, 1000, 1);
}

/* An existing key's throttle admit + report accepted (issue 42). */
static uint64_t
run_throttle(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	unsigned base = my_half(x) * (HOT / 2);
	resil_keyed_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		if (resil_keyed_throttle_admit(x->k,
		        x->hot[base + (i & (HOT / 2 - 1))], KEYLEN,
		        RESIL_THROTTLE_DEFAULT, &p) == RESIL_OK) {
			resil_keyed_throttle_report(
			    x->k, &p, RESIL_THROTTLE_ACCEPTED);
			n++;
		}
	return n;
}

static void *
setup_new_key(void)
{
	return kb_new(RESIL_KEYED_BREAKER, 1000, 0);
}

/* The hot keys held once (resil_keyed_get): the calls pay only the
 * instance. */
static kb *
kb_held(resil_keyed_kind kind, uint32_t n)
{
	kb *x = kb_new(kind, n, 1);
	unsigned i;

	x->held = calloc(HOT, sizeof(*x->held));
	if (x->held == NULL)
		abort();
	for (i = 0; i < HOT; i++)
		if (resil_keyed_get(x->k, x->hot[i], KEYLEN, &x->held[i]) !=
		    RESIL_OK)
			abort();
	return x;
}

static void *
setup_breaker_handle(void)
{
	return kb_held(RESIL_KEYED_BREAKER, 1000000);
}

static void *
setup_ratelimit_handle(void)
{
	return kb_held(RESIL_KEYED_RATELIMIT, 1000000);
}

/* An existing key's acquire + record success on its held breaker. */
static uint64_t
run_breaker_handle(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	unsigned base = my_half(x) * (HOT / 2);
	resil_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		resil_breaker *b =
		    x->held[base + (i & (HOT / 2 - 1))].instance.breaker;

		if (resil_breaker_acquire(b, &p) == RESIL_OK) {
			resil_breaker_record(b, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

static uint64_t
run_ratelimit_handle(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	unsigned base = my_half(x) * (HOT / 2);
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_ratelimit_try_acquire(
		         x->held[base + (i & (HOT / 2 - 1))].instance.ratelimit,
		         1, NULL) == RESIL_OK;
	return n;
}

/* The lookup alone: resil_keyed_get + resil_keyed_put of an existing key. */
static uint64_t
run_get_put(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	unsigned base = my_half(x) * (HOT / 2);
	resil_keyed_handle h;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		const char *key = x->hot[base + (i & (HOT / 2 - 1))];

		if (resil_keyed_get(x->k, key, KEYLEN, &h) == RESIL_OK) {
			resil_keyed_put(x->k, &h);
			n++;
		}
	}
	return n;
}

/* This thread's half of the keys' addresses, as one pointer (the
 * compiler would otherwise keep the base and the half's offset apart, a
 * register and an add per call). */
static const char **
my_keys(kb *x)
{
	const char **keys = x->keyp + my_half(x) * (HOT / 2);

#if defined(__GNUC__)
	__asm__("" : "+r"(keys));
#endif
	return keys;
}

/* The key rows pick each call's key from the keys' addresses, taken
 * before the run (the pick is the harness's, counted in the row; the
 * call is by the key's bytes, as a user's). */
static uint64_t
run_breaker(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	resil_keyed *k = x->k;
	const char **keys = my_keys(x);
	resil_keyed_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		if (resil_keyed_breaker_acquire(
		        k, keys[i & (HOT / 2 - 1)], KEYLEN, &p) == RESIL_OK) {
			resil_keyed_breaker_record(k, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	return n;
}

static uint64_t
run_ratelimit(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	resil_keyed *k = x->k;
	const char **keys = my_keys(x);
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++)
		n += resil_keyed_ratelimit_try_acquire(
		         k, keys[i & (HOT / 2 - 1)], KEYLEN, 1, NULL) == RESIL_OK;
	return n;
}

/* A key never seen: 8 bytes of a counter shared by the threads. In a
 * full family of 1000, each also evicts the idlest key. */
static uint64_t
run_new_key(void *ctx, uint64_t iters)
{
	kb *x = ctx;
	resil_keyed_permit p;
	uint64_t i, n = 0;

	for (i = 0; i < iters; i++) {
		uint64_t key = __atomic_fetch_add(&x->next, 1, __ATOMIC_RELAXED);

		if (resil_keyed_breaker_acquire(x->k, &key, sizeof(key), &p) ==
		    RESIL_OK) {
			resil_keyed_breaker_record(
			    x->k, &p, RESIL_OUTCOME_SUCCESS);
			n++;
		}
	}
	return n;
}

const resil_bench resil_bench_keyed[] = {
	{ "keyed/breaker/closed/1000", setup_breaker_1000, run_breaker,
	    kb_free },
	{ "keyed/breaker/closed/1000000", setup_breaker_1000000, run_breaker,
	    kb_free },
	{ "keyed/ratelimit/1000000", setup_ratelimit_1000000, run_ratelimit,
	    kb_free },
	{ "keyed/new_key", setup_new_key, run_new_key, kb_free },
	{ "keyed/breaker/handle/1000000", setup_breaker_handle,
	    run_breaker_handle, kb_free },
	{ "keyed/ratelimit/handle/1000000", setup_ratelimit_handle,
	    run_ratelimit_handle, kb_free },
	{ "keyed/get_put/1000000", setup_breaker_1000000, run_get_put,
	    kb_free },
	{ "keyed/throttle/1000", setup_throttle_1000, run_throttle, kb_free },
	{ NULL, NULL, NULL, NULL },
};

/*
 * One keyed breaker family in front of 100 hosts, 5 of them dead: each
 * host has its own breaker, made on its first call, so only the 5 dead
 * hosts open and the 95 others stay CLOSED (docs/keyed.md).
 */
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/keyed.h>

/* The call to a host: the dead ones always fail. */
static int
call_host(int host)
{
	return host % 20 == 7 ? -1 : 0; /* hosts 7, 27, 47, 67, 87 are down */
}

typedef struct tally {
	int open, closed;
} tally;

static void
count_state(const void *key, size_t key_len, const resil_keyed_instance *in,
    void *ctx)
{
	tally *t = ctx;

	(void)key;
	(void)key_len;
	if (resil_breaker_get_state(in->breaker) == RESIL_BREAKER_CLOSED)
		t->closed++;
	else
		t->open++;
}

int
main(void)
{
	resil_keyed_config cfg = resil_keyed_config_default();
	resil_manual_clock mc;
	resil_keyed *hosts;
	resil_diag diag;
	tally t = { 0, 0 };
	int round, h;

	resil_manual_clock_init(&mc, 0);
	cfg.kind = RESIL_KEYED_BREAKER;
	cfg.max_keys = 1000;               /* at most 1000 hosts remembered */
	cfg.breaker.window_size = 20;      /* the last 20 calls of a host */
	cfg.breaker.min_calls = 10;
	cfg.breaker.failure_rate_pct = 50; /* open at half of them failing */
	cfg.breaker.clock = resil_manual_clock_hook(&mc);
	if (resil_keyed_new(&hosts, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "keyed: %s\n", diag.msg);
		return 1;
	}
	for (round = 0; round < 30; round++)
		for (h = 0; h < 100; h++) {
			resil_keyed_permit p;
			char key[16];
			int n = snprintf(key, sizeof(key), "host-%02d", h);

			if (resil_keyed_breaker_acquire(hosts, key, (size_t)n,
			        &p) != RESIL_OK)
				continue; /* rejected fast: its breaker is open */
			resil_keyed_breaker_record(hosts, &p,
			    call_host(h) == 0 ? RESIL_OUTCOME_SUCCESS
			                      : RESIL_OUTCOME_FAILURE);
			resil_manual_clock_advance(&mc, RESIL_NS_PER_MS);
		}
	resil_keyed_foreach(hosts, count_state, &t);
	printf("open %d closed %d\n", t.open, t.closed);
	resil_keyed_free(hosts);
	return t.open == 5 && t.closed == 95 ? 0 : 1;
}

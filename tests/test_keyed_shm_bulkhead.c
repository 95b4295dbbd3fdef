/*
 * Keyed bulkhead families in shared memory (h4/kshm3, issue 41,
 * resil_shm_keyed with kind BULKHEAD): two processes share key K's limit
 * exactly (the sum of their calls in flight against max_concurrent), key
 * L has its own, an override's limit is every process's and a process
 * with another is refused, a SIGKILLed holder's calls are given back (at
 * an acquire that would refuse, and by resil_shm_reap), a slot with calls
 * in flight is never reclaimed under churn, and the pipeline's
 * bulkhead.key.shared.
 */
#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/directory.h>
#include <resil/keyed.h>
#include <resil/pipeline.h>
#include <resil/selector.h>
#include <resil/shm.h>

#include "support/shm_fork.h"
#include "support/text_pipeline.h"

/* A barrier and words the processes share. */
typedef struct common {
	pthread_barrier_t go;
	uint32_t child_got; /* calls the child holds */
	uint32_t child_bad; /* the child's failed checks */
	uint32_t ready;     /* the child holds its calls (it waits to die) */
} common;

static common *cm;
static char region[64];

static void
setup_common(void)
{
	cm = shm_fork_page(sizeof(*cm));
	shm_fork_barrier(&cm->go, 2);
	shm_fork_region(region, sizeof(region), "test-kshmb");
}

static void
teardown_common(void)
{
	(void)resil_shm_unlink(region, NULL);
	pthread_barrier_destroy(&cm->go);
	shm_fork_unpage(cm, sizeof(*cm));
}

static resil_keyed_override vip = { "vip", 3, 0, 0, 0, 6 };

/* 4 calls in flight a key; "vip" 6. */
static resil_keyed_config
fam_cfg(uint32_t max_keys)
{
	static resil_keyed_override ov[1];
	resil_keyed_config c;

	ov[0] = vip;
	resil_keyed_config_init(&c);
	c.kind = RESIL_KEYED_BULKHEAD;
	c.max_keys = max_keys;
	c.max_key_len = 64;
	c.bulkhead.max_concurrent = 4;
	c.overrides = ov;
	c.n_overrides = 1;
	return c;
}

static resil_shm *
open_region(void)
{
	resil_shm_config sc;
	resil_shm *shm = NULL;

	resil_shm_config_init(&sc);
	sc.region_bytes = (size_t)8 << 20;
	if (resil_shm_open(&shm, region, &sc, NULL) != RESIL_OK)
		return NULL;
	return shm;
}

/* Calls held on one key (their permits). */
#define HOLD_MAX 16
typedef struct held {
	resil_keyed_permit p[HOLD_MAX];
	int n;
} held;

/* Take up to cap calls on key, kept in h; how many were granted. */
static int
take(resil_keyed *k, const char *key, held *h, int cap)
{
	int got = 0;

	while (got < cap && h->n < HOLD_MAX &&
	    resil_keyed_bulkhead_try_acquire(
	        k, key, strlen(key), &h->p[h->n]) == RESIL_OK) {
		h->n++;
		got++;
	}
	return got;
}

/* Give back every call in h. */
static int
give(resil_keyed *k, held *h)
{
	int bad = 0;

	while (h->n > 0)
		if (resil_keyed_bulkhead_release(k, &h->p[--h->n]) != RESIL_OK)
			bad++;
	return bad;
}

/* key's calls in flight, every process's (its instance made if this
 * process has none). */
static uint64_t
in_flight(resil_keyed *k, const char *key)
{
	resil_bulkhead_metrics m;
	resil_keyed_handle h;

	memset(&m, 0, sizeof(m));
	if (resil_keyed_get(k, key, strlen(key), &h) != RESIL_OK)
		return UINT64_MAX;
	if (resil_bulkhead_get_metrics(h.instance.bulkhead, &m) != RESIL_OK)
		m.in_flight = UINT32_MAX;
	(void)resil_keyed_put(k, &h);
	return m.in_flight;
}

/* ---- two processes share K's limit exactly ---- */

static void
sharer(void)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm *shm = open_region();
	resil_keyed *k;
	held hk, hl;

	memset(&hk, 0, sizeof(hk));
	memset(&hl, 0, sizeof(hl));
	if (shm == NULL ||
	    resil_shm_keyed(shm, "bh", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	pthread_barrier_wait(&cm->go); /* 1: the parent holds 3 of K */
	/* 1 of K's 4 is left; L has its own 4; vip its 6. */
	cm->child_got = (uint32_t)take(k, "K", &hk, 10);
	if (take(k, "L", &hl, 10) != 4 || in_flight(k, "K") != 4)
		cm->child_bad++;
	pthread_barrier_wait(&cm->go); /* 2 */
	pthread_barrier_wait(&cm->go); /* 3: the parent gave back 2 */
	cm->child_got += (uint32_t)take(k, "K", &hk, 10);
	pthread_barrier_wait(&cm->go); /* 4 */
	pthread_barrier_wait(&cm->go); /* 5: the parent checked */
	cm->child_bad += (uint32_t)(give(k, &hk) + give(k, &hl));
	resil_keyed_free(k);
	resil_shm_close(shm);
}

static void
test_keyed_shm_bulkhead_shared_limit(void **state)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_keyed *k;
	held hk, hl, hv;
	pid_t kid;

	(void)state;
	setup_common();
	memset(&hk, 0, sizeof(hk));
	memset(&hl, 0, sizeof(hl));
	memset(&hv, 0, sizeof(hv));
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "bh", &c, &k, NULL), RESIL_OK);
	kid = shm_fork_child(sharer);
	assert_int_equal(take(k, "K", &hk, 3), 3);
	pthread_barrier_wait(&cm->go); /* 1 */
	pthread_barrier_wait(&cm->go); /* 2 */
	/* The child got the one left; K is full for this process too. */
	assert_int_equal(cm->child_got, 1);
	assert_int_equal(take(k, "K", &hk, 10), 0);
	assert_int_equal(in_flight(k, "K"), 4);
	/* L: the child's 4, full here too; vip has 6 of its own. */
	assert_int_equal(take(k, "L", &hl, 10), 0);
	assert_int_equal(take(k, "vip", &hv, 10), 6);
	/* This process gives back 2 of its 3: the child takes exactly 2. */
	hk.n = 3;
	assert_int_equal(resil_keyed_bulkhead_release(k, &hk.p[2]), RESIL_OK);
	assert_int_equal(resil_keyed_bulkhead_release(k, &hk.p[1]), RESIL_OK);
	hk.n = 1;
	pthread_barrier_wait(&cm->go); /* 3 */
	pthread_barrier_wait(&cm->go); /* 4 */
	assert_int_equal(cm->child_got, 3);
	assert_int_equal(in_flight(k, "K"), 4);
	assert_int_equal(take(k, "K", &hk, 10), 0);
	pthread_barrier_wait(&cm->go); /* 5 */
	shm_fork_wait_ok(kid);
	assert_int_equal(cm->child_bad, 0);
	/* The child gave its calls back: this process's one is left. */
	assert_int_equal(in_flight(k, "K"), 1);
	assert_int_equal(in_flight(k, "L"), 0);
	assert_int_equal(take(k, "K", &hk, 10), 3);
	assert_int_equal(give(k, &hk) + give(k, &hv), 0);
	assert_int_equal(in_flight(k, "K"), 0);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "bh", &info, NULL), RESIL_OK);
	/* docs/keyed.md quotes the slot's size. */
	print_message("slot_bytes %zu table_bytes %zu for %u keys\n",
	    info.slot_bytes, info.table_bytes, (unsigned)info.max_keys);
	assert_int_equal(info.slot_bytes, 128 + 64 + 64 * 16);
	assert_int_equal(info.used, 3); /* K, L, vip */
	assert_int_equal(info.overflowed, 0);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a SIGKILLed holder's calls are given back ---- */

static void
holder(void)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm *shm = open_region();
	resil_keyed *k;
	held hk, hm;

	memset(&hk, 0, sizeof(hk));
	memset(&hm, 0, sizeof(hm));
	if (shm == NULL ||
	    resil_shm_keyed(shm, "bk", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	cm->child_got =
	    (uint32_t)(take(k, "K", &hk, 3) + take(k, "M", &hm, 2));
	__atomic_store_n(&cm->ready, 1, __ATOMIC_RELEASE);
	for (;;)
		pause(); /* killed here, holding 3 calls on K and 2 on M */
}

static void
test_keyed_shm_bulkhead_sigkill(void **state)
{
	resil_keyed_config c = fam_cfg(16);
	resil_shm *shm;
	resil_keyed *k;
	held hk, hm;
	pid_t kid;
	int st;

	(void)state;
	setup_common();
	memset(&hk, 0, sizeof(hk));
	memset(&hm, 0, sizeof(hm));
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "bk", &c, &k, NULL), RESIL_OK);
	kid = shm_fork_child(holder);
	while (__atomic_load_n(&cm->ready, __ATOMIC_ACQUIRE) == 0)
		sched_yield();
	assert_int_equal(cm->child_got, 5);
	assert_int_equal(in_flight(k, "K"), 3);
	assert_int_equal(in_flight(k, "M"), 2);
	/* While the holder lives, K has one call left here. */
	assert_int_equal(take(k, "K", &hk, 1), 1);
	assert_int_equal(kill(kid, SIGKILL), 0);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFSIGNALED(st));
	/* The acquire that would refuse finds the holder dead and takes
	 * its 3 back: this process gets all 4. */
	assert_int_equal(take(k, "K", &hk, 10), 3);
	assert_int_equal(in_flight(k, "K"), 4);
	/* M's are given back by resil_shm_reap (K's are gone already). */
	assert_int_equal(in_flight(k, "M"), 2);
	assert_int_equal(resil_shm_reap(shm), 2);
	assert_int_equal(in_flight(k, "M"), 0);
	assert_int_equal(resil_shm_reap(shm), 0);
	assert_int_equal(take(k, "M", &hm, 10), 4);
	assert_int_equal(give(k, &hk) + give(k, &hm), 0);
	assert_int_equal(in_flight(k, "K"), 0);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- a slot with calls in flight is never reclaimed ---- */

#define SMALL 8
#define CHURN 2000

static void
churner(void)
{
	resil_keyed_config c = fam_cfg(SMALL);
	resil_shm *shm = open_region();
	resil_keyed *k;
	char key[32];
	held h;
	int i;

	memset(&h, 0, sizeof(h));
	if (shm == NULL ||
	    resil_shm_keyed(shm, "ch", &c, &k, NULL) != RESIL_OK)
		_exit(3);
	for (i = 0; i < CHURN; i++) {
		snprintf(key, sizeof(key), "host-%d", i);
		if (take(k, key, &h, 1) != 1 || give(k, &h) != 0)
			cm->child_bad++;
	}
	/* The busy key kept its calls (and its limit). */
	if (in_flight(k, "busy") != 2 || take(k, "busy", &h, 10) != 2 ||
	    give(k, &h) != 0)
		cm->child_bad++;
	resil_keyed_free(k);
	resil_shm_close(shm);
}

static void
test_keyed_shm_bulkhead_churn_keeps_in_flight(void **state)
{
	resil_keyed_config c = fam_cfg(SMALL);
	resil_shm_keyed_info before, after;
	resil_shm *shm;
	resil_keyed *k;
	char key[32];
	held h, h2;
	int i;

	(void)state;
	setup_common();
	memset(&h, 0, sizeof(h));
	memset(&h2, 0, sizeof(h2));
	shm = open_region();
	assert_non_null(shm);
	assert_int_equal(resil_shm_keyed(shm, "ch", &c, &k, NULL), RESIL_OK);
	assert_int_equal(take(k, "busy", &h, 2), 2);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "ch", &before, NULL), RESIL_OK);
	shm_fork_wait_ok(shm_fork_child(churner));
	assert_int_equal(cm->child_bad, 0);
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "ch", &after, NULL), RESIL_OK);
	assert_int_equal(after.max_keys, SMALL);
	assert_int_equal(after.table_bytes, before.table_bytes);
	assert_true(after.used <= SMALL);
	/* Every churned key had a slot: reclaimed from idle keys only. */
	assert_int_equal(after.claimed - before.claimed, CHURN);
	assert_true(after.reclaimed >= CHURN - SMALL);
	assert_int_equal(in_flight(k, "busy"), 2);
	/* The same churn in this process, whose local family (SMALL keys)
	 * must keep "busy" (its calls in flight) and so its slot. */
	for (i = 0; i < CHURN; i++) {
		snprintf(key, sizeof(key), "local-%d", i);
		assert_int_equal(take(k, key, &h2, 1), 1);
		assert_int_equal(give(k, &h2), 0);
	}
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "ch", &after, NULL), RESIL_OK);
	assert_int_equal(after.claimed - before.claimed, 2 * CHURN);
	assert_true(after.used <= SMALL);
	assert_int_equal(in_flight(k, "busy"), 2);
	assert_int_equal(take(k, "busy", &h2, 10), 2);
	assert_int_equal(give(k, &h2) + give(k, &h), 0);
	assert_int_equal(in_flight(k, "busy"), 0);
	resil_keyed_free(k);
	resil_shm_close(shm);
	teardown_common();
}

/* ---- the pipeline: bulkhead.key.shared=shm:REGION/NAME ---- */

/* Each call (on pipelines a and b by turns) makes one more call on the
 * other pipeline with the same key while it holds its slot. */
typedef struct nest {
	pfx *pp[2];
	int depth;
	resil_err inner[8];
} nest;

static int
nfn(void *ctx, const resil_args *args, resil_value *out)
{
	nest *n = ctx;
	resil_result r;
	int d = n->depth++;

	(void)out;
	if (d < 7) {
		n->inner[d + 1] = resil_pipeline_call(
		    n->pp[(d + 1) % 2]->p, args, nfn, n, &r);
		resil_result_free(&r);
	}
	return 0;
}

static resil_err
nest_call(nest *n, const char *key)
{
	resil_args a = { "get", key, strlen(key) };
	resil_result r;
	resil_err err;
	int i;

	n->depth = 0;
	for (i = 0; i < 8; i++)
		n->inner[i] = RESIL_E_INVAL;
	err = resil_pipeline_call(n->pp[0]->p, &a, nfn, n, &r);
	resil_result_free(&r);
	return err;
}

static void
test_keyed_shm_bulkhead_pipeline_text(void **state)
{
	char text[512], bad[512];
	resil_shm_keyed_info info;
	resil_shm *shm;
	resil_diag d;
	pfx a, b;
	nest n;

	(void)state;
	setup_common();
	snprintf(text, sizeof(text),
	    "service=S\n"
	    "bulkhead.key=args\n"
	    "bulkhead.key.shared=shm:%s/pb\n"
	    "bulkhead.key.max_keys=32\n"
	    "bulkhead.max_concurrent=2\n"
	    "bulkhead.key.override.vip=3\n",
	    region);
	/* Two pipelines, each with its own handle on the region. */
	d.msg[0] = '\0';
	assert_int_equal(pipe_start(&a, text, &d), RESIL_OK);
	assert_int_equal(pipe_start(&b, text, &d), RESIL_OK);
	n.pp[0] = &a;
	n.pp[1] = &b;
	/* x: a's call holds one, b's nested one the other, a's third is
	 * refused (the two pipelines count together). */
	assert_int_equal(nest_call(&n, "x"), RESIL_OK);
	assert_int_equal(n.inner[1], RESIL_OK);
	assert_int_equal(n.inner[2], RESIL_E_LIMITED);
	assert_int_equal(n.depth, 2);
	/* vip: 3. */
	assert_int_equal(nest_call(&n, "vip"), RESIL_OK);
	assert_int_equal(n.inner[2], RESIL_OK);
	assert_int_equal(n.inner[3], RESIL_E_LIMITED);
	assert_non_null(shm = open_region());
	assert_int_equal(resil_shm_keyed_stat(shm, "pb", &info, &d), RESIL_OK);
	assert_int_equal(info.max_keys, 32);
	assert_int_equal(info.used, 2); /* x, vip */
	resil_shm_close(shm);
	pipe_end(&b);
	pipe_end(&a);
	/* The refusals of the text. */
	assert_int_equal(
	    pipe_start(&a, "service=S\nbulkhead.key.shared=shm:r/pb\n", &d),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(d.msg, "bulkhead.key.shared: needs bulkhead.key"));
	snprintf(bad, sizeof(bad),
	    "service=S\nbulkhead.key=args\nbulkhead.key.max_key_len=100\n"
	    "bulkhead.key.shared=shm:%s/pb\n",
	    region);
	assert_int_equal(pipe_start(&a, bad, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "bulkhead.key.shared: a shared family "
	    "keeps keys of up to 64 bytes"));
	snprintf(bad, sizeof(bad),
	    "service=S\nbulkhead.key=args\nbulkhead.adaptive=true\n"
	    "bulkhead.key.shared=shm:%s/pb2\n",
	    region);
	assert_int_equal(pipe_start(&a, bad, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "bulkhead.key.shared: not with bulkhead.adaptive (a shared "
	    "family's bulkheads have a fixed limit, counted exactly)"));
	snprintf(bad, sizeof(bad),
	    "service=S\nthrottle.key=args\nthrottle.key.shared=shm:%s/pt\n",
	    region);
	assert_int_equal(pipe_start(&a, bad, &d), RESIL_E_INVAL);
	/* No such key in the text (there is no shared throttle). */
	assert_non_null(strstr(d.msg, "throttle.key.shared: unknown key"));
	teardown_common();
}

/* ---- bulkhead.key=host with the family in a region ---- */

/* A pipeline with one endpoint (e0:1) behind a selector. */
typedef struct hp {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
} hp;

static void
hp_start(hp *x, const char *text)
{
	resil_pipeline_config cfg;
	resil_selector_config sc;
	resil_directory_config dc;
	resil_endpoint_spec spec;
	resil_diag diag;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000);
	if (resil_config_parse_string(&x->conf, text, "k.conf", NULL, &diag) !=
	    RESIL_OK)
		fail_msg("parse: %s", diag.msg);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&x->mc);
	(void)resil_config_directory(x->conf, &dc);
	(void)resil_config_selector(x->conf, &sc);
	assert_int_equal(resil_directory_new(&x->d, &dc, &diag), RESIL_OK);
	assert_int_equal(
	    resil_selector_new(&x->sel, x->d, &sc, &diag), RESIL_OK);
	spec = resil_endpoint_spec_default("e0:1");
	assert_int_equal(
	    resil_directory_push(x->d, &spec, 1, &diag), RESIL_OK);
	cfg = *resil_config_pipeline(x->conf);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	cfg.selector = x->sel;
	if (resil_pipeline_new(&x->p, &cfg, &diag) != RESIL_OK)
		fail_msg("pipeline: %s", diag.msg);
}

static void
hp_end(hp *x)
{
	resil_pipeline_free(x->p);
	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	resil_config_free(x->conf);
}

/* Each attempt (on a's and b's pipelines by turns) makes one more call
 * on the other while it holds its endpoint's slot. */
typedef struct hnest {
	hp *pp[2];
	int depth;
	resil_err inner[4];
} hnest;

static int
hfn(void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	hnest *n = ctx;
	resil_result r;
	int d = n->depth++;

	(void)ep;
	(void)out;
	if (d < 3) {
		n->inner[d + 1] = resil_pipeline_invoke(
		    n->pp[(d + 1) % 2]->p, NULL, args, hfn, n, &r);
		resil_result_free(&r);
	}
	return 0;
}

static void
test_keyed_shm_bulkhead_host(void **state)
{
	char text[512];
	resil_args a = { "get", NULL, 0 };
	resil_shm_keyed_info info;
	resil_result r;
	resil_shm *shm;
	hnest n;
	hp x, y;

	(void)state;
	setup_common();
	snprintf(text, sizeof(text),
	    "service=S\n"
	    "retries=0\n"
	    "bulkhead.key=host\n"
	    "bulkhead.key.shared=shm:%s/ph\n"
	    "bulkhead.max_concurrent=2\n",
	    region);
	hp_start(&x, text);
	hp_start(&y, text);
	memset(&n, 0, sizeof(n));
	n.pp[0] = &x;
	n.pp[1] = &y;
	/* x's attempt on e0:1 holds one of its 2, y's nested attempt the
	 * other, x's third is refused: the two pipelines count together. */
	assert_int_equal(
	    resil_pipeline_invoke(x.p, NULL, &a, hfn, &n, &r), RESIL_OK);
	resil_result_free(&r);
	assert_int_equal(n.inner[1], RESIL_OK);
	assert_int_equal(n.inner[2], RESIL_E_LIMITED);
	assert_int_equal(n.depth, 2);
	assert_non_null(shm = open_region());
	assert_int_equal(
	    resil_shm_keyed_stat(shm, "ph", &info, NULL), RESIL_OK);
	assert_int_equal(info.used, 1); /* e0:1 */
	resil_shm_close(shm);
	hp_end(&y);
	hp_end(&x);
	teardown_common();
}

/* ---- refusals ---- */

static void
test_keyed_shm_bulkhead_refusals(void **state)
{
	resil_keyed_config c = fam_cfg(8), c2;
	resil_shm *shm, *other;
	resil_keyed *k, *k2;
	resil_keyed_permit p;
	resil_diag d;

	(void)state;
	setup_common();
	shm = open_region();
	assert_non_null(shm);
	assert_non_null(other = open_region());
	c2 = c;
	c2.bulkhead.batch = 2;
	assert_int_equal(
	    resil_shm_keyed(shm, "bb", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.batch: 2 must be 0"));
	c2 = c;
	c2.bulkhead.adaptive = RESIL_BULKHEAD_GRADIENT;
	assert_int_equal(
	    resil_shm_keyed(shm, "bb", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.adaptive"));
	c2 = c;
	c2.bulkhead.max_wait_ns = 5;
	assert_int_equal(
	    resil_shm_keyed(shm, "bb", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "neither wait nor reserve"));
	c2 = c;
	c2.bulkhead.max_concurrent = 0;
	assert_int_equal(
	    resil_shm_keyed(shm, "bb", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "bulkhead.max_concurrent"));
	assert_int_equal(resil_shm_keyed(shm, "fam", &c, &k, &d), RESIL_OK);
	assert_int_equal(
	    resil_keyed_bulkhead_try_acquire(k, "K", 1, &p), RESIL_OK);
	/* Another process's view with another limit: refused at the key
	 * (its slot says 4), and at the overflow when it opens. */
	c2 = c;
	c2.n_overrides = 0;
	c2.overrides = NULL;
	assert_int_equal(
	    resil_shm_keyed(other, "fam", &c2, &k2, &d), RESIL_OK);
	assert_int_equal(
	    resil_keyed_bulkhead_try_acquire(k2, "vip", 3, &p), RESIL_E_INVAL);
	resil_keyed_free(k2);
	c2 = c;
	c2.bulkhead.max_concurrent = 5;
	assert_int_equal(
	    resil_shm_keyed(other, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "the overflow's bulkhead has max_concurrent 4; this process "
	    "gives it 5"));
	/* A breaker family under a bulkhead family's name, another size. */
	c2 = c;
	c2.kind = RESIL_KEYED_BREAKER;
	c2.n_overrides = 0;
	assert_int_equal(
	    resil_shm_keyed(other, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg,
	    "fam is a keyed bulkhead family, not a keyed breaker family"));
	c2 = c;
	c2.max_keys = 16;
	assert_int_equal(
	    resil_shm_keyed(other, "fam", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(
	    d.msg, "keyed bulkhead family fam has 8 keys; asked for 16 keys"));
	/* Throttle families stay refused. */
	c2 = c;
	c2.kind = RESIL_KEYED_THROTTLE;
	c2.n_overrides = 0;
	assert_int_equal(
	    resil_shm_keyed(shm, "th", &c2, &k2, &d), RESIL_E_INVAL);
	assert_non_null(strstr(d.msg, "there is no shared throttle"));
	assert_int_equal(resil_keyed_bulkhead_release(k, &p), RESIL_OK);
	resil_keyed_free(k);
	resil_shm_close(other);
	resil_shm_close(shm);
	teardown_common();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keyed_shm_bulkhead_refusals),
		cmocka_unit_test(test_keyed_shm_bulkhead_shared_limit),
		cmocka_unit_test(test_keyed_shm_bulkhead_sigkill),
		cmocka_unit_test(
		    test_keyed_shm_bulkhead_churn_keeps_in_flight),
		cmocka_unit_test(test_keyed_shm_bulkhead_pipeline_text),
		cmocka_unit_test(test_keyed_shm_bulkhead_host),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

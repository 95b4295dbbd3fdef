#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/balance.h>
#include <resil/directory.h>
#include <resil/selector.h>

#include "support/cluster_fx.h"
#include "support/fail_alloc.h"

static void
start_lb(fx *f, resil_lb_kind kind, const int32_t *w, size_t n)
{
	f->scfg.balance.kind = kind;
	assert_int_equal(fx_start(f), 0);
	assert_int_equal(fx_push_weights(f, w, n), RESIL_OK);
}

static void
test_balance_roundrobin_smooth_sequence_1_2_3(void **state)
{
	static const int32_t w[] = { 1, 2, 3 };
	static const char *const want[] = { "e2:1", "e1:1", "e0:1", "e2:1",
		"e1:1", "e2:1" };
	fx f;
	int round, i;

	(void)state;
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_ROUNDROBIN, w, 3);
	/* current += w; the largest wins (first on a tie); it gives back 6:
	 * C B A C B C, then the same again. */
	for (round = 0; round < 3; round++)
		for (i = 0; i < 6; i++)
			assert_string_equal(fx_call(&f, NULL), want[i]);
	assert_int_equal(f.rnd.calls, 0); /* round robin draws nothing */
	fx_end(&f);
}

static void
test_balance_roundrobin_removal_keeps_counters(void **state)
{
	static const int32_t w[] = { 1, 2, 3 };
	resil_endpoint_spec d;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_ROUNDROBIN, w, 3);
	/* After C, B: current = [2, -2, 0]. */
	assert_string_equal(fx_call(&f, NULL), "e2:1");
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	assert_int_equal(resil_directory_remove(f.d, "e0:1", NULL), RESIL_OK);
	d = resil_endpoint_spec_default("e3:1");
	d.weight = 3;
	assert_int_equal(resil_directory_add(f.d, &d, NULL), RESIL_OK);
	/* B -2, C 0 kept, D new at 0; weights 2, 3, 3, total 8:
	 * [0, 3, 3] -> C (first of the tie) -> [0, -5, 3];
	 * [2, -2, 6] -> D -> [2, -2, -2]; [4, 1, 1] -> B -> [-4, 1, 1]. */
	assert_string_equal(fx_call(&f, NULL), "e2:1");
	assert_string_equal(fx_call(&f, NULL), "e3:1");
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	fx_end(&f);
}

static void
test_balance_random_draw_mapping(void **state)
{
	static const int32_t w[] = { 1, 2, 3 };
	/* offset = floor(u * 6): 0 -> A; 1 -> B (cum 1 is not > 1);
	 * 2 -> B; 3 -> C; 5 -> C. */
	static const double u[] = { 0.0, 1.0 / 6 + 1e-9, 0.34, 0.5, 0.999999 };
	static const char *const want[] = { "e0:1", "e1:1", "e1:1", "e2:1",
		"e2:1" };
	fx f;
	size_t i;

	(void)state;
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_RANDOM, w, 3);
	scripted_set(&f.rnd, u, 5);
	for (i = 0; i < 5; i++)
		assert_string_equal(fx_call(&f, NULL), want[i]);
	assert_int_equal(f.rnd.calls, 5); /* one draw per pick */
	fx_end(&f);
}

static void
test_balance_random_zero_weight_equal_and_single(void **state)
{
	static const int32_t zero_first[] = { 0, 5 };
	static const int32_t all_zero[] = { 0, 0, 0, 0 };
	static const double u0[] = { 0.0, 0.5, 0.99 };
	static const double u1[] = { 0.0, 0.26, 0.5, 0.99 };
	fx f;
	size_t i;

	(void)state;
	/* Weight 0 is never picked while another has weight. */
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_RANDOM, zero_first, 2);
	scripted_set(&f.rnd, u0, 3);
	for (i = 0; i < 3; i++)
		assert_string_equal(fx_call(&f, NULL), "e1:1");
	fx_end(&f);

	/* All weights 0: uniform floor(u * n). */
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_RANDOM, all_zero, 4);
	scripted_set(&f.rnd, u1, 4);
	assert_string_equal(fx_call(&f, NULL), "e0:1");
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	assert_string_equal(fx_call(&f, NULL), "e2:1");
	assert_string_equal(fx_call(&f, NULL), "e3:1");
	fx_end(&f);

	/* One candidate: no draw. */
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_RANDOM, NULL, 1);
	assert_string_equal(fx_call(&f, NULL), "e0:1");
	assert_int_equal(f.rnd.calls, 0);
	fx_end(&f);
}

/* The weighted choice against a linear scan of DESIGN.md's rule, over
 * seeded weights (0 included) and draws. */
static void
test_balance_random_matches_reference_scan(void **state)
{
	resil_rng rng;
	int trial;

	(void)state;
	resil_rng_seed(&rng, 99);
	for (trial = 0; trial < 200; trial++) {
		int32_t w[40];
		size_t n = 1 + resil_rng_next(&rng) % 40, i, want;
		uint64_t total = 0, off, sum = 0;
		int same = 1;
		double u = resil_rng_uniform(&rng);
		char addr[16];
		fx f;

		for (i = 0; i < n; i++) {
			w[i] = (int32_t)(resil_rng_next(&rng) % 10);
			total += (uint64_t)w[i];
			same &= w[i] == w[0];
		}
		if (n == 1) {
			want = 0;
		} else if (total == 0 || same) {
			want = (size_t)(u * (double)n);
		} else {
			off = (uint64_t)(u * (double)total);
			for (want = 0; want < n; want++) {
				sum += (uint64_t)w[want];
				if (sum > off)
					break;
			}
		}
		fx_init(&f, 1000);
		start_lb(&f, RESIL_LB_RANDOM, w, n);
		scripted_set(&f.rnd, &u, 1);
		snprintf(addr, sizeof(addr), "e%zu:1", want);
		assert_string_equal(fx_call(&f, NULL), addr);
		fx_end(&f);
	}
}

static void
test_balance_random_distribution(void **state)
{
	static const int32_t w[] = { 1, 2, 3, 4 };
	unsigned counts[4] = { 0 };
	fx f;
	int i;

	(void)state;
	fx_init(&f, 1000);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 42);
	start_lb(&f, RESIL_LB_RANDOM, w, 4);
	for (i = 0; i < 100000; i++)
		counts[fx_call(&f, NULL)[1] - '0']++;
	/* Expected 10%, 20%, 30%, 40%; a seeded run, a loose bound. */
	for (i = 0; i < 4; i++) {
		double share = counts[i] / 100000.0;
		assert_true(share > (i + 1) / 10.0 - 0.01);
		assert_true(share < (i + 1) / 10.0 + 0.01);
	}
	fx_end(&f);
}

static void
test_balance_leastactive_ties_by_weighted_draw(void **state)
{
	static const int32_t w[] = { 1, 1, 2 };
	static const double u[] = { 0.5, 0.6 };
	resil_pick p1, p2, p3;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_LEASTACTIVE, w, 3);
	scripted_set(&f.rnd, u, 2);
	/* All idle: a three-way tie, total 4, floor(0.5 * 4) = 2: C. */
	assert_string_equal(fx_pick(&f, NULL, &p1), "e2:1");
	assert_int_equal(f.rnd.calls, 1);
	/* C busy: A and B tie with equal weights: floor(0.6 * 2) = 1: B. */
	assert_string_equal(fx_pick(&f, NULL, &p2), "e1:1");
	assert_int_equal(f.rnd.calls, 2);
	/* Only A is idle: no tie, no draw. */
	assert_string_equal(fx_pick(&f, NULL, &p3), "e0:1");
	assert_int_equal(f.rnd.calls, 2);
	assert_int_equal(
	    resil_selector_report(f.sel, &p1, RESIL_OUTCOME_SUCCESS),
	    RESIL_OK);
	/* A and B busy, C idle again: C, no draw. */
	assert_string_equal(fx_call(&f, NULL), "e2:1");
	assert_int_equal(f.rnd.calls, 2);
	resil_selector_report(f.sel, &p2, RESIL_OUTCOME_SUCCESS);
	resil_selector_report(f.sel, &p3, RESIL_OUTCOME_SUCCESS);
	/* A report twice is a misuse. */
	assert_int_equal(
	    resil_selector_report(f.sel, &p3, RESIL_OUTCOME_SUCCESS),
	    RESIL_E_MISUSE);
	fx_end(&f);
}

static void
test_balance_p2c_samples_two_distinct(void **state)
{
	/* n = 4: i = floor(0.5 * 4) = 2, j = floor(0.5 * 3) = 1 (< i). */
	static const double u[] = { 0.5, 0.5, 0.25, 0.4, 0.5, 0.5 };
	resil_pick held;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_P2C, NULL, 4);
	scripted_set(&f.rnd, u, 6);
	/* A tie (both idle) goes to i. */
	assert_string_equal(fx_pick(&f, NULL, &held), "e2:1");
	/* i = 1, j = floor(0.4 * 3) = 1 >= i gives 2, which is busy: i. */
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	/* i = 2 (busy), j = 1: the lower load wins. */
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	assert_int_equal(f.rnd.calls, 6);
	resil_selector_report(f.sel, &held, RESIL_OUTCOME_SUCCESS);
	fx_end(&f);

	/* Two candidates: no draw; the idle one. */
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_P2C, NULL, 2);
	assert_string_equal(fx_pick(&f, NULL, &held), "e0:1");
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	assert_int_equal(f.rnd.calls, 0);
	resil_selector_report(f.sel, &held, RESIL_OUTCOME_SUCCESS);
	fx_end(&f);
}

static void
test_balance_warmup_weights_at_uptimes(void **state)
{
	resil_endpoint_spec s;
	resil_candidate cand;
	fx f;

	(void)state;
	/* min(w, max(1, floor(uptime * w / warmup))). */
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 1000), 1);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 1005), 1);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 1060), 10);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 1300), 50);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 1599), 99);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 1600), 100);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 99999), 100);
	assert_int_equal(resil_warmup_weight(100, 1000, 600, 999), 1);
	assert_int_equal(resil_warmup_weight(0, 1000, 600, 1300), 0);
	assert_int_equal(resil_warmup_weight(7, 1000, 0, 1000), 7);
	/* Large values do not overflow: 10 min in ns, weight 2^31 - 1. */
	assert_int_equal(resil_warmup_weight(INT32_MAX, 0,
	                     600 * RESIL_NS_PER_SEC, 300 * RESIL_NS_PER_SEC),
	    INT32_MAX / 2);

	/* Through routing: the candidate's weight is the warmed one. */
	fx_init(&f, 1000);
	assert_int_equal(fx_start(&f), 0);
	s = resil_endpoint_spec_default("a:1");
	s.start_time = 1000;
	s.warmup = 600;
	assert_int_equal(resil_directory_push(f.d, &s, 1, NULL), RESIL_OK);
	resil_manual_clock_set(&f.mc, 1300);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_get(f.c, 0, &cand), RESIL_OK);
	assert_int_equal(cand.weight, 50);
	fx_end(&f);
}

static void
test_balance_warmup_shifts_random_choice(void **state)
{
	resil_endpoint_spec s[2];
	static const double u[] = { 0.5, 0.5 };
	fx f;

	(void)state;
	fx_init(&f, 0);
	assert_int_equal(fx_start(&f), 0);
	s[0] = resil_endpoint_spec_default("old:1");
	s[1] = resil_endpoint_spec_default("new:1");
	s[1].start_time = 0;
	s[1].warmup = 1000;
	assert_int_equal(resil_directory_push(f.d, s, 2, NULL), RESIL_OK);
	scripted_set(&f.rnd, u, 2);
	/* At uptime 100 the new one weighs 10: 0.5 * 110 = 55 < 100: old. */
	resil_manual_clock_set(&f.mc, 100);
	assert_string_equal(fx_call(&f, NULL), "old:1");
	/* Warm: equal weights, floor(0.5 * 2) = 1: new. */
	resil_manual_clock_set(&f.mc, 1000);
	assert_string_equal(fx_call(&f, NULL), "new:1");
	fx_end(&f);
}

#define KEYS 20000
#define NEPS 10

static void
test_balance_hash_only_leaving_keys_move(void **state)
{
	static int before[KEYS];
	resil_request req;
	const char *args[1];
	char key[32];
	unsigned moved = 0, on_leaver = 0, wrongly = 0, counts[NEPS] = { 0 };
	fx f;
	int i;

	(void)state;
	fx_init(&f, 1000);
	start_lb(&f, RESIL_LB_HASH, NULL, NEPS);
	memset(&req, 0, sizeof(req));
	req.method = "get";
	req.args = args;
	req.nargs = 1;
	args[0] = key;
	for (i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "user-%d", i);
		before[i] = fx_call(&f, &req)[1] - '0';
		counts[before[i]]++;
	}
	assert_int_equal(f.rnd.calls, 0); /* no draw */
	/* The same key, the same endpoint. */
	snprintf(key, sizeof(key), "user-%d", 7);
	assert_int_equal(fx_call(&f, &req)[1] - '0', before[7]);
	/* 160 virtual nodes each: every endpoint gets a fair share. */
	for (i = 0; i < NEPS; i++)
		assert_true(counts[i] > KEYS / NEPS / 2);

	assert_int_equal(resil_directory_remove(f.d, "e3:1", NULL), RESIL_OK);
	for (i = 0; i < KEYS; i++) {
		int now;
		snprintf(key, sizeof(key), "user-%d", i);
		now = fx_call(&f, &req)[1] - '0';
		on_leaver += before[i] == 3;
		if (now != before[i]) {
			moved++;
			wrongly += before[i] != 3;
		}
	}
	/* Exactly the leaver's keys moved, and nothing else. */
	assert_int_equal(wrongly, 0);
	assert_int_equal(moved, on_leaver);
	print_message("hash: %u of %d keys moved (%.2f%%) when 1 of %d "
	              "endpoints left; %u moved from the others\n",
	    moved, KEYS, 100.0 * moved / KEYS, NEPS, wrongly);
	fx_end(&f);
}

static void
test_balance_hash_argument_out_of_range(void **state)
{
	resil_request req;
	const char *args[1] = { "x" };
	resil_pick p;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.balance.hash_args[0] = 2;
	start_lb(&f, RESIL_LB_HASH, NULL, 3);
	memset(&req, 0, sizeof(req));
	req.method = "get";
	req.args = args;
	req.nargs = 1;
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, NULL), RESIL_OK);
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, &req, NULL, 0, &p, &f.diag),
	    RESIL_E_INVAL);
	assert_string_equal(f.diag.msg,
	    "loadbalance.hash.arguments: index 2 is out of range for method "
	    "get with 1 argument");
	fx_end(&f);
}

static void
test_balance_hash_rings_per_candidate_set(void **state)
{
	resil_endpoint_spec specs[6];
	static const char *const addrs[] = { "t0:1", "t1:1", "t2:1", "u0:1",
		"u1:1", "u2:1" };
	resil_request tagged, plain;
	const char *args[1] = { "key-1" };
	uint64_t after;
	fail_alloc fa;
	fx f;
	int i;

	(void)state;
	fx_init(&f, 1000);
	f.dcfg.alloc = fail_alloc_init(&fa, 0);
	f.scfg.alloc = f.dcfg.alloc;
	f.scfg.balance.kind = RESIL_LB_HASH;
	assert_int_equal(fx_start(&f), 0);
	for (i = 0; i < 6; i++) {
		specs[i] = resil_endpoint_spec_default(addrs[i]);
		specs[i].tag = i < 3 ? "a" : NULL;
	}
	assert_int_equal(resil_directory_push(f.d, specs, 6, NULL), RESIL_OK);
	memset(&tagged, 0, sizeof(tagged));
	tagged.method = "get";
	tagged.args = args;
	tagged.nargs = 1;
	tagged.tag = "a";
	plain = tagged;
	plain.tag = NULL;
	assert_int_equal(fx_call(&f, &tagged)[0], 't');
	assert_int_equal(fx_call(&f, &plain)[0], 'u');
	after = fa.allocs;
	/* Alternating sets reuse their rings: nothing is rebuilt. */
	for (i = 0; i < 100; i++) {
		assert_int_equal(fx_call(&f, i % 2 ? &plain : &tagged)[0],
		    i % 2 ? 'u' : 't');
	}
	assert_int_equal(fa.allocs, after);
	fx_end(&f);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
}

static void
test_balance_shortest_response(void **state)
{
	static const double u[] = { 0.9 };
	resil_pick p;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.balance.shortest_slide = 1000;
	start_lb(&f, RESIL_LB_SHORTEST, NULL, 3);
	/* Give A an average of 50 and B 20; C has no success: 0, preferred. */
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	/* Pick by exclusion to aim at each endpoint. */
	{
		resil_candidate cs[3];
		uint64_t ex[2];
		int k;
		for (k = 0; k < 3; k++)
			resil_candidates_get(f.c, (size_t)k, &cs[k]);
		ex[0] = cs[1].id;
		ex[1] = cs[2].id;
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, NULL, ex, 2, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, "e0:1");
		resil_selector_report_duration(
		    f.sel, &p, RESIL_OUTCOME_SUCCESS, 50);
		ex[0] = cs[0].id;
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, NULL, ex, 2, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, "e1:1");
		resil_selector_report_duration(
		    f.sel, &p, RESIL_OUTCOME_SUCCESS, 20);
		/* A failure is ignored by the estimate. */
		ex[1] = cs[1].id;
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, NULL, ex, 2, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, "e2:1");
		resil_selector_report_duration(
		    f.sel, &p, RESIL_OUTCOME_FAILURE, 5);
	}
	f.rnd.calls = 0;
	/* C: 0 (no success yet) wins without a draw. */
	assert_string_equal(fx_pick(&f, NULL, &p), "e2:1");
	assert_int_equal(f.rnd.calls, 0);
	/* C busy now still 0 * 2 = 0; report it a success of 100: 100. */
	resil_selector_report_duration(f.sel, &p, RESIL_OUTCOME_SUCCESS, 100);
	/* A 50, B 20, C 100: B. */
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	assert_int_equal(f.rnd.calls, 0);
	/* Past the slide period every window restarts: all 0, a tie of 3,
	 * floor(0.9 * 3) = 2. */
	resil_manual_clock_advance(&f.mc, 1001);
	scripted_set(&f.rnd, u, 1);
	assert_string_equal(fx_call(&f, NULL), "e2:1");
	assert_int_equal(f.rnd.calls, 1);
	fx_end(&f);
}

static void
test_balance_peakewma_cost(void **state)
{
	static const double u[] = { 0.0, 0.0, 0.0, 0.0 };
	resil_endpoint_state st;
	resil_pick p;
	uint64_t ex[1];
	resil_candidate c1;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.balance.ewma_tau = 1000;
	f.scfg.balance.ewma_default_rtt = 500;
	start_lb(&f, RESIL_LB_PEAKEWMA, NULL, 2);
	/* A observed at 100; B never: its cost is the default 500. */
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	resil_candidates_get(f.c, 1, &c1);
	ex[0] = c1.id;
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, NULL, ex, 1, &p, NULL), RESIL_OK);
	resil_selector_report_duration(f.sel, &p, RESIL_OUTCOME_SUCCESS, 100);
	scripted_set(&f.rnd, u, 4);
	assert_string_equal(fx_call(&f, NULL), "e0:1");
	/* fx_call reported a 0-tick call at the same time: the EWMA keeps
	 * the old cost (w = 1). It decays by e^-1 in tau. */
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.ewma_cost, 100);
	resil_manual_clock_advance(&f.mc, 1000);
	resil_selector_route(f.sel, NULL, f.c, NULL);
	ex[0] = c1.id;
	resil_selector_pick(f.sel, f.c, NULL, ex, 1, &p, NULL);
	/* A sample above the decayed cost (36.8) replaces it. */
	resil_selector_report_duration(f.sel, &p, RESIL_OUTCOME_SUCCESS, 900);
	assert_int_equal(
	    resil_directory_get_state(f.d, "e0:1", &st), RESIL_OK);
	assert_int_equal(st.ewma_cost, 900);
	/* Now A costs 900 > B's 500: B. */
	assert_string_equal(fx_call(&f, NULL), "e1:1");
	fx_end(&f);
}

/* Internal (lib/directory.c): e^-x without libm. */
double resil__exp_neg(double x);

static void
test_balance_exp_neg(void **state)
{
	static const double x[] = { 0.0, 0.001, 0.5, 1.0, 2.302585092994046,
		10.0, 50.0 };
	static const double want[] = { 1.0, 0.999000499833375,
		0.6065306597126334, 0.36787944117144233, 0.1,
		4.5399929762484854e-05, 1.9287498479639178e-22 };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(x) / sizeof(x[0]); i++) {
		double got = resil__exp_neg(x[i]);
		assert_true(got > want[i] * (1 - 1e-12));
		assert_true(got < want[i] * (1 + 1e-12));
	}
	assert_true(resil__exp_neg(800.0) == 0.0);
	assert_true(resil__exp_neg(-1.0) == 1.0);
}

/* --- issue 29: the balancers at scale ----------------------------------- */

#define BIG 200

typedef struct big {
	fx f;
	resil_rng rng;
	char addr[4 * BIG][40];
	int32_t w[4 * BIG];
	uint64_t warmup[4 * BIG];
	int live[4 * BIG];
	size_t next; /* the next address to add */
	/* The reference round robin: counters by id. */
	uint64_t ids[8 * BIG];
	int64_t cur[8 * BIG];
	size_t nids;
} big;

static int64_t *
ref_cur(big *b, uint64_t id)
{
	size_t i;

	for (i = 0; i < b->nids; i++)
		if (b->ids[i] == id)
			return &b->cur[i];
	assert_true(b->nids < 8 * BIG);
	b->ids[b->nids] = id;
	b->cur[b->nids] = 0; /* a new endpoint starts at 0 */
	return &b->cur[b->nids++];
}

static void
big_push(big *b)
{
	resil_endpoint_spec specs[4 * BIG];
	size_t i, n = 0;

	for (i = 0; i < b->next; i++)
		if (b->live[i]) {
			specs[n] = resil_endpoint_spec_default(b->addr[i]);
			specs[n].weight = b->w[i];
			specs[n].start_time = 0;
			specs[n].warmup = b->warmup[i];
			n++;
		}
	assert_int_equal(
	    resil_directory_push(b->f.d, specs, n, NULL), RESIL_OK);
}

static void
big_add(big *b, int32_t w, uint64_t warmup)
{
	assert_true(b->next < 4 * BIG);
	snprintf(b->addr[b->next], sizeof(b->addr[0]), "10.0.%zu.%zu:1",
	    b->next / 256, b->next % 256);
	b->w[b->next] = w;
	b->warmup[b->next] = warmup;
	b->live[b->next] = 1;
	b->next++;
}

/* One round-robin pick against the reference scan of the rule (DESIGN.md:
 * current += w for each candidate, the largest wins, first on a tie, and
 * gives back the total), over the routed view minus exclude. */
static void
rr_check_pick(big *b, const uint64_t *ex, size_t nex)
{
	resil_candidate cand[4 * BIG];
	size_t n, i, k, best = SIZE_MAX, m = 0;
	int64_t total = 0, bestv = 0;
	uint64_t wsum = 0;
	resil_pick p;

	assert_int_equal(
	    resil_selector_route(b->f.sel, NULL, b->f.c, NULL), RESIL_OK);
	n = resil_candidates_count(b->f.c);
	for (i = 0; i < n; i++) {
		int out = 0;
		assert_int_equal(
		    resil_candidates_get(b->f.c, i, &cand[m]), RESIL_OK);
		for (k = 0; k < nex; k++)
			out |= cand[m].id == ex[k];
		if (!out) {
			wsum += (uint64_t)cand[m].weight;
			m++;
		}
	}
	for (i = 0; i < m; i++) {
		int64_t w = wsum == 0 ? 1 : cand[i].weight;
		int64_t *c = ref_cur(b, cand[i].id);
		*c += w;
		total += w;
		if (best == SIZE_MAX || *c > bestv) {
			best = i;
			bestv = *c;
		}
	}
	*ref_cur(b, cand[best].id) -= total;
	assert_int_equal(
	    resil_selector_pick(b->f.sel, b->f.c, NULL, ex, nex, &p, NULL),
	    RESIL_OK);
	assert_string_equal(p.address, cand[best].address);
	resil_selector_report(b->f.sel, &p, RESIL_OUTCOME_SUCCESS);
}

/* mode 0: weights 1..5; 1: BIG distinct weights (more than the fast
 * state's groups: the scan); 2: 0..3 with zeros; 3: all 0; 4: 1..5 under
 * a warm-up that moves them while the test runs; 5: 1..5, and at steps
 * 1000 and 2000 three quarters leave, then many join (the counters kept
 * are far apart for the new total: a candidate that gives it back is not
 * always the last of its weight); 6: 1..3 with half the picks excluding
 * some (the same). */
static void
rr_run(int mode, size_t n, uint64_t seed)
{
	static big b;
	size_t i, step;

	memset(&b, 0, sizeof(b));
	fx_init(&b.f, 0);
	b.f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
	assert_int_equal(fx_start(&b.f), 0);
	resil_rng_seed(&b.rng, seed);
	for (i = 0; i < n; i++) {
		int32_t w = mode == 6 ? (int32_t)(1 + i % 3)
		    : mode == 0 || mode == 4 || mode == 5
		    ? (int32_t)(1 + i % 5)
		    : mode == 1 ? (int32_t)(1 + i)
		    : mode == 2 ? (int32_t)(i % 4)
		                : 0;
		big_add(&b, w, mode == 4 ? 1000 + 10 * i : 0);
	}
	big_push(&b);
	for (step = 0; step < 3000; step++) {
		uint64_t r = resil_rng_next(&b.rng) % 100, ex[3];
		size_t nex = 0;
		if (mode == 4)
			resil_manual_clock_advance(&b.f.mc, 1);
		if (mode == 5 && (step == 1000 || step == 2000)) {
			size_t k;
			for (k = 0; k < b.next; k++)
				if (k % 4 != 0)
					b.live[k] = 0;
			for (k = 0; k < n / 2; k++)
				big_add(&b, (int32_t)(1 + k % 5), 0);
			big_push(&b);
		}
		if (r < (mode == 6 ? 50u : 10u)) {
			/* A failover-like pick: 1..3 candidates excluded. */
			resil_candidate c;
			size_t cnt;
			assert_int_equal(
			    resil_selector_route(b.f.sel, NULL, b.f.c, NULL),
			    RESIL_OK);
			cnt = resil_candidates_count(b.f.c);
			nex = 1 + (size_t)(r % 3);
			for (i = 0; i < nex; i++) {
				resil_candidates_get(b.f.c,
				    (size_t)(resil_rng_next(&b.rng) % cnt),
				    &c);
				ex[i] = c.id;
			}
		} else if (r >= 50 && r < 52) {
			/* An update: one leaves, one joins (state carried by
			 * address for the others). */
			size_t k = (size_t)(resil_rng_next(&b.rng) % b.next);
			if (b.live[k])
				b.live[k] = 0;
			big_add(&b,
			    mode == 3 ? 0
			              : (int32_t)(resil_rng_next(&b.rng) % 5),
			    0);
			big_push(&b);
		}
		rr_check_pick(&b, ex, nex);
	}
	assert_int_equal(b.f.rnd.calls, 0);
	fx_end(&b.f);
}

static void
test_balance_roundrobin_fast_matches_scan(void **state)
{
	(void)state;
	rr_run(0, 200, 1);
	rr_run(0, 9, 2);
	rr_run(0, 40, 3);
	rr_run(1, 60, 4);
	rr_run(2, 100, 5);
	rr_run(3, 50, 6);
	rr_run(4, 120, 7);
	rr_run(5, 200, 8);
	rr_run(6, 20, 9);
	rr_run(6, 12, 10);
}

/* The weighted choice by u over weights w (DESIGN.md's rule). */
static size_t
ref_weighted(const int32_t *w, size_t n, double u)
{
	uint64_t total = 0, off, sum = 0;
	size_t i;
	int same = 1;

	for (i = 0; i < n; i++) {
		total += (uint64_t)w[i];
		same &= w[i] == w[0];
	}
	if (total == 0 || same)
		return (size_t)(u * (double)n);
	off = (uint64_t)(u * (double)total);
	for (i = 0; i < n; i++) {
		sum += (uint64_t)w[i];
		if (sum > off)
			return i;
	}
	return n - 1;
}

/* balance.h: u' = the top 53 bits of mix64(bits(u) ^ 0x9e3779b97f4a7c15). */
static double
second_draw(double u)
{
	uint64_t z;

	memcpy(&z, &u, sizeof(z));
	z ^= UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1p-53;
}

static void
start_big(fx *f, resil_lb_kind kind, int32_t *w, size_t n)
{
	resil_endpoint_spec specs[64];
	static char addr[64][32];
	size_t i;

	assert_true(n <= 64);
	f->scfg.balance.kind = kind;
	f->scfg.balance.shortest_slide = 0;
	assert_int_equal(fx_start(f), 0);
	for (i = 0; i < n; i++) {
		w[i] = (int32_t)(1 + (i * 7) % 5);
		snprintf(addr[i], sizeof(addr[i]), "e%zu:1", i);
		specs[i] = resil_endpoint_spec_default(addr[i]);
		specs[i].weight = w[i];
	}
	assert_int_equal(resil_directory_push(f->d, specs, n, NULL), RESIL_OK);
	assert_int_equal(
	    resil_selector_route(f->sel, NULL, f->c, NULL), RESIL_OK);
}

/*
 * Above RESIL_LB_SCAN_MAX candidates least-active samples two by the
 * weighted choice from one draw (u and u'), the fewer in flight wins, a tie
 * goes to the first: over idle endpoints it is the weighted choice by u
 * exactly; with busy ones, the rule picks the less busy of the two.
 */
static void
test_balance_leastactive_samples_above_scan_max(void **state)
{
	enum { N = RESIL_LB_SCAN_MAX + 24 };
	int32_t w[N];
	resil_pick held[N];
	size_t nheld = 0, t;
	resil_rng rng;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	start_big(&f, RESIL_LB_LEASTACTIVE, w, N);
	resil_rng_seed(&rng, 11);
	/* Idle: the weighted choice by u, one draw per pick. */
	for (t = 0; t < 200; t++) {
		double u = resil_rng_uniform(&rng);
		char want[16];
		scripted_set(&f.rnd, &u, 1);
		f.rnd.calls = 0;
		snprintf(want, sizeof(want), "e%zu:1", ref_weighted(w, N, u));
		assert_string_equal(fx_call(&f, NULL), want);
		assert_int_equal(f.rnd.calls, 1);
	}
	/* Make every third endpoint busy (1 to 3 in flight). */
	for (t = 0; t < N; t += 3) {
		size_t k;
		for (k = 0; k <= t % 3 + (t / 3) % 3; k++) {
			assert_int_equal(resil_selector_pick_at(f.sel, f.c, t,
			                     &held[nheld], NULL),
			    RESIL_OK);
			nheld++;
			if (nheld == N)
				break;
		}
		if (nheld == N)
			break;
	}
	for (t = 0; t < 500; t++) {
		double u = resil_rng_uniform(&rng);
		size_t a = ref_weighted(w, N, u),
		       b = ref_weighted(w, N, second_draw(u));
		resil_endpoint_state sa, sb;
		char na[16], nb[16];
		const char *want;
		snprintf(na, sizeof(na), "e%zu:1", a);
		snprintf(nb, sizeof(nb), "e%zu:1", b);
		assert_int_equal(
		    resil_directory_get_state(f.d, na, &sa), RESIL_OK);
		assert_int_equal(
		    resil_directory_get_state(f.d, nb, &sb), RESIL_OK);
		want = sb.active < sa.active ? nb : na;
		scripted_set(&f.rnd, &u, 1);
		assert_string_equal(fx_call(&f, NULL), want);
	}
	for (t = 0; t < nheld; t++)
		resil_selector_report(f.sel, &held[t], RESIL_OUTCOME_SUCCESS);
	fx_end(&f);
}

/* The sampled least-active keeps a busy endpoint's share at about its
 * weight share squared, and the idle ones by weight (a seeded run). */
static void
test_balance_leastactive_sampled_distribution(void **state)
{
	enum { N = 64 };
	int32_t w[N];
	unsigned counts[N] = { 0 };
	resil_pick held[4];
	uint64_t wsum = 0;
	size_t i;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 7);
	start_big(&f, RESIL_LB_LEASTACTIVE, w, N);
	for (i = 0; i < N; i++)
		wsum += (uint64_t)w[i];
	for (i = 0; i < 4; i++)
		assert_int_equal(
		    resil_selector_pick_at(f.sel, f.c, 5, &held[i], NULL),
		    RESIL_OK);
	for (i = 0; i < 100000; i++) {
		const char *a = fx_call(&f, NULL);
		counts[(size_t)atoi(a + 1)]++;
	}
	/* e5 is busy: picked only when both samples are e5. */
	{
		double p = (double)w[5] / (double)wsum;
		assert_true(counts[5] < 100000 * p * p * 2 + 20);
	}
	for (i = 0; i < N; i++) {
		double share, want;
		if (i == 5)
			continue;
		share = counts[i] / 100000.0;
		want = (double)w[i] / (double)(wsum - (uint64_t)w[5]);
		assert_true(share > want * 0.8);
		assert_true(share < want * 1.2);
	}
	for (i = 0; i < 4; i++)
		resil_selector_report(f.sel, &held[i], RESIL_OUTCOME_SUCCESS);
	fx_end(&f);
}

/* Shortest response above RESIL_LB_SCAN_MAX: the lower estimate of the two
 * samples; no success yet is 0 and preferred; a tie to the first. */
static void
test_balance_shortest_samples_above_scan_max(void **state)
{
	enum { N = RESIL_LB_SCAN_MAX + 8 };
	int32_t w[N];
	uint64_t est[N];
	resil_rng rng;
	size_t i, t;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	start_big(&f, RESIL_LB_SHORTEST, w, N);
	/* Every endpoint but the last four answers once, in 10 * (i + 1). */
	for (i = 0; i < N; i++) {
		resil_pick p;
		est[i] = i + 4 < N ? 10 * (i + 1) : 0;
		if (est[i] == 0)
			continue;
		assert_int_equal(
		    resil_selector_pick_at(f.sel, f.c, i, &p, NULL), RESIL_OK);
		assert_int_equal(resil_selector_report_duration(
		                     f.sel, &p, RESIL_OUTCOME_SUCCESS, est[i]),
		    RESIL_OK);
	}
	resil_rng_seed(&rng, 3);
	for (t = 0; t < 300; t++) {
		double u = resil_rng_uniform(&rng);
		size_t a = ref_weighted(w, N, u),
		       b = ref_weighted(w, N, second_draw(u));
		char want[16];
		snprintf(
		    want, sizeof(want), "e%zu:1", est[b] < est[a] ? b : a);
		scripted_set(&f.rnd, &u, 1);
		f.rnd.calls = 0;
		assert_int_equal(
		    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
		{
			resil_pick p;
			assert_int_equal(resil_selector_pick(f.sel, f.c, NULL,
			                     NULL, 0, &p, NULL),
			    RESIL_OK);
			assert_string_equal(p.address, want);
			/* A business error leaves the window as it was (and
			 * ejects nobody). */
			resil_selector_report_duration(
			    f.sel, &p, RESIL_OUTCOME_BUSINESS, 1);
		}
		assert_int_equal(f.rnd.calls, 1);
	}
	fx_end(&f);
}

/* P2C above RESIL_LB_SCAN_MAX candidates: one draw u, i = floor(u n),
 * j = floor(u' (n - 1)), j >= i gives j + 1; the fewer in flight wins, a
 * tie goes to i. */
static void
test_balance_p2c_one_draw_above_scan_max(void **state)
{
	enum { N = RESIL_LB_SCAN_MAX + 4 };
	int32_t w[N];
	resil_pick held[N];
	resil_rng rng;
	size_t t;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	start_big(&f, RESIL_LB_P2C, w, N);
	/* Even positions busy. */
	for (t = 0; t < N; t += 2)
		assert_int_equal(
		    resil_selector_pick_at(f.sel, f.c, t, &held[t], NULL),
		    RESIL_OK);
	resil_rng_seed(&rng, 5);
	for (t = 0; t < 300; t++) {
		double u = resil_rng_uniform(&rng);
		size_t i = (size_t)(u * N),
		       j = (size_t)(second_draw(u) * (N - 1));
		char want[16];
		if (j >= i)
			j++;
		/* i wins unless j has fewer in flight (j odd, i even). */
		snprintf(want, sizeof(want), "e%zu:1",
		    (j % 2 == 1 && i % 2 == 0) ? j : i);
		scripted_set(&f.rnd, &u, 1);
		f.rnd.calls = 0;
		assert_string_equal(fx_call(&f, NULL), want);
		assert_int_equal(f.rnd.calls, 1);
	}
	for (t = 0; t < N; t += 2)
		resil_selector_report(f.sel, &held[t], RESIL_OUTCOME_SUCCESS);
	fx_end(&f);
}

/* resil_balance_endpoint_get(): what each balancer compares, read back. */
static void
test_balance_endpoint_view(void **state)
{
	resil_balance_endpoint be, bb;
	resil_balance_config bad;
	resil_endpoint_spec spec;
	resil_pick p, held;
	uint64_t ex[1];
	resil_candidate c1;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.balance.ewma_tau = 1000;
	f.scfg.balance.ewma_default_rtt = 500;
	f.scfg.balance.shortest_slide = 2000;
	start_lb(&f, RESIL_LB_PEAKEWMA, NULL, 2);
	/* Never observed: the default RTT, load = 500 * (0 + 1). */
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &f.scfg.balance, "e0:1", &be),
	    RESIL_OK);
	assert_false(be.ewma_seen);
	assert_true(be.ewma_cost == 500.0);
	assert_true(be.ewma_load == 500.0);
	assert_int_equal(be.active, 0);
	assert_int_equal(be.weight, 100);
	assert_int_equal(be.sr_estimate, 0);
	/* e0 observed at 100, then one call held on it: load 100 * 2. */
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	resil_candidates_get(f.c, 1, &c1);
	ex[0] = c1.id;
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, NULL, ex, 1, &p, NULL), RESIL_OK);
	resil_selector_report_duration(f.sel, &p, RESIL_OUTCOME_SUCCESS, 100);
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, NULL, ex, 1, &held, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &f.scfg.balance, "e0:1", &be),
	    RESIL_OK);
	assert_true(be.ewma_seen);
	assert_true(be.ewma_cost == 100.0);
	assert_int_equal(be.active, 1);
	assert_true(be.ewma_load == 200.0);
	/* One tau later the cost has decayed by e^-1. */
	resil_manual_clock_advance(&f.mc, 1000);
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &f.scfg.balance, "e0:1", &be),
	    RESIL_OK);
	assert_true(be.ewma_cost > 36.78 && be.ewma_cost < 36.79);
	assert_true(be.ewma_load > 73.57 && be.ewma_load < 73.58);
	/* e1 (never observed) costs 500 > 73.6: PeakEWMA takes e0, as the
	 * reader says. */
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &f.scfg.balance, "e1:1", &bb),
	    RESIL_OK);
	assert_true(bb.ewma_load > be.ewma_load);
	assert_string_equal(fx_call(&f, NULL), "e0:1");
	resil_selector_report_duration(
	    f.sel, &held, RESIL_OUTCOME_SUCCESS, 40);
	/* The shortest-response window (fed only by a shortest balancer's
	 * picks: empty here) and its expiry. */
	assert_int_equal(be.sr_successes, 0);
	assert_false(be.sr_expired);
	/* Errors. */
	assert_int_equal(resil_balance_endpoint_get(f.d, NULL, "nope:1", &be),
	    RESIL_E_NOTFOUND);
	assert_int_equal(resil_balance_endpoint_get(NULL, NULL, "e0:1", &be),
	    RESIL_E_INVAL);
	assert_int_equal(resil_balance_endpoint_get(f.d, NULL, "e0:1", NULL),
	    RESIL_E_INVAL);
	resil_balance_config_init(&bad);
	bad.ewma_tau = 0;
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &bad, "e0:1", &be), RESIL_E_INVAL);
	fx_end(&f);

	/* Shortest response: the window, the estimate and its expiry; the
	 * weight after warm-up. */
	fx_init(&f, 1000);
	f.scfg.balance.kind = RESIL_LB_SHORTEST;
	f.scfg.balance.shortest_slide = 2000;
	assert_int_equal(fx_start(&f), 0);
	spec = resil_endpoint_spec_default("w0:1");
	spec.weight = 100;
	spec.start_time = 1000;
	spec.warmup = 4000;
	assert_int_equal(resil_directory_push(f.d, &spec, 1, NULL), RESIL_OK);
	resil_manual_clock_advance(&f.mc, 1000);
	assert_string_equal(fx_pick(&f, NULL, &p), "w0:1");
	resil_selector_report_duration(f.sel, &p, RESIL_OUTCOME_SUCCESS, 30);
	assert_int_equal(fx_pick(&f, NULL, &p)[0], 'w');
	resil_selector_report_duration(f.sel, &p, RESIL_OUTCOME_SUCCESS, 50);
	assert_int_equal(fx_pick(&f, NULL, &held)[0], 'w');
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &f.scfg.balance, "w0:1", &be),
	    RESIL_OK);
	assert_int_equal(be.weight, 25); /* 1000 of 4000 ticks: 100 / 4 */
	assert_int_equal(be.sr_successes, 2);
	assert_int_equal(be.sr_elapsed, 80);
	assert_false(be.sr_expired);
	assert_int_equal(be.sr_estimate, 40 * 2); /* one in flight */
	resil_manual_clock_advance(&f.mc, 2001 + 1000);
	assert_int_equal(
	    resil_balance_endpoint_get(f.d, &f.scfg.balance, "w0:1", &be),
	    RESIL_OK);
	assert_true(be.sr_expired);
	assert_int_equal(be.sr_estimate, 0);
	resil_selector_report_duration(f.sel, &held, RESIL_OUTCOME_SUCCESS, 1);
	fx_end(&f);
}

/* --- threads: the large-set paths while the list changes ---------------- */

#define TPICKERS 3
#define TROUNDS 3000
#define TPOOL 96

typedef struct tshared {
	resil_manual_clock mc;
	resil_rng rng;
	resil_random rnd;
	resil_directory *d;
	resil_selector *sel;
	int stop; /* atomic */
	uint64_t picks[TPICKERS], bad[TPICKERS];
} tshared;

typedef struct targ {
	tshared *s;
	int id;
} targ;

static const char *const tmethods[] = { "rr", "l", "s", "p", "w", "r" };

static void *
tpicker(void *p)
{
	targ *a = p;
	tshared *s = a->s;
	resil_candidates *c;
	resil_request req;
	int i;

	if (resil_candidates_new(&c, s->sel) != RESIL_OK)
		return NULL;
	memset(&req, 0, sizeof(req));
	for (i = 0;
	     i < TROUNDS || !__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST);
	     i++) {
		resil_pick pk;
		resil_candidate one;
		uint64_t ex[1];
		size_t nex = 0;
		resil_err err;

		req.method = tmethods[i % 6];
		if (resil_selector_route(s->sel, &req, c, NULL) != RESIL_OK)
			continue;
		if (i % 5 == 0 &&
		    resil_candidates_get(c,
		        (size_t)i % resil_candidates_count(c),
		        &one) == RESIL_OK) {
			ex[0] =
			    one.id; /* another set: round robin folds back */
			nex = 1;
		}
		err = resil_selector_pick(s->sel, c, &req, ex, nex, &pk, NULL);
		if (err == RESIL_E_UNAVAILABLE)
			continue; /* a set of one, excluded */
		if (err != RESIL_OK || strncmp(pk.address, "10.1.", 5) != 0) {
			s->bad[a->id]++;
			continue;
		}
		s->picks[a->id]++;
		resil_selector_report_duration(s->sel, &pk,
		    RESIL_OUTCOME_SUCCESS, (uint64_t)(1 + i % 17));
	}
	resil_candidates_free(c);
	return NULL;
}

static void
test_balance_threads_large_sets_while_pushing(void **state)
{
	static tshared s;
	static char addrs[TPOOL][32];
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_method_balance mb[6];
	resil_endpoint_spec specs[TPOOL];
	pthread_t th[TPICKERS];
	targ args[TPICKERS];
	uint64_t total = 0;
	int i, k;

	(void)state;
	memset(&s, 0, sizeof(s));
	resil_manual_clock_init(&s.mc, 1);
	resil_rng_seed(&s.rng, 29);
	s.rnd = resil_rng_hook(&s.rng);
	dc.clock = resil_manual_clock_hook(&s.mc);
	assert_int_equal(resil_directory_new(&s.d, &dc, NULL), RESIL_OK);
	memset(mb, 0, sizeof(mb));
	for (i = 0; i < 6; i++) {
		mb[i].method = tmethods[i];
		resil_balance_config_init(&mb[i].balance);
	}
	mb[0].balance.kind = RESIL_LB_ROUNDROBIN;
	mb[1].balance.kind = RESIL_LB_LEASTACTIVE;
	mb[2].balance.kind = RESIL_LB_SHORTEST;
	mb[3].balance.kind = RESIL_LB_P2C;
	mb[4].balance.kind = RESIL_LB_PEAKEWMA;
	mb[5].balance.kind = RESIL_LB_RANDOM;
	sc.methods = mb;
	sc.nmethods = 6;
	sc.random = &s.rnd;
	assert_int_equal(resil_selector_new(&s.sel, s.d, &sc, NULL), RESIL_OK);
	for (i = 0; i < TPOOL; i++) {
		snprintf(
		    addrs[i], sizeof(addrs[i]), "10.1.%d.%d:1", i / 50, i);
		specs[i] = resil_endpoint_spec_default(addrs[i]);
		specs[i].weight = 1 + i % 5;
	}
	assert_int_equal(resil_directory_push(s.d, specs, 64, NULL), RESIL_OK);
	for (i = 0; i < TPICKERS; i++) {
		args[i].s = &s;
		args[i].id = i;
		assert_int_equal(
		    pthread_create(&th[i], NULL, tpicker, &args[i]), 0);
	}
	/* Sliding lists of 17 to 64 endpoints (above the scans' sizes), the
	 * weights moving; the clock moves. */
	for (k = 0; k < 300; k++) {
		int from = k % 32, n = 17 + k % 48;
		specs[from].weight = 1 + k % 7;
		assert_int_equal(
		    resil_directory_push(s.d, specs + from, (size_t)n, NULL),
		    RESIL_OK);
		resil_manual_clock_advance(&s.mc, 1);
	}
	__atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < TPICKERS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(s.bad[i], 0);
		total += s.picks[i];
	}
	assert_true(total >= (uint64_t)TPICKERS * TROUNDS / 2);
	resil_selector_free(s.sel);
	resil_directory_free(s.d);
}

/* The large-set paths allocate nothing per pick: round robin's fast state
 * is sized to the snapshot, so another candidate set of it (an exclusion)
 * is rebuilt in place; the sampled balancers hold no state. And the
 * first pick's allocations, failed one by one, fail cleanly. */
static void
test_balance_large_sets_allocate_nothing(void **state)
{
	static const resil_lb_kind kinds[] = { RESIL_LB_ROUNDROBIN,
		RESIL_LB_LEASTACTIVE, RESIL_LB_SHORTEST, RESIL_LB_P2C };
	size_t k;
	uint64_t nth;

	(void)state;
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		fail_alloc fa;
		uint64_t after;
		resil_candidate c0;
		fx f;
		int i;

		fx_init(&f, 1000);
		f.rnd.seeded = 1;
		resil_rng_seed(&f.rnd.rng, 4);
		f.dcfg.alloc = fail_alloc_init(&fa, 0);
		f.scfg.alloc = f.dcfg.alloc;
		f.scfg.balance.kind = kinds[k];
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, NULL, 64), RESIL_OK);
		assert_string_not_equal(fx_call(&f, NULL), "");
		after = fa.allocs;
		for (i = 0; i < 500; i++) {
			resil_pick p;
			uint64_t ex[1];
			assert_int_equal(
			    resil_selector_route(f.sel, NULL, f.c, NULL),
			    RESIL_OK);
			resil_candidates_get(f.c, (size_t)(i % 64), &c0);
			ex[0] = c0.id;
			assert_int_equal(resil_selector_pick(f.sel, f.c, NULL,
			                     ex, (size_t)(i % 2), &p, NULL),
			    RESIL_OK);
			resil_selector_report(
			    f.sel, &p, RESIL_OUTCOME_SUCCESS);
		}
		assert_int_equal(fa.allocs, after);
		fx_end(&f);
		assert_int_equal(fail_alloc_live(&fa), 0);
	}
	/* Round robin's first pick over a new snapshot allocates its
	 * counters and fast state: each allocation refused in turn. */
	for (nth = 1; nth <= 12; nth++) {
		fail_alloc fa;
		resil_pick p;
		resil_err err;
		fx f;

		fx_init(&f, 1000);
		f.dcfg.alloc = fail_alloc_init(&fa, 0);
		f.scfg.alloc = f.dcfg.alloc;
		f.scfg.balance.kind = RESIL_LB_ROUNDROBIN;
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, NULL, 40), RESIL_OK);
		assert_int_equal(
		    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
		fail_alloc_arm(&fa, nth);
		err = resil_selector_pick(f.sel, f.c, NULL, NULL, 0, &p, NULL);
		assert_true(err == RESIL_OK || err == RESIL_E_NOMEM);
		if (err == RESIL_OK)
			resil_selector_report(
			    f.sel, &p, RESIL_OUTCOME_SUCCESS);
		fail_alloc_arm(&fa, 0);
		/* It recovers: the next pick works. */
		assert_string_not_equal(fx_call(&f, NULL), "");
		fx_end(&f);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
}

/* Above RESIL_LB_SCAN_MAX the weighted choice searches from a guess (the
 * running sums as if even); the answer is the rule's whatever the
 * weights: skewed, with runs of 0, growing. */
static void
test_balance_random_large_uneven_matches_reference(void **state)
{
	static const size_t sizes[] = { 17, 33, 64 };
	resil_rng rng;
	size_t si;
	int pattern;

	(void)state;
	resil_rng_seed(&rng, 123);
	for (si = 0; si < 3; si++)
		for (pattern = 0; pattern < 4; pattern++) {
			size_t n = sizes[si], i;
			int32_t w[64];
			int t;
			fx f;

			for (i = 0; i < n; i++)
				w[i] = pattern == 0
				    ? (i == n / 3 ? 1000000 : 1)
				    : pattern == 1 ? (i % 7 < 4 ? 0 : 3)
				    : pattern == 2
				    ? (int32_t)(i * i)
				    : (i == 0 ? 500000 : (int32_t)(i % 2));
			fx_init(&f, 1000);
			start_lb(&f, RESIL_LB_RANDOM, w, n);
			for (t = 0; t < 300; t++) {
				double u = t < 3
				    ? (t == 0          ? 0.0
				              : t == 1 ? 0x1.fffffffffffffp-1
				                       : 0.5)
				    : resil_rng_uniform(&rng);
				char want[16];
				snprintf(want, sizeof(want), "e%zu:1",
				    ref_weighted(w, n, u));
				scripted_set(&f.rnd, &u, 1);
				assert_string_equal(fx_call(&f, NULL), want);
			}
			fx_end(&f);
		}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_balance_roundrobin_smooth_sequence_1_2_3),
		cmocka_unit_test(
		    test_balance_roundrobin_removal_keeps_counters),
		cmocka_unit_test(test_balance_random_draw_mapping),
		cmocka_unit_test(
		    test_balance_random_zero_weight_equal_and_single),
		cmocka_unit_test(test_balance_random_matches_reference_scan),
		cmocka_unit_test(test_balance_random_distribution),
		cmocka_unit_test(
		    test_balance_leastactive_ties_by_weighted_draw),
		cmocka_unit_test(test_balance_p2c_samples_two_distinct),
		cmocka_unit_test(test_balance_warmup_weights_at_uptimes),
		cmocka_unit_test(test_balance_warmup_shifts_random_choice),
		cmocka_unit_test(test_balance_hash_only_leaving_keys_move),
		cmocka_unit_test(test_balance_hash_argument_out_of_range),
		cmocka_unit_test(test_balance_hash_rings_per_candidate_set),
		cmocka_unit_test(test_balance_shortest_response),
		cmocka_unit_test(test_balance_peakewma_cost),
		cmocka_unit_test(test_balance_exp_neg),
		cmocka_unit_test(test_balance_roundrobin_fast_matches_scan),
		cmocka_unit_test(
		    test_balance_leastactive_samples_above_scan_max),
		cmocka_unit_test(
		    test_balance_leastactive_sampled_distribution),
		cmocka_unit_test(test_balance_shortest_samples_above_scan_max),
		cmocka_unit_test(test_balance_p2c_one_draw_above_scan_max),
		cmocka_unit_test(test_balance_endpoint_view),
		cmocka_unit_test(
		    test_balance_threads_large_sets_while_pushing),
		cmocka_unit_test(test_balance_large_sets_allocate_nothing),
		cmocka_unit_test(
		    test_balance_random_large_uneven_matches_reference),
	};

	return cmocka_run_group_tests_name("balance", tests, NULL, NULL);
}

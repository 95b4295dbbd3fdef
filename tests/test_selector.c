#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/config.h>
#include <resil/selector.h>

#include "support/cluster_fx.h"
#include "support/fail_alloc.h"

static resil_err
set(resil_cluster_text *cc, const char *k, const char *v, resil_diag *d)
{
	return resil_cluster_text_set(cc, k, v, "svc.conf", 7, d);
}

static void
bad(const char *k, const char *v, resil_err want, const char *msg)
{
	resil_cluster_text *cc;
	resil_diag diag;

	assert_int_equal(resil_cluster_text_new(&cc, NULL), RESIL_OK);
	assert_int_equal(set(cc, k, v, &diag), want);
	assert_string_equal(diag.msg, msg);
	resil_cluster_text_free(cc);
}

static void
test_selector_config_keys(void **state)
{
	resil_cluster_text *cc;
	resil_selector_config sc;
	resil_directory_config dc = resil_directory_config_default();
	resil_diag diag;

	(void)state;
	assert_int_equal(resil_cluster_text_new(&cc, NULL), RESIL_OK);
	assert_int_equal(set(cc, "service", "com.foo.Stock", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "loadbalance", "LeastActive", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "loadbalance.hash.nodes", "40", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "getX.loadbalance", "consistenthash", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "getX.loadbalance.hash.arguments", "0, 2", &diag),
	    RESIL_OK);
	assert_int_equal(
	    set(cc, "getY.loadbalance.peakewma.tau", "5s", &diag), RESIL_OK);
	assert_int_equal(set(cc, "router.zone", "hz", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "router.zone.mode", "strict", &diag), RESIL_OK);
	assert_int_equal(set(cc, "router.tag.force", "yes", &diag), RESIL_OK);
	assert_int_equal(set(cc, "router.condition",
	                     "method = getX & zone != sh => zone = hz", &diag),
	    RESIL_OK);
	assert_int_equal(
	    set(cc, "router.condition", "=> tag != gray", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "router.condition.force", "true", &diag), RESIL_OK);
	assert_int_equal(set(cc, "panic.threshold", "30", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "outlier.consecutive_failures", "7", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "outlier.base_ejection", "10s", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "outlier.max_ejection", "100s", &diag), RESIL_OK);
	assert_int_equal(
	    set(cc, "outlier.max_ejection_pct", "25", &diag), RESIL_OK);
	assert_int_equal(resil_cluster_text_finish(cc, &diag), RESIL_OK);
	resil_cluster_text_selector(cc, &sc);
	assert_string_equal(sc.service, "com.foo.Stock");
	assert_int_equal(sc.balance.kind, RESIL_LB_LEASTACTIVE);
	assert_int_equal(sc.balance.hash_nodes, 40);
	assert_int_equal(sc.nmethods, 2);
	assert_string_equal(sc.methods[0].method, "getX");
	assert_int_equal(sc.methods[0].balance.kind, RESIL_LB_HASH);
	assert_int_equal(sc.methods[0].balance.hash_nodes, 40); /* inherited */
	assert_int_equal(sc.methods[0].balance.hash_nargs, 2);
	assert_int_equal(sc.methods[0].balance.hash_args[1], 2);
	assert_int_equal(sc.methods[1].balance.kind, RESIL_LB_LEASTACTIVE);
	assert_int_equal(sc.methods[1].balance.ewma_tau, 5 * RESIL_NS_PER_SEC);
	assert_string_equal(sc.local_zone, "hz");
	assert_int_equal(sc.zone_mode, RESIL_ZONE_STRICT);
	assert_true(sc.tag_force);
	assert_int_equal(sc.nconditions, 2);
	assert_int_equal(sc.panic_threshold_pct, 30);
	resil_cluster_text_directory(cc, &dc);
	assert_int_equal(dc.outlier.consecutive_failures, 7);
	assert_int_equal(dc.outlier.base_ejection, 10 * RESIL_NS_PER_SEC);
	assert_int_equal(dc.outlier.max_ejection_pct, 25);
	/* The result builds a working selector. */
	{
		resil_directory *d;
		resil_selector *sel;
		assert_int_equal(resil_directory_new(&d, &dc, NULL), RESIL_OK);
		assert_int_equal(
		    resil_selector_new(&sel, d, &sc, &diag), RESIL_OK);
		resil_selector_free(sel);
		resil_directory_free(d);
	}
	/* Cross-field: the maximum ejection below its base. */
	assert_int_equal(
	    set(cc, "outlier.max_ejection", "1s", &diag), RESIL_OK);
	assert_int_equal(resil_cluster_text_finish(cc, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "svc.conf:7: outlier.max_ejection: 1s is below "
	    "outlier.base_ejection (10s)");
	resil_cluster_text_free(cc);
	resil_cluster_text_free(NULL);
}

static void
test_selector_config_bad_values(void **state)
{
	(void)state;
	bad("loadbalance", "fastest", RESIL_E_INVAL,
	    "svc.conf:7: loadbalance: \"fastest\" is not one of random, "
	    "roundrobin, leastactive, p2c, peakewma, hash, shortest");
	bad("loadbalance.hash.nodes", "0", RESIL_E_INVAL,
	    "svc.conf:7: loadbalance.hash.nodes: 0 is out of range 1..10000");
	bad("loadbalance.hash.nodes", "x", RESIL_E_INVAL,
	    "svc.conf:7: loadbalance.hash.nodes: \"x\" is not an unsigned "
	    "integer");
	bad("getX.loadbalance.hash.arguments", "0,,1", RESIL_E_INVAL,
	    "svc.conf:7: getX.loadbalance.hash.arguments: \"0,,1\" at column "
	    "3: "
	    "expected an argument index");
	bad("getX.loadbalance.hash.arguments", "0,a", RESIL_E_INVAL,
	    "svc.conf:7: getX.loadbalance.hash.arguments: \"0,a\" at column "
	    "3: "
	    "\"a\" is not an argument index");
	bad("getX.loadbalance.hash.arguments", "256", RESIL_E_INVAL,
	    "svc.conf:7: getX.loadbalance.hash.arguments: index 256 is out of "
	    "range 0..255");
	bad("get-X.loadbalance", "random", RESIL_E_INVAL,
	    "svc.conf:7: get-X.loadbalance: \"get-X\" is not a method name");
	bad("getX.loadbalance.bogus", "1", RESIL_E_NOTFOUND,
	    "svc.conf:7: getX.loadbalance.bogus: unknown key");
	bad("router.zone", "h z", RESIL_E_INVAL,
	    "svc.conf:7: router.zone: \"h z\" is not a zone name (letters, "
	    "digits, '_', '-', '.')");
	bad("router.zone.mode", "nearest", RESIL_E_INVAL,
	    "svc.conf:7: router.zone.mode: \"nearest\" is not one of off, "
	    "prefer, strict, proportional");
	bad("router.zone.consumers", "hz:1,sh", RESIL_E_INVAL,
	    "svc.conf:7: router.zone.consumers: \"hz:1,sh\" at column 6: "
	    "expected zone:count");
	bad("router.tag.force", "maybe", RESIL_E_INVAL,
	    "svc.conf:7: router.tag.force: \"maybe\" is not a boolean");
	bad("router.condition", "method = => zone = hz", RESIL_E_INVAL,
	    "svc.conf:7: router.condition: condition \"method = => zone = "
	    "hz\" "
	    "at column 10: expected a value after '='");
	bad("panic.threshold", "101", RESIL_E_INVAL,
	    "svc.conf:7: panic.threshold: 101 is out of range 0..100");
	bad("outlier.max_ejection_pct", "150", RESIL_E_INVAL,
	    "svc.conf:7: outlier.max_ejection_pct: 150 is out of range "
	    "0..100");
	bad("outlier.base_ejection", "10 s", RESIL_E_INVAL,
	    "svc.conf:7: outlier.base_ejection: \"10 s\": write the unit "
	    "next to the number (10s)");
	bad("outlier.base_ejection", "0", RESIL_E_INVAL,
	    "svc.conf:7: outlier.base_ejection: 0 is below the minimum of "
	    "0.000001ms (1ns)");
	bad("outlier.interval", "99999999999999999999s", RESIL_E_INVAL,
	    "svc.conf:7: outlier.interval: 99999999999999999999s is out of "
	    "range 0s..18446744073.709551615s");
	bad("outlier.consecutive", "3", RESIL_E_NOTFOUND,
	    "svc.conf:7: outlier.consecutive: unknown key");
	bad("retry.max_attempts", "3", RESIL_E_NOTFOUND,
	    "svc.conf:7: retry.max_attempts: unknown key");
}

static void
test_selector_pick_allocates_nothing(void **state)
{
	static const resil_lb_kind kinds[] = { RESIL_LB_RANDOM,
		RESIL_LB_ROUNDROBIN, RESIL_LB_LEASTACTIVE, RESIL_LB_P2C,
		RESIL_LB_PEAKEWMA, RESIL_LB_HASH, RESIL_LB_SHORTEST };
	resil_request req;
	const char *args[1] = { "key" };
	size_t k;

	(void)state;
	memset(&req, 0, sizeof(req));
	req.method = "get";
	req.args = args;
	req.nargs = 1;
	for (k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		fail_alloc fa;
		uint64_t after_setup;
		fx f;
		int i;

		fx_init(&f, 1000);
		f.rnd.seeded = 1;
		resil_rng_seed(&f.rnd.rng, 3);
		f.dcfg.alloc = fail_alloc_init(&fa, 0);
		f.scfg.alloc = f.dcfg.alloc;
		f.scfg.balance.kind = kinds[k];
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, NULL, 64), RESIL_OK);
		/* The first call of a method sets up its balancer, the
		 * candidate set grows to the list, a ring is built. */
		assert_string_not_equal(fx_call(&f, &req), "");
		after_setup = fa.allocs;
		for (i = 0; i < 1000; i++) {
			resil_pick p;
			assert_string_not_equal(fx_pick(&f, &req, &p), "");
			resil_manual_clock_advance(&f.mc, 1);
			assert_int_equal(
			    resil_selector_report(f.sel, &p,
			        i % 5 == 0 ? RESIL_OUTCOME_FAILURE
			                   : RESIL_OUTCOME_SUCCESS),
			    RESIL_OK);
		}
		assert_int_equal(fa.allocs, after_setup);
		fx_end(&f);
		assert_int_equal(fail_alloc_live(&fa), 0);
		assert_false(fa.size_mismatch);
	}
}

static void
test_selector_exclusion(void **state)
{
	resil_pick p;
	uint64_t ex[3];
	resil_candidate c;
	fx f;
	int i;

	(void)state;
	fx_init(&f, 1000);
	f.rnd.seeded = 1;
	resil_rng_seed(&f.rnd.rng, 5);
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 3), RESIL_OK);
	assert_int_equal(
	    resil_selector_route(f.sel, NULL, f.c, NULL), RESIL_OK);
	for (i = 0; i < 3; i++) {
		resil_candidates_get(f.c, (size_t)i, &c);
		ex[i] = c.id;
	}
	/* Excluding two: always the third. */
	for (i = 0; i < 20; i++) {
		assert_int_equal(
		    resil_selector_pick(f.sel, f.c, NULL, ex, 2, &p, NULL),
		    RESIL_OK);
		assert_string_equal(p.address, "e2:1");
		resil_selector_release(f.sel, &p);
	}
	/* Excluding all. */
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, NULL, ex, 3, &p, &f.diag),
	    RESIL_E_UNAVAILABLE);
	assert_string_equal(f.diag.msg, "all 3 candidates excluded");
	assert_int_equal(resil_candidates_get(f.c, 3, &c), RESIL_E_INVAL);
	assert_int_equal(
	    resil_selector_pick(f.sel, f.c, NULL, NULL, 2, &p, NULL),
	    RESIL_E_INVAL);
	fx_end(&f);
}

static void
test_selector_out_of_memory(void **state)
{
	static const resil_lb_kind kinds[] = { RESIL_LB_HASH,
		RESIL_LB_ROUNDROBIN };
	static const char *const names[] = { "hz", "sh" };
	static const uint32_t cons[] = { 1, 1 };
	resil_method_balance mb;
	resil_request req;
	const char *args[1] = { "k" };
	size_t k;

	(void)state;
	memset(&req, 0, sizeof(req));
	req.method = "get";
	req.args = args;
	req.nargs = 1;
	for (k = 0; k < 2; k++) {
		uint64_t n;
		for (n = 1; n < 100; n++) {
			fail_alloc fa;
			resil_pick p;
			resil_err err;
			fx f;
			fx_init(&f, 1000);
			f.scfg.alloc = fail_alloc_init(&fa, n);
			f.scfg.balance.kind = kinds[k];
			f.scfg.service = "svc";
			f.scfg.local_zone = "hz";
			f.scfg.zone_names = names;
			f.scfg.zone_consumers = cons;
			f.scfg.nzones = 2;
			mb.method = "get";
			resil_balance_config_init(&mb.balance);
			mb.balance.kind = kinds[k];
			f.scfg.methods = &mb;
			f.scfg.nmethods = 1;
			err = fx_start(&f);
			if (err == 0) {
				assert_int_equal(
				    fx_push_weights(&f, NULL, 40), RESIL_OK);
				err = resil_selector_route(
				    f.sel, &req, f.c, NULL);
				if (err == RESIL_OK)
					err = resil_selector_pick(f.sel, f.c,
					    &req, NULL, 0, &p, NULL);
				if (err == RESIL_OK)
					resil_selector_report(
					    f.sel, &p, RESIL_OUTCOME_SUCCESS);
				else
					assert_int_equal(err, RESIL_E_NOMEM);
			}
			fx_end(&f);
			assert_int_equal(fail_alloc_live(&fa), 0);
			assert_false(fa.size_mismatch);
			if (fa.failures == 0)
				break;
		}
		assert_true(n < 100);
	}
}

/* A selector built from text (resil_config_selector, then new), with no
 * random source given: n calls over three endpoints, counted per
 * endpoint into hits[3]; the sequence of picks into seq (n of them) when
 * not NULL. */
static void
text_run(const char *text, size_t n, size_t hits[3], unsigned char *seq)
{
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory_config dc;
	resil_selector_config sc;
	resil_directory *d;
	resil_selector *sel;
	resil_candidates *c;
	resil_endpoint_spec specs[3];
	const char *addr[3] = { "e0:1", "e1:1", "e2:1" };
	resil_diag diag;
	size_t i, k;

	resil_manual_clock_init(&mc, 1000);
	assert_int_equal(
	    resil_config_parse_string(&conf, text, "svc.conf", NULL, &diag),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&mc);
	resil_config_directory(conf, &dc);
	assert_int_equal(resil_directory_new(&d, &dc, &diag), RESIL_OK);
	(void)resil_config_selector(conf, &sc); /* 0 without selector keys */
	assert_null(sc.random);
	assert_int_equal(resil_selector_new(&sel, d, &sc, &diag), RESIL_OK);
	assert_int_equal(resil_candidates_new(&c, sel), RESIL_OK);
	for (i = 0; i < 3; i++)
		specs[i] = resil_endpoint_spec_default(addr[i]);
	assert_int_equal(resil_directory_push(d, specs, 3, &diag), RESIL_OK);
	memset(hits, 0, 3 * sizeof(hits[0]));
	for (i = 0; i < n; i++) {
		resil_pick p;
		assert_int_equal(
		    resil_selector_route(sel, NULL, c, &diag), RESIL_OK);
		assert_int_equal(
		    resil_selector_pick(sel, c, NULL, NULL, 0, &p, &diag),
		    RESIL_OK);
		for (k = 0; k < 3; k++)
			if (strcmp(p.address, addr[k]) == 0)
				break;
		assert_true(k < 3);
		hits[k]++;
		if (seq != NULL)
			seq[i] = (unsigned char)k;
		resil_manual_clock_advance(&mc, RESIL_NS_PER_MS);
		assert_int_equal(
		    resil_selector_report(sel, &p, RESIL_OUTCOME_SUCCESS),
		    RESIL_OK);
	}
	resil_candidates_free(c);
	resil_selector_free(sel);
	resil_directory_free(d);
	resil_config_free(conf);
}

/* Issue 23.2: with no random source every draw was 0, so random (the
 * default), p2c, leastactive and peakewma sent every call to endpoint 0.
 * Each balancer that draws now spreads 3000 calls over three endpoints,
 * each getting more than 20%. */
static void
test_selector_text_default_random_spreads(void **state)
{
	static const char *const texts[] = {
		"service=S\ncluster=failover\n", /* no key: the default */
		"service=S\nloadbalance=random\n",
		"service=S\nloadbalance=p2c\n",
		"service=S\nloadbalance=leastactive\n",
		"service=S\nloadbalance=peakewma\n",
	};
	size_t t;

	(void)state;
	for (t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
		size_t hits[3], k;
		text_run(texts[t], 3000, hits, NULL);
		for (k = 0; k < 3; k++) {
			if (hits[k] <= 600)
				print_error(
				    "%s: endpoint %zu got %zu of 3000\n",
				    texts[t], k, hits[k]);
			assert_true(hits[k] > 600);
		}
	}
}

/* The selector's own generator is seeded (loadbalance.seed, or the C
 * field seed; default RESIL_SELECTOR_SEED): the same seed replays the
 * same picks exactly, another seed gives others. */
static void
test_selector_seed_replays(void **state)
{
	static unsigned char a[600], b[600], c[600], d[600];
	size_t hits[3];

	(void)state;
	text_run("service=S\nloadbalance.seed=7\n", 600, hits, a);
	text_run("service=S\nloadbalance.seed=7\n", 600, hits, b);
	assert_memory_equal(a, b, sizeof(a));
	text_run("service=S\nloadbalance.seed=8\n", 600, hits, c);
	assert_memory_not_equal(a, c, sizeof(a));
	/* No seed key: the default seed, the same every run. */
	text_run("service=S\nloadbalance=random\n", 600, hits, c);
	text_run("service=S\nloadbalance=random\n", 600, hits, d);
	assert_memory_equal(c, d, sizeof(c));
	{
		resil_selector_config sc;
		resil_selector_config_init(&sc);
		assert_null(sc.random);
		assert_int_equal(sc.seed, RESIL_SELECTOR_SEED);
	}
	{
		resil_cluster_text *cc;
		resil_selector_config sc;
		resil_diag diag;
		assert_int_equal(resil_cluster_text_new(&cc, NULL), RESIL_OK);
		assert_int_equal(
		    set(cc, "loadbalance.seed", "18446744073709551615", &diag),
		    RESIL_OK);
		resil_cluster_text_selector(cc, &sc);
		assert_true(sc.seed == UINT64_MAX);
		resil_cluster_text_free(cc);
	}
	bad("loadbalance.seed", "-1", RESIL_E_INVAL,
	    "svc.conf:7: loadbalance.seed: \"-1\" is not an unsigned "
	    "integer");
	bad("loadbalance.seed", "18446744073709551616", RESIL_E_INVAL,
	    "svc.conf:7: loadbalance.seed: 18446744073709551616 is out of "
	    "range 0..18446744073709551615");
}

/* The C way: a config from _init with no random source spreads too, and
 * two selectors with one seed pick alike. */
static void
test_selector_init_default_random_spreads(void **state)
{
	size_t run, i, hits[2][3];
	unsigned char seq[2][300];

	(void)state;
	for (run = 0; run < 2; run++) {
		fx f;
		fx_init(&f, 1000);
		f.scfg.random = NULL;
		f.scfg.seed = 99;
		assert_int_equal(fx_start(&f), 0);
		assert_int_equal(fx_push_weights(&f, NULL, 3), RESIL_OK);
		memset(hits[run], 0, sizeof(hits[run]));
		for (i = 0; i < 300; i++) {
			const char *a = fx_call(&f, NULL);
			assert_true(a[0] == 'e' && a[1] >= '0' && a[1] <= '2');
			seq[run][i] = (unsigned char)(a[1] - '0');
			hits[run][a[1] - '0']++;
		}
		fx_end(&f);
		for (i = 0; i < 3; i++)
			assert_true(hits[run][i] > 60);
	}
	assert_memory_equal(seq[0], seq[1], sizeof(seq[0]));
}

/* The endpoint a random pick over 8 equal weights makes with draw u. */
static int
slot_of(double u)
{
	return (int)(u * 8.0);
}

/* Pick from c once: the endpoint's index (e<i>:1). */
static int
pick_slot(fx *f, resil_candidates *c)
{
	resil_pick p;
	int i;

	assert_int_equal(
	    resil_selector_pick(f->sel, c, NULL, NULL, 0, &p, NULL), RESIL_OK);
	i = p.address[1] - '0';
	resil_selector_release(f->sel, &p);
	return i;
}

/* A new candidate set of f's selector, routed. */
static resil_candidates *
routed_set(fx *f)
{
	resil_candidates *c;

	assert_int_equal(resil_candidates_new(&c, f->sel), RESIL_OK);
	assert_int_equal(
	    resil_selector_route(f->sel, NULL, c, NULL), RESIL_OK);
	return c;
}

/* A candidate set draws from a block of the selector's own generator
 * (no atomic a draw); the draws it did not make go back when it is
 * freed, so one thread using one set at a time draws exactly the
 * generator's sequence. Two sets alive at once each draw from a block of
 * their own: the values are still the sequence's, in blocks of 64. */
static void
test_selector_candidates_draw_the_sequence(void **state)
{
	resil_candidates *c1, *c2;
	resil_rng r;
	double seq[200];
	int i;
	fx f;

	(void)state;
	fx_init(&f, 1000);
	f.scfg.random = NULL;
	f.scfg.seed = 12345;
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 8), RESIL_OK);
	resil_rng_seed(&r, 12345);
	for (i = 0; i < 200; i++)
		seq[i] = resil_rng_uniform(&r);
	/* One set, then another: draws 0..4, then 5..9. */
	c1 = routed_set(&f);
	for (i = 0; i < 5; i++)
		assert_int_equal(pick_slot(&f, c1), slot_of(seq[i]));
	resil_candidates_free(c1);
	c1 = routed_set(&f);
	for (i = 5; i < 10; i++)
		assert_int_equal(pick_slot(&f, c1), slot_of(seq[i]));
	/* A second set alive beside it: its block starts after c1's. */
	c2 = routed_set(&f);
	for (i = 0; i < 3; i++) {
		assert_int_equal(pick_slot(&f, c2), slot_of(seq[69 + i]));
		assert_int_equal(pick_slot(&f, c1), slot_of(seq[10 + i]));
	}
	/* c1's block is not the last taken: what it did not draw is lost,
	 * and a set made now starts after c2's. */
	resil_candidates_free(c1);
	c1 = routed_set(&f);
	assert_int_equal(pick_slot(&f, c1), slot_of(seq[133]));
	resil_candidates_free(c1);
	resil_candidates_free(c2);
	fx_end(&f);
}

/* The zones of a route from text: the candidates' zones joined. */
static void
zone_route(const char *text, const char *want_zone, resil_zone_mode want_mode,
    const char *want_route)
{
	static const char *const addr[4] = { "a:1", "b:1", "c:1", "d:1" };
	static const char *const zones[4] = { "hz", "sh", "hz", "sh" };
	resil_config *conf;
	resil_directory_config dc;
	resil_selector_config sc;
	resil_directory *d;
	resil_selector *sel;
	resil_candidates *c;
	resil_endpoint_spec specs[4];
	resil_diag diag;
	char got[64];
	size_t i, len = 0;

	assert_int_equal(
	    resil_config_parse_string(&conf, text, "svc.conf", NULL, &diag),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	resil_config_directory(conf, &dc);
	assert_int_equal(resil_directory_new(&d, &dc, &diag), RESIL_OK);
	(void)resil_config_selector(conf, &sc);
	if (want_zone == NULL)
		assert_null(sc.local_zone);
	else
		assert_string_equal(sc.local_zone, want_zone);
	assert_int_equal(sc.zone_mode, want_mode);
	assert_int_equal(resil_selector_new(&sel, d, &sc, &diag), RESIL_OK);
	assert_int_equal(resil_candidates_new(&c, sel), RESIL_OK);
	for (i = 0; i < 4; i++) {
		specs[i] = resil_endpoint_spec_default(addr[i]);
		specs[i].zone = zones[i];
	}
	assert_int_equal(resil_directory_push(d, specs, 4, &diag), RESIL_OK);
	assert_int_equal(resil_selector_route(sel, NULL, c, &diag), RESIL_OK);
	got[0] = '\0';
	for (i = 0; i < resil_candidates_count(c); i++) {
		resil_candidate cd;
		assert_int_equal(resil_candidates_get(c, i, &cd), RESIL_OK);
		len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s",
		    i > 0 ? "," : "", cd.address);
	}
	assert_string_equal(got, want_route);
	resil_candidates_free(c);
	resil_selector_free(sel);
	resil_directory_free(d);
	resil_config_free(conf);
}

/* Issue 23: zone= sets the selector's local zone, as config.h says (only
 * router.zone was read); router.zone wins when both are given; under
 * zone-aware the zone names the consumer without affinity (the strategy
 * splits by zone itself). */
static void
test_selector_zone_key_sets_local_zone(void **state)
{
	(void)state;
	zone_route("service=S\n", NULL, RESIL_ZONE_PREFER, "a:1,b:1,c:1,d:1");
	zone_route("service=S\nzone=hz\n", "hz", RESIL_ZONE_PREFER, "a:1,c:1");
	zone_route("service=S\nzone=sh\nrouter.zone.mode=strict\n", "sh",
	    RESIL_ZONE_STRICT, "b:1,d:1");
	zone_route("service=S\nzone=hz\nrouter.zone=sh\n", "sh",
	    RESIL_ZONE_PREFER, "b:1,d:1");
	zone_route("service=S\ncluster=zone-aware\nzone=hz\n", "hz",
	    RESIL_ZONE_OFF, "a:1,b:1,c:1,d:1");
	/* The zone is the consumer's on the WHEN side of a rule. */
	zone_route("service=S\ncluster=zone-aware\nzone=hz\n"
	           "router.condition=zone = hz => address = b:1\n",
	    "hz", RESIL_ZONE_OFF, "b:1");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selector_config_keys),
		cmocka_unit_test(test_selector_config_bad_values),
		cmocka_unit_test(test_selector_pick_allocates_nothing),
		cmocka_unit_test(test_selector_exclusion),
		cmocka_unit_test(test_selector_out_of_memory),
		cmocka_unit_test(test_selector_text_default_random_spreads),
		cmocka_unit_test(test_selector_seed_replays),
		cmocka_unit_test(test_selector_init_default_random_spreads),
		cmocka_unit_test(test_selector_candidates_draw_the_sequence),
		cmocka_unit_test(test_selector_zone_key_sets_local_zone),
	};

	return cmocka_run_group_tests_name("selector", tests, NULL, NULL);
}

/*
 * Issue 40.4: the selector's rule slots replaced from several threads at
 * once (a reload's own rules, a registry's condition:// rules, the config
 * center's tag rule, as the source's thread, ZooKeeper's completion thread
 * and the application's do) while routes run. Each replacement keeps the
 * other slots: every route sees both condition slots filled, and at the
 * end each slot holds the last set given. ASan sees every retired rule
 * freed once; TSan sees the publication.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <resil/router.h>
#include <resil/selector.h>

#include "router_internal.h"
#include "support/cluster_fx.h"

#define ROUNDS 400

typedef struct worker {
	resil_selector *sel;
	int slot; /* RESIL__RULES_*, or -1: the tag rule */
	atomic_int *stop;
	int failures;
} worker;

static void *
replacer(void *arg)
{
	worker *w = arg;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		resil_condition *c = NULL;
		resil_tag_rule *t = NULL;
		resil_err err;

		if (w->slot < 0) {
			if (i % 2 == 0 &&
			    resil_tag_rule_parse_yaml(&t,
			        "tags: [{name: g, addresses: [e1]}]\n", NULL,
			        NULL, NULL, NULL) != RESIL_OK) {
				w->failures++;
				continue;
			}
			err = resil_selector_set_tag_rule(w->sel, t, NULL);
			if (err != RESIL_OK) {
				resil_tag_rule_free(t);
				w->failures++;
			}
			continue;
		}
		if (resil_condition_parse(&c,
		        w->slot == RESIL__RULES_OWN ? "=> host != x9"
		                                    : "=> host != x8",
		        0, NULL, NULL) != RESIL_OK) {
			w->failures++;
			continue;
		}
		err = w->slot == RESIL__RULES_OWN
		    ? resil_selector_set_conditions(w->sel, &c, 1, NULL)
		    : resil__selector_set_rules(w->sel, w->slot, &c, 1, NULL);
		if (err != RESIL_OK) {
			resil_condition_free(c);
			w->failures++;
		}
	}
	return NULL;
}

static void
test_router_rules_threads_slots_replaced_at_once(void **state)
{
	worker w[3];
	pthread_t th[3];
	atomic_int stop = 0;
	resil_condition *c0 = NULL, *c1 = NULL;
	resil_request req;
	size_t routes = 0, bad = 0;
	fx f;
	int i;

	(void)state;
	fx_init(&f, 1000);
	assert_int_equal(fx_start(&f), 0);
	assert_int_equal(fx_push_weights(&f, NULL, 4), RESIL_OK);
	/* Both condition slots filled before the threads start. */
	assert_int_equal(
	    resil_condition_parse(&c0, "=> host != x9", 0, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_set_conditions(f.sel, &c0, 1, NULL), RESIL_OK);
	assert_int_equal(
	    resil_condition_parse(&c1, "=> host != x8", 0, NULL, NULL),
	    RESIL_OK);
	assert_int_equal(resil__selector_set_rules(
	                     f.sel, RESIL__RULES_REGISTRY, &c1, 1, NULL),
	    RESIL_OK);
	w[0].slot = RESIL__RULES_OWN;
	w[1].slot = RESIL__RULES_REGISTRY;
	w[2].slot = -1;
	for (i = 0; i < 3; i++) {
		w[i].sel = f.sel;
		w[i].stop = &stop;
		w[i].failures = 0;
		assert_int_equal(
		    pthread_create(&th[i], NULL, replacer, &w[i]), 0);
	}
	memset(&req, 0, sizeof(req));
	req.method = "get";
	for (i = 0; i < ROUNDS * 4; i++) {
		routes++;
		if (resil_selector_route(f.sel, &req, f.c, NULL) != RESIL_OK ||
		    resil_selector_condition_count(f.sel) != 2)
			bad++;
	}
	for (i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(w[i].failures, 0);
	}
	assert_int_equal(bad, 0);
	assert_true(routes > 0);
	/* The last sets: both conditions, and the tag rule of the last
	 * round (an odd one: none). */
	assert_int_equal(resil_selector_condition_count(f.sel), 2);
	req.tag = "g";
	assert_int_equal(
	    resil_selector_route(f.sel, &req, f.c, NULL), RESIL_OK);
	assert_int_equal(resil_candidates_count(f.c), 4);
	fx_end(&f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_router_rules_threads_slots_replaced_at_once),
	};

	return cmocka_run_group_tests_name(
	    "router_rules_threads", tests, NULL, NULL);
}

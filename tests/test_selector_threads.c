/*
 * A selector given no random source draws from its own seeded generator
 * (issue 23.2): 4 threads route, pick and report through one such
 * selector at once (run under TSan by `make tsan`). The generator is one
 * atomic word, so the picks race on nothing, and random's picks still
 * spread over the three endpoints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/selector.h>

#define PICKERS 4
#define ROUNDS 3000

typedef struct shared {
	resil_manual_clock mc;
	resil_selector *sel;
	uint64_t hits[PICKERS][3];
	uint64_t bad[PICKERS];
} shared;

typedef struct arg {
	shared *s;
	int id;
} arg;

static void *
picker(void *p)
{
	arg *a = p;
	shared *s = a->s;
	resil_candidates *c;
	int i;

	if (resil_candidates_new(&c, s->sel) != RESIL_OK) {
		s->bad[a->id]++;
		return NULL;
	}
	for (i = 0; i < ROUNDS; i++) {
		resil_pick pk;
		if (resil_selector_route(s->sel, NULL, c, NULL) != RESIL_OK ||
		    resil_selector_pick(s->sel, c, NULL, NULL, 0, &pk, NULL) !=
		        RESIL_OK) {
			s->bad[a->id]++;
			continue;
		}
		if (pk.address[0] == 'e' && pk.address[1] >= '0' &&
		    pk.address[1] <= '2')
			s->hits[a->id][pk.address[1] - '0']++;
		else
			s->bad[a->id]++;
		if (resil_selector_report(
		        s->sel, &pk, RESIL_OUTCOME_SUCCESS) != RESIL_OK)
			s->bad[a->id]++;
	}
	resil_candidates_free(c);
	return NULL;
}

static void
run(resil_lb_kind kind)
{
	static const char *const addr[3] = { "e0:1", "e1:1", "e2:1" };
	shared s;
	resil_directory_config dc;
	resil_selector_config sc;
	resil_directory *d;
	resil_endpoint_spec specs[3];
	pthread_t th[PICKERS];
	arg args[PICKERS];
	uint64_t total = 0;
	int i, k;

	memset(&s, 0, sizeof(s));
	resil_manual_clock_init(&s.mc, 1000);
	resil_directory_config_init(&dc);
	dc.clock = resil_manual_clock_hook(&s.mc);
	assert_int_equal(resil_directory_new(&d, &dc, NULL), RESIL_OK);
	resil_selector_config_init(&sc); /* no random source */
	sc.balance.kind = kind;
	assert_int_equal(resil_selector_new(&s.sel, d, &sc, NULL), RESIL_OK);
	for (i = 0; i < 3; i++)
		specs[i] = resil_endpoint_spec_default(addr[i]);
	assert_int_equal(resil_directory_push(d, specs, 3, NULL), RESIL_OK);
	for (i = 0; i < PICKERS; i++) {
		args[i].s = &s;
		args[i].id = i;
		assert_int_equal(
		    pthread_create(&th[i], NULL, picker, &args[i]), 0);
	}
	for (i = 0; i < PICKERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	/* Load-aware balancers skew here as they should: a thread
	 * descheduled while it holds a pick keeps its endpoint loaded for
	 * the others' many picks. Random must spread whatever the timing. */
	for (k = 0; k < 3 && kind == RESIL_LB_RANDOM; k++) {
		uint64_t sum = 0;
		for (i = 0; i < PICKERS; i++)
			sum += s.hits[i][k];
		if (sum <= PICKERS * ROUNDS / 5)
			print_error("%s: endpoint %d got %llu of %d\n",
			    resil_lb_kind_name(kind), k,
			    (unsigned long long)sum, PICKERS * ROUNDS);
		assert_true(sum > PICKERS * ROUNDS / 5);
	}
	for (i = 0; i < PICKERS; i++) {
		assert_int_equal(s.bad[i], 0);
		for (k = 0; k < 3; k++)
			total += s.hits[i][k];
	}
	assert_int_equal(total, PICKERS * ROUNDS);
	resil_selector_free(s.sel);
	resil_directory_free(d);
}

static void
test_selector_threads_own_random(void **state)
{
	(void)state;
	run(RESIL_LB_RANDOM);
	run(RESIL_LB_P2C);
	run(RESIL_LB_LEASTACTIVE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_selector_threads_own_random),
	};

	return cmocka_run_group_tests_name(
	    "selector_threads", tests, NULL, NULL);
}

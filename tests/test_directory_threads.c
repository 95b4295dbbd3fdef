/*
 * Directory pushes and single-endpoint events while 4 threads route, pick
 * and report through one selector (run under TSan by `make tsan`). Every
 * pick must name an address of some pushed list, every pick is reported,
 * and at the end no endpoint has a call in flight. Condition rules are
 * replaced (resil_selector_set_conditions) while routes read them. The
 * interval detections (success rate, failure percentage) run on the
 * routes as the clock moves, and a prober thread drives the directory's
 * health checker, marking endpoints while the lists change.
 *
 * Then picks reported on other threads: six pickers (more than the four
 * owned stripes) each hand their picks to the next one, which reports
 * them, while pushes remove the endpoints they are in flight on; the
 * counts in flight (one per stripe, taken on one and given back on
 * another) sum to 0 at the end, and every removed endpoint is freed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/selector.h>

#include "directory_internal.h"

#define PICKERS 4
#define ROUNDS 4000
#define PUSHES 2000

typedef struct shared {
	resil_manual_clock mc;
	resil_rng rng;
	resil_random rnd;
	resil_directory *d;
	resil_selector *sel;
	int stop;    /* atomic */
	int started; /* atomic */
	uint64_t picks[PICKERS];
	uint64_t bad[PICKERS];
	uint64_t probes;
} shared;

typedef struct arg {
	shared *s;
	int id;
} arg;

static const char *const methods[] = { "r", "rr", "h", "p", "l" };

static void *
picker(void *p)
{
	arg *a = p;
	shared *s = a->s;
	resil_candidates *c;
	resil_request req;
	const char *args[1];
	char key[16];
	int i;

	if (resil_candidates_new(&c, s->sel) != RESIL_OK)
		return NULL;
	memset(&req, 0, sizeof(req));
	req.args = args;
	req.nargs = 1;
	args[0] = key;
	__atomic_fetch_add(&s->started, 1, __ATOMIC_SEQ_CST);
	/* At least ROUNDS, and for as long as the writer pushes. */
	for (i = 0; i < ROUNDS || !__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST);
	     i++) {
		resil_pick pk;
		resil_err err;
		req.method = methods[i % 5];
		snprintf(key, sizeof(key), "k%d", i % 97);
		err = resil_selector_route(s->sel, &req, c, NULL);
		if (err != RESIL_OK)
			continue; /* an empty list for a moment */
		err = resil_selector_pick(s->sel, c, &req, NULL, 0, &pk, NULL);
		if (err == RESIL_E_UNAVAILABLE)
			continue; /* every breaker refused since the route */
		if (err != RESIL_OK) {
			s->bad[a->id]++;
			continue;
		}
		if (strncmp(pk.address, "10.0.", 5) != 0)
			s->bad[a->id]++;
		s->picks[a->id]++;
		resil_selector_report_duration(s->sel, &pk,
		    i % 7 == 0 ? RESIL_OUTCOME_FAILURE : RESIL_OUTCOME_SUCCESS,
		    (uint64_t)(i % 13));
	}
	resil_candidates_free(c);
	return NULL;
}

/* The caller's probe loop: every probe due now, one in three failing. */
static void *
prober(void *p)
{
	shared *s = p;
	resil_health *hc = resil_directory_health(s->d);
	resil_health_step st;

	while (!__atomic_load_n(&s->stop, __ATOMIC_SEQ_CST)) {
		uint64_t now =
		    resil_clock_now(resil_manual_clock_hook(&s->mc));
		if (resil_health_next(hc, now, &st) != RESIL_OK)
			break;
		if (st.action != RESIL_HEALTH_PROBE) {
			sched_yield(); /* a timer on a real loop */
			continue;
		}
		s->probes++;
		(void)resil_health_report(hc, st.probe,
		    st.probe % 3 == 0 ? RESIL_PROBE_FAILED : RESIL_PROBE_OK,
		    now);
	}
	return NULL;
}

static void
test_directory_threads_pushes_while_picking(void **state)
{
	static shared s;
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_breaker_config bc = resil_breaker_config_default();
	resil_outlier_rate_config rate = resil_outlier_rate_config_default();
	resil_health_config hc = resil_health_config_default();
	resil_directory_rate_stats rs;
	resil_method_balance mb[4];
	pthread_t th[PICKERS], pth;
	arg args[PICKERS];
	char addrs[40][32];
	resil_endpoint_spec specs[40];
	uint64_t total = 0;
	int i, k;

	(void)state;
	memset(&s, 0, sizeof(s));
	resil_manual_clock_init(&s.mc, 1);
	resil_rng_seed(&s.rng, 7);
	s.rnd = resil_rng_hook(&s.rng);
	dc.clock = resil_manual_clock_hook(&s.mc);
	dc.outlier.consecutive_failures = 3;
	dc.outlier.base_ejection = 5;
	dc.outlier.max_ejection = 50;
	dc.outlier.interval = 10;
	dc.outlier.max_ejection_pct = 30;
	dc.empty_protection = 0; /* the writer's empty lists apply */
	/* Each endpoint's own breaker too: permits taken and given back
	 * while the lists change. */
	bc.failure_rate_pct = 0;
	bc.consecutive_failures = 4;
	bc.open_wait_ns = 3;
	dc.endpoint_breaker = &bc;
	/* Small volumes, so that intervals find outliers. */
	rate.success_rate_minimum_hosts = 3;
	rate.success_rate_request_volume = 5;
	rate.failure_percentage_minimum_hosts = 3;
	rate.failure_percentage_request_volume = 5;
	rate.failure_percentage_threshold = 10;
	rate.enforcing_failure_percentage = 100;
	dc.outlier_rate = &rate;
	hc.interval_ns = 2;
	hc.timeout_ns = 1;
	hc.unhealthy_threshold = 1;
	hc.healthy_threshold = 1;
	hc.initial_healthy = 1;
	dc.health = &hc;
	assert_int_equal(resil_directory_new(&s.d, &dc, NULL), RESIL_OK);
	memset(mb, 0, sizeof(mb));
	for (i = 0; i < 4; i++) {
		mb[i].method = methods[i + 1];
		resil_balance_config_init(&mb[i].balance);
	}
	mb[0].balance.kind = RESIL_LB_ROUNDROBIN;
	mb[1].balance.kind = RESIL_LB_HASH;
	mb[1].balance.hash_nodes = 16;
	mb[2].balance.kind = RESIL_LB_PEAKEWMA;
	mb[3].balance.kind = RESIL_LB_LEASTACTIVE;
	sc.methods = mb;
	sc.nmethods = 4;
	sc.random = &s.rnd;
	sc.local_zone = "z0";
	assert_int_equal(resil_selector_new(&s.sel, s.d, &sc, NULL), RESIL_OK);
	for (i = 0; i < 40; i++) {
		snprintf(
		    addrs[i], sizeof(addrs[i]), "10.0.%d.%d:1", i / 10, i);
		specs[i] = resil_endpoint_spec_default(addrs[i]);
		specs[i].zone = i % 3 == 0 ? "z0" : "z1";
		specs[i].weight = 1 + i % 5;
	}
	assert_int_equal(resil_directory_push(s.d, specs, 20, NULL), RESIL_OK);
	for (i = 0; i < PICKERS; i++) {
		args[i].s = &s;
		args[i].id = i;
		assert_int_equal(
		    pthread_create(&th[i], NULL, picker, &args[i]), 0);
	}
	assert_int_equal(pthread_create(&pth, NULL, prober, &s), 0);
	while (__atomic_load_n(&s.started, __ATOMIC_SEQ_CST) < PICKERS)
		;
	/* The writer: whole-list pushes of sliding windows, single events,
	 * now and then an empty list; the clock moves. */
	for (k = 0; k < PUSHES; k++) {
		int from = k % 20, n = 5 + k % 16;
		if (k % 50 == 49)
			n = 0;
		assert_int_equal(
		    resil_directory_push(s.d, specs + from, (size_t)n, NULL),
		    RESIL_OK);
		if (k % 3 == 0) {
			resil_endpoint_spec one = specs[39];
			one.weight = k % 4;
			if (resil_directory_add(s.d, &one, NULL) != RESIL_OK)
				(void)resil_directory_update(s.d, &one, NULL);
		}
		if (k % 5 == 0)
			(void)resil_directory_remove(s.d, addrs[from], NULL);
		if (k % 7 == 0) {
			/* New condition rules while routes read the old. */
			static const char *const texts[] = {
				"method = r => zone = z0",
				"method = rr,h => zone = z1",
				"=> address != 10.0.0.3:1",
			};
			resil_condition *rules[2];
			size_t nr = (size_t)(k / 7) % 3;
			size_t j;
			for (j = 0; j < nr; j++)
				assert_int_equal(
				    resil_condition_parse(&rules[j],
				        texts[(k + (int)j) % 3], 0, NULL,
				        NULL),
				    RESIL_OK);
			assert_int_equal(resil_selector_set_conditions(
			                     s.sel, rules, nr, NULL),
			    RESIL_OK);
			assert_int_equal(
			    resil_selector_condition_count(s.sel), nr);
		}
		resil_manual_clock_advance(&s.mc, 1);
	}
	__atomic_store_n(&s.stop, 1, __ATOMIC_SEQ_CST);
	for (i = 0; i < PICKERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(pth, NULL);
	assert_int_equal(resil_directory_get_rate_stats(s.d, &rs), RESIL_OK);
	assert_true(rs.evaluations > 0);
	for (i = 0; i < PICKERS; i++) {
		assert_int_equal(s.bad[i], 0);
		total += s.picks[i];
	}
	assert_true(total > 0);
	/* Nothing is left in flight. */
	assert_int_equal(resil_directory_push(s.d, specs, 40, NULL), RESIL_OK);
	for (i = 0; i < 40; i++) {
		resil_endpoint_state st;
		assert_int_equal(
		    resil_directory_get_state(s.d, addrs[i], &st), RESIL_OK);
		assert_int_equal(st.active, 0);
	}
	print_message("%llu picks over %d pushes, %llu intervals, %llu "
	              "probes\n",
	    (unsigned long long)total, PUSHES,
	    (unsigned long long)rs.evaluations, (unsigned long long)s.probes);
	resil_selector_free(s.sel);
	resil_directory_free(s.d);
}

#define HANDERS 6
#define HAND_ROUNDS 3000
#define BOX 32

/* A picker's mailbox: picks handed over by the one before it. */
typedef struct box {
	pthread_mutex_t mu;
	resil_pick p[BOX];
	int n;
} box;

typedef struct hand {
	resil_selector *sel;
	box boxes[HANDERS];
	uint64_t picks[HANDERS];
	uint64_t reports[HANDERS];
	uint64_t bad[HANDERS];
	int done; /* atomic: pickers past their last hand-over */
} hand;

typedef struct hand_arg {
	hand *h;
	int id;
} hand_arg;

/* Report every pick in b. */
static void
drain(hand *h, box *b, int id)
{
	resil_pick p[BOX];
	int i, n;

	pthread_mutex_lock(&b->mu);
	n = b->n;
	memcpy(p, b->p, (size_t)n * sizeof(p[0]));
	b->n = 0;
	pthread_mutex_unlock(&b->mu);
	for (i = 0; i < n; i++) {
		if (resil_selector_report_duration(h->sel, &p[i],
		        i % 5 == 0 ? RESIL_OUTCOME_FAILURE
		                   : RESIL_OUTCOME_SUCCESS,
		        1) != RESIL_OK)
			h->bad[id]++;
		h->reports[id]++;
	}
}

static void *
hander(void *v)
{
	hand_arg *a = v;
	hand *h = a->h;
	box *next = &h->boxes[(a->id + 1) % HANDERS];
	resil_candidates *c;
	resil_request req;
	int i;

	if (resil_candidates_new(&c, h->sel) != RESIL_OK)
		return NULL;
	memset(&req, 0, sizeof(req));
	for (i = 0; i < HAND_ROUNDS; i++) {
		resil_pick pk;
		req.method = i % 2 ? "p" : "l";
		if (resil_selector_route(h->sel, &req, c, NULL) != RESIL_OK ||
		    resil_selector_pick(h->sel, c, &req, NULL, 0, &pk, NULL) !=
		        RESIL_OK)
			continue;
		h->picks[a->id]++;
		pthread_mutex_lock(&next->mu);
		if (next->n < BOX) {
			next->p[next->n++] = pk;
			pk.address = NULL;
		}
		pthread_mutex_unlock(&next->mu);
		if (pk.address != NULL) { /* full: report it here */
			(void)resil_selector_report(
			    h->sel, &pk, RESIL_OUTCOME_SUCCESS);
			h->reports[a->id]++;
		}
		if (i % 3 == 0)
			drain(h, &h->boxes[a->id], a->id);
	}
	resil_candidates_free(c);
	__atomic_fetch_add(&h->done, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&h->done, __ATOMIC_SEQ_CST) < HANDERS)
		sched_yield();
	drain(h, &h->boxes[a->id], a->id);
	return NULL;
}

static void
test_directory_threads_reports_on_other_threads(void **state)
{
	static hand h;
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_method_balance mb[2];
	resil_manual_clock mc;
	pthread_t th[HANDERS];
	hand_arg args[HANDERS];
	char addrs[24][32];
	resil_endpoint_spec specs[24];
	resil_directory *d;
	uint64_t picks = 0, reports = 0;
	int i, k;

	(void)state;
	memset(&h, 0, sizeof(h));
	resil_manual_clock_init(&mc, 1);
	dc.clock = resil_manual_clock_hook(&mc);
	dc.empty_protection = 0;
	assert_int_equal(resil_directory_new(&d, &dc, NULL), RESIL_OK);
	memset(mb, 0, sizeof(mb));
	mb[0].method = "p";
	resil_balance_config_init(&mb[0].balance);
	mb[0].balance.kind = RESIL_LB_P2C;
	mb[1].method = "l";
	resil_balance_config_init(&mb[1].balance);
	mb[1].balance.kind = RESIL_LB_LEASTACTIVE;
	sc.methods = mb;
	sc.nmethods = 2;
	/* No random hook: the candidate sets draw from blocks of the
	 * selector's own generator, concurrently. */
	assert_int_equal(resil_selector_new(&h.sel, d, &sc, NULL), RESIL_OK);
	for (i = 0; i < 24; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "10.1.0.%d:1", i);
		specs[i] = resil_endpoint_spec_default(addrs[i]);
	}
	assert_int_equal(resil_directory_push(d, specs, 24, NULL), RESIL_OK);
	for (i = 0; i < HANDERS; i++)
		pthread_mutex_init(&h.boxes[i].mu, NULL);
	for (i = 0; i < HANDERS; i++) {
		args[i].h = &h;
		args[i].id = i;
		assert_int_equal(
		    pthread_create(&th[i], NULL, hander, &args[i]), 0);
	}
	/* Sliding windows of the list: picks in flight on endpoints that
	 * leave, end on other threads, and come back as new endpoints. */
	for (k = 0; __atomic_load_n(&h.done, __ATOMIC_SEQ_CST) < HANDERS;
	     k++) {
		assert_int_equal(resil_directory_push(d, specs + k % 12,
		                     (size_t)(4 + k % 9), NULL),
		    RESIL_OK);
		sched_yield();
	}
	for (i = 0; i < HANDERS; i++) {
		pthread_join(th[i], NULL);
		pthread_mutex_destroy(&h.boxes[i].mu);
		assert_int_equal(h.bad[i], 0);
		picks += h.picks[i];
		reports += h.reports[i];
	}
	assert_true(picks > 0);
	assert_int_equal(reports, picks);
	/* Every call has ended: the next update frees every endpoint no
	 * snapshot holds, and the ones kept have none in flight. */
	assert_int_equal(resil_directory_push(d, specs, 24, NULL), RESIL_OK);
	assert_int_equal(resil__dir_retired(d), 0);
	for (i = 0; i < 24; i++) {
		resil_endpoint_state st;
		assert_int_equal(
		    resil_directory_get_state(d, addrs[i], &st), RESIL_OK);
		assert_int_equal(st.active, 0);
	}
	print_message("%llu picks reported on other threads over %d pushes\n",
	    (unsigned long long)picks, k);
	resil_selector_free(h.sel);
	resil_directory_free(d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_directory_threads_pushes_while_picking),
		cmocka_unit_test(
		    test_directory_threads_reports_on_other_threads),
	};

	return cmocka_run_group_tests_name(
	    "directory_threads", tests, NULL, NULL);
}

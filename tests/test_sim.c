/*
 * resil-sim's engine parts (tools/sim/queue.c, compiled in here): the
 * event queue's (time, sequence) order, the seeded generators, the
 * logarithm behind exponential draws, and the text helpers. The whole
 * simulator is tested through its scenarios (tools/CMakeLists.txt).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../tools/sim/queue.c"

static void
test_sim_queue_time_then_sequence(void **state)
{
	sim_queue q;
	sim_event ev;
	sim_rng r;
	uint64_t last_t = 0;
	uint32_t last_arg[16];
	unsigned i, n = 0;

	(void)state;
	sim_queue_init(&q);
	sim_rng_seed(&r, 42, 0);
	/* 5000 events on 16 times, scheduled in a random order of times:
	 * those of one time must come out in the order they went in. */
	for (i = 0; i < 5000; i++)
		assert_int_equal(
		    sim_schedule(&q, sim_rng_next(&r) % 16, 0, NULL, i), 0);
	memset(last_arg, 0, sizeof(last_arg));
	while (sim_next(&q, &ev)) {
		assert_true(ev.t >= last_t);
		if (n > 0 && ev.t == last_t)
			assert_true(ev.arg > last_arg[ev.t]);
		last_arg[ev.t] = ev.arg;
		last_t = ev.t;
		n++;
	}
	assert_int_equal(n, 5000);
	assert_int_equal(sim_next(&q, &ev), 0);
	sim_queue_free(&q);
}

static void
test_sim_queue_interleaved(void **state)
{
	sim_queue q;
	sim_event ev;

	(void)state;
	sim_queue_init(&q);
	assert_int_equal(sim_schedule(&q, 10, 1, NULL, 1), 0);
	assert_int_equal(sim_schedule(&q, 5, 2, NULL, 2), 0);
	assert_int_equal(sim_next(&q, &ev), 1);
	assert_int_equal(ev.t, 5);
	assert_int_equal(ev.kind, 2);
	/* Scheduled now for the same time as a pending one: after it. */
	assert_int_equal(sim_schedule(&q, 10, 3, NULL, 3), 0);
	assert_int_equal(sim_schedule(&q, 7, 4, NULL, 4), 0);
	assert_int_equal(sim_next(&q, &ev), 1);
	assert_int_equal(ev.arg, 4);
	assert_int_equal(sim_next(&q, &ev), 1);
	assert_int_equal(ev.arg, 1);
	assert_int_equal(sim_next(&q, &ev), 1);
	assert_int_equal(ev.arg, 3);
	assert_int_equal(sim_next(&q, &ev), 0);
	sim_queue_free(&q);
}

/* Events scheduled through the FIFO lane come out in the same order as
 * through the heap alone, whether they arrive in time order or not. */
static void
test_sim_queue_fifo_same_order(void **state)
{
	sim_queue a, b;
	sim_event ea, eb;
	sim_rng r;
	uint64_t now = 0;
	unsigned i, n = 0;

	(void)state;
	sim_queue_init(&a);
	sim_queue_init(&b);
	sim_rng_seed(&r, 9, 0);
	for (i = 0; i < 20000; i++) {
		uint64_t x = sim_rng_next(&r), t;

		/* Mostly a fixed timeout ahead, at times earlier; the rest
		 * of the events near, to the heap. */
		if (x % 3 == 0) {
			t = now + (x % 7 == 0 ? 5 : 100);
			assert_int_equal(
			    sim_schedule_fifo(&a, t, 1, NULL, i), 0);
		} else {
			t = now + x % 50;
			assert_int_equal(sim_schedule(&a, t, 2, NULL, i), 0);
		}
		assert_int_equal(
		    sim_schedule(&b, t, x % 3 == 0 ? 1 : 2, NULL, i), 0);
		if (x % 2 == 0 && sim_next(&a, &ea)) {
			assert_int_equal(sim_next(&b, &eb), 1);
			assert_true(ea.t == eb.t && ea.arg == eb.arg);
			now = ea.t;
			n++;
		}
	}
	while (sim_next(&a, &ea)) {
		assert_int_equal(sim_next(&b, &eb), 1);
		assert_true(ea.t == eb.t && ea.arg == eb.arg &&
		    ea.kind == eb.kind);
		n++;
	}
	assert_int_equal(sim_next(&b, &eb), 0);
	assert_int_equal(n, 20000);
	sim_queue_free(&a);
	sim_queue_free(&b);
}

static void
test_sim_rng_streams(void **state)
{
	sim_rng a, b, c;
	unsigned i, same = 0;

	(void)state;
	sim_rng_seed(&a, 7, 1);
	sim_rng_seed(&b, 7, 1);
	sim_rng_seed(&c, 7, 2);
	for (i = 0; i < 1000; i++) {
		uint64_t x = sim_rng_next(&a);
		double u;

		assert_true(x == sim_rng_next(&b));
		same += x == sim_rng_next(&c);
		u = sim_rng_uniform(&a);
		(void)sim_rng_uniform(&b);
		assert_true(u >= 0.0 && u < 1.0);
	}
	assert_int_equal(same, 0);
}

static void
test_sim_log_matches_known_values(void **state)
{
	static const struct {
		double x, ln;
	} v[] = { { 1.0, 0.0 }, { 2.0, 0.69314718055994531 },
		{ 10.0, 2.3025850929940457 }, { 1.5, 0.40546510810816438 },
		{ 0.5, -0.69314718055994531 }, { 0.001, -6.9077552789821371 },
		{ 1e-12, -27.631021115928547 },
		{ 0.9999999, -1.0000000500000033e-07 } };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		double got = sim_log(v[i].x), d = got - v[i].ln;

		assert_true(d < 1e-13 && d > -1e-13);
	}
}

static void
test_sim_exp_mean(void **state)
{
	sim_rng r;
	double sum = 0.0;
	unsigned i, n = 200000;

	(void)state;
	sim_rng_seed(&r, 3, 2);
	for (i = 0; i < n; i++)
		sum += (double)sim_rng_exp(&r, 20e6);
	/* Seeded, so exact; within 1% of the mean 20 ms. */
	sum /= n;
	assert_true(sum > 19.8e6 && sum < 20.2e6);
}

static void
test_sim_text_helpers(void **state)
{
	char buf[32], line[64];
	char *w[4];
	uint64_t ns;

	(void)state;
	assert_string_equal(sim_ms_text(0, buf, sizeof(buf)), "0");
	assert_string_equal(sim_ms_text(1500000, buf, sizeof(buf)), "1.5");
	assert_string_equal(
	    sim_ms_text(200000001, buf, sizeof(buf)), "200.000001");
	assert_int_equal(sim_parse_time("250us", &ns), 0);
	assert_int_equal(ns, 250000);
	assert_int_equal(sim_parse_time("3", &ns), 0);
	assert_int_equal(ns, 3000000);
	assert_int_equal(sim_parse_time("3 s", &ns), -1);
	snprintf(line, sizeof(line), "  rtt hz\tsh 1 # a comment\n");
	assert_int_equal(sim_split(line, w, 4), 4);
	assert_string_equal(w[0], "rtt");
	assert_string_equal(w[3], "1");
	snprintf(line, sizeof(line), "a b c d e");
	assert_int_equal(sim_split(line, w, 4), -1);
	snprintf(line, sizeof(line), "# only a comment");
	assert_int_equal(sim_split(line, w, 4), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sim_queue_time_then_sequence),
		cmocka_unit_test(test_sim_queue_interleaved),
		cmocka_unit_test(test_sim_queue_fifo_same_order),
		cmocka_unit_test(test_sim_rng_streams),
		cmocka_unit_test(test_sim_log_matches_known_values),
		cmocka_unit_test(test_sim_exp_mean),
		cmocka_unit_test(test_sim_text_helpers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

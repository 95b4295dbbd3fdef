/*
 * resil_clock_fast() across threads (issue 39): N threads read it in a
 * loop and check that each reading is >= the one before on the same
 * thread, and pass a token round a ring: each thread, having received the
 * token (an acquire of the sender's release, so happens-before), reads the
 * clock and checks it is >= the reading the sender took just before it
 * sent the token. Also its calibration against CLOCK_MONOTONIC within the
 * bound it states. Run under TSan in CI (label "threads").
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <resil/clock.h>

#define THREADS 4
#define PASSES 300

typedef struct ring {
	const resil_clock *clk;
	/* The token: (pass * THREADS + holder) + 1, and the reading its
	 * sender took just before sending it. */
	uint64_t token;
	uint64_t sent_at;
	uint64_t backwards;   /* a reading below the thread's previous */
	uint64_t before_send; /* a reading below the sender's */
} ring;

typedef struct member {
	ring *r;
	unsigned id;
} member;

static void *
run(void *arg)
{
	member *me = arg;
	ring *r = me->r;
	uint64_t prev = 0, now, want, sent;
	unsigned pass;
	int i;

	for (pass = 0; pass < PASSES; pass++) {
		want = (uint64_t)pass * THREADS + me->id + 1;
		/* Wait for the token (reading all along: never backwards). */
		while (__atomic_load_n(&r->token, __ATOMIC_ACQUIRE) != want) {
			now = resil_clock_now(r->clk);
			if (now < prev)
				__atomic_fetch_add(
				    &r->backwards, 1, __ATOMIC_RELAXED);
			prev = now;
			sched_yield(); /* 2 cores, THREADS spinners */
		}
		sent = __atomic_load_n(&r->sent_at, __ATOMIC_RELAXED);
		now = resil_clock_now(r->clk);
		if (now < sent)
			__atomic_fetch_add(&r->before_send, 1, __ATOMIC_RELAXED);
		if (now < prev)
			__atomic_fetch_add(&r->backwards, 1, __ATOMIC_RELAXED);
		prev = now;
		for (i = 0; i < 16; i++) {
			now = resil_clock_now(r->clk);
			if (now < prev)
				__atomic_fetch_add(
				    &r->backwards, 1, __ATOMIC_RELAXED);
			prev = now;
		}
		__atomic_store_n(&r->sent_at, prev, __ATOMIC_RELAXED);
		__atomic_store_n(&r->token, want + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void
ring_over(const resil_clock *clk)
{
	pthread_t t[THREADS];
	member m[THREADS];
	ring r;
	unsigned i;

	memset(&r, 0, sizeof(r));
	r.clk = clk;
	r.token = 1; /* thread 0 holds it first */
	for (i = 0; i < THREADS; i++) {
		m[i].r = &r;
		m[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, run, &m[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(r.backwards, 0);
	assert_int_equal(r.before_send, 0);
	assert_int_equal(r.token, (uint64_t)PASSES * THREADS + 1);
}

/* Never decreasing on a thread, and ordered by happens-before across
 * threads: whichever clock resil_clock_fast() chose here. */
static void
test_clock_fast_monotonic_across_threads(void **state)
{
	(void)state;
	ring_over(resil_clock_fast());
}

/* The system clock passes the same test (the harness's own check). */
static void
test_clock_system_monotonic_across_threads(void **state)
{
	(void)state;
	ring_over(resil_clock_system());
}

/* The fast clock counts nanoseconds of CLOCK_MONOTONIC: over a stretch
 * of about 20 ms the two agree within the rate bound it states plus a few
 * microseconds of read jitter; the system clock's bound is 0 ppm. */
static void
test_clock_fast_tracks_monotonic(void **state)
{
	const resil_clock *f = resil_clock_fast();
	uint32_t ppm = 12345;
	int tsc = resil_clock_fast_info(&ppm);
	uint64_t f0, s0, f1, s1, df, ds, err, allow;

	(void)state;
	if (!tsc) {
		assert_ptr_equal(f, resil_clock_system());
		assert_int_equal(ppm, 0);
		return;
	}
	assert_ptr_not_equal(f, resil_clock_system());
	assert_true(ppm < 1000); /* a 2 ms calibration: well under 0.1% */
	assert_non_null(f->coarse);
	assert_non_null(f->sleep);
	f0 = resil_clock_now(f);
	s0 = resil_clock_now(NULL);
	do
		s1 = resil_clock_now(NULL);
	while (s1 - s0 < 20 * RESIL_NS_PER_MS);
	f1 = resil_clock_now(f);
	df = f1 - f0;
	ds = s1 - s0;
	err = df > ds ? df - ds : ds - df;
	/* The rate bound over ds, plus the reads' own spread (preemption
	 * between two reads on a shared machine: generous). */
	allow = ds / 1000000 * ppm + 5 * RESIL_NS_PER_MS;
	assert_true(err <= allow);
	/* Its readings are of CLOCK_MONOTONIC's epoch too. */
	err = f1 > s1 ? f1 - s1 : s1 - f1;
	assert_true(err <= 50 * RESIL_NS_PER_MS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_fast_monotonic_across_threads),
		cmocka_unit_test(test_clock_system_monotonic_across_threads),
		cmocka_unit_test(test_clock_fast_tracks_monotonic),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

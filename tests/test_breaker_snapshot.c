/*
 * Breaker snapshot and restore: a round trip keeps the state, its timing
 * and the window; refused snapshots (another version, another window
 * layout, corrupted, truncated) change nothing and say why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <resil/breaker.h>
#include <resil/clock.h>

typedef struct side {
	resil_manual_clock mc;
	resil_breaker_config cfg;
	resil_breaker_recorder rec;
	resil_breaker_event events[16];
	resil_breaker *b;
} side;

static void
side_init(side *s, uint64_t t, resil_breaker_window_type wt)
{
	memset(s, 0, sizeof(*s));
	resil_manual_clock_init(&s->mc, t);
	resil_breaker_config_init(&s->cfg);
	s->cfg.clock = resil_manual_clock_hook(&s->mc);
	s->cfg.min_calls = 4;
	s->cfg.window_size = 8;
	s->cfg.open_wait_ns = 50;
	s->cfg.permitted_probes = 2;
	if (wt == RESIL_WINDOW_TIME) {
		s->cfg.window_type = RESIL_WINDOW_TIME;
		s->cfg.window_size = 5;
		s->cfg.bucket_ns = 10;
	}
	resil_breaker_recorder_init(&s->rec, s->events, 16);
	s->cfg.listener = resil_breaker_recorder_listener;
	s->cfg.listener_ctx = &s->rec;
}

static void
side_new(side *s)
{
	assert_int_equal(resil_breaker_new(&s->b, &s->cfg, NULL), RESIL_OK);
}

static void
outcome(side *s, resil_outcome o)
{
	resil_permit p;

	assert_int_equal(resil_breaker_acquire(s->b, &p), RESIL_OK);
	assert_int_equal(resil_breaker_record(s->b, &p, o), RESIL_OK);
}

static uint8_t *
take(side *s, size_t *len)
{
	size_t cap = resil_breaker_snapshot_size(s->b);
	uint8_t *buf = malloc(cap);

	assert_non_null(buf);
	assert_int_equal(
	    resil_breaker_snapshot(s->b, buf, cap, len), RESIL_OK);
	assert_true(*len <= cap);
	return buf;
}

static void
test_breaker_snapshot_count_window_round_trip(void **state)
{
	side a, b;
	resil_breaker_metrics ma, mb;
	uint8_t *buf;
	size_t len;
	resil_diag d;

	(void)state;
	side_init(&a, 100, RESIL_WINDOW_COUNT);
	side_new(&a);
	outcome(&a, RESIL_OUTCOME_SUCCESS);
	outcome(&a, RESIL_OUTCOME_FAILURE);
	outcome(&a, RESIL_OUTCOME_SUCCESS);
	buf = take(&a, &len);
	assert_int_equal(len, 144 + 8 + 8);

	side_init(&b, 100, RESIL_WINDOW_COUNT);
	side_new(&b);
	assert_int_equal(resil_breaker_restore(b.b, buf, len, &d), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(a.b, &ma), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(b.b, &mb), RESIL_OK);
	assert_int_equal(mb.state, RESIL_BREAKER_CLOSED);
	assert_int_equal(mb.window_calls, 3);
	assert_int_equal(mb.window_failures, 1);
	assert_int_equal(mb.successes, ma.successes);
	assert_int_equal(mb.failures, ma.failures);
	/* One transition, reported as RESTORED. */
	assert_int_equal(b.rec.count, 1);
	assert_int_equal(b.events[0].reason, RESIL_BREAKER_REASON_RESTORED);
	assert_string_equal(
	    resil_breaker_reason_name(RESIL_BREAKER_REASON_RESTORED),
	    "restored");
	/* Both trip on the same next outcome: 2 of 4 failed. */
	outcome(&a, RESIL_OUTCOME_FAILURE);
	outcome(&b, RESIL_OUTCOME_FAILURE);
	assert_int_equal(resil_breaker_get_state(a.b), RESIL_BREAKER_OPEN);
	assert_int_equal(resil_breaker_get_state(b.b), RESIL_BREAKER_OPEN);
	free(buf);
	resil_breaker_free(a.b);
	resil_breaker_free(b.b);
}

static void
test_breaker_snapshot_open_keeps_its_deadline(void **state)
{
	side a, b;
	resil_permit p;
	uint8_t *buf;
	size_t len;
	uint64_t left = 0;
	int i;

	(void)state;
	side_init(&a, 1000, RESIL_WINDOW_COUNT);
	side_new(&a);
	for (i = 0; i < 4; i++)
		outcome(&a, RESIL_OUTCOME_FAILURE); /* OPEN at 1000 */
	assert_int_equal(resil_breaker_get_state(a.b), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&a.mc, 1020);
	buf = take(&a, &len);

	/* The same clock, later: the deadline is still 1050. */
	side_init(&b, 1030, RESIL_WINDOW_COUNT);
	side_new(&b);
	assert_int_equal(resil_breaker_restore(b.b, buf, len, NULL), RESIL_OK);
	assert_int_equal(resil_breaker_get_state(b.b), RESIL_BREAKER_OPEN);
	resil_manual_clock_set(&b.mc, 1049);
	assert_int_equal(
	    resil_breaker_acquire_ex(b.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 1);
	resil_manual_clock_set(&b.mc, 1050);
	assert_int_equal(resil_breaker_acquire(b.b, &p), RESIL_OK);
	assert_int_equal(
	    resil_breaker_get_state(b.b), RESIL_BREAKER_HALF_OPEN);
	resil_breaker_free(b.b);

	/* Another boot (the clock reads before the snapshot): 30 ticks of
	 * the wait were left, and still are. */
	side_init(&b, 27, RESIL_WINDOW_COUNT);
	side_new(&b);
	assert_int_equal(resil_breaker_restore(b.b, buf, len, NULL), RESIL_OK);
	resil_manual_clock_set(&b.mc, 56);
	assert_int_equal(
	    resil_breaker_acquire_ex(b.b, &p, &left), RESIL_E_OPEN);
	assert_int_equal(left, 1);
	resil_manual_clock_set(&b.mc, 57);
	assert_int_equal(resil_breaker_acquire(b.b, &p), RESIL_OK);
	free(buf);
	resil_breaker_free(a.b);
	resil_breaker_free(b.b);
}

static void
test_breaker_snapshot_time_window_and_half_open(void **state)
{
	side a, b;
	resil_breaker_metrics m;
	resil_permit p;
	uint8_t *buf;
	size_t len;

	(void)state;
	side_init(&a, 100, RESIL_WINDOW_TIME);
	side_new(&a);
	outcome(&a, RESIL_OUTCOME_FAILURE); /* bucket 10 */
	resil_manual_clock_set(&a.mc, 125);
	outcome(&a, RESIL_OUTCOME_SUCCESS); /* bucket 12 */
	outcome(&a, RESIL_OUTCOME_SUCCESS);
	buf = take(&a, &len);
	assert_int_equal(len, 144 + 2 * 32 + 8);
	side_init(&b, 125, RESIL_WINDOW_TIME);
	side_new(&b);
	assert_int_equal(resil_breaker_restore(b.b, buf, len, NULL), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(b.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 3);
	assert_int_equal(m.window_failures, 1);
	/* The failure of bucket 10 leaves the window at bucket 15. */
	resil_manual_clock_set(&b.mc, 150);
	assert_int_equal(resil_breaker_get_metrics(b.b, &m), RESIL_OK);
	assert_int_equal(m.window_calls, 2);
	assert_int_equal(m.window_failures, 0);
	free(buf);
	resil_breaker_free(b.b);

	/* HALF_OPEN with a probe out: restored as a fresh probe episode. */
	assert_int_equal(
	    resil_breaker_transition(a.b, RESIL_BREAKER_HALF_OPEN), RESIL_OK);
	assert_int_equal(resil_breaker_acquire(a.b, &p), RESIL_OK);
	buf = take(&a, &len);
	side_init(&b, 125, RESIL_WINDOW_TIME);
	side_new(&b);
	assert_int_equal(resil_breaker_restore(b.b, buf, len, NULL), RESIL_OK);
	assert_int_equal(resil_breaker_get_metrics(b.b, &m), RESIL_OK);
	assert_int_equal(m.state, RESIL_BREAKER_HALF_OPEN);
	assert_int_equal(m.probes_granted, 0);
	assert_int_equal(m.probes_reported, 0);
	outcome(&b, RESIL_OUTCOME_SUCCESS);
	outcome(&b, RESIL_OUTCOME_SUCCESS);
	assert_int_equal(resil_breaker_get_state(b.b), RESIL_BREAKER_CLOSED);
	free(buf);
	resil_breaker_free(a.b);
	resil_breaker_free(b.b);
}

/* Rewrite the checksum after editing a snapshot (FNV-1a 64). */
static void
reseal(uint8_t *buf, size_t len)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	size_t i;

	for (i = 0; i < len - 8; i++) {
		h ^= buf[i];
		h *= UINT64_C(0x100000001b3);
	}
	for (i = 0; i < 8; i++)
		buf[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

static void
expect_refused(side *s, const uint8_t *buf, size_t len, const char *why)
{
	resil_breaker_metrics before, after;
	resil_diag d;

	memset(&d, 0, sizeof(d));
	assert_int_equal(resil_breaker_get_metrics(s->b, &before), RESIL_OK);
	assert_int_equal(
	    resil_breaker_restore(s->b, buf, len, &d), RESIL_E_INVAL);
	if (strstr(d.msg, why) == NULL)
		fail_msg("diag \"%s\" does not say \"%s\"", d.msg, why);
	assert_int_equal(resil_breaker_get_metrics(s->b, &after), RESIL_OK);
	assert_int_equal(after.state, before.state);
	assert_int_equal(after.transitions, before.transitions);
	assert_int_equal(after.window_calls, before.window_calls);
}

static void
test_breaker_snapshot_refusals_change_nothing(void **state)
{
	side a, b, other;
	uint8_t *buf, *bad;
	size_t len;

	(void)state;
	side_init(&a, 100, RESIL_WINDOW_COUNT);
	side_new(&a);
	outcome(&a, RESIL_OUTCOME_FAILURE);
	buf = take(&a, &len);
	bad = malloc(len);
	assert_non_null(bad);
	side_init(&b, 100, RESIL_WINDOW_COUNT);
	side_new(&b);
	outcome(&b, RESIL_OUTCOME_SUCCESS);

	/* Another version. */
	memcpy(bad, buf, len);
	bad[8] = 2;
	reseal(bad, len);
	expect_refused(&b, bad, len, "version 2, this library reads 1");
	/* A corrupted byte. */
	memcpy(bad, buf, len);
	bad[150] ^= 1;
	expect_refused(&b, bad, len, "checksum");
	/* Truncated, or not a snapshot at all. */
	expect_refused(&b, buf, len - 1, "length");
	expect_refused(&b, buf, 10, "not a breaker snapshot");
	/* Inconsistent but sealed: more entries than the window holds. */
	memcpy(bad, buf, len);
	bad[140] = 99;
	reseal(bad, len);
	expect_refused(&b, bad, len, "inconsistent");
	/* Another window layout. */
	side_init(&other, 100, RESIL_WINDOW_COUNT);
	other.cfg.window_size = 9;
	side_new(&other);
	expect_refused(&other, buf, len, "window COUNT of 8 does not match");
	resil_breaker_free(other.b);
	side_init(&other, 100, RESIL_WINDOW_TIME);
	side_new(&other);
	expect_refused(&other, buf, len, "does not match this breaker's TIME");
	resil_breaker_free(other.b);
	/* Bad arguments. */
	assert_int_equal(
	    resil_breaker_restore(NULL, buf, len, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil_breaker_snapshot(b.b, bad, 16, &len), RESIL_E_INVAL);
	assert_int_equal(resil_breaker_snapshot_size(NULL), 0);
	free(bad);
	free(buf);
	resil_breaker_free(a.b);
	resil_breaker_free(b.b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_breaker_snapshot_count_window_round_trip),
		cmocka_unit_test(
		    test_breaker_snapshot_open_keeps_its_deadline),
		cmocka_unit_test(
		    test_breaker_snapshot_time_window_and_half_open),
		cmocka_unit_test(
		    test_breaker_snapshot_refusals_change_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

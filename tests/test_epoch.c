/*
 * The internal safe-reclamation helper (lib/epoch.h): a destructor never
 * runs while a section that could see the object is open, and always runs
 * by synchronize or free.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "epoch.h"
#include "support/fail_alloc.h"

typedef struct obj {
	resil__epoch_entry retire; /* first */
	int *freed;
} obj;

static void
obj_freed(resil__epoch_entry *e)
{
	obj *o = (obj *)(void *)e;

	(*o->freed)++;
}

static void
test_epoch_waits_for_open_sections(void **state)
{
	resil__epoch *e;
	resil__epoch_guard g;
	obj o;
	int freed = 0, i;

	(void)state;
	assert_int_equal(resil__epoch_new(&e, 4, NULL), RESIL_OK);
	o.freed = &freed;
	resil__epoch_enter(e, &g);
	resil__epoch_retire(e, &o.retire, obj_freed);
	/* A reader that may have seen it is still in: not freed, however
	 * often the writer polls. */
	for (i = 0; i < 10; i++)
		resil__epoch_reclaim(e);
	assert_int_equal(freed, 0);
	assert_int_equal(resil__epoch_pending(e), 1);
	resil__epoch_exit(e, &g);
	/* Out: a few polls see the grace period pass. */
	for (i = 0; i < 10 && freed == 0; i++)
		resil__epoch_reclaim(e);
	assert_int_equal(freed, 1);
	assert_int_equal(resil__epoch_pending(e), 0);
	resil__epoch_free(e);
}

static void
test_epoch_synchronize_and_free_run_everything(void **state)
{
	resil__epoch *e;
	obj o[8];
	int freed = 0, i;
	fail_alloc fa;

	(void)state;
	assert_int_equal(
	    resil__epoch_new(&e, 0, fail_alloc_init(&fa, 0)), RESIL_OK);
	for (i = 0; i < 4; i++) {
		o[i].freed = &freed;
		resil__epoch_retire(e, &o[i].retire, obj_freed);
	}
	resil__epoch_synchronize(e);
	assert_int_equal(freed, 4);
	for (i = 4; i < 8; i++) {
		o[i].freed = &freed;
		resil__epoch_retire(e, &o[i].retire, obj_freed);
	}
	resil__epoch_free(e);
	assert_int_equal(freed, 8);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
	resil__epoch_free(NULL);
}

static void
test_epoch_bad_arguments_and_oom(void **state)
{
	resil__epoch *e = NULL;
	fail_alloc fa;

	(void)state;
	assert_int_equal(resil__epoch_new(NULL, 4, NULL), RESIL_E_INVAL);
	assert_int_equal(resil__epoch_new(&e, 5000, NULL), RESIL_E_INVAL);
	assert_int_equal(
	    resil__epoch_new(&e, 4, fail_alloc_init(&fa, 1)), RESIL_E_NOMEM);
	assert_int_equal(
	    resil__epoch_new(&e, 4, fail_alloc_init(&fa, 2)), RESIL_E_NOMEM);
	assert_int_equal(fail_alloc_live(&fa), 0);
	assert_false(fa.size_mismatch);
	assert_null(e);
}

/* More readers than slots: they wait for a slot, never share one. */
#define READERS 6

static resil__epoch *shared_e;
static int inside; /* atomic: readers in a section now */
static int most;   /* atomic: the most seen at once */

static void *
reader(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 20000; i++) {
		resil__epoch_guard g;
		int now;
		resil__epoch_enter(shared_e, &g);
		now = __atomic_add_fetch(&inside, 1, __ATOMIC_SEQ_CST);
		if (now > __atomic_load_n(&most, __ATOMIC_SEQ_CST))
			__atomic_store_n(&most, now, __ATOMIC_SEQ_CST);
		__atomic_sub_fetch(&inside, 1, __ATOMIC_SEQ_CST);
		resil__epoch_exit(shared_e, &g);
	}
	return NULL;
}

static void
test_epoch_more_readers_than_slots(void **state)
{
	pthread_t th[READERS];
	int i;

	(void)state;
	assert_int_equal(resil__epoch_new(&shared_e, 2, NULL), RESIL_OK);
	for (i = 0; i < READERS; i++)
		assert_int_equal(
		    pthread_create(&th[i], NULL, reader, NULL), 0);
	for (i = 0; i < READERS; i++)
		pthread_join(th[i], NULL);
	assert_true(__atomic_load_n(&most, __ATOMIC_SEQ_CST) <= 2);
	resil__epoch_free(shared_e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_epoch_waits_for_open_sections),
		cmocka_unit_test(
		    test_epoch_synchronize_and_free_run_everything),
		cmocka_unit_test(test_epoch_bad_arguments_and_oom),
		cmocka_unit_test(test_epoch_more_readers_than_slots),
	};

	return cmocka_run_group_tests_name("epoch", tests, NULL, NULL);
}

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <resil/clock.h>
#include <resil/pipeline.h>
#include <resil/registry.h>

#include "atomic.h"

/*
 * Lookups and scrapes race with a thread that adds and removes pipelines.
 * The stable pipelines are never removed, so their looked-up pointers may
 * be used; the churning ones are only looked up (the header's contract:
 * a removed pipeline must not be used), and removal frees them, which
 * must never happen under a running scrape (TSan and ASan check).
 */

#define STABLE 4
#define CHURN 4
#define ROUNDS 3000
#define READERS 2

typedef struct shared {
	resil_registry *reg;
	resil_manual_clock mc;
	uint64_t stop;
	uint64_t found_churn;
} shared;

static resil_pipeline *
make(shared *sh, const char *name)
{
	resil_pipeline_config cfg = resil_pipeline_config_default();
	resil_pipeline *p = NULL;
	resil_diag d;

	cfg.service = name;
	cfg.clock = resil_manual_clock_hook(&sh->mc);
	if (resil_pipeline_new(&p, &cfg, &d) != RESIL_OK)
		return NULL;
	return p;
}

static void *
reader(void *arg)
{
	shared *sh = arg;
	unsigned i = 0;

	while (resil__load64(&sh->stop) == 0) {
		char name[16];
		resil_pipeline *p = NULL;

		snprintf(name, sizeof(name), "stable%u", i % STABLE);
		if (resil_registry_lookup(sh->reg, name, &p) != RESIL_OK ||
		    strcmp(resil_pipeline_service(p), name) != 0)
			return (void *)1;
		snprintf(name, sizeof(name), "churn%u", i % CHURN);
		if (resil_registry_lookup(sh->reg, name, &p) == RESIL_OK)
			resil__faa64(&sh->found_churn, 1);
		i++;
	}
	return NULL;
}

static int
count_sink(const char *chunk, size_t n, void *ctx)
{
	size_t *lines = ctx;
	size_t i;

	for (i = 0; i < n; i++)
		*lines += chunk[i] == '\n';
	return 0;
}

static void *
scraper(void *arg)
{
	shared *sh = arg;

	while (resil__load64(&sh->stop) == 0) {
		size_t lines = 0;

		if (resil_registry_write_prometheus_cb(
		        sh->reg, count_sink, &lines) != RESIL_OK)
			return (void *)1;
		/* At least the stable pipelines' calls_total lines. */
		if (lines < STABLE)
			return (void *)1;
	}
	return NULL;
}

static void
test_registry_threads_lookup_during_churn(void **state)
{
	static shared sh;
	pthread_t rd[READERS], sc;
	unsigned i, r;
	void *ret;

	(void)state;
	memset(&sh, 0, sizeof(sh));
	resil_manual_clock_init(&sh.mc, 0);
	{
		resil_registry_config cfg = resil_registry_config_default();

		assert_int_equal(
		    resil_registry_new(&sh.reg, &cfg, NULL), RESIL_OK);
	}
	for (i = 0; i < STABLE; i++) {
		char name[16];

		snprintf(name, sizeof(name), "stable%u", i);
		assert_int_equal(
		    resil_registry_add(sh.reg, make(&sh, name), NULL),
		    RESIL_OK);
	}
	for (i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&rd[i], NULL, reader, &sh), 0);
	assert_int_equal(pthread_create(&sc, NULL, scraper, &sh), 0);
	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < CHURN; i++) {
			char name[16];
			resil_pipeline *p;

			snprintf(name, sizeof(name), "churn%u", i);
			p = make(&sh, name);
			assert_non_null(p);
			assert_int_equal(
			    resil_registry_add(sh.reg, p, NULL), RESIL_OK);
		}
		assert_int_equal(resil_registry_count(sh.reg), STABLE + CHURN);
		for (i = 0; i < CHURN; i++) {
			char name[16];

			snprintf(name, sizeof(name), "churn%u", i);
			assert_int_equal(
			    resil_registry_remove(sh.reg, name, NULL),
			    RESIL_OK);
		}
	}
	resil__store64(&sh.stop, 1);
	for (i = 0; i < READERS; i++) {
		assert_int_equal(pthread_join(rd[i], &ret), 0);
		assert_null(ret);
	}
	assert_int_equal(pthread_join(sc, &ret), 0);
	assert_null(ret);
	assert_int_equal(resil_registry_count(sh.reg), STABLE);
	resil_registry_free(sh.reg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_threads_lookup_during_churn),
	};

	return cmocka_run_group_tests_name(
	    "registry_threads", tests, NULL, NULL);
}

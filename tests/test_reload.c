/*
 * Whole-configuration reload (resil_pipeline_reload, _string, _file):
 * refusal changes nothing, stage state carries over where its settings
 * did not change, calls finish on the settings they started with, handles
 * follow their method, memory stays bounded, and calls run on other
 * threads while reloads come (this file runs under TSan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <resil/config.h>
#include <resil/pipeline.h>

#include "support/cluster_fx.h"

#define MS RESIL_NS_PER_MS
#define SEC RESIL_NS_PER_SEC

/* ---- a dependency that fails on demand ---- */

typedef struct dep {
	int fail; /* atomic: nonzero, every call fails */
	uint64_t calls;
} dep;

static int
dep_call(void *ctx, const resil_args *args, resil_value *out)
{
	dep *d = ctx;

	(void)args;
	__atomic_fetch_add(&d->calls, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&d->fail, __ATOMIC_RELAXED))
		return -1;
	*out = resil_value_int(8);
	return 0;
}

/* ---- a thread-safe counting allocator ---- */

typedef struct count_alloc {
	resil_allocator hook;
	int64_t live; /* atomic: allocations not yet freed */
} count_alloc;

static void *
ca_alloc(size_t size, void *ctx)
{
	count_alloc *a = ctx;
	void *p = malloc(size);

	if (p != NULL)
		__atomic_fetch_add(&a->live, 1, __ATOMIC_RELAXED);
	return p;
}

static void
ca_free(void *ptr, size_t size, void *ctx)
{
	count_alloc *a = ctx;

	(void)size;
	if (ptr == NULL)
		return;
	__atomic_fetch_sub(&a->live, 1, __ATOMIC_RELAXED);
	free(ptr);
}

static const resil_allocator *
ca_init(count_alloc *a)
{
	memset(a, 0, sizeof(*a));
	a->hook.alloc = ca_alloc;
	a->hook.free = ca_free;
	a->hook.ctx = a;
	return &a->hook;
}

/* ---- fixture: a pipeline built from text ---- */

typedef struct rfx {
	resil_manual_clock mc;
	resil_pipeline_recorder rec;
	resil_pipeline_record records[256];
	resil_pipeline *p;
	dep d;
} rfx;

static const char *TEXT_A = "service=StockService\n"
                            "breaker.consecutive_failures=2\n"
                            "breaker.open_wait=10s\n"
                            "retry.max_attempts=1\n"
                            "getStock.type=int\n";

static void
rfx_new(rfx *f, const char *text, const resil_allocator *alloc)
{
	resil_config *conf;
	resil_pipeline_config cfg;
	resil_diag diag;

	memset(f, 0, sizeof(*f));
	resil_manual_clock_init(&f->mc, 1000);
	resil_pipeline_recorder_init(&f->rec, f->records, 256);
	diag.msg[0] = '\0';
	if (resil_config_parse_string(&conf, text, "a.conf", NULL, &diag) !=
	    RESIL_OK)
		fail_msg("parse: %s", diag.msg);
	cfg = *resil_config_pipeline(conf);
	cfg.clock = resil_manual_clock_hook(&f->mc);
	cfg.listener = resil_pipeline_recorder_listener;
	cfg.listener_ctx = &f->rec;
	cfg.alloc = alloc;
	if (resil_pipeline_new(&f->p, &cfg, &diag) != RESIL_OK)
		fail_msg("new: %s", diag.msg);
	resil_config_free(conf);
}

static resil_err
call(rfx *f, const char *method, resil_result *r)
{
	resil_args args;

	args.method = method;
	args.data = "k";
	args.len = 1;
	return resil_pipeline_call(f->p, &args, dep_call, &f->d, r);
}

/* One call; its error. */
static resil_err
call1(rfx *f, const char *method)
{
	resil_result r;
	resil_err err;

	resil_result_init(&r);
	err = call(f, method, &r);
	resil_result_free(&r);
	return err;
}

static resil_err
reload(rfx *f, const char *text, resil_diag *diag)
{
	diag->msg[0] = '\0';
	return resil_pipeline_reload_string(f->p, text, "b.conf", diag);
}

static size_t
count_text(const rfx *f, const char *needle)
{
	size_t i, n = 0;

	for (i = 0; i < f->rec.count; i++)
		if (strstr(f->rec.records[i].text, needle) != NULL)
			n++;
	return n;
}

static void
open_breaker(rfx *f)
{
	f->d.fail = 1;
	assert_int_equal(call1(f, "getStock"), RESIL_E_CALL);
	assert_int_equal(call1(f, "getStock"), RESIL_E_CALL);
	assert_int_equal(
	    resil_breaker_get_state(resil_pipeline_breaker(f->p, "getStock")),
	    RESIL_BREAKER_OPEN);
	f->d.fail = 0;
}

/* ---- refusal changes nothing ---- */

static void
test_reload_invalid_text_is_refused_with_line(void **state)
{
	rfx f;
	resil_diag diag;
	resil_breaker *b;
	uint64_t before;

	(void)state;
	rfx_new(&f, TEXT_A, NULL);
	open_breaker(&f);
	b = resil_pipeline_breaker(f.p, NULL);
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "retry.max_attempts=3\n"
	                     "breaker.failure_rate=101\n",
	                     &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "b.conf:3: breaker.failure_rate"));
	assert_int_equal(
	    reload(&f, "service=StockService\nretry.max_attemps=3\n", &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "b.conf:2:"));
	/* Unchanged: the same breaker, still OPEN, the same retry (one
	 * attempt), no event. */
	assert_ptr_equal(resil_pipeline_breaker(f.p, NULL), b);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	before = f.d.calls;
	assert_int_equal(call1(&f, "getStock"), RESIL_E_OPEN);
	assert_int_equal(f.d.calls, before);
	assert_int_equal(count_text(&f, "configuration reloaded"), 0);
	resil_pipeline_free(f.p);
}

static void
test_reload_fixed_settings_are_refused(void **state)
{
	rfx f;
	resil_diag diag;
	resil_manual_clock other;
	resil_pipeline_config cfg;

	(void)state;
	rfx_new(&f, TEXT_A, NULL);
	assert_int_equal(
	    reload(&f, "service=PriceService\n", &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "service: cannot change by reload"));
	assert_int_equal(
	    reload(&f, "service=StockService\nhedge.max=2\n", &diag),
	    RESIL_E_INVAL);
	assert_non_null(
	    strstr(diag.msg, "hedge.max (hedge_max): cannot change"));

	/* Through the struct: another clock, allocator or listener. */
	resil_manual_clock_init(&other, 5);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&other);
	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_pipeline_reload(f.p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "clock: cannot change by reload"));
	cfg.clock = resil_manual_clock_hook(&f.mc); /* the same: fine */
	cfg.listener = resil_pipeline_recorder_listener;
	cfg.listener_ctx = &other;
	assert_int_equal(
	    resil_pipeline_reload(f.p, &cfg, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "listener: cannot change"));
	cfg.listener = NULL;
	cfg.listener_ctx = NULL;
	assert_int_equal(resil_pipeline_reload(f.p, &cfg, &diag), RESIL_OK);
	assert_int_equal(
	    resil_pipeline_reload(f.p, NULL, &diag), RESIL_E_INVAL);
	assert_int_equal(
	    resil_pipeline_reload(NULL, &cfg, &diag), RESIL_E_INVAL);
	assert_int_equal(resil_pipeline_reload_string(f.p, NULL, NULL, &diag),
	    RESIL_E_INVAL);
	assert_int_equal(resil_pipeline_reload_file(
	                     f.p, "/nonexistent/resil-reload.conf", &diag),
	    RESIL_E_NOTFOUND);
	resil_pipeline_free(f.p);
}

/* ---- what carries over ---- */

static void
test_reload_open_breaker_survives_retry_change(void **state)
{
	rfx f;
	resil_diag diag;
	resil_breaker *b;
	uint64_t before;

	(void)state;
	rfx_new(&f, TEXT_A, NULL);
	open_breaker(&f); /* OPEN at 1000, until 1000 + 10s */
	b = resil_pipeline_breaker(f.p, NULL);
	resil_manual_clock_advance(&f.mc, 1 * SEC);
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "breaker.consecutive_failures=2\n"
	                     "breaker.open_wait=10s\n"
	                     "retry.max_attempts=3\n"
	                     "getStock.type=int\n",
	                     &diag),
	    RESIL_OK);
	assert_ptr_equal(resil_pipeline_breaker(f.p, NULL), b);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_OPEN);
	assert_int_equal(
	    count_text(
	        &f, "configuration reloaded: 1 setting changed (retry)"),
	    1);
	/* The same deadline: still rejected just before it... */
	resil_manual_clock_advance(&f.mc, 9 * SEC - 1);
	before = f.d.calls;
	assert_int_equal(call1(&f, "getStock"), RESIL_E_OPEN);
	assert_int_equal(f.d.calls, before);
	/* ... and a probe at it, whose success closes the carried-over
	 * breaker, and the listener hears it. */
	resil_manual_clock_advance(&f.mc, 1);
	assert_int_equal(call1(&f, "getStock"), RESIL_OK);
	assert_int_equal(f.d.calls, before + 1);
	assert_int_equal(resil_breaker_get_state(b), RESIL_BREAKER_CLOSED);
	assert_int_equal(count_text(&f, "breaker HALF_OPEN -> CLOSED"), 1);
	/* The new retry settings apply: three attempts now. */
	f.d.fail = 1;
	before = f.d.calls;
	(void)call1(&f, "getStock");
	assert_int_equal(f.d.calls, before + 2); /* then the breaker opened */
	resil_pipeline_free(f.p);
}

static void
test_reload_breaker_change_starts_closed(void **state)
{
	rfx f;
	resil_diag diag;
	resil_breaker *b;

	(void)state;
	rfx_new(&f, TEXT_A, NULL);
	open_breaker(&f);
	b = resil_pipeline_breaker(f.p, NULL);
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "breaker.consecutive_failures=2\n"
	                     "breaker.failure_rate=40\n"
	                     "breaker.open_wait=10s\n"
	                     "retry.max_attempts=1\n"
	                     "getStock.type=int\n",
	                     &diag),
	    RESIL_OK);
	assert_ptr_not_equal(resil_pipeline_breaker(f.p, NULL), b);
	assert_int_equal(
	    resil_breaker_get_state(resil_pipeline_breaker(f.p, NULL)),
	    RESIL_BREAKER_CLOSED);
	assert_int_equal(call1(&f, "getStock"), RESIL_OK);
	assert_int_equal(
	    count_text(
	        &f, "configuration reloaded: 1 setting changed (breaker)"),
	    1);
	resil_pipeline_free(f.p);
}

static void
test_reload_per_method_breakers_and_cache(void **state)
{
	static const char *A = "service=StockService\n"
	                       "breaker.consecutive_failures=1\n"
	                       "breaker.per_method=true\n"
	                       "cache.max_entries=16\n"
	                       "getStock.type=int\n"
	                       "getPrice.type=int\n";
	rfx f;
	resil_diag diag;
	resil_breaker *bs, *bp;
	resil_result r;

	(void)state;
	rfx_new(&f, A, NULL);
	/* A cached answer for getPrice, then getStock's breaker opens. */
	assert_int_equal(call1(&f, "getPrice"), RESIL_OK);
	f.d.fail = 1;
	(void)call1(&f, "getStock");
	bs = resil_pipeline_breaker(f.p, "getStock");
	bp = resil_pipeline_breaker(f.p, "getPrice");
	assert_int_equal(resil_breaker_get_state(bs), RESIL_BREAKER_OPEN);

	/* Only the timeout changes: both breakers and the cache stay. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "breaker.consecutive_failures=1\n"
	                     "breaker.per_method=true\n"
	                     "cache.max_entries=16\n"
	                     "getStock.type=int\n"
	                     "getPrice.type=int\n"
	                     "getPrice.timeout=2s\n",
	                     &diag),
	    RESIL_OK);
	assert_ptr_equal(resil_pipeline_breaker(f.p, "getStock"), bs);
	assert_ptr_equal(resil_pipeline_breaker(f.p, "getPrice"), bp);
	assert_int_equal(resil_breaker_get_state(bs), RESIL_BREAKER_OPEN);
	resil_result_init(&r);
	assert_int_equal(call(&f, "getPrice", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_CACHE);
	resil_result_free(&r);

	/* The cache's settings change: it starts empty. getStock is no
	 * longer declared: its breaker goes, the call uses the service's. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "breaker.consecutive_failures=1\n"
	                     "breaker.per_method=true\n"
	                     "cache.max_entries=32\n"
	                     "getPrice.type=int\n"
	                     "getPrice.timeout=2s\n",
	                     &diag),
	    RESIL_OK);
	assert_ptr_equal(resil_pipeline_breaker(f.p, "getPrice"), bp);
	assert_ptr_equal(resil_pipeline_breaker(f.p, "getStock"),
	    resil_pipeline_breaker(f.p, NULL));
	assert_int_equal(
	    count_text(&f, "2 settings changed (cache, getStock)"), 1);
	/* getPrice's breaker opened when the cache answered above: the
	 * rejection finds no cached answer now. */
	resil_result_init(&r);
	assert_int_equal(call(&f, "getPrice", &r), RESIL_E_UNAVAILABLE);
	assert_int_equal(r.source, RESIL_SOURCE_UNAVAILABLE);
	assert_int_equal(r.cause, RESIL_E_OPEN);
	resil_result_free(&r);
	/* Nothing changed: said so. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "breaker.consecutive_failures=1\n"
	                     "breaker.per_method=true\n"
	                     "cache.max_entries=32\n"
	                     "getPrice.type=int\n"
	                     "getPrice.timeout=2s\n",
	                     &diag),
	    RESIL_OK);
	assert_int_equal(
	    count_text(&f, "configuration reloaded: nothing changed"), 1);
	resil_pipeline_free(f.p);
}

/* ---- calls and handles across a reload ---- */

static void
test_reload_machine_call_finishes_on_its_settings(void **state)
{
	static const char *THREE = "service=StockService\n"
	                           "breaker.consecutive_failures=100\n"
	                           "retry.max_attempts=3\n"
	                           "retry.delay=0\n";
	rfx f;
	resil_diag diag;
	resil_call c;
	resil_call_next st;
	resil_args args;
	resil_result res;
	resil_breaker *old_b;
	uint32_t attempts = 0;
	uint64_t now = 1000;

	(void)state;
	rfx_new(&f, THREE, NULL);
	old_b = resil_pipeline_breaker(f.p, NULL);
	args.method = "getStock";
	args.data = "k";
	args.len = 1;
	assert_int_equal(
	    resil_call_start(&c, f.p, NULL, &args, &res, now, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	/* While attempt 1 is out: one attempt, and a new breaker. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "breaker.consecutive_failures=50\n"
	                     "retry.max_attempts=1\n",
	                     &diag),
	    RESIL_OK);
	assert_ptr_not_equal(resil_pipeline_breaker(f.p, NULL), old_b);
	while (st.action != RESIL_CALL_DONE) {
		if (st.action == RESIL_CALL_RUN) {
			attempts++;
			assert_int_equal(
			    resil_call_report(&c, st.attempt, -1, NULL, now),
			    RESIL_OK);
		}
		assert_int_equal(resil_call_step(&c, now, &st), RESIL_OK);
	}
	/* Three attempts: the settings it started with. */
	assert_int_equal(attempts, 3);
	assert_int_equal(res.attempts, 3);
	resil_result_free(&res);
	/* A call started now makes one. */
	f.d.fail = 1;
	assert_int_equal(call1(&f, "getStock"), RESIL_E_CALL);
	assert_int_equal(f.d.calls, 1);
	resil_pipeline_free(f.p);
}

/* The attempts of one call through handle h. */
static uint32_t
attempts_of(rfx *f, const resil_method *h, const resil_args *args)
{
	resil_result r;
	uint32_t n;

	resil_result_init(&r);
	(void)resil_pipeline_call_method(f->p, h, args, dep_call, &f->d, &r);
	n = r.attempts;
	resil_result_free(&r);
	return n;
}

static void
test_reload_handles_follow_their_method(void **state)
{
	static const char *B = "service=StockService\n"
	                       "retry.max_attempts=1\n"
	                       "retry.delay=0\n"
	                       "getStock.retry.max_attempts=2\n";
	rfx f;
	resil_diag diag;
	const resil_method *h, *svc;
	resil_args args;

	(void)state;
	rfx_new(&f, B, NULL);
	assert_int_equal(resil_pipeline_method(f.p, "getStock", &h), RESIL_OK);
	assert_int_equal(resil_pipeline_method(f.p, "other", &svc), RESIL_OK);
	assert_string_equal(resil_method_name(h), "getStock");
	assert_string_equal(resil_method_name(svc), "");
	args.method = "getStock";
	args.data = "k";
	args.len = 1;
	f.d.fail = 1;
#define ATTEMPTS(handle) attempts_of(&f, (handle), &args)
	assert_int_equal(ATTEMPTS(h), 2);
	/* The method gets 4 attempts: the same handle resolves to them. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "retry.max_attempts=1\n"
	                     "retry.delay=0\n"
	                     "getStock.retry.max_attempts=4\n",
	                     &diag),
	    RESIL_OK);
	assert_int_equal(ATTEMPTS(h), 4);
	/* No longer declared: the service-level settings (1 attempt). */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "retry.max_attempts=1\n"
	                     "retry.delay=0\n",
	                     &diag),
	    RESIL_OK);
	assert_int_equal(ATTEMPTS(h), 1);
	assert_int_equal(resil_pipeline_method_count(f.p), 0);
	/* Declared again, with getPrice first: its own again. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "retry.max_attempts=1\n"
	                     "retry.delay=0\n"
	                     "getPrice.retry.max_attempts=5\n"
	                     "getStock.retry.max_attempts=3\n",
	                     &diag),
	    RESIL_OK);
	assert_int_equal(ATTEMPTS(h), 3);
	assert_int_equal(ATTEMPTS(svc), 1);
#undef ATTEMPTS
	resil_pipeline_free(f.p);
}

static void
test_reload_mock_specs_come_from_the_text(void **state)
{
	rfx f;
	resil_diag diag;
	resil_result r;

	(void)state;
	rfx_new(&f, "service=StockService\ngetStock.type=int\n", NULL);
	assert_int_equal(
	    resil_pipeline_set_mock(f.p, "getStock", "force:return 1", &diag),
	    RESIL_OK);
	resil_result_init(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_MOCK);
	resil_result_free(&r);
	/* The text has getStock.mock: it replaces the runtime switch. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "getStock.type=int\n"
	                     "getStock.mock=force:return 7\n",
	                     &diag),
	    RESIL_OK);
	resil_result_init(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 7);
	resil_result_free(&r);
	/* A bad spec in the text: refused at its line, the mock stays. */
	assert_int_equal(reload(&f,
	                     "service=StockService\n"
	                     "getStock.type=int\n"
	                     "getStock.mock=fail:\n",
	                     &diag),
	    RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, "b.conf:3:"));
	resil_result_init(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.value.u.i, 7);
	resil_result_free(&r);
	/* Without it: live again. */
	assert_int_equal(
	    reload(&f, "service=StockService\ngetStock.type=int\n", &diag),
	    RESIL_OK);
	resil_result_init(&r);
	assert_int_equal(call(&f, "getStock", &r), RESIL_OK);
	assert_int_equal(r.source, RESIL_SOURCE_LIVE);
	resil_result_free(&r);
	resil_pipeline_free(f.p);
}

static void
test_reload_from_file(void **state)
{
	rfx f;
	resil_diag diag;
	char path[] = "/tmp/resil-reload-XXXXXX";
	int fd;
	FILE *fp;

	(void)state;
	rfx_new(&f, TEXT_A, NULL);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs("service=StockService\n# a comment\nretry.max_attempts=0\n", fp);
	fclose(fp);
	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_pipeline_reload_file(f.p, path, &diag), RESIL_E_INVAL);
	assert_non_null(strstr(diag.msg, path));
	assert_non_null(strstr(diag.msg, ":3: retry.max_attempts"));
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("service=StockService\nretry.max_attempts=2\n", fp);
	fclose(fp);
	assert_int_equal(
	    resil_pipeline_reload_file(f.p, path, &diag), RESIL_OK);
	assert_null(resil_pipeline_breaker(f.p, NULL)); /* no breaker now */
	remove(path);
	resil_pipeline_free(f.p);
}

/* ---- memory ---- */

static void
test_reload_memory_is_bounded(void **state)
{
	static const char *X = "service=StockService\n"
	                       "breaker.consecutive_failures=3\n"
	                       "cache.max_entries=8\n"
	                       "getStock.type=int\n";
	static const char *Y = "service=StockService\n"
	                       "breaker.consecutive_failures=4\n"
	                       "cache.max_entries=9\n"
	                       "getStock.type=int\n"
	                       "getPrice.mock=force:return 1\n";
	count_alloc ca;
	rfx f;
	resil_diag diag;
	resil_call c;
	resil_call_next st;
	resil_args args;
	resil_result res;
	int64_t base;
	int i;

	(void)state;
	rfx_new(&f, X, ca_init(&ca));
	assert_int_equal(reload(&f, Y, &diag), RESIL_OK);
	assert_int_equal(reload(&f, X, &diag), RESIL_OK);
	base = __atomic_load_n(&ca.live, __ATOMIC_RELAXED);
	/* A machine call holds the settings it started with across 1000
	 * reloads: they stay, nothing else accumulates. */
	args.method = "getStock";
	args.data = "k";
	args.len = 1;
	assert_int_equal(
	    resil_call_start(&c, f.p, NULL, &args, &res, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_RUN);
	for (i = 0; i < 1000; i++) {
		assert_int_equal(reload(&f, i % 2 ? X : Y, &diag), RESIL_OK);
		assert_int_equal(call1(&f, "getStock"), RESIL_OK);
	}
	assert_true(__atomic_load_n(&ca.live, __ATOMIC_RELAXED) <= 3 * base);
	assert_int_equal(
	    resil_call_report(&c, st.attempt, 0, NULL, 1000), RESIL_OK);
	assert_int_equal(resil_call_step(&c, 1000, &st), RESIL_OK);
	assert_int_equal(st.action, RESIL_CALL_DONE);
	assert_int_equal(res.err, RESIL_OK);
	resil_result_free(&res);
	/* The next reload frees what the call held (Y then X: a fresh,
	 * empty cache, as at base). What stays beyond base is free shells,
	 * kept for reuse: at most one per settings that were alive at once
	 * (the current, the held, the one being built). */
	assert_int_equal(reload(&f, Y, &diag), RESIL_OK);
	assert_int_equal(reload(&f, X, &diag), RESIL_OK);
	assert_true(__atomic_load_n(&ca.live, __ATOMIC_RELAXED) <= base + 2);
	resil_pipeline_free(f.p);
	assert_int_equal(__atomic_load_n(&ca.live, __ATOMIC_RELAXED), 0);
}

/* ---- threads ---- */

enum { NTHREADS = 3, PER_THREAD = 3000, NRELOADS = 300 };

typedef struct worker {
	rfx *f;
	int machine; /* run calls through the machine, stepping slowly */
	uint64_t ok, bad;
} worker;

static void *
work(void *arg)
{
	worker *w = arg;
	resil_args args;
	int i;

	args.method = "getStock";
	args.data = "k";
	args.len = 1;
	for (i = 0; i < PER_THREAD; i++) {
		resil_result r;
		resil_err err;

		if (w->machine) {
			resil_call c;
			resil_call_next st;

			err = resil_call_start(
			    &c, w->f->p, NULL, &args, &r, 1000, &st);
			while (
			    err == RESIL_OK && st.action != RESIL_CALL_DONE) {
				if (st.action == RESIL_CALL_RUN)
					(void)resil_call_report(
					    &c, st.attempt, 0, NULL, 1000);
				err = resil_call_step(&c, 1000, &st);
			}
			err = err == RESIL_OK ? r.err : err;
		} else {
			err = resil_pipeline_call(
			    w->f->p, &args, dep_call, &w->f->d, &r);
		}
		if (err == RESIL_OK)
			w->ok++;
		else
			w->bad++;
		resil_result_free(&r);
	}
	return NULL;
}

static void
test_reload_threads_calls_while_reloading(void **state)
{
	static const char *X = "service=StockService\n"
	                       "breaker.consecutive_failures=3\n"
	                       "retry.max_attempts=2\n"
	                       "getStock.type=int\n";
	static const char *Y = "service=StockService\n"
	                       "breaker.consecutive_failures=5\n"
	                       "retry.max_attempts=3\n"
	                       "cache.max_entries=4\n"
	                       "getStock.type=int\n"
	                       "getStock.timeout=5s\n";
	count_alloc ca;
	rfx f;
	worker w[NTHREADS];
	pthread_t t[NTHREADS];
	resil_diag diag;
	resil_pipeline_metrics m;
	int64_t base;
	int i;

	(void)state;
	rfx_new(&f, X, ca_init(&ca));
	assert_int_equal(reload(&f, Y, &diag), RESIL_OK);
	assert_int_equal(reload(&f, X, &diag), RESIL_OK);
	base = __atomic_load_n(&ca.live, __ATOMIC_RELAXED);
	for (i = 0; i < NTHREADS; i++) {
		w[i].f = &f;
		w[i].machine = i == 0;
		w[i].ok = w[i].bad = 0;
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (i = 0; i < NRELOADS; i++)
		assert_int_equal(reload(&f, i % 2 ? X : Y, &diag), RESIL_OK);
	for (i = 0; i < NTHREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].ok, PER_THREAD);
		assert_int_equal(w[i].bad, 0);
	}
	assert_int_equal(resil_pipeline_get_metrics(f.p, &m), RESIL_OK);
	assert_int_equal(m.calls, (uint64_t)NTHREADS * PER_THREAD);
	/* Every replaced settings is freed by the next reload once its
	 * calls are done; beyond base only free shells stay (one per
	 * settings alive at once: at most one per thread, the current and
	 * the one being built). */
	assert_int_equal(reload(&f, Y, &diag), RESIL_OK);
	assert_int_equal(reload(&f, X, &diag), RESIL_OK);
	assert_true(__atomic_load_n(&ca.live, __ATOMIC_RELAXED) <=
	    base + NTHREADS + 2);
	/* One event per reload (kept or counted as dropped). */
	assert_true(f.rec.count + f.rec.dropped >= NRELOADS + 3);
	assert_true(count_text(&f, "configuration reloaded") >= 1);
	resil_pipeline_free(f.p);
	assert_int_equal(__atomic_load_n(&ca.live, __ATOMIC_RELAXED), 0);
}

/* ---- with a selector ---- */

static int
ep_call(void *ctx, const resil_pick *endpoint, const resil_args *args,
    resil_value *out)
{
	(void)ctx;
	(void)endpoint;
	(void)args;
	*out = resil_value_int(3);
	return 0;
}

static void
test_reload_cluster_settings_are_fixed(void **state)
{
	fx cf;
	resil_endpoint_spec spec;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag diag;
	resil_args args;
	resil_result r;
	resil_method_config mc;

	(void)state;
	fx_init(&cf, 1000 * MS);
	cf.scfg.service = "StockService";
	assert_int_equal(fx_start(&cf), 0);
	spec = resil_endpoint_spec_default("e0:1");
	assert_int_equal(
	    resil_directory_push(cf.d, &spec, 1, &diag), RESIL_OK);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&cf.mc);
	cfg.selector = cf.sel;
	cfg.cluster.retries = 2;
	assert_int_equal(resil_pipeline_new(&p, &cfg, &diag), RESIL_OK);
	/* Reloaded from text: retries= differs, refused naming the key at
	 * its line (issue 38.10; before: "cluster: cannot change ..."). */
	diag.msg[0] = '\0';
	assert_int_equal(
	    resil_pipeline_reload_string(
	        p, "service=StockService\nretries=5\n", "c.conf", &diag),
	    RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "c.conf:2: retries (cluster.retries): cannot change by reload "
	    "(it is fixed when the pipeline is created; build a new pipeline "
	    "to change it)");
	/* In C: the key and its field. */
	cfg.cluster.retries = 4;
	assert_int_equal(resil_pipeline_reload(p, &cfg, &diag), RESIL_E_INVAL);
	assert_string_equal(diag.msg,
	    "retries (cluster.retries): cannot change by reload (it is fixed "
	    "when the pipeline is created; build a new pipeline to change "
	    "it)");
	cfg.cluster.retries = 2;
	/* The same cluster settings, a method's own retries: accepted. */
	memset(&mc, 0, sizeof(mc));
	mc.name = "getStock";
	mc.max_attempts = 4;
	cfg.selector = NULL; /* NULL keeps the pipeline's */
	cfg.methods = &mc;
	cfg.nmethods = 1;
	assert_int_equal(resil_pipeline_reload(p, &cfg, &diag), RESIL_OK);
	assert_ptr_equal(resil_pipeline_selector(p), cf.sel);
	args.method = "getStock";
	args.data = "k";
	args.len = 1;
	resil_result_init(&r);
	assert_int_equal(
	    resil_pipeline_invoke(p, NULL, &args, ep_call, NULL, &r),
	    RESIL_OK);
	assert_int_equal(r.value.u.i, 3);
	resil_result_free(&r);
	resil_pipeline_free(p);
	fx_end(&cf);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_reload_invalid_text_is_refused_with_line),
		cmocka_unit_test(test_reload_fixed_settings_are_refused),
		cmocka_unit_test(
		    test_reload_open_breaker_survives_retry_change),
		cmocka_unit_test(test_reload_breaker_change_starts_closed),
		cmocka_unit_test(test_reload_per_method_breakers_and_cache),
		cmocka_unit_test(
		    test_reload_machine_call_finishes_on_its_settings),
		cmocka_unit_test(test_reload_handles_follow_their_method),
		cmocka_unit_test(test_reload_mock_specs_come_from_the_text),
		cmocka_unit_test(test_reload_from_file),
		cmocka_unit_test(test_reload_memory_is_bounded),
		cmocka_unit_test(test_reload_threads_calls_while_reloading),
		cmocka_unit_test(test_reload_cluster_settings_are_fixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Issue 38.2: what a reload or a registry source hands to a borrowed
 * selector must not depend on the giver's lifetime. The condition rules a
 * text reload or a source gives the selector are freed by the selector,
 * after the pipeline or the source is gone (the documented order): before
 * the fix they were allocated with the pipeline's allocator and kept the
 * address of the pipeline's copy of it, so resil_selector_free() read the
 * freed pipeline and called a function pointer found there (ASan:
 * heap-use-after-free in resil_selector_free).
 *
 * Each giver here allocates through a "closing" allocator: once the giver
 * is freed, its allocator must hold nothing (every byte it gave is back)
 * and must never be called again; a call after closing is counted and
 * fails the test, in the plain build as under ASan.
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
#include <unistd.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/router.h>
#include <resil/selector.h>
#include <resil/source.h>

/* Counts live bytes; after closing, every call is counted in .after.
 * Thread-safe (a source's thread allocates too). */
typedef struct closing {
	pthread_mutex_t mu;
	size_t live;    /* bytes allocated and not freed */
	size_t blocks;  /* blocks allocated and not freed */
	int closed;     /* the giver is freed */
	unsigned after; /* calls after closing */
} closing;

static void *
c_alloc(size_t size, void *ctx)
{
	closing *c = ctx;
	void *p = malloc(size == 0 ? 1 : size);

	pthread_mutex_lock(&c->mu);
	c->after += c->closed ? 1u : 0u;
	if (p != NULL) {
		c->live += size;
		c->blocks++;
	}
	pthread_mutex_unlock(&c->mu);
	return p;
}

static void
c_free(void *ptr, size_t size, void *ctx)
{
	closing *c = ctx;

	if (ptr == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->after += c->closed ? 1u : 0u;
	c->live -= size;
	c->blocks--;
	pthread_mutex_unlock(&c->mu);
	free(ptr);
}

static resil_allocator
closing_init(closing *c)
{
	resil_allocator a;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	a.alloc = c_alloc;
	a.free = c_free;
	a.ctx = c;
	return a;
}

/* The giver is gone: nothing of its allocator may stay or be used. */
static void
closing_close(closing *c)
{
	size_t blocks, live;

	pthread_mutex_lock(&c->mu);
	blocks = c->blocks;
	live = c->live;
	c->closed = 1;
	pthread_mutex_unlock(&c->mu);
	if (blocks != 0)
		fail_msg("%zu blocks (%zu bytes) of the freed object's "
		         "allocator are still allocated",
		    blocks, live);
}

static void
closing_done(closing *c)
{
	assert_int_equal(c->after, 0);
	assert_int_equal(c->blocks, 0);
	pthread_mutex_destroy(&c->mu);
}

/* Calls through this allocator fail the test: an allocator struct that
 * went out of scope. */
static void *
poison_alloc(size_t size, void *ctx)
{
	(void)size;
	(void)ctx;
	fail_msg("an allocator struct was used after its scope ended");
	return NULL;
}

static void
poison_free(void *ptr, size_t size, void *ctx)
{
	(void)ptr;
	(void)size;
	(void)ctx;
	fail_msg("an allocator struct was used after its scope ended");
}

#define TEXT                       \
	"service=StockService\n"   \
	"cluster=failover\n"       \
	"loadbalance=roundrobin\n" \
	"router.condition=method = getPrice => tier = premium\n"

/* The documented order: pipeline, selector, directory. The pipeline's
 * allocator is closed when the pipeline is freed. */
static void
test_selector_reload_rules_outlive_the_pipeline(void **state)
{
	closing pa, sa;
	resil_allocator pal = closing_init(&pa), sal = closing_init(&sa);
	resil_config *conf;
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	resil_directory *dir;
	resil_selector *sel;
	resil_pipeline *p;
	resil_diag d;

	(void)state;
	assert_int_equal(
	    resil_config_parse_string(&conf, TEXT, "svc.conf", NULL, &d),
	    RESIL_OK);
	resil_directory_config_init(&dc);
	resil_config_directory(conf, &dc);
	resil_config_selector(conf, &sc);
	sc.alloc = &sal;
	pc = *resil_config_pipeline(conf);
	pc.alloc = &pal;
	assert_int_equal(resil_directory_new(&dir, &dc, &d), RESIL_OK);
	assert_int_equal(resil_selector_new(&sel, dir, &sc, &d), RESIL_OK);
	pc.selector = sel;
	if (resil_pipeline_new(&p, &pc, &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	/* Two new rules: the selector owns them from now on. */
	if (resil_pipeline_reload_string(p,
	        "service=StockService\ncluster=failover\n"
	        "loadbalance=roundrobin\n"
	        "router.condition=method = getStock => tier = premium\n"
	        "router.condition=method = getPrice => tier = basic\n",
	        "svc.conf", &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	assert_int_equal(resil_selector_condition_count(sel), 2);
	resil_pipeline_free(p);
	closing_close(&pa);
	/* The rules are still routed by, then freed, by the selector. */
	assert_int_equal(resil_selector_condition_count(sel), 2);
	resil_selector_free(sel);
	closing_done(&pa);
	closing_done(&sa);
	resil_directory_free(dir);
	resil_config_free(conf);
}

/* A rule made by hand keeps a copy of its allocator: the struct it was
 * parsed with may go out of scope (resil_condition_parse() copies it, as
 * every constructor of the library copies *alloc). */
static void
test_selector_rule_keeps_its_allocator(void **state)
{
	closing ra;
	resil_allocator ral = closing_init(&ra);
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_condition *rule;
	resil_directory *dir;
	resil_selector *sel;
	resil_diag d;

	(void)state;
	assert_int_equal(resil_directory_new(&dir, &dc, &d), RESIL_OK);
	assert_int_equal(resil_selector_new(&sel, dir, &sc, &d), RESIL_OK);
	assert_int_equal(resil_condition_parse(
	                     &rule, "method = a => zone = hz", 0, &ral, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_selector_set_conditions(sel, &rule, 1, &d), RESIL_OK);
	/* The struct's scope ends (its ctx lives on, as documented). */
	ral.alloc = poison_alloc;
	ral.free = poison_free;
	ral.ctx = NULL;
	resil_selector_free(sel);
	resil_directory_free(dir);
	assert_int_equal(ra.blocks, 0);
	closing_done(&ra);
}

#define SVC "org.apache.dubbo.demo.DemoService"

/* A registry source's condition rules (here from its cache file, as a
 * consumer that starts while ZooKeeper is down gets them): the source is
 * freed before the selector (resil_source_free() "before sel and dir");
 * its allocator, and the allocator struct it was given, are then gone. */
static void
test_selector_source_rules_outlive_the_source(void **state)
{
	static const char text[] =
	    SVC "=dubbo\\://10.0.0.1\\:20880/" SVC "?application\\=demo "
	        "condition\\://0.0.0.0/" SVC "?category\\=routers&rule\\="
	        "%3D%3E+host+%21%3D+10.0.0.2\n";
	closing qa, sa;
	resil_allocator qal = closing_init(&qa), sal = closing_init(&sa);
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_source_config rc = resil_source_config_default();
	resil_registry_source *src;
	resil_directory *dir;
	resil_selector *sel;
	resil_diag d;
	char file[96];
	FILE *fp;
	int fd;

	(void)state;
	snprintf(
	    file, sizeof(file), "/tmp/resil-owner-%ld-XXXXXX", (long)getpid());
	fd = mkstemp(file);
	assert_true(fd >= 0);
	close(fd);
	fp = fopen(file, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	assert_int_equal(resil_directory_new(&dir, &dc, &d), RESIL_OK);
	sc.alloc = &sal;
	assert_int_equal(resil_selector_new(&sel, dir, &sc, &d), RESIL_OK);
	rc.registry = "zookeeper://127.0.0.1:1"; /* no one listens */
	rc.service = SVC;
	rc.file = file;
	rc.directory = dir;
	rc.selector = sel;
	rc.alloc = &qal;
	if (resil_source_new(&src, &rc, &d) != RESIL_OK)
		fail_msg("%s", d.msg);
	/* The cache file's rule is the selector's now. */
	assert_int_equal(resil_selector_condition_count(sel), 1);
	resil_source_free(src);
	closing_close(&qa);
	qal.alloc = poison_alloc;
	qal.free = poison_free;
	qal.ctx = NULL;
	assert_int_equal(resil_selector_condition_count(sel), 1);
	resil_selector_free(sel);
	closing_done(&qa);
	closing_done(&sa);
	resil_directory_free(dir);
	unlink(file);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_selector_reload_rules_outlive_the_pipeline),
		cmocka_unit_test(test_selector_rule_keeps_its_allocator),
		cmocka_unit_test(
		    test_selector_source_rules_outlive_the_source),
	};

	return cmocka_run_group_tests_name(
	    "selector_ownership", tests, NULL, NULL);
}

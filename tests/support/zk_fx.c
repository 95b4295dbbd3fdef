#define _GNU_SOURCE 1

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "zk_fx.h"

zk_server zk_srv;
zhandle_t *zk_prov;
static int have_server;

int
zk_group_setup(void **state)
{
	const char *me = program_invocation_short_name;

	(void)state;
	if (!zk_installed()) {
		fprintf(stderr,
		    "%s: java or the zookeeper jar is not installed "
		    "(tools/install-deps.sh installs them); the ZooKeeper "
		    "tests are skipped\n",
		    me);
		return 0;
	}
	/* The C client formats the endpoint of its log lines in one static
	 * buffer (format_endpoint_info): two handles of one process that
	 * log at once race on it (TSan sees it; the text is all that can
	 * suffer, and resil drops the lines). The level is the process's:
	 * this one logs nothing. */
	zoo_set_debug_level((ZooLogLevel)0);
	if (zk_start(&zk_srv) != 0) {
		fprintf(stderr,
		    "%s: cannot start ZooKeeper on 127.0.0.1:%d (log in %s)\n",
		    me, zk_srv.port, zk_srv.dir);
		return -1;
	}
	if ((zk_prov = zk_connect(&zk_srv)) == NULL)
		return -1;
	have_server = 1;
	return 0;
}

int
zk_group_teardown(void **state)
{
	(void)state;
	if (zk_prov != NULL)
		zookeeper_close(zk_prov);
	zk_prov = NULL;
	zk_stop(&zk_srv);
	have_server = 0;
	return 0;
}

void
zk_need_server(void)
{
	if (!have_server)
		skip();
}

void
zk_heard_init(zk_heard *h)
{
	memset(h->n, 0, sizeof(h->n));
	memset(h->msg, 0, sizeof(h->msg));
	pthread_mutex_init(&h->mu, NULL);
}

void
zk_heard_destroy(zk_heard *h)
{
	pthread_mutex_destroy(&h->mu);
}

void
zk_heard_event(const resil_source_event *ev, void *ctx)
{
	zk_heard *h = ctx;

	pthread_mutex_lock(&h->mu);
	if ((unsigned)ev->type < ZK_EVENT_TYPES) {
		h->n[ev->type]++;
		snprintf(
		    h->msg[ev->type], sizeof(h->msg[0]), "%s", ev->message);
	}
	pthread_mutex_unlock(&h->mu);
}

unsigned
zk_heard_n(zk_heard *h, resil_source_event_type t)
{
	unsigned n;

	pthread_mutex_lock(&h->mu);
	n = h->n[t];
	pthread_mutex_unlock(&h->mu);
	return n;
}

void
zk_heard_last(zk_heard *h, resil_source_event_type t, char *msg, size_t len)
{
	pthread_mutex_lock(&h->mu);
	snprintf(msg, len, "%s", h->msg[t]);
	pthread_mutex_unlock(&h->mu);
}

void
zk_source_config(resil_source_config *sc, char *reg, size_t n,
    const char *hosts, const char *service, resil_directory *dir,
    resil_selector *sel, zk_heard *h)
{
	*sc = resil_source_config_default();
	snprintf(reg, n, "zookeeper://%s", hosts);
	sc->registry = reg;
	sc->service = service;
	sc->directory = dir;
	sc->selector = sel;
	sc->listener = zk_heard_event;
	sc->listener_ctx = h;
	sc->session_timeout_ms = 20000;
}

typedef struct heard_want {
	zk_heard *h;
	resil_source_event_type t;
	unsigned n;
} heard_want;

static int
heard_at_least(void *ctx)
{
	heard_want *w = ctx;

	return zk_heard_n(w->h, w->t) >= w->n;
}

void
zk_wait_heard(
    zk_heard *h, resil_source_event_type t, unsigned n, const char *service)
{
	heard_want w = { h, t, n };

	if (!zk_wait(heard_at_least, &w, ZK_WAIT_MS))
		fail_msg("%s: %u %s events, waited for %u", service,
		    zk_heard_n(h, t), resil_source_event_name(t), n);
}

typedef struct count_want {
	resil_directory *dir;
	size_t n;
} count_want;

static int
count_is(void *ctx)
{
	count_want *w = ctx;

	return resil_directory_count(w->dir) == w->n;
}

void
zk_wait_count(resil_directory *dir, size_t n, const char *service)
{
	count_want w = { dir, n };

	if (!zk_wait(count_is, &w, ZK_WAIT_MS))
		fail_msg("%s: %zu endpoints, waited for %zu", service,
		    resil_directory_count(dir), n);
}

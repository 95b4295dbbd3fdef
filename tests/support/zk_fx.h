/*
 * What the ZooKeeper tests share (test_source_zookeeper, test_console,
 * test_source_zk_rules): one server per test program (zk_server.h),
 * started by the cmocka group setup, and a session of the test's own for
 * the providers' and the console's writes; what a source's listener
 * heard; the bounded waits, which fail the test saying what they saw.
 *
 * Without java or the zookeeper jar the group setup says so on stderr and
 * succeeds: each test that needs the server calls zk_need_server() first
 * and is skipped. Include cmocka.h before this header.
 */
#ifndef RESIL_TEST_ZK_FX_H
#define RESIL_TEST_ZK_FX_H

#include <pthread.h>
#include <stddef.h>

#include <resil/directory.h>
#include <resil/selector.h>
#include <resil/source.h>

#include "zk_server.h"

/* Bounded waits: generous, for a loaded 2-core machine under TSan. */
#define ZK_WAIT_MS 30000

extern zk_server zk_srv;   /* the group's server */
extern zhandle_t *zk_prov; /* the providers' (and the console's) session */

/* cmocka's group setup and teardown of a ZooKeeper test program. */
int zk_group_setup(void **state);
int zk_group_teardown(void **state);

/* skip() the test when the group setup found no ZooKeeper. */
void zk_need_server(void);

/* What a source's listener heard: a count of each event type and its
 * last message. Safe from the source's thread. */
#define ZK_EVENT_TYPES 16

typedef struct zk_heard {
	pthread_mutex_t mu;
	unsigned n[ZK_EVENT_TYPES];
	char msg[ZK_EVENT_TYPES][RESIL_DIAG_MAX];
} zk_heard;

void zk_heard_init(zk_heard *h);
void zk_heard_destroy(zk_heard *h);
/* The listener (resil_source_listener_fn); ctx is a zk_heard. */
void zk_heard_event(const resil_source_event *ev, void *ctx);
unsigned zk_heard_n(zk_heard *h, resil_source_event_type t);
/* The last message of type t into msg. */
void zk_heard_last(
    zk_heard *h, resil_source_event_type t, char *msg, size_t len);

/* A source's configuration for service on hosts, as the tests make it:
 * registry zookeeper://hosts (written into reg[n], which must outlive the
 * config), directory, selector, the listener into h, a 20 s session. */
void zk_source_config(resil_source_config *sc, char *reg, size_t n,
    const char *hosts, const char *service, resil_directory *dir,
    resil_selector *sel, zk_heard *h);

/* Wait (ZK_WAIT_MS) until h heard n events of type t, or until dir holds
 * n endpoints; else fail the test, naming service and what was seen. */
void zk_wait_heard(
    zk_heard *h, resil_source_event_type t, unsigned n, const char *service);
void zk_wait_count(resil_directory *dir, size_t n, const char *service);

#endif

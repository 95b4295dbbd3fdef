/*
 * Private: Dubbo 3's routing rules in a ZooKeeper config center
 * (lib/source_zk_rules.c), for the ZooKeeper backend
 * (lib/source_zookeeper.c), which calls these from its client's
 * completion thread only.
 */
#ifndef RESIL_SOURCE_ZK_RULES_H
#define RESIL_SOURCE_ZK_RULES_H

#include "source_internal.h"

#include <pthread.h>

#include <zookeeper/zookeeper.h>

typedef struct resil__zk_rules resil__zk_rules;

/* The rules' watches of a source; *out NULL when w gives no selector.
 * RESIL_E_NOMEM. */
resil_err resil__zk_rules_new(resil__zk_rules **out,
    const resil__source_where *w, resil_registry_source *src);

/* Free them; after zookeeper_close() of every session (no callback may
 * run). NULL is a no-op. */
void resil__zk_rules_free(resil__zk_rules *r);

/* Count the rules' requests in flight under *mu (the backend's), *idle
 * broadcast when none is left: the backend closes a session only when
 * none is (the client leaks the watch registration of a request a close
 * cuts short). Until called, nothing is counted. NULL r: a no-op. */
void resil__zk_rules_track(
    resil__zk_rules *r, pthread_mutex_t *mu, pthread_cond_t *idle);

/* The rules' requests in flight (the caller holds the tracking mutex);
 * 0 for NULL. */
int resil__zk_rules_inflight(const resil__zk_rules *r);

/* A session is connected: read every rule node again and watch it. */
void resil__zk_rules_connected(resil__zk_rules *r, zhandle_t *zh);

/* The provider list (URL-encoded names): the providers' application names
 * the tag rule's node. */
void resil__zk_rules_providers(
    resil__zk_rules *r, zhandle_t *zh, const char *const *names, size_t n);

#endif /* RESIL_SOURCE_ZK_RULES_H */

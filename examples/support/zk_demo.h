/*
 * The demo side of the ZooKeeper examples (zookeeper.c, console_switch.c):
 * a ZooKeeper session of the example's own that writes what Dubbo's
 * providers and console write, so that an example runs against any empty
 * server. A consumer needs none of this. Every failure ends the program
 * with a line on stderr naming who (the example).
 */
#ifndef RESIL_EXAMPLE_ZK_DEMO_H
#define RESIL_EXAMPLE_ZK_DEMO_H

#include <zookeeper/zookeeper.h>

/* A session to hosts, connected (a bounded wait of 30 s). */
zhandle_t *demo_session(const char *who, const char *hosts);

/* The persistent node path and its parents, as needed. */
void demo_mkdirs(const char *who, zhandle_t *zh, const char *path);

/* Create (create != 0: ephemeral under providers, else persistent) or
 * delete the node /dubbo/SERVICE/CAT/URL.encode(url), the name Dubbo
 * gives a provider's or an override rule's node. */
void demo_node(const char *who, zhandle_t *zh, const char *service,
    const char *cat, const char *url, int create);

#endif

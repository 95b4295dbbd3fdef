/*
 * A ZooKeeper server for tests: Debian's zookeeper package run from its
 * jar (ZooKeeperServerMain) on 127.0.0.1 on a free port with a temporary
 * data directory, killed and restarted on the same port and directory,
 * and the client calls a test makes as a Dubbo provider would (ephemeral
 * provider nodes through a session of its own) or as an operator would
 * (routers, the session expiry trick). Readiness is polled with a bounded
 * deadline; nothing here sleeps for a timing assertion.
 */
#ifndef RESIL_TEST_ZK_SERVER_H
#define RESIL_TEST_ZK_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include <zookeeper/zookeeper.h>

typedef struct zk_server {
	int pid;
	int port;
	char dir[64];
	char hosts[32]; /* "127.0.0.1:PORT" */
} zk_server;

/* 1 when java and the zookeeper jar are installed. */
int zk_installed(void);

/* Start a server on a free port in a new temporary directory; 0 when it
 * answers, -1 otherwise. */
int zk_start(zk_server *z);

/* Kill it (SIGKILL, as a crash), keeping the port and the directory. */
void zk_kill(zk_server *z);

/* Start it again on the same port and directory; 0 when it answers. */
int zk_restart(zk_server *z);

/* Kill it and remove its directory. */
void zk_stop(zk_server *z);

/* A session to z, connected (bounded wait); NULL on failure. */
zhandle_t *zk_connect(const zk_server *z);

/* java.net.URLEncoder.encode(s, "UTF-8") into a new malloc'd string. */
char *zk_encode(const char *s);

/* Create path and its parents (persistent); ZOK or ZNODEEXISTS is fine. */
int zk_mkdirs(zhandle_t *zh, const char *path);

/* Write data into path as the console does: created (parents too) or,
 * when it exists, set. ZOK or the client's error. */
int zk_put(zhandle_t *zh, const char *path, const char *data);

/* An operator's routing rule as Dubbo's admin writes it: a forced
 * condition://0.0.0.0/<service>?...&rule=URL.encode(rule) node, its name
 * encoded, under /dubbo/<service>/routers. The node's name (malloc'd: for
 * zk_delete_raw(zh, service, "routers", name), then free), NULL on
 * failure. */
char *zk_route(zhandle_t *zh, const char *service, const char *rule);

/* Register a provider URL as Dubbo does: an ephemeral node named
 * URL.encode(url) under /dubbo/<service>/providers (created as needed).
 * 0 on success. */
int zk_register(zhandle_t *zh, const char *service, const char *url);

/* Remove it. 0 on success. */
int zk_unregister(zhandle_t *zh, const char *service, const char *url);

/* Create a node of any name under /dubbo/<service>/<cat> (raw: the name
 * as given, not encoded); persistent when ephemeral is 0. */
int zk_create_raw(zhandle_t *zh, const char *service, const char *cat,
    const char *name, int ephemeral);
int zk_delete_raw(
    zhandle_t *zh, const char *service, const char *cat, const char *name);

/* The expiry trick: a second handle with the session's id and password
 * connects, leaves an ephemeral node of the session, then closes, which
 * ends the session on the server. 0 once the server has ended it (the
 * node is gone, checked from a third session), -1 otherwise.
 *
 * The session's own client must not reach the server meanwhile: it would
 * take the session back (the server moves a session to its latest
 * connection) and the close would fail with "session moved". Run the
 * client through a zk_proxy and cut it first. */
int zk_expire(const zk_server *z, int64_t id, const char *passwd);

/* A TCP relay on a free port of 127.0.0.1 in front of z, run by a thread
 * of its own, that a test can cut: zk_proxy_cut(p, 1) drops every relayed
 * connection and refuses new ones (accepted, then closed) until
 * zk_proxy_cut(p, 0); it returns once the connections are closed. */
typedef struct zk_proxy zk_proxy;

zk_proxy *zk_proxy_start(const zk_server *z);
const char *zk_proxy_hosts(const zk_proxy *p); /* "127.0.0.1:PORT" */
void zk_proxy_cut(zk_proxy *p, int cut);
void zk_proxy_stop(zk_proxy *p); /* NULL: nothing */

/* Poll until cond(ctx) is nonzero, 2 ms apart, for at most ms; returns
 * the last cond. */
int zk_wait(int (*cond)(void *ctx), void *ctx, int ms);

#endif

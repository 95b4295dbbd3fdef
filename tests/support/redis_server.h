/*
 * A redis-server for tests: Debian's redis-server on 127.0.0.1 on a free
 * port, without persistence, killed (SIGKILL, as a crash) and started
 * again on the same port. The server dies with the test
 * (PR_SET_PDEATHSIG). Readiness is polled with a bounded deadline;
 * nothing here sleeps for a timing assertion.
 */
#ifndef RESIL_TEST_REDIS_SERVER_H
#define RESIL_TEST_REDIS_SERVER_H

typedef struct redis_server {
	int pid; /* -1: not running */
	int port;
} redis_server;

/* 1 when redis-server is on the PATH. */
int redis_installed(void);

/* Start a server on a free port: 0 when it answers PING, -1 otherwise. */
int redis_start(redis_server *s);

/* Kill it (SIGKILL), keeping the port. */
void redis_kill(redis_server *s);

/* Start it again on the same port (empty): 0 when it answers. */
int redis_restart(redis_server *s);

#endif

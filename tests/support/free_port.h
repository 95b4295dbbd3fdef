/*
 * A free TCP port on 127.0.0.1 for a server a test starts (Redis,
 * sentinels, ZooKeeper): bound to port 0, asked which port the kernel
 * gave, closed. Another process may take it before the server binds it;
 * the callers' start loops see that as a server that never answers.
 * Header-only: tests/support/ files and tests built by hand include it.
 */
#ifndef RESIL_TEST_FREE_PORT_H
#define RESIL_TEST_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The port, or -1 when no socket could be bound. */
static inline int
free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), p = -1;

	if (s < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(s, (struct sockaddr *)&a, &len) == 0)
		p = ntohs(a.sin_port);
	close(s);
	return p;
}

#endif

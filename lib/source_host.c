/*
 * The address a consumer registers with, as Dubbo's NetUtils.getLocalHost
 * finds it: DUBBO_IP_TO_REGISTRY when set (Dubbo's own override), else the
 * first IPv4 address of an interface that is up and not a loopback, else
 * 127.0.0.1. The console targets a consumer by this address.
 */
#define _DEFAULT_SOURCE 1

#include "source_internal.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>

void
resil__local_host(char *buf, size_t n)
{
	const char *env = getenv("DUBBO_IP_TO_REGISTRY");
	struct ifaddrs *ifs = NULL, *i;

	(void)snprintf(buf, n, "127.0.0.1");
	if (env != NULL && env[0] != '\0') {
		(void)snprintf(buf, n, "%s", env);
		return;
	}
	if (getifaddrs(&ifs) != 0)
		return;
	for (i = ifs; i != NULL; i = i->ifa_next) {
		if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_UP) == 0 ||
		    (i->ifa_flags & IFF_LOOPBACK) != 0)
			continue;
		if (inet_ntop(AF_INET,
		        &((const struct sockaddr_in *)(const void *)
		                i->ifa_addr)
		             ->sin_addr,
		        buf, (socklen_t)n) != NULL)
			break;
	}
	freeifaddrs(ifs);
}

/* The ZooKeeper examples' demo side: see zk_demo.h. */
#define _POSIX_C_SOURCE 200809L

#include "zk_demo.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
no_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)type;
	(void)state;
	(void)path;
	(void)ctx;
}

static void
quiet(const char *m)
{
	(void)m;
}

zhandle_t *
demo_session(const char *who, const char *hosts)
{
	zhandle_t *zh =
	    zookeeper_init2(hosts, no_watch, 30000, NULL, NULL, 0, quiet);
	int i;

	for (i = 0; zh != NULL && i < 15000; i++) {
		if (zoo_state(zh) == ZOO_CONNECTED_STATE)
			return zh;
		(void)poll(NULL, 0, 2);
	}
	fprintf(stderr, "%s: no ZooKeeper at %s\n", who, hosts);
	exit(1);
}

void
demo_mkdirs(const char *who, zhandle_t *zh, const char *path)
{
	char buf[1024];
	char *slash = buf;
	int rc;

	snprintf(buf, sizeof(buf), "%s", path);
	do {
		slash = strchr(slash + 1, '/');
		if (slash != NULL)
			*slash = '\0';
		rc = zoo_create(
		    zh, buf, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
		if (rc != ZOK && rc != ZNODEEXISTS) {
			fprintf(stderr, "%s: cannot create %s\n", who, buf);
			exit(1);
		}
		if (slash != NULL)
			*slash = '/';
	} while (slash != NULL);
}

/* java.net.URLEncoder.encode, as Dubbo's URL.encode. */
static void
encode(char *out, size_t n, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s != '\0' && o + 4 < n; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == '*' || c == '_')
			out[o++] = (char)c;
		else if (c == ' ')
			out[o++] = '+';
		else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
}

void
demo_node(const char *who, zhandle_t *zh, const char *service, const char *cat,
    const char *url, int create)
{
	char enc[1024], path[1200];
	int ephemeral = strcmp(cat, "providers") == 0;

	encode(enc, sizeof(enc), url);
	snprintf(path, sizeof(path), "/dubbo/%s/%s/%s", service, cat, enc);
	if (create ? zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
	                 ephemeral ? ZOO_EPHEMERAL : 0, NULL, 0) != ZOK
	           : zoo_delete(zh, path, -1) != ZOK) {
		fprintf(stderr, "%s: cannot write %s\n", who, path);
		exit(1);
	}
}

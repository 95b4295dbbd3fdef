#define _GNU_SOURCE 1

#include "zk_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "free_port.h"

#define ZK_JAR "/usr/share/java/zookeeper.jar"

/* Bounded waits. A JVM start is 1-2 s; a loaded machine (sanitizers,
 * parallel builds) may take several times that. */
#define START_MS 60000
#define CONNECT_MS 30000

static void
nap_ms(int ms)
{
	(void)poll(NULL, 0, ms);
}

int
zk_wait(int (*cond)(void *ctx), void *ctx, int ms)
{
	int i, r = 0;

	for (i = 0; i <= ms / 2; i++) {
		if ((r = cond(ctx)) != 0)
			return r;
		nap_ms(2);
	}
	return cond(ctx);
}

static int
on_path(const char *exe)
{
	const char *path = getenv("PATH");
	char buf[4096], *save = NULL, *dir;

	if (path == NULL)
		path = "/usr/bin:/bin";
	snprintf(buf, sizeof(buf), "%s", path);
	for (dir = strtok_r(buf, ":", &save); dir != NULL;
	     dir = strtok_r(NULL, ":", &save)) {
		char full[4200];

		snprintf(full, sizeof(full), "%s/%s", dir, exe);
		if (access(full, X_OK) == 0)
			return 1;
	}
	return 0;
}

int
zk_installed(void)
{
	return on_path("java") && access(ZK_JAR, R_OK) == 0;
}


/* The four-letter word srvr: "Mode: standalone" once it serves. */
static int
answers(const zk_server *z)
{
	struct sockaddr_in a;
	struct pollfd pf;
	char buf[1024];
	size_t got = 0;
	int s = socket(AF_INET, SOCK_STREAM, 0), ok = 0, i;

	if (s < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)z->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(s, "srvr", 4) != 4) {
		close(s);
		return 0;
	}
	pf.fd = s;
	pf.events = POLLIN;
	for (i = 0; i < 100 && got < sizeof(buf) - 1; i++) {
		ssize_t r;

		if (poll(&pf, 1, 20) <= 0)
			continue;
		r = read(s, buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	ok = strstr(buf, "Mode: standalone") != NULL;
	close(s);
	return ok;
}

static int
spawn(zk_server *z)
{
	char port[16], log[96];
	int i;

	snprintf(port, sizeof(port), "%d", z->port);
	snprintf(log, sizeof(log), "%s/server.log", z->dir);
	z->pid = fork();
	if (z->pid < 0)
		return -1;
	if (z->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int null = open("/dev/null", O_RDONLY);
		char data[80];

		/* Never outlive the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (null >= 0)
			dup2(null, 0);
		snprintf(data, sizeof(data), "%s/data", z->dir);
		/* A small, quick JVM; no fsync (the data directory is a
		 * test's), no admin HTTP server, srvr for readiness. */
		execlp("java", "java", "-Xms16m", "-Xmx256m",
		    "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		    "-Dzookeeper.admin.enableServer=false",
		    "-Dzookeeper.forceSync=no",
		    "-Dzookeeper.4lw.commands.whitelist=srvr",
		    "-Djute.maxbuffer=16777216", "-cp", ZK_JAR,
		    "org.apache.zookeeper.server.ZooKeeperServerMain", port,
		    data, (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < START_MS / 10; i++) {
		int st;

		if (answers(z))
			return 0;
		if (waitpid(z->pid, &st, WNOHANG) == z->pid) {
			z->pid = -1;
			return -1;
		}
		nap_ms(10);
	}
	zk_kill(z);
	return -1;
}

int
zk_start(zk_server *z)
{
	memset(z, 0, sizeof(*z));
	z->pid = -1;
	snprintf(z->dir, sizeof(z->dir), "/tmp/resil-zk-XXXXXX");
	if (mkdtemp(z->dir) == NULL)
		return -1;
	if ((z->port = free_port()) <= 0)
		return -1;
	snprintf(z->hosts, sizeof(z->hosts), "127.0.0.1:%d", z->port);
	return spawn(z);
}

int
zk_restart(zk_server *z)
{
	int i, r = -1;

	/* The port may linger a moment after the kill. */
	for (i = 0; i < 20 && r != 0; i++) {
		r = spawn(z);
		if (r != 0)
			nap_ms(100);
	}
	return r;
}

void
zk_kill(zk_server *z)
{
	if (z->pid > 0) {
		kill(z->pid, SIGKILL);
		(void)waitpid(z->pid, NULL, 0);
	}
	z->pid = -1;
}

static int
rm_one(const char *path, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(path);
}

void
zk_stop(zk_server *z)
{
	zk_kill(z);
	if (z->dir[0] != '\0')
		(void)nftw(z->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	z->dir[0] = '\0';
}

static void
quiet(const char *m)
{
	(void)m;
}

static void
no_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx)
{
	(void)zh;
	(void)type;
	(void)state;
	(void)path;
	(void)ctx;
}

static int
is_connected(void *ctx)
{
	return zoo_state((zhandle_t *)ctx) == ZOO_CONNECTED_STATE;
}

static zhandle_t *
connect_as(const zk_server *z, const clientid_t *id)
{
	zhandle_t *zh =
	    zookeeper_init2(z->hosts, no_watch, 30000, id, NULL, 0, quiet);

	if (zh == NULL)
		return NULL;
	if (!zk_wait(is_connected, zh, CONNECT_MS)) {
		zookeeper_close(zh);
		return NULL;
	}
	return zh;
}

zhandle_t *
zk_connect(const zk_server *z)
{
	return connect_as(z, NULL);
}

char *
zk_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = malloc(3 * strlen(s) + 1), *p = o;

	if (o == NULL)
		return NULL;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		    c == '*' || c == '_')
			*p++ = (char)c;
		else if (c == ' ')
			*p++ = '+';
		else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return o;
}

int
zk_mkdirs(zhandle_t *zh, const char *path)
{
	char buf[1024];
	size_t i;
	int rc = ZOK;

	snprintf(buf, sizeof(buf), "%s", path);
	for (i = 1; buf[i - 1] != '\0'; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		{
			char c = buf[i];

			buf[i] = '\0';
			rc = zoo_create(zh, buf, NULL, -1,
			    &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
			buf[i] = c;
			if (rc != ZOK && rc != ZNODEEXISTS)
				return rc;
		}
		if (buf[i] == '\0')
			break;
	}
	return ZOK;
}

int
zk_put(zhandle_t *zh, const char *path, const char *data)
{
	char dir[1024];
	const char *slash = strrchr(path, '/');
	int rc;

	if (slash == NULL || (size_t)(slash - path) >= sizeof(dir))
		return ZBADARGUMENTS;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (dir[0] != '\0' && (rc = zk_mkdirs(zh, dir)) != ZOK)
		return rc;
	rc = zoo_create(zh, path, data, (int)strlen(data),
	    &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
	if (rc == ZNODEEXISTS)
		rc = zoo_set(zh, path, data, (int)strlen(data), -1);
	return rc;
}

static int
node_path(char *buf, size_t n, const char *service, const char *cat,
    const char *name)
{
	return snprintf(buf, n, "/dubbo/%s/%s/%s", service, cat, name) <
	    (int)n;
}

int
zk_create_raw(zhandle_t *zh, const char *service, const char *cat,
    const char *name, int ephemeral)
{
	char dir[512], path[8192];
	int rc;

	snprintf(dir, sizeof(dir), "/dubbo/%s/%s", service, cat);
	if (zk_mkdirs(zh, dir) != ZOK ||
	    !node_path(path, sizeof(path), service, cat, name))
		return -1;
	rc = zoo_create(zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE,
	    ephemeral ? ZOO_EPHEMERAL : 0, NULL, 0);
	return rc == ZOK ? 0 : rc;
}

int
zk_delete_raw(
    zhandle_t *zh, const char *service, const char *cat, const char *name)
{
	char path[8192];

	if (!node_path(path, sizeof(path), service, cat, name))
		return -1;
	return zoo_delete(zh, path, -1) == ZOK ? 0 : -1;
}

int
zk_register(zhandle_t *zh, const char *service, const char *url)
{
	char *enc = zk_encode(url);
	int r =
	    enc != NULL ? zk_create_raw(zh, service, "providers", enc, 1) : -1;

	free(enc);
	return r;
}

int
zk_unregister(zhandle_t *zh, const char *service, const char *url)
{
	char *enc = zk_encode(url);
	int r =
	    enc != NULL ? zk_delete_raw(zh, service, "providers", enc) : -1;

	free(enc);
	return r;
}

char *
zk_route(zhandle_t *zh, const char *service, const char *rule)
{
	char url[1024], *enc = zk_encode(rule), *node = NULL;

	if (enc != NULL &&
	    snprintf(url, sizeof(url),
	        "condition://0.0.0.0/%s?category=routers&dynamic=false&"
	        "enabled=true&force=true&runtime=false&priority=1&rule=%s",
	        service, enc) < (int)sizeof(url))
		node = zk_encode(url);
	free(enc);
	if (node != NULL &&
	    zk_create_raw(zh, service, "routers", node, 0) != 0) {
		free(node);
		node = NULL;
	}
	return node;
}

typedef struct gone_ctx {
	zhandle_t *zh;
	const char *path;
} gone_ctx;

static int
node_gone(void *ctx)
{
	gone_ctx *g = ctx;

	return zoo_exists(g->zh, g->path, 0, NULL) == ZNONODE;
}

int
zk_expire(const zk_server *z, int64_t id, const char *passwd)
{
	char path[64];
	clientid_t cid;
	zhandle_t *zh, *check;
	gone_ctx g;
	int rc, ok;

	memset(&cid, 0, sizeof(cid));
	cid.client_id = id;
	memcpy(cid.passwd, passwd, sizeof(cid.passwd));
	if ((zh = connect_as(z, &cid)) == NULL)
		return -1;
	/* A node of the session: it goes when the server has ended the
	 * session, which zookeeper_close does not wait for (it sends the
	 * close and returns). */
	snprintf(
	    path, sizeof(path), "/resil-expire-%llx", (unsigned long long)id);
	rc = zoo_create(
	    zh, path, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, NULL, 0);
	zookeeper_close(zh);
	if (rc != ZOK && rc != ZNODEEXISTS)
		return -1;
	if ((check = zk_connect(z)) == NULL)
		return -1;
	g.zh = check;
	g.path = path;
	ok = zk_wait(node_gone, &g, CONNECT_MS);
	zookeeper_close(check);
	return ok ? 0 : -1;
}

/* ---- the proxy ---------------------------------------------------------- */

#define PROXY_PAIRS 16

struct zk_proxy {
	int port, target, lfd, wake[2];
	char hosts[32];
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int cut, stop;
	unsigned asked, done;   /* cut requests, and those carried out */
	int fd[PROXY_PAIRS][2]; /* client, server; -1: free */
	char buf[65536];
};

static int
listen_any(int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (s < 0)
		return -1;
	(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(s, 16) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &len) != 0) {
		close(s);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return s;
}

static int
dial(int port)
{
	struct sockaddr_in a;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(s);
		return -1;
	}
	return s;
}

static void
drop(zk_proxy *p, int i)
{
	if (p->fd[i][0] >= 0)
		close(p->fd[i][0]);
	if (p->fd[i][1] >= 0)
		close(p->fd[i][1]);
	p->fd[i][0] = p->fd[i][1] = -1;
}

static int
write_all(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static void
accept_one(zk_proxy *p, int cut)
{
	int c = accept(p->lfd, NULL, NULL), s, i;

	if (c < 0)
		return;
	for (i = 0; i < PROXY_PAIRS && p->fd[i][0] >= 0; i++)
		;
	if (cut || i == PROXY_PAIRS || (s = dial(p->target)) < 0) {
		close(c);
		return;
	}
	p->fd[i][0] = c;
	p->fd[i][1] = s;
}

static void *
proxy_main(void *arg)
{
	zk_proxy *p = arg;

	for (;;) {
		struct pollfd pf[2 + 2 * PROXY_PAIRS];
		int n = 0, i, cut;

		pthread_mutex_lock(&p->mu);
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		cut = p->cut;
		if (p->done != p->asked) {
			if (cut)
				for (i = 0; i < PROXY_PAIRS; i++)
					drop(p, i);
			p->done = p->asked;
			pthread_cond_broadcast(&p->cv);
		}
		pthread_mutex_unlock(&p->mu);
		pf[n].fd = p->wake[0];
		pf[n++].events = POLLIN;
		pf[n].fd = p->lfd;
		pf[n++].events = POLLIN;
		for (i = 0; i < PROXY_PAIRS; i++) {
			pf[n].fd = p->fd[i][0];
			pf[n++].events = POLLIN;
			pf[n].fd = p->fd[i][1];
			pf[n++].events = POLLIN;
		}
		if (poll(pf, (nfds_t)n, -1) < 0)
			continue;
		if (pf[0].revents != 0) {
			char c;

			if (read(p->wake[0], &c, 1) < 0 && errno != EINTR)
				break;
			continue; /* a request first */
		}
		if (pf[1].revents != 0)
			accept_one(p, cut);
		for (i = 0; i < PROXY_PAIRS; i++) {
			int side;

			for (side = 0; side < 2 && p->fd[i][0] >= 0; side++) {
				ssize_t r;

				if (pf[2 + 2 * i + side].revents == 0)
					continue;
				r = read(
				    p->fd[i][side], p->buf, sizeof(p->buf));
				if (r <= 0 ||
				    write_all(p->fd[i][!side], p->buf,
				        (size_t)r) != 0)
					drop(p, i);
			}
		}
	}
	return NULL;
}

zk_proxy *
zk_proxy_start(const zk_server *z)
{
	zk_proxy *p = calloc(1, sizeof(*p));
	int i;

	if (p == NULL)
		return NULL;
	for (i = 0; i < PROXY_PAIRS; i++)
		p->fd[i][0] = p->fd[i][1] = -1;
	p->target = z->port;
	if ((p->lfd = listen_any(&p->port)) < 0) {
		free(p);
		return NULL;
	}
	if (pipe(p->wake) != 0) {
		close(p->lfd);
		free(p);
		return NULL;
	}
	snprintf(p->hosts, sizeof(p->hosts), "127.0.0.1:%d", p->port);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) {
		close(p->lfd);
		close(p->wake[0]);
		close(p->wake[1]);
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
		free(p);
		return NULL;
	}
	return p;
}

const char *
zk_proxy_hosts(const zk_proxy *p)
{
	return p->hosts;
}

static void
poke(zk_proxy *p)
{
	while (write(p->wake[1], "", 1) < 0 && errno == EINTR)
		;
}

void
zk_proxy_cut(zk_proxy *p, int cut)
{
	unsigned want;

	pthread_mutex_lock(&p->mu);
	p->cut = cut;
	want = ++p->asked;
	poke(p);
	while (p->done != want)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void
zk_proxy_stop(zk_proxy *p)
{
	int i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	poke(p);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	for (i = 0; i < PROXY_PAIRS; i++)
		drop(p, i);
	close(p->lfd);
	close(p->wake[0]);
	close(p->wake[1]);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

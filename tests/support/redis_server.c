/* A redis-server for tests (redis_server.h). */
#define _GNU_SOURCE 1

#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "free_port.h"

/* 5000 rounds of 2 ms: 10 s for a server to answer. */
#define WAIT_ROUNDS 5000


int
redis_installed(void)
{
	const char *path = getenv("PATH");
	char buf[4096], *save = NULL, *dir;

	if (path == NULL)
		path = "/usr/bin:/bin";
	snprintf(buf, sizeof(buf), "%s", path);
	for (dir = strtok_r(buf, ":", &save); dir != NULL;
	     dir = strtok_r(NULL, ":", &save)) {
		char exe[4200];

		snprintf(exe, sizeof(exe), "%s/redis-server", dir);
		if (access(exe, X_OK) == 0)
			return 1;
	}
	return 0;
}

static int
ping(int port)
{
	struct timeval tv = { 0, 200000 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
	redisReply *r = NULL;
	int ok = 0;

	if (c != NULL && c->err == 0) {
		redisSetTimeout(c, tv);
		r = redisCommand(c, "PING");
		ok = r != NULL && r->type == REDIS_REPLY_STATUS;
	}
	if (r != NULL)
		freeReplyObject(r);
	if (c != NULL)
		redisFree(c);
	return ok;
}

void
redis_kill(redis_server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		(void)waitpid(s->pid, NULL, 0);
	}
	s->pid = -1;
}

int
redis_restart(redis_server *s)
{
	char pbuf[16];
	int i;

	snprintf(pbuf, sizeof(pbuf), "%d", s->port);
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		/* Never outlive the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp("redis-server", "redis-server", "--port", pbuf,
		    "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		    "--daemonize", "no", (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < WAIT_ROUNDS; i++) {
		int st;

		if (ping(s->port))
			return 0;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			s->pid = -1;
			return -1;
		}
		(void)poll(NULL, 0, 2);
	}
	redis_kill(s);
	return -1;
}

int
redis_start(redis_server *s)
{
	s->pid = -1;
	s->port = free_port();
	if (s->port <= 0)
		return -1;
	return redis_restart(s);
}

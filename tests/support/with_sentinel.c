/*
 * with_sentinel: run a program next to a Redis Sentinel deployment on free
 * ports of 127.0.0.1 (issue 44): a master, a replica of it and three
 * sentinels monitoring it as "mymaster" (quorum 2, down-after 500 ms,
 * failover-timeout 2000 ms), without persistence, in a temporary
 * directory removed at the end.
 *
 *   with_sentinel -- PROG [ARG...]
 *
 * PROG gets, after its own arguments: the sentinels
 * ("127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"), the master's name, then the
 * process ids of the master, the replica and the three sentinels (so
 * that it can SIGKILL or SIGSTOP them; they are with_sentinel's children,
 * reaped here). The exit status is PROG's; 77, with the reason on stderr,
 * when the servers could not start (redis-server or redis-sentinel not
 * installed, no free port). Readiness is polled with bounded deadlines:
 * the replica in sync, every sentinel knowing the master and the other
 * sentinels and the replica.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "free_port.h"

#define NSENT 3

static long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


/* Send one inline command on a fresh connection, read the answer (up to
 * cap - 1 bytes) into buf. 1 when something came. */
static int
ask(int port, const char *cmd, char *buf, size_t cap)
{
	struct sockaddr_in a;
	struct timeval tv = { 1, 0 };
	size_t got = 0;
	ssize_t n;
	int s = socket(AF_INET, SOCK_STREAM, 0);

	buf[0] = '\0';
	if (s < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    write(s, cmd, strlen(cmd)) < 0) {
		close(s);
		return 0;
	}
	/* Enough for the answers polled here: wait a little for the rest. */
	while (got < cap - 1 && (n = read(s, buf + got, cap - 1 - got)) > 0) {
		got += (size_t)n;
		buf[got] = '\0';
		if (buf[got - 1] == '\n') {
			struct pollfd pf = { s, POLLIN, 0 };

			if (poll(&pf, 1, 20) <= 0)
				break;
		}
	}
	close(s);
	return got > 0;
}

static pid_t
spawn(char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0); /* a SIGSTOP of it stops it alone */
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Poll until cmd's answer on port contains want (deadline ms). */
static int
wait_for(int port, const char *cmd, const char *want, long ms)
{
	char buf[8192];
	long deadline = mono_ms() + ms;

	while (mono_ms() < deadline) {
		if (ask(port, cmd, buf, sizeof(buf)) && strstr(buf, want))
			return 1;
		poll(NULL, 0, 20);
	}
	return 0;
}

static int
installed(const char *exe)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", exe);
	return system(cmd) == 0;
}

int
main(int argc, char **argv)
{
	char dir[] = "/tmp/resil-sentinel-XXXXXX";
	char conf[NSENT][128], ports[NSENT][8], p0[8], p1[8], list[128];
	char want[64], pids[5][16], rm[160];
	char **cargv;
	pid_t pid[5], prog;
	int port[2 + NSENT], dash, i, st = 1, ok = 1;

	for (i = 0; i < 5; i++)
		pid[i] = 0; /* none yet: never signalled */
	for (dash = 1; dash < argc && strcmp(argv[dash], "--") != 0; dash++)
		;
	if (dash != 1 || argc < 3) {
		fprintf(stderr, "usage: with_sentinel -- PROG [ARG...]\n");
		return 2;
	}
	if (!installed("redis-server") || !installed("redis-sentinel")) {
		fprintf(stderr,
		    "with_sentinel: skipped: redis-server or "
		    "redis-sentinel is not installed\n");
		return 77;
	}
	if (mkdtemp(dir) == NULL) {
		fprintf(stderr,
		    "with_sentinel: skipped: no temporary "
		    "directory\n");
		return 77;
	}
	for (i = 0; i < 2 + NSENT; i++)
		if ((port[i] = free_port()) <= 0) {
			fprintf(stderr,
			    "with_sentinel: skipped: no free "
			    "port\n");
			return 77;
		}
	snprintf(p0, sizeof(p0), "%d", port[0]);
	snprintf(p1, sizeof(p1), "%d", port[1]);
	{
		char *m[] = { "redis-server", "--port", p0, "--bind",
			"127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, NULL };
		char *r[] = { "redis-server", "--port", p1, "--bind",
			"127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--replicaof", "127.0.0.1", p0, NULL };

		pid[0] = spawn(m);
		if (!wait_for(port[0], "PING\r\n", "PONG", 10000))
			ok = 0;
		pid[1] = spawn(r);
		if (ok &&
		    !wait_for(port[1], "INFO replication\r\n",
		        "master_link_status:up", 10000))
			ok = 0;
	}
	for (i = 0; ok && i < NSENT; i++) {
		FILE *f;

		snprintf(conf[i], sizeof(conf[i]), "%s/s%d.conf", dir, i);
		snprintf(ports[i], sizeof(ports[i]), "%d", port[2 + i]);
		f = fopen(conf[i], "w");
		if (f == NULL) {
			ok = 0;
			break;
		}
		fprintf(f,
		    "port %d\nbind 127.0.0.1\ndir %s\n"
		    "sentinel monitor mymaster 127.0.0.1 %d 2\n"
		    "sentinel down-after-milliseconds mymaster 500\n"
		    "sentinel failover-timeout mymaster 2000\n"
		    "sentinel parallel-syncs mymaster 1\n",
		    port[2 + i], dir, port[0]);
		fclose(f);
		{
			char *s[] = { "redis-sentinel", conf[i], NULL };

			pid[2 + i] = spawn(s);
		}
	}
	/* Every sentinel knows the replica and the two other sentinels. */
	for (i = 0; ok && i < NSENT; i++)
		if (!wait_for(port[2 + i], "SENTINEL master mymaster\r\n",
		        "num-other-sentinels", 10000) ||
		    !wait_for(port[2 + i], "INFO sentinel\r\n",
		        "slaves=1,sentinels=3", 15000))
			ok = 0;
	if (!ok) {
		fprintf(stderr,
		    "with_sentinel: skipped: the servers did not "
		    "start\n");
		st = 77 << 8;
		goto out;
	}
	snprintf(list, sizeof(list), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
	    port[2], port[3], port[4]);
	snprintf(want, sizeof(want), "mymaster");
	cargv = calloc((size_t)argc + 8, sizeof(*cargv));
	if (cargv == NULL)
		return 1;
	for (i = dash + 1; i < argc; i++)
		cargv[i - dash - 1] = argv[i];
	cargv[argc - dash - 1] = list;
	cargv[argc - dash] = want;
	for (i = 0; i < 5; i++) {
		snprintf(pids[i], sizeof(pids[i]), "%ld", (long)pid[i]);
		cargv[argc - dash + 1 + i] = pids[i];
	}
	fflush(stdout);
	prog = fork();
	if (prog == 0) {
		execv(cargv[0], cargv);
		perror(cargv[0]);
		_exit(127);
	}
	if (prog > 0)
		while (waitpid(prog, &st, 0) < 0 && errno == EINTR)
			;
	free(cargv);
out:
	for (i = 0; i < 2 + NSENT; i++) {
		if (pid[i] <= 0)
			continue;
		kill(pid[i], SIGCONT);
		kill(pid[i], SIGKILL);
		waitpid(pid[i], NULL, 0);
	}
	snprintf(rm, sizeof(rm), "rm -rf %s", dir);
	if (system(rm) != 0)
		(void)0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

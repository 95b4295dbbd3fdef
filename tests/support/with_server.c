/*
 * with_server: run a program next to a local server it needs, on a free
 * port of 127.0.0.1, and pass it the server's address.
 *
 *   with_server line DELAYS -- PROG [ARG...]
 *       A line server: the n-th request ("GET <key>\n", n from 1) is
 *       answered "OK <n>\n" after its delay in ms (DELAYS is a
 *       comma-separated list, the last one repeated; "0": at once).
 *       PROG gets the port as its last argument.
 *   with_server redis -- PROG [ARG...]
 *       A redis-server without persistence; PROG gets the port as its
 *       last argument.
 *
 * The server runs in a child process that dies with with_server
 * (PR_SET_PDEATHSIG). The exit status is PROG's; 77 when the server could
 * not start (redis-server not installed, no free port). Readiness is
 * polled with a bounded deadline; no result depends on timing other than
 * the line server's delays, which are the point of the scenario.
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

#define MAXCONN 64

static int
listen_any(int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
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

static long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct conn {
	int fd;
	long due; /* when to answer; -1: request not read yet */
	int nth;  /* the request's number, from 1 */
	int answered;
} conn;

/* The line server's loop (in the child): answer each connection's request
 * after its delay; never returns. */
static void
serve_lines(int ls, const char *delays)
{
	conn c[MAXCONN];
	int n = 0, next = 0;
	long d[MAXCONN];
	int nd = 0;
	const char *p = delays;

	while (*p != '\0' && nd < MAXCONN) {
		d[nd++] = strtol(p, (char **)&p, 10);
		if (*p == ',')
			p++;
		else
			break;
	}
	if (nd == 0)
		d[nd++] = 0;
	for (;;) {
		struct pollfd pf[MAXCONN + 1];
		long now = mono_ms(), wait = -1;
		int i, k = 0;

		pf[k].fd = ls;
		pf[k++].events = POLLIN;
		for (i = 0; i < n; i++) {
			pf[k].fd = c[i].fd;
			pf[k++].events = c[i].due < 0 ? POLLIN : 0;
			if (c[i].due >= 0 && !c[i].answered) {
				long w = c[i].due > now ? c[i].due - now : 0;
				if (wait < 0 || w < wait)
					wait = w;
			}
		}
		(void)poll(pf, (nfds_t)k, (int)wait);
		now = mono_ms();
		if ((pf[0].revents & POLLIN) && n < MAXCONN) {
			int fd = accept(ls, NULL, NULL);
			if (fd >= 0) {
				c[n].fd = fd;
				c[n].due = -1;
				c[n].answered = 0;
				n++;
			}
		}
		for (i = 0; i < n; i++) {
			if (c[i].due < 0 &&
			    (pf[i + 1].revents & (POLLIN | POLLHUP))) {
				char buf[128];
				ssize_t len = read(c[i].fd, buf, sizeof(buf));
				if (len > 0 &&
				    memchr(buf, '\n', (size_t)len)) {
					long dl = d[next < nd ? next : nd - 1];
					c[i].nth = ++next;
					c[i].due = now + dl;
				} else if (len <= 0) {
					c[i].answered = 1; /* gone */
					c[i].due = now;
				}
			}
			if (c[i].due >= 0 && !c[i].answered &&
			    now >= c[i].due) {
				char ok[32];
				int len = snprintf(
				    ok, sizeof(ok), "OK %d\n", c[i].nth);
				if (write(c[i].fd, ok, (size_t)len) < 0)
					(void)0; /* the caller gave up */
				c[i].answered = 1;
			}
		}
		/* Forget answered connections (the client closes them). */
		for (i = 0; i < n;) {
			if (c[i].answered) {
				close(c[i].fd);
				c[i] = c[--n];
			} else {
				i++;
			}
		}
	}
}

static int
can_connect(int port)
{
	struct sockaddr_in a;
	int s = socket(AF_INET, SOCK_STREAM, 0), ok;

	if (s < 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(s);
	return ok;
}

static pid_t
start_redis(int *port)
{
	int s = listen_any(port);
	char pbuf[16];
	pid_t pid;
	long deadline;

	if (s < 0)
		return -1;
	close(s); /* the port is free: redis binds it */
	snprintf(pbuf, sizeof(pbuf), "%d", *port);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

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
	deadline = mono_ms() + 10000;
	while (mono_ms() < deadline) {
		int st;

		if (can_connect(*port))
			return pid;
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		poll(NULL, 0, 5);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

int
main(int argc, char **argv)
{
	char **cargv;
	char pbuf[16];
	int port = 0, dash, i, st;
	pid_t server, prog;

	for (dash = 1; dash < argc && strcmp(argv[dash], "--") != 0; dash++)
		;
	if (argc < 3 || dash >= argc - 1) {
		fprintf(stderr,
		    "usage: with_server line DELAYS | redis -- PROG "
		    "[ARG...]\n");
		return 2;
	}
	if (strcmp(argv[1], "line") == 0 && dash == 3) {
		int ls = listen_any(&port);

		if (ls < 0)
			return 77;
		server = fork();
		if (server == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			serve_lines(ls, argv[2]);
			_exit(0);
		}
		close(ls);
	} else if (strcmp(argv[1], "redis") == 0 && dash == 2) {
		server = start_redis(&port);
	} else {
		fprintf(
		    stderr, "with_server: unknown server \"%s\"\n", argv[1]);
		return 2;
	}
	if (server < 0) {
		fprintf(stderr, "with_server: the %s server did not start\n",
		    argv[1]);
		return 77;
	}
	snprintf(pbuf, sizeof(pbuf), "%d", port);
	cargv = calloc((size_t)(argc - dash + 1), sizeof(*cargv));
	if (cargv == NULL)
		return 1;
	for (i = dash + 1; i < argc; i++)
		cargv[i - dash - 1] = argv[i];
	cargv[argc - dash - 1] = pbuf;
	fflush(stdout);
	prog = fork();
	if (prog == 0) {
		execv(cargv[0], cargv);
		perror(cargv[0]);
		_exit(127);
	}
	st = 1;
	if (prog > 0)
		while (waitpid(prog, &st, 0) < 0 && errno == EINTR)
			;
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	free(cargv);
	if (prog < 0)
		return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

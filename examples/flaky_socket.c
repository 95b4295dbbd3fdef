/*
 * flaky_socket: a resil pipeline around a real TCP request.
 *
 * The example starts its own stock server: a thread listening on
 * 127.0.0.1, on a port the kernel picks (bind to port 0, read it back
 * with getsockname()). Each connection carries one request, "STOCK 42\n".
 * The server fails and recovers on a schedule indexed by the number of
 * the connection alone: it answers "stock=N\n" when healthy, and when
 * failing it either closes the connection without a word or answers
 * "error=overloaded\n". The schedule does not depend on time, so the
 * output below is the same at every run.
 *
 * The client function (connect, send, recv, with socket timeouts of a few
 * hundred milliseconds as a safety net only) is the user function of a
 * pipeline with a breaker (two consecutive failures open it for 3 time
 * units, one probe) and a result cache (values at most 5 units old). The
 * pipeline runs on the manual clock, one unit per request, so its
 * decisions are exact.
 *
 * One line per request shows the time, where the answer came from, the
 * stock, the age of a cached answer, how many requests reached the
 * server, the breaker state the call saw and what happened: the breaker
 * opening after two failures, the cache answering while it is open (and
 * then refusing a value that has grown too old: unavailable, never a
 * stock of 0), a failed probe reopening it, and a good probe closing it.
 *
 * The server stops when the client sends "QUIT\n" at the end; the
 * process then checks that the server saw exactly the requests the
 * client made. Runs in a few milliseconds; nothing sleeps.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <resil/pipeline.h>

#ifndef MSG_NOSIGNAL /* POSIX.1-2008, but not everywhere */
#define MSG_NOSIGNAL 0
#endif

#define REQUESTS 12
#define IO_TIMEOUT_MS 300 /* a safety net: nothing here should wait */

/* The user function's own failure codes. */
enum {
	FAIL_CONNECT = 1, /* could not connect or send */
	FAIL_CLOSED = 2,  /* the server closed the connection unanswered */
	FAIL_ERROR = 3,   /* the server answered an error */
	FAIL_IO = 4,      /* receive failed or timed out */
	FAIL_GARBLED = 5  /* an answer we do not understand */
};

/* ---- the server ---- */

/* What the server does with its n-th stock request (1-based). */
typedef enum behaviour { OK, CLOSE, ERROR } behaviour;

static const struct {
	behaviour b;
	int stock;
} schedule[] = {
	{ OK, 8 },    /* 1 */
	{ OK, 7 },    /* 2 */
	{ CLOSE, 0 }, /* 3: first failure */
	{ ERROR, 0 }, /* 4: second failure, the breaker opens */
	{ CLOSE, 0 }, /* 5: the first probe fails, it reopens */
	{ OK, 6 },    /* 6: the second probe succeeds, it closes */
	{ OK, 6 },    /* 7 */
	{ OK, 5 },    /* 8 */
};
#define SCHEDULED (sizeof(schedule) / sizeof(schedule[0]))

typedef struct server {
	int fd;       /* the listening socket */
	int requests; /* stock requests seen; read after the join */
	int bad;      /* unexpected requests or errors */
	pthread_t thread;
} server;

static int
set_timeouts(int fd)
{
	struct timeval tv;

	tv.tv_sec = 0;
	tv.tv_usec = IO_TIMEOUT_MS * 1000;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		return -1;
	return 0;
}

/* Read one line (up to '\n', which is dropped) into buf. Returns its
 * length, -1 for an I/O error or a timeout, -2 for end of stream before
 * any byte, -3 for a line too long or cut short. */
static int
read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;

	for (;;) {
		ssize_t k;

		if (n + 1 >= size)
			return -3;
		k = recv(fd, buf + n, 1, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (k == 0)
			return n == 0 ? -2 : -3;
		if (buf[n] == '\n') {
			buf[n] = '\0';
			return (int)n;
		}
		n++;
	}
}

static int
send_all(int fd, const char *s)
{
	size_t len = strlen(s), off = 0;

	while (off < len) {
		ssize_t k = send(fd, s + off, len - off, MSG_NOSIGNAL);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += (size_t)k;
	}
	return 0;
}

static void *
serve(void *arg)
{
	server *srv = arg;

	for (;;) {
		char line[64], answer[64];
		int c = accept(srv->fd, NULL, NULL);
		size_t n;

		if (c < 0) {
			if (errno == EINTR)
				continue;
			srv->bad++;
			break;
		}
		if (set_timeouts(c) != 0 ||
		    read_line(c, line, sizeof(line)) < 0) {
			srv->bad++;
			close(c);
			continue;
		}
		if (strcmp(line, "QUIT") == 0) {
			close(c);
			break;
		}
		if (strcmp(line, "STOCK 42") != 0) {
			srv->bad++;
			close(c);
			continue;
		}
		/* The request has been read, so closing now is an orderly
		 * end of stream for the client, not a reset. */
		n = (size_t)srv->requests++;
		if (n >= SCHEDULED) {
			srv->bad++; /* more requests than the script has */
			close(c);
			continue;
		}
		switch (schedule[n].b) {
		case OK:
			snprintf(answer, sizeof(answer), "stock=%d\n",
			    schedule[n].stock);
			if (send_all(c, answer) != 0)
				srv->bad++;
			break;
		case ERROR:
			if (send_all(c, "error=overloaded\n") != 0)
				srv->bad++;
			break;
		case CLOSE:
			break;
		}
		close(c);
	}
	return NULL;
}

/* Listen on 127.0.0.1, port chosen by the kernel; *port gets it. */
static int
listen_local(unsigned short *port)
{
	struct sockaddr_in addr;
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons(0);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
	    listen(fd, 8) != 0 ||
	    getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(addr.sin_port);
	return fd;
}

/* ---- the client ---- */

typedef struct client {
	unsigned short port;
	int calls; /* requests sent to the server */
} client;

/* Open a connection to the server and send one line. */
static int
connect_send(unsigned short port, const char *line)
{
	struct sockaddr_in addr;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons(port);
	if (set_timeouts(fd) != 0 ||
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
	    send_all(fd, line) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The user function: one real request. 0 with the stock in *out, or one
 * of the FAIL_ codes. */
static int
get_stock(void *ctx, const resil_args *args, resil_value *out)
{
	client *cl = ctx;
	char line[64], request[64], *end;
	long stock;
	int fd, n;

	snprintf(request, sizeof(request), "STOCK %.*s\n", (int)args->len,
	    (const char *)args->data);
	cl->calls++;
	fd = connect_send(cl->port, request);
	if (fd < 0)
		return FAIL_CONNECT;
	n = read_line(fd, line, sizeof(line));
	close(fd);
	if (n == -2)
		return FAIL_CLOSED;
	if (n < 0)
		return FAIL_IO;
	if (strncmp(line, "error=", 6) == 0)
		return FAIL_ERROR;
	if (strncmp(line, "stock=", 6) != 0)
		return FAIL_GARBLED;
	errno = 0;
	stock = strtol(line + 6, &end, 10);
	if (errno != 0 || end == line + 6 || *end != '\0' || stock < 0)
		return FAIL_GARBLED;
	*out = resil_value_int(stock);
	return 0;
}

static const char *
failure_text(resil_err cause, int rc)
{
	if (cause == RESIL_E_OPEN)
		return "rejected: breaker open";
	switch (rc) {
	case FAIL_CONNECT:
		return "call failed: cannot connect";
	case FAIL_CLOSED:
		return "call failed: connection closed";
	case FAIL_ERROR:
		return "call failed: server error";
	case FAIL_IO:
		return "call failed: receive error";
	case FAIL_GARBLED:
		return "call failed: garbled answer";
	}
	return resil_strerror(cause);
}

/* ---- breaker transitions, noted per request ---- */

typedef struct note {
	char text[160];
} note;

static void
on_event(const resil_pipeline_event *ev, void *ctx)
{
	note *nt = ctx;
	size_t used = strlen(nt->text);

	if (ev->stage != RESIL_STAGE_BREAKER || ev->breaker == NULL)
		return;
	/* One chain per request: "(breaker OPEN -> HALF_OPEN -> OPEN)". */
	if (used == 0)
		snprintf(nt->text, sizeof(nt->text), " (breaker %s -> %s)",
		    resil_breaker_state_name(ev->breaker->from),
		    resil_breaker_state_name(ev->breaker->to));
	else if (used < sizeof(nt->text))
		snprintf(nt->text + used - 1, sizeof(nt->text) - used + 1,
		    " -> %s)", resil_breaker_state_name(ev->breaker->to));
}

static int
run(unsigned short port)
{
	resil_manual_clock mc;
	resil_pipeline_config cfg;
	resil_pipeline *p;
	resil_diag diag;
	client cl = { port, 0 };
	note nt;
	resil_args args = { "getStock", "42", 2 };
	int i, failed = 0;

	resil_manual_clock_init(&mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.breaker_enabled = 1;
	cfg.breaker.failure_rate_pct = 0;
	cfg.breaker.consecutive_failures = 2;
	cfg.breaker.open_wait_ns = 3; /* time units of the manual clock */
	cfg.breaker.permitted_probes = 1;
	cfg.cache_enabled = 1;
	cfg.cache.max_age = 5; /* age 5 is served, 6 is not */
	cfg.listener = on_event;
	cfg.listener_ctx = &nt;
	if (resil_pipeline_new(&p, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "flaky_socket: %s\n", diag.msg);
		return -1;
	}

	printf("time  source       stock  age  calls  breaker    what "
	       "happened\n");
	for (i = 0; i < REQUESTS; i++) {
		resil_result r;
		resil_err err;
		char stock[24], age[24];
		const char *what;
		uint64_t now = resil_manual_clock_now(&mc);

		nt.text[0] = '\0';
		err = resil_pipeline_call(p, &args, get_stock, &cl, &r);
		if (err == RESIL_OK && r.value.type != RESIL_VALUE_INT) {
			fprintf(stderr, "flaky_socket: unexpected value\n");
			failed = 1;
		}
		if (err == RESIL_OK) {
			resil_value_format(&r.value, stock, sizeof(stock));
			snprintf(age, sizeof(age), "%llu",
			    (unsigned long long)r.age);
		} else if (err == RESIL_E_UNAVAILABLE) {
			snprintf(stock, sizeof(stock), "None");
			snprintf(age, sizeof(age), "-");
		} else {
			fprintf(stderr, "flaky_socket: %s\n", r.message);
			resil_result_free(&r);
			failed = 1;
			break;
		}
		what = r.source == RESIL_SOURCE_LIVE
		    ? "served by the server"
		    : failure_text(r.cause, r.cause_rc);
		printf("%4llu  %-11s  %5s  %3s  %5d  %-9s  %s%s\n",
		    (unsigned long long)now, resil_source_name(r.source),
		    stock, age, cl.calls,
		    r.breaker_state < 0
		        ? "-"
		        : resil_breaker_state_name(
		              (resil_breaker_state)r.breaker_state),
		    what, nt.text);
		resil_result_free(&r);
		resil_manual_clock_advance(&mc, 1);
	}
	resil_pipeline_free(p);
	return failed ? -1 : cl.calls;
}

int
main(void)
{
	server srv;
	unsigned short port;
	int calls, fd, rc = 0;

	memset(&srv, 0, sizeof(srv));
	srv.fd = listen_local(&port);
	if (srv.fd < 0) {
		perror("flaky_socket: listen on 127.0.0.1");
		return 1;
	}
	if (pthread_create(&srv.thread, NULL, serve, &srv) != 0) {
		fprintf(stderr, "flaky_socket: cannot start the server\n");
		close(srv.fd);
		return 1;
	}

	calls = run(port);

	/* Stop the server, whatever happened above. */
	fd = connect_send(port, "QUIT\n");
	if (fd < 0) {
		/* Without the server stopping we cannot join it. */
		perror("flaky_socket: stop the server");
		return 1;
	}
	close(fd);
	if (pthread_join(srv.thread, NULL) != 0) {
		fprintf(stderr, "flaky_socket: cannot join the server\n");
		rc = 1;
	}
	close(srv.fd);

	if (calls < 0)
		return 1;
	printf("%d requests: %d reached the server, the open breaker kept %d "
	       "away\n",
	    REQUESTS, srv.requests, REQUESTS - srv.requests);
	if (srv.requests != calls || srv.bad != 0) {
		fprintf(stderr,
		    "flaky_socket: the client made %d requests, the server "
		    "saw %d (%d bad)\n",
		    calls, srv.requests, srv.bad);
		rc = 1;
	}
	return rc;
}

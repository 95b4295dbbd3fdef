/*
 * async_http: resil's call machine driving libcurl's multi interface.
 *
 * The example starts its own stock server, a thread on 127.0.0.1 on a
 * port the kernel picks, that answers GET /stock/<key>?t=<tick> with the
 * stock of <key>, or with 503 while the service is "down": for requests
 * stamped with a tick in [1000, 3000). The answer depends on the request
 * alone, so everything the example prints is the same at every run.
 *
 * The client issues five waves of 200 concurrent requests (one wave per
 * second of resil time, at ticks 0, 1000, ... 4000), each request a call
 * through one pipeline: breaker (a count window of 100, trips at 50 %
 * failures, 500 ticks open, 10 probes), retry (3 attempts, 100 ticks
 * apart), a result cache and a `fail:return -1` mock. resil decides; the
 * loop only runs what it is told:
 *
 *   RUN  attempt a  -> an easy handle for the attempt, added to the multi
 *   WAIT until t    -> the call sleeps until the loop's time reaches t
 *   DONE            -> the answer, with its source, is counted
 *
 * Time. resil runs on a manual clock that the loop moves: 1 tick is one
 * millisecond of resil time. The transfers are real (up to 200 at once on
 * loopback), but the loop reports the answers of one round of transfers
 * at one tick, in request order, and jumps the clock to the next timer
 * when nothing is in flight. That keeps the breaker's decisions, and so
 * the output, reproducible; a production loop would pass its own clock
 * reading instead and arm a timer for each WAIT (see docs/async.md).
 *
 * Output: one line per wave (live / cache / mock / rejected by the
 * breaker / errors, and the requests that reached the server), and the
 * breaker's transitions as they happen. ctest compares it byte for byte.
 * A watchdog ends the process if anything hangs.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include <resil/pipeline.h>

#define WAVES 5
#define CALLS 200       /* per wave, all in flight at once */
#define WAVE_TICKS 1000 /* one wave per second of resil time */
#define DOWN_FROM 1000  /* the server fails requests stamped in */
#define DOWN_UNTIL 3000 /* [DOWN_FROM, DOWN_UNTIL) */
#define KEY_STEP 50     /* wave k asks keys 50k .. 50k + 199 */
#define MAX_CONN 512
#define WATCHDOG_SECONDS 60

/* ---- the server ---- */

typedef struct conn {
	int fd;
	size_t len;
	char buf[512];
} conn;

typedef struct server {
	int fd;      /* listening socket */
	int stop[2]; /* a pipe: a byte on it stops the server */
	pthread_t thread;
	unsigned long requests; /* requests answered (atomic) */
	conn conns[MAX_CONN];
} server;

static int
stock_of(long key)
{
	return (int)((key * 37) % 1000);
}

/* Answer one request: the stock, or 503 while down. */
static void
answer(server *srv, conn *c)
{
	long key = -1, tick = -1;
	char out[256];
	int n;

	if (sscanf(c->buf, "GET /stock/%ld?t=%ld ", &key, &tick) != 2 ||
	    key < 0)
		n = snprintf(out, sizeof(out),
		    "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
		    "Connection: close\r\n\r\n");
	else if (tick >= DOWN_FROM && tick < DOWN_UNTIL)
		n = snprintf(out, sizeof(out),
		    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0"
		    "\r\nConnection: close\r\n\r\n");
	else {
		char body[32];
		int bl = snprintf(body, sizeof(body), "%d", stock_of(key));

		n = snprintf(out, sizeof(out),
		    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
		    "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
		    bl, body);
	}
	/* Counted before the answer leaves, so that a client that has its
	 * answer sees the count (atomic: the client thread reads it). */
	__atomic_add_fetch(&srv->requests, 1, __ATOMIC_SEQ_CST);
	/* Small answers on loopback: one send. */
	if (send(c->fd, out, (size_t)n, 0) != n)
		perror("async_http: server send");
}

static void *
serve(void *arg)
{
	server *srv = arg;
	struct pollfd pf[MAX_CONN + 2];
	int map[MAX_CONN + 2];
	int i;

	for (i = 0; i < MAX_CONN; i++)
		srv->conns[i].fd = -1;
	for (;;) {
		int n = 0;

		pf[n].fd = srv->stop[0];
		pf[n].events = POLLIN;
		map[n++] = -1;
		pf[n].fd = srv->fd;
		pf[n].events = POLLIN;
		map[n++] = -1;
		for (i = 0; i < MAX_CONN; i++) {
			if (srv->conns[i].fd < 0)
				continue;
			pf[n].fd = srv->conns[i].fd;
			pf[n].events = POLLIN;
			map[n++] = i;
		}
		if (poll(pf, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("async_http: server poll");
			return NULL;
		}
		if (pf[0].revents != 0)
			return NULL;
		if (pf[1].revents & POLLIN) {
			int fd = accept(srv->fd, NULL, NULL);

			for (i = 0; fd >= 0 && i < MAX_CONN; i++)
				if (srv->conns[i].fd < 0) {
					srv->conns[i].fd = fd;
					srv->conns[i].len = 0;
					break;
				}
			if (fd >= 0 && i == MAX_CONN)
				close(fd);
		}
		for (i = 2; i < n; i++) {
			conn *c = &srv->conns[map[i]];
			ssize_t got;

			if (pf[i].revents == 0)
				continue;
			got = recv(c->fd, c->buf + c->len,
			    sizeof(c->buf) - 1 - c->len, 0);
			if (got > 0) {
				c->len += (size_t)got;
				c->buf[c->len] = '\0';
				if (strstr(c->buf, "\r\n\r\n") == NULL &&
				    c->len < sizeof(c->buf) - 1)
					continue;
				answer(srv, c);
			}
			close(c->fd);
			c->fd = -1;
		}
	}
}

static int
server_start(server *srv, unsigned short *port)
{
	struct sockaddr_in addr;
	socklen_t len = sizeof(addr);
	int one = 1;

	memset(srv, 0, sizeof(*srv));
	srv->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (srv->fd < 0 || pipe(srv->stop) != 0)
		return -1;
	setsockopt(srv->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = 0; /* the kernel picks a free port */
	if (bind(srv->fd, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
	    listen(srv->fd, MAX_CONN) != 0 ||
	    getsockname(srv->fd, (struct sockaddr *)&addr, &len) != 0)
		return -1;
	*port = ntohs(addr.sin_port);
	return pthread_create(&srv->thread, NULL, serve, srv) == 0 ? 0 : -1;
}

static void
server_stop(server *srv)
{
	char b = 'q';

	if (write(srv->stop[1], &b, 1) != 1)
		perror("async_http: stop the server");
	pthread_join(srv->thread, NULL);
	close(srv->fd);
	close(srv->stop[0]);
	close(srv->stop[1]);
}

/* ---- the client ---- */

typedef struct req {
	resil_call call;
	resil_call_next st;
	resil_result res;
	resil_args args;
	char key[24]; /* the cache key: the decimal key */
	CURL *easy;
	uint32_t attempt; /* the attempt in flight, 0: none */
	int done;
	int answered; /* the transfer ended in this round */
	int rc;       /* the attempt's return code */
	long stock;
	char body[64];
	size_t body_len;
} req;

typedef struct loop {
	resil_manual_clock mc;
	resil_pipeline *p;
	const resil_method *getstock;
	CURLM *multi;
	unsigned short port;
	req reqs[CALLS];
	unsigned in_flight;
} loop;

static uint64_t
now_of(loop *l)
{
	return resil_manual_clock_now(&l->mc);
}

static size_t
on_body(char *data, size_t size, size_t n, void *ctx)
{
	req *r = ctx;
	size_t len = size * n, room = sizeof(r->body) - 1 - r->body_len;

	if (len > room)
		len = room;
	memcpy(r->body + r->body_len, data, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return size * n;
}

/* RUN: one HTTP request for the attempt, stamped with resil's time. */
static void
start_attempt(loop *l, req *r)
{
	char url[128];

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/stock/%s?t=%llu",
	    (unsigned)l->port, r->key, (unsigned long long)now_of(l));
	r->easy = curl_easy_init();
	if (r->easy == NULL) {
		fprintf(stderr, "async_http: curl_easy_init failed\n");
		exit(1);
	}
	r->body_len = 0;
	r->body[0] = '\0';
	r->attempt = r->st.attempt;
	curl_easy_setopt(r->easy, CURLOPT_URL, url);
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->easy, CURLOPT_NOPROXY, "*"); /* loopback only */
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, 10000L);
	curl_multi_add_handle(l->multi, r->easy);
	l->in_flight++;
}

/* Follow a call's actions until it needs the network or a timer. */
static void
follow(loop *l, req *r)
{
	if (r->st.action == RESIL_CALL_RUN)
		start_attempt(l, r);
	else if (r->st.action == RESIL_CALL_DONE)
		r->done = 1;
}

/* A finished transfer: 0 and the stock for a 200 with a number, the
 * HTTP status for another answer, -1 for a transport error. */
static void
transfer_done(loop *l, CURLMsg *msg)
{
	req *r = NULL;
	long status = 0;
	char *end;

	curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&r);
	if (msg->data.result != CURLE_OK) {
		r->rc = -1;
	} else {
		curl_easy_getinfo(
		    msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		r->stock = strtol(r->body, &end, 10);
		r->rc = status == 200 && end != r->body ? 0 : (int)status;
	}
	curl_multi_remove_handle(l->multi, msg->easy_handle);
	curl_easy_cleanup(msg->easy_handle);
	r->easy = NULL;
	r->answered = 1;
	l->in_flight--;
}

/* Run the multi until every transfer of this round has ended. */
static void
run_transfers(loop *l)
{
	int running = 1, left;
	CURLMsg *msg;

	while (l->in_flight > 0) {
		if (curl_multi_perform(l->multi, &running) != CURLM_OK) {
			fprintf(stderr, "async_http: curl_multi_perform\n");
			exit(1);
		}
		while ((msg = curl_multi_info_read(l->multi, &left)) != NULL)
			if (msg->msg == CURLMSG_DONE)
				transfer_done(l, msg);
		if (l->in_flight > 0 &&
		    curl_multi_poll(l->multi, NULL, 0, 100, NULL) !=
		        CURLM_OK) {
			fprintf(stderr, "async_http: curl_multi_poll\n");
			exit(1);
		}
	}
}

/* One wave: CALLS calls, all started at the wave's tick, driven until
 * every one is DONE. */
static void
run_wave(loop *l, int wave, unsigned long *served_before, server *srv)
{
	unsigned live = 0, cache = 0, mock = 0, rejected = 0, errors = 0;
	unsigned long seen;
	unsigned pending, i;

	for (i = 0; i < CALLS; i++) {
		req *r = &l->reqs[i];

		memset(r, 0, sizeof(*r));
		snprintf(r->key, sizeof(r->key), "%u",
		    (unsigned)wave * KEY_STEP + i);
		r->args.method = "getStock";
		r->args.data = r->key;
		r->args.len = strlen(r->key);
		if (resil_call_start(&r->call, l->p, l->getstock, &r->args,
		        &r->res, now_of(l), &r->st) != RESIL_OK) {
			fprintf(stderr, "async_http: resil_call_start\n");
			exit(1);
		}
		follow(l, r);
	}
	for (;;) {
		uint64_t next = UINT64_MAX;

		run_transfers(l);
		/* Report this round's answers in request order, at one
		 * tick: the breaker sees them in the same order every run. */
		for (i = 0; i < CALLS; i++) {
			req *r = &l->reqs[i];
			resil_value v;

			if (!r->answered)
				continue;
			r->answered = 0;
			v = r->rc == 0 ? resil_value_int(r->stock)
			               : resil_value_null();
			resil_call_report(
			    &r->call, r->attempt, r->rc, &v, now_of(l));
			r->attempt = 0;
			resil_call_step(&r->call, now_of(l), &r->st);
			follow(l, r);
		}
		if (l->in_flight > 0)
			continue;
		/* Nothing in flight: the next timer of any call. */
		pending = 0;
		for (i = 0; i < CALLS; i++) {
			req *r = &l->reqs[i];

			if (r->done)
				continue;
			pending++;
			if (r->st.action == RESIL_CALL_WAIT &&
			    r->st.until < next)
				next = r->st.until;
		}
		if (pending == 0)
			break;
		if (next == UINT64_MAX) {
			fprintf(stderr, "async_http: a call waits forever\n");
			exit(1);
		}
		resil_manual_clock_set(&l->mc, next);
		for (i = 0; i < CALLS; i++) {
			req *r = &l->reqs[i];

			if (r->done || r->st.action != RESIL_CALL_WAIT ||
			    r->st.until > next)
				continue;
			resil_call_step(&r->call, now_of(l), &r->st);
			follow(l, r);
		}
	}
	for (i = 0; i < CALLS; i++) {
		resil_result *res = &l->reqs[i].res;

		if (res->cause == RESIL_E_OPEN)
			rejected++;
		if (res->err != RESIL_OK)
			errors++;
		else if (res->source == RESIL_SOURCE_LIVE)
			live++;
		else if (res->source == RESIL_SOURCE_CACHE)
			cache++;
		else if (res->source == RESIL_SOURCE_MOCK)
			mock++;
		else
			errors++;
		if (res->err == RESIL_OK && res->value.u.i != -1 &&
		    res->value.u.i !=
		        stock_of(strtol(l->reqs[i].key, NULL, 10))) {
			fprintf(stderr, "async_http: wrong stock\n");
			exit(1);
		}
		resil_result_free(res);
	}
	seen = __atomic_load_n(&srv->requests, __ATOMIC_SEQ_CST);
	printf("t=%4dms  live %3u  cache %3u  mock %3u  rejected %3u  "
	       "errors %u  (server saw %lu)\n",
	    wave * WAVE_TICKS, live, cache, mock, rejected, errors,
	    seen - *served_before);
	*served_before = seen;
}

static void
on_event(const resil_pipeline_event *ev, void *ctx)
{
	(void)ctx;
	if (ev->stage == RESIL_STAGE_BREAKER)
		printf("  t=%llums  %s\n", (unsigned long long)ev->time,
		    ev->text);
}

int
main(void)
{
	static loop l;
	static server srv;
	static const resil_method_config methods[] = {
		{ "getStock", RESIL_TYPE_INT, NULL, 0, 0, 0, RESIL_PRIORITY_UNSET, 0 },
	};
	resil_pipeline_config cfg;
	resil_diag diag;
	unsigned long served = 0;
	int wave;

	alarm(WATCHDOG_SECONDS); /* bounded: a hang ends the test */
	signal(SIGPIPE, SIG_IGN);
	if (server_start(&srv, &l.port) != 0) {
		perror("async_http: start the server on 127.0.0.1");
		return 1;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
	    (l.multi = curl_multi_init()) == NULL) {
		fprintf(stderr, "async_http: libcurl init failed\n");
		return 1;
	}
	curl_multi_setopt(l.multi, CURLMOPT_MAXCONNECTS, (long)CALLS);

	resil_manual_clock_init(&l.mc, 0);
	resil_pipeline_config_init(&cfg);
	cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&l.mc);
	cfg.methods = methods;
	cfg.nmethods = 1;
	cfg.breaker_enabled = 1;
	cfg.breaker.window_size = 100;
	cfg.breaker.failure_rate_pct = 50;
	cfg.breaker.min_calls = 20;
	cfg.breaker.open_wait_ns = 500;
	cfg.breaker.permitted_probes = 10;
	cfg.retry_enabled = 1;
	cfg.retry.max_attempts = 3;
	cfg.retry.base_delay_ns = 100;
	cfg.cache_enabled = 1;
	cfg.cache.max_entries = 4096;
	cfg.cache.max_age = 5000;
	cfg.mock = "fail:return -1";
	cfg.listener = on_event;
	if (resil_pipeline_new(&l.p, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "async_http: %s\n", diag.msg);
		return 1;
	}
	if (resil_pipeline_method(l.p, "getStock", &l.getstock) != RESIL_OK)
		return 1;

	printf("%d waves of %d concurrent requests; the server fails "
	       "[%dms, %dms)\n",
	    WAVES, CALLS, DOWN_FROM, DOWN_UNTIL);
	for (wave = 0; wave < WAVES; wave++) {
		resil_manual_clock_set(&l.mc, (uint64_t)wave * WAVE_TICKS);
		run_wave(&l, wave, &served, &srv);
	}

	resil_pipeline_free(l.p);
	curl_multi_cleanup(l.multi);
	curl_global_cleanup();
	server_stop(&srv);
	return 0;
}

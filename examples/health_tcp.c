/*
 * Active health checks over real TCP: three local servers (listening
 * sockets this program opens on 127.0.0.1) are the endpoints of a
 * directory, whose resil_health checker says which to probe and when, and
 * a poll() loop runs each probe as a non-blocking connect. Server b stops
 * listening at t=3s and listens again at t=10s; the checker's transitions
 * are printed with the candidates a selector over the directory routes
 * to: an unhealthy endpoint is not one.
 *
 * The checker runs on virtual time (the manual clock): each round of
 * probes is due at one virtual instant, the connects run for real, and
 * their results are reported in the order the probes were started, so
 * the output is the same on every run however the kernel orders the
 * answers. ctest compares it with health_tcp.expected.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/health.h>
#include <resil/selector.h>

#define NBACKENDS 3
#define MAXPROBES 8
#define SEC RESIL_NS_PER_SEC
#define MS RESIL_NS_PER_MS

typedef struct backend {
	const char *name;
	unsigned short port;
	int lfd; /* listening socket, -1 while stopped */
} backend;

typedef struct probe {
	uint64_t id;
	int fd;
	int done;
	resil_probe_result result;
	backend *b;
} probe;

static int
set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL, 0);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Listen on 127.0.0.1:port (0: any free port); the port in *port. */
static int
listen_on(unsigned short *port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(*port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, 64) != 0 || set_nonblock(fd) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Start a probe: a non-blocking connect. A connect refused at once is a
 * result already. */
static void
start_probe(probe *p)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(p->b->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p->done = 0;
	p->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (p->fd < 0 || set_nonblock(p->fd) != 0) {
		p->done = 1;
		p->result = RESIL_PROBE_FAILED;
		return;
	}
	if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		p->done = 1;
		p->result = RESIL_PROBE_OK;
	} else if (errno != EINPROGRESS) {
		p->done = 1;
		p->result = RESIL_PROBE_FAILED;
	}
}

/* Run the probes out until each has its result, accepting (and closing)
 * whatever reaches the servers meanwhile. */
static void
run_probes(probe *ps, int n, backend *bs)
{
	for (;;) {
		struct pollfd pf[MAXPROBES + NBACKENDS];
		int who[MAXPROBES + NBACKENDS];
		int i, k = 0, open = 0;

		for (i = 0; i < n; i++)
			if (!ps[i].done) {
				pf[k].fd = ps[i].fd;
				pf[k].events = POLLOUT;
				who[k++] = i;
				open++;
			}
		for (i = 0; i < NBACKENDS; i++)
			if (bs[i].lfd >= 0) {
				pf[k].fd = bs[i].lfd;
				pf[k].events = POLLIN;
				who[k++] = -1 - i;
			}
		if (open == 0)
			break;
		/* A real wait: local connects answer within microseconds. */
		if (poll(pf, (nfds_t)k, 5000) <= 0)
			break;
		for (i = 0; i < k; i++) {
			if (pf[i].revents == 0)
				continue;
			if (who[i] < 0) {
				int c = accept(pf[i].fd, NULL, NULL);

				if (c >= 0)
					close(c);
			} else {
				probe *p = &ps[who[i]];
				int err = 0;
				socklen_t el = sizeof(err);

				if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR,
				        &err, &el) != 0)
					err = errno;
				p->done = 1;
				p->result = err == 0 ? RESIL_PROBE_OK
				                     : RESIL_PROBE_FAILED;
			}
		}
	}
	for (int i = 0; i < n; i++) {
		if (!ps[i].done) { /* no answer within 5 s of real time */
			ps[i].done = 1;
			ps[i].result = RESIL_PROBE_TIMEOUT;
		}
		if (ps[i].fd >= 0)
			close(ps[i].fd);
	}
}

static void
print_time(uint64_t t)
{
	printf("t=%llu.%03llus ", (unsigned long long)(t / SEC),
	    (unsigned long long)(t % SEC / MS));
}

/* The addresses a route finds now, "a c" (or "none"). */
static void
print_candidates(resil_selector *sel, resil_candidates *c)
{
	size_t i, n = 0;

	printf("candidates:");
	if (resil_selector_route(sel, NULL, c, NULL) == RESIL_OK)
		n = resil_candidates_count(c);
	for (i = 0; i < n; i++) {
		resil_candidate e;
		resil_candidates_get(c, i, &e);
		printf(" %s", e.address);
	}
	printf("%s\n", n == 0 ? " none" : "");
}

typedef struct routing {
	resil_selector *sel;
	resil_candidates *c;
} routing;

/* The checker's listener, called after the directory marked the
 * endpoint. */
static void
on_transition(const resil_health_event *ev, void *ctx)
{
	routing *r = ctx;

	print_time(ev->time);
	if (ev->first_check)
		printf("%s %s (first check); ", ev->address,
		    resil_health_event_name(ev->type));
	else
		printf("%s %s (%u %s in a row); ", ev->address,
		    resil_health_event_name(ev->type), ev->count,
		    ev->type == RESIL_HEALTH_BECAME_HEALTHY ? "ok" : "failed");
	if (r->sel != NULL)
		print_candidates(r->sel, r->c);
	else
		printf("\n");
}

int
main(void)
{
	backend bs[NBACKENDS] = { { "a", 0, -1 }, { "b", 0, -1 },
		{ "c", 0, -1 } };
	resil_health_config cfg = resil_health_config_default();
	resil_directory_config dc = resil_directory_config_default();
	resil_selector_config sc = resil_selector_config_default();
	resil_endpoint_spec specs[NBACKENDS];
	routing r = { NULL, NULL };
	resil_manual_clock mc;
	resil_health_metrics m;
	resil_directory *d;
	resil_health *hc;
	resil_diag diag;
	const uint64_t stop_b = 3 * SEC, start_b = 10 * SEC, end = 12 * SEC;
	int i, stopped = 0, restarted = 0;

	for (i = 0; i < NBACKENDS; i++)
		if ((bs[i].lfd = listen_on(&bs[i].port)) < 0) {
			perror("listen");
			return 1;
		}
	printf("backends a, b, c listening on 127.0.0.1\n");

	cfg.interval_ns = 1 * SEC;
	cfg.timeout_ns = 500 * MS;
	cfg.unhealthy_interval_ns = 3 * SEC;
	cfg.unhealthy_edge_interval_ns = 500 * MS;
	cfg.healthy_edge_interval_ns = 500 * MS;
	cfg.unhealthy_threshold = 3;
	cfg.healthy_threshold = 2;
	cfg.listener = on_transition;
	cfg.listener_ctx = &r;
	/* The directory owns the checker: its endpoints are the targets,
	 * each with its backend as the user pointer. */
	resil_manual_clock_init(&mc, 0);
	dc.clock = resil_manual_clock_hook(&mc);
	dc.health = &cfg;
	sc.service = "Backends";
	sc.panic_threshold_pct = 0; /* no panic: unhealthy means out */
	if (resil_directory_new(&d, &dc, &diag) != RESIL_OK ||
	    resil_selector_new(&r.sel, d, &sc, &diag) != RESIL_OK ||
	    resil_candidates_new(&r.c, r.sel) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 1;
	}
	for (i = 0; i < NBACKENDS; i++) {
		specs[i] = resil_endpoint_spec_default(bs[i].name);
		specs[i].user = &bs[i];
	}
	if (resil_directory_push(d, specs, NBACKENDS, &diag) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 1;
	}
	hc = resil_directory_health(d);
	/* New endpoints are unhealthy until their first probe passes. */
	print_time(0);
	print_candidates(r.sel, r.c);

	while (resil_manual_clock_now(&mc) < end) {
		uint64_t now = resil_manual_clock_now(&mc);
		resil_health_step st;
		probe ps[MAXPROBES];
		int n = 0;

		/* The script runs before the probes due at the same time. */
		if (!stopped && now >= stop_b) {
			close(bs[1].lfd);
			bs[1].lfd = -1;
			stopped = 1;
			print_time(now);
			printf("b stops listening\n");
		}
		if (!restarted && now >= start_b) {
			if ((bs[1].lfd = listen_on(&bs[1].port)) < 0) {
				perror("listen again");
				return 1;
			}
			restarted = 1;
			print_time(now);
			printf("b listens again\n");
		}
		/* Every probe due now, then run them all at once. */
		while (n < MAXPROBES &&
		    resil_health_next(hc, now, &st) == RESIL_OK &&
		    st.action == RESIL_HEALTH_PROBE) {
			ps[n].id = st.probe;
			ps[n].b = st.user;
			start_probe(&ps[n]);
			n++;
		}
		if (n > 0) {
			run_probes(ps, n, bs);
			/* In the order started: the output does not depend
			 * on which connect the kernel finished first. */
			for (i = 0; i < n; i++)
				resil_health_report(
				    hc, ps[i].id, ps[i].result, now);
			continue;
		}
		/* Nothing due: on to the next due probe or script event. */
		if (st.until > stop_b && !stopped)
			st.until = stop_b;
		if (st.until > start_b && !restarted)
			st.until = start_b;
		if (st.until > end)
			st.until = end;
		resil_manual_clock_set(&mc, st.until);
	}

	resil_health_get_metrics(hc, &m);
	print_time(resil_manual_clock_now(&mc));
	for (i = 0; i < NBACKENDS; i++)
		printf("%s %s, ", bs[i].name,
		    resil_health_is_healthy(hc, bs[i].name) ? "healthy"
		                                            : "unhealthy");
	printf("%llu probes, %llu failed\n", (unsigned long long)m.probes,
	    (unsigned long long)(m.failed + m.timeouts));
	resil_candidates_free(r.c);
	resil_selector_free(r.sel);
	resil_directory_free(d); /* and its checker */
	for (i = 0; i < NBACKENDS; i++)
		if (bs[i].lfd >= 0)
			close(bs[i].lfd);
	return 0;
}

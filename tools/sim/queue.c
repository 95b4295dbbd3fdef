/*
 * The event queue (a binary heap on (time, sequence)), the seeded
 * generator and small text helpers of resil-sim.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <resil/config.h>

#include "sim.h"

void
sim_queue_init(sim_queue *q)
{
	memset(q, 0, sizeof(*q));
}

void
sim_queue_free(sim_queue *q)
{
	free(q->heap);
	free(q->lane.v);
	memset(q, 0, sizeof(*q));
}

static int
before(const sim_event *a, const sim_event *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int
sim_schedule(sim_queue *q, uint64_t t, int kind, void *p, uint32_t arg)
{
	size_t i;

	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 1024;
		sim_event *h = realloc(q->heap, cap * sizeof(*h));

		if (h == NULL)
			return -1;
		q->heap = h;
		q->cap = cap;
	}
	i = q->n++;
	q->heap[i].t = t;
	q->heap[i].seq = q->seq++;
	q->heap[i].kind = kind;
	q->heap[i].arg = arg;
	q->heap[i].p = p;
	while (i > 0) {
		size_t up = (i - 1) / 2;
		sim_event tmp;

		if (!before(&q->heap[i], &q->heap[up]))
			break;
		tmp = q->heap[i];
		q->heap[i] = q->heap[up];
		q->heap[up] = tmp;
		i = up;
	}
	return 0;
}

/* The lane holds events in (time, sequence) order: one goes at its tail
 * only when it comes after the tail. */
int
sim_schedule_fifo(sim_queue *q, uint64_t t, int kind, void *p, uint32_t arg)
{
	sim_lane *l = &q->lane;
	sim_event *ev;

	if (l->n > 0 && l->v[(l->head + l->n - 1) % l->cap].t > t)
		return sim_schedule(q, t, kind, p, arg);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024, i;
		sim_event *v = malloc(cap * sizeof(*v));

		if (v == NULL)
			return -1;
		for (i = 0; i < l->n; i++)
			v[i] = l->v[(l->head + i) % l->cap];
		free(l->v);
		l->v = v;
		l->cap = cap;
		l->head = 0;
	}
	ev = &l->v[(l->head + l->n++) % l->cap];
	ev->t = t;
	ev->seq = q->seq++;
	ev->kind = kind;
	ev->arg = arg;
	ev->p = p;
	return 0;
}

int
sim_next(sim_queue *q, sim_event *out)
{
	sim_lane *fifo = &q->lane;
	size_t i = 0;

	if (fifo->n > 0 &&
	    (q->n == 0 || before(&fifo->v[fifo->head], &q->heap[0]))) {
		*out = fifo->v[fifo->head];
		fifo->head = (fifo->head + 1) % fifo->cap;
		fifo->n--;
		return 1;
	}
	if (q->n == 0)
		return 0;
	*out = q->heap[0];
	q->heap[0] = q->heap[--q->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		sim_event tmp;

		if (l < q->n && before(&q->heap[l], &q->heap[m]))
			m = l;
		if (r < q->n && before(&q->heap[r], &q->heap[m]))
			m = r;
		if (m == i)
			break;
		tmp = q->heap[i];
		q->heap[i] = q->heap[m];
		q->heap[m] = tmp;
		i = m;
	}
	return 1;
}

void
sim_rng_seed(sim_rng *r, uint64_t seed, uint64_t stream)
{
	r->s = seed ^ (stream * 0xD1B54A32D192ED03ull);
}

uint64_t
sim_rng_next(sim_rng *r)
{
	uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

double
sim_rng_uniform(sim_rng *r)
{
	return (double)(sim_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* The natural logarithm of x > 0, without libm (the fuzz harness that
 * compiles this file links none): x = m * 2^e with m in [1, 2), and
 * ln m = 2 atanh((m - 1) / (m + 1)) by its series (|z| <= 1/3). */
double
sim_log(double x)
{
	uint64_t bits;
	int e;
	double m, z, z2, term, sum = 0.0;
	int k;

	memcpy(&bits, &x, sizeof(bits));
	e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	memcpy(&m, &bits, sizeof(m));
	z = (m - 1.0) / (m + 1.0);
	z2 = z * z;
	term = z;
	for (k = 1; k < 60; k += 2) {
		sum += term / k;
		term *= z2;
	}
	return 2.0 * sum + e * 0.69314718055994530942;
}

uint64_t
sim_rng_exp(sim_rng *r, double mean)
{
	double x = -mean * sim_log(1.0 - sim_rng_uniform(r));

	return x < 1e18 ? (uint64_t)(x + 0.5) : (uint64_t)1e18;
}

const char *
sim_ms_text(uint64_t ns, char *buf, size_t len)
{
	uint64_t whole = ns / RESIL_NS_PER_MS, frac = ns % RESIL_NS_PER_MS;
	int digits = 6;

	if (frac == 0) {
		snprintf(buf, len, "%" PRIu64, whole);
		return buf;
	}
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	snprintf(buf, len, "%" PRIu64 ".%0*" PRIu64, whole, digits, frac);
	return buf;
}

int
sim_parse_time(const char *s, uint64_t *ns)
{
	resil_diag d;

	return resil_config_parse_duration(s, ns, &d) == RESIL_OK ? 0 : -1;
}

int
sim_split(char *line, char **words, int max)
{
	char *save = NULL, *w, *hash = strchr(line, '#');
	int n = 0;

	if (hash != NULL)
		*hash = '\0';
	for (w = strtok_r(line, " \t\r\n", &save); w != NULL;
	     w = strtok_r(NULL, " \t\r\n", &save)) {
		if (n == max)
			return -1;
		words[n++] = w;
	}
	return n;
}

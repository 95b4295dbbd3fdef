/*
 * Seen: per-key figures, the top keys, and the Prometheus text of keyed
 * families, alone (resil_keyed_prometheus) or every pipeline's in the
 * registry's text (lib/registry.c). Built on resil_keyed_foreach(): no
 * reach into the family's table.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "keyed_prom.h"

static void
figures(const resil_keyed_instance *in, resil__kfig *f)
{
	f->calls = f->failures = f->rejections = f->open = 0;
	f->state = RESIL_BREAKER_CLOSED;
	if (in->kind == RESIL_KEYED_BREAKER) {
		resil_breaker_metrics m;

		if (resil_breaker_get_metrics(in->breaker, &m) != RESIL_OK)
			return;
		f->calls = m.successes + m.failures + m.ignored;
		f->failures = m.failures;
		f->rejections = m.rejections;
		f->state = m.state;
		f->open = m.state != RESIL_BREAKER_CLOSED;
	} else if (in->kind == RESIL_KEYED_RATELIMIT) {
		resil_ratelimit_metrics m;

		if (resil_ratelimit_get_metrics(in->ratelimit, &m) != RESIL_OK)
			return;
		f->calls = m.granted_calls + m.rejected_calls;
		f->rejections = m.rejected_calls;
	} else if (in->kind == RESIL_KEYED_THROTTLE) {
		resil_throttle_metrics m;

		if (resil_throttle_get_metrics(in->throttle, &m) != RESIL_OK)
			return;
		f->calls = m.requests;
		f->failures = m.backend_rejects;
		f->rejections = m.local_rejects;
	} else if (in->kind == RESIL_KEYED_BULKHEAD) {
		resil_bulkhead_metrics m;

		if (resil_bulkhead_get_metrics(in->bulkhead, &m) != RESIL_OK)
			return;
		f->calls = m.granted + m.rejected;
		f->rejections = m.rejected;
	}
}

static int
cmp_u64(uint64_t a, uint64_t b)
{
	return a > b ? -1 : a < b ? 1 : 0;
}

/* Best first: by the rank's figures, then calls, then entry order. */
static int
cmp_fig(const resil__kfig *a, const resil__kfig *b)
{
	int c;

	if (a->by == RESIL_KEYED_BY_FAILURES) {
		if ((c = cmp_u64(a->failures, b->failures)) != 0 ||
		    (c = cmp_u64(a->rejections, b->rejections)) != 0)
			return c;
	} else if (a->by == RESIL_KEYED_BY_REJECTIONS) {
		if ((c = cmp_u64(a->rejections, b->rejections)) != 0 ||
		    (c = cmp_u64(a->failures, b->failures)) != 0)
			return c;
	} else if ((c = cmp_u64(a->failures + a->rejections,
	                b->failures + b->rejections)) != 0)
		return c;
	if ((c = cmp_u64(a->calls, b->calls)) != 0)
		return c;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int
cmp_qsort(const void *a, const void *b)
{
	return cmp_fig(a, b);
}

/* The heap keeps its worst key at the root: a parent is never better
 * than its children. */
static void
swap(resil__kfig *a, resil__kfig *b)
{
	resil__kfig t = *a;

	*a = *b;
	*b = t;
}

static void
sift_up(resil__kfig *h, size_t i)
{
	while (i > 0 && cmp_fig(&h[i], &h[(i - 1) / 2]) > 0) {
		swap(&h[i], &h[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
}

static void
sift_down(resil__kfig *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;

		if (l < n && cmp_fig(&h[l], &h[w]) > 0)
			w = l;
		if (r < n && cmp_fig(&h[r], &h[w]) > 0)
			w = r;
		if (w == i)
			return;
		swap(&h[i], &h[w]);
		i = w;
	}
}

static void
add_to(resil__kfig *sum, const resil__kfig *f)
{
	sum->calls += f->calls;
	sum->failures += f->failures;
	sum->rejections += f->rejections;
	sum->open += f->open;
}

/* Put f's figures and a copy of key in slot s (its key buffer reused
 * when it is large enough). */
static int
keep(resil__ktop *t, resil__kfig *s, const resil__kfig *f, const void *key,
    size_t len)
{
	uint8_t *buf = s->key;
	size_t cap = s->cap;

	if (cap < len) {
		if (buf != NULL)
			resil__free(t->a, buf, cap);
		s->key = NULL;
		s->cap = 0;
		buf = resil__alloc(t->a, len);
		if (buf == NULL)
			return -1;
		cap = len;
	}
	*s = *f;
	s->key = buf;
	s->cap = cap;
	s->len = len;
	memcpy(buf, key, len);
	return 0;
}

static void
visit(const void *key, size_t len, const resil_keyed_instance *in, void *ctx)
{
	resil__ktop *t = ctx;
	resil__kfig f;

	if (t->nomem)
		return;
	memset(&f, 0, sizeof(f));
	figures(in, &f);
	f.seq = t->live++;
	f.by = t->by;
	if (t->n < t->cap) {
		if (keep(t, &t->key[t->n], &f, key, len) != 0) {
			t->nomem = 1;
			return;
		}
		t->n++;
		sift_up(t->key, t->n - 1);
	} else if (t->n > 0 && cmp_fig(&f, &t->key[0]) < 0) {
		add_to(&t->rest, &t->key[0]);
		if (keep(t, &t->key[0], &f, key, len) != 0) {
			t->nomem = 1;
			return;
		}
		sift_down(t->key, t->n, 0);
	} else
		add_to(&t->rest, &f);
}

void
resil__ktop_free(resil__ktop *t)
{
	size_t i;

	if (t->key == NULL)
		return;
	for (i = 0; i < t->cap; i++)
		if (t->key[i].key != NULL)
			resil__free(t->a, t->key[i].key, t->key[i].cap);
	resil__free(t->a, t->key, t->cap * sizeof(*t->key));
	t->key = NULL;
	t->n = 0;
}

resil_err
resil__ktop_take(resil__ktop *t, resil_keyed *k, int by, size_t cap,
    const resil_allocator *a)
{
	resil_keyed_metrics km;

	memset(t, 0, sizeof(*t));
	t->a = a;
	t->by = by;
	/* No more than the family can hold. */
	if (resil_keyed_get_metrics(k, &km) == RESIL_OK && cap > km.max_keys)
		cap = km.max_keys;
	if (cap > 0) {
		t->key = resil__calloc(a, cap * sizeof(*t->key));
		if (t->key == NULL)
			return RESIL_E_NOMEM;
	}
	t->cap = cap;
	(void)resil_keyed_foreach(k, visit, t);
	if (t->nomem) {
		resil__ktop_free(t);
		return RESIL_E_NOMEM;
	}
	if (t->n > 1)
		qsort(t->key, t->n, sizeof(*t->key), cmp_qsort);
	return RESIL_OK;
}

resil_err
resil_keyed_top(resil_keyed *k, resil_keyed_rank by,
    resil_keyed_top_entry *out, size_t n, size_t *got)
{
	resil__ktop t;
	resil_err err;
	size_t i;

	if (k == NULL || (out == NULL && n > 0) || got == NULL ||
	    (by != RESIL_KEYED_BY_FAILURES && by != RESIL_KEYED_BY_REJECTIONS))
		return RESIL_E_INVAL;
	err = resil__ktop_take(&t, k, (int)by, n, resil__keyed_user_alloc(k));
	if (err != RESIL_OK)
		return err;
	for (i = 0; i < t.n && i < n; i++) {
		const resil__kfig *f = &t.key[i];

		memset(&out[i], 0, sizeof(out[i]));
		out[i].key_len = f->len;
		memcpy(out[i].key, f->key,
		    f->len < RESIL_KEYED_TOP_KEY ? f->len
		                                 : RESIL_KEYED_TOP_KEY);
		out[i].calls = f->calls;
		out[i].failures = f->failures;
		out[i].rejections = f->rejections;
		out[i].state = f->state;
	}
	*got = i;
	resil__ktop_free(&t);
	return RESIL_OK;
}

void
resil__kfam_overflow(resil__kfam *f, resil_keyed *k)
{
	resil_keyed_instance in;

	memset(&f->over, 0, sizeof(f->over));
	f->has_over = 0;
	if (resil_keyed_overflow(k, &in) != RESIL_OK)
		return;
	figures(&in, &f->over);
	f->has_over = f->over.calls + f->over.rejections > 0 || f->over.open;
}

/* ---- the text ---- */

static void
labels(resil__prom *w, const resil__kfam *f)
{
	if (f->family != NULL) {
		resil__prom_puts(w, "{family=\"");
		resil__prom_escaped(w, f->family);
	} else {
		resil__prom_puts(w, "{service=\"");
		resil__prom_escaped(w, f->service);
		resil__prom_puts(w, "\",kind=\"");
		resil__prom_puts(w, resil_keyed_kind_name(f->kind));
	}
	resil__prom_put(w, "\"", 1);
}

enum { S_KEY, S_OTHER, S_OVERFLOW };

/* name{labels[,key="K"]} v; key NULL and S_KEY: the family's own sample;
 * S_OTHER: key="__other__"; S_OVERFLOW: key="__overflow__". */
static void
sample(resil__prom *w, const char *name, const resil__kfam *f,
    const resil__kfig *key, int other, uint64_t v)
{
	resil__prom_puts(w, name);
	labels(w, f);
	if (other == S_OTHER)
		resil__prom_puts(w, ",key=\"__other__\"");
	else if (other == S_OVERFLOW)
		resil__prom_puts(w, ",key=\"__overflow__\"");
	else if (key != NULL) {
		resil__prom_puts(w, ",key=\"");
		resil__prom_key(w, key->key, key->len);
		resil__prom_put(w, "\"", 1);
	}
	resil__prom_puts(w, "} ");
	resil__prom_u64(w, v);
	resil__prom_put(w, "\n", 1);
}

static uint64_t
family_value(const resil__kfam *f, int which)
{
	switch (which) {
	case 0:
		return f->top.live;
	case 1:
		return f->km.max_keys;
	case 2:
		return f->km.bytes;
	case 3:
		return f->km.created;
	case 4:
		return f->km.evicted;
	default:
		return f->km.overflowed;
	}
}

static uint64_t
key_value(const resil__kfig *k, int which)
{
	return which == 0 ? k->calls
	    : which == 1  ? k->failures
	    : which == 2  ? k->rejections
	                  : k->open;
}

/* Does family f have per-key metric which (0 calls, 1 failures,
 * 2 rejections, 3 breaker open)? */
static int
has_metric(const resil__kfam *f, int which)
{
	if (which == 1)
		return f->kind == RESIL_KEYED_BREAKER ||
		    f->kind == RESIL_KEYED_THROTTLE;
	if (which == 3)
		return f->kind == RESIL_KEYED_BREAKER;
	return 1;
}

void
resil__keyed_prom_write(resil__prom *w, const resil__kfam *f, size_t n)
{
	static const char *const fam[][3] = {
		{ "resil_keyed_keys", "gauge", "Keys with an instance now." },
		{ "resil_keyed_max_keys", "gauge", "The family's bound." },
		{ "resil_keyed_bytes", "gauge", "Bytes the family holds." },
		{ "resil_keyed_created_total", "counter",
		    "Instances made for keys." },
		{ "resil_keyed_evicted_total", "counter",
		    "Idle keys evicted." },
		{ "resil_keyed_overflow_total", "counter",
		    "Calls of new keys given the overflow instance." },
	};
	static const char *const per_key[][3] = {
		{ "resil_keyed_calls_total", "counter",
		    "Calls seen by the key's instance." },
		{ "resil_keyed_failures_total", "counter",
		    "Failures recorded by the key's breaker or refusals seen "
		    "by its throttle." },
		{ "resil_keyed_rejections_total", "counter",
		    "Calls the key's instance rejected." },
		{ "resil_keyed_breaker_open", "gauge",
		    "1 when the key's breaker is not CLOSED (summed for "
		    "folded "
		    "keys)." },
	};
	size_t i, j;
	int which;

	if (n == 0)
		return;
	for (which = 0; which < 6; which++) {
		resil__prom_head(
		    w, fam[which][0], fam[which][1], fam[which][2]);
		for (i = 0; i < n; i++)
			sample(w, fam[which][0], &f[i], NULL, S_KEY,
			    family_value(&f[i], which));
	}
	for (which = 0; which < 4; which++) {
		for (i = 0; i < n && !has_metric(&f[i], which); i++)
			;
		if (i == n)
			continue;
		resil__prom_head(w, per_key[which][0], per_key[which][1],
		    per_key[which][2]);
		for (i = 0; i < n; i++) {
			const resil__ktop *t = &f[i].top;

			if (!has_metric(&f[i], which))
				continue;
			for (j = 0; j < t->n; j++)
				sample(w, per_key[which][0], &f[i], &t->key[j],
				    S_KEY, key_value(&t->key[j], which));
			if (t->live > t->n)
				sample(w, per_key[which][0], &f[i], NULL,
				    S_OTHER, key_value(&t->rest, which));
			if (f[i].has_over)
				sample(w, per_key[which][0], &f[i], NULL,
				    S_OVERFLOW, key_value(&f[i].over, which));
		}
	}
}

typedef struct bufsink {
	char *buf;
	size_t cap, len;
} bufsink;

static int
to_buf(const char *chunk, size_t n, void *ctx)
{
	bufsink *b = ctx;

	if (b->len < b->cap) {
		size_t room = b->cap - b->len;

		memcpy(b->buf + b->len, chunk, n < room ? n : room);
	}
	b->len += n;
	return 0;
}

resil_err
resil_keyed_prometheus(resil_keyed *k, const char *family, size_t max_series,
    char *buf, size_t cap, size_t *len)
{
	resil__kfam f;
	resil__prom w;
	bufsink b;
	resil_err err;

	if (k == NULL || family == NULL || len == NULL ||
	    (buf == NULL && cap > 0))
		return RESIL_E_INVAL;
	memset(&f, 0, sizeof(f));
	f.family = family;
	f.kind = resil_keyed_get_kind(k);
	(void)resil_keyed_get_metrics(k, &f.km);
	err = resil__ktop_take(
	    &f.top, k, -1, max_series, resil__keyed_user_alloc(k));
	if (err != RESIL_OK)
		return err;
	resil__kfam_overflow(&f, k);
	b.buf = buf;
	b.cap = cap;
	b.len = 0;
	resil__prom_init(&w, to_buf, &b);
	resil__keyed_prom_write(&w, &f, 1);
	(void)resil__prom_flush(&w);
	resil__ktop_free(&f.top);
	*len = b.len;
	if (b.len >= cap) {
		if (cap > 0)
			buf[cap - 1] = '\0';
		return RESIL_E_INVAL;
	}
	buf[b.len] = '\0';
	return RESIL_OK;
}

/*
 * The Prometheus text writer shared by the registry and the keyed
 * families (lib/prom_text.h).
 */
#include "prom_text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void
resil__prom_init(resil__prom *w, resil__prom_sink fn, void *ctx)
{
	w->fn = fn;
	w->ctx = ctx;
	w->stopped = 0;
	w->n = 0;
}

int
resil__prom_flush(resil__prom *w)
{
	if (w->n != 0 && !w->stopped && w->fn(w->buf, w->n, w->ctx) != 0)
		w->stopped = 1;
	w->n = 0;
	return w->stopped;
}

void
resil__prom_put(resil__prom *w, const char *s, size_t n)
{
	while (n != 0 && !w->stopped) {
		size_t k = sizeof(w->buf) - w->n;

		if (k > n)
			k = n;
		memcpy(w->buf + w->n, s, k);
		w->n += k;
		s += k;
		n -= k;
		if (w->n == sizeof(w->buf))
			(void)resil__prom_flush(w);
	}
}

void
resil__prom_puts(resil__prom *w, const char *s)
{
	resil__prom_put(w, s, strlen(s));
}

void
resil__prom_u64(resil__prom *w, uint64_t v)
{
	char b[24];
	int n = snprintf(b, sizeof(b), "%llu", (unsigned long long)v);

	resil__prom_put(w, b, (size_t)n);
}

void
resil__prom_double(resil__prom *w, double v)
{
	char b[40];
	int n;

	if (isnan(v)) {
		resil__prom_puts(w, "NaN");
		return;
	}
	if (isinf(v)) {
		resil__prom_puts(w, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	n = snprintf(b, sizeof(b), "%.6g", v);
	resil__prom_put(w, b, (size_t)n);
}

void
resil__prom_escaped(resil__prom *w, const char *s)
{
	const char *run = s;

	for (; *s != '\0'; s++) {
		const char *esc = *s == '\\' ? "\\\\"
		    : *s == '"'              ? "\\\""
		    : *s == '\n'             ? "\\n"
		                             : NULL;

		if (esc == NULL)
			continue;
		resil__prom_put(w, run, (size_t)(s - run));
		resil__prom_put(w, esc, 2);
		run = s + 1;
	}
	resil__prom_put(w, run, (size_t)(s - run));
}

/* The length of the valid UTF-8 sequence at p (n bytes left) of two to
 * four bytes, or 0: no overlong form, no surrogate, nothing past
 * U+10FFFF (RFC 3629's table). */
static size_t
utf8_len(const uint8_t *p, size_t n)
{
	uint8_t c = p[0], lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return len;
}

void
resil__prom_key(resil__prom *w, const uint8_t *key, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	static const char other[] = "__other__";
	static const char over[] = "__overflow__";
	size_t i = 0, u;

	if ((n == sizeof(other) - 1 && memcmp(key, other, n) == 0) ||
	    (n == sizeof(over) - 1 && memcmp(key, over, n) == 0)) {
		/* \x5f in the value: \\x5f in the text. */
		resil__prom_put(w, "\\\\x5f", 5);
		i = 1;
	}
	while (i < n) {
		uint8_t c = key[i];

		if (c == '\\') {
			resil__prom_put(w, "\\\\\\\\", 4);
			i++;
		} else if (c == '"') {
			resil__prom_put(w, "\\\"", 2);
			i++;
		} else if (c == '\n') {
			resil__prom_put(w, "\\n", 2);
			i++;
		} else if (c >= 0x20 && c < 0x7f) {
			resil__prom_put(w, (const char *)&key[i], 1);
			i++;
		} else if (c >= 0x80 && (u = utf8_len(key + i, n - i)) != 0) {
			resil__prom_put(w, (const char *)&key[i], u);
			i += u;
		} else {
			char e[5] = { '\\', '\\', 'x', hex[c >> 4],
				hex[c & 15] };

			resil__prom_put(w, e, sizeof(e));
			i++;
		}
	}
}

void
resil__prom_head(
    resil__prom *w, const char *name, const char *type, const char *help)
{
	resil__prom_puts(w, "# HELP ");
	resil__prom_puts(w, name);
	resil__prom_put(w, " ", 1);
	resil__prom_puts(w, help);
	resil__prom_puts(w, "\n# TYPE ");
	resil__prom_puts(w, name);
	resil__prom_put(w, " ", 1);
	resil__prom_puts(w, type);
	resil__prom_put(w, "\n", 1);
}

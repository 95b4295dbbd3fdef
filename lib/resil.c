/*
 * resil core: error strings, version, outcome classes, allocator and
 * diagnostics.
 */
#include "internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"

const char *
resil_strerror(resil_err err)
{
	switch (err) {
#define XX(name, value, text) \
	case RESIL_##name:    \
		return text;
		RESIL_ERR_MAP(XX)
#undef XX
	}
	return "unknown resil error";
}

const char *
resil_err_name(resil_err err)
{
	switch (err) {
#define XX(name, value, text) \
	case RESIL_##name:    \
		return "RESIL_" #name;
		RESIL_ERR_MAP(XX)
#undef XX
	}
	return "RESIL_E_UNKNOWN";
}

unsigned
resil_version(void)
{
	return RESIL_VERSION_NUM;
}

const char *
resil_version_string(void)
{
	return RESIL_VERSION_STRING;
}

const char *
resil_outcome_name(resil_outcome outcome)
{
	switch (outcome) {
	case RESIL_OUTCOME_SUCCESS:
		return "success";
	case RESIL_OUTCOME_FAILURE:
		return "failure";
	case RESIL_OUTCOME_IGNORED:
		return "ignored";
	case RESIL_OUTCOME_BUSINESS:
		return "business";
	}
	return "unknown";
}

resil_outcome
resil_classify_default(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

resil_outcome
resil_classify(const resil_classifier *cls, int rc, const void *value)
{
	resil_outcome o;

	if (cls == NULL || cls->fn == NULL)
		return resil_classify_default(rc, value, NULL);
	o = cls->fn(rc, value, cls->ctx);
	/* A classifier that returns garbage must not steer the state
	 * machines into undefined territory: treat it as a failure. */
	if ((unsigned)o > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_OUTCOME_FAILURE;
	return o;
}

static void *
default_alloc(size_t size, void *ctx)
{
	(void)ctx;
	return malloc(size);
}

static void
default_free(void *ptr, size_t size, void *ctx)
{
	(void)size;
	(void)ctx;
	free(ptr);
}

static const resil_allocator default_allocator = {
	default_alloc,
	default_free,
	NULL,
};

const resil_allocator *
resil_allocator_default(void)
{
	return &default_allocator;
}

const resil_allocator *
resil__allocator(const resil_allocator *a)
{
	if (a == NULL || a->alloc == NULL || a->free == NULL)
		return &default_allocator;
	return a;
}

void *
resil__alloc(const resil_allocator *a, size_t size)
{
	a = resil__allocator(a);
	if (size == 0)
		size = 1;
	return a->alloc(size, a->ctx);
}

void *
resil__calloc(const resil_allocator *a, size_t size)
{
	void *p = resil__alloc(a, size);

	if (p != NULL)
		memset(p, 0, size);
	return p;
}

void
resil__free(const resil_allocator *a, void *ptr, size_t size)
{
	if (ptr == NULL)
		return;
	a = resil__allocator(a);
	a->free(ptr, size == 0 ? 1 : size, a->ctx);
}

char *
resil__strndup(const resil_allocator *a, const char *s, size_t n)
{
	char *p = resil__alloc(a, n + 1);

	if (p != NULL) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *
resil__strdup(const resil_allocator *a, const char *s)
{
	return s == NULL ? NULL : resil__strndup(a, s, strlen(s));
}

void
resil__strfree(const resil_allocator *a, char *s)
{
	if (s != NULL)
		resil__free(a, s, strlen(s) + 1);
}

/*
 * Diagnostics: the message names the field and gives the reason, and a
 * long value (a 10 KB key, a huge spec) must not push the reason out of
 * the 256 bytes. So each %s argument that would not fit a diagnostic by
 * itself is elided in the middle ("abc...xyz", 44 bytes each side; a
 * message passed on from another diagnostic always fits, so it is never
 * cut), and a message still too long keeps its head and its tail (where
 * the reason is) around "...".
 */
#define DIAG_VALUE_MAX (RESIL_DIAG_MAX - 1)
#define DIAG_VALUE_KEEP 44

/* Move i back (floor) or on (ceil) to the start of a UTF-8 character. */
static size_t
utf8_floor(const char *s, size_t i)
{
	while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80)
		i--;
	return i;
}

static size_t
utf8_ceil(const char *s, size_t i, size_t n)
{
	while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
		i++;
	return i;
}

static void
out_elided(resil__out *o, const char *s, size_t n)
{
	size_t head, tail;

	if (n <= DIAG_VALUE_MAX) {
		resil__out_s(o, s, n);
		return;
	}
	head = utf8_floor(s, DIAG_VALUE_KEEP);
	tail = utf8_ceil(s, n - DIAG_VALUE_KEEP, n);
	resil__out_s(o, s, head);
	resil__out_s(o, "...", 3);
	resil__out_s(o, s + tail, n - tail);
}

/* vsnprintf with every long %s elided; the conversions resil uses. */
static void
diag_format(resil__out *o, const char *fmt, va_list ap)
{
	const char *p;

	for (p = fmt; *p != '\0'; p++) {
		char spec[32], tmp[64];
		const char *start = p;
		int width = -1, prec = -1, n;
		char len[3] = { 0, 0, 0 };
		size_t k = 0;

		if (*p != '%') {
			resil__out_c(o, *p);
			continue;
		}
		if (p[1] == '%') {
			resil__out_c(o, '%');
			p++;
			continue;
		}
		p++;
		while (*p != '\0' && strchr("-+ #0", *p) != NULL)
			p++;
		if (*p == '*') {
			width = va_arg(ap, int);
			p++;
		} else {
			while (*p >= '0' && *p <= '9')
				p++;
		}
		if (*p == '.') {
			p++;
			if (*p == '*') {
				prec = va_arg(ap, int);
				p++;
			} else {
				prec = 0;
				while (*p >= '0' && *p <= '9')
					prec = prec * 10 + (*p++ - '0');
			}
		}
		while (*p != '\0' && strchr("hlzjtL", *p) != NULL && k < 2)
			len[k++] = *p++;
		if (*p == '\0' || (size_t)(p - start) + 1 >= sizeof(spec) - 8)
			break;
		/* The spec again, with * replaced by the numbers read. */
		{
			size_t j = 0;
			const char *q;

			for (q = start; q <= p; q++) {
				if (*q == '*') {
					int v = q[-1] == '.' ? prec : width;

					j += (size_t)snprintf(spec + j,
					    sizeof(spec) - j, "%d", v);
				} else {
					spec[j++] = *q;
				}
			}
			spec[j] = '\0';
		}
		switch (*p) {
		case 's': {
			const char *s = va_arg(ap, const char *);
			size_t sl;

			if (s == NULL)
				s = "(null)";
			sl = strlen(s);
			if (prec >= 0 && (size_t)prec < sl)
				sl = (size_t)prec;
			out_elided(o, s, sl);
			continue;
		}
		case 'c':
			n = snprintf(tmp, sizeof(tmp), spec, va_arg(ap, int));
			break;
		case 'd':
		case 'i':
			if (len[0] == 'l' && len[1] == 'l')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, long long));
			else if (len[0] == 'l')
				n = snprintf(
				    tmp, sizeof(tmp), spec, va_arg(ap, long));
			else if (len[0] == 'z' || len[0] == 't')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, ptrdiff_t));
			else if (len[0] == 'j')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, intmax_t));
			else
				n = snprintf(
				    tmp, sizeof(tmp), spec, va_arg(ap, int));
			break;
		case 'u':
		case 'x':
		case 'X':
		case 'o':
			if (len[0] == 'l' && len[1] == 'l')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, unsigned long long));
			else if (len[0] == 'l')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, unsigned long));
			else if (len[0] == 'z' || len[0] == 't')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, size_t));
			else if (len[0] == 'j')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, uintmax_t));
			else
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, unsigned));
			break;
		case 'f':
		case 'F':
		case 'g':
		case 'G':
		case 'e':
		case 'E':
		case 'a':
		case 'A':
			if (len[0] == 'L')
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, long double));
			else
				n = snprintf(tmp, sizeof(tmp), spec,
				    va_arg(ap, double));
			break;
		case 'p':
			n = snprintf(
			    tmp, sizeof(tmp), spec, va_arg(ap, void *));
			break;
		default:
			/* Not a conversion resil writes: show it as is. */
			resil__out_s(o, start, (size_t)(p - start) + 1);
			continue;
		}
		if (n > 0)
			resil__out_s(o, tmp,
			    (size_t)n < sizeof(tmp) ? (size_t)n
			                            : sizeof(tmp) - 1);
	}
}

void
resil__backoff(unsigned *spins)
{
	if (++*spins < 1024) {
		resil__stall();
		return;
	}
	*spins = 0;
	sched_yield();
}

resil_err
resil__vdiagf(resil_diag *diag, resil_err err, const char *fmt, va_list ap)
{
	char full[1024];
	resil__out o;
	size_t n;

	if (diag == NULL)
		return err;
	resil__out_start(&o, full, sizeof(full));
	diag_format(&o, fmt, ap);
	n = resil__out_finish(&o);
	if (n >= sizeof(full))
		n = sizeof(full) - 1;
	if (n < sizeof(diag->msg)) {
		memcpy(diag->msg, full, n + 1);
	} else {
		/* Head and tail, the reason is at the end. */
		size_t keep = (sizeof(diag->msg) - 4) / 2;
		size_t head = utf8_floor(full, keep);
		size_t tail =
		    utf8_ceil(full, n - (sizeof(diag->msg) - 4 - head), n);

		memcpy(diag->msg, full, head);
		memcpy(diag->msg + head, "...", 3);
		memcpy(diag->msg + head + 3, full + tail, n - tail);
		diag->msg[head + 3 + (n - tail)] = '\0';
	}
	return err;
}

resil_err
resil__diagf(resil_diag *diag, resil_err err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err = resil__vdiagf(diag, err, fmt, ap);
	va_end(ap);
	return err;
}

resil_err
resil__check_size(resil_diag *diag, const char *prefix, const char *type,
    size_t got, size_t want)
{
	if (got == want)
		return RESIL_OK;
	return resil__diagf(diag, RESIL_E_INVAL,
	    "%s.size: %zu is not a known %s size (expected %zu; use "
	    "%s_init())",
	    prefix, got, type, want, type);
}

static uint64_t stripe_next;
RESIL__TLS unsigned resil__stripe_mine;

unsigned
resil__thread_stripe_slow(unsigned n)
{
	/* 0 means "not yet assigned", so indexes are stored + 1. */
	unsigned s = (unsigned)(resil__faa64(&stripe_next, 1) & 0xffffu) + 1;

	resil__stripe_mine = s;
	return (s - 1) & (n - 1);
}

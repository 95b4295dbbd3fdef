/*
 * resil's private helpers (lib/internal.h): allocation through the hook,
 * strings, diagnostics, thread stripes (owned ones, the membarrier
 * fence) and the backoff of a wait.
 */
#define _GNU_SOURCE 1 /* syscall() */

#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "atomic.h"
#include "breaker_fast.h"

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

/* One conversion of a format: the text of its spec with each '*' replaced
 * by the number read for it, its length modifier and its precision (-1:
 * none). */
typedef struct conv {
	char spec[32];
	char len[3];
	int prec;
} conv;

/* Write the spec from start to p (the conversion letter), each '*' as the
 * number read for it. */
static void
conv_spec(conv *cv, const char *start, const char *p, int width)
{
	size_t j = 0;
	const char *q;

	for (q = start; q <= p; q++) {
		if (*q == '*') {
			int v = q[-1] == '.' ? cv->prec : width;

			j += (size_t)snprintf(
			    cv->spec + j, sizeof(cv->spec) - j, "%d", v);
		} else {
			cv->spec[j++] = *q;
		}
	}
	cv->spec[j] = '\0';
}

/* Read the conversion that starts at start (its '%'): its flags, width,
 * precision and length, taking the arguments of a '*'. Returns where its
 * letter is, or NULL when the format ends inside it or it is too long to
 * be one resil writes (the rest of the format is then dropped). */
static const char *
conv_read(conv *cv, const char *start, va_list *ap)
{
	const char *p = start + 1;
	int width = -1;
	size_t k = 0;

	cv->prec = -1;
	memset(cv->len, 0, sizeof(cv->len));
	while (*p != '\0' && strchr("-+ #0", *p) != NULL)
		p++;
	if (*p == '*') {
		width = va_arg(*ap, int);
		p++;
	} else {
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == '.') {
		p++;
		if (*p == '*') {
			cv->prec = va_arg(*ap, int);
			p++;
		} else {
			cv->prec = 0;
			while (*p >= '0' && *p <= '9')
				cv->prec = cv->prec * 10 + (*p++ - '0');
		}
	}
	while (*p != '\0' && strchr("hlzjtL", *p) != NULL && k < 2)
		cv->len[k++] = *p++;
	if (*p == '\0' || (size_t)(p - start) + 1 >= sizeof(cv->spec) - 8)
		return NULL;
	conv_spec(cv, start, p, width);
	return p;
}

/* A signed integer conversion of cv into tmp (snprintf's result). */
static int
conv_signed(const conv *cv, char *tmp, size_t n, va_list *ap)
{
	if (cv->len[0] == 'l' && cv->len[1] == 'l')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, long long));
	if (cv->len[0] == 'l')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, long));
	if (cv->len[0] == 'z' || cv->len[0] == 't')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, ptrdiff_t));
	if (cv->len[0] == 'j')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, intmax_t));
	return snprintf(tmp, n, cv->spec, va_arg(*ap, int));
}

/* An unsigned integer conversion of cv into tmp. */
static int
conv_unsigned(const conv *cv, char *tmp, size_t n, va_list *ap)
{
	if (cv->len[0] == 'l' && cv->len[1] == 'l')
		return snprintf(
		    tmp, n, cv->spec, va_arg(*ap, unsigned long long));
	if (cv->len[0] == 'l')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, unsigned long));
	if (cv->len[0] == 'z' || cv->len[0] == 't')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, size_t));
	if (cv->len[0] == 'j')
		return snprintf(tmp, n, cv->spec, va_arg(*ap, uintmax_t));
	return snprintf(tmp, n, cv->spec, va_arg(*ap, unsigned));
}

/* Write the conversion read into cv, whose letter is at p (start: its
 * '%'), taking its argument. */
static void
conv_put(resil__out *o, const conv *cv, const char *start, const char *p,
    va_list *ap)
{
	char tmp[64];
	int n;

	switch (*p) {
	case 's': {
		const char *s = va_arg(*ap, const char *);
		size_t sl;

		if (s == NULL)
			s = "(null)";
		sl = strlen(s);
		if (cv->prec >= 0 && (size_t)cv->prec < sl)
			sl = (size_t)cv->prec;
		out_elided(o, s, sl);
		return;
	}
	case 'c':
		n = snprintf(tmp, sizeof(tmp), cv->spec, va_arg(*ap, int));
		break;
	case 'd':
	case 'i':
		n = conv_signed(cv, tmp, sizeof(tmp), ap);
		break;
	case 'u':
	case 'x':
	case 'X':
	case 'o':
		n = conv_unsigned(cv, tmp, sizeof(tmp), ap);
		break;
	case 'f':
	case 'F':
	case 'g':
	case 'G':
	case 'e':
	case 'E':
	case 'a':
	case 'A':
		if (cv->len[0] == 'L')
			n = snprintf(tmp, sizeof(tmp), cv->spec,
			    va_arg(*ap, long double));
		else
			n = snprintf(
			    tmp, sizeof(tmp), cv->spec, va_arg(*ap, double));
		break;
	case 'p':
		n = snprintf(tmp, sizeof(tmp), cv->spec, va_arg(*ap, void *));
		break;
	default:
		/* Not a conversion resil writes: show it as is. */
		resil__out_s(o, start, (size_t)(p - start) + 1);
		return;
	}
	if (n > 0)
		resil__out_s(o, tmp,
		    (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* vsnprintf with every long %s elided; the conversions resil uses. ap is
 * a pointer so that the steps above take their arguments from one list. */
static void
diag_format(resil__out *o, const char *fmt, va_list *ap)
{
	const char *p;
	conv cv;

	for (p = fmt; *p != '\0'; p++) {
		const char *start = p;

		if (*p != '%') {
			resil__out_c(o, *p);
			continue;
		}
		if (p[1] == '%') {
			resil__out_c(o, '%');
			p++;
			continue;
		}
		p = conv_read(&cv, start, ap);
		if (p == NULL)
			break;
		conv_put(o, &cv, start, p, ap);
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
	va_list aq;
	size_t n;

	if (diag == NULL)
		return err;
	resil__out_start(&o, full, sizeof(full));
	va_copy(aq, ap);
	diag_format(&o, fmt, &aq);
	va_end(aq);
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
resil__diag_prefix(resil_diag *diag, resil_err err, const char *what)
{
	char tmp[RESIL_DIAG_MAX];

	if (diag == NULL || err == RESIL_OK || what == NULL)
		return err;
	/* "retry.max_attempts: ..." becomes "getStock.retry.max_attempts:
	 * ...", "mock: ..." becomes "getStock.mock: ...". */
	memcpy(tmp, diag->msg, sizeof(tmp));
	return resil__diagf(diag, err, "%.64s.%.180s", what, tmp);
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

/*
 * Thread stripes (lib/internal.h). stripe_owned has bit i set while a
 * thread owns stripe i (RESIL__STRIPES - RESIL__STRIPES_OWNED .. 7); the
 * owner gives it back when it exits (stripe_key's destructor). A fork's
 * child keeps only its one thread's stripe. stripe_fenced: this process
 * registered for membarrier's expedited fence, so owners may count holds
 * unfenced (RESIL__STRIPE_FENCED).
 */
static uint64_t stripe_next;
static uint64_t stripe_owned;
static pthread_once_t stripe_once = PTHREAD_ONCE_INIT;
static pthread_key_t stripe_key;
static bool stripe_key_ok;
static bool stripe_fenced;
RESIL__TLS unsigned resil__stripe_mine;
/* The breaker's cache of this thread's stripe (lib/breaker_fast.h). */
RESIL__TLS uintptr_t resil__breaker_success_at;

#define STRIPE_SHARED RESIL__STRIPE_OWN0

static int
membarrier(int cmd)
{
#if defined(__linux__) && defined(SYS_membarrier)
	return (int)syscall(SYS_membarrier, cmd, 0, 0);
#else
	(void)cmd;
	errno = ENOSYS;
	return -1;
#endif
}

/* A thread that owned a stripe exits: the stripe is free again. What it
 * counted there stays (the release orders its counts before). */
static void
stripe_give_back(void *v)
{
	unsigned i = (unsigned)(uintptr_t)v - 1;

	resil__stripe_mine = 0;
	resil__breaker_success_at = 0;
	__atomic_fetch_and(&stripe_owned, ~(UINT64_C(1) << i), __ATOMIC_RELEASE);
}

static void
stripe_after_fork(void)
{
	unsigned w = resil__stripe_mine;

	stripe_owned = (w & RESIL__STRIPE_OWNED) != 0
	    ? UINT64_C(1) << (w & (RESIL__STRIPES - 1))
	    : 0;
}

static void
stripe_init(void)
{
#if defined(__linux__) && defined(SYS_membarrier)
	int q = membarrier(MEMBARRIER_CMD_QUERY);

	stripe_fenced = q > 0 &&
	    (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
	    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#endif
	stripe_key_ok = pthread_key_create(&stripe_key, stripe_give_back) == 0 &&
	    pthread_atfork(NULL, NULL, stripe_after_fork) == 0;
}

#if defined(__GNUC__)
/* The library unloaded (dlclose) while threads still own stripes: their
 * exits must not call into unmapped code (the atfork handler glibc
 * forgets by itself). */
__attribute__((destructor)) static void
stripe_fini(void)
{
	if (__atomic_exchange_n(&stripe_key_ok, false, __ATOMIC_ACQ_REL))
		(void)pthread_key_delete(stripe_key);
}
#endif

/* A free stripe for this thread to own, or -1 (all taken, or no way to
 * give one back at exit). */
static int
stripe_claim(void)
{
	uint64_t cur = resil__load64(&stripe_owned);
	unsigned i;

	if (!__atomic_load_n(&stripe_key_ok, __ATOMIC_ACQUIRE))
		return -1;
	for (;;) {
		for (i = STRIPE_SHARED; i < RESIL__STRIPES; i++)
			if ((cur & (UINT64_C(1) << i)) == 0)
				break;
		if (i == RESIL__STRIPES)
			return -1;
		if (resil__cas64(&stripe_owned, cur, cur | (UINT64_C(1) << i)))
			break;
		cur = resil__load64(&stripe_owned);
	}
	if (pthread_setspecific(stripe_key, (void *)(uintptr_t)(i + 1)) != 0) {
		__atomic_fetch_and(
		    &stripe_owned, ~(UINT64_C(1) << i), __ATOMIC_RELEASE);
		return -1;
	}
	return (int)i;
}

unsigned
resil__thread_stripe_slow(unsigned n)
{
	uint64_t t;
	unsigned w;
	int own;

	(void)pthread_once(&stripe_once, stripe_init);
	t = resil__faa64(&stripe_next, 1);
	own = stripe_claim();
	if (own >= 0)
		w = (unsigned)own | RESIL__STRIPE_OWNED |
		    (stripe_fenced ? RESIL__STRIPE_FENCED : 0u);
	else
		w = (unsigned)(t % STRIPE_SHARED);
	w |= (unsigned)((t & 0x3ffffffu) << 3) | RESIL__STRIPE_VALID;
	resil__stripe_mine = w;
	return w & (n - 1);
}

void
resil__stripes_unfenced(void)
{
	(void)pthread_once(&stripe_once, stripe_init);
	stripe_fenced = false;
}

bool
resil__stripes_fence(void)
{
	(void)pthread_once(&stripe_once, stripe_init);
	if (!stripe_fenced)
		return true;
	return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

resil_err
resil__diag_at(resil_diag *diag, resil_err err, const char *origin, unsigned line)
{
	char tmp[RESIL_DIAG_MAX];
	resil__msg m;

	if (diag == NULL || origin == NULL || err == RESIL_OK)
		return err;
	memcpy(tmp, diag->msg, sizeof(tmp));
	tmp[sizeof(tmp) - 1] = '\0';
	resil__msg_start(&m, diag->msg, sizeof(diag->msg));
	resil__msg_str(&m, origin);
	RESIL__MSG_LIT(&m, ":");
	resil__msg_int(&m, (int)line);
	RESIL__MSG_LIT(&m, ": ");
	resil__msg_str(&m, tmp);
	return err;
}

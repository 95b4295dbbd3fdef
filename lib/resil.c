/*
 * resil core: error strings, version, outcome classes, allocator and
 * diagnostics.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic.h"

const char *
resil_strerror(resil_err err)
{
	switch (err) {
#define XX(name, value, text)                                                \
	case RESIL_##name:                                                   \
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
#define XX(name, value, text)                                                \
	case RESIL_##name:                                                   \
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

resil_err
resil__diagf(resil_diag *diag, resil_err err, const char *fmt, ...)
{
	va_list ap;

	if (diag != NULL) {
		va_start(ap, fmt);
		vsnprintf(diag->msg, sizeof(diag->msg), fmt, ap);
		va_end(ap);
	}
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

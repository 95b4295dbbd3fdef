/*
 * Values of key=value settings for chaos, outlier rates, health and
 * gradient: the grammar of docs/config.md, with messages naming the key.
 */
#include "kv.h"

#include "duration.h"
#include "internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KV_MAX 128 /* a longer value is no number of ours */

static int
blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int
resil__kv_trim(
    const char *key, const char *v, char *buf, size_t len, resil_diag *diag)
{
	size_t n;

	if (v == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "%s: no value", key);
		return -1;
	}
	while (blank(*v))
		v++;
	n = strlen(v);
	while (n > 0 && blank(v[n - 1]))
		n--;
	if (n >= len) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: a value of %zu bytes is too long", key, n);
		return -1;
	}
	memcpy(buf, v, n);
	buf[n] = '\0';
	return 0;
}

static int
lower_eq(const char *a, const char *b)
{
	for (; *a != '\0' && *b != '\0'; a++, b++) {
		char c = *a;

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != *b)
			return 0;
	}
	return *a == '\0' && *b == '\0';
}

resil_err
resil__kv_bool(const char *key, const char *v, int *out, resil_diag *diag)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	char b[KV_MAX];
	size_t i;

	if (resil__kv_trim(key, v, b, sizeof(b), diag) != 0)
		return RESIL_E_INVAL;
	for (i = 0; i < 4; i++) {
		if (lower_eq(b, yes[i])) {
			*out = 1;
			return RESIL_OK;
		}
		if (lower_eq(b, no[i])) {
			*out = 0;
			return RESIL_OK;
		}
	}
	resil__diagf(diag, RESIL_E_INVAL,
	    "%s: \"%s\" is not a boolean (true, false, yes, no, on, off, 1, "
	    "0)",
	    key, b);
	return RESIL_E_INVAL;
}

/* The digits of s as a number; 0 when s is not all digits or overflows
 * (*over set then). */
static int
digits(const char *s, uint64_t *v, int *over)
{
	uint64_t x = 0;

	*over = 0;
	if (*s == '\0')
		return 0;
	for (; *s != '\0'; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return 0;
		d = (unsigned)(*s - '0');
		if (x > (UINT64_MAX - d) / 10) {
			*over = 1;
			return 0;
		}
		x = x * 10 + d;
	}
	*v = x;
	return 1;
}

resil_err
resil__kv_u64(const char *key, const char *v, uint64_t lo, uint64_t hi,
    uint64_t *out, resil_diag *diag)
{
	char b[KV_MAX];
	uint64_t x = 0;
	int over;

	if (resil__kv_trim(key, v, b, sizeof(b), diag) != 0)
		return RESIL_E_INVAL;
	if (!digits(b, &x, &over) && !over) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not a whole number (decimal digits)", key,
		    b);
		return RESIL_E_INVAL;
	}
	if (over || x < lo || x > hi) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: %s is out of range %llu..%llu", key, b,
		    (unsigned long long)lo, (unsigned long long)hi);
		return RESIL_E_INVAL;
	}
	*out = x;
	return RESIL_OK;
}

resil_err
resil__kv_u32(const char *key, const char *v, uint32_t lo, uint32_t hi,
    uint32_t *out, resil_diag *diag)
{
	uint64_t x = 0;
	resil_err e = resil__kv_u64(key, v, lo, hi, &x, diag);

	if (e == RESIL_OK)
		*out = (uint32_t)x;
	return e;
}

resil_err
resil__kv_int(const char *key, const char *v, int *out, resil_diag *diag)
{
	char b[KV_MAX];
	const char *d;
	uint64_t x = 0;
	int over, neg;

	if (resil__kv_trim(key, v, b, sizeof(b), diag) != 0)
		return RESIL_E_INVAL;
	neg = b[0] == '-';
	d = neg ? b + 1 : b;
	if (!digits(d, &x, &over) && !over) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not an integer", key, b);
		return RESIL_E_INVAL;
	}
	if (over || x > (neg ? (uint64_t)INT_MAX + 1 : (uint64_t)INT_MAX)) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: %s is out of range %d..%d", key, b, INT_MIN, INT_MAX);
		return RESIL_E_INVAL;
	}
	*out = neg ? (int)(-(int64_t)x) : (int)x;
	return RESIL_OK;
}

resil_err
resil__kv_number(const char *key, const char *v, double lo, double hi,
    double *out, resil_diag *diag)
{
	char b[KV_MAX];
	char *end = NULL;
	double x = 0;
	size_t i;
	int seen = 0;

	if (resil__kv_trim(key, v, b, sizeof(b), diag) != 0)
		return RESIL_E_INVAL;
	/* strtod alone would take hex, inf, nan and a sign. */
	for (i = 0; b[i] != '\0'; i++) {
		char c = b[i];

		if (c >= '0' && c <= '9')
			seen = 1;
		else if (!(c == '.' || c == 'e' || c == 'E' ||
		             ((c == '-' || c == '+') && i > 0 &&
		                 (b[i - 1] == 'e' || b[i - 1] == 'E'))))
			break;
	}
	if (b[i] == '\0' && seen)
		x = strtod(b, &end);
	if (b[i] != '\0' || !seen || end == NULL || *end != '\0' ||
	    !isfinite(x)) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not a number (decimal, e.g. 0.25 or 1e-3)",
		    key, b);
		return RESIL_E_INVAL;
	}
	if (x < lo || x > hi) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: %s is out of range %g..%g", key, b, lo, hi);
		return RESIL_E_INVAL;
	}
	*out = x;
	return RESIL_OK;
}

resil_err
resil__kv_duration(const char *key, const char *v, uint64_t lo,
    uint64_t *out, resil_diag *diag)
{
	char b[KV_MAX], why[RESIL_DIAG_MAX];
	const char *unit_at = NULL;
	uint64_t x = 0;
	int r;

	if (resil__kv_trim(key, v, b, sizeof(b), diag) != 0)
		return RESIL_E_INVAL;
	/* One grammar for every duration key: lib/duration.c's. */
	r = resil__duration_parse(b, &x, &unit_at);
	if (r == RESIL__DUR_RANGE) {
		char zero[32];

		resil__duration_in_unit_of(zero, sizeof(zero), b, 0);
		resil__duration_in_unit_of(why, sizeof(why), b, UINT64_MAX);
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: %s is out of range %s..%s", key, b, zero, why);
	}
	if (r != RESIL__DUR_OK) {
		resil__duration_why(why, sizeof(why), b, r, unit_at);
		return resil__diagf(
		    diag, RESIL_E_INVAL, "%s: \"%s\"%s", key, b, why);
	}
	if (x < lo) {
		/* The minimum in the unit the value was written in. */
		resil__duration_in_unit_of(why, sizeof(why), b, lo);
		return resil__diagf(diag, RESIL_E_INVAL,
		    "%s: %s is below the minimum of %s", key, b, why);
	}
	*out = x;
	return RESIL_OK;
}

/*
 * Numbers and durations as text (lib/duration.h).
 */
#include "duration.h"

#include <stdio.h>
#include <string.h>

#include <resil/resil.h>

/* Digits only, into *v; 0 when not a number, -1 on overflow. */
int
resil__parse_digits(const char *s, size_t n, uint64_t *v)
{
	uint64_t x = 0;
	size_t i;
	int over = 0;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		unsigned d;

		if (s[i] < '0' || s[i] > '9')
			return 0;
		d = (unsigned)(s[i] - '0');
		/* Catch uint64_t overflow. */
		if (x > (UINT64_MAX - d) / 10)
			over = 1;
		else
			x = x * 10 + d;
	}
	if (over)
		return -1;
	*v = x;
	return 1;
}

/*
 * A duration: a decimal number (digits, optionally a fraction) and an
 * optional unit written next to it. A tick is a nanosecond on every clock;
 * a number without a unit is milliseconds, as in Dubbo and Spring
 * (timeout=3000 is three seconds).
 */
static const struct {
	const char *suffix;
	uint64_t mul;
} dur_units[] = { { "ns", 1 }, { "us", RESIL_NS_PER_US },
	{ "ms", RESIL_NS_PER_MS }, { "s", RESIL_NS_PER_SEC },
	{ "m", 60 * RESIL_NS_PER_SEC }, { "h", 3600 * RESIL_NS_PER_SEC } };

int
resil__duration_parse(const char *s, uint64_t *v, const char **unit_at)
{
	size_t n = 0, f0, fn = 0, i;
	const char *u;
	uint64_t whole, frac = 0, mul = RESIL_NS_PER_MS, div = 1;
	int r, seen = 0;

	while (s[n] >= '0' && s[n] <= '9')
		n++;
	f0 = n;
	if (s[n] == '.') {
		f0 = n + 1;
		while (s[f0 + fn] >= '0' && s[f0 + fn] <= '9')
			fn++;
		if (fn == 0)
			return RESIL__DUR_BAD;
	}
	if (n == 0 && fn == 0)
		return RESIL__DUR_BAD;
	u = s + (fn > 0 ? f0 + fn : n);
	if (*u == ' ' || *u == '\t') {
		while (*u == ' ' || *u == '\t')
			u++;
		if (*u == '\0')
			return RESIL__DUR_BAD;
		*unit_at = u;
		return RESIL__DUR_SPACE;
	}
	if (*u == ',' && u[1] >= '0' && u[1] <= '9') {
		*unit_at = u;
		return RESIL__DUR_COMMA;
	}
	if (*u != '\0') {
		for (i = 0; i < sizeof(dur_units) / sizeof(dur_units[0]);
		     i++) {
			if (strcmp(u, dur_units[i].suffix) == 0) {
				mul = dur_units[i].mul;
				seen = 1;
				break;
			}
		}
		if (!seen) {
			*unit_at = u;
			return RESIL__DUR_UNIT;
		}
	}
	whole = 0;
	r = n > 0 ? resil__parse_digits(s, n, &whole) : 1;
	if (r < 0 || whole > UINT64_MAX / mul)
		return RESIL__DUR_RANGE;
	whole *= mul;
	/* The fraction, exactly: at most as many digits as the unit has
	 * decimal places of nanoseconds (trailing zeros aside). */
	while (fn > 0 && s[f0 + fn - 1] == '0')
		fn--;
	for (i = 0; i < fn; i++) {
		if (div >= mul)
			return RESIL__DUR_FRACT;
		div *= 10;
		frac = frac * 10 + (uint64_t)(s[f0 + i] - '0');
	}
	if (fn > 0) {
		if (mul % div != 0)
			return RESIL__DUR_FRACT;
		frac *= mul / div;
		if (frac > UINT64_MAX - whole)
			return RESIL__DUR_RANGE;
		whole += frac;
	}
	*v = whole;
	return RESIL__DUR_OK;
}

/* A unit people write for one of ours, for "did you mean". */
const char *
resil__duration_unit_hint(const char *u)
{
	static const char *const map[][2] = { { "sec", "s" }, { "secs", "s" },
		{ "second", "s" }, { "seconds", "s" }, { "min", "m" },
		{ "mins", "m" }, { "minute", "m" }, { "minutes", "m" },
		{ "msec", "ms" }, { "msecs", "ms" }, { "millis", "ms" },
		{ "usec", "us" }, { "\xC2\xB5s", "us" }, { "\xCE\xBCs", "us" },
		{ "nsec", "ns" }, { "nanos", "ns" }, { "hr", "h" },
		{ "hrs", "h" }, { "hour", "h" }, { "hours", "h" },
		{ "S", "s" }, { "MS", "ms" }, { "Ms", "ms" }, { "NS", "ns" },
		{ "US", "us" }, { "H", "h" } };
	size_t i;

	for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(u, map[i][0]) == 0)
			return map[i][1];
	return NULL;
}

/* The shortest text of a duration that reads back as it: the largest
 * unit that divides it, or a bare 0. */
int
resil__duration_format(char *buf, size_t len, uint64_t ns)
{
	size_t i = sizeof(dur_units) / sizeof(dur_units[0]);

	if (ns == 0)
		return snprintf(buf, len, "0");
	while (i-- > 1)
		if (ns % dur_units[i].mul == 0)
			break;
	return snprintf(buf, len, "%llu%s",
	    (unsigned long long)(ns / dur_units[i].mul), dur_units[i].suffix);
}

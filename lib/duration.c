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
	if ((*u == 'e' || *u == 'E') &&
	    ((u[1] >= '0' && u[1] <= '9') ||
	        ((u[1] == '-' || u[1] == '+') && u[2] >= '0' &&
	            u[2] <= '9'))) {
		/* 1e3 is a number, not 1 of a unit "e3": say so. */
		*unit_at = u;
		return RESIL__DUR_EXP;
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

/* The unit the duration text v is written in: its multiplier and suffix
 * (a number alone, or a text that is no duration: milliseconds). */
static uint64_t
unit_of(const char *v, const char **suffix)
{
	size_t i, n = strspn(v, "0123456789.");

	for (i = 0; i < sizeof(dur_units) / sizeof(dur_units[0]); i++)
		if (v[n] != '\0' && strcmp(v + n, dur_units[i].suffix) == 0) {
			*suffix = dur_units[i].suffix;
			return dur_units[i].mul;
		}
	*suffix = "ms";
	return RESIL_NS_PER_MS;
}

int
resil__duration_in_unit_of(char *buf, size_t len, const char *v, uint64_t ns)
{
	const char *suffix;
	uint64_t mul = unit_of(v, &suffix), rest = ns % mul, p;
	char frac[24], exact[32];
	int w, k = 0;

	if (rest == 0)
		return snprintf(buf, len, "%llu%s",
		    (unsigned long long)(ns / mul), suffix);
	/* Minutes and hours have no exact decimal fraction of a
	 * nanosecond: the exact text then. */
	if (mul % 10 != 0 || mul > RESIL_NS_PER_SEC)
		return resil__duration_format(buf, len, ns);
	/* mul is 10^k here (us, ms, s): the fraction is rest in k digits,
	 * without its trailing zeros. */
	for (p = mul; p >= 10; p /= 10)
		k++;
	w = snprintf(
	    frac, sizeof(frac), "%0*llu", k, (unsigned long long)rest);
	while (w > 1 && frac[w - 1] == '0')
		frac[--w] = '\0';
	if (ns / mul != 0)
		return snprintf(buf, len, "%llu.%s%s",
		    (unsigned long long)(ns / mul), frac, suffix);
	/* Below one unit (0.000001ms): the exact text too. */
	resil__duration_format(exact, sizeof(exact), ns);
	return snprintf(buf, len, "0.%s%s (%s)", frac, suffix, exact);
}

/* A plain spelling of the exponent notation v ("1e3" -> "1000",
 * "1.5e3ms" -> "1500ms", "2e-3s" -> "0.002s") into buf: 1, or 0 when v
 * is not one or its spelling would be longer than buf. */
static int
exp_plain(const char *v, char *buf, size_t len)
{
	char d[48];
	size_t nd = 0, ni, i, w = 0;
	const char *p = v, *u;
	long e = 0, point;
	int neg = 0;

	while (*p >= '0' && *p <= '9' && nd < sizeof(d))
		d[nd++] = *p++;
	ni = nd;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9' && nd < sizeof(d); p++)
			d[nd++] = *p;
	if (nd == 0 || (*p != 'e' && *p != 'E'))
		return 0;
	p++;
	if (*p == '-' || *p == '+')
		neg = *p++ == '-';
	for (; *p >= '0' && *p <= '9'; p++)
		if ((e = e * 10 + (*p - '0')) > 30)
			return 0;
	u = p;
	if (*u != '\0') {
		for (i = 0; i < sizeof(dur_units) / sizeof(dur_units[0]); i++)
			if (strcmp(u, dur_units[i].suffix) == 0)
				break;
		if (i == sizeof(dur_units) / sizeof(dur_units[0]))
			return 0;
	}
	point = (long)ni + (neg ? -e : e);
	/* Digits d[0..nd) with the point after point of them. */
	while (nd > 0 && (long)nd > point && d[nd - 1] == '0')
		nd--;
#define PUT(c)                        \
	do {                          \
		if (w + 1 >= len)     \
			return 0;     \
		buf[w++] = (char)(c); \
	} while (0)
	if (point <= 0) {
		PUT('0');
		if (nd > 0) {
			PUT('.');
			for (; point < 0; point++)
				PUT('0');
		}
		for (i = 0; i < nd; i++)
			PUT(d[i]);
	} else {
		for (i = 0; i < (size_t)point; i++)
			PUT(i < nd ? d[i] : '0');
		if ((long)nd > point) {
			PUT('.');
			for (i = (size_t)point; i < nd; i++)
				PUT(d[i]);
		}
	}
#undef PUT
	/* Leading zeros of the whole part go ("01000" from "0.1e4"). */
	buf[w] = '\0';
	i = 0;
	while (buf[i] == '0' && buf[i + 1] >= '0' && buf[i + 1] <= '9')
		i++;
	memmove(buf, buf + i, w - i + 1);
	w -= i;
	if (strlen(u) + w + 1 > len)
		return 0;
	memcpy(buf + w, u, strlen(u) + 1);
	return 1;
}

void
resil__duration_why(
    char *buf, size_t len, const char *v, int r, const char *unit_at)
{
	char plain[64];
	const char *hint;
	/* The number again in a hint, when it is short enough to read. */
	int num =
	    unit_at != NULL && unit_at - v <= 40 ? (int)(unit_at - v) : -1;

	/* Those name the unit: without it, say only what a duration is. */
	if (unit_at == NULL && (r == RESIL__DUR_SPACE || r == RESIL__DUR_UNIT))
		r = RESIL__DUR_BAD;
	switch (r) {
	case RESIL__DUR_SPACE:
		if (strcspn(v, " \t") <= 40 && strlen(unit_at) <= 40)
			snprintf(buf, len,
			    ": write the unit next to the number (%.*s%s)",
			    (int)strcspn(v, " \t"), v, unit_at);
		else
			snprintf(
			    buf, len, ": write the unit next to the number");
		return;
	case RESIL__DUR_UNIT:
		hint = resil__duration_unit_hint(unit_at);
		if (hint != NULL && num >= 0)
			snprintf(buf, len,
			    ": unknown unit \"%.40s\" (did you mean %.*s%s?)",
			    unit_at, num, v, hint);
		else
			snprintf(buf, len,
			    ": unknown unit \"%.40s\" "
			    "(units: " RESIL__DUR_UNITS ")",
			    unit_at);
		return;
	case RESIL__DUR_EXP:
		if (exp_plain(v, plain, sizeof(plain)))
			snprintf(buf, len,
			    ": a duration takes no exponent (write %s)",
			    plain);
		else
			snprintf(buf, len,
			    ": a duration takes no exponent (write the "
			    "digits, "
			    "or use a unit: ns, us, ms, s, m, h)");
		return;
	case RESIL__DUR_COMMA:
		snprintf(buf, len, ": write a fraction with '.', not ','");
		return;
	case RESIL__DUR_FRACT:
		snprintf(buf, len, " is not a whole number of nanoseconds");
		return;
	default:
		snprintf(buf, len,
		    " is not a duration (a number of milliseconds, or a "
		    "number with a unit: ns, us, ms, s, m, h)");
	}
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

/* A boolean of configuration text: true, yes, on, 1 or false, no, off, 0,
 * in any case; 1 and *v, else 0. */
int
resil__parse_bool(const char *s, int *v)
{
	static const char *const t[] = { "true", "yes", "on", "1" };
	static const char *const f[] = { "false", "no", "off", "0" };
	char low[8];
	size_t i;

	for (i = 0; i < sizeof(low) - 1 && s[i] != '\0'; i++)
		low[i] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i];
	if (s[i] != '\0')
		return 0;
	low[i] = '\0';
	for (i = 0; i < 4; i++) {
		if (strcmp(low, t[i]) == 0) {
			*v = 1;
			return 1;
		}
		if (strcmp(low, f[i]) == 0) {
			*v = 0;
			return 1;
		}
	}
	return 0;
}

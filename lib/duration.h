/*
 * Numbers and durations as configuration text reads and writes them
 * (lib/duration.c): used by the configuration parser (lib/config.c) and
 * by the pipeline's event texts. A tick is a nanosecond on every clock; a
 * number without a unit is milliseconds, as in Dubbo and Spring. Never
 * installed.
 */
#ifndef RESIL_DURATION_H
#define RESIL_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* The units, for messages. */
#define RESIL__DUR_UNITS "ns, us, ms, s, m, h; a number alone is milliseconds"

/* What resil__duration_parse() found. */
enum resil__dur_result {
	RESIL__DUR_OK = 1,
	RESIL__DUR_BAD = 0,    /* not a duration at all */
	RESIL__DUR_RANGE = -1, /* overflows 64 bits of nanoseconds */
	RESIL__DUR_UNIT = -2,  /* an unknown unit (*unit_at points at it) */
	RESIL__DUR_SPACE = -3, /* a blank between the number and the unit */
	RESIL__DUR_FRACT = -4, /* a fraction finer than a nanosecond */
	RESIL__DUR_COMMA = -5, /* a decimal comma (1,5s) */
	RESIL__DUR_EXP = -6    /* exponent notation (1e3; *unit_at: the e) */
};

/* The n bytes at s, digits only, into *v: 1; 0 when they are not a
 * number, -1 on overflow. */
int resil__parse_digits(const char *s, size_t n, uint64_t *v);

/* true, yes, on, 1 / false, no, off, 0 in any case: 1 and *v; else 0
 * (lib/duration.c). */
int resil__parse_bool(const char *s, int *v);

/* The duration s (NUL-terminated) into *v: RESIL__DUR_OK, or why not
 * (*unit_at set for UNIT, SPACE and COMMA). */
int resil__duration_parse(const char *s, uint64_t *v, const char **unit_at);

/* The unit people write for one of ours ("sec" for "s"), or NULL. */
const char *resil__duration_unit_hint(const char *u);

/* Why resil__duration_parse() refused v (its result r, unit_at as it set
 * it): the end of the message `KEY: "V"<why>`, e.g. `: unknown unit "sec"
 * (did you mean 10s?)` or ` is not a whole number of nanoseconds`. The
 * one wording of configuration text (lib/config_keys.c) and of the
 * modules' own keys (lib/kv.c). */
void resil__duration_why(
    char *buf, size_t len, const char *v, int r, const char *unit_at);

/* ns in the unit the duration text v is written in (a number alone:
 * milliseconds), e.g. "30ms", "0.5s", "18446744073.709551615s"; a value
 * below one such unit also gets its exact text, "0.000001ms (1ns)"; in
 * minutes or hours a value that is not whole is its exact text ("1ns"). */
int resil__duration_in_unit_of(
    char *buf, size_t len, const char *v, uint64_t ns);

/* The shortest text of ns that reads back as it (the largest unit that
 * divides it, or a bare 0), as snprintf writes it. */
int resil__duration_format(char *buf, size_t len, uint64_t ns);

#endif /* RESIL_DURATION_H */

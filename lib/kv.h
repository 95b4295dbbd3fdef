/*
 * Values of key=value settings for the modules that parse their own keys
 * (chaos, outlier rates, health, gradient): booleans, integers, numbers
 * and durations, with messages that name the key. Private; the grammar is
 * the one of docs/config.md (lib/config.c parses the pipeline's keys with
 * the same rules), so a value that one accepts the other accepts too.
 *
 * Every parser takes the value as given (blanks around it are ignored),
 * writes *out only on success and otherwise returns RESIL_E_INVAL with a
 * message in diag that starts with the key:
 * `chaos.latency: "10sec": unknown unit "sec" (did you mean 10s?)`.
 */
#ifndef RESIL_KV_H
#define RESIL_KV_H

#include <resil/resil.h>

#include <stdint.h>

/* true false yes no on off 1 0, any case. */
resil_err resil__kv_bool(
    const char *key, const char *v, int *out, resil_diag *diag);

/* Decimal digits only, in lo..hi. */
resil_err resil__kv_u64(const char *key, const char *v, uint64_t lo,
    uint64_t hi, uint64_t *out, resil_diag *diag);
resil_err resil__kv_u32(const char *key, const char *v, uint32_t lo,
    uint32_t hi, uint32_t *out, resil_diag *diag);

/* An optional '-' and decimal digits, in INT_MIN..INT_MAX. */
resil_err resil__kv_int(
    const char *key, const char *v, int *out, resil_diag *diag);

/* A decimal number (optional fraction and exponent; no sign, hex, inf or
 * nan), in lo..hi. Read in the C locale's format by strtod(). */
resil_err resil__kv_number(const char *key, const char *v, double lo,
    double hi, double *out, resil_diag *diag);

/* A duration in ticks (nanoseconds): a number with a unit written next to
 * it (ns us ms s m h), or a number alone, which is milliseconds. Must be
 * >= lo. */
resil_err resil__kv_duration(const char *key, const char *v, uint64_t lo,
    uint64_t *out, resil_diag *diag);

/* v without the blanks around it, in buf (len >= 1); 0, or -1 (and a
 * message) when it does not fit. */
int resil__kv_trim(const char *key, const char *v, char *buf, size_t len,
    resil_diag *diag);

#endif /* RESIL_KV_H */

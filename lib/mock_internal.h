/*
 * Private: what the fallback chain asks of a mock (lib/mock.c) on every
 * call. Never installed.
 */
#ifndef RESIL_MOCK_INTERNAL_H
#define RESIL_MOCK_INTERNAL_H

#include <resil/mock.h>

#include <stddef.h>

/* Nonzero when some spec of m (service level or a method's) is an active
 * `force:` one; 0 means no method of m can answer without a call. Read
 * with the same rule as resil_mock_lookup(): not concurrently with
 * resil_mock_set_method(). */
int resil__mock_may_force(const resil_mock *m);

/* The count behind it, for a caller that tests it on every call without
 * a call: valid while m lives. */
const size_t *resil__mock_force_count(const resil_mock *m);

#endif /* RESIL_MOCK_INTERNAL_H */

/*
 * resil — resilience state machines for C: circuit breaker, retry, fallback,
 * mock degradation, rate limiting and bulkheads.
 *
 * This is the core header: version, error codes and their strings, outcome
 * classes and the classifier hook, the diagnostic buffer that configuration
 * errors are written to, and the allocator hook.
 *
 * Thread safety: every function in this header may be called from any
 * thread at any time. resil_strerror() returns static strings.
 */
#ifndef RESIL_RESIL_H
#define RESIL_RESIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RESIL_VERSION_MAJOR 0
#define RESIL_VERSION_MINOR 1
#define RESIL_VERSION_PATCH 0
#define RESIL_VERSION_STRING "0.1.0"
#define RESIL_VERSION_NUM                                                    \
	((RESIL_VERSION_MAJOR << 16) | (RESIL_VERSION_MINOR << 8) |          \
	    RESIL_VERSION_PATCH)
#define RESIL_VERSION_AT_LEAST(x, y, z)                                      \
	(RESIL_VERSION_NUM >= (((x) << 16) | ((y) << 8) | (z)))

#if defined(_WIN32) && defined(RESIL_SHARED_BUILD)
#define RESIL_API __declspec(dllexport)
#elif defined(__GNUC__)
#define RESIL_API __attribute__((visibility("default")))
#else
#define RESIL_API
#endif

#if defined(__GNUC__)
#define RESIL_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define RESIL_DEPRECATED(msg)
#endif

/* Ticks per second of the system clock (resil_clock_system()). */
#define RESIL_NS_PER_SEC UINT64_C(1000000000)
#define RESIL_NS_PER_MS UINT64_C(1000000)
#define RESIL_NS_PER_US UINT64_C(1000)

/*
 * Error codes. The table is append-only: a released value keeps its number
 * and its meaning forever. E_OPEN, E_RETRIES_EXHAUSTED, E_UNAVAILABLE and
 * E_LIMITED are answers, not bugs: they tell the layer above what happened.
 */
#define RESIL_ERR_MAP(XX)                                                    \
	XX(OK, 0, "success")                                                 \
	XX(E_INVAL, 1, "invalid argument")                                   \
	XX(E_NOMEM, 2, "out of memory")                                      \
	XX(E_MISUSE, 3, "library used incorrectly")                          \
	XX(E_OPEN, 4, "rejected: circuit breaker open")                      \
	XX(E_RETRIES_EXHAUSTED, 5, "retries exhausted")                      \
	XX(E_UNAVAILABLE, 6, "no live, cached or mock value")                \
	XX(E_LIMITED, 7, "rejected: rate or concurrency limit reached")      \
	XX(E_TIMEOUT, 8, "timed out")                                        \
	XX(E_MOCK, 9, "mocked exception for service degradation.")           \
	XX(E_BUSINESS, 10, "business error")                                 \
	XX(E_NOTFOUND, 11, "not found")                                      \
	XX(E_CALL, 12, "the call failed")                                    \
	XX(E_NO_PROVIDER, 13, "no provider available")                      \
	XX(E_THROTTLED, 14, "throttled by the server (HTTP 429, RESOURCE_EXHAUSTED)")

typedef enum resil_err {
#define XX(name, value, text) RESIL_##name = value,
	RESIL_ERR_MAP(XX)
#undef XX
} resil_err;

/* A static, human-readable string for err; never NULL. Unknown values get
 * "unknown resil error". */
RESIL_API const char *resil_strerror(resil_err err);

/* The symbolic name of err ("RESIL_E_OPEN"), or "RESIL_E_UNKNOWN". */
RESIL_API const char *resil_err_name(resil_err err);

/* The library's RESIL_VERSION_NUM and RESIL_VERSION_STRING, to compare with
 * the header a program was compiled with. */
RESIL_API unsigned resil_version(void);
RESIL_API const char *resil_version_string(void);

/*
 * Outcome classes. Every call ends in exactly one:
 * SUCCESS  counts for the dependency;
 * FAILURE  counts against it (timeouts are failures);
 * IGNORED  counts neither way;
 * BUSINESS the callee's own answer (bad argument, no permission): it
 *          propagates untouched, is never counted, retried or degraded.
 */
typedef enum resil_outcome {
	RESIL_OUTCOME_SUCCESS = 0,
	RESIL_OUTCOME_FAILURE = 1,
	RESIL_OUTCOME_IGNORED = 2,
	RESIL_OUTCOME_BUSINESS = 3
} resil_outcome;

/* "success", "failure", "ignored", "business" or "unknown". */
RESIL_API const char *resil_outcome_name(resil_outcome outcome);

/*
 * Maps a user's return code (and optionally the value it produced) to an
 * outcome class. fn must be pure and thread-safe; ctx is the caller's and
 * resil never frees it.
 */
typedef resil_outcome (*resil_classify_fn)(
    int rc, const void *value, void *ctx);

typedef struct resil_classifier {
	resil_classify_fn fn; /* NULL: the default classifier */
	void *ctx;
} resil_classifier;

/* The default: 0 is SUCCESS, anything else is FAILURE. */
RESIL_API resil_outcome resil_classify_default(
    int rc, const void *value, void *ctx);

/* Apply cls (NULL, or a NULL fn, means the default) to rc and value. */
RESIL_API resil_outcome resil_classify(
    const resil_classifier *cls, int rc, const void *value);

/*
 * Diagnostics. Functions that validate configuration take an optional
 * resil_diag *; on failure they write a message that names the offending
 * field, e.g. "breaker.failure_rate_pct: 101 is out of range 0..100".
 * A NULL diag is allowed: the return code alone is then reported.
 */
#define RESIL_DIAG_MAX 256

typedef struct resil_diag {
	char msg[RESIL_DIAG_MAX];
} resil_diag;

/*
 * Allocator hook, passed per object and copied; never global. free receives
 * the size that was asked of alloc. NULL wherever a resil_allocator pointer
 * is accepted means malloc() and free().
 */
typedef struct resil_allocator {
	void *(*alloc)(size_t size, void *ctx);
	void (*free)(void *ptr, size_t size, void *ctx);
	void *ctx;
} resil_allocator;

/* A static allocator over malloc() and free(). */
RESIL_API const resil_allocator *resil_allocator_default(void);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_RESIL_H */

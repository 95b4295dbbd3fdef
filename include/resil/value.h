/*
 * resil value: what a call answers, and where the answer came from.
 *
 * A resil_value is a tagged value: null (no value), bool, integer (int64),
 * double, string, bytes, JSON text, or an opaque object of the user's (a
 * pointer with copy and free callbacks, so a struct can be cached and
 * returned without being serialised). Strings, bytes and JSON own a heap
 * copy made through the allocator they were created with; the value keeps
 * a copy of that allocator and frees through it. A value is a small struct
 * that lives in the caller's storage; its fields may be read directly but
 * are written only through the functions below.
 *
 * A resil_type is the declared return type of a method, so that a mock
 * `return 1` arrives as the right type (resil_value_coerce()).
 *
 * A resil_result is what a protected call gives back: the value, or the
 * error, plus its provenance (live, cache with its age, mock, unavailable)
 * and the number of attempts made. Unavailable is never a zero value: it
 * has err == RESIL_E_UNAVAILABLE and a null value.
 *
 * Thread safety: the functions here touch only the values passed to them.
 * Distinct values may be used from different threads at once; one value
 * may be read (copy, equal, format) by many threads at once, but must not
 * be read while another thread sets or frees it.
 */
#ifndef RESIL_VALUE_H
#define RESIL_VALUE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The tag of a value. */
typedef enum resil_vtype {
	RESIL_VALUE_NULL = 0,
	RESIL_VALUE_BOOL = 1,
	RESIL_VALUE_INT = 2,
	RESIL_VALUE_DOUBLE = 3,
	RESIL_VALUE_STRING = 4,
	RESIL_VALUE_BYTES = 5,
	RESIL_VALUE_JSON = 6,
	RESIL_VALUE_OPAQUE =
	    7 /* the user's object: see resil_value_opaque() */
} resil_vtype;

/* The declared return type of a method. ANY keeps a value as it is. */
typedef enum resil_type {
	RESIL_TYPE_ANY = 0,
	RESIL_TYPE_VOID = 1, /* only null */
	RESIL_TYPE_BOOL = 2,
	RESIL_TYPE_INT = 3,
	RESIL_TYPE_DOUBLE = 4,
	RESIL_TYPE_STRING = 5,
	RESIL_TYPE_BYTES = 6,
	RESIL_TYPE_ARRAY = 7,  /* JSON array */
	RESIL_TYPE_OBJECT = 8, /* JSON object */
	RESIL_TYPE_JSON = 9    /* any JSON document */
} resil_type;

/* "null", "bool", "int", "double", "string", "bytes", "json", "opaque" or
 * "unknown". */
RESIL_API const char *resil_vtype_name(resil_vtype t);

/* "any", "void", "bool", "int", "double", "string", "bytes", "array",
 * "object", "json" or "unknown". */
RESIL_API const char *resil_type_name(resil_type t);

/*
 * The kind of an opaque value: how to copy, free, compare and show the
 * user's objects of that kind. One static const struct per kind; it must
 * outlive every value (and every cache entry) that uses it.
 *
 * copy (required): make *dst an independent copy of src; return 0, or
 *   nonzero when it cannot (resil then reports RESIL_E_NOMEM).
 * free (required): release an object (one resil_value_opaque() was given,
 *   or one copy made).
 * equal (optional): 1 if a and b are equal; NULL compares the pointers.
 * size (optional): the bytes an object holds, which the result cache
 *   charges against its max_bytes; NULL charges nothing beyond the entry.
 * format (optional): write the object as JSON, like snprintf (at most
 *   size bytes with the NUL; return the whole length); NULL prints the
 *   JSON string "<name>".
 * name: the kind's name, for messages ("Stock"); NULL is "opaque".
 * ctx is passed to every callback.
 */
typedef struct resil_value_ops {
	int (*copy)(void **dst, const void *src, void *ctx);
	void (*free)(void *obj, void *ctx);
	int (*equal)(const void *a, const void *b, void *ctx);
	size_t (*size)(const void *obj, void *ctx);
	size_t (*format)(const void *obj, char *buf, size_t size, void *ctx);
	const char *name;
	void *ctx;
} resil_value_ops;

/*
 * A value. Read type and the member of u that it selects: u.b (0 or 1),
 * u.i, u.d, u.s (ptr and len; ptr is NUL-terminated for convenience, the
 * terminator is not counted in len), or u.o (the object and its kind; read
 * it with resil_value_opaque_get()). alloc_ is private.
 */
typedef struct resil_value {
	resil_vtype type;
	union {
		int b;
		int64_t i;
		double d;
		struct {
			char *ptr;
			size_t len;
		} s;
		struct {
			void *ptr;
			const resil_value_ops *ops;
		} o;
	} u;
	resil_allocator alloc_;
} resil_value;

/* Make *v null. Never fails; does not free what *v held. */
RESIL_API void resil_value_init(resil_value *v);

/* Scalars: never allocate, never fail. */
RESIL_API resil_value resil_value_null(void);
RESIL_API resil_value resil_value_bool(int b);
RESIL_API resil_value resil_value_int(int64_t i);
RESIL_API resil_value resil_value_double(double d);

/*
 * In C the four are also macros that build the value in place (a compound
 * literal: no call, so `*out = resil_value_int(8)` in a user's function is
 * a few stores): the same value as the functions give. Take the function
 * itself with (resil_value_int)(8) or &resil_value_int, or define
 * RESIL_VALUE_NO_INLINE before including this header. resil_value_init()
 * is one the same way.
 */
#if !defined(__cplusplus) && !defined(RESIL_VALUE_NO_INLINE)
#define resil_value_null() ((resil_value) { .type = RESIL_VALUE_NULL })
#define resil_value_bool(x_) \
	((resil_value) { .type = RESIL_VALUE_BOOL, .u = { .b = (x_) != 0 } })
#define resil_value_int(x_) \
	((resil_value) {    \
	    .type = RESIL_VALUE_INT, .u = { .i = (int64_t)(x_) } })
#define resil_value_double(x_) \
	((resil_value) {       \
	    .type = RESIL_VALUE_DOUBLE, .u = { .d = (double)(x_) } })
/* And resil_value_init(), in place ((resil_value_init)(v): the function). */
static inline void
resil__value_init_inline(resil_value *v)
{
	if (v != NULL)
		*v = (resil_value) { .type = RESIL_VALUE_NULL };
}
#define resil_value_init(v_) resil__value_init_inline(v_)
#endif

/*
 * Make *out a STRING, BYTES or JSON value holding a copy of the len bytes
 * at p (p may be NULL when len is 0), allocated through a (NULL: malloc).
 * *out is overwritten without being freed first. A string may hold any
 * bytes (NUL and invalid UTF-8 included; see resil_value_format()). JSON
 * text is parsed and validated with cJSON and stored in compact form; it
 * must be UTF-8 (RFC 8259), and a string escape \u0000 is refused, since
 * it would silently cut the string short ("x\u0000y" is not "x").
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL out, a NULL p with len > 0,
 * or (JSON) text that is not one JSON document, is not UTF-8 or holds
 * \u0000; RESIL_E_NOMEM. On error *out is unchanged. (cJSON allocates with
 * its own hooks and answers NULL both for bad text and for no memory:
 * memory running out inside cJSON's parse is reported as RESIL_E_INVAL,
 * the same for a mock's JSON payload. Nothing leaks either way.)
 */
RESIL_API resil_err resil_value_string(
    resil_value *out, const char *p, size_t len, const resil_allocator *a);
RESIL_API resil_err resil_value_bytes(
    resil_value *out, const void *p, size_t len, const resil_allocator *a);
RESIL_API resil_err resil_value_json(
    resil_value *out, const char *p, size_t len, const resil_allocator *a);

/*
 * Make *out an OPAQUE value that owns obj: resil_value_free() calls
 * ops->free(obj), resil_value_copy() calls ops->copy (the allocator given
 * to copy is not used: the kind allocates its own objects). *out is
 * overwritten without being freed first. A user function may answer with
 * one (`return resil_value_opaque(out, stock, &stock_ops) ? -1 : 0;`); the
 * cache then keeps a copy and hands out copies, never the object itself.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL out, obj or ops, or ops
 * without copy or free (obj is then not taken: the caller still owns it).
 */
RESIL_API resil_err resil_value_opaque(
    resil_value *out, void *obj, const resil_value_ops *ops);

/* The object of v if v is an OPAQUE value of kind ops, else NULL. The
 * object stays v's (valid until v is freed). */
RESIL_API void *resil_value_opaque_get(
    const resil_value *v, const resil_value_ops *ops);

/*
 * Deep-copy src into *dst through a (NULL: malloc). *dst is overwritten
 * without being freed first; dst == src is refused.
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument or dst == src;
 * RESIL_E_NOMEM. On error *dst is unchanged.
 */
RESIL_API resil_err resil_value_copy(
    resil_value *dst, const resil_value *src, const resil_allocator *a);

/* Release what *v owns, through the allocator it was made with, and make
 * it null. NULL is a harmless no-op. */
RESIL_API void resil_value_free(resil_value *v);

/* 1 if a and b have the same type and content, else 0. Doubles compare
 * with == (so NaN is unequal to itself); INT 1 and DOUBLE 1.0 differ;
 * opaque values of one kind compare with its equal (or by pointer), of
 * two kinds are unequal. NULL pointers are equal only to each other. */
RESIL_API int resil_value_equal(const resil_value *a, const resil_value *b);

/* Heap bytes owned by v (string, bytes and JSON: len + 1; opaque: what
 * its kind's size callback says, 0 without one; others 0). */
RESIL_API size_t resil_value_heap_size(const resil_value *v);

/*
 * Print v into buf like snprintf: at most size bytes including the NUL;
 * returns the length the whole text has (so a return >= size means it was
 * truncated). Forms: null, true, false, 42, 2.5 (doubles always show a
 * '.' or an exponent: 2.0, shortest text that reads back exactly), strings
 * as JSON strings ("a\"b"; control bytes and NUL as \u00XX; every byte
 * that is not part of well-formed UTF-8 is replaced by U+FFFD, the
 * replacement character, written as its UTF-8 bytes EF BF BD, so the text
 * is always valid UTF-8 JSON: invalid UTF-8 is replaced, never refused and
 * never passed through), bytes
 * as hex (0x6869), JSON as its compact text, an opaque value by its kind's
 * format (or the JSON string "<name>"). A NULL v prints as null. buf may
 * be NULL when size is 0.
 */
RESIL_API size_t resil_value_format(
    const resil_value *v, char *buf, size_t size);

/*
 * Convert in to the declared type t into *out (allocated through a).
 * ANY: a copy. null converts to every type (null means no value).
 * VOID: only null. BOOL: bool. INT: int; a double with an integral value
 * in range; a string holding a decimal integer. DOUBLE: int, double, a
 * string holding a number. STRING: string; bool, int and double as their
 * printed text; bytes holding no NUL. BYTES: bytes or string. ARRAY,
 * OBJECT: JSON of that kind. JSON: JSON, or a scalar as its JSON text.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument or an impossible
 * conversion, with a message in diag such as
 * `cannot convert double 2.5 to int`; RESIL_E_NOMEM. On error *out is
 * unchanged.
 */
RESIL_API resil_err resil_value_coerce(resil_value *out, const resil_value *in,
    resil_type t, const resil_allocator *a, resil_diag *diag);

/*
 * The empty value of type t: "" (STRING), 0 (INT), 0.0 (DOUBLE), false
 * (BOOL), empty bytes (BYTES), [] (ARRAY, JSON), {} (OBJECT), null (ANY,
 * VOID). Same return codes as resil_value_string().
 */
RESIL_API resil_err resil_value_empty(
    resil_value *out, resil_type t, const resil_allocator *a);

/* Where a result came from. */
typedef enum resil_source {
	RESIL_SOURCE_LIVE = 0,        /* the call itself answered */
	RESIL_SOURCE_CACHE = 1,       /* a cached earlier answer; see age */
	RESIL_SOURCE_MOCK = 2,        /* a mock answered (or threw) */
	RESIL_SOURCE_UNAVAILABLE = 3, /* nothing answered; no value */
	RESIL_SOURCE_FALLBACK = 4     /* a user fallback handler answered */
} resil_source;

/* "live", "cache", "mock", "unavailable", "fallback" or "unknown". */
RESIL_API const char *resil_source_name(resil_source s);

#define RESIL_RESULT_MSG_MAX 256

/* The message of a mock `throw`, exactly as Dubbo words it. */
#define RESIL_MOCK_MESSAGE "mocked exception for service degradation."

/*
 * The result of a protected call.
 *
 * err is RESIL_OK when value answers the call (value may be null: a real
 * null answer). Otherwise err says why there is no answer and value is
 * null: RESIL_E_UNAVAILABLE (every fallback passed), RESIL_E_BUSINESS (the
 * callee's own error, or a mock `throw NAME`), RESIL_E_MOCK (a mock
 * `throw`), RESIL_E_CALL (the call failed and no fallback was configured,
 * or a mock implementation failed), or a rejection such as RESIL_E_OPEN.
 *
 * cause and cause_rc keep the original failure whenever something other
 * than the live call produced the result (RESIL_OK and 0 when there was
 * none, as with a force mock). error_name is the registered name of a
 * `throw NAME` mock, valid as long as the mock object; NULL otherwise.
 * message is a human-readable account, always NUL-terminated.
 */
typedef struct resil_result {
	/* The scalars first, in pairs, so that initialising a result is a
	 * few wide stores (lib/value_internal.h); the buffers last, of
	 * which a call writes the first byte only. */
	resil_err err;
	resil_source source;
	resil_value value; /* owned: release with resil_result_free() */
	int rc;            /* the user's code: live call, mock impl, NAME */
	uint32_t attempts; /* calls of the user's function made */
	uint64_t age;      /* CACHE: ticks since it was stored; else 0 */
	resil_err cause;   /* the original failure, or RESIL_OK */
	int cause_rc;      /* its user return code, or 0 */
	/* The resil_breaker_state the call saw at its last attempt, or -1
	 * when no breaker was involved. */
	int breaker_state;
	/* The last attempt that ran and failed (RESIL_E_CALL with its rc,
	 * or RESIL_E_TIMEOUT), kept beside the final error: after a retry
	 * that ended in a breaker's rejection, err/cause say RESIL_E_OPEN
	 * and this still says why the breaker opened (rc 111, say).
	 * RESIL_OK and 0 when no attempt failed. */
	resil_err last_failure;
	int last_failure_rc;
	const char *error_name;
	char message[RESIL_RESULT_MSG_MAX];
	/* With a cluster (a pipeline with a selector): the address and zone
	 * of the endpoint whose attempt gave the final answer ("" when no
	 * endpoint answered: a mock, the cache, no provider). */
	char endpoint[64];
	char zone[32];
} resil_result;

/* Make *r an empty result: err RESIL_E_UNAVAILABLE, source UNAVAILABLE,
 * null value, zeros. */
RESIL_API void resil_result_init(resil_result *r);

/* Free the value *r owns and make the result empty again: a null value,
 * err RESIL_E_UNAVAILABLE and source UNAVAILABLE (a freed result never
 * reads as an answer). The other fields are left as the call wrote them
 * (since 0.x of issue 29: they were re-zeroed before; every call that
 * takes *r as its out initialises it first). A result whose value owns
 * nothing (null, bool, int, double) costs one test. Freeing twice is
 * harmless; NULL is a harmless no-op. */
RESIL_API void resil_result_free(resil_result *r);

/* In C, resil_result_free() is also a macro whose test of a value that
 * owns nothing is inline (a call only for one that owns memory): the
 * same effect. (resil_result_free)(r), &resil_result_free and
 * RESIL_VALUE_NO_INLINE give the function. */
#if !defined(__cplusplus) && !defined(RESIL_VALUE_NO_INLINE)
static inline void
resil__result_free_inline(resil_result *r)
{
	if (r != NULL && r->value.type < RESIL_VALUE_STRING) {
		r->err = RESIL_E_UNAVAILABLE;
		r->source = RESIL_SOURCE_UNAVAILABLE;
		r->value.type = RESIL_VALUE_NULL;
		return;
	}
	(resil_result_free)(r);
}
#define resil_result_free(r_) resil__result_free_inline(r_)
#endif

/*
 * The arguments of one call: the method name and the argument bytes, the
 * cache key. The bytes are the caller's own encoding; resil only hashes,
 * compares and copies them.
 */
typedef struct resil_args {
	const char *method; /* NUL-terminated, not NULL */
	const void *data;   /* may be NULL when len is 0 */
	size_t len;
} resil_args;

/*
 * The user's function: fill *out (created through any allocator, or left
 * null) and return 0 on success or a code of its own on failure; a
 * classifier decides what that code means. resil frees *out with
 * resil_value_free() whether or not the call succeeded.
 */
typedef int (*resil_call_fn)(
    void *ctx, const resil_args *args, resil_value *out);

/*
 * A return code for a failure the user's function knows to be a timeout
 * (its own socket deadline): returned by the function (or reported to
 * resil_call_report), it counts as a timeout everywhere resil's own
 * deadline would: the attempt fails with RESIL_E_TIMEOUT (its value is
 * dropped, the pipeline's timeouts metric counts it), zone-aware crosses
 * zones on it, outlier detection and the endpoint's breaker count a
 * failure, and the pipeline's breaker records a failure whose duration is
 * at least the timeout + 1 (so it counts as slow wherever a call that
 * resil timed out would). The classifier is not asked. result.rc keeps
 * it.
 */
#define RESIL_RC_TIMEOUT (-2147483647 - 1) /* INT_MIN */

/*
 * The server's pushback (issue 42): return codes for "the server refused
 * the request because it is overloaded" (HTTP 429 or 503 with
 * Retry-After, gRPC RESOURCE_EXHAUSTED), returned by the user's function
 * (or reported to resil_call_report), with or without a Retry-After:
 *
 *   RESIL_RC_THROTTLED          throttled, no Retry-After;
 *   RESIL_RC_THROTTLED_MS(ms)   throttled, retry after ms milliseconds
 *                               (0..RESIL_RC_RETRY_AFTER_MAX_MS; a larger
 *                               ms is that maximum, a negative one 0).
 *
 * These codes are a band of INT_MIN + 1 .. INT_MIN + 2^30 + 1 (every code
 * of it means "throttled": a function's own codes must stay out of it).
 * The attempt fails with RESIL_E_THROTTLED, and (docs/semantics.md,
 * "Decided in turn 4"): the breaker does not count it (the permit is
 * given back, as for an ignored outcome), nor does an adaptive bulkhead;
 * the pipeline's throttle counts a request that was not accepted; a
 * Retry-After pauses the pipeline's rate limiter stage until it has
 * passed; the retry stage waits at least Retry-After before the next
 * attempt (and makes none that would start past its deadline). The
 * classifier is not asked. result.rc keeps the code:
 * resil_rc_retry_after_ms(result.rc) reads the Retry-After back.
 */
#define RESIL_RC_THROTTLED (-2147483647)
#define RESIL_RC_RETRY_AFTER_MAX_MS 1073741823 /* 2^30 - 1: 12.4 days */
#define RESIL_RC_THROTTLED_MS(ms)                                  \
	((int)(RESIL_RC_THROTTLED + 1 +                              \
	    ((ms) < 0                                   ? 0          \
	            : (ms) > RESIL_RC_RETRY_AFTER_MAX_MS ? RESIL_RC_RETRY_AFTER_MAX_MS \
	                                                : (int)(ms))))

/* Whether rc is one of the throttled codes above. */
static inline int
resil_rc_is_throttled(int rc)
{
	return rc >= RESIL_RC_THROTTLED &&
	    rc <= RESIL_RC_THROTTLED + 1 + RESIL_RC_RETRY_AFTER_MAX_MS;
}

/* The Retry-After of a throttled code in milliseconds, or -1 for
 * RESIL_RC_THROTTLED (none) and for any other code. */
static inline long
resil_rc_retry_after_ms(int rc)
{
	return resil_rc_is_throttled(rc) && rc != RESIL_RC_THROTTLED
	    ? (long)rc - (long)RESIL_RC_THROTTLED - 1
	    : -1;
}

/*
 * A failure that a fallback may answer for: the resil error (RESIL_E_CALL
 * when the user's function failed, RESIL_E_OPEN for a breaker rejection,
 * RESIL_E_RETRIES_EXHAUSTED, RESIL_E_TIMEOUT, RESIL_E_LIMITED, ...), the
 * user's return code (0 when no call was made) and the attempts made.
 */
typedef struct resil_failure {
	resil_err err;
	int rc;
	uint32_t attempts;
} resil_failure;

#ifdef __cplusplus
}
#endif

#endif /* RESIL_VALUE_H */

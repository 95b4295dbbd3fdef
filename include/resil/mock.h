/*
 * resil mock: Dubbo-style mock degradation specs.
 *
 * A mock spec says what a caller gets instead of the real answer. It is
 * parsed once, at configuration time, into one normal form
 * (resil_mock_spec). The grammar (keywords are case-insensitive, blanks
 * around the spec and its parts are ignored):
 *
 *   spec    := "" | "false" | "0" | "null" | "N/A"       no mock
 *            | [ ("force" | "fail") ":" ] body            no prefix: fail
 *            | "true" | "default" | "fail" | "force"      <service>Mock
 *   body    := "return" [ payload ]                       bare: null
 *            | "throw" [ NAME ]
 *            | "true" | "default" | "fail" | "force"      <service>Mock
 *            | NAME                                       a registered mock
 *   payload := "null" | "empty" | "true" | "false" | number
 *            | 'text' | "text" | `text` | JSON object or array
 *            | text                 (a string method, or untyped)
 *
 * An unquoted payload that is not a keyword, a number or JSON is the text
 * itself, as in Dubbo, when the method is untyped (RESIL_TYPE_ANY) or a
 * string; resil_mock_parse() notes the reading in its diag (`return ture`:
 * "unquoted text read as the string "ture" (did you mean true?)"). Every
 * other declared type refuses it.
 *
 * force: answers from the mock and never calls. fail: calls first and asks
 * the mock only after a non-business failure; business errors propagate.
 * `throw` answers RESIL_E_MOCK with the message RESIL_MOCK_MESSAGE;
 * `throw NAME` answers RESIL_E_BUSINESS with the code registered for NAME
 * and the same message. A method-level spec overrides the service-level
 * one for that method alone. See docs/mock.md for the full rules.
 *
 * Thread safety: a registry and a resil_mock are configured (new, add,
 * set_method) from one thread, before use; after that, resil_mock_lookup,
 * resil_mock_invoke and resil_mock_call may run concurrently from any
 * number of threads on one resil_mock. resil_mock_parse and the spec
 * functions touch only their arguments.
 */
#ifndef RESIL_MOCK_H
#define RESIL_MOCK_H

#include <string.h>

#include <resil/resil.h>
#include <resil/value.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum resil_mock_action {
	RESIL_MOCK_NONE = 0,   /* no mock: the call's own result stands */
	RESIL_MOCK_RETURN = 1, /* answer value */
	RESIL_MOCK_THROW = 2,  /* answer an error */
	RESIL_MOCK_IMPL = 3    /* run a registered mock implementation */
} resil_mock_action;

typedef enum resil_mock_mode {
	/* Call first, mock after a non-business failure. */
	RESIL_MOCK_FAIL = 0,
	/* Never call: the mock answers. */
	RESIL_MOCK_FORCE = 1
} resil_mock_mode;

/*
 * The normal form of a spec. RETURN: value, already converted to the
 * declared type. THROW: name is the error name, or NULL for a bare throw.
 * IMPL: name is the implementation name, or NULL for the default
 * <service>Mock. NONE: mode is FAIL, value null, name NULL. alloc_ is
 * private. Release with resil_mock_spec_free().
 */
typedef struct resil_mock_spec {
	resil_mock_action action;
	resil_mock_mode mode;
	resil_value value;
	char *name;
	resil_allocator alloc_;
} resil_mock_spec;

/*
 * Parse text (NUL-terminated; NULL means no mock) for a method whose
 * declared return type is declared, into *out, allocating through a (NULL:
 * malloc). Names are checked for their form only here; resil_mock_new and
 * resil_mock_set_method check them against a registry.
 *
 * Returns RESIL_OK (diag, when not NULL, then holds a note on how the spec
 * was read, an unquoted text taken as the string itself, or is empty);
 * RESIL_E_INVAL for a NULL out or an invalid spec, with
 * a message that quotes the spec and points at the offending column
 * (1-based), e.g. `mock: "fail:" at column 6: empty body after 'fail:'`;
 * RESIL_E_NOMEM. On error *out is unchanged.
 */
RESIL_API resil_err resil_mock_parse(resil_mock_spec *out, const char *text,
    resil_type declared, const resil_allocator *a, resil_diag *diag);

/* Release what *s owns and make it NONE. NULL is a harmless no-op. */
RESIL_API void resil_mock_spec_free(resil_mock_spec *s);

/*
 * Print the canonical text of s into buf, like snprintf (returns the full
 * length). Every spelling of one normal form prints the same text, and the
 * text parses back to it: `false` (NONE), `fail:return null`,
 * `force:return "x"`, `fail:return 1`, `fail:return 2.5`,
 * `fail:return {"a":1}`, `force:throw`, `fail:throw NAME`,
 * `fail:default`, `force:NAME`. Strings, and the JSON strings of a JSON
 * method, print raw between double quotes. For every accepted spec,
 * parse -> format -> parse gives an equal spec.
 */
RESIL_API size_t resil_mock_spec_format(
    const resil_mock_spec *s, char *buf, size_t size);

/* 1 if a and b are the same normal form, else 0. */
RESIL_API int resil_mock_spec_equal(
    const resil_mock_spec *a, const resil_mock_spec *b);

/* "none", "return", "throw", "impl" or "unknown"; "fail", "force" or
 * "unknown". */
RESIL_API const char *resil_mock_action_name(resil_mock_action a);
RESIL_API const char *resil_mock_mode_name(resil_mock_mode m);

/*
 * The registry of named errors (for `throw NAME`) and of mock
 * implementations (for `NAME` and `default`). An implementation is a
 * resil_call_fn and its ctx, registered with the service (interface) it
 * implements; the default mock of service S is the implementation named
 * "SMock" registered for S.
 */
typedef struct resil_mock_registry resil_mock_registry;

/* Create an empty registry; the caller frees it with
 * resil_mock_registry_free(). *a is copied. Returns RESIL_OK,
 * RESIL_E_INVAL (NULL out) or RESIL_E_NOMEM; *out is unchanged on error. */
RESIL_API resil_err resil_mock_registry_new(
    resil_mock_registry **out, const resil_allocator *a);

/* NULL is a harmless no-op. Mocks created from the registry keep their
 * own copies and stay valid. */
RESIL_API void resil_mock_registry_free(resil_mock_registry *r);

/*
 * Register the business error name (a Java-like name: a letter, '_' or
 * '$', then letters, digits, '_', '$', '.' or '-') with the user's code,
 * delivered in resil_result.rc. Returns RESIL_OK; RESIL_E_INVAL for a NULL
 * argument, a malformed or already registered name; RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_mock_registry_add_error(
    resil_mock_registry *r, const char *name, int code, resil_diag *diag);

/*
 * Register the mock implementation name for service. fn is called as
 * fn(ctx, args, &value); it returns 0 with the mock's value, or a code of
 * its own when the mock itself fails. ctx is the caller's, must outlive
 * every mock using it, and is never freed by resil. Same return codes as
 * resil_mock_registry_add_error(); service must be non-empty.
 */
RESIL_API resil_err resil_mock_registry_add_impl(resil_mock_registry *r,
    const char *name, const char *service, resil_call_fn fn, void *ctx,
    resil_diag *diag);

/* The mock configuration of one service. */
typedef struct resil_mock resil_mock;

typedef struct resil_mock_config {
	size_t size;                         /* sizeof(resil_mock_config) */
	const char *service;                 /* the interface; required */
	const char *spec;                    /* service-level; NULL: none */
	const resil_mock_registry *registry; /* NULL: no names resolve */
	const resil_allocator *alloc;        /* NULL: malloc() and free() */
} resil_mock_config;

static inline void
resil_mock_config_init(resil_mock_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
}

static inline resil_mock_config
resil_mock_config_default(void)
{
	resil_mock_config cfg;

	resil_mock_config_init(&cfg);
	return cfg;
}

/*
 * Create the mock configuration of cfg->service with the service-level
 * spec cfg->spec (for methods declared with no type of their own it is
 * parsed with RESIL_TYPE_ANY). Every name the spec uses is resolved in
 * cfg->registry now: an unknown error or implementation name, an
 * implementation registered for another service, or `default` where no
 * <service>Mock is registered is refused.
 *
 * *cfg and the strings it points to are copied; the registry is read only
 * during this call. The caller frees *out with resil_mock_free().
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, a bad cfg->size, a
 * missing service or an invalid spec (message in diag, naming
 * `mock.service`, `mock.size` or quoting the spec); RESIL_E_NOMEM. On
 * error *out is unchanged.
 */
RESIL_API resil_err resil_mock_new(
    resil_mock **out, const resil_mock_config *cfg, resil_diag *diag);

/* NULL is a harmless no-op. */
RESIL_API void resil_mock_free(resil_mock *m);

/*
 * Declare method with its return type and, when spec is not NULL, its own
 * method-level spec (`getStock.mock=...`), which overrides the
 * service-level one for this method alone (`false` turns the mock off for
 * it). With spec NULL the service-level spec applies, converted to type.
 * The registry given at resil_mock_new() must still be alive: names are
 * resolved now, with the same refusals. Declaring a method again replaces
 * its setting.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL m or method, or a spec that
 * is invalid or cannot be converted to type (message in diag);
 * RESIL_E_NOMEM. On error the previous setting of method stays.
 */
RESIL_API resil_err resil_mock_set_method(resil_mock *m, const char *method,
    resil_type type, const char *spec, resil_diag *diag);

/*
 * The effective spec of method: its own, else the service-level one. The
 * pointer is borrowed, valid until the method is set again or m is freed.
 * Returns RESIL_OK, or RESIL_E_INVAL for a NULL argument.
 */
RESIL_API resil_err resil_mock_lookup(
    const resil_mock *m, const char *method, const resil_mock_spec **out);

/*
 * Run the mock of args->method, after the failure cause (NULL for a force
 * mock, where nothing was called), into *out (which is overwritten; free
 * it with resil_result_free()). source is RESIL_SOURCE_MOCK and cause,
 * cause_rc and attempts come from cause. The outcome is in out->err:
 * RESIL_OK with the value (return, or an implementation's value converted
 * to the method's type); RESIL_E_MOCK for `throw`; RESIL_E_BUSINESS for
 * `throw NAME` (rc the registered code, error_name NAME); RESIL_E_CALL
 * when the implementation itself failed (rc its code; message names both
 * the original failure and the mock's).
 *
 * Returns out->err when the mock answered; RESIL_E_NOTFOUND (and *out
 * untouched) when the method has no mock; RESIL_E_INVAL for a NULL
 * argument; RESIL_E_NOMEM.
 */
RESIL_API resil_err resil_mock_invoke(const resil_mock *m,
    const resil_args *args, const resil_failure *cause, resil_result *out);

/*
 * Dubbo's MockClusterInvoker around one call of fn(ctx, args, &value):
 * no mock: call; force: the mock answers, fn is never called; fail: call,
 * and after a non-business failure (by cls; NULL: rc != 0 fails) the mock
 * answers. A business error propagates untouched (RESIL_E_BUSINESS, rc).
 * A failure with no mock gives RESIL_E_CALL with rc. A successful live
 * call gives RESIL_OK, source LIVE, attempts 1.
 *
 * Returns out->err (*out is overwritten), or RESIL_E_INVAL for a NULL
 * argument (*out untouched).
 */
RESIL_API resil_err resil_mock_call(const resil_mock *m,
    const resil_args *args, resil_call_fn fn, void *ctx,
    const resil_classifier *cls, resil_result *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_MOCK_H */

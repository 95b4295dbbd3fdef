/*
 * resil config: key=value configuration text for a pipeline.
 *
 * One setting a line, in the manner of Dubbo URL parameters:
 *
 *   # StockService
 *   service=StockService
 *   breaker.failure_rate=50
 *   retry.max_attempts=3
 *   mock=fail:return null
 *   getStock.type=int
 *   getStock.mock=force:return 0
 *   cache.max_age=10s
 *
 * A line whose first non-blank character is '#' is a comment; blank lines
 * are skipped; blanks (spaces and tabs) around the key and the value are
 * ignored. A '#' after a value is part of the value (mock strings may hold
 * one). The first '=' splits key and value. A key may be given once per
 * text: a second occurrence is refused. docs/config.md lists every key with
 * its default and range.
 *
 * Durations: a tick is a nanosecond on every clock. A number without a
 * unit is milliseconds (timeout=3000 is three seconds, as in Dubbo and
 * Spring); the units ns, us, ms, s, m and h may follow the number, and a
 * fraction that makes whole nanoseconds is accepted (1.5s). Anything else
 * (10 s, 10sec, 10M) is refused with a hint, never guessed.
 *
 * Every setting is checked as it is read, then each enabled stage's own
 * validation runs. An error is reported as `origin:line: message`, e.g.
 * `svc.conf:3: breaker.failure_rate: 101 is out of range 0..100`;
 * a cross-field error found by a stage's validation carries the line of
 * the last key of that stage. A setting made with resil_config_set() has
 * no line: its errors, and the cross-field errors of its stage, are the
 * message alone.
 *
 * A resil_config owns every string it holds. resil_config_pipeline()
 * gives a resil_pipeline_config whose strings and methods point into it.
 *
 * Thread safety: a resil_config is used from one thread at a time. Reading
 * functions (pipeline, get, count, entry) may run concurrently with each
 * other, but not with set or free. Different configs are independent.
 */
#ifndef RESIL_CONFIG_H
#define RESIL_CONFIG_H

#include <stddef.h>

#include <resil/pipeline.h>
#include <resil/resil.h>
#include <resil/source.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_config resil_config;

/*
 * Parse text (NUL-terminated) into a new configuration and store it in
 * *out. origin names the text in messages (NULL: "<string>"). alloc is
 * copied (NULL: malloc() and free()); its ctx must outlive the config.
 * diag may be NULL. The caller frees *out with resil_config_free().
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL out or text, or a bad setting
 * (`origin:line: message` in *diag); RESIL_E_NOMEM. On error *out is
 * unchanged and nothing is left allocated.
 */
RESIL_API resil_err resil_config_parse_string(resil_config **out,
    const char *text, const char *origin, const resil_allocator *alloc,
    resil_diag *diag);

/*
 * As resil_config_parse_string() on the contents of the file at path,
 * which is also the origin in messages. Returns as parse_string, and
 * RESIL_E_NOTFOUND when the file cannot be opened or read (`path: cannot
 * open: ...` in *diag); a NUL byte in the file is refused (RESIL_E_INVAL).
 */
RESIL_API resil_err resil_config_parse_file(resil_config **out,
    const char *path, const resil_allocator *alloc, resil_diag *diag);

/* An empty configuration (every default, no stage on): the same as
 * parsing "". */
RESIL_API resil_err resil_config_new(
    resil_config **out, const resil_allocator *alloc);

/* Free conf and every string it owns. NULL is a harmless no-op. */
RESIL_API void resil_config_free(resil_config *conf);

/*
 * The pipeline configuration described by conf. Its service, mock,
 * methods (and their names and mocks) point into conf: the pointer and
 * what it reaches stay valid until conf is changed (resil_config_set) or
 * freed. The caller may copy the struct and fill in what text cannot say:
 * registry, classifier, listener, clock and alloc (all NULL here).
 * Returns NULL for a NULL conf.
 */
RESIL_API const resil_pipeline_config *resil_config_pipeline(
    const resil_config *conf);

/*
 * The cluster keys of conf (cluster=, retries=, forks=, zone=, ...) are in
 * resil_config_pipeline()'s .cluster. The selector and directory keys
 * (loadbalance=, router.*, outlier.*, panic.threshold, ...; parsed by
 * resil_cluster_text_set) are given here, so that one file builds the
 * directory, the selector and the pipeline:
 * - resil_config_selector(): *out is initialised and filled (service,
 *   balancers, routers, panic; its local zone is zone= unless router.zone
 *   says otherwise, with zone mode OFF under cluster=zone-aware); random
 *   and alloc are left NULL for the caller (random NULL: the selector's
 *   own generator, seeded by loadbalance.seed).
 * - resil_config_directory(): the outlier settings and empty protection
 *   (registry.empty_protection) of *out are overwritten (the rest is left
 *   as the caller set it).
 * Strings point into conf (valid until it is changed or freed). Both
 * return 1 when conf has any such key, 0 when none (the outputs are still
 * filled with defaults), 0 for a NULL argument.
 */
RESIL_API int resil_config_selector(
    const resil_config *conf, resil_selector_config *out);
RESIL_API int resil_config_directory(
    const resil_config *conf, resil_directory_config *out);

/*
 * The registry keys of conf (registry=, registry.service=, .group,
 * .version, .root, .protocols, .file, .file.interval, .session_timeout,
 * .routes; parsed by resil_source_text_set, source.h) make the source
 * that feeds the directory from the registry (docs/registry-zookeeper.md):
 * - resil_config_source(): a new source from them, feeding dir and, when
 *   sel is not NULL, giving the registry's condition rules to sel (both
 *   must outlive the source; malloc() and free() allocate, for another
 *   allocator use resil_config_source_config()). registry.service
 *   falls back to service=. Returns RESIL_OK with *out, to free with
 *   resil_source_free() before sel and dir; RESIL_E_NOTFOUND when conf has
 *   no registry (no registry key, or registry=N/A); RESIL_E_INVAL for a
 *   NULL conf, dir or out, or what resil_source_new() refuses (message in
 *   *diag); RESIL_E_NOMEM. *out is unchanged on error. A readable
 *   registry.file gives the directory its providers before this returns.
 * - resil_config_source_config(): the fields of *out that the keys give
 *   are overwritten (the rest is left as the caller set it: directory,
 *   selector, listener, clocks), for a source made by hand. Strings point
 *   into conf (valid until it is changed or freed). Returns 1 when conf
 *   has a registry, else 0 (and *out is left alone).
 * registry.empty_protection is the directory's key (resil_config_
 * directory()). A registry.* key without registry= is refused at the end
 * of the text, at the line of the first one.
 */
RESIL_API resil_err resil_config_source(const resil_config *conf,
    resil_directory *dir, resil_selector *sel, resil_registry_source **out,
    resil_diag *diag);
RESIL_API int resil_config_source_config(
    const resil_config *conf, resil_source_config *out);

/*
 * Apply one setting, with the same checks as a line of text (key and value
 * are trimmed of blanks), then run the stage validations again. A key set
 * before (by the text or by an earlier set) takes the new value, and its
 * setting loses its line; router.condition, which a text may repeat,
 * appends a rule instead, as a line does. Pointers from
 * resil_config_pipeline() become invalid on RESIL_OK.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument or a bad setting
 * (message in *diag, without origin:line for this setting); RESIL_E_NOMEM.
 * On error conf is unchanged.
 */
RESIL_API resil_err resil_config_set(
    resil_config *conf, const char *key, const char *value, resil_diag *diag);

/*
 * The effective value of key as text, into buf (len bytes with the NUL):
 * every stage key gives its value, default or set, in a form the parser
 * reads back (durations in the largest unit that holds them exactly, as
 * "30s" or "7ns", 0 as "0"; enums by name, booleans as true or false, "none"
 * for no limit); `<stage>.enabled` gives whether the stage is on. service,
 * mock and method keys give what was set.
 *
 * Returns RESIL_OK; RESIL_E_NOTFOUND for an unknown key, a string key that
 * was not set or a method that was not declared; RESIL_E_INVAL for a NULL
 * argument or a buffer too small for the value (buf is then untouched).
 */
RESIL_API resil_err resil_config_get(
    const resil_config *conf, const char *key, char *buf, size_t len);

/* One setting as given, for tools. The strings belong to the config. */
typedef struct resil_config_setting {
	const char *key;
	const char *value;
	const char *origin; /* NULL for a setting made by resil_config_set */
	unsigned line;      /* 1-based; 0 for resil_config_set */
} resil_config_setting;

/* The number of settings, in the order they were given; 0 for NULL. */
RESIL_API size_t resil_config_count(const resil_config *conf);

/* The i-th setting into *out. RESIL_OK; RESIL_E_INVAL for a NULL argument;
 * RESIL_E_NOTFOUND when i >= count. */
RESIL_API resil_err resil_config_entry(
    const resil_config *conf, size_t i, resil_config_setting *out);

/*
 * Reload a running pipeline from configuration text: parse text (origin
 * names it in messages, NULL: "<string>") with the parser above, then
 * resil_pipeline_reload() with the result (what text cannot say, the
 * clock, allocator, listener, classifier, registry, selector and
 * executor, stays the pipeline's). Invalid text is refused with
 * `origin:line: message` (RESIL_E_INVAL), a setting that cannot change by
 * reload with the key named; either way the pipeline is unchanged. See
 * resil_pipeline_reload() for what carries over. _file reads path (its
 * origin in messages; RESIL_E_NOTFOUND when it cannot be read).
 * Thread safety: as resil_pipeline_reload().
 */
RESIL_API resil_err resil_pipeline_reload_string(
    resil_pipeline *p, const char *text, const char *origin, resil_diag *diag);
RESIL_API resil_err resil_pipeline_reload_file(
    resil_pipeline *p, const char *path, resil_diag *diag);

/*
 * The rules every declared method obeys, in configuration text and through
 * the API alike (resil_pipeline_config.methods): a name that is an
 * identifier, [A-Za-z_$][A-Za-z0-9_$]*, and not a word that starts a stage
 * key (service, timeout, mock, breaker, retry, cache, ratelimit,
 * bulkhead, cluster, retries, forks, broadcast, failback, zone,
 * cross_zone_timeout, loadbalance, router, outlier, panic, hedge); a type
 * among resil_type's; max_attempts at most 1000.
 * Returns RESIL_OK, or RESIL_E_INVAL with the reason in diag, naming the
 * method: `method "get stock": not a method name (a letter, '_' or '$',
 * then letters, digits, '_' or '$')`, `getStock.type: 77 is not a type`.
 * The text parser applies exactly these rules.
 */
RESIL_API resil_err resil_config_check_method(
    const resil_method_config *m, resil_diag *diag);

/*
 * A duration as configuration text reads it, into *ns: a number alone is
 * milliseconds; ns, us, ms, s, m or h may follow it; a fraction must make
 * whole nanoseconds. Returns RESIL_OK; RESIL_E_INVAL for a NULL argument or
 * text that is not a duration, with the reason in diag (`"10sec": unknown
 * unit "sec" (did you mean 10s?)`); *ns is unchanged on error.
 */
RESIL_API resil_err resil_config_parse_duration(
    const char *text, uint64_t *ns, resil_diag *diag);

/*
 * ns as text that resil_config_parse_duration() reads back: the largest
 * unit that holds it exactly ("30s", "1500us"), 0 as "0". Like snprintf:
 * returns the length of the whole text; buf may be NULL when len is 0.
 */
RESIL_API size_t resil_config_format_duration(
    uint64_t ns, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_CONFIG_H */

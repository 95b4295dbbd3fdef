/*
 * resil registry: pipelines by service name, and their metrics in the
 * Prometheus text exposition format (version 0.0.4).
 *
 * The registry owns the pipelines added to it: resil_registry_free()
 * frees those still registered, and resil_registry_remove() either frees
 * the removed pipeline or hands it back to the caller. A looked-up
 * pointer is borrowed: it stays valid until the pipeline is removed (or
 * the registry freed), so a program that removes pipelines while other
 * threads look them up must take them back with resil_registry_remove()
 * (out not NULL) and free them only once no thread can still use them.
 *
 * Thread safety: lookup, count, foreach and the Prometheus writers may
 * run concurrently with each other and with add and remove, from any
 * number of threads; they take a reader-writer spin lock (readers share
 * it, add and remove hold it alone for a few hash-table operations). new
 * and free must not overlap any other call on the same registry. The
 * callbacks of foreach and of the Prometheus writer run while the read
 * lock is held: they must not call any function of the same registry,
 * and while they run, add and remove wait (spinning).
 */
#ifndef RESIL_REGISTRY_H
#define RESIL_REGISTRY_H

#include <stddef.h>
#include <string.h>

#include <resil/pipeline.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_registry resil_registry;

typedef struct resil_registry_config {
	size_t size;                  /* sizeof(resil_registry_config) */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	/* Issue 41: per keyed family (a pipeline's, of one kind), at most
	 * this many keys get series of their own in the Prometheus text,
	 * those with the most failures + rejections; the others are summed
	 * under key="__other__". 0..1000000; default 100 (also for a config
	 * of the size before this field). */
	size_t key_max_series;
} resil_registry_config;

static inline void
resil_registry_config_init(resil_registry_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->key_max_series = 100;
}

static inline resil_registry_config
resil_registry_config_default(void)
{
	resil_registry_config cfg;

	resil_registry_config_init(&cfg);
	return cfg;
}

/*
 * Create an empty registry. *cfg and *cfg->alloc are copied; the
 * allocator's ctx must outlive the registry. The registry's own memory
 * (its table entries, and the snapshots taken while writing metrics) is
 * taken through cfg->alloc; pipelines keep their own allocators. The
 * caller frees *out with resil_registry_free().
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL argument, an unknown
 * cfg->size or a key_max_series over 1000000 (message in diag, which may
 * be NULL); RESIL_E_NOMEM. On error
 * *out is unchanged.
 */
RESIL_API resil_err resil_registry_new(
    resil_registry **out, const resil_registry_config *cfg, resil_diag *diag);

/* Free the registry and every pipeline still in it. NULL is a harmless
 * no-op. */
RESIL_API void resil_registry_free(resil_registry *reg);

/*
 * Register p under its service name (resil_pipeline_service()). On
 * RESIL_OK the registry owns p. Returns RESIL_E_INVAL for a NULL argument
 * or a name already registered (`registry: service "X" is already
 * registered`; p stays the caller's); RESIL_E_NOMEM (p stays the
 * caller's).
 */
RESIL_API resil_err resil_registry_add(
    resil_registry *reg, resil_pipeline *p, resil_diag *diag);

/*
 * Take the pipeline of service out of the registry. With out NULL it is
 * freed; otherwise *out gets it and the caller owns it again. Returns
 * RESIL_OK; RESIL_E_NOTFOUND (nothing changes, *out untouched);
 * RESIL_E_INVAL for a NULL reg or service.
 */
RESIL_API resil_err resil_registry_remove(
    resil_registry *reg, const char *service, resil_pipeline **out);

/*
 * *out gets the pipeline of service, borrowed (see the top of this
 * header for how long it stays valid). Returns RESIL_OK;
 * RESIL_E_NOTFOUND (*out untouched); RESIL_E_INVAL for a NULL argument.
 */
RESIL_API resil_err resil_registry_lookup(
    resil_registry *reg, const char *service, resil_pipeline **out);

/* The number of pipelines registered; 0 for NULL. */
RESIL_API size_t resil_registry_count(resil_registry *reg);

/* Called by resil_registry_foreach for each pipeline; nonzero stops. */
typedef int (*resil_registry_visit_fn)(resil_pipeline *p, void *ctx);

/*
 * Call fn(p, ctx) for each pipeline, in the order they were added, under
 * the read lock. Returns RESIL_OK (also when fn stopped early);
 * RESIL_E_INVAL for a NULL reg or fn.
 */
RESIL_API resil_err resil_registry_foreach(
    resil_registry *reg, resil_registry_visit_fn fn, void *ctx);

/* Receives the exposition text in chunks (not NUL-terminated, n > 0);
 * nonzero stops the writing. */
typedef int (*resil_registry_write_fn)(const char *chunk, size_t n, void *ctx);

/*
 * Write the metrics of every registered pipeline and of its stages in
 * the Prometheus text format 0.0.4 (docs/registry.md lists every metric).
 * Families are written in a fixed order, pipelines in the order they
 * were added; a family no pipeline has (e.g. the cache metrics when no
 * pipeline has a cache) is left out. Durations are in clock ticks.
 * Issue 41: then the pipelines' keyed families (resil_pipeline_keyed()),
 * labelled service, kind and key, at most cfg.key_max_series keys each
 * (the rest under key="__other__"); each family's keys are read under
 * that family's lock, one metrics read per live key.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL reg or fn; RESIL_E_NOMEM
 * (nothing written); RESIL_E_CALL when fn returned nonzero (the text is
 * then cut short).
 */
RESIL_API resil_err resil_registry_write_prometheus_cb(
    resil_registry *reg, resil_registry_write_fn fn, void *ctx);

/*
 * The same text into buf, snprintf-style: at most len - 1 bytes and a
 * terminating NUL (when len > 0); *needed gets the length of the whole
 * text (without the NUL), so it was complete if *needed < len. buf may be
 * NULL when len is 0, to learn the size (which may grow before the next
 * call as counters grow).
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a NULL reg or needed, or a NULL buf
 * with len > 0; RESIL_E_NOMEM. On error *needed is unchanged.
 */
RESIL_API resil_err resil_registry_write_prometheus(
    resil_registry *reg, char *buf, size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_REGISTRY_H */

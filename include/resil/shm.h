/*
 * resil shm: breakers shared by the processes of one host (prefork
 * servers, worker pools), in a named shared-memory region.
 *
 * The first process to open a region creates it; the others attach. A
 * breaker is found in the region by name, created by the first process
 * that asks for it; every process gets its own resil_breaker handle on the
 * same state, and the lock-free protocol is the in-process one: a probe
 * permit, a trip or a reset in one process is seen by all at once, and at
 * most permitted_probes probes run per HALF_OPEN episode across every
 * process.
 *
 * Liveness when a process dies at any instruction (SIGKILL):
 * - a transition it was making is finished by the next process that waits
 *   for it (after about 8192 rounds of waiting, a few milliseconds),
 *   once the owner's slot is seen dead;
 * - its announcements (a record in progress) are skipped once its slot is
 *   seen dead;
 * - its probe permits lapse with the HALF_OPEN episode: a shared breaker's
 *   max_half_open_ns defaults to its open_wait_ns when left 0;
 * - counters are atomic: nothing drifts.
 * A process is "dead" when its pid no longer exists or now belongs to a
 * process with another start time.
 *
 * Every process's listener hears every transition, in order by seq: see
 * resil_breaker_poll() in breaker.h.
 *
 * Thread safety: open, close and resil_shm_breaker may be called from any
 * thread; the breakers are as thread-safe as any breaker.
 */
#ifndef RESIL_SHM_H
#define RESIL_SHM_H

#include <string.h>

#include <resil/breaker.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_shm resil_shm;

/* The layout of a region. A process built with another layout refuses to
 * attach (RESIL_E_INVAL naming both). */
#define RESIL_SHM_LAYOUT 1

typedef struct resil_shm_config {
	size_t size;                  /* sizeof(resil_shm_config) */
	size_t region_bytes;          /* the region's size when created */
	uint32_t max_entries;         /* breakers it can hold, 1..4096 */
	unsigned mode;                /* permissions when created */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_shm_config;

/* 1 MiB, 64 breakers, mode 0600. */
static inline void
resil_shm_config_init(resil_shm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->region_bytes = (size_t)1 << 20;
	cfg->max_entries = 64;
	cfg->mode = 0600;
}

/*
 * Create the region called name, or attach to it, and take one of its 64
 * process slots. name: 1..200 characters of [A-Za-z0-9._-] (the POSIX
 * object is "/resil.NAME"). cfg may be NULL (defaults); a region that
 * exists keeps its own size and capacity. The caller owns *out and closes
 * it with resil_shm_close() after freeing its breakers.
 *
 * Returns RESIL_OK; RESIL_E_INVAL (reason in *diag) for a bad name, a bad
 * config, a region of another layout, or one whose creator never finished
 * it; RESIL_E_LIMITED when all 64 process slots are taken by live
 * processes; RESIL_E_NOMEM; RESIL_E_INVAL with the system's reason when
 * shm_open or mmap fails. *out is written only on RESIL_OK.
 */
RESIL_API resil_err resil_shm_open(resil_shm **out, const char *name,
    const resil_shm_config *cfg, resil_diag *diag);

/* Release the process slot and unmap. NULL is a no-op. The breakers taken
 * from shm must be freed first. The region stays (resil_shm_unlink). */
RESIL_API void resil_shm_close(resil_shm *shm);

/* Remove the region's name; processes attached keep using it. */
RESIL_API resil_err resil_shm_unlink(const char *name, resil_diag *diag);

/*
 * The breaker called name (1..63 characters of [A-Za-z0-9._-]) in the
 * region: created with *cfg by the first process that asks, attached to
 * by the others. Attaching requires the same window type, window size,
 * bucket_ns and permitted_probes as the creator's (the triggers, waits
 * and listener are each process's own, from *cfg). The caller owns *out
 * (resil_breaker_free(), which leaves the shared state alone).
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a bad name or config, or a layout
 * that differs from the creator's (both named in *diag); RESIL_E_NOMEM
 * when the region is full (entries or bytes) or memory runs out.
 */
RESIL_API resil_err resil_shm_breaker(resil_shm *shm, const char *name,
    const resil_breaker_config *cfg, resil_breaker **out, resil_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_SHM_H */

/*
 * resil shm: breakers, rate limiters and bulkheads shared by the
 * processes of one host (prefork servers, worker pools), in a named
 * shared-memory region.
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
 * Rate limiters (resil_shm_ratelimit) share their one GCRA word: the
 * permits granted by all processes together obey the limiter's rule
 * exactly (limit.h), since every decision is a CAS on that word. Nothing
 * is held between calls, so a process dying anywhere leaves nothing
 * behind (with cfg.batch > 0 the permits in its caches are lost, never
 * granted twice).
 *
 * Bulkheads (resil_shm_bulkhead) count each process's calls in flight in
 * its own line, tagged with its pid; an acquire counts itself, then sums
 * the lines of live process slots, and backs off when over the limit. So
 * never more than the limit are in flight across processes. The calls of
 * a process that dies are given back (reclaimed):
 * - at once when another process takes its process slot (its tag is no
 *   longer the slot's pid);
 * - by resil_shm_reap(), which checks each holder's liveness (in keyed
 *   bulkhead families' keys too: resil_shm_keyed below);
 * - by the first refusal at least 10 ms (system clock) after the last
 *   sweep of that bulkhead in any process (the first refusal ever sweeps
 *   at once), which then tries again.
 *
 * A handle (region or object) belongs to the process that opened it: a
 * child made by fork() after resil_shm_open must open its own.
 *
 * Thread safety: open, close, reap and resil_shm_breaker / _ratelimit /
 * _bulkhead / _keyed / _keyed_stat may be called from any thread; the
 * objects are as thread-safe as their in-process kind (a keyed family
 * as keyed.h says).
 */
#ifndef RESIL_SHM_H
#define RESIL_SHM_H

#include <string.h>

#include <resil/breaker.h>
#include <resil/keyed.h>
#include <resil/limit.h>
#include <resil/resil.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_shm resil_shm;

/* The layout of a region. A process built with another layout refuses to
 * attach (RESIL_E_INVAL naming both). */
#define RESIL_SHM_LAYOUT 6 /* 4: keyed breaker families (issue 41); 5: keyed
                            * rate limiter families (h3/kshm2); 6: keyed
                            * bulkhead families (h4/kshm3) */

typedef struct resil_shm_config {
	size_t size;          /* sizeof(resil_shm_config) */
	size_t region_bytes;  /* the region's size when created */
	uint32_t max_entries; /* breakers, rate limiters, bulkheads, 1..4096 */
	unsigned mode;        /* permissions when created */
	const resil_allocator *alloc; /* NULL: malloc() and free() */
} resil_shm_config;

/* 1 MiB, 64 entries, mode 0600. */
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
 * config, a region of another layout or build, a corrupt one (truncated,
 * resized, garbage in its header, process table, entry table or a
 * breaker's state word: "corrupt region: " and what is wrong), or one
 * whose creator never finished it; RESIL_E_LIMITED when all 64 process slots
 * are taken by live processes; RESIL_E_NOMEM; RESIL_E_INVAL with the system's
 * reason when shm_open or mmap fails. *out is written only on RESIL_OK.
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

/*
 * The rate limiter called name (rules as for breakers; one namespace for
 * every kind) in the region: created with *cfg by the first process that
 * asks (holding its full burst at that process's clock reading), attached
 * to by the others. Attaching requires the creator's rate, period_ns and
 * burst; listener, batch and clock are each process's own, but every
 * process must read the same clock (the system clock, or one manual
 * clock in memory they share): the state holds absolute clock readings.
 * The caller owns *out (resil_ratelimit_free(), which leaves the shared
 * state alone). Metrics counters are this process's own; "available" is
 * the shared state's.
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a bad name or config, a name taken
 * by another kind, or a layout that differs from the creator's (both
 * named in *diag); RESIL_E_NOMEM when the region is full.
 */
RESIL_API resil_err resil_shm_ratelimit(resil_shm *shm, const char *name,
    const resil_ratelimit_config *cfg, resil_ratelimit **out,
    resil_diag *diag);

/*
 * The bulkhead called name in the region, as above. Attaching requires
 * the creator's max_concurrent; the limit is fixed (cfg->adaptive and
 * cfg->batch must be 0: RESIL_E_INVAL naming the field otherwise). A
 * release must happen in the process that acquired (else
 * RESIL_E_MISUSE). A refusal means the sum of the live processes' calls
 * in flight was at the limit when looked at; while acquires race for the
 * last slots, each may see the others and back off (a retry may then
 * succeed). An acquire reads one line per process slot (64): slower than
 * the in-process bulkhead, no system call unless it refuses (see above).
 * Metrics counters and peak are this process's own; in_flight and limit
 * are the region's.
 */
RESIL_API resil_err resil_shm_bulkhead(resil_shm *shm, const char *name,
    const resil_bulkhead_config *cfg, resil_bulkhead **out, resil_diag *diag);

/* Give back the bulkhead slots (calls in flight) of processes found dead,
 * in every bulkhead of the region; returns how many were given back. One
 * liveness check (a system call or two) per process slot holding any.
 * NULL: 0. */
RESIL_API uint32_t resil_shm_reap(resil_shm *shm);

/* ---- keyed breaker and rate limiter families shared by processes
 * (issue 41) ---- */

/* The longest key a shared family keeps (in the region). */
#define RESIL_SHM_KEYED_KEY_MAX 64u

/*
 * The keyed breaker family called name (rules and namespace as for
 * breakers) in the region: key K's breaker is the same in every process
 * that opens the family (a trip in one is seen by all at once), in a
 * table of cfg->max_keys slots fixed when the first process creates it.
 * *out is an ordinary resil_keyed (keyed.h: acquire, record, get/put,
 * foreach, metrics, top, prometheus) whose instances are handles on the
 * region's breakers; it keeps at most max_keys of them, evicting idle
 * ones as any family (which only lets go of the handle).
 *
 * A new key takes a free slot, else the slot of a key no live process
 * holds whose breaker is CLOSED with no failure, slow call or failure
 * streak in its window (a failing key is never reset by churning keys);
 * else the family gives back one idle key of its own and asks once more;
 * else the key gets the family's overflow instance, a handle on the
 * table's overflow breaker (one per table, shared by every such key in
 * every process), as a full in-process family's overflow: the listener
 * hears OVERFLOW, resil_shm_keyed_info.overflowed counts it, and the key
 * is not kept, so its next use asks the table again (h4/kshm3). A process
 * killed at any instruction, claiming a slot included, leaves a table the
 * next process repairs.
 *
 * Kind RESIL_KEYED_RATELIMIT (h3/kshm2): key K's rate limiter (its GCRA
 * state) is the same in every process, in slots of 256 bytes; a slot is
 * reclaimed only when no live process holds it and its limiter holds
 * its full burst. Each slot records the rate, period and burst its
 * claimer gave the key (the family's or the key's override); a process
 * giving it others is refused (RESIL_E_INVAL naming both: at open for
 * the overflow's and its overrides' keys, else on the key's calls).
 * ratelimit.batch must be 0; max_keys alone fixes the table.
 *
 * Kind RESIL_KEYED_BULKHEAD (h4/kshm3): key K's calls in flight are
 * counted across processes (each process's in its own packed line of the
 * key's slot, 1216 bytes a slot) against K's max_concurrent (the
 * family's or the key's override, recorded in the slot by its claimer;
 * a process giving another is refused as above). A dead process's calls
 * are given back by resil_shm_reap(), by an acquire of the key that
 * would refuse (as resil_shm_bulkhead's), and before a slot is
 * reclaimed; a slot is reclaimed only when no live process holds it and
 * it has no call in flight. bulkhead.batch, adaptive, max_wait_ns and
 * the reserves must be 0; max_keys alone fixes the table. Throttle
 * families are refused (there is no shared throttle).
 *
 * cfg: kind RESIL_KEYED_BREAKER, RESIL_KEYED_RATELIMIT or
 * RESIL_KEYED_BULKHEAD, max_key_len
 * 1..RESIL_SHM_KEYED_KEY_MAX, max_keys 1..2^20. Attaching requires the creator's max_keys and breaker
 * layout (window type and size, bucket_ns, permitted_probes); triggers,
 * waits, clock and listeners are each process's own (every process must
 * read the same clock). hash_seed is the creator's for the region's
 * table (each family's own for its local one). One family per region
 * handle and name: open the region again for a second one. The caller
 * frees *out with resil_keyed_free() before resil_shm_close().
 *
 * Returns RESIL_OK; RESIL_E_INVAL for a bad name or config, another kind,
 * a layout that differs from the creator's (both named in *diag), a name
 * taken by another kind, a family open already through this handle, a
 * corrupt table; RESIL_E_NOMEM when the region is full (entries or
 * bytes: the table needs resil_shm_keyed_info.table_bytes) or memory
 * runs out.
 */
RESIL_API resil_err resil_shm_keyed(resil_shm *shm, const char *name,
    const resil_keyed_config *cfg, resil_keyed **out, resil_diag *diag);

typedef struct resil_shm_keyed_info {
	uint32_t max_keys; /* the table's slots (the overflow's not counted) */
	uint32_t used;     /* slots holding a key now */
	uint64_t claimed;  /* slots claimed for new keys, ever */
	uint64_t reclaimed;  /* idle keys' slots taken for new keys */
	uint64_t overflowed; /* new keys' uses given the overflow instance */
	uint64_t repaired;   /* half-made claims of dead processes undone */
	size_t slot_bytes;   /* region bytes per slot (header and state) */
	size_t table_bytes;  /* region bytes of the whole table */
} resil_shm_keyed_info;

/* The figures of keyed family name in the region (no handle needed).
 * RESIL_E_NOTFOUND when there is none, RESIL_E_INVAL for a NULL argument
 * or a name of another kind. */
RESIL_API resil_err resil_shm_keyed_stat(resil_shm *shm, const char *name,
    resil_shm_keyed_info *out, resil_diag *diag);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_SHM_H */

/*
 * resil shm: named shared-memory regions holding breakers by name.
 *
 * A region is one POSIX shared-memory object, mapped whole:
 *
 *   head     magic, layout, fingerprint, size, capacity, ready flag,
 *            the entry-table lock, the bump allocator's next offset
 *   procs    64 process slots {pid copy, owner word} (lib/proc.c's table)
 *   entries  max_entries {name, kind, layout of the breaker, offset}
 *   data     each breaker's state (lib/breaker.c's shared layout), rate
 *            limiter's or bulkhead's (lib/limit.c's, limit_shared.h), or
 *            keyed family's table (lib/keyed_shm.c's, issue 41)
 *
 * Nothing here is on a hot path: opening, attaching and finding a breaker
 * take the entry-table lock, a spin lock tagged with the holder's process
 * slot, so a holder that dies is replaced once it is seen dead.
 */
#define _GNU_SOURCE 1

#include <resil/shm.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "breaker_shared.h"
#include "internal.h"
#include "limit_shared.h"
#include "proc.h"
#include "shm_internal.h"

#define SHM_MAGIC "RESILSHM"
#define NAME_MAX_REGION 200u
#define NAME_MAX_ENTRY 63u
#define KIND_BREAKER 1u
#define KIND_RATELIMIT 2u
#define KIND_BULKHEAD 3u
#define KIND_KEYED RESIL__SHM_KIND_KEYED /* a keyed breaker family */
#define KIND_KEYED_RATE RESIL__SHM_KIND_KEYED_RATE /* h3/kshm2 */
#define KIND_KEYED_BULK RESIL__SHM_KIND_KEYED_BULK /* h4/kshm3 */
/* A keyed family's entry, of any kind. */
#define KIND_IS_KEYED(k)                                                      \
	((k) == KIND_KEYED || (k) == KIND_KEYED_RATE || (k) == KIND_KEYED_BULK)
#define WAIT_ROUNDS 200000u /* bounded waits for another process */

typedef struct shm_head {
	char magic[8];
	uint32_t layout;
	uint32_t ready; /* 1 once the creator has initialised it */
	uint64_t fingerprint;
	uint64_t bytes;
	uint32_t max_entries;
	uint32_t nentries;
	uint64_t lock; /* entry table: holder's slot + 1; 0 free */
	uint64_t next; /* first free data offset */
	uint64_t pad[2];
} shm_head;

/* An entry. The layout fields are the breaker's as named; a rate limiter
 * keeps rate in window_size, period_ns in bucket_ns and burst in
 * permitted_probes; a bulkhead max_concurrent in window_size and its
 * adaptive flag in window_type; a keyed family its breakers' layout and
 * its table's slots in keys. */
typedef struct shm_entry {
	char name[NAME_MAX_ENTRY + 1];
	uint32_t kind;
	uint32_t ready;
	uint32_t window_type;
	uint32_t window_size;
	uint64_t bucket_ns;
	uint32_t permitted_probes;
	uint32_t keys; /* a keyed family's slots; 0 for the others */
	uint64_t offset;
	uint64_t bytes;
	uint64_t pad[1];
} shm_entry;

struct resil_shm {
	resil_allocator alloc;
	void *base;
	size_t bytes;
	shm_head *head;
	resil__proc *procs;
	shm_entry *entries;
	unsigned slot;
	char name[NAME_MAX_REGION + 1]; /* the region's, for messages */
};

/* What a process built differently would disagree on. */
static uint64_t
fingerprint(void)
{
	resil_breaker_config ref;
	uint64_t fp;

	resil_breaker_config_init(&ref);
	fp = (uint64_t)sizeof(shm_head) | (uint64_t)sizeof(shm_entry) << 12 |
	    (uint64_t)sizeof(resil__proc) << 24 |
	    (uint64_t)resil__breaker_shared_size(&ref) << 32;
	/* The limiters' layouts, mixed in (FNV-1a style). */
	fp = (fp ^ resil__ratelimit_shared_size()) * UINT64_C(0x100000001b3);
	fp = (fp ^ resil__bulkhead_shared_size()) * UINT64_C(0x100000001b3);
	return fp;
}

static size_t
procs_offset(void)
{
	return sizeof(shm_head);
}

static size_t
entries_offset(void)
{
	return procs_offset() + RESIL__PROCS * sizeof(resil__proc);
}

static size_t
data_offset(uint32_t max_entries)
{
	return (entries_offset() + (size_t)max_entries * sizeof(shm_entry) +
	           RESIL__CACHELINE - 1) &
	    ~(size_t)(RESIL__CACHELINE - 1);
}

static bool
name_ok(const char *name, size_t max)
{
	size_t i, n;

	if (name == NULL)
		return false;
	n = strlen(name);
	if (n == 0 || n > max)
		return false;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		        c == '-'))
			return false;
	}
	return true;
}

static void
table_lock(resil_shm *shm)
{
	uint64_t mine = shm->slot + 1, cur;
	unsigned rounds = 0;

	for (;;) {
		cur = resil__load64(&shm->head->lock);
		if (cur == 0 && resil__cas64(&shm->head->lock, 0, mine))
			return;
		if (++rounds % 1024 == 0) {
			sched_yield();
			if (cur != 0 &&
			    !resil__proc_alive(
			        shm->procs, (unsigned)cur - 1) &&
			    resil__cas64(&shm->head->lock, cur, mine))
				return; /* its holder died */
		} else {
			resil__stall();
		}
	}
}

static void
table_unlock(resil_shm *shm)
{
	resil__store64(&shm->head->lock, 0);
}

static resil_err
sys_fail(resil_diag *diag, const char *what, const char *name)
{
	return resil__diagf(diag, RESIL_E_INVAL, "shm %s: %s: %s", name, what,
	    strerror(errno));
}

static const char *
kind_name(uint32_t kind)
{
	switch (kind) {
	case KIND_BREAKER:
		return "breaker";
	case KIND_RATELIMIT:
		return "rate limiter";
	case KIND_BULKHEAD:
		return "bulkhead";
	case KIND_KEYED:
		return "keyed breaker family";
	case KIND_KEYED_RATE:
		return "keyed rate limiter family";
	case KIND_KEYED_BULK:
		return "keyed bulkhead family";
	}
	return "unknown entry";
}

/*
 * Validation of a region another process made (or scribbled on): every
 * field a process relies on is checked when it attaches, and the entry
 * table again under the table lock on every lookup, so that garbage is
 * refused with what is wrong instead of being used. Each kind of
 * corruption has its own message ("corrupt region: ...").
 */
static resil_err
corrupt(resil_diag *diag, const char *name, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return resil__diagf(diag, RESIL_E_INVAL,
	    "shm %s: corrupt region: %s (resil_shm_unlink it)", name, what);
}

static resil_err
check_head(const resil_shm *shm, const char *name, resil_diag *diag)
{
	const shm_head *h = shm->head;
	uint64_t lock;
	unsigned i;

	if (memcmp(h->magic, SHM_MAGIC, 8) != 0)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm %s: not a resil region (its magic is not \"%s\"): "
		    "refusing to attach",
		    name, SHM_MAGIC);
	if (h->layout != RESIL_SHM_LAYOUT)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm %s: region of layout %u, this process uses layout "
		    "%u: refusing to attach",
		    name, (unsigned)h->layout, (unsigned)RESIL_SHM_LAYOUT);
	if (h->fingerprint != fingerprint())
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm %s: region of layout %u made by another build "
		    "(struct fingerprint %llx, this process's %llx): "
		    "refusing to attach",
		    name, (unsigned)h->layout,
		    (unsigned long long)h->fingerprint,
		    (unsigned long long)fingerprint());
	if (h->bytes != shm->bytes)
		return corrupt(diag, name,
		    "its header says %llu bytes, the object is %zu: %s",
		    (unsigned long long)h->bytes, shm->bytes,
		    h->bytes > shm->bytes ? "truncated" : "resized");
	if (h->max_entries < 1 || h->max_entries > 4096 ||
	    data_offset(h->max_entries) > shm->bytes)
		return corrupt(diag, name,
		    "max_entries %u is out of range 1..4096 or does not fit "
		    "in %zu bytes",
		    (unsigned)h->max_entries, shm->bytes);
	if (__atomic_load_n(&h->nentries, __ATOMIC_ACQUIRE) > h->max_entries)
		return corrupt(diag, name, "%u entries in a table of %u",
		    (unsigned)h->nentries, (unsigned)h->max_entries);
	if (h->next < data_offset(h->max_entries) || h->next > shm->bytes ||
	    h->next % RESIL__CACHELINE != 0)
		return corrupt(diag, name,
		    "the next free offset %llu is outside the data area "
		    "%zu..%zu or not 64-byte aligned",
		    (unsigned long long)h->next, data_offset(h->max_entries),
		    shm->bytes);
	lock = resil__load64(&h->lock);
	if (lock > RESIL__PROCS)
		return corrupt(diag, name,
		    "the entry-table lock holds %llu (0..%u: a process slot "
		    "+ 1)",
		    (unsigned long long)lock, (unsigned)RESIL__PROCS);
	for (i = 0; i < RESIL__PROCS; i++) {
		uint64_t pid = resil__load64(&shm->procs[i].pid);

		if (pid > RESIL__PROC_PID_MASK)
			return corrupt(diag, name,
			    "process slot %u holds pid %llu", i,
			    (unsigned long long)pid);
	}
	return RESIL_OK;
}

/* The breaker configuration an entry's layout fields describe. */
static void
entry_breaker_cfg(const shm_entry *e, resil_breaker_config *cfg)
{
	resil_breaker_config_init(cfg);
	cfg->window_type = (resil_breaker_window_type)e->window_type;
	cfg->window_size = e->window_size;
	cfg->bucket_ns = e->bucket_ns;
	cfg->permitted_probes = e->permitted_probes;
}

/* A shared breaker's state word: a state, and while TRANSIT is set an
 * owner that is a process slot, and the state it left (all of
 * resil__shared_word_corrupt()). */
static resil_err
check_word(uint64_t w, const char *region, const char *name, resil_diag *diag)
{
	uint64_t owner = (w & W_PROBE_MASK) >> W_PROBE_SHIFT & 0x7f;

	if (w_state(w) > RESIL_BREAKER_METRICS_ONLY)
		return corrupt(diag, region,
		    "breaker %s: its state word %#llx holds no state (%u)",
		    name, (unsigned long long)w, (unsigned)w_state(w));
	if ((w & W_TRANSIT) != 0 && (owner == 0 || owner > RESIL__PROCS))
		return corrupt(diag, region,
		    "breaker %s: its state word %#llx names transition owner "
		    "%llu (1..%u)",
		    name, (unsigned long long)w, (unsigned long long)owner,
		    (unsigned)RESIL__PROCS);
	/* What is left of resil__shared_word_corrupt(): the state the
	 * transition left. */
	if (resil__shared_word_corrupt(w))
		return corrupt(diag, region,
		    "breaker %s: its state word %#llx names a transition from "
		    "no state (%u)",
		    name, (unsigned long long)w, (unsigned)((w >> 11) & 7));
	return RESIL_OK;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two of the n entries (their names checked) share a name: sorted,
 * so n log n (a region holds up to 4096). Skipped when the list cannot
 * be allocated. */
static resil_err
check_names(
    const resil_shm *shm, const char *region, uint32_t n, resil_diag *diag)
{
	const char **names;
	resil_err err = RESIL_OK;
	uint32_t k;

	if (n < 2)
		return RESIL_OK;
	names = resil__alloc(&shm->alloc, n * sizeof(*names));
	if (names == NULL)
		return RESIL_OK;
	for (k = 0; k < n; k++)
		names[k] = shm->entries[k].name;
	qsort(names, n, sizeof(*names), name_cmp);
	for (k = 1; k < n && err == RESIL_OK; k++)
		if (strcmp(names[k - 1], names[k]) == 0) {
			size_t a = (size_t)((const shm_entry *)(const void *)
			                        names[k - 1] -
			    shm->entries);
			size_t b = (size_t)((const shm_entry *)(const void *)
			                        names[k] -
			    shm->entries);

			err = corrupt(diag, region,
			    "entries %zu and %zu are both called %s",
			    a < b ? a : b, a < b ? b : a, names[k]);
		}
	resil__free(&shm->alloc, names, n * sizeof(*names));
	return err;
}

/* The entries: each committed one ready, well named, of a known kind,
 * with valid layout fields, its kind's size, right after the one before
 * (the data area is a bump allocator), and inside it; a breaker's state
 * word a state. all: also refuse duplicate names (quadratic: on open
 * only). */
static resil_err
check_entries(
    const resil_shm *shm, const char *region, bool all, resil_diag *diag)
{
	const shm_head *h = shm->head;
	uint32_t k, n = __atomic_load_n(&h->nentries, __ATOMIC_ACQUIRE);
	uint64_t end = data_offset(h->max_entries);

	if (n > h->max_entries)
		return corrupt(diag, region, "%u entries in a table of %u",
		    (unsigned)n, (unsigned)h->max_entries);
	for (k = 0; k < n; k++) {
		const shm_entry *e = &shm->entries[k];
		const char *nm;
		resil_breaker_config bc;
		resil_diag d;
		size_t want = 0;

		if (memchr(e->name, '\0', sizeof(e->name)) == NULL ||
		    !name_ok(e->name, NAME_MAX_ENTRY))
			return corrupt(diag, region,
			    "entry %u has no valid name", (unsigned)k);
		nm = e->name;
		if (e->ready != 1)
			return corrupt(diag, region,
			    "entry %u (%s) is counted but its ready flag "
			    "holds "
			    "%u",
			    (unsigned)k, nm, (unsigned)e->ready);
		switch (e->kind) {
		case KIND_BREAKER:
			entry_breaker_cfg(e, &bc);
			if (resil_breaker_config_validate(&bc, &d) != RESIL_OK)
				return corrupt(diag, region,
				    "entry %u (%s): a breaker's layout fields "
				    "are invalid: %s",
				    (unsigned)k, nm, d.msg);
			want = resil__breaker_shared_size(&bc);
			break;
		case KIND_RATELIMIT:
			want = resil__ratelimit_shared_size();
			break;
		case KIND_BULKHEAD:
			want = resil__bulkhead_shared_size();
			break;
		case KIND_KEYED:
			entry_breaker_cfg(e, &bc);
			if (resil_breaker_config_validate(&bc, &d) !=
			        RESIL_OK ||
			    e->keys < 1 || e->keys > RESIL__KSHM_MAX_KEYS)
				return corrupt(diag, region,
				    "entry %u (%s): a keyed family's layout "
				    "fields are invalid (%u slots)",
				    (unsigned)k, nm, (unsigned)e->keys);
			want = resil__kshm_bytes(&bc, e->keys);
			break;
		case KIND_KEYED_RATE:
			if (e->keys < 1 || e->keys > RESIL__KSHM_MAX_KEYS)
				return corrupt(diag, region,
				    "entry %u (%s): a keyed family's layout "
				    "fields are invalid (%u slots)",
				    (unsigned)k, nm, (unsigned)e->keys);
			want = resil__kshm_rate_bytes(e->keys);
			break;
		case KIND_KEYED_BULK:
			if (e->keys < 1 || e->keys > RESIL__KSHM_MAX_KEYS)
				return corrupt(diag, region,
				    "entry %u (%s): a keyed family's layout "
				    "fields are invalid (%u slots)",
				    (unsigned)k, nm, (unsigned)e->keys);
			want = resil__kshm_bulk_bytes(e->keys);
			break;
		default:
			return corrupt(diag, region,
			    "entry %u (%s) is of kind %u (1..6)", (unsigned)k,
			    nm, (unsigned)e->kind);
		}
		if (e->bytes != want)
			return corrupt(diag, region,
			    "entry %u (%s) holds %llu bytes, a %s of its "
			    "layout "
			    "needs %zu",
			    (unsigned)k, nm, (unsigned long long)e->bytes,
			    kind_name(e->kind), want);
		if (e->offset != end)
			return corrupt(diag, region,
			    "entry %u (%s) starts at offset %llu, expected "
			    "%llu (where the one before ends)",
			    (unsigned)k, nm, (unsigned long long)e->offset,
			    (unsigned long long)end);
		end += e->bytes;
		if (end > h->next || end > shm->bytes)
			return corrupt(diag, region,
			    "entry %u (%s) ends at offset %llu, past the data "
			    "in use (%llu)",
			    (unsigned)k, nm, (unsigned long long)end,
			    (unsigned long long)h->next);
		if (e->kind == KIND_BREAKER) {
			resil_err err = check_word(
			    resil__load64(
			        &((const struct bstate *)(const void
			                  *)((const char *)shm->base +
			              e->offset))
			             ->word),
			    region, nm, diag);

			if (err != RESIL_OK)
				return err;
		}
	}
	return all ? check_names(shm, region, n, diag) : RESIL_OK;
}

/* Map the region of fd; create: initialise it (fd is new and empty). */
static resil_err
map_region(resil_shm *shm, int fd, bool create, const resil_shm_config *c,
    const char *name, resil_diag *diag)
{
	struct stat sb;
	unsigned rounds;
	size_t bytes;
	resil_err err;
	void *base;

	if (create) {
		bytes = c->region_bytes;
		if (ftruncate(fd, (off_t)bytes) != 0)
			return sys_fail(diag, "ftruncate", name);
	} else {
		/* The creator may not have sized it yet. */
		for (rounds = 0;; rounds++) {
			if (fstat(fd, &sb) != 0)
				return sys_fail(diag, "fstat", name);
			if (sb.st_size > 0)
				break; /* the creator sizes it in one call */
			if (rounds >= WAIT_ROUNDS)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "shm %s: the region was never sized: its "
				    "creator may have died (resil_shm_unlink "
				    "it)",
				    name);
			sched_yield();
		}
		bytes = (size_t)sb.st_size;
	}
	base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return sys_fail(diag, "mmap", name);
	shm->base = base;
	shm->bytes = bytes;
	shm->head = base;
	shm->procs = (resil__proc *)(void *)((char *)base + procs_offset());
	shm->entries = (shm_entry *)(void *)((char *)base + entries_offset());
	if (create) {
		shm_head *h = shm->head;

		memcpy(h->magic, SHM_MAGIC, 8);
		h->layout = RESIL_SHM_LAYOUT;
		h->fingerprint = fingerprint();
		h->bytes = bytes;
		h->max_entries = c->max_entries;
		h->next = data_offset(c->max_entries);
		resil__fence();
		__atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
		return RESIL_OK;
	}
	if (bytes < sizeof(shm_head)) {
		munmap(base, bytes);
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm %s: corrupt region: %zu bytes, smaller than its "
		    "header (%zu): truncated (resil_shm_unlink it)",
		    name, bytes, sizeof(shm_head));
	}
	for (rounds = 0;; rounds++) {
		uint32_t r =
		    __atomic_load_n(&shm->head->ready, __ATOMIC_ACQUIRE);

		if (r == 1)
			break;
		if (r != 0) {
			munmap(base, bytes);
			return resil__diagf(diag, RESIL_E_INVAL,
			    "shm %s: corrupt region: its ready flag holds %u "
			    "(0 or 1) (resil_shm_unlink it)",
			    name, (unsigned)r);
		}
		if (rounds >= WAIT_ROUNDS) {
			munmap(base, bytes);
			return resil__diagf(diag, RESIL_E_INVAL,
			    "shm %s: the region was never initialised: its "
			    "creator may have died (resil_shm_unlink it)",
			    name);
		}
		sched_yield();
	}
	/* The entries are checked once a slot is ours, under the table
	 * lock (claim_slot): a process adding one writes it in steps. */
	err = check_head(shm, name, diag);
	if (err != RESIL_OK) {
		munmap(base, bytes);
		shm->base = NULL;
		return err;
	}
	return RESIL_OK;
}

/* Zero process slot i's announcements in every breaker: a slot taken
 * over from a dead process must not inherit them. */
static void clear_slot_announcements(resil_shm *shm, unsigned i);

/* Whether dead slot i is still named by the region: the entry-table
 * lock, or a shared breaker's transition it was making. The processes
 * waiting for those take them over once they see it dead; a new owner of
 * the slot would look alive to them, and they would wait for ever. */
static bool
slot_busy(unsigned i, void *ctx)
{
	resil_shm *shm = ctx;
	uint32_t k, n;

	if (resil__load64(&shm->head->lock) == (uint64_t)i + 1)
		return true;
	n = __atomic_load_n(&shm->head->nentries, __ATOMIC_ACQUIRE);
	for (k = 0; k < n && k < shm->head->max_entries; k++) {
		const shm_entry *e = &shm->entries[k];
		uint64_t w;

		if (KIND_IS_KEYED(e->kind) && e->ready == 1 && e->offset <= shm->bytes &&
		    shm->bytes - e->offset >= e->bytes &&
		    resil__kshm_slot_busy(
		        (char *)shm->base + e->offset, e->bytes, i))
			return true;
		if (e->kind != KIND_BREAKER || e->ready != 1 ||
		    e->offset > shm->bytes ||
		    shm->bytes - e->offset < sizeof(struct bstate))
			continue;
		w = resil__load64(
		    &((struct bstate *)(void *)((char *)shm->base + e->offset))
		         ->word);
		if ((w & W_TRANSIT) != 0 &&
		    ((w & W_PROBE_MASK) >> W_PROBE_SHIFT & 0x7f) ==
		        (uint64_t)i + 1)
			return true;
	}
	return false;
}

/* Take a process slot (lib/proc.c's claim); one taken over from a dead
 * process is cleared of what it left in the region's breakers. */
static resil_err
claim_slot(resil_shm *shm, const char *name, resil_diag *diag)
{
	resil_err err;
	uint64_t prev;
	unsigned i;

	if (!resil__proc_claim(shm->procs, &i, &prev, slot_busy, shm))
		return resil__diagf(diag, RESIL_E_LIMITED,
		    "shm: all %u process slots are taken by live processes",
		    (unsigned)RESIL__PROCS);
	shm->slot = i;
	/* The entry table is checked under its lock (a process adding an
	 * entry writes it in steps), before anything here trusts it. */
	table_lock(shm);
	err = check_entries(shm, name, true, diag);
	if (err == RESIL_OK && prev != 0)
		clear_slot_announcements(shm, i);
	table_unlock(shm);
	if (err != RESIL_OK)
		resil__proc_release(shm->procs, i);
	return err;
}

resil_err
resil_shm_open(resil_shm **out, const char *name, const resil_shm_config *cfg,
    resil_diag *diag)
{
	resil_shm_config c;
	const resil_allocator *a;
	char path[NAME_MAX_REGION + 8];
	resil_shm *shm;
	resil_err err;
	bool create = true;
	int fd;

	if (out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "shm: out is NULL");
	if (!name_ok(name, NAME_MAX_REGION))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm: region name \"%.40s%s\": 1..%u characters of "
		    "A-Z a-z 0-9 . _ - (no '/')",
		    name != NULL ? name : "(null)",
		    name != NULL && strlen(name) > 40 ? "..." : "",
		    NAME_MAX_REGION);
	resil_shm_config_init(&c);
	if (cfg != NULL) {
		if (cfg->size != sizeof(resil_shm_config))
			return resil__check_size(diag, "shm",
			    "resil_shm_config", cfg->size,
			    sizeof(resil_shm_config));
		c = *cfg;
	}
	if (c.max_entries == 0 || c.max_entries > 4096)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm.max_entries: %u is out of range 1..4096",
		    c.max_entries);
	if (c.region_bytes < data_offset(c.max_entries) + 4096 ||
	    c.region_bytes > ((size_t)1 << 40))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm.region_bytes: %zu is out of range %zu..2^40 for %u "
		    "entries",
		    c.region_bytes, data_offset(c.max_entries) + 4096,
		    c.max_entries);
	a = resil__allocator(c.alloc);
	shm = resil__alloc(a, sizeof(*shm));
	if (shm == NULL)
		return resil__diagf(diag, RESIL_E_NOMEM, "shm: out of memory");
	memset(shm, 0, sizeof(*shm));
	shm->alloc = *a;
	memcpy(shm->name, name, strlen(name) + 1);
	snprintf(path, sizeof(path), "/resil.%s", name);
	fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL, (mode_t)c.mode);
	if (fd < 0 && errno == EEXIST) {
		create = false;
		fd = shm_open(path, O_RDWR, 0);
	}
	if (fd < 0) {
		err = sys_fail(diag, "shm_open", name);
		resil__free(a, shm, sizeof(*shm));
		return err;
	}
	err = map_region(shm, fd, create, &c, name, diag);
	close(fd);
	if (err == RESIL_OK)
		err = claim_slot(shm, name, diag);
	if (err != RESIL_OK) {
		if (shm->base != NULL && err != RESIL_OK)
			munmap(shm->base, shm->bytes);
		resil__free(a, shm, sizeof(*shm));
		return err;
	}
	*out = shm;
	return RESIL_OK;
}

void
resil_shm_close(resil_shm *shm)
{
	resil_allocator a;

	if (shm == NULL)
		return;
	resil__proc_release(shm->procs, shm->slot);
	munmap(shm->base, shm->bytes);
	a = shm->alloc;
	resil__free(&a, shm, sizeof(*shm));
}

resil_err
resil_shm_unlink(const char *name, resil_diag *diag)
{
	char path[NAME_MAX_REGION + 8];

	if (!name_ok(name, NAME_MAX_REGION))
		return resil__diagf(
		    diag, RESIL_E_INVAL, "shm: bad region name");
	snprintf(path, sizeof(path), "/resil.%s", name);
	if (shm_unlink(path) != 0)
		return sys_fail(diag, "shm_unlink", name);
	return RESIL_OK;
}

/* The shared part of entry e's breaker, where the announcements live: the
 * breaker layout puts it at the end of the entry's bytes. */
static void
clear_slot_announcements(resil_shm *shm, unsigned i)
{
	uint32_t k, n = shm->head->nentries;

	for (k = 0; k < n && k < shm->head->max_entries; k++) {
		shm_entry *e = &shm->entries[k];
		uint64_t *ann;
		size_t off;

		if (KIND_IS_KEYED(e->kind) && e->ready == 1)
			resil__kshm_clear_slot(
			    (char *)shm->base + e->offset, e->bytes, i);
		if (e->kind != KIND_BREAKER || e->ready != 1)
			continue;
		/* The breaker's shared part ends its bytes and starts with
		 * one 64-byte announcement line per slot. */
		off = (size_t)e->offset + (size_t)e->bytes -
		    resil__breaker_shared_tail();
		ann = (uint64_t *)(void *)((char *)shm->base + off + 64u * i);
		resil__store64(&ann[0], 0);
		resil__store64(&ann[1], 0);
	}
}

resil_err
resil_shm_breaker(resil_shm *shm, const char *name,
    const resil_breaker_config *cfg, resil_breaker **out, resil_diag *diag)
{
	shm_entry *e = NULL;
	resil_err err;
	uint32_t k, n;
	size_t bytes;
	bool init = false;

	if (shm == NULL || cfg == NULL || out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "shm: NULL argument");
	if (!name_ok(name, NAME_MAX_ENTRY))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm: breaker name \"%.40s\": 1..%u characters of A-Z "
		    "a-z 0-9 . _ -",
		    name != NULL ? name : "(null)", NAME_MAX_ENTRY);
	err = resil_breaker_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	table_lock(shm);
	err = check_entries(shm, shm->name, false, diag);
	if (err != RESIL_OK) {
		table_unlock(shm);
		return err;
	}
	n = shm->head->nentries;
	for (k = 0; k < n && k < shm->head->max_entries; k++)
		if (strcmp(shm->entries[k].name, name) == 0) {
			e = &shm->entries[k];
			break;
		}
	if (e != NULL && e->kind != KIND_BREAKER) {
		table_unlock(shm);
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm: %s is a %s, not a breaker", name,
		    kind_name(e->kind));
	}
	if (e != NULL) {
		if (e->kind != KIND_BREAKER || e->ready != 1 ||
		    e->window_type != (uint32_t)cfg->window_type ||
		    e->window_size != cfg->window_size ||
		    (cfg->window_type == RESIL_WINDOW_TIME &&
		        e->bucket_ns != cfg->bucket_ns) ||
		    e->permitted_probes != cfg->permitted_probes) {
			err = resil__diagf(diag, RESIL_E_INVAL,
			    "shm: breaker %s has window %s of %u, %u probes; "
			    "asked for %s of %u, %u probes",
			    name,
			    e->window_type == RESIL_WINDOW_TIME ? "TIME"
			                                        : "COUNT",
			    e->window_size, e->permitted_probes,
			    cfg->window_type == RESIL_WINDOW_TIME ? "TIME"
			                                          : "COUNT",
			    cfg->window_size, cfg->permitted_probes);
			table_unlock(shm);
			return err;
		}
	} else {
		bytes = resil__breaker_shared_size(cfg); /* 64-byte multiple */
		if (n >= shm->head->max_entries ||
		    shm->head->next + bytes > shm->bytes) {
			table_unlock(shm);
			return resil__diagf(diag, RESIL_E_NOMEM,
			    "shm: no room for breaker %s (%u of %u entries, "
			    "%zu bytes needed, %llu free)",
			    name, n, shm->head->max_entries, bytes,
			    (unsigned long long)(shm->bytes -
			        shm->head->next));
		}
		e = &shm->entries[n];
		memset(e, 0, sizeof(*e));
		memcpy(e->name, name, strlen(name) + 1);
		e->kind = KIND_BREAKER;
		e->window_type = (uint32_t)cfg->window_type;
		e->window_size = cfg->window_size;
		e->bucket_ns = cfg->bucket_ns;
		e->permitted_probes = cfg->permitted_probes;
		e->offset = shm->head->next;
		e->bytes = bytes;
		memset((char *)shm->base + e->offset, 0, bytes);
		init = true;
	}
	err = resil__breaker_new_shared(out, cfg,
	    (char *)shm->base + e->offset, init, shm->procs, shm->slot, diag);
	if (err == RESIL_OK && init) {
		e->ready = 1;
		shm->head->next += e->bytes;
		shm->head->nentries = n + 1;
	}
	table_unlock(shm);
	return err;
}

/* The wanted layout of a limiter entry. */
typedef struct want {
	uint32_t kind, a, b, d, keys;
	uint64_t c;
	size_t bytes;
} want;

/*
 * Under the table lock: find entry name of kind w->kind with w's layout,
 * or reserve a new one (zeroed memory, *init set). The caller finishes a
 * new one with commit_entry() or drops it by not committing.
 */
static resil_err
entry_get(resil_shm *shm, const char *name, const want *w, shm_entry **out,
    bool *init, resil_diag *diag)
{
	uint32_t k, n = shm->head->nentries;
	shm_entry *e;

	*init = false;
	for (k = 0; k < n && k < shm->head->max_entries; k++) {
		e = &shm->entries[k];
		if (strcmp(e->name, name) != 0)
			continue;
		if (e->kind != w->kind)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "shm: %s is a %s, not a %s", name,
			    kind_name(e->kind), kind_name(w->kind));
		if (e->ready != 1 || e->window_type != w->a ||
		    e->window_size != w->b || e->bucket_ns != w->c ||
		    e->permitted_probes != w->d || e->keys != w->keys ||
		    e->bytes != w->bytes) {
			if (w->kind == KIND_KEYED_RATE ||
			    w->kind == KIND_KEYED_BULK)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "shm: %s %s has %u keys; asked for %u keys",
				    kind_name(w->kind), name, e->keys, w->keys);
			if (w->kind == KIND_KEYED)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "shm: keyed family %s has %u keys, window "
				    "%s of %u, %u probes; asked for %u keys, "
				    "window %s of %u, %u probes",
				    name, e->keys,
				    e->window_type == RESIL_WINDOW_TIME
				        ? "TIME"
				        : "COUNT",
				    e->window_size, e->permitted_probes,
				    w->keys,
				    w->a == RESIL_WINDOW_TIME ? "TIME"
				                              : "COUNT",
				    w->b, w->d);
			if (w->kind == KIND_RATELIMIT)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "shm: rate limiter %s has rate %u per "
				    "%llu ns, burst %u; asked for %u per "
				    "%llu ns, burst %u",
				    name, e->window_size,
				    (unsigned long long)e->bucket_ns,
				    e->permitted_probes, w->b,
				    (unsigned long long)w->c, w->d);
			return resil__diagf(diag, RESIL_E_INVAL,
			    "shm: bulkhead %s has max_concurrent %u%s; asked "
			    "for %u%s",
			    name, e->window_size,
			    e->window_type ? " (adaptive)" : "", w->b,
			    w->a ? " (adaptive)" : "");
		}
		*out = e;
		return RESIL_OK;
	}
	if (n >= shm->head->max_entries ||
	    shm->head->next + w->bytes > shm->bytes)
		return resil__diagf(diag, RESIL_E_NOMEM,
		    "shm: no room for %s %s (%u of %u entries, %zu bytes "
		    "needed, %llu free)",
		    kind_name(w->kind), name, n, shm->head->max_entries,
		    w->bytes,
		    (unsigned long long)(shm->bytes - shm->head->next));
	e = &shm->entries[n];
	memset(e, 0, sizeof(*e));
	memcpy(e->name, name, strlen(name) + 1);
	e->kind = w->kind;
	e->window_type = w->a;
	e->window_size = w->b;
	e->bucket_ns = w->c;
	e->permitted_probes = w->d;
	e->keys = w->keys;
	e->offset = shm->head->next;
	e->bytes = w->bytes;
	memset((char *)shm->base + e->offset, 0, w->bytes);
	*init = true;
	*out = e;
	return RESIL_OK;
}

static void
commit_entry(resil_shm *shm, shm_entry *e)
{
	e->ready = 1;
	shm->head->next += e->bytes;
	shm->head->nentries++;
}

static resil_err
entry_name_check(resil_shm *shm, const char *name, const void *cfg,
    const void *out, const char *what, resil_diag *diag)
{
	if (shm == NULL || cfg == NULL || out == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "shm: NULL argument");
	if (!name_ok(name, NAME_MAX_ENTRY))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "shm: %s name \"%.40s\": 1..%u characters of A-Z a-z "
		    "0-9 . _ - (no '/')",
		    what, name != NULL ? name : "(null)", NAME_MAX_ENTRY);
	return RESIL_OK;
}

resil_err
resil_shm_ratelimit(resil_shm *shm, const char *name,
    const resil_ratelimit_config *cfg, resil_ratelimit **out, resil_diag *diag)
{
	shm_entry *e = NULL;
	resil_err err;
	bool init = false;
	want w;

	err = entry_name_check(shm, name, cfg, out, "rate limiter", diag);
	if (err != RESIL_OK)
		return err;
	err = resil_ratelimit_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	memset(&w, 0, sizeof(w));
	w.kind = KIND_RATELIMIT;
	w.b = cfg->rate;
	w.c = cfg->period_ns;
	w.d = cfg->burst;
	w.bytes = resil__ratelimit_shared_size();
	table_lock(shm);
	err = check_entries(shm, shm->name, false, diag);
	if (err == RESIL_OK)
		err = entry_get(shm, name, &w, &e, &init, diag);
	if (err == RESIL_OK && e != NULL)
		err = resil__ratelimit_new_shared(
		    out, cfg, (char *)shm->base + e->offset, init, diag);
	if (err == RESIL_OK && init && e != NULL)
		commit_entry(shm, e);
	table_unlock(shm);
	return err;
}

resil_err
resil_shm_bulkhead(resil_shm *shm, const char *name,
    const resil_bulkhead_config *cfg, resil_bulkhead **out, resil_diag *diag)
{
	shm_entry *e = NULL;
	resil_err err;
	bool init = false;
	want w;

	err = entry_name_check(shm, name, cfg, out, "bulkhead", diag);
	if (err != RESIL_OK)
		return err;
	err = resil_bulkhead_config_validate(cfg, diag);
	if (err != RESIL_OK)
		return err;
	memset(&w, 0, sizeof(w));
	w.kind = KIND_BULKHEAD;
	w.a = cfg->adaptive != 0;
	w.b = cfg->max_concurrent;
	w.bytes = resil__bulkhead_shared_size();
	table_lock(shm);
	err = check_entries(shm, shm->name, false, diag);
	if (err == RESIL_OK)
		err = entry_get(shm, name, &w, &e, &init, diag);
	if (err == RESIL_OK && e != NULL)
		err = resil__bulkhead_new_shared(out, cfg,
		    (char *)shm->base + e->offset, init, shm->procs, shm->slot,
		    diag);
	if (err == RESIL_OK && init && e != NULL)
		commit_entry(shm, e);
	table_unlock(shm);
	return err;
}

uint32_t
resil_shm_reap(resil_shm *shm)
{
	uint32_t k, n, got = 0;

	if (shm == NULL)
		return 0;
	table_lock(shm);
	if (check_entries(shm, shm->name, false, NULL) != RESIL_OK) {
		table_unlock(shm);
		return 0; /* a corrupt table: nothing is touched */
	}
	n = shm->head->nentries;
	for (k = 0; k < n && k < shm->head->max_entries; k++) {
		shm_entry *e = &shm->entries[k];

		if (e->kind == KIND_BULKHEAD && e->ready == 1)
			got += resil__bulkhead_shared_reap(
			    (char *)shm->base + e->offset, shm->procs,
			    shm->slot);
		if (e->kind == KIND_KEYED_BULK && e->ready == 1)
			got += resil__kshm_reap((char *)shm->base + e->offset,
			    e->bytes, shm->procs, shm->slot);
	}
	table_unlock(shm);
	return got;
}

/* ---- for lib/keyed_shm.c (shm_internal.h) ---- */

const resil__proc *
resil__shm_procs(const resil_shm *shm)
{
	return shm->procs;
}

unsigned
resil__shm_slot(const resil_shm *shm)
{
	return shm->slot;
}

const resil_allocator *
resil__shm_alloc(const resil_shm *shm)
{
	return &shm->alloc;
}

const char *
resil__shm_name(const resil_shm *shm)
{
	return shm->name;
}

resil_err
resil__shm_keyed_table(resil_shm *shm, const char *name,
    const resil__shm_keyed_want *kw, void **mem, resil_diag *diag)
{
	const resil_breaker_config *bc = kw->breaker;
	shm_entry *e = NULL;
	resil_err err;
	bool init = false;
	want w;

	err = entry_name_check(shm, name, bc, mem, "keyed family", diag);
	if (err != RESIL_OK)
		return err;
	memset(&w, 0, sizeof(w));
	w.kind = KIND_KEYED;
	w.keys = kw->max_keys;
	if (kw->ratelimit) { /* h3/kshm2: no layout fields but the keys */
		w.kind = KIND_KEYED_RATE;
		w.bytes = resil__kshm_rate_bytes(kw->max_keys);
	} else if (kw->bulkhead) { /* h4/kshm3: nor a bulkhead family */
		w.kind = KIND_KEYED_BULK;
		w.bytes = resil__kshm_bulk_bytes(kw->max_keys);
	} else {
		w.a = (uint32_t)bc->window_type;
		w.b = bc->window_size;
		w.c = bc->bucket_ns;
		w.d = bc->permitted_probes;
		w.bytes = resil__kshm_bytes(bc, kw->max_keys);
	}
	table_lock(shm);
	err = check_entries(shm, shm->name, false, diag);
	if (err == RESIL_OK && kw->find_only) {
		uint32_t k, n = shm->head->nentries;

		err = resil__diagf(diag, RESIL_E_NOTFOUND,
		    "shm: no keyed family %s in region %s", name, shm->name);
		for (k = 0; k < n && k < shm->head->max_entries; k++) {
			e = &shm->entries[k];
			if (strcmp(e->name, name) != 0)
				continue;
			if (!KIND_IS_KEYED(e->kind))
				err = resil__diagf(diag, RESIL_E_INVAL,
				    "shm: %s is a %s, not a keyed family",
				    name, kind_name(e->kind));
			else {
				*mem = (char *)shm->base + e->offset;
				err = RESIL_OK;
			}
			break;
		}
		table_unlock(shm);
		return err;
	}
	if (err == RESIL_OK)
		err = entry_get(shm, name, &w, &e, &init, diag);
	if (err == RESIL_OK && e != NULL) {
		*mem = (char *)shm->base + e->offset;
		if (init) {
			kw->init(*mem, kw->arg);
			commit_entry(shm, e);
		}
	}
	table_unlock(shm);
	return err;
}

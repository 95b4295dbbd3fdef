/*
 * resil breaker: snapshots of a breaker's state, and their restore.
 */
#include <resil/breaker.h>

#include <string.h>

#include "atomic.h"
#include "breaker_internal.h"
#include "internal.h"

/* ---- snapshot and restore ---- */

/*
 * The format (docs/breaker.md), every integer little-endian:
 *   0  magic "RESILBRK"        8 bytes
 *   8  version                 u32 (RESIL_BREAKER_SNAPSHOT_VERSION)
 *  12  total length            u32, the checksum included
 *  16  window type, size       u32, u32
 *  24  bucket_ns               u64 (0 for a count window)
 *  32  state, flags            u32, u32 (flag 1: OPEN shows its probes)
 *  40  episode                 u64 (informational: restore starts its own)
 *  48  taken_at                u64, the clock reading when it was taken
 *  56  since                   u64, when the state began
 *  64  open wait               u64, the current (possibly grown) wait
 *  72  consecutive failures    u64
 *  80  successes, failures, slow, ignored, rejections, stale: 6 x u64
 * 128  probes reported, failed, slow, entries: 4 x u32
 * 144  entries: COUNT: one byte per outcome, oldest first (bit 0 failed,
 *      bit 1 slow), zero-padded to 8 bytes; TIME: per live bucket
 *      {bucket index, calls, failures, slow}, 4 x u64
 * end  FNV-1a 64 of every byte before it, u64
 */
/* The magic: 8 bytes of a binary format, not a C string. */
static const uint8_t snap_magic[8] = { 'R', 'E', 'S', 'I', 'L', 'B', 'R',
	'K' };
#define SNAP_HEAD 144u

struct restore_data {
	resil_breaker_state state;
	uint32_t flags;
	uint64_t since, wait, consecutive;
	uint64_t totals[6];
	uint32_t preported, pfailed, pslow, entries;
	const uint8_t *body;  /* the entries, validated */
	int64_t bucket_shift; /* added to TIME bucket indexes */
};

static void
put32(uint8_t *p, uint32_t v)
{
	int i;

	for (i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void
put64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint64_t
fnv1a(const uint8_t *p, size_t n)
{
	return resil__fnv1a64(RESIL__FNV0, p, n);
}

static size_t
snap_body_max(const resil_breaker *b)
{
	if (b->slots != NULL)
		return ((size_t)b->cfg.window_size + 7u) & ~(size_t)7u;
	return (size_t)b->cfg.window_size * 32u;
}

size_t
resil_breaker_snapshot_size(const resil_breaker *b)
{
	if (b == NULL)
		return 0;
	return SNAP_HEAD + snap_body_max(b) + 8u;
}

resil_err
resil_breaker_snapshot(resil_breaker *b, void *buf, size_t cap, size_t *len)
{
	struct bstate *st;
	resil_breaker_metrics m;
	uint8_t *out = buf, *e;
	uint64_t w, p, now, idx, head;
	uint32_t entries = 0, i, n;
	size_t total;

	if (b == NULL || buf == NULL || len == NULL)
		return RESIL_E_INVAL;
	if (cap < resil_breaker_snapshot_size(b))
		return RESIL_E_INVAL;
	st = b->st;
	/* A consistent reading: no transition may complete meanwhile (the
	 * episode is read again at the end and the reading retried). */
	for (;;) {
		w = resil__load64(&st->word);
		if (w & W_TRANSIT) {
			if (!resil__breaker_await_transit(b))
				return RESIL_E_MISUSE;
			continue;
		}
		if (w_state(w) > RESIL_BREAKER_METRICS_ONLY)
			return RESIL_E_MISUSE; /* CORRUPT: no state to save */
		memset(out, 0, SNAP_HEAD);
		resil_breaker_get_metrics(b, &m);
		now = now_coarse(b);
		memcpy(out, snap_magic, 8);
		put32(out + 8, RESIL_BREAKER_SNAPSHOT_VERSION);
		put32(out + 16, (uint32_t)b->cfg.window_type);
		put32(out + 20, b->cfg.window_size);
		put64(out + 24, b->slots != NULL ? 0 : b->cfg.bucket_ns);
		put32(out + 32, (uint32_t)w_state(w));
		put32(
		    out + 36, (uint32_t)resil__load64(&st->open_shows_probes));
		put64(out + 40, w_episode(w));
		put64(out + 48, now);
		put64(out + 56, resil__load64(&st->since));
		put64(out + 64, resil__load64(&st->wait));
		put64(out + 72, resil__load64(&st->consecutive));
		put64(out + 80, m.successes);
		put64(out + 88, m.failures);
		put64(out + 96, m.slow_calls);
		put64(out + 104, m.ignored);
		put64(out + 112, m.rejections);
		put64(out + 120, m.stale);
		p = resil__load64(&st->probes);
		put32(out + 128, (uint32_t)P_REPORTED(p));
		put32(out + 132, (uint32_t)P_FAILED(p));
		put32(out + 136, (uint32_t)P_SLOW(p));
		e = out + SNAP_HEAD;
		n = b->cfg.window_size;
		if (b->slots != NULL) {
			head = resil__load64(&st->head);
			entries = (uint32_t)(head < n ? head : n);
			memset(e, 0, snap_body_max(b));
			for (i = 0; i < entries; i++) {
				uint8_t v = resil__load8(
				    &b->slots[(head - entries + i) % n]);

				e[i] = (uint8_t)(((v & SLOT_FAIL) ? 1 : 0) |
				    ((v & SLOT_SLOW) ? 2 : 0));
			}
			total =
			    SNAP_HEAD + (((size_t)entries + 7u) & ~(size_t)7u);
		} else {
			/* One entry per live bucket index, stripes merged. */
			uint64_t k;

			idx = bucket_index(b, now);
			for (k = 0; k < n && k <= idx; k++) {
				uint64_t bi = idx - k, c = 0, f = 0, sl = 0;
				uint32_t s2;

				for (s2 = 0; s2 < NSTRIPES; s2++) {
					bucket *bk =
					    &b->buckets[s2 * b->stride +
					        bi % n];

					if (resil__load64(&bk->epoch) !=
					    bi + 1)
						continue;
					c += resil__load64(&bk->calls);
					f += resil__load64(&bk->failures);
					sl += resil__load64(&bk->slow);
				}
				if (c == 0)
					continue;
				put64(e, bi);
				put64(e + 8, c);
				put64(e + 16, f);
				put64(e + 24, sl);
				e += 32;
				entries++;
			}
			total = SNAP_HEAD + (size_t)entries * 32u;
		}
		if (resil__load64(&st->word) == w)
			break;
	}
	put32(out + 140, entries);
	total += 8;
	put32(out + 12, (uint32_t)total);
	put64(out + total - 8, fnv1a(out, total - 8));
	*len = total;
	return RESIL_OK;
}

static resil_err
snap_refuse(resil_diag *diag, const char *why)
{
	return resil__diagf(diag, RESIL_E_INVAL, "breaker snapshot: %s", why);
}

/* A breaker whose state word holds no state (a damaged shm region) is
 * never left for a restored one. */
static resil_err
restore_corrupt(resil_diag *diag)
{
	return resil__diagf(diag, RESIL_E_MISUSE,
	    "breaker snapshot: the breaker is CORRUPT (its shm region was "
	    "damaged): nothing is restored into it");
}

/* Write the decoded snapshot (ctx, a struct restore_data) into the
 * breaker; called by the owner of the restore's transition, after it
 * quiesced the old episode. */
static void
restore_fill(resil_breaker *b, const void *ctx)
{
	const struct restore_data *rd = ctx;
	struct bstate *st = b->st;
	/* Stripe 0 is never owned (lib/internal.h): a locked add to it from
	 * this thread loses no owner's unlocked count. */
	stripe *s0 = &st->stripes[0];
	uint64_t fails = 0, slows = 0, bads = 0;
	uint32_t i, n = b->cfg.window_size;

	resil__store64(&st->since, rd->since);
	resil__store64(&st->wait, rd->wait);
	resil__store64(&st->open_shows_probes, rd->flags & 1u);
	resil__breaker_window_reset(b);
	resil__store64(&st->consecutive, rd->consecutive);
	/* A HALF_OPEN snapshot starts a fresh probe episode: the permits it
	 * counted belonged to another process. */
	resil__store64(&st->probes,
	    (P_TAG_OF(w_episode(resil__load64(&st->word))) << 45) |
	        (rd->state == RESIL_BREAKER_HALF_OPEN
	                ? 0
	                : ((uint64_t)rd->preported |
	                      (uint64_t)rd->pfailed << 15 |
	                      (uint64_t)rd->pslow << 30)));
	resil__faa64(&s0->successes, rd->totals[0]);
	resil__faa64(&s0->failures, rd->totals[1]);
	resil__faa64(&s0->slow, rd->totals[2]);
	resil__faa64(&s0->ignored, rd->totals[3]);
	resil__faa64(&s0->rejections, rd->totals[4]);
	resil__faa64(&s0->stale, rd->totals[5]);
	if (b->slots != NULL) {
		for (i = 0; i < rd->entries; i++) {
			uint8_t v = rd->body[i];

			resil__store8(&b->slots[i],
			    (uint8_t)(SLOT_FILLED | ((v & 1) ? SLOT_FAIL : 0) |
			        ((v & 2) ? SLOT_SLOW : 0)));
			fails += (v & 1) != 0;
			slows += (v & 2) != 0;
			bads += (v & 3) != 0;
		}
		resil__store64(&st->head, rd->entries);
		resil__store64(&st->win_failures, fails);
		resil__store64(&st->win_slow, slows);
		/* The slots past the entries are empty: not successes. */
		resil__store64(&st->win_bad, bads + (n - rd->entries));
		return;
	}
	for (i = 0; i < rd->entries; i++) {
		const uint8_t *e = rd->body + (size_t)i * 32u;
		uint64_t bi = (uint64_t)((int64_t)get64(e) + rd->bucket_shift);
		bucket *bk = &b->buckets[bi % n];

		resil__store64(&bk->epoch, bi + 1);
		resil__store64(&bk->calls, get64(e + 8));
		resil__store64(&bk->failures, get64(e + 16));
		resil__store64(&bk->slow, get64(e + 24));
	}
}

resil_err
resil_breaker_restore(
    resil_breaker *b, const void *buf, size_t len, resil_diag *diag)
{
	const uint8_t *in = buf;
	struct restore_data rd;
	uint32_t version, total, wtype, wsize, i, n;
	uint64_t bucket_ns, taken, now, w, age;
	size_t body;

	if (b == NULL || buf == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "breaker snapshot: NULL argument");
	if (len < SNAP_HEAD + 8u || memcmp(in, snap_magic, 8) != 0)
		return snap_refuse(diag, "not a breaker snapshot");
	version = get32(in + 8);
	if (version != RESIL_BREAKER_SNAPSHOT_VERSION)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker snapshot: version %u, this library reads %u",
		    version, (unsigned)RESIL_BREAKER_SNAPSHOT_VERSION);
	total = get32(in + 12);
	if (total != len || total < SNAP_HEAD + 8u)
		return snap_refuse(diag, "truncated or wrong length");
	if (get64(in + total - 8) != fnv1a(in, total - 8))
		return snap_refuse(diag, "checksum mismatch (corrupted)");
	wtype = get32(in + 16);
	wsize = get32(in + 20);
	bucket_ns = get64(in + 24);
	if (wtype != (uint32_t)b->cfg.window_type ||
	    wsize != b->cfg.window_size ||
	    (b->slots == NULL && bucket_ns != b->cfg.bucket_ns))
		return resil__diagf(diag, RESIL_E_INVAL,
		    "breaker snapshot: window %s of %u%s does not match this "
		    "breaker's %s of %u",
		    wtype == RESIL_WINDOW_TIME ? "TIME" : "COUNT", wsize,
		    wtype == RESIL_WINDOW_TIME ? " buckets" : "",
		    b->slots == NULL ? "TIME" : "COUNT", b->cfg.window_size);
	memset(&rd, 0, sizeof(rd));
	rd.state = (resil_breaker_state)get32(in + 32);
	if ((unsigned)rd.state > (unsigned)RESIL_BREAKER_METRICS_ONLY)
		return snap_refuse(diag, "unknown state");
	rd.flags = get32(in + 36);
	taken = get64(in + 48);
	rd.since = get64(in + 56);
	rd.wait = get64(in + 64);
	rd.consecutive = get64(in + 72);
	for (i = 0; i < 6; i++)
		rd.totals[i] = get64(in + 80 + 8 * i);
	rd.preported = get32(in + 128);
	rd.pfailed = get32(in + 132);
	rd.pslow = get32(in + 136);
	rd.entries = get32(in + 140);
	n = b->cfg.window_size;
	body = total - SNAP_HEAD - 8u;
	if (rd.since > taken)
		rd.since = taken; /* a clock that went back before it */
	if (rd.preported > MAX_PROBES || rd.pfailed > rd.preported ||
	    rd.pslow > rd.preported || rd.entries > n ||
	    body !=
	        (b->slots != NULL ? (((size_t)rd.entries + 7u) & ~(size_t)7u)
	                          : (size_t)rd.entries * 32u))
		return snap_refuse(diag, "inconsistent fields");
	rd.body = in + SNAP_HEAD;
	now = now_coarse(b);
	/* Readings of another clock domain (a reboot, another host) come
	 * before the snapshot was taken: keep the ages, not the readings. */
	age = taken - rd.since;
	if (now < taken) {
		rd.since = now >= age ? now - age : 0;
		if (b->slots == NULL)
			rd.bucket_shift = (int64_t)(bucket_index(b, now) -
			    bucket_index(b, taken));
	}
	if (b->slots == NULL) {
		for (i = 0; i < rd.entries; i++) {
			const uint8_t *e = rd.body + (size_t)i * 32u;

			if (get64(e + 16) > get64(e + 8) ||
			    get64(e + 24) > get64(e + 8))
				return snap_refuse(
				    diag, "inconsistent bucket");
		}
	}
	for (;;) {
		if (resil_breaker_get_state(b) == RESIL_BREAKER_CORRUPT)
			return restore_corrupt(diag);
		w = resil__load64(&b->st->word);
		if (w & W_TRANSIT) {
			if (!resil__breaker_await_transit(b))
				return RESIL_E_MISUSE;
			continue;
		}
		if (w_state(w) > RESIL_BREAKER_METRICS_ONLY)
			return restore_corrupt(diag); /* never left */
		if (resil__breaker_transition_fill(b, w, rd.state,
		        RESIL_BREAKER_REASON_RESTORED, now, restore_fill, &rd))
			return RESIL_OK;
	}
}

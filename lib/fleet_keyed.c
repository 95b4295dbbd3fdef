/*
 * Issue 41 (h3): keyed fleet limits. One resil_fleet_limit handle, one
 * connection, one GCRA state per key in Redis (the keyed script,
 * lib/fleet_redis.c: the lone limiter's rule with the key's own settings),
 * and, while Redis is away, a local keyed family (include/resil/keyed.h,
 * RESIL_KEYED_RATELIMIT) holding each key's 1/N share. The round trip and
 * the fallback's events are lib/fleet.c's (resil__flimit_locked); this
 * file builds the request and makes the local family.
 */
#define _GNU_SOURCE 1

#include <resil/fleet.h>
#include <resil/keyed.h>

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet_limit.h"
#include "internal.h"

#define KEY_LEN_DEFAULT 256u

/* One override: its key (copied) and its rates, as the script's texts. */
typedef struct kovr {
	uint8_t *key;
	size_t len;
	uint32_t rate, burst;
	uint64_t period_ms;
	char kset[96]; /* "rate=R period_ms=P burst=B" */
	char scale_s[24], ts_s[24], bs_s[24];
} kovr;

struct resil__fkeyed {
	uint32_t max_keys, max_key_len;
	kovr *ov; /* sorted by length, then bytes */
	size_t nov;
	/* The handle's keyed settings (agreed by the members) and a key
	 * without override's own settings. */
	char settings[160];
	char kset[96];
	char key_inst[RESIL__FLIMIT_NAME_MAX + 32];
	char key_members[RESIL__FLIMIT_NAME_MAX + 32];
	char key_agreed[RESIL__FLIMIT_NAME_MAX + 32];
	/* "resil:limit:NAME:k:" then the key's hex and ":gcra" (under mu). */
	char *kbuf;
	size_t kcap, kprefix;
	/* The keyed script's sha (loaded at the first keyed round trip). */
	char sha[41];
	int have_sha;
	/* The local family (under mu): made at the first local decision,
	 * again when N changes. */
	resil_keyed *fam;
	uint64_t fam_n;
};

/* ---- the settings: checks and texts ---- */


static resil_err
orange(resil_diag *diag, size_t i, const char *field, uint64_t v,
    uint64_t lo, uint64_t hi)
{
	return resil__diagf(diag, RESIL_E_INVAL,
	    "fleet_limit.overrides[%zu].%s: %llu is out of range %llu..%llu",
	    i, field, (unsigned long long)v, (unsigned long long)lo,
	    (unsigned long long)hi);
}

/* An override's period in whole ms, rounded up (0: the handle's). */
static uint64_t
ov_period_ms(const resil_keyed_override *o, uint64_t dflt)
{
	if (o->period_ns == 0)
		return dflt;
	return o->period_ns / RESIL_NS_PER_MS +
	    (o->period_ns % RESIL_NS_PER_MS != 0 ? 1u : 0u);
}

/* Whether rate per period_ms with burst fits the script's integers and
 * makes a valid local limiter at N = 1 (NULL), else why. */
static const char *
rates_fit(uint32_t rate, uint64_t period_ms, uint32_t burst)
{
	uint64_t g = resil__gcd64(rate, period_ms * 1000);
	resil_ratelimit_config lc;

	if (g == 0 || rate / g > (UINT64_C(1) << 24) ||
	    period_ms * 1000 / g > (UINT64_C(1) << 50) / burst)
		return "needs rate / gcd(rate, period_us) <= 2^24 and burst * "
		       "period_us / gcd <= 2^50";
	resil_ratelimit_config_init(&lc);
	lc.rate = rate;
	lc.period_ns = period_ms * RESIL_NS_PER_MS;
	lc.burst = burst;
	if (resil_ratelimit_config_validate(&lc, NULL) != RESIL_OK)
		return "is not a valid rate limiter (limit.h)";
	return NULL;
}

resil_err
resil__fkeyed_validate(const resil_fleet_limit_config *cfg, resil_diag *diag)
{
	uint32_t klen = cfg->max_key_len != 0 ? cfg->max_key_len
	                                      : KEY_LEN_DEFAULT;
	size_t i, j;

	if (cfg->max_keys == 0) {
		if (cfg->max_key_len != 0 || cfg->n_overrides != 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "fleet_limit.max_keys: 0 (not keyed) with %s set",
			    cfg->max_key_len != 0 ? "max_key_len"
			                          : "overrides");
		return RESIL_OK;
	}
	if (cfg->max_keys > RESIL_KEYED_MAX_KEYS)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_limit.max_keys: %u is out of range 0..%u",
		    (unsigned)cfg->max_keys, (unsigned)RESIL_KEYED_MAX_KEYS);
	if (cfg->max_key_len > RESIL_KEYED_MAX_KEY_LEN)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_limit.max_key_len: %u is out of range 0..%u",
		    (unsigned)cfg->max_key_len, RESIL_KEYED_MAX_KEY_LEN);
	if (cfg->n_overrides > RESIL_KEYED_MAX_OVERRIDES)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_limit.n_overrides: %zu is more than %u",
		    cfg->n_overrides, RESIL_KEYED_MAX_OVERRIDES);
	if (cfg->n_overrides != 0 && cfg->overrides == NULL)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "fleet_limit.overrides: NULL with n_overrides %zu",
		    cfg->n_overrides);
	for (i = 0; i < cfg->n_overrides; i++) {
		const resil_keyed_override *o = &cfg->overrides[i];
		uint32_t rate = o->rate != 0 ? o->rate : cfg->rate;
		uint32_t burst = o->burst != 0 ? o->burst : cfg->burst;
		uint64_t pms = ov_period_ms(o, cfg->period_ms);
		const char *why;

		if (o->key == NULL || o->key_len == 0 || o->key_len > klen)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "fleet_limit.overrides[%zu].key: %s (1..%u bytes)",
			    i, o->key == NULL ? "NULL" : "bad length",
			    (unsigned)klen);
		if (o->max_concurrent != 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "fleet_limit.overrides[%zu].max_concurrent: a "
			    "rate limiter's override takes rate, period_ns "
			    "and burst only",
			    i);
		if (rate > 1000000000u)
			return orange(diag, i, "rate", rate, 1, 1000000000);
		if (pms > 86400000u)
			return orange(diag, i, "period_ms", pms, 1, 86400000);
		if (burst > 1000000000u)
			return orange(diag, i, "burst", burst, 1, 1000000000);
		if ((why = rates_fit(rate, pms, burst)) != NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "fleet_limit.overrides[%zu]: %u per %llu ms with "
			    "burst %u %s",
			    i, (unsigned)rate, (unsigned long long)pms,
			    (unsigned)burst, why);
		for (j = 0; j < i; j++)
			if (cfg->overrides[j].key_len == o->key_len &&
			    memcmp(cfg->overrides[j].key, o->key,
			        o->key_len) == 0)
				return resil__diagf(diag, RESIL_E_INVAL,
				    "fleet_limit.overrides[%zu].key: repeats "
				    "overrides[%zu]'s",
				    i, j);
	}
	return RESIL_OK;
}

/* The script's texts for rate per period_ms with burst. */
static void
rate_texts(uint32_t rate, uint64_t period_ms, uint32_t burst, char *kset,
    size_t kcap, char *scale_s, char *ts_s, char *bs_s)
{
	uint64_t g = resil__gcd64(rate, period_ms * 1000);

	if (g == 0) /* not reached: rates are checked */
		g = 1;
	snprintf(kset, kcap, "rate=%u period_ms=%llu burst=%u",
	    (unsigned)rate, (unsigned long long)period_ms, (unsigned)burst);
	snprintf(scale_s, 24, "%llu", (unsigned long long)(rate / g));
	snprintf(ts_s, 24, "%llu", (unsigned long long)(period_ms * 1000 / g));
	snprintf(bs_s, 24, "%llu",
	    (unsigned long long)burst * (period_ms * 1000 / g));
}

static int
ov_cmp(const void *a, const void *b)
{
	const kovr *x = a, *y = b;

	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->key, y->key, x->len);
}

/* FNV-1a, 64 bits, over n bytes. */
static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= UINT64_C(1099511628211);
	}
	return h;
}

/* The overrides' digest, in the configuration's order. */
static uint64_t
ov_digest(const resil_fleet_limit_config *cfg)
{
	uint64_t h = UINT64_C(14695981039346656037);
	size_t i;

	for (i = 0; i < cfg->n_overrides; i++) {
		const resil_keyed_override *o = &cfg->overrides[i];
		char t[96];
		int n = snprintf(t, sizeof(t), "%zu %u %llu %u|", o->key_len,
		    (unsigned)o->rate,
		    (unsigned long long)ov_period_ms(o, 0), (unsigned)o->burst);

		h = fnv(h, o->key, o->key_len);
		h = fnv(h, t, (size_t)n);
	}
	return h;
}

void
resil__fkeyed_free(resil_fleet_limit *fl)
{
	struct resil__fkeyed *x = fl->kx;
	size_t i;

	if (x == NULL)
		return;
	resil_keyed_free(x->fam);
	for (i = 0; i < x->nov; i++)
		resil__free(&fl->alloc, x->ov[i].key, x->ov[i].len);
	if (x->ov != NULL)
		resil__free(&fl->alloc, x->ov, x->nov * sizeof(*x->ov));
	if (x->kbuf != NULL)
		resil__free(&fl->alloc, x->kbuf, x->kcap);
	resil__free(&fl->alloc, x, sizeof(*x));
	fl->kx = NULL;
}

resil_err
resil__fkeyed_new(resil_fleet_limit *fl, const resil_fleet_limit_config *cfg,
    resil_diag *diag)
{
	struct resil__fkeyed *x;
	size_t i;

	if (cfg->max_keys == 0)
		return RESIL_OK;
	x = resil__calloc(&fl->alloc, sizeof(*x));
	if (x == NULL)
		return resil__diagf(
		    diag, RESIL_E_NOMEM, "fleet_limit: out of memory");
	fl->kx = x;
	x->max_keys = cfg->max_keys;
	x->max_key_len =
	    cfg->max_key_len != 0 ? cfg->max_key_len : KEY_LEN_DEFAULT;
	snprintf(x->settings, sizeof(x->settings),
	    "rate=%u period_ms=%llu burst=%u overrides=%zu/%016llx",
	    (unsigned)cfg->rate, (unsigned long long)cfg->period_ms,
	    (unsigned)cfg->burst, cfg->n_overrides,
	    (unsigned long long)ov_digest(cfg));
	snprintf(x->kset, sizeof(x->kset), "%s", fl->settings);
	snprintf(x->key_inst, sizeof(x->key_inst),
	    "resil:limit:%s:k:instances", cfg->name);
	snprintf(x->key_members, sizeof(x->key_members),
	    "resil:limit:%s:k:members", cfg->name);
	snprintf(x->key_agreed, sizeof(x->key_agreed),
	    "resil:limit:%s:k:settings", cfg->name);
	x->kcap = strlen("resil:limit:") + strlen(cfg->name) + 3 +
	    2 * (size_t)x->max_key_len + 5 + 1;
	x->kbuf = resil__alloc(&fl->alloc, x->kcap);
	if (x->kbuf == NULL)
		goto nomem;
	x->kprefix = (size_t)snprintf(
	    x->kbuf, x->kcap, "resil:limit:%s:k:", cfg->name);
	if (cfg->n_overrides != 0) {
		x->ov = resil__calloc(
		    &fl->alloc, cfg->n_overrides * sizeof(*x->ov));
		if (x->ov == NULL)
			goto nomem;
	}
	for (i = 0; i < cfg->n_overrides; i++) {
		const resil_keyed_override *o = &cfg->overrides[i];
		kovr *v = &x->ov[i];

		v->key = resil__alloc(&fl->alloc, o->key_len);
		if (v->key == NULL)
			goto nomem;
		x->nov = i + 1;
		memcpy(v->key, o->key, o->key_len);
		v->len = o->key_len;
		v->rate = o->rate != 0 ? o->rate : cfg->rate;
		v->burst = o->burst != 0 ? o->burst : cfg->burst;
		v->period_ms = ov_period_ms(o, cfg->period_ms);
		rate_texts(v->rate, v->period_ms, v->burst, v->kset,
		    sizeof(v->kset), v->scale_s, v->ts_s, v->bs_s);
	}
	x->nov = cfg->n_overrides;
	if (x->nov > 1)
		qsort(x->ov, x->nov, sizeof(*x->ov), ov_cmp);
	return RESIL_OK;
nomem:
	if (x->ov != NULL && x->nov < cfg->n_overrides) {
		/* Only the first nov keys were made: free the array as
		 * made (calloc'd for n_overrides). */
		for (i = 0; i < x->nov; i++)
			resil__free(&fl->alloc, x->ov[i].key, x->ov[i].len);
		resil__free(
		    &fl->alloc, x->ov, cfg->n_overrides * sizeof(*x->ov));
		x->ov = NULL;
		x->nov = 0;
	}
	resil__fkeyed_free(fl);
	return resil__diagf(diag, RESIL_E_NOMEM, "fleet_limit: out of memory");
}

static const kovr *
find_override(const struct resil__fkeyed *x, const void *key, size_t len)
{
	kovr probe;

	if (x->nov == 0)
		return NULL;
	memset(&probe, 0, sizeof(probe));
	probe.key = (uint8_t *)(uintptr_t)key;
	probe.len = len;
	return bsearch(&probe, x->ov, x->nov, sizeof(*x->ov), ov_cmp);
}

/* ---- the local family: each key's 1/N share ---- */

static resil_keyed *
local_family(resil_fleet_limit *fl)
{
	struct resil__fkeyed *x = fl->kx;
	uint64_t want =
	    fl->seen > fl->min_instances ? fl->seen : fl->min_instances;
	resil_keyed_override *ov = NULL;
	resil_keyed_config kc;
	uint64_t n;
	size_t i;

	if (x->fam != NULL && x->fam_n == want)
		return x->fam;
	resil_keyed_free(x->fam);
	x->fam = NULL;
	if (x->nov != 0) {
		ov = resil__calloc(&fl->alloc, x->nov * sizeof(*ov));
		if (ov == NULL)
			return NULL;
	}
	/* A share that would not be a valid limiter halves N until it is
	 * (N = 1 was checked with the configuration), as the lone
	 * limiter's share does. */
	for (n = want; n >= 1 && x->fam == NULL; n /= 2) {
		resil_keyed_config_init(&kc);
		kc.kind = RESIL_KEYED_RATELIMIT;
		kc.max_keys = x->max_keys;
		kc.max_key_len = x->max_key_len;
		kc.ratelimit.rate = fl->rate;
		kc.ratelimit.period_ns = fl->period_ms * RESIL_NS_PER_MS * n;
		kc.ratelimit.burst =
		    fl->burst / n > 0 ? (uint32_t)(fl->burst / n) : 1;
		kc.ratelimit.clock = &fl->clock;
		kc.alloc = &fl->alloc;
		for (i = 0; ov != NULL && i < x->nov; i++) {
			ov[i].key = x->ov[i].key;
			ov[i].key_len = x->ov[i].len;
			ov[i].rate = x->ov[i].rate;
			ov[i].period_ns =
			    x->ov[i].period_ms * RESIL_NS_PER_MS * n;
			ov[i].burst = x->ov[i].burst / n > 0
			    ? (uint32_t)(x->ov[i].burst / n)
			    : 1;
		}
		kc.overrides = ov;
		kc.n_overrides = x->nov;
		if (resil_keyed_new(&x->fam, &kc, NULL) != RESIL_OK)
			x->fam = NULL;
	}
	if (ov != NULL)
		resil__free(&fl->alloc, ov, x->nov * sizeof(*ov));
	if (x->fam != NULL)
		x->fam_n = want;
	return x->fam;
}

resil_err
resil__fkeyed_local(resil_fleet_limit *fl, const void *key, size_t key_len,
    uint32_t k, uint64_t *retry_after_ns)
{
	resil_keyed *fam = local_family(fl);
	uint64_t ticks = fl->period_ms * RESIL_NS_PER_MS;
	resil_err e = RESIL_E_NOMEM;

	if (fam != NULL)
		e = resil_keyed_ratelimit_try_acquire(
		    fam, key, key_len, k, &ticks);
	if (e == RESIL_OK) {
		resil__inc64(&fl->local_grants);
		return RESIL_OK;
	}
	/* k above the key's share's burst (INVAL), or out of memory: a
	 * limiter fails closed, the wait a share's period. */
	if (e != RESIL_E_LIMITED)
		ticks = fl->period_ms * RESIL_NS_PER_MS *
		    (fl->kx->fam_n != 0 ? fl->kx->fam_n : 1);
	resil__inc64(&fl->rejected);
	if (retry_after_ns != NULL)
		*retry_after_ns = ticks;
	return RESIL_E_LIMITED;
}

/* ---- the acquire ---- */

static void
hex_key(struct resil__fkeyed *x, const void *key, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *b = key;
	char *p = x->kbuf + x->kprefix;
	size_t i;

	for (i = 0; i < len; i++) {
		*p++ = digits[b[i] >> 4];
		*p++ = digits[b[i] & 15u];
	}
	memcpy(p, ":gcra", 6);
}

/* The keyed script loaded on this connection (once per sha: a lost one
 * is loaded again by the NOSCRIPT path). No answer is left to the
 * round trip that follows. */
static void
load_script(resil_fleet_limit *fl)
{
	struct resil__fkeyed *x = fl->kx;
	redisReply *r;

	if (x->have_sha || fl->cn.c == NULL)
		return;
	r = redisCommand(fl->cn.c, "SCRIPT LOAD %s", resil__fleet_limit_lua(1));
	if (r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40) {
		memcpy(x->sha, r->str, 40);
		x->sha[40] = '\0';
		x->have_sha = 1;
	}
	if (r != NULL)
		freeReplyObject(r);
}

resil_err
resil__fkeyed_request(resil_fleet_limit *fl, const void *key, size_t key_len,
    uint32_t k, resil__flreq *rq, const char **argv, size_t *argl,
    char *kbuf)
{
	struct resil__fkeyed *x = fl->kx;
	const kovr *o;
	size_t i;

	if (key == NULL || k == 0 || x == NULL || key_len == 0 ||
	    key_len > x->max_key_len)
		return RESIL_E_INVAL;
	o = find_override(x, key, key_len);
	if (k > (o != NULL ? o->burst : fl->burst))
		return RESIL_E_INVAL;
	snprintf(kbuf, 16, "%u", k);
	hex_key(x, key, key_len);
	argv[2] = "4";
	argv[3] = x->kbuf;
	argv[4] = x->key_inst;
	argv[5] = x->key_members;
	argv[6] = x->key_agreed;
	argv[7] = fl->instance;
	argv[8] = kbuf;
	argv[9] = o != NULL ? o->scale_s : fl->scale_s;
	argv[10] = o != NULL ? o->ts_s : fl->ts_s;
	argv[11] = o != NULL ? o->bs_s : fl->bs_s;
	argv[12] = fl->ttl_s;
	argv[13] = x->settings;
	argv[14] = o != NULL ? o->kset : x->kset;
	for (i = 2; i < RESIL__FKEYED_ARGC; i++)
		argl[i] = strlen(argv[i]);
	rq->keyed = 1;
	rq->sha = x->sha;
	rq->have_sha = &x->have_sha;
	rq->argc = RESIL__FKEYED_ARGC;
	rq->argv = argv;
	rq->argl = argl;
	rq->key = key;
	rq->key_len = key_len;
	rq->k = k;
	rq->settings = x->settings;
	load_script(fl);
	return RESIL_OK;
}

resil_err
resil__fkeyed_metrics(resil_fleet_limit *fl, resil_keyed_metrics *out)
{
	if (fl->kx == NULL || fl->kx->fam == NULL)
		return RESIL_E_NOTFOUND;
	return resil_keyed_get_metrics(fl->kx->fam, out);
}

/* ---- the server's pushback for one key (issue 41, turn 4) ---- */

/* As lib/fleet.c's listener call for the limiter's events. */
static void
kemit(resil_fleet_limit *fl, const char *detail)
{
	resil_fleet_event ev;

	if (fl->listener == NULL)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.kind = RESIL_FLEET_EV_ERROR;
	ev.votes = (uint32_t)resil__load64(&fl->seen);
	ev.detail = detail;
	fl->listener(&ev, fl->listener_ctx);
}

/* resil_fleet_limit_pause() for key's GCRA state alone (the keyed
 * script's resil:limit:NAME:k:HEX:gcra, its settings the key's own:
 * its override's, else the limiter's): one round trip of
 * lib/fleet_pause.c's script, the TAT moved forward, never back. */
resil_err
resil_fleet_limit_pause_key(resil_fleet_limit *fl, const void *key,
    size_t key_len, uint64_t pause_ns, uint64_t *until_us)
{
	char why[RESIL_DIAG_MAX];
	struct resil__fkeyed *x;
	const kovr *o;
	uint64_t until = 0;
	int r;

	if (fl == NULL || key == NULL || key_len == 0 || pause_ns == 0)
		return RESIL_E_INVAL;
	pthread_mutex_lock(&fl->mu);
	x = fl->kx;
	if (x == NULL || key_len > x->max_key_len) {
		pthread_mutex_unlock(&fl->mu);
		return RESIL_E_INVAL;
	}
	if (fl->cn.c == NULL || resil__load64(&fl->local) != 0) {
		pthread_mutex_unlock(&fl->mu);
		return RESIL_E_UNAVAILABLE;
	}
	o = find_override(x, key, key_len);
	hex_key(x, key, key_len);
	r = resil__fleet_limit_pause_eval(fl->cn.c, x->kbuf,
	    pause_ns / 1000 + (pause_ns % 1000 != 0 ? 1u : 0u),
	    o != NULL ? o->scale_s : fl->scale_s,
	    o != NULL ? o->ts_s : fl->ts_s, o != NULL ? o->bs_s : fl->bs_s,
	    o != NULL ? o->kset : x->kset, &until, why, sizeof(why));
	if (r < 0) {
		/* As an acquire's failure: the next acquire reconnects. */
		resil__inc64(&fl->errors);
		resil__fconn_close(&fl->cn);
		kemit(fl, why);
	}
	pthread_mutex_unlock(&fl->mu);
	if (r != 0)
		return RESIL_E_UNAVAILABLE;
	if (until_us != NULL)
		*until_us = until;
	return RESIL_OK;
}

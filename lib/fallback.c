/*
 * resil fallback: the chain of fallback handlers (a cache, a mock, the
 * user's functions) around a call, and the answer a failure gets from
 * it. The result cache is lib/fallback_cache.c, which also holds the
 * chain's record of a success into its caches.
 */
#include "internal.h"

#include <resil/fallback.h>

#include <stddef.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "fallback_internal.h"
#include "mock_internal.h"
#include "value_internal.h"

#define args_ok resil__cache_args_ok

/* ---- The chain ---- */

typedef resil__fb_handler handler;
#define K_CACHE RESIL__FB_CACHE
#define K_MOCK RESIL__FB_MOCK
#define K_USER RESIL__FB_USER

static const size_t chain_quiet = 0;
static const size_t chain_busy = 1;

resil_err
resil_fallback_new(
    resil_fallback **out, const resil_fallback_config *cfg, resil_diag *diag)
{
	resil_fallback_config c;
	const resil_allocator *al;
	resil_fallback *fb;

	if (out == NULL)
		return resil__diagf(
		    diag, RESIL_E_INVAL, "fallback: NULL argument");
	resil_fallback_config_init(&c);
	if (cfg != NULL) {
		/* This struct is the first released one: nothing shorter
		 * exists. */
		if (cfg->size != sizeof(c))
			return resil__check_size(diag, "fallback",
			    "resil_fallback_config", cfg->size, sizeof(c));
		memcpy(&c, cfg, cfg->size);
	}
	al = resil__allocator(c.alloc);
	fb = resil__calloc(al, sizeof(*fb));
	if (fb == NULL)
		return RESIL_E_NOMEM;
	fb->alloc = *al;
	fb->busy = &chain_quiet;
	*out = fb;
	return RESIL_OK;
}

void
resil_fallback_free(resil_fallback *fb)
{
	if (fb == NULL)
		return;
	if (fb->h != NULL)
		resil__free(&fb->alloc, fb->h, sizeof(handler) * fb->n);
	resil__free(&fb->alloc, fb, sizeof(*fb));
}

static resil_err
add(resil_fallback *fb, const handler *h)
{
	handler *grown;

	/* Configuration time: one allocation per handler is fine. */
	grown = resil__alloc(&fb->alloc, sizeof(handler) * (fb->n + 1));
	if (grown == NULL)
		return RESIL_E_NOMEM;
	if (fb->n > 0)
		memcpy(grown, fb->h, sizeof(handler) * fb->n);
	grown[fb->n] = *h;
	if (fb->h != NULL)
		resil__free(&fb->alloc, fb->h, sizeof(handler) * fb->n);
	fb->h = grown;
	fb->n++;
	fb->ncache += h->k == K_CACHE;
	if (h->k == K_CACHE && fb->cache1 == NULL)
		fb->cache1 = h->cache;
	if (fb->n == 1 && h->k == K_CACHE)
		fb->cache_first = h->cache;
	fb->nmock += h->k == K_MOCK;
	if (h->k == K_MOCK && fb->force1 == NULL)
		fb->force1 = h->force;
	fb->busy = fb->ncache > 0 || fb->nmock > 1 ? &chain_busy
	    : fb->nmock == 1                       ? fb->force1
	                                           : &chain_quiet;
	return RESIL_OK;
}

resil_err
resil_fallback_add_cache(resil_fallback *fb, resil_cache *c)
{
	handler h;

	if (fb == NULL || c == NULL)
		return RESIL_E_INVAL;
	memset(&h, 0, sizeof(h));
	h.k = K_CACHE;
	h.cache = c;
	return add(fb, &h);
}

resil_err
resil_fallback_add_mock(resil_fallback *fb, const resil_mock *m)
{
	handler h;

	if (fb == NULL || m == NULL)
		return RESIL_E_INVAL;
	memset(&h, 0, sizeof(h));
	h.k = K_MOCK;
	h.mock = m;
	h.force = resil__mock_force_count(m);
	return add(fb, &h);
}

resil_err
resil_fallback_add_handler(resil_fallback *fb, resil_fallback_fn fn, void *ctx)
{
	handler h;

	if (fb == NULL || fn == NULL)
		return RESIL_E_INVAL;
	memset(&h, 0, sizeof(h));
	h.k = K_USER;
	h.fn = fn;
	h.ctx = ctx;
	return add(fb, &h);
}

size_t
resil_fallback_count(const resil_fallback *fb)
{
	return fb == NULL ? 0 : fb->n;
}

/* "(rc N)": the user's return code in a message. */
static void
msg_rc(resil__msg *o, int rc)
{
	RESIL__MSG_LIT(o, "(rc ");
	resil__msg_int(o, rc);
	RESIL__MSG_LIT(o, ")");
}

/* "; original failure: <error>" for each error, made at compile time in
 * arrays of one size, so that describe() copies a fixed number of bytes
 * (a few vector moves) instead of measuring and copying the text: a
 * cache's answer writes this on every hit. */
typedef struct fail_text {
	char text[80];
	size_t len;
} fail_text;

#define FAIL_TEXT(name, value, text) \
	[value] = { "; original failure: " text, \
	    sizeof("; original failure: " text) - 1 },
static const fail_text fail_texts[] = { RESIL_ERR_MAP(FAIL_TEXT) };
#undef FAIL_TEXT

#if defined(__SSE2__)
/* 16 bytes from s + k to d + k, unaligned: written out, not a loop,
 * which the compiler would turn back into a call of memcpy. */
#define MOVE16(d, s, k) \
	_mm_storeu_si128((__m128i *)(void *)((d) + (k)), \
	    _mm_loadu_si128((const __m128i *)(const void *)((s) + (k))))
#endif

/* "<what>; original failure: <error>[ (rc N)]"; what is a literal. */
#define DESCRIBE(r, what, f) describe((r), (what), sizeof(what) - 1, (f))

/* Written straight into the buffer: what (a literal of at most 40
 * bytes), the failure's text and " (rc N)" always fit in
 * RESIL_RESULT_MSG_MAX. */
static FB_INLINE void
describe(
    resil_result *r, const char *what, size_t what_len, const resil_failure *f)
{
	char *m = r->message;
	size_t len = what_len;

	memcpy(m, what, what_len);
	if (RESIL__LIKELY((unsigned)f->err <
	        sizeof(fail_texts) / sizeof(fail_texts[0]))) {
		const fail_text *t = &fail_texts[f->err];

#if defined(__SSE2__)
		/* Five 16-byte moves (a memcpy of 80 is compiled as ten of
		 * 8 bytes, and a loop of them as a call of memcpy). */
		_Static_assert(sizeof(t->text) == 80, "five chunks");
		MOVE16(m + len, t->text, 0);
		MOVE16(m + len, t->text, 16);
		MOVE16(m + len, t->text, 32);
		MOVE16(m + len, t->text, 48);
		MOVE16(m + len, t->text, 64);
#else
		memcpy(m + len, t->text, sizeof(t->text));
#endif
		len += t->len;
	} else {
		static const char sep[] = "; original failure: ";
		const char *err = resil_strerror(f->err);
		size_t n = strlen(err);

		memcpy(m + len, sep, sizeof(sep) - 1);
		len += sizeof(sep) - 1;
		if (n > 64)
			n = 64;
		memcpy(m + len, err, n);
		len += n;
	}
	if (f->err == RESIL_E_CALL && (unsigned)f->rc < 10) {
		/* " (rc N)" and the NUL, one digit: one 8-byte store. */
		const char t[8] = { ' ', '(', 'r', 'c', ' ',
			(char)('0' + f->rc), ')', '\0' };

		memcpy(m + len, t, sizeof(t));
		return;
	}
	if (f->err == RESIL_E_CALL) {
		/* " (rc N)", N as %d, digits from the right. */
		char tmp[16];
		size_t i = sizeof(tmp);
		unsigned u = f->rc < 0 ? 0u - (unsigned)f->rc : (unsigned)f->rc;

		tmp[--i] = ')';
		do {
			tmp[--i] = (char)('0' + u % 10u);
			u /= 10u;
		} while (u != 0);
		if (f->rc < 0)
			tmp[--i] = '-';
		memcpy(m + len, " (rc ", 5);
		len += 5;
		memcpy(m + len, tmp + i, sizeof(tmp) - i);
		len += sizeof(tmp) - i;
	}
	m[len] = '\0';
}

_Static_assert(RESIL_RESULT_MSG_MAX > 40 + 80 + 5 + 16,
    "describe()'s parts fit the message");

/* An empty result that carries the original failure. */
static void
result_start(resil_result *r, const resil_failure *failure)
{
	resil__result_clear(r);
	r->cause = failure->err;
	r->cause_rc = failure->rc;
	r->attempts = failure->attempts;
}

/* A cache's answer: every field of *r but the value (which the cache
 * wrote there) written once, as result_start() and the fields set after
 * it would. */
static FB_INLINE void
result_cached(resil_result *r, const resil_failure *failure, uint64_t age)
{
	r->err = RESIL_OK;
	r->source = RESIL_SOURCE_CACHE;
	r->rc = 0;
	r->attempts = failure->attempts;
	r->age = age;
	r->cause = failure->err;
	r->cause_rc = failure->rc;
	r->breaker_state = -1;
	r->last_failure = RESIL_OK;
	r->last_failure_rc = 0;
	r->error_name = NULL;
	r->endpoint[0] = '\0';
	r->zone[0] = '\0';
	DESCRIBE(r, "cached value", failure);
}

/* resil_fallback_recover() of arguments already checked (args_ok(args),
 * failure and out not NULL, failure->err a failure). */
static FB_INLINE resil_err
recover(resil_fallback *fb, const resil_args *args,
    const resil_failure *failure, resil_result *out, size_t first)
{
	resil_result r;
	resil__msg o;
	size_t i;

	if (fb == NULL || fb->n == 0) {
		/* No fallback configured: the original error stands. */
		resil_result_init(&r);
		r.err = failure->err;
		r.rc = failure->rc;
		r.source = RESIL_SOURCE_LIVE;
		r.attempts = failure->attempts;
		r.cause = failure->err;
		r.cause_rc = failure->rc;
		resil__msg_start(&o, r.message, sizeof(r.message));
		resil__msg_str(&o, resil_strerror(failure->err));
		*out = r;
		return r.err;
	}
	for (i = first; i < fb->n; i++) {
		const handler *h = &fb->h[i];
		resil_err err;
		uint64_t age = 0;

		switch (h->k) {
		case K_CACHE:
			/* out's value is written only on a hit (the cache
			 * serves it there); the answer is built straight in
			 * *out. */
			err = resil__cache_answer(
			    h->cache, args, &out->value, &age);
			if (err == RESIL_E_NOTFOUND)
				continue;
			if (err != RESIL_OK)
				continue; /* out of memory: try the next */
			result_cached(out, failure, age);
			return RESIL_OK;
		case K_MOCK:
			/* The mock writes *out only when it answers (it
			 * builds the whole result itself), so it can write
			 * there directly: no copy. */
			err = resil_mock_invoke(h->mock, args, failure, out);
			if (err == RESIL_E_NOTFOUND || err == RESIL_E_NOMEM ||
			    err == RESIL_E_INVAL)
				continue;
			return out->err;
		case K_USER:
			result_start(&r, failure);
			if (h->fn(h->ctx, args, failure, &r) !=
			    RESIL_FALLBACK_ANSWER) {
				resil_result_free(&r);
				continue;
			}
			/* An answer of RESIL_E_UNAVAILABLE stops the chain
			 * and stays "unavailable". */
			if (r.source == RESIL_SOURCE_UNAVAILABLE &&
			    r.err != RESIL_E_UNAVAILABLE)
				r.source = RESIL_SOURCE_FALLBACK;
			*out = r;
			return r.err;
		}
	}
	result_start(&r, failure);
	DESCRIBE(&r, "no live, cached or mock value", failure);
	*out = r;
	return r.err;
}

resil_err
resil_fallback_recover(resil_fallback *fb, const resil_args *args,
    const resil_failure *failure, resil_result *out)
{
	if (!args_ok(args) || failure == NULL || out == NULL ||
	    failure->err == RESIL_OK || failure->err == RESIL_E_BUSINESS)
		return RESIL_E_INVAL;
	return recover(fb, args, failure, out, 0);
}

/* The mock stage wraps everything: a force mock never calls. 1 when one
 * answered (its outcome in *err), 0 to go on with the call. */
static FB_COLD int
force_stage(resil_fallback *fb, const resil_args *args, resil_result *out,
    resil_err *err)
{
	size_t i;

	for (i = 0; i < fb->n; i++) {
		const resil_mock_spec *spec;

		if (fb->h[i].k != K_MOCK ||
		    !resil__mock_may_force(fb->h[i].mock) ||
		    resil_mock_lookup(fb->h[i].mock, args->method, &spec) !=
		        RESIL_OK)
			continue;
		if (spec->action != RESIL_MOCK_NONE &&
		    spec->mode == RESIL_MOCK_FORCE) {
			/* Written only when it answers: no copy needed. */
			resil_err e =
			    resil_mock_invoke(fb->h[i].mock, args, NULL, out);

			*err = e == RESIL_E_NOMEM ? e : out->err;
			return 1;
		}
	}
	return 0;
}

/* Whether a mock stage of fb may answer before the call: a mock with no
 * force: spec anywhere answers only after a failure (one flag test per
 * mock stage). */
static inline int
may_force(const resil_fallback *fb)
{
	size_t i;

	if (RESIL__LIKELY(fb->nmock == 1))
		return *fb->force1 != 0;
	for (i = 0; i < fb->n; i++)
		if (fb->h[i].k == K_MOCK && *fb->h[i].force != 0)
			return 1;
	return 0;
}

/* The live call did not succeed: a business error or an ignored code is
 * answered live, anything else goes down the chain. */
static FB_COLD resil_err
call_failed(resil_fallback *fb, const resil_args *args, int rc,
    resil_outcome o, resil_value *v, resil_result *out, size_t first)
{
	resil_failure f;
	resil_result r;
	resil__msg m_;

	/* What the failing call left: mostly nothing (one test); every
	 * answer below writes the whole of *out, v (out's value) too. */
	if (RESIL__UNLIKELY(v->type >= RESIL_VALUE_STRING))
		resil_value_free(v);
	if (o == RESIL_OUTCOME_BUSINESS || o == RESIL_OUTCOME_IGNORED) {
		/* Business, or ignored with a code: answered live, without
		 * a fallback. */
		resil_result_init(&r);
		r.rc = rc;
		r.attempts = 1;
		r.source = RESIL_SOURCE_LIVE;
		resil__msg_start(&m_, r.message, sizeof(r.message));
		if (o == RESIL_OUTCOME_BUSINESS) {
			r.err = RESIL_E_BUSINESS;
			RESIL__MSG_LIT(&m_, "business error ");
			msg_rc(&m_, rc);
		} else {
			r.err = RESIL_E_CALL;
			RESIL__MSG_LIT(&m_, "the call failed ");
			msg_rc(&m_, rc);
			RESIL__MSG_LIT(&m_, ", outcome ignored");
		}
		*out = r;
		return r.err;
	}
	f.err = RESIL_E_CALL;
	f.rc = rc;
	f.attempts = 1;
	/* args checked by the callers; stages before first asked already */
	return recover(fb, args, &f, out, first);
}

static FB_INLINE resil_err
call_rest(resil_fallback *fb, const resil_args *args, resil_call_fn fn,
    void *ctx, const resil_classifier *cls, resil_result *out);

/* A chain whose mock may answer before the call: that stage, then the
 * call. Out of line, so that fn and ctx live across no call on the
 * common path (fewer saved registers). */
static FB_NOINLINE resil_err
call_forced(resil_fallback *fb, const resil_args *args, resil_call_fn fn,
    void *ctx, const resil_classifier *cls, resil_result *out)
{
	resil_err err;

	if (force_stage(fb, args, out, &err))
		return err;
	return call_rest(fb, args, fn, ctx, cls, out);
}

/* A chain's call with a stage that has work on a success (a cache to
 * fill, a force: mock) or a user's classifier: every test in full.
 * Inlined twice: call_full() (a classifier) and call_busy() (none). */
static FB_INLINE resil_err
call_full_in(resil_fallback *fb, const resil_args *args, resil_call_fn fn,
    void *ctx, const resil_classifier *cls, resil_result *out)
{
	if (!args_ok(args) || fn == NULL || out == NULL)
		return RESIL_E_INVAL;
	if (fb != NULL && fb->nmock > 0 && RESIL__UNLIKELY(may_force(fb)))
		return call_forced(fb, args, fn, ctx, cls, out);
	return call_rest(fb, args, fn, ctx, cls, out);
}

/* call_full_in() past the checks and the force: stage. */
static FB_INLINE resil_err
call_rest(resil_fallback *fb, const resil_args *args, resil_call_fn fn,
    void *ctx, const resil_classifier *cls, resil_result *out)
{
	resil_outcome o;
	int rc;

	/* The live call writes its value straight into *out; the other
	 * fields are written once, by the answer (or, on a failure, cleared
	 * around the value first). The default classifier is inlined: this
	 * is the path of every call. */
	out->value.type = RESIL_VALUE_NULL; /* what the call leaves */
	out->value.u.s.ptr = NULL;
	out->value.u.s.len = 0;
	rc = fn(ctx, args, &out->value);
	o = cls == NULL || cls->fn == NULL
	    ? (rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE)
	    : resil_classify(cls, rc, &out->value);
	if (RESIL__LIKELY(o == RESIL_OUTCOME_SUCCESS ||
	        (o == RESIL_OUTCOME_IGNORED && rc == 0))) {
		/* Only a success is recorded; both are answered live. */
		if (o == RESIL_OUTCOME_SUCCESS && fb != NULL && fb->ncache > 0)
			(void)resil_fallback_record(fb, args, &out->value);
		resil__result_answered(out, 1, -1);
		out->rc = rc;
		return RESIL_OK;
	}
	/* A chain whose first stage is a cache (the seeds' [cache, mock]),
	 * the default classifier's failure and nothing left by the call:
	 * the cache asked here, its answer built in place (no further
	 * frame, no stage loop); a miss goes on from the next stage. */
	if (o == RESIL_OUTCOME_FAILURE && fb != NULL &&
	    fb->cache_first != NULL &&
	    out->value.type < RESIL_VALUE_STRING) {
		resil_failure f;
		uint64_t age = 0;
		resil_err e;

		f.err = RESIL_E_CALL;
		f.rc = rc;
		f.attempts = 1;
		e = resil__cache_answer(
		    fb->cache_first, args, &out->value, &age);
		if (RESIL__LIKELY(e == RESIL_OK)) {
			result_cached(out, &f, age);
			return RESIL_OK;
		}
		return call_failed(fb, args, rc, o, &out->value, out, 1);
	}
	/* call_failed() writes every field of *out (the answer, or
	 * resil_fallback_recover()'s result): nothing to clear first. */
	return call_failed(fb, args, rc, o, &out->value, out, 0);
}

static FB_NOINLINE resil_err
call_full(resil_fallback *fb, const resil_args *args, resil_call_fn fn,
    void *ctx, const resil_classifier *cls, resil_result *out)
{
	return call_full_in(fb, args, fn, ctx, cls, out);
}

/* call_full() of a busy chain with the default classifier (rc != 0
 * fails): no classifier kept, no outcome but the code's. */
static FB_NOINLINE resil_err
call_busy(resil_fallback *fb, const resil_args *args, resil_call_fn fn,
    void *ctx, resil_result *out)
{
	return call_full_in(fb, args, fn, ctx, NULL, out);
}

/* The lean path's call failed (rc, not 0): the default classifier's
 * failure, down the chain. */
static FB_COLD resil_err
call_failed_plain(
    resil_fallback *fb, const resil_args *args, int rc, resil_result *out)
{
	return call_failed(
	    fb, args, rc, RESIL_OUTCOME_FAILURE, &out->value, out, 0);
}

/* The lean path: a chain whose stages have nothing to do on a success
 * (no cache; a mock stage without a force: spec now) and the default
 * classifier cost the test of one word before the call; a success is
 * answered live in place. */
resil_err
resil_fallback_call(resil_fallback *fb, const resil_args *args,
    resil_call_fn fn, void *ctx, const resil_classifier *cls,
    resil_result *out)
{
	/* One load and one branch before anything is saved: the chain's
	 * word (a NULL chain reads chain_quiet's), so that a busy chain's
	 * jump to call_full() comes before the lean path's frame. */
	const size_t *busy = fb != NULL ? fb->busy : &chain_quiet;
	int rc;

	if (RESIL__UNLIKELY(*busy != 0))
		return cls == NULL || cls->fn == NULL
		    ? call_busy(fb, args, fn, ctx, out)
		    : call_full(fb, args, fn, ctx, cls, out);
	if (RESIL__UNLIKELY(cls != NULL && cls->fn != NULL))
		return call_full(fb, args, fn, ctx, cls, out);
	if (RESIL__UNLIKELY(!args_ok(args) || fn == NULL || out == NULL))
		return RESIL_E_INVAL;
	/* What the call leaves if it writes nothing: a null value. */
	out->value.type = RESIL_VALUE_NULL;
	out->value.u.s.ptr = NULL;
	out->value.u.s.len = 0;
	rc = fn(ctx, args, &out->value);
	if (RESIL__UNLIKELY(rc != 0))
		return call_failed_plain(fb, args, rc, out);
	resil__result_answered(out, 1, -1);
	out->rc = 0;
	return RESIL_OK;
}

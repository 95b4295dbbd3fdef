/*
 * Chaos strategies (Polly v8's Simmy): one decision per attempt, drawn
 * from an injected generator, behind one flag word that flips at run
 * time.
 */
#include <resil/chaos.h>
#include <resil/mock.h>

#include "atomic.h"
#include "chaos_internal.h"
#include "internal.h"
#include "kv.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The flag word: bits 0-3 the live strategies (configured, switched on,
 * master on), bits 8-11 the strategies' switches, bit 16 the master.
 * A decision tests the live bits alone, so "everything off" costs one
 * load and one test; a switch recomputes them in one compare-and-swap.
 */
#define W_LIVE 0xFull
#define W_SWITCH_SHIFT 8
#define W_MASTER (1ull << 16)

enum { S_FAULT, S_LATENCY, S_OUTCOME, S_BEHAVIOUR, S_N };

struct resil_chaos {
	uint64_t word; /* atomic; first, alone on the decision's fast path */
	unsigned configured;
	double rate[S_N];
	int fault_rc;
	uint64_t latency_ns;
	resil_value outcome;
	resil_chaos_behaviour_fn behaviour;
	void *behaviour_ctx;
	int own_rng;
	resil_rng rng;
	resil_random rnd;
	resil_chaos_listener_fn listener;
	void *listener_ctx;
	resil_allocator a;
	/* Counters, atomic; only the decisions that get past the word
	 * touch them, so they share a line with nothing hot. */
	uint64_t decisions;
	uint64_t injected[S_N];
	uint64_t latency_sum;
	/* References (atomic): 1 at new, +1 per resil_chaos_ref(), -1 per
	 * resil_chaos_free(); freed at 0. */
	uint64_t refs;
	/* What it was created with, for resil__chaos_same(): the word
	 * before any switch flipped, and the seed. */
	uint64_t word0;
	uint64_t seed;
	/* Per method (docs/chaos.md, "Per method"): a chaos's own methods'
	 * chaoses (each holding a reference), linked by next; a method's
	 * chaos has its name and no methods of its own. */
	char *method;
	resil_chaos *methods;
	resil_chaos *next;
};

/* resil__chaos_is_live() reads the word at the start of the struct. */
_Static_assert(offsetof(struct resil_chaos, word) == 0,
    "the flag word must stay first (chaos_internal.h)");
_Static_assert(W_LIVE == 0xFu, "chaos_internal.h tests the bits 0xF");

const char *
resil_chaos_kind_name(resil_chaos_kind k)
{
	switch (k) {
	case RESIL_CHAOS_FAULT:
		return "fault";
	case RESIL_CHAOS_LATENCY:
		return "latency";
	case RESIL_CHAOS_OUTCOME:
		return "outcome";
	case RESIL_CHAOS_BEHAVIOUR:
		return "behaviour";
	}
	return "unknown";
}

void
resil_chaos_config_deinit(resil_chaos_config *cfg)
{
	if (cfg == NULL)
		return;
	resil_value_free(&cfg->outcome_value);
	cfg->has_outcome = 0;
}

static const char *const strategy_names[S_N] = { "fault", "latency",
	"outcome", "behaviour" };

static resil_chaos_strategy *
strategy_of(resil_chaos_config *cfg, int s)
{
	switch (s) {
	case S_FAULT:
		return &cfg->fault;
	case S_LATENCY:
		return &cfg->latency;
	case S_OUTCOME:
		return &cfg->outcome;
	default:
		return &cfg->behaviour;
	}
}

/* chaos.outcome: the payload grammar of a mock's `return`. */
static resil_err
set_outcome(resil_chaos_config *cfg, const char *key, const char *value,
    resil_diag *diag)
{
	char text[512];
	resil_mock_spec spec;
	resil_diag md;
	resil_err e;
	int n;

	n = snprintf(text, sizeof(text), "return %s", value);
	if (n < 0 || (size_t)n >= sizeof(text)) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: a value of %zu bytes is too long (at most %zu)", key,
		    strlen(value), sizeof(text) - 8);
		return RESIL_E_INVAL;
	}
	md.msg[0] = '\0';
	e = resil_mock_parse(&spec, text, RESIL_TYPE_ANY, cfg->alloc, &md);
	if (e == RESIL_E_NOMEM)
		return RESIL_E_NOMEM;
	if (e != RESIL_OK) {
		/* The mock parser's message quotes "return ..."; keep it
		 * whole after the key, it points at the column. */
		resil__diagf(diag, RESIL_E_INVAL, "%s: %s", key, md.msg);
		return RESIL_E_INVAL;
	}
	if (spec.action != RESIL_MOCK_RETURN) {
		resil_mock_spec_free(&spec);
		resil__diagf(diag, RESIL_E_INVAL,
		    "%s: \"%s\" is not a value", key, value);
		return RESIL_E_INVAL;
	}
	resil_value_free(&cfg->outcome_value);
	cfg->outcome_value = spec.value;
	resil_value_init(&spec.value);
	resil_mock_spec_free(&spec);
	cfg->has_outcome = 1;
	return RESIL_OK;
}

resil_err
resil_chaos_config_set(resil_chaos_config *cfg, const char *key,
    const char *value, resil_diag *diag)
{
	const char *rest;
	int s, b = 0;
	double r = 0;
	uint64_t u = 0;
	resil_err e;

	if (cfg == NULL || key == NULL || value == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "chaos: NULL argument");
		return RESIL_E_INVAL;
	}
	if (strcmp(key, "chaos.enabled") == 0) {
		if ((e = resil__kv_bool(key, value, &b, diag)) == RESIL_OK)
			cfg->enabled = b;
		return e;
	}
	if (strcmp(key, "chaos.rate") == 0) {
		if ((e = resil__kv_number(key, value, 0, 1, &r, diag)) ==
		    RESIL_OK)
			cfg->rate = r;
		return e;
	}
	if (strcmp(key, "chaos.seed") == 0) {
		if ((e = resil__kv_u64(key, value, 0, UINT64_MAX, &u, diag)) ==
		    RESIL_OK)
			cfg->seed = u;
		return e;
	}
	if (strcmp(key, "chaos.fault") == 0) {
		if ((e = resil__kv_int(key, value, &b, diag)) != RESIL_OK)
			return e;
		if (b == 0) {
			resil__diagf(diag, RESIL_E_INVAL,
			    "%s: 0 is a success; a fault needs a nonzero rc",
			    key);
			return RESIL_E_INVAL;
		}
		cfg->fault_rc = b;
		return RESIL_OK;
	}
	if (strcmp(key, "chaos.latency") == 0) {
		if ((e = resil__kv_duration(key, value, 1, &u, diag)) ==
		    RESIL_OK)
			cfg->latency_ns = u;
		return e;
	}
	if (strcmp(key, "chaos.outcome") == 0)
		return set_outcome(cfg, key, value, diag);
	if (strncmp(key, "chaos.", 6) == 0) {
		for (s = 0; s < S_N; s++) {
			size_t n = strlen(strategy_names[s]);

			if (strncmp(key + 6, strategy_names[s], n) != 0 ||
			    key[6 + n] != '.')
				continue;
			rest = key + 6 + n + 1;
			if (strcmp(rest, "rate") == 0) {
				e = resil__kv_number(key, value, 0, 1, &r,
				    diag);
				if (e == RESIL_OK)
					strategy_of(cfg, s)->rate = r;
				return e;
			}
			if (strcmp(rest, "enabled") == 0) {
				e = resil__kv_bool(key, value, &b, diag);
				if (e == RESIL_OK)
					strategy_of(cfg, s)->enabled = b;
				return e;
			}
		}
	}
	resil__diagf(diag, RESIL_E_INVAL,
	    "%s: unknown key (chaos keys: enabled, rate, seed, fault, "
	    "latency, outcome, and S.rate, S.enabled for S in fault, latency, "
	    "outcome, behaviour)",
	    key);
	return RESIL_E_INVAL;
}

static double
rate_of(const resil_chaos_config *cfg, const resil_chaos_strategy *st)
{
	return st->rate < 0 ? cfg->rate : st->rate;
}

resil_err
resil_chaos_config_validate(const resil_chaos_config *cfg, resil_diag *diag)
{
	const resil_chaos_strategy *st[S_N];
	int s;

	if (cfg == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "chaos: NULL config");
		return RESIL_E_INVAL;
	}
	if (cfg->size != sizeof(*cfg)) {
		resil__check_size(diag, "chaos", "resil_chaos_config",
		    cfg->size, sizeof(*cfg));
		return RESIL_E_INVAL;
	}
	/* !(x >= 0 && x <= 1) also refuses NaN. */
	if (!(cfg->rate >= 0 && cfg->rate <= 1)) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "chaos.rate: %g is out of range 0..1", cfg->rate);
		return RESIL_E_INVAL;
	}
	st[S_FAULT] = &cfg->fault;
	st[S_LATENCY] = &cfg->latency;
	st[S_OUTCOME] = &cfg->outcome;
	st[S_BEHAVIOUR] = &cfg->behaviour;
	for (s = 0; s < S_N; s++) {
		double r = st[s]->rate;

		if (r != r || r > 1) {
			resil__diagf(diag, RESIL_E_INVAL,
			    "chaos.%s.rate: %g is out of range 0..1 "
			    "(negative: chaos.rate)",
			    strategy_names[s], r);
			return RESIL_E_INVAL;
		}
	}
	if (cfg->has_outcome && cfg->outcome_value.type == RESIL_VALUE_OPAQUE &&
	    cfg->outcome_value.u.o.ops == NULL) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "chaos.outcome: an opaque value without its ops");
		return RESIL_E_INVAL;
	}
	return RESIL_OK;
}

static uint64_t
live_of(uint64_t w, unsigned configured)
{
	uint64_t sw = (w >> W_SWITCH_SHIFT) & W_LIVE;

	return (w & W_MASTER) != 0 ? sw & configured : 0;
}

resil_err
resil_chaos_new(
    resil_chaos **out, const resil_chaos_config *cfg, resil_diag *diag)
{
	const resil_allocator *a;
	resil_chaos *ch;
	uint64_t w = 0;
	resil_err e;

	if (out == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "chaos: NULL out");
		return RESIL_E_INVAL;
	}
	if ((e = resil_chaos_config_validate(cfg, diag)) != RESIL_OK)
		return e;
	a = resil__allocator(cfg->alloc);
	ch = resil__calloc(a, sizeof(*ch));
	if (ch == NULL)
		return RESIL_E_NOMEM;
	ch->a = *a;
	resil_value_init(&ch->outcome);
	if (cfg->has_outcome) {
		if (resil_value_copy(&ch->outcome, &cfg->outcome_value, a) !=
		    RESIL_OK) {
			resil__free(a, ch, sizeof(*ch));
			return RESIL_E_NOMEM;
		}
		ch->configured |= RESIL_CHAOS_OUTCOME;
	}
	if (cfg->fault_rc != 0)
		ch->configured |= RESIL_CHAOS_FAULT;
	if (cfg->latency_ns != 0)
		ch->configured |= RESIL_CHAOS_LATENCY;
	if (cfg->behaviour_fn != NULL)
		ch->configured |= RESIL_CHAOS_BEHAVIOUR;
	ch->rate[S_FAULT] = rate_of(cfg, &cfg->fault);
	ch->rate[S_LATENCY] = rate_of(cfg, &cfg->latency);
	ch->rate[S_OUTCOME] = rate_of(cfg, &cfg->outcome);
	ch->rate[S_BEHAVIOUR] = rate_of(cfg, &cfg->behaviour);
	ch->fault_rc = cfg->fault_rc;
	ch->latency_ns = cfg->latency_ns;
	ch->behaviour = cfg->behaviour_fn;
	ch->behaviour_ctx = cfg->behaviour_ctx;
	ch->listener = cfg->listener;
	ch->listener_ctx = cfg->listener_ctx;
	if (cfg->random != NULL && cfg->random->uniform != NULL) {
		ch->rnd = *cfg->random;
	} else {
		ch->own_rng = 1;
		resil_rng_seed(&ch->rng, cfg->seed);
	}
	if (cfg->enabled)
		w |= W_MASTER;
	if (cfg->fault.enabled)
		w |= (uint64_t)RESIL_CHAOS_FAULT << W_SWITCH_SHIFT;
	if (cfg->latency.enabled)
		w |= (uint64_t)RESIL_CHAOS_LATENCY << W_SWITCH_SHIFT;
	if (cfg->outcome.enabled)
		w |= (uint64_t)RESIL_CHAOS_OUTCOME << W_SWITCH_SHIFT;
	if (cfg->behaviour.enabled)
		w |= (uint64_t)RESIL_CHAOS_BEHAVIOUR << W_SWITCH_SHIFT;
	/* Only configured strategies keep a switch: turning on one that
	 * is not there is refused, so it must not read as on either. */
	w &= ~((uint64_t)(RESIL_CHAOS_STRATEGIES & ~ch->configured)
	    << W_SWITCH_SHIFT);
	w |= live_of(w, ch->configured);
	resil__store64(&ch->word, w);
	ch->word0 = w;
	ch->seed = cfg->seed;
	ch->refs = 1;
	*out = ch;
	return RESIL_OK;
}

resil_chaos *
resil_chaos_ref(resil_chaos *ch)
{
	if (ch != NULL)
		resil__inc64(&ch->refs);
	return ch;
}

/* The last reference is gone: free ch itself (its methods are gone). */
static void
chaos_release(resil_chaos *ch)
{
	resil_allocator a = ch->a;

	resil__strfree(&a, ch->method);
	resil_value_free(&ch->outcome);
	resil__free(&a, ch, sizeof(*ch));
}

void
resil_chaos_free(resil_chaos *ch)
{
	if (ch == NULL || resil__faa64(&ch->refs, UINT64_MAX) != 1)
		return;
	/* A method's chaos has no methods of its own (one level): its
	 * reference is dropped here, without recursion. */
	while (ch->methods != NULL) {
		resil_chaos *m = ch->methods;

		ch->methods = m->next;
		m->next = NULL;
		if (resil__faa64(&m->refs, UINT64_MAX) == 1)
			chaos_release(m);
	}
	chaos_release(ch);
}

resil_err
resil_chaos_set_method(resil_chaos *ch, const char *method,
    resil_chaos *child, resil_diag *diag)
{
	resil_chaos *m;

	if (ch == NULL || method == NULL || child == NULL) {
		resil__diagf(diag, RESIL_E_INVAL, "chaos: NULL argument");
		return RESIL_E_INVAL;
	}
	if (child == ch || child->method != NULL || child->methods != NULL ||
	    ch->method != NULL) {
		resil__diagf(diag, RESIL_E_INVAL,
		    "chaos: %s: a method's chaos is one level below a "
		    "pipeline's (no chaos of its own methods, not given "
		    "twice)",
		    method);
		return RESIL_E_INVAL;
	}
	for (m = ch->methods; m != NULL; m = m->next)
		if (strcmp(m->method, method) == 0) {
			resil__diagf(diag, RESIL_E_INVAL,
			    "chaos: %s: the method has a chaos already",
			    method);
			return RESIL_E_INVAL;
		}
	child->method = resil__strdup(&child->a, method);
	if (child->method == NULL) {
		resil__diagf(diag, RESIL_E_NOMEM, "chaos: out of memory");
		return RESIL_E_NOMEM;
	}
	child->next = ch->methods;
	ch->methods = resil_chaos_ref(child);
	return RESIL_OK;
}

resil_chaos *
resil_chaos_method(resil_chaos *ch, const char *method)
{
	resil_chaos *m;

	if (ch == NULL || method == NULL)
		return ch;
	for (m = ch->methods; m != NULL; m = m->next)
		if (strcmp(m->method, method) == 0)
			return m;
	return ch;
}

/* The same strategies, rates, parameters and switches at creation. */
static int
same_one(const resil_chaos *a, const resil_chaos *b)
{
	int s;

	if (a->configured != b->configured || a->word0 != b->word0 ||
	    a->fault_rc != b->fault_rc || a->latency_ns != b->latency_ns ||
	    a->seed != b->seed || a->own_rng != b->own_rng ||
	    a->behaviour != b->behaviour || a->listener != b->listener)
		return 0;
	for (s = 0; s < S_N; s++)
		if (a->rate[s] != b->rate[s])
			return 0;
	return (a->configured & RESIL_CHAOS_OUTCOME) == 0 ||
	    resil_value_equal(&a->outcome, &b->outcome);
}

int
resil_chaos_same(const resil_chaos *a, const resil_chaos *b)
{
	const resil_chaos *m;
	size_t na = 0, nb = 0;

	if (a == NULL || b == NULL)
		return a == b;
	if (!same_one(a, b))
		return 0;
	for (m = b->methods; m != NULL; m = m->next)
		nb++;
	for (m = a->methods; m != NULL; m = m->next) {
		const resil_chaos *o = b->methods;

		while (o != NULL && strcmp(o->method, m->method) != 0)
			o = o->next;
		if (o == NULL || !same_one(m, o))
			return 0;
		na++;
	}
	return na == nb;
}

static double
draw(resil_chaos *ch)
{
	return ch->own_rng ? resil_rng_uniform(&ch->rng)
	                   : resil_random_uniform(&ch->rnd);
}

static void
tell(resil_chaos *ch, resil_chaos_kind k, uint64_t now)
{
	resil_chaos_event ev;

	ev.kind = k;
	ev.time = now;
	ev.rc = k == RESIL_CHAOS_FAULT ? ch->fault_rc : 0;
	ev.delay = k == RESIL_CHAOS_LATENCY ? ch->latency_ns : 0;
	ch->listener(&ev, ch->listener_ctx);
}

/* Past the flag word: the draws, in the documented order. Out of line,
 * so that the flag test does not pay for this function's registers. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static unsigned
decide_slow(resil_chaos *ch, uint64_t live, uint64_t now,
    resil_chaos_action *out)
{
	unsigned got = 0;

	resil__inc64(&ch->decisions);
	if ((live & RESIL_CHAOS_FAULT) != 0 && draw(ch) < ch->rate[S_FAULT])
		got = RESIL_CHAOS_FAULT;
	if (got == 0) {
		if ((live & RESIL_CHAOS_LATENCY) != 0 &&
		    draw(ch) < ch->rate[S_LATENCY])
			got |= RESIL_CHAOS_LATENCY;
		if ((live & RESIL_CHAOS_OUTCOME) != 0 &&
		    draw(ch) < ch->rate[S_OUTCOME])
			got |= RESIL_CHAOS_OUTCOME;
		if ((got & RESIL_CHAOS_OUTCOME) == 0 &&
		    (live & RESIL_CHAOS_BEHAVIOUR) != 0 &&
		    draw(ch) < ch->rate[S_BEHAVIOUR])
			got |= RESIL_CHAOS_BEHAVIOUR;
	}
	if (got == 0)
		return 0;
	memset(out, 0, sizeof(*out));
	out->kinds = got;
	if (got & RESIL_CHAOS_FAULT) {
		out->rc = ch->fault_rc;
		resil__inc64(&ch->injected[S_FAULT]);
	}
	if (got & RESIL_CHAOS_LATENCY) {
		out->delay = ch->latency_ns;
		out->until = now > UINT64_MAX - ch->latency_ns
		    ? UINT64_MAX
		    : now + ch->latency_ns;
		resil__inc64(&ch->injected[S_LATENCY]);
		resil__faa64(&ch->latency_sum, ch->latency_ns);
	}
	if (got & RESIL_CHAOS_OUTCOME) {
		out->value = &ch->outcome;
		resil__inc64(&ch->injected[S_OUTCOME]);
	}
	if (got & RESIL_CHAOS_BEHAVIOUR) {
		out->behaviour = ch->behaviour;
		out->behaviour_ctx = ch->behaviour_ctx;
		resil__inc64(&ch->injected[S_BEHAVIOUR]);
	}
	if (ch->listener != NULL) {
		unsigned k;

		for (k = 1; k <= RESIL_CHAOS_BEHAVIOUR; k <<= 1)
			if (got & k)
				tell(ch, (resil_chaos_kind)k, now);
	}
	return got;
}

unsigned
resil_chaos_decide(resil_chaos *ch, uint64_t now, resil_chaos_action *out)
{
	uint64_t live;

	if (ch == NULL)
		return 0;
	live = resil__load64(&ch->word) & W_LIVE;
	if (RESIL__LIKELY(live == 0))
		return 0;
	if (out == NULL)
		return 0;
	return decide_slow(ch, live, now, out);
}

resil_err
resil_chaos_set_enabled(resil_chaos *ch, unsigned which, int on)
{
	unsigned strat = which & RESIL_CHAOS_STRATEGIES;
	uint64_t w, nw;

	if (ch == NULL || which == 0 ||
	    (which & ~(RESIL_CHAOS_STRATEGIES | RESIL_CHAOS_MASTER)) != 0 ||
	    (strat & ~ch->configured) != 0)
		return RESIL_E_INVAL;
	do {
		w = resil__load64(&ch->word);
		nw = w & ~W_LIVE;
		if (which & RESIL_CHAOS_MASTER)
			nw = on ? nw | W_MASTER : nw & ~W_MASTER;
		if (on)
			nw |= (uint64_t)strat << W_SWITCH_SHIFT;
		else
			nw &= ~((uint64_t)strat << W_SWITCH_SHIFT);
		nw |= live_of(nw, ch->configured);
	} while (!resil__cas64(&ch->word, w, nw));
	return RESIL_OK;
}

unsigned
resil_chaos_get_enabled(const resil_chaos *ch)
{
	uint64_t w;

	if (ch == NULL)
		return 0;
	w = resil__load64(&ch->word);
	return (unsigned)((w >> W_SWITCH_SHIFT) & W_LIVE) |
	    ((w & W_MASTER) != 0 ? RESIL_CHAOS_MASTER : 0u);
}

unsigned
resil_chaos_live(const resil_chaos *ch)
{
	return ch == NULL ? 0 : (unsigned)(resil__load64(&ch->word) & W_LIVE);
}

resil_err
resil_chaos_get_metrics(const resil_chaos *ch, resil_chaos_metrics *out)
{
	if (ch == NULL || out == NULL)
		return RESIL_E_INVAL;
	memset(out, 0, sizeof(*out));
	out->decisions = resil__load64(&ch->decisions);
	out->faults = resil__load64(&ch->injected[S_FAULT]);
	out->latencies = resil__load64(&ch->injected[S_LATENCY]);
	out->outcomes = resil__load64(&ch->injected[S_OUTCOME]);
	out->behaviours = resil__load64(&ch->injected[S_BEHAVIOUR]);
	out->latency_ns = resil__load64(&ch->latency_sum);
	out->configured = ch->configured;
	out->enabled = resil_chaos_get_enabled(ch);
	return RESIL_OK;
}

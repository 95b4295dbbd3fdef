/*
 * libFuzzer harness: the directory's updates (resil_directory_push, _add,
 * _update, _remove) interleaved with routing, picks and reports through a
 * selector, on a manual clock, against a model of the address list.
 *
 * Input: a sequence of operations, each a byte (the operation) and its
 * arguments (the following bytes; missing bytes read as 0):
 *   0 push n (0..5) specs    1 add a spec     2 update a spec
 *   3 remove an address      4 route, pick and report (an outcome)
 *   5 move the clock         6 pick and hold / release the held pick
 * A spec is 4 bytes: the address (one of 8), the zone (none, east, west,
 * or the empty string), the weight (0, 1, 100 or -1), and flags (tag
 * canary, mock, params "k=v", malformed params).
 *
 * Properties:
 *   - an update is refused with RESIL_E_INVAL (a bad spec, a duplicate
 *     address in a push, adding a present address) or RESIL_E_NOTFOUND
 *     (updating or removing an absent one), with a message, exactly when
 *     the model says so; a refused update changes nothing (version, count,
 *     positions);
 *   - an accepted update grows the version by one, and the list is the
 *     model's: pushed addresses kept keep their position, new ones are
 *     appended in the order given, missing ones removed; get_state gives
 *     each address's position and NOTFOUND for absent ones;
 *   - a route gives candidates that are present, not mock, and distinct,
 *     or RESIL_E_NO_PROVIDER with a message; a pick is one of them; every
 *     pick is reported or released, also after its address was removed;
 *   - no leak, no undefined behaviour.
 */
#include <string.h>

#include <resil/directory.h>
#include <resil/selector.h>

#include "fuzz.h"

#define NADDR 8
#define MAXN 6

static const char *const addr_names[NADDR] = { "10.0.0.1:1", "10.0.0.2:1",
	"10.0.0.3:1", "10.0.0.4:1", "10.0.0.5:1", "10.0.0.6:1", "10.0.0.7:1",
	"10.0.0.8:1" };

typedef struct reader {
	const uint8_t *p;
	size_t n;
} reader;

static unsigned
next(reader *r)
{
	unsigned b;

	if (r->n == 0)
		return 0;
	b = *r->p;
	r->p++;
	r->n--;
	return b;
}

/* A spec from 4 bytes; *bad: the directory must refuse it. */
static void
read_spec(reader *r, resil_endpoint_spec *s, unsigned *addr, int *bad)
{
	static const char *const zones[] = { NULL, "east", "west", "" };
	static const int32_t weights[] = { 0, 1, 100, -1 };
	unsigned a = next(r) % NADDR, z = next(r), w = next(r), f = next(r);

	*s = resil_endpoint_spec_default(addr_names[a]);
	*addr = a;
	s->zone = zones[z % 4];
	s->weight = weights[w % 4];
	s->tag = (f & 1) ? "canary" : NULL;
	s->mock = (f & 2) != 0;
	s->params = (f & 4) ? ((f & 8) ? "k" : "k=v&x=y") : NULL;
	s->start_time = (f & 16) ? 1 : 0;
	s->warmup = (f & 32) ? 1000000 : 0;
	*bad = s->weight < 0 || (s->zone != NULL && s->zone[0] == '\0') ||
	    ((f & 4) && (f & 8));
}

/* The model: the addresses in the directory's order and their mock flag. */
typedef struct model {
	unsigned addr[NADDR];
	int mock[NADDR];
	size_t n;
} model;

static long
model_find(const model *m, unsigned a)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->addr[i] == a)
			return (long)i;
	return -1;
}

static void
check_list(resil_directory *d, const model *m, const char *how)
{
	resil_endpoint_state st;
	unsigned a;

	FUZZ_CHECK(resil_directory_count(d) == m->n,
	    "%s: %zu endpoints, "
	    "the model has %zu",
	    how, resil_directory_count(d), m->n);
	for (a = 0; a < NADDR; a++) {
		long i = model_find(m, a);
		resil_err e = resil_directory_get_state(d, addr_names[a], &st);

		if (i < 0) {
			FUZZ_CHECK(e == RESIL_E_NOTFOUND,
			    "%s: %s absent, get_state %s", how, addr_names[a],
			    resil_err_name(e));
			continue;
		}
		FUZZ_CHECK(e == RESIL_OK && st.position == (size_t)i,
		    "%s: %s at %ld, get_state %s position %zu", how,
		    addr_names[a], i, resil_err_name(e), st.position);
	}
}

/* After an update: accepted (version + 1, the model applied) or refused
 * (nothing changed). */
/* Providers (non-mock entries) in the model. */
static size_t
model_live(const model *m)
{
	size_t i, k = 0;

	for (i = 0; i < m->n; i++)
		k += m->mock[i] == 0;
	return k;
}

static void
after_update(resil_directory *d, model *m, const model *want, resil_err e,
    resil_err expect, uint64_t version, const resil_diag *diag,
    const char *how)
{
	FUZZ_CHECK(e == expect, "%s: %s, expected %s (%s)", how,
	    resil_err_name(e), resil_err_name(expect), diag->msg);
	if (e != RESIL_OK) {
		FUZZ_CHECK(diag->msg[0] != '\0',
		    "%s: refused without a "
		    "message",
		    how);
		FUZZ_CHECK(resil_directory_version(d) == version,
		    "%s: refused, but the version moved", how);
		check_list(d, m, how);
		return;
	}
	FUZZ_CHECK(resil_directory_version(d) == version + 1,
	    "%s: version %llu after %llu", how,
	    (unsigned long long)resil_directory_version(d),
	    (unsigned long long)version);
	*m = *want;
	check_list(d, m, how);
}

typedef struct held {
	resil_pick pick;
	int on;
} held;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	resil_manual_clock mc;
	resil_directory_config dc;
	resil_breaker_config bc;
	resil_selector_config sc;
	resil_directory *d;
	resil_selector *sel;
	resil_candidates *c;
	reader r = { data, size };
	model m, want;
	held h;
	resil_diag diag;
	unsigned steps = 0;

	resil_manual_clock_init(&mc, 1);
	resil_directory_config_init(&dc);
	resil_breaker_config_init(&bc);
	bc.consecutive_failures = 2;
	bc.failure_rate_pct = 0;
	bc.open_wait_ns = 5000000000u;
	dc.endpoint_breaker = (size > 0 && (data[0] & 0x80)) ? &bc : NULL;
	dc.outlier.consecutive_failures = 3;
	dc.outlier.max_ejection_pct = 50;
	dc.clock = resil_manual_clock_hook(&mc);
	FUZZ_CHECK(resil_directory_new(&d, &dc, &diag) == RESIL_OK,
	    "directory: %s", diag.msg);
	resil_selector_config_init(&sc);
	sc.service = "S";
	sc.local_zone = "east";
	sc.balance.kind = (resil_lb_kind)(size > 1 ? data[1] % 7 : 0);
	FUZZ_CHECK(resil_selector_new(&sel, d, &sc, &diag) == RESIL_OK,
	    "selector: %s", diag.msg);
	FUZZ_CHECK(resil_candidates_new(&c, sel) == RESIL_OK, "candidates");
	memset(&m, 0, sizeof(m));
	memset(&h, 0, sizeof(h));

	while (r.n > 0 && steps++ < 256) {
		unsigned op = next(&r) % 7;
		resil_endpoint_spec specs[MAXN];
		unsigned addrs[MAXN];
		uint64_t version = resil_directory_version(d);
		resil_err e, expect = RESIL_OK;
		size_t n, i, j;
		int bad;

		diag.msg[0] = '\0';
		want = m;
		switch (op) {
		case 0: /* push */
			n = next(&r) % MAXN;
			want.n = 0;
			for (i = 0; i < n; i++) {
				read_spec(&r, &specs[i], &addrs[i], &bad);
				if (bad)
					expect = RESIL_E_INVAL;
				for (j = 0; j < i; j++)
					if (addrs[j] == addrs[i])
						expect = RESIL_E_INVAL;
			}
			/* Kept ones in their order, then new ones. */
			for (i = 0; i < m.n; i++)
				for (j = 0; j < n; j++)
					if (addrs[j] == m.addr[i]) {
						want.addr[want.n] = m.addr[i];
						want.mock[want.n++] =
						    specs[j].mock;
						break;
					}
			for (j = 0; j < n && expect == RESIL_OK; j++)
				if (model_find(&m, addrs[j]) < 0) {
					want.addr[want.n] = addrs[j];
					want.mock[want.n++] = specs[j].mock;
				}
			e = resil_directory_push(d, specs, n, &diag);
			if (expect == RESIL_OK && model_live(&m) > 0 &&
			    model_live(&want) == 0) {
				/* Empty protection: nothing changes. */
				FUZZ_CHECK(e == RESIL_OK, "empty push: %s",
				    resil_err_name(e));
				FUZZ_CHECK(
				    resil_directory_version(d) == version,
				    "empty push: the version moved");
				check_list(d, &m, "empty push");
				break;
			}
			after_update(
			    d, &m, &want, e, expect, version, &diag, "push");
			break;
		case 1: /* add */
			read_spec(&r, &specs[0], &addrs[0], &bad);
			if (bad || model_find(&m, addrs[0]) >= 0)
				expect = RESIL_E_INVAL;
			else {
				want.addr[want.n] = addrs[0];
				want.mock[want.n++] = specs[0].mock;
			}
			e = resil_directory_add(d, &specs[0], &diag);
			after_update(
			    d, &m, &want, e, expect, version, &diag, "add");
			break;
		case 2: { /* update */
			long at;

			read_spec(&r, &specs[0], &addrs[0], &bad);
			at = model_find(&m, addrs[0]);
			if (bad)
				expect = RESIL_E_INVAL;
			else if (at < 0)
				expect = RESIL_E_NOTFOUND;
			else
				want.mock[at] = specs[0].mock;
			e = resil_directory_update(d, &specs[0], &diag);
			/* A bad spec for an absent address: either answer. */
			if (bad && at < 0 && e == RESIL_E_NOTFOUND)
				expect = RESIL_E_NOTFOUND;
			after_update(
			    d, &m, &want, e, expect, version, &diag, "update");
			break;
		}
		case 3: { /* remove */
			unsigned a = next(&r) % NADDR;
			long at = model_find(&m, a);

			if (at < 0)
				expect = RESIL_E_NOTFOUND;
			else {
				for (i = (size_t)at; i + 1 < m.n; i++) {
					want.addr[i] = m.addr[i + 1];
					want.mock[i] = m.mock[i + 1];
				}
				want.n--;
			}
			e = resil_directory_remove(d, addr_names[a], &diag);
			after_update(
			    d, &m, &want, e, expect, version, &diag, "remove");
			break;
		}
		case 4:   /* route, pick, report */
		case 6: { /* pick and hold, or release the held one */
			resil_request req;
			resil_pick pick;
			resil_candidate cd;
			unsigned b = next(&r);
			size_t nc, nonmock = 0;
			resil_outcome out = (resil_outcome)(b % 3);
			static const char *const argv[] = { "vip-1" };

			if (op == 6 && h.on) {
				FUZZ_CHECK(resil_selector_release(
				               sel, &h.pick) == RESIL_OK,
				    "release");
				h.on = 0;
				break;
			}
			memset(&req, 0, sizeof(req));
			req.method = (b & 8) ? "getStock" : "reserve";
			req.args = argv;
			req.nargs = 1;
			req.tag = (b & 16) ? "canary" : NULL;
			e = resil_selector_route(sel, &req, c, &diag);
			for (i = 0; i < m.n; i++)
				nonmock += !m.mock[i];
			if (e == RESIL_E_NO_PROVIDER) {
				FUZZ_CHECK(diag.msg[0] != '\0',
				    "no provider without a message");
				break;
			}
			FUZZ_CHECK(e == RESIL_OK, "route: %s (%s)",
			    resil_err_name(e), diag.msg);
			nc = resil_candidates_count(c);
			FUZZ_CHECK(nc >= 1 && nc <= nonmock,
			    "%zu candidates of %zu endpoints", nc, nonmock);
			for (i = 0; i < nc; i++) {
				long at;
				unsigned a;

				FUZZ_CHECK(resil_candidates_get(c, i, &cd) ==
				        RESIL_OK,
				    "candidate %zu", i);
				for (a = 0; a < NADDR; a++)
					if (strcmp(cd.address,
					        addr_names[a]) == 0)
						break;
				at = a < NADDR ? model_find(&m, a) : -1;
				FUZZ_CHECK(at >= 0 && !m.mock[at],
				    "candidate %s: absent or mock",
				    cd.address);
				for (j = 0; j < i; j++) {
					resil_candidate o;

					resil_candidates_get(c, j, &o);
					FUZZ_CHECK(o.id != cd.id,
					    "candidate %s twice", cd.address);
				}
			}
			e = resil_selector_pick(
			    sel, c, &req, NULL, 0, &pick, &diag);
			if (e == RESIL_E_UNAVAILABLE)
				break; /* every breaker refused */
			FUZZ_CHECK(e == RESIL_OK, "pick: %s (%s)",
			    resil_err_name(e), diag.msg);
			for (i = 0; i < nc; i++) {
				resil_candidates_get(c, i, &cd);
				if (cd.id == pick.id)
					break;
			}
			FUZZ_CHECK(i < nc, "picked %s, not a candidate",
			    pick.address);
			resil_manual_clock_advance(&mc, 1000000u * (b >> 5));
			if (op == 6) {
				h.pick = pick;
				h.on = 1;
				break;
			}
			FUZZ_CHECK(
			    resil_selector_report(sel, &pick, out) == RESIL_OK,
			    "report");
			break;
		}
		default: /* the clock */
			resil_manual_clock_advance(
			    &mc, (uint64_t)next(&r) * 1000000000u);
			break;
		}
	}
	if (h.on)
		FUZZ_CHECK(resil_selector_report(sel, &h.pick,
		               RESIL_OUTCOME_SUCCESS) == RESIL_OK,
		    "report of the held pick");
	resil_candidates_free(c);
	resil_selector_free(sel);
	resil_directory_free(d);
	return 0;
}

/*
 * libFuzzer harness: reloading a running pipeline from configuration text
 * (resil_pipeline_reload_string), with and without a cluster.
 *
 * Input: byte 0 chooses the pipeline, the rest (up to its first NUL) is
 * the text of the reload.
 *   byte0 % 3:         0 a plain pipeline; 1 a failover cluster over
 *                      three endpoints; 2 a failback cluster
 *   (byte0 >> 2) & 3:  calls made before the reload (0..3)
 * The pipeline is built from a fixed base text (below) on a manual clock.
 * A twin (the same base, the same calls) is never reloaded.
 *
 * Properties:
 *   - the reload is accepted, or refused with RESIL_E_INVAL and a
 *     message; the text alone parses exactly when a reload of it passes
 *     the parser (a parse error is a reload error with the same message);
 *   - refused: nothing changed. The reloaded pipeline and its twin then
 *     answer a fixed sequence of calls identically (error, source, value,
 *     attempts, rc, breaker state, message, endpoint), give the same
 *     events and the same metrics, and their failback queues agree;
 *   - accepted with no call before it: the reloaded pipeline answers
 *     exactly as a new pipeline built from the same text does;
 *   - with calls before it, a call of the machine (resil_call_start) is
 *     out across the reload, accepted or not: it ends exactly as the
 *     twin's does (it runs on the settings it started with);
 *   - accepted: a reload of the same text again succeeds and reports
 *     "nothing changed"; a reload back to the base text succeeds;
 *   - no leak, no undefined behaviour (ASan, UBSan, LSan).
 */
#include <string.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/pipeline.h>
#include <resil/selector.h>

#include "fuzz.h"

#define NCALLS 14
#define NRECORDS 256

static const char base_text[] = "service=StockService\n"
                                "timeout=50ms\n"
                                "breaker.consecutive_failures=3\n"
                                "breaker.failure_rate=0\n"
                                "breaker.open_wait=20ms\n"
                                "retry.max_attempts=2\n"
                                "retry.delay=1ms\n"
                                "cache.max_age=1s\n"
                                "mock=fail:return null\n"
                                "getStock.type=string\n"
                                "getStock.mock=fail:return 'mocked'\n"
                                "reserve.retry.max_attempts=1\n";

/* The retry stage off: failback makes one attempt per endpoint, and a
 * retry stage with it is refused (issue 24.5). */
static const char failback_text[] = "cluster=failback\n"
                                    "retry.enabled=false\n"
                                    "failback.period=5ms\n"
                                    "failback.retries=2\n"
                                    "failback.queue=4\n";

/* One pipeline with everything it runs on. */
typedef struct world {
	resil_manual_clock mc;
	resil_directory *dir;
	resil_selector *sel;
	resil_pipeline *p;
	resil_pipeline_recorder rec;
	resil_pipeline_record records[NRECORDS];
	unsigned n; /* calls of the user's function */
} world;

static world worlds[3]; /* the reloaded one, its twin, a new one */

static const char *const addresses[] = { "10.0.0.1:20880", "10.0.0.2:20880",
	"10.0.0.3:20880" };

/* The user's function: 1 ms a call, every third call fails. */
static int
user_call(void *ctx, const resil_pick *endpoint, const resil_args *args,
    resil_value *out)
{
	world *w = ctx;
	char text[96];
	unsigned n = w->n++;

	resil_manual_clock_advance(&w->mc, 1000000);
	if (n % 3 == 1)
		return 7;
	snprintf(text, sizeof(text), "%s@%s#%u", args->method,
	    endpoint != NULL ? endpoint->address : "-", n);
	FUZZ_CHECK(
	    resil_value_string(out, text, strlen(text), NULL) == RESIL_OK,
	    "out of memory");
	return 0;
}

static resil_err
build_pipeline(world *w, const char *text, resil_diag *d)
{
	resil_config *conf;
	resil_pipeline_config cfg;
	resil_err e;

	e = resil_config_parse_string(&conf, text, "fuzz", NULL, d);
	if (e != RESIL_OK)
		return e;
	cfg = *resil_config_pipeline(conf);
	if (cfg.service == NULL)
		cfg.service = "StockService";
	cfg.clock = resil_manual_clock_hook(&w->mc);
	cfg.listener = resil_pipeline_recorder_listener;
	cfg.listener_ctx = &w->rec;
	cfg.selector = w->sel;
	e = resil_pipeline_new(&w->p, &cfg, d);
	resil_config_free(conf);
	return e;
}

/* The clock, the recorder and (mode 1, 2) the directory and selector;
 * with_base: the pipeline of the base text too. */
static void
world_init(world *w, int mode, int with_base)
{
	resil_directory_config dc;
	resil_selector_config sc;
	resil_endpoint_spec specs[3];
	resil_diag d;
	char text[sizeof(base_text) + sizeof(failback_text)];
	size_t i;

	memset(w, 0, sizeof(*w));
	resil_manual_clock_init(&w->mc, 1);
	resil_pipeline_recorder_init(&w->rec, w->records, NRECORDS);
	if (mode != 0) {
		resil_directory_config_init(&dc);
		dc.clock = resil_manual_clock_hook(&w->mc);
		FUZZ_CHECK(resil_directory_new(&w->dir, &dc, &d) == RESIL_OK,
		    "directory: %s", d.msg);
		for (i = 0; i < 3; i++) {
			specs[i] = resil_endpoint_spec_default(addresses[i]);
			specs[i].zone = i == 2 ? "west" : "east";
		}
		FUZZ_CHECK(
		    resil_directory_push(w->dir, specs, 3, &d) == RESIL_OK,
		    "push: %s", d.msg);
		resil_selector_config_init(&sc);
		sc.service = "StockService";
		sc.balance.kind = RESIL_LB_ROUNDROBIN;
		FUZZ_CHECK(
		    resil_selector_new(&w->sel, w->dir, &sc, &d) == RESIL_OK,
		    "selector: %s", d.msg);
	}
	if (!with_base)
		return;
	snprintf(text, sizeof(text), "%s%s", base_text,
	    mode == 2 ? failback_text : "");
	FUZZ_CHECK(build_pipeline(w, text, &d) == RESIL_OK, "base: %s", d.msg);
}

static void
world_free(world *w)
{
	resil_pipeline_free(w->p);
	resil_selector_free(w->sel);
	resil_directory_free(w->dir);
	w->p = NULL;
	w->sel = NULL;
	w->dir = NULL;
}

/* Call i of the fixed sequence; *r is the answer (the caller frees). */
static resil_err
call_one(world *w, unsigned i, resil_result *r)
{
	static const char *const methods[] = { "getStock", "reserve", "audit",
		"getStock", "m0", "ping" };
	static const char *const keys[] = { "k0", "k1", "k2" };
	resil_args args;

	args.method = methods[i % 6];
	args.data = keys[i % 3];
	args.len = 2;
	resil_result_init(r);
	if (i % 5 == 4)
		resil_manual_clock_advance(&w->mc, 30000000); /* 30 ms */
	return resil_pipeline_invoke(w->p, NULL, &args, user_call, w, r);
}

static void
same_result(
    const resil_result *a, const resil_result *b, unsigned i, const char *how)
{
	FUZZ_CHECK(a->err == b->err && a->source == b->source &&
	        a->rc == b->rc && a->attempts == b->attempts &&
	        a->cause == b->cause && a->breaker_state == b->breaker_state &&
	        a->last_failure == b->last_failure && a->age == b->age,
	    "%s: call %u: %s/%s rc %d x%u, then %s/%s rc %d x%u", how, i,
	    resil_err_name(a->err), resil_source_name(a->source), a->rc,
	    a->attempts, resil_err_name(b->err), resil_source_name(b->source),
	    b->rc, b->attempts);
	FUZZ_CHECK(resil_value_equal(&a->value, &b->value),
	    "%s: call %u: values differ", how, i);
	FUZZ_CHECK(strcmp(a->message, b->message) == 0 &&
	        strcmp(a->endpoint, b->endpoint) == 0 &&
	        strcmp(a->zone, b->zone) == 0,
	    "%s: call %u: \"%s\" (%s) then \"%s\" (%s)", how, i, a->message,
	    a->endpoint, b->message, b->endpoint);
}

/* The same calls on both: the same answers, events and metrics. */
static void
same_behaviour(world *a, world *b, const char *how)
{
	resil_pipeline_metrics ma, mb;
	size_t i, j, ran_a = 0, ran_b = 0;

	for (i = 0; i < NCALLS; i++) {
		resil_result ra, rb;
		resil_err ea = call_one(a, (unsigned)i, &ra);
		resil_err eb = call_one(b, (unsigned)i, &rb);

		FUZZ_CHECK(ea == ra.err && eb == rb.err,
		    "%s: invoke returned another code than out->err", how);
		same_result(&ra, &rb, (unsigned)i, how);
		resil_result_free(&ra);
		resil_result_free(&rb);
	}
	FUZZ_CHECK(resil_pipeline_failback_pending(a->p) ==
	        resil_pipeline_failback_pending(b->p),
	    "%s: failback queues differ", how);
	resil_manual_clock_advance(&a->mc, 10000000);
	resil_manual_clock_advance(&b->mc, 10000000);
	FUZZ_CHECK(
	    resil_pipeline_failback_poll(a->p, resil_manual_clock_now(&a->mc),
	        user_call, a, &ran_a) == RESIL_OK &&
	        resil_pipeline_failback_poll(b->p,
	            resil_manual_clock_now(&b->mc), user_call, b,
	            &ran_b) == RESIL_OK,
	    "%s: failback poll refused", how);
	FUZZ_CHECK(ran_a == ran_b, "%s: failback ran %zu, then %zu", how,
	    ran_a, ran_b);
	FUZZ_CHECK(resil_pipeline_get_metrics(a->p, &ma) == RESIL_OK &&
	        resil_pipeline_get_metrics(b->p, &mb) == RESIL_OK,
	    "metrics refused");
	FUZZ_CHECK(memcmp(&ma, &mb, sizeof(ma)) == 0,
	    "%s: metrics differ (calls %llu/%llu, live %llu/%llu)", how,
	    (unsigned long long)ma.calls, (unsigned long long)mb.calls,
	    (unsigned long long)ma.live, (unsigned long long)mb.live);
	/* The events, but the reload's own. */
	for (i = j = 0;; i++, j++) {
		while (i < a->rec.count &&
		    a->records[i].stage == RESIL_STAGE_CONFIG)
			i++;
		while (j < b->rec.count &&
		    b->records[j].stage == RESIL_STAGE_CONFIG)
			j++;
		if (i >= a->rec.count || j >= b->rec.count)
			break;
		FUZZ_CHECK(a->records[i].stage == b->records[j].stage &&
		        a->records[i].time == b->records[j].time &&
		        strcmp(a->records[i].text, b->records[j].text) == 0 &&
		        strcmp(a->records[i].method, b->records[j].method) ==
		            0,
		    "%s: event %zu: \"%s\", then \"%s\"", how, i,
		    a->records[i].text, b->records[j].text);
	}
	FUZZ_CHECK(i >= a->rec.count && j >= b->rec.count &&
	        a->rec.dropped == b->rec.dropped,
	    "%s: %zu events, then %zu", how, a->rec.count, b->rec.count);
}

/* ---- a call of the machine across the reload ---- */

static const resil_args machine_args = { "getStock", "k1", 2 };
static resil_call machine_calls[2];

static void
machine_start(world *w, resil_call *mc, resil_result *out, resil_call_next *st)
{
	FUZZ_CHECK(resil_call_start(mc, w->p, NULL, &machine_args, out,
	               resil_manual_clock_now(&w->mc), st) == RESIL_OK,
	    "call_start refused");
}

/* Drive the call to DONE: run each attempt, wait out each wait. */
static void
machine_finish(world *w, resil_call *mc, resil_call_next *st)
{
	unsigned k;

	for (k = 0; k < 64 && st->action != RESIL_CALL_DONE; k++) {
		uint64_t now = resil_manual_clock_now(&w->mc);

		if (st->action == RESIL_CALL_RUN) {
			resil_value v;
			int rc;

			resil_value_init(&v);
			rc = user_call(w, st->endpoint, &machine_args, &v);
			now = resil_manual_clock_now(&w->mc);
			FUZZ_CHECK(resil_call_report(mc, st->attempt, rc, &v,
			               now) == RESIL_OK,
			    "report refused");
			resil_value_free(&v);
		} else {
			FUZZ_CHECK(st->until != UINT64_MAX,
			    "a wait for nothing with no attempt out");
			if (st->until > now) {
				resil_manual_clock_set(&w->mc, st->until);
				now = st->until;
			}
		}
		FUZZ_CHECK(
		    resil_call_step(mc, now, st) == RESIL_OK, "step refused");
	}
	FUZZ_CHECK(st->action == RESIL_CALL_DONE, "the call never ended");
}

static const char *
last_event(const world *w)
{
	return w->rec.count > 0 ? w->records[w->rec.count - 1].text : "";
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	world *a = &worlds[0], *b = &worlds[1], *c = &worlds[2];
	char base[sizeof(base_text) + sizeof(failback_text)];
	resil_config *conf;
	resil_diag d, pd;
	resil_err e, pe;
	resil_result ma, mb;
	resil_call_next sa, sb;
	char *text;
	int mode, pre, i;

	if (size == 0)
		return 0;
	mode = data[0] % 3;
	pre = (data[0] >> 2) & 3;
	text = malloc(size);
	FUZZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	snprintf(base, sizeof(base), "%s%s", base_text,
	    mode == 2 ? failback_text : "");

	world_init(a, mode, 1);
	world_init(b, mode, 1);
	for (i = 0; i < pre; i++) {
		resil_result ra, rb;

		call_one(a, (unsigned)(100 + i), &ra);
		call_one(b, (unsigned)(100 + i), &rb);
		resil_result_free(&ra);
		resil_result_free(&rb);
	}
	/* With calls before: a call of the machine is out across the
	 * reload; it must end on the settings it started with, as in the
	 * twin. */
	if (pre > 0) {
		machine_start(a, &machine_calls[0], &ma, &sa);
		machine_start(b, &machine_calls[1], &mb, &sb);
	}

	d.msg[0] = '\0';
	e = resil_pipeline_reload_string(a->p, text, "fuzz", &d);
	pd.msg[0] = '\0';
	pe = resil_config_parse_string(&conf, text, "fuzz", NULL, &pd);
	if (pe == RESIL_OK)
		resil_config_free(conf);
	else
		FUZZ_CHECK(e == pe && strcmp(d.msg, pd.msg) == 0,
		    "the text is refused (%s), the reload says %s (%s)",
		    pd.msg, resil_err_name(e), d.msg);
	if (pre > 0) {
		machine_finish(a, &machine_calls[0], &sa);
		machine_finish(b, &machine_calls[1], &sb);
		same_result(&ma, &mb, 0, "a call across the reload");
		resil_result_free(&ma);
		resil_result_free(&mb);
	}

	if (e != RESIL_OK) {
		FUZZ_CHECK(e == RESIL_E_INVAL, "reload: %s (%s)",
		    resil_err_name(e), d.msg);
		FUZZ_CHECK(d.msg[0] != '\0', "refused without a message");
		same_behaviour(a, b, "refused reload");
	} else {
		FUZZ_CHECK(pe == RESIL_OK, "reload accepted a refused text");
		if (pre == 0) {
			world_init(c, mode, 0);
			d.msg[0] = '\0';
			e = build_pipeline(c, text, &d);
			FUZZ_CHECK(e == RESIL_OK,
			    "reloaded, but a new pipeline of the text is "
			    "refused: %s (%s)",
			    resil_err_name(e), d.msg);
			same_behaviour(a, c, "reloaded vs new");
			world_free(c);
		}
		d.msg[0] = '\0';
		e = resil_pipeline_reload_string(a->p, text, "fuzz", &d);
		FUZZ_CHECK(e == RESIL_OK, "the same text again: %s (%s)",
		    resil_err_name(e), d.msg);
		FUZZ_CHECK(strcmp(last_event(a),
		               "configuration reloaded: nothing changed") == 0,
		    "the same text again: \"%s\"", last_event(a));
		e = resil_pipeline_reload_string(a->p, base, "base", &d);
		FUZZ_CHECK(e == RESIL_OK, "back to the base: %s (%s)",
		    resil_err_name(e), d.msg);
		for (i = 0; i < 4; i++) {
			resil_result ra;

			call_one(a, (unsigned)i, &ra);
			resil_result_free(&ra);
		}
	}
	world_free(a);
	world_free(b);
	free(text);
	return 0;
}

/*
 * Issue 38.3 (DESIGN, decided in turn 4): a refusal by the consumer's own
 * limits (its rate limiter, its bulkhead) is never a failure of the
 * dependency. No breaker (the service's, an endpoint's), outlier detection
 * or retry counts it as one, with or without a selector, through both
 * drivers (the blocking call and the call machine).
 *
 * Each case runs the same configuration text with and without a
 * selector, the limiter refusing many calls: before the fix, with a
 * selector the service breaker recorded each refused call as a failure
 * of the whole call and opened though no provider ever failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/call.h>
#include <resil/config.h>
#include <resil/pipeline.h>

#define MS RESIL_NS_PER_MS
#define NEP 3

static const char *const addr[NEP] = { "e0:1", "e1:1", "e2:1" };

/* The service breaker trips at 50% of 4 calls, an endpoint's breaker and
 * outlier detection at 2 failures in a row; failover retries twice. */
#define BASE                                        \
	"service=StockService\n"                    \
	"cluster=failover\n"                        \
	"retries=2\n"                               \
	"loadbalance=roundrobin\n"                  \
	"breaker.enabled=true\n"                    \
	"breaker.min_calls=4\n"                     \
	"breaker.failure_rate=50\n"                 \
	"breaker.consecutive_failures=2\n"          \
	"endpoint.breaker.consecutive_failures=2\n" \
	"outlier.consecutive_failures=2\n"          \
	"outlier.max_ejection_pct=100\n"

#define RATELIMIT                  \
	"ratelimit.enabled=true\n" \
	"ratelimit.rate=2\n"       \
	"ratelimit.period=1s\n"    \
	"ratelimit.burst=2\n"

#define BULKHEAD                  \
	"bulkhead.enabled=true\n" \
	"bulkhead.max_concurrent=1\n"

typedef struct fx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_directory *d;
	resil_selector *sel;
	resil_pipeline *p;
	resil_diag diag;
	resil_pipeline_record rec[256];
	resil_pipeline_recorder r;
	int machine; /* drive calls through resil_call_* */
	int nest;    /* calls to make from inside the next attempt */
	int limited; /* calls answered RESIL_E_LIMITED */
	int ran;     /* attempts that reached the user's function */
	char msg[RESIL_DIAG_MAX]; /* the last call's message */
} fx;

static void
fx_start(fx *x, const char *text, int selector, int machine)
{
	resil_endpoint_spec specs[NEP];
	resil_directory_config dc;
	resil_selector_config sc;
	resil_pipeline_config pc;
	size_t i;

	memset(x, 0, sizeof(*x));
	x->machine = machine;
	resil_manual_clock_init(&x->mc, 1000 * MS);
	if (resil_config_parse_string(
	        &x->conf, text, "svc.conf", NULL, &x->diag) != RESIL_OK)
		fail_msg("config: %s", x->diag.msg);
	pc = *resil_config_pipeline(x->conf);
	pc.clock = resil_manual_clock_hook(&x->mc);
	resil_pipeline_recorder_init(&x->r, x->rec, 256);
	pc.listener = resil_pipeline_recorder_listener;
	pc.listener_ctx = &x->r;
	if (selector) {
		resil_directory_config_init(&dc);
		dc.clock = resil_manual_clock_hook(&x->mc);
		(void)resil_config_directory(x->conf, &dc);
		assert_int_equal(
		    resil_directory_new(&x->d, &dc, &x->diag), RESIL_OK);
		(void)resil_config_selector(x->conf, &sc);
		assert_int_equal(
		    resil_selector_new(&x->sel, x->d, &sc, &x->diag),
		    RESIL_OK);
		for (i = 0; i < NEP; i++) {
			specs[i] = resil_endpoint_spec_default(addr[i]);
			specs[i].zone = i < 2 ? "hz" : "sh";
		}
		assert_int_equal(
		    resil_directory_push(x->d, specs, NEP, &x->diag),
		    RESIL_OK);
		pc.selector = x->sel;
	}
	if (resil_pipeline_new(&x->p, &pc, &x->diag) != RESIL_OK)
		fail_msg("pipeline: %s", x->diag.msg);
}

static void
fx_end(fx *x)
{
	resil_pipeline_free(x->p);
	resil_selector_free(x->sel);
	resil_directory_free(x->d);
	resil_config_free(x->conf);
}

static resil_err one_call(fx *x);

/* The provider: always answers. From inside an attempt it makes the
 * nested calls it was asked for (the bulkhead is then full). */
static int
provider(
    void *ctx, const resil_pick *ep, const resil_args *args, resil_value *out)
{
	fx *x = ctx;
	int n = x->nest;

	(void)ep;
	(void)args;
	x->ran++;
	x->nest = 0;
	while (n-- > 0)
		assert_int_equal(one_call(x), RESIL_E_LIMITED);
	*out = resil_value_int(1);
	return 0;
}

static int
plain(void *ctx, const resil_args *args, resil_value *out)
{
	return provider(ctx, NULL, args, out);
}

/* One call to its end, through the blocking driver or the machine. */
static resil_err
one_call(fx *x)
{
	resil_invocation inv;
	resil_result r;
	resil_err err;

	resil_invocation_init(&inv, "getStock");
	if (!x->machine) {
		err = x->sel != NULL
		    ? resil_pipeline_invoke_ex(
		          x->p, NULL, &inv, provider, x, &r)
		    : resil_pipeline_call(x->p, &inv.args, plain, x, &r);
	} else {
		resil_call c;
		resil_call_next st;
		uint64_t now = resil_manual_clock_now(&x->mc);

		memset(&c, 0, sizeof(c));
		assert_int_equal(
		    resil_call_start_ex(&c, x->p, NULL, &inv, &r, now, &st),
		    RESIL_OK);
		while (st.action != RESIL_CALL_DONE) {
			if (st.action == RESIL_CALL_RUN) {
				resil_value v;
				uint32_t id = st.attempt;

				(void)provider(x, st.endpoint, &inv.args, &v);
				assert_int_equal(
				    resil_call_report(&c, id, 0, &v, now),
				    RESIL_OK);
			} else if (st.until > now) {
				resil_manual_clock_advance(
				    &x->mc, st.until - now);
				now = st.until;
			}
			assert_int_equal(
			    resil_call_step(&c, now, &st), RESIL_OK);
		}
		err = r.err;
	}
	x->limited += err == RESIL_E_LIMITED;
	snprintf(x->msg, sizeof(x->msg), "%s", r.message);
	resil_result_free(&r);
	return err;
}

/* No failure was counted anywhere: the service breaker, each endpoint's
 * breaker and outlier detection saw none, and no retry was made. */
static void
nothing_failed(fx *x)
{
	resil_breaker_metrics bm;
	resil_endpoint_state es;
	size_t i;

	for (i = 0; i < x->r.count; i++)
		if (x->rec[i].stage == RESIL_STAGE_RETRY ||
		    x->rec[i].stage == RESIL_STAGE_BREAKER)
			fail_msg(
			    "an event after refusals: %s", x->rec[i].text);

	assert_int_equal(
	    resil_breaker_get_metrics(resil_pipeline_breaker(x->p, NULL), &bm),
	    RESIL_OK);
	if (bm.state != RESIL_BREAKER_CLOSED || bm.failures != 0)
		fail_msg("service breaker %s with %llu failures after %d "
		         "refusals by the consumer's own limits (%s, %s)",
		    resil_breaker_state_name(bm.state),
		    (unsigned long long)bm.failures, x->limited,
		    x->sel != NULL ? "selector" : "no selector",
		    x->machine ? "call machine" : "blocking call");
	if (x->d == NULL)
		return;
	for (i = 0; i < NEP; i++) {
		assert_int_equal(
		    resil_directory_get_state(x->d, addr[i], &es), RESIL_OK);
		assert_int_equal(es.streak, 0);
		assert_int_equal(es.ejections, 0);
		assert_false(es.ejected);
		assert_int_equal(es.breaker, RESIL_BREAKER_CLOSED);
		assert_int_equal(es.active, 0);
		assert_int_equal(
		    resil_breaker_get_metrics(
		        resil_directory_breaker(x->d, addr[i]), &bm),
		    RESIL_OK);
		assert_int_equal(bm.failures, 0);
	}
}

static void
test_pipeline_ratelimit_refusals_are_not_failures(void **state)
{
	int selector, machine, k;
	fx x;

	(void)state;
	for (selector = 0; selector < 2; selector++)
		for (machine = 0; machine < 2; machine++) {
			fx_start(&x, BASE RATELIMIT, selector, machine);
			/* Two calls a second: the first two pass, the next
			 * 18 are refused, and no retry is made for them. */
			for (k = 0; k < 20; k++)
				(void)one_call(&x);
			assert_int_equal(x.limited, 18);
			assert_int_equal(x.ran, 2);
			nothing_failed(&x);
			/* The next second: calls pass again. */
			resil_manual_clock_advance(&x.mc, 1000 * MS);
			assert_int_equal(one_call(&x), RESIL_OK);
			nothing_failed(&x);
			fx_end(&x);
		}
}

static void
test_pipeline_bulkhead_refusals_are_not_failures(void **state)
{
	int selector, machine, k;
	fx x;

	(void)state;
	for (selector = 0; selector < 2; selector++)
		for (machine = 0; machine < 2; machine++) {
			fx_start(&x, BASE BULKHEAD, selector, machine);
			/* Each call makes 5 calls while it holds the one
			 * place: all 5 are refused. */
			for (k = 0; k < 4; k++) {
				x.nest = 5;
				assert_int_equal(one_call(&x), RESIL_OK);
			}
			assert_int_equal(x.limited, 20);
			assert_int_equal(x.ran, 4);
			nothing_failed(&x);
			fx_end(&x);
		}
}

/* Every strategy over a selector: a refusal is the caller's answer
 * (failsafe does not swallow it, failback does not queue it, broadcast
 * does not count it toward its threshold), and nothing counts it. */
static void
test_pipeline_refusals_in_every_strategy(void **state)
{
	static const char *const strategies[] = { "failover", "failfast",
		"failsafe", "failback", "broadcast", "forking", "zone-aware" };
	char text[1024];
	size_t i;
	int machine, k;
	fx x;

	(void)state;
	for (i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++)
		for (machine = 0; machine < 2; machine++) {
			snprintf(text, sizeof(text),
			    "service=StockService\n"
			    "cluster=%s\n"
			    "zone=hz\n"
			    "breaker.enabled=true\n"
			    "breaker.consecutive_failures=2\n"
			    "endpoint.breaker.consecutive_failures=2\n"
			    "outlier.consecutive_failures=2\n"
			    "outlier.max_ejection_pct=100\n"
			    "ratelimit.enabled=true\n"
			    "ratelimit.rate=1\n"
			    "ratelimit.period=1s\n"
			    "ratelimit.burst=1\n",
			    strategies[i]);
			if (!machine && strcmp(strategies[i], "forking") == 0)
				continue; /* blocking: needs an executor */
			fx_start(&x, text, 1, machine);
			/* The first call takes the token (a broadcast's or
			 * forking's second endpoint is refused already). */
			for (k = 0; k < 10; k++) {
				resil_err e = one_call(&x);

				if (e != RESIL_E_LIMITED &&
				    (k > 0 || e != RESIL_OK))
					fail_msg(
					    "cluster=%s: call %d answered "
					    "%s",
					    strategies[i], k,
					    resil_err_name(e));
			}
			assert_true(x.ran <= 1);
			assert_int_equal(
			    resil_pipeline_failback_pending(x.p), 0);
			nothing_failed(&x);
			fx_end(&x);
		}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_pipeline_ratelimit_refusals_are_not_failures),
		cmocka_unit_test(
		    test_pipeline_bulkhead_refusals_are_not_failures),
		cmocka_unit_test(test_pipeline_refusals_in_every_strategy),
	};

	return cmocka_run_group_tests_name(
	    "pipeline_limits", tests, NULL, NULL);
}

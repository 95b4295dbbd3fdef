/*
 * Key combinations that were accepted and unused, or contradictory
 * (issue 24.5; docs/config.md "Combinations", lib/config_check.c): each
 * refused as `origin:line: key: message`, or accepted with a note the
 * caller reads in diag, exactly; the combinations that are used stay
 * accepted with diag empty.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <resil/config.h>

#define UNTOUCHED "untouched"

/* Parse text as svc.conf: its return code, the message in diag. */
static resil_err
parse(const char *text, resil_diag *d)
{
	resil_config *c = NULL;
	resil_err err;

	strcpy(d->msg, UNTOUCHED);
	err = resil_config_parse_string(&c, text, "svc.conf", NULL, d);
	if (err == RESIL_OK)
		assert_non_null(c);
	else
		assert_null(c);
	resil_config_free(c);
	return err;
}

static void
refused(const char *text, const char *msg)
{
	resil_diag d;

	assert_int_equal(parse(text, &d), RESIL_E_INVAL);
	assert_string_equal(d.msg, msg);
}

static void
accepted(const char *text, const char *note)
{
	resil_diag d;

	assert_int_equal(parse(text, &d), RESIL_OK);
	/* A note, or nothing: diag is emptied on success. */
	assert_string_equal(d.msg, note != NULL ? note : "");
}

/* retries= is failover's (and zone-aware's): with a strategy that makes
 * one attempt per endpoint nothing reads it, selector or not. */
static void
test_retries_with_one_attempt_strategies(void **state)
{
	static const char *const names[] = { "failfast", "failsafe",
		"failback", "broadcast", "forking" };
	char text[256], msg[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(text, sizeof(text),
		    "service=S\ncluster=%s\nloadbalance=roundrobin\n"
		    "retries=3\n",
		    names[i]);
		snprintf(msg, sizeof(msg),
		    "svc.conf:4: retries: read by cluster=failover and "
		    "zone-aware only (cluster=%s makes one attempt per "
		    "endpoint)",
		    names[i]);
		refused(text, msg);
	}
	/* The same without a selector key (failfast's one implicit
	 * endpoint), and per method. */
	refused("service=S\nretries=1\ncluster=failfast\n",
	    "svc.conf:2: retries: read by cluster=failover and zone-aware "
	    "only (cluster=failfast makes one attempt per endpoint)");
	refused("service=S\ncluster=forking\nloadbalance=random\n"
	        "getStock.retries=2\n",
	    "svc.conf:4: getStock.retries: read by cluster=failover and "
	    "zone-aware only (cluster=forking makes one attempt per "
	    "endpoint)");
	/* Failover and zone-aware read it. */
	accepted("service=S\nloadbalance=roundrobin\nretries=3\n", NULL);
	accepted("service=S\ncluster=zone-aware\nzone=hz\n"
	         "loadbalance=roundrobin\nretries=1\n",
	    NULL);
}

/* With a selector the attempts are the cluster's: the retry stage's
 * max_attempts (the service's or a method's) would be ignored. */
static void
test_max_attempts_with_selector(void **state)
{
	(void)state;
	refused("service=S\nloadbalance=roundrobin\nretry.max_attempts=4\n",
	    "svc.conf:3: retry.max_attempts: with a selector the attempts "
	    "are the cluster's: retries=N (N + 1 attempts); the retry stage "
	    "lends failover its backoff, deadline and budget only");
	refused("service=S\nrouter.condition=method = getStock => tag = a\n"
	        "getStock.retry.max_attempts=4\n",
	    "svc.conf:3: getStock.retry.max_attempts: with a selector the "
	    "attempts are the cluster's: getStock.retries=N (N + 1 "
	    "attempts)");
	/* The retry stage's backoff with failover's retries is used. */
	accepted("service=S\nloadbalance=roundrobin\nretries=2\n"
	         "retry.delay=10ms\n",
	    NULL);
	accepted(
	    "service=S\nloadbalance=roundrobin\ngetStock.retries=2\n", NULL);
	/* Without a selector key it is the retry stage's, used. */
	accepted("service=S\nretry.max_attempts=4\n"
	         "getStock.retry.max_attempts=2\n",
	    NULL);
}

/* The retry stage with failfast, failsafe, failback, broadcast, forking:
 * one attempt per endpoint, so the stage is refused at the line of
 * retry.enabled, or of the key that switched it on. */
static void
test_retry_stage_with_one_attempt_strategies(void **state)
{
	(void)state;
	refused("service=S\ncluster=failfast\nretry.enabled=true\n",
	    "svc.conf:3: retry.enabled: cluster=failfast makes one attempt "
	    "per endpoint: the retry stage (retry.enabled) is failover's");
	refused("service=S\nloadbalance=roundrobin\nretry.delay=5ms\n"
	        "cluster=forking\n",
	    "svc.conf:3: retry.delay: cluster=forking makes one attempt per "
	    "endpoint: the retry stage (retry.enabled) is failover's");
	refused("service=S\nloadbalance=roundrobin\ncluster=failback\n"
	        "retry.max_attempts=2\n",
	    "svc.conf:4: retry.max_attempts: cluster=failback makes one "
	    "attempt per endpoint: the retry stage (retry.enabled) is "
	    "failover's");
	/* The stage switched off: nothing is unused that was meant. */
	accepted("service=S\ncluster=failsafe\nretry.enabled=false\n"
	         "retry.delay=5ms\n",
	    NULL);
}

/* Without any selector key the text cannot know whether the program
 * gives the pipeline a selector: the cluster's retries are accepted with
 * a note in diag. */
static void
test_notes_without_selector_keys(void **state)
{
	(void)state;
	accepted("service=S\nretries=5\n",
	    "svc.conf:2: note: retries: 5 is the cluster's failover retries "
	    "(6 attempts), read only with a selector (the text has no "
	    "selector key); without one the attempts are retry.max_attempts");
	accepted("service=S\ntimeout=1s\ngetStock.retries=3\n",
	    "svc.conf:3: note: getStock.retries: the cluster's retries for "
	    "getStock (4 attempts); the text has no selector key: without a "
	    "selector they go to the one endpoint, with the retry stage's "
	    "waits (retry.delay)");
}

/* resil_config_set: the same rules, the message without origin:line, and
 * the config unchanged. */
static void
test_set_and_reload(void **state)
{
	resil_config *c = NULL;
	resil_diag d;
	char buf[32];

	(void)state;
	assert_int_equal(
	    resil_config_parse_string(&c,
	        "service=S\nloadbalance=roundrobin\n", "svc.conf", NULL, &d),
	    RESIL_OK);
	assert_int_equal(
	    resil_config_set(c, "retry.max_attempts", "4", &d), RESIL_E_INVAL);
	assert_string_equal(d.msg,
	    "retry.max_attempts: with a selector the attempts are the "
	    "cluster's: retries=N (N + 1 attempts); the retry stage lends "
	    "failover its backoff, deadline and budget only");
	assert_int_equal(
	    resil_config_get(c, "retry.enabled", buf, sizeof(buf)), RESIL_OK);
	assert_string_equal(buf, "false");
	assert_int_equal(resil_config_set(c, "retries", "4", &d), RESIL_OK);
	resil_config_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_retries_with_one_attempt_strategies),
		cmocka_unit_test(test_max_attempts_with_selector),
		cmocka_unit_test(test_retry_stage_with_one_attempt_strategies),
		cmocka_unit_test(test_notes_without_selector_keys),
		cmocka_unit_test(test_set_and_reload),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

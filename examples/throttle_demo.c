/*
 * Adaptive client throttling (resil/throttle.h): a backend that turns
 * overloaded and refuses three calls in four; the throttle sheds part of
 * the load on the client before it is sent, and lets everything through
 * again once the backend is healthy: less and less is shed as the
 * accepts come back and the window forgets the refusals.
 */
#include <stdio.h>

#include <resil/clock.h>
#include <resil/throttle.h>

/* One phase of calls, 10 ms apart: the backend accepts a call when
 * n % every == 0 (every 1: all of them). */
static void
phase(resil_throttle *t, resil_manual_clock *mc, const char *name, int calls,
    int every)
{
	resil_throttle_metrics m;
	int i, sent = 0, shed = 0;

	for (i = 0; i < calls; i++) {
		resil_manual_clock_advance(mc, 10 * RESIL_NS_PER_MS);
		if (resil_throttle_admit(t) != RESIL_OK) {
			shed++;
			continue;
		}
		sent++;
		resil_throttle_report(t,
		    sent % every == 0 ? RESIL_THROTTLE_ACCEPTED
		                      : RESIL_THROTTLE_REJECTED);
	}
	resil_throttle_get_metrics(t, &m);
	printf("%-10s sent %4d, shed locally %4d, p now %.3f\n", name, sent,
	    shed, m.reject_probability);
}

int
main(void)
{
	resil_throttle_config cfg = resil_throttle_config_default();
	resil_manual_clock mc;
	resil_throttle *t;
	resil_diag diag;

	resil_manual_clock_init(&mc, 0);
	cfg.clock = resil_manual_clock_hook(&mc);
	cfg.seed = 42;
	/* A 10 s window in 10 buckets, k = 2 (the SRE book's). */
	if (resil_throttle_config_set(&cfg, "throttle.window", "10s", &diag) !=
	        RESIL_OK ||
	    resil_throttle_config_set(&cfg, "throttle.buckets", "10", &diag) !=
	        RESIL_OK ||
	    resil_throttle_new(&t, &cfg, &diag) != RESIL_OK) {
		fprintf(stderr, "%s\n", diag.msg);
		return 1;
	}
	phase(t, &mc, "healthy", 100, 1);
	phase(t, &mc, "overloaded", 1000, 4);
	phase(t, &mc, "recovering", 500, 1);
	phase(t, &mc, "recovered", 500, 1);
	resil_throttle_free(t);
	return 0;
}

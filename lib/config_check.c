/*
 * The combinations of configuration keys that would be accepted and
 * unused, or would contradict each other (issue 24.5; docs/config.md,
 * "Combinations"). lib/config.c records the keys concerned as it reads
 * them (resil__combo_key) and, once the pipeline configuration is built,
 * asks here (resil__combo_check): a combination that is wrong whatever
 * the program does is refused as `origin:line: key: message`; one that is
 * wrong only if the program gives no selector (the text cannot know) is
 * accepted with a note in diag, which the caller can read after RESIL_OK.
 *
 * One meaning for the attempts keys (Dubbo's):
 * - `retries=N` and `<method>.retries=N` are the cluster's retries:
 *   N + 1 attempts by failover (and zone-aware's phase 1), for the
 *   service or for that method. The other strategies make one attempt
 *   per endpoint and never read them.
 * - `retry.max_attempts` and `<method>.retry.max_attempts` are the retry
 *   stage's attempts: read by a pipeline without a selector. With a
 *   selector the attempts are the cluster's (the retry stage lends its
 *   backoff, deadline and budget to failover only).
 */
#include <stdio.h>
#include <string.h>

#include "config_keys.h"
#include "pipeline_config.h"

/* Which of the keys below a recorded key is, and what it names. */
enum {
	CK_RETRIES = 0,        /* retries= */
	CK_MAX_ATTEMPTS = 1,   /* retry.max_attempts= */
	CK_RETRY_ENABLED = 2,  /* retry.enabled= */
	CK_M_RETRIES = 3,      /* <method>.retries= */
	CK_M_MAX_ATTEMPTS = 4, /* <method>.retry.max_attempts= */
	CK_RETRY_OTHER = 5,    /* any other retry.* key */
	CK_HEDGE_MAX = 6       /* hedge.max= */
};

void
resil__combo_init(resil__combo *c)
{
	memset(c, 0, sizeof(*c));
}

void
resil__combo_key(
    resil__combo *c, const char *key, const char *method, unsigned line)
{
	resil__combo_entry *e;
	size_t ml = method != NULL ? strlen(method) : 0;
	int kind;

	if (key == NULL)
		return;
	if (method != NULL && strncmp(key, method, ml) == 0 &&
	    key[ml] == '.') {
		const char *rest = key + ml + 1;

		if (strcmp(rest, "retries") == 0)
			kind = CK_M_RETRIES;
		else if (strcmp(rest, "retry.max_attempts") == 0)
			kind = CK_M_MAX_ATTEMPTS;
		else
			return;
	} else if (strcmp(key, "retries") == 0) {
		kind = CK_RETRIES;
	} else if (strcmp(key, "retry.max_attempts") == 0) {
		kind = CK_MAX_ATTEMPTS;
	} else if (strcmp(key, "retry.enabled") == 0) {
		/* Whether it turned the stage on is the built
		 * configuration's to say (retry_enabled). */
		kind = CK_RETRY_ENABLED;
	} else if (strncmp(key, "retry.", 6) == 0) {
		kind = CK_RETRY_OTHER;
	} else if (strcmp(key, "hedge.max") == 0) {
		kind = CK_HEDGE_MAX;
	} else {
		return;
	}
	if (c->n >= sizeof(c->e) / sizeof(c->e[0]))
		return; /* more than a text sensibly has: the first ones */
	e = &c->e[c->n++];
	e->kind = kind;
	e->line = line;
	snprintf(e->key, sizeof(e->key), "%s", key);
	snprintf(
	    e->method, sizeof(e->method), "%s", method != NULL ? method : "");
}

/* Whether strategy s reads the retries (failover, zone-aware's phase 1). */
static int
fails_over(resil_cluster_strategy s)
{
	return s == RESIL_CLUSTER_FAILOVER || s == RESIL_CLUSTER_ZONE_AWARE;
}

/* The first recorded entry of kind k at or after *from, or NULL. */
static const resil__combo_entry *
find(const resil__combo *c, int k, size_t *from)
{
	size_t i;

	for (i = *from; i < c->n; i++)
		if (c->e[i].kind == k) {
			*from = i + 1;
			return &c->e[i];
		}
	*from = c->n;
	return NULL;
}

/* The retry stage switched on where the strategy makes one attempt: the
 * line of retry.enabled=true, else of the stage's first key. */
static const resil__combo_entry *
retry_switch(const resil__combo *c)
{
	size_t at = 0, k;
	const resil__combo_entry *e = find(c, CK_RETRY_ENABLED, &at);

	if (e != NULL)
		return e;
	for (k = 0; k < c->n; k++)
		if (c->e[k].kind == CK_RETRY_OTHER ||
		    c->e[k].kind == CK_MAX_ATTEMPTS)
			return &c->e[k];
	return NULL;
}

/* The attempts of declared method name in pc (0: none of its own). */
static uint32_t
method_attempts(const resil_pipeline_config *pc, const char *name)
{
	size_t i;

	for (i = 0; i < pc->nmethods; i++)
		if (pc->methods[i].name != NULL &&
		    strcmp(pc->methods[i].name, name) == 0)
			return pc->methods[i].max_attempts;
	return 0;
}

/* The refusals: wrong whatever the program adds. */
static resil_err
refusals(const resil__combo *c, const char *origin,
    const resil_pipeline_config *pc, int selector, resil_diag *diag)
{
	const char *sname = resil_cluster_strategy_name(pc->cluster.strategy);
	const resil__combo_entry *e;
	size_t at = 0;

	if (!fails_over(pc->cluster.strategy)) {
		/* One attempt per endpoint: nothing reads retries. */
		if ((e = find(c, CK_RETRIES, &at)) != NULL ||
		    (at = 0, e = find(c, CK_M_RETRIES, &at)) != NULL)
			return resil__config_fail(diag, origin, e->line,
			    "%s: read by cluster=failover and zone-aware only "
			    "(cluster=%s makes one attempt per endpoint)",
			    e->key, sname);
		if (pc->retry_enabled && (e = retry_switch(c)) != NULL)
			return resil__config_fail(diag, origin, e->line,
			    "%s: cluster=%s makes one attempt per endpoint: "
			    "the retry stage (retry.enabled) is failover's",
			    e->key, sname);
	}
	if (!selector)
		return RESIL_OK;
	at = 0;
	/* resil_pipeline_new() refuses it with forking and broadcast; say
	 * it here, with its line (issue 38.6; hedging across endpoints,
	 * issue 43). */
	if (pc->hedge_max != 0 && (e = find(c, CK_HEDGE_MAX, &at)) != NULL &&
	    (pc->cluster.strategy == RESIL_CLUSTER_FORKING ||
	        pc->cluster.strategy == RESIL_CLUSTER_BROADCAST))
		return resil__config_fail(diag, origin, e->line,
		    "%s: cluster=%s makes its own parallel or serial attempts; "
		    "hedging runs with failover, failfast, failsafe, failback "
		    "or zone-aware",
		    e->key,
		    resil_cluster_strategy_name(pc->cluster.strategy));
	at = 0;
	if ((e = find(c, CK_MAX_ATTEMPTS, &at)) != NULL && pc->retry_enabled)
		return resil__config_fail(diag, origin, e->line,
		    "%s: with a selector the attempts are the cluster's: "
		    "retries=N (N + 1 attempts); the retry stage lends "
		    "failover its backoff, deadline and budget only",
		    e->key);
	at = 0;
	if ((e = find(c, CK_M_MAX_ATTEMPTS, &at)) != NULL)
		return resil__config_fail(diag, origin, e->line,
		    "%s: with a selector the attempts are the cluster's: "
		    "%s.retries=N (N + 1 attempts)",
		    e->key, e->method);
	return RESIL_OK;
}

resil_err
resil__combo_check(const resil__combo *c, const char *origin,
    const resil_pipeline_config *pc, int selector, resil_diag *diag)
{
	const resil__combo_entry *e;
	resil_diag d;
	size_t at = 0;
	resil_err err;

	if (c == NULL || pc == NULL)
		return RESIL_OK;
	err = refusals(c, origin, pc, selector, diag);
	if (err != RESIL_OK || diag == NULL)
		return err;
	d.msg[0] = '\0';
	if (selector) {
		diag->msg[0] = '\0';
		return RESIL_OK;
	}
	/* No selector key: the program may still give the pipeline a
	 * selector, so the cluster's retries are accepted, with a note. */
	if ((e = find(c, CK_RETRIES, &at)) != NULL)
		(void)resil__config_fail(&d, origin, e->line,
		    "note: %s: %d is the cluster's failover retries (%d "
		    "attempts), read only with a selector (the text has no "
		    "selector key); without one the attempts are "
		    "retry.max_attempts",
		    e->key, (int)pc->cluster.retries,
		    (int)pc->cluster.retries + 1);
	else if ((at = 0, e = find(c, CK_M_RETRIES, &at)) != NULL)
		(void)resil__config_fail(&d, origin, e->line,
		    "note: %s: the cluster's retries for %s (%u attempts); "
		    "the text has no selector key: without a selector they go "
		    "to the one endpoint, with the retry stage's waits "
		    "(retry.delay)",
		    e->key, e->method,
		    (unsigned)method_attempts(pc, e->method));
	/* A note, if any, comes on success; none: diag is empty. */
	memcpy(diag->msg, d.msg, sizeof(d.msg));
	return RESIL_OK;
}

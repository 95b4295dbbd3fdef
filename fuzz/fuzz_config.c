/*
 * libFuzzer harness: the configuration parser (resil_config_parse_string)
 * and its get/set round trip.
 *
 * Input: configuration text (up to its first NUL). Properties:
 *   - the text is accepted, or refused with RESIL_E_INVAL, a message and
 *     *out untouched;
 *   - an accepted config gives a pipeline configuration;
 *   - set back: for every key (stage keys, service, mock, and the four
 *     keys of each declared method), resil_config_set(key, get(key))
 *     succeeds and leaves every key's get unchanged;
 *   - text back: the text "key=get(key)" of every key parses to a config
 *     whose every get is the same again;
 *   - entries back: the text of the settings as listed by
 *     resil_config_entry() (selector keys included) parses to a config
 *     with the same gets, and the same selector and directory keys;
 *   - the selector and directory configs (resil_config_selector,
 *     resil_config_directory) pass their validations and build a
 *     directory and a selector.
 */
#include <string.h>

#include <resil/config.h>
#include <resil/directory.h>
#include <resil/selector.h>

#include "fuzz.h"

/* Every key of lib/config_keys.c's table, the enabled switches first so that
 * setting a stage key back never switches its stage on. */
static const char *const stage_keys[] = { "breaker.enabled", "retry.enabled",
	"cache.enabled", "ratelimit.enabled", "bulkhead.enabled", "service",
	"timeout", "mock", "breaker.per_method",
	"breaker.consecutive_failures", "breaker.failure_rate",
	"breaker.slow_rate", "breaker.slow_threshold", "breaker.min_calls",
	"breaker.window", "breaker.window_size", "breaker.bucket",
	"breaker.open_wait", "breaker.open_wait_multiplier",
	"breaker.open_wait_max", "breaker.probes",
	"breaker.reopen_on_first_failure", "breaker.max_half_open",
	"retry.max_attempts", "retry.backoff", "retry.delay",
	"retry.multiplier", "retry.max_delay", "retry.jitter",
	"retry.jitter_factor", "retry.seed", "retry.deadline", "retry.on_open",
	"retry.on_limited", "retry.fail_after_max_attempts",
	"retry.budget_ratio", "retry.budget_max_tokens",
	"retry.budget_min_retries", "retry.budget_period", "cache.max_entries",
	"cache.max_bytes", "cache.max_age", "cache.shards", "ratelimit.rate",
	"ratelimit.period", "ratelimit.burst", "bulkhead.max_concurrent",
	"bulkhead.adaptive", "bulkhead.min_limit", "bulkhead.max_limit",
	"bulkhead.target_latency", "bulkhead.increase", "bulkhead.backoff_pct",
	"ratelimit.batch", "bulkhead.batch", "hedge.max", "hedge.delay",
	"cluster", "retries", "forks", "broadcast.fail.percent",
	"failback.queue", "failback.retries", "failback.period", "zone",
	"cross_zone_timeout" };
#define NSTAGE (sizeof(stage_keys) / sizeof(stage_keys[0]))

static const char *const method_keys[] = { "type", "timeout",
	"retry.max_attempts", "mock", "retries" };
#define NMETHOD_KEYS 5

#define VALUE_MAX 4096

/* Every key of a config and its value (NULL: get says NOTFOUND). */
typedef struct snapshot {
	size_t n;
	char **key;
	char **value;
} snapshot;

static char *
str_dup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *c = malloc(n);

	FUZZ_CHECK(c != NULL, "out of memory");
	memcpy(c, s, n);
	return c;
}

static void
snap_add(snapshot *sn, const resil_config *conf, const char *key)
{
	char buf[VALUE_MAX];
	resil_err e = resil_config_get(conf, key, buf, sizeof(buf));

	FUZZ_CHECK(e == RESIL_OK || e == RESIL_E_NOTFOUND, "get %s: %s", key,
	    resil_err_name(e));
	sn->key[sn->n] = str_dup(key);
	sn->value[sn->n] = e == RESIL_OK ? str_dup(buf) : NULL;
	sn->n++;
}

static void
snap_take(snapshot *sn, const resil_config *conf)
{
	const resil_pipeline_config *pc = resil_config_pipeline(conf);
	size_t cap, i, k;

	FUZZ_CHECK(pc != NULL, "no pipeline configuration");
	cap = NSTAGE + NMETHOD_KEYS * pc->nmethods;
	sn->n = 0;
	sn->key = calloc(cap, sizeof(char *));
	sn->value = calloc(cap, sizeof(char *));
	FUZZ_CHECK(sn->key != NULL && sn->value != NULL, "out of memory");
	for (i = 0; i < NSTAGE; i++)
		snap_add(sn, conf, stage_keys[i]);
	for (i = 0; i < pc->nmethods; i++) {
		for (k = 0; k < NMETHOD_KEYS; k++) {
			char key[VALUE_MAX];

			snprintf(key, sizeof(key), "%s.%s",
			    pc->methods[i].name, method_keys[k]);
			snap_add(sn, conf, key);
		}
	}
}

static void
snap_free(snapshot *sn)
{
	size_t i;

	for (i = 0; i < sn->n; i++) {
		free(sn->key[i]);
		free(sn->value[i]);
	}
	free(sn->key);
	free(sn->value);
}

static void
snap_same(const snapshot *a, const snapshot *b, const char *how)
{
	size_t i;

	FUZZ_CHECK(a->n == b->n, "%s: %zu keys, then %zu", how, a->n, b->n);
	for (i = 0; i < a->n; i++) {
		FUZZ_CHECK(strcmp(a->key[i], b->key[i]) == 0, "%s: key %s/%s",
		    how, a->key[i], b->key[i]);
		FUZZ_CHECK((a->value[i] == NULL) == (b->value[i] == NULL) &&
		        (a->value[i] == NULL ||
		            strcmp(a->value[i], b->value[i]) == 0),
		    "%s: %s was \"%s\", is \"%s\"", how, a->key[i],
		    a->value[i] ? a->value[i] : "(unset)",
		    b->value[i] ? b->value[i] : "(unset)");
	}
}

/* A value that text can carry back: trimmed of blanks, one line. */
static int
text_safe(const char *v)
{
	size_t n = strlen(v);

	if (n > 0 &&
	    (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' ||
	        v[n - 1] == '\t'))
		return 0;
	return strchr(v, '\n') == NULL && strchr(v, '\r') == NULL;
}

/* The text of conf's settings as resil_config_entry() lists them; NULL
 * when a value cannot be carried by text. */
static char *
entries_text(const resil_config *conf)
{
	size_t n = resil_config_count(conf), i, cap = 1, len = 0;
	resil_config_setting st;
	char *out;

	for (i = 0; i < n; i++) {
		FUZZ_CHECK(resil_config_entry(conf, i, &st) == RESIL_OK,
		    "entry %zu of %zu", i, n);
		FUZZ_CHECK(st.key != NULL && st.value != NULL &&
		        st.origin != NULL && st.line > 0,
		    "entry %zu: no key, value or line", i);
		if (!text_safe(st.value))
			return NULL;
		cap += strlen(st.key) + strlen(st.value) + 2;
	}
	FUZZ_CHECK(resil_config_entry(conf, n, &st) == RESIL_E_NOTFOUND,
	    "an entry past the count");
	out = malloc(cap);
	FUZZ_CHECK(out != NULL, "out of memory");
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		resil_config_entry(conf, i, &st);
		len += (size_t)snprintf(
		    out + len, cap - len, "%s=%s\n", st.key, st.value);
	}
	return out;
}

/* The selector and directory that conf describes: validated and built. */
static void
build_cluster(const resil_config *conf)
{
	resil_directory_config dc;
	resil_selector_config sc;
	resil_directory *dir = NULL;
	resil_selector *sel = NULL;
	resil_diag d;
	int has_s, has_d;

	resil_directory_config_init(&dc);
	has_d = resil_config_directory(conf, &dc);
	has_s = resil_config_selector(conf, &sc);
	FUZZ_CHECK(has_s == has_d, "selector keys %d, directory keys %d",
	    has_s, has_d);
	d.msg[0] = '\0';
	FUZZ_CHECK(resil_directory_config_validate(&dc, &d) == RESIL_OK,
	    "the directory config of an accepted text: %s", d.msg);
	FUZZ_CHECK(resil_selector_config_validate(&sc, &d) == RESIL_OK,
	    "the selector config of an accepted text: %s", d.msg);
	FUZZ_CHECK(resil_directory_new(&dir, &dc, &d) == RESIL_OK,
	    "directory of an accepted text: %s", d.msg);
	FUZZ_CHECK(resil_selector_new(&sel, dir, &sc, &d) == RESIL_OK,
	    "selector of an accepted text: %s", d.msg);
	resil_selector_free(sel);
	resil_directory_free(dir);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	resil_config *conf = NULL, *back = NULL, *sentinel;
	snapshot before, after, reparsed;
	resil_diag d;
	resil_err e;
	char *text, *out;
	size_t i, len, cap;
	int textable = 1;

	text = malloc(size + 1);
	FUZZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data, size);
	text[size] = '\0';

	sentinel = (resil_config *)&d; /* any non-NULL pointer */
	conf = sentinel;
	d.msg[0] = '\0';
	e = resil_config_parse_string(&conf, text, "fuzz", NULL, &d);
	free(text);
	if (e != RESIL_OK) {
		FUZZ_CHECK(e == RESIL_E_INVAL, "parse: %s", resil_err_name(e));
		FUZZ_CHECK(conf == sentinel, "*out changed on error");
		FUZZ_CHECK(d.msg[0] != '\0', "refused without a message");
		return 0;
	}
	FUZZ_CHECK(conf != sentinel && conf != NULL, "no config");
	snap_take(&before, conf);
	build_cluster(conf);

	/* The settings as listed, as text again. */
	out = entries_text(conf);
	if (out != NULL) {
		resil_selector_config s1, s2;

		d.msg[0] = '\0';
		e = resil_config_parse_string(&back, out, "entries", NULL, &d);
		FUZZ_CHECK(e == RESIL_OK,
		    "text of the entries refused: %s\n%s", d.msg, out);
		snap_take(&reparsed, back);
		snap_same(&before, &reparsed, "entries back");
		snap_free(&reparsed);
		FUZZ_CHECK(
		    resil_config_count(back) == resil_config_count(conf),
		    "entries back: %zu settings, then %zu",
		    resil_config_count(conf), resil_config_count(back));
		FUZZ_CHECK(resil_config_selector(conf, &s1) ==
		            resil_config_selector(back, &s2) &&
		        s1.balance.kind == s2.balance.kind &&
		        s1.nmethods == s2.nmethods &&
		        s1.nconditions == s2.nconditions &&
		        s1.panic_threshold_pct == s2.panic_threshold_pct &&
		        s1.tag_force == s2.tag_force &&
		        s1.zone_mode == s2.zone_mode,
		    "entries back: another selector");
		resil_config_free(back);
		back = NULL;
		free(out);
	}

	/* Set every key back to its own value, in place. */
	for (i = 0; i < before.n; i++) {
		if (before.value[i] == NULL)
			continue;
		d.msg[0] = '\0';
		e = resil_config_set(conf, before.key[i], before.value[i], &d);
		FUZZ_CHECK(e == RESIL_OK, "set %s=\"%s\" back: %s (%s)",
		    before.key[i], before.value[i], resil_err_name(e), d.msg);
		if (!text_safe(before.value[i]))
			textable = 0;
	}
	snap_take(&after, conf);
	snap_same(&before, &after, "set back");
	snap_free(&after);

	/* The same settings as text, in a fresh config. */
	if (textable) {
		cap = 1;
		for (i = 0; i < before.n; i++)
			if (before.value[i] != NULL)
				cap += strlen(before.key[i]) +
				    strlen(before.value[i]) + 2;
		out = malloc(cap);
		FUZZ_CHECK(out != NULL, "out of memory");
		len = 0;
		for (i = 0; i < before.n; i++) {
			if (before.value[i] == NULL)
				continue;
			len += (size_t)snprintf(out + len, cap - len,
			    "%s=%s\n", before.key[i], before.value[i]);
		}
		d.msg[0] = '\0';
		e = resil_config_parse_string(&back, out, "back", NULL, &d);
		FUZZ_CHECK(e == RESIL_OK, "text of the gets refused: %s\n%s",
		    d.msg, out);
		snap_take(&reparsed, back);
		snap_same(&before, &reparsed, "text back");
		snap_free(&reparsed);
		resil_config_free(back);
		free(out);
	}
	snap_free(&before);
	resil_config_free(conf);
	return 0;
}

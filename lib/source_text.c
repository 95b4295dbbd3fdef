/*
 * The registry source's keys in configuration text (resil_source_text,
 * include/resil/source.h): registry=, registry.*, and issue 40's
 * application=, check=. Moved out of lib/source.c (issue 40) so that
 * each room stays under the house's 2000 lines.
 */
#include "duration.h"
#include "source_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- configuration text
 * ------------------------------------------------------ */

#define NKEYS 8

struct resil_source_text {
	resil_allocator a;
	char *s[NKEYS]; /* registry service group version root protocols
	                 * file application */
	int has_s[NKEYS];
	uint64_t interval;
	int has_interval;
	uint32_t timeout;
	int has_timeout;
	int routes;
	int has_routes;
	int flag[3]; /* registry.register, registry.overrides, check */
	int has_flag[3];
	uint64_t check_timeout;
	int has_check_timeout;
	int any;
	int none; /* registry=N/A */
};

static const char *const str_keys[] = { "registry", "registry.service",
	"registry.group", "registry.version", "registry.root",
	"registry.protocols", "registry.file" };

resil_err
resil_source_text_new(resil_source_text **out, const resil_allocator *alloc)
{
	const resil_allocator *a = resil__allocator(alloc);
	resil_source_text *st;

	if (out == NULL)
		return RESIL_E_INVAL;
	if ((st = resil__calloc(a, sizeof(*st))) == NULL)
		return RESIL_E_NOMEM;
	st->a = *a;
	*out = st;
	return RESIL_OK;
}

void
resil_source_text_free(resil_source_text *st)
{
	size_t i;

	if (st == NULL)
		return;
	for (i = 0; i < NKEYS; i++)
		resil__strfree(&st->a, st->s[i]);
	resil__free(&st->a, st, sizeof(*st));
}

/* As the selector's keys: a bare number is ms; or ns us ms s m h. */
static int
parse_ms_dur(const char *s, uint64_t *ns)
{
	static const struct {
		const char *u;
		uint64_t mul;
	} units[] = { { "ns", 1 }, { "us", RESIL_NS_PER_US },
		{ "ms", RESIL_NS_PER_MS }, { "s", RESIL_NS_PER_SEC },
		{ "m", 60 * RESIL_NS_PER_SEC },
		{ "h", 3600 * RESIL_NS_PER_SEC } };
	uint64_t x = 0, mul = RESIL_NS_PER_MS;
	size_t i, n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		if (x > (UINT64_MAX - 9) / 10)
			return 0;
		x = x * 10 + (uint64_t)(s[n] - '0');
		n++;
	}
	if (n == 0)
		return 0;
	if (s[n] != '\0') {
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(s + n, units[i].u) == 0)
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return 0;
		mul = units[i].mul;
	}
	if (x > UINT64_MAX / mul)
		return 0;
	*ns = x * mul;
	return 1;
}

static resil_err
text_set(resil_source_text *st, const char *key, const char *value,
    resil_diag *diag)
{
	resil_source_config probe;
	uint64_t ns;
	size_t i;
	int b;

	/* Dubbo's "N/A": no registry (direct connections). */
	if (strcmp(key, "registry") == 0 &&
	    (strcmp(value, "N/A") == 0 || strcmp(value, "n/a") == 0)) {
		resil__strfree(&st->a, st->s[0]);
		st->s[0] = NULL;
		st->has_s[0] = 1;
		st->none = 1;
		return RESIL_OK;
	}
	for (i = 0; i < sizeof(str_keys) / sizeof(str_keys[0]); i++) {
		char *copy;

		if (strcmp(key, str_keys[i]) != 0)
			continue;
		/* Checked as the config would be. */
		resil_source_config_init(&probe);
		probe.registry = "zookeeper://127.0.0.1:2181";
		probe.service = "x";
		probe.directory = (resil_directory *)(uintptr_t)1;
		if (i == 0)
			probe.registry = value;
		else if (i == 1)
			probe.service = value;
		else if (i == 2)
			probe.group = value;
		else if (i == 3)
			probe.version = value;
		else if (i == 4)
			probe.root = value;
		else if (i == 5)
			probe.protocols = value;
		else if (i == 6)
			probe.file = value;
		if (resil_source_config_validate(&probe, diag) != RESIL_OK)
			return RESIL_E_INVAL;
		/* An empty group or version means "none". */
		copy = NULL;
		if (!((i == 2 || i == 3) && value[0] == '\0') &&
		    (copy = resil__strdup(&st->a, value)) == NULL)
			return RESIL_E_NOMEM;
		resil__strfree(&st->a, st->s[i]);
		st->s[i] = copy;
		st->has_s[i] = 1;
		if (i == 0)
			st->none = 0;
		return RESIL_OK;
	}
	if (strcmp(key, "registry.file.interval") == 0) {
		if (!parse_ms_dur(value, &ns))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%s\" is not a duration (500, 500ms, 1s)",
			    key, value);
		st->interval = ns;
		st->has_interval = 1;
		return RESIL_OK;
	}
	if (strcmp(key, "registry.session_timeout") == 0) {
		if (!parse_ms_dur(value, &ns) || ns < RESIL_NS_PER_MS ||
		    ns / RESIL_NS_PER_MS > (uint64_t)INT32_MAX)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%s\" is not a duration of 1ms.."
			    "2147483647ms",
			    key, value);
		st->timeout = (uint32_t)(ns / RESIL_NS_PER_MS);
		st->has_timeout = 1;
		return RESIL_OK;
	}
	if (strcmp(key, "application") == 0) {
		/* Dubbo's application.name: a name, no blank, no '&'. */
		if (value[0] == '\0' || strpbrk(value, " \t&=/?") != NULL)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%s\" is not an application name", key,
			    value);
		resil__strfree(&st->a, st->s[7]);
		if ((st->s[7] = resil__strdup(&st->a, value)) == NULL)
			return RESIL_E_NOMEM;
		st->has_s[7] = 1;
		return RESIL_OK;
	}
	if (strcmp(key, "registry.check.timeout") == 0) {
		if (!parse_ms_dur(value, &ns) || ns == 0)
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%s\" is not a duration above 0 (3000, "
			    "3s)",
			    key, value);
		st->check_timeout = ns;
		st->has_check_timeout = 1;
		return RESIL_OK;
	}
	if (strcmp(key, "registry.register") == 0 ||
	    strcmp(key, "registry.overrides") == 0 ||
	    strcmp(key, "check") == 0) {
		int which = key[0] == 'c' ? 2 : key[9] == 'r' ? 0 : 1;

		if (!resil__parse_bool(value, &b))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%s\" is not a boolean", key, value);
		st->flag[which] = b;
		st->has_flag[which] = 1;
		return RESIL_OK;
	}
	if (strcmp(key, "registry.routes") == 0) {
		if (!resil__parse_bool(value, &b))
			return resil__diagf(diag, RESIL_E_INVAL,
			    "%s: \"%s\" is not a boolean", key, value);
		st->routes = b;
		st->has_routes = 1;
		return RESIL_OK;
	}
	return resil__diagf(diag, RESIL_E_NOTFOUND, "%s: unknown key", key);
}

resil_err
resil_source_text_set(resil_source_text *st, const char *key,
    const char *value, const char *origin, unsigned line, resil_diag *diag)
{
	resil_err err;

	if (st == NULL || key == NULL || value == NULL)
		return resil__diagf(diag, RESIL_E_INVAL, "source text: NULL");
	err = text_set(st, key, value, diag);
	if (err == RESIL_OK)
		st->any = 1;
	return resil__diag_at(diag, err, origin, line);
}

int
resil_source_text_present(const resil_source_text *st)
{
	return st != NULL && st->any && !st->none;
}

void
resil_source_text_config(const resil_source_text *st, resil_source_config *out)
{
	if (st == NULL || out == NULL)
		return;
	if (st->has_s[0])
		out->registry = st->s[0];
	if (st->has_s[1])
		out->service = st->s[1];
	if (st->has_s[2])
		out->group = st->s[2];
	if (st->has_s[3])
		out->version = st->s[3];
	if (st->has_s[4])
		out->root = st->s[4];
	if (st->has_s[5])
		out->protocols = st->s[5];
	if (st->has_s[6])
		out->file = st->s[6];
	if (st->has_interval)
		out->file_interval_ns = st->interval;
	if (st->has_timeout)
		out->session_timeout_ms = st->timeout;
	if (st->has_routes)
		out->routes = st->routes;
	if (st->has_s[7])
		out->application = st->s[7];
	if (st->has_flag[0])
		out->register_consumer = st->flag[0];
	if (st->has_flag[1])
		out->overrides = st->flag[1];
	if (st->has_flag[2])
		out->check = st->flag[2];
	if (st->has_check_timeout)
		out->check_timeout_ns = st->check_timeout;
}

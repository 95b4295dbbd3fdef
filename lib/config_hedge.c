/*
 * hedge.on= (issue 43): a comma-separated list of failure, timeout and
 * rejected (each at most once), or none. Stored as its complement,
 * resil_pipeline_config.hedge_fatal, so that 0 (a zeroed config) keeps
 * every failure a reason to hedge.
 */
#include "config_hedge.h"

#include <string.h>

#include <resil/pipeline.h>

static const struct {
	const char *name;
	unsigned bit;
} kinds[] = {
	{ "failure", RESIL_HEDGE_ON_FAILURE },
	{ "timeout", RESIL_HEDGE_ON_TIMEOUT },
	{ "rejected", RESIL_HEDGE_ON_REJECTED },
};

#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

resil_err
resil__hedge_on_read(
    const keydef *k, const keyval *kv, void *field, resil_diag *diag)
{
	const char *v = kv->value;
	unsigned on = 0, fatal;
	size_t i;

	(void)k;
	if (strcmp(v, "none") == 0) {
		fatal = RESIL_HEDGE_ON_ALL;
		memcpy(field, &fatal, sizeof(fatal));
		return RESIL_OK;
	}
	while (*v != '\0') {
		const char *end = strchr(v, ',');
		size_t n = end != NULL ? (size_t)(end - v) : strlen(v);

		for (i = 0; i < NKINDS; i++)
			if (strlen(kinds[i].name) == n &&
			    memcmp(kinds[i].name, v, n) == 0)
				break;
		if (i == NKINDS)
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%.*s\" is not one of failure, timeout, "
			    "rejected (a comma-separated list), or none",
			    kv->key, (int)(n < 64 ? n : 64), v);
		if (on & kinds[i].bit)
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: %s is listed twice", kv->key, kinds[i].name);
		on |= kinds[i].bit;
		if (end == NULL)
			break;
		v = end + 1;
		if (*v == '\0')
			return resil__config_fail(diag, kv->origin, kv->line,
			    "%s: \"%s\" ends with a comma", kv->key,
			    kv->value);
	}
	if (on == 0)
		return resil__config_fail(diag, kv->origin, kv->line,
		    "%s: empty: list failure, timeout, rejected, or say none",
		    kv->key);
	fatal = RESIL_HEDGE_ON_ALL & ~on;
	memcpy(field, &fatal, sizeof(fatal));
	return RESIL_OK;
}

resil_err
resil__hedge_on_write(
    const keydef *k, const void *field, char *buf, size_t len)
{
	unsigned fatal, on;
	size_t i, used = 0;

	(void)k;
	memcpy(&fatal, field, sizeof(fatal));
	on = RESIL_HEDGE_ON_ALL & ~fatal;
	if (len == 0)
		return RESIL_E_INVAL;
	buf[0] = '\0';
	if (on == 0) {
		if (len < 5)
			return RESIL_E_INVAL;
		memcpy(buf, "none", 5);
		return RESIL_OK;
	}
	for (i = 0; i < NKINDS; i++) {
		size_t n = strlen(kinds[i].name), sep = used > 0;

		if (!(on & kinds[i].bit))
			continue;
		if (used + sep + n >= len)
			return RESIL_E_INVAL;
		if (sep)
			buf[used++] = ',';
		memcpy(buf + used, kinds[i].name, n + 1);
		used += n;
	}
	return RESIL_OK;
}

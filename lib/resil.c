/*
 * resil core: error strings, version, outcome classes and the default
 * allocator. The private helpers every source uses are lib/internal.c's.
 */
#include <resil/resil.h>

#include "internal.h"

const char *
resil_strerror(resil_err err)
{
	switch (err) {
#define XX(name, value, text) \
	case RESIL_##name:    \
		return text;
		RESIL_ERR_MAP(XX)
#undef XX
	}
	return "unknown resil error";
}

const char *
resil_err_name(resil_err err)
{
	switch (err) {
#define XX(name, value, text) \
	case RESIL_##name:    \
		return "RESIL_" #name;
		RESIL_ERR_MAP(XX)
#undef XX
	}
	return "RESIL_E_UNKNOWN";
}

unsigned
resil_version(void)
{
	return RESIL_VERSION_NUM;
}

const char *
resil_version_string(void)
{
	return RESIL_VERSION_STRING;
}

const char *
resil_outcome_name(resil_outcome outcome)
{
	switch (outcome) {
	case RESIL_OUTCOME_SUCCESS:
		return "success";
	case RESIL_OUTCOME_FAILURE:
		return "failure";
	case RESIL_OUTCOME_IGNORED:
		return "ignored";
	case RESIL_OUTCOME_BUSINESS:
		return "business";
	}
	return "unknown";
}

resil_outcome
resil_classify_default(int rc, const void *value, void *ctx)
{
	(void)value;
	(void)ctx;
	return rc == 0 ? RESIL_OUTCOME_SUCCESS : RESIL_OUTCOME_FAILURE;
}

resil_outcome
resil_classify(const resil_classifier *cls, int rc, const void *value)
{
	resil_outcome o;

	if (cls == NULL || cls->fn == NULL)
		return resil_classify_default(rc, value, NULL);
	o = cls->fn(rc, value, cls->ctx);
	/* A classifier that returns garbage must not steer the state
	 * machines into undefined territory: treat it as a failure. */
	if ((unsigned)o > (unsigned)RESIL_OUTCOME_BUSINESS)
		return RESIL_OUTCOME_FAILURE;
	return o;
}

const resil_allocator *
resil_allocator_default(void)
{
	return resil__allocator(NULL);
}

/*
 * resil_source_attach_pipeline (include/resil/source.h, issue 40): the
 * configuration functions the override rules rebuild a pipeline's
 * configuration with, handed to the source as pointers. lib/config.c uses
 * the source's rooms, so they must not use it back (tools/lint/house.py:
 * no circle); this file sits above both.
 */
#include "configurator.h"

static const resil__ov_conf_ops config_ops = {
	resil_config_parse_string,
	resil_config_set,
	resil_config_pipeline,
	resil_config_free,
	resil_config_count,
	resil_config_entry,
};

resil_err
resil_source_attach_pipeline(resil_registry_source *src,
    struct resil_pipeline *p, const struct resil_config *base,
    resil_diag *diag)
{
	return resil__source_attach(src, p, base, &config_ops, diag);
}

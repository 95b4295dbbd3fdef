/*
 * hedge.on= (issue 43): the kinds of failure that allow a hedge, read
 * into resil_pipeline_config.hedge_fatal (the others) and written back.
 */
#ifndef RESIL_CONFIG_HEDGE_H
#define RESIL_CONFIG_HEDGE_H

#include "config_keys.h"

resil_err resil__hedge_on_read(
    const keydef *k, const keyval *kv, void *field, resil_diag *diag);
resil_err resil__hedge_on_write(
    const keydef *k, const void *field, char *buf, size_t len);

#endif /* RESIL_CONFIG_HEDGE_H */

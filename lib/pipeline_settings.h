/*
 * The settings a call runs with (lib/pipeline_settings.c): built from a
 * configuration at creation and at each reload, carrying over the stage
 * objects whose configuration did not change, and freed once no call
 * holds them. Never installed.
 */
#ifndef RESIL_PIPELINE_SETTINGS_H
#define RESIL_PIPELINE_SETTINGS_H

#include "pipeline_internal.h"

/*
 * Settings from cfg (validated) into *out. old: the current ones, whose
 * stage objects are carried over where their configuration did not
 * change (NULL at creation). Nothing of old or of p's calls changes here;
 * the handles of newly declared names are made (they stay, harmless, on
 * failure).
 */
resil_err resil__settings_build(resil_pipeline *p,
    const resil_pipeline_config *cfg, const settings *old, settings **out,
    resil_diag *diag);

/* Issue 41: g's methods lose the call machine's simple phase (a keyed
 * pipeline's, lib/call_keyed.c; before its first call). */
void resil__settings_no_phase(settings *g);

/* old was replaced (under mock_lock): it is freed now if no call holds
 * it, else by a later reload; so are earlier ones no call holds any
 * more. */
void resil__settings_retire(resil_pipeline *p, settings *old);

/* Free g and its shell, when no call can reach it (creation failed, or
 * the pipeline is being freed). NULL is a no-op. */
void resil__settings_free(settings *g);

/* Whether two stage configurations are the same setting (the fields the
 * pipeline does not replace with its own: clock, allocator, listener,
 * classifier). resil__same_retry leaves max_attempts aside. */
int resil__same_breaker(
    const resil_breaker_config *a, const resil_breaker_config *b);
int resil__same_retry(
    const resil_retry_config *a, const resil_retry_config *b);
int resil__same_cache(
    const resil_cache_config *a, const resil_cache_config *b);
int resil__same_ratelimit(
    const resil_ratelimit_config *a, const resil_ratelimit_config *b);
int resil__same_bulkhead(
    const resil_bulkhead_config *a, const resil_bulkhead_config *b);

#endif /* RESIL_PIPELINE_SETTINGS_H */

/*
 * A pipeline made from configuration text on a manual clock at 1000
 * (tests of keys that only the text sets, e.g. KIND.key.shared). Header-only.
 */
#ifndef RESIL_TEST_TEXT_PIPELINE_H
#define RESIL_TEST_TEXT_PIPELINE_H

#include <string.h>

#include <resil/clock.h>
#include <resil/config.h>
#include <resil/pipeline.h>

typedef struct pfx {
	resil_manual_clock mc;
	resil_config *conf;
	resil_pipeline *p;
} pfx;

/* RESIL_OK with x->p made from text ("k.conf"); else the parse's or
 * resil_pipeline_new's error in *diag, nothing held. */
static inline resil_err
pipe_start(pfx *x, const char *text, resil_diag *diag)
{
	resil_pipeline_config cfg;
	resil_err err;

	memset(x, 0, sizeof(*x));
	resil_manual_clock_init(&x->mc, 1000);
	err = resil_config_parse_string(&x->conf, text, "k.conf", NULL, diag);
	if (err != RESIL_OK)
		return err;
	cfg = *resil_config_pipeline(x->conf);
	cfg.clock = resil_manual_clock_hook(&x->mc);
	err = resil_pipeline_new(&x->p, &cfg, diag);
	if (err != RESIL_OK)
		resil_config_free(x->conf);
	return err;
}

static inline void
pipe_end(pfx *x)
{
	resil_pipeline_free(x->p);
	resil_config_free(x->conf);
}

#endif

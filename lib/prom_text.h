/*
 * The Prometheus text exposition format (version 0.0.4): one writer for
 * the registry's text and the keyed families' (lib/registry.c,
 * lib/keyed_prom.c). The text goes to a sink in chunks of at most
 * RESIL__PROM_CHUNK bytes; a sink that returns nonzero stops the writer
 * (what follows is dropped). Not thread-safe: one writer per text.
 */
#ifndef RESIL_PROM_TEXT_H
#define RESIL_PROM_TEXT_H

#include <stddef.h>
#include <stdint.h>

#define RESIL__PROM_CHUNK 1024

typedef int (*resil__prom_sink)(const char *chunk, size_t n, void *ctx);

typedef struct resil__prom {
	resil__prom_sink fn;
	void *ctx;
	int stopped;
	size_t n;
	char buf[RESIL__PROM_CHUNK];
} resil__prom;

void resil__prom_init(resil__prom *w, resil__prom_sink fn, void *ctx);
/* Send what is buffered; nonzero when the sink stopped the text. */
int resil__prom_flush(resil__prom *w);
void resil__prom_put(resil__prom *w, const char *s, size_t n);
void resil__prom_puts(resil__prom *w, const char *s);
void resil__prom_u64(resil__prom *w, uint64_t v);
/* A float: NaN, +Inf and -Inf spelt as the format wants, else %.6g. */
void resil__prom_double(resil__prom *w, double v);
/* A label value from a C string: \ " and newline escaped. */
void resil__prom_escaped(resil__prom *w, const char *s);
/*
 * A label value from a key's bytes (docs/keyed.md, "Seen"), unambiguous:
 * a backslash is written as two (\\ in the value, \\\\ in the text), a
 * byte of no valid UTF-8 sequence and a control byte other than newline
 * (0x00..0x1f, 0x7f) as \xNN (lower-case hex), a key spelt exactly
 * __other__ or __overflow__ with its first byte as \x5f (the value
 * __other__ is the sum of the keys without a series of their own,
 * __overflow__ the family's overflow instance); valid UTF-8 passes as it
 * is.
 * Then the format's own escapes (\\, \", \n).
 */
void resil__prom_key(resil__prom *w, const uint8_t *key, size_t n);
/* # HELP and # TYPE lines of one metric family. */
void resil__prom_head(
    resil__prom *w, const char *name, const char *type, const char *help);

#endif

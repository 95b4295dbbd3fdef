/*
 * The keys of configuration text (lib/config_keys.c): what each key is
 * (its stage, its kind of value, the field of resil_pipeline_config it
 * sets and its range), which key a line names (a stage key, a method key
 * or a selector key), and how a value of each kind is read into its
 * field, with the checks and messages, and written back as text. The
 * table drives both: the parser (lib/config.c) and resil_config_get().
 * Never installed.
 */
#ifndef RESIL_CONFIG_KEYS_H
#define RESIL_CONFIG_KEYS_H

#include <resil/config.h>

#include "internal.h"

/* The stages a key may belong to: each has an enabled switch. */
enum stage {
	ST_NONE = 0,
	ST_BREAKER,
	ST_RETRY,
	ST_CACHE,
	ST_RATELIMIT,
	ST_BULKHEAD,
	ST_THROTTLE, /* issue 42 */
	ST_COUNT
};

/* The kinds of value a key has. */
enum kind {
	K_ENABLED, /* <stage>.enabled */
	K_BOOL,    /* an int field */
	K_U32,
	K_U64,
	K_SIZE,
	K_DUR, /* uint64_t nanoseconds: milliseconds, or a number with a unit
	        */
	K_DOUBLE,
	K_WINDOW,
	K_BACKOFF,
	K_JITTER,
	K_SERVICE,
	K_MOCK,
	K_I32,      /* an int32_t field; a leading '-' is read (and refused) */
	K_STRATEGY, /* cluster= */
	K_ZONE,     /* zone= : a string */
	K_SHARED,   /* issue 24.2: shm:REGION/NAME, redis://HOST[:PORT]/NAME */
	K_CLOCK,    /* clock= system | fast (issue 39) */
	K_HEDGE_ON, /* hedge.on= failure,timeout,rejected | none (issue 43) */
	K_KEYSRC,   /* issue 41: breaker.key= ... a key source */
	K_COUNT
};

#define F_NONE 1u /* "none" means UINT64_MAX (no limit) */
#define F_POW2 2u /* a power of two */

typedef struct keydef {
	const char *name;
	unsigned char kind;
	unsigned char stage;
	unsigned char flags;
	size_t off; /* into resil_pipeline_config */
	uint64_t min, max;
	double dmin, dmax;
} keydef;

#define PC(field) offsetof(resil_pipeline_config, field)

/* The keys a declared method has, after "<method>.". */
enum mkey {
	MK_TYPE,
	MK_MOCK,
	MK_TIMEOUT,
	MK_MAX_ATTEMPTS,
	MK_RETRIES, /* cluster: max_attempts = retries + 1 */
	MK_CACHE_FRESH, /* read-through cache: cache_fresh_ns */
	MK_PRIORITY, /* issue 42: critical, default, sheddable */
	MK_COALESCE, /* issue 43: coalesce_max_waiters (true: 1024) */
	MK_COUNT,
	MK_TEXT /* not a method key: a selector key (resil_cluster_text) */
};

/* A setting being read: its key and value, and where it was given (line
 * 0: made by resil_config_set, messages without origin:line). */
typedef struct keyval {
	const char *key;
	const char *value;
	const char *origin;
	unsigned line;
} keyval;

/*
 * Write `origin:line: message` (or the message alone for a setting without
 * a line) into diag; returns RESIL_E_INVAL.
 */
resil_err resil__config_fail(resil_diag *diag, const char *origin,
    unsigned line, const char *fmt, ...) RESIL__PRINTF(4, 5);

/* The message for a duration resil__duration_parse() refused with r. */
resil_err resil__config_dur_fail(resil_diag *diag, const char *origin,
    unsigned line, const char *key, const char *v, int r, const char *unit_at);

/*
 * Which key key is: a stage key (*def set), a method key (*def NULL,
 * *method_len and *mk set) or, when value is given and the selector takes
 * it, a selector key (*mk MK_TEXT). RESIL_OK, or RESIL_E_INVAL with the
 * message (a suggestion for a near key); a allocates what the check of a
 * selector key needs.
 */
resil_err resil__config_classify(const char *key, const char *value,
    const resil_allocator *a, const keydef **def, size_t *method_len,
    enum mkey *mk, const char *origin, unsigned line, resil_diag *diag);

/* Read kv's value as k says into field (for K_ENABLED, an int), with its
 * checks. RESIL_OK, or RESIL_E_INVAL with the message. */
resil_err resil__config_read(
    const keydef *k, const keyval *kv, void *field, resil_diag *diag);

/* Read kv's value for method key mk into *m (MK_MOCK: m->mock points at
 * the value). */
resil_err resil__config_read_method(
    enum mkey mk, const keyval *kv, resil_method_config *m, resil_diag *diag);

/* The value of k in pc, or of method key mk of m, as text into buf (len
 * bytes with the NUL): RESIL_OK; RESIL_E_NOTFOUND for a string that was
 * not set; RESIL_E_INVAL when it does not fit. */
resil_err resil__config_write(
    const keydef *k, const resil_pipeline_config *pc, char *buf, size_t len);
resil_err resil__config_write_method(
    enum mkey mk, const resil_method_config *m, char *buf, size_t len);

/* Where the enabled switch of stage is in resil_pipeline_config. */
size_t resil__config_enabled_at(int stage);

#endif /* RESIL_CONFIG_KEYS_H */

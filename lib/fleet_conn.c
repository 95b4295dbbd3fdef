/*
 * resil fleet: where the fleet's Redis is (issue 44). One server given by
 * host and port, or a master found through Redis Sentinel: each
 * (re)connection asks the sentinels in turn (SENTINEL
 * get-master-addr-by-name), starting with the last one that answered,
 * connects to the address the first answering sentinel gives, and keeps
 * it only when the server says it is a master (ROLE): a sentinel that has
 * not yet seen a failover, or a demoted master that has not yet been
 * reconfigured, is not written to. A failover is followed by asking
 * again: the sync that meets a timeout, a broken connection or an answer
 * saying the server is no longer the writable master (READONLY,
 * MASTERDOWN, ...) drops the connection, and the next one asks the
 * sentinels. No subscription (+switch-master) is kept: the sync's own
 * round trip is the one that finds out, so a failover costs nothing
 * until then and no thread of ours listens.
 */
#define _GNU_SOURCE 1

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "fleet_internal.h"

static struct timeval
tv_of(uint32_t ms)
{
	struct timeval tv;

	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	return tv;
}

static int
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* One "HOST:PORT" of n characters at s: 0 and its parts, or -1. */
static int
one_sentinel(const char *s, size_t n, char *host, uint32_t *port)
{
	const char *colon = NULL;
	uint32_t pt = 0;
	size_t i;

	for (i = n; i > 0; i--)
		if (s[i - 1] == ':') {
			colon = s + i - 1;
			break;
		}
	if (colon == NULL || colon == s ||
	    (size_t)(colon - s) > RESIL__FLEET_HOST_MAX ||
	    colon + 1 == s + n || s + n - colon - 1 > 5)
		return -1;
	for (i = (size_t)(colon - s) + 1; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		pt = pt * 10 + (uint32_t)(s[i] - '0');
	}
	if (pt < 1 || pt > 65535)
		return -1;
	if (host != NULL) {
		memcpy(host, s, (size_t)(colon - s));
		host[colon - s] = '\0';
		*port = pt;
	}
	return 0;
}

/* Walk list: each entry into cn (when not NULL). The count, or -1. */
static int
walk(const char *list, resil__fconn *cn)
{
	const char *p = list;
	uint32_t n = 0;

	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);

		if (n == RESIL__FLEET_MAX_SENTINELS)
			return -1;
		if (one_sentinel(p, len, cn != NULL ? cn->sent_host[n] : NULL,
		        cn != NULL ? &cn->sent_port[n] : NULL) != 0)
			return -1;
		n++;
		if (end == NULL)
			return (int)n;
		p = end + 1;
	}
}

const char *
resil__fleet_sentinels_check(const char *list, const char *master)
{
	size_t i, n;

	if (list == NULL || list[0] == '\0' || walk(list, NULL) < 0)
		return "must be 1..8 sentinels, HOST:PORT separated by ','"
		       " (PORT 1..65535)";
	n = master != NULL ? strlen(master) : 0;
	if (n == 0 || n > 63)
		return "the master's name must be 1..63 characters of "
		       "[A-Za-z0-9._-]";
	for (i = 0; i < n; i++)
		if (!name_char(master[i]))
			return "the master's name must be 1..63 characters "
			       "of [A-Za-z0-9._-]";
	return NULL;
}

void
resil__fconn_init(resil__fconn *cn, const char *host, uint32_t port,
    const char *sentinels, const char *master, uint32_t connect_ms,
    uint32_t command_ms, uint32_t reconnect_ms)
{
	memset(cn, 0, sizeof(*cn));
	snprintf(cn->host, sizeof(cn->host), "%s",
	    host != NULL ? host : "127.0.0.1");
	cn->port = port;
	if (sentinels != NULL) {
		cn->host[0] = '\0';
		cn->port = 0;
		int n = walk(sentinels, cn);

		cn->nsent = n > 0 ? (uint32_t)n : 0;
		snprintf(cn->master, sizeof(cn->master), "%s", master);
	}
	cn->connect_ms = connect_ms;
	cn->command_ms = command_ms;
	cn->reconnect_ms = reconnect_ms;
}

void
resil__fconn_close(resil__fconn *cn)
{
	if (cn->c != NULL)
		redisFree(cn->c);
	cn->c = NULL;
	cn->have_sha = 0;
}

int
resil__fleet_moved(const char *err)
{
	static const char *const words[] = { "READONLY", "MASTERDOWN",
		"LOADING", "NOREPLICAS", "BUSY" };
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strncmp(err, words[i], strlen(words[i])) == 0)
			return 1;
	return 0;
}

/* Ask sentinel i for the master's address: 0 and host, port; else -1
 * and why in buf. */
static int
ask_sentinel(resil__fconn *cn, uint32_t i, char *host, uint32_t *port,
    char *buf, size_t cap)
{
	redisContext *s;
	redisReply *r;
	char what[RESIL__FLEET_HOST_MAX + 32];
	int rc = -1;

	snprintf(what, sizeof(what), "sentinel %.255s:%u", cn->sent_host[i],
	    (unsigned)cn->sent_port[i]);
	s = redisConnectWithTimeout(
	    cn->sent_host[i], (int)cn->sent_port[i], tv_of(cn->connect_ms));
	if (s == NULL || s->err) {
		resil__fleet_no_answer(s, what, cn->connect_ms, buf, cap);
		if (s != NULL)
			redisFree(s);
		return -1;
	}
	(void)redisSetTimeout(s, tv_of(cn->command_ms));
	r = redisCommand(s, "SENTINEL get-master-addr-by-name %s", cn->master);
	if (r == NULL) {
		resil__fleet_no_answer(s, what, cn->command_ms, buf, cap);
	} else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING &&
	    r->element[0]->len > 0 &&
	    r->element[0]->len <= RESIL__FLEET_HOST_MAX) {
		long pt = strtol(r->element[1]->str, NULL, 10);

		if (pt >= 1 && pt <= 65535) {
			memcpy(host, r->element[0]->str, r->element[0]->len);
			host[r->element[0]->len] = '\0';
			*port = (uint32_t)pt;
			rc = 0;
		} else {
			snprintf(buf, cap, "%s: master port \"%.20s\"", what,
			    r->element[1]->str);
		}
	} else if (r->type == REDIS_REPLY_NIL ||
	    (r->type == REDIS_REPLY_ARRAY && r->elements == 0)) {
		snprintf(buf, cap, "%s: no master named %s", what, cn->master);
	} else {
		snprintf(buf, cap, "%s: unexpected answer (%.100s)", what,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not an address");
	}
	if (r != NULL)
		freeReplyObject(r);
	redisFree(s);
	return rc;
}

/* Whether the server on c says it is a master (ROLE). */
static int
is_master(redisContext *c, char *buf, size_t cap, const char *what)
{
	redisReply *r = redisCommand(c, "ROLE");
	int ok;

	if (r == NULL) {
		snprintf(buf, cap, "%s: ROLE: no answer", what);
		return 0;
	}
	ok = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "master") == 0;
	if (!ok)
		snprintf(buf, cap,
		    "%s: not a master (a replica, or not yet "
		    "promoted)",
		    what);
	freeReplyObject(r);
	return ok;
}

int
resil__fconn_open(resil__fconn *cn, const char *script, char *buf, size_t cap)
{
	char host[RESIL__FLEET_HOST_MAX + 1], what[RESIL__FLEET_HOST_MAX + 48];
	uint32_t k, port = 0;

	resil__fconn_close(cn);
	if (cn->nsent == 0) {
		if (resil__fleet_redis_open(&cn->c, cn->host, cn->port,
		        cn->connect_ms, cn->command_ms, script, cn->sha, buf,
		        cap) != 0)
			return -1;
		cn->have_sha = 1;
		return 0;
	}
	snprintf(buf, cap, "no sentinel answered");
	for (k = 0; k < cn->nsent; k++) {
		uint32_t i = (cn->first + k) % cn->nsent;

		if (ask_sentinel(cn, i, host, &port, buf, cap) != 0)
			continue;
		cn->first = i;
		snprintf(what, sizeof(what), "master %.255s:%u", host,
		    (unsigned)port);
		if (resil__fleet_redis_open(&cn->c, host, port, cn->connect_ms,
		        cn->command_ms, script, cn->sha, buf, cap) != 0)
			return -1; /* the sentinels' master is down */
		if (!is_master(cn->c, buf, cap, what)) {
			resil__fconn_close(cn);
			return -1;
		}
		if (strcmp(host, cn->host) != 0 || port != cn->port) {
			if (cn->host[0] != '\0' && cn->port != 0)
				cn->switches++;
			snprintf(cn->host, sizeof(cn->host), "%s", host);
			cn->port = port;
		}
		cn->have_sha = 1;
		return 0;
	}
	return -1;
}

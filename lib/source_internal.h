/*
 * Private parts of the registry source (include/resil/source.h): the
 * backend interface a registry kind implements (lib/source_zookeeper.c is
 * the first), the deliveries a backend makes to the core (lib/source.c),
 * Dubbo's URL rules (lib/source_dubbo.c), the cache file
 * (lib/source_cache.c), and the hooks tests and the bench use.
 */
#ifndef RESIL_SOURCE_INTERNAL_H
#define RESIL_SOURCE_INTERNAL_H

#include <resil/source.h>

#include "internal.h"

/* The lists of a service a source follows: the first RESIL__NCHILD are
 * the children of a node (one name each), the rest the data of one node
 * (a list of one string, the node's text; empty when there is no node).
 * A category whose path is NULL is not followed. */
#define RESIL__CAT_PROVIDERS 0
#define RESIL__CAT_ROUTERS 1
#define RESIL__CAT_CONFIGURATORS 2 /* 2.7's override:// URLs */
#define RESIL__NCHILD 3
#define RESIL__CAT_SVC_RULES 3 /* 3.x YAML, [G:]SERVICE[:V].configurators */
#define RESIL__CAT_APP_RULES 4 /* 3.x YAML, APPLICATION.configurators */
#define RESIL__NCAT 5

/* ---- backends ----------------------------------------------------------
 *
 * open() starts the subscription in the background and returns at once;
 * from then on the backend may call the sink's deliveries from any thread
 * of its own, until close() returns. tick() runs on the source's thread
 * after every wake-up (work a backend's own threads must not do, such as
 * replacing an expired session) and returns the ns until it wants to run
 * again, 0 for "only when woken".
 *
 * The core (lib/source.c) names its backends; a backend names nothing of
 * the core: what it tells the core goes through the sink it is given, so
 * the arrow between the two rooms points one way.
 */
typedef struct resil__source_sink {
	/* A list of category cat as the registry has it now (names as the
	 * registry stores them: URL-encoded), received after a watch fired
	 * at fired_ns (system clock). Copied; the latest list of a category
	 * replaces one not yet applied. */
	void (*deliver)(resil_registry_source *src, int cat,
	    const char *const *names, size_t n, uint64_t fired_ns);
	/* A change of the session (CONNECTED, DISCONNECTED, EXPIRED) or an
	 * ERROR, with a message; reported by the source's thread. */
	void (*notify)(resil_registry_source *src,
	    resil_source_event_type type, const char *msg);
	/* One more session made (stats). */
	void (*session_made)(resil_registry_source *src);
	/* Wake the source's thread (tick() is due). */
	void (*wake)(resil_registry_source *src);
} resil__source_sink;

typedef struct resil__source_where {
	const char *hosts;             /* "h1:2181,h2:2181" */
	const char *path[RESIL__NCAT]; /* "/dubbo/<service>/providers", ... */
	/* The consumer's node to write at every new session (ephemeral;
	 * its parents persistent), or NULL. */
	const char *consumer_node;
	uint32_t session_timeout_ms;
	const resil_allocator *alloc;
	const resil__source_sink *sink; /* outlives the backend */
	/* Issue 40.4: what the config center's routing rules are read for
	 * (lib/source_zk_rules.c); selector NULL: none read. */
	const char *service, *group, *version;
	resil_selector *selector;
} resil__source_where;

typedef struct resil__source_backend {
	const char *scheme;
	resil_err (*open)(resil_registry_source *src,
	    const resil__source_where *w, void **state, resil_diag *diag);
	uint64_t (*tick)(void *state);
	void (*close)(void *state);
	/* The session's id and its 16-byte password, for the expiry trick
	 * of the tests (resil__source_zk_session): 0, or -1 when no session
	 * is up. NULL for a backend without sessions. */
	int (*session)(void *state, int64_t *id, char *passwd);
} resil__source_backend;

extern const resil__source_backend resil__source_zookeeper;

/* ---- Dubbo's URLs ------------------------------------------------------ */

/* java.net.URLDecoder over s: '+' is a blank, %XX a byte. *out is a new
 * string (free with resil__strfree). RESIL_E_INVAL for a malformed or
 * NUL escape, with its column (1-based) in *col. */
resil_err resil__url_decode(
    const resil_allocator *a, const char *s, char **out, size_t *col);

/* A decoded URL, split in place: protocol://[user@]host:port/path?k=v&... */
typedef struct resil__url {
	const char *protocol;
	const char *address; /* "host:port" (an IPv6 host in brackets) */
	const char *host;    /* copy without the port; brackets kept */
	const char *port;    /* NULL when none */
	const char *path;    /* "" when none */
	resil_param *params; /* in order; a repeated key: the last wins */
	size_t nparams;
	char *buf_;
	size_t buflen_, hostlen_;
} resil__url;

/* Split text (a decoded URL) into *u. RESIL_E_INVAL with the reason in
 * *why ("no protocol", "port \"x\" is not 1..65535"); RESIL_E_NOMEM. */
resil_err resil__url_parse(const resil_allocator *a, const char *text,
    resil__url *u, resil_diag *why);
void resil__url_free(const resil_allocator *a, resil__url *u);

/* The value of key, or NULL. */
const char *resil__url_get(const resil__url *u, const char *key);

/* The provider protocols taken by default (registry.protocols unset), and
 * the only ones registry.protocols may name. */
#define RESIL__DUBBO_PROTOCOLS                                                \
	"dubbo,tri,grpc,rest,http,https,hessian,rmi,thrift,webservice,redis," \
	"memcached"

/* What the consumer matches providers against. */
typedef struct resil__match {
	const char *service;
	const char *group;     /* NULL: none */
	const char *version;   /* NULL: none */
	const char *protocols; /* comma list */
} resil__match;

#define RESIL__PROVIDER_OK 0
#define RESIL__PROVIDER_SKIP 1 /* not a candidate, as Dubbo decides */
#define RESIL__PROVIDER_BAD 2  /* malformed or unknown protocol */

/* One provider as the directory gets it. The strings are one block. */
typedef struct resil__provider {
	resil_endpoint_spec spec;
	int64_t timestamp_ms; /* 0: none */
	char *block_;
	size_t blocklen_;
} resil__provider;

/*
 * Map a provider URL onto an endpoint: RESIL__PROVIDER_OK with *out filled
 * (release it with resil__provider_free), _SKIP or _BAD with the reason in
 * *why. A repaired field (weight, timestamp, warm-up, zone, a parameter)
 * is said in *field ("" when none). now is the directory's clock, wall_ms
 * the wall clock in ms. -1 for out of memory.
 */
int resil__provider_map(const resil_allocator *a, const resil__url *u,
    const resil__match *m, uint64_t now, int64_t wall_ms, resil__provider *out,
    resil_diag *why, resil_diag *field);
void resil__provider_free(const resil_allocator *a, resil__provider *p);

/* A routers entry: RESIL__PROVIDER_OK with the rule text (a new string),
 * its force flag and priority; _SKIP (disabled, empty://) or _BAD with
 * the reason. -1 for out of memory. */
int resil__route_map(const resil_allocator *a, const resil__url *u,
    char **rule, int *force, int *priority, resil_diag *why);

/* java.net.URLEncoder.encode(s, "UTF-8"): a new string, NULL for out of
 * memory. */
char *resil__url_encode(const resil_allocator *a, const char *s);

/* The consumer's URL as Dubbo registers it (parameters in name order, as
 * URL.toFullString): consumer://host/service?application=..&category=
 * consumers&check=..&dubbo=2.0.2&[group=..&]interface=..&[methods=..&]
 * pid=..&side=consumer&timestamp=..[&version=..]. A new string. */
char *resil__consumer_url(const resil_allocator *a, const char *host,
    const char *service, const char *application, const char *group,
    const char *version, const char *methods, int check, long pid,
    int64_t timestamp_ms);

/* The address this host registers with (Dubbo's NetUtils.getLocalHost):
 * DUBBO_IP_TO_REGISTRY when set, else the first IPv4 address of an
 * interface that is up and not a loopback, else 127.0.0.1. */
void resil__local_host(char *buf, size_t n);

/* Dubbo's service key: [group/]service[:version]. A new string. */
char *resil__service_key(const resil_allocator *a, const char *service,
    const char *group, const char *version);

/* ---- the cache file ----------------------------------------------------- */

/* Write file atomically (a temporary file renamed over it), Dubbo's
 * format: "key=url url ..." as a Java properties file. The urls are the
 * decoded entries of both lists. RESIL_E_INVAL with the reason (an I/O
 * error) in *why; RESIL_E_NOMEM. */
resil_err resil__cache_write(const resil_allocator *a, const char *file,
    const char *key, const char *const *urls, size_t n, resil_diag *why);

/* Read the entry key of file: *urls is an array of n decoded URLs in one
 * allocation (free with resil__cache_urls_free). RESIL_E_NOTFOUND when the
 * file or the key is absent; RESIL_E_INVAL for an unreadable file, the
 * reason in *why; RESIL_E_NOMEM. */
resil_err resil__cache_read(const resil_allocator *a, const char *file,
    const char *key, char ***urls, size_t *n, resil_diag *why);
void resil__cache_urls_free(const resil_allocator *a, char **urls, size_t n);

/* Remove the temporary files a writer of file left when it died between
 * their creation and their rename: FILE.tmpPID in file's directory whose
 * PID is no live process (kill(PID, 0) fails with ESRCH). The number
 * removed. */
size_t resil__cache_sweep(const char *file);

/* ---- hooks for tests and the bench ------------------------------------- */

/* resil_source_new() without a backend and without a thread: lists come
 * only from resil__source_apply() (and the cache file). */
resil_err resil__source_new_detached(resil_registry_source **out,
    const resil_source_config *cfg, resil_diag *diag);

/* Apply a list of category cat now, on the caller's thread, as the
 * source's thread does with a delivered one (decoded: the names are
 * decoded URLs already, as in the cache file). */
void resil__source_apply(resil_registry_source *src, int cat,
    const char *const *names, size_t n, int decoded);

/* Write the cache file now if a write is pending. */
void resil__source_flush(resil_registry_source *src);

/* The ZooKeeper session of src (for the expiry trick of the tests): 0
 * with the id and the 16-byte password, -1 when none is up. */
int resil__source_zk_session(
    resil_registry_source *src, int64_t *id, char *passwd);

#endif /* RESIL_SOURCE_INTERNAL_H */

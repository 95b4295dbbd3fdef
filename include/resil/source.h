/*
 * resil source: a registry source feeds a directory (directory.h) with the
 * providers of one service, the way a Dubbo consumer finds them: it
 * subscribes to the service in a registry, turns every change of the
 * provider list into one resil_directory_push() (the full list, so the
 * directory's empty protection applies), turns the registry's condition
 * rules into the selector's (selector.h), keeps a local cache file of the
 * last lists, and unsubscribes when freed.
 *
 * The registry is named by a URL, as in Dubbo: `zookeeper://h1:2181`,
 * `zookeeper://h1:2181?backup=h2:2181,h3:2181` or
 * `zookeeper://h1:2181,h2:2181` (ZooKeeper is the first kind; the backends sit
 * behind one internal interface so that etcd or Nacos can follow). Dubbo's
 * layout:
 *
 *   <root>/<service>/providers/<URL-encoded provider URL>   (ephemeral)
 *   <root>/<service>/routers/<URL-encoded condition:// URL>
 *   <root>/<service>/configurators/<URL-encoded override:// URL>
 *   <root>/<service>/consumers/<URL-encoded consumer URL>   (this one's)
 *   <root>/config/dubbo/<service or application>.configurators  (YAML)
 *
 * with root "/dubbo". A provider URL `dubbo://10.0.0.1:20880/<service>?
 * weight=200&timestamp=1630745698310&warmup=60000&dubbo.tag=gray&zone=hz&
 * ...` becomes the endpoint "10.0.0.1:20880" with weight 200 (default
 * 100; negative is 0, as Dubbo's max(weight, 0)), tag "gray", zone "hz",
 * a warm-up of 60 s from the provider's start (Dubbo's default warm-up,
 * 10 minutes, applies when only timestamp is given) and every other
 * parameter in params for condition rules (protocol and path too).
 * Providers with enabled=false or disabled=true, of another group or
 * version, of another category or interface, and empty:// placeholders
 * are not candidates; mock:// providers become mock endpoints; a
 * malformed URL, an unknown protocol or parameters the directory refuses
 * (an empty name) is left out with an event, the rest is pushed. Two
 * providers at one address: the one with the newer timestamp stays.
 * docs/registry-zookeeper.md has the whole mapping.
 *
 * Time: a provider's `timestamp` is its start in milliseconds of wall-clock
 * time. The source turns it into the directory's clock: start_time = now -
 * (wall_now - timestamp), read once when the URL is first seen (a
 * timestamp in the future counts as "started now"; a provider past its
 * warm-up gets none). The wall clock is cfg->wall_clock (ns since the Unix
 * epoch); NULL reads CLOCK_REALTIME. cfg->clock must be the directory's.
 *
 * Faults, as Dubbo handles them: an empty list is pushed as it is and the
 * directory's empty protection keeps the last non-empty one
 * (resil_directory_config.empty_protection, text registry.empty_protection;
 * the source reports EMPTY_KEPT); a lost connection keeps the list and the
 * lists are read again on reconnection; an expired session is replaced by
 * a new one, the watches set again and the lists read again; the cache file
 * (Dubbo's registry.file, a Java properties file keyed by the service key,
 * Dubbo's own format) is written after changes and read by
 * resil_source_new(), so a consumer starting while the registry is down
 * has the providers of its last run.
 *
 * Thread safety: the registry's work runs on a thread of the source's own:
 * the ZooKeeper client's threads only copy what they receive and wake it.
 * A call never waits on the registry: the directory is updated by
 * snapshot, as by any push. The listener runs on the source's thread (and
 * on the caller's thread inside resil_source_new() for the cache file); it
 * must not free the source. get_stats may be called from any thread at any
 * time. new and free must not overlap any other call on the same source.
 * Free the source before the selector and the directory it feeds.
 */
#ifndef RESIL_SOURCE_H
#define RESIL_SOURCE_H

#include <resil/clock.h>
#include <resil/directory.h>
#include <resil/resil.h>
#include <resil/selector.h>

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_registry_source resil_registry_source;

typedef enum resil_source_event_type {
	/* A session with the registry is up (the first, a reconnection of
	 * the same session, or a new one after expiry). */
	RESIL_SOURCE_CONNECTED = 0,
	/* The connection was lost; the session may live on. The directory
	 * keeps its list. */
	RESIL_SOURCE_DISCONNECTED = 1,
	/* The session expired: a new one is being made, and the lists will
	 * be read again. */
	RESIL_SOURCE_EXPIRED = 2,
	/* A provider list was pushed; count: providers pushed. */
	RESIL_SOURCE_PROVIDERS = 3,
	/* An empty list was not applied (empty protection); count: the
	 * providers kept. */
	RESIL_SOURCE_EMPTY_KEPT = 4,
	/* One provider is not a candidate (disabled, another group, ...);
	 * node: its URL. Sent once per node. */
	RESIL_SOURCE_SKIPPED = 5,
	/* One provider was left out: a malformed URL, an unknown protocol,
	 * a duplicate address. node: its URL. Sent once per node. */
	RESIL_SOURCE_BAD_PROVIDER = 6,
	/* A field of a provider was repaired or dropped (an absurd weight,
	 * a bad timestamp); the provider stays. Sent once per node. */
	RESIL_SOURCE_BAD_FIELD = 7,
	/* The registry's condition rules were applied; count: rules. */
	RESIL_SOURCE_ROUTES = 8,
	/* A routers entry was left out: malformed, not a condition rule,
	 * a rule that does not parse. */
	RESIL_SOURCE_BAD_ROUTE = 9,
	/* The cache file was read at start; count: providers in it. */
	RESIL_SOURCE_CACHE_LOADED = 10,
	/* The cache file could not be read or written (message). */
	RESIL_SOURCE_CACHE_ERROR = 11,
	/* A registry operation or a push failed (message); the list in
	 * force stays and is retried. */
	RESIL_SOURCE_ERROR = 12,
	/* The consumer's node was written under <root>/<service>/consumers
	 * (at each new session); node: its URL (issue 40). */
	RESIL_SOURCE_REGISTERED = 13,
	/* An override rule (Dubbo's configurator) was applied; node: the
	 * rule; count: the settings it gave. Also "rules removed". */
	RESIL_SOURCE_OVERRIDE = 14,
	/* An override rule, or one key of it, was refused (malformed, not
	 * a key, a key a reload refuses); node: the rule; message names
	 * the key. The other keys and rules still apply. */
	RESIL_SOURCE_BAD_OVERRIDE = 15
} resil_source_event_type;

/* "CONNECTED", "DISCONNECTED", ..., or "UNKNOWN". */
RESIL_API const char *resil_source_event_name(resil_source_event_type t);

typedef struct resil_source_event {
	resil_source_event_type type;
	const char *node;    /* the entry's decoded URL, or ""; valid
	                      * during the call only */
	const char *message; /* for people; valid during the call only */
	size_t count;
} resil_source_event;

typedef void (*resil_source_listener_fn)(
    const resil_source_event *ev, void *ctx);

typedef struct resil_source_config {
	size_t size; /* sizeof(resil_source_config), set by _init() */
	/* "zookeeper://host:port[,host:port...][?backup=host:port,...]";
	 * required. */
	const char *registry;
	/* The interface subscribed to, e.g. "org.apache.dubbo.demo.
	 * DemoService"; required. */
	const char *service;
	/* The consumer's group and version (Dubbo's isMatch): NULL takes
	 * providers without one, "*" any, a group may be a comma list. */
	const char *group;
	const char *version;
	/* The registry's root; NULL: "/dubbo" (Dubbo's registry group). */
	const char *root;
	/* Provider protocols accepted, comma-separated; NULL: dubbo, tri,
	 * grpc, rest, http, https, hessian, rmi, thrift, webservice,
	 * redis, memcached. mock:// is always a mock endpoint. */
	const char *protocols;
	/* The cache file (Dubbo's registry.file); NULL: none. */
	const char *file;
	/* The least time between two writes of the file, in ns; changes in
	 * between are written together. Default 500 ms (Dubbo's); 0 writes
	 * after every change. */
	uint64_t file_interval_ns;
	/* The ZooKeeper session timeout asked for, in ms (the server
	 * bounds it). Default 60000 (Dubbo's). 1..2^31-1. */
	uint32_t session_timeout_ms;
	/* Apply the registry's condition rules to selector. Default 1. */
	int routes;
	resil_directory *directory; /* required; must outlive the source */
	resil_selector *selector;   /* for routes; NULL: none applied */
	resil_source_listener_fn listener;
	void *listener_ctx;
	const resil_allocator *alloc; /* NULL: malloc() and free() */
	const resil_clock *clock;     /* the directory's; NULL: the system's */
	const resil_clock *wall_clock; /* ns since the Unix epoch; NULL:
	                                * CLOCK_REALTIME */
	/* Issue 40: the consumer as the Dubbo console sees it. */
	/* The consumer's application (Dubbo's application.name); NULL:
	 * none (no application-scope rules are read). */
	const char *application;
	/* Write the consumer's node, an ephemeral
	 * <root>/<service>/consumers/URL.encode(consumer://HOST/SERVICE?
	 * application=..&category=consumers&side=consumer&...), at every
	 * new session (Dubbo's `register`). Default 1. */
	int register_consumer;
	/* The methods the consumer calls, a comma list, for the node's
	 * methods= (NULL: none said). */
	const char *methods;
	/* Read the override rules (Dubbo's configurators: override:// URLs
	 * under <root>/<service>/configurators, 3.x YAML rules under
	 * <root>/config/dubbo/[GROUP:]SERVICE[:VERSION].configurators and
	 * <root>/config/dubbo/APPLICATION.configurators). Default 1. They
	 * reconfigure the pipeline given to resil_source_attach_pipeline()
	 * and the providers' weight and disabled flag. */
	int overrides;
	/* Dubbo's check: resil_source_new() waits for the first provider
	 * list for at most check_timeout_ns and fails with Dubbo's message
	 * ("Failed to check the status of the service S. No provider
	 * available for the service S from the url ..."). Default 0. */
	int check;
	uint64_t check_timeout_ns; /* default 3 s */
} resil_source_config;

static inline void
resil_source_config_init(resil_source_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->file_interval_ns = 500 * RESIL_NS_PER_MS;
	cfg->session_timeout_ms = 60000;
	cfg->routes = 1;
	cfg->register_consumer = 1;
	cfg->overrides = 1;
	cfg->check_timeout_ns = 3 * RESIL_NS_PER_SEC;
}

static inline resil_source_config
resil_source_config_default(void)
{
	resil_source_config cfg;

	resil_source_config_init(&cfg);
	return cfg;
}

/* RESIL_OK, or RESIL_E_INVAL naming the field in *diag ("registry:
 * scheme \"etcd\" is not supported (zookeeper)"). */
RESIL_API resil_err resil_source_config_validate(
    const resil_source_config *cfg, resil_diag *diag);

/*
 * Create a source and subscribe. *cfg and its strings are copied; the
 * directory, the selector, the listener's ctx, the allocator's and the
 * clocks' must outlive the source (*cfg->alloc itself may live on the
 * stack: the registry's condition rules the selector gets, and frees,
 * are allocated with the selector's allocator). When cfg->file names a
 * readable cache file with the service's lists, they are pushed before
 * this returns (CACHE_LOADED). The registry is reached in the
 * background: a registry that is down is no error (DISCONNECTED events
 * follow, the source keeps trying). Free it with resil_source_free(). Returns RESIL_OK,
 * RESIL_E_INVAL (message in *diag) or RESIL_E_NOMEM; *out is unchanged on
 * error.
 */
RESIL_API resil_err resil_source_new(resil_registry_source **out,
    const resil_source_config *cfg, resil_diag *diag);

/* Unsubscribe (the session is closed), write the cache file if a write is
 * pending, stop the source's thread and release everything. The
 * directory keeps its last list. NULL is a no-op. */
RESIL_API void resil_source_free(resil_registry_source *src);

typedef struct resil_source_stats {
	int connected;        /* a session is up now */
	uint64_t sessions;    /* sessions made (the first and after expiry) */
	uint64_t connects;    /* CONNECTED events */
	uint64_t expirations; /* EXPIRED events */
	uint64_t lists;       /* provider lists received (cache included) */
	uint64_t pushes;      /* provider lists pushed to the directory */
	uint64_t empty_kept;  /* EMPTY_KEPT events */
	uint64_t route_lists; /* rule lists applied to the selector */
	uint64_t bad;         /* BAD_PROVIDER, BAD_FIELD, BAD_ROUTE events */
	uint64_t skipped;     /* SKIPPED events */
	uint64_t errors;      /* ERROR and CACHE_ERROR events */
	uint64_t cache_saves; /* cache file writes */
	size_t providers;     /* in the last push */
	size_t rules;         /* rules given to the selector last */
	/* From the watch firing (the list's arrival, for the cache) to the
	 * directory updated, in ns of the system clock: the last update and
	 * the largest. */
	uint64_t last_update_ns;
	uint64_t max_update_ns;
} resil_source_stats;

RESIL_API void resil_source_get_stats(
    resil_registry_source *src, resil_source_stats *out);

/*
 * Dubbo's check=true, for a source built by hand (resil_source_new() does
 * it itself when cfg->check is set): wait up to timeout_ns (system clock)
 * for a provider list that gives the directory at least one provider.
 * RESIL_OK when the directory has one (also at once); RESIL_E_NO_PROVIDER
 * when none came, with Dubbo's message in *diag: "Failed to check the
 * status of the service S. No provider available for the service
 * [G/]S[:V] from the url zookeeper://... to the consumer HOST use resil
 * version X". Any thread; not with free.
 */
RESIL_API resil_err resil_source_check(
    resil_registry_source *src, uint64_t timeout_ns, resil_diag *diag);

/*
 * Let the registry's override rules (Dubbo's configurators) reconfigure
 * p. base is the pipeline's configuration as its file gives it (copied:
 * its settings in order); every rule that applies to this consumer adds
 * its keys over base, in Dubbo's order (2.7 override:// URLs, then the
 * application's YAML rule, then the service's; later over earlier), and
 * the whole goes through resil_pipeline_reload(): a key a reload refuses
 * is refused (BAD_OVERRIDE naming the rule and the key), the others
 * apply; with no rule left, p runs on base again exactly. The rules in
 * force are applied at once, on the caller's thread; later changes on
 * the source's thread. p and base may be NULL (detach). p must outlive
 * the source (or be detached first). Not with free.
 */
struct resil_pipeline;
struct resil_config;
RESIL_API resil_err resil_source_attach_pipeline(resil_registry_source *src,
    struct resil_pipeline *p, const struct resil_config *base,
    resil_diag *diag);

/* ---- configuration text ------------------------------------------------
 *
 * resil_source_text holds the registry keys of a configuration text and
 * owns their strings (the pattern of resil_cluster_text, selector.h):
 *
 *   registry=zookeeper://127.0.0.1:2181     .registry ("N/A": none)
 *   registry.service=com.foo.BarService     .service
 *   registry.group=, registry.version=      .group, .version
 *   registry.root=/dubbo                    .root
 *   registry.protocols=dubbo,tri            .protocols
 *   registry.file=/var/cache/app/bar.cache  .file
 *   registry.file.interval=500ms            .file_interval_ns
 *   registry.session_timeout=60s            .session_timeout_ms
 *   registry.routes=true                    .routes
 *
 * Durations are milliseconds when bare, or a whole number with ns us ms s
 * m h. registry.empty_protection is the directory's key
 * (resil_cluster_text_set()): set() answers RESIL_E_NOTFOUND for it, as
 * for any key that is not one of the above.
 */
typedef struct resil_source_text resil_source_text;

RESIL_API resil_err resil_source_text_new(
    resil_source_text **out, const resil_allocator *alloc);
RESIL_API void resil_source_text_free(resil_source_text *st);

/* RESIL_OK; RESIL_E_NOTFOUND for a key that is not a source key (the
 * message says "unknown key"); RESIL_E_INVAL for a bad value, the message
 * "origin:line: key: ..." (origin:line left out when origin is NULL);
 * RESIL_E_NOMEM. */
RESIL_API resil_err resil_source_text_set(resil_source_text *st,
    const char *key, const char *value, const char *origin, unsigned line,
    resil_diag *diag);

/* Whether a source is asked for: a registry key was set and registry is
 * not Dubbo's "N/A" (no registry). */
RESIL_API int resil_source_text_present(const resil_source_text *st);

/* Overwrite the fields of *out that st has; the strings point into st and
 * stay valid until the next set or free. */
RESIL_API void resil_source_text_config(
    const resil_source_text *st, resil_source_config *out);

#ifdef __cplusplus
}
#endif

#endif /* RESIL_SOURCE_H */

/*
 * libFuzzer harness: the registry source's provider lists and its cache
 * file, against the directory they feed (issue 38.1: one bad provider node
 * made the directory refuse every push while it existed).
 *
 * Input: a mode byte, then the text.
 *   mode & 1 == 0: a provider list, one name a line (at most 16 names of
 *     at most 512 bytes), applied as a registry delivers it: URL-encoded
 *     node names when mode & 2, decoded URLs otherwise;
 *   mode & 1 == 1: a cache file (Dubbo's format) that a consumer of
 *     org.apache.dubbo.demo.DemoService starts from.
 *
 * Each provider is first applied alone, to a directory of its own: it is
 * "good" when it reaches that directory. Properties:
 *   - a provider applied alone either reaches the directory or is said
 *     (BAD_PROVIDER or SKIPPED, with its node); a push is never refused
 *     (no ERROR event): the source keeps only what the directory takes;
 *   - every good provider of a list, and of a cache file, is pushed: its
 *     address is in the directory after the whole list (the cache file) is
 *     applied, and nothing else is;
 *   - the cache file the source writes reads back as the list it was
 *     given (ASCII names; issue 38.9: a blank was written %20 and came
 *     back %20);
 *   - no leak, no undefined behaviour.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <resil/directory.h>
#include <resil/source.h>

#include "fuzz.h"
#include "source_internal.h"

#define SVC "org.apache.dubbo.demo.DemoService"
#define MAXN 16
#define MAXLEN 512

typedef struct heard {
	unsigned n[16];
	char added[MAXN + 1][MAXLEN + 16];
	size_t nadded;
} heard;

static void
on_source(const resil_source_event *ev, void *ctx)
{
	heard *h = ctx;

	if ((unsigned)ev->type < 16)
		h->n[ev->type]++;
}

static void
on_endpoint(const resil_endpoint_event *ev, void *ctx)
{
	heard *h = ctx;

	if (ev->type == RESIL_ENDPOINT_ADDED && h->nadded <= MAXN) {
		snprintf(h->added[h->nadded], sizeof(h->added[0]), "%s",
		    ev->address);
		h->nadded++;
	}
}

typedef struct pair {
	resil_directory *dir;
	resil_registry_source *src;
	heard h;
} pair;

static void
open_pair(pair *p, const char *file)
{
	resil_directory_config dc = resil_directory_config_default();
	resil_source_config sc = resil_source_config_default();
	resil_diag diag;

	memset(p, 0, sizeof(*p));
	dc.listener = on_endpoint;
	dc.listener_ctx = &p->h;
	FUZZ_CHECK(resil_directory_new(&p->dir, &dc, &diag) == RESIL_OK,
	    "directory: %s", diag.msg);
	sc.registry = "zookeeper://127.0.0.1:2181";
	sc.service = SVC;
	sc.file = file;
	sc.file_interval_ns = 0;
	sc.directory = p->dir;
	sc.listener = on_source;
	sc.listener_ctx = &p->h;
	FUZZ_CHECK(resil__source_new_detached(&p->src, &sc, &diag) == RESIL_OK,
	    "source: %s", diag.msg);
}

static void
close_pair(pair *p)
{
	resil_source_free(p->src);
	resil_directory_free(p->dir);
}

/* Apply name alone; its address in addr when it reached the directory
 * (1), else 0. */
static int
alone(const char *name, int decoded, char *addr, size_t len)
{
	pair p;
	unsigned said;
	int good;

	open_pair(&p, NULL);
	resil__source_apply(p.src, RESIL__CAT_PROVIDERS, &name, 1, decoded);
	said = p.h.n[RESIL_SOURCE_BAD_PROVIDER] + p.h.n[RESIL_SOURCE_SKIPPED];
	good = p.h.nadded == 1;
	FUZZ_CHECK(p.h.n[RESIL_SOURCE_ERROR] == 0,
	    "a push of \"%s\" alone was refused", name);
	FUZZ_CHECK(good || said,
	    "\"%s\" alone neither reached the directory nor was said", name);
	FUZZ_CHECK(!(good && said), "\"%s\" was said and pushed", name);
	FUZZ_CHECK(
	    p.h.nadded <= 1, "\"%s\" added %zu endpoints", name, p.h.nadded);
	if (good)
		snprintf(addr, len, "%s", p.h.added[0]);
	close_pair(&p);
	return good;
}

/* Every good one of names[] is in d, and d holds nothing else. */
static void
check_all_pushed(pair *p, const char *const *names, size_t n, int decoded)
{
	char addr[MAXN][MAXLEN + 16];
	size_t i, j, distinct = 0;
	resil_endpoint_state es;

	FUZZ_CHECK(p->h.n[RESIL_SOURCE_ERROR] == 0,
	    "a push was refused (%u ERROR events)",
	    p->h.n[RESIL_SOURCE_ERROR]);
	for (i = 0; i < n; i++) {
		if (!alone(names[i], decoded, addr[i], sizeof(addr[i]))) {
			addr[i][0] = '\0';
			continue;
		}
		FUZZ_CHECK(resil_directory_get_state(p->dir, addr[i], &es) ==
		        RESIL_OK,
		    "good provider \"%s\" (%s) is missing from the push",
		    names[i], addr[i]);
		for (j = 0; j < i && strcmp(addr[j], addr[i]) != 0; j++)
			;
		distinct += j == i;
	}
	FUZZ_CHECK(resil_directory_count(p->dir) == distinct,
	    "the directory has %zu endpoints, the good providers %zu "
	    "addresses",
	    resil_directory_count(p->dir), distinct);
}

static int
ascii(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s >= 0x80)
			return 0;
	return 1;
}

/* The file written for the list reads back as the list (decoded, ASCII,
 * non-empty names). */
static void
check_round_trip(const char *file, const char *const *names, size_t n)
{
	const resil_allocator *a = resil_allocator_default();
	char **back = NULL;
	size_t nb = 0, i, k = 0;
	resil_err err;

	for (i = 0; i < n; i++)
		if (!ascii(names[i]))
			return;
	err = resil__cache_read(a, file, SVC, &back, &nb, NULL);
	FUZZ_CHECK(err == RESIL_OK, "the cache file does not read back (%d)",
	    (int)err);
	for (i = 0; i < n; i++) {
		if (names[i][0] == '\0')
			continue;
		FUZZ_CHECK(k < nb && strcmp(back[k], names[i]) == 0,
		    "entry %zu \"%s\" reads back as \"%s\"", i, names[i],
		    k < nb ? back[k] : "(none)");
		k++;
	}
	FUZZ_CHECK(k == nb, "%zu entries read back, %zu written", nb, k);
	resil__cache_urls_free(a, back, nb);
}

static void
run_list(const uint8_t *data, size_t size, int decoded, const char *file)
{
	char buf[MAXN][MAXLEN + 1];
	const char *names[MAXN];
	size_t n = 0, i = 0;
	pair p;

	while (i < size && n < MAXN) {
		size_t w = 0;

		while (i < size && data[i] != '\n') {
			/* A NUL ends the name: a C string is what a
			 * registry delivers. */
			if (w < MAXLEN && (w == 0 || buf[n][w - 1] != '\0'))
				buf[n][w++] = (char)data[i];
			i++;
		}
		buf[n][w] = '\0';
		names[n] = buf[n];
		n++;
		i++;
	}
	open_pair(&p, file);
	resil__source_apply(p.src, RESIL__CAT_PROVIDERS, names, n, decoded);
	resil__source_flush(p.src);
	check_all_pushed(&p, names, n, decoded);
	close_pair(&p);
	/* A list the directory took is what the file holds (an empty one
	 * kept by empty protection leaves no file). */
	if (decoded && access(file, F_OK) == 0)
		check_round_trip(file, names, n);
	(void)remove(file);
}

/* Which entries of a cache file the source reads as providers. */
static int
is_provider(const char *url)
{
	const resil_allocator *a = resil_allocator_default();
	const char *cat;
	resil__url u;
	int r;

	if (strncmp(url, "empty://", 8) == 0 ||
	    strncmp(url, "condition://", 12) == 0 ||
	    strncmp(url, "route://", 8) == 0 ||
	    strncmp(url, "script://", 9) == 0)
		return 0;
	if (resil__url_parse(a, url, &u, NULL) != RESIL_OK)
		return 1;
	cat = resil__url_get(&u, "category");
	r = !(cat != NULL && strcmp(cat, "routers") == 0);
	resil__url_free(a, &u);
	return r;
}

static void
run_file(const uint8_t *data, size_t size, const char *file)
{
	const resil_allocator *a = resil_allocator_default();
	const char *names[MAXN];
	char **urls = NULL;
	size_t n = 0, i, k = 0;
	FILE *f = fopen(file, "wb");
	pair p;

	FUZZ_CHECK(f != NULL, "cannot write %s", file);
	FUZZ_CHECK(fwrite(data, 1, size, f) == size, "cannot write %s", file);
	fclose(f);
	if (resil__cache_read(a, file, SVC, &urls, &n, NULL) != RESIL_OK ||
	    n > MAXN) {
		/* Unreadable or too long to check here: the source must
		 * still start from it without harm. */
		if (urls != NULL)
			resil__cache_urls_free(a, urls, n);
		open_pair(&p, file);
		close_pair(&p);
		(void)remove(file);
		return;
	}
	for (i = 0; i < n; i++)
		if (is_provider(urls[i]))
			names[k++] = urls[i];
	open_pair(&p, file);
	check_all_pushed(&p, names, k, 1);
	close_pair(&p);
	resil__cache_urls_free(a, urls, n);
	(void)remove(file);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char file[64];
	unsigned mode;

	if (size == 0)
		return 0;
	mode = data[0];
	snprintf(file, sizeof(file), "/tmp/resil-fuzz-source-%ld.cache",
	    (long)getpid());
	if (mode & 1)
		run_file(data + 1, size - 1, file);
	else
		run_list(data + 1, size - 1, (mode & 2) == 0, file);
	return 0;
}

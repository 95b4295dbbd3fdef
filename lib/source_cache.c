/*
 * The registry cache file, in Dubbo's format (AbstractRegistry's
 * saveProperties/loadProperties): a Java properties file whose key is the
 * service key and whose value is the service's URLs, decoded, separated by
 * blanks. Written to a temporary file and renamed over the old one, so a
 * reader never sees half a file (Dubbo locks a side file instead); read
 * with java.util.Properties' escapes, so a file Dubbo wrote reads too.
 *
 * Blanks separate the URLs of a value, so a URL that holds a separator
 * (a blank, a tab, a line end, a form feed) is written with those as %XX,
 * and its '%' as %25 so that the reader's decoding is exact; a URL
 * without them, or without a '%' the reader would decode, is written as
 * Dubbo writes it. The reader decodes %20 %09 %0A %0D %0C %25 (issue
 * 38.9: "force:return null" used to come back "force:return%20null").
 */
#define _POSIX_C_SOURCE 200809L

#include "source_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A growable byte buffer through the allocator. */
typedef struct buf {
	const resil_allocator *a;
	char *p;
	size_t len, cap;
	int oom;
} buf;

static void
put(buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap == 0 ? 256 : b->cap;
		char *q;

		while (cap < b->len + n + 1)
			cap *= 2;
		if ((q = resil__alloc(b->a, cap)) == NULL) {
			b->oom = 1;
			return;
		}
		if (b->p != NULL) {
			memcpy(q, b->p, b->len);
			resil__free(b->a, b->p, b->cap);
		}
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
putc1(buf *b, char c)
{
	put(b, &c, 1);
}

static void
buf_free(buf *b)
{
	if (b->p != NULL)
		resil__free(b->a, b->p, b->cap);
	b->p = NULL;
	b->len = b->cap = 0;
}

static void
put_u(buf *b, unsigned cp)
{
	static const char hex[] = "0123456789ABCDEF";
	char e[6];

	e[0] = '\\';
	e[1] = 'u';
	e[2] = hex[(cp >> 12) & 15];
	e[3] = hex[(cp >> 8) & 15];
	e[4] = hex[(cp >> 4) & 15];
	e[5] = hex[cp & 15];
	put(b, e, 6);
}

/* The number of continuation bytes of the valid UTF-8 sequence at p
 * (its code point in *cp), or 0 when it is not one. */
static size_t
utf8_tail(const unsigned char *p, unsigned *cp)
{
	size_t need, i;
	unsigned v;

	if ((p[0] & 0xe0) == 0xc0) {
		v = p[0] & 0x1fu;
		need = 1;
	} else if ((p[0] & 0xf0) == 0xe0) {
		v = p[0] & 0x0fu;
		need = 2;
	} else if ((p[0] & 0xf8) == 0xf0) {
		v = p[0] & 0x07u;
		need = 3;
	} else
		return 0;
	for (i = 1; i <= need; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (p[i] & 0x3fu);
	}
	*cp = v;
	return need;
}

/* Properties.saveConvert: escapes of \, blanks (in a key, or leading in
 * a value), = : # ! and controls; characters above 0x7e as \uXXXX
 * (UTF-16 units; an invalid UTF-8 byte as its own value). */
static void
put_escaped(buf *b, const char *s, int key)
{
	const unsigned char *p = (const unsigned char *)s;
	int lead = 1;

	for (; *p != '\0'; p++) {
		unsigned c = *p;

		if (c == ' ' && (key || lead)) {
			put(b, "\\ ", 2);
			continue;
		}
		lead = 0;
		if (c == '\\' || c == '=' || c == ':' || c == '#' ||
		    c == '!') {
			putc1(b, '\\');
			putc1(b, (char)c);
		} else if (c == '\t')
			put(b, "\\t", 2);
		else if (c == '\n')
			put(b, "\\n", 2);
		else if (c == '\r')
			put(b, "\\r", 2);
		else if (c < 0x20 || c == 0x7f)
			put_u(b, c);
		else if (c < 0x80)
			putc1(b, (char)c);
		else {
			unsigned cp = 0;
			size_t need = utf8_tail(p, &cp);

			if (need == 0) {
				put_u(b, c);
				continue;
			}
			p += need;
			if (cp >= 0x10000) {
				cp -= 0x10000;
				put_u(b, 0xd800 + (cp >> 10));
				put_u(b, 0xdc00 + (cp & 0x3ff));
			} else
				put_u(b, cp);
		}
	}
}

/* The separators of a value's URLs, and what the reader decodes: the
 * char %XX at p stands for, or -1. */
static int
sep_char(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

static int
pct_char(const char *p)
{
	static const struct {
		const char *hex;
		char c;
	} codes[] = { { "20", ' ' }, { "09", '\t' }, { "0A", '\n' },
		{ "0D", '\r' }, { "0C", '\f' }, { "25", '%' } };
	size_t i;

	if (p[0] != '%' || p[1] == '\0' || p[2] == '\0')
		return -1;
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (p[1] == codes[i].hex[0] &&
		    (p[2] == codes[i].hex[1] ||
		        (codes[i].hex[1] >= 'A' &&
		            p[2] == codes[i].hex[1] + ('a' - 'A'))))
			return (unsigned char)codes[i].c;
	return -1;
}

/* One URL of a value: as Dubbo writes it, unless it holds a separator or
 * a sequence the reader decodes; then those and every '%' as %XX. */
static void
put_url(buf *b, const char *u)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *p;
	int pct = 0;

	for (p = u; *p != '\0' && !pct; p++)
		pct = sep_char(*p) || pct_char(p) >= 0;
	if (!pct) {
		put_escaped(b, u, 0);
		return;
	}
	for (p = u; *p != '\0'; p++) {
		char one[2] = { *p, '\0' };

		if (sep_char(*p) || *p == '%') {
			char e[3] = { '%', hex[(unsigned char)*p >> 4],
				hex[*p & 15] };

			put(b, e, 3);
		} else
			put_escaped(b, one, 0);
	}
}

/* fsync the directory of path, so that a rename in it lasts a crash; a
 * file system that cannot (EINVAL) is left as it is. */
static void
sync_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	int fd;

	if (slash == NULL)
		(void)snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		(void)snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) < sizeof(dir))
		(void)snprintf(
		    dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	else
		return;
	if ((fd = open(dir, O_RDONLY)) < 0)
		return;
	(void)fsync(fd);
	(void)close(fd);
}

resil_err
resil__cache_write(const resil_allocator *a, const char *file, const char *key,
    const char *const *urls, size_t n, resil_diag *why)
{
	buf b = { a, NULL, 0, 0, 0 };
	char *tmp;
	size_t i, tn = strlen(file) + 32;
	FILE *f;
	int ok;

	put(&b, "#Dubbo Registry Cache\n", 22);
	put_escaped(&b, key, 1);
	putc1(&b, '=');
	for (i = 0; i < n; i++) {
		if (i > 0)
			putc1(&b, ' ');
		put_url(&b, urls[i]);
	}
	putc1(&b, '\n');
	if (b.oom) {
		buf_free(&b);
		return RESIL_E_NOMEM;
	}
	if ((tmp = resil__alloc(a, tn)) == NULL) {
		buf_free(&b);
		return RESIL_E_NOMEM;
	}
	(void)snprintf(tmp, tn, "%s.tmp%ld", file, (long)getpid());
	f = fopen(tmp, "w");
	if (f == NULL) {
		resil__diagf(why, RESIL_E_INVAL, "cannot write %s: %s", tmp,
		    strerror(errno));
		resil__free(a, tmp, tn);
		buf_free(&b);
		return RESIL_E_INVAL;
	}
	/* The data reaches the disk before the rename makes it the file:
	 * a crash after the rename never leaves an empty or partial one. */
	ok = fwrite(b.p, 1, b.len, f) == b.len;
	ok = fflush(f) == 0 && ok;
	ok = fsync(fileno(f)) == 0 && ok;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, file) != 0) {
		resil__diagf(why, RESIL_E_INVAL, "cannot write %s: %s", file,
		    strerror(errno));
		(void)remove(tmp);
		resil__free(a, tmp, tn);
		buf_free(&b);
		return RESIL_E_INVAL;
	}
	sync_dir(file);
	resil__free(a, tmp, tn);
	buf_free(&b);
	return RESIL_OK;
}

static void
put_utf8(buf *b, unsigned cp)
{
	char e[4];

	if (cp < 0x80) {
		putc1(b, (char)cp);
	} else if (cp < 0x800) {
		e[0] = (char)(0xc0 | (cp >> 6));
		e[1] = (char)(0x80 | (cp & 0x3f));
		put(b, e, 2);
	} else if (cp < 0x10000) {
		e[0] = (char)(0xe0 | (cp >> 12));
		e[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		e[2] = (char)(0x80 | (cp & 0x3f));
		put(b, e, 3);
	} else {
		e[0] = (char)(0xf0 | (cp >> 18));
		e[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		e[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		e[3] = (char)(0x80 | (cp & 0x3f));
		put(b, e, 4);
	}
}

static int
hex4(const char *s, unsigned *v)
{
	unsigned x = 0;
	int i;

	for (i = 0; i < 4; i++) {
		char c = s[i];

		x <<= 4;
		if (c >= '0' && c <= '9')
			x |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			x |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			x |= (unsigned)(c - 'A' + 10);
		else
			return 0;
	}
	*v = x;
	return 1;
}

/* Properties.load over one logical line (continuations joined): the key
 * and the value, unescaped, into k and v. */
static void
unescape_into(buf *o, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned cp, lo;

		if (s[i] != '\\' || i + 1 >= n) {
			putc1(o, s[i]);
			continue;
		}
		i++;
		switch (s[i]) {
		case 't':
			putc1(o, '\t');
			break;
		case 'n':
			putc1(o, '\n');
			break;
		case 'r':
			putc1(o, '\r');
			break;
		case 'f':
			putc1(o, '\f');
			break;
		case 'u':
			if (i + 4 < n && hex4(s + i + 1, &cp)) {
				i += 4;
				if (cp >= 0xd800 && cp < 0xdc00 && i + 6 < n &&
				    s[i + 1] == '\\' && s[i + 2] == 'u' &&
				    hex4(s + i + 3, &lo) && lo >= 0xdc00 &&
				    lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) +
					    (lo - 0xdc00);
					i += 6;
				}
				put_utf8(o, cp);
			} else
				putc1(o, 'u');
			break;
		default:
			putc1(o, s[i]);
		}
	}
}

void
resil__cache_urls_free(const resil_allocator *a, char **urls, size_t n)
{
	size_t i, total = 0;

	if (urls == NULL)
		return;
	for (i = 0; i < n; i++)
		total += strlen(urls[i]) + 1;
	resil__free(a, urls, n * sizeof(char *) + total);
}

/* The width of the URL at p (up to a separator), and its length once
 * its %XX are decoded; copied decoded into out when not NULL. */
static size_t
url_width(const char *p, size_t *dlen, char *out)
{
	size_t w = 0, d = 0;

	while (p[w] != '\0' && !sep_char(p[w])) {
		int c = pct_char(p + w);

		if (out != NULL)
			out[d] = c >= 0 ? (char)c : p[w];
		w += c >= 0 ? 3 : 1;
		d++;
	}
	*dlen = d;
	return w;
}

/* Split value on blanks into one block: n pointers, then the strings,
 * their %XX decoded. */
static resil_err
split_urls(
    const resil_allocator *a, const char *v, char ***urls, size_t *count)
{
	size_t n = 0, bytes = 0, i, d;
	const char *p = v;
	char **out, *s;

	while (*p != '\0') {
		size_t w;

		while (sep_char(*p))
			p++;
		w = url_width(p, &d, NULL);
		if (w > 0) {
			n++;
			bytes += d + 1;
		}
		p += w;
	}
	if (n == 0) {
		*urls = NULL;
		*count = 0;
		return RESIL_OK;
	}
	if ((out = resil__alloc(a, n * sizeof(char *) + bytes)) == NULL)
		return RESIL_E_NOMEM;
	s = (char *)(out + n);
	for (p = v, i = 0; *p != '\0';) {
		size_t w;

		while (sep_char(*p))
			p++;
		w = url_width(p, &d, s);
		if (w > 0) {
			s[d] = '\0';
			out[i++] = s;
			s += d + 1;
		}
		p += w;
	}
	*urls = out;
	*count = n;
	return RESIL_OK;
}

resil_err
resil__cache_read(const resil_allocator *a, const char *file, const char *key,
    char ***urls, size_t *n, resil_diag *why)
{
	buf text = { a, NULL, 0, 0, 0 }, line = { a, NULL, 0, 0, 0 };
	buf k = { a, NULL, 0, 0, 0 }, v = { a, NULL, 0, 0, 0 };
	char chunk[4096];
	resil_err err = RESIL_E_NOTFOUND;
	size_t got, pos = 0;
	FILE *f = fopen(file, "r");

	if (f == NULL) {
		if (errno == ENOENT)
			return RESIL_E_NOTFOUND;
		return resil__diagf(why, RESIL_E_INVAL, "cannot read %s: %s",
		    file, strerror(errno));
	}
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0)
		put(&text, chunk, got);
	if (ferror(f)) {
		err = resil__diagf(why, RESIL_E_INVAL, "cannot read %s: %s",
		    file, strerror(errno));
		(void)fclose(f);
		buf_free(&text);
		return err;
	}
	(void)fclose(f);
	if (text.oom) {
		buf_free(&text);
		return RESIL_E_NOMEM;
	}
	while (text.p != NULL && pos < text.len) {
		const char *s;
		size_t i, ks, ke, vs;

		/* One logical line: a line ending in an odd number of
		 * backslashes goes on, leading blanks of the next dropped. */
		line.len = 0;
		if (line.p != NULL)
			line.p[0] = '\0';
		while (pos < text.len) {
			size_t e = pos, bs = 0;

			while (e < text.len && text.p[e] != '\n' &&
			    text.p[e] != '\r')
				e++;
			for (i = e; i > pos && text.p[i - 1] == '\\'; i--)
				bs++;
			put(&line, text.p + pos, e - pos - (bs % 2));
			pos = e;
			if (pos < text.len && text.p[pos] == '\r')
				pos++;
			if (pos < text.len && text.p[pos] == '\n')
				pos++;
			if (bs % 2 == 0)
				break;
			while (pos < text.len &&
			    (text.p[pos] == ' ' || text.p[pos] == '\t' ||
			        text.p[pos] == '\f'))
				pos++;
		}
		if (line.oom)
			break;
		s = line.p != NULL ? line.p : "";
		for (ks = 0; s[ks] == ' ' || s[ks] == '\t' || s[ks] == '\f';
		     ks++)
			;
		if (s[ks] == '\0' || s[ks] == '#' || s[ks] == '!')
			continue;
		for (ke = ks; s[ke] != '\0'; ke++) {
			if (s[ke] == '\\' && s[ke + 1] != '\0') {
				ke++;
				continue;
			}
			if (s[ke] == '=' || s[ke] == ':' || s[ke] == ' ' ||
			    s[ke] == '\t' || s[ke] == '\f')
				break;
		}
		vs = ke;
		while (s[vs] == ' ' || s[vs] == '\t' || s[vs] == '\f')
			vs++;
		if (s[vs] == '=' || s[vs] == ':')
			vs++;
		while (s[vs] == ' ' || s[vs] == '\t' || s[vs] == '\f')
			vs++;
		k.len = 0;
		if (k.p != NULL)
			k.p[0] = '\0';
		unescape_into(&k, s + ks, ke - ks);
		if (k.oom)
			break;
		if (k.p == NULL || strcmp(k.p, key) != 0)
			continue;
		v.len = 0;
		if (v.p != NULL)
			v.p[0] = '\0';
		unescape_into(&v, s + vs, strlen(s + vs));
		if (v.oom)
			break;
		/* The last line with the key wins, as Properties.put. */
		err = RESIL_OK;
		*n = 0;
	}
	if (text.oom || line.oom || k.oom || v.oom)
		err = RESIL_E_NOMEM;
	else if (err == RESIL_OK)
		err = split_urls(a, v.p != NULL ? v.p : "", urls, n);
	buf_free(&text);
	buf_free(&line);
	buf_free(&k);
	buf_free(&v);
	return err;
}

/* Whether name is base + ".tmp" + a PID (decimal, no sign); *pid. */
static int
tmp_of(const char *name, const char *base, size_t bl, long *pid)
{
	const char *d;
	long v = 0;

	if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp", 4) != 0)
		return 0;
	d = name + bl + 4;
	if (*d == '\0' || *d == '0')
		return 0;
	for (; *d != '\0'; d++) {
		if (*d < '0' || *d > '9' || v > 99999999)
			return 0;
		v = v * 10 + (*d - '0');
	}
	*pid = v;
	return 1;
}

size_t
resil__cache_sweep(const char *file)
{
	const char *slash = strrchr(file, '/');
	const char *base = slash != NULL ? slash + 1 : file;
	size_t bl = strlen(base), removed = 0;
	char dir[4096], path[4096];
	struct dirent *de;
	DIR *dp;

	if (slash == NULL)
		(void)snprintf(dir, sizeof(dir), ".");
	else if (slash == file)
		(void)snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - file) < sizeof(dir))
		(void)snprintf(
		    dir, sizeof(dir), "%.*s", (int)(slash - file), file);
	else
		return 0;
	if (bl == 0 || (dp = opendir(dir)) == NULL)
		return 0;
	while ((de = readdir(dp)) != NULL) {
		long pid;

		if (!tmp_of(de->d_name, base, bl, &pid) ||
		    pid == (long)getpid())
			continue;
		/* Only a writer that is gone: a live one (EPERM is alive
		 * too) may be about to rename its file. */
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
		        de->d_name) < sizeof(path) &&
		    unlink(path) == 0)
			removed++;
	}
	(void)closedir(dp);
	return removed;
}

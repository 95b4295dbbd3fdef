/*
 * libFuzzer harness: resil-sim's scenario parser (read_scenario() in
 * tools/resil_sim.c).
 *
 * read_scenario() is static and reads a named file, so this harness
 * compiles tools/resil_sim.c into itself (its main renamed) and serves
 * the "file" from memory through fmemopen(); refusals, printed as
 * `file:line: message` on stderr, are captured instead of printed. A
 * parser in its own file (say tools/sim_scenario.c with
 * `int sim_read_scenario(FILE *, const char *origin, ...)`) would let the
 * harness link it instead; tools/resil_sim.c is not changed here.
 *
 * Input: scenario text. Properties:
 *   - the parser returns 0 with at least one step, or 2 with a message
 *     that starts with "fuzz.scn:" (or says "no steps");
 *   - accepted steps: times never decrease, a known behaviour, calls up to
 *     100000, a method name that is non-empty and fits;
 *   - printing the steps back as scenario text and parsing that gives the
 *     same steps (line numbers aside).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"

static const char *fuzz_text;
static size_t fuzz_len;
static char fuzz_msg[1024];

static FILE *
fuzz_fopen(const char *path, const char *mode)
{
	(void)path;
	(void)mode;
	/* fmemopen of zero bytes fails on some libcs: serve one newline. */
	if (fuzz_len == 0)
		return fmemopen((void *)"\n", 1, "r");
	return fmemopen((void *)fuzz_text, fuzz_len, "r");
}

static int fuzz_fprintf(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
fuzz_fprintf(FILE *f, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	if (f == stderr)
		r = vsnprintf(fuzz_msg, sizeof(fuzz_msg), fmt, ap);
	else
		r = vfprintf(f, fmt, ap);
	va_end(ap);
	return r;
}

int resil_sim_main(int argc, char **argv);

#define fopen fuzz_fopen
#define fprintf fuzz_fprintf
#define main resil_sim_main
#include "../tools/resil_sim.c"
#undef main
#undef fprintf
#undef fopen

static const char *const behaviour_names[] = { "ok", "null", "fail", "slow",
	"business" };

static void
check_steps(const step *v, size_t n)
{
	size_t i;

	FUZZ_CHECK(n > 0, "accepted with no step");
	for (i = 0; i < n; i++) {
		FUZZ_CHECK(i == 0 || v[i].t >= v[i - 1].t,
		    "step %zu: time %llu after %llu", i,
		    (unsigned long long)v[i].t,
		    (unsigned long long)v[i - 1].t);
		FUZZ_CHECK((unsigned)v[i].b <= (unsigned)B_BUSINESS,
		    "step %zu: behaviour %d", i, (int)v[i].b);
		FUZZ_CHECK(
		    v[i].calls <= 100000, "step %zu: %u calls", i, v[i].calls);
		FUZZ_CHECK(v[i].method[0] != '\0' &&
		        memchr(v[i].method, '\0', MAX_METHOD) != NULL,
		    "step %zu: bad method", i);
		FUZZ_CHECK(v[i].line > 0, "step %zu: line 0", i);
	}
}

/*
 * Two layouts of a step are known: VALUE an int64_t and times in raw ticks
 * (the first resil-sim), or VALUE the checked word (MAX_VALUE) and times
 * read as configuration durations (a bare number is milliseconds), which
 * print back exactly in nanoseconds with the "ns" unit.
 */
#ifdef MAX_VALUE
#define TIME_FMT "%lluns"
#define VALUE_FMT " %s"
#define VALUE_ARG(s) (s).value
#define VALUE_EQ(a, b) (strcmp((a).value, (b).value) == 0)
#else
#define TIME_FMT "%llu"
#define VALUE_FMT " %lld"
#define VALUE_ARG(s) (long long)(s).value
#define VALUE_EQ(a, b) ((a).value == (b).value)
#endif

static char *
print_steps(const step *v, size_t n, size_t *len)
{
	size_t cap = n * (MAX_LINE + 2) + 1, i, at = 0;
	char *out = malloc(cap);

	FUZZ_CHECK(out != NULL, "out of memory");
	for (i = 0; i < n; i++) {
		at += (size_t)snprintf(out + at, cap - at, TIME_FMT " %s",
		    (unsigned long long)v[i].t, behaviour_names[v[i].b]);
		if (v[i].b == B_SLOW)
			at += (size_t)snprintf(out + at, cap - at,
			    " " TIME_FMT, (unsigned long long)v[i].slow);
		if (v[i].b == B_OK || v[i].b == B_SLOW)
			at += (size_t)snprintf(
			    out + at, cap - at, VALUE_FMT, VALUE_ARG(v[i]));
		at += (size_t)snprintf(out + at, cap - at,
		    " calls=%u method=%s\n", v[i].calls, v[i].method);
	}
	*len = at;
	return out;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	step *v = NULL, *w = NULL;
	size_t n = 0, m = 0, len, i;
	char *text;
	int rc;

	fuzz_text = (const char *)data;
	fuzz_len = size;
	fuzz_msg[0] = '\0';
	rc = read_scenario("fuzz.scn", "call", &v, &n);
	if (rc != 0) {
		FUZZ_CHECK(rc == 2, "read_scenario returned %d", rc);
		FUZZ_CHECK(strncmp(fuzz_msg, "fuzz.scn:", 9) == 0 ||
		        strcmp(fuzz_msg, "resil-sim: out of memory\n") == 0,
		    "refusal without file:line: \"%s\"", fuzz_msg);
		return 0;
	}
	check_steps(v, n);

	text = print_steps(v, n, &len);
	fuzz_text = text;
	fuzz_len = len;
	fuzz_msg[0] = '\0';
	rc = read_scenario("fuzz.scn", "call", &w, &m);
	FUZZ_CHECK(rc == 0, "printed steps refused: %s%s", fuzz_msg, text);
	FUZZ_CHECK(m == n, "%zu steps printed, %zu read back", n, m);
	for (i = 0; i < n; i++) {
		FUZZ_CHECK(v[i].t == w[i].t && v[i].b == w[i].b &&
		        v[i].calls == w[i].calls &&
		        strcmp(v[i].method, w[i].method) == 0 &&
		        (v[i].b != B_SLOW || v[i].slow == w[i].slow) &&
		        ((v[i].b != B_OK && v[i].b != B_SLOW) ||
		            VALUE_EQ(v[i], w[i])),
		    "step %zu changed when printed back", i);
	}
	free(w);
	free(text);
	free(v);
	return 0;
}

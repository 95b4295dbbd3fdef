/*
 * libFuzzer harness: the Dubbo mock-spec parser (resil_mock_parse).
 *
 * Input: the first byte picks the declared type (byte % 10, a resil_type),
 * the rest is the spec text (up to its first NUL). Properties:
 *   - a spec is accepted (RESIL_OK) or refused with RESIL_E_INVAL and a
 *     message; nothing else;
 *   - an accepted spec prints a canonical text (resil_mock_spec_format)
 *     whose returned length is the length written, which parses back,
 *     under the same declared type, to an equal normal form
 *     (resil_mock_spec_equal), and which prints itself again (the
 *     canonical text is a fixed point);
 *   - the spec is a deep copy: freeing the input does not matter (ASan).
 */
#include <string.h>

#include <resil/mock.h>

#include "fuzz.h"

static char *
format_alloc(const resil_mock_spec *s)
{
	char small[8];
	size_t n = resil_mock_spec_format(s, small, sizeof(small));
	char *buf = malloc(n + 1);
	size_t again;

	FUZZ_CHECK(buf != NULL, "out of memory");
	again = resil_mock_spec_format(s, buf, n + 1);
	FUZZ_CHECK(again == n, "format length %zu then %zu", n, again);
	FUZZ_CHECK(
	    strlen(buf) == n, "format wrote %zu of %zu", strlen(buf), n);
	return buf;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	resil_type type;
	resil_mock_spec s, again;
	resil_diag d;
	resil_err e;
	char *text, *canon, *canon2;

	if (size == 0)
		return 0;
	type = (resil_type)(data[0] % 10);
	text = malloc(size);
	FUZZ_CHECK(text != NULL, "out of memory");
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';

	d.msg[0] = '\0';
	e = resil_mock_parse(&s, text, type, NULL, &d);
	if (e != RESIL_OK) {
		FUZZ_CHECK(
		    e == RESIL_E_INVAL, "\"%s\": %s", text, resil_err_name(e));
		FUZZ_CHECK(d.msg[0] != '\0',
		    "\"%s\" refused without a message", text);
		free(text);
		return 0;
	}
	free(text); /* the spec must not point into its text */
	canon = format_alloc(&s);
	d.msg[0] = '\0';
	e = resil_mock_parse(&again, canon, type, NULL, &d);
	FUZZ_CHECK(e == RESIL_OK, "canonical \"%s\" (type %s) refused: %s",
	    canon, resil_type_name(type), d.msg);
	FUZZ_CHECK(resil_mock_spec_equal(&s, &again),
	    "canonical \"%s\" (type %s) parses to another normal form", canon,
	    resil_type_name(type));
	canon2 = format_alloc(&again);
	FUZZ_CHECK(strcmp(canon, canon2) == 0,
	    "canonical \"%s\" prints as \"%s\"", canon, canon2);
	free(canon2);
	free(canon);
	resil_mock_spec_free(&again);
	resil_mock_spec_free(&s);
	return 0;
}

/*
 * The directory's endpoint breakers in shared memory (issue 24.2,
 * resil_directory_config.endpoint_breaker_shm): the region a directory
 * opens, and each endpoint's breaker in it. The directory's room, below
 * the pipeline (issue 38, the house): it names only shm.h.
 */
#include "directory_internal.h"

#include <stdio.h>
#include <string.h>

/* A character of a shm entry's name (shm.h: [A-Za-z0-9._-]). */
static int
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

resil_err
resil__dir_shm_region(const char *name, int has_breaker,
    const resil_allocator *a, resil_shm **out, resil_diag *diag)
{
	resil_shm_config sc;
	resil_diag d;
	resil_err err;

	if (!has_breaker)
		return resil__diagf(diag, RESIL_E_INVAL,
		    "endpoint.breaker.shared: needs the endpoint breaker "
		    "(endpoint.breaker.* keys, endpoint_breaker)");
	resil_shm_config_init(&sc);
	sc.alloc = a;
	d.msg[0] = '\0';
	err = resil_shm_open(out, name, &sc, &d);
	if (err != RESIL_OK)
		return resil__diagf(
		    diag, err, "endpoint.breaker.shared: %s", d.msg);
	return RESIL_OK;
}

resil_err
resil__dir_shm_breaker(resil_shm *shm, const char *address,
    const resil_breaker_config *cfg, resil_breaker **out, resil_diag *diag)
{
	char name[64];
	size_t i, n = strlen(address);
	uint64_t h = UINT64_C(14695981039346656037);
	int changed = n > 59;

	memcpy(name, "ep.", 3);
	for (i = 0; i < n; i++) {
		char c = address[i];

		h = (h ^ (unsigned char)c) * UINT64_C(1099511628211);
		if (!name_char(c)) {
			c = '_';
			changed = 1;
		}
		if (i < 59)
			name[3 + i] = c;
	}
	name[3 + (n < 59 ? n : 59)] = '\0';
	if (changed) /* "ep." + up to 43 + "-" + 16 hex digits */
		snprintf(name + (n < 43 ? 3 + n : 46), 18, "-%016llx",
		    (unsigned long long)h);
	return resil_shm_breaker(shm, name, cfg, out, diag);
}

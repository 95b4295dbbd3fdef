/*
 * The directory's endpoint breakers on the fleet (issue 44, h2;
 * lib/directory_internal.h, resil__dir_fleet_attach): each endpoint's
 * fleet breaker, named after its address, in the group the pipeline
 * gives. The directory's room, below the pipeline: it names only fleet.h.
 */
#include "directory_internal.h"

#include <resil/fleet.h>

#include <stdio.h>
#include <string.h>

static int
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

void
resil__dir_fleet_name(const char *prefix, const char *address, char name[64])
{
	size_t i, n = strlen(address), p = strlen(prefix);
	uint64_t h = UINT64_C(14695981039346656037);
	size_t room, keep;

	if (p > 59)
		p = 59; /* not reached: a fleet name is at most 63 - 4 */
	memcpy(name, prefix, p);
	memcpy(name + p, ".ep.", 4);
	room = 63 - (p + 4); /* for the address */
	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)address[i]) * UINT64_C(1099511628211);
	keep = n <= room ? n : (room > 17 ? room - 17 : 0);
	for (i = 0; i < keep; i++)
		name[p + 4 + i] = name_char(address[i]) ? address[i] : '_';
	name[p + 4 + keep] = '\0';
	if (keep < n) /* cut: "-" and 16 hex digits follow */
		snprintf(name + p + 4 + keep, 64 - (p + 4 + keep), "-%016llx",
		    (unsigned long long)h);
}

resil_err
resil__dir_fleet_new(const resil__dir_fleet *df, const char *address,
    const resil_breaker_config *bc, struct resil_fleet **out,
    resil_diag *diag)
{
	resil_fleet_config fc;
	char name[64];

	resil_fleet_config_init(&fc);
	resil__dir_fleet_name(df->prefix, address, name);
	fc.name = name;
	fc.group = df->group;
	fc.breaker = *bc;
	fc.alloc = bc->alloc;
	if (df->quorum != 0)
		fc.quorum = df->quorum;
	fc.quorum_traffic_pct = df->quorum_traffic_pct;
	if (df->probe_leases != 0)
		fc.probe_leases = df->probe_leases;
	fc.max_local_leases = df->max_local_leases;
	if (df->buckets != 0)
		fc.buckets = df->buckets;
	if (df->open_wait_ms != 0)
		fc.open_wait_ms = df->open_wait_ms;
	if (df->lease_ms != 0)
		fc.lease_ms = df->lease_ms;
	if (df->vote_ms != 0)
		fc.vote_ms = df->vote_ms;
	if (df->bucket_ms != 0)
		fc.bucket_ms = df->bucket_ms;
	return resil_fleet_new(out, &fc, diag);
}

resil_breaker *
resil__ep_breaker(const resil__endpoint *ep)
{
	struct resil_fleet *f =
	    resil__loadptr((void *const *)(const void *)&ep->fleet);

	return f != NULL ? resil_fleet_breaker(f) : ep->breaker;
}

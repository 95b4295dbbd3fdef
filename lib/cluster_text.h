/*
 * Private: what lib/config.c asks the cluster keys of a text
 * (lib/cluster_text.c, resil_cluster_text in include/resil/selector.h)
 * about the pipeline keys beside them, which the cluster keys do not see.
 * Never installed.
 */
#ifndef RESIL_CLUSTER_TEXT_H
#define RESIL_CLUSTER_TEXT_H

#include <resil/selector.h>

/* The pipeline keys the cluster keys must agree with. */
typedef struct resil__cluster_peer {
	const char *origin;    /* the text's, for messages; NULL: none */
	int zone_aware;        /* cluster=zone-aware */
	unsigned cluster_line; /* the line of cluster=; 0: not known */
	int local_zone;        /* zone= was given */
	/* registry='s URL when a registry feeds the directory (not
	 * registry=N/A); NULL: none. */
	const char *registry;
	unsigned registry_line;
} resil__cluster_peer;

/*
 * RESIL_OK, or RESIL_E_INVAL naming both keys, each with origin:line when
 * known: the selector's zone routing (router.zone, router.zone.mode other
 * than off) with cluster=zone-aware, which it would keep from crossing;
 * router.zone.mode other than off without a zone (router.zone=, zone=);
 * url= with a registry, which would replace the listed endpoints at its
 * first push.
 */
resil_err resil__cluster_text_peer_check(const resil_cluster_text *cc,
    const resil__cluster_peer *peer, resil_diag *diag);

/* Whether s is a zone name: letters, digits, '_', '-', '.', not empty
 * (router.zone's rule; zone= checks it too, issue 38.6). */
int resil__zone_name_ok(const char *s);

#endif /* RESIL_CLUSTER_TEXT_H */

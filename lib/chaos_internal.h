/*
 * The flag test of a chaos, inline, for the call machine's attempt path
 * (issue 28: chaos switched off costs one load and one test). lib/chaos.c
 * keeps the flag word first in struct resil_chaos, its low four bits the
 * live strategies. Never installed.
 */
#ifndef RESIL_CHAOS_INTERNAL_H
#define RESIL_CHAOS_INTERNAL_H

#include <resil/chaos.h>

#include "atomic.h"

/* Whether any strategy of ch (not NULL) would draw now: what
 * resil_chaos_live() answers, without the call. */
static inline int
resil__chaos_is_live(const resil_chaos *ch)
{
	return (resil__load64((const uint64_t *)(const void *)ch) & 0xFu) !=
	    0;
}

#endif /* RESIL_CHAOS_INTERNAL_H */

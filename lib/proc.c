/*
 * resil proc: the process table of a shared region (lib/proc.h). A slot
 * names a process by one word, its pid and start time together, so that
 * claiming a slot is one compare-and-swap: a claim is never seen half
 * done. A process found dead (or a pid now used by another process) frees
 * its slot for the next claim.
 */
#define _GNU_SOURCE 1

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic.h"
#include "proc.h"

/* The start time of process pid (field 22 of /proc/PID/stat), 0 if it
 * cannot be read. */
static uint64_t
proc_start(uint64_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;
	size_t n;
	int field;

	snprintf(
	    path, sizeof(path), "/proc/%llu/stat", (unsigned long long)pid);
	f = fopen(path, "r");
	if (f == NULL)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold blanks and parentheses: count fields
	 * from the last ')'. */
	p = strrchr(buf, ')');
	if (p == NULL)
		return 0;
	for (field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p != NULL)
		start = strtoull(p + 1, NULL, 10);
	return start;
}

/* A start time folded into 32 bits, 0 only when unknown. In clock ticks
 * since boot: two processes with one pid whose start times differ by a
 * multiple of 2^32 - 1 ticks (about 497 days at 100 Hz) are taken for one
 * another, which a reused pid never is in practice. */
static uint64_t
fold_start(uint64_t start)
{
	return start == 0 ? 0 : start % UINT64_C(0xffffffff) + 1;
}

uint64_t
resil__proc_id_self(void)
{
	uint64_t pid = (uint64_t)getpid();

	return pid | fold_start(proc_start(pid)) << 32;
}

bool
resil__proc_id_alive(uint64_t id)
{
	uint64_t pid = id & RESIL__PROC_PID_MASK, start;

	if (pid == 0)
		return false;
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return false;
	start = (id & RESIL__PROC_START_MASK) >> 32;
	/* A pid now used by another process is not the one that died. */
	return start == 0 || fold_start(proc_start(pid)) == start;
}

bool
resil__proc_alive(const resil__proc *procs, unsigned i)
{
	if (i >= RESIL__PROCS)
		return false;
	return resil__proc_id_alive(resil__load64(&procs[i].owner));
}

bool
resil__proc_claim(resil__proc *procs, unsigned *slot, uint64_t *prev,
    resil__proc_busy_fn busy, void *ctx)
{
	uint64_t me = resil__proc_id_self(), cur;
	unsigned i;

	for (i = 0; i < RESIL__PROCS; i++) {
		cur = resil__load64(&procs[i].owner);
		if (cur != 0 && resil__proc_id_alive(cur))
			continue;
		/* Dead, but still named by what it was doing (a
		 * transition, a lock): left for the others to finish. */
		if (cur != 0 && busy != NULL && busy(i, ctx))
			continue;
		/* One CAS: from the word seen dead (or free) to ours. A
		 * racer that saw the same word loses; one that reads ours
		 * sees a live process. */
		if (!resil__cas64(&procs[i].owner, cur, me))
			continue;
		resil__store64(&procs[i].pid, me & RESIL__PROC_PID_MASK);
		*slot = i;
		*prev = cur & RESIL__PROC_PID_MASK;
		return true;
	}
	return false;
}

void
resil__proc_release(resil__proc *procs, unsigned slot)
{
	/* The pid copy first: once the owner word is 0 the slot may be
	 * claimed, and the claimer writes its own pid there. */
	resil__store64(&procs[slot].pid, 0);
	resil__fence();
	resil__store64(&procs[slot].owner, 0);
}

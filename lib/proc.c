/*
 * resil proc: the process table of a shared region (lib/proc.h). A slot
 * names a process by its pid and start time; a process found dead (or a
 * pid now used by another process) frees its slot for the next claim.
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

bool
resil__proc_alive(const resil__proc *procs, unsigned i)
{
	uint64_t pid, start;

	if (i >= RESIL__PROCS)
		return false;
	pid = resil__load64(&procs[i].pid);
	if (pid == 0)
		return false;
	if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		return false;
	start = resil__load64(&procs[i].start);
	/* A pid now used by another process is not the one that died. */
	return start == 0 || proc_start(pid) == start;
}

bool
resil__proc_claim(resil__proc *procs, unsigned *slot, uint64_t *prev)
{
	uint64_t me = (uint64_t)getpid(), pid;
	unsigned i;

	for (i = 0; i < RESIL__PROCS; i++) {
		pid = resil__load64(&procs[i].pid);
		if (pid != 0 && resil__proc_alive(procs, i))
			continue;
		if (!resil__cas64(&procs[i].pid, pid, me))
			continue;
		resil__store64(&procs[i].start, proc_start(me));
		*slot = i;
		*prev = pid;
		return true;
	}
	return false;
}

void
resil__proc_release(resil__proc *procs, unsigned slot)
{
	resil__store64(&procs[slot].start, 0);
	resil__store64(&procs[slot].pid, 0);
}

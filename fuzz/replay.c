/*
 * Replay driver: runs a harness's LLVMFuzzerTestOneInput over files and
 * directories of inputs without libFuzzer, so `make test` (any compiler)
 * checks every regression input and seed. Exits non-zero when no input
 * was found; a failed property aborts inside the harness.
 *
 *   replay_<harness> DIR_OR_FILE...
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static unsigned long runs;

static void
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL) {
		perror(path);
		exit(2);
	}
	do {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			buf = realloc(buf, cap);
			if (buf == NULL) {
				fprintf(stderr, "replay: out of memory\n");
				exit(2);
			}
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	runs++;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
run_path(const char *path)
{
	struct stat st;
	DIR *dir;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0, i;

	if (stat(path, &st) != 0)
		return; /* an absent directory holds no input */
	if (!S_ISDIR(st.st_mode)) {
		run_file(path);
		return;
	}
	dir = opendir(path);
	if (dir == NULL)
		return;
	while ((de = readdir(dir)) != NULL) {
		size_t l;

		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (names == NULL)
				exit(2);
		}
		l = strlen(path) + strlen(de->d_name) + 2;
		names[n] = malloc(l);
		if (names[n] == NULL)
			exit(2);
		snprintf(names[n], l, "%s/%s", path, de->d_name);
		n++;
	}
	closedir(dir);
	if (n > 0)
		qsort(names, n, sizeof(*names), by_name);
	for (i = 0; i < n; i++) {
		run_path(names[i]);
		free(names[i]);
	}
	free(names);
}

int
main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++)
		run_path(argv[i]);
	printf("replayed %lu inputs\n", runs);
	return runs > 0 ? 0 : 1;
}

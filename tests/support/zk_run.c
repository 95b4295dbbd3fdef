/*
 * zk_run PROGRAM [ARGS...]: start a ZooKeeper server (zk_server.c) on a
 * free port, run PROGRAM 127.0.0.1:PORT ARGS..., stop the server, and exit
 * with PROGRAM's status. ctest runs examples/zookeeper through it. 77
 * (ctest's skip) when ZooKeeper is not installed or does not start.
 */
#define _GNU_SOURCE 1

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zk_server.h"

int
main(int argc, char **argv)
{
	zk_server z;
	char **args;
	pid_t pid;
	int st = 0, i;

	if (argc < 2) {
		fprintf(stderr, "usage: zk_run PROGRAM [ARGS...]\n");
		return 2;
	}
	if (!zk_installed()) {
		fprintf(stderr,
		    "zk_run: java or the zookeeper jar is not "
		    "installed (tools/install-deps.sh)\n");
		return 77;
	}
	if (zk_start(&z) != 0) {
		fprintf(
		    stderr, "zk_run: ZooKeeper did not start (%s)\n", z.dir);
		zk_stop(&z);
		return 77;
	}
	args = calloc((size_t)argc + 2, sizeof(char *));
	if (args == NULL) {
		zk_stop(&z);
		return 1;
	}
	args[0] = argv[1];
	args[1] = z.hosts;
	for (i = 2; i < argc; i++)
		args[i] = argv[i];
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execv(argv[1], args);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = 1 << 8;
	free(args);
	zk_stop(&z);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

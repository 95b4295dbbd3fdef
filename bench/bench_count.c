/*
 * resil_bench_count: run one benchmark body a fixed number of times, in one
 * thread, for `valgrind --tool=callgrind --toggle-collect=bench_measure`.
 * Usage: resil_bench_count NAME [ITERS]; with no NAME, lists the names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* callgrind counts instructions inside this function only. */
__attribute__((noinline)) uint64_t bench_measure(
    const resil_bench *rb, void *ctx, uint64_t iters);

__attribute__((noinline)) uint64_t
bench_measure(const resil_bench *rb, void *ctx, uint64_t iters)
{
	return rb->run(ctx, iters);
}

int
main(int argc, char **argv)
{
	const resil_bench *const *t;
	const resil_bench *rb;
	uint64_t iters = 100000, r;
	void *ctx;

	if (argc > 2)
		iters = strtoull(argv[2], NULL, 10);
	for (t = resil_bench_tables; *t != NULL; t++)
		for (rb = *t; rb->name != NULL; rb++) {
			if (argc < 2) {
				printf("%s\n", rb->name);
				continue;
			}
			if (strcmp(rb->name, argv[1]) != 0)
				continue;
			ctx = rb->setup();
			/* Warm up once so first-touch costs are not counted. */
			rb->run(ctx, 1);
			r = bench_measure(rb, ctx, iters);
			rb->teardown(ctx);
			printf("%s %llu %llu\n", rb->name,
			    (unsigned long long)iters, (unsigned long long)r);
			return 0;
		}
	if (argc < 2)
		return 0;
	fprintf(stderr, "resil_bench_count: no benchmark named %s\n", argv[1]);
	return 2;
}

/*
 * Benchmark bodies, written in C. Each module's bench_<mod>.c defines a
 * table of cases; bench_main.cc (the only C++ file) registers every case
 * with Google Benchmark, and bench_count.c runs one case a fixed number of
 * times for callgrind's instruction counts.
 *
 * run() loops iters times over the operation and returns a count that
 * depends on every iteration, so the loop cannot be optimised away. setup()
 * builds one object shared by every thread of a run; run() must be safe to
 * call on it from several threads at once.
 */
#ifndef RESIL_BENCH_H
#define RESIL_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct resil_bench {
	const char *name;
	void *(*setup)(void);
	uint64_t (*run)(void *ctx, uint64_t iters);
	void (*teardown)(void *ctx);
} resil_bench;

/* NULL-terminated tables, one per module. */
extern const resil_bench resil_bench_baseline[];
extern const resil_bench resil_bench_breaker[];
extern const resil_bench resil_bench_retry[];
extern const resil_bench resil_bench_pipeline[];
extern const resil_bench resil_bench_fallback[];
extern const resil_bench resil_bench_limit[];
extern const resil_bench resil_bench_shm[];
extern const resil_bench resil_bench_balance[];
extern const resil_bench resil_bench_fleet[];
extern const resil_bench resil_bench_chaos[];
extern const resil_bench resil_bench_outlier[];
extern const resil_bench resil_bench_health[];
extern const resil_bench resil_bench_gradient[];
extern const resil_bench resil_bench_throttle[];

/* Every table, NULL-terminated. */
extern const resil_bench *const resil_bench_tables[];

#ifdef __cplusplus
}
#endif

#endif

#include "bench.h"

#include <stddef.h>

/* The registry source's rows (bench_source.c). */
extern const resil_bench resil_bench_source[];
/* Keyed families (bench_keyed.c, issue 41). */
extern const resil_bench resil_bench_keyed[];
/* Keyed pipelines, composite keys (bench_keyed_pipeline.c, issue 41). */
extern const resil_bench resil_bench_keyed_pipeline[];
/* Keyed families in shared memory (bench_keyed_shm.c, issue 41). */
extern const resil_bench resil_bench_keyed_shm[];

const resil_bench *const resil_bench_tables[] = {
	resil_bench_baseline,
	resil_bench_breaker,
	resil_bench_retry,
	resil_bench_fallback,
	resil_bench_limit,
	resil_bench_pipeline,
	resil_bench_shm,
	resil_bench_balance,
	resil_bench_fleet,
	resil_bench_source,
	resil_bench_chaos,
	resil_bench_outlier,
	resil_bench_health,
	resil_bench_gradient,
	resil_bench_throttle,
	resil_bench_keyed,
	resil_bench_keyed_pipeline,
	resil_bench_keyed_shm,
	NULL,
};

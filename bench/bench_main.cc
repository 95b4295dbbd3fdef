// Registers the C benchmark bodies of bench/*.c with Google Benchmark.
// The only C++ in resil.
#include <benchmark/benchmark.h>

#include "bench.h"

static void
run_case(benchmark::State &state, const resil_bench *rb)
{
	static void *ctx; // one object, shared by every thread of a run

	if (state.thread_index() == 0)
		ctx = rb->setup();
	// KeepRunningBatch starts and ends with a barrier across threads, so
	// every thread sees ctx set up and none runs after the teardown.
	while (state.KeepRunningBatch(1024))
		benchmark::DoNotOptimize(rb->run(ctx, 1024));
	if (state.thread_index() == 0)
		rb->teardown(ctx);
}

int
main(int argc, char **argv)
{
	for (const resil_bench *const *t = resil_bench_tables; *t != nullptr;
	     t++)
		for (const resil_bench *rb = *t; rb->name != nullptr; rb++)
			benchmark::RegisterBenchmark(rb->name, run_case, rb)
			    ->ThreadRange(1, 2);
	benchmark::Initialize(&argc, argv);
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}

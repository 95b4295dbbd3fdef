# Thin wrapper over CMake presets. Each target installs what it needs
# (tools/install-deps.sh: nothing when everything is present), configures its
# own build tree under build/, builds, and runs.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_BUILD = cmake --build --preset

.PHONY: all deps dev demo test bench bench-build bench-instructions asan ubsan tsan model format clean

all: test

deps:
	@sh tools/install-deps.sh

dev: deps
	cmake --preset dev >/dev/null
	$(CMAKE_BUILD) dev -j $(JOBS)
	@ln -sf dev/tools/resil-sim build/resil-sim

# The seed's inventory demo on a pipeline, then the same scenario through
# the simulator, which draws the timeline as SVG. The build is quiet (its
# log is shown only when it fails); each part is introduced in English.
demo: deps
	@cmake --preset dev >build-demo.log 2>&1 || { cat build-demo.log; exit 1; }
	@$(CMAKE_BUILD) dev -j $(JOBS) -- --no-print-directory >>build-demo.log 2>&1 \
	  || { cat build-demo.log; exit 1; }
	@mv -f build-demo.log build/demo-build.log
	@ln -sf dev/tools/resil-sim build/resil-sim
	@cat examples/inventory.intro
	@./build/dev/examples/inventory
	@cat examples/sim/inventory.intro
	@./build/resil-sim examples/sim/inventory.conf examples/sim/inventory.scn \
	  --svg build/inventory.svg --metrics build/inventory.prom

test: dev
	ctest --preset dev -j $(JOBS)

# An optimised build (the install preset), installed into PREFIX; the
# installed resil-sim finds libresil through an $ORIGIN-relative RUNPATH.
PREFIX ?= /usr/local
.PHONY: install
install: deps
	cmake --preset install >/dev/null
	$(CMAKE_BUILD) install -j $(JOBS)
	cmake --install build/install --prefix $(PREFIX)

asan: deps
	cmake --preset asan >/dev/null
	$(CMAKE_BUILD) asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

ubsan: deps
	cmake --preset ubsan >/dev/null
	$(CMAKE_BUILD) ubsan -j $(JOBS)
	ctest --preset ubsan -j $(JOBS)

tsan: deps
	cmake --preset tsan >/dev/null
	$(CMAKE_BUILD) tsan -j $(JOBS)
	ctest --preset tsan

# Build (only) the release preset with the benchmarks, as CI does.
bench-build: deps
	cmake --preset release >/dev/null
	$(CMAKE_BUILD) release -j $(JOBS)

bench: bench-build
	@sh tools/install-deps.sh python3
	./build/release/bench/resil_bench --benchmark_repetitions=5 \
	  --benchmark_report_aggregates_only=true \
	  --benchmark_out=build/bench.json --benchmark_out_format=json
	python3 tools/bench_report.py build/bench.json build/bench-instructions.txt

bench-instructions: deps
	@sh tools/install-deps.sh valgrind
	cmake --preset release >/dev/null
	$(CMAKE_BUILD) release -j $(JOBS)
	sh tools/bench-instructions.sh build/release | tee build/bench-instructions.txt

# The Promela models of the breaker's lock-free protocol and of the
# bulkhead that waits (issue 42), checked by spin.
model:
	@sh tools/install-deps.sh spin
	sh tools/check-model.sh build/model

format:
	clang-format -i include/resil/*.h lib/*.c lib/*.h tests/*.c tests/support/*.[ch] examples/*.c examples/support/*.[ch]

clean:
	rm -rf build

# libFuzzer (clang, ASan + UBSan): each harness of fuzz/ for FUZZ_S seconds
# over its seeds and regression inputs. New inputs go to build/fuzz/work/;
# a crash or failed property is saved under build/fuzz/crashes/<harness>/
# (copy it to fuzz/regressions/<harness>/ so `make test` replays it).
FUZZ_S ?= 60
FUZZ_HARNESSES = mock_spec config scenario condition reload directory des source router_yaml
.PHONY: fuzz
fuzz: deps
	@sh tools/install-deps.sh clang
	@# libFuzzer's runtime is only a Recommends of Debian's clang.
	@sh tools/install-deps.sh libclang-rt-$$(clang -dumpversion | cut -d. -f1)-dev
	cmake --preset fuzz >/dev/null
	$(CMAKE_BUILD) fuzz -j $(JOBS)
	@failed=""; for h in $(FUZZ_HARNESSES); do \
	  mkdir -p build/fuzz/work/$$h build/fuzz/crashes/$$h; \
	  echo "fuzz_$$h: $(FUZZ_S) s"; \
	  if ./build/fuzz/fuzz/fuzz_$$h -max_total_time=$(FUZZ_S) \
	      -print_final_stats=1 -dict=fuzz/dict/$$h.dict \
	      -artifact_prefix=build/fuzz/crashes/$$h/ build/fuzz/work/$$h \
	      fuzz/corpus/$$h $$(ls -d fuzz/regressions/$$h 2>/dev/null) \
	      >build/fuzz/$$h.log 2>&1; \
	  then grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)' \
	      build/fuzz/$$h.log; \
	  else { grep -B2 -A12 -E 'property failed|ERROR:' build/fuzz/$$h.log \
	      || tail -5 build/fuzz/$$h.log; } | head -40; \
	    failed="$$failed $$h"; fi; \
	done; \
	if [ -n "$$failed" ]; then \
	  echo "fuzz: failed:$$failed (inputs in build/fuzz/crashes/)"; exit 1; fi

# Soak (not in CI): SOAK_ACQUIRES acquires per clock (manual, system), each
# split over 2, 4 and 8 threads, with the breaker invariant checks, then
# the shm kill storm (SOAK_KILLS SIGKILLs of worker processes sharing a
# bulkhead and a breaker), then the hedging property (SOAK_SCRIPTS random
# scripts through both drivers), in an optimised build; prints the
# figures. `make test` runs 10^6 acquires, 3000 kills (test_soak) and 400
# scripts (test_call_property).
SOAK_ACQUIRES ?= 100000000
SOAK_KILLS ?= 20000
SOAK_SCRIPTS ?= 200000
.PHONY: soak
soak: deps
	cmake --preset soak >/dev/null
	$(CMAKE_BUILD) soak -j $(JOBS) --target test_soak test_call_property
	RESIL_SOAK_ACQUIRES=$(SOAK_ACQUIRES) RESIL_SOAK_KILLS=$(SOAK_KILLS) \
	  ./build/soak/tests/test_soak
	RESIL_PROPERTY_SCRIPTS=$(SOAK_SCRIPTS) ./build/soak/tests/test_call_property

# Static analysis of lib/: the house rules of issue 22 (tools/lint/house.py:
# file and function sizes, one-way calls between lib/ files from the dev
# objects' symbols, the system clock in lib/clock.c only), cppcheck
# (suppressions in tools/lint/cppcheck-suppressions.xml) and clang-tidy
# (.clang-tidy; known false positives in
# tools/lint/clang-tidy-suppressions.txt) over the dev tree's
# compile_commands.json. Any other finding fails.
.PHONY: lint
lint: deps
	@sh tools/install-deps.sh cppcheck clang-tidy python3
	cmake --preset dev >/dev/null
	$(CMAKE_BUILD) dev -j $(JOBS) --target resil -- --no-print-directory
	python3 tools/lint/house.py build/dev
	python3 tools/lint/doc_calls.py
	cppcheck --std=c11 --enable=warning,style,performance,portability \
	  -I include -I lib -D__GNUC__ --quiet --inline-suppr \
	  --suppress-xml=tools/lint/cppcheck-suppressions.xml \
	  --error-exitcode=1 \
	  --template='{file}:{line}: {severity}: {message} [{id}]' lib/*.c
	@echo "cppcheck: lib/*.c clean"
	python3 tools/lint/clang-tidy.py build/dev $(JOBS) lib/*.c

# Issue 42's overload drill in resil-sim (examples/sim/overload.scn): a
# service of fixed capacity offered 1x -> 3x -> 1x, a tenth of the calls
# critical, against the configuration before (overload-before.conf) and
# after (overload.conf, the throttle stage); one line per configuration
# and phase, the bars checked (examples/sim/overload_check.sh), and the
# picture build/overload.svg (docs/resil-sim.md, "The overload drill").
.PHONY: overload
overload: deps
	@cmake --preset dev >build-overload.log 2>&1 || { cat build-overload.log; exit 1; }
	@$(CMAKE_BUILD) dev -j $(JOBS) --target resil-sim -- --no-print-directory \
	  >>build-overload.log 2>&1 || { cat build-overload.log; exit 1; }
	@mv -f build-overload.log build/overload-build.log
	@sh examples/sim/overload_check.sh ./build/dev/tools/resil-sim \
	  examples/sim "" build/overload-check build/overload.svg

# Seed 002's zone drill in resil-sim (examples/sim/zones.scn): 30
# simulated minutes at 3x daily traffic with the registry's and the
# network's faults, against the configuration before (zones-before.conf)
# and after (zones.conf); one line per configuration and phase, the
# compare line against the seed's figures, and the picture
# build/zones.svg (docs/cluster.md, "The zone drill").
.PHONY: drill
drill: deps
	@cmake --preset dev >build-drill.log 2>&1 || { cat build-drill.log; exit 1; }
	@$(CMAKE_BUILD) dev -j $(JOBS) --target resil-sim -- --no-print-directory \
	  >>build-drill.log 2>&1 || { cat build-drill.log; exit 1; }
	@mv -f build-drill.log build/drill-build.log
	@./build/dev/tools/resil-sim examples/sim/zones-before.conf \
	  examples/sim/zones.conf examples/sim/zones.scn --svg build/zones.svg

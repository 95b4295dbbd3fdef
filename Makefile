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

# The Promela model of the breaker's lock-free protocol, checked by spin.
model:
	@sh tools/install-deps.sh spin
	sh tools/check-model.sh build/model

format:
	clang-format -i include/resil/*.h lib/*.c lib/*.h tests/*.c tests/support/*.[ch] examples/*.c

clean:
	rm -rf build

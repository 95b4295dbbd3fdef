#!/usr/bin/env python3
"""Turn Google Benchmark's JSON (median aggregates) and the callgrind
instruction counts into the Markdown table of docs/BENCHMARKS.md.

Usage: tools/bench_report.py build/bench.json [build/bench-instructions.txt]
Every figure is a ratio to two baselines measured in the same run: the bare
call through a function pointer and the reference lock-free breaker.
"""
import json
import sys


def main():
    with open(sys.argv[1]) as f:
        data = json.load(f)
    instr = {}
    if len(sys.argv) > 2:
        try:
            with open(sys.argv[2]) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] != "benchmark":
                        instr[parts[0]] = float(parts[1])
        except FileNotFoundError:
            pass
    med = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        # Per-thread cost: CPU time per iteration of one thread.
        ns = b["cpu_time"]
        unit = b.get("time_unit", "ns")
        ns *= {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
        med[name] = ns
    bare1 = med.get("baseline/bare_call/threads:1")
    lf1 = med.get("baseline/lockfree_breaker/threads:1")
    print("| benchmark | threads | ns/call (median, per thread) "
          "| x bare call | x lock-free ref | instr/call |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, ns in med.items():
        base, _, th = name.rpartition("/threads:")
        suffix = "/threads:" + th
        bare = med.get("baseline/bare_call" + suffix, bare1)
        lf = med.get("baseline/lockfree_breaker" + suffix, lf1)
        ins = instr.get(base)
        print("| %s | %s | %.2f | %.1f | %.2f | %s |" % (
            base, th, ns, ns / bare if bare else 0, ns / lf if lf else 0,
            "%.0f" % ins if ins is not None and th == "1" else ""))


if __name__ == "__main__":
    main()

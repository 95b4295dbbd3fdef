#!/usr/bin/env python3
"""Run clang-tidy (configuration: .clang-tidy) over files, in parallel,
and fail on any finding not listed in tools/lint/clang-tidy-suppressions.txt.

usage: clang-tidy.py BUILD_DIR JOBS FILE...
BUILD_DIR holds compile_commands.json. An entry whose finding does not
occur is reported as unused (not an error: it may name a line of another
branch). A finding located outside the source tree (a system header such
as ck_pr.h, reached from lib/ code) is reported but does not fail: it is
either a false positive or shows again at its caller in lib/.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUPP = os.path.join(ROOT, "tools", "lint", "clang-tidy-suppressions.txt")
FINDING = re.compile(r"^(.*?):(\d+):(\d+): (?:warning|error): (.*) \[([^\]]+)\]$")


def load_suppressions():
    supp = set()
    with open(SUPP, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            check, path, text = line.split("\t", 2)
            supp.add((check, path, text.strip()))
    return supp


def run(build, path):
    p = subprocess.run(["clang-tidy", "-p", build, "--quiet", path],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True, check=False)
    return p.stdout


def source_line(path, n, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8", errors="replace") as f:
            cache[path] = f.read().split("\n")
    lines = cache[path]
    return lines[n - 1].strip() if 0 < n <= len(lines) else ""


def main():
    build, jobs, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    supp = load_suppressions()
    used, findings, outside = set(), {}, set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        for out in ex.map(lambda f: run(build, f), files):
            for line in out.splitlines():
                m = FINDING.match(line)
                if not m:
                    continue
                path = os.path.relpath(os.path.realpath(m.group(1)), ROOT)
                n = int(m.group(2))
                if path.startswith(".."):
                    outside.add("%s:%s: %s [%s]" % (path, n, m.group(4),
                                                   m.group(5)))
                    continue
                checks = [c for c in m.group(5).split(",")
                          if c != "-warnings-as-errors"]
                text = source_line(os.path.join(ROOT, path), n)
                for check in checks:
                    key = (check, path, text)
                    if key in supp:
                        used.add(key)
                        continue
                    findings[(path, n, m.group(3), check)] = m.group(4)
    for key in sorted(supp - used):
        print("clang-tidy: unused suppression: %s %s: %s" % key)
    for line in sorted(outside):
        print("clang-tidy: outside the tree (not counted): " + line)
    for (path, n, col, check), msg in sorted(findings.items()):
        print("%s:%d:%s: %s [%s]" % (path, n, col, msg, check))
    print("clang-tidy: %d files, %d findings, %d suppressed"
          % (len(files), len(findings), len(used)))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The house rules of lib/ (issue 22), checked by make lint:

- no file in lib/ over 2000 lines;
- no function in lib/ or tools/ over 120 lines (a function starts at a
  line `name(` at the start of a line and ends at the next line that
  starts with `}`);
- no two files of lib/ that call each other (from the objects' symbol
  tables: a file that defines a symbol the other uses, both ways);
- the system clock (clock_gettime, gettimeofday, nanosleep, time(),
  CLOCK_REALTIME / CLOCK_MONOTONIC) named in lib/clock.c only.

Usage: house.py BUILD_DIR (a configured and built tree, for the objects).
"""
import glob
import os
import re
import subprocess
import sys

MAX_FILE = 2000
MAX_FUNC = 120
CLOCK = re.compile(r'\b(clock_gettime|gettimeofday|nanosleep|time\s*\(\s*NULL|'
                   r'CLOCK_REALTIME|CLOCK_MONOTONIC)\b')


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'),
                  text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def functions(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    start = name = None
    for i, line in enumerate(lines):
        m = re.match(r'^([A-Za-z_][A-Za-z0-9_]*)\(', line)
        if m and start is None:
            start, name = i, m.group(1)
        if line.startswith('}') and start is not None:
            yield name, start + 1, i - start + 1
            start = None


def symbols(obj):
    out = subprocess.run(['nm', obj], capture_output=True, text=True,
                         check=True).stdout
    defined, used = set(), set()
    for line in out.split('\n'):
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBR':
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            used.add(parts[1])
    return defined, used


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else 'build/dev'
    bad = []
    for path in sorted(glob.glob('lib/*.c') + glob.glob('lib/*.h')):
        n = open(path, encoding='utf-8').read().count('\n')
        if n > MAX_FILE:
            bad.append(f'{path}: {n} lines (at most {MAX_FILE})')
    for path in sorted(glob.glob('lib/*.c') + glob.glob('tools/*.c') +
                       glob.glob('tools/*/*.c')):
        for name, line, n in functions(path):
            if n > MAX_FUNC:
                bad.append(f'{path}:{line}: {name} is {n} lines '
                           f'(at most {MAX_FUNC})')
    for path in sorted(glob.glob('lib/*.c') + glob.glob('lib/*.h')):
        if os.path.basename(path) in ('clock.c',):
            continue
        text = strip_comments(open(path, encoding='utf-8').read())
        for i, line in enumerate(text.split('\n')):
            if CLOCK.search(line):
                bad.append(f'{path}:{i + 1}: reads the system clock '
                           '(only lib/clock.c may)')
    objs = {}
    for obj in glob.glob(os.path.join(build, 'CMakeFiles', 'resil.dir',
                                      'lib', '*.o')):
        src = 'lib/' + os.path.basename(obj)[:-2]
        if not os.path.exists(src):
            continue  # a stale object of a file since moved or removed
        objs[src] = symbols(obj)
    if not objs:
        bad.append(f'{build}: no objects of lib/ (build it first)')
    names = sorted(objs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            da, ua = objs[a]
            db, ub = objs[b]
            ab, ba = sorted(ua & db), sorted(ub & da)
            if ab and ba:
                bad.append(f'{a} and {b} call each other '
                           f'({ab[0]}; {ba[0]})')
    for line in bad:
        print('house:', line)
    print(f'house: {len(names)} objects, {len(bad)} findings')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

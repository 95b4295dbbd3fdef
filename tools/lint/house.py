#!/usr/bin/env python3
"""The house rules of lib/ (issue 22), checked by make lint:

- no file in lib/ over 2000 lines;
- no function in lib/ or tools/ over 120 lines (a function starts at a
  line `name(` at the start of a line and ends at the next line that
  starts with `}`);
- no circle among the files of lib/: the file graph (an arrow from a
  file to each file that defines a symbol it uses, from the objects'
  symbol tables) has no strongly connected set of two or more files
  (Tarjan's algorithm); each circle is printed with its files and, for
  each arrow around one cycle through them, a symbol that makes it;
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


def file_graph(objs):
    """Arrows a -> b (a uses a symbol b defines), each with one symbol."""
    graph = {}
    for a, (_, used) in objs.items():
        graph[a] = {}
        for b, (defined, _) in objs.items():
            if a != b:
                common = sorted(used & defined)
                if common:
                    graph[a][b] = common[0]
    return graph


def strong_sets(graph):
    """Tarjan's strongly connected components, iteratively (no recursion
    limit), each as a sorted list; only those of two or more files."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def cycle_in(graph, comp):
    """One cycle through comp's first file, inside comp (breadth first:
    the shortest way back), as a list of files."""
    members, start = set(comp), comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v]):
            if w not in members:
                continue
            if w == start:  # back: walk prev from v to start
                path = [v]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return [start, start]


def circles(objs):
    """One finding per circle: its files, and one cycle with a symbol
    for each arrow."""
    graph = file_graph(objs)
    found = []
    for comp in strong_sets(graph):
        cyc = cycle_in(graph, comp)
        arrows = ', '.join(f'{a} -> {b} ({graph[a][b]})'
                           for a, b in zip(cyc, cyc[1:]))
        found.append(f'a circle of {len(comp)} files: {" ".join(comp)}; '
                     f'e.g. {arrows}')
    return found


def self_test():
    """The circle check on made-up files: a pair, a circle of three that
    has no pair in it (what the pair check of issue 22 let through), and
    arrows that all point one way. Findings if it is wrong."""
    def objs(arrows):
        o = {}
        for a, b in arrows:
            o.setdefault(a, (set(), set()))
            o.setdefault(b, (set(), set()))
            o[a][1].add(f'{b}_fn')
            o[b][0].add(f'{b}_fn')
        return o
    cases = [
        ([('a', 'b'), ('b', 'a')], ['a b']),
        ([('a', 'b'), ('b', 'c'), ('c', 'a'), ('c', 'd')], ['a b c']),
        ([('a', 'b'), ('b', 'c'), ('a', 'c'), ('d', 'a')], []),
        ([('a', 'b'), ('b', 'a'), ('c', 'd'), ('d', 'e'), ('e', 'c')],
         ['a b', 'c d e']),
    ]
    bad = []
    for arrows, want in cases:
        got = [' '.join(c) for c in strong_sets(file_graph(objs(arrows)))]
        if sorted(got) != want:
            bad.append(f'self-test: {arrows}: circles {got}, not {want}')
    return bad


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else 'build/dev'
    bad = self_test()
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
    bad.extend(circles(objs))
    for line in bad:
        print('house:', line)
    print(f'house: {len(names)} objects, {len(bad)} findings')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env python3
"""Calls of the public API in the docs match its headers (issue 38 item 11).

Every call of a resil_* function written in a code block or a code span
of docs/*.md or README.md must pass as many arguments as the function's
prototype in include/resil/*.h takes:

- prototypes are the headers' declarations (RESIL_API ... name(...);),
  their static inline functions, their function-like macros and their
  function-pointer typedefs (typedef ... (*resil_x_fn)(...);); an
  object-like macro naming another function (#define resil_a resil_b) is
  that function; a variadic one (`...`) takes at least its fixed
  parameters; (void) takes none;
- a call is NAME( ARGS ) with its parentheses closed in the same block or
  span; its arguments are split at the commas outside (), [], {} and
  string or character literals. `NAME()` (empty) names the function and
  is not checked; an argument written `...` (or `…`) stands for any
  number of them, so only the fixed ones are checked;
- a call of a resil_ name (one underscore) that no header declares is an
  error too (a renamed or removed function); resil__ names are private
  and not checked.

Usage: doc_calls.py [ROOT] (default: the repository holding this file).
Prints one line per mismatch, FILE:LINE: ..., and exits 1 when there is
any.
"""
import glob
import os
import re
import sys

CALL = re.compile(r'\b(resil_[a-z0-9][A-Za-z0-9_]*)\s*\(')
OPEN = '([{'
CLOSE = ')]}'


def strip_comments(text):
    """C comments out, newlines kept (line numbers stay right)."""
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'),
                  text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def closing(text, i):
    """Index of the parenthesis closing the one at text[i], or -1."""
    depth, quote = 0, None
    j = i
    while j < len(text):
        c = text[j]
        if quote:
            if c == '\\':
                j += 2
                continue
            if c == quote:
                quote = None
        elif c in '"\'':
            # A lone apostrophe in prose (don't) is no literal: only a
            # quote that closes on the same line opens one.
            end = text.find(c, j + 1)
            nl = text.find('\n', j + 1)
            if end != -1 and (nl == -1 or end < nl):
                quote = c
        elif c in OPEN:
            depth += 1
        elif c in CLOSE:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def split_args(inner):
    """The top-level arguments of a call's inside, stripped."""
    args, depth, quote, cur = [], 0, None, ''
    i = 0
    while i < len(inner):
        c = inner[i]
        if quote:
            cur += c
            if c == '\\' and i + 1 < len(inner):
                cur += inner[i + 1]
                i += 1
            elif c == quote:
                quote = None
        elif c in '"\'':
            end = inner.find(c, i + 1)
            if end != -1:
                quote = c
            cur += c
        elif c in OPEN:
            depth += 1
            cur += c
        elif c in CLOSE:
            depth -= 1
            cur += c
        elif c == ',' and depth == 0:
            args.append(cur.strip())
            cur = ''
        else:
            cur += c
        i += 1
    if cur.strip() or args:
        args.append(cur.strip())
    return args


def arity(params):
    """(fixed, variadic, names) of a parameter list's inside."""
    args = split_args(params)
    if args == ['void'] or args == []:
        return 0, False, []
    variadic = args[-1] == '...'
    if variadic:
        args = args[:-1]
    names = []
    for a in args:
        m = re.search(r'\(\s*\*\s*([A-Za-z_]\w*)\s*\)', a)  # fn pointer
        if m is None:
            m = re.search(r'([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$', a)
        names.append(m.group(1) if m else a)
    return len(args), variadic, names


def prototypes(root):
    """name -> (fixed, variadic, names, where) from include/resil/*.h."""
    protos, aliases = {}, {}
    for path in sorted(glob.glob(os.path.join(root, 'include/resil/*.h'))):
        rel = os.path.relpath(path, root)
        raw = open(path, encoding='utf-8').read()
        text = strip_comments(raw)
        # Function-like macros (the parameter list right after the name).
        for m in re.finditer(r'^[ \t]*#[ \t]*define[ \t]+(resil_\w+)\(([^)]*)\)',
                             text, flags=re.M):
            line = text.count('\n', 0, m.start()) + 1
            n, var, names = arity(m.group(2))
            protos[m.group(1)] = (n, var, names, '%s:%d' % (rel, line))
        for m in re.finditer(r'^[ \t]*#[ \t]*define[ \t]+(resil_\w+)[ \t]+'
                             r'(resil_\w+)[ \t]*$', text, flags=re.M):
            aliases[m.group(1)] = m.group(2)
        # Declarations and inline definitions outside the preprocessor.
        body = re.sub(r'^[ \t]*#[^\n]*(\\\n[^\n]*)*', lambda m: '\n' *
                      m.group(0).count('\n'), text, flags=re.M)
        for m in re.finditer(r'\(\s*\*\s*(resil_\w+)\s*\)\s*\(', body):
            end = closing(body, m.end() - 1)
            if end == -1 or not re.match(r'\s*;', body[end + 1:]):
                continue
            line = body.count('\n', 0, m.start()) + 1
            n, var, names = arity(body[m.end():end])
            protos.setdefault(m.group(1),
                              (n, var, names, '%s:%d' % (rel, line)))
        for m in re.finditer(r'\b(resil_\w+)\s*\(', body):
            before = body[max(0, m.start() - 200):m.start()]
            # A declaration: a type right before the name, at the start
            # of a statement (not a call inside an inline body).
            if not re.search(r'(^|[;{}])\s*(RESIL_API\s+)?(static\s+)?'
                             r'(inline\s+)?(const\s+)?[A-Za-z_][\w ]*[\s*]+$',
                             before):
                continue
            end = closing(body, m.end() - 1)
            if end == -1:
                continue
            after = body[end + 1:end + 40]
            if not re.match(r'\s*(;|\{|__attribute__|RESIL_\w+)', after):
                continue
            line = body.count('\n', 0, m.start()) + 1
            n, var, names = arity(body[m.end():end])
            protos.setdefault(m.group(1),
                              (n, var, names, '%s:%d' % (rel, line)))
    for a, target in aliases.items():
        if target in protos and a not in protos:
            protos[a] = protos[target]
    return protos


FENCE = re.compile(r'^([ \t]*)(```+|~~~+)[^\n]*\n(.*?)^\1\2[ \t]*$',
                   flags=re.S | re.M)
SPAN = re.compile(r'(`+)(?!`)(.+?)(?<!`)\1(?!`)', flags=re.S)


def snippets(text):
    """(offset, code) of every fenced block and code span of a page."""
    out, blocked = [], []
    for m in FENCE.finditer(text):
        out.append((m.start(3), m.group(3)))
        blocked.append((m.start(), m.end()))
    rest = list(text)
    for s, e in blocked:  # spans are looked for outside the blocks only
        for i in range(s, e):
            if rest[i] != '\n':
                rest[i] = ' '
    rest = ''.join(rest)
    for m in SPAN.finditer(rest):
        if '\n\n' in m.group(2):
            continue  # no span crosses a paragraph
        out.append((m.start(2), m.group(2)))
    return out


def check_page(path, rel, protos, problems):
    text = open(path, encoding='utf-8').read()
    for off, code in snippets(text):
        for m in CALL.finditer(code):
            name = m.group(1)
            end = closing(code, m.end() - 1)
            if end == -1:
                continue  # not closed here: nothing to count
            inner = code[m.end():end]
            if inner.lstrip().startswith('*'):
                continue  # a declarator: TYPE (*name)(...)
            args = split_args(inner)
            if not args:
                continue  # NAME(): the function named, not called
            if args == ['void']:
                args = []  # a prototype written in the page
            line = text.count('\n', 0, off + m.start()) + 1
            call = re.sub(r'\s+', ' ', code[m.start():end + 1])
            if name not in protos and re.match(r'^[1-9][a-z]*$', args[0]) \
                    and len(args) == 1:
                continue  # a manual page: resil_pipeline(3)
            if name not in protos:
                problems.append('%s:%d: %s: no header in include/resil/ '
                                'declares %s' % (rel, line, call, name))
                continue
            n, var, names, where = protos[name]
            open_ended = any(a in ('...', '\u2026') for a in args)
            given = len([a for a in args if a not in ('...', '\u2026')])
            if open_ended:
                ok = given <= n or var
            elif var:
                ok = given >= n
            else:
                ok = given == n
            if not ok:
                want = '%s%d' % ('at least ' if var else '', n)
                problems.append(
                    '%s:%d: %s: %d argument%s, %s declares %s (%s)' %
                    (rel, line, call, given, '' if given == 1 else 's',
                     where, want, ', '.join(names + (['...'] if var
                                                     else [])) or 'void'))


def self_test():
    """The parsing on cases the docs may hold (run before every check)."""
    assert split_args('') == []
    assert split_args('a, f(b, c), "x, y", \',\', s[1, 2], {3, 4}') == [
        'a', 'f(b, c)', '"x, y"', "','", 's[1, 2]', '{3, 4}']
    assert arity('void') == (0, False, [])
    assert arity('const char *fmt, ...') == (1, True, ['fmt'])
    assert arity('int (*fn)(void *, int), void *ctx') == (
        2, False, ['fn', 'ctx'])
    assert arity('uint64_t g[RESIL__X], size_t n') == (2, False, ['g', 'n'])
    text = 'x `resil_a(1, 2)` y\n```c\nresil_b(f(1),\n  2);\n```\n'
    assert [c for _, c in snippets(text)] == ['resil_b(f(1),\n  2);\n',
                                              'resil_a(1, 2)']
    assert closing('f(a, ")", (b))', 1) == 13


def main():
    self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    protos = prototypes(root)
    if not protos:
        print('doc_calls: no prototypes found in %s/include/resil' % root)
        return 1
    problems = []
    pages = sorted(glob.glob(os.path.join(root, 'docs/*.md')))
    pages.append(os.path.join(root, 'README.md'))
    for path in pages:
        if os.path.exists(path):
            check_page(path, os.path.relpath(path, root), protos, problems)
    def where(p):
        f, line = p.split(':')[:2]
        return f, int(line)
    problems.sort(key=where)
    for p in problems:
        print(p)
    if problems:
        print('doc_calls: %d call(s) in the docs do not match their '
              'headers' % len(problems))
        return 1
    print('doc_calls: %d pages, calls match %d prototypes' %
          (len(pages), len(protos)))
    return 0


if __name__ == '__main__':
    sys.exit(main())

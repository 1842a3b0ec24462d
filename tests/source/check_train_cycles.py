#!/usr/bin/env python3
"""No file cycle in plugin/train/ (issue 31 section 3): its modules depend on each other one way only.

A module is a header and its .c (foo.h + foo.c, one node); a .c with no header of its own name (the job's
train_job_step.c when the job's functions are spread over several files) is a node of its own. A file
depends on the module of every plugin/train/ header it includes, and on the file that defines each
function of that header it calls (so a header whose functions live in several .c files does not hide
the calls between them). Any cycle among the nodes fails the check, printed as the path of files and
the function or include that makes each arrow.
Usage: check_train_cycles.py SOURCE_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
folder = root / "plugin" / "train"
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"train/([^"]+)\.h"', re.M)
# A function definition at the start of a line (external linkage: static ones are the file's own).
DEFINITION = re.compile(r'^(?!static\b)(?!typedef\b)[A-Za-z_][\w \t\*]*?[\s\*](\w+)[ \t]*\(([^;{}]*?)\)\s*\{', re.M)
COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
WORD = re.compile(r'\b\w+\b')


def code_of(path):
    return COMMENT.sub(" ", path.read_text(encoding="utf-8"))


files = sorted(p for p in folder.iterdir() if p.suffix in (".c", ".h"))
code = {p: code_of(p) for p in files}
stems_with_header = {p.stem for p in files if p.suffix == ".h"}


def node(path):
    return path.stem


defined_in = {}
for path in files:
    if path.suffix == ".c":
        for match in DEFINITION.finditer(code[path]):
            defined_in.setdefault(match.group(1), path)

edges = {}  # node -> {node: reason}


def add_edge(src, dst, reason):
    if src != dst:
        edges.setdefault(src, {}).setdefault(dst, reason)


for path in files:
    text = code[path]
    words = set(WORD.findall(text))
    for stem in INCLUDE.findall(text):
        header = folder / (stem + ".h")
        if not header.exists():
            continue
        add_edge(node(path), stem, "#include \"train/%s.h\"" % stem)
        if path.suffix != ".c":
            continue
        header_words = set(WORD.findall(code[header]))
        for name in sorted(header_words & words):
            target = defined_in.get(name)
            if target is not None and target != path:
                add_edge(node(path), node(target), "calls %s() (%s)" % (name, target.name))


def strongly_connected(graph):
    """Tarjan's components (iterative)."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], [0]
    nodes = set(graph) | {d for targets in graph.values() for d in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, {}))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                result.append(sorted(component))
    return result


def one_cycle(component):
    """A shortest path from the component's first node back to itself, inside the component."""
    members = set(component)
    start = component[0]
    previous = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, {})):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while previous[path[-1]] is not None:
                    path.append(previous[path[-1]])
                path.reverse()
                return path + [start]
            if w not in previous:
                previous[w] = v
                queue.append(w)
    return [start]


cycles = [c for c in strongly_connected(edges) if len(c) > 1]
for component in cycles:
    print("plugin/train/: a cycle among %d modules: %s" % (len(component), ", ".join(component)))
    path = one_cycle(component)
    for a, b in zip(path, path[1:]):
        print("  %s -> %s: %s" % (a, b, edges[a][b]))
if cycles:
    print("%d file cycle(s) in plugin/train/; a module depends on the ones below it only (docs/DESIGN.md)"
          % len(cycles))
    sys.exit(1)
print("plugin/train/: no file cycle among %d modules" % len({node(p) for p in files}))

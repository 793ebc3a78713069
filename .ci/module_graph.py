#!/usr/bin/env python3
"""Prints lockaudit's module graph: which top-level module imports which, and every import
circle between modules or files (`use crate::..` and `use super::..`, test modules left out),
and any arrow of FORBIDDEN. Exits 1 if there is a circle or a forbidden arrow, so it can guard
the one-way architecture.

    python3 .ci/module_graph.py [src]
"""
import collections
import os
import re
import sys

# Arrows that point the wrong way although they make no circle (yet): pictures come from
# files, not from the controller that writes them; a history's fault intervals are the
# history's, not the drawing's; clients reach servers through `topology` and run under
# `fake_clock`, and the hosts' entries are `topology::hosts`, not the supervisor's. A test
# module may still start servers through `cluster` (`locks::conn`'s Redis Cluster test:
# what it tests is crate-private), so test modules are left out.
FORBIDDEN = [
    ("plot", "run"),
    ("shrink", "plot"),
    ("locks", "cluster"),
    ("workload", "cluster"),
]

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
files = {}
for folder, _, names in os.walk(root):
    for name in names:
        if name.endswith(".rs"):
            path = os.path.join(folder, name)
            files[os.path.relpath(path, root)] = open(path, encoding="utf-8").read()


def module_of(rel):
    parts = rel[:-3].split("/")
    if parts[-1] == "mod":
        parts = parts[:-1]
    return () if parts in (["lib"], ["main"]) or parts[0] == "bin" else tuple(parts)


modules = {module_of(rel) for rel in files}


def resolve(path):
    """The longest prefix of `path` that names a module."""
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in modules:
            return tuple(path[:n])
    return None


edges = collections.defaultdict(set)
for rel, text in files.items():
    me = module_of(rel)
    if not me:
        continue
    # `super` of a file is its folder's module; of a mod.rs, the parent's.
    parent = list(me[:-1])
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)[0]
    paths = []
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
        paths.append((m.group(1), m.group(2).split("::")[1:]))
    for m in re.finditer(r"\b(crate|super)::\{([^}]*)\}", text):
        for item in m.group(2).split(","):
            segs = item.strip().split("::")
            if segs[0]:
                paths.append((m.group(1), segs))
    for kind, segs in paths:
        target = resolve(segs if kind == "crate" else parent + segs)
        if target and target != me:
            edges[me].add(target)

top = collections.defaultdict(set)
for a, targets in edges.items():
    for b in targets:
        if a[0] != b[0]:
            top[a[0]].add(b[0])
print("modules and what they import:")
for a in sorted(top):
    print(f"  {a} -> {', '.join(sorted(top[a]))}")

# Circles: strongly connected components of the file graph (a module importing its own
# submodules is no circle).
graph = {"/".join(a): {"/".join(b) for b in bs if not "/".join(b).startswith("/".join(a) + "/")}
         for a, bs in edges.items()}
for a, bs in list(top.items()):
    graph.setdefault("top:" + a, set()).update("top:" + b for b in bs)
index, low, stack, on, circles, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)


def connect(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in graph.get(v, ()):
        if w not in index:
            connect(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            circles.append(sorted(component))


for v in list(graph):
    if v not in index:
        connect(v)
forbidden = [(a, b) for a, b in FORBIDDEN if b in top.get(a, ())]
if forbidden:
    print("forbidden arrows:")
    for a, b in forbidden:
        files_ = sorted("/".join(f) for f, bs in edges.items() if f[0] == a and any(t[0] == b for t in bs))
        print(f"  {a} -> {b} ({', '.join(files_)})")
if circles:
    print("import circles:")
    for c in circles:
        print("  " + " <-> ".join(c))
if circles or forbidden:
    sys.exit(1)
print("no import circle, no forbidden arrow")

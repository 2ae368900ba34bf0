#!/usr/bin/env python3
"""Checks src/'s module graph against docs/design.md.

A module is a folder directly under src/; module A depends on module B when
a file under src/A includes "B/...". The test fails when the graph has a
cycle, when src/ has an edge that the graph in docs/design.md (the fenced
block after the line "<!-- module graph -->") does not list, or when that
graph lists an edge or a module that src/ does not have, so the picture in
the design notes stays the code's.

usage: module_graph.py [REPO]        (default: this file's repository)
       module_graph.py REPO --print  (the graph in the design notes' form)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')
MARKER = "<!-- module graph -->"


def source_graph(src):
    modules = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    edges = {m: {} for m in modules}  # module -> {dependency: first file that includes it}
    for m in modules:
        for folder, _, files in os.walk(os.path.join(src, m)):
            for name in sorted(files):
                path = os.path.join(folder, name)
                with open(path, errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        g = INCLUDE.match(line)
                        if g and g.group(1) in edges and g.group(1) != m:
                            where = f"{os.path.relpath(path, os.path.dirname(src))}:{number}"
                            edges[m].setdefault(g.group(1), where)
    return edges


def documented_graph(design):
    with open(design) as f:
        lines = f.read().splitlines()
    try:
        start = lines.index(MARKER)
    except ValueError:
        sys.exit(f"{design}: no line '{MARKER}' before the module graph")
    block = []
    fenced = False
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("```"):
            if fenced:
                break
            fenced = True
            continue
        if fenced and line.strip():
            block.append((number, line))
    if not block:
        sys.exit(f"{design}:{start + 1}: the module graph after '{MARKER}' is empty")
    graph = {}
    for number, line in block:
        m = re.fullmatch(r"\s*([a-z_]+)\s*->\s*(.*?)\s*", line)
        if not m:
            sys.exit(f"{design}:{number}: expected 'module -> dep, dep' (or '-> nothing'), not {line!r}")
        deps = m.group(2)
        graph[m.group(1)] = set() if deps == "nothing" else {d.strip() for d in deps.split(",")}
    return graph


def cycles(edges):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
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
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    repo = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    src = os.path.join(repo, "src")
    design = os.path.join(repo, "docs", "design.md")
    edges = source_graph(src)
    if "--print" in sys.argv:
        width = max(len(m) for m in edges)
        for m in edges:
            print(f"{m:<{width}} -> {', '.join(sorted(edges[m])) or 'nothing'}")
        return 0
    problems = []
    for component in cycles(edges):
        lines = [f"  {a} -> {b} ({edges[a][b]})" for a in component for b in sorted(edges[a]) if b in component]
        problems.append(f"src/ has a module cycle among {', '.join(component)}:\n" + "\n".join(lines))
    documented = documented_graph(design)
    for m in sorted(set(edges) - set(documented)):
        problems.append(f"module {m} (src/{m}/) is missing from the graph in docs/design.md")
    for m in sorted(set(documented) - set(edges)):
        problems.append(f"docs/design.md lists module {m}, but src/ has no folder {m}/")
    for m in sorted(edges):
        for dep in sorted(edges[m]):
            if dep not in documented.get(m, set()):
                problems.append(f"{edges[m][dep]}: {m} -> {dep} is not in the graph in docs/design.md; "
                                "add it there if the layering allows it, or remove the include")
        for dep in sorted(documented.get(m, set()) - set(edges[m])):
            problems.append(f"docs/design.md: {m} -> {dep}, but no file under src/{m}/ includes {dep}/; "
                            "remove the edge from the graph")
    if problems:
        print("\n".join(problems))
        print(f"FAILED: {len(problems)} problem(s) with the module graph")
        return 1
    print(f"module graph: {len(edges)} modules, {sum(len(e) for e in edges.values())} edges, "
          "no cycle, as docs/design.md draws it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

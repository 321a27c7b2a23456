"""Fail when odradek's modules import each other in a cycle (TYPE_CHECKING imports included).

    python tools/import_cycles.py        # exit 1 and one line per cycle, or exit 0

The layers contract (import-linter, pyproject.toml) keeps packages in order; this keeps modules
inside a package from leaning on each other both ways. `make lint` runs both.
"""

from __future__ import annotations

import sys

import grimp


def cycles(package: str) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    graph = grimp.build_graph(package)
    edges = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(edges[child])))
            elif child in on_stack:
                low[module] = min(low[module], index[child])
    return found


def main() -> int:
    found = cycles("odradek")
    for group in found:
        print("import cycle: " + " <-> ".join(group))
    print(f"{len(found)} import cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""No import cycle among the modules of crawlproject/ (issue 42): not between
subpackages only (.importlinter checks those) but between any two modules,
counting imports inside functions and under ``TYPE_CHECKING`` too. A cycle
makes a module's meaning depend on the order things were imported, and hides
which of two modules is the lower layer."""

from __future__ import annotations

from collections.abc import Iterable

import grimp


def strongly_connected(nodes: Iterable[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found


def import_cycles(package: str) -> list[str]:
    """One line per cycle: the modules of each strongly connected component,
    and one cycle through its first module."""
    graph = grimp.build_graph(package, cache_dir=None)
    modules = sorted(graph.modules)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in modules}
    lines = []
    for component in strongly_connected(modules, edges):
        if len(component) < 2:
            continue
        first, members = component[0], set(component)
        back = next(m for m in sorted(edges[first]) if m in members)
        path = graph.find_shortest_chain(importer=back, imported=first) or (back, first)
        lines.append(f"{len(component)} modules: {' -> '.join((first, *path))}")
    return lines


def test_the_finder_sees_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected("abcd", edges) == [["a", "b", "c"], ["d"]]


def test_no_import_cycle_in_crawlproject() -> None:
    cycles = import_cycles("crawlproject")
    assert not cycles, "import cycles in crawlproject/:\n" + "\n".join(cycles)

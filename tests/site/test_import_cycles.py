"""No import circle between any two modules of the project (issue 27): import-linter's
``acyclic_siblings`` contract compares siblings of a package, and a directory of modules
without an ``__init__.py`` (a namespace package) is not in its graph at all — that is how
``annotations/audit/services/runs.py`` and ``verify.py`` imported each other unseen. This
test builds the whole import graph with grimp (which import-linter installs), imports inside
functions included, and asserts that it has no cycle; and that every directory of project
modules is a package, so none escapes the graph."""

from __future__ import annotations

from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("annotations", "assistants", "estimators", "oversight_site", "oversight_client")
NOT_CODE = {"__pycache__", "templates", "static", "data"}


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative),
    plus any module that imports itself."""
    adjacency = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(adjacency[root]))]
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
                    work.append((child, iter(adjacency[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in adjacency[node]:
                    found.append(sorted(component))
    return found


def _chain(graph, component: list[str]) -> str:
    """One circle of a component as "a -> b -> a" with the lines that import."""
    first, rest = component[0], component[1:]
    for other in rest:
        there = graph.find_shortest_chain(importer=first, imported=other)
        back = graph.find_shortest_chain(importer=other, imported=first)
        if there and back:
            steps = list(there) + list(back[1:])
            lines = []
            for a, b in zip(steps, steps[1:], strict=False):
                details = graph.get_import_details(importer=a, imported=b)
                where = f" (line {details[0]['line_number']})" if details else ""
                lines.append(f"{a} -> {b}{where}")
            return "; ".join(lines)
    return ", ".join(component)


def _not_packages(top: Path) -> list[str]:
    """The directories under ``top`` (itself included) that hold Python modules, or lead to
    one that does, and have no ``__init__.py``."""
    holding = {p.parent for p in top.rglob("*.py")
               if not NOT_CODE & set(p.relative_to(ROOT).parts)}
    on_the_way = {up for d in holding for up in d.parents if up == top or top in up.parents}
    return sorted(str(d.relative_to(ROOT)) for d in holding | on_the_way
                  if not (d / "__init__.py").exists())


def test_every_directory_of_modules_is_a_package():
    """The project's, or grimp and lint-imports do not see them; and the tests', or pytest's
    importlib mode (pyproject.toml), which names a module from its topmost package, gives
    two test modules of one name under plain folders one name: before every folder of tests
    was a package, ``tests/estimators/partitioned/test_allocation.py`` never ran and
    ``tests/annotations/partitioned/test_allocation.py`` ran twice in its place
    (``tests/site/test_layout.py`` checks that pair)."""
    missing = [d for top in (*PACKAGES, "tests") for d in _not_packages(ROOT / top)]
    assert missing == [], f"not packages: {missing}"


def test_no_module_of_the_project_imports_itself_through_others():
    import annotations

    assert Path(annotations.__file__).resolve().is_relative_to(ROOT)  # this tree's code
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    assert "annotations.audit.services.runs" in graph.modules  # the whole tree is seen
    cycles = _cycles(graph)
    assert cycles == [], "import circles:\n" + "\n".join(_chain(graph, c) for c in cycles)

# SPDX-License-Identifier: GPL-2.0-only
"""The lab's modules import each other without a cycle: no module imports one that (transitively) imports it
back. An import inside a function counts as well: a lazy import hides a cycle from Python, not from a reader."""
import ast

from lab import paths

LAB = paths.REPO / "lab"


def lab_imports(path) -> set[str]:
    """The lab modules (lab/NAME.py) that one file imports, anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:  # from . import a, b / from .a import x
            names |= {node.module} if node.module else {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "lab":
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("lab."):
            names.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("lab.")}
    return {n for n in names if (LAB / f"{n}.py").exists()}


def import_graph() -> dict[str, set[str]]:
    return {p.stem: lab_imports(p) for p in sorted(LAB.glob("*.py"))}


def cycle_through(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """A chain of imports from start back to start, if there is one."""
    todo, seen = [(start, [start])], set()
    while todo:
        mod, chain = todo.pop()
        for dep in sorted(graph.get(mod, ())):
            if dep == start:
                return chain + [start]
            if dep not in seen:
                seen.add(dep)
                todo.append((dep, chain + [dep]))
    return None


def test_the_graph_sees_imports():
    graph = import_graph()
    assert {"benchfile", "guest_script", "samples", "run"} <= graph["bench"]
    assert "plots" in graph["report"]  # a lazy import, inside write_report
    assert cycle_through({"a": {"b"}, "b": {"c"}, "c": {"a"}}, "a") == ["a", "b", "c", "a"]
    assert cycle_through({"a": {"b"}, "b": {"c"}, "c": set()}, "a") is None


def test_no_import_cycle_in_lab():
    graph = import_graph()
    cycles = [" -> ".join(c) for m in graph if (c := cycle_through(graph, m))]
    assert not cycles, "import cycles in lab/: " + "; ".join(cycles)

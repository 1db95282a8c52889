"""No import cycle between cudaship's modules, and no function-level import of cudaship hiding one (issue 26).

A function-level import of a cudaship module is accepted only where it buys start-up time (the CLI's
subcommands, the lazy public API, the per-format readers docs/performance.md names, the renderer table's
loaders, the wheel-only parsers) or where the file runs as a script. Everywhere else an import is at module
level, so that a cycle shows: :func:`test_no_module_level_cycle` finds every one with ``ast`` and names it.
Each function-level import kept says why in a comment next to it.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "cudaship"

#: modules (relative to src/cudaship) whose functions may import cudaship modules, each for start-up time
#: unless said otherwise
LAZY_ALLOWED = {
    "__init__.py",  # the lazy public API (cudaship.api on first use)
    "ci/action_steps.py",  # runs as a file
    "cli/main.py",
    "cli/doctor_env.py",  # --confirm's loader oracle
    "checks/table.py",  # the load family, only for audit --load (docs/performance.md)
    "render/table.py",  # each command's renderers when it renders
    "inspection/dispatch.py",  # the reader a format needs (docs/performance.md)
    "inspection/walk.py",  # the program readers (docs/performance.md)
    "inspection/inputs.py",  # the .pte reader only for an input named otherwise (docs/performance.md)
    "inspection/scan.py",  # the program readers only for a program (docs/performance.md)
    "binary/devicescan.py",  # the standalone cubin/PTX readers (docs/performance.md)
    "wheel/archive.py",  # wheel/metadata (packaging) only for wheels
    "inspection/pte.py",  # its records only when a program is read: is_pte runs on unnamed inputs
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, *, in_functions: bool) -> list[ast.Import | ast.ImportFrom]:
    """The imports at module level (``in_functions`` False) or inside functions; never TYPE_CHECKING ones."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)) and inside == in_functions:
                found.append(child)
            walk(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def _targets(name: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: set[str]) -> set[str]:
    """The cudaship modules one import statement runs."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in modules}
    if node.level:
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    out = set()
    for alias in node.names:
        full = f"{source}.{alias.name}"
        if full in modules:
            out.add(full)
        elif source in modules:
            out.add(source)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in _imports(tree, in_functions=False):
            deps |= _targets(name, is_package, node, set(modules))
        deps.discard(name)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_level_cycle() -> None:
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "\n".join(
        " <-> ".join(c) + ": " + "; ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in cycles
    )


def test_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_function_level_imports_of_cudaship_only_where_start_up_needs_them() -> None:
    modules = _modules()
    names = set(modules)
    found = []
    for name, path in modules.items():
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in LAZY_ALLOWED or (relative.startswith("cli/") and relative.endswith("_cmd.py")):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree, in_functions=True):
            if _targets(name, path.name == "__init__.py", node, names):
                found.append(f"src/cudaship/{relative}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "move these to module level (fix the layering if that makes a cycle):\n" + "\n".join(
        found
    )

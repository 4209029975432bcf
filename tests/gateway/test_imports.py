"""The shape of gateway/: no import cycles, the proxy never reaches up to the server, backends know nothing of the proxy,
serving split into its parts, and no training stack in serving.

Imports are read from the source (nothing is executed). An import made only for type
checking (inside ``if TYPE_CHECKING:``) runs nothing and may point anywhere; every other
import, at module level or inside a function, is an edge. ``from pkg import sub`` is an
edge to the submodule ``pkg.sub`` when there is one.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = ROOT / "gateway"


def _modules() -> dict[str, Path]:
    out = {}
    for path in GATEWAY.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_only(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return skip


def imports(module: str, *, type_only: bool) -> set[str]:
    """The gateway modules ``module`` imports (including those imported for type checking when ``type_only``)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    skip = set() if type_only else _type_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        for target in targets:
            resolved = _resolve(target)
            if resolved is not None and resolved != module:
                out.add(resolved)
    return out


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_gateway_has_no_import_cycles() -> None:
    edges = {m: imports(m, type_only=False) for m in MODULES}
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m == "gateway.proxy" or m.startswith("gateway.proxy.")))
def test_the_proxy_reads_the_runtime_never_the_server(module: str) -> None:
    above = {"gateway.server", "gateway.worker", "gateway.admin", "gateway.supervisor", "gateway.cli", "gateway.console",
             "gateway.tools"}
    assert imports(module, type_only=True) & above == set()


def test_backends_choose_a_server_and_know_nothing_of_connections() -> None:
    """Routes, health, selection and ejection live in ``gateway.backends``; the connection pools are the proxy's
    (``gateway.proxy.pools``), so backends import nothing of the proxy, not even for type checking."""
    proxy = {m for m in MODULES if m == "gateway.proxy" or m.startswith("gateway.proxy.")}
    assert imports("gateway.backends", type_only=True) & proxy == set()


def _reachable(start: str) -> set[str]:
    """The modules importing ``start`` runs (a submodule's import runs its packages too)."""
    edges = {m: imports(m, type_only=False) for m in MODULES}
    seen, todo = {start}, [start]
    while todo:
        module = todo.pop()
        parts = module.split(".")
        packages = {".".join(parts[:i]) for i in range(1, len(parts))} & MODULES.keys()
        for other in edges[module] | packages:
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def test_the_supervisor_knows_every_metric_a_worker_exports() -> None:
    """The supervisor renders the workers' snapshots under the instruments of its own registry: a module that
    declares one (``metrics.counter(...)`` and kin, at import) and that the supervisor never imports would have its
    metrics dropped from every multi-worker scrape."""
    declared = re.compile(r"\bmetrics\.(?:counter|gauge|histogram)\(")
    declaring = {m for m, path in MODULES.items() if declared.search(path.read_text())}
    assert {"gateway.backends", "gateway.proxy.pools", "gateway.proxy.downstream"} <= declaring
    assert declaring - _reachable("gateway.supervisor") == set()


def _defines(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


@pytest.mark.parametrize(("module", "names"), [
    ("gateway.worker", {"Worker", "configure_logging"}),
    ("gateway.admin", {"Control", "LocalControl", "admin_app", "start_admin", "_refused"}),
    ("gateway.supervisor", {"Supervisor", "_WorkerHandle", "WorkerStartError", "_worker_main", "_serve_supervised"}),
    ("gateway.server", {"serve", "_serve_single"}),
])
def test_each_part_of_serving_has_its_module(module: str, names: set[str]) -> None:
    """The request path reads from the names: ``server`` picks one process or a supervisor, ``worker`` serves,
    ``admin`` answers the admin listener, ``supervisor`` runs worker processes; each part is defined in one place."""
    assert names <= _defines(module)
    for other in {"gateway.worker", "gateway.admin", "gateway.supervisor", "gateway.server"} - {module}:
        assert names & _defines(other) == set(), other


def test_serving_never_imports_training_stacks() -> None:
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
        assert names & {"torch", "transformers", "models"} == set(), module

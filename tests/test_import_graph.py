"""Every module of ``wmrl_env`` imports in a fresh interpreter, and no two import each other.

The cycle check reads the source (``ast``), so it sees the imports a module runs when it is
first imported: top-level ones, including those in ``try``/``if`` blocks, but not those inside
functions (deferred on purpose) or under ``if TYPE_CHECKING``. Importing ``a.b.c`` runs
``a/__init__`` and ``a/b/__init__`` first, so those count as edges too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import wmrl_env
import wmrl_env.envs

PACKAGE_DIRS = {
    "wmrl_env": Path(wmrl_env.__file__).parent,
    "wmrl_env.envs": Path(wmrl_env.envs.__file__).parent,
}


def _module_files() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    modules: dict[str, Path] = {}
    for prefix, root in PACKAGE_DIRS.items():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((prefix, *parts))] = path
    return modules


MODULES = _module_files()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_time_nodes(body: list[ast.stmt], typing: bool = False) -> list[ast.stmt]:
    """Statements that run at import: the body, minus functions, classes' methods and
    ``if TYPE_CHECKING`` blocks (kept with ``typing``), descending into ``if``/``try``/``with``."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            if typing or not _is_type_checking(node):
                found += _import_time_nodes(node.body, typing)
                found += _import_time_nodes(node.orelse, typing)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                found += _import_time_nodes(block, typing)
            for handler in node.handlers:
                found += _import_time_nodes(handler.body, typing)
        elif isinstance(node, ast.With):
            found += _import_time_nodes(node.body, typing)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
    return found


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports(module: str, path: Path, typing: bool = False) -> set[str]:
    """The wmrl_env modules that importing ``module`` runs first (with ``typing``, also those
    a type checker reads under ``if TYPE_CHECKING``)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in _import_time_nodes(ast.parse(path.read_text()).body, typing):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            targets.update(m for m in _with_parents(name) if m in MODULES)
    targets.discard(module)
    # a package's own parents are already being imported when it runs: not an edge back
    return {t for t in targets if not module.startswith(t + ".")}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_graph_sees_known_edges() -> None:
    edges = _imports("wmrl_env.sandboxes.local", MODULES["wmrl_env.sandboxes.local"])
    assert {"wmrl_env.executors.base", "wmrl_env.executors", "wmrl_env.sandboxes.job"} <= edges


def test_no_import_cycle_between_modules() -> None:
    graph = {module: _imports(module, path) for module, path in MODULES.items()}
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_even_through_type_only_imports() -> None:
    """Modules that need each other only for type hints still form one tangle to read and
    to move; a protocol (e.g. ``lora.TunableScorer``) names what is needed instead."""
    graph = {module: _imports(module, path, typing=True) for module, path in MODULES.items()}
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle through type-only imports: " + " -> ".join(cycle or [])


FUSION_MAX_LINES = 400
WORLD_MODEL_FAMILIES = ("programs", "lm", "embeddings", "dynamics")


def test_no_fusion_module_is_over_400_lines() -> None:
    """The fusion reads top to bottom: ``RewardFusion`` in one module, validation, rewards,
    levels and the gate each in their own; none grows back into one long file."""
    long = {
        module: n
        for module, path in MODULES.items()
        if module.startswith("wmrl_env.fusion")
        and (n := len(path.read_text().splitlines())) > FUSION_MAX_LINES
    }
    assert not long, f"fusion modules over {FUSION_MAX_LINES} lines: {long}"


def _world_model_family(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] == ["wmrl_env", "world_models"] and len(parts) > 2:
        return parts[2] if parts[2] in WORLD_MODEL_FAMILIES else None
    return None


def _private_imports_across_families() -> list[str]:
    """``module <- source.name`` for every private name (``_x``) imported, at any depth,
    from a world-model family into a module outside it, or into a family from elsewhere."""
    found = []
    for module, path in MODULES.items():
        mine = _world_model_family(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            theirs = _world_model_family(node.module)
            if theirs == mine or (theirs is None and mine is None):
                continue
            found += [f"{module} <- {node.module}.{a.name}" for a in node.names
                      if a.name.startswith("_")]  # fmt: skip
    return found


def test_no_private_name_crosses_a_world_model_family() -> None:
    """World models are grouped by family (programs, LM scorers, embeddings, dynamics) with
    the shared pieces at the top: a family's private names stay inside it."""
    assert _private_imports_across_families() == []


def test_every_module_imports_in_a_fresh_interpreter() -> None:
    """All modules, one after the other, in an interpreter that has imported nothing else:
    each imports, or raises ``MissingDependencyError`` naming the extra it needs."""
    script = textwrap.dedent(
        """
        import importlib, sys
        from wmrl_env.utils.imports import MissingDependencyError
        failed = []
        for module in sys.argv[1:]:
            try:
                importlib.import_module(module)
            except MissingDependencyError:
                pass  # a backend of an extra that is not installed: the error names the extra
            except Exception as error:
                failed.append(f"{module}: {error!r}")
        print("\\n".join(failed))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *sorted(MODULES)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout

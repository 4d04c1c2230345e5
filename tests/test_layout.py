"""The layout stays legible: no import circle, the flow goes one way (io and metrics compute nothing of
each other, the CLI and the reports hold no logic of their own), and `import topkeval` stays light."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "topkeval"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_at_load(path: Path) -> set[str]:
    """The topkeval modules a module imports when it is loaded (not those imported inside functions,
    which is how the package defers optional and heavy imports)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` imports are not loaded
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            modules = {target}
            if not node.module:  # from . import engine
                modules = {f"{target}.{alias.name}" for alias in node.names}
            found |= modules
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("topkeval")}
    return {m for m in found if m != name}


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    return {name: {m for m in _imports_at_load(path) if m in modules} for name, path in modules.items()}


def test_no_import_circle():
    graph = _graph()
    # a package's __init__ may import its own submodules; a submodule importing its package is a
    # circle only if that package's __init__ leads back to it, which the search below finds
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


@pytest.mark.parametrize("layer,forbidden", [
    ("topkeval.metrics", {"topkeval.inputs", "topkeval.api", "topkeval.cli", "topkeval.engine", "topkeval.outputs.text"}),
    ("topkeval.inputs", {"topkeval.metrics", "topkeval.engine", "topkeval.kernels", "topkeval.api", "topkeval.cli"}),
    ("topkeval.kernels", {"topkeval.inputs", "topkeval.metrics", "topkeval.engine", "topkeval.api", "topkeval.cli"}),
    ("topkeval.engine", {"topkeval.api", "topkeval.cli", "topkeval.inputs", "topkeval.inputs.judgments", "topkeval.inputs.stream",
                         "topkeval.backends.matrix"}),
])
def test_the_flow_goes_one_way(layer, forbidden):
    """Nothing in metrics/ reads files, nothing in io/ computes a metric, the kernels know only arrays,
    the engine knows no front door."""
    for name, imports in _graph().items():
        if name == layer or name.startswith(layer + "."):
            bad = {m for m in imports if any(m == f or m.startswith(f + ".") for f in forbidden)}
            assert not bad, f"{name} imports {bad}"


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    names = sorted(n for n in _graph() if not n.endswith("__main__"))  # __main__ runs the CLI
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    for name in names:  # each first in a fresh interpreter: a circle shows as an ImportError
        proc = subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True)
        assert proc.returncode == 0, (name, proc.stderr[-500:])

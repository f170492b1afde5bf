"""The layers of src/samebits, as docs/architecture.md states them: every import (module level or
inside a function) goes down the order, and siblings in one layer never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "samebits"

# Top to bottom. A package (or top-level module) may import only those in lower layers.
LAYERS: list[set[str]] = [
    {"__main__"},
    {"cli", "bootstrap", "child"},
    {"pytest_plugin"},  # integrations
    {"serve"},  # a capability built on others (goldens for its self-check)
    {"checker", "diagnosis", "linter", "golden", "runner", "offline", "probe"},  # capabilities
    {"runtime"},
    {"measure"},
    {"rules"},  # the registry of rules and causes: measure's messages name their fixes from it
    {"models"},
    {"tensors", "fingerprint"},
    {"determinism"},
    {
        "deadline",
        "environ",
        "files",
        "limits",
        "report",
        "__init__",
    },  # report: HTML pages of saved reports (JSON in, HTML out)
    {"errors", "exit_codes", "pystart", "_version", "_lazy"},
]
LAYER_OF = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _unit(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, less what sits under ``if TYPE_CHECKING:`` (seen by type checkers, never run)."""
    skip = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for stmt in block.body
        for n in ast.walk(stmt)
    }
    return [n for n in ast.walk(tree) if id(n) not in skip]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "samebits":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("samebits."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("samebits."))
    return found


def test_every_unit_has_a_layer():
    units = {_unit(p) for p in SRC.rglob("*.py")}
    assert units <= set(LAYER_OF), f"give these a layer: {sorted(units - set(LAYER_OF))}"


def test_imports_only_go_down():
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        unit = _unit(path)
        for target in _imports(path) - {unit}:
            if LAYER_OF[target] <= LAYER_OF[unit]:
                upward.append(f"{path.relative_to(SRC)} imports {target}")
    assert upward == []


def test_the_layer_order_is_the_one_in_the_architecture_doc():
    doc = (SRC.parent.parent / "docs" / "architecture.md").read_text()
    order = " > ".join(", ".join(sorted(layer)) for layer in LAYERS)
    assert f"`{order}`" in doc


def test_processes_are_started_in_one_module():
    """The child-process layer (own process group, death signal, stderr tail, registry of live
    children) is measure/spawn.py; `samebits run` replaces itself with os.exec instead."""
    starting = sorted(
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "Popen(" in p.read_text() or "os.fork(" in p.read_text()
    )
    assert starting == ["measure/spawn.py"]

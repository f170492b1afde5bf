"""Types that hold for users: the public names a type checker sees are the real ones."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import samebits

INIT = Path(samebits.__file__)


def test_every_lazy_export_is_also_imported_for_type_checkers_from_its_module():
    tree = ast.parse(INIT.read_text())
    checked = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {a.asname or a.name: n.module for n in checked.body if isinstance(n, ast.ImportFrom) for a in n.names}
    exports = samebits._EXPORTS
    assert set(seen) == set(exports)
    assert {name: seen[name] for name in exports} == exports  # the lazy loader reads the same module


def test_a_public_name_is_what_it_says_whatever_was_imported_first():
    """``samebits.golden.record`` the module once shadowed ``samebits.record`` the function."""
    code = (
        "import samebits.golden.recorder, samebits.golden.verifier, samebits.runtime.bench, samebits\n"
        "from samebits.golden import record, verify\n"
        f"print([type(getattr(samebits, n)).__name__ for n in {sorted(samebits._EXPORTS)!r}], type(record).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "module" not in out.stdout, out.stdout + out.stderr


def test_a_users_type_checker_sees_the_predictor_class(tmp_path):
    pytest.importorskip("mypy", reason="the type checker is in the test extra")
    user = tmp_path / "user.py"
    user.write_text(
        "import samebits\n"
        "reveal_type(samebits.Predictor)\n"
        "reveal_type(samebits.check('demo:mlp'))\n"
        "p: samebits.Predictor = samebits.Predictor('demo:mlp')\n"
        "reveal_type(p.plan)\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "--ignore-missing-imports", str(user)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line.split("Revealed type is ")[-1] for line in out.stdout.splitlines() if "Revealed type" in line]
    assert len(lines) == 3, out.stdout + out.stderr
    assert lines[0].endswith('-> samebits.runtime.predictor.Predictor"')
    assert lines[1] == '"samebits.checker.report.CheckReport"'
    assert lines[2] == '"samebits.runtime.plan.Plan"'

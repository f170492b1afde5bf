"""pytest plugin: the ``samebits_golden`` fixture pins model outputs in goldens beside the tests.

``samebits_golden.check(model, inputs)`` compares with ``__goldens__/<test>[.<name>].safetensors``
next to the test file; ``pytest --samebits-update`` writes missing goldens and rewrites only
those whose outputs changed. Registered through the ``pytest11`` entry point; imports torch only
when a test uses the fixture.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # torch loads only when a test asks for the fixture
    from samebits.models.inputs import Model


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("samebits", "samebits goldens")
    group.addoption(
        "--samebits-update",
        action="store_true",
        default=False,
        help="write missing samebits goldens and rewrite those whose outputs changed",
    )


def pytest_report_collectionfinish(config: pytest.Config, start_path: Path, items: list[pytest.Item]) -> str | None:
    """A header line with the fingerprint, once collection shows that a test uses goldens (so
    that pytest runs without goldens never import torch for it)."""
    if not any("samebits_golden" in getattr(item, "fixturenames", ()) for item in items):
        return None
    from samebits.fingerprint import Fingerprint

    fp = Fingerprint.capture()
    return f"samebits: torch {fp.packages['torch']}, CPU {fp.cpu['capability']}, {fp.threads['intra_op']} threads, hash randomisation {'on' if fp.hash_randomization else 'off'}"


def sanitize(name: str) -> str:
    """A file-name-safe version of a test or golden name: ``test_x[a-1]`` -> ``test_x_a-1``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_.") or "golden"


class GoldenFixture:
    """What ``samebits_golden`` gives a test."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        self.folder = Path(str(request.node.path)).parent / "__goldens__"
        self.update = bool(request.config.getoption("--samebits-update"))

    def path_for(self, name: str | None = None) -> Path:
        stem = sanitize(self._request.node.name) + (f".{sanitize(name)}" if name else "")
        return self.folder / f"{stem}.safetensors"

    def check(
        self,
        model: Model,
        inputs: object,
        name: str | None = None,
        atol: float | None = None,
        rtol: float | None = None,
    ) -> None:
        """Compare ``model(inputs)`` with the golden (same tolerance policy as ``samebits verify``)."""
        from samebits.golden import record, verify

        path = self.path_for(name)
        if not path.exists():
            if not self.update:
                pytest.fail(f"no samebits golden {path}; run `pytest --samebits-update` to write it", pytrace=False)
            record(model, path, inputs)
            return
        if self.update:
            if not verify(path, model, exact=True).ok:
                record(model, path, inputs, force=True)
            return
        report = verify(path, model, atol=atol, rtol=rtol)
        if not report.ok:
            lines = [f"outputs differ from the golden {path} ({report.policy}: {report.policy_reason})"]
            for item in report.items:
                if item.verdict == "diverged":
                    lines.append(f"{item.message()}\nThe failure occurred for item {item.path or '<output>'}")
            if report.first_module:
                lines.append(f"first module whose output changed: {report.first_module}")
            lines += [f"machine differs: {c}" for c in report.likely_causes()]
            lines.append("if the change is intended, run `pytest --samebits-update`")
            pytest.fail("\n".join(lines), pytrace=False)


@pytest.fixture
def samebits_golden(request: pytest.FixtureRequest) -> GoldenFixture:
    """Pin a model's outputs: ``samebits_golden.check(model, inputs, name=None, atol=None, rtol=None)``."""
    return GoldenFixture(request)

"""What ``samebits doctor`` found: findings with a severity and a fix, and every probe's status."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from samebits.exit_codes import exit_code

SCHEMA_VERSION = 1
Severity = Literal["error", "warning", "info"]


@dataclasses.dataclass
class DoctorFinding:
    code: str
    name: str
    severity: Severity
    message: str  # what was measured, with the numbers
    fix: str
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ProbeStatus:
    """One probe: ``ran`` (found nothing or found something), ``skipped`` or ``error``, with why."""

    probe: str
    status: Literal["ran", "skipped", "error"]
    summary: str
    seconds: float = 0.0
    details: dict[str, Any] = dataclasses.field(default_factory=dict)  # the measurements


@dataclasses.dataclass
class DoctorReport:
    model: str
    inputs: str
    findings: list[DoctorFinding]
    probes: list[ProbeStatus]
    environment: dict[str, Any]
    seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION

    @property
    def exit_code(self) -> int:
        """1 when anything is a warning or an error (info findings alone are not); else 2 when a
        probe errored or none ran."""
        return exit_code(
            found=any(f.severity in ("error", "warning") for f in self.findings),
            errored=any(p.status == "error" for p in self.probes),
            ran=any(p.status == "ran" for p in self.probes),
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(kind="doctor", exit_code=self.exit_code)
        return data

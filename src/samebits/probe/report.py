"""The probe's report: one verdict per axis (quiet, loaded, replicas, restart) as ``check`` gives
them, the loaded axis's cells, its JSON (``kind: probe``, schema ``schemas/probe.schema.json``)
and its exit code (the one rule of every report)."""

from __future__ import annotations

import dataclasses
from typing import Any

from samebits.exit_codes import exit_code
from samebits.probe.compare import Difference
from samebits.probe.load import Cell

SCHEMA_VERSION = 1
AXES = ("quiet", "loaded", "replicas", "restart")


@dataclasses.dataclass
class Axis:
    """One axis: ``identical``, ``diverged``, ``skipped`` (not asked for) or ``error`` (could not
    be measured: requests failed, the time ran out)."""

    axis: str
    verdict: str
    agreed: int = 0
    runs: int = 0
    summary: str = ""
    reason: str = ""
    first: tuple[str, Difference] | None = None  # (where: probe, replica, concurrency; how it differs)
    max_abs: float | None = None
    starts_at: int | None = None  # loaded: the lowest concurrency at which an answer differed
    cells: list[Cell] = dataclasses.field(default_factory=list)
    groups: list[list[str]] = dataclasses.field(default_factory=list)  # replicas: targets with equal answers

    def to_dict(self) -> dict[str, Any]:
        return {
            "axis": self.axis,
            "verdict": self.verdict,
            "agreed": self.agreed,
            "runs": self.runs,
            "summary": self.summary,
            "reason": self.reason,
            "max_abs": self.max_abs,
            "starts_at": self.starts_at,
            "first": {"where": self.first[0], **self.first[1].to_dict()} if self.first else None,
            "cells": [c.to_dict() for c in self.cells],
            "groups": self.groups,
        }


@dataclasses.dataclass
class ProbeReport:
    url: str
    protocol: str
    inputs: str  # where the probe inputs came from, in words
    probes: int
    axes: list[Axis]
    seconds: float = 0.0
    filler: str = "python"  # the load client: "wrk" or "python"
    outputs: list[str] = dataclasses.field(default_factory=list)  # what an answer holds: "logits FP32[1, 10]"

    @property
    def diverged(self) -> list[Axis]:
        return [a for a in self.axes if a.verdict == "diverged"]

    @property
    def exit_code(self) -> int:
        ran = any(a.verdict in ("identical", "diverged") for a in self.axes)
        return exit_code(found=bool(self.diverged), errored=any(a.verdict == "error" for a in self.axes), ran=ran)

    def headline(self) -> str:
        if self.diverged:
            return "; ".join(_diverged_line(a) for a in self.diverged)
        failed = [a for a in self.axes if a.verdict == "error"]
        if failed:
            return f"Could not measure {', '.join(a.axis for a in failed)}: {failed[0].reason}"
        ran = [a.axis for a in self.axes if a.verdict == "identical"]
        loaded = next((a for a in self.axes if a.axis == "loaded" and a.cells), None)
        if loaded is not None:
            levels = ",".join(str(c.concurrency) for c in loaded.cells)
            ran = [f"loaded at concurrency {levels}" if a == "loaded" else a for a in ran]
        return f"Every answer kept its bits ({', '.join(ran)}): {self.probes} probe inputs"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "probe",
            "schema_version": SCHEMA_VERSION,
            "url": self.url,
            "protocol": self.protocol,
            "inputs": self.inputs,
            "probes": self.probes,
            "filler": self.filler,
            "outputs": self.outputs,
            "seconds": round(self.seconds, 3),
            "headline": self.headline(),
            "ok": self.exit_code == 0,
            "exit_code": self.exit_code,
            "axes": [a.to_dict() for a in self.axes],
        }


def _diverged_line(a: Axis) -> str:
    by = f", by up to {a.max_abs:.3g}" if a.max_abs else ""
    if a.axis == "loaded":
        cell = next(c for c in a.cells if c.differing)
        return (
            f"Answers change under load from concurrency {a.starts_at} "
            f"({cell.differing} of {cell.probe_answers} probe answers differ from the quiet ones{by})"
        )
    if a.axis == "quiet":
        return (
            f"Answers change between two quiet requests of the same input ({a.runs - a.agreed} of {a.runs} inputs{by})"
        )
    if a.axis == "replicas":
        return f"Replicas disagree: {' '.join('{' + ', '.join(g) + '}' for g in a.groups)}{by}"
    return f"Answers change across the restart ({a.runs - a.agreed} of {a.runs} inputs{by})"

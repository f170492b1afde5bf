"""The check's results: per-axis verdicts, where a divergence starts, its causes and fixes."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from samebits.measure.layout import LayoutTried
from samebits.tensors.compare import TreeComparison
from samebits.tensors.symptoms import OutputChange, by_notice, most_noticed, output_changes
from samebits.tensors.digest import RUN_DIGEST
from samebits.exit_codes import exit_code

SCHEMA_VERSION = 1
AxisVerdict = Literal["identical", "close", "diverged", "skipped", "error"]
AXES = ("repeat", "seed", "state", "process", "threads", "batch", "layout", "machine")


@dataclasses.dataclass
class Difference:
    """How two outputs differ: at the first path outside the tolerance (``path``, ``message``),
    every leaf that differs in the user's words, the one a user notices first on top
    (``outputs``: a flipped label before a 1e-4 box shift), and that one in a line (``noticed``)."""

    path: str
    mismatched: int
    numel: int
    max_abs: float
    max_rel: float
    max_ulp: int | None
    message: str
    outputs: list[OutputChange] = dataclasses.field(default_factory=list)
    noticed: str = ""

    @classmethod
    def from_comparison(cls, result: TreeComparison) -> Difference | None:
        worst = next((c for c in result.items if c.verdict == "diverged"), None) or result.first_difference()
        if worst is None:
            return None
        changes = by_notice(output_changes(result))
        noticed = next(iter(changes), None)
        return cls(
            worst.path or "<output>",
            worst.mismatched,
            worst.numel,
            worst.max_abs,
            worst.max_rel,
            worst.max_ulp,
            worst.message(),
            changes,
            noticed.line() if noticed else "",
        )


@dataclasses.dataclass
class Growth:
    """The difference at one module after the origin, on the way to the output."""

    module: str
    type: str
    max_abs: float
    mismatched_pct: float


@dataclasses.dataclass
class ModuleStat:
    """One traced module call of the diverged pair, in call order: identical (0 and 0), or its
    difference; ``None`` where it differs but was not kept (past the keep budget)."""

    module: str
    type: str
    identical: bool
    max_abs: float | None
    mismatched_pct: float | None


@dataclasses.dataclass
class Origin:
    """The first module whose output differs while its inputs were identical."""

    module: str
    type: str
    inputs_identical: bool
    note: str = ""
    difference: Difference | None = None
    growth: list[Growth] = dataclasses.field(default_factory=list)
    op: str | None = None  # the first aten op inside the module whose output differs
    profile: list[ModuleStat] = dataclasses.field(default_factory=list)  # every traced call, for the plot

    def keep_tensors(self, a: dict[str, Any], b: dict[str, Any]) -> None:
        """The two runs' outputs at this module (``{path: tensor}``), for a repro folder; not
        part of the report's JSON."""
        self._tensors = (a, b)

    def tensors(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        return getattr(self, "_tensors", None)


@dataclasses.dataclass
class RngUse:
    """A module whose forward drew from these RNGs."""

    module: str
    type: str
    rngs: list[str]


@dataclasses.dataclass
class SeedDetails:
    """The seed axis: which RNGs a forward consumed, and where."""

    rngs_consumed: list[str]
    modules: list[RngUse]


@dataclasses.dataclass
class ModuleRef:
    module: str
    type: str


@dataclasses.dataclass
class StateDetails:
    """The state axis: the parameters and buffers a forward changed, and their modules."""

    changed: list[str]
    modules: list[ModuleRef]
    first_forward_only: bool = False  # only the check's first forward (from the model as loaded) changed them


@dataclasses.dataclass
class ChildRun:
    label: str
    error: str | None
    seconds: float


@dataclasses.dataclass
class Rerun:
    """An axis run again under one condition (the fixed PYTHONHASHSEED re-run)."""

    verdict: str
    agreed: int
    runs: int


@dataclasses.dataclass
class PortableCost:
    """What the portable level costs on this model: median forward milliseconds natively and
    pinned, in fresh processes run one after the other, and their ratio."""

    level: str
    native_ms: float
    pinned_ms: float
    ratio: float


@dataclasses.dataclass
class ChildrenDetails:
    """The process, threads and machine axes: every run (a child, or a thread count in this
    process), the first pair that differs, the re-run, the portable level's cost."""

    children: list[ChildRun]
    pair: list[str] | None = None
    fixed_hash_seed: Rerun | None = None
    in_process: bool = False  # the threads axis ran in this process (see measure/threads.py)
    portable_cost: PortableCost | None = None  # the machine axis, where CPUs differ
    pinned: Rerun | None = None  # the machine axis again, every CPU under the default level
    portable: str | None = None  # the machine axis: the level the check ran under
    # the children's factories built other weights before any forward (label -> tensors that differ
    # from the first child's): the outputs differ for that reason first
    weights_differ: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    # the machine axis: simulated CPUs whose variables reached no probe of a library the model runs
    # (label -> those libraries): their agreement proves nothing, so they are not counted
    unsimulated: dict[str, list[str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class BatchDetails:
    """The batch axis: sizes measured, groups of sizes with identical results, and where the
    sample's position or neighbours mattered."""

    sizes: list[int]
    groups: list[list[int]]
    groups_text: str
    position_matters: list[int]
    neighbours_matter: list[int]
    errors: list[str]
    example_batch: int
    localized_at_size: int | None = None
    coupled: str | None = None  # why the rows are coupled by design (an output [B, B]), where they are
    # where neighbours matter: the first op whose row follows the other rows, and the module it runs in
    coupling_op: str | None = None


@dataclasses.dataclass
class LayoutDetails:
    """The layout axis: every layout tried, how the model's own tensors sit, and whether
    ``samebits.align_parameters`` on a parameter layout that differed gives the aligned bits."""

    layouts: list[LayoutTried]
    model_as_given: str
    aligned_fixes: bool | None = None


AxisDetails = SeedDetails | StateDetails | ChildrenDetails | BatchDetails | LayoutDetails


@dataclasses.dataclass
class AxisResult:
    """One axis: a controlled variation, how many runs agreed, and what differed."""

    axis: str
    verdict: AxisVerdict
    runs: int = 0
    agreed: int = 0
    summary: str = ""
    reason: str = ""
    difference: Difference | None = None
    origin: Origin | None = None
    details: AxisDetails | None = None  # typed: a cause that reads it fails loudly when it changes
    seconds: float = 0.0


@dataclasses.dataclass
class Cause:
    """A cause found by measurement, the measurement that proves it, and the fix."""

    code: str
    axis: str
    summary: str
    evidence: str
    fix: str
    verified: bool | None = None  # True: re-running with the fix removed the divergence


@dataclasses.dataclass
class CheckReport:
    """Everything ``samebits check`` found. ``ok`` is True when no axis diverged or errored."""

    model: str
    inputs: str
    axes: list[AxisResult]
    causes: list[Cause]
    fingerprint: dict[str, Any]
    localization: str | None = None  # why module localisation is unavailable, if it is
    seconds: float = 0.0
    schema_version: int = SCHEMA_VERSION
    digest: str = RUN_DIGEST  # the algorithm of every digest compared in this run (tensors/digest.py)

    def axis(self, name: str) -> AxisResult:
        for result in self.axes:
            if result.axis == name:
                return result
        raise KeyError(name)

    @property
    def diverged(self) -> list[AxisResult]:
        return [a for a in self.axes if a.verdict == "diverged"]

    @property
    def errored(self) -> list[AxisResult]:
        return [a for a in self.axes if a.verdict == "error"]

    @property
    def ran(self) -> list[AxisResult]:
        return [a for a in self.axes if a.verdict in ("identical", "close", "diverged")]

    @property
    def ok(self) -> bool:
        return not self.diverged and not self.errored and bool(self.ran)

    @property
    def exit_code(self) -> int:
        return exit_code(found=bool(self.diverged), errored=bool(self.errored), ran=bool(self.ran))

    def headline(self) -> str:
        """One sentence: what is wrong and the first thing to do."""
        ran = [a for a in self.axes if a.verdict in ("identical", "close")]
        if self.diverged:
            names = ", ".join(a.axis for a in self.diverged)
            # the symptom of the axis the first cause explains, else the one a user notices first
            named = self.causes[0].axis.split(", ") if self.causes else [a.axis for a in self.diverged]
            noticed = most_noticed(
                [c for a in self.diverged if a.difference and a.axis in named for c in a.difference.outputs]
            )
            if noticed:
                names += f" ({noticed.line()})"
            if self.causes:
                first = self.causes[0]
                return f"Outputs change across {names}: {first.summary}. First do: {first.fix}."
            return f"Outputs change across {names}; see the details below."
        if self.errored:
            return f"No divergence in {len(ran)} axes, but {', '.join(a.axis for a in self.errored)} could not run."
        if not ran:
            return (
                "Nothing was checked: every axis was skipped ("
                + "; ".join(f"{a.axis}: {a.reason}" for a in self.axes)
                + ")."
            )
        close = [a.axis for a in ran if a.verdict == "close"]
        if close:
            return f"Every axis that ran agrees within the tolerance ({', '.join(close)} not bit for bit)."
        return f"Same input, same bits: all {len(ran)} axes that ran are identical."

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for axis in data["axes"]:
            axis["details"] = axis["details"] or {}  # JSON: an object, empty for an axis without details
        data.update(kind="check", ok=self.ok, exit_code=self.exit_code, headline=self.headline())
        return data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True, default=str)

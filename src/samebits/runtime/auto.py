"""``backend="auto"``: every installed backend measured on this machine and model at the batch
sizes it verified, and per batch size the fastest among those whose bits equal eager's.

Mixing backends across batch sizes keeps a sample's bits independent of its batch only where
the backends give the same bits: each member's verified sizes form one class (a row has the
same bits at all of them), so one identical comparison at a size two members share makes their
classes one. A backend whose bits differ from eager (``allow_backend_drift=True``) is never
mixed: it runs every size or none."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from samebits.errors import UserError, first_line
from samebits.models.inputs import Model, ModelInputs
from samebits.measure.load import Load, LoadWatch
from samebits.measure.timing import Ratio, Timings, interleaved_times
from samebits.runtime.backends import REGISTRY
from samebits.runtime.cache import ArtifactCache
from samebits.runtime.invariance import Invariance, bits_against, candidate_sizes
from samebits.runtime.plan import Difference, Validation
from samebits.tensors import tree


class Member(Protocol):
    """What ``auto`` needs of the runner of one backend (a Member)."""

    invariance: Invariance
    max_batch_size: int

    def forward_at(self, batch: ModelInputs, size: int | None) -> Any: ...

    def example_at(self, size: int) -> ModelInputs: ...


class Owner(Protocol):
    """What ``auto`` needs of the runner it plans for: the facts that key the plan, and a member
    runner for one backend on the same prepared model and example."""

    model: Model
    device: str
    invariant: bool
    tile: int | None
    max_batch_size: int
    cache_dir: Path
    fingerprint: dict[str, Any]

    @property
    def sample(self) -> ModelInputs | None: ...

    @property
    def weights_sha256(self) -> str: ...

    def member(self, backend: str, budget: float) -> Member: ...


FASTER = 0.97  # another backend replaces eager at a size only when it takes under 97% of its time (median)


@dataclasses.dataclass(frozen=True)
class AutoPlan:
    """What ``backend="auto"`` measured and chose: which backend runs which verified size, every
    candidate's timings and verified sizes, its bits against eager, and what was left out."""

    candidates: tuple[str, ...]
    chosen: tuple[str, ...]
    backend_by_size: Mapping[int, str]
    forward_seconds: Mapping[int, float]  # eager's 1-row and largest forwards, then the choice's
    seconds_by_backend: Mapping[str, Mapping[int, float]]
    verified: Mapping[str, tuple[int, ...]]
    drift: Mapping[str, Difference]
    skipped: Mapping[str, str]
    allow_backend_drift: bool
    seconds: float
    cached: bool = False
    load: Load | None = None  # the machine while the backends were timed

    def to_dict(self) -> dict[str, Any]:
        """The plan as cached (JSON: sizes as strings)."""
        return {
            "backend": "auto",
            "candidates": list(self.candidates),
            "chosen": list(self.chosen),
            "backend_by_size": {str(s): b for s, b in sorted(self.backend_by_size.items())},
            "forward_seconds": {str(s): t for s, t in sorted(self.forward_seconds.items())},
            "seconds_by_backend": {b: {str(s): v for s, v in t.items()} for b, t in self.seconds_by_backend.items()},
            "verified": {b: list(s) for b, s in self.verified.items()},
            "drift": {b: d.to_dict() for b, d in self.drift.items()},
            "skipped": dict(self.skipped),
            "allow_backend_drift": self.allow_backend_drift,
            "seconds": self.seconds,
            "load": self.load.to_dict() if self.load else None,
        }

    @classmethod
    def from_dict(cls, data: Any) -> AutoPlan | None:
        """A cached plan, or ``None`` where it is malformed (then it is measured again)."""
        try:
            return cls(
                candidates=tuple(data["candidates"]),
                chosen=tuple(data["chosen"]),
                backend_by_size={int(s): str(b) for s, b in data["backend_by_size"].items()},
                forward_seconds={int(s): float(t) for s, t in data["forward_seconds"].items()},
                seconds_by_backend={
                    b: {int(s): float(v) for s, v in t.items()} for b, t in data["seconds_by_backend"].items()
                },
                verified={b: tuple(int(s) for s in sizes) for b, sizes in data["verified"].items()},
                drift={b: Difference.from_dict(d) for b, d in data["drift"].items()},
                skipped={str(b): str(r) for b, r in data["skipped"].items()},
                allow_backend_drift=bool(data["allow_backend_drift"]),
                seconds=float(data["seconds"]),
                cached=True,
                load=Load.from_dict(data.get("load")),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def invariance(self, invariant: bool) -> Invariance:
        """The verified sizes this plan runs (every size a chosen backend verified), as the
        Member reports them."""
        sizes = sorted(self.backend_by_size) if invariant else []
        scheme = ("tile" if len(sizes) == 1 else "class") if invariant else "off"
        measured = {
            "forward_seconds": {str(s): t for s, t in self.forward_seconds.items()},
            "backend_by_size": {str(s): b for s, b in self.backend_by_size.items()},
            "auto": True,
        }
        return Invariance(scheme, sizes, measured, self.seconds)

    def validation(self) -> Validation:
        """The chosen backends against eager: the one that drifts (only where allowed), else identical."""
        drifting = [self.drift[b] for b in self.chosen if b != "eager" and not self.drift[b].identical]
        return Validation("auto", drifting[0] if drifting else Difference(True), by_backend=self.drift)

    def describe(self) -> str:
        """One line: which backend runs which sizes, and what was left out and why."""
        runs: dict[str, list[int]] = {}
        for size, backend in sorted(self.backend_by_size.items()):
            runs.setdefault(backend, []).append(size)
        parts = [f"{b} at batch {', '.join(map(str, sizes))}" for b, sizes in runs.items()]
        out = "backend auto (measured here): " + "; ".join(parts)
        left = [
            f"{b} (other bits than eager: {d.difference}; allow_backend_drift=True allows it)"
            for b, d in self.drift.items()
            if not d.identical and b not in runs
        ]
        left += [f"{b} ({reason})" for b, reason in self.skipped.items()]
        out += f"; left out: {', '.join(left)}" if left else ""
        if self.load is not None and self.load.busy:
            out += f"; timed under {self.load.describe()}: eager kept wherever no backend was clearly faster (samebits cache clear measures again)"
        return out


def candidates_for(device: str, asked: tuple[str, ...] | None) -> tuple[str, ...]:
    """The backends ``auto`` measures: ``asked`` (eager always first), else every registered one
    meant for it (``Backend.auto``: not torch.compile, which builds one kernel set per batch
    shape) that runs on ``device`` (TensorRT only on CUDA)."""
    if asked:
        names = tuple(asked)
    else:
        names = tuple(n for n, b in REGISTRY.items() if b.auto and not (b.cuda_only and not device.startswith("cuda")))
    return ("eager", *[n for n in names if n != "eager"])


def sizes_of(member: Member) -> list[int]:
    """The batch sizes a member runs: its verified ones, or with invariance off every candidate."""
    if member.invariance.scheme != "off":
        return list(member.invariance.sizes)
    return candidate_sizes(member.max_batch_size)


def drift(eager: Member, member: Member) -> Difference:
    """``member`` against eager on the same batch, at the largest size both run (for invariant
    members a size both verified, which makes their classes one when the bits agree)."""
    common = sorted(set(sizes_of(eager)) & set(sizes_of(member)))
    if not common:
        return Difference(False, None, None, "no batch size verified by both", None)
    size = common[-1]
    batch = eager.example_at(size)
    ours, theirs = tree.move(member.forward_at(batch, size), "cpu"), tree.move(eager.forward_at(batch, size), "cpu")
    return bits_against(theirs, ours, size)


def time_sizes(members: Mapping[str, Member], budget: float) -> dict[int, Timings]:
    """One forward of each member at each size it runs, the members that share a size timed
    in interleaved rounds (noise hits them alike); ``budget`` seconds over all sizes."""
    sizes = sorted({s for m in members.values() for s in sizes_of(m)})
    out: dict[int, Timings] = {}
    for size in sizes:
        here = {name: m for name, m in members.items() if size in sizes_of(m)}
        batch = next(iter(here.values())).example_at(size)
        fns: dict[str, Callable[[], object]] = {
            name: functools.partial(m.forward_at, batch, size) for name, m in here.items()
        }
        out[size] = interleaved_times(fns, rounds=60, budget=budget / len(sizes))
    return out


def clearly_faster(ratio: Ratio) -> bool:
    """Faster in every round, by more than :data:`FASTER` at the median, on a machine that was
    not busy: what it takes to replace a backend."""
    return ratio.measurable and ratio.low > 1.0 and ratio.median * FASTER >= 1.0


def choose(
    times: Mapping[int, Timings], identical: Mapping[str, bool], allow_drift: bool
) -> tuple[dict[int, str], dict[int, float]]:
    """(backend by size, median seconds by size). Among the backends with eager's bits, per size
    the fastest, where it is :func:`clearly_faster` than eager (else eager); a drifting backend,
    where allowed, replaces that whole plan when it is clearly faster at every size both run."""
    by_size: dict[int, str] = {}
    for size, t in sorted(times.items()):
        same = [b for b in t.seconds if identical.get(b)]
        if same:
            best = min(same, key=t.median)
            keep = "eager" in same and best != "eager" and not clearly_faster(t.ratio("eager", best))
            by_size[size] = "eager" if keep else best
    if allow_drift:
        drifting = dict.fromkeys(b for t in times.values() for b in t.seconds if not identical.get(b))
        for backend in drifting:
            shared = [s for s, t in times.items() if backend in t.seconds and s in by_size]
            if shared and all(clearly_faster(times[s].ratio(by_size[s], backend)) for s in shared):
                by_size = {s: backend for s, t in sorted(times.items()) if backend in t.seconds}
    return by_size, {s: times[s].median(b) for s, b in by_size.items()}


def plan_key(owner: Owner, names: tuple[str, ...], allow_drift: bool) -> str:
    """What a cached plan is valid for: the model, the candidates and their package versions,
    the invariance settings, the sample's shapes, the bit-relevant environment, the device."""
    from samebits.fingerprint.capture import device_identity
    from samebits.fingerprint.diff import CALIBRATION_WITHOUT, bit_relevant_digest
    from samebits.runtime.artifacts import input_shapes
    from samebits.runtime.backends import backend_versions
    from samebits.runtime.cache import artifact_key

    return artifact_key(
        owner.model,
        {
            "kind": "auto-plan",
            "version": 1,
            "candidates": [[b, backend_versions(b)] for b in names],
            "invariant": owner.invariant,
            "tile": owner.tile,
            "max_batch_size": owner.max_batch_size,
            "sample": input_shapes(owner.sample) if owner.sample is not None else None,
            "environment": bit_relevant_digest(owner.fingerprint, CALIBRATION_WITHOUT),
            "allow_backend_drift": allow_drift,
            "device": device_identity(owner.device),
        },
        weights=owner.weights_sha256,
    )


def plan_auto(
    owner: Owner, names: tuple[str, ...], key: str, budget: float, allow_drift: bool
) -> tuple[AutoPlan, dict[str, Member]]:
    """The plan and the member Members it runs: read from the cache under ``key`` (only the
    chosen backends are built) where the plan there is well-formed and its members still verify
    the sizes they did, else measured and cached."""
    store, name = ArtifactCache(owner.cache_dir), f"auto-plan-{key}.json"
    cached = AutoPlan.from_dict(store.read_json(name))
    members = _cached_members(owner, cached, budget) if cached is not None else None
    if cached is not None and members is not None:
        return cached, members
    plan, members = _measure(owner, names, budget, allow_drift)
    if store.writable or not store.is_cache:
        store.build_once(
            name,
            lambda tmp: tmp.write_text(json.dumps(plan.to_dict())),
            kind="auto plan",
            what=f"{type(owner.model).__name__}: {plan.describe()}",
        )
    return plan, members


def _cached_members(owner: Owner, plan: AutoPlan, budget: float) -> dict[str, Member] | None:
    """The chosen backends' Members for a cached plan, or ``None`` where a backend no longer
    builds or verifies the sizes it did."""
    try:
        members = {b: owner.member(b, budget) for b in plan.chosen}
    except (UserError, KeyError):
        return None
    if any(tuple(sizes_of(m)) != plan.verified.get(b) for b, m in members.items()):
        return None
    return members


def _measure(
    owner: Owner, names: tuple[str, ...], budget: float, allow_drift: bool
) -> tuple[AutoPlan, dict[str, Member]]:
    start = time.monotonic()
    members: dict[str, Member] = {}
    skipped: dict[str, str] = {}
    for b in names:
        try:
            members[b] = owner.member(b, budget)
        except UserError as exc:
            if b == "eager":
                raise  # eager is the reference: without it nothing is judged
            skipped[b] = first_line(exc)
    drifts: dict[str, Difference] = {}
    for b in [b for b in members if b != "eager"]:
        try:
            drifts[b] = drift(members["eager"], members[b])
        except Exception as exc:  # a backend that builds but fails to run here is left out
            skipped[b] = f"its forward failed: {first_line(exc, with_type=True)}"
            del members[b]
    identical = {"eager": True, **{b: d.identical for b, d in drifts.items()}}
    usable = {b: m for b, m in members.items() if identical[b] or allow_drift}
    with LoadWatch() as watch:
        times = time_sizes(usable, budget)
    by_size, seconds = choose(times, identical, allow_drift)
    chosen = tuple(b for b in names if b in set(by_size.values()))
    plan = AutoPlan(
        candidates=names,
        chosen=chosen,
        backend_by_size=dict(sorted(by_size.items())),
        forward_seconds=dict(sorted({**members["eager"].invariance.timings(), **seconds}.items())),
        seconds_by_backend={b: {s: t.median(b) for s, t in times.items() if b in t.seconds} for b in usable},
        load=watch.load,
        verified={b: tuple(sizes_of(m)) for b, m in members.items()},
        drift=drifts,
        skipped=skipped,
        allow_backend_drift=allow_drift,
        seconds=round(time.monotonic() - start, 3),
    )
    return plan, {b: members[b] for b in chosen}


class AutoRunner:
    """``backend="auto"`` as a runner: its plan, and one member runner per backend it chose, each
    running the sizes the plan gives it."""

    def __init__(self, owner: Owner, asked: tuple[str, ...] | None, allow_drift: bool, budget: float) -> None:
        names = candidates_for(owner.device, asked)
        self.key = plan_key(owner, names, allow_drift)  # the plan's cache key
        self.plan, self.members = plan_auto(owner, names, self.key, budget, allow_drift)

    def backend_at(self, size: int | None) -> str:
        """The backend chosen for ``size`` (an unmeasured size, which only invariant=False runs,
        takes the choice at the next measured size up)."""
        by_size = self.plan.backend_by_size
        if size is not None and size in by_size:
            return by_size[size]
        above = [s for s in by_size if size is None or s >= size]
        return by_size[min(above)] if above else by_size[max(by_size)]

    def forward_at(self, batch: ModelInputs, size: int | None) -> Any:
        return self.members[self.backend_at(size)].forward_at(batch, size)

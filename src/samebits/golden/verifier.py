"""``samebits.verify()``: re-run a golden's model on its stored inputs and say what changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from samebits.errors import UserError
from samebits.fingerprint import Fingerprint
from samebits.golden.format import SCHEMA_VERSION, Golden, read_golden
from samebits.fingerprint import bit_relevant_changes
from samebits.golden.policy import choose_policy
from samebits.models.spec import is_data_only_spec
from samebits.golden.recorder import run_profiled, spec_resolved_from, through_runtime
from samebits.models import LoadedModel, load_model
from samebits.models.target import ModelOrSpec, as_loaded
from samebits.measure.guard import ForwardError
from samebits.measure.trace import ModuleCall, Trace, first_divergence
from samebits.measure.layout import LAYOUTS, LayoutTried
from samebits.measure.model_state import model_given_back
from samebits.measure.prepare import check_device, device_kind, prepare
from samebits.tensors import tree
from samebits.tensors.compare import Comparison, compare_trees, worst_verdict
from samebits.tensors.digest import weights_changed
from samebits.tensors.tree import flatten
from samebits.exit_codes import exit_code
from samebits.models.inputs import Model


@dataclasses.dataclass
class VerifyReport:
    """Per output path: identical bits, within tolerance, or diverged; and why, where, since when."""

    golden: str
    model: str
    policy: str
    policy_reason: str
    items: list[Comparison]
    fingerprint_changes: list[dict[str, Any]]
    first_module: str | None = None
    recorded: dict[str, Any] = dataclasses.field(default_factory=dict)  # samebits version, created
    schema_version: int = SCHEMA_VERSION
    layouts: list[LayoutTried] = dataclasses.field(default_factory=list)  # with layout=True: each against the golden
    weights_changed: list[str] | None = None  # parameters and buffers whose bits changed (None: not known)

    @property
    def verdict(self) -> str:
        return worst_verdict(c.verdict for c in self.items)

    @property
    def ok(self) -> bool:
        """The outputs match the golden, under every layout tried."""
        return self.verdict != "diverged" and all(t.verdict != "diverged" for t in self.layouts)

    @property
    def exit_code(self) -> int:
        return exit_code(found=not self.ok)

    def likely_causes(self) -> list[str]:
        """``"cpu.capability AVX512 -> AVX2: CPU capability: ..."`` for each bit-relevant change of
        the machine (changed weights are ``weights_changed``)."""
        return [
            f"{c['field']} {c['old']} -> {c['new']}: {c['note']}" for c in self.fingerprint_changes if c["affects_bits"]
        ]

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.update(
            kind="verify",
            verdict=self.verdict,
            ok=self.ok,
            exit_code=self.exit_code,
            likely_causes=self.likely_causes(),
        )
        return data


def _model_for(
    golden: Golden, golden_path: Path, model_or_spec: ModelOrSpec | None, announce: Callable[[str], None]
) -> LoadedModel:
    if model_or_spec is None:
        stored = golden.header.get("model")
        if not stored:
            raise UserError(f"'{golden_path}' was recorded from an in-memory model; pass the MODEL to verify against")
        if not isinstance(stored, str) or not is_data_only_spec(stored):
            raise UserError(
                f"'{golden_path}' names the MODEL {str(stored)[:80]!r}, which is code; a golden never chooses code to run: "
                "pass the MODEL on the command line (samebits verify FILE MODEL)"
            )
        spec = spec_resolved_from(stored, golden_path.parent)
        announce(f"loading MODEL {spec} (as stored in the golden: data only)")
        return load_model(spec)
    if isinstance(model_or_spec, str):
        announce(f"importing MODEL {model_or_spec}")
    return as_loaded(model_or_spec)


def verify(
    path: str | Path,
    model_or_spec: ModelOrSpec | None = None,
    *,
    exact: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
    announce: Callable[[str], None] | None = None,
    layout: bool = False,
    device: str | None = None,
) -> VerifyReport:
    """Verify the golden at ``path``. ``model_or_spec`` defaults to the spec stored in the file
    (resolved relative to it). Bits must match when the fingerprint matches in every bit-relevant
    field; otherwise torch's per-dtype tolerances apply, unless ``exact`` or ``atol``/``rtol``.
    ``layout``: also run with the model's parameters and the inputs re-laid in memory
    (``measure.layout``), each compared with the golden the same way. ``device``: where to run
    (default: the device the golden was recorded on); it must be of the same kind."""
    golden_path = Path(path)
    golden = read_golden(golden_path)
    recorded_on = str(golden.header.get("device") or "cpu")
    device = device or recorded_on
    check_device(device)
    if device_kind(device) != recorded_on:
        raise UserError(
            f"{golden_path} was recorded on {recorded_on}; verify runs on the same kind of device, not {device} "
            f"(--device {recorded_on})"
        )
    changes, unreadable = bit_relevant_changes(golden.header["fingerprint"], Fingerprint.for_device(device))
    policy = choose_policy(changes, unreadable, exact=exact, atol=atol, rtol=rtol)
    loaded = _model_for(golden, golden_path, model_or_spec, announce or (lambda message: None))
    recorded_weights = golden.header.get("weights")
    try:
        algorithm = golden.header.get("digest", "sha256")
        with model_given_back(loaded.model):
            loaded.model, inputs = prepare(loaded.model, golden.inputs(), device)
            with through_runtime(loaded, inputs, golden.header.get("runtime"), device) as subject:
                output, trace = run_profiled(subject.model, inputs, golden.header["profile"], algorithm)
                output = tree.move(output, "cpu")  # the golden's outputs are on the CPU
                layouts = _layouts(golden, subject.model, policy.compare, device) if layout else []
    except ForwardError as exc:
        raise UserError(
            f"{exc} on the golden's stored inputs; is {loaded.spec} the model it was recorded from?"
        ) from exc
    items = compare_trees(golden.outputs, flatten(output), leaf=policy.compare, sides=("the golden", "this run")).items
    first = None
    if any(c.verdict != "identical" for c in items) and golden.header.get("trace"):
        recorded = Trace(
            golden.header["digests"],
            [
                ModuleCall(**{f: m[f] for f in ("name", "type", "call", "inputs", "outputs")})
                for m in golden.header["trace"]
            ],
            algorithm,
        )
        divergence = first_divergence(recorded, trace)
        if divergence is not None:
            first = f"{divergence.call.label} ({divergence.call.type})"
    return VerifyReport(
        str(golden_path),
        loaded.spec,
        policy.kind,
        policy.reason,
        items,
        [c.to_dict() for c in changes],
        first,
        {k: golden.header.get(k) for k in ("samebits", "created", "model")},
        layouts=layouts,
        weights_changed=weights_changed(recorded_weights, loaded.model, "sha256") if recorded_weights else None,
    )


def _layouts(golden: Golden, model: Model, leaf: Callable[..., Comparison], device: str) -> list[LayoutTried]:
    """The golden's forward once per layout, compared with the golden."""
    import torch

    tried = []
    for layout in LAYOUTS:
        if layout.on == "parameters" and (golden.header.get("runtime") or not isinstance(model, torch.nn.Module)):
            tried.append(LayoutTried(layout.name, layout.what, "skipped", "no nn.Module parameters here to re-lay"))
            continue
        try:
            with layout.applied(model, prepare(None, golden.inputs(), device)[1]) as inputs:
                output, _ = run_profiled(model, inputs, golden.header["profile"])
                output = tree.move(output, "cpu")
        except ForwardError as exc:
            tried.append(LayoutTried(layout.name, layout.what, "error", str(exc)))
            continue
        result = compare_trees(golden.outputs, flatten(output), leaf=leaf, sides=("the golden", "this run"))
        worst = result.first_difference()
        tried.append(LayoutTried(layout.name, layout.what, result.verdict, worst.brief() if worst else ""))
    return tried

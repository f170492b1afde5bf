"""``samebits check --out DIR``: a repro folder that makes a check reproducible on another
machine, and ``--from DIR``, which re-runs it there and says what changed.

DIR holds ``report.json`` (and ``report.html`` where the report extra is installed),
``fingerprint.json``, the inputs used (``inputs.safetensors``, or ``inputs.pt`` for inputs that
are not plain tensors, read back with ``weights_only=True``), for each diverged axis the outputs
of the two runs at the first divergent module (``origin-AXIS.safetensors``, keys ``a|PATH`` and
``b|PATH``), ``command.txt`` (the command, for a person: samebits never runs it) and
``repro.json`` (the options, written last: a folder with it is samebits' own). The stored MODEL
is re-used only when it is data (``demo:``, ``.pt2``, ``.onnx``); code is passed again.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import types
import typing
from pathlib import Path
from typing import Any

import torch

from samebits.checker.options import CheckOptions
from samebits.checker.report import CheckReport
from samebits.errors import UserError
from samebits.files import BadJson, atomic_write, folder_state, read_json
from samebits.models.inputs import ModelInputs
from samebits.models.spec import is_data_only_spec

MARKER = "repro.json"
KIND = "samebits-check-repro"


def _writable(folder: Path) -> None:
    state = folder_state(folder, MARKER, kind=KIND)
    if state in ("file", "broken link"):
        raise UserError(f"--out {folder} is a {state}; give a folder")
    if state == "foreign":
        raise UserError(f"--out {folder} exists, is not empty and is not a samebits repro folder; choose another")


def _write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _save_inputs(folder: Path, inputs: ModelInputs) -> str:
    values = inputs.named()
    if values and all(type(v) is torch.Tensor for v in values.values()):
        from safetensors.torch import save_file

        tensors = {k: v.detach().cpu().contiguous() for k, v in values.items()}
        atomic_write(folder / "inputs.safetensors", lambda tmp: save_file(tensors, str(tmp)))
        return "inputs.safetensors"
    data = {"args": list(inputs.args), "kwargs": dict(inputs.kwargs)}
    atomic_write(folder / "inputs.pt", lambda tmp: torch.save(data, tmp))
    return "inputs.pt"


def _load_inputs(path: Path) -> ModelInputs:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return ModelInputs.from_named(load_file(str(path)))
        data = torch.load(path, map_location="cpu", weights_only=True)
        return ModelInputs(tuple(data["args"]), dict(data["kwargs"]))
    except Exception as exc:
        raise UserError(f"cannot read the repro inputs '{path}': {str(exc).splitlines()[0]}") from None


def write_repro(folder: str | Path, report: CheckReport, inputs: ModelInputs, options: CheckOptions) -> Path:
    """Write the repro folder of ``report`` (a CheckReport) run on ``inputs`` with ``options``."""
    out = Path(folder)
    _writable(out)
    out.mkdir(parents=True, exist_ok=True)
    data = report.to_dict()
    _write_text(out / "report.json", json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    _write_text(out / "fingerprint.json", json.dumps(report.fingerprint, indent=2, sort_keys=True, default=str) + "\n")
    inputs_file = _save_inputs(out, inputs)
    from safetensors.torch import save_file

    for axis in report.axes:
        pair = axis.origin.tensors() if axis.origin is not None else None
        if pair is not None:
            tensors = {
                f"{side}|{path or '<output>'}": t.detach().cpu().contiguous()
                for side, kept in zip("ab", pair)
                for path, t in kept.items()
                if isinstance(t, torch.Tensor)
            }
            atomic_write(out / f"origin-{axis.axis}.safetensors", lambda tmp: save_file(tensors, str(tmp)))
    try:
        from samebits.report.html import render

        page = render(json.loads(json.dumps(data, default=str)))
        _write_text(out / "report.html", page)
    except UserError:  # the report extra is not installed: the JSON has it all
        pass
    rerun = shlex.join(["samebits", "check", report.model, "--from", str(out)])
    ran = " ".join(f"{k}={v}" for k, v in dataclasses.asdict(options).items())
    _write_text(
        out / "command.txt", f"# re-run this check (samebits never runs this file)\n{rerun}\n# it ran with: {ran}\n"
    )
    marker = {
        "kind": KIND,
        "schema_version": 1,
        "model": report.model,
        "inputs": inputs_file,
        "options": dataclasses.asdict(options),
    }
    _write_text(out / MARKER, json.dumps(marker, indent=2, sort_keys=True) + "\n")
    return out


def read_repro(folder: str | Path) -> tuple[str, CheckOptions, ModelInputs, dict[str, Any]]:
    """(stored MODEL, options, inputs, stored report) of a repro folder; one line where it is not one."""
    src = Path(folder)
    try:
        marker = read_json(src / MARKER)
        stored = read_json(src / "report.json")
    except BadJson as exc:
        raise UserError(f"--from {src} is not a samebits repro folder (a file there is {exc})") from None
    if not isinstance(marker, dict) or marker.get("kind") != KIND:
        raise UserError(f"--from {src} is not a samebits repro folder (no {MARKER} of kind {KIND})")
    options = _options_from(marker.get("options", {}), src)
    inputs_file = src / str(marker.get("inputs", ""))
    if inputs_file.parent != src or not inputs_file.is_file():
        raise UserError(f"--from {src}: its inputs file '{marker.get('inputs')}' is missing")
    return str(marker.get("model", "")), options, _load_inputs(inputs_file), stored


def _options_from(raw: object, folder: Path) -> CheckOptions:
    """The stored options, each of its field's type (``"runs": "x"`` is one line, not a crash)."""
    if not isinstance(raw, dict):
        raise UserError(f"--from {folder}: its {MARKER} holds no options object")
    hints = typing.get_type_hints(CheckOptions)
    values: dict[str, Any] = {}
    for name in (f.name for f in dataclasses.fields(CheckOptions)):
        if name in raw:
            value = tuple(raw[name]) if isinstance(raw[name], list) else raw[name]
            if value is False and not _fits(value, hints[name]) and _fits(None, hints[name]):
                value = None  # an option that was off (batch_invariant=False), where the field says None
            if not _fits(value, hints[name]):
                kind = hints[name].__name__ if isinstance(hints[name], type) else str(hints[name])
                raise UserError(f"--from {folder}: option {name} in {MARKER} is {raw[name]!r}, not {kind}")
            values[name] = value
    return CheckOptions(**values)


def _fits(value: object, hint: Any) -> bool:
    """Whether ``value`` (as JSON gave it) is of the type ``hint`` (int, float, str, bool, None,
    ``tuple[X, ...]`` and unions of them)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(v, args[0]) for v in value)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def model_for(stored_model: str, given: str | None, folder: str | Path) -> str:
    """The MODEL to re-run: the one given, else the stored one where it is data (never code)."""
    if given:
        return given
    if is_data_only_spec(stored_model):
        return stored_model
    raise UserError(
        f"the repro folder {folder} was made with the MODEL {stored_model[:80]!r}, which is code; pass it: "
        f"samebits check MODEL --from {folder}"
    )


def changes_since(stored: dict[str, Any], report: CheckReport) -> list[str]:
    """What differs from the stored run: each axis whose verdict changed, and each bit-relevant
    fingerprint field that changed."""
    from samebits.fingerprint import Fingerprint, bit_relevant_changes

    before = {a["axis"]: a["verdict"] for a in stored.get("axes", [])}
    lines = [
        f"axis {a.axis}: {before[a.axis]} then, {a.verdict} now"
        for a in report.axes
        if a.axis in before and before[a.axis] != a.verdict
    ]
    changes, _ = bit_relevant_changes(stored.get("fingerprint", {}), Fingerprint.capture())
    lines += [f"fingerprint {c.field}: {c.old} then, {c.new} now ({c.note})" for c in changes if c.affects_bits]
    return lines

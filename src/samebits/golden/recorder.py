"""``samebits.record()``: run a model once under a determinism profile and pin its outputs."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from samebits.measure.model_state import model_given_back
from samebits.golden.options import RecordOptions
from samebits._version import __version__
from samebits.errors import UserError
from samebits.fingerprint import Fingerprint
from samebits.golden.format import SCHEMA_VERSION, inputs_skeleton, tensor_name, write_golden
from samebits.models import LoadedModel, ModelInputs
from samebits.measure.prepare import check_device, device_kind, prepare
from samebits.models.target import ModelOrSpec, as_loaded, inputs_for, spec_of
from samebits.tensors.digest import FILE_DIGEST, Algorithm, digest_tree, weights_digests
from samebits.tensors.tree import flatten
from samebits.models.inputs import Model

_FILE_SUFFIXES = (".py", ".pt", ".pth", ".ts", ".jit", ".pt2", ".onnx")


def spec_relative_to(spec: str, folder: Path) -> str:
    """A file-based spec rewritten relative to ``folder`` (where the golden lives); others as given."""
    path, sep, attr = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    if not path.lower().endswith(_FILE_SUFFIXES) or spec.startswith("demo:"):
        return spec
    relative = os.path.relpath(Path(path).resolve(), folder.resolve())
    return f"{Path(relative).as_posix()}{sep}{attr}"


def spec_resolved_from(spec: str, folder: Path) -> str:
    """The inverse of :func:`spec_relative_to`: a stored file spec made absolute from ``folder``."""
    path, sep, attr = spec.rpartition(":") if ".py:" in spec else (spec, "", "")
    if not path.lower().endswith(_FILE_SUFFIXES) or spec.startswith("demo:") or Path(path).is_absolute():
        return spec
    return f"{(folder / path).resolve()}{sep}{attr}"


def _values(leaves: dict[str, Any]) -> dict[str, Any]:
    import torch

    out = {}
    for path, leaf in leaves.items():
        if isinstance(leaf, torch.Tensor):
            continue
        if leaf is not None and not isinstance(leaf, (bool, int, float, str)):
            raise UserError(f"output {path or '<output>'} is a {type(leaf).__name__}, which a golden cannot store")
        out[path] = leaf
    return out


def run_profiled(
    model: Model, inputs: ModelInputs, profile: dict[str, Any], algorithm: Algorithm = FILE_DIGEST
) -> tuple[Any, Any]:
    """One traced forward under the recorded profile: (output, trace of ``algorithm`` digests)."""
    from samebits.determinism import deterministic, isolate_rng
    from samebits.measure.trace import traced_forward

    context = (
        deterministic(profile["seed"], threads=profile.get("threads"))
        if profile["name"] == "deterministic"
        else isolate_rng()
    )
    from samebits.errors import first_line
    from samebits.measure.guard import ForwardError, training_note

    with context:
        try:
            output, trace, _ = traced_forward(model, inputs, algorithm=algorithm)
        except UserError:
            raise
        except Exception as exc:  # the model's own error, or its sys.exit(): one line, exit 2
            raise ForwardError(
                f"the model's forward raised {first_line(exc, with_type=True)}{training_note(model)}"
            ) from exc
    return output, trace


@contextlib.contextmanager
def through_runtime(
    loaded: LoadedModel, inputs: ModelInputs, runtime: str | None, device: str = "cpu"
) -> Iterator[LoadedModel]:
    """``loaded`` itself, or (with ``runtime="predictor[:BACKEND]"``) wrapped in a Predictor on
    ``device`` for the block, as ``check --runtime`` and ``samebits serve`` run it."""
    if runtime is None:
        yield loaded
        return
    from samebits.runtime.as_model import parse_runtime, runtime_model

    parse_runtime(runtime)
    wrapped = runtime_model(loaded.model, inputs, runtime, device=device)
    try:
        yield dataclasses.replace(loaded, model=wrapped)
    finally:
        wrapped.predictor.close()


def build_golden(
    loaded: LoadedModel,
    inputs: ModelInputs,
    profile: dict[str, Any],
    spec: str | None,
    fingerprint: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and tensors of a golden for ``loaded`` on ``inputs`` (``fingerprint``: of this
    machine before any profile was applied; captured now when not given)."""
    import torch

    fingerprint = fingerprint or Fingerprint.capture().to_dict()
    output, trace = run_profiled(loaded.model, inputs, profile)
    leaves = flatten(output)
    tensors: dict[str, torch.Tensor] = {}
    skeleton = inputs_skeleton(inputs, tensors)
    for path, leaf in leaves.items():
        if isinstance(leaf, torch.Tensor):
            tensors[tensor_name("outputs", path)] = leaf.detach().cpu().clone()
    header = {
        "schema_version": SCHEMA_VERSION,
        "kind": "golden",
        "model": spec,
        "samebits": __version__,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "fingerprint": fingerprint,
        "profile": profile,
        "digest": FILE_DIGEST,  # of digests and trace; a golden without it is sha256
        "digests": digest_tree(output, FILE_DIGEST),
        "trace": trace.to_dict()["modules"],
        "output_paths": list(leaves),
        "output_values": _values(leaves),
        "inputs": skeleton,
    }
    cpu = fingerprint.get("cpu") or {}
    if cpu.get("portable"):  # what the level promises, in words (docs/portable.md#across-vendors)
        header["bits_hold_on"] = (
            f"x86-64 CPUs of vendor {cpu.get('vendor') or 'unknown'} that run {cpu['portable']}, with the recorded "
            "library versions and threads (MKL pins its CNR branches only on Intel CPUs: GEMMs differ across vendors)"
        )
    return header, tensors


_D = RecordOptions()  # the defaults, declared once and shown in the signature


def record(
    model_or_spec: ModelOrSpec,
    path: str | os.PathLike[str],
    inputs: object = None,
    *,
    force: bool = _D.force,
    deterministic: bool = _D.deterministic,
    seed: int = _D.seed,
    threads: int | None = _D.threads,
    runtime: str | None = _D.runtime,
    device: str = _D.device,
) -> Path:
    """Run the model once on ``device`` and write a golden to ``path``; an existing file needs
    ``force=True``.

    ``model_or_spec`` is a MODEL spec (stored in the golden, relative to its folder) or a
    loaded model / ``nn.Module`` (then ``samebits verify`` needs the MODEL again).
    """
    check_device(device)
    target = Path(path)
    if target.is_dir():
        raise UserError(f"'{target}' is a directory; give the golden's file name, e.g. {target / 'model.safetensors'}")
    blocking = next((p for p in target.parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UserError(f"cannot write '{target}': '{blocking}' is a file, not a folder")
    if target.exists() and not force:
        raise UserError(f"'{target}' exists; pass --force (force=True) to overwrite it")
    if target.suffix != ".safetensors":
        raise UserError(f"a golden is a .safetensors file; got '{target.name}'")
    loaded = as_loaded(model_or_spec)
    with model_given_back(loaded.model):
        stored = spec_of(loaded)
        spec = spec_relative_to(stored, target.parent) if stored else None
        model_inputs = inputs_for(loaded, inputs)
        loaded.model, model_inputs = prepare(loaded.model, model_inputs, device)
        profile = {"name": "deterministic" if deterministic else "none", "seed": seed, "threads": threads}
        fingerprint = Fingerprint.for_device(device).to_dict()  # before a runtime's profile changes the switches
        weights = weights_digests(loaded.model, FILE_DIGEST)  # before a forward moves a buffer
        with through_runtime(loaded, model_inputs, runtime, device) as subject:
            header, tensors = build_golden(subject, model_inputs, profile, spec, fingerprint)
        header["weights"] = weights  # verify names the tensors that changed
        header["runtime"] = runtime
        header["device"] = device_kind(device)  # verify runs on the same kind of device
        try:
            write_golden(target, header, tensors, overwrite=force)
        except FileExistsError:  # created meanwhile by another process
            raise UserError(f"'{target}' exists; pass --force (force=True) to overwrite it") from None
        return target

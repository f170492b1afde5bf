"""The golden file: one safetensors file, its JSON in the header metadata. Nothing is pickled.

Tensors are named ``inputs/<path>`` and ``outputs/<path>`` (paths as :func:`flatten` writes
them, without the leading dot; a bare tensor is ``outputs/output``). The header key
``samebits`` holds a JSON object: schema version, MODEL spec, fingerprint, determinism profile,
per-path digests, per-module trace digests, the input structure, non-tensor leaves.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from samebits.errors import UserError, first_line
from samebits.tensors.digest import ALGORITHMS
from samebits.files import BadJson, WriteError, atomic_write, disk_error, parse_json
from samebits.tensors import tree
from samebits.models.inputs import ModelInputs

SCHEMA_VERSION = 1
ENCODING = "json+safetensors"
HEADER_KEY = "samebits"


class GoldenError(UserError):
    """A golden file that cannot be read: missing, corrupt, truncated, foreign or unsafe."""


def tensor_name(prefix: str, path: str) -> str:
    return f"{prefix}/{path.lstrip('.') or 'output'}"


def inputs_skeleton(inputs: ModelInputs, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The skeleton of a :class:`ModelInputs` (``tensors.tree.skeleton``); its tensors go to
    ``inputs/args[i]``, ``inputs/kwargs.k``."""

    def store(t: torch.Tensor, name: str) -> str:
        tensors[name] = t.detach().cpu().clone()
        return name

    try:
        return {
            "skeleton_version": tree.SKELETON_VERSION,
            "args": tree.skeleton(list(inputs.args), store, "inputs/args"),
            "kwargs": tree.skeleton(dict(inputs.kwargs), store, "inputs/kwargs"),
        }
    except tree.TreeError as exc:
        raise UserError(f"these inputs cannot be stored in a golden: {exc}") from None


@dataclasses.dataclass
class Golden:
    """A golden file's content: its header and its tensors (inputs and outputs)."""

    header: dict[str, Any]
    tensors: dict[str, torch.Tensor]

    @property
    def outputs(self) -> dict[str, Any]:
        """The recorded outputs, flattened: ``{path: tensor or non-tensor leaf}``."""
        out: dict[str, Any] = {}
        for path in self.header["output_paths"]:
            name = tensor_name("outputs", path)
            out[path] = self.tensors[name] if name in self.tensors else self.header["output_values"][path]
        return out

    def inputs(self) -> Any:
        from samebits.models.inputs import ModelInputs

        stored = self.header["inputs"]
        if not isinstance(stored, dict):
            raise GoldenError("the golden's stored inputs are malformed (not a JSON object)")
        try:
            args, kwargs = (
                tree.unskeleton(stored.get("args", []), self.tensors),
                tree.unskeleton(stored.get("kwargs", {}), self.tensors),
            )
        except tree.TreeError as exc:
            raise GoldenError(f"the golden's stored inputs cannot be rebuilt: {exc}") from None
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise GoldenError("the golden's stored inputs are malformed (args must be a list, kwargs a dict)")
        return ModelInputs(tuple(args), kwargs)


def write_golden(path: Path, header: dict[str, Any], tensors: dict[str, torch.Tensor], overwrite: bool = False) -> None:
    """Write atomically (a temporary file in the same folder, then a rename or a hard link): a
    reader, or another pytest-xdist worker, sees the old file or the new one, never half of one.
    Without ``overwrite``, an existing file raises ``FileExistsError`` and is left untouched."""
    from safetensors.torch import save_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot write '{path}': {disk_error(exc) or exc.strerror}") from None
    metadata = {HEADER_KEY: json.dumps({**header, "encoding": ENCODING}, sort_keys=True, default=str)}
    atomic_write(
        path,
        lambda tmp: save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp), metadata=metadata),
        overwrite=overwrite,
    )


_HEADER_TYPES: dict[str, type | tuple[type, ...]] = {
    "output_paths": list,
    "output_values": dict,
    "digests": dict,
    "inputs": dict,
    "fingerprint": dict,
    "profile": dict,
    "trace": list,
    "runtime": (str, type(None)),
    "weights": dict,
    "device": str,
}


def _check_types(p: Path, header: dict[str, Any]) -> None:
    """Every header field has the type samebits wrote: a damaged file is one line, not a crash."""
    for key, kind in _HEADER_TYPES.items():
        if key in header and not isinstance(header[key], kind):
            raise GoldenError(
                f"'{p}': the golden header's {key} is a {type(header[key]).__name__}; the file is damaged"
            )
    if header.get("device", "cpu") not in ("cpu", "cuda", "mps"):
        raise GoldenError(f"'{p}': the golden was recorded on {header['device']!r}, not a device samebits knows")
    if not all(isinstance(path, str) for path in header["output_paths"]):
        raise GoldenError(f"'{p}': the golden header's output_paths are not all strings; the file is damaged")
    profile = header["profile"]
    if (
        profile.get("name") not in ("deterministic", "none")
        or not isinstance(profile.get("seed"), int)
        or not isinstance(profile.get("threads"), (int, type(None)))
    ):
        raise GoldenError(
            f"'{p}': the golden header's profile is malformed ({json.dumps(profile)[:80]}); the file is damaged"
        )
    if not all(
        isinstance(m, dict) and {"name", "type", "call", "inputs", "outputs"} <= set(m) for m in header.get("trace", [])
    ):
        raise GoldenError(f"'{p}': the golden header's trace is malformed; the file is damaged")
    if header.get("digest", "sha256") not in ALGORITHMS:
        raise GoldenError(
            f"'{p}': the golden's digests are {header['digest']!r}; this samebits knows {', '.join(ALGORITHMS)}"
        )


def read_golden(path: str | Path) -> Golden:
    """Read and validate a golden file; every problem is one :class:`GoldenError` line."""
    from safetensors import safe_open

    p = Path(path)
    if p.is_dir():
        raise GoldenError(f"golden file '{p}' is a directory; give a .safetensors file written by `samebits record`")
    if not p.is_file():
        raise GoldenError(f"golden file '{p}' does not exist")
    try:
        with safe_open(str(p), framework="pt") as f:
            metadata = f.metadata() or {}
            # Copied into fresh (64-byte aligned) memory: tensors in the file sit at arbitrary
            # offsets, and MKL's GEMM gave other bits for the same values at a 4-byte offset.
            tensors = {name: f.get_tensor(name).clone() for name in f.keys()}
    except Exception as exc:
        raise GoldenError(
            f"'{p}' is not a readable safetensors file (corrupt or truncated): {first_line(exc)}"
        ) from None
    if HEADER_KEY not in metadata:
        raise GoldenError(
            f"'{p}' is a safetensors file but not a samebits golden (no '{HEADER_KEY}' metadata); record one with `samebits record`"
        )
    try:
        header = parse_json(metadata[HEADER_KEY])
    except BadJson as exc:
        raise GoldenError(f"'{p}': the samebits metadata is {exc}; the file is damaged") from None
    if not isinstance(header, dict):
        raise GoldenError(f"'{p}': the samebits metadata is not a JSON object")
    if header.get("encoding") != ENCODING:
        raise GoldenError(
            f"'{p}' claims encoding {header.get('encoding')!r}; samebits reads only {ENCODING!r} and never unpickles"
        )
    version = header.get("schema_version")
    if version != SCHEMA_VERSION:
        raise GoldenError(
            f"'{p}' has golden schema_version {version!r}; this samebits reads {SCHEMA_VERSION} (upgrade samebits)"
        )
    missing = [
        k for k in ("output_paths", "output_values", "digests", "inputs", "fingerprint", "profile") if k not in header
    ]
    if missing:
        raise GoldenError(f"'{p}': the golden header lacks {', '.join(missing)}")
    _check_types(p, header)
    absent = [
        path
        for path in header["output_paths"]
        if tensor_name("outputs", path) not in tensors and path not in header["output_values"]
    ]
    if absent:
        raise GoldenError(f"'{p}': outputs {', '.join(absent[:3])} are listed but not stored")
    return Golden(header, tensors)

"""Differences between two fingerprints, each with a note on what it likely does to bits."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samebits.fingerprint.capture import Fingerprint

# Longest matching prefix wins. (affects_bits, note)
_NOTES: list[tuple[str, bool, str]] = [
    ("samebits", False, "samebits itself changed; outputs do not depend on it"),
    ("python", False, "Python version: affects bits only through hash order and packages"),
    ("platform", True, "operating system or architecture: other libraries and kernels"),
    ("packages.torch", True, "torch version: kernels, fusion and defaults change between releases"),
    ("packages.numpy", True, "NumPy version: NumPy-side preprocessing and RNG streams may change"),
    ("packages.onnxruntime", True, "ONNX Runtime version: other kernels and graph optimisations"),
    ("packages.onnxruntime-gpu", True, "ONNX Runtime version: other kernels and graph optimisations"),
    *[(f"packages.nvidia-cublas{v}", True, "cuBLAS version: other GEMM kernels and heuristics") for v in ("", "-cu12")],
    *[(f"packages.nvidia-cudnn{v}", True, "cuDNN version: other convolution algorithms") for v in ("-cu12", "-cu13")],
    ("packages.tensorrt", True, "TensorRT version: other tactics, engines do not load across versions"),
    ("packages.torch-tensorrt", True, "Torch-TensorRT version: other conversions"),
    ("packages.triton", True, "Triton version: other code generation for the fixed-order kernels on CUDA"),
    ("packages", False, "package version"),
    ("torch_build.cuda", True, "CUDA version: cuBLAS/cuDNN kernels differ"),
    ("torch_build.cudnn", True, "cuDNN version: other convolution algorithms"),
    ("torch_build.mkl", True, "MKL version: other GEMM kernels"),
    ("torch_build.onednn", True, "oneDNN version: other convolution/matmul kernels"),
    ("torch_build.blas", True, "BLAS library: other GEMM kernels"),
    ("torch_build", True, "torch build: other kernels may be compiled in"),
    ("cpu.capability", True, "CPU capability: ATen, MKL and oneDNN pick other vectorised kernels"),
    ("cpu.isa", True, "CPU instruction sets: MKL/oneDNN pick other kernels (e.g. AVX512 vs AVX2)"),
    ("cpu.model", True, "CPU model: kernels are chosen per microarchitecture"),
    ("cpu.portable", True, "portable level: the baseline whose code paths MKL, oneDNN and ATen run"),
    ("cpu.vendor", False, "CPU vendor: counted through cpu.model, and on its own under a portable level"),
    ("cpu.count", False, "CPU count: matters only through the thread counts"),
    ("threads.intra_op", True, "intra-op threads: reductions split differently"),
    ("threads.inter_op", False, "inter-op threads: scheduling only"),
    ("devices", True, "GPU (kind, compute capability, SM count: a MIG slice or MPS changes it): other kernels"),
    ("flags", True, "determinism switch"),
    ("flags.torch.get_num_threads", True, "intra-op threads: reductions split differently"),
    ("flags.torch.get_num_interop_threads", False, "inter-op threads: scheduling only"),
    ("env.PYTHONHASHSEED", True, "hash seed: set and dict order of strings changes"),
    (
        "env.SAMEBITS_SEED",
        False,
        "samebits' seed for child processes: read by seed_everything(None), never by a kernel",
    ),
    ("env.OMP_NUM_THREADS", True, "thread count: reductions split differently"),
    ("env.MKL_NUM_THREADS", True, "thread count: reductions split differently"),
    ("env.MKL_CBWR", True, "MKL conditional numerical reproducibility mode"),
    ("env.ATEN_CPU_CAPABILITY", True, "forced CPU capability: other ATen kernels"),
    ("env.ONEDNN_MAX_CPU_ISA", True, "oneDNN's instruction sets capped: other convolution/matmul kernels"),
    ("env.MKL_ENABLE_INSTRUCTIONS", True, "MKL's instruction sets capped: other GEMM kernels"),
    ("env", True, "environment variable that changes kernels"),
    ("hash_randomization", True, "hash randomisation: set and dict order of strings changes per process"),
]


# What changes only code compiled by Triton: the fixed-order kernels and torch's own Triton kernels
# run on CUDA alone, so these count where either run lists a GPU (a CPU run's golden stays exact)
TRITON_ONLY = ("packages.triton", "env.TRITON_DEFAULT_FP_FUSION", "env.TRITON_FORCE_DISABLE_FP_FUSION")

# What a portable level pins: two fingerprints of one level may differ here and still run the
# same code paths (docs/portable.md says what it does not cover).
NEUTRALISED_BY_LEVEL = ("cpu.isa", "cpu.model", "env.MKL_ENABLE_INSTRUCTIONS")

# ... except the vendor: MKL applies its CNR branches other than COMPATIBLE (x86-64-v3's AVX2)
# only on Intel CPUs and runs its AUTO branch on others (oneMKL's developer guide), so GEMMs are
# pinned within one vendor, not across (measured: docs/portable.md).
LEVEL_ACROSS_VENDORS = (
    "CPU vendor under one portable level: MKL pins its AVX2 branch only on Intel CPUs (on others it runs "
    "its AUTO branch), so GEMMs (Linear, matmul, attention, LSTM) keep their bits within one vendor, not across"
)


def _vendor(fields: dict[str, Any]) -> str | None:
    """The CPU vendor of a flattened fingerprint; from its model name where it was written before
    samebits recorded the vendor."""
    from samebits.determinism.portable import cpu_vendor

    return fields.get("cpu.vendor") or cpu_vendor(str(fields.get("cpu.model") or ""))


def _counts(field: str, fields: dict[str, Any]) -> bool:
    """Whether ``field`` of this flattened fingerprint can change bits: its note says so, a level
    neutralises what it pins, and OpenBLAS's variables do not count where torch's BLAS is MKL
    (numpy's OpenBLAS reads them; torch's kernels never do)."""
    if field.startswith("env.OPENBLAS_"):
        return fields.get("torch_build.blas") != "mkl"
    if field == "cpu.vendor":
        return bool(fields.get("cpu.portable"))
    return note_for(field)[0] and not (fields.get("cpu.portable") and field in NEUTRALISED_BY_LEVEL)


@dataclasses.dataclass
class FieldChange:
    """One field that differs between two fingerprints."""

    field: str
    old: Any
    new: Any
    affects_bits: bool
    note: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def flatten_fields(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"cpu.isa": [...], "flags.torch.x": ...}``: dotted paths to leaves (lists are leaves). An
    empty dict has no leaves: ``env: {}`` and ``env: {"SAMEBITS_SEED": "5"}`` differ only in
    ``env.SAMEBITS_SEED``, not also in an ``env`` field that one side lacks."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_fields(value, path + "."))
        else:
            out[path] = value
    return out


def note_for(field: str) -> tuple[bool, str]:
    best = ("", True, "changed")
    for prefix, affects, note in _NOTES:
        if (field == prefix or field.startswith(prefix + ".")) and len(prefix) > len(best[0]):
            best = (prefix, affects, note)
    return best[1], best[2]


def bit_relevant(data: dict[str, Any]) -> dict[str, Any]:
    """The fields of a fingerprint (as a dict) that can change bits, by the notes above: the one
    definition that verify's policy and the Predictor's cache key share."""
    fields = flatten_fields(data)
    out = {field: value for field, value in fields.items() if field != "schema_version" and _counts(field, fields)}
    if fields.get("cpu.portable"):
        out["cpu.vendor"] = _vendor(fields)
    return out


def bit_relevant_digest(data: dict[str, Any], without: tuple[str, ...] = ()) -> str:
    """sha256 of :func:`bit_relevant`: equal for two fingerprints exactly when no field that can
    change bits differs (the Predictor's cache key, a predict manifest, Ray replicas); ``without``
    leaves fields out by name."""
    fields = {k: v for k, v in bit_relevant(data).items() if k not in without}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


# The calibration's key leaves the hash seed out: it changes outputs only through Python-level
# set and dict order (which the process axis measures on its own), never which batch sizes keep
# a row's bits; so processes started with other hash seeds read one calibration.
CALIBRATION_WITHOUT = ("env.PYTHONHASHSEED",)


def diff(a: Fingerprint, b: Fingerprint) -> list[FieldChange]:
    """Fields of fingerprint ``a`` that differ in ``b`` (``None`` where one side lacks the field)."""
    fa, fb = flatten_fields(a.to_dict()), flatten_fields(b.to_dict())
    fa.pop("schema_version", None)
    fb.pop("schema_version", None)
    level = fa.get("cpu.portable")
    pinned = level is not None and level == fb.get("cpu.portable")
    fa["cpu.vendor"], fb["cpu.vendor"] = _vendor(fa), _vendor(fb)  # derived where not recorded
    changes = []
    for field in sorted(set(fa) | set(fb)):
        old, new = fa.get(field), fb.get(field)
        if old != new:
            affects, note = note_for(field)
            if field == "cpu.isa":
                lost, gained = sorted(set(old or []) - set(new or [])), sorted(set(new or []) - set(old or []))
                note += f" (lost {', '.join(lost) or 'none'}; gained {', '.join(gained) or 'none'})"
            if pinned and field in NEUTRALISED_BY_LEVEL and affects:
                affects, note = False, f"{note}; neutralised: both run portable level {level}"
            if field.startswith("env.OPENBLAS_"):
                affects = _counts(field, fa) or _counts(field, fb)
                note += "" if affects else "; torch's BLAS is MKL, which never reads it"
            if field in TRITON_ONLY and affects and not (fa.get("devices") or fb.get("devices")):
                affects, note = False, f"{note}; neither run lists a GPU, where alone Triton's code runs"
            if field == "cpu.vendor" and pinned:
                affects, note = True, f"{LEVEL_ACROSS_VENDORS} (level {level})"
            changes.append(FieldChange(field, old, new, affects, note))
    return changes

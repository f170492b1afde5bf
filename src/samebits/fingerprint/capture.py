"""``Fingerprint``: everything about this machine and process that can change a model's bits."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import platform
import types
import re
import sys
from typing import Any

SCHEMA_VERSION = 1

# Environment variables that change bits or kernel choice. Nothing else from the environment is kept.
BIT_ENV_VARS = (
    "PYTHONHASHSEED",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "TORCH_CUDNN_V8_API_ENABLED",
    "TORCH_DETERMINISTIC",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "KMP_DETERMINISTIC_REDUCTION",
    "TORCHINDUCTOR_FREEZING",
    "TORCHINDUCTOR_DETERMINISTIC",
    "TORCH_BLAS_PREFER_CUBLASLT",
    "CUBLASLT_WORKSPACE_SIZE",
    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
    "TORCH_DISABLE_NATIVE_JIT",  # torch >= 2.13 on CUDA: some eager ops run on Triton kernels unless set
    "TRITON_INTERPRET",  # Triton kernels (batch_invariant's on CUDA) run on the host instead
    "TRITON_DEFAULT_FP_FUSION",  # Triton's FMA fusion where a kernel does not ask (torch's own Triton kernels)
    "TRITON_FORCE_DISABLE_FP_FUSION",  # no FMA fusion in any Triton kernel, samebits' fixed-order ones included
    "SAMEBITS_SEED",
)

# CPU features that decide which kernels MKL, oneDNN and ATen pick.
ISA_FLAGS = (
    "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512dq", "avx512bw",
    "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "asimd", "asimdhp", "sve", "sve2", "bf16", "i8mm",
)  # fmt: skip

# the CUDA libraries ship as wheels: their versions, read without starting CUDA
OPTIONAL_PACKAGES = (
    "onnxruntime",
    "onnxruntime-gpu",
    "onnx",
    "safetensors",
    "nvidia-cublas-cu12",
    "nvidia-cublas",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "tensorrt",
    "torch-tensorrt",
    "triton",  # compiles the fixed-order kernels (and torch's own Triton kernels): its codegen is in the bits
)


@dataclasses.dataclass
class Fingerprint:
    """A stable, JSON-serialisable description of what can change bits. Holds nothing private."""

    schema_version: int
    samebits: str
    python: str
    platform: dict[str, str]
    packages: dict[str, str]
    torch_build: dict[str, Any]
    cpu: dict[str, Any]
    threads: dict[str, int]
    devices: list[dict[str, Any]]
    flags: dict[str, Any]
    env: dict[str, str]
    hash_randomization: bool

    @classmethod
    def capture(cls, *, devices: bool | None = None) -> Fingerprint:
        """Describe this process. CUDA devices are listed only when CUDA is already initialised,
        or when ``devices=True`` (which initialises CUDA to read their properties)."""
        import numpy
        import torch

        from samebits._version import __version__
        from samebits.determinism.catalog import snapshot

        packages = {"torch": torch.__version__, "numpy": numpy.__version__}
        for name in OPTIONAL_PACKAGES:
            try:
                packages[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                pass
        return cls(
            schema_version=SCHEMA_VERSION,
            samebits=__version__,
            python=platform.python_version(),
            platform={
                "system": platform.system(),
                "machine": platform.machine(),
                "implementation": platform.python_implementation(),
            },
            packages=packages,
            torch_build=_torch_build(torch),
            cpu=_cpu(torch),
            threads={"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()},
            devices=_devices(torch, devices),
            flags={name: _plain(value) for name, value in snapshot().items()},
            env={var: os.environ[var] for var in BIT_ENV_VARS if var in os.environ},
            hash_randomization=bool(sys.flags.hash_randomization),
        )

    @classmethod
    def for_device(cls, device: str) -> Fingerprint:
        """The fingerprint of a run on ``device``, alike whenever it is taken: on CUDA every GPU
        listed (CUDA started to read them), elsewhere none, whether CUDA happens to run already
        or not. ``record`` took it after the model was on the GPU and ``verify`` before loading
        it, so a golden recorded on CUDA never matched its own machine and was compared with
        tolerances instead of bits."""
        fingerprint = cls.capture(devices=device.startswith("cuda"))
        if not device.startswith("cuda"):
            fingerprint.devices = []
        return fingerprint

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fingerprint:
        """Rebuild a fingerprint from :meth:`to_dict`; a newer schema or missing fields raise ``ValueError``."""
        if not isinstance(data, dict) or "schema_version" not in data:
            raise ValueError("not a samebits fingerprint (no schema_version)")
        if not isinstance(data["schema_version"], int) or data["schema_version"] > SCHEMA_VERSION:
            raise ValueError(
                f"fingerprint schema_version {data['schema_version']!r} is newer than this samebits reads ({SCHEMA_VERSION}); upgrade samebits"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in data]
        if missing:
            raise ValueError(f"fingerprint lacks the fields {', '.join(missing)}")
        return cls(**{n: data[n] for n in names})

    @classmethod
    def from_json(cls, text: str) -> Fingerprint:
        return cls.from_dict(json.loads(text))

    def diff(self, other: Fingerprint) -> list[Any]:
        """Every field that differs from ``other``, each with a note on its likely effect on bits."""
        from samebits.fingerprint.diff import diff

        return diff(self, other)


def _plain(value: object) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return repr(value)


def _torch_build(torch: types.ModuleType) -> dict[str, Any]:
    config = torch.__config__.show()
    info: dict[str, Any] = {
        "git_version": getattr(torch.version, "git_version", None),
        "debug": bool(getattr(torch.version, "debug", False)),
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "blas": _match(r"BLAS_INFO=(\w+)", config),
        "mkl": _match(r"Math Kernel Library Version ([\w.\-]+)", config),
        "onednn": _match(r"MKL-DNN v([\w.]+)", config),
        "openmp": _match(r"OpenMP (\d+)", config),
        "parallel_backend": _match(r"ATen parallel backend: (\w+)", torch.__config__.parallel_info()),
    }
    return info


def _match(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _cpu(torch: types.ModuleType) -> dict[str, Any]:
    from samebits.determinism.portable import active_level, cpu_vendor, read_cpuinfo

    model, flags = read_cpuinfo()
    return {
        "model": model or platform.processor() or None,
        "vendor": cpu_vendor() or cpu_vendor(model or ""),
        "isa": sorted(f for f in ISA_FLAGS if f in flags),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "count": os.cpu_count(),
        "portable": active_level(),  # the baseline MKL, oneDNN and ATen were pinned to at start
    }


def _devices(torch: types.ModuleType, devices: bool | None) -> list[dict[str, Any]]:
    if not (torch.version.cuda or getattr(torch.version, "hip", None)):
        return []
    if not (devices or torch.cuda.is_initialized()) or not torch.cuda.is_available():
        return []
    return [_device(torch.cuda.get_device_properties(i)) for i in range(torch.cuda.device_count())]


def _device(p: Any) -> dict[str, Any]:
    """A CUDA device as bits see it: cuBLAS ties its results to the architecture and the SM
    count (MIG and MPS change the latter)."""
    return {
        "name": p.name,
        "capability": f"{p.major}.{p.minor}",
        "sm_count": getattr(p, "multi_processor_count", None),
        "memory_gib": round(p.total_memory / 2**30, 1),
    }


def device_identity(device: str) -> str:
    """What a cached calibration or artifact measured on ``device`` is valid for: ``cpu``, or a
    CUDA device's name, compute capability and SM count (another GPU kind, or a MIG slice, can
    give other bits and load other engines)."""
    import torch

    if not device.startswith("cuda"):
        return device
    index = torch.device(device).index
    p = torch.cuda.get_device_properties(torch.cuda.current_device() if index is None else index)
    d = _device(p)
    return f"{d['name']} sm_{p.major}{p.minor} x{d['sm_count']}"


def bit_relevant_changes(recorded: dict[str, Any], current: Fingerprint) -> tuple[list[Any], str | None]:
    """The differences (``FieldChange``s, all of them) between a recorded fingerprint and
    ``current``, and why the recorded one cannot be read, if it cannot."""
    try:
        old = Fingerprint.from_dict(recorded)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return [], f"the recorded fingerprint cannot be read ({exc})"
    return old.diff(current), None

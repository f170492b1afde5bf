"""Every global switch in torch that changes bits, feature-detected on the installed torch."""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from samebits.determinism.inductor_follows import set_deterministic_algorithms
from samebits.determinism.switches import Switch, is_missing, read_switch

B = torch.backends


def _no_cuda() -> str | None:
    return None if torch.version.cuda or torch.version.hip else "this torch build has no CUDA: no effect here"


def _no_cudnn() -> str | None:
    return None if B.cudnn.is_available() else "this torch build has no cuDNN: no effect here"


def _no_mkldnn() -> str | None:
    return None if B.mkldnn.is_available() else "this torch build has no oneDNN: no effect here"


def attr(owner: Callable[[], Any], attribute: str, name: str, inert: Callable[[], str | None] = lambda: None) -> Switch:
    """A switch that is a plain attribute of a torch object (``owner()`` is looked up lazily)."""

    return Switch(name, lambda: getattr(owner(), attribute), lambda value: setattr(owner(), attribute, value), inert)


def getset(
    get: Callable[[], Any] | None,
    set_: Callable[[Any], None] | None,
    name: str,
    inert: Callable[[], str | None] = lambda: None,
) -> Switch:
    """A switch read and written through a getter/setter pair (``None`` where torch lacks it)."""

    def read() -> Any:
        if get is None or set_ is None:
            raise AttributeError(name)
        return get()

    return Switch(name, read, lambda value: set_(value), inert)  # type: ignore[misc]


def _fn(owner: Any, name: str) -> Callable[..., Any] | None:
    return getattr(owner, name, None)


def deterministic_algorithms() -> Switch:
    def read() -> tuple[bool, bool]:
        return (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())

    def write(value: tuple[bool, bool]) -> None:
        set_deterministic_algorithms(value[0], warn_only=value[1])

    return Switch("torch.use_deterministic_algorithms (enabled, warn_only)", read, write)


def fill_uninitialized_memory() -> Switch:
    """Read and written as its base value (determinism/fill.py): a Predictor's forward may turn the
    flag off for itself meanwhile, which a snapshot must neither record nor restore."""
    from samebits.determinism import fill

    return Switch("torch.utils.deterministic.fill_uninitialized_memory", fill.base_value, fill.set_base)


def cudnn_flags() -> list[Switch]:
    return [
        attr(lambda: B.cudnn, "deterministic", "torch.backends.cudnn.deterministic", _no_cudnn),
        attr(lambda: B.cudnn, "benchmark", "torch.backends.cudnn.benchmark", _no_cudnn),
    ]


def mkldnn_deterministic() -> Switch:
    return attr(lambda: B.mkldnn, "deterministic", "torch.backends.mkldnn.deterministic", _no_mkldnn)


def reduced_precision_reductions() -> list[Switch]:
    C = torch._C
    matmul = lambda: B.cuda.matmul  # noqa: E731
    return [
        attr(
            matmul,
            "allow_fp16_reduced_precision_reduction",
            "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
            _no_cuda,
        ),
        attr(
            matmul,
            "allow_bf16_reduced_precision_reduction",
            "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
            _no_cuda,
        ),
        attr(matmul, "allow_fp16_accumulation", "torch.backends.cuda.matmul.allow_fp16_accumulation", _no_cuda),
        getset(
            _fn(B.cuda, "fp16_bf16_reduction_math_sdp_allowed"),
            _fn(B.cuda, "allow_fp16_bf16_reduction_math_sdp"),
            "torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed",
        ),
        getset(
            _fn(C, "_get_cpu_allow_fp16_reduced_precision_reduction"),
            _fn(C, "_set_cpu_allow_fp16_reduced_precision_reduction"),
            "torch._C._get_cpu_allow_fp16_reduced_precision_reduction",
        ),
    ]


def sdpa_backends(math_only: bool) -> list[tuple[Switch, bool]]:
    """SDPA backend choice: with ``math_only`` every fused kernel is off and the math one on."""
    out = []
    for kind in ("flash", "mem_efficient", "cudnn", "math"):
        sw = getset(
            _fn(B.cuda, f"{kind}_sdp_enabled"),
            _fn(B.cuda, f"enable_{kind}_sdp"),
            f"torch.backends.cuda.{kind}_sdp_enabled",
        )
        out.append((sw, kind == "math" if math_only else True))
    return out


def intra_op_threads() -> Switch:
    return getset(torch.get_num_threads, torch.set_num_threads, "torch.get_num_threads")


def torch_checks_cublas_workspace() -> bool:
    """Whether this torch raises without ``CUBLAS_WORKSPACE_CONFIG`` in deterministic mode.

    torch removed that check (pytorch#161749) together with its mention in the docstring of
    ``use_deterministic_algorithms``; the docstring is the feature we can detect without CUDA.
    """
    return bool(torch.version.cuda) and "CUBLAS_WORKSPACE_CONFIG" in (torch.use_deterministic_algorithms.__doc__ or "")


def cuda_initialized() -> bool:
    return bool(torch.version.cuda or torch.version.hip) and torch.cuda.is_initialized()


def env_switch(var: str) -> Switch:
    """An environment variable as a switch (``None`` means unset)."""

    def write(value: str | None) -> None:
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value

    return Switch(var, lambda: os.environ.get(var), write)


def cublas_workspace() -> Switch:
    sw = env_switch("CUBLAS_WORKSPACE_CONFIG")
    sw.one_way = lambda: (
        "one-way: CUDA is running, so it stays set; torch checks it at every cuBLAS call, but a cuBLAS call "
        "made before fixed the workspace size (set it before the process starts: `samebits run -- ...`)"
        if cuda_initialized()
        else None
    )
    return sw


def all_flags() -> list[Switch]:
    """Every switch but float32 precision (see :mod:`precision`), for snapshots and fingerprints."""
    switches = [deterministic_algorithms(), fill_uninitialized_memory(), *cudnn_flags(), mkldnn_deterministic()]
    switches += reduced_precision_reductions()
    switches += [sw for sw, _ in sdpa_backends(False)]
    switches += [
        intra_op_threads(),
        getset(torch.get_num_interop_threads, torch.set_num_interop_threads, "torch.get_num_interop_threads"),
    ]
    return switches


def snapshot() -> dict[str, Any]:
    """The value of every switch torch has (a read that raises is recorded as such)."""
    from samebits.determinism.precision import views

    values = views()
    for sw in all_flags():
        value = read_switch(sw)
        if not is_missing(value):
            values[sw.name] = value
    return values

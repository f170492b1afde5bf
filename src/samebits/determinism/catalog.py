"""Every global switch in torch that changes bits, feature-detected on the installed torch."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

import torch

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


def getset(get: Callable[[], Any] | None, set_: Callable[[Any], None] | None, name: str, inert: Callable[[], str | None] = lambda: None) -> Switch:
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
        torch.use_deterministic_algorithms(value[0], warn_only=value[1])

    return Switch("torch.use_deterministic_algorithms (enabled, warn_only)", read, write)


def fill_uninitialized_memory() -> Switch:
    import torch.utils.deterministic as det

    return attr(lambda: det, "fill_uninitialized_memory", "torch.utils.deterministic.fill_uninitialized_memory")


def cudnn_flags() -> list[Switch]:
    return [
        attr(lambda: B.cudnn, "deterministic", "torch.backends.cudnn.deterministic", _no_cudnn),
        attr(lambda: B.cudnn, "benchmark", "torch.backends.cudnn.benchmark", _no_cudnn),
    ]


def mkldnn_deterministic() -> Switch:
    return attr(lambda: B.mkldnn, "deterministic", "torch.backends.mkldnn.deterministic", _no_mkldnn)


@dataclasses.dataclass(frozen=True)
class TF32State:
    """TF32 of one library in both API families: the legacy bool (or why it cannot be read) and
    the newer per-op ``fp32_precision`` values (empty where this torch lacks that API)."""

    legacy: Any
    precision: tuple[tuple[str, str], ...]

    def __repr__(self) -> str:
        new = ", ".join(f"{op}={value}" for op, value in self.precision)
        return f"allow_tf32={self.legacy!r}" + (f"; fp32_precision {new}" if new else "")


def tf32_switch(prefix: str, owner: Callable[[], Any], ops: tuple[str, ...], inert: Callable[[], str | None]) -> Switch:
    """TF32 for one library (cuBLAS or cuDNN), written through the API family already in use.

    torch has a legacy API (``allow_tf32``) and a newer one (``fp32_precision``) that raise
    when mixed. Where the legacy flag reads cleanly, the legacy setter is used (it keeps both
    views consistent); where reading it raises, the user has used the new API, so the per-op
    ``fp32_precision`` values are written instead. Restoring writes the legacy value back
    first and then every per-op value exactly, which leaves both views as they were.
    """
    op_owner = (lambda op: owner()) if ops == ("",) else (lambda op: getattr(owner(), op))

    def read() -> TF32State:
        legacy = read_switch(Switch(prefix, lambda: owner().allow_tf32, lambda v: None))
        if is_missing(legacy):
            raise AttributeError("allow_tf32")
        precision = []
        for op in ops:
            value = read_switch(Switch(op, lambda op=op: op_owner(op).fp32_precision, lambda v: None))
            if not is_missing(value):
                precision.append((op or "matmul", value))
        return TF32State(legacy, tuple(precision))

    def write(allow: bool) -> None:
        state = read()
        if isinstance(state.legacy, bool) or not state.precision:
            owner().allow_tf32 = allow
        else:
            for op in ops:
                op_owner(op).fp32_precision = "tf32" if allow else "ieee"

    def matches(state: TF32State, allow: bool) -> bool:
        if isinstance(state.legacy, bool):
            return state.legacy == allow
        return all(value == ("tf32" if allow else "ieee") for _, value in state.precision)

    def restore(state: TF32State) -> None:
        if isinstance(state.legacy, bool):
            owner().allow_tf32 = state.legacy
        for op, value in state.precision:
            op_owner("" if op == "matmul" else op).fp32_precision = value

    return Switch(f"{prefix} TF32", read, write, inert, matches=matches, restore=restore)


def tf32_switches() -> list[Switch]:
    """TF32 switches for cuBLAS matmuls and cuDNN convolutions/RNNs."""
    return [
        tf32_switch("torch.backends.cuda.matmul", lambda: B.cuda.matmul, ("",), _no_cuda),
        tf32_switch("torch.backends.cudnn", lambda: B.cudnn, ("conv", "rnn"), _no_cudnn),
    ]


def mkldnn_precision() -> list[Switch]:
    """oneDNN's per-op fp32 precision (``bf16``/``tf32`` change bits on CPUs that support them)."""
    return [
        attr(lambda op=op: getattr(B.mkldnn, op), "fp32_precision", f"torch.backends.mkldnn.{op}.fp32_precision", _no_mkldnn)
        for op in ("matmul", "conv", "rnn")
    ]


def float32_matmul_precision() -> Switch:
    return getset(torch.get_float32_matmul_precision, torch.set_float32_matmul_precision, "torch.get_float32_matmul_precision")


def reduced_precision_reductions() -> list[Switch]:
    C = torch._C
    matmul = lambda: B.cuda.matmul  # noqa: E731
    return [
        attr(matmul, "allow_fp16_reduced_precision_reduction", "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction", _no_cuda),
        attr(matmul, "allow_bf16_reduced_precision_reduction", "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction", _no_cuda),
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
        sw = getset(_fn(B.cuda, f"{kind}_sdp_enabled"), _fn(B.cuda, f"enable_{kind}_sdp"), f"torch.backends.cuda.{kind}_sdp_enabled")
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
    sw.one_way = lambda: "one-way: cuBLAS has read it (CUDA is initialised), so it stays set" if cuda_initialized() else None
    return sw


def all_flags() -> list[Switch]:
    """Every switch, for snapshots and the environment fingerprint (TF32 in both API families)."""
    switches = [deterministic_algorithms(), fill_uninitialized_memory(), *cudnn_flags(), mkldnn_deterministic()]
    switches += tf32_switches()
    switches += [attr(lambda: B, "fp32_precision", "torch.backends.fp32_precision")]
    switches += [attr(lambda: B.cudnn, "fp32_precision", "torch.backends.cudnn.fp32_precision")]
    switches += [attr(lambda: B.mkldnn, "fp32_precision", "torch.backends.mkldnn.fp32_precision"), *mkldnn_precision()]
    switches += [float32_matmul_precision(), *reduced_precision_reductions()]
    switches += [sw for sw, _ in sdpa_backends(False)]
    switches += [intra_op_threads(), getset(torch.get_num_interop_threads, torch.set_num_interop_threads, "torch.get_num_interop_threads")]
    return switches


def snapshot() -> dict[str, Any]:
    """The value of every switch torch has (a read that raises is recorded as such)."""
    values = {}
    for sw in all_flags():
        value = read_switch(sw)
        if not is_missing(value):
            values[sw.name] = value
    return values

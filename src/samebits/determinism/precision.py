"""Float32 precision (TF32, bf16) for cuBLAS, cuDNN and oneDNN, across torch's two API families.

torch keeps hidden legacy storage (the matmul precision enum and cuDNN's ``allow_tf32`` bool)
beside the newer per-backend, per-op ``fp32_precision`` values, and raises when a legacy
getter finds the two disagreeing ("mix of the legacy and new APIs"). Every observable view is
read into an :class:`Fp32State`. Setting writes the legacy storage first (which keeps the views
consistent) and then every per-op value explicitly, so that an inherited ``"none"`` cannot
bring TF32 back. Restoring searches for the legacy storage that reproduces every view the user
had, then writes every per-op value exactly: the state after exit reads as it did before.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import torch

from samebits.determinism.switches import Switch, is_missing, read_switch

B: Any = torch.backends  # the holders differ between torch versions: feature-detected below

# (name, owner) of each fp32_precision holder, parents before children (a parent's setter
# propagates to its children, so restoring parents first and leaves last is exact).
_HOLDERS = (
    ("generic", lambda: B),
    ("cuda", lambda: B.cudnn),  # torch.backends.cudnn.fp32_precision is the "cuda/all" holder
    ("cuda.matmul", lambda: B.cuda.matmul),
    ("cudnn.conv", lambda: B.cudnn.conv),
    ("cudnn.rnn", lambda: B.cudnn.rnn),
    ("mkldnn", lambda: B.mkldnn),
    ("mkldnn.matmul", lambda: B.mkldnn.matmul),
    ("mkldnn.conv", lambda: B.mkldnn.conv),
    ("mkldnn.rnn", lambda: B.mkldnn.rnn),
)
_LEAVES = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")
_OWNERS = dict(_HOLDERS)
FP32_SWITCH = "float32 precision (TF32/bf16 in cuBLAS, cuDNN, oneDNN)"


@dataclasses.dataclass(frozen=True)
class Fp32State:
    """Every observable view of float32 precision (a view that raises reads ``"<error: ...>"``)."""

    matmul_precision: Any  # torch.get_float32_matmul_precision()
    cublas_allow_tf32: Any  # torch.backends.cuda.matmul.allow_tf32
    cudnn_allow_tf32: Any  # torch.backends.cudnn.allow_tf32
    precision: tuple[tuple[str, str], ...]  # fp32_precision of every holder this torch has

    def __repr__(self) -> str:
        new = ", ".join(f"{name}={value}" for name, value in self.precision)
        return (
            f"matmul_precision={self.matmul_precision}, cublas.allow_tf32={self.cublas_allow_tf32}, "
            f"cudnn.allow_tf32={self.cudnn_allow_tf32}" + (f"; fp32_precision {new}" if new else "")
        )


def _view(getter: Any) -> Any:
    return read_switch(Switch("", getter, lambda value: None))


def read_state() -> Fp32State:
    precision = []
    for name, owner in _HOLDERS:
        value = _view(lambda owner=owner: owner().fp32_precision)
        if not is_missing(value):
            precision.append((name, value))
    return Fp32State(
        matmul_precision=_view(torch.get_float32_matmul_precision),
        cublas_allow_tf32=_view(lambda: B.cuda.matmul.allow_tf32),
        cudnn_allow_tf32=_view(lambda: B.cudnn.allow_tf32),
        precision=tuple(precision),
    )


def _write_legacy(matmul_precision: str, cudnn_tf32: bool) -> None:
    torch.set_float32_matmul_precision(matmul_precision)
    B.cudnn.allow_tf32 = cudnn_tf32


def _write_precision(values: tuple[tuple[str, str], ...]) -> None:
    for name, value in values:
        _OWNERS[name]().fp32_precision = value


def apply(allow_reduced: bool) -> None:
    """``allow_reduced=False``: IEEE float32 everywhere; ``True``: TF32 allowed (cuBLAS, cuDNN, oneDNN)."""
    _write_legacy("high" if allow_reduced else "highest", allow_reduced)
    have = {name for name, _ in read_state().precision}
    _write_precision(tuple((leaf, "tf32" if allow_reduced else "ieee") for leaf in _LEAVES if leaf in have))


def matches(state: Fp32State, allow_reduced: bool) -> bool:
    leaf = "tf32" if allow_reduced else "ieee"
    legacy_ok = (
        state.matmul_precision == ("high" if allow_reduced else "highest") and state.cudnn_allow_tf32 is allow_reduced
    )
    return legacy_ok and all(value == leaf for name, value in state.precision if name in _LEAVES)


def restore(state: Fp32State) -> None:
    """Put back ``state``: try the legacy storage values that could have produced it, known ones first."""
    matmul = (
        [state.matmul_precision]
        if isinstance(state.matmul_precision, str) and not state.matmul_precision.startswith("<")
        else []
    )
    matmul += [p for p in ("highest", "high", "medium") if p not in matmul]
    cudnn = [state.cudnn_allow_tf32] if isinstance(state.cudnn_allow_tf32, bool) else []
    cudnn += [b for b in (True, False) if b not in cudnn]
    for matmul_precision, cudnn_tf32 in itertools.product(matmul, cudnn):
        _write_legacy(matmul_precision, cudnn_tf32)
        _write_precision(state.precision)
        if read_state() == state:
            return
    raise RuntimeError(f"could not restore float32 precision to {state!r}")


def tf32_matmuls_allowed() -> bool:
    """Whether torch's CUDA matmuls may use TF32 now (samebits' profiles say no), read from
    ``fp32_precision`` where this torch has it, else the legacy matmul precision: what a kernel
    outside cuBLAS (Triton's ``tl.dot``, ONNX Runtime's CUDA provider) should follow."""
    value = _view(lambda: B.cuda.matmul.fp32_precision)
    if value in ("tf32", "ieee"):
        return bool(value == "tf32")
    return bool(torch.get_float32_matmul_precision() != "highest")


def tf32_convolutions_allowed() -> bool:
    """Whether torch's cuDNN convolutions may use TF32 now, read from ``fp32_precision`` where
    this torch has it, else the legacy ``cudnn.allow_tf32``."""
    value = _view(lambda: B.cudnn.conv.fp32_precision)
    if value in ("tf32", "ieee"):
        return bool(value == "tf32")
    return bool(_view(lambda: B.cudnn.allow_tf32) is True)


def fp32_precision_switch() -> Switch:
    """The float32 precision family as one switch (target: whether TF32/bf16 may be used)."""

    return Switch(FP32_SWITCH, read_state, apply, matches=matches, restore=restore)


def views() -> dict[str, Any]:
    """Each view as its own named value, for snapshots and fingerprints."""
    state = read_state()
    out = {
        "torch.get_float32_matmul_precision": state.matmul_precision,
        "torch.backends.cuda.matmul.allow_tf32": state.cublas_allow_tf32,
        "torch.backends.cudnn.allow_tf32": state.cudnn_allow_tf32,
    }
    out.update(
        {
            f"torch.backends.{'' if name == 'generic' else name + '.'}fp32_precision": value
            for name, value in state.precision
        }
    )
    return out

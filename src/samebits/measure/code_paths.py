"""The three libraries whose code paths depend on the CPU (MKL's GEMMs, oneDNN's convolutions,
ATen's vectorised kernels): which of them a forward runs, and a probe per library that shows
whether variables set before start (a simulated CPU: ``MKL_ENABLE_INSTRUCTIONS``,
``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``) reach it on this machine. They need not: MKL
honours its instruction cap only on Intel CPUs, and a cap at this CPU's own best changes nothing.
A simulated CPU whose variables changed no probe of a library the model runs was not simulated,
whatever its outputs say (the machine axis)."""

from __future__ import annotations


import torch

from samebits.measure.ops import NO_ARITHMETIC, UNINITIALISED, op_names
from samebits.models.inputs import Model, ModelInputs

LIBRARIES = ("MKL", "oneDNN", "ATen")

# aten ops (overload packets) that run on MKL's GEMMs (attention's products are cpublas GEMMs)
_GEMM = frozenset(
    {
        *("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot"),
        *("_lstm", "lstm", "gru", "rnn_tanh", "scaled_dot_product_attention"),
        *("_scaled_dot_product_flash_attention_for_cpu", "_native_multi_head_attention"),
        "_transformer_encoder_layer_fwd",
    }
)
# ops whose results no kernel can round otherwise: no arithmetic, or exact (comparisons, relu)
_EXACT = NO_ARITHMETIC | UNINITIALISED | {"eq", "ne", "lt", "gt", "le", "ge", "where", "masked_fill"}
_EXACT |= {"max", "min", "argmax", "relu", "relu_", "dropout", "native_dropout"}


def library_of(op: str) -> str | None:
    """The library whose CPU-dependent kernel runs aten op ``op`` (its overload packet's name), or
    ``None`` for ops whose results no kernel rounds otherwise."""
    if op in _GEMM:
        return "MKL"
    if "conv" in op or "mkldnn" in op:
        return "oneDNN"
    return None if op in _EXACT else "ATen"


def libraries_used(model: Model, inputs: ModelInputs) -> list[str]:
    """The libraries of :data:`LIBRARIES` that one forward of ``model`` runs; every one where the
    ops cannot be seen (no dispatch modes: the model's code may reach any of them)."""
    names = op_names(model, inputs)
    if names is None:
        return list(LIBRARIES)
    found = {library_of(n) for n in names}
    return [lib for lib in LIBRARIES if lib in found]


def _values(n: int, salt: int) -> torch.Tensor:
    """``n`` floats in [-0.5, 0.5) made from integers alone: the same bits on every CPU (an RNG's
    normal draws are themselves vectorised code that a capped capability changes)."""
    i = torch.arange(n, dtype=torch.int64)
    return ((i * 2654435761 + salt * 40503) % 65536).to(torch.float32) / 65536 - 0.5


def probe() -> dict[str, str]:
    """A digest per library of one op whose kernels round differently at every instruction set
    (a GEMM with a long reduction, a 3x3 convolution, exp and tanh): where a simulated CPU's
    variables reach a library, its digest changes."""
    from samebits.tensors.digest import digest

    with torch.inference_mode():
        a, b = _values(64 * 512, 1).view(64, 512), _values(512 * 64, 2).view(512, 64)
        image, weight = _values(2 * 16 * 20 * 20, 3).view(2, 16, 20, 20), _values(32 * 16 * 9, 4).view(32, 16, 3, 3)
        x = _values(4096, 5) * 8
        return {
            "MKL": digest(torch.mm(a, b)),
            "oneDNN": digest(torch.nn.functional.conv2d(image, weight)),
            "ATen": digest(torch.stack([x.exp(), x.tanh(), torch.nn.functional.gelu(x)])),
        }


def unreached(native: dict[str, str], simulated: dict[str, str], used: list[str]) -> list[str]:
    """The libraries in ``used`` whose probe the simulated CPU's variables left unchanged."""
    return [lib for lib in used if lib in native and native.get(lib) == simulated.get(lib)]

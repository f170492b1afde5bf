"""The CUDA memory paths, checked on the CPU with torch.cuda's memory API replaced (B5): the
budget comes from the device's free memory, statistics are read on cuda:N, a cuBLAS or cuDNN
allocation failure counts as out of memory, and the cache is emptied once the failed forward's
frames are gone."""

from __future__ import annotations

import sys

import pytest
import torch

from samebits.measure import memory
from samebits.models.inputs import ModelInputs


def test_the_default_budget_on_a_gpu_is_a_quarter_of_its_free_memory(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: asked.append(d) or (8 * 2**30, 80 * 2**30))
    assert memory.default_memory_cap_mb("cuda:1") == 2048.0 and asked == [torch.device("cuda:1")]
    assert memory.default_memory_cap_mb("cpu") <= 2048.0 and len(asked) == 1  # RAM for the CPU


def test_peak_statistics_are_read_on_the_device_asked_for(monkeypatch):
    seen = []
    for name in ("reset_peak_memory_stats", "memory_allocated", "max_memory_allocated"):
        monkeypatch.setattr(torch.cuda, name, lambda d=None, name=name: seen.append((name, d)) or 0)
    memory.peak_of(lambda: None, "cuda:1")
    assert {d for _, d in seen} == {torch.device("cuda:1")} and len(seen) == 3


class FailsFrom(torch.nn.Module):
    """Raises a cuBLAS allocation failure (a plain RuntimeError) from ``rows`` rows on."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows

    def forward(self, x):
        if x.shape[0] >= self.rows:
            raise RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
        return x * 2


def test_an_allocation_failure_ends_the_search_and_the_cache_is_emptied_outside_the_except(monkeypatch):
    emptied = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(sys.exc_info()[0]))
    monkeypatch.setattr(memory, "peak_of", lambda run, device: (run(), 1.0)[1])
    best, measured = memory.largest_batch(
        FailsFrom(8), lambda n: ModelInputs((torch.ones(n, 4),), {}), budget_mb=100, device="cuda"
    )
    assert best == 4 and sorted(measured) == [1, 2, 4]
    assert emptied == [None]  # once, with no exception (and its frames) alive

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise ValueError("the model's own bug")

    with pytest.raises(ValueError):  # anything else is the model's error, not a size limit
        memory.largest_batch(Broken(), lambda n: ModelInputs((torch.ones(n, 4),), {}), budget_mb=100, device="cuda")


def test_the_fingerprint_and_cache_keys_know_a_gpu_by_its_kind_and_sm_count(monkeypatch):
    # B6: cuBLAS ties its results to the architecture and the SM count (MIG and MPS change it)
    from types import SimpleNamespace

    from samebits.fingerprint import Fingerprint
    from samebits.fingerprint.capture import device_identity
    from samebits.fingerprint.diff import note_for

    h200 = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132, total_memory=141 * 2**30)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: h200)
    (device,) = Fingerprint.capture().devices
    assert device == {"name": "NVIDIA H200", "capability": "9.0", "sm_count": 132, "memory_gib": 141.0}
    assert device_identity("cuda") == device_identity("cuda:0") == "NVIDIA H200 sm_90 x132"
    assert note_for("packages.nvidia-cublas-cu12")[0] and note_for("env.TORCH_BLAS_PREFER_CUBLASLT")[0]


def test_tensorrt_builds_fp32_without_tf32_for_the_predictors_device():
    # B2: torch_tensorrt leaves TF32 on by default (an engine then never has eager FP32's bits)
    # and compiled for the current device; the build must not move the user's model either
    from samebits.runtime.backends.base import BackendUnavailable
    from samebits.runtime.backends.tensorrt import compile_options

    options = compile_options((3,), "cuda:1")
    assert options["disable_tf32"] is True and options["enabled_precisions"] == {torch.float32}
    assert options["device"] == torch.device("cuda:1") and options["ir"] == "dynamo"
    with pytest.raises(BackendUnavailable, match="runs on a CUDA device, not cpu"):
        compile_options((torch.ones(2),), "cpu")


def test_onnx_runtime_on_cuda_uses_its_cuda_provider_or_says_it_cannot(monkeypatch, tmp_path):
    # it ran CPUExecutionProvider whatever the device: "bits differ" from CUDA eager, silently on the CPU
    ort = pytest.importorskip("onnxruntime")
    from samebits.runtime.backends import REGISTRY
    from samebits.runtime.backends.onnx import providers_for

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        reason = REGISTRY["onnxruntime"].unavailable("cuda:0")
        assert reason is not None and "needs ONNX Runtime's CUDA provider (pip install onnxruntime-gpu)" in reason
    (cuda, options), cpu = providers_for("cuda:1")
    assert cuda == "CUDAExecutionProvider" and cpu == "CPUExecutionProvider"
    assert options == {"device_id": 1, "cudnn_conv_algo_search": "DEFAULT"}  # not EXHAUSTIVE: per-process autotuning
    assert providers_for("cpu") == ["CPUExecutionProvider"]
    # under the deterministic profile its kernels' deterministic variants are asked for
    from samebits.models.spec import OnnxModel

    model = torch.nn.Linear(4, 2).eval()
    torch.onnx.export(model, (torch.ones(1, 4),), str(tmp_path / "m.onnx"), dynamo=True, verbose=False)
    session = OnnxModel(tmp_path / "m.onnx", deterministic=True).session
    assert session.get_session_options().use_deterministic_compute is True

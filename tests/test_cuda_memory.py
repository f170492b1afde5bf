"""The CUDA memory paths, checked on the CPU with torch.cuda's memory API replaced (B5): the
budget comes from the device's free memory, statistics are read on cuda:N, a cuBLAS or cuDNN
allocation failure counts as out of memory, and the cache is emptied once the failed forward's
frames are gone."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

import samebits

from samebits.measure import memory
from samebits.models.inputs import ModelInputs


def test_the_default_budget_on_a_gpu_is_a_quarter_of_its_free_memory(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: asked.append(d) or (8 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda d: 1.0, raising=False)  # unset
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: 2**30)
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

    options = compile_options((), "cuda:1")
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
    # not EXHAUSTIVE (per-process autotuning); TF32 off as torch's matmuls (the provider's default is on)
    assert options == {"device_id": 1, "cudnn_conv_algo_search": "DEFAULT", "use_tf32": "0"}
    assert providers_for("cpu") == ["CPUExecutionProvider"]
    # under the deterministic profile its kernels' deterministic variants are asked for
    from samebits.models.spec import OnnxModel

    model = torch.nn.Linear(4, 2).eval()
    torch.onnx.export(model, (torch.ones(1, 4),), str(tmp_path / "m.onnx"), dynamo=True, verbose=False)
    session = OnnxModel(tmp_path / "m.onnx", deterministic=True).session
    assert session.get_session_options().use_deterministic_compute is True


def test_onnx_runtimes_cuda_provider_follows_torchs_tf32_switch():
    from samebits.runtime.backends.onnx import cuda_options

    before = torch.backends.cuda.matmul.fp32_precision
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"  # what fast() allows
        assert cuda_options("cuda:0")["use_tf32"] == "1"
        with samebits.deterministic():
            assert cuda_options("cuda:0")["use_tf32"] == "0"
    finally:
        torch.backends.cuda.matmul.fp32_precision = before


class AsIfOn:
    """A CPU session that says it runs on ``providers`` (what ONNX Runtime's own would say)."""

    def __init__(self, session, providers):
        self.session, self.providers = session, providers

    def get_providers(self):
        return [*self.providers, "CPUExecutionProvider"]

    def __getattr__(self, name):
        return getattr(self.session, name)


def test_onnx_runtimes_tensorrt_provider_builds_one_engine_file_once_and_loads_it(monkeypatch, tmp_path):
    """The engine is built once, embedded in an EP-context file written through the cache (its
    timing cache removed after), and every later session only loads that file. TensorRT is
    stood in for by a CPU session that writes the model as the context file: the flow, not the
    engine (bench/gpu_verify.py's row on a GPU)."""
    ort = pytest.importorskip("onnxruntime")
    from samebits.models.inputs import ModelInputs
    from samebits.runtime.backends import REGISTRY, BackendUnavailable, build

    assert "needs a CUDA device" in REGISTRY["onnxruntime-tensorrt"].unavailable("cpu")
    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        assert "needs ONNX Runtime's TensorRT provider" in (
            REGISTRY["onnxruntime-tensorrt"].unavailable("cuda:0") or ""
        )
    calls = []
    real = ort.InferenceSession

    def stand_in(path, options=None, providers=None, **kw):
        name, trt = providers[0]
        assert name == "TensorrtExecutionProvider" and trt["trt_fp16_enable"] == "0" and trt["trt_int8_enable"] == "0"
        assert providers[1][0] == "CUDAExecutionProvider" and trt["device_id"] == providers[1][1]["device_id"] == 0
        calls.append(dict(trt))
        if "trt_ep_context_file_path" in trt:
            assert Path(trt["trt_timing_cache_path"]).is_dir()
            shutil.copyfile(path, trt["trt_ep_context_file_path"])
        return AsIfOn(real(path, options, providers=["CPUExecutionProvider"]), [p[0] for p in providers[:2]])

    monkeypatch.setattr(
        ort,
        "get_available_providers",
        lambda: ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"],
    )
    monkeypatch.setattr(ort, "InferenceSession", stand_in)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    example = ModelInputs((torch.randn(2, 4),), {})
    first = build("onnxruntime-tensorrt", model, example, tmp_path, "k1", device="cuda:0")
    assert first.built_here and first.artifact.name == "onnxruntime-tensorrt-k1.ctx.onnx" and first.artifact.is_file()
    assert [("trt_ep_context_file_path" in c, "trt_timing_cache_path" in c) for c in calls] == [
        (True, True),
        (False, False),
    ]
    assert not list(tmp_path.glob("*.timing"))  # the build's timing cache is gone
    again = build("onnxruntime-tensorrt", model, example, tmp_path, "k1", device="cuda:0")
    assert not again.built_here and len(calls) == 3 and "trt_ep_context_file_path" not in calls[2]
    with torch.inference_mode():
        torch.testing.assert_close(again.runner(example.args[0]), model(example.args[0]))
    # a provider that writes no engine leaves nothing in the cache to load later
    session = AsIfOn(None, ["TensorrtExecutionProvider"])
    monkeypatch.setattr(ort, "InferenceSession", lambda path, options=None, providers=None, **kw: session)
    with pytest.raises(BackendUnavailable, match="wrote no engine"):
        build("onnxruntime-tensorrt", model, example, tmp_path, "k2", device="cuda:0")
    assert not (tmp_path / "onnxruntime-tensorrt-k2.ctx.onnx").exists()

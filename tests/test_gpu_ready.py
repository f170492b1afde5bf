"""Issue #46: the defects that the first GPU run would have shown, each checked here on the CPU
with CUDA's API, Triton's launcher, ONNX Runtime's session or torch_tensorrt stood in for, and
each with its GPU counterpart at the end (skipped here: no GPU has been lent; bench/gpu_verify.py
runs the same checks as rows)."""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import samebits
from samebits.fingerprint import Fingerprint
from samebits.measure import memory, timing
from samebits.runtime import fixed_order
from samebits.runtime.backends.base import BackendUnavailable

REPO = Path(__file__).resolve().parent.parent
H200 = SimpleNamespace(name="NVIDIA H200", major=9, minor=0, multi_processor_count=132, total_memory=141 * 2**30)
NO_GPU = "needs a CUDA GPU (none is lent to this project yet; bench/gpu_verify.py is the prepared run)"


# ---------------------------------------------------------------------------------------------
# Triton's launcher stood in for: each launch records its kernel, grid, the device made current
# and the fusion asked for, and computes what the kernel computes with torch


class FakeKernel:
    def __init__(self, name, launches, compute, current):
        self.name, self.launches, self.compute, self.current = name, launches, compute, current

    def __getitem__(self, grid):
        def launch(*args, enable_fp_fusion=None, **meta):
            self.launches.append(
                SimpleNamespace(kernel=self.name, grid=grid, device=self.current[-1], fusion=enable_fp_fusion)
            )
            self.compute(*args, **meta)

        return launch


def _matmul(a, b, c, bias, m, n, k, *rest, HAS_BIAS, **meta):
    alpha, beta = rest[-2:]
    out = alpha * torch.bmm(a.double(), b.double())
    if HAS_BIAS:
        out = out + beta * bias.double()
    c.copy_(out.to(c.dtype))


def _softmax(x, y, columns, sx, sy, LOG, SAFE, BLOCK):
    rows = x.double()
    out = rows.log_softmax(-1) if LOG else rows.softmax(-1)
    y.copy_((out.nan_to_num(0.0) if SAFE else out).to(y.dtype))


def _row_mean(x, y, columns, sx, BLOCK):
    y.copy_(x.double().mean(-1).to(y.dtype))


@pytest.fixture
def launches(monkeypatch):
    """Triton's kernels replaced: the launches made from now on."""
    made, current = [], [None]
    kernels = (
        SimpleNamespace(cdiv=lambda a, b: -(-a // b)),
        FakeKernel("matmul", made, _matmul, current),
        FakeKernel("softmax", made, _softmax, current),
        FakeKernel("row_mean", made, _row_mean, current),
    )
    monkeypatch.setattr(fixed_order, "_kernels", lambda: kernels)

    @contextlib.contextmanager
    def on(device):
        current.append(device)
        try:
            yield
        finally:
            current.pop()

    monkeypatch.setattr(fixed_order, "_on", on, raising=False)  # (absent before issue #46)
    return made


# ---------------------------------------------------------------------------------------------
# 1. verify on CUDA never compared exactly: record listed the GPUs (CUDA running), verify not yet


def fake_cuda(monkeypatch, initialized: bool) -> None:
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: H200)


def test_a_runs_fingerprint_lists_the_gpus_by_its_device_not_by_whether_cuda_started(monkeypatch):
    fake_cuda(monkeypatch, initialized=False)  # verify's moment: the model not loaded yet
    (gpu,) = Fingerprint.for_device("cuda:0").devices
    assert gpu["name"] == "NVIDIA H200" and gpu["sm_count"] == 132
    fake_cuda(monkeypatch, initialized=True)  # record's moment: the model already on the GPU
    assert Fingerprint.for_device("cuda").devices == [gpu]
    assert Fingerprint.for_device("cpu").devices == []  # a CPU run: no GPU in its bits


def test_a_golden_verifies_bit_for_bit_whichever_side_started_cuda(tmp_path, monkeypatch):
    # the mirror of the GPU case that runs here: recorded before CUDA started, verified after
    model = torch.nn.Linear(4, 3).eval()
    fake_cuda(monkeypatch, initialized=False)
    golden = samebits.record(model, tmp_path / "g.safetensors", torch.randn(2, 4))
    fake_cuda(monkeypatch, initialized=True)
    report = samebits.verify(golden, model)
    assert report.policy == "exact", report.policy_reason


# ---------------------------------------------------------------------------------------------
# 2. Triton launches on the current device: each launch must run on its tensors' device


def test_a_cuda_tensors_device_is_made_current_for_its_launch(monkeypatch):
    entered = []

    class Guard:
        def __init__(self, device):
            self.device = device

        def __enter__(self):
            entered.append(self.device)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.cuda, "device", Guard)
    with fixed_order._on(torch.device("cuda", 1)):
        pass
    assert entered == [torch.device("cuda", 1)]
    with fixed_order._on(torch.device("cpu")):  # the interpreter's tensors: nothing to switch
        pass
    assert len(entered) == 1


def test_every_launch_is_inside_its_tensors_device(launches):
    x = torch.randn(3, 5, 8)
    fixed_order.bmm(x, x.transpose(1, 2))
    fixed_order.softmax(x, -1)
    fixed_order.mean(x, [2])
    assert [launch.kernel for launch in launches] == ["matmul", "softmax", "row_mean"]
    assert all(launch.device == x.device for launch in launches)


# ---------------------------------------------------------------------------------------------
# 3. a grid's z (the batch) and y (column tiles) stop at 65,535: split into several launches


def test_a_batch_past_the_grid_limit_is_split_into_launches_of_the_same_program(launches):
    batch = 2 * fixed_order.MAX_GRID_Z + 3
    a, b = torch.randn(batch, 1, 2), torch.randn(batch, 2, 1)
    out = fixed_order.bmm(a, b)
    zs = [launch.grid[2] for launch in launches]
    assert max(zs) <= 65_535 and sum(zs) == batch and len(zs) == 3
    torch.testing.assert_close(out, torch.bmm(a, b))


def test_attention_with_batch_times_heads_past_the_limit_stays_within_the_grid(launches):
    # 4096 rows x 16 heads, max_batch_size="auto"'s reach: 65,536 (batch, head) pairs
    q = torch.randn(4096, 16, 2, 4)
    out = fixed_order.attention(q, q, q)
    grids = [launch.grid for launch in launches if launch.kernel == "matmul"]
    assert len(grids) == 4 and all(z <= 65_535 and y <= 65_535 for _, y, z in grids)  # 2 products, 2 launches each
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q), rtol=1e-5, atol=1e-5)


def test_columns_past_the_grid_limit_are_split_at_a_tiles_edge(launches):
    columns = fixed_order.MAX_GRID_Y * fixed_order.BLOCK_N + 70
    a, b = torch.randn(1, 2), torch.randn(2, columns)
    out = fixed_order.mm(a, b)
    ys = [launch.grid[1] for launch in launches]
    assert ys == [65_535, 2]
    torch.testing.assert_close(out, a @ b)


# ---------------------------------------------------------------------------------------------
# 4. TensorRT: an explicit device index, tensors only, every op taken, strong typing, the flag


def test_tensorrt_options_name_the_gpu_take_every_op_and_refuse_non_tensors(monkeypatch):
    from samebits.runtime.backends.tensorrt import compile_options

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    options = compile_options((), "cuda", accepted=("device", "min_block_size"))
    assert options["device"] == torch.device("cuda", 3)  # torch_tensorrt: torch.device("cuda") -> gpu_id None
    assert options["min_block_size"] == 1 and options["disable_tf32"] is True
    assert "use_explicit_typing" not in options  # torch_tensorrt 2.13: always strongly typed, no switch
    assert compile_options((), "cuda:1", accepted=("use_explicit_typing",))["use_explicit_typing"] is True
    with pytest.raises(BackendUnavailable, match="tensor inputs only; this model's inputs include int"):
        compile_options((3,), "cuda:1")


def fake_tensorrt(monkeypatch, with_flag: bool) -> tuple[types.ModuleType, list]:
    """tensorrt and torch_tensorrt stood in for: compile records its options and builds a config
    through TRTInterpreter (flags recorded); save writes the model as a plain exported program
    (no TensorRT engine in it: every op "stayed in PyTorch")."""
    flags_set: list = []

    class Config:
        def set_flag(self, flag):
            flags_set.append(flag)

    class TRTInterpreter:
        def _populate_trt_builder_config(self, strict_type_constraints=False, tactic_sources=None):
            return Config()

    trt = types.ModuleType("tensorrt")
    trt.BuilderFlag = SimpleNamespace(**({"DISTRIBUTIVE_INDEPENDENCE": "DI"} if with_flag else {}), TF32="TF32")
    interpreter = types.ModuleType("torch_tensorrt.dynamo.conversion._TRTInterpreter")
    interpreter.TRTInterpreter = TRTInterpreter
    tt = types.ModuleType("torch_tensorrt")
    tt.asked = []

    def dynamo_compile(exported_program, inputs=None, *, device=None, min_block_size=5, disable_tf32=False):
        raise AssertionError("only its signature is read")

    def compile(model, **options):
        tt.asked.append(options)
        TRTInterpreter()._populate_trt_builder_config()  # the build reads its configuration
        return model

    def save(module, path, inputs=()):
        torch.export.save(torch.export.export(module, tuple(inputs)), path)

    tt.compile, tt.save = compile, save
    tt.dynamo = SimpleNamespace(compile=dynamo_compile)
    for name, module in {
        "tensorrt": trt,
        "torch_tensorrt": tt,
        "torch_tensorrt.dynamo": types.ModuleType("torch_tensorrt.dynamo"),
        "torch_tensorrt.dynamo.conversion": types.ModuleType("torch_tensorrt.dynamo.conversion"),
        "torch_tensorrt.dynamo.conversion._TRTInterpreter": interpreter,
    }.items():
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # what importlib.util.find_spec reads
        monkeypatch.setitem(sys.modules, name, module)
    return tt, flags_set


class Constant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self):
        return self.w * 2 + 1


def test_a_tensorrt_build_that_kept_every_op_in_pytorch_is_refused(monkeypatch, tmp_path):
    from samebits.models.inputs import ModelInputs
    from samebits.runtime.backends import build

    tt, flags = fake_tensorrt(monkeypatch, with_flag=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    with pytest.raises(BackendUnavailable, match="TensorRT took none of this model's ops"):
        build("tensorrt", Constant().eval(), ModelInputs((), {}), tmp_path, "k", device="cuda")
    (asked,) = tt.asked
    assert asked["device"] == torch.device("cuda", 0) and asked["min_block_size"] == 1
    assert flags == ["DI"]  # the engine built with DISTRIBUTIVE_INDEPENDENCE


def test_distributive_independence_is_set_only_where_tensorrt_has_it(monkeypatch):
    from samebits.runtime.backends.tensorrt import distributive_independence

    fake_tensorrt(monkeypatch, with_flag=False)
    with distributive_independence() as why_not:
        assert why_not == "this TensorRT has no BuilderFlag.DISTRIBUTIVE_INDEPENDENCE"
    _, flags = fake_tensorrt(monkeypatch, with_flag=True)
    interpreter = sys.modules["torch_tensorrt.dynamo.conversion._TRTInterpreter"].TRTInterpreter
    with distributive_independence() as why_not:
        assert why_not is None
        interpreter()._populate_trt_builder_config()
    interpreter()._populate_trt_builder_config()  # after the block: TensorRT's own configuration again
    assert flags == ["DI"]


def test_engine_nodes_are_counted_in_the_built_program():
    from samebits.runtime.backends.tensorrt import graph_split

    class Op:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return self.name

    nodes = [SimpleNamespace(op="placeholder", target="x")]
    nodes += [
        SimpleNamespace(op="call_function", target=Op(n))
        for n in ("tensorrt.execute_engine.default", "aten.add.Tensor")
    ]
    assert graph_split(SimpleNamespace(nodes=nodes)) == (1, 1)


# ---------------------------------------------------------------------------------------------
# 5. ONNX Runtime falls back to the CPU when its CUDA or TensorRT provider fails to load


def test_a_session_that_fell_back_to_the_cpu_is_refused():
    from samebits.runtime.backends.onnx import first_provider, providers_for

    wanted = providers_for("cuda:0")
    fell_back = SimpleNamespace(get_providers=lambda: ["CPUExecutionProvider"])
    with pytest.raises(BackendUnavailable, match="did not start its CUDAExecutionProvider"):
        first_provider(fell_back, wanted)
    assert first_provider(
        SimpleNamespace(get_providers=lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"]), wanted
    )


def test_the_onnxruntime_backend_on_cuda_refuses_a_session_on_the_cpu(monkeypatch, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from samebits.models.inputs import ModelInputs
    from samebits.runtime.backends import build

    real = ort.InferenceSession
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    # what onnxruntime-gpu does where the CUDA provider's libraries do not load: a CPU session
    monkeypatch.setattr(ort, "InferenceSession", lambda path, options=None, providers=None, **kw: real(
        path, options, providers=["CPUExecutionProvider"]))  # fmt: skip
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    model = torch.nn.Linear(4, 2).eval()
    with pytest.raises(BackendUnavailable, match="runs CPUExecutionProvider instead"):
        build("onnxruntime", model, ModelInputs((torch.randn(2, 4),), {}), tmp_path, "k", device="cuda:0")


# ---------------------------------------------------------------------------------------------
# 6. float16/bfloat16 attention: scores and weights in float32, as torch's math backend


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_attention_accumulates_in_float32_and_returns_the_inputs_dtype(dtype, launches):
    torch.manual_seed(0)
    q, k, v = (
        (torch.randn(2, 3, 5, 8) * 2).to(dtype),
        torch.randn(2, 3, 5, 8).to(dtype),
        torch.randn(2, 3, 5, 8).to(dtype),
    )
    out = fixed_order.attention(q, k, v, is_causal=True)
    assert out.dtype == dtype
    assert {launch.kernel for launch in launches} == {"matmul", "softmax"}
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
    ours = (out.double() - exact).abs().max()
    rounded = (exact.to(dtype).double() - exact).abs().max()  # the output's own rounding
    assert ours <= 2 * rounded, (ours, rounded)


def test_the_scores_reach_the_kernels_in_float32(launches, monkeypatch):
    seen = []
    real = fixed_order.matmul
    monkeypatch.setattr(fixed_order, "matmul", lambda a, b: seen.append((a.dtype, b.dtype)) or real(a, b))
    q = torch.randn(1, 2, 3, 4, dtype=torch.bfloat16)
    fixed_order.attention(q, q, q)
    assert seen == [(torch.float32, torch.float32)] * 2
    before = torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)  # torch's math keeps bfloat16 then
    try:
        seen.clear()
        fixed_order.attention(q, q, q)
        assert seen == [(torch.bfloat16, torch.bfloat16)] * 2
    finally:
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(before)


# ---------------------------------------------------------------------------------------------
# 7. softmax over a dim other than the last comes back dense, as torch's


def test_softmax_over_a_middle_dim_is_dense_and_views_inside_the_mode(launches, monkeypatch):
    x = torch.randn(4, 10, 7)
    for log in (False, True):
        out = fixed_order.softmax(x, 1, log=log)
        assert out.stride() == (x.log_softmax(1) if log else x.softmax(1)).stride() == (70, 7, 1)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # kernels=True on CPU tensors (the launcher is stood in for)
    with torch.inference_mode(), samebits.batch_invariant(kernels=True):
        flat = torch.softmax(x, 1).view(4, 70)
    torch.testing.assert_close(flat, x.softmax(1).view(4, 70))
    assert any(launch.kernel == "softmax" for launch in launches)


# ---------------------------------------------------------------------------------------------
# 8. Triton's codegen pinned and fingerprinted


def test_every_launch_pins_fp_fusion(launches):
    x = torch.randn(3, 4, 8)
    fixed_order.linear(x, torch.randn(5, 8), torch.randn(5))
    fixed_order.softmax(x, -1, log=True)
    fixed_order.mean(x, -1)
    assert len(launches) == 3 and {launch.fusion for launch in launches} == {fixed_order.FP_FUSION}


def test_the_fingerprint_records_triton_and_its_fusion_switches(monkeypatch):
    from samebits.fingerprint.diff import diff

    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_FORCE_DISABLE_FP_FUSION", "1")
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    here = Fingerprint.capture()
    assert here.packages["triton"] and here.env["TRITON_FORCE_DISABLE_FP_FUSION"] == "1"
    assert here.env["TRITON_DEFAULT_FP_FUSION"] == "0"
    older = Fingerprint.from_dict({**here.to_dict(), "packages": {**here.packages, "triton": "3.0.0"}})
    (change,) = [c for c in diff(older, here) if c.field == "packages.triton"]
    assert not change.affects_bits  # no GPU in either: Triton compiles nothing that runs
    on_gpu = Fingerprint.from_dict({**older.to_dict(), "devices": [{"name": "NVIDIA H200"}]})
    (change,) = [
        c
        for c in diff(on_gpu, Fingerprint.from_dict({**here.to_dict(), "devices": on_gpu.devices}))
        if c.field == "packages.triton"
    ]
    assert change.affects_bits and "Triton version" in change.note


# ---------------------------------------------------------------------------------------------
# 9. a timed call waits for every GPU, not the current one alone


def test_timing_waits_for_every_cuda_device(monkeypatch):
    waited = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    timing._device_sync()()
    assert waited == [0, 1]


# ---------------------------------------------------------------------------------------------
# 10. the memory budget: the per-process fraction, MPS, and every out-of-memory message


def test_the_cuda_budget_keeps_within_the_per_process_fraction(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (120 * 2**30, 140 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda d: 0.1, raising=False)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: 2 * 2**30)
    # 10% of 140 GiB less the 2 GiB reserved already: 12 GiB, a quarter of it
    assert memory.default_memory_cap_mb("cuda:0") == 3072.0


def test_the_mps_budget_comes_from_metals_recommended_working_set(monkeypatch):
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 16 * 2**30, raising=False)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", lambda: 4 * 2**30, raising=False)
    assert memory.default_memory_cap_mb("mps") == 3072.0


@pytest.mark.parametrize(
    "message",
    [
        "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",
        "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        "MPS backend out of memory (MPS allocated: 1.00 GB)",
    ],
)
def test_every_out_of_memory_message_ends_the_size_search(message):
    assert memory.out_of_memory_error(RuntimeError(message))
    assert not memory.out_of_memory_error(RuntimeError("CUDA error: an illegal memory access was encountered"))


# ---------------------------------------------------------------------------------------------
# 11. torch 2.2 to 2.4 (no _safe_softmax), ONNX Runtime's use_tf32, the DEFAULT algorithm


def test_the_runtime_imports_on_a_torch_without_the_newer_ops():
    code = textwrap.dedent(
        """
        import torch
        real = torch.ops.aten
        hidden = {"_safe_softmax", "_scaled_dot_product_flash_attention_for_cpu"}

        class Older:  # torch.ops.aten as torch 2.2 has it
            def __getattr__(self, name):
                if name in hidden:
                    raise AttributeError(name)
                return getattr(real, name)

        torch.ops.aten = Older()
        from samebits.runtime import batch_invariant, fixed_order, predictor
        assert not any("_safe_softmax" in str(op) for op in fixed_order.CALLS)
        assert real.softmax.int in fixed_order.CALLS and real.linear.default in batch_invariant.ROW_ARGS
        print("imported")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "imported" in done.stdout, done.stderr[-2000:]


def test_onnx_runtimes_one_tf32_switch_follows_torchs_matmuls_and_convolutions():
    from samebits.runtime.backends.onnx import cuda_options

    matmul, conv = torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision
    try:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = "tf32", "ieee"
        assert cuda_options("cuda:0")["use_tf32"] == "0"  # it would put the convolutions on TF32 too
        torch.backends.cudnn.conv.fp32_precision = "tf32"
        assert cuda_options("cuda:0")["use_tf32"] == "1"
        torch.backends.cuda.matmul.fp32_precision = "ieee"
        assert cuda_options("cuda:0")["use_tf32"] == "0"
    finally:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision = matmul, conv
    doc = cuda_options.__doc__ or ""
    assert "IMPLICIT_PRECOMP_GEMM" in doc and "heuristic" not in doc  # DEFAULT is one fixed algorithm


# ---------------------------------------------------------------------------------------------
# The same on a GPU (skipped here)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_GPU)


@needs_cuda
def test_on_cuda_a_golden_verifies_bit_for_bit_in_a_fresh_process(tmp_path):
    from conftest import run_cli

    golden = tmp_path / "g.safetensors"
    assert run_cli("record", "demo:mlp", "-o", str(golden), "--device", "cuda").returncode == 0
    done = run_cli("verify", str(golden), "--device", "cuda", "--json", "-")
    assert done.returncode == 0 and '"policy": "exact"' in done.stdout, done.stdout[-2000:]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs (none is lent to this project yet)")
def test_the_kernels_run_on_the_second_gpu_with_the_first_current():
    torch.cuda.set_device(0)
    a = torch.randn(70, 33, device="cuda:1")
    with torch.inference_mode(), samebits.batch_invariant():
        out = torch.nn.functional.linear(a, torch.randn(9, 33, device="cuda:1"))
    assert out.device == torch.device("cuda", 1)


@needs_cuda
def test_on_cuda_a_batch_past_the_grid_limit_keeps_each_rows_bits():
    a, b = torch.randn(70_000, 2, 8, device="cuda"), torch.randn(70_000, 8, 3, device="cuda")
    out = fixed_order.bmm(a, b)
    assert torch.equal(out[69_999:], fixed_order.bmm(a[69_999:], b[69_999:]))


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_on_cuda_half_precision_attention_is_within_torchs_math_error(dtype):
    q = (torch.randn(4, 8, 64, 64, device="cuda") * 4).to(dtype)  # logits of std 4
    k, v = torch.randn(4, 8, 64, 64, device="cuda").to(dtype), torch.randn(4, 8, 64, 64, device="cuda").to(dtype)
    exact = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        torchs = (F.scaled_dot_product_attention(q, k, v).double() - exact).abs().max()
    ours = (fixed_order.attention(q, k, v).double() - exact).abs().max()
    assert ours <= 1.5 * torchs


@pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("torch_tensorrt") is None,
    reason="needs a CUDA GPU and torch_tensorrt (none is lent to this project yet)",
)
def test_on_cuda_a_tensorrt_build_holds_an_engine(tmp_path):
    from samebits.models.inputs import ModelInputs
    from samebits.runtime.backends import build
    from samebits.runtime.backends.tensorrt import graph_split

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval().cuda()
    built = build("tensorrt", model, ModelInputs((torch.randn(2, 8, device="cuda"),), {}), tmp_path, "k", device="cuda")
    assert graph_split(torch.export.load(str(built.artifact)).graph)[0] >= 1


@needs_cuda
def test_on_cuda_onnx_runtimes_session_runs_the_cuda_provider_first(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("needs onnxruntime-gpu's CUDA provider")
    from samebits.models.inputs import ModelInputs
    from samebits.runtime.backends import build

    model = torch.nn.Linear(4, 2).eval().cuda()
    built = build(
        "onnxruntime", model, ModelInputs((torch.randn(2, 4, device="cuda"),), {}), tmp_path, "k", device="cuda:0"
    )
    assert built.runner.session.session.get_providers()[0] == "CUDAExecutionProvider"


@needs_cuda
def test_on_cuda_a_middle_dim_softmax_is_dense_and_safe_softmax_reaches_the_kernels(monkeypatch):
    x = torch.randn(4, 10, 7, device="cuda")
    with torch.inference_mode(), samebits.batch_invariant():
        assert torch.softmax(x, 1).stride() == (70, 7, 1)
    ran = []
    real = fixed_order.call
    monkeypatch.setattr(fixed_order, "call", lambda f, *a: ran.append(f) or real(f, *a))
    q = torch.randn(2, 2, 5, 8, device="cuda")
    with torch.no_grad(), samebits.batch_invariant():  # outside inference_mode: _safe_softmax
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(5, 5, dtype=torch.bool, device="cuda"))
    assert ran


@needs_cuda
def test_on_cuda_fp_fusion_is_pinned_whatever_tritons_default():
    code = (
        "import torch, samebits\n"
        "torch.manual_seed(0)\n"
        "x, w = torch.randn(64, 257, device='cuda'), torch.randn(33, 257, device='cuda')\n"
        "with torch.inference_mode(), samebits.batch_invariant():\n"
        "    print(samebits.digest(torch.nn.functional.linear(x, w).cpu()))\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
            env={**os.environ, "TRITON_DEFAULT_FP_FUSION": default},
        ).stdout.strip()
        for default in ("0", "1")
    }  # fmt: skip
    assert len(digests) == 1


@needs_cuda
def test_on_cuda_timing_waits_for_queued_kernels():
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # a kernel that spins ~0.1 s
    import time

    started = time.perf_counter()
    timing._device_sync()()
    assert time.perf_counter() - started > 0.02


@needs_cuda
def test_on_cuda_running_out_of_memory_within_a_share_ends_the_search():
    from samebits.models.inputs import ModelInputs

    class Outer(torch.nn.Module):
        def forward(self, x):
            return (x[:, :, None] * x[:, None, :]).sum(-1)

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(2**30 / total)
    try:
        best, measured = memory.largest_batch(
            Outer(), lambda n: ModelInputs((torch.randn(n, 1024, device="cuda"),), {}), 10**7, "cuda"
        )
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert best == max(measured) < 4096


@needs_cuda
def test_on_a_gpu_machine_triton_is_the_one_torch_requires():
    import importlib.metadata

    pin = next(r for r in importlib.metadata.requires("torch") or [] if r.startswith("triton"))
    assert importlib.metadata.version("triton") in pin and "+cpu" not in torch.__version__

"""samebits.Predictor: a sample's output never depends on the batch it is predicted in."""

import json
import subprocess
import sys
from pathlib import Path

import re
import threading

import pytest
import torch

import samebits
from samebits.errors import UserError
from samebits.runtime.invariance import Invariance

from conftest import run_cli, run_python, scrubbed_env


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def rows(n, seed=5):
    return torch.randn(n, 256, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("backend", ["eager", "onnxruntime"])
def test_a_sample_gets_the_same_bits_in_every_batch(cache, backend):
    if backend == "onnxruntime":
        pytest.importorskip("onnxruntime")
    with samebits.Predictor("demo:mlp", cache_dir=cache, backend=backend) as p:
        x = rows(40)
        alone = [p.predict_one(r) for r in x[:7]]
        for size, position in [(1, 0), (3, 2), (7, 0), (13, 6), (40, 5)]:
            batch = torch.cat(
                [rows(size, seed=size)[:position], x[position : position + 1], rows(size, seed=99)[position + 1 :]]
            )
            assert torch.equal(p.predict(batch)[position], alone[position]), (size, position)
        assert p.invariance.scheme in ("tile", "class") and p.invariance.sizes


def test_the_predictor_removes_a_batch_dependence_the_bare_model_has():
    loaded = samebits.load_model("demo:mlp")
    x = rows(8)
    with torch.inference_mode():
        bare_differs = not torch.equal(loaded.model(x[:1])[0], loaded.model(x)[0])
    if not bare_differs:
        pytest.skip("this CPU's GEMM is batch-invariant for demo:mlp: there is nothing for the Predictor to fix here")
    with samebits.Predictor("demo:mlp", deterministic=False) as p:
        assert torch.equal(p.predict(x)[0], p.predict_one(x[0]))


def test_map_keeps_order_and_handles_the_partial_batch(cache):
    with samebits.Predictor("demo:mlp", cache_dir=cache) as p:
        x = rows(23)
        mapped = list(p.map(iter(x), batch_size=8))
        assert len(mapped) == 23
        assert all(torch.equal(m, p.predict_one(r)) for m, r in zip(mapped, x))


def test_nested_outputs_are_split_per_sample(cache):
    with samebits.Predictor("demo:detector", cache_dir=cache, max_batch_size=4) as p:
        images = [torch.randn(3, 64, 64, generator=torch.Generator().manual_seed(i)) for i in range(5)]
        batched = p.predict((images,))
        assert isinstance(batched, list) and len(batched) == 5
        one = p.predict_one((images[3],))
        assert set(one) == {"boxes", "scores", "labels"} and torch.equal(one["boxes"], batched[3]["boxes"])


def test_calibration_is_cached_and_says_what_it_measured(cache):
    first = samebits.Predictor("demo:mlp", cache_dir=cache, deterministic=False)
    assert "cached" not in first.invariance.measured and first.invariance.measured["tried"]
    second = samebits.Predictor("demo:mlp", cache_dir=cache, deterministic=False)
    assert second.invariance.measured["cached"] is True and second.invariance.sizes == first.invariance.sizes


def test_plan_runs_only_verified_sizes():
    inv = Invariance("class", [4, 8, 16], {})
    assert inv.plan(3) == [(3, 4)]
    assert inv.plan(9) == [(9, 16)]
    assert inv.plan(37) == [(16, 16), (16, 16), (5, 8)]
    assert Invariance("tile", [8], {}).plan(10) == [(8, 8), (2, 8)]


def test_onnxruntime_backend_is_validated_and_reused_by_a_second_process(cache):
    pytest.importorskip("onnxruntime")
    with samebits.Predictor("demo:mlp", cache_dir=cache, backend="onnxruntime", tile=4) as p:
        assert p.validation.backend == "onnxruntime" and p.validation.max_abs is not None
        assert p.artifacts[4].built_here is True
        x = rows(9)
        assert torch.equal(p.predict(x)[5], p.predict_one(x[5]))
        parent = json.dumps(p.fingerprint)
    code = (
        "import json, sys, samebits\n"
        "from samebits.fingerprint import Fingerprint\n"
        f"p = samebits.Predictor('demo:mlp', cache_dir={str(cache)!r}, backend='onnxruntime', tile=4)\n"
        "print(p.artifacts[4].built_here, p.invariance.measured.get('cached'))\n"
        "diff = Fingerprint.from_dict(json.loads(sys.stdin.read())).diff(Fingerprint.from_dict(p.fingerprint))\n"
        "print([(c.field, c.old, c.new) for c in diff], file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=parent, capture_output=True, text=True, env=scrubbed_env(), timeout=300
    )
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_deterministic_profile_lives_as_long_as_the_predictor(cache):
    assert not torch.are_deterministic_algorithms_enabled()
    p = samebits.Predictor("demo:mlp", cache_dir=cache)
    assert torch.are_deterministic_algorithms_enabled()
    p.close()
    assert not torch.are_deterministic_algorithms_enabled()


def test_errors(cache):
    with pytest.raises(UserError, match="unknown backend 'tvm'"):
        samebits.Predictor("demo:mlp", backend="tvm", cache_dir=cache)
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="the tensorrt backend needs"):
            samebits.Predictor("demo:mlp", backend="tensorrt", cache_dir=cache, deterministic=False)
    with pytest.raises(UserError, match="generate\\(\\) needs the Predictor calibrated"):
        samebits.Predictor(torch.nn.Linear(2, 2), cache_dir=cache).generate([torch.tensor([1, 2])])


def test_cache_cli_lists_and_clears(cache):
    samebits.Predictor("demo:mlp", cache_dir=cache, deterministic=False)
    listed = run_cli("cache", "list", "--cache-dir", str(cache), env=scrubbed_env(COLUMNS="200"))
    assert listed.returncode == 0 and "calibration-" in listed.stdout
    # what each entry is for and when it was written, not only its hash
    assert re.search(r"MLP on eager, cpu, up to \d+ rows: batch sizes [\d, ]+ verified +20\d\d-", listed.stdout)
    cleared = run_cli("cache", "clear", "--cache-dir", str(cache))
    assert cleared.returncode == 0 and "removed 1 entries" in cleared.stdout
    assert "empty" in run_cli("cache", "list", "--cache-dir", str(cache)).stdout


def test_check_through_the_predictor_shows_the_fix(cache, monkeypatch):
    from samebits.checker import check

    monkeypatch.setenv("SAMEBITS_CACHE_DIR", str(cache))
    bare = check("demo:mlp", axes=("batch",), batch_sizes=(1, 2, 4, 8))
    if bare.axis("batch").verdict != "diverged":
        pytest.skip("the bare demo:mlp is batch-invariant on this CPU: the fix cannot be shown here")
    fixed = check("demo:mlp", axes=("batch", "state", "process"), batch_sizes=(1, 2, 4, 8), runtime="predictor")
    assert fixed.axis("batch").verdict == "identical" and fixed.axis("state").verdict == "identical"
    assert fixed.axis("process").verdict == "identical"
    assert "ran through predictor" in fixed.localization
    assert not torch.are_deterministic_algorithms_enabled()  # the Predictor's profile ended with the check


def test_concurrent_predict_calls_from_threads(cache):
    import threading

    with samebits.Predictor("demo:mlp", cache_dir=cache) as p:
        x = rows(64)
        expected = p.predict(x)
        results, errors = {}, []

        def work(i):
            try:
                results[i] = p.predict(x[i : i + 9])
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert all(torch.equal(results[i], expected[i : i + 9]) for i in range(8))


def test_unknown_runtime_is_a_user_error():
    from samebits.checker import check

    with pytest.raises(UserError, match="unknown runtime 'server'"):
        check("demo:mlp", axes=("repeat",), runtime="server")


def test_bench_table_side_by_side(tmp_path, monkeypatch):
    import json
    from importlib import resources

    import jsonschema

    monkeypatch.setenv("SAMEBITS_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "b.json"
    result = run_cli(
        "bench",
        "--batch-sizes",
        "1,4",
        "--backends",
        "eager",
        "--rounds",
        "3",
        "--budget",
        "0.5",
        "--json",
        str(out),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    jsonschema.validate(data, json.loads(resources.files("samebits").joinpath("schemas/bench.schema.json").read_text()))
    configs = {(r["config"], r["batch"]) for r in data["rows"]}
    assert {("per-sample loop", 1), ("eager", 4), ("predictor:eager", 4), ("predictor:eager (any size)", 4)} <= configs
    invariant = [r for r in data["rows"] if r["config"] == "predictor:eager"]
    assert all(r["same_as_alone"] for r in invariant)  # batch invariance, measured per row
    assert all(r["peak_mb"] is not None for r in data["rows"])
    assert "eager" in data["invariance_cost"] and data["invariance"]["predictor:eager"]


def test_auto_max_batch_size_fits_the_memory_budget(cache):
    p = samebits.Predictor("demo:mlp", max_batch_size="auto", memory_budget_mb=4, cache_dir=cache, deterministic=False)
    assert p.memory is not None
    chosen = p.memory.max_batch_size
    peaks = p.memory.peak_mb_by_batch
    assert p.max_batch_size == chosen and peaks[chosen] <= 4
    assert any(size > chosen and mb > 4 for size, mb in peaks.items())  # the next size was measured over budget
    assert max(p.invariance.sizes) <= chosen
    with pytest.raises(UserError, match="max_batch_size must be"):
        samebits.Predictor("demo:mlp", max_batch_size="big", cache_dir=cache)


def test_a_failed_setup_leaves_no_profile_behind(cache):
    with pytest.raises(UserError):
        samebits.Predictor(torch.nn.Linear(3, 3), example_inputs=torch.tensor(1.0), cache_dir=cache)  # no batch dim
    assert not torch.are_deterministic_algorithms_enabled()


def test_compile_backend_keeps_its_cache_under_cache_dir(cache):
    import shutil

    if not (shutil.which("c++") or shutil.which("g++")):
        pytest.skip("torch.compile on CPU needs a C++ compiler; none here")
    model = torch.nn.Sequential(torch.nn.LayerNorm(8), torch.nn.Tanh()).eval()
    with samebits.Predictor(model, example_inputs=torch.randn(4, 8), backend="compile", tile=4, cache_dir=cache) as p:
        x = torch.randn(6, 8)
        assert torch.equal(p.predict(x)[5], p.predict_one(x[5]))
        assert p.validation.backend == "compile"
    assert any((cache / "inductor").iterdir())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="TensorRT needs a CUDA device; this machine has none")
def test_tensorrt_engine_is_built_once_and_invariant(cache):
    pytest.importorskip("torch_tensorrt")
    with samebits.Predictor("demo:mlp", cache_dir=cache, backend="tensorrt", device="cuda", tile=8) as p:
        x = rows(13).cuda()
        assert torch.equal(p.predict(x)[9], p.predict_one(x[9]))
        assert p.artifacts[8].built_here is True
    again = samebits.Predictor("demo:mlp", cache_dir=cache, backend="tensorrt", device="cuda", tile=8)
    assert again.artifacts[8].built_here is False


@pytest.mark.serial  # a time budget
def test_a_calibration_stops_at_its_time_budget_and_says_how_far_it_got(tmp_path):
    import warnings

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = samebits.Predictor(model, example_inputs=torch.randn(4, 8), calibration_budget=0.0, cache_dir=tmp_path)
    p.close()
    measured = p.invariance.measured
    assert measured["tried"] == [1] and measured["not_tried"] == [2, 4, 8, 16, 32, 64, 128, 256]
    assert p.invariance.sizes == [1] and "past the 0 s budget" in measured["stopped"]
    assert any("calibrated up to batch size 1: size 2 would take about" in n for n in p.notes)
    assert not caught  # stopped in time: no over-budget warning


def test_a_calibration_stops_at_its_memory_budget_and_never_runs_past_it(tmp_path):
    # in a fresh interpreter: memory is measured as RSS growth, and an allocator that earlier
    # tests left with free memory (glibc raises its mmap threshold after large frees) grows less
    code = f"""
import json, torch, samebits
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 16384), torch.nn.ReLU(), torch.nn.Linear(16384, 4))
p = samebits.Predictor(
    model, example_inputs=torch.randn(4, 64), memory_budget_mb=8, cache_dir={str(tmp_path)!r}, deterministic=False
)
print(json.dumps({{"measured": p.invariance.measured, "sizes": p.invariance.sizes}}))
"""
    result = run_python(code, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.splitlines()[-1])
    measured = data["measured"]
    top = max(measured["tried"])
    assert "past the 8 MB budget" in measured["stopped"] and top < 256
    assert measured["not_tried"] == [s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256) if s > top]
    assert max(data["sizes"]) <= top and not set(measured["failed"]) & set(data["sizes"])


def test_backend_builds_keep_third_party_output_off_the_terminal(tmp_path, capfd):
    from samebits.models.inputs import ModelInputs
    from samebits.runtime.backends import build

    class Noisy(torch.nn.Module):
        def forward(self, x):
            print("FX graph dump " * 20)  # what exporters print on their own
            return x * 2

    built = build("torchscript", Noisy(), ModelInputs((torch.ones(2),)), tmp_path, "k")
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert built.log["lines"] >= 2 and any("FX graph dump" in line for line in built.log["tail"])


def test_the_plan_takes_the_fastest_verified_split_and_only_verified_sizes():
    from samebits.runtime.invariance import Invariance

    # 128 rows cost 8x what 64 do: two forwards of 64 are cheaper than one of 128
    slow_top = Invariance("class", [4, 8, 64, 128], {"seconds_by_size": {"4": 1.0, "8": 1.1, "64": 5.0, "128": 40.0}})
    assert slow_top.plan(128) == [(64, 64), (64, 64)]
    # 128 as cheap per row as 64 (within 10%): the one large forward stays
    even = Invariance("class", [4, 8, 64, 128], {"seconds_by_size": {"4": 1.0, "8": 1.1, "64": 5.0, "128": 9.8}})
    assert even.plan(128) == [(128, 128)] and even.plan(100) == [(100, 128)]
    for inv in (slow_top, even):
        for n in (1, 3, 9, 65, 127, 1000, 4099):
            plan = inv.plan(n)
            assert sum(rows for rows, _ in plan) == n
            assert all(size in inv.sizes and rows <= size for rows, size in plan)
    untimed = Invariance("class", [4, 8], {})
    assert untimed.plan(9) == [(8, 8), (1, 4)]  # no timings: the largest size, the rest padded up


def test_the_plan_says_what_a_lone_sample_and_a_small_tile_cost():
    from samebits.runtime.invariance import Invariance

    rounds = {"1": [0.5, 0.5], "2": [0.6, 0.6], "4": [1.0, 1.1], "8": [1.6, 1.6], "16": [2.0, 2.0]}
    timed = {"seconds_by_size": {k: v[0] for k, v in rounds.items()}, "forward_rounds": rounds}
    single, tile = Invariance("class", [4, 8], timed).notes()
    assert "a single sample runs padded to 4 rows" in single and "1-row forward: 2.10x (2.00-2.20x over 2" in single
    assert (
        "largest verified batch size 8 (tried up to 16)" in tile and "at 16: 0.62x (0.62-0.62x over 2 rounds)" in tile
    )
    assert Invariance("class", [1, 2, 4], {"seconds_by_size": {"1": 1, "2": 1, "4": 1}}).notes() == []


def test_inputs_are_cast_to_the_dtype_the_model_was_cast_to(cache):
    # predict() used to pass float32 batches to a bfloat16 model: a raw dtype-mismatch error
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    p = samebits.Predictor(model, example_inputs=torch.randn(4, 8), dtype="bfloat16", cache_dir=cache, max_batch_size=8)
    x = torch.randn(4, 8)
    out = p.predict(x)
    assert out.dtype == torch.bfloat16
    assert torch.equal(p.predict_one(x[1]), out[1])  # and a sample's bits are still its own


def _contrastive():
    import check_models

    return check_models.contrastive()


def test_a_model_whose_rows_are_coupled_runs_each_batch_whole_and_keeps_its_output(cache):
    model, (images, texts) = _contrastive()
    with samebits.Predictor(model, example_inputs=(images, texts), cache_dir=cache) as p:
        assert p.plan.scheme == "whole" and "logits_per_image" in p.plan.notes[0] and p.plan.sizes == ()
        assert p.plan.coupled and p.plan.weights_sha256 == p.weights_sha256
        for n in (1, 3, 4, 7):
            x, t = torch.randn(n, 16), torch.randn(n, 12)
            got, want = p.predict((x, t)), model(x, t)
            assert got.keys() == want.keys()
            assert all(got[k].shape == want[k].shape and torch.equal(got[k], want[k]) for k in want)
        with pytest.raises(UserError, match="map\\(\\) groups samples into batches"):
            list(p.map([(images[0], texts[0])]))
    with pytest.raises(UserError, match="tile 2 cannot be used here"):
        samebits.Predictor(model, example_inputs=(images, texts), cache_dir=cache, tile=2)


def test_predict_refuses_a_model_whose_rows_are_coupled_in_one_line(tmp_path):
    import numpy as np

    np.save(tmp_path / "images.npy", np.zeros((6, 16), dtype="float32"))
    spec = f"{Path(__file__).with_name('check_models.py')}:self_similarity"
    out = run_cli("predict", spec, str(tmp_path / "images.npy"), "-o", str(tmp_path / "o"))
    assert out.returncode == 2 and "cuts the inputs into batches" in out.stderr.strip().splitlines()[-1]


def _cnn():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 10)
    )


def test_a_predictor_without_example_inputs_calibrates_on_its_first_batch(cache):
    """``samebits.Predictor(model)`` as the README and SB251's fix write it: no example inputs."""
    samples = [torch.randn(3, 8, 8, generator=torch.Generator().manual_seed(i)) for i in range(11)]
    batch = torch.stack(samples)
    with samebits.Predictor(_cnn(), example_inputs=batch[:4], cache_dir=cache, max_batch_size=8) as given:
        want_map, want_batch = list(given.map(samples)), given.predict(batch)
    with pytest.warns(UserWarning, match="calibrates on the first batch"):
        with samebits.Predictor(_cnn(), cache_dir=cache, max_batch_size=8) as lazy:
            got_map = list(lazy.map(samples))
    assert all(torch.equal(a, b) for a, b in zip(got_map, want_map)) and len(got_map) == 11
    assert lazy.plan.sizes  # calibrated, with a plan, after the first batch
    with pytest.warns(UserWarning):
        with samebits.Predictor(_cnn(), cache_dir=cache, max_batch_size=8) as lazy:
            assert torch.equal(lazy.predict(batch), want_batch)
            assert torch.equal(lazy.predict_one(samples[3]), want_map[3])


def test_a_calibration_and_an_artifact_are_keyed_by_the_device_they_were_measured_on(cache, monkeypatch):
    # B3: a CUDA Predictor must not reuse a CPU calibration, nor an engine built for another GPU
    from samebits.runtime import artifacts, calibration

    model, x = torch.nn.Linear(8, 4).eval(), torch.randn(4, 8)
    cpu = samebits.Predictor(model, example_inputs=x, cache_dir=cache, deterministic=False, backend="torchscript")
    other = "NVIDIA H200 sm_90 x132"  # what device_identity says of a GPU
    monkeypatch.setattr(calibration, "device_identity", lambda device: other)
    monkeypatch.setattr(artifacts, "device_identity", lambda device: other)
    elsewhere = samebits.Predictor(model, example_inputs=x, cache_dir=cache, deterministic=False, backend="torchscript")
    assert elsewhere.calibration_key != cpu.calibration_key
    assert not set(a.path for a in elsewhere.artifacts.values()) & set(a.path for a in cpu.artifacts.values())
    from samebits.fingerprint.capture import device_identity

    assert device_identity("cpu") == "cpu"


class StrictOnly(torch.nn.Module):
    """What torch raises for an op without a deterministic CUDA kernel (kthvalue, median(dim),
    histc, ...) under use_deterministic_algorithms(True), raised here on the CPU."""

    def forward(self, x):
        if torch.are_deterministic_algorithms_enabled():
            raise RuntimeError(
                "kthvalue CUDA does not have a deterministic implementation, but you set "
                "'torch.use_deterministic_algorithms(True)'."
            )
        return x * 2


def test_an_op_without_a_deterministic_kernel_is_named_not_called_batch_variance(cache):
    # B8: every size failed, and the Predictor said "no batch size is invariant here"
    with pytest.raises(
        UserError, match=r"^kthvalue CUDA has no deterministic implementation on cpu.*deterministic=False"
    ):
        samebits.Predictor(StrictOnly(), example_inputs=torch.randn(4, 3), cache_dir=cache)
    p = samebits.Predictor(StrictOnly(), example_inputs=torch.randn(4, 3), cache_dir=cache, deterministic=False)
    assert p.invariance.sizes and torch.equal(p.predict(torch.ones(2, 3)), torch.full((2, 3), 2.0))


def test_running_sets_the_switches_once_and_leaves_nothing_behind_after_an_error(cache):
    p = samebits.Predictor("demo:mlp", cache_dir=cache)
    x = rows(4)
    try:
        alone = p.predict(x)
        with pytest.raises(RuntimeError, match="stop"):
            with p.running():
                assert torch.is_inference_mode_enabled()  # entered once for the block
                assert torch.equal(p.predict(x), alone) and torch.equal(p.predict(x[:1]), alone[:1])
                raise RuntimeError("stop")
        assert not torch.is_inference_mode_enabled() and p._mode._running is None
        done = []
        worker = threading.Thread(target=lambda: done.append(p.predict(x)))  # the lock was released
        worker.start()
        worker.join(30)
        assert done and torch.equal(done[0], alone)
    finally:
        p.close()


def test_a_scriptmodule_runs_through_the_predictor_and_is_given_back(tmp_path):
    """TorchScript refuses ``requires_grad_`` on a module: grad is turned off per parameter (and by
    inference mode), and the loaded module is given back as it was."""
    torch.manual_seed(0)
    path = tmp_path / "m.pt"
    torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))).save(str(path))
    scripted = torch.jit.load(str(path))
    x = torch.randn(7, 8)
    with samebits.Predictor(scripted, example_inputs=x[:4], cache_dir=tmp_path / "cache") as p:
        out = p.predict(x)
        assert all(torch.equal(out[i], p.predict_one(x[i])) for i in range(7))
    assert scripted.training and all(q.requires_grad for q in scripted.parameters())
    result = run_cli("check", str(path), "--input-shape", "4,8", "--runtime", "predictor", "--axes", "batch")
    assert result.returncode == 0 and "identical" in result.stdout, result.stderr


class _ReadsItsAddress(torch.nn.Module):
    """A kernel that takes another path by its input's alignment, as MKL's GEMM may: the
    output moves with the pointer."""

    def forward(self, x):
        return x + (x.data_ptr() % 64) * 1e-3


@pytest.mark.parametrize("rows", [1, 4, 6])  # a verified size as given, a full chunk, chunks and padding
def test_every_forward_runs_on_inputs_in_fresh_aligned_storage(tmp_path, rows):
    """A view at an offset (a slice a caller passed, a full chunk of a larger batch) ran in place:
    the same rows gave other bits than their copy."""
    import samebits

    with samebits.Predictor(_ReadsItsAddress(), example_inputs=torch.zeros(4, 8), tile=4, cache_dir=tmp_path) as p:
        base = torch.randn(rows * 8 + 3)
        view = base[3:].view(rows, 8)  # 12 bytes past an aligned address
        assert torch.equal(p.predict(view), p.predict(view.clone()))
        assert torch.equal(p.predict(view), view + 0)  # the copy sits where torch's allocator aligns it


@pytest.mark.parametrize("backend", ["export", "onnxruntime"])
def test_an_exporting_backend_refuses_a_model_that_is_no_module_before_exporting(tmp_path, backend):
    from samebits.runtime.backends.base import BackendUnavailable, ExportFailed

    def double(x):
        return x * 2

    with pytest.raises(BackendUnavailable) as raised:
        samebits.Predictor(double, backend=backend, example_inputs=torch.randn(4, 3), cache_dir=tmp_path)
    assert not isinstance(raised.value, ExportFailed)  # refused as a fact of the model, not a failed export
    built = tmp_path.rglob(f"*{'onnx' if backend == 'onnxruntime' else 'export'}-*")
    assert [p.name for p in built if not p.name.endswith(".lock")] == []  # nothing built


def test_a_plan_carries_what_it_was_measured_on_across_a_process_boundary(cache):
    from samebits.runtime.plan import Plan

    with samebits.Predictor("demo:mlp", cache_dir=cache, tile=4) as p:
        plan = p.plan
        assert not plan.coupled and plan.calibration_key == p.calibration_key and plan.calibration_key
        assert plan.weights_sha256 == p.weights_sha256 and len(plan.weights_sha256) == 64
        assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
        assert "weights_sha256" not in plan.describe()  # a manifest's plan keeps its fields


def test_auto_max_batch_size_measures_a_warm_process_as_a_fresh_one(tmp_path):
    """A process that allocated and freed before (a server, a notebook) keeps those pages resident;
    a forward reusing them must still count what it needs, or the budget never binds."""
    code = f"""
import json, torch, samebits
for mb in (2, 8, 16, 30):  # freeing mmapped blocks raises glibc's mmap threshold
    t = torch.empty(mb * 2**18); t.fill_(1); del t
keep = [torch.randn(mb * 2**18) for mb in (1, 2, 4, 8, 16, 24) for _ in range(20)]
del keep
p = samebits.Predictor("demo:mlp", max_batch_size="auto", memory_budget_mb=4, cache_dir={str(tmp_path)!r}, deterministic=False)
print(json.dumps([p.memory.max_batch_size, p.memory.peak_mb_by_batch]))
"""
    result = run_python(code, timeout=300)
    assert result.returncode == 0, result.stderr
    chosen, peaks = json.loads(result.stdout.strip().splitlines()[-1])
    assert max(peaks.values()) > 4 and chosen < 4096, peaks  # stopped by the budget, not by the size limit

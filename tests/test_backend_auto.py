"""``Predictor(backend="auto")``: the fastest measured backend per verified batch size among those
whose bits equal eager's; a drifting backend only when allowed, and then for every size."""

import json

import pytest
import torch
from torch import nn

import samebits
from samebits.measure.load import Load
from samebits.measure.timing import Timings
from samebits.runtime import auto

from conftest import run_cli


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).eval()


def rows(n, seed=3):
    return torch.randn(n, 32, generator=torch.Generator().manual_seed(seed))


QUIET = Load(0.1, 2, 0.0)


def timings(table, load=QUIET, jitter=(1.0, 1.0, 1.0)):
    """``{size: Timings}`` from ``{backend: {size: seconds}}``: three rounds each, scaled by ``jitter``."""
    sizes = sorted({s for t in table.values() for s in t})
    return {s: Timings({b: [t[s] * j for j in jitter] for b, t in table.items() if s in t}, load) for s in sizes}


def fake_times(table):
    """``auto.time_sizes`` replaced: seconds per backend from ``table`` (a function of backend
    and size), at the sizes each member really runs."""
    return lambda members, budget: timings({b: {s: table(b, s) for s in auto.sizes_of(m)} for b, m in members.items()})


def test_choose_keeps_eager_within_noise_and_never_mixes_a_drifting_backend():
    table = {"eager": {4: 1.0, 8: 2.0}, "torchscript": {4: 0.99, 8: 1.0}, "onnxruntime": {4: 0.1, 8: 0.1}}
    same = {"eager": True, "torchscript": True, "onnxruntime": False}
    by_size, seconds = auto.choose(timings(table), same, allow_drift=False)
    assert by_size == {4: "eager", 8: "torchscript"}  # 0.99 of eager is noise; 0.5 is not
    assert seconds == {4: 1.0, 8: 1.0}
    by_size, _ = auto.choose(timings(table), same, allow_drift=True)
    assert by_size == {4: "onnxruntime", 8: "onnxruntime"}  # the drifting one runs every size or none
    # a size only another identical backend verified is still covered, by that backend
    only = timings({"eager": {4: 1.0}, "export": {4: 2.0, 16: 3.0}})
    assert auto.choose(only, {"eager": True, "export": True}, False)[0] == {4: "eager", 16: "export"}


def test_choose_replaces_eager_only_where_every_round_says_so_on_a_quiet_machine():
    table = {"eager": {8: 2.0}, "torchscript": {8: 1.0}}
    same = {"eager": True, "torchscript": True}
    assert auto.choose(timings(table), same, False)[0] == {8: "torchscript"}
    # the same medians, but eager won one round: not clearly faster
    rounds = {8: Timings({"eager": [2.0, 2.0, 0.9], "torchscript": [1.0, 1.0, 1.0]}, QUIET)}
    assert auto.choose(rounds, same, False)[0] == {8: "eager"}
    # timed while other processes took the cores: nothing replaces eager, and the plan says why
    busy = Load(5.0, 2, 1.6)
    assert auto.choose(timings(table, load=busy), same, False)[0] == {8: "eager"}
    plan = auto.AutoPlan(("eager",), ("eager",), {8: "eager"}, {}, {}, {}, {}, {}, False, 1.0, load=busy)
    assert "timed under load 5.0 on 2 cores" in plan.describe()
    assert auto.AutoPlan.from_dict(plan.to_dict()).load == busy


def test_auto_mixes_identical_backends_and_a_sample_keeps_its_bits(cache, monkeypatch):
    # torchscript made "fastest" at the small sizes, export at the large: forwards must go there.
    # ONNX Runtime is left out: whether its bits equal eager's depends on the CPU (they do on
    # some Intel machines, not on the AMD ones), and a backend with eager's bits could win a size.
    monkeypatch.setattr(
        auto, "time_sizes", fake_times(lambda b, s: {"torchscript": 0.5 if s <= 8 else 2, "export": 0.5}.get(b, 1.0))
    )
    with samebits.Predictor(
        mlp(), example_inputs=rows(8), backend="auto", cache_dir=cache, auto_backends=("eager", "torchscript", "export")
    ) as p:
        plan = p.auto
        assert p.plan.backend == "auto" and plan.drift["torchscript"].identical
        by_size = dict(plan.backend_by_size)
        assert {b for s, b in by_size.items() if s <= 8} == {"torchscript"}
        assert {b for s, b in by_size.items() if s > 8} == {"export"}
        for size, backend in by_size.items():  # every size runs through a backend that verified it
            assert size in plan.verified[backend]
        assert set(p.members) == {"torchscript", "export"} and p.plan.backends == ("torchscript", "export")
        calls = {b: 0 for b in p.members}
        for b, m in p.members.items():
            real = m.forward_at
            monkeypatch.setattr(
                m,
                "forward_at",
                lambda batch, size, real=real, b=b: calls.__setitem__(b, calls[b] + 1) or real(batch, size),
            )
        x = rows(40, seed=9)
        alone = [p.predict_one(r) for r in x[:5]]
        assert calls["torchscript"] == 5 and calls["export"] == 0
        big = p.predict(x)
        assert calls["export"] >= 1
        for i in range(5):
            assert torch.equal(big[i], alone[i])
        assert p.validation.identical and "torchscript at batch" in p.plan.notes[0]


def test_a_drifting_backend_needs_allow_backend_drift_and_the_report_says_by_how_much(cache, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(auto, "time_sizes", fake_times(lambda b, s: 0.1 if b == "onnxruntime" else 1.0))
    model, x = mlp(), rows(8)
    kept = samebits.Predictor(model, example_inputs=x, backend="auto", cache_dir=cache, deterministic=False)
    drift = kept.auto.drift["onnxruntime"]
    if drift.identical:
        pytest.skip("ONNX Runtime gives this MLP eager's bits on this machine: nothing drifts")
    assert "onnxruntime" not in kept.plan.backends
    assert "onnxruntime (other bits than eager" in kept.notes[0] and "allow_backend_drift=True" in kept.notes[0]
    allowed = samebits.Predictor(
        model, example_inputs=x, backend="auto", cache_dir=cache, deterministic=False, allow_backend_drift=True
    )
    assert allowed.plan.backends == ("onnxruntime",)
    assert not allowed.validation.identical and allowed.validation.max_abs == drift.max_abs > 0
    assert allowed.calibration_key != kept.calibration_key  # the permission is part of the cached plan's key


def test_the_plan_is_cached_and_a_second_predictor_builds_only_what_it_runs(cache, monkeypatch):
    model, x = mlp(), rows(8)
    first = samebits.Predictor(model, example_inputs=x, backend="auto", cache_dir=cache, deterministic=False)
    assert not first.auto.cached
    built = []
    real = samebits.Predictor.member
    monkeypatch.setattr(samebits.Predictor, "member", lambda self, b, *a: built.append(b) or real(self, b, *a))
    second = samebits.Predictor(model, example_inputs=x, backend="auto", cache_dir=cache, deterministic=False)
    assert second.auto.cached and built == list(first.auto.chosen)
    assert second.auto.backend_by_size == first.auto.backend_by_size
    # a corrupt plan file is measured again, not trusted
    (plan_file,) = cache.glob("auto-plan-*.json")
    plan_file.write_text(json.dumps({"chosen": ["nonsense"]}))
    built.clear()
    with pytest.warns(UserWarning, match="did not match the digest"):
        third = samebits.Predictor(model, example_inputs=x, backend="auto", cache_dir=cache, deterministic=False)
    assert not third.auto.cached and built[0] == "eager"


def test_unavailable_and_unknown_backends(cache):
    with pytest.raises(samebits.UserError, match="unknown backend 'nope' in auto_backends"):
        samebits.Predictor("demo:mlp", backend="auto", auto_backends=("nope",), cache_dir=cache)
    with samebits.Predictor(
        mlp(), example_inputs=rows(8), backend="auto", auto_backends=("eager", "tensorrt"), cache_dir=cache
    ) as p:
        assert "tensorrt" in p.auto.skipped and p.plan.backends == ("eager",)
        assert "left out: tensorrt (" in p.notes[0]


def test_auto_on_a_transformers_bert(cache):
    pytest.importorskip("transformers")
    from real_models import bert

    model, inputs = bert()
    with samebits.Predictor(model, example_inputs=inputs, backend="auto", cache_dir=cache, max_batch_size=8) as p:
        assert "torchscript" in p.auto.skipped  # keyword inputs: not traceable
        for size, backend in p.auto.backend_by_size.items():
            assert size in p.auto.verified[backend]
        alone = p.predict({k: v[1:2] for k, v in inputs.items()})
        batch = p.predict(inputs)
        assert torch.equal(batch["last_hidden_state"][1], alone["last_hidden_state"][0])
        with torch.inference_mode():
            eager = model(**{k: v[1:2] for k, v in inputs.items()}).last_hidden_state
        assert torch.allclose(alone["last_hidden_state"], eager, atol=1e-5)


def test_a_backend_build_leaves_the_precision_switches_as_they_were(cache):
    # torch.export puts cuDNN's TF32 switch back through the legacy API, which reset
    # cudnn.conv/rnn.fp32_precision: the fingerprint (and every cache key) then changed
    from samebits.determinism import precision

    with samebits.deterministic(0):
        before = precision.read_state()
        samebits.Predictor(mlp(), example_inputs=rows(8), backend="export", cache_dir=cache, deterministic=False)
        assert precision.read_state() == before


def test_bench_shows_the_auto_plan_beside_the_fixed_backends(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMEBITS_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "b.json"
    result = run_cli(
        "bench",
        "--batch-sizes",
        "4,8",
        "--backends",
        "eager,auto",
        "--rounds",
        "2",
        "--budget",
        "0.3",
        "--no-memory",
        "--json",
        str(out),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert {r["config"] for r in data["rows"]} >= {"predictor:eager", "predictor:auto", "predictor:auto (any size)"}
    assert all(r["same_as_alone"] for r in data["rows"] if r["config"] == "predictor:auto")
    assert data["plans"]["predictor:auto"].startswith("backend auto (measured here): ")
    assert "predictor:auto: backend auto (measured here)" in " ".join(result.stdout.split())


def test_interleaved_timing_shuffles_the_order_so_no_function_always_follows_the_same_one():
    # a function right after ONNX Runtime paid for waking torch's threads: with a fixed (or
    # rotated) order one configuration always came after it and looked 10% slower
    from samebits.measure.timing import interleaved_times

    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "abcd"}
    times = interleaved_times(fns, rounds=40, budget=60)
    assert all(len(t) == 40 for t in times.seconds.values())
    rounds = [calls[4 + 4 * r : 8 + 4 * r] for r in range(40)]  # after the four warm-up calls
    assert all(sorted(r) == list("abcd") for r in rounds)
    before_c = {r[r.index("c") - 1] for r in rounds if r.index("c") > 0}
    assert len(before_c) == 3  # c followed each of the others at some point

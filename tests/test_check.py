"""samebits check: each small model has one known source; the right axis, module and cause are named."""

import importlib.util
import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import torch
from torch import nn

from samebits.checker import check
from samebits.checker.axes.batch import format_groups
from samebits.errors import UserError
from samebits.measure.threads import in_process_reason

from conftest import REPO, run_cli

MODELS = Path(__file__).with_name("check_models.py")


def spec(name):
    return f"{MODELS}:{name}"


def check_models():
    """tests/check_models.py as a module (the factories' models, built here by hand)."""
    loaded = importlib.util.spec_from_file_location("check_models_by_hand", MODELS)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def causes(report):
    return {c.code: c for c in report.causes}


def verdicts(report):
    return {a.axis: a.verdict for a in report.axes}


def test_clean_model_passes_every_axis():
    report = check(spec("clean"))
    assert verdicts(report) == dict.fromkeys(
        ("repeat", "seed", "state", "process", "threads", "batch", "layout"), "identical"
    )
    assert report.ok and report.exit_code == 0 and report.causes == []
    assert report.headline().startswith("Same input, same bits")


def test_dropout_left_on():
    report = check(spec("dropout_on"), axes=("repeat", "seed", "state"))
    assert verdicts(report)["repeat"] == "diverged" and verdicts(report)["seed"] == "diverged"
    cause = causes(report)["training-mode"]
    assert cause.verified and "1 (Dropout)" in cause.summary and cause.fix == "call model.eval() before inference"
    assert report.axis("repeat").origin.module == "1" and report.axis("repeat").origin.type == "Dropout"
    assert "randomness-in-forward" not in causes(report)  # explained by training mode
    assert report.exit_code == 1


def test_a_forward_that_draws_random_numbers_gets_no_batch_cause():
    """Its batch axis differs because no two forwards agree: the cause is the randomness, not a
    batch size (a batch-size cause with the kernel fix was named too)."""
    report = check(spec("torch_noise"), axes=("repeat", "seed", "batch"))
    assert verdicts(report)["batch"] == "diverged"
    assert [c.code for c in report.causes] == ["randomness-in-forward"]


def test_in_training_mode_the_batch_axis_is_re_run_under_eval_before_a_kernel_cause():
    """Dropout left on makes the batch axis diverge too: the cause is training mode (eval makes it
    identical here: the model's ops are row-wise), never a batch-size cause starting in the
    Dropout with the kernel fix."""
    report = check(spec("dropout_on"), axes=("repeat", "batch"))
    assert verdicts(report)["batch"] == "diverged"
    (cause,) = report.causes
    assert cause.code == "training-mode" and "batch" in cause.axis and "repeat" in cause.axis


@pytest.mark.parametrize(
    ("factory", "rng"), [("torch_noise", "torch"), ("numpy_noise", "numpy"), ("python_noise", "random")]
)
def test_randomness_in_forward_names_the_rng_and_module(factory, rng):
    report = check(spec(factory), axes=("repeat", "seed"))
    seed = report.axis("seed")
    assert seed.verdict == "diverged"
    assert seed.details.rngs_consumed == [rng]
    assert [(m.module, m.type, m.rngs) for m in seed.details.modules] == [("noise", "Noisy", [rng])]
    cause = causes(report)["randomness-in-forward"]
    assert "noise (Noisy" in cause.summary
    assert "nondeterministic-kernels" not in causes(report)  # the repeats differ because of the RNG
    assert report.axis("repeat").origin.module == "noise"


def test_hash_order_is_proved_by_the_fixed_seed_rerun():
    report = check(spec("hash_order"), axes=("process",), processes=4)
    process = report.axis("process")
    assert process.verdict == "diverged"
    assert process.details.fixed_hash_seed.verdict == "identical"
    cause = causes(report)["hash-order"]
    assert cause.verified and "samebits run" in cause.fix
    assert process.origin.module == "<model>"  # the set is iterated in the model's own forward
    assert process.origin.op is not None and process.origin.op.startswith("aten.add")


def test_a_model_that_changes_its_weights_on_first_use_is_named_with_the_tensors():
    """The state axis measures from the model as loaded, not from a later forward: a model whose
    first forward rescales two weights (RWKV in eval mode) was "unchanged by a forward"."""
    report = check(spec("rescales_on_first_use"), axes=("repeat", "state"))
    state = report.axis("state")
    assert state.verdict == "diverged" and state.details.first_forward_only
    assert state.details.changed == ["attention.weight", "value.weight"]
    assert "the first forward changed 2 tensors of attention (Linear), value (Linear)" in state.summary
    (cause,) = [c for c in report.causes if c.code == "state-mutation"]
    assert "the first forward changes" in cause.summary and "on first use" in cause.fix
    assert report.axis("repeat").verdict == "identical"  # later forwards agree with each other


def test_batchnorm_in_training_mode_mutates_state():
    report = check(spec("bn_train"), axes=("repeat", "state"))
    state = report.axis("state")
    assert state.verdict == "diverged"
    assert "bn.running_mean" in state.details.changed and ("bn", "BatchNorm2d") in [
        (m.module, m.type) for m in state.details.modules
    ]
    cause = causes(report)["training-mode"]
    assert "state" in cause.axis and "bn (BatchNorm2d)" in cause.summary


def test_batch_variant_linear_is_localised():
    report = check(spec("batch_variant"), axes=("batch",), batch_sizes=(1, 2, 4, 8))
    batch = report.axis("batch")
    assert batch.verdict == "diverged"
    assert batch.origin.module == "fc" and batch.origin.type == "Linear" and batch.origin.inputs_identical
    assert batch.origin.growth[0].module == "fc" and batch.origin.growth[0].max_abs > 0
    assert batch.details.groups[0] == [1]
    assert batch.origin.op.startswith("aten.addmm")
    assert "batch-size" in causes(report)


def test_tolerance_turns_a_divergence_into_close():
    report = check(spec("batch_variant"), axes=("batch",), batch_sizes=(1, 2, 4), atol=1e-4, rtol=1e-4)
    assert report.axis("batch").verdict == "close" and report.exit_code == 0


def test_check_leaves_the_model_and_rngs_as_it_found_them():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, 4, 4)
    torch.manual_seed(5)
    expected = torch.rand(1)
    torch.manual_seed(5)
    check(model, x, axes=("repeat", "state", "batch"), batch_sizes=(1, 2))
    assert torch.equal(torch.rand(1), expected)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.training


def test_in_memory_model_of_a_local_class_skips_the_child_axes_with_a_hint():
    class Local(nn.Module):
        def forward(self, x):
            return x * 2

    report = check(Local(), torch.ones(2, 3), axes=("process",))
    process = report.axis("process")
    assert process.verdict == "skipped"
    assert "defined inside a function" in process.reason and "pass a MODEL spec" in process.reason
    assert report.exit_code == 2 and report.headline().startswith(
        "Nothing was checked: every axis was skipped"
    )  # nothing ran


@pytest.mark.skipif(in_process_reason(None) is not None, reason="this torch's threads axis needs fresh processes")
def test_the_threads_axis_runs_in_this_process_where_set_num_threads_governs_every_pool():
    class Local(nn.Module):  # a class no child process could import
        def forward(self, x):
            return x * 2

    report = check(Local(), torch.ones(2, 3), axes=("threads",), threads=(1, 2))
    threads = report.axis("threads")
    assert threads.verdict == "identical" and threads.details.in_process
    assert [c.label for c in threads.details.children] == ["1 thread", "2 threads"]


def test_in_memory_model_is_shipped_to_children():
    report = check(nn.LayerNorm(4), torch.randn(3, 4), axes=("process",))
    assert report.axis("process").verdict == "identical" and report.axis("process").runs == 2


def test_a_crashing_child_is_an_error_for_its_axis():
    report = check(spec("crash_one_thread"), axes=("threads",), threads=(1, 2))
    threads = report.axis("threads")
    assert threads.verdict == "error" and "no single-thread kernel" in threads.reason
    assert report.exit_code == 2


def test_a_child_that_hangs_times_out():
    report = check(spec("slow_in_children"), axes=("process",), timeout=3)
    assert report.axis("process").verdict == "error" and "timed out after 3 s" in report.axis("process").reason


def test_shape_changes_are_a_divergence_not_a_crash():
    report = check(spec("shape_changes"), axes=("repeat",), runs=6)
    assert report.axis("repeat").verdict == "diverged"
    assert "Shapes do not match" in report.axis("repeat").difference.message


def test_non_tensor_leaves_compare_by_equality():
    report = check(spec("labels"), axes=("seed",), runs=6)
    assert report.axis("seed").verdict == "diverged"
    assert report.axis("seed").difference.path == ".label"


def test_torchscript_model_says_localisation_is_unavailable(tmp_path):
    path = tmp_path / "m.pt"
    torch.jit.trace(nn.Linear(4, 4), torch.ones(1, 4)).save(str(path))
    report = check(str(path), torch.randn(2, 4), axes=("repeat",))
    assert report.localization == "localisation is unavailable: hooks cannot see inside a torchscript model"


def test_list_input_detector_on_the_batch_axis():
    report = check("demo:detector", axes=("batch",), batch_sizes=(1, 2))
    assert report.axis("batch").verdict in ("identical", "diverged")
    assert report.axis("batch").details.sizes == [1, 2]


def test_inputs_without_a_batch_dim_skip_the_batch_axis():
    report = check(nn.Tanh(), torch.tensor(0.5), axes=("batch",))
    assert report.axis("batch").verdict == "skipped" and "no batch dimension" in report.axis("batch").reason


def test_bad_options_are_user_errors():
    with pytest.raises(UserError, match="unknown axis speed"):
        check(spec("clean"), axes=("speed",))
    with pytest.raises(UserError, match=r"runs \(--runs\) must be >= 2"):
        check(spec("clean"), runs=1)
    with pytest.raises(UserError, match="forward raised RuntimeError"):
        check(spec("broken_forward"))


def test_format_groups():
    sizes = [1, 2, 3, 4, 7, 8, 16, 32]
    assert format_groups([[1], [2, 3], [4, 7, 8, 16, 32]], sizes) == "{1} {2,3} {4..32}"
    assert format_groups([[1, 4], [2, 3, 7]], [1, 2, 3, 4, 7]) == "{1,4} {2,3,7}"


def test_cli_check_json_matches_schema_and_exit_code(tmp_path):
    out = tmp_path / "r.json"
    result = run_cli(
        "check", spec("batch_variant"), "--axes", "repeat,batch", "--batch-sizes", "1,2", "--json", str(out)
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0].startswith("Outputs change across batch")
    data = json.loads(out.read_text())
    schema = json.loads(resources.files("samebits").joinpath("schemas/check.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert data["exit_code"] == 1 and data["axes"][1]["origin"]["module"] == "fc"


def test_cli_check_errors_are_one_line():
    result = run_cli("check", spec("broken_forward"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("samebits: error: the model's forward raised RuntimeError")
    assert len(result.stderr.strip().splitlines()) == 1
    assert run_cli("check", "demo:nope").returncode == 2
    assert "give atol and rtol both" in run_cli("check", "--atol", "1e-3").stderr


def test_samebits_check_lint_and_doctor_are_plain_functions():
    import inspect

    import samebits
    import samebits.checker.report  # noqa: F401  importing a submodule must not hide the function
    import samebits.diagnosis.report  # noqa: F401
    import samebits.linter.report  # noqa: F401

    for fn in (samebits.check, samebits.lint, samebits.doctor, samebits.bench):
        assert inspect.isfunction(fn), fn
    assert {"axes", "batch_sizes", "runtime"} <= set(inspect.signature(samebits.check).parameters)
    assert (
        inspect.signature(samebits.check).parameters["model_or_spec"].default is inspect.Parameter.empty
    )  # no demo default
    report = samebits.check(spec("clean"), axes=("repeat",))
    assert report.ok and isinstance(report, samebits.checker.CheckReport)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; this machine has none")
def test_check_on_cuda():
    report = check(spec("clean"), axes=("repeat", "batch"), device="cuda", batch_sizes=(1, 2))
    assert report.axis("repeat").verdict == "identical"


def test_docs_check_md_shows_the_cause_registry():
    from samebits.rules.causes import render_table

    assert render_table() in (REPO / "docs" / "check.md").read_text(), "paste render_table() into docs/check.md"


def test_each_fix_text_is_written_once_in_src():
    """check, check --generate and the rules take their fixes from the registry, never a copy."""
    from samebits.rules.causes import CAUSES

    texts = {t for c in CAUSES.values() for t in (c.fix, *c.fixes.values())}
    src = REPO / "src" / "samebits"
    sources = {p: p.read_text() for p in src.rglob("*.py") if p.name != "causes.py" or p.parent.name != "rules"}
    copies = [(t[:40], str(p.relative_to(src))) for t in texts for p, s in sources.items() if t[:40] in s]
    assert copies == []


@pytest.mark.parametrize(
    ("atol", "rtol", "fragment"),
    [(0.1, None, "give atol and rtol both or neither"), (None, 1e-3, "both or neither"), (float("nan"), 0.0, ">= 0")],
)
def test_the_library_check_validates_tolerances_as_the_cli_does(atol, rtol, fragment):
    with pytest.raises(UserError, match=fragment):
        check("demo:mlp", axes=("repeat",), atol=atol, rtol=rtol)


def test_rows_coupled_by_design_get_their_own_cause_not_a_tile_size():
    report = check(spec("contrastive"), axes=("batch",))
    (cause,) = report.causes
    assert cause.code == "rows-coupled" and "logits_per_image" in cause.summary and "[1, 5] at batch 5" in cause.summary
    assert "fixed tile size would change" in cause.fix
    through = check(spec("contrastive"), axes=("batch",), runtime="predictor")  # not hidden by running rows alone
    assert [a.verdict for a in through.axes] == ["diverged"] and through.causes[0].code == "rows-coupled"


def test_runtime_children_reuse_the_parents_calibration_at_its_max_batch_size(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMEBITS_CACHE_DIR", str(tmp_path))
    report = check("demo:mlp", axes=("batch", "process"), runtime="predictor", max_batch_size=8, processes=2)
    assert {a.axis: a.verdict for a in report.axes} == {"batch": "identical", "process": "identical"}
    (calibration,) = tmp_path.glob("calibration-*.json")  # one: the children read the parent's
    assert max(json.loads(calibration.read_text())["measured"]["tried"]) == 8


def test_flipped_labels_are_the_headline_before_a_box_shift(tmp_path):
    """The user's symptom first: 2 flipped labels out of 300, not the first output that differs
    ([1].boxes, 1e-4); per image and key in the JSON, and in the terminal."""
    out = tmp_path / "r.json"
    result = run_cli("check", spec("flaky_detector"), "--axes", "repeat", "--json", str(out))
    assert result.returncode == 1, result.stderr
    headline = result.stdout.splitlines()[0]
    assert "[1].labels: 2 of 300 differ" in headline
    data = json.loads(out.read_text())
    schema = json.loads(resources.files("samebits").joinpath("schemas/check.schema.json").read_text())
    jsonschema.validate(data, schema)
    diff = data["axes"][0]["difference"]
    assert diff["path"] == "[1].boxes"  # the first path outside the tolerance
    assert diff["noticed"] == "[1].labels: 2 of 300 differ"
    first, second = diff["outputs"]
    assert (first["kind"], first["item"], first["key"], first["differing"], first["numel"]) == (
        "flips",
        1,
        "labels",
        2,
        300,
    )
    assert (second["kind"], second["key"], second["differing"]) == ("values", "boxes", 1200)
    assert abs(second["max_abs"] - 1e-4) < 1e-5
    assert "outputs that differ (2)" in result.stdout and "[1].boxes: 1200 of 1200 values differ" in result.stdout
    if importlib.util.find_spec("matplotlib"):  # the HTML page (the 'report' extra)
        from samebits.report.html import render

        page = render(data)
        assert page.index("<td>[1].labels</td><td>2 of 300 differ</td>") < page.index("<td>[1].boxes</td>")


def test_cli_max_batch_size_caps_the_runtime_calibration_of_check_and_bench(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMEBITS_CACHE_DIR", str(tmp_path / "cache"))
    result = run_cli("check", "demo:mlp", "--runtime", "predictor", "--max-batch-size", "4", "--axes", "batch")
    assert result.returncode == 0, result.stderr
    (calibration,) = (tmp_path / "cache").glob("calibration-*.json")
    assert max(json.loads(calibration.read_text())["measured"]["tried"]) == 4
    out = tmp_path / "bench.json"
    bench = run_cli(
        "bench", "demo:mlp", "--batch-sizes", "1,4", "--backends", "eager", "--max-batch-size", "2",
        "--rounds", "2", "--budget", "0.3", "--json", str(out), timeout=300,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    verified = json.loads(out.read_text())["invariance"]
    assert verified and all(max(sizes) <= 2 for sizes in verified.values())


def test_the_first_op_named_is_one_with_arithmetic():
    """A module that flattens [B, T] into rows: the view's rows are cut as a batch's and differ,
    but no view computes anything; the first op named is the matmul after it."""
    from samebits.measure.ops import OpCall, first_op_difference

    def ops(*calls):
        return [OpCall(name, "in", out) for name, out in calls]

    a = ops(("view", "v1"), ("t", "w"), ("addmm", "m1"), ("gelu", "g1"))
    b = ops(("view", "v2"), ("t", "w"), ("addmm", "m2"), ("gelu", "g2"))
    assert first_op_difference(a, b) == "aten.addmm (op 3 of 4 in the module)"
    assert first_op_difference(a[:2], b[:2]) is None  # only views differ: no op to name
    assert first_op_difference(a, ops(("view", "v1"), ("mm", "x"))) == "the ops differ from op 2 on (t vs mm)"


def test_the_first_op_named_computes_other_bits_from_the_same_inputs():
    """Tokens sorted by expert differ with the neighbours (their inputs were the row's own), then
    every op after takes differing inputs: the kernel's op is the first floating-point op with
    arithmetic, never the sort or an index computation; the coupling op is the sort."""
    from samebits.measure.ops import OpCall, first_op_difference

    a = [OpCall("sort", "i", "s1", floating=False), OpCall("floor_divide", "s1", "f1", floating=False)]
    b = [OpCall("sort", "i", "s2", floating=False), OpCall("floor_divide", "s2", "f2", floating=False)]
    a += [OpCall("index", "s1", "x1"), OpCall("mm", "x1", "y1"), OpCall("add", "n", "z1")]
    b += [OpCall("index", "s2", "x2"), OpCall("mm", "x2", "y2"), OpCall("add", "n", "z2")]
    assert first_op_difference(a, b) == "aten.add (op 5 of 5 in the module)"  # the same inputs, other bits
    assert first_op_difference(a[:4], b[:4]) == "aten.mm (op 4 of 4 in the module)"  # else the first with arithmetic
    assert first_op_difference(a, b, coupling=True) == "aten.sort (op 1 of 5 in the module)"


def test_ops_before_the_runs_part_are_named_before_the_parting():
    from samebits.measure.ops import OpCall, first_op_difference

    a = [OpCall("eq", "x", "m"), OpCall("nonzero", "m", "r1", floating=False), OpCall("addmm", "r1", "y")]
    b = [OpCall("eq", "x", "m"), OpCall("nonzero", "m", "r2", floating=False), OpCall("mul", "r2", "y")]
    assert first_op_difference(a, b, coupling=True) == "aten.nonzero (op 2 of 3 in the module)"
    assert first_op_difference(a, b) == "the ops differ from op 3 on (addmm vs mul)"


TOKENS = """
import torch
from torch import nn

class SizeAware(nn.Module):
    \"\"\"Experts over a batch's tokens: their bits follow the token count, as a GEMM's may.\"\"\"
    def forward(self, tokens, weights):
        return tokens * weights + tokens.shape[0] * 1e-3

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.route = nn.Linear(8, 1)
        self.experts = SizeAware()

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])  # [B, T, H] -> [B*T, H], as a mixture of experts does
        return self.experts(flat, torch.sigmoid(self.route(flat))).view_as(x)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.block = Block()

    def forward(self, x):
        return self.block(self.embed(x))

def build():
    torch.manual_seed(0)
    return Model().eval(), torch.randn(4, 5, 8)
"""


def test_a_module_fed_the_batch_flattened_to_tokens_is_named_in_place_of_its_parent(tmp_path):
    """Qwen2-MoE's experts take the batch as [B*T, H]: the whole tensor differs from the sample's
    alone, so the parent was named; compared by each row's block of tokens, the experts are."""
    (tmp_path / "tokens.py").write_text(TOKENS)
    report = check(f"{tmp_path / 'tokens.py'}:build", axes=("batch",))
    origin = report.axis("batch").origin
    assert origin is not None and (origin.module, origin.type) == ("block.experts", "SizeAware")
    assert origin.inputs_identical and origin.op == "aten.add (op 2 of 2 in the module)"


@pytest.mark.parametrize(
    ("model", "coupling"),
    [
        ("packed_gru", "aten._pack_padded_sequence in <model> (PackedGRU)"),
        ("quantized_lstm", "aten.quantized_lstm in inner.0 (LSTM)"),
        ("top_one_router", "aten.nonzero in <model> (TopOneRouter)"),
    ],
)
def test_neighbours_matter_names_the_op_where_a_row_first_follows_them(model, coupling):
    """Where other neighbours change a row at one size, the cause names the op that couples the
    rows: the packing by every row's length, the per-batch quantization, the routing."""
    report = check(spec(model), axes=("batch",))
    if model == "top_one_router" and report.axis("batch").verdict == "identical":
        pytest.skip("this CPU's GEMMs give a row the same bits at every row count here: nothing couples the rows")
    assert report.axis("batch").details.coupling_op == coupling
    assert f"a row first follows its neighbours at {coupling}" in report.causes[0].evidence


def test_neighbours_that_vary_every_per_row_input_find_a_packed_gru_and_the_predictor_runs_it_row_by_row(tmp_path):
    """A packed GRU's rows depend on the other rows' lengths: neighbours drawn with the sample's own
    length never showed it ("batch identical 8/8" through the Predictor); drawn over the batch's
    range they do, the cause says so, and the Predictor runs one row per forward."""
    import torch

    import samebits

    models = check_models()
    report = check(spec("packed_gru"), axes=("batch",))
    assert report.axis("batch").details.neighbours_matter
    assert [c.code for c in report.causes] == ["neighbours-matter"]
    assert "other neighbours at the same position give the sample other bits" in report.causes[0].evidence
    assert "a fixed tile size does not help" in report.causes[0].fix
    model, example = models.packed_gru()
    with samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path) as p:
        assert p.invariance.sizes == [1] and any("every row runs alone" in n for n in p.notes)
        x = torch.randn(6, 12, models.WIDTH, generator=torch.Generator().manual_seed(5))
        lengths = torch.tensor([12, 3, 7, 12, 1, 9])
        out = p.predict({"x": x, "lengths": lengths})
        assert all(torch.equal(out[i], p.predict_one({"x": x[i], "lengths": lengths[i]})) for i in range(6))
    through = samebits.check(model, example, axes=("batch",), runtime="predictor")
    assert through.axis("batch").verdict == "identical"


def test_weights_built_otherwise_in_a_fresh_process_are_named_before_any_forward_cause(tmp_path, monkeypatch):
    """A factory whose initialisation follows the thread count (RWKV's orthogonal init): the thread
    axis's children differ because their weights do, not their forwards; the cause says so."""
    monkeypatch.setenv("SAMEBITS_CACHE_DIR", str(tmp_path))
    report = check(spec("weights_by_threads"), axes=("threads",), runtime="predictor")  # threads in children
    threads = report.axis("threads")
    assert threads.verdict == "diverged" and threads.details.weights_differ == {"2 threads": ["weight"]}
    (cause,) = report.causes
    assert cause.code == "weights-at-construction" and "before any forward (weight)" in cause.evidence
    assert "load the weights from a file" in cause.fix


@pytest.mark.parametrize(
    ("model", "code", "evidence"),
    [
        ("positional_noise", "position-dependent", "the same neighbours with the sample at another position"),
        ("quantized_lstm", "neighbours-matter", "other neighbours at the same position give the sample other bits"),
    ],
)
def test_the_batch_cause_names_the_mechanism_it_measured(model, code, evidence):
    """Noise seeded by a row's position and a dynamically quantized LSTM (one activation scale per
    batch) both got the batch-size cause and its fixed-tile fix, which works for neither."""
    report = check(spec(model), axes=("repeat", "batch"))
    assert [c.code for c in report.causes] == [code]
    assert (
        evidence in report.causes[0].evidence and "run every forward at one fixed tile size" not in report.causes[0].fix
    )


def test_a_top_one_router_over_experts_is_run_row_by_row_by_the_predictor(tmp_path):
    """Which neighbours share a row's expert changes that expert's GEMM (Qwen2-MoE: sizes verified,
    yet a row in a batch of 3 differed from it alone): measured as neighbours-matter, run alone."""
    import torch

    import samebits

    report = check(spec("top_one_router"), axes=("batch",))
    if report.axis("batch").verdict == "identical":
        pytest.skip("this CPU's GEMMs give a row the same bits at every row count here: nothing couples the rows")
    assert [c.code for c in report.causes] == ["neighbours-matter"]
    models = check_models()
    model, example = models.top_one_router()
    x = torch.randn(9, models.WIDTH, generator=torch.Generator().manual_seed(9))
    with samebits.Predictor(model, example_inputs=example, cache_dir=tmp_path) as p:
        out = p.predict(x)
        assert p.invariance.sizes == [1] and all(torch.equal(out[i], p.predict_one(x[i])) for i in range(9))

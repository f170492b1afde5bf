import json
import os
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import torch
from safetensors.torch import save_file

import samebits
from samebits.golden import read_golden, record, verify
from samebits.golden.format import GoldenError
from samebits.errors import UserError

from conftest import rewrite_golden, run_cli

MODELS = Path(__file__).with_name("golden_models.py")


def spec(name):
    return f"{MODELS}:{name}"


def rewrite(path, edit_tensors=None, edit_header=None):
    """Rewrite a golden in place with edited tensors and/or header, keeping everything else."""
    rewrite_golden(path, edit_header=edit_header, edit_tensors=edit_tensors)


@pytest.fixture
def golden(tmp_path):
    return record(spec("make"), tmp_path / "g.safetensors")


def test_round_trip_is_identical_bits(golden):
    report = verify(golden, spec("make"))
    assert report.verdict == "identical" and report.exit_code == 0
    assert report.policy == "exact" and "matches in every field" in report.policy_reason
    assert [c.path for c in report.items] == [".count", ".logits", ".name"]


def test_inputs_and_non_tensor_leaves_round_trip(tmp_path):
    path = record(spec("make_kwargs"), tmp_path / "k.safetensors")
    g = read_golden(path)
    inputs = g.inputs()
    assert inputs.args == () and set(inputs.kwargs) == {"x", "scale"}
    assert torch.equal(inputs.kwargs["scale"]["factor"], torch.tensor(2.0))
    assert g.outputs[".count"] == 4 and g.outputs[".name"] == "two-layer"
    assert {"inputs/kwargs.x", "inputs/kwargs.scale.factor", "outputs/logits", "outputs/scaled"} <= set(g.tensors)
    assert verify(path, spec("make_kwargs")).verdict == "identical"


def test_one_tampered_value_is_a_mismatch_at_its_path_and_index(golden):
    def bump(tensors):
        tensors["outputs/logits"][2, 1] += 0.5

    rewrite(golden, bump)
    report = verify(golden, spec("make"))
    assert report.verdict == "diverged" and report.exit_code == 1
    bad = [c for c in report.items if c.verdict != "identical"]
    assert [c.path for c in bad] == [".logits"]
    assert bad[0].max_abs_index == [2, 1] and "Mismatched elements: 1 / 12 (8.3%)" in bad[0].message()


def test_fingerprint_difference_switches_to_dtype_tolerances_and_names_the_cause(golden):
    def other_cpu(header):
        header["fingerprint"]["cpu"]["capability"] = "SVE256"  # a capability this machine does not have

    def nudge(tensors):
        t = tensors["outputs/logits"]
        t[0, 0] = torch.nextafter(t[0, 0], torch.tensor(10.0))

    rewrite(golden, nudge, other_cpu)
    report = verify(golden, spec("make"))
    assert report.policy == "dtype-defaults" and "cpu.capability" in report.policy_reason
    assert report.verdict == "close" and report.ok
    assert any(
        line.startswith("cpu.capability SVE256 -> ") and "pick other vectorised kernels" in line
        for line in report.likely_causes()
    )
    assert verify(golden, spec("make"), exact=True).verdict == "diverged"


def test_first_module_that_changed_is_named(golden):
    report = verify(golden, spec("changed_fc2"))
    assert report.verdict == "diverged"
    assert report.first_module == "fc2 (Linear)"


def test_refuses_to_overwrite_without_force(golden):
    before = golden.read_bytes()
    with pytest.raises(UserError, match="exists; pass --force"):
        record(spec("make"), golden)
    assert golden.read_bytes() == before
    record(spec("changed_fc2"), golden, torch.ones(1, 6), force=True)
    assert read_golden(golden).header["model"].endswith("golden_models.py:changed_fc2")


def test_stored_spec_is_relative_to_the_golden(tmp_path, monkeypatch):
    models = tmp_path / "models"
    models.mkdir()
    (models / "net.py").write_text(MODELS.read_text())
    monkeypatch.chdir(tmp_path)
    path = record("models/net.py:make", tmp_path / "goldens" / "net.safetensors")
    assert read_golden(path).header["model"] == "../models/net.py:make"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    with pytest.raises(
        UserError, match=r"names the MODEL '../models/net.py:make', which is code; .*pass the MODEL on the command line"
    ):
        verify(path)  # a stored file.py:factory spec is code: never run from what a file says
    assert verify(path, str(models / "net.py") + ":make").verdict == "identical"


def test_a_data_only_stored_spec_is_reused(tmp_path):
    path = record("demo:mlp", tmp_path / "demo.safetensors")
    assert verify(path).verdict == "identical"


@pytest.mark.parametrize(
    ("make_file", "message"),
    [
        (lambda p, g: p.write_bytes(g.read_bytes()[:200]), "not a readable safetensors file (corrupt or truncated)"),
        (lambda p, g: p.write_bytes(b"\x00" * 64), "not a readable safetensors file"),
        (lambda p, g: save_file({"a": torch.ones(1)}, str(p)), "not a samebits golden"),
        (lambda p, g: save_file({"a": torch.ones(1)}, str(p), metadata={"samebits": "{nope"}), "not JSON"),
    ],
)
def test_unreadable_files_are_one_line_errors(tmp_path, golden, make_file, message):
    bad = tmp_path / "bad.safetensors"
    make_file(bad, golden)
    with pytest.raises(GoldenError, match=re.escape(message)):
        verify(bad)
    result = run_cli("verify", str(bad))
    assert (
        result.returncode == 2
        and len(result.stderr.strip().splitlines()) == 1
        and message.split(" (")[0] in result.stderr
    )


def test_a_file_that_claims_a_pickle_or_an_unknown_schema_is_refused(golden):
    rewrite(golden, edit_header=lambda h: h.update(encoding="pickle"))
    with pytest.raises(GoldenError, match="claims encoding 'pickle'; .* never unpickles"):
        read_golden(golden)
    rewrite(golden, edit_header=lambda h: h.update(encoding="json+safetensors", schema_version=99))
    with pytest.raises(GoldenError, match="schema_version 99"):
        read_golden(golden)


def test_golden_from_an_in_memory_model_needs_the_model_to_verify(tmp_path):
    model = torch.nn.Linear(2, 2)
    path = record(model, tmp_path / "m.safetensors", torch.ones(1, 2))
    with pytest.raises(UserError, match="pass the MODEL"):
        verify(path)
    assert verify(path, model).verdict == "identical"


def test_cli_record_and_verify(tmp_path):
    path = tmp_path / "cli.safetensors"
    result = run_cli("record", spec("make"), "-o", str(path))
    assert result.returncode == 0, result.stderr
    assert run_cli("record", spec("make"), "-o", str(path)).returncode == 2
    out = tmp_path / "v.json"
    refused = run_cli("verify", str(path))
    assert refused.returncode == 2 and "pass the MODEL on the command line" in refused.stderr
    verified = run_cli("verify", str(path), spec("make"), "--json", str(out))
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr == f"samebits: wrote {out}\n"  # the "importing MODEL" line is for terminals only
    assert json.loads(out.read_text())["model"].endswith("golden_models.py:make")
    data = json.loads(out.read_text())
    schema = json.loads(resources.files("samebits").joinpath("schemas/verify.schema.json").read_text())
    jsonschema.validate(data, schema)
    changed = run_cli("verify", str(path), spec("changed_fc2"))
    assert (
        changed.returncode == 1 and "first module whose output changed since recording: fc2 (Linear)" in changed.stdout
    )
    assert run_cli("verify", str(path), spec("make"), "--exact", "--atol", "1", "--rtol", "1").returncode == 2


def test_write_leaves_no_temporary_files(tmp_path):
    record(spec("make"), tmp_path / "a.safetensors")
    assert sorted(os.listdir(tmp_path)) == ["a.safetensors"]


def test_an_output_that_appears_or_disappears_is_a_mismatch(golden):
    def drop(header):
        header["output_paths"].remove(".name")
        del header["output_values"][".name"]

    rewrite(golden, edit_header=drop)
    item = next(c for c in verify(golden, spec("make")).items if c.path == ".name")
    assert item.verdict == "diverged" and item.reason == "Path .name is missing in the golden."


def test_a_golden_recorded_through_the_predictor_verifies_through_it(tmp_path):
    path = record("demo:mlp", tmp_path / "served.safetensors", runtime="predictor")
    header = read_golden(path).header
    assert header["runtime"] == "predictor" and header["digest"] == "sha256"
    report = verify(path)
    assert report.policy == "exact" and all(c.verdict == "identical" for c in report.items)
    with pytest.raises(UserError, match="unknown runtime"):
        record("demo:mlp", tmp_path / "bad.safetensors", runtime="nope")


def test_verify_says_the_weights_changed_and_which(tmp_path):
    """The fingerprint matches and the bits differ: the golden's weights digests name the tensor
    that changed before any module is blamed."""

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    x = torch.randn(3, 8)
    golden = samebits.record(model, tmp_path / "g.safetensors", x)
    same = samebits.verify(golden, model)
    assert same.ok and same.weights_changed == []
    with torch.no_grad():
        model[2].weight[0, 0] += 1e-3  # one weight nudged
    report = samebits.verify(golden, model)
    assert not report.ok and report.weights_changed == ["2.weight"]
    data = report.to_dict()
    assert data["weights_changed"] == ["2.weight"]


def test_a_golden_records_its_device_and_verify_runs_on_the_same_kind(golden, tmp_path):
    # B7: record and verify take --device; a golden recorded on a GPU is verified on one
    assert read_golden(golden).header["device"] == "cpu"
    assert verify(golden, spec("make"), device="cpu").ok
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="CUDA is not available here"):
            verify(golden, spec("make"), device="cuda")
    with pytest.raises(UserError, match="CUDA is not available here"):
        record(spec("make"), tmp_path / "gpu.safetensors", device="cuda")
    rewrite(golden, edit_header=lambda h: h.update(device="cuda"))
    result = run_cli("verify", str(golden), spec("make"), "--device", "cpu")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "was recorded on cuda; verify runs on the same kind of device, not cpu (--device cuda)" in result.stderr
    rewrite(golden, edit_header=lambda h: h.update(device="tpu"))
    with pytest.raises(GoldenError, match="recorded on 'tpu', not a device samebits knows"):
        read_golden(golden)

"""samebits doctor: measured findings on small models with one known problem each."""

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import torch
from torch import nn

from samebits.diagnosis import doctor
from samebits.errors import UserError

from conftest import run_cli

MODELS = Path(__file__).with_name("check_models.py")
QUICK = dict(backends=(), iterations=10, budget=0.5)


def spec(name):
    return f"{MODELS}:{name}"


def codes(report):
    return {f.code: f for f in report.findings}


def probes(report):
    return {p.probe: p for p in report.probes}


def test_modules_in_training_mode_are_errors():
    report = doctor(spec("dropout_on"), **QUICK)
    finding = codes(report)["SB151"]
    assert finding.severity == "error" and "1 (Dropout)" in finding.message
    assert report.exit_code == 1


def test_grad_on_outputs_and_memory_growth_are_measured():
    report = doctor(spec("wide"), **{**QUICK, "iterations": 30})
    assert codes(report)["SB351"].severity == "error"
    memory = codes(report)["SB352"]
    assert memory.details["as_is"]["iterations"] == 30 and memory.details["as_is"]["carries_grad"]
    assert memory.details["as_is"]["grown_mb"] > memory.details["inference_mode"]["grown_mb"]
    # the ReLU output that fc2's backward needs: 64 x 2048 float32 = 0.5 MB per kept output
    assert memory.details["retained_mb_per_output"] > 0.3


def test_no_grad_model_has_no_grad_or_memory_finding():
    report = doctor(spec("wide_no_grad"), **QUICK)
    assert "SB351" not in codes(report) and "SB352" not in codes(report)
    assert probes(report)["memory growth"].status == "ran"


def test_memory_probe_stops_at_the_cap():
    report = doctor(spec("wide"), backends=(), iterations=200, memory_cap_mb=3, budget=0.5)
    as_is = probes(report)["memory growth"].details["as_is"]
    assert as_is["capped"] and as_is["iterations"] < 200
    assert "SB352" in codes(report)  # a grad-carrying loop that hits the cap grows without bound
    assert "stopped at the 3 MB cap" in probes(report)["memory growth"].summary


def test_batch_variance_and_batching_probes():
    report = doctor(spec("batch_variant"), **QUICK)
    assert codes(report)["SB152"].severity == "warning"
    assert "groups" in codes(report)["SB152"].details
    assert probes(report)["batching throughput"].status == "ran"
    assert "samples/s" in probes(report)["batching throughput"].summary


def test_clean_model_has_no_warning_or_error():
    model, x = nn.LayerNorm(8).requires_grad_(False), torch.randn(4, 8)
    report = doctor(model, x, **QUICK)
    # batching speed is measured, not known; so is oversubscription, which a busy machine causes
    # (then the finding carries the rounds that showed 1 thread running faster)
    measured = [f for f in report.findings if f.code == "SB153" and f.details.get("one_thread_speedup")]
    assert [f.code for f in report.findings if f.severity != "info" and f not in measured] in ([], ["SB251"])


def test_oversubscribed_threads_are_a_warning():
    from samebits.diagnosis.run import available_cores

    before = torch.get_num_threads()
    torch.set_num_threads(available_cores() * 2)
    try:
        report = doctor(nn.Identity(), torch.ones(4, 2), **QUICK)
    finally:
        torch.set_num_threads(before)
    assert codes(report)["SB153"].severity == "warning"


def test_probes_that_cannot_run_are_skipped_with_a_reason():
    class Local(nn.Module):
        def forward(self, x):
            return x * 2

    report = doctor(Local(), torch.tensor(3.0), **QUICK)
    status = probes(report)
    assert (
        status["memory growth"].status == "skipped" and "defined inside a function" in status["memory growth"].summary
    )
    assert (
        status["batching throughput"].status == "skipped"
        and "no batch dimension" in status["batching throughput"].summary
    )
    assert status["backends"].status == "skipped"
    assert all(p.status != "ran" or p.summary for p in report.probes)


def test_backends_are_compared_with_eager_bits():
    report = doctor(spec("clean"), backends=("torchscript",), iterations=5, budget=0.5)
    summary = probes(report)["backends"].summary
    assert summary.startswith("torchscript ") and ("identical bits" in summary or "bits differ" in summary)


def test_backends_of_a_model_in_training_mode_are_measured_in_eval_mode():
    """Dropout on in eager would make every backend 'differ': the probe compares eval with eval."""
    report = doctor(spec("dropout_on"), backends=("torchscript",), iterations=5, budget=0.5)
    summary = probes(report)["backends"].summary
    assert summary.startswith("measured in eval mode (the model is in training mode); torchscript ")
    assert "identical bits" in summary  # Dropout(0.5) in eager would differ in half the elements


def test_bad_options():
    with pytest.raises(UserError, match="unknown backend tensorrtx"):
        doctor(spec("clean"), backends=("tensorrtx",))
    with pytest.raises(UserError, match="forward raised RuntimeError"):
        doctor(spec("broken_forward"), **QUICK)


def test_cli_doctor_json(tmp_path):
    out = tmp_path / "d.json"
    result = run_cli("doctor", spec("dropout_on"), "--backends", "", "--iterations", "5", "--json", str(out))
    assert result.returncode == 1, result.stderr
    assert "SB151 modules-in-training-mode" in result.stdout
    data = json.loads(out.read_text())
    schema = json.loads(resources.files("samebits").joinpath("schemas/doctor.schema.json").read_text())
    jsonschema.validate(data, schema)
    assert {p["probe"] for p in data["probes"]} == {
        "training mode",
        "grad on outputs",
        "memory growth",
        "batching throughput",
        "batch variance",
        "threads",
        "backends",
    }

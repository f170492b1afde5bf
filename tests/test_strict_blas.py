"""samebits predict under MKL's strict mode (samebits.determinism.strict_blas): set where the
command line starts, recorded in the manifest, taken up again by verify; the thread plan then
runs every core where the strict mode makes a model's bits independent of the thread count."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from samebits.determinism import strict_blas
from tests.conftest import run_cli, run_python, scrubbed_env

EQUAL_AT_1_AND_ALL = """
import torch
from samebits.models import load_model
loaded = load_model("demo:mlp")
model, x = loaded.model.eval(), torch.randn(64, *loaded.example_inputs.args[0].shape[1:])
outs = []
for n in (1, torch.get_num_threads()):
    torch.set_num_threads(n)
    with torch.inference_mode():
        outs.append(model(x))
print(torch.equal(*outs))
"""


def test_predict_runs_strict_and_verify_as_the_run_did(monkeypatch, tmp_path):
    monkeypatch.delenv("MKL_CBWR", raising=False)
    assert strict_blas.choose("predict", []) == "AUTO,STRICT"
    assert strict_blas.choose("check", ["demo:mlp"]) is None
    assert strict_blas.choose("verify", [str(tmp_path)]) is None  # no manifest: a golden's verify
    (tmp_path / "manifest.json").write_text(json.dumps({"fingerprint": {"env": {"MKL_CBWR": "AUTO,STRICT"}}}))
    assert strict_blas.choose("verify", ["--shards", "2", str(tmp_path)]) == "AUTO,STRICT"
    (tmp_path / "manifest.json").write_text("[" * 100 + "]" * 100)  # unreadable: verify says so itself
    assert strict_blas.choose("verify", [str(tmp_path)]) is None
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    assert strict_blas.choose("predict", []) is None  # the user's value is kept


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: there is no thread count to choose")
def test_a_predict_process_records_the_strict_mode_and_its_thread_plan_follows(tmp_path):
    x = torch.randn(300, 256, generator=torch.Generator().manual_seed(0))
    np.save(tmp_path / "x.npy", x.numpy())
    out = tmp_path / "out"
    ran = run_cli("predict", "demo:mlp", str(tmp_path / "x.npy"), "-o", str(out), "--shard-size", "100", timeout=300)
    assert ran.returncode == 0, ran.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["fingerprint"]["env"]["MKL_CBWR"] == "AUTO,STRICT"
    # the plan says what a process under the same mode measures
    free = run_python(EQUAL_AT_1_AND_ALL, env=scrubbed_env(MKL_CBWR="AUTO,STRICT")).stdout.strip() == "True"
    threads = manifest["threads"]
    if free:
        assert threads["per_worker"] == os.cpu_count() and "same bits" in threads["why"], threads
    # verify starts under the recorded mode (a fresh process without the variable)
    verified = run_cli("verify", str(out), timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    # a user's own value is kept, recorded, and verify then runs under the recorded one too
    other = tmp_path / "other"
    ran = run_cli(
        "predict",
        "demo:mlp",
        str(tmp_path / "x.npy"),
        "-o",
        str(other),
        env=scrubbed_env(MKL_CBWR="COMPATIBLE"),
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads((other / "manifest.json").read_text())["fingerprint"]["env"]["MKL_CBWR"] == "COMPATIBLE"

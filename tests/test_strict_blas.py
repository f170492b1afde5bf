"""samebits predict under MKL's strict mode (samebits.determinism.strict_blas): set where the
command line starts, recorded in the manifest, taken up again by verify; the thread plan then
runs every core where the strict mode makes a model's bits independent of the thread count."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from samebits.cli import strict_blas
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
    manifest = {"kind": "predict", "fingerprint": {"env": {"MKL_CBWR": "AUTO,STRICT"}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert strict_blas.choose("verify", ["--shards", "2", str(tmp_path)]) == "AUTO,STRICT"
    for other in (
        {**manifest, "fingerprint": {"env": {"MKL_CBWR": "AVX2,STRICT"}}},  # a portable level's: --portable's
        {**manifest, "kind": "golden"},
        {**manifest, "fingerprint": "x"},  # edited: verify words it, never a traceback here
    ):
        (tmp_path / "manifest.json").write_text(json.dumps(other))
        assert strict_blas.choose("verify", [str(tmp_path)]) is None
    (tmp_path / "manifest.json").write_text("[" * 100 + "]" * 100)
    assert strict_blas.choose("verify", [str(tmp_path), "x" * 5000]) is None
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    assert strict_blas.choose("predict", []) is None  # the user's value is kept


def _golden(path, env: dict) -> str:
    """A file shaped like a golden (safetensors, samebits' JSON in the header) with ``env``."""
    import json as _json

    from safetensors.torch import save_file

    meta = {"samebits": _json.dumps({"fingerprint": {"env": env}})}
    save_file({"outputs/output": torch.zeros(1)}, str(path), metadata=meta)
    return str(path)


def test_serve_runs_strict_unless_its_golden_was_recorded_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv("MKL_CBWR", raising=False)
    monkeypatch.delenv("SAMEBITS_STRICT_BLAS", raising=False)
    assert strict_blas.choose("serve", ["demo:mlp"]) == "AUTO,STRICT"
    strict = _golden(tmp_path / "strict.golden", {"MKL_CBWR": "AUTO,STRICT"})
    plain = _golden(tmp_path / "plain.golden", {})
    assert strict_blas.choose("serve", ["demo:mlp", strict], golden=strict) == "AUTO,STRICT"
    assert strict_blas.choose("serve", ["demo:mlp", plain], golden=plain) is None  # it must reproduce G's bits
    (tmp_path / "junk").write_bytes(b"\xff" * 8 + b"{")
    for unreadable in (str(tmp_path / "missing"), str(tmp_path / "junk"), str(tmp_path)):
        assert strict_blas.choose("serve", [], golden=unreadable) is None  # serve words the error
    assert strict_blas._golden_of(["serve", "m", "--golden", "g"]) == "g"
    assert strict_blas._golden_of(["serve", "m", "--golden=h"]) == "h"
    assert strict_blas._golden_of(["serve", "m", "--port", "0"]) is None
    monkeypatch.setenv("SAMEBITS_STRICT_BLAS", "0")
    assert strict_blas.choose("serve", []) is None and strict_blas.choose("predict", []) is None


def test_a_served_answer_has_the_bits_of_a_strict_process(tmp_path):
    """The default serve (strict) against a Predictor in a fresh process under the same mode."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_serve import MODELS, Server, as_tensor

    reference = run_python(
        "import torch, samebits, sys\n"
        f"sys.path.insert(0, {str(Path(MODELS).parent)!r})\n"
        f"p = samebits.Predictor({f'{MODELS}:mlp'!r}, cache_dir={str(tmp_path)!r}, max_batch_size=16)\n"
        "x = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))\n"
        "from samebits.fingerprint.diff import bit_relevant_digest\n"
        "print(bit_relevant_digest(p.fingerprint))\n"
        "print(p.predict(x).reshape(-1).tolist())",
        env=scrubbed_env(MKL_CBWR="AUTO,STRICT"),
    )
    assert reference.returncode == 0, reference.stderr
    digest, outputs = reference.stdout.strip().splitlines()[-2:]
    server = Server(f"{MODELS}:mlp", "--max-batch-size", "16", strict_blas=True)
    try:
        x = torch.randn(5, 32, generator=torch.Generator().manual_seed(2))
        status, answer = server.infer(x)
        assert status == 200
        _, _, meta = server.request(f"/v2/models/{server.name}")
    finally:
        assert server.stop() == 0
    assert json.loads(meta)["parameters"]["samebits"]["fingerprint_sha256"] == digest  # MKL_CBWR is bit-relevant
    assert as_tensor(answer).reshape(-1).tolist() == json.loads(outputs)


def test_choosing_imports_no_torch():
    ran = run_python(
        "import sys\nfrom samebits.cli import strict_blas\nstrict_blas.enter(['verify', '.'])\n"
        "print('torch' in sys.modules)"
    )
    assert ran.stdout.strip() == "False", ran.stderr


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
    # a user's own value is kept and recorded
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

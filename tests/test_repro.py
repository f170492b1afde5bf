"""`samebits check --out DIR` writes a repro folder; `--from DIR` re-runs it in a new process with
the same verdicts and says what changed; a MODEL that is code is never taken from the folder."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file

from conftest import run_cli

HERE = Path(__file__).resolve().parent
CODE_SPEC = f"{HERE / 'check_models.py'}:batch_variant"


def flat(text: str) -> str:
    return " ".join(text.split())  # the terminal wraps long lines


def verdicts(report: Path) -> dict[str, str]:
    return {a["axis"]: a["verdict"] for a in json.loads(report.read_text())["axes"]}


def test_out_then_from_reproduces_the_verdicts_and_says_what_changed(tmp_path):
    out = tmp_path / "repro"
    made = run_cli("check", "demo:mlp", "--axes", "batch,repeat", "--out", str(out))
    assert made.returncode == 1, made.stderr
    names = {p.name for p in out.iterdir()}
    assert {
        "report.json",
        "fingerprint.json",
        "inputs.safetensors",
        "origin-batch.safetensors",
        "command.txt",
        "repro.json",
    } <= names
    origin = load_file(str(out / "origin-batch.safetensors"))
    assert origin["a|<output>"].shape == origin["b|<output>"].shape and not origin["a|<output>"].equal(
        origin["b|<output>"]
    )
    assert "samebits check demo:mlp --from" in (out / "command.txt").read_text()
    again = run_cli("check", "--from", str(out), "--json", str(tmp_path / "again.json"))
    assert again.returncode == 1, again.stderr
    assert (
        verdicts(tmp_path / "again.json")
        == verdicts(out / "report.json")
        == {"batch": "diverged", "repeat": "identical"}
    )
    assert "nothing changed" in flat(again.stdout)
    stored = json.loads((out / "report.json").read_text())
    stored["fingerprint"]["threads"]["intra_op"] = 7  # as if the run had been on a machine with 7 threads
    next(a for a in stored["axes"] if a["axis"] == "batch")["verdict"] = "identical"
    (out / "report.json").write_text(json.dumps(stored))
    changed = run_cli("check", "--from", str(out))
    assert "fingerprint threads.intra_op: 7 then" in flat(changed.stdout)
    assert "axis batch: identical then, diverged now" in flat(changed.stdout)


def test_a_model_that_is_code_is_passed_again_never_taken_from_the_folder(tmp_path):
    out = tmp_path / "repro"
    assert run_cli("check", CODE_SPEC, "--axes", "batch", "--out", str(out)).returncode == 1
    refused = run_cli("check", "--from", str(out))
    assert refused.returncode == 2 and "which is code; pass it" in refused.stderr
    again = run_cli("check", CODE_SPEC, "--from", str(out))
    assert again.returncode == 1 and "nothing changed" in flat(again.stdout)


def test_out_never_writes_into_a_folder_that_is_not_a_repro(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused = run_cli("check", "demo:mlp", "--axes", "repeat", "--out", str(mine))
    assert refused.returncode == 2 and "not a samebits repro folder" in refused.stderr
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (mine / "notes.txt").read_text() == "keep me"
    bad = run_cli("check", "--from", str(mine))
    assert bad.returncode == 2 and "is not a samebits repro folder" in bad.stderr and "Traceback" not in bad.stderr

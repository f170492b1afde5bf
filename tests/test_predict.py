"""`samebits predict`: per-sample outputs equal across batch sizes and shard sizes, shard files
byte-equal for one shard size, runs killed with SIGKILL and resumed give the same bytes, and bad
input is one line without losing what was written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from samebits.errors import UserError
from samebits.offline import predict

from conftest import run_cli, scrubbed_env

HERE = Path(__file__).resolve().parent
SPEC = f"{HERE / 'predict_models.py'}:mlp"
SLOW = f"{HERE / 'predict_models.py'}:slow_mlp"
SIZES = [130, 270, 55, 300, 1, 144, 100]  # 1000 samples in files of uneven sizes


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    gen = torch.Generator().manual_seed(0)
    for i, n in enumerate(SIZES):
        x = torch.randn(n, 16, generator=gen)
        if i % 2:
            np.save(folder / f"part{i:02d}.npy", x.numpy())
        else:
            save_file({"x": x}, str(folder / f"part{i:02d}.safetensors"))
    return folder


def digests(out: Path) -> list[str]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [d for shard in manifest["shards"] for d in shard["sample_xxh3_128"]]


def shard_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.glob("shard-*.safetensors"))}


def test_outputs_do_not_depend_on_batch_size_or_shard_size(inputs, tmp_path):
    runs = {}
    for batch in (1, 7, 64):
        for shard in (100, 333):
            out = tmp_path / f"b{batch}-s{shard}"
            report = predict(SPEC, [str(inputs)], out, batch_size=batch, shard_size=shard)
            assert report.samples == 1000 and report.shards == -(-1000 // shard)
            runs[batch, shard] = out
    reference = digests(runs[1, 100])
    assert len(reference) == 1000 and len(set(reference)) == 1000
    assert all(digests(out) == reference for out in runs.values())
    for shard in (100, 333):
        assert shard_bytes(runs[1, shard]) == shard_bytes(runs[7, shard]) == shard_bytes(runs[64, shard])
    # and they are the model's outputs: shard 0 row 3 is the Predictor's answer for sample 3
    from safetensors.torch import load_file

    import predict_models
    from samebits.runtime.predictor import Predictor

    model, example = predict_models.mlp()
    first = load_file(str(runs[7, 100] / "shard-000000.safetensors"))["output"]
    x = load_file(str(sorted(inputs.iterdir())[0]))["x"]
    with Predictor(model, example_inputs=example) as predictor:
        assert torch.equal(first[3], predictor.predict_one(x[3]))


def predict_cmd(out: Path, inputs: Path, *extra: str) -> list[str]:
    """The CLI on the slow model, shards of 50, resumable."""
    return [sys.executable, "-m", "samebits", "predict", SLOW, str(inputs), "-o", str(out)] + [
        "--shard-size",
        "50",
        "--batch-size",
        "16",
        "--resume",
        *extra,
    ]


def run_until(out: Path, inputs: Path, shards_done: int, *extra: str) -> None:
    """Start the CLI on the slow model and SIGKILL it once ``shards_done`` shards are complete."""
    proc = subprocess.Popen(
        predict_cmd(out, inputs, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=scrubbed_env()
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if len(json.loads((out / "manifest.json").read_text())["shards"]) >= shards_done:
                    break
            except (OSError, json.JSONDecodeError, KeyError):
                pass
            time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_killed_at_three_points_and_resumed_gives_the_same_bytes(inputs, tmp_path):
    whole = tmp_path / "whole"
    assert (
        run_cli("predict", SLOW, str(inputs), "-o", str(whole), "--shard-size", "50", "--batch-size", "16").returncode
        == 0
    )
    broken = tmp_path / "broken"
    for point in (1, 7, 14):
        run_until(broken, inputs, point)
    done = run_cli(
        "predict", SLOW, str(inputs), "-o", str(broken), "--shard-size", "50", "--batch-size", "16", "--resume"
    )
    assert done.returncode == 0, done.stderr
    assert shard_bytes(broken) == shard_bytes(whole) and digests(broken) == digests(whole)
    assert not list(broken.glob(".*.tmp"))  # no temporary file left behind


def test_a_corrupt_shard_is_redone_by_resume(inputs, tmp_path):
    out = tmp_path / "out"
    predict(SPEC, [str(inputs)], out, shard_size=100)
    before = shard_bytes(out)
    victim = out / "shard-000004.safetensors"
    data = bytearray(victim.read_bytes())
    data[-3] ^= 0xFF
    victim.write_bytes(bytes(data))
    report = predict(SPEC, [str(inputs)], out, shard_size=100, resume=True)
    assert report.computed == 1 and shard_bytes(out) == before


def test_refusals_are_one_line_and_lose_nothing(inputs, tmp_path):
    out = tmp_path / "out"
    predict(SPEC, [str(inputs)], out, shard_size=100)
    kept = shard_bytes(out)
    with pytest.raises(UserError, match="pass --resume"):
        predict(SPEC, [str(inputs)], out, shard_size=100)
    with pytest.raises(UserError, match="shard size differs"):
        predict(SPEC, [str(inputs)], out, shard_size=50, resume=True)
    assert shard_bytes(out) == kept
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="holds no samebits manifest"):
        predict(SPEC, [str(inputs)], stranger, resume=True)
    assert (stranger / "notes.txt").read_text() == "mine"


def test_bad_input_stops_with_the_file_named_and_keeps_complete_shards(inputs, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    for p in sorted(inputs.iterdir())[:3]:
        (folder / p.name).write_bytes(p.read_bytes())
    (folder / "part99.npy").write_bytes(b"not an array")
    result = run_cli("predict", SPEC, str(folder), "-o", str(tmp_path / "o1"), "--shard-size", "100")
    error = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and error.startswith("samebits: error:") and "part99.npy" in error
    assert "not a .npy array file" in error and not (tmp_path / "o1").exists()  # refused before anything ran
    (folder / "part99.npy").unlink()
    np.save(folder / "part99.npy", np.zeros((10, 15), dtype=np.float32))  # samples of the wrong shape
    result = run_cli("predict", SPEC, str(folder), "-o", str(tmp_path / "o2"), "--shard-size", "100")
    assert result.returncode == 2 and "part99.npy' row 0: its samples are input 0 float32 [15]" in result.stderr
    kept = json.loads((tmp_path / "o2" / "manifest.json").read_text())["shards"]
    assert [s["samples"] for s in kept] == [100, 100, 100, 100]  # the 455 good samples before the bad file
    skipped = run_cli("predict", SPEC, str(folder), "-o", str(tmp_path / "o3"), "--shard-size", "100", "--skip-bad")
    assert skipped.returncode == 0, skipped.stderr
    manifest = json.loads((tmp_path / "o3" / "manifest.json").read_text())
    last = manifest["shards"][-1]
    assert [s["samples"] for s in manifest["shards"]] == [100, 100, 100, 100, 55]
    assert [(s["sample"], s["row"]) for s in last["skipped"]] == [(455 + r, r) for r in range(10)]
    assert digests(tmp_path / "o3") == digests(tmp_path / "o2") + last["sample_xxh3_128"]


def test_verify_recomputes_shards_and_names_the_one_that_differs(inputs, tmp_path):
    out = tmp_path / "out"
    predict(SPEC, [str(inputs)], out, shard_size=100)
    ok = run_cli("verify", str(out), SPEC, "--shards", "3")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.count(": identical") == 3 and "shard 0 " in ok.stdout and "shard 9 " in ok.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shards"][9]["sample_xxh3_128"][17] = "0" * 32  # as if this machine computed other bits
    (out / "manifest.json").write_text(json.dumps(manifest))
    bad = run_cli("verify", str(out), SPEC, "--shards", "2")
    assert bad.returncode == 1 and "shard 9 (100 samples): differs from sample 917" in bad.stdout
    refused = run_cli("verify", str(out))  # the stored MODEL is code: it is never imported
    assert refused.returncode == 2 and "pass it: samebits verify OUT_DIR MODEL" in refused.stderr


def test_workers_give_the_same_bytes_as_one_process(inputs, tmp_path):
    one = predict(SPEC, [str(inputs)], tmp_path / "w1", batch_size=7, shard_size=100)
    for batch, shard in ((7, 100), (64, 333)):
        out = tmp_path / f"w2-{batch}-{shard}"
        report = predict(SPEC, [str(inputs)], out, batch_size=batch, shard_size=shard, workers=2)
        assert report.samples == 1000 and report.computed == -(-1000 // shard)
        assert digests(out) == digests(tmp_path / "w1")
    assert shard_bytes(tmp_path / "w2-7-100") == shard_bytes(tmp_path / "w1")
    assert one.threads["per_worker"] >= 1 and one.threads["why"]
    with pytest.raises(UserError, match="needs a MODEL spec"):
        predict(torch.nn.Linear(16, 5), [str(inputs)], tmp_path / "obj", workers=2)


def test_a_forward_that_raises_in_a_worker_is_the_models_error_exit_2(tmp_path):
    data = torch.randn(40, 16, generator=torch.Generator().manual_seed(1))
    data[33, 4] = 1000.0  # shard 3 of 4: its worker's forward raises
    np.save(tmp_path / "x.npy", data.numpy())
    spec = f"{HERE / 'predict_models.py'}:raises_on_large"
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}"
        result = run_cli(
            "predict", spec, str(tmp_path / "x.npy"), "-o", str(out), "--shard-size", "10", "--workers", workers
        )
        assert result.returncode == 2, result.stderr
        (line,) = [line for line in result.stderr.splitlines() if line.startswith("samebits: error:")]
        assert "the model's forward raised" in line and "ValueError: a value over 50" in line
        assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_a_model_whose_bits_follow_the_thread_count_gets_one_thread_per_worker(tmp_path):
    import predict_models
    from samebits.measure.threads import num_threads
    from samebits.runtime.predictor import Predictor
    from samebits.tensors.digest import digest

    folder = tmp_path / "in"
    folder.mkdir()
    x = torch.randn(96, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    np.save(folder / "a.npy", x[:50].numpy())
    np.save(folder / "b.npy", x[50:].numpy())
    spec = f"{HERE / 'predict_models.py'}:conv"
    runs = {k: predict(spec, [str(folder)], tmp_path / f"w{k}", shard_size=40, workers=k) for k in (1, 2)}
    assert digests(tmp_path / "w1") == digests(tmp_path / "w2")
    # the plan says what a direct measurement on this machine says
    model, example = predict_models.conv()
    with Predictor(model, example_inputs=example) as predictor:
        bits = {}
        for n in (1, torch.get_num_threads()):
            with num_threads(n):
                bits[n] = [digest(predictor.predict(x[:rows])) for rows in (1, 4, 64)]
    differs = bits[1] != bits[torch.get_num_threads()]
    for report in runs.values():
        assert report.threads["fixed"] == differs or torch.get_num_threads() == 1
        if differs:
            assert report.threads["per_worker"] == 1 and "different bits" in report.threads["why"]


def test_workers_killed_with_the_parent_and_resumed_give_the_same_bytes(inputs, tmp_path):
    whole = tmp_path / "whole"
    predict(SPEC, [str(inputs)], whole, shard_size=50, batch_size=16)
    broken = tmp_path / "broken"
    run_until(broken, inputs, 4, "--workers", "2")
    time.sleep(1.0)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "samebits.child shard" not in ps, "a worker outlived its parent"
    done = run_cli(*predict_cmd(broken, inputs, "--workers", "2")[3:])
    assert done.returncode == 0, done.stderr
    assert shard_bytes(broken) == shard_bytes(whole) and digests(broken) == digests(whole)
    assert not list(broken.glob(".*.tmp"))


def test_verify_reads_every_shard_file_and_edited_manifests_are_one_line(inputs, tmp_path):
    out = tmp_path / "out"
    predict(SPEC, [str(inputs)], out, shard_size=100)
    (out / "shard-000002.safetensors").unlink()  # a shard verify would not recompute (3 of 10)
    data = bytearray((out / "shard-000005.safetensors").read_bytes())
    data[-2] ^= 0xFF
    (out / "shard-000005.safetensors").write_bytes(bytes(data))
    bad = run_cli("verify", str(out), SPEC)
    assert bad.returncode == 1
    assert "shard 2: its file shard-000002.safetensors is missing" in bad.stdout
    assert "shard 5: its file shard-000005.safetensors is not the one the run wrote" in bad.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["shards"][1]["samples"]  # an edited entry is redone, not trusted
    manifest["shards"][3]["sample_xxh3_128"] = "x"
    (out / "manifest.json").write_text(json.dumps(manifest))
    report = predict(SPEC, [str(inputs)], out, shard_size=100, resume=True)
    assert report.computed == 4  # the two edited entries and the two bad files
    assert verify_ok(out)
    manifest = json.loads((out / "manifest.json").read_text())
    good = json.loads(json.dumps(manifest))
    manifest["threads"] = None
    (out / "manifest.json").write_text(json.dumps(manifest))
    edited = run_cli("verify", str(out), SPEC)
    assert edited.returncode == 2 and "is incomplete or edited (its 'threads'" in edited.stderr
    for field, value, message in (
        ("batch_size", 0, "the manifest's batch_size must be a whole number of rows from 1"),
        ("preprocessing", {"resize": "224"}, "is incomplete or edited (its 'preprocessing'"),
    ):  # they exited 3
        manifest = json.loads(json.dumps(good))
        manifest[field] = value
        (out / "manifest.json").write_text(json.dumps(manifest))
        edited = run_cli("verify", str(out), SPEC)
        assert edited.returncode == 2 and message in edited.stderr and "Traceback" not in edited.stderr, edited.stderr
    (out / "manifest.json").write_bytes(b"\xff\xfe{}")
    for cmd in (("verify", str(out), SPEC), ("predict", SPEC, str(inputs), "-o", str(out), "--resume")):
        broken = run_cli(*cmd)
        assert broken.returncode == 2 and "is unreadable" in broken.stderr and "Traceback" not in broken.stderr


def verify_ok(out: Path) -> bool:
    return run_cli("verify", str(out), SPEC, "--shards", "10").returncode == 0


def test_out_dirs_and_outputs_samebits_cannot_use_are_one_line(inputs, tmp_path):
    (tmp_path / "a-file").write_text("x")
    under_file = run_cli("predict", SPEC, str(inputs), "-o", str(tmp_path / "a-file" / "sub"))
    assert under_file.returncode == 2 and "cannot write into OUT_DIR" in under_file.stderr
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    dangling = run_cli("predict", SPEC, str(inputs), "-o", str(tmp_path / "dangling"))
    assert dangling.returncode == 2 and "broken symbolic link" in dangling.stderr
    assert not (tmp_path / "nowhere").exists()
    only_one = run_cli("predict", str(inputs), "-o", str(tmp_path / "o"))
    assert only_one.returncode == 2 and "give MODEL and INPUT" in only_one.stderr
    zero = run_cli("predict", SPEC, str(inputs), "-o", str(tmp_path / "o"), "--shard-size", "0")
    assert (
        zero.returncode == 2
        and zero.stderr.strip().startswith("samebits: error:")
        and len(zero.stderr.strip().splitlines()) == 1
    )
    wrong = run_cli("predict", f"{HERE / 'predict_models.py'}:conv", str(inputs), "-o", str(tmp_path / "w"))
    assert wrong.returncode == 2 and "on the first samples of the inputs" in wrong.stderr
    odd = run_cli("predict", f"{HERE / 'predict_models.py'}:odd_output", str(inputs), "-o", str(tmp_path / "odd"))
    assert odd.returncode == 2 and "is not a tensor with one row per sample" in odd.stderr


def test_max_batch_size_caps_the_calibration_and_verify_rebuilds_the_same_plan(inputs, tmp_path):
    out = tmp_path / "out"
    run = run_cli("predict", SPEC, str(inputs), "-o", str(out), "--max-batch-size", "8", "--shard-size", "100")
    assert run.returncode == 0, run.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["max_batch_size"] == 8 and max(manifest["plan"]["verified_batch_sizes"]) <= 8
    assert run_cli("verify", str(out), SPEC).returncode == 0


def test_a_sample_digest_covers_every_output_row_and_the_outputs_names_and_shapes():
    import xxhash

    from samebits.offline.shard import sample_digests

    a, b = torch.randn(5, 3, 4), torch.randn(5, 2, dtype=torch.float64)
    got = sample_digests({"b": b, "a": a}, 5)
    seed = xxhash.xxh3_64_intdigest(f"a|{a.dtype}|(3, 4)|b|{b.dtype}|(2,)|".encode())
    assert got == [xxhash.xxh3_128_hexdigest(a[i].numpy().tobytes() + b[i].numpy().tobytes(), seed) for i in range(5)]
    assert got[0] != sample_digests({"b": b, "c": a}, 5)[0]  # another name
    assert got[0] != sample_digests({"b": b, "a": a.reshape(5, 4, 3)}, 5)[0]  # another shape, the same bytes
    assert sample_digests({"a": a}, 5) != sample_digests({"a": a.clone().index_fill_(1, torch.tensor([2]), 0.0)}, 5)
    assert (
        sample_digests({"a": torch.full((2, 3), float("nan"))}, 2)[0]
        == sample_digests({"a": -torch.full((2, 3), float("nan"))}, 2)[1]
    )  # NaNs canonical


def test_the_manifest_is_the_compact_sorted_json_of_its_header_and_shards(tmp_path):
    """Entries encoded once and joined give the text json.dumps gives the whole (nested, unicode,
    a header key sorting after "shards"), in index order whatever order shards complete."""
    from samebits.offline.run import Manifest

    header = {"kind": "predict", "zeta": {"b": [1, 2.5], "a": 'é"x'}, "alpha": None, "shards_note": "s"}
    manifest = Manifest(tmp_path, header)
    entries = [{"index": i, "file": f"{i}.safetensors", "sample_xxh3_128": ["ab"] * i, "z": True} for i in (2, 0, 1)]
    for entry in entries:
        manifest.add(entry)
    manifest.write()
    whole = {**header, "shards": sorted(entries, key=lambda e: e["index"])}
    assert (tmp_path / "manifest.json").read_text() == json.dumps(whole, sort_keys=True, separators=(",", ":")) + "\n"


def test_manifest_rewrites_are_spaced_by_what_a_write_costs(tmp_path, monkeypatch):
    """At least MANIFEST_EVERY apart, and at most MANIFEST_SHARE of the time spent rewriting: a
    write that takes 0.1 s waits 5 s before the next (a long job's manifest no longer costs a
    rewrite of everything every half second)."""
    from samebits.offline import run

    clock = [100.0]
    monkeypatch.setattr(run.time, "monotonic", lambda: clock[0])
    manifest = run.Manifest(tmp_path, {"kind": "predict"})
    manifest.write()  # instant: the least spacing
    clock[0] += 0.4
    assert manifest.written_lately()
    clock[0] += 0.2
    assert not manifest.written_lately()
    real = run.atomic_write

    def slow(path, write):
        clock[0] += 0.1  # this write takes 0.1 s
        real(path, write)

    monkeypatch.setattr(run, "atomic_write", slow)
    manifest.write()
    clock[0] += 4.9
    assert manifest.written_lately()
    clock[0] += 0.2
    assert not manifest.written_lately()

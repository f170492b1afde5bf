"""The contract, class 'deletion': samebits deletes and writes only what it wrote, inside the
folders it owns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import samebits
from samebits.runtime.cache import MARKER, CacheError

from conftest import run_cli
from contract import one_error, snapshot


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("mine")
    (root / "src" / "a.py").write_text("print(1)")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main")
    return root


def test_cache_clear_refuses_a_folder_samebits_did_not_make(project):
    before = snapshot(project)
    one_error(
        run_cli("cache", "clear", "--cache-dir", str(project)),
        "is not a samebits cache (no .samebits-cache marker): nothing removed",
    )
    assert snapshot(project) == before


def test_cache_list_shows_nothing_of_a_foreign_folder(project):
    out = run_cli("cache", "list", "--cache-dir", str(project))
    assert out.returncode == 0 and "README" not in out.stdout and "src" not in out.stdout and "empty" in out.stdout


def test_the_predictor_will_not_write_into_a_foreign_folder(project):
    before = snapshot(project)
    with pytest.raises(CacheError, match="is not empty and is not a samebits cache"):
        samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=project)
    assert snapshot(project) == before


def test_cache_clear_removes_only_its_own_entries(tmp_path):
    cache = tmp_path / "cache"
    with samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=cache, tile=4):
        pass
    (cache / "notes.txt").write_text("the user's own file")
    out = run_cli("cache", "clear", "--cache-dir", str(cache))
    assert out.returncode == 0 and "removed 1 entries" in out.stdout
    assert sorted(p.name for p in cache.iterdir()) == [MARKER, "manifest.json", "manifest.json.lock", "notes.txt"]


def test_a_cache_dir_that_is_a_file_is_one_line(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(CacheError, match="is a file; pass a folder"):
        samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=target)
    assert target.read_text() == "x"


def test_record_never_overwrites_without_force(tmp_path, golden):
    g = tmp_path / "g.safetensors"
    shutil.copy(golden, g)
    before = snapshot(tmp_path)
    one_error(run_cli("record", "demo:cnn", "-o", str(g)), "exists; pass --force")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        (".", "is a directory"),
        ("a_file/x.safetensors", "is a file, not a folder"),
        ("g.txt", "a golden is a .safetensors file"),
    ],
)
def test_record_to_a_bad_place_is_one_line(tmp_path, target, fragment):
    (tmp_path / "a_file").write_text("keep")
    before = snapshot(tmp_path)
    one_error(run_cli("record", "demo:mlp", "-o", str(tmp_path / target), "--force"), fragment)
    assert snapshot(tmp_path) == before


def _cache_with(tmp_path: Path, names: dict[str, dict]) -> Path:
    """A cache built by a Predictor, with the user's files in it and ``names`` added to its manifest."""
    cache = tmp_path / "cache"
    with samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=cache, tile=4):
        pass
    (cache / "notes.txt").write_text("the user's own file")
    (cache / "mine").mkdir()
    (cache / "mine" / "data.txt").write_text("also the user's")
    manifest = json.loads((cache / "manifest.json").read_text())
    manifest["entries"].update(names)
    (cache / "manifest.json").write_text(json.dumps(manifest))
    return cache


OUTSIDE = ["", ".", "..", "./", "mine/data.txt", "../outside.txt", "/etc/passwd", "mine/..", "manifest.json", MARKER]


@pytest.mark.parametrize("name", OUTSIDE)
def test_cache_clear_never_acts_on_a_manifest_entry_outside_its_own(tmp_path, name):
    (tmp_path / "outside.txt").write_text("keep")
    cache = _cache_with(tmp_path, {name: {"kind": "artifact", "sha256": None}})
    out = run_cli("cache", "clear", "--cache-dir", str(cache))
    assert out.returncode == 0 and "removed 1 entries" in out.stdout, (out.stdout, out.stderr)
    assert (cache / "notes.txt").read_text() == "the user's own file"
    assert (cache / "mine" / "data.txt").read_text() == "also the user's"
    assert (tmp_path / "outside.txt").read_text() == "keep" and (cache / MARKER).is_file()


def test_a_symlinked_entry_is_neither_followed_by_list_nor_cleared(tmp_path):
    big = tmp_path / "elsewhere"
    big.mkdir()
    (big / "large.bin").write_bytes(b"x" * (1 << 20))
    cache = _cache_with(tmp_path, {"inductor": {"kind": "folder", "sha256": None}})
    (cache / "inductor").symlink_to(big)
    listed = run_cli("cache", "list", "--cache-dir", str(cache))
    assert listed.returncode == 0 and "inductor" not in listed.stdout and "1024.0 KiB" not in listed.stdout
    assert run_cli("cache", "clear", "--cache-dir", str(cache)).returncode == 0
    assert (big / "large.bin").stat().st_size == 1 << 20 and (cache / "inductor").is_symlink()


def test_cache_list_sizes_a_folder_entry_without_following_links_inside_it(tmp_path):
    big = tmp_path / "elsewhere"
    big.mkdir()
    (big / "large.bin").write_bytes(b"x" * (1 << 20))
    cache = _cache_with(tmp_path, {"inductor": {"kind": "folder", "sha256": None}})
    (cache / "inductor").mkdir()
    (cache / "inductor" / "kernel.so").write_bytes(b"y" * 2048)
    (cache / "inductor" / "link").symlink_to(big)
    (entry,) = [e for e in samebits.runtime.cache.ArtifactCache(cache).entries() if e["name"] == "inductor"]
    assert entry["bytes"] == 2048


@pytest.fixture(scope="module")
def npy(tmp_path_factory) -> Path:
    import numpy as np

    path = tmp_path_factory.mktemp("inputs") / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal((8, 256)).astype("float32"))
    return path


def test_a_second_predict_into_a_folder_being_written_is_refused(tmp_path, npy):
    from samebits.files import exclusive
    from samebits.offline.run import LOCK

    out = tmp_path / "out"
    out.mkdir()
    with exclusive(out / LOCK):  # what a first run holds while it writes
        second = run_cli("predict", "demo:mlp", str(npy), "-o", str(out))
    one_error(second, "is being written by another samebits predict run")
    assert sorted(p.name for p in out.iterdir()) == [LOCK]


def test_a_lock_left_by_an_earlier_run_does_not_block_the_next(tmp_path, npy):
    from samebits.offline.run import LOCK

    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK).write_text("")
    run = run_cli("predict", "demo:mlp", str(npy), "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert (out / "manifest.json").is_file()


def test_check_out_into_a_folder_with_someone_elses_repro_json_is_refused(tmp_path):
    """A folder holding a repro.json of another kind is not samebits' repro folder: its files
    (repro.json, report.json, ...) were replaced."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "repro.json").write_text('{"ticket": 42}')
    (notes / "report.json").write_text("mine")
    before = snapshot(notes)
    one_error(
        run_cli("check", "demo:mlp", "--axes", "repeat", "--out", str(notes)),
        "is not empty and is not a samebits repro folder",
    )
    assert snapshot(notes) == before


def test_predict_resume_into_a_folder_with_someone_elses_manifest_is_refused(tmp_path):
    import numpy as np

    out = tmp_path / "site"
    out.mkdir()
    (out / "manifest.json").write_text('{"name": "my web app", "icons": []}')
    np.save(tmp_path / "x.npy", np.ones((4, 256), dtype=np.float32))
    before = snapshot(out)
    one_error(
        run_cli("predict", "demo:mlp", str(tmp_path / "x.npy"), "-o", str(out), "--resume"),
        "holds a manifest.json that is not a samebits predict manifest",
    )
    assert snapshot(out) == before


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("verify", "{golden}", "--json", "{golden}"), "is one of this command's inputs"),
        (("check", "demo:mlp", "--axes", "repeat", "--json", "{source}"), "is not a samebits report"),
        (("check", "demo:mlp", "--axes", "repeat", "--html", "{source}"), "is not a samebits report"),
        (("lint", "{source}", "-o", "{source}"), "is one of this command's inputs"),
        (("lint", "{source}", "-o", "{notes}"), "is not a samebits report"),
        (("env", "--json", "{notes}"), "is not a samebits report"),
        (("env", "--diff", "{fingerprint}", "--json", "{fingerprint}"), "is one of this command's inputs"),
        (("report", "{report}", "--html", "{report}"), "is one of this command's inputs"),
    ],
    ids=[
        "verify golden",
        "check model source",
        "html over source",
        "lint own file",
        "lint notes",
        "env notes",
        "env diff input",
        "report input",
    ],
)
def test_a_report_never_replaces_a_file_samebits_did_not_write(tmp_path, golden, args, fragment):
    """--json, --html and -o replace only an earlier report of theirs: a golden, a model's source,
    the linted file or a user's notes were overwritten."""
    source, notes, fingerprint, report = (tmp_path / n for n in ("m.py", "notes.txt", "fp.json", "rep.json"))
    source.write_text("import torch\n")
    notes.write_text("my notes\n")
    assert run_cli("env", "--json", str(fingerprint)).returncode == 0
    assert run_cli("check", "demo:mlp", "--axes", "repeat", "--json", str(report)).returncode == 0
    mine = shutil.copy(golden, tmp_path / "g.safetensors")
    paths = {"golden": mine, "source": source, "notes": notes, "fingerprint": fingerprint, "report": report}
    before = snapshot(tmp_path)
    one_error(run_cli(*(a.format(**paths) for a in args)), fragment)
    assert snapshot(tmp_path) == before


def test_a_report_replaces_an_earlier_report_of_its_own(tmp_path):
    out = tmp_path / "r.json"
    assert run_cli("check", "demo:mlp", "--axes", "repeat", "--json", str(out)).returncode == 0
    first = out.read_text()
    assert run_cli("check", "demo:mlp", "--axes", "seed", "--json", str(out)).returncode == 0
    assert out.read_text() != first and json.loads(out.read_text())["axes"][0]["axis"] == "seed"

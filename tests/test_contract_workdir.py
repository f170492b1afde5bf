"""The contract in a hostile working folder: nothing samebits starts imports from it (code
execution), nothing samebits writes follows a link planted there (data loss), and user code
that changes the working folder moves none of samebits' outputs."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from samebits.files import NotARegularFile, exclusive
from samebits.runtime.cache import ArtifactCache

from conftest import scrubbed_env
from contract import m, one_error

SAMEBITS = Path(sys.executable).with_name("samebits")  # the console script a user runs


def poison(folder: Path, kind: str) -> Path:
    """``folder`` holding a ``samebits.py`` (or a ``samebits/`` package) that writes a marker
    when imported; the marker's path."""
    marker = folder.parent / f"PWNED-{folder.name}"
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    if kind == "module":
        (folder / "samebits.py").write_text(code)
    else:
        (folder / "samebits").mkdir()
        (folder / "samebits" / "__init__.py").write_text(code)
    return marker


@pytest.fixture(params=["module", "package"])
def hostile(request, tmp_path) -> tuple[Path, Path]:
    folder = tmp_path / "work"
    folder.mkdir()
    return folder, poison(folder, request.param)


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ``samebits`` console script, as a user types it, in ``cwd``."""
    return subprocess.run(
        [str(SAMEBITS), *args], capture_output=True, text=True, cwd=cwd, env=env or scrubbed_env(), timeout=180
    )


# -- code execution: every place samebits starts Python ------------------------------------------
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="portable levels are x86-64 levels")
def test_the_portable_reexec_does_not_import_from_the_working_folder(hostile):
    folder, marker = hostile
    result = cli("check", "demo:mlp", "--axes", "repeat", "--portable", "x86-64-v2", cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "identical" in result.stdout and not marker.exists()


def test_check_children_do_not_import_from_the_working_folder(hostile):
    folder, marker = hostile
    result = cli("check", "demo:mlp", "--axes", "process,threads", "--json", "r.json", cwd=folder)
    axes = {a["axis"]: a for a in json.loads((folder / "r.json").read_text())["axes"]}
    assert result.returncode in (0, 1) and not marker.exists(), result.stderr[-2000:]
    assert axes["process"]["verdict"] == "identical" and axes["process"]["agreed"] == axes["process"]["runs"]


def test_predict_workers_do_not_import_from_the_working_folder(hostile):
    folder, marker = hostile
    np.save(folder / "x.npy", np.random.default_rng(0).standard_normal((12, 256), dtype=np.float32))
    result = cli("predict", "demo:mlp", "x.npy", "-o", "out", "--workers", "2", "--shard-size", "4", cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    manifest = json.loads((folder / "out" / "manifest.json").read_text())
    assert len(manifest["shards"]) == 3 and not marker.exists()


def test_serve_isolated_worker_does_not_import_from_the_working_folder(tmp_path, monkeypatch):
    from samebits.models.inputs import ModelInputs
    from samebits.serve.isolated import IsolatedPredictor
    from samebits.serve.options import ServeOptions

    folder = tmp_path / "work"
    folder.mkdir()
    marker = poison(folder, "package")
    monkeypatch.chdir(folder)
    with IsolatedPredictor("demo:mlp", ServeOptions(max_batch_size=4)) as isolated:
        out = isolated.predict(ModelInputs((torch.ones(2, 256),)))
    assert next(iter(out.values())).shape[0] == 2 and not marker.exists()


def test_run_deterministic_bootstrap_does_not_import_from_the_working_folder(hostile):
    folder, marker = hostile
    probe = "import sys; print(repr(sys.path[0]))"  # what Python gives -c: the working folder, as ''
    result = cli("run", "--deterministic", "--", sys.executable, "-c", probe, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "''" and not marker.exists()
    script = folder / "prog.py"
    script.write_text("import sys; print(sys.path[0])")
    result = cli("run", "--deterministic", "--", sys.executable, str(script), cwd=folder.parent)
    assert result.stdout.strip() == str(folder) and not marker.exists()


# -- data loss: links planted where samebits writes ----------------------------------------------
def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_kept(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    cache_dir = tmp_path / "cache"
    ArtifactCache(cache_dir).build_once("thread-plan-x", lambda tmp: tmp.write_text("{}"))
    (cache_dir / "manifest.json.lock").unlink(missing_ok=True)
    (cache_dir / "manifest.json.lock").symlink_to(notes)
    result = cli("cache", "clear", "--cache-dir", str(cache_dir), cwd=tmp_path)
    one_error(result, "manifest.json.lock is a symbolic link")
    assert notes.read_text() == "my notes"
    with pytest.raises(NotARegularFile, match="is a symbolic link"):  # any build into that cache too
        ArtifactCache(cache_dir).build_once("other", lambda tmp: tmp.write_text("{}"))
    assert notes.read_text() == "my notes"


def test_a_lock_file_that_is_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "x.lock")
    with pytest.raises(NotARegularFile, match="not a regular file"), exclusive(tmp_path / "x.lock", wait=True):
        pass


def test_a_dangling_link_as_a_lock_creates_nothing_at_its_target(tmp_path):
    (tmp_path / "x.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NotARegularFile), exclusive(tmp_path / "x.lock"):
        pass
    assert not (tmp_path / "elsewhere").exists()


def test_cache_clear_removes_no_link_planted_as_an_entrys_lock(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    cache = ArtifactCache(tmp_path / "cache")
    cache.build_once("thread-plan-x", lambda tmp: tmp.write_text("{}"))
    planted = cache.folder / "thread-plan-x.lock"
    planted.unlink()
    planted.symlink_to(notes)
    assert cache.clear() == 1
    assert planted.is_symlink() and notes.read_text() == "my notes"


def test_a_marker_planted_as_a_link_is_no_marker(tmp_path):
    target = tmp_path / "target"
    target.write_text("{}")
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / ".samebits-cache").symlink_to(target)
    assert not ArtifactCache(folder).is_cache


@pytest.mark.parametrize(
    "args",
    [
        ("check", "demo:mlp", "--axes", "repeat", "--json", "OUT"),
        ("lint", "prog.py", "-o", "OUT"),
        ("env", "--json", "OUT"),
    ],
    ids=["check --json", "lint -o", "env --json"],
)
def test_a_report_written_over_a_link_replaces_the_link_not_its_target(tmp_path, args):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    (tmp_path / "prog.py").write_text("x = 1\n")
    (tmp_path / "OUT").symlink_to(notes)
    result = cli(*args, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    assert notes.read_text() == "my notes"
    assert not (tmp_path / "OUT").is_symlink() and (tmp_path / "OUT").stat().st_size > 0


# -- user code that changes the working folder ---------------------------------------------------
@pytest.mark.parametrize("model", ["wanders_in_factory", "wanders_in_forward"])
def test_user_code_changing_the_working_folder_moves_no_output(tmp_path, model):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    (elsewhere / "rep.json").write_text("someone's report")
    env = scrubbed_env(SB_WANDER=str(elsewhere))
    result = cli("check", m(model), "--axes", "repeat,process", "--json", "rep.json", cwd=here, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (elsewhere / "rep.json").read_text() == "someone's report"
    report = json.loads((here / "rep.json").read_text())
    assert {a["axis"]: a["verdict"] for a in report["axes"]} == {"repeat": "identical", "process": "identical"}
    assert f"changed the working folder to {elsewhere}; samebits changed it back to {here}" in result.stderr

    np.save(here / "x.npy", np.ones((6, 3), dtype=np.float32))
    result = cli("predict", m(model), "x.npy", "-o", "out", "--shard-size", "4", cwd=here, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (here / "out" / "manifest.json").is_file() and not (elsewhere / "out").exists()


def test_the_library_changes_the_working_folder_back_after_user_code(tmp_path, monkeypatch):
    from samebits.errors import UserCodeChanged, user_code

    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserCodeChanged, match="the model's forward changed the working folder"):
        with user_code("the model's forward"):
            os.chdir("/")
    assert os.getcwd() == str(tmp_path)


def test_ray_actors_do_not_import_from_the_working_folder(hostile):
    """Ray puts the driver's working folder on every worker's sys.path: samebits starts Ray from
    an empty folder of its own."""
    pytest.importorskip("ray", reason="the Ray engine needs its extra: pip install 'samebits[ray]'")
    folder, marker = hostile
    np.save(folder / "x.npy", np.random.default_rng(0).standard_normal((8, 256), dtype=np.float32))
    result = cli("predict", "demo:mlp", "x.npy", "-o", "out", "--engine", "ray", "--workers", "1", cwd=folder)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (folder / "out" / "manifest.json").is_file() and not marker.exists()


def test_a_matplotlibrc_in_the_working_folder_runs_nothing_and_styles_nothing(tmp_path):
    """matplotlib reads ./matplotlibrc when imported; its figure.hooks name a function pyplot
    imports and calls on every figure (sys:exit ended the command with no report)."""
    pytest.importorskip("matplotlib", reason="HTML reports need the report extra")
    (tmp_path / "matplotlibrc").write_text("figure.hooks: sys:exit\nlines.linewidth: 40\n")
    result = cli("check", "demo:mlp", "--axes", "batch", "--html", "r.html", "--json", "r.json", cwd=tmp_path)
    verdict = json.loads((tmp_path / "r.json").read_text())["axes"][0]["verdict"]
    assert result.returncode == (1 if verdict == "diverged" else 0), result.stderr[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page if verdict == "diverged" else "samebits check" in page
    assert "stroke-width: 40" not in page  # the folder's style is not the chart's

"""The contract under bad input and faults (issue: security, data loss, hangs, one error line,
leaks). Every CLI case asserts the exit code, one line on stderr without a traceback, and that
nothing on disk changed that samebits was not asked to write."""

from __future__ import annotations

import gc
import hashlib
import io
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch

import samebits
from samebits.runtime.cache import MARKER, ArtifactCache, CacheError

from conftest import REPO, rewrite_golden, run_cli, scrubbed_env

MODELS = Path(__file__).with_name("reliability_models.py")


def m(name: str) -> str:
    return f"{MODELS}:{name}"


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with the sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def one_error(result: subprocess.CompletedProcess[str], fragment: str, code: int = 2) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and fragment in lines[0], lines[0]


class Evil:
    """Unpickling this creates a marker file: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def pt2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pt2") / "linear.pt2"
    torch.manual_seed(0)
    torch.export.save(torch.export.export(torch.nn.Linear(3, 2), (torch.randn(1, 3),)), str(path))
    return path


def craft(src: Path, dst: Path, edit) -> Path:
    """A copy of the archive ``src`` with entries changed by ``edit(name, data) -> data | None``
    (``None`` drops the entry) and extra entries from ``edit.extra``."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
        root = a.namelist()[0].split("/")[0]
        for info in a.infolist():
            data = edit(info.filename[len(root) + 1 :], a.read(info.filename))
            if data is not None:
                b.writestr(info, data)
        for name, data in getattr(edit, "extra", {}).items():
            b.writestr(f"{root}/{name}", data)
    return dst


def _pickled_weight(marker: Path):
    def edit(name, data):
        if name.endswith("weights_config.json"):
            config = json.loads(data)
            config["config"]["weight"]["use_pickle"] = True
            return json.dumps(config).encode()
        if name == "data/weights/weight_0":
            return pickle.dumps(Evil(marker))
        return data

    return edit


def _opaque_constant(marker: Path):
    def edit(name, data):
        if name.endswith("constants_config.json"):
            return json.dumps(
                {"config": {"c": {"path_name": "opaque_obj_0", "is_param": False, "use_pickle": False}}}
            ).encode()
        return data

    edit.extra = {"data/constants/opaque_obj_0": pickle.dumps(Evil(marker))}
    return edit


def _legacy_weights(marker: Path):
    edit = lambda name, data: data  # noqa: E731
    edit.extra = {"data/weights/model.pt": pickle.dumps(Evil(marker))}
    return edit


def _pickled_sample_inputs(marker: Path):
    def edit(name, data):
        if name.startswith("data/sample_inputs/"):
            buf = io.BytesIO()
            torch.save(Evil(marker), buf)
            return buf.getvalue()
        return data

    return edit


def _aoti(marker: Path):
    edit = lambda name, data: data  # noqa: E731
    edit.extra = {"data/aotinductor/model/model.so": b"\x7fELF"}
    return edit


CRAFTED = {
    "weights marked use_pickle": (_pickled_weight, "marks 'weight' as pickled (use_pickle)"),
    "opaque pickled constant": (_opaque_constant, "as a pickled object (opaque_obj_0)"),
    "legacy pickled weights": (_legacy_weights, "is a legacy pickled weights file"),
    "sample inputs needing pickle": (_pickled_sample_inputs, "only load with weights_only=False"),
    "compiled AOTInductor code": (_aoti, "holds compiled code"),
}


# -- 1. no code from data files ----------------------------------------------------------------
def test_a_crafted_pt2_really_runs_code_in_torch_export_load(tmp_path, pt2):
    """The threat is real: torch.export.load alone unpickles the crafted entry."""
    marker = tmp_path / "ran"
    evil = craft(pt2, tmp_path / "evil.pt2", _pickled_weight(marker))
    subprocess.run(
        [sys.executable, "-c", f"import torch; torch.export.load({str(evil)!r})"],
        capture_output=True,
        timeout=120,
        env=scrubbed_env(),
    )
    assert marker.exists()


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_pt2_model_is_refused_and_runs_nothing(tmp_path, pt2, case):
    make, fragment = CRAFTED[case]
    marker = tmp_path / "ran"
    evil = craft(pt2, tmp_path / "evil.pt2", make(marker))
    before = snapshot(tmp_path)
    one_error(run_cli("check", str(evil)), fragment)
    assert not marker.exists() and snapshot(tmp_path) == before


def test_a_zip_that_is_not_a_pt2_is_one_line(tmp_path):
    bad = tmp_path / "x.pt2"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("x/hello.txt", "hi")
    one_error(run_cli("check", str(bad)), "not a torch.export program")


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("golden") / "g.safetensors"
    assert run_cli("record", "demo:mlp", "-o", str(path)).returncode == 0
    return path


def rewrite(src: Path, dst: Path, edit_header=None, edit_tensors=None) -> Path:
    return rewrite_golden(src, dst, edit_header=edit_header, edit_tensors=edit_tensors)


@pytest.mark.parametrize("stored", ["os:abort", "subprocess:call", f"{MODELS}:hang", "model.pt"])
def test_a_golden_never_chooses_code_to_run(tmp_path, golden, stored):
    g = rewrite(golden, tmp_path / "g.safetensors", edit_header=lambda h: h.update(model=stored))
    before = snapshot(tmp_path)
    one_error(run_cli("verify", str(g)), "which is code; a golden never chooses code to run")
    assert snapshot(tmp_path) == before


def test_a_golden_naming_a_crafted_pt2_runs_nothing(tmp_path, golden, pt2):
    marker = tmp_path / "ran"
    craft(pt2, tmp_path / "evil.pt2", _pickled_weight(marker))
    g = rewrite(golden, tmp_path / "g.safetensors", edit_header=lambda h: h.update(model="evil.pt2"))
    one_error(run_cli("verify", str(g)), "is refused")
    assert not marker.exists()


def test_a_file_planted_in_the_cache_is_rebuilt_not_run(tmp_path):
    cache = tmp_path / "cache"
    model, x = torch.nn.Linear(4, 2), torch.randn(4, 4)
    with samebits.Predictor(model, example_inputs=x, backend="export", cache_dir=cache, tile=4):
        pass
    (artifact,) = cache.glob("export-*.pt2")
    marker = tmp_path / "ran"
    craft(Path(shutil.copy(artifact, tmp_path / "orig.pt2")), artifact, _pickled_weight(marker))
    with pytest.warns(UserWarning, match="did not match the digest recorded at build"):
        with samebits.Predictor(model, example_inputs=x, backend="export", cache_dir=cache, tile=4) as p:
            assert p.artifacts[4]["built_here"] is True
    assert not marker.exists()


def test_code_is_not_loaded_from_a_cache_others_can_write(tmp_path):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(CacheError, match="writable by others .*does not load code from it"):
        samebits.Predictor(
            torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), backend="torchscript", cache_dir=cache, tile=4
        )


# -- 2. samebits deletes only what it wrote ----------------------------------------------------
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


# -- 3. no hangs -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "command", [["check"], ["doctor", "--backends", ""], ["bench", "--no-memory", "--backends", "eager"]]
)
def test_a_forward_that_never_returns_ends_in_one_line(tmp_path, command):
    start = time.monotonic()
    out = run_cli(*command[:1], m("hang"), *command[1:], "--timeout", "2", timeout=60)
    one_error(out, "a forward made no progress for 2 s")
    assert time.monotonic() - start < 30


# -- 4. one line and the right exit code -------------------------------------------------------
CASES = [
    (["check", m("none")], "the model's output holds no tensor"),
    (["check", m("string")], "the model's output holds no tensor"),
    (["check", m("raises")], "the model's forward raised RuntimeError: boom in forward"),
    (["check", m("factory_raises")], "raised ValueError: the factory itself fails"),
    (["check", m("nothing_here")], "nothing_here"),
    (["check", "missing.py:make"], "does not exist"),
    (["check", "demo:mlp", "--device", "tpu"], "unknown device 'tpu'"),
    (["check", "demo:mlp", "--input-shape", "100000,100000,100000"], "samebits makes random inputs up to"),
    (["check", "demo:mlp", "--input-shape", "4,x"], "is not a comma-separated list of sizes"),
    (["check", "demo:mlp", "--axes", "nope"], "unknown axis nope"),
    (["check", "demo:mlp", "--runs", "1"], "runs (--runs) must be >= 2"),
    (["check", "demo:mlp", "--timeout", "0"], "--timeout must be > 0"),
    (["check", "demo:mlp", "--atol", "0.1"], "give atol and rtol both or neither"),
    (["check", "demo:mlp", "--dtype", "float17"], "unknown dtype 'float17'"),
    (["check", "demo:mlp", "--input", "."], "is a directory"),
    (["check", "demo:mlp", "--input", "nope.pt"], "does not exist"),
    (["check", "demo:mlp", "--input", "x.csv", "--input-shape", "8,256"], "give --input or --input-shape, not both"),
    (["doctor", "demo:mlp", "--memory-cap", "-5"], "must be > 0"),
    (["doctor", "demo:mlp", "--timeout", "0"], "must be > 0"),
    (["bench", m("raises")], "boom in forward"),
    (["bench", m("unbatched")], "bench needs inputs whose dim 0 is the batch"),
    (["bench", "demo:mlp", "--rounds", "0"], "rounds must be >= 1"),
    (["bench", "demo:mlp", "--backends", "foo"], "unknown backend foo"),
    (["record", m("object_leaf"), "-o", "o.safetensors"], "cannot walk a builtins.object at '.handle'"),
    (["lint", str(MODELS), "-o", "/proc/none/x"], "cannot write -o /proc/none/x"),
    (["verify", "."], "is a directory"),
    (["verify", "missing.safetensors"], "does not exist"),
    (["env", "--diff", "missing.json"], "missing.json"),
]


@pytest.mark.parametrize(("argv", "fragment"), CASES, ids=[" ".join(a[:3]).replace(str(MODELS), "m") for a, _ in CASES])
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, fragment):
    before = snapshot(tmp_path)
    one_error(run_cli(*argv, cwd=tmp_path), fragment)
    assert snapshot(tmp_path) == before


def test_a_check_in_which_nothing_ran_is_exit_2_not_identical():
    out = run_cli("check", "demo:mlp", "--axes", "batch", "--batch-dim", "5")
    assert (
        out.returncode == 2
        and out.stdout.startswith("Nothing was checked: every axis was skipped")
        and "identical" not in out.stdout.split("\n")[0]
    )


def test_run_on_a_missing_script_says_so(tmp_path):
    out = run_cli("run", "--deterministic", "--", sys.executable, "missing.py", cwd=tmp_path)
    assert (
        out.returncode == 2
        and "can't open file 'missing.py'" in out.stderr.strip().splitlines()[-1]
        and "Traceback" not in out.stderr
    )


GOLDEN_DAMAGE = {
    "output_paths not a list": (lambda h: h.update(output_paths="x"), "output_paths is a str"),
    "output_paths not strings": (lambda h: h.update(output_paths=[1]), "output_paths are not all strings"),
    "profile malformed": (
        lambda h: h.update(profile={"name": "deterministic", "seed": "zero"}),
        "profile is malformed",
    ),
    "inputs not an object": (lambda h: h.update(inputs=[1]), "inputs is a list"),
    "fingerprint not an object": (lambda h: h.update(fingerprint="x"), "fingerprint is a str"),
    "trace malformed": (lambda h: h.update(trace=[{"name": 1}]), "trace is malformed"),
    "listed output missing": (lambda h: h["output_paths"].append(".ghost"), "are listed but not stored"),
    "input tensor missing": (
        lambda h: h["inputs"]["args"].append({"$tensor": "inputs/ghost"}),
        "the stored tensor 'inputs/ghost' is missing",
    ),
    "unknown input node": (lambda h: h["inputs"]["args"].append({"$weird": 1}), "unknown node in a stored structure"),
    "schema from the future": (lambda h: h.update(schema_version=99), "schema_version 99"),
}


@pytest.mark.parametrize("case", list(GOLDEN_DAMAGE))
def test_a_damaged_golden_header_is_one_line(tmp_path, golden, case):
    edit, fragment = GOLDEN_DAMAGE[case]
    g = rewrite(golden, tmp_path / "g.safetensors", edit_header=edit)
    one_error(run_cli("verify", str(g), "demo:mlp"), fragment)


def test_verify_with_a_model_that_does_not_fit_is_one_line(golden):
    one_error(
        run_cli("verify", str(golden), "demo:cnn"),
        "on the golden's stored inputs; is demo:cnn the model it was recorded from?",
    )


def test_verify_with_another_dtype_in_the_golden_is_a_mismatch_not_a_crash(tmp_path, golden):
    g = rewrite(
        golden,
        tmp_path / "g.safetensors",
        edit_tensors=lambda t: t.update({"outputs/output": t["outputs/output"].double()}),
    )
    out = run_cli("verify", str(g), "demo:mlp")
    assert out.returncode == 1 and "Traceback" not in out.stderr and "dtype" in out.stdout.lower()


def test_an_internal_error_is_exit_3_never_1(tmp_path):
    code = (
        "import sys, samebits.checker.run as r\n"
        "def broken(*a, **k): raise KeyError('a bug')\n"
        "r.check = broken\n"
        "import samebits.checker as c; c.check = broken\n"
        "from samebits.cli.app import main\n"
        "main(['check', 'demo:mlp'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=scrubbed_env(), timeout=120)
    one_error(out, "samebits: internal error: KeyError: 'a bug'; please report it", code=3)


# -- 5. no leaks -------------------------------------------------------------------------------
def test_an_unclosed_predictor_restores_every_switch_when_collected(tmp_path):
    assert not torch.are_deterministic_algorithms_enabled()
    p = samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=tmp_path / "c")
    assert torch.are_deterministic_algorithms_enabled()
    del p
    gc.collect()
    assert not torch.are_deterministic_algorithms_enabled()


def test_predictors_closed_out_of_order_restore_the_users_switches(tmp_path):
    model, x = torch.nn.Linear(4, 2), torch.randn(4, 4)
    a = samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path / "c")
    b = samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path / "c")
    a.close()
    assert torch.are_deterministic_algorithms_enabled()  # b still needs it
    b.close()
    assert not torch.are_deterministic_algorithms_enabled()


def test_an_in_process_check_leaves_the_environment_as_it_was():
    before = dict(os.environ)
    samebits.check("demo:mlp", axes=("batch", "repeat"))
    assert dict(os.environ) == before


def _children_of(pid: int | None) -> list[int]:
    """samebits' child processes (of ``pid``, or of anyone with ``None``)."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    return [
        int(r[0])
        for r in rows
        if len(r) == 3 and "samebits.measure.child" in r[2] and (pid is None or int(r[1]) == pid)
    ]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_samebits_alone_ends_its_children_and_temp_folder(tmp_path, sig):
    env = scrubbed_env(TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "samebits", "check", m("slow"), "--axes", "process"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _children_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    children = _children_of(proc.pid)
    assert children, "the process axis never started its children"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    time.sleep(0.5)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143)
    assert not set(children) & set(_children_of(None)), "children outlived samebits"
    assert not list(tmp_path.glob("samebits-*")), "the temp folder was left behind"
    assert "Traceback" not in err


def test_a_signal_that_lands_in_a_finaliser_still_stops_the_command(tmp_path):
    # Python drops exceptions raised inside __del__; the signal is delivered again after it.
    proc = subprocess.run(
        [sys.executable, "-m", "samebits", "check", m("signal_in_finaliser"), "--axes", "repeat", "--runs", "50"],
        env=scrubbed_env(TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 143, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert not list(tmp_path.glob("samebits-*"))


def test_an_onnxruntime_build_leaves_only_its_entries(tmp_path):
    pytest.importorskip("onnxruntime")
    cache = tmp_path / "cache"
    with samebits.Predictor(
        torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), backend="onnxruntime", cache_dir=cache, tile=4
    ):
        pass
    listed = set(ArtifactCache(cache).manifest())
    stray = [
        p.name
        for p in cache.iterdir()
        if p.name not in listed and not p.name.endswith(".lock") and p.name not in (MARKER, "manifest.json")
    ]
    assert stray == [] and any(n.endswith(".ort.onnx") for n in listed)


# -- 6. smaller ones ---------------------------------------------------------------------------
def test_cache_files_and_goldens_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        with samebits.Predictor(
            torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=tmp_path / "c", tile=4
        ):
            pass
        samebits.record("demo:mlp", tmp_path / "g.safetensors")
    finally:
        os.umask(old)
    (calibration,) = (tmp_path / "c").glob("calibration-*.json")
    assert calibration.stat().st_mode & 0o777 == 0o644 and (tmp_path / "g.safetensors").stat().st_mode & 0o777 == 0o644


def test_a_truncated_calibration_is_healed(tmp_path):
    model, x = torch.nn.Linear(4, 2), torch.randn(4, 4)
    with samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path, tile=4):
        pass
    (calibration,) = tmp_path.glob("calibration-*.json")
    calibration.write_text('{"scheme": "ti')
    with pytest.warns(UserWarning, match="rebuilt"):
        with samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path, tile=4) as p:
            assert "cached" not in p.invariance.measured and p.invariance.sizes == [4]
    assert json.loads(calibration.read_text())["sizes"] == [4]


def test_a_read_only_cache_is_used_by_another_user_without_writing(tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run as another user")
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="samebits-shared-", dir="/tmp"))  # outside root's private pytest folder
    shared.chmod(0o755)
    cache = shared / "cache"
    code = (
        "import torch, samebits\n"
        "torch.manual_seed(0)\n"
        f"p = samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir={str(cache)!r}, tile=4, deterministic=False)\n"
        "print(p.invariance.measured.get('cached'))\n"
    )
    first = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=scrubbed_env(), timeout=120
    )
    assert first.returncode == 0, first.stderr
    before = snapshot(cache)
    other = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=scrubbed_env(HOME="/tmp", PYTHONPATH=str(REPO / "src")),
        timeout=120,
    )
    assert other.returncode == 0, other.stderr
    try:
        assert other.stdout.strip() == "True" and snapshot(cache) == before
    finally:
        shutil.rmtree(shared)


def test_bench_with_a_zero_row_predict_is_one_line(tmp_path):
    with samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=tmp_path, tile=4) as p:
        with pytest.raises(samebits.UserError, match="a batch of 0 rows"):
            p.predict(torch.randn(0, 4))

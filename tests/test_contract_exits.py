"""The contract, class 'exit codes': bad input is one line and exit 2, a bug is exit 3, never
a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from samebits.runtime.cache import MARKER

from conftest import run_cli, scrubbed_env
from contract import MODELS, m, one_error, rewrite, snapshot

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
    (["record", m("raises"), "-o", "o.safetensors"], "the model's forward raised RuntimeError: boom in forward"),
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


USER_CODE_EXITS = {
    "sys.exit(0) in the forward": ("exits_in_forward", "the model's forward called sys.exit(0)"),
    "sys.exit(1) in the factory": ("exits_in_factory", "the factory called sys.exit(1)"),
    "GeneratorExit in the forward": ("generator_exit_in_forward", "the model's forward raised GeneratorExit"),
    "KeyboardInterrupt without a signal": ("keyboard_interrupt_in_forward", "raised KeyboardInterrupt"),
    "os._exit(0) in the forward": ("hard_exit_in_forward", "the model's forward called os._exit(0)"),
    "a model on the meta device": ("on_meta_device", "the model's tensors are on the meta device"),
}


@pytest.mark.parametrize("command", ["check", "doctor", "record", "bench"])
@pytest.mark.parametrize("case", list(USER_CODE_EXITS))
def test_user_code_that_exits_is_an_error_of_the_model_not_a_result(tmp_path, command, case):
    name, fragment = USER_CODE_EXITS[case]
    extra = {"record": ["-o", str(tmp_path / "g.safetensors")], "doctor": ["--backends", ""], "bench": ["--no-memory"]}
    one_error(run_cli(command, m(name), *extra.get(command, []), cwd=tmp_path), fragment)
    assert not (tmp_path / "g.safetensors").exists()


def test_predict_of_a_forward_that_calls_os_exit_is_an_error_not_a_silent_0(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 3), dtype=np.float32))
    result = run_cli("predict", m("hard_exit_in_forward"), str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"))
    one_error(result, "the model's forward called os._exit(0)")


def test_a_forward_that_closes_stdout_still_gets_its_report(tmp_path):
    result = run_cli("check", m("closes_stdout"), "--axes", "repeat,seed", cwd=tmp_path)
    assert result.returncode == 0 and "Same input, same bits" in result.stdout, result.stderr
    assert "samebits: note: the model's forward closed sys.stdout; samebits opened it again" in result.stderr


def test_the_watchdog_still_ends_a_hanging_forward_while_os_exit_is_watched(tmp_path):
    """The user-code boundary turns os._exit into an error only in the thread running the model's
    code: the watchdog's own os._exit (another thread) still ends a forward that never returns."""
    result = run_cli("check", m("hang"), "--axes", "repeat", "--timeout", "2", cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_a_model_file_that_exits_on_import_is_one_line(tmp_path):
    model = tmp_path / "model.py"
    model.write_text("import sys\nsys.exit(3)\n")
    one_error(run_cli("check", f"{model}:make"), "the model's file called sys.exit(3)")


DEEP = "[" * 200_000 + "]" * 200_000  # deeper than Python's recursion limit


def test_deeply_nested_json_is_one_line_everywhere_samebits_reads_it(tmp_path, golden):
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    one_error(run_cli("env", "--diff", str(deep)), "nested more than 64 levels deep")
    one_error(run_cli("report", str(deep), "--html", str(tmp_path / "r.html")), "nested more than 64 levels deep")
    g = rewrite(
        golden, tmp_path / "g.safetensors", edit_header=lambda h: h.update(inputs=json.loads("[" * 70 + "]" * 70))
    )
    one_error(run_cli("verify", str(g), "demo:mlp"), "nested more than 64 levels deep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(DEEP)
    np.save(tmp_path / "x.npy", np.zeros((4, 256), dtype="float32"))
    one_error(
        run_cli("predict", "demo:mlp", str(tmp_path / "x.npy"), "-o", str(out), "--resume"),
        "nested more than 64 levels deep",
    )
    one_error(run_cli("verify", str(out)), "nested more than 64 levels deep")


def test_a_cache_manifest_nested_too_deep_lists_and_clears_nothing(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / MARKER).write_text("{}")
    (cache / "manifest.json").write_text(DEEP)
    (cache / "mine.txt").write_text("keep")
    for command in ("list", "clear"):
        out = run_cli("cache", command, "--cache-dir", str(cache))
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert (cache / "mine.txt").read_text() == "keep"


def test_a_thread_count_read_from_a_file_or_a_flag_never_reaches_torch_unchecked(tmp_path, golden):
    """torch.set_num_threads(100000) segfaults: every count is bounded first (4 per core)."""
    g = rewrite(golden, tmp_path / "g.safetensors", edit_header=lambda h: h["profile"].update(threads=100000))
    one_error(run_cli("verify", str(g), "demo:mlp"), "must be a whole number of threads from 1 to")
    np.save(tmp_path / "x.npy", np.zeros((4, 256), dtype="float32"))
    argv = ("predict", "demo:mlp", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out"))
    one_error(run_cli(*argv, "--threads-per-worker", "100000"), "--threads-per-worker must be a whole number")
    assert run_cli(*argv).returncode == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    manifest["threads"]["build"] = 100000
    (tmp_path / "out" / "manifest.json").write_text(json.dumps(manifest))
    one_error(run_cli("verify", str(tmp_path / "out")), "must be a whole number of threads from 1 to")
    one_error(run_cli("check", "demo:mlp", "--axes", "threads", "--threads", "1,100000"), "each of --threads")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["check", "demo:mlp", "--axes", "batch", "--batch-sizes", "1,2000000000"], "each of --batch-sizes"),
        (["predict", "demo:mlp", "x.npy", "-o", "out", "--batch-size", "0"], "--batch-size must be"),
        (["predict", "demo:mlp", "x.npy", "-o", "out", "--shard-size", "99999999999"], "--shard-size must be"),
        (["predict", "demo:mlp", "x.npy", "-o", "out", "--workers", "100000"], "--workers must be from 1 to"),
        (["serve", "demo:mlp", "--max-batch-size", "2000000000", "--port", "0"], "--max-batch-size must be"),
    ],
    ids=lambda a: " ".join(a[:1] + a[-2:]) if isinstance(a, list) else None,
)
def test_sizes_from_the_command_line_are_bounded_before_any_work(tmp_path, argv, fragment):
    np.save(tmp_path / "x.npy", np.zeros((4, 256), dtype="float32"))
    before = snapshot(tmp_path)
    one_error(run_cli(*argv, cwd=tmp_path), fragment)
    assert snapshot(tmp_path) == before


def test_cache_list_prints_a_users_folder_and_time_stamps_as_they_are(tmp_path):
    """rich markup never reads a user's text: ``[bold red]`` in the folder's name was dropped (the
    wrong path printed), ``[/x]`` stopped the command; a time stamp of 1e300 exited 3."""
    from samebits.runtime.cache import ArtifactCache

    folder = tmp_path / "c[bold red]x[" / "x]"  # the path reads .../c[bold red]x[/x]
    cache = ArtifactCache(folder)
    cache.build_once("thread-plan-a", lambda tmp: tmp.write_text("{}"))
    manifest = folder / "manifest.json"
    data = json.loads(manifest.read_text())
    data["entries"]["thread-plan-a"]["written"] = 1e300
    manifest.write_text(json.dumps(data))
    result = run_cli("cache", "list", "--cache-dir", str(folder))
    assert result.returncode == 0, result.stderr
    assert str(folder) in result.stdout.replace("\n", "") and "thread-plan-a" in result.stdout
    empty = tmp_path / "e[" / "x]"
    empty.mkdir(parents=True)
    result = run_cli("cache", "list", "--cache-dir", str(empty))
    assert result.returncode == 0 and f"{empty}: empty" in result.stdout, result.stderr


def test_a_saved_report_with_a_field_of_another_type_is_one_line(tmp_path):
    pytest.importorskip("matplotlib")
    saved = tmp_path / "r.json"
    assert run_cli("check", "demo:mlp", "--axes", "repeat", "--json", str(saved)).returncode in (0, 1)
    data = json.loads(saved.read_text())
    data["seconds"] = "abc"  # a number field holding a string: it exited 3
    saved.write_text(json.dumps(data))
    one_error(
        run_cli("report", str(saved), "--html", str(tmp_path / "r.html")), "is not a complete samebits check report"
    )
    assert not (tmp_path / "r.html").exists()


def test_serve_on_a_port_in_use_is_one_line_before_any_calibration(tmp_path):
    """It calibrated first, then printed the right line and ~40 lines of asyncio traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "demo:mlp", "--port", str(port), timeout=60)
    one_error(result, f"cannot serve on 127.0.0.1:{port} (--port): Address already in use")
    assert "calibrating" not in result.stderr


def test_predict_on_files_of_one_unbatched_sample_says_what_dim_0_is(tmp_path):
    """Files of one image [3, 64, 64] are read as 3 samples of [64, 64]: the message says so, and
    what one sample's file looks like (it said only 'expected 3 channels')."""
    model = tmp_path / "conv.py"
    model.write_text(
        "import torch\ndef make():\n    return torch.nn.Conv2d(3, 8, 3).eval(), torch.randn(2, 3, 64, 64)\n"
    )
    np.save(tmp_path / "img.npy", np.zeros((3, 64, 64), dtype=np.float32))
    result = run_cli("predict", f"{model}:make", str(tmp_path / "img.npy"), "-o", str(tmp_path / "out"))
    one_error(result, "dim 0 of each input is the batch, so one sample here is [64, 64]")


@pytest.mark.parametrize(
    ("option", "value"), [("timeout", "abc"), ("runs", "x"), ("axes", ["repeat", 5]), ("localize", 1)]
)
def test_a_repro_folder_whose_options_have_other_types_is_one_line(tmp_path, option, value):
    folder = tmp_path / "rep"
    assert run_cli("check", "demo:mlp", "--axes", "repeat", "--out", str(folder)).returncode == 0
    marker = json.loads((folder / "repro.json").read_text())
    marker["options"][option] = value
    (folder / "repro.json").write_text(json.dumps(marker))
    one_error(run_cli("check", "--from", str(folder)), f"option {option} in repro.json is")

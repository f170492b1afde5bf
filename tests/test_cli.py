import sys
from pathlib import Path

from samebits import __version__

from conftest import run_cli, run_python


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"samebits {__version__}"


def test_help_does_not_import_torch():
    code = "import sys\nfrom samebits.cli.app import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules)"
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
    assert "env" in result.stdout and "run" in result.stdout


def test_the_pytest_plugin_loads_without_torch_so_a_conftest_can_still_set_what_torch_reads():
    result = run_python("import sys, samebits.pytest_plugin\nprint('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_user_error_is_one_line_with_exit_2_and_debug_shows_the_traceback(tmp_path):
    missing = str(tmp_path / "nope.json")
    plain = run_cli("env", "--diff", missing)
    assert plain.returncode == 2
    assert plain.stderr.strip() == f"samebits: error: fingerprint file '{missing}' does not exist"
    debug = run_cli("--debug", "env", "--diff", missing)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "UserError" in debug.stderr


def test_usage_errors_exit_2():
    assert run_cli("no-such-command").returncode == 2
    assert run_cli("env", "b.json").returncode == 2  # a second file needs --diff


def test_demo_list_shows_every_demo():
    result = run_cli("demo", "list")
    assert result.returncode == 0
    for name in ("demo:mlp", "demo:cnn", "demo:transformer", "demo:detector"):
        assert name in result.stdout
    assert "list[dict(boxes, scores, labels)]" in result.stdout  # rich markup does not eat brackets


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "samebits"
    assert script.exists(), "pip install -e . should install the samebits console script"


TESTS = Path(__file__).resolve().parent


def test_third_party_progress_bars_stay_off_the_terminal_unless_verbose():
    import pytest

    pytest.importorskip("transformers", reason="the progress bar is transformers' from_pretrained")
    spec = f"{TESTS / 'real_models.py'}:gpt2_from_pretrained"
    quiet = run_cli("check", spec, "--axes", "repeat")
    assert quiet.returncode == 0, quiet.stderr
    assert "Loading weights" not in quiet.stdout + quiet.stderr
    loud = run_cli("--verbose", "check", spec, "--axes", "repeat")
    assert loud.returncode == 0 and "Loading weights" in loud.stderr  # the bar is there to hide


def test_transformers_logs_stay_off_the_terminal_in_children_too_unless_verbose(tmp_path):
    import pytest

    pytest.importorskip("transformers")
    factory = tmp_path / "logs.py"
    factory.write_text(
        "import torch, transformers\n"
        "def build():\n"
        "    transformers.logging.get_logger('transformers.configuration_utils').warning('A CONFIG WARNING')\n"
        "    return torch.nn.Linear(4, 2).eval()\n"
    )
    args = ("check", f"{factory}:build", "--input-shape", "2,4", "--axes", "repeat,process")
    quiet = run_cli(*args, timeout=300)  # the process axis loads the model again in a child
    assert quiet.returncode in (0, 1), quiet.stderr
    assert "A CONFIG WARNING" not in quiet.stdout + quiet.stderr
    loud = run_cli("--verbose", *args, timeout=300)
    assert "A CONFIG WARNING" in loud.stderr


def test_a_long_message_from_another_library_is_cut_to_one_line_unless_verbose():
    spec = f"{TESTS / 'check_models.py'}:long_error"
    short = run_cli("check", spec)
    assert short.returncode == 2
    (line,) = [line for line in short.stderr.splitlines() if line.startswith("samebits: error:")]
    assert len(line) < 320 and line.endswith("(--verbose shows the whole message)") and "THE END" not in line
    whole = run_cli("--verbose", "check", spec)
    assert whole.returncode == 2 and "THE END" in whole.stderr
    assert "Traceback" not in short.stderr + whole.stderr


def test_serve_without_its_extra_is_one_line_before_any_work():
    code = (
        "import sys\n"
        "sys.modules['fastapi'] = None  # as if the 'serve' extra were not installed\n"
        "from samebits.cli.app import main\n"
        "main(['serve', 'demo:mlp', '--port', '0'])\n"
    )
    result = run_python(code)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "samebits: error: samebits serve needs the optional package 'fastapi', which is not installed; "
        "pip install 'samebits[serve]'"
    )  # one line, and no "calibrating" before it


def test_long_commands_say_what_they_do_when_stderr_is_not_a_terminal(monkeypatch):
    """Off a terminal: after QUIET_START seconds a line per stage, and one every HEARTBEAT seconds
    within a long stage; a quick command prints none."""
    import io
    import time

    from samebits.cli import progress

    quick = run_cli("check", "demo:mlp", "--axes", "repeat")
    assert not [line for line in quick.stderr.splitlines() if line.startswith("samebits: checking")]
    monkeypatch.setattr(progress, "QUIET_START", 0.0)
    monkeypatch.setattr(progress, "HEARTBEAT", 0.0)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    with progress.Progress("bench") as p:
        p.update("timing eager")
        p.update("timing eager: round 2")  # the same stage: no new line
        p.update("peak memory")
        time.sleep(1.6)
    said = err.getvalue().splitlines()
    assert said[:2] == ["samebits: bench: timing eager", "samebits: bench: peak memory"]
    assert any(line.startswith("samebits: bench: peak memory (") and "s so far)" in line for line in said[2:])

"""The README's commands and Python example are the first thing a user tries: keep them true."""

import re
import subprocess
import sys

from conftest import REPO, scrubbed_env

README = (REPO / "README.md").read_text()


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    install_and_test = _blocks("bash")[1].strip()
    assert "pytest" in install_and_test
    ci = (REPO / ".ci" / "run").read_text()
    assert install_and_test in ci.splitlines()


def test_readme_python_example_runs(tmp_path):
    for code in _blocks("python"):
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=scrubbed_env(), timeout=120
        )
        assert result.returncode == 0, result.stderr
        assert "samebits run" in result.stdout


def test_readme_first_command_runs_check_on_the_demo():
    import json

    first = _blocks("bash")[0].strip()
    assert first.endswith("&& samebits check")
    out = subprocess.run(
        [sys.executable, "-m", "samebits", "check", "--json", "-"],
        capture_output=True,
        text=True,
        env=scrubbed_env(),
        timeout=300,
    )
    report = json.loads(out.stdout)
    verdicts = {a["axis"]: a["verdict"] for a in report["axes"]}
    kernels = ("batch", "layout")  # these depend on the CPU's GEMM kernels
    assert report["model"] == "demo:mlp"
    assert set(verdicts) == {"repeat", "seed", "state", "process", "threads", *kernels}
    assert {a: v for a, v in verdicts.items() if a not in kernels} == dict.fromkeys(
        ["repeat", "seed", "state", "process", "threads"], "identical"
    )
    found = any(verdicts[a] == "diverged" for a in kernels)
    assert out.returncode == (1 if found else 0) == report["exit_code"]


def test_switches_example_runs():
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "switches.py")],
        capture_output=True,
        text=True,
        env=scrubbed_env(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "All switches were restored: True" in result.stdout


def test_the_main_command_checks_the_demo_on_every_axis():
    from conftest import run_cli

    result = run_cli("check")
    assert result.returncode in (0, 1), result.stderr  # 1 where this CPU's GEMM is batch-variant
    for axis in ("repeat", "seed", "state", "process", "threads", "batch"):
        assert f"\n {axis} " in result.stdout
    assert "MODEL demo:mlp, inputs float32[8, 256]" in result.stdout

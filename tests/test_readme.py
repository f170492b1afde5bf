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
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=scrubbed_env(), timeout=120)
        assert result.returncode == 0, result.stderr
        assert "samebits run" in result.stdout


def test_readme_first_command_example_runs():
    result = subprocess.run([sys.executable, str(REPO / "examples" / "switches.py")], capture_output=True, text=True, env=scrubbed_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "All switches were restored: True" in result.stdout

"""samebits lint as a command: files and folders, config, formats, explain, docs, bad input."""

import json
from pathlib import Path

import pytest

from samebits.linter import lint
from samebits.rules import RULES, render_docs

from conftest import REPO, run_cli

BAD = "import os\nos.environ['PYTHONHASHSEED'] = '0'\nx = torch.randn(2)\nx.cuda()\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "app.py").write_text(BAD)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_app.py").write_text(BAD)
    for ignored in (".git", ".venv", "node_modules", "build"):
        (tmp_path / ignored).mkdir()
        (tmp_path / ignored / "skip.py").write_text(BAD)
    (tmp_path / "data.bin").write_bytes(b"\x00\x01")
    return tmp_path


def test_folders_are_walked_without_vcs_venvs_and_builds(project):
    result = lint([project])
    assert sorted({Path(f.path).name for f in result.findings}) == ["app.py", "test_app.py"]
    assert result.files == 2


def test_text_output_and_exit_1(project):
    result = run_cli("lint", str(project / "app.py"))
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert (
        lines[0]
        == f"{project / 'app.py'}:2:1: SB101 hashseed-in-process PYTHONHASHSEED set inside a running interpreter does nothing for it"
    )
    assert lines[-1] == "2 findings in 1 file; 2 fixable with --fix"


def test_clean_file_exits_0(tmp_path):
    (tmp_path / "ok.py").write_text("x = 1\n")
    result = run_cli("lint", str(tmp_path))
    assert result.returncode == 0 and result.stdout.strip() == "0 findings in 1 file"


def test_select_and_ignore(project):
    only = run_cli("lint", str(project / "app.py"), "--select", "SB2")
    assert "SB202" in only.stdout and "SB101" not in only.stdout
    ignored = run_cli("lint", str(project / "app.py"), "--ignore", "hashseed-in-process,SB202")
    assert ignored.returncode == 0
    assert run_cli("lint", str(project), "--select", "SB999").returncode == 2


def test_pyproject_config_with_per_file_ignores(project):
    (project / "pyproject.toml").write_text(
        '[tool.samebits.lint]\nignore = ["SB202"]\n[tool.samebits.lint.per-file-ignores]\n"tests/*" = ["SB101"]\n'
    )
    result = run_cli("lint", ".", cwd=project)
    assert result.returncode == 1
    assert "app.py:2:1: SB101" in result.stdout
    assert "test_app.py" not in result.stdout and "SB202" not in result.stdout


def test_unknown_config_key_is_an_error(project):
    (project / "pyproject.toml").write_text('[tool.samebits.lint]\nselekt = ["SB1"]\n')
    result = run_cli("lint", ".", cwd=project)
    assert result.returncode == 2 and "unknown key(s) selekt" in result.stderr


def test_json_and_sarif(project):
    data = json.loads(run_cli("lint", str(project / "app.py"), "--format", "json").stdout)
    assert data["kind"] == "lint" and data["schema_version"] == 1
    assert [f["code"] for f in data["findings"]] == ["SB101", "SB202"]
    sarif = json.loads(run_cli("lint", str(project / "app.py"), "--format", "sarif").stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "samebits"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["SB101", "SB202"]
    first = run["results"][0]
    assert first["ruleId"] == "SB101" and first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 2,
        "startColumn": 1,
    }


def test_unparsable_files_are_reported_per_file(tmp_path):
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "good.py").write_text(BAD)
    result = run_cli("lint", str(tmp_path))
    assert result.returncode == 1
    assert "broken.py: error: cannot parse" in result.stdout and "good.py:2:1: SB101" in result.stdout
    only_broken = tmp_path / "only"
    only_broken.mkdir()
    (only_broken / "broken.py").write_text("def (:\n")
    assert run_cli("lint", str(only_broken)).returncode == 2


def test_non_python_files_are_skipped_and_nothing_readable_is_exit_2(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    result = run_cli("lint", str(tmp_path / "notes.txt"))
    assert result.returncode == 2 and "not a Python file" in result.stderr
    assert run_cli("lint", str(tmp_path / "missing.py")).returncode == 2


def test_explain_by_code_and_name():
    by_code = run_cli("lint", "--explain", "SB101")
    by_name = run_cli("lint", "--explain", "hashseed-in-process")
    assert by_code.returncode == 0 and by_code.stdout == by_name.stdout
    for part in ("**What it does.**", "**Why is this bad.**", "**Example**", "**Use instead.**"):
        assert part in by_code.stdout
    assert run_cli("lint", "--explain", "SB000").returncode == 2


def test_docs_rules_md_is_generated_from_the_registry():
    assert (REPO / "docs" / "rules.md").read_text() == render_docs(), "run: python -m samebits.linter > docs/rules.md"


def test_rule_codes_and_names_are_well_formed():
    codes = [r.code for r in RULES]
    assert len(set(codes)) == len(codes) and len({r.name for r in RULES}) == len(RULES)
    for r in RULES:
        assert r.code[:2] == "SB" and r.code[2] in "1234" and r.name == r.name.lower() and " " not in r.name
        assert all((r.message, r.what, r.why, r.example.strip(), r.fix))


def test_samebits_own_source_is_clean():
    result = lint([REPO / "src"])
    assert result.errors == []
    assert [f.text() for f in result.findings] == []


def test_pre_commit_hook_is_declared():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert "id: samebits-lint" in text and "entry: samebits lint" in text


def test_python_api_returns_the_findings(project):
    import samebits

    result = samebits.lint([project / "app.py"])
    assert [f.code for f in result] == ["SB101", "SB202"] and len(result) == 2 and result[0].line == 2

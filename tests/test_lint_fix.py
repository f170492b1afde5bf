"""`samebits lint --fix` and `--diff` (issue #44): each rule's fix (the fixed source parses, the
rule no longer fires, the text outside the edit is unchanged byte for byte), the cases where a
fix is refused and why, the files as data (encoding, BOM, line endings, permissions, links, only
the paths given), the output formats and exit codes, and a property over the lint corpora."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from samebits.linter import lint, lint_source
from samebits.linter.checks.edits import Edit, Fix, Lines, apply
from samebits.linter.config import LintConfig
from samebits.linter.fix import fix
from samebits.rules import RULES

from conftest import REPO, run_cli, scrubbed_env

CORPORA = ["lint_corpus", "lint_corpus_unseen", "lint_corpus_unseen2"]


def finding(source: str, code: str, min_torch: tuple[int, int] | None = None):
    """The one finding of ``code`` in ``source``."""
    found = [f for f in lint_source(source, min_torch=min_torch) if f.code == code]
    assert len(found) == 1, found
    return found[0]


def fixed(source: str, code: str, min_torch: tuple[int, int] | None = None) -> str:
    """``source`` with the fix of its one ``code`` finding applied, checked: it parses, ``code``
    is gone, and every character outside the edit is as it was."""
    f = finding(source, code, min_torch)
    assert f.fix is not None, f.no_fix
    new = apply(source, f.fix.edits)
    ast.parse(new)
    assert code not in [g.code for g in lint_source(new, min_torch=min_torch)]
    (edit,) = f.fix.edits
    lines = Lines(source)
    start, end = lines.offset(edit.line, edit.col), lines.offset(edit.end_line, edit.end_col)
    assert new[:start] == source[:start] and new[len(new) - (len(source) - end) :] == source[end:]
    return new


def refused(source: str, code: str, min_torch: tuple[int, int] | None = None) -> str:
    """Why the one ``code`` finding of ``source`` has no fix."""
    f = finding(source, code, min_torch)
    assert f.fix is None
    return f.no_fix


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# -- SB202 discarded-to-result


def test_sb202_assigns_the_moved_tensor_back():
    source = src("""
    import torch
    x = torch.randn(2)
    x.cuda()  # move it
    """)
    assert fixed(source, "SB202") == source.replace("x.cuda()  #", "x = x.cuda()  #")


def test_sb202_is_not_fixed_where_the_moved_value_would_be_evaluated_twice():
    assert "not a plain name" in refused("import torch\ndef f(it, batch):\n    batch[next(it)].cuda()\n", "SB202")


# -- SB101 hashseed-in-process


def test_sb101_comments_the_statement_out_pointing_to_samebits_run():
    source = 'import os\nos.environ["PYTHONHASHSEED"] = "0"\nprint(1)\n'
    new = fixed(source, "SB101")
    assert new.splitlines()[1:4] == [
        "# PYTHONHASHSEED is read once, when Python starts: set here it does nothing for this process.",
        "# Set it outside instead: samebits run --seed 0 -- python ... (samebits lint SB101)",
        '# os.environ["PYTHONHASHSEED"] = "0"',
    ]


def test_sb101_leaves_a_pass_where_the_statement_was_a_blocks_only_one():
    source = 'import os\ndef seed(s):\n    os.environ["PYTHONHASHSEED"] = str(s)\n'
    new = fixed(source, "SB101")
    assert new.splitlines()[-1] == "    pass" and "--seed N" in new


def test_sb101_is_not_fixed_in_a_file_that_starts_processes():
    source = 'import os, subprocess\nos.environ["PYTHONHASHSEED"] = "0"\nsubprocess.run(["python", "x.py"])\n'
    assert "starts processes" in refused(source, "SB101")


def test_sb101_is_not_fixed_where_the_statement_sets_other_variables_too():
    source = 'import os\nos.environ.update({"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"})\n'
    assert "other variables" in refused(source, "SB101")


# -- SB401 unsafe-torch-load


OLD = (2, 0)  # a project that supports torch 2.0, where a bare torch.load unpickles anything


def test_sb401_passes_weights_only_where_the_load_goes_into_load_state_dict():
    source = 'import torch\nmodel.load_state_dict(torch.load("w.pt", map_location="cpu"))\n'
    new = fixed(source, "SB401", OLD)
    assert 'torch.load("w.pt", map_location="cpu", weights_only=True)' in new


def test_sb401_passes_weights_only_through_a_name_used_only_by_load_state_dict():
    source = 'import torch\nsd = torch.load("w.pt")\nmodel.load_state_dict(sd)\n'
    assert 'sd = torch.load("w.pt", weights_only=True)' in fixed(source, "SB401", OLD)


def test_sb401_inserts_after_the_last_argument_of_a_call_over_lines():
    source = 'import torch\nmodel.load_state_dict(torch.load(\n    "w.pt",\n    map_location="cpu",\n))\n'
    assert '    map_location="cpu", weights_only=True,\n' in fixed(source, "SB401", OLD)


def test_sb401_turns_weights_only_false_into_true_for_a_state_dict():
    source = 'import torch\nmodel.load_state_dict(torch.load("w.pt", weights_only=False))\n'
    assert "weights_only=True))" in fixed(source, "SB401")


def test_sb401_is_not_fixed_for_a_checkpoint_that_holds_more_than_the_state_dict():
    source = 'import torch\nckpt = torch.load("c.pt")\nmodel.load_state_dict(ckpt["model"])\nstep = ckpt["step"]\n'
    assert "used for more than a strict load_state_dict" in refused(source, "SB401", OLD)


def test_sb401_is_not_fixed_where_the_result_is_not_shown_to_be_a_state_dict():
    assert "not shown to be a state dict" in refused('import torch\nmodel = torch.load("m.pt")\n', "SB401", OLD)


def test_sb401_is_not_fixed_with_strict_false_which_ignores_other_entries():
    source = 'import torch\nmodel.load_state_dict(torch.load("w.pt"), strict=False)\n'
    assert "not shown to be a state dict" in refused(source, "SB401", OLD)


def test_sb401_is_not_fixed_where_the_project_supports_torch_without_weights_only():
    source = 'import torch\nmodel.load_state_dict(torch.load("w.pt"))\n'
    assert "torch 1.12, whose torch.load has no weights_only" in refused(source, "SB401", (1, 12))


# -- SB107 missing-eval


def test_sb107_calls_eval_after_the_models_last_assignment_at_its_indentation():
    source = src("""
    import torch
    def main(x):
        model = Net()  # fresh
        model.load_state_dict(torch.load("w.pt", weights_only=True))
        with torch.no_grad():
            return model(x)
    class Net(torch.nn.Module):
        pass
    """)
    new = fixed(source, "SB107")
    assert new.splitlines()[2:4] == ["    model = Net()  # fresh", "    model.eval()"]


def test_sb107_is_not_fixed_for_a_model_made_in_another_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "net.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n")
    (tmp_path / "infer.py").write_text("import torch\nfrom net import model\nwith torch.no_grad():\n    y = model(x)\n")
    (found,) = [f for f in lint([tmp_path / "infer.py"]) if f.code == "SB107"]
    assert found.fix is None and found.no_fix.startswith("model is not assigned in this file")


# -- SB301 inference-without-no-grad


def test_sb301_wraps_the_statement_in_inference_mode():
    source = src("""
    import torch
    model.eval()
    for batch in loader:
        preds = model(batch)  # forward
        print(preds)
    """)
    new = fixed(source, "SB301")
    assert new.splitlines()[3:6] == [
        "    with torch.inference_mode():",
        "        preds = model(batch)  # forward",
        "    print(preds)",
    ]


def test_sb301_indents_with_tabs_in_a_file_indented_with_tabs():
    source = "import torch\nmodel.eval()\nfor batch in loader:\n\tpreds = model(batch)\n"
    assert fixed(source, "SB301").endswith("\twith torch.inference_mode():\n\t\tpreds = model(batch)\n")


def test_sb301_uses_the_files_indentation_step():
    source = "import torch\nmodel.eval()\nfor batch in loader:\n  preds = model(batch)\n"
    assert fixed(source, "SB301").endswith("  with torch.inference_mode():\n    preds = model(batch)\n")


def test_sb301_reindents_every_line_of_a_statement_over_lines():
    source = "import torch\nmodel.eval()\nfor b in loader:\n    out = model(\n        b,\n    )\n"
    assert fixed(source, "SB301").endswith(
        "    with torch.inference_mode():\n        out = model(\n            b,\n        )\n"
    )


def test_sb301_is_not_fixed_where_a_string_literal_spans_the_lines():
    source = 'import torch\nmodel.eval()\nfor b in loader:\n    out = model(b, """a\nb""")\n'
    assert "string literal" in refused(source, "SB301")


def test_sb301_is_not_fixed_in_a_loop_header():
    source = "import torch\nmodel.eval()\nfor y in model(x):\n    print(y)\n"
    assert "header of a for statement" in refused(source, "SB301")


def test_sb301_is_not_fixed_in_a_generator_that_runs_later():
    source = "import torch\nmodel.eval()\nouts = (model(b) for b in loader)\n"
    assert "runs later" in refused(source, "SB301")


def test_sb301_is_not_fixed_where_the_output_is_changed_in_place_afterwards():
    source = "import torch\nmodel.eval()\nfor b in loader:\n    out = model(b)\n    out += 1\n"
    assert "changed in place at line 5" in refused(source, "SB301")


def test_sb301_uses_no_grad_where_the_project_supports_torch_before_inference_mode():
    source = "import torch\nmodel.eval()\nfor b in loader:\n    out = model(b)\n    out += 1\n"
    assert "    with torch.no_grad():\n        out = model(b)\n" in fixed(source, "SB301", (1, 8))


def test_sb301_spells_torch_as_the_file_imports_it():
    source = "import torch as T\nmodel.eval()\nfor b in loader:\n    out = model(b)\n"
    assert "with T.inference_mode():" in fixed(source, "SB301")


def test_sb301_is_not_fixed_without_a_top_level_torch_import():
    source = "def f(model, loader):\n    import torch\n    model.eval()\n    for b in loader:\n        out = model(b)\n"
    source += "f(model, loader)\n"
    assert "torch is not imported at the top" in refused(source, "SB301")


# -- files


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


TWO_SB301 = b"import torch\nmodel.eval()\nfor b in loader:\n    y = model(b)\n    z = model(b)\n"


def test_a_statement_right_after_a_block_the_fix_made_joins_it(tmp_path):
    path = write(tmp_path, "a.py", TWO_SB301)
    fix([path], LintConfig())
    assert path.read_bytes().endswith(b"    with torch.inference_mode():\n        y = model(b)\n        z = model(b)\n")


def test_crlf_line_endings_stay_crlf(tmp_path):
    path = write(tmp_path, "a.py", TWO_SB301.replace(b"\n", b"\r\n"))
    fix([path], LintConfig())
    data = path.read_bytes()
    assert b"with torch.inference_mode():\r\n" in data and data.count(b"\n") == data.count(b"\r\n") == 6


def test_a_bom_and_a_declared_encoding_are_kept(tmp_path):
    bom = write(tmp_path, "bom.py", b"\xef\xbb\xbf" + TWO_SB301)
    latin = write(tmp_path, "latin.py", b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + TWO_SB301)
    fix([bom, latin], LintConfig())
    assert bom.read_bytes().startswith(b"\xef\xbb\xbfimport torch\n") and b"inference_mode" in bom.read_bytes()
    assert b"# caf\xe9\n" in latin.read_bytes() and b"inference_mode" in latin.read_bytes()


def test_permissions_are_kept(tmp_path):
    path = write(tmp_path, "a.py", TWO_SB301)
    path.chmod(0o751)
    fix([path], LintConfig())
    assert b"inference_mode" in path.read_bytes() and stat.S_IMODE(path.stat().st_mode) == 0o751


def test_a_symlinked_file_is_reported_and_not_written_through(tmp_path):
    target = write(tmp_path, "real.txt", TWO_SB301)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    result = fix([link], LintConfig())
    assert target.read_bytes() == TWO_SB301 and link.is_symlink()
    assert result.fixed == [] and {why for _, why in result.not_fixed} == {
        "a symbolic link: samebits does not write through links (fix the file it points to)"
    }


def test_a_file_with_other_hard_links_is_not_split(tmp_path):
    path = write(tmp_path, "a.py", TWO_SB301)
    os.link(path, tmp_path / "b.txt")
    result = fix([path], LintConfig())
    assert path.read_bytes() == TWO_SB301 and "hard links" in result.not_fixed[0][1]


def test_only_the_paths_given_are_written_never_their_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    given = write(tmp_path, "a.py", TWO_SB301)
    other = write(tmp_path, "b.py", TWO_SB301)
    fix([given], LintConfig())
    assert b"inference_mode" in given.read_bytes() and other.read_bytes() == TWO_SB301


def test_a_fix_whose_result_would_not_parse_is_left_out(tmp_path, monkeypatch):
    from samebits.linter import engine

    monkeypatch.setitem(engine.FIXERS, "SB202", lambda ctx, node: Fix("break it", (Edit(1, 0, 1, 0, "def ("),)))
    path = write(tmp_path, "a.py", b"import torch\nx = torch.randn(2)\nx.cuda()\n")
    result = fix([path], LintConfig())
    assert path.read_bytes() == b"import torch\nx = torch.randn(2)\nx.cuda()\n"
    assert result.not_fixed[0][1].startswith("the fixed file would not parse")


def test_a_fix_that_would_add_a_finding_is_left_out(tmp_path, monkeypatch):
    from samebits.linter import engine

    seed = 'import os\nos.environ["PYTHONHASHSEED"] = "0"\n'
    monkeypatch.setitem(engine.FIXERS, "SB202", lambda ctx, node: Fix("x", (Edit(3, 0, 3, 8, seed),)))
    path = write(tmp_path, "a.py", b"import torch\nx = torch.randn(2)\nx.cuda()\n")
    result = fix([path], LintConfig())
    assert path.read_bytes() == b"import torch\nx = torch.randn(2)\nx.cuda()\n"
    assert result.not_fixed[0][1].startswith("the fix would add a finding (SB101")


def test_a_fix_that_leaves_the_finding_is_left_out(tmp_path):
    source = b"import torch\nif fast:\n    model = Net()\nelse:\n    model = Net()\n    model.eval()\nwith torch.no_grad():\n    model(x)\nclass Net(torch.nn.Module):\n    pass\n"
    path = write(tmp_path, "a.py", source)
    result = fix([path], LintConfig())
    assert path.read_bytes() == source and "would not remove the finding" in result.not_fixed[0][1]


def test_a_silenced_finding_is_not_fixed(tmp_path):
    source = b"import torch\nx = torch.randn(2)\nx.cuda()  # noqa: SB202\n"
    path = write(tmp_path, "a.py", source)
    fix([path], LintConfig())
    assert path.read_bytes() == source


def test_a_file_that_does_not_parse_is_left_untouched(tmp_path):
    path = write(tmp_path, "a.py", b"x.cuda()\ndef (:\n")
    result = fix([path], LintConfig())
    assert path.read_bytes() == b"x.cuda()\ndef (:\n" and result.remaining.errors


# -- output and the command line


def test_json_says_whether_each_finding_is_fixable_and_how():
    from samebits.linter import LintResult
    from samebits.linter.report import to_json

    found = lint_source('import torch\nx = torch.randn(2)\nx.cuda()\nsd = torch.load("w.pt", weights_only=False)\n')
    data = to_json(LintResult(found, [], 1))
    by_code = {f["code"]: f for f in data["findings"]}
    assert by_code["SB202"]["fixable"] is True
    assert by_code["SB202"]["fix"]["edits"] == [
        {"line": 3, "column": 1, "end_line": 3, "end_column": 1, "text": "x = "}
    ]
    assert by_code["SB401"]["fixable"] is False and "not shown to be a state dict" in by_code["SB401"]["no_fix"]
    assert by_code["SB401"]["torchfix"] == "TOR102"


def test_sarif_carries_each_fix_as_replacements(tmp_path):
    path = write(tmp_path, "a.py", "import torch\nx = torch.randn(2)\né = 1; x.cuda()\n".encode())
    sarif = json.loads(run_cli("lint", str(path), "--format", "sarif").stdout)
    run = sarif["runs"][0]
    (result,) = run["results"]
    replacement = result["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert run["columnKind"] == "unicodeCodePoints" and result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3,
        "startColumn": 8,
    }
    assert replacement == {
        "deletedRegion": {"startLine": 3, "startColumn": 8, "endLine": 3, "endColumn": 8},
        "insertedContent": {"text": "x = "},
    }


def test_fix_exits_0_when_nothing_remains_and_says_what_it_fixed(tmp_path):
    path = write(tmp_path, "a.py", b"import torch\nx = torch.randn(2)\nx.cuda()\n")
    out = run_cli("lint", "--fix", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"fixed: {path}:3:1: SB202 assign the result: x = x.cuda(...)",
        "0 findings in 1 file; fixed 1, not fixed 0 (lines as before --fix)",
    ]


def test_fix_exits_1_when_findings_remain(tmp_path):
    path = write(
        tmp_path, "a.py", b"import torch\nx = torch.randn(2)\nx.cuda()\nsd = torch.load('w', weights_only=False)\n"
    )
    out = run_cli("lint", "--fix", str(path))
    assert out.returncode == 1 and "not fixed:" in out.stdout and "x = x.cuda()" in path.read_text()


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path):
    source = b"import torch\nx = torch.randn(2)\nx.cuda()"  # no newline at the end
    path = write(tmp_path, "a.py", source)
    out = run_cli("lint", "--diff", "a.py", cwd=tmp_path)
    assert path.read_bytes() == source and out.returncode == 1
    assert out.stdout.endswith("-x.cuda()\n\\ No newline at end of file\n+x = x.cuda()\n\\ No newline at end of file\n")
    assert out.stderr.startswith("--fix would fix 1 finding(s) in 1 file(s)")
    subprocess.run(["git", "apply", "--unsafe-paths", "-"], input=out.stdout, text=True, cwd=tmp_path, check=True)
    assert path.read_bytes() == b"import torch\nx = torch.randn(2)\nx = x.cuda()"


def test_diff_takes_no_format(tmp_path):
    out = run_cli("lint", "--diff", "--format", "json", str(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--diff" in out.stderr


def test_a_bug_while_fixing_is_exit_3_in_one_line(tmp_path):
    write(tmp_path, "a.py", b"x = 1\n")
    code = (
        "import samebits.linter.fix as f\n"
        "def broken(*a, **k): raise KeyError('a bug')\n"
        "f.fix = broken\n"
        "from samebits.cli.app import main\n"
        f"main(['lint', '--fix', {str(tmp_path)!r}])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=scrubbed_env(), timeout=120)
    assert out.returncode == 3 and "Traceback" not in out.stderr
    assert (
        out.stderr.strip()
        == "samebits: internal error: KeyError: 'a bug'; please report it (rerun with --debug for the traceback)"
    )


def test_the_summary_counts_what_fix_would_fix(tmp_path):
    write(tmp_path, "a.py", b"import torch\nx = torch.randn(2)\nx.cuda()\n")
    assert run_cli("lint", str(tmp_path)).stdout.splitlines()[-1] == "1 finding in 1 file; 1 fixable with --fix"


# -- the registry


def test_the_registry_and_the_fixers_agree():
    from samebits.linter.engine import FIXERS

    static = [r for r in RULES if r.kind == "static"]
    assert set(FIXERS) == {r.code for r in static if r.autofix}
    assert all(bool(r.autofix) != bool(r.no_autofix) for r in static)


def test_explain_shows_the_fix():
    from samebits.rules import find_rule

    assert "**Fix (`--fix`).** Assigns the result back" in find_rule("SB202").explain()
    assert "**No automatic fix.**" in find_rule("SB201").explain()


# -- a property over the lint corpora


@pytest.mark.parametrize("corpus", CORPORA)
def test_fix_then_lint_finds_none_of_the_fixed_and_no_file_gains_a_finding(tmp_path, corpus):
    root = tmp_path / corpus
    shutil.copytree(REPO / "tests" / corpus, root)
    before = lint([root])
    result = fix([root], LintConfig())
    after = lint([root])
    assert result.fixed and before.errors == after.errors
    fixed = Counter((f.path, f.code) for f, _ in result.fixed)
    was, now = Counter((f.path, f.code) for f in before), Counter((f.path, f.code) for f in after)
    assert {k: n for k, n in now.items() if n > was[k] - fixed[k]} == {}
    for path in {f.path for f, _ in result.fixed}:
        ast.parse(Path(path).read_bytes())

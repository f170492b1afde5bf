"""HTML reports: one self-contained page per saved report, its chart with one point per traced
module and the origin marked there, the same bytes from --html and from `samebits report`, and
the page in a real headless Chromium: no console error, no network request, a screenshot."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

import samebits
from samebits.errors import UserError

from conftest import run_cli, scrubbed_env

pytest.importorskip("matplotlib", reason="HTML reports need the 'report' extra (matplotlib)")

from samebits.report.html import render  # noqa: E402

HERE = Path(__file__).resolve().parent
SPEC = f"{HERE / 'check_models.py'}:batch_variant"  # LayerNorm (batch-invariant), then a Linear that is not
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def check_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    result = run_cli(
        "check", SPEC, "--axes", "batch,repeat", "--json", str(folder / "r.json"), "--html", str(folder / "r.html")
    )
    assert result.returncode == 1, result.stderr
    return folder


def test_the_chart_has_one_point_per_traced_module_and_marks_the_origin(check_report):
    data = json.loads((check_report / "r.json").read_text())
    batch = next(a for a in data["axes"] if a["axis"] == "batch")
    profile = batch["origin"]["profile"]
    assert [m["module"] for m in profile] == ["norm", "fc", "<model>"]
    assert profile[0]["identical"] and profile[0]["max_abs"] == 0.0  # before the origin: the zero band
    assert not profile[1]["identical"] and profile[1]["max_abs"] > 0
    page = (check_report / "r.html").read_text()
    points = re.findall(r'<g id="pt-[^"]+" data-module="([^"]+)" data-axis="batch" data-measure="max_abs"', page)
    assert points == ["norm", "fc", "&lt;model&gt;"]
    assert re.findall(r'data-origin="([^"]+)" data-axis="batch" data-index="(\d+)"', page) == [("fc", "1")] * 2
    assert "<script" not in page and not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:|//)", page)


def test_report_renders_a_saved_json_to_the_same_bytes(check_report, tmp_path):
    again = run_cli("report", str(check_report / "r.json"), "--html", str(tmp_path / "again.html"))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.html").read_bytes() == (check_report / "r.html").read_bytes()
    (tmp_path / "bad.json").write_text("{not json")
    bad = run_cli("report", str(tmp_path / "bad.json"), "--html", str(tmp_path / "x.html"))
    assert bad.returncode == 2 and "is not a JSON report" in bad.stderr and "Traceback" not in bad.stderr
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something"}))
    other = run_cli("report", str(tmp_path / "other.json"), "--html", str(tmp_path / "x.html"))
    assert other.returncode == 2 and "not a samebits report samebits can render" in other.stderr
    assert not (tmp_path / "x.html").exists()


def test_every_kind_of_report_renders(tmp_path):
    pages = {}
    reports = {
        "check": samebits.check("demo:mlp", axes=("batch",)).to_dict(),
        "doctor": samebits.doctor("demo:mlp").to_dict(),
    }
    for kind, data in reports.items():
        pages[kind] = render(json.loads(json.dumps(data, default=str)))
        assert pages[kind].startswith("<!DOCTYPE html>") and "</html>" in pages[kind]
    assert "SB351" in pages["doctor"] and "<svg" in pages["doctor"]  # the memory growth chart
    with pytest.raises(UserError, match="not a samebits report"):
        render({"kind": "golden"})


def test_a_missing_plotting_extra_is_one_line_before_the_work(monkeypatch, tmp_path):
    from samebits.cli.output import check_report_paths

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(UserError, match=r"pip install 'samebits\[report\]'"):
        check_report_paths(None, str(tmp_path / "r.html"))
    with pytest.raises(UserError, match="is a directory"):
        check_report_paths(None, str(tmp_path))


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (Debian: apt-get install chromium); .ci/run installs it")
def test_the_page_in_headless_chromium(check_report, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser test drives Chromium with playwright")
    page_file = (check_report / "r.html").resolve()
    requests, errors = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri(), wait_until="load", timeout=30_000)
            points = page.locator('g[data-axis="batch"][data-measure="max_abs"]')
            assert points.count() == 3
            fc = page.locator('g[data-module="fc"][data-measure="max_abs"]').bounding_box()
            origin = page.locator('g[data-origin="fc"]').first.bounding_box()
            assert fc and origin
            assert abs((fc["x"] + fc["width"] / 2) - (origin["x"] + origin["width"] / 2)) < 2.0
            page.screenshot(path=str(tmp_path / "check-report.png"), full_page=True)
        finally:
            browser.close()
    assert requests == [page_file.as_uri()], "the page made a network request"
    assert errors == []
    assert (tmp_path / "check-report.png").stat().st_size > 10_000


def test_tables_fit_80_columns_and_never_cut_a_number():
    import io

    from rich.console import Console

    from samebits.cli import bench
    from samebits.measure.load import Load
    from samebits.measure.timing import Ratio
    from samebits.runtime.bench import BenchReport, BenchRow

    quiet = Load(0.4, 2, 0.0)
    rows = [
        BenchRow(
            config=name,
            batch=b,
            samples_per_s=s,
            p50_ms=p,
            p99_ms=p * 9.1,
            peak_mb=m,
            identical_to_reference=b == 1,
            same_as_alone=True,
            speedup_vs_loop=s / 4405.5,
            speedup=None if b == 1 else Ratio.over([s / 4405.5 * f for f in (0.9, 1.0, 1.1)], quiet).to_dict(),
        )
        for name, b, s, p, m in [
            ("per-sample loop", 1, 4405.5, 0.227, 1.8),
            ("predictor:onnxruntime (any size)", 64, 1_250_011.3, 123.456, 10240.0),
            ("predictor:eager", 256, 38_123.0, 1.2, None),
        ]
    ]
    report = BenchReport("x.py:net", rows, {}, {}, [], 61, load=quiet.to_dict())
    out = io.StringIO()
    bench.render(Console(file=out, width=80, highlight=False), report)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    for number in ("1,250,011", "4,406", "38,123", "123.46/1123.45", "10240.0", "255-312x", "7.8-9.5x"):
        assert number in text, number
    result = run_cli("check", "demo:mlp", "--axes", "batch", env=scrubbed_env(COLUMNS="80"))
    assert result.returncode == 1
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert "1/8" in result.stdout and re.search(r"\d\.\d\de-0\d", result.stdout)


def test_module_names_with_dollar_signs_are_text_not_math():
    """matplotlib parses "$...$" in a label as math: a module named so stopped `check --html`
    after the check had run (exit 3, no page)."""
    from collections import OrderedDict

    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict([("$\\frac{$", nn.Linear(256, 256)), ("b$x^$", nn.Linear(256, 8))])).eval()
    report = samebits.check(model, torch.randn(8, 256), axes=("batch",))
    if report.axes[0].verdict != "diverged":
        pytest.skip("this CPU's GEMMs keep a row's bits at every batch size here: no chart of modules to draw")
    page = render(json.loads(json.dumps(report.to_dict(), default=str)))
    assert "$\\frac{$" in page and "b$x^$" in page

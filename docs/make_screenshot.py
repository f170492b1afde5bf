"""Regenerate docs/check-report.png, the README's screenshot of a check report.

Run: python docs/make_screenshot.py   (needs the 'report' extra, playwright and Chromium)

It checks tests/check_models.py:batch_variant (a LayerNorm, identical at every batch size, then a
Linear that is not) on the batch and repeat axes, writes the HTML report, and screenshots it in
headless Chromium.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "check-report.png"


def main() -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("make_screenshot: no Chromium here (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="samebits-shot-") as tmp:
        page_file = Path(tmp) / "report.html"
        spec = "tests/check_models.py:batch_variant"
        cmd = [sys.executable, "-m", "samebits", "check", spec, "--axes", "batch,repeat", "--html", str(page_file)]
        subprocess.run(cmd, check=False, capture_output=True, cwd=ROOT)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1000, "height": 800}, device_scale_factor=1)
            page.goto(page_file.as_uri(), wait_until="load")
            page.screenshot(path=str(OUT), full_page=True)
            browser.close()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

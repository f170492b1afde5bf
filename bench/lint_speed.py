"""How long `samebits lint` takes on about 6,000 lines of inference code (the project's corpus,
copied until it reaches that size), in a fresh process as a user runs it.

Run: python bench/lint_speed.py
Target (issue #12): <= 1 s for 6,000 lines when no selected check needs torch (`--select SB401`);
all rules are shown beside it (SB102 imports torch to know its flag names, only when a file
assigns a torch.backends flag).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "lint_corpus"


def build(folder: Path, lines: int = 6000) -> tuple[int, int]:
    files = sorted(CORPUS.glob("*.py"))
    total, count = 0, 0
    while total < lines:
        for f in files:
            text = f.read_text()
            (folder / f"copy{count}_{f.name}").write_text(text)
            total += text.count("\n")
            count += 1
            if total >= lines:
                break
    return total, count


def seconds(argv: list[str], repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="samebits-lint-bench-"))
    try:
        lines, files = build(folder)
        lint = [sys.executable, "-m", "samebits", "lint"]
        start_up = seconds([sys.executable, "-m", "samebits", "--version"])
        only = seconds([*lint, "--select", "SB401", str(folder)])
        no_torch = seconds([*lint, "--ignore", "SB102", str(folder)])
        every = seconds([*lint, str(folder)])
        print(f"{lines} lines in {files} files; `samebits --version` (start-up) {start_up:.2f} s")
        print(f"lint --select SB401: {only:.2f} s  (target <= 1 s)")
        print(f"lint --ignore SB102: {no_torch:.2f} s  (every rule that needs no torch)")
        print(f"lint, every rule:    {every:.2f} s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

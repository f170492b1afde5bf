"""`samebits lint`'s precision and recall per rule on the labelled corpora, with every false
alarm and miss listed.

Run: python bench/lint_quality.py [CORPUS ...]   (default: tests/lint_corpus and tests/lint_corpus_unseen)

Each corpus folder has a ``labels.toml`` (one table per ``.py`` file, ``findings = [{code, line}]``,
written by hand from the rule texts before the linter ran on it). A finding matches a label by
file, code and line (within one line). tests/lint_corpus_unseen was written by a second author
who never saw the linter's code, shaped after public repositories' inference files.

Targets (issue #29): precision >= 0.95 and recall >= 0.90 overall, no rule below 0.85 precision.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
CORPORA = [ROOT / "tests" / name for name in ("lint_corpus", "lint_corpus_unseen", "lint_corpus_unseen2")]


def labels(corpus: Path) -> dict[str, dict]:
    return tomllib.loads((corpus / "labels.toml").read_text())


def score(corpus: Path) -> tuple[dict[str, Counter], list[str]]:
    """Per code: true positives, false positives, false negatives; and one line per miss, false
    alarm and file that could not be linted."""
    import samebits

    corpus = corpus.resolve()
    result = samebits.lint([corpus])
    found = [(Path(f.path).resolve().relative_to(corpus).as_posix(), f.code, f.line) for f in result]
    expected = [(file, item["code"], item["line"]) for file, t in labels(corpus).items() for item in t["findings"]]
    counts: dict[str, Counter] = {}
    misses: list[str] = []
    unmatched = list(found)
    for file, code, line in expected:
        hit = next((f for f in unmatched if f[0] == file and f[1] == code and abs(f[2] - line) <= 1), None)
        counts.setdefault(code, Counter())["tp" if hit else "fn"] += 1
        if hit:
            unmatched.remove(hit)
        else:
            misses.append(f"missed  {file}:{line} {code}")
    for file, code, line in unmatched:
        counts.setdefault(code, Counter())["fp"] += 1
        misses.append(f"false   {file}:{line} {code}")
    for path, why in result.errors:  # a file not linted scores nothing: say so
        misses.append(f"error   {Path(path).resolve().relative_to(corpus).as_posix()}: {why}")
    return counts, misses


def ratio(a: int, b: int) -> float:
    return a / b if b else 1.0


def totals(counts: dict[str, Counter]) -> tuple[float, float]:
    """(precision, recall) over every rule."""
    t = sum(counts.values(), Counter())
    return ratio(t["tp"], t["tp"] + t["fp"]), ratio(t["tp"], t["tp"] + t["fn"])


def report(corpus: Path) -> bool:
    started = time.process_time()
    counts, misses = score(corpus)
    seconds = time.process_time() - started
    files = len(labels(corpus))
    print(
        f"\n=== {corpus.relative_to(ROOT) if corpus.is_relative_to(ROOT) else corpus}: {files} files, lint {seconds:.2f} s CPU ==="
    )
    print(f"{'rule':<6} {'tp':>4} {'fp':>4} {'fn':>4} {'precision':>10} {'recall':>7}")
    worst = 1.0
    for code, c in sorted(counts.items()):
        p, r = ratio(c["tp"], c["tp"] + c["fp"]), ratio(c["tp"], c["tp"] + c["fn"])
        worst = min(worst, p)
        print(f"{code:<6} {c['tp']:>4} {c['fp']:>4} {c['fn']:>4} {p:>10.2f} {r:>7.2f}")
    precision, recall = totals(counts)
    ok = precision >= 0.95 and recall >= 0.90 and worst >= 0.85
    print(
        f"{'all':<6} precision {precision:.2f}, recall {recall:.2f}, lowest rule precision {worst:.2f}: "
        f"{'met' if ok else 'MISSED'} (>= 0.95, >= 0.90, >= 0.85)"
    )
    for line in sorted(misses):
        print(f"  {line}")
    return ok


def main(argv: list[str]) -> int:
    corpora = [Path(a) for a in argv] or CORPORA
    results = [report(c) for c in corpora]
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

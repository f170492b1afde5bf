"""The project index's cache: file summaries by content hash, in memory for the process and on
disk as one JSON file per project under ``$XDG_CACHE_HOME/samebits/lint`` (written atomically;
deleting it only costs a re-parse). Data only, never pickle."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from samebits._version import __version__
from samebits.errors import UserError
from samebits.files import BadJson, atomic_write, parse_json, read_regular
from samebits.linter.summary import SUMMARY_FORMAT

SCHEMA = f"samebits-lint-index-{SUMMARY_FORMAT}/{__version__}"  # another samebits or format re-parses
Summary = dict  # JSON object (linter/summary.py)
_MEMORY: dict[str, Summary | None] = {}  # content hash -> summary, for this process


def cache_folder() -> Path:
    """``$SAMEBITS_LINT_CACHE_DIR``, else ``$XDG_CACHE_HOME/samebits/lint`` (``~/.cache/samebits/lint``)."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "samebits" / "lint"
    return Path(os.environ.get("SAMEBITS_LINT_CACHE_DIR") or home)


def for_project(root: Path) -> SummaryCache:
    """The cache file of the project at ``root``."""
    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
    return SummaryCache(cache_folder() / f"{key}.json")


class SummaryCache:
    """Summaries by content hash; ``path`` None: in memory only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.disk: dict[str, Summary | None] = {}
        self.used: dict[str, Summary | None] = {}
        self.changed = False
        self.checks: dict[str, str] = {}  # of the entries read from the file: written again as read
        if path is not None:
            read = _read(path)
            self.disk = {d: summary for d, (summary, _) in read.items()}
            self.checks = {d: check for d, (_, check) in read.items()}

    def get(self, digest: str, compute: Callable[[], Summary | None]) -> Summary | None:
        """The summary of the file whose content has ``digest``: from this process, the cache
        file, or ``compute()``."""
        if digest in _MEMORY:
            found = _MEMORY[digest]
        elif digest in self.disk:
            found = _MEMORY[digest] = self.disk[digest]
        else:
            found = _MEMORY[digest] = compute()
        if digest not in self.disk:
            self.changed = True
        self.used[digest] = found
        return found

    def save(self) -> None:
        """Write the summaries this run used (older ones dropped), if any was new; a cache that
        cannot be written is skipped silently."""
        if self.path is None or not (self.changed or set(self.disk) != set(self.used)):
            return
        files = {d: {"summary": v, "check": self.checks.get(d) or _check(v)} for d, v in self.used.items()}
        body = json.dumps({"schema": SCHEMA, "files": files}, separators=(",", ":"))
        with contextlib.suppress(OSError, UserError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, lambda tmp: tmp.write_text(body))


MAX_CACHE_BYTES = 64 << 20  # a project's summaries are a few MB at MAX_FILES files


def _check(summary: Summary | None) -> str:
    """What an entry's summary must hash to: an entry damaged or edited since it was written reads
    as missing."""
    return hashlib.sha256((SCHEMA + json.dumps(summary, sort_keys=True)).encode()).hexdigest()[:32]


def _read(path: Path) -> dict[str, tuple[Summary | None, str]]:
    """The entries of the cache file at ``path`` that read back as written (each with its check);
    none where the file is missing, not a regular file, too large, not JSON samebits reads or of
    another schema. It is a cache: what cannot be read is summarised again and written anew."""
    try:
        data = parse_json(read_regular(path, MAX_CACHE_BYTES))
    except (OSError, BadJson):
        return {}
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("files"), dict):
        return {}
    return {
        digest: (entry["summary"], entry["check"])
        for digest, entry in data["files"].items()
        if isinstance(entry, dict)
        and isinstance(entry.get("summary"), (dict, type(None)))
        and entry.get("check") == _check(entry.get("summary"))
    }

"""Content-addressed artifacts under a cache folder: built once under a lock, written
atomically, loaded by every process."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from samebits._version import __version__
from samebits.errors import UserError
from samebits.files import (
    BadJson,
    atomic_write,
    exclusive,
    folder_state,
    owned_entry,
    read_json,
    remove_own_file,
    sha256_file,
    tree_bytes,
)
from samebits.models.inputs import Model


def _home_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "samebits"


def default_cache_dir() -> Path:
    """``$SAMEBITS_CACHE_DIR``, else ``$XDG_CACHE_HOME/samebits`` (``~/.cache/samebits``)."""
    return Path(os.environ.get("SAMEBITS_CACHE_DIR") or _home_cache())


def weights_digest(model: Model) -> str:
    """sha256 over every parameter and buffer (names, dtypes, shapes, exact bits)."""
    from samebits.tensors.digest import weights_digests

    h = hashlib.sha256()
    for name, d in weights_digests(model).items():
        h.update(f"{name}={d};".encode())
    return h.hexdigest()


_SOURCES: dict[tuple[str, int, int], str] = {}  # (file, mtime_ns, size) -> sha256 of its bytes


def _source_digest(cls: type) -> str | None:
    """sha256 of the file that defines ``cls`` (the whole module: helpers its methods call
    included), memoized by path, mtime and size; ``None`` where it has no source file."""
    import inspect

    try:
        path = inspect.getsourcefile(cls)
        if path is None:
            return None
        st = os.stat(path)
    except (TypeError, OSError):
        return None
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _SOURCES:
        try:
            _SOURCES[key] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            return None
    return _SOURCES[key]


def code_digest(model: Model) -> str:
    """The model's structure: its module tree (types, and the source files that define them;
    measured: one ``inspect.getsource`` per class parsed transformers' modeling file 17 times,
    0.26 s of a 0.76 s predict run of a tiny BERT)."""
    h = hashlib.sha256(repr(model).encode())
    seen = set()
    for module in model.modules() if isinstance(model, torch.nn.Module) else []:
        cls = type(module)
        if cls in seen:
            continue
        seen.add(cls)
        h.update(f"{cls.__module__}.{cls.__qualname__}={_source_digest(cls)};".encode())
    return h.hexdigest()


def artifact_key(model: Model, parts: dict[str, Any], weights: str | None = None) -> str:
    """A content hash of the weights (``weights``: their :func:`weights_digest` where the caller
    has it), the code, and ``parts`` (shapes, dtypes, backend, versions)."""
    payload = {
        "weights": weights or weights_digest(model),
        "code": code_digest(model),
        "torch": torch.__version__,
        "samebits": __version__,
        "cpu": torch.backends.cpu.get_cpu_capability(),
        **parts,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


MARKER = ".samebits-cache"  # says a folder is a samebits cache: nothing else is ever removed
MANIFEST = "manifest.json"  # every entry samebits wrote, with its sha256 at build time


class CacheError(UserError):
    """A cache folder samebits may not use as asked (foreign, unsafe, read-only)."""


def _sha256(path: Path) -> str | None:
    return sha256_file(path) if path.is_file() else None


class ArtifactCache:
    """A cache folder: a marker file, a manifest of what samebits wrote (name, kind, sha256),
    entries built once under a lock and written atomically. A folder without the marker is
    never written into unless empty, and never cleared. A folder that is not writable is read
    without locks. Entries that carry code are loaded only from a folder owned by this user and
    not writable by others (as ssh treats its keys)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    # -- state ----------------------------------------------------------------------------------
    @property
    def is_cache(self) -> bool:
        return folder_state(self.folder, MARKER) == "mine"

    @property
    def writable(self) -> bool:
        return os.access(self.folder if self.folder.exists() else self.folder.parent, os.W_OK)

    def untrusted_reason(self) -> str | None:
        """Why code may not be loaded from this folder, or ``None`` when it may."""
        try:
            st = self.folder.stat()
        except OSError:
            return None
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            return f"the cache folder {self.folder} belongs to another user"
        if st.st_mode & 0o022:
            return f"the cache folder {self.folder} is writable by others (mode {st.st_mode & 0o777:o})"
        return None

    def manifest(self) -> dict[str, dict[str, Any]]:
        """The entries samebits recorded, each naming one entry directly inside the folder (the
        folder itself, a path or the marker and manifest are dropped: nothing acts on them)."""
        try:
            data = read_json(self.folder / MANIFEST)
        except BadJson:
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(entries, dict):
            return {}
        return {
            k: v
            for k, v in entries.items()
            if isinstance(v, dict) and owned_entry(self.folder, k) and k not in (MARKER, MANIFEST)
        }

    # -- writing --------------------------------------------------------------------------------
    def ensure(self) -> None:
        """Make the folder a cache (marker and all), or refuse a foreign, non-empty one."""
        state = folder_state(self.folder, MARKER)
        if state == "mine":
            return
        if state in ("file", "broken link"):
            raise CacheError(f"cache folder {self.folder} is a {state}; pass a folder (cache_dir=..., --cache-dir)")
        adopt = (
            self.folder.resolve() == _home_cache().resolve()
        )  # the folder named for samebits (a cache from before markers)
        if state == "foreign" and not adopt:
            raise CacheError(
                f"{self.folder} is not empty and is not a samebits cache (no {MARKER} marker); choose a new or empty folder for the cache"
            )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write(self.folder / MARKER, lambda tmp: tmp.write_text(json.dumps({"samebits_cache": 1}) + "\n"))
        except OSError as exc:
            raise CacheError(f"cannot create the cache folder {self.folder}: {exc.strerror}") from None

    def lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        """An exclusive lock on ``name.lock``: two processes building one entry build it once."""
        return exclusive(self.folder / f"{name}.lock", wait=True)

    def _record(self, name: str, kind: str, what: str | None = None) -> None:
        path = self.folder / name
        with self.lock(MANIFEST):
            entries = self.manifest()
            entries[name] = {"kind": kind, "sha256": _sha256(path), "written": time.time()}
            if what:
                entries[name]["what"] = what
            self._write(
                MANIFEST,
                lambda tmp: tmp.write_text(json.dumps({"version": 1, "entries": entries}, indent=1, sort_keys=True)),
            )

    def _write(self, name: str, write: Callable[[Path], object]) -> None:
        atomic_write(self.folder / name, write)

    def _valid(self, name: str) -> bool:
        entry = self.manifest().get(name)
        if entry is None or not (self.folder / name).exists():
            return False
        return entry.get("sha256") is None or entry["sha256"] == _sha256(self.folder / name)

    def build_once(
        self,
        name: str,
        build: Callable[[Path], object],
        *,
        kind: str = "artifact",
        code: bool = False,
        what: str | None = None,
    ) -> bool:
        """Make entry ``name`` exist and match the digest recorded when it was built: if it
        does not (missing, corrupt, planted), ``build(tmp)`` writes a temporary file that is
        renamed into place under the lock and recorded. ``code``: the entry can run code when
        loaded, so the folder must be trusted; ``what``: what it is for, in words, for
        ``cache list``. True when built here, False on a cache hit."""
        if code and (reason := self.untrusted_reason()):
            raise CacheError(f"{reason}: samebits does not load code from it; chmod go-w it or pass another cache_dir")
        if not self.writable and self.is_cache:
            if self._valid(name):
                return False
            raise CacheError(
                f"the cache folder {self.folder} is read-only and lacks a valid '{name}'; build it once where the cache is writable"
            )
        self.ensure()
        with self.lock(name):
            if self._valid(name):
                return False
            if (self.folder / name).exists():
                warnings.warn(
                    f"samebits: cache entry {name} did not match the digest recorded at build (or was not written by samebits): rebuilt",
                    stacklevel=3,
                )
            self._write(name, build)
            self._record(name, kind, what)
            return True

    def read_json(self, name: str) -> dict[str, Any] | None:
        """A JSON entry, or ``None`` where it is missing, corrupt or not samebits' own."""
        if not self._valid(name):
            return None
        try:
            data = read_json(self.folder / name)
        except BadJson:
            return None
        return data if isinstance(data, dict) else None

    def record_folder(self, name: str) -> Path:
        """A sub-folder that a tool fills itself (inductor's kernels), recorded in the manifest."""
        self.ensure()
        path = self.folder / name
        path.mkdir(exist_ok=True)
        if name not in self.manifest():
            self._record(name, "folder")
        return path

    # -- listing and clearing -------------------------------------------------------------------
    def entries(self) -> list[dict[str, Any]]:
        """Every entry samebits wrote: name, kind, size, what it is for and when it was written."""
        out = []
        for name, entry in sorted(self.manifest().items()):
            p = self.folder / name
            if p.is_symlink() or not p.exists():  # samebits writes no links: one is not its entry
                continue
            what = entry.get("what") if isinstance(entry.get("what"), str) else None
            written = entry.get("written") if isinstance(entry.get("written"), (int, float)) else None
            out.append(
                {
                    "name": name,
                    "kind": entry.get("kind", "artifact"),
                    "bytes": tree_bytes(p),
                    "what": what or _what_of(name),
                    "written": written,
                }
            )
        return out

    def clear(self) -> int:
        """Remove every entry in the manifest (and its lock); nothing else: not the folder, not
        a link (samebits writes none), not what a link points to. Refuses a folder without the
        marker. Returns how many entries were removed."""
        import shutil

        if not self.folder.exists():
            return 0
        if not self.is_cache:
            raise CacheError(f"{self.folder} is not a samebits cache (no {MARKER} marker): nothing removed")
        count = 0
        with self.lock(MANIFEST):
            for name in self.manifest():
                p = self.folder / name
                if p.is_symlink():
                    continue
                if p.is_dir():
                    shutil.rmtree(p)
                    count += 1
                elif p.exists():
                    p.unlink()
                    count += 1
                remove_own_file(self.folder / f"{name}.lock")
            self._write(MANIFEST, lambda tmp: tmp.write_text(json.dumps({"version": 1, "entries": {}})))
        return count


def build_once(path: Path, build: Callable[[Path], object], *, code: bool = False) -> bool:
    """:meth:`ArtifactCache.build_once` for ``path`` in its folder."""
    return ArtifactCache(path.parent).build_once(path.name, build, code=code)


def _what_of(name: str) -> str:
    """What an entry is, from its name, where the manifest does not say (entries written before
    it did, and the backends' artifacts, named after their backend)."""
    prefix = name.split("-", 1)[0]
    return {"calibration": "batch-invariance calibration", "auto": "backend=auto plan", "thread": "thread plan"}.get(
        prefix, f"{prefix} artifact"
    )

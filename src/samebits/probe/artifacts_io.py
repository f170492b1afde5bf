"""Content-addressed artifacts under a cache folder: built once under a lock, written
atomically, loaded by every process."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from samebits._version import __version__


def default_cache_dir() -> Path:
    base = os.environ.get("SAMEBITS_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "samebits")
    return Path(base)


def weights_digest(model: Any) -> str:
    """sha256 over every parameter and buffer (names, dtypes, shapes, exact bits)."""
    from samebits.tensors.digest import digest

    h = hashlib.sha256()
    if isinstance(model, torch.nn.Module):
        for name, t in list(model.named_parameters()) + list(model.named_buffers()):
            h.update(f"{name}={digest(t)};".encode())
    return h.hexdigest()


def code_digest(model: Any) -> str:
    """The model's structure: its module tree (types and their source where available)."""
    import inspect

    h = hashlib.sha256(repr(model).encode())
    seen = set()
    for module in model.modules() if isinstance(model, torch.nn.Module) else []:
        cls = type(module)
        if cls in seen:
            continue
        seen.add(cls)
        h.update(f"{cls.__module__}.{cls.__qualname__}".encode())
        with contextlib.suppress(TypeError, OSError):
            h.update(inspect.getsource(cls).encode())
    return h.hexdigest()


def artifact_key(model: Any, parts: dict[str, Any]) -> str:
    """A content hash of the weights, the code, and ``parts`` (shapes, dtypes, backend, versions)."""
    payload = {
        "weights": weights_digest(model),
        "code": code_digest(model),
        "torch": torch.__version__,
        "samebits": __version__,
        "cpu": torch.backends.cpu.get_cpu_capability(),
        **parts,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:32]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path.lock``: two processes building one artifact build it once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_once(path: Path, build: Callable[[Path], None]) -> bool:
    """Make ``path`` exist: if it does not, ``build(tmp)`` writes a temporary file that is then
    renamed into place, under the lock. Returns True when it was built here, False on a cache hit."""
    with locked(path):
        if path.exists():
            return False
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        try:
            build(Path(tmp))
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return True


def list_cache(folder: Path) -> list[dict[str, Any]]:
    """Every artifact and calibration in ``folder``: name, kind, size."""
    if not folder.is_dir():
        return []
    out = []
    for p in sorted(folder.iterdir()):
        if p.name.endswith(".lock") or p.name.startswith("."):
            continue
        kind = "calibration" if p.name.startswith("calibration-") else "artifact"
        size = sum(f.stat().st_size for f in p.rglob("*")) if p.is_dir() else p.stat().st_size
        out.append({"name": p.name, "kind": kind, "bytes": size})
    return out


def clear_cache(folder: Path) -> int:
    """Remove every artifact, calibration and lock in ``folder``; returns how many entries."""
    import shutil

    if not folder.is_dir():
        return 0
    count = 0
    for p in folder.iterdir():
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
        count += not p.name.endswith(".lock")
    return count

"""Writing files the way every part of samebits does: atomically, with the user's umask."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def file_mode() -> int:
    """The mode a new file gets under this process's umask (``mkstemp`` alone would force 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def atomic_write(path: Path, write: Callable[[Path], None], *, overwrite: bool = True) -> None:
    """``write(tmp)`` fills a temporary file in ``path``'s folder, which then becomes ``path`` in
    one step: a reader sees the old file or the new one, never half of one. Without
    ``overwrite``, an existing ``path`` raises ``FileExistsError`` and is left untouched (a hard
    link: atomic, and it fails if the file exists)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, file_mode())
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)

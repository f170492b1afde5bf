"""Writing files the way every part of samebits does: atomically, with the user's umask, and
only inside the folders it owns."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from samebits.errors import UserError, first_line


def file_mode() -> int:
    """The mode a new file gets under this process's umask (``mkstemp`` alone would force 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    return digest_file(path, hashlib.sha256())


def xxh3_file(path: Path) -> str:
    """xxh3-128 of a file's bytes (change detection, not a signature: 10x sha256's speed)."""
    import xxhash

    return digest_file(path, xxhash.xxh3_128())


def digest_file(path: Path, h: Any) -> str:
    """``h`` (a hashlib-style object) over a file's bytes read in 1 MiB blocks, as hex."""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return str(h.hexdigest())


# Where the machine, not samebits, refuses a write: a full disk or quota, a read-only file
# system, no permission, a file too large.
_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}


class WriteError(UserError):
    """A file samebits must write cannot be written here (disk full, read-only, no permission);
    nothing half-written is left behind."""


def disk_error(exc: BaseException) -> str | None:
    """Why the machine refused a write, in words, where ``exc`` says so; ``None`` for anything else."""
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        return exc.strerror or os.strerror(exc.errno)
    found = re.search(r"os error (\d+)", str(exc))  # safetensors names the OS error in its message only
    if found and int(found.group(1)) in _DISK_ERRNOS:
        return os.strerror(int(found.group(1)))
    return None


def atomic_write(
    path: Path, write: Callable[[Path], object], *, overwrite: bool = True, mode: int | None = None
) -> None:
    """``write(tmp)`` fills a temporary file in ``path``'s folder, which then becomes ``path`` in
    one step: a reader sees the old file or the new one, never half of one. Without
    ``overwrite``, an existing ``path`` raises ``FileExistsError`` and is left untouched (a hard
    link: atomic, and it fails if the file exists). The file gets ``mode`` (a rewritten file's own
    permissions), else the umask's. A full disk, a read-only folder or a missing permission is a
    :class:`WriteError` (one line), with the temporary file removed."""
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(Path(tmp))
        os.chmod(tmp, file_mode() if mode is None else mode)
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
    except Exception as exc:
        reason = disk_error(exc)
        if reason is None:
            raise
        raise WriteError(f"cannot write '{path}': {reason}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink(missing_ok=True)


FolderState = Literal["new", "empty", "mine", "foreign", "file", "broken link"]


def folder_state(folder: Path, marker: str, ignore: tuple[str, ...] = (), kind: str | None = None) -> FolderState:
    """What samebits may do with ``folder``, the place it is asked to write: ``new`` (missing),
    ``empty`` (nothing but ``ignore``), ``mine`` (holds samebits' ``marker`` file: with
    ``kind``, a JSON object whose ``"kind"`` is that, since a ``manifest.json`` or ``repro.json``
    may be anyone's), ``foreign`` (someone else's files: never written into), ``file`` or
    ``broken link`` (not a folder). The cache, ``check --out`` and ``predict``'s OUT_DIR all
    decide with this."""
    if folder.is_symlink() and not folder.exists():
        return "broken link"
    if not folder.exists():
        return "new"
    if not folder.is_dir():
        return "file"
    mark = folder / marker
    if mark.is_file() and not mark.is_symlink() and (kind is None or _json_kind(mark) == kind):  # a link is no marker
        return "mine"
    return "foreign" if any(p.name not in ignore for p in folder.iterdir()) else "empty"


def _json_kind(path: Path) -> object:
    """The ``"kind"`` of the JSON object in ``path``; ``None`` where it holds none."""
    try:
        data = read_json(path)
    except BadJson:
        return None
    return data.get("kind") if isinstance(data, dict) else None


def owned_entry(folder: Path, name: object) -> Path | None:
    """``folder / name`` where ``name`` (read from a manifest samebits keeps in ``folder``) names
    one entry directly inside it; ``None`` for anything else: the folder itself (``""``, ``"."``),
    its parent, a path into another folder or an absolute one. Every path samebits deletes,
    writes or follows from a manifest goes through here."""
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        return None
    return folder / name


def tree_bytes(path: Path) -> int:
    """The bytes of the regular files at or under ``path``; a symbolic link counts 0 and is
    never followed (an entry that is a link to ``/usr`` is not 8 GB of the cache)."""
    try:
        st = path.lstat()
    except OSError:
        return 0
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    if not stat.S_ISDIR(st.st_mode):
        return 0
    total = 0
    for root, _, files in os.walk(path, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(root, name))
                total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


class FolderBusy(OSError):
    """Another process holds the lock of a folder samebits writes into."""


class NotARegularFile(UserError):
    """A name samebits writes (a lock, a marker) is taken by a link, a FIFO or a device there:
    samebits never writes through one (a planted link would have its target truncated)."""


def open_lock(lock_file: Path) -> int:
    """A descriptor of ``lock_file`` to lock (created if missing, never truncated), opened without
    following a link and only where it is a regular file; :class:`NotARegularFile` otherwise."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO
    try:
        fd = os.open(lock_file, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile(
                f"{lock_file} is a symbolic link; samebits does not write through links: remove it"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(f"{lock_file} is not a regular file; samebits locks only files it creates: remove it")
    return fd


@contextlib.contextmanager
def exclusive(lock_file: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_file`` (created if missing, kept afterwards; see
    :func:`open_lock`) for the block; :class:`FolderBusy` at once where another process holds
    it, unless ``wait``."""
    fd = open_lock(lock_file)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise FolderBusy(f"{lock_file} is locked by another process") from None
        yield
    finally:
        os.close(fd)  # releases the lock


def remove_own_file(path: Path) -> None:
    """Remove ``path`` where it is a regular file (one samebits wrote); a link, a folder or
    anything else planted at that name is left alone."""
    with contextlib.suppress(OSError):
        if stat.S_ISREG(path.lstat().st_mode):
            path.unlink()


class TooLarge(OSError):
    """A file over the size samebits reads of its kind (checked before reading it)."""


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes, decided before
    a byte is read (a FIFO would block, a sparse 4 GiB file would fill memory): opened without
    blocking, then checked with ``fstat``. An ``OSError`` otherwise (:class:`TooLarge` for the
    size)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        too_large = TooLarge(errno.EFBIG, f"over {limit:,} bytes")
        if st.st_size > limit:
            raise too_large
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        if len(data) > limit:  # it grew since
            raise too_large
        return data
    finally:
        os.close(fd)


MAX_JSON_DEPTH = 64  # deeper than any file samebits writes; deeper input would overflow recursive readers


class BadJson(ValueError):
    """JSON samebits cannot read, with the reason in words (not JSON, not UTF-8, nested too deeply)."""


def parse_json(text: str | bytes) -> Any:
    """``text`` parsed, at most :data:`MAX_JSON_DEPTH` levels deep; :class:`BadJson` otherwise."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise BadJson(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    except UnicodeDecodeError:
        raise BadJson("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BadJson(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except ValueError as exc:  # an integer longer than Python converts (4300 digits)
        raise BadJson(f"not JSON samebits reads ({first_line(exc)})") from None
    check_depth(data)
    return data


_CONTAINERS = {dict, list}


def check_depth(data: Any) -> None:
    """:class:`BadJson` where ``data`` nests deeper than :data:`MAX_JSON_DEPTH` levels (a value
    inside a container is one level below it, scalars included); a list of plain values is looked
    at by type in one pass (a request's thousands of floats)."""
    level, depth = [data], 1
    while True:
        if not any(isinstance(x, (dict, list)) and x for x in level):
            return  # nothing below this level
        depth += 1
        if depth > MAX_JSON_DEPTH:
            raise BadJson(f"nested more than {MAX_JSON_DEPTH} levels deep")
        deeper: list[Any] = []
        for x in level:
            values = x.values() if isinstance(x, dict) else x if isinstance(x, list) else ()
            if not _CONTAINERS.isdisjoint(map(type, values)):
                deeper.extend(v for v in values if isinstance(v, (dict, list)))
        if not deeper:
            return
        level = deeper


JSON_LIMIT = 256 << 20  # bytes: past any manifest, marker or report samebits writes


def read_json(path: Path, limit: int = JSON_LIMIT) -> Any:
    """The JSON file at ``path`` (:func:`parse_json`): a regular file of at most ``limit`` bytes
    (a FIFO would block); :class:`BadJson` where it cannot be read."""
    try:
        text = read_regular(path, limit)
    except OSError as exc:
        raise BadJson(f"cannot be read ({exc.strerror or exc})") from None
    return parse_json(text)

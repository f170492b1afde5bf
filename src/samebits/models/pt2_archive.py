"""A ``.pt2`` archive read as data. :func:`load_exported` opens it with the reader
``torch.export.load`` itself uses (so both see the same entries, duplicates and root folder
alike), applies the loader's own rules to every entry it would read, refuses anything that
would be unpickled, any shape expression that is more than arithmetic (the loader evaluates them
with ``sympy.sympify``, which runs Python) (weights or constants marked ``use_pickle``, custom and opaque objects,
legacy weight files, sample inputs that need ``weights_only=False``) or run (AOTInductor and
other compiled code), and then loads through ``load_pt2`` directly, without the loader's
fallback to the older, pickled archive format, with ``torch.load`` forced to ``weights_only``
while it runs. torch's own verifier then refuses a graph that calls anything but operators."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from samebits.environ import environ_kept
from samebits.models.shape_expr import problem as shape_problem
from samebits.errors import SpecError, first_line

_NOT_A_PROGRAM = "is not a torch.export program ({}); save one with torch.export.save"


def _refuse(path: Path, entry: str, why: str) -> SpecError:
    return SpecError(
        f"'{path}' is refused: its entry '{entry}' {why}; samebits loads .pt2 archives only when nothing in them is unpickled or run"
    )


def _constants() -> Any:
    try:
        from torch.export.pt2_archive import constants
    except ImportError:  # torch < 2.6 saved programs in a format whose weights are pickled
        raise SpecError(
            "this torch has no .pt2 archive format that loads without unpickling; samebits loads .pt2 files with torch >= 2.6"
        ) from None
    return constants


class _Archive:
    """The records of an archive as torch's ``PyTorchFileReader`` names and reads them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not zipfile.is_zipfile(path):
            raise SpecError(f"'{path}' " + _NOT_A_PROGRAM.format("not a zip archive"))
        try:
            self.reader = torch._C.PyTorchFileReader(str(path))
            self.records: list[str] = list(self.reader.get_all_records())
        except Exception as exc:  # an entry outside the root folder, no version record, a bad zip
            raise SpecError(f"'{path}' " + _NOT_A_PROGRAM.format(first_line(exc)[:200])) from None
        self.names = set(self.records)

    def read(self, name: str) -> bytes:
        if name not in self.names:
            raise SpecError(f"'{self.path}' " + _NOT_A_PROGRAM.format(f"no entry '{name}'"))
        return bytes(self.reader.get_record(name))


def scan(path: Path) -> None:
    """Raise :class:`SpecError` (one line: the entry and why) unless loading ``path`` reads only
    tensors and JSON: every rule below follows what ``load_pt2`` reads, entry by entry."""
    c = _constants()
    archive = _Archive(path)
    seen: set[str] = set()
    for name in archive.records:
        if name in seen:
            raise _refuse(path, name, "appears twice (a zip reader may read either copy)")
        seen.add(name)
        if name.startswith((c.AOTINDUCTOR_DIR, c.EXECUTORCH_DIR, c.MTIA_DIR, c.XL_MODEL_WEIGHTS_DIR)):
            raise _refuse(path, name, "holds compiled code or pickled parameters")
    try:
        fmt = archive.read(c.ARCHIVE_FORMAT_PATH).decode()
        version = archive.read(c.ARCHIVE_VERSION_PATH).decode()
    except (SpecError, UnicodeDecodeError):
        raise SpecError(f"'{path}' " + _NOT_A_PROGRAM.format("no pt2 archive_format")) from None
    if fmt != c.ARCHIVE_FORMAT_VALUE or version != c.ARCHIVE_VERSION_VALUE:
        raise SpecError(f"'{path}' " + _NOT_A_PROGRAM.format(f"archive format {fmt!r} version {version!r}"))
    # The loader reads every record under models/ as a program, named by cutting off the
    # format's prefix and the length of its suffix, whatever those characters are.
    prefix, suffix = c.MODELS_FILENAME_FORMAT.split("{}")
    programs = []
    for name in archive.records:
        if name.startswith(prefix):
            program = name[len(prefix) : len(name) - len(suffix)]
            if c.MODELS_FILENAME_FORMAT.format(program) != name:
                raise _refuse(path, name, "is read as a program but is not named like one")
            programs.append(program)
    if "model" not in programs:
        raise SpecError(f"'{path}' holds no exported program ({c.MODELS_FILENAME_FORMAT.format('model')})")
    for program in programs:
        _scan_program(archive, c, program)
        _scan_shapes(archive, c.MODELS_FILENAME_FORMAT.format(program))


def _scan_program(archive: _Archive, c: Any, program: str) -> None:
    path = archive.path
    for legacy in (f"{c.WEIGHTS_DIR}{program}.pt", f"{c.CONSTANTS_DIR}{program}.pt"):
        if legacy in archive.names:
            raise _refuse(path, legacy, "is a legacy pickled weights file")
    _scan_config(archive, c.WEIGHTS_CONFIG_FILENAME_FORMAT.format(program), c.WEIGHTS_DIR, None)
    _scan_config(archive, c.CONSTANTS_CONFIG_FILENAME_FORMAT.format(program), c.CONSTANTS_DIR, c)
    sample = c.SAMPLE_INPUTS_FILENAME_FORMAT.format(program)
    try:
        torch.load(io.BytesIO(archive.read(sample)), weights_only=True)
    except SpecError:
        raise
    except Exception:
        raise _refuse(
            path, sample, "holds sample inputs that only load with weights_only=False (pickled objects)"
        ) from None


def _scan_shapes(archive: _Archive, name: str) -> None:
    """Every symbolic shape expression of a program (``expr_str``) is plain arithmetic on sizes
    (:func:`samebits.models.shape_expr.problem`): torch's loader hands each to ``sympy.sympify``,
    which runs it as Python (``__import__('os').system(...)`` in one ran a command)."""
    try:
        graph = json.loads(archive.read(name))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _refuse(archive.path, name, "is not a JSON program") from None
    stack = [graph]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr_str" and isinstance(value, str):
                    why = shape_problem(value)
                    if why:
                        raise _refuse(archive.path, name, f"holds a shape expression that is not arithmetic ({why})")
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


def _scan_config(archive: _Archive, name: str, folder: str, constants: Any) -> None:
    path = archive.path
    try:
        config: Any = json.loads(archive.read(name))["config"]
        entries = config.items()
    except SpecError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _refuse(path, name, "is not a valid payload config") from None
    for fqn, meta in entries:
        if not isinstance(meta, dict) or not isinstance(meta.get("path_name"), str):
            raise _refuse(path, name, f"describes '{fqn}' in an unknown way")
        if meta.get("use_pickle"):
            raise _refuse(path, name, f"marks '{fqn}' as pickled (use_pickle)")
        if constants is not None and not meta["path_name"].startswith(constants.TENSOR_CONSTANT_FILENAME_PREFIX):
            raise _refuse(path, name, f"holds '{fqn}' as a pickled object ({meta['path_name']})")
        if (
            not isinstance(meta.get("tensor_meta"), dict)
            or os.path.join(folder, meta["path_name"]) not in archive.names
        ):
            raise _refuse(path, name, f"describes '{fqn}' with no tensor entry in the archive")


@contextlib.contextmanager
def _weights_only() -> Iterator[None]:
    """Every ``torch.load`` in this process loads tensors only while the block runs (torch
    reads ``TORCH_FORCE_WEIGHTS_ONLY_LOAD`` at each call); the variables are put back after."""
    with environ_kept("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"):
        os.environ["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] = "1"
        os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
        yield


def load_exported(path: str | os.PathLike[str]) -> Any:
    """The ``torch.export.ExportedProgram`` in the archive ``path``, read as data: a
    :class:`SpecError` (one line) for anything that would be unpickled or run, or that is not
    a program. What ``torch.export.load(path)`` returns, without its risks."""
    p = Path(path)
    scan(p)
    from torch.export.pt2_archive._package import load_pt2  # present wherever _constants() is

    try:
        with _weights_only():
            contents = load_pt2(str(p))
        return contents.exported_programs["model"]
    except Exception as exc:
        unregistered = re.search(r"Deserializing (\S+) in pytree is not registered", str(exc))
        if unregistered:
            raise SpecError(_UNREGISTERED.format(path=p, cls=unregistered.group(1))) from exc
        raise SpecError(f"'{p}' " + _NOT_A_PROGRAM.format(first_line(exc)[:300])) from exc


_UNREGISTERED = (
    "'{path}' is a torch.export program whose inputs or outputs hold a {cls}, a class torch rebuilds only "
    "by importing its code, and samebits runs no code to load a .pt2; export a wrapper whose forward takes "
    "and returns tensors (a tuple or dict of them; a transformers model: return_dict=False, use_cache=False), "
    "or pass a factory (file.py:make_model)"
)

"""A ``.pt2`` archive read as data: refuse, before ``torch.export.load`` sees it, every entry that
the loader would unpickle (weights and constants marked ``use_pickle``, custom and opaque
objects, legacy weight files, sample inputs that need ``weights_only=False``) or run (compiled
AOTInductor code)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import torch

from samebits.errors import SpecError

_CODE_DIRS = ("data/aotinductor/", "data/executorch/", "data/mtia", "xl_model_weights/")


def _refuse(path: Path, entry: str, why: str) -> SpecError:
    return SpecError(
        f"'{path}' is refused: its entry '{entry}' {why}; samebits loads .pt2 archives only when nothing in them is unpickled or run"
    )


def scan_pt2(path: Path) -> None:
    """Raise :class:`SpecError` (one line: the entry and why) unless loading ``path`` with
    ``torch.export.load`` unpickles nothing and runs no compiled code."""
    if not zipfile.is_zipfile(path):
        raise SpecError(f"'{path}' is not a torch.export program (not a zip archive); save one with torch.export.save")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        root = names[0].split("/", 1)[0] + "/" if names and "/" in names[0] else ""
        inner = {n[len(root) :]: n for n in names if n.startswith(root)}
        if inner.get("archive_format") is None or archive.read(inner["archive_format"]).strip() != b"pt2":
            raise SpecError(
                f"'{path}' is not a torch.export program (no pt2 archive_format); save one with torch.export.save"
            )
        for name in inner:
            if name.startswith(_CODE_DIRS):
                raise _refuse(path, name, "holds compiled code or pickled parameters")
        models = [n[len("models/") : -len(".json")] for n in inner if n.startswith("models/") and n.endswith(".json")]
        if not models:
            raise SpecError(f"'{path}' holds no exported program (no models/*.json)")
        for model in models:
            for legacy in (f"data/weights/{model}.pt", f"data/constants/{model}.pt"):
                if legacy in inner:
                    raise _refuse(path, legacy, "is a legacy pickled weights file")
            _scan_config(path, archive, inner, f"data/weights/{model}_weights_config.json", constants=False)
            _scan_config(path, archive, inner, f"data/constants/{model}_constants_config.json", constants=True)
            sample = f"data/sample_inputs/{model}.pt"
            if sample in inner:
                try:
                    torch.load(io.BytesIO(archive.read(inner[sample])), weights_only=True)
                except Exception:
                    raise _refuse(
                        path, sample, "holds sample inputs that only load with weights_only=False (pickled objects)"
                    ) from None


def _scan_config(path: Path, archive: zipfile.ZipFile, inner: dict[str, str], name: str, *, constants: bool) -> None:
    if name not in inner:
        return
    try:
        config: Any = json.loads(archive.read(inner[name]))["config"]
        entries = config.items()
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _refuse(path, name, "is not a valid payload config") from None
    for fqn, meta in entries:
        if not isinstance(meta, dict):
            raise _refuse(path, name, f"describes '{fqn}' in an unknown way")
        file = str(meta.get("path_name", ""))
        if meta.get("use_pickle"):
            raise _refuse(path, name, f"marks '{fqn}' as pickled (use_pickle)")
        if constants and not file.startswith("tensor_"):
            raise _refuse(path, name, f"holds '{fqn}' as a pickled object ({file})")

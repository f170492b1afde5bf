"""What third-party code prints while a backend is built (exporters' steps, FX dumps, compiler
warnings), captured at the file-descriptor level so reports stay clean and kept in a summary."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any


@dataclasses.dataclass
class Captured:
    """What third-party code printed while a backend was built (its logs, FX dumps, warnings)."""

    text: str = ""

    def summary(self, tail: int = 5) -> dict[str, Any]:
        lines = [line for line in _ANSI.sub("", self.text).splitlines() if line.strip()]
        return {"lines": len(lines), "tail": lines[-tail:]}


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@contextlib.contextmanager
def quiet() -> Iterator[Captured]:
    """Exporters and compilers print their steps, graph dumps and warnings on stdout and stderr,
    from Python and from C++: capture both at the file-descriptor level, so reports stay clean;
    the text is kept in the yielded :class:`Captured`."""
    loggers = [
        logging.getLogger(name)
        for name in ("torch.onnx", "torch.export", "torch._dynamo", "torch._inductor", "onnxscript")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    captured = Captured()
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as sink:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()) as out,
                contextlib.redirect_stderr(io.StringIO()) as err,
                warnings.catch_warnings(record=True) as caught,
            ):
                warnings.simplefilter("always")
                yield captured
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
            sink.seek(0)
            own = [w for w in caught if str(w.message).startswith("samebits:")]  # samebits' own notes pass through
            noted = "".join(f"{w.category.__name__}: {w.message}\n" for w in caught if w not in own)
            captured.text = out.getvalue() + err.getvalue() + noted + sink.read().decode(errors="replace")
        for w in own:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)

"""The command line that starts a Python module without importing from the working folder.

``python -m MOD`` puts the current folder first on ``sys.path``, so a ``samebits.py`` or a
``samebits/`` there (a hostile checkout, a download folder) would run in place of samebits. Every
process samebits starts (its children, ``--portable``'s re-exec, ``samebits run``'s bootstrap)
is started through :func:`module_argv`: ``-P`` where the interpreter is this one and knows it
(Python 3.11+), else ``-c`` with a line that drops that first entry before anything is imported.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# Run by ``python -c`` (``sys.path[0]`` is then '' = the working folder): drop it unless the
# interpreter's own options already did (-P, -I), then run the module as ``-m`` would. ``sys`` is
# built in, and nothing else is imported before the entry is gone.
SAFE_RUN = (
    "import sys\n"
    "if not (getattr(sys.flags, 'safe_path', 0) or sys.flags.isolated) and sys.path[:1] == ['']: del sys.path[0]\n"
    "import runpy; runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)"
)


def module_argv(module: str, interpreter: Sequence[str] | None = None) -> list[str]:
    """``[python, ..., module]`` ready for the module's own arguments: ``interpreter`` (argv
    words, default this interpreter) running ``module`` as ``-m`` would, but with nothing on
    ``sys.path`` from the working folder."""
    if interpreter is None:
        if sys.version_info >= (3, 11):
            return [sys.executable, "-P", "-m", module]
        interpreter = [sys.executable]
    return [*interpreter, "-c", SAFE_RUN, module]

"""What ``samebits run`` does: the child's environment, its command line, and the exec."""

from __future__ import annotations

import os
import re
import shutil
import sys

from samebits.pystart import module_argv

CUBLAS_DEFAULT = ":4096:8"

# Python options that take a separate argument, and the ones that end option parsing.
_PY_OPTS_WITH_ARG = {"-W", "-X", "--check-hash-based-pycs"}
_PY_RE = re.compile(r"^python(\d+(\.\d+)*)?(\.exe)?$")


def child_environment(
    base: dict[str, str], *, seed: int, threads: int | None, portable: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """The environment for CMD (``portable``: a level's variables), and a line for each variable
    set or overridden."""
    env = dict(base)
    notes: list[str] = []

    def put(name: str, value: str, keep_existing: bool = False) -> None:
        old = env.get(name)
        if old is not None and keep_existing:
            notes.append(f"kept {name}={old} (already set)")
            return
        env[name] = value
        if old is None:
            notes.append(f"set {name}={value}")
        elif old != value:
            notes.append(f"overrode {name}={old} with {value}")
        else:
            notes.append(f"kept {name}={value}")

    put("PYTHONHASHSEED", str(seed))
    put("SAMEBITS_SEED", str(seed))
    put("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DEFAULT, keep_existing=True)
    if threads is not None:
        put("OMP_NUM_THREADS", str(threads))
        put("MKL_NUM_THREADS", str(threads))
    for name, value in (portable or {}).items():
        put(name, value)
    return env, notes


def is_python(executable: str) -> bool:
    """Whether ``executable`` names a Python interpreter (``python``, ``python3.11``, this one)."""
    if _PY_RE.match(os.path.basename(executable)):
        return True
    resolved = shutil.which(executable)
    return resolved is not None and os.path.realpath(resolved) == os.path.realpath(sys.executable)


def split_python_command(cmd: list[str]) -> tuple[list[str], list[str]] | None:
    """Split ``python [opts] (script | -m mod | -c code) args`` into (interpreter+opts, target+args).

    ``None`` when CMD is no Python running a script, module or code (e.g. an interactive shell).
    """
    if not cmd or not is_python(cmd[0]):
        return None
    i = 1
    while i < len(cmd):
        arg = cmd[i]
        if arg in ("-m", "-c"):
            return (cmd[:i], cmd[i:]) if i + 1 < len(cmd) else None
        if arg.startswith(("-m", "-c")) and len(arg) > 2 and not arg.startswith("--"):
            return cmd[:i], [arg[:2], arg[2:], *cmd[i + 1 :]]
        if arg in _PY_OPTS_WITH_ARG:
            i += 2
            continue
        if arg == "-" or arg == "--":
            return None
        if arg.startswith("-"):
            i += 1
            continue
        return cmd[:i], cmd[i:]
    return None


def build_command(
    cmd: list[str], *, seed: int, threads: int | None, deterministic: bool
) -> tuple[list[str], str | None]:
    """The argv to exec; with ``deterministic``, a Python target is wrapped in the bootstrap."""
    if not deterministic:
        return cmd, None
    split = split_python_command(cmd)
    if split is None:
        return (
            cmd,
            f"--deterministic applies to python running a script, -m module or -c code; '{cmd[0]}' runs with the environment only",
        )
    interpreter, target = split
    boot = [*module_argv("samebits.bootstrap", interpreter), "--seed", str(seed)]
    if threads is not None:
        boot += ["--threads", str(threads)]
    return [*boot, "--", *target], "the child enters samebits.deterministic() before the user's code"


def exec_command(argv: list[str], env: dict[str, str]) -> int:
    """Replace this process with ``argv``; return 127 (not found) or 126 (not executable) like a shell."""
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        print(f"samebits run: {argv[0]}: command not found", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"samebits run: {argv[0]}: permission denied", file=sys.stderr)
        return 126
    except OSError as exc:
        print(f"samebits run: {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 126
    return 0  # pragma: no cover - execvpe does not return

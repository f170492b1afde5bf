"""Shared test helpers: a scrubbed environment and a way to run the CLI in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from samebits.fingerprint import BIT_ENV_VARS

REPO = Path(__file__).resolve().parent.parent


def scrubbed_env(**extra: str) -> dict[str, str]:
    """This environment without any variable that changes bits, plus ``extra``. ``OPENBLAS_*``
    stay: the machine sets them because older OpenBLAS builds crash without them."""
    env = {k: v for k, v in os.environ.items() if k not in BIT_ENV_VARS or k.startswith("OPENBLAS_")}
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m samebits ARGS`` in a fresh interpreter with a scrubbed environment."""
    return subprocess.run(
        [sys.executable, "-m", "samebits", *args],
        capture_output=True,
        text=True,
        env=env if env is not None else scrubbed_env(),
        cwd=cwd,
        timeout=timeout,
    )


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env if env is not None else scrubbed_env(),
        timeout=timeout,
    )


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Tests never touch the user's ~/.cache/samebits: children inherit the variables."""
    os.environ["SAMEBITS_CACHE_DIR"] = str(tmp_path_factory.mktemp("samebits-cache"))
    os.environ["SAMEBITS_LINT_CACHE_DIR"] = str(tmp_path_factory.mktemp("samebits-lint-cache"))
    yield
    os.environ.pop("SAMEBITS_CACHE_DIR", None)
    os.environ.pop("SAMEBITS_LINT_CACHE_DIR", None)


@pytest.fixture(autouse=True)
def _seed_variable_kept():
    """seed_everything() writes SAMEBITS_SEED: no test leaves it behind for the next."""
    before = os.environ.get("SAMEBITS_SEED")
    yield
    if before is None:
        os.environ.pop("SAMEBITS_SEED", None)
    else:
        os.environ["SAMEBITS_SEED"] = before


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    """A golden of demo:mlp recorded by the CLI."""
    path = tmp_path_factory.mktemp("golden") / "g.safetensors"
    assert run_cli("record", "demo:mlp", "-o", str(path)).returncode == 0
    return path


@pytest.fixture(scope="module")
def reference():
    """The served MLP's (tests/serve_models.py) ``predict_one`` in this process: the bits every
    served answer must have."""
    import serve_models

    from samebits.runtime.predictor import Predictor

    model, example = serve_models.mlp()
    with Predictor(model, example_inputs=example, max_batch_size=16) as predictor:
        yield predictor


@pytest.fixture
def cli():
    return run_cli


def rewrite_golden(src: Path, dst: Path | None = None, *, edit_header=None, edit_tensors=None) -> Path:
    """A copy of the golden ``src`` at ``dst`` (default: in place) with its header and/or tensors
    edited by the given functions, everything else kept."""
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(src), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    header = json.loads(meta["samebits"])
    if edit_header:
        edit_header(header)
    if edit_tensors:
        edit_tensors(tensors)
    target = dst or src
    save_file(tensors, str(target), metadata={"samebits": json.dumps(header)})
    return target


def assert_record_then_verify_identical(spec: str, folder: Path) -> None:
    """``samebits record`` then ``samebits verify`` in new processes: identical bits, exactly."""
    import json

    golden = folder / "golden.safetensors"
    rec = run_cli("record", spec, "-o", str(golden))
    assert rec.returncode == 0, rec.stderr
    out = run_cli("verify", str(golden), spec, "--json", "-")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["verdict"] == "identical" and report["policy"] == "exact"


_SESSION: dict[str, object] = {}  # the outermost test session's config and exit status


def changed_places(fn, x, sizes=(1, 3, 17, 40, 70)) -> list[tuple[int, int]]:
    """(batch size, row) where a row's output (dim 0 of ``fn``'s) differs from its output alone:
    the first, middle and last row of each batch of ``sizes`` rows that ``x`` has."""
    import torch

    differ = []
    for n in (s for s in sizes if s <= len(x)):
        out = fn(x[:n])
        differ += [(n, row) for row in {0, n // 2, n - 1} if not torch.equal(out[row], fn(x[row : row + 1])[0])]
    return differ


def pytest_configure(config: pytest.Config) -> None:
    _SESSION.setdefault("config", config)  # pytester's in-process runs configure later, and are not ours
    config.addinivalue_line(
        "markers",
        "serial: measures time, load, cores or the process table: runs alone, after the parallel run "
        "(the README's test command: pytest -n 2 -m 'not serial', then pytest -m serial)",
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config is _SESSION.get("config"):
        _SESSION["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the suite's process once pytest has reported, with pytest's exit status. Once in four
    clean-clone CI runs the interpreter's own teardown of the native libraries the suite loads
    (Ray, pyarrow, onnxruntime, torch) ended in SIGSEGV after every test had passed (no traceback:
    pytest's faulthandler is off by then). SAMEBITS_TEST_FULL_TEARDOWN=1 keeps the teardown."""
    if config is not _SESSION.get("config") or "status" not in _SESSION:
        return
    if hasattr(config, "workerinput"):  # an xdist worker: its controller ends it after the last report
        return
    if os.environ.get("SAMEBITS_TEST_FULL_TEARDOWN") == "1":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(_SESSION["status"]))  # type: ignore[call-overload]

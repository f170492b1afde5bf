import os
import random
import textwrap

import numpy as np
import pytest
import torch

import samebits
from samebits.determinism import catalog, deterministic, fast, snapshot
from samebits.determinism.precision import FP32_SWITCH
from samebits.tensors import digest

from conftest import run_python


def full_state():
    """Every switch plus every RNG state and the environment, as comparable values."""
    return {
        "switches": snapshot(),
        "python": random.getstate(),
        "numpy": digest(torch.from_numpy(np.random.get_state()[1].copy())),
        "torch": digest(torch.get_rng_state()),
        "env": dict(os.environ),
    }


def test_everything_is_restored_on_exit():
    before = full_state()
    with deterministic(5, threads=1, sdpa_math=True) as record:
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.get_float32_matmul_precision() == "highest"
        assert torch.get_num_threads() == 1
        assert not torch.backends.cuda.flash_sdp_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert record.seed == 5
    assert full_state() == before


def test_everything_is_restored_when_the_body_raises():
    before = full_state()
    with pytest.raises(RuntimeError, match="boom"):
        with deterministic(1, threads=1):
            torch.rand(3)
            raise RuntimeError("boom")
    assert full_state() == before


def test_rngs_are_seeded_inside_and_left_untouched_outside():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    with deterministic(7):
        inside = (torch.rand(1), np.random.rand(), random.random())
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    assert torch.equal(inside[0], torch.rand(1)) and inside[1] == np.random.rand() and inside[2] == random.random()
    torch.manual_seed(123)
    with deterministic(7):
        pass
    assert torch.equal(torch.rand(1), expected_next)


def test_works_as_a_decorator_and_reenters():
    @deterministic(3)
    def draw():
        return torch.rand(2)

    assert torch.equal(draw(), draw())
    assert not torch.are_deterministic_algorithms_enabled()


def test_nested_profiles_restore_in_order():
    before = snapshot()
    with deterministic(0):
        inner_before = snapshot()
        with fast():
            assert not torch.are_deterministic_algorithms_enabled()
            assert torch.backends.cudnn.benchmark
        assert snapshot() == inner_before
    assert snapshot() == before


def test_record_lists_every_switch_with_old_and_new_value():
    with deterministic(0, warn_only=True) as record:
        change = record["torch.use_deterministic_algorithms (enabled, warn_only)"]
        assert (change.old, change.new, change.changed) == ((False, False), (True, True), True)
        precision = record[FP32_SWITCH].new
        assert precision.matmul_precision == "highest" and dict(precision.precision)["mkldnn.matmul"] == "ieee"
        assert any(name.startswith("RNG states") for name in record.names())
        assert record.to_dict()["switches"][0]["name"] == change.name
    assert change.restored is True


@pytest.mark.skipif(torch.backends.cudnn.is_available(), reason="needs a torch build without cuDNN")
def test_switches_without_effect_here_say_why():
    with deterministic(0) as record:
        cudnn = record["torch.backends.cudnn.deterministic"]
    assert not cudnn.effective and "no cuDNN" in cudnn.note
    assert cudnn in record.ineffective()


def test_hash_seed_is_reported_never_set():
    code = textwrap.dedent(
        """
        import os, samebits
        with samebits.deterministic(0) as r:
            e = r["PYTHONHASHSEED"]
            print(e.effective, e.changed, os.environ.get("PYTHONHASHSEED"), "samebits run" in e.note)
        """
    )
    randomised = run_python(code)
    assert randomised.stdout.split() == ["False", "False", "None", "True"], randomised.stderr
    from conftest import scrubbed_env

    fixed = run_python(code, env=scrubbed_env(PYTHONHASHSEED="0"))
    assert fixed.stdout.split() == ["True", "False", "0", "False"], fixed.stderr


def test_seed_and_threads_are_validated():
    with pytest.raises(ValueError, match=r"\[0, 4294967295\]"):
        deterministic(-1)
    with pytest.raises(TypeError):
        deterministic(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads"):
        deterministic(0, threads=0)


def test_cublas_workspace_is_left_alone_without_cuda(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with deterministic(0) as record:
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert "CUBLAS_WORKSPACE_CONFIG" not in record.names()


def test_cublas_workspace_is_set_before_cuda_starts_and_restored(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(catalog, "torch_checks_cublas_workspace", lambda: True)
    monkeypatch.setattr(catalog, "cuda_initialized", lambda: False)
    with deterministic(0) as record:
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert record["CUBLAS_WORKSPACE_CONFIG"].restored is True


def test_cublas_workspace_is_one_way_once_cuda_started(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(catalog, "torch_checks_cublas_workspace", lambda: True)
    started = {"cuda": False}
    monkeypatch.setattr(catalog, "cuda_initialized", lambda: started["cuda"])
    try:
        with deterministic(0) as record:
            started["cuda"] = True  # the body initialises CUDA: cuBLAS reads the variable
        change = record["CUBLAS_WORKSPACE_CONFIG"]
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        assert change.one_way and change.restored is False and "one-way" in change.note
    finally:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)  # one-way by design: monkeypatch did not own it


def test_cublas_workspace_is_set_even_when_cuda_started_before(monkeypatch):
    # deterministic(device="cuda") captures the CUDA RNG states first, which initialises CUDA;
    # torch reads the variable at each cuBLAS call, not at CUDA init: it must still be set (B1)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.1")
    monkeypatch.setattr(catalog, "torch_checks_cublas_workspace", lambda: True)
    monkeypatch.setattr(catalog, "cuda_initialized", lambda: True)
    try:
        with deterministic(0) as record:
            assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        change = record["CUBLAS_WORKSPACE_CONFIG"]
        assert change.changed and change.one_way and "a cuBLAS call made before" in change.note
        assert "has read it already" not in change.note
    finally:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)  # one-way while CUDA runs


def test_cublas_workspace_not_needed_where_torch_no_longer_checks(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(catalog, "torch_checks_cublas_workspace", lambda: False)
    monkeypatch.setattr(catalog, "cuda_initialized", lambda: False)
    with deterministic(0) as record:
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    assert "not needed" in record["CUBLAS_WORKSPACE_CONFIG"].note


# Each user state of the TF32 flags, set in a fresh process before entering deterministic():
# the legacy API, the new API, both mixed, and a bf16 oneDNN precision.
TF32_STATES = {
    "defaults": "pass",
    "legacy": "B.cuda.matmul.allow_tf32 = True; B.cudnn.allow_tf32 = False",
    "new": "B.cuda.matmul.fp32_precision = 'tf32'; B.cudnn.conv.fp32_precision = 'ieee'",
    "mixed": "B.cuda.matmul.allow_tf32 = True; B.cuda.matmul.fp32_precision = 'ieee'",
    "matmul-medium": "torch.set_float32_matmul_precision('medium')",
    "generic": "B.fp32_precision = 'tf32'",
}


@pytest.mark.parametrize("state", list(TF32_STATES))
def test_tf32_flags_restore_exactly_from_every_api_family(state):
    code = textwrap.dedent(
        f"""
        import torch
        from samebits.determinism import deterministic, fast, snapshot
        B = torch.backends
        {TF32_STATES[state]}
        before = snapshot()
        with deterministic(0) as record:
            inside = snapshot()
        with fast():
            pass
        after = snapshot()
        assert after == before, {{k: (before[k], after.get(k)) for k in before if before[k] != after.get(k)}}
        assert inside["torch.get_float32_matmul_precision"] == "highest", inside
        assert inside["torch.backends.cuda.matmul.allow_tf32"] is False and inside["torch.backends.cudnn.allow_tf32"] is False, inside
        leaves = ("cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv", "mkldnn.rnn")
        assert all(inside[f"torch.backends.{{leaf}}.fp32_precision"] == "ieee" for leaf in leaves), inside
        print("ok")
        """
    )
    result = run_python(code)
    assert result.stdout.strip() == "ok", result.stderr


def test_fast_allows_tf32_and_autotuning_and_restores():
    before = snapshot()
    with fast() as record:
        assert torch.backends.cudnn.benchmark
        assert torch.get_float32_matmul_precision() == "high"
        assert record.seed is None
    assert snapshot() == before


def test_public_api_is_reexported_lazily():
    assert samebits.deterministic is deterministic
    with pytest.raises(AttributeError):
        samebits.no_such_thing  # noqa: B018


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; this machine has none")
def test_cuda_rng_states_are_seeded_and_restored():
    before = torch.cuda.get_rng_state_all()
    with deterministic(3, device="cuda") as record:
        inside = torch.rand(4, device="cuda")
        assert "cuda" in next(n for n in record.names() if n.startswith("RNG states"))
    with deterministic(3, device="cuda"):
        assert torch.equal(inside, torch.rand(4, device="cuda"))
    assert all(torch.equal(a, b) for a, b in zip(before, torch.cuda.get_rng_state_all()))


INDUCTOR_FOLLOWS = """
import sys, torch, samebits
loaded = lambda: "torch._inductor.config" in sys.modules
{before}
with samebits.deterministic(0):
    print("inside", loaded(), torch.are_deterministic_algorithms_enabled())
    {inside}
{after}
import torch._inductor.config as config
print("config", config.deterministic, torch.are_deterministic_algorithms_enabled())
"""


@pytest.mark.parametrize(
    "before, inside, after, expected",
    [
        (
            "",
            "import torch._inductor.config as c; print('config', c.deterministic)",
            "",
            ["inside False True", "config True", "config False False"],
        ),
        ("", "pass", "", ["inside False True", "config False False"]),
        (
            "import torch._inductor.config",
            "print('config', torch._inductor.config.deterministic)",
            "",
            ["inside True True", "config True", "config False False"],
        ),
        ("", "pass", "torch.use_deterministic_algorithms(True)", ["inside False True", "config True True"]),
    ],
    ids=["imported-inside", "imported-after", "imported-before", "user-call-after"],
)
def test_the_profile_sets_inductors_flag_as_torch_does_without_loading_inductor(before, inside, after, expected):
    """Entering the profile no longer imports Inductor (0.85 s); its config.deterministic follows
    torch's flag whenever Inductor is loaded (before, inside, after the profile, or by the user's
    own call), even with TORCHINDUCTOR_DETERMINISTIC=1 saying otherwise at its import."""
    from conftest import scrubbed_env

    code = INDUCTOR_FOLLOWS.format(before=before, inside=inside, after=after)
    done = run_python(code, env={**scrubbed_env(), "TORCHINDUCTOR_DETERMINISTIC": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:-1] == expected


def test_the_inductor_hook_leaves_other_finders_and_loaders_working():
    """A finder of the user's that asks every other finder (as samebits' does) neither loops nor
    is skipped, and the wrapped loader copies and pickles as the real one does."""
    code = """
import copy, importlib.abc, pickle, sys, torch, samebits
class Asks(importlib.abc.MetaPathFinder):  # asks every other finder, then tags what it found
    def find_spec(self, name, path, target=None):
        if name != "torch._inductor.config" or getattr(self, "busy", False):
            return None
        self.busy = True
        try:
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        spec.tagged = True
                        return spec
        finally:
            self.busy = False
sys.meta_path.insert(0, Asks())
with samebits.deterministic(0):
    import torch._inductor.config as config
    print(config.deterministic, getattr(config.__spec__, "tagged", False))
loader = config.__loader__
print(type(copy.copy(loader)).__name__, type(pickle.loads(pickle.dumps(loader))).__name__)
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:-1] == ["True True", "_Following _Following"]

"""The deterministic profile's fill of uninitialized memory, kept only for forwards that ask for
such memory (determinism/fill.py): a probe at setup, a per-forward switch safe across threads."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import samebits
from samebits.determinism.fill import asks_for_uninitialized, filling


def flag() -> bool:
    return bool(torch.utils.deterministic.fill_uninitialized_memory)


class Clean(nn.Module):
    """Records the flag as its forward saw it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.seen: list[bool] = []

    def forward(self, x):
        self.seen.append(flag())
        return torch.relu(self.lin(x)).cumsum(1)


class ReadsGarbage(nn.Module):
    """Writes two of four columns of a ``torch.empty`` buffer and sums all four."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def forward(self, x):
        self.seen.append(flag())
        out = torch.empty(x.shape[0], 4)
        out[:, :2] = x[:, :2]
        return out.sum(1, keepdim=True)


@pytest.mark.parametrize(
    ("forward", "asked"),
    [
        (lambda x: torch.relu(x @ x.T).softmax(-1), None),
        (lambda x: nn.functional.conv1d(x[None], torch.ones(2, 4, 3)), None),
        (lambda x: torch.empty(3, 4) + x[:3], "aten.empty"),
        (lambda x: x.new_empty(2, 4), "aten.new_empty"),
        (lambda x: torch.empty_like(x), "aten.empty_like"),
        (lambda x: x.clone().resize_(10, 4), "aten.resize_"),
        (lambda x: torch.empty_strided((2, 2), (1, 2)), "aten.empty_strided"),
    ],
)
def test_the_probe_names_the_first_request_for_uninitialized_memory(forward, asked):
    x = torch.randn(4, 4)
    with torch.inference_mode():
        assert asks_for_uninitialized(lambda: forward(x)) == asked


def test_a_forward_the_probe_cannot_follow_keeps_the_fill():
    def boom():
        raise RuntimeError("no")

    assert asks_for_uninitialized(boom) == "a forward the probe could not follow (RuntimeError)"


def test_a_clean_model_runs_without_the_fill_a_garbage_reader_with_it(tmp_path):
    clean, garbage = Clean(), ReadsGarbage()
    x = torch.randn(8, 4)
    with samebits.Predictor(clean, example_inputs=x, cache_dir=tmp_path) as p:
        assert flag()  # the profile's value outside the forwards
        clean.seen.clear()
        p.predict(x)
        with p.running():
            p.predict(x)
            p.predict(x[:3])
        assert clean.seen and not any(clean.seen)
        assert flag()
    with samebits.Predictor(garbage, example_inputs=x, cache_dir=tmp_path) as p:
        garbage.seen.clear()
        first = p.predict(x)
        assert garbage.seen and all(garbage.seen)
        # the unwritten columns are the fill's NaN on every run, never whatever memory held
        assert torch.isnan(first).all()


def test_the_flag_is_off_only_while_no_forward_that_needs_it_runs():
    base = flag()
    skipper_in, needer_in, skipper_out, needer_out = (threading.Event() for _ in range(4))
    seen: dict[str, bool] = {}

    def skipper() -> None:
        with filling(False):
            seen["skipper alone"] = flag()
            skipper_in.set()
            needer_in.wait(5)
        skipper_out.set()

    def needer() -> None:
        skipper_in.wait(5)
        with filling(True):
            seen["needer beside a skipper"] = flag()
            needer_in.set()
            skipper_out.wait(5)
            seen["needer after the skipper left"] = flag()
        needer_out.set()

    threads = [threading.Thread(target=skipper), threading.Thread(target=needer)]
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert seen == {"skipper alone": False, "needer beside a skipper": True, "needer after the skipper left": True}
        assert flag() is True  # put back once both left
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = base


def test_the_profile_sets_and_restores_the_base_value_never_a_skipping_forwards_off():
    from samebits.determinism.fill import base_value

    before = flag()
    torch.utils.deterministic.fill_uninitialized_memory = False  # torch's default is True: start elsewhere
    try:
        with filling(False):  # a forward without the fill is running when the profile starts
            with samebits.deterministic(0):
                assert base_value() is True and flag() is False  # the skipper still runs without it
                with filling(True):
                    assert flag() is True  # a forward that needs it gets it, skipper or not
                assert flag() is False
            assert base_value() is False  # the profile put back what was there, not the transient off
        assert flag() is False
        with samebits.deterministic(0):  # and the profile, entered and left around a skipper, restores False
            with filling(False):
                assert flag() is False
            assert flag() is True
        assert flag() is False
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = before


def test_an_op_outside_torch_may_allocate_where_the_probe_cannot_see(tmp_path):
    @torch.library.custom_op("samebits_test::half_written", mutates_args=())
    def half_written(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape[0], 2 * x.shape[1])
        out[:, : x.shape[1]] = x
        return out

    @half_written.register_fake
    def _(x):
        return x.new_empty(x.shape[0], 2 * x.shape[1])

    class Extension(nn.Module):
        def forward(self, x):
            return half_written(x)

    x = torch.ones(4, 3)
    with torch.inference_mode():
        assert asks_for_uninitialized(lambda: Extension()(x)) == (
            "samebits_test.half_written (an op outside torch's own)"
        )
    with samebits.Predictor(Extension(), example_inputs=x, cache_dir=tmp_path) as p:
        assert torch.isnan(p.predict(x)[:, 3:]).all()  # the fill kept: what it leaves unwritten is NaN


def test_the_probe_runs_without_loading_dynamo_and_still_sees_an_empty():
    """In a fresh interpreter a Predictor's setup (the probe, the profile) loads neither Dynamo nor
    Inductor (0.85 s); the probe still finds a forward that reads torch.empty."""
    from conftest import run_python

    code = """
import sys, torch, samebits
from samebits.determinism.fill import asks_for_uninitialized
class Reads(torch.nn.Module):
    def forward(self, x):
        return x + torch.empty(x.shape)
x = torch.ones(2, 3)
print(asks_for_uninitialized(lambda: Reads()(x)))
with samebits.Predictor(torch.nn.Linear(3, 2), example_inputs=x) as p:
    p.predict(x)
print("torch._dynamo" in sys.modules, "torch._inductor" in sys.modules)
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:-1] == ["aten.empty", "False False"]

"""The contract, class 'leaks': no switch, child process or temp folder outlives samebits."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import samebits
from samebits.runtime.cache import MARKER, ArtifactCache

from conftest import scrubbed_env
from contract import m


@pytest.fixture(autouse=True)
def _no_predictor_left_by_earlier_tests():
    """A Predictor another test left unclosed holds the shared profile until it is collected."""
    gc.collect()
    assert not torch.are_deterministic_algorithms_enabled()


def test_an_unclosed_predictor_restores_every_switch_when_collected(tmp_path):
    p = samebits.Predictor(torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), cache_dir=tmp_path / "c")
    assert torch.are_deterministic_algorithms_enabled()
    del p
    gc.collect()
    assert not torch.are_deterministic_algorithms_enabled()


def test_predictors_closed_out_of_order_restore_the_users_switches(tmp_path):
    model, x = torch.nn.Linear(4, 2), torch.randn(4, 4)
    a = samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path / "c")
    b = samebits.Predictor(model, example_inputs=x, cache_dir=tmp_path / "c")
    a.close()
    assert torch.are_deterministic_algorithms_enabled()  # b still needs it
    b.close()
    assert not torch.are_deterministic_algorithms_enabled()


def test_an_in_process_check_leaves_the_environment_as_it_was():
    before = dict(os.environ)
    samebits.check("demo:mlp", axes=("batch", "repeat"))
    assert dict(os.environ) == before


def _children_of(pid: int | None) -> list[int]:
    """samebits' child processes (of ``pid``, or of anyone with ``None``)."""
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines()[1:]]
    return [int(r[0]) for r in rows if len(r) == 3 and "samebits.child" in r[2] and (pid is None or int(r[1]) == pid)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])  # SIGHUP: the terminal closed
@pytest.mark.serial  # reads every process on the machine
def test_a_signal_to_samebits_alone_ends_its_children_and_temp_folder(tmp_path, sig):
    env = scrubbed_env(TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "samebits", "check", m("slow"), "--axes", "process"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _children_of(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    children = _children_of(proc.pid)
    assert children, "the process axis never started its children"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    time.sleep(0.5)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}[sig]
    assert not set(children) & set(_children_of(None)), "children outlived samebits"
    assert not list(tmp_path.glob("samebits-*")), "the temp folder was left behind"
    assert "Traceback" not in err
    said = {signal.SIGINT: "interrupted", signal.SIGTERM: "stopped by SIGTERM", signal.SIGHUP: "stopped by SIGHUP"}
    assert err.rstrip().splitlines()[-1] == f"samebits: {said[sig]}", "the last line must say why the work stopped"


def test_a_signal_that_lands_in_a_finaliser_still_stops_the_command(tmp_path):
    # Python drops exceptions raised inside __del__; the signal is delivered again after it.
    proc = subprocess.run(
        [sys.executable, "-m", "samebits", "check", m("signal_in_finaliser"), "--axes", "repeat", "--runs", "50"],
        env=scrubbed_env(TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 143, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert not list(tmp_path.glob("samebits-*"))


def test_an_onnxruntime_build_leaves_only_its_entries(tmp_path):
    pytest.importorskip("onnxruntime")
    cache = tmp_path / "cache"
    with samebits.Predictor(
        torch.nn.Linear(4, 2), example_inputs=torch.randn(4, 4), backend="onnxruntime", cache_dir=cache, tile=4
    ):
        pass
    listed = set(ArtifactCache(cache).manifest())
    stray = [
        p.name
        for p in cache.iterdir()
        if p.name not in listed and not p.name.endswith(".lock") and p.name not in (MARKER, "manifest.json")
    ]
    assert stray == [] and any(n.endswith(".ort.onnx") for n in listed)


def test_a_thread_the_factory_started_does_not_keep_samebits_alive_after_its_report(tmp_path):
    """A non-daemon thread of the model's (a metrics reporter) kept `check` running forever after
    it printed its report; the command ends with its own exit code and cleans up."""
    proc = subprocess.run(
        [sys.executable, "-m", "samebits", "check", m("starts_a_thread"), "--axes", "repeat,process"],
        env=scrubbed_env(TMPDIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "Same input, same bits" in proc.stdout, proc.stderr
    assert not list(tmp_path.glob("samebits-*"))


def test_a_predictor_left_unclosed_gives_the_model_back_when_dropped_not_at_a_later_collection(tmp_path):
    """``Predictor(model).map(xs)`` without close, then ``with Predictor(model, ...)``: the first
    one sat in a reference cycle, holding the model in eval with grad off after the block until a
    garbage collection ran; dropped, it gives the model back at once."""
    import gc
    import warnings

    import torch

    import samebits

    model = torch.nn.Linear(4, 3).train()
    xs = [torch.randn(4) for _ in range(5)]
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            list(samebits.Predictor(model, cache_dir=tmp_path / "a").map(xs))
        with samebits.Predictor(model, example_inputs=torch.randn(4, 4), cache_dir=tmp_path / "b") as p:
            assert not model.training and p.predict(torch.randn(2, 4)).shape == (2, 3)
        assert model.training and model.weight.requires_grad
    finally:
        gc.enable()

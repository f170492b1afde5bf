"""Every capability gives the caller's model back as it was: training flags, requires_grad,
device, dtype and the parameters' bits (a training loop that reuses the model must not break)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import samebits


class Small(nn.Module):
    """A small CNN with BatchNorm and Dropout, as a user brings it: in training mode, with grad."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(4 * 8 * 8, 5)

    def forward(self, x):
        return self.head(self.drop(torch.relu(self.norm(self.conv(x)))).flatten(1))


def _x() -> torch.Tensor:
    return torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(1))


def state(model: nn.Module) -> dict:
    return {
        "training": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "where": [(t.device, t.dtype) for t in model.state_dict().values()],
        "bits": [t.detach().clone() for t in model.state_dict().values()],
    }


def assert_same(before: dict, after: dict) -> None:
    assert after["training"] == before["training"]
    assert after["requires_grad"] == before["requires_grad"]
    assert after["where"] == before["where"]
    assert all(torch.equal(a, b) for a, b in zip(before["bits"], after["bits"]))


@pytest.fixture
def model():
    return Small().train()


def _predictor(model, tmp_path, **kw):
    with samebits.Predictor(model, example_inputs=_x(), cache_dir=tmp_path, max_batch_size=4, **kw) as p:
        p.predict(_x())
    return p


def _golden_fixture(model, tmp_path):
    from types import SimpleNamespace

    from samebits.pytest_plugin import GoldenFixture

    node = SimpleNamespace(path=tmp_path / "test_model.py", name="test_model")
    updating = GoldenFixture(SimpleNamespace(node=node, config=SimpleNamespace(getoption=lambda name: True)))
    updating.check(model, _x())  # pytest --samebits-update: writes the golden
    GoldenFixture(SimpleNamespace(node=node, config=SimpleNamespace(getoption=lambda name: False))).check(model, _x())


def _served(model, tmp_path):
    pytest.importorskip("fastapi", reason="samebits serve needs its extra")
    from fastapi.testclient import TestClient

    from samebits.serve.options import ServeOptions
    from samebits.serve.server import build

    app, predictor, _ = build(model, _x(), ServeOptions(max_batch_size=4))
    try:
        with TestClient(app) as client:
            rows = _x()[:2].tolist()
            body = {"inputs": [{"name": "x", "shape": [2, 3, 8, 8], "datatype": "FP32", "data": rows}]}
            assert client.post(f"/v2/models/{app.state.model_name}/infer", json=body).status_code == 200
    finally:
        predictor.close()


CAPABILITIES = {
    "check": lambda m, tmp: samebits.check(m, _x(), axes=("repeat", "state", "batch", "layout"), batch_sizes=(1, 2)),
    "check with a dtype": lambda m, tmp: samebits.check(m, _x(), axes=("repeat",), dtype="float64"),
    "doctor": lambda m, tmp: samebits.doctor(m, _x(), backends=(), iterations=2, budget=0.2),
    "bench": lambda m, tmp: samebits.bench(
        m, _x(), batch_sizes=(1, 2), backends=("eager",), rounds=1, budget=0.1, memory=False, cache_dir=str(tmp)
    ),
    "record and verify": lambda m, tmp: samebits.verify(samebits.record(m, tmp / "g.safetensors", _x()), m),
    "Predictor": _predictor,
    "Predictor with a dtype": lambda m, tmp: _predictor(m, tmp, dtype="float64"),
    "the pytest plugin": _golden_fixture,
    "serve's Python API": _served,
}


@pytest.mark.parametrize("capability", list(CAPABILITIES))
def test_the_model_comes_back_as_it_was(capability, model, tmp_path):
    before = state(model)
    CAPABILITIES[capability](model, tmp_path)
    assert_same(before, state(model))


def test_a_closed_predictor_still_runs_in_eval_mode_and_a_moved_one_says_so(model, tmp_path):
    p = _predictor(model, tmp_path)
    assert model.training  # given back
    with torch.inference_mode():
        expected = model.eval()(_x())
    model.train()
    assert torch.equal(p.predict(_x()), expected)  # eval for its forward, whatever the caller set since
    assert model.training
    cast = _predictor(model, tmp_path, dtype="float64")
    with pytest.raises(samebits.UserError, match="was closed and gave its model back"):
        cast.predict(_x())


def test_what_the_caller_changes_while_a_predictor_lives_is_kept(model, tmp_path):
    p = samebits.Predictor(model, example_inputs=_x(), cache_dir=tmp_path, max_batch_size=4)
    with torch.no_grad():
        model.head.weight.add_(1.0)  # an optimizer step, in place
    model.train()
    model(_x())  # a training forward: BatchNorm's running statistics move
    updated = state(model)
    p.close()
    after = state(model)
    assert all(torch.equal(a, b) for a, b in zip(updated["bits"], after["bits"]))
    assert after["training"] == updated["training"] and all(after["requires_grad"])

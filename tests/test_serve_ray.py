"""The Ray Serve deployment (samebits.serve.ray) on a local Ray: two replicas give every answer
the bits of the sample run alone, a replica whose fingerprint differs refuses to start, and
replicas under a portable level answer with its bits."""

from __future__ import annotations

import concurrent.futures
import json
import socket
import sys
import urllib.request
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray", reason="the Ray integration needs its extra: pip install 'samebits[ray]'")
serve = pytest.importorskip("ray.serve", reason="the Ray integration needs ray[serve]")

from samebits.runtime.predictor import Predictor  # noqa: E402
from samebits.serve.options import ServeOptions  # noqa: E402
from samebits.serve.ray import _registry, deployment  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import serve_models  # noqa: E402

SPEC = f"{HERE / 'serve_models.py'}:mlp"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="samebits-tests")
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()
    ray.shutdown()


def infer(url: str, x: torch.Tensor) -> torch.Tensor:
    body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.reshape(-1).tolist()}]}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        out = json.loads(r.read())["outputs"][0]
    return torch.tensor(out["data"], dtype=torch.float32).reshape(out["shape"])


def test_two_replicas_answer_with_the_bits_of_the_sample_alone(local_ray):
    app = deployment(SPEC, num_replicas=2, options=ServeOptions(max_batch_size=16), name="mlp2")
    serve.run(app.bind(), name="mlp2", route_prefix="/two")
    model, example = serve_models.mlp()
    gen = torch.Generator().manual_seed(4)
    rows = [torch.randn(1 + i % 2, 32, generator=gen) for i in range(40)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda x: infer(f"{local_ray}/two/v2/models/mlp/infer", x), rows, timeout=300))
    with Predictor(model, example_inputs=example, max_batch_size=16) as reference:
        for x, got in zip(rows, answers):
            assert all(torch.equal(got[i], reference.predict_one(x[i])) for i in range(x.shape[0]))
    serve.delete("mlp2")


def test_a_replica_with_another_fingerprint_refuses_to_start(local_ray):
    registry = (
        _registry()
        .options(name="samebits-fingerprint-odd", namespace="samebits", lifetime="detached", get_if_exists=True)
        .remote()
    )
    assert ray.get(registry.claim.remote("another-machine")) == "another-machine"
    with pytest.raises(RuntimeError, match="Deploying application odd failed"):
        serve.run(deployment(SPEC, name="odd").bind(), name="odd", route_prefix="/odd")
    message = serve.status().applications["odd"].deployments["odd"].message
    assert "fingerprint" in message and "differs from the first replica" in message
    serve.delete("odd")
    ray.kill(registry)


def test_replicas_under_a_portable_level_answer_with_the_levels_bits(local_ray, tmp_path):
    from samebits.determinism.portable import read_cpuinfo
    from test_portable_profile import predictions_under

    if not {"avx2", "fma"} <= read_cpuinfo()[1]:
        pytest.skip("this CPU cannot run x86-64-v3")
    rows = torch.randn(5, 32, generator=torch.Generator().manual_seed(3))
    want = predictions_under("x86-64-v3", rows, tmp_path)
    app = deployment(SPEC, options=ServeOptions(max_batch_size=8), name="pinned", portable="x86-64-v3")
    serve.run(app.bind(), name="pinned", route_prefix="/pinned")
    got = infer(f"{local_ray}/pinned/v2/models/mlp/infer", rows)
    assert torch.equal(got, want)  # the replica started under the level (Ray's runtime_env)
    serve.delete("pinned")


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (ServeOptions(grpc_port=0), "grpc_port"),
        (ServeOptions(isolate=True), "isolate"),
        (ServeOptions(golden="g.json"), "golden"),
    ],
)
def test_options_a_replica_does_not_serve_are_refused_not_ignored(options, says):
    from samebits.errors import UserError

    with pytest.raises(UserError, match=f"does not serve {says}"):
        deployment(SPEC, options=options)


def test_a_model_whose_rows_are_coupled_answers_each_request_as_its_own_batch_through_ray(local_ray):
    """The replicas serve through the one model service: a model whose output is [B, B] (each row
    against the whole batch) never has concurrent requests joined (the replicas' batcher joined
    them before it was built from the plan's facts)."""
    import check_models

    spec = f"{HERE / 'check_models.py'}:self_similarity"
    serve.run(
        deployment(spec, options=ServeOptions(max_batch_size=8), name="coupled").bind(),
        name="coupled",
        route_prefix="/coupled",
    )
    model, _ = check_models.self_similarity()
    xs = [torch.randn(2, 16, generator=torch.Generator().manual_seed(i)) for i in range(6)]
    try:
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            url = f"{local_ray}/coupled/v2/models/self_similarity/infer"
            answers = list(pool.map(lambda x: infer(url, x), xs, timeout=300))
        for x, got in zip(xs, answers):
            assert got.shape == (2, 2) and torch.equal(got, model(x).detach())
    finally:
        serve.delete("coupled")

"""Ray Data (samebits.offline.ray_data) on a local Ray: block sizes 7 and 64 and 1 or 2 actors
give every row the bits that `samebits predict` gives the same samples on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

ray = pytest.importorskip("ray", reason="Ray Data needs its extra: pip install 'samebits[ray]'")
pytest.importorskip("ray.data", reason="Ray Data needs ray[data] (pandas, pyarrow)")

from samebits.errors import UserError  # noqa: E402
from samebits.offline import predict  # noqa: E402
from samebits.offline.ray_data import predict_dataset  # noqa: E402
from samebits.offline.shard import sample_digests  # noqa: E402

HERE = Path(__file__).resolve().parent
SPEC = "demo:mlp"  # batch-variant on this CPU: plain batching would give other bits
N = 197  # blocks of 7 leave a block of 1 row: where plain batching parts (demo:mlp at 1 row)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="samebits-predict-tests")
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def samples():
    return torch.randn(N, 256, generator=torch.Generator().manual_seed(5))


def by_id(rows: dict) -> list[str]:
    """Per-sample digests in id order, the way `samebits predict` writes them."""
    order = np.argsort(rows["id"])
    assert list(rows["id"][order]) == list(range(N))
    return sample_digests({"output": torch.from_numpy(np.ascontiguousarray(rows["output"][order]))}, N)


def test_block_sizes_and_actors_give_the_local_bits(local_ray, samples, tmp_path):
    np.save(tmp_path / "x.npy", samples.numpy())
    predict(SPEC, [str(tmp_path / "x.npy")], tmp_path / "local", shard_size=N)
    manifest = json.loads((tmp_path / "local" / "manifest.json").read_text())
    local = manifest["shards"][0]["sample_xxh3_128"]
    ds = ray.data.from_items([{"id": i, "x": row.numpy()} for i, row in enumerate(samples)])
    for block in (7, 64):
        for actors in (1, 2):
            scored = predict_dataset(
                ds.repartition(target_num_rows_per_block=block), SPEC, actors=actors, batch_size=block * 2 - 1
            )
            rows = scored.take_batch(N + 1, batch_format="numpy")
            assert by_id(rows) == local, f"block {block}, {actors} actor(s)"


def test_a_dataset_without_its_id_or_inputs_is_one_line(local_ray, samples):
    ds = ray.data.from_items([{"x": row.numpy()} for row in samples[:4]])
    with pytest.raises(UserError, match="no id column 'id'"):
        predict_dataset(ds, SPEC)
    ds = ray.data.from_items([{"id": i, "a": 1.0, "b": 2.0} for i in range(4)])
    with pytest.raises(UserError, match=r"no column of the dataset is named after an input.*\(x\)"):
        predict_dataset(ds, SPEC)


def test_predict_with_the_ray_engine_writes_the_local_bytes(local_ray, samples, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    np.save(folder / "a.npy", samples[:120].numpy())
    np.save(folder / "b.npy", samples[120:].numpy())
    predict(SPEC, [str(folder)], tmp_path / "local", shard_size=50)
    report = predict(SPEC, [str(folder)], tmp_path / "ray", shard_size=50, workers=2, engine="ray")
    assert report.computed == 4
    shards = lambda out: {p.name: p.read_bytes() for p in sorted(out.glob("shard-*"))}  # noqa: E731
    assert shards(tmp_path / "ray") == shards(tmp_path / "local")
    manifest = lambda out: json.loads((out / "manifest.json").read_text())["shards"]  # noqa: E731
    assert manifest(tmp_path / "ray") == manifest(tmp_path / "local")


def test_a_forward_that_raises_in_an_actor_is_the_models_error(local_ray, tmp_path):
    data = torch.randn(40, 16, generator=torch.Generator().manual_seed(1))
    data[33, 4] = 1000.0
    np.save(tmp_path / "x.npy", data.numpy())
    spec = f"{HERE / 'predict_models.py'}:raises_on_large"
    with pytest.raises(UserError, match=r"the model's forward raised .*ValueError: a value over 50"):
        predict(spec, [str(tmp_path / "x.npy")], tmp_path / "ray", shard_size=10, workers=2, engine="ray")
    ds = ray.data.from_items([{"id": i, "x": row.numpy()} for i, row in enumerate(data)])
    with pytest.raises(Exception, match=r"the model's forward raised .*ValueError: a value over 50") as caught:
        predict_dataset(ds, spec, batch_size=8).take_all()
    assert "internal error" not in str(caught.value)


def test_the_ray_engine_under_a_portable_level_writes_the_levels_bytes(samples, tmp_path):
    """`predict --portable` started itself under the level; its Ray actors start under it too
    (Ray's runtime_env) and refuse to run otherwise: the shards equal the local run's."""
    from conftest import run_cli

    from samebits.determinism.portable import read_cpuinfo

    if not {"avx2", "fma"} <= read_cpuinfo()[1]:
        pytest.skip("this CPU cannot run x86-64-v3")
    np.save(tmp_path / "a.npy", samples[:60].numpy())
    level = ("--portable", "x86-64-v3", "--shard-size", "25")
    local = run_cli("predict", SPEC, str(tmp_path / "a.npy"), "-o", str(tmp_path / "local"), *level, timeout=300)
    assert local.returncode == 0, local.stderr
    on_ray = run_cli(
        "predict", SPEC, str(tmp_path / "a.npy"), "-o", str(tmp_path / "ray"), *level, "--engine", "ray",
        "--workers", "2", timeout=600,
    )  # fmt: skip
    assert on_ray.returncode == 0, on_ray.stderr
    shards = lambda out: {p.name: p.read_bytes() for p in sorted(out.glob("shard-*"))}  # noqa: E731
    assert shards(tmp_path / "ray") == shards(tmp_path / "local") and len(shards(tmp_path / "local")) == 3
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["fingerprint"]["cpu"]["portable"] == "x86-64-v3"

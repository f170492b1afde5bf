"""`samebits predict` on Parquet files and images: the same samples give the same per-sample bits
as from tensor files, columns map by name, preprocessing is the documented one, and bad rows or
images are one line naming the file and row (or, with --skip-bad, listed and left out)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from samebits.errors import UserError
from samebits.offline import predict

from conftest import run_cli

pa = pytest.importorskip("pyarrow", reason="the Parquet source needs pyarrow (extra 'data')")
pq = pytest.importorskip("pyarrow.parquet")
Image = pytest.importorskip("PIL.Image", reason="the image source needs Pillow (extra 'images')")

HERE = Path(__file__).resolve().parent
MLP = f"{HERE / 'predict_models.py'}:mlp"
CONV = f"{HERE / 'predict_models.py'}:conv"


def digests(out: Path) -> list[str]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [d for shard in manifest["shards"] for d in shard["sample_xxh3_128"]]


@pytest.fixture(scope="module")
def samples():
    return torch.randn(300, 16, generator=torch.Generator().manual_seed(3))


def write_parquet(path: Path, x: torch.Tensor, *, fixed: bool = False, row_group: int = 64, **extra) -> None:
    values = [row.tolist() for row in x]
    column = pa.array(values, type=pa.list_(pa.float64(), 16) if fixed else pa.list_(pa.float64()))
    table = pa.table({"id": pa.array(range(len(values))), "x": column, **extra})
    pq.write_table(table, path, row_group_size=row_group)


def test_parquet_rows_give_the_bits_of_the_same_samples_from_npy(samples, tmp_path):
    np.save(tmp_path / "x.npy", samples.numpy())
    predict(MLP, [str(tmp_path / "x.npy")], tmp_path / "from-npy", shard_size=100)
    folder = tmp_path / "pq"
    folder.mkdir()
    write_parquet(folder / "a.parquet", samples[:130], row_group=50)  # float64 lists: read as float32
    write_parquet(folder / "b.parquet", samples[130:], fixed=True, row_group=64)
    out = tmp_path / "from-parquet"
    report = predict(MLP, [str(folder)], out, shard_size=100, batch_size=7)
    assert report.samples == 300
    assert digests(out) == digests(tmp_path / "from-npy")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["preprocessing"]["columns"] == {"positional": [], "keywords": {"x": "x"}}  # "id" left alone


def test_parquet_bad_columns_and_rows_are_one_line(samples, tmp_path):
    path = tmp_path / "noinput.parquet"
    pq.write_table(pa.table({"id": [1, 2], "features": [[1.0] * 16, [2.0] * 16]}), path)
    with pytest.raises(
        UserError, match=r"no column of '.*noinput.parquet' is named after an input.*\(x\); its columns: id, features"
    ):
        predict(MLP, [str(path)], tmp_path / "o0")
    values = [row.tolist() for row in samples[:40]]
    values[23] = values[23][:15]  # one short row
    ragged = tmp_path / "ragged.parquet"
    pq.write_table(pa.table({"x": pa.array(values, type=pa.list_(pa.float64()))}), ragged, row_group_size=16)
    result = run_cli("predict", MLP, str(ragged), "-o", str(tmp_path / "o1"), "--shard-size", "10")
    assert result.returncode == 2
    assert "ragged.parquet' row 23: column 'x' has shape [15]; the first sample's is [16]" in result.stderr
    kept = json.loads((tmp_path / "o1" / "manifest.json").read_text())["shards"]
    assert [s["samples"] for s in kept] == [10, 10]  # the shards before the bad row
    skipped = predict(MLP, [str(ragged)], tmp_path / "o2", shard_size=10, skip_bad=True)
    assert skipped.samples == 39 and skipped.skipped == 1
    entry = json.loads((tmp_path / "o2" / "manifest.json").read_text())["shards"][2]
    assert entry["samples"] == 9 and entry["skipped"][0]["sample"] == 23
    np.save(tmp_path / "good.npy", torch.cat([samples[:23], samples[24:40]]).numpy())
    predict(MLP, [str(tmp_path / "good.npy")], tmp_path / "o3", shard_size=39)
    assert digests(tmp_path / "o2") == digests(tmp_path / "o3")  # the other 39 samples' bits


def _png(path: Path, seed: int, size=(80, 70)) -> None:
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)


def _by_hand(path: Path, size: tuple[int, int]) -> np.ndarray:
    """The documented preprocessing: decode, RGB, bilinear resize, /255, ImageNet mean and std, CHW."""
    with Image.open(path) as im:
        rgb = im.convert("RGB").resize((size[1], size[0]), Image.Resampling.BILINEAR)
    array = np.asarray(rgb, dtype=np.float32) / np.float32(255)
    array = (array - np.array([0.485, 0.456, 0.406], dtype=np.float32)) / np.array(
        [0.229, 0.224, 0.225], dtype=np.float32
    )
    return array.transpose(2, 0, 1)


def test_images_are_preprocessed_as_documented_and_bad_ones_named(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(10):
        _png(folder / f"img{i:02d}.png", i)
    from samebits.offline.images import ImagePrep

    assert ImagePrep().to_dict()["resize"] == [224, 224] and ImagePrep().to_dict()["convert"] == "RGB"  # the defaults
    small = tmp_path / "small"
    report = predict(CONV, [str(folder)], small, shard_size=4, batch_size=3, image=_prep((64, 48)))
    assert report.samples == 10 and report.shards == 3
    assert json.loads((small / "manifest.json").read_text())["preprocessing"]["resize"] == [64, 48]
    np.save(tmp_path / "by-hand.npy", np.stack([_by_hand(p, (64, 48)) for p in sorted(folder.iterdir())]))
    predict(CONV, [str(tmp_path / "by-hand.npy")], tmp_path / "hand", shard_size=4)
    assert digests(small) == digests(tmp_path / "hand")  # the same bits as the preprocessing done by hand
    (folder / "img08.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    args = ["--shard-size", "5", "--image-size", "64,48"]
    result = run_cli("predict", CONV, str(folder), "-o", str(tmp_path / "bad"), *args)
    assert result.returncode == 2 and "img08.png': does not decode as an image" in result.stderr
    assert [s["samples"] for s in json.loads((tmp_path / "bad" / "manifest.json").read_text())["shards"]] == [5]
    skipped = run_cli("predict", CONV, str(folder), "-o", str(tmp_path / "skip"), *args, "--skip-bad")
    assert skipped.returncode == 0 and "9 samples in 2 shards" in skipped.stdout and "1 skipped" in skipped.stdout
    assert digests(tmp_path / "skip") == digests(small)[:8] + digests(small)[9:]
    refused = run_cli("predict", CONV, str(folder), "-o", str(tmp_path / "x"), "--image-size", "64")
    assert refused.returncode == 2 and "--image-size takes 2 comma-separated integers" in refused.stderr
    nan = run_cli("predict", CONV, str(folder), "-o", str(tmp_path / "y"), "--mean", "nan,0,0")
    assert nan.returncode == 2 and "3 finite numbers" in nan.stderr


def test_a_null_inside_a_list_and_a_16_bit_image_are_bad_samples_not_zeros(samples, tmp_path):
    values = [row.tolist() for row in samples[:20]]
    values[5][3] = None
    for kind in (pa.list_(pa.float64()), pa.list_(pa.float64(), 16)):
        path = tmp_path / f"nulls-{kind.num_fields}-{len(str(kind))}.parquet"
        pq.write_table(pa.table({"x": pa.array(values, type=kind)}), path)
        with pytest.raises(UserError, match=r"row 5: column 'x' is null or holds a null"):
            predict(MLP, [str(path)], tmp_path / f"o-{path.stem}", shard_size=10)
        report = predict(MLP, [str(path)], tmp_path / f"s-{path.stem}", shard_size=10, skip_bad=True)
        assert report.samples == 19 and report.skipped == 1
    deep = np.random.default_rng(0).integers(0, 65535, (40, 50), dtype=np.uint16)
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(9):
        _png(folder / f"a{i}.png", i)
    Image.fromarray(deep).save(folder / "z-16bit.png")
    with pytest.raises(UserError, match=r"z-16bit.png': is a I;16 image \(16-bit or float\)"):
        predict(CONV, [str(folder)], tmp_path / "img", shard_size=5, image=_prep((64, 64)))


def _prep(size):
    from samebits.offline.images import ImagePrep

    return ImagePrep(size)


def test_mixed_kinds_are_refused(samples, tmp_path):
    np.save(tmp_path / "x.npy", samples.numpy())
    _png(tmp_path / "a.png", 0)
    with pytest.raises(UserError, match="mix images and tensors"):
        predict(MLP, [str(tmp_path)], tmp_path / "out")

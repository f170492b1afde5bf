import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from samebits.determinism import dataloader_kwargs, isolate_rng, seed_everything


def draw():
    return torch.rand(1).item(), float(np.random.rand()), random.random()


def test_seed_everything_seeds_all_three_rngs():
    assert seed_everything(11) == 11
    first = draw()
    seed_everything(11)
    assert draw() == first
    seed_everything(12)
    assert draw() != first


def test_seed_everything_validates_the_seed():
    with pytest.raises(ValueError, match="4294967295"):
        seed_everything(2**32)


def test_isolate_rng_restores_states_also_on_error():
    seed_everything(0)
    expected = draw()
    seed_everything(0)
    with pytest.raises(KeyError):
        with isolate_rng():
            draw()
            raise KeyError("x")
    assert draw() == expected


class Draws(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.tensor([torch.rand(1).item(), float(np.random.rand()), random.random()])


def _epoch(seed):
    loader = DataLoader(Draws(), batch_size=1, shuffle=True, num_workers=2, **dataloader_kwargs(seed))
    order_and_draws = [b for b in loader]
    return torch.cat(order_and_draws)


def test_dataloader_workers_get_distinct_reproducible_seeds():
    a, b = _epoch(3), _epoch(3)
    assert torch.equal(a, b)
    assert not torch.equal(a, _epoch(4))
    # every worker's NumPy and random streams differ from the other worker's
    numpy_draws, python_draws = a[:, 1], a[:, 2]
    assert len(set(numpy_draws.tolist())) == len(numpy_draws)
    assert len(set(python_draws.tolist())) == len(python_draws)


def test_seed_everything_none_reads_the_seed_samebits_run_set(monkeypatch):
    monkeypatch.setenv("SAMEBITS_SEED", "17")
    assert seed_everything(None) == 17
    monkeypatch.delenv("SAMEBITS_SEED")
    assert seed_everything(None) == 0


def test_samebits_seed_alone_does_not_loosen_verify(tmp_path, monkeypatch):
    import samebits

    golden = samebits.record("demo:mlp", tmp_path / "g.safetensors")
    monkeypatch.setenv("SAMEBITS_SEED", "5")  # differs from the recording, which had none
    report = samebits.verify(golden)
    assert report.policy == "exact" and report.verdict == "identical"
    assert any(c["field"] == "env.SAMEBITS_SEED" and not c["affects_bits"] for c in report.fingerprint_changes)

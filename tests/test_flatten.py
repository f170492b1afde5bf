import dataclasses
from typing import NamedTuple

import numpy as np
import pytest
import torch

from samebits.tensors import flatten


class Pair(NamedTuple):
    left: torch.Tensor
    right: int


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    extra: dict


def test_bare_tensor_has_empty_path():
    t = torch.ones(2)
    assert list(flatten(t)) == [""]
    assert flatten(t)[""] is t


def test_detection_style_list_of_dicts_gets_indexed_key_paths():
    out = [{"scores": torch.ones(1), "boxes": torch.zeros(1, 4)}, {"boxes": torch.zeros(0, 4), "scores": torch.ones(0)}]
    assert list(flatten(out)) == ["[0].boxes", "[0].scores", "[1].boxes", "[1].scores"]


def test_dict_keys_are_sorted_by_type_then_text_and_non_identifiers_quoted():
    out = flatten({"b": 1, "a": 2, "two words": 3, 5: 4})
    assert list(out) == ["[5]", ".a", ".b", "['two words']"]


def test_dataclass_namedtuple_and_scalars():
    out = flatten(Output(torch.zeros(1), {"pair": Pair(torch.ones(1), 3), "none": None, "flag": True, "name": "x"}))
    assert list(out) == [".logits", ".extra.flag", ".extra.name", ".extra.none", ".extra.pair.left", ".extra.pair.right"]
    assert out[".extra.pair.right"] == 3 and out[".extra.none"] is None


def test_numpy_arrays_become_tensors():
    out = flatten((np.arange(3),))
    assert isinstance(out["[0]"], torch.Tensor) and out["[0]"].tolist() == [0, 1, 2]


def test_unsupported_leaf_names_its_path():
    with pytest.raises(TypeError, match=r"cannot flatten a object at path '\[1\]'"):
        flatten([1, object()])

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest
import torch

from samebits.tensors import flatten, tree


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
    assert list(out) == [
        ".logits",
        ".extra.flag",
        ".extra.name",
        ".extra.none",
        ".extra.pair.left",
        ".extra.pair.right",
    ]
    assert out[".extra.pair.right"] == 3 and out[".extra.none"] is None


def test_numpy_arrays_become_tensors():
    out = flatten((np.arange(3),))
    assert isinstance(out["[0]"], torch.Tensor) and out["[0]"].tolist() == [0, 1, 2]


def test_unsupported_leaf_names_its_path_type_and_the_hook():
    with pytest.raises(
        tree.UnknownNode, match=r"cannot walk a builtins.object at '\[1\]'.*samebits.register_node\(object, ...\)"
    ):
        flatten([1, object()])


@dataclasses.dataclass
class Rows:
    a: torch.Tensor
    b: torch.Tensor
    note: str = "x"


def test_dataclass_rows_are_taken_and_joined_without_loss():
    out = Rows(torch.arange(10.0).reshape(5, 2), torch.arange(5))
    parts = [tree.take(out, 0, 2, 5, strict=True), tree.take(out, 2, 5, 5, strict=True)]
    joined = tree.join(parts, [2, 3])
    assert isinstance(joined, Rows) and joined.note == "x"
    assert torch.equal(joined.a, out.a) and torch.equal(joined.b, out.b)


def test_row_drops_the_batch_dim_and_a_list_entry_is_the_row():
    out = {"x": torch.arange(6).reshape(3, 2), "dets": [{"boxes": torch.zeros(k, 4)} for k in (0, 1, 2)]}
    r = tree.row(out, 2, 3, strict=True)
    assert r["x"].tolist() == [4, 5] and r["dets"]["boxes"].shape == (2, 4)


def test_an_output_without_the_batch_dim_cannot_be_split_and_the_advice_fits_its_shape():
    """No advice that cannot work: a scalar (a router's aux loss) has no rows at any dim; states of
    (1, B, H) have them along dim 1, which --batch-dim cannot reach without moving the inputs'."""
    with pytest.raises(tree.RowError, match=r"'\.loss' has shape \(\): one value for the whole batch"):
        tree.take({"loss": torch.tensor(1.0), "x": torch.zeros(4, 2)}, 0, 2, 4, strict=True)
    with pytest.raises(tree.RowError, match=r"'\[1\]' has shape \(1, 4, 3\): its batch of 4 is along dim 1, not dim 0"):
        tree.take((torch.zeros(4, 2), torch.zeros(1, 4, 3)), 0, 2, 4, strict=True)
    with pytest.raises(tree.RowError, match=r"has shape \(7,\), with no batch dim 0 of size 4"):
        tree.take({"mask": torch.ones(7), "x": torch.zeros(4, 2)}, 0, 2, 4, strict=True)
    kept = tree.take({"mask": torch.ones(7), "x": torch.zeros(4, 2)}, 0, 2, 4)  # inputs: shared
    assert kept["mask"].shape == (7,) and kept["x"].shape == (2, 2)


def test_join_refuses_shared_values_that_differ():
    with pytest.raises(tree.RowError, match="differs between batches"):
        tree.join([{"x": torch.zeros(1), "k": 1}, {"x": torch.zeros(1), "k": 2}], [1, 1])


def test_stack_lifts_samples_into_the_template_structure():
    template = ((torch.zeros(2, 3), [torch.zeros(3, 4, 4), torch.zeros(3, 5, 5)]), {"scale": 2.0})
    samples = [((torch.full((3,), float(i)), torch.full((3, 2, 2), float(i))), {"scale": 2.0}) for i in range(3)]
    args, kwargs = tree.stack(samples, template, 2)
    assert args[0].shape == (3, 3) and args[0][:, 0].tolist() == [0.0, 1.0, 2.0]
    assert [t[0, 0, 0].item() for t in args[1]] == [0.0, 1.0, 2.0] and kwargs == {"scale": 2.0}


def test_map_tensors_keeps_types():
    out = tree.map_tensors(lambda t: t + 1, Output(torch.zeros(1), {"pair": Pair(torch.ones(1), 3)}))
    assert isinstance(out, Output) and isinstance(out.extra["pair"], Pair)
    assert out.logits.item() == 1.0 and out.extra["pair"].left.item() == 2.0 and out.extra["pair"].right == 3


class Boxes:
    def __init__(self, xyxy: torch.Tensor, counter: torch.Tensor) -> None:
        self.xyxy, self.counter = xyxy, counter


def test_register_node_walks_a_users_class_with_its_row_rule():
    tree.register_node(
        Boxes,
        children=lambda b: [(".xyxy", b.xyxy), (".counter", b.counter)],
        rebuild=lambda b, k: Boxes(*k),
        row_dims=lambda b: [1, None],
    )
    out = Boxes(torch.zeros(4, 6), torch.zeros(3))
    assert list(flatten(out)) == [".xyxy", ".counter"]
    part = tree.take(out, 0, 2, 6, strict=True)
    assert isinstance(part, Boxes) and part.xyxy.shape == (4, 2) and part.counter.shape == (3,)


def test_skeleton_round_trip_rebuilds_loaded_classes_only():
    tensors: dict[str, torch.Tensor] = {}
    store = lambda t, name: tensors.setdefault(name, t) is not None and name  # noqa: E731
    obj = [torch.ones(2), (1, "a"), {"k": Pair(torch.zeros(1), 3)}]
    again = tree.unskeleton(tree.skeleton(obj, store), tensors)
    assert isinstance(again[1], tuple) and isinstance(again[2]["k"], Pair) and again[2]["k"].right == 3
    forged = {"$node": "NamedTuple", "type": "os:system", "children": [[".x", 1]]}
    with pytest.raises(tree.TreeError, match="cannot be rebuilt"):
        tree.unskeleton(forged, tensors)
    with pytest.raises(tree.TreeError, match="not loaded"):
        tree.unskeleton({"$node": "dataclass", "type": "never_imported_module:Thing", "children": []}, tensors)


def test_plain_tensors_take_and_join_as_the_walk_does():
    """The no-walk path for plain tensors gives what the walk gives; a tensor subclass, a
    tensor without the rows and a structure still take the walk."""
    x = torch.arange(12.0).reshape(6, 2)
    assert torch.equal(tree.take(x, 1, 4, 6), x[1:4])
    assert torch.equal(tree.join([x[:2], x[2:]], [2, 4]), x)
    with pytest.raises(tree.RowError):
        tree.take(torch.zeros(3), 0, 1, 6, strict=True)  # no batch dim of 6: the walk's error
    param = torch.nn.Parameter(x.clone())
    assert torch.equal(tree.take(param, 0, 2, 6), x[:2])
    assert tree.join([(x[:2],), (x[2:],)], [2, 4])[0].shape == (6, 2)


def test_concat_batches_joins_row_tensors_and_keeps_a_shared_argument_from_the_first():
    from samebits.measure.batching import concat_batches
    from samebits.models.inputs import ModelInputs

    a = ModelInputs((torch.ones(2, 3),), {"mask": torch.zeros(2, 5, dtype=torch.bool)})
    b = ModelInputs((torch.full((1, 3), 2.0),), {"mask": torch.ones(1, 5, dtype=torch.bool)})
    joined = concat_batches([a, b])
    assert torch.equal(joined.args[0], torch.tensor([[1.0] * 3, [1.0] * 3, [2.0] * 3]))
    assert joined.kwargs["mask"].tolist() == [[False] * 5, [False] * 5, [True] * 5]
    # an argument without the batch's rows (a 4x4 table beside 2 and 1 rows) is shared: the first's
    table = torch.eye(4)
    shared = concat_batches([ModelInputs((torch.ones(2, 3), table)), ModelInputs((torch.ones(1, 3), table * 2))])
    assert shared.args[0].shape == (3, 3) and torch.equal(shared.args[1], table)


def test_a_cache_layer_holding_its_states_in_dicts_is_cut_and_joined_on_every_tensor():
    """transformers' linear-attention layers (Mamba, Mamba2) keep ``conv_states = {0: tensor}``:
    those tensors are leaves with the layer's row rule, so a sample's rows come out exactly."""
    cache_utils = pytest.importorskip("transformers.cache_utils")

    class DictStates(cache_utils.LinearAttentionCacheLayerMixin):
        def __init__(self, conv, recurrent):
            self.conv_states, self.recurrent_states, self.has_previous_state = {0: conv}, {0: recurrent}, {0: True}

        def lazy_initialization(self, *args, **kwargs):  # the mixin's abstract methods: not used here
            raise NotImplementedError

        update_conv_state = update_recurrent_state = lazy_initialization

    cache = cache_utils.DynamicCache()
    cache.layers = [DictStates(torch.randn(5, 6, 4), torch.randn(5, 6, 3))]
    out = {"logits": torch.randn(5, 2), "cache": cache}
    assert set(flatten(out)) == {".logits", ".cache[0].conv_states[0]", ".cache[0].recurrent_states[0]"}
    take, join, RowError = tree.take, tree.join, tree.RowError
    part = take(out, 1, 3, 5, strict=True)
    assert part["cache"].layers[0].conv_states[0].shape == (2, 6, 4) and part["cache"].layers[0].has_previous_state == {
        0: True
    }
    assert torch.equal(part["cache"].layers[0].recurrent_states[0], out["cache"].layers[0].recurrent_states[0][1:3])
    whole = join([take(out, 0, 1, 5), take(out, 1, 5, 5)], [1, 4])
    assert torch.equal(whole["cache"].layers[0].conv_states[0], out["cache"].layers[0].conv_states[0])
    cache.layers[0].conv_states = {0: torch.randn(3, 6, 4)}  # not the batch's rows: one clear error
    with pytest.raises(RowError, match="should hold the rows in dim 0, but its shape \\(3, 6, 4\\)"):
        take(out, 0, 1, 5, strict=True)
    cache.layers[0].conv_states = {0: torch.randn(5, 6, 4)}
    cache.layers[0].extra = {0: torch.randn(7, 2)}  # a tensor no rule places
    with pytest.raises(RowError, match="no rule says which dim of '.cache\\[0\\].extra\\[0\\]'"):
        take(out, 0, 1, 5, strict=True)

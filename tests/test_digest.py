import torch

from samebits.tensors import digest, digest_tree

from conftest import run_python


def test_negative_zero_and_zero_have_different_digests():
    assert digest(torch.tensor([0.0])) != digest(torch.tensor([-0.0]))


def test_nan_payloads_and_signs_hash_as_one_nan():
    a = torch.tensor([float("nan"), 1.0])
    b = torch.tensor([1.0, 1.0])
    b.view(torch.int32)[0] = 0x7FC00001  # another quiet NaN payload
    b2 = b.clone()
    b2[0] = -b2[0]
    assert torch.isnan(b[0]) and digest(a) == digest(b) == digest(b2)


def test_adjacent_floats_differ():
    x = torch.tensor([1.0])
    assert digest(x) != digest(torch.nextafter(x, torch.tensor([2.0])))


def test_dtype_and_shape_are_part_of_the_digest():
    assert digest(torch.zeros(4)) != digest(torch.zeros(2, 2))
    assert digest(torch.zeros(2, dtype=torch.int32)) != digest(torch.zeros(1, dtype=torch.int64))


def test_layout_does_not_matter():
    x = torch.arange(12.0).reshape(3, 4)
    assert digest(x.t()) == digest(x.t().contiguous())
    assert digest(torch.tensor([1 + 2j]).conj()) == digest(torch.tensor([1 - 2j]))


def test_bfloat16_and_bool_and_empty():
    assert digest(torch.ones(3, dtype=torch.bfloat16)) != digest(torch.ones(3, dtype=torch.float16))
    assert digest(torch.tensor([True])) != digest(torch.tensor([False]))
    assert digest(torch.zeros(0, 4)) != digest(torch.zeros(0, 3))


def test_tree_digest_covers_non_tensor_leaves():
    a = digest_tree({"n": 3, "t": torch.ones(2)})
    b = digest_tree({"n": 4, "t": torch.ones(2)})
    assert a[".t"] == b[".t"] and a[".n"] != b[".n"]


def test_digests_agree_across_processes():
    code = "import torch; from samebits.tensors import digest; g = torch.Generator().manual_seed(7); print(digest(torch.randn(64, 64, generator=g)))"
    first, second = run_python(code), run_python(code)
    assert first.returncode == 0, first.stderr
    g = torch.Generator().manual_seed(7)
    assert first.stdout.strip() == second.stdout.strip() == digest(torch.randn(64, 64, generator=g))


def test_digest_takes_any_output_tree():
    import samebits

    t = torch.arange(4.0)
    tree = {"a": (t, 3), "b": [t * 2]}
    assert samebits.digest(tree) == samebits.digest({"a": (t.clone(), 3), "b": [t * 2]})
    changed = samebits.digest({"a": (t, 4), "b": [t * 2]})  # a non-tensor leaf counts
    moved = samebits.digest({"a": (t * 2, 3), "b": [t]})  # so does where each tensor sits
    assert len({samebits.digest(tree), changed, moved}) == 3
    assert samebits.digest(t) != samebits.digest((t,))

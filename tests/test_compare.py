import pytest
import torch

from samebits.errors import UserError
from samebits.tensors import compare, tolerances_for
from samebits.tensors.compare import compare_tensors, ulp_distance


def test_identical_bits():
    result = compare({"a": torch.ones(3)}, {"a": torch.ones(3)})
    assert result.identical and result.verdict == "identical"
    assert str(result) == "All 1 outputs have identical bits."


def test_mismatch_message_in_torch_testing_style():
    a = torch.tensor([[1.0, 2.0, 3.0]])
    b = torch.tensor([[1.0, 2.5, 3.0]])
    result = compare({"logits": a}, {"logits": b}, atol=1e-5, rtol=1.3e-6)
    item = result.items[0]
    assert result.verdict == "diverged" and not result.ok
    assert (item.mismatched, item.numel, item.max_abs_index) == (1, 3, [0, 1])
    text = str(result)
    assert "Mismatched elements: 1 / 3 (33.3%)" in text
    assert "Greatest absolute difference: 0.5 at index (0, 1) (up to 1e-05 allowed)" in text
    assert "Greatest relative difference: 0.2 at index (0, 1) (up to 1.3e-06 allowed)" in text
    assert text.endswith("The failure occurred for item .logits")


def test_within_tolerance_is_close_not_identical():
    a = torch.tensor([1.0, 2.0])
    b = torch.nextafter(a, torch.tensor([3.0, 3.0]))
    result = compare(a, b, atol=1e-5, rtol=1e-5)
    assert result.verdict == "close" and result.ok and not result.identical
    assert result.items[0].differing == 2 and result.items[0].mismatched == 0


def test_exact_by_default():
    a = torch.tensor([1.0])
    assert compare(a, torch.nextafter(a, torch.tensor([2.0]))).verdict == "diverged"


def test_negative_zero_is_close_at_zero_tolerance_but_not_identical():
    item = compare_tensors(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert item.verdict == "close" and item.differing == 1 and item.max_ulp == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_ulp_distance_of_adjacent_and_far_values(dtype):
    a = torch.tensor([1.0, -1.0], dtype=dtype)
    step = torch.nextafter(a, torch.tensor([2.0, -2.0], dtype=dtype))
    assert ulp_distance(a, step) == 1
    two = torch.nextafter(step, torch.tensor([2.0, -2.0], dtype=dtype))
    assert ulp_distance(a, two) == 2
    # across zero: the smallest positive and negative subnormals are 2 ULP apart
    tiny = torch.nextafter(torch.zeros(1, dtype=dtype), torch.ones(1, dtype=dtype))
    assert ulp_distance(tiny, -tiny) == 2


def test_bfloat16_message_reports_ulp():
    a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    b = torch.tensor([1.0, 2.015625], dtype=torch.bfloat16)  # one bf16 step above 2 (2**-6)
    item = compare_tensors(a, b)
    assert item.max_ulp == 1 and "Greatest ULP distance: 1" in item.message()


def test_nan_at_same_place_is_equal_but_nan_against_number_is_not():
    assert compare(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0])).identical
    item = compare_tensors(torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]), atol=1.0, rtol=1.0)
    assert item.verdict == "diverged" and item.mismatched == 1 and item.max_abs == float("inf")


def test_shape_and_dtype_mismatch():
    assert compare(torch.zeros(2, 3), torch.zeros(3, 2)).items[0].reason == "Shapes do not match: (2, 3) != (3, 2)"
    assert (
        compare(torch.zeros(2), torch.zeros(2, dtype=torch.float64)).items[0].reason.startswith("Dtypes do not match")
    )


def test_missing_paths_diverge():
    result = compare({"a": torch.ones(1)}, {"a": torch.ones(1), "b": torch.ones(1)})
    assert result.verdict == "diverged"
    assert result.items[1].reason == "Path .b is missing in the first output."


def test_integers_and_bools_compare_exactly():
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 3])).items[0].mismatched == 1
    assert compare(torch.tensor([True]), torch.tensor([False])).verdict == "diverged"
    assert compare([1, "a"], [1, "a"]).identical and compare([1, "a"], [1, "b"]).verdict == "diverged"


def test_atol_and_rtol_both_or_neither():
    with pytest.raises(UserError, match="both or neither"):
        compare(torch.ones(1), torch.ones(1), atol=1e-3)
    with pytest.raises(UserError, match=">= 0"):
        compare(torch.ones(1), torch.ones(1), atol=-1.0, rtol=0.0)


def test_tolerances_match_torch_testing():
    assert tolerances_for(torch.float32) == (1.3e-6, 1e-5) and tolerances_for(torch.float32).atol == 1e-5
    # named, so they cannot be swapped into compare() by position
    assert compare(torch.ones(1), torch.ones(1) + 1e-6, **tolerances_for(torch.float32)._asdict()).verdict == "close"
    with pytest.raises(TypeError):
        compare(torch.ones(1), torch.ones(1), 1e-5, 1e-6)
    assert tolerances_for(torch.bfloat16) == (1.6e-2, 1e-5)
    assert tolerances_for(torch.float16) == (1e-3, 1e-5)
    assert tolerances_for(torch.float64) == (1e-7, 1e-7)
    assert tolerances_for(torch.int64) == (0.0, 0.0)


def test_complex_compares_real_and_imaginary_parts():
    item = compare_tensors(torch.tensor([1 + 1j]), torch.tensor([1 + 2j]))
    assert item.verdict == "diverged" and item.max_abs == 1.0


def test_brief_says_what_differs_when_no_value_does():
    signed = compare(torch.tensor([0.0, 1.0]), torch.tensor([-0.0, 1.0])).first_difference()
    assert (
        signed.max_abs == 0
        and signed.brief() == "1 element(s) at <output> differ in bits but not in value (NaN payloads or signed zeros)"
    )
    moved = compare({"a": torch.ones(2)}, {"a": torch.ones(2) + 1}).first_difference()
    assert moved.brief() == "max abs 1 at .a"

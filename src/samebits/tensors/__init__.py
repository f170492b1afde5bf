"""Flatten model outputs, digest tensors bit for bit, compare them like ``torch.testing``."""

from samebits.tensors.compare import Comparison, compare, compare_trees, tolerances_for
from samebits.tensors.digest import digest, digest_tree
from samebits.tensors.tree import flatten, register_node

__all__ = [
    "Comparison",
    "compare",
    "compare_trees",
    "digest",
    "digest_tree",
    "flatten",
    "register_node",
    "tolerances_for",
]

"""unknown-backend-flag (SB102) reads a table of torch.backends flags shipped with samebits
(linter/checks/backend_flags.py), not torch: the table must know every flag the installed torch has."""

from __future__ import annotations

from samebits.linter.checks.backend_flags import FLAGS, from_torch


def test_the_table_knows_every_flag_of_the_installed_torch():
    missing = {m: sorted(names - FLAGS.get(m, frozenset())) for m, names in from_torch().items()}
    assert {m: n for m, n in missing.items() if n} == {}, "add these to backend_flags.FLAGS"

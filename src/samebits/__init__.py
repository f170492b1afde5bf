"""samebits: reproducible, fast, memory-safe PyTorch inference, and the proof.

*Same input, same bits.* The public API is imported lazily, so that ``import samebits`` and the
CLI's ``--help`` do not pay for importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samebits._lazy import lazy_getattr
from samebits._version import __version__

if TYPE_CHECKING:  # what a type checker sees: the real names (at run time they load on first use)
    from samebits.checker.run import check as check
    from samebits.determinism import DeterminismRecord as DeterminismRecord
    from samebits.determinism import dataloader_kwargs as dataloader_kwargs
    from samebits.determinism import deterministic as deterministic
    from samebits.determinism import fast as fast
    from samebits.determinism import isolate_rng as isolate_rng
    from samebits.determinism import seed_everything as seed_everything
    from samebits.determinism import worker_init_fn as worker_init_fn
    from samebits.diagnosis.run import doctor as doctor
    from samebits.errors import SamebitsError as SamebitsError
    from samebits.errors import UserError as UserError
    from samebits.fingerprint import Fingerprint as Fingerprint
    from samebits.golden.recorder import record as record
    from samebits.golden.verifier import verify as verify
    from samebits.linter.engine import lint as lint
    from samebits.models import ModelInputs as ModelInputs
    from samebits.models import load_model as load_model
    from samebits.runtime.batch_invariant import batch_invariant as batch_invariant
    from samebits.runtime.bench import bench as bench
    from samebits.runtime.predictor import Predictor as Predictor
    from samebits.tensors import compare as compare
    from samebits.tensors import digest as digest
    from samebits.tensors import digest_tree as digest_tree
    from samebits.tensors import flatten as flatten
    from samebits.tensors import register_node as register_node
    from samebits.tensors import tolerances_for as tolerances_for
    from samebits.tensors.layout import align_parameters as align_parameters

_EXPORTS = {
    "deterministic": "samebits.determinism",
    "fast": "samebits.determinism",
    "seed_everything": "samebits.determinism",
    "isolate_rng": "samebits.determinism",
    "dataloader_kwargs": "samebits.determinism",
    "worker_init_fn": "samebits.determinism",
    "DeterminismRecord": "samebits.determinism",
    "Fingerprint": "samebits.fingerprint",
    "flatten": "samebits.tensors",
    "register_node": "samebits.tensors",
    "digest": "samebits.tensors",
    "digest_tree": "samebits.tensors",
    "compare": "samebits.tensors",
    "tolerances_for": "samebits.tensors",
    "align_parameters": "samebits.tensors.layout",
    "load_model": "samebits.models",
    "ModelInputs": "samebits.models",
    "record": "samebits.golden.recorder",
    "verify": "samebits.golden.verifier",
    "Predictor": "samebits.runtime.predictor",
    "check": "samebits.checker.run",
    "lint": "samebits.linter.engine",
    "doctor": "samebits.diagnosis.run",
    "bench": "samebits.runtime.bench",
    "batch_invariant": "samebits.runtime.batch_invariant",
    "UserError": "samebits.errors",
    "SamebitsError": "samebits.errors",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)

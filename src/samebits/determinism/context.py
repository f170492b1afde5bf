"""``deterministic()`` and ``fast()``: set every switch that changes bits, record it, restore it."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sys
from typing import Any

from samebits.limits import thread_count
from samebits.determinism import catalog
from samebits.determinism.precision import fp32_precision_switch
from samebits.determinism.rng import capture_rng_states, check_seed, restore_rng_states, seed_rngs
from samebits.determinism.switches import SwitchChange, SwitchSession

RUN_HINT = "start the interpreter with `samebits run -- python ...` (or export PYTHONHASHSEED before it starts)"


@dataclasses.dataclass
class DeterminismRecord:
    """Every switch a profile touched: old value, new value, whether it took effect, and why not."""

    profile: str
    seed: int | None
    changes: list[SwitchChange]

    def __getitem__(self, name: str) -> SwitchChange:
        for change in self.changes:
            if change.name == name:
                return change
        raise KeyError(name)

    def names(self) -> list[str]:
        return [c.name for c in self.changes]

    def ineffective(self) -> list[SwitchChange]:
        """Switches that were set but do not take effect here (with the reason in ``note``)."""
        return [c for c in self.changes if not c.effective]

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "seed": self.seed, "switches": [c.to_dict() for c in self.changes]}

    def __str__(self) -> str:
        lines = [f"samebits profile '{self.profile}'" + (f" (seed {self.seed})" if self.seed is not None else "")]
        for c in self.changes:
            mark = "set " if c.changed else "kept"
            extra = f"  [{c.note}]" if c.note else ""
            lines.append(f"  {mark} {c.name}: {c.old!r} -> {c.new!r}{extra}")
        return "\n".join(lines)


class _Profile(contextlib.ContextDecorator):
    """Base of the profiles: a context manager and decorator, re-entrant, restoring on exit."""

    profile = ""

    def __init__(self, device: str | None = None) -> None:
        self.device = device
        self.record: DeterminismRecord | None = None
        self._stack: list[tuple[SwitchSession, dict[str, Any] | None]] = []

    def _apply(self, session: SwitchSession) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _seed(self) -> int | None:
        return None

    def __enter__(self) -> DeterminismRecord:
        session = SwitchSession()
        seed = self._seed()
        rng = capture_rng_states(self.device) if seed is not None else None
        self._stack.append((session, rng))
        env_before = set(os.environ)
        try:
            self._apply(session)
            _note_env_side_effects(session, env_before)
            if seed is not None:
                seed_rngs(seed, device=self.device)
                session.note(_rng_change(seed, rng, self.device))
        except BaseException:
            self._exit()
            raise
        self.record = DeterminismRecord(self.profile, seed, session.changes)
        return self.record

    def __exit__(self, *exc: Any) -> None:
        self._exit()

    def _exit(self) -> None:
        session, rng = self._stack.pop()
        session.restore()
        if rng is not None:
            restore_rng_states(rng)


def _note_env_side_effects(session: SwitchSession, before: set[str]) -> None:
    """Variables torch sets while the flags change (importing Inductor sets
    ``TORCHINDUCTOR_CACHE_DIR``, which torch's ``use_deterministic_algorithms`` did before samebits
    set its flag without it) are recorded and removed on exit like any switch."""
    own = set(session.names())
    for var in sorted(set(os.environ) - before - own):
        switch = catalog.env_switch(var)
        session.set_external(switch, None, note="set by torch while the switches changed")


def _rng_change(seed: int, before: dict[str, Any] | None, device: str | None) -> SwitchChange:
    names = ", ".join(before or {})
    digest = hashlib.sha256(repr(before).encode()).hexdigest()[:12]
    return SwitchChange(
        f"RNG states ({names})",
        f"state {digest}",
        f"seeded {seed}",
        changed=True,
        effective=True,
        note="restored on exit",
    )


def _hash_seed_entry() -> SwitchChange:
    value = os.environ.get("PYTHONHASHSEED")
    if sys.flags.hash_randomization:
        note = f"hash randomisation is active in this interpreter; setting PYTHONHASHSEED now does nothing: {RUN_HINT}"
        return SwitchChange("PYTHONHASHSEED", value, value, changed=False, effective=False, note=note)
    return SwitchChange(
        "PYTHONHASHSEED",
        value,
        value,
        changed=False,
        effective=True,
        note="hash randomisation is off for this interpreter",
    )


def _cublas_entry(session: SwitchSession) -> None:
    """``CUBLAS_WORKSPACE_CONFIG``: torch reads it at each cuBLAS call under deterministic
    algorithms, and fixes the workspace size at the process's first cuBLAS call, not when CUDA
    starts: so it is set even where CUDA is already initialised (capturing the CUDA RNG states
    initialises it), with a note where a cuBLAS call may have come first."""
    if not (catalog.torch.version.cuda):
        return
    sw = catalog.cublas_workspace()
    if not catalog.torch_checks_cublas_workspace():
        value = sw.read()
        session.note(
            SwitchChange(
                sw.name,
                value,
                value,
                changed=False,
                effective=True,
                note="not needed: this torch allocates cuBLAS workspaces deterministically",
            )
        )
    elif sw.read() not in (":4096:8", ":16:8"):
        session.set(sw, ":4096:8")  # where CUDA runs already, the switch's one-way note says what it means


class deterministic(_Profile):
    """Set every switch that changes bits, seed every RNG, and restore all of it on exit.

    Use as ``with samebits.deterministic(0) as record:`` or as a decorator. The record lists
    each switch with its old and new value and whether it takes effect here (with the reason
    when not). ``threads`` sets torch's intra-op thread count; ``sdpa_math`` forces the math
    SDPA backend; ``device="cuda"`` allows reading CUDA RNG state (which initialises CUDA).
    """

    profile = "deterministic"

    def __init__(
        self,
        seed: int = 0,
        *,
        threads: int | None = None,
        warn_only: bool = False,
        sdpa_math: bool = False,
        device: str | None = None,
    ) -> None:
        super().__init__(device)
        self.seed = check_seed(seed)
        if threads is not None:
            thread_count(threads, "threads")
        self.threads, self.warn_only, self.sdpa_math = threads, warn_only, sdpa_math

    def _seed(self) -> int | None:
        return self.seed

    def _apply(self, session: SwitchSession) -> None:
        session.set(catalog.deterministic_algorithms(), (True, self.warn_only))
        session.set(catalog.fill_uninitialized_memory(), True)
        cudnn_det, cudnn_bench = catalog.cudnn_flags()
        session.set(cudnn_det, True)
        session.set(cudnn_bench, False)
        session.set(catalog.mkldnn_deterministic(), True)
        session.set(fp32_precision_switch(), False)
        for switch in catalog.reduced_precision_reductions():
            session.set(switch, False)
        if self.sdpa_math:
            for switch, target in catalog.sdpa_backends(math_only=True):
                session.set(switch, target)
        if self.threads is not None:
            session.set(catalog.intra_op_threads(), self.threads)
        _cublas_entry(session)
        session.note(_hash_seed_entry())


class fast(_Profile):
    """The opposite trade-off: cuDNN autotuning on, TF32 allowed, deterministic algorithms off.

    Same record and restore semantics as :class:`deterministic`; RNGs are left alone.
    """

    profile = "fast"

    def _apply(self, session: SwitchSession) -> None:
        session.set(catalog.deterministic_algorithms(), (False, False))
        cudnn_det, cudnn_bench = catalog.cudnn_flags()
        session.set(cudnn_det, False)
        session.set(cudnn_bench, True)
        session.set(fp32_precision_switch(), True)

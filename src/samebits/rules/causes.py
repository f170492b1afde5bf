"""The cause registry: every cause ``check`` and ``check --generate`` can name, with what finds
it and its fix, written once (the runtime rules and docs/check.md's table read them from here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True)
class CauseKind:
    """A cause: its code, the controlled re-run or measurement that finds it, and its fix.
    ``fixes`` holds the other fixes a measurement can call for, by name (``unfixed``: the fix
    was re-run and did not remove the difference)."""

    code: str
    found_by: str
    fix: str
    fixes: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def fix_for(self, variant: str | None = None) -> str:
        return self.fixes[variant] if variant else self.fix


_UNFIXED = "find the nondeterministic op in the module named; samebits.deterministic() did not fix it"
_PREDICTOR_GENERATE = (
    "generate at fixed shapes: samebits' Predictor.generate runs every prompt in tiles of a fixed row "
    "count at bucketed widths with at least one padding token, so alone and batched run the same kernels"
)

CAUSES: dict[str, CauseKind] = {
    c.code: c
    for c in (
        CauseKind(
            "training-mode",
            "the failing in-process axes re-run with `model.eval()` are identical",
            "call model.eval() before inference",
        ),
        CauseKind(
            "state-between-calls",
            "outputs change from call to call while no RNG state changes during the forward",
            "make the forward a function of its inputs and parameters only (reset or remove the state it updates)",
        ),
        CauseKind(
            "randomness-in-forward",
            "the seed axis differs and an RNG's state changes during the forward (named, with the modules)",
            "remove sampling from inference, or seed right before each call (samebits.deterministic(seed)) / pass a torch.Generator",
        ),
        CauseKind(
            "state-mutation",
            "parameters or buffers change in a forward, the first one after loading included (not fixed by eval)",
            "do not update buffers in forward; put stateful modules in eval mode (model.eval())",
            {
                "first-forward": "the model changes its weights on first use: run one forward before saving or "
                "digesting its state_dict, and load weights only into a model that has not run yet (or undo the "
                "change in its code)"
            },
        ),
        CauseKind(
            "weights-at-construction",
            "the fresh processes' factories built other weights before any forward (digests of every parameter "
            "and buffer compared)",
            "load the weights from a file (model.load_state_dict) instead of initialising them in every process, "
            "or build them at one thread count: initialisers such as nn.init.orthogonal_ run threaded kernels",
        ),
        CauseKind(
            "hash-order",
            "processes differ with distinct `PYTHONHASHSEED` and agree with one",
            "start the process with `samebits run -- python ...` (fixes PYTHONHASHSEED before start), or iterate sorted(...)",
        ),
        CauseKind(
            "per-process",
            "processes differ even with one hash seed while repeats agree",
            "build compiled artifacts (engines, autotuning) once and load the same file in every process",
        ),
        CauseKind(
            "thread-count",
            "forwards at other thread counts differ (fresh processes, or the module re-run at one thread)",
            "fix the thread count: `samebits run --threads N -- ...` or samebits.deterministic(threads=N)",
        ),
        CauseKind(
            "cpu-code-paths",
            "fresh processes on other x86-64 baselines' code paths (this CPU's instruction sets capped) differ, and agree under a portable level",
            "pin the CPU code paths before start: `--portable x86-64-v3` on samebits serve, predict, record and verify, or `samebits run --portable x86-64-v3 -- CMD` (docs/portable.md)",
            {
                "escaped": "the portable level does not pin this op: serve from one CPU model, or verify goldens with tolerances (docs/portable.md lists what the level covers)"
            },
        ),
        CauseKind(
            "batch-size",
            "the batch axis groups the sizes that agree bit for bit; for a generation, copies of the prompt at the batch's row count",
            "run every forward at one fixed tile size (pad the last batch), or inside samebits.batch_invariant()",
            {"generate": _PREDICTOR_GENERATE},
        ),
        CauseKind(
            "neighbours-matter",
            "at one batch size and position, other neighbours give the sample other bits",
            "run such a model one row per forward (samebits.Predictor does where its calibration measures "
            "this), or remove what couples the rows: routing a batch's tokens to experts, scales computed per "
            "batch (dynamic quantization), sequences packed by every row's length (pad them instead); a fixed "
            "tile size does not help",
        ),
        CauseKind(
            "position-dependent",
            "at one batch size and with the same neighbours, the sample's position in the batch changes its bits",
            "run every row at one fixed position (one row per forward), or remove what depends on a row's place: "
            "a kernel whose lanes compute the rows of a tile otherwise (samebits.batch_invariant() measures "
            "tiles at which every position is alike), or the model's own use of a row's index (noise or state "
            "seeded by it)",
        ),
        CauseKind(
            "rows-coupled",
            "an output's row has a dim of the batch's size at batches of 2, 3 and 5 (CLIP's `[B, B]` logits)",
            "nothing to fix in the kernels: the rows of a batch are scored against each other by design, so "
            "run and serve whole batches as given (samebits.Predictor runs such a model batch by batch, never "
            "split or padded); a fixed tile size would change what the outputs mean",
        ),
        CauseKind(
            "batch-composition",
            "a generation: copies of the prompt at the batch's shape still differ from it inside the batch",
            _PREDICTOR_GENERATE,
        ),
        CauseKind(
            "padding",
            "a generation: the prompt alone, padded; its position ids and the layers' mask compared, and for an "
            "encoder-decoder the same padding on the other side re-run",
            "pad every prompt to a fixed width bucket whether it runs alone or batched (Predictor.generate "
            "buckets widths), so the same prompt always runs at the same width",
            {
                "positions": "derive position_ids from the attention mask (cumsum - 1), as transformers' generate does",
                "right": "pad the encoder's inputs on the right (tokenizer.padding_side = 'right', as encoder-decoder "
                "tokenizers do), so a prompt's positions are the same alone and padded",
                "generate": _PREDICTOR_GENERATE,
            },
        ),
        CauseKind(
            "cache-path",
            "a generation: the first module at the prompt's last position with and without the KV cache",
            "run every generation on one path: the cache on (use_cache=True) everywhere the model serves",
        ),
        CauseKind(
            "attention-implementation",
            "a generation: the first module re-run under the other attention implementation",
            "pin the attention implementation wherever the model runs: from_pretrained(..., attn_implementation=...)",
        ),
        CauseKind(
            "memory-layout",
            "the layout axis: the same parameters (or inputs) re-laid in memory (fresh aligned storage, "
            "an offset, transposed strides) give other bits; `align_parameters` re-run on each",
            "after loading weights, call samebits.align_parameters(model): every parameter and buffer in "
            "fresh contiguous aligned storage, so a model loaded from a file gives the bits of one built in memory",
            {
                "inputs": "give the forward contiguous inputs in fresh storage (x.contiguous().clone()); "
                "samebits.Predictor stacks every batch into fresh storage",
            },
        ),
        CauseKind(
            "nondeterministic-kernels",
            "repeats differ; a re-run under `samebits.deterministic()` says whether that fixes it",
            "run inference inside samebits.deterministic()",
            {"unfixed": _UNFIXED},
        ),
    )
}


def fix_of(code: str, variant: str | None = None) -> str:
    """The fix of cause ``code`` (``variant``: the one a measurement called for)."""
    return CAUSES[code].fix_for(variant)


def sentence(text: str) -> str:
    """A fix as a sentence of its own (capitalised, a full stop)."""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def render_table() -> str:
    """The causes table of docs/check.md."""
    rows = ["| code | found by | fix |", "|---|---|---|"]
    rows += [f"| `{c.code}` | {c.found_by} | {c.fix} |" for c in CAUSES.values()]
    return "\n".join(rows)

"""``POST /v2/models/{name}/generate``: token ids in, generated token ids out (the shape of
Triton's generate extension, with ids where it has text: samebits holds no tokenizer). Requests
are batched like inferences, only with requests that ask for as many new tokens, and run through
:meth:`~samebits.runtime.Predictor.generate`, so a prompt's tokens are those it gets alone,
whatever the load."""

from __future__ import annotations


import torch

from samebits.errors import UserError
from samebits.files import BadJson, parse_json
from samebits.models.inputs import Model, ModelInputs
from samebits.runtime.generate import DEFAULT_BUCKET, check_fits
from samebits.runtime.predictor import Predictor
from samebits.serve.batcher import Batcher
from samebits.serve.options import ServeOptions

MAX_NEW_TOKENS = 4096  # the most one request may ask for
FIELDS = {"id", "input_ids", "parameters"}


class BadGenerate(ValueError):
    """A generate request that cannot be answered (status 400)."""


def supports_generate(model: Model) -> bool:
    """Whether a model can serve generation (a transformers-style ``generate``)."""
    return callable(getattr(model, "generate", None))


def generate_batcher(predictor: Predictor, options: ServeOptions) -> Batcher:
    """A batcher whose batches are prompts that ask for the same number of new tokens."""

    def run(batch: ModelInputs) -> list[torch.Tensor]:
        return [g.tokens for g in predictor.generate(batch.args[0], batch.kwargs["max_new_tokens"])]

    return Batcher.for_options(run, options, key=lambda inputs: inputs.kwargs["max_new_tokens"])


def parse_generate(body: bytes, vocab: int | None, model: Model | None = None) -> tuple[ModelInputs, str | None]:
    """(the batcher's inputs for one prompt, the request id); :class:`BadGenerate` otherwise."""
    try:
        request = parse_json(body)
    except BadJson as exc:
        raise BadGenerate(f"the body is {exc}") from None
    if not isinstance(request, dict):
        raise BadGenerate("the body must be a JSON object with 'input_ids'")
    unknown = sorted(set(request) - FIELDS)
    if unknown:
        raise BadGenerate(f"unknown field(s) {', '.join(unknown)}; a generate request has {', '.join(sorted(FIELDS))}")
    ids = request.get("input_ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        raise BadGenerate("'input_ids' must be a non-empty list of integer token ids")
    if vocab is not None and not all(0 <= t < vocab for t in ids):
        raise BadGenerate(f"a token id is outside this model's vocabulary [0, {vocab})")
    params = request.get("parameters", {})
    if not isinstance(params, dict) or set(params) - {"max_new_tokens"}:
        raise BadGenerate("'parameters' takes max_new_tokens only (greedy generation)")
    n = params.get("max_new_tokens", 16)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_NEW_TOKENS:
        raise BadGenerate(f"max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS}")
    request_id = request.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise BadGenerate("'id' must be a string")
    try:  # one request too long for the model must not fail the batch it would join
        check_fits(model, len(ids), DEFAULT_BUCKET, n)
    except UserError as exc:
        raise BadGenerate(str(exc)) from None
    return ModelInputs(([torch.tensor(ids, dtype=torch.long)],), {"max_new_tokens": n}), request_id


def vocab_size(model: Model) -> int | None:
    """The model's vocabulary size, where its config says it (ids outside it are refused)."""
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    return size if isinstance(size, int) else None

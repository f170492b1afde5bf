"""The ``serve`` task of a child process (``python -m samebits.child serve``): the model of
``samebits serve --isolate`` (serve/isolated.py is the parent's side). After ``ready``, each
request is a message of named input tensors and each reply the named outputs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from samebits.measure.job import Job, Reply
from samebits.measure.wire import Channel

if TYPE_CHECKING:
    from samebits.runtime.plan import Runner
    from samebits.serve.signature import Signature


def serve(job: Job, channel: Channel) -> None:
    """Load the model as ``job.params`` (spec, options, cache_dir) say, answer ``ready``, then
    predict each batch until the parent closes the pipe."""
    from samebits.errors import UserError, first_line
    from samebits.models.inputs import ModelInputs

    try:
        predictor, signature, ready = _load(job.params)
    except UserError as exc:
        channel.send(Reply(error=str(exc)).message())
        return
    except Exception as exc:
        channel.send(Reply(error=f"the model could not be served: {first_line(exc, with_type=True)}").message())
        return
    channel.send(Reply({"ready": ready}).message())
    while True:
        try:
            batch = ModelInputs.from_named(channel.receive().tensors)
        except EOFError:  # the parent closed the pipe: done
            break
        try:
            named = signature.named_outputs(predictor.predict(batch))
        except Exception as exc:
            channel.send(Reply(error=first_line(exc, with_type=True)).message())
            continue
        channel.send(Reply(tensors=named).message())
    predictor.close()


def _load(params: dict[str, Any]) -> tuple[Runner, Signature, dict[str, Any]]:
    from samebits.serve.isolated import describe_signature
    from samebits.serve.options import ServeOptions
    from samebits.serve.server import served

    options = ServeOptions(**params["options"])
    one = served(params["spec"], None, options, params["cache_dir"])
    not_ready = None
    if options.golden is not None:
        from samebits.serve.selfcheck import golden_mismatch

        not_ready = golden_mismatch(one.runner.predict, options.backend, options.golden)
    ready = {
        "signature": describe_signature(one.signature),
        "plan": one.runner.plan.to_dict(),
        "fingerprint": one.runner.fingerprint,
        "not_ready": not_ready,
    }
    return one.runner, one.signature, json.loads(json.dumps(ready, default=str))

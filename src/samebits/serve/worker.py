"""``python -m samebits.serve.worker``: the model of ``samebits serve --isolate`` in a child
process (serve/isolated.py has the protocol). What the model prints goes to stderr."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samebits.runtime.plan import Runner
    from samebits.serve.signature import Signature


def main() -> None:
    from samebits.measure.spawn import read_frame as receive
    from samebits.measure.spawn import write_frame as send

    out = os.fdopen(os.dup(1), "wb")  # the real stdout, for the frames alone
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = sys.stdin.buffer
    job = json.loads(receive(stdin))
    from samebits.errors import UserError, first_line

    try:
        predictor, signature, ready = _load(job)
    except UserError as exc:
        send(out, json.dumps({"error": str(exc)}).encode())
        return
    except Exception as exc:
        send(out, json.dumps({"error": f"the model could not be served: {first_line(exc, with_type=True)}"}).encode())
        return
    send(out, json.dumps({"ready": ready}, default=str).encode())
    from safetensors.torch import save

    from samebits.serve.isolated import unpack_inputs

    while True:
        try:
            batch = unpack_inputs(receive(stdin))
        except EOFError:  # the parent closed the pipe: done
            break
        try:
            named = signature.named_outputs(predictor.predict(batch))
        except Exception as exc:
            send(out, json.dumps({"error": first_line(exc, with_type=True)}).encode())
            continue
        send(out, b'{"ok": true}')
        send(out, save({k: v.contiguous() for k, v in named.items()}))
    predictor.close()


def _load(job: dict[str, Any]) -> tuple[Runner, Signature, dict[str, Any]]:
    from samebits.serve.isolated import describe_signature
    from samebits.serve.options import ServeOptions
    from samebits.serve.server import served

    options = ServeOptions(**job["options"])
    one = served(job["spec"], None, options, job["cache_dir"])
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
    return one.runner, one.signature, ready


if __name__ == "__main__":
    main()

"""``python -m samebits.serve.worker``: the model of ``samebits serve --isolate`` in a child
process (serve/isolated.py has the protocol). What the model prints goes to stderr."""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    from samebits.serve.isolated import receive, send

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

    from samebits.serve.isolated import WorkerDied, unpack_inputs

    while True:
        try:
            batch = unpack_inputs(receive(stdin))
        except WorkerDied:  # the parent closed the pipe: done
            break
        try:
            named = signature.named_outputs(predictor.predict(batch))
        except Exception as exc:
            send(out, json.dumps({"error": first_line(exc, with_type=True)}).encode())
            continue
        send(out, b'{"ok": true}')
        send(out, save({k: v.contiguous() for k, v in named.items()}))
    predictor.close()


def _load(job: dict):  # type: ignore[no-untyped-def]
    from samebits.serve.isolated import describe_signature
    from samebits.serve.options import ServeOptions
    from samebits.serve.server import served

    options = ServeOptions(**job["options"])
    _, predictor, signature = served(job["spec"], None, options, job["cache_dir"])
    not_ready = None
    if options.golden is not None:
        from samebits.serve.selfcheck import golden_mismatch

        not_ready = golden_mismatch(predictor.predict, options.backend, options.golden)
    ready = {
        "signature": describe_signature(signature),
        "backend": predictor.backend,
        "invariance": predictor.invariance.scheme,
        "verified_batch_sizes": list(predictor.invariance.sizes),
        "fingerprint": predictor.fingerprint,
        "not_ready": not_ready,
        "notes": list(predictor.notes),
        "plan": predictor.plan,
    }
    return predictor, signature, ready


if __name__ == "__main__":
    main()

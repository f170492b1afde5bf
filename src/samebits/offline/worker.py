"""``python -m samebits.offline.worker``: one predict worker (offline/workers.py). The first line
on stdin is the job; then each line is a shard index to compute, and each answer one JSON line
on stdout: ``{"ready": ...}`` once, ``{"done": entry}`` per shard, or ``{"error": ...}``. What
the model prints goes to stderr, never into the protocol."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w")  # the real stdout, for the protocol alone
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict) -> None:
        protocol.write(json.dumps(message) + "\n")
        protocol.flush()

    job = json.loads(sys.stdin.readline())
    from samebits.errors import UserError, first_line

    try:
        _serve(job, send)
    except UserError as exc:
        send({"error": str(exc)})
    except Exception as exc:
        send({"error": f"internal error in a predict worker: {first_line(exc, with_type=True)}", "internal": True})


def _serve(job: dict, send) -> None:  # type: ignore[no-untyped-def]
    from samebits.errors import UserError
    import torch

    from samebits.fingerprint.diff import bit_relevant_digest
    from samebits.measure.threads import num_threads
    from samebits.models.target import as_loaded
    from samebits.offline.images import ImagePrep
    from samebits.offline.run import compute_shard, example_of, open_dataset, plan_of
    from samebits.offline.sources import InputFile
    from samebits.runtime.cache import weights_digest
    from samebits.runtime.predictor import Predictor

    loaded = as_loaded(job["spec"])
    files = [InputFile(Path(f["path"]), f["size"], f["sha256"]) for f in job["files"]]
    image = ImagePrep(tuple(job["image"]["size"]), tuple(job["image"]["mean"]), tuple(job["image"]["std"]))
    dataset = open_dataset(files, loaded.model, image=image, skip_bad=job["skip_bad"])
    with num_threads(job["threads"]["build"]):  # calibrated as the parent was: its cached calibration
        predictor = Predictor(
            loaded, backend=job["backend"], example_inputs=example_of(loaded, dataset), cache_dir=job["cache_dir"]
        )
    torch.set_num_threads(job["threads"]["run"])
    with predictor:
        got = {
            "plan": plan_of(predictor),
            "fingerprint_sha256": bit_relevant_digest(predictor.fingerprint),
            "weights_sha256": weights_digest(predictor.model),
        }
        differs = [k for k in got if got[k] != job["expect"][k]]
        if differs:
            raise UserError(
                f"a worker process got another {differs[0].replace('_', ' ')} than the parent "
                f"({got[differs[0]]} vs {job['expect'][differs[0]]}); run with --workers 1"
            )
        send({"ready": got})
        out = Path(job["out"])
        for line in sys.stdin:
            entry = compute_shard(predictor, dataset, int(line), job["shard_size"], job["batch_size"], out)
            send({"done": entry})


if __name__ == "__main__":
    main()

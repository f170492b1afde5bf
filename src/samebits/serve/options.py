"""The knobs of ``samebits serve`` and their defaults, declared once for the library and the CLI.
Imports no torch, so ``--help`` stays fast."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    """The knobs of ``samebits serve`` (see its ``--help``)."""

    host: str = "127.0.0.1"
    port: int = 8000
    grpc_port: int | None = None  # also serve the protocol over gRPC on this port (0: any free port)
    backend: str = "eager"
    max_batch_size: int = 32  # rows per forward; the Predictor verifies the sizes up to this
    max_wait_ms: float = 1.0  # extra wait for rows, only when the queue filled during the last batch
    max_queue: int = 1024  # rows queued before new requests get 503
    timeout_s: float = 30.0  # a request still queued after this gets 504
    forward_timeout_s: float = 60.0  # a forward past this: its requests get 503, not ready until it returns
    max_body_mb: float = 64.0  # larger request bodies get 413
    max_json_mb: float = 16.0  # a larger JSON part gets 413 (parsed JSON takes up to ~15x its text: send binary)
    name: str | None = None  # the model's name in the URLs (default: from MODEL)
    golden: str | None = None  # ready only if this process reproduces this golden's bits
    isolate: bool = False  # the model in a child process, killed and restarted when a forward hangs
    pad: tuple[str, ...] = ()  # NAME:DIM[=VALUE]: inputs of variable length along DIM, padded to a bucket
    pad_lengths: tuple[int, ...] = (16, 32, 64, 128)  # the buckets: each length is padded to the next one
    threads: int | None = None  # the model's intra-op threads (None: torch's default, every core)
    device: str = "cpu"  # where the Predictor runs the model

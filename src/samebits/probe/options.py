"""The knobs of ``samebits probe`` and their defaults, declared once for the library and the CLI.
Imports no torch, so ``--help`` stays fast."""

from __future__ import annotations

import dataclasses

from samebits.errors import UserError

MAX_CONCURRENCY = 1024
MAX_REQUESTS = 1_000_000


@dataclasses.dataclass(frozen=True)
class ProbeOptions:
    """The knobs of ``samebits probe`` (see its ``--help``)."""

    protocol: str | None = None  # v2, v2-grpc or openai; None: from the URL
    binary: bool = False  # v2 REST: the binary tensor extension both ways
    concurrency: tuple[int, ...] = (1, 16, 64)  # requests in flight on the loaded axis, one level each
    requests: int = 200  # requests per concurrency level (probes and filler; with wrk: probes x 4)
    probes: int = 8  # probe inputs at most (rows of the inputs, or prompts)
    repeats: int = 2  # quiet requests per probe input
    replicas: tuple[str, ...] = ()  # other URLs of the same model
    connections: int = 4  # without replicas: fresh connections to the URL (behind a load balancer)
    restart_cmd: str | None = None  # the user's own command that restarts the server
    restart_wait_s: float = 120.0  # after it: how long the endpoint may take to answer again
    timeout_s: float = 300.0  # the whole run
    request_timeout_s: float = 30.0  # one request
    seed: int = 0  # random inputs from metadata, and the filler
    int_range: tuple[int, int] = (0, 10)  # integer inputs from metadata: LOW,HIGH (exclusive)
    client: str = "auto"  # the filler's client: auto (wrk where installed, for REST), wrk, python
    model_name: str | None = None  # OpenAI's "model" field (default: the first of GET /v1/models)
    max_tokens: int = 16  # OpenAI: tokens per completion

    def validate(self) -> None:
        """One line for a knob out of its range."""
        if not self.concurrency or not all(1 <= c <= MAX_CONCURRENCY for c in self.concurrency):
            raise UserError(f"--concurrency takes levels from 1 to {MAX_CONCURRENCY}, e.g. 1,16,64")
        for name, value, low in (
            ("--requests", self.requests, 1),
            ("--probes", self.probes, 1),
            ("--repeats", self.repeats, 2),
            ("--connections", self.connections, 0),
            ("--max-tokens", self.max_tokens, 1),
        ):
            if not low <= value <= MAX_REQUESTS:
                raise UserError(f"{name} must be between {low} and {MAX_REQUESTS}, not {value}")
        for name, seconds in (
            ("--timeout-s", self.timeout_s),
            ("--request-timeout-s", self.request_timeout_s),
            ("--restart-wait-s", self.restart_wait_s),
        ):
            if not 0 < seconds <= 86400:
                raise UserError(f"{name} must be > 0 seconds (at most a day), not {seconds:g}")
        if self.client not in ("auto", "wrk", "python"):
            raise UserError(f"--client must be auto, wrk or python, not {self.client}")
        if self.int_range[1] <= self.int_range[0]:
            raise UserError("--int-range: HIGH must be greater than LOW")

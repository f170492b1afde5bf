"""Ray Serve, for more than one machine: a deployment whose replicas each run the same
:class:`~samebits.serve.batcher.Batcher` and Predictor as ``samebits serve`` and speak the same
protocol (``POST /<route>/v2/models/NAME/infer``). ``pip install 'samebits[ray]'``.

Replicas share the Predictor's calibration and compiled artifacts through its cache folder (pass
one on shared storage as ``cache_dir`` across machines). The first replica to start records its
bit-relevant fingerprint; a replica whose fingerprint differs (another CPU ISA, another torch)
would answer with other bits, so it refuses to start and says why.

    from ray import serve
    from samebits.serve.ray import deployment
    serve.run(deployment("models.py:resnet18", num_replicas=2).bind(), route_prefix="/")
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from samebits.serve.options import ServeOptions


def _bit_relevant_digest(fingerprint: dict[str, Any]) -> str:
    from samebits.fingerprint.diff import bit_relevant

    return hashlib.sha256(json.dumps(bit_relevant(fingerprint), sort_keys=True, default=str).encode()).hexdigest()


def deployment(
    model_spec: str,
    *,
    options: ServeOptions = ServeOptions(),
    num_replicas: int = 1,
    cache_dir: str | None = None,
    name: str = "samebits",
) -> Any:
    """A Ray Serve deployment of ``model_spec`` (a MODEL spec string: each replica loads it).
    ``max_ongoing_requests`` is set from ``options.max_batch_size`` so that a replica can fill a
    batch (Ray's default of 5 would cap it)."""
    from ray import serve

    @serve.deployment(
        name=name, num_replicas=num_replicas, max_ongoing_requests=max(options.max_batch_size, options.max_queue // 8)
    )
    class SamebitsReplica:
        def __init__(self) -> None:
            import ray

            from samebits.models.target import as_loaded, inputs_for
            from samebits.runtime.predictor import Predictor
            from samebits.serve.batcher import Batcher
            from samebits.serve.server import model_name
            from samebits.serve.signature import signature_of

            loaded = as_loaded(model_spec)
            example = inputs_for(loaded, None, hint="samebits serve needs example inputs to calibrate")
            self.predictor = Predictor(
                loaded,
                backend=options.backend,
                max_batch_size=options.max_batch_size,
                example_inputs=example,
                cache_dir=cache_dir,
            )
            mine = _bit_relevant_digest(self.predictor.fingerprint)
            registry = (
                _registry()
                .options(
                    name=f"samebits-fingerprint-{name}", namespace="samebits", lifetime="detached", get_if_exists=True
                )
                .remote()
            )
            first = ray.get(registry.claim.remote(mine))
            if first != mine:
                raise RuntimeError(
                    f"this replica's bit-relevant fingerprint ({mine[:12]}) differs from the first replica's "
                    f"({first[:12]}): it would answer with other bits (another CPU ISA or torch build); not starting"
                )
            self.signature = signature_of(
                self.predictor.model, self.predictor._example, self.predictor.predict(self.predictor._example)
            )
            self.name = options.name or model_name(loaded.spec)
            self.batcher = Batcher(
                self.predictor.predict,
                max_batch_size=options.max_batch_size,
                max_wait_ms=options.max_wait_ms,
                max_queue=options.max_queue,
                timeout_s=options.timeout_s,
                forward_timeout_s=options.forward_timeout_s,
            )

        async def __call__(self, request: Any) -> Any:
            from starlette.responses import JSONResponse, Response

            from samebits.serve.app import HTTPError, answer
            from samebits.serve.protocol import HEADER_LENGTH

            path = request.url.path.rstrip("/")
            if request.method == "GET" and path.endswith(("/v2/health/ready", "/v2/health/live")):
                return JSONResponse({"ready": True, "live": True})
            if request.method != "POST" or not path.endswith(f"/v2/models/{self.name}/infer"):
                return JSONResponse({"error": f"POST /v2/models/{self.name}/infer"}, status_code=404)
            try:
                status, headers, body = await answer(
                    await request.body(),
                    request.headers.get(HEADER_LENGTH.lower()),
                    self.signature,
                    self.batcher,
                    self.name,
                )
            except HTTPError as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=exc.headers)
            return Response(body, status_code=status, headers=headers)

    return SamebitsReplica


@functools.lru_cache(maxsize=1)
def _registry() -> Any:
    """A Ray actor class holding the first replica's bit-relevant fingerprint digest."""
    import ray

    @ray.remote(num_cpus=0)
    class Registry:
        def __init__(self) -> None:
            self.first: str | None = None

        def claim(self, digest: str) -> str:
            if self.first is None:
                self.first = digest
            return self.first

    return Registry

"""Ray Serve, for more than one machine: a deployment whose replicas each run the same
:class:`~samebits.serve.service.ModelService` and Predictor as ``samebits serve`` and speak the same
protocol (``POST /<route>/v2/models/NAME/infer``). ``pip install 'samebits[ray]'``.

Replicas share the Predictor's calibration and compiled artifacts through its cache folder (pass
one on shared storage as ``cache_dir`` across machines). The first replica to start records its
bit-relevant fingerprint; a replica whose fingerprint differs (another CPU ISA, another torch)
would answer with other bits, so it refuses to start and says why. With ``portable=LEVEL`` every
replica starts under the level (Ray's ``runtime_env``), so CPUs of other kinds that can run it
give one answer (their instruction sets no longer count), and a node that cannot is refused.

    from ray import serve
    from samebits.serve.ray import deployment
    serve.run(deployment("models.py:resnet18", num_replicas=2).bind(), route_prefix="/")
"""

from __future__ import annotations

import functools
from typing import Any

from samebits.errors import UserError
from samebits.serve.options import ServeOptions


def deployment(
    model_spec: str,
    *,
    options: ServeOptions = ServeOptions(),
    num_replicas: int = 1,
    cache_dir: str | None = None,
    name: str = "samebits",
    portable: str | None = None,
) -> Any:
    """A Ray Serve deployment of ``model_spec`` (a MODEL spec string: each replica loads it).
    ``max_ongoing_requests`` is set from ``options.max_batch_size`` so that a replica can fill a
    batch (Ray's default of 5 would cap it)."""
    from ray import serve

    from samebits.determinism.portable import level, ray_options, require

    unserved = _not_served(options)
    if unserved:
        raise UserError(f"samebits' Ray deployment does not serve {unserved}")
    if portable:
        level(portable)  # an unknown level: refused here, not in every replica

    @serve.deployment(
        name=name,
        num_replicas=num_replicas,
        max_ongoing_requests=max(options.max_batch_size, options.max_queue // 8),
        ray_actor_options=ray_options(portable),
    )
    class SamebitsReplica:
        def __init__(self) -> None:
            import ray

            from samebits.fingerprint.diff import bit_relevant_digest
            from samebits.serve.server import served
            from samebits.serve.service import ModelService

            require(portable)
            one = served(model_spec, None, options, cache_dir)
            self.name, self.predictor, self.signature = one.name, one.runner, one.signature
            mine = bit_relevant_digest(self.predictor.fingerprint)
            registry = (
                _registry()
                .options(
                    name=f"samebits-fingerprint-{name}", namespace="samebits", lifetime="detached", get_if_exists=True
                )
                .remote()
            )
            first = ray.get(registry.claim.remote(mine))
            if first != mine:
                self.predictor.close()
                raise RuntimeError(
                    f"this replica's bit-relevant fingerprint ({mine[:12]}) differs from the first replica's "
                    f"({first[:12]}): it would answer with other bits (another CPU ISA or torch build); not starting"
                )
            self.service = ModelService(self.predictor, self.signature, name=self.name, options=options, key=one.key)

        async def __call__(self, request: Any) -> Any:
            from starlette.responses import JSONResponse, Response

            from samebits.serve.protocol import HEADER_LENGTH
            from samebits.serve.service import service_error

            path = request.url.path.rstrip("/")
            if request.method == "GET" and path.endswith(("/v2/health/ready", "/v2/health/live")):
                return JSONResponse({"ready": True, "live": True})
            if request.method != "POST" or not path.endswith(f"/v2/models/{self.name}/infer"):
                return JSONResponse({"error": f"POST /v2/models/{self.name}/infer"}, status_code=404)
            try:
                with self.service.counted():
                    headers, body = await self.service.infer_body(
                        await request.body(), request.headers.get(HEADER_LENGTH.lower())
                    )
            except Exception as exc:
                failed = service_error(exc)
                return JSONResponse({"error": str(failed)}, status_code=failed.status, headers=failed.headers)
            return Response(body, headers=headers)

    return SamebitsReplica


def _not_served(options: ServeOptions) -> str | None:
    """What ``samebits serve`` does with ``options`` that a Ray replica does not (said, not ignored)."""
    if options.grpc_port is not None:
        return "grpc_port: a replica answers HTTP; Ray Serve's own gRPC proxy is started with serve.start(grpc_options=...)"
    if options.isolate:
        return "isolate: each replica is a Ray actor process already, which Ray restarts when it dies"
    if options.golden is not None:
        return "golden: readiness by a golden is samebits serve's; run `samebits verify GOLDEN MODEL` on each node"
    return None


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

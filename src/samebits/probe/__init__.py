"""``samebits probe``: does a deployed endpoint give the same answer alone and under load, across
replicas and across a restart? A client from outside, for any server of the Open Inference
Protocol (REST, gRPC) or of OpenAI-compatible completions. Names are imported on first use."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {"ProbeOptions": "samebits.probe.options", "probe": "samebits.probe.run"}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)

"""``samebits serve``: a dynamic-batching server (the Open Inference Protocol, KServe v2 REST)
whose answers do not depend on load. Names are imported on first use."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {
    "Batcher": "samebits.serve.batcher",
    "ServeOptions": "samebits.serve.options",
    "create_app": "samebits.serve.app",
    "serve": "samebits.serve.server",
}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)

"""``samebits predict``: offline batch inference over files into resumable shards whose per-sample
outputs do not depend on batch size or shard boundaries. Names are imported on first use."""

from __future__ import annotations

from samebits._lazy import lazy_getattr

_EXPORTS = {"predict": "samebits.offline.run", "PredictReport": "samebits.offline.run"}
__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)

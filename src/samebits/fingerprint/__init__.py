"""The environment fingerprint: what can change bits, captured, serialised and compared."""

from samebits.fingerprint.capture import BIT_ENV_VARS, SCHEMA_VERSION, Fingerprint, bit_relevant_changes
from samebits.fingerprint.diff import FieldChange, diff

__all__ = ["BIT_ENV_VARS", "SCHEMA_VERSION", "FieldChange", "Fingerprint", "bit_relevant_changes", "diff"]

"""Exception classes: user errors (exit 2, one line) versus internal bugs (tracebacks)."""

from __future__ import annotations


class SamebitsError(Exception):
    """Base class of every error samebits raises on purpose."""


class UserError(SamebitsError):
    """Bad input from the user: shown as one line on stderr, exit code 2.

    The message says what was wrong and what to do instead.
    """


class SpecError(UserError):
    """A MODEL spec or an input file could not be loaded."""


class MissingDependencyError(UserError):
    """An optional dependency needed by one feature is not installed."""

    def __init__(self, package: str, feature: str, extra: str | None = None) -> None:
        hint = f"pip install 'samebits[{extra}]'" if extra else f"pip install {package}"
        super().__init__(f"{feature} needs the optional package '{package}', which is not installed; {hint}")
        self.package = package

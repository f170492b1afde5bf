"""A switch is one global setting that can change bits: read it, set it, record it, restore it."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

_MISSING = object()


@dataclasses.dataclass
class Switch:
    """One global setting. ``read``/``write`` raise ``AttributeError`` where the installed torch lacks it.

    ``inert`` returns why the setting has no effect on this machine (e.g. no cuDNN in the
    build), or ``None``. ``one_way`` returns why a change cannot be undone, or ``None``.
    ``matches(value, target)`` says whether a read value already is the target; ``restore``
    puts back a value that ``read`` returned (both default to equality and ``write``).
    """

    name: str
    read: Callable[[], Any]
    write: Callable[[Any], None]
    inert: Callable[[], str | None] = lambda: None
    one_way: Callable[[], str | None] = lambda: None
    matches: Callable[[Any, Any], bool] = lambda value, target: bool(value == target)
    restore: Callable[[Any], None] | None = None

    def put_back(self, old: Any) -> None:
        (self.restore or self.write)(old)


@dataclasses.dataclass
class SwitchChange:
    """What happened to one switch: its value before and after, and whether that matters."""

    name: str
    old: Any
    new: Any
    changed: bool
    effective: bool
    note: str = ""
    one_way: bool = False
    restored: bool | None = None  # set on exit; None while the block runs or when nothing to restore

    def to_dict(self) -> dict[str, Any]:
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}


def _jsonable(value: object) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value)


def read_switch(switch: Switch) -> Any:
    """The switch's value, or a string ``"<error: ...>"`` when reading it raises (a state of its own)."""
    try:
        return switch.read()
    except AttributeError:
        return _MISSING
    except Exception as exc:  # e.g. torch's "mix of the legacy and new APIs" RuntimeError
        return f"<error: {type(exc).__name__}>"


def is_missing(value: object) -> bool:
    return value is _MISSING


class SwitchSession:
    """Sets switches one by one, records each change, and undoes them in reverse order."""

    def __init__(self) -> None:
        self.changes: list[SwitchChange] = []
        self._undo: list[tuple[Switch, Any, SwitchChange]] = []

    def set(self, switch: Switch, target: Any) -> SwitchChange | None:
        """Set ``switch`` to ``target`` unless it already has that value; ``None`` if torch lacks it."""
        old = read_switch(switch)
        if is_missing(old):
            return None
        inert = switch.inert()
        if switch.matches(old, target):
            change = SwitchChange(switch.name, old, old, changed=False, effective=inert is None, note=inert or "")
            self.changes.append(change)
            return change
        try:
            switch.write(target)
        except Exception as exc:
            change = SwitchChange(switch.name, old, old, changed=False, effective=False, note=f"could not set: {exc}")
            self.changes.append(change)
            return change
        one_way = switch.one_way()
        change = SwitchChange(
            switch.name,
            old,
            read_switch(switch),
            changed=True,
            effective=inert is None,
            note=inert or one_way or "",
            one_way=one_way is not None,
        )
        self.changes.append(change)
        self._undo.append((switch, old, change))
        return change

    def names(self) -> list[str]:
        return [c.name for c in self.changes]

    def set_external(self, switch: Switch, old: Any, note: str) -> None:
        """Record a switch that something else changed from ``old``, so that it is undone too."""
        change = SwitchChange(switch.name, old, read_switch(switch), changed=True, effective=True, note=note)
        self.changes.append(change)
        self._undo.append((switch, old, change))

    def note(self, change: SwitchChange) -> None:
        """Record a change made elsewhere (RNG seeding, a report-only entry)."""
        self.changes.append(change)

    def restore(self) -> None:
        """Undo every change in reverse order; a one-way switch is left as it is and says so."""
        while self._undo:
            switch, old, change = self._undo.pop()
            reason = switch.one_way()
            if reason is not None:
                change.restored, change.one_way = False, True
                change.note = reason
                continue
            try:
                switch.put_back(old)
                change.restored = read_switch(switch) == old
            except Exception as exc:
                change.restored = False
                change.note = f"could not restore: {exc}"

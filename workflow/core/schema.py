"""Schema: read one TOML table against its declared shape — every key checked at load.

A section is declared once, as a NamedTuple whose every field is ``Annotated[type, Spec]`` with its
default: the field's name is the key, the ``Spec`` says what a value must be (an integer in a
range, a name, a list of names…). ``Section(Record)`` reads the specs off the annotations, so a key
cannot be accepted without being a field. ``read`` refuses unknown keys (naming the nearest known
one), missing required ones and wrong values with ``FILE: [SECTION] KEY: expected …, got …`` and
fills every missing key with its default, so no later code ever validates config again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ForwardRef, Generic, NamedTuple, Protocol, TypeVar, cast, get_type_hints

from workflow.core.errors import ConfigError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
T = TypeVar("T", bound=NamedTuple)
V = TypeVar("V")


class BadValueError(Exception):
    """A value does not fit its spec; ``expected`` says what would."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


class Spec(Protocol):
    """What one key's value must be; ``read`` returns the value as the section stores it."""

    def read(self, value: object) -> object: ...


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Str:
    """A string (matching ``pattern``), or one of ``choices``."""

    __slots__ = ("choices", "pattern")

    def __init__(self, pattern: re.Pattern[str] | None = None, choices: tuple[str, ...] = ()) -> None:
        self.pattern, self.choices = pattern, choices

    def read(self, value: object) -> object:
        if self.choices:
            if value not in self.choices:
                *head, last = [repr(c) for c in self.choices]
                raise BadValueError(f"{', '.join(head)} or {last}" if head else last)
            return value
        if not isinstance(value, str) or (self.pattern is not None and not self.pattern.match(value)):
            raise BadValueError("a string" + (f" matching {self.pattern.pattern}" if self.pattern else ""))
        return value


class Regex:
    """A regular expression Python's ``re`` compiles."""

    __slots__ = ()

    def read(self, value: object) -> object:
        if not isinstance(value, str):
            raise BadValueError("a regular expression (a string)")
        try:
            re.compile(value)
        except re.error as e:
            raise BadValueError(f"a regular expression ({e})") from None
        return value


class Bool:
    """true or false."""

    __slots__ = ()

    def read(self, value: object) -> object:
        if not isinstance(value, bool):
            raise BadValueError("true or false")
        return value


class Int:
    """An integer from ``lo`` to ``hi``."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def read(self, value: object) -> object:
        if not isinstance(value, int) or isinstance(value, bool) or not self.lo <= value <= self.hi:
            raise BadValueError(f"an integer from {self.lo} to {self.hi}")
        return value


class Num:
    """A number (integer or float) from ``lo`` to ``hi``, read as a float."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi

    def read(self, value: object) -> object:
        if not _number(value) or not self.lo <= value <= self.hi:  # type: ignore[operator]
            raise BadValueError(f"a number from {self.lo:g} to {self.hi:g}")
        return float(value)  # type: ignore[arg-type]


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class EnvNames:
    """A list of environment variable names (``[runs] env``)."""

    __slots__ = ()

    def read(self, value: object) -> object:
        if not isinstance(value, list) or not all(isinstance(v, str) and ENV_NAME.match(v) for v in value):
            raise BadValueError("a list of environment variable names (letters, digits, _)")
        return tuple(value)


class Names:
    """A list of distinct lower-case names (role, state, event names)."""

    __slots__ = ("empty",)

    def __init__(self, empty: bool = False) -> None:
        self.empty = empty

    def read(self, value: object) -> object:
        if (
            not isinstance(value, list)
            or (not value and not self.empty)
            or not all(isinstance(v, str) and NAME_RE.match(v) for v in value)
            or len(set(value)) != len(value)
        ):
            raise BadValueError(("a list" if self.empty else "a non-empty list") + " of distinct lower-case names")
        return tuple(value)


class Strs:
    """A list of strings (an argv: non-empty unless ``empty``)."""

    __slots__ = ("empty",)

    def __init__(self, empty: bool = False) -> None:
        self.empty = empty

    def read(self, value: object) -> object:
        if not isinstance(value, list) or not (value or self.empty) or not all(isinstance(v, str) for v in value):
            raise BadValueError("a list of strings" if self.empty else "a non-empty list of strings")
        return tuple(value)


FORMS = ("file", "folder", "program", "command", "argv", "args")


class Owned:
    """A value naming the owner's own files: what its unsandboxed processes take policy, code or a
    secret from — a ``file`` or ``folder`` (``~`` expanded, relative to the project: ``absolute``
    makes it so at load), the ``program`` a command starts (looked up on PATH without a ``/``), a
    ``command`` line or an ``argv`` (its program and the files it is given), ``args`` (arguments
    for a program named elsewhere). ``secret``: never shown to an agent. ``core.control`` lists
    every one: those inside the project are the control plane no agent may write."""

    __slots__ = ("form", "secret")

    def __init__(self, form: str, secret: bool = False) -> None:
        if form not in FORMS:
            raise ValueError(f"an Owned value is one of {', '.join(FORMS)}, not {form!r}")
        self.form, self.secret = form, secret

    def read(self, value: object) -> object:
        if self.form in ("argv", "args"):
            return Strs(empty=self.form == "args").read(value)
        return Str().read(value)


def owned(record: object) -> Iterator[tuple[str, Owned, object]]:
    """(field, spec, value) of each ``Owned`` field of a section's record."""
    if not (isinstance(record, tuple) and hasattr(record, "_fields")):
        return
    hints = get_type_hints(type(record), include_extras=True)
    for field in record._fields:
        spec = next((m for m in getattr(hints.get(field), "__metadata__", ()) if isinstance(m, Owned)), None)
        if spec is not None:
            yield field, spec, getattr(record, field)


def absolute(record: T, base: Path) -> T:
    """``record`` with each ``Owned`` file and folder made absolute: ``~`` expanded, relative to
    ``base`` (the project), so the process that reads it and the sandbox that guards it name
    the same file wherever a command runs."""
    paths = {
        field: str(base / Path(value).expanduser())
        for field, spec, value in owned(record)
        if spec.form in ("file", "folder") and isinstance(value, str) and value
    }
    return record._replace(**paths) if paths else record


class NumTable:
    """A table of name = number (per-role timeouts, budgets)."""

    __slots__ = ()

    def read(self, value: object) -> object:
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and _number(v) and v >= 0 for k, v in value.items()
        ):
            raise BadValueError("a table of name = non-negative number")
        return MappingProxyType({k: float(v) for k, v in value.items()})


class NameTable:
    """A table of key = name (intent = role)."""

    __slots__ = ()

    def read(self, value: object) -> object:
        if not isinstance(value, dict) or not all(isinstance(v, str) and NAME_RE.match(v) for v in value.values()):
            raise BadValueError("a table of key = lower-case name")
        return MappingProxyType(dict(value))


class Custom:
    """A check written out for one key (panel members, transitions)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[object], object]) -> None:
        self.fn = fn

    def read(self, value: object) -> object:
        return self.fn(value)


class Fixed:
    """A field the caller sets from where the table is (a panel's name): never a key in the file."""

    __slots__ = ()

    def read(self, value: object) -> object:
        raise BadValueError("no value: the section's name sets it")


class Section(Generic[T]):
    """A table's shape: the NamedTuple it becomes, each field's spec read off its annotation."""

    __slots__ = ("fixed", "moved", "specs", "type")

    def __init__(self, type: type[T], moved: Mapping[str, str] | None = None) -> None:
        """``moved``: keys this table had once, each with where its setting lives now (refused
        with that hint, not as a typo)."""
        hints = type.__annotations__
        if any(isinstance(h, (str, ForwardRef)) for h in hints.values()):  # postponed annotations
            hints = get_type_hints(type, include_extras=True)
        specs: dict[str, Spec] = {}
        for field in type._fields:
            spec = next((m for m in getattr(hints[field], "__metadata__", ()) if hasattr(m, "read")), None)
            if spec is None:
                raise TypeError(f"{type.__name__}.{field}: declare it as Annotated[type, Spec] (schema)")
            specs[field] = spec
        self.type = type
        self.moved: Mapping[str, str] = MappingProxyType(dict(moved or {}))
        self.fixed = frozenset(k for k, v in specs.items() if isinstance(v, Fixed))
        self.specs: Mapping[str, Spec] = MappingProxyType({k: v for k, v in specs.items() if k not in self.fixed})


class Tables(Generic[V]):
    """A table of named sub-tables, each read against its own section (``[backends.NAME]``,
    ``[bridges.gmail.agents.NAME]``); ``make`` builds the value from {NAME: record}."""

    __slots__ = ("make", "sections", "what")

    def __init__(self, what: str, sections: Mapping[str, Section[Any]], make: Callable[[dict[str, Any]], V]) -> None:
        self.what, self.sections, self.make = what, sections, make

    def read(self, value: object) -> object:
        raise AssertionError("schema.read reads a Tables spec with read_in (it names the file)")

    def read_in(self, file: str, name: str, value: object) -> V:
        if not isinstance(value, dict):
            raise ConfigError(f"{where(file, name)}: expected a table of [{name}.NAME] tables, got {value!r}")
        out: dict[str, Any] = {}
        known = list(self.sections)
        for key, sub in value.items():
            section = self.sections.get(key)
            if section is None:
                expected = f"expected one of {', '.join(known)}" if known else "none is registered"
                raise ConfigError(
                    f"{where(file, f'{name}.{key}')}: unknown {self.what}{suggest(key, known)}; {expected}"
                )
            out[key] = read(file, f"{name}.{key}", sub, section)
        return self.make(out)


def where(file: str, section: str, key: str = "") -> str:
    return f"{file}: [{section}]" + (f" {key}" if key else "")


def suggest(key: str, known: list[str]) -> str:
    import difflib  # lazy: start-up time; only a mistake needs a suggestion

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def read(file: str, name: str, table: object, section: Section[T], /, **fixed: Any) -> T:
    """The section's NamedTuple from a TOML table; ``fixed`` values are set by the caller."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where(file, name)}: expected a table, got {table!r}")
    known = list(section.specs)
    values: dict[str, Any] = {}
    for key, value in table.items():
        spec = section.specs.get(key)
        if spec is None and key in section.moved:
            raise ConfigError(f"{where(file, name, key)}: no longer a key here; {section.moved[key]}")
        if spec is None or key in fixed:
            raise ConfigError(
                f"{where(file, name, key)}: unknown key{suggest(key, known)}; expected one of {', '.join(known)}"
            )
        if isinstance(spec, Tables):
            values[key] = spec.read_in(file, f"{name}.{key}", value)
            continue
        try:
            values[key] = spec.read(value)
        except BadValueError as e:
            raise ConfigError(f"{where(file, name, key)}: expected {e.expected}, got {value!r}") from None
    defaults = section.type._field_defaults
    missing = [k for k in section.type._fields if k not in values and k not in fixed and k not in defaults]
    if missing:
        raise ConfigError(f"{where(file, name)}: needs {' and '.join(missing)}")
    make = cast(Callable[..., T], section.type)
    return make(**{**fixed, **values})


class Plugin(NamedTuple):
    """A section a plugin declares and the composition root registers: ``[KIND.NAME]`` (a bridge's
    ``[bridges.slack]``), read against ``section`` — core names no plugin."""

    kind: str
    name: str
    section: Section[Any]

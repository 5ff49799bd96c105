"""Records: ``typing.NamedTuple``'s class syntax at run time without importing ``typing``.

Start-up time: importing ``typing`` costs a short command ~10 ms on a small machine, a quarter
of its budget (docs/performance.md). A module on a short command's path writes::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import NamedTuple
    else:
        from workflow.core.records import NamedTuple

so the type checker sees the real ``NamedTuple`` and the interpreter builds the same class — a
``collections.namedtuple`` with the annotated fields, their defaults, and the class body's
methods, properties and docstring — from this module.
"""

from __future__ import annotations

import collections

_RESERVED = frozenset(
    {"__new__", "__init__", "__slots__", "__getnewargs__", "_fields", "_field_defaults", "_make", "_replace", "_asdict"}
)
_SKIP = frozenset({"__module__", "__qualname__", "__annotations__", "__dict__", "__weakref__"})


class _Maker(type):
    """Builds a namedtuple from a class body, as typing's NamedTupleMeta does."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        if ns.get("_is_base"):
            return super().__new__(mcs, name, bases, ns)
        annotations = ns.get("__annotations__", {})
        assert isinstance(annotations, dict)
        fields = list(annotations)
        defaults = [ns[f] for f in fields if f in ns]
        if defaults and any(f not in ns for f in fields[len(fields) - len(defaults) :]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        cls: type = collections.namedtuple(name, fields, defaults=defaults, module=str(ns["__module__"]))  # type: ignore[misc]
        cls.__annotations__ = dict(annotations)
        for key, value in ns.items():
            if key in _RESERVED:
                raise AttributeError(f"{name}: cannot overwrite NamedTuple attribute {key}")
            if key not in _SKIP and key not in annotations:
                setattr(cls, key, value)
        cls.__qualname__ = str(ns.get("__qualname__", name))
        return cls


class NamedTuple(metaclass=_Maker):
    """Subclass it as ``typing.NamedTuple``: the subclass *is* a ``collections.namedtuple``."""

    _is_base = True

"""`record`: a dataclass whose methods are shared by every record, not generated per class.

`dataclasses.dataclass` writes `__init__`, `__repr__` and `__eq__` (a frozen class also
`__setattr__`, `__delattr__` and `__hash__`) as source text for each class and compiles it with
`exec`. On Python 3.11 that is most of the cost of defining a class, and `doctor check` defines
~66 on its way: ~40 ms of a ~300 ms run (docs/performance.md, "check"). A record is a dataclass
in every other respect — `dataclasses.fields`, `asdict`, `replace`, `is_dataclass` and
`__match_args__` see the same fields — and its methods behave as the generated ones: positional
or keyword arguments in field order, defaults and default factories, `init`/`repr`/`compare`
per field, equality only between instances of the same class, frozen instances that refuse
assignment and hash by their compared fields. A check builds a few hundred records, so reading
the field list at each call instead of running compiled code costs nothing measurable.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable

_MISSING = dataclasses.MISSING
_T = typing.TypeVar("_T", bound=type)


@typing.dataclass_transform(field_specifiers=(dataclasses.field,))
def record(cls: _T | None = None, /, *, frozen: bool = False) -> _T | Callable[[_T], _T]:
    """Use as `@record` or `@record(frozen=True)`, where `@dataclass` would stand."""
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def _make(cls: _T, frozen: bool) -> _T:
    own = cls.__dict__
    if not own.get("__doc__"):  # or dataclass would build one with inspect.signature
        cls.__doc__ = f"{cls.__name__}({', '.join(own.get('__annotations__', ()))})"
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    # _init takes every field positionally too: a keyword-only one would be accepted where dataclass refuses.
    keyword_only = [f.name for f in fields if f.kw_only is True]
    if keyword_only:
        raise TypeError(f"{cls.__name__}: a record has no keyword-only fields ({', '.join(keyword_only)}); use @dataclass")
    cls.__record_init__ = tuple((f.name, f.init, f.default, f.default_factory) for f in fields)
    cls.__record_repr__ = tuple(f.name for f in fields if f.repr)
    cls.__record_compare__ = tuple(f.name for f in fields if f.compare)
    cls.__record_post__ = getattr(cls, "__post_init__", None)  # called last, as dataclass's __init__ does
    # A class body that defines __eq__ gets __hash__ = None from Python itself; as dataclass
    # does, only a __hash__ written in the body counts as the class's own.
    own_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    methods: dict[str, object] = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
    for name, method in methods.items():
        if name not in own:
            setattr(cls, name, method)
    if frozen:
        if "__setattr__" in own or "__delattr__" in own:
            raise TypeError(f"cannot overwrite __setattr__ or __delattr__ of the frozen {cls.__name__}")
        cls.__setattr__, cls.__delattr__ = _refuse_set, _refuse_delete
    if not own_hash:  # frozen: by the compared fields; else equal by value and mutable: unhashable
        cls.__hash__ = _hash if frozen else None
    return cls


def _init(self, *args, **kwargs) -> None:
    plan = type(self).__record_init__
    put = object.__setattr__
    given = 0  # positional arguments taken, in the order of the init fields
    for name, init, default, factory in plan:
        if init and given < len(args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {name!r}")
            value = args[given]
            given += 1
        elif init and name in kwargs:
            value = kwargs.pop(name)
        elif default is not _MISSING:
            value = default
        elif factory is not _MISSING:
            value = factory()
        elif not init:
            continue
        else:
            raise TypeError(f"{type(self).__name__}() missing required argument {name!r}")
        put(self, name, value)
    if given < len(args):
        raise TypeError(f"{type(self).__name__}() takes {given} positional arguments but {len(args)} were given")
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
    post = type(self).__record_post__
    if post is not None:
        post(self)


def _repr(self) -> str:
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__record_repr__)
    return f"{type(self).__qualname__}({fields})"


def _key(self) -> tuple:
    return tuple(getattr(self, name) for name in type(self).__record_compare__)


def _eq(self, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _key(self) == _key(other)


def _hash(self) -> int:
    return hash(_key(self))


def _refuse_set(self, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _refuse_delete(self, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")

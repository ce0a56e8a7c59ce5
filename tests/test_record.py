"""doctor.record against its oracle: the same class body made by `dataclasses.dataclass` must
behave the same made by `record` (construction, errors, repr, equality, hashing, freezing, and
what the dataclasses functions and pickle see)."""

from __future__ import annotations

import dataclasses
import pickle
import threading
from dataclasses import field

import pytest

from doctor.record import record


def both(frozen: bool):
    """The class body below, once as a dataclass and once as a record (module-level names, so
    pickle finds them)."""

    def body(name: str):
        class Probe:
            """A probe's result."""

            name: str
            version: tuple[int, ...] | None = None
            paths: tuple[str, ...] = ()
            tags: frozenset[str] = field(default_factory=frozenset)
            note: str = field(default="", repr=False)
            cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)
            lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

            @property
            def label(self) -> str:
                return f"{self.name} {self.version}"

        Probe.__qualname__ = Probe.__name__ = name
        return Probe

    kind = "Frozen" if frozen else "Plain"
    oracle = dataclasses.dataclass(frozen=frozen)(body(f"Oracle{kind}"))
    ours = record(frozen=frozen)(body(f"Record{kind}"))
    globals()[oracle.__name__], globals()[ours.__name__] = oracle, ours
    return oracle, ours


CALLS = [
    (("torch",), {}),
    (("torch", (2, 13)), {}),
    (("torch",), {"paths": ("/opt/a",), "note": "n", "tags": frozenset({"cpu"})}),
    ((), {"name": "torch", "version": (2, 5, 1)}),
    (("torch", (2, 1), ("/x",), frozenset(), "why"), {}),
]
BAD_CALLS = [
    ((), {}),  # missing name
    (("a", None, (), frozenset(), "", "extra"), {}),  # too many positional
    (("a",), {"name": "b"}),  # twice
    (("a",), {"nope": 1}),  # unknown
    (("a",), {"cache": {}}),  # an init=False field
]


def view(obj) -> tuple:
    """What a caller can observe of an instance, minus the class name in repr."""
    return (tuple(getattr(obj, f) for f in ("name", "version", "paths", "tags", "note")), repr(obj).split("(", 1)[1], obj.label, obj.__match_args__,
            [f.name for f in dataclasses.fields(obj)], dataclasses.is_dataclass(obj))


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_is_built_and_seen_as_the_dataclass(frozen):
    oracle, ours = both(frozen)
    for args, kwargs in CALLS:
        a, b = oracle(*args, **kwargs), ours(*args, **kwargs)
        assert view(a) == view(b)
        assert isinstance(b.cache, dict) and b.cache == {} and hasattr(b.lock, "acquire")
        changed = dataclasses.replace(b, name="libtorch")
        assert (changed.name, changed.paths, type(changed)) == ("libtorch", b.paths, ours)
    assert ours("x").cache is not ours("x").cache  # a fresh dict from the factory each time


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_refuses_the_calls_the_dataclass_refuses(frozen):
    oracle, ours = both(frozen)
    for args, kwargs in BAD_CALLS:
        with pytest.raises(TypeError):
            oracle(*args, **kwargs)
        with pytest.raises(TypeError):
            ours(*args, **kwargs)


@pytest.mark.parametrize("frozen", [False, True])
def test_equality_hashing_and_freezing_follow_the_dataclass(frozen):
    oracle, ours = both(frozen)
    assert ours("t") != oracle("t")  # another class, even with the same fields
    for cls in (oracle, ours):
        a, b, c = cls("t", (1,)), cls("t", (1,)), cls("t", (2,))
        a.cache["x"] = 1  # compare=False: not part of equality
        assert a == b and a != c
        assert (a == "t") is False
        if frozen:
            assert hash(a) == hash(b)
            with pytest.raises(dataclasses.FrozenInstanceError):
                a.name = "other"
            with pytest.raises(dataclasses.FrozenInstanceError):
                del a.name
        else:
            with pytest.raises(TypeError):
                hash(a)
            a.name = "other"
            assert a.name == "other"


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_survives_pickle(frozen):
    _, ours = both(frozen)
    a = ours("torch", (2, 13), ("/opt",), frozenset({"cpu"}), "n")
    object.__setattr__(a, "lock", None)  # a Lock does not pickle, with either decorator
    back = pickle.loads(pickle.dumps(a))
    assert back == a and back.__dict__ == a.__dict__ and back.label == "torch (2, 13)"


def test_methods_the_class_defines_are_kept():
    @record(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

    assert repr(Named("A")) == "<A>" and Named("A") == Named("a") and len({Named("A"), Named("a")}) == 1


def test_a_record_without_a_docstring_gets_one_naming_its_fields():
    @record
    class Bare:
        a: int
        b: str = ""

    assert Bare.__doc__ == "Bare(a, b)"
    assert Bare(1) == Bare(1, "") and repr(Bare(1)).endswith("Bare(a=1, b='')")
    assert dataclasses.asdict(Bare(1)) == {"a": 1, "b": ""}


def test_a_frozen_class_with_its_own_eq_hashes_by_its_fields_and_cannot_redefine_setattr():
    for make in (dataclasses.dataclass(frozen=True), record(frozen=True)):
        @make
        class Version:
            text: str

            def __eq__(self, other: object) -> bool:
                return isinstance(other, Version) and other.text == self.text

        assert hash(Version("2.13")) == hash(Version("2.13"))  # __hash__ = None from __eq__ is not the class's own

        with pytest.raises(TypeError):
            @make
            class Mutable:
                text: str

                def __setattr__(self, name: str, value: object) -> None:
                    object.__setattr__(self, name, value)


def test_post_init_runs_last_as_in_the_dataclass():
    def body():
        class Span:
            """A span."""

            start: int
            end: int = 0
            width: int = field(default=0, init=False)

            def __post_init__(self) -> None:
                self.width = self.end - self.start

        return Span

    oracle, ours = dataclasses.dataclass(body()), record(body())
    assert repr(ours(2, 7)).split("(", 1)[1] == repr(oracle(2, 7)).split("(", 1)[1] == "start=2, end=7, width=5)"


def test_a_keyword_only_field_is_refused_where_a_record_would_take_it_positionally():
    with pytest.raises(TypeError, match="no keyword-only fields .when."):
        @record
        class Later:
            """A later one."""

            at: str
            when: int = field(default=0, kw_only=True)

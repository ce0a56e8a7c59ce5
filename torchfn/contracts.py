"""Shape, dtype and device contracts checked when a function is called.

The counterpart of Hasktorch's typed API, at run time: a contract names each dimension
("*batch d_in"), binds names across all arguments (the params and the input), and a
call that breaks it fails with a message that names the dimension and where its size
came from:

    linear: dimension 'd_in' of x is 3, but params['weight'] has d_in = 4
      (x has shape (8, 3), expected '*batch d_in'; params['weight'] has shape (16, 4))

Shape strings use jaxtyping's syntax (a subset: names, fixed sizes, `_`, `...`,
`*name`). A jaxtyping annotation such as `Float[Tensor, "batch d_in"]` can be used
instead of a string, and so can a bare annotation on the function when `contract` is
given no spec for that argument: jaxtyping is then only the notation, the checking and
the messages are ours (jaxtyping alone, without beartype or typeguard, does not check).

Checks cost a few microseconds a call; turn them off in a hot loop with
`with torchfn.checks(False):` or the environment variable TORCHFN_CHECKS=0.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


class ContractError(ValueError):
    """A tensor's shape, dtype or device broke the contract of the function it was given to.

    `path` is the layer's place in the model ("2.0" for the first child of the third),
    filled in by the combinators on the way out; `base` is the message without it.
    """

    def __init__(self, message: str, path: tuple[str, ...] = ()) -> None:
        self.base = message
        self.path = path
        if path:
            where = ".".join(path)
            message = f"layer {where}: " + message.replace("params['", f"params['{where}.")
        super().__init__(message)

    def at(self, name: str) -> ContractError:
        """The same error one level up: inside child `name` of a combinator."""
        return ContractError(self.base, (name, *self.path))


def _autocast_pair(a: torch.dtype, b: torch.dtype, device_type: str) -> bool:
    """True when a dtype mismatch is autocast's doing: both floating, under an autocast region.

    Inside `torch.autocast`, activations come out in the lower precision while params stay
    float32; the ops cast for themselves, so the contract must not refuse them.
    """
    if not (a.is_floating_point and b.is_floating_point):
        return False
    try:
        return torch.is_autocast_enabled(device_type)
    except (TypeError, RuntimeError):  # a device type autocast does not know (meta)
        return False


class _Switch(threading.local):
    enabled = os.environ.get("TORCHFN_CHECKS", "1").strip().lower() not in ("0", "false", "no", "off")


_switch = _Switch()


def checks_enabled() -> bool:
    return _switch.enabled


@contextmanager
def checks(enabled: bool) -> Iterator[None]:
    """Turn contract checking on or off inside a `with` block (per thread)."""
    before = _switch.enabled
    _switch.enabled = enabled
    try:
        yield
    finally:
        _switch.enabled = before


# -- shape specs ---------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """A parsed shape string: fixed dims before and after at most one variadic part."""

    text: str
    before: tuple[int | str, ...]
    variadic: str | None  # None: no variadic part; "": anonymous `...`; else the name
    after: tuple[int | str, ...]
    dtypes: tuple[str, ...] | None = None  # allowed dtype names ("float32", ...), from jaxtyping
    optional: bool = False  # a dict entry that may be absent ("bias?")

    @property
    def rank(self) -> int:
        return len(self.before) + len(self.after)


def parse(text: str, dtypes: tuple[str, ...] | None = None, optional: bool = False) -> Shape:
    """Parse a jaxtyping-style shape string; raise ValueError for what we do not support."""
    before: list[int | str] = []
    after: list[int | str] = []
    variadic: str | None = None
    for token in text.split():
        if token == "..." or token.startswith("*"):
            if variadic is not None:
                raise ValueError(f"shape {text!r}: at most one variadic part ('...' or '*name')")
            name = "" if token == "..." else token[1:]
            if name and not name.isidentifier():
                raise ValueError(f"shape {text!r}: {token!r} is not a name")
            variadic = "" if name in ("", "_") else name
            continue
        if "=" in token:  # jaxtyping's documentation-only "rows=4": unchecked
            dim: int | str = "_"
        elif token.isdigit():
            dim = int(token)
        elif token == "_" or token.isidentifier():
            dim = token
        else:
            raise ValueError(f"shape {text!r}: {token!r} is not supported (use names, sizes, _, ... or *name)")
        (after if variadic is not None else before).append(dim)
    return Shape(text, tuple(before), variadic, tuple(after), dtypes, optional)


def _as_spec(spec: Any) -> Shape | dict[str, Any]:
    if isinstance(spec, Shape):
        return spec
    if isinstance(spec, str):
        return parse(spec)
    if isinstance(spec, Mapping):
        out: dict[str, Any] = {}
        for key, sub in spec.items():
            optional = key.endswith("?")
            compiled = _as_spec(sub)
            if optional:
                if not isinstance(compiled, Shape):
                    raise ValueError(f"{key!r}: only a tensor entry can be optional")
                compiled = dataclasses.replace(compiled, optional=True)
            out[key.rstrip("?")] = compiled
        return out
    dim_str = getattr(spec, "dim_str", None)  # a jaxtyping annotation, e.g. Float[Tensor, "b n"]
    if isinstance(dim_str, str):
        dtypes = getattr(spec, "dtypes", None)
        return parse(dim_str, tuple(dtypes) if dtypes else None)
    raise TypeError(f"not a shape contract: {spec!r} (give a string such as 'batch d_in')")


# -- checking --------------------------------------------------------------------------


class _Call:
    """The bindings made during one call: dimension sizes, the dtype and the device."""

    __slots__ = ("fn", "dims", "origin", "dtype", "dtype_from", "device", "device_from", "rule_dtype", "rule_device")

    def __init__(self, fn: str, rule_dtype: str | None, rule_device: str | None) -> None:
        self.fn = fn
        self.dims: dict[str, Any] = {}
        self.origin: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.dtype: torch.dtype | None = None
        self.dtype_from = ""
        self.device: torch.device | None = None
        self.device_from = ""
        self.rule_dtype = rule_dtype
        self.rule_device = rule_device

    def fail(self, message: str) -> None:
        raise ContractError(f"{self.fn}: {message}")

    def check(self, spec: Shape | dict[str, Any], value: Any, where: str) -> None:
        if isinstance(spec, dict):
            if not isinstance(value, Mapping):
                self.fail(f"{where} should be a dict of tensors, got {type(value).__name__}")
            for key, sub in spec.items():
                if key not in value:
                    if isinstance(sub, Shape) and sub.optional:
                        continue
                    self.fail(f"{where} has no entry {key!r} (it has {sorted(value)})")
                self.check(sub, value[key], f"{where}[{key!r}]")
            return
        if not isinstance(value, torch.Tensor):
            self.fail(f"{where} should be a tensor, got {type(value).__name__}")
        self._shape(spec, value, where)
        self._dtype(spec, value, where)
        if self.rule_device == "same":
            if self.device is None:
                self.device, self.device_from = value.device, where
            elif value.device != self.device:
                self.fail(f"{where} is on {value.device} but {self.device_from} is on {self.device}; "
                          f"move them to one device (params = torchfn.to_device(params, ...))")

    def _shape(self, spec: Shape, value: torch.Tensor, where: str) -> None:
        shape = tuple(value.shape)
        n = len(shape)
        if n < spec.rank or (spec.variadic is None and n != spec.rank):
            least = "at least " if spec.variadic is not None else ""
            self.fail(f"{where} has {n} dimension{'s' * (n != 1)} {shape}, expected {least}{spec.rank} "
                      f"({spec.text!r})")
        for axis, dim in enumerate(spec.before):
            self._dim(spec, dim, shape[axis], axis, shape, where)
        offset = n - len(spec.after)
        for i, dim in enumerate(spec.after):
            self._dim(spec, dim, shape[offset + i], offset + i, shape, where)
        if spec.variadic:
            self._dim(spec, "*" + spec.variadic, shape[len(spec.before):offset], None, shape, where)

    def _dim(self, spec: Shape, dim: int | str, size: Any, axis: int | None, shape: tuple[int, ...], where: str) -> None:
        if dim == "_":
            return
        if isinstance(dim, int):
            if size != dim:
                self.fail(f"axis {axis} of {where} must be {dim}, got {size} "
                          f"({where} has shape {shape}, expected {spec.text!r})")
            return
        bound = self.dims.get(dim)
        if bound is None:
            self.dims[dim] = size
            self.origin[dim] = (where, shape)
        elif bound != size:
            name = dim.lstrip("*")
            kind = "dimensions" if dim.startswith("*") else "dimension"
            src, src_shape = self.origin[dim]
            self.fail(f"{kind} '{name}' of {where} is {_size(size)}, but {src} has {name} = {_size(bound)}\n"
                      f"  ({where} has shape {shape}, expected {spec.text!r}; {src} has shape {src_shape})")

    def _dtype(self, spec: Shape, value: torch.Tensor, where: str) -> None:
        dtype = value.dtype
        if spec.dtypes is not None:
            name = str(dtype).removeprefix("torch.")
            if name not in spec.dtypes:
                self.fail(f"{where} has dtype {name}, expected one of {', '.join(spec.dtypes)}")
        if self.rule_dtype == "same" and not (spec.dtypes is not None and not dtype.is_floating_point):
            if self.dtype is None:
                self.dtype, self.dtype_from = dtype, where
            elif dtype != self.dtype and not _autocast_pair(dtype, self.dtype, value.device.type):
                self.fail(f"{where} is {str(dtype).removeprefix('torch.')} but {self.dtype_from} is "
                          f"{str(self.dtype).removeprefix('torch.')}; convert one (x.to(torch.float32))")
        elif self.rule_dtype == "floating" and not dtype.is_floating_point:
            self.fail(f"{where} has dtype {str(dtype).removeprefix('torch.')}, expected a floating dtype")


_MISSING = object()
_EMPTY = inspect.Parameter.empty


def _flatten_plan(plan: list[tuple[str, Any, int | None, Any]]) -> list[tuple]:
    """One row per tensor: (arg index, arg name, default, dict path, optional, shape checks)."""
    rows: list[tuple] = []

    def walk(arg: str, spec: Any, index: int | None, default: Any, path: tuple[str, ...]) -> None:
        if isinstance(spec, dict):
            for key, sub in spec.items():
                walk(arg, sub, index, default, path + (key,))
            return
        before, after = spec.before, spec.after
        fixed = [(i, d) for i, d in enumerate(before) if d != "_"]
        fixed += [(i - len(after), d) for i, d in enumerate(after) if d != "_"]
        checks = (spec.rank, spec.variadic, len(before), len(after), tuple(fixed), spec.dtypes)
        rows.append((index, arg, default, path, spec.optional, checks))

    for arg, spec, index, default in plan:
        walk(arg, spec, index, default, ())
    return rows


def _fits(value: Any, checks: tuple, dims: dict[str, Any], first: list[Any], dtype_rule: str | None,
          device_rule: str | None) -> bool:
    """The fast check of one tensor against its compiled shape; binds dims, the dtype and the device."""
    if not isinstance(value, torch.Tensor):
        return False
    rank, variadic, n_before, n_after, fixed, dtypes = checks
    shape = value.shape
    n = len(shape)
    if n != rank and (variadic is None or n < rank):
        return False
    for pos, dim in fixed:
        size = shape[pos]
        if dim.__class__ is int:
            if size != dim:
                return False
        else:
            bound = dims.get(dim)
            if bound is None:
                dims[dim] = size
            elif bound != size:
                return False
    if variadic:
        key = "*" + variadic
        sizes = tuple(shape[n_before:n - n_after])
        bound = dims.get(key)
        if bound is None:
            dims[key] = sizes
        elif bound != sizes:
            return False
    if dtypes is not None or dtype_rule is not None:
        dt = value.dtype
        if dtypes is not None and str(dt).removeprefix("torch.") not in dtypes:
            return False
        if dtype_rule == "same" and not (dtypes is not None and not dt.is_floating_point):
            # An index pinned as Int (jaxtyping) beside a Float table is what the contract says.
            if first[0] is None:
                first[0] = dt
            elif dt != first[0] and not _autocast_pair(dt, first[0], value.device.type):
                return False
        elif dtype_rule == "floating" and not dt.is_floating_point:
            return False
    if device_rule == "same":
        dev = value.device
        if first[1] is None:
            first[1] = dev
        elif dev != first[1]:
            return False
    return True


def _size(size: Any) -> str:
    return str(tuple(size)) if isinstance(size, tuple) else str(size)


def contract(
    *,
    returns: Any = None,
    dtype: str | None = "same",
    device: str | None = "same",
    name: str | None = None,
    **args: Any,
) -> Callable[[F], F]:
    """Check the shapes (and dtype, device) of a function's arguments and result at call time.

    `args` map argument names to a shape string, a jaxtyping annotation, or for a dict of
    tensors (params) a dict of those; a key ending in "?" may be absent. Arguments with
    a jaxtyping annotation and no explicit spec are checked too. `dtype="same"` requires
    one dtype across the checked tensors ("floating": any floating dtype; None: no check);
    `device="same"` requires one device.
    """
    if dtype not in ("same", "floating", None) or device not in ("same", None):
        raise ValueError("contract: dtype is 'same', 'floating' or None; device is 'same' or None")

    def decorate(fn: F) -> F:
        try:  # annotations may be strings (`from __future__ import annotations`): evaluate them
            sig = inspect.signature(fn, eval_str=True)
        except Exception:
            sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        specs: dict[str, Any] = {}
        for arg, spec in args.items():
            if arg not in sig.parameters:
                raise TypeError(f"contract on {fn.__qualname__}: it has no argument {arg!r}")
            specs[arg] = _as_spec(spec)
        for p in params:
            if p.name not in specs and hasattr(p.annotation, "dim_str"):
                specs[p.name] = _as_spec(p.annotation)
        result = _as_spec(returns) if returns is not None else (
            _as_spec(sig.return_annotation) if hasattr(sig.return_annotation, "dim_str") else None)
        # Where each argument sits, computed once: binding the signature per call costs too much.
        plan = []
        for arg, spec in specs.items():
            index = next(i for i, p in enumerate(params) if p.name == arg)
            positional = params[index].kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD)
            default = params[index].default
            plan.append((arg, spec, index if positional else None, default))
        label = name or fn.__qualname__

        flat = _flatten_plan(plan)
        result_checks = _flatten_plan([("", result, None, None)])[0][5] if isinstance(result, Shape) else None

        def explain(a: tuple, kw: dict, out: Any = _MISSING) -> None:
            """The slow path: redo the checks, keeping track of names, to raise the precise error."""
            call = _Call(label, dtype, device)
            for arg, spec, index, default in plan:
                value = a[index] if index is not None and index < len(a) else kw.get(arg, default)
                if value is None and default is None:
                    continue
                call.check(spec, value, arg)
            if out is not _MISSING and result is not None:
                call.check(result, out, "the result")

        @functools.wraps(fn)
        def checked(*a: Any, **kw: Any) -> Any:
            if not _switch.enabled:
                return fn(*a, **kw)
            # The fast path only answers "all good?"; messages are built by `explain` on failure.
            dims: dict[str, Any] = {}
            first: list[Any] = [None, None]  # the dtype and device every tensor must share
            for index, arg, default, path, optional, checks in flat:
                if index is not None and index < len(a):
                    value = a[index]
                elif arg in kw:
                    value = kw[arg]
                elif default is not _EMPTY:
                    value = default
                else:
                    return fn(*a, **kw)  # a missing argument: let Python say so
                if value is None and default is None and not path:
                    continue
                for key in path:
                    value = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
                if value is _MISSING and optional:
                    continue
                if not _fits(value, checks, dims, first, dtype, device):
                    explain(a, kw)  # raises; it returns only if the fast path was stricter than the
                    return fn(*a, **kw)  # full check (params in a Mapping that is not a dict)
            out = fn(*a, **kw)
            if result is not None and (result_checks is None
                                       or not _fits(out, result_checks, dims, first, dtype, device)):
                explain(a, kw, out)
            return out

        checked.__contract__ = {"args": specs, "returns": result}  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]

    return decorate

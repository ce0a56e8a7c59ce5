"""Pytrees of parameters, by key path: torch's own pytrees (`torch.utils._pytree`).

A tree is whatever torch.func accepts: dicts, lists, tuples, namedtuples, OrderedDicts,
and dataclasses registered with `register_dataclass`. Every function that takes two
trees matches their leaves by key path ("0.weight"), never by position alone, and a
difference in structure is an error that names the first differing path. `None` is a
leaf (a parameter without a gradient).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

Tree = Any


def register_dataclass(cls: type) -> type:
    """Make a dataclass a tree node (its fields are the children), as torch.func needs too."""
    pytree.register_dataclass(cls)
    return cls


def _entry(k: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def path_str(path: tuple) -> str:
    """A key path as the dotted name nn.Module.state_dict uses: "layers.2.weight"."""
    return ".".join(_entry(k) for k in path) or "<root>"


# -- a fast path for plain trees ---------------------------------------------------------
# torch's Python pytrees cost ~1 µs per node, several times a step; params are almost always
# plain dicts/lists/tuples of tensors, for which a direct recursion with a hashable
# signature (nested tuples of keys) gives the same leaves, in the same order, far cheaper.
# Anything else (namedtuples, dataclasses, OrderedDict...) takes torch's path.

class _NotPlain(Exception):
    pass


def _sig(tree: Any, out: list[Any]) -> Any:
    t = type(tree)
    if t is dict:
        return ("d", tuple(tree), tuple([_sig(v, out) for v in tree.values()]))
    if t is list or t is tuple:
        return ("l" if t is list else "t", tuple([_sig(v, out) for v in tree]))
    if t not in _LEAF_TYPES and not isinstance(tree, torch.Tensor) \
            and pytree._get_node_type(tree) in pytree.SUPPORTED_NODES:
        raise _NotPlain
    out.append(tree)
    return None


_LEAF_TYPES = frozenset({type(None), int, float, bool, str})


def flatten(tree: Tree) -> tuple[list[Any], Any]:
    """(leaves, structure): the structure compares with == and rebuilds with `unflatten`."""
    out: list[Any] = []
    try:
        return out, ("plain", _sig(tree, out))
    except _NotPlain:
        ls, spec = pytree.tree_flatten(tree)
        return ls, ("torch", spec)


def _build(sig: Any, it: Any) -> Any:
    if sig is None:
        return next(it)
    kind = sig[0]
    if kind == "d":
        return {k: _build(s, it) for k, s in zip(sig[1], sig[2])}
    items = [_build(s, it) for s in sig[1]]
    return items if kind == "l" else tuple(items)


def unflatten(structure: Any, new_leaves: list[Any]) -> Tree:
    kind, spec = structure
    if kind == "torch":
        return pytree.tree_unflatten(list(new_leaves), spec)
    return _build(spec, iter(new_leaves))


def leaves(tree: Tree) -> list[Any]:
    """The leaves in torch's pytree order (dict insertion order, then sequence order)."""
    return flatten(tree)[0]


def with_paths(tree: Tree) -> list[tuple[str, Any]]:
    """[("0.weight", leaf), ...] in leaf order."""
    return [(path_str(p), v) for p, v in pytree.tree_leaves_with_path(tree)]


def unflatten_like(tree: Tree, new_leaves: list[Any]) -> Tree:
    """A tree shaped like `tree` whose leaves are `new_leaves`, in `leaves(tree)` order."""
    old, structure = flatten(tree)
    if len(old) != len(new_leaves):
        raise ValueError(f"the tree has {len(old)} leaves but {len(new_leaves)} were given")
    return unflatten(structure, new_leaves)


def leaves_like(reference: Tree, other: Tree, what: str = "the second tree") -> list[Any]:
    """`other`'s leaves in `reference`'s leaf order, matched by key path.

    Dicts with the same keys in another order are matched by key; any other difference
    raises ValueError naming the first key path that differs.
    """
    _, ref_spec = flatten(reference)
    other_leaves, other_spec = flatten(other)
    if ref_spec == other_spec:  # the common case, and cheap
        return other_leaves
    ref_paths = [path_str(p) for p, _ in pytree.tree_leaves_with_path(reference)]
    by_path = {path_str(p): v for p, v in pytree.tree_leaves_with_path(other)}
    missing = [p for p in ref_paths if p not in by_path]
    extra = [p for p in by_path if p not in set(ref_paths)]
    if missing or extra:
        first = missing[0] if missing else extra[0]
        parts = []
        if missing:
            parts.append(f"{what} has no {missing[0]!r}" + (f" (and {len(missing) - 1} more missing)" if len(missing) > 1 else ""))
        if extra:
            parts.append(f"{what} has {extra[0]!r}, which the reference lacks"
                         + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
        raise ValueError(f"tree structures differ at {first!r}: " + "; ".join(parts))
    if len(by_path) != len(other_leaves):
        raise ValueError(f"{what} has two leaves with the same dotted path; paths must be unique")
    # Same key paths in another order or container type: check container kinds along the way.
    return [by_path[p] for p in ref_paths]


def check_same_structure(a: Tree, b: Tree, what: str = "the second tree") -> None:
    """Raise ValueError naming the first differing key path unless `a` and `b` match by key."""
    leaves_like(a, b, what)


def tree_map(fn: Callable[..., Any], tree: Tree, *rest: Tree) -> Tree:
    """Apply `fn` leaf-wise; the other trees are matched to `tree` by key path."""
    mine, structure = flatten(tree)
    if not rest:
        return unflatten(structure, [fn(x) for x in mine])
    others = [leaves_like(tree, t, f"tree {i + 2}") for i, t in enumerate(rest)]
    return unflatten(structure, [fn(*xs) for xs in zip(mine, *others)])


def flatten_paths(tree: Tree, prefix: str = "") -> dict[str, Any]:
    """{"0.weight": leaf, ...}: the dotted names nn.Module.state_dict uses."""
    out: dict[str, Any] = {}
    for path, value in pytree.tree_leaves_with_path(tree):
        names = [_entry(k) for k in path]
        bad = next((n for n in names if "." in n), None)
        if bad is not None:
            raise ValueError(f"parameter name {bad!r} contains '.', which dotted paths cannot represent")
        name = ".".join(names)
        out[f"{prefix}.{name}" if prefix and name else (prefix or name)] = value
    return out


def _natural(key: str) -> tuple:
    # "2" before "10": the order nn.Sequential and torchfn.sequential create children in.
    return (0, int(key)) if key.isdigit() else (1, 0)  # others keep their order (stable sort)


def unflatten_paths(flat: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `flatten_paths` for dict trees: {"0.weight": w} -> {"0": {"weight": w}}.

    Children come out in natural order ("2" before "10"), whatever order `flat` has:
    safetensors files list their tensors sorted as strings.
    """
    root: dict[str, Any] = {}
    for path, value in flat.items():
        node = root
        *parents, last = path.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{path!r} goes below {part!r}, which is already a tensor")
            node = child
        if last in node:
            raise ValueError(f"{path!r} is given twice")
        node[last] = value
    return _sorted(root)


def _sorted(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    return {k: _sorted(node[k]) for k in sorted(node, key=_natural)}

"""Pytrees of parameters: nested dicts (and lists/tuples) whose leaves are tensors.

Kept tiny on purpose: torchfn's params are plain data, so these few functions are all
the structure code needs. Order is insertion order, which `to_state_dict` relies on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Tree = Any  # dict[str, Tree] | list[Tree] | tuple[Tree, ...] | leaf


def leaves(tree: Tree) -> list[Any]:
    """The leaves in a fixed order (dict insertion order, then list order)."""
    out: list[Any] = []
    _collect(tree, out)
    return out


def _collect(tree: Tree, out: list[Any]) -> None:
    if isinstance(tree, dict):
        for value in tree.values():
            _collect(value, out)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            _collect(value, out)
    else:
        out.append(tree)


def unflatten_like(tree: Tree, new_leaves: list[Any]) -> Tree:
    """A tree shaped like `tree` whose leaves are `new_leaves`, in `leaves(tree)` order."""
    it = iter(new_leaves)
    result = _rebuild(tree, it)
    if next(it, _END) is not _END:
        raise ValueError("more leaves than the tree has places for")
    return result


_END = object()


def _rebuild(tree: Tree, it: Iterator[Any]) -> Tree:
    if isinstance(tree, dict):
        return {k: _rebuild(v, it) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rebuild(v, it) for v in tree)
    value = next(it, _END)
    if value is _END:
        raise ValueError("fewer leaves than the tree has places for")
    return value


def tree_map(fn: Callable[..., Any], tree: Tree, *rest: Tree) -> Tree:
    """Apply `fn` leaf-wise; the other trees must have the same structure."""
    if not rest:
        return unflatten_like(tree, [fn(x) for x in leaves(tree)])
    others = [leaves(t) for t in rest]
    mine = leaves(tree)
    if any(len(o) != len(mine) for o in others):
        raise ValueError("tree_map: the trees have different numbers of leaves")
    return unflatten_like(tree, [fn(*xs) for xs in zip(mine, *others)])


def flatten_paths(tree: Tree, prefix: str = "") -> dict[str, Any]:
    """{"0.weight": leaf, ...}: the dotted names nn.Module.state_dict uses."""
    out: dict[str, Any] = {}
    _paths(tree, prefix, out)
    return out


def _paths(tree: Tree, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(tree))
    else:
        out[prefix] = tree
        return
    for key, value in items:
        key = str(key)
        if "." in key:
            raise ValueError(f"parameter name {key!r} contains '.', which dotted paths cannot represent")
        _paths(value, f"{prefix}.{key}" if prefix else key, out)


def unflatten_paths(flat: dict[str, Any]) -> dict[str, Any]:
    """The inverse of `flatten_paths` for dict trees: {"0.weight": w} -> {"0": {"weight": w}}."""
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
    return root

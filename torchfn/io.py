"""Interop with `nn.Module` state dicts, and checkpoints on disk.

Checkpoints are safetensors files (docs/torchfn.md says why): a flat name → tensor table
that loads without running code, maps the file instead of unpickling it, and is read
by the C++, Rust (tch-rs's `safetensors` crate) and Haskell sides too. Tensor names are the
state_dict's dotted paths ("0.weight"). Whatever else the tree holds — the tree's shape,
the optimizer's step count, an epoch number — goes into the header's metadata as JSON
under "torchfn.tree", so `load` returns exactly the tree `save` was given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import torch

from torchfn.tree import flatten_paths, unflatten_like, unflatten_paths

Params = Any
FORMAT = "torchfn/1"


def to_state_dict(params: Params) -> dict[str, torch.Tensor]:
    """{"0.weight": tensor, ...}: ready for `module.load_state_dict` (which copies)."""
    flat = flatten_paths(params)
    for path, value in flat.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"params[{path!r}] is a {type(value).__name__}, not a tensor")
    return flat


def from_state_dict(state_dict: Mapping[str, torch.Tensor], like: Params | None = None, *,
                    copy: bool = True) -> Params:
    """Params from `module.state_dict()`: copies, so training either side leaves the other alone.

    With `like` (e.g. `model.init(0)`), the result has exactly its structure — the empty
    entries of parameter-free layers included — and any missing, unexpected or
    wrongly-shaped tensor is named in the error.
    """
    flat = {k: v.detach().clone() if copy else v for k, v in state_dict.items()}
    if like is None:
        return unflatten_paths(flat)
    want = flatten_paths(like)
    missing = [k for k in want if k not in flat]
    unexpected = [k for k in flat if k not in want]
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if unexpected:
            parts.append(f"unexpected {unexpected}")
        raise ValueError("state_dict does not fit the params: " + "; ".join(parts))
    for k, template in want.items():
        if isinstance(template, torch.Tensor) and tuple(flat[k].shape) != tuple(template.shape):
            raise ValueError(f"state_dict[{k!r}] has shape {tuple(flat[k].shape)}, "
                             f"the params expect {tuple(template.shape)}")
    return unflatten_like(like, [flat[k] for k in want])


# -- checkpoints ----------------------------------------------------------------------


def _skeleton(tree: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(tree, torch.Tensor):
        name = path or "_"
        tensors[name] = tree
        return {"$tensor": name}
    if isinstance(tree, Mapping):
        out = {}
        for key, value in tree.items():
            if not isinstance(key, str) or "." in key or key.startswith("$"):
                raise ValueError(f"cannot save key {key!r}: keys must be strings without '.' or a leading '$'")
            out[key] = _skeleton(value, f"{path}.{key}" if path else key, tensors)
        return out
    if isinstance(tree, (list, tuple)):
        items = [_skeleton(v, f"{path}.{i}" if path else str(i), tensors) for i, v in enumerate(tree)]
        return {"$tuple": items} if isinstance(tree, tuple) else items
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise TypeError(f"cannot save {type(tree).__name__} at {path or 'the top'}: "
                    "checkpoints hold tensors, numbers, strings, dicts, lists and tuples")


def _rebuild(node: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(node, dict):
        if "$tensor" in node:
            return tensors[node["$tensor"]]
        if "$tuple" in node:
            return tuple(_rebuild(v, tensors) for v in node["$tuple"])
        return {k: _rebuild(v, tensors) for k, v in node.items()}
    if isinstance(node, list):
        return [_rebuild(v, tensors) for v in node]
    return node


def save(path: str | os.PathLike[str], tree: Any, metadata: Mapping[str, str] | None = None) -> None:
    """Write a tree (params, or {"params": ..., "opt_state": ..., "epoch": 3}) to a safetensors file."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    skeleton = _skeleton(tree, "", tensors)
    seen: set[tuple[int, int]] = set()
    ready = {}
    for name, t in tensors.items():
        t = t.detach()
        # safetensors refuses tensors that share memory; a tree may hold one tensor twice.
        ident = (t.untyped_storage().data_ptr(), t.storage_offset())
        ready[name] = t.contiguous().clone() if ident in seen else t.contiguous()
        seen.add(ident)
    meta = {"format": FORMAT, "torchfn.tree": json.dumps(skeleton)}
    clash = sorted(set(meta) & set(metadata or {}))
    if clash:  # overwriting them would write a checkpoint that `load` cannot rebuild
        raise ValueError(f"metadata keys {clash} are torchfn's own; choose other names")
    meta.update(metadata or {})
    tmp = f"{os.fspath(path)}.tmp"
    save_file(ready, tmp, metadata=meta)
    os.replace(tmp, path)  # a crash mid-write never leaves a torn checkpoint behind


def load(path: str | os.PathLike[str], device: torch.device | str = "cpu", *, like: Any = None) -> Any:
    """The tree `save` wrote, in the order it had.

    A plain safetensors file (a state_dict written by another tool) gives nested dicts by
    dotted name, children in natural order ("2" before "10", as the model made them, not
    the file's string order). With `like` (e.g. `model.init(0)`) the result has exactly
    that structure, and a missing, unexpected or wrongly-shaped tensor is named.
    """
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="pt", device=str(device)) as fh:
        meta = fh.metadata() or {}
        tensors = {name: fh.get_tensor(name) for name in fh.keys()}
    skeleton = meta.get("torchfn.tree")
    if like is not None:
        tree = unflatten_paths(tensors) if skeleton is None else _rebuild(json.loads(skeleton), tensors)
        return from_state_dict(flatten_paths(tree), like=like, copy=False)
    if skeleton is None:
        return unflatten_paths(tensors)
    return _rebuild(json.loads(skeleton), tensors)


def metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The header's metadata (what `save(..., metadata=)` stored, plus torchfn's own keys)."""
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="pt") as fh:
        return dict(fh.metadata() or {})
